"""Headless tests of the EM playground page, its StepPlayer, and the gallery (no browser)."""

from __future__ import annotations

import importlib.util
import sys
import threading
from pathlib import Path

import numpy as np
import panel as pn
import param
import pytest
from bokeh.document import Document

from explorer.ui.state.em_model import EMModel
from explorer.ui.pages.em_playground import EMPlayground
from explorer.ui.plots.mixture2d import ellipse_paths, panel_frame
from explorer.ui.components.player import StepPlayer
from tests._plot_checks import assert_ranges_cover, untitled_plots
from tests._text_checks import shown

APPS = Path(__file__).resolve().parents[1] / "apps"


@pytest.fixture
def view():
    return EMPlayground()


def _blobs(K=3, **data):
    v = EMPlayground(n_components=K)
    v.data_model.param.update(dataset="three_blobs", n_samples=150, mechanism="mcar", rate=0.3, **data)
    return v


def _tap(view, i, x, y):
    """A click on panel ``i`` as the browser sends it: a Bokeh Tap event on its figure."""
    from bokeh.events import Tap

    fig = view._panels[i].figure
    fig._trigger_event(Tap(fig, x=x, y=y))


def _numeric_arrays(frame):
    pts, marks = frame["points"], frame["marks"]
    yield from (pts["x"], pts["y"], pts["fill"], pts["line"], pts["size"])
    yield from (marks[k] for k in ("x0", "y0", "x1", "y1", "alpha"))
    for path in frame["ellipses"] + frame["truth"]:
        yield from (path["x"], path["y"])


# --------------------------------------------------------------------------- the page


def test_get_root_builds_and_step_advances_all_three(view):
    root = pn.panel(view).get_root(Document())
    assert root is not None
    assert [m.variant for m in view.models] == ["em", "naive", "mean_impute"]
    assert all(m.iteration == 0 and m.data_model is view.data_model for m in view.models)
    frame0 = view.player.frame
    view.player._step_button.clicks += 1  # the Step button drives the player
    assert [m.iteration for m in view.models] == [1, 1, 1]
    assert view.player.frame == frame0 + 1
    assert "iteration 1" in view._titles[0].object
    assert all(len(view._ll.values(i)) == 2 for i in range(3))  # iterations 0 and 1
    assert "**EM**: 1" in view.player._readout.object


def test_a_frame_only_changes_data_never_the_documents_models(view):
    """Issue 19: figures are built once; Step, Play frames and a new mechanism assign source data only."""
    doc = Document()
    doc.add_root(pn.panel(view).get_root(doc))
    before = {m.id for m in doc.models}
    sources = [p.points for p in view._panels]
    figures = [p.figure for p in view._panels] + [view._ll.figure, view._rmse.figure]
    in_figures = {m.id for f in figures for m in f.references()}
    for _ in range(4):
        view.player.step()
    view.mode = "conditional"
    view.player.step()
    assert {m.id for m in doc.models} == before
    # a new mechanism shows other widgets in the sidebar, but the figures keep every model they had
    view.data_model.mechanism = "mcar"
    view.player.step()
    assert {m.id for f in figures for m in f.references()} == in_figures
    assert in_figures <= {m.id for m in doc.models}
    assert [p.points for p in view._panels] == sources
    for panel in view._panels:  # the figure shows the last frame
        np.testing.assert_array_equal(panel.points.data["x"], panel.frame["points"]["x"])
        assert len(panel.ellipses.data["xs"]) == len(panel.frame["ellipses"])


def test_exact_em_recovers_the_fig1_ml_mean_and_beats_the_observed_mean(view):
    """K = 1, monotone MAR pattern: EM must reach the closed-form ML estimate (Anderson 1957)."""
    em = view.em
    em.param.update(tol=1e-12, max_iter=3000)
    em.reset()  # tol and max_iter are read when a run starts
    em.run()
    assert em.stop_reason == "tol"
    X = em.em_data.X
    cc = ~np.isnan(X[:, 1])
    beta = np.cov(X[cc, 0], X[cc, 1], bias=True)[0, 1] / X[cc, 0].var()
    mu_y = X[cc, 1].mean() + beta * (X[:, 0].mean() - X[cc, 0].mean())
    view.refresh()
    pts = view._panels[0].frame["points"]
    model_mean = np.c_[pts["x"], pts["y"]][pts["kind"] == "model_mean"][0]
    observed_mean = np.c_[pts["x"], pts["y"]][pts["kind"] == "observed_mean"][0]
    np.testing.assert_allclose(model_mean, [X[:, 0].mean(), mu_y], atol=2e-3)
    np.testing.assert_allclose(observed_mean, np.nanmean(X, axis=0))
    assert model_mean[1] > observed_mean[1] + 1.0  # the Fig. 1 bias of the observed mean


