"""Base class of the model objects that run an iterative fit one step at a time.

:class:`SteppedModel` holds what :class:`~explorer.ui.state.em_model.EMModel` and
:class:`~explorer.ui.state.vb_model.VBModel` share: the immutable states of the current run (kept
for rewinding, thinned beyond :data:`MAX_KEPT_STATES`), the per-iteration trace, the published
read-outs (``state``, ``iteration``, ``converged``, ``stop_reason``, ``error``, ``run_id`` and the
subclass's own scalars), and the lock that makes ``step``/``reset``/``rewind`` safe to call from a
worker thread (``try_step`` skips instead of waiting, for periodic callbacks). It imports param,
never Panel.

A subclass names its core module in ``_CORE`` (:mod:`explorer.core.mixtures.em_gmm` or
:mod:`explorer.core.mixtures.vb_dpgmm`: both offer ``init(data, config, rng)``, ``step(state, data,
config)`` and ``snapshot(state, data, config, truth)``) and the :mod:`explorer.history` builder of
its traces in ``_make_history``, declares its settings, decorates ``reset`` with the parameters
that start a new run (calling ``super().reset()``), and implements the hooks

* ``_prepare(data)``: set ``self._data`` / ``self._config`` from an
  :class:`~explorer.core.data.IncompleteData` (may raise
  :class:`~explorer.core.validation.BadInputError`);
* ``_outputs(state) -> dict``: the published read-outs of a state (``state=None``: of no run);
* optionally ``_change(old, new) -> float``: the objective change per fitted row that the
  tolerance is compared with (default: change of ``objective`` divided by ``n_fit``).
"""

from __future__ import annotations

import threading

import numpy as np
import param

from explorer.core.validation import BadInputError
from explorer.ui.state._settings import Settings
from explorer.ui.state.data_model import DataModel

__all__ = ["MAX_KEPT_STATES", "SteppedModel"]

#: States kept for rewinding; beyond this the middle of the run is thinned (every other state).
MAX_KEPT_STATES = 400


