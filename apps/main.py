"""The gallery: one served app that opens every page of the explorer.

``panel serve apps/`` (``bash scripts/serve.sh``) runs this file as a Bokeh *directory app* at
``/apps``; ``panel serve apps/*.py`` serves it at ``/main`` next to each page on its own. The pages
are the sibling modules of this file (``apps/<page>.py``), loaded by path with :mod:`importlib`
(so this works whatever ``sys.path`` is) and each built only when first opened, from the module's
``create_view()`` (the page's Viewer without a template). A page that cannot be loaded shows a
"page unavailable" message instead of breaking the gallery. The open page is kept in the URL
(``?page=em_playground``), and so are the settings of every page opened, prefixed with its name
(``&em_playground.dataset=three_blobs``): a link reproduces the screen.
"""

from __future__ import annotations

import importlib.util
import inspect
import logging
import sys
import urllib.parse
from pathlib import Path

import pandas as pd
import panel as pn
import param
from panel.viewable import Viewer

from explorer.datasets import list_datasets
from explorer.ui.state.session_data import SessionData
from explorer.ui.page import page_template, prefixed, show_notices, url_bindings_of, url_notice
from explorer.ui.text import md
from explorer.ui.url import UrlState

log = logging.getLogger(__name__)
APPS_DIR = Path(__file__).resolve().parent
TITLE = "Imputation explorer"
HOME = "home"


class PageInfo(param.Parameterized):
    """A page of the gallery: ``apps/<slug>.py`` with ``create_view()``."""

    slug = param.String()
    title = param.String()
    summary = param.String()
    dataset = param.String(doc="The built-in data set the page starts with (empty: the page generates its data)")


PAGES = [
    PageInfo(slug="em_playground", title="EM playground",
             summary="Exact EM, a naive conditional-mean refit and mean imputation side by side on 2-D data: "
                     "Play the iterations and watch the bias of the shortcuts (Ghahramani & Jordan, Fig. 1).",
             dataset="ghahramani_bivariate"),
    PageInfo(slug="conditional", title="Conditional density slices",
             summary="The distribution of a missing value given the observed ones under a fitted mixture: "
                     "density, interval, samples, and the component weights behind them.",
             dataset="iris"),
    PageInfo(slug="data_mechanism", title="Data & mechanism",
             summary="What a missingness mechanism (MCAR, MAR, NMAR) removes from a data set: the missingness "
                     "matrix, per-column rates, patterns and the marginals of observed vs hidden values.",
             dataset="iris"),
    PageInfo(slug="variational", title="Variational DP mixture",
             summary="A truncated Dirichlet-process mixture fitted by variational inference to incomplete data: "
                     "unneeded components switch off; the principled and the thesis update side by side.",
             dataset="three_blobs"),
    PageInfo(slug="benchmark", title="Benchmark (thesis Fig. A.1-A.5)",
             summary="Run the imputation benchmark of the POIGMM thesis in the background: mechanisms x rates x "
                     "methods, scored by NRMSE, NLL, PFC and coverage, next to the thesis notebook's numbers.",
             dataset="boston"),
    PageInfo(slug="inpainting", title="Inpainting with factor models",
             summary="Mask a digit (or paint the mask) and compare mean imputation, FCA, SCA, the exact encoder and "
                     "the Neumann series NSA(l) of PPCA / factor analysis / their mixtures, one image or a grid.",
             dataset="digits_8x8"),
    PageInfo(slug="neumann", title="Neumann-series convergence",
             summary="Spectral radius of I - A/s per image and mask type, the [rho]^l decay with its bound, and the "
                     "error against l with the window where the truncated series beats the exact solution.",
             dataset="digits_8x8"),
    PageInfo(slug="responsibilities", title="Responsibilities under masking",
             summary="How hiding part of a digit shifts the responsibilities of a mixture of factor analysers: one "
                     "image before / after masking (exact and NSA-M), and the shift and accuracy over many images.",
             dataset="digits_8x8"),
    PageInfo(slug="performance", title="EM performance",
             summary="Time per E-step of the precision-side, minimum-spanning-tree and naive kernels, measured live "
                     "against the number of patterns, D and the missing rate; the pattern tree and its Cholesky updates.",
             dataset=""),
    PageInfo(slug="decision_surface", title="Decision surfaces",
             summary="Classifiers trained on 2-D data with missing features (Marlin, ch. 6): P(class | x) over the "
                     "complete cases, strips for the rows missing x or y, imputation samples, and the test loss and "
                     "error of every method; Step / Play the EM mixture classifier.",
             dataset=""),
    PageInfo(slug="regression", title="Regression from the joint density",
             summary="A mixture fitted to the joint density of x and y, then conditioned on x (Ghahramani & Jordan "
                     "eq. 13): E[y | x], predictive bands, stochastic draws, the bimodal case where the mean falls "
                     "between the modes, and held-out RMSE against regression after imputation.",
             dataset="ring"),
    PageInfo(slug="mar_not_enough", title="MAR is not enough",
             summary="Marlin's 2-D binary demonstration (Table 3.1 / 3.3): data missing at random for the true model, "
                     "yet a simpler (factorised) model fitted to the observed values is biased; full-joint EM is not. "
                     "Sliders with a validity check, the closed form and the simulation, live.",
             dataset=""),
    PageInfo(slug="mechanism_gallery", title="Mechanism gallery",
             summary="Value-based NMAR mechanisms side by side: CPT-v, the linear value effect, Logit-vd and the MAR "
                     "table; response probability per value (and item), a sampled rating mask, and the observed "
                     "against the true marginals.",
             dataset=""),
    PageInfo(slug="ratings", title="Ratings: learning the selection model",
             summary="NMAR rating models (Marlin ch. 5) on a synthetic rating world: MAR mixtures against MM/CPT-v, "
                     "CPT-v+, Logit-vd and DP/CPT-v stepped live; the learned selection model against the truth, the "
                     "moment estimate, per-user predictions for rated and unrated items, NMAE against K and s.",
             dataset=""),
    PageInfo(slug="sensitivity", title="Sensitivity to NMAR: delta adjustment",
             summary="How far must the missing values differ from what MAR imputation assumes before a conclusion "
                     "changes? Shift or scale the imputations of a column by delta and watch a pooled mean or "
                     "regression coefficient, its interval and the tipping point.",
             dataset="iris"),
]


