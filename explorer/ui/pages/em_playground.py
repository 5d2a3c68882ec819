"""The EM playground: exact EM, a naive refit and mean imputation side by side on 2-D data.

ghahramani1994 (Ghahramani & Jordan) Fig. 1 and digest section 6, derived view 4. One
:class:`~explorer.ui.state.data_model.DataModel` feeds three
:class:`~explorer.ui.state.em_model.EMModel` runs that differ only in ``variant`` ("em",
"naive", "mean_impute"); one :class:`~explorer.ui.components.player.StepPlayer` drives all three.

Every panel is a Bokeh figure made once per session (:class:`~explorer.ui.plots.figures.ScatterPanel`:
points, missing-value marks, 1- and 2-sd ellipses of every component as rows of one source, the true
mixture); a frame only replaces its sources' data, and the traces (:class:`~explorer.ui.plots.figures.TracePlot`)
stream the new iterations. The frame data are computed by pure functions
(:func:`~explorer.ui.plots.mixture2d.ellipse_paths`, :func:`~explorer.ui.plots.mixture2d.panel_frame`)
that the tests call. Steps run on the session's worker thread; the page draws on the event loop.
"""

from __future__ import annotations

import threading

import numpy as np
import panel as pn
import param

from explorer import datasets as ds
from explorer.core.mixtures import em_gmm
from explorer.ui.components.data_controls import DataControls
from explorer.ui.components.player import StepPlayer
from explorer.ui.page import ModelPage, weak_callback
from explorer.ui.plots.figures import ScatterPanel, TracePlot
from explorer.ui.plots.mixture2d import axis_ranges, empty_frame, panel_frame
from explorer.ui.session import Redraw, hold, push
from explorer.ui.state.data_model import DATASETS_2D, MECHANISMS_2D, UPLOADED, DataModel
from explorer.ui.state.em_model import EMModel
from explorer.ui.text import md

__all__ = ["EMPlayground", "VARIANTS"]

#: (variant, title) of the three panels, left to right.
VARIANTS = (("em", "Exact EM"), ("naive", "Naive refit"), ("mean_impute", "Mean imputation + EM"))
MODES = {"axis ticks": "rug", "imputed value ± 2 sd": "conditional"}
_EM_SETTINGS = ("n_components", "covariance_type", "init", "seed")
_DATA_SETTINGS = ("dataset", "n_samples", "data_seed", "mechanism", "rate", "mechanism_params", "mask_seed", "columns")

EXPLANATION = """
### What am I looking at?
The same incomplete 2-D data, fitted three ways by a mixture of *K* Gaussians (same settings and seed):

* **Exact EM** treats a missing coordinate as unknown: the E-step uses its conditional mean
  *and* conditional variance given the observed coordinate. It maximises the likelihood of the
  observed values, so its **log-likelihood never decreases**.
* **Naive refit** fills each missing value with its conditional mean and refits as if it had been
  observed. Dropping the conditional variance shrinks the ellipses along the missing axis; this
  is not EM for the observed-data likelihood, and its **curve can go down**.
* **Mean imputation + EM** fills every gap once with the column mean and runs ordinary EM:
  filled points pile up on a line, which bends the means and correlations.

**Marks.** Dots: fully observed points, coloured by their most responsible component, opacity =
that responsibility. Ticks on the bottom (left) axis: points whose *y* (*x*) is missing, at their
observed coordinate; switch to *imputed value ± 2 sd* to see each variant's fill (circle) and, for
the two EM variants, the ±2 sd range of the conditional distribution. Ellipses: 1 and 2 sd of each
component; dashed grey: the true mixture (synthetic data). Black square: mean of the *observed*
values of each coordinate; hollow square: the model's mean Σ π<sub>k</sub> μ<sub>k</sub>.

**Traces.** The log-likelihood of the observed values under each variant's current parameters, and
the RMSE of each variant's single imputation of the hidden values (known for the built-in data).
A curve ends when its run converges: mean imputation + EM often stops after a step or two, because
its filled data never change.

**Try** Fig. 1 of Ghahramani & Jordan (the start screen): *Bivariate Gaussian*, `mar_threshold`
(y hidden where x is large), K = 1. The observed *y* are the small ones, so their mean is far too
low; exact EM recovers μ<sub>y</sub> (it can even exceed every observed *y*). Then *Three blobs*,
`mcar`, K = 3: the naive and mean-imputation curves go down. Click a plot to add points.
"""


