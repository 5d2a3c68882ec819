"""Headless tests of the variational-mixture page (no browser): frames, streams, lock-step runs."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import panel as pn
import param
import pytest
from bokeh.document import Document

from explorer.ui.plots.vb_frames import (
    mixture_frame,
    mixture_overlay,
    weights_frame,
    weights_overlay,
)
from explorer.ui.pages.variational import SHARED, VariationalPlayground, other_update
from tests._plot_checks import assert_ranges_cover, untitled_plots
from tests._text_checks import shown as shown_text

APPS = Path(__file__).resolve().parents[1] / "apps"


@pytest.fixture
def view():
    v = VariationalPlayground(n_components=8)
    v.data_model.param.update(n_samples=150)
    return v


def _finite(frame):
    pts = frame["points"]
    for c in ("x", "y", "fill", "line", "size"):
        assert np.isfinite(pts[c].astype(float)).all(), c
    for p in frame["ellipses"]:
        assert np.isfinite(p["x"]).all() and np.isfinite(p["y"]).all()


def test_get_root_builds_and_step_advances_both_runs_in_lock_step(view):
    assert pn.panel(view).get_root(Document()) is not None
    a, b = view.models
    assert (a.update, b.update) == ("principled", "thesis") and a.data_model is b.data_model is view.data_model
    view.player._step_button.clicks += 1
    view.player._step_button.clicks += 1
    assert a.iteration == b.iteration == 2
    assert "iteration 2" in view._titles[0].object and "ELBO undefined" in view._titles[1].object
    for u, m in (("principled", a), ("thesis", b)):
        tr = view._traces[u]
        np.testing.assert_array_equal(tr["ll"].data["iteration"], [0, 1, 2])
        np.testing.assert_allclose(tr["ll"].data["ll"], [s.log_likelihood for s in m.states])
        np.testing.assert_array_equal(tr["neff"].data["neff"], [int((s.weights > 0.01).sum()) for s in m.states])
    np.testing.assert_allclose(view._traces["principled"]["elbo"].data["elbo"][1:], [s.elbo for s in a.states[1:]])
    assert np.isnan(view._traces["thesis"]["elbo"].data["elbo"]).all()
    sent = view._weights.data
    np.testing.assert_allclose(sent["a"], a.state.weights)
    np.testing.assert_allclose(sent["b"], b.state.weights)
    assert (view._rewind.end, view._rewind.value) == (2, 2)


def test_settings_propagate_and_the_other_run_takes_the_other_update(view):
    a, b = view.models
    view.player.step()
    a.param.update(n_components=5, alpha=0.7, seed=3, responsibilities="augmented", beta0=2.0)
    assert all(getattr(b, k) == getattr(a, k) for k in SHARED)
    assert b.n_components == 5 and b.iteration == 0 and b.state.n_components == 5
    a.update = "thesis"
    assert (a.update, b.update) == ("thesis", "principled") and other_update("thesis") == "principled"
    assert a.iteration == b.iteration == 0
    assert "A: <span style='color:#d62728'>thesis update" in view._titles[0].object
    view.player.step()
    # traces are keyed by update: the principled trace now belongs to B
    np.testing.assert_allclose(view._traces["principled"]["ll"].data["ll"], [s.log_likelihood for s in b.states])
    np.testing.assert_allclose(view._traces["thesis"]["ll"].data["ll"], [s.log_likelihood for s in a.states])


def test_rewind_slider_rewinds_both_runs_and_the_traces(view):
    a, b = view.models
    for _ in range(5):
        view.player.step()
    with param.edit_constant(view._rewind):  # as the browser does on release
        view._rewind.value_throttled = 2
    assert a.iteration == b.iteration == 2
    assert list(view._traces["principled"]["ll"].data["iteration"]) == [0, 1, 2]
    assert view._rewind.value == 2
    view.player.step()
    assert a.iteration == 3 and list(view._traces["thesis"]["ll"].data["iteration"]) == [0, 1, 2, 3]


def test_rewind_to_any_iteration_including_0_through_the_bokeh_slider(view):
    """Review item 4: releasing the slider on 0 (its first value) after 6 steps did nothing.

    The browser reports ``value_throttled`` only when it changes; this drives the Bokeh model as a
    browser session does (``set_from_json``), so a stale value on either side shows up here.
    """
    root = pn.panel(view).get_root(Document())
    slider = root.select_one({"title": "Rewind to iteration"})
    a, b = view.models
    for target, steps in ((0, 6), (3, 5), (3, 4), (0, 2)):  # 3 twice: the same release value again
        for _ in range(steps):
            view.player.step()
        top = a.iteration
        assert (slider.value, slider.value_throttled) == (top, top)
        slider.set_from_json("value", target)
        slider.set_from_json("value_throttled", target)  # the handle is released on ``target``
        assert a.iteration == b.iteration == target
        assert f"iteration {target} ·" in view._titles[0].object and f"iteration {target} ·" in view._titles[1].object
        assert list(view._traces["principled"]["ll"].data["iteration"]) == list(range(target + 1))
        assert (view._rewind.value, view._rewind.value_throttled, slider.value) == (target, target, target)


def test_axes_follow_the_data_set_and_the_columns_and_keep_a_zoom_while_stepping(view):
    """Review item 3: after a new data set (iris, wine) the panels kept the first data set's ranges."""
    plots = untitled_plots(pn.panel(view).get_root(Document()), 2)

    def shown():
        d = view.data_model.data
        cols = list(d.columns)
        v = d.truth if d.truth is not None else d.values
        return v[:, [cols.index(view.x_feature), cols.index(view.y_feature)]]

    for p in plots:
        assert_ranges_cover(p, shown(), fill=0.8)
    for dataset in ("iris", "wine", "two_moons"):
        view.data_model.dataset = dataset
        for p in plots:
            assert_ranges_cover(p, shown(), fill=0.8)
            assert (p.x_range.reset_start, p.x_range.reset_end) == (p.x_range.start, p.x_range.end)
    view.data_model.dataset = "wine"
    view.param.update(x_feature="proline", y_feature="magnesium")
    for p in plots:
        assert_ranges_cover(p, shown(), fill=0.8)
        assert p.xaxis[0].axis_label == "proline"
    # a zoom survives the steps and a rewind of the same data
    plots[1].x_range.update(start=600.0, end=700.0)
    view.player.step()
    view.player.step()
    view.rewind(1)
    assert (plots[1].x_range.start, plots[1].x_range.end) == (600.0, 700.0)


