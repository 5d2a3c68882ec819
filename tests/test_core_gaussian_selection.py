"""Tests of explorer.core.mixtures.gaussian_selection: the Gaussian-mixture selection model (logistic self-masking)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import integrate
from scipy.special import expit, log_expit
from scipy.stats import multivariate_normal

from explorer.core.mixtures import em_gmm
from explorer.core.mixtures import gaussian_selection as gs
from explorer.core.validation import BadInputError


def _params(K: int) -> gs.SelectionParams:
    if K == 1:
        w, mu, cov = [1.0], [[0.5, -0.3]], [[[1.0, 0.5], [0.5, 1.5]]]
    else:
        w = [0.35, 0.65]
        mu = [[-1.0, 0.5], [1.2, -0.4]]
        cov = [[[0.8, -0.3], [-0.3, 0.6]], [[1.1, 0.4], [0.4, 0.9]]]
    return gs.SelectionParams(np.array(w), np.array(mu), np.array(cov), np.array([0.4, -0.2]), np.array([-1.2, 0.8]))


def _density_2d(params: gs.SelectionParams):
    """The mixture density of a bivariate mixture as a fast scalar function (closed-form 2 x 2 algebra)."""
    comps = []
    for k in range(params.n_components):
        (s00, s01), (_, s11) = params.covariances[k]
        det = s00 * s11 - s01 * s01
        comps.append((params.weights[k] / (2 * np.pi * np.sqrt(det)), params.means[k], s00 / det, s01 / det,
                      s11 / det))

    def pdf(x0, x1):
        total = 0.0
        for c, m, p11, p01, p00 in comps:  # precision = [[s11, -s01], [-s01, s00]] / det
            u, v = x0 - m[0], x1 - m[1]
            total += c * np.exp(-0.5 * (p00 * u * u - 2 * p01 * u * v + p11 * v * v))
        return total

    return pdf


def _brute_row(params: gs.SelectionParams, row: np.ndarray) -> float:
    """p(x^o, r) of one row by scipy quadrature of the joint density times the selection factors."""
    pdf = _density_2d(params)
    ref = multivariate_normal(params.means[0], params.covariances[0]).pdf([0.1, 0.2]) * params.weights[0]
    if params.n_components == 1:  # the hand-coded density is checked against scipy's
        assert pdf(0.1, 0.2) == pytest.approx(ref, rel=1e-12)
    keep = lambda d, v: expit(-(params.a[d] + params.b[d] * v))  # noqa: E731  P(R_d = 0 | x_d)
    seen = lambda d, v: expit(params.a[d] + params.b[d] * v)  # noqa: E731

    def joint(x0, x1):
        return pdf(x0, x1)

    lim = 12.0
    if np.isnan(row).all():
        val, _ = integrate.dblquad(lambda x1, x0: joint(x0, x1) * keep(0, x0) * keep(1, x1), -lim, lim, -lim, lim,
                                   epsabs=1e-11, epsrel=1e-9)
    elif np.isnan(row[0]):
        val, _ = integrate.quad(lambda x0: joint(x0, row[1]) * keep(0, x0), -lim, lim, epsabs=1e-13, epsrel=1e-11)
        val *= seen(1, row[1])
    elif np.isnan(row[1]):
        val, _ = integrate.quad(lambda x1: joint(row[0], x1) * keep(1, x1), -lim, lim, epsabs=1e-13, epsrel=1e-11)
        val *= seen(0, row[0])
    else:
        val = joint(*row) * seen(0, row[0]) * seen(1, row[1])
    return float(np.log(val))


ROWS = np.array([[np.nan, 0.7], [1.3, np.nan], [np.nan, np.nan], [0.2, -1.1], [np.nan, -2.0]])


@pytest.mark.parametrize("K", [1, 2])
def test_log_likelihood_matches_brute_force_integration(K):
    params = _params(K)
    got = gs.log_likelihood(params, ROWS)
    want = np.array([_brute_row(params, r) for r in ROWS])
    np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-9)


def test_mar_slopes_give_the_gmm_likelihood_times_the_missingness_factor():
    rng = np.random.default_rng(3)
    D = 3
    mix = em_gmm.EMConfig(n_components=2)
    w = np.array([0.4, 0.6])
    mu = rng.normal(size=(2, D))
    A = rng.normal(size=(2, D, D))
    cov = A @ np.swapaxes(A, 1, 2) + np.eye(D)
    X = rng.normal(size=(40, D)) * 1.5
    miss = rng.random(X.shape) < 0.35
    miss[0] = True  # a row with nothing observed (importance sampling, 3 missing: the integrand is constant)
    miss[1] = [True, True, False]
    X = np.where(miss, np.nan, X)
    a = np.array([0.3, -0.5, 1.1])
    params = gs.SelectionParams(w, mu, cov, a, np.zeros(D))
    got = gs.log_likelihood(params, X)
    mar = em_gmm.observed_log_likelihood(em_gmm.prepare(X), w, mu, cov, mix.covariance_type)
    factor = np.where(miss, log_expit(-a), log_expit(a)).sum(axis=1)
    np.testing.assert_allclose(got, mar + factor, rtol=1e-10, atol=1e-10)


def _self_masked(seed: int, n: int = 1500, a0: float = 1.5, b0: float = -1.5):
    rng = np.random.default_rng(seed)
    X = rng.multivariate_normal([1.0, -1.0], [[1.0, 0.6], [0.6, 1.0]], size=n)
    miss = np.zeros(X.shape, dtype=bool)
    miss[:, 0] = rng.random(n) > expit(a0 + b0 * X[:, 0])  # large values of column 0 hidden
    return X, miss


@pytest.fixture(scope="module")
def recovery():
    X, miss = _self_masked(7)
    data = gs.prepare(np.where(miss, np.nan, X))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", gs.ConvergenceWarning)
        res = gs.fit(data, gs.SelectionConfig(max_iter=150, tol=1e-6), np.random.default_rng(0))
    mar = em_gmm.fit(em_gmm.prepare(np.where(miss, np.nan, X)), em_gmm.EMConfig(), np.random.default_rng(0))
    return X, miss, data, res, mar


def test_recovers_the_self_masking_slope_and_the_mean(recovery):
    X, miss, data, res, mar = recovery
    p = res.state.params
    sample = X[:, 0].mean()  # the mean of the complete column (removes the sampling noise shared by both fits)
    # Over 12 simulated data sets of this design (experiments/gaussian_selection_demo.py, "synthetic check" in
    # results/gaussian_selection.md) the selection fit's mean minus the complete-data mean had standard deviation
    # about 0.06, the MAR fit's bias was about -0.37, and the fitted slope had mean -1.48 and standard deviation
    # about 0.17. The bounds below are about 3.3 standard deviations (0.2 for the mean, 0.55 for the slope).
    assert abs(p.means[0, 0] - sample) < 0.2
    assert abs(p.means[0, 0] - sample) < 0.5 * abs(mar.state.means[0, 0] - sample)  # MAR is biased (hides the large)
    assert mar.state.means[0, 0] < sample - 0.2
    assert abs(p.b[0] - (-1.5)) < 0.55
    assert p.b[1] == 0.0  # never missing: no information on its slope


def test_quadrature_objective_increases_and_agrees_with_numerical_integration(recovery):
    X, miss, data, res, _ = recovery
    ll = np.array([s["log_likelihood"] for s in res.trace])
    assert np.all(np.diff(ll) > -1e-8 * np.abs(ll[1:]))
    assert ll[-1] > ll[0] + 10.0  # the NMAR fit improves on its MAR start
    exact = gs.log_likelihood(res.state.params, data.X).sum()
    assert res.state.log_likelihood == pytest.approx(exact, rel=1e-8)


def test_weights_and_responsibilities_sum_to_one_and_are_finite():
    rng = np.random.default_rng(11)
    X = np.vstack([rng.normal(-2, 1, size=(60, 3)), rng.normal(2, 1, size=(60, 3))])
    miss = rng.random(X.shape) < 0.3
    miss[:5] = True  # rows with nothing observed
    miss[5:10, :] = [True, True, True]
    miss[10:20] = [True, True, False]
    data = gs.prepare(np.where(miss, np.nan, X))
    cfg = gs.SelectionConfig(n_components=2, max_iter=3, e_step="importance", n_samples=50)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", gs.ConvergenceWarning)
        res = gs.fit(data, cfg, np.random.default_rng(0))
    st = res.state
    np.testing.assert_allclose(st.resp.sum(axis=1), 1.0, rtol=1e-12)
    assert st.params.weights.sum() == pytest.approx(1.0)
    for arr in (st.resp, st.params.means, st.params.covariances, st.params.a, st.params.b):
        assert np.all(np.isfinite(arr))
    assert np.isfinite(st.log_likelihood) and 0 < st.min_ess <= cfg.n_samples
    # the importance-sampling estimate is within Monte Carlo error of the integrated likelihood
    exact = gs.log_likelihood(st.params, data.X).sum()
    assert abs(st.log_likelihood - exact) < 0.05 * data.n_samples ** 0.5


def test_mar_columns_keep_a_zero_slope():
    X, miss = _self_masked(2, n=300)
    data = gs.prepare(np.where(miss, np.nan, X))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", gs.ConvergenceWarning)
        res = gs.fit(data, gs.SelectionConfig(mar_columns=(0,), max_iter=5), np.random.default_rng(0))
    p = res.state.params
    assert p.b[0] == 0.0
    frac = 1.0 - miss[:, 0].mean()
    assert p.a[0] == pytest.approx(np.log(frac / (1 - frac)))


def test_impute_keeps_observed_entries_and_matches_the_nmar_conditional_mean():
    params = _params(2)
    X = np.array([[np.nan, 0.7], [1.3, np.nan], [np.nan, np.nan], [0.2, -1.1]])
    draws, mean = gs.impute(params, X, rng=np.random.default_rng(5), n_draws=4000)
    obs = ~np.isnan(X)
    assert draws.shape == (4000, 4, 2) and not np.isnan(draws).any() and not np.isnan(mean).any()
    assert np.all(draws[:, obs] == X[obs]) and np.all(mean[obs] == X[obs])
    # oracle: E[x0 | x1 = 0.7, r = (0, 1)] by scipy quadrature
    pdf = _density_2d(params)

    def f(x0, power):
        joint = pdf(x0, 0.7)
        return x0**power * joint * expit(-(params.a[0] + params.b[0] * x0))

    want = integrate.quad(f, -12, 12, args=(1,))[0] / integrate.quad(f, -12, 12, args=(0,))[0]
    assert mean[0, 0] == pytest.approx(want, rel=1e-7)
    # the exact (rejection) draws agree with the mean: 4 standard errors
    for i, d in [(0, 0), (1, 1), (2, 0), (2, 1)]:
        col = draws[:, i, d]
        assert abs(col.mean() - mean[i, d]) < 4 * col.std() / np.sqrt(col.size)


def test_impute_with_zero_slopes_is_the_mar_conditional_mean():
    rng = np.random.default_rng(4)
    p = _params(2)
    params = gs.SelectionParams(p.weights, p.means, p.covariances, p.a, np.zeros(2))
    X = rng.normal(size=(30, 2))
    miss = rng.random(X.shape) < 0.3
    miss[miss.all(axis=1), 0] = False
    X = np.where(miss, np.nan, X)
    _, mean = gs.impute(params, X, rng=rng, n_draws=2)
    emd, cfg = em_gmm.prepare(X), em_gmm.EMConfig(n_components=2)
    state = em_gmm.init_from_parameters(emd, cfg, p.weights, p.means, p.covariances)
    np.testing.assert_allclose(mean, em_gmm.impute(state, emd, cfg), rtol=1e-9, atol=1e-9)


def test_bad_inputs_raise_clearly():
    X, miss = _self_masked(1, n=50)
    Xn = np.where(miss, np.nan, X)
    data = gs.prepare(Xn)
    rng = np.random.default_rng(0)
    with pytest.raises(BadInputError, match="out of range"):
        gs.init(data, gs.SelectionConfig(mar_columns=(2,)), rng)
    with pytest.raises(BadInputError, match="mar_columns"):
        gs.SelectionConfig(mar_columns=("a",))
    with pytest.raises(BadInputError, match="e_step"):
        gs.SelectionConfig(e_step="gibbs")
    all_missing = Xn.copy()
    all_missing[:, 1] = np.nan
    with pytest.raises(BadInputError, match="no observed value"):
        gs.prepare(all_missing)
    with pytest.raises(BadInputError, match="n_components=4 is larger"):
        gs.init(gs.prepare(Xn[:3]), gs.SelectionConfig(n_components=4), rng)
    with pytest.raises(BadInputError, match="rng"):
        gs.impute(_params(1), Xn, rng=42)
    with pytest.raises(BadInputError, match="features"):
        gs.log_likelihood(_params(1), np.zeros((3, 3)))
    bad = gs.SelectionParams(np.array([1.0]), np.zeros((1, 2)), np.array([[[1.0, 2.0], [2.0, 1.0]]]), np.zeros(2),
                             np.zeros(2))
    with pytest.raises(BadInputError, match="not positive definite"):
        gs.log_likelihood(bad, Xn)


def test_impute_importance_sampled_mean_agrees_with_the_exact_draws():
    """Three missing values: the mean comes from importance sampling, the draws from rejection (both unbiased)."""
    rng = np.random.default_rng(8)
    cov = np.array([[[1.0, 0.3, 0.2], [0.3, 1.0, -0.4], [0.2, -0.4, 1.5]]])
    params = gs.SelectionParams(np.array([1.0]), np.array([[0.5, 0.0, -1.0]]), cov, np.array([0.2, -0.3, 0.5]),
                                np.array([-1.5, 1.0, 0.7]))
    X = np.array([[np.nan, np.nan, np.nan], [0.3, np.nan, np.nan]])
    draws, mean = gs.impute(params, X, rng=rng, n_draws=4000, n_samples=20000)
    assert draws[:, 1, 0].tolist() == [0.3] * 4000
    for i, d in [(0, 0), (0, 1), (0, 2), (1, 1), (1, 2)]:
        col = draws[:, i, d]
        assert abs(col.mean() - mean[i, d]) < 4 * col.std() / np.sqrt(col.size)
    # b_0 < 0: large values of x_0 are the ones hidden, so a missing x_0 is likely above its mean
    assert mean[0, 0] > params.means[0, 0]


def test_step_is_pure_and_importance_sampling_needs_an_rng():
    X, miss = _self_masked(3, n=200)
    data = gs.prepare(np.where(miss, np.nan, X))
    cfg = gs.SelectionConfig(e_step="importance", n_samples=30)
    state = gs.init_from_parameters(data, cfg, _params(1), np.random.default_rng(0))
    before = (state.params.means.copy(), state.params.b.copy(), state.resp.copy(), state.log_likelihood)
    new = gs.step(state, data, cfg, np.random.default_rng(1))
    assert new.iteration == 1 and new is not state
    np.testing.assert_array_equal(state.params.means, before[0])
    np.testing.assert_array_equal(state.params.b, before[1])
    np.testing.assert_array_equal(state.resp, before[2])
    assert state.log_likelihood == before[3]
    assert not new.params.means.flags.writeable
    with pytest.raises(BadInputError, match="rng"):
        gs.step(state, data, cfg, None)
