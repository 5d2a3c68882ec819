"""PerformanceView without a server (as in a notebook): Measure, the plots' frames, the table, the tree and a tap."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import panel as pn
from bokeh.document import Document

from explorer.ui.state.performance_model import PerformanceModel
from explorer.ui.pages.performance import SERIES, PerformanceView, path_markdown, tree_overlay

APPS = Path(__file__).resolve().parents[1] / "apps"


def _app():
    spec = importlib.util.spec_from_file_location("_perf_app", APPS / "performance.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_measure_fills_the_plots_and_the_table():
    view = _app().create_view(n_points=2, repeats=1)
    pn.panel(view).get_root(Document())  # the whole page serialises
    assert view.measure() and view.results is not None
    series = view.model.series()
    frame = view._pipes["timing"].data["series"]
    for key, *_ in series:
        assert len(frame[key]) == 2 and (frame[key]["ms"] > 0).all(), key
    for key in set(SERIES) - {k for k, *_ in series}:
        assert len(frame[key]) == 0
    theory = view._pipes["theory"].data["series"]
    assert all(len(theory[k]) == 2 for k in ("precision", "tree", "naive"))
    lo, hi = view._pipes["timing"].data["ylim"]
    assert lo < frame["precision"]["ms"].min() and frame["precision"]["ms"].max() < hi
    table = view._table.object
    assert list(table["x"]) == ["2", "36"] and "MST kernel (Delalleau et al.) (ms)" in table.columns
    assert view._status.object.startswith("Done: ") and not view._measure.disabled and view._stop.disabled


def test_bad_settings_are_said_escaped_and_nothing_runs():
    view = PerformanceView(model=PerformanceModel(kernels=[], em_step=False))
    assert not view.measure()
    assert view._alert.visible and "at least one kernel" in view._alert.object and view.results is None
    view.model.tree_side, view.model.tree_square = 4, 4
    assert view._tree_alert.visible and "smaller than the 4x4 image" in view._tree_alert.object


def test_a_tap_selects_the_nearest_node_and_shows_its_path():
    view = PerformanceView()
    nodes = view._tree_pipe.data["nodes"]
    target = nodes.iloc[-1]
    view._on_tap(x=float(target["x"]) + 0.2, y=float(target["y"]) - 0.2)
    assert view.model.node == int(target["node"])
    assert view._path.object == path_markdown(view.model) and "Path from the root" in view._path.object
    assert len(view._tree_pipe.data["path"]) == int(target["depth"])
    assert len(view._tree_pipe.data["pixels"]) == 9  # the 3x3 square of the selected pattern
    tree_overlay(view._tree_pipe.data)  # the frame draws
    view._on_tap(x=-5.0, y=-5.0)  # far from every node: nothing changes
    assert view.model.node == int(target["node"])
    # a smaller case: the selection that no longer exists is dropped
    view.model.tree_side = 5
    assert view.model.node == -1 and "Tap a node" in view._path.object
    view.model.colour_by = "from scratch"
    assert set(view._tree_pipe.data["nodes"]["colour"]) <= {"#e4572e", "#2f6fb3"}


def test_the_notebook_layout_keeps_measure_above_the_plots():
    view = PerformanceView()
    layout = view.__panel__()
    first = layout.objects[0]
    assert any(getattr(b, "label", None) == "Measure" for b in first.select(pn.widgets.Button))
    assert view.url_bindings()[0][0] is view.model and "node" in view.url_bindings()[0][1]
