"""Every imputer takes IncompleteData, DataFrames and 2-D DataArrays and gives back the kind it was given.

* numpy in -> numpy out (unchanged behaviour);
* DataFrame -> DataFrame with the same index and columns; ``sample`` -> a long DataFrame with a
  MultiIndex ``(imputation, <index>)``;
* DataArray (row, col) -> DataArray with the same dims / coords / name / attrs; ``sample`` -> dims
  ("imputation", row, col);
* IncompleteData (what ``from_csv`` returns) -> IncompleteData with no missing entry; ``sample`` ->
  DataArray ("imputation", "sample", "feature").

Every kind gives exactly the numbers of the numpy path, observed entries bit for bit, and no NaN.
Non-numeric DataFrame columns are a clear error naming them; ``encode_categoricals`` one-hot encodes
or drops them.
"""

from __future__ import annotations

import io
import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from sklearn.base import clone

from explorer.core.data import IncompleteData
from explorer.core.validation import BadInputError, NonNumericError
from explorer.impute.factor import FactorAnalysisImputer
from explorer.impute.gaussian_mixture import GaussianMixtureImputer
from explorer.io import encode_categoricals, from_csv, from_dataframe, to_dataframe
from tests._estimators import ESTIMATORS, IDS

COLUMNS = ["Ozone", "Solar.R", "Wind", "Temp"]


@pytest.fixture(scope="module")
def X():
    rng = np.random.default_rng(1)
    A = np.array([[1.0, 0.4, 0.2, 0.1], [0.0, 1.0, 0.3, 0.2], [0.0, 0.0, 1.0, 0.4], [0.0, 0.0, 0.0, 1.0]])
    X = rng.normal(size=(90, 4)) @ A * [30.0, 90.0, 3.5, 9.0] + [42.0, 186.0, 10.0, 78.0]
    X[rng.random(X.shape) < 0.2] = np.nan
    X[np.isnan(X).all(axis=1), 2] = 9.7
    return X


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # short fits: ConvergenceWarning
        yield


def _reference(est, X):
    imp = clone(est).fit(X)
    return imp, imp.transform(X), imp.sample(X, 3, random_state=9), imp.score_samples(X)


def _check_numbers(out, X, ref):
    out = np.asarray(out)
    obs = ~np.isnan(X)
    assert not np.isnan(out).any()
    np.testing.assert_array_equal(out[obs], X[obs])  # observed entries bit for bit
    np.testing.assert_array_equal(out, ref)  # the numbers of the numpy path


def _csv_bytes(X) -> bytes:
    df = pd.DataFrame(X, columns=COLUMNS)
    return df.to_csv(index=False, na_rep="NA").encode()


@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_numpy_in_numpy_out(est, X):
    imp, ref, draws, _ = _reference(est, X)
    assert type(ref) is np.ndarray and ref.shape == X.shape
    assert type(draws) is np.ndarray and draws.shape == (3, *X.shape)
    assert type(clone(est).fit_transform(X)) is np.ndarray


@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_incomplete_data_from_csv(est, X):
    """The issue's path: from_csv -> fit (it failed with 'non-numeric values in 'Ozone'') -> IncompleteData out."""
    data = from_csv(io.BytesIO(_csv_bytes(X)), name="air")
    Xr = np.array(data.values)  # what the CSV round trip gives (repr of floats is exact)
    imp_ref, ref, draws_ref, score_ref = _reference(est, Xr)
    imp = clone(est).fit(data)
    assert list(imp.feature_names_in_) == COLUMNS
    out = imp.transform(data)
    assert isinstance(out, IncompleteData)
    assert out.columns == data.columns and out.name == "air" and out.binary == data.binary
    assert not out.missing.any() and "imputed" in out.description
    _check_numbers(out.values, Xr, ref)
    np.testing.assert_array_equal(imp.score_samples(data), score_ref)
    # the input keeps its mask; to_dataframe writes the completed table
    assert data.missing.sum() == np.isnan(Xr).sum()
    np.testing.assert_array_equal(to_dataframe(data, out.values).to_numpy(), ref)
    draws = imp.sample(data, 3, random_state=9)
    assert isinstance(draws, xr.DataArray) and draws.dims == ("imputation", "sample", "feature")
    assert list(draws["feature"].values) == COLUMNS and list(draws["imputation"].values) == [0, 1, 2]
    np.testing.assert_array_equal(draws.values, draws_ref)
    fit_out = clone(est).fit_transform(data)
    assert isinstance(fit_out, IncompleteData)
    np.testing.assert_array_equal(fit_out.values, ref)


