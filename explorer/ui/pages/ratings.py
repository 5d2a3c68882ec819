r"""The "Ratings" page: NMAR rating models (Marlin ch. 5) fitted live on a synthetic rating world.

One :class:`~explorer.ui.state.ratings_model.RatingsModel` (a world drawn by
:mod:`explorer.core.discrete.rating_world` and one of MAR MM, MM/CPT-v, MM/CPT-v+, MM/Logit-vd, DP, DP/CPT-v,
cRBM, cRBM/E-v) is stepped by the shared :class:`~explorer.ui.components.player.StepPlayer` (EM iterations,
Gibbs sweeps or contrastive-divergence updates, off the event loop when served). The page shows

* the selection model against the truth: :math:`\mu_v = P(r = 1 \mid x = v)` per value, the true
  :math:`\mu_v(s)`, the learned one (Logit-vd: the mean of :math:`\mu_{vd}` over items) and the
  moment estimate of digest 2.7 with its condition number;
* the objective per iteration (EM: the log posterior, which never decreases; Gibbs: the sampler's log joint;
  the conditional RBMs: the log pseudo-likelihood per training rating, a monitor CD does not maximise);
* one user's predictive distributions over 1..5 (eq. 5.4.24): a held-out item the user selected
  (r = 1), an item the user did not select (r = 0), and that same item had it been selected: an NMAR
  model predicts differently for the two values of r, a MAR model does not;
* on demand ("Compare models"), computed on the session's worker a slice at a time (Step and Play go on
  meanwhile) with a progress bar: the weak-generalisation NMAE of every available model at the chosen K
  and at every s, mean ± s.e. over a few worlds, on random items or on user-selected items.

The three plots are Bokeh figures made once per session (:mod:`explorer.ui.plots.rating_figures`): a frame
only replaces their sources' data (the bars are rows of one source), streams the new iterations of the
objective and sets their titles. What they draw is the model's last
:class:`~explorer.ui.state.ratings_model.RatingsSnapshot` (immutable, made under the model's lock on the
session's worker), turned into frames by pure functions (:func:`selection_frame`, :func:`trace_frame`,
:func:`predictive_frame`, :func:`comparison_table`) that the tests call, and drawn on the event loop: the
view has no lock and never waits for the model. Steps run on the session's worker through the
:class:`~explorer.ui.components.player.StepPlayer`.
"""

from __future__ import annotations

import threading

import numpy as np
import pandas as pd
import panel as pn
import param
from panel.viewable import Viewer

from explorer.core.validation import BadInputError
from explorer.ui.components.notebook import notebook_layout
from explorer.ui.components.player import StepPlayer
from explorer.ui.page import weak_callback
from explorer.ui.plots.rating_figures import ObjectiveTrace, PredictivePlot, SelectionBars
from explorer.ui.session import Redraw, SessionWorker, hold, push, run_then, served_doc
from explorer.ui.state.ratings_model import (
    MODELS,
    S_VALUES,
    RatingsComparison,
    RatingsModel,
    RatingsSnapshot,
    available_models,
)
from explorer.ui.text import md

__all__ = ["RatingsView", "comparison_table", "predictive_frame", "selection_frame", "trace_frame"]

MODEL_URL = ("n_users", "n_items", "n_clusters", "s", "data_seed", "model", "n_components", "seed", "user",
             "compare_ks", "repeats")
SERIES = ("true μ_v(s)", "learned μ_v", "moment estimate")
COLORS = {"true μ_v(s)": "#4d4d4d", "learned μ_v": "#d62728", "moment estimate": "#1f77b4",
          "rated": "#2ca02c", "unrated": "#9467bd", "if_selected": "#ff7f0e"}
VALUES = np.arange(1, 6)
PLOT_HEIGHT = 300
#: The predictive plot's curves: (key of predictive_frame, legend label, line dash).
CURVES = (("rated", "selected item (r = 1)", "solid"), ("unrated", "unselected item (r = 0)", "solid"),
          ("if_selected", "same item had r = 1", "dashed"))
#: Seconds of comparison the session's worker computes before it serves a Step or a Play tick that waits.
COMPARE_SLICE_S = 0.05

