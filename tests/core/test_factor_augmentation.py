"""Data augmentation of factor analysers / mixtures of factor analysers (explorer.core.factor.factor_augmentation).

Oracles: with the factors and labels held fixed, the P-step's draws have the closed-form moments of the
Normal-inverse-gamma regression (written here from the textbook form, x'x + m0' T m0 - b' L b, not the module's
residual form); the I-step's factor and gap draws have the moments of the closed-form conditional (dense
conditioning of the marginal Gaussian for the gaps). Properties and bad input after.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from explorer.core.factor import factor_augmentation as fda
from explorer.core.validation import BadInputError


def _nig_moments(X, Z, prior, kind="fa"):
    """E[psi], Var[psi], E[beta] (D, q+1), Cov[beta_d] / E[psi_d] (q+1, q+1) from the textbook formulas."""
    n, q = Z.shape
    G = np.hstack([np.ones((n, 1)), Z])
    T = prior.tau * np.eye(q + 1)
    m0 = np.zeros((X.shape[1], q + 1))
    m0[:, 0] = prior.mean
    Lam = G.T @ G + T
    beta = np.linalg.solve(Lam, G.T @ X + T @ m0.T).T
    quad = (np.sum(X * X, axis=0) + np.einsum("di,ij,dj->d", m0, T, m0) - np.einsum("di,ij,dj->d", beta, Lam, beta))
    if kind == "ppca":
        a, b = prior.a0 + 0.5 * n * X.shape[1], prior.b0.mean() + 0.5 * quad.sum()
    else:
        a, b = prior.a0 + 0.5 * n, prior.b0 + 0.5 * quad
    return b / (a - 1), b * b / ((a - 1) ** 2 * (a - 2)), beta, np.linalg.inv(Lam)


def _regression_data(seed=0, n=30, D=3, q=2):
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n, q))
    X = 1.5 + Z @ rng.normal(size=(q, D)) + 0.6 * rng.normal(size=(n, D))
    # tau and a0 large enough that a formula dropping the prior's terms would be off by more than the tolerance
    prior = fda.FAPrior(mean=np.array([0.5, -1.0, 2.0]), b0=np.array([0.8, 0.3, 1.2]), a0=1.5, tau=3.0)
    return X, Z, prior


@pytest.mark.parametrize("kind", ["fa", "ppca"])
def test_oracle_p_step_draws_have_the_normal_inverse_gamma_posterior_moments(kind):
    X, Z, prior = _regression_data()
    n_draws = 6000
    rng = np.random.default_rng(1)
    config = fda.FADAConfig(kind=kind, min_psi=0.0)
    labels = np.zeros(X.shape[0], dtype=int)
    draws = [fda.draw_parameters(X, Z, labels, 1, prior, config, rng) for _ in range(n_draws)]
    psi = np.array([d[3][0] for d in draws])  # (n_draws, D)
    rows = np.array([np.column_stack([d[1][0], d[2][0]]) for d in draws])  # (n_draws, D, q+1)
    e_psi, v_psi, beta, lam_inv = _nig_moments(X, Z, prior, kind)
    if kind == "ppca":
        assert np.all(psi == psi[:, :1])  # one noise variance per component
    np.testing.assert_allclose(psi.mean(axis=0), e_psi, rtol=0.03)
    np.testing.assert_allclose(psi.var(axis=0), v_psi, rtol=0.2)
    se = np.sqrt(np.einsum("d,ii->di", np.broadcast_to(e_psi, (X.shape[1],)), lam_inv) / n_draws)
    assert np.all(np.abs(rows.mean(axis=0) - beta) < 4.5 * se)
    for d in range(X.shape[1]):
        expected = np.broadcast_to(e_psi, (X.shape[1],))[d] * lam_inv
        np.testing.assert_allclose(np.cov(rows[:, d, :].T), expected, rtol=0.06, atol=0.02 * np.abs(expected).max())


def test_oracle_p_step_weights_are_dirichlet_of_the_counts():
    X, Z, prior = _regression_data(n=30)
    labels = np.repeat([0, 1], [10, 20])
    rng = np.random.default_rng(2)
    config = fda.FADAConfig(alpha=1.0)
    w = np.array([fda.draw_parameters(X, Z, labels, 2, prior, config, rng)[0] for _ in range(1000)])
    np.testing.assert_allclose(w.sum(axis=1), 1.0)
    np.testing.assert_allclose(w.mean(axis=0), np.array([11.0, 21.0]) / 32.0, atol=0.01)


def _params(K=1, D=4, q=2, seed=0):
    rng = np.random.default_rng(seed)
    weights = np.full(K, 1.0 / K)
    means = rng.normal(size=(K, D)) * 2.0
    loadings = rng.normal(size=(K, D, q))
    psi = rng.uniform(0.2, 0.6, size=(K, D))
    return weights, means, loadings, psi


def test_oracle_i_step_factor_and_gap_draws_have_the_conditional_moments():
    _, (mu,), (W,), (psi,) = _params()
    x = np.array([0.5, np.nan, -1.0, np.nan])
    o, m = ~np.isnan(x), np.isnan(x)
    n = 40000
    X_nan = np.tile(x, (n, 1))
    labels, Z, X = fda.impute(X_nan, [1.0], mu[None], W[None], psi[None], np.random.default_rng(4))
    assert np.all(labels == 0) and np.array_equal(X[:, o], X_nan[:, o])
    # z | x_o: precision A = I + W_o' Psi_o^-1 W_o, mean A^-1 W_o' Psi_o^-1 (x_o - mu_o)
    A = np.eye(2) + W[o].T @ (W[o] / psi[o][:, None])
    z_mean = np.linalg.solve(A, W[o].T @ ((x[o] - mu[o]) / psi[o]))
    np.testing.assert_allclose(Z.mean(axis=0), z_mean, atol=4 * np.sqrt(np.diag(np.linalg.inv(A)).max() / n))
    np.testing.assert_allclose(np.cov(Z.T), np.linalg.inv(A), rtol=0.04, atol=0.004)
    # x_m | x_o: dense conditioning of N(mu, W W' + Psi)
    S = W @ W.T + np.diag(psi)
    gap_mean = mu[m] + S[np.ix_(m, o)] @ np.linalg.solve(S[np.ix_(o, o)], x[o] - mu[o])
    gap_cov = S[np.ix_(m, m)] - S[np.ix_(m, o)] @ np.linalg.solve(S[np.ix_(o, o)], S[np.ix_(o, m)])
    np.testing.assert_allclose(X[:, m].mean(axis=0), gap_mean, atol=4 * np.sqrt(np.diag(gap_cov).max() / n))
    np.testing.assert_allclose(np.cov(X[:, m].T), gap_cov, rtol=0.04, atol=0.01)


def test_oracle_i_step_labels_follow_the_responsibilities_on_the_observed_entries():
    weights, means, loadings, psi = _params(K=2, seed=1)
    weights = np.array([0.3, 0.7])
    x = np.array([0.2, np.nan, 0.4, 1.0])
    o = ~np.isnan(x)
    dens = [w * stats.multivariate_normal(means[k][o], (loadings[k] @ loadings[k].T + np.diag(psi[k]))[np.ix_(o, o)]
                                           ).pdf(x[o]) for k, w in enumerate(weights)]
    n = 20000
    labels, _, _ = fda.impute(np.tile(x, (n, 1)), weights, means, loadings, psi, np.random.default_rng(5))
    resp1 = dens[1] / sum(dens)
    assert abs(labels.mean() - resp1) < 4 * np.sqrt(resp1 * (1 - resp1) / n)


def _incomplete(seed=6, n=60, D=5):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 1)) @ rng.normal(size=(1, D)) + 0.5 * rng.normal(size=(n, D))
    X[n // 2:] += 4.0
    X_nan = np.where(rng.random(X.shape) < 0.25, np.nan, X)
    X_nan[0] = np.nan  # a row with nothing observed: drawn, left out of the P-step
    return X_nan


def test_property_chain_keeps_observed_entries_is_finite_and_reproducible():
    X_nan = _incomplete()
    fit_rows = np.flatnonzero(~np.isnan(X_nan).all(axis=1))
    weights, means, loadings, psi = _params(K=2, D=5, q=1, seed=2)
    prior = fda.default_prior(X_nan[fit_rows])
    config = fda.FADAConfig(n_burn=3, n_thin=2)

    def chain(seed):
        rng = np.random.default_rng(seed)
        state = fda.init(X_nan, weights, means, loadings, psi, rng)
        return fda.run(state, X_nan, prior, config, 5, rng, fit_rows=fit_rows)

    kept = chain(0)
    assert len(kept) == 5 and [s.iteration for s in kept] == [5, 7, 9, 11, 13]
    obs = ~np.isnan(X_nan)
    for s in kept:
        assert np.array_equal(s.X[obs], X_nan[obs]) and np.isfinite(s.X).all() and np.isfinite(s.Z).all()
        np.testing.assert_allclose(s.weights.sum(), 1.0)
        assert np.all(s.psi > 0) and np.isfinite(s.loadings).all() and s.loadings.shape == (2, 5, 1)
        assert not s.X.flags.writeable
    again = chain(0)
    for a, b in zip(kept, again):
        np.testing.assert_array_equal(a.X, b.X)
        np.testing.assert_array_equal(a.loadings, b.loadings)
    assert not np.array_equal(chain(1)[-1].X, kept[-1].X)


def test_default_prior_is_scaled_to_the_observed_columns():
    X_nan = _incomplete()
    prior = fda.default_prior(X_nan)
    np.testing.assert_allclose(prior.mean, np.nanmean(X_nan, axis=0))
    np.testing.assert_allclose(prior.b0, fda.A0 * fda.NOISE_FRACTION * np.nanvar(X_nan, axis=0))
    assert prior.a0 == fda.A0 and prior.tau == fda.TAU
    constant = X_nan.copy()
    constant[:, 2] = 1.0
    assert fda.default_prior(constant).b0[2] > 0  # a constant column borrows the others' variance


def test_bad_input():
    X_nan = _incomplete()
    with pytest.raises(BadInputError, match="kind"):
        fda.FADAConfig(kind="pca")
    with pytest.raises(BadInputError, match="alpha"):
        fda.FADAConfig(alpha=0.0)
    with pytest.raises(BadInputError, match="n_thin"):
        fda.FADAConfig(n_thin=0)
    with pytest.raises(BadInputError, match="b0"):
        fda.FAPrior(mean=np.zeros(2), b0=np.array([1.0, 0.0]))
    with pytest.raises(BadInputError, match="tau"):
        fda.FAPrior(mean=np.zeros(2), b0=np.ones(2), tau=-1.0)
    empty = X_nan.copy()
    empty[:, 1] = np.nan
    with pytest.raises(BadInputError, match="observed value"):
        fda.default_prior(empty)
    rng = np.random.default_rng(0)
    state = fda.init(X_nan, *_params(K=1, D=5, q=1), rng)
    with pytest.raises(BadInputError, match="n_draws"):
        fda.run(state, X_nan, fda.default_prior(X_nan), fda.FADAConfig(), 0, rng)
    with pytest.raises(BadInputError, match="FAPrior"):
        fda.run(state, X_nan, None, fda.FADAConfig(), 2, rng)
