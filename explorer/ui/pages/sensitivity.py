r"""The "Sensitivity" page: how an estimate moves as the imputations of one column depart from MAR by delta.

One :class:`~explorer.ui.state.sensitivity_model.SensitivityModel` (delta adjustment of Gaussian-mixture
imputations, :mod:`explorer.core.missingness.sensitivity`) on the session's data. The page shows

* (a) the imputed values of the chosen column, over all M imputations, shifted / scaled by the delta
  picked with the slider, against the observed values of that column (and, for built-in data, the
  true values that were hidden): histograms on fixed bins, so moving the slider moves the imputed
  histogram;
* (b) the Rubin-pooled estimate (the mean of a column or an OLS coefficient) with its confidence
  band against delta, the unadjusted (MAR) value, the tipping point, the reference it is about and,
  when known, the value on the complete data;
* (c) a sentence computed from the numbers ("the coefficient stays significant until delta = ...").

Fitting the mixture and drawing the imputations runs on the session's worker thread
(:class:`~explorer.ui.session.SessionWorker`; progress in the sidebar), and its result is drawn on
the session's event loop; the results are shared by the sessions of the server process
(:func:`~explorer.ui.state.sensitivity_model.cached_run_job`), so the start screen is drawn once.
Everything else (column, estimate, grid, slider) reruns only the cheap pooling. Both plots are Bokeh
figures made once per session (:class:`~explorer.ui.plots.bars.HistogramOverlay`,
:class:`~explorer.ui.plots.estimate_band.EstimateBand`): an update assigns their data on the event
loop (:class:`~explorer.ui.session.Redraw`). User column names only reach the page as escaped text
(:func:`explorer.ui.text.md`) or as Bokeh text (titles, labels, options).
"""

from __future__ import annotations

import threading
from functools import partial

import numpy as np
import panel as pn
import param

from explorer.datasets import list_datasets
from explorer.ui.components.data_controls import DataControls
from explorer.ui.page import ModelPage, weak_callback
from explorer.ui.plots.bars import Bars, HistogramOverlay
from explorer.ui.plots.estimate_band import EstimateBand, Line
from explorer.ui.session import Redraw, hold, push, run_then
from explorer.ui.state.data_model import UPLOADED, DataModel
from explorer.ui.state.sensitivity_model import DRAW_CACHE, ESTIMATES, SensitivityModel, cached_run_job
from explorer.ui.text import md

__all__ = ["SensitivityView", "estimate_frame", "histogram_frame", "sensitivity_datasets"]

MAX_FEATURES = 64
FIRST_DATASETS = ("iris", "wine", "boston")
DATA_URL = ("dataset", "n_samples", "data_seed", "mechanism", "rate", "mask_seed", "standardize")
MODEL_URL = ("column", "mode", "delta_max", "n_deltas", "delta_index", "estimate", "mean_column", "target",
             "predictor", "n_imputations", "n_components", "bootstrap", "selection", "seed", "level")
COLORS = {"observed": "#1f77b4", "imputed": "#ff7f0e", "hidden": "#2ca02c", "estimate": "#111111",
          "band": "#aec7e8", "neutral": "#7f7f7f", "tipping": "#d62728", "reference": "#9467bd",
          "truth": "#2ca02c", "current": "#ff7f0e", "selection": "#8c564b"}
N_BINS = 30

