"""Loaders (CSV, pandas, numpy, xarray) and the built-in data sets."""

import importlib.util
import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from explorer import datasets
from explorer.core.data import IncompleteData
from explorer.core.validation import BadInputError
from explorer.datasets import dataset_parameters, digit_templates, list_datasets, load_dataset
from explorer.io import from_csv, from_dataframe, from_numpy, from_xarray, to_dataframe

CSV = b"age,weight,sex\n30,70.5,1\n?,80,0\n45,NA,1\n50,,0\n"


# ---------------------------------------------------------------- CSV
def test_csv_with_question_marks_and_header():
    data = from_csv(CSV)
    assert data.columns == ("age", "weight", "sex")
    assert data.shape == (4, 3)
    np.testing.assert_array_equal(
        data.missing, [[False, False, False], [True, False, False], [False, True, False], [False, True, False]]
    )
    assert data.values[0, 1] == 70.5 and data.binary == (False, False, True)
    assert data.truth is None


def test_csv_path_file_like_and_options(tmp_path):
    path = tmp_path / "d.csv"
    path.write_bytes(CSV)
    assert from_csv(path).name == "d.csv"
    assert from_csv(str(path)).shape == (4, 3)
    assert from_csv(io.StringIO(CSV.decode())).shape == (4, 3)
    sub = from_csv(io.BytesIO(CSV), columns=["sex", "age"])
    assert sub.columns == ("sex", "age")
    np.testing.assert_array_equal(sub.values[:, 0], [1, 0, 1, 0])
    with pytest.raises(BadInputError, match="unknown column.*'height'"):
        from_csv(CSV, columns=["height"])
    semi = from_csv(b"a;b\n1;2\n3;?\n", sep=";")
    assert semi.columns == ("a", "b") and semi.missing[1, 1]


def test_csv_header_inference():
    no_header = from_csv(b"1,2\n3,4\n5,?\n")
    assert no_header.columns == ("x0", "x1") and no_header.shape == (3, 2)
    named = from_csv(b"1,2\n3,4\n", names=["u", "v"])
    assert named.columns == ("u", "v")
    forced = from_csv(b"1,2\n3,4\n", header=True)
    assert forced.columns == ("1", "2") and forced.shape == (1, 2)
    with pytest.raises(BadInputError, match="repeats column name"):
        from_csv(b"a,a\n1,2\n")


def test_csv_row_names_written_by_r_or_pandas_are_not_data():
    """An empty first header over distinct values is the row names of write.csv / to_csv: not a feature x0."""
    df = pd.DataFrame({"a": [1.0, np.nan, 3.0, 4.0], "b": [2.0, 3.0, np.nan, 5.0]}, index=[1, 2, 3, 4])
    r_text = '"","a","b"\n"1",1,2\n"2",NA,3\n"3",3,NA\n"4",4,5\n'
    for text in (df.to_csv(), r_text, df.rename(index=lambda i: f"site {i}").to_csv()):
        data = from_csv(io.StringIO(text))
        assert data.columns == ("a", "b") and "row names" in data.description
        np.testing.assert_array_equal(data.missing, df.isna().to_numpy())
        np.testing.assert_array_equal(data.values[~data.missing], df.to_numpy()[~df.isna().to_numpy()])
    # a first column with a repeated value or a gap is data, whatever its header
    repeated = from_csv(io.StringIO(",a,b\n1,1,2\n1,NA,3\n3,3,NA\n"))
    assert repeated.columns == ("x0", "a", "b") and "row names" not in repeated.description
    gap = from_csv(io.StringIO(",a,b\n1,1,2\n,NA,3\n3,3,NA\n"))
    assert gap.columns == ("x0", "a", "b")


def _named_csv(n, first="name", names=None, gap=False):
    rng = np.random.default_rng(n)
    names = [f"animal {i}" for i in range(n)] if names is None else names
    lines = [f"{first},kind,x,y"]
    for i in range(n):
        name = "" if gap and i == 3 else names[i]
        lines.append(f"{name},{'ab'[i % 2]},{rng.normal():.3f},{'NA' if i % 5 == 0 else 1}")
    return "\n".join(lines) + "\n"


