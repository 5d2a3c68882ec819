"""The EM playground: exact EM, a naive refit and mean imputation side by side on 2-D data.

seed001 (Ghahramani & Jordan) Fig. 1 and digest section 6, derived view 4. One
:class:`~explorer.models.data_model.DataModel` feeds three
:class:`~explorer.models.em_model.EMModel` runs that differ only in ``variant`` ("em",
"naive", "mean_impute"); one :class:`~explorer.views.player.StepPlayer` drives all three.

Every panel is one ``hv.DynamicMap`` fed by its own ``hv.streams.Pipe`` and returning an overlay
of fixed structure (points, missing-point marks, imputed points, 1- and 2-sd ellipses as ONE
``hv.Path`` each with a ``comp`` value dimension, true ellipses, means), so updates patch the
Bokeh sources. The per-iteration traces are ``hv.streams.Buffer`` streams. The frame data are
computed by pure functions (:func:`ellipse_paths`, :func:`panel_frame`) that the tests call.
"""

from __future__ import annotations

import functools
import operator
import threading

import holoviews as hv
import holoviews.plotting.bokeh  # noqa: F401  (registers the Bokeh plotting options used in .opts)
import numpy as np
import pandas as pd
import panel as pn
import param
from bokeh.palettes import Category10_10

from explorer import datasets as ds
from explorer.core import em_gmm
from explorer.core.conditional import ConditionalMixture
from explorer.models.data_model import NO_MECHANISM, UPLOADED, DataModel
from explorer.models.em_model import EMModel
from explorer.views._page import ModelPage, weak_callback
from explorer.views._text import md
from explorer.views.data_controls import DataControls
from explorer.views.player import StepPlayer

__all__ = ["EMPlayground", "ellipse_paths", "fit_axes", "panel_frame", "DATASETS_2D", "MECHANISMS_2D", "VARIANTS"]

DATASETS_2D = ["ghahramani_bivariate", "three_blobs", "anisotropic", "two_moons", "ring"]
MECHANISMS_2D = [NO_MECHANISM, "mcar", "mcar_rows", "mar_threshold", "mar_logistic", "mar_rows",
                 "nmar_lowest", "nmar_random", "self_masking"]
#: (variant, title) of the three panels, left to right.
VARIANTS = (("em", "Exact EM"), ("naive", "Naive refit"), ("mean_impute", "Mean imputation + EM"))
MODES = {"axis ticks": "rug", "imputed value ± 2 sd": "conditional"}
COLORS = {str(k + 1): Category10_10[k % 10] for k in range(30)} | {"mean": "black", "none": "#444444"}
_EM_SETTINGS = ("n_components", "covariance_type", "init", "seed")
_DATA_SETTINGS = ("dataset", "n_samples", "data_seed", "mechanism", "rate", "mechanism_params", "mask_seed", "columns")
_RUG = 0.05  # rug band: this fraction of the axis range, below / left of the data

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


# --------------------------------------------------------------------------- pure frame builders
def ellipse_paths(means, covariances, scale: float, n_points: int = 60) -> list[dict]:
    """Closed ellipse paths ``{x, y, comp}`` at ``scale`` standard deviations, one per component.

    Parameters
    ----------
    means : array of shape (K, 2)
    covariances : array of shape (K, 2, 2) (full) or (K, 2) (diagonal)
    scale : float
        Number of standard deviations (the path is the set ``(x-m)' S^-1 (x-m) = scale**2``).

    Returns
    -------
    list of K dicts with ``x``, ``y`` (arrays of shape (n_points,)) and ``comp`` ("1".."K").
    """
    means = np.asarray(means, dtype=float)
    covs = np.asarray(covariances, dtype=float)
    if covs.ndim == 2:
        covs = np.einsum("kd,de->kde", covs, np.eye(covs.shape[1]))
    t = np.linspace(0.0, 2.0 * np.pi, n_points)
    circle = np.stack([np.cos(t), np.sin(t)])  # (2, n)
    out = []
    for k, (m, S) in enumerate(zip(means, covs)):
        evals, evecs = np.linalg.eigh(0.5 * (S + S.T))
        pts = m[:, None] + scale * (evecs * np.sqrt(np.clip(evals, 0.0, None))) @ circle
        out.append({"x": pts[0], "y": pts[1], "comp": str(k + 1)})
    return out


