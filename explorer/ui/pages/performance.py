"""The EM performance page: E-step kernels timed live, and the pattern spanning tree that the tree kernel walks.

One :class:`~explorer.ui.state.performance_model.PerformanceModel` per page.

* **Measure** runs :meth:`PerformanceModel.sweep` as one job of the session's compute thread
  (:class:`~explorer.ui.session.SessionWorker`, :func:`~explorer.ui.session.run_then`): its progress (throttled)
  and the partial table are drawn on the session's event loop (progress bar, plots, table), so the page stays
  responsive and no document is changed from a thread. Outside a server (Jupyter, scripts, tests) the sweep runs
  directly. The end of the session cancels the sweep (the session's thread stops by itself).
* The timing plot (seconds per call, log y, one colour per strategy: solid = one component's E-step kernel,
  dashed = a full EM step) and the theoretical-cost plot are Bokeh figures made once per session
  (:class:`~explorer.ui.plots.series_plot.SeriesPlot`: a line and markers per series, hidden with their legend
  entry when not measured).
* The tree plot (:class:`~explorer.ui.plots.tree_graph.TreeGraph`, also made once): nodes are the distinct patterns
  (size = rows, colour = depth or from scratch / updated), edges the MST with their Hamming weight n_d; a tap
  selects the nearest node, whose chain of updates from its root is drawn in red and listed beside the plot.

Frames only replace the figures' source data and ranges, on the session's event loop
(:class:`~explorer.ui.session.Redraw`).
"""

from __future__ import annotations

import math
import threading
import time

import numpy as np
import pandas as pd
import panel as pn
import param
from bokeh.palettes import Viridis256
from panel.viewable import Viewer

from explorer.core.validation import BadInputError
from explorer.ui.components.flow import flow
from explorer.ui.components.notebook import notebook_layout
from explorer.ui.page import sync_with_url
from explorer.ui.plots.series_plot import SeriesPlot
from explorer.ui.plots.tree_graph import TreeGraph
from explorer.ui.session import Redraw, hold, push, run_then, served_doc
from explorer.ui.state.performance_model import (
    EM_STRATEGIES,
    KERNELS,
    MASKS,
    X_AXES,
    PerformanceModel,
    em_strategies,
)
from explorer.ui.text import md
from explorer.ui.weak import weak_callback

__all__ = ["PerformanceView", "SERIES", "timing_frame", "tree_frame", "path_markdown"]

STRATEGY_COLORS = {"precision": "#2f6fb3", "numpy": "#2f6fb3", "compiled": "#17becf", "tree": "#e4572e",
                   "naive": "#76b041"}
#: Every series the timing plot can show: key -> (label, colour, kind).
SERIES = {**{k: (label, STRATEGY_COLORS[k], "kernel") for k, label in KERNELS.items()},
          **{f"em:{k}": (label, STRATEGY_COLORS[k], "em_step") for k, label in EM_STRATEGIES.items()}}
SCRATCH_COLORS = {"from scratch": "#e4572e", "updated": "#2f6fb3"}
_POINT_COLS = ["x", "ms", "series", "patterns", "D", "rate", "rows"]
#: Progress bar at most this often; plots and table (heavier: they compete with the timing) less often.
_PROGRESS_EVERY_S = 0.25
_PLOTS_EVERY_S = 1.0

EXPLANATION = """
### What am I looking at?
One component's E-step needs, for every distinct missingness pattern, the log-density of the observed part and
the conditional mean and covariance of the missing part. Three ways to get them (same outputs to round-off):

* the **precision-side kernel** (the project's default, `explorer.core.gaussians.gaussian.observed_gaussian`): one
  precision P = Σ⁻¹ per component, then per pattern a Cholesky factor of the small m x m block P<sub>mm</sub>
  only: about m³/3 flops per pattern (plus d³ once);
* the **naive** baseline of Delalleau, Courville & Bengio: a Cholesky factor of the observed block Σ<sub>oo</sub>
  from scratch per pattern, n<sub>o</sub>³/3 flops;
* their **minimum-spanning-tree** kernel: link the patterns by an MST of Hamming distances and walk it, deriving
  each pattern's factor from its parent's: remove each newly missing variable (Givens rotations) and append each
  newly observed one (forward substitution), about n<sub>d</sub> n<sub>o</sub>² flops per edge, and update the
  conditional covariance K by the inverse-variance lemma; nodes at depths that are multiples of *refresh every*
  are factored from scratch again (round-off).

**Measure** times each one live on this machine (the best of a few calls, one BLAS thread) while the x-axis
setting grows; when `EMConfig` has a `strategy` field, a full EM step (K = 1) per strategy is timed too
(dashed; *compiled* is the precision side in one numba pass). The right plot gives the leading flop counts of
the same cases: a count is not a time (Python overhead per pattern or edge, memory traffic), which is exactly
what the measurements show. **Below**, the tree of a small case: tap a node to see the updates along its path.
"""


