"""The Neumann-convergence page: how fast the scaled Neumann series (NSA) converges, and when it beats
the exact solution.

seed003 §1.5-1.7 and §3 items 3-5. For the test images of a :class:`~explorer.ui.state.fa_model.FAModel`:

* the spectral radius :math:`\\rho(I - A/s)` of every image, one histogram per mask type (random
  pixels, a quarter, a half, a random square): contiguous holes leave directions unobserved, so
  :math:`\\lambda_{\\min}(A) \\to 1` and :math:`\\rho \\to 1 - 1/s` (slower);
* the decay :math:`[\\rho]^l` against l on a log scale: the mean of :math:`\\rho^l`, :math:`(\\bar\\rho)^l`
  and the worst case over every mask :math:`(1 - 1/s)^l`, with the largest a-priori bound and relative
  residual of the visited l;
* the error on the missing pixels against l (NSA, and the oracle for mixtures) with the levels of the
  exact solution, SCA, FCA and mean imputation, and the **window where NSA beats the exact solution**
  shaded (the page says so when there is none).

l is stepped / played with :class:`~explorer.ui.components.player.StepPlayer` or dragged. Every plot is one
``hv.DynamicMap`` on an ``hv.streams.Pipe`` whose element structure never changes.
"""

from __future__ import annotations

import holoviews as hv
import numpy as np
import pandas as pd
import panel as pn

from explorer.ui.state.fa_model import MASK_TYPES, METHOD_LABELS, FAModel
from explorer.ui.components.flow import flow
from explorer.ui.components.fa_page import FAPage, mask_widgets, model_widgets

__all__ = ["NeumannView", "decay_overlay", "error_overlay", "rho_overlay"]

MASK_COLORS = {"random_pixels": "#2f6fb3", "quarter": "#e4572e", "half": "#76b041", "square": "#9b59b6"}
REF_COLORS = {"exact": "#222222", "sca": "#76b041", "fca": "#f0a202", "mean": "#888888"}
URL = ("dataset", "classes", "kind", "n_factors", "n_components", "mask", "rate", "quarter", "side", "size",
       "mask_seed", "n_terms", "max_terms")

EXPLANATION = """
### What am I looking at?
The exact encoding of an image with missing pixels solves A μ = u with A = I + WᵀMΨ⁻¹MW, a q × q system
that differs for every mask. The **scaled Neumann series** replaces the solve by l updates
y ← (I − A/s) y + u/s, with one scale s = ρ(I + WᵀΨ⁻¹W) + ε for every mask (ρ(A) ≤ s by eigenvalue
interlacing), so ρ(I − A/s) = 1 − λ<sub>min</sub>(A)/s < 1 and the series always converges, at the rate
[ρ]<sup>l</sup>.

* **Left**: ρ(I − A/s) of every test image under each mask type. Blocks of missing pixels (quarters,
  halves) remove whole directions, λ<sub>min</sub>(A) approaches 1, and ρ approaches 1 − 1/s: slower.
* **Middle**: the decay of [ρ]<sup>l</sup> (mean over the images, and of the mean ρ), the worst case
  (1 − 1/s)<sup>l</sup> over every possible mask, and the largest a-priori error bound and relative residual
  of the encodings at the l visited so far.
* **Below**: the mean squared error on the missing pixels against l. Shaded: the l where the truncated
  series is *better* than the exact solution (early stopping shrinks the poorly determined directions
  toward the prior, a regulariser the misspecified model benefits from).
"""


# ----------------------------------------------------------------------------- plot callbacks
def rho_overlay(data: dict) -> hv.Overlay:
    """One step histogram of rho per mask type (always four layers)."""
    edges = data["edges"]
    layers = []
    for kind in MASK_TYPES:
        counts = data["counts"][kind]
        layers.append(hv.Histogram((edges, counts), kdims=["rho"], vdims=["images"], label=kind.replace("_", " "))
                      .opts(fill_color=MASK_COLORS[kind], fill_alpha=0.45, line_color=MASK_COLORS[kind]))
    return hv.Overlay(layers)


