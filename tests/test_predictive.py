"""The Student-t posterior predictive of MAP-EM fits (GaussianMixtureImputer(predictive=...)).

Oracle: on complete data with one component, the predictive equals the conjugate closed form built
from the sufficient statistics (Murphy 2007, eq. 258), and the conditional density of a missing entry
is scipy's univariate t with the textbook conditional of a multivariate t. Property: observed entries
unchanged, no NaN, intervals calibrated better than the plug-in Gaussians on small data. Bad input:
unknown values and a t predictive without a prior or with diagonal covariances are refused.
"""

import warnings

import numpy as np
import pytest
from scipy import stats

from explorer.core.gaussians.conditional import ConditionalMixture
from explorer.core.gaussians.conditional_t import StudentTConditionalMixture
from explorer.core.mixtures import em_gmm
from explorer.core.validation import BadInputError
from explorer.impute.gaussian_mixture import GaussianMixtureImputer


def _gaussian(n, D, seed):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(D, D))
    cov = A @ A.T / D + 0.3 * np.eye(D)
    return rng.multivariate_normal(rng.normal(size=D), cov, size=n), rng


def test_oracle_one_component_predictive_is_the_conjugate_closed_form():
    X, _ = _gaussian(60, 4, 0)
    n, D = X.shape
    imp = GaussianMixtureImputer(1, reg_covar=0.0, predictive="student_t", random_state=0).fit(X)
    prior = imp.prior_
    mu0, kappa, nu, lam = np.array(prior.mean), prior.kappa, prior.dof, np.array(prior.scale)
    xbar = X.mean(axis=0)
    W = (X - xbar).T @ (X - xbar)
    lam_n = lam + W + kappa * n / (kappa + n) * np.outer(xbar - mu0, xbar - mu0)
    kappa_n, nu_n = kappa + n, nu + n
    dof = nu_n - D + 1
    scale = lam_n * (kappa_n + 1) / (kappa_n * dof)
    loc, S, v = em_gmm.posterior_predictive(imp.means_, imp.covariances_, imp.component_sizes_, prior, 0.0)
    np.testing.assert_allclose(loc[0], (kappa * mu0 + n * xbar) / kappa_n, rtol=1e-10)
    np.testing.assert_allclose(S[0], scale, rtol=1e-9)
    assert v[0] == pytest.approx(dof, rel=1e-12)

    # the conditional of x_3 given x_0..x_2 for a new row: scipy's t with the multivariate-t conditional
    row = np.array([[0.3, -1.0, 0.5, np.nan]])
    truth = np.array([[0.3, -1.0, 0.5, 0.7]])
    cond = imp.conditional(row)
    assert isinstance(cond, StudentTConditionalMixture)
    o, m = [0, 1, 2], [3]
    Soo, Smo, Smm = scale[np.ix_(o, o)], scale[np.ix_(m, o)], scale[np.ix_(m, m)]
    dev = row[0, o] - loc[0, o]
    d2 = dev @ np.linalg.solve(Soo, dev)
    centre = loc[0, m] + Smo @ np.linalg.solve(Soo, dev)
    c2 = (dof + d2) / (dof + 3) * (Smm - Smo @ np.linalg.solve(Soo, Smo.T))
    t = stats.t(df=dof + 3, loc=centre[0], scale=np.sqrt(c2[0, 0]))
    assert cond.logpdf(truth)[0] == pytest.approx(t.logpdf(0.7), rel=1e-9)
    lo, hi = cond.interval(0.9)
    assert (lo[0, 3], hi[0, 3]) == pytest.approx(t.interval(0.9), rel=1e-7)
    assert imp.transform(row)[0, 3] == pytest.approx(centre[0], rel=1e-10)


