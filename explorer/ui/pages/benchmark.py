"""The benchmark page: run the garriga2017 imputation benchmark and plot it like Figures A.1-A.5.

One :class:`~explorer.ui.state.benchmark_model.BenchmarkModel` per page. The results grid has one
row per metric (NRMSE, NLL, PFC, 95 % coverage) and one column per data set (two slots); each
panel is a Bokeh figure made once per session (:class:`~explorer.ui.plots.bars.MetricBars`:
finite bars, infinite bars, ±2 sd error bars, failed-cell markers, text labels, the reference marks,
each one source), so new results only replace column data. The second slot's figures are made when
a second data set is first shown. Bars sit at numeric positions (rate + method offset), never on a
categorical axis (docs/NOTES.md: shrinking factors break BokehJS). The frame data come from the pure
function :func:`bar_frame`. The page draws on its session's event loop (:class:`~explorer.ui.session.Redraw`).

When served, the run's cells (data set x rate x method) are jobs of the session's one compute thread
(:class:`~explorer.ui.session.SessionWorker`), one after the other; outside a server (Jupyter,
scripts, tests) the model runs them on a background thread of its own. A periodic callback of the
session calls :meth:`BenchmarkModel.poll`, which applies the progress in one batch. When the
browser session ends, :meth:`BenchmarkPage._on_session_destroyed` stops polling and closes the
model (:meth:`BenchmarkModel.close`: the run is cancelled and its worker processes terminated).
"""

from __future__ import annotations

import asyncio
import functools
import math

import numpy as np
import pandas as pd
import panel as pn
import param
from bokeh.palettes import Category10_10
from panel.viewable import Viewer

from explorer import benchmark as bm
from explorer.reference import GARRIGA2017_FIGURES, GARRIGA2017_RATES, reference_cells
from explorer.ui.components.notebook import notebook_layout
from explorer.ui.page import sync_with_url
from explorer.ui.plots.bars import BAR_COLUMNS, MetricBars
from explorer.ui.session import Redraw, SessionWorker, hold, push, served_doc
from explorer.ui.state.benchmark_model import COMMITTED_SUMMARY, BenchmarkModel
from explorer.ui.text import md

__all__ = ["BenchmarkPage", "bar_frame", "METRIC_ROWS", "METHOD_COLORS"]

#: Rows of the results grid: (metric, title, log axis).
METRIC_ROWS = (("nrmse", "NRMSE (lower is better)", False), ("nll", "NLL, sum over rows (log axis)", True),
               ("pfc", "PFC, binary column", False), ("coverage95", "95 % interval coverage", False))
NLL_METRICS = tuple(m for m in ("nll", "nll_t") if m in bm.METRICS)
METHOD_COLORS = {m: Category10_10[i % 10] for i, m in enumerate(bm.METHODS)}
N_SLOTS = 2
RATE_CHOICES = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
_POLL_MS = 300
#: Log panels span at most this factor above their smallest value; larger values are clipped and labelled.
_LOG_SPAN = 1e8

EXPLANATION = """
### What am I looking at?
The imputation benchmark of the POIGMM thesis (garriga2017, §4.2): amputate a complete data set with a
missingness mechanism at the requested rates, standardise with the observed entries, impute with each
method, and score the hidden entries. One figure per mechanism, as Appendix A: **rows** are metrics,
**columns** data sets, **groups** the requested missing rates, **bars** the methods (mean over the
repetitions; whiskers ±2 sd when there are several). Lower is better except for coverage (target 0.95,
dashed line).

* **NLL** is summed over rows in standardised units, on a log axis. Gaussians far from the truth give
  astronomically large or **infinite** values, as in the thesis: infinite means are pale dashed bars
  reaching the top, marked ∞; values more than 10⁸ times the panel's smallest are clipped at the top and
  labelled with their order of magnitude (e.g. 4e306). Hover a bar for its numbers.
* **Failed** cells (the method raised) are marked ✕; a method without a predictive distribution (kNN)
  has no NLL or coverage bar, and the NMAR mechanisms hide no binary entry, hence no PFC.
* **Reference**: black dashes are the numbers of the author's notebook (`explorer.reference`), for the
  thesis's methods (GMM = `poigmm`, MissForest, MICE, mean); a dash on the top edge is off the scale.
  Without results the reference alone is drawn (the thesis figure). *Quick* settings are a smoke run with
  cheaper methods: expect the order, not the values.
"""


