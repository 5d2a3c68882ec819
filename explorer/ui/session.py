"""The served session a view belongs to (shared by the views that hand worker results to their session)."""

from __future__ import annotations

import panel as pn

__all__ = ["served_doc"]


def served_doc():
    """The served session's document (a worker thread hands its UI updates to it), or None outside a server
    (Jupyter, scripts and tests)."""
    doc = pn.state.curdoc
    if doc is None or doc.session_context is None or pn.state._jupyter_kernel_context:
        return None
    return doc
