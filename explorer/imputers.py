"""Scikit-learn style estimators for probabilistic imputation, and :func:`amputate`.

:class:`GaussianMixtureImputer` fits a Gaussian mixture to data with missing values by EM
(:mod:`explorer.core.em_gmm`, Ghahramani & Jordan 1994) and then uses the fitted density:

* ``transform``: single imputation by the conditional mean :math:`E[x^m \\mid x^o]`;
* ``sample``: multiple imputation, draws from :math:`p(x^m \\mid x^o)`;
* ``conditional``: the whole conditional mixture of every row
  (:class:`~explorer.core.conditional.ConditionalMixture`: means, variances, intervals, densities);
* ``score_samples`` / ``score``: observed-data log-likelihood per row / mean;
* ``regress``: least-squares regression of some columns on others (Ghahramani & Jordan eq. 13).

It follows the scikit-learn estimator rules (parameters stored untouched in ``__init__``,
fitted attributes end with ``_``), so ``clone``, ``get_params``/``set_params``, ``Pipeline`` and
``GridSearchCV`` work. :func:`amputate` makes missing values in complete data with one of the
registered mechanisms of :mod:`explorer.core.mechanisms`.
"""

from __future__ import annotations

import numpy as np

from explorer._imputer_base import _EMPTY_ROWS, _MixtureImputerBase, _rng
from explorer.core import em_gmm
from explorer.core._validation import BadInputError, as_float_matrix
from explorer.core.conditional import ConditionalMixture
from explorer.core.mechanisms import apply_mechanism

__all__ = ["GaussianMixtureImputer", "amputate"]


class GaussianMixtureImputer(_MixtureImputerBase):
    """Impute missing values with a Gaussian mixture fitted by EM on the incomplete data.

    The model :math:`p(x) = \\sum_k \\pi_k N(x; \\mu_k, \\Sigma_k)` is fitted by maximum
    likelihood on the observed entries (EM with missing values, valid when the data are missing
    at random). Missing entries are then imputed from :math:`p(x^m \\mid x^o)`, a Gaussian
    mixture per row.

    Parameters
    ----------
    n_components : int, default 1
        Number of mixture components K.
    covariance_type : {"full", "diag"}, default "full"
    reg_covar : float, default 1e-6
        Added to the diagonal of every covariance after each M-step.
    tol : float, default 1e-5
        Stop when the mean per-row log-likelihood changes by less than ``tol``.
    max_iter : int, default 300
        Maximum number of EM iterations per restart (a ``ConvergenceWarning`` is emitted when
        it is reached).
    init : {"kmeans", "kmeans++", "random"}, default "kmeans"
        Initialisation (k-means on the observed entries, k-means++ seeds, random responsibilities).
    n_init : int, default 1
        Number of restarts; the one with the highest log-likelihood is kept.
    variant : {"em", "naive", "mean_impute"}, default "em"
        ``"em"`` is exact EM. The others are ablations kept for teaching: ``"naive"`` refits on
        conditional means without the conditional-covariance correction (not EM; covariances
        shrink), ``"mean_impute"`` fits on the column-mean-filled matrix and its ``transform``
        returns the observed column means (the classical mean imputation); its ``sample``
        still draws from the mixture fitted on the mean-filled data.
    empty_rows : {"raise", "marginal"}, default "raise"
        What to do with rows whose every value is missing: raise an error (in ``fit`` and in
        every method that takes ``X``), or accept them (they do not inform the fit and are
        imputed from the marginal distribution, e.g. the mixture mean).
    random_state : int, numpy.random.Generator or None, default None
        Seed of the initialisation (``numpy.random.default_rng(random_state)``).

    Attributes
    ----------
    weights_ : ndarray of shape (n_components,)
    means_ : ndarray of shape (n_components, n_features)
    covariances_ : ndarray
        (n_components, n_features, n_features) for "full", (n_components, n_features) for "diag".
    converged_ : bool
    n_iter_ : int
        EM iterations of the kept restart.
    stop_reason_ : str
        ``"tol"`` or ``"max_iter"``.
    log_likelihood_ : float
        Observed-data log-likelihood of the training data (a sum over rows, not a mean).
    history_ : xarray.Dataset
        Trace of the kept restart (see :func:`explorer.history.em_history`).
    col_means_ : ndarray of shape (n_features,)
        Observed column means of the training data (used by ``variant="mean_impute"``).
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` had string column names (e.g. a pandas DataFrame).

    Examples
    --------
    >>> import numpy as np
    >>> from explorer.imputers import GaussianMixtureImputer
    >>> rng = np.random.default_rng(0)
    >>> X = rng.multivariate_normal([0.0, 0.0], [[1.0, 0.9], [0.9, 1.0]], size=200)
    >>> X[::4, 1] = np.nan
    >>> imp = GaussianMixtureImputer(random_state=0).fit(X)
    >>> Xi = imp.transform(X)
    >>> bool(np.isnan(Xi).any()), bool(np.array_equal(Xi[1::4], X[1::4]))
    (False, True)
    >>> imp.sample(X, n_imputations=3, random_state=1).shape
    (3, 200, 2)
    """

    _core = em_gmm

    def __init__(self, n_components=1, covariance_type="full", reg_covar=1e-6, tol=1e-5, max_iter=300,
                 init="kmeans", n_init=1, variant="em", empty_rows="raise", random_state=None):
        self.n_components = n_components
        self.covariance_type = covariance_type
        self.reg_covar = reg_covar
        self.tol = tol
        self.max_iter = max_iter
        self.init = init
        self.n_init = n_init
        self.variant = variant
        self.empty_rows = empty_rows
        self.random_state = random_state

    # ------------------------------------------------------------------ sklearn plumbing
    @property
    def _covariance_type(self):
        return self.covariance_type

    def _config(self) -> em_gmm.EMConfig:
        if self.empty_rows not in _EMPTY_ROWS:
            raise BadInputError(f"empty_rows must be one of {_EMPTY_ROWS}, got {self.empty_rows!r}.")
        return em_gmm.EMConfig(
            n_components=self.n_components, covariance_type=self.covariance_type, reg_covar=self.reg_covar,
            tol=self.tol, max_iter=self.max_iter, init=self.init, n_init=self.n_init, variant=self.variant,
        )

    def _store_fit(self, result, data, config, columns, context) -> None:
        from explorer.history import em_history

        state = result.state
        self.weights_ = np.array(state.weights)
        self.means_ = np.array(state.means)
        self.covariances_ = np.array(state.covariances)
        self.col_means_ = np.array(data.col_mean)
        self.log_likelihood_ = float(state.log_likelihood)
        self.history_ = em_history(result.trace, columns=columns, config=config, stop_reason=result.stop_reason)

    # ------------------------------------------------------------------ using the model
    def conditional(self, X) -> ConditionalMixture:
        """The conditional mixture :math:`p(x^m \\mid x^o)` of every row of ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            NaN marks a missing entry.

        Returns
        -------
        ConditionalMixture
            With ``mean()``, ``variance()``, ``interval(level)``, ``sample(n, rng)``, ``logpdf(values)``.
        """
        arr = self._validate(X)
        return ConditionalMixture.from_gaussian_mixture(
            arr, self.weights_, self.means_, self.covariances_,
            covariance_type=self.covariance_type, columns=self._columns,
        )

    def _impute(self, arr: np.ndarray) -> np.ndarray:
        if self.variant == "mean_impute":  # the ablation: observed column means of the training data
            return np.where(np.isnan(arr), self.col_means_, arr)
        return super()._impute(arr)


