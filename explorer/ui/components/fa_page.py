"""What the three factor-analysis pages (Inpainting, Neumann convergence, Responsibilities) share:
the fit's and the mask's widgets and :class:`FAPage`, their base (a model, a player over l, an alert)."""

from __future__ import annotations

import panel as pn
import param
from panel.viewable import Viewer

from explorer.ui.components.notebook import notebook_layout
from explorer.ui.components.player import StepPlayer
from explorer.ui.page import prefixed, sync_with_url, weak_callback
from explorer.ui.session import Redraw
from explorer.ui.state.fa_model import CLASSES, FAModel
from explorer.ui.text import md

__all__ = ["URL", "FAPage", "mask_widgets", "model_widgets"]

#: The model settings the factor-analysis pages keep in the URL.
URL = ("dataset", "classes", "kind", "n_factors", "n_components", "mask", "rate", "quarter", "side", "size",
       "mask_seed", "image_index", "n_terms", "max_terms")


def model_widgets(model: FAModel, *, components=(1, 4)) -> list:
    """Widgets of the fit: data set, digits, kind, q, number of components."""
    return [
        pn.widgets.Select.from_param(model.param.dataset, label="Images"),
        pn.widgets.Select.from_param(model.param.classes, label="Digits", options={
            "all" if c == "all" else " and ".join(f"{d}s" for d in c.split(",")): c for c in CLASSES}),
        pn.widgets.Select.from_param(model.param.kind, label="Model", options={"PPCA": "ppca", "factor analysis": "fa"}),
        pn.widgets.IntSlider.from_param(model.param.n_factors, label="Factors q", start=1, end=60),
        pn.widgets.IntSlider.from_param(model.param.n_components, label="Components (1 = no mixture)",
                                        start=components[0], end=components[1]),
    ]


def mask_widgets(model: FAModel, masks=None) -> pn.Column:
    """Mask type and its parameters (only the relevant ones are visible)."""
    labels = {"random pixels": "random_pixels", "quarter": "quarter", "half": "half", "square": "square",
              "brush (paint)": "brush"}
    options = {k: v for k, v in labels.items() if masks is None or v in masks}
    kind = pn.widgets.Select.from_param(model.param.mask, label="Mask type", options=options)
    rate = pn.widgets.FloatSlider.from_param(model.param.rate, label="Missing fraction", step=0.05)
    quarter = pn.widgets.Select.from_param(model.param.quarter, label="Quarter")
    side = pn.widgets.Select.from_param(model.param.side, label="Half removed")
    size = pn.widgets.IntSlider.from_param(model.param.size, label="Square side", start=1, end=28)
    seed = pn.widgets.IntInput.from_param(model.param.mask_seed, label="Mask seed")
    show = {"random_pixels": (rate, seed), "quarter": (quarter, seed), "half": (side,), "square": (size, seed),
            "brush": ()}

    def _visible(*events):
        for w in (rate, quarter, side, size, seed):
            w.visible = w in show[model.mask]

    model.param.watch(_visible, "mask")
    _visible()
    return pn.Column(kind, rate, quarter, side, size, seed, sizing_mode="stretch_width")


class FAPage(Viewer):
    """Base of the factor-analysis pages: a model, a player over l, an alert, ``sidebar`` / ``main``.

    Subclasses build ``self.sidebar`` / ``self.main`` in ``_build`` and draw in ``_draw``; ``refresh()``
    (called whenever the model publishes new outputs) runs it on the session's event loop.
    """

    __abstract = True
    model = param.ClassSelector(class_=FAModel, doc="Fit, masks, encoders and the Neumann series")
    _URL: tuple = URL

    def __init__(self, **params):
        if params.get("model") is None:
            params["model"] = FAModel()
        super().__init__(**params)
        self.player = StepPlayer(models=[self.model], labels=["l"], steps_per_tick=1, period=150)
        self._alert = pn.pane.Alert("", alert_type="danger", visible=False, sizing_mode="stretch_width")
        self._info = self._make_info()
        self._l_slider = pn.widgets.IntSlider.from_param(self.model.param.n_terms, label="Neumann updates l",
                                                         start=0, end=self.model.max_terms)
        self._max_terms = pn.widgets.IntInput.from_param(self.model.param.max_terms, label="Play up to l =", start=1)
        self.model.param.watch(self._on_max_terms, "max_terms")
        self._redraw = Redraw(self._draw)  # Bokeh models are changed on the session's event loop only
        self._build()
        self._layout = None  # the notebook's layout, made when first shown (a server shows sidebar and main)
        self.model.param.watch(weak_callback(self._on_revision), ["revision"])
        self.refresh()

    def __panel__(self):
        if self._layout is None:
            self._layout = notebook_layout(self.sidebar, self.main)
        return self._layout

    def _on_max_terms(self, event):
        self._l_slider.end = max(1, event.new)

    def _on_revision(self, event):
        self.refresh()

    def _make_info(self):
        """The read-out line a page shows under its alert (``self._info``; its ``object`` is set to inline Markdown).

        A Markdown pane; a page whose read-out changes every frame may return a cheaper
        :class:`~explorer.ui.components.textline.TextLine`.
        """
        return pn.pane.Markdown("", sizing_mode="stretch_width", margin=(0, 10))

    def _build(self):
        raise NotImplementedError

    def refresh(self):
        """Redraw the page (on the session's event loop: from another thread it is scheduled there)."""
        self._redraw()

    def _draw(self):
        raise NotImplementedError

    def _show_error(self) -> bool:
        """Show the model's error in the alert; True when there is nothing to draw."""
        err = self.model.error
        self._alert.object = f"**Could not fit or encode:** {md(err)}" if err else ""
        self._alert.visible = bool(err)
        return bool(err) or self.model.params is None or self.model.missing is None

    def _l_widgets(self) -> list:
        return ["### Neumann series", self._l_slider, self.player, self._max_terms]

    def settings(self) -> dict:
        """The model settings shown by the page (JSON-serialisable)."""
        return {k: v for k, v in self.model.settings().items() if k in self._URL}

    def sync_url(self, prefix: str = "") -> bool:
        """Keep the settings in the page URL (when served)."""
        return sync_with_url(*prefixed(self.url_bindings(), prefix))

    def url_bindings(self) -> list:
        """The model settings kept in the URL, as ``[(model, {parameter: query name})]``."""
        return [(self.model, {k: k for k in self._URL})]
