"""Imputation quality metrics, computed over the masked (missing) entries only.

Every function takes the complete ``truth``, the imputation (or predictive summaries) and the
boolean ``missing`` matrix (True = the entry was hidden and imputed), all of the same shape,
usually ``(n_samples, n_features)``. Observed entries never enter a metric.

* :func:`rmse`, :func:`mae`: root mean squared / mean absolute error.
* :func:`nrmse`: garriga2017 eq. 4.1 (Oba et al. 2003), pooled over all masked entries, with the
  author's optional per-column min-max scaling.
* :func:`pfc`: proportion of falsely classified binary entries (garriga2017 eq. 4.2).
* :func:`gaussian_nll`: per-entry diagonal Gaussian negative log-likelihood, used for
  sample-based methods (garriga2017 §1.8: mean and variance of the multiple imputations).
* :func:`nll_from_logpdf`: reduce per-row log-densities of the missing block (e.g. from
  ``ConditionalMixture.logpdf``) to an NLL, keeping infinities.
* :func:`interval_coverage`: fraction of true values inside predictive intervals.

Bad input (shape mismatch, no masked entry, NaN predictions at masked entries) raises
:class:`~explorer.core.validation.BadInputError`.
"""

from __future__ import annotations

import numpy as np

from explorer.core.validation import BadInputError

__all__ = [
    "rmse",
    "mae",
    "nrmse",
    "pfc",
    "gaussian_nll",
    "nll_from_logpdf",
    "interval_coverage",
]

_LOG_2PI = float(np.log(2.0 * np.pi))
_REDUCTIONS = ("sum", "mean", "none")


def _as_float(a, name: str) -> np.ndarray:
    try:
        arr = np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError):
        raise BadInputError(f"{name} must be numeric; got values that cannot be converted to float.") from None
    if arr.ndim == 0:
        raise BadInputError(f"{name} must be an array, got a scalar.")
    return arr


def _column_selector(columns, n_features: int) -> np.ndarray:
    """Boolean (n_features,) selector from indices or a boolean mask; None selects every column."""
    if columns is None:
        return np.ones(n_features, dtype=bool)
    sel = np.asarray(columns)
    if sel.dtype == bool:
        if sel.shape != (n_features,):
            raise BadInputError(f"columns as a boolean mask must have length {n_features}; got shape {sel.shape}.")
        return sel.copy()
    if sel.size and sel.dtype.kind not in "iu":
        raise BadInputError("columns must be integer column indices or a boolean mask over the columns.")
    sel = sel.astype(np.intp).reshape(-1)
    if sel.size and (sel.min() < -n_features or sel.max() >= n_features):
        raise BadInputError(f"columns {sel.tolist()} out of range for {n_features} column(s).")
    out = np.zeros(n_features, dtype=bool)
    out[sel] = True
    return out


def _prepare(truth, missing, preds: dict, columns=None) -> tuple[np.ndarray, dict, np.ndarray]:
    """Validate shapes and content; return (truth, preds, sel) with sel = masked & selected entries."""
    t = _as_float(truth, "truth")
    m = np.asarray(missing)
    if m.shape != t.shape:
        raise BadInputError(f"missing has shape {m.shape} but truth has shape {t.shape}.")
    if m.dtype != bool:
        if m.dtype.kind in "iuf" and np.isin(m, (0, 1)).all():
            m = m.astype(bool)
        else:
            raise BadInputError(f"missing must be boolean (True = missing); got dtype {m.dtype}.")
    out = {}
    for name, p in preds.items():
        arr = _as_float(p, name)
        if arr.shape != t.shape:
            raise BadInputError(f"{name} has shape {arr.shape} but truth has shape {t.shape}; they must match.")
        out[name] = arr
    sel = m.copy()
    if columns is not None:
        if t.ndim != 2:
            raise BadInputError(f"columns selection needs 2-D arrays (n_samples, n_features); got shape {t.shape}.")
        sel &= _column_selector(columns, t.shape[1])[None, :]
    if not sel.any():
        where = " in the selected columns" if columns is not None else ""
        raise BadInputError(
            f"there is no masked (missing) entry{where}, so the metric is undefined. "
            "Hide some entries first (missing=True where imputed)."
        )
    if np.isnan(t[sel]).any():
        raise BadInputError(
            f"truth has {int(np.isnan(t[sel]).sum())} NaN value(s) at masked entries; metrics need "
            "the true values of the hidden entries (data with real missing values have no truth)."
        )
    for name, arr in out.items():
        bad = np.isnan(arr[sel])
        if bad.any():
            idx = np.argwhere(sel)[np.flatnonzero(bad)[0]]
            raise BadInputError(
                f"{name} has {int(bad.sum())} NaN value(s) at masked entries (first at index "
                f"{tuple(int(i) for i in idx)}); every hidden entry needs an imputed value."
            )
    return t, out, sel