def test_exact_em_trace_never_decreases(view):
    for _ in range(15):
        view.player.step()
    ll = view._ll.values(0)
    assert len(ll) == 16 and np.all(np.diff(ll) >= -1e-8 * np.abs(ll[:-1]))
    rmse = view._rmse.values(2)  # mean imputation: the fill never changes
    np.testing.assert_allclose(rmse, rmse[0])


def test_changing_mechanism_resets_the_runs_and_traces(view):
    for _ in range(3):
        view.player.step()
    runs = [m.run_id for m in view.models]
    view.data_model.mechanism = "mcar"
    assert [m.iteration for m in view.models] == [0, 0, 0]
    assert all(m.run_id > r for m, r in zip(view.models, runs))
    assert all(len(view._ll.values(i)) == 1 for i in range(3))
    assert "mcar" in view._info.object


def test_model_settings_propagate_to_all_three():
    v = _blobs(K=3)
    v.em.param.update(n_components=2, covariance_type="diag", seed=4, init="random")
    for m in v.models:
        assert (m.n_components, m.covariance_type, m.seed, m.init) == (2, "diag", 4, "random")
    assert v.settings()["em"] == {"n_components": 2, "covariance_type": "diag", "init": "random", "seed": 4}
    assert v.sync_url() is False  # not served: nothing to sync


@pytest.mark.parametrize("cov", ["full", "diag"])
def test_ellipses_have_one_path_per_component_and_level(cov):
    v = _blobs(K=3)
    v.em.covariance_type = cov
    v.player.step()
    for panel in v._panels:
        paths = panel.frame["ellipses"]
        assert len(paths) == 6  # 3 components x (1 sd, 2 sd)
        assert sorted(p["comp"] for p in paths) == ["1", "1", "2", "2", "3", "3"]
        assert len(panel.frame["truth"]) == 6  # three_blobs: the true mixture is known


@pytest.mark.parametrize("cov", ["full", "diag"])
def test_ellipse_paths_are_mahalanobis_contours(cov, rng):
    means = rng.normal(size=(2, 2))
    A = rng.normal(size=(2, 2, 2))
    full = A @ A.transpose(0, 2, 1) + 0.1 * np.eye(2)
    covs = full if cov == "full" else np.diagonal(full, axis1=1, axis2=2).copy()
    dense = full if cov == "full" else np.einsum("kd,de->kde", covs, np.eye(2))
    for scale in (1.0, 2.0):
        for k, p in enumerate(ellipse_paths(means, covs, scale, n_points=40)):
            d = np.c_[p["x"], p["y"]] - means[k]
            maha = np.einsum("nd,nd->n", d, np.linalg.solve(dense[k], d.T).T)
            np.testing.assert_allclose(maha, scale**2, rtol=1e-9)
            assert p["comp"] == str(k + 1)


@pytest.mark.parametrize("mechanism", ["mcar", "mar_threshold", "nmar_lowest", "self_masking"])
@pytest.mark.parametrize("mode", ["rug", "conditional"])
def test_no_nan_in_plotted_data(mechanism, mode):
    v = _blobs(K=3)
    v.data_model.param.update(mechanism=mechanism, rate=0.4)
    v.mode = mode
    v.player.step()
    for panel in v._panels:
        for arr in _numeric_arrays(panel.frame):
            assert np.all(np.isfinite(arr))
    for trace in (v._ll, v._rmse):
        for i in range(3):
            assert np.isfinite(trace.values(i)).all()
    for panel in v._panels:  # what the figures were sent: the frame's numbers, nothing else
        assert np.isfinite(np.asarray(panel.points.data["x"], dtype=float)).all()


