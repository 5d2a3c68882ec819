"""The inpainting page: one masked image (or a grid of them) imputed by every encoder of a factor model.

antypas2023 §1.3-1.6 and §3 items 1, 2 and 11. A :class:`~explorer.ui.state.fa_model.FAModel` (PPCA / FA,
or a mixture of them) is fitted on complete training images; a test image is masked (random
pixels, a quarter, a half, a random square, or a mask **painted with the brush**: click the
"masked" panel to toggle a block of pixels) and shown as original | masked | MI | FCA | SCA |
exact | NSA(l), with the error on the missing pixels under each panel. l is dragged on a slider or
stepped / played with :class:`~explorer.ui.components.player.StepPlayer`. For mixtures: every component's
reconstruction with its exact and NSA-M responsibilities. Grid mode: 16 images at once for one
encoder. **Draw**: with the paint mode "ink", clicks and drags on the original (clicks on the masked
panel too) paint ink on a blank canvas of the image size (8x8, 28x28 or 16x16), which replaces the
selected test image and is masked and inpainted like it ("Clear drawing" starts again).

Every image is an :class:`~explorer.ui.plots.images.ImagePanel` and the responsibilities a
:class:`~explorer.ui.plots.bars.BarChart`: Bokeh figures made once per session (the mixture's and the
grid's when first shown) whose frames only replace their sources' data; clicks and drags arrive as
Bokeh events, and the model's work (steps, paint, ink) runs on the session's worker thread while the
page draws on the event loop.

What the three factor-analysis pages share is in :mod:`explorer.ui.components.fa_page` and
:mod:`explorer.ui.plots.images`.
"""

from __future__ import annotations

import threading

import numpy as np
import panel as pn
import param

from explorer.ui.components.fa_page import URL, FAPage, mask_widgets, model_widgets
from explorer.ui.components.textline import TextLine
from explorer.ui.plots.bars import BarChart
from explorer.ui.plots.images import ImagePanel, grey_mapper, mosaic
from explorer.ui.session import hold, push, run_then
from explorer.ui.state.fa_model import METHOD_LABELS, METHODS
from explorer.ui.weak import weak_callback

__all__ = ["InpaintingView"]

