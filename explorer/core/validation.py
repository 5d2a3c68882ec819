"""Input checks shared by the numerical core.

Every public entry point of the library validates its input here, at the boundary, so that the
kernels can assume clean arrays: float64, finite where observed, ``missing`` boolean with
True = missing. Errors are :class:`BadInputError` (a ``ValueError``) with a message that says
what is wrong, where, and what to do about it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = [
    "constant_columns",
    "BadInputError",
    "NonNumericError",
    "as_float_matrix",
    "check_missing",
    "check_dirichlet",
    "check_draws",
    "check_rng",
    "check_incomplete",
    "check_level",
    "check_magnitude",
    "check_missing_matches_nan",
    "check_no_empty_rows",
    "column_label",
]


class BadInputError(ValueError):
    """Raised when the data or a parameter cannot be used; the message gives the remedy."""


class NonNumericError(BadInputError, TypeError):
    """Cells that are not numbers (text, categories, objects): a :class:`BadInputError` and a ``TypeError``."""


class InfeasibleRateError(BadInputError):
    """A missing rate the mechanism cannot reach on these data; ``feasible`` is the range it can."""

    def __init__(self, message: str, feasible: tuple[float, float]):
        super().__init__(message)
        self.feasible = (float(feasible[0]), float(feasible[1]))


def is_int(value) -> bool:
    """An integer (Python or numpy), not a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def check_int(name: str, value, minimum: int) -> None:
    """``value`` an integer >= ``minimum`` (else a :class:`BadInputError` naming ``name``)."""
    if not is_int(value) or value < minimum:
        kind = {0: "a non-negative integer", 1: "a positive integer"}.get(minimum, f"an integer >= {minimum}")
        raise BadInputError(f"{name} must be {kind}, got {value!r}.")


def check_nonnegative(name: str, value) -> None:
    """``value`` a finite real number >= 0 (else a :class:`BadInputError` naming ``name``)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not (value >= 0) or not np.isfinite(value):
        raise BadInputError(f"{name} must be a finite number >= 0, got {value!r}.")


def check_dirichlet(name: str, value, *,
                    why: str = "the MAP-EM update needs a Dirichlet parameter >= 1; 1 = maximum likelihood") -> float:
    """``value`` a finite real number >= 1, a symmetric Dirichlet parameter of a MAP-EM fit (else a
    :class:`BadInputError` naming ``name``, with ``why`` in parentheses); returns it as a float."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not np.isfinite(value) or value < 1:
        raise BadInputError(f"{name} must be a finite number >= 1 ({why}); got {value!r}.")
    return float(value)


def check_level(level) -> float:
    """An interval level strictly between 0 and 1, as a float (else a readable :class:`BadInputError`)."""
    try:
        value = float(level)
    except (TypeError, ValueError):
        raise BadInputError(f"level must be a number strictly between 0 and 1, got {level!r}.") from None
    if not 0.0 < value < 1.0:
        raise BadInputError(f"level must be a number strictly between 0 and 1, got {level!r}.")
    return value


def check_rng(rng) -> np.random.Generator:
    """An injected :class:`numpy.random.Generator` (else a :class:`BadInputError` saying how to make one)."""
    if not isinstance(rng, np.random.Generator):
        raise BadInputError(f"rng must be a numpy.random.Generator (np.random.default_rng(seed)), "
                            f"got {type(rng).__name__}.")
    return rng


def check_draws(n_draws, rng) -> None:
    """A positive integer number of draws and an injected :class:`numpy.random.Generator`."""
    if isinstance(n_draws, (bool, np.bool_)) or not isinstance(n_draws, (int, np.integer)) or n_draws < 1:
        raise BadInputError(f"n_draws must be a positive integer, got {n_draws!r}.")
    check_rng(rng)


def constant_columns(values) -> np.ndarray:
    """Indices of the columns of ``values`` (NaN = missing) with no positive observed variance
    (constant, or never observed)."""
    values = np.asarray(values, dtype=float)
    observed = ~np.isnan(values)
    n = observed.sum(axis=0)
    mean = np.where(observed, values, 0.0).sum(axis=0) / np.maximum(n, 1)
    var = np.where(observed, (values - mean) ** 2, 0.0).sum(axis=0) / np.maximum(n, 1)
    return np.flatnonzero(~(var > 0) | (n == 0))


