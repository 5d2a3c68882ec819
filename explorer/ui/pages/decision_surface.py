"""The "Decision surfaces" page: where classifiers put their boundaries when features go missing.

Marlin (2008) chapter 6, figures 6.1-6.7 (digest section 7, figure 9). One
:class:`~explorer.ui.state.decision_model.DecisionModel` holds the data and the chosen method; the
page draws, with linked axes (:class:`~explorer.ui.plots.surface_panels.SurfacePanels`):

* the main panel: the training rows with both features observed, coloured by class, over the
  method's :math:`P(c \\mid x, y)` (binary: colour of the likelier class, stronger where it is
  surer; the 0.5 contour solid, 0.25 / 0.75 dashed; more classes: the decision boundaries), and
  for multiple imputation the imputed training points, faint;
* a vertical strip at its left: the rows missing x at their observed y, over the method's
  :math:`P(c \\mid y)` as a 1-D heat strip (y axis shared with the main panel);
* a horizontal strip below: the rows missing y at their observed x, over :math:`P(c \\mid x)`
  (x axis shared).

The figures are plain Bokeh figures made once per session; a frame (plain arrays, built by
:func:`surface_frame`) only assigns their sources' data. Every computation runs on the session's one
worker (:class:`~explorer.ui.session.SessionWorker`) and is drawn on the event loop: the chosen method's
fit (the plots show Panel's loading indicator meanwhile), the table of every method one method per job
(with a progress bar; it waits while Play runs, so the steps keep their pace), the EM mixture classifier's
steps (a :class:`~explorer.ui.components.player.StepPlayer`) and the surface of its current state.
Results computed for settings that changed meanwhile are dropped; fits and scores are shared by every
session of the server (the start screen's table is computed once). The view holds no lock.
"""

from __future__ import annotations

import threading
from functools import partial

import contourpy
import numpy as np
import panel as pn
import param
from panel.viewable import Viewer

from explorer.core.missingness.mechanisms import MECHANISMS
from explorer.learn.methods import FAMILIES, METHODS, MISSING_MODULES
from explorer.ui.components.frame_jobs import LatestFrame
from explorer.ui.components.notebook import notebook_layout
from explorer.ui.components.player import StepPlayer
from explorer.ui.components.upload import FileUpload, decoded
from explorer.ui.page import sync_with_url
from explorer.ui.plots.surface_panels import MAIN, PALETTE, STRIP, SurfacePanels
from explorer.ui.session import Redraw, hold, push, run_then, served_doc
from explorer.ui.state.data_model import NO_MECHANISM, UPLOADED
from explorer.ui.state.decision_model import (
    SYNTHETIC,
    ClassificationData,
    DecisionModel,
    EMClassifierRun,
    Surface,
    known_score,
    shared_score,
    shared_surface,
)
from explorer.ui.text import html, md

__all__ = ["DATASET_LABELS", "PALETTE", "DecisionView", "empty_frame", "surface_frame"]

#: strongest tint of the background (1 = the class colour itself at full confidence)
MAX_TINT = 0.6
DATASET_LABELS = {"simple": "Simple (Marlin 6.4)", "mix": "Mix (Marlin 6.4)", "overlap": "Overlap (Marlin 6.4)",
                  "xor": "XOR (Marlin 6.4)", "iris": "Iris", "wine": "Wine", "ionosphere": "Ionosphere",
                  "hepatitis": "Hepatitis (real gaps)", "two_moons": "Two moons", "three_blobs": "Three blobs",
                  UPLOADED: "Uploaded file"}

