r"""Regression from the joint density: E[y | x] (eq. 13), bands, draws, and the bimodal case, on a page.

seed001 (Ghahramani & Jordan, section 4.3; digest section 2.9 and section 6, views 5 and 6). One
:class:`~explorer.ui.state.regression_model.RegressionModel` (EM on the joint density of an input and
a target column) is stepped by a :class:`~explorer.ui.components.player.StepPlayer`; a settings change
starts a new run and plays it to convergence (switch this off to Step by hand). The page shows

* the scatter of (x, y): the conditional-mean curve E[y | x] (eq. 13), red where it lies between
  two modes of p(y | x) (low density: the "bimodal" case), the equal-tailed predictive band,
  faint draws of the stochastic estimate, rows with y missing at E[y | x] (orange), rows with x
  missing as ticks on a strip at the left edge;
* the density p(y | x = x0) for an x0 picked with the slider or by clicking the scatter (a
  HoloViews ``Tap`` stream), with its components, modes, mean, band and draws, and a sentence that
  says whether the mean lies between the modes;
* a held-out comparison with regressions fitted after imputation
  (:func:`~explorer.ui.state.regression_model.compare_methods`), computed off the event loop.

Both plots are ``hv.DynamicMap`` s fed by ``hv.streams.Pipe`` s with overlays of fixed structure, so
every step patches the Bokeh data sources instead of rebuilding the figures. The frames are
built by pure functions (:func:`scatter_frame`, :func:`density_frame`) that the tests call.
"""

from __future__ import annotations

import threading
from functools import partial

import holoviews as hv
import holoviews.plotting.bokeh  # noqa: F401  (registers the Bokeh plotting options used in .opts)
import numpy as np
import pandas as pd
import panel as pn
import param

from explorer.core._validation import BadInputError
from explorer.datasets import list_datasets
from explorer.ui.state.data_model import UPLOADED, DataModel
from explorer.ui.state.regression_model import JOINT_DRAW, JOINT_MEAN, Comparison, RegressionModel
from explorer.ui.page import ModelPage, weak_callback
from explorer.ui.text import md
from explorer.ui.components.data_controls import DataControls
from explorer.ui.plots.mixture2d import fit_axes
from explorer.ui.components.player import StepPlayer

__all__ = ["RegressionView", "density_frame", "regression_datasets", "scatter_frame"]

#: The data sets offered: the noisy circle (bimodal conditionals) first, then the other tables of
#: at most MAX_FEATURES columns (the page fits two of them), then an upload.
FIRST_DATASETS = ("ring", "two_moons", "ghahramani_bivariate")
MAX_FEATURES = 64
DATA_URL = ("dataset", "n_samples", "data_seed", "mechanism", "rate", "mask_seed", "standardize")
MODEL_URL = ("input_column", "target_column", "n_components", "covariance_type", "seed", "level", "x0",
             "test_fraction", "split_seed")
#: width of the strip of rows whose x is missing, as a fraction of the x span (left of the data)
STRIP = 0.06
COLORS = {"observed": "#1f77b4", "imputed": "#ff7f0e", "strip": "#9467bd", "draws": "#7f7f7f",
          "mean": "#111111", "between": "#d62728", "band": "#aec7e8", "x0": "#2ca02c", "component": "#8c8c8c"}

EXPLANATION = """
### What am I looking at?
A Gaussian mixture with *K* components is fitted by EM to the **joint** density of the input *x* and
the target *y*, using every row: rows with *y* missing still shape the density of *x*, rows with *x*
missing shape the density of *y* (Ghahramani & Jordan, section 4.3). Conditioning the joint density on
*x* gives the predictive density p(*y* | *x*), again a mixture of *K* Gaussians whose weights
*h<sub>j</sub>*(*x*) say which component "owns" *x*.

* **Black curve**: its mean, the least-squares estimate of eq. 13,
  E[*y* | *x*] = Σ<sub>j</sub> *h<sub>j</sub>*(*x*) [μ<sub>j</sub><sup>y</sup> + Σ<sub>j</sub><sup>yx</sup>
  (Σ<sub>j</sub><sup>xx</sup>)<sup>-1</sup>(*x* − μ<sub>j</sub><sup>x</sup>)]: a soft blend of one
  linear regression per component (with *diag* covariances, a normalised RBF network
  Σ *h<sub>j</sub>* μ<sub>j</sub><sup>y</sup>).
* **Blue band**: the equal-tailed predictive interval (quantiles of the mixture, not ± 2 sd).
* **Grey dots**: the stochastic estimate, one draw from p(*y* | *x*) at random inputs. Where they
  look like the data, the model has understood the data.
* **Red**: where the mean lies *between* two modes of p(*y* | *x*), in a valley of low density.

**Try** the noisy circle (*ring*, the start screen): for most *x* there are two values of *y*, one on
the upper and one on the lower arc. The mean of the two is near the middle of the circle, where there
are no data: the least-squares estimate is the best single guess under squared error, but not a
plausible value. That is why every method in the table scores about the same RMSE there (they all
predict the middle), and why a draw, which lands on one arc, has a *larger* RMSE while being the
more faithful picture of the data. Lower *K* to 1: the mixture becomes one Gaussian and the curve a
straight line. Then try *iris* with petal length → petal width, or *ghahramani_bivariate* with
`mar_threshold` (y hidden where x is large): a linear Gaussian case where the mean is always a typical value.
"""


