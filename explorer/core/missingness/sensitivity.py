r"""NMAR sensitivity analysis by delta adjustment of multiple imputations (pattern-mixture view).

marlin2008 digest, section 2.1: besides the selection-model factorisation
:math:`P(R \mid X)\,P(X)` the joint of data and response can be written as a *pattern mixture*
:math:`P(X \mid R)\,P(R)`: each response pattern has its own data distribution. The observed data
say nothing about :math:`P(x^m \mid x^o, R)`, the distribution of the values that went missing;
MAR imputation assumes it equals :math:`P(x^m \mid x^o)`. The delta-adjustment method (van
Buuren, *Flexible Imputation of Missing Data*, 2nd ed., section 3.8; Rubin 1987) makes the
departure from MAR explicit and reports how a conclusion moves with it:

1. draw M imputations under MAR (here from a fitted Gaussian mixture,
   :meth:`explorer.impute.gaussian_mixture.GaussianMixtureImputer.sample`);
2. for each value of :math:`\delta` on a grid, change **only the imputed entries** of one column j:
   shift :math:`x_{nj} \to x_{nj} + \delta` (``mode="shift"``, the neutral value is
   :math:`\delta = 0`) or scale :math:`x_{nj} \to \delta\, x_{nj}` (``mode="scale"``, neutral
   :math:`\delta = 1`); observed entries are never altered. This is the pattern-mixture model
   :math:`P(x_j^m \mid x^o, r_j = 0) = P_{MAR}(x_j^m - \delta \mid x^o)`;
3. on every adjusted data set compute a complete-data estimate :math:`\hat Q_m` and its variance
   :math:`U_m` (the mean of a column, or one coefficient of an OLS regression), and pool them by
   Rubin's rules (:func:`explorer.core.rubin.rubin_pool`: :math:`\bar Q`, :math:`\bar U`, B,
   :math:`T = \bar U + (1 + 1/M) B`, Barnard-Rubin degrees of freedom);
4. report the pooled estimate and its confidence interval against :math:`\delta`, and the
   **tipping point**: the :math:`\delta` closest to the neutral value at which the conclusion
   about a reference value (is it outside the interval?) differs from the conclusion at the
   neutral value.

Shifting by :math:`\delta` moves every imputed mean of column j by
:math:`\delta \cdot n^{mis}_j / N`, so the pooled mean moves by exactly that amount and the
between-imputation variance is unchanged (the oracle of the tests).

Not from the thesis (Marlin models the selection side only); no erratum of Appendix A applies.
numpy / scipy only.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np
from scipy.stats import t as student_t

from explorer.core.rubin import rubin_pool
from explorer.core.validation import BadInputError

__all__ = ["MODES", "NEUTRAL", "Estimand", "SensitivityTable", "TippingPoint", "adjust", "delta_adjustment",
           "estimate_sets", "mean_of", "ols_coefficient", "ols_fit", "tipping_point"]

#: Ways of departing from MAR, and the delta that leaves the imputations unchanged.
MODES = ("shift", "scale")
NEUTRAL = {"shift": 0.0, "scale": 1.0}


# ============================================================================ the estimand
@dataclass(frozen=True)
class Estimand:
    """What is estimated on each completed data set (build it with :func:`mean_of` / :func:`ols_coefficient`).

    ``kind`` "mean": the mean of column ``column``; "ols": the coefficient of column ``term`` in the
    least-squares regression of column ``target`` on the columns ``predictors`` (with an intercept).
    """

    kind: str
    column: int = -1
    target: int = -1
    predictors: tuple = ()
    term: int = -1

    @property
    def columns(self) -> tuple:
        """Every column the estimate reads."""
        return (self.column,) if self.kind == "mean" else (self.target, *self.predictors)

    def label(self, names=None) -> str:
        """Plain-text name, e.g. ``mean of x2`` or ``coefficient of x1 in y ~ x1 + x3``."""
        def n(j):
            return str(names[j]) if names is not None else f"column {j}"
        if self.kind == "mean":
            return f"mean of {n(self.column)}"
        rhs = " + ".join(n(j) for j in self.predictors)
        return f"coefficient of {n(self.term)} in {n(self.target)} ~ {rhs}"


def _index(j, name: str) -> int:
    if isinstance(j, bool) or not isinstance(j, numbers.Integral):
        raise BadInputError(f"{name} must be a column index (an integer), got {j!r}.")
    return int(j)


def mean_of(column: int) -> Estimand:
    """The mean of one column: :math:`\\hat Q = \\bar x_j`, :math:`U = s_j^2 / N`, complete-data dof N - 1."""
    return Estimand(kind="mean", column=_index(column, "column"))


def ols_coefficient(target: int, predictors, term: int | None = None) -> Estimand:
    """One coefficient of the OLS regression of ``target`` on ``predictors`` (intercept added).

    ``term``: the predictor whose coefficient is reported (default: the first one).
    """
    target = _index(target, "target")
    if isinstance(predictors, numbers.Integral):
        predictors = [predictors]
    predictors = tuple(_index(j, "a predictor") for j in predictors)
    if not predictors:
        raise BadInputError("An OLS coefficient needs at least one predictor column.")
    if len(set(predictors)) != len(predictors):
        raise BadInputError(f"The predictors repeat a column: {list(predictors)}. Give each column once.")
    if target in predictors:
        raise BadInputError(f"The target (column {target}) is also a predictor: regress it on other columns.")
    term = predictors[0] if term is None else _index(term, "term")
    if term not in predictors:
        raise BadInputError(f"term {term} is not one of the predictors {list(predictors)}.")
    return Estimand(kind="ols", target=target, predictors=predictors, term=term)


# ============================================================================ complete-data analyses
def ols_fit(X, y) -> tuple[np.ndarray, np.ndarray, int]:
    """OLS with an intercept: ``(beta, cov, dof)``, ``beta = [intercept, slopes...]`` by ``lstsq``.

    :math:`\\mathrm{cov} = \\hat\\sigma^2 (\\tilde X^\\top \\tilde X)^{-1}` with
    :math:`\\hat\\sigma^2 = RSS / (N - p)` (p = columns of :math:`\\tilde X = [1, X]`), formed from the
    triangular factor of :math:`\\tilde X = QR` as :math:`R^{-1} R^{-\\top}` (no explicit inverse);
    ``dof = N - p``.

    Raises
    ------
    BadInputError
        Rank-deficient design (a constant or collinear predictor) or N <= p.
    """
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    n = X.shape[0]
    design = np.column_stack([np.ones(n), X])
    p = design.shape[1]
    if n <= p:
        raise BadInputError(f"OLS with {p} coefficients needs more than {p} rows; there are {n}.")
    beta, _, rank, _ = np.linalg.lstsq(design, y, rcond=None)
    if rank < p:
        raise BadInputError("The regression design is rank-deficient (a constant predictor, or predictors that are "
                            "linear combinations of each other): choose other predictors.")
    resid = y - design @ beta
    sigma2 = float(resid @ resid) / (n - p)
    R = np.linalg.qr(design, mode="r")
    R_inv = np.linalg.solve(R, np.eye(p))  # triangular, p x p (scipy's solve_triangular is slower here)
    cov = sigma2 * (R_inv @ R_inv.T)
    return beta, (cov + cov.T) / 2, n - p


def estimate_sets(completed, estimand: Estimand) -> tuple[np.ndarray, np.ndarray, int]:
    """The complete-data estimate and its variance on each of M completed data sets.

    Parameters
    ----------
    completed : array (M, N, D)
    estimand : Estimand

    Returns
    -------
    (Q, U, dof) : arrays (M,), (M,) and the complete-data degrees of freedom.
    """
    completed = np.asarray(completed, dtype=float)
    M, N, _ = completed.shape
    if estimand.kind == "mean":
        x = completed[:, :, estimand.column]
        return x.mean(axis=1), x.var(axis=1, ddof=1) / N, N - 1
    k = 1 + estimand.predictors.index(estimand.term)  # after the intercept
    Q, U = np.empty(M), np.empty(M)
    dof = N - 1 - len(estimand.predictors)
    for m in range(M):
        beta, cov, dof = ols_fit(completed[m][:, list(estimand.predictors)], completed[m][:, estimand.target])
        Q[m], U[m] = beta[k], cov[k, k]
    return Q, U, dof


# ============================================================================ adjustment
def _check_mode(mode) -> str:
    if mode not in MODES:
        raise BadInputError(f"mode must be one of {MODES}, got {mode!r}.")
    return mode


def adjust(imputations, missing, column: int, delta: float, mode: str = "shift") -> np.ndarray:
    """A copy of ``imputations`` (M, N, D) whose imputed entries of ``column`` are shifted or scaled by ``delta``.

    ``mode="shift"``: :math:`x \\to x + \\delta`; ``"scale"``: :math:`x \\to \\delta x`. Entries with
    ``missing`` False (observed) and the other columns are returned unchanged.
    """
    out = np.array(imputations, dtype=float, copy=True)
    rows = np.asarray(missing, dtype=bool)[:, column]
    block = out[:, rows, column]
    out[:, rows, column] = block + delta if _check_mode(mode) == "shift" else delta * block
    return out


# ============================================================================ results
@dataclass(frozen=True)
class SensitivityTable:
    """Rubin-pooled estimates against delta (one row per grid value; see :func:`delta_adjustment`).

    Arrays of shape (G,): ``delta``, ``estimate`` (:math:`\\bar Q`), ``within`` (:math:`\\bar U`),
    ``between`` (B), ``total`` (T), ``std_error`` (:math:`\\sqrt T`), ``df`` (Barnard-Rubin),
    ``lower`` / ``upper`` (the ``level`` t-interval :math:`\\bar Q \\pm t_{df} \\sqrt T`), ``fmi``;
    ``per_set`` (G, M) the completed-data estimates :math:`\\hat Q_m`.
    """

    delta: np.ndarray
    estimate: np.ndarray
    within: np.ndarray
    between: np.ndarray
    total: np.ndarray
    std_error: np.ndarray
    df: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    fmi: np.ndarray
    per_set: np.ndarray
    level: float
    mode: str
    column: int
    estimand: Estimand
    n_imputations: int
    n_missing: int
    n_rows: int

    FIELDS = ("delta", "estimate", "std_error", "lower", "upper", "within", "between", "total", "df", "fmi")

    @property
    def neutral(self) -> float:
        """The delta that leaves the imputations as drawn (0 for a shift, 1 for a scale)."""
        return NEUTRAL[self.mode]

    def columns(self) -> dict:
        """The tidy table as ``{field: array (G,)}`` (the keys of :attr:`FIELDS`)."""
        return {f: getattr(self, f) for f in self.FIELDS}

    def rows(self) -> list[dict]:
        """The tidy table as one dict per delta (plain floats)."""
        cols = self.columns()
        return [{f: float(cols[f][i]) for f in self.FIELDS} for i in range(self.delta.size)]

    def excludes(self, reference: float) -> np.ndarray:
        """(G,) bool: the interval at each delta lies wholly above or below ``reference``."""
        return (self.lower > reference) | (self.upper < reference)


@dataclass(frozen=True)
class TippingPoint:
    """Where the conclusion about ``reference`` changes (see :func:`tipping_point`).

    ``delta``: the grid value closest to the neutral one at which it changes; ``excluded_at_neutral``:
    whether the interval excludes ``reference`` without adjustment (then the tipping point is where
    it first includes it: "stays significant until"), ``excluded`` its state at ``delta``.
    """

    delta: float
    reference: float
    excluded_at_neutral: bool
    estimate: float
    lower: float
    upper: float

    @property
    def excluded(self) -> bool:
        return not self.excluded_at_neutral


# ============================================================================ the analysis
def _check_inputs(imputations, missing, column, deltas, mode, level):
    Y = np.asarray(imputations, dtype=float)
    if Y.ndim != 3:
        raise BadInputError(f"imputations must have shape (M, N, D) (M imputed data sets); got shape {Y.shape}.")
    M, N, D = Y.shape
    if M < 2:
        raise BadInputError(f"Rubin's rules need at least 2 imputed data sets; got {M}. Draw more imputations.")
    if not np.isfinite(Y).all():
        raise BadInputError("imputations contain NaN or infinite values: pass completed data sets (every entry filled).")
    miss = np.asarray(missing)
    if miss.shape != (N, D):
        raise BadInputError(f"missing must have shape (N, D) = ({N}, {D}), the shape of one imputed set; got {miss.shape}.")
    if miss.dtype != bool:
        raise BadInputError(f"missing must be a boolean mask (True = imputed entry); got dtype {miss.dtype}.")
    if not np.all(Y[:, ~miss] == Y[0, ~miss]):
        raise BadInputError("The observed entries (missing = False) differ between the imputed sets: every set must "
                            "hold the same observed data, only the imputed entries may differ.")
    column = _index(column, "column")
    if not -D <= column < D:
        raise BadInputError(f"column {column} is out of range for {D} columns.")
    column %= D
    if not miss[:, column].any():
        raise BadInputError(f"Column {column} is fully observed: it has no imputed entries to shift or scale. Choose "
                            "a column with missing values.")
    mode = _check_mode(mode)
    d = np.asarray(deltas, dtype=float) if not isinstance(deltas, str) else np.array([np.nan])
    if d.ndim == 0:
        d = d.reshape(1)
    if d.ndim != 1 or d.size == 0:
        raise BadInputError(f"deltas must be a non-empty 1-D grid of numbers; got shape {d.shape}.")
    if not np.isfinite(d).all():
        raise BadInputError("deltas must be finite numbers (no NaN or infinity).")
    if np.unique(d).size != d.size:
        raise BadInputError("deltas repeat a value: give each delta once.")
    if mode == "scale" and np.any(d <= 0):
        raise BadInputError(f"Scale factors must be positive (x -> delta * x); got {d[d <= 0][0]:g}. Use deltas around "
                            "1, e.g. 0.5 to 1.5.")
    if not (isinstance(level, numbers.Real) and 0 < level < 1):
        raise BadInputError(f"level must be a number between 0 and 1 (e.g. 0.95), got {level!r}.")
    return Y, miss, column, d, mode


def delta_adjustment(imputations, missing, column: int, deltas, estimand: Estimand, *, mode: str = "shift",
                     level: float = 0.95) -> SensitivityTable:
    """Pooled estimate of ``estimand`` as the imputed entries of ``column`` are shifted / scaled by each delta.

    Parameters
    ----------
    imputations : array (M, N, D)
        M >= 2 completed data sets, identical on the observed entries.
    missing : bool array (N, D)
        True where the entry was imputed.
    column : int
        The column whose imputations are adjusted (it must have missing entries).
    deltas : array (G,)
        The grid (distinct, finite; positive for ``mode="scale"``).
    estimand : Estimand
        :func:`mean_of` or :func:`ols_coefficient` (column indices of the D columns).
    mode : {"shift", "scale"}
    level : float
        Coverage of the intervals.

    Returns
    -------
    SensitivityTable
    """
    Y, miss, column, d, mode = _check_inputs(imputations, missing, column, deltas, mode, level)
    D = Y.shape[2]
    if not isinstance(estimand, Estimand):
        raise BadInputError("estimand must be made by mean_of(column) or ols_coefficient(target, predictors).")
    for j in estimand.columns:
        if not 0 <= j < D:
            raise BadInputError(f"The estimand reads column {j}, out of range for {D} columns.")
    fields = {f: np.empty(d.size) for f in ("estimate", "within", "between", "total", "std_error", "df", "fmi")}
    per_set = np.empty((d.size, Y.shape[0]))
    for i, delta in enumerate(d):
        Q, U, dof = estimate_sets(adjust(Y, miss, column, delta, mode), estimand)
        pooled = rubin_pool(Q[:, None], U[:, None], df_complete=float(dof))
        per_set[i] = Q
        for f in ("estimate", "within", "between", "total", "std_error", "df", "fmi"):
            fields[f][i] = float(np.asarray(getattr(pooled, f))[0])
    quantile = student_t.ppf(0.5 + level / 2, fields["df"])
    half = quantile * fields["std_error"]
    return SensitivityTable(delta=d, lower=fields["estimate"] - half, upper=fields["estimate"] + half,
                            per_set=per_set, level=float(level), mode=mode, column=column, estimand=estimand,
                            n_imputations=int(Y.shape[0]), n_missing=int(miss[:, column].sum()),
                            n_rows=int(Y.shape[1]), **fields)


def tipping_point(table: SensitivityTable, reference: float) -> TippingPoint | None:
    """The delta closest to the neutral value at which the interval's verdict on ``reference`` flips.

    The verdict at a delta is "the ``level`` interval excludes ``reference``". The baseline is the
    verdict at the grid value closest to the neutral delta (0 for a shift, 1 for a scale). Returns
    the grid value with the smallest :math:`|\\delta - \\delta_0|` whose verdict differs (ties: the
    smaller delta), or None when the verdict holds over the whole grid.

    Examples: ``reference = 0`` for a coefficient significant without adjustment gives the delta
    at which it stops being significant; ``reference =`` the unadjusted estimate gives the first
    delta whose interval no longer covers it.
    """
    if not isinstance(table, SensitivityTable):
        raise BadInputError("tipping_point needs the SensitivityTable returned by delta_adjustment.")
    if not (isinstance(reference, numbers.Real) and np.isfinite(reference)):
        raise BadInputError(f"reference must be a finite number, got {reference!r}.")
    offset = np.abs(table.delta - table.neutral)
    # distances equal up to rounding (a symmetric grid) count as ties: the smaller delta wins
    distance = np.round(offset / max(float(offset.max()), 1e-300), 9)
    base = int(np.lexsort((table.delta, distance))[0])
    verdict = table.excludes(float(reference))
    flipped = np.flatnonzero(verdict != verdict[base])
    if flipped.size == 0:
        return None
    i = int(flipped[np.lexsort((table.delta[flipped], distance[flipped]))[0]])
    return TippingPoint(delta=float(table.delta[i]), reference=float(reference),
                        excluded_at_neutral=bool(verdict[base]), estimate=float(table.estimate[i]),
                        lower=float(table.lower[i]), upper=float(table.upper[i]))