def column_label(j: int, columns: Sequence[str] | None = None) -> str:
    """Human-readable name of column ``j`` for error messages."""
    if columns is not None and j < len(columns):
        return f"{columns[j]!r} (column {j})"
    return f"column {j}"


def _list_labels(idx, columns, limit: int = 5) -> str:
    idx = [int(i) for i in idx]
    shown = ", ".join(column_label(j, columns) for j in idx[:limit])
    if len(idx) > limit:
        shown += f" and {len(idx) - limit} more"
    return shown


def as_float_matrix(X, *, name: str = "X", columns: Sequence[str] | None = None) -> np.ndarray:
    """Convert ``X`` to a 2-D float64 array, with clear errors for strings and wrong shapes.

    NaN is accepted (it marks a missing entry); ``inf`` is not.
    """
    arr = np.asarray(X)
    if arr.dtype.kind in "OUSV":  # object, unicode, bytes, void: look for non-numeric cells
        try:
            arr = arr.astype(np.float64)
        except (TypeError, ValueError):
            bad, why = [], ""
            flat = np.atleast_2d(np.asarray(X, dtype=object))
            for j in range(flat.shape[1] if flat.ndim == 2 else 0):
                for v in flat[:, j]:
                    try:
                        float(v)
                    except (TypeError, ValueError) as exc:
                        if v is not None:
                            bad.append(j)
                            why = why or f" ({exc})"
                            break
            where = _list_labels(bad, columns) if bad else "some cells"
            raise NonNumericError(
                f"{name} contains non-numeric values in {where}{why}. To impute text / category columns as "
                "categories, use explorer.impute.mixed.MixedMixtureImputer (a DataFrame goes in as it is), or "
                "encode categories as numbers (e.g. 0/1 for binary columns; explorer.io.encode_categoricals one-hot "
                "encodes a DataFrame's) or drop those columns; use NaN for missing cells."
            ) from None
    elif arr.dtype.kind == "b":
        arr = arr.astype(np.float64)
    elif arr.dtype.kind == "c":
        raise BadInputError(
            f"{name} has dtype {arr.dtype}. Complex data not supported: split real and imaginary parts "
            "into separate columns (or keep the modulus)."
        )
    elif arr.dtype.kind not in "iuf":
        raise BadInputError(f"{name} has dtype {arr.dtype}, which is not numeric.")
    arr = np.array(arr, dtype=np.float64, copy=True)
    if arr.ndim == 1:
        raise BadInputError(
            f"{name} must be 2-D (n_samples, n_features); got a 1-D array of length {arr.shape[0]}. "
            "Reshape your data: X.reshape(-1, 1) for a single feature or X.reshape(1, -1) for a single sample."
        )
    if arr.ndim != 2:
        raise BadInputError(f"{name} must be 2-D (n_samples, n_features); got shape {arr.shape}.")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        what = "sample(s)" if arr.shape[0] == 0 else "feature(s)"
        raise BadInputError(
            f"{name} is empty: 0 {what} (shape={arr.shape}) while a minimum of 1 is required."
        )
    inf = np.isinf(arr)
    if inf.any():
        rows, cols = np.nonzero(inf)
        raise BadInputError(
            f"{name} contains {inf.sum()} infinite value(s), e.g. row {rows[0]} of "
            f"{column_label(cols[0], columns)}. Replace them by NaN to treat them as missing, "
            "or clip them to a finite range."
        )
    return arr


#: Largest magnitude an observed value may have: the Gaussian models square values and multiply them by
#: covariances, which overflows float64 (about 1.8e308) well before the values themselves do.
MAX_ABS_VALUE = 1e100


def check_magnitude(arr: np.ndarray, *, name: str = "X", columns: Sequence[str] | None = None,
                    limit: float = MAX_ABS_VALUE) -> None:
    """Refuse finite values beyond ``±limit`` (NaN ignored), naming the first one and what to do.

    Squares and products of such values overflow float64 inside the models (a log-density of
    :math:`-x^2/2` with :math:`x = 10^{300}`), which would turn results into NaN or infinity.
    """
    with np.errstate(invalid="ignore"):
        big = np.abs(arr) > limit
    if big.any():
        rows, cols = np.nonzero(big)
        cols_big = np.unique(cols)
        raise BadInputError(
            f"{name} has {int(big.sum())} value(s) beyond ±{limit:.0e}, e.g. {arr[rows[0], cols[0]]:.6g} in row "
            f"{rows[0]} of {column_label(cols[0], columns)}"
            + (f" (in {_list_labels(cols_big, columns)})" if cols_big.size > 1 else "") + ". "
            "The models square values and multiply them by covariances, which overflows floating point. "
            "Check for a sentinel code or a unit error, mark such values missing (NaN), or rescale the "
            "column(s) (e.g. divide by a power of ten, or take the logarithm of a positive column)."
        )


