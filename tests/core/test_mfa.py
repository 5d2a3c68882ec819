"""Tests of explorer.core.factor.mfa (mixtures of factor analysers / PPCA with missing data), of the mixture
conditional in explorer.core.factor.fa_conditional and of NSA-M (explorer.core.factor.mfa_neumann).

Oracles: a one-component mixture is the single factor analyser of explorer.core.factor.factor_analysis
(same start, same EM path); log-likelihoods and responsibilities against a dense-covariance Gaussian
mixture evaluated with scipy; the mixture conditional against the dense ConditionalMixture; NSA-M
against the exact per-component solves. Properties (hypothesis): the observed-data log-likelihood
never decreases, with and without missing data; the weights sum to one; observed entries are kept.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from scipy.special import logsumexp

from explorer.core.factor import factor_analysis as fa
from explorer.core.factor import mfa
from explorer.core.factor import mfa_neumann as mn
from explorer.core.factor.fa_conditional import FAParams, mixture_conditional
from explorer.core.factor.mfa import ConvergenceWarning, MFAConfig, MFAParams
from explorer.core.factor.neumann import NeumannConfig
from explorer.core.gaussians.gaussian import DegenerateCovarianceError
from explorer.core.validation import BadInputError


# ----------------------------------------------------------------------------- helpers
def random_params(rng, K, D, q, *, spread=4.0, kind="fa"):
    means = rng.normal(scale=spread, size=(K, D))
    W = rng.normal(size=(K, D, q))
    psi = rng.uniform(0.2, 0.6, size=(K, D)) if kind == "fa" else rng.uniform(0.2, 0.6, size=K)
    w = rng.dirichlet(np.full(K, 3.0))
    return MFAParams.from_arrays(w, means, W, psi)


def sample(rng, P: MFAParams, n):
    labels = rng.choice(P.n_components, size=n, p=P.weights)
    z = rng.normal(size=(n, P.n_factors))
    X = P.means[labels] + np.einsum("nkq,nq->nk", P.loadings[labels], z)
    return X + rng.normal(size=X.shape) * np.sqrt(P.psi[labels]), labels


def mcar(rng, X, p):
    miss = rng.random(X.shape) < p
    miss[miss.all(axis=1), 0] = False  # no empty rows
    miss[:, miss.all(axis=0)] = False
    Xm = X.copy()
    Xm[miss] = np.nan
    return Xm, miss


def dense_joint(P: MFAParams, Xm):
    """log pi_k + log N(x_o; mu_k,o, Sigma_k,oo) by scipy on the dense covariances, (n, K)."""
    C = P.covariances()
    out = np.zeros((Xm.shape[0], P.n_components))
    for i, x in enumerate(Xm):
        o = ~np.isnan(x)
        for k in range(P.n_components):
            out[i, k] = np.log(P.weights[k]) + stats.multivariate_normal(P.means[k, o], C[k][np.ix_(o, o)]).logpdf(x[o])
    return out


def iterate(data, config, state, n):
    states = [state]
    for _ in range(n):
        states.append(mfa.step(states[-1], data, config))
    return states


@pytest.fixture(scope="module")
def two_clusters():
    """Two well-separated factor clusters (D = 8, q = 2), 30 % MCAR."""
    rng = np.random.default_rng(11)
    P = random_params(rng, 2, 8, 2, spread=0.0)
    P = MFAParams.from_arrays([0.6, 0.4], np.stack([np.zeros(8), np.full(8, 9.0)]), P.loadings, P.psi)
    X, labels = sample(rng, P, 500)
    Xm, miss = mcar(rng, X, 0.3)
    return P, X, labels, Xm, miss


# ----------------------------------------------------------------------------- oracles
@pytest.mark.parametrize("kind", ["fa", "ppca"])
def test_one_component_mixture_is_the_single_factor_analyser(kind):
    rng = np.random.default_rng(0)
    P = random_params(rng, 1, 6, 2, kind=kind)
    X, _ = sample(rng, P, 120)
    Xm, _ = mcar(rng, X, 0.3)
    data = fa.prepare(Xm)
    s_fa = fa.init(data, fa.FAConfig(2, kind=kind), rng)
    s_mfa = mfa.init_from_parameters(data, MFAParams.from_components([1.0], [s_fa.params]))
    fa_states = [s_fa]
    for _ in range(15):
        fa_states.append(fa.step(fa_states[-1], data, fa.FAConfig(2, kind=kind)))
    mfa_states = iterate(data, MFAConfig(1, 2, kind=kind), s_mfa, 15)
    for a, b in zip(fa_states, mfa_states):
        assert b.log_likelihood == pytest.approx(a.log_likelihood, rel=1e-12)
        np.testing.assert_allclose(b.params.loadings[0], a.params.loadings, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(b.params.means[0], a.params.mean, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(b.params.psi[0], a.params.psi, rtol=1e-9)
        np.testing.assert_allclose(b.latent_mean[0], a.latent_mean, rtol=1e-9, atol=1e-12)
        assert np.all(b.log_resp == 0.0) and b.params.weights[0] == 1.0


@pytest.mark.parametrize("p", [0.0, 0.35])
def test_log_likelihood_and_responsibilities_match_a_dense_gaussian_mixture(p):
    rng = np.random.default_rng(1)
    P = random_params(rng, 3, 5, 2)
    X, _ = sample(rng, P, 40)
    Xm, _ = mcar(rng, X, p)
    joint = dense_joint(P, Xm)
    np.testing.assert_allclose(mfa.log_likelihood(P, Xm), logsumexp(joint, axis=1), rtol=1e-10)
    np.testing.assert_allclose(mfa.responsibilities(P, Xm), np.exp(joint - logsumexp(joint, axis=1, keepdims=True)),
                               atol=1e-10)
    # the state records the same value
    state = mfa.init_from_parameters(fa.prepare(Xm), P)
    assert state.log_likelihood == pytest.approx(logsumexp(joint, axis=1).sum(), rel=1e-10)
    # a row with nothing observed: log-likelihood 0, responsibilities = prior weights
    Xe = Xm.copy()
    Xe[0] = np.nan
    assert mfa.log_likelihood(P, Xe)[0] == 0.0
    np.testing.assert_allclose(mfa.responsibilities(P, Xe)[0], P.weights, rtol=1e-12)


def test_responsibilities_have_the_corrected_sign():
    """A point at a component's mean belongs to that component (the printed sign would invert this)."""
    rng = np.random.default_rng(2)
    P = random_params(rng, 2, 6, 1, spread=6.0)
    X = P.means.copy()
    X[:, 3:] = np.nan  # only the first half visible
    r = mfa.responsibilities(P, X)
    assert r[0, 0] > 0.99 and r[1, 1] > 0.99
    enc = mn.encode_exact(P, X)
    np.testing.assert_allclose(enc.resp, r, atol=1e-12)


