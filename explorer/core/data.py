"""The incomplete-data container and observed-entry standardisation.

:class:`IncompleteData` is the value every layer passes around: the data matrix with NaN exactly
where an entry is missing, the boolean ``missing`` matrix (True = missing), optionally the complete
``truth`` (for amputation experiments, where the hidden values are known), column names, which
columns are binary (0/1), a name and a one-line description. All arrays are float64 / bool copies
and read-only, so an instance can be shared freely (e.g. cached by :mod:`explorer.datasets`).

:class:`Standardizer` centres and scales each column with statistics computed from its
**observed** entries only (garriga2017 §2.3: mean and standard deviation with ``ddof=0``; binary
columns are left as 0/1 by default, as the author's code does; a constant column gets scale 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from explorer.core.validation import BadInputError, _list_labels, as_float_matrix, check_incomplete

__all__ = ["IncompleteData", "Standardizer", "standardize"]


def _readonly(arr: np.ndarray) -> np.ndarray:
    arr.setflags(write=False)
    return arr


def _detect_binary(values: np.ndarray, missing: np.ndarray) -> tuple[bool, ...]:
    """Columns whose observed entries are all 0 or 1 (at least one observed entry each)."""
    zero_one = (values == 0.0) | (values == 1.0) | missing
    return tuple(bool(b) for b in zero_one.all(axis=0))


@dataclass(frozen=True, eq=False, slots=True)
class IncompleteData:
    """A data matrix with missing entries.

    Build instances with :meth:`from_array` or :meth:`from_complete`; direct construction is
    validated the same way (``values`` must already hold NaN exactly where ``missing`` is True).

    Attributes
    ----------
    values : ndarray of shape (n_samples, n_features)
        float64, NaN exactly where ``missing`` is True. Read-only.
    missing : ndarray of shape (n_samples, n_features)
        bool, True = missing. Read-only.
    truth : ndarray of shape (n_samples, n_features) or None
        The complete matrix (true values at the missing entries too), equal to ``values`` on the
        observed entries; None when the missing values are unknown (real missing data). Read-only.
    columns : tuple of str
        Column names (unique). Defaults to ``("x0", "x1", ...)``.
    binary : tuple of bool
        True for 0/1 columns. Defaults to the columns whose observed values are all in {0, 1}.
    name, description : str
        Short identifier and one-line human description (provenance, preprocessing).
    """

    values: np.ndarray
    missing: np.ndarray
    truth: np.ndarray | None = None
    columns: tuple[str, ...] = ()
    binary: tuple[bool, ...] = ()
    name: str = ""
    description: str = field(default="")

    def __post_init__(self) -> None:
        values = as_float_matrix(self.values, name="values")  # float64 copy; rejects inf
        missing = np.array(self.missing, copy=True)
        if missing.dtype != bool or missing.shape != values.shape:
            raise BadInputError(
                f"missing must be a boolean array of shape {values.shape}; "
                f"got dtype {missing.dtype} and shape {missing.shape}."
            )
        nan = np.isnan(values)
        if not np.array_equal(nan, missing):
            raise BadInputError(
                f"values must hold NaN exactly where missing is True; {int((nan != missing).sum())} "
                "entries disagree. Build the data with IncompleteData.from_array(X, missing) instead."
            )
        n_features = values.shape[1]
        columns = tuple(str(c) for c in self.columns) if len(self.columns) else tuple(
            f"x{j}" for j in range(n_features)
        )
        if len(columns) != n_features:
            raise BadInputError(f"{len(columns)} column names given for {n_features} columns.")
        if len(set(columns)) != len(columns):
            dup = sorted({c for c in columns if columns.count(c) > 1})
            raise BadInputError(f"column names must be unique; repeated: {dup}. Rename those columns.")
        binary = tuple(bool(b) for b in self.binary) if len(self.binary) else _detect_binary(values, missing)
        if len(binary) != n_features:
            raise BadInputError(f"binary has {len(binary)} flags for {n_features} columns.")
        truth = None
        if self.truth is not None:
            truth = as_float_matrix(self.truth, name="truth")
            if truth.shape != values.shape:
                raise BadInputError(f"truth has shape {truth.shape} but values have shape {values.shape}.")
            if not np.isfinite(truth).all():
                raise BadInputError(
                    "truth must be complete and finite (it holds the true value of every entry); "
                    "pass truth=None when the missing values are unknown."
                )
            obs = ~missing
            if not np.array_equal(truth[obs], values[obs]):
                raise BadInputError(
                    "truth differs from values on observed entries; truth must be the complete "
                    "version of the same data."
                )
            truth = _readonly(truth)
        object.__setattr__(self, "values", _readonly(values))
        object.__setattr__(self, "missing", _readonly(missing))
        object.__setattr__(self, "truth", truth)
        object.__setattr__(self, "columns", columns)
        object.__setattr__(self, "binary", binary)
        object.__setattr__(self, "name", str(self.name))
        object.__setattr__(self, "description", str(self.description))

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_array(
        cls,
        X,
        missing=None,
        truth=None,
        columns: Sequence[str] | None = None,
        binary: Sequence[bool] | None = None,
        name: str = "",
        description: str = "",
    ) -> IncompleteData:
        """Validate ``X`` (NaN = missing unless ``missing`` is given) and wrap it.

        Parameters
        ----------
        X : array_like of shape (n_samples, n_features)
            Numeric data; NaN marks a missing entry. Entries marked in ``missing`` may hold
            anything numeric (they are replaced by NaN).
        missing : array_like of bool, shape (n_samples, n_features), optional
            True = missing. Default: ``isnan(X)``.
        truth : array_like of shape (n_samples, n_features), optional
            Complete matrix; must agree with ``X`` on the observed entries.
        columns : sequence of str, optional
            Column names; default ``x0, x1, ...``.
        binary : sequence of bool, optional
            0/1 columns; default: auto-detected from the observed values. A column declared
            binary must have observed values in {0, 1}.
        name, description : str

        Raises
        ------
        BadInputError
            From :func:`~explorer.core.validation.check_incomplete` (non-numeric, inf, wrong
            shapes, columns with no observed value); also for a bad ``binary`` declaration.
            Rows with every entry missing are allowed.
        """
        cols = None if columns is None else [str(c) for c in columns]
        values, miss = check_incomplete(X, missing, columns=cols, allow_empty_rows=True)
        if binary is not None:
            binary = tuple(bool(b) for b in binary)
            if len(binary) != values.shape[1]:
                raise BadInputError(f"binary has {len(binary)} flags for {values.shape[1]} columns.")
            detected = _detect_binary(values, miss)
            wrong = [j for j, (b, d) in enumerate(zip(binary, detected)) if b and not d]
            if wrong:
                raise BadInputError(
                    f"{_list_labels(wrong, cols)} declared binary but observed values are not all "
                    "0 or 1. Recode the column to 0/1 or do not declare it binary."
                )
        return cls(
            values=values,
            missing=miss,
            truth=truth,
            columns=tuple(cols) if cols is not None else (),
            binary=binary if binary is not None else (),
            name=name,
            description=description,
        )

    @classmethod
    def from_complete(
        cls,
        X,
        columns: Sequence[str] | None = None,
        binary: Sequence[bool] | None = None,
        name: str = "",
        description: str = "",
    ) -> IncompleteData:
        """Complete data (no missing entry) with ``truth = X``; NaN in ``X`` is an error."""
        arr = as_float_matrix(X, name="X", columns=columns)
        if np.isnan(arr).any():
            rows, cols = np.nonzero(np.isnan(arr))
            raise BadInputError(
                f"from_complete got {int(np.isnan(arr).sum())} NaN value(s) (e.g. row {rows[0]}, "
                f"column {cols[0]}); use IncompleteData.from_array for data with missing entries."
            )
        return cls.from_array(arr, None, arr, columns, binary, name, description)

    def with_missing(self, missing, *, name: str | None = None, description: str | None = None) -> IncompleteData:
        """New data with ``missing`` applied to ``truth`` (e.g. after an amputation).

        Parameters
        ----------
        missing : array_like of bool, shape (n_samples, n_features)
            True = missing. A mask may hide whole columns (e.g. the top half of every image):
            the container keeps them, and fitting a model on them raises a clear error.

        Raises
        ------
        BadInputError
            When ``truth`` is None, or ``missing`` has the wrong shape/dtype.
        """
        if self.truth is None:
            raise BadInputError(
                f"data {self.name!r} have no truth (the missing values are unknown), so a new mask "
                "cannot be applied. Use a data set with known complete values."
            )
        values, miss = check_incomplete(
            self.truth, missing, columns=self.columns, allow_empty_rows=True, allow_empty_columns=True
        )
        return IncompleteData(
            values=values,
            missing=miss,
            truth=self.truth,
            columns=self.columns,
            binary=self.binary,
            name=self.name if name is None else name,
            description=self.description if description is None else description,
        )

    # ------------------------------------------------------------------ properties
    @property
    def n_samples(self) -> int:
        return int(self.values.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.values.shape[1])

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n_samples, self.n_features)

    @property
    def missing_rate(self) -> float:
        """Fraction of missing entries over the whole matrix."""
        return float(self.missing.mean())

    @property
    def observed(self) -> np.ndarray:
        """Boolean (n_samples, n_features), True = observed (``~missing``); read-only."""
        return _readonly(~self.missing)

    def filled(self, value: float = 0.0) -> np.ndarray:
        """Writeable float64 copy of ``values`` with missing entries set to ``value``."""
        out = np.array(self.values, copy=True)
        out[self.missing] = value
        return out

    def pattern_counts(self) -> tuple[np.ndarray, np.ndarray]:
        """Distinct missingness patterns and how many rows have each.

        Returns
        -------
        patterns : ndarray of bool, shape (n_patterns, n_features)
            True = missing; sorted by decreasing count (ties: lexicographic order of the pattern).
        counts : ndarray of int, shape (n_patterns,)
        """
        patterns, counts = np.unique(self.missing, axis=0, return_counts=True)
        order = np.argsort(-counts, kind="stable")
        return patterns[order], counts[order]

    def observed_mean(self) -> np.ndarray:
        """Per-column mean of the observed entries, shape (n_features,)."""
        return np.nanmean(self.values, axis=0)

    def observed_std(self, ddof: int = 0) -> np.ndarray:
        """Per-column standard deviation of the observed entries, shape (n_features,)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.nanstd(self.values, axis=0, ddof=ddof)

    def __repr__(self) -> str:
        truth = "with truth" if self.truth is not None else "no truth"
        return (
            f"IncompleteData(name={self.name!r}, shape={self.shape}, missing_rate={self.missing_rate:.3f}, "
            f"binary={sum(self.binary)} column(s), {truth})"
        )


