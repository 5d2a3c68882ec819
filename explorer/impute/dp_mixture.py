"""Scikit-learn style imputer built on the variational Dirichlet-process Gaussian mixture.

:class:`DPGMMImputer` fits the truncated stick-breaking variational DP mixture of
:mod:`explorer.core.mixtures.vb_dpgmm` (the POIGMM of Garriga Alonso 2017) directly on the incomplete
data and imputes from the "semi-Bayesian" plug-in density (the ``garriga2017`` reference digest, §1.6):
:math:`\\hat\\mu_k = m_k`, :math:`\\hat\\Sigma_k = \\Psi_k/\\nu_k` and, per row, component weights
either predictive, :math:`\\propto E_q[\\pi_k] N(x^o; \\hat\\mu_k^o, \\hat\\Sigma_k^{oo})` (the
author's code, and the only choice for new rows), or the fitted responsibilities
:math:`\\tau_{nk}` for the training rows (the thesis, eq. 3.27).

It shares its plumbing (``fit``, validation, feature names, ``transform``/``sample``/``score``/
``regress``) with :class:`explorer.impute.gaussian_mixture.GaussianMixtureImputer`; ``score_samples`` is the
plug-in observed-data log-density :math:`\\log\\sum_k E[\\pi_k] N(x^o; \\hat\\mu_k^o, \\hat\\Sigma_k^{oo})`
on the scale of ``X``.

By default the Wishart prior is scaled to the data (``covariance_prior="data"``: an empty component's
plug-in covariance is the data covariance, :math:`\\nu_0 = D + 2`) and :meth:`DPGMMImputer.conditional`
returns the Student-t posterior predictive (``conditional_density="auto"``); both are measured against
the thesis's identity prior and plug-in Gaussians in ``results/dpgmm_small_data.md``.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from explorer.core.gaussians.conditional import ConditionalMixture
from explorer.core.gaussians.conditional_t import (
    StudentTConditionalMixture,
    normal_wishart_predictive,
)
from explorer.core.mixtures import vb_dpgmm
from explorer.core.validation import BadInputError
from explorer.impute.base import _MixtureImputerBase

__all__ = ["DPGMMImputer"]

_WEIGHTS = ("predictive", "responsibilities")
_DENSITIES = ("auto", "student_t", "gaussian")


class DPGMMImputer(_MixtureImputerBase):
    """Impute missing values with a variational Dirichlet-process Gaussian mixture.

    The truncation level ``n_components`` is an upper bound: the stick-breaking prior switches
    off the components the data do not need, and ``n_effective_`` counts those that keep an
    expected weight above 0.01.

    Parameters
    ----------
    n_components : int, default 15
        Truncation level K.
    alpha : float or None, default None
        DP concentration; None = 1 / n_components (the author's code).
    beta0 : float, default 1.0
        Prior precision scale of the component means.
    nu0 : float or None, default None
        Wishart degrees of freedom (> n_features - 1); None = n_features + 2 with
        ``covariance_prior="data"``, n_features with ``"identity"``.
    covariance_prior : {"data", "identity"}, default "data"
        Scale :math:`\\Psi_0` of the Wishart prior. ``"data"``: :math:`\\Psi_0 = \\nu_0 \\hat\\Sigma`,
        :math:`\\hat\\Sigma` the covariance of the data being fitted (standardised when
        ``standardize=True``; the ML single Gaussian when values are missing), so a component the
        data leave empty has the data covariance as plug-in covariance, and each component's
        covariance is a weighted average of :math:`\\hat\\Sigma` (weight :math:`\\nu_0`) and its own
        scatter (weight :math:`N_k`). ``"identity"``: :math:`\\Psi_0 = I` and :math:`\\nu_0 = D`
        (the thesis and the author's code, the only choice before this parameter existed): an empty
        component's plug-in covariance is :math:`I/D`, so on small data many narrow components
        survive (12-15 of 15 on wine and hepatitis) and intervals under-cover (see
        ``results/dpgmm_small_data.md``).
    update : {"principled", "thesis"}, default "principled"
        Update of the Normal-Wishart factors (see :mod:`explorer.core.mixtures.vb_dpgmm`).
    responsibilities : {"corrected", "thesis", "augmented"}, default "corrected"
        Form of the expected log-likelihood in the responsibility update.
    weights : {"predictive", "responsibilities"}, default "predictive"
        Row weights of the imputation density. ``"predictive"``:
        :math:`\\propto E[\\pi_k] N(x^o; \\hat\\mu_k^o, \\hat\\Sigma_k^{oo})` for every row.
        ``"responsibilities"``: the fitted :math:`\\tau` (``resp_``) when ``X`` is exactly the
        training data (same values and NaN positions), predictive weights otherwise.
    conditional_density : {"auto", "student_t", "gaussian"}, default "auto"
        The density :math:`p(x^m \\mid x^o)` that :meth:`conditional` returns and ``transform`` (its
        mean), ``sample`` and the intervals use. ``"student_t"``: the Normal-Wishart posterior
        predictive, the Student-t mixture of :meth:`predictive` (dof :math:`\\nu_k + 1 - D`, wider
        for components fitted to few rows). ``"gaussian"``: the plug-in Gaussian mixture
        (:math:`m_k, \\Psi_k/\\nu_k`). ``"auto"``: ``"student_t"`` when the prior's :math:`\\nu_0 > D + 1`
        (every component's predictive then has more than 2 degrees of freedom: finite means and
        variances), as with the default prior; ``"gaussian"`` otherwise (e.g.
        ``covariance_prior="identity"`` with its :math:`\\nu_0 = D`). It is not called ``predictive``
        as in :class:`~explorer.impute.gaussian_mixture.GaussianMixtureImputer` because :meth:`predictive` is a
        method here and scikit-learn stores every parameter as an attribute of the same name.
    reg_covar : float, default 1e-6
        Added as :math:`N_k \\varepsilon I` to every scatter matrix.
    tol : float, default 1e-3
        Stop when the per-row change of the ELBO (or of the plug-in log-likelihood when the ELBO
        is undefined) is below ``tol``.
    max_iter : int, default 100
    init : {"kmeans", "random"}, default "kmeans"
    n_init : int, default 1
        Restarts; the one with the highest objective is kept.
    standardize : bool, default True
        Fit on data centred and scaled by the observed column means and standard deviations (as
        the thesis; a column with zero spread is only centred). The prior (mean 0, Wishart scale
        identity) is meant for that scale. With ``False`` the prior mean is the observed column
        means and the scale is the raw one. Fitted parameters are always on the scale of ``X``.
    empty_rows : {"raise", "marginal"}, default "raise"
        Rows with every value missing: raise, or impute them from the marginal mixture.
    random_state : int, numpy.random.Generator or None, default None
        Seed of the random initialisation, following scikit-learn's convention: an int makes every
        ``fit`` reproducible (also after :func:`sklearn.base.clone`); a Generator is used as is and its
        state is consumed, so successive fits (and clones made after a fit, which copy the consumed
        state) differ; None draws fresh entropy at every fit.
    callback : callable or None, default None
        Called after every iteration of ``fit`` with an ``IterationInfo``, a frozen record with
        ``restart``, ``n_restarts``, ``iteration`` (completed in this restart), ``max_iter``,
        ``objective`` (the ELBO, or the plug-in log-likelihood before the ELBO is defined;
        a sum over rows), ``change`` (its per-row change, the number compared with ``tol``) and
        ``elapsed`` (seconds). Raise ``StopIteration`` in it to end
        the fit early: the best state so far is kept (``stop_reason_ == "callback"``, no warning).
    progress : bool, default False
        Show a progress bar on stderr during ``fit`` (iterations, objective, change). Either way a
        ``KeyboardInterrupt`` (Ctrl-C, a notebook's stop button) after the first iteration ends the fit
        with the best state so far (``stop_reason_ == "interrupted"``, a ``FitInterruptedWarning``).

    Attributes
    ----------
    weights_ : ndarray of shape (n_components,)
        Expected mixing weights :math:`E_q[\\pi_k]`.
    means_ : ndarray of shape (n_components, n_features)
        Plug-in means :math:`m_k`, on the scale of ``X``.
    covariances_ : ndarray of shape (n_components, n_features, n_features)
        Plug-in covariances :math:`\\Psi_k/\\nu_k`, on the scale of ``X``.
    resp_ : ndarray of shape (n_samples, n_components)
        Fitted responsibilities :math:`\\tau` of the training rows.
    elbo_ : float
        Evidence lower bound of the kept fit, on the fitted (standardised) scale; NaN when
        undefined (``update="thesis"`` with missing data).
    n_effective_ : int
        Components with :math:`E[\\pi_k] > 0.01`.
    conditional_density_ : {"student_t", "gaussian"}
        What :meth:`conditional` returns (``conditional_density`` resolved).
    prior_dof_ : float
        The Wishart prior's :math:`\\nu_0`.
    prior_scatter_ : ndarray of shape (n_features, n_features)
        The Wishart prior's scale :math:`\\Psi_0 = W_0^{-1}` on the scale of ``X``
        (``prior_scatter_ / prior_dof_`` is the plug-in covariance of a component the data leave empty).
    converged_ : bool
    n_iter_ : int
    stop_reason_ : str
    center_, scale_ : ndarray of shape (n_features,)
        The standardisation (zeros and ones when ``standardize=False``).
    history_ : xarray.Dataset
        Trace of the kept run (:func:`explorer.history.vb_history`); means and covariances on the
        scale of ``X``, ELBO and log-likelihood on the fitted scale.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` had string column names.

    Examples
    --------
    >>> import numpy as np
    >>> from explorer.impute.dp_mixture import DPGMMImputer
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.normal(0, 1, (100, 2)), rng.normal(6, 1, (100, 2))])
    >>> X[::5, 1] = np.nan
    >>> imp = DPGMMImputer(n_components=8, random_state=0).fit(X)
    >>> Xi = imp.transform(X)
    >>> bool(np.isnan(Xi).any()), bool(np.array_equal(Xi[1::5], X[1::5]))
    (False, True)
    """

    _core = vb_dpgmm
    _algorithm = "Variational inference"

    def __init__(
        self,
        n_components=15,
        alpha=None,
        beta0=1.0,
        nu0=None,
        covariance_prior="data",
        update="principled",
        responsibilities="corrected",
        weights="predictive",
        conditional_density="auto",
        reg_covar=1e-6,
        tol=1e-3,
        max_iter=100,
        init="kmeans",
        n_init=1,
        standardize=True,
        empty_rows="raise",
        random_state=None,
        callback=None,
        progress=False,
    ):
        self.n_components = n_components
        self.alpha = alpha
        self.beta0 = beta0
        self.nu0 = nu0
        self.covariance_prior = covariance_prior
        self.update = update
        self.responsibilities = responsibilities
        self.weights = weights
        self.conditional_density = conditional_density
        self.reg_covar = reg_covar
        self.tol = tol
        self.max_iter = max_iter
        self.init = init
        self.n_init = n_init
        self.standardize = standardize
        self.empty_rows = empty_rows
        self.random_state = random_state
        self.callback = callback
        self.progress = progress

    def _config(self) -> vb_dpgmm.VBConfig:
        if self.weights not in _WEIGHTS:
            raise BadInputError(f"weights must be one of {_WEIGHTS}, got {self.weights!r}.")
        if not isinstance(self.conditional_density, str) or self.conditional_density not in _DENSITIES:
            raise BadInputError(f"conditional_density must be one of {_DENSITIES}, got {self.conditional_density!r}.")
        if not isinstance(self.covariance_prior, str) or self.covariance_prior not in vb_dpgmm.COVARIANCE_PRIORS:
            raise BadInputError(f"covariance_prior must be one of {vb_dpgmm.COVARIANCE_PRIORS}, "
                                f"got {self.covariance_prior!r}.")
        if not isinstance(self.standardize, (bool, np.bool_)):
            raise BadInputError(f"standardize must be True or False, got {self.standardize!r}.")
        return vb_dpgmm.VBConfig(
            n_components=self.n_components, alpha=self.alpha, beta0=self.beta0,
            nu0=self.nu0, covariance_prior=self.covariance_prior, update=self.update, responsibilities=self.responsibilities,
            reg_covar=self.reg_covar, tol=self.tol, max_iter=self.max_iter, init=self.init, n_init=self.n_init,
        )

    # ------------------------------------------------------------------ fitting
    def _variance_floor(self):
        """None when standardising (``reg_covar`` then applies on the standardised scale)."""
        return None if self.standardize else super()._variance_floor()

    def _fit_setup(self, Xn, missing, columns, config):
        """Standardise (or centre the prior on the column means); context = ``(Xn, center, scale)``."""
        center = np.nanmean(Xn, axis=0)
        if self.standardize:
            scale = np.nanstd(Xn, axis=0)
            scale[~(scale > 0)] = 1.0
        else:
            config = dataclasses.replace(config, mean_prior=center)
            center, scale = np.zeros_like(center), np.ones_like(center)
        data = vb_dpgmm.prepare((Xn - center) / scale, missing, columns=columns)
        return data, config, (Xn, center, scale)

    def _store_fit(self, result, data, config, columns, context) -> None:
        from explorer.history import vb_history

        Xn, center, scale = context
        state = result.state
        outer = scale[:, None] * scale[None, :]
        self.center_, self.scale_ = center, scale
        self.weights_ = np.array(state.weights)
        self.means_ = state.means * scale + center
        self.covariances_ = state.covariances * outer
        # Normal-Wishart posterior in original units (Psi scales like a covariance), for predictive()
        self.beta_, self.nu_ = np.array(state.beta), np.array(state.nu)
        self.scatter_ = state.scatter * outer
        self.resp_ = np.array(state.resp)
        self.elbo_ = float(state.elbo)
        self.n_effective_ = int(state.n_effective)
        prior = state.cache["prior"]
        self.prior_dof_ = float(prior["nu0"])
        self.prior_scatter_ = prior["Psi0"] * outer
        n_features = self.means_.shape[1]
        self.conditional_density_ = (
            "gaussian" if self.conditional_density == "gaussian"
            or (self.conditional_density == "auto" and not self.prior_dof_ > n_features + 1) else "student_t")
        self._fit_X = Xn
        trace = [dict(t, means=t["means"] * scale + center, covariances=t["covariances"] * outer)
                 for t in result.trace]
        self.history_ = vb_history(trace, columns=columns, config=config, stop_reason=result.stop_reason,
                                   attrs={"standardized": int(bool(self.standardize))})

    # ------------------------------------------------------------------ using the model
    def _is_training_data(self, arr: np.ndarray) -> bool:
        fit_X = getattr(self, "_fit_X", None)
        return fit_X is not None and arr.shape == fit_X.shape and np.array_equal(arr, fit_X, equal_nan=True)

    def conditional(self, X) -> ConditionalMixture | StudentTConditionalMixture:
        """The conditional mixture :math:`p(x^m \\mid x^o)` of every row of ``X``.

        The Student-t posterior predictive (as :meth:`predictive`) when ``conditional_density_`` is
        ``"student_t"`` (the default), else the plug-in Gaussian mixture. Row weights follow the
        ``weights`` parameter (the fitted :math:`\\tau` only for the exact training data with
        ``weights="responsibilities"``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            NaN marks a missing entry.

        Returns
        -------
        StudentTConditionalMixture or ConditionalMixture
            Both have ``mean()``, ``variance()``, ``interval(level)``, ``sample(n, rng)``, ``logpdf(values)``.
        """
        arr = self._validate(X)
        if getattr(self, "conditional_density_", "gaussian") == "student_t":  # models saved before it: Gaussian
            mix = self._student_t(arr)
        else:
            mix = ConditionalMixture.from_gaussian_mixture(
                arr, self.weights_, self.means_, self.covariances_, columns=self._columns)
        if self.weights == "responsibilities" and self._is_training_data(arr):
            tau = np.array(self.resp_)
            tau.setflags(write=False)
            mix = dataclasses.replace(mix, weights=tau)
        return self._with_positive(mix)

    def predictive(self, X) -> StudentTConditionalMixture:
        r"""The Student-t posterior-predictive conditional mixture :math:`p(x^m \mid x^o)` of every row.

        Integrates the Normal-Wishart posterior instead of plugging in its means: each component is
        a multivariate t with :math:`\nu_k + 1 - D` degrees of freedom (see
        :mod:`explorer.core.gaussians.conditional_t`), so values far from the bulk keep a finite, graded
        log-density, the fix the POIGMM thesis names for its log-likelihood overflow. Row weights
        are predictive: :math:`\propto E[\pi_k]\,\mathrm{St}(x^o \mid \ldots)`.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            NaN marks a missing entry.

        Returns
        -------
        StudentTConditionalMixture
        """
        return self._student_t(self._validate(X))

    def _student_t(self, arr: np.ndarray) -> StudentTConditionalMixture:
        loc, scales, dof = normal_wishart_predictive(self.means_, self.beta_, self.nu_, self.scatter_)
        return StudentTConditionalMixture.from_student_t_mixture(
            arr, self.weights_, loc, scales, dof, columns=self._columns)