def _empty(cols) -> dict:
    return {c: np.empty(0, dtype=object if c in ("method", "text") else float) for c in cols}


def _records(rows: list[dict], cols) -> dict:
    if not rows:
        return _empty(cols)
    return {c: np.array([r[c] for r in rows], dtype=object if c in ("method", "text") else float) for c in cols}


def bar_frame(summary: pd.DataFrame | None, *, dataset: str, mechanism: str, metric: str, log: bool = False,
              show_reference: bool = False, methods=None) -> dict:
    """Everything one results panel draws, as plain arrays.

    Parameters
    ----------
    summary : DataFrame or None
        Output of :func:`explorer.benchmark.summarise` (columns dataset, mechanism, rate, method,
        metric, mean, std, n, n_inf, n_failed, ...).
    dataset, mechanism, metric : str
        The panel: its rows of ``summary``.
    log : bool
        Log y axis: bars start at a floor below the smallest positive value; non-positive values are
        drawn at the floor and labelled "≤0".
    show_reference : bool
        Add the garriga2017 reference means (:func:`explorer.reference.reference_cells`) of the methods
        and rates on screen; without results, the reference alone (the thesis figure).
    methods : sequence of str, optional
        Methods to show (default: those in the results), drawn in :data:`explorer.benchmark.METHODS` order.
        Bar positions depend on the methods and rates of the data set and mechanism over *all*
        metrics, so a method without a value for this metric leaves its slot empty.

    Returns
    -------
    dict
        ``bars`` / ``inf_bars`` (columns x0, y0, x1, y1, method, rate, mean, std, n, n_inf, n_failed),
        ``errors`` (x0, y0, x1, y1: ±2 sd), ``failed`` (x, y), ``labels`` (x, y, text), ``ref``
        (x0, y0, x1, y1, method, rate, mean), ``xlim``, ``ylim`` and ``empty`` (True when nothing is drawn).
    """
    cell = pd.DataFrame(columns=["rate", "method", "metric", "mean", "std", "n", "n_inf", "n_failed"])
    if summary is not None and len(summary):
        cell = summary[(summary["dataset"] == dataset) & (summary["mechanism"] == mechanism)]
    if methods is not None:
        cell = cell[cell["method"].isin(list(methods))]
    rows = cell[cell["metric"] == metric]
    ref = reference_cells(mechanism, metric, datasets=[dataset]) if show_reference else None
    if ref is not None and methods is not None:
        ref = ref[ref["method"].isin(list(methods))]
    if len(cell):  # the slots of every metric of the figure: bars line up across its rows
        shown_methods, rates = set(cell["method"]), sorted({round(float(r), 6) for r in cell["rate"]})
        if ref is not None:
            ref = ref[ref["method"].isin(shown_methods) & ref["rate"].round(6).isin(rates)]
    elif ref is not None and len(ref):
        shown_methods, rates = set(ref["method"]), sorted({round(float(r), 6) for r in ref["rate"]})
    else:
        shown_methods, rates = set(), []
    order = [m for m in bm.METHODS if m in shown_methods] + sorted(shown_methods - set(bm.METHODS))
    spacing = float(np.min(np.diff(rates))) if len(rates) > 1 else 0.2
    width = 0.8 * spacing / max(len(order), 1)
    centre = {(r, m): r + (j - (len(order) - 1) / 2) * width for r in rates for j, m in enumerate(order)}

    values = [float(v) for v in rows["mean"] if np.isfinite(v)]
    values += [float(v) for v in rows["mean"] + 2 * rows["std"].fillna(0.0) if np.isfinite(v)]
    if ref is not None:
        values += [float(v) for v in ref["mean"] if np.isfinite(v)]
    if log:
        pos = sorted(v for v in values if v > 0)
        floor = 10.0 ** (math.floor(math.log10(pos[0])) - 1) if pos else 1.0
        core = [v for v in pos if v <= pos[0] * _LOG_SPAN]  # overflow-sized values do not set the scale
        top = 10.0 ** (math.ceil(math.log10(core[-1])) + 1) if pos else 10.0
    else:
        floor = 0.0
        top = max(values + [0.0]) * 1.15 or 1.0
        if metric in ("coverage95", "pfc"):
            top = max(top, 1.05 if metric == "coverage95" else top)
    bars, inf_bars, errors, failed, labels, refs = [], [], [], [], [], []
    for rec in rows.to_dict("records"):
        r, m = round(float(rec["rate"]), 6), rec["method"]
        x, mean, std = centre[(r, m)], float(rec["mean"]), float(rec["std"])
        info = {"method": m, "rate": r, "mean": mean, "std": std, "n": float(rec["n"]), "n_inf": float(rec["n_inf"]),
                "n_failed": float(rec["n_failed"]), "x0": x - width / 2, "x1": x + width / 2, "y0": floor}
        if np.isnan(mean):
            failed.append({"x": x, "y": floor if log else 0.0})
            labels.append({"x": x, "y": (floor * 3 if log else 0.04 * top), "text": "failed"})
        elif np.isinf(mean):
            inf_bars.append(dict(info, y1=top))
            labels.append({"x": x, "y": top / 4 if log else 0.93 * top, "text": "∞"})
        elif mean > top:  # e.g. 1e300: clipped at the top, labelled with its order of magnitude
            bars.append(dict(info, y1=top))
            labels.append({"x": x, "y": top / 4 if log else 0.93 * top, "text": f"{mean:.0e}".replace("e+", "e")})
        elif log and mean <= 0:
            bars.append(dict(info, y1=floor))
            labels.append({"x": x, "y": floor * 3, "text": "≤0"})
        else:
            bars.append(dict(info, y1=mean))
            if np.isfinite(std) and std > 0:
                lo = max(mean - 2 * std, floor) if log else mean - 2 * std
                errors.append({"x0": x, "x1": x, "y0": lo, "y1": min(mean + 2 * std, top)})
    if ref is not None:
        for rec in ref.to_dict("records"):
            r, m, v = round(float(rec["rate"]), 6), rec["method"], float(rec["mean"])
            if (r, m) not in centre or np.isnan(v):
                continue
            y = top if v > top else (max(v, floor) if log else v)
            x = centre[(r, m)]
            refs.append({"x0": x - width / 2, "x1": x + width / 2, "y0": y, "y1": y, "method": m, "rate": r, "mean": v})
    pad = 0.6 * spacing
    xlim = (rates[0] - pad, rates[-1] + pad) if rates else (0.0, 1.0)
    return {"bars": _records(bars, BAR_COLUMNS), "inf_bars": _records(inf_bars, BAR_COLUMNS),
            "errors": _records(errors, ("x0", "y0", "x1", "y1")), "failed": _records(failed, ("x", "y")),
            "labels": _records(labels, ("x", "y", "text")),
            "ref": _records(refs, ("x0", "y0", "x1", "y1", "method", "rate", "mean")),
            "xlim": xlim, "ylim": (floor, top), "empty": not (bars or inf_bars or failed or refs)}


