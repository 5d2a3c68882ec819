"""Process pools whose workers never outlive the process that started them.

A worker of :class:`concurrent.futures.ProcessPoolExecutor` waits for its next job on a pipe whose
write end it holds itself, so when the parent is killed (``kill -9`` of a Panel server) nothing
wakes it: it finishes its job, then idles for ever, owned by PID 1. :func:`worker_pool` gives every
worker :func:`exit_with_parent` as its pool initializer:

* on Linux, ``prctl(PR_SET_PDEATHSIG, SIGKILL)``: the kernel kills the worker when its parent dies
  (strictly: when the parent *thread* that started it ends; workers are started by ``submit``, so
  submit from a thread that outlives the pool, as ``with worker_pool(...)`` inside one call does);
* everywhere, a daemon watchdog thread that polls :func:`os.getppid` and calls :func:`os._exit`
  once the parent has changed (the worker was re-parented: its parent died).

Both work after SIGKILL of the parent, when no cleanup code of the parent runs. For the shutdowns
that do run cleanup code, the live pools are tracked: at interpreter exit (before
``concurrent.futures`` joins its threads, which would wait for every queued job) each one is
stopped with :func:`stop_pool` (pending jobs cancelled, workers terminated), and leaving
``with worker_pool(...)`` by an exception (e.g. Ctrl-C) does the same instead of waiting for the
queue to drain. A forked worker inherits that exit hook but not the pools (they are forgotten
after ``fork``: their locks may be held by the thread that forked).

Futures cancelled by ``shutdown(cancel_futures=True)`` are never reported to
:func:`concurrent.futures.as_completed` (it would wait for them for ever); iterate with
:func:`as_done` instead.

Used by :func:`explorer.benchmark.run_benchmark` and
:class:`explorer.ui.state.benchmark_model.BenchmarkModel`. Standard library only (no Panel).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time
import weakref
from collections.abc import Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait

__all__ = ["worker_pool", "stop_pool", "as_done", "exit_with_parent", "ORPHAN_EXIT_CODE"]

#: Exit status of a worker that found its parent gone.
ORPHAN_EXIT_CODE = 70
#: Seconds between two checks of the watchdog thread.
POLL_SECONDS = 0.5
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>

_live_lock = threading.Lock()
_live: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # pool -> pid of its creator


def _forget_pools_after_fork() -> None:
    """In a forked child: the parent's pools are not ours (their locks may even be held for ever)."""
    global _live_lock, _live
    _live_lock = threading.Lock()
    _live = weakref.WeakKeyDictionary()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pools_after_fork)


