"""An estimate against a parameter with its confidence band, reference lines and the point shown.

:class:`EstimateBand` is a Bokeh figure made once per session (issue 19) with a fixed set of renderers: the
band (``varea``), one ``line`` per named series (the estimate itself, vertical or horizontal reference lines
given as two points, ...) and one marked point; :meth:`EstimateBand.update` assigns their sources' data and
sets scalars (the ranges, the title, the axis labels). A series with no data is drawn empty and keeps its
legend entry. The Sensitivity page draws the pooled estimate against delta with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from explorer.ui.plots.figures import figure_pane
from bokeh.models import ColumnDataSource, Legend, LegendItem, Range1d
from bokeh.plotting import figure

__all__ = ["EstimateBand", "Line"]


@dataclass(frozen=True)
class Line:
    """One line series: its legend label and Bokeh line style."""

    label: str
    color: str
    line_width: float = 2.0
    line_dash: str = "solid"


def _xy(pair) -> dict:
    x, y = pair
    return {"x": np.asarray(x, dtype=float), "y": np.asarray(y, dtype=float)}


class EstimateBand:
    """A band, named lines and one point, with a legend below the frame.

    Parameters
    ----------
    lines : mapping of str to Line
        The line series, drawn over the band in this order.
    band : tuple of (label, color)
    point : tuple of (name, label, color)
        The marked point (drawn last), given in a frame under ``name``.
    legend_columns : int
    legend_font_size : str
    pane_options : dict, optional
        Passed to :class:`panel.pane.Bokeh` (sizing_mode, margin ...).
    figure_options :
        Passed to :func:`bokeh.plotting.figure` (height, sizing_mode, ...).

    Attributes
    ----------
    figure : bokeh.plotting.figure
    band_source : ColumnDataSource
        ``x``, ``lower``, ``upper``.
    sources : dict of str to ColumnDataSource
        ``x``, ``y`` of every line and of the point.
    pane : panel.pane.Bokeh
    frame : dict or None
        The last frame drawn.
    """

    def __init__(self, lines: Mapping[str, Line], *, band: tuple[str, str], point: tuple[str, str, str],
                 legend_columns: int = 3, legend_font_size: str = "9pt", pane_options: dict | None = None,
                 **figure_options):
        self.x_range, self.y_range = Range1d(0.0, 1.0), Range1d(0.0, 1.0)
        fig = figure(x_range=self.x_range, y_range=self.y_range, tools="", toolbar_location=None, **figure_options)
        self.band_source = ColumnDataSource({"x": np.zeros(0), "lower": np.zeros(0), "upper": np.zeros(0)})
        items = [(band[0], fig.varea("x", "lower", "upper", source=self.band_source, fill_color=band[1],
                                     fill_alpha=0.6))]
        self.sources = {}
        for name, line in lines.items():
            self.sources[name] = source = ColumnDataSource({"x": np.zeros(0), "y": np.zeros(0)})
            items.append((line.label, fig.line("x", "y", source=source, line_color=line.color,
                                               line_width=line.line_width, line_dash=line.line_dash)))
        name, label, color = point
        self.sources[name] = source = ColumnDataSource({"x": np.zeros(0), "y": np.zeros(0)})
        items.append((label, fig.scatter("x", "y", source=source, size=11, fill_color=color, line_color="white")))
        fig.add_layout(Legend(items=[LegendItem(label=label, renderers=[r]) for label, r in items],
                              location="center", ncols=legend_columns, click_policy="mute",
                              label_text_font_size=legend_font_size), "below")
        self.figure = fig
        self.pane = figure_pane(fig, **(pane_options or {}))
        self.frame: dict | None = None

    def update(self, frame: dict) -> None:
        """Draw ``frame``: ``band`` (x, lower, upper), every line's and the point's name as (x, y) pairs of
        arrays (a missing name is drawn empty), ``title``, ``xlabel``, ``ylabel``, ``xlim``, ``ylim``."""
        self.frame = frame
        x, lower, upper = (np.asarray(a, dtype=float) for a in frame["band"])
        self.band_source.data = {"x": x, "lower": lower, "upper": upper}
        empty = (np.zeros(0), np.zeros(0))
        for name, source in self.sources.items():
            source.data = _xy(frame.get(name, empty))
        for rng, (lo, hi) in ((self.x_range, frame["xlim"]), (self.y_range, frame["ylim"])):
            rng.update(start=float(lo), end=float(hi), reset_start=float(lo), reset_end=float(hi))
        self.figure.title.text = frame["title"]
        self.figure.xaxis.axis_label = frame["xlabel"]
        self.figure.yaxis.axis_label = frame["ylabel"]
