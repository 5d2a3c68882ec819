"""Plots side by side while they are wide enough to read, wrapped onto the next line when they are not.

A row of plots in a page's main area (``pn.Row``) shares its width evenly: three scatter panels next to
a 340 px sidebar were 336 px wide at 1440 px and under 200 px at 1024 px. :func:`flow` lays them out in
a wrapping flex box instead: each item is at least ``min_width`` px wide and they share a line only when
every one of them still gets that width (two per line at 1440 x 900, one at 1024 x 768).
"""

from __future__ import annotations

import holoviews as hv
import panel as pn

__all__ = ["MIN_PLOT_WIDTH", "flow"]

#: The narrowest a plot is drawn (tests/browser/test_pictures.py checks it on every page).
MIN_PLOT_WIDTH = 420


def _item(obj, min_width: int):
    if isinstance(obj, (hv.core.Dimensioned, hv.DynamicMap)):
        obj = pn.pane.HoloViews(obj, sizing_mode="stretch_width", linked_axes=False)
    if obj.sizing_mode == "fixed":  # e.g. a row of image thumbnails: its own size, never stretched
        obj.styles = {**obj.styles, "flex": "0 0 auto"}
        return obj
    obj.sizing_mode = "stretch_width"
    obj.min_width = min_width
    obj.styles = {**obj.styles, "flex": f"1 1 {min_width}px"}
    return obj


def flow(*objects, min_width: int = MIN_PLOT_WIDTH, **params) -> pn.FlexBox:
    """``objects`` (Panel components or HoloViews objects) side by side, wrapped, each ``min_width`` px or wider."""
    params.setdefault("sizing_mode", "stretch_width")
    return pn.FlexBox(*[_item(o, min_width) for o in objects], flex_wrap="wrap", **params)