def load_page_module(slug: str):
    """Import ``apps/<slug>.py`` by path (cached in ``sys.modules`` as ``explorer_apps.<slug>``)."""
    name = f"explorer_apps.{slug}"
    if name in sys.modules:
        return sys.modules[name]
    path = APPS_DIR / f"{slug}.py"
    if not path.is_file():
        raise FileNotFoundError(f"{path.name} is not in {APPS_DIR}")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def build_page(slug: str, session: SessionData | None = None):
    """``(sidebar, main, bindings)`` of a page (``sidebar`` is None when the view has no separate
    controls; ``bindings`` are the page's URL bindings, see :func:`~explorer.ui.page.url_bindings_of`).

    Raises whatever the page raises; :class:`Gallery` turns that into a readable placeholder.
    """
    module = load_page_module(slug)
    factory = getattr(module, "create_view", None) or getattr(module, "view", None)
    if factory is None:
        raise AttributeError(f"apps/{slug}.py defines no create_view() returning the page's Viewer")
    # the session's user data are shared by the pages that take them (``create_view(session=...)``)
    takes_session = "session" in inspect.signature(factory).parameters
    view = factory(session=session) if takes_session and session is not None else factory()
    bindings = url_bindings_of(module, view)
    sidebar, main = getattr(view, "sidebar", None), getattr(view, "main", None)
    if sidebar is None or main is None:
        return None, view, bindings
    return sidebar, main, bindings


def _datasets_table() -> pd.DataFrame:
    return pd.DataFrame([{"name": d.name, "data set": d.title, "rows x columns": f"{d.n_samples} x {d.n_features}",
                          "description": d.description} for d in list_datasets()])


def _marked(obj, css_class: str):
    """``obj`` with ``css_class`` added (None stays None): pages' parts are marked, never wrapped."""
    if obj is not None and css_class not in obj.css_classes:
        obj.css_classes = [*obj.css_classes, css_class]
    return obj


#: Browser back / forward reload the page, so the screen follows the URL it goes back to. The gallery
#: writes every change of page and setting to the URL (one history entry each); the browser changes the
#: address on back / forward without telling the server. The listener is a script in the page's <head>
#: (see :func:`back_forward_script`), registered before anything renders: after a reload, Chromium keeps
#: the earlier entries same-document, so the very next Back fires ``popstate`` in the *new* page, possibly
#: before its components have rendered (a listener installed by a component missed it under load, and the
#: screen stayed on the old page while the address said another).
BACK_FORWARD_JS = 'window.addEventListener("popstate", function () { window.location.reload(); });'


def back_forward_script() -> str:
    """``BACK_FORWARD_JS`` as a ``data:`` URL for the session's ``pn.config.js_files`` (a ``<script>`` in <head>)."""
    return "data:text/javascript;charset=utf-8," + urllib.parse.quote(BACK_FORWARD_JS)


