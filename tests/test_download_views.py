"""Headless tests of the download buttons (explorer/ui/components/downloads.py) on the Data & mechanism and
Conditional pages: the views are built in Python, the download callbacks called (and the button's
click path run), the bytes parsed back with pandas / pyarrow / xarray (scipy engine)."""

from __future__ import annotations

import base64
import io

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import xarray as xr

from explorer.core.validation import BadInputError
from explorer.ui.components import downloads as _downloads
from explorer.ui.components.downloads import FORMATS, safe_filename
from explorer.ui.pages.conditional import ConditionalView
from explorer.ui.pages.data_mechanism import MAX_FIT_FEATURES, DataMechanismView
from explorer.ui.state.data_model import DataModel
from explorer.ui.state.em_model import EMModel

FORMAT_NAMES = list(FORMATS)
# pandas < 3 needs the round-trip float parser to read back the float64 written; pandas 3 does by default
EXACT = {"float_precision": "round_trip"} if int(pd.__version__.split(".")[0]) < 3 else {}


# ----------------------------------------------------------------------------- parsing the files back
def read_imputations(content: bytes, suffix: str, columns):
    """``(imputed (n, d), samples (m, n, d) or None, missing (n, d))`` parsed from a downloaded file."""
    if suffix == ".nc":
        ds = xr.open_dataset(io.BytesIO(content), engine="scipy").load()
        assert [str(c) for c in ds["column"].values] == list(columns)
        samples = ds["samples"].values if "samples" in ds else None
        if samples is not None:
            assert ds["samples"].dims == ("imputation", "row", "column")
            assert ds["imputation"].values.tolist() == list(range(1, samples.shape[0] + 1))
        return ds["imputed"].values, samples, ds["missing"].values.astype(bool)
    if suffix == ".csv":
        frame = pd.read_csv(io.BytesIO(content), **EXACT)
    else:
        frame = pq.read_table(io.BytesIO(content)).to_pandas()
    assert list(frame.columns[:2]) == ["imputation", "row"]
    assert list(frame.columns[2:2 + len(columns)]) == list(columns)
    blocks = [frame[frame.imputation == k] for k in sorted(frame.imputation.unique())]
    values = [b[list(columns)].to_numpy(dtype=float) for b in blocks]
    missing = blocks[0][[f"missing:{c}" for c in columns]].to_numpy().astype(bool)
    return values[0], (np.stack(values[1:]) if len(values) > 1 else None), missing


def read_masked(content: bytes, suffix: str) -> pd.DataFrame:
    if suffix == ".nc":
        ds = xr.open_dataset(io.BytesIO(content), engine="scipy").load()
        values = ds["values"].values
        assert np.array_equal(np.isnan(values), ds["missing"].values.astype(bool))
        return pd.DataFrame(values, columns=[str(c) for c in ds["column"].values])
    if suffix == ".csv":
        return pd.read_csv(io.BytesIO(content), **EXACT)
    return pq.read_table(io.BytesIO(content)).to_pandas()


def check_imputations(content, suffix, data, m):
    imputed, samples, missing = read_imputations(content, suffix, [str(c) for c in data.columns])
    obs = ~data.missing
    assert np.array_equal(missing, data.missing)
    assert np.isfinite(imputed).all()
    assert np.array_equal(imputed[obs], data.values[obs])  # observed values unchanged, bit for bit
    if m == 0:
        assert samples is None
        return imputed, None
    assert samples.shape == (m, *data.values.shape) and np.isfinite(samples).all()
    for draw in samples:
        assert np.array_equal(draw[obs], data.values[obs])
    assert not np.array_equal(samples[0][data.missing], samples[1][data.missing])  # draws, not copies
    return imputed, samples


def click(button) -> bytes | None:
    """The button's click path (Python side): the bytes sent to the browser, or None when nothing is sent."""
    before = button._transfers
    button._clicks += 1
    if button._transfers == before:
        return None
    header, b64 = button.data.split(",", 1)
    assert header.startswith("data:") and header.endswith(";base64")
    return base64.b64decode(b64)