def _ranges(values: np.ndarray) -> tuple[tuple, tuple]:
    """Axis ranges covering ``values`` (NaN ignored) with a margin and the rug band."""
    lo, hi = np.nanmin(values, axis=0), np.nanmax(values, axis=0)
    span = np.maximum(hi - lo, 1e-6)
    lo, hi = lo - (0.06 + _RUG) * span, hi + 0.06 * span
    return (float(lo[0]), float(hi[0])), (float(lo[1]), float(hi[1]))


_POINT_COLUMNS = ("x", "y", "comp", "kind", "fill", "line", "size", "marker", "lw")
_POINT_STYLE = {  # kind: (fill alpha (None = responsibility), line alpha (None = resp.), size, marker, line width)
    "data": (None, 0.0, 6.0, "circle", 1.0),
    "imputed": (0.0, None, 7.0, "circle", 1.5),
    "mean": (0.0, 1.0, 14.0, "x", 3.0),
    "observed_mean": (1.0, 1.0, 12.0, "square", 1.0),
    "model_mean": (0.0, 1.0, 16.0, "square", 2.5),
}


def _points(kind: str, x, y, comp, resp=None) -> dict:
    """Rows of the single point element for one kind of mark (style columns filled in)."""
    n = len(x)
    fill, line, size, marker, lw = _POINT_STYLE[kind]
    resp = np.ones(n) if resp is None else resp
    return {"x": np.asarray(x, dtype=float), "y": np.asarray(y, dtype=float),
            "comp": np.broadcast_to(np.asarray(comp, dtype=object), (n,)).astype(object),
            "kind": np.full(n, kind, dtype=object),
            "fill": resp if fill is None else np.full(n, fill), "line": resp if line is None else np.full(n, line),
            "size": np.full(n, size), "marker": np.full(n, marker, dtype=object), "lw": np.full(n, lw)}


def _concat(parts: list[dict]) -> dict:
    return {c: np.concatenate([p[c] for p in parts]) for c in _POINT_COLUMNS}


def empty_frame(xlim=(0.0, 1.0), ylim=(0.0, 1.0), points=None) -> dict:
    """A frame with nothing but (optionally) plain clicked ``points`` of shape (n, 2)."""
    pts = np.empty((0, 2)) if points is None or len(points) == 0 else np.asarray(points, dtype=float)
    seg = {"x0": np.empty(0), "y0": np.empty(0), "x1": np.empty(0), "y1": np.empty(0),
           "comp": np.empty(0, dtype=object), "alpha": np.empty(0)}
    return {"points": _points("data", pts[:, 0], pts[:, 1], "none"), "marks": seg, "ellipses": [],
            "truth": [], "xlim": xlim, "ylim": ylim}


