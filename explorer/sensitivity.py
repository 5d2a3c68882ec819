"""NMAR sensitivity analysis in one call: fit the Gaussian-mixture imputer, draw M imputations, delta-adjust, pool.

:func:`sensitivity_analysis` is the library-level front of :mod:`explorer.core.missingness.sensitivity` (the
pattern-mixture delta adjustment of van Buuren's *Flexible Imputation of Missing Data*, section 3.8;
read that module's docstring for the method). It takes data with NaNs (array, DataFrame,
DataArray or :class:`~explorer.core.data.IncompleteData`), fits
:class:`~explorer.impute.gaussian_mixture.GaussianMixtureImputer`, draws ``n_imputations`` completed data sets
from :math:`p(x^m \\mid x^o)`, shifts or scales the imputed entries of one column by every delta of
a grid, and pools the estimate on the completed sets by Rubin's rules.

>>> import numpy as np
>>> from explorer.sensitivity import sensitivity_analysis
>>> rng = np.random.default_rng(0)
>>> X = rng.normal(size=(200, 2)); X[:50, 1] = np.nan
>>> rep = sensitivity_analysis(X, column=1, deltas=[-1, 0, 1], estimate="mean", random_state=0)
>>> [round(v, 2) for v in rep.table["estimate"] - rep.table["estimate"][1]]  # moves by delta * 50/200
[-0.25, 0.0, 0.25]

Imputation uncertainty: with ``bootstrap=False`` every imputation comes from one fitted mixture
(draws of :math:`x^m` only, no uncertainty about the mixture's parameters: not "proper" in Rubin's
sense, the between-imputation variance is somewhat too small); ``bootstrap=True`` fits one mixture
per imputation on a bootstrap resample of the rows (van Buuren's bootstrap route to proper
imputation, M times the fitting cost).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from explorer.core.missingness import sensitivity as core
from explorer.core.validation import BadInputError, as_float_matrix
from explorer.utils.inputs import unwrap

__all__ = ["SensitivityReport", "default_deltas", "draw_imputations", "resolve_column", "sensitivity_analysis"]


@dataclass(frozen=True)
class SensitivityReport:
    """What :func:`sensitivity_analysis` returns.

    ``result``: the core :class:`~explorer.core.missingness.sensitivity.SensitivityTable`; ``table``: the same as a
    pandas DataFrame (one row per delta); ``tipping``: the
    :class:`~explorer.core.missingness.sensitivity.TippingPoint` for ``reference`` (or None); ``imputations``
    (M, N, D) the unadjusted completed data sets; ``missing`` (N, D); ``columns`` the column names;
    ``label`` the estimate in words.
    """

    result: core.SensitivityTable
    table: object
    tipping: core.TippingPoint | None
    reference: float
    imputations: np.ndarray
    missing: np.ndarray
    columns: tuple
    label: str


def resolve_column(ref, columns, what: str = "column") -> int:
    """The index of column ``ref`` (a name in ``columns`` or an integer position)."""
    if isinstance(ref, str):
        names = [str(c) for c in columns]
        if ref not in names:
            raise BadInputError(f"There is no {what} {ref!r}; the columns are {', '.join(repr(c) for c in names)}.")
        return names.index(ref)
    if isinstance(ref, bool) or not isinstance(ref, numbers.Integral):
        raise BadInputError(f"{what} must be a column name or an integer position, got {ref!r}.")
    if not -len(columns) <= ref < len(columns):
        raise BadInputError(f"{what} {ref} is out of range for {len(columns)} columns.")
    return int(ref) % len(columns)


def default_deltas(x_observed, mode: str = "shift", n: int = 21, width: float = 1.0) -> np.ndarray:
    """A symmetric grid around the neutral delta: shift ``±width`` observed standard deviations, scale ``1 ± width/2``."""
    if mode == "shift":
        sd = float(np.std(x_observed, ddof=1)) if np.size(x_observed) > 1 else 1.0
        return np.linspace(-width, width, n) * (sd if sd > 0 else 1.0)
    return np.linspace(max(1.0 - width / 2, 0.05), 1.0 + width / 2, n)


def draw_imputations(values, n_imputations: int, *, n_components: int = 2, bootstrap: bool = False,
                     random_state=None, progress=None, **imputer_options) -> np.ndarray:
    """M completed data sets (M, N, D) from :class:`~explorer.impute.gaussian_mixture.GaussianMixtureImputer`.

    ``progress(done, total)`` (optional) is called after each fit / draw. Rows with every entry
    missing are drawn from the fitted marginal.
    """
    from explorer.impute.gaussian_mixture import GaussianMixtureImputer

    if isinstance(n_imputations, bool) or not isinstance(n_imputations, numbers.Integral) or n_imputations < 2:
        raise BadInputError(f"n_imputations must be an integer >= 2 (Rubin's rules), got {n_imputations!r}.")
    rng = np.random.default_rng(random_state)
    options = {"empty_rows": "marginal"} | imputer_options
    if not bootstrap:
        imp = GaussianMixtureImputer(n_components=n_components, random_state=int(rng.integers(2**31)), **options)
        imp.fit(values)
        if progress:
            progress(1, 2)
        out = np.asarray(imp.sample(values, n_imputations=int(n_imputations), random_state=rng))
        if progress:
            progress(2, 2)
        return out
    n = values.shape[0]
    out = np.empty((int(n_imputations), *values.shape))
    for m in range(int(n_imputations)):
        rows = rng.integers(n, size=n)
        imp = GaussianMixtureImputer(n_components=n_components, random_state=int(rng.integers(2**31)), **options)
        imp.fit(values[rows])
        out[m] = np.asarray(imp.sample(values, n_imputations=1, random_state=rng))[0]
        if progress:
            progress(m + 1, int(n_imputations))
    return out


def sensitivity_analysis(X, column, deltas=None, *, estimate="mean", mean_column=None, target=None,
                         predictors=None, term=None, mode: str = "shift", n_imputations: int = 20,
                         n_components: int = 2, bootstrap: bool = False, level: float = 0.95,
                         reference: float | None = None, random_state=None, imputations=None,
                         **imputer_options) -> SensitivityReport:
    """Delta-adjustment sensitivity of a pooled estimate to an NMAR departure in ``column``.

    Parameters
    ----------
    X : array-like (N, D), DataFrame, DataArray or IncompleteData
        Numeric data, NaN = missing.
    column : str or int
        The column whose imputations are shifted / scaled (it must have missing values).
    deltas : array-like, optional
        The grid; default :func:`default_deltas` (±1 observed sd for a shift, 0.5..1.5 for a scale).
    estimate : {"mean", "ols"}
        The mean of ``mean_column`` (default: ``column``), or the OLS coefficient of ``term``
        (default: the first predictor) in the regression of ``target`` on ``predictors``.
    mode : {"shift", "scale"}
    n_imputations, n_components, bootstrap, random_state, **imputer_options :
        The imputation (:func:`draw_imputations`); ``imputations`` (M, N, D) skips it.
    level : float
        Coverage of the intervals.
    reference : float, optional
        For the tipping point (:func:`explorer.core.missingness.sensitivity.tipping_point`): default 0 for a
        coefficient, the unadjusted pooled estimate for a mean.

    Raises
    ------
    BadInputError
        Non-numeric data, a fully observed ``column``, an unknown column, a bad delta grid, ...
    """
    import pandas as pd

    matrix, _, labels = unwrap(X)
    values = as_float_matrix(matrix, name="X", columns=labels)
    N, D = values.shape
    columns = tuple(labels) if labels is not None else tuple(f"x{j}" for j in range(D))
    j = resolve_column(column, columns)
    missing = np.isnan(values)
    if not missing[:, j].any():
        raise BadInputError(f"Column {columns[j]!r} is fully observed: there are no imputations to shift or scale. "
                            "Choose a column with missing values.")
    if missing[:, j].all():
        raise BadInputError(f"Column {columns[j]!r} has no observed value: nothing anchors its imputations.")
    if estimate == "mean":
        estimand = core.mean_of(j if mean_column is None else resolve_column(mean_column, columns, "mean_column"))
    elif estimate == "ols":
        if target is None or predictors is None:
            raise BadInputError("estimate='ols' needs a target column and a list of predictor columns.")
        preds = [predictors] if isinstance(predictors, (str, numbers.Integral)) else list(predictors)
        estimand = core.ols_coefficient(resolve_column(target, columns, "target"),
                                        [resolve_column(p, columns, "predictor") for p in preds],
                                        None if term is None else resolve_column(term, columns, "term"))
    else:
        raise BadInputError(f"estimate must be 'mean' or 'ols', got {estimate!r}.")
    if mode not in core.MODES:
        raise BadInputError(f"mode must be one of {core.MODES}, got {mode!r}.")
    if deltas is None:
        deltas = default_deltas(values[~missing[:, j], j], mode)
    if imputations is None:
        imputations = draw_imputations(values, n_imputations, n_components=n_components, bootstrap=bootstrap,
                                       random_state=random_state, **imputer_options)
    result = core.delta_adjustment(imputations, missing, j, deltas, estimand, mode=mode, level=level)
    if reference is None:
        reference = 0.0 if estimand.kind == "ols" else _neutral_estimate(result)
    tipping = core.tipping_point(result, float(reference))
    table = pd.DataFrame(result.columns())
    return SensitivityReport(result=result, table=table, tipping=tipping, reference=float(reference),
                             imputations=np.asarray(imputations, dtype=float), missing=missing, columns=columns,
                             label=estimand.label(columns))


def _neutral_estimate(result: core.SensitivityTable) -> float:
    """The pooled estimate at the grid value closest to the neutral delta."""
    return float(result.estimate[int(np.argmin(np.abs(result.delta - result.neutral)))])
