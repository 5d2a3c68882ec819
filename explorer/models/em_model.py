"""A steppable EM fit of a Gaussian mixture on the data of a :class:`DataModel`.

:class:`EMModel` wraps :mod:`explorer.core.em_gmm` for the apps: it owns the immutable states
of the current run (so a view can rewind to any iteration), publishes ``iteration``,
``log_likelihood``, ``converged``, ``stop_reason`` and ``error`` as constant parameters, and is
safe to drive from a worker thread (``step``/``reset`` take a lock; ``try_step`` skips instead of
waiting, for periodic callbacks). It imports param, never Panel.

A new run starts (``reset``) whenever the data or a model setting changes.
"""

from __future__ import annotations

import threading

import numpy as np
import param

from explorer.core import em_gmm
from explorer.core._validation import BadInputError
from explorer.core.conditional import ConditionalMixture
from explorer.history import em_history
from explorer.models._settings import Settings
from explorer.models.data_model import DataModel

__all__ = ["EMModel"]

_SETTINGS = ("n_components", "covariance_type", "variant", "init", "reg_covar", "tol", "max_iter", "seed")
#: States kept for rewinding; beyond this only every ``stride``-th state is kept.
MAX_KEPT_STATES = 400


class EMModel(Settings):
    """EM for a Gaussian mixture with missing values, one step at a time.

    Examples
    --------
    >>> data = DataModel(dataset="three_blobs", rate=0.3)
    >>> em = EMModel(data_model=data, n_components=3)
    >>> em.step(); em.iteration
    1
    >>> em.run(); em.stop_reason in ("tol", "max_iter")
    True
    """

    _SETTINGS = _SETTINGS

    data_model = param.ClassSelector(class_=DataModel, doc="Where the data come from")
    n_components = param.Integer(default=3, bounds=(1, 30), doc="Number of components K")
    covariance_type = param.Selector(default="full", objects=list(em_gmm.COVARIANCE_TYPES), doc="Covariance type")
    variant = param.Selector(default="em", objects=list(em_gmm.VARIANTS),
                             doc="em: exact EM; naive: impute conditional means and refit; "
                                 "mean_impute: fill with column means, then complete-data EM")
    init = param.Selector(default="kmeans", objects=list(em_gmm.INIT_METHODS), doc="Initialisation")
    reg_covar = param.Number(default=1e-6, bounds=(0.0, 10.0), doc="Added to covariance diagonals")
    tol = param.Number(default=1e-5, bounds=(0.0, 1.0), doc="Stop when the mean log-likelihood changes less")
    max_iter = param.Integer(default=300, bounds=(1, 10000), doc="Maximum number of iterations")
    seed = param.Integer(default=0, bounds=(0, None), doc="Seed of the initialisation")

    state = param.Parameter(default=None, constant=True, precedence=-1, doc="Current EMState")
    iteration = param.Integer(default=0, constant=True, precedence=-1)
    log_likelihood = param.Number(default=None, allow_None=True, constant=True, precedence=-1)
    converged = param.Boolean(default=False, constant=True, precedence=-1)
    stop_reason = param.String(default="", constant=True, precedence=-1, doc="'', 'tol', 'max_iter', 'degenerate'")
    error = param.String(default="", constant=True, precedence=-1, doc="Readable error of the last action")
    run_id = param.Integer(default=0, constant=True, precedence=-1, doc="Increases at every reset")

    def __init__(self, **params):
        if params.get("data_model") is None:
            params["data_model"] = DataModel()
        super().__init__(**params)
        self._lock = threading.RLock()
        self._data: em_gmm.EMData | None = None
        self._config: em_gmm.EMConfig | None = None
        self._states: list = []
        self._trace: list = []
        self.reset()

    # ------------------------------------------------------------------ helpers
    def _publish(self, **outputs):
        with param.edit_constant(self):
            self.param.update(**outputs)

    def config(self) -> em_gmm.EMConfig:
        return em_gmm.EMConfig(
            n_components=self.n_components, covariance_type=self.covariance_type, reg_covar=self.reg_covar,
            tol=self.tol, max_iter=self.max_iter, init=self.init, n_init=1, variant=self.variant,
        )

    @property
    def em_data(self) -> em_gmm.EMData | None:
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
        """The run so far as an :class:`xarray.Dataset` (see :func:`explorer.history.em_history`)."""
        if not self._trace:
            return None
        cols = self.data_model.data.columns if self.data_model.data is not None else None
        return em_history(self._trace, columns=cols, config=self._config, stop_reason=self.stop_reason or None)

    # ------------------------------------------------------------------ actions
    @param.depends("data_model.revision", "n_components", "covariance_type", "variant", "init", "reg_covar", "seed",
                   watch=True)
    def reset(self):
        """Start a new run from the current data and settings (iteration 0)."""
        with self._lock:
            data = self.data_model.data
            self._states, self._trace = [], []
            try:
                if data is None:
                    raise BadInputError(self.data_model.error or "No data loaded.")
                self._config = self.config()
                self._data = em_gmm.prepare(data.values, data.missing, columns=data.columns)
                state = em_gmm.init(self._data, self._config, np.random.default_rng(self.seed))
            except BadInputError as exc:
                self._data = None
                self._publish(state=None, iteration=0, log_likelihood=None, converged=False, stop_reason="",
                              error=str(exc), run_id=self.run_id + 1)
                return
            self._record(state)
            self._publish(state=state, iteration=0, log_likelihood=state.log_likelihood, converged=False,
                          stop_reason="", error="", run_id=self.run_id + 1)

    def _record(self, state):
        self._states.append(state)
        if len(self._states) > MAX_KEPT_STATES:  # keep the first, thin the middle, keep recent
            self._states = self._states[:1] + self._states[2::2] if len(self._states) % 2 else self._states[::2]
        self._trace.append(em_gmm.snapshot(state, self._data, self._config, self.truth))

    @property
    def finished(self) -> bool:
        return bool(self.stop_reason) or self.state is None

    def step(self, run_id: int | None = None) -> bool:
        """One EM iteration. Returns False when nothing was done (finished, or no data).

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

    def _step(self) -> bool:
        if self.finished:
            return False
        # a manual step after a finished run at the tolerance is allowed to continue (stop_reason cleared)
        old = self.state
        try:
            new = em_gmm.step(old, self._data, self._config)
        except BadInputError as exc:  # DegenerateCovarianceError included
            self._publish(stop_reason="degenerate", error=str(exc))
            return False
        self._record(new)
        change = (new.objective - old.objective) / max(1, self._data.n_fit)
        stop = ""
        if abs(change) < self._config.tol:
            stop = "tol"
        elif new.iteration >= self._config.max_iter:
            stop = "max_iter"
        self._publish(state=new, iteration=new.iteration, log_likelihood=new.log_likelihood,
                      converged=stop == "tol", stop_reason=stop, error="")
        return True

    def run(self, max_steps: int | None = None) -> int:
        """Step until converged, ``max_iter`` or ``max_steps``; returns the number of steps done."""
        done = 0
        while (max_steps is None or done < max_steps) and self.step():
            done += 1
        return done

    def rewind(self, iteration: int) -> None:
        """Show a kept earlier state (the run continues from there on the next step)."""
        with self._lock:
            kept = {s.iteration: s for s in self._states}
            if iteration not in kept:
                raise BadInputError(f"Iteration {iteration} is not kept; kept: {sorted(kept)[:5]}...")
            state = kept[iteration]
            self._states = [s for s in self._states if s.iteration <= iteration]
            self._trace = [t for t in self._trace if t["iteration"] <= iteration]
            self._publish(state=state, iteration=iteration, log_likelihood=state.log_likelihood,
                          converged=False, stop_reason="", error="")

    # ------------------------------------------------------------------ read-outs
    def imputed(self) -> np.ndarray | None:
        """Current single imputation (observed entries unchanged), or None without a state."""
        if self.state is None:
            return None
        return em_gmm.impute(self.state, self._data, self._config)

    def conditional(self, X=None) -> ConditionalMixture | None:
        """p(x_mis | x_obs) under the current parameters, for the data rows (or given rows ``X``)."""
        if self.state is None:
            return None
        s = self.state
        if X is None:
            X, missing = self._data.X, self._data.missing
        else:
            X = np.asarray(X, dtype=float)
            missing = np.isnan(X)
        return ConditionalMixture.from_gaussian_mixture(
            X, s.weights, s.means, s.covariances, covariance_type=self._config.covariance_type, missing=missing,
        )