def regression_datasets() -> list[str]:
    """The data sets the page offers: ring, two_moons and the bivariate Gaussian first, built-ins of at
    most ``MAX_FEATURES`` columns, then ``uploaded``."""
    names = [d.name for d in list_datasets() if d.n_features <= MAX_FEATURES]
    return [n for n in FIRST_DATASETS if n in names] + [n for n in names if n not in FIRST_DATASETS] + [UPLOADED]


# --------------------------------------------------------------------------- pure frame builders
def _limits(lo: float, hi: float, pad: float) -> tuple[float, float]:
    span = max(hi - lo, 1e-9)
    return float(lo - pad * span), float(hi + pad * span)


def empty_scatter(title: str = "No fit yet", xlabel: str = "x", ylabel: str = "y") -> dict:
    """A scatter frame with nothing to draw (same keys as :func:`scatter_frame`)."""
    e = np.empty(0)
    return {"band": (e, e, e), "draws": (e, e), "observed": (e, e), "imputed": (e, e), "strip": (e, e),
            "mean": (e, e), "between": (e, e), "x0": (e, e), "xlim": (0.0, 1.0), "ylim": (0.0, 1.0),
            "title": title, "xlabel": xlabel, "ylabel": ylabel, "band_label": "predictive band"}


def scatter_frame(model: RegressionModel, n_draws: int = 300) -> dict:
    """Everything the scatter draws for the model's current state, as plain arrays.

    Keys: ``band`` (x, lower, upper), ``draws``, ``observed``, ``imputed`` (rows with y missing at
    E[y | x]), ``strip`` (rows with x missing: (strip x, observed y)), ``mean`` (the curve),
    ``between`` (the curve where the mean lies between modes, NaN elsewhere), ``x0`` (a vertical
    segment), ``xlim``, ``ylim``, ``title``, ``xlabel``, ``ylabel``; every entry a tuple of arrays.
    """
    with model.lock:
        cols = model.columns
        if cols is None:
            return empty_scatter("No fit: see the message above")
        scatter = model.scatter()
        curve = model.curve()
        draws = model.draws(n_draws)
        x0, iteration, reason = model.x0_used, model.iteration, model.stop_reason
        (xlo, xhi), (ylo, yhi) = model.x_range(), model.y_range()
    if curve is None:
        return empty_scatter("No fit: see the message above", *cols)
    xlim = _limits(xlo, xhi, 0.05)
    xlim = (xlim[0] - STRIP * (xhi - xlo), xlim[1])
    finite = np.r_[ylo, yhi, curve.lower, curve.upper]
    ylim = _limits(float(np.min(finite)), float(np.max(finite)), 0.08)
    strip_x = np.full(scatter.strip.size, xlim[0] + 0.5 * STRIP * (xhi - xlo))
    between = np.where(curve.between, curve.mean, np.nan)
    state = {"tol": "converged", "max_iter": "max_iter", "degenerate": "degenerate component"}
    status = f"EM iteration {iteration}" + (f", {state[reason]}" if reason in state else "")
    return {"band": (curve.x, curve.lower, curve.upper), "draws": (draws[:, 0], draws[:, 1]),
            "observed": (scatter.observed[:, 0], scatter.observed[:, 1]),
            "imputed": (scatter.imputed[:, 0], scatter.imputed[:, 1]), "strip": (strip_x, scatter.strip),
            "mean": (curve.x, curve.mean), "between": (curve.x, between),
            "x0": (np.array([x0, x0]), np.array(ylim)), "xlim": xlim, "ylim": ylim,
            "title": f"{cols[1]} against {cols[0]} · {status}",
            "xlabel": cols[0], "ylabel": cols[1], "band_label": f"{curve.level:.0%} predictive band",
            "between_fraction": curve.between_fraction}


