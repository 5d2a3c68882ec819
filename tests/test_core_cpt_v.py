"""Tests of explorer.core.discrete.cpt_v (Marlin 2008 Section 5.4, digest 4.1 and 2.7).

Oracles: the observed-data likelihood and the predictive of the E-step against the explicit sum over all
missing values on a tiny case (every (r, a) case present); the moment estimator returns mu exactly from exact
marginals and solves Glonek's 2 x 2 system exactly; CPT-v+ from exactly constructed counts is Bayes' rule.
Statistical: EM recovers mu within 3 standard errors (observed information, Fisher-identity gradient); the
moment estimator on a sample within 3 bootstrap standard errors; mu_from_random_items on a sample.
Properties: the log posterior never decreases; predictions sum to one and depend on r; CPT-v+ keeps mu.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from explorer.core.discrete import cpt_v as C
from explorer.core.discrete.ratings_data import prepare
from explorer.core.validation import BadInputError

MU = np.array([0.1, 0.3, 0.5, 0.7, 0.9])


def world(rng, N=4000, D=10, V=5, K=3, mu=MU):
    """Mixture data (theta, beta random), the CPT-v selection r ~ Bernoulli(mu_x)."""
    theta = rng.dirichlet(np.full(K, 5.0))
    beta = rng.dirichlet(np.ones(V), size=(K, D))
    z = rng.choice(K, size=N, p=theta)
    x = (rng.random((N, D, 1)) > np.cumsum(beta[z], axis=2)).sum(axis=2)
    r = rng.random((N, D)) < np.asarray(mu)[x]
    return x, r, theta, beta


def four_case_data(rng, N=300, D=6, V=4, K=2):
    """Every (r, a) case: r=1,a=1 observed; r=1,a=0 held out; r=0,a=1 random items; r=0,a=0 missing."""
    x, r, _, _ = world(rng, N=N, D=D, V=V, K=K, mu=np.linspace(0.2, 0.8, V))
    a = r & (rng.random((N, D)) < 0.8)
    a |= ~r & (rng.random((N, D)) < 0.15)
    return prepare(np.where(a, x, -1), response=r, available=a, n_values=V)


# --------------------------------------------------------------------------- oracles
def brute_force(weights, probs, mu, codes, r, a):
    """Row likelihood and predictive P(x_d = v | x^o, r) by enumerating z and every unavailable value."""
    K, D, V = probs.shape
    miss = [d for d in range(D) if not a[d]]
    total = 0.0
    post = np.zeros((D, V))
    for k in range(K):
        for vals in itertools.product(range(V), repeat=len(miss)):
            x = np.array(codes)
            x[miss] = vals
            p = weights[k]
            for d in range(D):
                p *= probs[k, d, x[d]] * (mu[x[d]] if r[d] else 1.0 - mu[x[d]])
            total += p
            post[np.arange(D), x] += p
    return total, post / total


def test_e_step_likelihood_and_predictive_equal_the_sum_over_all_missing_values():
    rng = np.random.default_rng(0)
    K, D, V = 2, 2, 2
    weights = np.array([0.3, 0.7])
    probs = rng.dirichlet(np.ones(V), size=(K, D))
    mu = np.array([0.25, 0.8])
    # the four (r, a) cases, each in both positions, and a row with nothing available
    codes = np.array([[0, 1], [1, -1], [-1, 0], [-1, -1], [1, 0]])
    r = np.array([[1, 1], [1, 1], [0, 0], [1, 0], [0, 1]], dtype=bool)
    a = codes >= 0
    data = prepare(codes, response=r, available=a, n_values=V)
    cfg = C.CPTvConfig(n_components=K)
    state = C.init_from_parameters(data, cfg, weights, probs, mu)
    rows = C.log_likelihood_rows(state, data)
    proba = C.predict_proba(state, data)
    for n in range(codes.shape[0]):
        lik, post = brute_force(weights, probs, mu, codes[n], r[n], a[n])
        assert rows[n] == pytest.approx(np.log(lik), rel=1e-12)
        np.testing.assert_allclose(proba[n], post, atol=1e-12)
    assert state.log_likelihood == pytest.approx(rows.sum(), rel=1e-12)


def test_moment_estimator_is_exact_on_exact_marginals_and_its_condition_number_is_numpys():
    rng = np.random.default_rng(1)
    K, D, V = 3, 10, 5
    theta = rng.dirichlet(np.ones(K))
    beta = rng.dirichlet(np.ones(V), size=(K, D))
    phi = MU[None, :] * np.einsum("k,kdv->dv", theta, beta)   # P(w_d = v) = mu_v P(x_d = v)
    est = C.moment_estimate_from_phi(phi)
    np.testing.assert_allclose(est.mu, MU, rtol=1e-10)
    assert est.valid and est.residual < 1e-12
    assert est.condition_number == pytest.approx(np.linalg.cond(phi), rel=1e-12)
    best = min(np.linalg.cond(phi[list(s)]) for s in itertools.combinations(range(D), V))
    assert est.block_condition_number == pytest.approx(best, rel=1e-12)
    assert np.linalg.cond(phi[list(est.block_items)]) == pytest.approx(best, rel=1e-12)


def test_block_search_falls_back_to_pivoted_qr_and_can_be_skipped():
    rng = np.random.default_rng(11)
    D, V = 16, 5                                       # C(16, 5) = 4368 subsets: more than the exhaustive cap
    phi = MU[None, :] * rng.dirichlet(np.ones(V), size=D)
    est = C.moment_estimate_from_phi(phi)
    assert est.block_search == "pivoted-qr" and len(est.block_items) == V
    assert est.block_condition_number < np.inf
    assert est.block_condition_number == pytest.approx(np.linalg.cond(phi[list(est.block_items)]))
    quick = C.moment_estimate_from_phi(phi, best_block=False)
    assert quick.block_search == "skipped" and np.isnan(quick.block_condition_number)
    np.testing.assert_allclose(quick.mu, est.mu, rtol=1e-12)


def test_glonek_binary_case_is_solved_exactly():
    # phi_{0x} = mu_0 (1 - pi_x), phi_{1x} = mu_1 pi_x at two covariate settings (eq. 5.4.10)
    mu0, mu1, pi = 0.35, 0.85, np.array([0.2, 0.7])
    phi = np.column_stack([mu0 * (1 - pi), mu1 * pi])
    est = C.moment_estimate_from_phi(phi)
    np.testing.assert_allclose(est.mu, [mu0, mu1], rtol=1e-12)
    np.testing.assert_allclose(est.inverse_mu, np.linalg.solve(phi, np.ones(2)), rtol=1e-12)
    # pi_{x1} = pi_{x2}: the system is singular, mu is not identified
    singular = np.column_stack([mu0 * (1 - pi[[0, 0]]), mu1 * pi[[0, 0]]])
    assert C.moment_estimate_from_phi(singular).condition_number > 1e12


def test_mu_from_random_items_is_bayes_rule_on_exact_counts():
    # 4 users x 5 items, V = 2: selected ratings have values (0, 1, 1, 1) -> P(x=1 | r=1) = 3/4; random
    # non-selected ratings (0, 0, 1) -> P(x=1 | r=0) = 1/3; P(r=1) = 8/20 (held-out selected entries count too)
    codes = np.full((4, 5), -1)
    r = np.zeros((4, 5), dtype=bool)
    a = np.zeros((4, 5), dtype=bool)
    for n, d, v in [(0, 0, 0), (1, 0, 1), (2, 1, 1), (3, 2, 1)]:
        codes[n, d], r[n, d], a[n, d] = v, True, True
    for n, d in [(0, 1), (1, 2), (2, 3), (3, 4)]:
        r[n, d] = True                      # held-out user-selected entries (r=1, a=0)
    for n, d, v in [(0, 4, 0), (1, 4, 0), (2, 4, 1)]:
        codes[n, d], a[n, d] = v, True      # random items not selected (r=0, a=1)
    data = prepare(codes, response=r, available=a, n_values=2)
    p1, p_sel = np.array([1 / 4, 3 / 4]), 8 / 20
    p0 = np.array([2 / 3, 1 / 3])
    expected = p1 * p_sel / (p1 * p_sel + p0 * (1 - p_sel))
    np.testing.assert_allclose(C.mu_from_random_items(data, rows=np.arange(4)), expected, rtol=1e-12)


def test_mu_from_random_items_floor_makes_a_never_selected_level_usable():
    # level 0 is never selected (only seen among the random items): its estimate is 0, refused by CPTvConfig
    codes = np.array([[1, 0, -1], [1, 0, -1], [0, 1, 1]])
    r = np.array([[True, False, False], [True, False, False], [False, True, True]])
    a = codes >= 0
    data = prepare(codes, response=r, available=a, n_values=2)
    mu = C.mu_from_random_items(data, rows=np.arange(3))
    assert mu[0] == 0.0 and 0 < mu[1] <= 1
    with pytest.raises(BadInputError):
        C.CPTvConfig(n_components=1, mu_fixed=tuple(mu))
    floored = C.mu_from_random_items(data, rows=np.arange(3), floor=1e-3)
    np.testing.assert_array_equal(floored, np.maximum(mu, 1e-3))
    C.CPTvConfig(n_components=1, mu_fixed=tuple(floored))       # accepted
    for bad in (-0.1, 1.0, float("nan")):
        with pytest.raises(BadInputError):
            C.mu_from_random_items(data, rows=np.arange(3), floor=bad)


# --------------------------------------------------------------------------- statistical
def test_em_recovers_mu_within_three_standard_errors():
    rng = np.random.default_rng(2)
    x, r, theta, beta = world(rng)
    data = prepare(x, response=r, available=r, n_values=5)
    cfg = C.CPTvConfig(n_components=3, max_iter=1000, tol=1e-7)
    # started at the truth so the test is fast; the estimator is the MAP EM converges to
    with threadpool_limits(limits=1):   # small products: one BLAS thread is faster on a busy machine
        res = C.fit(data, cfg, rng, init_state=C.init_from_parameters(data, cfg, theta, beta, MU))
        se = C.mu_standard_errors(res.state, data, cfg)
    assert res.converged
    assert np.all(se > 0.002) and np.all(se < 0.06)
    assert np.all(np.abs(res.state.mu - MU) < 3 * se), (res.state.mu, se)


def test_moment_estimator_on_a_sample_is_within_three_bootstrap_standard_errors():
    rng = np.random.default_rng(3)
    x, r, _, _ = world(rng, N=20000)
    data = prepare(x, response=r, available=r, n_values=5)
    mu, cond = C.moment_estimate(data)
    np.testing.assert_array_equal(mu, C.moment_estimate_details(data).mu)
    assert cond == pytest.approx(np.linalg.cond(C.observed_marginals(data)), rel=1e-12)
    se = C.moment_bootstrap_se(data, rng, n_boot=100)
    assert np.all(np.abs(mu - MU) < 3 * se), (mu, se)
    assert np.all(se < 0.1)


def test_mu_from_random_items_recovers_mu():
    rng = np.random.default_rng(4)
    N, D = 20000, 10
    x, r, _, _ = world(rng, N=N, D=D)
    a = r.copy()
    random_items = rng.random((N, D)) < 0.3          # survey items, chosen regardless of selection
    a |= random_items                                 # their values become known; r is kept
    data = prepare(np.where(a, x, -1), response=r, available=a, n_values=5)
    mu = C.mu_from_random_items(data)
    # binomial counts in the thousands: the error is a few hundredths at most
    np.testing.assert_allclose(mu, MU, atol=0.03)


# --------------------------------------------------------------------------- properties
@pytest.mark.parametrize("mu_fixed", [None, (0.2, 0.4, 0.6, 0.8)])
def test_log_posterior_never_decreases_with_all_four_cases(mu_fixed):
    rng = np.random.default_rng(5)
    data = four_case_data(rng)
    cfg = C.CPTvConfig(n_components=3, max_iter=60, tol=0.0, mu_fixed=mu_fixed)
    with pytest.warns(C.ConvergenceWarning):
        res = C.fit(data, cfg, rng)
    obj = np.array([s["objective"] for s in res.trace])
    assert np.all(np.diff(obj) >= -1e-9 * np.abs(obj[1:])), np.diff(obj).min()
    assert obj[-1] > obj[0]
    if mu_fixed is not None:
        assert all(np.array_equal(s["mu"], mu_fixed) for s in res.trace)
    else:
        assert not np.allclose(res.trace[-1]["mu"], res.trace[0]["mu"])


def test_predictions_sum_to_one_and_depend_on_r():
    rng = np.random.default_rng(6)
    data = four_case_data(rng)
    cfg = C.CPTvConfig(n_components=2)
    state = C.init_from_parameters(data, cfg, [0.4, 0.6], rng.dirichlet(np.ones(4), size=(2, data.n_features)),
                                   [0.2, 0.4, 0.6, 0.8])
    proba = C.predict_proba(state, data)
    np.testing.assert_allclose(proba.sum(axis=2), 1.0, atol=1e-12)
    avail = data.available
    np.testing.assert_array_equal(proba[avail], data.onehot[avail])
    # flip r of one unavailable entry: its prediction moves toward high mu (r=1) or low mu (r=0)
    n, d = np.argwhere(~avail & ~data.response)[0]
    r2 = np.array(data.response)
    r2[n, d] = True
    data2 = prepare(np.where(avail, data.codes, -1), response=r2, available=avail, n_values=data.n_values)
    proba2 = C.predict_proba(state, data2)
    assert not np.allclose(proba[n, d], proba2[n, d])
    assert C.predict_mean(proba2[n, d]) > C.predict_mean(proba[n, d])   # mu increases with v here


def test_median_and_mean_of_predictive_distributions():
    p = np.array([[0.1, 0.3, 0.2, 0.4], [0.6, 0.0, 0.0, 0.4], [0.0, 0.0, 0.5, 0.5]])
    np.testing.assert_array_equal(C.predict_median(p), [2, 0, 2])
    np.testing.assert_allclose(C.predict_mean(p), [1.9, 1.2, 2.5])


# --------------------------------------------------------------------------- bad input
def test_bad_inputs_raise_readable_errors():
    rng = np.random.default_rng(7)
    data = four_case_data(rng, N=40)
    with pytest.raises(BadInputError, match="n_components"):
        C.CPTvConfig(n_components=0)
    with pytest.raises(BadInputError, match="alpha must be >= 1"):
        C.CPTvConfig(alpha=0.5)
    with pytest.raises(BadInputError, match="mu_fixed"):
        C.CPTvConfig(mu_fixed=(0.0, 0.5))
    with pytest.raises(BadInputError, match="mu_fixed has 2 values"):
        C.fit(data, C.CPTvConfig(mu_fixed=(0.3, 0.5)), rng)
    with pytest.raises(BadInputError, match="RatingData"):
        C.fit(np.zeros((3, 3)), C.CPTvConfig(), rng)
    with pytest.raises(BadInputError, match="Generator"):
        C.init(data, C.CPTvConfig(), 0)
    state = C.init(data, C.CPTvConfig(n_components=2), rng)
    other = prepare(np.zeros((3, 2)), n_values=4)
    with pytest.raises(BadInputError, match="D=2 items"):
        C.predict_proba(state, other)
    with pytest.raises(BadInputError, match="at least V=4 items"):
        C.moment_estimate(other)
    with pytest.raises(BadInputError, match="phi must"):
        C.moment_estimate_from_phi(np.full((5, 2), 0.8))
    no_random = prepare(np.zeros((3, 4)), n_values=2)
    with pytest.raises(BadInputError, match="random items"):
        C.mu_from_random_items(no_random)
    with pytest.raises(BadInputError, match="probabilities"):
        C.predict_median(np.array([[0.5, np.nan]]))
    with pytest.raises(BadInputError, match="fixed"):
        C.mu_standard_errors(state, data, C.CPTvConfig(n_components=2, mu_fixed=(0.5,) * 4))
