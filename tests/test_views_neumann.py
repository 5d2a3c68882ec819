"""Headless tests of the Neumann-convergence page: histograms, decay, error curve and the NSA < exact window."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import panel as pn
import pytest
from bokeh.document import Document
from bokeh.models import GlyphRenderer, Legend, Span
from bokeh.plotting import figure

from explorer.ui.pages.neumann import (
    ORACLE_LABEL,
    NeumannView,
    create_model,
    decay_frame,
    error_frame,
    padded_range,
    rho_histograms,
    trace_columns,
)
from explorer.ui.state.fa_model import MASK_TYPES

APPS = Path(__file__).resolve().parents[1] / "apps"


@pytest.fixture
def view():
    return NeumannView(model=create_model(n_eval=30))


def _column(source, name) -> np.ndarray:
    return np.asarray(source.data[name])


def test_rho_histograms_count_every_image_per_mask_type(view):
    assert pn.panel(view).get_root(Document()) is not None
    m = view.model
    data = view.frames["rho"]
    rho = m.rho_by_mask()
    for kind in MASK_TYPES:
        assert data["counts"][kind].sum() == m.n_eval
        assert np.histogram(rho[kind], data["edges"])[0].tolist() == data["counts"][kind].tolist()
        np.testing.assert_array_equal(_column(view.rho_source, kind), data["counts"][kind])  # what the figure shows
    assert data["edges"][-1] <= 1.0
    np.testing.assert_array_equal(_column(view.rho_source, "left"), data["edges"][:-1])
    np.testing.assert_array_equal(_column(view.rho_source, "right"), data["edges"][1:])
    assert rho_histograms(rho)["edges"].tolist() == data["edges"].tolist()  # the pure builder gives the same bins
    bars = [r for r in view.figures["rho"].renderers if isinstance(r, GlyphRenderer)]
    assert [r.glyph.top for r in bars] == list(MASK_TYPES)  # one histogram per mask type
    m.mask = "half"  # every mask type is drawn already: the histograms are not recomputed
    assert view.frames["rho"] is data
    m.mask_seed = 3  # new random masks: new histograms
    assert view.frames["rho"] is not data
    for kind in MASK_TYPES:
        np.testing.assert_array_equal(_column(view.rho_source, kind), view.frames["rho"]["counts"][kind])


def test_at_l_zero_the_page_says_nsa_has_not_beaten_exact(view):
    assert view.model.iteration == 0
    assert "NSA never beats the exact solution" in view._window.object
    assert view._window.alert_type == "warning"
    assert len(view.frames["error"]["windows"]["l0"]) == 0
    assert len(view.window_source.data["l0"]) == 0


def test_stepping_extends_the_error_curve_and_shades_the_window(view):
    m = view.model
    for _ in range(3):
        view.player._step_button.clicks += 1
    view._l_slider.value = 40
    data = view.frames["error"]
    assert list(data["trace_l"]) == list(range(41)) and data["current"] == 40
    np.testing.assert_allclose(data["nsa"], [t["nsa"] for t in m.trace])
    assert data["levels"] == {k: m.errors[k] for k in ("exact", "sca", "fca", "mean")}
    windows = m.nsa_window()
    assert windows and "NSA beats the exact solution" in view._window.object
    spans = data["windows"]
    assert spans["l0"].tolist() == [a - 0.5 for a, _ in windows]
    assert spans["l1"].tolist() == [b + 0.5 for _, b in windows]
    best = min(m.trace, key=lambda t: t["nsa"])
    assert f"best l = {best['n_terms']}" in view._window.object
    # the figure shows the frame: the NSA curve of every visited l, the shaded windows, the levels, the current l
    np.testing.assert_array_equal(_column(view.trace_source, "l"), data["trace_l"])
    np.testing.assert_allclose(_column(view.trace_source, "nsa"), data["nsa"])
    assert _column(view.window_source, "l0").tolist() == spans["l0"].tolist()
    assert _column(view.window_source, "l1").tolist() == spans["l1"].tolist()
    for k, v in data["levels"].items():
        assert _column(view.level_source, k).tolist() == [v, v]
    assert _column(view.level_source, "l").tolist() == [0, data["l_max"]]
    assert view.error_span.location == 40
    again = error_frame(trace_columns(m.trace), windows, data["levels"], False, m.max_terms, m.iteration)
    np.testing.assert_array_equal(again["nsa"], data["nsa"])  # the pure builder, called directly


def test_decay_plot_data(view):
    view._l_slider.value = 10
    m = view.model
    data = view.frames["decay"]
    d = m.decay()
    np.testing.assert_array_equal(data["mean_rho_l"], d["mean_rho_l"])
    assert len(data["l"]) == m.max_terms + 1 and data["current"] == 10
    np.testing.assert_allclose(data["bound"], [t["bound"] for t in m.trace])
    assert np.all(np.diff(data["bound"]) < 0)  # the a-priori bound shrinks with every term
    lines = [r for r in view.figures["decay"].renderers if isinstance(r, GlyphRenderer)]
    spans = [a for a in view.figures["decay"].center if isinstance(a, Span)]
    assert len(lines) == 5 and len(spans) == 1 and spans[0].location == 10  # five curves and the current l
    for k in ("mean_rho_l", "rho_mean_l", "worst"):
        np.testing.assert_array_equal(_column(view.decay_source, k), d[k])
    np.testing.assert_allclose(_column(view.trace_source, "bound"), data["bound"])
    np.testing.assert_allclose(_column(view.trace_source, "residual"), data["residual"])
    assert decay_frame(d, trace_columns(m.trace), 10)["ylim"] == data["ylim"]


def test_a_frame_only_changes_data_never_the_documents_models(view):
    """Issue 19: figures are built once; Step, l, a new mask and a mixture assign source data and scalars only."""
    doc = Document()
    doc.add_root(pn.panel(view).get_root(doc))
    before = {m.id for m in doc.models}
    figures = list(view.figures.values())
    in_figures = {m.id for f in figures for m in f.references()}
    sources = (view.rho_source, view.trace_source, view.decay_source, view.window_source, view.level_source)
    for _ in range(4):
        view.player.step()
    view._l_slider.value = 30
    view.player.reset()
    assert {m.id for m in doc.models} == before
    # a new mask shows other widgets in the sidebar, but the figures keep every model they had
    view.model.mask = "random_pixels"
    view.model.n_components = 2
    view.player.step()
    assert {m.id for f in figures for m in f.references()} == in_figures
    assert in_figures <= {m.id for m in doc.models}
    assert (view.rho_source, view.trace_source, view.decay_source, view.window_source, view.level_source) == sources
    # the figures show the last frame's numbers
    m = view.model
    error, decay = view.frames["error"], view.frames["decay"]
    assert error["current"] == decay["current"] == m.iteration == 1
    np.testing.assert_array_equal(_column(view.trace_source, "l"), [t["n_terms"] for t in m.trace])
    np.testing.assert_allclose(_column(view.trace_source, "nsa"), error["nsa"])
    np.testing.assert_allclose(_column(view.trace_source, "oracle"), error["oracle"])
    np.testing.assert_array_equal(_column(view.decay_source, "worst"), decay["worst"])
    assert view.error_span.location == view.decay_span.location == m.iteration
    assert (view.figures["error"].y_range.start, view.figures["error"].y_range.end) == error["ylim"]
    assert (view.figures["decay"].y_range.start, view.figures["decay"].y_range.end) == decay["ylim"]


def test_stepping_streams_only_the_new_l(view):
    """A Step sends the new l's row of the trace, not the curve again; the decay factors are not re-sent."""
    from bokeh.document.events import ColumnDataChangedEvent, ColumnsStreamedEvent

    doc = Document()
    doc.add_root(pn.panel(view).get_root(doc))
    events = []
    doc.on_change(lambda event: events.append(event))
    view.player.step()
    view.player.step()
    streamed = [e for e in events if isinstance(e, ColumnsStreamedEvent)]
    assert [e.model for e in streamed] == [view.trace_source] * 2
    assert [list(e.data["l"]) for e in streamed] == [[1], [2]]
    resent = (view.trace_source, view.decay_source, view.rho_source, view.level_source)
    assert not [e for e in events if isinstance(e, ColumnDataChangedEvent) and e.model in resent]


