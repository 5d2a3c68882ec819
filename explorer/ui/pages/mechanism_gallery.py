r"""The "Mechanism gallery" page: Marlin's NMAR (and one MAR) mechanisms on a synthetic ratings matrix.

marlin2008 digest, section 7, item 2. A :class:`~explorer.ui.state.mechanism_gallery_model.MechanismGalleryModel`
holds the family (CPT-v, the linear value effect, Logit-vd, the Table 3.1 MAR table), its parameters and the
synthetic world's size (sidebar, kept in the URL). Four Bokeh figures made once per session (:class:`GalleryPlots`;
a change only replaces their data, ticks, ranges and titles), drawing the pure :func:`gallery_frame`:

* the per-value response probabilities P(r = 1 | x = v), averaged over items (bars);
* the heat map of P(r = 1 | v, item d) over values x items (flat columns for CPT-v: no item effect);
* a sampled response mask on the ratings matrix (users x items: the value where observed, grey where not);
* the observed against the true marginal of the values (Fig. 5.2 style), with the symmetrised KL (eq. 5.1.1).
"""

from __future__ import annotations

import numpy as np
import panel as pn
import param
from bokeh.models import (
    ColorBar,
    ColumnDataSource,
    FixedTicker,
    HoverTool,
    Legend,
    LegendItem,
    LinearColorMapper,
    Range1d,
)
from bokeh.palettes import Viridis256
from bokeh.plotting import figure
from bokeh.transform import dodge
from panel.viewable import Viewer

from explorer.core.validation import BadInputError
from explorer.ui.components.flow import flow
from explorer.ui.components.notebook import notebook_layout
from explorer.ui.page import sync_with_url
from explorer.ui.plots.figures import figure_pane
from explorer.ui.session import Redraw, hold, push, run_then
from explorer.ui.state.mechanism_gallery_model import FAMILIES, GalleryResult, MechanismGalleryModel
from explorer.ui.text import md
from explorer.ui.weak import weak_callback

__all__ = ["GalleryPlots", "MechanismGalleryView", "create_model", "gallery_frame"]

COLORS = {"true": "#7f7f7f", "observed": "#1f77b4", "response": "#2ca02c"}
#: one colour per value on the mask (discrete: low values purple to high values yellow)
VALUE_COLORS = ["#440154", "#3b528b", "#21918c", "#5ec962", "#fde725"]
TRUE_KIND, OBSERVED_KIND = "true (all entries)", "observed (r = 1)"
#: users drawn on the mask image at most (the first ones)
MAX_MASK_ROWS = 400

EXPLANATION = """
### What am I looking at?
A **missing-data mechanism** P(r | x) says which entries of a data matrix are seen (r = 1). In a ratings matrix
(users x items, ratings 1-5) the users choose what to rate, and they tend to rate what they like: the response
depends on the value itself, which is *not missing at random* (NMAR). Marlin (2008, chapter 5) models this with

* **CPT-v** (eq. 5.4.6): P(r = 1 | x = v) = μ<sub>v</sub>, one probability per value, the same for every item;
* the **linear value effect** of the Jester experiments (section 5.2.1): μ<sub>v</sub>(s) = s (v − 3) + 1/2,
  s from 0 (MCAR) to 0.25 (μ = 0, 0.25, 0.5, 0.75, 1);
* **Logit-vd** (eq. 5.6.1): P(r = 1 | x = v, item d) = sigmoid(σ<sub>v</sub> + ω<sub>d</sub>), a value effect
  plus an item effect (popular items are rated more whatever the rating);
* and, for contrast, the **Table 3.1 MAR** mechanism on two binary variables (see the page "MAR is not enough").

The data are a synthetic world (users in latent clusters, every rating known), so the **true** marginal of the
values is known and can be set against the marginal of the **observed** ratings, as Marlin does with the Yahoo!
survey (random songs) against the users' own choices (Fig. 5.2). Their difference is measured by the symmetrised
KL divergence of eq. 5.1.1 (each distribution smoothed by +1 count per value, in bits); the thesis's median per
song on Yahoo! was 0.875 bits.
"""


def create_model(**settings) -> MechanismGalleryModel:
    """The default model of the page: CPT-v with μ = (0.1, 0.3, 0.5, 0.7, 0.9), 300 users x 40 items."""
    return MechanismGalleryModel(**settings)