def decay_overlay(data: dict) -> hv.Overlay:
    """Decay curves on a log scale: mean rho^l, (mean rho)^l, worst case, max bound / residual, current l."""
    ls = data["l"]
    curves = [
        hv.Curve((ls, data["mean_rho_l"]), "l", "value", label="mean of ρ^l").opts(color="#2f6fb3", line_width=2),
        hv.Curve((ls, data["rho_mean_l"]), "l", "value", label="(mean ρ)^l").opts(color="#2f6fb3", line_dash="dashed"),
        hv.Curve((ls, data["worst"]), "l", "value", label="(1 − 1/s)^l, any mask").opts(color="#888888",
                                                                                       line_dash="dotted"),
        hv.Curve((data["trace_l"], data["bound"]), "l", "value", label="max bound ‖y − y*‖").opts(color="#e4572e"),
        hv.Curve((data["trace_l"], data["residual"]), "l", "value", label="max relative residual").opts(
            color="#9b59b6"),
    ]
    return hv.Overlay([*curves, hv.VLine(data["current"]).opts(color="#444444", line_width=1)])


def error_overlay(data: dict) -> hv.Overlay:
    """Error against l: shaded NSA < exact windows, NSA (and oracle) curves, reference levels, current l."""
    spans = hv.VSpans(data["windows"], kdims=["l", "l1"]).opts(color="#76b041", alpha=0.2)
    ls = data["trace_l"]
    x = [0, data["l_max"]]
    refs = [hv.Curve((x, [v, v]), "l", "MSE", label=f"{METHOD_LABELS[k]}").opts(color=REF_COLORS[k], line_dash="dashed",
                                                                               line_width=1.5)
            for k, v in data["levels"].items()]
    nsa = hv.Curve((ls, data["nsa"]), "l", "MSE", label="NSA(l)").opts(color="#e4572e", line_width=2.5)
    # the oracle exists for mixtures only: for K = 1 its (empty) curve stays in the overlay, so that the DynamicMap
    # keeps the same renderers, but is invisible, and HoloViews leaves renderers that are all invisible out of the
    # legend (no "NSA-M oracle" entry with nothing drawn)
    oracle = hv.Curve((data["oracle_l"], data["oracle"]), "l", "MSE", label="NSA-M oracle (min over components)").opts(
        color="#e4572e", line_dash="dotted", line_width=1.5, visible=len(data["oracle"]) > 0)
    return hv.Overlay([spans, *refs, nsa, oracle, hv.VLine(data["current"]).opts(color="#444444", line_width=1)])


def _empty_error() -> dict:
    return {"windows": pd.DataFrame({"l": [], "l1": []}), "trace_l": [0], "nsa": [0.0], "oracle_l": [], "oracle": [],
            "levels": {k: 0.0 for k in REF_COLORS}, "l_max": 1, "current": 0}


def _empty_decay() -> dict:
    one = np.ones(2)
    return {"l": np.arange(2), "mean_rho_l": one, "rho_mean_l": one, "worst": one, "trace_l": [0], "bound": [1.0],
            "residual": [1.0], "current": 0}


def _empty_rho() -> dict:
    return {"edges": np.linspace(0, 1, 2), "counts": {k: np.zeros(1) for k in MASK_TYPES}}


