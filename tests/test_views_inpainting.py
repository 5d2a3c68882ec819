"""Headless tests of the inpainting page: panels, brush, grid, mixture components, errors."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import panel as pn
import pytest
from bokeh.document import Document

from explorer.ui.pages.inpainting import PANELS, InpaintingView
from explorer.ui.plots.images import mosaic
from explorer.ui.state.fa_model import METHODS, FAModel

APPS = Path(__file__).resolve().parents[1] / "apps"


@pytest.fixture
def view():
    return InpaintingView(model=FAModel(n_eval=20, mask="quarter"))


def _shown(view, panel) -> np.ndarray:
    """The image panel ``panel`` draws (float32, row 0 on top), checked against what its Bokeh source holds."""
    image_panel = view.panels[panel] if isinstance(panel, str) else panel
    sent = image_panel.source.data["image"][0]
    np.testing.assert_array_equal(sent[::-1], image_panel.image)  # Bokeh draws row 0 at the bottom
    assert sent.dtype == np.float32
    return image_panel.image


def _f32(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float32)


def _widget(view, label):
    found = [w for w in view.sidebar.select(pn.widgets.Widget) if getattr(w, "label", None) == label]
    assert found, label
    return found[0]


def test_panels_show_the_selected_image_and_its_errors(view):
    assert pn.panel(view).get_root(Document()) is not None
    m = view.model
    i = m.image_index = 3
    h, w = m.shape
    masked = _shown(view, "masked")
    assert np.array_equal(np.isnan(masked).ravel(), m.missing[i])
    R, errs = m.reconstructions(), m.row_errors()
    for k in METHODS:
        np.testing.assert_array_equal(_shown(view, k), _f32(R[k][i].reshape(h, w)))
        assert f"{errs[k][i]:.4f}" in view._errors[k].object
    assert f"{int(m.missing[i].sum())} of 64 missing" == view._errors["masked"].object
    assert "at l = 0" in view._info.object


def test_step_button_and_l_slider_redraw_nsa(view):
    m = view.model
    before = _shown(view, "nsa").copy()
    view.player._step_button.clicks += 1
    assert m.iteration == 1 and "at l = 1" in view._info.object
    assert not np.array_equal(before, _shown(view, "nsa"))
    view._l_slider.value = 25
    assert m.iteration == 25
    np.testing.assert_array_equal(_shown(view, "nsa").ravel(), _f32(m.reconstructions()["nsa"][m.image_index]))


def test_mask_select_changes_the_mask(view):
    _widget(view, "Mask type").value = "half"
    assert view.model.mask == "half"
    assert np.isnan(_shown(view, "masked")[:4]).all() and not np.isnan(_shown(view, "masked")[4:]).any()
    assert _widget(view, "Half removed").visible
    assert not _widget(view, "Missing fraction").visible


def test_a_tap_on_the_masked_panel_paints_the_pixel_under_it(view):
    m = view.model
    m.mask = "half"
    view._on_tap(x=5.5, y=1.2)  # column 5, row 8 - 1.2 -> 6
    assert m.mask == "brush"
    assert m.missing[m.image_index].reshape(8, 8)[6, 5]
    assert np.isnan(_shown(view, "masked")[6, 5])
    view.brush_size = 3
    view._on_tap(x=1.5, y=6.5)  # row 1, column 1 (missing: top half): the 3x3 block around it is shown again
    assert not m.missing[0].reshape(8, 8)[0:3, 0:3].any() and m.missing[0].reshape(8, 8)[0:3, 3:].all()
    view._on_tap(x=None, y=None)
    view._on_tap(x=50.0, y=3.0)  # outside: ignored


def test_grid_mode_tiles_sixteen_images(view):
    m = view.model
    view.grid = True
    view.grid_method = "exact"
    assert view._grid.visible
    out = _shown(view, view.grid_out)
    assert out.shape == (4 * 9 - 1, 4 * 9 - 1)
    R = m.reconstructions()["exact"]
    np.testing.assert_array_equal(out[9:17, 18:26], _f32(R[6].reshape(8, 8)))  # tile (1, 2) = image 6
    m.image_index = 10  # wraps around the 20 test images
    np.testing.assert_array_equal(_shown(view, view.grid_out)[27:35, 27:35], _f32(R[(10 + 15) % 20].reshape(8, 8)))


def test_mosaic_layout():
    imgs = np.arange(3 * 4, dtype=float).reshape(3, 4)
    out = mosaic(imgs, (2, 2), 2, gap=-1.0)
    assert out.shape == (5, 5)
    np.testing.assert_array_equal(out[3:5, 0:2], [[8, 9], [10, 11]])
    assert (out[2] == -1).all() and (out[3:, 3:] == -1).all()


def test_mixture_components_and_responsibilities(view):
    m = view.model
    assert not view._mixture.visible
    _widget(view, "Components (1 = no mixture)").value = 2
    assert m.is_mixture and view._mixture.visible
    cv = m.component_view(m.image_index)
    resp = view.resp_bars.source.data
    for encoder in ("exact", "NSA-M(l)"):
        np.testing.assert_allclose(sum(v for v, e in zip(resp["value"], resp["legend"]) if e == encoder), 1.0)
    np.testing.assert_allclose(resp["value"][:2], cv["exact"])
    assert _shown(view, view.components).shape == (8, 17)
    assert "component 2: r =" in view._comp_caption.object


def test_fit_errors_are_shown_in_the_alert(view):
    view.model.n_factors = 64
    assert view._alert.visible and "Use fewer factors" in view._alert.object
    view.model.n_factors = 8
    assert not view._alert.visible and "q = 8" in view._info.object


def test_the_app_module_builds_the_page():
    spec = importlib.util.spec_from_file_location("inpainting_app", APPS / "inpainting.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    v = module.create_view(n_eval=10)
    assert isinstance(v, InpaintingView) and v.sidebar is not None and v.main is not None
    assert v.settings()["mask"] == "quarter"


def test_ink_mode_draws_on_a_blank_canvas_that_is_inpainted(view):
    m = view.model
    m.mask = "half"
    _widget(view, "Clear drawing").clicks += 1
    assert m.source == "draw" and not np.any(_shown(view, "original"))
    assert view._errors["original"].object == "drawing, 0 inked"
    before = _shown(view, "exact").copy()
    view._on_ink_tap(x=3.5, y=2.5)  # mask mode: a click on the canvas does nothing
    assert not np.any(_shown(view, "original"))
    view.paint_mode = "ink"
    view._on_ink_tap(x=3.5, y=2.5)  # row 8 - 2.5 -> 5, column 3
    view._on_tap(x=5.5, y=1.5)  # the masked panel inks too in ink mode: row 6, column 5
    assert m.mask == "half"  # ink does not touch the mask
    orig = _shown(view, "original")
    assert orig[5, 3] == 1.0 and orig[6, 5] == 1.0 and orig.sum() == 2
    assert _shown(view, "masked")[5, 3] == 1.0 and np.isnan(_shown(view, "masked")[:4]).all()
    assert not np.allclose(_shown(view, "exact")[:4], before[:4])  # the missing half follows the ink
    np.testing.assert_array_equal(_shown(view, "exact")[4:], orig[4:])
    view._on_drag(dx=0.5, dy=0.5, stroke_count=0)  # a drag inks (never toggles) the pixels it crosses
    view._on_drag(dx=0.6, dy=0.4, stroke_count=0)
    view._on_drag(dx=4.5, dy=0.5, stroke_count=0)  # sparse events: joined by a line of pixels
    assert _shown(view, "original")[7, :5].tolist() == [1.0] * 5
    view._on_drag(dx=7.5, dy=7.5, stroke_count=1)  # a new stroke starts on its own
    assert _shown(view, "original")[0].tolist() == [0.0] * 7 + [1.0]
    assert view._errors["original"].object == "drawing, 8 inked"
    _widget(view, "Clear drawing").clicks += 1
    assert not np.any(_shown(view, "original"))


def test_photo_patches_from_the_images_select(view):
    _widget(view, "Images").value = "photo_patches"
    m = view.model
    assert m.shape == (16, 16) and _shown(view, "original").shape == (16, 16)
    assert view._errors["masked"].object.endswith("of 256 missing") and not view._alert.visible
    assert "q = 30" in view._info.object


def _event(image_panel, kind, x, y):
    """A Bokeh UI event on an image panel's figure, as the browser sends it."""
    fig = image_panel.figure
    fig._trigger_event(kind(fig, x=x, y=y))


