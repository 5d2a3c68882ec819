"""The "Data & mechanism" page: what a missingness mechanism does to a data set.

:class:`DataMechanismView` renders one :class:`~explorer.ui.state.data_model.DataModel`:

* the missingness matrix (rows x columns, missing dark), in the original row order or sorted by
  pattern (most frequent pattern first); more than ``max_rows`` rows are thinned evenly;
* the realised missing rate of every column (bars) against the requested overall rate (line),
  the number of patterns and a table of the most common ones;
* the complete, observed and missing parts of one column (histograms on shared bins), which
  makes MAR/NMAR bias visible: ``nmar_lowest`` removes the left tail, ``mar_threshold`` the
  rows where the control column is high;
* for image data sets, a grid of true and masked images (missing pixels coloured);
* a short explanation of the mechanism (registry summary, MCAR/MAR/NMAR, what to look for).

Every plot is a Bokeh figure made once per session (:mod:`explorer.ui.plots.missingness`,
:mod:`explorer.ui.plots.bars`; the image mosaic when image data are first shown): a new data
set, mechanism, column or row order only replaces their data, on the session's event loop
(:class:`~explorer.ui.session.Redraw`). ``frames`` holds what each plot was last given. The pure
functions (:func:`pattern_order`, :func:`matrix_rows`, :func:`histogram_parts`,
:func:`image_mosaic`, ...) carry the logic and are tested on their own.
"""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pandas as pd
import panel as pn
import param
from panel.viewable import Viewer

from explorer.core.missingness.mechanisms import MECHANISMS
from explorer.core.validation import BadInputError
from explorer.ui.components.banner import DataErrorBanner
from explorer.ui.components.data_controls import DataControls
from explorer.ui.components.downloads import DownloadPanel, PageImputations
from explorer.ui.plots.bars import Bars, HistogramOverlay, Marker
from explorer.ui.plots.missingness import MissingnessMatrix, RateBars, RGBMosaic
from explorer.ui.session import Redraw, hold, push
from explorer.ui.state.data_model import NO_MECHANISM, DataModel
from explorer.ui.text import md

__all__ = [
    "DataMechanismView", "pattern_order", "matrix_rows", "pattern_table", "histogram_edges",
    "histogram_parts", "image_mosaic", "mechanism_markdown",
]

MAX_MATRIX_ROWS = 2000
#: Widest data the page imputes on a click (a full-covariance fit of 33 columns takes about 2 s, of 64 about 25 s).
MAX_FIT_FEATURES = 40
OBSERVED_COLOUR, MISSING_COLOUR = "#e8eef6", "#1d2b3f"
TRUE_COLOUR, OBS_COLOUR, MIS_COLOUR = "#6b7280", "#2f6fb3", "#e0572e"
MISSING_PIXEL = (224, 87, 46)

_KIND_TEXT = {
    "MCAR": "Missing **completely at random**: whether a value is missing depends on no value at all. "
            "The observed part of every column is a random subsample, so its histogram has the shape "
            "of the complete one.",
    "MAR": "Missing **at random**: missingness depends only on values that stay observed (a control "
           "column). The observed marginal of a target column can be biased, but the likelihood of the "
           "observed data ignores the mechanism, so EM on the observed data is still consistent.",
    "NMAR": "**Not** missing at random: missingness depends on the value that goes missing. The observed "
            "marginals are biased, and a model that ignores the mechanism (EM included) cannot undo it.",
}
_HINTS = {
    "mcar": "salt-and-pepper matrix; the orange (missing) histogram has the shape of the blue (observed) one.",
    "mcar_rows": "sort by pattern: most rows are complete, the hit rows lose several values at once.",
    "mar_rows": "only rows with a low score of a few controlling columns lose values; sorting by pattern "
                "groups them. The controlling columns stay observed (thesis variant).",
    "mar_threshold": "pick the target column (last by default): its missing values are exactly the rows "
                     "where the control column is high, yet the target histogram is shifted only through "
                     "its correlation with the control.",
    "mar_logistic": "like mar_threshold with a soft edge: high control values make the target more likely "
                    "to be missing.",
    "nmar_lowest": "pick an amputated column: the missing part is exactly its left tail, so the observed "
                   "mean is too high.",
    "nmar_random": "the left tail is thinned rather than removed; the observed mean is still too high.",
    "self_masking": "large values hide themselves (positive strength): the missing part sits in the right tail.",
    "cpt_v": "low value levels are observed less often (mu increases with v): the observed histogram "
             "under-represents them.",
    "logit_vd": "low value levels are observed less often (sigma increases with v), and columns with a low "
                "omega less often than others: the observed histogram under-represents low levels.",
    "linear_value_effect": "the observation probability rises with the value level: a smooth tilt of the "
                           "observed histogram.",
    "patterns": "only a few distinct patterns: the pattern table lists them with their frequencies.",
    "random_pixels": "isolated missing pixels all over the images.",
    "quarter": "one quarter of each image is missing: the matrix shows column blocks, the images a corner.",
    "half": "a whole half of each image is missing: the same columns in every row.",
    "square": "a k x k square at a random position: few patterns, each a block of pixels.",
}


