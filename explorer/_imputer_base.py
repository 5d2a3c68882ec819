"""The shared scikit-learn plumbing of the mixture imputers.

:class:`_MixtureImputerBase` gives :class:`~explorer.imputers.GaussianMixtureImputer`,
:class:`~explorer.dp_imputer.DPGMMImputer`, :class:`~explorer.fa_imputers.FactorAnalysisImputer` and
:class:`~explorer.fa_imputers.MFAImputer` one ``fit`` / ``transform`` / ``sample`` / ``score_samples`` /
``score`` / ``regress`` path, input validation with clear errors (non-numeric or sparse input,
infinities, all-missing rows and columns, wrong shapes) and feature names; each subclass supplies its
core fit and its conditional through a few hooks.
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np
from scipy.special import logsumexp
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from explorer.core._validation import (
    BadInputError,
    as_float_matrix,
    check_incomplete,
    check_no_empty_rows,
)
from explorer.core.conditional import regression
from explorer.core.gaussian import (
    DegenerateCovarianceError,
    observed_diagonal,
    observed_gaussian,
    precision_and_logdet,
)
from explorer.core.patterns import group_patterns

_EMPTY_ROWS = ("raise", "marginal")


def _rng(random_state, name: str = "random_state") -> np.random.Generator:
    """``numpy.random.default_rng`` of an int, None or Generator, with a clear error otherwise."""
    if random_state is None or isinstance(random_state, np.random.Generator):
        return np.random.default_rng(random_state)
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool) and random_state >= 0:
        return np.random.default_rng(int(random_state))
    raise BadInputError(
        f"{name} must be None, a non-negative int or a numpy.random.Generator; got {random_state!r}. "
        "(numpy.random.RandomState is not supported: use numpy.random.default_rng(seed).)"
    )


def _reject_sparse(X) -> None:
    if hasattr(X, "tocsr") or hasattr(X, "sparse") and hasattr(X.sparse, "to_dense"):
        raise TypeError(
            "Sparse input is not supported: missing entries must be NaN in a dense array. "
            "Convert with X.toarray() (or DataFrame.sparse.to_dense())."
        )


def _feature_names(X):
    """Column names of a DataFrame-like ``X`` as an object array, or None (all must be str)."""
    cols = getattr(X, "columns", None)
    if cols is None:
        return None
    names = np.asarray(list(cols), dtype=object)
    if names.size and all(isinstance(c, str) for c in names):
        return names
    return None


def _fit_input(X, empty_rows):
    """Validate training data: ``(X_nan, missing, names, columns)`` (``names`` for ``feature_names_in_``)."""
    if empty_rows not in _EMPTY_ROWS:
        raise BadInputError(f"empty_rows must be one of {_EMPTY_ROWS}, got {empty_rows!r}.")
    _reject_sparse(X)
    names = _feature_names(X)
    columns = None if names is None else [str(c) for c in names]
    Xn, missing = check_incomplete(X, columns=columns, allow_empty_rows=empty_rows == "marginal")
    return Xn, missing, names, columns


def _checked_result(result, warning_cls, algorithm: str):
    """Raise on a degenerate stop, re-emit the convergence warning at the caller's level."""
    if result.stop_reason == "degenerate":
        raise DegenerateCovarianceError(f"{algorithm} stopped after {result.n_iter} iteration(s): {result.message}")
    if result.stop_reason != "tol":
        warnings.warn(result.message, warning_cls, stacklevel=3)
    return result


def _mixture_score_samples(arr, weights, means, covariances, covariance_type="full") -> np.ndarray:
    """Observed-data log-likelihood of every row of ``arr`` (NaN = missing) under a Gaussian mixture; 0 for empty rows."""
    missing = np.isnan(arr)
    Xf = np.where(missing, 0.0, arr)
    K = weights.shape[0]
    ll = np.empty((arr.shape[0], K))
    if covariance_type == "full":
        patterns = group_patterns(missing)
        precision, logdet = precision_and_logdet(covariances)
        for k in range(K):
            ll[:, k] = observed_gaussian(Xf, patterns, means[k], precision[k], logdet[k], conditionals=False)[0]
    else:
        for k in range(K):
            ll[:, k] = observed_diagonal(Xf, missing, means[k], covariances[k], conditionals=False)[0]
    with np.errstate(divide="ignore"):
        out = logsumexp(ll + np.log(weights), axis=1)
    out[missing.all(axis=1)] = 0.0
    return out


