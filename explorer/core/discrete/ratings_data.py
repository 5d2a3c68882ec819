r"""Categorical data with a response indicator and an availability indicator (Marlin ch. 4-5).

The NMAR rating models of marlin2008 (chapter 5) distinguish, for every entry (n, d):

* ``response`` :math:`r_{dn}`: True when the user *selected* (rated) the item, the event whose
  probability the selection model :math:`P(r_{dn} = 1 \mid x_{dn} = v) = \mu_v` describes;
* ``available`` :math:`a_{dn}`: True when the value is *known to the learner* (a training entry).

The four cases: (r=1, a=1) an observed user-selected rating; (r=1, a=0) a held-out user-selected
rating (its value hidden, but the learner knows the user chose the item); (r=0, a=0) an item the
user never rated; (r=0, a=1) a rating of a randomly chosen item the user would not have selected
(the survey ratings of the Yahoo! study, the "random items" of the protocol). Under MAR only the
available entries enter the likelihood and ``response`` is ignored.

Values are **codes** 0..V-1 (rating v = code + 1 on a 1..V scale). Every model of
:mod:`explorer.core.discrete.categorical_mixture`, :mod:`explorer.core.discrete.cpt_v` and
:mod:`explorer.core.discrete.dp_cpt_v` takes a :class:`RatingData` built by :func:`prepare`, which validates the
input once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from explorer.core.validation import BadInputError, check_int

__all__ = ["RatingData", "prepare", "stack"]


@dataclass(frozen=True, eq=False, slots=True)
class RatingData:
    """Validated categorical data: ``codes`` (n_samples, n_features) int64 in 0..n_values-1 where
    ``available`` (-1 elsewhere), ``response`` and ``available`` bool of the same shape.

    ``onehot`` (n_samples, n_features, n_values) float64 is the one-hot encoding of the available
    values (all zeros where unavailable), built once for the vectorised E- and M-steps.
    """

    codes: np.ndarray
    response: np.ndarray
    available: np.ndarray
    n_values: int
    onehot: np.ndarray = field(repr=False)

    @property
    def n_samples(self) -> int:
        return int(self.codes.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.codes.shape[1])


def _bool_matrix(value, shape, name: str) -> np.ndarray:
    arr = np.asarray(value)
    if arr.shape != shape:
        raise BadInputError(f"{name} must have the shape of x {shape}; got {arr.shape}.")
    if arr.dtype != bool:
        if not np.issubdtype(arr.dtype, np.number) or not np.all(np.isin(arr, (0, 1))):
            raise BadInputError(f"{name} must be boolean (True/False or 1/0); got values of dtype {arr.dtype}.")
        arr = arr.astype(bool)
    return arr


def prepare(x, response=None, available=None, *, n_values: int | None = None) -> RatingData:
    """Validate categorical data and build a :class:`RatingData`.

    Parameters
    ----------
    x : array of shape (n_samples, n_features)
        Codes 0..n_values-1. Unavailable entries may hold NaN (float input) or any negative
        integer; their values are never read.
    response : bool array of the same shape, optional
        :math:`r_{dn}` (True = the user selected the item). Default: ``available`` (the MAR
        training case: every known rating was user-selected, nothing else was).
    available : bool array of the same shape, optional
        :math:`a_{dn}` (True = the value is known). Default: the entries of ``x`` that are not NaN
        and not negative.
    n_values : int, optional
        V, the number of levels (>= 2). Default: the largest available code + 1 (at least 2).

    Raises :class:`~explorer.core.validation.BadInputError` on a wrong shape, non-integer or
    out-of-range codes where available, infinities, or no available entry at all.
    """
    arr = np.asarray(x)
    if arr.ndim != 2:
        raise BadInputError(f"x must be a 2-D array (n_samples, n_features); got {arr.ndim} dimension(s).")
    if arr.shape[0] < 1 or arr.shape[1] < 1:
        raise BadInputError(f"x must have at least one row and one column; got shape {arr.shape}.")
    if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise BadInputError(f"x must hold numeric codes 0..V-1; got dtype {arr.dtype}.")
    values = arr.astype(float)
    if np.isinf(values).any():
        raise BadInputError("x holds infinite values; use NaN (or -1) for unknown entries.")
    known = ~np.isnan(values) & (values >= 0)
    avail = known if available is None else _bool_matrix(available, arr.shape, "available")
    if available is not None and np.any(avail & ~known):
        n_bad = int(np.sum(avail & ~known))
        raise BadInputError(f"{n_bad} entries are marked available but hold NaN or a negative code in x.")
    if not avail.any():
        raise BadInputError("x has no available entry: there is nothing to learn from.")
    vals = values[avail]
    if np.any(vals != np.round(vals)):
        raise BadInputError("x must hold integer codes 0..V-1 where available; found non-integer values.")
    top = int(vals.max())
    if n_values is None:
        n_values = max(2, top + 1)
    check_int("n_values", n_values, 2)
    if top >= n_values:
        raise BadInputError(f"x holds the code {top}, outside 0..{n_values - 1} for n_values={n_values}.")
    resp = avail.copy() if response is None else _bool_matrix(response, arr.shape, "response")
    codes = np.where(avail, np.nan_to_num(values, nan=-1.0), -1.0).astype(np.int64)
    onehot = np.zeros(arr.shape + (n_values,))
    n_idx, d_idx = np.nonzero(avail)
    onehot[n_idx, d_idx, codes[n_idx, d_idx]] = 1.0
    for a in (codes, resp, avail, onehot):
        a.setflags(write=False)
    return RatingData(codes=codes, response=resp, available=avail, n_values=int(n_values), onehot=onehot)


def stack(*data: RatingData) -> RatingData:
    """The rows of several :class:`RatingData` one after another (e.g. training users then hold-out users).

    Every argument must be a :class:`RatingData` with the same ``n_features`` and ``n_values``; raises
    :class:`~explorer.core.validation.BadInputError` otherwise or when nothing is given. The arrays of the
    result are new read-only copies."""
    if not data:
        raise BadInputError("stack needs at least one RatingData.")
    for i, d in enumerate(data):
        if not isinstance(d, RatingData):
            raise BadInputError(f"stack: argument {i} is a {type(d).__name__}, not a RatingData (use prepare).")
    D, V = data[0].n_features, data[0].n_values
    for i, d in enumerate(data[1:], start=1):
        if (d.n_features, d.n_values) != (D, V):
            raise BadInputError(f"stack: argument {i} has n_features={d.n_features}, n_values={d.n_values}; "
                                f"argument 0 has n_features={D}, n_values={V}.")
    parts = [np.concatenate([getattr(d, name) for d in data], axis=0)
             for name in ("codes", "response", "available", "onehot")]
    for a in parts:
        a.setflags(write=False)
    codes, resp, avail, onehot = parts
    return RatingData(codes=codes, response=resp, available=avail, n_values=V, onehot=onehot)
