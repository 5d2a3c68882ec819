"""The Ratings page's frame builders and view without a browser (explorer.ui.pages.ratings)."""

from __future__ import annotations

import queue
import threading
import time

import numpy as np
import panel as pn
import pytest
from bokeh.document import Document

from explorer.ui.pages import ratings as ratings_page
from explorer.ui.session import SessionWorker
from explorer.ui.state.ratings_model import RatingsModel, available_models
from explorer.ui.pages.ratings import (SERIES, RatingsView, comparison_table, predictive_frame, selection_frame,
                                      trace_frame)

SMALL = {"n_users": 120, "n_items": 10, "n_clusters": 2}


def test_selection_frame_for_an_nmar_and_a_mar_model():
    if not available_models()["cpt_v"]:
        pytest.skip("cpt_v is not there")
    m = RatingsModel(model="cpt_v", max_iter=15, **SMALL)
    m.run()
    f = selection_frame(m.snapshot())
    heights = f["heights"]  # one row per series, one column per rating value
    assert heights.shape == (len(SERIES), 5) and SERIES == ("true μ_v(s)", "learned μ_v", "moment estimate")
    np.testing.assert_allclose(heights[SERIES.index("learned μ_v")], m.selection()["learned"])
    np.testing.assert_allclose(heights[SERIES.index("true μ_v(s)")], m.selection()["truth"])
    assert "condition number" in f["note"] and f["title"].endswith("MM/CPT-v")
    m.model = "mar_mm"
    f = selection_frame(m.snapshot())
    assert np.isnan(f["heights"][SERIES.index("learned μ_v")]).all()
    assert "no selection model" in f["note"]


def test_frames_of_the_conditional_rbms():
    """cRBM / cRBM/E-v model P(x | r): no learned mu is drawn, the note says why, the trace is a CD monitor."""
    m = RatingsModel(model="crbm_ev", max_iter=4, **SMALL)
    m.step(), m.step()
    snap = m.snapshot()
    f = selection_frame(snap)
    assert np.isnan(f["heights"][SERIES.index("learned μ_v")]).all()
    assert "P(x | r)" in f["note"] and "b⁰_v" in f["note"]
    t = trace_frame(snap)
    assert "CD update 2" in t["title"] and t["ylabel"] == "log pseudo-likelihood per rating" and np.isfinite(t["y"]).all()
    assert "reads the choice" in predictive_frame(snap)["sentence"]
    m.model = "crbm"
    assert "like a MAR model" in selection_frame(m.snapshot())["note"]
    m.step()
    assert "a MAR model ignores r" in predictive_frame(m.snapshot())["sentence"]  # its prediction does not depend on r


def test_trace_and_predictive_frames():
    m = RatingsModel(model="mar_mm", **SMALL)
    m.step(), m.step()
    t = trace_frame(m.snapshot())
    assert list(t["x"]) == [0, 1, 2] and "EM iteration 2" in t["title"]
    p = predictive_frame(m.snapshot())
    assert abs(np.nansum(p["rated"]) - 1) < 1e-9 and "a MAR model ignores r" in p["sentence"]
    assert p["true"][0].size == 2


def test_comparison_table_layout():
    rows = [{"model": "MAR MM", "K": 1, "s": s, "random": 0.5 + s, "random_se": 0.01, "user": 0.4, "user_se": 0.02}
            for s in (0.0, 0.25)] + [{"model": "DP", "K": None, "s": 0.0, "random": 0.45, "random_se": 0.03,
                                      "user": 0.41, "user_se": 0.02}]
    t = comparison_table(rows, "random")
    assert list(t.columns) == ["model", "K", "s=0", "s=.25"]
    assert t.iloc[0]["s=.25"] == ".750±.010" and t.iloc[1]["K"] == "–" and t.iloc[1]["s=.25"] == ""
    assert comparison_table(rows, "user").iloc[0]["s=0"] == ".400±.020"
    assert comparison_table([]).empty


