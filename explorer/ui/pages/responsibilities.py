"""The responsibilities page: how masking shifts the cluster responsibilities of a mixture of factor analysers.

seed003 §1.10-1.11 and §3 item 11. A mixture of PPCA / factor analysers
(:class:`~explorer.ui.state.fa_model.FAModel` with ``n_components >= 2``, by default on the 3s and 8s)
assigns every complete test image to a component; with part of the image missing (the left half of
a 3 or an 8 is ambiguous) the responsibility given the **visible** pixels moves. The page shows, for
the selected image, the responsibilities of the complete image, of the masked image (exact) and of
NSA-M after l Neumann terms (signs corrected); over all test images, a histogram of the responsibility
after masking of each image's complete-data component (stacked by the true digit), and
the cluster-assignment accuracy (each component named by the majority digit of its training images).

Every plot is one ``hv.DynamicMap`` on an ``hv.streams.Pipe`` whose element structure never changes.
"""

from __future__ import annotations

import holoviews as hv
import numpy as np
import pandas as pd
import panel as pn
import param

from explorer.ui.state.fa_model import FAModel
from explorer.ui.components.flow import flow
from explorer.ui.components.fa_page import FAPage, mask_widgets, model_widgets
from explorer.ui.plots.images import image_dmap, mosaic

__all__ = ["ResponsibilitiesView", "accuracy_frame", "create_model", "shift_frame"]

CONDITIONS = {"complete": "complete image", "exact": "masked (exact)", "nsa": "masked (NSA-M, l terms)"}
COMPONENT_COLORS = ["#1b9e77", "#d95f02", "#7570b3", "#e7298a"]
CONDITION_COLORS = {"complete image": "#888888", "masked (exact)": "#2f6fb3", "masked (NSA-M, l terms)": "#e4572e"}
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


def _selected_frame(resp: dict, row: int) -> pd.DataFrame:
    K = resp["complete"].shape[1]
    names = [f"{k + 1}: {resp['cluster_label'][k]}s" for k in range(K)]
    return pd.DataFrame({"component": names * 3, "condition": np.repeat(list(CONDITIONS.values()), K),
                         "responsibility": np.concatenate([resp[k][row] for k in CONDITIONS])})


def _bars(data: pd.DataFrame) -> hv.Bars:
    return hv.Bars(data, ["condition", "component"], "responsibility").opts(
        color="component", cmap=COMPONENT_COLORS, ylim=(0, 1.05))


#: Bins of the histogram of the responsibilities after masking, on [0, 1].
SHIFT_BINS = 20


def _shift(data: dict) -> hv.Overlay:
    """Histogram of the responsibility after masking of each image's complete-image component, stacked by digit.

    (A scatter of before against after put every point at before = 1: a complete image is always assigned
    with certainty, and the points piled up there unseen.) The dashed line at 0.5: below it the image changed
    cluster; the black line: the selected image. Always the same three elements.
    """
    pts = data["points"]
    edges = np.linspace(0.0, 1.0, SHIFT_BINS + 1)
    rows, bottom = [], np.zeros(SHIFT_BINS)
    for digit in sorted(pts.digit.unique()):
        counts = np.histogram(np.clip(pts.after[pts.digit == digit], 0, 1), edges)[0]
        rows += [(edges[b], bottom[b], edges[b + 1], bottom[b] + counts[b], digit)
                 for b in range(SHIFT_BINS) if counts[b] > 0]
        bottom += counts
    df = pd.DataFrame(rows, columns=["after", "y0", "after1", "images", "digit"])
    top = max(float(bottom.max(initial=0)), 1.0) * 1.08
    bars = hv.Rectangles(df, kdims=[hv.Dimension("after", label="responsibility after masking (exact)"),
                                    hv.Dimension("y0", label="test images"), "after1", "images"],
                         vdims=["digit"]).opts(color="digit", cmap="Category10", line_color="black", line_width=0.5,
                                               show_legend=True, ylim=(0, top), framewise=True)
    half = hv.VLine(0.5).opts(color="#888888", line_dash="dashed", line_width=1.5)
    sel = hv.VLine(float(data["selected"].after.iloc[0])).opts(color="black", line_width=2.5)
    return hv.Overlay([bars, half, sel])


def _accuracy(data: pd.DataFrame) -> hv.Bars:
    return hv.Bars(data, "condition", "accuracy").opts(color="condition", cmap=CONDITION_COLORS, ylim=(0, 1.05))


