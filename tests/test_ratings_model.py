"""RatingsModel: the NMAR rating models of Marlin ch. 5 stepped live on the synthetic rating world (no browser)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from explorer.core.validation import BadInputError
from explorer.ui.state import ratings_model as rm
from explorer.ui.state.ratings_model import (
    MODELS,
    RatingsComparison,
    RatingsModel,
    Run,
    available_models,
    compare_models,
    make_world,
)

HAVE = available_models()
EM_MODELS = [k for k in MODELS if MODELS[k].kind == "em"]
SMALL = {"n_users": 150, "n_items": 12, "n_clusters": 2}


def _need(key):
    if not HAVE[key]:
        pytest.skip(f"{MODELS[key].module} is not there")


@pytest.fixture(scope="module")
def world():
    return make_world(s=0.25, seed=1, **SMALL)


# ---------------------------------------------------------------------------- properties
@pytest.mark.parametrize("key", EM_MODELS)
def test_em_steps_never_decrease_the_objective(key):
    _need(key)
    m = RatingsModel(model=key, s=0.25, max_iter=40, **SMALL)
    assert m.error == "" and m.iteration == 0
    m.run()
    trace = m.trace()
    assert trace.size == m.iteration + 1 > 5
    assert np.all(np.diff(trace) >= -1e-9 * np.abs(trace[:-1])), np.diff(trace).min()
    assert trace[-1] > trace[0]  # it moved
    assert m.finished and m.stop_reason in ("tol", "max_iter")
    assert not m.step()  # a finished run does not step


@pytest.mark.parametrize("key", ["dp", "dp_cpt_v"])
def test_gibbs_runs_its_sweeps_and_keeps_thinned_samples(key):
    _need(key)
    m = RatingsModel(model=key, n_sweeps=12, **SMALL)
    m.run()
    run = m.run_object
    assert m.iteration == 12 and m.stop_reason == "n_sweeps"
    assert len(run.samples) == (12 - run.burn_in) // run.thin
    proba = run.predict_proba()
    np.testing.assert_allclose(proba.sum(axis=2), 1.0, atol=1e-9)


@pytest.mark.parametrize("key", [k for k in MODELS])
def test_predictive_distributions_and_the_role_of_r(key):
    """Probabilities sum to one; a MAR model ignores r, an NMAR model predicts differently for r = 0 and r = 1."""
    _need(key)
    m = RatingsModel(model=key, max_iter=30, n_sweeps=8, **SMALL)
    m.run()
    p = m.predictive(user=3)
    assert p["rated_item"] >= 0 and p["unrated_item"] >= 0 and p["rated_item"] != p["unrated_item"]
    data = m.world.train
    assert data.response[3, p["rated_item"]] and not data.available[3, p["rated_item"]]
    assert not data.response[3, p["unrated_item"]] and not data.available[3, p["unrated_item"]]
    assert p["true_rated"] == m.world.codes[3, p["rated_item"]] + 1
    for name in ("p_rated", "p_unrated", "p_unrated_if_selected"):
        assert p[name].shape == (5,) and abs(p[name].sum() - 1) < 1e-9
    gap = np.abs(p["p_unrated"] - p["p_unrated_if_selected"]).max()
    if MODELS[key].nmar:
        assert gap > 1e-3
    else:
        assert gap < 1e-12


def test_cpt_v_mu_approaches_the_truth_at_s_025():
    """MM/CPT-v recovers mu_v(0.25) = (0, .25, .5, .75, 1) within a few standard errors, the MAR value
    (one mu for every v) does not, and the learned mu is closer than the moment estimate."""
    _need("cpt_v")
    from explorer.core.discrete import cpt_v

    m = RatingsModel(model="cpt_v", s=0.25, n_users=1500, n_items=15, n_clusters=2, n_components=2)
    m.run()
    sel = m.selection()
    truth, learned = sel["truth"], sel["learned"]
    se = cpt_v.mu_standard_errors(m.run_object.state, m.world.train, m.run_object.config)
    inner = slice(1, 5)  # mu_1 = 0 sits on the boundary, where the Laplace s.e. says nothing
    assert np.all(np.abs(learned[inner] - truth[inner]) < 4 * se[inner] + 0.02), (learned, se)
    assert learned[0] < 0.05
    mar = m.world.train.response.mean()  # what a MAR model assumes: one selection rate
    assert np.abs(learned - truth).max() < np.abs(mar - truth).max() / 3


def test_moment_estimate_is_the_core_least_squares_solution(world):
    _need("cpt_v")
    from explorer.core.discrete import cpt_v

    m = RatingsModel(model="cpt_v", s=0.125, **SMALL)
    mu, cond = m.moment()
    ref_mu, ref_cond = cpt_v.moment_estimate(m.world.train)
    np.testing.assert_allclose(mu, ref_mu, rtol=1e-10)
    assert cond == pytest.approx(ref_cond, rel=1e-10)
    assert m.moment() is m.moment()  # computed once per world


def test_cpt_v_plus_holds_mu_fixed_from_the_holdout_random_items():
    _need("cpt_v_plus")
    from explorer.core.discrete import cpt_v

    m = RatingsModel(model="cpt_v_plus", s=0.125, max_iter=20, **SMALL)
    expected = np.clip(cpt_v.mu_from_random_items(m.world.holdout), rm.MU_FLOOR, 1.0)
    m.run()
    np.testing.assert_allclose(m.selection()["learned"], expected)
    assert m.selection()["fixed"]


def test_weak_scores_are_zero_for_the_truth_and_match_a_direct_nmae(world):
    onehot = np.eye(5)[world.codes]
    assert rm.weak_scores(world, onehot) == {"random": 0.0, "user": 0.0}
    flat = np.full(onehot.shape, 0.2)  # median of the uniform: 3
    t = world.targets("random")
    direct = np.mean(np.abs(t.codes - 2)) / 1.6
    assert rm.weak_scores(world, flat)["random"] == pytest.approx(direct)


def test_nmar_beats_mar_on_random_items_once_s_is_large():
    """The thesis's central result on the synthetic world (digest 6.3): at s = 0.25, CPT-v's random-item
    NMAE is lower than the MAR mixture's by more than their standard errors; at s = 0 neither wins by much."""
    _need("cpt_v")
    done = []
    rows = compare_models(("mar_mm", "cpt_v"), ks=(2,), s_values=(0.0, 0.25), n_users=200, n_items=12,
                          n_clusters=2, repeats=3, progress=lambda d, t: done.append((d, t)))
    assert done[-1] == (12, 12) and len(rows) == 4
    by = {(r["model"], r["s"]): r for r in rows}
    mar, nmar = by[("MAR MM", 0.25)], by[("MM/CPT-v", 0.25)]
    assert nmar["random"] + 2 * nmar["random_se"] < mar["random"] - 2 * mar["random_se"]
    assert abs(by[("MAR MM", 0.0)]["random"] - by[("MM/CPT-v", 0.0)]["random"]) < 0.1
    assert all(np.isfinite(r["random_se"]) and r["K"] == 2 for r in rows)


