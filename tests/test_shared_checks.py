"""The shared checks of issue 21's review: check_dirichlet (both MAP-EM mixtures) and the feature-name helpers."""

import numpy as np
import pandas as pd
import pytest
from sklearn.base import BaseEstimator

from explorer.baselines import MeanModeImputer, PMMImputer
from explorer.core.discrete.categorical_mixture import CategoricalConfig
from explorer.core.mixtures.location_model import LocationConfig
from explorer.core.validation import BadInputError, check_dirichlet
from explorer.utils.inputs import check_feature_names, feature_names_out


@pytest.mark.parametrize("value", [0.5, np.nan, np.inf, True, "2", None])
def test_check_dirichlet_refuses(value):
    with pytest.raises(BadInputError, match="a must be a finite number >= 1"):
        check_dirichlet("a", value)


def test_check_dirichlet_accepts_and_both_configs_use_it():
    assert check_dirichlet("a", np.int64(2)) == 2.0
    with pytest.raises(BadInputError, match=r"alpha must be a finite number >= 1 \(the MAP-EM update"):
        LocationConfig(alpha=0.5)
    with pytest.raises(BadInputError, match=r"phi must be a finite number >= 1 \(the MAP-EM updates 4.1.13"):
        CategoricalConfig(phi=0.9)


class _Est(BaseEstimator):
    def fit(self, X, y=None):  # check_is_fitted wants an estimator
        return self


def test_check_feature_names_reset_and_check():
    est = _Est()
    names = np.asarray(["a", "b"], dtype=object)
    check_feature_names(est, names, 2, reset=True)
    assert est.n_features_in_ == 2 and list(est.feature_names_in_) == ["a", "b"]
    check_feature_names(est, names, 2)
    check_feature_names(est, None, 2)  # an array after a frame: no names to compare
    with pytest.raises(BadInputError, match=r"X has columns \['b', 'a'\] but _Est was fitted on \['a', 'b'\]"):
        check_feature_names(est, names[::-1].copy())
    with pytest.raises(BadInputError, match="X has 3 features, but _Est is expecting 2 features"):
        check_feature_names(est, None, 3)
    assert list(feature_names_out(est)) == ["a", "b"]
    with pytest.raises(BadInputError, match="input_features do not match"):
        feature_names_out(est, ["a", "c"])
    check_feature_names(est, None, 3, reset=True)
    assert not hasattr(est, "feature_names_in_")
    assert list(feature_names_out(est)) == ["x0", "x1", "x2"]


@pytest.mark.parametrize("cls", [PMMImputer, MeanModeImputer])
def test_baselines_use_the_helper(cls):
    X = pd.DataFrame({"a": [1.0, np.nan, 3.0, 4.0, 2.0], "b": [2.0, 1.0, np.nan, 0.5, 1.5]})
    est = cls().fit(X) if cls is MeanModeImputer else cls(random_state=0).fit(X)
    assert list(est.get_feature_names_out()) == ["a", "b"]
    with pytest.raises(BadInputError, match=f"but {cls.__name__} was fitted on"):
        est.transform(X.rename(columns={"a": "c"}))