def test_the_axes_follow_the_first_frames_of_a_new_data_set_even_when_coalesced(view):
    """A served page may render only the last of several frames: that one still moves the axes."""
    plots = untitled_plots(pn.panel(view).get_root(Document()), 2)
    pipe = view._pipes[0]
    sends = []
    pipe.send = sends.append  # hold the frames back, as a busy session does
    view.data_model.dataset = "wine"
    assert len(sends) > 1
    del pipe.send
    pipe.send(sends[-1])
    assert_ranges_cover(plots[0], view.data_model.data.values[:, :2], fill=0.8)


def test_mixture_frame_draws_points_imputations_and_heavy_components_only(view):
    a = view.vb
    a.run(10)
    s, d = a.state, a.em_data
    imp = a.imputed()
    frame = mixture_frame(s, d.X, d.missing, imp, (0, 1), (-10, 10), (-10, 10), threshold=0.05)
    shown = np.flatnonzero(s.weights > 0.05)
    np.testing.assert_array_equal(frame["shown"], shown)
    assert len(frame["ellipses"]) == 2 * shown.size and {p["comp"] for p in frame["ellipses"]} == {
        str(k + 1) for k in shown}
    pts = frame["points"]
    inc = d.missing.any(axis=1)
    n_obs, n_inc = int((~inc).sum()), int(inc.sum())
    assert pts["x"].size == n_obs + n_inc + shown.size
    np.testing.assert_array_equal(pts["x"][:n_obs], d.X[~inc, 0])
    np.testing.assert_allclose(pts["y"][n_obs:n_obs + n_inc], imp[inc, 1])
    assert set(pts["marker"][n_obs:n_obs + n_inc]) == {"triangle"}
    np.testing.assert_array_equal(pts["comp"][:n_obs], (s.resp[~inc].argmax(axis=1) + 1).astype(str))
    np.testing.assert_allclose(pts["fill"][:n_obs], np.clip(s.resp[~inc].max(axis=1), 0.1, 1.0))
    # the 1-sd ellipse of a component is its Mahalanobis contour
    k = shown[0]
    one_sd = next(p for p in frame["ellipses"][shown.size:] if p["comp"] == str(k + 1))
    diff = np.stack([one_sd["x"], one_sd["y"]], axis=1) - s.means[k, :2]
    maha = np.einsum("ni,ij,nj->n", diff, np.linalg.pinv(s.covariances[k][:2, :2]), diff)
    np.testing.assert_allclose(maha, 1.0, rtol=1e-8)
    # heavier component, thicker line
    lw = {p["comp"]: p["lw"] for p in frame["ellipses"][shown.size:]}
    heaviest, lightest = shown[np.argmax(s.weights[shown])], shown[np.argmin(s.weights[shown])]
    assert lw[str(heaviest + 1)] >= lw[str(lightest + 1)]
    _finite(frame)
    assert len(mixture_overlay(frame)) == 2


