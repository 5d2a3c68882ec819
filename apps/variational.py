"""Page "Variational DP mixture": a truncated Dirichlet-process mixture fitted to incomplete data.

Two runs side by side (the principled expected-sufficient-statistics update and the thesis's
fill-with-previous-means update), stepped together: ellipses of the components that matter,
stick weights, ELBO and effective number of components over the iterations.

Serve on its own with ``panel serve apps/variational.py`` (add ``--num-threads 4`` so Play runs
off the event loop), or as part of the gallery (``panel serve apps/``, which imports
:func:`create_view`). Every browser session builds its own models; the data and model settings
live in the URL, so a screen can be shared as a link.
"""

from __future__ import annotations

import panel as pn

from explorer.ui.state.data_model import DataModel
from explorer.ui.state.session_data import SessionData
from explorer.ui.page import page_template
from explorer.ui.pages.variational import VariationalPlayground

TITLE = "Variational DP mixture"
#: The default screen: three blobs, 30 % MCAR, truncation K = 10 (three components survive).
DEFAULT_DATA = {"dataset": "three_blobs", "n_samples": 300, "mechanism": "mcar", "rate": 0.3}


def create_view(session: SessionData | None = None, **data_settings) -> VariationalPlayground:
    """The bare Viewer (plain layout, no template) with a fresh DataModel and two VBModels.

    ``session``: the browser session's user data, shared with its other pages (the gallery's).
    """
    return VariationalPlayground(data_model=DataModel(session=session, **(DEFAULT_DATA | data_settings)), n_components=10)


def create_app() -> pn.template.BootstrapTemplate:
    """The served page: controls in the sidebar, the two runs, weights and traces in the main area."""
    return page_template(TITLE, create_view, threaded=True)


if __name__.startswith("bokeh"):
    create_app().servable()
