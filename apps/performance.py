"""Page "EM performance": the E-step kernels timed live, and the pattern spanning tree of the tree kernel.

Serve on its own with ``panel serve apps/performance.py`` (add ``--num-threads 4``), or as part of the gallery
(``panel serve apps/``, which imports :func:`create_view`). Every browser session builds its own model; Measure
runs on the session's own compute thread; the settings live in the URL, so a screen can be shared.
"""

from __future__ import annotations

import panel as pn

from explorer.ui.page import page_template
from explorer.ui.pages.performance import PerformanceView, create_model

TITLE = "EM performance"


def create_view(**settings) -> PerformanceView:
    """The bare Viewer (plain layout, no template) with a fresh PerformanceModel."""
    return PerformanceView(model=create_model(**settings))


def create_app() -> pn.template.BootstrapTemplate:
    """The served page: settings and Measure in the sidebar, plots, table and tree in the main area."""
    return page_template(TITLE, create_view, threaded=True)


if __name__.startswith("bokeh"):
    create_app().servable()
