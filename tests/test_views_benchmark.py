"""Headless tests of the benchmark page: frames after a run, reference overlay, infinite / failed cells."""

from __future__ import annotations

import contextlib
import math
import time
from types import SimpleNamespace

import numpy as np
import pandas as pd
import panel as pn
import param
import pytest
from bokeh.document import Document

from explorer.reference import reference_cells
from explorer.ui.pages.benchmark import METRIC_ROWS, BenchmarkPage, bar_frame
from explorer.ui.state import benchmark_model as bmm
from explorer.ui.state.benchmark_model import BenchmarkModel


def summary_rows(*rows) -> pd.DataFrame:
    """Summary-shaped table from (rate, method, metric, mean, std[, n_failed])."""
    out = []
    for r in rows:
        rate, method, metric, mean, std, *rest = r
        failed = rest[0] if rest else 0
        out.append(dict(dataset="boston", mechanism="mcar", rate=rate, method=method, metric=metric, mean=mean,
                        std=std, n=0 if failed else 1, n_inf=int(np.isinf(mean)), n_failed=failed,
                        realised_rate=rate, seconds=0.1))
    return pd.DataFrame(out)


@pytest.fixture(scope="module")
def finished_page():
    view = BenchmarkPage(model=BenchmarkModel(methods=["mean", "poigmm", "knn"], rates=[0.1, 0.3]))
    pn.panel(view).get_root(Document())
    assert view.run()
    assert view.model.wait(timeout=60) == "done"
    view.poll()
    return view


def test_layout_builds_and_defaults():
    view = BenchmarkPage()
    root = pn.panel(view).get_root(Document())
    assert root is not None
    assert view._run.disabled is False and view._cancel.disabled is True
    assert view._status.object == "Not run yet."
    # without results the reference alone is drawn: the whole thesis figure (MICE at 0.9 is NaN there)
    f = view._panels[(0, "nrmse")].frame
    assert len(f["bars"]["x0"]) == 0 and len(f["ref"]["x0"]) == 4 * 5 - 1


def test_plot_data_after_a_run(finished_page):
    view = finished_page
    s = view.model.summary
    assert view._progress.value == view._progress.max == 6
    f = view._panels[(0, "nrmse")].frame
    assert sorted(np.unique(f["bars"]["method"])) == ["knn", "mean", "poigmm"]
    got = {(m, round(r, 6)): v for m, r, v in zip(f["bars"]["method"], f["bars"]["rate"], f["bars"]["y1"])}
    for rec in s[(s.metric == "nrmse")].to_dict("records"):
        assert got[(rec["method"], round(rec["rate"], 6))] == pytest.approx(rec["mean"])
    # bars of a rate group sit around the rate, in METHODS order, without overlapping
    x0, x1 = f["bars"]["x0"], f["bars"]["x1"]
    group = f["bars"]["rate"]
    for r in (0.1, 0.3):
        sel = np.argsort(x0[group == r])
        lefts, rights = x0[group == r][sel], x1[group == r][sel]
        assert np.all(rights[:-1] <= lefts[1:] + 1e-12)
        assert (lefts[0] + rights[-1]) / 2 == pytest.approx(r)
        assert list(f["bars"]["method"][group == r][sel]) == ["mean", "poigmm", "knn"]
    # kNN gives no NLL: no bar, and not marked failed
    nll = view._panels[(0, "nll")].frame
    assert "knn" not in set(nll["bars"]["method"]) and len(nll["failed"]["x"]) == 0
    # ... but keeps its slot: the bars of a method line up across the rows of the figure
    pos = {(m, r): x for m, r, x in zip(f["bars"]["method"], f["bars"]["rate"], f["bars"]["x0"])}
    for m, r, x in zip(nll["bars"]["method"], nll["bars"]["rate"], nll["bars"]["x0"]):
        assert x == pytest.approx(pos[(m, r)])
    # the table shows the summary of the mechanism
    assert len(view._table.value) == len(s)


