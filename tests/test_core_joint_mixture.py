"""Tests of explorer.core.classifiers.joint_mixture (Ghahramani & Jordan 1994 section 4.4: EM for a joint
Gaussian x class mixture with missing features and missing labels).

Oracles: closed-form ML class means / covariances / priors (QDA with 1/n covariances) on complete
labelled data, scikit-learn's QDA covariances rescaled from its 1/(n - 1) normalisation, numerical
integration (scipy.integrate.quad) of the joint density over a missing coordinate, labelled rows
with nothing observed (they move the class priors and nothing else). Properties: the objective
never decreases, posteriors sum to one, the E-step log-likelihood equals an independent
evaluation, step is pure, unlabelled rows help on a clear two-cluster problem.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.stats import multivariate_normal
from sklearn.discriminant_analysis import QuadraticDiscriminantAnalysis

from explorer.core.classifiers import joint_mixture as jm
from explorer.core.mixtures.em_gmm import NIWPrior
from explorer.core.validation import BadInputError


# ----------------------------------------------------------------------------- helpers
def three_classes(rng, n_per=40, D=3, spread=3.0):
    means = rng.normal(scale=spread, size=(3, D))
    X, y = [], []
    for c in range(3):
        A = rng.normal(size=(D, D)) / np.sqrt(D) + np.eye(D)
        X.append(means[c] + rng.normal(size=(n_per, D)) @ A.T)
        y.append(np.full(n_per, c))
    return np.vstack(X), np.concatenate(y)


def punch(rng, X, y, p_feat=0.3, p_label=0.4):
    Xm = X.copy()
    Xm[rng.random(X.shape) < p_feat] = np.nan
    lab = y.copy()
    lab[rng.random(y.size) < p_label] = -1
    return Xm, lab


def ml_class_parameters(X, y, C):
    pri, mu, cov = [], [], []
    for c in range(C):
        Xc = X[y == c]
        pri.append(Xc.shape[0] / X.shape[0])
        mu.append(Xc.mean(axis=0))
        d = Xc - Xc.mean(axis=0)
        cov.append(d.T @ d / Xc.shape[0])
    return np.array(pri), np.array(mu), np.array(cov)


class _Gauss2:
    """A 2-D normal density written out (scipy's frozen pdf is slow under quad)."""

    def __init__(self, mean, cov):
        self.m = np.asarray(mean, dtype=float)
        self.a, self.b, self.d = cov[0, 0], cov[0, 1], cov[1, 1]
        self.det = self.a * self.d - self.b * self.b

    def pdf(self, x):
        u, v = x[0] - self.m[0], x[1] - self.m[1]
        q = (self.d * u * u - 2 * self.b * u * v + self.a * v * v) / self.det
        return np.exp(-0.5 * q) / (2 * np.pi * np.sqrt(self.det))


# ----------------------------------------------------------------------------- oracles
def test_complete_labelled_per_class_k1_is_ml_qda():
    rng = np.random.default_rng(0)
    X, y = three_classes(rng)
    cfg = jm.JointConfig(n_classes=3, reg_covar=0.0, tol=1e-12, max_iter=5)
    data = jm.prepare(X, y, 3)
    res = jm.fit(data, cfg, rng)
    st = res.state
    pri, mu, cov = ml_class_parameters(X, y, 3)
    np.testing.assert_allclose(st.weights, pri, atol=1e-12)
    np.testing.assert_allclose(st.means, mu, atol=1e-10)
    np.testing.assert_allclose(st.covariances, cov, atol=1e-10)
    # posteriors: the closed form with ML covariances
    logp = np.stack([np.log(pri[c]) + multivariate_normal(mu[c], cov[c]).logpdf(X) for c in range(3)], axis=1)
    expected = np.exp(logp - logp.max(axis=1, keepdims=True))
    expected /= expected.sum(axis=1, keepdims=True)
    got = np.exp(jm.predict_log_proba(st, X, cfg))
    np.testing.assert_allclose(got, expected, atol=1e-10)
    # scikit-learn's QDA: before 1.8 its covariances had the 1/(n_c - 1) normalisation, since then 1/n_c (ML,
    # "S^2 / n_samples" in its docstring). Find which one this version uses and compare the right thing.
    qda = QuadraticDiscriminantAnalysis(reg_param=0.0, store_covariance=True).fit(X, y)
    np.testing.assert_allclose(qda.priors_, st.weights, atol=1e-12)
    n_c = np.bincount(y)
    sk_cov = np.array(qda.covariance_)
    if np.allclose(sk_cov, st.covariances, rtol=1e-9):  # ML: the same classifier
        np.testing.assert_allclose(qda.predict_proba(X), got, atol=1e-9)
    else:  # unbiased: rescaled, the same covariances; the probabilities then differ by more than round-off
        np.testing.assert_allclose(sk_cov * ((n_c - 1) / n_c)[:, None, None], st.covariances, rtol=1e-9)
        assert np.abs(qda.predict_proba(X) - got).max() > 1e-6


def test_marginal_posterior_equals_numerical_integration_over_the_missing_feature():
    rng = np.random.default_rng(3)
    M, C = 3, 2
    weights = np.array([0.5, 0.3, 0.2])
    means = rng.normal(scale=2.0, size=(M, 2))
    covs = np.array([[[1.0, 0.6], [0.6, 1.5]], [[0.7, -0.3], [-0.3, 0.5]], [[2.0, 0.1], [0.1, 0.3]]])
    label_probs = np.array([[0.9, 0.1], [0.2, 0.8], [0.5, 0.5]])
    X = rng.normal(size=(20, 2))
    data = jm.prepare(X, np.zeros(20, dtype=int) + np.arange(20) % 2, 2)
    cfg = jm.JointConfig(n_classes=2, n_components=M, structure="joint", reg_covar=0.0)
    st = jm.init_from_parameters(data, cfg, weights, means, covs, label_probs)
    x1_values = np.array([-1.5, 0.0, 0.7, 2.5])
    query = np.c_[x1_values, np.full(4, np.nan)]
    got = np.exp(jm.predict_log_proba(st, query, cfg))
    dens = [_Gauss2(means[j], covs[j]) for j in range(M)]
    for r, x1 in enumerate(x1_values):
        joint = []
        for c in range(C):
            def f(x2, c=c):
                return sum(weights[j] * label_probs[j, c] * dens[j].pdf([x1, x2]) for j in range(M))
            joint.append(quad(f, -np.inf, np.inf, epsabs=1e-13, epsrel=1e-11)[0])
        joint = np.array(joint)
        np.testing.assert_allclose(got[r], joint / joint.sum(), atol=1e-8)
    # the other coordinate missing, and nothing missing, through log_joint
    lj = jm.log_joint(st, np.array([[np.nan, 0.3], [0.2, 0.3]]), np.array([1, 0]), cfg)
    f = lambda x1: sum(weights[j] * label_probs[j, 1] * dens[j].pdf([x1, 0.3]) for j in range(M))  # noqa: E731
    np.testing.assert_allclose(lj[0], np.log(quad(f, -np.inf, np.inf, epsabs=1e-13)[0]), atol=1e-8)
    direct = sum(weights[j] * label_probs[j, 0] * dens[j].pdf([0.2, 0.3]) for j in range(M))
    np.testing.assert_allclose(lj[1], np.log(direct), atol=1e-12)


def test_labelled_rows_without_features_move_only_the_class_priors():
    rng = np.random.default_rng(5)
    X, y = three_classes(rng, n_per=30)
    extra = 20  # rows of class 0 with no observed feature
    Xa = np.vstack([X, np.full((extra, X.shape[1]), np.nan)])
    ya = np.concatenate([y, np.zeros(extra, dtype=int)])
    cfg = jm.JointConfig(n_classes=3, reg_covar=0.0, tol=1e-13, max_iter=500)
    res = jm.fit(jm.prepare(Xa, ya, 3), cfg, rng)
    pri, mu, cov = ml_class_parameters(X, y, 3)
    counts = np.bincount(ya)
    np.testing.assert_allclose(res.state.weights, counts / counts.sum(), atol=1e-9)
    np.testing.assert_allclose(res.state.means, mu, atol=1e-7)
    np.testing.assert_allclose(res.state.covariances, cov, atol=1e-6)
    # the same rows unlabelled carry nothing: they are left out of the fit
    yb = ya.copy()
    yb[-extra:] = -1
    data_b = jm.prepare(Xa, yb, 3)
    assert data_b.n_fit == X.shape[0]
    res_b = jm.fit(data_b, cfg, rng)
    np.testing.assert_allclose(res_b.state.weights, pri, atol=1e-9)


def test_joint_structure_with_one_hot_labels_follows_the_per_class_fit():
    rng = np.random.default_rng(11)
    X, y = three_classes(rng, n_per=30)
    Xm, lab = punch(rng, X, y)
    per = jm.JointConfig(n_classes=3, reg_covar=1e-6)
    joint = jm.JointConfig(n_classes=3, n_components=3, structure="joint", reg_covar=1e-6)
    s_per = jm.init(jm.prepare(Xm, lab, 3), per, rng)
    data = jm.prepare(Xm, lab, 3)
    s_joint = jm.init_from_parameters(data, joint, s_per.weights, s_per.means, s_per.covariances, np.eye(3))
    for _ in range(15):  # zero label probabilities stay zero: the same EM
        s_per = jm.step(s_per, data, per)
        s_joint = jm.step(s_joint, data, joint)
    np.testing.assert_allclose(s_joint.label_probs, np.eye(3), atol=1e-12)
    np.testing.assert_allclose(s_joint.means, s_per.means, atol=1e-9)
    np.testing.assert_allclose(s_joint.objective, s_per.objective, rtol=1e-12)


# ----------------------------------------------------------------------------- properties
@pytest.mark.parametrize("structure,K,cov,prior,seed", [
    ("per_class", 1, "full", None, 0), ("per_class", 2, "full", None, 1), ("joint", 4, "full", None, 2),
    ("joint", 3, "diag", None, 3), ("per_class", 2, "diag", None, 4), ("joint", 3, "full", "auto", 5),
    ("per_class", 1, "full", NIWPrior(kappa=0.1), 6),
])
def test_semi_supervised_objective_never_decreases(structure, K, cov, prior, seed):
    rng = np.random.default_rng(seed)
    X, y = three_classes(rng, n_per=30)
    Xm, lab = punch(rng, X, y, 0.35, 0.5)
    Xm[:4] = np.nan  # labelled / unlabelled rows with nothing observed
    lab[:2] = 1
    # reg_covar 1e-8: the M-step is then the exact maximiser up to 1e-8 (0 lets small components collapse)
    cfg = jm.JointConfig(n_classes=3, n_components=K, structure=structure, covariance_type=cov, reg_covar=1e-8,
                         prior=prior, label_prior=0.5 if structure == "joint" and prior else 0.0)
    data = jm.prepare(Xm, lab, 3)
    st = jm.init(data, cfg, rng)
    objs = [st.objective]
    for _ in range(25):
        st = jm.step(st, data, cfg)
        objs.append(st.objective)
    d = np.diff(objs)
    assert np.all(d >= -1e-7), d.min()
    assert objs[-1] > objs[0] + 1.0
    # the E-step's log-likelihood is an independent evaluation of the observed-data likelihood
    np.testing.assert_allclose(jm.log_joint(st, Xm, lab, cfg).sum(), st.log_likelihood, rtol=1e-10)
    np.testing.assert_allclose(st.label_probs.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(st.weights.sum(), 1.0, atol=1e-12)


def test_posteriors_sum_to_one_and_empty_rows_get_the_class_prior():
    rng = np.random.default_rng(8)
    X, y = three_classes(rng)
    Xm, lab = punch(rng, X, y)
    cfg = jm.JointConfig(n_classes=3, n_components=2, structure="joint", label_prior=0.1)
    res = jm.fit(jm.prepare(Xm, lab, 3), cfg, rng)
    Q = Xm[:10].copy()
    Q[0] = np.nan
    p = np.exp(jm.predict_log_proba(res.state, Q, cfg))
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(p[0], res.state.class_priors(), atol=1e-12)
    assert np.all(np.isfinite(p))


def test_step_is_pure_and_fit_is_reproducible():
    rng = np.random.default_rng(9)
    X, y = three_classes(rng)
    Xm, lab = punch(rng, X, y)
    cfg = jm.JointConfig(n_classes=3, n_components=2)
    data = jm.prepare(Xm, lab, 3)
    st = jm.init(data, cfg, np.random.default_rng(1))
    before = (st.means.copy(), st.covariances.copy(), st.objective)
    new = jm.step(st, data, cfg)
    assert new.iteration == 1 and new is not st
    np.testing.assert_array_equal(st.means, before[0])
    np.testing.assert_array_equal(st.covariances, before[1])
    assert st.objective == before[2]
    with pytest.raises(ValueError):
        st.means[0, 0] = 1.0  # read-only
    a = jm.fit(data, cfg, np.random.default_rng(4))
    b = jm.fit(data, cfg, np.random.default_rng(4))
    np.testing.assert_array_equal(a.state.means, b.state.means)
    assert a.trace[-1]["objective"] == a.state.objective


def test_unlabelled_rows_improve_held_out_label_likelihood_on_two_clusters():
    rng = np.random.default_rng(21)
    cov = np.array([[1.0, 0.8], [0.8, 1.0]])

    def draw(n):
        y = rng.integers(0, 2, n)
        X = np.where(y[:, None] == 0, [-2.0, 2.0], [2.0, -2.0]) + rng.multivariate_normal([0, 0], cov, n)
        return X, y

    X, y = draw(300)
    Xt, yt = draw(300)
    lab = np.full(300, -1)
    for c in range(2):
        lab[np.flatnonzero(y == c)[:3]] = c  # three labelled rows per class
    Xm = X.copy()
    Xm[rng.random(X.shape) < 0.2] = np.nan
    cfg = jm.JointConfig(n_classes=2, reg_covar=1e-3, tol=1e-9, max_iter=300)
    semi = jm.fit(jm.prepare(Xm, lab, 2), cfg, rng).state
    keep = lab >= 0
    only = jm.fit(jm.prepare(Xm[keep], lab[keep], 2), cfg, rng).state
    ll_semi = jm.predict_log_proba(semi, Xt, cfg)[np.arange(300), yt].mean()
    ll_only = jm.predict_log_proba(only, Xt, cfg)[np.arange(300), yt].mean()
    assert ll_semi > ll_only + 0.05, (ll_semi, ll_only)
    np.testing.assert_allclose(semi.covariances[0], cov, atol=0.35)


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("kwargs,match", [
    (dict(n_classes=1), "n_classes must be an integer >= 2"),
    (dict(n_classes=2, n_components=0), "n_components must be a positive integer"),
    (dict(n_classes=2, structure="mixed"), "structure must be one of"),
    (dict(n_classes=2, covariance_type="tied"), "covariance_type must be one of"),
    (dict(n_classes=2, reg_covar=-1.0), "reg_covar must be a finite number >= 0"),
    (dict(n_classes=2, label_prior=np.nan), "label_prior must be a finite number >= 0"),
    (dict(n_classes=2, max_iter=-1), "max_iter must be a non-negative integer"),
    (dict(n_classes=2, n_init=0), "n_init must be a positive integer"),
    (dict(n_classes=2, init="kmeans++"), "init must be one of"),
    (dict(n_classes=2, prior="flat"), "prior must be None"),
])
def test_config_rejects_bad_settings(kwargs, match):
    with pytest.raises(BadInputError, match=match):
        jm.JointConfig(**kwargs)


def test_prepare_and_init_reject_bad_data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(10, 2))
    y = np.array([0, 1] * 5)
    with pytest.raises(BadInputError, match="labels must be 1-D"):
        jm.prepare(X, y[:-1], 2)
    with pytest.raises(BadInputError, match="labels must be in -1 .. 1"):
        jm.prepare(X, np.r_[y[:-1], 2], 2)
    with pytest.raises(BadInputError, match="non-integer"):
        jm.prepare(X, y + 0.5, 2)
    with pytest.raises(BadInputError, match="integer class codes"):
        jm.prepare(X, np.array(list("ab" * 5)), 2)
    with pytest.raises(BadInputError, match="No row is labelled"):
        jm.prepare(X, np.full(10, -1), 2)
    with pytest.raises(BadInputError, match="inf"):
        jm.prepare(np.r_[X[:-1], [[np.inf, 0.0]]], y, 2)
    with pytest.raises(BadInputError, match="Class 1 has 1 labelled row"):
        jm.init(jm.prepare(X, np.r_[np.zeros(9, dtype=int), 1], 2), jm.JointConfig(n_classes=2), rng)
    with pytest.raises(BadInputError, match="n_classes=3"):
        jm.init(jm.prepare(X, y, 2), jm.JointConfig(n_classes=3), rng)
    with pytest.raises(BadInputError, match="larger than the number of rows"):
        jm.init(jm.prepare(X, y, 2), jm.JointConfig(n_classes=2, n_components=11, structure="joint"), rng)
    data = jm.prepare(X, y, 2)
    cfg = jm.JointConfig(n_classes=2)
    with pytest.raises(BadInputError, match="label_probs"):
        jm.init_from_parameters(data, cfg, [0.5, 0.5], np.zeros((2, 2)), np.stack([np.eye(2)] * 2), np.ones((2, 2)))
    st = jm.fit(data, cfg, rng).state
    with pytest.raises(BadInputError, match="X has 3 feature"):
        jm.predict_log_proba(st, np.zeros((2, 3)), cfg)
