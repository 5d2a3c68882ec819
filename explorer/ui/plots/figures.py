"""Bokeh figures built once per session whose frames only change their data (issue 19).

A HoloViews ``DynamicMap`` re-renders its element on every frame: on the EM playground that cost
0.5-0.8 s of server CPU per Step, 73 % in HoloViews' plot update and 37 % in Bokeh walking the
whole document's model graph again (``../shared/guides/panel-guide.md`` section 2.4). The figures
here are plain Bokeh figures with a fixed set of renderers made at construction; a frame only
assigns ``ColumnDataSource.data`` (same columns), ``stream``\\ s new rows, or sets a scalar property
(a range's start and end), so it costs what its numbers cost to send. Components whose number varies
are rows of one source (one ``multi_line`` for all ellipses).

* :class:`ScatterPanel`: a 2-D mixture panel (points, missing-value marks, ellipses, the true mixture)
  drawing the frames of :func:`explorer.ui.plots.mixture2d.panel_frame`;
* :class:`TracePlot`: per-iteration curves, one line per series, rows streamed as a run goes.

In a notebook, Bokeh models changed directly are sent by :func:`push` (Panel's ``push_notebook``);
when served, the session's document sends them itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import panel as pn
from bokeh.events import Tap
from bokeh.models import ColumnDataSource, DataRange1d, Legend, LegendItem, Range1d
from bokeh.plotting import figure

from explorer.ui.plots.mixture2d import COLORS, TRACE_MIN_ITERATIONS
from explorer.ui.session import served_doc

__all__ = ["ScatterPanel", "TracePlot", "push"]

_TOOLS = "pan,wheel_zoom,box_zoom,save,reset"


def push(*panes) -> None:
    """Send directly changed Bokeh models of ``panes`` to a notebook (nothing to do when served or headless)."""
    if served_doc() is None:
        pn.io.push_notebook(*panes)


def _colors(comp) -> np.ndarray:
    return np.array([COLORS.get(c, COLORS["none"]) for c in comp], dtype=object)


def _column(values, dtype=float) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=dtype)


class ScatterPanel:
    """One 2-D mixture panel: a Bokeh figure made once, whose :meth:`update` only replaces source data.

    Parameters
    ----------
    height : int
        Height in pixels (the width follows the page).
    on_tap : callable, optional
        ``on_tap(x, y)`` when the plot is clicked (data coordinates).

    Attributes
    ----------
    figure : bokeh.plotting.figure
    pane : panel.pane.Bokeh
        What a page lays out.
    frame : dict or None
        The last frame drawn (see :func:`~explorer.ui.plots.mixture2d.panel_frame`).
    """

    def __init__(self, height: int = 360, on_tap: Callable[[float, float], None] | None = None):
        self.x_range, self.y_range = Range1d(0.0, 1.0), Range1d(0.0, 1.0)
        fig = figure(x_range=self.x_range, y_range=self.y_range, height=height, sizing_mode="stretch_width",
                     tools=_TOOLS, active_scroll="wheel_zoom", toolbar_location="above", x_axis_label="x",
                     y_axis_label="y", min_border_left=40)
        fig.xgrid.visible = fig.ygrid.visible = False
        self.truth = ColumnDataSource({"xs": [], "ys": []})
        self.ellipses = ColumnDataSource({"xs": [], "ys": [], "color": [], "lw": [], "la": []})
        self.marks = ColumnDataSource({k: [] for k in ("x0", "y0", "x1", "y1", "color", "alpha")})
        self.points = ColumnDataSource({k: [] for k in ("x", "y", "color", "fill", "line", "size", "marker", "lw")})
        fig.multi_line("xs", "ys", source=self.truth, line_color="#555555", line_dash="dashed", line_width=1.5)
        fig.multi_line("xs", "ys", source=self.ellipses, line_color="color", line_width="lw", line_alpha="la")
        fig.segment("x0", "y0", "x1", "y1", source=self.marks, line_color="color", line_width=2, line_alpha="alpha")
        fig.scatter("x", "y", source=self.points, marker="marker", size="size", fill_color="color",
                    line_color="color", fill_alpha="fill", line_alpha="line", line_width="lw")
        if on_tap is not None:
            fig.on_event(Tap, lambda event: on_tap(event.x, event.y))
        self.figure = fig
        self.pane = pn.pane.Bokeh(fig, sizing_mode="stretch_width")
        self.frame: dict | None = None
        self._limits = None
        self._truth_key = None

    def set_limits(self, xlim, ylim) -> None:
        """Fit the axes to new limits (and make Bokeh's Reset tool return there); a zoom survives frames
        with the same limits."""
        limits = (tuple(map(float, xlim)), tuple(map(float, ylim)))
        if limits == self._limits or not np.isfinite(limits).all():
            return
        self._limits = limits
        for rng, (lo, hi) in ((self.x_range, limits[0]), (self.y_range, limits[1])):
            rng.update(start=lo, end=hi, reset_start=lo, reset_end=hi)

    def update(self, frame: dict) -> None:
        """Draw ``frame`` (a :func:`~explorer.ui.plots.mixture2d.panel_frame` dict): data only, no new model."""
        self.frame = frame
        self.set_limits(frame["xlim"], frame["ylim"])
        p = frame["points"]
        self.points.data = {"x": _column(p["x"]), "y": _column(p["y"]), "color": _colors(p["comp"]),
                            "fill": _column(p["fill"]), "line": _column(p["line"]), "size": _column(p["size"]),
                            "marker": np.asarray(p["marker"], dtype=object), "lw": _column(p["lw"])}
        m = frame["marks"]
        self.marks.data = {"x0": _column(m["x0"]), "y0": _column(m["y0"]), "x1": _column(m["x1"]),
                           "y1": _column(m["y1"]), "color": _colors(m["comp"]), "alpha": _column(m["alpha"])}
        e = frame["ellipses"]
        self.ellipses.data = {"xs": [_column(q["x"]) for q in e], "ys": [_column(q["y"]) for q in e],
                              "color": _colors([q["comp"] for q in e]), "lw": _column([q.get("lw", 1.0) for q in e]),
                              "la": _column([q.get("la", 1.0) for q in e])}
        truth = frame["truth"]
        key = tuple((float(q["x"][0]), float(q["y"][0]), len(q["x"])) for q in truth)
        if key != self._truth_key:  # the true mixture changes with the data set only
            self._truth_key = key
            self.truth.data = {"xs": [_column(q["x"]) for q in truth], "ys": [_column(q["y"]) for q in truth]}


class TracePlot:
    """Per-iteration curves, one line per series; rows are streamed as a run goes (never re-sent).

    The iteration axis spans at least 0 to :data:`~explorer.ui.plots.mixture2d.TRACE_MIN_ITERATIONS`;
    both axes follow the data in the browser.

    Parameters
    ----------
    title, ylabel : str
    series : sequence of (label, color)
        One line each, in the legend above the plot.
    height : int
    """

    def __init__(self, title: str, ylabel: str, series: Sequence[tuple[str, str]], height: int = 290):
        floor = ColumnDataSource({"iteration": [0, TRACE_MIN_ITERATIONS], "value": [0.0, 0.0]})
        self.sources = [ColumnDataSource({"iteration": np.empty(0, dtype=int), "value": np.empty(0)})
                        for _ in series]
        fig = figure(height=height, sizing_mode="stretch_width", toolbar_location=None, title=title,
                     x_axis_label="iteration", y_axis_label=ylabel, min_border_left=40)
        lines = [fig.line("iteration", "value", source=s, color=c, line_width=2) for s, (_, c) in zip(self.sources, series)]
        hidden = fig.scatter("iteration", "value", source=floor, alpha=0.0, size=0)
        fig.x_range = DataRange1d(renderers=[*lines, hidden])
        fig.y_range = DataRange1d(renderers=list(lines))
        fig.add_layout(Legend(items=[LegendItem(label=label, renderers=[r]) for (label, _), r in zip(series, lines)],
                              orientation="horizontal", location="center", label_text_font_size="9pt",
                              click_policy="hide"), "above")
        self.figure = fig
        self.pane = pn.pane.Bokeh(fig, sizing_mode="stretch_width")
        self._last = [-1] * len(series)

    def last_iteration(self, i: int) -> int:
        """The last iteration drawn in series ``i`` (-1: none)."""
        return self._last[i]

    def clear(self, i: int) -> None:
        if self._last[i] != -1 or len(self.sources[i].data["iteration"]):
            self.sources[i].data = {"iteration": np.empty(0, dtype=int), "value": np.empty(0)}
        self._last[i] = -1

    def append(self, i: int, iterations, values) -> None:
        """Add rows to series ``i`` (non-finite values are left out: a gap, never a NaN sent)."""
        its, vals = np.asarray(iterations, dtype=int), np.asarray(values, dtype=float)
        if its.size:
            self._last[i] = int(its[-1])
        keep = np.isfinite(vals)
        if keep.any():
            self.sources[i].stream({"iteration": its[keep], "value": vals[keep]})

    def values(self, i: int) -> np.ndarray:
        """The values drawn in series ``i``."""
        return np.asarray(self.sources[i].data["value"], dtype=float)
