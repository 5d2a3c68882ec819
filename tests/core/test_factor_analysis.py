"""Tests of explorer.core.factor.factor_analysis: PPCA closed form, exact EM for FA / PPCA with missing data,
observed-data log-likelihoods and the conditional p(x_m | x_o).

Oracles: scikit-learn's PCA (PPCA formula) and FactorAnalysis (achieved log-likelihood), dense
Gaussian conditioning / scipy densities of W W^T + Psi, the stationarity of the observed-data
log-likelihood at the EM fixed point (finite differences), recovery of known parameters under MCAR.
Properties (hypothesis): the observed-data log-likelihood never decreases; observed entries are
never altered.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from sklearn.decomposition import PCA, FactorAnalysis

from explorer.core.factor import factor_analysis as fa
from explorer.core.factor.factor_analysis import ConvergenceWarning, FAConfig, FAParams
from explorer.core.validation import BadInputError


def fa_sample(rng, n, D, q, *, psi_range=(0.3, 0.8)):
    W = rng.normal(size=(D, q))
    psi = rng.uniform(*psi_range, size=D)
    mu = rng.normal(size=D)
    X = mu + rng.normal(size=(n, q)) @ W.T + rng.normal(size=(n, D)) * np.sqrt(psi)
    return X, FAParams.from_arrays(mu, W, psi)


def mcar(rng, X, p):
    miss = rng.random(X.shape) < p
    Xm = X.copy()
    Xm[miss] = np.nan
    return Xm, miss


def iterate(data, config, state, n_steps):
    states = [state]
    for _ in range(n_steps):
        states.append(fa.step(states[-1], data, config))
    return states


def dense_loglik(params, x):
    o = ~np.isnan(x)
    if not o.any():
        return 0.0
    C = params.covariance()
    return stats.multivariate_normal(params.mean[o], C[np.ix_(o, o)]).logpdf(x[o])


# ----------------------------------------------------------------------------- PPCA closed form
def test_ppca_closed_form_matches_sklearn_pca():
    rng = np.random.default_rng(0)
    X, _ = fa_sample(rng, 300, 7, 2)
    P = fa.ppca_closed_form(X, 3)
    pca = PCA(n_components=3, svd_solver="full").fit(X)
    n = X.shape[0]
    # scikit-learn divides by n - 1; the ML estimate by n
    np.testing.assert_allclose(P.covariance(), pca.get_covariance() * (n - 1) / n, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(P.psi, pca.noise_variance_ * (n - 1) / n, rtol=1e-10)
    np.testing.assert_allclose(P.mean, X.mean(axis=0))
    assert np.all(P.psi == P.psi[0])  # isotropic


def test_ppca_closed_form_is_the_em_fixed_point_and_the_maximum():
    rng = np.random.default_rng(1)
    X, _ = fa_sample(rng, 400, 6, 2)
    P = fa.ppca_closed_form(X, 2)
    data = fa.prepare(X)
    config = FAConfig(2, kind="ppca")
    s1 = fa.step(fa.init_from_parameters(data, P), data, config)
    np.testing.assert_allclose(s1.params.covariance(), P.covariance(), atol=1e-10)
    np.testing.assert_allclose(s1.params.psi, P.psi, rtol=1e-10)
    # on complete data the "pca" initialisation is the closed form itself
    np.testing.assert_allclose(fa.init(data, config, rng).params.covariance(), P.covariance(), atol=1e-10)
    # EM from a random start climbs to (but not above) the closed-form maximum
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        res = fa.fit(data, FAConfig(2, kind="ppca", init="random", tol=1e-12, max_iter=3000), rng)
    best = fa.log_likelihood(P, X).sum()
    assert res.state.log_likelihood <= best + 1e-8 * abs(best)
    assert res.state.log_likelihood >= best - 1e-4


# ----------------------------------------------------------------------------- EM oracles
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_fa_em_complete_data_reaches_sklearn_log_likelihood():
    rng = np.random.default_rng(2)
    X, _ = fa_sample(rng, 500, 6, 2)
    res = fa.fit(fa.prepare(X), FAConfig(2, tol=1e-10, max_iter=3000), rng)
    assert res.stop_reason == "tol" and res.converged
    sk = FactorAnalysis(n_components=2, tol=1e-8, max_iter=3000, svd_method="lapack").fit(X)
    ours = res.state.log_likelihood / X.shape[0]
    assert ours == pytest.approx(sk.score(X), abs=1e-5)
    # the state's value is the observed-data log-likelihood of its parameters (dense check)
    P = res.state.params
    assert res.state.log_likelihood == pytest.approx(sum(dense_loglik(P, x) for x in X), rel=1e-10)


def test_log_likelihood_matches_dense_gaussian_on_observed_entries():
    rng = np.random.default_rng(3)
    X, P = fa_sample(rng, 60, 5, 2)
    Xm, _miss = mcar(rng, X, 0.4)
    Xm[0] = np.nan  # a row with nothing observed
    Xm[1] = X[1]
    ll = fa.log_likelihood(P, Xm)
    np.testing.assert_allclose(ll, [dense_loglik(P, x) for x in Xm], rtol=1e-10, atol=1e-10)
    assert ll[0] == 0.0


def _numeric_gradient(f, theta, h=1e-5):
    g = np.empty_like(theta)
    for i in range(theta.size):
        e = np.zeros_like(theta)
        e[i] = h
        g[i] = (f(theta + e) - f(theta - e)) / (2 * h)
    return g


def test_missing_data_em_converges_to_a_stationary_point_of_the_observed_likelihood():
    """The exact EM (not impute-then-refit) has zero observed-data gradient at its fixed point."""
    rng = np.random.default_rng(4)
    X, _ = fa_sample(rng, 300, 5, 1)
    Xm, _ = mcar(rng, X, 0.3)
    data = fa.prepare(Xm)
    config = FAConfig(1)
    state = fa.init(data, config, rng)
    for _ in range(4000):
        new = fa.step(state, data, config)
        done = np.abs(new.params.loadings - state.params.loadings).max() < 1e-12
        state = new
        if done:
            break
    P = state.params
    D = P.n_features

    def f(theta):
        mu, W, logpsi = theta[:D], theta[D : 2 * D, None], theta[2 * D :]
        return fa.log_likelihood(FAParams.from_arrays(mu, W, np.exp(logpsi)), Xm).mean()

    g = _numeric_gradient(f, np.concatenate([P.mean, P.loadings[:, 0], np.log(P.psi)]))
    assert np.abs(g).max() < 1e-6
    # ... whereas fitting the mean-imputed matrix gives a point where the gradient is clearly not zero
    filled = np.where(np.isnan(Xm), np.nanmean(Xm, axis=0), Xm)
    naive = fa.fit(fa.prepare(filled), FAConfig(1, tol=1e-12, max_iter=4000), rng).state.params
    g_naive = _numeric_gradient(f, np.concatenate([naive.mean, naive.loadings[:, 0], np.log(naive.psi)]))
    assert np.abs(g_naive).max() > 1e-2


def test_fa_with_missing_data_recovers_known_parameters():
    rng = np.random.default_rng(0)
    X, truth = fa_sample(rng, 5000, 8, 2)
    Xm, miss = mcar(rng, X, 0.25)
    assert 0.2 < miss.mean() < 0.3
    res = fa.fit(fa.prepare(Xm), FAConfig(2, tol=1e-7, max_iter=2000), rng)
    assert res.stop_reason == "tol"
    P = res.state.params
    WWt, WWt0 = P.loadings @ P.loadings.T, truth.loadings @ truth.loadings.T
    assert np.linalg.norm(WWt - WWt0) / np.linalg.norm(WWt0) < 0.05
    assert np.abs(P.psi - truth.psi).max() < 0.08
    assert np.abs(P.mean - truth.mean).max() < 0.06


def test_ppca_with_missing_data_keeps_an_isotropic_noise():
    rng = np.random.default_rng(5)
    X, _ = fa_sample(rng, 200, 6, 2)
    Xm, _ = mcar(rng, X, 0.3)
    data = fa.prepare(Xm)
    states = iterate(data, FAConfig(2, kind="ppca"), fa.init(data, FAConfig(2, kind="ppca"), rng), 20)
    for s in states:
        assert np.ptp(s.params.psi) == 0.0
    lls = [s.log_likelihood for s in states]
    assert np.all(np.diff(lls) >= -1e-9 * abs(lls[0]))


# ----------------------------------------------------------------------------- properties
@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(15, 50),
    D=st.integers(3, 6),
    q_frac=st.floats(0.0, 0.99),
    p=st.sampled_from([0.0, 0.15, 0.35]),
    kind=st.sampled_from(["fa", "ppca"]),
    init=st.sampled_from(["pca", "random"]),
    update=st.sampled_from(["px", "em"]),
)
def test_observed_log_likelihood_never_decreases(seed, n, D, q_frac, p, kind, init, update):
    rng = np.random.default_rng(seed)
    q = 1 + int(q_frac * (D - 1))
    X, _ = fa_sample(rng, n, D, max(1, q - 1))
    Xm, _ = mcar(rng, X, p)
    Xm[:, 0] = X[:, 0]  # no all-missing column
    config = FAConfig(q, kind=kind, init=init, update=update)
    data = fa.prepare(Xm)
    states = iterate(data, config, fa.init(data, config, rng), 12)
    lls = np.array([s.log_likelihood for s in states])
    assert np.all(np.isfinite(lls))
    assert np.all(np.diff(lls) >= -1e-9 * np.abs(lls[:-1]) - 1e-9)
    for s in states:  # the recorded value is the observed-data log-likelihood of the state's parameters
        assert s.log_likelihood == pytest.approx(fa.log_likelihood(s.params, Xm).sum(), rel=1e-9, abs=1e-9)
    c = fa.conditional(states[-1], Xm)
    out = c.mean()
    obs = ~np.isnan(Xm)
    assert np.array_equal(out[obs], Xm[obs]) and np.all(np.isfinite(out))


def test_states_are_immutable_and_step_is_pure():
    rng = np.random.default_rng(6)
    X, _ = fa_sample(rng, 40, 4, 1)
    data = fa.prepare(mcar(rng, X, 0.2)[0])
    s0 = fa.init(data, FAConfig(1), rng)
    before = s0.params.loadings.copy()
    s1 = fa.step(s0, data, FAConfig(1))
    assert s1.iteration == 1 and np.array_equal(s0.params.loadings, before)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s0.iteration = 3
    for a in (s0.params.loadings, s0.params.psi, s0.latent_mean, s0.latent_cov, data.X):
        with pytest.raises(ValueError):
            a[0] = 1.0


def test_fit_stop_reasons_and_trace():
    rng = np.random.default_rng(7)
    X, _ = fa_sample(rng, 100, 5, 2)
    data = fa.prepare(X)
    with pytest.warns(ConvergenceWarning):
        res = fa.fit(data, FAConfig(2, tol=0.0, max_iter=3), rng)
    assert res.stop_reason == "max_iter" and res.n_iter == 3 and len(res.trace) == 4
    seen = []
    res = fa.fit(data, FAConfig(2, tol=1e-3), rng, callback=seen.append)
    assert res.stop_reason == "tol" and len(seen) == res.n_iter
    assert [t["iteration"] for t in res.trace] == list(range(res.n_iter + 1))


# ----------------------------------------------------------------------------- conditional
def dense_conditional(params, x):
    o, m = ~np.isnan(x), np.isnan(x)
    C = params.covariance()
    if not o.any():
        return params.mean[m], C[np.ix_(m, m)]
    Soo, Smo = C[np.ix_(o, o)], C[np.ix_(m, o)]
    mean = params.mean[m] + Smo @ np.linalg.solve(Soo, x[o] - params.mean[o])
    return mean, C[np.ix_(m, m)] - Smo @ np.linalg.solve(Soo, Smo.T)


@pytest.fixture
def cond_setup():
    rng = np.random.default_rng(8)
    X, P = fa_sample(rng, 50, 6, 2)
    Xm, _miss = mcar(rng, X, 0.4)
    Xm[0], Xm[1] = np.nan, X[1]
    return X, Xm, P, fa.conditional(P, Xm)


def test_conditional_matches_dense_gaussian_conditioning(cond_setup):
    X, Xm, P, c = cond_setup
    mean, var = c.mean(), c.variance()
    lp = c.logpdf(X)
    for i, x in enumerate(Xm):
        m = np.isnan(x)
        mu_m, S_mm = dense_conditional(P, x)
        np.testing.assert_allclose(mean[i, m], mu_m, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(var[i, m], np.diag(S_mm), rtol=1e-10, atol=1e-12)
        expect = stats.multivariate_normal(mu_m, S_mm).logpdf(X[i, m]) if m.any() else 0.0
        assert lp[i] == pytest.approx(expect, rel=1e-9, abs=1e-9)
    assert np.all(var[~np.isnan(Xm)] == 0.0)


def test_conditional_agrees_with_conditional_mixture(cond_setup):
    X, _Xm, _P, c = cond_setup
    cm = c.to_mixture()
    np.testing.assert_allclose(c.mean(), cm.mean(), atol=1e-10)
    np.testing.assert_allclose(c.variance(), cm.variance(), atol=1e-10)
    np.testing.assert_allclose(c.logpdf(X), cm.logpdf(X), atol=1e-9)
    lo, hi = c.interval(0.9)
    clo, chi = cm.interval(0.9)
    np.testing.assert_allclose(lo, clo, atol=1e-7)
    np.testing.assert_allclose(hi, chi, atol=1e-7)


def test_conditional_samples_have_the_conditional_moments(cond_setup):
    _X, Xm, P, c = cond_setup
    draws = c.sample(4000, np.random.default_rng(9))
    obs = ~np.isnan(Xm)
    assert np.array_equal(draws[:, obs], np.broadcast_to(Xm[obs], (4000, obs.sum())))
    m = ~obs
    se = np.sqrt(c.variance()[m] / 4000)
    assert np.all(np.abs(draws.mean(axis=0)[m] - c.mean()[m]) < 5 * se)
    np.testing.assert_allclose(draws.var(axis=0)[m], c.variance()[m], rtol=0.15)
    # the joint covariance of a row's missing block, not only its diagonal
    i = int(np.argmax(m.sum(axis=1)[1:])) + 1
    _, S_mm = dense_conditional(P, Xm[i])
    np.testing.assert_allclose(np.cov(draws[:, i, m[i]].T), S_mm, atol=0.15 * np.abs(S_mm).max())


# ----------------------------------------------------------------------------- bad input
def test_bad_input():
    rng = np.random.default_rng(10)
    X, P = fa_sample(rng, 30, 4, 1)
    with pytest.raises(BadInputError, match="smaller than the number of features"):
        fa.init(fa.prepare(X), FAConfig(4), rng)
    with pytest.raises(BadInputError, match="smaller than the number of features"):
        fa.ppca_closed_form(X, 5)
    with pytest.raises(BadInputError, match="n_factors must be a positive integer"):
        FAConfig(0)
    with pytest.raises(BadInputError, match="kind must be one of"):
        FAConfig(1, kind="pca")
    with pytest.raises(BadInputError, match="min_psi must be > 0"):
        FAConfig(1, min_psi=0.0)
    with pytest.raises(BadInputError, match="init must be one of"):
        FAConfig(1, init="kmeans")
    bad = X.copy()
    bad[:, 2] = np.nan
    with pytest.raises(BadInputError, match="column 2.*no observed value"):
        fa.prepare(bad)
    bad = X.copy()
    bad[3, 1] = np.inf
    with pytest.raises(BadInputError, match="infinite"):
        fa.prepare(bad)
    with pytest.raises(BadInputError, match="must be 2-D"):
        fa.prepare(X[:, 0])
    with pytest.raises(BadInputError, match="complete data"):
        fa.ppca_closed_form(mcar(rng, X, 0.2)[0], 1)
    with pytest.raises(BadInputError, match="3 column"):
        fa.conditional(P, X[:, :3])
    with pytest.raises(BadInputError, match="psi must be positive"):
        FAParams.from_arrays(P.mean, P.loadings, -P.psi)
    with pytest.raises(BadInputError, match="loadings"):
        FAParams.from_arrays(P.mean, P.loadings[:3], P.psi)
    with pytest.raises(BadInputError, match="Expected FAParams"):
        fa.log_likelihood("model", X)
    c = fa.conditional(P, mcar(rng, X, 0.3)[0])
    with pytest.raises(BadInputError, match="n_draws"):
        c.sample(0, rng)
    with pytest.raises(BadInputError, match="level"):
        c.interval(1.5)
    with pytest.raises(BadInputError, match="NaN at missing entries"):
        c.logpdf(c.values)
    with pytest.raises(BadInputError, match="two rows"):
        fa.prepare(np.vstack([X[:1], np.full((1, 4), np.nan)]))


@pytest.mark.filterwarnings("ignore::explorer.core.factor.factor_analysis.ConvergenceWarning")
@pytest.mark.parametrize("kind", ["fa", "ppca"])
def test_px_em_reaches_the_em_fixed_point_faster_and_centres_the_mean_in_one_step(kind):
    rng = np.random.default_rng(11)
    X, _ = fa_sample(rng, 300, 8, 2)
    X = X * 3.0 + 5.0  # far from the random start's mean
    data = fa.prepare(X)
    W0 = np.random.default_rng(1).standard_normal((8, 2))
    start = fa.init_from_parameters(data, FAParams.from_arrays(np.zeros(8), W0, np.full(8, 2.0)))
    px, em = FAConfig(2, kind=kind, update="px"), FAConfig(2, kind=kind, update="em")
    # complete data: after one PX-EM step mu is the sample mean (the regression passes through the centroid)
    np.testing.assert_allclose(fa.step(start, data, px).params.mean, X.mean(axis=0), atol=1e-10)
    assert np.abs(fa.step(start, data, em).params.mean - X.mean(axis=0)).max() > 1e-3
    s_px, s_em = start, start
    for _ in range(30):
        s_px, s_em = fa.step(s_px, data, px), fa.step(s_em, data, em)
    assert s_px.log_likelihood >= s_em.log_likelihood - 1e-9
    # the same fixed point: both converge to the complete-data maximum (sklearn's FA / the PPCA closed form)
    long_em = fa.fit(data, FAConfig(2, kind=kind, update="em", tol=0, max_iter=3000), np.random.default_rng(1),
                     init_state=start)
    long_px = fa.fit(data, FAConfig(2, kind=kind, update="px", tol=0, max_iter=300), np.random.default_rng(1),
                     init_state=start)
    assert long_px.state.log_likelihood == pytest.approx(long_em.state.log_likelihood, rel=1e-7)
    cov = lambda P: P.loadings @ P.loadings.T + np.diag(P.psi)  # noqa: E731
    np.testing.assert_allclose(cov(long_px.state.params), cov(long_em.state.params), atol=1e-4)


def test_update_must_be_known():
    with pytest.raises(BadInputError, match="update must be one of"):
        FAConfig(1, update="fast")
