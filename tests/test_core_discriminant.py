"""explorer.core.classifiers.discriminant: LDA / QDA / RDA fitted by EM to incomplete features (Marlin 6.2.1-6.2.4).

Oracles: scikit-learn's LinearDiscriminantAnalysis / QuadraticDiscriminantAnalysis on complete data
(both use the ML, divisor-N covariances in scikit-learn 1.9, which is what EM converges to), the
closed-form logistic parameters (6.2.12-6.2.15), a direct scipy maximisation of the observed-data
log-likelihood, and em_gmm with one component per class for QDA with missing data.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import expit, softmax
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis, QuadraticDiscriminantAnalysis

from explorer.core.classifiers import discriminant as dm
from explorer.core.mixtures import em_gmm
from explorer.core.validation import BadInputError


def _data(seed=0, n=(40, 60), D=3, missing=0.0):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(D, D))
    X = np.vstack([rng.normal(0, 1, (n[0], D)) @ A, rng.normal(0, 1, (n[1], D)) @ (0.7 * A) + 1.5])
    y = np.repeat([0, 1], n)
    if missing:
        M = rng.random(X.shape) < missing
        X = X.copy()
        X[M] = np.nan
    return X, y


def _fit(X, y, model="lda", **kw):
    kw.setdefault("reg_covar", 0.0)
    kw.setdefault("tol", 1e-12)
    kw.setdefault("max_iter", 2000)
    data = dm.prepare(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return data, dm.fit(data, dm.DiscriminantConfig(model=model, **kw))


def _proba(state, X):
    return np.exp(dm.class_log_posterior(X, state.priors, state.means, state.covariances))


# ----------------------------------------------------------------------------- oracles, complete data
def test_lda_complete_equals_sklearn_and_ml_pooled_covariance():
    X, y = _data()
    _, res = _fit(X, y, "lda")
    assert res.n_iter == 1 and res.converged  # the initial state already is the ML fit
    s = res.state
    sk = LinearDiscriminantAnalysis(solver="lsqr", store_covariance=True).fit(X, y)
    np.testing.assert_allclose(_proba(s, X), sk.predict_proba(X), atol=1e-12)
    # the right quantity: the ML pooled covariance (divisor N), computed by hand
    pooled = sum(((X[y == c] - X[y == c].mean(0)).T @ (X[y == c] - X[y == c].mean(0))) for c in (0, 1)) / len(X)
    np.testing.assert_allclose(s.covariances[0], pooled, rtol=1e-12)
    np.testing.assert_allclose(s.covariances[1], pooled, rtol=1e-12)
    np.testing.assert_allclose(sk.covariance_, pooled, rtol=1e-10)
    np.testing.assert_allclose(s.means, sk.means_, rtol=1e-12)
    # the unbiased (divisor N - C) pooled covariance gives different posteriors: the comparison can fail
    other = dm.class_log_posterior(X, s.priors, s.means, pooled * len(X) / (len(X) - 2))
    assert np.abs(np.exp(other) - sk.predict_proba(X)).max() > 1e-4


def test_qda_complete_equals_sklearn():
    X, y = _data(1)
    _, res = _fit(X, y, "qda")
    sk = QuadraticDiscriminantAnalysis(reg_param=0.0, store_covariance=True).fit(X, y)
    np.testing.assert_allclose(_proba(res.state, X), sk.predict_proba(X), atol=1e-10)
    for c in (0, 1):  # scikit-learn 1.9 stores the ML (biased, divisor N_c) class covariances
        np.testing.assert_allclose(res.state.covariances[c], np.cov(X[y == c].T, bias=True), rtol=1e-10)
        np.testing.assert_allclose(sk.covariance_[c], np.cov(X[y == c].T, bias=True), rtol=1e-10)


@pytest.mark.parametrize("missing", [0.0, 0.3])
def test_rda_endpoints_are_qda_and_lda(missing):
    X, y = _data(2, missing=missing)
    for (alpha, gamma), model in (((1.0, 1.0), "qda"), ((0.0, 1.0), "lda")):
        _, rda = _fit(X, y, "rda", alpha=alpha, gamma=gamma, reg_covar=1e-6, tol=1e-10)
        _, ref = _fit(X, y, model, reg_covar=1e-6, tol=1e-10)
        assert rda.n_iter == ref.n_iter
        np.testing.assert_allclose(rda.state.covariances, ref.state.covariances, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(rda.state.means, ref.state.means, rtol=1e-12, atol=1e-14)


def test_rda_formula_and_shrinkage():
    rng = np.random.default_rng(3)
    Sc = np.stack([np.cov(rng.normal(size=(3, 20))) for _ in range(2)])
    S = 0.4 * Sc[0] + 0.6 * Sc[1]
    out = dm.rda_covariances(Sc, S, 0.3, 0.2, reg_covar=0.01)
    expected = 0.2 * (0.3 * Sc[1] + 0.7 * S) + (0.8 * np.trace(S) / 3 + 0.01) * np.eye(3)
    np.testing.assert_allclose(out[1], expected, rtol=1e-14)
    # gamma = 0: every class gets the same scaled identity
    out0 = dm.rda_covariances(Sc, S, 0.5, 0.0)
    np.testing.assert_allclose(out0, np.broadcast_to(np.trace(S) / 3 * np.eye(3), out0.shape))


def test_probabilistic_lda_is_logistic():
    """6.2.12-6.2.15: P(y=1|x) = sigma(w^T x + b), w = Sigma^-1 (mu1 - mu0), b = -1/2 (mu1-mu0)^T Sigma^-1 (mu1+mu0) + log(theta1/theta0)."""
    X, y = _data(4, missing=0.25)
    _, res = _fit(X, y, "lda", reg_covar=1e-6, tol=1e-9)
    s = res.state
    p = _proba(s, X)[:, 1]
    complete = ~np.isnan(X).any(axis=1)
    w, b = dm.logistic_parameters(s.priors, s.means, s.covariances[0])
    np.testing.assert_allclose(p[complete], expit(X[complete] @ w + b), rtol=1e-10)
    # with missing features, the same formula on the observed block (6.2.21 is linear-logistic per pattern)
    row = np.flatnonzero(np.isnan(X[:, 0]) & ~np.isnan(X[:, 1:]).any(axis=1))[0]
    o = np.array([1, 2])
    w_o, b_o = dm.logistic_parameters(s.priors, s.means[:, o], s.covariances[0][np.ix_(o, o)])
    np.testing.assert_allclose(p[row], expit(X[row, o] @ w_o + b_o), rtol=1e-10)
    # b by hand, with the corrected sign and no 1/2 on the log prior ratio
    Sinv_d = np.linalg.solve(s.covariances[0], s.means[1] - s.means[0])
    assert b == pytest.approx(-0.5 * Sinv_d @ (s.means[1] + s.means[0]) + np.log(s.priors[1] / s.priors[0]))


# ----------------------------------------------------------------------------- oracles, missing data
def test_lda_em_fixed_point_is_the_observed_data_mle():
    X, y = _data(5, n=(15, 20), D=2, missing=0.35)
    data, res = _fit(X, y, "lda", tol=1e-13, max_iter=5000)
    D, C = 2, 2
    priors = data.counts / data.counts.sum()

    def negll(v):
        means = v[: C * D].reshape(C, D)
        L = np.array([[np.exp(v[4]), 0.0], [v[5], np.exp(v[6])]])
        cov = L @ L.T
        return -dm.observed_log_likelihood(data, priors, means, np.stack([cov, cov]))

    Lh = np.linalg.cholesky(res.state.covariances[0])
    v0 = np.r_[res.state.means.ravel() + 0.3, np.log(Lh[0, 0]) + 0.2, Lh[1, 0] - 0.2, np.log(Lh[1, 1]) - 0.1]
    opt = minimize(negll, v0, method="BFGS", options={"gtol": 1e-9})
    assert -opt.fun == pytest.approx(res.state.log_likelihood, abs=1e-7)
    np.testing.assert_allclose(opt.x[:4].reshape(2, 2), res.state.means, atol=1e-4)
    Lo = np.array([[np.exp(opt.x[4]), 0.0], [opt.x[5], np.exp(opt.x[6])]])
    np.testing.assert_allclose(Lo @ Lo.T, res.state.covariances[0], atol=1e-4)


def test_qda_with_missing_equals_em_gmm_per_class():
    X, y = _data(6, missing=0.3)
    data, res = _fit(X, y, "qda", reg_covar=1e-6, tol=1e-12)
    total = float(np.sum(data.counts * np.log(res.state.priors)))
    for c in (0, 1):
        d = em_gmm.prepare(X[y == c])
        g = em_gmm.fit(d, em_gmm.EMConfig(n_components=1, reg_covar=1e-6, tol=1e-12, max_iter=3000, strategy="numpy"),
                       np.random.default_rng(0))
        np.testing.assert_allclose(res.state.means[c], g.state.means[0], atol=1e-5)
        np.testing.assert_allclose(res.state.covariances[c], g.state.covariances[0], atol=1e-5)
        total += g.state.log_likelihood
    assert res.state.log_likelihood == pytest.approx(total, rel=1e-9)


def test_state_log_likelihood_matches_dense_reference():
    X, y = _data(7, missing=0.4)
    X[3] = np.nan  # a row with nothing observed: only its prior counts
    data, res = _fit(X, y, "qda", reg_covar=1e-6, tol=1e-6)
    s = res.state
    assert s.log_likelihood == pytest.approx(dm.observed_log_likelihood(data, s.priors, s.means, s.covariances),
                                             rel=1e-12)


# ----------------------------------------------------------------------------- properties
@pytest.mark.parametrize("model", ["lda", "qda"])
def test_em_objective_never_decreases(model):
    X, y = _data(8, missing=0.4)
    _, res = _fit(X, y, model, reg_covar=0.0, tol=1e-10)
    ll = np.array([t["log_likelihood"] for t in res.trace])
    assert res.n_iter > 3
    assert np.all(np.diff(ll) >= -1e-9 * np.abs(ll[:-1]))


def test_probabilities_sum_to_one_and_inputs_unchanged():
    X, y = _data(9, missing=0.3)
    X[0] = np.nan
    X0, y0 = X.copy(), y.copy()
    _, res = _fit(X, y, "rda", alpha=0.3, gamma=0.7, reg_covar=1e-6, tol=1e-8)
    Xt, _ = _data(10, n=(5, 5), missing=0.5)
    Xt[1] = np.nan
    Xt0 = Xt.copy()
    p = _proba(res.state, Xt)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(p[1], res.state.priors, rtol=1e-12)  # nothing observed -> class prior
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(y, y0)
    np.testing.assert_array_equal(Xt, Xt0)


def test_class_log_joint_shared_equals_stacked():
    X, y = _data(11, missing=0.3)
    _, res = _fit(X, y, "lda", reg_covar=1e-6, tol=1e-6)
    s = res.state
    a = dm.class_log_joint(X, s.priors, s.means, s.covariances[0])
    b = dm.class_log_joint(X, s.priors, s.means, s.covariances)
    np.testing.assert_allclose(a, b, rtol=1e-12)
    # one row by hand
    r = np.flatnonzero(np.isnan(X).sum(1) == 1)[0]
    o = ~np.isnan(X[r])
    from scipy.stats import multivariate_normal as mvn
    want = [np.log(s.priors[c]) + mvn(s.means[c, o], s.covariances[c][np.ix_(o, o)]).logpdf(X[r, o]) for c in (0, 1)]
    np.testing.assert_allclose(a[r], want, rtol=1e-12)
    np.testing.assert_allclose(softmax(a, axis=1), _proba(s, X), rtol=1e-12)


# ----------------------------------------------------------------------------- bad input
def test_bad_input():
    X, y = _data(12, n=(5, 5))
    with pytest.raises(BadInputError, match="model must be one of"):
        dm.DiscriminantConfig(model="svm")
    with pytest.raises(BadInputError, match=r"alpha must be a number in \[0, 1\]"):
        dm.DiscriminantConfig(alpha=1.5)
    with pytest.raises(BadInputError, match="gamma must be"):
        dm.DiscriminantConfig(gamma=-0.1)
    with pytest.raises(BadInputError, match="reg_covar must be"):
        dm.DiscriminantConfig(reg_covar=-1.0)
    with pytest.raises(BadInputError, match="max_iter must be"):
        dm.DiscriminantConfig(max_iter=2.5)
    with pytest.raises(BadInputError, match="At least two classes"):
        dm.prepare(X, np.zeros(10, dtype=int))
    with pytest.raises(BadInputError, match="labels must have shape"):
        dm.prepare(X, y[:-1])
    with pytest.raises(BadInputError, match="integer class indices"):
        dm.prepare(X, y.astype(float))
    bad = X.copy()
    bad[y == 1] = np.nan
    with pytest.raises(BadInputError, match=r"Class\(es\) \[1\] have no row with an observed feature"):
        dm.prepare(bad, y)
    inf = X.copy()
    inf[0, 0] = np.inf
    with pytest.raises(BadInputError, match="inf"):
        dm.prepare(inf, y)
    with pytest.raises(BadInputError, match="covariances must have shape"):
        dm.class_log_posterior(X, [0.5, 0.5], np.zeros((2, 3)), np.eye(2))
    with pytest.raises(BadInputError, match="exactly two classes"):
        dm.logistic_parameters([0.3, 0.3, 0.4], np.zeros((3, 3)), np.eye(3))
