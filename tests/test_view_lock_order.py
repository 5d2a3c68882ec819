"""Lock order of the pages whose ``refresh`` reads the model under its lock (no browser).

A served page has two paths into ``refresh``:

* a widget change runs the model's ``reset`` in Panel's thread pool: ``reset`` holds the MODEL's lock and
  publishes ``run_id``, whose watcher calls ``refresh``, which takes the VIEW's lock;
* the player's frame (``StepPlayer._bump`` on the event loop) calls ``refresh`` directly.

If ``refresh`` took the view's lock first and then read the model under the model's lock, the two paths
could each hold one lock and wait for the other forever (it hung the served Ratings page). Each test forces
that interleaving: the reset thread holds the model's lock until the frame thread holds the view's lock (or
until a short wait shows the frame thread cannot get it, which is what the fixed order does), then resets.
Both threads must finish within :data:`TIMEOUT_S`; a deadlock is reported as a failure, never a hang (the
threads are daemons).
"""

from __future__ import annotations

import threading
import time

from explorer.ui.state.data_model import DataModel
from explorer.ui.state.ratings_model import RatingsModel
from explorer.ui.state.regression_model import RegressionModel
from explorer.ui.pages.ratings import RatingsView
from explorer.ui.pages.regression import RegressionView

TIMEOUT_S = 20.0
#: How long the reset thread waits for the frame thread to hold the view's lock (it never does once the
#: view takes the model's lock first: the frame thread then waits for the model's lock instead).
WAIT_FOR_FRAME_S = 1.0


class _ReportingLock:
    """Wraps a view's RLock; sets ``acquired`` when the thread named ``frame`` holds it."""

    def __init__(self, lock):
        self._lock = lock
        self.acquired = threading.Event()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        got = self._lock.acquire(blocking, timeout)
        if got and threading.current_thread().name == "frame":
            self.acquired.set()
        return got

    def release(self) -> None:
        self._lock.release()

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc):
        self.release()


def _race(view, model, change) -> None:
    """Run a reset (``change()`` while holding ``model.lock``) against a frame refresh; fail on a deadlock."""
    view_lock = _ReportingLock(view._lock)
    view._lock = view_lock
    errors: list[BaseException] = []
    run_before = model.run_id

    def reset_path():
        try:
            with model.lock:  # the reset has taken the model's lock ...
                view_lock.acquired.wait(WAIT_FOR_FRAME_S)  # ... while the frame refresh starts
                change()  # publishes run_id under the model's lock: the view's watcher refreshes
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    def frame_path():
        try:
            view.player._bump()  # what the player does on the event loop after a tick: frame += 1 -> refresh
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    reset = threading.Thread(target=reset_path, name="reset", daemon=True)
    frame = threading.Thread(target=frame_path, name="frame", daemon=True)
    reset.start()
    frame.start()
    deadline = time.monotonic() + TIMEOUT_S
    for t in (reset, frame):
        t.join(max(0.0, deadline - time.monotonic()))
    stuck = [t.name for t in (reset, frame) if t.is_alive()]
    assert not stuck, f"deadlock: the {' and '.join(stuck)} thread(s) did not finish within {TIMEOUT_S} s"
    assert not errors, errors
    assert model.run_id == run_before + 1  # the change did start a new run (the race was not vacuous)


def test_ratings_view_reset_during_a_frame_does_not_deadlock():
    """The Ratings view has no lock: it draws the model's last published snapshot (immutable, made under the
    model's lock on the session's worker when served). Drawing never waits for the model's lock, and a frame
    whose snapshot waits for the lock a reset holds (while the reset's watcher asks the view for another)
    ends with the new run drawn."""
    view = RatingsView(model=RatingsModel(model="mar_mm", n_users=120, n_items=10, n_clusters=2), auto_fit=False)
    model = view.model
    view.player.step()
    assert not hasattr(view, "_lock")
    drawn = threading.Event()
    with model.lock:  # what the event loop does, while a step or a reset holds the model's lock elsewhere
        threading.Thread(target=lambda: (view._draw(), drawn.set()), name="frame", daemon=True).start()
        assert drawn.wait(TIMEOUT_S), "drawing waited for the model's lock"

    waiting = threading.Event()  # the frame thread is about to take the model's lock for its snapshot
    snapshot = model.snapshot

    def reporting_snapshot():
        if threading.current_thread().name == "frame":
            waiting.set()
        return snapshot()

    model.snapshot = reporting_snapshot
    errors: list[BaseException] = []
    run_before = model.run_id

    def reset_path():
        try:
            with model.lock:  # the reset has taken the model's lock ...
                waiting.wait(WAIT_FOR_FRAME_S)  # ... while the frame's snapshot waits for it
                model.seed += 1  # publishes run_id under the model's lock: the view's watcher refreshes
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    def frame_path():
        try:
            view.player._bump()  # what the player does on the event loop after a tick: frame += 1 -> refresh
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=reset_path, name="reset", daemon=True),
               threading.Thread(target=frame_path, name="frame", daemon=True)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + TIMEOUT_S
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    stuck = [t.name for t in threads if t.is_alive()]
    assert not stuck, f"deadlock: the {' and '.join(stuck)} thread(s) did not finish within {TIMEOUT_S} s"
    assert not errors, errors
    assert waiting.is_set() and model.run_id == run_before + 1  # the race happened (it was not vacuous)
    assert view._snapshot.run_id == model.run_id and view._snapshot.iteration == 0  # the new run is drawn
    assert view._trace.figure.title.text.endswith("EM iteration 0")


