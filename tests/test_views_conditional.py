"""Headless tests of the conditional-density view: slices against ConditionalMixture, parsing, fitting."""

from __future__ import annotations

import threading
import time

import numpy as np
import panel as pn
import pytest
from bokeh.document import Document

from explorer.core.validation import BadInputError
from explorer.ui.pages import conditional as conditional_page
from explorer.ui.pages.conditional import (
    NONE,
    ConditionalView,
    mass_levels,
    parse_row,
)
from explorer.ui.plots.density_slices import WeightBars
from explorer.ui.session import SessionWorker
from explorer.ui.state.data_model import DataModel
from explorer.ui.state.em_model import EMModel
from explorer.ui.state.vb_model import VBModel
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
    for name, frame in view.frames.items():
        for arr in _arrays(frame):
            assert np.isfinite(arr.astype(float)).all(), f"non-finite value drawn in {name}"


@pytest.fixture
def view():
    em = EMModel(data_model=DataModel(dataset="iris", mechanism="mcar", rate=0.3), n_components=3)
    v = ConditionalView(em_model=em)
    v.fit()
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


def test_a_frame_only_changes_data_never_the_documents_models(view):
    """Issue 19: the figures are built once; a new row, fit, K, data or a failed model assign source data only."""
    doc = Document()
    doc.add_root(pn.panel(view).get_root(doc))
    before = {m.id for m in doc.models}
    figures = [view._slice1d.figure, view._weights.figure]
    in_figures = {m.id for f in figures for m in f.references()}
    sources = [view._slice1d.curve, view._slice1d.components, view._weights.prior, view._weights.posterior]
    view.row_position = 7
    view.em_model.n_components = 2  # refitted: two bars instead of three
    view.em_model.data_model.mask_seed = 3
    view.param.update(source="custom row", custom_text="6.8, 3.0, ?, 1.8")
    assert {m.id for m in doc.models} == before
    view.em_model.covariance_type = "diag"
    assert {m.id for f in figures for m in f.references()} == in_figures
    assert [view._slice1d.curve, view._slice1d.components, view._weights.prior, view._weights.posterior] == sources
    # the figures show the last frame
    frame = view.frames["slice1d"]
    s = frame["slice"]
    np.testing.assert_array_equal(view._slice1d.curve.data["y"], s["density"])
    np.testing.assert_array_equal(view._slice1d.curve.data["x"], s["grid"])
    assert len(view._slice1d.components.data["ys"]) == len(s["components"]) == 2
    np.testing.assert_array_equal(view._slice1d.rug.data["x0"], s["samples"])
    assert (view._slice1d.band.left, view._slice1d.band.right) == (s["lower"], s["upper"])
    assert view._slice1d.mean.location == s["mean"] and view._slice1d.figure.title.text == frame["title"]
    np.testing.assert_array_equal(view._weights.posterior.data["top"], view.frames["weights"]["posterior"])
    np.testing.assert_array_equal(view._weights.prior.data["top"], view.em_model.state.weights)
    # the 2-D figure is made once, when a second feature is first picked; later 2-D frames change its data only
    view.param.update(custom_text="6.8, 3.0, ?, ?", feature2="petal_width")
    second = {m.id for m in view._slice2d.figure.references()}
    view.custom_text = "5.0, 3.5, ?, ?"
    view.feature2 = NONE
    view.feature2 = "petal_length" if view.feature == "petal_width" else "petal_width"
    assert {m.id for m in view._slice2d.figure.references()} == second
    s2 = view.frames["slice2d"]["slice"]
    np.testing.assert_array_equal(view._slice2d.image.data["image"][0], s2["density"].astype(np.float32))
    assert len(view._slice2d.contours.data["xs"]) >= len(s2["levels"])
    assert list(view._slice2d.mean.data["x"]) == [s2["mean"][0]]


def test_density_curve_is_the_conditional_marginal_of_the_chosen_row(view):
    data = view.em_model.data_model.data
    incomplete = np.flatnonzero(data.missing.any(axis=1))
    view.row_position = 5
    r = int(incomplete[5])
    f = COLUMNS.index(view.feature)
    assert data.missing[r, f]
    s = view.frames["slice1d"]["slice"]
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
    np.testing.assert_allclose(view.frames["weights"]["posterior"], cm.weights[r])
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
    sent = view.frames["slice2d"]
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
    assert view.frames["slice1d"]["title"].startswith("custom row")
    assert view.frames["slice1d"]["slice"]["truth"] is None


def test_changing_k_refits_in_the_background(view):
    view.em_model.n_components = 2
    em = view.em_model
    assert em.n_components == 2 and em.stop_reason in ("tol", "max_iter")
    assert len(view.frames["weights"]["posterior"]) == 2
    assert em.state.weights.shape == (2,) and "iterations" in view._status.object


