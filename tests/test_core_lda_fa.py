"""explorer.core.classifiers.lda_fa: LDA with a factor-analysis covariance, generative and discriminative (Marlin
6.2.5-6.2.6).

Oracles: central finite differences of the conditional log-likelihood (every parameter block, missing
entries and an empty row included), a direct scipy maximisation of the fixed-mean FA likelihood, the
complete-data closed forms (Q = 0 is the diagonal ML covariance of the class-centred data; the
fixed-mean FA of class-centred complete data is explorer.core.factor.factor_analysis's fit).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.optimize import minimize

from explorer.core.classifiers import discriminant as dm
from explorer.core.classifiers import lda_fa as lf
from explorer.core.factor import factor_analysis as fa
from explorer.core.validation import BadInputError


def _data(seed=0, n=30, D=4, missing=0.3, C=3):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(D, 2))
    cov = A @ A.T + np.diag(rng.uniform(0.3, 1.0, D))
    means = rng.normal(0, 1.5, (C, D))
    X = np.vstack([rng.multivariate_normal(means[c], cov, n) for c in range(C)])
    y = np.repeat(np.arange(C), n)
    if missing:
        X[rng.random(X.shape) < missing] = np.nan
    return X, y


@pytest.mark.parametrize("reg", [0.0, 0.5])
def test_gradient_matches_central_differences(reg):
    X, y = _data(1)
    X[4] = np.nan  # a row with nothing observed contributes to the priors' gradient only
    data = dm.prepare(X, y)
    Q = 2
    p, _ = lf.fit_generative(data, lf.LDAFAConfig(n_factors=Q, fa_max_iter=50, fa_tol=1e-4))
    rng = np.random.default_rng(2)
    v = lf.pack(p) + rng.normal(0, 0.2, lf.pack(p).size)  # away from any stationary point
    _, g = lf.negative_objective(v, data, Q, reg)
    h = 1e-5
    fd = np.empty_like(v)
    for i in range(v.size):
        e = np.zeros_like(v)
        e[i] = h
        fd[i] = (lf.negative_objective(v + e, data, Q, reg)[0] - lf.negative_objective(v - e, data, Q, reg)[0]) / (2 * h)
    C, D = data.n_classes, data.n_features
    cuts = np.cumsum([C, C * D, D * Q])
    for name, a, b in zip(("omega", "mu", "Lambda", "phi"), np.split(g, cuts), np.split(fd, cuts)):
        assert np.linalg.norm(a - b) / np.linalg.norm(b) < 1e-5, name
        assert np.linalg.norm(b) > 1e-3, name  # the block really has a gradient


def test_discriminative_improves_on_the_generative_start():
    X, y = _data(3, n=25, D=3)
    data = dm.prepare(X, y)
    cfg = lf.LDAFAConfig(n_factors=1, reg=1e-2, max_iter=40)
    p, _ = lf.fit_generative(data, cfg)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", lf.ConvergenceWarning)
        res = lf.fit_discriminative(data, cfg, p)
    assert res.start_objective == pytest.approx(lf.conditional_log_likelihood(data, p, 1e-2))
    assert res.objective == pytest.approx(lf.conditional_log_likelihood(data, res.params, 1e-2))
    assert res.objective > res.start_objective + 1e-3
    assert res.n_iter > 0 and len(res.trace) == res.n_iter
    # the plain conditional log-likelihood (no penalty) improves too on this data
    assert lf.conditional_log_likelihood(data, res.params) > lf.conditional_log_likelihood(data, p)


def test_fa_fixed_mean_em_is_monotone_and_reaches_the_mle():
    X, y = _one_factor()
    D = 4
    data = dm.prepare(X, y)
    cfg = lf.LDAFAConfig(n_factors=1, fa_tol=1e-12, fa_max_iter=3000)
    means = lf.class_means(data)
    Z = lf.centred(data, means)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = lf.fa_fit(data, Z, cfg)
    ll = np.array([t["log_likelihood"] for t in res.trace])
    assert res.n_iter > 5
    assert np.all(np.diff(ll) >= -1e-10 * np.abs(ll[:-1]))
    Zn = np.where(data.missing, np.nan, Z)

    def negll(v):  # the observed-data log-likelihood of N(0, w w^T + diag(exp(phi))) by the dense reference
        cov = np.outer(v[:D], v[:D]) + np.diag(np.exp(v[D:]))
        return -dm.class_log_joint(Zn, [1.0], np.zeros((1, D)), cov).sum()

    s = res.state
    v0 = np.r_[s.loadings[:, 0] * 1.2, np.log(s.psi) + 0.3]
    opt = minimize(negll, v0, method="BFGS", options={"gtol": 1e-8})
    assert -opt.fun == pytest.approx(s.log_likelihood, abs=1e-6)
    cov_opt = np.outer(opt.x[:D], opt.x[:D]) + np.diag(np.exp(opt.x[D:]))
    np.testing.assert_allclose(cov_opt, s.loadings @ s.loadings.T + np.diag(s.psi), atol=1e-3)


def _one_factor(seed=2, n=25, D=4, missing=0.3):
    """Two classes with a one-factor covariance: the FA EM converges in a few hundred steps."""
    rng = np.random.default_rng(seed)
    w = rng.normal(0, 1, D)
    cov = np.outer(w, w) + np.diag(rng.uniform(0.3, 0.6, D))
    X = np.vstack([rng.multivariate_normal(np.zeros(D), cov, n), rng.multivariate_normal(np.ones(D), cov, n)])
    if missing:
        X[rng.random(X.shape) < missing] = np.nan
    return X, np.repeat([0, 1], n)


def test_generative_complete_data_closed_forms():
    X, y = _one_factor(missing=0.0)
    data = dm.prepare(X, y)
    # stage 1: the class means
    p0, _ = lf.fit_generative(data, lf.LDAFAConfig(n_factors=0))
    np.testing.assert_allclose(p0.means, [X[y == c].mean(0) for c in range(2)], rtol=1e-12)
    np.testing.assert_allclose(p0.priors, [0.5, 0.5])
    # Q = 0: psi is the ML variance of the class-centred data (diagonal LDA)
    R = X - p0.means[y]
    np.testing.assert_allclose(p0.psi, (R**2).mean(0), rtol=1e-10)
    # Q = 1: the fixed-mean EM equals factor_analysis (free mean) on the class-centred data, whose mean is 0
    cfg = lf.LDAFAConfig(n_factors=1, fa_tol=1e-12, fa_max_iter=3000)
    p1, res = lf.fit_generative(data, cfg)
    ref = fa.fit(fa.prepare(R), fa.FAConfig(n_factors=1, tol=1e-12, max_iter=3000, strategy="numpy"),
                 np.random.default_rng(0))
    np.testing.assert_allclose(ref.state.params.mean, 0.0, atol=1e-8)
    assert res.state.log_likelihood == pytest.approx(ref.state.log_likelihood, rel=1e-9)
    np.testing.assert_allclose(p1.covariance, ref.state.params.loadings @ ref.state.params.loadings.T
                               + np.diag(ref.state.params.psi), atol=1e-5)


def test_posterior_sums_to_one_prior_for_empty_rows_inputs_unchanged():
    X, y = _data(6, n=20, D=3)
    X0 = X.copy()
    data = dm.prepare(X, y)
    p, _ = lf.fit_generative(data, lf.LDAFAConfig(n_factors=1, fa_tol=1e-4))
    Xt = X[:10].copy()
    Xt[2] = np.nan
    Xt0 = Xt.copy()
    lp = lf.log_posterior(p, Xt)
    np.testing.assert_allclose(np.exp(lp).sum(1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(np.exp(lp[2]), p.priors, rtol=1e-12)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(Xt, Xt0)
    # pack / unpack round trip
    q = lf.unpack(lf.pack(p), 3, 3, 1)
    for a, b in ((q.priors, p.priors), (q.means, p.means), (q.loadings, p.loadings), (q.psi, p.psi)):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_bad_input():
    X, y = _data(7, n=10, D=3)
    data = dm.prepare(X, y)
    with pytest.raises(BadInputError, match="n_factors must be an integer >= 0"):
        lf.LDAFAConfig(n_factors=-1)
    with pytest.raises(BadInputError, match="reg must be a finite number >= 0"):
        lf.LDAFAConfig(reg=-1e-3)
    with pytest.raises(BadInputError, match="min_psi must be a finite number > 0"):
        lf.LDAFAConfig(min_psi=0.0)
    with pytest.raises(BadInputError, match="must be smaller than the number of features"):
        lf.fit_generative(data, lf.LDAFAConfig(n_factors=3))
    with pytest.raises(BadInputError, match="parameter vector has"):
        lf.unpack(np.zeros(5), 3, 3, 1)
    p, _ = lf.fit_generative(data, lf.LDAFAConfig(n_factors=1))
    with pytest.raises(BadInputError, match="do not match"):
        lf.fit_discriminative(data, lf.LDAFAConfig(n_factors=2), p)
