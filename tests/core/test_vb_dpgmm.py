"""Tests of explorer.core.mixtures.vb_dpgmm (variational DP Gaussian mixture on incomplete data, POIGMM).

Oracles: scikit-learn's BayesianGaussianMixture (dirichlet_process, full) on complete data from
the same responsibilities; the closed-form Normal-Wishart evidence (K = 1: the ELBO is exact);
the corrected marginal-Wishart theorem by Monte Carlo; dense per-row responsibilities.
Properties: the ELBO never decreases for the exact coordinate-ascent configuration.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import digamma, multigammaln
from scipy.stats import wishart

from explorer.core.mixtures import em_gmm
from explorer.core.mixtures import vb_dpgmm as vb
from explorer.core.mixtures.vb_dpgmm import VBConfig, VBConvergenceWarning
from explorer.core.validation import BadInputError

LOG_2PI = np.log(2 * np.pi)


def clusters(rng, n, D=4, spread=4.0, missing=0.0, K=3):
    centers = rng.normal(scale=spread, size=(K, D))
    A = np.eye(D) + 0.4 * np.triu(rng.normal(size=(D, D)), 1)
    X = centers[rng.integers(K, size=n)] + rng.normal(size=(n, D)) @ A
    if missing:
        X[rng.uniform(size=X.shape) < missing] = np.nan
    return X


def random_resp(rng, n, K):
    r = rng.uniform(size=(n, K))
    return r / r.sum(axis=1, keepdims=True)


# ----------------------------------------------------------------------------- (1) sklearn oracle
@pytest.mark.parametrize("reg", [0.0, 1e-6])
def test_matches_sklearn_dirichlet_process_on_complete_data(reg):
    from sklearn.mixture import BayesianGaussianMixture

    rng = np.random.default_rng(0)
    n, D, K = 150, 3, 4
    X = clusters(rng, n, D)
    resp = random_resp(rng, n, K)
    alpha, beta0, nu0 = 0.3, 0.7, D + 1.5
    m0 = np.array([0.1, -0.2, 0.3])
    Psi0 = np.array([[1.0, 0.2, 0.0], [0.2, 1.5, 0.1], [0.0, 0.1, 0.8]])
    W0 = np.linalg.solve(Psi0, np.eye(D))
    cfg = VBConfig(n_components=K, alpha=alpha, mean_prior=m0, beta0=beta0, W0=W0, nu0=nu0, stick="sklearn",
                   reg_covar=reg, responsibilities="corrected")
    data = vb.prepare(X)
    state = vb.init_from_resp(data, cfg, resp)
    bgm = BayesianGaussianMixture(
        n_components=K, weight_concentration_prior_type="dirichlet_process", covariance_type="full",
        weight_concentration_prior=alpha, mean_precision_prior=beta0, mean_prior=m0, degrees_of_freedom_prior=nu0,
        covariance_prior=Psi0, reg_covar=reg, max_iter=1, tol=0)
    bgm._check_parameters(X)
    bgm._initialize(X, resp)  # M-step from resp: the same starting point as init_from_resp
    offsets = []
    for _ in range(8):
        _, log_resp = bgm._e_step(X)
        bgm._m_step(X, log_resp)
        bound = bgm._compute_lower_bound(log_resp, None)
        state = vb.step(state, data, cfg)
        np.testing.assert_allclose(state.resp, np.exp(log_resp), rtol=0, atol=1e-10)
        np.testing.assert_allclose(state.means, bgm.means_, rtol=0, atol=1e-9)
        np.testing.assert_allclose(state.covariances, bgm.covariances_, rtol=0, atol=1e-9)
        np.testing.assert_allclose(state.nu, bgm.degrees_of_freedom_, rtol=1e-12)
        np.testing.assert_allclose(state.beta, bgm.mean_precision_, rtol=1e-12)
        np.testing.assert_allclose(state.gamma, np.stack(bgm.weight_concentration_, axis=1), rtol=1e-10)
        offsets.append(state.elbo - bound)
    bgm._set_parameters(bgm._get_parameters())
    np.testing.assert_allclose(state.weights, bgm.weights_, atol=1e-10)
    if reg == 0.0:  # sklearn's bound drops constants: the difference is constant along the run
        assert np.ptp(offsets) < 1e-8 * abs(state.elbo)


def test_elbo_equals_normal_wishart_evidence_for_one_component():
    rng = np.random.default_rng(3)
    n, D = 40, 3
    X = rng.normal(size=(n, D)) @ np.array([[1.0, 0.5, 0.0], [0.0, 1.0, -0.3], [0.0, 0.0, 0.7]]) + 1.0
    m0, beta0, nu0 = np.array([0.5, 0.0, -0.5]), 2.0, 5.0
    cfg = VBConfig(n_components=1, mean_prior=m0, beta0=beta0, nu0=nu0, reg_covar=0.0)
    data = vb.prepare(X)
    state = vb.step(vb.init_from_resp(data, cfg, np.ones((n, 1))), data, cfg)
    xbar = X.mean(axis=0)
    S = (X - xbar).T @ (X - xbar)
    betaN, nuN = beta0 + n, nu0 + n
    PsiN = np.eye(D) + S + beta0 * n / betaN * np.outer(xbar - m0, xbar - m0)
    log_evidence = (-n * D / 2 * np.log(np.pi) + D / 2 * np.log(beta0 / betaN) - nuN / 2 * np.linalg.slogdet(PsiN)[1]
                    + multigammaln(nuN / 2, D) - multigammaln(nu0 / 2, D))
    assert state.elbo == pytest.approx(log_evidence, rel=1e-10)
    np.testing.assert_allclose(state.scatter[0], PsiN, atol=1e-10)


# ----------------------------------------------------------------------------- (2) marginal Wishart
def test_marginal_wishart_scale_is_the_schur_complement():
    rng = np.random.default_rng(7)
    D, nu, o, mis = 3, 7.0, [0, 1], [2]
    W = np.array([[1.0, 0.3, 0.6], [0.3, 1.0, -0.5], [0.6, -0.5, 1.5]])
    lam = wishart(df=nu, scale=W).rvs(size=20000, random_state=rng)
    # ((Lambda^{-1})^{oo})^{-1} = Lambda^oo - Lambda^om (Lambda^mm)^{-1} Lambda^mo
    lo = lam[:, :2, :2] - lam[:, :2, 2:] @ lam[:, 2:, :2] / lam[:, 2:, 2:]
    nup = nu - D + len(o)
    schur = W[np.ix_(o, o)] - W[np.ix_(o, mis)] @ W[np.ix_(mis, o)] / W[2, 2]
    se = np.sqrt(nup * (schur**2 + np.outer(np.diag(schur), np.diag(schur))) / lam.shape[0])
    mean = lo.mean(axis=0)
    assert np.all(np.abs(mean - nup * schur) < 4 * se)
    assert np.max(np.abs(mean - nup * W[np.ix_(o, o)]) / se) > 20  # the thesis's plain block is wrong
    # E[log|Lambda'|] = sum psi((nu'+1-i)/2) + |o| log 2 + log|Schur(W)|, used by the corrected tau
    logdet = np.linalg.slogdet(lo)[1]
    expected = digamma((nup + 1 - np.arange(1, 3)) / 2).sum() + 2 * np.log(2) + np.linalg.slogdet(schur)[1]
    assert abs(logdet.mean() - expected) < 4 * logdet.std() / np.sqrt(lam.shape[0])


# ----------------------------------------------------------------------------- (3) dense responsibilities
def _dense_augmented(theta, compl, x, k):
    """E_{q(theta_k)} E_{q(x^m|k)} log N(x; mu_k, Lambda_k) + H[q(x^m|k)], written out in full.

    q(mu_k, Lambda_k) from state ``theta``; q(x^m | k) the conditional Gaussian under
    Psi_k / nu_k of state ``compl``.
    """
    D = x.size
    o, mi = np.flatnonzero(~np.isnan(x)), np.flatnonzero(np.isnan(x))
    Psi, m, beta, nu = theta.scatter[k], theta.means[k], theta.beta[k], theta.nu[k]
    Pc, mc, nuc = compl.scatter[k], compl.means[k], compl.nu[k]
    W = np.linalg.inv(Psi)
    Poo = Pc[np.ix_(o, o)]
    xt = x.copy()
    xt[mi] = mc[mi] + Pc[np.ix_(mi, o)] @ np.linalg.solve(Poo, x[o] - mc[o])
    C = np.zeros((D, D))
    C[np.ix_(mi, mi)] = (Pc[np.ix_(mi, mi)] - Pc[np.ix_(mi, o)] @ np.linalg.solve(Poo, Pc[np.ix_(o, mi)])) / nuc
    elogdet = digamma((nu + 1 - np.arange(1, D + 1)) / 2).sum() + D * np.log(2) + np.linalg.slogdet(W)[1]
    ent = 0.5 * mi.size * (1 + LOG_2PI) + 0.5 * (np.linalg.slogdet(C[np.ix_(mi, mi)])[1] if mi.size else 0.0)
    return (0.5 * elogdet - D / 2 * LOG_2PI
            - 0.5 * (D / beta + nu * ((xt - m) @ W @ (xt - m) + np.trace(W @ C))) + ent)


def _dense_log_rho(state, X, kind):
    K, D = state.means.shape
    g = state.gamma
    s = digamma(g.sum(axis=1))
    ea, eb = digamma(g[:, 0]) - s, digamma(g[:, 1]) - s
    elogpi = np.array([(ea[k] if k < K - 1 else 0.0) + eb[:k].sum() for k in range(K)])
    out = np.full((X.shape[0], K), np.nan)
    for i, x in enumerate(X):
        o = np.flatnonzero(~np.isnan(x))
        if o.size == 0:
            continue
        for k in range(K):
            Psi, m, beta, nu = state.scatter[k], state.means[k], state.beta[k], state.nu[k]
            d = x[o] - m[o]
            Poo = Psi[np.ix_(o, o)]
            nup = nu - D + o.size
            dsum = digamma((nup + 1 - np.arange(1, o.size + 1)) / 2).sum()
            if kind == "corrected":
                val = (0.5 * (dsum + o.size * np.log(2) - np.linalg.slogdet(Poo)[1]) - o.size / 2 * LOG_2PI
                       - 0.5 * (o.size / beta + nup * d @ np.linalg.solve(Poo, d)))
            elif kind == "thesis":
                Woo = np.linalg.inv(Psi)[np.ix_(o, o)]
                val = 0.5 * np.linalg.slogdet(Woo)[1] + 0.5 * dsum - 0.5 * beta * nup * d @ Woo @ d
            else:
                val = _dense_augmented(state, state, x, k)
            out[i, k] = val + elogpi[k]
    return out


@pytest.mark.parametrize("kind", ["corrected", "thesis", "augmented"])
@pytest.mark.parametrize("missing", [0.15, 0.45])
def test_responsibilities_match_dense_per_row_computation(kind, missing):
    rng = np.random.default_rng(11)
    X = clusters(rng, 90, D=5, missing=missing)
    X[3] = np.nan  # a row with nothing observed gets the expected weights
    cfg = VBConfig(n_components=4, responsibilities=kind, init="random")
    data = vb.prepare(X)
    state = vb.step(vb.init(data, cfg, np.random.default_rng(0)), data, cfg)  # non-trivial parameters
    new = vb.step(state, data, cfg)
    log_rho = _dense_log_rho(state, X, kind)
    fit = ~np.isnan(X).all(axis=1)
    dense = np.exp(log_rho[fit] - np.logaddexp.reduce(log_rho[fit], axis=1, keepdims=True))
    np.testing.assert_allclose(new.resp[fit], dense, rtol=0, atol=1e-9)
    np.testing.assert_allclose(new.resp[3], new.weights)


def test_elbo_data_terms_match_dense_computation_with_missing_data():
    """The data part of the ELBO: sum_nk tau_nk [E log N + H[q(x^m|k)] + E log pi_k - log tau_nk]."""
    rng = np.random.default_rng(12)
    X = clusters(rng, 70, D=4, missing=0.35)
    cfg = VBConfig(n_components=3, responsibilities="corrected", init="random", reg_covar=1e-3)
    data = vb.prepare(X)
    prev = vb.step(vb.init(data, cfg, rng), data, cfg)
    new = vb.step(prev, data, cfg)
    terms = new.cache["elbo_terms"]
    assert sum(terms.values()) == pytest.approx(new.elbo, rel=1e-12)
    g = new.gamma
    s = digamma(g.sum(axis=1))
    ea, eb = digamma(g[:, 0]) - s, digamma(g[:, 1]) - s
    elogpi = np.array([(ea[k] if k < 2 else 0.0) + eb[:k].sum() for k in range(3)])
    dense = sum(new.resp[i, k] * (_dense_augmented(new, prev, X[i], k) + elogpi[k] - np.log(new.resp[i, k]))
                for i in range(X.shape[0]) if not np.isnan(X[i]).all() for k in range(3))  # empty rows: not fitted
    ours = terms["log_lik"] + terms["entropy_xmis"] + terms["log_p_z"] + terms["neg_log_q_z"]
    assert ours == pytest.approx(dense, rel=1e-10)


# ----------------------------------------------------------------------------- (4) ELBO monotone
@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), rate=st.floats(0.05, 0.5), K=st.integers(1, 4))
def test_elbo_never_decreases_for_exact_coordinate_ascent(seed, rate, K):
    rng = np.random.default_rng(seed)
    X = clusters(rng, 60, D=3, missing=rate)
    data = vb.prepare(X)
    cfg = VBConfig(n_components=K, update="principled", responsibilities="augmented", reg_covar=0.0, init="random")
    state = vb.step(vb.init(data, cfg, rng), data, cfg)
    elbos = [state.elbo]
    for _ in range(12):
        state = vb.step(state, data, cfg)
        elbos.append(state.elbo)
    assert np.all(np.isfinite(elbos))
    assert np.all(np.diff(elbos) >= -1e-9 * np.abs(elbos[1:]))


def test_elbo_undefined_for_point_mass_completions_and_plugin_loglik_reported():
    rng = np.random.default_rng(2)
    X = clusters(rng, 80, D=3, missing=0.2)
    data = vb.prepare(X)
    cfg = VBConfig(n_components=3, update="thesis")
    s0 = vb.init(data, cfg, rng)
    s1 = vb.step(s0, data, cfg)
    assert np.isnan(s0.elbo) and np.isnan(s1.elbo)
    assert np.isfinite(s1.log_likelihood) and s1.objective == s1.log_likelihood
    s2 = vb.step(s0, data, VBConfig(n_components=3))  # principled: defined from the first step on
    assert np.isfinite(s2.elbo) and s2.elbo < 0


# ----------------------------------------------------------------------------- (5) weights, NaN, states
@pytest.mark.parametrize("update", vb.UPDATES)
@pytest.mark.parametrize("resp", vb.RESPONSIBILITIES)
@pytest.mark.parametrize("stick", vb.STICKS)
def test_fit_states_are_valid(update, resp, stick):
    rng = np.random.default_rng(5)
    X = clusters(rng, 120, D=4, missing=0.3)
    data = vb.prepare(X)
    cfg = VBConfig(n_components=6, update=update, responsibilities=resp, stick=stick, max_iter=15, tol=0.0)
    with pytest.warns(VBConvergenceWarning):
        res = vb.fit(data, cfg, rng)
    s = res.state
    assert res.stop_reason == "max_iter" and res.n_iter == 15 and len(res.trace) == 16
    assert s.weights.sum() == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(s.resp.sum(axis=1), 1.0, atol=1e-12)
    assert s.gamma.shape == ((6, 2) if stick == "sklearn" else (5, 2))
    for a in (s.resp, s.means, s.scatter, s.beta, s.nu, s.gamma):
        assert np.all(np.isfinite(a)) and not a.flags.writeable
    np.testing.assert_allclose(s.scatter, np.swapaxes(s.scatter, 1, 2))
    assert np.all(np.linalg.eigvalsh(s.covariances) > 0)
    snap = vb.snapshot(s)
    assert set(snap) >= {"iteration", "elbo", "weights", "means", "covariances", "n_effective"}
    assert 1.0 <= snap["weights_perplexity"] <= 6.0


def test_expected_weights_sum_to_one_and_match_log_weights_order():
    gamma = np.array([[3.0, 5.0], [2.0, 1.0], [1.5, 0.2]])
    for stick in vb.STICKS:
        w = vb.expected_weights(gamma, stick)
        assert w.sum() == pytest.approx(1.0)
    elog = vb.expected_log_weights(gamma, "truncated")
    assert elog.shape == (4,) and np.all(elog < 0)
    # Jensen: E[log pi_k] <= log E[pi_k]
    assert np.all(elog <= np.log(vb.expected_weights(gamma, "truncated")) + 1e-12)


# ----------------------------------------------------------------------------- (6) pruning
def test_many_components_on_three_clusters_leaves_three():
    rng = np.random.default_rng(4)
    centers = np.array([[5.0, 0.0], [-5.0, 0.0], [0.0, 6.0]])
    X = centers[rng.integers(3, size=300)] + rng.normal(size=(300, 2)) * 0.7
    X[rng.uniform(size=X.shape) < 0.1] = np.nan
    X[np.isnan(X).all(axis=1), 0] = 0.0
    res = vb.fit(vb.prepare(X), VBConfig(n_components=10, tol=1e-5, max_iter=300), rng)
    assert res.converged
    assert res.state.n_effective == 3
    big = np.sort(res.state.weights)[-3:]
    assert np.all(big > 0.25)


# ----------------------------------------------------------------------------- (7) bad input
@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n_components": 0}, "n_components"),
        ({"alpha": -1.0}, "alpha"),
        ({"beta0": 0.0}, "beta0"),
        ({"nu0": float("nan")}, "nu0"),
        ({"update": "em"}, "update"),
        ({"responsibilities": "x"}, "responsibilities"),
        ({"stick": "dirichlet"}, "stick"),
        ({"reg_covar": -1e-3}, "reg_covar"),
        ({"tol": -1.0}, "tol"),
        ({"max_iter": 2.5}, "max_iter"),
        ({"init": "kmeans++"}, "init"),
        ({"n_init": 0}, "n_init"),
    ],
)
def test_bad_config(kwargs, match):
    with pytest.raises(BadInputError, match=match):
        VBConfig(**kwargs)


def test_config_with_array_priors_is_hashable_and_comparable():
    a = VBConfig(n_components=2, mean_prior=np.zeros(3), W0=np.eye(3))
    b = VBConfig(n_components=2, mean_prior=[0.0, 0.0, 0.0], W0=np.eye(3).tolist())
    assert a == b and hash(a) == hash(b)
    with pytest.raises(BadInputError, match="W0 must be a finite 2-D"):
        VBConfig(W0=np.ones(3))
    with pytest.raises(BadInputError, match="mean_prior must be numeric"):
        VBConfig(mean_prior=["a", "b"])


def test_bad_prior_and_resp():
    X = clusters(np.random.default_rng(0), 30, D=3)
    data = vb.prepare(X)
    rng = np.random.default_rng(0)
    with pytest.raises(BadInputError, match="mean_prior"):
        vb.init(data, VBConfig(n_components=2, mean_prior=[0.0, 1.0]), rng)
    with pytest.raises(BadInputError, match="positive definite"):
        vb.init(data, VBConfig(n_components=2, W0=np.diag([1.0, -1.0, 1.0])), rng)
    with pytest.raises(BadInputError, match="nu0"):
        vb.init(data, VBConfig(n_components=2, nu0=1.5), rng)
    with pytest.raises(BadInputError, match="larger than the number of rows"):
        vb.init(data, VBConfig(n_components=31), rng)
    with pytest.raises(BadInputError, match="resp"):
        vb.init_from_resp(data, VBConfig(n_components=2), np.ones((30, 3)))
    with pytest.raises(BadInputError, match="summing to zero"):
        vb.init_from_resp(data, VBConfig(n_components=2), np.zeros((30, 2)))
    with pytest.raises(BadInputError, match="truth"):
        vb.fit(data, VBConfig(n_components=2), rng, truth=np.zeros((3, 3)))
    with pytest.raises(BadInputError, match="non-numeric"):
        vb.prepare([["a", 1.0], [2.0, 3.0]])


def test_fit_stops_on_tolerance_and_restarts_keep_best():
    rng = np.random.default_rng(9)
    data = vb.prepare(clusters(rng, 100, D=3, missing=0.2))
    with warnings.catch_warnings():
        warnings.simplefilter("error", VBConvergenceWarning)
        res = vb.fit(data, VBConfig(n_components=5, n_init=3, init="random", max_iter=300), rng)
    assert res.stop_reason == "tol" and res.converged
    assert len(res.restart_objectives) == 3
    assert res.state.objective == max(res.restart_objectives)
    assert res.trace[-1]["iteration"] == res.n_iter


def test_conditional_mixture_uses_plugin_parameters():
    from scipy.stats import multivariate_normal

    rng = np.random.default_rng(8)
    X = clusters(rng, 60, D=3, missing=0.3)
    X[np.isnan(X).all(axis=1), 0] = 1.0
    data = vb.prepare(X)
    cfg = VBConfig(n_components=3, max_iter=5, tol=0.0)
    truth = np.where(np.isnan(X), 0.0, X)
    with pytest.warns(em_gmm.ConvergenceWarning):  # the VB warning subclasses EM's
        res = vb.fit(data, cfg, rng, truth=truth)
    s = res.state
    assert all(np.isfinite(t["rmse"]) for t in res.trace)
    cm = vb.conditional(s, data)
    imp = cm.mean()
    obs = ~np.isnan(X)
    assert np.array_equal(imp[obs], X[obs]) and np.all(np.isfinite(imp))
    i = int(np.flatnonzero(np.isnan(X).any(axis=1))[0])
    o = np.flatnonzero(obs[i])
    w = np.array([s.weights[k] * multivariate_normal(s.means[k, o], s.covariances[k][np.ix_(o, o)]).pdf(X[i, o])
                  for k in range(3)])
    np.testing.assert_allclose(cm.weights[i], w / w.sum(), atol=1e-10)


# ----------------------------------------------------------------------------- (5) the data-scaled prior
def test_data_prior_is_nu0_times_the_sample_covariance_on_complete_data():
    """Oracle: covariance_prior='data' resolves to Psi0 = (D + 2) (numpy's biased covariance + reg_covar I)."""
    rng = np.random.default_rng(4)
    X = clusters(rng, 50, D=3)
    data = vb.prepare(X)
    reg = 1e-3
    prior = vb.resolve_prior(data, VBConfig(n_components=2, covariance_prior="data", reg_covar=reg))
    expected = 5.0 * (np.cov(X, rowvar=False, bias=True) + reg * np.eye(3))
    assert prior["nu0"] == 5.0
    np.testing.assert_allclose(prior["Psi0"], expected, rtol=1e-12)
    assert prior["logdet_Psi0"] == pytest.approx(np.linalg.slogdet(expected)[1], rel=1e-12)
    # a given nu0 keeps the plug-in prior covariance Psi0 / nu0 at the data covariance
    prior9 = vb.resolve_prior(data, VBConfig(n_components=2, covariance_prior="data", nu0=9.0, reg_covar=reg))
    np.testing.assert_allclose(prior9["Psi0"] / 9.0, expected / 5.0, rtol=1e-12)
    # the identity prior (VBConfig's default, the thesis) is unchanged: Psi0 = I, nu0 = D
    old = vb.resolve_prior(data, VBConfig(n_components=2))
    np.testing.assert_array_equal(old["Psi0"], np.eye(3))
    assert old["nu0"] == 3.0 and old["logdet_Psi0"] == 0.0


def test_data_prior_on_incomplete_data_is_the_ml_gaussian():
    """Oracle: with gaps, Sigma-hat is the ML single Gaussian (EM to convergence by GaussianMixtureImputer)."""
    from explorer.impute.gaussian_mixture import GaussianMixtureImputer

    rng = np.random.default_rng(8)
    X = clusters(rng, 80, D=3, missing=0.2)
    X = X[~np.isnan(X).all(axis=1)]
    prior = vb.resolve_prior(vb.prepare(X), VBConfig(n_components=3, covariance_prior="data", reg_covar=0.0))
    ml = GaussianMixtureImputer(n_components=1, prior=None, reg_covar=0.0, tol=1e-12, max_iter=2000).fit(X)
    np.testing.assert_allclose(prior["Psi0"] / prior["nu0"], ml.covariances_[0], rtol=1e-4, atol=1e-5)


def test_elbo_equals_normal_wishart_evidence_with_the_data_prior():
    """Oracle: K = 1 on complete data, the ELBO is the closed-form evidence under Psi0 = (D + 2) S / n."""
    rng = np.random.default_rng(6)
    n, D = 30, 3
    X = rng.normal(size=(n, D)) @ np.array([[1.0, 0.4, 0.0], [0.0, 1.0, 0.2], [0.0, 0.0, 0.5]])
    cfg = VBConfig(n_components=1, covariance_prior="data", reg_covar=0.0, beta0=1.5)
    data = vb.prepare(X)
    state = vb.step(vb.init_from_resp(data, cfg, np.ones((n, 1))), data, cfg)
    xbar = X.mean(axis=0)
    S = (X - xbar).T @ (X - xbar)
    nu0, beta0 = D + 2.0, 1.5
    Psi0 = nu0 * S / n
    betaN, nuN = beta0 + n, nu0 + n
    PsiN = Psi0 + S + beta0 * n / betaN * np.outer(xbar, xbar)
    log_evidence = (-n * D / 2 * np.log(np.pi) + D / 2 * np.log(beta0 / betaN) + nu0 / 2 * np.linalg.slogdet(Psi0)[1]
                    - nuN / 2 * np.linalg.slogdet(PsiN)[1] + multigammaln(nuN / 2, D) - multigammaln(nu0 / 2, D))
    assert state.elbo == pytest.approx(log_evidence, rel=1e-10)
    np.testing.assert_allclose(state.covariances[0], PsiN / nuN, atol=1e-12)


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10_000), rate=st.floats(0.05, 0.5), K=st.integers(1, 5))
def test_elbo_never_decreases_with_the_data_prior(seed, rate, K):
    rng = np.random.default_rng(seed)
    X = clusters(rng, 50, D=3, missing=rate)
    data = vb.prepare(X)
    cfg = VBConfig(n_components=K, covariance_prior="data", update="principled", responsibilities="augmented",
                   reg_covar=0.0, init="random")
    state = vb.step(vb.init(data, cfg, rng), data, cfg)
    elbos = [state.elbo]
    for _ in range(12):
        state = vb.step(state, data, cfg)
        elbos.append(state.elbo)
    assert np.all(np.isfinite(elbos))
    assert np.all(np.diff(elbos) >= -1e-9 * np.abs(elbos[1:]))


