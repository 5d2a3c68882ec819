"""Page "Mechanism gallery": CPT-v, the linear value effect, Logit-vd and the Table 3.1 MAR table on ratings.

Serve on its own with ``panel serve apps/mechanism_gallery.py``, or as part of the gallery (``panel serve apps/``,
which imports :func:`create_view`). Every browser session builds its own model; the settings live in the URL,
so a screen can be shared as a link.
"""

from __future__ import annotations

import panel as pn

from explorer.ui.page import page_template
from explorer.ui.pages.mechanism_gallery import MechanismGalleryView, create_model

TITLE = "Mechanism gallery"


def create_view(**settings) -> MechanismGalleryView:
    """The bare Viewer (plain layout, no template) with a fresh MechanismGalleryModel (CPT-v, 300 x 40 ratings)."""
    return MechanismGalleryView(model=create_model(**settings))


def create_app() -> pn.template.BootstrapTemplate:
    """The served page: family and parameters in the sidebar; four plots in the main area."""
    return page_template(TITLE, create_view)


if __name__.startswith("bokeh"):
    create_app().servable()