def test_rug_marks_sit_at_the_observed_coordinate_in_the_axis_band():
    v = _blobs(K=2)
    v.data_model.rate = 0.3
    frame = v._panels[0].frame
    X, missing = v.em.em_data.X, v.em.em_data.missing
    one = missing.sum(axis=1) == 1
    marks = frame["marks"]
    assert len(marks["x0"]) == one.sum()
    vertical = marks["x0"] == marks["x1"]  # missing y: tick at the observed x
    np.testing.assert_array_equal(np.sort(marks["x0"][vertical]), np.sort(X[one & missing[:, 1], 0]))
    ylo, yhi = frame["ylim"]
    assert np.all(marks["y1"][vertical] < ylo + 0.06 * (yhi - ylo))
    assert (frame["points"]["kind"] == "data").sum() == (~missing.any(axis=1)).sum()


def test_conditional_mode_draws_the_imputations_and_2sd_segments():
    v = _blobs(K=2)
    v.mode = "conditional"
    for _ in range(3):
        v.player.step()
    em, mi = v.models[0], v.models[2]
    part = em.em_data.missing.any(axis=1)
    for model, panel in ((em, v._panels[0]), (mi, v._panels[2])):
        pts = panel.frame["points"]
        imputed = np.c_[pts["x"], pts["y"]][pts["kind"] == "imputed"]
        np.testing.assert_allclose(imputed, model.imputed()[part])
    marks = v._panels[0].frame["marks"]
    r, c = np.nonzero(em.em_data.missing)
    length = np.hypot(marks["x1"] - marks["x0"], marks["y1"] - marks["y0"])
    np.testing.assert_allclose(length, 4 * np.sqrt(em.conditional().variance()[r, c]))
    mi_marks = v._panels[2].frame["marks"]
    np.testing.assert_allclose(mi_marks["x0"], mi_marks["x1"])  # mean imputation: no spread
    np.testing.assert_allclose(mi_marks["y0"], mi_marks["y1"])


def test_tap_adds_a_complete_point_and_clear_starts_an_empty_canvas(view):
    n = view.data_model.data.n_samples
    _tap(view, 0, 1.5, -2.0)
    dm = view.data_model
    assert dm.dataset == "uploaded" and dm.complete.n_samples == n + 1
    np.testing.assert_array_equal(dm.complete.values[-1], [1.5, -2.0])
    assert all(m.iteration == 0 and m.em_data.n_samples == n + 1 for m in view.models)

    view.clear_points()
    assert len(view._panels[1].frame["points"]["x"]) == 0 and view._panels[1].frame["ellipses"] == []
    _tap(view, 1, 0.0, 0.0)  # one point: the mechanism leaves nothing to fit
    assert view._pending() and "1 point(s) clicked" in view._info.object
    assert len(view._panels[0].frame["points"]["x"]) == 1  # still drawn, as a plain point
    for xy in [(1.0, 1.0), (2.0, 2.5), (3.0, 2.0), (4.0, 4.5)]:
        _tap(view, 2, xy[0], xy[1])
    assert not view._pending() and dm.complete.n_samples == 5
    view.data_model.dataset = "ring"  # choosing a built-in set leaves drawing mode
    assert view._clicked is None and dm.complete.n_samples == dm.n_samples


@pytest.mark.parametrize("dataset", ["three_blobs", "ring", "two_moons", "anisotropic"])
def test_axes_follow_a_new_data_set_and_keep_a_zoom_while_stepping(view, dataset):
    """Review item 2: the panels kept the first data set's ranges, the new data were off-screen."""
    plots = untitled_plots(pn.panel(view).get_root(Document()), 3)
    first = view.data_model.data.truth  # the axes cover the true values (hidden ones too)
    for p in plots:
        assert_ranges_cover(p, first)
    view.data_model.dataset = dataset
    values = view.data_model.data.truth
    for p in plots:
        assert_ranges_cover(p, values)
        # Bokeh's Reset tool goes back to the new data's range too
        assert (p.x_range.reset_start, p.x_range.reset_end) == (p.x_range.start, p.x_range.end)
    # a zoom (the browser sets the range) survives the steps of the same data ...
    plots[0].x_range.update(start=-0.5, end=0.5)
    plots[0].y_range.update(start=-0.25, end=0.25)
    view.player.step()
    view.player.step()
    assert (plots[0].x_range.start, plots[0].x_range.end, plots[0].y_range.start, plots[0].y_range.end) == (
        -0.5, 0.5, -0.25, 0.25)
    # ... and the player's Reset; a new data set fits the axes again
    view.player.reset()
    assert (plots[0].x_range.start, plots[0].x_range.end) == (-0.5, 0.5)
    view.data_model.dataset = "ghahramani_bivariate"
    for p in plots:
        assert_ranges_cover(p, first)


