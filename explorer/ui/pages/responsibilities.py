"""The responsibilities page: how masking shifts the cluster responsibilities of a mixture of factor analysers.

antypas2023 §1.10-1.11 and §3 item 11. A mixture of PPCA / factor analysers
(:class:`~explorer.ui.state.fa_model.FAModel` with ``n_components >= 2``, by default on the 3s and 8s)
assigns every complete test image to a component; with part of the image missing (the left half of
a 3 or an 8 is ambiguous) the responsibility given the **visible** pixels moves. The page shows, for
the selected image, the responsibilities of the complete image, of the masked image (exact) and of
NSA-M after l Neumann terms (signs corrected); over all test images, a histogram of the responsibility
after masking of each image's complete-data component (stacked by the true digit), and
the cluster-assignment accuracy (each component named by the majority digit of its training images).

Every plot is a Bokeh figure made once per session (:class:`~explorer.ui.plots.images.ImagePanel`,
:class:`~explorer.ui.plots.bars.BarChart`, :class:`ShiftHistogram`) whose frames only replace its sources' data
and set a few scalars (the selected image's line, the histogram's top); the frames' numbers are computed by pure
functions (:func:`selected_frame`, :func:`shift_frame`, :func:`shift_histogram`, :func:`accuracy_frame`). Steps run
on the session's worker thread, the page draws on the event loop.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import panel as pn
import param
from bokeh.models import ColumnDataSource, Legend, LegendItem, Range1d, Span
from bokeh.palettes import Category10
from bokeh.plotting import figure

from explorer.ui.components.fa_page import FAPage, mask_widgets, model_widgets
from explorer.ui.components.flow import flow
from explorer.ui.components.textline import TextLine
from explorer.ui.plots.bars import BarChart
from explorer.ui.plots.figures import figure_pane
from explorer.ui.plots.images import TITLE_SIZE, ImagePanel, grey_mapper, mosaic
from explorer.ui.plots.sources import set_data
from explorer.ui.session import hold, push
from explorer.ui.state.fa_model import FAModel

__all__ = ["ResponsibilitiesView", "ShiftHistogram", "accuracy_frame", "create_model", "selected_frame", "shift_frame",
           "shift_histogram"]

CONDITIONS = {"complete": "complete image", "exact": "masked (exact)", "nsa": "masked (NSA-M, l terms)"}
COMPONENT_COLORS = ["#1b9e77", "#d95f02", "#7570b3", "#e7298a"]
CONDITION_COLORS = {"complete image": "#888888", "masked (exact)": "#2f6fb3", "masked (NSA-M, l terms)": "#e4572e"}
#: Colours of the digits in the histogram (the digits in sorted order).
DIGIT_COLORS = Category10[10]
#: The test image the page opens on: ambiguous once masked (see :func:`create_model`).
DEFAULT_IMAGE = 67
URL = ("dataset", "classes", "kind", "n_factors", "n_components", "mask", "rate", "quarter", "side", "size",
       "mask_seed", "image_index", "n_terms", "max_terms")

EXPLANATION = """
### What am I looking at?
A **mixture of factor analysers** (here PPCA components) fitted on complete images. A component's
responsibility for an image is its posterior probability given the pixels; with pixels missing it is computed
from the **visible pixels only** (the component's marginal over them, via Woodbury and the determinant lemma, with
the signs of the thesis's formulas corrected). Hiding the top half of a 1 or a 7 removes the bar of the 7, so
the two clusters become hard to tell apart and the responsibilities move toward each other, or flip (the
thesis's experiment on 28 x 28 MNIST; on the small 8 x 8 digits the 1s and 7s stay apart, the left half of a 3
or an 8 is the ambiguous case, which is why the page starts there).

* **Top**: the selected test image and its responsibilities: complete, masked (exact) and masked with NSA-M
  after l Neumann terms (which converge to the exact ones as l grows).
* **Bottom left**: for every test image, the responsibility after masking of the component it belongs to when
  complete (where it is close to 1), as a histogram stacked by digit. Images left of 1 lost confidence; left of
  the dashed line (0.5), the image changed cluster. The black line is the selected image.
* **Bottom right**: the fraction of test images whose most responsible component's majority digit is the true digit.
"""


def shift_frame(resp: dict, labels: np.ndarray, selected: int) -> dict:
    """Before/after responsibilities of each image's complete-data component, and the selected image."""
    comp = resp["complete"].argmax(axis=1)
    rows = np.arange(len(comp))
    df = pd.DataFrame({"before": resp["complete"][rows, comp], "after": resp["exact"][rows, comp],
                       "digit": [str(v) for v in labels]})
    return {"points": df, "selected": df.iloc[[selected]]}


def accuracy_frame(resp: dict, labels: np.ndarray) -> pd.DataFrame:
    """Cluster-assignment accuracy (arg-max component's majority digit = true digit) per condition."""
    cl = resp["cluster_label"]
    return pd.DataFrame({"condition": list(CONDITIONS.values()),
                         "accuracy": [float(np.mean(cl[resp[k].argmax(axis=1)] == labels)) for k in CONDITIONS]})


def selected_frame(resp: dict, row: int) -> dict:
    """The bars of the selected image: one per (condition, component), coloured by component.

    Returns ``x`` ((condition, component name) pairs, conditions in :data:`CONDITIONS` order), ``values``,
    ``colors``, ``legend`` (the component names, "1: 3s") and ``factors`` (every pair, in order).
    """
    K = resp["complete"].shape[1]
    names = [f"{k + 1}: {resp['cluster_label'][k]}s" for k in range(K)]
    x = [(c, n) for c in CONDITIONS.values() for n in names]
    return {"x": x, "values": np.concatenate([resp[k][row] for k in CONDITIONS]),
            "colors": [COMPONENT_COLORS[k % len(COMPONENT_COLORS)] for k in range(K)] * len(CONDITIONS),
            "legend": names * len(CONDITIONS), "factors": x}


#: Bins of the histogram of the responsibilities after masking, on [0, 1].
SHIFT_BINS = 20


def shift_histogram(points: pd.DataFrame) -> tuple[dict, float]:
    """Histogram of the responsibility after masking of each image's complete-image component, stacked by digit.

    (A scatter of before against after put every point at before = 1: a complete image is always assigned
    with certainty, and the points piled up there unseen.) ``points``: the ``points`` of :func:`shift_frame`.

    Returns the columns of the bars (``left``, ``right``, ``bottom``, ``top``, ``digit``, ``color``: one row per
    non-empty (bin, digit), digits in sorted order, coloured as Category10 in that order) and the top of the
    value axis.
    """
    edges = np.linspace(0.0, 1.0, SHIFT_BINS + 1)
    after, digits = np.clip(points.after.to_numpy(dtype=float), 0, 1), points.digit.to_numpy(dtype=str)
    parts, bottom = [], np.zeros(SHIFT_BINS)
    for i, digit in enumerate(np.unique(digits)):  # sorted
        counts = np.histogram(after[digits == digit], edges)[0]
        b = np.flatnonzero(counts)
        parts.append((edges[b], edges[b + 1], bottom[b], bottom[b] + counts[b], [str(digit)] * len(b),
                      [DIGIT_COLORS[i % len(DIGIT_COLORS)]] * len(b)))
        bottom = bottom + counts
    names = ("left", "right", "bottom", "top", "digit", "color")
    data = {k: np.concatenate([p[j] for p in parts]) if parts else np.empty(0) for j, k in enumerate(names[:4])}
    data |= {k: [v for p in parts for v in p[j]] for j, k in enumerate(names[4:], start=4)}
    return data, max(float(bottom.max(initial=0)), 1.0) * 1.08


class ShiftHistogram:
    """The histogram of :func:`shift_histogram` in a Bokeh figure made once: stacked bars (one ``quad`` source,
    a legend of the digits above), a dashed line at 0.5 (left of it, the image changed cluster) and a black line
    at the selected image. A frame replaces the bars' data and sets the lines' and the value axis's ends.

    Attributes
    ----------
    figure, source, pane
    frame : dict or None
        The last :func:`shift_frame` drawn.
    """

    def __init__(self, height: int = 330):
        self.y_range = Range1d(0.0, 1.0)
        fig = figure(height=height, sizing_mode="stretch_width", x_range=Range1d(0.0, 1.0), y_range=self.y_range,
                     title="Each image's own component after masking", toolbar_location=None, tools="",
                     x_axis_label="responsibility after masking (exact)", y_axis_label="test images",
                     min_border_left=40)
        self.source = ColumnDataSource({k: np.empty(0) for k in ("left", "right", "bottom", "top")}
                                       | {"digit": [], "color": []})
        fig.title.text_font_size = TITLE_SIZE
        bars = fig.quad(left="left", right="right", bottom="bottom", top="top", source=self.source,
                        fill_color="color", line_color="black", line_width=0.5)
        fig.add_layout(Span(location=0.5, dimension="height", line_color="#888888", line_dash="dashed",
                            line_width=1.5))
        self.selected = Span(location=0.0, dimension="height", line_color="black", line_width=2.5)
        fig.add_layout(self.selected)
        fig.add_layout(Legend(items=[LegendItem(label={"field": "digit"}, renderers=[bars])], orientation="horizontal",
                              ncols=4, location="center", label_text_font_size="9pt"), "above")
        self.figure = fig
        self.pane = figure_pane(fig, sizing_mode="stretch_width")
        self.frame: dict | None = None
        self._inputs = None  # what the frame drawn was made of

    def show(self, resp: dict, labels: np.ndarray, selected: int) -> None:
        """Draw the :func:`shift_frame` of these responsibilities (nothing to do when they are the ones drawn:
        a Step changes the NSA-M responsibilities only)."""
        inputs = (resp["complete"], resp["exact"], labels, selected)
        if self._inputs is not None and all(np.array_equal(a, b) for a, b in zip(inputs, self._inputs)):
            return
        self._inputs = tuple(np.copy(a) for a in inputs)
        self.update(shift_frame(resp, labels, selected))

    def update(self, frame: dict) -> None:
        """Draw a :func:`shift_frame`."""
        self.frame = frame
        data, top = shift_histogram(frame["points"])
        set_data(self.source, data)
        if self.y_range.end != top:
            self.y_range.update(end=top, reset_end=top)
        selected = float(frame["selected"].after.iloc[0])
        if self.selected.location != selected:
            self.selected.location = selected


class ResponsibilitiesView(FAPage):
    """Responsibilities before / after masking for one image and over the test images.

    Attributes
    ----------
    images : dict of ImagePanel
        The selected image ("original"), masked ("masked") and the components' means ("means").
    selected_bars, accuracy_bars : BarChart
    shift : ShiftHistogram
    """

    _URL = URL
    model = param.ClassSelector(class_=FAModel, doc="A mixture (n_components >= 2)")

    def _build(self):
        m = self.model
        # Bokeh figures made once per session: a frame only replaces their sources' data (issue 19)
        greys = grey_mapper()  # one colour map for the three images
        self.images = {"original": ImagePanel(120, title="original", color_mapper=greys),
                       "masked": ImagePanel(120, title="masked", color_mapper=greys),
                       "means": ImagePanel(120, width=260, title="component means", color_mapper=greys)}
        self.selected_bars = BarChart("Responsibilities of the selected image", "responsibility", height=250,
                                      legend="right")
        self.shift = ShiftHistogram(height=330)
        self.accuracy_bars = BarChart("Cluster-assignment accuracy", "accuracy", height=330)
        self._caption = TextLine()
        # fixed: stretching (the gallery's default) shared the row's width with the bars and cut the means off
        images = pn.Row(*(panel.pane for panel in self.images.values()), sizing_mode="fixed")
        random_button = pn.widgets.Button(label="Random image", color="primary")
        random_button.on_click(self._on_random)
        self._rng = np.random.default_rng()
        self.sidebar = pn.Column(
            *self._l_widgets(),  # Step / Play / Reset first: visible without scrolling
            "### Image", pn.widgets.IntSlider.from_param(m.param.image_index, label="Test image", start=0,
                                                         end=m.n_eval - 1),
            random_button,
            "### Mask", mask_widgets(m, masks=("random_pixels", "quarter", "half", "square")),
            "### Mixture", *model_widgets(m, components=(2, 4)),
            sizing_mode="stretch_width")
        self.main = pn.Column(
            self._alert, self._info,
            flow(images, self.selected_bars.pane),
            self._caption,
            flow(self.shift.pane, self.accuracy_bars.pane),
            pn.pane.Markdown(EXPLANATION, sizing_mode="stretch_width"), sizing_mode="stretch_width")

    def _make_info(self) -> TextLine:
        return TextLine()

    def _on_random(self, event=None):
        self.model.image_index = int(self._rng.integers(0, self.model.n_eval))

    def _draw(self):
        m = self.model
        with m.lock, hold():
            if self._show_error():
                self._info.object = ""
                return
            if not m.is_mixture:
                self._alert.object = "**Responsibilities need a mixture:** set *Components* to 2 or more."
                self._alert.visible = True
                return
            i = m.image_index
            h, w = m.shape
            X, miss, labels = m.truth, m.missing, m.labels
            resp = m.responsibilities()
            self.images["original"].update(X[i].reshape(h, w))
            self.images["masked"].update(np.where(miss[i], np.nan, X[i]).reshape(h, w))
            means = m.params.means
            self.images["means"].update(mosaic(means, (h, w), means.shape[0], gap=0.15))
            bars = selected_frame(resp, i)
            self.selected_bars.update(bars["x"], bars["values"], bars["colors"], legend=bars["legend"],
                                      factors=bars["factors"])
            self.shift.show(resp, labels, i)
            acc = accuracy_frame(resp, labels)
            self.accuracy_bars.update(acc.condition, acc.accuracy, [CONDITION_COLORS[c] for c in acc.condition])
            flips = float(np.mean(resp["complete"].argmax(axis=1) != resp["exact"].argmax(axis=1)))
            cl = ", ".join(f"component {k + 1} ≈ digit {d}" for k, d in enumerate(resp["cluster_label"]))
            self._info.object = (f"**{m.fit_info}** · {cl} · masking changes the most responsible component of "
                                 f"**{flips:.0%}** of the {len(labels)} test images · accuracy "
                                 f"{acc.accuracy[0]:.0%} complete, {acc.accuracy[1]:.0%} masked (exact), "
                                 f"{acc.accuracy[2]:.0%} NSA-M at l = {m.iteration}")
            self._caption.object = (f"Image {i} (digit {labels[i]}): " + " · ".join(
                f"component {k + 1}: {resp['complete'][i, k]:.3f} → {resp['exact'][i, k]:.3f} (exact), "
                f"{resp['nsa'][i, k]:.3f} (NSA-M)" for k in range(resp["complete"].shape[1])))
        push(*(panel.pane for panel in self.images.values()), self.selected_bars.pane, self.shift.pane,
             self.accuracy_bars.pane, self._info.pane, self._caption.pane)


def create_model(**settings) -> FAModel:
    """The default model of the page: the 3s and 8s of the 8x8 digits, two PPCA components, left half missing.

    It opens on test image 67 (an 8) whose left half looks like a 3: masked, it changes cluster (the 3s'
    component gets 0.66 instead of 0.00), and NSA-M gets there from 0 / 1 at l = 0 as l grows, so Step shows
    the responsibilities move.
    (The thesis's 1s and 7s with the top half missing are one click away; on the 8x8 digits their two
    clusters stay apart under every half mask, while the left half of a 3 or an 8 is ambiguous.)
    """
    return FAModel(**({"classes": "3,8", "n_components": 2, "n_factors": 10, "mask": "half", "side": "left",
                       "max_terms": 200, "image_index": DEFAULT_IMAGE} | settings))