def test_conditional_rbms_run_their_cd_updates_and_ev_learns_from_the_holdout_users():
    m = RatingsModel(model="crbm_ev", max_iter=12, **SMALL)
    run = m.run_object
    world = m.world
    # cRBM/E-v learns b0 from the hold-out users' random-item ratings (r = 0, a = 1): they are in its data
    assert run.fit_data.n_samples == world.train.n_samples + world.holdout.n_samples
    assert np.array_equal(run.fit_data.codes[world.train.n_samples:], world.holdout.codes)
    assert np.any(~run.fit_data.response & run.fit_data.available)
    m.run()
    assert m.iteration == 12 and m.stop_reason == "max_iter" and np.isfinite(m.trace()).all()
    proba = run.predict_proba()
    assert proba.shape == (world.train.n_samples, world.train.n_features, 5)
    np.testing.assert_allclose(proba.sum(axis=2), 1.0, atol=1e-9)
    assert m.selection()["learned"] is None  # P(x | r): no selection probability to show
    m.model = "crbm"
    assert m.run_object.fit_data is world.train  # the basic cRBM ignores r: the training users only


def test_crbm_ev_beats_crbm_on_random_items_at_s_025():
    """The thesis's cRBM result (digest 6.3, Table 5.2): the r-dependent biases cut the random-item error."""
    rows = compare_models(("crbm", "crbm_ev"), ks=(3,), s_values=(0.25,), n_users=200, n_items=12, n_clusters=2,
                          repeats=3)
    by = {r["model"]: r for r in rows}
    basic, ev = by["cRBM"], by["cRBM/E-v"]
    assert not basic["error"] and not ev["error"]
    assert ev["random"] + 2 * ev["random_se"] < basic["random"] - 2 * basic["random_se"], (basic, ev)


def test_compare_models_stops_when_cancelled():
    rows = compare_models(("mar_mm",), ks=(1,), s_values=(0.0, 0.25), n_users=60, n_items=8, repeats=2,
                          cancelled=lambda: True)
    assert rows == []


def test_the_comparison_in_slices_gives_the_rows_of_compare_models():
    """A page runs the comparison a slice at a time (one piece of work per slice here): the same rows."""
    settings = dict(models=("mar_mm", "cpt_v"), ks=(1,), s_values=(0.0, 0.25), n_users=60, n_items=8, repeats=2)
    rows = compare_models(**settings)
    comparison, slices, progress = RatingsComparison(**settings), 0, []
    while comparison.advance(0.0, progress=lambda d, t: progress.append((d, t))):
        slices += 1
    assert comparison.finished and comparison.done == comparison.total == 8 and slices > comparison.total
    assert progress == [(d, 8) for d in range(1, 9)]  # after every fit
    same = lambda rs: [{k: v for k, v in r.items() if k != "seconds"} for r in rs]  # noqa: E731
    assert same(comparison.rows) == same(rows) and len(rows) == 4
    assert not comparison.advance(1.0)  # finished: nothing more