def test_regression_view_reset_during_a_frame_does_not_deadlock():
    """The Regression view has no lock: it draws the model's read-outs (immutable, computed under the model's
    lock on the session's worker when served). Drawing them never waits for the model's lock, and a frame
    whose read-outs wait for the lock a reset holds (while the reset's watcher asks the view for another)
    ends with the new run drawn."""
    model = RegressionModel(data_model=DataModel(dataset="ring", mechanism="mcar", rate=0.2))
    view = RegressionView(model=model, auto_fit=False)
    view.player.step()
    assert not hasattr(view, "_lock")
    drawn = threading.Event()
    readouts = view.readouts
    with model.lock:  # what the event loop does, while a step or a reset holds the model's lock elsewhere
        threading.Thread(target=lambda: (view._show(readouts, None), drawn.set()), name="frame", daemon=True).start()
        assert drawn.wait(TIMEOUT_S), "drawing waited for the model's lock"

    waiting = threading.Event()  # the frame thread is about to take the model's lock for its read-outs
    compute = model.readouts

    def reporting_readouts(*args, **kwargs):
        if threading.current_thread().name == "frame":
            waiting.set()
        return compute(*args, **kwargs)

    model.readouts = reporting_readouts
    errors: list[BaseException] = []
    run_before = model.run_id

    def reset_path():
        try:
            with model.lock:  # the reset has taken the model's lock ...
                waiting.wait(WAIT_FOR_FRAME_S)  # ... while the frame's read-outs wait for it
                model.seed += 1  # publishes run_id under the model's lock: the view's watcher refreshes
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    def frame_path():
        try:
            view.player._bump()  # what the player does on the event loop after a tick: frame += 1 -> refresh
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=reset_path, name="reset", daemon=True),
               threading.Thread(target=frame_path, name="frame", daemon=True)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + TIMEOUT_S
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    stuck = [t.name for t in threads if t.is_alive()]
    assert not stuck, f"deadlock: the {' and '.join(stuck)} thread(s) did not finish within {TIMEOUT_S} s"
    assert not errors, errors
    assert waiting.is_set() and model.run_id == run_before + 1  # the race happened (it was not vacuous)
    assert view.readouts.run_id == model.run_id and view.readouts.iteration == model.iteration == 0
    assert view._scatter.figure.title.text.endswith("EM iteration 0")  # the new run is drawn


def test_the_probe_reports_the_frame_thread_only():
    """The probe itself: the lock is reported held by the ``frame`` thread, not by another (else the race is vacuous)."""
    lock = _ReportingLock(threading.RLock())

    def hold():
        with lock:
            pass

    other = threading.Thread(target=hold, name="other")
    other.start()
    other.join(5)
    assert not lock.acquired.is_set()
    frame = threading.Thread(target=hold, name="frame")
    frame.start()
    frame.join(5)
    assert lock.acquired.is_set()


# The two playgrounds read their models without the models' locks inside refresh, so the race above cannot
# deadlock them; these guard that (a read-out under a model's lock added to their refresh would fail here).
# They must not simply take every model's lock first: a watcher fired under one model's lock (a reset of the
# second model, a degenerate step of the first) would then wait for the other model's lock.
def test_em_playground_reset_during_a_frame_does_not_deadlock():
    from explorer.ui.pages.em_playground import EMPlayground

    view = EMPlayground()
    view.player.step()
    em = view.em
    _race(view, em, lambda: setattr(em, "seed", em.seed + 1))
    assert [m.iteration for m in view.models] == [0, 0, 0]  # the seed was passed on: every panel restarted


def test_variational_playground_reset_during_a_frame_does_not_deadlock():
    from explorer.ui.pages.variational import VariationalPlayground

    view = VariationalPlayground()
    view.player.step()
    vb = view.vb
    _race(view, vb, lambda: setattr(vb, "seed", vb.seed + 1))
    assert [m.iteration for m in view.models] == [0, 0]
