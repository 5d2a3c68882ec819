"""Page "Inpainting": a masked digit imputed by every encoder of a factor model, the brush, NSA over l.

Serve on its own with ``panel serve apps/inpainting.py`` (add ``--num-threads 4`` so Play runs off the
event loop), or as part of the gallery (``panel serve apps/``, which imports :func:`create_view`).
Every browser session builds its own model; the settings live in the URL, so a screen can be shared.
"""

from __future__ import annotations

import panel as pn

from explorer.ui.state.fa_model import FAModel
from explorer.ui.page import page_template
from explorer.ui.pages.inpainting import InpaintingView

TITLE = "Inpainting with factor models"
#: The default screen: 8x8 digits, PPCA with q = 10, a random quarter missing.
DEFAULT = {"dataset": "digits_8x8", "n_factors": 10, "n_components": 1, "mask": "quarter"}


def create_view(**settings) -> InpaintingView:
    """The bare Viewer (plain layout, no template) with a fresh FAModel."""
    return InpaintingView(model=FAModel(**(DEFAULT | settings)))


def create_app() -> pn.template.BootstrapTemplate:
    """The served page: controls in the sidebar, the panels in the main area."""
    return page_template(TITLE, create_view, threaded=True)


if __name__.startswith("bokeh"):
    create_app().servable()