def test_mixture_conditional_matches_the_dense_conditional_mixture():
    rng = np.random.default_rng(3)
    P = random_params(rng, 2, 6, 2, spread=2.0)
    X, _ = sample(rng, P, 60)
    Xm, _ = mcar(rng, X, 0.4)
    Xm[1] = np.nan  # an empty row: the marginal mixture
    c = mfa.conditional(P, Xm)
    cm = c.to_mixture()
    np.testing.assert_allclose(c.resp, cm.weights, atol=1e-10)
    np.testing.assert_allclose(c.mean(), cm.mean(), atol=1e-10)
    np.testing.assert_allclose(c.variance(), cm.variance(), atol=1e-10)
    np.testing.assert_allclose(c.logpdf(X), cm.logpdf(X), atol=1e-8)
    lo, hi = c.interval(0.8)
    clo, chi = cm.interval(0.8)
    np.testing.assert_allclose(lo, clo, atol=1e-7)
    np.testing.assert_allclose(hi, chi, atol=1e-7)
    obs = ~np.isnan(Xm)
    assert np.array_equal(c.mean()[obs], Xm[obs]) and np.all(np.isfinite(c.mean()))
    draws = c.sample(3000, np.random.default_rng(4))
    assert np.array_equal(draws[:, obs], np.broadcast_to(Xm[obs], (3000, obs.sum())))
    m = ~obs
    se = np.sqrt(c.variance()[m] / 3000)
    assert np.all(np.abs(draws.mean(axis=0)[m] - c.mean()[m]) < 5 * se + 1e-12)
    np.testing.assert_allclose(draws.var(axis=0)[m], c.variance()[m], rtol=0.2)