EXPLANATION = """
### What am I looking at?
Users rate items on 1..5, and **choose** which items they rate: an item whose rating would be *v* is
rated with probability μ<sub>v</sub> (the CPT-v selection model). In the synthetic world μ<sub>v</sub>(s) =
s (v − 3) + 0.5: with s > 0 high ratings are rated more often, so the observed ratings are not a fair
sample of all ratings (not missing at random). A **MAR** mixture learns the rating distribution from
the observed ratings as if they were a fair sample; the **NMAR** models (CPT-v, CPT-v+, Logit-vd,
DP/CPT-v) learn μ jointly with the mixture (Marlin 2008, chapter 5).

* **Selection model**: the learned μ<sub>v</sub> against the truth. The moment estimate solves
  Φ [1/μ] = 1 from the observed marginals (digest 2.7); a large condition number means it is unstable.
  At s = 0.25, μ<sub>1</sub> = 0: ratings of 1 are never observed, and no estimator can see them.
* **Predictive distributions** (eq. 5.4.24): an NMAR model predicts an item the user selected (r = 1)
  from the ratings it *would* have if selected, an unselected item (r = 0) from the ratings that make
  items go unselected, so the same item gets two different predictions. A MAR model gives one.
* **Compare models**: weak generalisation (held-out entries of the training users), NMAE = MAE / 1.6
  of the median prediction. On **random items** the MAR model's error grows with s and the NMAR
  models' does not; on **user-selected** items the MAR model does well (they look like its training
  data). The thesis found the same on Jester (figures 5.8-5.17) and Yahoo! (tables 5.1-5.2).
"""


# --------------------------------------------------------------------------- pure frame builders
def _finite(a) -> np.ndarray:
    a = np.asarray(a, dtype=float)
    return np.where(np.isfinite(a), a, np.nan)


def selection_frame(snap: RatingsSnapshot) -> dict:
    """What the selection-model plot draws: ``heights`` (one row per series of :data:`SERIES`, one column per
    rating value; NaN: no bar), a ``title`` and a ``note``."""
    sel = snap.selection
    nan = np.full(len(VALUES), np.nan)
    if sel is None:
        return {"heights": np.full((len(SERIES), len(VALUES)), np.nan), "title": "No world: see the message above",
                "note": ""}
    learned = sel["learned"] if sel["learned"] is not None else nan
    moment = _finite(sel["moment"]) if sel["moment"] is not None else nan
    heights = np.vstack([np.asarray(sel["truth"], dtype=float), np.asarray(learned, dtype=float), moment])
    spec = snap.spec
    label, cond = spec.label, sel["condition"]
    if spec.kind == "cd":
        what = (f"**{label}** models P(x | r), not P(r | x): it has no μ_v to draw (no red bars)."
                + (" Its r = 0 visible biases b⁰_v play μ_v's part, learned from the hold-out users' random-item "
                   "ratings (eq. 5.7.18)." if spec.nmar else
                   " It treats selected and unselected items alike, like a MAR model."))
    elif sel["learned"] is None:
        what = f"**{label}** has no selection model: under MAR μ_v is the same for every v (no red bars)."
    elif sel["learned_vd"] is not None:
        what = f"**{label}**: the red bars are μ_vd averaged over the items (the item effects ω_d differ)."
    elif sel["fixed"]:
        what = f"**{label}**: μ is fixed from the hold-out users' random-item ratings (eqs. 5.4.25-29), not learned."
    else:
        what = f"**{label}**: μ_v learned by {'Gibbs sampling (mean over samples)' if spec.kind == 'gibbs' else 'EM'}."
    notes = [what]
    if cond is not None:
        notes.append("Moment estimate (Φ [1/μ] = 1, digest 2.7): condition number "
                     + ("∞" if not np.isfinite(cond) else f"{cond:.3g}") + ".")
    if sel["moment"] is not None and not np.all(np.isfinite(sel["moment"])):
        bad = ", ".join(str(v) for v, m in zip(VALUES, sel["moment"]) if not np.isfinite(m))
        notes.append(f"Its value for rating {bad} is not finite (never observed), left out.")
    title = f"Selection model P(r = 1 | x = v) · {label}"
    return {"heights": heights, "title": title, "note": " ".join(notes)}


