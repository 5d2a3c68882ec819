"""Progress of a long fit: the ``callback`` and ``progress`` parameters of every imputer.

Every imputer's ``fit`` is a loop over its algorithm's ``step`` (:func:`explorer.core.loop.run_restarts`).
:class:`FitProgress` is the monitor an imputer hands to that loop: after every iteration it

* calls the user's ``callback(info)`` with an :class:`~explorer.core.loop.IterationInfo` (a frozen
  record: ``restart``, ``n_restarts``, ``iteration``, ``max_iter``, ``objective``, ``change``,
  ``elapsed``); the callback ends the fit cleanly by raising ``StopIteration`` (its return value is
  ignored, as in :func:`scipy.optimize.minimize`);
* with ``progress=True``, advances a tqdm bar on stderr (iterations of the current restart out of
  ``max_iter``, the objective and its per-row change); without tqdm, a plain line every 2 s.

It is interruptible: a ``KeyboardInterrupt`` during the loop (Ctrl-C, a notebook's stop button)
keeps the best state reached so far (the estimator is fitted with it, ``stop_reason_ ==
"interrupted"``, a :class:`~explorer.core.loop.FitInterruptedWarning`); before the first complete
iteration it propagates and the estimator stays as it was.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from explorer.core.loop import FitInterruptedWarning, IterationInfo, LoopMonitor
from explorer.core.validation import BadInputError

__all__ = ["FitInterruptedWarning", "FitProgress", "IterationInfo", "check_progress_params"]


def check_progress_params(callback, progress) -> None:
    """Raise :class:`BadInputError` unless ``callback`` is None or callable and ``progress`` a bool."""
    if callback is not None and not callable(callback):
        raise BadInputError(
            f"callback must be None or a function called with an IterationInfo after every iteration; "
            f"got {callback!r}."
        )
    if not isinstance(progress, (bool, np.bool_)):
        raise BadInputError(f"progress must be True or False, got {progress!r}.")


class FitProgress(LoopMonitor):
    """The monitor of one ``fit``: the user's callback and the optional progress display.

    Use as a context manager (the bar is closed on exit, also on an error).
    """

    interruptible = True

    def __init__(self, callback=None, progress: bool = False, name: str = "fit", file=None):
        self._callback = callback
        self._progress = bool(progress)
        self._name = name
        self._file = file
        self._bar = None
        self._restart = -1
        self._last_line = 0.0

    def __enter__(self) -> FitProgress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def update(self, info: IterationInfo, state) -> None:
        if self._progress:
            self._show(info)
        if self._callback is not None:
            self._callback(info)

    # ------------------------------------------------------------------ display
    def _desc(self, info: IterationInfo) -> str:
        return self._name + (f" restart {info.restart + 1}/{info.n_restarts}" if info.n_restarts > 1 else "")

    def _show(self, info: IterationInfo) -> None:
        out = self._file if self._file is not None else sys.stderr
        if self._bar is None:
            try:
                from tqdm import tqdm
            except ImportError:  # tqdm is a dependency; a plain line every 2 s without it
                self._bar = False
            else:
                self._bar = tqdm(total=info.max_iter, file=out, desc=self._desc(info), unit="it",
                                 leave=True, dynamic_ncols=True)
            self._restart = info.restart
        postfix = f"objective={info.objective:.6g}, change={info.change:.2g}"
        if self._bar is False:
            now = time.perf_counter()
            if now - self._last_line >= 2.0 or info.iteration == info.max_iter:
                self._last_line = now
                print(f"{self._desc(info)}: iteration {info.iteration}/{info.max_iter}, {postfix}, "
                      f"{info.elapsed:.1f} s", file=out)
            return
        if info.restart != self._restart:
            self._restart = info.restart
            self._bar.reset(total=info.max_iter)
            self._bar.set_description_str(self._desc(info), refresh=False)
        self._bar.set_postfix_str(postfix, refresh=False)
        self._bar.update(info.iteration - self._bar.n)

    def close(self) -> None:
        if self._bar:
            self._bar.close()
        self._bar = None