def test_view_compare_fills_the_table_without_a_server():
    v = RatingsView(model=RatingsModel(model="mar_mm", repeats=2, compare_ks=[1], **SMALL))
    v.player.step()
    assert v.model.iteration == 1
    v.model.param.update(n_users=60, n_items=6)
    v.compare()
    assert v._table.object is not None and "MAR MM" in set(v._table.object["model"])
    assert "over 2 worlds" in v._table_note.object
    assert v._progress.value == v._progress.max == 2 * len(v._compare_rows)  # every fit reported (2 worlds per cell)
    v.table_kind = "user"
    first = v._compare_rows[0]
    assert v._table.object.iloc[0]["s=0"] == f"{first['user']:.3f}±{first['user_se']:.3f}".replace("0.", ".")
    v.model.repeats = 3  # a comparison setting: the table is dropped
    assert v._table.object is None and "press" in v._table_note.object


def test_a_model_that_cannot_be_fitted_fails_in_its_row_only():
    """At 60 users x 6 items the hold-out sample misses a rating value: CPT-v+ fails, the others are scored."""
    if not available_models()["cpt_v_plus"]:
        pytest.skip("cpt_v is not there")
    from explorer.ui.state.ratings_model import compare_models

    from explorer.ui.state.ratings_model import S_VALUES

    rows = compare_models(("mar_mm", "cpt_v_plus"), ks=(1,), s_values=S_VALUES, n_users=60, n_items=6, repeats=2)
    mar = [r for r in rows if r["model"] == "MAR MM"]
    failed = [r for r in rows if r["error"]]
    assert all(r["error"] == "" and np.isfinite(r["random"]) for r in mar)
    assert failed and all(r["model"] == "MM/CPT-v+" and "mu_from_random_items" in r["error"] for r in failed)
    assert all(np.isnan(r["random"]) for r in failed)
    table = comparison_table(rows).set_index("model")
    assert (table.loc["MM/CPT-v+"] == "failed").any().any()


# ------------------------------------------------------------------ issue 19: figures built once, drawn on the loop
def _frames_drawn(v: RatingsView) -> None:
    """The figures show the frames of the model's current snapshot."""
    snap = v.model.snapshot()
    assert v._snapshot is snap  # the last one drawn is the current one
    sel, tr, pr = selection_frame(snap), trace_frame(snap), predictive_frame(snap)
    np.testing.assert_array_equal(v._selection.source.data["top"], sel["heights"].ravel())
    np.testing.assert_array_equal(v._selection.source.data["alpha"], np.isfinite(sel["heights"].ravel()))
    assert v._selection.figure.title.text == sel["title"]
    np.testing.assert_array_equal(v._trace.source.data["x"], tr["x"])
    np.testing.assert_array_equal(v._trace.values(), tr["y"])
    assert v._trace.figure.title.text == tr["title"] and v._trace.figure.xaxis[0].axis_label == tr["xlabel"]
    for key in ("rated", "unrated", "if_selected"):
        np.testing.assert_array_equal(v._predictive.source.data[key], pr[key])
    np.testing.assert_array_equal(v._predictive.stars.data["x"], pr["true"][0])
    assert v._predictive.figure.title.text == pr["title"] and v._predictive_note.object == pr["sentence"]


def test_a_frame_only_changes_data_never_the_documents_models():
    """Issue 19: the figures are built once; Step, Play ticks, another user, model or world assign data only."""
    v = RatingsView(model=RatingsModel(model="cpt_v", **SMALL), auto_fit=False)
    doc = Document()
    doc.add_root(pn.panel(v).get_root(doc))
    before = {m.id for m in doc.models}
    figures = [v._selection.figure, v._trace.figure, v._predictive.figure]
    sources = [v._selection.source, v._trace.source, v._predictive.source, v._predictive.stars]
    in_figures = {m.id for f in figures for m in f.references()}
    for _ in range(3):
        v.player.step()
    v.player.tick()
    v.model.user = 4
    assert {m.id for m in doc.models} == before
    _frames_drawn(v)
    assert v.model.iteration == 8 and len(v._trace.source.data["x"]) == 9  # the iterations were streamed
    # a MAR model (no learned bars), a conditional RBM, another world: the figures keep every model they had
    for change in ({"model": "mar_mm"}, {"model": "crbm"}, {"n_users": 100}):
        v.model.param.update(**change)
        v.player.step()
        _frames_drawn(v)
    assert {m.id for f in figures for m in f.references()} == in_figures
    assert in_figures <= {m.id for m in doc.models}
    assert [v._selection.source, v._trace.source, v._predictive.source, v._predictive.stars] == sources


