"""Bayesian data augmentation for the Gaussian mixture (issue 21, point 3: draws that carry parameter uncertainty)."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.core.gaussians.conditional import ConditionalMixture
from explorer.core.mixtures import data_augmentation as da
from explorer.core.mixtures import em_gmm
from explorer.core.validation import BadInputError


def _data(n=120, D=3, rate=0.2, seed=0):
    rng = np.random.default_rng(seed)
    A = np.array([[1.0, 0.5, 0.2], [0.0, 1.0, 0.3], [0.0, 0.0, 1.0]])[:D, :D]
    X = rng.normal(size=(n, D)) @ A + np.arange(D)
    Xn = np.where(rng.random(X.shape) < rate, np.nan, X)
    return X, Xn


def _fit(Xn, K=1, covariance_type="full"):
    data = em_gmm.prepare(Xn)
    config = em_gmm.EMConfig(n_components=K, prior="auto", covariance_type=covariance_type)
    result = em_gmm.fit(data, config, np.random.default_rng(0))
    return data, result.state, em_gmm.resolved_prior(data, config)


def test_oracle_posterior_parameters_match_the_raw_moment_form():
    """Murphy (2007) eq. 254 in its other algebra: Lambda_n = Lambda_0 + sum x x^T + kappa_0 m_0 m_0^T - kappa_n m_n m_n^T."""
    X, _ = _data(rate=0.0)
    _, _, prior = _fit(X)
    counts, m_n, kappa_n, nu_n, scale_n = da.posterior_parameters(X, np.zeros(len(X), int), 1, prior)
    n = len(X)
    kn = prior.kappa + n
    mn = (prior.kappa * prior.mean + X.sum(axis=0)) / kn
    Ln = prior.scale + X.T @ X + prior.kappa * np.outer(prior.mean, prior.mean) - kn * np.outer(mn, mn)
    assert counts[0] == n and kappa_n[0] == kn and nu_n[0] == prior.dof + n
    np.testing.assert_allclose(m_n[0], mn, rtol=1e-12)
    np.testing.assert_allclose(scale_n[0], Ln, rtol=1e-9)


@pytest.mark.parametrize("covariance_type", ["full", "diag"])
def test_oracle_p_step_draws_have_the_conjugate_posterior_moments(covariance_type):
    """Complete data, K = 1: the P-step is exact, so its draws average to the closed-form posterior means
    E[Sigma] = Lambda_n / (nu_n - D - 1) (diag: scale / (nu_n - 2)) and E[mu] = m_n."""
    X, _ = _data(n=40, rate=0.0, seed=1)
    _, fitted, prior = _fit(X, covariance_type=covariance_type)
    config = da.DAConfig(covariance_type=covariance_type)
    rng = np.random.default_rng(2)
    state = da.init(X, fitted.weights, fitted.means, fitted.covariances, config, rng)
    draws = [da.step(state, X, prior, config, rng) for _ in range(3000)]
    _, m_n, kappa_n, nu_n, scale_n = da.posterior_parameters(X, np.zeros(len(X), int), 1, prior, covariance_type)
    D = X.shape[1]
    covs = np.array([d.covariances[0] for d in draws])
    means = np.array([d.means[0] for d in draws])
    expected_cov = scale_n[0] / (nu_n[0] - D - 1) if covariance_type == "full" else scale_n[0] / (nu_n[0] - 2)
    se = covs.std(axis=0) / np.sqrt(len(draws))
    assert np.all(np.abs(covs.mean(axis=0) - expected_cov) < 5 * se + 1e-12)
    assert np.all(np.abs(means.mean(axis=0) - m_n[0]) < 5 * means.std(axis=0) / np.sqrt(len(draws)))
    # and the spread of mu is the posterior's: Var[mu] = E[Sigma] / kappa_n
    var_mu = means.var(axis=0)
    diag = np.diag(expected_cov) if covariance_type == "full" else expected_cov
    np.testing.assert_allclose(var_mu, diag / kappa_n[0], rtol=0.15)
    assert all(np.isclose(d.weights.sum(), 1.0) for d in draws[:5])


@pytest.mark.parametrize("rate", [0.2, 0.6])  # precision side (conditional mixture) / covariance side (mostly missing)
def test_oracle_i_step_draws_follow_the_conditional_mixture(rate):
    """At fixed parameters the imputed entries average to E[x^m | x^o] and labels follow the responsibilities."""
    _, Xn = _data(n=30, seed=3, rate=rate)
    Xn = Xn[~np.isnan(Xn).all(axis=1)]
    m = np.isnan(Xn).sum(axis=1)
    assert (np.sum((3 - m) ** 3) < np.sum(m ** 3)) == (rate > 0.5)  # the path the rate is meant to take
    data, fitted, _ = _fit(Xn, K=2)
    cm = ConditionalMixture.from_gaussian_mixture(Xn, fitted.weights, fitted.means, fitted.covariances)
    rng = np.random.default_rng(4)
    config = da.DAConfig()
    states = [da.init(Xn, fitted.weights, fitted.means, fitted.covariances, config, rng) for _ in range(3000)]
    Xs = np.array([s.X for s in states])
    miss = np.isnan(Xn)
    mean, sd = Xs.mean(axis=0), Xs.std(axis=0)
    assert np.all(np.abs(mean - cm.mean())[miss] < 5 * sd[miss] / np.sqrt(len(states)) + 1e-12)
    # and their spread is the conditional mixture's (the covariance-side draw with Matheron's correction):
    # without the correction the variance would be the marginal one, with a wrong sign or factor far off
    np.testing.assert_allclose(Xs.var(axis=0)[miss], np.asarray(cm.variance())[miss], rtol=0.15)
    assert np.array_equal(Xs[:, ~miss], np.broadcast_to(Xn[~miss], Xs[:, ~miss].shape))  # observed kept exactly
    freq = np.mean([s.labels == 1 for s in states], axis=0)
    resp = np.asarray(cm.weights)[:, 1]
    assert np.all(np.abs(freq - resp) < 5 * np.sqrt(resp * (1 - resp) / len(states)) + 1e-3)


@pytest.mark.parametrize("covariance_type", ["full", "diag"])
def test_oracle_i_step_with_empty_rows_and_a_zero_weight(covariance_type):
    """Rows with nothing observed are drawn from the marginal mixture; a component of weight 0 is never drawn."""
    rng = np.random.default_rng(11)
    means = np.array([[0.0, 0.0, 0.0], [5.0, 5.0, 5.0], [-9.0, 9.0, 0.0]])
    A = np.array([[1.0, 0.5, 0.2], [0.0, 1.0, 0.3], [0.0, 0.0, 0.8]])
    covs = np.stack([A @ A.T, 0.5 * np.eye(3), np.eye(3)])
    if covariance_type == "diag":
        covs = np.stack([np.diag(c) for c in covs])
    weights = np.array([0.3, 0.7, 0.0])
    Xn = np.full((4000, 3), np.nan)
    Xn[:, 0] = np.where(np.arange(4000) < 2000, np.nan, 5.0)  # half the rows empty, half with x0 = 5 observed
    labels, X = da._impute(Xn, weights, means, covs, covariance_type, rng)
    assert not np.any(labels == 2)
    empty = np.arange(4000) < 2000
    assert abs(np.mean(labels[empty] == 1) - 0.7) < 5 * np.sqrt(0.21 / 2000)
    marginal_mean = weights @ means
    assert np.all(np.abs(X[empty].mean(axis=0) - marginal_mean) < 5 * X[empty].std(axis=0) / np.sqrt(2000))
    assert np.all(X[~empty, 0] == 5.0) and np.isfinite(X).all()


def test_property_chain_keeps_observed_entries_and_valid_parameters():
    _, Xn = _data(n=80, seed=5)
    Xn[7] = np.nan  # a row with nothing observed: drawn, left out of the P-step
    data, fitted, prior = _fit(Xn, K=2)
    config = da.DAConfig(n_burn=3, n_thin=2)
    rng = np.random.default_rng(6)
    start = da.init(Xn, fitted.weights, fitted.means, fitted.covariances, config, rng)
    kept = da.run(start, Xn, prior, config, 6, rng, fit_rows=data.fit_rows)
    assert [s.iteration for s in kept] == [5, 7, 9, 11, 13, 15]
    obs = ~np.isnan(Xn)
    for s in kept:
        assert np.array_equal(s.X[obs], Xn[obs]) and np.isfinite(s.X).all()
        assert np.isclose(s.weights.sum(), 1.0) and np.all(s.weights > 0)
        assert np.all(np.linalg.eigvalsh(s.covariances) > 0)
        assert not s.X.flags.writeable
    assert not np.array_equal(kept[0].X, kept[1].X)  # the gaps are drawn again at every state
    same = da.run(start, Xn, prior, config, 2, np.random.default_rng(9), fit_rows=data.fit_rows)
    same2 = da.run(start, Xn, prior, config, 2, np.random.default_rng(9), fit_rows=data.fit_rows)
    assert np.array_equal(same[-1].X, same2[-1].X) and np.array_equal(same[-1].means, same2[-1].means)


def test_draws_carry_parameter_uncertainty_on_small_data():
    """On 25 rows the chain's means vary from state to state (the plug-in draws would hold them fixed)."""
    _, Xn = _data(n=25, seed=7)
    data, fitted, prior = _fit(Xn)
    config = da.DAConfig()
    rng = np.random.default_rng(8)
    kept = da.run(da.init(Xn, fitted.weights, fitted.means, fitted.covariances, config, rng), Xn, prior, config,
                  40, rng, fit_rows=data.fit_rows)
    sd_mu = np.array([s.means[0] for s in kept]).std(axis=0)
    approx = np.sqrt(np.diag(fitted.covariances[0]) / 25)  # the sampling sd of a mean of 25 rows
    assert np.all(sd_mu > 0.4 * approx) and np.all(sd_mu < 2.5 * approx)


