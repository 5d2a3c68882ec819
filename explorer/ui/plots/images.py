"""Grey-image plots of the factor-analysis pages: one image per ``Pipe`` (NaN = missing, in red) and mosaics."""

from __future__ import annotations

import holoviews as hv
import holoviews.plotting.bokeh  # noqa: F401  (registers the Bokeh plotting options used in .opts)
import numpy as np

__all__ = ["MISSING_COLOR", "image_dmap", "mosaic"]

MISSING_COLOR = "#e4572e"


def _image(data, x=None, y=None, dx=None, dy=None, stroke_count=None):
    """DynamicMap callback: a 2-D array as an ``hv.Image`` covering [0, w] x [0, h] (row 0 on top);
    ``x``, ``y``: a Tap stream, ``dx``, ``dy``, ``stroke_count``: a Draw stream (handled by their
    subscribers)."""
    a = np.asarray(data, dtype=float)
    return hv.Image(a, bounds=(0, 0, a.shape[1], a.shape[0]), kdims=["col", "row"], vdims=["value"])


def image_dmap(pipe: hv.streams.Pipe, size: int = 120, *, streams=(), title: str = "", width: int | None = None,
               tools=()) -> hv.DynamicMap:
    """A DynamicMap of the 2-D arrays sent to ``pipe``: grey images, NaN (missing) in red, no axes."""
    return hv.DynamicMap(_image, streams=[pipe, *streams]).opts(
        cmap="Greys", clim=(0.0, 1.0), clipping_colors={"NaN": MISSING_COLOR}, xaxis=None, yaxis=None,
        frame_width=width or size, frame_height=size, toolbar=None, tools=list(tools), title=title,
        framewise=True, default_tools=[], backend="bokeh")


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
