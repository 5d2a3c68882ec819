"""PerformanceModel: live timings of the E-step kernels and the pattern spanning tree of a small case (no Panel)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from explorer.core.gaussians.patterns import group_patterns
from explorer.core.mixtures import pattern_tree
from explorer.core.validation import BadInputError
from explorer.ui.state.performance_model import (
    KERNELS,
    SWEEP_COLUMNS,
    PerformanceModel,
    em_strategies,
    mcar_patterns,
    square_patterns,
    theoretical_flops,
)


@pytest.fixture(scope="module")
def table():
    return PerformanceModel(n_points=3, repeats=1).sweep()


def test_the_sweep_times_every_kernel_at_every_point(table):
    assert list(table.columns) == list(SWEEP_COLUMNS)
    kernels = table[table["kind"] == "kernel"]
    assert set(kernels["series"]) == set(KERNELS)
    assert kernels.groupby("series")["x"].nunique().eq(3).all()  # three points each
    assert (kernels["error"] == "").all(), kernels["error"].tolist()
    assert np.isfinite(kernels["seconds"]).all() and (kernels["seconds"] > 0).all()
    assert (kernels["flops"] > 0).all()
    # the x-axis is the realised number of distinct patterns, rows = patterns x rows per pattern
    assert (kernels["x"] == kernels["n_patterns"]).all() and (kernels["n_rows"] == 4 * kernels["n_patterns"]).all()
    assert kernels["x"].max() == 36  # every 3x3 square position of the 8x8 image (rate 0.15 -> k = 3)


def test_the_full_em_step_is_timed_per_strategy_when_emconfig_has_one(table):
    steps = table[table["kind"] == "em_step"]
    strategies = em_strategies()
    assert set(steps["strategy"]) == set(strategies)
    if not strategies:  # an em_gmm without EMConfig.strategy: only the kernels
        return
    assert {"numpy", "compiled"} <= set(strategies)
    for strategy, rows in steps.groupby("strategy"):
        ok = rows["error"] == ""
        # a strategy either gives real timings or says why it failed (never a silent gap)
        assert (rows.loc[ok, "seconds"] > 0).all(), strategy
        assert rows.loc[~ok, "seconds"].isna().all() and rows.loc[~ok, "error"].str.len().gt(0).all(), strategy
    precision_side = steps[steps["strategy"].isin(["numpy", "compiled"])]
    assert (precision_side["error"] == "").all() and (precision_side["seconds"] > 0).all()


def test_timings_are_measured_not_constants(monkeypatch):
    real = pattern_tree.observed_gaussian_naive

    def slow(*args, **kwargs):
        time.sleep(0.004)
        return real(*args, **kwargs)

    monkeypatch.setattr(pattern_tree, "observed_gaussian_naive", slow)
    out = PerformanceModel(n_points=2, repeats=2, kernels=["precision", "naive"], em_step=False).sweep()
    naive, precision = (out.loc[out["series"] == k, "seconds"] for k in ("naive", "precision"))
    assert (naive >= 0.004).all() and (precision < 0.004).all()


@pytest.mark.parametrize("settings", [dict(x_axis="features"), dict(x_axis="rate"), dict(mask="mcar"),
                                      dict(mask="mcar", x_axis="rate", missing_rate=0.4),
                                      dict(mask="mcar", x_axis="features", n_features=32)])
def test_every_axis_and_mask(settings):
    model = PerformanceModel(n_points=2, repeats=1, em_step=False, **settings)
    out = model.sweep()
    assert (out["seconds"] > 0).all() and (out["error"] == "").all()
    assert out["x"].nunique() == 2
    if model.x_axis == "features":
        assert sorted(out["n_features"].unique()) == sorted(model.sweep_values())


def test_progress_and_cancel():
    seen = []
    cancel = threading.Event()

    def progress(done, total, partial):
        seen.append((done, total, len(partial)))
        if done == 2:
            cancel.set()

    out = PerformanceModel(n_points=2, repeats=1, em_step=False).sweep(progress=progress, cancel=cancel)
    assert seen == [(1, 6, 1), (2, 6, 2)] and len(out) == 2


def test_generators_give_distinct_patterns():
    rng = np.random.default_rng(1)
    pats, pos = square_patterns(8, 3, 10, rng)
    assert pats.shape == (10, 64) and len({p.tobytes() for p in pats}) == 10 and (pats.sum(axis=1) == 9).all()
    assert all(pats[i].reshape(8, 8)[r, c] for i, (r, c) in enumerate(pos))
    m = mcar_patterns(6, 0.3, 40, rng)
    assert m.shape == (40, 6) and len({p.tobytes() for p in m}) == 40
    assert m.any(axis=1).all() and (~m).any(axis=1).all()


def test_theoretical_costs():
    pats = np.zeros((2, 4), bool)
    pats[0, 0] = True
    pats[1, :2] = True
    f = theoretical_flops(pats, parents=np.array([-1, 0]), weights=np.array([0, 1]), scratch=np.array([True, False]))
    assert f["naive"] == pytest.approx((27 + 8) / 3)
    assert f["precision"] == pytest.approx(64 + (1 + 8) / 3)
    assert f["tree"] == pytest.approx(27 / 3 + 1 * 2 ** 2)


def test_the_tree_numbers_match_build_pattern_tree():
    model = PerformanceModel(refresh_every=3)
    case = model.tree_case()
    missing, positions = model.tree_missing()
    tree = pattern_tree.build_pattern_tree(group_patterns(missing, sort=True))
    stats = tree.stats()
    s = case["summary"]
    for key in ("n_patterns", "total_weight", "max_depth", "peak_states", "n_clusters"):
        assert s[key] == stats[key], key
    assert s["n_scratch"] == int(tree.scratch_nodes(3).sum()) and s["n_rows"] == 200
    nodes = case["nodes"]
    np.testing.assert_array_equal(nodes["parent"], tree.parents)
    np.testing.assert_array_equal(nodes["depth"], tree.depth)
    np.testing.assert_array_equal(nodes["rows"], tree.counts)
    assert len(case["edges"]) == tree.n_patterns - tree.n_clusters
    assert case["edges"]["n_d"].sum() == tree.total_weight
    # squares: nodes at the squares' centres, one per position drawn on
    assert case["layout"] == "grid" and len(positions) == 36
    assert nodes["x"].between(1, 6).all() and nodes["y"].between(1, 6).all()
    flops = theoretical_flops(tree.patterns, tree.parents, tree.weights, tree.scratch_nodes(3))
    assert s["tree_flops"] == flops["tree"] and s["naive_flops"] == flops["naive"]


def test_the_path_of_a_node_walks_its_edges():
    model = PerformanceModel(refresh_every=0)
    tree, _ = model.tree()
    node = int(np.argmax(tree.depth))
    path = model.path(node)
    assert path["nodes"][0] == tree.roots[0] and path["nodes"][-1] == node
    assert len(path["nodes"]) == tree.depth[node] + 1 and path["start"] == path["nodes"][0]
    for step in path["steps"]:
        assert tree.parents[step["child"]] == step["parent"]
        assert step["n_d"] == tree.weights[step["child"]] == len(step["removed"]) + len(step["appended"])
        assert step["cholesky_flops"] > 0 and step["scratch_flops"] == step["n_o"] ** 3 / 3
    assert path["update_flops"] == sum(s["cholesky_flops"] for s in path["steps"])
    assert path["steps"][0]["removed"][0].startswith("pixel (")
    # with a refresh every 2 levels the chain starts at the last refreshed node on the way
    model.refresh_every = 2
    refreshed = model.path(node)
    assert tree.depth[refreshed["start"]] == 2 * (tree.depth[node] // 2) and len(refreshed["steps"]) == tree.depth[node] % 2


def test_mcar_tree_uses_a_layered_layout():
    model = PerformanceModel(tree_mask="mcar", tree_features=6, tree_rows=60)
    case = model.tree_case()
    nodes = case["nodes"]
    assert case["layout"] == "layers"
    np.testing.assert_array_equal(nodes["y"], nodes["depth"])
    assert nodes["x"].nunique() >= (nodes["depth"] == nodes["depth"].max()).sum()
    assert model.path(int(nodes["node"].iloc[-1]))["steps"][0]["removed"] is not None
    assert model.nearest_node(float(nodes["x"].iloc[3]), float(nodes["y"].iloc[3])) == 3


@pytest.mark.parametrize("settings, message", [
    (dict(kernels=[], em_step=False), "at least one kernel"),
    (dict(n_features=9), "at least 4x4"),
    (dict(missing_rate=0.8, n_features=16), "hides the whole"),
    (dict(mask="mcar", n_features=8, n_patterns=300), "cannot be made with 8 features"),
])
def test_bad_sweep_settings_say_what_to_change(settings, message):
    with pytest.raises(BadInputError, match=message):
        PerformanceModel(**settings).sweep()


def test_bad_tree_settings_say_what_to_change():
    with pytest.raises(BadInputError, match="smaller than the 4x4 image"):
        PerformanceModel(tree_side=4, tree_square=4).tree_case()
    with pytest.raises(BadInputError, match="node must be one of the 36 patterns"):
        PerformanceModel().path(99)
    with pytest.raises(ValueError):
        PerformanceModel(n_points=50)  # param bounds


def test_settings_round_trip():
    model = PerformanceModel(x_axis="rate", kernels=["tree"], refresh_every=2, node=3)
    other = PerformanceModel()
    other.apply_settings(model.settings())
    assert other.settings() == model.settings()