EXPLANATION = """
### What am I looking at?
A classifier trained on two features, some of them **missing** (Marlin 2008, chapter 6). The big
panel shows the training rows with **both** features observed, coloured by class, on top of the
method's probability **P(class | x, y)**: the background takes the colour of the likelier class,
stronger where the method is surer; the solid line is where two classes are equally likely (for
two classes the 0.5 contour; dashed: 0.25 and 0.75).

The **left strip** holds the rows whose **x is missing**, placed at their observed y (spread
sideways only to be visible), over the method's **P(class | y)**: what it predicts when only y is
known. The **bottom strip** does the same for the rows whose **y is missing**, over **P(class | x)**.
Every method sees a missing feature as NaN and treats it its own way:

* **Generative** classifiers (the EM mixture classifier, LDA / QDA / LDA-FA) *marginalise* the
  missing feature: exact, if the class densities are right.
* **Zero / mean imputation** put the missing value at 0 or at the mean: the strips then show a slice
  of the main surface along the axis x = 0 (or the mean), often a poor one (Mix).
* **Multiple imputation** draws the missing value from a model of the features (faint dots in the
  main panel) and averages the predictions of one classifier per completed data set.
* **Reduced models** train one classifier per pattern of observed features; **response
  augmentation** gives the classifier the missingness indicators as extra inputs.

The **table** scores every method on held-out test rows that are incomplete in the same way: the
**loss** is the mean negative log-probability of the true class, the **error** the percentage
misclassified (Marlin's Tables 6.1-6.4 use the same two numbers). For the **EM mixture
classifiers**, Step / Play run EM one iteration at a time and the surface follows; the table shows
the converged fit.

**Try** *Mix* with *LR, zero imputation*, then *LR, mean imputation*, then *LR, multiple
imputation*: the strips show why zero and mean imputation fail there. *Overlap*: nothing works
once a feature is missing, because the classes overlap along each axis.
"""


# --------------------------------------------------------------------------- pure frame builders
def _hex_rgb(color: str) -> np.ndarray:
    c = color.lstrip("#")
    return np.array([int(c[i:i + 2], 16) for i in (0, 2, 4)], dtype=float) / 255.0


_RGB = np.array([_hex_rgb(c) for c in PALETTE])


def tint(proba: np.ndarray) -> np.ndarray:
    """RGB colours (..., 3) in [0, 1] of probabilities (..., C): the likeliest class's colour over white,
    its strength ``MAX_TINT * (p_max - 1/C) / (1 - 1/C)`` (white where every class is equally likely)."""
    proba = np.asarray(proba, dtype=float)
    C = proba.shape[-1]
    top = proba.argmax(axis=-1)
    conf = (proba.max(axis=-1) - 1.0 / C) / (1.0 - 1.0 / C)
    a = MAX_TINT * np.clip(conf, 0.0, 1.0)[..., None]
    return 1.0 - a * (1.0 - _RGB[top % len(_RGB)])


def _lines(xs, ys, z, level: float) -> list[np.ndarray]:
    gen = contourpy.contour_generator(xs, ys, z, line_type="Separate")
    return [np.asarray(seg) for seg in gen.lines(level) if len(seg) > 1]


def boundaries(xs, ys, proba) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """``(solid, dashed)`` contour paths (arrays (m, 2)) of a surface ``proba`` (ny, nx, C).

    Two classes: the 0.5 contour of P(class 1) solid, 0.25 and 0.75 dashed. More classes: for each
    class the 0 level of ``p_c - max_{c' != c} p_c'`` (the edge of its decision region), no dashes.
    """
    C = proba.shape[-1]
    if C == 2:
        p1 = proba[..., 1]
        return _lines(xs, ys, p1, 0.5), _lines(xs, ys, p1, 0.25) + _lines(xs, ys, p1, 0.75)
    solid = []
    for c in range(C):
        others = np.delete(proba, c, axis=-1).max(axis=-1)
        solid += _lines(xs, ys, proba[..., c] - others, 0.0)
    return solid, []


def _jitter(n: int, seed: int = 7) -> np.ndarray:
    return 0.15 + 0.7 * np.random.default_rng(seed).random(n)


def _pts(x, y, cls) -> dict:
    return {"x": np.asarray(x, dtype=float), "y": np.asarray(y, dtype=float), "cls": np.asarray(cls, dtype=int)}


def empty_frame(data: ClassificationData | None = None) -> dict:
    """A frame with the data's points and a white background (no method drawn yet).

    Images are RGB (rows, columns, 3) with the first row at the bottom (the smallest y), as Bokeh draws
    them; ``cls`` are class codes.
    """
    if data is None:
        xlim, ylim, labels = (0.0, 1.0), (0.0, 1.0), ("x", "y")
        X, y = np.empty((0, 2)), np.empty(0, dtype=int)
    else:
        xlim, ylim, X, y, labels = data.xlim, data.ylim, data.X_train, data.y_train, data.columns
    miss = np.isnan(X)
    full, mx, my = ~miss.any(axis=1), miss[:, 0] & ~miss[:, 1], miss[:, 1] & ~miss[:, 0]
    white = np.ones((2, 2, 3))
    return {
        "xlim": xlim, "ylim": ylim, "xlabel": str(labels[0]), "ylabel": str(labels[1]),
        "rgb": white, "left_rgb": white[:, :1], "bottom_rgb": white[:1],
        "solid": [], "dashed": [],
        "points": _pts(X[full, 0], X[full, 1], y[full]),
        "imputed": _pts([], [], []),
        "left_points": {"u": _jitter(int(mx.sum())), "y": X[mx, 1], "cls": np.asarray(y[mx], dtype=int)},
        "bottom_points": {"x": X[my, 0], "v": _jitter(int(my.sum()), 8), "cls": np.asarray(y[my], dtype=int)},
    }