# ----------------------------------------------------------------------------- frames
def _empty_points() -> pd.DataFrame:
    return pd.DataFrame({c: np.empty(0, dtype=object if c == "series" else float) for c in _POINT_COLS})


def timing_frame(table: pd.DataFrame | None, x_label: str, value: str = "seconds") -> dict:
    """What the timing (``value="seconds"``) or cost (``value="flops"``) plot draws: one table per series."""
    frames = {}
    finite = []
    for key, (label, _, kind) in SERIES.items():
        if table is None or not len(table):
            frames[key] = _empty_points()
            continue
        rows = table[(table["series"] == key) & np.isfinite(table[value].astype(float))].sort_values("x")
        if value == "flops" and kind != "kernel":
            rows = rows.iloc[0:0]
        y = rows[value].to_numpy(float) * (1e3 if value == "seconds" else 1.0)
        finite.extend(y[y > 0])
        frames[key] = pd.DataFrame({"x": rows["x"].to_numpy(float), "ms": y, "series": [label] * len(rows),
                                    "patterns": rows["n_patterns"].to_numpy(float),
                                    "D": rows["n_features"].to_numpy(float),
                                    "rate": rows["missing_rate"].to_numpy(float).round(3),
                                    "rows": rows["n_rows"].to_numpy(float)})
    if finite:  # whole decades: the log axis then labels powers of ten only
        lo, hi = math.log10(min(finite)), math.log10(max(finite))
        ylim = (10.0 ** math.floor(lo - 0.05), 10.0 ** math.ceil(hi + 0.05))
    else:
        ylim = (1e-2, 1e2) if value == "seconds" else (1e2, 1e7)
    xs = [] if table is None or not len(table) else list(table["x"].astype(float))
    pad = 0.05 * (max(xs) - min(xs)) if xs and max(xs) > min(xs) else 1.0
    xlim = (min(xs) - pad, max(xs) + pad) if xs else (0.0, 1.0)
    return {"series": frames, "ylim": ylim, "xlim": xlim, "x_label": x_label, "value": value}


def _node_colours(nodes: pd.DataFrame, colour_by: str) -> list[str]:
    if colour_by == "from scratch":
        return [SCRATCH_COLORS[s] for s in nodes["scratch"]]
    top = max(int(nodes["depth"].max()), 1) if len(nodes) else 1
    return [Viridis256[int(round(220 * d / top))] for d in nodes["depth"]]


def tree_frame(model: PerformanceModel) -> dict:
    """What the tree plot draws (see :meth:`TreeGraph.update <explorer.ui.plots.tree_graph.TreeGraph.update>`), from
    the model's case, colours and selected node."""
    case = model.tree_case()
    nodes = case["nodes"].copy()
    nodes["colour"] = _node_colours(nodes, model.colour_by)
    path_edges = pd.DataFrame({"x0": [], "y0": [], "x1": [], "y1": []})
    selected = nodes.iloc[0:0]
    pixels = pd.DataFrame({"x0": [], "y0": [], "x1": [], "y1": []})
    if 0 <= model.node < len(nodes):
        path = model.path()
        chain = path["nodes"]
        xy = nodes.set_index("node")[["x", "y"]]
        path_edges = pd.DataFrame({"x0": xy.loc[chain[:-1], "x"].to_numpy(), "y0": xy.loc[chain[:-1], "y"].to_numpy(),
                                   "x1": xy.loc[chain[1:], "x"].to_numpy(), "y1": xy.loc[chain[1:], "y"].to_numpy()})
        selected = nodes.iloc[[model.node]]
        if case["layout"] == "grid":
            tree, _ = model.tree()
            rr, cc = np.nonzero(tree.patterns[model.node].reshape(model.tree_side, model.tree_side))
            pixels = pd.DataFrame({"x0": cc - 0.5, "y0": rr - 0.5, "x1": cc + 0.5, "y1": rr + 0.5})
    if case["layout"] == "grid":
        xlim = ylim = (-0.5, model.tree_side - 0.5)
        xlabel, ylabel = "square centre: column", "square centre: row"
    else:
        span = (float(nodes["x"].min()), float(nodes["x"].max())) if len(nodes) else (0.0, 1.0)
        xlim = (span[0] - 0.7, span[1] + 0.7)
        ylim = (-0.7, float(nodes["depth"].max() if len(nodes) else 0) + 0.7)
        xlabel, ylabel = "pattern (leaves in depth-first order)", "depth"
    return {"nodes": nodes, "edges": case["edges"], "path": path_edges, "selected": selected, "pixels": pixels,
            "xlim": xlim, "ylim": ylim, "xlabel": xlabel, "ylabel": ylabel, "summary": case["summary"],
            "layout": case["layout"]}


