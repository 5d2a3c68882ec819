"""The compiled E-step of the variational DP mixture (explorer.core._compiled.vb_dpgmm) against the numpy
reference path."""

from __future__ import annotations

import pickle
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.core.gaussians.gaussian import DegenerateCovarianceError
from explorer.core.mixtures import vb_dpgmm as vb
from explorer.core.mixtures.vb_dpgmm import VBConfig
from explorer.core.validation import BadInputError

pytestmark = pytest.mark.filterwarnings("ignore::explorer.core.mixtures.vb_dpgmm.VBConvergenceWarning")


def _data(n=400, d=5, rate=0.3, seed=0, long_blocks=False):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) @ (np.eye(d) + 0.4 * np.triu(rng.normal(size=(d, d)), 1))
    X[: n // 3] += 3.0
    X[n // 3: 2 * n // 3] -= 3.0
    miss = rng.random((n, d)) < rate
    if rate:
        miss[:3] = True  # rows with nothing observed
        miss[3, :-1] = True  # one observed value
    if long_blocks:  # runs with >= _kernels.M_SWITCH missing entries (the per-component factor path)
        miss[10:60] = False
        miss[10:60, : d - 2] = True
        miss[60:80, : d - 1] = True
    return vb.prepare(np.where(miss, np.nan, X))


def _rel(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return np.abs(a - b).max() / max(np.abs(b).max(), 1e-300)


def _pair(data, cfg, n_steps=5, seed=1):
    """States of the numpy and the compiled paths from the same start."""
    cn, cc = replace(cfg, strategy="numpy"), replace(cfg, strategy="compiled")
    s0 = vb.init(data, cn, np.random.default_rng(seed))
    a, b = [s0], [vb.init_from_resp(data, cc, s0.resp)]
    for _ in range(n_steps):
        a.append(vb.step(a[-1], data, cn))
        b.append(vb.step(b[-1], data, cc))
    return a, b


def _assert_same(sa, sb, tol=1e-10):
    for name in ("means", "scatter", "beta", "nu", "gamma", "weights"):
        assert _rel(getattr(sb, name), getattr(sa, name)) < tol, name
    np.testing.assert_allclose(sb.resp, sa.resp, rtol=tol, atol=1e-250)
    assert sb.log_likelihood == pytest.approx(sa.log_likelihood, rel=tol)
    if np.isfinite(sa.elbo):
        assert sb.elbo == pytest.approx(sa.elbo, rel=tol)
        for key, v in sa.cache["elbo_terms"].items():
            assert sb.cache["elbo_terms"][key] == pytest.approx(v, rel=tol, abs=tol * abs(sa.elbo)), key
    else:
        assert np.isnan(sb.elbo)
    assert sb.n_effective == sa.n_effective


@pytest.mark.parametrize("update", vb.UPDATES)
@pytest.mark.parametrize("resp", ["corrected", "augmented"])
@pytest.mark.parametrize("rate", [0.0, 0.3])
def test_compiled_equals_numpy_over_steps(update, resp, rate):
    data = _data(rate=rate, seed=int(rate * 10))
    a, b = _pair(data, VBConfig(n_components=4, update=update, responsibilities=resp))
    for sa, sb in zip(a[1:], b[1:]):
        _assert_same(sa, sb)
    assert "xhat" not in b[-1].cache and "next" in b[-1].cache


@pytest.mark.parametrize("update", vb.UPDATES)  # "principled" asks for the conditional means, "thesis" not
@pytest.mark.parametrize("resp", ["corrected", "augmented"])
def test_compiled_equals_numpy_on_runs_solved_in_chunks(update, resp):
    """The shared solves of the EM pass (gmm._maha_rows): a run longer than CHUNK_ROWS rows, one of BATCH_MIN_ROWS
    rows (rows innermost) and runs of a few rows (one at a time), with and without the conditional means."""
    from explorer.core._compiled import gmm as _kernels

    rng = np.random.default_rng(3)
    d, n = 6, 300
    X = rng.normal(size=(n, d)) @ (np.eye(d) + 0.4 * np.triu(rng.normal(size=(d, d)), 1))
    X[: n // 2] += 3.0
    sizes = [2 * _kernels.CHUNK_ROWS + 5, _kernels.BATCH_MIN_ROWS, _kernels.BATCH_MIN_ROWS - 1, 3, 2]
    row = 0
    for size, m in zip(sizes, [2, 1, 3, 2, 4]):
        X[row:row + size, rng.choice(d, m, replace=False)] = np.nan
        row += size
    X[row:][rng.random((n - row, d)) < 0.25] = np.nan
    data = vb.prepare(X[rng.permutation(n)])
    a, b = _pair(data, VBConfig(n_components=4, update=update, responsibilities=resp), n_steps=3)
    for sa, sb in zip(a[1:], b[1:]):
        _assert_same(sa, sb)


@pytest.mark.parametrize("stick", vb.STICKS)
@pytest.mark.parametrize("prior", vb.COVARIANCE_PRIORS)
def test_compiled_equals_numpy_long_missing_blocks_priors_and_sticks(stick, prior):
    data = _data(n=300, d=13, rate=0.2, long_blocks=True)
    a, b = _pair(data, VBConfig(n_components=3, stick=stick, covariance_prior=prior, reg_covar=1e-6), n_steps=4)
    for sa, sb in zip(a[1:], b[1:]):
        _assert_same(sa, sb)


def test_compiled_equals_numpy_above_the_gemm_width():  # dsyrk accumulation (D > GEMM_MAX_D)
    from explorer.core._compiled.vb_dpgmm import GEMM_MAX_D

    data = _data(n=200, d=GEMM_MAX_D + 2, rate=0.1)
    a, b = _pair(data, VBConfig(n_components=2, covariance_prior="data"), n_steps=3)
    for sa, sb in zip(a[1:], b[1:]):
        _assert_same(sa, sb)


def test_fit_is_the_same_and_thesis_responsibilities_use_numpy():
    data = _data(n=250, rate=0.25)
    cfg = VBConfig(n_components=5, max_iter=8, tol=0.0)
    ra = vb.fit(data, replace(cfg, strategy="numpy"), np.random.default_rng(3))
    rb = vb.fit(data, replace(cfg, strategy="compiled"), np.random.default_rng(3))
    _assert_same(ra.state, rb.state)
    assert [t["elbo"] for t in rb.trace] == pytest.approx([t["elbo"] for t in ra.trace], rel=1e-10, nan_ok=True)
    thesis = VBConfig(n_components=3, responsibilities="thesis", strategy="compiled")
    assert vb.resolve_strategy(data, thesis) == "numpy"
    import explorer.core._compiled as compiled_pkg

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(compiled_pkg, "_LOADED", set())
        assert vb.resolve_strategy(data, VBConfig(n_components=3)) == "numpy"  # small, kernels not loaded: numpy
        compiled_pkg.mark_loaded("vb_dpgmm")
        assert vb.resolve_strategy(data, VBConfig(n_components=3)) == "numpy"  # chosen once per data and K
        fresh = _data(n=250, rate=0.25)
        assert vb.resolve_strategy(fresh, VBConfig(n_components=3)) == "compiled"  # the load is paid: compiled
    big = _data(n=5000, d=10, rate=0.1)
    assert vb.resolve_strategy(big, VBConfig(n_components=5)) == "compiled"
    with pytest.MonkeyPatch.context() as mp:  # a fresh process: VB's own threshold, below EM's
        mp.setattr(compiled_pkg, "_LOADED", set())
        boston_size = _data(n=506, d=13, rate=0.3)  # 506 x 15 x 13 = 98,670 >= 50,000 (EM's threshold: 200,000)
        assert vb.resolve_strategy(boston_size, VBConfig(n_components=15)) == "compiled"
        assert vb.resolve_strategy(boston_size, VBConfig(n_components=7)) == "numpy"  # 46,046


def test_state_stepped_under_other_settings_redoes_the_pass():
    data = _data(n=300, rate=0.3)
    cfg = VBConfig(n_components=3, strategy="compiled")
    s = vb.step(vb.init(data, cfg, np.random.default_rng(0)), data, cfg)
    other = replace(cfg, responsibilities="augmented")
    _assert_same(vb.step(s, data, replace(other, strategy="numpy")), vb.step(s, data, other))
    # a numpy state stepped by the compiled path and the other way round
    sn = vb.step(vb.init(data, replace(cfg, strategy="numpy"), np.random.default_rng(0)), data,
                 replace(cfg, strategy="numpy"))
    _assert_same(vb.step(sn, data, replace(cfg, strategy="numpy")), vb.step(sn, data, cfg))
    _assert_same(vb.step(s, data, replace(cfg, strategy="numpy")), vb.step(s, data, cfg))


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10_000), rate=st.floats(0.0, 0.5), K=st.integers(1, 4))
def test_elbo_never_decreases_compiled(seed, rate, K):
    rng = np.random.default_rng(seed)
    data = _data(n=80, d=3, rate=rate, seed=seed)
    cfg = VBConfig(n_components=K, update="principled", responsibilities="augmented", reg_covar=0.0, init="random",
                   strategy="compiled")
    state = vb.step(vb.init(data, cfg, rng), data, cfg)
    elbos = [state.elbo]
    for _ in range(10):
        state = vb.step(state, data, cfg)
        elbos.append(state.elbo)
    assert np.all(np.isfinite(elbos))
    assert np.all(np.diff(elbos) >= -1e-9 * np.abs(elbos[1:]))


def test_buffers_allocated_once_per_data_and_K():
    data = _data(n=300, rate=0.3)
    cfg = VBConfig(n_components=3, strategy="compiled")
    s = vb.step(vb.init(data, cfg, np.random.default_rng(0)), data, cfg)
    ws = vb.workspace(data, 3)
    E, R, W = ws.E, ws.R, ws.W
    for _ in range(3):
        s = vb.step(s, data, cfg)
    assert vb.workspace(data, 3) is ws and ws.E is E and ws.R is R and ws.W is W
    assert vb.workspace(data, 2) is not ws
    assert vb.workspace(data, 3).layout is vb.workspace(data, 2).layout  # one row layout per data
    copy = pickle.loads(pickle.dumps(ws))  # scratch: a copy gets fresh buffers
    assert type(copy) is type(ws) and copy.E is not ws.E and copy.E.shape == ws.E.shape
    # the state keeps (n, K) arrays and statistics, no (K, n, D) completions
    big = [a.shape for a in s.cache["next"]["stats"].values()] + [s.cache["next"]["tau"].shape]
    assert all(np.prod(shape) <= max(data.n_samples * 3, 3 * data.n_features**2) for shape in big)
    assert not s.resp.flags.writeable


def test_bad_input():
    with pytest.raises(BadInputError, match="strategy"):
        VBConfig(strategy="fast")
    data = _data(n=60, d=3, rate=0.3)
    cfg = VBConfig(n_components=2, strategy="compiled")
    with pytest.raises(BadInputError, match="n_components"):
        vb.init(data, replace(cfg, n_components=100), np.random.default_rng(0))
    s = vb.init(data, cfg, np.random.default_rng(0))
    W, logdet = np.repeat(np.eye(3)[None], 2, axis=0), np.zeros(2)
    W[1, 0, 0] = -1.0  # a missing-block precision that is not positive definite
    with pytest.raises(DegenerateCovarianceError, match="component 1"):
        vb._compiled_pass(data, cfg, s.means, s.beta, s.nu, s.scatter, s.gamma, s.weights, (W, logdet))
    X = data.X.copy()
    X[5, 0] = np.inf
    with pytest.raises(BadInputError):
        vb.prepare(X)