def test_a_named_first_column_of_distinct_texts_names_the_rows():
    """msleep's animal names, a customer id: read as the index (and said so), not as a category of a level per row."""
    from explorer.io import ROW_NAME_MIN_ROWS, read_csv_table

    n = ROW_NAME_MIN_ROWS
    table = read_csv_table(io.StringIO(_named_csv(n)))
    assert list(table.columns) == ["kind", "x", "y"] and list(table.index) == [f"animal {i}" for i in range(n)]
    assert table.index.name == "name" and "'name' (20 distinct text values" in table.attrs["description"]
    assert isinstance(table["kind"].dtype, pd.CategoricalDtype)
    data = from_csv(io.StringIO(_named_csv(n)), drop_non_numeric=True)  # the numeric reader likewise
    assert data.columns == ("x", "y") and "'name'" in data.description and "row names" in data.description
    # data, not names: too few rows, a gap, a repeated value, numbers, or a column asked for by name
    for text in (_named_csv(n - 1), _named_csv(n, gap=True), _named_csv(n, names=["a"] * n),
                 _named_csv(n, names=[str(i) for i in range(n)])):
        kept = read_csv_table(io.StringIO(text))
        assert list(kept.columns)[0] == "name" and "description" not in kept.attrs
    asked = read_csv_table(io.StringIO(_named_csv(n)), columns=["name", "x"])
    assert list(asked.columns) == ["name", "x"]
    assert list(read_csv_table(io.StringIO(_named_csv(n)), columns=["x"]).columns) == ["x"]


def test_read_csv_table_keeps_text_columns_as_categories():
    from explorer.io import read_csv_table

    text = ',smoker,age,city\n"a",yes,41,Paris\n"b", no ,NA,\n"c",?,39.5,Lyon\n"d",no,40,Paris\n'
    frame = read_csv_table(io.StringIO(text))
    assert list(frame.index) == ["a", "b", "c", "d"] and list(frame.columns) == ["smoker", "age", "city"]
    assert isinstance(frame["smoker"].dtype, pd.CategoricalDtype) and list(frame["smoker"].cat.categories) == ["no", "yes"]
    assert frame["smoker"].isna().tolist() == [False, False, True, False]  # '?' is missing, ' no ' stripped
    assert frame["age"].dtype == float and np.isnan(frame["age"].iloc[1]) and frame["city"].isna().sum() == 1
    many = "x,id\n" + "".join(f"{i},p{i}\n" for i in range(150))  # (first, it would name the rows)
    with pytest.raises(BadInputError, match=r"'id' has 150 distinct text values.*identifier or free text"):
        read_csv_table(io.StringIO(many))
    with pytest.raises(BadInputError, match="no observed value"):
        read_csv_table(io.StringIO("a,b\n1,NA\n2,NA\n"))


def test_csv_non_numeric_columns():
    text = b"id,city,x,flag\n1,Paris,0.5,yes\n2,Oslo,?,no\n3,Rome,1.5,yes\n"
    with pytest.raises(BadInputError, match=r"2 column\(s\) are not numeric: 'city' \(e.g. 'Paris'\), 'flag'.*drop_non_numeric"):
        from_csv(text)
    data = from_csv(text, drop_non_numeric=True, description="upload")
    assert data.columns == ("id", "x")
    assert "dropped non-numeric columns: city, flag" in data.description
    assert data.description.startswith("upload")
    with pytest.raises(BadInputError, match="no numeric column"):
        from_csv(b"a\nx\ny\n", drop_non_numeric=True)


def test_csv_all_missing_column_and_inf():
    with pytest.raises(BadInputError, match="'b' \\(column 1\\) has no observed value"):
        from_csv(b"a,b\n1,?\n2,?\n")
    with pytest.raises(BadInputError, match="infinite"):
        from_csv(b"a,b\n1,inf\n2,3\n")


def test_oversized_upload_is_refused():
    with pytest.raises(BadInputError, match="larger than the limit"):
        from_csv(b"1,2\n" * 50, max_bytes=100)
    with pytest.raises(BadInputError, match="larger than the limit of 0.0 MB"):
        from_csv(io.BytesIO(b"1,2\n" * 50), max_bytes=10)
    big = b"1\n" * (11 * 1024 * 1024)  # 22 MB > the 20 MB default
    with pytest.raises(BadInputError, match="larger than the limit of 20.0 MB"):
        from_csv(big)
    assert from_csv(b"1,2\n" * 50, max_bytes=None).shape == (50, 2)