def empty_density(title: str = "No fit yet", xlabel: str = "y") -> dict:
    """A density frame with nothing to draw (same keys as :func:`density_frame`)."""
    e = np.empty(0)
    return {"grid": e, "density": e, "components": [], "interval": (e, e), "modes": (e, e), "mean": (e, e),
            "draws": e, "top": 1.0, "xlim": (0.0, 1.0), "title": title, "xlabel": xlabel, "input": "x",
            "slice": None}


def density_frame(model: RegressionModel, n_draws: int = 200) -> dict:
    """What the density panel draws: p(y | x = x0), its components, band, modes, mean and draws."""
    with model.lock:
        cols = model.columns
        s = model.slice_at(n_draws=n_draws) if cols is not None else None
    if s is None:
        return empty_density("No fit: see the message above")
    top = float(max(s.density.max(), 1e-12))
    inside = (s.grid >= s.lower) & (s.grid <= s.upper)
    return {"grid": s.grid, "density": s.density,
            "components": [{"t": s.grid, "density": c} for c in s.components if c.max() > 1e-3 * top],
            "interval": (s.grid[inside], s.density[inside]), "modes": (s.modes, s.verdict.heights),
            "mean": (np.array([s.mean, s.mean]), np.array([0.0, 1.05 * top])), "draws": s.draws, "top": top,
            "xlim": (float(s.grid[0]), float(s.grid[-1])),
            "title": f"p({cols[1]} | {cols[0]} = {s.x0:.3g})", "xlabel": cols[1], "input": cols[0], "slice": s}


def _scatter_overlay(data: dict, x=None, y=None) -> hv.Overlay:
    """DynamicMap callback of the scatter: 8 elements whatever the data (``x``/``y``: the Tap stream)."""
    f = data
    xd = hv.Dimension("x", label=f["xlabel"], range=f["xlim"])
    yd = hv.Dimension("y", label=f["ylabel"], range=f["ylim"])
    band = hv.Area(f["band"], kdims=[xd], vdims=[yd, "y2"], label=f["band_label"]).opts(
        color=COLORS["band"], alpha=0.55, line_alpha=0)
    draws = hv.Scatter(f["draws"], xd, yd, label="draws from p(y | x)").opts(
        color=COLORS["draws"], alpha=0.35, size=3)
    observed = hv.Scatter(f["observed"], xd, yd, label="observed rows").opts(
        color=COLORS["observed"], alpha=0.8, size=5)
    imputed = hv.Scatter(f["imputed"], xd, yd, label="y missing: at E[y | x]").opts(
        color=COLORS["imputed"], fill_alpha=0.15, line_width=1.5, size=7)
    strip = hv.Scatter(f["strip"], xd, yd, label="x missing: y on the strip").opts(
        color=COLORS["strip"], marker="dash", size=12, line_width=2)
    mean = hv.Curve(f["mean"], xd, yd, label="E[y | x] (eq. 13)").opts(color=COLORS["mean"], line_width=3)
    between = hv.Curve(f["between"], xd, yd, label="mean between modes").opts(
        color=COLORS["between"], line_width=5, alpha=0.85)
    x0 = hv.Curve(f["x0"], xd, yd, label="x0").opts(color=COLORS["x0"], line_dash="dashed", line_width=2)
    return hv.Overlay([band, draws, observed, imputed, strip, mean, between, x0]).opts(
        title=f["title"], xlabel=f["xlabel"], ylabel=f["ylabel"])


