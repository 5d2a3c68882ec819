r"""The "Mechanism gallery" page: Marlin's NMAR (and one MAR) mechanisms on a synthetic ratings matrix.

Digest seed004 section 7, item 2. A :class:`~explorer.ui.state.mechanism_gallery_model.MechanismGalleryModel`
holds the family (CPT-v, the linear value effect, Logit-vd, the Table 3.1 MAR table), its parameters and the
synthetic world's size (sidebar, kept in the URL). Four plots, each an ``hv.DynamicMap`` on an
``hv.streams.Pipe`` (fixed structure, patched on every change), built by the pure :func:`gallery_frame`:

* the per-value response probabilities P(r = 1 | x = v), averaged over items (bars);
* the heat map of P(r = 1 | v, item d) over values x items (flat columns for CPT-v: no item effect);
* a sampled response mask on the ratings matrix (users x items: the value where observed, grey where not);
* the observed against the true marginal of the values (Fig. 5.2 style), with the symmetrised KL (eq. 5.1.1).
"""

from __future__ import annotations

import holoviews as hv
import holoviews.plotting.bokeh  # noqa: F401  (registers the Bokeh plotting options used in .opts)
import numpy as np
import panel as pn
import param
from panel.viewable import Viewer

from explorer.core._validation import BadInputError
from explorer.ui.state.mechanism_gallery_model import FAMILIES, GalleryResult, MechanismGalleryModel
from explorer.ui.components.flow import flow
from explorer.ui.components.notebook import notebook_layout
from explorer.ui.page import sync_with_url
from explorer.ui.text import md
from explorer.ui.weak import weak_callback

__all__ = ["MechanismGalleryView", "create_model", "gallery_frame"]

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


def _bars(data: dict) -> hv.Bars:
    return hv.Bars(data["bars"], hv.Dimension("value", label="value v"),
                   hv.Dimension("p", label="P(r = 1 | x = v)", range=(0, 1))).opts(
        color=COLORS["response"], title="Response probability per value (mean over items)", framewise=True,
        ylim=(0, 1))


def _heat(data: dict) -> hv.HeatMap:
    return hv.HeatMap(data["heat"], [hv.Dimension("item", label="item d"), hv.Dimension("value", label="value v")],
                      hv.Dimension("p", label="P(r = 1 | v, d)", range=(0, 1))).opts(
        cmap="viridis", colorbar=True, clim=(0, 1), title="P(r = 1 | value, item)", framewise=True,
        xaxis="bottom", xrotation=90 if data["n_items"] > 20 else 0, fontsize={"xticks": "7pt"}, tools=["hover"])


def _mask(data: dict) -> hv.Image:
    values = data["values"]
    lo = 0.0 if values == ["0", "1"] else 1.0
    n = max(len(values), 2)
    return hv.Image(data["mask"], bounds=data["mask_bounds"], kdims=["item", "user"], vdims=["value"]).opts(
        cmap=VALUE_COLORS[:n] if n <= len(VALUE_COLORS) else "viridis", clim=(lo - 0.5, lo + n - 0.5),
        color_levels=n, colorbar=True, clipping_colors={"NaN": "#e6e6e6"},
        title=f"Sampled mask: observed values, grey = missing ({data['n_users']} users)", framewise=True,
        invert_yaxis=False)


def _marginals(data: dict) -> hv.Bars:
    return hv.Bars(data["marginals"], [hv.Dimension("value", label="value v"), "kind"],
                   hv.Dimension("share", label="share of entries")).opts(
        color="kind", cmap={TRUE_KIND: COLORS["true"], OBSERVED_KIND: COLORS["observed"]}, title=data["title"],
        framewise=True, legend_position="bottom", show_legend=True, multi_level=False)