# ----------------------------------------------------------------------------- pure helpers
def pattern_order(missing) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Order rows by missingness pattern, the most frequent pattern first.

    Parameters
    ----------
    missing : array-like of bool, shape (n_samples, n_features)
        True = missing.

    Returns
    -------
    order : ndarray of int, shape (n_samples,)
        Row indices: all rows of the most frequent pattern (in their original order), then the
        next pattern, ... Ties between patterns follow the lexicographic order of the pattern,
        as :meth:`explorer.core.data.IncompleteData.pattern_counts`.
    patterns : ndarray of bool, shape (n_patterns, n_features)
        Distinct patterns by decreasing count.
    counts : ndarray of int, shape (n_patterns,)
    """
    missing = np.asarray(missing, dtype=bool)
    patterns, inverse, counts = np.unique(missing, axis=0, return_inverse=True, return_counts=True)
    ranked = np.argsort(-counts, kind="stable")
    rank = np.empty_like(ranked)
    rank[ranked] = np.arange(ranked.size)
    order = np.argsort(rank[inverse.reshape(-1)], kind="stable")
    return order, patterns[ranked], counts[ranked]


def matrix_rows(missing, sort: bool, max_rows: int = MAX_MATRIX_ROWS) -> np.ndarray:
    """Row indices drawn in the missingness matrix, top to bottom (shape (min(n, max_rows),)).

    ``sort`` orders them by pattern (:func:`pattern_order`); beyond ``max_rows`` rows, evenly
    spaced rows of that order are kept, so the picture keeps the proportions of the patterns.
    """
    n = np.shape(missing)[0]
    order = pattern_order(missing)[0] if sort else np.arange(n)
    if n > max_rows:
        order = order[np.linspace(0, n - 1, max_rows).round().astype(int)]
    return order


def pattern_table(patterns, counts, columns, top: int = 8) -> pd.DataFrame:
    """The ``top`` most common patterns: rows, share, number missing and which columns.

    ``patterns`` (n_patterns, n_features) bool sorted by decreasing ``counts`` (as returned by
    :func:`pattern_order`); the ``pattern`` column draws missing as ``■`` and observed as ``·``
    (data sets with at most 16 columns).
    """
    patterns = np.asarray(patterns, dtype=bool)
    total = max(int(np.sum(counts)), 1)
    rows = []
    for pat, c in zip(patterns[:top], counts[:top]):
        names = [columns[j] for j in np.flatnonzero(pat)]
        shown = ", ".join(names[:5]) + (f" +{len(names) - 5} more" if len(names) > 5 else "")
        row = {"rows": int(c), "share": f"{c / total:.1%}", "# missing": len(names),
               "missing columns": shown or "(complete rows)"}
        if patterns.shape[1] <= 16:
            row = {"pattern": "".join("■" if m else "·" for m in pat), **row}
        rows.append(row)
    return pd.DataFrame(rows)


def histogram_edges(values, max_bins: int = 40) -> np.ndarray:
    """Bin edges for one column: one bin per level for discrete columns, else numpy's 'auto'."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return np.array([0.0, 1.0])
    levels = np.unique(v)
    if levels.size == 1:
        return np.array([levels[0] - 0.5, levels[0] + 0.5])
    if levels.size <= 12:
        mids = (levels[1:] + levels[:-1]) / 2
        first, last = levels[0] - (mids[0] - levels[0]), levels[-1] + (levels[-1] - mids[-1])
        return np.concatenate([[first], mids, [last]])
    edges = np.histogram_bin_edges(v, bins="auto")
    if edges.size - 1 > max_bins:
        edges = np.linspace(v.min(), v.max(), max_bins + 1)
    return edges


