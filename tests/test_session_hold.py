"""explorer.ui.session.hold: changes made while a served session's page renders reach the browser.

Panel 1.9.4 counts a session as connected only once the browser's ``document_ready`` has been handled (in its
thread pool) and drops the model changes held in a document that is not connected; the browser has pulled the
document before that, so such a change never reached it (the Sensitivity page kept its empty plots when its first
imputations landed in that window). ``hold`` lets them through there, and holds as Panel does once connected.
"""

from __future__ import annotations

import weakref

import panel as pn
import pytest
from bokeh.document import Document
from bokeh.document.events import DocumentPatchedEvent
from bokeh.models import ColumnDataSource, Title

from explorer.ui.session import hold


class _Context:
    """What a served document's ``session_context`` is for these checks: something that is not None."""


@pytest.fixture
def served():
    """A document with a session context, a source and a title in it, and the changes Bokeh dispatches from it
    (``(kind of event, the new data or text)``: what a session writes to its browser)."""
    doc, source, title, context = Document(), ColumnDataSource({"x": [0.0]}), Title(text="empty"), _Context()
    doc.add_root(source)
    doc.add_root(title)
    doc._session_context = weakref.ref(context)
    seen = []

    def record(event):
        if isinstance(event, DocumentPatchedEvent):
            seen.append((type(event).__name__, list(source.data["x"]) if event.model is source else title.text))

    doc.on_change(record)
    yield doc, (source, title), seen
    pn.state._connected.pop(doc, None)
    doc._session_context = None
    del context


def test_panels_hold_drops_a_change_made_before_the_session_counts_as_connected(served):
    """What ``hold`` works around: if this starts failing, Panel keeps these changes itself."""
    doc, (source, title), seen = served
    with pn.io.hold(doc):
        source.data = {"x": [1.0]}
        title.text = "drawn"
    assert seen == []


@pytest.mark.parametrize("freeze", [False, True])
def test_a_change_made_before_the_session_counts_as_connected_is_dispatched(served, freeze):
    doc, (source, title), seen = served
    with hold(doc, freeze=freeze):
        source.data = {"x": [1.0]}
        title.text = "drawn"
    assert seen == [("ColumnDataChangedEvent", [1.0]), ("ModelChangedEvent", "drawn")]


def test_once_connected_the_changes_are_held_and_combined(served):
    doc, (source, title), seen = served
    pn.state._connected[doc] = True
    with hold(doc):
        title.text = "first"
        source.data = {"x": [1.0]}
        title.text = "drawn"
        assert seen == []  # held until the block ends
    # released to the document (on the loop: the hold of a thread other than Panel's schedules the release)
    for callback in list(doc.session_callbacks):
        doc.remove_next_tick_callback(callback)
        callback.callback()
    assert sorted(seen) == [("ColumnDataChangedEvent", [1.0]), ("ModelChangedEvent", "drawn")]  # one per property
