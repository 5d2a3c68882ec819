r"""Compiled kernels of the pattern tree (:mod:`explorer.core.mixtures.pattern_tree`): dense Prim, the
incremental Cholesky updates and small triangular solves (numba).

Moved here from the algorithm module, which imports this module lazily; the numpy references and the
tests that compare them stay there.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True)
def prim_dense(H):  # pragma: no cover - compiled
    """Prim's MST on a dense symmetric weight matrix; ties go to the lowest index. Returns parents (root 0: -1)."""
    p = H.shape[0]
    in_tree = np.zeros(p, dtype=np.bool_)
    best = np.full(p, np.inf)
    parent = np.full(p, -1, dtype=np.int64)
    if p == 0:
        return parent
    best[0] = 0.0
    for _ in range(p):
        v = -1
        bv = np.inf
        for i in range(p):
            if not in_tree[i] and best[i] < bv:
                bv = best[i]
                v = i
        in_tree[v] = True
        for i in range(p):
            if not in_tree[i] and H[v, i] < best[i]:
                best[i] = H[v, i]
                parent[i] = v
    return parent


@numba.njit(cache=True)
def chol_remove(U, perm, n, remove_pos, X):  # pragma: no cover - compiled
    r"""Remove the positions ``remove_pos`` (any order) of the active ``n x n`` factor ``U = L^T`` in place.

    Removing position :math:`k` leaves :math:`\begin{pmatrix}L_{11}&0\\ L_{31}&\tilde L_{33}\end{pmatrix}`
    with :math:`\tilde L_{33}\tilde L_{33}^T = L_{33}L_{33}^T + l_{32}l_{32}^T`: a rank-one *update*
    (stable), done by Givens rotations. Several removals are the same sequence of rank-one updates,
    highest position first in the paper's REF-IMPL; here they are fused into one sweep over the rows
    (lowest first), which gives the same factor: row ``j`` receives the rotations of every removed row
    above it, in order, and a removed row, once rotated, becomes the next update vector. One pass
    over the trailing block instead of one per removal. Later positions shift up; returns the new size.
    """
    removed = np.zeros(n, dtype=np.bool_)
    k0 = n
    for t in range(remove_pos.size):
        removed[remove_pos[t]] = True
        k0 = min(k0, remove_pos[t])
    if k0 >= n:
        return n
    for r in range(k0):  # rows above the first removal: drop the removed columns
        col = k0
        for i in range(k0, n):
            if not removed[i]:
                U[r, col] = U[r, i]
                col += 1
    nx = 0
    shift = 0
    for j in range(k0, n):
        for t in range(nx):
            a = U[j, j]
            b = X[t, j]
            rr = np.sqrt(a * a + b * b)
            c = a / rr
            s = b / rr
            U[j, j] = rr
            for i in range(j + 1, n):
                u = U[j, i]
                xi = X[t, i]
                U[j, i] = c * u + s * xi
                X[t, i] = c * xi - s * u
        if removed[j]:
            for i in range(j + 1, n):
                X[nx, i] = U[j, i]
            nx += 1
            shift += 1
        else:
            dst = j - shift
            col = dst
            for i in range(j, n):
                if not removed[i]:
                    U[dst, col] = U[j, i]
                    col += 1
            perm[dst] = perm[j]
    return n - shift


@numba.njit(cache=True)
def chol_update(U, perm, n, remove_pos, append_vars, cov, tol):  # pragma: no cover - compiled
    r"""Removals ``remove_pos`` (positions), then appends of the features ``append_vars`` as last rows of L.

    Appends solve :math:`L Y = \Sigma_{o,A}` by forward substitution, all appended columns in one pass
    over ``U`` (column-oriented), then factor the small block :math:`\Sigma_{AA} - Y^TY = C C^T`; the
    new factor is :math:`\begin{pmatrix}L&0\\Y^T&C\end{pmatrix}`, which is what appending the
    features one at a time (:math:`l = L^{-1}\Sigma_{o,v}`, :math:`\lambda = \sqrt{\sigma_{vv} - l^Tl}`)
    gives. Returns the new active size, or ``-1 - a`` when append ``a`` has a pivot
    :math:`\lambda^2 \le` ``tol`` (the conditional variance of that feature).
    """
    size = U.shape[0]
    if remove_pos.size:
        X = np.empty((remove_pos.size, size))
        n = chol_remove(U, perm, n, remove_pos, X)
    r = append_vars.size
    if r == 0:
        return n
    Y = np.empty((r, n))
    for t in range(r):
        v = append_vars[t]
        for i in range(n):
            Y[t, i] = cov[perm[i], v]
    for j in range(n):
        d = U[j, j]
        Uj = U[j, j + 1:n]
        for t in range(r):
            y = Y[t, j] / d
            Y[t, j] = y
            Yt = Y[t, j + 1:n]
            Yt -= y * Uj  # an array expression: vectorised (about 2x faster than the scalar loop here)
    for t in range(r):  # the new columns of U: (Y, C^T) by a Cholesky of the small block, column by column
        for j in range(n):
            U[j, n + t] = Y[t, j]
    for t in range(r):
        v = append_vars[t]
        for q in range(t + 1):
            w = append_vars[q]
            acc = cov[v, w]
            for j in range(n + q):
                acc -= U[j, n + t] * U[j, n + q]
            if q < t:
                U[n + q, n + t] = acc / U[n + q, n + q]
            else:
                if not acc > tol:
                    return -1 - t
                U[n + t, n + t] = np.sqrt(acc)
        perm[n + t] = v
    return n + r


@numba.njit(cache=True)
def tri_solve_numba(U, B, trans):  # pragma: no cover - compiled
    """With ``U = L^T`` upper (any layout): ``L^{-1} B`` (``trans`` False) or ``L^{-T} B = U^{-1} B``.

    Works on ``X^T`` (one right-hand side per contiguous row) with row slices of ``U``: the inner
    loops are array expressions / dot products that vectorise.
    """
    n, r = B.shape
    XT = np.ascontiguousarray(B.T)
    if not trans:  # U^T X = B: forward, column-oriented on U
        for j in range(n):
            d = U[j, j]
            Uj = U[j, j + 1:n]
            for t in range(r):
                y = XT[t, j] / d
                XT[t, j] = y
                Xt = XT[t, j + 1:n]
                Xt -= y * Uj
    else:  # U X = B: backward, row-oriented on U
        for i in range(n - 1, -1, -1):
            Ui = np.ascontiguousarray(U[i, i + 1:n])
            d = U[i, i]
            for t in range(r):
                XT[t, i] = (XT[t, i] - np.dot(Ui, XT[t, i + 1:n])) / d
    return np.ascontiguousarray(XT.T)