class Gallery(Viewer):
    """Navigation between the pages; each page is built the first time it is opened.

    The open page and the settings of every page opened are kept in the URL (see
    :class:`~explorer.ui.url.UrlState`): the link's values are applied to a page when it is
    built, and values that cannot be used are said in a notice at the top of the page.
    """

    page = param.Selector(default=HOME, objects=[HOME] + [p.slug for p in PAGES], doc="The open page")

    def __init__(self, url: UrlState | None = None, **params):
        super().__init__(**params)
        self._url = url if url is not None else UrlState()
        # what the user uploads (or clicks) on one page is offered by every page that can use it
        self.session = SessionData()
        self._built: dict[str, tuple] = {}
        self._notices: dict[str, list[str]] = {}
        self.notice = url_notice()
        self.menu = pn.widgets.RadioButtonGroup.from_param(
            self.param.page, options={"Home": HOME} | {p.title: p.slug for p in PAGES},
            orientation="vertical", variant="outline", color="primary", sizing_mode="stretch_width",
            css_classes=["gallery-menu"])
        self.page_sidebar = pn.Column(sizing_mode="stretch_width")
        # the notice and the open page's main area, side by side in one Column (see _marked)
        self.main = pn.Column(self.notice, sizing_mode="stretch_width", min_height=400)
        self.sidebar = pn.Column("### Pages", self.menu, pn.layout.Divider(), self.page_sidebar,
                                 sizing_mode="stretch_width")
        self._home = None  # built when first shown: a link to another page never pays for it
        self._layout = pn.Row(pn.Column(self.sidebar, width=340), self.main, sizing_mode="stretch_width")
        # the page named in the link (its value checked; a new value shows the page), then the URL
        # follows the menu
        before = self.page
        self._notices[HOME] = self._url.bind([(self, {"page": "page"})])
        if self.page == before:
            self._show()

    def __panel__(self):
        return self._layout

    def _build_home(self):
        cards = []
        for p in PAGES:
            button = pn.widgets.Button(label=f"Open {p.title}", color="primary")
            button.on_click(lambda event, slug=p.slug: setattr(self, "page", slug))
            cards.append(pn.Column(
                pn.pane.Markdown(f"### {p.title}\n{p.summary}\n\n" + (
                    f"*Starts with the built-in data set* `{p.dataset}`." if p.dataset else
                    "*Works on generated data (no data set needed).*")),
                button, sizing_mode="stretch_width", margin=8,
                styles={"border": "1px solid #d0d7de", "border-radius": "8px", "padding": "8px"}))
        intro = pn.pane.Markdown(
            "# Imputation explorer\nInteractive pages about fitting models to data with missing values and "
            "imputing them from the fitted model: mixtures of Gaussians fitted by EM or by variational inference "
            "(a Dirichlet-process mixture), what the missingness mechanism does to the data, and how the methods "
            "compare on the thesis's imputation benchmark. Pick a page below or in the sidebar; every page works on the built-in "
            "data sets listed at the bottom, and its settings can be changed in its sidebar.",
            sizing_mode="stretch_width")
        table = pn.pane.DataFrame(_datasets_table(), index=False, sizing_mode="stretch_width",
                                  stylesheets=[":host table td, :host table th {text-align: left;}"])
        return pn.Column(intro, pn.GridBox(*cards, ncols=min(3, len(cards)), sizing_mode="stretch_width"),
                         "### Built-in data sets", table, sizing_mode="stretch_width")

    def _page(self, slug: str):
        if slug not in self._built:
            try:
                sidebar, main, bindings = build_page(slug, self.session)
                # the page's settings live in the gallery's URL too, prefixed with the page's name, so a
                # link reproduces the screen (and pages that share parameter names do not collide); only
                # this page's settings are read from the link, once, when it is built
                self._notices[slug] = self._url.bind(prefixed(bindings, f"{slug}."))
                # marked with the page's name (a browser test checks that only the open page's parts show);
                # marked, not wrapped: one more layout level kept the inpainting page's FlexBox from ever
                # finishing its render in Panel 1.9 (the document never became idle)
                self._built[slug] = (_marked(sidebar, f"page-sidebar-{slug}"), _marked(main, f"page-main-{slug}"))
            except Exception as exc:  # the gallery stays usable whatever a page does
                log.exception("page %s could not be built", slug)
                alert = pn.pane.Alert(f"**Page unavailable:** {md(type(exc).__name__)}: {md(exc)}",
                                      alert_type="warning", sizing_mode="stretch_width")
                self._built[slug] = (None, _marked(alert, f"page-main-{slug}"))
        return self._built[slug]

    @param.depends("page", watch=True)
    def _show(self):
        if self.page == HOME:
            if self._home is None:
                self._home = _marked(self._build_home(), f"page-main-{HOME}")
            sidebar, main = None, self._home
        else:
            self.main.loading = True
            try:
                sidebar, main = self._page(self.page)
            finally:
                self.main.loading = False
        notices = self._notices.pop(HOME, []) + self._notices.pop(self.page, [])
        with pn.io.hold():
            show_notices(self.notice, notices)
            self.page_sidebar.objects = [] if sidebar is None else [sidebar]
            self.main.objects = [self.notice, main]


def create_app() -> pn.template.BootstrapTemplate:
    """The served gallery: page menu (and the open page's controls) in the sidebar, the page in main."""
    # "tabulator": the benchmark page's table (a page built later in the session cannot load its JS)
    template = page_template(TITLE, lambda: Gallery(url=UrlState.of_session()), extensions=("tabulator",),
                             threaded=True, url=lambda gallery: [])
    # per session (Panel keeps js_files per document): a <script> in the page's <head>
    pn.config.js_files = {**pn.config.js_files, "explorer_back_forward": back_forward_script()}
    return template


if __name__.startswith("bokeh"):
    create_app().servable()