def test_fit_axes_moves_the_ranges_only_when_the_frame_limits_change():
    """The hook reads the limits from the rendered frame, so coalesced frames cannot lose a change."""
    from bokeh.models import Range1d

    from explorer.ui.plots.mixture2d import empty_frame, fit_axes
    from explorer.ui.plots.mixture2d import panel_overlay as _overlay

    class Plot:  # what the hook uses of a HoloViews plot
        state = type("Fig", (), {"x_range": Range1d(start=0, end=1), "y_range": Range1d(start=0, end=1)})()

    plot = Plot()
    fit_axes(plot, _overlay(empty_frame((2.0, 5.0), (-1.0, 1.0))))
    assert (plot.state.x_range.start, plot.state.x_range.end, plot.state.y_range.start) == (2.0, 5.0, -1.0)
    assert (plot.state.x_range.reset_start, plot.state.y_range.reset_end) == (2.0, 1.0)
    plot.state.x_range.update(start=3.0, end=4.0)  # a zoom
    fit_axes(plot, _overlay(empty_frame((2.0, 5.0), (-1.0, 1.0))))  # same limits: kept
    assert (plot.state.x_range.start, plot.state.x_range.end) == (3.0, 4.0)
    fit_axes(plot, _overlay(empty_frame((-8.0, 6.0), (-1.0, 1.0))))  # new limits: moved
    assert (plot.state.x_range.start, plot.state.x_range.end) == (-8.0, 6.0)


def test_model_errors_are_shown_in_the_alert(view):
    view.clear_points()
    for xy in [(0.0, 0.0), (1.0, 1.2), (2.0, 1.9), (3.0, 3.1), (4.0, 4.2)]:
        view.add_point(*xy)
    view.em.n_components = 6
    assert view._alert.visible
    assert "Exact EM: n_components=6 is larger than the number of rows" in shown(view._alert)
    assert all(len(p["x"]) == 0 for p in (view._panels[0].frame["points"],))  # nothing half-drawn
    view.em.n_components = 1
    assert not view._alert.visible


def test_panel_frame_alpha_is_the_max_responsibility():
    v = _blobs(K=3)
    v.player.step()
    m = v.em
    frame = panel_frame(m.state, m.em_data, "full", "em", "rug", (-10, 10), (-10, 10))
    full = ~m.em_data.missing.any(axis=1)
    pts = frame["points"]
    data = pts["kind"] == "data"
    np.testing.assert_allclose(pts["fill"][data], np.clip(m.state.resp[full].max(axis=1), 0.05, 1))
    np.testing.assert_array_equal(pts["comp"][data], (m.state.resp[full].argmax(axis=1) + 1).astype(str))


# --------------------------------------------------------------------------- the player


class FakeModel:
    """Counts steps; finishes after ``limit`` steps; ``busy`` makes try_step refuse."""

    def __init__(self, limit=5):
        self.limit, self.iteration, self.busy, self.resets = limit, 0, False, 0

    @property
    def finished(self):
        return self.iteration >= self.limit

    def step(self):
        if self.finished:
            return False
        self.iteration += 1
        return True

    def try_step(self):
        return False if self.busy else self.step()

    def reset(self):
        self.iteration, self.resets = 0, self.resets + 1


def test_player_tick_steps_every_model_and_pauses_when_all_finished():
    a, b = FakeModel(limit=4), FakeModel(limit=9)
    p = StepPlayer(models=[a, b], steps_per_tick=3)
    p.playing = True
    assert p.timer is not None and p.timer.running
    assert p.tick() == 6 and (a.iteration, b.iteration) == (3, 3)
    b.busy = True  # a busy model is skipped, not waited for
    assert p.tick() == 1 and (a.iteration, b.iteration) == (4, 3)
    b.busy = False
    p.tick()
    assert p.playing and b.iteration == 6
    p.tick()
    assert b.iteration == 9 and not p.playing and p.timer is None  # all finished: paused
    p.playing = True  # nothing left to play: flips straight back
    assert not p.playing and p.timer is None
    p.reset()
    assert (a.resets, b.resets) == (1, 1) and not p.finished


def test_player_skips_overlapping_ticks():
    a = FakeModel(limit=100)
    p = StepPlayer(models=[a])
    with p._tick_lock:  # a tick in progress on another thread
        assert p.tick() == 0
    assert a.iteration == 0 and p.tick() == 1


