"""SensitivityModel: the Sensitivity page's model (no Panel)."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.ui.state.data_model import DataModel
from explorer.ui.state.sensitivity_model import SensitivityModel, run_job


@pytest.fixture(scope="module")
def model():
    m = SensitivityModel(n_imputations=6)
    m.refresh()
    return m


def test_default_is_nmar_on_one_column_and_analysed(model):
    data = model.data_model.data
    assert model.incomplete_columns == ("sepal_length",) and model.column == "sepal_length"
    assert model.error == "" and model.table is not None and model.table.delta.size == 21
    imps = model.imputations
    assert imps.shape == (6, *data.values.shape)
    assert np.array_equal(imps[:, ~data.missing], np.repeat(data.values[None], 6, axis=0)[:, ~data.missing])
    # the lowest values were hidden: MAR imputations overshoot the hidden truth, the truth is the complete mean
    assert model.imputed_values(0.0).mean() > model.hidden_values().mean()
    assert model.truth() == pytest.approx(model.data_model.complete.truth[:, 0].mean())
    assert model.table.estimate[10] > model.truth()  # the MAR estimate is biased upwards


def test_selection_model_reference_is_nearer_the_truth_and_matched_by_a_delta(model):
    sel, truth, mar = model.selection_estimate, model.truth(), model.table.estimate[10]
    assert sel is not None and model.selection_note == "" and sel[1] < sel[0] < sel[2]
    # the self-masking selection model undoes part of the NMAR bias of the MAR imputations
    assert abs(sel[0] - truth) < abs(mar - truth)
    match = model.matching_delta()
    assert match is not None and match < 0
    assert np.interp(match, model.table.delta, model.table.estimate) == pytest.approx(sel[0], rel=1e-12)
    assert "selection model" in model.sentence()


def test_analysis_settings_rerun_the_table_without_a_new_draw(model):
    imps, revision = model.imputations, model.revision
    model.param.update(estimate="ols", mode="scale")
    assert model.imputations is imps and model.revision > revision
    t = model.table
    assert t.estimand.kind == "ols" and t.mode == "scale" and t.neutral == 1.0
    cols = list(model.columns)
    assert t.estimand.target == cols.index(model.target) and t.estimand.term == cols.index(model.predictor)
    assert model.predictor == "petal_length"  # the column most correlated with sepal_length
    text = model.sentence()
    assert f"{t.estimate[10]:.3g}" in text and "coefficient" in text
    model.param.update(estimate="mean", mode="shift", delta_max=2.0)
    assert model.table.delta[-1] == pytest.approx(2.0 * model.scale_sd)
    np.testing.assert_allclose(np.diff(model.table.estimate), np.diff(model.table.delta) * 47 / 150, atol=1e-12)
    assert model.delta_label(model.delta) == "+0.00 sd (+0)"
    model.delta_max = 1.0


def test_a_stale_draw_is_not_adopted_and_a_new_draw_is_needed(model):
    model.selection = False
    job = model.job()
    imps = run_job(job)
    model.n_imputations = 5
    assert model.needs_draw and model.imputations is None
    assert not model.adopt(job, imps)
    fresh = model.job()
    assert model.adopt(fresh, run_job(fresh))
    assert model.table.n_imputations == 5 and not model.needs_draw
    assert model.selection_estimate is None and model.matching_delta() is None


def test_readable_errors():
    m = SensitivityModel(data_model=DataModel(dataset="iris", mechanism="none"), n_imputations=3, selection=False)
    assert m.job() is None and "no missing values" in m.error
    m.data_model.param.update(mechanism="mcar", rate=0.2)
    m.refresh()
    assert m.error == "" and m.table is not None
    m.selection = True  # MCAR on every column: rows with 3 missing values, no selection model (said why)
    m.refresh()
    assert m.selection_estimate is None and "more than 2 missing values" in m.selection_note
    m.param.update(estimate="ols", target="petal_width", predictor="petal_width")
    assert "same column" in m.error and m.table is None


def test_uploaded_columns_are_adopted_and_settings_round_trip():
    dm = DataModel(dataset="iris", mechanism="nmar_lowest", rate=0.1)
    m = SensitivityModel(data_model=dm, n_imputations=3, selection=False)
    rows = "\n".join(f"{i},{'' if i % 4 == 0 else (i * 7) % 11},{i % 5}" for i in range(1, 41))
    assert dm.load_csv(f"a,<b>x</b>,c\n{rows}\n".encode(), "weird.csv")
    assert m.columns == ("a", "<b>x</b>", "c") and m.column == "<b>x</b>"
    m.refresh()
    assert m.error == "" and m.table.n_missing == 10
    assert "<b>x</b>" in m.sentence()
    s = m.settings()
    other = SensitivityModel(data_model=dm)
    other.apply_settings(s)
    assert other.settings() == s


def test_the_draw_cache_keeps_the_latest_results_within_its_bytes():
    from explorer.ui.state.sensitivity_model import DrawCache, DrawResult

    cache = DrawCache(max_bytes=3 * 800)
    results = {k: DrawResult(np.zeros((10, 10))) for k in "abcd"}  # 800 bytes each
    for k in "abc":
        cache.put(k, results[k])
    assert cache.get("a") is results["a"]  # "a" is now the most recently used
    cache.put("d", results["d"])  # over the budget: "b", the least recently used, goes
    assert cache.get("b") is None and cache.get("c") is results["c"] and cache.get("d") is results["d"]
    cache.put("big", DrawResult(np.zeros((100, 100))))  # larger than the whole budget: not kept
    assert cache.get("big") is None and cache.get("a") is results["a"]


def test_cached_draws_depend_on_the_data_and_settings_only(monkeypatch):
    from explorer.ui.state import sensitivity_model as sm

    monkeypatch.setattr(sm, "DRAW_CACHE", sm.DrawCache(max_bytes=2**24))
    calls = []
    monkeypatch.setattr(sm, "run_job", lambda job, progress=None: calls.append(job) or sm.DrawResult(
        np.ones((2, *job.values.shape))))
    a = SensitivityModel(data_model=DataModel(dataset="iris", mechanism="nmar_lowest", rate=0.1), n_imputations=3)
    b = SensitivityModel(data_model=DataModel(dataset="iris", mechanism="nmar_lowest", rate=0.1), n_imputations=3)
    first, second = sm.cached_run_job(a.job()), sm.cached_run_job(b.job())  # another session, the same screen
    assert len(calls) == 1 and second is first and not first.imputations.flags.writeable
    b.seed = 1
    sm.cached_run_job(b.job())
    assert len(calls) == 2
    # a selection model that ran out of time is tried again next time
    monkeypatch.setattr(sm, "run_job", lambda job, progress=None: calls.append(job) or sm.DrawResult(
        np.ones((2, *job.values.shape)), note="no selection model: its fit took more than 20 s", timed_out=True))
    b.seed = 2
    sm.cached_run_job(b.job())
    sm.cached_run_job(b.job())
    assert len(calls) == 4