def histogram_parts(values, missing, truth=None) -> dict:
    """Counts of the complete, observed and missing parts of one column on shared bins.

    Parameters
    ----------
    values : array of shape (n_samples,)
        The column with NaN at missing entries.
    missing : array of bool, shape (n_samples,)
    truth : array of shape (n_samples,), optional
        The complete column; without it the complete and missing counts are zero.

    Returns
    -------
    dict
        ``edges`` (B+1,), ``complete``, ``observed``, ``missing`` (B,) counts (observed +
        missing = complete when the truth is known), ``true_mean`` and ``observed_mean``
        (``true_mean`` is the observed mean when the truth is unknown), ``has_truth``.
    """
    values, missing = np.asarray(values, dtype=float), np.asarray(missing, dtype=bool)
    obs = values[~missing]
    edges = histogram_edges(truth if truth is not None else obs)
    observed = np.histogram(obs, bins=edges)[0]
    if truth is None:
        complete = missing_counts = np.zeros_like(observed)
        true_mean = float(obs.mean()) if obs.size else 0.0
    else:
        truth = np.asarray(truth, dtype=float)
        complete = np.histogram(truth, bins=edges)[0]
        missing_counts = np.histogram(truth[missing], bins=edges)[0]
        true_mean = float(truth.mean())
    return {"edges": edges, "complete": complete, "observed": observed, "missing": missing_counts,
            "true_mean": true_mean, "observed_mean": float(obs.mean()) if obs.size else true_mean,
            "has_truth": truth is not None}


def image_mosaic(images, missing, shape, *, n_cols: int = 8, truth=None, pad: int = 1) -> np.ndarray:
    """Tile images into one RGB uint8 array; missing pixels get :data:`MISSING_PIXEL`.

    Parameters
    ----------
    images : array of shape (n_images, h*w)
        Flattened row-major images, NaN at missing pixels.
    missing : array of bool, shape (n_images, h*w)
    shape : (h, w)
    n_cols : int
        Images per row of the mosaic.
    truth : array of shape (n_images, h*w), optional
        When given, the first mosaic row shows these complete images and the second the masked ones.
    pad : int
        White pixels between tiles.

    Returns
    -------
    ndarray of uint8, shape (H, W, 3)
    """
    h, w = shape
    images, missing = np.asarray(images, dtype=float), np.asarray(missing, dtype=bool)
    ref = truth if truth is not None else images
    lo, hi = np.nanmin(ref), np.nanmax(ref)
    scale = hi - lo if hi > lo else 1.0

    def tile(vals, miss):
        grey = np.clip((np.nan_to_num(vals, nan=lo) - lo) / scale, 0, 1)
        rgb = np.repeat((255 * (1 - grey))[..., None], 3, axis=-1)  # dark = high value (ink)
        rgb[miss] = MISSING_PIXEL
        return rgb.reshape(h, w, 3)

    if truth is not None:
        k = min(n_cols, images.shape[0])
        tiles = [[tile(t, np.zeros(h * w, bool)) for t in np.asarray(truth)[:k]],
                 [tile(v, m) for v, m in zip(images[:k], missing[:k])]]
    else:
        flat = [tile(v, m) for v, m in zip(images, missing)]
        tiles = [flat[i:i + n_cols] for i in range(0, len(flat), n_cols)]
    n_rows, cols = len(tiles), max(len(r) for r in tiles)
    out = np.full((n_rows * (h + pad) + pad, cols * (w + pad) + pad, 3), 255, dtype=np.uint8)
    for i, row in enumerate(tiles):
        for j, t in enumerate(row):
            y, x = pad + i * (h + pad), pad + j * (w + pad)
            out[y:y + h, x:x + w] = t.astype(np.uint8)
    return out


