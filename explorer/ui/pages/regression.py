r"""Regression from the joint density: E[y | x] (eq. 13), bands, draws, and the bimodal case, on a page.

ghahramani1994 (Ghahramani & Jordan, section 4.3; digest section 2.9 and section 6, views 5 and 6). One
:class:`~explorer.ui.state.regression_model.RegressionModel` (EM on the joint density of an input and
a target column) is stepped by a :class:`~explorer.ui.components.player.StepPlayer`; a settings change
starts a new run and plays it to convergence (switch this off to Step by hand). The page shows

* the scatter of (x, y): the conditional-mean curve E[y | x] (eq. 13), red where it lies between
  two modes of p(y | x) (low density: the "bimodal" case), the equal-tailed predictive band,
  faint draws of the stochastic estimate, rows with y missing at E[y | x] (orange), rows with x
  missing as ticks on a strip at the left edge;
* the density p(y | x = x0) for an x0 picked with the slider or by clicking the scatter, with its
  components, modes, mean, band and draws, and a sentence that says whether the mean lies between
  the modes;
* a held-out comparison with regressions fitted after imputation
  (:func:`~explorer.ui.state.regression_model.compare_methods`), shared between sessions.

Both plots are Bokeh figures made once per session (:mod:`explorer.ui.plots.regression_panels`); a frame
only assigns their sources' data. Every computation runs on the session's worker
(:class:`~explorer.ui.session.SessionWorker`): the player's steps, the read-outs of the new state
(:meth:`~explorer.ui.state.regression_model.RegressionModel.readouts`, one immutable record, taken under
the model's lock there) and the comparison; the page draws them on the event loop. The view holds no lock
of its own, so a reset holding the model's lock can never wait for it. The frames are built from the
read-outs by pure functions (:func:`scatter_frame`, :func:`density_frame`) that the tests call.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pandas as pd
import panel as pn
import param

from explorer.core.validation import BadInputError
from explorer.datasets import list_datasets
from explorer.ui.components.data_controls import DataControls
from explorer.ui.components.frame_jobs import LatestFrame
from explorer.ui.components.player import StepPlayer
from explorer.ui.page import ModelPage, weak_callback
from explorer.ui.plots.regression_panels import DensitySlicePlot, RegressionScatter
from explorer.ui.session import Redraw, SessionWorker, hold, push, run_then, served_doc
from explorer.ui.state.data_model import UPLOADED, DataModel
from explorer.ui.state.regression_model import (
    JOINT_DRAW,
    JOINT_MEAN,
    ComparisonRequest,
    Readouts,
    RegressionComparison,
    RegressionModel,
    cached_comparison,
)
from explorer.ui.text import md

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


def scatter_frame(readouts: Readouts) -> dict:
    """Everything the scatter draws of one :class:`~explorer.ui.state.regression_model.Readouts`, as plain arrays.

    Keys: ``band`` (x, lower, upper), ``draws``, ``observed``, ``imputed`` (rows with y missing at
    E[y | x]), ``strip`` (rows with x missing: (strip x, observed y)), ``mean`` (the curve),
    ``between`` (the curve where the mean lies between modes, NaN elsewhere), ``x0`` (a vertical
    segment), ``xlim``, ``ylim``, ``title``, ``xlabel``, ``ylabel``, ``band_label``; every entry a tuple
    of arrays.
    """
    r = readouts
    if r.columns is None:
        return empty_scatter("No fit: see the message above")
    if r.problem:  # a numerically broken state: say so instead of drawing
        return empty_scatter(f"No curve: {r.problem}", *r.columns)
    curve, scatter, draws = r.curve, r.scatter, r.draws
    if curve is None:
        return empty_scatter("No fit: see the message above", *r.columns)
    (xlo, xhi), (ylo, yhi) = r.x_range, r.y_range
    xlim = _limits(xlo, xhi, 0.05)
    xlim = (xlim[0] - STRIP * (xhi - xlo), xlim[1])
    finite = np.r_[ylo, yhi, curve.lower, curve.upper]
    ylim = _limits(float(np.min(finite)), float(np.max(finite)), 0.08)
    strip_x = np.full(scatter.strip.size, xlim[0] + 0.5 * STRIP * (xhi - xlo))
    between = np.where(curve.between, curve.mean, np.nan)
    state = {"tol": "converged", "max_iter": "max_iter", "degenerate": "degenerate component"}
    status = f"EM iteration {r.iteration}" + (f", {state[r.stop_reason]}" if r.stop_reason in state else "")
    cols = r.columns
    return {"band": (curve.x, curve.lower, curve.upper), "draws": (draws[:, 0], draws[:, 1]),
            "observed": (scatter.observed[:, 0], scatter.observed[:, 1]),
            "imputed": (scatter.imputed[:, 0], scatter.imputed[:, 1]), "strip": (strip_x, scatter.strip),
            "mean": (curve.x, curve.mean), "between": (curve.x, between),
            "x0": (np.array([r.x0, r.x0]), np.array(ylim)), "xlim": xlim, "ylim": ylim,
            "title": f"{cols[1]} against {cols[0]} · {status}",
            "xlabel": cols[0], "ylabel": cols[1], "band_label": f"{curve.level:.0%} predictive band",
            "between_fraction": curve.between_fraction}


def empty_density(title: str = "No fit yet", xlabel: str = "y") -> dict:
    """A density frame with nothing to draw (same keys as :func:`density_frame`)."""
    e = np.empty(0)
    return {"grid": e, "density": e, "components": [], "interval": e, "modes": (e, e), "mean": (e, e),
            "draws": e, "top": 1.0, "xlim": (0.0, 1.0), "title": title, "xlabel": xlabel, "input": "x",
            "slice": None}


def density_frame(readouts: Readouts) -> dict:
    """What the density panel draws of one :class:`~explorer.ui.state.regression_model.Readouts`: p(y | x = x0)
    on ``grid``, its components, the equal-tailed interval (``interval``: the density inside it, 0 outside),
    the modes, the mean and the draws."""
    s, cols = readouts.slice, readouts.columns
    if s is None or cols is None:
        return empty_density("No density" if readouts.problem else "No fit: see the message above")
    top = float(max(s.density.max(), 1e-12))
    inside = (s.grid >= s.lower) & (s.grid <= s.upper)
    return {"grid": s.grid, "density": s.density,
            "components": [{"t": s.grid, "density": c} for c in s.components if c.max() > 1e-3 * top],
            "interval": np.where(inside, s.density, 0.0), "modes": (s.modes, s.verdict.heights),
            "mean": (np.array([s.mean, s.mean]), np.array([0.0, 1.05 * top])), "draws": s.draws, "top": top,
            "xlim": (float(s.grid[0]), float(s.grid[-1])),
            "title": f"p({cols[1]} | {cols[0]} = {s.x0:.3g})", "xlabel": cols[1], "input": cols[0], "slice": s}


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


def comparison_table(comparison: RegressionComparison) -> pd.DataFrame:
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

    Attributes
    ----------
    readouts : Readouts or None
        What the plots show (the last read-outs drawn).
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
        self._destroyed = False
        self._syncing = False
        self.readouts: Readouts | None = None
        self._compared_key = None  # the comparison asked for last (its request's key)
        self._split_changed = False  # a new held-out split: compare again unless a run is playing
        # Bokeh models are changed on the session's event loop only; the read-outs are computed on its worker
        doc = served_doc()  # the session's document (None: Jupyter, scripts, tests)
        self._redraw = Redraw(self._draw, doc=doc)
        self._frames = LatestFrame(self._compute, self._show, doc=doc)
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
        # Bokeh figures made once: a frame only assigns their sources' data (explorer.ui.plots.regression_panels)
        self._scatter = RegressionScatter(on_tap=weak_callback(self._on_tap), css_classes=["regression-scatter"])
        self._density = DensitySlicePlot(css_classes=["regression-density"])
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
        left = pn.Column(self._scatter.pane, comparison, sizing_mode="stretch_width")
        right = pn.Column(self._density.pane, self._note, sizing_mode="stretch_width")
        self._arrange(sidebar, [left, right], [], EXPLANATION)

    # ------------------------------------------------------------------ actions
    def start(self) -> None:
        """Fit the current run to convergence (the page calls this once loaded).

        Served, the fit is one job on the session's worker (the EM states of a run are shared by the sessions
        of the process, so a page opened before costs no maths) and the page draws its end once: opening the
        page costs the fit and one frame, not a frame per tick. A settings change later plays its new run
        tick by tick. Elsewhere the player plays it.
        """
        if not self.auto_fit or self.model.finished:
            return
        doc = self._frames.doc
        if SessionWorker.of(doc) is None:
            self.player.play()
            return
        model, run_id = self.model, self.model.run_id

        def work() -> None:
            while model.step(run_id):  # False once converged, or when a new run started meanwhile
                pass

        def then(result, error) -> None:
            if self._destroyed:
                return
            if model.run_id == run_id and model.finished:
                self.player.tick()  # nothing left to step: the read-out and the plots show the end
            elif not model.finished:
                self.player.play()  # a new run started meanwhile (or the fit stopped early): play it

        run_then(work, then, key=("regression-fit", id(self)), doc=doc)

    def refresh(self) -> None:
        """Draw the model's current state: its read-outs are computed on the session's worker, then both plots,
        the read-outs and the comparison are updated on the event loop (at once when not served)."""
        self._redraw()

    def _draw(self) -> None:
        self._frames.request()

    def _compute(self) -> Readouts:
        """On the worker: the read-outs of the current state (under the model's lock, inside ``readouts``)."""
        return self.model.readouts(self.n_draws)

    def _show(self, readouts: Readouts | None, error: BaseException | None) -> None:
        """On the event loop: draw ``readouts`` (the scatter, the density, the sentence, the messages)."""
        if error is not None or readouts is None or self._destroyed:
            return  # the worker logged the error; the plots keep the last read-outs
        self.readouts = r = readouts
        with hold():
            sf, df = scatter_frame(r), density_frame(r)
            self._scatter.update(sf)
            self._density.update(df)
            self._note.object = slice_sentence(df, sf.get("between_fraction"))
            self._sync_x0()
            self._update_messages()
            # the comparison refits every method: once the run is over (or now, when nothing will play it)
            playing = self.player.playing
            split_changed, self._split_changed = self._split_changed, False
            if r.finished or not (self.auto_fit or playing) or split_changed and not playing:
                self.schedule_comparison()
            elif r.comparison is not None and r.comparison.key != self._compared_key:
                self._table_note.object = "*The table is recomputed when the fit has converged.*"
        push(self._scatter.pane, self._density.pane)

    def _update_messages(self) -> None:
        r = self.readouts
        self._alert.object = md(r.error) if r.error else ""
        self._alert.visible = bool(r.error)
        cols, n = r.columns, r.counts
        if cols is None or n is None or self.data_model.data is None:
            self._info.object = ""
            return
        total = sum(n.values())
        parts = [f"**{md(r.data_name)}**: input **{md(cols[0])}**, target **{md(cols[1])}**; {total} rows: "
                 f"{n['complete']} complete, {n['y_missing']} with y missing (orange, at E[y | x]), {n['x_missing']} "
                 f"with x missing (ticks on the strip at the left)"]
        if n["both_missing"]:
            parts.append(f", {n['both_missing']} with both missing (they carry no information)")
        ll = r.log_likelihood
        parts.append(f". EM iteration {r.iteration}" + (f", log-likelihood {ll:.1f}" if ll is not None else "") + ".")
        self._info.object = "".join(parts)

    # ------------------------------------------------------------------ comparison (on the worker)
    def schedule_comparison(self) -> None:
        """Recompute the held-out comparison when what it depends on changed (on the session's worker when
        served; shared with every session that asks for the same one)."""
        r = self.readouts
        request = None if r is None else r.comparison
        if request is None:
            self._compared_key = None
            self._table.object = None
            self._table_note.object = f"*No comparison: {md((r.error if r else '') or 'no data')}*"
            return
        if request.key == self._compared_key:
            return
        self._compared_key = request.key
        self._table_note.object = "*Fitting the methods on the training rows…*"
        run_then(partial(_compare, request), weak_callback(self._show_comparison), doc=self._frames.doc)

    def _show_comparison(self, result, error) -> None:
        """On the event loop: the table of a comparison (or why there is none)."""
        if self._destroyed or result is None:
            return
        key, comparison, message = result
        if key != self._compared_key:
            return  # a newer comparison is on its way
        if comparison is None:
            self._table.object = None
            self._table_note.object = f"*No comparison: {md(message)}*"
            return
        self._table.object = comparison_table(comparison)
        failed = [f"{r['method']}: {md(r['error'])}" for r in comparison.rows if r["error"]]
        split_seed = dict(key[2])["split_seed"]
        self._table_note.object = (
            f"Held out: **{comparison.n_test}** rows with *y* observed, their *y* hidden "
            f"({comparison.n_test_x_missing} of them with *x* missing too), split seed {split_seed}. "
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
        self._split_changed = True
        self.refresh()  # the read-outs carry the new comparison request

    def _on_tap(self, x=None) -> None:
        r = self.readouts
        if x is None or r is None or r.x_range is None:
            return
        lo, hi = r.x_range
        self.model.x0 = float(min(max(x, lo), hi))

    def _on_column_widget(self, event) -> None:
        if self._syncing:
            return
        self.model.param.update(input_column=self._input.value or "", target_column=self._target.value or "")

    def _on_x0_widget(self, event) -> None:
        if self._syncing or self.readouts is None or self.readouts.columns is None:
            return
        self.model.x0 = float(event.new)

    def _sync_widgets(self) -> None:
        """Column pickers follow the data and the model (the x0 slider follows the read-outs)."""
        m = self.model
        cols = list(m.all_columns)
        self._syncing = True
        try:
            for w, value in ((self._input, m.input_column), (self._target, m.target_column)):
                options = cols if value in cols else cols + [value]
                w.param.update(options=options, value=value)
        finally:
            self._syncing = False

    def _sync_x0(self) -> None:
        r = self.readouts
        if r is None or r.columns is None:
            self._x0.disabled = True
            return
        (lo, hi), x0 = r.x_range, r.x0
        step = float(10 ** np.floor(np.log10(max(hi - lo, 1e-9) / 200)))
        self._syncing = True
        try:
            self._x0.param.update(start=lo, end=hi, step=step, value=min(max(x0, lo), hi), disabled=False)
        finally:
            self._syncing = False


def _compare(request: ComparisonRequest) -> tuple:
    """The worker's job of a comparison: ``(request key, RegressionComparison or None, why not)``."""
    try:
        return request.key, cached_comparison(request), ""
    except BadInputError as exc:
        return request.key, None, str(exc)
