"""The Ratings page's three figures, Bokeh figures built once per session whose frames only change data.

* :class:`SelectionBars`: grouped bars of a probability per rating value 1..V, one group per value and one
  bar per series (on the page: the true, learned and moment-estimated :math:`\\mu_v`), the legend beside
  the plot. Every bar is a row of one source, always the same rows: a bar whose value is not finite is
  not drawn (its row is transparent), and a series with no bar at all keeps its legend entry without a
  swatch.
* :class:`ObjectiveTrace`: one curve per iteration; new iterations are streamed, a new run clears it.
* :class:`PredictivePlot`: distributions over the ratings 1..V (a line with markers each) and the true
  ratings as stars, the legend beside the plot.

A frame assigns ``ColumnDataSource.data`` (same columns), streams rows, or sets a scalar property (a
title's text, an axis label, a legend item's row): no Bokeh model is created or removed after the
constructor (issue 19; ``../shared/guides/panel-guide.md`` section 2.4). Titles and axes look like the
HoloViews plots they replace: no toolbar, a grid, the legend outside the frame on the right.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import panel as pn
from bokeh.models import (ColumnDataSource, DataRange1d, FixedTicker, GlyphRenderer, Legend, LegendItem, Line, Quad,
                          Range1d, Scatter)
from bokeh.plotting import figure

__all__ = ["ObjectiveTrace", "PredictivePlot", "SelectionBars"]

_LEGEND = dict(location="bottom_left", label_text_font_size="9pt", glyph_width=18, spacing=2)


def _small(values) -> list:
    """A short numeric column as a list: it travels inside the message's JSON, where every array would be a binary
    buffer of its own (two more websocket frames, which cost the server more than a few numbers as text)."""
    return np.asarray(values, dtype=float).tolist()


def _figure(height: int, **kwargs):
    """A figure with no toolbar shown; dragging pans and the mouse wheel zooms (as the HoloViews plots did)."""
    fig = figure(height=height, sizing_mode="stretch_width", tools="pan,wheel_zoom", active_drag="pan",
                 active_scroll="wheel_zoom", toolbar_location=None, min_border_left=40, min_border_right=10, **kwargs)
    fig.title.text_font_size, fig.title.text_color = "12pt", "black"
    return fig


def _draw(fig, glyph, source) -> GlyphRenderer:
    """Add ``glyph`` drawn from ``source`` to ``fig`` (the bare renderer: no selection or muted copies of the
    glyph, which ``figure.line`` and the like make and these plots never use)."""
    renderer = GlyphRenderer(data_source=source, glyph=glyph)
    fig.renderers.append(renderer)
    return renderer


def _pane(fig, css_class: str) -> pn.pane.Bokeh:
    if css_class:  # on the figure itself: the pane draws the figure as its own model, with no element around it
        fig.css_classes = [css_class]
    return pn.pane.Bokeh(fig, sizing_mode="stretch_width", min_width=420)


class SelectionBars:
    """Grouped bars: ``n_values`` groups (values 1..n) of one bar per series, as the rows of one source.

    Parameters
    ----------
    series : sequence of (label, color)
        The bars of a group, left to right, and their legend entries.
    xlabel, ylabel : str
    height : int
    css_class : str
        CSS class of the pane (browser tests find the plot by it).
    n_values : int
    width : float
        Width of one bar (the groups are 1 apart).

    Attributes
    ----------
    figure, pane, source
        The source has a row per (series, value), series-major: ``left``, ``right``, ``bottom``, ``top``
        (NaN where the bar is not drawn), ``series``, ``color`` and ``alpha``.
    """

    def __init__(self, series: Sequence[tuple[str, str]], xlabel: str, ylabel: str, *, height: int = 300,
                 css_class: str = "", n_values: int = 5, width: float = 0.26):
        self.labels = [label for label, _ in series]
        self.n_values = n_values
        values = np.arange(1, n_values + 1, dtype=float)
        centres = np.concatenate([values + (i - (len(series) - 1) / 2) * width for i in range(len(series))])
        self._left, self._right = centres - width / 2, centres + width / 2
        self._series = np.repeat(np.array(self.labels, dtype=object), n_values)
        self._colors = np.repeat(np.array([c for _, c in series], dtype=object), n_values)
        self.source = ColumnDataSource(self._columns(np.full((len(series), n_values), np.nan)))
        fig = _figure(height, x_range=Range1d(0.5, n_values + 0.5), y_range=Range1d(0.0, 1.05), x_axis_label=xlabel,
                      y_axis_label=ylabel)
        fig.xaxis.ticker = FixedTicker(ticks=list(range(1, n_values + 1)))
        bars = _draw(fig, Quad(left="left", right="right", bottom="bottom", top="top", fill_color="color",
                               fill_alpha="alpha", line_color="white", line_alpha="alpha"), self.source)
        self._items = [LegendItem(label=label, renderers=[bars], index=i * n_values)
                       for i, label in enumerate(self.labels)]
        fig.add_layout(Legend(items=self._items, **_LEGEND), "right")
        self.figure = fig
        self.pane = _pane(fig, css_class)

    @staticmethod
    def _bars(heights: np.ndarray) -> dict:
        """The columns that change with the heights: ``top`` (NaN where no bar) and ``alpha`` (0 there)."""
        top = np.asarray(heights, dtype=float).ravel()
        drawn = np.isfinite(top)
        return {"top": _small(np.where(drawn, top, np.nan)), "alpha": _small(drawn)}

    def _columns(self, heights: np.ndarray) -> dict:
        return {"left": _small(self._left), "right": _small(self._right), "bottom": _small(np.zeros(self._left.size)),
                "series": list(self._series), "color": list(self._colors), **self._bars(heights)}

    def update(self, heights, title: str) -> None:
        """Draw ``heights`` (series x values; NaN: no bar) under ``title`` (only the columns that changed are sent)."""
        heights = np.asarray(heights, dtype=float).reshape(len(self.labels), self.n_values)
        bars = self._bars(heights)
        if not np.array_equal(bars["top"], self.source.data["top"], equal_nan=True):
            self.source.data.update(bars)
        for i, item in enumerate(self._items):  # the legend's swatch takes the colour of a drawn bar
            finite = np.flatnonzero(np.isfinite(heights[i]))
            index = i * self.n_values + (int(finite[0]) if finite.size else 0)
            if item.index != index:
                item.index = index
        if self.figure.title.text != title:
            self.figure.title.text = title

    def heights(self, label: str) -> np.ndarray:
        """The bars drawn of series ``label`` (NaN: none)."""
        i = self.labels.index(label)
        return np.asarray(self.source.data["top"], dtype=float)[i * self.n_values:(i + 1) * self.n_values]


class ObjectiveTrace:
    """One curve of a value per iteration; a run's new iterations are streamed, a new run starts it again.

    Parameters
    ----------
    color : str
    height : int
    css_class : str
        CSS class of the pane.
    """

    def __init__(self, color: str = "#111111", *, height: int = 300, css_class: str = ""):
        self.source = ColumnDataSource({"x": [], "y": []})
        fig = _figure(height, x_range=DataRange1d(range_padding=0), y_range=DataRange1d())
        _draw(fig, Line(x="x", y="y", line_color=color, line_width=2), self.source)
        self.figure = fig
        self.pane = _pane(fig, css_class)
        self._run = None

    def update(self, run, values, title: str, xlabel: str, ylabel: str) -> None:
        """Show ``values`` (one per iteration, NaN: a gap) of run ``run`` (any key: another run clears the curve)."""
        values = np.asarray(values, dtype=float)
        shown = len(self.source.data["x"])
        if run != self._run or values.size < shown:
            self._run, shown = run, 0
            self.source.data = {"x": list(range(values.size)), "y": _small(values)}
        elif values.size > shown:
            self.source.stream({"x": list(range(shown, values.size)), "y": _small(values[shown:])})
        fig = self.figure
        for obj, attr, value in ((fig.title, "text", title), (fig.xaxis[0], "axis_label", xlabel),
                                 (fig.yaxis[0], "axis_label", ylabel)):
            if getattr(obj, attr) != value:
                setattr(obj, attr, value)

    def values(self) -> np.ndarray:
        return np.asarray(self.source.data["y"], dtype=float)


class PredictivePlot:
    """Distributions over the values 1..n (a line with markers each) and points marked by stars.

    Parameters
    ----------
    curves : sequence of (key, label, color, dash)
        One distribution each (``key`` names it in :meth:`update`), in the legend in this order.
    stars_label : str
        Legend entry of the stars.
    xlabel, ylabel : str
    height : int
    css_class : str
    n_values : int
    """

    def __init__(self, curves: Sequence[tuple[str, str, str, str]], stars_label: str, xlabel: str, ylabel: str, *,
                 height: int = 300, css_class: str = "", n_values: int = 5):
        self.keys = [key for key, *_ in curves]
        self.source = ColumnDataSource({"v": list(range(1, n_values + 1)),
                                        **{k: [np.nan] * n_values for k in self.keys}})
        self.stars = ColumnDataSource({"x": [], "y": []})
        fig = _figure(height, x_range=Range1d(0.6, n_values + 0.4), y_range=Range1d(0.0, 1.05),
                      x_axis_label=xlabel, y_axis_label=ylabel)
        fig.xaxis.ticker = FixedTicker(ticks=list(range(1, n_values + 1)))
        items = []
        for key, label, color, dash in curves:
            line = _draw(fig, Line(x="v", y=key, line_color=color, line_width=3, line_dash=dash), self.source)
            dots = _draw(fig, Scatter(x="v", y=key, fill_color=color, line_color=color, size=7), self.source)
            items.append(LegendItem(label=label, renderers=[line, dots]))
        stars = _draw(fig, Scatter(x="x", y="y", marker="star", fill_color="black", line_color="black", size=16),
                      self.stars)
        items.append(LegendItem(label=stars_label, renderers=[stars]))
        fig.add_layout(Legend(items=items, **_LEGEND), "right")
        self.figure = fig
        self.pane = _pane(fig, css_class)

    def update(self, curves: dict, stars: tuple, title: str) -> None:
        """Draw ``curves`` (key -> n probabilities, NaN: not drawn), the stars ``(x, y)`` and ``title``."""
        changed = {}
        for k in self.keys:
            values = np.asarray(curves[k], dtype=float)
            if not np.array_equal(values, self.source.data[k], equal_nan=True):
                changed[k] = _small(values)
        if changed:  # only the curves that moved are sent
            self.source.data.update(changed)
        x, y = (np.asarray(a, dtype=float) for a in stars)
        if not (np.array_equal(x, self.stars.data["x"]) and np.array_equal(y, self.stars.data["y"])):
            self.stars.data = {"x": _small(x), "y": _small(y)}
        if self.figure.title.text != title:
            self.figure.title.text = title