@pytest.mark.parametrize("K", [1, 3])
def test_property_observed_unchanged_no_nan_and_wider_than_plug_in(K):
    X, rng = _gaussian(40, 5, 1)
    Xn = np.where(rng.random(X.shape) < 0.25, np.nan, X)
    Xn[np.isnan(Xn).all(axis=1), 0] = X[np.isnan(Xn).all(axis=1), 0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t_imp = GaussianMixtureImputer(K, predictive="student_t", random_state=0).fit(Xn)
        g_imp = GaussianMixtureImputer(K, predictive="gaussian", random_state=0).fit(Xn)
    assert t_imp.predictive_ == "student_t" and g_imp.predictive_ == "gaussian"
    np.testing.assert_array_equal(t_imp.means_, g_imp.means_)  # same fit, another predictive
    assert t_imp.component_sizes_.sum() == pytest.approx(Xn.shape[0], rel=1e-8)
    obs = ~np.isnan(Xn)
    out = t_imp.transform(Xn)
    assert np.isfinite(out).all() and out[obs].tobytes() == Xn[obs].tobytes()
    draws = t_imp.sample(Xn, 4, random_state=0)
    assert np.isfinite(draws).all() and (draws[:, obs] == Xn[obs]).all()
    lo_t, hi_t = t_imp.conditional(Xn).interval(0.95)
    lo_g, hi_g = g_imp.conditional(Xn).interval(0.95)
    miss = ~obs
    assert np.isfinite(lo_t).all() and np.isfinite(hi_t).all()
    assert np.median((hi_t - lo_t)[miss] / (hi_g - lo_g)[miss]) > 1.05


def test_property_t_intervals_cover_better_than_plug_in_on_small_data():
    """30 rows, 6 features, K = 2 on Gaussian data (20 replicates): measured 0.84 (t) vs 0.73 (Gaussian)."""
    cover = {"student_t": [], "gaussian": []}
    for rep in range(20):
        X, rng = _gaussian(30, 6, 100 + rep)
        miss = rng.random(X.shape) < 0.2
        miss[miss.all(axis=1), 0] = False
        Xn = np.where(miss, np.nan, X)
        for kind in cover:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                imp = GaussianMixtureImputer(2, predictive=kind, random_state=rep).fit(Xn)
            lo, hi = imp.conditional(Xn).interval(0.95)
            cover[kind].append(np.mean((X[miss] >= lo[miss]) & (X[miss] <= hi[miss])))
    t, g = np.mean(cover["student_t"]), np.mean(cover["gaussian"])
    assert t > g + 0.05 and t > 0.78, (t, g)


def test_ml_fits_and_ablations_keep_plug_in_gaussians_diag_gets_posterior_draws():
    X, rng = _gaussian(50, 3, 2)
    Xn = np.where(rng.random(X.shape) < 0.2, np.nan, X)
    Xn[np.isnan(Xn).all(axis=1), 0] = 0.0
    for kw in (dict(prior=None), dict(variant="naive")):  # no posterior to draw from / not EM
        imp = GaussianMixtureImputer(2, random_state=0, **kw).fit(Xn)
        assert imp.predictive_ == "gaussian" and isinstance(imp.conditional(Xn), ConditionalMixture)
        assert imp.conditional(Xn).n_components == 2 and not hasattr(imp, "posterior_means_")
    imp = GaussianMixtureImputer(2, covariance_type="diag", n_posterior_draws=5, random_state=0).fit(Xn)
    assert imp.predictive_ == "draws" and imp.posterior_covariances_.shape == (5, 2, 3)
    assert imp.conditional(Xn).n_components == 10


@pytest.mark.parametrize("kw, words", [
    (dict(predictive="t"), "predictive must be one of"),
    (dict(predictive="student_t", prior=None), "needs a prior"),
    (dict(predictive="student_t", covariance_type="diag"), "covariance_type='full'"),
])
def test_bad_predictive_settings_are_refused(kw, words):
    X, _ = _gaussian(20, 3, 3)
    with pytest.raises(BadInputError, match=words):
        GaussianMixtureImputer(**kw).fit(X)


def test_posterior_predictive_needs_a_resolved_prior():
    with pytest.raises(BadInputError, match="maximum-likelihood"):
        em_gmm.posterior_predictive(np.zeros((1, 2)), np.eye(2)[None], np.array([5.0]), None)
