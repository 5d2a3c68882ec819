"""A steppable EM fit of a Gaussian mixture on the data of a :class:`DataModel`.

:class:`EMModel` wraps :mod:`explorer.core.mixtures.em_gmm` for the apps: it owns the immutable states
of the current run (so a view can rewind to any iteration), publishes ``iteration``,
``log_likelihood``, ``converged``, ``stop_reason`` and ``error`` as constant parameters, and is
safe to drive from a worker thread (``step``/``reset`` take a lock; ``try_step`` skips instead of
waiting, for periodic callbacks). It imports param, never Panel.

A new run starts (``reset``) whenever the data or a model setting changes.

:class:`LocationModel` is the mixed-data counterpart: the location model (a Gaussian block and one categorical
distribution per categorical column in each component; :class:`explorer.MixedMixtureImputer`, MAP-EM) fitted
in one call (:meth:`LocationModel.fit`, on any thread) to the table of a
:class:`~explorer.ui.state.data_model.MixedDataModel`, with its read-outs for one row: the probabilities of a
missing cell's levels and the conditional mixture of its missing numbers.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import param

from explorer.core.gaussians.conditional import ConditionalMixture
from explorer.core.mixtures import em_gmm
from explorer.core.validation import BadInputError
from explorer.history import em_history
from explorer.impute.mixed import MixedMixtureImputer
from explorer.ui.state._settings import MAX_SEED, Settings
from explorer.ui.state._stepped import MAX_KEPT_STATES, SteppedModel
from explorer.ui.state.data_model import MixedDataModel

__all__ = ["MAX_KEPT_STATES", "EMModel", "LocationFit", "LocationModel"]

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


# ----------------------------------------------------------------------------- mixed data: the location model
@dataclass(frozen=True)
class LocationFit:
    """A fitted location model and what the pages read from it (computed once per fit).

    ``proba`` maps each categorical column to the (n_rows, n_levels) array of
    ``imputer.predict_proba(data)[column]`` (:math:`P(\\text{level} \\mid` the rest of the row)), ``levels``
    to its levels; ``log_likelihood`` sums the rows' observed-data log-likelihoods.
    """

    imputer: MixedMixtureImputer
    proba: dict
    levels: dict
    log_likelihood: float
    n_rows: int
    n_iter: int
    converged: bool


class LocationModel(Settings):
    """The location model (:class:`explorer.MixedMixtureImputer`) on the table of a :class:`MixedDataModel`.

    :meth:`fit` runs the whole MAP-EM fit at once (on the caller's thread: a page's session worker) and keeps its
    :class:`LocationFit` in ``result``, unless a new run started meanwhile. A new run (``run_id``) starts whenever
    the table or a setting changes; it clears ``result`` and ``error``.

    Examples
    --------
    >>> model = LocationModel(data_model=MixedDataModel(dataset="penguins"), n_components=2)
    >>> model.fit() is not None, model.result.proba["sex"].shape
    (True, (344, 2))
    """

    _SETTINGS = ("n_components", "covariance_type", "seed")

    data_model = param.ClassSelector(class_=MixedDataModel)
    n_components = param.Integer(default=3, bounds=(1, 10), doc="Number of components K")
    covariance_type = param.Selector(default="full", objects=["full", "diag"], doc="Covariance of the numeric block")
    seed = param.Integer(default=0, bounds=(0, MAX_SEED), doc="Seed of the initialisation")
    max_iter = param.Integer(default=300, bounds=(1, 10000), precedence=-1, doc="Maximum number of iterations")

    run_id = param.Integer(default=0, constant=True, precedence=-1, doc="Increases with every new run")
    result = param.ClassSelector(class_=LocationFit, default=None, allow_None=True, constant=True, precedence=-1,
                                 doc="The fit of the current run (None: not fitted)")
    error = param.String(default="", constant=True, precedence=-1, doc="Why the last fit failed, readable")

    def __init__(self, **params):
        if params.get("data_model") is None:
            params["data_model"] = MixedDataModel()
        super().__init__(**params)
        self.lock = threading.RLock()

    @param.depends("data_model.revision", "n_components", "covariance_type", "seed", "max_iter", watch=True)
    def reset(self) -> None:
        """Start a new run: forget the fit of the previous one."""
        with self.lock, param.edit_constant(self):
            self.param.update(run_id=self.run_id + 1, result=None, error="")

    def fit(self, run_id: int | None = None) -> LocationFit | None:
        """Fit the model to the current table; returns the fit, or None (no table, a failure said in ``error``,
        or a newer run: ``run_id`` given and no longer current, or the settings changed during the fit)."""
        with self.lock:
            current, data = self.run_id, self.data_model.data
        if data is None or (run_id is not None and run_id != current):
            return None
        error, result = "", None
        try:
            # the plug-in predictive: the page shows the fitted model's K components and their weights (the
            # default's posterior draws would make every row's conditional a mixture of n_posterior_draws x K)
            imputer = MixedMixtureImputer(n_components=self.n_components, covariance_type=self.covariance_type,
                                          max_iter=self.max_iter, predictive="plugin", random_state=self.seed).fit(data)
            proba = {str(c): frame.to_numpy(dtype=float) for c, frame in imputer.predict_proba(data).items()}
            result = LocationFit(imputer=imputer, proba=proba,
                                 levels={str(c): [str(v) for v in lv] for c, lv in imputer.categories_.items()},
                                 log_likelihood=float(imputer.score_samples(data).sum()), n_rows=len(data),
                                 n_iter=int(imputer.n_iter_), converged=bool(imputer.converged_))
        except (BadInputError, np.linalg.LinAlgError) as exc:
            error = f"The location model could not be fitted: {exc}"
        with self.lock:
            if self.run_id != current:
                return None
            with param.edit_constant(self):
                self.param.update(result=result, error=error)
        return result

    # ------------------------------------------------------------------ read-outs of one row
    def level_probabilities(self, row: int, column: str) -> tuple[list[str], np.ndarray]:
        """``(levels, P(level | the rest of row ``row``))`` of a categorical ``column`` under the fit."""
        fit = self._fitted()
        return fit.levels[column], fit.proba[column][row]

    def numeric_conditional(self, row: int) -> ConditionalMixture | None:
        """The conditional mixture of the numeric columns of row ``row`` given every observed cell of it
        (one row; columns in ``imputer.numeric_columns_`` order), or None without numeric columns."""
        fit = self._fitted()
        if not fit.imputer.numeric_columns_:
            return None
        return fit.imputer.conditional(self.data_model.data.iloc[[row]])

    def _fitted(self) -> LocationFit:
        if self.result is None:
            raise BadInputError(self.error or "No fitted model yet: press Fit.")
        return self.result
