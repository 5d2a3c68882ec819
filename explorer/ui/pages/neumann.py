"""The Neumann-convergence page: how fast the scaled Neumann series (NSA) converges, and when it beats
the exact solution.

antypas2023 §1.5-1.7 and §3 items 3-5. For the test images of a :class:`~explorer.ui.state.fa_model.FAModel`:

* the spectral radius :math:`\\rho(I - A/s)` of every image, one histogram per mask type (random
  pixels, a quarter, a half, a random square): contiguous holes leave directions unobserved, so
  :math:`\\lambda_{\\min}(A) \\to 1` and :math:`\\rho \\to 1 - 1/s` (slower);
* the decay :math:`[\\rho]^l` against l on a log scale: the mean of :math:`\\rho^l`, :math:`(\\bar\\rho)^l`
  and the worst case over every mask :math:`(1 - 1/s)^l`, with the largest a-priori bound and relative
  residual of the visited l;
* the error on the missing pixels against l (NSA, and the oracle for mixtures) with the levels of the
  exact solution, SCA, FCA and mean imputation, and the **window where NSA beats the exact solution**
  shaded (the page says so when there is none).

l is stepped / played with :class:`~explorer.ui.components.player.StepPlayer` (on the session's worker
thread) or dragged. The three plots are plain Bokeh figures made once per session (issue 19): the
histograms are columns of one source, the decay curves another, and the visited l (NSA and oracle
errors, bound, residual) one source shared by the decay and error plots that a frame extends with
``stream``; the current l is a ``Span`` whose location moves, the NSA < exact windows rows of one
``vstrip`` source. The frame data come from pure functions (:func:`rho_histograms`,
:func:`trace_columns`, :func:`decay_frame`, :func:`error_frame`, :func:`padded_range`) that the tests
call; a frame only assigns or streams source data and sets scalars (a range's ends, a span's location).
"""

from __future__ import annotations

import numpy as np
import panel as pn
from bokeh.models import ColumnDataSource, Legend, LegendItem, Range1d, Span
from bokeh.plotting import figure

from explorer.ui.components.fa_page import FAPage, mask_widgets, model_widgets
from explorer.ui.components.flow import flow
from explorer.ui.state.fa_model import MASK_TYPES, METHOD_LABELS, FAModel
from explorer.ui.session import hold, push
from explorer.ui.plots.figures import figure_pane

__all__ = ["NeumannView", "decay_frame", "error_frame", "padded_range", "rho_histograms", "trace_columns"]

MASK_COLORS = {"random_pixels": "#2f6fb3", "quarter": "#e4572e", "half": "#76b041", "square": "#9b59b6"}
REF_COLORS = {"exact": "#222222", "sca": "#76b041", "fca": "#f0a202", "mean": "#888888"}
URL = ("dataset", "classes", "kind", "n_factors", "n_components", "mask", "rate", "quarter", "side", "size",
       "mask_seed", "n_terms", "max_terms")
#: (column of the decay source, legend label, line style) of the decay plot's factors against l.
DECAY_CURVES = (("mean_rho_l", "mean of ρ^l", {"color": "#2f6fb3", "line_width": 2}),
                ("rho_mean_l", "(mean ρ)^l", {"color": "#2f6fb3", "line_width": 2, "line_dash": "dashed"}),
                ("worst", "(1 − 1/s)^l, any mask", {"color": "#888888", "line_width": 2, "line_dash": "dotted"}))
#: (column of the trace source, legend label, line style) of the decay plot's curves of the visited l.
TRACE_CURVES = (("bound", "max bound ‖y − y*‖", {"color": "#e4572e", "line_width": 2}),
                ("residual", "max relative residual", {"color": "#9b59b6", "line_width": 2}))
ORACLE_LABEL = "NSA-M oracle (min over components)"
N_BINS = 30
_TOOLS = "pan,wheel_zoom,box_zoom,save,reset"
_TRACE_COLUMNS = ("l", "nsa", "oracle", "bound", "residual")

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


