"""Tests of explorer.core.factor.neumann: the encoders of rows with missing entries (exact, FCA, SCA, mean
imputation) and the scaled Neumann series (NSA, antypas2023 Algorithm 1).

Oracles: dense Gaussian conditioning (W_o^T Sigma_oo^-1 (x_o - mu_o), np.linalg.solve), the literal
Algorithm 1 with a dense A per row, the series sum (1/s) sum_j (I - A/s)^j u, dense eigenvalues of
I - A/s. Properties (hypothesis): rho(I - A/s) < 1 for every mask; the error after l terms respects
the a-priori bound at every l; observed entries are never altered.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.core.factor import factor_analysis as fa
from explorer.core.factor import neumann as ns
from explorer.core.factor.factor_analysis import FAParams
from explorer.core.factor.neumann import NeumannConfig
from explorer.core.validation import BadInputError


def random_model(rng, D, q, *, psi_range=(0.1, 1.0)):
    return FAParams.from_arrays(rng.normal(size=D), rng.normal(size=(D, q)), rng.uniform(*psi_range, size=D))


def sample(rng, P, n):
    return P.mean + rng.normal(size=(n, P.n_factors)) @ P.loadings.T + rng.normal(size=(n, P.n_features)) * np.sqrt(P.psi)


def with_masks(rng, X, p=0.5):
    """Random MCAR masks plus the edge cases: all observed, one observed, nothing observed, a quarter."""
    n, D = X.shape
    miss = rng.random((n, D)) < p
    miss[0] = False
    miss[1] = True
    miss[1, D // 2] = False
    miss[2] = True
    miss[3] = np.arange(D) < D // 4
    Xm = X.copy()
    Xm[miss] = np.nan
    return Xm, miss


def dense_A(P, obs):
    W = P.loadings
    return np.eye(P.n_factors) + W[obs].T @ (W[obs] / P.psi[obs, None])


def dense_exact(P, x):
    o = ~np.isnan(x)
    if not o.any():
        return np.zeros(P.n_factors)
    C = P.covariance()
    return P.loadings[o].T @ np.linalg.solve(C[np.ix_(o, o)], x[o] - P.mean[o])


@pytest.fixture
def setup():
    rng = np.random.default_rng(0)
    P = random_model(rng, 12, 3)
    X = sample(rng, P, 40)
    Xm, miss = with_masks(rng, X)
    return P, X, Xm, miss


# ----------------------------------------------------------------------------- direct encoders
def test_exact_encoder_matches_dense_gaussian_conditioning(setup):
    P, X, Xm, _ = setup
    y = ns.encode_exact(P, Xm)
    np.testing.assert_allclose(y, [dense_exact(P, x) for x in Xm], rtol=1e-10, atol=1e-12)
    assert np.all(y[2] == 0.0)  # nothing observed: the prior mean
    # with a few shared masks (the per-pattern loop) as with every row its own mask
    quarters = np.zeros_like(Xm, dtype=bool)
    quarters[:, :3] = True
    quarters[::2, 3:6] = True
    Xq = np.where(quarters, np.nan, X)
    np.testing.assert_allclose(ns.encode_exact(P, Xq), [dense_exact(P, x) for x in Xq], rtol=1e-10, atol=1e-12)


def test_fca_sca_and_mean_imputation_follow_their_definitions(setup):
    P, X, Xm, miss = setup
    Pfull = dense_A(P, np.ones(P.n_features, bool))
    fca, sca, exact = ns.encode_fca(P, Xm), ns.encode_sca(P, Xm), ns.encode_exact(P, Xm)
    xmi = ns.mean_impute(P, Xm)
    assert np.array_equal(xmi[~miss], X[~miss]) and np.array_equal(xmi[miss], np.broadcast_to(P.mean, X.shape)[miss])
    D = P.n_features
    for i in range(X.shape[0]):
        u = P.loadings.T @ ((xmi[i] - P.mean) / P.psi)  # eq. 2.19: mean imputation leaves u unchanged
        np.testing.assert_allclose(fca[i], np.linalg.solve(Pfull, u), rtol=1e-10, atol=1e-12)
        Dm = miss[i].sum()
        prec = (Dm / D) * np.eye(P.n_factors) + ((D - Dm) / D) * Pfull
        np.testing.assert_allclose(sca[i], np.linalg.solve(prec, u), rtol=1e-10, atol=1e-12)
    # on a complete row the three coincide; on an empty row all are 0
    np.testing.assert_allclose(fca[0], exact[0], rtol=1e-10)
    np.testing.assert_allclose(sca[0], exact[0], rtol=1e-10)
    assert np.all(fca[2] == 0) and np.all(sca[2] == 0)


def test_exact_imputation_beats_the_baselines_on_data_from_the_model():
    rng = np.random.default_rng(1)
    P = random_model(rng, 20, 4, psi_range=(0.05, 0.3))
    X = sample(rng, P, 400)
    Xm, miss = with_masks(rng, X, p=0.5)
    err = {m: np.mean((ns.reconstruct(P, Xm, method=m, n_terms=3000) - X)[miss] ** 2) for m in ns.METHODS}
    assert err["exact"] < err["sca"] < err["fca"] < err["mean"]
    assert err["neumann"] == pytest.approx(err["exact"], rel=1e-6)
    for m in ns.METHODS:
        out = ns.reconstruct(P, Xm, method=m)
        assert np.array_equal(out[~miss], X[~miss]) and np.all(np.isfinite(out))
    full = ns.reconstruct(P, Xm, method="exact", keep_observed=False)
    np.testing.assert_allclose(full, ns.decode(P, ns.encode_exact(P, Xm)))


def test_exact_imputation_is_the_fa_conditional_mean(setup):
    P, _X, Xm, _miss = setup
    np.testing.assert_allclose(ns.reconstruct(P, Xm, method="exact"), fa.conditional(P, Xm).mean(), atol=1e-12)


# ----------------------------------------------------------------------------- NSA
def test_spectral_scale_for_ppca_is_top_eigenvalue_over_noise():
    rng = np.random.default_rng(2)
    X = sample(rng, random_model(rng, 10, 3), 200)
    P = fa.ppca_closed_form(X, 3)
    lam1 = np.linalg.eigvalsh(np.cov(X.T, bias=True))[-1]
    assert ns.spectral_scale(P, eps=0.0) == pytest.approx(lam1 / P.psi[0], rel=1e-10)
    assert ns.spectral_scale(P, eps=0.5) == pytest.approx(lam1 / P.psi[0] + 0.5, rel=1e-10)


def test_nsa_is_algorithm_1_and_the_truncated_series(setup):
    P, X, Xm, miss = setup
    prob = ns.prepare(P, Xm, eps=1e-3)
    s = prob.scale
    states = [ns.init(prob)]
    for _ in range(6):
        states.append(ns.step(states[-1], prob))
    for i in (0, 1, 3, 7):
        obs = ~miss[i]
        As = dense_A(P, obs) / s
        u = P.loadings[obs].T @ ((X[i, obs] - P.mean[obs]) / P.psi[obs])
        z = u.copy()  # Algorithm 1, literally: z <- (I - A_s) z + u, mu = z / s
        series = np.zeros_like(u)
        for l, state in enumerate(states):
            series += np.linalg.matrix_power(np.eye(P.n_factors) - As, l) @ u
            np.testing.assert_allclose(state.latent[i], z / s, rtol=1e-10, atol=1e-13)
            np.testing.assert_allclose(state.latent[i], series / s, rtol=1e-10, atol=1e-13)
            np.testing.assert_allclose(state.residual[i], u - dense_A(P, obs) @ state.latent[i], atol=1e-10)
            z = (np.eye(P.n_factors) - As) @ z + u
        assert states[-1].n_terms == 6


def test_nsa_converges_to_exact_and_respects_the_bounds_at_every_l(setup):
    P, _X, Xm, _miss = setup
    prob = ns.prepare(P, Xm)
    exact = ns.encode_exact(P, Xm)
    state = ns.init(prob)
    for _ in range(4000):
        err = np.linalg.norm(state.latent - exact, axis=1)
        assert np.all(err <= state.error_bound(prob) * (1 + 1e-9) + 1e-12)
        assert np.all(err <= state.posterior_bound(prob) * (1 + 1e-9) + 1e-12)
        state = ns.step(state, prob)
    np.testing.assert_allclose(state.latent, exact, atol=1e-8)
    assert state.relative_residual(prob).max() < 1e-8
    # the bound is not vacuous: it decays like rho^(l+1)
    live = prob.u_norm > 0
    assert np.all(prob.bound(50)[live] < prob.bound(10)[live]) and np.all(prob.bound(10)[~live] == 0)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 100_000),
    D=st.integers(2, 9),
    q_frac=st.floats(0.0, 0.99),
    p=st.floats(0.0, 1.0),
    eps=st.sampled_from([0.0, 1e-6, 1.0]),
)
def test_spectral_radius_is_below_one_for_every_mask(seed, D, q_frac, p, eps):
    rng = np.random.default_rng(seed)
    q = 1 + int(q_frac * (D - 1))
    P = random_model(rng, D, q, psi_range=(0.01, 2.0))
    X = sample(rng, P, 8)
    Xm, miss = with_masks(rng, X, p)
    prob = ns.prepare(P, Xm, eps=eps)
    assert np.all(prob.rho < 1.0) and np.all(prob.rho >= 0.0)
    assert np.all(prob.rho <= 1.0 - 1.0 / prob.scale + 1e-12)  # universal worst case, lambda_min(A) >= 1
    for i in range(X.shape[0]):
        eig = np.linalg.eigvals(np.eye(q) - dense_A(P, ~miss[i]) / prob.scale)
        assert prob.rho[i] == pytest.approx(np.abs(eig).max(), rel=1e-9, abs=1e-12)
    # without diagnostics the per-row radius is the mask-independent bound
    loose = ns.prepare(P, Xm, eps=eps, diagnostics=False)
    assert np.all(loose.rho >= prob.rho - 1e-12) and not loose.rho_exact


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 100_000),
    D=st.integers(2, 10),
    q_frac=st.floats(0.0, 0.99),
    p=st.floats(0.0, 1.0),
)
def test_nsa_converges_to_exact_for_any_mask_within_the_bound(seed, D, q_frac, p):
    rng = np.random.default_rng(seed)
    q = 1 + int(q_frac * (D - 1))
    P = random_model(rng, D, q, psi_range=(0.1, 1.0))
    Xm, _ = with_masks(rng, sample(rng, P, 8), p)
    prob = ns.prepare(P, Xm)
    exact = ns.encode_exact(P, Xm)
    state = ns.init(prob)
    for _ in range(60):
        err = np.linalg.norm(state.latent - exact, axis=1)
        assert np.all(err <= state.error_bound(prob) * (1 + 1e-9) + 1e-12)
        state = ns.step(state, prob)
    res = ns.fit(prob, NeumannConfig(n_terms=200_000, tol=1e-13))
    assert res.stop_reason == "tol"
    np.testing.assert_allclose(res.latent, exact, atol=1e-8)


def test_fit_stops_early_on_the_residual_and_falls_back_honestly(setup):
    P, X, Xm, miss = setup
    prob = ns.prepare(P, Xm)
    exact = ns.encode_exact(P, Xm)
    res = ns.fit(prob, NeumannConfig(n_terms=100_000, tol=1e-9))
    assert res.stop_reason == "tol" and res.n_terms < 100_000
    assert res.relative_residual.max() < 1e-9 and not res.fell_back.any()
    assert res.trace[-1]["n_terms"] == res.n_terms and res.trace[-1]["max_residual"] < 1e-9
    np.testing.assert_allclose(res.latent, exact, atol=1e-7)
    seen = []
    res = ns.fit(prob, NeumannConfig(n_terms=3, tol=1e-6, fallback="exact"), callback=seen.append)
    assert res.stop_reason == "n_terms" and res.n_terms == 3 and len(seen) == 3
    above = res.state.relative_residual(prob) >= 1e-6
    assert np.array_equal(res.fell_back, above) and above.any() and not above[2]
    np.testing.assert_allclose(res.latent[above], exact[above], atol=1e-12)
    assert np.array_equal(res.latent[~above], res.state.latent[~above])
    assert np.all(res.relative_residual[above] == 0.0)
    imp = res.imputation()
    assert np.array_equal(imp[~miss], X[~miss]) and np.all(np.isfinite(imp))
    res0 = ns.fit(prob, NeumannConfig(n_terms=0))
    np.testing.assert_allclose(res0.latent, prob.u / prob.scale)


def test_states_are_immutable_and_step_is_pure(setup):
    P, _X, Xm, _ = setup
    prob = ns.prepare(P, Xm)
    s0 = ns.init(prob)
    y0 = s0.latent.copy()
    s1 = ns.step(s0, prob)
    assert s1.n_terms == 1 and np.array_equal(s0.latent, y0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s0.n_terms = 5
    for a in (s0.latent, s0.residual, prob.u, prob.rho, prob.values):
        with pytest.raises(ValueError):
            a[0] = 0.0


# ----------------------------------------------------------------------------- bad input
def test_bad_input(setup):
    P, X, Xm, _ = setup
    with pytest.raises(BadInputError, match="n_terms must be a non-negative integer"):
        NeumannConfig(n_terms=-1)
    with pytest.raises(BadInputError, match="n_terms"):
        NeumannConfig(n_terms=2.5)
    with pytest.raises(BadInputError, match="tol must be"):
        NeumannConfig(tol=-1.0)
    with pytest.raises(BadInputError, match="fallback must be one of"):
        NeumannConfig(fallback="cg")
    with pytest.raises(BadInputError, match="needs tol > 0"):
        NeumannConfig(fallback="exact")
    with pytest.raises(BadInputError, match="eps must be"):
        ns.prepare(P, Xm, eps=-1.0)
    with pytest.raises(BadInputError, match="column"):
        ns.encode_exact(P, Xm[:, :5])
    with pytest.raises(BadInputError, match="infinite"):
        ns.encode_sca(P, np.where(np.isnan(Xm), np.inf, Xm))
    with pytest.raises(BadInputError, match="must be 2-D"):
        ns.encode_fca(P, X[0])
    with pytest.raises(BadInputError, match="latent must have shape"):
        ns.decode(P, np.zeros((3, P.n_factors + 1)))
    with pytest.raises(BadInputError, match="method must be one of"):
        ns.reconstruct(P, Xm, method="zero")
    with pytest.raises(BadInputError, match="config must be a NeumannConfig"):
        ns.fit(ns.prepare(P, Xm), {"n_terms": 3})
    with pytest.raises(BadInputError, match="Expected FAParams"):
        ns.encode_exact(np.eye(3), Xm)
    with pytest.raises(BadInputError, match="NaN value"):
        ns.prepare(P, Xm, missing=np.zeros(Xm.shape, bool))
