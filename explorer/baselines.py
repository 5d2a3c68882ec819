r"""The practitioners' baselines: chained equations with predictive mean matching, and mean / mode imputation.

What an analyst reaches for before any model of this library, so that every model is compared with them:

* :class:`PMMImputer`: multiple imputation by chained equations (MICE) with predictive mean matching, the
  default method of R's ``mice`` for numeric columns (van Buuren & Groothuis-Oudshoorn 2011, JSS 45(3),
  sections 3.2-3.4; van Buuren, *Flexible Imputation of Missing Data*, 2nd ed. 2018, section 3.4; PMM after
  Little 1988). One sweep visits every incomplete column from left to right; for column :math:`j`, with every
  other column filled by its current imputations, it

  1. fits the Bayesian linear regression of :math:`y = x_j` on :math:`Z = [1, x_{-j}]` over the rows where
     :math:`x_j` is observed (:func:`norm_draw`, Rubin 1987 p. 167, as ``mice``'s ``.norm.draw`` with
     ``ls.meth = "ridge"``): :math:`A = Z^\top Z + \kappa\,\mathrm{diag}(Z^\top Z)` with :math:`\kappa` =
     ``ridge`` = 1e-5, :math:`\hat\beta = A^{-1} Z^\top y`, :math:`\dot\sigma^2 = \mathrm{RSS}/\dot g` with
     :math:`\dot g \sim \chi^2_{\nu}`, :math:`\nu = \max(n_{obs} - p, 1)`, and
     :math:`\dot\beta = \hat\beta + \dot\sigma\,A^{-1/2} z`, :math:`z \sim N(0, I_p)`;
  2. predicts :math:`\hat y_{obs} = Z_{obs}\hat\beta` and :math:`\dot y_{mis} = Z_{mis}\dot\beta` ("type-1
     matching", ``mice``'s ``matchtype = 1``);
  3. for every missing row takes, at random, one of the ``donors`` observed rows whose :math:`\hat y_{obs}` is
     closest to its :math:`\dot y_{mis}` and imputes that donor's **observed** value (:func:`pmm_match`, as
     ``mice``'s ``matchindex``: records shuffled first so that ties fall at random).

  The chain starts from random draws of each column's observed values (``mice``'s initialisation) and runs
  ``max_iter`` sweeps (``mice``'s ``maxit`` = 5). Multiple imputation is independent chains
  (:meth:`PMMImputer.sample`).

* :class:`MeanModeImputer`: each column's observed mean (numeric columns) or most frequent level
  (categorical, text and boolean columns of a DataFrame), with the observed level frequencies
  (``category_probabilities_``) for a log-loss.

Departures from ``mice`` (said once here): the regression always carries the relative ridge (``mice`` >= 3.0
fits by QR and adds the ridge only when the cross-product is singular; ``ridge=0`` gives the plain least
squares of QR, with the ridge of 1e-5 used only when the Cholesky factorisation fails, as ``mice`` does);
:math:`A^{-1/2}` is the inverse of the upper Cholesky factor of :math:`A` (``mice`` factors :math:`A^{-1}`:
another square root of the same covariance, so the same distribution of :math:`\dot\beta`); no predictor is
dropped as constant or collinear (``mice``'s ``remove.constant`` / ``remove.lindep``): the ridge keeps the
solve defined; every other column predicts (``mice``'s default ``predictorMatrix``). A column with fewer
observed values than ``donors`` matches among all of them (``mice``'s ``matchindex`` clamps the same way;
``PMMImputer.n_donors_`` says how many each column had).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.linalg import LinAlgError, cho_factor, cho_solve, solve_triangular
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from explorer.core.validation import (
    BadInputError,
    NonNumericError,
    as_float_matrix,
    check_int,
    check_magnitude,
    check_nonnegative,
    column_label,
)
from explorer.utils.inputs import check_feature_names, feature_names_out, input_kind, unwrap, wrap, wrap_draws
from explorer.utils.random_state import check_random_state

__all__ = ["NormDraw", "norm_draw", "pmm_match", "PMMImputer", "MeanModeImputer"]

#: The ridge ``mice`` falls back on when the cross-product of the predictors is singular.
MICE_RIDGE = 1e-5


# --------------------------------------------------------------------------- the two steps of PMM
class NormDraw(NamedTuple):
    """One draw of :func:`norm_draw`: the estimate, the posterior draws and the residual scale."""

    coef: np.ndarray  #: :math:`\hat\beta`, shape (p,)
    beta: np.ndarray  #: :math:`\dot\beta`, shape (p,)
    sigma: float  #: :math:`\dot\sigma`
    sigma_hat: float  #: :math:`\sqrt{\mathrm{RSS}/\nu}`
    df: int  #: :math:`\nu = \max(n - p, 1)`


def norm_draw(Z, y, rng, ridge=MICE_RIDGE, *, what="y") -> NormDraw:
    r"""The Bayesian linear regression step of PMM: :math:`\hat\beta`, and :math:`(\dot\beta, \dot\sigma)` drawn.

    As ``mice``'s ``.norm.draw`` / ``estimice(ls.meth = "ridge")`` (Rubin 1987 p. 167): with
    :math:`A = Z^\top Z + \kappa\,\mathrm{diag}(Z^\top Z)`, :math:`\hat\beta = A^{-1}Z^\top y`,
    :math:`\dot\sigma = \sqrt{\mathrm{RSS}/\dot g}`, :math:`\dot g \sim \chi^2_\nu`, :math:`\nu = \max(n - p, 1)`,
    :math:`\dot\beta = \hat\beta + \dot\sigma U^{-1} z` where :math:`A = U^\top U` (so
    :math:`\mathrm{Cov}(\dot\beta \mid \dot\sigma) = \dot\sigma^2 A^{-1}`), :math:`z \sim N(0, I_p)`. All solves
    go through the Cholesky factor of :math:`A`; no inverse is formed.

    Parameters
    ----------
    Z : ndarray of shape (n, p)
        Predictors of the rows where ``y`` is observed (the intercept column included by the caller).
    y : ndarray of shape (n,)
    rng : numpy.random.Generator
    ridge : float, default 1e-5
        :math:`\kappa`, relative to the diagonal of :math:`Z^\top Z` (an all-zero predictor gets :math:`\kappa`).
        With ``ridge=0`` this is ordinary least squares; if :math:`Z^\top Z` is then singular the step falls
        back on ``mice``'s 1e-5.
    what : str
        Names ``y`` in the error message.

    Returns
    -------
    NormDraw
        ``coef`` (:math:`\hat\beta`), ``beta`` (:math:`\dot\beta`), ``sigma`` (:math:`\dot\sigma`),
        ``sigma_hat`` and ``df``.

    Raises
    ------
    BadInputError
        The cross-product is not positive definite even with the ridge (values beyond floating-point range).
    """
    Z = np.asarray(Z, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    n, p = Z.shape
    gram = Z.T @ Z
    diag = np.diagonal(gram)
    scale = np.where(diag > 0, diag, 1.0)
    factor = None
    for kappa in ((ridge,) if ridge >= MICE_RIDGE else (ridge, MICE_RIDGE)):
        try:
            factor = cho_factor(gram + np.diag(kappa * scale), lower=False, check_finite=False)
            break
        except LinAlgError:
            continue
    if factor is None:
        raise BadInputError(
            f"PMM: the regression of {what} on the other columns has a singular cross-product even with the ridge "
            f"{max(ridge, MICE_RIDGE):g}. Drop duplicated or constant columns, rescale columns on extreme scales, "
            "or raise ridge."
        )
    coef = cho_solve(factor, Z.T @ y, check_finite=False)
    resid = y - Z @ coef
    rss = float(resid @ resid)
    df = max(n - p, 1)
    sigma = float(np.sqrt(rss / rng.chisquare(df)))
    # U^{-1} z has covariance U^{-1} U^{-T} = A^{-1}; cho_factor's upper triangle holds U (the rest is not read)
    beta = coef + sigma * solve_triangular(factor[0], rng.standard_normal(p), lower=False, check_finite=False)
    return NormDraw(coef, beta, sigma, float(np.sqrt(rss / df)), df)


def pmm_match(yhat_obs, yhat_mis, donors, rng) -> np.ndarray:
    """For every target, the index of a donor drawn at random among the ``donors`` nearest predictions.

    As ``mice``'s ``matchindex`` (``src/matchindex.cpp``): the donors are shuffled, then sorted by prediction
    (stably, so equal predictions stay in random order); for each target the ``k = min(donors, n_donors)``
    donors with the closest predictions are found and one of them is drawn uniformly. Runs in
    :math:`O((n_{obs} + n_{mis}) \\log n_{obs} + n_{mis} k \\log k)`: the ``k`` nearest of a target lie in the
    ``2k`` sorted donors around its insertion point.

    Parameters
    ----------
    yhat_obs : ndarray of shape (n_obs,)
        Predictions of the donors (observed rows).
    yhat_mis : ndarray of shape (n_mis,)
        Predictions of the targets (missing rows).
    donors : int
        Size of the pool each target draws from (clamped to ``1 <= k <= n_obs``).
    rng : numpy.random.Generator

    Returns
    -------
    ndarray of int, shape (n_mis,)
        Positions in ``yhat_obs``.
    """
    yhat_obs = np.asarray(yhat_obs, dtype=np.float64)
    yhat_mis = np.asarray(yhat_mis, dtype=np.float64)
    n1, n0 = yhat_obs.size, yhat_mis.size
    if n1 == 0:
        raise BadInputError("pmm_match needs at least one donor.")
    k = min(max(int(donors), 1), n1)
    shuffled = rng.permutation(n1)
    order = shuffled[np.argsort(yhat_obs[shuffled], kind="stable")]
    ysort = yhat_obs[order]
    width = min(2 * k, n1)
    start = np.clip(np.searchsorted(ysort, yhat_mis) - k, 0, n1 - width)
    window = start[:, None] + np.arange(width)
    nearest = np.argsort(np.abs(ysort[window] - yhat_mis[:, None]), axis=1, kind="stable")[:, :k]
    rows = np.arange(n0)
    pick = rng.integers(k, size=n0)
    return order[window[rows, nearest[rows, pick]]]


def _chain(values, missing, fit_rows, *, donors, max_iter, ridge, rng, columns=None):
    """One MICE chain: ``(completed, chain_mean)``.

    ``values`` (n, D) has NaN where ``missing``; only the rows of ``fit_rows`` fit the regressions and serve as
    donors (``mice``'s ``ignore``: the others are imputed only). ``chain_mean`` (max_iter, D) is the mean of each
    column's imputations after every sweep (NaN for complete columns), ``mice``'s ``chainMean``.
    """
    n, D = values.shape
    X = values.copy()
    donor = ~missing & fit_rows[:, None]
    visit = np.flatnonzero(missing.any(axis=0))
    for j in visit:  # mice's initialisation: random draws (with replacement) of the observed values
        mis = missing[:, j]
        X[mis, j] = rng.choice(values[donor[:, j], j], size=int(mis.sum()))
    chain_mean = np.full((max_iter, D), np.nan)
    Z = np.ones((n, D))  # [1, x_{-j}]
    for it in range(max_iter):
        for j in visit:
            Z[:, 1:j + 1] = X[:, :j]
            Z[:, j + 1:] = X[:, j + 1:]
            rows, mis = donor[:, j], missing[:, j]
            y = values[rows, j]
            draw = norm_draw(Z[rows], y, rng, ridge, what=column_label(j, columns))
            X[mis, j] = y[pmm_match(Z[rows] @ draw.coef, Z[mis] @ draw.beta, donors, rng)]
        chain_mean[it, visit] = [X[missing[:, j], j].mean() for j in visit]
    return X, chain_mean


# --------------------------------------------------------------------------- PMMImputer
class PMMImputer(TransformerMixin, BaseEstimator):
    """Chained equations with predictive mean matching: R ``mice``'s default ``pmm``, as a scikit-learn imputer.

    Every imputed value is an **observed** value of its column (a donor's), so imputations stay in the data's
    support (integers stay integers, bounds hold); the draws of the regression's parameters and of the donors make
    independent chains proper multiple imputations. The algorithm and its sources are in the module docstring.

    Parameters
    ----------
    donors : int, default 5
        Size of the pool of nearest donors each missing entry draws from (``mice``'s ``donors``). A column
        with fewer observed values draws among all of them (``n_donors_``).
    max_iter : int, default 5
        Sweeps over the incomplete columns per chain (``mice``'s ``maxit``).
    ridge : float, default 1e-5
        Relative ridge of the regressions (``mice``'s ``ridge``), see :func:`norm_draw`.
    random_state : int, numpy.random.Generator or None, default None
        Seeds the chain of ``fit`` and the seed ``transform`` uses for rows it was not fitted on
        (scikit-learn's convention: an int makes ``fit`` reproducible, a Generator is consumed, None draws
        fresh entropy). :meth:`sample` takes its own ``random_state``.

    Attributes
    ----------
    completed_ : ndarray of shape (n_samples, n_features)
        The training data completed by the chain of ``fit`` (what ``transform`` returns for them).
    chain_mean_ : ndarray of shape (max_iter, n_features)
        Mean of each column's imputations after every sweep of that chain (NaN for complete columns):
        ``mice``'s ``chainMean``, to see whether ``max_iter`` sweeps were enough.
    n_donors_ : ndarray of int, shape (n_features,)
        ``min(donors, observed values of the column)``: the pool size each column matched with in ``fit``.
    transform_seed_ : int
        Seed of the chain ``transform`` runs for rows other than the training rows (drawn in ``fit``), so
        ``transform`` is a function of its input once fitted.
    n_iter_ : int
        ``max_iter``.
    n_features_in_, feature_names_in_
        As scikit-learn.

    Notes
    -----
    ``transform`` is a **single imputation: one chain's completion**, not a mean over chains (a mean of
    donors' values is no longer a PMM imputation and understates the spread; R's analysis pools the ``m``
    completed data sets instead: use :meth:`sample`). On the training data it returns ``completed_``; on other
    rows it runs one chain on the training rows and the new rows together in which only the training rows'
    observed values fit the regressions and serve as donors (``mice``'s ``ignore``: the new rows are imputed,
    never learned from), and returns the new rows. Observed entries come back bit for bit; no NaN.

    Examples
    --------
    >>> import numpy as np
    >>> from explorer.baselines import PMMImputer
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=200)
    >>> X = np.column_stack([x, 2 * x + 1 + 0.1 * rng.normal(size=200)])
    >>> X[:40, 1] = np.nan
    >>> imp = PMMImputer(random_state=0).fit(X)
    >>> filled = imp.transform(X)
    >>> bool(np.isin(filled[:40, 1], X[40:, 1]).all())  # every imputation is an observed value
    True
    >>> imp.sample(X, n_imputations=10, random_state=1).shape
    (10, 200, 2)
    """

    def __init__(self, donors=5, max_iter=5, ridge=MICE_RIDGE, random_state=None):
        self.donors = donors
        self.max_iter = max_iter
        self.ridge = ridge
        self.random_state = random_state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags

    # ------------------------------------------------------------------ input
    def _check_params(self) -> None:
        check_int("donors", self.donors, 1)
        check_int("max_iter", self.max_iter, 1)
        check_nonnegative("ridge", self.ridge)

    @staticmethod
    def _matrix(X):
        """``(values, names, labels)``: the float matrix of any input kind (NaN = missing), shape and values checked."""
        try:
            matrix, names, labels = unwrap(X)
            values = as_float_matrix(matrix, name="X", columns=labels)
        except NonNumericError as exc:
            raise NonNumericError(
                f"PMMImputer imputes numeric columns only (a linear regression per column). {exc} For a baseline "
                "on categorical or text columns use explorer.baselines.MeanModeImputer (mean / most frequent level)."
            ) from None
        check_magnitude(values, columns=labels)
        return values, names, labels

    def _fit_check(self, values, labels) -> None:
        if values.shape[0] < 2:
            raise BadInputError(
                f"X has n_samples={values.shape[0]}; PMMImputer needs at least 2 rows (a regression and a donor)."
            )
        empty = np.flatnonzero(np.isnan(values).all(axis=0))
        if empty.size:
            names = ", ".join(column_label(j, labels) for j in empty[:5]) + (" ..." if empty.size > 5 else "")
            raise BadInputError(
                f"{names} {'has' if empty.size == 1 else 'have'} no observed value: PMM imputes a column with "
                "observed values of that column (donors), so it cannot impute it. Drop the column, or impute it "
                "otherwise first."
            )

    # ------------------------------------------------------------------ fit / transform / sample
    def fit(self, X, y=None):
        """Run one chain on ``X`` and keep its completion (``completed_``).

        Parameters
        ----------
        X : array-like, DataFrame, 2-D DataArray or IncompleteData of shape (n_samples, n_features)
            Numeric; NaN marks a missing entry. Rows with every entry missing are imputed too.
        y : ignored

        Returns
        -------
        self

        Raises
        ------
        BadInputError
            ``donors`` or ``max_iter`` not a positive integer, ``ridge`` negative, a bad ``random_state``; X not
            2-D or empty, fewer than 2 rows, infinite values or values beyond ``±1e100``, a column with no
            observed value (named).
        NonNumericError
            Categorical or text columns (use :class:`MeanModeImputer`, or encode them as numbers).
        """
        self._check_params()
        rng = check_random_state(self.random_state)
        values, names, labels = self._matrix(X)
        self._fit_check(values, labels)
        missing = np.isnan(values)
        self.completed_, self.chain_mean_ = _chain(
            values, missing, np.ones(values.shape[0], dtype=bool), donors=self.donors, max_iter=self.max_iter,
            ridge=self.ridge, rng=rng, columns=labels)
        self.transform_seed_ = int(rng.integers(0, 2**63 - 1))
        self.X_fit_ = values
        self.n_donors_ = np.minimum(self.donors, (~missing).sum(axis=0))
        self.n_iter_ = int(self.max_iter)
        check_feature_names(self, names, values.shape[1], reset=True)
        self._labels = labels
        return self

    def _validate(self, X) -> np.ndarray:
        check_is_fitted(self, "completed_")
        values, names, _ = self._matrix(X)
        check_feature_names(self, names, values.shape[1])
        return values

    def _is_training(self, values) -> bool:
        return values.shape == self.X_fit_.shape and np.array_equal(values, self.X_fit_, equal_nan=True)

    def _run(self, values, rng) -> np.ndarray:
        """One chain's completion of ``values`` (the training rows as regression data and donors when new)."""
        params = dict(donors=self.donors, max_iter=self.max_iter, ridge=self.ridge, rng=rng, columns=self._labels)
        if self._is_training(values):
            return _chain(values, np.isnan(values), np.ones(values.shape[0], dtype=bool), **params)[0]
        n_fit = self.X_fit_.shape[0]
        stacked = np.vstack([self.X_fit_, values])
        fit_rows = np.arange(stacked.shape[0]) < n_fit
        return _chain(stacked, np.isnan(stacked), fit_rows, **params)[0][n_fit:]

    def transform(self, X):
        """Single imputation: one chain's completion of ``X`` (see the class Notes).

        Parameters
        ----------
        X : array-like, DataFrame, 2-D DataArray or IncompleteData of shape (n_samples, n_features)

        Returns
        -------
        ndarray, DataFrame, DataArray or IncompleteData of shape (n_samples, n_features)
            The kind of ``X`` (a DataFrame keeps its index and columns); observed entries bit for bit, every
            imputed entry an observed training value of its column; no NaN.

        Raises
        ------
        BadInputError
            Not fitted-compatible: other columns or number of features, infinite or non-numeric values.
        """
        values = self._validate(X)
        if not np.isnan(values).any():
            out = values
        elif self._is_training(values):
            out = self.completed_.copy()
        else:
            out = self._run(values, np.random.default_rng(self.transform_seed_))
        return wrap(X, out, f" by {type(self).__name__}")

    def sample(self, X, n_imputations=5, random_state=None):
        """Multiple imputation: ``n_imputations`` independent chains (``mice``'s ``m``).

        Parameters
        ----------
        X : array-like, DataFrame, 2-D DataArray or IncompleteData of shape (n_samples, n_features)
            The training data or new rows (then as :meth:`transform`: the training rows fit and donate).
        n_imputations : int, default 5
        random_state : int, numpy.random.Generator or None
            An int makes the draws reproducible; a Generator is consumed (successive calls differ).

        Returns
        -------
        ndarray, DataFrame or DataArray
            Array ``X``: ndarray of shape (n_imputations, n_samples, n_features); the other kinds as
            :meth:`explorer.impute.base._MixtureImputerBase.sample` (a DataFrame: stacked, MultiIndex
            ``(imputation, <X's index>)``). Observed entries equal ``X`` in every imputation; no NaN.

        Raises
        ------
        BadInputError
            ``n_imputations`` not a positive integer, a bad ``random_state``, or ``X`` as in :meth:`transform`.
        """
        check_int("n_imputations", n_imputations, 1)
        rng = check_random_state(random_state)
        values = self._validate(X)
        if not np.isnan(values).any():
            draws = np.broadcast_to(values, (n_imputations, *values.shape)).copy()
        else:
            seeds = rng.integers(0, 2**63 - 1, size=n_imputations)
            draws = np.stack([self._run(values, np.random.default_rng(int(s))) for s in seeds])
        return wrap_draws(X, draws)

    def get_feature_names_out(self, input_features=None):
        """Output feature names (the input ones: imputation keeps the columns)."""
        return feature_names_out(self, input_features)


# --------------------------------------------------------------------------- MeanModeImputer
def _frame_kinds(df):
    """``["numeric" | "categorical", ...]`` of a DataFrame's columns; other dtypes (dates, ...) refused by name."""
    import pandas as pd

    from explorer.impute.mixed import categorical_columns

    if len(set(df.columns)) != df.shape[1]:
        raise BadInputError("MeanModeImputer: the DataFrame's column names must be unique.")
    cats = set(categorical_columns(df))
    kinds, bad = [], []
    for j, c in enumerate(df.columns):
        dtype = df.iloc[:, j].dtype
        if c in cats:
            kinds.append("categorical")
        elif pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_complex_dtype(dtype):
            kinds.append("numeric")
        else:
            bad.append(f"{str(c)!r} ({dtype})")
    if bad:
        raise BadInputError(
            f"MeanModeImputer: column(s) {', '.join(bad)} are neither numeric nor categorical (categorical, text, "
            "object or boolean). Convert them (e.g. dates to numbers of days) or drop them."
        )
    return kinds


class MeanModeImputer(TransformerMixin, BaseEstimator):
    """Each column's observed mean (numeric) or most frequent level (categorical): the simplest baseline.

    A DataFrame goes in as it is: numeric columns (float, int, nullable int) are imputed by their mean; pandas
    categorical, string, object and boolean columns by their most frequent observed level (the first of
    ``Series.mode``'s sorted result among ties). Any other input kind (ndarray, DataArray, IncompleteData) is
    all numeric. Rows with every entry missing are filled too.

    Attributes
    ----------
    statistics_ : ndarray of object, shape (n_features,)
        The fill value of every column (a float for numeric columns, a level for categorical ones).
    kinds_ : list of str
        ``"numeric"`` or ``"categorical"`` per column.
    category_probabilities_ : dict
        Column name -> pandas Series of the observed level frequencies (summing to 1, by decreasing
        frequency; a categorical dtype's declared but unseen levels at 0): what a log-loss of the imputed
        categories needs. Empty for numeric data.
    n_features_in_, feature_names_in_
        As scikit-learn.

    Notes
    -----
    ``transform`` of a DataFrame returns a DataFrame with the same index, columns and dtypes (categories keep
    their levels), with one exception: a pandas nullable integer column ("Int64", ...) comes back as "Float64",
    since the mean of integers is seldom an integer (always, so that every batch has the same dtype). Other
    kinds come back as they went in (see :func:`explorer.utils.inputs.wrap`). Observed entries are unchanged.

    Examples
    --------
    >>> import pandas as pd
    >>> from explorer.baselines import MeanModeImputer
    >>> df = pd.DataFrame({"x": [1.0, None, 3.0, 5.0], "c": pd.Categorical(["a", "b", None, "b"])})
    >>> out = MeanModeImputer().fit_transform(df)
    >>> out["x"].tolist(), out["c"].tolist(), str(out["c"].dtype)
    ([1.0, 3.0, 3.0, 5.0], ['a', 'b', 'b', 'b'], 'category')
    >>> MeanModeImputer().fit(df).category_probabilities_["c"].round(3).to_dict()
    {'b': 0.667, 'a': 0.333}
    """

    def __init__(self):
        pass

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags

    def fit(self, X, y=None):
        """Learn each column's fill value and level frequencies.

        Parameters
        ----------
        X : DataFrame, array-like, 2-D DataArray or IncompleteData of shape (n_samples, n_features)
        y : ignored

        Returns
        -------
        self

        Raises
        ------
        BadInputError
            X not 2-D or empty, duplicated column names, columns neither numeric nor categorical (dates),
            infinite values, a column with no observed value (named); non-numeric cells in a non-DataFrame input
            (:class:`~explorer.core.validation.NonNumericError`).
        """
        if input_kind(X) == "dataframe":
            return self._fit_frame(X)
        matrix, names, labels = unwrap(X)
        values = as_float_matrix(matrix, name="X", columns=labels)
        self._check_empty(np.isnan(values).all(axis=0), labels)
        with np.errstate(invalid="ignore"):
            self.statistics_ = np.nanmean(values, axis=0).astype(object)
        self.kinds_ = ["numeric"] * values.shape[1]
        self.category_probabilities_ = {}
        self._frame_columns = None
        check_feature_names(self, names, values.shape[1], reset=True)
        return self

    @staticmethod
    def _check_empty(empty, labels) -> None:
        idx = np.flatnonzero(empty)
        if idx.size:
            raise BadInputError(
                f"MeanModeImputer: {', '.join(column_label(j, labels) for j in idx[:5])}"
                f"{' ...' if idx.size > 5 else ''} {'has' if idx.size == 1 else 'have'} no observed value, so no mean "
                "or most frequent level. Drop the column(s)."
            )

    def _fit_frame(self, df):
        if df.shape[0] == 0 or df.shape[1] == 0:
            raise BadInputError(f"X is empty (shape={df.shape}) while a minimum of 1 row and 1 column is required.")
        kinds = _frame_kinds(df)
        labels = [str(c) for c in df.columns]
        self._check_empty(df.isna().all(axis=0).to_numpy(), labels)
        stats, probs = [], {}
        for j, c in enumerate(df.columns):
            s = df.iloc[:, j]
            if kinds[j] == "numeric":
                finite = np.isfinite(s.dropna().to_numpy(dtype=np.float64))
                if not finite.all():
                    raise BadInputError(
                        f"X contains infinite value(s) in {column_label(j, labels)}. Replace them by NaN to treat "
                        "them as missing, or clip them to a finite range.")
                stats.append(float(s.mean()))
            else:
                stats.append(s.mode(dropna=True).iloc[0])
                probs[c] = s.value_counts(normalize=True, dropna=True)
        self.statistics_ = np.empty(len(stats), dtype=object)
        self.statistics_[:] = stats
        self.kinds_ = kinds
        self.category_probabilities_ = probs
        self._frame_columns = list(df.columns)
        names = np.asarray(labels, dtype=object) if all(isinstance(c, str) for c in df.columns) else None
        check_feature_names(self, names, df.shape[1], reset=True)
        return self

    def transform(self, X):
        """Fill every missing entry with its column's mean or most frequent level.

        Parameters
        ----------
        X : DataFrame, array-like, 2-D DataArray or IncompleteData of shape (n_samples, n_features)
            A DataFrame with the fitted columns when categorical columns were fitted.

        Returns
        -------
        DataFrame, ndarray, DataArray or IncompleteData
            The kind of ``X``; dtypes as in the class Notes; no missing entry.

        Raises
        ------
        BadInputError
            Other columns or number of features than in fit, categorical columns given as a non-DataFrame,
            a fitted numeric column that is no longer numeric, infinite values.
        """
        check_is_fitted(self, "statistics_")
        if input_kind(X) == "dataframe" and self._frame_columns is not None:
            return self._transform_frame(X)
        if "categorical" in self.kinds_:
            raise BadInputError(
                "MeanModeImputer was fitted on a DataFrame with categorical columns "
                f"{[str(c) for c, k in zip(self._frame_columns, self.kinds_) if k == 'categorical']}; pass a "
                "DataFrame with the same columns.")
        matrix, names, labels = unwrap(X)
        values = as_float_matrix(matrix, name="X", columns=labels)
        check_feature_names(self, names, values.shape[1])
        out = np.where(np.isnan(values), self.statistics_.astype(np.float64), values)
        return wrap(X, out, f" by {type(self).__name__}")

    def _transform_frame(self, df):
        import pandas as pd

        if list(df.columns) != self._frame_columns:
            raise BadInputError(
                f"X has columns {list(df.columns)} but MeanModeImputer was fitted on {self._frame_columns}. "
                "Pass the same columns in the same order.")
        kinds = _frame_kinds(df)
        out = {}
        for j, c in enumerate(df.columns):
            s, value = df.iloc[:, j], self.statistics_[j]
            if self.kinds_[j] == "numeric":
                if kinds[j] != "numeric":
                    raise BadInputError(
                        f"MeanModeImputer: column {str(c)!r} was numeric in fit but has dtype {s.dtype} here.")
                if not np.isfinite(s.dropna().to_numpy(dtype=np.float64)).all():
                    raise BadInputError(f"X contains infinite value(s) in column {str(c)!r}; replace them by NaN.")
                if isinstance(s.dtype, pd.api.extensions.ExtensionDtype) and pd.api.types.is_integer_dtype(s.dtype):
                    s = s.astype("Float64")
                out[c] = s.fillna(value) if s.isna().any() else s
            elif not s.isna().any():
                out[c] = s
            elif isinstance(s.dtype, pd.CategoricalDtype):
                if value not in s.cat.categories:
                    s = s.cat.add_categories([value])
                out[c] = s.fillna(value)
            elif kinds[j] == "numeric":  # a text column arriving all-missing (float NaN): cells of the level
                out[c] = s.astype(object).where(s.notna(), value)
            else:
                out[c] = s.fillna(value)
        return pd.DataFrame(out, index=df.index, columns=df.columns)

    def get_feature_names_out(self, input_features=None):
        """Output feature names (the input ones: imputation keeps the columns)."""
        return feature_names_out(self, input_features)
