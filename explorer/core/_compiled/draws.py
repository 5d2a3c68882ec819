r"""Compiled I-step of the data-augmentation chains (numba): each row's missing entries drawn from the component it
was given.

The I-step of :mod:`explorer.core.mixtures.data_augmentation` (and of the location model's chain,
:mod:`explorer.core.mixtures.location_augmentation`) draws a label :math:`z_i` per row, then
:math:`x_i^m \sim N(\mu_z^m - \Lambda_{mm}^{-1}\Lambda_{mo}(x_i^o - \mu_z^o),\ \Lambda_{mm}^{-1})` with
:math:`\Lambda = \Sigma_z^{-1}` (:math:`\Lambda_{mm}^{-1} = \Sigma_{mm} - \Sigma_{mo}\Sigma_{oo}^{-1}\Sigma_{om}`). The
reference builds every component's conditional for every row
(:class:`~explorer.core.gaussians.conditional.ConditionalMixture`) and keeps one; this pass works only on the
drawn component, over the rows in the compiled E-step's sorted layout (:class:`explorer.core._compiled.gmm.Layout`:
runs of one pattern): per run and component met, :math:`\Lambda_{mm}` is gathered, factored and inverted, and the
lower Cholesky factor :math:`C` of its inverse kept; per row, the conditional mean and :math:`C z` with the row's
standard normals ``Z[zoff[i]:zoff[i] + m]``, which the caller lays out in the reference's order so that both give
the same draws from the same generator.
"""

from __future__ import annotations

import numba
import numpy as np

from explorer.core._compiled import mark_loaded

__all__ = ["draw_missing", "warm_up"]

#: numba's fast-math flags of the E-step kernels (``gmm._FAST``; not imported: a kernel module that imports a
#: sibling must drop its cache when that sibling changes, and this one shares nothing else with it)
_FAST = {"nsz", "arcp", "contract", "reassoc"}


@numba.njit(cache=True, fastmath=_FAST)
def _cholesky(A, m, C):
    """The lower Cholesky factor of ``A[:m, :m]`` into ``C`` (its upper part zeroed). False when a pivot is not
    positive."""
    for a in range(m):
        for b in range(a + 1):
            acc = A[a, b]
            for c in range(b):
                acc -= C[a, c] * C[b, c]
            if a == b:
                if not acc > 0.0:
                    return False
                C[a, a] = np.sqrt(acc)
            else:
                C[a, b] = acc / C[b, b]
        for b in range(a + 1, m):
            C[a, b] = 0.0
    return True


@numba.njit(cache=True, fastmath=_FAST)
def _factor(P, mis, m, Q, C):
    """``Q`` = inverse of ``P[mis, mis]`` and ``C`` = the lower Cholesky factor of ``Q`` (both (m, m), top-left).
    Returns False when a block is not positive definite."""
    for a in range(m):  # the block
        for b in range(m):
            Q[a, b] = P[mis[a], mis[b]]
    if not _cholesky(Q, m, C):  # C = L, the block = L L'
        return False
    for a in range(m):  # L^{-1} (lower) into Q's lower triangle, row by row
        Q[a, a] = 1.0 / C[a, a]
        for b in range(a):
            acc = 0.0
            for c in range(b, a):
                acc -= C[a, c] * Q[c, b]
            Q[a, b] = acc / C[a, a]
    for a in range(m):  # the block's inverse L^{-T} L^{-1}: its entry (a, b), a <= b, parked in C[b, a]
        for b in range(a, m):
            acc = 0.0
            for c in range(b, m):
                acc += Q[c, a] * Q[c, b]
            C[b, a] = acc
    for a in range(m):
        for b in range(a + 1):
            Q[a, b] = C[a, b]
            Q[b, a] = C[a, b]
    return _cholesky(Q, m, C)


@numba.njit(cache=True, fastmath=_FAST)
def _draw_runs(X, run_start, mis_ptr, mis_idx, labels, means, prec, Z, zoff, out, Q, C, stamp, obs, r):
    """The drawn rows of the layout into ``out`` (layout order; observed entries copied). Returns -1, or the
    component whose missing block is not positive definite."""
    K, D = means.shape
    for k in range(K):
        stamp[k] = -1
    for g in range(run_start.size - 1):
        a, b = run_start[g], run_start[g + 1]
        m = mis_ptr[g + 1] - mis_ptr[g]
        for i in range(a, b):
            for j in range(D):
                out[i, j] = X[i, j]
        if m == 0:
            continue
        mis = mis_idx[mis_ptr[g]:mis_ptr[g + 1]]
        no = 0
        p = 0
        for j in range(D):  # the observed columns of the run
            if p < m and mis[p] == j:
                p += 1
            else:
                obs[no] = j
                no += 1
        for i in range(a, b):
            k = labels[i]
            if stamp[k] != g:
                if not _factor(prec[k], mis, m, Q[k], C[k]):
                    return k
                stamp[k] = g
            for p in range(m):  # r = Lambda_mo (x_o - mu_o)
                acc = 0.0
                row = mis[p]
                for t in range(no):
                    j = obs[t]
                    acc += prec[k, row, j] * (X[i, j] - means[k, j])
                r[p] = acc
            base = zoff[i]
            for p in range(m):
                v = means[k, mis[p]]
                for c in range(m):
                    v -= Q[k, p, c] * r[c]
                for c in range(p + 1):
                    v += C[k, p, c] * Z[base + c]
                out[i, mis[p]] = v
    return -1


def draw_missing(layout, labels, means, precision, Z, zoff):
    """Rows of ``layout`` (its first ``n_fit`` rows, in layout order) with their missing entries drawn from component
    ``labels[i]`` (layout order), the row's normals at ``Z[zoff[i]:]``. Returns (n_fit, D); raises
    ``ValueError(k)`` when component k's missing block is not positive definite."""
    n, (K, D) = layout.n_fit, means.shape
    mmax = max(layout.max_missing, 1)
    out = np.empty((n, D))
    status = _draw_runs(layout.X, layout.run_start, layout.mis_ptr, layout.mis_idx,
                        np.ascontiguousarray(labels, dtype=np.int64), np.ascontiguousarray(means, dtype=float),
                        np.ascontiguousarray(precision, dtype=float), np.ascontiguousarray(Z, dtype=float),
                        np.ascontiguousarray(zoff, dtype=np.int64), out, np.zeros((K, mmax, mmax)),
                        np.zeros((K, mmax, mmax)), np.empty(K, dtype=np.int64), np.empty(D, dtype=np.int64),
                        np.empty(mmax))
    if status >= 0:
        raise ValueError(int(status))
    mark_loaded("draws")
    return out


def warm_up() -> None:
    """Compile (or load from numba's cache) the kernels on a tiny problem: three rows of two columns, the first
    two each missing one entry (the compiled E-step's layout, as :class:`explorer.core._compiled.gmm.Layout` makes
    it)."""
    X = np.array([[0.0, 1.0], [1.0, 0.0], [0.5, 0.5]])
    out = np.empty((3, 2))
    scratch = (np.zeros((1, 1, 1)), np.zeros((1, 1, 1)), np.empty(1, dtype=np.int64), np.empty(2, dtype=np.int64),
               np.empty(1))
    _draw_runs(X, np.array([0, 1, 2, 3]), np.array([0, 1, 2, 2]), np.array([0, 1]), np.zeros(3, dtype=np.int64),
               np.zeros((1, 2)), np.eye(2)[None], np.zeros(2), np.array([0, 1, 2]), out, *scratch)
    mark_loaded("draws")
