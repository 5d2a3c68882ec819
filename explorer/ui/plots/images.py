"""Grey images of the factor-analysis pages: :class:`ImagePanel`, one Bokeh figure drawing a 2-D array (pixels in
[0, 1], white to black; NaN = a missing pixel, in red), and :func:`mosaic`, which tiles several images into one array.

The figure is made once per session (issue 19): :meth:`ImagePanel.update` only replaces the data of its one
``image`` glyph (a float32 array, binary on the wire) and, when the image's shape changes, the ranges' ends.
Clicks and drags on the image come back as Bokeh events (``Tap``, ``PanStart`` / ``Pan`` / ``PanEnd``) in data
coordinates: x is the column, ``h - y`` the row (row 0 is drawn on top).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from explorer.ui.plots.figures import figure_pane
from bokeh.events import Pan, PanEnd, PanStart, Tap
from bokeh.models import ColumnDataSource, Image, LinearColorMapper, Range1d
from bokeh.palettes import Greys256
from bokeh.plotting import figure

__all__ = ["GREYS", "MISSING_COLOR", "TITLE_SIZE", "ImagePanel", "grey_mapper", "mosaic"]

MISSING_COLOR = "#e4572e"
#: Size of the figures' titles (as the HoloViews figures of the other pages have them).
TITLE_SIZE = "12pt"
#: 0 is white, 1 is black (ink).
GREYS = tuple(reversed(Greys256))


def grey_mapper() -> LinearColorMapper:
    """The colour map of the images: [0, 1] from white to black, NaN in :data:`MISSING_COLOR`.

    Its 256 colours take a few ms to validate and to send: the images of a page share one
    (``ImagePanel(color_mapper=...)``; a Bokeh model belongs to one session's document, never share it wider).
    """
    return LinearColorMapper(palette=GREYS, low=0.0, high=1.0, nan_color=MISSING_COLOR)


class ImagePanel:
    """A grey image (NaN in red) in a Bokeh figure made once, without axes or toolbar.

    Parameters
    ----------
    height : int
        Height of the image in pixels of the screen.
    width : int, optional
        Width (default: ``height``); the image is stretched to ``width`` x ``height``.
    title : str
    on_tap : callable, optional
        ``on_tap(x, y)`` when the image is clicked (data coordinates: x in [0, w], y in [0, h]).
    on_drag : callable, optional
        ``on_drag(x, y, stroke)`` for every position of a drag over the image; ``stroke`` counts the drags
        (it is the same for all the positions of one drag).
    color_mapper : LinearColorMapper, optional
        The page's :func:`grey_mapper` (default: one of its own).

    Attributes
    ----------
    figure : bokeh.plotting.figure
    source : bokeh.models.ColumnDataSource
        One row: ``image`` (the array, row 0 at the bottom as Bokeh draws it), ``dw``, ``dh``.
    pane : panel.pane.Bokeh
        What a page lays out.
    image : numpy.ndarray
        The last array drawn (row 0 on top), float32.
    """

    def __init__(self, height: int = 120, *, width: int | None = None, title: str = "",
                 on_tap: Callable[[float, float], None] | None = None,
                 on_drag: Callable[[float, float, int], None] | None = None,
                 color_mapper: LinearColorMapper | None = None):
        self.x_range, self.y_range = Range1d(0.0, 1.0), Range1d(0.0, 1.0)
        # no axis type: no axes, tickers or grids are made (with add_glyph, no extra glyphs either: about half the
        # models of a default figure, half its cost to build and send); fixed, width / height None: the frame's
        # size is the figure's (a stretching row would widen the frame, and Bokeh's default 600 x 600 would be
        # its size in the layout)
        fig = figure(x_range=self.x_range, y_range=self.y_range, frame_width=width or height, frame_height=height,
                     width=None, height=None, sizing_mode="fixed", title=title,
                     tools="", toolbar_location=None, x_axis_type=None, y_axis_type=None, min_border=10,
                     outline_line_color="#e5e5e5")
        fig.title.text_font_size = TITLE_SIZE
        self.image = np.zeros((1, 1), dtype=np.float32)
        self.source = ColumnDataSource({"image": [self.image], "dw": [1.0], "dh": [1.0]})
        fig.add_glyph(self.source, Image(image="image", x=0.0, y=0.0, dw="dw", dh="dh",
                                         color_mapper=color_mapper or grey_mapper()))
        if on_tap is not None:
            fig.on_event(Tap, lambda event: on_tap(event.x, event.y))
        if on_drag is not None:
            self._strokes = 0

            def start(event):
                self._strokes += 1
                on_drag(event.x, event.y, self._strokes)

            fig.on_event(PanStart, start)
            fig.on_event(Pan, lambda event: on_drag(event.x, event.y, self._strokes))
            fig.on_event(PanEnd, lambda event: on_drag(event.x, event.y, self._strokes))
        self.figure = fig
        self.pane = figure_pane(fig, sizing_mode="fixed", margin=(5, 5, 0, 5))

    @property
    def shape(self) -> tuple:
        """(h, w) of the image drawn."""
        return self.image.shape

    def update(self, image: np.ndarray) -> bool:
        """Draw the 2-D array ``image`` (row 0 on top); nothing is sent when it is the image already drawn.

        Returns True when the figure changed.
        """
        a = np.asarray(image, dtype=np.float32)
        if a.ndim != 2:
            raise ValueError(f"an image is a 2-D array; got shape {a.shape}")
        if a.shape == self.image.shape and np.array_equal(a, self.image, equal_nan=True):
            return False
        h, w = a.shape
        if a.shape != self.image.shape:
            self.x_range.update(start=0.0, end=float(w), reset_start=0.0, reset_end=float(w))
            self.y_range.update(start=0.0, end=float(h), reset_start=0.0, reset_end=float(h))
        self.image = a.copy()
        self.source.data = {"image": [np.ascontiguousarray(a[::-1])], "dw": [float(w)], "dh": [float(h)]}
        return True


def mosaic(images: np.ndarray, shape: tuple, ncols: int, gap: float = np.nan) -> np.ndarray:
    """Tile flattened images (n, h*w) into one (rows*(h+1)-1, ncols*(w+1)-1) array (``gap`` between)."""
    h, w = shape
    n = images.shape[0]
    nrows = max(1, -(-n // ncols))
    out = np.full((nrows * (h + 1) - 1, ncols * (w + 1) - 1), gap)
    for i in range(n):
        r, c = divmod(i, ncols)
        out[r * (h + 1):r * (h + 1) + h, c * (w + 1):c * (w + 1) + w] = images[i].reshape(h, w)
    return out
