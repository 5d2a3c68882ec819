"""The iteration loop shared by every ``init`` / ``step`` / ``fit`` algorithm.

``fit`` of each algorithm is this loop over its own ``step``: a number of restarts, each
iterated until the objective changes by less than ``tol`` per fitted row (stop reason
``"tol"``), until ``max_iter`` steps (``"max_iter"``), or until a component collapses
(``"degenerate"``); the restart with the highest final objective is kept, and a
:class:`ConvergenceWarning` says when it did not stop on the tolerance.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

from .gaussian import DegenerateCovarianceError

__all__ = ["ConvergenceWarning", "LoopOutcome", "run_restarts"]


class ConvergenceWarning(UserWarning):
    """An iterative fit stopped before its tolerance was reached."""


@dataclass(frozen=True, eq=False, slots=True)
class LoopOutcome:
    """The kept restart: final state, why it stopped, its trace, and every restart's objective."""

    state: object
    stop_reason: str  # "tol" | "max_iter" | "degenerate"
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
    callback: Callable[[object], None] | None = None,
    warning: type[Warning] = ConvergenceWarning,
    stacklevel: int = 3,
) -> LoopOutcome:
    """Run ``n_runs`` restarts of ``state = start()`` then ``state = step(state)``.

    ``change(old, new)`` is the per-row objective change tested against ``tol``; states must have
    an ``objective`` attribute (the restart with the highest one is kept). A restart whose start
    fails on a degenerate component is skipped; if all fail, the first error is raised.
    """
    runs, failures = [], []
    for _ in range(n_runs):
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
            state = new
            trace.append(snapshot(state))
            if callback is not None:
                callback(state)
            if abs(delta) < tol:
                stop, message = "tol", f"Converged: per-row objective change {delta:.3g} < tol={tol}."
                break
        runs.append((state, stop, message, trace))
    if not runs:
        raise DegenerateCovarianceError(failures[0])
    state, stop, message, trace = max(runs, key=lambda r: r[0].objective)
    if stop != "tol":
        warnings.warn(message, warning, stacklevel=stacklevel)
    return LoopOutcome(state, stop, message, tuple(trace), tuple(r[0].objective for r in runs))