def gallery_frame(result: GalleryResult) -> dict:
    """What the four plots draw for a result (plain lists and arrays)."""
    v = list(result.values)
    n, d = result.codes.shape
    probs = result.response_probs
    items = [f"{j + 1}" for j in range(d)] if result.family != "mar_table" else ["x1", "x2"]
    heat_items, heat_values = np.meshgrid(np.arange(d), np.arange(len(v)))
    rows = min(n, MAX_MASK_ROWS)
    mask = np.where(result.response[:rows], result.codes[:rows] + (0 if result.family == "mar_table" else 1), np.nan)
    if result.family == "mar_table":  # per variable: pooling x1 and x2 would mix two different biases
        labels, true, observed = result.variable_marginals()
        title = f"Observed vs true marginal per variable · SKL x1 {result.item_skl[0]:.3f} bits"
    else:
        labels, true, observed = v, result.true_marginal, result.observed_marginal
        title = f"Observed vs true marginal · symmetrised KL {result.skl:.3f} bits"
    kinds = [TRUE_KIND] * len(labels) + [OBSERVED_KIND] * len(labels)
    return {
        "bars": (v, probs.mean(axis=1)),
        "heat": ([items[j] for j in heat_items.ravel()], [v[i] for i in heat_values.ravel()], probs.ravel()),
        "mask": mask[::-1].astype(float),  # hv.Image's first row is drawn at the top: flipped, user 1 at the bottom
        "mask_bounds": (0, 0, d, rows),
        "marginals": (list(labels) * 2, kinds, np.r_[true, observed]), "title": title,
        "values": v, "n_items": d, "n_users": rows,
    }


def _figure(title: str, css: str, **kw) -> tuple:
    fig = figure(title=title, sizing_mode="stretch_width", height=340, min_height=330, toolbar_location="above",
                 tools="pan,wheel_zoom,box_zoom,save,reset", **kw)
    # the figure in a marked box (a Bokeh pane's own CSS classes go to the figure's shadow root)
    pane = figure_pane(fig, sizing_mode="stretch_width", min_height=340)
    return fig, pane, pn.Column(pane, sizing_mode="stretch_width", min_height=340, css_classes=[css])


def _ticks(axis, labels, rotate: bool = False) -> None:
    """Categories drawn at numeric positions 0..n-1 with their labels (a change of categories sets properties
    only: categorical factors that shrink break Bokeh's patches, see tests/browser/test_shrinking_updates.py)."""
    axis.ticker = FixedTicker(ticks=list(range(len(labels))))
    axis.major_label_overrides = {i: str(label) for i, label in enumerate(labels)}
    axis.major_label_orientation = np.pi / 2 if rotate else "horizontal"


