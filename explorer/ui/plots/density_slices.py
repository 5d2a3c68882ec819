r"""The Conditional page's figures: slices of :math:`p(x^m \mid x^o)` and the component weights of a row.

Plain Bokeh figures made once per session (issue 19); ``update(frame)`` assigns their sources' data and sets
scalars (ranges, a band's edges, a line's location, the title and axis labels), never adding or removing a
Bokeh model. Components, contour lines and bars whose number varies are rows of one source. The frames are
the dicts of :mod:`explorer.ui.plots.conditional_frames` (``{"slice": slice_1d(...), "xlabel", "title"}``, ...).

* :class:`Slice1DPlot`: the conditional density (curve), each component's weighted share (dashed), the
  mean imputation (vertical line), the equal-tailed 95 % interval (band), samples (rug) and the truth (star);
* :class:`Slice2DPlot`: the joint density of two missing features (image), its 50/80/95 % regions
  (contours), samples, the mean and the truth;
* :class:`WeightBars`: the prior weights :math:`\pi_k` and the row's :math:`h_k`, two bars per component
  at numeric positions (a categorical axis whose factors shrink makes BokehJS fail with "Size mismatch");
* :class:`LevelBars`: a missing categorical cell of a mixed table: one bar per level,
  :math:`P(\text{level} \mid \text{observed})`, the most probable level darker, the true level (when known)
  starred, each bar's probability written above it; levels at numeric positions with tick labels, as above.
"""

from __future__ import annotations

import contourpy
import numpy as np
from bokeh.models import (
    BoxAnnotation,
    ColumnDataSource,
    FixedTicker,
    LabelSet,
    Legend,
    LegendItem,
    LinearColorMapper,
    Range1d,
    Span,
)
from bokeh.palettes import Purples256
from bokeh.plotting import figure

from explorer.ui.plots.conditional_frames import BAND, COMPONENT, CURVE, MEAN, POSTERIOR, PRIOR, SAMPLE, TRUTH
from explorer.ui.plots.figures import figure_pane

__all__ = ["LevelBars", "Slice1DPlot", "Slice2DPlot", "WeightBars", "contour_lines"]

_TOOLS = "pan,wheel_zoom,box_zoom,save,reset"
#: light (low density) to dark (high), like HoloViews' "Purples"
PURPLES = tuple(reversed(Purples256))
PRIOR_COLOR = "#b8c4d3"


def _empty(*columns) -> dict:
    return {c: np.zeros(0) for c in columns}


def _set_range(rng: Range1d, lo: float, hi: float) -> None:
    rng.update(start=float(lo), end=float(hi), reset_start=float(lo), reset_end=float(hi))


def _legend(fig, items: list, location: str = "top_right", place: str = "center", **options) -> None:
    fig.add_layout(Legend(items=[LegendItem(label=label, renderers=[r]) for label, r in items], location=location,
                          click_policy="mute", **options), place)


