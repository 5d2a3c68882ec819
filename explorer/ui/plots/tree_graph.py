"""A tree drawn as nodes and edges, with a highlighted path and a selected node: a Bokeh figure made once per session.

:class:`TreeGraph` draws, each from one ``ColumnDataSource``: shaded squares (e.g. the missing pixels of the
selected pattern), the edges with their weights as labels, the path of the selected node in red, the nodes
(size and colour per node, hover read-out) and a ring around the selected node. The y axis points down (the root
on top). A click on the plot calls ``on_tap(x, y)`` in data coordinates. A frame only replaces the sources' data,
the axes' ranges and labels: no Bokeh model is added or removed after the figure is built.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
from bokeh.events import Tap
from bokeh.models import (
    ColumnDataSource,
    HoverTool,
    Quad,
    Range1d,
    Scatter,
    Segment,
    Text,
)
from bokeh.plotting import figure

from explorer.ui.plots.sources import set_data
from explorer.ui.plots.figures import figure_pane

__all__ = ["TreeGraph", "NODE_COLUMNS"]

#: Columns of a frame's ``nodes`` table.
NODE_COLUMNS = ("x", "y", "node", "rows", "depth", "scratch", "n_missing", "n_observed", "parent", "n_d", "size",
                "colour")
_SEGMENTS = ("x0", "y0", "x1", "y1")
_TOOLTIPS = [("node", "@node"), ("rows", "@rows"), ("depth", "@depth"), ("missing", "@n_missing"),
             ("observed", "@n_observed"), ("parent", "@parent"), ("n_d to parent", "@n_d"), ("factor", "@scratch")]


def _columns(table: pd.DataFrame, names) -> dict:
    return {c: np.asarray(table[c]) for c in names}


class TreeGraph:
    """Nodes, edges, edge labels, the selected node's path and squares, drawn by :meth:`update` from a frame.

    Parameters
    ----------
    title : str
    height : int
    on_tap : callable, optional
        ``on_tap(x, y)`` when the plot is clicked (data coordinates).

    Attributes
    ----------
    figure : bokeh.plotting.figure
    pane : panel.pane.Bokeh
    sources : dict of str -> ColumnDataSource
        ``pixels``, ``edges``, ``path``, ``labels``, ``nodes`` and ``selected``.
    frame : dict or None
        The last frame drawn.
    """

    def __init__(self, title: str, height: int = 500, on_tap: Callable[[float, float], None] | None = None):
        self.x_range, self.y_range = Range1d(0.0, 1.0), Range1d(1.0, 0.0)  # y points down: the root on top
        fig = figure(title=title, height=height, sizing_mode="stretch_width", x_range=self.x_range,
                     y_range=self.y_range, tools="pan,box_zoom,wheel_zoom,save,reset", toolbar_location="above",
                     min_border_left=40)
        fig.xgrid.visible = fig.ygrid.visible = False
        fig.title.text_font_size = "12pt"
        self.sources = {
            "pixels": ColumnDataSource({c: [] for c in _SEGMENTS}),
            "edges": ColumnDataSource({c: [] for c in (*_SEGMENTS, "n_d")}),
            "path": ColumnDataSource({c: [] for c in _SEGMENTS}),
            "labels": ColumnDataSource({"xm": [], "ym": [], "label": []}),
            "nodes": ColumnDataSource({c: [] for c in NODE_COLUMNS}),
            "selected": ColumnDataSource({"x": [], "y": []}),
        }
        s = self.sources
        fig.add_glyph(s["pixels"], Quad(left="x0", right="x1", bottom="y0", top="y1", fill_color="#f4b6a6",
                                        line_color="#f4b6a6", fill_alpha=0.45, line_alpha=0.45))
        fig.add_glyph(s["edges"], Segment(x0="x0", y0="y0", x1="x1", y1="y1", line_color="#9a9a9a", line_width=2))
        fig.add_glyph(s["path"], Segment(x0="x0", y0="y0", x1="x1", y1="y1", line_color="#d62728", line_width=5,
                                         line_alpha=0.85))
        fig.add_glyph(s["labels"], Text(x="xm", y="ym", text="label", text_font_size="8pt", text_color="#444444",
                                        text_align="center", text_baseline="middle"))
        nodes = fig.add_glyph(s["nodes"], Scatter(x="x", y="y", size="size", fill_color="colour", line_color="white",
                                                  line_width=1))
        fig.add_glyph(s["selected"], Scatter(x="x", y="y", size=34, fill_alpha=0.0, line_color="#d62728",
                                             line_width=3))
        fig.add_tools(HoverTool(renderers=[nodes], tooltips=_TOOLTIPS))
        if on_tap is not None:
            fig.on_event(Tap, lambda event: on_tap(event.x, event.y))
        self.figure = fig
        self.pane = figure_pane(fig, sizing_mode="stretch_width")
        self.frame: dict | None = None
        self._limits = None

    def update(self, frame: dict) -> None:
        """Draw ``frame``: tables ``nodes`` (:data:`NODE_COLUMNS`), ``edges`` (x0, y0, x1, y1, n_d, xm, ym,
        label), ``path`` and ``pixels`` (x0, y0, x1, y1), ``selected`` (rows of ``nodes``), and ``xlim``,
        ``ylim``, ``xlabel``, ``ylabel``. See :func:`explorer.ui.pages.performance.tree_frame`."""
        self.frame = frame
        limits = (tuple(map(float, frame["xlim"])), tuple(map(float, frame["ylim"])))
        if limits != self._limits and np.isfinite(limits).all():
            self._limits = limits
            (x0, x1), (y0, y1) = limits
            self.x_range.update(start=x0, end=x1, reset_start=x0, reset_end=x1)
            self.y_range.update(start=y1, end=y0, reset_start=y1, reset_end=y0)  # inverted
        fig = self.figure
        if (fig.xaxis.axis_label, fig.yaxis.axis_label) != (frame["xlabel"], frame["ylabel"]):
            fig.xaxis.axis_label, fig.yaxis.axis_label = frame["xlabel"], frame["ylabel"]
        s = self.sources  # a new selection sends its path, squares and ring only: the tree is unchanged
        set_data(s["pixels"], _columns(frame["pixels"], _SEGMENTS))
        set_data(s["edges"], _columns(frame["edges"], (*_SEGMENTS, "n_d")))
        set_data(s["labels"], _columns(frame["edges"], ("xm", "ym", "label")))
        set_data(s["path"], _columns(frame["path"], _SEGMENTS))
        set_data(s["nodes"], _columns(frame["nodes"], NODE_COLUMNS))
        set_data(s["selected"], _columns(frame["selected"], ("x", "y")))
