"""PerformanceView without a server (as in a notebook): Measure, the plots' frames, the table, the tree and a tap."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import panel as pn
from bokeh.document import Document

from explorer.ui.pages.performance import (
    SERIES,
    PerformanceView,
    path_markdown,
    tree_frame,
)
from explorer.ui.state.performance_model import PerformanceModel

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
    frame = view._timing.frame["series"]
    sources = view._timing.sources
    for key, *_ in series:
        assert len(frame[key]) == 2 and (frame[key]["ms"] > 0).all(), key
        np.testing.assert_array_equal(sources[key].data["ms"], frame[key]["ms"])  # the figure shows the frame
    for key in set(SERIES) - {k for k, *_ in series}:
        assert len(frame[key]) == 0 and len(sources[key].data["ms"]) == 0
    assert sorted(view._timing.shown()) == sorted(k for k, *_ in series)
    theory = view._theory.frame["series"]
    assert all(len(theory[k]) == 2 for k in ("precision", "tree", "naive"))
    assert sorted(view._theory.shown()) == ["naive", "precision", "tree"]
    lo, hi = view._timing.frame["ylim"]
    assert lo < frame["precision"]["ms"].min() and frame["precision"]["ms"].max() < hi
    assert (view._timing.y_range.start, view._timing.y_range.end) == (lo, hi)
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
    nodes = view._tree.frame["nodes"]
    target = nodes.iloc[-1]
    view._on_tap(x=float(target["x"]) + 0.2, y=float(target["y"]) - 0.2)
    assert view.model.node == int(target["node"])
    assert view._path.object == path_markdown(view.model) and "Path from the root" in view._path.object
    assert len(view._tree.frame["path"]) == int(target["depth"])
    assert len(view._tree.frame["pixels"]) == 9  # the 3x3 square of the selected pattern
    # the figure draws the frame
    sources = view._tree.sources
    assert len(sources["path"].data["x0"]) == int(target["depth"]) and len(sources["pixels"].data["x0"]) == 9
    np.testing.assert_array_equal(sources["selected"].data["x"], [target["x"]])
    np.testing.assert_array_equal(sources["nodes"].data["node"], nodes["node"])
    view._on_tap(x=-5.0, y=-5.0)  # far from every node: nothing changes
    assert view.model.node == int(target["node"])
    # a smaller case: the selection that no longer exists is dropped
    view.model.tree_side = 5
    assert view.model.node == -1 and "Tap a node" in view._path.object
    view.model.colour_by = "from scratch"
    assert set(view._tree.frame["nodes"]["colour"]) <= {"#e4572e", "#2f6fb3"}
    assert set(view._tree.sources["nodes"].data["colour"]) <= {"#e4572e", "#2f6fb3"}


def test_the_notebook_layout_keeps_measure_above_the_plots():
    view = PerformanceView()
    layout = view.__panel__()
    first = layout.objects[0]
    assert any(getattr(b, "label", None) == "Measure" for b in first.select(pn.widgets.Button))
    assert view.url_bindings()[0][0] is view.model and "node" in view.url_bindings()[0][1]


def test_a_frame_only_changes_data_never_the_documents_models():
    """Issue 19: the three figures are built once; Measure, a tap, new tree settings and another sweep only assign
    source data (ranges, labels, visibility), and the figures show the last frame."""
    view = PerformanceView(model=PerformanceModel(n_points=2, repeats=1, em_step=False))
    doc = Document()
    doc.add_root(pn.panel(view).get_root(doc))
    before = {m.id for m in doc.models}
    figures = [view._timing.figure, view._theory.figure, view._tree.figure]
    in_figures = {m.id for f in figures for m in f.references()}
    assert view.measure()
    node = int(view._tree.frame["nodes"].iloc[-1]["node"])
    view.model.node = node
    view.model.colour_by = "from scratch"
    view.model.tree_side = 6  # a new case: the selection is dropped
    view.model.param.update(x_axis="rate", kernels=["precision", "naive"])
    assert view.measure()
    assert {m.id for m in doc.models} == before
    assert {m.id for f in figures for m in f.references()} == in_figures
    # the figures show the last frames
    assert view._timing.figure.xaxis.axis_label == "missing rate (realised)"
    assert sorted(view._timing.shown()) == ["naive", "precision"]
    for key, source in view._timing.sources.items():
        np.testing.assert_array_equal(source.data["x"], view._timing.frame["series"][key]["x"])
    expected = tree_frame(view.model)
    assert view.model.node == -1 and len(view._tree.sources["selected"].data["x"]) == 0
    for col in ("x", "y", "node", "colour", "size"):
        np.testing.assert_array_equal(view._tree.sources["nodes"].data[col], expected["nodes"][col])
    np.testing.assert_array_equal(view._tree.sources["edges"].data["x1"], expected["edges"]["x1"])
    assert (view._tree.x_range.start, view._tree.x_range.end) == expected["xlim"]
    assert (view._tree.y_range.end, view._tree.y_range.start) == expected["ylim"]  # inverted: the root on top