# ----------------------------------------------------------------------------- properties
@settings(max_examples=20, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    K=st.integers(1, 3),
    D=st.integers(3, 6),
    p=st.sampled_from([0.0, 0.2, 0.4]),
    kind=st.sampled_from(["fa", "ppca"]),
    init=st.sampled_from(["kmeans", "random"]),
    update=st.sampled_from(["px", "em"]),
)
def test_observed_log_likelihood_never_decreases(seed, K, D, p, kind, init, update):
    rng = np.random.default_rng(seed)
    q = int(rng.integers(1, D))
    P = random_params(rng, K, D, max(1, q - 1), spread=3.0)
    X, _ = sample(rng, P, 30 + 10 * K)
    Xm, _ = mcar(rng, X, p)
    data = mfa.prepare(Xm)
    config = MFAConfig(K, q, kind=kind, init=init, update=update)
    states = iterate(data, config, mfa.init(data, config, rng), 10)
    lls = np.array([s.log_likelihood for s in states])
    assert np.all(np.isfinite(lls))
    assert np.all(np.diff(lls) >= -1e-9 * np.abs(lls[:-1]) - 1e-9)
    for s in states[:: len(states) - 1]:
        assert s.params.weights.sum() == pytest.approx(1.0, abs=1e-12)
        np.testing.assert_allclose(s.resp.sum(axis=1), 1.0, atol=1e-12)
        assert s.log_likelihood == pytest.approx(mfa.log_likelihood(s, Xm).sum(), rel=1e-9, abs=1e-9)
        if kind == "ppca":
            assert np.all(np.ptp(s.params.psi, axis=1) == 0.0)
    out = mfa.conditional(states[-1], Xm).mean()
    obs = ~np.isnan(Xm)
    assert np.array_equal(out[obs], Xm[obs]) and np.all(np.isfinite(out))


def test_recovers_two_well_separated_factor_clusters(two_clusters):
    P, X, labels, Xm, _ = two_clusters
    data = mfa.prepare(Xm)
    res = mfa.fit(data, MFAConfig(2, 2, tol=1e-6, max_iter=300), np.random.default_rng(5))
    assert res.stop_reason == "tol"
    r = res.state.resp
    assign = r.argmax(axis=1)
    flip = (assign == labels).mean() < 0.5
    assert max((assign == labels).mean(), (assign != labels).mean()) > 0.99
    Q = res.state.params
    order = [1, 0] if flip else [0, 1]
    np.testing.assert_allclose(Q.weights[order], P.weights, atol=0.05)
    np.testing.assert_allclose(Q.means[order], P.means, atol=0.4)
    # confident responsibilities, and the fit beats the k-means start
    assert np.median(r.max(axis=1)) > 0.999
    assert res.state.log_likelihood > res.trace[0]["log_likelihood"]
    # the imputation beats the column means on the missing entries
    miss = np.isnan(Xm)
    err = ((mfa.conditional(res, Xm).mean() - X)[miss] ** 2).mean()
    assert err < 0.5 * ((np.nanmean(Xm, axis=0) - X)[miss] ** 2).mean()


