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
    ResponsibilitiesView,
    accuracy_frame,
    create_model,
    shift_frame,
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
    sel = view.pipes["selected"].data
    np.testing.assert_allclose(sel.groupby("condition").responsibility.sum(), 1.0)
    np.testing.assert_allclose(sel.responsibility[:2], resp["complete"][4])
    assert f"Image 4 (digit {m.labels[4]})" in view._caption.object
    assert np.isnan(view.pipes["masked"].data[:, :4]).all()  # the left half
    assert view.pipes["means"].data.shape == (8, 17)


def test_shift_and_accuracy_over_the_test_images(view):
    m = view.model
    resp, labels = m.responsibilities(), m.labels
    data = view.pipes["shift"].data
    pts = data["points"]
    assert len(pts) == m.n_eval and (pts.before >= 0.5).all()  # the arg-max of two components
    comp = resp["complete"].argmax(axis=1)
    np.testing.assert_allclose(pts.after, resp["exact"][np.arange(m.n_eval), comp])
    acc = view.pipes["accuracy"].data
    expected = np.mean(resp["cluster_label"][resp["exact"].argmax(axis=1)] == labels)
    assert np.isclose(acc.accuracy[1], expected)
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
