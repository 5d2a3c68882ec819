"""Param model objects, headless: settings round-trip, errors keep the data, stepping, rewinding."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from explorer.ui.state.data_model import NO_MECHANISM, UPLOADED, DataModel
from explorer.ui.state.em_model import EMModel


def test_models_do_not_import_panel():
    code = (
        "import sys; import explorer.ui.state.data_model, explorer.ui.state.em_model; "
        "print(','.join(m for m in ('panel', 'holoviews', 'bokeh') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_data_model_applies_the_mechanism_and_reports_the_rate():
    m = DataModel(dataset="three_blobs", mechanism="mcar", rate=0.25, mask_seed=3)
    assert m.error == ""
    assert m.data.missing.mean() == pytest.approx(m.mask.realised_rate)
    assert abs(m.mask.realised_rate - 0.25) < 0.05
    np.testing.assert_array_equal(np.isnan(m.data.values), m.data.missing)
    np.testing.assert_array_equal(m.data.truth, m.complete.truth)


def test_data_model_settings_round_trip_and_reproduce_the_mask():
    a = DataModel(dataset="iris", mechanism="mar_logistic", rate=0.1, mechanism_params={"strength": 3.0}, mask_seed=7)
    b = DataModel()
    b.apply_settings(a.settings())
    assert b.settings() == a.settings()
    np.testing.assert_array_equal(a.data.missing, b.data.missing)
    with pytest.raises(ValueError, match="Unknown settings"):
        b.apply_settings({"colour": "red"})


def test_revision_increases_on_every_data_change():
    m = DataModel(dataset="iris", rate=0.2)
    r0 = m.revision
    m.mask_seed += 1
    m.rate = 0.3
    assert m.revision == r0 + 2


def test_an_infeasible_setting_keeps_the_data_and_says_why():
    m = DataModel(dataset="ghahramani_bivariate", mechanism="mcar", rate=0.2)
    before, rev = m.data, m.revision
    m.mechanism = "quarter"  # an image mask on tabular data
    assert "image" in m.error
    assert m.data is before and m.revision == rev
    m.mechanism = "mcar"
    assert m.error == ""


def test_bad_upload_loses_nothing_and_a_good_one_keeps_its_own_missing_values():
    m = DataModel(dataset="iris")
    before = m.data
    assert not m.load_csv(b"a,b\n1,x\n2,3\n", "bad.csv")
    assert "bad.csv" in m.error and "not numeric" in m.error
    assert m.data is before
    assert m.load_csv(b"a,b\n1,2\n2,\n3,4\n5,?\n", "good.csv")
    assert m.dataset == UPLOADED and m.mechanism == NO_MECHANISM
    assert m.data.missing.sum() == 2 and m.error == ""


def test_em_model_steps_monotonically_and_finishes():
    data = DataModel(dataset="three_blobs", rate=0.3)
    em = EMModel(data_model=data, n_components=3, tol=1e-6)
    lls = [em.log_likelihood]
    while em.step():
        lls.append(em.log_likelihood)
    assert em.stop_reason in ("tol", "max_iter")
    assert np.all(np.diff(lls) >= -1e-9 * np.abs(lls[:-1]))
    assert em.history.sizes["iteration"] == em.iteration + 1
    imp = em.imputed()
    obs = ~data.data.missing
    assert imp[obs].tobytes() == data.data.values[obs].tobytes()
    assert np.isfinite(imp).all()


def test_em_model_resets_when_data_or_settings_change_and_can_rewind():
    data = DataModel(dataset="three_blobs", rate=0.3)
    em = EMModel(data_model=data, n_components=2)
    em.run(5)
    assert em.iteration == 5
    third = em.states[3]
    em.rewind(3)
    assert em.iteration == 3 and em.state is third and len(em.states) == 4
    run = em.run_id
    em.n_components = 3
    assert em.iteration == 0 and em.run_id == run + 1 and em.state.n_components == 3
    data.mask_seed += 1
    assert em.run_id == run + 2


def test_em_model_reports_bad_settings_readably():
    data = DataModel(dataset="ghahramani_bivariate", n_samples=10, rate=0.1)
    em = EMModel(data_model=data, n_components=20)
    assert em.state is None and "n_components=20" in em.error
    assert not em.step()
    em.n_components = 2
    assert em.error == "" and em.state is not None


def test_em_model_try_step_does_not_wait_for_a_running_step():
    em = EMModel(data_model=DataModel(dataset="three_blobs"), n_components=3)
    with em._lock:  # as if a step were running in another thread
        import threading

        result = []
        t = threading.Thread(target=lambda: result.append(em.try_step()))
        t.start()
        t.join(timeout=5)
    assert result == [False] and em.iteration == 0
    assert em.try_step() and em.iteration == 1


def test_step_with_a_stale_run_id_does_nothing():
    em = EMModel(data_model=DataModel(dataset="three_blobs"), n_components=3)
    old = em.run_id
    assert em.step(run_id=old) and em.iteration == 1
    em.seed += 1  # a new run
    assert not em.step(run_id=old) and em.iteration == 0
    assert em.step(run_id=em.run_id) and em.iteration == 1