def test_bad_input():
    _, Xn = _data(n=20)
    data, fitted, _ = _fit(Xn)
    state = da.init(Xn, fitted.weights, fitted.means, fitted.covariances, da.DAConfig(), np.random.default_rng(0))
    with pytest.raises(BadInputError, match="needs the fit's resolved conjugate prior"):
        da.run(state, Xn, None, da.DAConfig(), 2, np.random.default_rng(0))
    with pytest.raises(BadInputError, match="n_thin"):
        da.DAConfig(n_thin=0)
    with pytest.raises(BadInputError, match="alpha"):
        da.DAConfig(alpha=0.0)
    with pytest.raises(BadInputError, match="n_draws"):
        da.run(state, Xn, em_gmm.resolved_prior(data, em_gmm.EMConfig(prior="auto")), da.DAConfig(), 0,
               np.random.default_rng(0))


@pytest.mark.parametrize("layout", ["repeated", "one_per_row", "mixed"])
@pytest.mark.parametrize("transpose", [False, True])
def test_per_row_products_match_a_loop_over_rows(layout, transpose):
    """The I-step's per-row products with the patterns' factors, on the three layouts it treats apart (patterns
    shared by many rows, one row per pattern, a few rows per pattern), against the product row by row."""
    from explorer.core.gaussians.patterns import group_patterns

    rng = np.random.default_rng(3)
    n, D = 60, 8
    if layout == "repeated":
        miss = np.zeros((n, D), dtype=bool)
        miss[:, :5] = True
        miss[::2, 5] = True
    elif layout == "one_per_row":
        miss = np.zeros((n, D), dtype=bool)
        for i in range(n):
            miss[i, rng.choice(D, size=5, replace=False)] = True
        miss = miss[np.unique(miss, axis=0, return_index=True)[1]]
        rng.shuffle(miss)
    else:
        base = np.zeros((20, D), dtype=bool)
        for i in range(20):
            base[i, rng.choice(D, size=5, replace=False)] = True
        miss = base[rng.integers(0, 20, size=n)]
    checked = 0
    for g in group_patterns(miss).groups:
        o = D - g.unique_mis.shape[1]
        mats = rng.normal(size=(g.n_unique, o, o))
        vecs = rng.normal(size=(g.rows.size, o))
        got = da._per_row(mats, g, vecs, transpose=transpose)
        want = np.array([(mats[u].T if transpose else mats[u]) @ v for u, v in zip(g.inverse, vecs)])
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
        checked += 1
    assert checked >= 1


