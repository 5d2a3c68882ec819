r"""Rating-prediction metrics of Marlin chapter 5: NMAE (with an explicit normaliser) and NDCG (eq. 5.8.1).

* :func:`nmae`: the mean absolute error of point predictions divided by a normaliser. The thesis
  defines NMAE only by reference (Marlin's MSc thesis, digest section 6.1); the default here is
  that reference's: E[MAE] of a uniformly random guess against uniformly distributed ratings on
  1..V, :math:`E|X - Y| = (V^2 - 1) / (3V)` for independent uniform X, Y on V levels (1.6 for
  V = 5), so a uniform random guess scores 1 in expectation. Jester's own site divides by the
  rating range instead (``normaliser=n_values - 1``); any explicit value is accepted.
* :func:`ndcg`: per-user normalised discounted cumulative gain, eq. 5.8.1,
  :math:`\sum_i (2^{x_i} - 1)/\log(1 + \hat\pi_i) \,/\, \sum_i (2^{x_i} - 1)/\log(1 + \pi_i)`
  with ratings x = code + 1 in 1..V and ranks starting at 1 (the base of the log cancels).
  **Ties** in the predicted scores are handled deterministically and without favouring any item
  order: the items of a tie group share the *mean* of the discounts of the ranks the group occupies
  (the expected DCG over uniformly random tie-breaking, McSherry & Najork 2008). Ties among the
  true ratings need no rule (equal gains). Scores are compared exactly (no tolerance).
* :func:`predictive_median` (the point prediction for NMAE, section 5.4) and :func:`predictive_mean`
  (the ranking score for NDCG) of a (..., V) predictive distribution, in codes 0..V-1.
"""

from __future__ import annotations

import numpy as np

from explorer.core.validation import BadInputError, check_int

__all__ = ["expected_uniform_mae", "ndcg", "nmae", "predictive_mean", "predictive_median"]


def expected_uniform_mae(n_values: int) -> float:
    """E|X - Y| for X, Y independent and uniform on V levels: (V^2 - 1) / (3V) (1.6 for V = 5)."""
    check_int("n_values", n_values, 2)
    return (n_values ** 2 - 1) / (3.0 * n_values)


def _codes(value, name: str, n_values: int | None = None) -> np.ndarray:
    arr = np.asarray(value)
    if arr.size == 0:
        raise BadInputError(f"{name} is empty: there is nothing to score.")
    if not np.issubdtype(arr.dtype, np.number) or isinstance(arr.flat[0], (bool, np.bool_)):
        raise BadInputError(f"{name} must hold numeric codes; got dtype {arr.dtype}.")
    if not np.all(np.isfinite(arr)):
        raise BadInputError(f"{name} holds NaN or infinite values; score only the entries you predicted.")
    if n_values is not None:
        if np.any(arr != np.round(arr)) or arr.min() < 0 or arr.max() > n_values - 1:
            raise BadInputError(f"{name} must hold integer codes 0..{n_values - 1}; got values in "
                                f"[{arr.min()}, {arr.max()}].")
    return arr


def nmae(pred_codes, true_codes, *, n_values: int = 5, normaliser: float | None = None) -> float:
    """Normalised mean absolute error: mean ``abs(pred - true) / normaliser``.

    ``pred_codes`` may be fractional (e.g. a predictive mean); ``true_codes`` must be integer codes
    0..V-1 of the same shape. ``normaliser`` defaults to :func:`expected_uniform_mae` (n_values),
    the expected MAE of uniform random guessing against uniform ratings (see the module docstring).
    """
    check_int("n_values", n_values, 2)
    true = _codes(true_codes, "true_codes", n_values)
    pred = _codes(pred_codes, "pred_codes")
    if pred.shape != true.shape:
        raise BadInputError(f"pred_codes has shape {pred.shape} but true_codes has {true.shape}; they must match.")
    if normaliser is None:
        normaliser = expected_uniform_mae(n_values)
    if not (np.isscalar(normaliser) and np.isfinite(normaliser) and normaliser > 0):
        raise BadInputError(f"normaliser must be a positive number; got {normaliser!r}.")
    return float(np.mean(np.abs(pred.astype(float) - true)) / normaliser)


