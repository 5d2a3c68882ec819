"""A steppable variational Dirichlet-process Gaussian mixture (the POIGMM) on a :class:`DataModel`.

:class:`VBModel` wraps :mod:`explorer.core.vb_dpgmm` as :class:`~explorer.models.em_model.EMModel`
wraps EM: it owns the immutable states of the current run (so a view can rewind), publishes
``iteration``, ``elbo``, ``log_likelihood``, ``n_effective``, ``converged``, ``stop_reason`` and
``error`` as constant parameters, and is safe to drive from a worker thread (``step``/``reset``
take a lock; ``try_step`` skips instead of waiting). It imports param, never Panel.

Prior defaults are the thesis code's (digest seed000 §1.4 and §1.9): truncation K = 15 in the
core (10 here, for a readable screen), concentration :math:`\\alpha = 1/K` (``alpha = 0`` means
that default), :math:`m_0 = 0`, :math:`\\beta_0 = 1`, :math:`W_0 = I`, :math:`\\nu_0 = D`
(``nu0 = 0`` means that default). ``mean_prior="observed_mean"`` and
``covariance_prior="observed_variance"`` put the prior at the scale of the data instead
(:math:`m_0` = observed column means, :math:`W_0 = \\mathrm{diag}(1/s_j^2)`, i.e. a prior scatter
:math:`\\Psi_0 = \\mathrm{diag}(s_j^2)`), which suits unstandardised data.

A new run starts (``reset``) whenever the data or a model setting changes (not ``tol``/``max_iter``).
"""

from __future__ import annotations

import threading

import numpy as np
import param

from explorer.core import vb_dpgmm
from explorer.core._validation import BadInputError
from explorer.core.conditional import ConditionalMixture
from explorer.core.conditional_t import (
    StudentTConditionalMixture,
    normal_wishart_predictive,
)
from explorer.history import vb_history
from explorer.models._settings import Settings
from explorer.models.data_model import DataModel

__all__ = ["COVARIANCE_PRIORS", "MEAN_PRIORS", "VBModel"]

MEAN_PRIORS = ("zero", "observed_mean")
COVARIANCE_PRIORS = ("identity", "observed_variance")
_SETTINGS = ("n_components", "alpha", "mean_prior", "beta0", "nu0", "covariance_prior", "update",
             "responsibilities", "init", "reg_covar", "tol", "max_iter", "seed")
_RESET_ON = ("n_components", "alpha", "mean_prior", "beta0", "nu0", "covariance_prior", "update",
             "responsibilities", "init", "reg_covar", "seed")
#: States kept for rewinding; beyond this the middle of the run is thinned.
MAX_KEPT_STATES = 400