def test_reference_overlay_toggles(finished_page):
    view = finished_page
    view.show_reference = True
    f = view._panels[(0, "nrmse")].frame
    ref = reference_cells("mcar", "nrmse", datasets=["boston"], methods=["mean", "poigmm"])
    ref = ref[ref.rate.isin([0.1, 0.3])]
    assert len(f["ref"]["x0"]) == len(ref) == 4  # knn has no reference
    np.testing.assert_allclose(np.sort(f["ref"]["y0"]), np.sort(ref["mean"]))
    assert "thesis notebook" in view._legend.object
    view.show_reference = False
    assert len(view._panels[(0, "nrmse")].frame["ref"]["x0"]) == 0
    assert "thesis notebook" not in view._legend.object
    view.show_reference = True


def test_infinite_nll_is_marked_at_the_top():
    s = summary_rows((0.1, "mean", "nll", 800.0, 40.0), (0.1, "poigmm", "nll", math.inf, np.nan),
                     (0.3, "mean", "nll", 2500.0, np.nan), (0.3, "poigmm", "nll", 1e300, np.nan))
    f = bar_frame(s, dataset="boston", mechanism="mcar", metric="nll", log=True)
    lo, top = f["ylim"]
    assert lo < 800 and top >= 2500 * 10
    assert list(f["inf_bars"]["method"]) == ["poigmm"] and f["inf_bars"]["y1"][0] == top
    assert np.isinf(f["inf_bars"]["mean"][0])
    assert "∞" in list(f["labels"]["text"])
    # 1e300 is off the scale: a bar clipped at the top, labelled with its magnitude (not as infinite)
    assert f["bars"]["y1"].max() == top and "1e300" in list(f["labels"]["text"])
    # error bar of the only cell with a std: ±2 sd around 800, floored at the axis bottom
    assert f["errors"]["y1"][0] == pytest.approx(880.0) and f["errors"]["y0"][0] == pytest.approx(720.0)


def test_failed_and_non_positive_cells_are_marked():
    s = summary_rows((0.1, "mean", "nll", -5.0, np.nan), (0.1, "mice", "nll", np.nan, np.nan, 1),
                     (0.1, "poigmm", "nll", 50.0, np.nan))
    f = bar_frame(s, dataset="boston", mechanism="mcar", metric="nll", log=True)
    assert len(f["failed"]["x"]) == 1 and "failed" in list(f["labels"]["text"])
    assert "≤0" in list(f["labels"]["text"])
    assert np.all(f["bars"]["y0"] > 0)  # a log axis needs positive bottoms


def test_reference_only_frame_and_other_mechanisms():
    f = bar_frame(None, dataset="ionosphere", mechanism="nmar_lowest", metric="nll", log=True, show_reference=True)
    assert len(f["bars"]["x0"]) == 0 and not f["empty"]
    ref = reference_cells("nmar_lowest", "nll", datasets=["ionosphere"])
    assert len(f["ref"]["x0"]) == ref["mean"].notna().sum()
    # infinite reference means sit on the top edge
    assert np.sum(f["ref"]["y0"] == f["ylim"][1]) >= int(np.isinf(ref["mean"]).sum())
    assert bar_frame(None, dataset="boston", mechanism="nmar_lowest", metric="pfc", show_reference=True)["empty"]


def test_mechanism_switch_redraws_in_place(finished_page):
    view = finished_page
    panel = view._panels[(0, "nrmse")]
    source = panel.sources["bars"]
    view.model.mechanism = "mar_rows"
    f = panel.frame
    assert len(f["bars"]["x0"]) == 0 and len(f["ref"]["x0"]) == 12  # no run for mar_rows: reference only
    assert len(source.data["x0"]) == 0 and len(panel.sources["ref"].data["x0"]) == 12
    assert "MAR_rows" in view._heads[0].object
    view.model.mechanism = "mcar"
    assert len(panel.frame["bars"]["x0"]) > 0 and len(source.data["x0"]) == len(panel.frame["bars"]["x0"])
    assert view._panels[(0, "nrmse")] is panel and panel.sources["bars"] is source  # updated, not rebuilt