def _density_overlay(data: dict) -> hv.Overlay:
    """DynamicMap callback of the density panel: 6 elements whatever the data."""
    f = data
    td = hv.Dimension("t", label=f["xlabel"])
    dd = hv.Dimension("density")
    top = f["top"]
    level = "" if f["slice"] is None else f"{f['slice'].level:.0%} "
    interval = hv.Area(f["interval"], td, dd, label=f"{level}interval").opts(
        color=COLORS["band"], alpha=0.7, line_alpha=0)
    # one colour for every component path (a colour per path splits the dashes: see conditional_view)
    comps = hv.Path(f["components"], kdims=[td, dd], label="components").opts(
        color=COLORS["component"], line_dash="dashed", line_width=1.5)
    curve = hv.Curve((f["grid"], f["density"]), td, dd, label="p(y | x0)").opts(color=COLORS["mean"], line_width=3)
    modes = hv.Scatter(f["modes"], td, dd, label="modes").opts(
        color=COLORS["x0"], marker="triangle", size=13, line_color="white")
    mean = hv.Curve(f["mean"], td, dd, label="E[y | x0] (eq. 13)").opts(color=COLORS["between"], line_width=3)
    draws = hv.Spikes(f["draws"], td, label="draws").opts(
        color=COLORS["draws"], alpha=0.4, position=-0.1 * top, spike_length=0.08 * top)
    return hv.Overlay([interval, comps, curve, modes, mean, draws]).opts(
        {"Curve": dict(framewise=True, xlim=f["xlim"], ylim=(-0.12 * top, 1.12 * top)),
         "Overlay": dict(title=f["title"], xlabel=f["xlabel"], ylabel="density")})


def slice_sentence(frame: dict, between_fraction: float | None = None) -> str:
    """The plain-words reading of the density panel (Markdown; column names escaped)."""
    s = frame.get("slice")
    if s is None:
        return ""
    x_name = md(frame["input"])
    fmt = "{:.3g}".format
    modes = ", ".join(fmt(m) for m in s.modes)
    share = "less than 0.1 %" if s.verdict.ratio < 1e-3 else f"{100 * s.verdict.ratio:.1f} %"
    if s.between:
        text = (f"**The mean falls between the modes.** At {x_name} = {fmt(s.x0)} the model says *y* is near "
                f"{' or near '.join(fmt(m) for m in s.modes)} ({len(s.modes)} modes). Their weighted average, "
                f"the least-squares estimate E[y | x] = {fmt(s.mean)} (eq. 13), sits in the valley between them, "
                f"where the density is {share} of the highest mode's: a value the data hardly ever take. "
                "It is still the best single guess under squared error (it hedges between the branches), but "
                "not a plausible value. A draw from p(y | x), the stochastic estimate (ticks under the curve), "
                "lands on one branch: use draws when you need typical values (one-to-many or inverse problems), "
                "the mean when you need the smallest average squared error.")
    elif len(s.modes) > 1:
        text = (f"At {x_name} = {fmt(s.x0)}, p(y | x) has {len(s.modes)} modes ({modes}), but its mean "
                f"E[y | x] = {fmt(s.mean)} lies on the slope of one of them (density {share} of the highest "
                "mode's), not in a valley between them: here the least-squares estimate is still a typical value.")
    else:
        text = (f"At {x_name} = {fmt(s.x0)}, p(y | x) has one mode ({modes}); the mean E[y | x] = {fmt(s.mean)} "
                f"lies where the data are (density {share} of the mode's): the least-squares estimate is a "
                "typical value here.")
    if between_fraction is not None:
        text += (f"\n\nAlong the input range the mean lies between modes for **{100 * between_fraction:.0f} %** "
                 "of the inputs (the red part of the curve).")
    return text


def comparison_table(comparison: Comparison) -> pd.DataFrame:
    """The comparison as a table: method, RMSE on every held-out row, on those with x observed / missing."""
    def cell(v):
        return "–" if not np.isfinite(v) else f"{v:.3g}"

    best = comparison.best()
    rows = []
    for r in comparison.rows:
        rows.append({"method": r["method"] + (" (lowest)" if r["method"] == best else ""),
                     "RMSE": "failed" if r["error"] else cell(r["rmse"]),
                     "x observed": "" if r["error"] else cell(r["rmse_x_observed"]),
                     "x missing": "" if r["error"] else cell(r["rmse_x_missing"])})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- the view