def mechanism_markdown(model: DataModel) -> str:
    """Registry summary, kind (MCAR/MAR/NMAR) and what to look for, as Markdown.

    Describes the mask of the data on screen (``model.mask``), which stays the previous one when
    the latest setting could not be applied (``model.error`` says why).
    """
    mask = model.mask
    info = None if mask is None or mask.mechanism not in MECHANISMS else MECHANISMS[mask.mechanism]
    if info is None:
        return ("#### No mechanism: the data's own missing values\n"
                "Nothing is removed on top of what the file already lacks. Real missing values have "
                "no known truth, so only the observed part can be drawn.")
    requested = f"requested {mask.requested_rate:.0%}, " if mask.requested_rate is not None else ""
    return (f"#### `{info.name}` · {info.kind}\n{info.summary} ({requested}realised {mask.realised_rate:.1%}). "
            f"*Source: {info.source}.*\n\n{_KIND_TEXT[info.kind]}\n\n"
            f"**What to look for:** {_HINTS.get(info.name, '')}")


_TABLE_CSS = """
table.dataframe td:first-child { font-family: monospace; text-align: left; letter-spacing: 1px; }
table.dataframe td:last-child, table.dataframe th:last-child { text-align: left; }
"""


# ----------------------------------------------------------------------------- the view
class DataMechanismView(Viewer):
    """Missingness matrix, per-column rates, patterns and marginals of a :class:`DataModel`.

    Parameters
    ----------
    data_model : DataModel
        Default: iris with ``nmar_lowest`` at 20 %.
    sort_by_pattern : bool
        Matrix rows sorted by pattern (most frequent first) instead of the original order.
    column : str
        Column shown in the marginal plot ("" = the column with the highest missing rate).
    """

    data_model = param.ClassSelector(class_=DataModel)
    sort_by_pattern = param.Boolean(default=True, doc="Sort matrix rows by pattern")
    column = param.String(default="", doc="Column of the marginal plot")
    max_rows = param.Integer(default=MAX_MATRIX_ROWS, bounds=(10, None), doc="Rows drawn at most")
    top_patterns = param.Integer(default=8, bounds=(1, 50), doc="Patterns listed in the table")

    def __init__(self, **params):
        if params.get("data_model") is None:
            params["data_model"] = DataModel(dataset="iris", mechanism="nmar_lowest", rate=0.2)
        super().__init__(**params)
        # served with a thread pool, two events of one session (e.g. quick uploads) can run at once: what is
        # to be drawn is collected under the lock, and drawn on the session's event loop (Redraw)
        self._lock = threading.RLock()
        self._redraw = Redraw(self._draw)
        self._pending: set[str] = set()  # the parts to draw next: "data" (everything), "matrix", "marginal", "rates"
        self._drawing = False
        #: The frame each plot was last given: ``matrix``, ``rates``, ``marginal`` (dicts) and ``images`` (RGB).
        self.frames: dict = {"matrix": None, "rates": None, "marginal": None, "images": None}
        self.controls = DataControls(model=self.data_model, show_error=False)  # the error: top of main
        self._sort = pn.widgets.RadioButtonGroup.from_param(
            self.param.sort_by_pattern, options={"Original order": False, "Sorted by pattern": True},
            label="Row order", color="primary", variant="outline", margin=(5, 10), width=360)
        self._column = pn.widgets.Select(label="Column", width=220)
        self._column.param.watch(self._on_column_widget, "value")
        self._explain = pn.pane.Markdown(sizing_mode="stretch_width", margin=(0, 10))
        self._stats = pn.pane.Markdown(margin=(0, 10), sizing_mode="stretch_width")
        self._table = pn.pane.DataFrame(index=False, sizing_mode="stretch_width", max_height=260, margin=(0, 10),
                                        stylesheets=[_TABLE_CSS])
        self._marginal_note = pn.pane.Markdown(margin=(0, 10), sizing_mode="stretch_width")
        self._fit_cache = None  # (data, fitted imputer, warnings): the last on-click fit, for these data only
        self.downloads = DownloadPanel(stem=self._download_stem, imputations=self.imputations,
                                       masked=lambda: self.data_model.data, note=self._download_note)
        self.main = self._build()
        self._request("data")
        self.data_model.param.watch(self._on_data, ["revision"])
        self.param.watch(lambda e: self._request("matrix"), ["sort_by_pattern", "max_rows"])
        self.param.watch(lambda e: self._request("marginal"), ["column"])
        self.param.watch(lambda e: self._request("rates"), ["top_patterns"])
        self.sidebar = pn.Column(self.controls, self.downloads, sizing_mode="stretch_width")
        self._layout = pn.Row(pn.Column(self.controls, self.downloads, width=300), self.main,
                              sizing_mode="stretch_width")

    def __panel__(self):
        return self._layout

    # ------------------------------------------------------------------ layout (built once)
    def _build(self):
        # Bokeh figures made once (explorer.ui.plots): updates replace their data
        self._matrix = MissingnessMatrix(OBSERVED_COLOUR, MISSING_COLOUR)
        self._rates = RateBars(OBS_COLOUR, MIS_COLOUR)
        self._marginal = HistogramOverlay(
            {"complete": Bars("complete (true)", TRUE_COLOUR, fill_alpha=0.12, line_width=1.5),
             "observed": Bars("observed", OBS_COLOUR), "missing": Bars("missing (true values)", MIS_COLOUR)},
            {"true_mean": Marker(TRUE_COLOUR, "dashed"), "observed_mean": Marker(OBS_COLOUR, "dotted")},
            ylabel="rows", legend="right", width=640, height=300, pane_options=dict(sizing_mode=None, margin=(0, 10)))
        self._mosaic: RGBMosaic | None = None  # made when image data are first shown
        # explicit sizes everywhere: the gallery sets a global sizing_mode="stretch_width"
        self._images_box = pn.Column(visible=False, sizing_mode=None)
        results = pn.Column(
            self._explain,
            # the rates beside the matrix when they fit, below it when not (a narrow window: 1024 px); a FlexBox
            # drew the Bokeh figures 0 px wide, the Row's own flex layout wraps them at their fixed sizes
            pn.Row(pn.Column(self._sort, self._matrix.pane, sizing_mode=None),
                   pn.Column(self._rates.pane, self._stats, self._table, self._images_box, width=500),
                   styles={"flex-wrap": "wrap"}),
            pn.Column(self._column, self._marginal.pane, self._marginal_note, width=680),
            sizing_mode="stretch_width",
        )
        # a setting that cannot be applied: said at the top, with the nearest one that works; results dimmed
        self.banner = DataErrorBanner(data_model=self.data_model, results=[results])
        return pn.Column(self.banner, results, sizing_mode="stretch_width")

    def _is_image(self) -> bool:
        d = self.data_model.data
        return self.data_model.image_shape is not None and d is not None and d.truth is not None

    # ------------------------------------------------------------------ updates (drawn on the event loop)
    def _request(self, part: str) -> None:
        """Draw ``part`` ("data": everything) on the session's event loop (at once when called there)."""
        with self._lock:
            self._pending.add(part)
        self._redraw()

    def _on_data(self, event=None):
        self._request("data")
        self.downloads.refresh()

    def _on_column_widget(self, event):
        if event.new is not None and event.new != self.column:
            self.column = event.new

    def _draw(self) -> None:
        with self._lock:
            if self._drawing:  # asked for by a widget this draw changes (the column picker): this draw covers it
                return
            self._drawing = True
            try:
                # one message, and one walk of the document's model graph (freeze): a pane's first update after the
                # page is shown gains the template's stylesheets, and each such change makes Bokeh walk the document
                with hold(freeze=True):
                    drawn = self._draw_parts()
                # requests this draw made itself are drawn; a source is changed once per message (two changes of
                # its columns in one held message can reach BokehJS with columns of different lengths)
                self._pending -= drawn
            finally:
                self._drawing = False
            more = bool(self._pending)
        push(*(p.pane for p in (self._matrix, self._rates, self._marginal, self._mosaic) if p is not None))
        if more:  # asked for while drawing, not drawn: the next message
            self._redraw()

    def _draw_parts(self) -> set[str]:
        """Draw the parts asked for; returns them ("data": every part)."""
        parts, self._pending = self._pending, set()
        data = self.data_model.data
        if "data" in parts:
            self._explain.object = mechanism_markdown(self.data_model)
            self._images_box.visible = self._is_image()
            if data is not None:
                self._follow_columns(data)
            parts = {"data", "matrix", "rates", "marginal", "images"}
        if "marginal" in parts and self._column.value != self.column and self.column in self._column.options:
            self._column.value = self.column
        if data is not None:
            for part, send in (("matrix", self._send_matrix), ("rates", self._send_rates),
                               ("marginal", self._send_marginal), ("images", self._send_images)):
                if part in parts:
                    send(data)
        return parts

    def _follow_columns(self, data) -> None:
        """The column picker follows the data: a new data set or mechanism shows the most affected column."""
        columns = list(data.columns)
        rates = data.missing.mean(axis=0)
        changed_columns = list(self._column.options) != columns
        if changed_columns:
            self._column.options = columns
        # a new data set or mechanism: show the most affected column; otherwise keep the user's choice
        key = (self.data_model.dataset, self.data_model.mechanism)
        if changed_columns or self.column not in columns or key != getattr(self, "_key", key if self.column else None):
            with param.discard_events(self):
                self.column = columns[int(np.argmax(rates))]
        self._key = key
        self._column.value = self.column

    def _send_matrix(self, data):
        rows = matrix_rows(data.missing, self.sort_by_pattern, self.max_rows)
        ylabel = "row (sorted by pattern)" if self.sort_by_pattern else "row"
        if rows.size < data.n_samples:
            ylabel += f", {rows.size} of {data.n_samples} shown"
        self.frames["matrix"] = frame = {"image": data.missing[rows].astype(np.uint8), "rows": rows,
                                         "n_total": data.n_samples, "columns": list(data.columns),
                                         "sort": self.sort_by_pattern, "ylabel": ylabel}
        self._matrix.update(frame)

    def _send_rates(self, data):
        m = self.data_model
        rates = data.missing.mean(axis=0)
        overall = float(data.missing.mean())
        requested = m.mask.requested_rate if m.mask is not None else None
        if requested is not None:
            line, what = float(requested), f"requested {requested:.0%}"
        else:
            line, what = overall, f"overall {overall:.1%}"
        self.frames["rates"] = frame = {"columns": list(data.columns), "rates": rates, "line": line,
                                        "title": f"Missing rate per column (dashed: {what})"}
        self._rates.update(frame)
        _, patterns, counts = pattern_order(data.missing)
        complete = int((~data.missing.any(axis=1)).sum())
        self._stats.object = (f"**{len(counts)}** distinct patterns · realised rate **{overall:.1%}** · "
                              f"**{complete}** of {data.n_samples} rows complete. Most common patterns:")
        self._table.object = pattern_table(patterns, counts, data.columns, self.top_patterns)

    def _send_marginal(self, data):
        j = list(data.columns).index(self.column) if self.column in data.columns else 0
        truth = None if data.truth is None else data.truth[:, j]
        parts = histogram_parts(data.values[:, j], data.missing[:, j], truth)
        n_mis = int(data.missing[:, j].sum())
        title = f"{data.columns[j]}: {n_mis} of {data.n_samples} values missing"
        self.frames["marginal"] = {"parts": parts, "column": data.columns[j], "title": title}
        self._marginal.update(parts["edges"], {k: parts[k] for k in ("complete", "observed", "missing")},
                              markers={"true_mean": parts["true_mean"], "observed_mean": parts["observed_mean"]},
                              title=title, xlabel=str(data.columns[j]))
        if parts["has_truth"]:
            bias = parts["observed_mean"] - parts["true_mean"]
            self._marginal_note.object = (
                f"Mean of the observed values (dotted) **{parts['observed_mean']:.3g}** vs the true mean "
                f"(dashed) **{parts['true_mean']:.3g}**: bias of the observed-data mean **{bias:+.3g}**.")
        else:
            self._marginal_note.object = "The true values are unknown here: only the observed part is drawn."

    def _send_images(self, data):
        shape = self.data_model.image_shape
        if shape is None or data.truth is None:
            self.frames["images"] = None  # nothing to show (the box is hidden)
            return
        idx = np.linspace(0, data.n_samples - 1, min(8, data.n_samples)).round().astype(int)
        self.frames["images"] = rgb = image_mosaic(data.values[idx], data.missing[idx], shape, n_cols=len(idx),
                                                   truth=data.truth[idx])
        if self._mosaic is None:
            self._mosaic = RGBMosaic("True (top) and masked (bottom) images")
            self._images_box.objects = [self._mosaic.pane]
        self._mosaic.update(rgb)

    # ------------------------------------------------------------------ downloads
    def _download_stem(self) -> tuple:
        m = self.data_model
        data = m.data
        applied = m.mask.mechanism if m.mask is not None else m.mechanism
        return ((data.name if data is not None and data.name else m.dataset),
                "" if applied == NO_MECHANISM else applied)

    def _download_note(self) -> str:
        data = self.data_model.data
        if data is None:
            return "No data to download."
        units = " Values in standardised units (the *standardise* setting)." if self.data_model.standardize else ""
        if data.n_features > MAX_FIT_FEATURES:
            fit = (f"*Imputed data* are not offered for more than {MAX_FIT_FEATURES} columns (a fit on a click "
                   "would take minutes): impute from Python or with `explorer impute`.")
        else:
            fit = ("*Imputed data* / *m imputations*: this page has no model of its own, so they come from "
                   "`GaussianMixtureImputer()` with the library's defaults (K chosen on the data, full covariance, "
                   f"MAP prior), fitted to these {data.n_samples} rows when you click; rows with no observed value get "
                   "the fitted marginal. Other models: the Conditional page.")
        return (f"The data on screen (**{md(data.name or self.data_model.dataset)}**), with their gaps or imputed. "
                f"{fit} CSV / Parquet: one long table, `imputation` 0 = the single imputation, 1..m = draws; "
                f"netCDF: an `imputation` dimension.{units}")

    def _fitted(self, data):
        """The library's default GaussianMixtureImputer fitted to ``data`` (cached for these data)."""
        cache = self._fit_cache
        if cache is not None and cache[0] is data:
            return cache[1], cache[2]
        if data.n_features > MAX_FIT_FEATURES:
            raise BadInputError(
                f"These data have {data.n_features} columns; the page imputes at most {MAX_FIT_FEATURES} on a click "
                "(a full-covariance mixture of 64 columns takes tens of seconds to minutes). Download the masked "
                "data and impute them from Python (GaussianMixtureImputer) or with the command line "
                "(explorer impute).")
        from explorer.impute.gaussian_mixture import GaussianMixtureImputer

        imputer = GaussianMixtureImputer(empty_rows="marginal", random_state=0)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            imputer.fit(data.values)
        said = list(dict.fromkeys(str(w.message) for w in caught))
        self._fit_cache = (data, imputer, said)
        return imputer, said

    def imputations(self, n_imputations: int = 0) -> PageImputations:
        """The data on screen imputed by the library's default GaussianMixtureImputer (fitted on first use).

        ``n_imputations`` draws (``sample``, seed 0) besides the single imputation (``transform``).
        Raises BadInputError (readable) when the data cannot be fitted or are too wide for a click.
        """
        data = self.data_model.data
        if data is None:
            raise BadInputError(self.data_model.error or "No data loaded.")
        imputer, said = self._fitted(data)
        imputed = imputer.transform(data.values)
        samples = imputer.sample(data.values, n_imputations, random_state=0) if n_imputations else None
        fit = ("converged" if imputer.converged_ else "not converged") + f" after {imputer.n_iter_} iterations"
        source = (f"GaussianMixtureImputer() (library defaults: K = {imputer.n_components_} chosen on the data), "
                  f"fitted on the click to the {data.n_samples} rows of {md(data.name or self.data_model.dataset)} "
                  f"({fit})")
        if n_imputations:
            source += f"; {n_imputations} draws, seed 0"
        if said:
            source += ". The fit warned: " + " ".join(md(w) for w in said[:2])
        return PageImputations(imputed=imputed, samples=samples, missing=np.asarray(data.missing, dtype=bool),
                           columns=[str(c) for c in data.columns], source=source)
