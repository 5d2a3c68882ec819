"""Page "EM playground": exact EM vs a naive refit vs mean imputation on 2-D data (classroom).

Serve on its own with ``panel serve apps/em_playground.py`` (add ``--num-threads 4`` so Play runs
off the event loop), or as part of the gallery (``panel serve apps/``, which imports
:func:`create_view`). Every browser session builds its own models; the data and model settings
live in the URL, so a screen can be shared as a link.
"""

from __future__ import annotations

import panel as pn

from explorer.ui.state.data_model import DataModel
from explorer.ui.state.session_data import SessionData
from explorer.ui.page import page_template
from explorer.ui.pages.em_playground import EMPlayground

TITLE = "EM playground"
#: The default screen: ghahramani1994 Fig. 1 (bivariate Gaussian, y hidden where x is large, K = 1).
DEFAULT_DATA = {"dataset": "ghahramani_bivariate", "n_samples": 200, "mechanism": "mar_threshold", "rate": 0.35}


def create_view(session: SessionData | None = None, **data_settings) -> EMPlayground:
    """The bare Viewer (plain layout, no template) with a fresh DataModel and three EMModels.

    ``session``: the browser session's user data, shared with its other pages (the gallery's).
    """
    return EMPlayground(data_model=DataModel(session=session, **(DEFAULT_DATA | data_settings)), n_components=1)


def create_app() -> pn.template.BootstrapTemplate:
    """The served page: controls in the sidebar, the three panels and the traces in the main area."""
    return page_template(TITLE, create_view, threaded=True)


if __name__.startswith("bokeh"):
    create_app().servable()
