"""The variational-mixture page: a truncated Dirichlet-process mixture fitted to incomplete data.

garriga2017 (Garriga Alonso, the POIGMM) sections 1.4-1.6. One
:class:`~explorer.ui.state.data_model.DataModel` feeds two :class:`~explorer.ui.state.vb_model.VBModel`
runs with the same settings and seed that differ only in the Normal-Wishart update: model A uses
the ``update`` chosen in the sidebar, model B the other one ("principled" expected sufficient
statistics vs the thesis's fill-with-previous-means), stepped in lock-step by one
:class:`~explorer.ui.components.player.StepPlayer`. Both panels show the data on a pair of columns
(points coloured by their most responsible component; rows with a missing coordinate drawn at
their plug-in imputation as hollow triangles) and the 1/2-sd ellipses of the components whose
expected weight :math:`E_q[\\pi_k]` is above a threshold. Below: the stick weights of both runs,
the ELBO / plug-in log-likelihood traces and the effective number of components.

Every plot is a Bokeh figure made once per session (:class:`~explorer.ui.plots.figures.ScatterPanel`,
:class:`~explorer.ui.plots.vb_frames.StickWeightsPlot`, :class:`~explorer.ui.plots.figures.TracePlot`):
the components shown, however many, are rows of one source, a frame only replaces the sources' data
and sets scalar properties, and the traces stream the new iterations. The frames are computed by the
pure functions of :mod:`explorer.ui.plots.vb_frames`. Steps run on the session's worker thread
(through the player); the page draws on the session's event loop.
"""

from __future__ import annotations

import threading

import numpy as np
import panel as pn
import param

from explorer.core.mixtures import vb_dpgmm
from explorer.ui.components.data_controls import DataControls
from explorer.ui.components.player import StepPlayer
from explorer.ui.page import ModelPage
from explorer.ui.plots.figures import ScatterPanel, TracePlot
from explorer.ui.plots.vb_frames import (
    UPDATE_COLORS,
    StickWeightsPlot,
    axis_limits,
    empty_mixture_frame,
    mixture_frame,
    plugin_imputation,
    weights_frame,
)
from explorer.ui.session import Redraw, hold, push
from explorer.ui.state.data_model import DATASETS_2D, MECHANISMS_2D, UPLOADED, DataModel
from explorer.ui.state.vb_model import COVARIANCE_PRIORS, MEAN_PRIORS, VBModel
from explorer.ui.text import md

__all__ = ["DATASETS", "VariationalPlayground", "other_update"]

DATASETS = DATASETS_2D + ["iris", "wine", "boston", UPLOADED]  # uploaded: the session's own data
#: Settings shared by both runs (everything but ``update``).
SHARED = ("n_components", "alpha", "mean_prior", "beta0", "nu0", "covariance_prior", "responsibilities",
          "init", "reg_covar", "tol", "max_iter", "seed")
_DATA_SETTINGS = ("dataset", "n_samples", "data_seed", "mechanism", "rate", "mechanism_params", "mask_seed",
                  "standardize")
_URL_SETTINGS = ("n_components", "alpha", "beta0", "nu0", "mean_prior", "covariance_prior", "update",
                 "responsibilities", "seed")

EXPLANATION = """
### What am I looking at?
A **Dirichlet-process mixture** fitted by variational inference to data with missing values (the
POIGMM of Garriga Alonso's thesis). Up to *K* components (the truncation) are available; the
stick-breaking prior with concentration α lets the fit switch off the ones it does not need, so
the number of **effective components** (expected weight E[π<sub>k</sub>] above the dashed line) is
learned. Each round updates the responsibilities τ, the stick parameters γ and the Normal-Wishart
parameters η in turn.

**Two updates of η side by side** (same data, settings and seed):
* **principled**: missing coordinates enter through their conditional mean *and* covariance given
  the observed ones (expected sufficient statistics); the ELBO is a proper bound.
* **thesis**: missing coordinates are filled with the component's previous mean, with no
  covariance correction (the thesis's eq. 3.20-3.23). The covariances shrink along missing
  directions, and since the completions are point masses the **ELBO is undefined** for this run:
  its curve is the plug-in observed-data log-likelihood only.

**Marks.** Dots: rows observed on both axes, coloured by their most responsible component
(opacity = that responsibility). Hollow triangles: rows with a missing coordinate on either axis,
drawn at the model's plug-in imputation. Ellipses: 1 and 2 sd of the components above the weight
threshold, thicker and darker for heavier components; crosses: their means. Higher-dimensional
data sets are shown on the pair of columns chosen in the sidebar.
"""