class Slice1DPlot:
    """The 1-D slice of one missing feature (see the module docstring).

    Attributes
    ----------
    figure : bokeh.plotting.figure
    curve, components, rug, truth : ColumnDataSource
        The density (``x``, ``y``), one row per component (``xs``, ``ys``), the samples' ticks
        (``x0``, ``y0``, ``x1``, ``y1``) and the true value (``x``, ``y``; empty without one).
    band : BoxAnnotation
        The interval (``left``, ``right``).
    mean : Span
    pane : panel.pane.Bokeh
    frame : dict or None
        The last frame drawn.
    """

    def __init__(self, width: int = 560, height: int = 360):
        self.x_range, self.y_range = Range1d(0.0, 1.0), Range1d(0.0, 1.0)
        # canvas, not WebGL: WebGL draws the dashed component curves solid (and odd line caps)
        fig = figure(x_range=self.x_range, y_range=self.y_range, width=width, height=height, tools=_TOOLS,
                     toolbar_location="above", y_axis_label="density", output_backend="canvas")
        self.band = BoxAnnotation(left=0.5, right=0.5, fill_color=BAND, fill_alpha=0.35, line_alpha=0)
        fig.add_layout(self.band)
        self.components = ColumnDataSource({"xs": [], "ys": []})
        self.curve = ColumnDataSource(_empty("x", "y"))
        self.rug = ColumnDataSource(_empty("x0", "y0", "x1", "y1"))
        self.truth = ColumnDataSource(_empty("x", "y"))
        fig.multi_line("xs", "ys", source=self.components, line_color=COMPONENT, line_dash="dashed", line_width=1.8)
        curve = fig.line("x", "y", source=self.curve, line_color=CURVE, line_width=3)
        self.mean = Span(location=0.5, dimension="height", line_color=MEAN, line_width=2.5)
        fig.add_layout(self.mean)
        fig.segment("x0", "y0", "x1", "y1", source=self.rug, line_color=SAMPLE, line_alpha=0.35)
        truth = fig.scatter("x", "y", source=self.truth, marker="star", size=18, fill_color=TRUTH, line_color=TRUTH)
        _legend(fig, [("conditional density", curve), ("true value", truth)])
        self.figure = fig
        self.pane = figure_pane(fig, sizing_mode=None, margin=(0, 10))
        self.frame: dict | None = None

    def update(self, frame: dict) -> None:
        """Draw ``frame`` = ``{"slice": slice_1d(...), "xlabel", "title"}`` (a placeholder has a zero density)."""
        self.frame = frame
        s = frame["slice"]
        grid, density = np.asarray(s["grid"], dtype=float), np.asarray(s["density"], dtype=float)
        # a placeholder (no model, or no slice) has a zero density: a unit axis, not a 1e-12 one
        top = float(density.max()) if float(density.max()) > 0 else 1.0
        self.curve.data = {"x": grid, "y": density}
        self.components.data = {"xs": [grid] * len(s["components"]),
                                "ys": [np.asarray(c, dtype=float) for c in s["components"]]}
        samples = np.asarray(s["samples"], dtype=float)
        low = np.full(samples.size, -0.1 * top)
        self.rug.data = {"x0": samples, "y0": low, "x1": samples, "y1": low + 0.08 * top}
        truth = [] if s["truth"] is None else [float(s["truth"])]
        self.truth.data = {"x": np.asarray(truth), "y": np.asarray([float(s["truth_density"])] if truth else [])}
        self.band.update(left=float(s["lower"]), right=float(s["upper"]))
        self.mean.location = float(s["mean"])
        _set_range(self.x_range, grid[0], grid[-1])
        _set_range(self.y_range, -0.12 * top, 1.1 * top)
        self.figure.title.text = frame["title"]
        self.figure.xaxis.axis_label = frame["xlabel"]


def contour_lines(gx, gy, density, levels) -> tuple[list, list]:
    """The contour lines of ``density`` (shape (Gy, Gx) on the grid ``gx``, ``gy``) at ``levels``: ``(xs, ys)``."""
    xs, ys = [], []
    if not len(levels):
        return xs, ys
    generator = contourpy.contour_generator(x=np.asarray(gx, dtype=float), y=np.asarray(gy, dtype=float),
                                            z=np.asarray(density, dtype=float))
    for level in levels:
        for line in generator.lines(float(level)):
            xs.append(np.ascontiguousarray(line[:, 0]))
            ys.append(np.ascontiguousarray(line[:, 1]))
    return xs, ys


