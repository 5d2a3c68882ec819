"""Bokeh figures built once per session whose frames only change their data (issue 19).

A HoloViews ``DynamicMap`` re-renders its element on every frame: on the EM playground that cost
0.5-0.8 s of server CPU per Step, 73 % in HoloViews' plot update and 37 % in Bokeh walking the
whole document's model graph again (``../shared/guides/panel-guide.md`` section 2.4). The figures
here are plain Bokeh figures with a fixed set of renderers made at construction; a frame only
assigns ``ColumnDataSource.data`` (same columns), ``stream``\\ s new rows, or sets a scalar property
(a range's start and end), so it costs what its numbers cost to send. Components whose number varies
are rows of one source (one ``multi_line`` for all ellipses). What is sent is kept small: columns that
did not change are not sent again (:func:`~explorer.ui.plots.sources.set_data`), a step's few trace rows go as numbers rather than
binary buffers (each buffer is two websocket frames), and a panel can let the browser trace its ellipses
from their centres and axes (``ScatterPanel(ellipses="axes")``) instead of receiving every path.

* :class:`ScatterPanel`: a 2-D mixture panel (points, missing-value marks, ellipses, the true mixture)
  drawing the frames of :func:`explorer.ui.plots.mixture2d.panel_frame` (EM playground) and
  :func:`explorer.ui.plots.vb_frames.mixture_frame` (variational playground: no marks, no true mixture,
  the data's column names on the axes);
* :class:`TracePlot`: per-iteration curves, one line (or step line) per series, rows streamed as a run goes.

In a notebook, Bokeh models changed directly are sent by :func:`push` (Panel's ``push_notebook``);
when served, the session's document sends them itself.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np
import panel as pn
from bokeh.core.properties import expr
from bokeh.events import Tap
from bokeh.models import (
    ColumnDataSource,
    CustomJSExpr,
    DataRange1d,
    GlyphRenderer,
    Legend,
    LegendItem,
    Range1d,
)
from bokeh.plotting import figure

from explorer.ui.plots.mixture2d import COLORS, TRACE_MIN_ITERATIONS
from explorer.ui.plots.sources import set_data
from explorer.ui.session import push  # noqa: F401 (the pages' import of it, kept here too)

__all__ = ["ELLIPSE_POINTS", "SMALL_COLUMN", "ScatterPanel", "TracePlot", "LeanBokeh", "figure_pane", "push"]


class LeanBokeh(pn.pane.Bokeh):
    """A Bokeh pane whose figures' renderers are made lean when the pane's model is built.

    ``figure.line`` & co. give each renderer two more glyph models than it needs here: a nonselection
    glyph (nothing on these pages selects points) and a muted glyph. Left as ``"auto"``, BokehJS derives
    them when needed, with the same faded look (a legend's "mute" still works), and the session's document
    has about 10 % fewer models: each costs the server about 1-2 ms per page opened (building, the
    document's walks, serialisation). Done when the model is built, so renderers added after the pane was
    made are included.
    """

    def _get_model(self, doc, root=None, parent=None, comm=None):
        for renderer in _glyph_renderers(self.object):
            renderer.nonselection_glyph = "auto"
            renderer.muted_glyph = "auto"
        return super()._get_model(doc, root, parent, comm)


def _glyph_renderers(obj) -> list:
    """The glyph renderers of a figure (its ``renderers`` list: no walk of its model graph, which cost more than
    what leaving the glyphs out saves) or of a layout of figures."""
    if obj is None:
        return []
    if hasattr(obj, "renderers"):
        return [r for r in obj.renderers if isinstance(r, GlyphRenderer)]
    return list(obj.select({"type": GlyphRenderer}))


def figure_pane(obj, **options) -> LeanBokeh:
    """The pane of a figure (or a layout of figures) on a page: ``pn.pane.Bokeh`` with lean renderers."""
    return LeanBokeh(obj, **options)

_TOOLS = "pan,wheel_zoom,box_zoom,save,reset"


def _colors(comp) -> np.ndarray:
    return np.array([COLORS.get(c, COLORS["none"]) for c in comp], dtype=object)


def _column(values, dtype=float) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=dtype)


#: Below this many rows a column is sent as a list (inside the message's JSON): every array is a binary buffer
#: of its own, two websocket frames, which costs the server more than a few numbers written as text.
SMALL_COLUMN = 64


def _small(values) -> list | np.ndarray:
    """A small numeric column as a list, a large one as a contiguous float array."""
    values = _column(values)
    return values.tolist() if values.size < SMALL_COLUMN else values


#: Points of an ellipse traced in the browser (:class:`ScatterPanel` with ``ellipses="axes"``).
ELLIPSE_POINTS = 60
# The path of row i: (c[i] + p[i] cos t + q[i] sin t) for 60 angles t from 0 to 2 pi, computed by the browser
# from the centre and the axes of each ellipse (the same points as explorer.ui.plots.mixture2d.ellipse_paths).
_TRACE_ELLIPSE = """
const c = this.get_column("{c}"), p = this.get_column("{p}"), q = this.get_column("{q}");
const n = {n}, paths = [];
for (let i = 0; i < c.length; i++) {{
  const path = new Float64Array(n);
  for (let j = 0; j < n; j++) {{
    const t = 2 * Math.PI * j / (n - 1);
    path[j] = c[i] + p[i] * Math.cos(t) + q[i] * Math.sin(t);
  }}
  paths.push(path);
}}
return paths;
"""


class ScatterPanel:
    """One 2-D mixture panel: a Bokeh figure made once, whose :meth:`update` only replaces source data.

    Parameters
    ----------
    height : int
        Height in pixels (the width follows the page).
    on_tap : callable, optional
        ``on_tap(x, y)`` when the plot is clicked (data coordinates).
    marks, truth : bool
        Draw missing-value marks (segments) and the true mixture (dashed paths); without, their renderers are not
        made and frames need not have them.
    ellipses : {"paths", "axes"}
        How a frame gives its ellipses: as paths (``x``, ``y`` arrays, sent as they are), or by their ``center``
        (cx, cy) and ``axes`` (a 2 x 2 matrix ``A``: the path is ``center + A (cos t, sin t)``), traced in the
        browser, so a frame sends six numbers per ellipse instead of two arrays.

    Attributes
    ----------
    figure : bokeh.plotting.figure
    pane : panel.pane.Bokeh
        What a page lays out.
    points, ellipses, marks, truth : ColumnDataSource
        (``marks`` and ``truth`` None when not drawn.)
    frame : dict or None
        The last frame drawn (see :meth:`update`).
    """

    def __init__(self, height: int = 360, on_tap: Callable[[float, float], None] | None = None, *,
                 marks: bool = True, truth: bool = True, ellipses: str = "paths"):
        if ellipses not in ("paths", "axes"):
            raise ValueError(f"ellipses must be 'paths' or 'axes', not {ellipses!r}")
        self.x_range, self.y_range = Range1d(0.0, 1.0), Range1d(0.0, 1.0)
        fig = figure(x_range=self.x_range, y_range=self.y_range, height=height, sizing_mode="stretch_width",
                     tools=_TOOLS, active_scroll="wheel_zoom", toolbar_location="above", x_axis_label="x",
                     y_axis_label="y", min_border_left=40)
        fig.xgrid.visible = fig.ygrid.visible = False
        self.truth = ColumnDataSource({"xs": [], "ys": []}) if truth else None
        self.marks = ColumnDataSource({k: [] for k in ("x0", "y0", "x1", "y1", "color", "alpha")}) if marks else None
        self.points = ColumnDataSource({k: [] for k in ("x", "y", "color", "fill", "line", "size", "marker", "lw")})
        if truth:
            fig.multi_line("xs", "ys", source=self.truth, line_color="#555555", line_dash="dashed", line_width=1.5)
        self._ellipse_mode = ellipses
        if ellipses == "paths":
            self.ellipses = ColumnDataSource({"xs": [], "ys": [], "color": [], "lw": [], "la": []})
            xs, ys = "xs", "ys"
        else:
            self.ellipses = ColumnDataSource({k: [] for k in ("cx", "cy", "a00", "a01", "a10", "a11", "color", "lw",
                                                              "la")})
            xs, ys = (expr(CustomJSExpr(code=_TRACE_ELLIPSE.format(c=c, p=p, q=q, n=ELLIPSE_POINTS)))
                      for c, p, q in (("cx", "a00", "a01"), ("cy", "a10", "a11")))
        fig.multi_line(xs, ys, source=self.ellipses, line_color="color", line_width="lw", line_alpha="la")
        if marks:
            fig.segment("x0", "y0", "x1", "y1", source=self.marks, line_color="color", line_width=2,
                        line_alpha="alpha")
        fig.scatter("x", "y", source=self.points, marker="marker", size="size", fill_color="color",
                    line_color="color", fill_alpha="fill", line_alpha="line", line_width="lw")
        if on_tap is not None:
            fig.on_event(Tap, lambda event: on_tap(event.x, event.y))
        self.figure = fig
        self.pane = figure_pane(fig, sizing_mode="stretch_width")
        self.frame: dict | None = None
        self._limits = None
        self._truth_key = None
        self._labels = ("x", "y")

    def set_limits(self, xlim, ylim) -> None:
        """Fit the axes to new limits (and make Bokeh's Reset tool return there); a zoom survives frames
        with the same limits."""
        limits = (tuple(map(float, xlim)), tuple(map(float, ylim)))
        if limits == self._limits or not np.isfinite(limits).all():
            return
        self._limits = limits
        for rng, (lo, hi) in ((self.x_range, limits[0]), (self.y_range, limits[1])):
            rng.update(start=lo, end=hi, reset_start=lo, reset_end=hi)

    def set_labels(self, xlabel: str, ylabel: str) -> None:
        """Name the axes (set only when they change)."""
        labels = (str(xlabel), str(ylabel))
        if labels != self._labels:
            self._labels = labels
            self.figure.xaxis.axis_label, self.figure.yaxis.axis_label = labels

    def update(self, frame: dict) -> None:
        """Draw ``frame``: data only, no new model, and only the columns that changed.

        ``frame`` has ``points`` (columns x, y, comp, fill, line, size, marker, lw), ``ellipses`` (dicts with
        ``comp``, optional ``lw`` and ``la``, and the paths ``x``, ``y`` or the ``center`` and ``axes``: see
        the ``ellipses`` parameter), ``xlim`` and ``ylim``; ``marks`` (segments x0, y0, x1, y1, comp, alpha) and
        ``truth`` (paths x, y) when the panel draws them; optionally ``xlabel`` and ``ylabel``. See
        :func:`~explorer.ui.plots.mixture2d.panel_frame` and :func:`~explorer.ui.plots.vb_frames.mixture_frame`.
        """
        self.frame = frame
        self.set_limits(frame["xlim"], frame["ylim"])
        if "xlabel" in frame or "ylabel" in frame:
            self.set_labels(frame.get("xlabel", self._labels[0]), frame.get("ylabel", self._labels[1]))
        p = frame["points"]
        set_data(self.points, {"x": _column(p["x"]), "y": _column(p["y"]), "color": _colors(p["comp"]),
                             "fill": _column(p["fill"]), "line": _column(p["line"]), "size": _column(p["size"]),
                             "marker": np.asarray(p["marker"], dtype=object), "lw": _column(p["lw"])})
        if self.marks is not None:
            m = frame["marks"]
            set_data(self.marks, {"x0": _column(m["x0"]), "y0": _column(m["y0"]), "x1": _column(m["x1"]),
                                "y1": _column(m["y1"]), "color": _colors(m["comp"]), "alpha": _column(m["alpha"])})
        e = frame["ellipses"]
        style = {"color": _colors([q["comp"] for q in e]).tolist(), "lw": _small([q.get("lw", 1.0) for q in e]),
                 "la": _small([q.get("la", 1.0) for q in e])}
        if self._ellipse_mode == "paths":
            set_data(self.ellipses, {"xs": [_column(q["x"]) for q in e], "ys": [_column(q["y"]) for q in e]} | style)
        else:
            axes = np.reshape([q["axes"] for q in e], (len(e), 2, 2))
            centers = np.reshape([q["center"] for q in e], (len(e), 2))
            set_data(self.ellipses, {"cx": _small(centers[:, 0]), "cy": _small(centers[:, 1]),
                                   "a00": _small(axes[:, 0, 0]), "a01": _small(axes[:, 0, 1]),
                                   "a10": _small(axes[:, 1, 0]), "a11": _small(axes[:, 1, 1])} | style)
        if self.truth is not None:
            truth = frame["truth"]
            key = tuple((float(q["x"][0]), float(q["y"][0]), len(q["x"])) for q in truth)
            if key != self._truth_key:  # the true mixture changes with the data set only
                self._truth_key = key
                self.truth.data = {"xs": [_column(q["x"]) for q in truth], "ys": [_column(q["y"]) for q in truth]}


class TracePlot:
    """Per-iteration curves, one line (or step line) per series; rows are streamed as a run goes (never re-sent).

    The iteration axis spans at least 0 to :data:`~explorer.ui.plots.mixture2d.TRACE_MIN_ITERATIONS`;
    both axes follow the data in the browser.

    Parameters
    ----------
    title, ylabel : str
    series : sequence of (label, color) or (label, color, line_options)
        One line each, in the legend above the plot; ``line_options`` (a dict of Bokeh line properties, e.g.
        ``{"line_width": 1.5, "line_dash": "dashed"}``) replace the default width of 2.
    height : int
    steps : bool
        Draw every series as a step line (the value holds until the next iteration), e.g. counts.
    legend_columns : int, optional
        Entries per row of the legend (default: all on one row).
    """

    def __init__(self, title: str, ylabel: str, series: Sequence[tuple], height: int = 290, steps: bool = False,
                 legend_columns: int | None = None):
        floor = ColumnDataSource({"iteration": [0, TRACE_MIN_ITERATIONS], "value": [0.0, 0.0]})
        self.sources = [ColumnDataSource({"iteration": np.empty(0, dtype=int), "value": np.empty(0)})
                        for _ in series]
        # no toolbar: of the tools only a drag (pan) can be used, the others are not made
        fig = figure(height=height, sizing_mode="stretch_width", tools="pan", toolbar_location=None, title=title,
                     x_axis_label="iteration", y_axis_label=ylabel, min_border_left=40)
        draw = functools.partial(fig.step, mode="after") if steps else fig.line
        lines = []
        for source, (_, color, *options) in zip(self.sources, series):
            style = {"line_width": 2} | (options[0] if options else {})
            lines.append(draw("iteration", "value", source=source, color=color, **style))
        hidden = fig.scatter("iteration", "value", source=floor, alpha=0.0, size=0)
        fig.x_range = DataRange1d(renderers=[*lines, hidden])
        fig.y_range = DataRange1d(renderers=list(lines))
        fig.add_layout(Legend(items=[LegendItem(label=spec[0], renderers=[line]) for spec, line in zip(series, lines)],
                              orientation="horizontal", location="center", label_text_font_size="9pt",
                              click_policy="hide", **({"ncols": legend_columns} if legend_columns else {})), "above")
        self.figure = fig
        self.pane = figure_pane(fig, sizing_mode="stretch_width")
        self._last = [-1] * len(series)

    def last_iteration(self, i: int) -> int:
        """The last iteration drawn in series ``i`` (-1: none)."""
        return self._last[i]

    def clear(self, i: int) -> None:
        if self._last[i] != -1 or len(self.sources[i].data["iteration"]):
            self.sources[i].data = {"iteration": np.empty(0, dtype=int), "value": np.empty(0)}
        self._last[i] = -1

    def append(self, i: int, iterations, values) -> None:
        """Add rows to series ``i`` (non-finite values are left out: a gap, never a NaN sent).

        A few rows (a step's) are sent as numbers in the message, many as binary arrays (see :func:`_small`).
        """
        its, vals = np.asarray(iterations, dtype=int), np.asarray(values, dtype=float)
        if its.size:
            self._last[i] = int(its[-1])
        keep = np.isfinite(vals)
        if keep.any():
            its, vals = its[keep], vals[keep]
            if its.size < SMALL_COLUMN:
                its, vals = its.tolist(), vals.tolist()
            self.sources[i].stream({"iteration": its, "value": vals})

    def values(self, i: int) -> np.ndarray:
        """The values drawn in series ``i``."""
        return np.asarray(self.sources[i].data["value"], dtype=float)