# ---------------------------------------------------------------- pandas / numpy / xarray
def test_from_dataframe_dtypes():
    df = pd.DataFrame(
        {
            "i": pd.array([1, None, 3], dtype="Int64"),
            "f": [0.5, 1.5, np.nan],
            "b": [True, False, True],
            "s": ["1.5", "?", None],
        },
        index=[10, 20, 30],
    )
    data = from_dataframe(df, name="df")
    assert data.columns == ("i", "f", "b", "s") and data.name == "df"
    np.testing.assert_array_equal(
        data.missing, [[False, False, False, False], [True, False, False, True], [False, True, False, True]]
    )
    np.testing.assert_array_equal(data.values[:, 2], [1.0, 0.0, 1.0])
    assert data.values[0, 3] == 1.5 and data.binary[2]


def test_from_dataframe_non_numeric():
    df = pd.DataFrame({"x": [1.0, 2.0], "c": pd.Categorical(["a", "b"]), "t": ["u", "v"]})
    with pytest.raises(BadInputError, match="'c'.*'t'.*encode them as numbers"):
        from_dataframe(df)
    assert from_dataframe(df, drop_non_numeric=True).columns == ("x",)
    with pytest.raises(BadInputError, match="expects a pandas DataFrame"):
        from_dataframe(np.ones((2, 2)))


def test_from_numpy_and_to_dataframe_round_trip():
    X = np.array([[1.0, np.nan], [3.0, 4.0], [np.nan, 6.0]])
    data = from_numpy(X, columns=["a", "b"])
    df = to_dataframe(data)
    assert list(df.columns) == ["a", "b"]
    back = from_dataframe(df)
    np.testing.assert_array_equal(back.values, data.values)
    np.testing.assert_array_equal(back.missing, data.missing)
    imputed = np.full((3, 2), 99.0)
    filled = to_dataframe(data, imputed).to_numpy()
    np.testing.assert_array_equal(filled[data.missing], 99.0)
    np.testing.assert_array_equal(filled[~data.missing], X[~data.missing])  # observed unchanged
    with pytest.raises(BadInputError, match="imputed has shape"):
        to_dataframe(data, np.ones((2, 2)))
    masked = from_numpy([[1.0, 2.0], [3.0, 4.0]], missing=[[False, True], [False, False]])
    assert np.isnan(masked.values[0, 1])


def test_from_xarray_dataarray():
    X = np.arange(12.0).reshape(4, 3)
    X[1, 2] = np.nan
    da = xr.DataArray(X, dims=("sample", "feature"), coords={"feature": ["a", "b", "c"]}, name="grid")
    data = from_xarray(da)
    assert data.columns == ("a", "b", "c") and data.name == "grid"
    assert data.missing[1, 2] and data.missing.sum() == 1
    flipped = from_xarray(da.transpose("feature", "sample"), feature_dim="feature")
    np.testing.assert_array_equal(flipped.values, data.values)
    plain = from_xarray(xr.DataArray(X))
    assert plain.columns == ("x0", "x1", "x2")
    with pytest.raises(BadInputError, match="must be 2-D"):
        from_xarray(xr.DataArray(np.zeros((2, 2, 2))))
    with pytest.raises(BadInputError, match="feature_dim 'nope'"):
        from_xarray(da, feature_dim="nope")


def test_from_xarray_dataset():
    ds = xr.Dataset({"u": ("row", [1.0, np.nan, 3.0]), "v": ("row", [0.0, 1.0, 1.0])}, attrs={"name": "ds"})
    data = from_xarray(ds)
    assert data.columns == ("u", "v") and data.name == "ds" and data.binary == (False, True)
    assert data.missing[1, 0]
    single = xr.Dataset({"m": (("r", "c"), np.ones((3, 2)) * [[1.0, 2.0]])})
    assert from_xarray(single).shape == (3, 2)
    with pytest.raises(BadInputError, match="1-D along the same dimension"):
        from_xarray(xr.Dataset({"u": ("a", [1.0, 2.0]), "w": ("b", [1.0, 2.0, 3.0])}))
    with pytest.raises(BadInputError, match="expects an xarray"):
        from_xarray(np.ones((2, 2)))


