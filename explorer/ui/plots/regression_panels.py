"""The two figures of the regression page, built once per session: the regression scatter and p(y | x0).

* :class:`RegressionScatter`: the rows of (x, y) (observed; y missing, at E[y | x]; x missing, as ticks on a
  strip at the left), faint draws from p(y | x), the equal-tailed predictive band (a ``varea``), the
  conditional-mean curve E[y | x] (eq. 13) and, over it, its part that lies between two modes, and the
  input x0 of the density panel (a dashed vertical line). A click reports its x (``on_tap``).
* :class:`DensitySlicePlot`: the density p(y | x = x0), its components (one dashed line broken by NaN),
  the equal-tailed interval (a ``varea``), the modes, the mean E[y | x0] and the draws as short ticks
  under the curve (one ``segment`` glyph).

Both are plain Bokeh figures with a fixed set of renderers; :meth:`update` only assigns their sources'
data (same columns) and scalar properties (title, axis labels, ranges, a legend label), so a frame costs
what its numbers cost to send (issue 19). What is sent is kept small, since every numpy column is a binary
buffer (two websocket frames): columns that did not change are not sent
(:func:`~explorer.ui.plots.sources.set_data`), the curve's mean, band and bimodal part share one source
(one x column), the density's components are one line broken by NaN, a few values go as numbers, and
constant heights are glyph properties. The frames are the dicts of
:func:`explorer.ui.pages.regression.scatter_frame` and :func:`~explorer.ui.pages.regression.density_frame`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from bokeh.core.properties import value
from bokeh.events import Tap
from bokeh.models import ColumnDataSource, Legend, LegendItem, Range1d
from bokeh.plotting import figure

from explorer.ui.plots.figures import SMALL_COLUMN
from explorer.ui.plots.sources import set_data
from explorer.ui.plots.surface_panels import nan_joined
from explorer.ui.plots.figures import figure_pane

__all__ = ["COLORS", "MEAN_LABEL", "DensitySlicePlot", "RegressionScatter"]

COLORS = {"observed": "#1f77b4", "imputed": "#ff7f0e", "strip": "#9467bd", "draws": "#7f7f7f",
          "mean": "#111111", "between": "#d62728", "band": "#aec7e8", "x0": "#2ca02c", "component": "#8c8c8c"}
#: The legend label, and the renderer's name, of the conditional-mean curve (the browser tests read it).
MEAN_LABEL = "E[y | x] (eq. 13)"
_TOOLS = "pan,box_zoom,wheel_zoom,save,reset"
_HEIGHT = 540


def _col(values):
    """A column of floats: a list when short (sent inside the message), else an array (a binary buffer)."""
    values = np.ascontiguousarray(values, dtype=float)
    return values.tolist() if values.size < SMALL_COLUMN else values


def _xy(pair) -> dict:
    return {"x": _col(pair[0]), "y": _col(pair[1])}


def _figure(title: str, x_label: str, y_label: str, css_classes, **kw):
    fig = figure(css_classes=list(css_classes), height=_HEIGHT, sizing_mode="stretch_width", tools=_TOOLS,
                 toolbar_location="above", title=title, x_axis_label=x_label, y_axis_label=y_label, min_border_left=40,
                 x_range=Range1d(0.0, 1.0), y_range=Range1d(0.0, 1.0), **kw)
    fig.title.text_font_size = "12pt"
    return fig


def _legend(items) -> Legend:
    """A legend under the plot, three columns (never over the data)."""
    return Legend(items=[LegendItem(label=label, renderers=[r]) for label, r in items], ncols=3,
                  location="center", label_text_font_size="9pt", click_policy="hide")


def _set_range(rng: Range1d, lo: float, hi: float) -> None:
    """Move ``rng`` to (lo, hi), also where Bokeh's Reset tool returns."""
    rng.update(start=lo, end=hi, reset_start=lo, reset_end=hi)


