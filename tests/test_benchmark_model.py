"""Headless tests of BenchmarkModel: background run, progress, cancel, errors, loading results."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pandas as pd
import pytest

from explorer import benchmark as bm
from explorer.reference import GARRIGA2017_RATES
from explorer.ui.state import benchmark_model as bmm
from explorer.ui.state.benchmark_model import SUMMARY_COLUMNS, BenchmarkModel

CHEAP = dict(methods=["mean", "knn"], rates=[0.1, 0.3], quick=True)


def test_defaults_are_the_quick_boston_mcar_run():
    m = BenchmarkModel()
    assert (m.datasets, m.mechanism, m.rates, m.methods) == (["boston"], "mcar", [0.1, 0.3],
                                                            ["mean", "poigmm", "mice", "knn"])
    assert (m.repetitions, m.quick, m.n_jobs, m.status, m.summary) == (1, True, 1, "idle", None)


def test_run_to_completion_matches_a_direct_run():
    m = BenchmarkModel(**CHEAP, repetitions=2)
    assert m.start()
    assert m.status == "running" and m.total == 8 and m.done == 0
    assert m.wait(timeout=60) == "done"
    assert (m.done, m.total, m.eta, m.error) == (8, 8, 0.0, "")
    direct = bm.run_benchmark("boston", ["mcar"], [0.1, 0.3], ["mean", "knn"], 2, seed=0, quick=True)
    cols = ["dataset", "mechanism", "rate", "repetition", "method", "metric", "value"]
    pd.testing.assert_frame_equal(m.results[cols].reset_index(drop=True), direct[cols].reset_index(drop=True))
    pd.testing.assert_frame_equal(m.summary.drop(columns="seconds"), bm.summarise(direct).drop(columns="seconds"))
    assert tuple(m.summary.columns) == SUMMARY_COLUMNS
    assert "rep 1" in m.last_job and "0.3" in m.last_job
    assert m.progress_text().startswith("done: 8/8 jobs")


def test_progress_is_published_only_by_poll_and_grows():
    """The worker never sets parameters itself; poll() applies progress and partial tables in order."""
    m = BenchmarkModel(methods=["mean", "poigmm"], rates=[0.1, 0.3, 0.5])
    seen_threads, dones, sizes = set(), [], []
    m.param.watch(lambda *e: seen_threads.add(threading.get_ident()), ["done", "summary", "status"])
    m.param.watch(lambda e: dones.append(e.new), "done")
    m.param.watch(lambda e: sizes.append(0 if e.new is None else len(e.new)), "results")
    assert m.start()
    deadline = time.monotonic() + 60
    while m.running and time.monotonic() < deadline:
        m.poll()
        time.sleep(0.05)
    assert m.wait(timeout=10) == "done"
    assert seen_threads == {threading.get_ident()}  # every watcher ran on this (the polling) thread
    assert dones == sorted(dones) and dones[-1] == 6
    assert sizes[-1] == len(m.results) and sorted(sizes) == sizes  # partial tables only grow


def test_cancel_stops_early_and_keeps_partial_results(monkeypatch):
    gate = threading.Event()
    real = bm.run_benchmark

    def slow(*args, **kwargs):  # each cell waits for the test: deterministic cancellation point
        gate.wait(10)
        return real(*args, **kwargs)

    monkeypatch.setattr(bm, "run_benchmark", slow)
    m = BenchmarkModel(methods=["mean", "knn"], rates=[0.1, 0.3, 0.5, 0.7], quick=True)
    assert m.start() and m.total == 8
    gate.set()
    deadline = time.monotonic() + 30
    while m.done < 1 and time.monotonic() < deadline:
        m.poll()
        time.sleep(0.01)
    gate.clear()  # the next cell blocks until the cancel is in
    assert m.cancel()
    gate.set()
    assert m.wait(timeout=30) == "cancelled"
    assert 1 <= m.done < m.total
    assert m.results["method"].nunique() >= 1 and len(m.summary) > 0
    assert "cancelled after" in m.last_job
    assert not m.cancel()  # nothing left to cancel


def test_bad_settings_give_a_readable_error_not_an_exception():
    m = BenchmarkModel(methods=[], rates=[0.1])
    assert m.start() is False
    assert m.status == "failed" and "at least one method" in m.error
    m = BenchmarkModel(mechanism="nmar_random", variant="thesis", rates=[0.6], methods=["mean"])
    assert m.start() is False
    assert "nmar_random at rate 0.6" in m.error and "feasible range" in m.error
    m = BenchmarkModel(rates=[1.5], methods=["mean"])
    assert not m.start() and "(0, 1)" in m.error
    with pytest.raises(ValueError):  # single-parameter checks are param's (bounds, objects)
        m.repetitions = 0


def test_a_failing_method_is_reported_per_cell(monkeypatch):
    def broken(X, missing, binary, rng, quick):
        raise RuntimeError("no luck")

    monkeypatch.setitem(bm.METHODS, "knn", bm.Method("knn", broken, "point", "broken", "broken"))
    m = BenchmarkModel(methods=["mean", "knn"], rates=[0.2])
    assert m.start() and m.wait(60) == "done"
    knn = m.summary[m.summary.method == "knn"]
    assert (knn["n_failed"] == 1).all() and knn["mean"].isna().all()
    assert "FAILED" in m.last_job or m.results.loc[m.results.method == "knn", "error"].str.contains("no luck").all()


def test_start_while_running_is_refused():
    m = BenchmarkModel(methods=["mean", "poigmm"], rates=[0.1, 0.3, 0.5])
    assert m.start()
    assert m.start() is False and "running" in m.error
    m.cancel()
    assert m.wait(60) in ("cancelled", "done")


def test_mechanism_change_keeps_valid_rates_else_uses_garriga2017():
    m = BenchmarkModel(rates=[0.1, 0.3])
    m.mechanism = "nmar_lowest"
    assert m.rates == [0.1, 0.3]
    m.rates = [0.7, 0.9]
    m.mechanism = "mar_rows"
    assert m.rates == list(GARRIGA2017_RATES["mar_rows"])


def test_settings_round_trip():
    m = BenchmarkModel(datasets=["ionosphere"], mechanism="mcar_rows", rates=[0.3], methods=["mean"], seed=4)
    s = m.settings()
    other = BenchmarkModel()
    other.apply_settings(s)
    assert other.settings() == s and other.rates == [0.3] and other.datasets == ["ionosphere"]


def test_load_results_summary_and_tidy_tables(tmp_path):
    df = bm.run_benchmark("boston", ["mcar", "nmar_lowest"], [0.1], ["mean", "knn"], 1, seed=1, quick=True)
    df.to_csv(tmp_path / "results.csv", index=False)
    bm.summarise(df).to_csv(tmp_path / "summary.csv", index=False)
    m = BenchmarkModel(mechanism="mar_rows")
    assert m.load_results(tmp_path / "summary.csv")
    assert m.status == "done" and m.source == "summary.csv" and m.results is None
    assert m.mechanism == "mcar"  # mar_rows is not in the file: switched to the first one that is
    assert set(m.summary["mechanism"]) == {"mcar", "nmar_lowest"}
    assert m.load_results(tmp_path / "results.csv")
    assert len(m.results) == len(df)
    np.testing.assert_allclose(m.summary["mean"], bm.summarise(df)["mean"])


def test_load_results_errors_are_readable(tmp_path, monkeypatch):
    m = BenchmarkModel()
    assert not m.load_results(tmp_path / "nope.csv")
    assert "does not exist" in m.error and "run_imputation.py" in m.error
    (tmp_path / "bad.csv").write_text("a,b\n1,2\n")
    assert not m.load_results(tmp_path / "bad.csv")
    assert "is not a benchmark summary" in m.error and m.summary is None
    monkeypatch.setattr(bmm, "COMMITTED_SUMMARY", tmp_path / "missing" / "summary.csv")
    assert not m.load_results() and "does not exist" in m.error


def test_process_pool_gives_the_same_table():
    m = BenchmarkModel(methods=["mean", "knn"], rates=[0.1, 0.3], n_jobs=2)
    assert m.start() and m.wait(120) == "done"
    one = BenchmarkModel(methods=["mean", "knn"], rates=[0.1, 0.3])
    assert one.start() and one.wait(60) == "done"
    pd.testing.assert_frame_equal(m.summary.drop(columns="seconds"), one.summary.drop(columns="seconds"))


def test_loading_the_committed_run_makes_the_settings_match_it():
    """After "Load committed full run" the sidebar must describe the table on screen, not the last run."""
    from explorer.ui.state.benchmark_model import COMMITTED_SUMMARY

    m = BenchmarkModel(datasets=["boston"], methods=["mean"], rates=[0.1], repetitions=1, quick=True)
    assert m.load_results(COMMITTED_SUMMARY)
    summary = m.summary
    assert set(m.datasets) == set(summary["dataset"]) and set(m.methods) == set(summary["method"])
    shown = summary[summary["mechanism"] == m.mechanism]
    assert sorted(m.rates) == sorted({float(r) for r in shown["rate"]})
    assert m.repetitions == int(summary["n"].max()) and m.quick is False
    assert m.source == "summary.csv" and m.status == "done"  # the loaded table stays


class SessionThread:
    """A served session's compute thread, driven by the test: ``submit`` queues a job; :meth:`run_next` runs its
    ``work`` on another thread, then its ``then`` on the test's thread (the session's event loop)."""

    def __init__(self, accept: int | None = None):
        self.queue: list = []
        self.jobs = 0
        self.accept = accept  # jobs taken before the thread "stops" (None: all)

    def submit(self, work, then) -> bool:
        if self.accept is not None and self.jobs + len(self.queue) >= self.accept:
            return False
        self.queue.append((work, then))
        return True

    def run_next(self) -> None:
        work, then = self.queue.pop(0)
        out = {}
        t = threading.Thread(target=lambda: out.setdefault("result", work()))
        t.start()
        t.join(60)
        assert not t.is_alive()
        self.jobs += 1
        then(out["result"], None)


def test_a_served_run_is_one_job_per_cell_on_the_sessions_thread():
    session = SessionThread()
    m = BenchmarkModel(**CHEAP, repetitions=2)  # 2 rates x 2 methods: 4 cells of 2 jobs
    seen_threads, dones = set(), []
    m.param.watch(lambda *e: seen_threads.add(threading.get_ident()), ["done", "summary", "status"])
    m.param.watch(lambda e: dones.append(e.new), "done")
    assert m.start(submit=session.submit)
    assert m.status == "running" and len(session.queue) == 1  # one cell at a time: the next after this one
    while session.queue:
        session.run_next()
        assert len(session.queue) <= 1
    assert session.jobs == 4 and not m.running
    assert m.status == "done" and (m.done, m.total) == (8, 8) and m.error == ""
    assert seen_threads == {threading.get_ident()}  # parameters change on the session's loop only
    assert dones == sorted(dones) and dones[-1] == 8
    direct = bm.run_benchmark("boston", ["mcar"], [0.1, 0.3], ["mean", "knn"], 2, seed=0, quick=True)
    pd.testing.assert_frame_equal(m.summary.drop(columns="seconds"), bm.summarise(direct).drop(columns="seconds"))


def test_a_served_run_cancels_between_cells_and_ends_with_its_session():
    session = SessionThread()
    m = BenchmarkModel(**CHEAP)
    assert m.start(submit=session.submit)
    session.run_next()
    assert m.done == 1 and m.running and len(session.queue) == 1
    assert m.cancel()
    session.run_next()  # the next cell sees the cancel: nothing computed, the run ends
    assert not session.queue and not m.running
    assert m.status == "cancelled" and m.done == 1 and "cancelled after 1 of 4 jobs" in m.last_job
    # the session's thread stops: the next cell is refused, the run ends as cancelled
    stopped = SessionThread(accept=1)
    m = BenchmarkModel(**CHEAP)
    assert m.start(submit=stopped.submit)
    stopped.run_next()
    assert not stopped.queue and not m.running and m.status == "cancelled" and m.done == 1
    # the session ends between two cells: close() ends the run at once; the queued cell computes nothing
    session = SessionThread()
    m = BenchmarkModel(**CHEAP)
    assert m.start(submit=session.submit)
    session.run_next()
    assert m.close() and not m.running
    assert m.wait(timeout=1) == "cancelled" and m.done == 1
    session.run_next()
    assert m.done == 1 and m.status == "cancelled"
    assert m.start(submit=session.submit)  # the model can run again
    while session.queue:
        session.run_next()
    assert m.status == "done" and m.done == 4


def test_result_files_are_parsed_once_and_shared(tmp_path):
    df = bm.run_benchmark("boston", ["mcar"], [0.1], ["mean"], 1, seed=1, quick=True)
    bm.summarise(df).to_csv(tmp_path / "summary.csv", index=False)
    a, b = BenchmarkModel(), BenchmarkModel()
    assert a.load_results(tmp_path / "summary.csv") and b.load_results(tmp_path / "summary.csv")
    assert a.summary is b.summary  # one parse per process, read-only
    bm.summarise(df.assign(value=df["value"] * 2)).to_csv(tmp_path / "summary.csv", index=False)
    later = (tmp_path / "summary.csv").stat().st_mtime_ns + 10**9
    os.utime(tmp_path / "summary.csv", ns=(later, later))  # whatever the file system's clock resolution
    assert a.load_results(tmp_path / "summary.csv")  # a changed file is read again
    assert a.summary is not b.summary and np.allclose(a.summary["mean"], 2 * b.summary["mean"], equal_nan=True)
