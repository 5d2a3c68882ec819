"""Bar charts made once per session whose frames only replace the bars' data (issue 19).

:class:`BarChart` draws one bar per row of one ``vbar`` source on a categorical axis: plain categories, or
(group, bar) pairs (bars grouped side by side, e.g. the responsibilities of every component under several
encoders). Every bar has its own colour (a column of the source), and the legend, when there is one, lists the
distinct values of the source's ``legend`` column (BokehJS groups the rows), so the number of bars can change
from frame to frame without adding or removing a Bokeh model. A frame sets the source's data and, when the
categories change, the axis's factors.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from bokeh.models import ColumnDataSource, FactorRange, Legend, LegendItem, Range1d
from bokeh.plotting import figure

from explorer.ui.plots.images import TITLE_SIZE
from explorer.ui.plots.sources import set_data
from explorer.ui.plots.figures import figure_pane

__all__ = ["BarChart"]


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
