"""Page "Data & mechanism": what a missingness mechanism removes from a data set.

Serve on its own with ``panel serve apps/data_mechanism.py`` (or as part of the gallery,
``panel serve apps/``, which imports :func:`create_view`). Every browser session builds its own
:class:`~explorer.ui.state.data_model.DataModel`; the data settings live in the URL.
"""

from __future__ import annotations

import panel as pn

from explorer.ui.state.data_model import DataModel
from explorer.ui.state.session_data import SessionData
from explorer.ui.page import page_template
from explorer.ui.pages.data_mechanism import DataMechanismView

TITLE = "Data & mechanism"
#: DataModel parameters mirrored in the URL query string (shareable screens).
URL_PARAMS = ("dataset", "n_samples", "data_seed", "mechanism", "rate", "mask_seed", "standardize")


def create_view(session: SessionData | None = None, **data_settings) -> DataMechanismView:
    """The bare Viewer with a fresh DataModel (iris, ``nmar_lowest`` at 30 % unless overridden).

    ``session``: the browser session's user data, shared with its other pages (the gallery's).
    """
    settings = {"dataset": "iris", "mechanism": "nmar_lowest", "rate": 0.3} | data_settings
    return DataMechanismView(data_model=DataModel(session=session, **settings))


def create_app() -> pn.template.BootstrapTemplate:
    """The served page: the view in a template, its data controls in the sidebar."""
    return page_template(TITLE, create_view, stretch_width=False, sidebar_width=320, url=url_bindings)


def url_bindings(view: DataMechanismView) -> list:
    """The data settings mirrored in the URL."""
    return [(view.data_model, {p: p for p in URL_PARAMS})]


if __name__.startswith("bokeh"):
    create_app().servable()
