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

from dataclasses import dataclass, field

import numpy as np

__all__ = ["MissingGroup", "MissingPatterns", "group_patterns"]

#: Groups with at most this many distinct patterns are handled by a Python loop over the
#: patterns (one shared factor each, BLAS over its rows); larger groups by batched kernels.
LOOP_MAX_PATTERNS = 8
#: Groups with at most this many missing entries per row (and many patterns) are factored by
#: column loops vectorised over the patterns; see :mod:`explorer.core.gaussians.gaussian`.
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
    start, stop : int or None
        When the group's rows are the contiguous range ``start:stop`` (sorted layout, see
        :func:`group_patterns`), kernels use slices instead of gathers.
    local_flat_missing : ndarray of shape (n_rows * m,)
        Flat indices ``position * n_features + column`` of the missing entries within the group.
    layouts : dict
        What :meth:`observed_layout` has computed, by number of features.
    """

    rows: np.ndarray
    mis: np.ndarray
    unique_mis: np.ndarray
    inverse: np.ndarray
    members: tuple
    order: np.ndarray
    flat_missing: np.ndarray
    block_index: np.ndarray | None
    start: int | None
    stop: int | None
    local_flat_missing: np.ndarray
    layouts: dict = field(default_factory=dict, repr=False)  # observed_layout's results, by n_features

    def observed_layout(self, n_features: int) -> tuple[np.ndarray, np.ndarray]:
        """``(obs, flat)``: the sorted observed columns of each distinct pattern, shape (n_unique, D - m), and the
        flat indices of its observed block in a D x D matrix, shape (n_unique, D - m, D - m). Computed once per
        group (the covariance-side kernels ask for them at every step), read-only."""
        out = self.layouts.get(n_features)
        if out is None:
            n_u, m = self.unique_mis.shape
            keep = np.ones((n_u, n_features), dtype=bool)
            keep[np.arange(n_u)[:, None], self.unique_mis] = False
            obs = np.nonzero(keep)[1].reshape(n_u, n_features - m)
            flat = obs[:, :, None] * n_features + obs[:, None, :]
            obs.setflags(write=False)
            flat.setflags(write=False)
            out = self.layouts[n_features] = (obs, flat)
        return out

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
    perm : ndarray or None
        For the sorted layout: ``missing`` here is ``original_missing[perm]`` (rows ordered by
        number of missing entries, then by pattern; rows with nothing observed last).
    """

    missing: np.ndarray
    groups: tuple
    empty_rows: np.ndarray
    n_patterns: int
    perm: np.ndarray | None = None

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
    # n_rows is kept in the signature: a cost model may use it; today the pattern count decides
    return m > SMALL_BLOCK or n_unique <= LOOP_MAX_PATTERNS


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
    local_flat_missing = (np.arange(rows.size)[:, None] * d + mis).ravel()
    # slices are only valid when the rows are contiguous AND ordered by pattern (the kernels' "row i has
    # pattern i" shortcut); a contiguous group of the unsorted layout keeps gathers
    contiguous = rows.size > 0 and bool(np.all(np.diff(rows) == 1)) and bool(np.all(np.diff(inverse) >= 0))
    block_index = None
    if m and not _loop_over_patterns(m, unique.shape[0], rows.size):
        ut = unique.T
        block_index = ut[:, None, :] * d + ut[None, :, :]
        block_index.setflags(write=False)
    for a in (rows, mis, unique, inverse, order, flat_missing, local_flat_missing, *members):
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
        start=int(rows[0]) if contiguous else None,
        stop=int(rows[-1]) + 1 if contiguous else None,
        local_flat_missing=local_flat_missing,
    )


def group_patterns(missing: np.ndarray, *, sort: bool = False) -> MissingPatterns:
    """Group rows by number of missing entries and, within a group, by pattern.

    Parameters
    ----------
    missing : array-like of bool, shape (n_samples, n_features)
        True = missing.
    sort : bool
        Group the rows of ``missing[perm]`` instead, where ``perm`` orders the rows by number of
        missing entries, then by pattern (empty rows last). Every group is then a contiguous range
        of rows with non-decreasing pattern index, which lets kernels use slices instead of
        gathers. The result's ``perm`` says how to reorder data to match.

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
    if sort:
        first = group_patterns(missing)
        parts = [g.rows[g.order] for g in first.groups] + [first.empty_rows]
        perm = np.concatenate(parts).astype(np.intp) if parts else np.zeros(0, dtype=np.intp)
        out = group_patterns(missing[perm])
        perm.setflags(write=False)
        return MissingPatterns(missing=out.missing, groups=out.groups, empty_rows=out.empty_rows,
                               n_patterns=out.n_patterns, perm=perm)
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