@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_dataframe_in_dataframe_out(est, X):
    index = pd.Index([f"day{i}" for i in range(len(X))], name="day")
    df = pd.DataFrame(X, columns=COLUMNS, index=index)
    _, ref, draws_ref, score_ref = _reference(est, X)
    imp = clone(est).fit(df)
    out = imp.transform(df)
    assert isinstance(out, pd.DataFrame) and out.index.equals(index) and list(out.columns) == COLUMNS
    _check_numbers(out.to_numpy(), X, ref)
    np.testing.assert_array_equal(imp.score_samples(df), score_ref)
    out2 = clone(est).fit_transform(df)
    assert isinstance(out2, pd.DataFrame) and out2.index.equals(index)
    draws = imp.sample(df, 3, random_state=9)
    assert isinstance(draws, pd.DataFrame) and list(draws.columns) == COLUMNS
    assert draws.index.names == ["imputation", "day"] and len(draws) == 3 * len(X)
    for i in range(3):
        part = draws.loc[i]
        assert part.index.equals(index)
        _check_numbers(part.to_numpy(), X, draws_ref[i])


def test_dataframe_numeric_text_and_nullable_columns(X):
    """Integer, nullable and numeric-text columns are numbers; 'NA' / None / pd.NA are missing."""
    df = pd.DataFrame({
        "a": pd.array([1, 2, None, 4, 5, 6, 7, 8], dtype="Int64"),
        "b": ["1.5", "NA", "2.5", "3.0", "4.5", "4.0", "6.5", "7.0"],
        "c": [0.1, 0.4, 0.3, np.nan, 0.5, 0.9, 0.7, 0.8],
    })
    imp = GaussianMixtureImputer(random_state=0).fit(df)
    out = imp.transform(df)
    assert isinstance(out, pd.DataFrame) and not out.isna().any().any()
    assert out.loc[0, "b"] == 1.5 and out.loc[3, "a"] == 4.0
    np.testing.assert_array_equal(out.to_numpy(), imp.transform(from_dataframe(df).values))


@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_dataarray_in_dataarray_out(est, X):
    da = xr.DataArray(
        X, dims=("station", "variable"),
        coords={"station": np.arange(len(X)) * 10, "variable": COLUMNS, "site": ("station", np.arange(len(X)) % 3)},
        name="air", attrs={"units": "mixed"},
    )
    _, ref, draws_ref, score_ref = _reference(est, X)
    imp = clone(est).fit(da)
    assert list(imp.feature_names_in_) == COLUMNS
    out = imp.transform(da)
    assert isinstance(out, xr.DataArray) and out.dims == da.dims and out.name == "air" and out.attrs == da.attrs
    for c in ("station", "variable", "site"):
        np.testing.assert_array_equal(out[c].values, da[c].values)
    _check_numbers(out.values, X, ref)
    np.testing.assert_array_equal(imp.score_samples(da), score_ref)
    draws = imp.sample(da, 3, random_state=9)
    assert isinstance(draws, xr.DataArray) and draws.dims == ("imputation", "station", "variable")
    assert list(draws["imputation"].values) == [0, 1, 2] and list(draws["variable"].values) == COLUMNS
    np.testing.assert_array_equal(draws["site"].values, da["site"].values)
    for i in range(3):
        _check_numbers(draws.isel(imputation=i).values, X, draws_ref[i])


def test_dataarray_without_coordinates_and_bad_shapes(X):
    da = xr.DataArray(X, dims=("row", "col"))
    imp = FactorAnalysisImputer(random_state=0).fit(da)
    assert not hasattr(imp, "feature_names_in_")
    out = imp.transform(da)
    assert isinstance(out, xr.DataArray) and out.dims == ("row", "col") and not np.isnan(out.values).any()
    with pytest.raises(BadInputError, match=r"2-D DataArray \(rows x columns\); got dims \('a', 'b', 'c'\)"):
        imp.transform(xr.DataArray(np.zeros((2, 2, 4)), dims=("a", "b", "c")))
    with pytest.raises(BadInputError, match="xarray Dataset.*2-D DataArray"):
        imp.fit(xr.Dataset({"x": ("row", X[:, 0])}))
    with pytest.raises(BadInputError, match="already has a dimension named 'imputation'"):
        imp.sample(xr.DataArray(X, dims=("imputation", "col")), 2, random_state=0)


