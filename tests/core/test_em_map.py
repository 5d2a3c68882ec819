"""Tests of MAP-EM (``EMConfig.prior``) in explorer.core.mixtures.em_gmm and of the collapse warning.

Oracles: the closed-form Normal-inverse-Wishart posterior mode of one component on complete data
(Fraley & Raftery 2007, Table 2, VVV; the inverse-gamma mode per coordinate for "diag"), computed
here independently from the formula; scipy's normalised densities (``multivariate_normal``,
``invwishart``, ``invgamma``) for the log prior. Properties (hypothesis): the log-posterior never
decreases along MAP-EM steps on random data and missingness, for "full" and "diag".
"""

from __future__ import annotations

import json
import warnings
from dataclasses import asdict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import invgamma, invwishart, multivariate_normal, norm

from explorer.core.gaussians.gaussian import DegenerateCovarianceError
from explorer.core.mixtures import em_gmm
from explorer.core.mixtures.em_gmm import ComponentCollapseWarning, EMConfig, NIWPrior
from explorer.core.validation import BadInputError


def _random_prior(rng, D, covariance_type):
    A = rng.normal(size=(D, D))
    scale = A @ A.T + D * np.eye(D)
    if covariance_type == "diag":
        scale = np.diag(scale)
    return NIWPrior(mean=rng.normal(size=D), kappa=float(rng.uniform(0.01, 3.0)), dof=float(D + rng.uniform(0.5, 6)),
                    scale=scale)


def niw_mode_one_component(X, prior, covariance_type):
    """Closed-form posterior mode of (mu, Sigma) of a normal with a NIW prior (complete data).

    mu = (n xbar + kappa mu0) / (n + kappa);
    Sigma = (Lambda + S + n kappa / (n + kappa) (xbar - mu0)(xbar - mu0)^T) / (nu + n + D + 2),
    S the scatter about xbar (F&R 2007, Table 2, VVV). For "diag", per coordinate with D = 1.
    """
    n, D = X.shape
    mu0, kappa, nu = np.array(prior.mean), prior.kappa, prior.dof
    xbar = X.mean(axis=0)
    S = (X - xbar).T @ (X - xbar)
    dev = xbar - mu0
    mean = (n * xbar + kappa * mu0) / (n + kappa)
    if covariance_type == "full":
        cov = (np.array(prior.scale) + S + n * kappa / (n + kappa) * np.outer(dev, dev)) / (nu + n + D + 2)
    else:
        lam = np.array(prior.scale)
        lam = np.diag(lam) if lam.ndim == 2 else lam
        cov = (lam + np.diag(S) + n * kappa / (n + kappa) * dev**2) / (nu + n + 3)
    return mean, cov


