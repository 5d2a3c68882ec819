"""Headless tests of the responsibilities page: selected image, shift over images, accuracy."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import panel as pn
import pytest
from bokeh.document import Document
from bokeh.models import GlyphRenderer

from explorer.ui.pages.responsibilities import (
    SHIFT_BINS,
    ResponsibilitiesView,
    accuracy_frame,
    create_model,
    selected_frame,
    shift_frame,
    shift_histogram,
)

APPS = Path(__file__).resolve().parents[1] / "apps"


@pytest.fixture
def view():
    return ResponsibilitiesView(model=create_model(n_eval=40))


def test_selected_image_bars_and_caption(view):
    assert pn.panel(view).get_root(Document()) is not None
    m = view.model
    m.image_index = 4
    resp = m.responsibilities()
    sel = view.selected_bars.source.data
    for condition in ("complete image", "masked (exact)", "masked (NSA-M, l terms)"):
        np.testing.assert_allclose(sum(v for v, (c, _) in zip(sel["value"], sel["x"]) if c == condition), 1.0)
    np.testing.assert_allclose(sel["value"][:2], resp["complete"][4])
    assert sel["legend"][:2] == [f"{k + 1}: {d}s" for k, d in enumerate(resp["cluster_label"])]
    assert f"Image 4 (digit {m.labels[4]})" in view._caption.object
    masked = view.images["masked"].image
    np.testing.assert_array_equal(view.images["masked"].source.data["image"][0][::-1], masked)
    assert np.isnan(masked[:, :4]).all()  # the left half
    assert view.images["means"].image.shape == (8, 17)


def test_shift_and_accuracy_over_the_test_images(view):
    m = view.model
    resp, labels = m.responsibilities(), m.labels
    data = view.shift.frame
    pts = data["points"]
    assert len(pts) == m.n_eval and (pts.before >= 0.5).all()  # the arg-max of two components
    comp = resp["complete"].argmax(axis=1)
    np.testing.assert_allclose(pts.after, resp["exact"][np.arange(m.n_eval), comp])
    # the histogram drawn: every test image counted once, in the bin of its responsibility after masking
    bars = view.shift.source.data
    heights = np.asarray(bars["top"]) - np.asarray(bars["bottom"])
    assert heights.sum() == m.n_eval
    edges = np.linspace(0, 1, SHIFT_BINS + 1)
    for digit in set(pts.digit):
        drawn = [(l, h) for l, h, d in zip(bars["left"], heights, bars["digit"]) if d == digit]
        counts = np.histogram(pts.after[pts.digit == digit], edges)[0]
        assert drawn == [(edges[b], counts[b]) for b in np.flatnonzero(counts)]
    assert view.shift.selected.location == pts.after[m.image_index]
    acc = view.accuracy_bars.values()
    expected = np.mean(resp["cluster_label"][resp["exact"].argmax(axis=1)] == labels)
    assert np.isclose(acc[1], expected)
    flips = np.mean(comp != resp["exact"].argmax(axis=1))
    assert f"**{flips:.0%}**" in view._info.object


def _missing_fields(root) -> list[str]:
    """Glyph properties mapped to a column their data source does not have (BokehJS warns "nonexistent field")."""
    found = []
    for r in root.select({"type": GlyphRenderer}):
        columns = r.data_source.data
        for glyph in (r.glyph, r.selection_glyph, r.nonselection_glyph, r.hover_glyph, r.muted_glyph):
            if glyph is None or isinstance(glyph, str):
                continue
            for name, value in glyph.properties_with_values(include_defaults=True).items():
                field = value.get("field") if isinstance(value, dict) else getattr(value, "field", None)
                if isinstance(field, str) and field not in columns:
                    found.append(f"{type(glyph).__name__}.{name} -> {field!r}")
    return found


def test_no_glyph_maps_a_nonexistent_field(view):
    root = pn.panel(view).get_root(Document())
    assert _missing_fields(root) == []
    view.model.image_index = 3
    view.player._step_button.clicks += 1
    assert _missing_fields(root) == []


def test_frames_on_a_hand_made_case():
    resp = {"complete": np.array([[0.9, 0.1], [0.2, 0.8]]), "exact": np.array([[0.4, 0.6], [0.3, 0.7]]),
            "nsa": np.array([[0.5, 0.5], [0.3, 0.7]]), "cluster_label": np.array([1, 7])}
    labels = np.array([1, 7])
    s = shift_frame(resp, labels, 1)
    assert s["points"].before.tolist() == [0.9, 0.8] and s["points"].after.tolist() == [0.4, 0.7]
    assert s["selected"].digit.tolist() == ["7"]
    acc = accuracy_frame(resp, labels)
    assert acc.accuracy.tolist() == [1.0, 0.5, 1.0]  # nsa ties go to the first component (digit 1)


def test_step_moves_nsa_responsibilities_toward_exact(view):
    m = view.model
    m.image_index = 0
    view.player._step_button.clicks += 1
    assert m.iteration == 1
    view._l_slider.value = 400
    r = m.responsibilities()
    np.testing.assert_allclose(r["nsa"], r["exact"], atol=1e-4)


def test_one_component_is_explained(view):
    view.model.n_components = 1
    assert view._alert.visible and "need a mixture" in view._alert.object
    view.model.n_components = 2
    assert not view._alert.visible


def test_mask_select(view):
    mask = next(w for w in view.sidebar.select(pn.widgets.Select) if w.label == "Mask type")
    mask.value = "quarter"
    assert view.model.mask == "quarter"


def test_the_app_module_builds_the_page():
    spec = importlib.util.spec_from_file_location("responsibilities_app", APPS / "responsibilities.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    v = module.create_view(n_eval=10)
    assert isinstance(v, ResponsibilitiesView) and v.model.n_components == 2


def test_hand_made_histogram_and_selected_bars():
    points = shift_frame({"complete": np.array([[0.9, 0.1], [0.2, 0.8], [0.7, 0.3]]),
                          "exact": np.array([[0.42, 0.58], [0.28, 0.72], [0.97, 0.03]]),
                          "nsa": np.zeros((3, 2)), "cluster_label": np.array([1, 7])}, np.array([1, 7, 1]), 0)["points"]
    data, top = shift_histogram(points)
    # digit 1: 0.42 (bin 8) and 0.97 (bin 19); digit 7: 0.72 (bin 14); sorted digits, one colour each
    np.testing.assert_allclose(data["left"], [0.4, 0.95, 0.7])
    np.testing.assert_allclose(data["right"], [0.45, 1.0, 0.75])
    assert data["digit"] == ["1", "1", "7"]
    assert data["bottom"].tolist() == [0, 0, 0] and data["top"].tolist() == [1, 1, 1]
    assert data["color"][0] == data["color"][1] != data["color"][2]
    assert np.isclose(top, 1.08)
    resp = {"complete": np.array([[0.9, 0.1]]), "exact": np.array([[0.4, 0.6]]), "nsa": np.array([[0.5, 0.5]]),
            "cluster_label": np.array([3, 8])}
    bars = selected_frame(resp, 0)
    assert bars["x"][:2] == [("complete image", "1: 3s"), ("complete image", "2: 8s")]
    assert bars["values"].tolist() == [0.9, 0.1, 0.4, 0.6, 0.5, 0.5] and bars["legend"] == ["1: 3s", "2: 8s"] * 3


def test_a_frame_only_changes_data_never_the_documents_models(view):
    """Issue 19: the figures are built once; Step, another image and l assign source data and scalars only."""
    doc = Document()
    doc.add_root(pn.panel(view).get_root(doc))
    before = {m.id for m in doc.models}
    sources = (view.selected_bars.source, view.shift.source, view.accuracy_bars.source)
    for _ in range(3):
        view.player.step()
    view.model.image_index = 5
    view._l_slider.value = 40
    view.player.step()
    assert {m.id for m in doc.models} == before
    assert (view.selected_bars.source, view.shift.source, view.accuracy_bars.source) == sources
    m = view.model
    resp = m.responsibilities()
    np.testing.assert_allclose(view.selected_bars.values(), selected_frame(resp, 5)["values"])
    np.testing.assert_allclose(view.accuracy_bars.values(), accuracy_frame(resp, m.labels).accuracy)
    assert view.shift.selected.location == shift_frame(resp, m.labels, 5)["points"].after[5]
    np.testing.assert_array_equal(view.images["original"].image.ravel(), m.truth[5].astype(np.float32))
    assert "NSA-M at l = 41" in view._info.object


def test_more_components_are_more_bars_of_the_same_figure(view):
    doc = Document()
    doc.add_root(pn.panel(view).get_root(doc))
    sources = view.selected_bars.source
    view.model.n_components = 3
    assert view.selected_bars.source is sources and len(sources.data["x"]) == 9
    assert len(set(sources.data["legend"])) == 3 and view.images["means"].image.shape == (8, 26)
