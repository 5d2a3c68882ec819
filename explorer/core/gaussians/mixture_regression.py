r"""Regression from a joint Gaussian mixture: what :func:`explorer.core.gaussians.conditional.regression` leaves out.

Ghahramani & Jordan (1994) section 4.3 (digest section 2.9). For a split of the columns into inputs
``i`` and targets ``t``, :func:`explorer.core.gaussians.conditional.regression` returns the predictive mixture
:math:`p(x^t \mid x^i) = \sum_j h_j(x^i) N(x^t; m_j(x^i), S_j)` as a
:class:`~explorer.core.gaussians.conditional.ConditionalMixture`, whose ``mean()`` is the least-squares
estimate (eq. 13), ``sample()`` the stochastic estimator, ``variance()`` the predictive variance
and ``interval()`` equal-tailed bands (vectorised bisection on the mixture CDF). This module adds:

* :func:`mixture_cdf` and :func:`mixture_quantile`: the CDF
  :math:`F(x) = \sum_k w_k \Phi((x - m_k)/s_k)` of many 1-D Gaussian mixtures at once, and its
  inverse (bisection between the smallest and largest component quantile, vectorised over
  mixtures; :math:`F` is increasing, so the root is unique);
* :func:`target_mixtures`: the per-target 1-D marginal mixtures :math:`(w, m, s)` of every row;
* :func:`predictive_bands`: several equal-tailed bands at once;
* :func:`conditional_density`: the density of every target on a grid for one row (bimodal
  conditionals of one-to-many mappings, where the LSE falls between the modes).
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtr

from explorer.core.gaussians.conditional import ConditionalMixture, quantile_of_mixtures
from explorer.core.validation import BadInputError, check_level

__all__ = ["mixture_cdf", "mixture_quantile", "target_mixtures", "predictive_bands", "conditional_density"]


def _mixture_arrays(weights, means, sds):
    w = np.asarray(weights, dtype=float)
    m = np.asarray(means, dtype=float)
    s = np.asarray(sds, dtype=float)
    try:
        w, m, s = np.broadcast_arrays(w, m, s)
    except ValueError:
        raise BadInputError(f"weights {w.shape}, means {m.shape} and sds {s.shape} must broadcast to one shape "
                            "(..., n_components).") from None
    if w.ndim == 0 or w.shape[-1] == 0:
        raise BadInputError("A mixture needs at least one component (last axis).")
    if not (np.all(np.isfinite(w)) and np.all(np.isfinite(m)) and np.all(np.isfinite(s))):
        raise BadInputError("weights, means and sds must be finite.")
    if np.any(w < 0) or not np.allclose(w.sum(axis=-1), 1.0, atol=1e-8):
        raise BadInputError("weights must be non-negative and sum to one over the last axis.")
    if np.any(s <= 0):
        raise BadInputError("sds must be positive.")
    return w, m, s


def mixture_cdf(weights, means, sds, x) -> np.ndarray:
    """CDF of 1-D Gaussian mixtures, :math:`F(x) = \\sum_k w_k \\Phi((x - m_k)/s_k)`.

    Parameters
    ----------
    weights, means, sds : array-like of shape (..., n_components)
        One mixture per leading index.
    x : array-like broadcastable to ``(...)``

    Returns
    -------
    ndarray of shape ``(...)``
    """
    w, m, s = _mixture_arrays(weights, means, sds)
    xv = np.asarray(x, dtype=float)[..., None]
    return np.sum(w * ndtr((xv - m) / s), axis=-1)


def mixture_quantile(weights, means, sds, q) -> np.ndarray:
    """Quantile :math:`F^{-1}(q)` of 1-D Gaussian mixtures by vectorised bisection.

    Parameters
    ----------
    weights, means, sds : array-like of shape (..., n_components)
    q : float in (0, 1)

    Returns
    -------
    ndarray of shape ``(...)``; :math:`F` at it equals ``q`` to round-off.
    """
    q = check_level(q)
    w, m, s = _mixture_arrays(weights, means, sds)
    lead = w.shape[:-1]
    K = w.shape[-1]
    W, M, S = (a.reshape(-1, K).T for a in (w, m, s))
    return quantile_of_mixtures(W, M, S, q).reshape(lead)


def target_mixtures(cond: ConditionalMixture):
    """Per-target 1-D marginal mixtures of a regression (every entry of ``cond`` missing).

    Returns
    -------
    weights : ndarray (n_samples, K)
    means : ndarray (n_samples, n_targets, K)
    sds : ndarray (n_samples, n_targets, K)
        Component means :math:`m_j(x^i)_t` and standard deviations :math:`\\sqrt{(S_j)_{tt}}`.
    """
    if not isinstance(cond, ConditionalMixture):
        raise BadInputError(f"cond must be a ConditionalMixture (from regression()), got {type(cond).__name__}.")
    if not cond.missing.all():
        raise BadInputError("target_mixtures needs a regression mixture (every target missing in every row).")
    var = cond._conditional_variances()  # (K, n, T)
    means = np.moveaxis(np.asarray(cond.completions), 0, -1)
    sds = np.sqrt(np.moveaxis(var, 0, -1))
    return np.array(cond.weights), means, sds


def predictive_bands(cond: ConditionalMixture, levels=(0.5, 0.9, 0.95)) -> dict:
    """Equal-tailed bands of every target for several levels: ``{level: (lower, upper)}``, each of shape
    (n_samples, n_targets)."""
    out = {}
    for level in np.atleast_1d(levels):
        lv = check_level(level)
        out[lv] = cond.interval(lv)
    return out


def conditional_density(cond: ConditionalMixture, row: int, grid):
    """Density of every target of one row on a grid.

    Returns
    -------
    density : ndarray (n_targets, G)
    components : ndarray (n_targets, K, G)
        :math:`h_j N(x; m_{jt}, (S_j)_{tt})`, summing to ``density``.
    """
    g = np.asarray(grid, dtype=float).reshape(-1)
    if g.size == 0 or not np.all(np.isfinite(g)):
        raise BadInputError("grid must be a non-empty array of finite values.")
    dens, comps = [], []
    for t in range(cond.n_features):
        d, c = cond.marginal_pdf(row, t, g)
        dens.append(d)
        comps.append(c)
    return np.stack(dens), np.stack(comps)
