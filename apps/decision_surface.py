"""Page "Decision surfaces": classifiers trained on 2-D data with missing features (Marlin 2008, ch. 6).

Serve on its own with ``panel serve apps/decision_surface.py`` (add ``--num-threads 4``), or as part of
the gallery (``panel serve apps/``, which imports :func:`create_view`). Every browser session builds
its own model; the settings live in the URL, and an uploaded file is shared with the session's
other pages.
"""

from __future__ import annotations

import panel as pn

from explorer.ui.state.decision_model import DecisionModel
from explorer.ui.state.session_data import SessionData
from explorer.ui.page import page_template
from explorer.ui.pages.decision_surface import DecisionView

TITLE = "Decision surfaces"


def create_view(session: SessionData | None = None, **settings) -> DecisionView:
    """The bare Viewer (plain layout, no template) with a fresh :class:`DecisionModel`.

    ``session``: the browser session's user data, shared with its other pages (the gallery's).
    ``settings``: initial settings of the model (e.g. ``dataset="xor", method="lr_mean"``).
    """
    return DecisionView(model=DecisionModel(session=session, **settings))


def create_app() -> pn.template.BootstrapTemplate:
    """The served page: controls in the sidebar, the plots and the table in the main area."""
    return page_template(TITLE, create_view, threaded=True)


if __name__.startswith("bokeh"):
    create_app().servable()