# ---------------------------------------------------------------- built-in data sets
SHAPES = {
    "ghahramani_bivariate": (200, 2),
    "three_blobs": (300, 2),
    "anisotropic": (300, 2),
    "two_moons": (300, 2),
    "ring": (300, 2),
    "digits_5x7": (100, 35),
    "iris": (150, 4),
    "wine": (178, 13),
    "boston": (506, 13),
    "ionosphere": (351, 33),
    "hepatitis": (155, 19),
    "mnist": (10000, 784),
    "digits_8x8": (1797, 64),
    "photo_patches": (2000, 256),
}


def test_catalogue_lists_every_data_set():
    infos = {i.name: i for i in list_datasets()}
    assert set(infos) == set(SHAPES)
    for name, info in infos.items():
        assert (info.n_samples, info.n_features) == SHAPES[name]
        assert info.title and info.description and info.source
        assert set(info.to_dict()) >= {"name", "title", "n_samples", "n_features", "description", "source"}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_every_data_set_loads_with_documented_shape(name):
    data = load_dataset(name)
    assert isinstance(data, IncompleteData)
    assert data.shape == SHAPES[name] and data.name == name
    assert not data.values.flags.writeable
    if name == "hepatitis":
        assert data.truth is None and data.missing.any()
    else:
        assert not data.missing.any() and not np.isnan(data.values).any()
        np.testing.assert_array_equal(data.truth, data.values)


def test_real_tables_details():
    boston, medv = load_dataset("boston", return_labels=True)
    assert boston.binary == tuple(c == "CHAS" for c in boston.columns) and "MEDV" not in boston.columns
    assert "racial" in boston.description and medv.shape == (506,)
    assert boston.values[0, 0] == 0.00632 and medv[0] == 24.0
    ion, cls = load_dataset("ionosphere", return_labels=True)
    assert "V2" not in ion.columns and ion.columns[0] == "V1" and ion.binary[0] and sum(ion.binary) == 1
    assert set(cls) == {"g", "b"}
    iris, species = load_dataset("iris", return_labels=True)
    np.testing.assert_array_equal(np.bincount(species), [50, 50, 50])
    np.testing.assert_array_equal(iris.values[34], [4.9, 3.1, 1.5, 0.2])  # Fisher's value, not UCI's
    hep, outcome = load_dataset("hepatitis", return_labels=True)
    assert hep.missing_rate == pytest.approx(0.0567, abs=5e-4)
    assert len(hep.pattern_counts()[1]) == 21
    assert sum(hep.binary) == 13 and set(np.unique(outcome)) == {1, 2}
    assert np.bincount(outcome)[1:].tolist() == [32, 123]
    assert load_dataset("boston") is load_dataset("boston")  # cached


def test_bivariate_moments_approach_truth():
    data = load_dataset("ghahramani_bivariate", n_samples=200_000, random_state=1)
    p = dataset_parameters("ghahramani_bivariate")
    np.testing.assert_allclose(p["covariances"][0], [[5 / 4, 9 / 4], [9 / 4, 17 / 4]])
    np.testing.assert_allclose(data.values.mean(axis=0), [5.0, 5.0], atol=0.03)
    np.testing.assert_allclose(np.cov(data.values.T), p["covariances"][0], atol=0.05)
    assert data.columns == ("x", "y")


def test_synthetic_sets_are_seeded():
    a = load_dataset("three_blobs", random_state=5)
    b = load_dataset("three_blobs", random_state=5)
    c = load_dataset("three_blobs", random_state=6)
    np.testing.assert_array_equal(a.values, b.values)
    assert not np.array_equal(a.values, c.values)
    g = load_dataset("ring", n_samples=50, random_state=np.random.default_rng(0))
    assert g.shape == (50, 2)
    with pytest.raises(BadInputError, match="n_samples must be an integer"):
        load_dataset("ring", n_samples=1)


