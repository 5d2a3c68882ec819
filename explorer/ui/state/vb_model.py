"""A steppable variational Dirichlet-process Gaussian mixture (the POIGMM) on a :class:`DataModel`.

:class:`VBModel` wraps :mod:`explorer.core.mixtures.vb_dpgmm` as :class:`~explorer.ui.state.em_model.EMModel`
wraps EM: it owns the immutable states of the current run (so a view can rewind), publishes
``iteration``, ``elbo``, ``log_likelihood``, ``n_effective``, ``converged``, ``stop_reason`` and
``error`` as constant parameters, and is safe to drive from a worker thread (``step``/``reset``
take a lock; ``try_step`` skips instead of waiting). It imports param, never Panel.

Prior defaults are the thesis code's (garriga2017 digest, §1.4 and §1.9): truncation K = 15 in the
core (10 here, for a readable screen), concentration :math:`\\alpha = 1/K` (``alpha = 0`` means
that default), :math:`m_0 = 0`, :math:`\\beta_0 = 1`, :math:`W_0 = I`, :math:`\\nu_0 = D`
(``nu0 = 0`` means that default). ``mean_prior="observed_mean"`` and
``covariance_prior="observed_variance"`` put the prior at the scale of the data instead
(:math:`m_0` = observed column means, :math:`W_0 = \\mathrm{diag}(1/s_j^2)`, i.e. a prior scatter
:math:`\\Psi_0 = \\mathrm{diag}(s_j^2)`), which suits unstandardised data.

A new run starts (``reset``) whenever the data or a model setting changes (not ``tol``/``max_iter``).
"""

from __future__ import annotations

import numpy as np
import param

from explorer.core.gaussians.conditional import ConditionalMixture
from explorer.core.gaussians.conditional_t import (
    StudentTConditionalMixture,
    normal_wishart_predictive,
)
from explorer.core.mixtures import vb_dpgmm
from explorer.core.validation import BadInputError, constant_columns
from explorer.history import vb_history
from explorer.ui.state._settings import MAX_SEED
from explorer.ui.state._stepped import MAX_KEPT_STATES, SteppedModel

__all__ = ["COVARIANCE_PRIORS", "MAX_KEPT_STATES", "MEAN_PRIORS", "VBModel"]

MEAN_PRIORS = ("zero", "observed_mean")
COVARIANCE_PRIORS = ("identity", "observed_variance")
_SETTINGS = ("n_components", "alpha", "mean_prior", "beta0", "nu0", "covariance_prior", "update",
             "responsibilities", "init", "reg_covar", "tol", "max_iter", "seed")
_RESET_ON = ("n_components", "alpha", "mean_prior", "beta0", "nu0", "covariance_prior", "update",
             "responsibilities", "init", "reg_covar", "seed")


class VBModel(SteppedModel):
    """Variational DP mixture with missing values, one coordinate-ascent round at a time.

    Examples
    --------
    >>> from explorer.ui.state.data_model import DataModel
    >>> data = DataModel(dataset="three_blobs", rate=0.3)
    >>> vb = VBModel(data_model=data, n_components=6)
    >>> vb.step(); vb.iteration
    1
    >>> vb.run(); vb.stop_reason in ("tol", "max_iter")
    True
    """

    _SETTINGS = _SETTINGS
    _CORE = vb_dpgmm
    _make_history = staticmethod(vb_history)

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
    seed = param.Integer(default=0, bounds=(0, MAX_SEED), doc="Seed of the initialisation")

    state = param.Parameter(doc="Current VBState")
    elbo = param.Number(default=None, allow_None=True, constant=True, precedence=-1,
                        doc="Evidence lower bound (None where undefined: thesis update with missing data)")
    log_likelihood = param.Number(default=None, allow_None=True, constant=True, precedence=-1,
                                  doc="Observed-data plug-in log-likelihood")
    n_effective = param.Integer(default=0, constant=True, precedence=-1, doc="Components with E[pi_k] > 0.01")

    def config(self, data=None) -> vb_dpgmm.VBConfig:
        """The core configuration; ``data`` (EMData) is needed for the data-scaled priors."""
        mean_prior = w0 = None
        if data is not None and self.mean_prior == "observed_mean":
            mean_prior = np.asarray(data.col_mean, dtype=float)
        if data is not None and self.covariance_prior == "observed_variance":
            constant = constant_columns(data.X)
            if constant.size:
                bad = ", ".join(str(j) for j in constant[:5])
                raise BadInputError(f"covariance_prior='observed_variance' needs a positive observed variance in "
                                    f"every column; column(s) {bad} are constant. Use 'identity' or drop them.")
            w0 = np.diag(1.0 / np.nanvar(data.X, axis=0))
        return vb_dpgmm.VBConfig(
            n_components=self.n_components, alpha=self.alpha or None, mean_prior=mean_prior, beta0=self.beta0,
            W0=w0, nu0=self.nu0 or None, update=self.update, responsibilities=self.responsibilities,
            reg_covar=self.reg_covar, tol=self.tol, max_iter=self.max_iter, init=self.init, n_init=1,
        )

    # ------------------------------------------------------------------ SteppedModel hooks
    def _prepare(self, data) -> None:
        self._data = vb_dpgmm.prepare(data.values, data.missing, columns=data.columns)
        self._config = self.config(self._data)
        self._config.prior(self._data.n_features)  # nu0 etc. checked against D here

    def _outputs(self, state) -> dict:
        if state is None:
            return {"state": None, "iteration": 0, "elbo": None, "log_likelihood": None, "n_effective": 0}
        elbo = float(state.elbo) if np.isfinite(state.elbo) else None
        return dict(state=state, iteration=state.iteration, elbo=elbo, log_likelihood=state.log_likelihood,
                    n_effective=state.n_effective)

    def _change(self, old, new) -> float:
        # the same rule as vb_dpgmm.fit: the ELBO when defined (both states), else the plug-in likelihood
        same_kind = np.isfinite(old.elbo) == np.isfinite(new.elbo)
        return (new.objective - old.objective) / max(1, self._data.n_fit) if same_kind else np.nan

    # ------------------------------------------------------------------ actions
    @param.depends("data_model.revision", *_RESET_ON, watch=True)
    def reset(self):
        """Start a new run from the current data and settings (iteration 0)."""
        super().reset()

    # ------------------------------------------------------------------ read-outs
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