def amputate(X, mechanism="mcar", rate=0.2, random_state=None, **params):
    """Make missing values in complete data with a registered missingness mechanism.

    Parameters
    ----------
    X : array-like or DataFrame of shape (n_samples, n_features)
        Complete data (no NaN). Never modified.
    mechanism : str, default "mcar"
        A key of :data:`explorer.core.mechanisms.MECHANISMS` ("mcar", "mar_threshold",
        "self_masking", "square", ...).
    rate : float or None, default 0.2
        Overall fraction of entries to remove; must be None for mechanisms without a rate
        (e.g. "square", "half", "patterns").
    random_state : int, numpy.random.Generator or None
    **params
        Parameters of the mechanism (e.g. ``target=1, control=0`` for "mar_threshold").

    Returns
    -------
    X_nan : ndarray or DataFrame of shape (n_samples, n_features)
        A float copy of ``X`` with NaN at the missing entries (a DataFrame with the same index
        and columns when ``X`` is one).
    missing : ndarray of bool, shape (n_samples, n_features)
        True = missing.

    Examples
    --------
    >>> import numpy as np
    >>> from explorer.imputers import amputate
    >>> X = np.arange(20.0).reshape(10, 2)
    >>> X_nan, missing = amputate(X, "mar_threshold", rate=0.25, target=1, control=0)
    >>> int(missing[:, 1].sum()), bool(np.isnan(X_nan[missing]).all()), bool(np.isnan(X).any())
    (5, True, False)
    """
    rng = _rng(random_state)
    names = getattr(X, "columns", None)
    arr = as_float_matrix(X, name="X", columns=None if names is None else [str(c) for c in names])
    result = apply_mechanism(arr, mechanism, rate, rng=rng, **params)
    missing = np.array(result.missing, dtype=bool)
    out = arr.copy()
    out[missing] = np.nan
    if names is not None and hasattr(X, "index"):
        import pandas as pd

        return pd.DataFrame(out, index=X.index, columns=X.columns), missing
    return out, missing