EXPLANATION = """
### What am I looking at?
Multiple imputation under **MAR** draws each missing value from its distribution given the observed
values of its row. Whether that is right cannot be checked from the data: if the values went missing
*because* of what they are (NMAR, e.g. the lowest values hidden), the missing ones differ from what
MAR predicts. The **delta adjustment** (van Buuren, *Flexible Imputation of Missing Data*, section 3.8;
a pattern-mixture model, Marlin's section 3.1 second factorisation) makes that departure explicit:
the imputed values of one column are shifted by delta (or multiplied by it), observed values never
change, the estimate is recomputed on each of the M completed data sets and pooled by Rubin's rules.

* **Left**: the observed values of the column, its imputed values at the delta of the slider (all M
  imputations) and, for built-in data, the values that were really hidden.
* **Right**: the pooled estimate and its confidence band against delta. Grey: no adjustment (MAR).
  Red: the **tipping point**, the delta nearest to no adjustment at which the conclusion changes:
  a coefficient stops (or starts) being significantly different from 0, or a mean's interval stops
  covering its unadjusted value. Green: the value on the complete data, when it is known. Brown
  (dash-dot): the same estimate pooled over M draws from a **selection model** fitted to the data
  (a Gaussian mixture with logistic self-masking P(observed | x) = sigmoid(a + b x) per column, fitted
  jointly by EM): a model-based answer to "how far from MAR?", valid if its self-masking form is right.

A delta is reported in units of the column's observed standard deviation (shift) or as a factor
(scale). Imputations come from one fitted Gaussian mixture unless "bootstrap" is ticked (then one
mixture per imputation, fitted on a bootstrap resample: slower, and the between-imputation spread
includes the uncertainty of the mixture's parameters).
"""


def sensitivity_datasets() -> list[str]:
    """Tables of at most ``MAX_FEATURES`` columns (iris, wine, boston first), then ``uploaded``."""
    names = [d.name for d in list_datasets() if d.n_features <= MAX_FEATURES]
    return [n for n in FIRST_DATASETS if n in names] + [n for n in names if n not in FIRST_DATASETS] + [UPLOADED]


# --------------------------------------------------------------------------- pure frame builders
def empty_histograms(title: str = "No imputations yet", xlabel: str = "value") -> dict:
    edges = np.linspace(0.0, 1.0, N_BINS + 1)
    zeros = np.zeros(N_BINS)
    return {"edges": edges, "observed": zeros, "imputed": zeros, "hidden": zeros, "title": title,
            "xlabel": xlabel}


