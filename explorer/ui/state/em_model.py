"""A steppable EM fit of a Gaussian mixture on the data of a :class:`DataModel`.

:class:`EMModel` wraps :mod:`explorer.core.mixtures.em_gmm` for the apps: it owns the immutable states
of the current run (so a view can rewind to any iteration), publishes ``iteration``,
``log_likelihood``, ``converged``, ``stop_reason`` and ``error`` as constant parameters, and is
safe to drive from a worker thread (``step``/``reset`` take a lock; ``try_step`` skips instead of
waiting, for periodic callbacks). It imports param, never Panel.

A new run starts (``reset``) whenever the data or a model setting changes.
"""

from __future__ import annotations

import numpy as np
import param

from explorer.core.gaussians.conditional import ConditionalMixture
from explorer.core.mixtures import em_gmm
from explorer.history import em_history
from explorer.ui.state._settings import MAX_SEED
from explorer.ui.state._stepped import MAX_KEPT_STATES, SteppedModel

__all__ = ["MAX_KEPT_STATES", "EMModel"]

_SETTINGS = ("n_components", "covariance_type", "variant", "init", "reg_covar", "tol", "max_iter", "seed")


class EMModel(SteppedModel):
    """EM for a Gaussian mixture with missing values, one step at a time.

    Examples
    --------
    >>> from explorer.ui.state.data_model import DataModel
    >>> data = DataModel(dataset="three_blobs", rate=0.3)
    >>> em = EMModel(data_model=data, n_components=3)
    >>> em.step(); em.iteration
    1
    >>> em.run(); em.stop_reason in ("tol", "max_iter")
    True
    """

    _SETTINGS = _SETTINGS
    _CORE = em_gmm
    _make_history = staticmethod(em_history)

    n_components = param.Integer(default=3, bounds=(1, 30), doc="Number of components K")
    covariance_type = param.Selector(default="full", objects=list(em_gmm.COVARIANCE_TYPES), doc="Covariance type")
    variant = param.Selector(default="em", objects=list(em_gmm.VARIANTS),
                             doc="em: exact EM; naive: impute conditional means and refit; "
                                 "mean_impute: fill with column means, then complete-data EM")
    init = param.Selector(default="kmeans", objects=list(em_gmm.INIT_METHODS), doc="Initialisation")
    reg_covar = param.Number(default=1e-6, bounds=(0.0, 10.0), doc="Added to covariance diagonals")
    tol = param.Number(default=1e-5, bounds=(0.0, 1.0), doc="Stop when the mean log-likelihood changes less")
    max_iter = param.Integer(default=300, bounds=(1, 10000), doc="Maximum number of iterations")
    seed = param.Integer(default=0, bounds=(0, MAX_SEED), doc="Seed of the initialisation")

    state = param.Parameter(doc="Current EMState")
    log_likelihood = param.Number(default=None, allow_None=True, constant=True, precedence=-1)

    def config(self) -> em_gmm.EMConfig:
        return em_gmm.EMConfig(
            n_components=self.n_components, covariance_type=self.covariance_type, reg_covar=self.reg_covar,
            tol=self.tol, max_iter=self.max_iter, init=self.init, n_init=1, variant=self.variant,
        )

    # ------------------------------------------------------------------ SteppedModel hooks
    def _prepare(self, data) -> None:
        self._config = self.config()
        self._data = em_gmm.prepare(data.values, data.missing, columns=data.columns)

    def _outputs(self, state) -> dict:
        if state is None:
            return {"state": None, "iteration": 0, "log_likelihood": None}
        return {"state": state, "iteration": state.iteration, "log_likelihood": state.log_likelihood}

    # ------------------------------------------------------------------ actions
    @param.depends("data_model.revision", "n_components", "covariance_type", "variant", "init", "reg_covar", "seed",
                   watch=True)
    def reset(self):
        """Start a new run from the current data and settings (iteration 0)."""
        super().reset()

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
        X, missing = self._rows(X)
        return ConditionalMixture.from_gaussian_mixture(
            X, s.weights, s.means, s.covariances, covariance_type=self._config.covariance_type, missing=missing,
        )