def test_a_comparison_stops_where_it_is_when_cancelled():
    comparison = RatingsComparison(("mar_mm",), ks=(1,), s_values=(0.0, 0.25), n_users=60, n_items=8, repeats=2)
    while comparison.done < 2:
        comparison.advance(0.0)
    assert not comparison.advance(cancelled=lambda: True)
    assert comparison.finished and comparison.done == 2 and len(comparison.rows) == 1  # the first cell only


# ---------------------------------------------------------------------------- what a page draws
def test_a_snapshot_is_read_only_and_made_once_per_iteration():
    _need("cpt_v")
    m = RatingsModel(model="cpt_v", **SMALL)
    m.step()
    snap = m.snapshot()
    assert m.snapshot() is snap  # nothing changed: the same one
    assert snap.iteration == 1 and snap.run_id == m.run_id and snap.model == "cpt_v" and snap.user == 0
    np.testing.assert_array_equal(snap.trace, m.trace())
    np.testing.assert_array_equal(snap.selection["learned"], m.selection()["learned"])
    np.testing.assert_array_equal(snap.predictive["p_rated"], m.predictive()["p_rated"])
    assert dict(snap.scores) == m.scores()
    assert snap.world["n_users"] == m.world.train.n_samples and snap.readout_error == ""
    with pytest.raises(ValueError):
        snap.trace[0] = 0.0
    with pytest.raises(ValueError):
        snap.selection["learned"][0] = 0.0
    with pytest.raises(TypeError):
        snap.selection["learned"] = None
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.iteration = 5
    m.step()
    later = m.snapshot()
    assert later is not snap and later.iteration == 2 and snap.iteration == 1 and snap.trace.size == 2
    m.user = 3
    assert m.snapshot().predictive["user"] == 3 and later.predictive["user"] == 0


@pytest.mark.parametrize("key", ["cpt_v", "dp"])
def test_finish_fits_to_the_end_once_per_settings_in_the_process(key, monkeypatch):
    """finish() ends the run as stepping would; a second model of the same settings takes the end from the cache."""
    _need(key)
    settings = dict(model=key, n_sweeps=12, max_iter=60, seed=11, **SMALL)
    stepped = RatingsModel(**settings)
    stepped.run()
    first = RatingsModel(**settings)
    assert first.finish(first.run_id + 1) is False and first.iteration == 0  # another run: nothing done
    assert first.finish(first.run_id) and first.finished and not first.finish()
    second = RatingsModel(**settings)
    monkeypatch.setattr(Run, "advance", lambda self: pytest.fail("fitted again"))
    assert second.finish()
    for m in (first, second):
        assert (m.iteration, m.stop_reason) == (stepped.iteration, stepped.stop_reason)
        np.testing.assert_array_equal(m.trace(), stepped.trace())
        np.testing.assert_allclose(m.predictive()["p_unrated"], stepped.predictive()["p_unrated"])
        assert m.scores() == pytest.approx(stepped.scores())


# ---------------------------------------------------------------------------- settings and errors
def test_settings_round_trip_and_a_new_world_only_when_world_settings_change():
    m = RatingsModel(model="mar_mm", **SMALL)
    world = m.world
    m.n_components = 2
    assert m.world is world and m.iteration == 0
    m.data_seed = 5
    assert m.world is not world
    other = RatingsModel(model="mar_mm")
    other.apply_settings(m.settings())
    assert other.settings() == m.settings()
    with pytest.raises(BadInputError, match="Unknown settings"):
        other.apply_settings({"nonsense": 1})


def test_bad_settings_give_clear_messages(monkeypatch):
    m = RatingsModel(model="mar_mm", **SMALL)
    with pytest.raises(ValueError):
        m.s = 0.3  # not one of the five values of the protocol
    with pytest.raises(ValueError):
        m.model = "rbm"
    with pytest.raises(ValueError):
        m.n_users = 5
    # a model whose core module is missing is refused with a message, not an exception
    real = rm._module
    monkeypatch.setattr(rm, "_module", lambda spec: None if spec.key == "logit_vd" else real(spec))
    m.model = "logit_vd"
    assert "MM/Logit-vd is not available" in m.error and m.finished and not m.step()
    assert m.world is not None  # the world is still shown
    m.model = "mar_mm"
    assert m.error == "" and m.step()
    with pytest.raises(BadInputError, match="n_users must be an integer >= 10"):
        make_world(n_users=3)


def test_a_world_that_cannot_be_drawn_is_said_and_not_shown(monkeypatch):
    m = RatingsModel(model="mar_mm", **SMALL)

    def broken(**kwargs):
        raise BadInputError("Only 3 users qualify")

    monkeypatch.setattr(rm, "make_world", broken)
    m.data_seed = 9
    assert m.error == "Only 3 users qualify" and m.world is None and m.finished
    assert m.selection() is None and m.predictive() is None and m.scores() is None


def test_the_player_steps_the_model():
    from explorer.ui.components.player import StepPlayer

    m = RatingsModel(model="mar_mm", **SMALL)
    player = StepPlayer(models=[m])
    assert player.step() == 1 and m.iteration == 1
    player.reset()
    assert m.iteration == 0
