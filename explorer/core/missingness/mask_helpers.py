"""Validation and small shared helpers of the missingness mechanisms (:mod:`explorer.core.missingness.mechanisms`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy.optimize import brentq
from scipy.special import expit, log_expit, logit, logsumexp

from explorer.core.validation import BadInputError, InfeasibleRateError, as_float_matrix

_EPS = 1e-9  # guards floor(D * sqrt(r)) against round-off (sqrt(0.09) * 10 = 2.9999...)


# --------------------------------------------------------------------------- validation helpers
def _complete(X, who: str) -> np.ndarray:
    """``X`` as a float matrix; NaN (an entry that is already missing) is accepted.

    The name is historical: the mechanisms used to require complete data. They now add
    missingness to the **observed** entries only (see :mod:`explorer.core.missingness.mechanisms`), and use
    :func:`_observed` for the entries they may hide.
    """
    return as_float_matrix(X, name="X")


def _observed(X: np.ndarray) -> np.ndarray:
    """(n_samples, n_features) bool, True where ``X`` holds a value (not NaN)."""
    return ~np.isnan(X)


def emptied(observed: np.ndarray, missing: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows and columns that had an observed entry and would have none once ``missing`` is hidden.

    Parameters
    ----------
    observed : bool array (n_samples, n_features)
        True where the data hold a value before amputation.
    missing : bool array, same shape
        True = the entry is hidden by the mechanism.

    Returns
    -------
    rows, cols : int ndarrays
        Indices of the rows / columns left with no observed entry (rows or columns that had
        none to begin with are not counted: amputation did not empty them).
    """
    left = observed & ~missing
    rows = np.flatnonzero(observed.any(axis=1) & ~left.any(axis=1))
    cols = np.flatnonzero(observed.any(axis=0) & ~left.any(axis=0))
    return rows, cols


def _check_rng(rng, who: str) -> None:
    if not isinstance(rng, np.random.Generator):
        raise BadInputError(
            f"{who}: rng must be a numpy.random.Generator (e.g. numpy.random.default_rng(0)); "
            f"got {type(rng).__name__}."
        )


def _check_rate(rate, who: str, hi: float = 1.0, why: str = "") -> float:
    try:
        r = float(rate)
    except (TypeError, ValueError):
        raise BadInputError(f"{who}: rate must be a number in [0, {hi:.4g}]; got {rate!r}.") from None
    if not 0.0 <= r <= hi:  # also rejects NaN
        raise InfeasibleRateError(
            f"{who}: rate={rate!r} is outside the feasible range [0, {hi:.4g}]{why}. Choose a rate in range.",
            (0.0, hi),
        )
    return r


def _check_choice(value, choices: Sequence, who: str, param: str):
    if value not in choices:
        raise BadInputError(f"{who}: {param} must be one of {list(choices)}; got {value!r}.")
    return value


def _column(j, n_features: int, who: str, param: str) -> int:
    if isinstance(j, bool) or not isinstance(j, (int, np.integer)) or not -n_features <= j < n_features:
        raise BadInputError(
            f"{who}: {param}={j!r} is not a column index of data with {n_features} columns "
            f"(use an integer in [{-n_features}, {n_features - 1}])."
        )
    return int(j) % n_features


def _columns(js, n_features: int, who: str, param: str) -> np.ndarray:
    try:
        items = [js] if isinstance(js, (int, np.integer)) else list(js)
    except TypeError:
        items = [js]  # rejected below with a clear message
    if not items:
        raise BadInputError(f"{who}: {param} must name at least one column.")
    return np.unique([_column(j, n_features, who, param) for j in items])


def _binary_flags(binary, n_features: int, who: str) -> np.ndarray:
    if binary is None:
        return np.zeros(n_features, dtype=bool)
    flags = np.asarray(binary)
    if flags.shape != (n_features,) or not (flags.dtype == bool or np.isin(flags, (0, 1)).all()):
        raise BadInputError(
            f"{who}: binary must be a sequence of {n_features} booleans (True = binary column); "
            f"got shape {flags.shape}."
        )
    return flags.astype(bool)


def _image_shape(image_shape, n_features: int, who: str) -> tuple[int, int]:
    if image_shape is None:
        raise BadInputError(f"{who} needs image_shape=(height, width); rows of X are flattened images.")
    try:
        h, w = (int(v) for v in image_shape)
    except (TypeError, ValueError):
        raise BadInputError(f"{who}: image_shape must be (height, width); got {image_shape!r}.") from None
    if h < 1 or w < 1 or h * w != n_features:
        raise BadInputError(
            f"{who}: image_shape={tuple(image_shape)!r} has {h * w} pixels but X has {n_features} columns; "
            "give the (height, width) of the flattened images (height * width must equal n_features)."
        )
    return h, w


def _standardize(col: np.ndarray) -> np.ndarray:
    """(col - mean) / std over the observed (non-NaN) values; NaN stays NaN; a constant column gives 0."""
    obs = ~np.isnan(col)
    if not obs.any():
        return col.copy()
    sd = col[obs].std()
    if sd == 0:
        return np.where(obs, 0.0, np.nan)
    return (col - col[obs].mean()) / sd


def _logistic_probs(z: np.ndarray, strength: float, q: float) -> np.ndarray:
    """P = sigmoid(a + strength * z) with the intercept ``a`` solved so that mean(P) = q."""
    if q <= 0.0:
        return np.zeros_like(z)
    if q >= 1.0:
        return np.ones_like(z)
    lin = strength * z
    spread = float(np.max(np.abs(lin))) + 1.0  # at logit(q) -/+ spread every P is below/above q
    log_n = np.log(lin.size)
    # log(mean P) - log(q), or its mirror on 1 - P: exact for any q in (0, 1), also subnormal ones whose
    # probabilities underflow (a rate of 5e-324 made mean(P) - q round to the same sign at both ends)
    if q <= 0.5:
        gap = lambda a: logsumexp(log_expit(a + lin)) - log_n - np.log(q)  # noqa: E731
    else:
        gap = lambda a: np.log1p(-q) - (logsumexp(log_expit(-(a + lin))) - log_n)  # noqa: E731
    a = brentq(gap, logit(q) - spread, logit(q) + spread, xtol=1e-12)
    return expit(a + lin)


def _check_strength(strength, who: str) -> float:
    try:
        b = float(strength)
    except (TypeError, ValueError):
        b = math.nan
    if not math.isfinite(b):
        raise BadInputError(f"{who}: strength must be a finite number; got {strength!r}.")
    return b
