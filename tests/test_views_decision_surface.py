"""Headless tests of the "Decision surfaces" page (explorer.ui.pages.decision_surface): figures, frames, worker."""

from __future__ import annotations

import threading
import time

import numpy as np
import panel as pn
import pytest

from tests._fake_session import FakeDoc
from bokeh.document import Document

from explorer.learn.methods import METHODS
from explorer.ui.pages import decision_surface as decision_page
from explorer.ui.pages.decision_surface import DecisionView, tint
from explorer.ui.plots.surface_panels import rgba
from explorer.ui.session import SessionWorker
from explorer.ui.state.decision_model import DecisionModel

STEPPED = next(k for k, s in METHODS.items() if s.stepped)


def _view(**settings) -> DecisionView:
    return DecisionView(model=DecisionModel(**({"dataset": "simple", "n_per_class": 20} | settings)),
                        score_table=False)


def _image(view, name="main") -> np.ndarray:
    return np.asarray(view._panels.images[name].data["image"][0])


def test_a_frame_only_changes_data_never_the_documents_models():
    """Issue 19: the figures are built once; EM steps, another method and new data assign source data only."""
    view = _view(method=STEPPED)
    doc = Document()
    doc.add_root(pn.Column(view.sidebar, view.main).get_root(doc))
    panels = view._panels
    figures = [panels.main, panels.left, panels.bottom]
    before = {m.id for m in doc.models}
    in_figures = {m.id for f in figures for m in f.references()}
    first = _image(view).copy()
    for _ in range(3):
        view.player.step()
    assert not np.array_equal(_image(view), first)  # the surface follows the steps
    assert "EM iteration 3" in view._title.object
    view.model.method = "lr_mean"  # a fitted method (fitted now: not served)
    assert "LR, mean imputation" in view._title.object and "test loss" in view._title.object
    assert {m.id for m in doc.models} == before
    view.model.dataset = "xor"  # new data: the figures keep every model they had
    assert {m.id for f in figures for m in f.references()} == in_figures
    assert in_figures <= {m.id for m in doc.models}
    # the figures show the last frame
    frame, surface = panels.frame, view.model.surface
    assert surface.method == "lr_mean" and surface.revision == view.model.revision
    np.testing.assert_array_equal(_image(view), rgba(tint(surface.proba)))  # first row at the bottom (smallest y)
    np.testing.assert_array_equal(_image(view, "left")[:, 0], rgba(tint(surface.proba_y_only)[:, None, :])[:, 0])
    source = panels.images["main"].data
    assert (source["x"][0], source["y"][0]) == (frame["xlim"][0], frame["ylim"][0])
    np.testing.assert_array_equal(panels.points.data["x"], frame["points"]["x"])
    np.testing.assert_array_equal(panels.left_points.data["y"], frame["left_points"]["y"])
    solid = np.asarray(panels.solid.data["x"], dtype=float)
    assert int(np.isnan(solid).sum()) == len(frame["solid"]) - 1  # every contour: one line broken by NaN
    assert (panels.x_range.start, panels.x_range.end) == frame["xlim"]
    assert panels.left.yaxis[0].axis_label == "x2" and panels.bottom.xaxis[0].axis_label == "x1"


def test_the_table_reuses_what_any_session_scored(monkeypatch):
    m = DecisionModel(dataset="simple", n_per_class=10, method="lr_mean")
    m.refresh_table()  # one session scored every method on these data
    monkeypatch.setattr("explorer.ui.state.decision_model.score_method",
                        lambda *a, **k: pytest.fail("scored again"))
    view = DecisionView(model=DecisionModel(dataset="simple", n_per_class=10, method="lr_mean"))
    assert view.model.table_progress() == (len(METHODS), len(METHODS))
    assert view.model.table.equals(m.table)
    assert f"{len(METHODS)} / {len(METHODS)} methods scored" in view._progress_text.object


