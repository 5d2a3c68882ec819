"""Proper multiple imputation (issue 21, point 3): ``GaussianMixtureImputer(predictive="draws")``, the default.

Oracles: on complete data with one component the data-augmentation chain draws i.i.d. from the conjugate
Normal-inverse-Wishart posterior, so the draws' averages are the posterior's closed-form moments (within Monte-Carlo
error), and the pooled predictive of a missing entry is the closed-form multivariate-t posterior predictive.
Properties: imputations carry the parameters' uncertainty (the between-imputation variance of a column mean is
larger than with plug-in draws at the fit), observed entries are kept, weights sum to one, the draws are reproducible
and saved with the model. Bad input: draws without a prior, a bad number of draws, draws from a Dask fit.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats

from explorer.core.validation import BadInputError
from explorer.impute.gaussian_mixture import GaussianMixtureImputer


def _gaussian(n, D, seed):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(D, D))
    cov = A @ A.T / D + 0.3 * np.eye(D)
    return rng.multivariate_normal(rng.normal(size=D), cov, size=n), rng


def _posterior(imp, X):
    """The conjugate posterior of one component on complete rows: (m_n, kappa_n, nu_n, Lambda_n)."""
    prior = imp.prior_
    mu0, kappa, nu, lam = np.array(prior.mean), prior.kappa, prior.dof, np.array(prior.scale)
    n = X.shape[0]
    xbar = X.mean(axis=0)
    W = (X - xbar).T @ (X - xbar)
    lam_n = lam + W + kappa * n / (kappa + n) * np.outer(xbar - mu0, xbar - mu0)
    return (kappa * mu0 + n * xbar) / (kappa + n), kappa + n, nu + n, lam_n


def test_oracle_complete_data_draws_have_the_conjugate_posterior_moments():
    X, _ = _gaussian(60, 3, 0)
    M = 1000
    imp = GaussianMixtureImputer(1, reg_covar=0.0, n_posterior_draws=M, random_state=0).fit(X)
    m_n, kappa_n, nu_n, lam_n = _posterior(imp, X)
    D = X.shape[1]
    assert imp.posterior_weights_.shape == (M, 1)
    np.testing.assert_allclose(imp.posterior_weights_, 1.0, rtol=1e-12)
    means, covs = imp.posterior_means_[:, 0], imp.posterior_covariances_[:, 0]
    # E[Sigma] = Lambda_n / (nu_n - D - 1); E[mu] = m_n: within 5 Monte-Carlo standard errors (i.i.d. draws here)
    expected = lam_n / (nu_n - D - 1)
    se = covs.std(axis=0) / np.sqrt(M)
    assert np.all(np.abs(covs.mean(axis=0) - expected) < 5 * se), (covs.mean(axis=0), expected)
    assert np.all(np.abs(means.mean(axis=0) - m_n) < 5 * means.std(axis=0) / np.sqrt(M))
    # the spread of mu is Sigma / kappa_n: its covariance over the draws is E[Sigma] / kappa_n (10 %)
    np.testing.assert_allclose(np.cov(means.T), expected / kappa_n, rtol=0.1,
                               atol=0.1 * np.abs(expected).max() / kappa_n)
    # a wrong degrees of freedom (nu_n instead of nu_n - D - 1) would be off by more than the tolerance
    assert np.all(np.abs(np.diag(lam_n / nu_n) - np.diag(expected)) > 5 * np.diag(se))


def test_oracle_pooled_interval_is_the_closed_form_t_predictive():
    X, _ = _gaussian(60, 4, 1)
    imp = GaussianMixtureImputer(1, reg_covar=0.0, n_posterior_draws=1500, random_state=1).fit(X)
    m_n, kappa_n, nu_n, lam_n = _posterior(imp, X)
    D = X.shape[1]
    dof = nu_n - D + 1
    scale = lam_n * (kappa_n + 1) / (kappa_n * dof)
    row = np.array([[0.3, -1.0, 0.5, np.nan]])
    o, m = [0, 1, 2], [3]
    Soo, Smo, Smm = scale[np.ix_(o, o)], scale[np.ix_(m, o)], scale[np.ix_(m, m)]
    dev = row[0, o] - m_n[o]
    d2 = dev @ np.linalg.solve(Soo, dev)
    centre = m_n[m] + Smo @ np.linalg.solve(Soo, dev)
    c2 = (dof + d2) / (dof + 3) * (Smm - Smo @ np.linalg.solve(Soo, Smo.T))
    t = stats.t(df=dof + 3, loc=centre[0], scale=np.sqrt(c2[0, 0]))
    lo, hi = imp.conditional(row).interval(0.95)
    t_lo, t_hi = t.interval(0.95)
    assert abs((hi[0, 3] - lo[0, 3]) / (t_hi - t_lo) - 1) < 0.03
    assert abs(lo[0, 3] - t_lo) < 0.03 * (t_hi - t_lo) and abs(hi[0, 3] - t_hi) < 0.03 * (t_hi - t_lo)
    # the plug-in Gaussian at the fit is narrower than the posterior predictive (the thing the draws add)
    g_lo, g_hi = GaussianMixtureImputer(1, reg_covar=0.0, predictive="gaussian").fit(X).conditional(row).interval(0.95)
    assert (g_hi - g_lo)[0, 3] < (t_hi - t_lo) * 0.99


def _small(seed, n=30, D=6, rate=0.25):
    X, rng = _gaussian(n, D, seed)
    miss = rng.random(X.shape) < rate
    miss[miss.all(axis=1), 0] = False
    return X, np.where(miss, np.nan, X), miss


def test_property_imputations_carry_parameter_uncertainty():
    """Rubin's between-imputation variance of a column mean: larger with posterior draws than with plug-in draws."""
    X, Xn, miss = _small(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        draws = GaussianMixtureImputer(1, random_state=0).fit(Xn)
        plug = GaussianMixtureImputer(1, predictive="gaussian", random_state=0).fit(Xn)
    np.testing.assert_array_equal(draws.means_, plug.means_)
    between = {}
    for name, imp in (("draws", draws), ("plug", plug)):
        S = imp.sample(Xn, 60, random_state=5)
        obs = ~np.isnan(Xn)
        assert np.isfinite(S).all() and (S[:, obs] == Xn[obs]).all()
        between[name] = S.mean(axis=1).var(axis=0, ddof=1)  # per column, over imputations
    cols = miss.any(axis=0)
    assert np.median(between["draws"][cols] / between["plug"][cols]) > 1.3, between


def test_property_draws_are_valid_reproducible_and_saved(tmp_path):
    from explorer.persistence import load_model, save_model

    X, Xn, miss = _small(4, n=80, D=3)
    imp = GaussianMixtureImputer(2, n_posterior_draws=7, random_state=3).fit(Xn)
    assert imp.predictive_ == "draws" and imp.posterior_weights_.shape == (7, 2)
    np.testing.assert_allclose(imp.posterior_weights_.sum(axis=1), 1.0, rtol=1e-12)
    assert np.all(np.linalg.eigvalsh(imp.posterior_covariances_) > 0)
    cm = imp.conditional(Xn)
    np.testing.assert_allclose(cm.weights.sum(axis=1), 1.0, rtol=1e-12)
    again = GaussianMixtureImputer(2, n_posterior_draws=7, random_state=3).fit(Xn)
    np.testing.assert_array_equal(again.posterior_covariances_, imp.posterior_covariances_)
    # transform is the conditional mean at the fit: not moved by the draws
    t_imp = GaussianMixtureImputer(2, predictive="student_t", random_state=3).fit(Xn)
    np.testing.assert_array_equal(imp.transform(Xn), t_imp.transform(Xn))
    path = save_model(imp, tmp_path / "m.json")
    loaded = load_model(path)
    np.testing.assert_array_equal(loaded.posterior_means_, imp.posterior_means_)
    for a, b in zip(loaded.conditional(Xn).interval(0.9), cm.interval(0.9)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(loaded.transform(Xn), imp.transform(Xn))
    np.testing.assert_array_equal(loaded.sample(Xn, 3, random_state=1), imp.sample(Xn, 3, random_state=1))


def test_property_small_data_intervals_cover_near_nominal():
    """30 rows, 6 features, one component, 25 % MCAR (12 replicates): the default's 95 % intervals cover 90-99 %."""
    cover = []
    for rep in range(12):
        X, Xn, miss = _small(100 + rep)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            imp = GaussianMixtureImputer(1, random_state=rep).fit(Xn)
        lo, hi = imp.conditional(Xn).interval(0.95)
        cover.append(np.mean((X[miss] >= lo[miss]) & (X[miss] <= hi[miss])))
    assert 0.90 <= np.mean(cover) <= 0.99, np.mean(cover)


@pytest.mark.parametrize("kw, words", [
    (dict(predictive="draws", prior=None), "needs a prior"),
    (dict(predictive="draws", variant="naive"), "variant='em'"),
    (dict(n_posterior_draws=0), "n_posterior_draws"),
    (dict(n_posterior_draws=2.5), "n_posterior_draws"),
])
def test_bad_draw_settings_are_refused_before_fitting(kw, words):
    X, Xn, _ = _small(5)
    with pytest.raises(BadInputError, match=words):
        GaussianMixtureImputer(1, **kw).fit(Xn)


def test_dask_fit_refuses_draws():
    pytest.importorskip("dask")
    from explorer import dask_em

    X, Xn, _ = _small(6, n=60, D=3)
    result = dask_em.fit(Xn, n_components=1, random_state=0)
    with pytest.raises(BadInputError, match="does not keep"):
        result.to_imputer("draws")
    assert result.to_imputer("auto").predictive_ in ("student_t", "gaussian")