def test_data_prior_keeps_few_components_on_a_small_gaussian_sample():
    """Property (issue 10): 60 rows of ONE Gaussian in 6-D; the identity prior keeps most of 10 components, the
    data-scaled one nearly all the mass on a few."""
    rng = np.random.default_rng(0)
    A = np.eye(6) + 0.5 * np.triu(rng.normal(size=(6, 6)), 1)
    X = rng.normal(size=(60, 6)) @ A
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    X[rng.random(X.shape) < 0.2] = np.nan
    X[np.isnan(X).all(axis=1), 0] = 0.0
    data = vb.prepare(X)
    fits = {}
    for rule in ("identity", "data"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", VBConvergenceWarning)
            fits[rule] = vb.fit(data, VBConfig(n_components=10, covariance_prior=rule, max_iter=200),
                                np.random.default_rng(1)).state
    assert fits["identity"].n_effective >= 6
    assert fits["data"].n_effective <= 3
    assert np.max(fits["data"].weights) > 0.6


def test_bad_data_prior():
    X = clusters(np.random.default_rng(0), 30, D=3)
    with pytest.raises(BadInputError, match="covariance_prior must be one of"):
        VBConfig(covariance_prior="empirical")
    with pytest.raises(BadInputError, match="give one of them"):
        VBConfig(covariance_prior="data", W0=np.eye(3))
    with pytest.raises(BadInputError, match="resolve_prior"):
        VBConfig(covariance_prior="data").prior(3)
    with pytest.raises(BadInputError, match=r"data_covariance must be a finite \(3, 3\)"):
        VBConfig(covariance_prior="data").prior(3, data_covariance=np.eye(2))
    with pytest.raises(BadInputError, match="nu0 must be > n_features - 1"):
        vb.resolve_prior(vb.prepare(X), VBConfig(covariance_prior="data", nu0=1.0))
    X[:, 1] = 2.0  # a constant column: no data covariance without reg_covar
    with pytest.raises(BadInputError, match="not positive definite"):
        vb.init(vb.prepare(X), VBConfig(n_components=2, covariance_prior="data", reg_covar=0.0),
                np.random.default_rng(0))