# ----------------------------------------------------------------------------- frames (pure)
def padded_range(values, padding: float = 0.1, log: bool = False) -> tuple[float, float] | None:
    """``(low, high)`` covering the finite ``values`` (positive ones on a log axis), widened by ``padding``
    of their span on each side (of their span in decades on a log axis); None when there is none."""
    v = np.asarray(values, dtype=float).ravel()
    v = v[np.isfinite(v) & (v > 0)] if log else v[np.isfinite(v)]
    if v.size == 0:
        return None
    lo, hi = (float(np.log10(v.min())), float(np.log10(v.max()))) if log else (float(v.min()), float(v.max()))
    if hi > lo:
        span = hi - lo
    else:  # one value: a decade around it on a log axis, +-5 % of it (or of 1) on a linear one
        span = 1.0 / padding if log else max(abs(hi), 1.0) / padding * 0.05
    lo, hi = lo - padding * span, hi + padding * span
    return (float(10.0**lo), float(10.0**hi)) if log else (float(lo), float(hi))


def rho_histograms(rho_by_mask: dict, n_bins: int = N_BINS) -> dict:
    """Counts of rho per mask type on shared bins: ``edges`` (n_bins + 1,), ``counts`` ``{mask: (n_bins,)}``
    (every image counted once per mask type; the bins end at 1 at most)."""
    lo = min(float(v.min()) for v in rho_by_mask.values())
    hi = max(float(v.max()) for v in rho_by_mask.values())
    edges = np.linspace(lo - 1e-3, min(1.0, hi + 1e-3), n_bins + 1)
    return {"edges": edges, "counts": {k: np.histogram(v, edges)[0] for k, v in rho_by_mask.items()}}


def trace_columns(trace: list) -> dict:
    """The visited l as columns ``l``, ``nsa``, ``oracle`` (NaN without a mixture), ``bound`` and ``residual``
    (floored at 1e-300: it is drawn on a log axis)."""
    return {"l": np.array([t["n_terms"] for t in trace], dtype=int),
            "nsa": np.array([t["nsa"] for t in trace], dtype=float),
            "oracle": np.array([t["oracle"] for t in trace], dtype=float),
            "bound": np.array([t["bound"] for t in trace], dtype=float),
            "residual": np.maximum(np.array([t["residual"] for t in trace], dtype=float), 1e-300)}


def decay_frame(decay: dict, trace: dict, current: int) -> dict:
    """The decay plot: the factors of :meth:`FAModel.decay` against ``l``, the bound and residual of the visited
    l (``trace_l``; ``trace`` from :func:`trace_columns`), the current l and the axes' limits (``ylim`` on a log
    scale)."""
    l_max = int(max(decay["l"].max(initial=0), trace["l"].max(initial=0), 1))
    curves = [decay["mean_rho_l"], decay["rho_mean_l"], decay["worst"], trace["bound"], trace["residual"]]
    return {"l": decay["l"], "mean_rho_l": decay["mean_rho_l"], "rho_mean_l": decay["rho_mean_l"],
            "worst": decay["worst"], "trace_l": trace["l"], "bound": trace["bound"], "residual": trace["residual"],
            "current": int(current), "xlim": (0.0, float(l_max)),
            "ylim": padded_range(np.concatenate(curves), log=True) or (1e-3, 10.0)}


def error_frame(trace: dict, windows: list, levels: dict, has_oracle: bool, max_terms: int, current: int) -> dict:
    """The error plot: NSA's (and the oracle's) error against the visited l, the levels of the direct methods
    (``{method: MSE}``), the windows ``(l0, l1)`` where NSA beats exact as strips half a step wider on each side,
    the current l and the axes' limits (x from 0 to the larger of ``max_terms`` and the visited l)."""
    oracle = trace["oracle"] if has_oracle else np.empty(0)
    l_max = int(max(max_terms, trace["l"].max(initial=0), 1))
    values = np.concatenate([trace["nsa"], oracle, np.fromiter(levels.values(), dtype=float)])
    return {"windows": {"l0": np.array([a - 0.5 for a, _ in windows], dtype=float),
                        "l1": np.array([b + 0.5 for _, b in windows], dtype=float)},
            "trace_l": trace["l"], "nsa": trace["nsa"],
            "oracle_l": trace["l"] if has_oracle else np.empty(0, dtype=int), "oracle": oracle,
            "levels": dict(levels), "l_max": l_max, "current": int(current),
            "xlim": (0.0, float(l_max)), "ylim": padded_range(values) or (0.0, 1.0)}


