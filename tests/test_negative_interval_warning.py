"""Issue 21, point 4: an interval of a column whose observed values are all positive never reaches below zero
without a warning (``NegativeIntervalWarning``), whichever predictive the mixture imputers use."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from explorer import DPGMMImputer, GaussianMixtureImputer
from explorer.core.gaussians.conditional import NegativeIntervalWarning


def _skewed(seed=0, n=120):
    """Column 0 positive and right-skewed (log-normal, many values near 0), column 1 centred (takes both signs)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, 2)) @ np.array([[1.0, 0.6], [0.0, 0.8]])
    X = np.column_stack([np.exp(1.2 * z[:, 0]), z[:, 1]])
    miss = rng.random(X.shape) < 0.25
    miss[miss.all(axis=1), 1] = False
    return X, np.where(miss, np.nan, X)


@pytest.mark.parametrize("make", [
    lambda: GaussianMixtureImputer(1, random_state=0),  # posterior draws (the default)
    lambda: GaussianMixtureImputer(1, predictive="student_t", random_state=0),
    lambda: GaussianMixtureImputer(1, predictive="gaussian", random_state=0),
    lambda: DPGMMImputer(n_components=3, random_state=0),
])
def test_positive_column_crossing_zero_warns_by_name(make):
    X, Xn = _skewed()
    imp = make().fit(Xn)
    assert imp.positive_columns_.tolist() == [True, False]
    with pytest.warns(NegativeIntervalWarning, match="column 0") as caught:
        lo, hi = imp.conditional(Xn).interval(0.95)
    assert (lo[np.isnan(Xn[:, 0]), 0] < 0).any()  # the warning is about a real crossing
    assert not any("column 1" in str(w.message) for w in caught)  # column 1 takes negative values: no warning
    obs = ~np.isnan(Xn)
    assert lo[obs].tobytes() == Xn[obs].tobytes()  # observed entries untouched


def test_no_warning_when_intervals_stay_positive():
    rng = np.random.default_rng(1)
    X = rng.normal(loc=[50.0, 10.0], scale=[2.0, 1.0], size=(100, 2))  # far from zero
    Xn = np.where(rng.random(X.shape) < 0.2, np.nan, X)
    Xn[np.isnan(Xn).all(axis=1), 0] = 50.0
    imp = GaussianMixtureImputer(1, random_state=0).fit(Xn)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NegativeIntervalWarning)
        lo, _ = imp.conditional(Xn).interval(0.95)
    assert (lo[np.isnan(Xn)] > 0).all()


def test_positive_columns_are_saved_with_the_model(tmp_path):
    from explorer.persistence import load_model, save_model

    _, Xn = _skewed(2)
    imp = GaussianMixtureImputer(1, predictive="gaussian", random_state=0).fit(Xn)
    loaded = load_model(save_model(imp, tmp_path / "m.json"))
    np.testing.assert_array_equal(loaded.positive_columns_, imp.positive_columns_)
    with pytest.warns(NegativeIntervalWarning):
        loaded.conditional(Xn).interval(0.9)