class LockedStepping:
    """``step(run_id)`` / ``try_step()`` / ``run(n)`` around a subclass's ``_step()``, under ``self._lock``.

    The protocol :class:`explorer.ui.components.player.StepPlayer` drives; subclasses provide ``_lock`` (an
    RLock), ``run_id`` and ``_step() -> bool``.
    """

    def step(self, run_id: int | None = None) -> bool:
        """One iteration. Returns False when nothing was done (finished, or no data).

        With ``run_id``, steps only if that run is still the current one (checked under the
        model's lock, so a reset landing between a worker's check and its step cannot be stepped).
        """
        with self._lock:
            if run_id is not None and run_id != self.run_id:
                return False
            return self._step()

    def try_step(self) -> bool:
        """Like :meth:`step`, but returns False at once if another step is running."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            return self._step()
        finally:
            self._lock.release()

    def run(self, max_steps: int | None = None) -> int:
        """Step until finished or ``max_steps``; returns the number of steps done."""
        done = 0
        while (max_steps is None or done < max_steps) and self.step():
            done += 1
        return done


class SteppedModel(LockedStepping, Settings):
    """A fit of the data of a :class:`DataModel`, advanced one iteration per :meth:`step`."""

    __abstract = True

    data_model = param.ClassSelector(class_=DataModel, doc="Where the data come from")

    state = param.Parameter(default=None, constant=True, precedence=-1, doc="Current state of the run")
    iteration = param.Integer(default=0, constant=True, precedence=-1)
    converged = param.Boolean(default=False, constant=True, precedence=-1)
    stop_reason = param.String(default="", constant=True, precedence=-1, doc="'', 'tol', 'max_iter', 'degenerate'")
    error = param.String(default="", constant=True, precedence=-1, doc="Readable error of the last action")
    run_id = param.Integer(default=0, constant=True, precedence=-1, doc="Increases at every reset")

    #: The core module of the algorithm (``init``, ``step``, ``snapshot``).
    _CORE = None
    #: ``f(trace, columns=, config=, stop_reason=) -> xarray.Dataset`` (see :mod:`explorer.history`).
    _make_history = None

    def __init__(self, **params):
        if params.get("data_model") is None:
            params["data_model"] = DataModel()
        super().__init__(**params)
        self._lock = threading.RLock()
        self._data = None
        self._config = None
        self._states: list = []
        self._trace: list = []
        self.reset()

    # ------------------------------------------------------------------ hooks
    def _prepare(self, data) -> None:
        raise NotImplementedError

    def _outputs(self, state) -> dict:
        raise NotImplementedError

    def _change(self, old, new) -> float:
        return (new.objective - old.objective) / max(1, self._data.n_fit)

    # ------------------------------------------------------------------ helpers
    def _publish(self, **outputs):
        with param.edit_constant(self):
            self.param.update(**outputs)

    @property
    def lock(self) -> threading.RLock:
        """The lock ``step``/``reset``/``rewind`` hold: hold it to read ``state`` and :attr:`em_data` of one run."""
        return self._lock

    @property
    def em_data(self):
        """The prepared data of the run (:class:`explorer.core.mixtures.em_gmm.EMData`), or None."""
        return self._data

    @property
    def truth(self):
        d = self.data_model.data
        return None if d is None else d.truth

    @property
    def states(self) -> tuple:
        """States of the current run kept for rewinding (iteration 0 first)."""
        return tuple(self._states)

    @property
    def history(self):
        """The run so far as an :class:`xarray.Dataset` (see :mod:`explorer.history`), or None."""
        if not self._trace:
            return None
        cols = self.data_model.data.columns if self.data_model.data is not None else None
        return self._make_history(self._trace, columns=cols, config=self._config, stop_reason=self.stop_reason or None)

    @property
    def finished(self) -> bool:
        return bool(self.stop_reason) or self.state is None

    def _rows(self, X):
        """``(X, missing)`` of the data rows (``X=None``) or of the given rows (NaN = missing)."""
        if X is None:
            return self._data.X, self._data.missing
        X = np.asarray(X, dtype=float)
        return X, np.isnan(X)

    def _record(self, state):
        self._states.append(state)
        if len(self._states) > MAX_KEPT_STATES:  # keep the first, thin the middle, keep recent
            self._states = self._states[:1] + self._states[2::2] if len(self._states) % 2 else self._states[::2]
        self._trace.append(self._CORE.snapshot(state, self._data, self._config, self.truth))

    def _stop_reason(self, old, new) -> str:
        """'tol' when the objective per row changed less than ``tol``, 'max_iter' at the last one, else ''."""
        if abs(self._change(old, new)) < self._config.tol:
            return "tol"
        if new.iteration >= self._config.max_iter:
            return "max_iter"
        return ""

    # ------------------------------------------------------------------ actions
    def reset(self):
        """Start a new run from the current data and settings (iteration 0)."""
        with self._lock:
            data = self.data_model.data
            self._states, self._trace = [], []
            try:
                if data is None:
                    raise BadInputError(self.data_model.error or "No data loaded.")
                self._prepare(data)
                state = self._CORE.init(self._data, self._config, np.random.default_rng(self.seed))
            except BadInputError as exc:  # DegenerateCovarianceError included
                self._data = None
                self._publish(**self._outputs(None), converged=False, stop_reason="", error=str(exc),
                              run_id=self.run_id + 1)
                return
            self._record(state)
            self._publish(**self._outputs(state), converged=False, stop_reason="", error="", run_id=self.run_id + 1)

    def _step(self) -> bool:
        if self.finished:
            return False
        old = self.state
        try:
            new = self._CORE.step(old, self._data, self._config)
        except BadInputError as exc:  # DegenerateCovarianceError included
            self._publish(stop_reason="degenerate", error=str(exc))
            return False
        self._record(new)
        stop = self._stop_reason(old, new)
        self._publish(**self._outputs(new), converged=stop == "tol", stop_reason=stop, error="")
        return True

    def rewind(self, iteration: int) -> None:
        """Show a kept earlier state (the run continues from there on the next step)."""
        with self._lock:
            kept = {s.iteration: s for s in self._states}
            if iteration not in kept:
                raise BadInputError(f"Iteration {iteration} is not kept; kept: {sorted(kept)[:5]}...")
            state = kept[iteration]
            self._states = [s for s in self._states if s.iteration <= iteration]
            self._trace = [t for t in self._trace if t["iteration"] <= iteration]
            self._publish(**self._outputs(state), converged=False, stop_reason="", error="")
