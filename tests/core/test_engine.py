"""The compiled E-step (explorer.core._compiled.gmm) against the numpy reference kernels, and the state it feeds."""

import subprocess
import sys
from dataclasses import fields, replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.core.gaussians.gaussian import DegenerateCovarianceError, precision_and_logdet
from explorer.core.mixtures import em_gmm
from explorer.core.mixtures.suffstats import SufficientStatistics, m_step
from explorer.core.validation import BadInputError

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.filterwarnings("ignore:Stopped after max_iter")


def _mixture(n=600, d=6, seed=0, rate=0.3, structured=False, sep=4.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) @ rng.normal(size=(d, d)) / np.sqrt(d)
    X[: n // 3] += sep
    X[n // 3 : 2 * n // 3] -= sep
    if structured:  # a few block patterns (e.g. a sensor group off), many rows each
        blocks = [np.zeros(d, bool), np.r_[np.ones(2, bool), np.zeros(d - 2, bool)],
                  np.r_[np.zeros(d - 3, bool), np.ones(3, bool)], np.arange(d) % 2 == 0]
        miss = np.array(blocks)[rng.integers(len(blocks), size=n)]
    else:
        miss = rng.random((n, d)) < rate
    miss[:3] = True  # rows with nothing observed
    miss[3, :-1] = True  # a row with one observed value
    return np.where(miss, np.nan, X)


def _rel(a, b):
    return np.abs(np.asarray(a) - np.asarray(b)).max() / max(np.abs(np.asarray(b)).max(), 1e-300)


def _run(data, config, state, n_steps):
    out = [state]
    for _ in range(n_steps):
        out.append(em_gmm.step(out[-1], data, config))
    return out


@pytest.mark.parametrize("structured", [False, True])
@pytest.mark.parametrize("K", [1, 3])
@pytest.mark.parametrize("prior", [None, "auto"])
def test_compiled_equals_numpy_over_steps(structured, K, prior):
    data = em_gmm.prepare(_mixture(structured=structured, seed=K))
    numpy_cfg = em_gmm.EMConfig(n_components=K, prior=prior, strategy="numpy")
    compiled_cfg = replace(numpy_cfg, strategy="compiled")
    start = em_gmm.init(data, numpy_cfg, np.random.default_rng(0))
    a = _run(data, numpy_cfg, start, 4)
    b = _run(data, compiled_cfg, em_gmm.init_from_parameters(data, compiled_cfg, start.weights, start.means,
                                                             start.covariances) if prior is None else start, 4)
    for sa, sb in zip(a[1:], b[1:]):
        assert _rel(sb.weights, sa.weights) < 1e-10
        assert _rel(sb.means, sa.means) < 1e-10
        assert _rel(sb.covariances, sa.covariances) < 1e-10
        assert sb.log_likelihood == pytest.approx(sa.log_likelihood, rel=1e-10)
        assert sb.objective == pytest.approx(sa.objective, rel=1e-10)
        np.testing.assert_allclose(sb.resp, sa.resp, rtol=1e-9, atol=1e-12)
        assert sb.stats.n_rows == sa.stats.n_rows == data.n_fit
        # the history's entropy and hard counts: summed by the compiled pass, from resp by numpy (rows with nothing
        # observed left out by both)
        assert sa.resp_summary is None and sb.resp_summary is not None
        snap_a, snap_b = em_gmm.snapshot(sa, data, numpy_cfg), em_gmm.snapshot(sb, data, compiled_cfg)
        assert snap_b["resp_entropy"] == pytest.approx(snap_a["resp_entropy"], rel=1e-9, abs=1e-12)
        np.testing.assert_array_equal(snap_b["hard_counts"], snap_a["hard_counts"])
        assert snap_b["hard_counts"].sum() == data.n_fit
        if K > 1:
            assert snap_a["resp_entropy"] > 1e-5  # a real mixture of responsibilities, not 0 = 0


def test_compiled_equals_numpy_on_long_missing_blocks():  # runs with m >= M_SWITCH: one component at a time
    from explorer.core._compiled import gmm as _kernels

    data = em_gmm.prepare(_mixture(n=800, d=18, seed=13, rate=0.65))
    assert np.mean(data.patterns.missing.sum(axis=1) >= _kernels.M_SWITCH) > 0.3
    numpy_cfg = em_gmm.EMConfig(n_components=3, strategy="numpy", reg_covar=1e-3)
    start = em_gmm.init(data, numpy_cfg, np.random.default_rng(0))
    a = _run(data, numpy_cfg, start, 3)[-1]
    b = _run(data, replace(numpy_cfg, strategy="compiled"), start, 3)[-1]
    assert _rel(b.covariances, a.covariances) < 1e-10 and _rel(b.means, a.means) < 1e-10
    assert b.log_likelihood == pytest.approx(a.log_likelihood, rel=1e-10)


@pytest.mark.parametrize("variant", ["naive", "mean_impute"])
def test_compiled_equals_numpy_for_the_variants(variant):
    data = em_gmm.prepare(_mixture(seed=5))
    numpy_cfg = em_gmm.EMConfig(n_components=3, variant=variant, strategy="numpy")
    start = em_gmm.init(data, numpy_cfg, np.random.default_rng(0))
    a = _run(data, numpy_cfg, start, 3)[-1]
    b = _run(data, replace(numpy_cfg, strategy="compiled"), start, 3)[-1]
    assert _rel(b.covariances, a.covariances) < 1e-10 and _rel(b.means, a.means) < 1e-10
    assert b.log_likelihood == pytest.approx(a.log_likelihood, rel=1e-10)


def test_skipping_negligible_responsibility_mass_changes_nothing():
    from explorer.core._compiled import gmm as _kernels

    # separated, one row per pattern with about 15 missing entries each (the pass adds the pairs that take part, the
    # rest is left to _add_conditional's rule): most of those skip
    data = em_gmm.prepare(_mixture(n=1500, d=30, seed=3, sep=12.0, rate=0.5))
    config = em_gmm.EMConfig(n_components=3, strategy="compiled")
    state = em_gmm.fit(data, replace(config, max_iter=5, tol=0.0), np.random.default_rng(0)).state
    ws = em_gmm.workspace(data, config)
    precision, logdet = precision_and_logdet(np.asarray(state.covariances))
    results = {}
    for rtol in (_kernels.SKIP_RTOL, -1.0):  # -1: add every pair
        nk, first, second, ll, *_ = _kernels.estep(ws, state.weights, state.means, precision, logdet, skip_rtol=rtol)
        stats = SufficientStatistics(nk=nk, shift=np.array(state.means), first=first, second=second,
                                     log_likelihood=ll, n_rows=data.n_fit)
        results[rtol] = (m_step(stats, reg_covar=config.reg_covar), ws.last_pairs_added)
    (skip, n_skip), (full, n_full) = results[_kernels.SKIP_RTOL], results[-1.0]
    assert n_full > 1000 and n_skip < 0.6 * n_full  # the skip does something here
    for x, y in zip(skip, full):
        assert _rel(x, y) < 1e-10


@pytest.mark.parametrize("n_missing", [4, 11])  # short blocks (all components at once) and long ones (one at a time)
def test_runs_across_blocks_and_the_conditional_covariances_of_the_pass(n_missing):
    """Small blocks cut the runs of a few structured patterns (many rows each) in parts: the conditional covariances
    the pass adds per part, and what it leaves for after the pass, sum to those of the numpy kernels."""
    from explorer.core._compiled import gmm as _kernels

    rng = np.random.default_rng(11)
    X = _mixture(n=900, d=14, seed=11, sep=1.5)  # overlapping: every component takes part
    X[np.isnan(X)] = 0.0
    blocks = [np.isin(np.arange(14), rng.choice(14, n_missing, replace=False)) for _ in range(3)] + [np.zeros(14, bool)]
    X[np.array(blocks)[rng.integers(4, size=900)]] = np.nan
    data = em_gmm.prepare(X)
    numpy_cfg = em_gmm.EMConfig(n_components=3, strategy="numpy")
    config = replace(numpy_cfg, strategy="compiled")
    ws = _kernels.Workspace(em_gmm._layout(data, config), 3, block_rows=64)
    data.cache[("workspace", False, 3)] = ws
    assert ws.layout.n_runs < 10 and ws.block_rows == 64  # runs of ~200 rows over several blocks
    start = em_gmm.init(data, numpy_cfg, np.random.default_rng(0))
    a = _run(data, numpy_cfg, start, 3)[-1]
    b = _run(data, config, start, 3)[-1]
    assert em_gmm.workspace(data, config) is ws and ws.Wd.sum() > 0  # the pass added conditional covariances
    assert _rel(b.covariances, a.covariances) < 1e-10 and _rel(b.means, a.means) < 1e-10
    assert b.log_likelihood == pytest.approx(a.log_likelihood, rel=1e-10)


@pytest.mark.parametrize("sep", [1.0, 6.0])
def test_runs_of_many_rows_solved_in_chunks_equal_numpy(sep):
    """Runs with fewer than M_SWITCH missing entries and at least BATCH_MIN_ROWS rows are solved CHUNK_ROWS rows at
    a time (rows innermost), shorter runs one row at a time: runs of every kind here (one cut by chunks, one of
    exactly BATCH_MIN_ROWS rows, some of a few rows, single rows in the lanes), against numpy's kernels."""
    from explorer.core._compiled import gmm as _kernels

    rng = np.random.default_rng(5)
    d = 8
    X = _mixture(n=400, d=d, seed=5, sep=sep)
    X[np.isnan(X)] = 0.0
    sizes = [2 * _kernels.CHUNK_ROWS + 9, _kernels.BATCH_MIN_ROWS, _kernels.BATCH_MIN_ROWS - 1, 3, 2]
    row = 0
    for size, m in zip(sizes, [3, 1, 5, 2, 4]):
        X[row:row + size, rng.choice(d, m, replace=False)] = np.nan
        row += size
    X[row:][rng.random((400 - row, d)) < 0.3] = np.nan  # single rows mostly (the lanes)
    data = em_gmm.prepare(X)
    numpy_cfg = em_gmm.EMConfig(n_components=3, strategy="numpy", reg_covar=1e-3)
    config = replace(numpy_cfg, strategy="compiled")
    lay = em_gmm.workspace(data, config).layout
    lengths, m = np.diff(lay.run_start), np.diff(lay.mis_ptr)
    short = (m > 0) & (m < _kernels.M_SWITCH)
    assert np.any(short & (lengths > _kernels.CHUNK_ROWS)) and np.any(short & (lengths == _kernels.BATCH_MIN_ROWS))
    assert np.any(short & (lengths > 1) & (lengths < _kernels.BATCH_MIN_ROWS)) and np.any(short & (lengths == 1))
    start = em_gmm.init(data, numpy_cfg, np.random.default_rng(0))
    a = _run(data, numpy_cfg, start, 3)[-1]
    b = _run(data, config, start, 3)[-1]
    assert _rel(b.covariances, a.covariances) < 1e-10 and _rel(b.means, a.means) < 1e-10
    assert _rel(b.weights, a.weights) < 1e-10
    assert b.log_likelihood == pytest.approx(a.log_likelihood, rel=1e-10)
    np.testing.assert_allclose(b.resp, a.resp, rtol=1e-9, atol=1e-12)


def test_the_kernels_exponential_is_within_one_ulp_of_libm():
    """_exp_neg (the responsibilities' exponentials) on a dense grid of its domain [_LOG_TINY, 0], its ends and the
    points where the range reduction changes n."""
    from explorer.core._compiled import gmm as _kernels

    x = np.concatenate([np.linspace(_kernels._LOG_TINY, 0.0, 400_001), [_kernels._LOG_TINY, 0.0, -1e-300, -5e-324],
                        np.log(2.0) * (np.arange(-995, 1) + 0.5), np.log(2.0) * np.arange(-995, 1)])
    x = x[(x >= _kernels._LOG_TINY) & (x <= 0.0)]
    got = np.array([_kernels._exp_neg(v) for v in x[:2000]] + list(_exp_neg_all(x[2000:])))
    want = np.exp(x)
    ulps = np.abs(got - want) / np.spacing(want)
    assert ulps.max() <= 1.0
    assert _kernels._exp_neg(0.0) == 1.0


def _exp_neg_all(x):
    import numba

    from explorer.core._compiled import gmm as _kernels

    @numba.njit
    def run(x):
        out = np.empty_like(x)
        for i in range(x.size):
            out[i] = _kernels._exp_neg(x[i])
        return out

    return run(x)


def _lanes_off(monkeypatch, data, K):
    """A workspace of ``data`` whose single-row runs take the per-run branches (the lanes switched off)."""
    from explorer.core._compiled import gmm as _kernels

    with monkeypatch.context() as mp:
        mp.setattr(_kernels, "LANE_MAX_MISSING", 0)
        return _kernels.Workspace(em_gmm._layout(data, em_gmm.EMConfig(n_components=K, strategy="compiled")), K)


@pytest.mark.parametrize("K", [1, 3, 7])  # 7: the lanes are not a multiple of 32 / K rows, and gathered lane by lane
@pytest.mark.parametrize("sep", [1.0, 6.0])  # overlapping (every pair's covariance in the lanes) and separated
def test_single_row_runs_in_simd_lanes_equal_numpy(K, sep, monkeypatch):
    """Random masks on wide data (every row its own pattern, m from 1 to 25: groups padded to their largest m) go
    through _solve_lanes; numpy's kernels and the per-run branches give the same step."""
    from explorer.core._compiled import gmm as _kernels

    X = _mixture(n=700, d=30, seed=K, sep=sep, rate=0.35)
    rng = np.random.default_rng(K)
    X[rng.random(X.shape) < rng.uniform(0.0, 0.5, size=(X.shape[0], 1))] = np.nan  # m spread over rows
    data = em_gmm.prepare(X)
    m = np.isnan(X).sum(axis=1)
    assert m.min() <= 5 and 20 <= m.max() <= _kernels.LANE_MAX_MISSING
    # K = 1, 3: the K precisions fit in L1 and the blocks are gathered with the lanes innermost; K = 7: lane by lane
    assert (K * 30 * 30 * 8 <= _kernels.GATHER_L1_BYTES) == (K < 7)
    numpy_cfg = em_gmm.EMConfig(n_components=K, strategy="numpy", reg_covar=1e-3)
    config = replace(numpy_cfg, strategy="compiled")
    start = em_gmm.init(data, numpy_cfg, np.random.default_rng(0))
    a = _run(data, numpy_cfg, start, 3)[-1]
    b = _run(data, config, start, 3)[-1]
    ws = em_gmm.workspace(data, config)
    assert np.any(ws.lanes[1] != 0.0)  # the lanes' factors were used
    assert _rel(b.covariances, a.covariances) < 1e-10 and _rel(b.means, a.means) < 1e-10
    assert _rel(b.weights, a.weights) < 1e-10
    assert b.log_likelihood == pytest.approx(a.log_likelihood, rel=1e-10)
    np.testing.assert_allclose(b.resp, a.resp, rtol=1e-9, atol=1e-12)
    data.cache[("workspace", False, K)] = _lanes_off(monkeypatch, data, K)
    c = _run(data, config, start, 3)[-1]
    assert not np.any(em_gmm.workspace(data, config).lanes[1] != 0.0)
    assert _rel(c.covariances, b.covariances) < 1e-10 and c.log_likelihood == pytest.approx(b.log_likelihood, rel=1e-12)


def test_at_most_one_missing_entry_per_row():
    """The lanes' buffers when the longest missing block has one entry (they were sized as the 'no lanes'
    placeholder then, one lane for K of them and one pending row per block: writes past their ends)."""
    from explorer.core._compiled import gmm as _kernels

    rng = np.random.default_rng(8)
    X = _mixture(n=400, d=40, seed=8, sep=2.0)
    X[np.isnan(X)] = 0.0
    rows = rng.permutation(400)
    X[rows[:30], rng.choice(40, 30, replace=False)] = np.nan  # 30 patterns of one row each
    X[rows[30:130], 7] = np.nan  # and a repeated one
    data = em_gmm.prepare(X)
    numpy_cfg = em_gmm.EMConfig(n_components=3, strategy="numpy", reg_covar=1e-3)
    config = replace(numpy_cfg, strategy="compiled")
    ws = em_gmm.workspace(data, config)
    lay = ws.layout
    single = np.diff(lay.run_start) == 1
    assert lay.max_missing == 1 and np.count_nonzero(single & (np.diff(lay.mis_ptr) == 1)) >= 10
    assert ws.lanes[1].shape[2] >= 3 and ws.lanes[0].shape[1] == ws.block_rows  # real lanes, not placeholders
    start = em_gmm.init(data, numpy_cfg, np.random.default_rng(0))
    a = _run(data, numpy_cfg, start, 3)[-1]
    b = _run(data, config, start, 3)[-1]
    assert _rel(b.covariances, a.covariances) < 1e-10 and _rel(b.means, a.means) < 1e-10
    assert b.log_likelihood == pytest.approx(a.log_likelihood, rel=1e-10)
    none = em_gmm.prepare(np.where(np.isnan(X), 0.0, X))  # no missing entry: no lanes at all
    assert em_gmm.workspace(none, config).lanes[1].shape[0] == 0


def test_short_runs_cut_by_a_block_boundary_in_the_lanes():
    """Runs of three rows and 10-14 missing entries, blocks of 64 rows: a run's one row in a block goes to the lanes
    with its own row index (the first version took the run's first row, which is in the previous block)."""
    from explorer.core._compiled import gmm as _kernels

    rng = np.random.default_rng(21)
    X = _mixture(n=600, d=20, seed=21, sep=2.0)
    X[np.isnan(X)] = 0.0
    patterns = [np.isin(np.arange(20), rng.choice(20, rng.integers(10, 15), replace=False)) for _ in range(200)]
    X[np.repeat(np.array(patterns), 3, axis=0)] = np.nan
    data = em_gmm.prepare(X)
    numpy_cfg = em_gmm.EMConfig(n_components=3, strategy="numpy", reg_covar=1e-3)
    config = replace(numpy_cfg, strategy="compiled")
    ws = _kernels.Workspace(em_gmm._layout(data, config), 3, block_rows=64)
    data.cache[("workspace", False, 3)] = ws
    lay = ws.layout
    cut = [r for r in range(64, lay.n_fit, 64) if r not in set(lay.run_start.tolist())]
    assert len(cut) >= 5  # block boundaries inside runs
    start = em_gmm.init(data, numpy_cfg, np.random.default_rng(0))
    a = _run(data, numpy_cfg, start, 3)[-1]
    b = _run(data, config, start, 3)[-1]
    assert np.any(ws.lanes[1] != 0.0)
    assert _rel(b.covariances, a.covariances) < 1e-10 and _rel(b.means, a.means) < 1e-10
    assert b.log_likelihood == pytest.approx(a.log_likelihood, rel=1e-10)


def test_a_failure_in_the_lanes_is_reported_with_its_component():
    from explorer.core._compiled import gmm as _kernels

    X = _mixture(n=300, d=30, seed=4, rate=0.3)[4:]  # every row its own pattern (not the rows with nothing seen)
    data = em_gmm.prepare(X)
    assert len(np.unique(np.isnan(X), axis=0)) == len(X)
    config = em_gmm.EMConfig(n_components=3, strategy="compiled")
    ws = em_gmm.workspace(data, config)
    D = data.n_features
    precision = np.stack([np.eye(D)] * 3)
    precision[2, 5, 5] = -1.0  # not positive definite on the patterns missing column 5 (single rows: the lanes)
    with pytest.raises(_kernels.NotPositiveDefinite) as info:
        _kernels.estep(ws, np.full(3, 1 / 3), np.zeros((3, D)), precision, np.zeros(3))
    assert info.value.args[0] == 2


@settings(max_examples=5, deadline=None)
@given(seed=st.integers(0, 10_000), K=st.integers(1, 4), rate=st.floats(0.05, 0.6))
def test_compiled_log_likelihood_never_decreases(seed, K, rate):
    data = em_gmm.prepare(_mixture(n=300, d=5, seed=seed, rate=rate))
    config = em_gmm.EMConfig(n_components=K, strategy="compiled", reg_covar=1e-6)
    states = [em_gmm.init(data, config, np.random.default_rng(seed))]
    for _ in range(8):
        try:
            states.append(em_gmm.step(states[-1], data, config))
        except DegenerateCovarianceError:
            break
    lls = np.array([s.log_likelihood for s in states])
    assert np.all(np.diff(lls) >= -1e-9 * np.abs(lls[:-1]) - 1e-12), lls


def test_impute_keeps_observed_entries_and_completions_on_demand():
    X = _mixture(seed=7)
    data = em_gmm.prepare(X)
    config = em_gmm.EMConfig(n_components=3, strategy="compiled")
    state = em_gmm.fit(data, replace(config, max_iter=5), np.random.default_rng(0)).state
    imp = em_gmm.impute(state, data, config)
    obs = ~np.isnan(X)
    np.testing.assert_array_equal(imp[obs], X[obs])
    assert np.all(np.isfinite(imp))
    allc = em_gmm.completions(state, data, config)
    assert allc.shape == (3,) + X.shape
    rows = np.array([40, 0, 3, 599, 40])
    np.testing.assert_allclose(em_gmm.completions(state, data, config, rows=rows), allc[:, rows], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.einsum("nk,knd->nd", state.resp, allc)[~obs], imp[~obs], rtol=1e-12, atol=1e-12)
    with pytest.raises(BadInputError, match="rows"):
        em_gmm.completions(state, data, config, rows=[600])


def test_state_holds_no_completions_and_buffers_are_reused():
    X = _mixture(seed=8)
    data = em_gmm.prepare(X)
    K = 3
    config = em_gmm.EMConfig(n_components=K, strategy="compiled")
    s0 = em_gmm.init(data, config, np.random.default_rng(0))
    ws = em_gmm.workspace(data, config)
    buffers = (id(ws.E), id(ws.R), id(ws.W))
    s1 = em_gmm.step(s0, data, config)
    s2 = em_gmm.step(s1, data, config)
    assert em_gmm.workspace(data, config) is ws and (id(ws.E), id(ws.R), id(ws.W)) == buffers
    names = {f.name for f in fields(em_gmm.EMState)}
    assert "xhat" not in names and "cond_cov" not in names
    for s in (s0, s1, s2):
        arrays = [getattr(s, f.name) for f in fields(s)] + [getattr(s.stats, f.name) for f in fields(s.stats)]
        for a in arrays:
            if isinstance(a, np.ndarray):
                assert a.size < K * data.n_samples * data.n_features
                assert not a.flags.writeable
                assert not np.shares_memory(a, ws.E) and not np.shares_memory(a, ws.T)
    assert not np.shares_memory(s1.resp, s2.resp)


def test_auto_strategy_rule(monkeypatch):
    import explorer.core._compiled as compiled_pkg

    monkeypatch.setattr(compiled_pkg, "_LOADED", set())
    small = em_gmm.prepare(_mixture(n=200))
    assert em_gmm.resolve_strategy(small, em_gmm.EMConfig(n_components=2)) == "numpy"
    compiled_pkg.mark_loaded("gmm")  # the compiled E-step ran in this process: small fits take it too
    assert em_gmm.resolve_strategy(em_gmm.prepare(_mixture(n=200)), em_gmm.EMConfig(n_components=2)) == "compiled"
    big = em_gmm.prepare(_mixture(n=12_000, d=6))
    assert em_gmm.resolve_strategy(big, em_gmm.EMConfig(n_components=3)) == "compiled"
    assert em_gmm.resolve_strategy(big, em_gmm.EMConfig(n_components=3, covariance_type="diag")) == "numpy"
    assert em_gmm.resolve_strategy(small, em_gmm.EMConfig(n_components=2, strategy="compiled")) == "compiled"
    with pytest.raises(BadInputError, match="strategy"):
        em_gmm.EMConfig(strategy="fast")


def test_singular_covariance_raises_a_clear_error():
    data = em_gmm.prepare(_mixture(seed=9))
    D = data.n_features
    config = em_gmm.EMConfig(n_components=2, strategy="compiled")
    cov = np.stack([np.eye(D), np.ones((D, D))])  # rank one
    with pytest.raises(DegenerateCovarianceError, match="singular or not positive definite"):
        em_gmm.init_from_parameters(data, config, [0.5, 0.5], np.zeros((2, D)), cov)


def test_missing_block_failure_is_reported_with_its_component():
    from explorer.core._compiled import gmm as _kernels

    data = em_gmm.prepare(_mixture(seed=10))
    config = em_gmm.EMConfig(n_components=2, strategy="compiled")
    D = data.n_features
    precision = np.stack([np.eye(D), np.eye(D)])
    precision[1, 0, 0] = 0.0  # not positive definite on any pattern missing column 0
    with pytest.raises(_kernels.NotPositiveDefinite) as info:
        _kernels.estep(em_gmm.workspace(data, config), np.array([0.5, 0.5]), np.zeros((2, D)), precision, np.zeros(2))
    assert info.value.args[0] == 1


def test_bench_em_quick_runs_every_row(tmp_path):
    """bench_em.py --all at tiny sizes: every row of issue 11's table runs (no timing is asserted)."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_em.py"), "--quick", "--tiny", "--all", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    assert "failed with exit status" not in out.stdout, out.stdout
    assert "ratio" in out.stdout
    for name in ("bench_em_quick", "bench_vb_quick", "bench_dask_quick"):
        assert (tmp_path / f"{name}.md").exists(), name
    table = (tmp_path / "bench_targets.md").read_text()
    for row in ("EM tiny", "peak memory", "VB DP mixture", "delalleau2012, one E-step", "Dask"):
        assert row in table, row


@pytest.mark.parametrize("strategy", ["tree", "naive"])
def test_pattern_tree_strategies_equal_numpy(strategy):
    data = em_gmm.prepare(_mixture(n=300, d=5, seed=11))
    numpy_cfg = em_gmm.EMConfig(n_components=2, strategy="numpy")
    start = em_gmm.init(data, numpy_cfg, np.random.default_rng(0))
    a = _run(data, numpy_cfg, start, 2)[-1]
    b = _run(data, replace(numpy_cfg, strategy=strategy), start, 2)[-1]
    assert _rel(b.covariances, a.covariances) < 1e-10 and _rel(b.means, a.means) < 1e-10
    assert b.log_likelihood == pytest.approx(a.log_likelihood, rel=1e-10)
    if strategy == "tree":
        assert any(key[0] == "pattern_tree" for key in data.cache)  # built once per data set


def test_warm_up_runs_in_the_background():
    thread = em_gmm.warm_up_kernels()
    thread.join(timeout=120)
    assert not thread.is_alive()
    em_gmm.warm_up_kernels(background=False)


def test_prepared_data_with_a_workspace_pickles():
    import pickle

    data = em_gmm.prepare(_mixture(seed=12))
    config = em_gmm.EMConfig(n_components=2, strategy="compiled")
    state = em_gmm.init(data, config, np.random.default_rng(0))
    data2, state2 = pickle.loads(pickle.dumps((data, state)))
    a, b = em_gmm.step(state, data, config), em_gmm.step(state2, data2, config)
    np.testing.assert_array_equal(a.covariances, b.covariances)
    assert em_gmm.workspace(data2, config) is not em_gmm.workspace(data, config)


def test_profile_em_step_times_every_part(monkeypatch):
    """benchmarks/profile_em_step.py on W1 with one repeat: every part is timed and the parts are positive (no time is
    compared: the parts are timed apart, once, and in a CI run beside the browser tests the pass alone once took longer
    than a whole E-step)."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import profile_em_step

    res = profile_em_step.profile("W1", repeats=1, warm=1)
    sec = res["seconds"]
    assert set(sec) >= {"compiled pass (_solve_block)", "scatter (dsyrk)", "whole E-step (estep)",
                        "scikit-learn step, complete data"}
    assert all(v > 0 for v in sec.values())
    assert res["n_runs"] > 100 and res["n_features"] == 10


@pytest.mark.parametrize("share", [1.0, 0.25])
def test_the_sparse_scatter_gives_the_dense_moments(monkeypatch, share):
    """Components that take part in few rows of a block have their second moments summed over those rows only
    (responsibility above 1e-12, ``_scatter_sparse``): the statistics equal the numpy kernels' to 1e-10 (relative),
    with the sparse path forced for every component (share 1) and at the default share on separated components,
    where it is taken."""
    from explorer.core._compiled import gmm as kernels

    monkeypatch.setattr(kernels, "SCATTER_SPARSE_SHARE", share)
    rng = np.random.default_rng(21)  # eight well separated groups: each component takes part in about 1/8 of a block
    centers = rng.normal(0.0, 8.0, (8, 7))
    X = centers[rng.integers(8, size=1600)] + rng.normal(size=(1600, 7)) @ rng.normal(size=(7, 7)) / 3
    X[rng.random(X.shape) < 0.3] = np.nan
    data = em_gmm.prepare(X)
    config = em_gmm.EMConfig(n_components=8, strategy="compiled")
    state = em_gmm.init(data, config, np.random.default_rng(3))
    for _ in range(3):
        state = em_gmm.step(state, data, config)
    ws = em_gmm.workspace(data, config)
    taken = []
    real = kernels._scatter_sparse

    def spy(E, ll, nb, T, s, done):
        real(E, ll, nb, T, s, done)
        taken.append(done.copy())

    monkeypatch.setattr(kernels, "_scatter_sparse", spy)
    w, m, c = m_step(state.stats, reg_covar=config.reg_covar, prior=None)
    prec, logdet = precision_and_logdet(np.asarray(c))
    nk, first, second, *_ = kernels.estep(ws, w, m, prec, logdet)
    assert any(d.any() for d in taken)  # the sparse sum ran
    ref = em_gmm._estep(data, replace(config, strategy="numpy"), w, m, c)[0]
    assert _rel(second, ref.second) < 1e-10 and _rel(first, ref.first) < 1e-10 and _rel(nk, ref.nk) < 1e-12
