"""The shared scikit-learn plumbing of the mixture imputers.

:class:`_MixtureImputerBase` gives :class:`~explorer.impute.gaussian_mixture.GaussianMixtureImputer`,
:class:`~explorer.impute.dp_mixture.DPGMMImputer`, :class:`~explorer.impute.factor.FactorAnalysisImputer` and
:class:`~explorer.impute.factor.MFAImputer` one ``fit`` / ``transform`` / ``sample`` / ``score_samples`` /
``score`` / ``regress`` path, input validation with clear errors (non-numeric or sparse input,
infinities, all-missing rows and columns, wrong shapes) and feature names; each subclass supplies its
core fit and its conditional through a few hooks.

Input kinds: numpy arrays (and anything ``numpy.asarray`` reads), pandas DataFrames (numeric
columns; a non-numeric column is an error naming it, see :func:`explorer.io.encode_categoricals`),
2-D xarray DataArrays (rows along the first dimension, columns along the second) and
:class:`~explorer.core.data.IncompleteData` (what :func:`explorer.io.from_csv` returns).
``transform`` / ``fit_transform`` return the kind they were given (index, columns, dims,
coordinates kept; an IncompleteData comes back with no missing entry); ``sample`` returns an
``imputation`` axis in front (see :meth:`_MixtureImputerBase.sample`).

No NaN or infinity leaves ``transform``, ``sample``, ``score_samples`` or ``regress``: values
beyond ``±1e100`` are refused with a clear error (the models square them), and a result that is
not finite anyway raises :class:`~explorer.core.validation.BadInputError` naming the rows.
"""

from __future__ import annotations

import numbers
import warnings
from dataclasses import replace

import numpy as np
from scipy.special import logsumexp
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from explorer.core.gaussians.conditional import regression
from explorer.core.gaussians.gaussian import (
    DegenerateCovarianceError,
    observed_diagonal,
    observed_gaussian,
    precision_and_logdet,
)
from explorer.core.gaussians.patterns import group_patterns
from explorer.core.validation import (
    BadInputError,
    as_float_matrix,
    check_draws,
    check_incomplete,
    check_magnitude,
    check_no_empty_rows,
    column_label,
)
from explorer.utils.inputs import check_feature_names, feature_names_out, input_kind, unwrap, wrap, wrap_draws
from explorer.utils.progress import FitInterruptedWarning, FitProgress, check_progress_params
from explorer.utils.random_state import check_random_state

_EMPTY_ROWS = ("raise", "marginal")


class ScaleWarning(UserWarning):
    """A column's spread is so small that the estimator's variance floor (in squared data units) dominates it."""


def _fit_input(X, empty_rows):
    """Validate training data: ``(X_nan, missing, names, columns)`` (``names`` for ``feature_names_in_``)."""
    if empty_rows not in _EMPTY_ROWS:
        raise BadInputError(f"empty_rows must be one of {_EMPTY_ROWS}, got {empty_rows!r}.")
    matrix, names, labels = unwrap(X)
    columns = None if names is None else [str(c) for c in names]
    Xn, missing = check_incomplete(matrix, columns=labels, allow_empty_rows=empty_rows == "marginal")
    check_magnitude(Xn, columns=labels)
    if Xn.shape[0] < 2:
        raise BadInputError(
            f"X has n_samples={Xn.shape[0]}; at least 2 rows are needed to fit a model (a covariance needs "
            "two observations)."
        )
    return Xn, missing, names, columns


def _checked_result(result, warning_cls, algorithm: str):
    """Raise on a degenerate stop (the convergence warning is re-emitted by ``fit``, at the caller's level)."""
    if result.stop_reason == "degenerate":
        raise DegenerateCovarianceError(f"{algorithm} stopped after {result.n_iter} iteration(s): {result.message}")
    return result