class GalleryPlots:
    """The page's four figures, made once per session; :meth:`update` only replaces data, ticks, ranges and titles."""

    def __init__(self):
        self.bars_fig, bars_pane, self.bars = _figure("Response probability per value (mean over items)",
                                                      "gallery-bars", x_axis_label="value v",
                                                      y_axis_label="P(r = 1 | x = v)", y_range=Range1d(0, 1))
        self.bars_source = ColumnDataSource({"x": [], "p": []})
        self.bars_fig.vbar(x="x", top="p", width=0.8, source=self.bars_source, color=COLORS["response"])

        self.heat_fig, heat_pane, self.heat = _figure("P(r = 1 | value, item)", "gallery-heat", x_axis_label="item d",
                                                      y_axis_label="value v")
        self.heat_fig.xgrid.visible = self.heat_fig.ygrid.visible = False
        self.heat_source = ColumnDataSource({"x": [], "y": [], "item": [], "value": [], "p": []})
        heat_colors = LinearColorMapper(palette=Viridis256, low=0.0, high=1.0)
        cells = self.heat_fig.rect(x="x", y="y", width=1, height=1, source=self.heat_source,
                                   fill_color={"field": "p", "transform": heat_colors}, line_color=None)
        self.heat_fig.add_layout(ColorBar(color_mapper=heat_colors, title="P(r = 1 | v, d)"), "right")
        self.heat_fig.add_tools(HoverTool(renderers=[cells], tooltips=[("item d", "@item"), ("value v", "@value"),
                                                                       ("P(r = 1 | v, d)", "@p{0.000}")]))

        self.mask_fig, mask_pane, self.mask = _figure("Sampled mask", "gallery-mask", x_axis_label="item",
                                                      y_axis_label="user", x_range=Range1d(0, 1), y_range=Range1d(0, 1))
        self.mask_fig.xgrid.visible = self.mask_fig.ygrid.visible = False
        self.mask_source = ColumnDataSource({"image": [np.full((1, 1), np.nan)], "dw": [1], "dh": [1]})
        self.mask_colors = LinearColorMapper(palette=VALUE_COLORS, low=0.5, high=5.5, nan_color="#e6e6e6")
        self.mask_fig.image(image="image", x=0, y=0, dw="dw", dh="dh", source=self.mask_source,
                            color_mapper=self.mask_colors)
        self.mask_bar = ColorBar(color_mapper=self.mask_colors, title="value")
        self.mask_fig.add_layout(self.mask_bar, "right")

        self.marg_fig, marg_pane, self.marginals = _figure("Observed vs true marginal", "gallery-marginals",
                                                           x_axis_label="value v", y_axis_label="share of entries")
        self.marg_sources = {kind: ColumnDataSource({"x": [], "share": []}) for kind in (TRUE_KIND, OBSERVED_KIND)}
        items = []
        for kind, shift, color in ((TRUE_KIND, -0.2, COLORS["true"]), (OBSERVED_KIND, 0.2, COLORS["observed"])):
            r = self.marg_fig.vbar(x=dodge("x", shift), top="share", width=0.38, source=self.marg_sources[kind],
                                   color=color)
            items.append(LegendItem(label=kind, renderers=[r]))
        self.marg_fig.add_layout(Legend(items=items, orientation="horizontal", location="center"), "below")
        self.panes = [bars_pane, heat_pane, mask_pane, marg_pane]
        self.frame: dict | None = None

    def update(self, frame: dict) -> None:
        """Draw a :func:`gallery_frame`."""
        self.frame = frame
        values = frame["values"]
        n_values = len(values)
        p = np.asarray(frame["bars"][1], dtype=float)
        self.bars_source.data = {"x": np.arange(n_values, dtype=float), "p": p}
        _ticks(self.bars_fig.xaxis[0], values)
        self.bars_fig.x_range.update(start=-0.6, end=n_values - 0.4)

        items, heat_values, probs = frame["heat"]
        item_labels = list(dict.fromkeys(items))
        self.heat_source.data = {"x": np.array([item_labels.index(i) for i in items], dtype=float),
                                 "y": np.array([values.index(v) for v in heat_values], dtype=float),
                                 "item": list(items), "value": list(heat_values), "p": np.asarray(probs, dtype=float)}
        _ticks(self.heat_fig.xaxis[0], item_labels, rotate=frame["n_items"] > 20)
        _ticks(self.heat_fig.yaxis[0], values)
        self.heat_fig.x_range.update(start=-0.5, end=len(item_labels) - 0.5)
        self.heat_fig.y_range.update(start=-0.5, end=n_values - 0.5)

        x0, y0, x1, y1 = frame["mask_bounds"]
        lo = 0.0 if values == ["0", "1"] else 1.0
        n = max(n_values, 2)
        self.mask_colors.update(palette=VALUE_COLORS[:n] if n <= len(VALUE_COLORS) else list(Viridis256),
                                low=lo - 0.5, high=lo + n - 0.5)
        self.mask_bar.ticker = FixedTicker(ticks=[lo + k for k in range(n)])
        # frame["mask"] is flipped for an image drawn top-down; Bokeh draws row 0 at the bottom (user 1)
        self.mask_source.data = {"image": [np.ascontiguousarray(frame["mask"][::-1], dtype=np.float32)],
                                 "dw": [x1 - x0], "dh": [y1 - y0]}
        self.mask_fig.x_range.update(start=x0, end=x1, reset_start=x0, reset_end=x1)
        self.mask_fig.y_range.update(start=y0, end=y1, reset_start=y0, reset_end=y1)
        self.mask_fig.title.text = f"Sampled mask: observed values, grey = missing ({frame['n_users']} users)"

        labels, kinds, shares = frame["marginals"]
        shares = np.asarray(shares, dtype=float)
        n_labels = len(labels) // 2
        for kind, part in ((TRUE_KIND, shares[:n_labels]), (OBSERVED_KIND, shares[n_labels:])):
            self.marg_sources[kind].data = {"x": np.arange(n_labels, dtype=float), "share": part}
        _ticks(self.marg_fig.xaxis[0], labels[:n_labels])
        self.marg_fig.x_range.update(start=-0.6, end=n_labels - 0.4)
        self.marg_fig.title.text = frame["title"]