def test_a_frame_only_changes_data_never_the_documents_models(view):
    """Issue 19: the figures are built once; Step, l, another image and the brush assign source data only."""
    from bokeh.events import Tap

    doc = Document()
    doc.add_root(pn.panel(view).get_root(doc))
    before = {m.id for m in doc.models}
    sources = {p: view.panels[p].source for p in PANELS}
    for _ in range(4):
        view.player.step()
    view._l_slider.value = 30
    view.model.image_index = 7
    _event(view.panels["masked"], Tap, 2.5, 6.5)  # a click paints the mask
    view.player.step()
    assert view.model.mask == "brush" and view.model.iteration == 31
    assert {m.id for m in doc.models} == before
    assert {p: view.panels[p].source for p in PANELS} == sources
    m, i = view.model, view.model.image_index
    R = m.reconstructions()
    for k in METHODS:  # the figures show the last frame's numbers
        np.testing.assert_array_equal(_shown(view, k).ravel(), _f32(R[k][i]))
    assert np.array_equal(np.isnan(_shown(view, "masked")).ravel(), m.missing[i])


def test_an_unchanged_image_is_not_sent_again(view):
    """A Step changes the NSA(l) image only: the other panels' sources are not assigned again."""
    sent = {p: view.panels[p].source.data["image"][0] for p in PANELS}
    view.player.step()
    after = {p: view.panels[p].source.data["image"][0] for p in PANELS}
    assert [p for p in PANELS if after[p] is not sent[p]] == ["nsa"]


