"""The Data & mechanism page's figures: which entries are missing, how often per column, and in images.

Plain Bokeh figures made once per session (issue 19); ``update(...)`` assigns their sources' data and sets
scalars (ranges, tick positions and labels, a line's location, the height, the title), never adding or
removing a Bokeh model, so a new data set or mechanism costs what its numbers cost to send.

* :class:`MissingnessMatrix`: rows x columns, missing dark, row 0 on top (an ``image`` glyph; hover gives
  the column, the row and whether the entry is missing);
* :class:`RateBars`: the realised missing rate of every column as horizontal bars at numeric positions with
  the column names as tick labels (a categorical axis whose factors shrink, 4 columns -> 3, makes BokehJS
  fail with "Size mismatch"), the first column on top, and the requested rate as a dashed line; the chart
  grows with the number of columns;
* :class:`RGBMosaic`: an RGB picture (true and masked images), without axes.
"""

from __future__ import annotations

import math

import numpy as np
from explorer.ui.plots.figures import figure_pane
from bokeh.models import ColumnDataSource, FixedTicker, HoverTool, LinearColorMapper, Range1d, Span
from bokeh.plotting import figure

__all__ = ["BAR_PX", "RATES_HEIGHT", "MissingnessMatrix", "RGBMosaic", "RateBars", "column_ticks", "rates_height"]

#: Height of the per-column rate chart: a bar of BAR_PX pixels per column, between these bounds.
RATES_HEIGHT = (220, 600)
BAR_PX = 15


def rates_height(n_columns: int) -> int:
    """Pixels of the per-column rate chart for ``n_columns`` columns (one horizontal bar each)."""
    return int(np.clip(110 + BAR_PX * n_columns, *RATES_HEIGHT))


def _short(name, limit: int = 18) -> str:
    """A column name as a tick label: long ones cut (they took the plot's width, and overlapped when rotated)."""
    name = str(name)
    return name if len(name) <= limit else name[:limit - 1] + "…"


def column_ticks(columns, max_ticks: int = 18) -> tuple[list[float], dict]:
    """Tick positions (column j at j + 0.5) and their labels: at most about ``max_ticks`` of them, names cut."""
    step = max(1, int(np.ceil(len(columns) / max_ticks)))
    ticks = [j + 0.5 for j in range(len(columns)) if j % step == 0]
    return ticks, {t: _short(columns[int(t)]) for t in ticks}


def _set_range(rng: Range1d, start: float, end: float) -> None:
    rng.update(start=float(start), end=float(end), reset_start=float(start), reset_end=float(end))


class MissingnessMatrix:
    """Rows x columns of a mask, missing dark (see the module docstring).

    Attributes
    ----------
    figure : bokeh.plotting.figure
    source : ColumnDataSource
        One row: ``image`` (float32, 1 = missing; row 0 of the array is row 0 of the picture, on top), ``dw``,
        ``dh``.
    pane : panel.pane.Bokeh
    frame : dict or None
        The last frame drawn (see :meth:`update`).
    """

    def __init__(self, observed_color: str, missing_color: str, width: int = 360, height: int = 440):
        # the y axis is inverted: row 0 on top
        self.x_range, self.y_range = Range1d(0.0, 1.0), Range1d(1.0, 0.0)
        self.ticker = FixedTicker(ticks=[])
        fig = figure(x_range=self.x_range, y_range=self.y_range, width=width, height=height, toolbar_location=None,
                     tools="", x_axis_label="column")
        fig.xgrid.visible = fig.ygrid.visible = False
        fig.xaxis.ticker = self.ticker
        self.source = ColumnDataSource({"image": [np.zeros((1, 1), dtype=np.float32)], "dw": [1.0], "dh": [1.0]})
        mapper = LinearColorMapper(palette=[observed_color, missing_color], low=0.0, high=1.0)
        image = fig.image(image="image", x=0.0, y=0.0, dw="dw", dh="dh", source=self.source, color_mapper=mapper)
        fig.add_tools(HoverTool(renderers=[image], tooltips=[("column", "$x{0.0}"), ("row", "$y{0}"),
                                                             ("missing", "@image")]))
        self.figure = fig
        self.pane = figure_pane(fig, sizing_mode=None, margin=(0, 10))
        self.frame: dict | None = None

    def update(self, frame: dict) -> None:
        """Draw ``frame``: ``image`` (rows shown, columns; 1 = missing), ``n_total`` (rows of the data: the drawn
        rows are spread over them), ``columns``, ``sort`` (title) and ``ylabel``."""
        self.frame = frame
        image = np.asarray(frame["image"], dtype=np.float32)
        d, n_total = image.shape[1], int(frame["n_total"])
        # Bokeh draws array row 0 at y = 0, the top of the inverted axis
        self.source.data = {"image": [np.ascontiguousarray(image)], "dw": [float(d)], "dh": [float(n_total)]}
        _set_range(self.x_range, 0.0, d)
        _set_range(self.y_range, n_total, 0.0)
        ticks, labels = column_ticks(frame["columns"])
        self.ticker.ticks = ticks
        self.figure.xaxis.major_label_overrides = labels
        self.figure.xaxis.major_label_orientation = math.radians(60) if d > 6 else "horizontal"
        self.figure.yaxis.axis_label = frame["ylabel"]
        self.figure.title.text = "Missingness matrix " + ("(by pattern)" if frame["sort"] else "(original order)")