# ----------------------------------------------------------------------------- the page
class NeumannView(FAPage):
    """Spectral radius per mask type, [rho]^l decay and the error-against-l curve of the NSA."""

    _URL = URL

    def _build(self):
        m = self.model
        self.pipes = {"rho": hv.streams.Pipe(data=_empty_rho()), "decay": hv.streams.Pipe(data=_empty_decay()),
                      "error": hv.streams.Pipe(data=_empty_error())}
        common = {"height": 330, "responsive": True, "show_grid": True, "toolbar": "above",
                  "legend_opts": {"label_text_font_size": "8pt"}}
        # framewise is a norm option that HoloViews reads on the *elements* (an Overlay's own framewise is ignored
        # when the axis ranges are updated): set on the overlay only, the ranges stayed those of the first frame
        framewise = {"Curve": {"framewise": True}, "Histogram": {"framewise": True}}
        rho = hv.DynamicMap(rho_overlay, streams=[self.pipes["rho"]]).opts(
            {**framewise, "Overlay": dict(title="ρ(I − A/s) per test image", legend_position="top_left", **common)},
            backend="bokeh")
        # the legend sits outside, below the frame: inside it covered the steep residual curve (bottom left)
        # or the slowly decaying bound and worst case (top right); right of the frame it squeezed the frame
        # to ~280 px and the toolbar onto the title
        decay = hv.DynamicMap(decay_overlay, streams=[self.pipes["decay"]]).opts(
            {"Curve": {"logy": True, "framewise": True},
             "Overlay": dict(title="Convergence: [ρ]^l on a log scale", logy=True, ylabel="factor / bound",
                             legend_position="bottom", legend_cols=2, **(common | {"height": 390}))},
            backend="bokeh")
        error = hv.DynamicMap(error_overlay, streams=[self.pipes["error"]]).opts(
            {**framewise, "Overlay": dict(title="Error on the missing pixels against l", ylabel="MSE (missing pixels)",
                                          legend_position="right", **common)}, backend="bokeh")
        self._window = pn.pane.Alert("", alert_type="success", sizing_mode="stretch_width", margin=(0, 10))
        self.sidebar = pn.Column(
            *self._l_widgets(),  # Step / Play / Reset first: visible without scrolling
            "### Mask of the error curve", mask_widgets(m, masks=MASK_TYPES),
            "### Model", *model_widgets(m),
            sizing_mode="stretch_width")
        plots = [pn.pane.HoloViews(p, sizing_mode="stretch_width", linked_axes=False) for p in (rho, decay, error)]
        self.main = pn.Column(self._alert, self._info, self._window,
                              flow(*plots[:2]), plots[2],
                              pn.pane.Markdown(EXPLANATION, sizing_mode="stretch_width"), sizing_mode="stretch_width")
        self._rho_key = None

    def _draw(self):
        m = self.model
        with m.lock, pn.io.hold():
            if self._show_error():
                self._info.object = ""
                self._window.visible = False
                return
            key = (m.run_id, m.fit_info, m.n_eval)
            if key != self._rho_key:  # rho per mask type depends on the fit and the mask parameters only
                self._rho_key = key
                rho = m.rho_by_mask()
                lo = min(float(v.min()) for v in rho.values())
                hi = max(float(v.max()) for v in rho.values())
                edges = np.linspace(lo - 1e-3, min(1.0, hi + 1e-3), 31)
                self.pipes["rho"].send({"edges": edges, "counts": {k: np.histogram(v, edges)[0] for k, v in rho.items()}})
            trace = m.trace
            tl = np.array([t["n_terms"] for t in trace])
            self.pipes["decay"].send(m.decay() | {"trace_l": tl, "bound": [t["bound"] for t in trace],
                                                  "residual": [max(t["residual"], 1e-300) for t in trace],
                                                  "current": m.iteration})
            windows = m.nsa_window()
            errs = m.errors
            oracle = np.array([t["oracle"] for t in trace])
            has_oracle = m.is_mixture and np.isfinite(oracle).any()
            self.pipes["error"].send({
                "windows": pd.DataFrame({"l": [a - 0.5 for a, _ in windows], "l1": [b + 0.5 for _, b in windows]}),
                "trace_l": tl, "nsa": [t["nsa"] for t in trace], "oracle_l": tl if has_oracle else [],
                "oracle": oracle if has_oracle else [], "levels": {k: errs[k] for k in REF_COLORS},
                "l_max": max(m.max_terms, int(tl.max(initial=0))), "current": m.iteration})
            visited = int(tl.max(initial=0))
            if windows:
                spans = ", ".join(f"{a}–{b}" if b > a else f"{a}" for a, b in windows)
                best = min(trace, key=lambda t: t["nsa"])
                self._window.object = (f"**NSA beats the exact solution** (MSE {errs['exact']:.4f}) for l in {spans} "
                                       f"(visited l ≤ {visited}); best l = {best['n_terms']} with MSE {best['nsa']:.4f}.")
                self._window.alert_type = "success"
            else:
                self._window.object = (f"**NSA never beats the exact solution** (MSE {errs['exact']:.4f}) for the l "
                                       f"visited so far (l ≤ {visited}) on this mask.")
                self._window.alert_type = "warning"
            self._window.visible = True
            rho = m.rho
            self._info.object = (f"**{m.fit_info}** · s = {', '.join(f'{v:.1f}' for v in m.scale)} · mask "
                                 f"{m.mask.replace('_', ' ')}: ρ from {rho.min():.4f} to {rho.max():.4f} (mean "
                                 f"{rho.mean():.4f}) · NSA MSE {errs['nsa']:.4f} at l = {m.iteration}")


def create_model(**settings) -> FAModel:
    """The default model of the page: random quarters on the 8x8 digits, PPCA with q = 10, l up to 200."""
    return FAModel(**({"mask": "quarter", "max_terms": 200} | settings))