class _MixtureImputerBase(TransformerMixin, BaseEstimator):
    """Shared plumbing of the mixture imputers (fit, validation, feature names, transform/sample/score/regress).

    Subclasses set ``_core`` (a core module with ``prepare``, ``fit`` and ``ConvergenceWarning``) and
    define ``_config``, ``_store_fit`` and ``conditional``; they may override the hooks
    ``_fit_setup`` (data given to ``_core.fit``), ``_impute`` (``transform``) and ``_score_rows``
    (``score_samples``). ``_store_fit`` sets ``weights_``, ``means_`` and ``covariances_``;
    ``_covariance_type`` says how to read ``covariances_``.
    """

    _covariance_type = "full"
    _core = None
    _algorithm = "EM"

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags

    # ------------------------------------------------------------------ fitting
    def fit(self, X, y=None):
        """Fit the model on the observed entries of ``X`` (missing entries are never filled in first).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            NaN marks a missing entry.
        y : ignored

        Returns
        -------
        self

        Raises
        ------
        BadInputError
            Invalid parameters or data: non-numeric or infinite values, columns with no observed
            value, all-missing rows with ``empty_rows="raise"``, more components than rows (factor
            models: ``n_factors >= n_features``).
        DegenerateCovarianceError
            The fit stopped on a collapsed (singular) component: increase the regularisation
            (``reg_covar``; ``reg`` of MFAImputer), use fewer components or drop constant /
            duplicated columns.

        Warns
        -----
        ConvergenceWarning
            When ``max_iter`` is reached before ``tol``.
        """
        config = self._config()  # parameter errors before data errors
        rng = _rng(self.random_state)
        Xn, missing, names, columns = _fit_input(X, self.empty_rows)
        data, config, context = self._fit_setup(Xn, missing, columns, config)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", self._core.ConvergenceWarning)
            result = self._core.fit(data, config, rng)
        _checked_result(result, self._core.ConvergenceWarning, self._algorithm)
        self._set_features(names, Xn.shape[1])
        self._store_fit(result, data, config, columns, context)
        self.converged_ = bool(result.converged)
        self.n_iter_ = int(result.n_iter)
        self.stop_reason_ = result.stop_reason
        return self

    def _fit_setup(self, Xn, missing, columns, config):
        """``(data, config, context)``: what ``_core.fit`` runs on, and anything ``_store_fit`` needs."""
        return self._core.prepare(Xn, missing, columns=columns), config, None

    # ------------------------------------------------------------------ using the model
    def transform(self, X):
        """Single imputation: every NaN replaced by its conditional mean :math:`E[x^m \\mid x^o]`
        (or the approximation the estimator's parameters select); observed entries returned bit for bit.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_features)
            No NaN.
        """
        return self._impute(self._validate(X))

    def _impute(self, arr: np.ndarray) -> np.ndarray:
        return self.conditional(arr).mean()

    def score_samples(self, X) -> np.ndarray:
        """Observed-data log-likelihood of every row, :math:`\\log\\sum_k \\pi_k N(x^o; \\mu_k^o, \\Sigma_k^{oo})`.

        Rows with every value missing score 0 (when ``empty_rows="marginal"``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        return self._score_rows(self._validate(X))

    def _score_rows(self, arr: np.ndarray) -> np.ndarray:
        return _mixture_score_samples(arr, self.weights_, self.means_, self.covariances_, self._covariance_type)

    @property
    def _columns(self):
        names = getattr(self, "feature_names_in_", None)
        return None if names is None else [str(c) for c in names]

    def _set_features(self, names, n_features: int) -> None:
        if names is not None:
            self.feature_names_in_ = names
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        self.n_features_in_ = n_features

    def _validate(self, X) -> np.ndarray:
        """Float copy of ``X`` (NaN = missing) checked against the fitted model."""
        check_is_fitted(self, "means_")
        _reject_sparse(X)
        names = _feature_names(X)
        fitted = getattr(self, "feature_names_in_", None)
        if names is not None and fitted is not None and not np.array_equal(names, fitted):
            raise BadInputError(
                f"X has columns {list(names)} but the imputer was fitted on {list(fitted)}. "
                "Pass the same columns in the same order."
            )
        arr = as_float_matrix(X, name="X", columns=self._columns if names is None else list(names))
        if arr.shape[1] != self.n_features_in_:
            raise BadInputError(
                f"X has {arr.shape[1]} feature(s) but the imputer was fitted on {self.n_features_in_}. "
                "Pass data with the same columns, in the same order, as in fit."
            )
        self._check_empty_rows(np.isnan(arr))
        return arr

    def _check_empty_rows(self, missing: np.ndarray) -> None:
        if self.empty_rows != "marginal":
            check_no_empty_rows(missing)

    def sample(self, X, n_imputations=5, random_state=None) -> np.ndarray:
        """Multiple imputation: draws of the missing entries from :math:`p(x^m \\mid x^o)`.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        n_imputations : int, default 5
        random_state : int, numpy.random.Generator or None

        Returns
        -------
        ndarray of shape (n_imputations, n_samples, n_features)
            Observed entries equal ``X`` in every imputation.
        """
        rng = _rng(random_state)
        return self.conditional(X).sample(n_imputations, rng)

    def score(self, X, y=None) -> float:
        """Mean observed-data log-likelihood per row (see :meth:`score_samples`)."""
        return float(np.mean(self.score_samples(X)))

    def regress(self, X, inputs, targets) -> np.ndarray:
        """Least-squares prediction of ``targets`` from ``inputs`` (Ghahramani & Jordan eq. 13).

        :math:`\\hat x^t = \\sum_k h_k(x^i)\\,[\\mu_k^t + \\Sigma_k^{ti}(\\Sigma_k^{ii})^{-1}(x^i - \\mu_k^i)]`
        with :math:`h_k(x^i) \\propto \\pi_k N(x^i; \\mu_k^i, \\Sigma_k^{ii})`. Columns in neither
        list are marginalised out; NaN inputs are marginalised too.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, len(inputs))
            Either full rows (only the ``inputs`` columns are read) or just the input columns,
            in the order of ``inputs``.
        inputs, targets : int, str or sequence of them
            Column indices, or names when the imputer was fitted on a DataFrame; disjoint.

        Returns
        -------
        ndarray of shape (n_samples, len(targets))
        """
        check_is_fitted(self, "means_")
        columns = self._columns
        if np.ndim(X) == 1:  # a single input column given as a vector
            X = np.asarray(X).reshape(-1, 1)
        arr = as_float_matrix(X, name="X")
        inp = np.atleast_1d(np.asarray(inputs, dtype=object))
        if arr.shape[1] == self.n_features_in_:
            idx = [self._column_index(j) for j in inp]
            arr = arr[:, idx]
        elif arr.shape[1] != inp.size:
            raise BadInputError(
                f"X has {arr.shape[1]} column(s): pass either all {self.n_features_in_} features or only "
                f"the {inp.size} input column(s), in the order of inputs."
            )
        mix = regression(
            self.weights_, self.means_, self.covariances_, arr,
            inputs=inputs, targets=targets, covariance_type=self._covariance_type, columns=columns,
        )
        return mix.mean()

    def _column_index(self, j) -> int:
        columns = self._columns
        if isinstance(j, str):
            if columns is None or j not in columns:
                raise BadInputError(
                    f"Unknown column {j!r}: the imputer was fitted on "
                    f"{'unnamed columns (use integer indices)' if columns is None else columns}."
                )
            return columns.index(j)
        if isinstance(j, numbers.Integral) and not isinstance(j, bool) and -self.n_features_in_ <= j < self.n_features_in_:
            return int(j) % self.n_features_in_
        raise BadInputError(f"{j!r} is not a column of the {self.n_features_in_} fitted feature(s).")

    def get_feature_names_out(self, input_features=None):
        """Output feature names (the input ones: imputation keeps the columns)."""
        check_is_fitted(self, "n_features_in_")
        fitted = getattr(self, "feature_names_in_", None)
        if input_features is not None:
            names = np.asarray(input_features, dtype=object)
            if names.size != self.n_features_in_ or (fitted is not None and not np.array_equal(names, fitted)):
                raise BadInputError("input_features do not match the features seen in fit.")
            return names
        if fitted is not None:
            return fitted.copy()
        return np.asarray([f"x{j}" for j in range(self.n_features_in_)], dtype=object)