def test_padded_range():
    assert padded_range([1.0, 2.0]) == pytest.approx((0.9, 2.1))
    lo, hi = padded_range([1e-4, 1.0, 0.0, np.nan], log=True)  # zero and NaN left out; 10 % of 4 decades
    assert lo == pytest.approx(10 ** -4.4) and hi == pytest.approx(10 ** 0.4)
    assert padded_range([np.nan]) is None
    lo, hi = padded_range([2.0, 2.0])
    assert lo < 2.0 < hi


def test_mask_select_and_mixture_oracle(view):
    m = view.model
    mask = next(w for w in view.sidebar.select(pn.widgets.Select) if w.label == "Mask type")
    assert "brush (paint)" not in mask.options
    mask.value = "random_pixels"
    assert m.mask == "random_pixels" and "mask random pixels" in view._info.object
    assert len(view.frames["error"]["oracle"]) == 0
    m.n_components = 2
    view._l_slider.value = 5
    data = view.frames["error"]
    assert len(data["oracle"]) == 6 and np.all(np.asarray(data["oracle"]) <= np.asarray(data["nsa"]) + 1e-12)
    np.testing.assert_allclose(_column(view.trace_source, "oracle"), data["oracle"])
    assert "s = " in view._info.object and view._info.object.count(",") >= 1  # one scale per component