def test_states_are_immutable_and_step_is_pure(two_clusters):
    _, _, _, Xm, _ = two_clusters
    data = mfa.prepare(Xm[:80])
    config = MFAConfig(2, 1)
    s0 = mfa.init(data, config, np.random.default_rng(6))
    before = s0.params.loadings.copy()
    s1 = mfa.step(s0, data, config)
    assert s1.iteration == 1 and np.array_equal(s0.params.loadings, before)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s0.iteration = 2
    for a in (s0.params.loadings, s0.params.weights, s0.log_resp, s0.latent_mean, s0.latent_cov,
              s0.params.components[0].psi):
        with pytest.raises(ValueError):
            a.flat[0] = 1.0


def test_fit_stop_reasons_trace_and_callback(two_clusters):
    _, _, _, Xm, _ = two_clusters
    data = mfa.prepare(Xm[:150])
    rng = np.random.default_rng(7)
    with pytest.warns(ConvergenceWarning):
        res = mfa.fit(data, MFAConfig(2, 1, tol=0.0, max_iter=3), rng)
    assert res.stop_reason == "max_iter" and res.n_iter == 3 and len(res.trace) == 4
    seen = []
    res = mfa.fit(data, MFAConfig(2, 1, tol=1e-4), rng, callback=seen.append)
    assert res.converged and len(seen) == res.n_iter
    assert [t["iteration"] for t in res.trace] == list(range(res.n_iter + 1))
    np.testing.assert_allclose([t["weights"].sum() for t in res.trace], 1.0)


def test_a_component_that_loses_every_row_is_degenerate_without_reg_and_survives_with_it():
    rng = np.random.default_rng(8)
    X = rng.normal(size=(60, 4))
    data = mfa.prepare(X)
    far = mfa.init(data, MFAConfig(2, 1), rng).params
    P = MFAParams.from_arrays([0.5, 0.5], [far.means[0], np.full(4, 1e4)], far.loadings, far.psi)
    s0 = mfa.init_from_parameters(data, P)
    assert s0.resp[:, 1].max() == 0.0
    with pytest.raises(DegenerateCovarianceError):
        mfa.step(s0, data, MFAConfig(2, 1))
    s1 = mfa.step(s0, data, MFAConfig(2, 1, reg=1e-6))
    assert s1.params.weights[1] == 0.0 and np.isfinite(s1.log_likelihood)


