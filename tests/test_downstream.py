"""evaluate_downstream (issue 21, point 6): does better imputation help a regressor trained on the imputations?

Oracles: at rate 0 every imputer scores what the regressor scores on the complete data, and a one-Gaussian mixture
used as the regressor on complete data is ordinary least squares. Property: the table's numbers are scikit-learn's
metrics of predictions recomputed from the documented protocol. Bad inputs fail before any fit.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.base import BaseEstimator, TransformerMixin, clone
from sklearn.impute import KNNImputer, SimpleImputer
from sklearn.linear_model import LinearRegression
from sklearn.metrics import mean_squared_error, r2_score

from explorer import GaussianMixtureImputer
from explorer.core.validation import BadInputError
from explorer.evaluation import DOWNSTREAM_METRICS, ITSELF, evaluate, evaluate_downstream, hide_observed, summarize


def _gaussian(n=240, seed=0):
    """Inputs from a correlated Gaussian and a linear target with noise."""
    rng = np.random.default_rng(seed)
    cov = np.array([[1.0, 0.6, 0.3], [0.6, 1.0, 0.5], [0.3, 0.5, 1.0]])
    X = rng.multivariate_normal([1.0, -2.0, 0.5], cov, size=n)
    y = 3.0 + X @ np.array([1.5, -1.0, 0.7]) + 0.5 * rng.normal(size=n)
    return X, y


def _split(seed, n, n_test):
    """The documented split: the test rows are the first n_test of default_rng(seed).permutation(n)."""
    order = np.random.default_rng(int(seed)).permutation(n)
    return np.sort(order[n_test:]), np.sort(order[:n_test])


def _value(table, imputer, metric, estimator=None, rate=None, repeat=0):
    sel = (table["imputer"] == imputer) & (table["metric"] == metric) & (table["repeat"] == repeat)
    if estimator is not None:
        sel &= table["estimator"] == estimator
    if rate is not None:
        sel &= table["rate"] == rate
    values = table.loc[sel, "value"].to_numpy()
    assert len(values) == 1, (imputer, metric, estimator, rate, len(values))
    return float(values[0])


# --------------------------------------------------------------------------- oracles
def test_rate_zero_every_imputer_scores_the_complete_data_regression():
    X, y = _gaussian()
    imputers = {"gmm": GaussianMixtureImputer(n_components=1, random_state=0), "mean": SimpleImputer(),
                "knn": KNNImputer()}
    table = evaluate_downstream(imputers, X, y, estimator=LinearRegression(), rates=[0.0], n_repeats=2,
                                random_state=3, test_size=0.25, as_regressor=None)
    assert set(table["estimator"]) == {"LinearRegression"}
    assert (table["realised_rate"] == 0).all()
    n_test = int(round(0.25 * len(y)))
    for r in range(2):
        seed = int(table.loc[table["repeat"] == r, "seed"].iloc[0])
        train, test = _split(seed, len(y), n_test)
        pred = LinearRegression().fit(X[train], y[train]).predict(X[test])
        direct = float(np.mean((y[test] - pred) ** 2))
        assert direct < 0.5 * np.var(y[test])  # the regression has something to predict: a real check
        for name in imputers:
            assert _value(table, name, "mse", repeat=r) == pytest.approx(direct, rel=1e-9, abs=1e-12), name


def test_one_gaussian_as_the_regressor_is_least_squares():
    """On complete data, E[y | x] of a one-component maximum-likelihood fit of (x, y) is the OLS prediction."""
    X, y = _gaussian(n=300, seed=1)
    gmm = GaussianMixtureImputer(n_components=1, prior=None, reg_covar=1e-12, tol=1e-10, random_state=0)
    table = evaluate_downstream({"gmm": gmm}, X, y, estimator=LinearRegression(), rates=[0.0], n_repeats=1,
                                random_state=5, test_size=100)
    seed = int(table["seed"].iloc[0])
    train, test = _split(seed, len(y), 100)
    ols = LinearRegression().fit(X[train], y[train]).predict(X[test])
    want = mean_squared_error(y[test], ols)
    got = _value(table, "gmm", "mse", estimator=ITSELF)
    assert got == pytest.approx(want, rel=1e-6)
    # a wrong answer fails: the mean of the train targets, or OLS without the intercept, is far off
    assert mean_squared_error(y[test], np.full(len(test), y[train].mean())) > 5 * want
    no_intercept = LinearRegression(fit_intercept=False).fit(X[train], y[train]).predict(X[test])
    assert mean_squared_error(y[test], no_intercept) > 1.5 * want


# --------------------------------------------------------------------------- property
def test_table_is_sklearn_metrics_of_recomputed_predictions():
    X, y = _gaussian(n=200, seed=2)
    X[np.random.default_rng(9).random(X.shape) < 0.05] = np.nan  # real gaps too
    imputers = {"gmm": GaussianMixtureImputer(n_components=2, random_state=0), "mean": SimpleImputer()}
    table = evaluate_downstream(imputers, X, y, estimator={"ols": LinearRegression()}, rates=[0.0, 0.3],
                                n_repeats=2, random_state=1, test_size=0.4)
    assert list(table.columns) == ["imputer", "estimator", "repeat", "seed", "mechanism", "rate", "realised_rate",
                                   "n_train", "n_test", "fit_seconds", "metric", "value"]
    assert len(table) == 2 * 2 * (2 + 1) * len(DOWNSTREAM_METRICS)  # repeats x rates x (imputers + gmm itself)
    n_test = int(round(0.4 * len(y)))
    for r in range(2):
        seed = int(table.loc[table["repeat"] == r, "seed"].iloc[0])
        train, test = _split(seed, len(y), n_test)
        for rate in (0.0, 0.3):
            X_hidden = X.copy() if rate == 0 else hide_observed(X, "mcar", rate, seed)[0]
            if rate:
                realised = table.loc[(table["rate"] == rate) & (table["repeat"] == r), "realised_rate"].iloc[0]
                assert realised == pytest.approx(0.3, abs=0.05)
            for name, imp in imputers.items():
                fit = clone(imp).fit(X_hidden[train])
                pred = LinearRegression().fit(fit.transform(X_hidden[train]), y[train]).predict(
                    fit.transform(X_hidden[test]))
                mse = mean_squared_error(y[test], pred)
                assert _value(table, name, "mse", "ols", rate, r) == pytest.approx(mse, rel=1e-9)
                assert _value(table, name, "nmse", "ols", rate, r) == pytest.approx(mse / np.var(y[train]), rel=1e-9)
                assert _value(table, name, "r2", "ols", rate, r) == pytest.approx(r2_score(y[test], pred), rel=1e-9)
            joint = clone(imputers["gmm"]).fit(np.column_stack([X_hidden[train], y[train]]))
            query = np.column_stack([X_hidden[test], np.full(len(test), np.nan)])
            pred = joint.transform(query)[:, -1]
            assert _value(table, "gmm", "mse", ITSELF, rate, r) == pytest.approx(
                mean_squared_error(y[test], pred), rel=1e-9)
    # more hidden inputs cannot help the mean-imputed regression much; here it clearly hurts
    assert _value(table, "mean", "mse", "ols", 0.3) > _value(table, "mean", "mse", "ols", 0.0)


class _Spy(BaseEstimator, TransformerMixin):
    """A mean imputer / regressor that records what it is given (in a class-level log, clones share it)."""

    log: list = []

    def fit(self, X, y=None):
        type(self).log.append(("fit", np.array(X, dtype=float), None if y is None else np.array(y, dtype=float)))
        self.mean_ = np.nanmean(np.asarray(X, dtype=float), axis=0)
        self.y_ = None if y is None else float(np.mean(y))
        return self

    def transform(self, X):
        X = np.asarray(X, dtype=float)
        return np.where(np.isnan(X), self.mean_, X)

    def predict(self, X):
        type(self).log.append(("predict", np.array(X, dtype=float), None))
        return np.full(len(X), self.y_)


def test_target_never_hidden_and_the_regressor_sees_filled_rows():
    X, y = _gaussian(n=100, seed=3)
    _Spy.log = []
    table = evaluate_downstream({"spy": _Spy()}, X, y, estimator={"reg": _Spy()}, rates=[0.5], n_repeats=1,
                                random_state=0, test_size=0.3)
    seed = int(table["seed"].iloc[0])
    train, test = _split(seed, len(y), 30)
    fits = [e for e in _Spy.log if e[0] == "fit"]
    imputer_fit, reg_fit = fits
    realised = float(table["realised_rate"].iloc[0])  # below 0.5: a row the mask would empty keeps its cells
    assert 0.35 < realised < 0.5
    assert imputer_fit[2] is None and np.isnan(imputer_fit[1]).mean() == pytest.approx(realised, abs=0.06)
    np.testing.assert_array_equal(reg_fit[2], y[train])  # the target, complete, of the train rows
    assert not np.isnan(reg_fit[1]).any()
    predicted = [e for e in _Spy.log if e[0] == "predict"][0][1]
    assert predicted.shape == (30, 3) and not np.isnan(predicted).any()
    # a constant predictor: mse is the spread of the test targets around the train mean
    assert _value(table, "spy", "mse") == pytest.approx(np.mean((y[test] - y[train].mean()) ** 2), rel=1e-12)
    assert ITSELF not in set(table["estimator"])  # no conditional: not a regressor by default


def test_evaluate_with_downstream_is_evaluate_downstream_and_summarize_groups_by_rate():
    X, y = _gaussian(n=120, seed=4)
    via_evaluate = evaluate(SimpleImputer(), X, downstream=LinearRegression(), y=y, rate=0.25, n_repeats=2,
                            random_state=7)
    direct = evaluate_downstream(SimpleImputer(), X, y, estimator=LinearRegression(), rates=[0.25], n_repeats=2,
                                 random_state=7)
    pd.testing.assert_frame_equal(via_evaluate.drop(columns="fit_seconds"), direct.drop(columns="fit_seconds"))
    two = evaluate(SimpleImputer(), X, downstream=LinearRegression(), y=y, rate=[0.0, 0.25], n_repeats=2)
    summary = summarize(two)
    assert summary.index.names == ["rate", "estimator", "imputer", "metric"]
    assert (summary["n"] == 2).all() and len(summary) == 2 * len(DOWNSTREAM_METRICS)
    one = two[(two["rate"] == 0.25) & (two["metric"] == "mse")]["value"]
    assert summary.loc[(0.25, "LinearRegression", "SimpleImputer", "mse"), "mean"] == pytest.approx(one.mean())
    # without downstream, evaluate is unchanged: its own table
    plain = evaluate(SimpleImputer(), X, rate=0.25, n_repeats=1)
    assert "estimator" not in plain.columns and set(plain["metric"]) == {"nrmse", "mae", "coverage", "nll"}


# --------------------------------------------------------------------------- bad inputs, before any fit
class _NeverFit(SimpleImputer):
    def fit(self, X, y=None):
        raise AssertionError("fitted before the inputs were checked")


@pytest.mark.parametrize("change, message", [
    (dict(y=np.zeros(50)), "y has 50 values but X has 60 rows"),
    (dict(y=np.r_[np.nan, np.zeros(59)]), "1 missing or infinite"),
    (dict(y=np.array(["a"] * 60)), "y must be numeric"),
    (dict(estimator=SimpleImputer()), "has no fit(X, y) and predict(X)"),
    (dict(estimator=object()), "has no fit(X, y) and predict(X)"),
    (dict(rates=[0.2, 1.0]), "every rate must be a number in [0, 1)"),
    (dict(rates=[-0.1]), "every rate must be a number in [0, 1)"),
    (dict(rates=[]), "at least one missing rate"),
    (dict(test_size=1.5), "test_size must be"),
    (dict(test_size=59), "leaves 59 test and 1 train rows"),
    (dict(n_repeats=0), "n_repeats must be a positive integer"),
    (dict(as_regressor=["nope"]), "as_regressor names ['nope']"),
])
def test_bad_inputs_fail_fast(change, message):
    X, y = _gaussian(n=60, seed=5)
    kwargs = dict(y=y, estimator=LinearRegression(), rates=[0.2], n_repeats=1)
    kwargs.update(change)
    with pytest.raises(BadInputError) as err:
        evaluate_downstream({"never": _NeverFit()}, X, kwargs.pop("y"), **kwargs)
    assert message in str(err.value)


def test_text_columns_point_to_encoding():
    frame = pd.DataFrame({"sex": ["M", "F", "I"] * 20, "length": np.linspace(0.1, 0.7, 60)})
    with pytest.raises(BadInputError, match=r"encode_categoricals") as err:
        evaluate_downstream(_NeverFit(), frame, np.arange(60.0), estimator=LinearRegression(), n_repeats=1)
    assert "'sex'" in str(err.value)


def test_evaluate_downstream_needs_both_regressor_and_target():
    X, y = _gaussian(n=60, seed=6)
    with pytest.raises(BadInputError, match="needs both the regressor and the target"):
        evaluate(_NeverFit(), X, downstream=LinearRegression())
    with pytest.raises(BadInputError, match="needs both the regressor and the target"):
        evaluate(_NeverFit(), X, y=y)
