"""Tests of explorer.core.discrete.logit_vd (Marlin 2008 Section 5.6, digest 4.3).

Oracles: with all omega equal the likelihood and the predictions are CPT-v's at mu = sigmoid(sigma + omega);
the E-step likelihood against the explicit sum over the missing values with an item-dependent mu_vd; the M-step's
Newton rounds reach scipy's maximiser of the concave Q(sigma, omega). Properties: the log posterior never decreases
(generalised EM), predictions sum to one and depend on r, the thesis initialisation (equal sigma, distinct omega).
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest
from scipy.optimize import minimize

from explorer.core.discrete import cpt_v as C
from explorer.core.discrete import logit_vd as L
from explorer.core.discrete.ratings_data import prepare
from explorer.core.validation import BadInputError


def four_case_data(rng, N=300, D=6, V=4, K=2):
    """Mixture data with a Logit-vd selection and every (r, a) case present."""
    theta = rng.dirichlet(np.full(K, 5.0))
    beta = rng.dirichlet(np.ones(V), size=(K, D))
    z = rng.choice(K, size=N, p=theta)
    x = (rng.random((N, D, 1)) > np.cumsum(beta[z], axis=2)).sum(axis=2)
    mu = L.sigmoid(np.linspace(-1.5, 1.5, V)[:, None] + rng.normal(0, 0.7, D)[None, :])
    r = rng.random((N, D)) < mu[x, np.arange(D)]
    a = r & (rng.random((N, D)) < 0.8)
    a |= ~r & (rng.random((N, D)) < 0.15)
    return prepare(np.where(a, x, -1), response=r, available=a, n_values=V)


def test_with_equal_omega_the_likelihood_and_predictions_are_cpt_vs():
    rng = np.random.default_rng(0)
    data = four_case_data(rng)
    K, D, V = 3, data.n_features, data.n_values
    weights = rng.dirichlet(np.ones(K))
    probs = rng.dirichlet(np.ones(V), size=(K, D))
    sigma, c = rng.normal(0, 1, V), 0.4
    lstate = L.init_from_parameters(data, L.LogitVdConfig(n_components=K), weights, probs, sigma, np.full(D, c))
    cstate = C.init_from_parameters(data, C.CPTvConfig(n_components=K), weights, probs, L.sigmoid(sigma + c))
    np.testing.assert_allclose(L.log_likelihood_rows(lstate, data), C.log_likelihood_rows(cstate, data), rtol=1e-12)
    assert lstate.log_likelihood == pytest.approx(cstate.log_likelihood, rel=1e-12)
    np.testing.assert_allclose(L.predict_proba(lstate, data), C.predict_proba(cstate, data), atol=1e-12)


def test_e_step_likelihood_equals_the_sum_over_all_missing_values():
    rng = np.random.default_rng(1)
    K, D, V = 2, 2, 2
    weights, probs = np.array([0.45, 0.55]), rng.dirichlet(np.ones(V), size=(K, D))
    sigma, omega = np.array([-0.7, 0.9]), np.array([0.3, -0.5])
    mu = L.sigmoid(sigma[:, None] + omega[None, :])                  # (V, D)
    codes = np.array([[0, 1], [1, -1], [-1, 0], [-1, -1], [1, 0]])
    r = np.array([[1, 1], [1, 1], [0, 0], [1, 0], [0, 1]], dtype=bool)
    data = prepare(codes, response=r, available=codes >= 0, n_values=V)
    state = L.init_from_parameters(data, L.LogitVdConfig(n_components=K), weights, probs, sigma, omega)
    rows = L.log_likelihood_rows(state, data)
    for n in range(codes.shape[0]):
        miss = [d for d in range(D) if codes[n, d] < 0]
        total = 0.0
        for k in range(K):
            for vals in itertools.product(range(V), repeat=len(miss)):
                x = codes[n].copy()
                x[miss] = vals
                p = weights[k]
                for d in range(D):
                    p *= probs[k, d, x[d]] * (mu[x[d], d] if r[n, d] else 1.0 - mu[x[d], d])
                total += p
        assert rows[n] == pytest.approx(np.log(total), rel=1e-12)


def test_newton_rounds_reach_the_maximiser_of_q():
    rng = np.random.default_rng(2)
    V, D = 4, 6
    A = rng.uniform(1, 50, (V, D))
    B = rng.uniform(1, 50, (V, D))
    cfg = L.LogitVdConfig(n_newton=50, sigma_sd=3.0, omega_sd=2.0, sigma_mean=0.5)

    def neg_q(p):
        s, w = p[:V], p[V:]
        eta = s[:, None] + w[None, :]
        return -(L._q_terms(A, B, eta).sum() - 0.5 * np.sum(((s - 0.5) / 3.0) ** 2) - 0.5 * np.sum((w / 2.0) ** 2))

    s, w = L._m_step_selection(np.zeros(V), rng.normal(0, 0.1, D), A, B, cfg)
    ref = minimize(neg_q, np.zeros(V + D), method="BFGS", options={"gtol": 1e-10})
    np.testing.assert_allclose(np.concatenate([s, w]), ref.x, atol=1e-4)
    # a few rounds already increase Q and never decrease it
    q = [neg_q(np.concatenate([np.zeros(V), np.zeros(D)]))]
    s, w = np.zeros(V), np.zeros(D)
    for _ in range(5):
        s, w = L._m_step_selection(s, w, A, B, replace(cfg, n_newton=1))
        q.append(neg_q(np.concatenate([s, w])))
    assert np.all(np.diff(q) <= 1e-9)


def test_log_posterior_never_decreases():
    rng = np.random.default_rng(3)
    data = four_case_data(rng)
    cfg = L.LogitVdConfig(n_components=3, max_iter=60, tol=0.0)
    with pytest.warns(L.ConvergenceWarning):
        res = L.fit(data, cfg, rng)
    obj = np.array([s["objective"] for s in res.trace])
    assert np.all(np.diff(obj) >= -1e-9 * np.abs(obj[1:])), np.diff(obj).min()
    assert obj[-1] > obj[0] + 1.0
    first = res.trace[0]
    assert np.all(first["sigma"] == first["sigma"][0]) and np.unique(first["omega"]).size == data.n_features
    st = res.state
    np.testing.assert_allclose(st.mu, L.sigmoid(st.sigma[:, None] + st.omega[None, :]))


def test_fit_learns_the_value_effect_and_item_effects():
    rng = np.random.default_rng(4)
    N, D, V, K = 3000, 8, 4, 2
    theta = np.array([0.4, 0.6])
    beta = rng.dirichlet(np.ones(V) * 2, size=(K, D))
    z = rng.choice(K, size=N, p=theta)
    x = (rng.random((N, D, 1)) > np.cumsum(beta[z], axis=2)).sum(axis=2)
    sigma, omega = np.array([-1.5, -0.5, 0.5, 1.5]), np.linspace(-1, 1, D)
    r = rng.random((N, D)) < L.sigmoid(sigma[:, None] + omega[None, :])[x, np.arange(D)]
    data = prepare(x, response=r, available=r, n_values=V)
    cfg = L.LogitVdConfig(n_components=K, max_iter=300, tol=1e-6)
    st = L.fit(data, cfg, rng, init_state=L.init_from_parameters(data, cfg, theta, beta, sigma, omega)).state
    # sigma + omega is identified only up to a shift between the two: compare differences
    np.testing.assert_allclose(np.diff(st.sigma), np.diff(sigma), atol=0.4)
    np.testing.assert_allclose(st.omega - st.omega.mean(), omega - omega.mean(), atol=0.3)


def test_predictions_sum_to_one_and_depend_on_r():
    rng = np.random.default_rng(5)
    data = four_case_data(rng)
    cfg = L.LogitVdConfig(n_components=2)
    state = L.init_from_parameters(data, cfg, [0.5, 0.5], rng.dirichlet(np.ones(4), size=(2, data.n_features)),
                                   np.linspace(-1, 1, 4), rng.normal(0, 0.5, data.n_features))
    proba = L.predict_proba(state, data)
    np.testing.assert_allclose(proba.sum(axis=2), 1.0, atol=1e-12)
    avail = data.available
    np.testing.assert_array_equal(proba[avail], data.onehot[avail])
    n, d = np.argwhere(~avail & ~data.response)[0]
    r2 = np.array(data.response)
    r2[n, d] = True
    data2 = prepare(np.where(avail, data.codes, -1), response=r2, available=avail, n_values=4)
    assert C.predict_mean(L.predict_proba(state, data2)[n, d]) > C.predict_mean(proba[n, d])


def test_bad_inputs_raise_readable_errors():
    rng = np.random.default_rng(6)
    data = four_case_data(rng, N=30)
    with pytest.raises(BadInputError, match="sigma_sd"):
        L.LogitVdConfig(sigma_sd=0.0)
    with pytest.raises(BadInputError, match="phi must be >= 1"):
        L.LogitVdConfig(phi=0.5)
    with pytest.raises(BadInputError, match="n_newton"):
        L.LogitVdConfig(n_newton=0)
    with pytest.raises(BadInputError, match="omega_mean"):
        L.LogitVdConfig(omega_mean=float("nan"))
    with pytest.raises(BadInputError, match="RatingData"):
        L.fit(np.zeros((3, 3)), L.LogitVdConfig(), rng)
    with pytest.raises(BadInputError, match="shapes"):
        L.init_from_parameters(data, L.LogitVdConfig(n_components=2), [0.5, 0.5], np.full((2, 6, 4), 0.25),
                               np.zeros(4), np.zeros(5))
    cstate = C.init(data, C.CPTvConfig(n_components=2), rng)
    with pytest.raises(BadInputError, match="LogitVdState"):
        L.predict_proba(cstate, data)