class BenchmarkPage(Viewer):
    """Settings, Run / Cancel, progress, the Figures A.1-A.5 grid and the summary table.

    Parameters
    ----------
    model : BenchmarkModel, optional
        A fresh one by default (each session builds its own).
    """

    model = param.ClassSelector(class_=BenchmarkModel, doc="The benchmark run shown on the page")
    show_reference = param.Boolean(default=True, doc="Overlay the thesis notebook's numbers")
    nll_metric = param.Selector(default="nll", objects=list(NLL_METRICS), doc="NLL row: Gaussian or Student-t")

    def __init__(self, **params):
        if params.get("model") is None:
            params["model"] = BenchmarkModel()
        super().__init__(**params)
        self._cb = None
        self._destroyed = False
        self._doc = served_doc()  # the served session (None in Jupyter, scripts and tests)
        self._redraw = Redraw(self._draw, self._doc)  # Bokeh models are changed on the session's event loop only
        self._plots_stale = True  # the results changed since the panels were drawn
        self._panels: dict[tuple[int, str], MetricBars] = {}  # (slot, metric) -> panel; a slot made when shown
        self._build()
        self.model.param.watch(self._on_progress, ["status", "done", "total", "eta", "last_job", "error",
                                                   "elapsed"])
        self.model.param.watch(self._on_results, ["summary", "mechanism", "datasets", "methods"])
        self.model.param.watch(self._on_rates, ["rates"])
        self._register_cleanup()
        self.refresh()

    # ------------------------------------------------------------------ layout
    def _build(self):
        m = self.model
        mech_options = {f"{GARRIGA2017_FIGURES[k][1]} (Fig. {GARRIGA2017_FIGURES[k][0]}) · {k}": k for k in GARRIGA2017_RATES}
        self._datasets = pn.widgets.MultiChoice.from_param(m.param.datasets, label="Data sets (max 2)", max_items=2)
        self._mechanism = pn.widgets.Select.from_param(m.param.mechanism, options=mech_options, label="Mechanism")
        self._rates = pn.widgets.MultiChoice(label="Missing rates", options={f"{r:g}": r for r in RATE_CHOICES},
                                             value=[float(r) for r in m.rates])
        self._rates.param.watch(self._on_rates_widget, "value")
        self._methods = pn.widgets.MultiChoice.from_param(m.param.methods, label="Methods")
        self._reps = pn.widgets.IntInput.from_param(m.param.repetitions, label="Repetitions", start=1, end=100)
        self._seed = pn.widgets.IntInput.from_param(m.param.seed, label="Seed")
        self._quick = pn.widgets.Checkbox.from_param(m.param.quick, label="Quick settings (smoke run)")
        self._jobs = pn.widgets.IntInput.from_param(m.param.n_jobs, label="Worker processes", start=1, end=16)
        self._variant = pn.widgets.Select.from_param(m.param.variant, label="Mechanism variant")
        self._run = pn.widgets.Button(label="Run", color="primary", description="Run the benchmark in the background")
        self._cancel = pn.widgets.Button(label="Cancel", color="warning", disabled=True,
                                         description="Stop after the current job (partial results stay)")
        self._run.on_click(self._on_run)
        self._cancel.on_click(self._on_cancel)
        have_full = COMMITTED_SUMMARY.is_file()
        self._load = pn.widgets.Button(
            label="Load committed full run", disabled=not have_full,
            description=(f"Show {COMMITTED_SUMMARY.relative_to(COMMITTED_SUMMARY.parents[2])}" if have_full else
                         "No committed full run yet: write results/garriga2017_benchmark/summary.csv with "
                         "benchmarks/run_imputation.py"))
        self._load.on_click(self._on_load)
        self._show_ref = pn.widgets.Checkbox.from_param(self.param.show_reference,
                                                        label="Show reference (thesis notebook)")
        self._nll = pn.widgets.Select.from_param(self.param.nll_metric, label="NLL row", visible=len(NLL_METRICS) > 1)
        self._progress = pn.indicators.Progress(value=0, max=1, bar_color="primary", sizing_mode="stretch_width",
                                                height=18)
        self._status = pn.pane.Markdown("", sizing_mode="stretch_width", margin=(0, 10))
        self._alert = pn.pane.Alert("", alert_type="danger", visible=False, sizing_mode="stretch_width")
        self._legend = pn.pane.HTML("", sizing_mode="stretch_width", margin=(0, 10))
        self._heads = [pn.pane.Markdown("", margin=(0, 10)) for _ in range(N_SLOTS)]
        # one column per slot; its panels are made when the slot is first shown (the second one often never is)
        self._columns = [pn.Column(self._heads[s], sizing_mode="stretch_width", visible=s == 0)
                         for s in range(N_SLOTS)]
        self._make_slot(0)
        self._table = pn.widgets.Tabulator(pd.DataFrame(), disabled=True, show_index=False, pagination="local",
                                           page_size=12, sizing_mode="stretch_width", layout="fit_data_table")
        self.sidebar = pn.Column(
            "### Run", pn.Row(self._run, self._cancel, sizing_mode="stretch_width"), self._load,
            "### Benchmark", self._datasets, self._mechanism, self._rates, self._methods,
            pn.Row(self._reps, self._seed, sizing_mode="stretch_width"), self._quick, self._jobs, self._variant,
            "### Display", self._show_ref, self._nll,
            sizing_mode="stretch_width", min_width=300,
        )
        self.main = pn.Column(
            self._alert, self._progress, self._status, self._legend,
            pn.Row(*self._columns, sizing_mode="stretch_width"),
            "### Summary table", self._table,
            pn.pane.Markdown(EXPLANATION, sizing_mode="stretch_width"),
            sizing_mode="stretch_width",
        )
        self._layout = notebook_layout(self.sidebar, self.main)  # a notebook; a server shows sidebar and main

    def _make_slot(self, slot: int) -> None:
        """Make the panels of a slot's column (once): one per metric row."""
        if (slot, METRIC_ROWS[0][0]) in self._panels:
            return
        panels = []
        for metric, title, log in METRIC_ROWS:
            panel = MetricBars(title, METHOD_COLORS, log=log, target=0.95 if metric == "coverage95" else None)
            self._panels[(slot, metric)] = panel
            panels.append(panel.pane)
        self._columns[slot].extend(panels)

    def __panel__(self):
        return self._layout

    # ------------------------------------------------------------------ settings / URL / session
    def url_bindings(self) -> list:
        """The benchmark settings kept in the URL, as ``[(object, {parameter: query name})]``."""
        return [(self.model, {k: k for k in self.model._SETTINGS}), (self, {"show_reference": "reference"})]

    def sync_url(self) -> bool:
        """Keep the benchmark settings in the page URL (when served). Returns True if synced."""
        return sync_with_url(*self.url_bindings())

    def _register_cleanup(self):
        if self._doc is None:
            return  # Jupyter / scripts / tests: no session to outlive
        self._doc.on_session_destroyed(self._on_session_destroyed)

    def _on_session_destroyed(self, session_context) -> None:
        """The browser session ended: stop polling, cancel the run, terminate its worker processes.

        Idempotent (Bokeh may call it more than once); the page starts no run afterwards.
        """
        self._destroyed = True
        self.model.close()  # first: the workers' memory matters more than a stale timer
        self._stop_polling()

    # ------------------------------------------------------------------ callbacks
    def _on_run(self, event=None):
        self.run()

    def _on_cancel(self, event=None):
        self.model.cancel()
        self.poll()

    def _on_load(self, event=None):
        self.model.load_results()
        self.refresh()

    def _on_rates_widget(self, event):
        values = sorted(float(v) for v in event.new)
        if values != sorted(float(r) for r in self.model.rates):
            self.model.rates = values

    def _on_rates(self, event):
        values = [float(r) for r in event.new]
        if sorted(values) != sorted(self._rates.value):
            extra = {f"{r:g}": r for r in values if not any(np.isclose(r, c) for c in RATE_CHOICES)}
            self._rates.param.update(options={f"{r:g}": r for r in RATE_CHOICES} | extra, value=values)

    def _on_progress(self, *events):
        self._redraw()
        if self._cb is not None and self.model.status != "running" and not self.model.running:
            self._stop_polling()

    def _on_results(self, *events):
        self.refresh_plots()

    @param.depends("show_reference", "nll_metric", watch=True)
    def _on_display(self):
        self.refresh_plots()

    # ------------------------------------------------------------------ actions
    def run(self) -> bool:
        """Start the model's run and poll its progress every 300 ms (served, or in Jupyter).

        When served, the run's cells are jobs of the session's compute thread. False when the run
        cannot start (the model's error is shown) or the session has ended.
        """
        if self._destroyed:
            return False
        worker = SessionWorker.of(self._doc)
        started = self.model.start(submit=None if worker is None else functools.partial(worker.submit,
                                                                                         key="benchmark"))
        self._redraw()
        if started:
            self._start_polling()
        return started

    def poll(self) -> bool:
        """Apply the model's pending progress (what the periodic callback does)."""
        changed = self.model.poll()
        if not self.model.running and self.model.status == "running":
            changed = self.model.poll() or changed  # the final update raced the check
        if self._cb is not None and not self.model.running and self.model.status != "running":
            self._stop_polling()
        return changed

    def _start_polling(self):
        """Poll from a periodic callback: in a served session, or in Jupyter (a running event loop)."""
        if self._cb is not None:
            return
        if self._doc is None:
            try:
                asyncio.get_running_loop()
            except RuntimeError:  # a script or a test: call poll() / model.wait() by hand
                return
        self._cb = pn.state.add_periodic_callback(self.poll, period=_POLL_MS)

    def _stop_polling(self):
        cb, self._cb = self._cb, None
        if cb is not None:
            cb.stop()

    # ------------------------------------------------------------------ drawing
    def _slots(self) -> list[str]:
        """Data sets shown in the slots: the model's choice, or those of a loaded summary."""
        chosen = list(self.model.datasets)
        summary = self.model.summary
        if summary is not None and len(summary) and self.model.source not in ("", "run"):
            here = set(summary.loc[summary["mechanism"] == self.model.mechanism, "dataset"])
            loaded = [d for d in ("boston", "ionosphere") if d in here] + sorted(here - {"boston", "ionosphere"})
            chosen = loaded or chosen
        return chosen[:N_SLOTS]

    def refresh_plots(self) -> None:
        """Redraw every panel, the legend and the table (on the session's event loop)."""
        self._plots_stale = True
        self._redraw()

    def refresh(self) -> None:
        """Redraw the read-outs and every panel (on the session's event loop)."""
        self.refresh_plots()

    def _draw(self) -> None:
        with hold():
            self._update_status()
            plots, self._plots_stale = self._plots_stale, False
            if plots:
                self._draw_plots()
        if plots:
            push(*(p.pane for p in self._panels.values()))

    def _draw_plots(self) -> None:
        """Send every panel its frame: source data and ranges only (the second slot is made when first shown)."""
        model, slots = self.model, self._slots()
        summary = model.summary
        for s in range(N_SLOTS):
            dataset = slots[s] if s < len(slots) else ""
            shown = bool(dataset) or s == 0
            if shown:
                self._make_slot(s)
            self._columns[s].visible = shown
            if (s, METRIC_ROWS[0][0]) not in self._panels:
                continue
            for metric, _, log in METRIC_ROWS:
                name = self.nll_metric if metric == "nll" else metric
                self._panels[(s, metric)].update(bar_frame(summary, dataset=dataset, mechanism=model.mechanism,
                                                           metric=name, log=log, show_reference=self.show_reference))
            fig, thesis = GARRIGA2017_FIGURES[model.mechanism]
            self._heads[s].object = f"**{dataset or '(no data set)'}** · {thesis} (thesis Fig. {fig})"
        here = None if summary is None else summary[summary["mechanism"] == model.mechanism]
        if here is not None and len(here):
            shown_methods = set(here["method"])
        else:  # nothing run for this mechanism: the reference alone is drawn
            shown_methods = {"poigmm", "missforest", "mice", "mean"} if self.show_reference else set()
        items = "".join(
            f'<span style="display:inline-block;margin-right:14px"><span style="display:inline-block;width:12px;'
            f'height:12px;background:{METHOD_COLORS.get(m, "#999")};margin-right:4px"></span>{m}</span>'
            for m in bm.METHODS if m in shown_methods)
        if self.show_reference:
            items += ('<span style="display:inline-block"><span style="display:inline-block;width:16px;'
                      'height:3px;background:black;vertical-align:middle;margin-right:4px"></span>'
                      'thesis notebook (reference)</span>')
        self._legend.object = items
        # no results: no rows, but the columns of earlier results stay (the table's column models are made once)
        self._table.value = self._table.value.iloc[0:0] if here is None else here.reset_index(drop=True)

    def _update_status(self) -> None:
        m = self.model
        self._progress.max = max(m.total, 1)
        self._progress.value = min(m.done, max(m.total, 1)) if m.total else 0
        self._progress.bar_color = {"failed": "danger", "cancelled": "warning", "done": "success"}.get(
            m.status, "primary")
        self._status.object = m.progress_text()
        self._alert.object = md(m.error)
        self._alert.visible = bool(m.error)
        busy = m.status == "running"
        self._run.disabled = busy
        self._cancel.disabled = not busy
        self._load.disabled = busy or not COMMITTED_SUMMARY.is_file()