# ----------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def data_view():
    return DataMechanismView(data_model=DataModel(dataset="iris", mechanism="nmar_lowest", rate=0.3))


@pytest.fixture(scope="module")
def conditional_view():
    view = ConditionalView(em_model=EMModel(data_model=DataModel(dataset="wine", mechanism="mcar", rate=0.2),
                                            n_components=2))
    view.fit()
    return view


# ----------------------------------------------------------------------------- file names
@pytest.mark.parametrize("parts, expected", [
    (("iris", "mcar"), "iris_mcar_imputed.csv"),
    (("../../etc/passwd", "x"), "etc_passwd_x_imputed.csv"),
    (("C:\\data\\my file (2).csv", ""), "C_data_my_file_2_imputed.csv"),
    (("<script>alert(1)</script>.csv",), "script_alert_1_script_imputed.csv"),
    (("données été.CSV",), "donn_es_t_imputed.csv"),
    (("...", "", None), "None_imputed.csv"),
    (("", "   "), "imputed.csv"),
])
def test_safe_filename_keeps_safe_characters_only(parts, expected):
    name = safe_filename(*parts, "imputed", suffix=".csv")
    assert name == expected
    assert "/" not in name and "\\" not in name and not name.startswith(".")


def test_safe_filename_is_bounded_and_never_empty():
    assert safe_filename("a" * 500, suffix=".nc") == "a" * 80 + ".nc"
    assert safe_filename("/", "..", suffix=".nc") == "data.nc"


# ----------------------------------------------------------------------------- Data & mechanism page
@pytest.mark.parametrize("fmt", FORMAT_NAMES)
def test_data_page_downloads_parse_back_with_observed_values_unchanged(data_view, fmt):
    dl, data = data_view.downloads, data_view.data_model.data
    dl.file_format = fmt
    suffix = FORMATS[fmt]

    masked = read_masked(click(dl.masked_button), suffix)
    assert list(masked.columns) == list(data.columns)
    assert np.array_equal(np.isnan(masked.to_numpy()), data.missing)
    assert np.array_equal(masked.to_numpy()[~data.missing], data.values[~data.missing])
    assert dl.masked_button.filename == f"iris_nmar_lowest_masked{suffix}"

    single, _ = check_imputations(click(dl.imputed_button), suffix, data, 0)
    assert dl.imputed_button.filename == f"iris_nmar_lowest_imputed{suffix}"

    dl.n_imputations = 3
    multi, _ = check_imputations(click(dl.multiple_button), suffix, data, 3)
    assert np.array_equal(multi, single)
    assert dl.multiple_button.filename == f"iris_nmar_lowest_imputed_m3{suffix}"
    assert not dl._error.visible and "GaussianMixtureImputer" in dl._status.object


def test_data_page_imputations_are_those_of_the_library_default_imputer(data_view):
    from explorer.impute.gaussian_mixture import GaussianMixtureImputer

    data = data_view.data_model.data
    expected = GaussianMixtureImputer(empty_rows="marginal", random_state=0).fit(data.values)
    imp = data_view.imputations(4)
    np.testing.assert_array_equal(imp.imputed, expected.transform(data.values))
    np.testing.assert_array_equal(imp.samples, expected.sample(data.values, 4, random_state=0))
    # the note says which model produced them, before any click
    assert "GaussianMixtureImputer()" in data_view.downloads._note.object


def test_data_page_refits_for_new_data_only(data_view):
    dm = data_view.data_model
    first = data_view._fitted(dm.data)[0]
    assert data_view._fitted(dm.data)[0] is first  # cached for the same data
    dm.mask_seed += 1
    try:
        assert data_view._fitted(dm.data)[0] is not first
        data_view.downloads.file_format = "CSV"
        check_imputations(data_view.downloads._imputed_file(2)[0], ".csv", dm.data, 2)
    finally:
        dm.mask_seed -= 1


