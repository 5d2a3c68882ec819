"""The inpainting page: one masked image (or a grid of them) imputed by every encoder of a factor model.

seed003 §1.3-1.6 and §3 items 1, 2 and 11. A :class:`~explorer.ui.state.fa_model.FAModel` (PPCA / FA,
or a mixture of them) is fitted on complete training images; a test image is masked (random
pixels, a quarter, a half, a random square, or a mask **painted with the brush**: click the
"masked" panel to toggle a block of pixels) and shown as original | masked | MI | FCA | SCA |
exact | NSA(l), with the error on the missing pixels under each panel. l is dragged on a slider or
stepped / played with :class:`~explorer.ui.components.player.StepPlayer`. For mixtures: every component's
reconstruction with its exact and NSA-M responsibilities. Grid mode: 16 images at once for one
encoder. **Draw**: with the paint mode "ink", clicks on the original or the masked panel paint ink
on a blank canvas of the image size (8x8, 28x28 or 16x16), which replaces the selected test image
and is masked and inpainted like it ("Clear drawing" starts again).

Every plot is one ``hv.DynamicMap`` on an ``hv.streams.Pipe`` built once (an image per panel, one
mosaic image for the components and for each grid, one ``hv.Bars`` for the responsibilities).

What the three factor-analysis pages share is in :mod:`explorer.ui.components.fa_page` and
:mod:`explorer.ui.plots.images`.
"""

from __future__ import annotations

import holoviews as hv
import holoviews.plotting.bokeh
import numpy as np
import pandas as pd
import panel as pn
import param

from explorer.ui.components.fa_page import URL, FAPage, mask_widgets, model_widgets
from explorer.ui.weak import weak_callback
from explorer.ui.plots.images import image_dmap, mosaic
from explorer.ui.state.fa_model import METHOD_LABELS, METHODS

__all__ = ["InpaintingView"]

PANELS = ("original", "masked") + METHODS
PANEL_TITLES = {"original": "original", "masked": "masked"} | METHOD_LABELS

EXPLANATION = """
### What am I looking at?
A **factor model** x = μ + Wz + noise (PPCA, factor analysis, or a mixture of them) fitted on complete
training images. A test image loses the pixels of the mask (red). Every encoder estimates the factors z
from the visible pixels, and the image is reconstructed as μ + Wz:

* **MI**: the missing pixels are filled with the mean image (no encoding);
* **FCA**: the mean-imputed image encoded as if it were complete (one fixed encoder for every mask);
* **SCA**: the precision of the factors scaled by the fraction of visible pixels;
* **exact**: the posterior mean given the visible pixels, one q x q solve per mask;
* **NSA(l)**: the scaled **Neumann series** with l updates, y ← (I − A/s) y + u/s. It converges to the
  exact solution (ρ(I − A/s) < 1 for every mask); early-stopped it often has a *smaller* error than the
  exact solution (the thesis's surprise: early stopping shrinks the poorly determined directions).

For a mixture, the exact and NSA encoders are applied in each component and weighted by the
component's responsibility given the visible pixels (NSA-M, with the signs of the thesis corrected).
The numbers under the panels are the mean squared errors on the missing pixels of this image.
**Brush**: with the paint mode *mask*, click the *masked* panel to hide or show a block of pixels (the
brush applies to every test image). **Draw a digit**: with the paint mode *ink*, click the *original*
(or the *masked*) panel to ink or erase pixels of a blank canvas; your drawing replaces the selected
test image, is masked like it and inpainted by every encoder (its errors compare with your drawing).
The *photo patches* are 16 x 16 grey patches of two photographs: a larger inpainting problem (D = 256).
"""


def _fmt(x: float) -> str:
    return "–" if not np.isfinite(x) else f"{x:.4f}"


