"""VBModel, headless: stepping equals the core's fit, rewinding, resets, readable errors, read-outs."""

from __future__ import annotations

import re
import subprocess
import sys
import threading

import numpy as np
import pytest

from explorer.core.gaussians.conditional import ConditionalMixture
from explorer.core.gaussians.conditional_t import StudentTConditionalMixture
from explorer.core.mixtures import vb_dpgmm
from explorer.ui.state.data_model import DataModel
from explorer.ui.state.vb_model import VBModel


@pytest.fixture
def blobs():
    return DataModel(dataset="three_blobs", n_samples=150, rate=0.3)


def test_vb_model_does_not_import_panel():
    code = ("import sys; import explorer.ui.state.vb_model; "
            "print(','.join(m for m in ('panel', 'holoviews', 'bokeh') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_step_advances_and_the_elbo_trace_equals_the_core_fit(blobs):
    vb = VBModel(data_model=blobs, n_components=6, tol=1e-4, seed=3)
    assert vb.iteration == 0 and vb.state is not None and vb.error == ""
    assert vb.elbo is None  # iteration 0 fills missing entries with point masses: ELBO undefined
    assert vb.step() and vb.iteration == 1 and vb.elbo is not None
    vb.run()
    assert vb.stop_reason in ("tol", "max_iter") and vb.converged == (vb.stop_reason == "tol")
    # the same run through the core's fit loop (same data, config and seed)
    d = blobs.data
    data = vb_dpgmm.prepare(d.values, d.missing)
    res = vb_dpgmm.fit(data, vb.config(data), np.random.default_rng(3))
    core = np.array([t["elbo"] for t in res.trace])
    ours = vb.history["elbo"].values
    assert res.n_iter == vb.iteration and res.stop_reason == vb.stop_reason
    np.testing.assert_allclose(ours, core, rtol=1e-12, equal_nan=True)
    np.testing.assert_allclose(vb.state.weights, res.state.weights, rtol=1e-10)
    assert vb.n_effective == res.state.n_effective == int(vb.history["n_effective"][-1])
    assert vb.elbo == pytest.approx(res.state.elbo)


def test_history_has_one_entry_per_iteration_and_the_rmse(blobs):
    vb = VBModel(data_model=blobs, n_components=5)
    vb.run(4)
    h = vb.history
    assert list(h["iteration"].values) == [0, 1, 2, 3, 4]
    assert h["weights"].shape == (5, 5) and np.allclose(h["weights"].sum("component"), 1.0)
    assert np.all(np.isfinite(h["rmse"].values)) and h.attrs["algorithm"].startswith("Variational")


def test_principled_augmented_elbo_never_decreases():
    data = DataModel(dataset="three_blobs", n_samples=200, rate=0.3, mask_seed=4)
    vb = VBModel(data_model=data, n_components=8, responsibilities="augmented", reg_covar=0.0, tol=0.0,
                 max_iter=25)
    elbos = [vb.elbo]
    while vb.step():
        elbos.append(vb.elbo)
    e = np.array(elbos[1:])
    assert np.all(np.diff(e) >= -1e-9 * np.abs(e[:-1])) and vb.stop_reason == "max_iter"


def test_thesis_update_has_no_elbo_and_stops_on_the_plugin_likelihood(blobs):
    vb = VBModel(data_model=blobs, n_components=6, update="thesis", tol=1e-4)
    vb.run()
    assert vb.elbo is None and np.isnan(vb.history["elbo"].values).all()
    assert np.isfinite(vb.log_likelihood) and vb.stop_reason in ("tol", "max_iter")


def test_rewind_restores_a_kept_state_and_continues_from_it(blobs):
    vb = VBModel(data_model=blobs, n_components=5, tol=0.0)
    vb.run(6)
    third = vb.states[3]
    vb.rewind(3)
    assert vb.iteration == 3 and vb.state is third and len(vb.states) == 4
    assert vb.history.sizes["iteration"] == 4 and vb.elbo == pytest.approx(third.elbo)
    assert vb.n_effective == third.n_effective
    vb.step()
    replay = vb_dpgmm.step(third, vb.em_data, vb.config(vb.em_data))
    np.testing.assert_allclose(vb.state.means, replay.means)
    with pytest.raises(ValueError, match="Iteration 17 is not kept"):
        vb.rewind(17)


def test_reset_on_data_and_settings_change(blobs):
    vb = VBModel(data_model=blobs, n_components=5)
    vb.run(3)
    run = vb.run_id
    blobs.mask_seed += 1  # new data
    assert vb.iteration == 0 and vb.run_id == run + 1
    np.testing.assert_array_equal(vb.em_data.missing, blobs.data.missing)
    for name, value in (("alpha", 2.0), ("update", "thesis"), ("responsibilities", "thesis"), ("beta0", 0.5),
                        ("nu0", 4.0), ("mean_prior", "observed_mean"), ("covariance_prior", "observed_variance"),
                        ("n_components", 4), ("seed", 9)):
        vb.run(2)
        before = vb.run_id
        setattr(vb, name, value)
        assert vb.run_id == before + 1 and vb.iteration == 0 and vb.error == "", name
    vb.run(2)
    before = vb.run_id
    vb.tol = 1e-6  # not a reset: only the stopping rule
    assert vb.run_id == before and vb.iteration == 2


def test_settings_map_to_the_core_prior(blobs):
    vb = VBModel(data_model=blobs, n_components=4, alpha=0.0, nu0=0.0)
    prior = vb.config(vb.em_data).prior(2)
    assert prior["alpha"] == pytest.approx(1 / 4) and prior["nu0"] == 2.0  # thesis defaults
    np.testing.assert_array_equal(prior["m0"], 0.0)
    np.testing.assert_array_equal(prior["Psi0"], np.eye(2))
    vb.param.update(alpha=3.0, nu0=5.0, mean_prior="observed_mean", covariance_prior="observed_variance")
    prior = vb.config(vb.em_data).prior(2)
    X = blobs.data.values
    assert prior["alpha"] == 3.0 and prior["nu0"] == 5.0
    np.testing.assert_allclose(prior["m0"], np.nanmean(X, axis=0))
    np.testing.assert_allclose(prior["Psi0"], np.diag(np.nanvar(X, axis=0)), rtol=1e-10)


def test_settings_round_trip():
    a = VBModel(data_model=DataModel(dataset="three_blobs"), n_components=7, alpha=0.5, update="thesis",
                responsibilities="augmented", seed=4)
    b = VBModel(data_model=DataModel(dataset="three_blobs"))
    b.apply_settings(a.settings())
    assert b.settings() == a.settings()
    np.testing.assert_allclose(b.state.means, a.state.means)


@pytest.mark.parametrize("setup, match", [
    (dict(data=dict(dataset="three_blobs", n_samples=10, rate=0.1), n_components=12),
     "n_components=12 is larger than the number of rows"),
    (dict(data=dict(dataset="ghahramani_bivariate", mechanism="mar_threshold", rate=0.5), n_components=3),
     r"'y' \(column 1\) has no observed value"),
    (dict(data=dict(dataset="iris", rate=0.2), n_components=3, nu0=2.5), r"nu0 must be > n_features - 1 = 3"),
])
def test_bad_settings_give_a_readable_error_not_an_exception(setup, match):
    vb = VBModel(data_model=DataModel(**setup.pop("data")), **setup)
    assert vb.state is None and vb.iteration == 0
    assert re.search(match, vb.error), vb.error
    assert not vb.step() and vb.finished and vb.history is None
    assert vb.conditional() is None and vb.predictive_conditional() is None and vb.imputed() is None


def test_error_clears_once_the_setting_is_fixed():
    vb = VBModel(data_model=DataModel(dataset="three_blobs", n_samples=10, rate=0.1), n_components=12)
    assert "larger than" in vb.error
    vb.n_components = 3
    assert vb.error == "" and vb.state is not None and vb.step()


def test_try_step_does_not_wait_and_stale_run_id_is_ignored(blobs):
    vb = VBModel(data_model=blobs, n_components=4)
    with vb._lock:
        result = []
        t = threading.Thread(target=lambda: result.append(vb.try_step()))
        t.start()
        t.join(timeout=5)
    assert result == [False] and vb.iteration == 0
    old = vb.run_id
    assert vb.step(run_id=old) and vb.iteration == 1
    vb.seed += 1
    assert not vb.step(run_id=old) and vb.iteration == 0


def test_imputation_and_conditionals(blobs):
    vb = VBModel(data_model=blobs, n_components=6)
    vb.run()
    d = blobs.data
    imp = vb.imputed()
    obs = ~d.missing
    np.testing.assert_array_equal(imp[obs], d.values[obs])  # bit for bit
    assert np.isfinite(imp).all()
    cm = vb.conditional()
    assert isinstance(cm, ConditionalMixture)
    s = vb.state
    oracle = vb_dpgmm.conditional(s, vb.em_data)
    np.testing.assert_allclose(cm.mean(), oracle.mean())
    t = vb.predictive_conditional()
    assert isinstance(t, StudentTConditionalMixture)
    oracle_t = vb_dpgmm.predictive_conditional(s, vb.em_data)
    np.testing.assert_allclose(t.weights, oracle_t.weights)
    # the t predictive is wider than the plug-in Gaussian on every missing entry of a row with finite variance
    vt, vg = t.variance(), cm.variance()
    finite = d.missing & np.isfinite(vt)
    assert finite.any() and np.all(vt[finite] >= vg[finite] * (1 - 1e-9))
    # given rows: one typed row with its second coordinate missing
    row = np.array([[0.5, np.nan]])
    assert vb.conditional(row).mean().shape == (1, 2) and np.isfinite(vb.predictive_conditional(row).mean()).all()
