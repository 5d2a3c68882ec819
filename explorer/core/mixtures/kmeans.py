r"""k-means(++) on incomplete data, used to initialise the mixture models.

Distances use the observed coordinates only, rescaled to the full dimension (the *partial
distance* strategy, Dixon 1979):

.. math::  d^2(x_i, c) = \frac{D}{|o_i|} \sum_{d \in o_i} (x_{id} - c_d)^2 .

Centres are updated coordinate-wise from the observed entries of their members, so no value is
imputed before the mixture model sees the data. Seeding is k-means++ (Arthur & Vassilvitskii
2007) with the same distance. Rows with nothing observed are ignored.
"""

from __future__ import annotations

import numpy as np

__all__ = ["partial_sq_distances", "kmeans_plusplus", "kmeans"]


def partial_sq_distances(Xf: np.ndarray, observed: np.ndarray, centers: np.ndarray) -> np.ndarray:
    """Squared partial distances, shape (n_samples, n_centers); ``Xf`` has 0 at missing entries."""
    return _distances(_row_terms(Xf, observed), Xf, centers)


def _row_terms(Xf: np.ndarray, observed: np.ndarray):
    """The terms of the partial distances that do not depend on the centres: (sum_o x^2, the mask as floats,
    D / |o|)."""
    scale = Xf.shape[1] / np.maximum(observed.sum(axis=1, keepdims=True), 1)
    return (Xf**2).sum(axis=1, keepdims=True), observed.astype(float), scale


def _distances(terms, Xf: np.ndarray, centers: np.ndarray) -> np.ndarray:
    sq_rows, obs, scale = terms
    # sum_o (x - c)^2 = sum_o x^2 - 2 x.c + sum_o c^2, with the observed mask on every term
    sq = sq_rows - 2.0 * Xf @ centers.T + obs @ (centers**2).T
    return np.maximum(sq, 0.0) * scale


def kmeans_plusplus(Xf: np.ndarray, observed: np.ndarray, n_clusters: int, rng: np.random.Generator) -> np.ndarray:
    """k-means++ seeding on incomplete data; returns centres of shape (n_clusters, n_features).

    Missing coordinates of a chosen seed row are set to the observed column means.
    """
    n = Xf.shape[0]
    col_mean = (Xf * observed).sum(axis=0) / np.maximum(observed.sum(axis=0), 1)
    seeds = np.where(observed, Xf, col_mean)
    centers = np.empty((n_clusters, Xf.shape[1]))
    centers[0] = seeds[rng.integers(n)]
    terms = _row_terms(Xf, observed)
    closest = _distances(terms, Xf, centers[:1])[:, 0]
    for c in range(1, n_clusters):
        total = closest.sum()
        if total <= 0:  # every row coincides with a centre: fall back to a uniform choice
            idx = int(rng.integers(n))
        else:
            idx = int(rng.choice(n, p=closest / total))
        centers[c] = seeds[idx]
        closest = np.minimum(closest, _distances(terms, Xf, centers[c : c + 1])[:, 0])
    return centers


def kmeans(
    Xf: np.ndarray,
    observed: np.ndarray,
    n_clusters: int,
    rng: np.random.Generator,
    *,
    max_iter: int = 100,
    tol: float = 1e-6,
) -> tuple[np.ndarray, np.ndarray]:
    """Lloyd's k-means with partial distances; returns ``(centers, labels)``.

    Parameters
    ----------
    Xf : ndarray of shape (n_samples, n_features)
        Data with missing entries filled with 0 (their value is ignored).
    observed : ndarray of bool, same shape
        True where the entry is observed.
    """
    centers = kmeans_plusplus(Xf, observed, n_clusters, rng)
    terms = _row_terms(Xf, observed)  # computed once, not per iteration
    obs = terms[1]
    labels = np.zeros(Xf.shape[0], dtype=np.intp)
    rows = np.arange(Xf.shape[0])
    onehot = np.zeros((Xf.shape[0], n_clusters))
    for _ in range(max_iter):
        labels = _distances(terms, Xf, centers).argmin(axis=1)
        onehot[...] = 0.0
        onehot[rows, labels] = 1.0
        sums = onehot.T @ Xf
        counts = onehot.T @ obs
        new = np.where(counts > 0, sums / np.maximum(counts, 1), centers)
        shift = np.abs(new - centers).max()
        centers = new
        if shift <= tol * (1.0 + np.abs(centers).max()):
            break
    return centers, labels