# ----------------------------------------------------------------------------- figures (built once)
def _figure(title: str, height: int, x_label: str, y_label: str, **kw) -> figure:
    """A figure of the page (the width follows the page; the ranges are set by the frames)."""
    fig = figure(title=title, height=height, sizing_mode="stretch_width", tools=_TOOLS, toolbar_location="above",
                 active_scroll="wheel_zoom", x_axis_label=x_label, y_axis_label=y_label, x_range=Range1d(0.0, 1.0),
                 min_border_left=40, **kw)
    fig.title.text_font_size = "12pt"
    return fig


def _legend(items, **kw) -> Legend:
    """A legend of ``(label, renderer)`` items; a click mutes an item's renderer."""
    return Legend(items=[LegendItem(label=label, renderers=[r]) for label, r in items], label_text_font_size="8pt",
                  click_policy="mute", **kw)


def _set_range(rng: Range1d, limits) -> None:
    """Move an axis to new limits (Bokeh's Reset tool returns there too); the same limits leave a zoom alone."""
    if limits is None or not np.all(np.isfinite(limits)):
        return
    lo, hi = map(float, limits)
    if (rng.reset_start, rng.reset_end) != (lo, hi):
        rng.update(start=lo, end=hi, reset_start=lo, reset_end=hi)