PANELS = ("original", "masked") + METHODS
PANEL_TITLES = {"original": "original", "masked": "masked"} | METHOD_LABELS
#: Colours of the responsibility bars of a mixture, per encoder.
ENCODER_COLORS = {"exact": "#2f6fb3", "NSA-M(l)": "#e4572e"}

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
(or the *masked*) panel to ink or erase pixels of a blank canvas, drag over the *original* panel to ink a
stroke; your drawing replaces the selected
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

    Attributes
    ----------
    panels : dict of ImagePanel
        The image of every panel of :data:`PANELS` (original, masked, then the encoders).
    components, resp_bars : ImagePanel, BarChart
        A mixture's per-component reconstructions and responsibilities (made when a mixture is first drawn).
    grid_in, grid_out : ImagePanel
        The grid's masked and imputed mosaics (made when the grid mode is first on).
    """

    _URL = URL + ("source",)  # the drawing itself stays in the session
    brush_size = param.Integer(default=1, bounds=(1, 8), doc="Side of the block a click toggles")
    grid = param.Boolean(default=False, doc="Grid mode: 16 images at once")
    grid_method = param.Selector(default="nsa", objects=list(METHODS), doc="Encoder shown in the grid")
    paint_mode = param.Selector(default="mask", objects=["mask", "ink"],
                                doc="What a click paints: the mask (masked panel) or ink on the drawing")

    def _build(self):
        m = self.model
        # Bokeh figures made once per session: a frame only replaces their sources' data (issue 19)
        # the original panel is the drawing canvas (clicks and drags ink it in paint mode "ink"); a click on
        # the masked panel paints the mask (or inks)
        events = {"original": {"on_tap": weak_callback(self._on_ink_tap), "on_drag": weak_callback(self._on_drag)},
                  "masked": {"on_tap": weak_callback(self._on_tap)}}
        self._greys = grey_mapper()  # one colour map for every image of the page
        self.panels = {p: ImagePanel(118, title=PANEL_TITLES[p], color_mapper=self._greys, **events.get(p, {}))
                       for p in PANELS}
        self._last_drag = None  # (stroke, row, col) of the previous drag event
        self._ink_lock = threading.Lock()
        self._ink: list = []  # pixels dragged over and not yet inked (one job inks all that came meanwhile)
        # each caption centred under its image (the column is as wide as the image's figure)
        self._errors = {p: TextLine(width=150, margin=(5, 0), styles={"font-size": "12px", "text-align": "center"})
                        for p in PANELS}
        panels = [pn.Column(self.panels[p].pane, self._errors[p], width=150, sizing_mode="fixed") for p in PANELS]
        # the mixture's components and the grid are built when first shown (most sessions never show them)
        self._comp_caption = TextLine()
        self._mixture = pn.Column(sizing_mode="stretch_width", visible=False)
        self._grid_title = TextLine()
        self._grid = pn.Column(sizing_mode="stretch_width", visible=False)
        random_button = pn.widgets.Button(label="Random image", color="primary")
        random_button.on_click(self._on_random)
        clear = pn.widgets.Button(label="Clear brush", color="light")
        clear.on_click(lambda event: self._act(self.model.clear_brush))
        clear_drawing = pn.widgets.Button(label="Clear drawing", color="light")
        clear_drawing.on_click(lambda event: self._act(self.model.clear_drawing))
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

    def _build_mixture(self) -> None:
        """The per-component reconstructions and the responsibilities (built the first time a mixture is drawn)."""
        self.components = ImagePanel(130, width=300, title="Per-component reconstructions", color_mapper=self._greys)
        self.resp_bars = BarChart("Responsibilities (visible pixels)", "responsibility", width=420, height=180,
                                  legend="top_right", xlabel="component, encoder")
        self._mixture.objects = ["#### Mixture components", pn.FlexBox(self.components.pane, self.resp_bars.pane),
                                 self._comp_caption]

    def _build_grid(self) -> None:
        """The masked and imputed mosaics of 16 images (built the first time the grid mode is on)."""
        self.grid_in = ImagePanel(260, title="masked", color_mapper=self._greys)
        self.grid_out = ImagePanel(260, title="imputed", color_mapper=self._greys)
        self._grid.objects = [self._grid_title, pn.Row(self.grid_in.pane, self.grid_out.pane)]

    def _make_info(self) -> TextLine:
        return TextLine()

    def _figures(self) -> list:
        """The Bokeh panes of the page built so far (figures and text lines)."""
        images = [self.panels[p] for p in PANELS] + [getattr(self, k) for k in ("components", "grid_in", "grid_out")
                                                      if hasattr(self, k)]
        texts = [self._info, *self._errors.values(), self._comp_caption, self._grid_title]
        return [i.pane for i in images] + ([self.resp_bars.pane] if hasattr(self, "resp_bars") else []) + [
            t.pane for t in texts]

    # ------------------------------------------------------------------ events
    def _act(self, action, *args, **kwargs) -> None:
        """Run a model action (paint, ink, clear) on the session's worker (at once when not served); the
        model's new outputs are drawn on the event loop."""
        run_then(lambda: action(*args, **kwargs))

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
            self._act(self.model.draw, *px, size=self.brush_size)
        else:
            self._act(self.model.paint, *px, size=self.brush_size)

    def _on_drag(self, dx=None, dy=None, stroke_count=None):
        """A drag over the original panel inks (never erases) the pixels under it in paint mode "ink",
        joined by straight lines to the previous position of the same stroke (events are sparse).

        The pixels are collected here (on the event loop) and inked by one job on the worker: the
        positions that arrive while it waits are inked with it (the images are encoded again once, not once each).
        """
        px = self._pixel(dx, dy)
        if px is None or self.paint_mode != "ink":
            return
        last, self._last_drag = self._last_drag, (stroke_count, *px)
        if last is not None and last[0] == stroke_count:
            if (last[1], last[2]) == px:
                return  # the same pixel again: already inked
            n = max(abs(px[0] - last[1]), abs(px[1] - last[2])) + 1
            rows = np.rint(np.linspace(last[1], px[0], n)).astype(int)
            cols = np.rint(np.linspace(last[2], px[1], n)).astype(int)
        else:
            rows, cols = [px[0]], [px[1]]
        with self._ink_lock:
            queued = bool(self._ink)
            self._ink += [(r, c, self.brush_size) for r, c in zip(rows, cols)]
        if not queued:
            self._act(self._ink_dragged)

    def _ink_dragged(self) -> None:
        """Ink every pixel dragged over since the last time (on the worker)."""
        with self._ink_lock:
            pixels, self._ink = self._ink, []
        for size in dict.fromkeys(s for _, _, s in pixels):  # one brush size per drag, in practice
            rows, cols = zip(*[(r, c) for r, c, s in pixels if s == size])
            self.model.draw(list(rows), list(cols), size=size, value=True)

    def _on_ink_tap(self, x=None, y=None):
        """A click on the original panel inks (toggles) the drawing in paint mode "ink"."""
        px = self._pixel(x, y)
        if px is not None and self.paint_mode == "ink":
            self._act(self.model.draw, *px, size=self.brush_size)

    # ------------------------------------------------------------------ drawing
    def _draw(self):
        m = self.model
        with m.lock, hold():
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
                self.panels[p].update(img.reshape(h, w))
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
                if not hasattr(self, "components"):
                    self._build_mixture()
                cv = m.component_view(i)
                K = len(cv["exact"])
                self.components.update(mosaic(cv["reconstructions"], (h, w), K, gap=0.15))
                comps = [f"{k + 1}" for k in range(K)]
                encoders = ["exact"] * K + ["NSA-M(l)"] * K
                self.resp_bars.update(list(zip(comps * 2, encoders)), np.concatenate([cv["exact"], cv["nsa"]]),
                                      [ENCODER_COLORS[e] for e in encoders], legend=encoders,
                                      factors=[(c, e) for c in comps for e in ENCODER_COLORS])
                self._comp_caption.object = " · ".join(
                    f"component {k + 1}: r = {cv['exact'][k]:.3f} (exact), {cv['nsa'][k]:.3f} (NSA-M)"
                    for k in range(K))
            self._grid.visible = self.grid
            if self.grid:
                if not hasattr(self, "grid_in"):
                    self._build_grid()
                rows = (i + np.arange(16)) % m.n_eval
                self.grid_in.update(mosaic(np.where(miss[rows], np.nan, X[rows]), (h, w), 4, gap=0.15))
                self.grid_out.update(mosaic(R[self.grid_method][rows], (h, w), 4, gap=0.15))
                mse = np.nanmean(errs[self.grid_method][rows]) if np.isfinite(errs[self.grid_method][rows]).any() \
                    else np.nan
                self._grid_title.object = (f"**Grid**: test images {rows[0]}–{rows[-1]} (wrapping), "
                                           f"{METHOD_LABELS[self.grid_method]}, mean MSE on missing pixels {_fmt(mse)}")
        push(*self._figures())