class RateBars:
    """The realised missing rate per column and the requested rate (see the module docstring).

    Attributes
    ----------
    figure : bokeh.plotting.figure
    source : ColumnDataSource
        ``left``, ``right`` (the rate), ``bottom``, ``top`` of the bars: column j spans [j + 0.1, j + 0.9].
    line : Span
        The requested (or overall) rate.
    pane : panel.pane.Bokeh
    frame : dict or None
        The last frame drawn (see :meth:`update`).
    """

    def __init__(self, bar_color: str, line_color: str, width: int = 480):
        self.x_range, self.y_range = Range1d(0.0, 1.0), Range1d(1.0, 0.0)
        self.ticker = FixedTicker(ticks=[])
        fig = figure(x_range=self.x_range, y_range=self.y_range, width=width, height=rates_height(4),
                     toolbar_location=None, tools="", x_axis_label="missing rate", y_axis_label="column")
        fig.xgrid.visible = fig.ygrid.visible = False
        fig.yaxis.ticker = self.ticker
        fig.title.text_font_size = "10pt"
        self.source = ColumnDataSource({k: np.zeros(0) for k in ("left", "right", "bottom", "top")})
        fig.quad(left="left", right="right", bottom="bottom", top="top", source=self.source, fill_color=bar_color,
                 line_color="black")
        self.line = Span(location=0.0, dimension="height", line_color=line_color, line_dash="dashed", line_width=2)
        fig.add_layout(self.line)
        self.figure = fig
        self.pane = figure_pane(fig, sizing_mode=None, margin=(0, 10))
        self.frame: dict | None = None

    def update(self, frame: dict) -> None:
        """Draw ``frame``: ``columns``, ``rates`` (one per column), ``line`` (the rate marked) and ``title``."""
        self.frame = frame
        rates = np.asarray(frame["rates"], dtype=float)
        j = np.arange(rates.size, dtype=float)
        self.source.data = {"left": np.zeros_like(j), "right": rates, "bottom": j + 0.1, "top": j + 0.9}
        self.line.location = float(frame["line"])
        top = max(float(np.max(rates, initial=0)), float(frame["line"]), 0.05) * 1.15
        _set_range(self.x_range, 0.0, top)
        _set_range(self.y_range, max(rates.size, 1), 0.0)
        ticks, labels = column_ticks(frame["columns"], max_ticks=40)  # names cut: the title is as wide as the frame
        self.ticker.ticks = ticks
        self.figure.yaxis.major_label_overrides = labels
        self.figure.yaxis.major_label_text_font_size = "7pt" if len(frame["columns"]) > 32 else "9pt"
        self.figure.height = rates_height(rates.size)  # grows with the columns (13 of wine, up to 64 of an upload)
        self.figure.title.text = frame["title"]


class RGBMosaic:
    """An RGB picture (uint8, shape (H, W, 3); row 0 on top) without axes or toolbar.

    Attributes
    ----------
    figure : bokeh.plotting.figure
    source : ColumnDataSource
        One row: ``image`` (uint32 RGBA, row 0 at the bottom as Bokeh draws it), ``dw``, ``dh``.
    pane : panel.pane.Bokeh
    rgb : numpy.ndarray or None
        The last picture drawn.
    """

    def __init__(self, title: str, width: int = 400, height: int = 140):
        self.x_range, self.y_range = Range1d(0.0, 1.0), Range1d(0.0, 1.0)
        fig = figure(x_range=self.x_range, y_range=self.y_range, width=width, height=height, title=title,
                     toolbar_location=None, tools="", x_axis_location=None, y_axis_location=None)
        fig.xgrid.visible = fig.ygrid.visible = False
        self.source = ColumnDataSource({"image": [np.zeros((1, 1), dtype=np.uint32)], "dw": [1.0], "dh": [1.0]})
        fig.image_rgba(image="image", x=0.0, y=0.0, dw="dw", dh="dh", source=self.source)
        self.figure = fig
        self.pane = figure_pane(fig, sizing_mode=None, margin=(0, 10))
        self.rgb: np.ndarray | None = None

    def update(self, rgb: np.ndarray) -> None:
        """Draw ``rgb`` (uint8, (H, W, 3), row 0 on top), stretched over the figure."""
        rgb = np.asarray(rgb, dtype=np.uint8)
        self.rgb = rgb
        h, w = rgb.shape[:2]
        rgba = np.empty((h, w, 4), dtype=np.uint8)
        rgba[..., :3] = rgb[::-1]
        rgba[..., 3] = 255
        self.source.data = {"image": [rgba.view(np.uint32).reshape(h, w)], "dw": [float(w)], "dh": [float(h)]}
        _set_range(self.x_range, 0.0, w)
        _set_range(self.y_range, 0.0, h)