class MechanismGalleryView(Viewer):
    """Family and parameters in the sidebar; response probabilities, heat map, mask and marginals in the main area."""

    model = param.ClassSelector(class_=MechanismGalleryModel, doc="The settings and computations shown on the page")

    def __init__(self, **params):
        if params.get("model") is None:
            params["model"] = MechanismGalleryModel()
        super().__init__(**params)
        self.result: GalleryResult | None = None
        # the first frame: the model's, or (an invalid setting from a link) the family's defaults, so that the plots
        # start with real categories (an empty grouped bar chart breaks Bokeh when data arrive later)
        try:
            first = gallery_frame(self.model.compute())
        except BadInputError:
            first = gallery_frame(MechanismGalleryModel(family=self.model.family).compute())
        self._pipe = hv.streams.Pipe(data=first)
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
        self._structure = self._structure_of(m.family)
        panes = [pn.pane.HoloViews(p, sizing_mode="stretch_width", linked_axes=False, min_height=340,
                                   css_classes=[css])
                 for p, css in zip(self._plots(), ("gallery-bars", "gallery-heat", "gallery-mask", "gallery-marginals"))]
        self._panes = panes
        self._alert = pn.pane.Alert("", alert_type="danger", visible=False, sizing_mode="stretch_width",
                                    css_classes=["gallery-alert"])
        self._sentence = pn.pane.Markdown("", sizing_mode="stretch_width", css_classes=["gallery-sentence"],
                                          margin=(0, 10))
        self.main = pn.Column(
            self._alert, self._sentence, flow(panes[0], panes[1]), flow(panes[2], panes[3]),
            pn.pane.Markdown(EXPLANATION, sizing_mode="stretch_width"), sizing_mode="stretch_width")
        self._layout = notebook_layout(self.sidebar, self.main)

    @staticmethod
    def _structure_of(family: str) -> str:
        """Plots of the same structure are patched through the pipe; the two binary variables of the MAR table
        (2 values, 2 items, other categories) get plots of their own (Bokeh rejects such a patch: Size mismatch)."""
        return "binary" if family == "mar_table" else "ratings"

    def _plots(self) -> list:
        """The four DynamicMaps on ``self._pipe``."""
        common = dict(responsive=True, min_height=330, toolbar="above", backend="bokeh")
        return [hv.DynamicMap(_bars, streams=[self._pipe]).opts(show_grid=True, **common),
                hv.DynamicMap(_heat, streams=[self._pipe]).opts(**common),
                hv.DynamicMap(_mask, streams=[self._pipe]).opts(**common),
                hv.DynamicMap(_marginals, streams=[self._pipe]).opts(show_grid=True, **common)]

    def _show_family_widgets(self, *events):
        for key, group in self._groups.items():
            group.visible = key == self.model.family

    def refresh(self) -> None:
        """Draw the world and mask of the current setting and show them (or the reason why not)."""
        problems = self.model.problems()
        try:
            if problems:
                raise BadInputError("; ".join(problems))
            result = self.model.compute()
        except BadInputError as exc:
            self.result = None
            with pn.io.hold():  # the plots keep the last valid setting (an empty grouped bar chart breaks Bokeh)
                self._alert.param.update(object=f"**Not a valid setting:** {md(exc)}. The plots show the last valid "
                                         "setting.", visible=True)
                self._sentence.object = ""
            return
        self.result = result
        frame = gallery_frame(result)
        with pn.io.hold():
            self._alert.param.update(object="", visible=False)
            self._sentence.object = result.sentence()
            structure = self._structure_of(result.family)
            if structure != self._structure:  # new plots for the other structure (see _structure_of)
                self._structure = structure
                self._pipe = hv.streams.Pipe(data=frame)
                for pane, plot in zip(self._panes, self._plots()):
                    pane.object = plot
            else:
                self._pipe.send(frame)

    def _on_settings(self, *events) -> None:
        self._show_family_widgets()
        self.refresh()

    def url_bindings(self) -> list:
        """Every setting of the page kept in the URL."""
        return [(self.model, {k: k for k in self.model._SETTINGS})]

    def sync_url(self) -> bool:
        """Keep the settings in the page URL (when served). Returns True if synced."""
        return sync_with_url(*self.url_bindings())
