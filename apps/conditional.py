"""Page "Conditional density slices": p(x_mis | x_obs) of one row under a fitted mixture.

The mixture is either EM's Gaussian mixture or the variational Dirichlet-process mixture (with
its plug-in Gaussian or Student-t posterior-predictive conditional), chosen on the page. A mixed-type
table (numbers and categories: penguins, msleep, auto_mpg, abalone) is fitted with the location model
instead, and a missing categorical cell is shown as bars of its levels' probabilities.

Serve on its own with ``panel serve apps/conditional.py`` (or as part of the gallery,
``panel serve apps/``, which imports :func:`create_view`). Every browser session builds its own
models; EM runs on the session's worker thread, and the data and model settings live in the URL.
"""

from __future__ import annotations

import panel as pn

from explorer.ui.page import page_template
from explorer.ui.pages.conditional import ConditionalView
from explorer.ui.state.data_model import DataModel
from explorer.ui.state.em_model import EMModel
from explorer.ui.state.session_data import SessionData

TITLE = "Conditional density slices"
#: Parameters mirrored in the URL query string (shareable screens).
DATA_URL_PARAMS = ("dataset", "n_samples", "data_seed", "mechanism", "rate", "mask_seed", "standardize")
EM_URL_PARAMS = ("n_components", "covariance_type", "seed")
VB_URL_PARAMS = ("n_components", "alpha", "update", "responsibilities", "seed")
VIEW_URL_PARAMS = ("model_kind", "density")
MIXED_DATA_URL_PARAMS = ("dataset", "hide_rate", "mask_seed")
MIXED_MODEL_URL_PARAMS = ("n_components", "covariance_type", "seed")


def create_view(session: SessionData | None = None, **data_settings) -> ConditionalView:
    """The bare Viewer with fresh models (iris, MCAR 30 %, K = 3 unless overridden); EM starts fitting on load.

    ``session``: the browser session's user data, shared with its other pages (the gallery's).
    """
    settings = {"dataset": "iris", "mechanism": "mcar", "rate": 0.3} | data_settings
    view = ConditionalView(em_model=EMModel(data_model=DataModel(session=session, **settings), n_components=3))
    # fit once the page is up: at session creation the app still registers watchers (URL sync) on the
    # models, which must not race the worker thread; outside a server (or once loaded) this runs now
    pn.state.onload(view.fit)
    return view


def create_app() -> pn.template.BootstrapTemplate:
    """The served page: the view in a template, data and model controls in the sidebar."""
    return page_template(TITLE, create_view, stretch_width=False, sidebar_width=320, url=url_bindings)


def url_bindings(view: ConditionalView) -> list:
    """The data, EM, VB, view and mixed-table settings mirrored in the URL (``data_`` / ``vb_`` / ``mixed_``
    prefixes)."""
    return [(view.em_model.data_model, {p: f"data_{p}" for p in DATA_URL_PARAMS}),
            (view.em_model, {p: p for p in EM_URL_PARAMS}),
            (view.vb_model, {p: f"vb_{p}" for p in VB_URL_PARAMS}),
            (view, {p: p for p in VIEW_URL_PARAMS}),
            (view.mixed_model.data_model, {p: f"mixed_{p}" for p in MIXED_DATA_URL_PARAMS}),
            (view.mixed_model, {p: f"mixed_{p}" for p in MIXED_MODEL_URL_PARAMS})]


if __name__.startswith("bokeh"):
    create_app().servable()
