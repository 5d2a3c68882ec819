"""Page "Ratings": NMAR rating models (Marlin ch. 5) fitted live on a synthetic rating world.

Serve on its own with ``panel serve apps/ratings.py`` (add ``--num-threads 4`` so Play runs off the
event loop), or as part of the gallery (``panel serve apps/``, which imports :func:`create_view`).
Every browser session builds its own model; the world, model and comparison settings live in the
URL, so a screen can be shared as a link.
"""

from __future__ import annotations

import panel as pn

from explorer.ui.state.ratings_model import RatingsModel
from explorer.ui.state.session_data import SessionData
from explorer.ui.page import page_template
from explorer.ui.pages.ratings import RatingsView

TITLE = "Ratings: learning the selection model"
#: The start screen: 300 users x 20 items, s = 0.25 (the strongest value effect), MM/CPT-v with K = 3.
DEFAULT_SETTINGS = {"n_users": 300, "n_items": 20, "n_clusters": 3, "s": 0.25, "model": "cpt_v", "n_components": 3}


def create_view(session: SessionData | None = None, **settings) -> RatingsView:
    """The bare Viewer (plain layout, no template) with a fresh RatingsModel.

    ``session`` is accepted for the gallery's signature; the page draws its own synthetic world and
    uses no uploaded data. The fit shown at open runs on the session's worker and is drawn once it has
    converged (the fit is shared by the sessions of the process).
    """
    view = RatingsView(model=RatingsModel(**(DEFAULT_SETTINGS | settings)))
    # played once the page is up: at session creation the app still registers watchers (URL sync)
    pn.state.onload(view.start)
    return view


def create_app() -> pn.template.BootstrapTemplate:
    """The served page: controls in the sidebar, the selection model, objective, predictive and comparison in the main area."""
    return page_template(TITLE, create_view, threaded=True)


if __name__.startswith("bokeh"):
    create_app().servable()
