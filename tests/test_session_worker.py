"""explorer.ui.session.SessionWorker: one compute thread per served session, results shown on its loop."""

from __future__ import annotations

import threading
import time

import pytest

from explorer.ui.session import SessionWorker, run_then


class FakeDoc:
    """What the worker uses of a served Bokeh document: callbacks for the loop and the session's end."""

    def __init__(self):
        self.session_context = object()
        self.loop_calls: list = []
        self.destroyed_callbacks: list = []
        self._lock = threading.Lock()

    def add_next_tick_callback(self, cb):
        with self._lock:
            self.loop_calls.append(cb)

    def on_session_destroyed(self, cb):
        self.destroyed_callbacks.append(cb)

    def run_loop(self):
        """Run what was handed to the event loop (as Bokeh's loop would)."""
        with self._lock:
            calls, self.loop_calls = self.loop_calls, []
        for cb in calls:
            cb()
        return len(calls)


def _wait(pred, timeout=5.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.01)
    return False


def test_jobs_run_in_order_on_one_thread_and_are_shown_on_the_loop():
    doc = FakeDoc()
    worker = SessionWorker.of(doc)
    assert SessionWorker.of(doc) is worker  # one per session
    threads, shown = [], []
    for i in range(5):
        worker.submit(lambda i=i: (threads.append(threading.get_ident()), i)[1],
                      lambda r, e: shown.append((r, e, threading.get_ident())))
    assert _wait(lambda: worker.jobs_done == 5)
    assert len(set(threads)) == 1 and threads[0] != threading.get_ident()
    assert shown == []  # nothing drawn from the worker's thread
    assert doc.run_loop() == 5
    assert [r for r, _, _ in shown] == [0, 1, 2, 3, 4]
    assert all(e is None and t == threading.get_ident() for _, e, t in shown)
    assert not worker.busy()
    worker.stop()


def test_a_failing_job_is_shown_with_its_error_and_the_worker_goes_on(caplog):
    doc = FakeDoc()
    worker = SessionWorker.of(doc)
    got = []
    worker.submit(lambda: 1 / 0, lambda r, e: got.append(e))
    worker.submit(lambda: "next", lambda r, e: got.append(r))
    assert _wait(lambda: worker.jobs_done == 2)
    doc.run_loop()
    assert isinstance(got[0], ZeroDivisionError) and got[1] == "next"
    assert any("failed" in r.getMessage() for r in caplog.records)
    worker.stop()


def test_skip_if_busy_drops_jobs_of_the_same_key_until_shown():
    doc = FakeDoc()
    worker = SessionWorker.of(doc)
    gate = threading.Event()
    assert worker.submit(gate.wait, key="tick", skip_if_busy=True)
    assert not worker.submit(lambda: None, key="tick", skip_if_busy=True)  # dropped, not queued
    assert worker.submit(lambda: "other", key="other", skip_if_busy=True)  # another key is not blocked
    assert worker.busy("tick") and worker.busy()
    gate.set()
    assert _wait(lambda: worker.jobs_done == 2)
    assert worker.busy("tick")  # done but not shown yet: a tick still counts until drawn
    doc.run_loop()
    assert not worker.busy("tick")
    assert worker.submit(lambda: None, key="tick", skip_if_busy=True)
    worker.stop()


def test_the_end_of_the_session_stops_the_thread_and_drops_waiting_jobs():
    doc = FakeDoc()
    worker = SessionWorker.of(doc)
    gate, ran = threading.Event(), []
    worker.submit(gate.wait)
    worker.submit(lambda: ran.append("late"))
    for cb in doc.destroyed_callbacks:  # Bokeh calls it when the session ends (maybe twice)
        cb(None)
        cb(None)
    gate.set()
    assert _wait(lambda: not worker._thread.is_alive())
    assert ran == [] and worker.stopped
    assert doc.run_loop() == 0  # nothing shown for a closed session
    assert not worker.submit(lambda: None)


def test_outside_a_server_there_is_no_worker_and_run_then_runs_inline():
    assert SessionWorker.of() is None
    got = []
    assert run_then(lambda: threading.get_ident(), lambda r, e: got.append((r, e)))
    assert got == [(threading.get_ident(), None)]
    with pytest.raises(ZeroDivisionError):  # inline, errors reach the caller
        run_then(lambda: 1 / 0)


def test_redraw_from_another_thread_is_scheduled_once_on_the_loop():
    from explorer.ui.session import Redraw

    doc = FakeDoc()
    drawn = []
    redraw = Redraw(lambda: drawn.append(threading.get_ident()), doc=doc)
    threads = [threading.Thread(target=redraw) for _ in range(4)]  # e.g. watchers fired on the worker
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert drawn == []  # never drawn from those threads
    assert doc.run_loop() == 1  # four requests, one drawing
    assert drawn == [threading.get_ident()]
    redraw()
    assert doc.run_loop() == 1 and len(drawn) == 2  # the next request schedules again


def test_redraw_without_a_server_draws_at_once():
    from explorer.ui.session import Redraw

    drawn = []
    Redraw(lambda: drawn.append(1))()
    assert drawn == [1]


class _LoopDocument:
    """A real Bokeh Document of a served session whose event loop is run by hand."""

    def __new__(cls):
        from bokeh.document import Document

        class LoopDocument(Document):
            session_context = object()  # served

            def __init__(self):
                super().__init__()
                self.loop_calls = []

            def add_next_tick_callback(self, cb):
                self.loop_calls.append(cb)

            def on_session_destroyed(self, *cbs):
                pass

            def run_loop(self):
                calls, self.loop_calls = self.loop_calls, []
                for cb in calls:
                    cb()

        return LoopDocument()


def test_on_the_loop_panel_sees_the_sessions_own_document_whatever_bokeh_patched():
    """Bokeh keeps its "current document" in a process-wide list that Panel's thread pool pushes to for other
    sessions at the same moment; Panel then took another session's document (and handed its cached stylesheet
    models to this one: "Models must be owned by only a single document" under a class of 30). What a job shows,
    and what Redraw draws, runs with Panel's current document set to the job's session."""
    import panel as pn
    from bokeh.io.doc import patch_curdoc

    from explorer.ui.session import Redraw

    mine, other = _LoopDocument(), _LoopDocument()
    worker = SessionWorker.of(mine)
    seen = []
    try:
        worker.submit(lambda: 1, lambda r, e: seen.append(pn.state.curdoc))
        assert _wait(lambda: worker.jobs_done == 1)
        redraw = Redraw(lambda: seen.append(pn.state.curdoc), doc=mine)
        threading.Thread(target=redraw).start()  # from another thread: scheduled on the loop
        assert _wait(lambda: len(mine.loop_calls) == 2)
        with patch_curdoc(other):  # what a pool thread handling another session's event does meanwhile
            assert pn.state.curdoc is other
            mine.run_loop()
        assert seen == [mine, mine]
    finally:
        worker.stop()
