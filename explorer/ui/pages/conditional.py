r"""Conditional density slices: :math:`p(x_f \mid x^o)` of one row under a fitted mixture (or location model).

The "density imputation" of garriga2017 (eq. 3.27) and the conditional-density views 5/6 of
ghahramani1994 §6: for a row with missing entries, the conditional distribution of the missing block
given the observed one is again a Gaussian mixture, with weights :math:`h_k` (the posterior
responsibilities of the components for the observed part), per-component regression means and
Schur-complement covariances (:class:`explorer.core.gaussians.conditional.ConditionalMixture`).

:class:`ConditionalView` fits a mixture on the data of its
:class:`~explorer.ui.state.data_model.DataModel` on the session's worker thread (``Fit``; refits when
the data or the model settings change; :class:`~explorer.ui.session.SessionWorker`): either EM for a
Gaussian mixture
(:class:`~explorer.ui.state.em_model.EMModel`) or the variational Dirichlet-process mixture
(:class:`~explorer.ui.state.vb_model.VBModel`), whose conditional is either the plug-in Gaussian
mixture or the Student-t posterior predictive (:mod:`explorer.core.gaussians.conditional_t`). It shows, for a
data row or a typed row:

* one missing feature: the conditional mixture density (curve), each component's weighted
  contribution (dashed), the mean imputation (vertical line), an equal-tailed 95 % interval
  (band), samples (rug) and the true value when it is known (star);
* two missing features: contours of the joint conditional density (50/80/95 % regions),
  samples, the mean and the truth;
* a table of the observed values and the conditional means / sds of the missing ones, and the
  component weights :math:`h_k` against the priors :math:`\pi_k`.

A *table with categories* (:func:`explorer.datasets.load_mixed`: penguins, msleep, auto_mpg, abalone), chosen in
the sidebar, replaces the numeric data set: its :class:`~explorer.ui.state.data_model.MixedDataModel` hides a
share of the observed cells at random (their true values kept), and the location model
(:class:`~explorer.ui.state.em_model.LocationModel`, i.e. :class:`explorer.MixedMixtureImputer`) is fitted in one
job on the session's worker. For a row of it, a missing **categorical** cell is shown as bars of
:math:`P(\text{level} \mid \text{the row's observed cells})` (``predict_proba``), the most probable level
darker, the true level starred when known, and the probabilities on a line of text below; a missing **number**
as the 1-D slice above, of the numeric block's conditional mixture given every observed cell, categories included
(``MixedMixtureImputer.conditional``). Typed rows, the 2-D view and the downloads stay with numeric data sets.

The plots are Bokeh figures made once per session (:mod:`explorer.ui.plots.density_slices`; the 2-D
one when a second feature is first picked, the level bars when a categorical cell first is): a new row, feature,
fit or data set only replaces their data, on the session's event loop (:class:`~explorer.ui.session.Redraw`).
:attr:`ConditionalView.frames` holds the frames last drawn.
"""

from __future__ import annotations

import threading
import time
from functools import partial

import numpy as np
import pandas as pd
import panel as pn
import param
from bokeh.models import CustomJSTickFormatter
from panel.viewable import Viewer

from explorer.core.validation import BadInputError, constant_columns
from explorer.datasets import list_datasets, list_mixed
from explorer.ui.components.banner import DataErrorBanner
from explorer.ui.components.data_controls import DataControls, handle_upload
from explorer.ui.components.downloads import DownloadPanel, PageImputations
from explorer.ui.components.notebook import notebook_layout
from explorer.ui.components.upload import FileUpload
from explorer.ui.plots.density_slices import LevelBars, Slice1DPlot, Slice2DPlot, WeightBars
from explorer.ui.session import Redraw, hold, push, run_then, served_doc
from explorer.ui.state.data_model import (
    MAX_UPLOAD_BYTES,
    MIXED_NONE,
    MIXED_UPLOADED,
    UPLOADED,
    DataModel,
    MixedDataModel,
)
from explorer.ui.state.em_model import EMModel, LocationModel
from explorer.ui.state.vb_model import VBModel
from explorer.ui.text import md

__all__ = ["DENSITIES", "MODEL_KINDS", "ConditionalView", "constant_columns", "mass_levels", "mixed_tables",
           "parse_row", "slice_1d", "slice_2d"]
from explorer.ui.plots.conditional_frames import (
    NONE,
    level_bars,
    level_text,
    mass_levels,
    mixed_row_table,
    parse_row,
    placeholder_1d,
    placeholder_weights,
    slice_1d,
    slice_2d,
)

DENSITIES = {"plug-in Gaussian mixture": "plugin", "Student-t predictive": "student_t"}
MODEL_KINDS = {"EM mixture": "em", "Variational DP mixture": "vb"}
#: The incomplete-row slider shows its (0-based) position 1-based, like the row read-out.
ROW_FORMAT_JS = "return (tick + 1).toFixed(0)"
#: Rows of the per-row feature table at most (wide data: the chosen and the missing features first).
MAX_TABLE_ROWS = 20


#: Widest built-in data set offered: a full-covariance mixture of 784 pixels (MNIST) takes minutes
#: to fit, not seconds (one m x m factorisation per row and component).
MAX_FEATURES = 64


def conditional_datasets() -> list[str]:
    """Built-in data sets the page can fit interactively (<= MAX_FEATURES columns), and ``uploaded``."""
    return [d.name for d in list_datasets() if d.n_features <= MAX_FEATURES] + [UPLOADED]


def mixed_tables() -> dict[str, str]:
    """The choices of the mixed-table selector, label -> :attr:`MixedDataModel.dataset` (none first)."""
    out = {"none: a numeric data set (below)": MIXED_NONE}
    for info in list_mixed():
        out[f"{info.name}: {info.n_samples} rows, categories {', '.join(info.categorical)}"] = info.name
    return out


