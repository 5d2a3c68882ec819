"""Page "Neumann convergence": spectral radius per mask type, [rho]^l decay and the NSA error against l.

Serve on its own with ``panel serve apps/neumann.py`` (add ``--num-threads 4`` so Play runs off the
event loop), or as part of the gallery (``panel serve apps/``, which imports :func:`create_view`).
Every browser session builds its own model; the settings live in the URL, so a screen can be shared.
"""

from __future__ import annotations

import panel as pn

from explorer.ui.page import page_template
from explorer.ui.pages.neumann import NeumannView, create_model

TITLE = "Neumann-series convergence"


def create_view(**settings) -> NeumannView:
    """The bare Viewer (plain layout, no template) with a fresh FAModel (8x8 digits, PPCA q = 10, quarters)."""
    return NeumannView(model=create_model(**settings))


def create_app() -> pn.template.BootstrapTemplate:
    """The served page: controls in the sidebar, the three plots in the main area."""
    return page_template(TITLE, create_view, threaded=True)


if __name__.startswith("bokeh"):
    create_app().servable()
