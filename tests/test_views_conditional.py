"""Headless tests of the conditional-density view: slices against ConditionalMixture, parsing, fitting."""

from __future__ import annotations

import threading
import time

import holoviews as hv
import numpy as np
import panel as pn
import pytest
from bokeh.document import Document

from explorer.core._validation import BadInputError
from explorer.ui.state.data_model import DataModel
from explorer.ui.state.em_model import EMModel
from explorer.ui.state.vb_model import VBModel
from explorer.ui.plots.conditional_frames import _slice1d_element, _weights_element
from explorer.ui.pages.conditional import (
    NONE,
    ConditionalView,
    mass_levels,
    parse_row,
)
from tests._text_checks import shown

COLUMNS = ["sepal_length", "sepal_width", "petal_length", "petal_width"]


def _arrays(obj):
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
    for name, pipe in view.pipes.items():
        for arr in _arrays(pipe.data):
            assert np.isfinite(arr.astype(float)).all(), f"non-finite value piped to {name}"


@pytest.fixture
def view():
    em = EMModel(data_model=DataModel(dataset="iris", mechanism="mcar", rate=0.3), n_components=3)
    v = ConditionalView(em_model=em)
    v.fit(wait=True)
    return v


# ----------------------------------------------------------------------------- parse_row
def test_parse_row_blanks_and_question_marks_are_missing():
    out = parse_row(" 5.1, ?, , NaN", COLUMNS)
    assert out[0] == 5.1 and np.isnan(out[1:]).all()
    np.testing.assert_array_equal(np.isnan(parse_row("1e0,2,?,-3.5", COLUMNS)), [False, False, True, False])


@pytest.mark.parametrize("text, match", [
    ("", "Type 4 values"),
    ("1, 2, ?", r"Expected 4 comma-separated values .* got 3"),
    ("1, 2, ?, 4, 5", "got 5"),
    ("1, abc, ?, 4", r"Value 2 \(sepal_width\) is 'abc', which is not a number"),
    ("1, inf, ?, 4", r"Value 2 \(sepal_width\) is 'inf'; give a finite number"),
    ("1, 2, 3, 4", "Nothing is missing"),
])
def test_parse_row_errors_are_readable(text, match):
    with pytest.raises(BadInputError, match=match):
        parse_row(text, COLUMNS)


def test_mass_levels_match_the_gaussian_oracle():
    # standard 2-D normal: {p >= t} holds mass q when t = (1 - q) / (2 pi)
    g = np.linspace(-6, 6, 601)
    xx, yy = np.meshgrid(g, g)
    density = np.exp(-0.5 * (xx**2 + yy**2)) / (2 * np.pi)
    levels = mass_levels(density, (g[1] - g[0]) ** 2, masses=(0.5, 0.8, 0.95))
    np.testing.assert_allclose(levels, (1 - np.array([0.95, 0.8, 0.5])) / (2 * np.pi), rtol=0.02)
    assert np.all(np.diff(levels) > 0)


# ----------------------------------------------------------------------------- the view
def test_view_renders_fits_and_reports(view):
    root = pn.panel(view).get_root(Document())
    assert root is not None
    em = view.em_model
    assert em.stop_reason == "tol" and "Converged" in view._status.object
    assert f"after {em.iteration} iterations" in view._status.object
    assert not view._progress.visible and not view._fit_button.disabled
    assert_no_nan(view)


