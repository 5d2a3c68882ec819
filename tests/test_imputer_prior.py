"""GaussianMixtureImputer's ``prior`` parameter (MAP-EM by default, ``prior=None`` = ML) and its
collapse warning, on the small-data case of issue 10 (25 rows, 4 columns)."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from sklearn.base import clone

from explorer.core.mixtures import em_gmm
from explorer.core.validation import BadInputError
from explorer.impute.gaussian_mixture import ComponentCollapseWarning, GaussianMixtureImputer, NIWPrior


def _small(seed=0):
    """25 rows, 4 correlated columns, 20 % MCAR (no empty rows)."""
    rng = np.random.default_rng(seed)
    X = rng.multivariate_normal(np.zeros(4), np.eye(4) * 0.5 + 0.5, size=25)
    missing = rng.random(X.shape) < 0.2
    missing[missing.all(axis=1), 0] = False
    return X, np.where(missing, np.nan, X), missing


def test_default_is_the_data_scaled_prior_and_none_is_ml():
    _, X_nan, _ = _small()
    imp = GaussianMixtureImputer(n_components=2, random_state=0).fit(X_nan)
    assert imp.prior == "auto" and isinstance(imp.prior_, NIWPrior)
    assert imp.prior_.kappa == 0.01 and imp.prior_.dof == 6.0
    assert imp.log_prior_ != 0.0
    assert imp.history_["objective"].values[-1] == pytest.approx(imp.log_likelihood_ + imp.log_prior_)
    # small data: the shrinkage was chosen on held-out entries, and the fit's config records it
    assert json.loads(imp.history_.attrs["config"])["prior"] == {"mean": None, "kappa": 0.01, "dof": None,
                                                                 "scale": None, "shrinkage": imp.shrinkage_}
    rule = GaussianMixtureImputer(n_components=2, prior_shrinkage="rule", random_state=0).fit(X_nan)
    assert json.loads(rule.history_.attrs["config"])["prior"] == "auto"
    ml = GaussianMixtureImputer(n_components=2, prior=None, random_state=0).fit(X_nan)
    res = em_gmm.fit(em_gmm.prepare(X_nan), em_gmm.EMConfig(n_components=2), np.random.default_rng(0))
    np.testing.assert_array_equal(ml.covariances_, res.state.covariances)
    assert ml.prior_ is None and ml.log_prior_ == 0.0


@pytest.mark.parametrize("K", [2, 3])
def test_small_data_components_stay_away_from_reg_covar(K):
    """Issue 10: on 25 x 4 data, ML components sat at reg_covar; with the prior none does."""
    _, X_nan, _ = _small()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ComponentCollapseWarning)
        imp = GaussianMixtureImputer(n_components=K, random_state=0).fit(X_nan)
    scale_floor = np.linalg.eigvalsh(np.array(imp.prior_.scale)).min() / (imp.prior_.dof + 25 + 4 + 2)
    assert np.linalg.eigvalsh(imp.covariances_).min() >= scale_floor > 1e3 * imp.reg_covar
    lo, hi = imp.conditional(X_nan).interval(0.95)
    assert np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))


def test_collapse_warning_reaches_the_user():
    rng = np.random.default_rng(1)
    X = np.vstack([rng.normal(size=(40, 3)), [[30.0, 30.0, 30.0], [30.5, 29.0, 31.0]]])
    for prior in (None, "auto"):
        with pytest.warns(ComponentCollapseWarning, match=r"effective size 2\) of 2 fitted to 3 feature"):
            GaussianMixtureImputer(n_components=2, prior=prior, random_state=0).fit(X)


def test_explicit_prior_is_used_and_cloned():
    _, X_nan, _ = _small()
    prior = NIWPrior(kappa=1.0, dof=10.0, scale=np.eye(4))
    imp = GaussianMixtureImputer(prior=prior, covariance_type="diag", random_state=0)
    assert clone(imp).get_params()["prior"] == prior
    imp.fit(X_nan)
    assert imp.prior_.kappa == 1.0 and imp.prior_.dof == 10.0
    np.testing.assert_array_equal(np.array(imp.prior_.scale), np.eye(4))


def test_bad_prior_parameter_is_refused_in_user_terms():
    _, X_nan, _ = _small()
    with pytest.raises(BadInputError, match="prior must be None"):
        GaussianMixtureImputer(prior="yes").fit(X_nan)
    with pytest.raises(BadInputError, match=r"expected \(4,\)"):
        GaussianMixtureImputer(prior=NIWPrior(mean=[0.0, 1.0])).fit(X_nan)