def test_fit_button_without_auto_refit(view):
    view.auto_fit = False
    view.em_model.covariance_type = "diag"
    assert view.em_model.iteration == 0 and "press Fit" in view._status.object
    view._fit_button.clicks += 1
    assert view.em_model.iteration > 0 and "Converged" in view._status.object
    # Fit on a converged model starts again from the initialisation and converges again
    run = view.em_model.run_id
    view._fit_button.clicks += 1
    assert view.em_model.run_id == run + 1 and view.em_model.stop_reason == "tol"


def test_data_change_updates_the_rows(view):
    view.em_model.data_model.rate = 0.1
    data = view.em_model.data_model.data
    np.testing.assert_array_equal(view._rows, np.flatnonzero(data.missing.any(axis=1)))
    assert view._row.end == len(view._rows) - 1
    view._random.clicks += 1
    assert 0 <= view.row_position < len(view._rows) and view.source == "data row"
    assert view.frames["slice1d"]["title"].startswith(f"row {view._rows[view.row_position]}")


def test_no_incomplete_row_is_explained():
    em = EMModel(data_model=DataModel(dataset="iris", mechanism="none"), n_components=2)
    v = ConditionalView(em_model=em)
    v.fit()
    assert v._row.disabled and "No row has a missing value" in v._row_info.object
    assert_no_nan(v)


def test_default_view_builds_its_models():
    v = ConditionalView()
    assert v.em_model.data_model.dataset == "iris" and v.em_model.data_model.data.n_features == 4
    assert v.fit() and v.em_model.stop_reason


def test_a_new_run_stops_a_running_fit_when_auto_refit_is_off(served):
    em = EMModel(data_model=DataModel(dataset="wine", mechanism="mcar", rate=0.3), n_components=3, max_iter=300)
    v = ConditionalView(em_model=em, auto_fit=False)
    served.run_callbacks()
    worker = SessionWorker.of(served)
    assert v.fit() and worker.busy()  # queued on the session's worker
    v.em_model.n_components = 2  # a new run while fitting: the old fit must not fit the new run
    _wait_for_jobs(worker, 1)
    served.run_callbacks()
    assert em.iteration == 0 and em.stop_reason == ""
    assert "press Fit" in v._status.object and not v._fit_button.disabled and not v._progress.visible


# ----------------------------------------------------------------------------- the variational model
def _vb_view(density="plugin"):
    em = EMModel(data_model=DataModel(dataset="iris", mechanism="mcar", rate=0.3), n_components=3)
    v = ConditionalView(em_model=em, auto_fit=True)
    v.fit()
    v.param.update(model_kind="vb", density=density)
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
    s = v.frames["slice1d"]["slice"]
    cm = vb.conditional()  # plug-in Gaussians N(m_k, Psi_k / nu_k), weights E[pi_k]
    np.testing.assert_allclose(s["density"], cm.marginal_pdf(r, f, s["grid"])[0], rtol=1e-10, atol=1e-14)
    assert s["mean"] == pytest.approx(cm.mean()[r, f])
    np.testing.assert_allclose(v.frames["weights"]["prior"], vb.state.weights)
    np.testing.assert_allclose(v.frames["weights"]["posterior"], cm.weights[r])
    assert "plug-in Gaussians" in v._row_info.object
    assert_no_nan(v)
    # back to EM: its converged fit is shown again, not refitted
    it = em.iteration
    v.model_kind = "em"
    assert em.iteration == it and v._em_box.visible and "effective" not in v._status.object
    np.testing.assert_allclose(v.frames["weights"]["prior"], em.state.weights)


def test_student_t_density_is_the_posterior_predictive_and_is_wider():
    v = _vb_view("student_t")
    vb = v.vb_model
    v.param.update(source="custom row", custom_text="6.8, 3.0, ?, 1.8")
    s = v.frames["slice1d"]["slice"]
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
    np.testing.assert_allclose(v.frames["slice1d"]["slice"]["density"],
                               g.marginal_pdf(0, 2, v.frames["slice1d"]["slice"]["grid"])[0], rtol=1e-10)
    v.param.update(density="student_t", custom_text="6.8, 3.0, ?, ?", feature2="petal_width")
    s2 = v.frames["slice2d"]["slice"]
    t2 = vb.predictive_conditional(np.array([[6.8, 3.0, np.nan, np.nan]]))
    np.testing.assert_allclose(s2["density"], t2.marginal_pdf_2d(0, 2, 3, s2["gx"], s2["gy"])[0], rtol=1e-10)
    assert len(s2["levels"]) == 3 and v._pane2d.visible
    assert v._table.object.loc[3, "E[x | obs]"] == f"{t2.mean()[0, 3]:.4g}"


