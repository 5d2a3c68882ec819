"""Tests of explorer.core.mixtures.em_gmm (EM for Gaussian mixtures with missing values) and of the
conditioning kernels of explorer.core.gaussians.gaussian that it relies on.

Oracles: scikit-learn's GaussianMixture on complete data (same initialisation, same number of
steps), and the closed-form ML estimate of the bivariate normal with a monotone MAR pattern
(Anderson 1957; ghahramani1994 digest section 1.4, Ghahramani & Jordan Fig. 1). Properties
(hypothesis): the observed-data log-likelihood never decreases along EM steps, states stay
valid, observed entries survive imputation bit for bit.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import multivariate_normal

from explorer.core.gaussians.gaussian import (
    DegenerateCovarianceError,
    observed_diagonal,
    observed_gaussian,
    precision_and_logdet,
)
from explorer.core.gaussians.patterns import SMALL_BLOCK, group_patterns
from explorer.core.missingness.mechanisms import apply_mechanism
from explorer.core.mixtures import em_gmm
from explorer.core.mixtures.em_gmm import ConvergenceWarning, EMConfig
from explorer.core.validation import BadInputError


# ----------------------------------------------------------------------------- helpers
def mixture_sample(rng, n, D, K, spread=4.0):
    """n rows of a random K-component Gaussian mixture in D dimensions (and the labels)."""
    centers = rng.normal(scale=spread, size=(K, D))
    A = rng.normal(size=(K, D, D)) / np.sqrt(D) + np.eye(D)
    labels = rng.integers(K, size=n)
    X = centers[labels] + np.einsum("nij,nj->ni", A[labels], rng.normal(size=(n, D)))
    return X, labels


def run_steps(data, config, state, n_steps):
    states = [state]
    for _ in range(n_steps):
        states.append(em_gmm.step(states[-1], data, config))
    return states


def iterate_to_fixed_point(data, config, state, atol=1e-12, max_steps=20000):
    """Step until no parameter moves by more than ``atol`` (the ML oracles need tight convergence)."""
    for _ in range(max_steps):
        new = em_gmm.step(state, data, config)
        moved = max(
            np.abs(new.means - state.means).max(),
            np.abs(new.covariances - state.covariances).max(),
            np.abs(new.weights - state.weights).max(),
        )
        state = new
        if moved < atol:
            return state
    raise AssertionError(f"EM did not reach a fixed point in {max_steps} steps")


# ----------------------------------------------------------------------------- oracle: scikit-learn
@pytest.mark.parametrize("covariance_type", ["full", "diag"])
@pytest.mark.parametrize("n_steps", [1, 6])
def test_complete_data_em_matches_sklearn(covariance_type, n_steps):
    """With nothing missing, EM from a given start is scikit-learn's GaussianMixture, step for step."""
    from sklearn.mixture import GaussianMixture

    rng = np.random.default_rng(11)
    X, _ = mixture_sample(rng, 150, 3, 3, spread=2.5)
    K = 3
    w0 = np.array([0.2, 0.3, 0.5])
    m0 = X[[0, 50, 100]] + 0.3
    if covariance_type == "full":
        c0 = np.stack([np.eye(3) * s + 0.2 for s in (0.5, 1.0, 2.0)])
        p0 = np.linalg.inv(c0)  # the oracle's own parametrisation (precisions), test side only
    else:
        c0 = np.array([[0.5, 1.0, 1.5], [1.0, 1.0, 1.0], [2.0, 0.7, 0.9]])
        p0 = 1.0 / c0
    gm = GaussianMixture(
        K, covariance_type=covariance_type, weights_init=w0, means_init=m0, precisions_init=p0,
        tol=0.0, max_iter=n_steps, reg_covar=1e-6,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sklearn's ConvergenceWarning: tol=0 is never reached
        gm.fit(X)

    config = EMConfig(n_components=K, covariance_type=covariance_type, reg_covar=1e-6)
    data = em_gmm.prepare(X)
    states = run_steps(data, config, em_gmm.init_from_parameters(data, config, w0, m0, c0), n_steps)
    final = states[-1]
    np.testing.assert_allclose(final.weights, gm.weights_, atol=1e-6, rtol=0)
    np.testing.assert_allclose(final.means, gm.means_, atol=1e-6, rtol=0)
    np.testing.assert_allclose(final.covariances, gm.covariances_, atol=1e-6, rtol=0)
    # sklearn's lower_bound_ is the mean log-likelihood of the E-step before its last M-step
    assert states[-2].log_likelihood / len(X) == pytest.approx(gm.lower_bound_, abs=1e-9)
    per_row = em_gmm.observed_log_likelihood(data, final.weights, final.means, final.covariances, covariance_type)
    np.testing.assert_allclose(per_row, gm.score_samples(X), atol=1e-8)
    assert final.log_likelihood == pytest.approx(per_row.sum(), rel=1e-12)


# ----------------------------------------------------------------------------- oracle: Fig. 1 closed form
FIG1_SEED, FIG1_N, FIG1_T = 0, 100, 4.0  # numpy.random.default_rng(0); y observed iff x < 4.0


def fig1_data(seed=FIG1_SEED, n=FIG1_N, t=FIG1_T):
    """Ghahramani & Jordan Fig. 1: mean (5, 5), covariance [[5/4, 9/4], [9/4, 17/4]] = A A^T with
    A = [[1, 1/2], [2, 1/2]]; y is missing iff x >= t (MAR: depends on the always-observed x)."""
    rng = np.random.default_rng(seed)
    u, v = rng.standard_normal((2, n))
    X = np.column_stack([5 + u + v / 2, 5 + 2 * u + v / 2])
    missing = np.zeros(X.shape, dtype=bool)
    missing[:, 1] = X[:, 0] >= t
    return X, missing


def anderson_ml(X, missing):
    """Closed-form ML (Anderson 1957) of a bivariate normal with y missing on a monotone pattern."""
    x, y = X[:, 0], X[:, 1]
    cc = ~missing[:, 1]
    xc, yc = x[cc], y[cc]
    sxx = np.mean((xc - xc.mean()) ** 2)
    sxy = np.mean((xc - xc.mean()) * (yc - yc.mean()))
    syy = np.mean((yc - yc.mean()) ** 2)
    beta = sxy / sxx
    resid = syy - beta * sxy
    sxx_all = np.mean((x - x.mean()) ** 2)
    mu = np.array([x.mean(), yc.mean() + beta * (x.mean() - xc.mean())])
    cov = np.array([[sxx_all, beta * sxx_all], [beta * sxx_all, resid + beta**2 * sxx_all]])
    return mu, cov


def test_fig1_mechanism_is_the_threshold_rule():
    """The registered mar_threshold mechanism produces the same mask as the explicit rule."""
    X, missing = fig1_data()
    res = apply_mechanism(X, "mar_threshold", missing.mean(), rng=np.random.default_rng(0),
                          target=1, control=0, side="above")
    np.testing.assert_array_equal(res.missing, missing)


def test_k1_em_matches_closed_form_ml_on_monotone_mar():
    X, missing = fig1_data()
    Xn = np.where(missing, np.nan, X)
    mu, cov = anderson_ml(X, missing)
    config = EMConfig(n_components=1, reg_covar=0.0)
    data = em_gmm.prepare(Xn)
    state = iterate_to_fixed_point(data, config, em_gmm.init(data, config, np.random.default_rng(3)))
    np.testing.assert_allclose(state.means[0], mu, atol=1e-6, rtol=0)
    np.testing.assert_allclose(state.covariances[0], cov, atol=1e-6, rtol=0)

    # Fig. 1's remark: the ML mean of y is above every observed y; the naive mean is far below it
    y_obs = X[~missing[:, 1], 1]
    assert 10 <= y_obs.size <= 30  # a strongly incomplete column (21 observed of 100 for this seed)
    assert state.means[0, 1] > y_obs.max()
    assert y_obs.mean() < state.means[0, 1] - 2.0
    # and the ML estimate is much closer to the truth (5) than the naive mean
    assert abs(state.means[0, 1] - 5.0) < 0.5 < abs(y_obs.mean() - 5.0)


def test_fit_stops_on_tol_near_the_closed_form():
    """fit's own stopping rule lands near the ML estimate (a looser check of the public loop)."""
    X, missing = fig1_data(seed=1, t=4.5)
    mu, cov = anderson_ml(X, missing)
    res = em_gmm.fit(em_gmm.prepare(X, missing), EMConfig(reg_covar=0.0, tol=1e-14, max_iter=5000),
                     np.random.default_rng(0))
    assert res.stop_reason == "tol" and res.converged
    np.testing.assert_allclose(res.state.means[0], mu, atol=1e-5)
    np.testing.assert_allclose(res.state.covariances[0], cov, atol=1e-5)


# ----------------------------------------------------------------------------- property: monotone EM
@st.composite
def em_problems(draw):
    seed = draw(st.integers(0, 2**32 - 1))
    D = draw(st.integers(1, 5))
    K = draw(st.integers(1, 4))
    covariance_type = draw(st.sampled_from(["full", "diag"]))
    n = draw(st.integers(max(15, 6 * K * D), 6 * K * D + 40))
    rate = draw(st.floats(0.0, 0.6))
    n_empty = draw(st.integers(0, 3))
    n_single = draw(st.integers(0, 4)) if D > 1 else 0
    return seed, n, D, K, covariance_type, rate, n_empty, n_single


def _make_problem(seed, n, D, K, rate, n_empty, n_single):
    rng = np.random.default_rng(seed)
    X, _ = mixture_sample(rng, n, D, K, spread=3.0)
    missing = rng.random((n, D)) < rate
    for i in range(n_single):  # rows with exactly one observed value
        missing[i] = True
        missing[i, rng.integers(D)] = False
    if n_empty:
        missing[-n_empty:] = True  # rows with nothing observed
    for j in range(D):  # every column needs an observed value
        if missing[: n - n_empty, j].all():
            missing[rng.integers(n - n_empty), j] = False
    return np.where(missing, np.nan, X), missing, rng


@settings(max_examples=80)
@given(em_problems())
def test_em_steps_never_decrease_the_observed_likelihood(problem):
    seed, n, D, K, covariance_type, rate, n_empty, n_single = problem
    Xn, missing, rng = _make_problem(seed, n, D, K, rate, n_empty, n_single)
    data = em_gmm.prepare(Xn)
    # start from a k-means initialisation (regularised so the start is valid), then run exact EM:
    # with reg_covar=0 the M-step is the exact maximiser, so monotonicity is a theorem
    start = em_gmm.init(data, EMConfig(n_components=K, covariance_type=covariance_type, reg_covar=1e-3), rng)
    config = EMConfig(n_components=K, covariance_type=covariance_type, reg_covar=0.0)
    state = em_gmm.init_from_parameters(data, config, start.weights, start.means, start.covariances)
    scale = float(np.nanvar(Xn, axis=0).min())
    states = [state]
    for _ in range(15):
        # A collapsed component ends the run; what came before must hold. Without a ridge, a
        # component that collapses onto one point keeps a round-off variance (~1e-29) instead of
        # raising, and the likelihood, dominated by that round-off, may then wobble: stop there too.
        try:
            new = em_gmm.step(states[-1], data, config)
        except DegenerateCovarianceError:
            break
        if np.linalg.eigvalsh(new.full_covariances()).min() < 1e-10 * scale:
            break
        states.append(new)
    lls = np.array([s.log_likelihood for s in states])
    assert np.all(np.diff(lls) >= -1e-9 * np.abs(lls[:-1]) - 1e-12), lls
    for s in states:
        assert s.weights.sum() == pytest.approx(1.0, abs=1e-12)
        assert np.all(s.weights >= 0)
        for a in (s.weights, s.means, s.covariances, s.resp, s.stats.first, s.stats.second):
            assert np.all(np.isfinite(a))
        assert not s.means.flags.writeable and not s.covariances.flags.writeable
        cov = s.full_covariances()
        np.testing.assert_array_equal(cov, np.swapaxes(cov, 1, 2))
        assert np.all(np.linalg.eigvalsh(cov) > 0)
        np.testing.assert_allclose(s.resp.sum(axis=1), 1.0, atol=1e-12)
        empty = data.empty_rows  # caller's row order
        assert empty.size >= n_empty
        np.testing.assert_allclose(s.resp[empty], np.broadcast_to(s.weights, (empty.size, K)), rtol=1e-12)
        imp = em_gmm.impute(s, data, config)
        assert np.all(np.isfinite(imp))
        np.testing.assert_array_equal(imp[~missing], Xn[~missing])  # bit for bit
        assert imp[~missing].tobytes() == Xn[~missing].tobytes()
    # the cached log-likelihood is the sum of the per-row observed log-likelihoods
    s = states[-1]
    per_row = em_gmm.observed_log_likelihood(data, s.weights, s.means, s.covariances, covariance_type)
    assert s.log_likelihood == pytest.approx(per_row.sum(), rel=1e-10, abs=1e-10)
    assert np.all(per_row[data.empty_rows] == 0.0)


def test_step_is_pure():
    rng = np.random.default_rng(5)
    X, _ = mixture_sample(rng, 80, 3, 2)
    X[rng.random(X.shape) < 0.3] = np.nan
    data = em_gmm.prepare(X)
    config = EMConfig(n_components=2)
    s0 = em_gmm.init(data, config, rng)
    before = (s0.weights.copy(), s0.means.copy(), s0.covariances.copy())
    s1 = em_gmm.step(s0, data, config)
    s1b = em_gmm.step(s0, data, config)
    assert s1.iteration == s0.iteration + 1
    for a, b in zip(before, (s0.weights, s0.means, s0.covariances)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(s1.covariances, s1b.covariances)
    with pytest.raises(ValueError):
        s0.means[0, 0] = 1.0  # read-only


# ----------------------------------------------------------------------------- naive ablation
def _fig_naive_case():
    rng = np.random.default_rng(7)
    n = 400
    X = rng.multivariate_normal([5.0, 5.0], [[1.25, 2.25], [2.25, 4.25]], size=n)
    missing = np.zeros(X.shape, dtype=bool)
    missing[:, 1] = rng.random(n) < 0.5
    return em_gmm.prepare(np.where(missing, np.nan, X)), missing


def test_naive_refit_shrinks_the_missing_variance_and_loses_likelihood():
    data, missing = _fig_naive_case()
    frac_missing = missing[:, 1].mean()
    fixed = {}
    for variant in ("em", "naive"):
        config = EMConfig(n_components=1, reg_covar=0.0, variant=variant)
        fixed[variant] = iterate_to_fixed_point(data, config, em_gmm.init(data, config, np.random.default_rng(0)))
    em, naive = fixed["em"], fixed["naive"]
    S = em.covariances[0]
    q = S[1, 1] - S[0, 1] ** 2 / S[0, 0]  # residual variance of y given x, the dropped C term
    # same regression line (means and cross-covariance); the missing variance loses exactly frac * Q
    np.testing.assert_allclose(naive.means, em.means, atol=1e-8)
    np.testing.assert_allclose(naive.covariances[0, :, 0], S[:, 0], atol=1e-8)
    assert naive.covariances[0, 1, 1] == pytest.approx(S[1, 1] - frac_missing * q, abs=1e-8)
    assert naive.covariances[0, 1, 1] < S[1, 1] - 0.05
    # EM sits at the ML estimate; the naive fixed point is worse, and one naive step from the ML
    # estimate decreases the likelihood (no monotonicity guarantee without the C term)
    assert naive.log_likelihood < em.log_likelihood - 1.0
    cfg_naive = EMConfig(n_components=1, reg_covar=0.0, variant="naive")
    start = em_gmm.init_from_parameters(data, cfg_naive, em.weights, em.means, em.covariances)
    assert em_gmm.step(start, data, cfg_naive).log_likelihood < em.log_likelihood - 1.0


def test_mean_impute_variant_fits_the_filled_matrix():
    data, missing = _fig_naive_case()
    config = EMConfig(n_components=1, reg_covar=0.0, variant="mean_impute", tol=1e-10)
    res = em_gmm.fit(data, config, np.random.default_rng(0))
    filled = data.mean_filled
    np.testing.assert_allclose(res.state.means[0], filled.mean(axis=0), atol=1e-10)
    np.testing.assert_allclose(res.state.covariances[0], np.cov(filled.T, bias=True), atol=1e-10)
    # its objective is the complete-data likelihood of the filled matrix, its log_likelihood the observed one
    ll_obs = em_gmm.observed_log_likelihood(data, res.state.weights, res.state.means, res.state.covariances, "full")
    assert res.state.log_likelihood == pytest.approx(ll_obs.sum())
    assert res.state.objective != pytest.approx(res.state.log_likelihood)
    imp = em_gmm.impute(res.state, data, config)
    np.testing.assert_array_equal(imp[missing], np.broadcast_to(data.col_mean, imp.shape)[missing])


# ----------------------------------------------------------------------------- gaussian kernels
def _brute_force(X, missing, mean, cov):
    """Per-row conditioning with dense linear algebra (scipy.stats / np.linalg.solve)."""
    n, D = X.shape
    loglik = np.zeros(n)
    xhat = np.where(missing, np.nan, X)
    Q = {}
    for i in range(n):
        o, m = ~missing[i], missing[i]
        if not o.any():
            xhat[i] = mean
            continue
        loglik[i] = multivariate_normal(mean[o], cov[np.ix_(o, o)]).logpdf(X[i, o])
        if m.any():
            xhat[i, m] = mean[m] + cov[np.ix_(m, o)] @ np.linalg.solve(cov[np.ix_(o, o)], X[i, o] - mean[o])
            Q[tuple(np.flatnonzero(m))] = cov[np.ix_(m, m)] - cov[np.ix_(m, o)] @ np.linalg.solve(
                cov[np.ix_(o, o)], cov[np.ix_(o, m)]
            )
    return loglik, xhat, Q


def _distinct_patterns(rng, D, m, count):
    seen = set()
    while len(seen) < count:
        seen.add(tuple(sorted(rng.choice(D, size=m, replace=False))))
    return [list(p) for p in seen]


@pytest.mark.parametrize("sort", [False, True])
def test_observed_gaussian_code_paths_agree_with_brute_force(sort):
    """Every kernel path against dense per-row conditioning, in the caller's row order (groups that
    happen to be contiguous but not ordered by pattern) and in the sorted layout EM uses."""
    rng = np.random.default_rng(2024)
    D = 20
    A = rng.normal(size=(D, D))
    cov = A @ A.T / D + 0.5 * np.eye(D)
    mean = rng.normal(size=D)
    blocks = []  # (missing rows, expected path)
    # loop over a few shared patterns (m = 7, 4 patterns, 60 rows)
    pats = _distinct_patterns(rng, D, 7, 4)
    blocks.append(([pats[i % 4] for i in range(60)], "loop"))
    # batched small blocks, every row its own pattern (m = 5, 90 distinct patterns)
    blocks.append((_distinct_patterns(rng, D, 5, 90), "own"))
    # batched small blocks with shared patterns gathered per row (m = 2: 150 rows on 100 patterns)
    pats = _distinct_patterns(rng, D, 2, 100)
    blocks.append((pats + pats[:50], "gather"))
    # LAPACK per pattern for m > SMALL_BLOCK (m = 15, 70 distinct patterns)
    blocks.append((_distinct_patterns(rng, D, 15, 70), "lapack"))
    rows = [p for b, _ in blocks for p in b]
    n = len(rows) + 5 + 3  # plus 5 complete rows and 3 empty rows
    missing = np.zeros((n, D), dtype=bool)
    for i, p in enumerate(rows):
        missing[i, p] = True
    missing[-3:] = True
    X = rng.multivariate_normal(mean, cov, size=n)
    ref_ll, ref_xhat, ref_Q = _brute_force(X, missing, mean, cov)
    if sort:
        patterns = group_patterns(missing, sort=True)
        X, missing, ref_ll, ref_xhat = X[patterns.perm], missing[patterns.perm], ref_ll[patterns.perm], ref_xhat[patterns.perm]
    else:
        patterns = group_patterns(missing)
        # the own-pattern group is a contiguous run of rows whose patterns are not in sorted order
        g5 = next(g for g in patterns.groups if g.n_missing == 5)
        assert np.all(np.diff(g5.rows) == 1) and np.any(np.diff(g5.inverse) < 0)
    Xf = np.where(missing, 0.0, X)

    kinds = {}
    for g in patterns.groups:
        if g.n_missing == 0:
            continue
        if g.block_index is None:
            kinds[g.n_missing] = "lapack" if g.n_missing > SMALL_BLOCK else "loop"
        else:
            kinds[g.n_missing] = "own" if g.n_unique == g.rows.size else "gather"
    assert kinds == {7: "loop", 5: "own", 2: "gather", 15: "lapack"}

    precision, logdet = precision_and_logdet(cov[None])
    loglik, xhat, cond = observed_gaussian(Xf, patterns, mean, precision[0], logdet[0])
    np.testing.assert_allclose(loglik, ref_ll, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(xhat, ref_xhat, rtol=1e-9, atol=1e-9)
    assert np.array_equal(xhat[~missing], X[~missing])
    for g, blocks_g in zip(patterns.groups, cond):
        assert blocks_g.shape == (g.n_unique, g.n_missing, g.n_missing)
        for u, mis in enumerate(g.unique_mis):
            if g.n_missing:
                np.testing.assert_allclose(blocks_g[u], ref_Q[tuple(mis)], rtol=1e-9, atol=1e-10)
    ll_only, none_xhat, none_cond = observed_gaussian(Xf, patterns, mean, precision[0], logdet[0], conditionals=False)
    np.testing.assert_allclose(ll_only, loglik, rtol=1e-12)
    assert none_xhat is None and none_cond is None


def test_observed_diagonal_agrees_with_brute_force():
    rng = np.random.default_rng(3)
    D, n = 6, 40
    var = rng.uniform(0.5, 2.0, size=D)
    mean = rng.normal(size=D)
    X = rng.normal(size=(n, D)) * np.sqrt(var) + mean
    missing = rng.random((n, D)) < 0.4
    missing[0] = True
    ll, xhat = observed_diagonal(np.where(missing, 0.0, X), missing, mean, var)
    ref_ll, ref_xhat, _ = _brute_force(X, missing, mean, np.diag(var))
    np.testing.assert_allclose(ll, ref_ll, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(xhat, ref_xhat, rtol=1e-12)


# ----------------------------------------------------------------------------- fit: loop, stops, restarts
@pytest.fixture(scope="module")
def clustered():
    rng = np.random.default_rng(42)
    X, _ = mixture_sample(rng, 240, 3, 3, spread=5.0)
    truth = X.copy()
    X[rng.random(X.shape) < 0.25] = np.nan
    return em_gmm.prepare(X), truth


def test_fit_stops_on_tol_and_records_a_consistent_trace(clustered):
    data, truth = clustered
    config = EMConfig(n_components=3, tol=1e-6, max_iter=500)
    calls = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        res = em_gmm.fit(data, config, np.random.default_rng(0), callback=calls.append, truth=truth)
    assert res.stop_reason == "tol" and res.converged and "Converged" in res.message
    assert 0 < res.n_iter < config.max_iter
    assert res.n_iter == res.state.iteration
    assert len(res.trace) == res.n_iter + 1
    assert [t["iteration"] for t in res.trace] == list(range(res.n_iter + 1))
    assert [s.iteration for s in calls] == list(range(1, res.n_iter + 1))  # one callback per step
    assert calls[-1] is res.state
    lls = np.array([t["log_likelihood"] for t in res.trace])
    assert np.all(np.diff(lls) > -1e-8 * np.abs(lls[:-1]))
    assert abs(lls[-1] - lls[-2]) / data.n_fit < config.tol
    assert res.trace[-1]["log_likelihood"] == res.state.log_likelihood
    np.testing.assert_array_equal(res.trace[-1]["means"], res.state.means)
    # the imputation error recorded in the trace is the error of impute() at that state
    imp = em_gmm.impute(res.state, data, config)
    err = (imp - truth)[data.missing]
    assert res.trace[-1]["rmse"] == pytest.approx(np.sqrt(np.mean(err**2)), rel=1e-12)
    assert res.trace[-1]["mae"] == pytest.approx(np.mean(np.abs(err)), rel=1e-12)
    assert res.trace[-1]["rmse"] < res.trace[0]["rmse"]
    assert sum(res.trace[-1]["hard_counts"]) == data.n_fit


def test_fit_without_truth_records_no_error(clustered):
    data, _ = clustered
    with pytest.warns(ConvergenceWarning):
        res = em_gmm.fit(data, EMConfig(n_components=2, max_iter=5, tol=0.0), np.random.default_rng(0))
    assert all("rmse" not in t and "mae" not in t for t in res.trace)


def test_fit_max_iter_warns(clustered):
    data, _ = clustered
    with pytest.warns(ConvergenceWarning, match="max_iter=3"):
        res = em_gmm.fit(data, EMConfig(n_components=3, max_iter=3, tol=1e-12), np.random.default_rng(0))
    assert res.stop_reason == "max_iter" and not res.converged
    assert res.n_iter == 3 and len(res.trace) == 4


def test_fit_max_iter_zero_returns_the_initialisation(clustered):
    data, _ = clustered
    config = EMConfig(n_components=2, max_iter=0)
    with pytest.warns(ConvergenceWarning):
        res = em_gmm.fit(data, config, np.random.default_rng(9))
    start = em_gmm.init(data, config, np.random.default_rng(9))
    np.testing.assert_array_equal(res.state.means, start.means)
    assert res.n_iter == 0 and len(res.trace) == 1


def test_fit_is_deterministic_for_a_seed(clustered):
    data, _ = clustered
    config = EMConfig(n_components=3, init="random", n_init=2, tol=1e-4)
    a = em_gmm.fit(data, config, np.random.default_rng(123))
    b = em_gmm.fit(data, config, np.random.default_rng(123))
    assert a.n_iter == b.n_iter and a.restart_objectives == b.restart_objectives
    for key in ("weights", "means", "covariances"):
        np.testing.assert_array_equal(getattr(a.state, key), getattr(b.state, key))
    starts = [em_gmm.init(data, config, np.random.default_rng(s)).means for s in (123, 124)]
    assert not np.allclose(starts[0], starts[1])  # the seed matters


def test_restarts_keep_the_best_objective():
    rng = np.random.default_rng(8)
    X, _ = mixture_sample(rng, 200, 2, 5, spread=6.0)
    X[rng.random(X.shape) < 0.2] = np.nan
    data = em_gmm.prepare(X)
    config = EMConfig(n_components=5, init="random", n_init=6, tol=1e-4)
    res = em_gmm.fit(data, config, np.random.default_rng(1))
    objs = np.array(res.restart_objectives)
    assert objs.size == 6
    assert np.ptp(objs) > 1.0  # the restarts found different local optima on this design
    assert res.state.objective == objs.max()
    # restart r continues the rng stream: the first restart is the single-run fit with the same seed
    single = em_gmm.fit(data, EMConfig(n_components=5, init="random", n_init=1, tol=1e-4), np.random.default_rng(1))
    assert single.state.objective == objs[0]


@pytest.mark.parametrize("covariance_type", ["full", "diag"])
def test_fit_stops_on_a_constant_column(covariance_type):
    rng = np.random.default_rng(1)
    X = np.column_stack([rng.normal(size=(50, 2)), np.full(50, 3.0)])
    config = EMConfig(n_components=1, reg_covar=0.0, covariance_type=covariance_type)
    data = em_gmm.prepare(X)
    cov = np.eye(3)[None] if covariance_type == "full" else np.ones((1, 3))
    start = em_gmm.init_from_parameters(data, config, [1.0], X.mean(axis=0)[None], cov)
    with pytest.warns(ConvergenceWarning):
        res = em_gmm.fit(data, config, rng, init_state=start)
    assert res.stop_reason == "degenerate" and not res.converged
    assert res.state is start  # the last valid state is returned
    assert "reg_covar" in res.message


def test_fit_always_stops_on_a_duplicated_column():
    """With reg_covar=0 an exactly duplicated column makes the covariance numerically singular: the fit must
    end as degenerate (relative pivot threshold in gaussian.cholesky), never "converge" on round-off."""
    outcomes = []
    for seed in range(20):
        rng = np.random.default_rng(seed)
        x = rng.normal(size=(50, 1))
        X = np.hstack([x, x, rng.normal(size=(50, 1))])
        config = EMConfig(n_components=1, reg_covar=0.0)
        data = em_gmm.prepare(X)
        start = em_gmm.init_from_parameters(data, config, [1.0], X.mean(axis=0)[None], np.eye(3)[None])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            outcomes.append(em_gmm.fit(data, config, rng, init_state=start).stop_reason)
    assert outcomes == ["degenerate"] * 20


def test_a_ridge_handles_a_duplicated_column():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(50, 1))
    X = np.hstack([x, x, rng.normal(size=(50, 1))])
    res = em_gmm.fit(em_gmm.prepare(X), EMConfig(n_components=1, reg_covar=1e-6), rng)
    assert res.stop_reason == "tol"
    cov = res.state.covariances[0]
    assert np.linalg.eigvalsh(cov).min() == pytest.approx(1e-6, rel=1e-3)  # the ridge sets the floor
    np.testing.assert_allclose(cov[0, 0], cov[0, 1] + 1e-6, rtol=1e-12)


@pytest.mark.parametrize("covariance_type", ["full", "diag"])
def test_components_on_distinct_points_collapse(covariance_type):
    points = np.array([[0.0, 0.0], [5.0, 0.0], [0.0, 5.0]])
    X = np.repeat(points, 5, axis=0)
    config = EMConfig(n_components=3, reg_covar=0.0, covariance_type=covariance_type)
    data = em_gmm.prepare(X)
    cov = np.stack([np.eye(2)] * 3) if covariance_type == "full" else np.ones((3, 2))
    start = em_gmm.init_from_parameters(data, config, np.ones(3) / 3, points + 0.1, cov)
    with pytest.warns(ConvergenceWarning):
        res = em_gmm.fit(data, config, np.random.default_rng(0), init_state=start)
    assert res.stop_reason == "degenerate"
    assert np.all(np.isfinite(res.state.covariances))
    # from k-means every restart starts collapsed: fit raises instead of returning garbage
    with pytest.raises(DegenerateCovarianceError, match="reg_covar"):
        em_gmm.fit(data, EMConfig(n_components=3, reg_covar=0.0, covariance_type=covariance_type, n_init=2),
                   np.random.default_rng(0))


# ----------------------------------------------------------------------------- bad input
def test_prepare_rejects_bad_data():
    with pytest.raises(BadInputError, match="non-numeric"):
        em_gmm.prepare(np.array([["a", 1.0], [2.0, 3.0]], dtype=object))
    with pytest.raises(BadInputError, match="infinite"):
        em_gmm.prepare(np.array([[np.inf, 1.0], [2.0, 3.0], [1.0, 1.0]]))
    with pytest.raises(BadInputError, match="no observed value"):
        em_gmm.prepare(np.array([[1.0, np.nan], [2.0, np.nan], [3.0, np.nan]]))
    with pytest.raises(BadInputError, match="'b' \\(column 1\\)"):
        em_gmm.prepare(np.array([[1.0, np.nan], [2.0, np.nan]]), columns=["a", "b"])
    with pytest.raises(BadInputError, match="At least two rows"):
        em_gmm.prepare(np.array([[1.0, 2.0], [np.nan, np.nan]]))
    with pytest.raises(BadInputError, match="2-D"):
        em_gmm.prepare(np.arange(4.0))
    with pytest.raises(BadInputError, match="NaN value"):
        em_gmm.prepare(np.array([[np.nan, 1.0], [2.0, 3.0]]), missing=np.zeros((2, 2), bool))


def test_init_rejects_too_many_components():
    data = em_gmm.prepare(np.array([[1.0, 2.0], [2.0, 1.0], [3.0, 3.0], [np.nan, np.nan]]))
    with pytest.raises(BadInputError, match="n_components=4 is larger than the number of rows.*\\(3\\)"):
        em_gmm.init(data, EMConfig(n_components=4), np.random.default_rng(0))


def test_init_from_parameters_checks_shapes_and_weights():
    data = em_gmm.prepare(np.random.default_rng(0).normal(size=(10, 3)))
    config = EMConfig(n_components=2)
    good = (np.array([0.5, 0.5]), np.zeros((2, 3)), np.stack([np.eye(3)] * 2))
    em_gmm.init_from_parameters(data, config, *good)
    with pytest.raises(BadInputError, match="expected \\(2,\\), \\(2, 3\\), \\(2, 3, 3\\)"):
        em_gmm.init_from_parameters(data, config, good[0], np.zeros((2, 2)), good[2])
    with pytest.raises(BadInputError, match="covariances \\(2, 3\\)"):
        em_gmm.init_from_parameters(data, config, good[0], good[1], np.ones((2, 3)))
    with pytest.raises(BadInputError, match="sum to one"):
        em_gmm.init_from_parameters(data, config, np.array([0.5, 0.6]), good[1], good[2])
    with pytest.raises(DegenerateCovarianceError):
        em_gmm.init_from_parameters(data, config, good[0], good[1], np.zeros((2, 3, 3)))


def test_fit_rejects_truth_of_wrong_shape(clustered):
    data, truth = clustered
    with pytest.raises(BadInputError, match="truth has shape"):
        em_gmm.fit(data, EMConfig(), np.random.default_rng(0), truth=truth[:, :2])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(n_components=0), "n_components"),
        (dict(n_components=1.5), "n_components"),
        (dict(covariance_type="spherical"), "covariance_type"),
        (dict(reg_covar=-1.0), "reg_covar"),
        (dict(reg_covar=float("nan")), "reg_covar"),
        (dict(tol=-1e-3), "tol"),
        (dict(max_iter=-1), "max_iter"),
        (dict(init="pca"), "init"),
        (dict(n_init=0), "n_init"),
        (dict(variant="hard"), "variant"),
    ],
)
def test_config_rejects_bad_settings(kwargs, match):
    with pytest.raises(BadInputError, match=match):
        EMConfig(**kwargs)


def test_every_variant_and_init_runs(clustered):
    data, _ = clustered
    for variant, init in itertools.product(em_gmm.VARIANTS, em_gmm.INIT_METHODS):
        config = EMConfig(n_components=2, variant=variant, init=init, max_iter=50, tol=1e-3)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            res = em_gmm.fit(data, config, np.random.default_rng(0))
        imp = em_gmm.impute(res.state, data, config)
        assert np.all(np.isfinite(imp)), (variant, init)
        np.testing.assert_array_equal(imp[~data.missing], data.X[~data.missing])