def test_load_button_state_and_loading(tmp_path, monkeypatch):
    monkeypatch.setattr("explorer.ui.pages.benchmark.COMMITTED_SUMMARY", tmp_path / "summary.csv")
    monkeypatch.setattr(bmm, "COMMITTED_SUMMARY", tmp_path / "summary.csv")
    view = BenchmarkPage()
    assert view._load.disabled and "No committed full run" in view._load.description
    s = pd.concat([summary_rows((0.1, "mean", "nrmse", 0.7, 0.01)),
                   summary_rows((0.1, "mean", "nrmse", 0.9, 0.01)).assign(dataset="ionosphere")])
    s.to_csv(tmp_path / "summary.csv", index=False)
    view = BenchmarkPage()
    assert not view._load.disabled
    view._load.clicks += 1
    assert view.model.source == "summary.csv" and "Loaded" in view._status.object
    # both data sets of the file get a column, whatever the model's data set choice
    assert view._columns[1].visible and "ionosphere" in view._heads[1].object
    assert view._panels[(1, "nrmse")].frame["bars"]["y1"][0] == pytest.approx(0.9)
    assert view._panels[(1, "nrmse")].sources["bars"].data["y1"][0] == pytest.approx(0.9)


def test_bad_settings_show_an_alert():
    view = BenchmarkPage(model=BenchmarkModel(methods=[]))
    assert view.run() is False
    assert view._alert.visible and "at least one method" in view._alert.object
    assert view.model.status == "failed"


def test_rates_widget_and_model_stay_in_sync():
    view = BenchmarkPage()
    view._rates.value = [0.5, 0.1]
    assert view.model.rates == [0.1, 0.5]
    view.model.mechanism = "mcar_rows"  # 0.5 is not a garriga2017 rate of mcar_rows
    assert view.model.rates == [0.1] and view._rates.value == [0.1]


def test_every_metric_row_has_a_panel_per_slot_the_second_made_when_shown():
    view = BenchmarkPage()
    assert set(view._panels) == {(0, m) for m, _, _ in METRIC_ROWS}
    assert not view._columns[1].visible
    view.model.datasets = ["boston", "ionosphere"]
    assert set(view._panels) == {(s, m) for s in range(2) for m, _, _ in METRIC_ROWS}
    assert view._columns[1].visible and "ionosphere" in view._heads[1].object
    assert len(view._columns[1].objects) == 1 + len(METRIC_ROWS)  # the heading and one figure per metric


def test_run_and_cancel_buttons():
    view = BenchmarkPage(model=BenchmarkModel(methods=["mean", "poigmm", "mice"], rates=[0.1, 0.3, 0.5, 0.7]))
    view._run.clicks += 1
    assert view.model.status == "running"
    assert view._run.disabled and not view._cancel.disabled and view._load.disabled
    view._cancel.clicks += 1
    assert view.model.wait(timeout=60) in ("cancelled", "done")
    view.poll()
    assert view.model.done < view.model.total or view.model.status == "done"
    assert not view._run.disabled and view._cancel.disabled
    assert view._progress.bar_color in ("warning", "success")


def test_a_closed_session_cancels_the_run_and_ends_its_workers():
    psutil = pytest.importorskip("psutil")
    from panel.io.state import set_curdoc

    doc = Document()
    session = SimpleNamespace(id="closed-session", request=SimpleNamespace(arguments={}, headers={}, cookies={}))
    doc._session_context = lambda: session  # a served document (Bokeh holds a weak reference)
    # two cells of 100 MICE repetitions: over a minute each, unless the workers are ended
    model = BenchmarkModel(methods=["mice"], rates=[0.1, 0.3], repetitions=100, n_jobs=2)
    with set_curdoc(doc):
        view = BenchmarkPage(model=model)
    hooks = list(doc.session_destroyed_callbacks)
    assert view._on_session_destroyed in hooks
    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    workers = []
    try:
        assert view.run()
        deadline = time.monotonic() + 120
        while len(workers) < 2 and time.monotonic() < deadline:  # spawned workers, importing then running
            time.sleep(0.2)
            workers = [p for p in me.children(recursive=True) if p.pid not in before
                       and "spawn_main" in " ".join(p.cmdline())]
        assert len(workers) == 2 and model.running
        for hook in hooks * 2:  # Bokeh may run the hooks twice: idempotent
            hook(session)
        assert model.wait(timeout=20) == "cancelled"
        assert model.done < model.total and "cancelled after" in model.last_job
        gone, alive = psutil.wait_procs(workers, timeout=10)
        assert not alive, f"workers still running after the session closed: {[p.pid for p in alive]}"
        assert view.run() is False and model.status == "cancelled"  # a closed page starts nothing
    finally:
        model.close()
        for p in workers:
            with contextlib.suppress(psutil.Error):
                p.kill()