class EMPlayground(ModelPage):
    """Three EM variants on the same 2-D incomplete data, stepped together.

    Parameters
    ----------
    data_model : DataModel, optional
        Default: the Fig. 1 setting (bivariate Gaussian, y hidden where x is large).
    n_components, covariance_type, init, seed :
        Initial settings of the three runs (then changed with the widgets).

    Attributes
    ----------
    models : list of EMModel
        Exact EM, naive refit, mean imputation (in this order).
    player : StepPlayer
    """

    _LEAD, _DATA_URL, _LEAD_URL = "em", _DATA_SETTINGS, _EM_SETTINGS

    data_model = param.ClassSelector(class_=DataModel, doc="The data shared by the three panels")
    mode = param.Selector(default="rug", objects=list(MODES.values()), doc="How incomplete points are drawn")

    def __init__(self, n_components: int = 1, covariance_type: str = "full", init: str = "kmeans",
                 seed: int = 0, **params):
        if params.get("data_model") is None:
            params["data_model"] = DataModel(dataset="ghahramani_bivariate", n_samples=200,
                                             mechanism="mar_threshold", rate=0.35)
        super().__init__(**params)
        # a page on 2-D data: data with more columns (an upload shared by the session) give two of them
        self.data_model.pair_only = True
        settings = dict(n_components=n_components, covariance_type=covariance_type, init=init, seed=seed)
        self.models = [EMModel(data_model=self.data_model, variant=v, name=title, **settings)
                       for v, title in VARIANTS]
        self.em = self.models[0]
        self._lock = threading.RLock()
        self._redraw = Redraw(self._draw)  # Bokeh models are changed on the session's event loop only
        self._clicked: np.ndarray | None = None  # points placed by clicking (None: not drawing)
        self._last_limits = ((0.0, 1.0), (0.0, 1.0))
        self._sent_run = [-1] * len(self.models)  # run_id of what each trace shows
        self.player = StepPlayer(models=self.models, labels=["EM", "naive", "mean imp."], steps_per_tick=3)
        self._build()
        self.em.param.watch(self._propagate, list(_EM_SETTINGS))
        for m in self.models:
            m.param.watch(self._on_model_change, ["run_id", "error"])
        self.data_model.param.watch(self._on_data_change, ["revision", "error", "dataset"])
        self.player.param.watch(self._on_frame, "frame")
        self.refresh()

    # ------------------------------------------------------------------ layout
    def _build(self):
        em = self.em
        self._titles = [pn.pane.Markdown(f"**{t}**", margin=(0, 10)) for _, t in VARIANTS]
        # Bokeh figures made once: a frame only replaces their sources' data (explorer.ui.plots.figures)
        tap = weak_callback(self.add_point)
        self._panels = [ScatterPanel(height=360, on_tap=tap) for _ in VARIANTS]
        panels = [pn.Column(t, sp.pane, sizing_mode="stretch_width") for t, sp in zip(self._titles, self._panels)]
        series = [(t, c) for (_, t), c in zip(VARIANTS, ("#1f77b4", "#d62728", "#7f7f7f"))]
        self._ll = TracePlot("Observed-data log-likelihood", "log-likelihood", series)
        self._rmse = TracePlot("Imputation RMSE (needs the true values)", "RMSE of the hidden values", series)
        ll, rmse = self._ll.pane, self._rmse.pane
        self._data_controls = DataControls(model=self.data_model, datasets=DATASETS_2D + [UPLOADED],
                                           mechanisms=MECHANISMS_2D, show_error=False)
        self._clear = pn.widgets.Button(label="Clear points", description="Start an empty canvas, then click to add")
        self._clear.on_click(self._on_clear)
        self._mode = pn.widgets.RadioButtonGroup.from_param(self.param.mode, options=MODES, variant="outline")
        # the two columns drawn, for data with more (shown only then)
        self._x_col = pn.widgets.Select(label="x column", width=140)
        self._y_col = pn.widgets.Select(label="y column", width=140)
        self._pair_box = pn.Row(self._x_col, self._y_col, sizing_mode="stretch_width")
        self._sync_pair()
        for w in (self._x_col, self._y_col):
            w.param.watch(self._on_pair_widget, "value")
        sidebar = pn.Column(
            "### Run", self.player,
            "### Model",
            pn.widgets.IntSlider.from_param(em.param.n_components, label="Components K", start=1, end=10),
            pn.pane.Markdown("Covariance", margin=(0, 10)),
            pn.widgets.RadioButtonGroup.from_param(em.param.covariance_type, variant="outline"),
            pn.widgets.Select.from_param(em.param.init, label="Initialisation"),
            pn.widgets.IntInput.from_param(em.param.seed, label="Seed (initialisation)"),
            "### Incomplete points", self._mode,
            "### Data", self._data_controls, self._pair_box,
            pn.pane.Markdown("Click on a plot to add a point.", margin=(0, 10)), self._clear,
            sizing_mode="stretch_width", min_width=300,
        )
        self._arrange(sidebar, panels, [ll, rmse], EXPLANATION)

    # ------------------------------------------------------------------ callbacks
    def _propagate(self, *events):
        values = {e.name: e.new for e in events}
        for m in self.models[1:]:
            m.param.update(**values)

    def _on_model_change(self, *events):
        self.refresh()

    def _on_data_change(self, *events):
        if any(e.name == "dataset" for e in events) and self.data_model.dataset != UPLOADED:
            self._clicked = None
        self._sync_pair()
        self.refresh()

    def _sync_pair(self) -> None:
        """Column pickers follow the data: shown for data with more than two columns."""
        dm = self.data_model
        cols = list(dm.all_columns)
        many = len(cols) > 2
        self._pair_box.visible = many
        if not many:
            return
        pair = list(dm.columns) if len(dm.columns) == 2 else cols[:2]
        self._syncing_pair = True
        try:
            self._x_col.param.update(options=cols, value=pair[0])
            self._y_col.param.update(options=cols, value=pair[1])
        finally:
            self._syncing_pair = False

    def _on_pair_widget(self, event) -> None:
        if getattr(self, "_syncing_pair", False):
            return
        x, y = self._x_col.value, self._y_col.value
        if x == y:  # the same column twice: swap the pair instead of drawing x = y
            old_x, old_y = list(self.data_model.columns)
            x, y = (x, old_x) if event.obj is self._x_col else (old_y, y)
            if x == y:
                return
        self.data_model.columns = [x, y]

    def _on_frame(self, event):
        self.refresh()

    @param.depends("mode", watch=True)
    def _on_mode(self):
        self.refresh()

    def _on_clear(self, event=None):
        self.clear_points()

    # ------------------------------------------------------------------ actions
    def add_point(self, x: float, y: float) -> None:
        """Append a complete point (to the clicked points, or to the current data set's values)."""
        if self._clicked is not None:
            base = self._clicked
        else:
            complete = self.data_model.complete
            base = np.empty((0, 2)) if complete is None or complete.n_features != 2 else complete.values
        self._clicked = np.vstack([base, [[x, y]]])
        self.player.pause()
        self.data_model.set_points(self._clicked)

    def clear_points(self) -> None:
        """Empty canvas: nothing is drawn until points are clicked."""
        self.player.pause()
        self._clicked = np.empty((0, 2))
        self.refresh()

    # ------------------------------------------------------------------ drawing
    def _truth_params(self):
        dm = self.data_model
        if dm.dataset == UPLOADED or dm.standardize:
            return None
        try:
            return ds.dataset_parameters(dm.dataset)
        except ValueError:
            return None

    def _pending(self) -> bool:
        """True while clicked points are not (yet) the model's data (empty canvas, or refused)."""
        c, d = self._clicked, self.data_model.data
        if c is None:
            return False
        if len(c) == 0 or self.data_model.dataset != UPLOADED or d is None or d.n_samples != len(c):
            return True
        # the mechanism leaves nothing to fit yet: a column with no observed value, or < 2 rows with data
        return bool(d.missing.all(axis=0).any() or (~d.missing.all(axis=1)).sum() < 2)

    def _limits(self, pending: bool):
        d = self.data_model.data
        if self._clicked is not None:  # drawing: grow the canvas to the clicks, never shrink it
            (x0, x1), (y0, y1) = self._last_limits
            if len(self._clicked):
                (a0, a1), (b0, b1) = axis_ranges(self._clicked)
                x0, x1, y0, y1 = min(x0, a0), max(x1, a1), min(y0, b0), max(y1, b1)
            limits = (x0, x1), (y0, y1)
        elif d is not None and d.n_features == 2:
            limits = axis_ranges(d.truth if d.truth is not None else d.values)
        else:
            limits = self._last_limits
        self._last_limits = limits
        return limits

    def refresh(self) -> None:
        """Redraw the three panels, the traces, the read-outs and the error messages (on the session's event
        loop: from another thread, the drawing is scheduled there)."""
        self._redraw()

    def _draw(self) -> None:
        with self._lock, hold():
            pending = self._pending()
            xlim, ylim = self._limits(pending)
            truth_params = None if pending else self._truth_params()
            for i, m in enumerate(self.models):
                state, data = m.state, m.em_data
                if pending or state is None or data is None or data.n_features != 2:
                    frame = empty_frame(xlim, ylim, points=self._clicked if pending else None)
                else:
                    frame = panel_frame(state, data, m.covariance_type, m.variant, self.mode, xlim, ylim,
                                        truth_params)
                self._panels[i].update(frame)
                self._send_traces(i, m)
                ll = "-" if state is None else f"{state.log_likelihood:.1f}"
                self._titles[i].object = f"**{VARIANTS[i][1]}** · iteration {m.iteration} · log-lik. {ll}"
            self._update_messages(pending)
        push(*(p.pane for p in self._panels), self._ll.pane, self._rmse.pane)

    def _send_traces(self, i: int, m: EMModel) -> None:
        """Stream the iterations of run ``m`` that trace ``i`` does not show yet (all of them after a reset)."""
        if self._sent_run[i] != m.run_id:
            self._ll.clear(i)
            self._rmse.clear(i)
            self._sent_run[i] = m.run_id
        last = self._ll.last_iteration(i)
        data, truth = m.em_data, self.data_model.data.truth if self.data_model.data is not None else None
        new = [s for s in m.states if s.iteration > last]
        if new and data is not None:
            its = np.array([s.iteration for s in new])
            self._ll.append(i, its, [s.log_likelihood for s in new])
            if truth is not None and truth.shape == data.X.shape and data.missing.any():
                cfg = m.config()
                err = [np.sqrt(np.mean((em_gmm.impute(s, data, cfg) - truth)[data.missing] ** 2)) for s in new]
                self._rmse.append(i, its, err)

    def _update_messages(self, pending: bool) -> None:
        dm = self.data_model
        errors = []  # the data error is the banner's (explorer/ui/components/banner.py)
        errors += [f"{VARIANTS[i][1]}: {md(m.error)}" for i, m in enumerate(self.models) if m.error]
        if dm.data is not None and dm.data.n_features != 2:
            errors.append(f"This page needs 2-D data; {md(repr(dm.data.name))} has {dm.data.n_features} columns.")
        self._alert.object = "\n\n".join(errors)
        self._alert.visible = bool(errors)
        if pending:
            info = (f"Drawing: {len(self._clicked)} point(s) clicked. Click on a plot to add more; the fits "
                    "start as soon as the points and the mechanism leave something to fit.")
        elif dm.data is not None and dm.mask is not None:
            miss = dm.data.missing
            both = int(miss.all(axis=1).sum())
            info = (f"{dm.data.n_samples} points, {int(miss.any(axis=1).sum())} with a missing coordinate"
                    + (f" ({both} with both missing: drawn only as imputed values)" if both else "")
                    + f". Mechanism: **{dm.mechanism}** ({dm.mask.kind}).")
        else:
            info = ""
        self._info.object = info