def test_player_timer_start_stop_period_and_session_end():
    a = FakeModel(limit=100)
    p = StepPlayer(models=[a], period=300)
    p.play()
    cb = p.timer
    assert cb.period == 300 and p._play.label == "Pause"
    p.period = 100
    assert p.timer is cb and cb.period == 100
    p.pause()
    assert p.timer is None and not cb.running and p._play.label == "Play"
    p.play()
    assert p.timer is not None and p.timer is not cb
    synced = []
    p.param.watch(lambda e: synced.append(e.new), "playing")
    p._on_session_destroyed(None)
    p._on_session_destroyed(None)  # idempotent
    assert p.timer is None
    # Play no longer reads as playing (the session can end before a tick sees the closed tab), and no watcher ran:
    # they would schedule work on the closed session
    assert not p.playing and synced == []
    p.playing = True  # the session is gone: never restarts
    assert p.timer is None


def test_player_step_and_reset_on_real_models_from_threads():
    models = [EMModel(n_components=2, variant=v) for v in ("em", "naive")]
    p = StepPlayer(models=models, steps_per_tick=2)
    threads = [threading.Thread(target=p.tick) for _ in range(4)] + [threading.Thread(target=p.step)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for m in models:  # steps never interleave: one recorded state per iteration, in order
        assert 1 <= m.iteration <= 9
        assert [s.iteration for s in m.states] == list(range(m.iteration + 1))
    ll = [s.log_likelihood for s in models[0].states]
    assert np.all(np.diff(ll) >= -1e-8 * np.abs(ll[:-1]))
    p.reset()
    assert [m.iteration for m in models] == [0, 0]


# --------------------------------------------------------------------------- apps


def _load(path):
    spec = importlib.util.spec_from_file_location(f"_test_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_app_factory_gives_a_fresh_view_per_call():
    app = _load(APPS / "em_playground.py")
    a, b = app.create_view(), app.create_view()
    assert a.data_model is not b.data_model and a.models[0] is not b.models[0]
    assert a.data_model.mechanism == "mar_threshold" and a.em.n_components == 1


def test_gallery_builds_every_page_lazily_and_survives_a_broken_one(monkeypatch):
    gallery_module = _load(APPS / "main.py")
    g = gallery_module.Gallery()
    pn.panel(g).get_root(Document())
    assert g._built == {}  # nothing heavy before a page is opened
    for page in gallery_module.PAGES:
        g.page = page.slug
        sidebar, main = g._built[page.slug]  # each part marked (not wrapped) with the page's name
        assert not isinstance(main, pn.pane.Alert), main.object
        assert g.main.objects == [g.notice, main] and f"page-main-{page.slug}" in main.css_classes
        assert g.page_sidebar.objects == [sidebar] and f"page-sidebar-{page.slug}" in sidebar.css_classes
    monkeypatch.setattr(gallery_module, "APPS_DIR", APPS / "missing")
    g._built.clear()
    for name in [n for n in sys.modules if n.startswith("explorer_apps.")]:
        monkeypatch.delitem(sys.modules, name)
    g.page = "em_playground"
    alert = g.main.objects[1]
    assert isinstance(alert, pn.pane.Alert) and "Page unavailable" in alert.object
    g.page = "home"
    assert g.page_sidebar.objects == []


def test_the_player_tooltips_say_one_model_or_every_model():
    from explorer.ui.components.player import StepPlayer

    one = StepPlayer(models=[EMModel()])
    assert one._step_button.description == "One step of the model"
    assert one._reset_button.description == "Start the run again"
    two = StepPlayer(models=[EMModel(), EMModel()])
    assert two._step_button.description == "One step of every model"


def test_the_player_says_the_real_rate_when_play_cannot_keep_up():
    from explorer.ui.components.player import StepPlayer

    p = StepPlayer(models=[EMModel()], period=100)  # 10 ticks/s asked
    p._shown_at.extend([0.0, 0.5, 1.0, 1.5, 2.0])  # shown: 2 ticks/s
    with param.parameterized.discard_events(p):
        p.playing = True
    p._update_readout()
    assert p.real_rate() == 2.0
    assert "Playing at 2.0 ticks/s" in shown(p._readout) and "10.0/s asked" in shown(p._readout)
    p._shown_at.clear()
    p._shown_at.extend([0.0, 0.1, 0.2])  # keeps the pace: nothing said
    p._update_readout()
    assert "Playing at" not in shown(p._readout)