@pytest.fixture
def served(monkeypatch):
    """Pages made in this test are served: their document is a :class:`FakeDoc`, their work runs on its worker."""
    doc = FakeDoc()
    monkeypatch.setattr(decision_page, "served_doc", lambda: doc)
    yield doc
    SessionWorker.of(doc).stop()


def _settle(doc, timeout=60.0):
    worker = SessionWorker.of(doc)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        doc.run_callbacks()
        if not worker.busy() and not doc.calls:
            return
        time.sleep(0.01)
    raise AssertionError("the worker did not finish in time")


def test_served_the_table_is_scored_on_the_worker_one_method_per_job_and_waits_for_play(served, monkeypatch):
    scored, release = [], threading.Event()

    def score(name, data, seed=0):
        scored.append((name, threading.current_thread().name))
        release.wait(10)
        return {"method": name, "label": METHODS[name].label, "family": METHODS[name].family, "loss": 0.5,
                "error_pct": 10.0, "seconds": 0.0, "status": "done"}

    monkeypatch.setattr(decision_page, "shared_score", score)
    monkeypatch.setattr(decision_page, "known_score", lambda *a, **k: None)
    view = DecisionView(model=DecisionModel(dataset="simple", n_per_class=10, method=STEPPED))
    worker = SessionWorker.of(served)
    deadline = time.monotonic() + 10
    while not scored and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(scored) == 1 and worker.busy()  # one method at a time: a Step waits for one fit at most
    view.player.playing = True  # Play: the table waits
    release.set()
    _settle(served)
    assert len(scored) == 1 and view.model.table_progress()[0] == 1 and "1 / " in view._progress_text.object
    view.player.playing = False  # the table goes on
    _settle(served)
    assert [name for name, _ in scored] == list(METHODS)
    assert {thread for _, thread in scored} == {"explorer-session-worker"}
    assert view.model.table_progress() == (len(METHODS), len(METHODS))


def test_served_rows_of_older_data_are_dropped(served, monkeypatch):
    revisions = []

    def score(name, data, seed=0):
        revisions.append(data)
        return {"method": name, "label": name, "family": "", "loss": 0.5 if data.name == "simple" else 0.7,
                "error_pct": 1.0, "seconds": 0.0, "status": "done"}

    monkeypatch.setattr(decision_page, "shared_score", score)
    monkeypatch.setattr(decision_page, "known_score", lambda *a, **k: None)
    view = DecisionView(model=DecisionModel(dataset="simple", n_per_class=10, method=STEPPED))
    view.model.dataset = "xor"  # while the first table is on the worker
    _settle(served)
    assert view.model.table_progress() == (len(METHODS), len(METHODS))
    assert set(view.model.table["loss"]) == {0.7}  # only the rows of the new data


def test_served_surfaces_are_computed_on_the_worker_and_drawn_on_the_loop(served, monkeypatch):
    view = DecisionView(model=DecisionModel(dataset="simple", n_per_class=10, method=STEPPED), score_table=False)
    threads = []
    surface = view.run.surface
    view.run.surface = lambda: (threads.append(threading.current_thread().name), surface())[1]
    _settle(served)
    assert threads and set(threads) == {"explorer-session-worker"} and "EM iteration 0" in view._title.object
    view.run.step()
    view.refresh()
    assert "EM iteration 0" in view._title.object  # nothing drawn from another thread
    _settle(served)
    assert "EM iteration 1" in view._title.object and view._panels.frame is not None
    fitted, fit_threads = threading.Event(), []
    shared_surface = decision_page.shared_surface

    def fit(*args):
        fit_threads.append(threading.current_thread().name)
        fitted.wait(10)
        return shared_surface(*args)

    monkeypatch.setattr(decision_page, "shared_surface", fit)
    view.model.method = "lr_zero"  # a fitted method: the loading indicator until its fit is drawn
    served.run_callbacks()  # the redraw asked from this thread
    assert view._plots.loading and "fitting…" in view._title.object
    fitted.set()
    _settle(served)
    assert fit_threads == ["explorer-session-worker"]
    assert not view._plots.loading and "LR, zero imputation" in view._title.object and "test loss" in view._title.object