def test_higher_dimensional_data_are_shown_on_the_chosen_pair(view):
    view.data_model.dataset = "iris"
    assert view.param.x_feature.objects == ["sepal_length", "sepal_width", "petal_length", "petal_width"]
    view.param.update(x_feature="petal_length", y_feature="petal_width")
    view.player.step()
    frame = view._pipes[0].data
    a = view.vb
    shown = frame["shown"]
    means = frame["points"]["x"][-shown.size:], frame["points"]["y"][-shown.size:]
    np.testing.assert_allclose(means[0], a.state.means[shown, 2])
    np.testing.assert_allclose(means[1], a.state.means[shown, 3])
    assert (frame["xlabel"], frame["ylabel"]) == ("petal_length", "petal_width")
    assert "petal_length vs petal_width" in shown_text(view._info)
    _finite(frame)
    view.data_model.dataset = "three_blobs"  # back to 2-D: the pair follows the new columns
    assert (view.x_feature, view.y_feature) == ("x", "y")


@pytest.mark.parametrize("mechanism", ["mcar", "mar_threshold", "nmar_lowest"])
def test_no_nan_in_plotted_data(mechanism):
    v = VariationalPlayground(n_components=6)
    v.data_model.param.update(mechanism=mechanism, rate=0.3, n_samples=120)
    v.vb.run(5)
    v.vb_other.run(5)
    v.refresh()
    for p in v._pipes:
        _finite(p.data)


def test_errors_are_shown_in_the_alert_and_clear(view):
    view.data_model.n_samples = 10
    view.vb.n_components = 12
    assert view._alert.visible and "larger than the number of rows" in view._alert.object
    assert "Model A" in view._alert.object and "Model B" in view._alert.object
    assert view._pipes[0].data["points"]["x"].size == 0
    view.vb.n_components = 3
    assert not view._alert.visible and view.vb.state is not None


def test_weights_overlay_uses_numeric_bars():
    f = weights_frame(np.array([0.6, 0.3, 0.1]), np.array([0.5, 0.5]), "principled update", "thesis update", 0.05)
    el = weights_overlay(f)
    rects = el.get(0)
    np.testing.assert_allclose(rects.dimension_values("bw1"), [0.6, 0.3, 0.1])
    np.testing.assert_allclose(rects.dimension_values("bk"), [0.6, 1.6, 2.6])
    assert el.get(1).dimension_values("bk").size == 2 and f["K"] == 3


def test_app_factory_gives_a_fresh_view_per_call():
    spec = importlib.util.spec_from_file_location("variational_app", APPS / "variational.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    v1, v2 = mod.create_view(), mod.create_view()
    assert v1.vb is not v2.vb and v1.data_model is not v2.data_model
    assert v1.data_model.dataset == "three_blobs" and v1.vb.n_components == 10
    assert set(v1.settings()) == {"data", "vb"} and v1.settings()["vb"]["update"] == "principled"
    assert not v1.sync_url()  # not served: nothing to sync


def test_choosing_the_other_axis_column_swaps_the_pair(view):
    """x = y would show a diagonal line of nothing: choosing the other axis's column swaps the two."""
    view.data_model.dataset = "iris"
    x, y = view.x_feature, view.y_feature
    assert x != y
    view.x_feature = y
    assert (view.x_feature, view.y_feature) == (y, x)
    view.y_feature = y
    assert (view.x_feature, view.y_feature) == (x, y)
    cols = list(view.data_model.data.columns)
    view.y_feature = cols[3]  # another column: no swap
    assert (view.x_feature, view.y_feature) == (x, cols[3])



def test_the_widget_sync_flag_is_per_thread(view):
    """A refresh setting the rewind slider on one thread must not be read (or cleared) by another: with a shared
    flag, the other thread's refresh cleared it midway and the slider's watcher paused the run."""
    import threading

    view._syncing = True
    seen = []
    other = threading.Thread(target=lambda: (seen.append(view._syncing), setattr(view, "_syncing", False)))
    other.start()
    other.join(5)
    assert seen == [False] and view._syncing  # the other thread saw its own flag and cleared only its own
    view._syncing = False
    for _ in range(3):
        view.player.step()
    with param.edit_constant(view._rewind):  # a user's rewind still acts: the flag is off on this thread
        view._rewind.value_throttled = 1
    assert all(m.iteration == 1 for m in view.models)