def test_the_mixture_and_grid_figures_are_built_once_when_first_shown(view):
    doc = Document()
    doc.add_root(pn.panel(view).get_root(doc))
    assert not hasattr(view, "components") and not hasattr(view, "grid_in")  # nothing built before it is shown
    view.grid = True
    view.model.n_components = 2
    figures = (view.components, view.resp_bars, view.grid_in, view.grid_out)
    models = {m.id for m in doc.models}
    view.player.step()
    view.grid = False
    view.model.n_components = 1
    view.model.n_components = 2
    view.grid = True
    view.player.step()
    assert (view.components, view.resp_bars, view.grid_in, view.grid_out) == figures
    assert {m.id for m in doc.models} == models
    cv = view.model.component_view(view.model.image_index)
    np.testing.assert_allclose(view.resp_bars.values(), np.concatenate([cv["exact"], cv["nsa"]]))


def test_clicks_and_drags_arrive_as_bokeh_events(view):
    from bokeh.events import Pan, PanEnd, PanStart, Tap

    m = view.model
    m.mask = "half"
    _event(view.panels["masked"], Tap, 5.5, 1.2)  # the brush: row 6, column 5
    assert m.mask == "brush" and m.missing[m.image_index].reshape(8, 8)[6, 5]
    view.paint_mode = "ink"
    _event(view.panels["original"], Tap, 3.5, 2.5)  # ink: row 5, column 3
    assert m.source == "draw" and _shown(view, "original")[5, 3] == 1.0
    original = view.panels["original"]
    _event(original, PanStart, 0.5, 0.5)  # a stroke along the bottom row
    _event(original, Pan, 2.5, 0.5)
    _event(original, Pan, 4.5, 0.6)
    _event(original, PanEnd, 4.5, 0.6)
    assert _shown(view, "original")[7, :5].tolist() == [1.0] * 5
    _event(original, PanStart, 7.5, 7.5)  # a new stroke does not join the last one
    _event(original, PanEnd, 7.5, 7.5)
    assert _shown(view, "original")[0].tolist() == [0.0] * 7 + [1.0]
    assert view._errors["original"].object == "drawing, 7 inked"
