"""Measured series as lines with markers on a logarithmic y axis, a Bokeh figure made once per session.

:class:`SeriesPlot` has one line and one marker renderer per series that the figure can show (their number is
fixed when it is built); a series without data is hidden, and so is its legend entry. A frame only replaces the
series' source data, shows or hides them and sets the axes' ranges and the x axis's label: no Bokeh model is
added or removed after the figure is built.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from bokeh.models import (
    ColumnDataSource,
    HoverTool,
    Legend,
    LegendItem,
    Line,
    Range1d,
    Scatter,
)
from bokeh.plotting import figure

from explorer.ui.plots.sources import set_data
from explorer.ui.plots.figures import figure_pane

__all__ = ["SeriesPlot"]


class SeriesPlot:
    """Lines with markers, one pair per series, on a log y axis; :meth:`update` draws a frame.

    Parameters
    ----------
    title, ylabel : str
    series : mapping of key -> (label, colour, line_dash, marker)
        Every series the figure can show, in legend order.
    columns : sequence of str
        Columns of every series' table (they include ``x`` and ``y``); all of them can be named in ``tooltips``.
    x, y : str
        The columns drawn.
    tooltips : list of (str, str)
        Bokeh tooltips of the markers.
    height : int
    legend_columns : int
        Entries per row of the legend (below the plot).

    Attributes
    ----------
    figure : bokeh.plotting.figure
    pane : panel.pane.Bokeh
    sources : dict of key -> ColumnDataSource
    frame : dict or None
        The last frame drawn.
    """

    def __init__(self, title: str, ylabel: str, series: Mapping[str, tuple], *, columns: Sequence[str], x: str,
                 y: str, tooltips: list, height: int = 440, legend_columns: int = 2):
        self.x_range, self.y_range = Range1d(0.0, 1.0), Range1d(1.0, 10.0)
        fig = figure(title=title, height=height, sizing_mode="stretch_width", x_range=self.x_range,
                     y_range=self.y_range, y_axis_type="log", y_axis_label=ylabel,
                     tools="pan,box_zoom,wheel_zoom,save,reset", toolbar_location="above", min_border_left=40)
        fig.title.text_font_size = "12pt"
        self._columns = tuple(columns)
        self.sources: dict[str, ColumnDataSource] = {}
        self._renderers: dict[str, tuple] = {}
        items, markers = [], []
        for key, (label, colour, dash, marker) in series.items():
            source = ColumnDataSource({c: [] for c in self._columns})
            line = fig.add_glyph(source, Line(x=x, y=y, line_color=colour, line_dash=dash, line_width=2),
                                 visible=False)
            points = fig.add_glyph(source, Scatter(x=x, y=y, marker=marker, size=8, fill_color=colour,
                                                   line_color=colour), visible=False)
            item = LegendItem(label=label, renderers=[line, points], visible=False)
            self.sources[key] = source
            self._renderers[key] = (line, points, item)
            items.append(item)
            markers.append(points)
        fig.add_tools(HoverTool(renderers=markers, tooltips=tooltips))
        fig.add_layout(Legend(items=items, ncols=legend_columns, label_text_font_size="8pt", click_policy="hide"),
                       "below")
        self.figure = fig
        self.pane = figure_pane(fig, sizing_mode="stretch_width")
        self.frame: dict | None = None
        self._limits = None

    def update(self, tables: Mapping[str, Mapping], xlim, ylim, xlabel: str, frame: dict | None = None) -> None:
        """Draw one table (a mapping of :attr:`columns` to values) per series key: data, visibility and ranges.

        ``tables`` may hold more keys than the figure's series (they are not drawn). A series with no rows is
        hidden with its legend entry; ``frame`` (what the tables came from) is kept as :attr:`frame`.
        """
        self.frame = frame
        limits = (tuple(map(float, xlim)), tuple(map(float, ylim)))
        if limits != self._limits and np.isfinite(limits).all():
            self._limits = limits
            for rng, (lo, hi) in ((self.x_range, limits[0]), (self.y_range, limits[1])):
                rng.update(start=lo, end=hi, reset_start=lo, reset_end=hi)
        if self.figure.xaxis.axis_label != xlabel:
            self.figure.xaxis.axis_label = xlabel
        for key, source in self.sources.items():
            table = tables[key]
            data = {c: np.asarray(table[c]) for c in self._columns}
            shown = len(data[self._columns[0]]) > 0
            set_data(source, data)
            line, points, item = self._renderers[key]
            if line.visible != shown:
                line.visible = points.visible = item.visible = shown

    def shown(self) -> list[str]:
        """The keys of the series drawn."""
        return [key for key, (line, _, _) in self._renderers.items() if line.visible]
