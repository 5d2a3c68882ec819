"""Page "Regression from the joint density": E[y | x] (Ghahramani & Jordan eq. 13), bands, draws, bimodal case.

Serve on its own with ``panel serve apps/regression.py`` (add ``--num-threads 4`` so Play runs off
the event loop), or as part of the gallery (``panel serve apps/``, which imports
:func:`create_view`). Every browser session builds its own model; the data, regression and
comparison settings live in the URL, so a screen can be shared as a link.
"""

from __future__ import annotations

import panel as pn

from explorer.ui.state.data_model import DataModel
from explorer.ui.state.regression_model import RegressionModel
from explorer.ui.state.session_data import SessionData
from explorer.ui.page import page_template
from explorer.ui.pages.regression import RegressionView

TITLE = "Regression from the joint density"
#: The start screen: the noisy circle (two values of y for most x), 20 % MCAR, K = 6.
DEFAULT_DATA = {"dataset": "ring", "n_samples": 300, "mechanism": "mcar", "rate": 0.2}


def create_view(session: SessionData | None = None, **data_settings) -> RegressionView:
    """The bare Viewer (plain layout, no template) with a fresh DataModel and RegressionModel.

    ``session``: the browser session's user data, shared with its other pages (the gallery's).
    The fit is played to convergence once the page is up.
    """
    data = DataModel(session=session, **(DEFAULT_DATA | data_settings))
    view = RegressionView(model=RegressionModel(data_model=data, n_components=6))
    # played once the page is up: at session creation the app still registers watchers (URL sync)
    pn.state.onload(view.start)
    return view


def create_app() -> pn.template.BootstrapTemplate:
    """The served page: controls in the sidebar, the scatter, the density slice and the comparison in the main area."""
    return page_template(TITLE, create_view, threaded=True)


if __name__.startswith("bokeh"):
    create_app().servable()
