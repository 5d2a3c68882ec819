"""A stand-in for a served session's document, shared by the view tests that run pages "served"."""

from __future__ import annotations

import threading


class FakeDoc:
    """A served session's document as a page and its worker use it: what they hand to the event loop is queued,
    :meth:`run_callbacks` runs it (as the loop would)."""

    def __init__(self):
        self.session_context = object()
        self.calls = []
        self._lock = threading.Lock()

    def add_next_tick_callback(self, fn):
        with self._lock:
            self.calls.append(fn)

    def on_session_destroyed(self, *callbacks):
        pass

    def run_callbacks(self) -> int:
        n = 0
        while True:
            with self._lock:
                if not self.calls:
                    return n
                fn = self.calls.pop(0)
            fn()
            n += 1
