"""Numbers never turn into NaN: extreme finite values either work or raise a clear error.

* values beyond ±1e100 are refused, in fit and in every method taking X, naming the value, row and
  column (the models square values; 1e300 used to give NaN imputations and scores, or numpy's
  "Probabilities contain NaN" / "Eigenvalues did not converge" in fit);
* values inside that range but far from a model fitted on tiny-scale data hit the final guard:
  a BadInputError naming the row and its distance in standard deviations, never a NaN;
* a numerical breakdown inside a fit is said in terms of the data;
* a column whose variance is near the variance floor (reg_covar / min_psi) gives a ScaleWarning;
* property: data over many magnitudes (1e-6 .. 1e100) fit and impute with finite results and
  observed entries returned bit for bit.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import clone

from explorer.core.factor import factor_analysis
from explorer.core.validation import BadInputError
from explorer.impute.base import ScaleWarning
from explorer.impute.dp_mixture import DPGMMImputer
from explorer.impute.factor import FactorAnalysisImputer
from explorer.impute.gaussian_mixture import GaussianMixtureImputer
from tests._estimators import ESTIMATORS, IDS


def _data(seed=0, n=100):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)) @ np.array([[1.0, 0.5, 0.2], [0.0, 1.0, 0.3], [0.0, 0.0, 1.0]])
    X[rng.random(X.shape) < 0.15] = np.nan
    X[np.isnan(X).all(axis=1), 0] = 0.1
    return X


@pytest.fixture(scope="module")
def fitted():
    X = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return {type(e).__name__: clone(e).fit(X) for e in ESTIMATORS}


@pytest.mark.parametrize("name", IDS)
@pytest.mark.parametrize("row", [[1e300, np.nan, 0.5], [-1e300, 1e300, np.nan], [1e150, np.nan, np.nan]],
                         ids=["1e300", "pm1e300", "1e150"])
def test_extreme_values_after_an_ordinary_fit_raise_a_clear_error(fitted, name, row):
    imp = fitted[name]
    value = f"{row[0]:.6g}".replace("+", r"\+")
    msg = rf"value\(s\) beyond ±1e\+100, e.g. {value} in row 0 of column 0.*sentinel code or a unit error"
    for call in (lambda: imp.transform([row]), lambda: imp.score_samples([row]),
                 lambda: imp.sample([row], 2, random_state=0), lambda: imp.conditional([row]),
                 lambda: imp.score([row])):
        with pytest.raises(BadInputError, match=msg):
            call()


def test_regress_refuses_extreme_values(fitted):
    with pytest.raises(BadInputError, match=r"beyond ±1e\+100"):
        fitted["GaussianMixtureImputer"].regress([[1e300]], inputs=[0], targets=[1])


@pytest.mark.parametrize("name", IDS)
def test_large_but_allowed_values_give_finite_results(fitted, name):
    imp = fitted[name]
    row = np.array([[1e60, np.nan, 0.5], [-3e99, np.nan, np.nan]])
    out = imp.transform(row)
    assert np.isfinite(out).all() and out[0, 0] == 1e60 and out[1, 0] == -3e99
    score = imp.score_samples(row)
    assert np.isfinite(score).all() and (score < -1e100).all()  # very unlikely, still a number


@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
@pytest.mark.parametrize("scale", [1e300, 1e200, 1e150, -1e120])
def test_fitting_data_beyond_the_limit_says_what_is_wrong(est, scale):
    """It used to be numpy's 'Probabilities contain NaN', LinAlgError or 'means contain NaN or inf'."""
    X = _data() * scale
    with pytest.raises(BadInputError, match=r"X has \d+ value\(s\) beyond ±1e\+100.*rescale the column"):
        clone(est).fit(X)


@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_fitting_large_scale_data_works(est):
    """1e50 x the data: finite, observed bit for bit, and the same fit up to the scale (to 1e-5 relative)."""
    X = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        ref = clone(est).fit(X).transform(X)
        imp = clone(est).fit(X * 1e50)
    out = imp.transform(X * 1e50)
    obs = ~np.isnan(X)
    assert np.isfinite(out).all() and np.isfinite(imp.score_samples(X * 1e50)).all()
    np.testing.assert_array_equal(out[obs], (X * 1e50)[obs])
    np.testing.assert_allclose(out / 1e50, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())