def test_a_frame_only_changes_data_never_the_documents_models():
    """Issue 19: the panels are built once; progress, new results, display settings and another mechanism only
    assign source data (and axis ranges), and every panel shows its last frame."""
    view = BenchmarkPage(model=BenchmarkModel(datasets=["boston", "ionosphere"], methods=["mean", "poigmm"]))
    doc = Document()
    doc.add_root(pn.panel(view).get_root(doc))
    before = {m.id for m in doc.models}
    figures = [p.figure for p in view._panels.values()]
    in_figures = {m.id for f in figures for m in f.references()}
    sources = {k: dict(p.sources) for k, p in view._panels.items()}
    both = lambda s: pd.concat([s, s.assign(dataset="ionosphere", mean=s["mean"] * 1.1)], ignore_index=True)
    partial = both(summary_rows((0.1, "mean", "nrmse", 0.7, 0.01), (0.1, "mean", "nll", 800.0, 40.0)))
    full = both(summary_rows((0.1, "mean", "nrmse", 0.7, 0.01), (0.1, "poigmm", "nrmse", 0.4, 0.02),
                             (0.3, "mean", "nrmse", 0.75, np.nan), (0.3, "poigmm", "nrmse", np.nan, np.nan, 1),
                             (0.1, "mean", "nll", 800.0, 40.0), (0.1, "poigmm", "nll", math.inf, np.nan),
                             (0.3, "poigmm", "nll", 1e300, np.nan), (0.1, "mean", "coverage95", 0.9, 0.0)))
    model = view.model
    with param.edit_constant(model):
        model.param.update(status="running", total=8, done=1, summary=partial, source="run")
    # the first results give the summary table its columns (made once per session); the figures are unchanged
    added = [m for m in doc.models if m.id not in before]
    assert added and all(type(m).__module__ == "bokeh.models.widgets.tables" for m in added), added
    before = {m.id for m in doc.models}
    with param.edit_constant(model):
        model.param.update(done=8, status="done", summary=full)
        model.param.update(status="running", done=0, summary=None)  # a new run: no rows, the columns stay
        model.param.update(done=8, status="done", summary=full)
    view.show_reference = False
    view.nll_metric = view.param.nll_metric.objects[-1]
    view.show_reference = True
    model.mechanism = "mar_rows"
    model.mechanism = "mcar"
    assert {m.id for m in doc.models} == before
    assert {m.id for f in figures for m in f.references()} == in_figures
    assert {k: dict(p.sources) for k, p in view._panels.items()} == sources
    # the figures show the last frame's numbers
    for (slot, metric), panel in view._panels.items():
        frame = panel.frame
        name = view.nll_metric if metric == "nll" else metric
        expected = bar_frame(full, dataset=["boston", "ionosphere"][slot], mechanism="mcar", metric=name,
                             log=metric == "nll", show_reference=True)
        for part in ("bars", "inf_bars", "errors", "failed", "labels", "ref"):
            for col, values in expected[part].items():
                np.testing.assert_array_equal(panel.sources[part].data[col], values, err_msg=f"{slot} {metric} {part}")
                np.testing.assert_array_equal(frame[part][col], values)
        assert (panel.y_range.start, panel.y_range.end) == pytest.approx(expected["ylim"])
        assert (panel.x_range.start, panel.x_range.end) == pytest.approx(expected["xlim"])
    nrmse = view._panels[(1, "nrmse")].sources["bars"].data
    assert sorted(nrmse["y1"]) == pytest.approx(sorted([0.77, 0.44, 0.825]))  # ionosphere: its own numbers
    assert len(view._table.value) == (full["mechanism"] == "mcar").sum()
