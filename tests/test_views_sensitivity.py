"""Headless tests of the Sensitivity page's view: its figures, the shared draws, the session's worker."""

from __future__ import annotations

import time

import numpy as np
import panel as pn
import pytest
from bokeh.document import Document

from explorer.ui.pages import sensitivity as sensitivity_page
from explorer.ui.pages.sensitivity import SensitivityView, estimate_frame, histogram_frame
from explorer.ui.session import SessionWorker
from explorer.ui.state.data_model import DataModel
from explorer.ui.state.sensitivity_model import DRAW_CACHE, SensitivityModel


def _view(**settings) -> SensitivityView:
    data = DataModel(dataset="iris", mechanism="nmar_lowest", rate=0.1, mask_seed=1)
    return SensitivityView(model=SensitivityModel(data_model=data, **({"n_imputations": 5} | settings)))


@pytest.fixture(scope="module")
def view():
    v = _view()
    v.start()
    return v


def test_a_frame_only_changes_data_never_the_documents_models(view):
    """Issue 19: the figures are built once; delta, column, estimate and new draws assign source data only."""
    doc = Document()
    doc.add_root(pn.panel(view).get_root(doc))
    before = {m.id for m in doc.models}
    figures = [view._hist.figure, view._estimate.figure]
    in_figures = {m.id for f in figures for m in f.references()}
    m = view.model
    m.delta_index = 14
    m.estimate = "ols"
    m.estimate = "mean"
    m.n_imputations = 4  # a new draw
    assert {m.id for m in doc.models} == before
    # a scale instead of a shift relabels the delta slider (Panel's DiscreteSlider makes a new Bokeh slider
    # for new options), another data set gives other options: the figures keep every model they had
    m.mode = "scale"
    m.mode = "shift"
    m.data_model.param.update(mechanism="mcar", rate=0.2)  # every column incomplete
    m.column = "petal_width"
    assert {m.id for f in figures for m in f.references()} == in_figures
    assert in_figures <= {m.id for m in doc.models}
    # the figures show the last frames
    h, e = histogram_frame(m), estimate_frame(m)
    np.testing.assert_allclose(view._hist.values("imputed"), h["imputed"])
    np.testing.assert_allclose(view._hist.sources["observed"].data["left"], h["edges"][:-1])
    assert view._hist.figure.title.text == h["title"] and h["title"].startswith("petal_width: imputed")
    np.testing.assert_allclose(view._estimate.sources["estimate"].data["y"], e["estimate"][1])
    np.testing.assert_allclose(view._estimate.band_source.data["upper"], e["band"][2])
    np.testing.assert_allclose(view._estimate.sources["current"].data["x"], e["current"][0])
    assert (view._estimate.y_range.start, view._estimate.y_range.end) == pytest.approx(e["ylim"])
    assert view._estimate.figure.title.text == "mean of petal_width"


def test_the_imputed_histogram_is_drawn_with_the_colour_the_browser_test_reads(view):
    orange = [r for r in view._hist.figure.renderers if r.glyph.fill_color == "#ff7f0e"]
    assert len(orange) == 1 and type(orange[0].glyph).__name__ == "Quad"
    assert orange[0].data_source is view._hist.sources["imputed"]


def test_a_second_session_reuses_the_draws_of_the_first():
    first = _view(seed=7)
    first.start()
    hits = DRAW_CACHE.hits
    second = _view(seed=7)
    t = time.process_time()
    second.start()
    assert DRAW_CACHE.hits == hits + 1 and time.process_time() - t < 1.0
    assert second.model.imputations is first.model.imputations  # the same read-only arrays
    assert not second.model.imputations.flags.writeable
    np.testing.assert_array_equal(second.model.table.estimate, first.model.table.estimate)


class FakeDoc:
    """A served session's document as the page and its worker use it: what they hand to the event loop is queued."""

    def __init__(self):
        self.session_context = object()
        self.calls = []

    def add_next_tick_callback(self, fn):
        self.calls.append(fn)

    def on_session_destroyed(self, *callbacks):
        pass

    def run_callbacks(self):
        while self.calls:
            self.calls.pop(0)()


def test_served_draws_run_on_the_sessions_worker_and_are_shown_on_its_loop(monkeypatch):
    doc = FakeDoc()
    monkeypatch.setattr(sensitivity_page.ModelPage, "_served_doc", staticmethod(lambda: doc))
    worker = SessionWorker.of(doc)
    try:
        v = _view(seed=11, n_imputations=3)
        doc.run_callbacks()
        v.start()
        assert v._progress.visible and "Fitting the mixture" in v._status.object
        deadline = time.monotonic() + 60
        while worker.jobs_done < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert worker.jobs_done == 1 and v.model.table is None  # computed, not shown yet: that is the loop's
        doc.run_callbacks()
        assert v.model.table is not None and not v._progress.visible
        assert v.frames["histogram"]["title"].startswith("sepal_length: imputed at delta")
        assert "Without adjustment" in v._sentence.object
    finally:
        worker.stop()


def test_the_selection_model_checkbox_draws_again_and_is_kept_in_the_url():
    """Switching the NMAR reference off or on draws at once (it used to wait for another setting to change)."""
    from explorer.ui.pages.sensitivity import MODEL_URL

    v = _view()
    v.start()
    m = v.model
    assert not m.needs_draw and m.selection
    with_reference = m.selection_estimate
    m.selection = False
    assert not m.needs_draw  # drawn again, without the reference
    assert m.selection_estimate is None
    m.selection = True
    assert not m.needs_draw
    assert (m.selection_estimate is None) == (with_reference is None)
    assert "selection" in MODEL_URL and ("selection", "selection") in v.url_bindings()[1][1].items()