def test_bars_not_drawn_keep_their_legend_entry_without_a_swatch():
    """A MAR model has no learned mu: its bars are not drawn and its legend entry shows no colour (as before)."""
    v = RatingsView(model=RatingsModel(model="mar_mm", **SMALL), auto_fit=False)
    bars, learned = v._selection, SERIES.index("learned μ_v")
    assert np.isnan(bars.heights("learned μ_v")).all()
    assert bars.source.data["alpha"][bars._items[learned].index] == 0
    assert [item.label.value for item in bars._items] == list(SERIES)
    truth = bars._items[SERIES.index("true μ_v(s)")]
    assert bars.source.data["alpha"][truth.index] == 1 and bars.source.data["color"][truth.index] == "#4d4d4d"


class _SessionDoc:
    """Stands for a served session's document: what the session's worker needs of it. Callbacks meant for the
    event loop queue up, and the test thread runs them (it is the loop)."""

    session_context = object()

    def __init__(self):
        self.callbacks: queue.Queue = queue.Queue()

    def add_next_tick_callback(self, callback):
        self.callbacks.put(callback)

    def on_session_destroyed(self, callback):
        pass

    def run_loop(self, until, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not until():
            assert time.monotonic() < deadline, "the page did not get there in time"
            try:
                self.callbacks.get(timeout=0.1)()
            except queue.Empty:
                pass


@pytest.fixture
def served():
    """A view whose model is read (snapshots) and fitted (comparison) on a session's worker."""
    v = RatingsView(model=RatingsModel(model="mar_mm", repeats=2, compare_ks=[1], n_users=60, n_items=6,
                                       n_clusters=2), auto_fit=False)
    doc = _SessionDoc()
    v._doc = doc
    worker = SessionWorker.of(doc)
    yield v, doc, worker
    worker.stop()


def test_served_the_snapshot_is_made_on_the_worker_and_drawn_on_the_loop(served, monkeypatch):
    v, doc, _ = served
    loop = threading.current_thread()
    made, drawn = [], []
    snapshot, draw = v.model.snapshot, v._draw
    monkeypatch.setattr(v.model, "snapshot", lambda: made.append(threading.current_thread()) or snapshot())
    monkeypatch.setattr(v._redraw, "_draw", lambda: drawn.append(threading.current_thread()) or draw())
    v.player.step()  # the player's own work is not served here; its frame asks the page for a snapshot
    v.player.step()  # asked while the first is being made: folded into one more after it
    assert v.model.iteration == 2 and v._snapshot.iteration == 0 and not drawn  # nothing drawn off the loop
    doc.run_loop(until=lambda: v._snapshot.iteration == 2 and not v._snapshot_pending)
    assert made and all(t is not loop for t in made) and len(made) <= 2
    assert drawn and all(t is loop for t in drawn)
    _frames_drawn(v)


def test_served_the_comparison_runs_in_slices_and_a_step_is_served_meanwhile(served, monkeypatch):
    v, doc, worker = served
    monkeypatch.setattr(ratings_page, "COMPARE_SLICE_S", 0.01)
    v.compare()
    assert v._compare_running and v._compare_button.disabled and v._progress.visible
    assert "Fitting the models" in v._table_note.object
    steps = []
    worker.submit(v.model.step, lambda result, error: steps.append((result, v._compare_running, v._progress.value)))
    doc.run_loop(until=lambda: not v._compare_running)
    assert steps == [(True, True, steps[0][2])] and steps[0][2] < v._progress.max  # served before the end
    assert worker.jobs_done > 10  # slices
    assert "MAR MM" in set(v._table.object["model"]) and "over 2 worlds" in v._table_note.object
    assert v._progress.value == v._progress.max == 2 * len(v._compare_rows) and not v._progress.visible
    assert not v._compare_button.disabled


def test_served_new_settings_drop_a_running_comparison(served):
    v, doc, worker = served
    v.compare()
    v.model.repeats = 3
    assert not v._compare_running and v._table.object is None and "press" in v._table_note.object
    doc.run_loop(until=lambda: not worker.busy())
    assert v._table.object is None and not v._compare_rows  # the old slices were not shown
