"""explorer.ui.session.SessionWorker: one compute thread per served session, results shown on its loop."""

from __future__ import annotations

import subprocess
import sys
import textwrap
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


# ----------------------------------------------------------------------------- a callback the loop never got
class StrandingDoc(FakeDoc):
    """A served document whose first ``strand`` registrations never reach the loop (what a document hold lets
    happen, see :func:`explorer.ui.session.hand_to_loop`); later ones do."""

    def __init__(self, strand=1):
        super().__init__()
        self.strand, self.stranded = strand, []

    def add_next_tick_callback(self, cb):
        with self._lock:
            if self.strand > 0:
                self.strand -= 1
                self.stranded.append(cb)
                return
        super().add_next_tick_callback(cb)


@pytest.fixture
def quick_redelivery(monkeypatch):
    from explorer.ui import session

    monkeypatch.setattr(session, "REDELIVER_S", 0.05)
    monkeypatch.setattr(session, "REDELIVER_MAX_S", 0.2)


def test_a_job_result_the_loop_never_got_is_handed_over_again_and_shown_once(quick_redelivery):
    doc = StrandingDoc(strand=2)
    worker = SessionWorker.of(doc)
    shown = []
    try:
        worker.submit(lambda: "stepped", lambda r, e: shown.append(r), key="step")
        assert _wait(lambda: worker.jobs_done == 1)
        assert worker.busy("step") and doc.run_loop() == 0  # stranded: without a second hand-over, shown never
        assert _wait(lambda: len(doc.loop_calls) == 1)  # handed over again (the second one stranded too)
        assert doc.run_loop() == 1 and shown == ["stepped"] and not worker.busy("step")
        for cb in doc.stranded:  # a stranded registration that runs after all (the hold's next release)
            cb()
        time.sleep(0.3)
        doc.run_loop()
        assert shown == ["stepped"]  # shown once, however many registrations ran
    finally:
        worker.stop()


def test_a_callback_that_runs_is_not_handed_over_again(quick_redelivery):
    from explorer.ui import session

    doc, ran = FakeDoc(), []
    assert session.hand_to_loop(doc, lambda: ran.append(1))
    assert doc.run_loop() == 1 and ran == [1]
    time.sleep(0.3)
    assert doc.run_loop() == 0 and ran == [1]
    assert not any(h.doc_ref() is doc for h in list(session._HANDOFFS.values()))  # nothing of it left


def test_the_courier_thread_ends_when_every_callback_has_run():
    """In a fresh process: hand-overs left by other tests of this process (to documents whose loop never runs)
    would keep the courier alive here for their remaining tries."""
    script = textwrap.dedent(
        """
        import threading, time
        from explorer.ui import session

        class Doc:
            def __init__(self):
                self.calls = []
            def add_next_tick_callback(self, cb):
                self.calls.append(cb)

        doc, ran = Doc(), []
        assert session.hand_to_loop(doc, lambda: ran.append(1))
        courier = session._COURIER[0]
        assert courier is not None and courier.is_alive()  # a hand-over outstanding: the courier watches it
        doc.calls.pop()()
        courier.join(timeout=5)
        assert ran == [1] and not courier.is_alive() and session._COURIER[0] is None
        assert not [t for t in threading.enumerate() if t.name == "explorer-loop-courier"]
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_a_stranded_redraw_is_drawn_and_the_next_request_schedules_again(quick_redelivery):
    from explorer.ui.session import Redraw

    doc, drawn = StrandingDoc(strand=1), []
    redraw = Redraw(lambda: drawn.append(1), doc=doc)
    threading.Thread(target=redraw).start()
    assert _wait(lambda: len(doc.loop_calls) == 1)
    redraw()  # folded into the one waiting (from the test's thread too: it does not hold the document)
    assert doc.run_loop() == 1 and drawn == [1]
    threading.Thread(target=redraw).start()
    assert _wait(lambda: len(doc.loop_calls) == 1) and doc.run_loop() == 1 and drawn == [1, 1]


def test_a_closed_sessions_undelivered_callbacks_are_dropped(quick_redelivery):
    from explorer.ui import session

    class Context:
        destroyed = False

    doc, ran = StrandingDoc(strand=1), []
    doc.session_context = Context()
    assert session.hand_to_loop(doc, lambda: ran.append(1))
    doc.session_context.destroyed = True
    assert _wait(lambda: not any(h.doc_ref() is doc for h in list(session._HANDOFFS.values())))
    time.sleep(0.2)
    assert doc.run_loop() == 0 and ran == []


def test_a_notice_lost_by_a_real_documents_hold_release_is_made_again(quick_redelivery):
    """The race on a real Bokeh document: a thread registers a next-tick callback while the loop holds the
    document, so Bokeh collects the notice with the held events; the release copies the held events and empties
    the list, and the notice appended in between is gone (here: the hold is released with the notice dropped, as
    that interleaving leaves it). The session (a receiver of the document's events) hears of the callback only
    because it is registered again."""
    from bokeh.document import Document

    from explorer.ui import session

    class Session:  # what Bokeh's ServerSession does with the notice: schedule the callback on its loop
        def __init__(self):
            self.scheduled = []

        def _session_callback_added(self, event):
            self.scheduled.append(event.callback.callback)

    doc, server, ran = Document(), Session(), []
    doc.callbacks.on_change_dispatch_to(server)
    doc.hold("combine")
    done = threading.Event()
    threading.Thread(target=lambda: (session.hand_to_loop(doc, lambda: ran.append(1)), done.set())).start()
    assert done.wait(5)
    assert any(type(e).__name__ == "SessionCallbackAdded" for e in doc.callbacks._held_events)
    doc.callbacks._held_events = []  # the release's copy was taken before the notice was appended
    doc.unhold()
    assert server.scheduled == []  # the session never heard of it ...
    assert _wait(lambda: len(server.scheduled) == 1)  # ... until it was registered again
    server.scheduled[0]()
    assert ran == [1]