def test_column_names_checked_across_kinds(X):
    imp = GaussianMixtureImputer(random_state=0).fit(pd.DataFrame(X, columns=COLUMNS))
    wrong = xr.DataArray(X, dims=("row", "variable"), coords={"variable": COLUMNS[::-1]})
    with pytest.raises(BadInputError, match="fitted on"):
        imp.transform(wrong)
    with pytest.raises(BadInputError, match="fitted on"):
        imp.transform(IncompleteData.from_array(X, columns=["a", "b", "c", "d"]))
    np.testing.assert_array_equal(imp.transform(X), imp.transform(IncompleteData.from_array(X, columns=COLUMNS)).values)


# ---------------------------------------------------------------------------- categorical columns
@pytest.fixture()
def mixed():
    return pd.DataFrame({
        "size": [1.0, 2.0, np.nan, 4.0, 5.0, 3.0, 2.5, 4.5],
        "colour": ["red", None, "blue", "red", "green", "blue", "?", "red"],
        "grade": pd.Categorical(["a", "b", "a", None, "b", "a", "b", "a"], categories=["a", "b", "c"]),
        "weight": [10.0, 19.0, 31.0, 42.0, np.nan, 29.0, 24.0, 46.0],
    })


@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_categorical_column_is_a_clear_error(est, mixed):
    with pytest.raises(NonNumericError, match=r"2 column\(s\) are not numeric: 'colour' \(column 1\), e.g. 'red', "
                                              r"'grade' \(column 2\), e.g. 'a'.*encode_categoricals"):
        clone(est).fit(mixed)
    fitted = clone(est).fit(mixed[["size", "weight"]].to_numpy())
    with pytest.raises(BadInputError, match="not numeric: 'colour'"):
        fitted.transform(mixed[["size", "colour"]])


def test_encode_categoricals_onehot(mixed):
    enc = encode_categoricals(mixed)
    assert list(enc.columns) == ["size", "colour=blue", "colour=green", "colour=red", "grade=a", "grade=b",
                                 "grade=c", "weight"]
    assert enc.index.equals(mixed.index)
    pd.testing.assert_series_equal(enc["size"], mixed["size"])
    ind = enc[["colour=blue", "colour=green", "colour=red"]].to_numpy()
    # a missing category (None, '?') stays missing in every indicator; observed ones are one-hot
    assert np.isnan(ind[[1, 6]]).all() and not np.isnan(ind[[0, 2, 3, 4, 5, 7]]).any()
    np.testing.assert_array_equal(ind[[0, 2, 3, 4, 5, 7]].sum(axis=1), 1.0)
    assert ind[0].tolist() == [0.0, 0.0, 1.0] and ind[4].tolist() == [0.0, 1.0, 0.0]
    assert np.isnan(enc.loc[3, ["grade=a", "grade=b", "grade=c"]].to_numpy(dtype=float)).all()
    assert (enc["grade=c"].dropna() == 0).all()  # an unused level of a Categorical keeps its column
    out = GaussianMixtureImputer(random_state=0).fit_transform(enc)
    assert isinstance(out, pd.DataFrame) and list(out.columns) == list(enc.columns) and not out.isna().any().any()
    obs = enc.notna().to_numpy()
    np.testing.assert_array_equal(out.to_numpy()[obs], enc.to_numpy()[obs])


def test_encode_categoricals_drop_and_columns(mixed):
    assert list(encode_categoricals(mixed, how="drop").columns) == ["size", "weight"]
    codes = mixed.assign(code=[1, 2, 1, 2, 3, 1, 2, 3])
    enc = encode_categoricals(codes, columns=["code"])  # integer codes of categories, on request
    assert [c for c in enc.columns if c.startswith("code")] == ["code=1", "code=2", "code=3"]
    assert "colour" in enc.columns  # columns= limits the encoding to those named


def test_encode_categoricals_bad_input(mixed):
    with pytest.raises(BadInputError, match="how must be 'onehot' or 'drop'"):
        encode_categoricals(mixed, how="ordinal")
    with pytest.raises(BadInputError, match=r"unknown column\(s\) \['nope'\]"):
        encode_categoricals(mixed, columns=["nope"])
    with pytest.raises(BadInputError, match="expects a pandas DataFrame"):
        encode_categoricals(np.zeros((2, 2)))
    ids = pd.DataFrame({"id": [f"p{i}" for i in range(60)], "x": np.arange(60.0)})
    with pytest.raises(BadInputError, match=r"'id' has 60 distinct values \(more than max_levels=50\)"):
        encode_categoricals(ids)
    assert encode_categoricals(ids, max_levels=60).shape == (60, 61)
    dates = pd.DataFrame({"when": pd.date_range("2020-01-01", periods=3), "x": [1.0, 2.0, 3.0]})
    with pytest.raises(BadInputError, match="'when' holds dates"):
        encode_categoricals(dates)
    assert list(encode_categoricals(dates, how="drop").columns) == ["x"]