def panel_frame(state, data: em_gmm.EMData, covariance_type: str, variant: str, mode: str,
                xlim, ylim, truth_params: dict | None = None) -> dict:
    """Everything one panel draws for one EM state, as plain arrays (no NaN in drawn columns).

    Parameters
    ----------
    state : EMState
    data : EMData with 2 features (NaN at missing entries)
    covariance_type : {"full", "diag"}
    variant : {"em", "naive", "mean_impute"}
    mode : {"rug", "conditional"}
        Incomplete points as ticks at their observed coordinate in the axis band, or as the
        variant's imputed point with a ±2 sd segment along each missing axis (zero length for
        ``mean_impute``, whose column-mean fill is then treated as observed).
    xlim, ylim : (float, float)
        Axis ranges (the rug band is their lowest ``_RUG`` fraction).
    truth_params : dict, optional
        ``means`` (K, 2) and ``covariances`` (K, 2, 2) of the true mixture (drawn dashed).

    Returns
    -------
    dict with ``points`` (columns x, y, comp, kind, fill, line, size, marker, lw; kinds "data",
    "imputed", "mean", "observed_mean", "model_mean"), ``marks`` (segments x0, y0, x1, y1, comp,
    alpha), ``ellipses`` (2K closed paths: 1 and 2 sd, with comp, lw, la), ``truth`` (paths),
    ``xlim`` and ``ylim``.
    """
    X, missing = data.X, data.missing
    resp = state.resp
    comp = np.array([str(k + 1) for k in resp.argmax(axis=1)], dtype=object)
    alpha = np.clip(resp.max(axis=1), 0.05, 1.0)
    full = ~missing.any(axis=1)
    frame = empty_frame(xlim, ylim)
    parts = [_points("data", X[full, 0], X[full, 1], comp[full], alpha[full])]
    if mode == "rug":
        one = missing.sum(axis=1) == 1
        miss_y, miss_x = one & missing[:, 1], one & missing[:, 0]
        ny, nx = int(miss_y.sum()), int(miss_x.sum())
        band_y = ylim[0] + np.array([0.1, 0.8]) * _RUG * (ylim[1] - ylim[0])
        band_x = xlim[0] + np.array([0.1, 0.8]) * _RUG * (xlim[1] - xlim[0])
        x0 = np.r_[X[miss_y, 0], np.full(nx, band_x[0])]
        x1 = np.r_[X[miss_y, 0], np.full(nx, band_x[1])]
        y0 = np.r_[np.full(ny, band_y[0]), X[miss_x, 1]]
        y1 = np.r_[np.full(ny, band_y[1]), X[miss_x, 1]]
        rows = np.r_[np.flatnonzero(miss_y), np.flatnonzero(miss_x)]
    else:
        if variant == "mean_impute":
            filled, sd = np.where(missing, data.col_mean, X), np.zeros_like(X)
        else:
            cond = ConditionalMixture.from_gaussian_mixture(
                X, state.weights, state.means, state.covariances, covariance_type=covariance_type,
                missing=missing)
            filled, sd = cond.mean(), np.sqrt(cond.variance())
        part = ~full
        parts.append(_points("imputed", filled[part, 0], filled[part, 1], comp[part], alpha[part]))
        r, c = np.nonzero(missing)  # one segment per missing entry, along its own axis
        lo, hi = filled[r, c] - 2 * sd[r, c], filled[r, c] + 2 * sd[r, c]
        x0, x1 = np.where(c == 0, lo, filled[r, 0]), np.where(c == 0, hi, filled[r, 0])
        y0, y1 = np.where(c == 1, lo, filled[r, 1]), np.where(c == 1, hi, filled[r, 1])
        rows = r
    fade = 1.0 if mode == "rug" else 0.45  # long ±2 sd bars would hide the points
    frame["marks"] = {"x0": x0, "y0": y0, "x1": x1, "y1": y1, "comp": comp[rows], "alpha": fade * alpha[rows]}
    K = state.means.shape[0]
    names = np.array([str(k + 1) for k in range(K)], dtype=object)
    obs_mean, model_mean = np.nanmean(X, axis=0), state.weights @ state.means
    parts += [_points("mean", state.means[:, 0], state.means[:, 1], names),
              _points("observed_mean", obs_mean[:1], obs_mean[1:], "mean"),
              _points("model_mean", model_mean[:1], model_mean[1:], "mean")]
    frame["points"] = _concat(parts)
    frame["ellipses"] = [dict(p, lw=lw, la=la) for s, lw, la in ((2.0, 1.0, 0.6), (1.0, 2.5, 1.0))
                         for p in ellipse_paths(state.means, state.covariances, s)]
    if truth_params is not None:
        frame["truth"] = [{"x": p["x"], "y": p["y"]} for s in (1.0, 2.0)
                          for p in ellipse_paths(truth_params["means"], truth_params["covariances"], s)]
    return frame


