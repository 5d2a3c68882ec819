"""The iteration loop shared by every ``init`` / ``step`` / ``fit`` algorithm.

``fit`` of each algorithm is this loop over its own ``step``: a number of restarts, each
iterated until the objective changes by less than ``tol`` per fitted row (stop reason
``"tol"``), until ``max_iter`` steps (``"max_iter"``), or until a component collapses
(``"degenerate"``); the restart with the highest final objective is kept, and a
:class:`ConvergenceWarning` says when it did not stop on the tolerance.

Watching and stopping a long fit: the ``callback`` of :func:`run_restarts` is either a plain
callable, called with every new state, or a :class:`LoopMonitor`, whose ``update`` receives an
:class:`IterationInfo` (restart, iteration, objective, change, elapsed time) and the state. Either
may raise ``StopIteration`` to end the fit cleanly (stop reason ``"callback"``: the best state so
far is kept, no warning). A monitor with ``interruptible = True`` also turns a ``KeyboardInterrupt``
raised during the loop (Ctrl-C, a notebook's stop button) into the stop reason ``"interrupted"``:
the best state reached so far is kept and :class:`FitInterruptedWarning` says after how many
iterations; when no iteration had completed yet, the ``KeyboardInterrupt`` propagates.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass

from explorer.core.gaussians.gaussian import DegenerateCovarianceError

__all__ = [
    "ConvergenceWarning", "FitInterruptedWarning", "IterationInfo", "LoopMonitor", "LoopOutcome", "run_restarts",
    "run_thinned",
]


class ConvergenceWarning(UserWarning):
    """An iterative fit stopped before its tolerance was reached."""


class FitInterruptedWarning(ConvergenceWarning):
    """An iterative fit was interrupted (KeyboardInterrupt); the best state reached so far was kept."""


@dataclass(frozen=True, slots=True)
class IterationInfo:
    """What a :class:`LoopMonitor` (and an imputer's ``callback``) is told after every iteration.

    Attributes
    ----------
    restart : int
        Index of the current restart, 0 .. ``n_restarts - 1``.
    n_restarts : int
        Number of restarts of the fit (``n_init``).
    iteration : int
        Iterations completed in this restart (1 after the first ``step``).
    max_iter : int
        The most iterations a restart may take.
    objective : float
        The state's objective after this iteration: the observed-data log-likelihood (EM; plus the
        log prior with a prior), or the ELBO of the variational mixture; a sum over the fitted rows.
    change : float
        The per-row change of the objective in this iteration, the number compared with ``tol``
        (NaN when undefined, e.g. when the variational objective switches to the ELBO).
    elapsed : float
        Seconds since the loop started (all restarts).
    """

    restart: int
    n_restarts: int
    iteration: int
    max_iter: int
    objective: float
    change: float
    elapsed: float


class LoopMonitor:
    """Base of the monitors :func:`run_restarts` accepts as ``callback`` (see the module docstring).

    Subclasses override :meth:`update`; ``interruptible = True`` asks the loop to catch a
    ``KeyboardInterrupt`` and keep the best state so far.
    """

    interruptible: bool = False

    def update(self, info: IterationInfo, state) -> None:
        """Called after every iteration; raise ``StopIteration`` to end the fit."""


@dataclass(frozen=True, eq=False, slots=True)
class LoopOutcome:
    """The kept restart: final state, why it stopped, its trace, and every restart's objective."""

    state: object
    stop_reason: str  # "tol" | "max_iter" | "degenerate" | "callback" | "interrupted"
    message: str
    trace: tuple
    restart_objectives: tuple


