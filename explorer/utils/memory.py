"""Give the memory of closed sessions back to the operating system.

A served page builds tens of MB of Python and Bokeh objects. When its session closes, Python frees them,
but glibc's ``malloc`` keeps most of the freed heap for later instead of returning it: the server's
resident memory measured after a class of thirty left stayed at the peak (499 MB against 250 MB before
the class, ``results/load_sessions/REPORT.md``) although no session object was alive any more (checked
with :mod:`gc`). ``malloc_trim(0)`` returns the free pages of every arena to the system.

:class:`MemoryTrimmer` calls it a few seconds after the last of a burst of session closes (one call for a
whole class leaving, off the event loop). Linux with glibc only; elsewhere :func:`malloc_trim` does nothing
and says so. Standard library only (no Panel).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import sys
import threading

_libc = None
if sys.platform.startswith("linux"):
    try:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        _libc.malloc_trim.argtypes = [ctypes.c_size_t]
        _libc.malloc_trim.restype = ctypes.c_int
    except (OSError, AttributeError):  # not glibc (e.g. musl has no malloc_trim)
        _libc = None


def malloc_trim() -> bool:
    """Collect garbage, then return the free heap to the OS (glibc); True if memory was released."""
    gc.collect()
    if _libc is None:
        return False
    return bool(_libc.malloc_trim(0))


class MemoryTrimmer:
    """Calls :func:`malloc_trim` once, ``delay_s`` after the last :meth:`request` (a debounce).

    Thread-safe; the trim runs on a daemon timer thread, so a closing session never waits for it.
    """

    def __init__(self, delay_s: float = 5.0):
        self.delay_s = float(delay_s)
        self.trims = 0
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None

    def request(self, *_args) -> None:
        """Ask for a trim (any arguments are ignored: usable as a session-destroyed callback)."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = threading.Timer(self.delay_s, self._run)
            self._timer.daemon = True
            self._timer.start()

    def _run(self) -> None:
        with self._lock:
            self._timer = None
        malloc_trim()
        self.trims += 1

    def cancel(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None


#: The server process's trimmer (one per process, like the heap it trims)
TRIMMER = MemoryTrimmer()