def surface_frame(surface: Surface | None, data: ClassificationData | None) -> dict:
    """Everything the three plots draw for one :class:`Surface` (``None``: the data on white).

    Images are oriented as Bokeh draws them (first row = bottom = smallest y, like ``surface.ys``).
    """
    frame = empty_frame(data)
    if surface is None or data is None:
        return frame
    xs, ys, proba = surface.xs, surface.ys, surface.proba
    solid, dashed = boundaries(xs, ys, proba)
    frame.update(
        rgb=tint(proba), left_rgb=tint(surface.proba_y_only)[:, None, :],
        bottom_rgb=tint(surface.proba_x_only)[None, :, :], solid=solid, dashed=dashed,
        imputed=_pts(surface.imputations[:, 0], surface.imputations[:, 1], surface.imputation_class),
    )
    return frame


# --------------------------------------------------------------------------- the page
class DecisionView(Viewer):
    """The page: sidebar (method, data, mechanism, Step / Play), the linked plots and the table.

    Parameters
    ----------
    model : DecisionModel, optional
        Default: a new one (Mix, the thesis's missingness patterns).
    score_table : bool
        Score every method for the table. Served, this runs on the session's worker, one method per job;
        outside a server (Jupyter, scripts) on the caller's thread, some seconds per data change (rows
        already scored by any session are reused).
    """

    model = param.ClassSelector(class_=DecisionModel)
    score_table = param.Boolean(default=True, doc="Score every method (the table)")

    def __init__(self, **params):
        if params.get("model") is None:
            params["model"] = DecisionModel()
        super().__init__(**params)
        m = self.model
        self.run = EMClassifierRun(model=m) if any(s.stepped for s in METHODS.values()) else None
        self.player = StepPlayer(models=[self.run], labels=["EM"], steps_per_tick=2) if self.run else None
        # Bokeh models are changed on the session's event loop only; computations run on its worker
        doc = served_doc()  # the session's document (None: Jupyter, scripts, tests)
        self._redraw = Redraw(self._draw, doc=doc)
        self._run_frames = LatestFrame(self._compute_run_frame, self._show_run_frame, doc=doc)
        self._surface_token = 0  # increases with every surface request (older fits are dropped)
        self._static = (None, None, None)  # (surface, data, frame) last built for a fitted method
        self._table_lock = threading.Lock()  # guards the table's queue (asked from widget threads and the loop)
        self._table_token = 0  # increases with every table request (rows scored for older data are dropped)
        self._table_job: tuple | None = None  # (token, data, revision, seed) of the current table
        self._table_todo: list[str] = []  # methods of the current table not scored yet
        self._table_busy = False  # a method is being scored on the worker
        self._syncing = False
        self._build()
        m.param.watch(self._on_data, ["revision", "error"])
        m.param.watch(self._on_method, ["method"])
        m.param.watch(self._on_surface, ["surface", "surface_error"])
        m.param.watch(self._on_table, ["table"])
        m.param.watch(self._on_source, ["dataset", "mechanism"])
        if self.player is not None:
            self.player.param.watch(self._on_frame, "frame")
            self.player.param.watch(self._on_playing, "playing")
            self.run.param.watch(self._on_frame, ["run_id", "error"])
        self._sync_widgets()
        self.refresh()
        if doc is not None:  # fit once the page is on screen (a fit must not delay the first paint)
            pn.state.onload(self._start)
        else:
            self._start()

    def _start(self) -> None:
        self._request_surface()
        self._request_table()

    def __panel__(self):
        return self._layout

    # ------------------------------------------------------------------ layout
    def _build(self):
        m = self.model
        # Bokeh figures made once: a frame only assigns their sources' data (explorer.ui.plots.surface_panels)
        self._panels = SurfacePanels(css_classes=["decision-plots"])
        # the loading indicator goes on a layout around the figures (a Bokeh pane copies its figure's settings
        # into its own parameters whenever one of them changes)
        self._plots = pn.Column(self._panels.pane, sizing_mode="fixed", margin=0)
        self._legend = pn.pane.HTML("", margin=(0, 10), sizing_mode="stretch_width")
        self._title = pn.pane.Markdown("", margin=(0, 10), sizing_mode="stretch_width",
                                       css_classes=["decision-title"])
        self._alert = pn.pane.Alert("", alert_type="danger", visible=False, sizing_mode="stretch_width")
        self._info = pn.pane.Markdown("", margin=(0, 10), sizing_mode="stretch_width", css_classes=["decision-info"])
        self._progress = pn.indicators.Progress(value=0, max=max(1, len(METHODS)), sizing_mode="stretch_width",
                                                bar_color="primary")
        self._progress_text = pn.pane.Markdown("", margin=(0, 10), css_classes=["decision-progress"])
        self._table = pn.pane.HTML("", sizing_mode="stretch_width", css_classes=["decision-table"],
                                   stylesheets=[_TABLE_CSS])
        table_box = pn.Column("### Test loss and error of every method", self._progress, self._progress_text,
                              self._table, sizing_mode="stretch_width", min_width=340,
                              styles={"flex": "1 1 340px"})
        plots_box = pn.Column(self._title, self._legend, self._plots, width=MAIN + STRIP + 120,
                              styles={"flex": "0 0 auto"})
        self.main = pn.Column(
            self._alert, self._info,
            pn.FlexBox(plots_box, table_box, flex_wrap="wrap", sizing_mode="stretch_width"),
            pn.pane.Markdown(EXPLANATION, sizing_mode="stretch_width"),
            sizing_mode="stretch_width")

        # --- sidebar
        groups = {}
        for fam in FAMILIES:
            names = {METHODS[k].label: k for k in METHODS if METHODS[k].family == fam}
            if names:
                groups[fam] = names
        self._method = pn.widgets.Select(label="Method", groups=groups, value=m.method, sizing_mode="stretch_width")
        self._method.param.watch(self._on_method_widget, "value")
        self._dataset = pn.widgets.Select.from_param(
            m.param.dataset, label="Data set", options={DATASET_LABELS.get(k, k): k for k in m.param.dataset.objects},
            sizing_mode="stretch_width")
        self._x_col = pn.widgets.Select(label="x column", sizing_mode="stretch_width")
        self._y_col = pn.widgets.Select(label="y column", sizing_mode="stretch_width")
        self._class_col = pn.widgets.Select(label="Class column", sizing_mode="stretch_width")
        for w, key in ((self._x_col, "x_column"), (self._y_col, "y_column"), (self._class_col, "class_column")):
            w.param.watch(partial(self._on_column_widget, key), "value")
        self._n = pn.widgets.IntSlider.from_param(m.param.n_per_class, label="Training rows per class", start=10,
                                                  end=300, step=10)
        self._mechanism = pn.widgets.Select.from_param(
            m.param.mechanism, label="Mechanism",
            options={("patterns (thesis: [1,1], [0,1], [1,0] each 1/3)" if k == "patterns" else
                      "none (the data's own gaps)" if k == NO_MECHANISM else f"{k} ({MECHANISMS[k].kind})"): k
                     for k in m.param.mechanism.objects}, sizing_mode="stretch_width")
        self._rate = pn.widgets.FloatSlider.from_param(m.param.rate, label="Missing rate", start=0.05, end=0.8,
                                                       step=0.05)
        self._upload = FileUpload(sizing_mode="stretch_width")
        self._upload.param.watch(self._on_upload, "file")
        seeds = pn.Row(pn.widgets.IntInput.from_param(m.param.data_seed, label="Data seed", width=95),
                       pn.widgets.IntInput.from_param(m.param.mask_seed, label="Mask seed", width=95),
                       pn.widgets.IntInput.from_param(m.param.seed, label="Method seed", width=95))
        run_section = [] if self.player is None else [
            "### Run (EM mixture classifier)", self.player]
        self._run_box = pn.Column(*run_section, sizing_mode="stretch_width")
        self.sidebar = pn.Column(
            "### Method", self._method, self._run_box,
            "### Data", self._dataset, self._n, self._x_col, self._y_col, self._class_col,
            pn.pane.Markdown("Upload a CSV (numeric feature columns and a class column: numbers or text, such as "
                             "species names):", margin=(0, 10)),
            self._upload,
            "### Missingness", self._mechanism, self._rate, seeds,
            sizing_mode="stretch_width", min_width=300)
        self._layout = notebook_layout(self.sidebar, self.main)

    # ------------------------------------------------------------------ URL
    def url_bindings(self) -> list:
        """The settings of the screen kept in the URL."""
        return [(self.model, {k: k for k in self.model._SETTINGS})]

    def sync_url(self, prefix: str = "") -> bool:
        from explorer.ui.page import prefixed

        return sync_with_url(*prefixed(self.url_bindings(), prefix))

    # ------------------------------------------------------------------ work on the session's worker
    def _connected(self) -> bool:
        """False once the session is over or its browser is gone (a closed tab); True when not served."""
        doc = self._run_frames.doc
        if doc is None:
            return not self._run_frames.served
        session = getattr(getattr(doc, "session_context", None), "session", None)
        return session is None or (not session.destroyed and session.connection_count > 0)

    def _stepped(self) -> bool:
        spec = METHODS.get(self.model.method)
        return bool(spec and spec.stepped and self.run is not None)

    def _request_surface(self) -> None:
        """Fit the chosen method for the current data (on the session's worker when served, else now)."""
        m = self.model
        self._surface_token += 1
        if m.data is None or self._stepped():
            self._plots.loading = False
            self.refresh()
            return
        data, rev, method, seed = m.snapshot()
        token = self._surface_token

        def fit():
            if token != self._surface_token:
                return None  # asked again meanwhile: this fit would be dropped
            try:
                return shared_surface(method, data, seed, rev), ""
            except Exception as exc:  # noqa: BLE001 - shown on the page
                return None, f"{METHODS[method].label}: {type(exc).__name__}: {exc}"

        self._plots.loading = self._run_frames.served
        run_then(fit, partial(self._surface_done, token, rev), doc=self._run_frames.doc)

    def _surface_done(self, token: int, revision: int, result, error) -> None:
        """On the event loop: publish a fitted surface (the model's watcher draws it)."""
        if token != self._surface_token:
            return  # a newer fit is on its way
        self._plots.loading = False
        if result is not None:
            surface, why_not = result
            self.model.publish_surface(surface, revision, why_not)

    def _request_table(self) -> None:
        """Score every method for the current data: rows scored by any session at once, the others on the
        session's worker, one method per job (now, on this thread, when not served)."""
        m = self.model
        data, rev, _, seed = m.snapshot()
        with self._table_lock:
            self._table_token += 1
            self._table_todo = []
            token = self._table_token
        if data is None or not self.score_table:
            self._update_table()
            return
        known, todo = [], []
        for name in METHODS:
            row = known_score(name, data, seed)
            if row is None:
                todo.append(name)
            else:
                known.append(row)
        m.publish_rows(known, rev)
        if not self._run_frames.served:
            for name in todo:
                m.publish_row(shared_score(name, data, seed), rev)
            return
        with self._table_lock:
            if token != self._table_token:
                return
            self._table_job, self._table_todo = (token, data, rev, seed), todo
        self._next_table_row()

    def _next_table_row(self) -> None:
        """Hand the next method of the table to the worker, unless one is being scored or Play runs (the
        steps keep the worker then; the table goes on when Play stops)."""
        with self._table_lock:
            if self._table_busy or not self._table_todo:
                return
            if self.player is not None and self.player.playing:
                return
            if not self._connected():
                self._table_todo = []  # nobody is watching any more (a closed tab, a stopped server)
                return
            name = self._table_todo.pop(0)
            token, data, rev, seed = self._table_job
            self._table_busy = True
        if not run_then(partial(shared_score, name, data, seed), partial(self._table_row_done, token, rev),
                        doc=self._run_frames.doc):
            with self._table_lock:  # the worker has stopped (the session is over)
                self._table_busy, self._table_todo = False, []

    def _table_row_done(self, token: int, revision: int, row, error) -> None:
        """On the event loop: one scored method into the table, then the next one."""
        with self._table_lock:
            self._table_busy = False
            current = token == self._table_token
        if current and row is not None:
            self.model.publish_row(row, revision)
        self._next_table_row()

    # ------------------------------------------------------------------ callbacks
    def _on_data(self, *events):
        if any(e.name == "revision" for e in events):
            self._sync_widgets()
            self._request_surface()
            self._request_table()
        self.refresh()

    def _on_method(self, event):
        self._syncing = True
        try:
            self._method.value = event.new
        finally:
            self._syncing = False
        self._run_box.visible = self._stepped()
        self._request_surface()
        self.refresh()

    def _on_method_widget(self, event):
        if not self._syncing and event.new in METHODS:
            self.model.method = event.new

    def _on_column_widget(self, key: str, event):
        if self._syncing or event.new is None:
            return
        if getattr(self.model, key) != event.new:
            setattr(self.model, key, event.new)

    def _on_source(self, *events):
        self._sync_widgets()

    def _on_surface(self, *events):
        if not self._stepped():
            self.refresh()

    def _on_frame(self, *events):
        if self._stepped():
            self.refresh()

    def _on_playing(self, event):
        if not event.new:
            self._next_table_row()  # the table waited while Play ran

    def _on_table(self, *events):
        self._update_table()

    def _on_upload(self, event):
        file = event.new or {}
        content = decoded(file)
        name = str(file.get("name") or "upload.csv")
        if content is None:
            self._alert.param.update(object=f"{md(name)}: the file could not be read (too large or unreadable).",
                                     visible=True)
            return
        self.model.load_csv(content, name)
        self.refresh()

    # ------------------------------------------------------------------ drawing
    def _sync_widgets(self) -> None:
        """Column pickers, the rate and the rows slider follow the data set and the mechanism."""
        m = self.model
        self._syncing = True
        try:
            synthetic = m.dataset in SYNTHETIC
            self._n.visible = synthetic
            cols = list(m.all_columns)
            self._x_col.visible = self._y_col.visible = not synthetic and len(cols) >= 2
            if cols and m.data is not None:
                x, y = m.data.columns
                self._x_col.param.update(options=cols, value=x if x in cols else cols[0])
                self._y_col.param.update(options=cols, value=y if y in cols else cols[1 if len(cols) > 1 else 0])
            self._class_col.visible = m.dataset == UPLOADED and bool(m.class_columns)
            if m.class_columns:
                self._class_col.param.update(options=list(m.class_columns),
                                             value=m.class_column or m.class_columns[-1])
            self._rate.visible = m.takes_rate
            self._run_box.visible = self._stepped()
            if self._method.value != m.method:
                self._method.value = m.method
        finally:
            self._syncing = False

    def _published_surface(self) -> Surface | None:
        """The model's surface if it is of the chosen method on the current data (else None)."""
        s = self.model.surface
        return s if s is not None and s.method == self.model.method and s.revision == self.model.revision else None

    def refresh(self) -> None:
        """Draw the current surface, its title and the data's text (on the session's event loop: from another
        thread, the drawing is scheduled there). The EM classifier's surface is computed on the worker first."""
        self._redraw()

    def _draw(self) -> None:
        if self._stepped():
            self._run_frames.request()
            return
        surface, data = self._published_surface(), self.model.data
        cached_surface, cached_data, frame = self._static
        if frame is None or surface is not cached_surface or data is not cached_data:
            frame = surface_frame(surface, data)  # a tint and contours on a 60 x 60 grid: a millisecond
            self._static = (surface, data, frame)
        self._show(frame, surface, None)

    def _compute_run_frame(self):
        """On the worker: the EM classifier's surface of its current state, with the state's read-outs."""
        data, revision = self.model.data, self.model.revision
        with self.run.lock:  # the state, its iteration and stop reason of one step
            surface = self.run.surface()
            status = {"iteration": self.run.iteration, "stop_reason": self.run.stop_reason, "error": self.run.error}
        if surface is not None and surface.revision != revision:
            surface = None
        return surface_frame(surface, data), surface, status

    def _show_run_frame(self, result, error) -> None:
        if error is not None or result is None:
            return  # the worker logged the error; the plots keep the last frame
        if not self._stepped():
            return  # another method was chosen meanwhile: its own drawing follows
        self._show(*result)

    def _show(self, frame: dict, surface: Surface | None, status: dict | None) -> None:
        """On the event loop: the plots and the text of one frame."""
        with hold():
            self._panels.update(frame)
            self._update_text(surface, status)
        push(self._panels.pane)

    def _update_text(self, surface: Surface | None = None, status: dict | None = None) -> None:
        """The title (method, EM iteration, test scores), the legend of classes, the data's line and the errors.

        ``surface``: the one drawn (default: the published one of a fitted method); ``status``: the EM
        classifier's ``iteration``, ``stop_reason`` and ``error`` of the state drawn (default: its current ones).
        """
        m = self.model
        data = m.data
        stepped = self._stepped()
        if surface is None and not stepped:
            surface = self._published_surface()
        if stepped and status is None:
            status = {"iteration": self.run.iteration, "stop_reason": self.run.stop_reason, "error": self.run.error}
        label = METHODS[m.method].label if m.method in METHODS else str(m.method)
        title = f"**{md(label)}**"
        if stepped:
            title += f" · EM iteration {status['iteration']}"
            if status["stop_reason"]:
                title += f" ({'converged' if status['stop_reason'] == 'tol' else status['stop_reason']})"
        if surface is not None:
            title += f" · test loss {surface.test_loss:.3f} · error {surface.test_error:.1f} %"
        elif not stepped and m.data is not None and not m.surface_error:
            title += " · fitting…"
        self._title.object = title
        if data is not None:
            self._legend.object = " ".join(
                f'<span style="color:{PALETTE[k % 10]};font-size:16px">&#9679;</span> class {html(c)}'
                for k, c in enumerate(data.classes)) + (
                ' &nbsp; <span style="color:#888">faint dots: imputed values</span>'
                if surface is not None and len(surface.imputations) else "")
            n = data.counts()
            axes = f"x = {md(data.columns[0])}, y = {md(data.columns[1])}" + (" (standardised)" if data.standardised
                                                                               else "")
            info = (f"**{md(data.name)}**: {axes}; {len(data.y_train)} training rows ({n['complete']} complete, "
                    f"{n['missing_x']} missing x, {n['missing_y']} missing y"
                    + (f", {n['missing_both']} missing both: not drawn" if n["missing_both"] else "")
                    + f"), {len(data.y_test)} test rows. Mechanism: **{md(m.mechanism)}**.")
        else:
            info = ""
        self._info.object = info
        errors = []
        if m.error:
            errors.append(f"**Data:** {md(m.error)}" + (" The page still shows the previous data." if data else ""))
        if m.surface_error:
            errors.append(md(m.surface_error))
        if stepped and status["error"]:
            errors.append(f"EM: {md(status['error'])}")
        self._alert.object = "\n\n".join(errors)
        self._alert.visible = bool(errors)

    def _update_table(self) -> None:
        m = self.model
        table = m.table
        done, total = m.table_progress()
        self._progress.param.update(max=max(total, 1), value=done)
        self._progress_text.object = (f"{done} / {total} methods scored" + ("" if done == total else " …"))
        if table is None:
            self._table.object = ""
            return
        rows = []
        for r in table.itertuples(index=False):
            mine = ' class="current"' if r.method == m.method else ""
            if r.status == "done":
                cells = f"<td>{r.loss:.3f}</td><td>{r.error_pct:.1f}</td><td>{r.seconds:.1f}</td>"
            elif r.status == "pending":
                cells = '<td colspan="3" class="pending">…</td>'
            else:
                cells = f'<td colspan="3" class="failed" title="{html(r.status)}">failed</td>'
            rows.append(f"<tr{mine} data-method=\"{html(r.method)}\"><td>{html(r.label)}</td>{cells}</tr>")
        absent = (f'<p class="absent">Not available (module missing): {html(", ".join(MISSING_MODULES))}</p>'
                  if MISSING_MODULES else "")
        self._table.object = ("<table><thead><tr><th>Method</th><th>Loss</th><th>Error %</th><th>s</th></tr></thead>"
                              f"<tbody>{''.join(rows)}</tbody></table>{absent}")


_TABLE_CSS = """
:host table {border-collapse: collapse; width: 100%; font-size: 13px;}
:host th, :host td {padding: 2px 6px; border-bottom: 1px solid #e5e5e5; text-align: right;}
:host th:first-child, :host td:first-child {text-align: left;}
:host tr.current td {background: #fff3c4; font-weight: 600;}
:host td.pending {color: #999; text-align: center;}
:host td.failed {color: #b00020; text-align: center;}
:host p.absent {color: #666; font-size: 12px;}
"""