def test_data_page_with_an_uploaded_file_named_and_headed_with_markup():
    dm = DataModel(dataset="iris")
    content = ("<b>x</b>,y [z](javascript:1),c\n1,2,3\n2,,4\n3,5,\n4,3,5\n5,4,5.5\n6,4,7\n").encode()
    assert dm.load_csv(content, "../<img src=x onerror=alert(1)> data.csv")
    view = DataMechanismView(data_model=dm)
    dl = view.downloads
    assert "<img" not in dl._note.object and "&lt;img" in dl._note.object
    got = click(dl.imputed_button)
    assert dl.imputed_button.filename == "img_src_x_onerror_alert_1_data_imputed.csv"
    check_imputations(got, ".csv", dm.data, 0)
    assert "<img" not in dl._status.object
    masked = read_masked(click(dl.masked_button), ".csv")
    assert list(masked.columns) == ["<b>x</b>", "y [z](javascript:1)", "c"]


def test_data_page_too_wide_for_a_click_fit_says_so_and_still_offers_the_masked_data():
    view = DataMechanismView(data_model=DataModel(dataset="digits_8x8", mechanism="mcar", rate=0.2))
    dl = view.downloads
    assert view.data_model.data.n_features > MAX_FIT_FEATURES
    assert click(dl.imputed_button) is None  # nothing sent
    assert dl._error.visible and "at most 40" in dl._error.object and "explorer impute" in dl._error.object
    assert "not offered for more than 40 columns" in dl._note.object
    masked = click(dl.masked_button)
    assert masked is not None and not dl._error.visible
    assert read_masked(masked, ".csv").shape == view.data_model.data.values.shape


def test_a_failing_fit_is_said_on_the_page_and_loses_nothing(monkeypatch):
    from explorer.core.gaussians.gaussian import DegenerateCovarianceError
    from explorer.impute.gaussian_mixture import GaussianMixtureImputer

    view = DataMechanismView(data_model=DataModel(dataset="iris", mechanism="mcar", rate=0.2))
    dl, dm = view.downloads, view.data_model
    revision, data = dm.revision, dm.data

    def fail(self, X, y=None):
        raise DegenerateCovarianceError("component 1 collapsed: increase reg_covar")

    monkeypatch.setattr(GaussianMixtureImputer, "fit", fail)
    assert click(dl.multiple_button) is None
    assert dl._error.visible and "component 1 collapsed" in dl._error.object
    assert dm.revision == revision and dm.data is data and not dm.error  # the page keeps its state

    def crash(self, X, y=None):
        raise RuntimeError("boom")

    monkeypatch.setattr(GaussianMixtureImputer, "fit", crash)
    assert click(dl.imputed_button) is None
    assert "could not be built" in dl._error.object and "RuntimeError" in dl._error.object
    monkeypatch.undo()
    assert click(dl.imputed_button) is not None and not dl._error.visible  # works again


def test_a_column_named_imputation_fits_netcdf_but_not_the_long_table():
    dm = DataModel(dataset="iris")
    assert dm.load_csv(b"imputation,b\n1,2\n2,\n3,5\n4,3\n5,4\n", "clash.csv")
    dl = DataMechanismView(data_model=dm).downloads
    assert click(dl.imputed_button) is None
    assert "clash with the long table" in dl._error.object and "nc" in dl._error.object
    dl.file_format = "netCDF"
    check_imputations(click(dl.imputed_button), ".nc", dm.data, 0)


