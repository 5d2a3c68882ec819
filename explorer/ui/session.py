"""The served browser session a page belongs to, and the one thread that computes for it.

:func:`served_doc` tells whether code runs in a served session (and which). :class:`SessionWorker`
is that session's single compute thread: models are stepped and fitted there (numpy and LAPACK
release the GIL), never on the event loop, and the page draws the result back on the event loop,
where the session's document may be changed. One thread per session bounds what one student can
take of the server to one core, whatever they click; a closed tab stops its worker.

Outside a server (Jupyter, scripts, tests) there is no worker: :meth:`SessionWorker.of` returns
None and callers run the work directly (see :func:`run_then`).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable

import panel as pn
from bokeh.document import Document
from panel.io.state import set_curdoc

from explorer.ui.panel_writes import complete_queued_writes

__all__ = ["Redraw", "SessionWorker", "current", "hand_to_loop", "hold", "holds_document", "push", "run_then",
           "served_doc"]

log = logging.getLogger(__name__)

complete_queued_writes()  # every page's changes reach the browser (see explorer.ui.panel_writes)


def served_doc():
    """The served session's document (a worker thread hands its UI updates to it), or None outside a server
    (Jupyter, scripts and tests)."""
    doc = pn.state.curdoc
    if doc is None or doc.session_context is None or pn.state._jupyter_kernel_context:
        return None
    return doc


@contextlib.contextmanager
def hold(doc=None, *, freeze: bool = False):
    """``pn.io.hold``: the changes made inside go to the browser as one message when the block ends (``freeze``:
    and the document's model graph is walked once, then), except in a served session that Panel does not count
    as connected yet.

    Panel (1.9.4) takes a session as connected only when its thread pool has handled the browser's
    ``document_ready``, and drops the Bokeh model changes held in a document that is not connected, trusting the
    document's first serialisation to carry them. But the browser pulls the document (PULL-DOC) before it sends
    ``document_ready``: a change made in between (a worker's first result landing while the page renders) was
    lost, and the page showed its empty plots for good. There the block runs unheld, and Bokeh sends each change
    to the browser, which is subscribed from the moment its websocket opened.
    """
    doc = doc if doc is not None else pn.state.curdoc
    if doc is not None and getattr(doc, "session_context", None) is not None and not pn.state._connected.get(doc):
        with doc.models.freeze() if freeze else contextlib.nullcontext():
            yield
        return
    with pn.io.hold(doc, freeze=freeze):
        yield


def push(*panes) -> None:
    """Send directly changed Bokeh models of ``panes`` to a notebook (nothing to do when served or headless:
    a served session's document sends its changes itself)."""
    if served_doc() is None:
        pn.io.push_notebook(*panes)


def holds_document(doc) -> bool:
    """True when the calling code may change ``doc``'s Bokeh models now: it runs on the session's event loop
    in a callback of that document (or before the session is connected: the page is being built)."""
    try:
        return bool(pn.state._unblocked(doc))
    except Exception:  # a Panel without the check: only the document's own callbacks may change it
        return pn.state.curdoc is doc and threading.current_thread() is threading.main_thread()


class Redraw:
    """Drawing a page on its session's event loop, whatever thread asks for it.

    ``redraw()`` calls ``draw()`` at once where the document may be changed (on the loop, in the page's
    build, or with no server: Jupyter, scripts, tests); from any other thread (a widget event in Panel's
    thread pool, a watcher fired by a model on the session's worker) it schedules one ``draw()`` on the
    loop, and further requests made before that one ran are folded into it. Bokeh models changed
    directly (``source.data = ...``) must only be changed this way.

    ``doc``: the session's document, taken when the page is made (default: the current one).
    """

    def __init__(self, draw: Callable[[], None], doc=None):
        self._draw = draw
        self._doc_ref = None
        doc = doc if doc is not None else served_doc()
        if doc is not None:
            self._doc_ref = weakref.ref(doc)
        self._scheduled = False
        self._lock = threading.Lock()

    def __call__(self) -> None:
        doc = self._doc_ref() if self._doc_ref is not None else None
        if doc is None or holds_document(doc):
            self._draw()
            return
        with self._lock:
            if self._scheduled:
                return
            self._scheduled = True
        if not hand_to_loop(doc, self._run):  # the session is gone: nothing to draw for
            with self._lock:
                self._scheduled = False

    def _run(self) -> None:
        with self._lock:
            self._scheduled = False
        doc = self._doc_ref() if self._doc_ref is not None else None
        if doc is None:
            return
        with current(doc):  # see SessionWorker._show: Panel must know whose document this is
            self._draw()


#: A callback handed to a session's loop from a thread that has not run after this many seconds is handed over
#: again (then after twice as long, up to REDELIVER_MAX_S, at most REDELIVER_TRIES times).
REDELIVER_S = 2.0
REDELIVER_MAX_S = 30.0
REDELIVER_TRIES = 8


class _Handoff:
    __slots__ = ("doc_ref", "run", "due", "tries")

    def __init__(self, doc, run):
        self.doc_ref, self.run = weakref.ref(doc), run
        self.due, self.tries = time.monotonic() + REDELIVER_S, 0


_HANDOFFS: dict[int, _Handoff] = {}  # id(run) -> a callback handed to a loop that has not run yet
_HANDOFFS_LOCK = threading.Condition()
_COURIER: list = [None]  # the thread that hands undelivered callbacks over again (while there are any)


def hand_to_loop(doc, callback: Callable[[], None]) -> bool:
    """Run ``callback()`` once on the event loop of ``doc``'s session, from any thread; False if the document is gone.

    Bokeh's ``Document.add_next_tick_callback`` is the way from a thread to the loop, but it is not safe against
    a hold of the document: when the loop (or Panel's thread pool) holds the document at that moment, the
    notice of the new callback is collected with the held events, and the release of a hold (Bokeh's
    ``unhold``, Panel's ``unlocked``) copies the held events and then empties the list. A notice appended in
    between is dropped, or left behind with no hold to release it, and the callback runs only at the document's
    next hold, which a quiet session may never make: a Step's result computed and never shown, and Play then
    waiting for it for good. So each callback is registered again
    while it has not run (after :data:`REDELIVER_S` seconds, then twice as long, ...); whichever
    registration runs first calls it, the others do nothing. A session that ends drops its callbacks.
    """
    state = {"done": False}

    def once() -> None:
        with _HANDOFFS_LOCK:
            if state["done"]:
                return
            state["done"] = True
            _HANDOFFS.pop(id(once), None)
        callback()

    with _HANDOFFS_LOCK:  # registered before the loop can run it (``once`` then takes it out again)
        _HANDOFFS[id(once)] = _Handoff(doc, once)
    try:
        doc.add_next_tick_callback(once)
    except Exception:  # the session is gone
        with _HANDOFFS_LOCK:
            _HANDOFFS.pop(id(once), None)
        return False
    with _HANDOFFS_LOCK:
        if _COURIER[0] is None and not state["done"]:
            _COURIER[0] = threading.Thread(target=_courier, name="explorer-loop-courier", daemon=True)
            _COURIER[0].start()
    return True


def _courier() -> None:
    """Hand the callbacks that have not run over again until none is left (then the thread ends)."""
    while True:
        with _HANDOFFS_LOCK:
            if not _HANDOFFS:
                _COURIER[0] = None
                return
            now = time.monotonic()
            due = [h for h in _HANDOFFS.values() if h.due <= now]
            for h in due:
                h.tries += 1
                h.due = now + min(REDELIVER_S * 2 ** h.tries, REDELIVER_MAX_S)
            wait = min(h.due for h in _HANDOFFS.values()) - now
        for h in due:
            doc = h.doc_ref()
            context = getattr(doc, "session_context", None)
            gone = doc is None or bool(getattr(context, "destroyed", False)) or h.tries > REDELIVER_TRIES
            if not gone:
                try:
                    doc.add_next_tick_callback(h.run)
                    log.debug("a callback handed to the session's loop had not run: handed over again")
                except Exception:
                    gone = True
            if gone:
                with _HANDOFFS_LOCK:
                    if _HANDOFFS.get(id(h.run)) is h:
                        _HANDOFFS.pop(id(h.run))
        with _HANDOFFS_LOCK:  # new callbacks are due after REDELIVER_S at the earliest
            _HANDOFFS_LOCK.wait(min(max(0.01, wait), REDELIVER_S))


def current(doc):
    """A context in which Panel takes ``doc`` as the current document (for a real Bokeh document; the stand-ins
    of the view tests are left alone). See :meth:`SessionWorker._show` for why callbacks on the loop need it."""
    return set_curdoc(doc) if isinstance(doc, Document) else contextlib.nullcontext()


_WORKERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_WORKERS_LOCK = threading.Lock()
_STOP = object()


class SessionWorker:
    """The compute thread of one served session.

    Jobs run one after the other, in the order submitted. A job is ``work()`` (computation only: it
    touches no widget, pane or Bokeh model) followed by ``then(result, error)`` on the session's
    event loop (under the document's lock), where the page draws what ``work`` produced. ``then`` is
    called once for every job that started, also when ``work`` raised (``error`` is the exception;
    it is logged too), so a page's "busy" state always ends. Jobs with a ``key`` can be dropped while
    one with the same key is waiting or running (``skip_if_busy``): Play's ticks never pile up.

    The thread starts with the first job and ends with the session (``on_session_destroyed``) or
    :meth:`stop`: jobs still waiting are dropped and their ``then`` is not called.
    """

    def __init__(self, doc):
        self._doc_ref = weakref.ref(doc)
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._pending: Counter = Counter()  # key -> jobs with that key waiting or running
        self._stopped = False
        self.jobs_done = 0

    # ------------------------------------------------------------------ access
    @classmethod
    def of(cls, doc=None) -> SessionWorker | None:
        """The worker of ``doc`` (default: the current served session's document), created on first use.

        None outside a served session: run the work directly there.
        """
        doc = doc if doc is not None else served_doc()
        if doc is None or getattr(doc, "session_context", None) is None:
            return None
        with _WORKERS_LOCK:
            worker = _WORKERS.get(doc)
            if worker is None:
                worker = cls(doc)
                _WORKERS[doc] = worker
                try:
                    doc.on_session_destroyed(worker._on_session_destroyed)
                except Exception:  # a document without session callbacks (tests): stopped by stop()
                    pass
        return worker

    @property
    def stopped(self) -> bool:
        return self._stopped

    def busy(self, key=None) -> bool:
        """True while a job (with ``key``, if given) is waiting or running."""
        with self._lock:
            return self._pending[key] > 0 if key is not None else sum(self._pending.values()) > 0

    # ------------------------------------------------------------------ jobs
    def submit(self, work: Callable[[], object], then: Callable[[object, BaseException | None], None] | None = None,
               *, key=None, skip_if_busy: bool = False) -> bool:
        """Queue ``work`` on the session's thread; ``then(result, error)`` runs on the event loop after it.

        Returns False when the job was not queued: the worker is stopped, or ``skip_if_busy`` and a job
        with the same ``key`` is waiting or running.
        """
        with self._lock:
            if self._stopped or (skip_if_busy and self._pending[key] > 0):
                return False
            self._pending[key] += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="explorer-session-worker", daemon=True)
                self._thread.start()
        self._queue.put((work, then, key))
        return True

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            if job is _STOP:
                return
            work, then, key = job
            if self._stopped:
                return
            result, error = None, None
            try:
                result = work()
            except Exception as exc:  # shown by ``then``; logged so that nothing fails silently
                error = exc
                log.exception("a job of the session's worker failed")
            self.jobs_done += 1
            self._show(then, result, error, key)

    def _show(self, then, result, error, key) -> None:
        doc = self._doc_ref()

        def on_loop():
            with self._lock:
                self._pending[key] = max(0, self._pending[key] - 1)
            if then is not None and not self._stopped:
                # Bokeh runs this with its "current document" patched in a process-wide list, which Panel's
                # thread pool (``--num-threads``) pushes to at the same time for other sessions' events: Panel
                # then took another session's document for this one and handed that session's cached
                # stylesheet models to this one ("Models must be owned by only a single document", seen
                # with 30 sessions). Panel's own, per-task current document is set here instead.
                with current(doc):
                    then(result, error)

        if doc is None or self._stopped or not hand_to_loop(doc, on_loop):  # the document went away meanwhile
            with self._lock:
                self._pending[key] = max(0, self._pending[key] - 1)

    # ------------------------------------------------------------------ end
    def stop(self) -> None:
        """Stop for good: waiting jobs are dropped, a running one finishes without being shown."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            self._pending.clear()
        self._queue.put(_STOP)

    def _on_session_destroyed(self, session_context) -> None:
        self.stop()


def run_then(work: Callable[[], object], then: Callable[[object, BaseException | None], None] | None = None,
             *, key=None, skip_if_busy: bool = False, doc=None) -> bool:
    """Run ``work`` on the session's worker and ``then(result, error)`` on its event loop; outside a server,
    both at once on the calling thread (errors are raised there, not passed to ``then``).

    Returns False when a served session's worker did not take the job (see :meth:`SessionWorker.submit`).
    """
    worker = SessionWorker.of(doc)
    if worker is None:
        result = work()
        if then is not None:
            then(result, None)
        return True
    return worker.submit(work, then, key=key, skip_if_busy=skip_if_busy)
