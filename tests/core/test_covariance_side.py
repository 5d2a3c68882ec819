"""The covariance-side E-step (issue 22) against the precision-side kernels, and the cost rule that picks it."""

from dataclasses import replace

import numpy as np
import pytest

from explorer.core.gaussians.gaussian import DegenerateCovarianceError, cholesky, cholesky_inverse
from explorer.core.gaussians.patterns import group_patterns
from explorer.core.mixtures import em_gmm
from explorer.core.mixtures.covariance_side import covariance_side_estep
from explorer.core.mixtures.suffstats import (
    COVARIANCE_SIDE_MIN_FACTOR_WORK,
    COVARIANCE_SIDE_RATIO,
    choose_strategy,
    estep_statistics,
    factorisation_work,
)

pytestmark = pytest.mark.filterwarnings("ignore:Stopped after max_iter")


def _data(n, d, rate, seed, structured=False, rank=4):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, rank)) @ rng.normal(size=(rank, d)) + 0.5 * rng.normal(size=(n, d))
    X[: n // 2] += 3.0
    if structured:  # sensor groups off: few patterns, many rows each, most of the row missing
        blocks = [np.arange(d) >= d // 4, np.arange(d) < 3 * d // 4, np.arange(d) % 3 != 0, np.zeros(d, bool)]
        miss = np.array(blocks)[rng.integers(len(blocks), size=n)]
    else:
        miss = rng.random((n, d)) < rate
    miss[:2] = True  # rows with nothing observed
    miss[2, 1:] = True  # one observed value
    return np.where(miss, np.nan, X)


def _rel(a, b):
    return np.abs(np.asarray(a) - np.asarray(b)).max() / np.abs(np.asarray(b)).max()


@pytest.mark.parametrize("n, d, rate, structured", [(400, 6, 0.3, False), (300, 12, 0.7, False),
                                                    (300, 12, 0.0, True), (250, 60, 0.7, False)])
@pytest.mark.parametrize("exact", [True, False])
def test_statistics_equal_the_precision_side(n, d, rate, structured, exact):
    rng = np.random.default_rng(d)
    X = _data(n, d, rate, seed=d, structured=structured)
    miss = np.isnan(X)
    Xf = np.where(miss, 0.0, X)
    pats = group_patterns(miss)
    K = 3
    A = rng.normal(size=(K, d, d))
    cov = A @ np.swapaxes(A, 1, 2) / d + 0.5 * np.eye(d)
    means = rng.normal(size=(K, d))
    weights = rng.dirichlet(np.ones(K))
    ref, resp, row_ll = estep_statistics(Xf, pats, weights, means, cov, strategy="numpy", exact=exact)
    nk, first, second, total, resp_c, row_c = covariance_side_estep(Xf, pats, weights, means, cov, exact=exact)
    assert _rel(nk, ref.nk) < 1e-10 and _rel(first, ref.first) < 1e-10 and _rel(second, ref.second) < 1e-10
    assert total == pytest.approx(ref.log_likelihood, rel=1e-12)
    np.testing.assert_allclose(resp_c, resp, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(row_c, row_ll, rtol=1e-12, atol=1e-12)
    assert np.all(row_c[pats.empty_rows] == 0.0)  # rows with nothing observed: not counted


@pytest.mark.parametrize("n, d, rate, structured, K", [(600, 6, 0.3, False, 3), (250, 40, 0.7, False, 1),
                                                       (400, 16, 0.0, True, 2), (300, 20, 0.75, False, 3)])
@pytest.mark.parametrize("prior", [None, "auto"])
def test_every_strategy_gives_the_same_fit(n, d, rate, structured, K, prior):
    """Five EM steps from one start: numpy, compiled and covariance side agree to 1e-10 (random and structured
    masks, wide mostly-missing data)."""
    data = em_gmm.prepare(_data(n, d, rate, seed=n + d, structured=structured))
    base = em_gmm.EMConfig(n_components=K, prior=prior, strategy="numpy", reg_covar=1e-4)
    start = em_gmm.init(data, base, np.random.default_rng(0))
    runs = {}
    for strategy in ("numpy", "compiled", "covariance"):
        config = replace(base, strategy=strategy)
        state = start
        for _ in range(5):
            state = em_gmm.step(state, data, config)
        runs[strategy] = state
    ref = runs["numpy"]
    assert _rel(ref.means, start.means) > 1e-3  # the steps moved the parameters
    for strategy in ("compiled", "covariance"):
        s = runs[strategy]
        assert _rel(s.weights, ref.weights) < 1e-10, strategy
        assert _rel(s.means, ref.means) < 1e-10, strategy
        assert _rel(s.covariances, ref.covariances) < 1e-10, strategy
        assert s.objective == pytest.approx(ref.objective, rel=1e-10), strategy


def test_covariance_side_objective_never_decreases():
    data = em_gmm.prepare(_data(200, 30, 0.7, seed=4))
    config = em_gmm.EMConfig(n_components=2, strategy="covariance", prior="auto")
    state = em_gmm.init(data, config, np.random.default_rng(1))
    objectives = [state.objective]
    for _ in range(15):
        state = em_gmm.step(state, data, config)
        objectives.append(state.objective)
    assert np.all(np.diff(objectives) >= -1e-9 * np.abs(objectives[-1]))
    assert objectives[-1] > objectives[0] + 1.0


def test_covariance_side_refuses_a_singular_covariance():
    X = _data(100, 5, 0.6, seed=2)
    miss = np.isnan(X)
    cov = np.stack([np.eye(5), np.ones((5, 5))])
    with pytest.raises(DegenerateCovarianceError, match="singular or not positive definite"):
        covariance_side_estep(np.where(miss, 0.0, X), group_patterns(miss), [0.5, 0.5], np.zeros((2, 5)), cov)


def test_cholesky_inverse_is_the_inverse():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(7, 30, 30))
    S = A @ np.swapaxes(A, 1, 2) + np.eye(30)
    inv = cholesky_inverse(cholesky(S))
    np.testing.assert_allclose(inv, np.linalg.inv(S), rtol=1e-9, atol=1e-12)
    assert np.array_equal(inv, np.swapaxes(inv, 1, 2))
    low = cholesky_inverse(cholesky(S), lower_only=True)  # what the E-step scatters: the lower triangle only
    assert np.array_equal(low, np.tril(inv)) and not np.triu(low, 1).any()


def test_observed_layout_is_each_patterns_observed_block_computed_once():
    miss = np.random.default_rng(3).random((40, 9)) < 0.5
    miss[miss.all(axis=1), 0] = False
    for g in group_patterns(miss).groups:
        obs, flat = g.observed_layout(9)
        for u, pattern in enumerate(g.unique_mis):
            expected = np.setdiff1d(np.arange(9), pattern)
            assert np.array_equal(obs[u], expected)
            assert np.array_equal(flat[u], expected[:, None] * 9 + expected[None, :])
        assert g.observed_layout(9)[1] is flat and not flat.flags.writeable


def test_auto_picks_the_side_with_the_smaller_factorisations(monkeypatch):
    import explorer.core._compiled as compiled_pkg

    monkeypatch.setattr(compiled_pkg, "_LOADED", set())  # the rule as in a fresh process
    wide = em_gmm.prepare(_data(250, 200, 0.7, seed=1))
    precision_side, covariance_side, rows = factorisation_work(wide.patterns)
    assert precision_side > COVARIANCE_SIDE_MIN_FACTOR_WORK * rows
    assert covariance_side < COVARIANCE_SIDE_RATIO * precision_side
    assert em_gmm.resolve_strategy(wide, em_gmm.EMConfig(n_components=1)) == "covariance"
    assert em_gmm.resolve_strategy(wide, em_gmm.EMConfig(n_components=1, covariance_type="diag")) == "numpy"
    assert em_gmm.resolve_strategy(wide, em_gmm.EMConfig(n_components=1, strategy="numpy")) == "numpy"
    # few missing entries per row: the precision side, compiled once the work is large enough
    narrow = em_gmm.prepare(_data(12_000, 10, 0.3, seed=2))
    assert em_gmm.resolve_strategy(narrow, em_gmm.EMConfig(n_components=3)) == "compiled"
    # mostly missing but few patterns and many rows: the rows' products dominate, the rule leaves the precision side
    few = em_gmm.prepare(_data(20_000, 10, 0.0, seed=3, structured=True))
    assert choose_strategy(20_000, 3, 10, "full", "auto", few.patterns) == "compiled"
    # D = 20 at 70 % MCAR: the observed blocks are smaller, but the compiled precision side was as fast (measured)
    mid = em_gmm.prepare(_data(2000, 20, 0.7, seed=4))
    assert choose_strategy(2000, 3, 20, "full", "auto", mid.patterns) == "numpy"
    # D = 200 at 50 %: observed and missing blocks cost the same, and the covariance side was the faster (measured)
    half = em_gmm.prepare(_data(250, 200, 0.5, seed=6))
    assert choose_strategy(250, 1, 200, "full", "auto", half.patterns) == "covariance"


def test_wide_mostly_missing_fit_equals_the_numpy_strategy():
    """A whole MAP fit (the prior's one-component moments included) on wide, mostly-missing data: ``"auto"`` runs
    the covariance side and ends where the numpy strategy ends."""
    data = em_gmm.prepare(_data(120, 80, 0.7, seed=5))
    config = em_gmm.EMConfig(n_components=1, prior="auto", max_iter=40)
    assert em_gmm.resolve_strategy(data, config) == "covariance"
    fast = em_gmm.fit(data, config, np.random.default_rng(0)).state
    ref = em_gmm.fit(data, replace(config, strategy="numpy"), np.random.default_rng(0)).state
    assert _rel(fast.covariances, ref.covariances) < 1e-8 and _rel(fast.means, ref.means) < 1e-8
