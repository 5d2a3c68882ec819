"""Headless tests of the regression page (explorer.ui.pages.regression): its Bokeh figures, frames and worker."""

from __future__ import annotations

import threading
import time

import numpy as np
import panel as pn
import pytest

from tests._fake_session import FakeDoc
from bokeh.document import Document
from bokeh.events import Tap

from explorer.ui.pages import regression as regression_page
from explorer.ui.pages.regression import RegressionView, density_frame, scatter_frame
from explorer.ui.session import SessionWorker
from explorer.ui.state import regression_model
from explorer.ui.state.data_model import DataModel
from explorer.ui.state.regression_model import RegressionModel


def _view(auto_fit: bool = False, **settings) -> RegressionView:
    data = DataModel(dataset="ring", n_samples=150, mechanism="mcar", rate=0.2)
    return RegressionView(model=RegressionModel(data_model=data, n_components=4, **settings), auto_fit=auto_fit)


@pytest.fixture
def view():
    return _view()


def _column(source, name) -> np.ndarray:
    return np.asarray(source.data[name], dtype=float)


def test_a_frame_only_changes_data_never_the_documents_models(view):
    """Issue 19: the figures are built once; steps, x0, the band, a new run and new data assign source data only."""
    doc = Document()
    doc.add_root(pn.Column(view.sidebar, view.main).get_root(doc))
    figures = [view._scatter.figure, view._density.figure]
    before = {m.id for m in doc.models}
    in_figures = {m.id for f in figures for m in f.references()}
    for _ in range(3):
        view.player.step()
    view.model.x0 = 1.0
    view.model.level = 0.8
    view.model.covariance_type = "diag"  # a new run
    view.player.step()
    assert {m.id for m in doc.models} == before
    view.data_model.mechanism = "mar_threshold"  # new data: other widgets may show, the figures keep their models
    view.player.step()
    assert {m.id for f in figures for m in f.references()} == in_figures
    # the figures show the last read-outs
    r = view.readouts
    assert r.iteration == view.model.iteration == 1 and r.run_id == view.model.run_id
    sf, df = view._scatter.frame, view._density.frame
    np.testing.assert_array_equal(_column(view._scatter.curve, "y"), r.curve.mean)
    np.testing.assert_array_equal(_column(view._scatter.curve, "lower"), r.curve.lower)
    np.testing.assert_array_equal(_column(view._scatter.sources["draws"], "y"), r.draws[:, 1])
    np.testing.assert_array_equal(_column(view._scatter.sources["observed"], "x"), r.scatter.observed[:, 0])
    np.testing.assert_array_equal(_column(view._density.density, "y"), r.slice.density)
    np.testing.assert_array_equal(_column(view._density.draws, "x"), r.slice.draws)
    assert view._scatter.figure.title.text == sf["title"] == "y against x · EM iteration 1"
    assert view._density.figure.title.text == df["title"] == f"p(y | x = {r.slice.x0:.3g})"
    assert view._scatter._band_item.label.value == "80% predictive band"
    assert view._density.figure.y_range.end == pytest.approx(1.12 * df["top"])


def test_the_density_components_are_one_line_broken_between_components(view):
    view.model.run()
    view.refresh()
    comps = view._density.frame["components"]
    x = _column(view._density.components, "x")
    assert len(comps) >= 2 and int(np.isnan(x).sum()) == len(comps) - 1
    np.testing.assert_allclose(np.nansum(_column(view._density.components, "y")),
                               sum(c["density"].sum() for c in comps))
    inside = _column(view._density.density, "interval") > 0
    s = view.readouts.slice
    assert np.all(s.grid[inside] >= s.lower) and np.all(s.grid[inside] <= s.upper)


def test_a_click_on_the_scatter_moves_x0_within_the_inputs(view):
    fig = view._scatter.figure
    lo, hi = view.readouts.x_range
    fig._trigger_event(Tap(fig, x=0.5 * (lo + hi) + 0.1, y=0.0))
    assert view.model.x0 == pytest.approx(0.5 * (lo + hi) + 0.1)
    assert view._density.figure.title.text == f"p(y | x = {view.model.x0:.3g})"
    fig._trigger_event(Tap(fig, x=hi + 100.0, y=0.0))  # beyond the inputs: clamped to the largest
    assert view.model.x0 == pytest.approx(hi) and view._x0.value == pytest.approx(hi)


def test_the_same_column_twice_is_an_error_without_a_curve(view):
    view.model.target_column = "x"
    assert view._alert.visible and "same column" in view._alert.object
    assert view._scatter.figure.title.text == "No fit: see the message above"
    assert len(view._scatter.curve.data["x"]) == 0 and view._x0.disabled
    assert "No comparison" in view._table_note.object