def other_update(update: str) -> str:
    """The Normal-Wishart update the comparison run uses."""
    return "thesis" if update == "principled" else "principled"


class _RewindSlider(pn.widgets.IntSlider):
    """An IntSlider whose release value (``value_throttled``) follows the value the server sets.

    The browser reports ``value_throttled`` only when it differs from its own last value, and Panel
    never sends it to the browser: after the page moved the slider to the latest iteration,
    releasing it on the value of the previous release (or on 0, its value at creation) was not
    reported, so "rewind to 0" did nothing. Here every server-side move of ``value`` also sets
    ``value_throttled`` on the Bokeh model (and so in the browser), so every release on another
    value is reported.

    Not in Jupyter (``comm``): there the browser sends every ``value_throttled`` set here back as a
    release, a round trip later, when Play has moved on: the runs were rewound and paused after two
    iterations.
    """

    def _update_model(self, events, msg, root, model, doc, comm):
        super()._update_model(events, msg, root, model, doc, comm)
        value = msg.get("value")  # absent when it was the browser's own value coming back
        if value is None or comm is not None:
            return
        ref = root.ref["id"]
        self._changing.setdefault(ref, []).append("value_throttled")  # not an event from the browser
        try:
            model.set_from_json("value_throttled", value)
        finally:
            changing = self._changing.get(ref, [])
            if "value_throttled" in changing:
                changing.remove("value_throttled")
            if not changing:
                self._changing.pop(ref, None)