def _overlay(data: dict, x=None, y=None) -> hv.Overlay:
    """DynamicMap callback: the overlay of one panel (4 elements whatever the data).

    ``x`` and ``y`` come from the panel's Tap stream; clicks are handled by its subscriber.
    """
    f = data
    xd, yd = hv.Dimension("x", range=f["xlim"]), hv.Dimension("y", range=f["ylim"])
    truth = hv.Path(f["truth"], kdims=[xd, yd]).opts(color="#555555", line_dash="dashed", line_width=1.5)
    ellipses = hv.Contours(f["ellipses"], kdims=[xd, yd], vdims=["comp", "lw", "la"]).opts(
        color="comp", cmap=COLORS, line_width="lw", line_alpha="la")
    marks = hv.Segments(f["marks"], [hv.Dimension("x0", range=f["xlim"]), hv.Dimension("y0", range=f["ylim"]),
                                     "x1", "y1"], ["comp", "alpha"]).opts(
        color="comp", cmap=COLORS, line_width=2, alpha="alpha")
    points = hv.Points(f["points"], [xd, yd], list(_POINT_COLUMNS[2:])).opts(
        color="comp", cmap=COLORS, fill_alpha="fill", line_alpha="line", size="size", marker="marker",
        line_width="lw")
    return hv.Overlay([truth, ellipses, marks, points])



def fit_axes(plot, element) -> None:
    """Plot hook of the scatter panels: fit the axes to the frame's limits when they change.

    The limits are the ``range`` of the frame's ``x`` and ``y`` dimensions (the data's, with margins).
    They are set on the figure's ranges (and on what Bokeh's Reset tool goes back to) only when they
    differ from the ones this hook last set on this plot: a new data set, other columns or a larger
    clicked canvas move the axes, while a zoom survives the steps of the same data. HoloViews itself
    applies a DynamicMap frame's ranges only with ``framewise=True`` on the elements, which would
    undo a zoom on every step (and ``framewise`` on the overlay is ignored: the axes never moved).
    Running at render time, the hook also works when a served page coalesces several frames.
    """
    try:
        xlim, ylim = element.get_dimension("x").range, element.get_dimension("y").range
    except AttributeError:  # no such dimension
        return
    limits = (tuple(xlim), tuple(ylim))
    if not all(isinstance(v, (int, float)) and np.isfinite(v) for v in limits[0] + limits[1]):
        return
    if getattr(plot, "_explorer_fitted_limits", None) == limits:
        return
    plot._explorer_fitted_limits = limits
    fig = plot.state
    for rng, (lo, hi) in ((fig.x_range, xlim), (fig.y_range, ylim)):
        values = {"start": lo, "end": hi}
        if hasattr(rng, "reset_start"):  # Range1d: Bokeh's Reset tool returns here
            values |= {"reset_start": lo, "reset_end": hi}
        rng.update(**values)


def _overlay_all(items):
    return functools.reduce(operator.mul, items)


#: The iteration axis of a trace spans at least 0 to this (at iteration 0 it would be an empty -1 to 1).
TRACE_MIN_ITERATIONS = 10


def trace_curve(data) -> hv.Curve:
    """DynamicMap callback of a trace (a :func:`trace_buffer`): its iteration axis spans at least 0-10.

    With a single value (iteration 0) the value axis spans 1 % of it either side (at least 0.5), not a
    zero-width range labelled with that one value.
    """
    value = next((c for c in data.columns if c != "iteration"), "value")
    vdim = hv.Dimension(value)
    finite = np.asarray(data[value], dtype=float) if value in data else np.empty(0)
    finite = finite[np.isfinite(finite)]
    if finite.size and np.ptp(finite) == 0:
        pad = max(0.01 * abs(float(finite[0])), 0.5)
        vdim = hv.Dimension(value, soft_range=(float(finite[0]) - pad, float(finite[0]) + pad))
    return hv.Curve(data, hv.Dimension("iteration", soft_range=(0, TRACE_MIN_ITERATIONS)), vdim)


