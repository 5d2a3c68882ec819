"""Headless tests of the "Data & mechanism" view: helpers against oracles, and the plots' data."""

from __future__ import annotations

import numpy as np
import panel as pn
import pytest
from bokeh.document import Document
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from explorer.core.data import IncompleteData
from explorer.ui.state.data_model import DataModel
from explorer.ui.components.data_controls import DataControls
from explorer.ui.pages.data_mechanism import (
    MISSING_PIXEL,
    DataMechanismView,
    histogram_edges,
    histogram_parts,
    image_mosaic,
    matrix_rows,
    mechanism_markdown,
    pattern_order,
    pattern_table,
)
from tests._text_checks import shown


def _arrays(obj):
    """Every numeric array / number inside piped data (dicts, lists, tuples)."""
    if isinstance(obj, dict):
        for v in obj.values():
            yield from _arrays(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _arrays(v)
    elif isinstance(obj, np.ndarray) and obj.dtype.kind in "biuf":
        yield obj
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        yield np.asarray(obj)


def assert_no_nan(view):
    for name, frame in view.frames.items():
        for arr in _arrays(frame):
            assert np.isfinite(arr.astype(float)).all(), f"non-finite value drawn in {name}"


@pytest.fixture
def view():
    return DataMechanismView(data_model=DataModel(dataset="iris", mechanism="nmar_lowest", rate=0.3))


# ----------------------------------------------------------------------------- pure helpers
@given(arrays(bool, st.tuples(st.integers(1, 40), st.integers(1, 5))))
def test_pattern_order_groups_rows_by_decreasing_pattern_frequency(missing):
    order, patterns, counts = pattern_order(missing)
    n = missing.shape[0]
    assert sorted(order.tolist()) == list(range(n))  # a permutation
    assert counts.sum() == n and np.all(np.diff(counts) <= 0)
    # the rows, in this order, run through the patterns block by block
    expected = np.repeat(patterns, counts, axis=0)
    np.testing.assert_array_equal(missing[order], expected)
    # inside a block the original order is kept
    start = 0
    for c in counts:
        block = order[start:start + c]
        assert np.all(np.diff(block) > 0)
        start += c
    # same patterns and counts as IncompleteData.pattern_counts (ties included)
    values = np.where(missing, np.nan, 1.0)
    values[:, missing.all(axis=0)] = np.nan
    if not missing.all(axis=0).any():
        ref_p, ref_c = IncompleteData.from_array(values).pattern_counts()
        np.testing.assert_array_equal(ref_p, patterns)
        np.testing.assert_array_equal(ref_c, counts)


def test_pattern_order_known_example():
    missing = np.array([[0, 1], [0, 0], [0, 1], [1, 0], [0, 1]], dtype=bool)
    order, patterns, counts = pattern_order(missing)
    assert order.tolist() == [0, 2, 4, 1, 3]
    assert counts.tolist() == [3, 1, 1]
    np.testing.assert_array_equal(patterns, [[0, 1], [0, 0], [1, 0]])


def test_matrix_rows_thins_large_data_evenly(rng):
    missing = rng.random((5000, 3)) < 0.2
    rows = matrix_rows(missing, sort=False, max_rows=2000)
    assert rows.size == 2000 and rows[0] == 0 and rows[-1] == 4999 and np.all(np.diff(rows) > 0)
    sorted_rows = matrix_rows(missing, sort=True, max_rows=2000)
    # the thinned picture keeps the share of complete rows (the largest pattern) to within 1 %
    share_all = (~missing.any(axis=1)).mean()
    share_shown = (~missing[sorted_rows].any(axis=1)).mean()
    assert abs(share_all - share_shown) < 0.01
    assert matrix_rows(missing[:50], sort=False, max_rows=2000).tolist() == list(range(50))


def test_pattern_table_counts_and_names():
    patterns = np.array([[True, False, False], [False, False, False]])
    table = pattern_table(patterns, np.array([3, 1]), ["a", "b", "c"])
    assert table["rows"].tolist() == [3, 1]
    assert table["share"].tolist() == ["75.0%", "25.0%"]
    assert table["pattern"].tolist() == ["■··", "···"]
    assert table["missing columns"].tolist() == ["a", "(complete rows)"]


def test_histogram_edges_binary_and_continuous():
    np.testing.assert_allclose(histogram_edges([0, 1, 1, 0, np.nan]), [-0.5, 0.5, 1.5])
    edges = histogram_edges(np.linspace(0, 1, 1000))
    assert 2 <= edges.size - 1 <= 40 and edges[0] == 0 and edges[-1] == 1
    np.testing.assert_allclose(histogram_edges([2.0, 2.0]), [1.5, 2.5])


def test_histogram_parts_add_up_and_show_nmar_bias(view):
    data = view.data_model.data
    j = int(np.argmax(data.missing.mean(axis=0)))
    parts = histogram_parts(data.values[:, j], data.missing[:, j], data.truth[:, j])
    np.testing.assert_array_equal(parts["observed"] + parts["missing"], parts["complete"])
    assert parts["complete"].sum() == data.n_samples
    # nmar_lowest removes the lowest values: the missing counts sit left of the observed ones
    mis_bins, obs_bins = np.flatnonzero(parts["missing"]), np.flatnonzero(parts["observed"])
    assert mis_bins.max() <= obs_bins.min()
    assert parts["observed_mean"] > parts["true_mean"]
    np.testing.assert_allclose(parts["true_mean"], data.truth[:, j].mean())


def test_histogram_parts_without_truth():
    values = np.array([1.0, np.nan, 3.0, 2.0])
    parts = histogram_parts(values, np.isnan(values))
    assert parts["complete"].sum() == 0 and parts["missing"].sum() == 0 and parts["observed"].sum() == 3
    assert parts["true_mean"] == parts["observed_mean"] == 2.0 and not parts["has_truth"]


def test_image_mosaic_colours_missing_pixels():
    truth = np.array([[0.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0]])
    missing = np.array([[True, False, False, False], [False, False, False, True]])
    images = np.where(missing, np.nan, truth)
    out = image_mosaic(images, missing, (2, 2), n_cols=2, truth=truth, pad=1)
    assert out.dtype == np.uint8 and out.shape == (2 * 3 + 1, 2 * 3 + 1, 3)
    # second mosaic row = masked images; image 0 pixel (0, 0) and image 1 pixel (1, 1) are missing
    assert tuple(out[4, 1]) == MISSING_PIXEL and tuple(out[5, 5]) == MISSING_PIXEL
    assert tuple(out[1, 1]) == (255, 255, 255)  # the truth row: value 0 = white
    assert tuple(out[1, 2]) == (0, 0, 0)  # value 1 = ink
    assert (out == np.array(MISSING_PIXEL, dtype=np.uint8)).all(axis=-1).sum() == 2


# ----------------------------------------------------------------------------- the view
def test_view_renders_and_draws_the_mask(view):
    root = pn.panel(view).get_root(Document())
    assert root is not None
    data = view.data_model.data
    sent = view.frames["matrix"]
    np.testing.assert_array_equal(sent["image"], data.missing[sent["rows"]].astype(np.uint8))
    assert sent["columns"] == list(data.columns) and sent["n_total"] == data.n_samples
    assert_no_nan(view)


def test_a_frame_only_changes_data_never_the_documents_models(view):
    """Issue 19: the figures are built once; a new mechanism, rate, column, row order or data set assigns data only."""
    doc = Document()
    doc.add_root(pn.panel(view).get_root(doc))
    figures = [view._matrix.figure, view._rates.figure, view._marginal.figure]
    in_figures = {m.id for f in figures for m in f.references()}
    sources = [view._matrix.source, view._rates.source, *view._marginal.sources.values()]
    view.data_model.rate = 0.1
    view.sort_by_pattern = False
    view.column = "petal_width"
    view.data_model.mechanism = "mcar"
    view.data_model.dataset = "wine"  # 13 columns: taller rate chart, more ticks
    view.data_model.load_csv(b"a,b,c\n1,2,3\n2,,5\n3,4,?\n4,5,6\n5,7,8\n", "small.csv")  # fewer columns
    assert {m.id for f in figures for m in f.references()} == in_figures
    assert in_figures <= {m.id for m in doc.models}
    assert [view._matrix.source, view._rates.source, *view._marginal.sources.values()] == sources
    data = view.data_model.data
    assert data.n_features == 3
    # the figures show the last frames
    matrix = view.frames["matrix"]
    np.testing.assert_array_equal(view._matrix.source.data["image"][0], matrix["image"].astype(np.float32))
    assert view._matrix.source.data["dh"] == [data.n_samples] and view._matrix.y_range.start == data.n_samples
    assert view._matrix.figure.title.text == "Missingness matrix (original order)"
    np.testing.assert_array_equal(view._rates.source.data["right"], data.missing.mean(axis=0))
    assert view._rates.ticker.ticks == [0.5, 1.5, 2.5] and view._rates.figure.height == 220
    assert view._rates.figure.yaxis[0].major_label_overrides == {0.5: "a", 1.5: "b", 2.5: "c"}
    marginal = view.frames["marginal"]
    np.testing.assert_array_equal(view._marginal.values("observed"), marginal["parts"]["observed"])
    assert view._marginal.figure.title.text == marginal["title"]
    assert view._marginal.spans["observed_mean"].location == marginal["parts"]["observed_mean"]


def test_a_new_data_set_draws_every_plot_once(view, monkeypatch):
    """The column picker the draw updates asks for the marginal again: that request is covered by the same draw
    (two changes of one source in one held message reached BokehJS as columns of different lengths: "Size
    mismatch")."""
    pn.panel(view).get_root(Document())
    calls = {"matrix": 0, "rates": 0, "marginal": 0}
    for name, plot in (("matrix", view._matrix), ("rates", view._rates), ("marginal", view._marginal)):
        update = plot.update
        monkeypatch.setattr(plot, "update", lambda *a, _u=update, _n=name, **k: (calls.__setitem__(_n, calls[_n] + 1),
                                                                                _u(*a, **k))[1])
    view.data_model.dataset = "wine"
    assert calls == {"matrix": 1, "rates": 1, "marginal": 1}
    assert view.frames["marginal"]["column"] == view.column and view._column.value == view.column


def test_mechanism_change_updates_the_matrix_data(view):
    pn.panel(view).get_root(Document())
    before = view.frames["matrix"]["image"].copy()
    view.data_model.mechanism = "mcar"
    data = view.data_model.data
    sent = view.frames["matrix"]
    assert not np.array_equal(before, sent["image"])
    np.testing.assert_array_equal(sent["image"], data.missing[matrix_rows(data.missing, True)].astype(np.uint8))
    assert "MCAR" in view._explain.object and "mcar" in view._explain.object
    assert_no_nan(view)


def test_sorted_order_is_by_pattern_and_toggle_restores_original(view):
    data = view.data_model.data
    order, patterns, counts = pattern_order(data.missing)
    np.testing.assert_array_equal(view.frames["matrix"]["rows"], order)
    np.testing.assert_array_equal(view.frames["matrix"]["image"].astype(bool), np.repeat(patterns, counts, 0))
    view.sort_by_pattern = False
    np.testing.assert_array_equal(view.frames["matrix"]["rows"], np.arange(data.n_samples))
    assert view.frames["matrix"]["sort"] is False


@pytest.mark.parametrize("mechanism", ["mcar", "mar_threshold", "nmar_lowest", "self_masking", "mcar_rows"])
def test_realised_rates_per_column_equal_the_mask_mean(view, mechanism):
    view.data_model.mechanism = mechanism
    data = view.data_model.data
    np.testing.assert_allclose(view.frames["rates"]["rates"], data.missing.mean(axis=0))
    assert view.frames["rates"]["line"] == pytest.approx(view.data_model.rate)
    _, _, counts = pattern_order(data.missing)
    assert f"**{len(counts)}** distinct patterns" in view._stats.object
    assert view._table.object["rows"].sum() == min(counts.sum(), counts[:view.top_patterns].sum())


def test_marginal_column_follows_the_mechanism_and_the_user(view):
    view.data_model.param.update(mechanism="mar_threshold", rate=0.2)  # target = last column
    assert view.data_model.error == ""
    assert view.column == "petal_width"
    parts = view.frames["marginal"]["parts"]
    assert parts["missing"].sum() == view.data_model.data.missing[:, 3].sum()
    view._column.value = "sepal_width"  # the user picks another column: kept on a rate change
    assert view.column == "sepal_width" and view.frames["marginal"]["column"] == "sepal_width"
    view.data_model.rate = 0.1
    assert view.column == "sepal_width"
    view.data_model.mechanism = "mcar"  # a new mechanism: back to the most affected column
    rates = view.data_model.data.missing.mean(axis=0)
    assert view.column == view.data_model.data.columns[int(np.argmax(rates))]


def test_image_data_set_shows_masked_images(view):
    pn.panel(view).get_root(Document())
    assert not view._images_box.visible
    view.data_model.param.update(dataset="digits_5x7", mechanism="quarter")
    assert view.data_model.error == ""
    assert view._images_box.visible
    rgb = view.frames["images"]
    h, w = view.data_model.image_shape
    assert rgb.shape == (2 * (h + 1) + 1, 8 * (w + 1) + 1, 3)
    assert (rgb == np.array(MISSING_PIXEL, dtype=np.uint8)).all(axis=-1).sum() == (
        view.data_model.data.missing[np.linspace(0, 99, 8).round().astype(int)].sum())
    assert len(view.frames["matrix"]["columns"]) == 35
    assert_no_nan(view)
    view.data_model.param.update(dataset="iris", mechanism="mcar")
    assert not view._images_box.visible


def test_image_mask_on_tabular_data_keeps_the_plots(view):
    before = view.frames["matrix"]["image"].copy()
    view.data_model.mechanism = "square"
    assert "image mask" in view.data_model.error
    np.testing.assert_array_equal(view.frames["matrix"]["image"], before)
    # the explanation describes the mask on screen, not the setting that failed
    assert "nmar_lowest" in view._explain.object and "square" not in view._explain.object
    # the error is at the top of the main area (not down the sidebar), with a setting that works
    assert view.banner._layout.visible and not view.controls._error.visible
    text = shown(view.banner._alert)
    assert "image mask" in text and "still those of iris with nmar_lowest" in text
    assert view.banner._use.visible and view.banner._use.label == "Use mcar"
    results = view.main.objects[1]
    assert results.styles.get("opacity") == "0.35"  # dimmed: not the settings chosen
    view.banner._use.clicks += 1
    assert view.data_model.mechanism == "mcar" and view.data_model.error == ""
    assert not view.banner._layout.visible and "opacity" not in (results.styles or {})


def test_an_infeasible_rate_offers_the_largest_feasible_one(view):
    """Wine with mar_logistic at 30 %: only one target column can be missing (7.7 % at most)."""
    dm = view.data_model
    dm.param.update(dataset="wine", mechanism="mcar", rate=0.3)
    dm.mechanism = "mar_logistic"
    text = shown(view.banner._alert)
    assert "outside the feasible range" in text and "The largest feasible rate here is 7.7%" in text
    assert "still those of wine with mcar (30.1% missing)" in text  # realised rate of the mask on screen
    assert view.banner._use.label == "Use 7.6%"
    view.banner._use.clicks += 1
    assert dm.error == "" and dm.mask.mechanism == "mar_logistic" and dm.rate == 0.076
    assert "mar_logistic" in view._explain.object


def test_real_missing_values_without_truth():
    v = DataMechanismView(data_model=DataModel(dataset="hepatitis", mechanism="none"))
    pn.panel(v).get_root(Document())
    parts = v.frames["marginal"]["parts"]
    assert not parts["has_truth"] and parts["complete"].sum() == 0
    assert "unknown" in v._marginal_note.object
    assert "No mechanism" in mechanism_markdown(v.data_model)
    assert_no_nan(v)


def test_large_data_are_thinned_in_the_matrix():
    v = DataMechanismView(data_model=DataModel(dataset="three_blobs", n_samples=5000, mechanism="mcar"),
                          max_rows=1000)
    sent = v.frames["matrix"]
    assert sent["image"].shape == (1000, 2) and sent["n_total"] == 5000


@pytest.mark.parametrize("dataset", ["digits_8x8", "mnist", "photo_patches"])
def test_image_masks_work_on_every_image_data_set(dataset):
    """Every built-in image set takes the image masks (only digits_5x7 used to be known as an image)."""
    m = DataModel(dataset=dataset, n_samples=60, mechanism="square", mechanism_params={"size": 4})
    assert m.error == "" and m.image_shape is not None and m.mask.mechanism == "square"
    h, w = m.image_shape
    assert m.data.n_features == h * w and m.data.missing.sum(axis=1).max() == 16
    v = DataMechanismView(data_model=m)
    pn.panel(v).get_root(Document())
    assert v._images_box.visible


def test_a_data_set_that_cannot_take_the_mechanism_keeps_data_and_complete_together():
    m = DataModel(dataset="iris", mechanism="mcar", rate=0.2)
    before_complete, before_data = m.complete, m.data
    m.param.update(mechanism="square")  # refused on iris: iris stays
    m.dataset = "wine"  # still refused: the screen keeps iris, complete and data alike
    assert "image mask" in m.error and m.complete is before_complete and m.data is before_data
    m.dataset = "mnist"  # an image set: loads, with the square mask
    assert m.error == "" and m.data.name != before_data.name and m.mask.mechanism == "square"
    m.dataset = "iris"  # refused again, mnist stays ...
    mnist = m.complete
    assert m.complete is mnist and m.error
    m.mechanism = "mcar"  # ... and a tabular mechanism now applies to the selected data set, iris
    assert m.error == "" and m.complete.n_features == 4 and m.data.n_features == 4


def test_uploads_empty_files_separators_and_page_advice():
    m = DataModel(dataset="iris")
    assert not m.load_csv(b"", "empty.csv") and "empty.csv: the file is empty" in m.error
    assert not m.load_csv(b"a,b\n1,x\n2,3\n", "bad.csv")
    assert "Delete those columns from the file" in m.error and "drop_non_numeric" not in m.error
    assert m.load_csv(b"a;b;c\n1;2;3\n4;;6\n", "semicolons.csv")
    assert m.data.columns == ("a", "b", "c") and m.data.missing.sum() == 1
    assert m.load_csv(b"a\tb\n1\t2\n3\t4\n", "tabs.tsv") and m.data.n_features == 2
    assert m.load_csv(b"x\n1\n2\n\n3\n", "one_column.csv") and m.data.n_features == 1


def test_controls_offer_uploaded_only_once_there_is_something_uploaded():
    m = DataModel(dataset="iris")
    c = DataControls(model=m, allow_upload=False)
    assert "uploaded" not in c._dataset.options
    m.set_points(np.random.default_rng(0).normal(size=(20, 4)))
    assert m.dataset == "uploaded" and "uploaded" in c._dataset.options
    assert c._n.disabled  # "Rows (synthetic)" means nothing for uploaded data
    m.dataset = "three_blobs"
    assert not c._n.disabled and "uploaded" in c._dataset.options  # the points can still be chosen again


def test_the_summary_names_the_mechanism_on_screen_not_the_one_that_failed():
    m = DataModel(dataset="iris", mechanism="mar_rows", rate=0.3)
    c = DataControls(model=m)
    m.mechanism = "mar_threshold"  # 0.3 is above iris's feasible 0.25
    assert m.error and "mar_rows" in c._summary.object and "still showing" in c._summary.object
    assert "mar_threshold" not in c._summary.object


def _chosen(c, name: str, content: bytes | None, size: int | None = None, serial: int = 1) -> None:
    """What the browser side of the upload widget sends for a chosen file (None: refused for its size)."""
    import base64

    data = None if content is None else base64.b64encode(content).decode()
    c._upload.file = {"name": name, "size": len(content or b"") if size is None else size, "data": data,
                      "serial": serial}


def test_the_upload_widget_reports_an_empty_file():
    m = DataModel(dataset="iris")
    c = DataControls(model=m)
    _chosen(c, "ok.csv", b"a,b\n1,2\n3,4\n")
    assert m.dataset == "uploaded" and m.error == ""
    _chosen(c, "empty.csv", b"", serial=2)
    assert "empty.csv: the file is empty" in m.error and c._error.visible


def test_an_oversized_file_refused_by_the_browser_gets_a_message_and_loses_nothing():
    m = DataModel(dataset="iris")
    c = DataControls(model=m)
    before = m.data
    _chosen(c, "big.csv", None, size=53 * 2**20)
    assert "big.csv: the file has 53.0 MB; the limit is 10 MB" in shown(c._error) and c._error.visible
    assert m.data is before and m.dataset == "iris"
    _chosen(c, "ok.csv", b"a,b\n1,2\n3,4\n", serial=2)  # the next good file clears the message
    assert m.error == "" and not c._error.visible


@pytest.mark.parametrize("name, content, expected", [
    ("utf16.csv", "a,b\n1,2\n3,\n".encode("utf-16"), None),
    ("latin1.csv", "café,b\n1,2\n3,4\n".encode("latin-1"), None),
    ("data.pkl", b"\x80\x04\x95" + b"\x00" * 40, "binary file"),
    ("sheet.xlsx", b"PK\x03\x04" + b"\x00" * 40, "zip archive"),
    ("ragged.csv", b"a,b,c\n1,2,3\n1,2,3,4\n", "line 3 has 4 fields"),
])
def test_uploads_in_other_encodings_load_and_binary_files_are_refused_in_plain_words(name, content, expected):
    m = DataModel(dataset="iris")
    ok = m.load_csv(content, name)
    if expected is None:
        assert ok and m.error == "" and m.data.n_samples == 2
    else:
        assert not ok and expected in m.error and m.dataset == "iris"
        assert "Error tokenizing" not in m.error and "C error" not in m.error
