"""One panel of the benchmark's results grid (thesis Figures A.1-A.5), a Bokeh figure made once per session.

:class:`MetricBars` draws the mean of one metric per (missing rate, method) as bars at numeric positions (rate +
method offset), with their ±2 sd whiskers, pale dashed bars reaching the top for infinite means, ✕ markers for
failed cells, text labels (∞, clipped magnitudes, "failed", "≤0"), the reference dashes of the thesis notebook
and, optionally, a dashed target line (e.g. 95 % coverage). Each kind of mark is one ``ColumnDataSource``; a frame
(see :func:`explorer.ui.pages.benchmark.bar_frame`) only replaces their data and sets the axes' ranges, so no
Bokeh model is added or removed after the panel is built.
"""

from __future__ import annotations

import numpy as np
from bokeh.models import (
    ColumnDataSource,
    HoverTool,
    Quad,
    Range1d,
    Scatter,
    Segment,
    Span,
    Text,
)
from bokeh.plotting import figure

from explorer.ui.plots.sources import set_data
from explorer.ui.plots.figures import figure_pane

__all__ = ["MetricBars", "BAR_COLUMNS"]

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