class MechanismGalleryView(Viewer):
    """Family and parameters in the sidebar; response probabilities, heat map, mask and marginals in the main area."""

    model = param.ClassSelector(class_=MechanismGalleryModel, doc="The settings and computations shown on the page")

    def __init__(self, **params):
        if params.get("model") is None:
            params["model"] = MechanismGalleryModel()
        super().__init__(**params)
        self.result: GalleryResult | None = None
        self._error = ""
        self._redraw = Redraw(self._draw)  # Bokeh models are changed on the session's event loop only
        self._build()
        self.model.param.watch(weak_callback(self._on_settings), list(self.model._SETTINGS))
        self._show_family_widgets()
        self.refresh()

    def __panel__(self):
        return self._layout

    def _build(self):
        m = self.model
        w = pn.widgets

        def slider(p, label, step=0.01):
            return w.FloatSlider.from_param(p, label=label, step=step, throttled=True)

        self._groups = {
            "cpt_v": pn.Column(*(slider(getattr(m.param, f"mu{v}"), f"μ{v} = P(r = 1 | x = {v})") for v in range(1, 6)),
                               sizing_mode="stretch_width"),
            "linear": pn.Column(slider(m.param.s, "s (0 = MCAR)", 0.0125), sizing_mode="stretch_width"),
            "logit_vd": pn.Column(*(slider(getattr(m.param, f"sigma{v}"), f"σ{v} (value {v})", 0.1) for v in range(1, 6)),
                                  slider(m.param.item_spread, "Item effects ω_d in [−spread, spread]", 0.1),
                                  sizing_mode="stretch_width"),
            "mar_table": pn.Column(slider(m.param.alpha, "α"), slider(m.param.beta, "β"), slider(m.param.delta, "δ"),
                                   slider(m.param.gamma, "γ"), slider(m.param.lam, "λ"),
                                   pn.pane.Markdown("Data (a, b, c, d) = (0.1, 0.1, 0.7, 0.1), two binary variables.",
                                                    margin=(0, 10)),
                                   sizing_mode="stretch_width"),
        }
        family = w.Select.from_param(m.param.family, label="Family", options={v: k for k, v in FAMILIES.items()},
                                     css_classes=["family-select"])
        # a strong callback from a sidebar widget: the session (which holds the sidebar) keeps this view alive,
        # while the model's watchers on the view are weak (see _weak)
        family.param.watch(self._show_family_widgets, "value")
        self.sidebar = pn.Column(
            "### Mechanism", family,
            *self._groups.values(),
            "### Synthetic ratings (V = 5)",
            w.IntSlider.from_param(m.param.n_users, label="Users", step=10, throttled=True),
            w.IntSlider.from_param(m.param.n_items, label="Items", throttled=True),
            w.IntSlider.from_param(m.param.n_clusters, label="Latent clusters", throttled=True),
            w.IntInput.from_param(m.param.seed, label="Seed"),
            sizing_mode="stretch_width", min_width=300,
        )
        self._plots = GalleryPlots()
        panes = [self._plots.bars, self._plots.heat, self._plots.mask, self._plots.marginals]
        self._alert = pn.pane.Alert("", alert_type="danger", visible=False, sizing_mode="stretch_width",
                                    css_classes=["gallery-alert"])
        self._sentence = pn.pane.Markdown("", sizing_mode="stretch_width", css_classes=["gallery-sentence"],
                                          margin=(0, 10))
        self.main = pn.Column(
            self._alert, self._sentence, flow(panes[0], panes[1]), flow(panes[2], panes[3]),
            pn.pane.Markdown(EXPLANATION, sizing_mode="stretch_width"), sizing_mode="stretch_width")
        self._layout = notebook_layout(self.sidebar, self.main)

    def _show_family_widgets(self, *events):
        for key, group in self._groups.items():
            group.visible = key == self.model.family

    def refresh(self) -> None:
        """Draw the world and mask of the current setting (on the session's worker when served) and show them, or
        the reason why not."""
        run_then(self._compute, self._computed, key="compute")

    def _compute(self):
        problems = self.model.problems()
        try:
            if problems:
                raise BadInputError("; ".join(problems))
            return self.model.compute(), ""
        except BadInputError as exc:
            return None, str(exc)

    def _computed(self, outcome, error: BaseException | None = None) -> None:
        if outcome is None:
            return
        self.result, self._error = outcome
        self._redraw()

    def _draw(self) -> None:
        """Show :attr:`result` (or the error, the plots keeping the last valid setting) on the event loop."""
        with hold():
            if self.result is None:
                self._alert.param.update(object=f"**Not a valid setting:** {md(self._error)}. The plots show the "
                                         "last valid setting.", visible=bool(self._error))
                self._sentence.object = ""
                return
            self._alert.param.update(object="", visible=False)
            self._sentence.object = self.result.sentence()
            self._plots.update(gallery_frame(self.result))
        push(*self._plots.panes)

    def _on_settings(self, *events) -> None:
        self._show_family_widgets()
        self.refresh()

    def url_bindings(self) -> list:
        """Every setting of the page kept in the URL."""
        return [(self.model, {k: k for k in self.model._SETTINGS})]

    def sync_url(self) -> bool:
        """Keep the settings in the page URL (when served). Returns True if synced."""
        return sync_with_url(*self.url_bindings())