def _density(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    if values.size == 0:
        return np.zeros(edges.size - 1)
    counts, _ = np.histogram(np.clip(values, edges[0], edges[-1]), bins=edges)
    return counts / (values.size * np.diff(edges))


def histogram_frame(model: SensitivityModel) -> dict:
    """Observed, imputed (at the current delta) and hidden values of the shifted column on fixed bins."""
    table = model.table
    if table is None or model.imputations is None:
        return empty_histograms("No imputations yet" if not model.error else "No imputations: see the message",
                                model.column or "value")
    grid = table.delta
    observed = model.observed()
    hidden = model.hidden_values()
    lo_imp, hi_imp = model.imputed_values(grid[0]), model.imputed_values(grid[-1])
    pool = [observed, lo_imp, hi_imp] + ([hidden] if hidden is not None and hidden.size else [])
    lo = min(float(np.quantile(p, 0.005)) for p in pool if p.size)
    hi = max(float(np.quantile(p, 0.995)) for p in pool if p.size)
    if hi <= lo:
        lo, hi = lo - 0.5, hi + 0.5
    edges = np.linspace(lo, hi, N_BINS + 1)
    delta = model.delta
    imputed = model.imputed_values(delta)
    return {"edges": edges, "observed": _density(observed, edges), "imputed": _density(imputed, edges),
            "hidden": np.zeros(N_BINS) if hidden is None else _density(hidden, edges),
            "title": f"{model.column}: imputed at delta = {model.delta_label(delta)}", "xlabel": model.column}


def _x(model: SensitivityModel, delta):
    """Delta on the plot's axis: in observed sd for a shift, the factor for a scale."""
    return np.asarray(delta, dtype=float) / (model.scale_sd if model.mode == "shift" else 1.0)


def empty_estimates(title: str = "No estimate yet") -> dict:
    e = np.empty(0)
    return {"band": (e, e, e), "estimate": (e, e), "neutral": (e, e), "tipping": (e, e), "reference": (e, e),
            "truth": (e, e), "selection": (e, e), "current": (e, e), "title": title, "xlabel": "delta",
            "ylabel": "estimate", "xlim": (0.0, 1.0), "ylim": (0.0, 1.0)}


def estimate_frame(model: SensitivityModel) -> dict:
    """The pooled estimate, its band and the marked values against delta (plot units, see :func:`_x`)."""
    table = model.table
    if table is None:
        return empty_estimates("No estimate: see the message" if model.error else "No estimate yet")
    x = _x(model, table.delta)
    truth = model.truth()
    ref = model.reference(table)
    span = float(np.max(table.upper) - np.min(table.lower))
    near = lambda v: np.min(table.lower) - span <= v <= np.max(table.upper) + span  # noqa: E731
    # the reference and the truth widen the axis only when they are near the band (0 far away flattened it)
    sel = model.selection_estimate
    sel_value = None if sel is None else sel[0]
    ys = [table.lower, table.upper] + [[v] for v in (ref, truth, sel_value) if v is not None and near(v)]
    ylo, yhi = float(min(np.min(v) for v in ys)), float(max(np.max(v) for v in ys))
    pad = 0.06 * max(yhi - ylo, 1e-9)
    ylim = (ylo - pad, yhi + pad)
    xlim = (float(x.min()), float(x.max()))
    vline = lambda at: (np.array([at, at]), np.array(ylim))  # noqa: E731
    hline = lambda at: (np.array(xlim), np.array([at, at]))  # noqa: E731
    e = np.empty(0)
    tp = model.tipping
    neutral_x = float(_x(model, table.neutral))
    i = min(model.delta_index, table.delta.size - 1)
    unit = "observed sd" if model.mode == "shift" else "factor"
    return {"band": (x, table.lower, table.upper), "estimate": (x, table.estimate),
            "neutral": vline(neutral_x) if xlim[0] <= neutral_x <= xlim[1] else (e, e),
            "tipping": vline(float(_x(model, tp.delta))) if tp is not None else (e, e),
            "reference": hline(ref), "truth": hline(truth) if truth is not None else (e, e),
            "selection": hline(sel_value) if sel_value is not None else (e, e),
            "current": (x[i:i + 1], table.estimate[i:i + 1]),
            "title": table.estimand.label(model.columns), "xlabel": f"delta ({model.mode} of {model.column}, {unit})",
            "ylabel": "pooled estimate", "xlim": xlim, "ylim": ylim}


# --------------------------------------------------------------------------- the view
class SensitivityView(ModelPage):
    """The Sensitivity page (see the module docstring); ``model``'s data model drives the data controls."""

    _LEAD, _DATA_URL, _LEAD_URL = "model", DATA_URL, MODEL_URL

    model = param.ClassSelector(class_=SensitivityModel)
    data_model = param.ClassSelector(class_=DataModel)

    def __init__(self, **params):
        if params.get("model") is None:
            params["model"] = SensitivityModel(data_model=params.get("data_model"))
        params["data_model"] = params["model"].data_model
        super().__init__(**params)
        self._lock = threading.RLock()
        self._token = 0
        self._destroyed = False
        self._syncing = False
        self._doc = self._served_doc()  # the session's document (None outside a server)
        self._redraw = Redraw(self._draw, doc=self._doc)  # Bokeh models are changed on the session's loop only
        self._draw_progress = (0, "")  # (token, text) of the running draw, shown by _show_progress on the loop
        self._redraw_progress = Redraw(self._show_progress, doc=self._doc)
        self._build()
        m, dm = self.model, self.data_model
        m.param.watch(weak_callback(self._on_table), ["revision"])
        m.param.watch(weak_callback(self._on_delta), ["delta_index"])
        m.param.watch(weak_callback(self._on_grid), ["n_deltas", "delta_max", "mode", "column"])
        m.param.watch(weak_callback(self._on_draw_settings), ["n_imputations", "n_components", "bootstrap", "seed",
                                                               "selection"])
        dm.param.watch(weak_callback(self._on_data), ["revision"])
        if self._doc is not None:
            self._doc.on_session_destroyed(self._on_destroyed)
        self._sync_widgets()
        self.refresh()

    # ------------------------------------------------------------------ layout (built once)
    def _build(self):
        m = self.model
        # Bokeh figures made once: an update assigns their data (explorer.ui.plots)
        figure = dict(height=430, sizing_mode="stretch_width", legend_columns=3, legend_font_size="9pt")
        pane = dict(sizing_mode="stretch_width", min_height=450)
        self._hist = HistogramOverlay(
            {"observed": Bars("observed", COLORS["observed"], fill_alpha=0.45, line_alpha=0),
             "imputed": Bars("imputed (all M sets)", COLORS["imputed"], fill_alpha=0.45, line_alpha=0),
             "hidden": Bars("hidden (true values)", COLORS["hidden"], fill_alpha=0, line_width=2)},
            ylabel="density", legend="below", show_grid=True, tools="", toolbar_location=None,
            pane_options=pane, **figure)
        self._estimate = EstimateBand(
            {"estimate": Line("pooled estimate", COLORS["estimate"], line_width=3),
             "neutral": Line("no adjustment (MAR)", COLORS["neutral"], line_dash="dashed"),
             "tipping": Line("tipping point", COLORS["tipping"], line_width=2.5),
             "reference": Line("reference value", COLORS["reference"], line_dash="dotted"),
             "truth": Line("complete data", COLORS["truth"]),
             "selection": Line("selection model (NMAR fit)", COLORS["selection"], line_width=2.5,
                               line_dash="dashdot")},
            band=("confidence band", COLORS["band"]), point=("current", "shown delta", COLORS["current"]),
            pane_options=pane, **figure)
        self._sentence = pn.pane.Markdown("", sizing_mode="stretch_width", margin=(0, 10),
                                          css_classes=["sensitivity-sentence"])
        self._progress = pn.indicators.Progress(active=True, value=-1, visible=False, height=12,
                                                sizing_mode="stretch_width")
        self._status = pn.pane.Markdown("", sizing_mode="stretch_width", margin=(0, 10),
                                        css_classes=["sensitivity-status"])
        self._column = pn.widgets.Select(label="Column to shift (has missing values)", options=[],
                                         css_classes=["shift-column"])
        self._mean_column = pn.widgets.Select(label="Mean of", options=[], css_classes=["mean-column"])
        self._target = pn.widgets.Select(label="Target", options=[], width=140, css_classes=["target-column"])
        self._predictor = pn.widgets.Select(label="Predictor", options=[], width=140, css_classes=["predictor-column"])
        for w in (self._column, self._mean_column, self._target, self._predictor):
            w.param.watch(self._on_column_widget, "value")
        self._delta = pn.widgets.DiscreteSlider(label="Shown delta", options={"0": 0}, value=0,
                                                css_classes=["delta-slider"])
        self._delta.param.watch(self._on_delta_widget, "value")
        self._ols_box = pn.Row(self._target, self._predictor, sizing_mode="stretch_width")
        self._data_controls = DataControls(model=self.data_model, datasets=sensitivity_datasets(), show_error=False)
        sidebar = pn.Column(
            "### Departure from MAR",
            self._column,
            pn.widgets.RadioButtonGroup.from_param(m.param.mode, variant="outline"),
            pn.widgets.FloatSlider.from_param(m.param.delta_max, step=0.1,
                                              label="Grid half-width (sd for a shift; 2x for a scale)"),
            pn.widgets.IntSlider.from_param(m.param.n_deltas, label="Grid points"),
            self._delta,
            "### Estimate",
            pn.widgets.Select.from_param(m.param.estimate, options=ESTIMATES, label="Downstream estimate"),
            self._mean_column, self._ols_box,
            pn.widgets.FloatSlider.from_param(m.param.level, step=0.01, label="Interval coverage"),
            "### Imputation",
            pn.widgets.IntSlider.from_param(m.param.n_imputations, label="Imputations M"),
            pn.widgets.IntSlider.from_param(m.param.n_components, label="Mixture components K"),
            pn.widgets.Checkbox.from_param(m.param.bootstrap, label="Bootstrap: one mixture per imputation"),
            pn.widgets.Checkbox.from_param(m.param.selection, label="Fit the selection model too (NMAR reference)"),
            pn.widgets.IntInput.from_param(m.param.seed, label="Seed (fit, draws)"),
            self._progress, self._status,
            "### Data", self._data_controls,
            sizing_mode="stretch_width", min_width=300,
        )
        # the classes on the Columns: a Bokeh pane's model is the figure itself, which keeps no Panel class
        left = pn.Column(self._hist.pane, sizing_mode="stretch_width", css_classes=["sensitivity-histogram"])
        right = pn.Column(self._estimate.pane, sizing_mode="stretch_width", css_classes=["sensitivity-estimate"])
        self._arrange(sidebar, [left, right], [], EXPLANATION)
        # the sentence right under the plots (the explanation follows)
        self.main.insert(len(self.main) - 1, self._sentence)

    # ------------------------------------------------------------------ drawing the imputations
    def start(self) -> None:
        """Draw the imputations for the current data (the page calls this once loaded)."""
        self.schedule_draw()

    def schedule_draw(self) -> None:
        """Fit and draw on the session's worker when served (here and now otherwise), if the data or settings
        changed; the result is shown on the session's event loop."""
        m = self.model
        if not m.needs_draw:
            return
        job = m.job()
        self._token += 1
        token = self._token
        if job is None:
            self._progress.visible = False
            self._status.object = ""
            self.refresh()
            return
        if job.content_key() not in DRAW_CACHE:  # drawn already by a session of this process: no progress to show
            self._progress.visible = True
            self._status.object = "Fitting the mixture and drawing the imputations…"

        def progress(done, total):
            if total == 0:
                text = "Fitting the selection model (the NMAR reference)…"
            else:
                text = (f"Drawing imputation {done} of {total} (one mixture each)…" if job.bootstrap
                        else ("Drawing the imputations…" if done == 1 else "Pooling…"))
            if not self._destroyed:
                self._draw_progress = (token, text)
                self._redraw_progress()

        run_then(partial(self._compute, job, progress), partial(self._finish, token, job), doc=self._doc)

    @staticmethod
    def _compute(job, progress=None):
        """``(result, error)`` of ``job`` (the session's worker): a readable error instead of an exception."""
        from explorer.core.validation import BadInputError

        try:
            return cached_run_job(job, progress), ""
        except BadInputError as exc:
            return None, str(exc)

    def _show_progress(self) -> None:
        token, text = self._draw_progress
        if token == self._token and not self._destroyed:
            self._status.object = text

    def _finish(self, token: int, job, outcome, error: BaseException | None = None) -> None:
        """Adopt the draws (on the event loop), unless newer settings superseded them."""
        if token != self._token or self._destroyed:
            return
        result, message = outcome if outcome is not None else (None, f"The imputations failed: {error}")
        with hold(freeze=True):  # one message and one walk of the model graph (see _draw)
            self._progress.visible = False
            self._status.object = ""
            self.model.adopt(job, result, message)  # its revision refreshes the page
        if self.model.needs_draw:  # the settings moved on while drawing
            self.schedule_draw()

    # ------------------------------------------------------------------ read-outs
    def refresh(self) -> None:
        """Redraw both plots, the sentence and the messages (on the session's event loop: from another thread,
        the drawing is scheduled there)."""
        self._redraw()

    @property
    def frames(self) -> dict:
        """The frames last drawn: ``histogram`` and ``estimate``."""
        return {"histogram": self._hist.frame, "estimate": self._estimate.frame}

    def _draw(self) -> None:
        m = self.model
        # one message, and one walk of the document's model graph (freeze): a pane's first update after the page
        # is shown gains the template's stylesheets, and each such change makes Bokeh walk the whole document
        with self._lock, hold(freeze=True):
            self._draw_plots()
            self._sentence.object = md(m.sentence()) if m.table is not None else ""
            self._alert.object = md(m.error) if m.error else ""
            self._alert.visible = bool(m.error)
            self._info.object = self._info_text()
            self._sync_delta()
        push(self._hist.pane, self._estimate.pane)

    def _draw_plots(self) -> None:
        h = histogram_frame(self.model)
        self._hist.update(h["edges"], {k: h[k] for k in ("observed", "imputed", "hidden")}, title=h["title"],
                          xlabel=h["xlabel"])
        self._estimate.update(estimate_frame(self.model))

    def _info_text(self) -> str:
        m, data = self.model, self.data_model.data
        if data is None or m.table is None:
            return ""
        n_missing = data.missing.sum(axis=0)
        parts = ", ".join(f"{md(c)} {int(k)}" for c, k in zip(m.columns, n_missing) if k)
        return (f"**{md(data.name or 'data')}**: {data.values.shape[0]} rows; missing values per column: {parts}. "
                f"M = {m.table.n_imputations} imputations from a {m.n_components}-component Gaussian mixture"
                f"{' (bootstrap)' if m.bootstrap else ''}."
                + (f" ({md(m.selection_note)}.)" if m.selection and m.selection_note else ""))

    # ------------------------------------------------------------------ callbacks
    def _on_table(self, *events) -> None:
        self.refresh()

    def _on_delta(self, *events) -> None:
        self.refresh()

    def _on_grid(self, *events) -> None:
        m = self.model
        if any(e.name == "n_deltas" for e in events) and m.delta_index >= m.n_deltas:
            m.delta_index = m.n_deltas // 2
        self._sync_widgets()

    def _on_draw_settings(self, *events) -> None:
        self.schedule_draw()

    def _on_data(self, *events) -> None:
        self._sync_widgets()
        self.schedule_draw()

    def _on_column_widget(self, event) -> None:
        if self._syncing:
            return
        self.model.param.update(column=self._column.value or "", mean_column=self._mean_column.value or "",
                                target=self._target.value or "", predictor=self._predictor.value or "")

    def _on_delta_widget(self, event) -> None:
        if self._syncing:
            return
        self.model.delta_index = int(event.new)

    def _sync_widgets(self) -> None:
        """Column pickers and the delta slider follow the data and the model."""
        m = self.model
        cols, incomplete = list(m.columns), list(m.incomplete_columns)
        self._syncing = True
        try:
            for w, options, value in ((self._column, incomplete, m.column), (self._mean_column, cols, m.mean_column),
                                      (self._target, cols, m.target), (self._predictor, cols, m.predictor)):
                w.param.update(options=options if value in options or not value else options + [value], value=value)
        finally:
            self._syncing = False
        self._sync_delta()

    def _sync_delta(self) -> None:
        m = self.model
        self._mean_column.visible = m.estimate == "mean"
        self._ols_box.visible = m.estimate == "ols"
        if not m.columns or m.column not in m.columns:
            return
        try:
            grid = m.deltas()
        except (ValueError, IndexError):
            return
        options = {m.delta_label(d): i for i, d in enumerate(grid)}
        index = min(m.delta_index, len(grid) - 1)
        self._syncing = True
        try:
            if list(self._delta.options.values() if isinstance(self._delta.options, dict) else []) != list(
                    options.values()) or list(self._delta.options) != list(options):
                self._delta.param.update(options=options, value=index)
            elif self._delta.value != index:
                self._delta.value = index
        finally:
            self._syncing = False