def test_the_comparison_waits_for_convergence_and_is_shared_between_sessions():
    regression_model.cached_comparison.cache_clear()
    first = _view(auto_fit=True)  # a run that will be played: the table waits for its end
    assert "recomputed when the fit has converged" in first._table_note.object and first._table.object is None
    assert regression_model.cached_comparison.cache_info().misses == 0
    first.model.run()
    first.refresh()
    assert first._table.object is not None and "Held out" in first._table_note.object
    second = _view()  # another session on the same data and settings: the same comparison, not fitted again
    second.model.run()
    second.refresh()
    info = regression_model.cached_comparison.cache_info()
    assert info.misses == 1 and info.hits >= 1
    assert second._table.object.equals(first._table.object)
    second.model.split_seed = 3  # a new split: compared again at once (nothing plays)
    assert regression_model.cached_comparison.cache_info().misses == 2


@pytest.fixture
def served(monkeypatch):
    """Pages made in this test are served: their document is a :class:`FakeDoc`, their work runs on its worker."""
    doc = FakeDoc()
    monkeypatch.setattr(regression_page, "served_doc", lambda: doc)
    yield doc
    SessionWorker.of(doc).stop()


def _settle(doc, worker, timeout=30.0):
    """Run the loop's callbacks until the worker is idle and nothing is left to draw."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        doc.run_callbacks()
        if not worker.busy() and not doc.calls:
            return
        time.sleep(0.01)
    raise AssertionError("the worker did not finish in time")


def test_served_read_outs_are_computed_on_the_worker_and_drawn_on_the_loop(served):
    v = _view()
    worker = SessionWorker.of(served)
    threads = []
    readouts = v.model.readouts
    v.model.readouts = lambda *a, **k: (threads.append(threading.current_thread().name), readouts(*a, **k))[1]
    _settle(served, worker)
    assert set(threads) == {"explorer-session-worker"}
    v.model.step()  # a step (the player's, on the worker when served); the page redraws on the loop
    v.refresh()
    assert v._scatter.figure.title.text.endswith("EM iteration 0")  # nothing drawn before the loop runs
    _settle(served, worker)
    assert v._scatter.figure.title.text.endswith("EM iteration 1") and v.readouts.iteration == 1
    assert set(threads) == {"explorer-session-worker"}


def test_served_requests_while_computing_fold_into_one_more(served):
    v = _view()
    worker = SessionWorker.of(served)
    _settle(served, worker)
    computed = []
    started, release = threading.Event(), threading.Event()
    readouts = v.model.readouts

    def slow(*a, **k):
        computed.append(v.model.iteration)
        started.set()
        release.wait(10)
        return readouts(*a, **k)

    v.model.readouts = slow
    v.refresh()
    served.run_callbacks()  # the Redraw scheduled by a refresh from this (non-loop) thread
    assert started.wait(10)
    for _ in range(5):  # five more steps while the first read-outs compute: one more computation, of the last
        v.model.step()
        v.refresh()
        served.run_callbacks()
    release.set()
    _settle(served, worker)
    assert computed == [0, 5]
    assert v.readouts.iteration == 5 and v._scatter.figure.title.text.endswith("EM iteration 5")


def test_frame_builders_on_read_outs(view):
    view.model.run()
    r = view.model.readouts(n_draws=50)
    sf, df = scatter_frame(r), density_frame(r)
    assert len(sf["draws"][0]) == 50 and sf["title"].endswith("converged")
    assert sf["xlim"][0] < r.x_range[0] and sf["xlim"][1] > r.x_range[1]  # the strip of rows missing x at the left
    np.testing.assert_array_equal(sf["between"][1][r.curve.between], r.curve.mean[r.curve.between])
    assert np.isnan(sf["between"][1][~r.curve.between]).all()
    assert df["top"] == pytest.approx(r.slice.density.max()) and df["slice"] is r.slice


def test_served_open_fits_to_convergence_in_one_job_and_draws_its_end_once(served):
    """Issue 19: the fit the page starts at open is one job on the worker and one frame, not a frame per tick."""
    v = _view(auto_fit=True)
    worker = SessionWorker.of(served)
    _settle(served, worker)
    computed = []
    readouts = v.model.readouts
    v.model.readouts = lambda *a, **k: (computed.append(v.model.iteration), readouts(*a, **k))[1]
    assert v.model.iteration == 0 and not v.model.finished
    v.start()
    _settle(served, worker)
    final = v.model.iteration
    assert v.model.finished and final > 5  # it converged, many iterations from the start
    assert not v.player.playing  # nothing was played tick by tick
    assert computed == [final]  # one frame, of the end
    assert v.readouts.iteration == final and v.readouts.finished
    assert v._scatter.figure.title.text.endswith("converged")
    # a later settings change plays its new run tick by tick, as before
    v.model.n_components = 2
    assert v.player.playing
    v.player.pause()
    _settle(served, worker)


def test_served_open_fit_gives_way_to_a_new_run(served):
    """A new run started while the open fit computes is not drawn as the old run's end: it plays."""
    v = _view(auto_fit=True)
    worker = SessionWorker.of(served)
    _settle(served, worker)
    first = v.model.run_id
    v.start()
    v.model.n_components = 3  # a new run before the worker's job ends (or right after)
    _settle(served, worker)
    assert v.model.run_id != first
    assert v.player.playing or v.model.finished
    v.player.pause()
    _settle(served, worker)