def run_restarts(
    *,
    n_runs: int,
    start: Callable[[], object],
    step: Callable[[object], object],
    snapshot: Callable[[object], dict],
    change: Callable[[object, object], float],
    max_iter: int,
    tol: float,
    callback: Callable[[object], None] | LoopMonitor | None = None,
    warning: type[Warning] = ConvergenceWarning,
    stacklevel: int = 3,
) -> LoopOutcome:
    """Run ``n_runs`` restarts of ``state = start()`` then ``state = step(state)``.

    ``change(old, new)`` is the per-row objective change tested against ``tol``; states must have
    an ``objective`` attribute (the restart with the highest one is kept). A restart whose start
    fails on a degenerate component is skipped; if all fail, the first error is raised.

    ``callback``: a callable ``callback(state)`` or a :class:`LoopMonitor` (``update(info, state)``),
    called after every iteration; ``StopIteration`` raised by it ends the fit (stop reason
    ``"callback"``), and with an interruptible monitor a ``KeyboardInterrupt`` ends it too
    (``"interrupted"``, a :class:`FitInterruptedWarning`). Either way every run so far, including the
    current one up to its last completed iteration, competes for the kept state.
    """
    monitor = callback if isinstance(callback, LoopMonitor) else None
    runs, failures = [], []
    started = time.perf_counter()
    ended = None  # (stop reason, message) when the callback or an interrupt ended the whole fit
    state, trace, n_done = None, [], 0
    try:
        for restart in range(n_runs):
            state, trace, n_done = None, [], 0
            try:
                state = start()
            except DegenerateCovarianceError as exc:
                failures.append(str(exc))
                continue
            trace = [snapshot(state)]
            stop, message = "max_iter", f"Stopped after max_iter={max_iter} iterations before reaching tol={tol}."
            for _ in range(max_iter):
                try:
                    new = step(state)
                except DegenerateCovarianceError as exc:
                    stop, message = "degenerate", str(exc)
                    break
                delta = change(state, new)
                trace.append(snapshot(new))
                state, n_done = new, n_done + 1
                if callback is not None:
                    try:
                        if monitor is not None:
                            monitor.update(IterationInfo(
                                restart, n_runs, n_done, max_iter, float(state.objective), float(delta),
                                time.perf_counter() - started), state)
                        else:
                            callback(state)
                    except StopIteration:
                        stop, message = "callback", (
                            f"Stopped by the callback after {n_done} iteration(s) of restart {restart + 1}/{n_runs}.")
                        ended = stop, message
                        break
                if abs(delta) < tol:
                    stop, message = "tol", f"Converged: per-row objective change {delta:.3g} < tol={tol}."
                    break
            runs.append((state, stop, message, trace))
            state = None
            if ended is not None:
                break
    except KeyboardInterrupt:
        if monitor is None or not monitor.interruptible:
            raise
        if state is not None and n_done > 0:  # the current run up to its last completed iteration
            runs.append((state, "interrupted", "", trace[: n_done + 1]))
        completed = [r for r in runs if len(r[3]) > 1]
        if not completed:
            raise
        ended = "interrupted", ""
        runs = completed
    if not runs:
        raise DegenerateCovarianceError(failures[0])
    state, stop, message, trace = max(runs, key=lambda r: r[0].objective)
    if ended is not None and ended[0] == "interrupted":
        n_iter = len(trace) - 1
        stop, message = "interrupted", (
            f"Interrupted (KeyboardInterrupt) after {sum(len(r[3]) - 1 for r in runs)} iteration(s) in "
            f"{time.perf_counter() - started:.1f} s; kept the best state reached so far ({n_iter} iteration(s), "
            f"objective {state.objective:.6g}), which has not converged.")
        warnings.warn(message, FitInterruptedWarning, stacklevel=stacklevel)
    elif ended is not None:
        stop, message = ended
    elif stop != "tol":
        warnings.warn(message, warning, stacklevel=stacklevel)
    return LoopOutcome(state, stop, message, tuple(trace), tuple(r[0].objective for r in runs))


def run_thinned(step: Callable, state, n_burn: int, n_thin: int, n_draws: int) -> list:
    """The states a Markov chain keeps: ``n_burn`` steps of ``step(state) -> state`` discarded, then one state kept
    every ``n_thin`` steps until there are ``n_draws`` (the data-augmentation chains of the core)."""
    from explorer.core.validation import check_int

    check_int("n_draws", n_draws, 1)
    kept = []
    for i in range(n_burn + n_thin * n_draws):
        state = step(state)
        if i >= n_burn and (i - n_burn + 1) % n_thin == 0:
            kept.append(state)
    return kept
