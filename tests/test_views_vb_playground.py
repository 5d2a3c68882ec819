"""Headless tests of the variational-mixture page (no browser): frames, streams, lock-step runs."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import panel as pn
import param
import pytest
from bokeh.document import Document
from bokeh.document.events import ColumnDataChangedEvent

from explorer.core.mixtures import vb_dpgmm
from explorer.ui.pages.variational import SHARED, VariationalPlayground, other_update
from explorer.ui.plots.figures import ELLIPSE_POINTS, ScatterPanel
from explorer.ui.plots.mixture2d import ellipse_paths
from explorer.ui.plots.vb_frames import (
    StickWeightsPlot,
    ellipse_axes,
    mixture_frame,
    plugin_imputation,
    weights_frame,
)
from explorer.ui.state.data_model import DataModel
from explorer.ui.state.vb_model import VBModel
from tests._plot_checks import assert_ranges_cover, untitled_plots
from tests._text_checks import shown as shown_text

APPS = Path(__file__).resolve().parents[1] / "apps"


@pytest.fixture
def view():
    v = VariationalPlayground(n_components=8)
    v.data_model.param.update(n_samples=150)
    return v


AXES = ("cx", "cy", "a00", "a01", "a10", "a11")


def _path(center, axes):
    """The path the browser traces for an ellipse (ScatterPanel's expression): center + A (cos t, sin t)."""
    t = 2 * np.pi * np.arange(ELLIPSE_POINTS) / (ELLIPSE_POINTS - 1)
    return np.asarray(center, dtype=float)[:, None] + np.asarray(axes, dtype=float) @ np.stack([np.cos(t), np.sin(t)])


def _drawn_paths(panel):
    """The ellipse paths a panel's figure draws, from the numbers it was sent."""
    d = {k: np.asarray(panel.ellipses.data[k], dtype=float) for k in AXES}
    return [_path((d["cx"][i], d["cy"][i]), [[d["a00"][i], d["a01"][i]], [d["a10"][i], d["a11"][i]]])
            for i in range(len(d["cx"]))]


def _finite(frame):
    pts = frame["points"]
    for c in ("x", "y", "fill", "line", "size"):
        assert np.isfinite(pts[c].astype(float)).all(), c
    for p in frame["ellipses"]:
        assert np.isfinite(p["center"]).all() and np.isfinite(p["axes"]).all()


def _drawn_finite(panel):
    """What a mixture panel's figure was sent: finite numbers only."""
    for c in ("x", "y", "fill", "line", "size"):
        assert np.isfinite(np.asarray(panel.points.data[c], dtype=float)).all(), c
    for c in AXES + ("lw", "la"):
        assert np.isfinite(np.asarray(panel.ellipses.data[c], dtype=float)).all(), c


def _trace(view, update: str, what: str):
    """(iterations, values) drawn in the trace ``what`` ("ll", "elbo" or "neff") of ``update``."""
    ll, elbo, neff = view._trace_series(update)
    plot, series = {"ll": (view._objective, ll), "elbo": (view._objective, elbo), "neff": (view._neff, neff)}[what]
    data = plot.sources[series].data
    return np.asarray(data["iteration"]), np.asarray(data["value"], dtype=float)


def test_get_root_builds_and_step_advances_both_runs_in_lock_step(view):
    assert pn.panel(view).get_root(Document()) is not None
    a, b = view.models
    assert (a.update, b.update) == ("principled", "thesis") and a.data_model is b.data_model is view.data_model
    view.player._step_button.clicks += 1
    view.player._step_button.clicks += 1
    assert a.iteration == b.iteration == 2
    assert "iteration 2" in view._titles[0].object and "ELBO undefined" in view._titles[1].object
    for u, m in (("principled", a), ("thesis", b)):
        its, ll = _trace(view, u, "ll")
        np.testing.assert_array_equal(its, [0, 1, 2])
        np.testing.assert_allclose(ll, [s.log_likelihood for s in m.states])
        its, neff = _trace(view, u, "neff")
        np.testing.assert_array_equal(its, [0, 1, 2])
        np.testing.assert_array_equal(neff, [int((s.weights > 0.01).sum()) for s in m.states])
    # the ELBO is drawn where it is defined (every iteration after the first of the principled run) ...
    its, elbo = _trace(view, "principled", "elbo")
    np.testing.assert_array_equal(its, [s.iteration for s in a.states if np.isfinite(s.elbo)])
    assert list(its[-2:]) == [1, 2]
    np.testing.assert_allclose(elbo[-2:], [s.elbo for s in a.states[1:]])
    # ... and nowhere for the thesis run: it is undefined, and there is no line for it
    assert np.isnan([s.elbo for s in b.states]).all() and view._trace_series("thesis")[1] is None
    assert [i.label.value for i in view._objective.figure.legend[0].items] == [
        "ELBO (principled)", "plug-in log-lik. (principled)", "plug-in log-lik. (thesis)"]
    sent = view._weights.frame
    np.testing.assert_allclose(sent["a"], a.state.weights)
    np.testing.assert_allclose(sent["b"], b.state.weights)
    np.testing.assert_allclose(view._weights.sources[0].data["top"], a.state.weights)  # what the figure draws
    np.testing.assert_allclose(view._weights.sources[1].data["top"], b.state.weights)
    assert (view._rewind.end, view._rewind.value) == (2, 2)


def test_a_frame_only_changes_data_never_the_documents_models(view):
    """Issue 19: figures are built once; Steps, Play ticks, the threshold, the other update, another truncation K
    and another data set only assign source data and scalar properties, and the figures show the last frame."""
    doc = Document()
    doc.add_root(pn.panel(view).get_root(doc))
    before = {m.id for m in doc.models}
    figures = [p.figure for p in view._panels] + [view._weights.figure, view._objective.figure, view._neff.figure]
    sources = [p.points for p in view._panels] + view._weights.sources + view._objective.sources + view._neff.sources
    in_figures = {m.id for f in figures for m in f.references()}
    for _ in range(3):
        view.player.step()
    view.player.tick()  # a Play tick
    view.threshold = 0.05
    view.vb.update = "thesis"  # A and B swap updates: the legends and colours change, not the models
    view.player.step()
    view.vb.n_components = 6  # fewer components: fewer rows, the same renderers
    view.player.step()
    assert {m.id for m in doc.models} == before
    # another data set shows other widgets in the sidebar, but the figures keep every model they had
    view.data_model.dataset = "iris"
    view.player.step()
    assert {m.id for f in figures for m in f.references()} == in_figures
    assert in_figures <= {m.id for m in doc.models}
    assert [p.points for p in view._panels] + view._weights.sources + view._objective.sources + view._neff.sources \
        == sources
    for panel, m in zip(view._panels, view.models):  # the figures show the last frame's numbers
        frame = panel.frame
        np.testing.assert_array_equal(panel.points.data["x"], frame["points"]["x"])
        np.testing.assert_array_equal(panel.points.data["y"], frame["points"]["y"])
        assert len(panel.ellipses.data["cx"]) == len(frame["ellipses"]) == 2 * int((m.state.weights > 0.05).sum())
        for drawn, ellipse in zip(_drawn_paths(panel), frame["ellipses"]):
            np.testing.assert_array_equal(drawn, _path(ellipse["center"], ellipse["axes"]))
    np.testing.assert_allclose(view._weights.sources[0].data["top"], view.vb.state.weights)
    np.testing.assert_allclose(view._weights.sources[1].data["top"], view.vb_other.state.weights)
    assert view._weights.threshold.location == 0.05 and view._weights.ticker.ticks == list(range(1, 7))
    for m in view.models:
        its, ll = _trace(view, m.update, "ll")
        np.testing.assert_array_equal(its, [s.iteration for s in m.states])
        np.testing.assert_allclose(ll, [s.log_likelihood for s in m.states])
        # the effective components are counted with the threshold shown
        np.testing.assert_array_equal(_trace(view, m.update, "neff")[1],
                                      [int((s.weights > 0.05).sum()) for s in m.states])


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
    np.testing.assert_allclose(_trace(view, "principled", "ll")[1], [s.log_likelihood for s in b.states])
    np.testing.assert_allclose(_trace(view, "thesis", "ll")[1], [s.log_likelihood for s in a.states])
    # the weights' legend and colours follow the runs: A (left bars) is now the thesis run
    assert [i.label.value for i in view._weights.legend_items] == ["thesis update", "principled update"]
    assert [r.glyph.fill_color for r in view._weights.bars] == ["#d62728", "#1f77b4"]


def test_the_prior_card_makes_its_widgets_when_first_opened(view):
    """Folded at first and empty (built on request); opened, its widgets set both runs' priors."""
    card = view._priors
    assert card.collapsed and len(card.objects) == 0
    card.collapsed = False
    widgets = {w.name: w for w in card.objects}
    assert list(widgets) == ["Mean prior m0", "β0 (mean precision)", "ν0 (0 = D)", "Wishart scale W0", "Initialisation"]
    widgets["β0 (mean precision)"].value = 2.5
    widgets["Wishart scale W0"].value = "observed_variance"
    assert view.vb.beta0 == view.vb_other.beta0 == 2.5
    assert view.vb.covariance_prior == view.vb_other.covariance_prior == "observed_variance"
    card.collapsed = True
    card.collapsed = False
    assert [w.name for w in card.objects] == list(widgets)  # made once


def test_rewind_slider_rewinds_both_runs_and_the_traces(view):
    a, b = view.models
    for _ in range(5):
        view.player.step()
    with param.edit_constant(view._rewind):  # as the browser does on release
        view._rewind.value_throttled = 2
    assert a.iteration == b.iteration == 2
    assert list(_trace(view, "principled", "ll")[0]) == [0, 1, 2]
    assert view._rewind.value == 2
    view.player.step()
    assert a.iteration == 3 and list(_trace(view, "thesis", "ll")[0]) == [0, 1, 2, 3]


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
        assert list(_trace(view, "principled", "ll")[0]) == list(range(target + 1))
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
    """A served page may draw only the last of several frames asked for: that one still moves the axes."""
    plots = untitled_plots(pn.panel(view).get_root(Document()), 2)
    asked = []
    view._redraw = lambda: asked.append(1)  # hold the frames back, as a busy session does
    view.data_model.dataset = "wine"
    assert len(asked) > 1
    del view._redraw
    view._draw()  # the one draw the held requests were folded into
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
    np.testing.assert_allclose(one_sd["center"], s.means[k, :2])
    diff = _path(one_sd["center"], one_sd["axes"]).T - s.means[k, :2]
    maha = np.einsum("ni,ij,nj->n", diff, np.linalg.pinv(s.covariances[k][:2, :2]), diff)
    np.testing.assert_allclose(maha, 1.0, rtol=1e-8)
    # heavier component, thicker line
    lw = {p["comp"]: p["lw"] for p in frame["ellipses"][shown.size:]}
    heaviest, lightest = shown[np.argmax(s.weights[shown])], shown[np.argmin(s.weights[shown])]
    assert lw[str(heaviest + 1)] >= lw[str(lightest + 1)]
    _finite(frame)
    # drawn by the page's figure: points as rows of one source, one row per ellipse (traced by the browser)
    panel = ScatterPanel(marks=False, truth=False, ellipses="axes")
    renderers = list(panel.figure.renderers)
    panel.update(frame)
    assert panel.figure.renderers == renderers
    np.testing.assert_array_equal(panel.points.data["x"], pts["x"])
    assert list(panel.points.data["marker"]) == list(pts["marker"])
    assert len(panel.ellipses.data["cx"]) == 2 * shown.size
    np.testing.assert_allclose(panel.ellipses.data["lw"], [p["lw"] for p in frame["ellipses"]])
    for drawn, ellipse in zip(_drawn_paths(panel), frame["ellipses"]):
        np.testing.assert_allclose(drawn, _path(ellipse["center"], ellipse["axes"]))


def test_the_ellipses_traced_from_their_axes_are_the_ellipse_paths():
    """What the browser traces from a frame's centre and axes is the path ``ellipse_paths`` computes."""
    rng = np.random.default_rng(0)
    means = rng.normal(size=(4, 2))
    B = rng.normal(size=(4, 2, 2))
    covs = B @ np.swapaxes(B, 1, 2) + 0.1 * np.eye(2)
    for scale in (1.0, 2.0):
        for m, axes, path in zip(means, scale * ellipse_axes(covs), ellipse_paths(means, covs, scale)):
            np.testing.assert_allclose(_path(m, axes), np.stack([path["x"], path["y"]]), atol=1e-12)
    assert ellipse_axes(np.zeros((0, 2, 2))).shape == (0, 2, 2)


@pytest.mark.parametrize("dataset, mechanism", [("three_blobs", "mcar"), ("iris", "mcar"), ("wine", "mcar")])
def test_plugin_imputation_is_the_cores_conditional_mean(dataset, mechanism):
    """The frames' fast imputation gives the numbers of vb_dpgmm.conditional(...).mean(), rows with every entry
    missing included (3-D and higher data: several patterns of missing entries)."""
    model = VBModel(data_model=DataModel(dataset=dataset, mechanism=mechanism, rate=0.3, n_samples=200),
                    n_components=8)
    model.run(4)
    s, d = model.state, model.em_data
    rows = np.flatnonzero(d.missing.any(axis=1))
    assert rows.size and np.unique(d.missing[rows], axis=0).shape[0] >= 2
    np.testing.assert_allclose(plugin_imputation(s, d.X, d.missing, rows), vb_dpgmm.conditional(s, d).mean()[rows],
                               rtol=1e-10, atol=1e-10)


def test_the_panels_draw_the_models_imputations(view):
    for _ in range(3):
        view.player.step()
    for panel, m in zip(view._panels, view.models):
        inc = m.em_data.missing.any(axis=1)
        pts = panel.points.data
        triangles = np.asarray(pts["marker"]) == "triangle"
        np.testing.assert_allclose(np.c_[pts["x"], pts["y"]][triangles], m.imputed()[inc], rtol=1e-10, atol=1e-10)


def test_a_step_sends_only_the_columns_that_changed(view):
    """Same number of rows: the points' markers, sizes and line widths are not sent again with every frame."""
    doc = Document()
    doc.add_root(pn.panel(view).get_root(doc))
    for _ in range(3):
        view.player.step()
    events = []
    doc.on_change(events.append)
    rows = len(view._panels[0].points.data["x"])
    view.player.step()
    assert len(view._panels[0].points.data["x"]) == rows  # (the same components shown)
    sent = [e for e in events if getattr(e, "model", None) is view._panels[0].points]
    assert sent and all(isinstance(e, ColumnDataChangedEvent) and e.cols for e in sent)
    cols = {c for e in sent for c in e.cols}
    assert "fill" in cols and not cols & {"marker", "size", "lw"}
    np.testing.assert_array_equal(view._panels[0].points.data["marker"], view._panels[0].frame["points"]["marker"])


def test_higher_dimensional_data_are_shown_on_the_chosen_pair(view):
    view.data_model.dataset = "iris"
    assert view.param.x_feature.objects == ["sepal_length", "sepal_width", "petal_length", "petal_width"]
    view.param.update(x_feature="petal_length", y_feature="petal_width")
    view.player.step()
    frame = view._panels[0].frame
    a = view.vb
    shown = frame["shown"]
    means = frame["points"]["x"][-shown.size:], frame["points"]["y"][-shown.size:]
    np.testing.assert_allclose(means[0], a.state.means[shown, 2])
    np.testing.assert_allclose(means[1], a.state.means[shown, 3])
    assert (frame["xlabel"], frame["ylabel"]) == ("petal_length", "petal_width")
    fig = view._panels[0].figure
    assert (fig.xaxis[0].axis_label, fig.yaxis[0].axis_label) == ("petal_length", "petal_width")
    np.testing.assert_allclose(view._panels[0].points.data["x"][-shown.size:], a.state.means[shown, 2])
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
    for panel in v._panels:
        _finite(panel.frame)
        _drawn_finite(panel)


def test_errors_are_shown_in_the_alert_and_clear(view):
    view.data_model.n_samples = 10
    view.vb.n_components = 12
    assert view._alert.visible and "larger than the number of rows" in view._alert.object
    assert "Model A" in view._alert.object and "Model B" in view._alert.object
    assert view._panels[0].frame["points"]["x"].size == 0 and len(view._panels[0].points.data["x"]) == 0
    view.vb.n_components = 3
    assert not view._alert.visible and view.vb.state is not None


def test_weights_are_numeric_bars():
    f = weights_frame(np.array([0.6, 0.3, 0.1]), np.array([0.5, 0.5]), "principled update", "thesis update", 0.05)
    plot = StickWeightsPlot()
    plot.update(f)
    a, b = (s.data for s in plot.sources)
    np.testing.assert_allclose(a["top"], [0.6, 0.3, 0.1])
    np.testing.assert_allclose(a["left"], [0.6, 1.6, 2.6])
    np.testing.assert_allclose(b["left"], [1.0, 2.0])
    assert len(b["left"]) == 2 and f["K"] == 3
    assert plot.ticker.ticks == [1, 2, 3] and (plot.x_range.start, plot.x_range.end) == (0.4, 3.6)
    assert plot.threshold.location == 0.05 and plot.y_range.end >= 0.6


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