class Slice2DPlot:
    """The joint slice of two missing features (see the module docstring).

    Attributes
    ----------
    figure : bokeh.plotting.figure
    image, contours, samples, mean, truth : ColumnDataSource
    pane : panel.pane.Bokeh
    frame : dict or None
        The last frame drawn.
    """

    def __init__(self, width: int = 560, height: int = 400):
        self.x_range, self.y_range = Range1d(0.0, 1.0), Range1d(0.0, 1.0)
        fig = figure(x_range=self.x_range, y_range=self.y_range, width=width, height=height, tools=_TOOLS,
                     toolbar_location="above")
        fig.xgrid.visible = fig.ygrid.visible = False
        self.mapper = LinearColorMapper(palette=PURPLES, low=0.0, high=1.0)
        self.image = ColumnDataSource({"image": [np.zeros((2, 2), dtype=np.float32)], "x": [0.0], "y": [0.0],
                                       "dw": [1.0], "dh": [1.0]})
        self.contours = ColumnDataSource({"xs": [], "ys": []})
        self.samples = ColumnDataSource(_empty("x", "y"))
        self.mean = ColumnDataSource(_empty("x", "y"))
        self.truth = ColumnDataSource(_empty("x", "y"))
        fig.image(image="image", x="x", y="y", dw="dw", dh="dh", source=self.image, color_mapper=self.mapper,
                  global_alpha=0.7)
        fig.multi_line("xs", "ys", source=self.contours, line_color=CURVE, line_width=1.5)
        samples = fig.scatter("x", "y", source=self.samples, size=3, color=SAMPLE, alpha=0.35)
        mean = fig.scatter("x", "y", source=self.mean, marker="diamond", size=18, fill_color=MEAN,
                           line_color="white", line_width=1.5)
        truth = fig.scatter("x", "y", source=self.truth, marker="star", size=18, fill_color=TRUTH, line_color=TRUTH)
        _legend(fig, [("samples", samples), ("mean imputation", mean), ("true value", truth)])
        self.figure = fig
        self.pane = figure_pane(fig, sizing_mode=None, margin=(0, 10))
        self.frame: dict | None = None

    def update(self, frame: dict) -> None:
        """Draw ``frame`` = ``{"slice": slice_2d(...), "xlabel", "ylabel", "title"}``."""
        self.frame = frame
        s = frame["slice"]
        gx, gy = np.asarray(s["gx"], dtype=float), np.asarray(s["gy"], dtype=float)
        density = np.asarray(s["density"], dtype=float)
        dx, dy = (gx[1] - gx[0]) / 2, (gy[1] - gy[0]) / 2
        x0, x1, y0, y1 = gx[0] - dx, gx[-1] + dx, gy[0] - dy, gy[-1] + dy
        # row 0 of the density is gy[0], at the bottom: as Bokeh draws an image
        self.image.data = {"image": [density.astype(np.float32)], "x": [x0], "y": [y0], "dw": [x1 - x0],
                           "dh": [y1 - y0]}
        lo, hi = float(density.min()), float(density.max())
        self.mapper.update(low=lo, high=hi if hi > lo else lo + 1.0)
        xs, ys = contour_lines(gx, gy, density, s["levels"])
        self.contours.data = {"xs": xs, "ys": ys}
        samples = np.asarray(s["samples"], dtype=float).reshape(-1, 2)
        self.samples.data = {"x": samples[:, 0], "y": samples[:, 1]}
        mean = np.asarray(s["mean"], dtype=float)
        self.mean.data = {"x": mean[:1], "y": mean[1:2]}
        truth = np.zeros((0, 2)) if s["truth"] is None else np.asarray(s["truth"], dtype=float).reshape(1, 2)
        self.truth.data = {"x": truth[:, 0], "y": truth[:, 1]}
        _set_range(self.x_range, x0, x1)
        _set_range(self.y_range, y0, y1)
        self.figure.title.text = frame["title"]
        self.figure.xaxis.axis_label = frame["xlabel"]
        self.figure.yaxis.axis_label = frame["ylabel"]


class WeightBars:
    """The component weights of a row: :math:`\\pi_k` (prior) and :math:`h_k` (this row), side by side.

    Component k is drawn around x = k (1-based): its prior bar on [k - 0.38, k], its row's on [k, k + 0.38].

    Attributes
    ----------
    figure : bokeh.plotting.figure
    prior, posterior : ColumnDataSource
        ``left``, ``right``, ``top``, ``bottom`` of the bars.
    pane : panel.pane.Bokeh
    frame : dict or None
        The last frame drawn (``prior``, ``posterior``, optional ``title``).
    """

    def __init__(self, width: int = 420, height: int = 300):
        self.x_range, self.y_range = Range1d(0.4, 1.6), Range1d(0.0, 1.1)
        self.ticker = FixedTicker(ticks=[1.0])
        fig = figure(x_range=self.x_range, y_range=self.y_range, width=width, height=height, tools="",
                     toolbar_location=None, x_axis_label="component", y_axis_label="weight",
                     title="Component weights for this row")
        fig.xgrid.visible = fig.ygrid.visible = False
        fig.xaxis.ticker = self.ticker
        self.prior = ColumnDataSource(_empty("left", "right", "top", "bottom"))
        self.posterior = ColumnDataSource(_empty("left", "right", "top", "bottom"))
        prior = fig.quad(left="left", right="right", top="top", bottom="bottom", source=self.prior,
                         fill_color=PRIOR_COLOR, line_color="black")
        post = fig.quad(left="left", right="right", top="top", bottom="bottom", source=self.posterior,
                        fill_color=MEAN, line_color="black")
        # above the frame, in one row: inside it covered the first bars
        _legend(fig, [(PRIOR, prior), (POSTERIOR, post)], location="center", place="above",
                orientation="horizontal")
        self.figure = fig
        self.pane = figure_pane(fig, sizing_mode=None, margin=(0, 10))
        self.frame: dict | None = None

    def update(self, frame: dict) -> None:
        """Draw ``frame`` = ``{"prior": (K,), "posterior": (K,), "title": optional}`` (K = 0: no bars)."""
        self.frame = frame
        prior = np.asarray(frame["prior"], dtype=float)
        post = np.asarray(frame["posterior"], dtype=float)
        x = np.arange(1, prior.size + 1, dtype=float)
        zero = np.zeros_like(x)
        self.prior.data = {"left": x - 0.38, "right": x, "top": prior, "bottom": zero}
        self.posterior.data = {"left": x, "right": x + 0.38, "top": post, "bottom": zero}
        self.ticker.ticks = x.tolist() or [1.0]
        # the labels written out: an emptied overrides dict (after the placeholder's {1: ""}) left tick 1 unlabelled
        self.figure.xaxis.major_label_overrides = {int(k): str(int(k)) for k in x} if x.size else {1: ""}
        _set_range(self.x_range, 0.4, max(prior.size, 1) + 0.6)
        self.figure.title.text = frame.get("title", "Component weights for this row")


