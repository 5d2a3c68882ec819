"""Checks on rendered Bokeh figures shared by the view tests (``from tests._plot_checks import ...``)."""

from __future__ import annotations

import numpy as np


def untitled_plots(root, n_expected: int) -> list:
    """The figures of a rendered view without a title (the scatter panels), checked to be ``n_expected``."""
    from bokeh.models import Plot

    plots = [p for p in root.select({"type": Plot}) if not p.title.text]
    assert len(plots) == n_expected
    return plots


def assert_ranges_cover(plot, values, fill: float = 0.7) -> None:
    """The figure's axes contain every point of ``values`` (n, 2), and the points fill more than ``fill``
    of each axis (not a stale, far larger range)."""
    lo, hi = np.nanmin(values, axis=0), np.nanmax(values, axis=0)
    assert plot.x_range.start <= lo[0] and plot.x_range.end >= hi[0], (plot.x_range.start, plot.x_range.end, lo, hi)
    assert plot.y_range.start <= lo[1] and plot.y_range.end >= hi[1], (plot.y_range.start, plot.y_range.end, lo, hi)
    assert hi[0] - lo[0] > fill * (plot.x_range.end - plot.x_range.start)
    assert hi[1] - lo[1] > fill * (plot.y_range.end - plot.y_range.start)