class RegressionView(ModelPage):
    """The regression page: a :class:`RegressionModel`, its Step / Play controls, plots and comparison.

    Parameters
    ----------
    model : RegressionModel, optional
        Default: the noisy circle ``ring`` (MCAR 20 %), K = 6.
    auto_fit : bool
        Play each new run (new data or settings) to convergence.
    n_draws : int
        Faint draws of the stochastic estimate on the scatter.
    """

    _LEAD, _DATA_URL, _LEAD_URL = "model", DATA_URL, MODEL_URL

    model = param.ClassSelector(class_=RegressionModel)
    data_model = param.ClassSelector(class_=DataModel)
    auto_fit = param.Boolean(default=True, doc="Play every new run to convergence")
    n_draws = param.Integer(default=300, bounds=(0, 5000), doc="Draws of the stochastic estimate shown")

    def __init__(self, **params):
        if params.get("model") is None:
            params["model"] = RegressionModel(data_model=params.get("data_model"))
        params["data_model"] = params["model"].data_model
        super().__init__(**params)
        self._lock = threading.RLock()
        self._destroyed = False
        self._compare_token = 0
        self._compared_key = None
        self._syncing = False
        self._scatter_pipe = hv.streams.Pipe(data=empty_scatter())
        self._density_pipe = hv.streams.Pipe(data=empty_density())
        self.player = StepPlayer(models=[self.model], labels=["EM"], steps_per_tick=15, period=150)
        self._build()
        m, dm = self.model, self.data_model
        self.player.param.watch(weak_callback(self._on_frame), "frame")
        m.param.watch(weak_callback(self._on_run), ["run_id", "error"])
        m.param.watch(weak_callback(self._on_readout), ["level", "x0"])
        m.param.watch(weak_callback(self._on_settings), ["n_components", "covariance_type", "seed", "input_column",
                                                         "target_column"])
        m.param.watch(weak_callback(self._on_split), ["test_fraction", "split_seed"])
        dm.param.watch(weak_callback(self._on_data), ["revision"])
        if pn.state.curdoc is not None and pn.state.curdoc.session_context is not None:
            pn.state.on_session_destroyed(self._on_destroyed)
        self._sync_widgets()
        self.refresh()

    # ------------------------------------------------------------------ layout (built once)
    def _build(self):
        m = self.model
        tap = hv.streams.Tap(x=None, y=None, transient=True)
        tap.add_subscriber(weak_callback(self._on_tap))
        self._tap = tap
        scatter = hv.DynamicMap(_scatter_overlay, streams=[self._scatter_pipe, tap]).opts(
            responsive=True, min_height=520, hooks=[fit_axes], legend_position="bottom", legend_cols=3,
            legend_opts={"label_text_font_size": "9pt"}, toolbar="above", active_tools=["wheel_zoom"],
            show_grid=True, backend="bokeh")
        density = hv.DynamicMap(_density_overlay, streams=[self._density_pipe]).opts(
            responsive=True, min_height=520, legend_position="bottom", legend_cols=3,
            legend_opts={"label_text_font_size": "9pt"}, toolbar="above", show_grid=True, backend="bokeh")
        pane = dict(sizing_mode="stretch_width", linked_axes=False, min_height=540)
        self._scatter_pane = pn.pane.HoloViews(scatter, css_classes=["regression-scatter"], **pane)
        self._density_pane = pn.pane.HoloViews(density, css_classes=["regression-density"], **pane)
        self._note = pn.pane.Markdown("", sizing_mode="stretch_width", margin=(0, 10), css_classes=["bimodal-note"])
        self._table = pn.pane.DataFrame(None, index=False, sizing_mode="stretch_width", margin=(0, 10),
                                        text_align="start", css_classes=["comparison-table"])
        self._table_note = pn.pane.Markdown("Comparing…", sizing_mode="stretch_width", margin=(0, 10),
                                            css_classes=["comparison-note"])
        comparison = pn.Column(
            pn.pane.Markdown("#### Held-out RMSE: the joint density against regression after imputation",
                             margin=(10, 10, 0, 10)),
            self._table, self._table_note, sizing_mode="stretch_width")
        # widgets
        self._input = pn.widgets.Select(label="Input x", options=[], width=140, css_classes=["input-column"])
        self._target = pn.widgets.Select(label="Target y", options=[], width=140, css_classes=["target-column"])
        self._input.param.watch(self._on_column_widget, "value")
        self._target.param.watch(self._on_column_widget, "value")
        self._x0 = pn.widgets.FloatSlider(label="x0 (or click the scatter)", start=0.0, end=1.0, step=0.01, value=0.5)
        self._x0.param.watch(self._on_x0_widget, "value")
        self._data_controls = DataControls(model=self.data_model, datasets=regression_datasets(), show_error=False)
        sidebar = pn.Column(
            "### Run", self.player,
            pn.widgets.Checkbox.from_param(self.param.auto_fit, label="Fit to convergence when settings change"),
            "### Regression",
            pn.Row(self._input, self._target, sizing_mode="stretch_width"),
            pn.widgets.IntSlider.from_param(m.param.n_components, label="Components K", start=1, end=12),
            pn.pane.Markdown("Covariance", margin=(0, 10)),
            pn.widgets.RadioButtonGroup.from_param(m.param.covariance_type, variant="outline"),
            pn.widgets.IntInput.from_param(m.param.seed, label="Seed (initialisation, draws)"),
            pn.widgets.FloatSlider.from_param(m.param.level, label="Band coverage", step=0.01),
            self._x0,
            "### Held-out comparison",
            pn.widgets.FloatSlider.from_param(m.param.test_fraction, label="Held-out share of rows with y", step=0.05),
            pn.widgets.IntInput.from_param(m.param.split_seed, label="Split seed"),
            "### Data", self._data_controls,
            sizing_mode="stretch_width", min_width=300,
        )
        # the comparison under the scatter, the reading of the slice under the density: both columns filled
        left = pn.Column(self._scatter_pane, comparison, sizing_mode="stretch_width")
        right = pn.Column(self._density_pane, self._note, sizing_mode="stretch_width")
        self._arrange(sidebar, [left, right], [], EXPLANATION)

    # ------------------------------------------------------------------ actions
    def start(self) -> None:
        """Play the current run to convergence (the page calls this once loaded)."""
        if self.auto_fit and not self.model.finished:
            self.player.play()

    def refresh(self) -> None:
        """Send the current state to both plots and update the read-outs.

        Takes the model's lock before the view's (the order of the Ratings page): a reset publishes ``run_id``,
        and so refreshes, under the model's lock, while the player's frames refresh from the event loop; with
        the view's lock first, the frame's read-outs (:func:`scatter_frame` takes the model's lock) and the
        reset each held one lock and waited for the other for good.
        """
        with self.model.lock, self._lock, pn.io.hold():
            try:
                sf = scatter_frame(self.model, self.n_draws)
                df = density_frame(self.model)
            except BadInputError as exc:  # a numerically broken state: say so instead of drawing
                sf, df = empty_scatter(f"No curve: {exc}"), empty_density("No density")
            self._scatter_pipe.send(sf)
            self._density_pipe.send(df)
            self._note.object = slice_sentence(df, sf.get("between_fraction"))
            self._sync_x0()
            self._update_messages()
        # the comparison refits every method: once the run is over (or now, when nothing will play it)
        if self.model.finished or not (self.auto_fit or self.player.playing):
            self.schedule_comparison()
        elif self._comparison_key() != self._compared_key:
            self._table_note.object = "*The table is recomputed when the fit has converged.*"

    def _update_messages(self) -> None:
        m, dm = self.model, self.data_model
        self._alert.object = md(m.error) if m.error else ""
        self._alert.visible = bool(m.error)
        data, cols = dm.data, m.columns
        if data is None or cols is None or m.em_data is None:
            self._info.object = ""
            return
        miss = m.em_data.missing
        n = miss.shape[0]
        parts = [f"**{md(data.name or 'data')}**: input **{md(cols[0])}**, target **{md(cols[1])}**; {n} rows: "
                 f"{int((~miss.any(axis=1)).sum())} complete, {int((miss[:, 1] & ~miss[:, 0]).sum())} with y missing "
                 f"(orange, at E[y | x]), {int((miss[:, 0] & ~miss[:, 1]).sum())} with x missing (ticks on the "
                 f"strip at the left)"]
        both = int(miss.all(axis=1).sum())
        if both:
            parts.append(f", {both} with both missing (they carry no information)")
        ll = m.log_likelihood
        parts.append(f". EM iteration {m.iteration}" + (f", log-likelihood {ll:.1f}" if ll is not None else "") + ".")
        self._info.object = "".join(parts)

    # ------------------------------------------------------------------ comparison (off the event loop)
    def _comparison_key(self):
        m, dm = self.model, self.data_model
        return (dm.revision, m.columns, m.n_components, m.covariance_type, m.seed, m.reg_covar, m.tol, m.max_iter,
                m.test_fraction, m.split_seed)

    def schedule_comparison(self) -> None:
        """Recompute the held-out comparison when what it depends on changed (in a thread when served)."""
        m = self.model
        with m.lock:
            data = m.em_data
            key = self._comparison_key()
            if data is None or m.columns is None:
                self._compared_key = None
                self._table.object = None
                self._table_note.object = f"*No comparison: {md(m.error or 'no data')}*"
                return
            if key == self._compared_key:
                return
            self._compared_key = key
            values = np.array(data.X)
            settings = dict(n_components=m.n_components, covariance_type=m.covariance_type, seed=m.seed,
                            test_fraction=m.test_fraction, split_seed=m.split_seed, tol=m.tol, max_iter=m.max_iter,
                            reg_covar=m.reg_covar)
        self._compare_token += 1
        token = self._compare_token
        self._table_note.object = "*Fitting the methods on the training rows…*"
        doc = self._served_doc()
        if doc is None:
            self._show_comparison(token, *self._compute(values, settings))
            return

        def work():
            result = self._compute(values, settings)
            if not self._destroyed:
                try:
                    doc.add_next_tick_callback(partial(self._show_comparison, token, *result))
                except Exception:  # the session's document went away meanwhile
                    pass

        threading.Thread(target=work, name="explorer-regression-compare", daemon=True).start()

    @staticmethod
    def _compute(values, settings):
        from explorer.ui.state.regression_model import compare_methods

        try:
            return compare_methods(values, **settings), ""
        except BadInputError as exc:
            return None, str(exc)

    def _show_comparison(self, token: int, comparison: Comparison | None, error: str) -> None:
        if token != self._compare_token or self._destroyed:
            return  # a newer comparison is on its way
        if comparison is None:
            self._table.object = None
            self._table_note.object = f"*No comparison: {md(error)}*"
            return
        self._table.object = comparison_table(comparison)
        failed = [f"{r['method']}: {md(r['error'])}" for r in comparison.rows if r["error"]]
        self._table_note.object = (
            f"Held out: **{comparison.n_test}** rows with *y* observed, their *y* hidden "
            f"({comparison.n_test_x_missing} of them with *x* missing too), split seed {self.model.split_seed}. "
            f"The joint mixture is fitted on the other {comparison.n_train} rows, its *y*-missing rows included; "
            f"the regressions after imputation on the {comparison.n_train_labelled} of them with *y* observed. "
            f"'{JOINT_MEAN}' minimises the squared error; '{JOINT_DRAW}' is the stochastic estimate, whose RMSE is "
            f"larger by design (about √2 × for a well-fitted model). Computed in {comparison.seconds:.1f} s."
            + ("\n\n" + "\n\n".join(failed) if failed else ""))

    # ------------------------------------------------------------------ callbacks
    def _on_frame(self, event=None) -> None:
        self.refresh()

    def _on_run(self, *events) -> None:
        self.refresh()

    def _on_readout(self, *events) -> None:
        self.refresh()

    def _on_settings(self, *events) -> None:
        self._sync_widgets()
        if self.auto_fit:
            self.player.play()

    def _on_data(self, *events) -> None:
        self._sync_widgets()
        if self.auto_fit:
            self.player.play()

    def _on_split(self, *events) -> None:
        if self.model.finished or not self.player.playing:
            self.schedule_comparison()

    def _on_tap(self, x=None, y=None, **kwargs) -> None:
        if x is None or self.model.columns is None:
            return
        lo, hi = self.model.x_range()
        self.model.x0 = float(min(max(x, lo), hi))

    def _on_column_widget(self, event) -> None:
        if self._syncing:
            return
        self.model.param.update(input_column=self._input.value or "", target_column=self._target.value or "")

    def _on_x0_widget(self, event) -> None:
        if self._syncing or self.model.columns is None:
            return
        self.model.x0 = float(event.new)

    def _sync_widgets(self) -> None:
        """Column pickers and the x0 slider follow the data and the model."""
        m = self.model
        cols = list(m.all_columns)
        self._syncing = True
        try:
            for w, value in ((self._input, m.input_column), (self._target, m.target_column)):
                options = cols if value in cols else cols + [value]
                w.param.update(options=options, value=value)
        finally:
            self._syncing = False
        self._sync_x0()

    def _sync_x0(self) -> None:
        m = self.model
        with m.lock:
            if m.columns is None:
                self._x0.disabled = True
                return
            (lo, hi), x0 = m.x_range(), m.x0_used
        step = float(10 ** np.floor(np.log10(max(hi - lo, 1e-9) / 200)))
        self._syncing = True
        try:
            self._x0.param.update(start=lo, end=hi, step=step, value=min(max(x0, lo), hi), disabled=False)
        finally:
            self._syncing = False