def _empty_resp(K: int = 2) -> dict:
    r = np.full((1, K), 1.0 / K)
    return {"complete": r, "exact": r, "nsa": r, "cluster_label": np.arange(K)}


class ResponsibilitiesView(FAPage):
    """Responsibilities before / after masking for one image and over the test images."""

    _URL = URL
    model = param.ClassSelector(class_=FAModel, doc="A mixture (n_components >= 2)")

    def _build(self):
        m = self.model
        empty = _empty_resp()
        self.pipes = {"original": hv.streams.Pipe(data=np.zeros(m.shape)),
                      "masked": hv.streams.Pipe(data=np.zeros(m.shape)),
                      "means": hv.streams.Pipe(data=np.zeros(m.shape)),
                      "selected": hv.streams.Pipe(data=_selected_frame(empty, 0)),
                      "shift": hv.streams.Pipe(data=shift_frame(empty, np.zeros(1, dtype=int), 0)),
                      "accuracy": hv.streams.Pipe(data=accuracy_frame(empty, np.zeros(1, dtype=int)))}
        bars = hv.DynamicMap(_bars, streams=[self.pipes["selected"]]).opts(
            responsive=True, height=250, toolbar=None, title="Responsibilities of the selected image",
            legend_position="right", backend="bokeh", framewise=True, xlabel="")
        shift = hv.DynamicMap(_shift, streams=[self.pipes["shift"]]).opts(
            {"Overlay": {"responsive": True, "height": 330, "title": "Each image's own component after masking",
                         "xlabel": "responsibility after masking (exact)", "ylabel": "test images",
                         "legend_position": "top", "legend_cols": 4, "show_grid": True, "toolbar": None,
                         "xlim": (0, 1)}},
            backend="bokeh")
        accuracy = hv.DynamicMap(_accuracy, streams=[self.pipes["accuracy"]]).opts(
            responsive=True, height=330, toolbar=None, title="Cluster-assignment accuracy", show_legend=False,
            backend="bokeh", framewise=True, xlabel="")
        self._caption = pn.pane.Markdown("", margin=(0, 10))
        # fixed: stretching (the gallery's default) shared the row's width with the bars and cut the means off
        images = pn.Row(pn.pane.HoloViews(image_dmap(self.pipes["original"], 120, title="original"), linked_axes=False,
                                          sizing_mode="fixed"),
                        pn.pane.HoloViews(image_dmap(self.pipes["masked"], 120, title="masked"), linked_axes=False,
                                          sizing_mode="fixed"),
                        pn.pane.HoloViews(image_dmap(self.pipes["means"], 120, width=260, title="component means"),
                                          linked_axes=False, sizing_mode="fixed"), sizing_mode="fixed")
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
            flow(images, bars),
            self._caption,
            flow(shift, accuracy),
            pn.pane.Markdown(EXPLANATION, sizing_mode="stretch_width"), sizing_mode="stretch_width")

    def _on_random(self, event=None):
        self.model.image_index = int(self._rng.integers(0, self.model.n_eval))

    def _draw(self):
        m = self.model
        with m.lock, pn.io.hold():
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
            self.pipes["original"].send(X[i].reshape(h, w))
            self.pipes["masked"].send(np.where(miss[i], np.nan, X[i]).reshape(h, w))
            means = m.params.means
            self.pipes["means"].send(mosaic(means, (h, w), means.shape[0], gap=0.15))
            self.pipes["selected"].send(_selected_frame(resp, i))
            self.pipes["shift"].send(shift_frame(resp, labels, i))
            acc = accuracy_frame(resp, labels)
            self.pipes["accuracy"].send(acc)
            flips = float(np.mean(resp["complete"].argmax(axis=1) != resp["exact"].argmax(axis=1)))
            cl = ", ".join(f"component {k + 1} ≈ digit {d}" for k, d in enumerate(resp["cluster_label"]))
            self._info.object = (f"**{m.fit_info}** · {cl} · masking changes the most responsible component of "
                                 f"**{flips:.0%}** of the {len(labels)} test images · accuracy "
                                 f"{acc.accuracy[0]:.0%} complete, {acc.accuracy[1]:.0%} masked (exact), "
                                 f"{acc.accuracy[2]:.0%} NSA-M at l = {m.iteration}")
            self._caption.object = (f"Image {i} (digit {labels[i]}): " + " · ".join(
                f"component {k + 1}: {resp['complete'][i, k]:.3f} → {resp['exact'][i, k]:.3f} (exact), "
                f"{resp['nsa'][i, k]:.3f} (NSA-M)" for k in range(resp["complete"].shape[1])))


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