def _flops(v: float) -> str:
    return f"{v:,.0f}"


def path_markdown(model: PerformanceModel) -> str:
    """The selected node's chain of updates as Markdown (project text only: no user string)."""
    if model.node < 0:
        return ("**Tap a node of the tree** (or type its number under *Tree*) to see the updates along its path from "
                "the root, with their cost next to factoring that pattern from scratch.")
    p = model.path()
    chain = " → ".join(str(v) for v in p["nodes"])
    lines = [f"**Node {p['node']}**: {p['n_missing']} missing / {p['n_observed']} observed, {p['rows']} rows, "
             f"depth {p['depth']}. Path from the root: {chain}."]
    if p["start"] != p["nodes"][0]:
        lines.append(f"Node {p['start']} is factored from scratch again (its depth is a multiple of *refresh "
                     f"every* = {model.refresh_every}): the chain of updates starts there.")
    if not p["steps"]:
        lines.append(f"This node is **factored from scratch**: n<sub>o</sub>³/3 = {_flops(p['scratch_flops'])} flops.")
        return "\n\n".join(lines)
    rows = ["| edge | n<sub>d</sub> | Cholesky factor of Σ<sub>oo</sub> | K | update flops | scratch flops |",
            "|---|---|---|---|---|---|"]
    for s in p["steps"]:
        ops = []
        if s["removed"]:
            ops.append("remove " + ", ".join(s["removed"]) + " (Givens rotations)")
        if s["appended"]:
            ops.append("append " + ", ".join(s["appended"]) + " (forward substitution)")
        k_ops = []
        if s["appended"]:
            k_ops.append(f"condition on {len(s['appended'])} newly observed")
        if s["removed"]:
            k_ops.append(f"add {len(s['removed'])} newly missing (lemma)")
        rows.append(f"| {s['parent']} → {s['child']} | {s['n_d']} | {'; '.join(ops)} | {'; '.join(k_ops)} | "
                    f"{_flops(s['cholesky_flops'])} | {_flops(s['scratch_flops'])} |")
    lines.append("\n".join(rows))
    ratio = p["update_flops"] / p["scratch_flops"] if p["scratch_flops"] else float("nan")
    lines.append(f"Along the chain from node {p['start']}: **{_flops(p['update_flops'])} flops of updates** (≈ n<sub>d</sub> "
                 f"n<sub>o</sub>² per edge) against **{_flops(p['scratch_flops'])}** for factoring node {p['node']} "
                 f"from scratch (n<sub>o</sub>³/3): {ratio:.2f}x. Each update is shared: a node's factor serves its "
                 "children, so the tree pays one edge per pattern, not the whole chain.")
    return "\n\n".join(lines)


def summary_markdown(summary: dict, refresh_every: int) -> str:
    s = summary
    return (f"**{s['n_patterns']} distinct patterns** of {s['n_rows']} rows, D = {s['n_features']} · MST weight "
            f"Σ n<sub>d</sub> = **{s['total_weight']}** (mean n<sub>d</sub> {s['mean_nd']:.1f}) · max depth "
            f"**{s['max_depth']}** · peak stored factors **{s['peak_states']}** · factored from scratch: "
            f"**{s['n_scratch']}** (roots + every {refresh_every or '∞'} levels)  \n"
            f"Flops of one E-step's factorisations: naive p x n<sub>o</sub>³/3 = **{_flops(s['naive_flops'])}** · tree "
            f"= **{_flops(s['tree_flops'])}** · precision side = **{_flops(s['precision_flops'])}**")


