"""Headless tests of the Neumann-convergence page: histograms, decay, error curve and the NSA < exact window."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import holoviews as hv
import numpy as np
import panel as pn
import pytest
from bokeh.document import Document
from bokeh.models import Legend
from bokeh.plotting import figure

from explorer.ui.state.fa_model import MASK_TYPES
from explorer.ui.pages.neumann import (
    NeumannView,
    create_model,
    decay_overlay,
    error_overlay,
    rho_overlay,
)

APPS = Path(__file__).resolve().parents[1] / "apps"


@pytest.fixture
def view():
    return NeumannView(model=create_model(n_eval=30))


def test_rho_histograms_count_every_image_per_mask_type(view):
    assert pn.panel(view).get_root(Document()) is not None
    m = view.model
    data = view.pipes["rho"].data
    rho = m.rho_by_mask()
    for kind in MASK_TYPES:
        assert data["counts"][kind].sum() == m.n_eval
        assert np.histogram(rho[kind], data["edges"])[0].tolist() == data["counts"][kind].tolist()
    assert data["edges"][-1] <= 1.0
    overlay = rho_overlay(data)
    assert isinstance(overlay, hv.Overlay) and len(overlay) == len(MASK_TYPES)


def test_at_l_zero_the_page_says_nsa_has_not_beaten_exact(view):
    assert view.model.iteration == 0
    assert "NSA never beats the exact solution" in view._window.object
    assert view._window.alert_type == "warning"
    assert len(view.pipes["error"].data["windows"]) == 0


def test_stepping_extends_the_error_curve_and_shades_the_window(view):
    m = view.model
    for _ in range(3):
        view.player._step_button.clicks += 1
    view._l_slider.value = 40
    data = view.pipes["error"].data
    assert list(data["trace_l"]) == list(range(41)) and data["current"] == 40
    np.testing.assert_allclose(data["nsa"], [t["nsa"] for t in m.trace])
    assert data["levels"] == {k: m.errors[k] for k in ("exact", "sca", "fca", "mean")}
    windows = m.nsa_window()
    assert windows and "NSA beats the exact solution" in view._window.object
    spans = data["windows"]
    assert spans.l.tolist() == [a - 0.5 for a, _ in windows] and spans.l1.tolist() == [b + 0.5 for _, b in windows]
    best = min(m.trace, key=lambda t: t["nsa"])
    assert f"best l = {best['n_terms']}" in view._window.object
    assert isinstance(error_overlay(data), hv.Overlay)


def test_decay_plot_data(view):
    view._l_slider.value = 10
    m = view.model
    data = view.pipes["decay"].data
    d = m.decay()
    np.testing.assert_array_equal(data["mean_rho_l"], d["mean_rho_l"])
    assert len(data["l"]) == m.max_terms + 1 and data["current"] == 10
    np.testing.assert_allclose(data["bound"], [t["bound"] for t in m.trace])
    assert np.all(np.diff(data["bound"]) < 0)  # the a-priori bound shrinks with every term
    assert len(decay_overlay(data)) == 6


def test_mask_select_and_mixture_oracle(view):
    m = view.model
    mask = next(w for w in view.sidebar.select(pn.widgets.Select) if w.label == "Mask type")
    assert "brush (paint)" not in mask.options
    mask.value = "random_pixels"
    assert m.mask == "random_pixels" and "mask random pixels" in view._info.object
    assert len(view.pipes["error"].data["oracle"]) == 0
    m.n_components = 2
    view._l_slider.value = 5
    data = view.pipes["error"].data
    assert len(data["oracle"]) == 6 and np.all(np.asarray(data["oracle"]) <= np.asarray(data["nsa"]) + 1e-12)
    assert "s = " in view._info.object and view._info.object.count(",") >= 1  # one scale per component


def _figures(view) -> dict:
    """The page's Bokeh figures by the start of their title (rendered into a server-less document)."""
    root = pn.panel(view).get_root(Document())
    return {f.title.text.split(" ")[0].rstrip(":"): f for f in root.select({"type": figure})}


def _legend_labels(fig) -> list[str]:
    return [item.label.value for legend in fig.select({"type": Legend}) for item in legend.items]


def _inside(fig, values) -> bool:
    return fig.y_range.start <= float(np.min(values)) and float(np.max(values)) <= fig.y_range.end


def test_error_plot_y_range_follows_the_curve_and_the_model():
    # the page's default evaluation set: at l = 0 the frame ends above the minimum NSA reaches at l = 9
    view = NeumannView(model=create_model())
    fig = _figures(view)["Error"]
    for l in (1, 5, 9, 20, 40):
        view._l_slider.value = l
        data = view.pipes["error"].data
        assert _inside(fig, [*data["nsa"], *data["levels"].values()]), (l, fig.y_range.start, min(data["nsa"]))
    view.model.n_components = 2  # a mixture: lower errors, and the oracle curve below NSA
    data = view.pipes["error"].data
    assert len(data["oracle"]) == 41
    assert _inside(fig, [*data["nsa"], *data["oracle"], *data["levels"].values()])


def test_decay_and_rho_ranges_follow_the_data(view):
    figs = _figures(view)
    view._l_slider.value = 30
    data = view.pipes["decay"].data
    assert _inside(figs["Convergence"], [*data["bound"], *data["residual"], *data["worst"]])
    view.model.n_factors = 20  # a new fit: new rho histograms
    counts = view.pipes["rho"].data["counts"]
    assert figs["ρ(I"].y_range.end >= max(int(c.max()) for c in counts.values())


def test_oracle_legend_entry_only_for_mixtures(view):
    figs = _figures(view)
    fig = figs["Error"]
    oracle = "NSA-M oracle (min over components)"
    assert "NSA(l)" in _legend_labels(fig) and oracle not in _legend_labels(fig)  # K = 1: nothing drawn, no entry
    view._l_slider.value = 5
    assert oracle not in _legend_labels(fig)
    view.model.n_components = 2
    assert oracle in _legend_labels(fig)
    view.model.n_components = 1
    assert oracle not in _legend_labels(fig)
    # the convergence legend sits outside the frame, where it cannot cover the residual curve, and below it,
    # where it does not squeeze the frame (right of it the frame was ~280 px, the toolbar over the title)
    decay = figs["Convergence"]
    assert any(isinstance(m, Legend) for m in decay.below)
    assert not any(isinstance(m, Legend) for m in decay.center)


def test_errors_are_shown(view):
    view.model.n_factors = 64
    assert view._alert.visible and not view._window.visible


def test_the_app_module_builds_the_page():
    spec = importlib.util.spec_from_file_location("neumann_app", APPS / "neumann.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    v = module.create_view(n_eval=10)
    assert isinstance(v, NeumannView) and v.settings()["mask"] == "quarter"