def _scale_note(Xn, columns, ratio_limit: float = 1e6) -> str:
    """A sentence about columns on very different scales (observed spreads ``ratio_limit`` apart), or ''."""
    with np.errstate(invalid="ignore"):
        spread = np.nanstd(Xn, axis=0)
    positive = np.flatnonzero(spread > 0)
    if positive.size < 2:
        return ""
    j_big, j_small = positive[np.argmax(spread[positive])], positive[np.argmin(spread[positive])]
    ratio = spread[j_big] / spread[j_small]
    if ratio < ratio_limit:
        return ""
    return (
        f" Note: the columns' spreads differ by a factor of {ratio:.2g} ({column_label(j_big, columns)}: standard "
        f"deviation {spread[j_big]:.3g}; {column_label(j_small, columns)}: {spread[j_small]:.3g}), which makes "
        "covariances singular in floating point: standardise the columns first (e.g. sklearn's StandardScaler), "
        "or rescale them to comparable units."
    )


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

        KeyboardInterrupt
            Only when interrupted before the first complete iteration (the estimator is unchanged).

        Warns
        -----
        ConvergenceWarning
            When ``max_iter`` is reached before ``tol``.
        FitInterruptedWarning
            When interrupted (Ctrl-C) after at least one iteration: the best state so far is kept,
            ``stop_reason_ == "interrupted"`` (see :mod:`explorer.utils.progress`).
        """
        if self._auto_requested():
            # parameter and data errors before the selection's fits (cheap checks first)
            self._auto_k = 1
            try:
                self._config()
            finally:
                del self._auto_k
            check_progress_params(getattr(self, "callback", None), getattr(self, "progress", False))
            return self._fit_auto(X, _fit_input(X, self.empty_rows)[0])
        config = self._config()  # parameter errors before data errors
        check_progress_params(getattr(self, "callback", None), getattr(self, "progress", False))
        rng = check_random_state(self.random_state)
        Xn, missing, names, columns = _fit_input(X, self.empty_rows)
        self._warn_small_scale(Xn, columns)
        config = self._tune(Xn, config)
        data, config, context = self._fit_setup(Xn, missing, columns, config)
        with warnings.catch_warnings(record=True) as caught, FitProgress(
                getattr(self, "callback", None), getattr(self, "progress", False), type(self).__name__) as monitor:
            warnings.simplefilter("ignore", self._core.ConvergenceWarning)
            warnings.simplefilter("ignore", FitInterruptedWarning)
            try:
                result = self._core.fit(data, config, rng, callback=monitor)
                _checked_result(result, self._core.ConvergenceWarning, self._algorithm)
            except DegenerateCovarianceError as exc:
                raise DegenerateCovarianceError(f"{exc}{_scale_note(Xn, columns)}") from exc
            except BadInputError:
                raise
            except (ValueError, ArithmeticError, np.linalg.LinAlgError) as exc:
                raise BadInputError(self._breakdown_message(Xn, columns, f"{type(exc).__name__}: {exc}")) from exc
        level = 4 if getattr(self, "_auto_k", None) is not None else 2  # the user's fit call (via _fit_auto)
        for w in caught:  # the core's warnings (e.g. ComponentCollapseWarning), pointed at the user's call
            warnings.warn(w.message, w.category, stacklevel=level)
        if result.stop_reason == "interrupted":
            warnings.warn(f"{type(self).__name__}.fit: {result.message}", FitInterruptedWarning, stacklevel=level)
        elif result.stop_reason not in ("tol", "callback"):  # a callback's StopIteration is the user's choice
            warnings.warn(result.message, self._core.ConvergenceWarning, stacklevel=level)
        self._set_features(names, Xn.shape[1])
        with np.errstate(invalid="ignore"):  # columns whose observed values are all positive (NaN compares False)
            self.positive_columns_ = ~np.any(Xn <= 0, axis=0)
        self._store_fit(result, data, config, columns, context)
        if not all(np.isfinite(a).all() for a in (self.weights_, self.means_, self.covariances_)):
            raise BadInputError(self._breakdown_message(Xn, columns, "the fitted parameters are not finite"))
        if getattr(self, "_defer_posterior", False):  # n_components="auto": drawn once K is final (fit_auto)
            self._deferred_posterior = (data, rng)
        else:
            self._fit_posterior(data, rng)
        self.converged_ = bool(result.converged)
        self.n_iter_ = int(result.n_iter)
        self.stop_reason_ = result.stop_reason
        self.n_components_ = int(np.asarray(self.weights_).shape[0])
        if self._supports_auto and getattr(self, "_auto_k", None) is None:
            self.selection_ = None
        return self

    # ------------------------------------------------------------------ n_components="auto"
    _supports_auto = False  # GaussianMixtureImputer and MFAImputer accept n_components="auto"
    _auto_criterion = "heldout"  # the rule of explorer.model_selection.select_n_components they use
    # (their _fit_auto is explorer.model_selection.fit_auto: the base never imports model selection, which
    # imports the estimators it fits)

    def _auto_requested(self) -> bool:
        k = getattr(self, "n_components", None)
        return (self._supports_auto and isinstance(k, str) and k == "auto"
                and getattr(self, "_auto_k", None) is None)

    def _n_components(self):
        """The K of this fit: ``n_components``, or the one chosen for ``n_components="auto"``."""
        k = getattr(self, "_auto_k", None)
        return self.n_components if k is None else k

    def _fit_auto(self, X, values):
        """``fit`` with ``n_components="auto"`` (``values``: ``X`` validated, float with NaN): an estimator that sets
        ``_supports_auto`` implements it."""
        raise NotImplementedError(f"{type(self).__name__} sets _supports_auto but has no _fit_auto")

    def _variance_floor(self):
        """``(parameter name, value)`` of the variance floor in squared data units, or None."""
        for name in ("min_psi", "reg_covar"):
            value = getattr(self, name, None)
            if isinstance(value, numbers.Real) and not isinstance(value, bool) and value > 0:
                return name, float(value)
        return None

    def _warn_small_scale(self, Xn, columns) -> None:
        """Warn (:class:`ScaleWarning`) about columns whose observed variance is within 100x the variance floor."""
        floor = self._variance_floor()
        if floor is None:
            return
        name, value = floor
        with np.errstate(invalid="ignore"):
            var = np.nanvar(Xn, axis=0)
        small = np.flatnonzero((var > 0) & (var < 100 * value))
        if small.size:
            j = int(small[0])
            warnings.warn(
                f"{column_label(j, columns)} has observed variance {var[j]:.3g}, within 100 times {name}={value:g} "
                f"(a floor on variances, in squared data units){f' (and {small.size - 1} more column(s))' if small.size > 1 else ''}: "
                f"the fit is dominated by it. Rescale the column(s) (e.g. multiply by a power of ten, or standardise) "
                f"or lower {name}.",
                ScaleWarning, stacklevel=3,
            )

    def _breakdown_message(self, Xn, columns, what: str) -> str:
        """A numerical failure of the fit said in terms of the data (column spreads), with remedies."""
        with np.errstate(invalid="ignore", over="ignore"):
            spread = np.nanmax(np.abs(Xn), axis=0)
        j_big, j_small = int(np.argmax(spread)), int(np.argmin(spread))
        ratio = spread[j_big] / spread[j_small] if spread[j_small] > 0 else np.inf
        return (
            f"{type(self).__name__}: the {self._algorithm} fit broke down numerically ({what}). The observed "
            f"values reach {spread[j_big]:.3g} in {column_label(j_big, columns)} and {spread[j_small]:.3g} in "
            f"{column_label(j_small, columns)} (ratio {ratio:.3g}). Rescale columns on very different or extreme "
            "scales (e.g. standardise them, or divide by a power of ten), drop constant or duplicated columns, "
            "or increase the regularisation."
        )

    def _fit_posterior(self, data, rng) -> None:
        """After the fit: anything drawn from the posterior (``GaussianMixtureImputer``'s data augmentation)."""

    def _tune(self, Xn, config):
        """The config of this fit after any choice made on the validated data ``Xn`` (NaN = missing) before it:
        ``GaussianMixtureImputer``'s held-out choice of the prior's shrinkage. The base changes nothing."""
        return config

    def _fit_setup(self, Xn, missing, columns, config):
        """``(data, config, context)``: what ``_core.fit`` runs on, and anything ``_store_fit`` needs."""
        return self._core.prepare(Xn, missing, columns=columns), config, None

    # ------------------------------------------------------------------ using the model
    def transform(self, X):
        """Single imputation: every NaN replaced by its conditional mean :math:`E[x^m \\mid x^o]`
        (or the approximation the estimator's parameters select); observed entries returned bit for bit.

        Parameters
        ----------
        X : array-like, DataFrame, 2-D DataArray or IncompleteData of shape (n_samples, n_features)
            NaN (or ``missing``) marks a missing entry.

        Returns
        -------
        ndarray, DataFrame, DataArray or IncompleteData of shape (n_samples, n_features)
            The kind of ``X``: a DataFrame keeps its index and columns, a DataArray its dims,
            coordinates, name and attributes, an IncompleteData comes back with no missing entry
            (same columns, ``binary`` flags and name; ``truth`` is not carried over). No NaN.

        Raises
        ------
        BadInputError
            Values beyond ``±1e100``, or rows whose imputation is not finite under the model
            (observed values extremely far from the fitted data).
        """
        arr = self._validate(X)
        out = self._impute(arr)
        self._check_finite(out, arr, "transform")
        return wrap(X, out, f" by {type(self).__name__}")

    def _impute(self, arr: np.ndarray) -> np.ndarray:
        return self.conditional(arr).mean()

    def _check_finite(self, out: np.ndarray, arr: np.ndarray, method: str) -> None:
        """The final guard: raise (naming the rows and their most distant value) if ``out`` is not finite."""
        bad = ~np.isfinite(out)
        if not bad.any():
            return
        # score_samples (n,), transform (n, D), sample (m, n, D)
        rows = np.flatnonzero(bad if out.ndim == 1 else bad.any(axis=1) if out.ndim == 2 else bad.any(axis=(0, 2)))
        weights = np.asarray(self.weights_)
        means = np.asarray(self.means_)
        cov = np.asarray(self.covariances_)
        var_k = cov if cov.ndim == 2 else np.diagonal(cov, axis1=1, axis2=2)
        mean = weights @ means
        sd = np.sqrt(np.maximum(weights @ (var_k + means**2) - mean**2, np.finfo(float).tiny))
        with np.errstate(invalid="ignore", over="ignore"):
            z = np.abs(arr[rows] - mean) / sd
        r = int(rows[0])
        detail = ""
        if np.isfinite(z[0]).any():
            j = int(np.nanargmax(z[0]))
            detail = (f" Row {r}: {column_label(j, self._columns)} = {arr[r, j]:.6g} lies {z[0, j]:.3g} standard "
                      f"deviations from the fitted mean {mean[j]:.6g}.")
        shown = ", ".join(str(i) for i in rows[:5]) + (" ..." if rows.size > 5 else "")
        raise BadInputError(
            f"{method}: the fitted model gives no finite result for {rows.size} row(s) (rows {shown}): their "
            f"observed values are so far from the fitted data that the density there is below floating-point "
            f"range.{detail} Check those values (a sentinel code or a unit error?), mark them missing (NaN), or "
            "refit on data that include such values."
        )

    def score_samples(self, X) -> np.ndarray:
        """Observed-data log-likelihood of every row, :math:`\\log\\sum_k \\pi_k N(x^o; \\mu_k^o, \\Sigma_k^{oo})`.

        Rows with every value missing score 0 (when ``empty_rows="marginal"``).

        Parameters
        ----------
        X : array-like, DataFrame, 2-D DataArray or IncompleteData of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
            Finite (a row whose log-density is not a finite float raises ``BadInputError``).
        """
        arr = self._validate(X)
        out = self._score_rows(arr)
        self._check_finite(out, arr, "score_samples")
        return out

    def _score_rows(self, arr: np.ndarray) -> np.ndarray:
        return _mixture_score_samples(arr, self.weights_, self.means_, self.covariances_, self._covariance_type)

    @property
    def _columns(self):
        names = getattr(self, "feature_names_in_", None)
        return None if names is None else [str(c) for c in names]

    def _set_features(self, names, n_features: int) -> None:
        check_feature_names(self, names, n_features, reset=True)

    def _validate(self, X) -> np.ndarray:
        """Float copy of ``X`` (NaN = missing) checked against the fitted model."""
        check_is_fitted(self, "means_")
        matrix, names, labels = unwrap(X)
        check_feature_names(self, names)
        labels = self._columns if labels is None else labels
        arr = as_float_matrix(matrix, name="X", columns=labels)
        check_feature_names(self, None, arr.shape[1])
        check_magnitude(arr, columns=labels)
        self._check_empty_rows(np.isnan(arr))
        return arr

    def _check_empty_rows(self, missing: np.ndarray) -> None:
        if self.empty_rows != "marginal":
            check_no_empty_rows(missing)

    def sample(self, X, n_imputations=5, random_state=None) -> np.ndarray:
        """Multiple imputation: draws of the missing entries from :math:`p(x^m \\mid x^o)`.

        Parameters
        ----------
        X : array-like, DataFrame, 2-D DataArray or IncompleteData of shape (n_samples, n_features)
        n_imputations : int, default 5
        random_state : int, numpy.random.Generator or None
            An int makes the draws reproducible; a Generator is consumed (successive calls differ).

        Returns
        -------
        ndarray, DataFrame or DataArray
            Observed entries equal ``X`` in every imputation; no NaN.

            * array ``X``: ndarray of shape (n_imputations, n_samples, n_features);
            * DataFrame: a long DataFrame, the imputations stacked, with a MultiIndex
              ``(imputation, <X's index>)`` and ``X``'s columns (``out.loc[i]`` is imputation i);
            * DataArray with dims (row, col): a DataArray with dims ("imputation", row, col), ``X``'s
              coordinates and an ``imputation`` coordinate 0..n_imputations-1;
            * IncompleteData: a DataArray with dims ("imputation", "sample", "feature") and the
              column names as the ``feature`` coordinate (``to_netcdf`` writes it as is).
        """
        rng = check_random_state(random_state)
        arr = self._validate(X)
        draws = self._draw_imputations(arr, n_imputations, rng)
        self._check_finite(draws, arr, "sample")
        return wrap_draws(X, draws)

    def _with_positive(self, conditional):
        """``conditional`` flagged with the training data's positive columns: its ``interval`` then warns
        (``NegativeIntervalWarning``) when such a column's interval reaches below zero."""
        positive = getattr(self, "positive_columns_", None)
        return conditional if positive is None else replace(conditional, positive=np.asarray(positive, dtype=bool))

    def _plugin_conditional(self, arr: np.ndarray):
        """The Gaussian conditional at the fitted parameters alone (no parameter draws, no Student-t), for answers
        that need finite moments after a non-linear map (:class:`~explorer.impute.transformed.TransformedImputer`'s
        back-transformed mean); by default :meth:`conditional`."""
        return self.conditional(arr)

    def _n_parameter_draws(self) -> int:
        """How many parameter draws the fit kept for proper multiple imputation (0: draws at the fit)."""
        return 0

    def _conditional_at_draw(self, arr: np.ndarray, m: int):
        """The conditional of ``arr`` at parameter draw ``m`` (estimators that keep draws define it)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no parameter draws")

    def _draw_imputations(self, arr: np.ndarray, n_imputations: int, rng) -> np.ndarray:
        """``(n_imputations, n, D)`` draws of the missing entries (observed ones copied). With parameter draws,
        imputation i is drawn at draw i % M, so every row of one imputation shares its parameters (Rubin)."""
        M = self._n_parameter_draws()
        if not M:
            return self.conditional(arr).sample(n_imputations, rng)
        check_draws(n_imputations, rng)
        out = np.empty((n_imputations,) + arr.shape)
        for m in range(min(M, n_imputations)):
            which = np.arange(m, n_imputations, M)
            out[which] = self._conditional_at_draw(arr, m).sample(which.size, rng)
        return out

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
        if input_kind(X) == "array" and np.ndim(X) == 1:  # a single input column given as a vector
            X = np.asarray(X).reshape(-1, 1)
        arr = as_float_matrix(unwrap(X)[0], name="X")
        check_magnitude(arr)
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
        out = mix.mean()
        if not np.isfinite(out).all():
            rows = np.flatnonzero(~np.isfinite(out).all(axis=1))
            raise BadInputError(
                f"regress: no finite prediction for {rows.size} row(s) (e.g. row {rows[0]}): their inputs are so "
                "far from the fitted data that the density there is below floating-point range. Check those values."
            )
        return out

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
        return feature_names_out(self, input_features)
