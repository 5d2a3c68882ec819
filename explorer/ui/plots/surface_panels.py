"""The figures of the "Decision surfaces" page, built once per session: a probability surface and two strips.

:class:`SurfacePanels` draws, with linked axes and one toolbar:

* the main panel (``complete cases``): a heat map of :math:`P(c \\mid x, y)` (an ``image_rgba`` glyph
  whose image is replaced), the decision boundaries (solid and dashed contours, one ``multi_line`` each),
  the imputed training points of a multiple-imputation method (faint) and the training rows with both
  features observed, coloured by class;
* a vertical strip at its left (``x missing``): the rows missing x at their observed y, over the 1-D heat
  strip :math:`P(c \\mid y)` (y axis shared with the main panel);
* a horizontal strip below (``y missing``): the rows missing y at their observed x, over
  :math:`P(c \\mid x)` (x axis shared).

A frame (:func:`explorer.ui.pages.decision_surface.surface_frame`) only assigns the sources' data and the
axis labels; the axes move only when the data's limits change, so a zoom survives the steps of a run.
Little is sent: sources whose data did not change are not sent (:func:`~explorer.ui.plots.sources.set_data`:
the training rows of a run), and the contours of each kind are one line broken by NaN (:func:`nan_joined`),
two binary buffers whatever their number of paths.
"""

from __future__ import annotations

import numpy as np
from bokeh.layouts import gridplot
from bokeh.models import ColumnDataSource, Range1d
from bokeh.palettes import Category10_10
from bokeh.plotting import figure

from explorer.ui.plots.sources import set_data
from explorer.ui.plots.figures import figure_pane

__all__ = ["MAIN", "PALETTE", "STRIP", "SurfacePanels", "nan_joined", "rgba"]

PALETTE = list(Category10_10)
MAIN = 440  # px: the main panel's frame
STRIP = 80  # px: the strips' short side
_TOOLS = "pan,wheel_zoom,box_zoom,save,reset"


def rgba(rgb: np.ndarray) -> np.ndarray:
    """RGB colours (ny, nx, 3) in [0, 1] as the packed opaque RGBA image (ny, nx) of Bokeh's ``image_rgba``."""
    rgb = np.asarray(rgb, dtype=float)
    out = np.empty(rgb.shape[:2] + (4,), dtype=np.uint8)
    out[..., :3] = np.clip(np.rint(255.0 * rgb), 0, 255)
    out[..., 3] = 255
    return out.view(np.uint32).reshape(rgb.shape[:2])


def nan_joined(xs, ys) -> tuple[np.ndarray, np.ndarray]:
    """Paths ``(xs[i], ys[i])`` as one pair of columns with a NaN between two paths (Bokeh breaks a line there)."""
    if not len(xs):
        return np.empty(0), np.empty(0)
    gap = np.full(1, np.nan)

    def join(parts):
        return np.concatenate([q for part in parts for q in (np.asarray(part, dtype=float), gap)][:-1])

    return join(xs), join(ys)


def _class_colors(codes) -> np.ndarray:
    codes = np.asarray(codes, dtype=int)
    return np.asarray(PALETTE, dtype=object)[codes % len(PALETTE)] if codes.size else np.empty(0, dtype=object)


def _panel(title: str, frame_width: int, frame_height: int, x_range, y_range, **kw):
    fig = figure(title=title, frame_width=frame_width, frame_height=frame_height, x_range=x_range,
                 y_range=y_range, tools=_TOOLS, active_scroll="wheel_zoom", min_border=5, **kw)
    fig.title.text_font_size = "10pt"
    fig.xgrid.visible = fig.ygrid.visible = False
    return fig


def _image_source() -> ColumnDataSource:
    return ColumnDataSource({"image": [np.full((1, 1), 0xFFFFFFFF, dtype=np.uint32)], "x": [0.0], "y": [0.0],
                             "dw": [1.0], "dh": [1.0]})


def _points_source(a: str, b: str) -> ColumnDataSource:
    return ColumnDataSource({a: [], b: [], "color": []})