def trace_frame(snap: RatingsSnapshot) -> dict:
    """The objective per iteration: ``x``, ``y`` and a ``title`` (EM: log posterior; Gibbs: log joint; CD: the
    log pseudo-likelihood per training entry, a monitor that CD does not maximise)."""
    y = np.asarray(snap.trace, dtype=float)
    x = np.arange(y.size)
    kind = snap.spec.kind
    what = {"gibbs": "Gibbs sweep", "cd": "CD update"}.get(kind, "EM iteration")
    reason = {"tol": ", converged", "max_iter": ", max_iter", "n_sweeps": ", all sweeps done",
              "error": ", stopped"}.get(snap.stop_reason, "")
    if snap.trace_name == "clusters":
        name, head = "clusters", "Clusters"
    else:
        name = {"gibbs": "log joint", "cd": "log pseudo-likelihood per rating"}.get(kind, "log posterior")
        head = f"Objective ({name})" if kind != "cd" else "Log pseudo-likelihood"  # short: the title must fit
    return {"x": x, "y": _finite(y), "title": f"{head} · {what} {snap.iteration}{reason}",
            "xlabel": what, "ylabel": name}


def predictive_frame(snap: RatingsSnapshot) -> dict:
    """One user's predictive distributions over 1..5: three curves, two true ratings and a title."""
    p = snap.predictive
    nan = np.full(len(VALUES), np.nan)
    if p is None:
        return {"rated": nan, "unrated": nan, "if_selected": nan, "true": (np.empty(0), np.empty(0)),
                "title": "No fit: see the message above", "sentence": ""}
    rated = p["p_rated"] if p["p_rated"] is not None else nan
    unrated = p["p_unrated"] if p["p_unrated"] is not None else nan
    alt = p["p_unrated_if_selected"] if p["p_unrated_if_selected"] is not None else nan
    tx = [t for t in (p["true_rated"], p["true_unrated"]) if t is not None]
    ty = [float(rated[p["true_rated"] - 1]) if p["true_rated"] is not None else None,
          float(unrated[p["true_unrated"] - 1]) if p["true_unrated"] is not None else None]
    title = (f"User {p['user']}: item {p['rated_item']} (selected, true {p['true_rated']}), "
             f"item {p['unrated_item']} (not selected, true {p['true_unrated']})")
    sentence = ""
    if p["p_unrated"] is not None:
        mean = lambda q: float(np.dot(VALUES, q))  # noqa: E731
        gap = float(np.abs(np.asarray(unrated) - np.asarray(alt)).sum() / 2)
        sentence = (f"For item {p['unrated_item']} the model predicts a mean rating of **{mean(unrated):.2f}** as it "
                    f"is (not selected, r = 0) and **{mean(alt):.2f}** had the user selected it (r = 1): the two "
                    f"predictive distributions differ by {gap:.2f} in total variation"
                    + (" (a MAR model ignores r: they are the same)." if not snap.spec.nmar else
                       ". The NMAR model reads the choice itself as information about the rating."))
    return {"rated": rated, "unrated": unrated, "if_selected": alt,
            "true": (np.array(tx, float), np.array([y for y in ty if y is not None], float)),
            "title": title, "sentence": sentence}


def comparison_table(rows: list[dict], kind: str = "random") -> pd.DataFrame:
    """Rows (model, K) by columns s: 'NMAE ± s.e.' on ``kind`` items ('random' or 'user')."""
    if not rows:
        return pd.DataFrame()
    table: dict = {}
    short = lambda x: f"{x:.3f}".replace("0.", ".", 1) if 0 <= x < 1 else f"{x:.3f}"  # noqa: E731  (narrow cells)
    for r in rows:
        key = (r["model"], "–" if r["K"] is None else str(r["K"]))
        cell = "failed" if r.get("error") else f"{short(r[kind])}±{short(r[kind + '_se'])}"
        table.setdefault(key, {})["s=" + (f"{r['s']:g}".removeprefix("0") if r["s"] else "0")] = cell
    out = pd.DataFrame([{"model": m, "K": k} | cells for (m, k), cells in table.items()])
    return out.fillna("")


