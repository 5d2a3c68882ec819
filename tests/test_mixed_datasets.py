"""The mixed-type tables of ``explorer.datasets.load_mixed`` (issue 21, points 5 and 6).

The expected numbers were counted in the files as the packages ship them (palmerpenguins 0.1.6, plotnine 0.15.9,
vega_datasets 0.9.0, scikit-lego 0.9.10; see assets/README.md), not read back from the loader.
"""

import hashlib

import numpy as np
import pandas as pd
import pytest

from explorer.core.validation import BadInputError
from explorer.datasets import ASSETS_DIR, MixedDatasetInfo, list_datasets, list_mixed, load_mixed

# name: (shape, categorical columns, index name, missing cells per column)
EXPECTED = {
    "penguins": ((344, 8), ("species", "island", "sex"), None,
                 {"bill_length_mm": 2, "bill_depth_mm": 2, "flipper_length_mm": 2, "body_mass_g": 2, "sex": 11}),
    "msleep": ((83, 9), ("vore", "order", "conservation"), "name",
               {"vore": 7, "conservation": 29, "sleep_rem": 22, "sleep_cycle": 51, "brainwt": 27}),
    "auto_mpg": ((406, 8), ("Origin",), "Name", {"Miles_per_Gallon": 8, "Horsepower": 6}),
    "abalone": ((4177, 9), ("sex",), None, {}),
}


def test_catalogue_lists_the_four_tables_apart_from_the_numeric_one():
    infos = list_mixed()
    assert [i.name for i in infos] == list(EXPECTED)
    assert all(isinstance(i, MixedDatasetInfo) and not i.synthetic for i in infos)
    numeric = {i.name for i in list_datasets()}
    assert numeric.isdisjoint(EXPECTED)  # the numeric catalogue (UI pages, load_dataset) is unchanged


@pytest.mark.parametrize("name", list(EXPECTED))
def test_shape_dtypes_and_missing_cells(name):
    shape, categorical, index, missing = EXPECTED[name]
    info = {i.name: i for i in list_mixed()}[name]
    df = load_mixed(name)
    assert isinstance(df, pd.DataFrame)
    assert df.shape == shape == (info.n_samples, info.n_features)
    assert info.categorical == categorical
    assert df.index.name == index and info.index == (index or "")
    for col in df.columns:
        if col in categorical:
            assert isinstance(df[col].dtype, pd.CategoricalDtype), col
            cats = list(df[col].cat.categories)
            assert cats == sorted(cats) and not df[col].cat.ordered
        else:
            assert df[col].dtype == np.float64, col
    counts = df.isna().sum()
    assert {c: int(n) for c, n in counts.items() if n} == missing
    assert int(counts.sum()) == sum(missing.values()) == info.n_missing
    assert info.has_missing == bool(missing)
    if info.target:
        assert info.target in df.columns


def test_penguins_values():
    df = load_mixed("penguins")
    assert df["species"].value_counts().to_dict() == {"Adelie": 152, "Gentoo": 124, "Chinstrap": 68}
    assert df["sex"].value_counts().to_dict() == {"male": 168, "female": 165}
    assert list(df["island"].cat.categories) == ["Biscoe", "Dream", "Torgersen"]
    assert df.iloc[0].tolist() == ["Adelie", "Torgersen", 39.1, 18.7, 181.0, 3750.0, "male", 2007.0]
    assert df.iloc[3, 2:6].isna().all()  # the bird without any measurement
    assert sorted(df["year"].unique()) == [2007.0, 2008.0, 2009.0]


def test_msleep_values():
    df = load_mixed("msleep")
    assert df.index.is_unique and df.index[0] == "Cheetah"
    assert "genus" not in df.columns and "name" not in df.columns
    assert list(df["vore"].cat.categories) == ["carni", "herbi", "insecti", "omni"]
    assert df["order"].cat.categories.size == 19 and df["conservation"].cat.categories.size == 6
    cheetah = df.loc["Cheetah"]
    assert cheetah["sleep_total"] == 12.1 and cheetah["bodywt"] == 50.0 and np.isnan(cheetah["sleep_rem"])
    assert df.loc["Owl monkey", "brainwt"] == 0.0155


def test_auto_mpg_values():
    df = load_mixed("auto_mpg")
    assert df["Origin"].value_counts().to_dict() == {"USA": 254, "Japan": 79, "Europe": 73}
    years = df["Year"].value_counts().sort_index()
    assert years.index.tolist() == [1970.0 + k for k in range(13) if k != 11]  # this copy has no 1981
    assert years[1982.0] == 61 and years.sum() == 406
    assert df.index.nunique() == 311  # model names repeat: row labels, not an identifier
    first = df.iloc[0]
    assert df.index[0] == "chevrolet chevelle malibu"
    assert first[["Miles_per_Gallon", "Cylinders", "Horsepower", "Weight_in_lbs", "Acceleration"]].tolist() == \
        [18.0, 8.0, 130.0, 3504.0, 12.0]
    assert set(df["Cylinders"].unique()) == {3.0, 4.0, 5.0, 6.0, 8.0}


def test_abalone_values_and_uci_rows():
    info = {i.name: i for i in list_mixed()}["abalone"]
    assert info.target == "rings"
    df = load_mixed("abalone")
    assert df.columns.tolist() == ["sex", "length", "diameter", "height", "whole_weight", "shucked_weight",
                                   "viscera_weight", "shell_weight", "rings"]
    assert df["sex"].value_counts().to_dict() == {"M": 1528, "I": 1342, "F": 1307}
    assert df["rings"].min() == 1.0 and df["rings"].max() == 29.0 and (df["rings"] % 1 == 0).all()
    assert df["rings"].mean() == pytest.approx(9.933684462532918, rel=1e-12)
    assert int((df["height"] == 0).sum()) == 2
    assert df.iloc[0].tolist() == ["M", 0.455, 0.365, 0.095, 0.514, 0.2245, 0.101, 0.15, 15.0]
    # the rows of the file (header left out) are byte for byte UCI's abalone.data (its published SHA-256)
    body = (ASSETS_DIR / "abalone.csv").read_bytes().split(b"\n", 1)[1]
    assert hashlib.sha256(body).hexdigest() == "de37cdcdcaaa50c309d514f248f7c2302a5f1f88c168905eba23fe2fbc78449f"


@pytest.mark.parametrize("name", ["penguins", "auto_mpg"])
def test_each_call_returns_an_independent_copy(name):
    a = load_mixed(name)
    b = load_mixed(name)
    assert a is not b and a.equals(b)
    num = next(c for c in a.columns if a[c].dtype == np.float64)
    cat = next(c for c in a.columns if isinstance(a[c].dtype, pd.CategoricalDtype))
    assert not np.shares_memory(a[num].to_numpy(), b[num].to_numpy())
    a.iloc[0, a.columns.get_loc(num)] = -1.0
    a[cat] = a[cat].cat.add_categories(["changed"])
    a.iloc[0, a.columns.get_loc(cat)] = "changed"
    c = load_mixed(name)
    assert c.equals(b) and "changed" not in c[cat].cat.categories


def test_aliases():
    assert load_mixed("cars").equals(load_mixed("auto_mpg"))
    assert load_mixed("palmerpenguins").equals(load_mixed("penguins"))


@pytest.mark.parametrize("bad", ["abalon", "iris", None, 3])
def test_unknown_name_lists_the_available_ones(bad):
    with pytest.raises(BadInputError, match="penguins, msleep, auto_mpg, abalone") as err:
        load_mixed(bad)
    assert "unknown mixed-type data set" in str(err.value)
    if bad == "iris":
        assert "load_dataset" in str(err.value)
