r"""The covariance-side E-step: factor each pattern's observed block instead of the missing block of the precision.

The precision-side kernels (:func:`explorer.core.gaussians.gaussian.observed_gaussian` and the compiled pass of
:mod:`explorer.core._compiled.gmm`) factor the missing block of the precision, an m x m matrix per pattern and
component, and add an m x m conditional covariance per pattern to the M-step's scatter. When most of a row is
missing (m > D - m), the observed block is the smaller one. With :math:`z_i = E_o \Sigma_{oo}^{-1}(x_o - \mu_o)`
(embedded in D coordinates, 0 on the missing ones) and :math:`Q = \sum_i h_i\, E_o \Sigma_{oo}^{-1} E_o^\top`:

* the completion minus the mean is :math:`\tilde x_i - \mu = \Sigma z_i` (on the observed coordinates
  :math:`\Sigma_{oo}\Sigma_{oo}^{-1}(x_o - \mu_o) = x_o - \mu_o`; on the missing ones the conditional mean
  :math:`\Sigma_{mo}\Sigma_{oo}^{-1}(x_o - \mu_o)`);
* the observed Mahalanobis distance is :math:`(x_o - \mu_o)^\top z_{i,o}`, and :math:`\log|\Sigma_{oo}|` comes from
  the factor;
* the conditional covariance embedded in D x D is :math:`\Sigma - \Sigma E_o\Sigma_{oo}^{-1}E_o^\top\Sigma` (its
  observed rows and columns vanish), so the statistics of :mod:`explorer.core.mixtures.suffstats` about
  :math:`c = \mu` are :math:`S = \Sigma Z^\top h` and
  :math:`T = \Sigma\,(Z^\top H Z - Q)\,\Sigma + N\Sigma` (EM) or :math:`\Sigma Z^\top H Z \Sigma` (the "naive"
  variant without conditional covariances).

Per pattern and component the work is one o x o Cholesky factor and inverse (o = D - m observed entries) instead
of the m x m ones, plus two D x D x D products per component and step. It is the same E-step: the tests compare
its statistics with the other kernels' to 1e-10. Round-off grows with the condition number of
:math:`\Sigma_{oo}` (the observed coordinates are reproduced through :math:`\Sigma\Sigma_{oo}^{-1}`), as the
precision side's grows with that of :math:`\Sigma`. :func:`explorer.core.mixtures.suffstats.choose_strategy`
picks this kernel (``strategy="covariance"``) when its factorisations cost less than the precision side's.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from explorer.core.gaussians.gaussian import LOG_2PI, cholesky, cholesky_inverse
from explorer.core.gaussians.patterns import MissingPatterns

__all__ = ["covariance_side_estep"]

#: Groups whose rows outnumber their distinct patterns by this factor multiply per pattern (a loop) instead of
#: gathering one o x o inverse per row.
_LOOP_RATIO = 4


def _inverse_blocks(cov: np.ndarray, flat: np.ndarray):
    """The lower triangle of :math:`\\Sigma_{oo}^{-1}` (n_u, o, o; zeros above) and :math:`\\log|\\Sigma_{oo}|`
    (n_u,) of every pattern of a group, from the flat indices (n_u, o, o) of its observed blocks in ``cov``."""
    block = np.take(cov.ravel(), flat)
    L = cholesky(block, what="observed-block covariance")
    logdet = 2.0 * np.log(np.diagonal(L, axis1=-2, axis2=-1)).sum(axis=-1)
    return cholesky_inverse(L, lower_only=True), logdet


def _symmetric_times(low: np.ndarray, d: np.ndarray) -> np.ndarray:
    """``A @ d`` per row for symmetric ``A`` given by its lower triangle ``low`` (n, o, o) and vectors ``d`` (n, o)."""
    diag = np.diagonal(low, axis1=-2, axis2=-1)
    return np.einsum("nij,nj->ni", low, d) + np.einsum("nji,nj->ni", low, d) - diag * d


def covariance_side_estep(Xf, patterns: MissingPatterns, weights, means, covariances, *, exact: bool = True,
                          log_offset=None):
    """One E-step of EM (full covariances) by the covariance side: ``(nk, first, second, ll_total, resp, row_ll)``.

    Parameters and results as :func:`explorer.core.mixtures.suffstats.estep_statistics` (statistics about
    ``shift = means``, rows with nothing observed not counted, their log-likelihood 0), unpacked: ``nk`` (K,),
    ``first`` (K, D), ``second`` (K, D, D), the total log-likelihood, the responsibilities (n, K) and the per-row
    log-likelihoods (n,), in the row order of ``Xf``; ``log_offset`` (n, K), optional, is added to the component
    log-densities before the responsibilities.

    Raises
    ------
    DegenerateCovarianceError
        A covariance, or one of its observed blocks, is singular or not positive definite.
    """
    Xf = np.asarray(Xf, dtype=float)
    weights = np.asarray(weights, dtype=float)
    means = np.asarray(means, dtype=float)
    covariances = np.asarray(covariances, dtype=float)
    n, D = Xf.shape
    K = means.shape[0]
    cholesky(covariances)  # the same refusal of a singular covariance as the other kernels
    ll = np.zeros((n, K))
    Z = np.zeros((K, n, D))
    blocks = []  # per group: (rows, inverse, flat (n_u, o, o) indices into D x D, per component inverses)
    for g in patterns.groups:
        obs, flat = g.observed_layout(D)
        o = obs.shape[1]
        rows = g.rows
        x_o = Xf[rows[:, None], obs[g.inverse]]  # (n_g, o)
        invs = []  # lower triangles of the inverses (the scatter below mirrors the sum once)
        loop = g.rows.size >= _LOOP_RATIO * g.n_unique
        for k in range(K):
            inv, logdet = _inverse_blocks(np.ascontiguousarray(covariances[k]), flat)
            d = x_o - means[k][obs[g.inverse]]
            if loop:
                w = np.empty_like(d)
                for u, pos in enumerate(g.members):
                    full = inv[u] + inv[u].T
                    full.flat[:: o + 1] *= 0.5
                    w[pos] = d[pos] @ full
            else:
                w = _symmetric_times(inv[g.inverse], d)
            quad = np.einsum("ni,ni->n", d, w)
            ll[rows, k] = -0.5 * (o * LOG_2PI + logdet[g.inverse] + quad)
            Z[k, rows[:, None], obs[g.inverse]] = w
            invs.append(inv)
        blocks.append((g, flat, invs))
    if log_offset is not None:
        ll += log_offset
    with np.errstate(divide="ignore"):  # a component with weight exactly 0 gets log-weight -inf
        weighted = ll + np.log(weights)
    norm = logsumexp(weighted, axis=1)
    with np.errstate(under="ignore"):
        resp = np.exp(weighted - norm[:, None])
    empty = patterns.empty_rows
    norm[empty] = 0.0
    h = resp.copy()
    h[empty] = 0.0
    nk = h.sum(axis=0)
    first = np.empty((K, D))
    second = np.empty((K, D, D))
    for k in range(K):
        cov = covariances[k]
        hk = h[:, k]
        first[k] = cov @ (hk @ Z[k])
        inner = (Z[k] * hk[:, None]).T @ Z[k]
        if exact:
            q = np.zeros(D * D)
            for g, flat, invs in blocks:
                mass = np.bincount(g.inverse, weights=hk[g.rows], minlength=g.n_unique)
                q += np.bincount(flat.ravel(), weights=(mass[:, None, None] * invs[k]).ravel(), minlength=D * D)
            # the observed columns are sorted, so each block's lower triangle lands in the lower triangle of q
            q = q.reshape(D, D)
            inner -= q + q.T - np.diag(np.diag(q))
        t = cov @ inner @ cov
        if exact:
            t += nk[k] * cov
        second[k] = 0.5 * (t + t.T)
    return nk, first, second, float(norm.sum()), resp, norm
