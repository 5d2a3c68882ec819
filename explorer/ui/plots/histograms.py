"""Overlaid histograms on shared bins: a Bokeh figure made once, whose updates only change its data (issue 19).

:class:`HistogramOverlay` draws a fixed set of histograms (one ``quad`` renderer and source each, e.g. the
complete, observed and missing parts of a column) on the same bin edges, with vertical marker lines
(``Span``\\ s: a mean, ...) and a legend of the histograms. :meth:`HistogramOverlay.update` assigns the
sources' data and sets scalars (the ranges' ends, the markers' locations, the title and the x label): it
never adds or removes a Bokeh model, so a new column, data set or delta costs what its numbers cost to send.
The x axis spans the edges and the y axis 0 to 1.1 times the highest bar, as HoloViews' histograms did.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from explorer.ui.plots.figures import figure_pane
from bokeh.models import ColumnDataSource, Legend, LegendItem, Range1d, Span
from bokeh.plotting import figure

__all__ = ["Bars", "HistogramOverlay", "Marker"]


@dataclass(frozen=True)
class Bars:
    """One histogram of an overlay: its legend label and its Bokeh fill / line style."""

    label: str
    fill_color: str
    fill_alpha: float = 0.55
    line_color: str | None = None  # default: the fill colour
    line_alpha: float = 1.0
    line_width: float = 1.0


@dataclass(frozen=True)
class Marker:
    """A vertical line of an overlay (a ``Span``): not in the legend, hidden while its location is None."""

    color: str
    line_dash: str = "solid"
    line_width: float = 2.0


class HistogramOverlay:
    """Histograms of :class:`Bars` on shared bin edges, vertical :class:`Marker` lines and a legend.

    Parameters
    ----------
    bars : mapping of str to Bars
        The histograms, drawn in this order (the first one at the back).
    markers : mapping of str to Marker
        The vertical lines.
    ylabel : str
    legend : {"right", "below"}
        Where the legend goes (outside the frame).
    legend_columns : int
        Columns of legend items.
    legend_font_size : str
    show_grid : bool
    pane_options : dict, optional
        Passed to :class:`panel.pane.Bokeh` (sizing_mode, margin ...).
    figure_options :
        Passed to :func:`bokeh.plotting.figure` (width, height, sizing_mode, tools, toolbar_location ...).

    Attributes
    ----------
    figure : bokeh.plotting.figure
    sources : dict of str to ColumnDataSource
        ``left``, ``right``, ``top``, ``bottom`` of every histogram's bars.
    spans : dict of str to Span
    pane : panel.pane.Bokeh
        What a page lays out.
    frame : dict or None
        The last frame drawn (the arguments of :meth:`update`).
    """

    def __init__(self, bars: Mapping[str, Bars], markers: Mapping[str, Marker] | None = None, *, ylabel: str = "",
                 legend: str = "right", legend_columns: int = 1, legend_font_size: str = "10pt",
                 show_grid: bool = False, pane_options: dict | None = None, **figure_options):
        self.x_range, self.y_range = Range1d(0.0, 1.0), Range1d(0.0, 1.0)
        options = dict(tools="pan,wheel_zoom,box_zoom,save,reset", toolbar_location="above") | figure_options
        fig = figure(x_range=self.x_range, y_range=self.y_range, y_axis_label=ylabel, **options)
        fig.xgrid.visible = fig.ygrid.visible = show_grid
        self.sources = {}
        items = []
        for name, style in bars.items():
            source = ColumnDataSource({k: np.zeros(0) for k in ("left", "right", "top", "bottom")})
            renderer = fig.quad(left="left", right="right", top="top", bottom="bottom", source=source,
                                fill_color=style.fill_color, fill_alpha=style.fill_alpha,
                                line_color=style.line_color or style.fill_color, line_alpha=style.line_alpha,
                                line_width=style.line_width)
            self.sources[name] = source
            items.append(LegendItem(label=style.label, renderers=[renderer]))
        self.spans = {}
        for name, m in (markers or {}).items():
            span = Span(location=0.0, dimension="height", line_color=m.color, line_dash=m.line_dash,
                        line_width=m.line_width, visible=False)
            fig.add_layout(span)
            self.spans[name] = span
        fig.add_layout(Legend(items=items, location="center" if legend == "below" else "bottom_left",
                              click_policy="mute", ncols=legend_columns, label_text_font_size=legend_font_size), legend)
        self.figure = fig
        self.pane = figure_pane(fig, **(pane_options or {}))
        self.frame: dict | None = None

    def update(self, edges, counts: Mapping[str, np.ndarray], *, markers: Mapping[str, float | None] | None = None,
               title: str = "", xlabel: str = "") -> None:
        """Draw ``counts[name]`` (one value per bin) of every histogram on ``edges``; data and scalars only.

        A histogram missing from ``counts`` is drawn empty; a marker missing from ``markers`` (or None) is hidden.
        """
        edges = np.asarray(edges, dtype=float)
        markers = dict(markers or {})
        self.frame = {"edges": edges, "counts": {k: np.asarray(v, dtype=float) for k, v in counts.items()},
                      "markers": markers, "title": title, "xlabel": xlabel}
        left, right, bottom = edges[:-1], edges[1:], np.zeros(edges.size - 1)
        top = 0.0
        for name, source in self.sources.items():
            values = self.frame["counts"].get(name)
            if values is None or values.size != left.size:
                source.data = {"left": np.zeros(0), "right": np.zeros(0), "top": np.zeros(0), "bottom": np.zeros(0)}
                continue
            source.data = {"left": left, "right": right, "top": values, "bottom": bottom}
            top = max(top, float(np.max(values, initial=0.0)))
        for name, span in self.spans.items():
            at = markers.get(name)
            visible = at is not None and bool(np.isfinite(at))
            if visible:
                span.location = float(at)
            span.visible = visible
        lo, hi = (float(edges[0]), float(edges[-1])) if edges.size > 1 else (0.0, 1.0)
        self.x_range.update(start=lo, end=hi, reset_start=lo, reset_end=hi)
        ytop = 1.1 * top if top > 0 else 1.0
        self.y_range.update(start=0.0, end=ytop, reset_start=0.0, reset_end=ytop)
        self.figure.title.text = title
        self.figure.xaxis.axis_label = xlabel

    def values(self, name: str) -> np.ndarray:
        """The bar heights drawn for histogram ``name``."""
        return np.asarray(self.sources[name].data["top"], dtype=float)