def check_missing(missing, shape: tuple[int, int], *, name: str = "missing") -> np.ndarray:
    """Return ``missing`` as a boolean array of the given shape (True = missing)."""
    m = np.asarray(missing)
    if m.shape != tuple(shape):
        raise BadInputError(f"{name} has shape {m.shape} but the data have shape {tuple(shape)}.")
    if m.dtype != bool:
        if m.dtype.kind in "iuf" and np.isin(m, (0, 1)).all():
            m = m.astype(bool)
        else:
            raise BadInputError(f"{name} must be boolean (True = missing); got dtype {m.dtype}.")
    return np.array(m, dtype=bool, copy=True)


def check_missing_matches_nan(values: np.ndarray, missing, *, columns=None, name: str = "X") -> np.ndarray:
    """``missing`` as a boolean array; NaN in ``values`` at entries marked observed is an error."""
    m = check_missing(missing, values.shape)
    stray = np.isnan(values) & ~m
    if stray.any():
        rows, cols = np.nonzero(stray)
        raise BadInputError(
            f"{name} has {stray.sum()} NaN value(s) at entries marked observed, e.g. row {rows[0]} "
            f"of {column_label(cols[0], columns)}. Mark them missing or supply their values."
        )
    return m


def check_no_empty_rows(missing: np.ndarray) -> None:
    """Raise when a row has every value missing (with the ``empty_rows='marginal'`` remedy)."""
    empty_rows = np.flatnonzero(np.asarray(missing).all(axis=1))
    if empty_rows.size:
        shown = ", ".join(str(i) for i in empty_rows[:5]) + (" ..." if empty_rows.size > 5 else "")
        raise BadInputError(
            f"{empty_rows.size} row(s) have every value missing (rows {shown}). They carry no "
            "information; drop them, or pass empty_rows='marginal' to impute them from the fitted "
            "model's marginal distribution."
        )


def check_incomplete(
    X,
    missing=None,
    *,
    columns: Sequence[str] | None = None,
    allow_empty_rows: bool = False,
    allow_empty_columns: bool = False,
    allow_constant: bool = True,
    name: str = "X",
) -> tuple[np.ndarray, np.ndarray]:
    """Validate incomplete data and return ``(X_nan, missing)``.

    ``X_nan`` is a float64 copy with NaN exactly where ``missing`` is True. If ``missing`` is
    None it is taken from the NaN entries of ``X``; if given, NaN entries of ``X`` that are not
    marked missing are an error (they would be observed values that are not numbers).

    Raises
    ------
    BadInputError
        Non-numeric values, inf, wrong shapes, columns with no observed value (unless
        ``allow_empty_columns``), rows with no observed value (unless ``allow_empty_rows``),
        constant columns (unless ``allow_constant``).
    """
    arr = as_float_matrix(X, name=name, columns=columns)
    nan = np.isnan(arr)
    if missing is None:
        m = nan
    else:
        m = check_missing_matches_nan(arr, missing, columns=columns, name=name)
    arr[m] = np.nan
    empty_cols = np.flatnonzero(m.all(axis=0))
    if empty_cols.size and not allow_empty_columns:
        raise BadInputError(
            f"{_list_labels(empty_cols, columns)} {'has' if empty_cols.size == 1 else 'have'} no "
            "observed value, so nothing can be learned about them. Drop those columns before fitting."
        )
    if not allow_empty_rows:
        check_no_empty_rows(m)
    if not allow_constant:
        with np.errstate(invalid="ignore"):  # all-NaN columns were rejected above
            spread = np.nanmax(arr, axis=0) - np.nanmin(arr, axis=0)
        const = np.flatnonzero(spread == 0)
        if const.size:
            raise BadInputError(
                f"{_list_labels(const, columns)} {'is' if const.size == 1 else 'are'} constant on the "
                "observed entries; a Gaussian model has zero variance there. Drop the column(s)."
            )
    return arr, m