def _trace_buffer(column: str) -> hv.streams.Buffer:
    return hv.streams.Buffer(pd.DataFrame({"iteration": np.empty(0, dtype=int), column: np.empty(0)}),
                             length=5000, index=False)


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
        self._clicked: np.ndarray | None = None  # points placed by clicking (None: not drawing)
        self._last_limits = ((0.0, 1.0), (0.0, 1.0))
        self._sent = [(-1, -1)] * len(self.models)  # (run_id, last iteration sent) per trace
        self._pipes = [hv.streams.Pipe(data=empty_frame()) for _ in self.models]
        self._ll = [_trace_buffer("log_likelihood") for _ in self.models]
        self._rmse = [_trace_buffer("rmse") for _ in self.models]
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
        self._dmaps, self._taps = [], []
        # the axes follow the data through the fit_axes hook (framewise would undo a zoom on every step)
        opts = dict(responsive=True, height=360, active_tools=["wheel_zoom"], hooks=[fit_axes],
                    show_legend=False, toolbar="above", backend="bokeh")
        for pipe in self._pipes:
            # a Tap with source=dmap is not wired to an overlay's plot: it must be one of its streams
            tap = hv.streams.Tap(x=None, y=None, transient=True)
            tap.add_subscriber(weak_callback(self._on_tap))
            dmap = hv.DynamicMap(_overlay, streams=[pipe, tap]).opts(**opts)
            self._dmaps.append(dmap)
            self._taps.append(tap)
        panels = [pn.Column(t, pn.pane.HoloViews(d, sizing_mode="stretch_width"), sizing_mode="stretch_width")
                  for t, d in zip(self._titles, self._dmaps)]
        trace_opts = dict(responsive=True, height=290, framewise=True, axiswise=True, show_grid=True,
                          legend_position="top", legend_cols=3, legend_opts={"label_text_font_size": "9pt"},
                          toolbar=None, backend="bokeh")
        colors = ("#1f77b4", "#d62728", "#7f7f7f")
        ll = _overlay_all([hv.DynamicMap(trace_curve, streams=[b]).relabel(t).opts(color=c, line_width=2)
                           for b, (_, t), c in zip(self._ll, VARIANTS, colors)]).opts(
            title="Observed-data log-likelihood", ylabel="log-likelihood", **trace_opts)
        rmse = _overlay_all([hv.DynamicMap(trace_curve, streams=[b]).relabel(t).opts(color=c, line_width=2)
                             for b, (_, t), c in zip(self._rmse, VARIANTS, colors)]).opts(
            title="Imputation RMSE (needs the true values)", ylabel="RMSE of the hidden values", **trace_opts)
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

    def _on_tap(self, x=None, y=None, **kwargs):
        if x is None or y is None:
            return
        self.add_point(float(x), float(y))

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
                (a0, a1), (b0, b1) = _ranges(self._clicked)
                x0, x1, y0, y1 = min(x0, a0), max(x1, a1), min(y0, b0), max(y1, b1)
            limits = (x0, x1), (y0, y1)
        elif d is not None and d.n_features == 2:
            limits = _ranges(d.truth if d.truth is not None else d.values)
        else:
            limits = self._last_limits
        self._last_limits = limits
        return limits

    def refresh(self) -> None:
        """Redraw the three panels, the traces, the read-outs and the error messages."""
        with self._lock, pn.io.hold():
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
                self._pipes[i].send(frame)
                self._send_traces(i, m)
                ll = "-" if state is None else f"{state.log_likelihood:.1f}"
                self._titles[i].object = f"**{VARIANTS[i][1]}** · iteration {m.iteration} · log-lik. {ll}"
            self._update_messages(pending)

    def _send_traces(self, i: int, m: EMModel) -> None:
        run_id, last = self._sent[i]
        if run_id != m.run_id:
            self._ll[i].clear()
            self._rmse[i].clear()
            last = -1
        data, truth = m.em_data, self.data_model.data.truth if self.data_model.data is not None else None
        new = [s for s in m.states if s.iteration > last]
        if new and data is not None:
            its = np.array([s.iteration for s in new])
            self._ll[i].send(pd.DataFrame({"iteration": its, "log_likelihood": [s.log_likelihood for s in new]}))
            if truth is not None and truth.shape == data.X.shape and data.missing.any():
                cfg = m.config()
                err = [np.sqrt(np.mean((em_gmm.impute(s, data, cfg) - truth)[data.missing] ** 2)) for s in new]
                self._rmse[i].send(pd.DataFrame({"iteration": its, "rmse": err}))
            last = int(its[-1])
        self._sent[i] = (m.run_id, last)

    def _update_messages(self, pending: bool) -> None:
        dm = self.data_model
        errors = []  # the data error is the banner's (explorer/views/_banner.py)
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
