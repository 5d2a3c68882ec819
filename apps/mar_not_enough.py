"""Page "MAR is not enough": the Table 3.1 MAR mechanism and Marlin's Table 3.3 (thesis section 3.4), live.

Serve on its own with ``panel serve apps/mar_not_enough.py``, or as part of the gallery (``panel serve apps/``,
which imports :func:`create_view`). Every browser session builds its own model; the settings live in the URL,
so a screen can be shared as a link.
"""

from __future__ import annotations

import panel as pn

from explorer.ui.page import page_template
from explorer.ui.pages.mar_not_enough import MARTableView, create_model

TITLE = "MAR is not enough"


def create_view(**settings) -> MARTableView:
    """The bare Viewer (plain layout, no template) with a fresh MARTableModel (the Table 3.3 setting, beta = 0.35)."""
    return MARTableView(model=create_model(**settings))


def create_app() -> pn.template.BootstrapTemplate:
    """The served page: sliders in the sidebar; validity, response table, the Table 3.3 plot in the main area."""
    return page_template(TITLE, create_view)


if __name__.startswith("bokeh"):
    create_app().servable()