@pytest.mark.parametrize("layout", ["repeated", "one_per_row"])
def test_i_step_solves_by_pattern_equal_the_inverse_factors(layout, monkeypatch):
    """The covariance-side I-step's two ways of applying Sigma_oo^-1 (dpotrs per pattern from SOLVE_MIN_OBSERVED
    observed entries up, batched triangular inverses below) give the same labels and draws from the same stream."""
    rng = np.random.default_rng(11)
    n, D, K = 80, 24, 2
    A = rng.normal(size=(K, D, D))
    covs = A @ np.swapaxes(A, 1, 2) / D + np.eye(D)
    means = rng.normal(size=(K, D))
    X = rng.normal(size=(n, D))
    if layout == "repeated":
        miss = np.zeros((n, D), dtype=bool)
        miss[:, :14] = True
        miss[::3, 14] = True
    else:
        miss = rng.random((n, D)) < 0.6
        miss[miss.all(axis=1), 0] = False
    Xn = np.where(miss, np.nan, X)
    draws = {}
    for name, threshold in (("dpotrs", 1), ("inverse", 10**6)):
        monkeypatch.setattr(da, "SOLVE_MIN_OBSERVED", threshold)
        draws[name] = da._impute_full(Xn, [0.4, 0.6], means, covs, np.random.default_rng(5))
    assert np.array_equal(draws["dpotrs"][0], draws["inverse"][0])
    np.testing.assert_allclose(draws["dpotrs"][1], draws["inverse"][1], rtol=1e-10, atol=1e-10)
    assert np.array_equal(draws["dpotrs"][1][~miss], X[~miss])