def _figures(view) -> dict:
    """The page's Bokeh figures by the start of their title (rendered into a server-less document)."""
    root = pn.panel(view).get_root(Document())
    return {f.title.text.split(" ")[0].rstrip(":"): f for f in root.select({"type": figure})}


def _legend_labels(fig) -> list[str]:
    """The labels the legends show (an item hidden with its renderer is not shown)."""
    return [item.label.value for legend in fig.select({"type": Legend}) for item in legend.items if item.visible]


def _inside(fig, values) -> bool:
    return fig.y_range.start <= float(np.min(values)) and float(np.max(values)) <= fig.y_range.end


def test_error_plot_y_range_follows_the_curve_and_the_model():
    # the page's default evaluation set: at l = 0 the frame ends above the minimum NSA reaches at l = 9
    view = NeumannView(model=create_model())
    fig = _figures(view)["Error"]
    for l in (1, 5, 9, 20, 40):
        view._l_slider.value = l
        data = view.frames["error"]
        assert _inside(fig, [*data["nsa"], *data["levels"].values()]), (l, fig.y_range.start, min(data["nsa"]))
    view.model.n_components = 2  # a mixture: lower errors, and the oracle curve below NSA
    data = view.frames["error"]
    assert len(data["oracle"]) == 41
    assert _inside(fig, [*data["nsa"], *data["oracle"], *data["levels"].values()])


def test_decay_and_rho_ranges_follow_the_data(view):
    figs = _figures(view)
    view._l_slider.value = 30
    data = view.frames["decay"]
    assert _inside(figs["Convergence"], [*data["bound"], *data["residual"], *data["worst"]])
    view.model.n_factors = 20  # a new fit: new rho histograms
    counts = view.frames["rho"]["counts"]
    assert figs["ρ(I"].y_range.end >= max(int(c.max()) for c in counts.values())


def test_oracle_legend_entry_only_for_mixtures(view):
    figs = _figures(view)
    fig = figs["Error"]
    oracle = ORACLE_LABEL
    assert "NSA(l)" in _legend_labels(fig) and oracle not in _legend_labels(fig)  # K = 1: nothing drawn, no entry
    assert not view.oracle_line.visible
    view._l_slider.value = 5
    assert oracle not in _legend_labels(fig)
    view.model.n_components = 2
    assert oracle in _legend_labels(fig) and view.oracle_line.visible
    view.model.n_components = 1
    assert oracle not in _legend_labels(fig) and not view.oracle_line.visible
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