# ----------------------------------------------------------------------------- the view
class ConditionalView(Viewer):
    """Fit a mixture, pick a row and one or two missing features, see :math:`p(x^m \\mid x^o)`.

    Parameters
    ----------
    em_model : EMModel
        Default: iris with MCAR 30 %, K = 3. Its ``data_model`` drives the data controls.
    vb_model : VBModel
        Default: a variational DP mixture (truncation 10, priors at the data's scale) on the same data.
        The page has no prior control, so this default model follows the data: the data-scaled
        ``covariance_prior="observed_variance"`` needs a positive variance in every column, and on
        data with constant columns (the border pixels of the digits) it uses ``"identity"`` (and
        says so in the status line). A ``vb_model`` passed in keeps its own prior.
    model_kind : {"em", "vb"}
        Which of the two models is fitted and shown.
    density : {"plugin", "student_t"}
        For the variational model: plug-in Gaussian mixture or Student-t posterior predictive.
    source : {"data row", "custom row"}
    row_position : int
        Position among the rows that have a missing value.
    custom_text : str
        A typed row (see :func:`parse_row`).
    feature, feature2 : str
        Missing feature on the x axis; a second one for the 2-D view (``NONE`` = 1-D).
    auto_fit : bool
        Fit again when the data or the model settings change.
    mixed_model : LocationModel
        The location model of a mixed-type table (numbers and categories). Its ``data_model.dataset`` other than
        ``"none"`` switches the page to that table: the location model is fitted and shown instead of the
        Gaussian mixture, a missing categorical cell as bars of its levels' probabilities.
    """

    em_model = param.ClassSelector(class_=EMModel)
    vb_model = param.ClassSelector(class_=VBModel)
    model_kind = param.Selector(default="em", objects=MODEL_KINDS, doc="The mixture model shown")
    density = param.Selector(default="plugin", objects=DENSITIES, doc="Conditional of the variational model")
    source = param.Selector(default="data row", objects=["data row", "custom row"])
    row_position = param.Integer(default=0, bounds=(0, None), doc="Index among the incomplete rows")
    custom_text = param.String(default="", doc="Comma-separated values, blank or ? = missing")
    feature = param.String(default="", doc="Missing feature of the 1-D slice / x axis")
    feature2 = param.String(default=NONE, doc="Second missing feature (2-D view)")
    auto_fit = param.Boolean(default=True, doc="Refit when the data or the settings change")
    n_draws = param.Integer(default=200, bounds=(1, 5000), doc="Samples drawn from the conditional")
    seed = param.Integer(default=0, bounds=(0, None), doc="Seed of the samples and of 'random row'")
    mixed_model = param.ClassSelector(class_=LocationModel)

    def __init__(self, **params):
        if params.get("em_model") is None:
            params["em_model"] = EMModel(data_model=DataModel(dataset="iris", mechanism="mcar", rate=0.3),
                                         n_components=3)
        auto_prior = params.get("vb_model") is None
        if auto_prior:
            params["vb_model"] = VBModel(data_model=params["em_model"].data_model, n_components=10,
                                         mean_prior="observed_mean", covariance_prior="observed_variance")
        if params.get("mixed_model") is None:  # no table chosen: nothing loaded
            params["mixed_model"] = LocationModel(data_model=MixedDataModel())
        super().__init__(**params)
        self._lock = threading.RLock()
        self._token = 0
        self._auto_prior = auto_prior  # the default VB model's covariance prior follows the data
        self._prior_note = ""
        self._closed = threading.Event()  # set when the browser session is destroyed
        self._doc = served_doc()  # the session's document (None outside a server): its worker fits, its loop draws
        self._redraw = Redraw(self._draw, doc=self._doc)
        self._fit_progress = (0, "")  # (token, text) of the running fit, shown by _show_progress on the loop
        self._redraw_progress = Redraw(self._show_progress, doc=self._doc)
        self._rng = np.random.default_rng(self.seed)
        self._rows = np.zeros(0, dtype=int)
        self._updating = False
        self._custom_columns: tuple | None = None  # the columns the custom row was written for
        self._shown_mixed = False  # whether the widgets shown are those of a mixed table
        em = self.em_model
        self.controls = DataControls(model=em.data_model, datasets=conditional_datasets(), show_error=False,
                                     on_table=self.use_table)
        self._make_widgets()
        self.main = self._build()
        if self.model_kind == "vb":
            self._adapt_prior()  # before the run_id watchers: no fit is started here
        self._on_run()
        em.param.watch(self._on_run, ["run_id"])
        self.vb_model.param.watch(self._on_run, ["run_id"])
        self.mixed_model.param.watch(self._on_mixed_run, ["run_id"])
        self.param.watch(self._on_selection, ["source", "row_position", "custom_text", "feature", "feature2"])
        self.param.watch(self._on_kind, ["model_kind", "density"])
        if self._doc is not None:
            self._doc.on_session_destroyed(self._on_destroyed)
        self.downloads = DownloadPanel(stem=self._download_stem, imputations=self.imputations,
                                       note=self._download_note)
        self.param.watch(lambda e: self.downloads.refresh(), ["seed"])
        self._numeric_data = pn.Column(self.controls, visible=not self.mixed, sizing_mode="stretch_width")
        self._downloads_box = pn.Column(self.downloads, visible=not self.mixed, sizing_mode="stretch_width")
        self.sidebar = pn.Column(self._table_choice, self._mixed_data_box, self._numeric_data, self._model_box,
                                 self._downloads_box, sizing_mode="stretch_width")
        self._layout = notebook_layout(self.sidebar, self.main)  # a notebook; a server shows sidebar and main
        if self.mixed:  # a table given (or from the URL): its rows, its model's status
            self._on_mixed_run()

    def __panel__(self):
        return self._layout

    # ------------------------------------------------------------------ widgets and layout (built once)
    def _make_widgets(self):
        em = self.em_model
        self._k = pn.widgets.IntSlider.from_param(em.param.n_components, start=1, end=10, label="Components K")
        self._cov = pn.widgets.Select.from_param(em.param.covariance_type, label="Covariance")
        self._auto = pn.widgets.Checkbox.from_param(self.param.auto_fit, label="Refit when settings change")
        self._fit_button = pn.widgets.Button(label="Fit", color="primary", description="Fit the mixture to convergence",
                                             sizing_mode="stretch_width")
        self._fit_button.on_click(self._on_fit_click)
        self._progress = pn.indicators.Progress(active=True, value=-1, visible=False, height=12,
                                                sizing_mode="stretch_width")
        self._status = pn.pane.Markdown(sizing_mode="stretch_width", margin=(0, 10), css_classes=["fit-status"])
        self._em_error = pn.pane.Alert("", alert_type="danger", visible=False, sizing_mode="stretch_width")
        self._kind = pn.widgets.Select.from_param(self.param.model_kind, label="Model")
        self._em_box = pn.Column(self._k, self._cov, visible=self.model_kind == "em", sizing_mode="stretch_width")
        self._vb_box = pn.Column(visible=False, sizing_mode="stretch_width")  # filled when first shown
        # a mixed-type table: its selector always, its settings and its model's when one is chosen (made then)
        self._table_choice = pn.widgets.Select.from_param(self.mixed_model.data_model.param.dataset,
                                                          options=mixed_tables(),
                                                          label="Table with categories (location model)")
        self.mixed_model.data_model.param.watch(self._offer_uploaded, "dataset")
        self._offer_uploaded()
        self._mixed_data_box = pn.Column(visible=False, sizing_mode="stretch_width")
        self._mixed_box = pn.Column(visible=False, sizing_mode="stretch_width")
        self._show_model_controls()
        self._model_box = pn.Column(pn.pane.Markdown("#### Mixture model", margin=(10, 10, 0, 10)), self._kind,
                                    self._em_box, self._vb_box, self._mixed_box, self._auto, self._fit_button,
                                    self._progress, self._status, sizing_mode="stretch_width")
        self._source = pn.widgets.RadioButtonGroup.from_param(self.param.source, color="primary",
                                                              variant="outline", width=240)
        # "Incomplete row (of n): k", 1-based like the row read-out next to the plots (the label carries
        # n: BokehJS does not redraw the slider title when only its formatter changes)
        self._row = pn.widgets.IntSlider.from_param(self.param.row_position, start=0, end=1,
                                                    label="Incomplete row", width=260,
                                                    # one formatter per view: a Bokeh model lives in one document
                                                    format=CustomJSTickFormatter(code=ROW_FORMAT_JS))
        self._random = pn.widgets.Button(label="Random row", width=120, margin=(22, 10, 5, 10))
        self._random.on_click(self._on_random)
        self._custom = pn.widgets.TextInput.from_param(
            self.param.custom_text, width=420, placeholder="e.g. 6.8, 3.0, ?, ?",
            label="Custom row (comma-separated; blank or ? = missing)")
        # beside the input, 200-420 px: two fixed 420 px made the page at least 840 px wide, even while hidden
        self._custom_error = pn.pane.Alert("", alert_type="warning", visible=False, sizing_mode="stretch_width",
                                           min_width=200, max_width=420)
        self._feature = pn.widgets.Select.from_param(self.param.feature, options=[], label="Missing feature (x)",
                                                     width=220)
        self._feature2 = pn.widgets.Select.from_param(self.param.feature2, options=[NONE],
                                                      label="Second missing feature (y)", width=220)
        self._row_info = pn.pane.Markdown(margin=(28, 10, 0, 10), sizing_mode="stretch_width")
        # at most MAX_TABLE_ROWS rows, all shown (a max_height used to cut wide tables silently)
        # at most 880 px, narrower with the window (a fixed 880 px widened the whole column past a 1024 px screen);
        # a table wider than that scrolls inside its pane
        self._table = pn.pane.DataFrame(index=False, sizing_mode="stretch_width", max_width=880, margin=(0, 10),
                                        styles={"overflow-x": "auto"})
        self._table_note = pn.pane.Markdown("", margin=(0, 10), sizing_mode="stretch_width", visible=False,
                                            css_classes=["table-note"])

    def _build(self):
        # Bokeh figures made once (explorer.ui.plots.density_slices); the 2-D one when it is first needed
        self._slice1d, self._weights = Slice1DPlot(), WeightBars()
        self._slice2d: Slice2DPlot | None = None
        # visibility is toggled on the wrapping Columns (explicit sizes: the gallery stretches by default)
        self._pane1d = pn.Column(self._slice1d.pane, sizing_mode=None)
        self._pane2d = pn.Column(visible=False, sizing_mode=None)
        # a mixed table's categorical cell: bars made when first shown, and their probabilities as a line of text
        self._levels: LevelBars | None = None
        self._pane_levels = pn.Column(visible=False, sizing_mode=None)
        self._level_line = pn.pane.Markdown("", visible=False, sizing_mode="stretch_width", margin=(0, 10),
                                            css_classes=["level-line"])
        self._intro = intro = pn.pane.HTML(
            "For a row with missing values the fitted mixture gives the whole conditional distribution "
            "<i>p</i>(<i>x</i><sup>m</sup> | <i>x</i><sup>o</sup>) = &Sigma;<sub>k</sub> <i>h<sub>k</sub></i> "
            "N(<i>x</i><sup>m</sup>; <i>x&#770;<sub>k</sub></i><sup>m</sup>, <i>Q<sub>k</sub></i>), again a "
            "Gaussian mixture. <b>Curve</b>: its density; <b>dashed</b>: each component's share; "
            "<b>blue line</b>: the mean imputation; <b>band</b>: 95 % interval; <b>grey rug</b>: samples "
            "(multiple imputation); <b>red star</b>: the true value. Pick a second missing feature for the "
            "joint 2-D density. With the <b>variational DP mixture</b> the weights are the expected stick "
            "weights E[&pi;<sub>k</sub>], and the <b>Student-t predictive</b> integrates the posterior "
            "uncertainty of each component's mean and covariance out (heavier tails than the plug-in "
            "Gaussians).", sizing_mode="stretch_width", margin=(0, 10, 8, 10), visible=not self.mixed)
        self._mixed_intro = pn.pane.HTML(
            "On a table with <b>numbers and categories</b> the page fits the <b>location model</b> "
            "(<code>MixedMixtureImputer</code>: in each component a Gaussian over the numbers and one categorical "
            "distribution per categorical column). A row's missing cells are predicted from <i>all</i> its observed "
            "cells, numbers and categories. <b>A missing category</b>: bars of P(level | observed cells); "
            "<b>dark bar</b>: the most probable level (the single imputation); <b>red star</b>: the true level. "
            "<b>A missing number</b>: its conditional density, as for numeric data (curve, components, mean, 95 % "
            "band, samples, true value). True values are known for the cells the page hid at random (the "
            "table's own gaps have none). Typed rows, the 2-D view and downloads are for numeric data sets.",
            sizing_mode="stretch_width", margin=(0, 10, 8, 10), visible=self.mixed)
        self._custom_box = pn.Row(self._custom, self._custom_error, visible=self.source == "custom row",
                                  sizing_mode="stretch_width", styles={"flex-wrap": "wrap"})
        results = pn.Column(
            # the rows of controls wrap in a narrow window (1024 px) instead of widening the page past it
            pn.Row(self._source, self._row, self._random, sizing_mode="stretch_width", styles={"flex-wrap": "wrap"}),
            self._custom_box,
            pn.Row(self._feature, self._feature2, self._row_info, sizing_mode="stretch_width",
                   styles={"flex-wrap": "wrap"}),
            # side by side when they fit, the weights below the density when not (a Row overflowed at 1024 px)
            pn.FlexBox(self._pane1d, self._pane2d, self._pane_levels, self._weights.pane, flex_wrap="wrap",
                       sizing_mode="stretch_width"),
            self._level_line,
            self._table_note,
            self._table,
            sizing_mode="stretch_width",
        )
        # errors where the eye is: the data's (with the nearest setting that works) and the model's, on top
        self.banner = DataErrorBanner(data_model=self.em_model.data_model, results=[results])
        return pn.Column(self.banner, self._em_error, intro, self._mixed_intro, results, sizing_mode="stretch_width")

    # ------------------------------------------------------------------ fitting (off the event loop)
    @property
    def model(self):
        """The model shown: :attr:`em_model` or :attr:`vb_model` (``model_kind``)."""
        return self.vb_model if self.model_kind == "vb" else self.em_model

    @property
    def mixed(self) -> bool:
        """Whether the page shows a mixed-type table (and its location model) instead of a numeric data set."""
        return self.mixed_model.data_model.dataset != MIXED_NONE

    def _offer_uploaded(self, *events) -> None:
        """The selector offers ``uploaded`` once it is chosen, e.g. by a link, before any upload of this session (whose
        error then says to upload a file)."""
        if (self.mixed_model.data_model.dataset == MIXED_UPLOADED
                and MIXED_UPLOADED not in self._table_choice.options.values()):
            self._label_uploaded("uploaded: no file uploaded in this session")

    def _label_uploaded(self, label: str) -> None:
        """The table selector's ``uploaded`` choice, shown as ``label`` (text, never markup)."""
        options = {k: v for k, v in dict(self._table_choice.options).items() if v != MIXED_UPLOADED}
        options[label] = MIXED_UPLOADED
        self._table_choice.options = options

    def _on_table_upload(self, event) -> None:
        """A file uploaded while a table is shown: a table with categories replaces it; numbers only (or a file the
        numeric data's upload refuses) go to the numeric data set, which the page then shows."""
        if handle_upload(event.new, self.em_model.data_model, self.use_table) != "table":
            self.mixed_model.data_model.dataset = MIXED_NONE

    def use_table(self, frame, name: str) -> bool:
        """Show a table with text columns (an uploaded CSV, read with them as categories) under the location model:
        it becomes the ``uploaded`` choice of the table selector and the page switches to it (the numeric data stay
        as they were). Returns False when the table cannot be used (the page says why)."""
        categories = [str(c) for c in frame.columns if isinstance(frame[c].dtype, pd.CategoricalDtype)]
        self._label_uploaded(f"uploaded {name}: {frame.shape[0]} rows, categories {', '.join(categories)}")
        return self.mixed_model.data_model.use_table(frame, name)

    def conditional(self, X):
        """The conditional of rows ``X`` (NaN = missing) under the model and density shown, or None."""
        if self.model_kind == "vb" and self.density == "student_t":
            return self.vb_model.predictive_conditional(X)
        return self.model.conditional(X)

    def fit(self) -> bool:
        """Fit the shown model to convergence on the session's worker (the current run continues from where it is).

        The fit runs on the session's one compute thread (:class:`~explorer.ui.session.SessionWorker`) and
        the page shows the result on its event loop; outside a server (Jupyter, scripts, tests) it runs
        here and now. A newer call (or a new run) supersedes an older one: the older fit stops after its
        current step. Returns False when there is nothing to fit (no model, or the session is gone).
        With a mixed table the location model is fitted instead (in one job: :meth:`_fit_mixed`).
        """
        if self.mixed:
            return self._fit_mixed()
        em = self.model
        if self._session_gone():
            return False
        with self._lock:
            self._token += 1
            token = self._token
            if em.state is None:
                self._show_status()
                return False
            self._progress.visible = True
            self._fit_button.disabled = True
            self._status.object = f"Fitting… iteration {em.iteration}"
        return run_then(partial(self._work, token, em), partial(self._finish, token), doc=self._doc)

    def _fit_mixed(self, again: bool = False) -> bool:
        """Fit the location model of the mixed table on the session's worker and show it on its event loop (already
        fitted for the current run: only shown again, unless ``again``, the Fit button)."""
        model = self.mixed_model
        if self._session_gone():
            return False
        with self._lock:
            self._token += 1
            token = self._token
            if model.data_model.data is None:
                self._show_status()
                return False
            self._progress.visible = True
            self._fit_button.disabled = True
            self._status.object = f"Fitting the location model (K = {model.n_components})…"
        return run_then(partial(self._work_mixed, token, model, model.run_id, again), partial(self._finish, token),
                        doc=self._doc)

    def _work_mixed(self, token: int, model: LocationModel, run_id: int, again: bool) -> None:
        """The location model's fit (the session's worker), unless superseded, already fitted (and not ``again``) or
        the session is gone. Its end is drawn in any case (a draw made before the browser had the page, when the app
        fits at load, is not kept: the fit the app starts once the page is up draws it again)."""
        if not self._session_gone() and token == self._token and (again or model.result is None):
            model.fit(run_id=run_id)

    def _session_gone(self) -> bool:
        """True once the browser session is destroyed (Bokeh clears the document's session context first)."""
        return self._closed.is_set() or (self._doc is not None and self._doc.session_context is None)

    def _work(self, token: int, em) -> None:
        """The fit loop (the session's worker): steps of ``em`` until converged, superseded or the session ends.

        Computation only: the progress text is handed to the event loop (:meth:`_show_progress`).
        """
        run_id = em.run_id
        last = time.monotonic()
        # step(run_id) checks and steps under the model's lock, so a reset (new data or settings) cannot make
        # this fit step the new run
        while not self._session_gone() and token == self._token and em.step(run_id=run_id):
            now = time.monotonic()
            if now - last > 0.3 and not self._session_gone():  # throttle: progress every 0.3 s
                last = now
                ll = em.log_likelihood
                self._fit_progress = (token, f"Fitting… iteration {em.iteration}"
                                             + ("" if ll is None else f" · log-likelihood {ll:.2f}"))
                self._redraw_progress()

    def _show_progress(self) -> None:
        token, text = self._fit_progress
        if token == self._token and not self._session_gone():
            self._status.object = text

    def _finish(self, token: int, result=None, error: BaseException | None = None) -> None:
        """The fit ended (on the event loop): its status and slice, unless a newer fit or run superseded it."""
        if token != self._token or self._session_gone():
            return
        with hold(freeze=True):  # one message and one walk of the model graph (see _draw)
            self._progress.visible = False
            self._fit_button.disabled = False
            self._show_status()
            self._refresh()

    def _show_error(self) -> None:
        error = (self.mixed_model.error or self.mixed_model.data_model.error) if self.mixed else self.model.error
        self._em_error.object = md(error)
        self._em_error.visible = bool(error)

    def _show_status(self) -> None:
        if self.mixed:
            self._show_mixed_status()
            return
        em = self.model
        self._show_error()
        if hasattr(self, "downloads"):
            self.downloads.refresh()
        if em.state is None:
            self._status.object = "No model: fix the data or the settings (see the message below)."
            return
        n = max(1, em.em_data.n_fit if em.em_data is not None else 1)
        ll = f"log-likelihood **{em.log_likelihood:.2f}** ({em.log_likelihood / n:.3f} per row)"
        reason = {"tol": f"**Converged** after {em.iteration} iterations",
                  "max_iter": f"**Stopped** at max_iter = {em.iteration} (not converged)",
                  "degenerate": f"**Stopped**: degenerate component at iteration {em.iteration}"}
        head = reason.get(em.stop_reason, f"Iteration {em.iteration} (not fitted yet: press Fit)")
        if self.model_kind == "vb":
            elbo = "undefined" if em.elbo is None else f"{em.elbo:.2f}"
            ll += f" · ELBO {elbo} · {em.n_effective} effective components"
            if self._prior_note:
                ll += f" · {self._prior_note}"
        self._status.object = f"{head} · {ll}"

    def _show_mixed_status(self) -> None:
        model = self.mixed_model
        self._show_error()
        fit = model.result
        if fit is None:
            self._status.object = ("No model: see the message above the plots." if model.error else
                                   "Location model not fitted yet: press Fit.")
            return
        head = (f"**Converged** after {fit.n_iter} iterations" if fit.converged else
                f"**Stopped** at max_iter = {fit.n_iter} (not converged)")
        ll = fit.log_likelihood
        self._status.object = (f"{head} · log-likelihood **{ll:.2f}** ({ll / max(fit.n_rows, 1):.3f} per row) · "
                               f"location model, K = {fit.imputer.n_components_}")

    def _on_fit_click(self, event=None) -> None:
        if self.mixed:  # the location model is fitted in one go: Fit fits it again
            self._fit_mixed(again=True)
            return
        em = self.model
        if em.finished and em.state is not None:  # already fitted: start again from the initialisation
            auto, self.auto_fit = self.auto_fit, False  # the run_id watcher must not start a second fit
            try:
                em.reset()
            finally:
                self.auto_fit = auto
        self.fit()

    def _on_destroyed(self, session_context) -> None:
        """The browser session is gone: a running worker stops after its current step, no UI update follows."""
        self._closed.set()
        self._token += 1

    def _adapt_prior(self) -> bool:
        """Give the default VB model the covariance prior the data allow; True when it changed (new run).

        ``observed_variance`` (the page's default, at the scale of the data) needs a positive
        variance in every column; with constant columns (e.g. the always-blank border pixels of
        the digits) the model uses the identity prior instead. The page has no prior control.
        """
        data = self.em_model.data_model.data
        if not self._auto_prior or data is None:
            return False
        bad = constant_columns(data.values)
        wanted = "identity" if len(bad) else "observed_variance"
        if len(bad):
            cols = [str(data.columns[j]) for j in bad]
            shown = ", ".join(md(c) for c in cols[:5]) + (f" and {len(cols) - 5} more" if len(cols) > 5 else "")
            self._prior_note = (f"prior scale W₀ = I: {len(cols)} constant column(s) ({shown}) leave the "
                                "data-scaled prior undefined")
        else:
            self._prior_note = ""
        vb = self.vb_model
        if vb.covariance_prior == wanted:
            return False
        vb.covariance_prior = wanted  # resets the model: its run_id event refreshes (and refits) the page
        return True

    def _show_model_controls(self) -> None:
        """The shown model's settings; the variational model's widgets are made when it is first chosen, the
        location model's (and its table's) when a table is first chosen."""
        if self.mixed:
            if not self._mixed_box.objects:
                model, data = self.mixed_model, self.mixed_model.data_model
                upload = FileUpload(max_bytes=MAX_UPLOAD_BYTES, sizing_mode="stretch_width")
                upload.param.watch(self._on_table_upload, "file")
                self._mixed_data_box.objects = [
                    pn.widgets.FloatSlider.from_param(data.param.hide_rate, step=0.05,
                                                      label="Cells hidden at random (true values kept)"),
                    pn.widgets.IntInput.from_param(data.param.mask_seed, label="Mask seed"),
                    pn.pane.Markdown("Upload another CSV (text columns become categories; a file of numbers only "
                                     "opens as the numeric data set):", margin=(5, 10, 0, 10)),
                    upload]
                self._mixed_box.objects = [
                    pn.widgets.IntSlider.from_param(model.param.n_components, start=1, end=10, label="Components K"),
                    pn.widgets.Select.from_param(model.param.covariance_type, label="Covariance (numbers)")]
            self._kind.visible = self._em_box.visible = self._vb_box.visible = False
            self._mixed_box.visible = True
            return
        self._kind.visible, self._mixed_box.visible = True, False
        vb = self.model_kind == "vb"
        if vb and not self._vb_box.objects:
            model = self.vb_model
            self._vb_box.objects = [
                pn.widgets.Select.from_param(self.param.density, label="Density"),
                pn.widgets.IntSlider.from_param(model.param.n_components, start=1, end=20, label="Truncation K"),
                pn.widgets.FloatInput.from_param(model.param.alpha, label="Concentration α (0 = 1/K)", step=0.1,
                                                 start=0),
                pn.widgets.Select.from_param(model.param["update"], label="Normal-Wishart update"),
                pn.widgets.Select.from_param(model.param.responsibilities, label="Responsibilities")]
        self._em_box.visible, self._vb_box.visible = not vb, vb

    # ------------------------------------------------------------------ data / selection updates
    def _on_kind(self, *events) -> None:
        """Another model or density: show its controls; fit the model if it has not been fitted yet."""
        if self.mixed:  # the Gaussian models are not shown (their settings come back with a numeric data set)
            return
        vb = self.model_kind == "vb"
        self._show_model_controls()
        if any(e.name == "model_kind" for e in events):
            self._token += 1  # a fit of the other model stops after its current step
            self._progress.visible = False
            self._fit_button.disabled = False
            if vb and self._adapt_prior():
                return  # a new VB run on these data: its run_id event refreshed the page and started the fit
            if self.auto_fit and self.model.state is not None and not self.model.finished:
                self.fit()
                return
        self._show_status()
        self._refresh()

    def _on_run(self, event=None) -> None:
        """A new run (data or model settings changed): new rows / features, then refit."""
        if event is not None and event.obj is not self.model:
            return  # the other model (reset by the same data change): fitted when it is chosen
        if event is not None and self.model_kind == "vb" and self._adapt_prior():
            return  # the prior changed: a new run, whose run_id event does the rest
        if self.mixed:
            return  # a table is shown: this model is fitted when a numeric data set is chosen again
        data = self.em_model.data_model.data
        with self._lock:
            self._updating = True
            try:
                self._set_rows(np.zeros(0, dtype=int) if data is None else np.flatnonzero(data.missing.any(axis=1)))
                # an example row of these data; a row typed for other columns (another data set) is replaced
                if data is not None and (not self.custom_text or self._custom_columns != tuple(data.columns)):
                    self.custom_text = ", ".join("?" if np.isnan(v) else f"{v:.3g}" for v in
                                                 (data.values[self._rows[0]] if len(self._rows) else data.values[0]))
                    self._custom_columns = tuple(data.columns)
            finally:
                self._updating = False
            self._refresh()
        if event is not None:
            self._token += 1  # a running fit belongs to the previous run: it stops after its current step
        if self.auto_fit and event is not None:
            self._show_error()
            self.fit()  # shows "Fitting…" at once (no transient "not fitted" status)
        else:
            self._progress.visible = False
            self._fit_button.disabled = False
            self._show_status()

    def _set_rows(self, rows) -> None:
        """The incomplete rows the slider runs over (call with ``_updating`` set)."""
        self._rows = rows
        self._row.end = max(1, len(rows) - 1)
        self._row.name = f"Incomplete row (of {len(rows)})" if len(rows) else "Incomplete row"
        self._row.disabled = len(rows) == 0
        if self.row_position >= len(rows):
            self.row_position = 0

    def _on_mixed_run(self, event=None) -> None:
        """A table was chosen, or its data or model settings changed: its rows, then a fit; "none" goes back to the
        numeric data set and its model."""
        switched = self.mixed != self._shown_mixed
        if switched:
            self._show_mode()
        if not self.mixed:
            if switched:
                self._token += 1  # a running fit of the table stops being shown
                if self.model_kind == "vb" and self._adapt_prior():
                    return  # a new VB run: its run_id event shows the data and fits
                self._on_run()  # the numeric data's rows and the model's status
                if self.auto_fit and self.model.state is not None and not self.model.finished:
                    self.fit()
            return
        with self._lock:
            self._updating = True
            try:
                self._set_rows(self.mixed_model.data_model.incomplete_rows())
            finally:
                self._updating = False
            self._refresh()
        if event is not None:
            self._token += 1  # a running fit belongs to the previous run
        # a table in the link: the page is being sent, and what a fit would draw before the browser has it is lost
        # (its draws after load send only what changed); the app fits once the page is up (pn.state.onload)
        if self.auto_fit and event is not None and self._page_loaded():
            self._show_error()
            self.fit()
        else:
            self._progress.visible = False
            self._fit_button.disabled = False
            self._show_status()

    def _page_loaded(self) -> bool:
        """False while the session's page is being built and sent to the browser (True outside a server)."""
        return self._doc is None or pn.state.curdoc is not self._doc or pn.state.loaded

    def _show_mode(self) -> None:
        """The widgets of a mixed table or of a numeric data set."""
        mixed = self._shown_mixed = self.mixed
        self._show_model_controls()
        self._numeric_data.visible = self._downloads_box.visible = not mixed
        self._mixed_data_box.visible = mixed
        self._intro.visible, self._mixed_intro.visible = not mixed, mixed
        self._source.visible = self._feature2.visible = not mixed
        self._custom_box.visible = self.source == "custom row" and not mixed
        if not mixed:
            self._pane_levels.visible = self._level_line.visible = False

    def _on_selection(self, *events) -> None:
        self._custom_box.visible = self.source == "custom row" and not self.mixed
        if not self._updating:
            self._refresh()

    def _on_random(self, event=None) -> None:
        if len(self._rows):
            self.param.update(source="data row", row_position=int(self._rng.integers(len(self._rows))))

    def current_row(self):
        """``(values (D,), truth (D,) or None, label)`` of the selected row; BadInputError for a bad custom row."""
        data = self.em_model.data_model.data
        if data is None:
            raise BadInputError("No data loaded.")
        if self.source == "custom row":
            return parse_row(self.custom_text, data.columns), None, "custom row"
        if not len(self._rows):
            raise BadInputError("No row has a missing value: choose a mechanism with a positive rate, "
                                "or type a custom row.")
        r = int(self._rows[min(self.row_position, len(self._rows) - 1)])
        truth = None if data.truth is None else data.truth[r]
        return data.values[r], truth, f"row {r}"

    def _refresh(self) -> None:
        """Redraw the slice of the current selection (on the session's event loop: from another thread, the
        drawing is scheduled there)."""
        self._redraw()

    @property
    def frames(self) -> dict:
        """The frames last drawn: ``slice1d``, ``weights`` and, once a 2-D slice was drawn, ``slice2d``; once a
        categorical cell of a mixed table was drawn, ``levels``."""
        frames = {"slice1d": self._slice1d.frame, "weights": self._weights.frame}
        if self._slice2d is not None:
            frames["slice2d"] = self._slice2d.frame
        if self._levels is not None:
            frames["levels"] = self._levels.frame
        return frames

    def _draw(self) -> None:
        # one message, and one walk of the document's model graph (freeze): a pane's first update after the page
        # is shown gains the template's stylesheets, and each such change makes Bokeh walk the whole document
        with self._lock, hold(freeze=True):
            try:
                self._draw_slice()
            except _NoModel as exc:
                self._show_message(str(exc), title="No fitted model: see the message", model=True)
            except BadInputError as exc:
                self._show_message(str(exc), title="No slice: see the message above")
        push(*(p.pane for p in (self._slice1d, self._slice2d, self._levels, self._weights) if p is not None))

    def _show_message(self, message: str, title: str, model: bool = False) -> None:
        """Placeholders in the plots (a short title), the full ``message`` as text.

        ``model=True``: the model could not be fitted. Its error is in the alert under the model
        controls (:meth:`_show_error`) and in the row read-out, whatever the source of the row.
        """
        custom = self.source == "custom row" and not model and not self.mixed
        self._custom_error.object = md(message) if custom else ""
        self._custom_error.visible = custom
        self._row_info.object = "" if custom else f"*{md(message)}*"
        self._slice1d.update(placeholder_1d(title))
        self._weights.update(placeholder_weights())
        self._pane1d.visible, self._pane2d.visible = True, False
        self._pane_levels.visible = self._level_line.visible = False
        self._table.object = None
        self._table_note.visible = False

    def _show_2d(self, frame: dict) -> None:
        """Draw a 2-D slice (its figure is made the first time one is shown)."""
        if self._slice2d is None:
            self._slice2d = Slice2DPlot()
            self._pane2d.objects = [self._slice2d.pane]
        self._slice2d.update(frame)

    def _show_levels(self, frame: dict) -> None:
        """Draw the bars of a categorical cell (their figure is made the first time one is shown)."""
        if self._levels is None:
            self._levels = LevelBars()
            self._pane_levels.objects = [self._levels.pane]
        self._levels.update(frame)

    def _draw_slice(self) -> None:
        if self.mixed:
            self._draw_mixed()
            return
        em, data = self.model, self.em_model.data_model.data
        values, truth, label = self.current_row()
        self._custom_error.visible = False
        columns = list(data.columns)
        mis = [columns[j] for j in np.flatnonzero(np.isnan(values))]
        self._updating = True
        try:
            self._feature.options = mis
            if self.feature not in mis:
                self.feature = mis[0]
            self._feature2.options = [NONE] + [c for c in mis if c != self.feature]
            if self.feature2 not in self._feature2.options:
                self.feature2 = NONE
        finally:
            self._updating = False
        cm = self.conditional(values[None, :])
        if cm is None:
            raise _NoModel(em.error or "No fitted model yet: press Fit.")
        f1 = columns.index(self.feature)
        rng = np.random.default_rng(self.seed)
        it = f"iteration {em.iteration}"
        if self.model_kind == "vb":
            it += f" ({'Student-t predictive' if self.density == 'student_t' else 'plug-in Gaussians'})"
        if self.feature2 == NONE:
            s = slice_1d(cm, 0, f1, rng=rng, truth=None if truth is None else truth[f1], n_draws=self.n_draws)
            title = f"{label}: p({self.feature} | observed)"
            self._slice1d.update({"slice": s, "xlabel": self.feature, "title": title})
        else:
            f2 = columns.index(self.feature2)
            s = slice_2d(cm, 0, f1, f2, rng=rng, truth=None if truth is None else truth[[f1, f2]],
                         n_draws=self.n_draws)
            title = f"{label}: p({self.feature}, {self.feature2} | observed)"
            self._show_2d({"slice": s, "xlabel": self.feature, "ylabel": self.feature2, "title": title})
        self._pane1d.visible, self._pane2d.visible = self.feature2 == NONE, self.feature2 != NONE
        self._weights.update({"prior": np.asarray(em.state.weights), "posterior": cm.weights[0]})
        self._table.object = table = self._row_table(cm, values, truth, columns,
                                                     first=[f1] + ([] if self.feature2 == NONE else [f2]))
        self._table_note.object = _table_note(table, values)
        self._table_note.visible = bool(self._table_note.object)
        n_obs = int((~np.isnan(values)).sum())
        where = f" ({self.row_position + 1} of {len(self._rows)} incomplete rows)" if self.source == "data row" else ""
        self._row_info.object = (f"**{label}**{where}: {n_obs} observed, {len(mis)} missing · model at {it}"
                                 + (" · values in standardised units" if em.data_model.standardize else ""))

    def _draw_mixed(self) -> None:
        """The selected row of the mixed table: bars of a categorical cell, the density of a numeric one."""
        model, table = self.mixed_model, self.mixed_model.data_model
        data = table.data
        if data is None:
            raise BadInputError(table.error or "No table loaded.")
        if not len(self._rows):
            raise BadInputError("No cell of this table is missing: hide some at random (a positive rate).")
        r = int(self._rows[min(self.row_position, len(self._rows) - 1)])
        columns = [str(c) for c in data.columns]
        is_missing = data.iloc[r].isna().to_numpy()
        mis = [c for c, m in zip(columns, is_missing) if m]
        categorical = table.categorical
        self._custom_error.visible = False
        self._updating = True
        try:
            self._feature.options = mis
            if self.feature not in mis:  # a category first: what this view adds to the numeric page
                self.feature = next((c for c in mis if c in categorical), mis[0])
        finally:
            self._updating = False
        with model.lock:
            fit = model.result
        if fit is None:
            raise _NoModel(model.error or "No fitted model yet: press Fit.")
        label = f"row {r}"
        j = columns.index(self.feature)
        truth = table.complete.iloc[r, j] if table.hidden[r, j] else None
        cm = model.numeric_conditional(r)
        if self.feature in categorical:
            levels, proba = model.level_probabilities(r, self.feature)
            bars = level_bars(levels, proba, truth)
            self._show_levels({"bars": bars, "xlabel": self.feature, "title": f"{label}: P({self.feature} | observed)"})
            self._level_line.object = level_text(self.feature, bars)
        else:
            f = [str(c) for c in fit.imputer.numeric_columns_].index(self.feature)
            s = slice_1d(cm, 0, f, rng=np.random.default_rng(self.seed), truth=None if truth is None else float(truth),
                         n_draws=self.n_draws)
            title = f"{label}: p({self.feature} | observed)"
            self._slice1d.update({"slice": s, "xlabel": self.feature, "title": title})
        categorical_cell = self.feature in categorical
        self._pane1d.visible, self._pane2d.visible = not categorical_cell, False
        self._pane_levels.visible = self._level_line.visible = categorical_cell
        # the components' weights given every observed cell of the row (categories included)
        posterior = cm.weights[0] if cm is not None else np.asarray(fit.imputer.weights_)
        self._weights.update({"prior": np.asarray(fit.imputer.weights_), "posterior": posterior})
        self._table.object = mixed_row_table(fit, cm, data.iloc[r], table.complete.iloc[r], table.hidden[r],
                                             categorical, r)
        self._table_note.visible = False
        hidden = int(table.hidden[r].sum())
        name = "" if isinstance(data.index, pd.RangeIndex) else f" ({md(data.index[r])})"
        self._row_info.object = (f"**{label}**{name} ({self.row_position + 1} of {len(self._rows)} incomplete rows): "
                                 f"{len(columns) - len(mis)} observed, {len(mis)} missing ({hidden} hidden at random, "
                                 f"true value known) · location model, K = {fit.imputer.n_components_}")

    # ------------------------------------------------------------------ downloads
    def _model_label(self) -> tuple[str, str]:
        """``(short name for file names, readable description)`` of the model shown."""
        if self.model_kind == "vb":
            vb = self.vb_model
            density = "Student-t predictive" if self.density == "student_t" else "plug-in Gaussians"
            return (f"vb_K{vb.n_components}", f"the variational DP mixture shown (truncation K = {vb.n_components}, "
                                              f"{vb.n_effective} effective components, {density})")
        em = self.em_model
        return (f"em_K{em.n_components}", f"the EM mixture shown (K = {em.n_components}, {em.covariance_type} "
                                          "covariances)")

    def _download_stem(self) -> tuple:
        dm = self.em_model.data_model
        data = dm.data
        applied = dm.mask.mechanism if dm.mask is not None else dm.mechanism
        return ((data.name if data is not None and data.name else dm.dataset),
                "" if applied == "none" else applied, self._model_label()[0])

    def _download_note(self) -> str:
        return (f"Every row of the data imputed by {self._model_label()[1]}: the single imputation is the "
                "conditional mean E[x<sub>mis</sub> | x<sub>obs</sub>], the *m imputations* are draws from "
                f"p(x<sub>mis</sub> | x<sub>obs</sub>) (seed {self.seed}). CSV / Parquet: one long table, "
                "`imputation` 0 = the single imputation, 1..m = draws; netCDF: an `imputation` dimension.")

    def imputations(self, n_imputations: int = 0) -> PageImputations:
        """Every data row imputed by the model and density shown: conditional means and ``n_imputations`` draws.

        Uses the model's current state (a fit still running: its latest iteration, said in ``source``);
        draws use ``seed``. Raises BadInputError (readable) without a fitted model or finite imputations.
        """
        model = self.model
        with model.lock:  # the state and the run's data of one run (a worker may be stepping)
            data, prepared = self.em_model.data_model.data, model.em_data
            cm = self.conditional(None) if prepared is not None else None
            iteration, stop = model.iteration, model.stop_reason
        if cm is None or data is None:
            raise BadInputError(model.error or self.em_model.data_model.error
                                or "No fitted model yet: press Fit, then download.")
        if prepared.X.shape != data.values.shape:  # new data published, their run not started yet
            raise BadInputError("The data changed while the file was being prepared: click again.")
        imputed = np.asarray(cm.mean(), dtype=float)
        samples = (np.asarray(cm.sample(n_imputations, np.random.default_rng(self.seed)), dtype=float)
                   if n_imputations else None)
        for what, values in (("conditional mean", imputed), ("draws", samples)):
            if values is not None and not np.isfinite(values).all():
                rows = np.flatnonzero(~np.isfinite(values.reshape(-1, *imputed.shape)).all(axis=(0, 2)))
                hint = (" The Student-t predictive has no mean where a component has at most 1 degree of freedom: "
                        "choose the plug-in Gaussian mixture." if self.model_kind == "vb" and self.density ==
                        "student_t" else " Refit the model (Fit) or change its settings.")
                raise BadInputError(f"The model gives no finite {what} for {rows.size} row(s) "
                                    f"(rows {', '.join(str(r) for r in rows[:5])}).{hint}")
        state = {"tol": f"converged after {iteration} iterations", "max_iter": f"stopped at max_iter = {iteration}",
                 "degenerate": f"stopped at iteration {iteration} (degenerate component)"}.get(
            stop, f"at iteration {iteration}, fit not finished")
        source = f"{self._model_label()[1]}, {state}, on the {data.n_samples} rows of {md(data.name or 'the data')}"
        if n_imputations:
            source += f"; {n_imputations} draws, seed {self.seed}"
        return PageImputations(imputed=imputed, samples=samples, missing=np.asarray(prepared.missing, dtype=bool),
                           columns=[str(c) for c in data.columns], source=source)

    @staticmethod
    def _row_table(cm, values, truth, columns, first=(), max_rows: int = MAX_TABLE_ROWS) -> pd.DataFrame:
        """Observed values and conditional read-outs, one row per feature, indexed by feature number.

        More than ``max_rows`` features: the ``first`` ones (the plotted features), then the
        missing ones, then the observed ones, up to ``max_rows``, in column order.
        """
        mean, sd = cm.mean()[0], np.sqrt(cm.variance()[0])
        lower, upper = cm.interval(0.95)
        shown = range(len(columns))
        if len(columns) > max_rows:
            miss = np.isnan(values)
            order = [*first, *np.flatnonzero(miss), *np.flatnonzero(~miss)]
            shown = sorted(list(dict.fromkeys(int(j) for j in order))[:max_rows])
        rows = []
        for j in shown:
            c = columns[j]
            missing = np.isnan(values[j])
            rows.append({
                "feature": c, "observed": "" if missing else f"{values[j]:.4g}",
                "E[x | obs]": f"{mean[j]:.4g}" if missing else "", "sd": f"{sd[j]:.3g}" if missing else "",
                "95% interval": f"[{lower[0, j]:.3g}, {upper[0, j]:.3g}]" if missing else "",
                "truth": f"{truth[j]:.4g}" if (missing and truth is not None) else "",
            })
        return pd.DataFrame(rows, index=list(shown))


class _NoModel(BadInputError):
    """No conditional to show: the model has no state (its error says why)."""


def _table_note(table: pd.DataFrame, values) -> str:
    """A line saying which features a shortened table shows ('' when it shows them all)."""
    n_features = len(values)
    if len(table) >= n_features:
        return ""
    miss = np.isnan(np.asarray(values, dtype=float))
    n_mis = int(miss.sum())
    shown_mis = int(miss[table.index.to_numpy()].sum())
    return (f"*The table shows {len(table)} of the {n_features} features: the plotted one(s) and the missing "
            f"ones first ({shown_mis} of {n_mis} missing, {len(table) - shown_mis} of {n_features - n_mis} "
            "observed).*")