class SurfacePanels:
    """The main panel and its two strips: Bokeh figures made once, whose :meth:`update` only assigns data.

    Parameters
    ----------
    css_classes : sequence of str
        CSS classes of the grid of figures (what the browser tests find it by).

    Attributes
    ----------
    main, left, bottom : bokeh.plotting.figure
    pane : panel.pane.Bokeh
        The three figures in a grid with one toolbar.
    frame : dict or None
        The last frame drawn.
    """

    def __init__(self, css_classes=()):
        self.x_range, self.y_range = Range1d(0.0, 1.0), Range1d(0.0, 1.0)
        self.images = {k: _image_source() for k in ("main", "left", "bottom")}
        self.solid = ColumnDataSource({"x": [], "y": []})  # every path, one line broken by NaN
        self.dashed = ColumnDataSource({"x": [], "y": []})
        self.imputed = _points_source("x", "y")
        self.points = _points_source("x", "y")
        self.left_points = _points_source("u", "y")
        self.bottom_points = _points_source("x", "v")

        left = _panel("x missing", STRIP, MAIN, Range1d(0.0, 1.0), self.y_range, y_axis_label="y")
        left.xaxis.visible = False
        main = _panel("complete cases", MAIN, MAIN, self.x_range, self.y_range)
        main.xaxis.visible = main.yaxis.visible = False
        bottom = _panel("y missing", MAIN, STRIP, self.x_range, Range1d(0.0, 1.0), x_axis_label="x")
        bottom.yaxis.visible = False
        for fig, name in ((main, "main"), (left, "left"), (bottom, "bottom")):
            fig.image_rgba(image="image", x="x", y="y", dw="dw", dh="dh", source=self.images[name])
        main.line("x", "y", source=self.solid, line_color="black", line_width=2)
        main.line("x", "y", source=self.dashed, line_color="#555555", line_width=1, line_dash="dashed")
        main.scatter("x", "y", source=self.imputed, color="color", size=4, fill_alpha=0.3, line_alpha=0.0)
        main.scatter("x", "y", source=self.points, fill_color="color", size=7, line_color="white", line_width=0.8)
        left.scatter("u", "y", source=self.left_points, fill_color="color", size=6, line_color="white",
                     line_width=0.8)
        bottom.scatter("x", "v", source=self.bottom_points, fill_color="color", size=6, line_color="white",
                       line_width=0.8)
        self.main, self.left, self.bottom = main, left, bottom
        grid = gridplot([[left, main], [None, bottom]], toolbar_location="right")
        grid.css_classes = list(css_classes)
        self.pane = figure_pane(grid, sizing_mode="fixed")
        self.frame: dict | None = None
        self._limits = None

    def update(self, frame: dict) -> None:
        """Draw a :func:`~explorer.ui.pages.decision_surface.surface_frame` (data and scalars only)."""
        self.frame = frame
        (x0, x1), (y0, y1) = frame["xlim"], frame["ylim"]
        images = {"main": (frame["rgb"], x0, y0, x1 - x0, y1 - y0),
                  "left": (frame["left_rgb"], 0.0, y0, 1.0, y1 - y0),
                  "bottom": (frame["bottom_rgb"], x0, 0.0, x1 - x0, 1.0)}
        for name, (rgb, x, y, dw, dh) in images.items():
            self.images[name].data = {"image": [rgba(rgb)], "x": [float(x)], "y": [float(y)], "dw": [float(dw)],
                                      "dh": [float(dh)]}
        for source, paths in ((self.solid, frame["solid"]), (self.dashed, frame["dashed"])):
            x, y = nan_joined([p[:, 0] for p in paths], [p[:, 1] for p in paths])
            set_data(source, {"x": x, "y": y})
        for source, pts, (a, b) in ((self.points, frame["points"], ("x", "y")),
                                    (self.imputed, frame["imputed"], ("x", "y")),
                                    (self.left_points, frame["left_points"], ("u", "y")),
                                    (self.bottom_points, frame["bottom_points"], ("x", "v"))):
            set_data(source, {a: np.asarray(pts[a], dtype=float), b: np.asarray(pts[b], dtype=float),
                              "color": _class_colors(pts["cls"])})
        self.left.yaxis.axis_label = frame["ylabel"]
        self.bottom.xaxis.axis_label = frame["xlabel"]
        limits = ((float(x0), float(x1)), (float(y0), float(y1)))
        if limits != self._limits:  # new data or columns: fit the axes (a zoom survives the steps of a run)
            self._limits = limits
            for rng, (lo, hi) in ((self.x_range, limits[0]), (self.y_range, limits[1])):
                rng.update(start=lo, end=hi, reset_start=lo, reset_end=hi)