@pytest.mark.parametrize("name", ["three_blobs", "anisotropic"])
def test_mixture_samples_match_parameters(name):
    data, labels = load_dataset(name, n_samples=30_000, random_state=2, return_labels=True)
    p = dataset_parameters(name)
    assert not p["means"].flags.writeable
    np.testing.assert_allclose(np.bincount(labels) / labels.size, p["weights"], atol=0.015)
    for k in range(len(p["weights"])):
        Xk = data.values[labels == k]
        np.testing.assert_allclose(Xk.mean(axis=0), p["means"][k], atol=0.06)
        np.testing.assert_allclose(np.cov(Xk.T), p["covariances"][k], atol=0.12)


def test_digits_templates_and_noise():
    t = digit_templates()
    assert t.shape == (10, 7, 5) == (10, *datasets.DIGIT_SHAPE)
    assert set(np.unique(t)) == {0.0, 1.0}
    flat = digit_templates(flat=True)
    assert len({row.tobytes() for row in flat}) == 10  # ten distinct digits
    np.testing.assert_array_equal(flat[3], t[3].reshape(-1))
    data, labels = load_dataset("digits_5x7", return_labels=True)
    np.testing.assert_array_equal(labels, np.repeat(np.arange(10), 10))
    resid = data.values - flat[labels]
    assert resid.std() == pytest.approx(0.2, rel=0.1)
    clean = load_dataset("digits_5x7", noise=0.0, n_per_digit=2)
    np.testing.assert_array_equal(clean.values, np.repeat(flat, 2, axis=0))
    p = dataset_parameters("digits_5x7", noise=0.3)
    np.testing.assert_allclose(p["covariances"][4], 0.09 * np.eye(35))


def test_dataset_errors():
    with pytest.raises(BadInputError, match="unknown data set 'cifar10'.*iris"):
        load_dataset("cifar10")
    with pytest.raises(BadInputError, match="does not take \\['n_samples'\\]"):
        load_dataset("iris", n_samples=10)
    with pytest.raises(BadInputError, match="not drawn from a known Gaussian mixture"):
        dataset_parameters("ring")
    assert load_dataset("two_moons_like").name == "two_moons"  # alias


def test_assets_are_up_to_date():
    """scripts/prepare_assets.py --check (needs the shared raw data; skipped on a fresh machine)."""
    root = Path(__file__).resolve().parent.parent
    if not Path("/work/shared/data/boston_housing.csv").exists():
        pytest.skip("raw data folder not available")
    spec = importlib.util.spec_from_file_location("prepare_assets", root / "scripts" / "prepare_assets.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--check"]) == 0


def test_dataset_parameters_rejects_unknown_options():
    with pytest.raises(BadInputError, match="does not take \\['noise'\\]"):
        dataset_parameters("three_blobs", noise=0.1)


def test_exclude_leaves_columns_out_and_names_unknown_ones():
    from explorer.io import read_csv_table

    text = "x,id,kind,y\n" + "".join(f"{i},p{i},{'ab'[i % 2]},{'NA' if i % 4 == 0 else i % 3}\n" for i in range(150))
    with pytest.raises(BadInputError, match=r"'id' has 150 distinct text values.*--exclude NAME"):
        read_csv_table(io.StringIO(text))
    table = read_csv_table(io.StringIO(text), exclude=["id"])
    assert list(table.columns) == ["x", "kind", "y"] and isinstance(table["kind"].dtype, pd.CategoricalDtype)
    data = from_csv(io.StringIO(text), exclude=["id", "kind"])
    assert data.columns == ("x", "y") and int(data.missing.sum()) == 38
    with pytest.raises(BadInputError, match=r"cannot leave out unknown column\(s\) \['ID'\]"):
        read_csv_table(io.StringIO(text), exclude=["ID"])
    with pytest.raises(BadInputError, match="leaves no column"):
        from_csv(io.StringIO(text), exclude=["x", "id", "kind", "y"])
    # a first column of names left out is left out, not read as row names first
    named = read_csv_table(io.StringIO(_named_csv(30)), exclude=["name"])
    assert list(named.columns) == ["kind", "x", "y"] and list(named.index) == list(range(30))
    assert "description" not in named.attrs