def test_data_change_refits_only_the_shown_model():
    v = _vb_view()
    em, vb = v.em_model, v.vb_model
    em.data_model.mask_seed += 1
    assert vb.stop_reason in ("tol", "max_iter") and vb.iteration > 0
    assert em.iteration == 0 and em.stop_reason == ""  # reset by the new data, fitted when chosen again
    v.model_kind = "em"
    assert em.stop_reason in ("tol", "max_iter") and "Converged" in v._status.object


def test_variational_settings_refit_and_errors_are_readable():
    v = _vb_view()
    vb = v.vb_model
    vb.nu0 = 2.5  # must be > D - 1 = 3
    assert v._em_error.visible and "nu0 must be > n_features - 1 = 3" in shown(v._em_error)
    assert "No model" in v._status.object
    vb.param.update(nu0=0.0, n_components=4, update="thesis")
    assert not v._em_error.visible and vb.state.n_components == 4 and vb.elbo is None
    assert "ELBO undefined" in v._status.object and len(v.frames["weights"]["prior"]) == 4


# ----------------------------------------------------------------------------- review fixes
def test_variational_model_fits_data_with_constant_columns_with_the_identity_prior():
    # digits_8x8 has always-blank border pixels: the page's data-scaled prior is undefined there
    em = EMModel(data_model=DataModel(dataset="iris", mechanism="mcar", rate=0.3), n_components=3)
    v = ConditionalView(em_model=em, model_kind="vb")
    v.fit()
    vb = v.vb_model
    assert vb.covariance_prior == "observed_variance" and "W₀ = I" not in v._status.object
    em.data_model.dataset = "digits_8x8"
    assert vb.covariance_prior == "identity" and not vb.error and not v._em_error.visible
    assert vb.stop_reason in ("tol", "max_iter") and "effective components" in v._status.object
    assert "prior scale W₀ = I: 9 constant column(s) (r0c0" in v._status.object
    s = v.frames["slice1d"]
    assert s["title"].startswith("row 0: p(r") and np.isfinite(s["slice"]["density"]).all()
    assert s["slice"]["density"].max() > 0
    assert len(v.frames["weights"]["prior"]) == vb.n_components
    assert_no_nan(v)
    # wide data: a table of at most 20 features that says so, the plotted feature included
    table = v._table.object
    assert len(table) == 20 and v.feature in set(table["feature"])
    assert v._table_note.visible and "The table shows 20 of the 64 features" in v._table_note.object
    # back to data without constant columns: the data-scaled prior again
    em.data_model.dataset = "iris"
    assert vb.covariance_prior == "observed_variance" and "W₀ = I" not in v._status.object
    assert vb.stop_reason in ("tol", "max_iter") and not v._table_note.visible and len(v._table.object) == 4


def test_choosing_the_variational_model_on_constant_columns_fits_it():
    em = EMModel(data_model=DataModel(dataset="digits_8x8", mechanism="mcar", rate=0.3), n_components=3)
    v = ConditionalView(em_model=em)  # EM shown, not fitted (the app fits on load)
    assert v.vb_model.error  # reset by the data with the data-scaled prior, not shown yet
    v.model_kind = "vb"
    assert v.vb_model.covariance_prior == "identity" and v.vb_model.stop_reason in ("tol", "max_iter")
    assert not v._em_error.visible and "W₀ = I" in v._status.object
    assert_no_nan(v)


def test_a_vb_model_passed_in_keeps_its_prior():
    data = DataModel(dataset="digits_8x8", mechanism="mcar", rate=0.3)
    vb = VBModel(data_model=data, covariance_prior="observed_variance")
    v = ConditionalView(em_model=EMModel(data_model=data), vb_model=vb, model_kind="vb")
    v.fit()
    assert vb.covariance_prior == "observed_variance" and "constant" in v._em_error.object


def test_a_failed_fit_clears_the_weights_and_shows_the_full_error():
    v = _vb_view()
    assert len(v.frames["weights"]["prior"]) == v.vb_model.n_components
    v.vb_model.nu0 = 2.5  # invalid: no model
    message = "nu0 must be > n_features - 1 = 3, got 2.5."
    assert v._em_error.visible and shown(v._em_error) == " ".join(message.split())
    assert " ".join(message.split()) in shown(v._row_info)  # the full text, next to the plots too
    assert v.frames["weights"]["prior"].size == 0 and v.frames["weights"]["posterior"].size == 0
    assert "no model" in v.frames["weights"]["title"]
    title = v.frames["slice1d"]["title"]
    assert "nu0" not in title and title == "No fitted model: see the message"
    assert v._table.object is None and not v._table_note.visible
    # the placeholder slice is drawn on a unit axis, not a 1e-12 one
    assert v._slice1d.y_range.end == pytest.approx(1.1)
    assert len(v._weights.prior.data["top"]) == 0 and len(v._weights.posterior.data["top"]) == 0  # no bars
    # a custom row with no model: the model's error, not a parse error under the text box
    v.source = "custom row"
    assert not v._custom_error.visible and " ".join(message.split()) in shown(v._row_info)