@dataclass(frozen=True, eq=False, slots=True)
class Standardizer:
    """Per-column affine map ``x -> (x - mean_) / scale_`` fitted on observed entries.

    Attributes
    ----------
    mean_ : ndarray of shape (n_features,)
        Observed-entry means (0 for binary columns left unscaled). Read-only.
    scale_ : ndarray of shape (n_features,)
        Observed-entry standard deviations with ``ddof=0``; 1 for constant columns and for
        binary columns left unscaled. Read-only.
    """

    mean_: np.ndarray
    scale_: np.ndarray

    def __post_init__(self) -> None:
        mean = np.array(self.mean_, dtype=np.float64, copy=True).reshape(-1)
        scale = np.array(self.scale_, dtype=np.float64, copy=True).reshape(-1)
        if mean.shape != scale.shape:
            raise BadInputError(f"mean_ has shape {mean.shape} but scale_ has shape {scale.shape}.")
        if not (np.isfinite(mean).all() and np.isfinite(scale).all() and (scale > 0).all()):
            raise BadInputError("Standardizer needs finite means and finite positive scales.")
        object.__setattr__(self, "mean_", _readonly(mean))
        object.__setattr__(self, "scale_", _readonly(scale))

    @classmethod
    def fit(cls, data, *, skip_binary: bool = True) -> Standardizer:
        """Statistics from the observed entries of ``data``.

        Parameters
        ----------
        data : IncompleteData or array_like of shape (n_samples, n_features)
            Arrays use NaN for missing entries (binary columns are auto-detected).
        skip_binary : bool, default True
            Leave 0/1 columns unscaled (mean 0, scale 1), as garriga2017's code does.
        """
        if not isinstance(data, IncompleteData):
            data = IncompleteData.from_array(data)
        mean = data.observed_mean()
        scale = data.observed_std(ddof=0)
        scale = np.where(scale > 0, scale, 1.0)  # constant column: centre only, no division by 0
        if skip_binary:
            b = np.asarray(data.binary, dtype=bool)
            mean = np.where(b, 0.0, mean)
            scale = np.where(b, 1.0, scale)
        return cls(mean, scale)

    @property
    def n_features(self) -> int:
        return int(self.mean_.shape[0])

    def _check(self, X, what: str) -> np.ndarray:
        arr = np.asarray(X, dtype=np.float64)
        if arr.ndim == 0 or arr.shape[-1] != self.n_features:
            raise BadInputError(
                f"{what} expects arrays whose last axis has {self.n_features} columns; got shape {arr.shape}."
            )
        return arr

    def transform(self, X) -> np.ndarray:
        """``(X - mean_) / scale_`` column-wise; NaN stays NaN. Shape (..., n_features)."""
        return (self._check(X, "transform") - self.mean_) / self.scale_

    def inverse_transform(self, X) -> np.ndarray:
        """``X * scale_ + mean_`` column-wise; NaN stays NaN. Shape (..., n_features)."""
        return self._check(X, "inverse_transform") * self.scale_ + self.mean_

    def inverse_transform_variance(self, var) -> np.ndarray:
        """Map per-entry variances from standardised to original units (``var * scale_**2``)."""
        return self._check(var, "inverse_transform_variance") * self.scale_**2


