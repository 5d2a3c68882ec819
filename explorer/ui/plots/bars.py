"""Bar-shaped charts made once per session whose frames only replace the data (issue 19).

* :class:`BarChart`: one bar per row of one ``vbar`` source on a categorical axis: plain categories, or
  (group, bar) pairs (bars grouped side by side, e.g. the responsibilities of every component under several
  encoders). Every bar has its own colour (a column of the source), and the legend, when there is one, lists
  the distinct values of the source's ``legend`` column (BokehJS groups the rows), so the number of bars can
  change from frame to frame without adding or removing a Bokeh model. A frame sets the source's data and,
  when the categories change, the axis's factors.
* :class:`HistogramOverlay`: overlaid histograms on shared bins (one ``quad`` renderer and source each, e.g.
  the complete, observed and missing parts of a column), with vertical marker lines (``Span``\\ s: a mean,
  ...) and a legend of the histograms. :meth:`HistogramOverlay.update` assigns the sources' data and sets
  scalars (the ranges' ends, the markers' locations, the title and the x label). The x axis spans the edges
  and the y axis 0 to 1.1 times the highest bar, as HoloViews' histograms did.
* :class:`MetricBars`: one panel of the benchmark's results grid (thesis Figures A.1-A.5): the mean of one
  metric per (missing rate, method) as bars at numeric positions (rate + method offset), with their ±2 sd
  whiskers, pale dashed bars reaching the top for infinite means, ✕ markers for failed cells, text labels
  (∞, clipped magnitudes, "failed", "≤0"), the reference dashes of the thesis notebook and, optionally, a
  dashed target line (e.g. 95 % coverage). Each kind of mark is one ``ColumnDataSource``; a frame (see
  :func:`explorer.ui.pages.benchmark.bar_frame`) only replaces their data and sets the axes' ranges.

None of them adds or removes a Bokeh model after it is built, so a frame costs what its numbers cost to send.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from bokeh.models import (
    ColumnDataSource,
    FactorRange,
    HoverTool,
    Legend,
    LegendItem,
    Quad,
    Range1d,
    Scatter,
    Segment,
    Span,
    Text,
)
from bokeh.plotting import figure

from explorer.ui.plots.figures import figure_pane
from explorer.ui.plots.images import TITLE_SIZE
from explorer.ui.plots.sources import set_data

__all__ = ["BarChart", "Bars", "HistogramOverlay", "Marker", "MetricBars", "BAR_COLUMNS"]


class BarChart:
    """Vertical bars, one per row of one source, on a categorical (or grouped categorical) x axis.

    Parameters
    ----------
    title : str
    ylabel : str
    height : int
    width : int, optional
        Fixed width in pixels; None stretches the chart to the page's width.
    y_range : (float, float)
        Fixed value axis.
    legend : str, optional
        Where the legend goes: "right" or "above" (outside the plot), or a location inside it such as
        "top_right"; None: no legend.
    xlabel : str

    Attributes
    ----------
    figure : bokeh.plotting.figure
    source : bokeh.models.ColumnDataSource
        Columns ``x`` (a category, or a (group, bar) pair), ``value``, ``color``, ``legend``.
    pane : panel.pane.Bokeh
    """

    def __init__(self, title: str, ylabel: str, *, height: int = 250, width: int | None = None,
                 y_range: tuple = (0.0, 1.05), legend: str | None = None, xlabel: str = ""):
        self.x_range = FactorRange(factors=[], range_padding=0.1, group_padding=0.6)
        sizing = {"width": width} if width else {"sizing_mode": "stretch_width"}
        fig = figure(x_range=self.x_range, y_range=Range1d(*y_range), height=height, title=title,
                     toolbar_location=None, tools="", x_axis_label=xlabel, y_axis_label=ylabel,
                     min_border_left=40, **sizing)
        fig.xgrid.visible = False
        fig.title.text_font_size = TITLE_SIZE
        fig.xaxis.major_label_orientation = 0.0
        self.source = ColumnDataSource({"x": [], "value": np.empty(0), "color": [], "legend": []})
        bars = fig.vbar(x="x", top="value", width=0.8, source=self.source, fill_color="color", line_color="black")
        if legend is not None:
            box = Legend(items=[LegendItem(label={"field": "legend"}, renderers=[bars])], label_text_font_size="9pt")
            if legend in ("right", "above", "below", "left"):
                if legend == "above":
                    box.orientation = "horizontal"
                fig.add_layout(box, legend)
            else:
                box.location = legend
                fig.add_layout(box)
        self.figure = fig
        self.pane = figure_pane(fig, **({"width": width} if width else {"sizing_mode": "stretch_width"}))

    @property
    def factors(self) -> list:
        """The categories of the x axis."""
        return list(self.x_range.factors)

    def update(self, x: Sequence, values, colors: Sequence[str], legend: Sequence[str] | None = None,
               factors: Sequence | None = None) -> None:
        """Draw one bar per entry of ``x`` (a category or a (group, bar) tuple) with its value and colour.

        ``legend``: the legend's label of every bar (default: its category, or its bar in a group);
        ``factors``: the axis's categories in order (default: ``x`` in its order, without repeats).
        """
        x = [tuple(v) if isinstance(v, (tuple, list)) else str(v) for v in x]
        factors = list(dict.fromkeys(x)) if factors is None else [tuple(f) if isinstance(f, (tuple, list)) else str(f)
                                                                  for f in factors]
        if legend is None:
            legend = [v[-1] if isinstance(v, tuple) else v for v in x]
        if factors != list(self.x_range.factors):
            self.x_range.factors = factors
        set_data(self.source, {"x": x, "value": np.asarray(values, dtype=float), "color": list(colors),
                               "legend": [str(v) for v in legend]})

    def values(self) -> np.ndarray:
        """The heights of the bars drawn."""
        return np.asarray(self.source.data["value"], dtype=float)


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


#: Columns of a frame's ``bars`` and ``inf_bars`` tables (one row per bar).
BAR_COLUMNS = ("x0", "y0", "x1", "y1", "method", "rate", "mean", "std", "n", "n_inf", "n_failed")
_SEGMENT_COLUMNS = ("x0", "y0", "x1", "y1")
_REF_COLUMNS = ("x0", "y0", "x1", "y1", "method", "rate", "mean")
_BAR_TIPS = [("method", "@method"), ("rate", "@rate"), ("mean", "@mean"), ("std", "@std"), ("n", "@n"),
             ("n_inf", "@n_inf"), ("n_failed", "@n_failed")]
_EMPTY_RANGES = ((0.0, 1.0), (1.0, 10.0))


def _float(values) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=float)


def _text(values) -> np.ndarray:
    return np.asarray([str(v) for v in values], dtype=object)


class MetricBars:
    """Bars of one metric over missing rates and methods, drawn by :meth:`update` from a frame.

    Parameters
    ----------
    title : str
    colors : dict
        Method name -> fill colour (an unknown method is grey).
    log : bool
        Logarithmic y axis (set once: it is a property of the figure).
    target : float, optional
        A dashed horizontal line at this value (e.g. 0.95 for the coverage row).
    height : int
    xlabel : str

    Attributes
    ----------
    figure : bokeh.plotting.figure
    pane : panel.pane.Bokeh
    sources : dict of str -> ColumnDataSource
        ``bars``, ``inf_bars``, ``errors``, ``failed``, ``labels`` and ``ref``, the tables of a frame.
    frame : dict or None
        The last frame drawn.
    """

    def __init__(self, title: str, colors: dict, *, log: bool = False, target: float | None = None,
                 height: int = 210, xlabel: str = "requested missing rate"):
        self._colors = dict(colors)
        (x0, x1), (y0, y1) = _EMPTY_RANGES
        self.x_range, self.y_range = Range1d(x0, x1), Range1d(y0 if log else 0.0, y1 if log else 1.0)
        fig = figure(title=title, height=height, sizing_mode="stretch_width", x_range=self.x_range,
                     y_range=self.y_range, y_axis_type="log" if log else "linear", x_axis_label=xlabel,
                     tools="pan,box_zoom,wheel_zoom,save,reset", toolbar_location="right", min_border_left=40)
        fig.xgrid.visible = False
        fig.title.text_font_size = "12pt"
        bar_cols = {c: [] for c in (*BAR_COLUMNS, "color")}
        self.sources = {
            "bars": ColumnDataSource(dict(bar_cols)), "inf_bars": ColumnDataSource(dict(bar_cols)),
            "errors": ColumnDataSource({c: [] for c in _SEGMENT_COLUMNS}),
            "failed": ColumnDataSource({"x": [], "y": []}), "labels": ColumnDataSource({"x": [], "y": [], "text": []}),
            "ref": ColumnDataSource({c: [] for c in _REF_COLUMNS}),
        }
        s = self.sources
        # glyphs added directly: no selection / muted glyph models (nothing is selectable), about half the cost
        bars = fig.add_glyph(s["bars"], Quad(left="x0", right="x1", bottom="y0", top="y1", fill_color="color",
                                             line_color="white"))
        inf_bars = fig.add_glyph(s["inf_bars"], Quad(left="x0", right="x1", bottom="y0", top="y1", fill_color="color",
                                                     fill_alpha=0.3, line_color="black", line_dash="dashed",
                                                     line_width=1.5))
        fig.add_glyph(s["errors"], Segment(x0="x0", y0="y0", x1="x1", y1="y1", line_color="black", line_width=1.5))
        fig.add_glyph(s["failed"], Scatter(x="x", y="y", marker="x", size=14, line_color="#d62728", line_width=3))
        fig.add_glyph(s["labels"], Text(x="x", y="y", text="text", text_font_size="10pt", text_color="#333333",
                                        text_baseline="bottom", text_align="center"))
        ref = fig.add_glyph(s["ref"], Segment(x0="x0", y0="y0", x1="x1", y1="y1", line_color="black", line_width=3))
        fig.add_tools(HoverTool(renderers=[bars, inf_bars], tooltips=_BAR_TIPS),
                      HoverTool(renderers=[ref], tooltips=[("method", "@method"), ("rate", "@rate"),
                                                           ("reference", "@mean")]))
        if target is not None:
            fig.add_layout(Span(location=target, dimension="width", line_color="#555555", line_dash="dashed",
                                line_width=1))
        self.figure = fig
        self.pane = figure_pane(fig, sizing_mode="stretch_width")
        self.frame: dict | None = None
        self._limits = None

    def _set_limits(self, xlim, ylim) -> None:
        """Fit the axes (and Bokeh's Reset) to the frame's limits; a zoom survives frames with the same limits."""
        limits = (tuple(map(float, xlim)), tuple(map(float, ylim)))
        if limits == self._limits or not np.isfinite(limits).all():
            return
        self._limits = limits
        for rng, (lo, hi) in ((self.x_range, limits[0]), (self.y_range, limits[1])):
            rng.update(start=lo, end=hi, reset_start=lo, reset_end=hi)

    def _bars(self, table: dict) -> dict:
        out = {c: _float(table[c]) for c in BAR_COLUMNS if c != "method"}
        out["method"] = _text(table["method"])
        out["color"] = np.asarray([self._colors.get(m, "#999999") for m in out["method"]], dtype=object)
        return out

    def update(self, frame: dict) -> None:
        """Draw ``frame`` (see :func:`~explorer.ui.pages.benchmark.bar_frame`): data and ranges only.

        Sources whose data did not change are not sent again.
        """
        self.frame = frame
        self._set_limits(frame["xlim"], frame["ylim"])
        s = self.sources
        set_data(s["bars"], self._bars(frame["bars"]))
        set_data(s["inf_bars"], self._bars(frame["inf_bars"]))
        set_data(s["errors"], {c: _float(frame["errors"][c]) for c in _SEGMENT_COLUMNS})
        set_data(s["failed"], {c: _float(frame["failed"][c]) for c in ("x", "y")})
        labels = frame["labels"]
        set_data(s["labels"], {"x": _float(labels["x"]), "y": _float(labels["y"]), "text": _text(labels["text"])})
        ref = frame["ref"]
        set_data(s["ref"], {**{c: _float(ref[c]) for c in _REF_COLUMNS if c != "method"},
                            "method": _text(ref["method"])})