def test_final_guard_names_the_row_instead_of_returning_nan():
    """A model fitted on 1e-60-scale data with no regularisation: 1e99 is 1e159 sd away, its square overflows."""
    imp = GaussianMixtureImputer(reg_covar=1e-200, prior=None, random_state=0).fit(_data() * 1e-60)
    row = [[1.0, 2.0, 3.0], [1e99, np.nan, 0.0]]
    msg = (r"the fitted model gives no finite result for 1 row\(s\) \(rows 1\).*Row 1: column 0 = 1e\+99 lies "
           r"[0-9.]+e\+15\d standard deviations")
    for method in ("transform", "score_samples"):
        with pytest.raises(BadInputError, match=f"{method}: {msg}"):
            getattr(imp, method)(row)
    try:  # sampling draws the component another way and may succeed; it never returns NaN
        draws = imp.sample(row, 2, random_state=0)
    except BadInputError as exc:
        assert "sample: the fitted model gives no finite result" in str(exc)
    else:
        assert np.isfinite(draws).all()
    assert np.isfinite(imp.transform(row[:1])).all()  # the ordinary row alone is fine


def test_numerical_breakdown_in_fit_is_said_in_terms_of_the_data(monkeypatch):
    def broken(*args, **kwargs):
        raise np.linalg.LinAlgError("Eigenvalues did not converge")

    monkeypatch.setattr(factor_analysis, "fit", broken)
    X = _data()
    X[:, 2] *= 1e40
    imp = FactorAnalysisImputer(random_state=0)
    with pytest.raises(BadInputError, match=r"FactorAnalysisImputer: the EM fit broke down numerically \(LinAlgError: "
                                            r"Eigenvalues did not converge\).*reach [0-9.]+e\+40 in column 2.*Rescale"):
        imp.fit(X)
    assert not hasattr(imp, "mean_")


@pytest.mark.parametrize("est, floor", [(ESTIMATORS[0], "reg_covar"), (ESTIMATORS[2], "min_psi"),
                                        (ESTIMATORS[3], "min_psi")], ids=["gmm", "fa", "mfa"])
def test_tiny_scale_warns_about_the_variance_floor(est, floor):
    X = _data()
    X[:, 1] *= 1e-5  # variance ~1e-10, far below the floor 1e-6
    with pytest.warns(ScaleWarning, match=rf"column 1 has observed variance [0-9.e-]+, within 100 times {floor}=1e-06"):
        clone(est).fit(X)


def test_no_scale_warning_on_ordinary_or_standardised_fits():
    X = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ScaleWarning)
        GaussianMixtureImputer(random_state=0).fit(X)
        Xs = X.copy()
        Xs[:, 1] *= 1e-5
        DPGMMImputer(n_components=3, max_iter=10, random_state=0).fit(Xs)  # standardises: reg_covar is relative


def _fit_or_clear_error(est, X):
    """The fitted estimator, or None after a BadInputError that tells the user to rescale / standardise."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        try:
            return est.fit(X)
        except BadInputError as exc:
            assert "standardise" in str(exc), str(exc)
            return None


@settings(max_examples=15, deadline=None)
@given(exponent=st.integers(-3, 99), seed=st.integers(0, 2**16), which=st.sampled_from([0, 1, 2, 3]))
def test_property_any_common_magnitude_works(exponent, seed, which):
    """All columns at 10^e (e in [-3, 99]): fit, transform, sample and score are finite; observed entries unchanged."""
    X = _data(seed, n=60) * 10.0**exponent
    imp = _fit_or_clear_error(clone(ESTIMATORS[which]), X)
    assert imp is not None
    _check_outputs(imp, X, seed)


@settings(max_examples=15, deadline=None)
@given(exponents=st.lists(st.integers(-6, 99), min_size=3, max_size=3), seed=st.integers(0, 2**16),
       which=st.sampled_from([0, 1, 2, 3]))
def test_property_mixed_magnitudes_work_or_say_rescale(exponents, seed, which):
    """Columns at different 10^e: either finite results with observed entries unchanged, or a clear error
    saying to standardise (columns 1e8 apart make a covariance singular in floating point; no internal scaling)."""
    X = _data(seed, n=60) * 10.0 ** np.array(exponents)
    imp = _fit_or_clear_error(clone(ESTIMATORS[which]), X)
    if imp is not None:
        try:  # DPGMMImputer fits standardised data; its covariances in data units may be singular to use
            _check_outputs(imp, X, seed)
        except BadInputError as exc:
            assert "standardise" in str(exc), str(exc)


def _check_outputs(imp, X, seed):
    out = imp.transform(X)
    obs = ~np.isnan(X)
    assert np.isfinite(out).all()
    np.testing.assert_array_equal(out[obs], X[obs])
    draws = imp.sample(X, 2, random_state=seed)
    assert np.isfinite(draws).all() and all(np.array_equal(d[obs], X[obs]) for d in draws)
    assert np.isfinite(imp.score_samples(X)).all()