class VBModel(Settings):
    """Variational DP mixture with missing values, one coordinate-ascent round at a time.

    Examples
    --------
    >>> data = DataModel(dataset="three_blobs", rate=0.3)
    >>> vb = VBModel(data_model=data, n_components=6)
    >>> vb.step(); vb.iteration
    1
    >>> vb.run(); vb.stop_reason in ("tol", "max_iter")
    True
    """

    _SETTINGS = _SETTINGS

    data_model = param.ClassSelector(class_=DataModel, doc="Where the data come from")
    n_components = param.Integer(default=10, bounds=(1, 30), doc="Truncation level K of the stick-breaking")
    alpha = param.Number(default=0.0, bounds=(0.0, 100.0),
                         doc="DP concentration alpha; 0 = 1/K (the thesis code's scikit-learn default)")
    mean_prior = param.Selector(default="zero", objects=list(MEAN_PRIORS),
                                doc="m0: zero (thesis, standardised data) or the observed column means")
    beta0 = param.Number(default=1.0, bounds=(1e-6, 1e6), inclusive_bounds=(True, True),
                         doc="beta0 > 0: prior precision scale of the means (thesis: 1)")
    nu0 = param.Number(default=0.0, bounds=(0.0, 1000.0),
                       doc="Wishart degrees of freedom nu0 > D - 1; 0 = D (thesis default)")
    covariance_prior = param.Selector(default="identity", objects=list(COVARIANCE_PRIORS),
                                      doc="W0: identity (thesis) or diag(1 / observed variances)")
    update = param.Selector(default="principled", objects=list(vb_dpgmm.UPDATES),
                            doc="principled: expected sufficient statistics; thesis: fill with previous means")
    responsibilities = param.Selector(default="corrected", objects=list(vb_dpgmm.RESPONSIBILITIES),
                                      doc="Form of E[log N] in the tau update (see vb_dpgmm)")
    init = param.Selector(default="kmeans", objects=list(vb_dpgmm.INIT_METHODS), doc="Initialisation")
    reg_covar = param.Number(default=1e-6, bounds=(0.0, 10.0), doc="Added as N_k * reg_covar * I to the scatter")
    tol = param.Number(default=1e-3, bounds=(0.0, 1.0), doc="Stop when the objective per row changes less")
    max_iter = param.Integer(default=100, bounds=(1, 10000), doc="Maximum number of iterations")
    seed = param.Integer(default=0, bounds=(0, None), doc="Seed of the initialisation")

    state = param.Parameter(default=None, constant=True, precedence=-1, doc="Current VBState")
    iteration = param.Integer(default=0, constant=True, precedence=-1)
    elbo = param.Number(default=None, allow_None=True, constant=True, precedence=-1,
                        doc="Evidence lower bound (None where undefined: thesis update with missing data)")
    log_likelihood = param.Number(default=None, allow_None=True, constant=True, precedence=-1,
                                  doc="Observed-data plug-in log-likelihood")
    n_effective = param.Integer(default=0, constant=True, precedence=-1, doc="Components with E[pi_k] > 0.01")
    converged = param.Boolean(default=False, constant=True, precedence=-1)
    stop_reason = param.String(default="", constant=True, precedence=-1, doc="'', 'tol', 'max_iter', 'degenerate'")
    error = param.String(default="", constant=True, precedence=-1, doc="Readable error of the last action")
    run_id = param.Integer(default=0, constant=True, precedence=-1, doc="Increases at every reset")

    def __init__(self, **params):
        if params.get("data_model") is None:
            params["data_model"] = DataModel()
        super().__init__(**params)
        self._lock = threading.RLock()
        self._data = None
        self._config: vb_dpgmm.VBConfig | None = None
        self._states: list = []
        self._trace: list = []
        self.reset()

    # ------------------------------------------------------------------ helpers
    def _publish(self, **outputs):
        with param.edit_constant(self):
            self.param.update(**outputs)

    def config(self, data=None) -> vb_dpgmm.VBConfig:
        """The core configuration; ``data`` (EMData) is needed for the data-scaled priors."""
        mean_prior = w0 = None
        if data is not None and self.mean_prior == "observed_mean":
            mean_prior = np.asarray(data.col_mean, dtype=float)
        if data is not None and self.covariance_prior == "observed_variance":
            var = np.nanvar(data.X, axis=0)
            if np.any(~(var > 0)):
                bad = ", ".join(str(j) for j in np.flatnonzero(~(var > 0))[:5])
                raise BadInputError(f"covariance_prior='observed_variance' needs a positive observed variance in "
                                    f"every column; column(s) {bad} are constant. Use 'identity' or drop them.")
            w0 = np.diag(1.0 / var)
        return vb_dpgmm.VBConfig(
            n_components=self.n_components, alpha=self.alpha or None, mean_prior=mean_prior, beta0=self.beta0,
            W0=w0, nu0=self.nu0 or None, update=self.update, responsibilities=self.responsibilities,
            reg_covar=self.reg_covar, tol=self.tol, max_iter=self.max_iter, init=self.init, n_init=1,
        )

    @property
    def em_data(self):
        """The prepared data of the run (:class:`explorer.core.em_gmm.EMData`), or None."""
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
        """The run so far as an :class:`xarray.Dataset` (see :func:`explorer.history.vb_history`)."""
        if not self._trace:
            return None
        cols = self.data_model.data.columns if self.data_model.data is not None else None
        return vb_history(self._trace, columns=cols, config=self._config, stop_reason=self.stop_reason or None)

    @property
    def finished(self) -> bool:
        return bool(self.stop_reason) or self.state is None

    def _outputs(self, state) -> dict:
        elbo = float(state.elbo) if np.isfinite(state.elbo) else None
        return dict(state=state, iteration=state.iteration, elbo=elbo, log_likelihood=state.log_likelihood,
                    n_effective=state.n_effective)

    # ------------------------------------------------------------------ actions
    @param.depends("data_model.revision", *_RESET_ON, watch=True)
    def reset(self):
        """Start a new run from the current data and settings (iteration 0)."""
        with self._lock:
            data = self.data_model.data
            self._states, self._trace = [], []
            try:
                if data is None:
                    raise BadInputError(self.data_model.error or "No data loaded.")
                self._data = vb_dpgmm.prepare(data.values, data.missing, columns=data.columns)
                self._config = self.config(self._data)
                self._config.prior(self._data.n_features)  # nu0 etc. checked against D here
                state = vb_dpgmm.init(self._data, self._config, np.random.default_rng(self.seed))
            except BadInputError as exc:  # DegenerateCovarianceError included
                self._data = None
                self._publish(state=None, iteration=0, elbo=None, log_likelihood=None, n_effective=0,
                              converged=False, stop_reason="", error=str(exc), run_id=self.run_id + 1)
                return
            self._record(state)
            self._publish(**self._outputs(state), converged=False, stop_reason="", error="", run_id=self.run_id + 1)

    def _record(self, state):
        self._states.append(state)
        if len(self._states) > MAX_KEPT_STATES:  # keep the first, thin the middle, keep recent
            self._states = self._states[:1] + self._states[2::2] if len(self._states) % 2 else self._states[::2]
        self._trace.append(vb_dpgmm.snapshot(state, self._data, self._config, self.truth))

    def step(self, run_id: int | None = None) -> bool:
        """One round (tau, gamma, eta). Returns False when nothing was done (finished, or no data).

        With ``run_id``, steps only if that run is still the current one (checked under the lock).
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
        old = self.state
        try:
            new = vb_dpgmm.step(old, self._data, self._config)
        except BadInputError as exc:  # DegenerateCovarianceError included
            self._publish(stop_reason="degenerate", error=str(exc))
            return False
        self._record(new)
        # the same rule as vb_dpgmm.fit: the ELBO when defined (both states), else the plug-in likelihood
        same_kind = np.isfinite(old.elbo) == np.isfinite(new.elbo)
        change = (new.objective - old.objective) / max(1, self._data.n_fit) if same_kind else np.nan
        stop = ""
        if abs(change) < self._config.tol:
            stop = "tol"
        elif new.iteration >= self._config.max_iter:
            stop = "max_iter"
        self._publish(**self._outputs(new), converged=stop == "tol", stop_reason=stop, error="")
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
            self._publish(**self._outputs(state), converged=False, stop_reason="", error="")

    # ------------------------------------------------------------------ read-outs
    def _rows(self, X):
        if X is None:
            return self._data.X, self._data.missing
        X = np.asarray(X, dtype=float)
        return X, np.isnan(X)

    def conditional(self, X=None) -> ConditionalMixture | None:
        """Plug-in p(x_mis | x_obs): Gaussians N(m_k, Psi_k / nu_k) weighted by E[pi_k] (digest 1.6).

        For the data rows, or for given rows ``X`` (NaN = missing). None without a state.
        """
        s = self.state
        if s is None:
            return None
        X, missing = self._rows(X)
        return ConditionalMixture.from_gaussian_mixture(X, s.weights, s.means, s.covariances, missing=missing)

    def predictive_conditional(self, X=None) -> StudentTConditionalMixture | None:
        """Posterior-predictive p(x_mis | x_obs): the Student-t mixture of the Normal-Wishart posterior."""
        s = self.state
        if s is None:
            return None
        X, missing = self._rows(X)
        loc, scales, dof = normal_wishart_predictive(s.means, s.beta, s.nu, s.scatter)
        return StudentTConditionalMixture.from_student_t_mixture(X, s.weights, loc, scales, dof, missing=missing)

    def imputed(self) -> np.ndarray | None:
        """Plug-in conditional-mean imputation of the data (observed entries unchanged), or None."""
        cm = self.conditional()
        return None if cm is None else cm.mean()