# ----------------------------------------------------------------------------- the page
#: The timing and cost plots' series: key -> (label, colour, line dash, marker).
_PLOT_SERIES = {key: (label, colour, "solid" if kind == "kernel" else "dashed",
                      "circle" if kind == "kernel" else "triangle") for key, (label, colour, kind) in SERIES.items()}


def _series_plot(title: str, ylabel: str, kinds: tuple[str, ...]) -> SeriesPlot:
    """A plot of the series of these kinds (``kernel``, ``em_step``): the only ones its frames can fill."""
    tooltips = [("series", "@series"), ("x", "@x"), (ylabel, "@ms"), ("patterns", "@patterns"), ("D", "@D"),
                ("rate", "@rate"), ("rows", "@rows")]
    series = {key: spec for key, spec in _PLOT_SERIES.items() if SERIES[key][2] in kinds}
    return SeriesPlot(title, ylabel, series, columns=_POINT_COLS, x="x", y="ms", tooltips=tooltips)


class PerformanceView(Viewer):
    """Measure button, sweep and tree settings, timing / cost plots, table, the pattern tree and a node's path.

    Parameters
    ----------
    model : PerformanceModel, optional
        A fresh one by default (each session builds its own).
    """

    model = param.ClassSelector(class_=PerformanceModel, doc="The settings and computations shown on the page")

    def __init__(self, **params):
        if params.get("model") is None:
            params["model"] = PerformanceModel()
        super().__init__(**params)
        self.results: pd.DataFrame | None = None
        self._busy = False
        self._destroyed = False
        self._cancel = threading.Event()
        self._started = 0.0
        self._run = 0
        self._doc = served_doc()  # the served session (None in Jupyter, scripts and tests)
        self._redraw = Redraw(self._draw, self._doc)  # Bokeh models are changed on the session's event loop only
        self._lock = threading.Lock()  # guards the measurement's progress handed from the compute thread
        self._progress_shown: tuple | None = None  # (run, x label, done, total, table or None) not drawn yet
        self._results_stale: tuple | None = None  # (table, x label): the plots and table to draw
        self._tree_stale = True
        self._build()
        self.model.param.watch(weak_callback(self._on_tree_settings),
                               ["tree_mask", "tree_side", "tree_square", "tree_features", "tree_rate", "tree_rows",
                                "refresh_every", "colour_by", "node", "seed"])
        self.model.param.watch(weak_callback(self._on_sweep_settings),
                               ["x_axis", "mask", "n_patterns", "n_features", "missing_rate", "rows_per_pattern",
                                "n_points", "repeats", "kernels", "em_step", "seed"])
        if self._doc is not None:
            self._doc.on_session_destroyed(self._on_session_destroyed)
        self.refresh_tree()

    def __panel__(self):
        return self._layout

    # ------------------------------------------------------------------ layout
    def _build(self):
        m = self.model
        self._measure = pn.widgets.Button(label="Measure", color="primary",
                                          description="Time every strategy over the sweep (a few seconds)")
        self._stop = pn.widgets.Button(label="Cancel", color="warning", disabled=True)
        self._measure.on_click(lambda event: self.measure())
        self._stop.on_click(lambda event: self.cancel())
        self._progress = pn.indicators.Progress(value=0, max=1, sizing_mode="stretch_width", bar_color="primary")
        self._status = pn.pane.Markdown("Press **Measure** to time the strategies.", sizing_mode="stretch_width",
                                        margin=(0, 10))
        em = em_strategies()
        em_label = "Also time a full EM step (K = 1)" if em else "Full EM step (needs EMConfig.strategy: not found)"
        w = pn.widgets
        sweep = [
            w.Select.from_param(m.param.x_axis, label="x-axis", options={v: k for k, v in X_AXES.items()}),
            w.Select.from_param(m.param.mask, label="Patterns", options={v: k for k, v in MASKS.items()}),
            w.IntSlider.from_param(m.param.n_patterns, label="Distinct patterns (largest)", start=2, end=200),
            w.IntSlider.from_param(m.param.n_features, label="Features D (largest; squares: side²)", start=8,
                                   end=256),
            w.FloatSlider.from_param(m.param.missing_rate, label="Missing rate (largest)", step=0.01),
            w.IntSlider.from_param(m.param.rows_per_pattern, label="Rows per pattern", start=1, end=50),
            pn.Row(w.IntInput.from_param(m.param.n_points, label="Points"),
                   w.IntInput.from_param(m.param.repeats, label="Repeats"), sizing_mode="stretch_width"),
            w.CheckBoxGroup.from_param(m.param.kernels, options={v: k for k, v in KERNELS.items()}, inline=False),
            w.Checkbox.from_param(m.param.em_step, label=em_label, disabled=not em),
            w.IntInput.from_param(m.param.seed, label="Seed"),
        ]
        self._tree_widgets = {
            "mask": w.Select.from_param(m.param.tree_mask, label="Patterns",
                                        options={v: k for k, v in MASKS.items()}),
            "side": w.IntSlider.from_param(m.param.tree_side, label="Image side"),
            "square": w.IntSlider.from_param(m.param.tree_square, label="Square side k"),
            "features": w.IntSlider.from_param(m.param.tree_features, label="Features"),
            "rate": w.FloatSlider.from_param(m.param.tree_rate, label="Missing rate", step=0.05),
            "rows": w.IntSlider.from_param(m.param.tree_rows, label="Rows", start=2, end=500),
            "refresh": w.IntSlider.from_param(m.param.refresh_every, label="Refresh every (levels; 0 = roots only)"),
            "colour": w.RadioButtonGroup.from_param(m.param.colour_by, options=["depth", "from scratch"]),
            "node": w.IntInput.from_param(m.param.node, label="Selected node (-1: none)"),
        }
        self._show_tree_widgets()
        m.param.watch(weak_callback(self._show_tree_widgets), "tree_mask")
        self.sidebar = pn.Column(
            "### Run", pn.Row(self._measure, self._stop, sizing_mode="stretch_width"), self._progress, self._status,
            "### Sweep", *sweep,
            "### Tree", *self._tree_widgets.values(),
            sizing_mode="stretch_width", min_width=300,
        )
        # Bokeh figures made once: a frame only replaces their sources' data
        self._timing = _series_plot("Measured: time per call", "milliseconds per call (log)", ("kernel", "em_step"))
        # only the kernels have flop counts (timing_frame leaves the EM steps empty there)
        self._theory = _series_plot("Theory: flops of the factorisations", "flops, leading terms (log)", ("kernel",))
        self._draw_results(None, X_AXES[m.x_axis])
        self._tree = TreeGraph("Pattern MST (tap a node)", height=500, on_tap=weak_callback(self._on_tap))
        self._tree_legend = pn.pane.HTML("", sizing_mode="stretch_width", margin=(0, 10))
        self._path = pn.pane.Markdown(path_markdown(m), sizing_mode="stretch_width",
                                      stylesheets=[":host table {font-size: 12px;} :host td {vertical-align: top;}"])
        self._summary = pn.pane.Markdown("", sizing_mode="stretch_width", margin=(0, 10))
        self._alert = pn.pane.Alert("", alert_type="danger", visible=False, sizing_mode="stretch_width")
        self._tree_alert = pn.pane.Alert("", alert_type="danger", visible=False, sizing_mode="stretch_width")
        self._info = pn.pane.Markdown(self._mode_text(), sizing_mode="stretch_width", margin=(0, 10))
        self._table = pn.pane.DataFrame(None, sizing_mode="stretch_width", index=False, escape=True,
                                        stylesheets=[":host table {font-size: 12px;}"])
        self.main = pn.Column(
            self._alert, self._info,
            flow(self._timing.pane, self._theory.pane),
            self._table,
            pn.pane.Markdown("### The pattern spanning tree of a small case", sizing_mode="stretch_width"),
            self._tree_alert, self._summary,
            flow(pn.Column(self._tree_legend, self._tree.pane, sizing_mode="stretch_width"), self._path),
            pn.pane.Markdown(EXPLANATION, sizing_mode="stretch_width"),
            sizing_mode="stretch_width",
        )
        self._layout = notebook_layout(self.sidebar, self.main)

    def _mode_text(self) -> str:
        if em_strategies():
            return ("Timed per point: one component's **E-step kernel** (solid) and, because `EMConfig` has a "
                    f"`strategy` field, a **full EM step** with K = 1 per strategy ({', '.join(em_strategies())}; "
                    "dashed). Hover a point for its numbers.")
        return ("Timed per point: one component's **E-step kernel** per strategy. `EMConfig` has no `strategy` field "
                "in this version of `explorer.core.mixtures.em_gmm`, so full EM steps are not timed.")

    def _show_tree_widgets(self, *events):
        squares = self.model.tree_mask == "squares"
        for key in ("side", "square"):
            self._tree_widgets[key].visible = squares
        for key in ("features", "rate"):
            self._tree_widgets[key].visible = not squares

    # ------------------------------------------------------------------ URL / session
    def url_bindings(self) -> list:
        """Every setting of the page (sweep, tree, selected node) kept in the URL."""
        return [(self.model, {k: k for k in self.model._SETTINGS})]

    def sync_url(self) -> bool:
        """Keep the settings in the page URL (when served). Returns True if synced."""
        return sync_with_url(*self.url_bindings())

    def _on_session_destroyed(self, session_context) -> None:
        """Cancel the sweep (idempotent: Bokeh may call it twice); the session's compute thread stops by itself."""
        self._destroyed = True
        self._cancel.set()

    # ------------------------------------------------------------------ measuring
    def measure(self) -> bool:
        """Start the sweep (a job of the session's compute thread when served). False when it cannot start."""
        if self._busy or self._destroyed:
            return False
        try:
            self.model.check()
        except BadInputError as exc:
            self._show_error(str(exc))
            return False
        self._show_error("")
        self._busy = True
        self._run += 1
        run = self._run
        self._cancel = cancel = threading.Event()
        self._started = time.monotonic()
        total = len(self.model.sweep_values()) * len(self.model.series())
        with hold():
            self._measure.disabled, self._stop.disabled = True, False
            self._progress.param.update(max=max(total, 1), value=0, bar_color="primary")
            self._status.object = f"Measuring 0 / {total} …"
        x_label = X_AXES[self.model.x_axis] + " (realised)"
        last = {"bar": 0.0, "plots": time.monotonic()}

        def progress(done, total, table):  # on the compute thread: hand the numbers to the event loop
            now = time.monotonic()
            if now - last["bar"] < _PROGRESS_EVERY_S:
                return  # throttled: the final table comes with _finish
            last["bar"] = now
            plots = now - last["plots"] >= _PLOTS_EVERY_S
            if plots:
                last["plots"] = now
            with self._lock:
                self._progress_shown = (run, x_label, done, total, table if plots else None)
            self._redraw()

        def work():
            try:
                return self.model.sweep(progress=progress, cancel=cancel), None
            except Exception as exc:  # noqa: BLE001 - shown on the page, never raised into the server
                return None, exc

        def then(outcome, error):
            table, failure = outcome if error is None else (None, error)
            self._finish(run, x_label, table, failure)

        if not run_then(work, then, key="measure", doc=self._doc):  # the session's thread has stopped
            self._busy = False
            return False
        return True

    def cancel(self) -> None:
        """Stop the sweep before its next measurement (what is measured so far stays)."""
        self._cancel.set()

    def _finish(self, run, x_label, table, error) -> None:
        """The sweep's end, on the session's event loop (or at once outside a server)."""
        if run != self._run or self._destroyed:
            return
        self._busy = False
        with self._lock:
            self._progress_shown = None
        with hold():
            self._measure.disabled, self._stop.disabled = False, True
            if error is not None:
                self._show_error(f"{type(error).__name__}: {error}")
                self._progress.bar_color = "danger"
                self._status.object = "The measurement failed."
                return
            self.results = table
            n = len(table)
            cancelled = self._cancel.is_set()
            self._progress.param.update(value=n if cancelled else self._progress.max,
                                        bar_color="warning" if cancelled else "success")
            failed = table[table["error"] != ""]
            if len(failed):
                first = failed.drop_duplicates("series")
                self._show_error("Some strategies failed (no time measured): " + "; ".join(
                    f"{SERIES[r.series][0]}: {r.error}" for r in first.itertuples()), kind="warning")
            wall = time.monotonic() - self._started
            self._status.object = (f"{'Cancelled after' if cancelled else 'Done:'} {n} measurements in {wall:.1f} s "
                                   "(each the best of the repeats).")
        self._results_stale = (table, x_label)
        self._redraw()

    def _draw_progress(self) -> None:
        with self._lock:
            shown, self._progress_shown = self._progress_shown, None
        if shown is None:
            return
        run, x_label, done, total, table = shown
        if run != self._run or self._destroyed:
            return
        self._progress.param.update(max=max(total, 1), value=done)
        self._status.object = f"Measuring {done} / {total} …"
        if table is not None:
            self._draw_results(table, x_label)

    def _draw_results(self, table: pd.DataFrame | None, x_label: str) -> None:
        for plot, value in ((self._timing, "seconds"), (self._theory, "flops")):
            frame = timing_frame(table, x_label, value)
            plot.update(frame["series"], frame["xlim"], frame["ylim"], x_label, frame=frame)
        if table is not None:
            self._table.object = self._pivot(table)

    @staticmethod
    def _pivot(table: pd.DataFrame) -> pd.DataFrame | None:
        if table is None or not len(table):
            return None
        ms = table.assign(label=[SERIES[s][0] for s in table["series"]], ms=table["seconds"] * 1e3)
        out = ms.pivot_table(index="x", columns="label", values="ms", aggfunc="first", dropna=False)
        out = out[[SERIES[s][0] for s in SERIES if SERIES[s][0] in out.columns]]
        shape = table.groupby("x")[["n_patterns", "n_features", "n_rows"]].first()
        out.insert(0, "rate", table.groupby("x")["missing_rate"].first().round(3))
        for col in ("n_rows", "n_features", "n_patterns"):
            out.insert(0, col.replace("n_", ""), shape[col])
        out.index = [f"{v:.3g}" for v in out.index]
        out.columns.name = None
        out = out.round(3).rename(columns=lambda c: f"{c} (ms)" if c in {v[0] for v in SERIES.values()} else c)
        return out.rename_axis("x").reset_index()

    def _show_error(self, text: str, kind: str = "danger") -> None:
        self._alert.param.update(object=md(text), visible=bool(text), alert_type=kind)

    def _on_sweep_settings(self, *events) -> None:
        if self.results is not None and not self._busy:
            self._status.object = "Settings changed: press **Measure** to time the new sweep."

    # ------------------------------------------------------------------ the tree
    def _on_tap(self, x=None, y=None) -> None:
        if x is None or y is None:
            return
        try:
            node = self.model.nearest_node(float(x), float(y), max_distance=0.75)
        except BadInputError:
            return
        if node >= 0:
            self.model.node = node

    def _on_tree_settings(self, *events) -> None:
        names = {e.name for e in events}
        if names - {"node", "colour_by"}:  # a new case: the old selection may not exist
            try:
                tree, _ = self.model.tree()
                if self.model.node >= tree.n_patterns:
                    self.model.node = -1
                    return  # that change redraws
            except BadInputError:
                pass
        self.refresh_tree()

    def refresh_tree(self) -> None:
        """Redraw the tree, its summary and the selected node's path (on the session's event loop)."""
        self._tree_stale = True
        self._redraw()

    # ------------------------------------------------------------------ drawing
    def _draw(self) -> None:
        with hold():
            self._draw_progress()
            results, self._results_stale = self._results_stale, None
            if results is not None:
                self._draw_results(*results)
            if self._tree_stale:
                self._tree_stale = False
                self._draw_tree()
        push(self._timing.pane, self._theory.pane, self._tree.pane)

    def _draw_tree(self) -> None:
        m = self.model
        try:
            frame = tree_frame(m)
            path = path_markdown(m)
        except BadInputError as exc:
            self._tree_alert.param.update(object=md(str(exc)), visible=True)
            return
        self._tree_alert.visible = False
        self._tree.update(frame)
        self._summary.object = summary_markdown(frame["summary"], m.refresh_every)
        self._path.object = path
        if m.colour_by == "from scratch":
            items = [(c, k) for k, c in SCRATCH_COLORS.items()]
        else:
            top = int(frame["nodes"]["depth"].max()) if len(frame["nodes"]) else 0
            items = [(Viridis256[int(round(220 * d / max(top, 1)))], f"depth {d}")
                     for d in sorted({0, top // 2, top})]
        self._tree_legend.object = "".join(
            f'<span style="display:inline-block;margin-right:14px"><span style="display:inline-block;width:12px;'
            f'height:12px;border-radius:6px;background:{c};margin-right:4px"></span>{label}</span>'
            for c, label in items) + ('<span style="color:#555">· size = rows · edge label = n<sub>d</sub> · '
                                      'red = path of the selected node</span>')


def create_model(**settings) -> PerformanceModel:
    """The default model of the page: squares on an 8x8 image, sweep over the number of patterns."""
    return PerformanceModel(**settings)