# ----------------------------------------------------------------------------- NSA-M
def masks(D, side, rng):
    """Random pixels, one quarter, the top half of side x side images."""
    img = np.zeros((side, side), dtype=bool)
    quarter, half = img.copy(), img.copy()
    quarter[: side // 2, side // 2 :] = True
    half[: side // 2] = True
    return {"random": rng.random(D) < 0.5, "quarter": quarter.ravel(), "half": half.ravel()}


@pytest.fixture(scope="module")
def image_mixture():
    rng = np.random.default_rng(9)
    side, q = 6, 4
    D = side * side
    P = random_params(rng, 2, D, q, spread=1.5)
    X, labels = sample(rng, P, 90)
    return P, X, labels, masks(D, side, rng)


@pytest.mark.parametrize("mask", ["random", "quarter", "half"])
def test_nsa_m_converges_to_the_exact_mixture_encoding(image_mixture, mask):
    P, X, _, M = image_mixture
    Xm = X.copy()
    Xm[:, M[mask]] = np.nan
    exact = mn.encode_exact(P, Xm)
    problem = mn.prepare(P, Xm)
    assert np.all(problem.rho < 1.0)
    enc = mn.fit(problem, NeumannConfig(4000))
    np.testing.assert_allclose(enc.latent, exact.latent, atol=1e-8)
    np.testing.assert_allclose(enc.resp, exact.resp, atol=1e-8)
    np.testing.assert_allclose(enc.imputation(), exact.imputation(), atol=1e-8)
    # the exact mixture encoding is the conditional mean of the mixture conditional
    np.testing.assert_allclose(exact.imputation(), mfa.conditional(P, Xm).mean(), atol=1e-10)
    np.testing.assert_allclose(exact.resp, mfa.responsibilities(P, Xm), atol=1e-12)
    # early terms respect every component's a-priori bound
    for l in (0, 3, 30):
        early = mn.fit(problem, NeumannConfig(l))
        for k, p in enumerate(problem.components):
            err = np.linalg.norm(early.latent[k] - exact.latent[k], axis=1)
            assert np.all(err <= p.bound(l) * (1 + 1e-9) + 1e-12)


def test_nsa_m_steps_are_terms_and_fit_matches(image_mixture):
    P, X, _, M = image_mixture
    Xm = X.copy()
    Xm[:, M["quarter"]] = np.nan
    problem = mn.prepare(P, Xm)
    state = mn.init(problem)
    for _ in range(7):
        state = mn.step(state, problem)
    seen = []
    a = mn.encoding(problem, state)
    b = mn.fit(problem, NeumannConfig(7))
    c = mn.fit(problem, NeumannConfig(7), callback=seen.append)
    assert a.n_terms == b.n_terms == c.n_terms == 7 and [s.n_terms for s in seen] == list(range(1, 8))
    np.testing.assert_allclose(a.latent, b.latent, atol=1e-14)
    np.testing.assert_allclose(c.resp, b.resp, atol=1e-14)
    # per-component scales are each component's own s_k
    np.testing.assert_allclose(problem.scales, [np.linalg.eigvalsh(np.eye(4) + W.T @ (W / psi[:, None]))[-1] + 1e-6
                                                for W, psi in zip(P.loadings, P.psi)])


def test_oracle_and_weighted_imputations(image_mixture):
    P, X, _, M = image_mixture
    Xm = X.copy()
    Xm[:, M["half"]] = np.nan
    enc = mn.fit(mn.prepare(P, Xm), NeumannConfig(50))
    miss = np.isnan(Xm)
    R = enc.reconstructions()
    errs = ((R - X) ** 2 * miss).sum(axis=2)  # (K, n)
    imp, chosen = enc.oracle_impute(X)
    assert np.array_equal(chosen, errs.argmin(axis=0))
    assert np.array_equal(imp[~miss], Xm[~miss])
    np.testing.assert_allclose(((imp - X) ** 2 * miss).sum(axis=1), errs.min(axis=0))
    _, chosen_all = enc.oracle_impute(X, pixels="all")
    assert np.array_equal(chosen_all, ((R - X) ** 2).sum(axis=2).argmin(axis=0))
    weighted = enc.imputation()
    assert np.array_equal(weighted[~miss], Xm[~miss]) and np.all(np.isfinite(weighted))
    np.testing.assert_allclose(enc.imputation(keep_observed=False), np.einsum("nk,knd->nd", enc.resp, R))
    per = enc.component_imputations()
    assert per.shape == (2,) + X.shape and np.array_equal(per[:, ~miss], np.broadcast_to(Xm[~miss], (2, (~miss).sum())))
    with pytest.raises(BadInputError, match="oracle needs the complete rows"):
        enc.oracle_impute(Xm)
    with pytest.raises(BadInputError, match="pixels must be one of"):
        enc.oracle_impute(X, pixels="visible")


def test_halves_mask_shifts_responsibilities_but_clusters_stay_recoverable(image_mixture):
    P, X, labels, M = image_mixture
    full = mfa.responsibilities(P, X).argmax(axis=1)
    Xm = X.copy()
    Xm[:, M["half"]] = np.nan
    r_half = mn.encode_exact(P, Xm).resp
    assert (full == labels).mean() > 0.95
    assert (r_half.argmax(axis=1) == labels).mean() > 0.7
    assert np.mean(np.abs(r_half - mfa.responsibilities(P, X))) > 0  # masking changes the beliefs


# ----------------------------------------------------------------------------- bad input
def test_bad_input():
    rng = np.random.default_rng(10)
    X = rng.normal(size=(6, 4))
    data = mfa.prepare(X)
    with pytest.raises(BadInputError, match="n_components=7 exceeds the number of rows"):
        mfa.init(data, MFAConfig(7, 1), rng)
    with pytest.raises(BadInputError, match="smaller than the number of features"):
        mfa.init(data, MFAConfig(2, 4), rng)
    with pytest.raises(BadInputError, match="n_components must be a positive integer"):
        MFAConfig(0, 1)
    with pytest.raises(BadInputError, match="kind must be one of"):
        MFAConfig(2, 1, kind="pca")
    with pytest.raises(BadInputError, match="init must be one of"):
        MFAConfig(2, 1, init="pca")
    with pytest.raises(BadInputError, match="reg must be"):
        MFAConfig(2, 1, reg=-1.0)
    with pytest.raises(BadInputError, match="rng must be"):
        mfa.init(data, MFAConfig(2, 1), 0)
    bad = X.copy()
    bad[:, 1] = np.nan
    with pytest.raises(BadInputError, match="column 1.*no observed value"):
        mfa.prepare(bad)
    bad = X.copy()
    bad[2, 3] = np.inf
    with pytest.raises(BadInputError, match="infinite"):
        mfa.prepare(bad)
    with pytest.raises(BadInputError, match="must be 2-D"):
        mfa.prepare(X[:, 0])
    P = random_params(rng, 2, 4, 1)
    with pytest.raises(BadInputError, match="3 column"):
        mfa.log_likelihood(P, X[:, :3])
    with pytest.raises(BadInputError, match="sum to one"):
        MFAParams.from_arrays([0.5, 0.6], P.means, P.loadings, P.psi)
    with pytest.raises(BadInputError, match="psi has shape"):
        MFAParams.from_arrays(P.weights, P.means, P.loadings, P.psi[:, :2])
    with pytest.raises(BadInputError, match="psi must be positive"):
        MFAParams.from_arrays(P.weights, P.means, P.loadings, -P.psi)
    with pytest.raises(BadInputError, match="Expected MFAParams"):
        mfa.conditional(P.components[0], X)
    with pytest.raises(BadInputError, match="weights must be"):
        mixture_conditional(P.components, [1.0], X)
    with pytest.raises(BadInputError, match="config must be a NeumannConfig"):
        mn.fit(mn.prepare(P, X), 10)
    with pytest.raises(BadInputError, match="config must be an MFAConfig"):
        mfa.fit(data, {"n_components": 2}, rng)


def test_ppca_params_accept_one_variance_per_component():
    rng = np.random.default_rng(12)
    P = random_params(rng, 3, 5, 2, kind="ppca")
    assert P.psi.shape == (3, 5) and np.all(np.ptp(P.psi, axis=1) == 0)
    assert isinstance(P.components[1], FAParams)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_allclose(P.covariances()[1], P.components[1].covariance())


@pytest.mark.parametrize("kind", ["fa", "ppca"])
def test_px_em_puts_each_mean_at_its_weighted_sample_mean_and_beats_plain_em(two_clusters, kind):
    """Complete data: after a PX-EM step mu_k is the responsibility-weighted mean of the rows (the
    fixed-point condition that plain EM only approaches at rate lambda / (lambda + sigma^2))."""
    P, X, _, _, _ = two_clusters
    data = mfa.prepare(X)
    px, em = MFAConfig(2, 2, kind=kind, update="px"), MFAConfig(2, 2, kind=kind, update="em")
    shifted = MFAParams.from_arrays(P.weights, P.means + 1.5, P.loadings, P.psi)  # every mean off by 1.5
    start = mfa.init_from_parameters(data, shifted)
    nxt = mfa.step(start, data, px)
    resp = start.resp
    for k in range(2):
        np.testing.assert_allclose(nxt.params.means[k], resp[:, k] @ X / resp[:, k].sum(), atol=1e-9)
        assert np.abs(mfa.step(start, data, em).params.means[k] - resp[:, k] @ X / resp[:, k].sum()).max() > 1e-2
    s_px, s_em = start, start
    for _ in range(15):
        s_px, s_em = mfa.step(s_px, data, px), mfa.step(s_em, data, em)
    assert s_px.log_likelihood >= s_em.log_likelihood - 1e-9