def test_density_curve_is_the_conditional_marginal_of_the_chosen_row(view):
    data = view.em_model.data_model.data
    incomplete = np.flatnonzero(data.missing.any(axis=1))
    view.row_position = 5
    r = int(incomplete[5])
    f = COLUMNS.index(view.feature)
    assert data.missing[r, f]
    s = view.pipes["slice1d"].data["slice"]
    cm = view.em_model.conditional()  # all data rows
    density, components = cm.marginal_pdf(r, f, s["grid"])
    np.testing.assert_allclose(s["density"], density, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(s["components"], components, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(s["components"].sum(axis=0), s["density"], rtol=1e-12)
    assert s["mean"] == pytest.approx(cm.mean()[r, f])
    lower, upper = cm.interval(0.95)
    assert (s["lower"], s["upper"]) == (pytest.approx(lower[r, f]), pytest.approx(upper[r, f]))
    assert s["lower"] < s["mean"] < s["upper"]
    assert s["truth"] == data.truth[r, f]
    np.testing.assert_allclose(view.pipes["weights"].data["posterior"], cm.weights[r])
    assert s["samples"].shape == (view.n_draws,) and np.isfinite(s["samples"]).all()
    # the density integrates to ~1 on the grid (it spans +-4 sd of every component)
    assert np.trapezoid(s["density"], s["grid"]) == pytest.approx(1.0, abs=1e-3)
    table = view._table.object
    assert table.loc[f, "E[x | obs]"] == f"{cm.mean()[r, f]:.4g}" and table.loc[f, "observed"] == ""
    assert_no_nan(view)


def test_two_features_give_the_joint_slice(view):
    view.param.update(source="custom row", custom_text="6.8, 3.0, ?, ?")
    assert view._feature.options == ["petal_length", "petal_width"]
    view.feature2 = "petal_width"
    sent = view.pipes["slice2d"].data
    s = sent["slice"]
    cm = view.em_model.conditional(np.array([[6.8, 3.0, np.nan, np.nan]]))
    np.testing.assert_allclose(s["density"], cm.marginal_pdf_2d(0, 2, 3, s["gx"], s["gy"])[0], rtol=1e-10)
    assert s["density"].shape == (s["gy"].size, s["gx"].size)
    assert len(s["levels"]) == 3 and np.all(np.diff(s["levels"]) > 0)
    np.testing.assert_allclose(s["mean"], cm.mean()[0, [2, 3]])
    assert s["truth"] is None and s["samples"].shape == (view.n_draws, 2)
    assert view._pane2d.visible and not view._pane1d.visible
    assert "petal_length, petal_width" in sent["title"]
    view.feature2 = NONE
    assert view._pane1d.visible and not view._pane2d.visible
    assert_no_nan(view)


def test_custom_row_errors_are_shown_and_recovered(view):
    view.param.update(source="custom row", custom_text="6.8, abc, ?, ?")
    assert view._custom_error.visible and "not a number" in shown(view._custom_error)
    assert_no_nan(view)
    view.custom_text = "6.8, 3.0, ?, 1.8"
    assert not view._custom_error.visible
    assert view.feature == "petal_length" and view._feature2.options == [NONE]
    assert view.pipes["slice1d"].data["title"].startswith("custom row")
    assert view.pipes["slice1d"].data["slice"]["truth"] is None


def test_changing_k_refits_in_the_background(view):
    view.em_model.n_components = 2
    view.wait(timeout=30)
    em = view.em_model
    assert em.n_components == 2 and em.stop_reason in ("tol", "max_iter")
    assert len(view.pipes["weights"].data["posterior"]) == 2
    assert em.state.weights.shape == (2,) and "iterations" in view._status.object


def test_fit_button_without_auto_refit(view):
    view.auto_fit = False
    view.em_model.covariance_type = "diag"
    assert view.em_model.iteration == 0 and "press Fit" in view._status.object
    view._fit_button.clicks += 1
    view.wait(timeout=30)
    assert view.em_model.iteration > 0 and "Converged" in view._status.object
    # Fit on a converged model starts again from the initialisation and converges again
    run = view.em_model.run_id
    view._fit_button.clicks += 1
    view.wait(timeout=30)
    assert view.em_model.run_id == run + 1 and view.em_model.stop_reason == "tol"


def test_data_change_updates_the_rows(view):
    view.em_model.data_model.rate = 0.1
    view.wait(timeout=30)
    data = view.em_model.data_model.data
    np.testing.assert_array_equal(view._rows, np.flatnonzero(data.missing.any(axis=1)))
    assert view._row.end == len(view._rows) - 1
    view._random.clicks += 1
    assert 0 <= view.row_position < len(view._rows) and view.source == "data row"
    assert view.pipes["slice1d"].data["title"].startswith(f"row {view._rows[view.row_position]}")


def test_no_incomplete_row_is_explained():
    em = EMModel(data_model=DataModel(dataset="iris", mechanism="none"), n_components=2)
    v = ConditionalView(em_model=em)
    v.fit(wait=True)
    assert v._row.disabled and "No row has a missing value" in v._row_info.object
    assert_no_nan(v)


def test_default_view_builds_its_models():
    v = ConditionalView()
    assert v.em_model.data_model.dataset == "iris" and v.em_model.data_model.data.n_features == 4
    assert v.fit(wait=True) is not None and v.em_model.stop_reason


def test_a_new_run_stops_a_running_fit_when_auto_refit_is_off():
    em = EMModel(data_model=DataModel(dataset="wine", mechanism="mcar", rate=0.3), n_components=3, max_iter=300)
    v = ConditionalView(em_model=em, auto_fit=False)
    worker = v.fit()
    v.em_model.n_components = 2  # a new run while fitting: the old worker must not fit the new run
    worker.join(timeout=60)
    assert em.iteration == 0 and em.stop_reason == ""
    assert "press Fit" in v._status.object and not v._fit_button.disabled and not v._progress.visible


# ----------------------------------------------------------------------------- the variational model
def _vb_view(density="plugin"):
    em = EMModel(data_model=DataModel(dataset="iris", mechanism="mcar", rate=0.3), n_components=3)
    v = ConditionalView(em_model=em, auto_fit=True)
    v.fit(wait=True)
    v.param.update(model_kind="vb", density=density)
    v.wait(timeout=60)
    return v


def test_variational_model_is_fitted_when_chosen_and_its_slice_is_shown():
    v = _vb_view()
    vb, em = v.vb_model, v.em_model
    assert v.model is vb and vb.data_model is em.data_model
    assert vb.stop_reason in ("tol", "max_iter") and "effective components" in v._status.object
    assert v._vb_box.visible and not v._em_box.visible
    assert pn.panel(v).get_root(Document()) is not None
    data = em.data_model.data
    r = int(np.flatnonzero(data.missing.any(axis=1))[0])
    f = COLUMNS.index(v.feature)
    s = v.pipes["slice1d"].data["slice"]
    cm = vb.conditional()  # plug-in Gaussians N(m_k, Psi_k / nu_k), weights E[pi_k]
    np.testing.assert_allclose(s["density"], cm.marginal_pdf(r, f, s["grid"])[0], rtol=1e-10, atol=1e-14)
    assert s["mean"] == pytest.approx(cm.mean()[r, f])
    np.testing.assert_allclose(v.pipes["weights"].data["prior"], vb.state.weights)
    np.testing.assert_allclose(v.pipes["weights"].data["posterior"], cm.weights[r])
    assert "plug-in Gaussians" in v._row_info.object
    assert_no_nan(v)
    # back to EM: its converged fit is shown again, not refitted
    it = em.iteration
    v.model_kind = "em"
    assert em.iteration == it and v._em_box.visible and "effective" not in v._status.object
    np.testing.assert_allclose(v.pipes["weights"].data["prior"], em.state.weights)


def test_student_t_density_is_the_posterior_predictive_and_is_wider():
    v = _vb_view("student_t")
    vb = v.vb_model
    v.param.update(source="custom row", custom_text="6.8, 3.0, ?, 1.8")
    s = v.pipes["slice1d"].data["slice"]
    row = np.array([[6.8, 3.0, np.nan, 1.8]])
    t = vb.predictive_conditional(row)
    g = vb.conditional(row)
    np.testing.assert_allclose(s["density"], t.marginal_pdf(0, 2, s["grid"])[0], rtol=1e-10, atol=1e-14)
    assert s["mean"] == pytest.approx(t.mean()[0, 2])
    lo_t, hi_t = t.interval(0.95)
    lo_g, hi_g = g.interval(0.95)
    assert (s["lower"], s["upper"]) == (pytest.approx(lo_t[0, 2]), pytest.approx(hi_t[0, 2]))
    assert hi_t[0, 2] - lo_t[0, 2] > hi_g[0, 2] - lo_g[0, 2]  # parameter uncertainty widens the interval
    assert "Student-t predictive" in v._row_info.object
    # the plug-in density of the same row, then the joint 2-D t slice
    v.density = "plugin"
    np.testing.assert_allclose(v.pipes["slice1d"].data["slice"]["density"],
                               g.marginal_pdf(0, 2, v.pipes["slice1d"].data["slice"]["grid"])[0], rtol=1e-10)
    v.param.update(density="student_t", custom_text="6.8, 3.0, ?, ?", feature2="petal_width")
    s2 = v.pipes["slice2d"].data["slice"]
    t2 = vb.predictive_conditional(np.array([[6.8, 3.0, np.nan, np.nan]]))
    np.testing.assert_allclose(s2["density"], t2.marginal_pdf_2d(0, 2, 3, s2["gx"], s2["gy"])[0], rtol=1e-10)
    assert len(s2["levels"]) == 3 and v._pane2d.visible
    assert v._table.object.loc[3, "E[x | obs]"] == f"{t2.mean()[0, 3]:.4g}"


def test_data_change_refits_only_the_shown_model():
    v = _vb_view()
    em, vb = v.em_model, v.vb_model
    em.data_model.mask_seed += 1
    v.wait(timeout=60)
    assert vb.stop_reason in ("tol", "max_iter") and vb.iteration > 0
    assert em.iteration == 0 and em.stop_reason == ""  # reset by the new data, fitted when chosen again
    v.model_kind = "em"
    v.wait(timeout=60)
    assert em.stop_reason in ("tol", "max_iter") and "Converged" in v._status.object


def test_variational_settings_refit_and_errors_are_readable():
    v = _vb_view()
    vb = v.vb_model
    vb.nu0 = 2.5  # must be > D - 1 = 3
    v.wait(timeout=30)
    assert v._em_error.visible and "nu0 must be > n_features - 1 = 3" in shown(v._em_error)
    assert "No model" in v._status.object
    vb.param.update(nu0=0.0, n_components=4, update="thesis")
    v.wait(timeout=60)
    assert not v._em_error.visible and vb.state.n_components == 4 and vb.elbo is None
    assert "ELBO undefined" in v._status.object and len(v.pipes["weights"].data["prior"]) == 4


# ----------------------------------------------------------------------------- review fixes
def test_variational_model_fits_data_with_constant_columns_with_the_identity_prior():
    # digits_8x8 has always-blank border pixels: the page's data-scaled prior is undefined there
    em = EMModel(data_model=DataModel(dataset="iris", mechanism="mcar", rate=0.3), n_components=3)
    v = ConditionalView(em_model=em, model_kind="vb")
    v.fit(wait=True)
    vb = v.vb_model
    assert vb.covariance_prior == "observed_variance" and "W₀ = I" not in v._status.object
    em.data_model.dataset = "digits_8x8"
    v.wait(timeout=60)
    assert vb.covariance_prior == "identity" and not vb.error and not v._em_error.visible
    assert vb.stop_reason in ("tol", "max_iter") and "effective components" in v._status.object
    assert "prior scale W₀ = I: 9 constant column(s) (r0c0" in v._status.object
    s = v.pipes["slice1d"].data
    assert s["title"].startswith("row 0: p(r") and np.isfinite(s["slice"]["density"]).all()
    assert s["slice"]["density"].max() > 0
    assert len(v.pipes["weights"].data["prior"]) == vb.n_components
    assert_no_nan(v)
    # wide data: a table of at most 20 features that says so, the plotted feature included
    table = v._table.object
    assert len(table) == 20 and v.feature in set(table["feature"])
    assert v._table_note.visible and "The table shows 20 of the 64 features" in v._table_note.object
    # back to data without constant columns: the data-scaled prior again
    em.data_model.dataset = "iris"
    v.wait(timeout=60)
    assert vb.covariance_prior == "observed_variance" and "W₀ = I" not in v._status.object
    assert vb.stop_reason in ("tol", "max_iter") and not v._table_note.visible and len(v._table.object) == 4


def test_choosing_the_variational_model_on_constant_columns_fits_it():
    em = EMModel(data_model=DataModel(dataset="digits_8x8", mechanism="mcar", rate=0.3), n_components=3)
    v = ConditionalView(em_model=em)  # EM shown, not fitted (the app fits on load)
    assert v.vb_model.error  # reset by the data with the data-scaled prior, not shown yet
    v.model_kind = "vb"
    v.wait(timeout=60)
    assert v.vb_model.covariance_prior == "identity" and v.vb_model.stop_reason in ("tol", "max_iter")
    assert not v._em_error.visible and "W₀ = I" in v._status.object
    assert_no_nan(v)


def test_a_vb_model_passed_in_keeps_its_prior():
    data = DataModel(dataset="digits_8x8", mechanism="mcar", rate=0.3)
    vb = VBModel(data_model=data, covariance_prior="observed_variance")
    v = ConditionalView(em_model=EMModel(data_model=data), vb_model=vb, model_kind="vb")
    v.fit(wait=True)
    assert vb.covariance_prior == "observed_variance" and "constant" in v._em_error.object


def test_a_failed_fit_clears_the_weights_and_shows_the_full_error():
    v = _vb_view()
    assert len(v.pipes["weights"].data["prior"]) == v.vb_model.n_components
    v.vb_model.nu0 = 2.5  # invalid: no model
    v.wait(timeout=30)
    message = "nu0 must be > n_features - 1 = 3, got 2.5."
    assert v._em_error.visible and shown(v._em_error) == " ".join(message.split())
    assert " ".join(message.split()) in shown(v._row_info)  # the full text, next to the plots too
    assert v.pipes["weights"].data["prior"].size == 0 and v.pipes["weights"].data["posterior"].size == 0
    assert "no model" in v.pipes["weights"].data["title"]
    title = v.pipes["slice1d"].data["title"]
    assert "nu0" not in title and title == "No fitted model: see the message"
    assert v._table.object is None and not v._table_note.visible
    # the placeholder slice is drawn on a unit axis, not a 1e-12 one
    fig = hv.render(_slice1d_element(v.pipes["slice1d"].data))
    assert fig.y_range.end == pytest.approx(1.1)
    hv.render(_weights_element(v.pipes["weights"].data))  # the empty weights render
    # a custom row with no model: the model's error, not a parse error under the text box
    v.source = "custom row"
    assert not v._custom_error.visible and " ".join(message.split()) in shown(v._row_info)


def test_the_weights_legend_is_outside_the_bars():
    fig = hv.render(_weights_element({"prior": np.array([0.9, 0.05, 0.05]), "posterior": np.array([1.0, 0, 0])}))
    assert [type(m).__name__ for m in fig.above] == ["Legend"]
    assert not [m for m in fig.center if type(m).__name__ == "Legend"]


def test_the_row_slider_counts_like_the_row_read_out(view):
    n = len(view._rows)
    assert view._row.name == f"Incomplete row (of {n})" and "(tick + 1)" in view._row.format.code
    view.row_position = n - 1
    assert f"({n} of {n} incomplete rows)" in view._row_info.object
    assert not view._table_note.visible and len(view._table.object) == 4  # narrow data: every feature


class FakeDoc:
    """A served document as the worker sees it: records the UI updates handed to it."""

    def __init__(self):
        self.session_context = object()
        self.calls = []
        self.destroyed = False

    def add_next_tick_callback(self, fn):
        if self.destroyed:  # what Bokeh raises once the document is destroyed
            raise AttributeError("'DocumentCallbackManager' object has no attribute '_change_callbacks'")
        self.calls.append(fn)


@pytest.mark.parametrize("order", ["hook first", "document destroyed first"])
def test_after_the_session_is_destroyed_the_worker_stops_quietly(order, monkeypatch):
    crashes = []
    monkeypatch.setattr(threading, "excepthook", lambda args: crashes.append(args.exc_value))
    data = DataModel(dataset="wine", mechanism="mcar", rate=0.3)
    vb = VBModel(data_model=data, n_components=10, tol=0.0, max_iter=5000)  # a long fit
    v = ConditionalView(em_model=EMModel(data_model=data), vb_model=vb, model_kind="vb", auto_fit=False)
    doc = FakeDoc()
    v._session_doc = lambda: doc
    worker = v.fit()
    deadline = time.monotonic() + 30
    while not doc.calls and time.monotonic() < deadline:  # the first progress update (after 0.3 s)
        time.sleep(0.05)
    assert doc.calls and worker.is_alive()
    if order == "hook first":
        v._on_destroyed(None)
    else:  # Bokeh destroys the document before it runs the session-destroyed hooks
        doc.destroyed = True
    n_calls = len(doc.calls)
    worker.join(timeout=30)
    assert not worker.is_alive() and not crashes
    assert len(doc.calls) == n_calls  # nothing handed to the dead document
    assert vb.iteration < 1000 and v._closed.is_set()
    assert v.fit() is None  # no new fit for a closed session


def test_the_page_offers_only_data_sets_it_can_fit_interactively():
    from explorer.ui.pages.conditional import MAX_FEATURES, conditional_datasets

    names = conditional_datasets()
    assert "iris" in names and "digits_8x8" in names and "uploaded" in names
    assert "mnist" not in names and "photo_patches" not in names  # 784 / 256 pixels: minutes per fit
    view = ConditionalView(em_model=EMModel(data_model=DataModel(dataset="iris"), n_components=2))
    offered = set(view.controls._ds_options)
    assert offered == set(names) and MAX_FEATURES >= 64


def test_the_custom_row_follows_a_new_data_set():
    """The iris example row must not stay after switching to wine (a leftover of the earlier setting)."""
    v = ConditionalView(em_model=EMModel(data_model=DataModel(dataset="iris", mechanism="mcar", rate=0.3),
                                         n_components=1), auto_fit=False)
    assert len(parse_row(v.custom_text, COLUMNS)) == 4
    v.em_model.data_model.dataset = "wine"
    wine = v.em_model.data_model.data
    assert len(parse_row(v.custom_text, wine.columns)) == 13
    v.custom_text = ", ".join(["1"] * 12 + ["?"])  # the user's own row for these data is kept
    v.em_model.data_model.mask_seed = 5
    assert v.custom_text == ", ".join(["1"] * 12 + ["?"])
