"""Group the rows of an incomplete data matrix by their missingness.

Conditioning a Gaussian on the observed coordinates of a row needs a factorisation whose size
depends on *which* coordinates are missing. Two regimes occur in practice:

* few distinct patterns shared by many rows (image masks, monotone MAR): factor once per pattern;
* almost every row has its own pattern (MCAR on many features): factor per row, batched.

:class:`MissingPatterns` serves both. Rows are grouped by their number of missing entries ``m``
(so that every row of a group has index arrays of the same length and can be handled by one
batched numpy call); inside a group the distinct patterns are found once, with an index from
each row to its pattern. Kernels then factor ``n_unique`` matrices of size ``m x m`` and either
loop over the patterns (when they are few) or gather per row (when they are many).

Rows with every entry missing are kept apart (``empty_rows``): they carry no information about
the parameters and are imputed from the marginal distribution.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["MissingGroup", "MissingPatterns", "group_patterns"]

#: Below this many distinct patterns in a group (or with this many rows per pattern on average),
#: kernels loop over the patterns instead of gathering a matrix per row.
LOOP_MAX_PATTERNS = 64
LOOP_MIN_ROWS_PER_PATTERN = 8
#: Groups with at most this many missing entries per row (and many patterns) are factored by
#: column loops vectorised over the patterns; see :mod:`explorer.core.gaussian`.
SMALL_BLOCK = 12


@dataclass(frozen=True, eq=False, slots=True)
class MissingGroup:
    """Rows that have the same number ``m`` of missing entries.

    Attributes
    ----------
    rows : ndarray of shape (n_rows,)
        Row indices into the data matrix.
    mis : ndarray of shape (n_rows, m)
        Sorted column indices of the missing entries of each row.
    unique_mis : ndarray of shape (n_unique, m)
        The distinct patterns of the group (as missing-column indices).
    inverse : ndarray of shape (n_rows,)
        ``unique_mis[inverse[i]]`` is the pattern of ``rows[i]``.
    members : tuple of ndarray
        ``members[u]`` are the positions (into ``rows``) of the rows with pattern ``u``.
    order : ndarray of shape (n_rows,)
        Positions sorted by pattern (``inverse[order]`` is non-decreasing).
    flat_missing : ndarray of shape (n_rows * m,)
        Flat indices ``row * n_features + column`` of the missing entries, row-major.
    block_index : ndarray of shape (m, m, n_unique) or None
        Flat indices of the (mis, mis) block of a (n_features, n_features) matrix for every
        pattern, batch-last; only for groups that the batched small-block kernels handle.
    """

    rows: np.ndarray
    mis: np.ndarray
    unique_mis: np.ndarray
    inverse: np.ndarray
    members: tuple
    order: np.ndarray
    flat_missing: np.ndarray
    block_index: np.ndarray | None

    @property
    def n_missing(self) -> int:
        return self.mis.shape[1]

    @property
    def n_unique(self) -> int:
        return self.unique_mis.shape[0]

    @property
    def loop_over_patterns(self) -> bool:
        """True when factoring per distinct pattern and looping is cheaper than gathering per row."""
        return _loop_over_patterns(self.n_missing, self.n_unique, self.rows.size)


@dataclass(frozen=True, eq=False, slots=True)
class MissingPatterns:
    """Rows of a data set grouped by missingness (see the module docstring).

    Attributes
    ----------
    missing : ndarray of shape (n_samples, n_features)
        True where the entry is missing.
    groups : tuple of MissingGroup
        One group per number of missing entries, ``0 <= m < n_features``.
    empty_rows : ndarray
        Rows with every entry missing.
    n_patterns : int
        Number of distinct patterns among the non-empty rows.
    """

    missing: np.ndarray
    groups: tuple
    empty_rows: np.ndarray
    n_patterns: int

    @property
    def n_samples(self) -> int:
        return self.missing.shape[0]

    @property
    def n_features(self) -> int:
        return self.missing.shape[1]

    @property
    def fitted_rows(self) -> np.ndarray:
        """Rows with at least one observed entry, in the order the groups list them."""
        if not self.groups:
            return np.zeros(0, dtype=np.intp)
        return np.concatenate([g.rows for g in self.groups])


def _loop_over_patterns(m: int, n_unique: int, n_rows: int) -> bool:
    return m > SMALL_BLOCK or n_unique <= LOOP_MAX_PATTERNS or n_rows >= LOOP_MIN_ROWS_PER_PATTERN * n_unique


def _group(missing: np.ndarray, rows: np.ndarray, m: int) -> MissingGroup:
    sub = missing[rows]
    if m == 0:
        mis = np.zeros((rows.size, 0), dtype=np.intp)
        unique = np.zeros((1, 0), dtype=np.intp)
        inverse = np.zeros(rows.size, dtype=np.intp)
    else:
        mis = np.nonzero(sub)[1].reshape(rows.size, m).astype(np.intp)
        unique, inverse = np.unique(mis, axis=0, return_inverse=True)
        inverse = inverse.reshape(-1).astype(np.intp)
    order = np.argsort(inverse, kind="stable")
    bounds = np.cumsum(np.bincount(inverse, minlength=unique.shape[0]))[:-1]
    members = tuple(np.split(order, bounds))
    d = missing.shape[1]
    flat_missing = (rows[:, None] * d + mis).ravel()
    block_index = None
    if m and not _loop_over_patterns(m, unique.shape[0], rows.size):
        ut = unique.T
        block_index = ut[:, None, :] * d + ut[None, :, :]
        block_index.setflags(write=False)
    for a in (rows, mis, unique, inverse, order, flat_missing, *members):
        a.setflags(write=False)
    return MissingGroup(
        rows=rows,
        mis=mis,
        unique_mis=unique,
        inverse=inverse,
        members=members,
        order=order,
        flat_missing=flat_missing,
        block_index=block_index,
    )


def group_patterns(missing: np.ndarray) -> MissingPatterns:
    """Group rows by number of missing entries and, within a group, by pattern.

    Parameters
    ----------
    missing : array-like of bool, shape (n_samples, n_features)
        True = missing.

    Returns
    -------
    MissingPatterns

    Examples
    --------
    >>> import numpy as np
    >>> p = group_patterns(np.array([[0, 1], [0, 0], [1, 1], [0, 1]], dtype=bool))
    >>> [g.n_missing for g in p.groups], p.empty_rows.tolist(), p.n_patterns
    ([0, 1], [2], 2)
    """
    missing = np.array(missing, dtype=bool, copy=True)
    if missing.ndim != 2:
        raise ValueError(f"missing must be 2-D, got shape {missing.shape}")
    n_features = missing.shape[1]
    counts = missing.sum(axis=1)
    groups = []
    n_patterns = 0
    for m in np.unique(counts):
        if m == n_features:
            continue
        rows = np.flatnonzero(counts == m).astype(np.intp)
        g = _group(missing, rows, int(m))
        n_patterns += g.n_unique
        groups.append(g)
    empty = np.flatnonzero(counts == n_features).astype(np.intp)
    missing.setflags(write=False)
    empty.setflags(write=False)
    return MissingPatterns(missing=missing, groups=tuple(groups), empty_rows=empty, n_patterns=n_patterns)