def _die_with_parent_signal() -> bool:
    """Linux: ask the kernel for SIGKILL when the parent dies. False where unavailable (watchdog only)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    except (OSError, AttributeError):  # no libc / no prctl symbol
        return False


def exit_with_parent(parent_pid: int | None = None, poll_seconds: float = POLL_SECONDS) -> None:
    """Pool initializer: end this worker process as soon as its parent process is gone.

    Parameters
    ----------
    parent_pid : int, optional
        The pid the worker's parent must have (the process that created the pool). If the parent
        is already another one when the worker starts, the creator died meanwhile: exit at once.
        None: take the current parent (e.g. the "forkserver" start method, whose server is the
        parent; it exits when the creator dies, which re-parents the worker).
    poll_seconds : float
        Period of the watchdog thread.

    Notes
    -----
    Exits with :func:`os._exit` (status :data:`ORPHAN_EXIT_CODE`): no cleanup runs in an orphan,
    whose results nobody can receive.
    """
    if poll_seconds <= 0:
        raise ValueError(f"poll_seconds must be positive, got {poll_seconds!r}.")
    expected = os.getppid() if parent_pid is None else int(parent_pid)
    _die_with_parent_signal()
    if os.getppid() != expected:  # the parent died before the death signal was armed
        os._exit(ORPHAN_EXIT_CODE)

    def watch() -> None:
        while True:
            time.sleep(poll_seconds)
            if os.getppid() != expected:
                os._exit(ORPHAN_EXIT_CODE)

    threading.Thread(target=watch, name="explorer-orphan-watchdog", daemon=True).start()


def stop_pool(pool: ProcessPoolExecutor) -> None:
    """Cancel the pending jobs of ``pool`` and terminate its workers now (running jobs are lost).

    Idempotent and safe from any thread of the creating process; returns without waiting. The
    futures of the running jobs then fail with ``BrokenProcessPool``; the cancelled ones are seen
    by :func:`as_done` (not by ``as_completed``).
    """
    processes = list((getattr(pool, "_processes", None) or {}).values())  # shutdown() forgets them
    pool.shutdown(wait=False, cancel_futures=True)
    for p in processes:
        with contextlib.suppress(Exception):  # already reaped / exited
            if p.is_alive():
                p.terminate()
    with _live_lock:
        _live.pop(pool, None)


def _stop_live_pools() -> None:
    """Exit hook: stop the pools this process created (a forked worker inherits the hook, not the pools)."""
    with _live_lock:
        pools = [pool for pool, pid in _live.items() if pid == os.getpid()]
    for pool in pools:
        stop_pool(pool)


@contextlib.contextmanager
def worker_pool(max_workers: int, *, mp_context=None,
                poll_seconds: float = POLL_SECONDS) -> Iterator[ProcessPoolExecutor]:
    """A :class:`~concurrent.futures.ProcessPoolExecutor` whose workers die with this process.

    Parameters
    ----------
    max_workers : int
        Worker processes (positive).
    mp_context : multiprocessing context, optional
        Default: :func:`multiprocessing.get_context` (the platform's default start method).
    poll_seconds : float
        Period of the workers' watchdog (see :func:`exit_with_parent`).

    Yields
    ------
    ProcessPoolExecutor
        Use it from the thread that entered the ``with`` block. A normal exit waits for the jobs
        (as ``with ProcessPoolExecutor()`` does); an exception stops the pool (:func:`stop_pool`).
    """
    if not isinstance(max_workers, int) or isinstance(max_workers, bool) or max_workers < 1:
        raise ValueError(f"max_workers must be a positive integer, got {max_workers!r}.")
    ctx = mp_context if mp_context is not None else multiprocessing.get_context()
    parent = None if ctx.get_start_method() == "forkserver" else os.getpid()
    pool = ProcessPoolExecutor(max_workers=max_workers, mp_context=ctx, initializer=exit_with_parent,
                               initargs=(parent, poll_seconds))
    with _live_lock:
        _live[pool] = os.getpid()
    try:
        yield pool
    except BaseException:
        stop_pool(pool)
        raise
    else:
        pool.shutdown(wait=True)
    finally:
        with _live_lock:
            _live.pop(pool, None)


def as_done(futures: Iterable[Future], poll_seconds: float = 0.25) -> Iterator[Future]:
    """Yield each future once it is finished or cancelled, in submission order within a batch.

    Like :func:`concurrent.futures.as_completed`, but a future cancelled by
    ``shutdown(cancel_futures=True)`` (:func:`stop_pool`) is yielded too, within ``poll_seconds``,
    instead of being waited for without end.
    """
    pending = list(dict.fromkeys(futures))
    while pending:
        wait(pending, timeout=poll_seconds, return_when=FIRST_COMPLETED)
        finished = [f for f in pending if f.done()]
        if finished:
            gone = set(finished)
            pending = [f for f in pending if f not in gone]
            yield from finished


# Run before concurrent.futures' own exit hook (threading's exit hooks run in reverse order of
# registration; that one is registered when concurrent.futures.process is imported, above): it
# joins the pools' threads, which first run every queued job.
try:
    threading._register_atexit(_stop_live_pools)
except (AttributeError, RuntimeError):  # other Pythons / registered during shutdown
    atexit.register(_stop_live_pools)