class RegressionScatter:
    """The scatter of (x, y) with E[y | x], its band and draws: a Bokeh figure made once, updated by data.

    The axes move only when a frame's limits change (new data, columns or fit), so a zoom survives the
    steps of one run.

    Parameters
    ----------
    on_tap : callable, optional
        ``on_tap(x)`` with the data x of a click on the plot.
    css_classes : sequence of str
        CSS classes of the figure (what the browser tests find it by).

    Attributes
    ----------
    figure : bokeh.plotting.figure
    pane : panel.pane.Bokeh
    frame : dict or None
        The last frame drawn.
    """

    def __init__(self, on_tap: Callable[[float], None] | None = None, css_classes=()):
        fig = _figure("No fit yet", "x", "y", css_classes, active_scroll="wheel_zoom")
        # the curve's mean ("y"), its bimodal part and its band share one x column
        self.curve = ColumnDataSource({"x": [], "y": [], "between": [], "lower": [], "upper": []})
        names = ("draws", "observed", "imputed", "strip", "x0")
        self.sources = {name: ColumnDataSource({"x": [], "y": []}) for name in names}
        src = self.sources
        band = fig.varea("x", "lower", "upper", source=self.curve, fill_color=COLORS["band"], fill_alpha=0.55)
        draws = fig.scatter("x", "y", source=src["draws"], color=COLORS["draws"], alpha=0.35, size=3)
        observed = fig.scatter("x", "y", source=src["observed"], color=COLORS["observed"], alpha=0.8, size=5)
        imputed = fig.scatter("x", "y", source=src["imputed"], line_color=COLORS["imputed"],
                              fill_color=COLORS["imputed"], fill_alpha=0.15, line_width=1.5, size=7)
        strip = fig.scatter("x", "y", source=src["strip"], marker="dash", color=COLORS["strip"], size=12,
                            line_width=2)
        mean = fig.line("x", "y", source=self.curve, color=COLORS["mean"], line_width=3, name=MEAN_LABEL)
        between = fig.line("x", "between", source=self.curve, color=COLORS["between"], line_width=5, alpha=0.85)
        x0 = fig.line("x", "y", source=src["x0"], color=COLORS["x0"], line_dash="dashed", line_width=2)
        self._band_label = "predictive band"
        self._band_item = LegendItem(label=self._band_label, renderers=[band])
        legend = _legend([("draws from p(y | x)", draws), ("observed rows", observed),
                          ("y missing: at E[y | x]", imputed), ("x missing: y on the strip", strip),
                          (MEAN_LABEL, mean), ("mean between modes", between), ("x0", x0)])
        legend.items.insert(0, self._band_item)
        fig.add_layout(legend, "below")
        if on_tap is not None:
            fig.on_event(Tap, lambda event: on_tap(event.x))
        self.figure = fig
        self.pane = figure_pane(fig, sizing_mode="stretch_width", min_height=_HEIGHT)
        self.frame: dict | None = None
        self._limits = None

    def update(self, frame: dict) -> None:
        """Draw a :func:`~explorer.ui.pages.regression.scatter_frame` (data and scalars only)."""
        self.frame = frame
        fig = self.figure
        x, lower, upper = frame["band"]
        set_data(self.curve, {"x": _col(x), "y": _col(frame["mean"][1]), "between": _col(frame["between"][1]),
                              "lower": _col(lower), "upper": _col(upper)})
        for name, source in self.sources.items():
            set_data(source, _xy(frame[name]))
        if frame["band_label"] != self._band_label:
            self._band_label = frame["band_label"]
            self._band_item.label = value(self._band_label)  # a text, not a column name
        fig.title.text = frame["title"]
        fig.xaxis.axis_label, fig.yaxis.axis_label = frame["xlabel"], frame["ylabel"]
        limits = (tuple(map(float, frame["xlim"])), tuple(map(float, frame["ylim"])))
        if limits != self._limits and np.isfinite(limits).all():
            self._limits = limits
            _set_range(fig.x_range, *limits[0])
            _set_range(fig.y_range, *limits[1])


class DensitySlicePlot:
    """p(y | x = x0) with its components, interval, modes, mean and draws: a Bokeh figure made once.

    Both axes follow every frame (the slice moves with x0 and with the fit). ``css_classes``: of the figure.

    Attributes
    ----------
    figure : bokeh.plotting.figure
    pane : panel.pane.Bokeh
    frame : dict or None
        The last frame drawn.
    """

    def __init__(self, css_classes=()):
        fig = _figure("No fit yet", "y", "density", css_classes)
        # the density and the interval (the density inside it, 0 outside) share the grid
        self.density = ColumnDataSource({"x": [], "y": [], "interval": []})
        self.components = ColumnDataSource({"x": [], "y": []})  # every component, one line broken by NaN
        self.modes = ColumnDataSource({"x": [], "y": []})
        self.mean = ColumnDataSource({"x": [], "y": []})
        self.draws = ColumnDataSource({"x": []})
        interval = fig.varea("x", 0.0, "interval", source=self.density, fill_color=COLORS["band"], fill_alpha=0.7)
        components = fig.line("x", "y", source=self.components, line_color=COLORS["component"], line_dash="dashed",
                              line_width=1.5)
        density = fig.line("x", "y", source=self.density, color=COLORS["mean"], line_width=3)
        modes = fig.scatter("x", "y", source=self.modes, marker="triangle", size=13, fill_color=COLORS["x0"],
                            line_color="white")
        mean = fig.line("x", "y", source=self.mean, color=COLORS["between"], line_width=3)
        # the draws as short ticks under the curve: their heights follow the density's top (glyph properties)
        draws = fig.segment("x", -0.1, "x", -0.02, source=self.draws, line_color=COLORS["draws"], line_alpha=0.4)
        self._ticks = draws.glyph
        self._interval_label = "interval"
        self._interval_item = LegendItem(label=self._interval_label, renderers=[interval])
        legend = _legend([("components", components), ("p(y | x0)", density), ("modes", modes),
                          ("E[y | x0] (eq. 13)", mean), ("draws", draws)])
        legend.items.insert(0, self._interval_item)
        fig.add_layout(legend, "below")
        self.figure = fig
        self.pane = figure_pane(fig, sizing_mode="stretch_width", min_height=_HEIGHT)
        self.frame: dict | None = None

    def update(self, frame: dict) -> None:
        """Draw a :func:`~explorer.ui.pages.regression.density_frame` (data and scalars only)."""
        self.frame = frame
        fig, top = self.figure, frame["top"]
        set_data(self.density, {"x": _col(frame["grid"]), "y": _col(frame["density"]),
                                "interval": _col(frame["interval"])})
        set_data(self.components, dict(zip(("x", "y"), map(_col, nan_joined(
            [c["t"] for c in frame["components"]], [c["density"] for c in frame["components"]])))))
        set_data(self.modes, _xy(frame["modes"]))
        set_data(self.mean, _xy(frame["mean"]))
        set_data(self.draws, {"x": _col(frame["draws"])})
        self._ticks.update(y0=-0.1 * top, y1=-0.02 * top)
        label = f"{frame['slice'].level:.0%} interval" if frame["slice"] is not None else "interval"
        if label != self._interval_label:
            self._interval_label = label
            self._interval_item.label = value(label)
        fig.title.text = frame["title"]
        fig.xaxis.axis_label = frame["xlabel"]
        _set_range(fig.x_range, *map(float, frame["xlim"]))
        _set_range(fig.y_range, -0.12 * top, 1.12 * top)