def _dcg_tied(scores: np.ndarray, gains: np.ndarray) -> float:
    """DCG with the items ranked by decreasing score, tie groups sharing their mean discount."""
    t = scores.size
    discount = 1.0 / np.log2(np.arange(2, t + 2))  # rank i (1-based) -> 1 / log2(1 + i)
    order = np.argsort(-scores, kind="stable")
    sorted_scores = scores[order]
    total = 0.0
    start = 0
    while start < t:
        stop = start + 1
        while stop < t and sorted_scores[stop] == sorted_scores[start]:
            stop += 1
        total += gains[order[start:stop]].sum() * discount[start:stop].mean()
        start = stop
    return total


def _ndcg_one(scores: np.ndarray, codes: np.ndarray) -> float:
    gains = 2.0 ** (codes + 1.0) - 1.0
    ideal = np.sort(gains)[::-1] @ (1.0 / np.log2(np.arange(2, gains.size + 2)))
    return float(_dcg_tied(scores.astype(float), gains) / ideal)


def ndcg(scores, true_codes, *, groups=None, n_values: int | None = None):
    """NDCG of eq. 5.8.1 (higher is better, 1 = the true order).

    * 1-D ``scores`` and ``true_codes`` (one user's T test items): returns a float.
    * 2-D arrays (n_users, T): one user per row, returns an (n_users,) array.
    * ``groups`` (1-D labels, same length as 1-D inputs): one user per label, returns an array in
      the order of ``np.unique(groups)``.

    ``true_codes`` are codes 0..V-1 (the gain uses the rating code + 1, so 2^rating - 1 >= 1 and the
    ideal DCG is never 0). Average the returned per-user values for the thesis's figure.
    """
    if n_values is not None:
        check_int("n_values", n_values, 2)
    true = _codes(true_codes, "true_codes", n_values)
    if n_values is None and (np.any(true != np.round(true)) or true.min() < 0):
        raise BadInputError("true_codes must hold non-negative integer codes (rating - 1).")
    sc = _codes(scores, "scores")
    if sc.shape != true.shape:
        raise BadInputError(f"scores has shape {sc.shape} but true_codes has {true.shape}; they must match.")
    if groups is not None:
        g = np.asarray(groups)
        if sc.ndim != 1 or g.shape != sc.shape:
            raise BadInputError("groups needs 1-D scores and true_codes and one label per entry.")
        labels, inverse = np.unique(g, return_inverse=True)
        order = np.argsort(inverse, kind="stable")
        bounds = np.searchsorted(inverse[order], np.arange(labels.size + 1))
        return np.array([_ndcg_one(sc[order[a:b]], true[order[a:b]]) for a, b in zip(bounds[:-1], bounds[1:])])
    if sc.ndim == 1:
        return _ndcg_one(sc, true)
    if sc.ndim == 2:
        return np.array([_ndcg_one(sc[i], true[i]) for i in range(sc.shape[0])])
    raise BadInputError(f"scores must be 1-D (one user) or 2-D (users x items); got {sc.ndim} dimensions.")


def _proba(proba) -> np.ndarray:
    p = np.asarray(proba, dtype=float)
    if p.ndim < 1 or p.shape[-1] < 2:
        raise BadInputError(f"proba must have a last axis of V >= 2 values; got shape {p.shape}.")
    if not np.all(np.isfinite(p)) or np.any(p < 0):
        raise BadInputError("proba must hold finite non-negative probabilities.")
    if not np.allclose(p.sum(-1), 1.0, atol=1e-6):
        raise BadInputError("proba must sum to one over its last axis (the V rating values).")
    return p


def predictive_median(proba) -> np.ndarray:
    """The median code of each (..., V) distribution: the smallest v with P(x <= v) >= 1/2.

    A tolerance of 1e-9 on the cumulative sum makes an exact 1/2 (e.g. (0.5, 0.5)) pick the lower
    value regardless of rounding. Returns int64 codes of shape proba.shape[:-1].
    """
    p = _proba(proba)
    cdf = np.cumsum(p, axis=-1)
    return np.minimum((cdf < 0.5 - 1e-9).sum(-1), p.shape[-1] - 1).astype(np.int64)


def predictive_mean(proba) -> np.ndarray:
    """The mean code sum_v v P(x = v) (v = 0..V-1) of each (..., V) distribution (float)."""
    p = _proba(proba)
    return p @ np.arange(p.shape[-1], dtype=float)