# ----------------------------------------------------------------------------- the page
class InpaintingView(FAPage):
    """Original | masked | MI | FCA | SCA | exact | NSA(l) for one image, per-component reconstructions, grid.

    Parameters
    ----------
    model : FAModel, optional
    brush_size : int
        Side of the block of pixels a click toggles.
    grid : bool
        Show 16 images for ``grid_method`` too.
    grid_method : str
        One of :data:`~explorer.ui.state.fa_model.METHODS`.
    """

    _URL = URL + ("source",)  # the drawing itself stays in the session
    brush_size = param.Integer(default=1, bounds=(1, 8), doc="Side of the block a click toggles")
    grid = param.Boolean(default=False, doc="Grid mode: 16 images at once")
    grid_method = param.Selector(default="nsa", objects=list(METHODS), doc="Encoder shown in the grid")
    paint_mode = param.Selector(default="mask", objects=["mask", "ink"],
                                doc="What a click paints: the mask (masked panel) or ink on the drawing")

    def _build(self):
        m = self.model
        self.pipes = {p: hv.streams.Pipe(data=np.zeros(m.shape)) for p in PANELS}
        self.tap = hv.streams.Tap(x=None, y=None, transient=True)
        self.tap.add_subscriber(weak_callback(self._on_tap))
        self.ink_tap = hv.streams.Tap(x=None, y=None, transient=True)  # the original panel: the drawing canvas
        self.ink_tap.add_subscriber(weak_callback(self._on_ink_tap))
        # drags on the original panel ink every pixel they cross (paint mode "ink")
        self.drag = hv.streams.Draw(rename={"x": "dx", "y": "dy"}, transient=True)
        self.drag.add_subscriber(weak_callback(self._on_drag))
        self._last_drag = None  # (stroke, row, col) of the previous drag event
        taps = {"masked": [self.tap], "original": [self.ink_tap, self.drag]}
        # each caption centred under its image (the column is as wide as the image's figure)
        self._errors = {p: pn.pane.Markdown("", width=150, margin=(0, 0), styles={"font-size": "12px",
                                                                                   "text-align": "center"})
                        for p in PANELS}
        panels = []
        for p in PANELS:
            dmap = image_dmap(self.pipes[p], 118, title=PANEL_TITLES[p],
                              streams=taps.get(p, ()), tools=["tap"] if p in taps else ())
            panels.append(pn.Column(pn.pane.HoloViews(dmap, linked_axes=False, margin=(5, 5, 0, 5)), self._errors[p],
                                    width=150, sizing_mode="fixed"))
        self.pipes["components"] = hv.streams.Pipe(data=np.zeros(m.shape))
        self.pipes["resp"] = hv.streams.Pipe(data=_resp_frame(np.ones(1), np.ones(1)))
        self.pipes["grid_in"] = hv.streams.Pipe(data=np.zeros(m.shape))
        self.pipes["grid_out"] = hv.streams.Pipe(data=np.zeros(m.shape))
        comps = image_dmap(self.pipes["components"], 130, width=300, title="Per-component reconstructions")
        bars = hv.DynamicMap(_resp_bars, streams=[self.pipes["resp"]]).opts(
            width=330, height=180, toolbar=None, ylim=(0, 1.05), title="Responsibilities (visible pixels)",
            legend_position="top_right", backend="bokeh")
        self._comp_caption = pn.pane.Markdown("", margin=(0, 10))
        self._mixture = pn.Column("#### Mixture components", pn.Row(pn.pane.HoloViews(comps, linked_axes=False),
                                                                    pn.pane.HoloViews(bars, linked_axes=False)),
                                  self._comp_caption, sizing_mode="stretch_width")
        self._grid_title = pn.pane.Markdown("", margin=(0, 10))
        self._grid = pn.Column(self._grid_title, pn.Row(
            pn.pane.HoloViews(image_dmap(self.pipes["grid_in"], 260, title="masked"), linked_axes=False),
            pn.pane.HoloViews(image_dmap(self.pipes["grid_out"], 260, title="imputed"), linked_axes=False)),
            sizing_mode="stretch_width")
        random_button = pn.widgets.Button(label="Random image", color="primary")
        random_button.on_click(self._on_random)
        clear = pn.widgets.Button(label="Clear brush", color="light")
        clear.on_click(lambda event: self.model.clear_brush())
        clear_drawing = pn.widgets.Button(label="Clear drawing", color="light")
        clear_drawing.on_click(lambda event: self.model.clear_drawing())
        self._rng = np.random.default_rng()
        self.sidebar = pn.Column(
            *self._l_widgets(),  # Step / Play / Reset first: visible without scrolling
            "### Image", pn.widgets.IntSlider.from_param(m.param.image_index, label="Test image", start=0,
                                                         end=m.n_eval - 1),
            random_button,
            pn.widgets.RadioButtonGroup.from_param(m.param.source, options={"test image": "test", "draw": "draw"},
                                                   color="primary", variant="outline"),
            "### Paint",
            pn.widgets.RadioButtonGroup.from_param(self.param.paint_mode, options={"mask": "mask", "ink": "ink"},
                                                   color="primary", variant="outline"),
            pn.widgets.IntSlider.from_param(self.param.brush_size, label="Brush size (pixels)", start=1, end=8),
            pn.Row(clear, clear_drawing),
            "### Mask", mask_widgets(m),
            "### Model", *model_widgets(m),
            "### Display",
            pn.widgets.Checkbox.from_param(m.param.keep_observed, label="Paste the observed pixels back"),
            pn.widgets.Checkbox.from_param(self.param.grid, label="Grid mode (16 images)"),
            pn.widgets.Select.from_param(self.param.grid_method, label="Encoder in the grid",
                                         options={METHOD_LABELS[k]: k for k in METHODS}),
            sizing_mode="stretch_width")
        self.main = pn.Column(self._alert, self._info, pn.FlexBox(*panels), self._mixture, self._grid,
                              pn.pane.Markdown(EXPLANATION, sizing_mode="stretch_width"), sizing_mode="stretch_width")
        self.param.watch(lambda event: self.refresh(), ["grid", "grid_method"])

    # ------------------------------------------------------------------ events
    def _on_random(self, event=None):
        self.model.image_index = int(self._rng.integers(0, self.model.n_eval))

    def _pixel(self, x, y):
        """(row, col) under a tap at (x, y), or None outside the image."""
        if x is None or y is None:
            return None
        h, w = self.model.shape
        row, col = int(np.floor(h - y)), int(np.floor(x))
        return (row, col) if 0 <= row < h and 0 <= col < w else None

    def _on_tap(self, x=None, y=None):
        """A click on the masked panel: toggles the mask, or (paint mode "ink") inks the drawing."""
        px = self._pixel(x, y)
        if px is None:
            return
        if self.paint_mode == "ink":
            self.model.draw(*px, size=self.brush_size)
        else:
            self.model.paint(*px, size=self.brush_size)

    def _on_drag(self, dx=None, dy=None, stroke_count=None):
        """A drag over the original panel inks (never erases) the pixels under it in paint mode "ink",
        joined by straight lines to the previous position of the same stroke (events are sparse)."""
        px = self._pixel(dx, dy)
        if px is None or self.paint_mode != "ink":
            return
        last, self._last_drag = self._last_drag, (stroke_count, *px)
        if last is not None and last[0] == stroke_count:
            n = max(abs(px[0] - last[1]), abs(px[1] - last[2])) + 1
            rows = np.rint(np.linspace(last[1], px[0], n)).astype(int)
            cols = np.rint(np.linspace(last[2], px[1], n)).astype(int)
        else:
            rows, cols = [px[0]], [px[1]]
        self.model.draw(rows, cols, size=self.brush_size, value=True)

    def _on_ink_tap(self, x=None, y=None):
        """A click on the original panel inks (toggles) the drawing in paint mode "ink"."""
        px = self._pixel(x, y)
        if px is not None and self.paint_mode == "ink":
            self.model.draw(*px, size=self.brush_size)

    # ------------------------------------------------------------------ drawing
    def _draw(self):
        m = self.model
        with m.lock, pn.io.hold():
            if self._show_error():
                self._info.object = ""
                return
            i = m.image_index
            h, w = m.shape
            X, miss = m.truth, m.missing
            R = m.reconstructions()
            errs = m.row_errors()
            frames = {"original": X[i], "masked": np.where(miss[i], np.nan, X[i])} | {k: R[k][i] for k in METHODS}
            for p, img in frames.items():
                self.pipes[p].send(img.reshape(h, w))
            n_mis = int(miss[i].sum())
            n_ink = int(np.count_nonzero(m.canvas))
            self._errors["original"].object = (f"drawing, {n_ink} inked" if m.source == "draw" else
                                               f"label {m.labels[i]}" if m.labels[i] >= 0 else "")
            self._errors["masked"].object = f"{n_mis} of {h * w} missing"
            best = min(METHODS, key=lambda k: errs[k][i] if np.isfinite(errs[k][i]) else np.inf)
            for k in METHODS:
                e = _fmt(errs[k][i])
                self._errors[k].object = f"MSE **{e}**" if k == best and np.isfinite(errs[k][i]) else f"MSE {e}"
            s = m.scale
            self._info.object = (
                f"**{m.fit_info}** · s = {', '.join(f'{v:.1f}' for v in s)} · image {i}: ρ(I − A/s) = "
                f"{m.rho[i]:.4f}, bound {m.bound[i]:.2e}, residual {m.residual[i]:.2e} at l = {m.iteration}")
            self._mixture.visible = m.is_mixture
            if m.is_mixture:
                cv = m.component_view(i)
                self.pipes["components"].send(mosaic(cv["reconstructions"], (h, w), cv["reconstructions"].shape[0], gap=0.15))
                self.pipes["resp"].send(_resp_frame(cv["exact"], cv["nsa"]))
                self._comp_caption.object = " · ".join(
                    f"component {k + 1}: r = {cv['exact'][k]:.3f} (exact), {cv['nsa'][k]:.3f} (NSA-M)"
                    for k in range(len(cv["exact"])))
            self._grid.visible = self.grid
            if self.grid:
                rows = (i + np.arange(16)) % m.n_eval
                self.pipes["grid_in"].send(mosaic(np.where(miss[rows], np.nan, X[rows]), (h, w), 4, gap=0.15))
                self.pipes["grid_out"].send(mosaic(R[self.grid_method][rows], (h, w), 4, gap=0.15))
                mse = np.nanmean(errs[self.grid_method][rows]) if np.isfinite(errs[self.grid_method][rows]).any() \
                    else np.nan
                self._grid_title.object = (f"**Grid**: test images {rows[0]}–{rows[-1]} (wrapping), "
                                           f"{METHOD_LABELS[self.grid_method]}, mean MSE on missing pixels {_fmt(mse)}")


def _resp_frame(exact: np.ndarray, nsa: np.ndarray) -> pd.DataFrame:
    K = len(exact)
    comp = [f"{k + 1}" for k in range(K)]
    return pd.DataFrame({"component": comp * 2, "encoder": ["exact"] * K + ["NSA-M(l)"] * K,
                         "responsibility": np.concatenate([exact, nsa])})


def _resp_bars(data: pd.DataFrame) -> hv.Bars:
    return hv.Bars(data, ["component", "encoder"], "responsibility").opts(
        color="encoder", cmap={"exact": "#2f6fb3", "NSA-M(l)": "#e4572e"}, show_legend=True)
