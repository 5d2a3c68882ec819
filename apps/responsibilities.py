"""Page "Responsibilities": how masking shifts the cluster responsibilities of a mixture of factor analysers.

Serve on its own with ``panel serve apps/responsibilities.py`` (add ``--num-threads 4`` so Play runs off
the event loop), or as part of the gallery (``panel serve apps/``, which imports :func:`create_view`).
Every browser session builds its own model; the settings live in the URL, so a screen can be shared.
"""

from __future__ import annotations

import panel as pn

from explorer.ui.page import page_template
from explorer.ui.pages.responsibilities import ResponsibilitiesView, create_model

TITLE = "Responsibilities under masking"


def create_view(**settings) -> ResponsibilitiesView:
    """The bare Viewer (plain layout, no template): 3s and 8s, two PPCA components, left half missing, opening on
    an image that changes cluster when masked (see :func:`~explorer.ui.pages.responsibilities.create_model`)."""
    return ResponsibilitiesView(model=create_model(**settings))


def create_app() -> pn.template.BootstrapTemplate:
    """The served page: controls in the sidebar, the responsibilities in the main area."""
    return page_template(TITLE, create_view, threaded=True)


if __name__.startswith("bokeh"):
    create_app().servable()
