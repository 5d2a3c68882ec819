"""Page "Sensitivity": how a pooled estimate moves as the imputations of one column depart from MAR by delta.

Serve on its own with ``panel serve apps/sensitivity.py`` (or as part of the gallery, ``panel serve
apps/``, which imports :func:`create_view`). Every browser session builds its own model; the mixture is
fitted and the imputations drawn on the session's worker thread, and the data and analysis settings live in
the URL.
"""

from __future__ import annotations

import panel as pn

from explorer.ui.state.data_model import DataModel
from explorer.ui.state.sensitivity_model import SensitivityModel
from explorer.ui.state.session_data import SessionData
from explorer.ui.page import page_template
from explorer.ui.pages.sensitivity import SensitivityView

TITLE = "Sensitivity to NMAR: delta adjustment"
#: The start screen: iris with its 47 lowest sepal lengths hidden (nmar_lowest at 10 %: one column), M = 20.
DEFAULT_DATA = {"dataset": "iris", "mechanism": "nmar_lowest", "rate": 0.1, "mask_seed": 1}


def create_view(session: SessionData | None = None, **data_settings) -> SensitivityView:
    """The bare Viewer with a fresh DataModel and SensitivityModel; the imputations are drawn once the page is up.

    ``session``: the browser session's user data, shared with its other pages (the gallery's).
    """
    data = DataModel(session=session, **(DEFAULT_DATA | data_settings))
    view = SensitivityView(model=SensitivityModel(data_model=data))
    # drawn once the page is up: at session creation the app still registers watchers (URL sync)
    pn.state.onload(view.start)
    return view


def create_app() -> pn.template.BootstrapTemplate:
    """The served page: controls in the sidebar, the histograms, the estimate against delta and the sentence."""
    return page_template(TITLE, create_view, threaded=True)


if __name__.startswith("bokeh"):
    create_app().servable()
