"""Frames computed on the session's worker and drawn on its event loop, only the latest one asked for.

A page whose frame takes some milliseconds of numpy (read-outs of a model, a probability surface) computes
it on the session's :class:`~explorer.ui.session.SessionWorker`, never on the event loop that every session
of the server shares, and draws the result back on the loop. :class:`LatestFrame` does that for one
page: :meth:`LatestFrame.request` starts a computation unless one is running; requests made meanwhile
fold into one more computation, started when the running one is shown. Play's frames therefore never
pile up on the worker, and the last frame drawn is always of the latest state. Without a server
(Jupyter, scripts, tests) the frame is computed and drawn at once.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable

from explorer.ui.session import run_then, served_doc

__all__ = ["LatestFrame"]


class LatestFrame:
    """Compute frames with ``compute()`` on the session's worker and draw them with ``show(frame, error)``.

    ``compute`` runs on the worker (computation only: no widget, pane or Bokeh model); ``show`` runs on
    the event loop with what ``compute`` returned, or with the exception it raised (``frame`` None).
    ``doc``: the session's document, taken when the page is made (default: the current served one).
    """

    def __init__(self, compute: Callable[[], object], show: Callable[[object, BaseException | None], None],
                 doc=None):
        self._compute, self._show = compute, show
        doc = doc if doc is not None else served_doc()
        self._doc_ref = weakref.ref(doc) if doc is not None else None
        self._lock = threading.Lock()  # guards the two flags only (never held while computing or drawing)
        self._running = False
        self._again = False

    @property
    def doc(self):
        """The session's document (None when not served, or once it is gone)."""
        return self._doc_ref() if self._doc_ref is not None else None

    @property
    def served(self) -> bool:
        """True when made in a served session (frames are computed on its worker)."""
        return self._doc_ref is not None

    @property
    def running(self) -> bool:
        """True while a frame is being computed (and not yet drawn)."""
        return self._running

    def request(self) -> None:
        """Compute and draw a frame of the current state; while one is running, one more after it."""
        with self._lock:
            if self._running:
                self._again = True
                return
            self._running = True
        try:
            accepted = self._doc_ref is None or self.doc is not None
            if accepted:
                accepted = run_then(self._compute, self._shown, doc=self.doc)
        except BaseException:  # not served: ``compute`` or ``show`` raised on this thread
            with self._lock:
                self._running = self._again = False
            raise
        if not accepted:  # the session's worker has stopped (the session is over)
            with self._lock:
                self._running = self._again = False

    def _shown(self, frame, error) -> None:
        with self._lock:
            self._running = False
            again, self._again = self._again, False
        try:
            self._show(frame, error)
        finally:
            if again:
                self.request()