class LevelBars:
    """The probabilities of the levels of one missing categorical cell (see the module docstring).

    Level ``i`` (0-based) is the bar on [i + 1 - 0.35, i + 1 + 0.35]; its name is the tick label at i + 1 (plain
    text drawn by BokehJS on the canvas, never parsed as HTML).

    Attributes
    ----------
    figure : bokeh.plotting.figure
    bars, best : ColumnDataSource
        ``left``, ``right``, ``top``, ``bottom`` of every level's bar and of the most probable one's (drawn over
        it in the darker colour).
    truth : ColumnDataSource
        ``x``, ``y`` of the star over the true level (empty when it is not known).
    labels : ColumnDataSource
        ``x``, ``y``, ``text``: the probabilities written above the bars.
    pane : panel.pane.Bokeh
    frame : dict or None
        The last frame drawn (``{"bars": level_bars(...), "xlabel", "title"}``).
    """

    def __init__(self, width: int = 560, height: int = 360):
        self.x_range, self.y_range = Range1d(0.4, 1.6), Range1d(0.0, 1.18)
        self.ticker = FixedTicker(ticks=[1.0])
        fig = figure(x_range=self.x_range, y_range=self.y_range, width=width, height=height, tools="save",
                     toolbar_location="above", y_axis_label="probability given the observed cells")
        fig.xgrid.visible = False
        fig.xaxis.ticker = self.ticker
        fig.xaxis.major_label_text_font_size = "12px"
        self.bars = ColumnDataSource(_empty("left", "right", "top", "bottom"))
        self.best = ColumnDataSource(_empty("left", "right", "top", "bottom"))
        self.truth = ColumnDataSource(_empty("x", "y"))
        self.labels = ColumnDataSource({"x": np.zeros(0), "y": np.zeros(0), "text": []})
        bars = fig.quad(left="left", right="right", top="top", bottom="bottom", source=self.bars,
                        fill_color=BAND, line_color=CURVE)
        best = fig.quad(left="left", right="right", top="top", bottom="bottom", source=self.best,
                        fill_color=MEAN, line_color=CURVE)
        truth = fig.scatter("x", "y", source=self.truth, marker="star", size=18, fill_color=TRUTH, line_color=TRUTH)
        fig.add_layout(LabelSet(x="x", y="y", text="text", source=self.labels, text_align="center",
                                text_font_size="11px", text_color=CURVE, y_offset=2))
        _legend(fig, [("P(level | observed)", bars), ("most probable", best), ("true level", truth)],
                location="center", place="above", orientation="horizontal")
        self.figure = fig
        self.pane = figure_pane(fig, sizing_mode=None, margin=(0, 10))
        self.frame: dict | None = None

    def update(self, frame: dict) -> None:
        """Draw ``frame`` = ``{"bars": level_bars(...), "xlabel", "title"}`` (no level: no bar)."""
        self.frame = frame
        b = frame["bars"]
        proba = np.asarray(b["proba"], dtype=float)
        x = np.arange(1, proba.size + 1, dtype=float)
        zero = np.zeros_like(x)
        self.bars.data = {"left": x - 0.35, "right": x + 0.35, "top": proba, "bottom": zero}
        best = [] if b["best"] is None else [b["best"]]
        self.best.data = {"left": x[best] - 0.35, "right": x[best] + 0.35, "top": proba[best], "bottom": zero[best]}
        truth = [] if b["truth"] is None else [b["truth"]]
        self.truth.data = {"x": x[truth], "y": proba[truth] + 0.1}
        self.labels.data = {"x": x, "y": proba, "text": [f"{p:.2f}" for p in proba]}
        self.ticker.ticks = x.tolist() or [1.0]
        self.figure.xaxis.major_label_overrides = ({int(i): level for i, level in zip(x, b["levels"])}
                                                   if x.size else {1: ""})
        # many levels (a taxonomic order): slanted names that do not overlap
        self.figure.xaxis.major_label_orientation = "horizontal" if proba.size <= 6 else 0.8
        _set_range(self.x_range, 0.4, max(proba.size, 1) + 0.6)
        self.figure.title.text = frame["title"]
        self.figure.xaxis.axis_label = frame["xlabel"]