# ----------------------------------------------------------------------------- oracle: closed form
@pytest.mark.parametrize("covariance_type", ["full", "diag"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_one_component_complete_data_is_the_closed_form_posterior_mode(covariance_type, seed):
    rng = np.random.default_rng(seed)
    D = 1 + seed * 2
    X = rng.normal(size=(12 + 5 * seed, D)) @ rng.normal(size=(D, D)) + 3.0
    prior = _random_prior(rng, D, covariance_type)
    config = EMConfig(n_components=1, covariance_type=covariance_type, reg_covar=0.0, prior=prior, tol=1e-14)
    res = em_gmm.fit(em_gmm.prepare(X), config, np.random.default_rng(0))
    mean, cov = niw_mode_one_component(X, prior, covariance_type)
    np.testing.assert_allclose(res.state.means[0], mean, atol=1e-10, rtol=0)
    np.testing.assert_allclose(res.state.covariances[0], cov, atol=1e-10, rtol=0)
    # the ML fit is a different point (the prior matters here)
    ml = em_gmm.fit(em_gmm.prepare(X), EMConfig(covariance_type=covariance_type, reg_covar=0.0), np.random.default_rng(0))
    assert np.abs(ml.state.covariances[0] - cov).max() > 1e-3


@pytest.mark.parametrize("covariance_type", ["full", "diag"])
def test_auto_prior_mode_is_the_data_covariance_and_fraley_raftery_keeps_their_scale(covariance_type):
    rng = np.random.default_rng(4)
    X = rng.normal(size=(40, 3)) @ np.array([[1.0, 0.3, 0.0], [0.0, 2.0, 0.5], [0.0, 0.0, 0.7]])
    K, D, reg = 2, 3, 1e-6
    data = em_gmm.prepare(X)
    spec = em_gmm.resolve_prior(data, EMConfig(n_components=K, covariance_type=covariance_type, prior="auto"))
    S = np.cov(X.T, bias=True) + reg * np.eye(D)
    np.testing.assert_allclose(spec.mean, X.mean(axis=0), atol=1e-12)
    # the default ("auto") scale puts the prior's covariance mode at S shrunk towards its diagonal by D / (N + D),
    # over K^(2/D) (issue 21; the diagonal prior reads only the diagonal, which the shrinkage keeps) ...
    divisor = (D + 2) + (D + 2 if covariance_type == "full" else 3)
    assert em_gmm.prior_mode_divisor(D + 2, D, covariance_type) == divisor
    lam = D / (40 + D) if covariance_type == "full" else 0.0
    shrunk = (1 - lam) * S + lam * np.diag(np.diag(S))
    np.testing.assert_allclose(np.array(spec.scale), divisor * shrunk / K ** (2 / D), atol=1e-12)
    assert spec.kappa == 0.01 and spec.dof == D + 2
    # ... and prior="fraley-raftery" keeps F&R's priorControl scale S / K^(2/D) itself
    fr = em_gmm.resolve_prior(data, EMConfig(n_components=K, covariance_type=covariance_type,
                                             prior="fraley-raftery"))
    np.testing.assert_allclose(np.array(fr.scale), S / K ** (2 / D), atol=1e-12)
    assert fr.dof == spec.dof and fr.kappa == spec.kappa
    json.dumps(asdict(EMConfig(prior=spec)))  # the resolved prior is JSON-serialisable (history attrs)
    # fields given explicitly are kept, the others defaulted
    part = em_gmm.resolve_prior(data, EMConfig(n_components=K, prior=NIWPrior(kappa=2.0, dof=9)))
    assert part.kappa == 2.0 and part.dof == 9.0
    np.testing.assert_allclose(part.mean, X.mean(axis=0), atol=1e-12)


def test_auto_prior_on_incomplete_data_uses_the_one_component_ml_fit():
    rng = np.random.default_rng(5)
    X = rng.multivariate_normal([1.0, -2.0, 0.5], [[2.0, 0.8, 0.2], [0.8, 1.0, 0.3], [0.2, 0.3, 0.5]], size=200)
    missing = rng.random(X.shape) < 0.25
    missing[missing.all(axis=1), 0] = False
    data = em_gmm.prepare(np.where(missing, np.nan, X))
    one = em_gmm.fit(data, EMConfig(tol=1e-12, max_iter=2000), np.random.default_rng(0))
    spec = em_gmm.resolve_prior(data, EMConfig(n_components=3, prior="auto"))
    # data_moments stops when no parameter moves by 1e-6 of the covariance's size (at most em_gmm.MOMENT_STEPS = 30 steps)
    C = one.state.covariances[0]
    lam = 3 / (200 + 3)  # the covariance mode shrunk towards its diagonal by D / (N + D) (issue 21)
    expected = (5 + 5) * ((1 - lam) * C + lam * np.diag(np.diag(C))) / 3 ** (2 / 3)
    np.testing.assert_allclose(spec.mean, one.state.means[0], atol=1e-5)
    np.testing.assert_allclose(np.array(spec.scale), expected, atol=1e-5 * np.abs(expected).max())


def test_auto_prior_for_diagonal_covariances_on_incomplete_data_uses_the_column_moments(monkeypatch):
    """Issue 22: a diagonal prior reads only the diagonal, so its moments are each column's observed mean and
    variance (the ML diagonal Gaussian) in one pass, with no EM step."""
    rng = np.random.default_rng(7)
    X = rng.multivariate_normal([1.0, -2.0, 0.5], [[2.0, 0.8, 0.2], [0.8, 1.0, 0.3], [0.2, 0.3, 0.5]], size=200)
    missing = rng.random(X.shape) < 0.3
    missing[missing.all(axis=1), 0] = False
    Xm = np.where(missing, np.nan, X)
    data = em_gmm.prepare(Xm)

    def no_step(*args, **kwargs):
        raise AssertionError("the diagonal prior's moments ran an EM step")

    monkeypatch.setattr(em_gmm, "step", no_step)
    spec = em_gmm.resolve_prior(data, EMConfig(n_components=2, covariance_type="diag", prior="auto", reg_covar=0.0))
    divisor = em_gmm.prior_mode_divisor(spec.dof, 3, "diag")
    np.testing.assert_allclose(spec.mean, np.nanmean(Xm, axis=0), rtol=1e-12)
    np.testing.assert_allclose(np.diag(spec.scale), divisor * np.nanvar(Xm, axis=0) / 2 ** (2 / 3), rtol=1e-12)


@pytest.mark.parametrize("covariance_type", ["full", "diag"])
def test_log_prior_matches_scipy_densities(covariance_type):
    rng = np.random.default_rng(6)
    D, K = 3, 2
    prior = _random_prior(rng, D, covariance_type)
    data = em_gmm.prepare(rng.normal(size=(20, D)))
    resolved = em_gmm.resolved_prior(data, EMConfig(n_components=K, covariance_type=covariance_type, prior=prior))
    means = rng.normal(size=(K, D))
    if covariance_type == "full":
        A = rng.normal(size=(K, D, D))
        covs = A @ np.swapaxes(A, 1, 2) + np.eye(D)
        expected = sum(
            multivariate_normal(prior.mean, covs[k] / prior.kappa).logpdf(means[k])
            + invwishart(df=prior.dof, scale=np.array(prior.scale)).logpdf(covs[k])
            for k in range(K)
        )
    else:
        covs = rng.uniform(0.3, 3.0, size=(K, D))
        lam = np.array(prior.scale)
        expected = np.sum(norm(prior.mean, np.sqrt(covs / prior.kappa)).logpdf(means)
                          + invgamma(prior.dof / 2, scale=lam / 2).logpdf(covs))
    assert em_gmm.log_prior(means, covs, resolved) == pytest.approx(expected, rel=1e-12, abs=1e-10)
    assert em_gmm.log_prior(means, covs, None) == 0.0


# ----------------------------------------------------------------------------- property: monotone MAP-EM
@st.composite
def map_problems(draw):
    seed = draw(st.integers(0, 2**32 - 1))
    D = draw(st.integers(1, 5))
    K = draw(st.integers(1, 4))
    covariance_type = draw(st.sampled_from(["full", "diag"]))
    n = draw(st.integers(max(8, 2 * K), 4 * K * D + 30))  # small data: components may empty out
    rate = draw(st.floats(0.0, 0.6))
    kappa = draw(st.sampled_from([0.01, 1.0]))
    return seed, n, D, K, covariance_type, rate, kappa


@settings(max_examples=60, deadline=None)
@given(map_problems())
def test_map_em_steps_never_decrease_the_log_posterior(problem):
    seed, n, D, K, covariance_type, rate, kappa = problem
    rng = np.random.default_rng(seed)
    centers = rng.normal(scale=3.0, size=(K, D))
    X = centers[rng.integers(K, size=n)] + rng.normal(size=(n, D)) * rng.uniform(0.2, 2.0, size=D)
    missing = rng.random((n, D)) < rate
    missing[missing.all(axis=1), rng.integers(D)] = False  # no empty rows
    for j in range(D):
        if missing[:, j].sum() > n - 2:
            missing[:2, j] = False
    data = em_gmm.prepare(np.where(missing, np.nan, X))
    # with reg_covar = 0 the MAP M-step is the exact maximiser, so monotonicity is a theorem;
    # the prior keeps every covariance positive definite, so no run may stop on a collapse
    config = EMConfig(n_components=K, covariance_type=covariance_type, reg_covar=0.0, init="random",
                      prior=NIWPrior(kappa=kappa, scale=np.var(X, axis=0) + 0.1))
    states = [em_gmm.init(data, config, rng)]
    for _ in range(15):
        states.append(em_gmm.step(states[-1], data, config))
    obj = np.array([s.objective for s in states])
    assert np.all(np.diff(obj) >= -1e-9 * np.abs(obj[:-1]) - 1e-12), obj
    for s in states:
        assert s.objective == pytest.approx(s.log_likelihood + s.log_prior, rel=1e-12)
        assert np.isfinite(s.objective) and s.log_prior != 0.0
        assert np.linalg.eigvalsh(s.full_covariances()).min() > 0


def test_prior_prevents_the_collapse_that_ml_raises_on():
    """Three points repeated: ML without a ridge collapses; MAP-EM fits, every covariance above the floor."""
    X = np.repeat(np.array([[0.0, 0.0], [5.0, 0.0], [0.0, 5.0]]), 5, axis=0)
    with pytest.raises(DegenerateCovarianceError):
        em_gmm.fit(em_gmm.prepare(X), EMConfig(n_components=3, reg_covar=0.0), np.random.default_rng(0))
    res = em_gmm.fit(em_gmm.prepare(X), EMConfig(n_components=3, reg_covar=0.0, prior="auto"),
                     np.random.default_rng(0))
    assert res.stop_reason == "tol"
    floor = np.linalg.eigvalsh(np.array(res.state.prior.spec.scale)).min() / (res.state.prior.dof + 15 + 2 + 2)
    assert np.linalg.eigvalsh(res.state.covariances).min() >= floor * (1 - 1e-12)


def test_default_config_is_maximum_likelihood_unchanged():
    rng = np.random.default_rng(8)
    X = rng.normal(size=(60, 3))
    X[rng.random(X.shape) < 0.2] = np.nan
    X[np.isnan(X).all(axis=1), 0] = 0.0
    data = em_gmm.prepare(X)
    assert EMConfig().prior is None
    res = em_gmm.fit(data, EMConfig(n_components=2), np.random.default_rng(0))
    assert res.state.prior is None and res.state.log_prior == 0.0
    assert res.state.objective == res.state.log_likelihood


# ----------------------------------------------------------------------------- collapse warning
@pytest.mark.parametrize("prior", [None, "auto"])
def test_collapse_warning_names_the_small_component(prior):
    rng = np.random.default_rng(9)
    X = np.vstack([rng.normal(size=(40, 3)), [[30.0, 30.0, 30.0], [30.5, 29.0, 31.0]]])  # 2 far rows, D = 3
    start_means = np.array([[0.0, 0.0, 0.0], [30.0, 30.0, 30.0]])
    config = EMConfig(n_components=2, prior=prior)
    data = em_gmm.prepare(X)
    state = em_gmm.init_from_parameters(data, config, [0.5, 0.5], start_means, np.stack([np.eye(3)] * 2))
    with pytest.warns(ComponentCollapseWarning, match=r"component 1 \(effective size 2\) of 2 fitted to 3 feature"):
        res = em_gmm.fit(data, config, np.random.default_rng(0), init_state=state)
    assert em_gmm.collapsed_components(res.state, data, config).tolist() == [1]
    np.testing.assert_allclose(em_gmm.effective_sizes(res.state, data, config), [40, 2], atol=1e-6)


def test_no_collapse_warning_on_well_supported_components():
    rng = np.random.default_rng(10)
    X = np.vstack([rng.normal(size=(50, 2)), rng.normal(size=(50, 2)) + 8])
    with warnings.catch_warnings():
        warnings.simplefilter("error", ComponentCollapseWarning)
        for prior in (None, "auto"):
            em_gmm.fit(em_gmm.prepare(X), EMConfig(n_components=2, prior=prior), np.random.default_rng(0))


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("kwargs, match", [
    (dict(kappa=0.0), "kappa must be a positive number"),
    (dict(kappa="x"), "kappa must be a positive number"),
    (dict(dof=-1.0), "dof must be a positive number"),
    (dict(mean=[np.nan, 1.0]), "mean must be a finite"),
    (dict(scale=np.ones((2, 2, 2))), "scale must be a finite"),
])
def test_bad_prior_fields_are_refused(kwargs, match):
    with pytest.raises(BadInputError, match=match):
        NIWPrior(**kwargs)


def test_bad_prior_for_the_data_is_refused():
    data = em_gmm.prepare(np.random.default_rng(0).normal(size=(10, 3)))
    with pytest.raises(BadInputError, match="prior must be None"):
        EMConfig(prior="flat")
    with pytest.raises(BadInputError, match=r"expected \(3,\)"):
        em_gmm.resolve_prior(data, EMConfig(prior=NIWPrior(mean=[0.0, 0.0])))
    with pytest.raises(BadInputError, match="larger than D - 1 = 2"):
        em_gmm.resolve_prior(data, EMConfig(prior=NIWPrior(dof=1.5)))
    with pytest.raises(BadInputError, match="symmetric"):
        em_gmm.resolve_prior(data, EMConfig(prior=NIWPrior(scale=[[1.0, 0.5, 0], [0, 1, 0], [0, 0, 1]])))
    constant = np.column_stack([np.ones(10), np.arange(10.0)])
    with pytest.raises(BadInputError, match=r"column\(s\) \[0\] have zero variance"):
        em_gmm.fit(em_gmm.prepare(constant), EMConfig(reg_covar=0.0, prior="auto"), np.random.default_rng(0))


def test_one_component_with_a_prior_starts_at_the_ml_moments_and_reaches_the_same_optimum():
    """K = 1, full, incomplete data, a prior: init is the (cached) ML Gaussian of data_moments; the fit from there
    ends at the same MAP as the fit from the mean-filled scatter (init="random" keeps the old start for K = 1)."""
    rng = np.random.default_rng(8)
    A = rng.normal(size=(6, 6))
    X = rng.multivariate_normal(np.arange(6.0), A @ A.T + np.eye(6), size=120)
    Xm = np.where(rng.random(X.shape) < 0.4, np.nan, X)
    Xm[np.isnan(Xm).all(axis=1), 0] = 0.0
    data = em_gmm.prepare(Xm)
    config = EMConfig(n_components=1, prior="auto", tol=1e-12, max_iter=2000)
    start = em_gmm.init(data, config, np.random.default_rng(0))
    mean, cov = em_gmm.data_moments(data, config)
    np.testing.assert_array_equal(start.means[0], mean)
    np.testing.assert_array_equal(start.covariances[0], cov)
    new = em_gmm.fit(data, config, np.random.default_rng(0))
    old = em_gmm.fit(em_gmm.prepare(Xm), EMConfig(n_components=1, prior="auto", tol=1e-12, max_iter=2000,
                                                   init="random"), np.random.default_rng(0))
    assert not np.allclose(old.trace[0]["means"], new.trace[0]["means"])  # two different starts
    np.testing.assert_allclose(new.state.covariances, old.state.covariances, rtol=1e-4, atol=1e-6)  # EM creeps
    assert new.state.objective == pytest.approx(old.state.objective, rel=1e-10)
    assert new.n_iter < old.n_iter