def test_files_beyond_the_limits_are_refused_before_they_are_sent(data_view, monkeypatch):
    dl = data_view.downloads
    dl.file_format = "CSV"
    monkeypatch.setattr(_downloads, "MAX_CELLS", 1000)
    assert click(dl.multiple_button) is None
    assert "would hold" in dl._error.object and "fewer imputations" in dl._error.object
    monkeypatch.setattr(_downloads, "MAX_CELLS", 10**9)
    size = len(click(dl.masked_button))
    monkeypatch.setattr(_downloads, "MAX_DOWNLOAD_BYTES", size)  # exactly the file: sent
    assert click(dl.masked_button) is not None and not dl._error.visible
    monkeypatch.setattr(_downloads, "MAX_DOWNLOAD_BYTES", size - 1)
    assert click(dl.masked_button) is None and "MB" in dl._error.object


def test_m_is_bounded(data_view):
    dl = data_view.downloads
    for bad in (0, 51, -1):
        with pytest.raises(ValueError):
            dl.n_imputations = bad


# ----------------------------------------------------------------------------- Conditional page
@pytest.mark.parametrize("fmt", FORMAT_NAMES)
def test_conditional_page_downloads_the_shown_model(conditional_view, fmt):
    view, dl = conditional_view, conditional_view.downloads
    data = view.em_model.data_model.data
    dl.file_format = fmt
    suffix = FORMATS[fmt]
    single, _ = check_imputations(click(dl.imputed_button), suffix, data, 0)
    np.testing.assert_allclose(single, view.em_model.conditional().mean(), rtol=0, atol=0)
    assert dl.imputed_button.filename == f"wine_mcar_em_K2_imputed{suffix}"
    dl.n_imputations = 2
    check_imputations(click(dl.multiple_button), suffix, data, 2)
    assert dl.multiple_button.filename == f"wine_mcar_em_K2_imputed_m2{suffix}"
    em = view.em_model
    said = {"tol": f"converged after {em.iteration} iterations", "max_iter": f"stopped at max_iter = {em.iteration}"}
    assert "EM mixture shown (K = 2" in dl._status.object and said[em.stop_reason] in dl._status.object


def test_conditional_page_draws_follow_the_seed_and_the_density(conditional_view):
    view = conditional_view
    data = view.em_model.data_model.data
    a = view.imputations(3).samples
    np.testing.assert_array_equal(a, view.imputations(3).samples)  # reproducible (seed)
    expected = view.em_model.conditional().sample(3, np.random.default_rng(view.seed))
    np.testing.assert_array_equal(a, expected)
    view.model_kind = "vb"
    try:
        view.density = "student_t"
        imp = view.imputations(2)
        cm = view.vb_model.predictive_conditional()
        np.testing.assert_array_equal(imp.imputed, cm.mean())
        np.testing.assert_array_equal(imp.samples, cm.sample(2, np.random.default_rng(view.seed)))
        view.downloads.file_format = "CSV"
        check_imputations(click(view.downloads.multiple_button), ".csv", data, view.downloads.n_imputations)
        assert "variational DP mixture" in view.downloads._status.object
        assert "Student-t predictive" in view.downloads._status.object
        assert view.downloads.multiple_button.filename.startswith("wine_mcar_vb_K10_")
    finally:
        view.param.update(model_kind="em", density="plugin")


def test_conditional_page_without_a_model_says_so(conditional_view, monkeypatch):
    dl = conditional_view.downloads
    monkeypatch.setattr(conditional_view, "conditional", lambda X: None)
    assert click(dl.imputed_button) is None
    assert dl._error.visible and "No fitted model yet" in dl._error.object
    with pytest.raises(BadInputError):
        conditional_view.imputations(1)


def test_conditional_page_non_finite_imputations_are_refused(conditional_view, monkeypatch):
    class Broken:
        def mean(self):
            out = conditional_view.em_model.conditional().mean().copy()
            out[3, 0] = np.nan
            return out

    monkeypatch.setattr(conditional_view, "conditional", lambda X: Broken())
    with pytest.raises(BadInputError, match=r"no finite conditional mean for 1 row\(s\) \(rows 3\)"):
        conditional_view.imputations(0)
