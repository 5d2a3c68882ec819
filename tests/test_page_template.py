"""The served page's shell (explorer.ui.page.PageTemplate) and the lean figure panes (issue 19: what opening costs)."""

from __future__ import annotations

import panel as pn
from bokeh.document import Document
from bokeh.document.models import DocumentModelManager
from bokeh.models import GlyphRenderer, Legend
from bokeh.plotting import figure
from panel.io.state import set_curdoc

from explorer.ui.page import PageTemplate, page_template
from explorer.ui.plots.figures import LeanBokeh, figure_pane


class _View:
    """The smallest page: a sidebar, a main area with a figure, no URL settings."""

    def __init__(self):
        fig = figure(height=200)
        fig.line([0, 1, 2], [1, 0, 1])
        fig.scatter([0, 1, 2], [1, 0, 1])
        self.sidebar = pn.Column(pn.widgets.IntSlider(label="k", start=1, end=5))
        self.main = pn.Column(figure_pane(fig), "Some **text**")

    def url_bindings(self):
        return []


def _served(monkeypatch):
    doc = Document()
    calls = []
    recompute = DocumentModelManager.recompute

    def counting(self):
        calls.append(self)
        return recompute(self)

    monkeypatch.setattr(DocumentModelManager, "recompute", counting)
    with set_curdoc(doc):
        template = page_template("Test page", _View)
        template.server_doc(doc)
    return doc, template, calls


def test_the_document_is_walked_once_when_the_page_is_built(monkeypatch):
    """Panel's template adds its parts as separate roots; each add_root walked every model again (eight walks
    per page). Under one freeze the graph is walked once and the document still knows every model."""
    doc, template, calls = _served(monkeypatch)
    assert isinstance(template, PageTemplate) and len(doc.roots) > 3
    assert len(calls) == 1
    reachable = {m.id for root in doc.roots for m in root.references()}
    assert reachable == {m.id for m in doc.models}


def test_the_template_has_no_process_wide_busy_indicator(monkeypatch):
    """Panel sets every template's busy spinner (a process-wide list) on any session's event: one student's
    click sent a patch to every open tab. The pages show their own progress."""
    _, template, _ = _served(monkeypatch)
    assert template.busy_indicator is None
    assert not any(type(m).__name__ == "LoadingSpinner" for m in template.select())


def test_lean_panes_leave_the_unused_glyphs_to_the_browser():
    fig = figure(height=200)
    fig.line([0, 1], [0, 1], legend_label="a")
    pane = figure_pane(fig)
    fig.scatter([0, 1], [1, 0], legend_label="b")  # added after the pane was made: included too
    fig.select_one(Legend).click_policy = "mute"
    assert isinstance(pane, LeanBokeh)
    doc = Document()
    pane.get_root(doc)
    renderers = list(fig.select({"type": GlyphRenderer}))
    assert len(renderers) == 2
    assert all(r.nonselection_glyph == "auto" and r.muted_glyph == "auto" for r in renderers)
    assert all(r.glyph is not None for r in renderers)

    plain = figure(height=200)
    plain.line([0, 1], [0, 1], legend_label="a")
    plain.scatter([0, 1], [1, 0], legend_label="b")
    other = Document()
    pn.pane.Bokeh(plain).get_root(other)
    lean_models = {m.id for m in fig.references()}
    plain_models = {m.id for m in plain.references()}
    assert len(lean_models) == len(plain_models) - 4  # two glyph models fewer per renderer


def test_the_imports_are_frozen_out_of_later_collections_once(monkeypatch):
    import gc

    from explorer.ui import page

    monkeypatch.setattr(page, "_startup_frozen", False)
    before = gc.get_freeze_count()
    try:
        assert page.freeze_startup_objects() is True
        frozen = gc.get_freeze_count()
        assert frozen > before + 10_000  # NumPy, Panel, Bokeh, ...: many objects
        assert page.freeze_startup_objects() is False  # once per process
        assert gc.get_freeze_count() <= frozen  # nothing frozen again (frozen objects can still be freed)
    finally:
        gc.unfreeze()
