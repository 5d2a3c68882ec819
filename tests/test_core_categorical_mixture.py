"""Tests of explorer.core.discrete.categorical_mixture (Marlin 2008 section 4.1, MAP-EM with MAR missing data).

Oracles: at V = 2 with alpha = 1, phi = 1 + a it is explorer.core.discrete.bernoulli_mixture with pseudo_count = a
(the same iterates on complete data, the same fixed points and log-likelihoods with holes); the M-step is
the maximiser of the expected complete log posterior (found numerically by scipy on a tiny case); K = 1 is
the closed-form MAP frequency; the objective and predict_proba equal explicit loops over the thesis's
products. Properties: the objective never decreases, weights / probs / responsibilities / predictions
sum to one. Bad input: alpha or phi < 1, K > N, wrong V or D, not a RatingData.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import log_softmax

from explorer.core.discrete import bernoulli_mixture as bm
from explorer.core.discrete import categorical_mixture as cm
from explorer.core.discrete.ratings_data import prepare
from explorer.core.validation import BadInputError


def categorical_data(rng, n=120, D=5, V=3, K=3, hole=0.3):
    protos = rng.dirichlet(np.full(V, 0.5), size=(K, D))
    z = rng.integers(0, K, n)
    x = np.array([[rng.choice(V, p=protos[k, d]) for d in range(D)] for k in z], dtype=float)
    x[rng.random(x.shape) < hole] = np.nan
    return x


def test_v2_is_the_bernoulli_mixture_step_by_step_on_complete_data():
    rng = np.random.default_rng(0)
    x = categorical_data(rng, n=150, D=6, V=2, hole=0.0)
    a = 1.5
    w0 = rng.dirichlet(np.ones(3))
    mu0 = rng.uniform(0.1, 0.9, size=(3, 6))
    cfg = cm.CategoricalConfig(n_components=3, alpha=1.0, phi=1.0 + a)
    st = cm.init_from_parameters(prepare(x, n_values=2), cfg, w0, np.stack([1 - mu0, mu0], axis=2))
    bcfg = bm.BernoulliConfig(n_components=3, pseudo_count=a)
    bdata = bm.prepare(x)
    bst = bm.init_from_parameters(bdata, bcfg, w0, mu0)
    data = prepare(x, n_values=2)
    for _ in range(15):
        st, bst = cm.step(st, data, cfg), bm.step(bst, bdata, bcfg)
        np.testing.assert_allclose(st.weights, bst.weights, rtol=1e-10)
        np.testing.assert_allclose(st.probs[:, :, 1], bst.probs, rtol=1e-10)
        np.testing.assert_allclose(st.resp, bst.resp, atol=1e-10)
        np.testing.assert_allclose(st.objective, bst.objective, rtol=1e-12)


def test_v2_with_holes_has_the_bernoulli_fixed_points_and_likelihood():
    rng = np.random.default_rng(1)
    x = categorical_data(rng, n=200, D=6, V=2, hole=0.35)
    x[np.isnan(x).all(axis=1), 0] = 1.0  # bernoulli_mixture leaves rows with nothing observed out of the fit
    a = 1.0
    cfg = cm.CategoricalConfig(n_components=2, alpha=1.0, phi=1.0 + a, tol=1e-15, max_iter=5000)
    data = prepare(x, n_values=2)
    st = cm.fit(data, cfg, rng).state
    bcfg = bm.BernoulliConfig(n_components=2, pseudo_count=a)
    bdata = bm.prepare(x)
    bst = bm.init_from_parameters(bdata, bcfg, st.weights, st.probs[:, :, 1])
    np.testing.assert_allclose(bst.objective, st.objective, rtol=1e-12)
    np.testing.assert_allclose(bm.log_likelihood_rows(bst, x), cm.log_likelihood_rows(st, data), rtol=1e-12)
    nxt = bm.step(bst, bdata, bcfg)  # the other EM (missing values as latent) does not move from our fixed point
    np.testing.assert_allclose(nxt.weights, st.weights, atol=1e-7)
    np.testing.assert_allclose(nxt.probs, st.probs[:, :, 1], atol=1e-7)


def _expected_complete_log_posterior(resp, onehot, alpha, phi, weights, probs):
    return (np.sum(resp * np.log(weights)) + np.einsum("nk,ndv,kdv->", resp, onehot, np.log(probs))
            + (alpha - 1) * np.log(weights).sum() + (phi - 1) * np.log(probs).sum())


@pytest.mark.parametrize("alpha, phi", [(2.0, 2.0), (1.3, 3.5)])
def test_m_step_maximises_the_expected_complete_log_posterior(alpha, phi):
    rng = np.random.default_rng(2)
    x = categorical_data(rng, n=7, D=2, V=3, K=2, hole=0.3)
    data = prepare(x, n_values=3)
    K, D, V = 2, 2, 3
    resp = rng.dirichlet(np.ones(K), size=7)
    weights, probs = cm._m_step(resp, data, cm.CategoricalConfig(n_components=K, alpha=alpha, phi=phi))

    def unpack(u):
        return np.exp(log_softmax(u[:K])), np.exp(log_softmax(u[K:].reshape(K, D, V), axis=2))

    def neg(u):
        return -_expected_complete_log_posterior(resp, data.onehot, alpha, phi, *unpack(u))

    best = minimize(neg, rng.normal(size=K + K * D * V), method="BFGS", options={"gtol": 1e-10})
    w_num, p_num = unpack(best.x)
    np.testing.assert_allclose(weights, w_num, atol=1e-5)
    np.testing.assert_allclose(probs, p_num, atol=1e-5)
    assert -best.fun <= _expected_complete_log_posterior(resp, data.onehot, alpha, phi, weights, probs) + 1e-9


def test_one_component_is_the_map_frequency():
    rng = np.random.default_rng(3)
    x = categorical_data(rng, n=90, D=4, V=4, hole=0.4)
    data = prepare(x, n_values=4)
    phi = 2.5
    st = cm.init(data, cm.CategoricalConfig(n_components=1, phi=phi), rng)
    counts = np.stack([(x == v).sum(axis=0) for v in range(4)], axis=1)  # (D, V)
    expected = (phi - 1 + counts) / (counts.sum(axis=1, keepdims=True) + 4 * (phi - 1))
    np.testing.assert_allclose(st.probs[0], expected, rtol=1e-12)
    np.testing.assert_allclose(st.weights, [1.0])


def test_objective_and_prediction_are_the_thesis_products():
    rng = np.random.default_rng(4)
    x = categorical_data(rng, n=12, D=3, V=3, hole=0.4)
    x[0] = np.nan  # a row with nothing available
    data = prepare(x, n_values=3)
    cfg = cm.CategoricalConfig(n_components=2, alpha=1.7, phi=2.2)
    st = cm.fit(data, cfg, rng, ).state
    w, b = st.weights, st.probs
    ll = 0.0
    for row in x:
        ll += np.log(sum(w[k] * np.prod([b[k, d, int(row[d])] for d in range(3) if not np.isnan(row[d])])
                         for k in range(2)))
    lp = 0.7 * np.log(w).sum() + 1.2 * np.log(b).sum()
    np.testing.assert_allclose(st.objective, ll + lp, rtol=1e-12)
    # predictive of every entry: the joint over (z, x_d) given the available entries, by explicit sums
    pred = cm.predict_proba(st, data)
    for n, d in itertools.product(range(12), range(3)):
        row = x[n]
        lik = np.array([w[k] * np.prod([b[k, e, int(row[e])] for e in range(3) if not np.isnan(row[e])])
                        for k in range(2)])
        expected = lik @ b[:, d, :] / lik.sum()
        np.testing.assert_allclose(pred[n, d], expected, atol=1e-12)
    np.testing.assert_allclose(pred[0], np.einsum("k,kdv->dv", w, b), atol=1e-12)


@pytest.mark.parametrize("alpha, phi, how", [(2.0, 2.0, "random_resp"), (1.0, 1.0, "random_probs"),
                                             (1.5, 3.0, "random_probs"), (1.0, 2.0, "random_resp")])
def test_objective_never_decreases_and_everything_sums_to_one(alpha, phi, how):
    rng = np.random.default_rng(5)
    x = categorical_data(rng, n=150, D=6, V=4, K=3, hole=0.5)
    data = prepare(x, n_values=4)
    cfg = cm.CategoricalConfig(n_components=4, alpha=alpha, phi=phi, init=how, max_iter=60, tol=0.0)
    with pytest.warns(cm.ConvergenceWarning):
        res = cm.fit(data, cfg, rng)
    obj = np.array([s["objective"] for s in res.trace])
    assert np.all(np.diff(obj) >= -1e-9 * np.abs(obj[1:]))
    assert obj[-1] > obj[0]
    st = res.state
    np.testing.assert_allclose(st.weights.sum(), 1.0, atol=1e-12)
    np.testing.assert_allclose(st.probs.sum(axis=2), 1.0, atol=1e-12)
    np.testing.assert_allclose(st.resp.sum(axis=1), 1.0, atol=1e-12)
    new = prepare(categorical_data(rng, n=30, D=6, V=4, hole=0.6), n_values=4)
    pred = cm.predict_proba(st, new)
    assert pred.shape == (30, 6, 4)
    np.testing.assert_allclose(pred.sum(axis=2), 1.0, atol=1e-12)
    assert np.all(np.isfinite(cm.log_likelihood_rows(st, new)))


def test_fit_stops_on_the_relative_change_and_state_is_immutable():
    rng = np.random.default_rng(6)
    data = prepare(categorical_data(rng, n=100, D=5, V=3), n_values=3)
    cfg = cm.CategoricalConfig(n_components=2, tol=1e-6, max_iter=500)
    res = cm.fit(data, cfg, rng)
    assert res.converged and res.stop_reason == "tol"
    obj = [s["objective"] for s in res.trace]
    assert abs(obj[-1] - obj[-2]) / abs(obj[-2]) < 1e-6 <= abs(obj[-2] - obj[-3]) / abs(obj[-3])
    st = res.state
    before = st.probs.copy()
    nxt = cm.step(st, data, cfg)
    assert nxt.iteration == st.iteration + 1 and nxt.probs is not st.probs
    np.testing.assert_array_equal(st.probs, before)
    with pytest.raises(ValueError):
        st.probs[0, 0, 0] = 0.5


def test_bad_input_is_refused_with_a_remedy():
    rng = np.random.default_rng(7)
    data = prepare(categorical_data(rng, n=10, D=3, V=3), n_values=3)
    with pytest.raises(BadInputError, match="alpha must be a finite number >= 1"):
        cm.CategoricalConfig(alpha=0.5)
    with pytest.raises(BadInputError, match="phi must be a finite number >= 1"):
        cm.CategoricalConfig(phi=0.99)
    with pytest.raises(BadInputError, match="init must be one of"):
        cm.CategoricalConfig(init="kmeans")
    with pytest.raises(BadInputError, match="more than the 10 rows"):
        cm.init(data, cm.CategoricalConfig(n_components=11), rng)
    with pytest.raises(BadInputError, match="RatingData"):
        cm.init(np.zeros((10, 3)), cm.CategoricalConfig(), rng)
    st = cm.fit(data, cm.CategoricalConfig(n_components=2, max_iter=5, tol=1e-3), rng).state
    with pytest.raises(BadInputError, match="n_values=4, but the model has V=3"):
        cm.predict_proba(st, prepare(categorical_data(rng, n=5, D=3, V=3), n_values=4))
    with pytest.raises(BadInputError, match="4 feature"):
        cm.predict_proba(st, prepare(categorical_data(rng, n=5, D=4, V=3), n_values=3))
    with pytest.raises(BadInputError, match="expected"):
        cm.init_from_parameters(data, cm.CategoricalConfig(n_components=2), [0.5, 0.5], np.full((2, 3, 2), 0.5))