# ----------------------------------------------------------------------------- the page
class NeumannView(FAPage):
    """Spectral radius per mask type, [rho]^l decay and the error-against-l curve of the NSA.

    Attributes
    ----------
    frames : dict
        The last frame of each plot, ``{"rho": ..., "decay": ..., "error": ...}`` (see :func:`rho_histograms`,
        :func:`decay_frame`, :func:`error_frame`); the figures show them.
    figures : dict
        The Bokeh figures, ``{"rho": ..., "decay": ..., "error": ...}``.
    """

    _URL = URL

    def _build(self):
        m = self.model
        self.frames: dict = {}
        self._keys = {"rho": None, "decay": None, "levels": None, "windows": None}
        self._trace_run, self._trace_rows = None, 0  # the run whose visited l the trace source has, and how many
        self._build_figures()
        self._window = pn.pane.Alert("", alert_type="success", sizing_mode="stretch_width", margin=(0, 10))
        self.sidebar = pn.Column(
            *self._l_widgets(),  # Step / Play / Reset first: visible without scrolling
            "### Mask of the error curve", mask_widgets(m, masks=MASK_TYPES),
            "### Model", *model_widgets(m),
            sizing_mode="stretch_width")
        self._panes = [figure_pane(self.figures[k], sizing_mode="stretch_width") for k in ("rho", "decay", "error")]
        self.main = pn.Column(self._alert, self._info, self._window,
                              flow(*self._panes[:2]), self._panes[2],
                              pn.pane.Markdown(EXPLANATION, sizing_mode="stretch_width"), sizing_mode="stretch_width")

    def _build_figures(self) -> None:
        """The three figures with every renderer they will ever have; frames only change their data."""
        empty = np.empty(0)
        # --- rho per mask type: one quad renderer per mask type (so a legend click mutes one), one source
        self.rho_source = ColumnDataSource({"left": empty, "right": empty} | {k: empty for k in MASK_TYPES})
        rho = _figure("ρ(I − A/s) per test image", 330, "rho", "images", y_range=Range1d(0.0, 1.0))
        bars = [rho.quad(left="left", right="right", bottom=0, top=k, source=self.rho_source, fill_alpha=0.45,
                         fill_color=c, line_color=c) for k, c in MASK_COLORS.items()]
        rho.add_layout(_legend([(k.replace("_", " "), r) for k, r in zip(MASK_TYPES, bars)], location="top_left"))
        # --- the visited l, shared by the decay and error plots (streamed as l grows)
        self.trace_source = ColumnDataSource({k: np.empty(0, dtype=int if k == "l" else float) for k in _TRACE_COLUMNS})
        # --- decay: the factors against l (one source), the bound and residual of the visited l, the current l
        self.decay_source = ColumnDataSource({"l": np.empty(0, dtype=int)} | {k: empty for k, _, _ in DECAY_CURVES})
        # the legend sits outside, below the frame: inside it covered the steep residual curve (bottom left)
        # or the slowly decaying bound and worst case (top right); right of the frame it squeezed the frame
        # to ~280 px and the toolbar onto the title
        decay = _figure("Convergence: [ρ]^l on a log scale", 390, "l", "factor / bound", y_axis_type="log",
                        y_range=Range1d(1e-3, 10.0))
        lines = [(label, decay.line("l", k, source=self.decay_source, **style)) for k, label, style in DECAY_CURVES]
        lines += [(label, decay.line("l", k, source=self.trace_source, **style)) for k, label, style in TRACE_CURVES]
        decay.add_layout(_legend(lines, ncols=2, location="center"), "below")
        self.decay_span = Span(location=0, dimension="height", line_color="#444444", line_width=1)
        decay.add_layout(self.decay_span)
        # --- error against l: NSA < exact windows, reference levels, NSA, the oracle (mixtures only), current l
        self.window_source = ColumnDataSource({"l0": empty, "l1": empty})
        self.level_source = ColumnDataSource({"l": np.empty(0)} | {k: empty for k in REF_COLORS})
        error = _figure("Error on the missing pixels against l", 330, "l", "MSE (missing pixels)",
                        y_range=Range1d(0.0, 1.0))
        error.vstrip(x0="l0", x1="l1", source=self.window_source, color="#76b041", alpha=0.2)
        refs = [(METHOD_LABELS[k], error.line("l", k, source=self.level_source, color=c, line_dash="dashed",
                                              line_width=1.5)) for k, c in REF_COLORS.items()]
        nsa = error.line("l", "nsa", source=self.trace_source, color="#e4572e", line_width=2.5)
        # the oracle exists for mixtures only: for K = 1 its renderer and legend entry are hidden
        self.oracle_line = error.line("l", "oracle", source=self.trace_source, color="#e4572e", line_dash="dotted",
                                      line_width=1.5, visible=False)
        error.add_layout(_legend([*refs, ("NSA(l)", nsa), (ORACLE_LABEL, self.oracle_line)]), "right")
        self.oracle_item = error.legend[0].items[-1]
        self.oracle_item.visible = False
        self.error_span = Span(location=0, dimension="height", line_color="#444444", line_width=1)
        error.add_layout(self.error_span)
        self.figures = {"rho": rho, "decay": decay, "error": error}

    # ------------------------------------------------------------------ drawing
    def _draw(self):
        with hold():
            reading = self._read_model()
            if reading is not None:
                self._draw_reading(reading)
        push(*self._panes)

    def _read_model(self) -> dict | None:
        """What a frame shows, read from one consistent state of the model (None: nothing to draw, the error is
        shown). The model's lock is held only while reading, not while the figures are changed."""
        m = self.model
        with m.lock:
            if self._show_error():
                self._info.object = ""
                self._window.visible = False
                return None
            rho_by_mask = m.rho_by_mask()  # the model's cached dict: a new one for a new fit or mask parameters
            new_rho = rho_by_mask is not self._keys["rho"]
            decay_key = (m.run_id, m.max_terms)  # the factors: the problem and the l plotted
            trace = m.trace
            errors = m.errors
            rho = m.rho
            return {
                "run_id": m.run_id, "current": m.iteration, "max_terms": m.max_terms, "is_mixture": m.is_mixture,
                "rho_key": rho_by_mask, "rho": rho_histograms(rho_by_mask) if new_rho else None,
                "decay_key": decay_key, "decay": m.decay() if decay_key != self._keys["decay"] else None,
                "trace": trace_columns(trace), "best": min(trace, key=lambda t: t["nsa"]),
                "windows": m.nsa_window(), "errors": errors,
                "info": (f"**{m.fit_info}** · s = {', '.join(f'{v:.1f}' for v in m.scale)} · mask "
                         f"{m.mask.replace('_', ' ')}: ρ from {rho.min():.4f} to {rho.max():.4f} (mean "
                         f"{rho.mean():.4f}) · NSA MSE {errors['nsa']:.4f} at l = {m.iteration}")}

    def _draw_reading(self, r: dict) -> None:
        """Change the figures' data and scalars, and the read-outs, to a :meth:`_read_model` reading."""
        if r["rho"] is not None:
            self._keys["rho"] = r["rho_key"]
            self._draw_rho(r["rho"])
        columns, errors, windows = r["trace"], r["errors"], r["windows"]
        self._draw_trace(columns, r["run_id"])
        if r["decay"] is not None:
            self._keys["decay"] = r["decay_key"]
            decay = r["decay"]
        else:  # the factors of the last frame
            decay = {k: self.frames["decay"][k] for k in ("l", "mean_rho_l", "rho_mean_l", "worst")}
        self._draw_decay(decay_frame(decay, columns, r["current"]), new_factors=r["decay"] is not None)
        has_oracle = r["is_mixture"] and bool(np.isfinite(columns["oracle"]).any())
        self._draw_error(error_frame(columns, windows, {k: errors[k] for k in REF_COLORS}, has_oracle,
                                     r["max_terms"], r["current"]))
        visited = int(columns["l"].max(initial=0))
        if windows:
            spans = ", ".join(f"{a}–{b}" if b > a else f"{a}" for a, b in windows)
            best = r["best"]
            self._window.object = (f"**NSA beats the exact solution** (MSE {errors['exact']:.4f}) for l in {spans} "
                                   f"(visited l ≤ {visited}); best l = {best['n_terms']} with MSE {best['nsa']:.4f}.")
            self._window.alert_type = "success"
        else:
            self._window.object = (f"**NSA never beats the exact solution** (MSE {errors['exact']:.4f}) for the l "
                                   f"visited so far (l ≤ {visited}) on this mask.")
            self._window.alert_type = "warning"
        self._window.visible = True
        self._info.object = r["info"]

    def _draw_rho(self, frame: dict) -> None:
        """The histograms of a :func:`rho_histograms` frame (a new fit or new mask parameters)."""
        self.frames["rho"] = frame
        edges = frame["edges"]
        self.rho_source.data = {"left": edges[:-1], "right": edges[1:]} | {
            k: np.asarray(frame["counts"][k], dtype=float) for k in MASK_TYPES}
        fig = self.figures["rho"]
        _set_range(fig.x_range, padded_range(edges))
        _set_range(fig.y_range, (0.0, 1.1 * max(1, max(int(c.max()) for c in frame["counts"].values()))))

    def _draw_trace(self, columns: dict, run_id: int) -> None:
        """Stream the visited l the trace source does not have yet (all of them again for a new run: the model
        visits l in order from 0, and forgets them only when its run changes)."""
        n = len(columns["l"])
        if run_id == self._trace_run and n >= self._trace_rows:
            if n > self._trace_rows:
                self.trace_source.stream({k: v[self._trace_rows:] for k, v in columns.items()})
        else:
            self.trace_source.data = dict(columns)
        self._trace_run, self._trace_rows = run_id, n

    def _draw_decay(self, frame: dict, new_factors: bool) -> None:
        """A :func:`decay_frame`: the factors only when they are new, the axes when their limits change, the
        current l (the visited l are the trace source's, see :meth:`_draw_trace`)."""
        self.frames["decay"] = frame
        if new_factors:  # a new problem or max_terms
            self.decay_source.data = {k: frame[k] for k in ("l", "mean_rho_l", "rho_mean_l", "worst")}
        fig = self.figures["decay"]
        _set_range(fig.x_range, frame["xlim"])
        _set_range(fig.y_range, frame["ylim"])
        self.decay_span.location = frame["current"]

    def _draw_error(self, frame: dict) -> None:
        """An :func:`error_frame`: windows and levels only when they change, the oracle shown for mixtures, the
        axes when their limits change, the current l."""
        self.frames["error"] = frame
        windows = (tuple(frame["windows"]["l0"]), tuple(frame["windows"]["l1"]))
        if windows != self._keys["windows"]:
            self._keys["windows"] = windows
            self.window_source.data = dict(frame["windows"])
        levels = (frame["l_max"], *frame["levels"].values())
        if levels != self._keys["levels"]:
            self._keys["levels"] = levels
            self.level_source.data = {"l": np.array([0.0, frame["l_max"]])} | {
                k: np.full(2, v, dtype=float) for k, v in frame["levels"].items()}
        shown = len(frame["oracle"]) > 0
        self.oracle_line.visible = self.oracle_item.visible = shown
        fig = self.figures["error"]
        _set_range(fig.x_range, frame["xlim"])
        _set_range(fig.y_range, frame["ylim"])
        self.error_span.location = frame["current"]


def create_model(**settings) -> FAModel:
    """The default model of the page: random quarters on the 8x8 digits, PPCA with q = 10, l up to 200."""
    return FAModel(**({"mask": "quarter", "max_terms": 200} | settings))
