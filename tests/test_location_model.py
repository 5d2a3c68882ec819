"""Tests of explorer.core.mixtures.location_model (a mixture over numeric and categorical columns, MAP-EM).

Oracles: with no categorical column it is explorer.core.mixtures.em_gmm step by step from the same parameters
(same prior); with no numeric column it is explorer.core.discrete.categorical_mixture step by step (and the
same fixed points when rows with nothing observed make the iterates differ); the EM fixed point is the
maximiser of the log posterior written here independently (scipy densities, scipy.optimize over an
unconstrained parametrisation) on K = 2, D = 1, J = 1, and the objective is that log posterior minus the
Dirichlet normalisers; predict_proba, posterior and log_likelihood_rows equal brute-force sums over components
and levels on a tiny model; the completion-style EM (missing categories counted as r * theta) does not move
from our fixed point. Properties: the objective never decreases (hypothesis: random shapes, masks, covariance
types); weights, probabilities and responsibilities sum to one; samples keep the observed entries and follow
the predictive. Recovery: a known two-component model with 20 % MCAR everywhere, fitted from random
responsibilities. Bad input: shapes, codes, levels, components, configs.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize
from scipy.special import gammaln, log_softmax
from scipy.stats import invgamma, multivariate_normal, norm

from explorer.core.discrete import categorical_mixture as cm
from explorer.core.discrete.ratings_data import prepare as prepare_ratings
from explorer.core.mixtures import em_gmm
from explorer.core.mixtures import location_model as lm
from explorer.core.mixtures.prior import NIWPrior
from explorer.core.validation import BadInputError


def mixed_data(rng, n=200, D=2, levels=(3, 4), K=2, hole=0.2, sep=3.0):
    """Rows from a K-component location model with MCAR holes; returns (X, codes, z, truth params)."""
    weights = rng.dirichlet(np.full(K, 5.0))
    means = rng.normal(scale=sep, size=(K, D))
    probs = [rng.dirichlet(np.full(V, 0.7), size=K) for V in levels]
    z = rng.choice(K, size=n, p=weights)
    X = means[z] + rng.normal(size=(n, D))
    codes = np.stack([np.array([rng.choice(V, p=p[k]) for k in z]) for p, V in zip(probs, levels)], axis=1) \
        if levels else np.zeros((n, 0), dtype=np.int64)
    X[rng.random(X.shape) < hole] = np.nan
    codes[rng.random(codes.shape) < hole] = -1
    return X, codes, z, (weights, means, probs)


def random_parameters(rng, K, D, levels, covariance_type="full"):
    w = rng.dirichlet(np.ones(K) * 3)
    mu = rng.normal(scale=2.0, size=(K, D))
    if covariance_type == "full":
        A = rng.normal(size=(K, D, D))
        cov = A @ np.swapaxes(A, 1, 2) + np.eye(D)
    else:
        cov = rng.uniform(0.5, 2.0, size=(K, D))
    probs = [rng.dirichlet(np.ones(V)) for V in levels for _ in range(K)]
    probs = [np.stack(probs[i * K:(i + 1) * K]) for i in range(len(levels))]
    return w, mu, cov, probs


# ----------------------------------------------------------------------------- oracle (a): the Gaussian mixture
@pytest.mark.parametrize("covariance_type, prior", [("full", "auto"), ("diag", "auto"), ("full", None),
                                                    ("diag", "fraley-raftery")])
def test_without_categorical_columns_it_is_em_gmm_step_by_step(covariance_type, prior):
    rng = np.random.default_rng(0)
    X, _, _, _ = mixed_data(rng, n=150, D=3, levels=(), K=3, hole=0.25)
    X[:3] = np.nan  # rows with nothing observed
    K = 3
    w0, mu0, cov0, _ = random_parameters(rng, K, 3, (), covariance_type)
    ecfg = em_gmm.EMConfig(n_components=K, covariance_type=covariance_type, prior=prior, strategy="numpy")
    edata = em_gmm.prepare(X)
    est = em_gmm.init_from_parameters(edata, ecfg, w0, mu0, cov0)
    cfg = lm.LocationConfig(n_components=K, covariance_type=covariance_type, prior=prior)
    data = lm.prepare(X)
    lst = lm.init_from_parameters(data, cfg, w0, mu0, cov0, [])
    for it in range(12):
        np.testing.assert_allclose(lst.weights, est.weights, rtol=1e-10, atol=1e-14, err_msg=str(it))
        np.testing.assert_allclose(lst.means, est.means, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(lst.covariances, est.covariances, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(lst.resp, est.resp, atol=1e-10)
        np.testing.assert_allclose(lst.objective, est.objective, rtol=1e-12)
        np.testing.assert_allclose(lst.log_likelihood, est.log_likelihood, rtol=1e-12)
        est, lst = em_gmm.step(est, edata, ecfg), lm.step(lst, data, cfg)


@pytest.mark.parametrize("strategy", ["compiled", "covariance"])
def test_every_numeric_kernel_gives_the_numpy_kernels_fit(strategy):
    """The categorical log-probabilities enter the numeric block's E-step as a per-row offset: the compiled kernel
    and the covariance side give the reference (numpy) kernels' iterates, with rows that have no numeric entry and
    rows that have nothing observed."""
    rng = np.random.default_rng(5)
    X, codes, _, _ = mixed_data(rng, n=300, D=4, levels=(3, 2), K=3, hole=0.35)
    X[:6] = np.nan  # categories only
    X[6:8], codes[6:8] = np.nan, -1  # nothing observed
    K = 3
    w0, mu0, cov0, p0 = random_parameters(rng, K, 4, (3, 2))
    states = {}
    for kernel in ("numpy", strategy):
        cfg = lm.LocationConfig(n_components=K, strategy=kernel)
        data = lm.prepare(X, codes)
        state = lm.init_from_parameters(data, cfg, w0, mu0, cov0, p0)
        trace = [state]
        for _ in range(10):
            trace.append(state := lm.step(state, data, cfg))
        states[kernel] = trace
    assert states["numpy"][-1].objective > states["numpy"][0].objective + 1.0  # the fit moved
    for a, b in zip(states["numpy"], states[strategy]):
        np.testing.assert_allclose(b.resp, a.resp, atol=1e-10)
        np.testing.assert_allclose(b.means, a.means, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(b.covariances, a.covariances, rtol=1e-10, atol=1e-12)
        for p, q in zip(b.probs, a.probs):
            np.testing.assert_allclose(p, q, rtol=1e-10, atol=1e-14)
        np.testing.assert_allclose(b.objective, a.objective, rtol=1e-12)
    last = states[strategy][-1]
    np.testing.assert_allclose(last.resp[6:8], np.tile(last.weights, (2, 1)), rtol=1e-12)  # nothing observed


# ----------------------------------------------------------------------------- oracle (b): the categorical mixture
def _as_ratings(codes):
    return np.where(codes >= 0, codes, np.nan).astype(float)


@pytest.mark.parametrize("alpha, phi", [(1.0, 2.0), (2.0, 1.5), (1.3, 1.0)])
def test_without_numeric_columns_it_is_the_categorical_mixture_step_by_step(alpha, phi):
    rng = np.random.default_rng(1)
    V, J, K = 3, 4, 3
    _, codes, _, _ = mixed_data(rng, n=160, D=0, levels=(V,) * J, K=K, hole=0.3)
    empty = (codes < 0).all(axis=1)
    codes[empty, 0] = 1  # categorical_mixture counts rows with nothing observed in N (see the next test)
    w0 = rng.dirichlet(np.ones(K))
    p0 = rng.dirichlet(np.ones(V), size=(K, J))  # categorical_mixture's (K, D, V)
    ccfg = cm.CategoricalConfig(n_components=K, alpha=alpha, phi=phi)
    rdata = prepare_ratings(_as_ratings(codes), n_values=V)
    cst = cm.init_from_parameters(rdata, ccfg, w0, p0)
    cfg = lm.LocationConfig(n_components=K, alpha=alpha, phi=phi)
    data = lm.prepare(None, codes, n_levels=(V,) * J)
    lst = lm.init_from_parameters(data, cfg, w0, None, None, [p0[:, j] for j in range(J)])
    for _ in range(12):
        np.testing.assert_allclose(lst.weights, cst.weights, rtol=1e-10)
        np.testing.assert_allclose(np.stack(lst.probs, axis=1), cst.probs, rtol=1e-10, atol=1e-14)
        np.testing.assert_allclose(lst.resp, cst.resp, atol=1e-10)
        np.testing.assert_allclose(lst.objective, cst.objective, rtol=1e-12)
        cst, lst = cm.step(cst, rdata, ccfg), lm.step(lst, data, cfg)
    np.testing.assert_allclose(lm.log_likelihood_rows(lst, data), cm.log_likelihood_rows(cst, rdata), rtol=1e-12)
    np.testing.assert_allclose(np.stack(lm.predict_proba(lst, data), axis=1)[codes < 0],
                               cm.predict_proba(cst, rdata)[codes < 0], atol=1e-12)


def test_rows_with_nothing_observed_leave_the_categorical_mixture_fixed_point_unchanged():
    rng = np.random.default_rng(2)
    V, J, K = 3, 3, 2
    _, codes, _, _ = mixed_data(rng, n=150, D=0, levels=(V,) * J, K=K, hole=0.3)
    codes[:10] = -1
    cfg = lm.LocationConfig(n_components=K, alpha=2.0, phi=2.0)
    data = lm.prepare(None, codes, n_levels=(V,) * J)
    st_ = converged(lm.fit(data, cfg, rng).state, data, cfg)
    np.testing.assert_allclose(st_.resp[:10], np.broadcast_to(st_.weights, (10, K)), rtol=0, atol=0)
    ccfg = cm.CategoricalConfig(n_components=K, alpha=2.0, phi=2.0)
    rdata = prepare_ratings(_as_ratings(codes), n_values=V)
    cst = cm.init_from_parameters(rdata, ccfg, st_.weights, np.stack(st_.probs, axis=1))
    np.testing.assert_allclose(cst.objective, st_.objective, rtol=1e-12)
    nxt = cm.step(cst, rdata, ccfg)  # the other EM (empty rows counted with q = pi) does not move
    np.testing.assert_allclose(nxt.weights, st_.weights, atol=1e-10)
    np.testing.assert_allclose(nxt.probs, np.stack(st_.probs, axis=1), atol=1e-10)


def converged(state, data, cfg, max_iter=20000):
    """EM steps until no parameter moves by more than 1e-13 (EM converges linearly: a tolerance on the
    objective leaves the parameters about its square root away)."""
    for _ in range(max_iter):
        new = lm.step(state, data, cfg)
        moved = max(np.abs(new.weights - state.weights).max(), np.abs(new.means - state.means).max(initial=0),
                    np.abs(new.covariances - state.covariances).max(initial=0),
                    *(np.abs(a - b).max() for a, b in zip(new.probs, state.probs)))
        state = new
        if moved < 1e-13:
            return state
    raise AssertionError("EM did not converge")


# ----------------------------------------------------------------------------- oracle (c): the direct maximiser
def _log_posterior(x, c, pi, mu, var, theta, prior, alpha, phi):
    """Observed-data log posterior of the K-component, D = 1, J = 1 model, normalised priors (scipy densities)."""
    K = pi.size
    comp = np.tile(np.log(pi), (x.size, 1))
    ox, oc = ~np.isnan(x), c >= 0
    comp[ox] += norm.logpdf(x[ox, None], mu, np.sqrt(var))
    comp[oc] += np.log(theta[:, c[oc]]).T
    seen = ox | oc
    ll = np.logaddexp.reduce(comp[seen], axis=1).sum()
    m0, kappa, dof, scale = prior.mean[0], prior.kappa, prior.dof, prior.scale.ravel()[0]
    lp = sum(norm.logpdf(mu[k], m0, np.sqrt(var[k] / kappa)) + invgamma.logpdf(var[k], dof / 2, scale=scale / 2)
             for k in range(K))
    V = theta.shape[1]
    lp += gammaln(K * alpha) - K * gammaln(alpha) + (alpha - 1) * np.log(pi).sum()
    lp += K * (gammaln(V * phi) - V * gammaln(phi)) + (phi - 1) * np.log(theta).sum()
    return ll + lp


@pytest.mark.parametrize("hole", [0.0, 0.25])
def test_the_fixed_point_maximises_the_log_posterior(hole):
    rng = np.random.default_rng(3)
    V, alpha = 3, 1.5
    X, codes, _, _ = mixed_data(rng, n=40, D=1, levels=(V,), K=2, hole=hole, sep=2.0)
    cfg = lm.LocationConfig(n_components=2, covariance_type="full", reg_covar=0.0, alpha=alpha)
    data = lm.prepare(X, codes, n_levels=(V,))
    s = converged(lm.fit(data, cfg, rng).state, data, cfg)
    phi = 1.0 + 1.0 / V
    x, c, prior = X[:, 0], codes[:, 0], s.prior

    def unpack(u):
        return (np.exp(log_softmax(np.r_[0.0, u[0]])), u[1:3], np.exp(u[3:5]),
                np.exp(log_softmax(u[5:].reshape(2, V), axis=1)))

    def neg(u):
        return -_log_posterior(x, c, *unpack(u), prior, alpha, phi)

    u_em = np.r_[np.log(s.weights[1] / s.weights[0]), s.means[:, 0], np.log(s.covariances[:, 0, 0]),
                 np.log(s.probs[0]).ravel()]
    start = u_em + rng.normal(scale=0.2, size=u_em.size)
    best = minimize(neg, start, method="BFGS", options={"gtol": 1e-9, "maxiter": 5000})
    pi, mu, var, theta = unpack(best.x)
    np.testing.assert_allclose(s.weights, pi, atol=1e-6)
    np.testing.assert_allclose(s.means[:, 0], mu, atol=1e-6)
    np.testing.assert_allclose(s.covariances[:, 0, 0], var, atol=1e-6)
    np.testing.assert_allclose(s.probs[0], theta, atol=1e-6)
    assert -best.fun <= -neg(u_em) + 1e-8
    # the objective is that log posterior without the Dirichlet normalisers, at any parameters
    const = gammaln(2 * alpha) - 2 * gammaln(alpha) + 2 * (gammaln(V * phi) - V * gammaln(phi))
    for state in (s, lm.init(data, cfg, rng)):
        u = np.r_[np.log(state.weights[1] / state.weights[0]), state.means[:, 0],
                  np.log(state.covariances[:, 0, 0]), np.log(state.probs[0]).ravel()]
        np.testing.assert_allclose(state.objective + const, -neg(u), rtol=1e-10)


def test_completing_missing_categories_does_not_move_the_fixed_point():
    """The other EM (a missing category counted as r_nk * theta_kj) has the same fixed points."""
    rng = np.random.default_rng(4)
    X, codes, _, _ = mixed_data(rng, n=200, D=2, levels=(3, 2), K=2, hole=0.3)
    cfg = lm.LocationConfig(n_components=2)
    data = lm.prepare(X, codes)
    s = converged(lm.fit(data, cfg, rng).state, data, cfg)
    fit_rows = ~(np.isnan(X).all(axis=1) & (codes < 0).all(axis=1))
    for j, (theta, V) in enumerate(zip(s.probs, data.n_levels)):
        phi = 1.0 + 1.0 / V
        seen = codes[:, j] >= 0
        counts = s.resp[seen].T @ np.eye(V)[codes[seen, j]]
        counts = counts + s.resp[fit_rows & ~seen].sum(axis=0)[:, None] * theta
        other = (phi - 1 + counts) / (counts.sum(axis=1, keepdims=True) + V * (phi - 1))
        np.testing.assert_allclose(other, theta, atol=1e-10)


# ----------------------------------------------------------------------------- oracle (d): brute force
def _row_terms(row_x, row_c, w, mu, cov, probs, skip=None):
    """Per component: pi_k N(x_o) prod_{j observed, j != skip} theta_kj[c_j], by scipy."""
    K = w.size
    o = ~np.isnan(row_x)
    out = np.array(w, dtype=float)
    for k in range(K):
        if o.any():
            out[k] *= multivariate_normal(mu[k][o], cov[k][np.ix_(o, o)]).pdf(row_x[o])
        for j, cj in enumerate(row_c):
            if cj >= 0 and j != skip:
                out[k] *= probs[j][k, cj]
    return out


def test_predictions_are_brute_force_sums():
    rng = np.random.default_rng(5)
    K, D, levels = 3, 2, (2, 3)
    w, mu, cov, probs = random_parameters(rng, K, D, levels)
    X, codes, _, _ = mixed_data(rng, n=30, D=D, levels=levels, K=2, hole=0.4)
    X[0], codes[0] = np.nan, -1  # nothing observed
    X[1], codes[1] = np.nan, [1, 2]  # categories only
    X[2], codes[2] = [0.3, -1.0], -1  # numbers only
    data = lm.prepare(X, codes, n_levels=levels)
    cfg = lm.LocationConfig(n_components=K, prior=None)
    s = lm.init_from_parameters(data, cfg, w, mu, cov, probs)
    pred = lm.predict_proba(s, data)
    post = lm.posterior(s, data)
    llr = lm.log_likelihood_rows(s, data)
    for n in range(30):
        terms = _row_terms(X[n], codes[n], w, mu, cov, probs)
        np.testing.assert_allclose(post[n], terms / terms.sum(), atol=1e-12)
        np.testing.assert_allclose(llr[n], np.log(terms.sum()) if n else 0.0, atol=1e-12)
        for j, V in enumerate(levels):
            joint = np.array([_row_terms(X[n], codes[n], w, mu, cov, probs, skip=j) @ probs[j][:, v]
                              for v in range(V)])
            np.testing.assert_allclose(pred[j][n], joint / joint.sum(), atol=1e-12)
    np.testing.assert_allclose(post[0], w, rtol=1e-15)
    np.testing.assert_allclose(s.resp, post, atol=1e-13)
    np.testing.assert_allclose(s.log_likelihood, llr.sum(), rtol=1e-12)
    # the numeric conditional weighs its components by the responsibilities, categories included
    cond = lm.conditional_numeric(s, data)
    np.testing.assert_allclose(cond.weights, post, atol=1e-13)
    np.testing.assert_allclose(cond.mean()[1], post[1] @ mu, atol=1e-12)  # categories only: a mixture of means
    assert np.array_equal(cond.mean()[~np.isnan(X)], X[~np.isnan(X)])


# ----------------------------------------------------------------------------- properties
@st.composite
def problems(draw):
    seed = draw(st.integers(0, 2**32 - 1))
    D = draw(st.integers(0, 3))
    J = draw(st.integers(0 if D else 1, 3))
    K = draw(st.integers(1, 3))
    n = draw(st.integers(max(10, 3 * K), 60))
    hole = draw(st.floats(0.0, 0.5))
    covariance_type = draw(st.sampled_from(["full", "diag"]))
    alpha = draw(st.sampled_from([1.0, 2.0]))
    phi = draw(st.sampled_from([None, 1.0, 3.0]))
    init = draw(st.sampled_from(["kmeans", "random"]))
    return seed, D, J, K, n, hole, covariance_type, alpha, phi, init


@settings(max_examples=60, deadline=None)
@given(problems())
def test_the_objective_never_decreases_and_everything_sums_to_one(problem):
    seed, D, J, K, n, hole, covariance_type, alpha, phi, init = problem
    rng = np.random.default_rng(seed)
    levels = tuple(int(v) for v in rng.integers(1, 5, size=J))
    X, codes, _, _ = mixed_data(rng, n=n, D=D, levels=levels, K=2, hole=hole)
    for j in range(J):  # every column observed somewhere
        codes[j, j] = max(codes[j, j], 0)
    for r in range(K):  # and K rows with an observed entry (fewer are refused, rightly: a bad-input test)
        if J:
            codes[r, r % J] = max(codes[r, r % J], 0)
        elif np.isnan(X[r]).all():
            X[r, 0] = 0.0
    if D:
        X[0, :] = np.where(np.isnan(X[0]), 0.5, X[0])
        X[1, :] = np.where(np.isnan(X[1]), -0.5, X[1])
    data = lm.prepare(X if D else None, codes if J else None, n_levels=levels if J else None)
    # reg_covar = 0: the M-step is the exact maximiser, so monotonicity is a theorem (the prior keeps covariances
    # positive definite)
    prior = NIWPrior(kappa=0.5, scale=np.ones(D)) if D else None
    cfg = lm.LocationConfig(n_components=K, covariance_type=covariance_type, reg_covar=0.0, prior=prior,
                            alpha=alpha, phi=phi, init=init)
    states = [lm.init(data, cfg, rng)]
    for _ in range(12):
        states.append(lm.step(states[-1], data, cfg))
    obj = np.array([s_.objective for s_ in states])
    assert np.all(np.diff(obj) >= -1e-9 * np.abs(obj[:-1]) - 1e-10), obj
    for s_ in states:
        assert np.isfinite(s_.objective)
        assert s_.objective == pytest.approx(s_.log_likelihood + s_.log_prior, rel=1e-12, abs=1e-12)
        np.testing.assert_allclose(s_.weights.sum(), 1.0, rtol=1e-12)
        np.testing.assert_allclose(s_.resp.sum(axis=1), 1.0, rtol=1e-12)
        for p in s_.probs:
            np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-12)
    last = states[-1]
    for p in lm.predict_proba(last, data):
        assert np.all(np.isfinite(p))
        np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-12)
    num, cat = lm.sample(last, data, 2, rng)
    assert np.all(np.isfinite(num)) and np.all(cat >= 0)
    assert np.array_equal(num[:, ~data.missing], np.broadcast_to(X[~data.missing], (2, int((~data.missing).sum()))))
    seen = data.codes >= 0
    assert np.array_equal(cat[:, seen], np.broadcast_to(data.codes[seen], (2, int(seen.sum()))))


def test_samples_follow_the_predictive_jointly():
    rng = np.random.default_rng(6)
    K, levels = 2, (3,)
    w = np.array([0.5, 0.5])
    mu = np.array([[-3.0, 0.0], [3.0, 0.0]])
    cov = np.stack([np.eye(2), np.eye(2)])
    probs = [np.array([[0.9, 0.05, 0.05], [0.05, 0.05, 0.9]])]
    X = np.array([[np.nan, 0.1], [np.nan, np.nan], [-3.0, np.nan]])
    codes = np.array([[-1], [-1], [2]])
    data = lm.prepare(X, codes, n_levels=levels)
    s = lm.init_from_parameters(data, lm.LocationConfig(n_components=K, prior=None), w, mu, cov, probs)
    num, cat = lm.sample(s, data, 6000, rng)
    pred = lm.predict_proba(s, data)[0]
    for n in (0, 1):
        freq = np.bincount(cat[:, n, 0], minlength=3) / 6000
        np.testing.assert_allclose(freq, pred[n], atol=0.025)
        # jointly: the first number follows the component the category came from
        assert num[cat[:, n, 0] == 0, n, 0].mean() < -2.5 and num[cat[:, n, 0] == 2, n, 0].mean() > 2.5
    np.testing.assert_allclose(num[:, :, 0].mean(axis=0)[:2], lm.conditional_numeric(s, data).mean()[:2, 0], atol=0.15)
    assert np.all(num[:, 2, 0] == -3.0) and np.all(cat[:, 2, 0] == 2)
    with pytest.raises(BadInputError):
        lm.sample(s, data, 0, rng)


# ----------------------------------------------------------------------------- recovery
def test_recovers_a_known_model_from_random_responsibilities():
    rng = np.random.default_rng(7)
    n = 1500
    z = rng.choice(2, size=n, p=[0.45, 0.55])
    mu = np.array([[0.0, 0.0], [2.5, -2.0]])
    X = mu[z] + rng.normal(size=(n, 2)) @ np.array([[1.0, 0.4], [0.0, 0.8]])
    theta = [np.array([[0.7, 0.2, 0.1], [0.1, 0.25, 0.65]]), np.array([[0.1, 0.1, 0.3, 0.5], [0.5, 0.3, 0.1, 0.1]])]
    codes = np.stack([np.array([rng.choice(t.shape[1], p=t[k]) for k in z]) for t in theta], axis=1)
    Xm, cm_ = X.copy(), codes.copy()
    Xm[rng.random(X.shape) < 0.2] = np.nan
    hidden = rng.random(codes.shape) < 0.2
    cm_[hidden] = -1
    data = lm.prepare(Xm, cm_, n_levels=(3, 4))
    res = lm.fit(data, lm.LocationConfig(n_components=2, init="random", n_init=2), rng)
    s = res.state
    assert res.converged
    order = np.argsort(s.means[:, 0])  # component 0 of the truth has the smaller first mean
    np.testing.assert_allclose(s.weights[order], [0.45, 0.55], atol=0.04)
    np.testing.assert_allclose(s.means[order], mu, atol=0.2)
    for p, t in zip(s.probs, theta):
        np.testing.assert_allclose(p[order], t, atol=0.06)  # the pooled marginal is >= 0.2 away from each row
    _, filled = lm.impute(s, data)
    for j in range(2):
        h = hidden[:, j]
        accuracy = np.mean(filled[h, j] == codes[h, j])
        baseline = np.max(np.bincount(cm_[cm_[:, j] >= 0, j])) / np.sum(cm_[:, j] >= 0)
        assert accuracy > baseline + 0.12, (j, accuracy, baseline)
    assert np.array_equal(filled[~hidden], codes[~hidden])


# ----------------------------------------------------------------------------- shapes of the data
def test_rows_with_one_block_observed_and_new_rows():
    rng = np.random.default_rng(8)
    X, codes, _, _ = mixed_data(rng, n=120, D=2, levels=(3,), K=2, hole=0.1)
    X[:15] = np.nan  # categories only
    codes[15:30] = -1  # numbers only
    X[30:33], codes[30:33] = np.nan, -1  # nothing
    data = lm.prepare(X, codes)
    s = lm.fit(data, lm.LocationConfig(n_components=2), rng).state
    np.testing.assert_allclose(s.resp[30:33], np.broadcast_to(s.weights, (3, 2)))
    assert not np.allclose(s.resp[:15], s.weights)  # the categories move the responsibilities
    np.testing.assert_allclose(s.nk.sum(), 117)  # every row with an observed entry counts in N
    np.testing.assert_allclose(s.stats.nk.sum(), 120 - 18)  # the Gaussian block: rows with a number only
    # one new row, with a level the data never showed
    new = lm.prepare(np.array([[np.nan, 1.0]]), np.array([[2]]), n_levels=(3,))
    assert lm.posterior(s, new).shape == (1, 2)
    assert np.isfinite(lm.log_likelihood_rows(s, new)).all()
    with pytest.raises(BadInputError, match="n_levels"):
        lm.posterior(s, lm.prepare(np.array([[0.0, 1.0]]), np.array([[1]]), n_levels=(4,)))
    with pytest.raises(BadInputError, match="numeric column"):
        lm.posterior(s, lm.prepare(np.array([[0.0]]), np.array([[1]]), n_levels=(3,)))


def test_a_one_level_column_is_allowed_and_certain():
    rng = np.random.default_rng(9)
    X, codes, _, _ = mixed_data(rng, n=80, D=1, levels=(2,), K=2)
    codes = np.concatenate([codes, np.where(rng.random((80, 1)) < 0.3, -1, 0)], axis=1)
    data = lm.prepare(X, codes, n_levels=(2, 1))
    assert lm.prepare(X, codes).n_levels[1] == 1  # inferred: the largest code + 1
    s = lm.fit(data, lm.LocationConfig(n_components=2), rng).state
    np.testing.assert_allclose(lm.predict_proba(s, data)[1], 1.0)
    np.testing.assert_allclose(s.probs[1], 1.0)


def test_fit_is_reproducible_and_traced():
    X, codes, _, _ = mixed_data(np.random.default_rng(10), n=100, D=2, levels=(3,), K=2)
    data = lm.prepare(X, codes)
    cfg = lm.LocationConfig(n_components=2, n_init=2)
    a = lm.fit(data, cfg, np.random.default_rng(0))
    b = lm.fit(data, cfg, np.random.default_rng(0))
    assert a.state.objective == b.state.objective and len(a.restart_objectives) == 2
    assert a.trace[-1]["objective"] == a.state.objective and a.n_iter == len(a.trace) - 1


# ----------------------------------------------------------------------------- bad input
def test_bad_data_is_refused_with_a_message():
    X = np.zeros((10, 2))
    with pytest.raises(BadInputError, match="10 row"):
        lm.prepare(X, np.zeros((9, 1), dtype=int))
    with pytest.raises(BadInputError, match="no column"):
        lm.prepare(None, None)
    with pytest.raises(BadInputError, match=r"outside -1\.\.2"):
        lm.prepare(X, np.full((10, 1), 3), n_levels=(3,))
    with pytest.raises(BadInputError, match="outside"):
        lm.prepare(X, np.full((10, 1), -2))
    with pytest.raises(BadInputError, match="non-integer"):
        lm.prepare(X, np.full((10, 1), 0.5))
    with pytest.raises(BadInputError, match="factorize"):
        lm.prepare(X, np.array([["a"]] * 10))
    with pytest.raises(BadInputError, match="2-D"):
        lm.prepare(X, np.zeros(10, dtype=int))
    with pytest.raises(BadInputError, match="one number of levels"):
        lm.prepare(X, np.zeros((10, 1), dtype=int), n_levels=(2, 2))
    ids = np.arange(150)[:, None]
    with pytest.raises(BadInputError, match=r"'user_id' \(column 0\) has 150 levels.*identifier or free text"):
        lm.prepare(None, ids, categorical_columns=["user_id"])
    assert lm.prepare(None, ids, max_levels=200).n_levels == (150,)
    with pytest.raises(BadInputError, match="infinite"):
        lm.prepare(np.array([[np.inf], [1.0]]), np.zeros((2, 1), dtype=int))


def test_bad_fits_are_refused_with_a_message():
    rng = np.random.default_rng(11)
    X, codes, _, _ = mixed_data(rng, n=6, D=1, levels=(2,), K=2, hole=0.0)
    with pytest.raises(BadInputError, match="n_components=7 is more than the 6"):
        lm.fit(lm.prepare(X, codes), lm.LocationConfig(n_components=7), rng)
    c2 = codes.copy()
    c2[:] = -1
    with pytest.raises(BadInputError, match="categorical column 0 has no observed value"):
        lm.init(lm.prepare(X, c2, n_levels=(2,)), lm.LocationConfig(), rng)
    with pytest.raises(BadInputError, match="numeric column 0 has no observed value"):
        lm.fit(lm.prepare(np.full((6, 1), np.nan), codes), lm.LocationConfig(), rng)
    with pytest.raises(BadInputError, match="no numeric column"):
        data = lm.prepare(None, codes)
        lm.conditional_numeric(lm.fit(data, lm.LocationConfig(), rng).state, data)
    data = lm.prepare(X, codes)
    with pytest.raises(BadInputError, match="probs"):
        lm.init_from_parameters(data, lm.LocationConfig(), [0.5, 0.5], [[0.0], [1.0]], [[[1.0]], [[1.0]]],
                                [np.array([[0.5, 0.6], [0.5, 0.5]])])
    with pytest.raises(BadInputError, match="shapes"):
        lm.init_from_parameters(data, lm.LocationConfig(), [0.5, 0.5], [0.0, 1.0], [[[1.0]], [[1.0]]],
                                [np.full((2, 2), 0.5)])
    with pytest.raises(BadInputError, match="LocationData"):
        lm.fit(X, lm.LocationConfig(), rng)


@pytest.mark.parametrize("kwargs, match", [
    ({"alpha": 0.5}, "alpha"), ({"phi": 0.9}, "phi"), ({"phi": True}, "phi"), ({"n_components": 0}, "n_components"),
    ({"covariance_type": "tied"}, "covariance_type"), ({"prior": "flat"}, "prior"), ({"init": "truth"}, "init"),
    ({"reg_covar": -1.0}, "reg_covar"), ({"tol": -1.0}, "tol"), ({"max_iter": 1.5}, "max_iter"),
    ({"n_init": 0}, "n_init"), ({"strategy": "gpu"}, "strategy"),
])
def test_bad_configs_are_refused(kwargs, match):
    with pytest.raises(BadInputError, match=match):
        lm.LocationConfig(**kwargs)


def test_no_nan_with_maximum_likelihood_and_unseen_levels():
    """phi = 1 and alpha = 1: probabilities may reach 0; every output stays finite."""
    rng = np.random.default_rng(12)
    X, codes, _, _ = mixed_data(rng, n=60, D=2, levels=(4,), K=2, hole=0.3)
    codes[codes == 3] = 2  # level 3 never observed
    X[0], codes[0] = np.nan, -1
    data = lm.prepare(X, codes, n_levels=(4,))
    s = lm.fit(data, lm.LocationConfig(n_components=3, phi=1.0, prior="auto"), rng).state
    outs = [s.resp, *s.probs, lm.posterior(s, data), lm.log_likelihood_rows(s, data), *lm.predict_proba(s, data),
            *lm.impute(s, data), *lm.sample(s, data, 2, rng)]
    assert all(np.all(np.isfinite(o)) for o in outs)
    new = lm.prepare(np.array([[0.0, 0.0]]), np.array([[3]]), n_levels=(4,))
    assert np.all(np.isfinite(lm.posterior(s, new))) and np.isfinite(lm.log_likelihood_rows(s, new)).all()


def test_the_state_is_immutable():
    rng = np.random.default_rng(13)
    X, codes, _, _ = mixed_data(rng, n=50, D=2, levels=(3,), K=2)
    data = lm.prepare(X, codes)
    s = lm.init(data, lm.LocationConfig(), rng)
    for a in (s.weights, s.means, s.covariances, s.resp, *s.probs, data.X, data.codes):
        with pytest.raises(ValueError):
            a[...] = 0
    nxt = lm.step(s, data, lm.LocationConfig())
    assert nxt.iteration == 1 and s.iteration == 0


def test_combinations_of_patterns_in_brute_force_order():
    """Every (numeric observed?, category observed?) combination of one row gives the brute-force posterior."""
    K, levels = 2, (3,)
    w, mu, cov = np.array([0.3, 0.7]), np.array([[0.0], [2.0]]), np.array([[[1.0]], [[0.5]]])
    probs = [np.array([[0.6, 0.3, 0.1], [0.1, 0.2, 0.7]])]
    rows = list(itertools.product([np.nan, 1.0], [-1, 0, 2]))
    X = np.array([[r[0]] for r in rows])
    codes = np.array([[r[1]] for r in rows])
    data = lm.prepare(X, codes, n_levels=levels)
    s = lm.init_from_parameters(data, lm.LocationConfig(n_components=K, prior=None), w, mu, cov, probs)
    for n in range(len(rows)):
        terms = _row_terms(X[n], codes[n], w, mu, cov, probs)
        np.testing.assert_allclose(s.resp[n], terms / terms.sum(), atol=1e-14)