def standardize(data: IncompleteData, *, skip_binary: bool = True) -> tuple[IncompleteData, Standardizer]:
    """Standardise ``data`` (and its ``truth``) with observed-entry statistics.

    Parameters
    ----------
    data : IncompleteData
    skip_binary : bool, default True
        Leave 0/1 columns unchanged. With False they are scaled like the others and their
        ``binary`` flag is cleared in the result (the values are no longer 0/1).

    Returns
    -------
    standardized : IncompleteData
        Same mask, columns and name; ``truth`` transformed with the same statistics.
    standardizer : Standardizer
        Use ``standardizer.inverse_transform`` to map imputations back to original units.
    """
    if not isinstance(data, IncompleteData):
        raise BadInputError(f"standardize expects IncompleteData; got {type(data).__name__}.")
    st = Standardizer.fit(data, skip_binary=skip_binary)
    values = st.transform(data.values)
    truth = None if data.truth is None else st.transform(data.truth)
    binary = data.binary if skip_binary else (False,) * data.n_features
    note = "standardised on observed entries"
    return (
        IncompleteData(
            values=values,
            missing=data.missing,
            truth=truth,
            columns=data.columns,
            binary=binary,
            name=data.name,
            description=f"{data.description} ({note})" if data.description else note,
        ),
        st,
    )