def test_the_weights_legend_is_outside_the_bars():
    bars = WeightBars()
    bars.update({"prior": np.array([0.9, 0.05, 0.05]), "posterior": np.array([1.0, 0, 0])})
    fig = bars.figure
    assert [type(m).__name__ for m in fig.above] == ["Legend"]
    assert not [m for m in fig.center if type(m).__name__ == "Legend"]


def test_the_row_slider_counts_like_the_row_read_out(view):
    n = len(view._rows)
    assert view._row.name == f"Incomplete row (of {n})" and "(tick + 1)" in view._row.format.code
    view.row_position = n - 1
    assert f"({n} of {n} incomplete rows)" in view._row_info.object
    assert not view._table_note.visible and len(view._table.object) == 4  # narrow data: every feature


class FakeDoc:
    """A served session's document as a page and its worker use it: what they hand to the event loop is queued
    (:meth:`run_callbacks` runs it, as the loop would) and :meth:`destroy` does what Bokeh does at the session's end."""

    def __init__(self):
        self.session_context = object()
        self.calls = []
        self.hooks = []
        self.destroyed = False

    def add_next_tick_callback(self, fn):
        if self.destroyed:  # what Bokeh raises once the document is destroyed
            raise AttributeError("'DocumentCallbackManager' object has no attribute '_change_callbacks'")
        self.calls.append(fn)

    def on_session_destroyed(self, *callbacks):
        self.hooks.extend(callbacks)

    def run_callbacks(self):
        while self.calls:
            self.calls.pop(0)()

    def destroy(self):
        """The document loses its session (Bokeh clears the session context and its callbacks)."""
        self.destroyed = True
        self.session_context = None

    def run_hooks(self):
        for hook in self.hooks:
            hook(None)


@pytest.fixture
def served(monkeypatch):
    """Pages made in this test are served: their document is a :class:`FakeDoc`, their fits run on its worker."""
    doc = FakeDoc()
    monkeypatch.setattr(conditional_page, "served_doc", lambda: doc)
    worker = SessionWorker.of(doc)
    yield doc
    worker.stop()


def _wait_for_jobs(worker, n: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while worker.jobs_done < n and time.monotonic() < deadline:
        time.sleep(0.02)
    assert worker.jobs_done >= n, "the worker did not finish its job in time"


def test_a_served_fit_runs_on_the_sessions_worker_and_is_drawn_on_its_loop(served):
    v = ConditionalView(em_model=EMModel(data_model=DataModel(dataset="iris", mechanism="mcar", rate=0.3),
                                         n_components=3))
    served.run_callbacks()
    threads = []
    step = v.em_model.step
    v.em_model.step = lambda run_id=None: (threads.append(threading.current_thread().name), step(run_id))[1]
    assert v.fit() and v._progress.visible and v._status.object.startswith("Fitting")
    worker = SessionWorker.of(served)
    _wait_for_jobs(worker, 1)
    assert set(threads) == {"explorer-session-worker"}  # one compute thread per session, not one per fit
    assert v._progress.visible  # nothing is drawn from the worker: the result waits for the event loop
    served.run_callbacks()
    assert v.em_model.stop_reason == "tol" and "Converged" in v._status.object and not v._progress.visible
    assert v.frames["slice1d"]["title"].startswith("row 0: p(")


@pytest.mark.parametrize("order", ["hook first", "document destroyed first"])
def test_after_the_session_is_destroyed_the_worker_stops_quietly(order, served, monkeypatch):
    crashes = []
    monkeypatch.setattr(threading, "excepthook", lambda args: crashes.append(args.exc_value))
    data = DataModel(dataset="wine", mechanism="mcar", rate=0.3)
    vb = VBModel(data_model=data, n_components=10, tol=0.0, max_iter=5000)  # a long fit
    v = ConditionalView(em_model=EMModel(data_model=data), vb_model=vb, model_kind="vb", auto_fit=False)
    served.run_callbacks()
    worker = SessionWorker.of(served)
    assert v.fit()
    deadline = time.monotonic() + 30
    while not served.calls and time.monotonic() < deadline:  # the first progress update (after 0.3 s)
        time.sleep(0.05)
    assert served.calls and worker.busy()
    if order == "hook first":
        served.run_hooks()
    else:  # Bokeh destroys the document before it runs the session-destroyed hooks
        served.destroy()
    n_calls = len(served.calls)
    _wait_for_jobs(worker, 1, timeout=30)
    if order != "hook first":
        served.run_hooks()
    assert not crashes and worker.stopped
    assert len(served.calls) == n_calls  # nothing handed to the dead document
    assert vb.iteration < 1000 and v._session_gone()
    assert not v.fit()  # no new fit for a closed session


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