def rmse(truth, imputed, missing, *, columns=None) -> float:
    """Root mean squared error over the masked entries.

    Parameters
    ----------
    truth, imputed : array_like of shape (n_samples, n_features)
    missing : array_like of bool, same shape
        True = hidden entry; only these entries are scored.
    columns : sequence of int or bool mask of shape (n_features,), optional
        Restrict to these columns.

    Returns
    -------
    float
        ``sqrt(mean((truth - imputed)[missing] ** 2))``.
    """
    t, p, sel = _prepare(truth, missing, {"imputed": imputed}, columns)
    d = t[sel] - p["imputed"][sel]
    return float(np.sqrt(np.mean(d * d)))


def mae(truth, imputed, missing, *, columns=None) -> float:
    """Mean absolute error over the masked entries (same parameters as :func:`rmse`)."""
    t, p, sel = _prepare(truth, missing, {"imputed": imputed}, columns)
    return float(np.mean(np.abs(t[sel] - p["imputed"][sel])))


def _minmax_arrays(minmax, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(minmax, str):
        if minmax != "truth":
            raise BadInputError(f"minmax must be a (min, max) pair or 'truth'; got {minmax!r}.")
        if np.isnan(t).any():
            raise BadInputError("minmax='truth' needs a complete truth matrix (no NaN).")
        lo, hi = t.min(axis=0), t.max(axis=0)
    else:
        try:
            lo, hi = minmax
        except (TypeError, ValueError):
            raise BadInputError("minmax must be a pair (min, max) of per-column arrays, or 'truth'.") from None
        lo = np.broadcast_to(_as_float(np.atleast_1d(lo), "minmax[0]"), t.shape[-1:])
        hi = np.broadcast_to(_as_float(np.atleast_1d(hi), "minmax[1]"), t.shape[-1:])
    if not (np.isfinite(lo).all() and np.isfinite(hi).all()) or (hi < lo).any():
        raise BadInputError("minmax bounds must be finite with max >= min in every column.")
    return lo, hi


def nrmse(truth, imputed, missing, *, minmax=None, columns=None) -> float:
    """Normalised RMSE of garriga2017 eq. 4.1 (Oba et al. 2003).

    ``NRMSE = sqrt(mean((v_true - v_imp)**2) / var(v_true))`` where ``v`` pools every masked entry
    (of the selected columns): the denominator is the variance (``ddof=0``) of the **true values of
    the hidden entries**, not of the columns, so under NMAR (hidden values from one tail) it can
    exceed 1.

    Parameters
    ----------
    truth, imputed : array_like of shape (n_samples, n_features)
    missing : array_like of bool, same shape
    minmax : (min, max) pair of arrays of shape (n_features,), or 'truth', optional
        Scale every column to ``(x - min) / (max - min)`` before pooling, as the author's code
        does with min/max of the complete data (``'truth'`` computes them from ``truth``). A
        column with ``max == min`` is only shifted.
    columns : sequence of int or bool mask, optional
        Restrict to these columns (e.g. the numeric, non-binary ones).

    Raises
    ------
    BadInputError
        Also when the pooled true values have zero variance (NRMSE undefined; use :func:`rmse`).
    """
    t, p, sel = _prepare(truth, missing, {"imputed": imputed}, columns)
    imp = p["imputed"]
    if minmax is not None:
        if t.ndim != 2:
            raise BadInputError("minmax scaling needs 2-D arrays (n_samples, n_features).")
        lo, hi = _minmax_arrays(minmax, t)
        span = np.where(hi > lo, hi - lo, 1.0)
        t = (t - lo) / span
        imp = (imp - lo) / span
    vt, vi = t[sel], imp[sel]
    var = float(np.var(vt))
    if not var > 0.0:
        raise BadInputError(
            f"the {vt.size} true value(s) at the masked entries have zero variance, so NRMSE is "
            "undefined. Hide more (or more varied) entries, or report rmse instead."
        )
    return float(np.sqrt(np.mean((vt - vi) ** 2) / var))


def pfc(truth, imputed, missing, *, columns=None, threshold: float = 0.5) -> float:
    """Proportion of falsely classified binary entries (garriga2017 eq. 4.2).

    Imputations are thresholded: a value ``>= threshold`` counts as 1, below as 0 (so
    probabilities and continuous GMM imputations can be passed directly).

    Parameters
    ----------
    truth : array_like of shape (n_samples, n_features)
        Must be 0/1 at the scored entries.
    imputed : array_like, same shape
    missing : array_like of bool, same shape
    columns : sequence of int or bool mask, optional
        The binary columns to score (e.g. ``data.binary``); default every column.
    threshold : float, default 0.5

    Returns
    -------
    float
        ``mean(round(imputed) != truth)`` over the masked entries of the selected columns.
    """
    t, p, sel = _prepare(truth, missing, {"imputed": imputed}, columns)
    vt = t[sel]
    if not np.isin(vt, (0.0, 1.0)).all():
        raise BadInputError(
            "pfc scores binary entries but truth has values other than 0/1 at masked entries of the "
            "selected columns. Pass columns=<the binary columns> (e.g. data.binary)."
        )
    guess = (p["imputed"][sel] >= threshold).astype(np.float64)
    return float(np.mean(guess != vt))


def _reduce(per_entry: np.ndarray, reduction: str):
    if reduction == "sum":
        return float(np.sum(per_entry))
    if reduction == "mean":
        return float(np.mean(per_entry))
    return per_entry


def _check_reduction(reduction: str) -> None:
    if reduction not in _REDUCTIONS:
        raise BadInputError(f"reduction must be one of {_REDUCTIONS}; got {reduction!r}.")


def gaussian_nll(truth, mean, var, missing, *, columns=None, reduction: str = "sum", var_floor: float | None = None):
    """Per-entry diagonal Gaussian negative log-likelihood of the true hidden values.

    ``nll_ij = 0.5 * (log(2 pi var_ij) + (truth_ij - mean_ij)**2 / var_ij)`` for masked entries.
    This is the garriga2017 metric for sample-based imputers: ``mean`` and ``var`` are the sample
    mean and variance (``ddof=1``) of the multiple imputations.

    Parameters
    ----------
    truth, mean, var : array_like of shape (n_samples, n_features)
    missing : array_like of bool, same shape
    columns : sequence of int or bool mask, optional
    reduction : {'sum', 'mean', 'none'}, default 'sum'
        'sum' matches garriga2017 (summed, not averaged); 'none' returns the 1-D array of per-entry
        values in row-major order of the masked entries.
    var_floor : float, optional
        Variances are clipped below at this value (default: float64 tiny, 2.2e-308, as the
        author's code). A zero-variance prediction that misses gives a huge or ``inf`` NLL,
        which is reported as such, never hidden.

    Raises
    ------
    BadInputError
        Shape mismatch, no masked entry, NaN in ``mean`` / ``var`` at masked entries, negative
        variance.
    """
    _check_reduction(reduction)
    t, p, sel = _prepare(truth, missing, {"mean": mean, "var": var}, columns)
    v = p["var"][sel]
    if (v < 0).any():
        raise BadInputError(f"var has {int((v < 0).sum())} negative value(s) at masked entries.")
    floor = np.finfo(np.float64).tiny if var_floor is None else float(var_floor)
    v = np.maximum(v, floor)
    with np.errstate(over="ignore", divide="ignore"):
        r = t[sel] - p["mean"][sel]
        nll = 0.5 * (_LOG_2PI + np.log(v) + (r * r) / v)
    return _reduce(nll, reduction)


def nll_from_logpdf(logpdf_per_row, *, reduction: str = "sum"):
    """Negative log-likelihood from per-row log-densities, keeping infinities.

    Parameters
    ----------
    logpdf_per_row : array_like of shape (n_rows,)
        ``log p(x_mis_true | x_obs)`` of each scored row, e.g. from ``ConditionalMixture.logpdf``.
        ``-inf`` (a true value with zero model density) is legitimate and makes the result
        ``+inf``: it is reported, not dropped.
    reduction : {'sum', 'mean', 'none'}, default 'sum'
        garriga2017 sums over rows.

    Raises
    ------
    BadInputError
        Empty input, or NaN (a broken computation, not an infinite NLL).
    """
    _check_reduction(reduction)
    lp = _as_float(logpdf_per_row, "logpdf_per_row").reshape(-1)
    if lp.size == 0:
        raise BadInputError("logpdf_per_row is empty; there is no row with a hidden entry to score.")
    if np.isnan(lp).any():
        raise BadInputError(
            f"logpdf_per_row has {int(np.isnan(lp).sum())} NaN value(s) (first at row "
            f"{int(np.flatnonzero(np.isnan(lp))[0])}); NaN means a failed computation, not zero density."
        )
    if np.isposinf(lp).any() and np.isneginf(lp).any():
        # inf - inf: undefined, say so instead of returning NaN
        raise BadInputError("logpdf_per_row contains both +inf and -inf; the total NLL is undefined.")
    return _reduce(-lp, reduction)


def interval_coverage(truth, lower, upper, missing, *, columns=None) -> float:
    """Fraction of masked entries whose true value lies in ``[lower, upper]`` (bounds included).

    Parameters
    ----------
    truth, lower, upper : array_like of shape (n_samples, n_features)
    missing : array_like of bool, same shape
    columns : sequence of int or bool mask, optional

    Raises
    ------
    BadInputError
        Shape mismatch, no masked entry, NaN bounds, or ``lower > upper`` at a masked entry.
    """
    t, p, sel = _prepare(truth, missing, {"lower": lower, "upper": upper}, columns)
    lo, hi, vt = p["lower"][sel], p["upper"][sel], t[sel]
    if (lo > hi).any():
        raise BadInputError(f"lower > upper at {int((lo > hi).sum())} masked entr(ies); swap the bounds.")
    return float(np.mean((vt >= lo) & (vt <= hi)))