# --------------------------------------------------------------------------- the view
class RatingsView(Viewer):
    """The Ratings page: a :class:`RatingsModel`, its Step / Play controls, three plots and a comparison table.

    The plots draw the model's last :class:`~explorer.ui.state.ratings_model.RatingsSnapshot`, made on the
    session's worker after every frame (at once when not served) and drawn on the event loop: the view has
    no lock of its own and never waits for the model.

    Parameters
    ----------
    model : RatingsModel, optional
    auto_fit : bool
        Play each new run (new world or settings) to its end; the run shown when the page opens is fitted to
        its end at once (:meth:`start`).
    """

    model = param.ClassSelector(class_=RatingsModel)
    auto_fit = param.Boolean(default=True, doc="Play every new run to its end")
    table_kind = param.Selector(default="random", objects=["random", "user"], doc="Items the table scores")

    def __init__(self, **params):
        if params.get("model") is None:
            params["model"] = RatingsModel()
        super().__init__(**params)
        self._doc = served_doc()  # the session's document (its worker computes), None when not served
        self._redraw = Redraw(self._draw)  # Bokeh models are changed on the session's event loop only
        self._request_lock = threading.Lock()  # guards the two flags below, never held while computing
        self._snapshot_pending = False  # a snapshot is being made
        self._snapshot_stale = False  # the model changed meanwhile: make another one after it
        self._snapshot_key = ("ratings-snapshot", id(self))
        self._compare_key = ("ratings-compare", id(self))
        self._fit_key = ("ratings-fit", id(self))
        self._compare_token = 0
        self._compare_rows: list[dict] = []
        self._compare_running = False
        self._snapshot = self.model.snapshot()  # the page is being built: nothing steps the model yet
        self.player = StepPlayer(models=[self.model], labels=["fit"], steps_per_tick=5, period=200)
        self._build()
        m = self.model
        self.player.param.watch(weak_callback(self._on_frame), "frame")
        m.param.watch(weak_callback(self._on_run), ["run_id", "error"])
        m.param.watch(weak_callback(self._on_user), ["user"])
        m.param.watch(weak_callback(self._on_settings), ["n_users", "n_items", "n_clusters", "s", "data_seed", "model",
                                                         "n_components", "seed"])
        m.param.watch(weak_callback(self._on_compare_settings),
                      ["n_users", "n_items", "n_clusters", "data_seed", "compare_ks", "repeats"])
        self.param.watch(weak_callback(self._on_kind), ["table_kind"])
        self._draw()

    def __panel__(self):
        # the notebook's layout (a server shows ``sidebar`` and ``main`` in its template): made when first shown
        if self._layout is None:
            self._layout = notebook_layout(self.sidebar, self.main)
        return self._layout

    # ------------------------------------------------------------------ layout (built once)
    def _build(self):
        m = self.model
        have = available_models()
        self._missing = [MODELS[k].label for k, ok in have.items() if not ok]
        options = {MODELS[k].label: k for k, ok in have.items() if ok}
        # Bokeh figures made once: a frame only replaces their sources' data (explorer.ui.plots.rating_figures)
        self._selection = SelectionBars([(name, COLORS[name]) for name in SERIES], "rating v",
                                        "μ_v = P(r = 1 | x = v)", height=PLOT_HEIGHT, css_class="ratings-selection")
        self._trace = ObjectiveTrace(height=PLOT_HEIGHT, css_class="ratings-trace")
        self._predictive = PredictivePlot([(key, label, COLORS[key], dash) for key, label, dash in CURVES],
                                          "true ratings", "rating", "probability", height=PLOT_HEIGHT,
                                          css_class="ratings-predictive")
        self._selection_note = pn.pane.Markdown("", sizing_mode="stretch_width", margin=(0, 10))
        self._predictive_note = pn.pane.Markdown("", sizing_mode="stretch_width", margin=(0, 10),
                                                 css_classes=["predictive-note"])
        self._alert = pn.pane.Alert("", alert_type="danger", visible=False, sizing_mode="stretch_width")
        self._info = pn.pane.Markdown("", sizing_mode="stretch_width", margin=(0, 10), css_classes=["ratings-info"])
        # comparison
        self._compare_button = pn.widgets.Button(label="Compare models", color="primary", width=160)
        self._compare_button.on_click(self._on_compare_click)
        self._progress = pn.indicators.Progress(value=0, max=1, visible=False, sizing_mode="stretch_width",
                                                bar_color="primary")
        self._table = pn.pane.DataFrame(None, index=False, sizing_mode="stretch_width", margin=(0, 10),
                                        text_align="start", css_classes=["compare-table"],
                                        styles={"font-size": "12px"})
        self._table_note = pn.pane.Markdown("*Press **Compare models** to fit every model at the chosen K and at "
                                            "each s, on a few worlds.*", sizing_mode="stretch_width",
                                            margin=(0, 10), css_classes=["compare-note"])
        kind = pn.widgets.RadioButtonGroup.from_param(self.param.table_kind, options={
            "random items": "random", "user-selected items": "user"}, width=300)
        comparison = pn.Column(
            pn.pane.Markdown("#### Weak generalisation NMAE against K and s", margin=(0, 10)),
            pn.Row(self._compare_button, kind), self._progress, self._table, self._table_note,
            sizing_mode="stretch_width", min_width=420, css_classes=["ratings-compare"])
        # sidebar
        self._model_select = pn.widgets.Select.from_param(m.param.model, label="Model", options=options)
        self._k_slider = pn.widgets.IntSlider.from_param(m.param.n_components, label="Components K", start=1, end=10,
                                                         disabled=not MODELS[m.model].uses_k)
        user_max = max(0, m.n_users - 1)
        self._user = pn.widgets.IntInput.from_param(m.param.user, label="User (predictive)", start=0, end=user_max)
        s_widget = pn.widgets.Select.from_param(m.param.s, label="Value effect s (μ_v = s (v − 3) + 0.5)",
                                                options={f"{s:g}": s for s in S_VALUES})
        missing = (pn.pane.Markdown(f"*Not available yet (their modules are missing): "
                                    f"{', '.join(self._missing)}.*", margin=(0, 10))
                   if self._missing else pn.pane.Markdown("", visible=False))
        sidebar = pn.Column(
            "### Run", self.player,
            pn.widgets.Checkbox.from_param(self.param.auto_fit, label="Run to the end when settings change"),
            "### Model", self._model_select, missing,
            self._k_slider,
            pn.widgets.IntInput.from_param(m.param.seed, label="Seed (initialisation, sampler)"),
            self._user,
            "### World", s_widget,
            pn.widgets.IntInput.from_param(m.param.n_users, label="Users N", step=50),
            pn.widgets.IntInput.from_param(m.param.n_items, label="Items D"),
            pn.widgets.IntSlider.from_param(m.param.n_clusters, label="True clusters", start=1, end=10),
            pn.widgets.IntInput.from_param(m.param.data_seed, label="World seed"),
            "### Comparison",
            pn.widgets.CheckButtonGroup.from_param(m.param.compare_ks, label="K values"),
            pn.widgets.IntSlider.from_param(m.param.repeats, label="Worlds per cell", start=2, end=10),
            sizing_mode="stretch_width", min_width=300,
        )
        self.sidebar = sidebar
        row1 = pn.FlexBox(pn.Column(self._selection.pane, self._selection_note, sizing_mode="stretch_width",
                                    styles={"flex": "1 1 460px"}),
                          pn.Column(self._trace.pane, sizing_mode="stretch_width", styles={"flex": "1 1 420px"}),
                          sizing_mode="stretch_width", flex_wrap="wrap")
        row2 = pn.FlexBox(pn.Column(self._predictive.pane, self._predictive_note, sizing_mode="stretch_width",
                                    styles={"flex": "1 1 460px"}),
                          pn.Column(comparison, sizing_mode="stretch_width", styles={"flex": "1 1 420px"}),
                          sizing_mode="stretch_width", flex_wrap="wrap")
        self.main = pn.Column(self._alert, self._info, row1, row2,
                              pn.pane.Markdown(EXPLANATION, sizing_mode="stretch_width"), sizing_mode="stretch_width")
        self._layout = None

    # ------------------------------------------------------------------ URL
    def url_bindings(self) -> list:
        """The settings kept in the URL: the world, the model and the comparison settings."""
        return [(self.model, {k: k for k in MODEL_URL})]

    # ------------------------------------------------------------------ actions
    def start(self) -> None:
        """Fit the current run to its end (the page calls this once loaded).

        Served, the fit is one job on the session's worker (:meth:`RatingsModel.finish`: a fit of the same
        settings done before in this process is taken from its cache) and the page draws its end once: opening
        the page costs at most the fit's maths and one frame, not a frame per tick. Elsewhere the player plays it.
        """
        if not self.auto_fit or self.model.finished:
            return
        if SessionWorker.of(self._doc) is None:
            self.player.play()
            return
        model, run_id = self.model, self.model.run_id

        def work() -> None:
            model.finish(run_id)  # nothing when a new run started meanwhile

        def then(result, error) -> None:
            if model.run_id == run_id and model.finished:
                self.player.tick()  # nothing left to step: the read-out and the plots show the end

        run_then(work, then, key=self._fit_key, doc=self._doc)

    def refresh(self) -> None:
        """Take a new snapshot of the model and draw it.

        Served, the snapshot is made on the session's worker (it waits there while a step holds the model's
        lock) and drawn on the event loop; elsewhere both happen at once. Requests made while one is being
        made are folded into one more after it.
        """
        with self._request_lock:
            if self._snapshot_pending:
                self._snapshot_stale = True
                return
            self._snapshot_pending = True
        taken = False
        try:
            taken = run_then(self.model.snapshot, self._on_snapshot, key=self._snapshot_key, doc=self._doc)
        finally:
            if not taken:  # the session is over (or the snapshot raised here): nothing is on its way
                with self._request_lock:
                    self._snapshot_pending = self._snapshot_stale = False

    def _on_snapshot(self, snapshot, error) -> None:
        """On the event loop (or at once when not served): draw the new snapshot, then make the one asked meanwhile."""
        with self._request_lock:
            self._snapshot_pending = False
            again, self._snapshot_stale = self._snapshot_stale, False
        if snapshot is not None:
            self._snapshot = snapshot
            self._redraw()
        if again:
            self.refresh()

    def _draw(self) -> None:
        snap = self._snapshot
        with hold():
            if snap.readout_error:  # the plots keep what they showed
                self._alert.object, self._alert.visible = md(snap.readout_error), True
                return
            sel, tr, pr = selection_frame(snap), trace_frame(snap), predictive_frame(snap)
            self._selection.update(sel["heights"], sel["title"])
            self._trace.update(snap.run_id, tr["y"], tr["title"], tr["xlabel"], tr["ylabel"])
            self._predictive.update(pr, pr["true"], pr["title"])
            self._selection_note.object = sel["note"]
            self._predictive_note.object = pr["sentence"]
            self._update_messages(snap)
        push(self._selection.pane, self._trace.pane, self._predictive.pane)

    def _update_messages(self, snap: RatingsSnapshot) -> None:
        self._alert.object = md(snap.error) if snap.error else ""
        self._alert.visible = bool(snap.error)
        w = snap.world
        if w is None:
            self._info.object = ""
            return
        text = (f"**World**: {w['n_users']} training users × {w['n_items']} items, s = {w['s']:g}; "
                f"{w['n_observed']} observed ratings ({w['selected_fraction']:.0%} of entries "
                f"selected), {w['n_random']} random and {w['n_user']} user-selected "
                f"held-out items; {w['n_holdout_users']} hold-out users (their random-item ratings: CPT-v+, cRBM/E-v).")
        scores = snap.scores
        if scores is not None:
            text += (f" **{snap.spec.label}**, iteration {snap.iteration}: weak NMAE "
                     f"**{scores['random']:.3f}** on random items, **{scores['user']:.3f}** on user-selected items.")
        self._info.object = text
        end = max(0, w["n_users"] - 1)
        if self._user.end != end:
            self._user.end = end

    # ------------------------------------------------------------------ comparison (on the session's worker)
    def compare(self) -> None:
        """Fit every available model at the chosen K and every s.

        Served, on the session's worker, a slice of :data:`COMPARE_SLICE_S` at a time: Step and Play are served
        between two slices, and the progress bar moves after each. Elsewhere at once.
        """
        settings = self.model.compare_settings()
        self._compare_token += 1
        token = self._compare_token
        self._compare_rows = []
        self._compare_running = True
        self._progress.value = 0
        self._progress.visible = True
        self._table_note.object = "*Fitting the models…*"
        self._compare_button.disabled = True
        comparison = RatingsComparison(**settings)
        worker = SessionWorker.of(self._doc)
        if worker is None:  # Jupyter, scripts, tests
            try:
                comparison.advance(progress=self._set_progress)
            except BadInputError as exc:
                self._show_comparison(token, [], str(exc), comparison.seconds)
                return
            self._show_comparison(token, comparison.rows, "", comparison.seconds)
            return
        self._compare_slice(worker, comparison, token)

    def _compare_slice(self, worker: SessionWorker, comparison: RatingsComparison, token: int) -> None:
        """Queue the next slice of ``comparison``; its result is shown on the event loop, which queues the next."""
        def cancelled() -> bool:
            return token != self._compare_token

        def work():
            comparison.advance(COMPARE_SLICE_S, cancelled=cancelled)
            rows = tuple(comparison.rows) if comparison.finished else None
            return comparison.done, comparison.total, rows, comparison.seconds

        def then(result, error) -> None:
            if token != self._compare_token:
                return  # dropped (new settings, or another comparison started)
            if error is not None:
                message = str(error) if isinstance(error, BadInputError) else f"the comparison failed ({error!r})"
                self._show_comparison(token, [], message, comparison.seconds)
                return
            done, total, rows, seconds = result
            self._set_progress(done, total)
            if rows is not None:
                self._show_comparison(token, list(rows), "", seconds)
            else:
                self._compare_slice(worker, comparison, token)

        worker.submit(work, then, key=self._compare_key)  # refused only when the session is over

    def _set_progress(self, done: int, total: int) -> None:
        # one at a time, max first: Progress checks value against the max it has at that moment
        self._progress.max = max(total, 1)
        self._progress.value = min(done, self._progress.max)

    def _show_comparison(self, token: int, rows: list, error: str, seconds: float) -> None:
        if token != self._compare_token:
            return
        self._compare_running = False
        self._compare_button.disabled = False
        self._progress.visible = False
        self._compare_rows = rows
        if error:
            self._table.object = None
            self._table_note.object = f"*No comparison: {md(error)}*"
            return
        self._show_table()
        settings = self.model.compare_settings()
        missing = f" Not compared (modules missing): {', '.join(self._missing)}." if self._missing else ""
        failed = sorted({f"{r['model']} (s = {r['s']:g}): {r['error']}" for r in rows if r.get("error")})
        if failed:
            missing += " Failed: " + "; ".join(md(f) for f in failed[:4]) + (" …" if len(failed) > 4 else "")
        self._table_note.object = (
            f"NMAE (MAE / 1.6 of the median prediction) ± s.e. over {settings['repeats']} worlds of "
            f"{settings['n_users']} users × {settings['n_items']} items, world seeds {settings['seed']}.."
            f"{settings['seed'] + settings['repeats'] - 1}; EM to a tolerance of 1e-4 per user (at most 100 "
            f"iterations), Gibbs 100 sweeps (25 burn-in), RBMs 100 CD updates. Computed in {seconds:.1f} s.{missing}")

    def _show_table(self) -> None:
        self._table.object = comparison_table(self._compare_rows, self.table_kind) if self._compare_rows else None

    # ------------------------------------------------------------------ callbacks
    def _on_frame(self, event=None) -> None:
        self.refresh()

    def _on_run(self, *events) -> None:
        self.refresh()

    def _on_settings(self, *events) -> None:
        self._k_slider.disabled = not MODELS[self.model.model].uses_k  # a DP mixture has no K
        if self.auto_fit and not self.model.finished:
            self.player.play()

    def _on_user(self, *events) -> None:
        self.refresh()

    def _on_kind(self, *events) -> None:
        self._show_table()

    def _on_compare_settings(self, *events) -> None:
        if self._compare_rows or self._compare_running:
            self._compare_token += 1  # a running comparison is dropped
            self._compare_running = False
            self._compare_button.disabled = False
            self._progress.visible = False
            self._compare_rows = []
            self._table.object = None
            self._table_note.object = "*The settings changed: press **Compare models** again.*"

    def _on_compare_click(self, event=None) -> None:
        self.compare()