class VariationalPlayground(ModelPage):
    """Two variational DP-mixture runs (principled vs thesis update) on the same incomplete data.

    Parameters
    ----------
    data_model : DataModel, optional
        Default: three blobs, MCAR 30 %.
    threshold : float
        Components with E[pi_k] at or below it are not drawn.
    x_feature, y_feature : str
        Columns on the axes (the first two by default; any pair for higher-D data).
    **model_settings
        Initial VBModel settings shared by both runs (``update`` is model A's).

    Attributes
    ----------
    vb, vb_other : VBModel
        Model A (sidebar ``update``) and model B (the other update).
    player : StepPlayer
    """

    _LEAD, _DATA_URL, _LEAD_URL = "vb", _DATA_SETTINGS, _URL_SETTINGS

    data_model = param.ClassSelector(class_=DataModel, doc="The data shared by the two runs")
    threshold = param.Number(default=vb_dpgmm.WEIGHT_THRESHOLD, bounds=(0.0, 0.5), doc="Weight threshold")
    x_feature = param.Selector(default=None, objects=[], allow_None=True, doc="Column on the x axis")
    y_feature = param.Selector(default=None, objects=[], allow_None=True, doc="Column on the y axis")

    def __init__(self, threshold: float = vb_dpgmm.WEIGHT_THRESHOLD, **params):
        model_settings = {k: params.pop(k) for k in list(params) if k in VBModel.param and k != "name"
                          and k != "data_model"}
        if params.get("data_model") is None:
            params["data_model"] = DataModel(dataset="three_blobs", mechanism="mcar", rate=0.3)
        super().__init__(threshold=threshold, **params)
        settings = {"n_components": 10, "tol": 1e-5, "max_iter": 300} | model_settings
        update = settings.pop("update", "principled")
        self.vb = VBModel(data_model=self.data_model, update=update, name="A", **settings)
        self.vb_other = VBModel(data_model=self.data_model, update=other_update(update), name="B", **settings)
        self.models = [self.vb, self.vb_other]
        self._lock = threading.RLock()
        self._redraw = Redraw(self._draw)  # Bokeh models are changed on the session's event loop only
        self._traced_run: dict = {}  # update -> (model index, run_id) its traces show
        self._neff_threshold: dict = {}  # update -> the threshold its effective-components trace was counted with
        self._imputed: dict = {}  # panel -> (state, data, pair, imputation) of its last frame
        self._sync_state = threading.local()  # see _syncing
        self._last_limits = ((0.0, 1.0), (0.0, 1.0))  # axis limits of the last frames drawn
        self.player = StepPlayer(models=self.models, labels=["A", "B"], steps_per_tick=1)
        self._update_columns()
        self._build()
        self.vb.param.watch(self._propagate, list(SHARED) + ["update"])
        for m in self.models:
            m.param.watch(self._on_model_change, ["run_id", "error"])
        self.data_model.param.watch(self._on_data_change, ["revision", "error"])
        self.player.param.watch(self._on_frame, "frame")
        self.param.watch(self._on_view_setting, ["x_feature", "y_feature", "threshold"])
        self.refresh()

    # ------------------------------------------------------------------ layout (built once)
    def _build(self):
        vb = self.vb
        # the titles change every frame: HTML panes (a Markdown pane also parses its text, at every frame)
        self._titles = [pn.pane.HTML("", margin=(0, 10), sizing_mode="stretch_width") for _ in self.models]
        # Bokeh figures made once: a frame only replaces their sources' data (explorer.ui.plots.figures)
        self._panels = [ScatterPanel(height=380, marks=False, truth=False, ellipses="axes") for _ in self.models]
        panels = [pn.Column(t, sp.pane, sizing_mode="stretch_width") for t, sp in zip(self._titles, self._panels)]
        self._weights = StickWeightsPlot(height=280)
        # legends above the frames: inside, they covered the start of the ELBO curve
        blue, red = UPDATE_COLORS["principled"], UPDATE_COLORS["thesis"]
        dashed = {"line_width": 1.5, "line_dash": "dashed"}
        self._objective = TracePlot(
            "ELBO and plug-in log-likelihood", "nats",
            [("ELBO (principled)", blue, {"line_width": 2.5}), ("plug-in log-lik. (principled)", blue, dashed),
             ("plug-in log-lik. (thesis)", red, dashed)], height=280, legend_columns=2)
        self._neff = TracePlot("Effective components", "E[π_k] > threshold",
                               [(u, c) for u, c in UPDATE_COLORS.items()], height=280, steps=True)
        self._data_controls = DataControls(model=self.data_model, datasets=DATASETS, mechanisms=MECHANISMS_2D,
                                           show_error=False)
        self._rewind = _RewindSlider(label="Rewind to iteration", start=0, end=1, value=0,
                                     sizing_mode="stretch_width")
        self._rewind.param.watch(self._on_rewind, "value_throttled")
        # folded at first: its widgets are made when it is first opened (most sessions never open it)
        self._priors = pn.Card(title="Prior and initialisation", collapsed=True, sizing_mode="stretch_width")
        self._priors.param.watch(self._on_priors_opened, "collapsed")
        self._x = pn.widgets.Select.from_param(self.param.x_feature, label="x axis")
        self._y = pn.widgets.Select.from_param(self.param.y_feature, label="y axis")
        sidebar = pn.Column(
            "### Run", self.player, self._rewind,
            "### Variational DP mixture",
            pn.widgets.IntSlider.from_param(vb.param.n_components, label="Truncation K", start=1, end=20),
            pn.widgets.FloatInput.from_param(vb.param.alpha, label="Concentration α (0 = 1/K)", step=0.1, start=0),
            pn.widgets.Select.from_param(vb.param["update"], label="Update of model A (B uses the other)"),
            pn.widgets.Select.from_param(vb.param.responsibilities, label="Responsibilities"),
            self._priors,
            pn.widgets.IntInput.from_param(vb.param.seed, label="Seed (initialisation)"),
            pn.widgets.FloatSlider.from_param(self.param.threshold, label="Weight threshold", start=0.0, end=0.2,
                                              step=0.005),
            "### Columns shown", pn.Row(self._x, self._y, sizing_mode="stretch_width"),
            "### Data", self._data_controls,
            sizing_mode="stretch_width", min_width=300,
        )
        self._arrange(sidebar, panels, [self._weights.pane, self._objective.pane, self._neff.pane], EXPLANATION)

    def _on_priors_opened(self, event) -> None:
        """The first time the "Prior and initialisation" card opens: make its widgets."""
        if event.new or self._priors.objects:
            return
        vb = self.vb
        self._priors.objects = [
            pn.widgets.Select.from_param(vb.param.mean_prior, options=list(MEAN_PRIORS), label="Mean prior m0"),
            pn.widgets.FloatInput.from_param(vb.param.beta0, label="β0 (mean precision)", step=0.1),
            pn.widgets.FloatInput.from_param(vb.param.nu0, label="ν0 (0 = D)", step=1.0, start=0),
            pn.widgets.Select.from_param(vb.param.covariance_prior, options=list(COVARIANCE_PRIORS),
                                         label="Wishart scale W0"),
            pn.widgets.Select.from_param(vb.param.init, label="Initialisation"),
        ]

    # ------------------------------------------------------------------ callbacks
    def _propagate(self, *events):
        values = {e.name: e.new for e in events if e.name != "update"}
        for e in events:
            if e.name == "update":
                values["update"] = other_update(e.new)
        self.vb_other.param.update(**values)

    def _on_model_change(self, *events):
        self.refresh()

    def _on_data_change(self, *events):
        self._update_columns()
        self.refresh()

    def _on_frame(self, event):
        self.refresh()

    def _on_view_setting(self, *events):
        if self._syncing:
            return
        for e in events:  # the same column on both axes shows nothing: swap the pair instead
            other = {"x_feature": "y_feature", "y_feature": "x_feature"}.get(e.name)
            if other and e.new is not None and getattr(self, other) == e.new and e.old is not None:
                self._syncing = True
                try:
                    setattr(self, other, e.old)
                finally:
                    self._syncing = False
        self.refresh()

    @property
    def _syncing(self) -> bool:
        """True while this thread updates widgets itself (their watchers must not act on it).

        Per thread: the player's frames (event loop) and widget events (Panel's thread pool) both refresh, and a
        shared flag cleared by one while the other was setting the rewind slider let ``_on_rewind`` pause the run.
        """
        return getattr(self._sync_state, "on", False)

    @_syncing.setter
    def _syncing(self, value: bool) -> None:
        self._sync_state.on = bool(value)

    def _on_rewind(self, event):
        if not self._syncing and event.new is not None:
            self.rewind(int(event.new))

    def rewind(self, iteration: int) -> None:
        """Pause and take both runs back to their last kept state at or before ``iteration``."""
        self.player.pause()
        for m in self.models:
            kept = [s.iteration for s in m.states if s.iteration <= iteration]
            if kept and kept[-1] != m.iteration:
                m.rewind(kept[-1])
        self.refresh()

    def _update_columns(self):
        """Offer the data's columns on the axes (keeping the chosen pair when it still exists)."""
        data = self.data_model.data
        cols = [] if data is None else list(data.columns)
        if not cols or list(self.param.x_feature.objects) == cols:
            return
        x = self.x_feature if self.x_feature in cols else cols[0]
        y = self.y_feature if self.y_feature in cols and self.y_feature != x else cols[min(1, len(cols) - 1)]
        self._syncing = True
        try:
            self.param.x_feature.objects = cols
            self.param.y_feature.objects = cols
            self.param.update(x_feature=x, y_feature=y)
        finally:
            self._syncing = False

    # ------------------------------------------------------------------ drawing
    def _pair(self, data):
        cols = list(data.columns)
        i = cols.index(self.x_feature) if self.x_feature in cols else 0
        j = cols.index(self.y_feature) if self.y_feature in cols else min(1, len(cols) - 1)
        return i, j

    def refresh(self) -> None:
        """Redraw the two panels, the weights, the traces, the read-outs and the messages (on the session's event
        loop: from another thread, the drawing is scheduled there)."""
        self._redraw()

    def _draw(self) -> None:
        with self._lock, hold():
            data = self.data_model.data
            if data is not None:  # same ranges in both panels: those of the (true) data on the shown pair
                pair = self._pair(data)
                limits = axis_limits(data.truth if data.truth is not None else data.values, pair)
            else:
                limits = self._last_limits
            # every frame carries the limits (also an empty one: no jump to 0..1); the panels move their axes
            # only when they change, so a zoom survives the steps of the same data
            self._last_limits = xlim, ylim = limits
            for idx, m in enumerate(self.models):
                # a reset on another thread may land between these reads: check that the pair fits together
                state, em_data = m.state, m.em_data
                if (state is None or em_data is None or data is None or em_data.X.shape != data.values.shape
                        or state.resp.shape[0] != em_data.X.shape[0] or state.means.shape[1] != em_data.X.shape[1]):
                    frame = empty_mixture_frame(xlim, ylim)
                else:
                    imputed = self._imputation(idx, state, em_data, pair)
                    frame = mixture_frame(state, em_data.X, em_data.missing, imputed, pair, xlim, ylim,
                                          self.threshold)
                if data is not None:
                    frame["xlabel"], frame["ylabel"] = data.columns[pair[0]], data.columns[pair[1]]
                self._panels[idx].update(frame)
                self._send_traces(idx, m)
                self._titles[idx].object = self._title(idx, m)
            a, b = self.vb, self.vb_other
            self._weights.update(weights_frame(None if a.state is None else a.state.weights,
                                               None if b.state is None else b.state.weights,
                                               f"{a.update} update", f"{b.update} update", self.threshold))
            self._sync_rewind()
            self._update_messages()
        push(*(p.pane for p in self._panels), self._weights.pane, self._objective.pane, self._neff.pane)

    def _imputation(self, idx: int, state, em_data, pair) -> np.ndarray:
        """The data with the rows drawn at their imputation (a coordinate of ``pair`` missing) imputed under
        ``state``; computed once per state and pair (a redraw for another threshold, or a rewind, reuses it)."""
        last = self._imputed.get(idx)
        if last is not None and last[0] is state and last[1] is em_data and last[2] == pair:
            return last[3]
        imputed = np.array(em_data.X, dtype=float)
        rows = np.flatnonzero(em_data.missing[:, list(pair)].any(axis=1))
        imputed[rows] = plugin_imputation(state, em_data.X, em_data.missing, rows)
        self._imputed[idx] = (state, em_data, pair, imputed)
        return imputed

    def _title(self, idx: int, m: VBModel) -> str:
        """The line above panel ``idx`` (HTML): the run's update in its colour, iteration, ELBO, log-likelihood."""
        color = UPDATE_COLORS[m.update]
        head = f"<b>{'AB'[idx]}: <span style='color:{color}'>{m.update} update</span></b> · iteration {m.iteration}"
        if m.state is None:
            return head
        elbo = "undefined" if m.elbo is None else f"{m.elbo:.1f}"
        neff = int(np.sum(np.asarray(m.state.weights) > self.threshold))
        reason = {"tol": " · converged", "max_iter": " · stopped at max_iter", "degenerate": " · degenerate"}
        return (f"{head} · ELBO {elbo} · log-lik. {m.log_likelihood:.1f} · {neff} effective"
                + reason.get(m.stop_reason, ""))

    def _trace_series(self, update: str) -> tuple[int, int | None, int]:
        """Series of ``update`` in the traces: (log-likelihood, ELBO or None, effective components)."""
        neff = list(UPDATE_COLORS).index(update)
        return (1, 0, neff) if update == "principled" else (2, None, neff)

    def _send_traces(self, idx: int, m: VBModel) -> None:
        """Stream the new iterations of model ``idx`` to the traces of its update (all of them after a new run, a
        rewind, or, for the effective components, a new threshold)."""
        ll, elbo, neff = self._trace_series(m.update)
        states = m.states
        run = (idx, m.run_id)
        rewound = bool(states) and states[-1].iteration < self._objective.last_iteration(ll)
        if self._traced_run.get(m.update) != run or rewound:
            for series in (ll, elbo):
                if series is not None:
                    self._objective.clear(series)
            self._neff.clear(neff)
            self._traced_run[m.update] = run
        if self._neff_threshold.get(m.update) != self.threshold:
            self._neff.clear(neff)
            self._neff_threshold[m.update] = self.threshold
        new = [s for s in states if s.iteration > self._objective.last_iteration(ll)]
        if new:
            its = [s.iteration for s in new]
            self._objective.append(ll, its, [s.log_likelihood for s in new])
            if elbo is not None:
                self._objective.append(elbo, its, [s.elbo for s in new])
        new = [s for s in states if s.iteration > self._neff.last_iteration(neff)]
        if new:
            self._neff.append(neff, [s.iteration for s in new],
                              [int(np.sum(np.asarray(s.weights) > self.threshold)) for s in new])

    def _sync_rewind(self) -> None:
        top = max(m.iteration for m in self.models)
        self._syncing = True
        try:
            # value_throttled too (the Bokeh side is _RewindSlider's): a release is reported only when it
            # differs from the last one, so a stale 0 made "rewind to 0" do nothing
            with param.edit_constant(self._rewind):
                self._rewind.param.update(end=max(1, top), value=top, value_throttled=top)
        finally:
            self._syncing = False

    def _update_messages(self) -> None:
        dm = self.data_model
        errors = []  # the data error is the banner's (explorer/ui/components/banner.py)
        errors += [f"Model {'AB'[i]} ({m.update} update): {md(m.error)}" for i, m in enumerate(self.models) if m.error]
        self._alert.object = "\n\n".join(errors)
        self._alert.visible = bool(errors)
        d = dm.data
        if d is None:
            self._info.object = ""
            return
        miss = d.missing
        pair = self._pair(d)
        self._info.object = (
            f"**{md(d.name)}**: {d.n_samples} rows x {d.n_features} columns, {int(miss.any(axis=1).sum())} with a missing "
            f"value; mechanism **{dm.mechanism}**. Shown: **{md(d.columns[pair[0]])}** vs **{md(d.columns[pair[1]])}**"
            + (" (pick another pair in the sidebar)." if d.n_features > 2 else "."))
