r"""Compiled E-step and M-step statistics of EM for factor analysis / PPCA with missing values (numba).

The design of em_gmm's compiled E-step (:mod:`explorer.core._compiled.gmm`), for one factor analyser
(:mod:`explorer.core.factor.factor_analysis`): the fitted rows in the sorted layout (``_kernels.Layout``:
rows sharing a missingness pattern are contiguous, a **run**; here one run per distinct pattern),
cache-sized blocks, BLAS for every N x D x q product, and one compiled pass per block:

E-step (:func:`estep`), per block

1. ``_kernels._center``: :math:`r_i = x_i - \mu` with the missing entries 0 (into ``E``);
2. BLAS: :math:`b_i = W^\top\Psi^{-1} r_i` for the whole block (``E @ (W / psi)``, B x D x q);
3. ``_fa_block`` (one compiled pass): at the first row of every run, the q x q precision
   :math:`A_o = I + W_o^\top\Psi_o^{-1}W_o` (summed over the observed entries, or as
   :math:`A - W_m^\top\Psi_m^{-1}W_m` from the full :math:`A` when fewer entries are missing than
   observed: :math:`O(\min(|o|, |m|)\, q^2)`), its Cholesky factor (kept per run), :math:`\log|A_o|`
   and the posterior covariance :math:`A_o^{-1}` written into the pattern's slot of ``latent_cov``;
   then per row two triangular solves, :math:`E[z \mid x_o] = A_o^{-1}b_i` written into the
   caller-order ``latent_mean``, and the observed-data log-likelihood (Woodbury and the determinant
   lemma, as :func:`explorer.core.factor.fa_conditional._posterior`).

M-step statistics (:func:`moments`), from a state's ``latent_mean`` / ``latent_cov``: one compiled
pass over the runs gathers :math:`\tilde z_i = [E z_i; 1]` into the layout order (``Z``, (n_fit, q+1))
and sums, per run g, :math:`G_g = \sum_{i \in g}\tilde z_i\tilde z_i^\top + n_g\,[A_g^{-1}]`; then
:math:`T = \sum_g G_g` and, for every column d, :math:`S_d = \sum_{g:\, d \text{ missing}} G_g`
(the missing-entry moments of :func:`explorer.core.factor.factor_analysis._missing_moments`) without any
per-row (N, q+1, q+1) or (N, D, q) temporary; the observed part :math:`X^\top Z` is one BLAS GEMM and
:math:`\sum_i x_{id}^2` over the observed entries a constant of the workspace.

All scratch buffers live in an :class:`FAWorkspace`, allocated once per (data, q) and reused by every
step (the states' arrays are always new).
"""

from __future__ import annotations

import threading

import numba
import numpy as np

from explorer.core._compiled import drop_stale_cache, mark_loaded
from explorer.core._compiled.gmm import _FAST, BLOCK_BYTES, LOG_2PI, Layout, _center

__all__ = ["FAWorkspace", "estep", "moments", "warm_up"]

# numba keys this module's cache on this file only; its kernels inline gmm's, so an edit of gmm.py must drop it
drop_stale_cache(__file__, "gmm")


@numba.njit(cache=True, fastmath=_FAST)
def _factor_run(W, ipsi, Afull, mis, m, obs_mark, A):
    """A = I + W_o^T Psi_o^-1 W_o of one pattern (``mis``: its m missing columns), Cholesky in place
    (lower triangle of ``A``). Returns log|A_o|, or nan when a pivot is not positive."""
    D, q = W.shape
    if m < D - m:  # fewer missing than observed entries: subtract the missing part from the full A
        for k in range(q):
            for l in range(k + 1):
                A[k, l] = Afull[k, l]
        for p in range(m):
            d = mis[p]
            w = ipsi[d]
            for k in range(q):
                wk = W[d, k] * w
                for l in range(k + 1):
                    A[k, l] -= wk * W[d, l]
    else:
        for k in range(q):
            for l in range(k + 1):
                A[k, l] = 1.0 if k == l else 0.0
        for p in range(m):
            obs_mark[mis[p]] = False
        for d in range(D):
            if obs_mark[d]:
                w = ipsi[d]
                for k in range(q):
                    wk = W[d, k] * w
                    for l in range(k + 1):
                        A[k, l] += wk * W[d, l]
        for p in range(m):
            obs_mark[mis[p]] = True
    logdet = 0.0
    for j in range(q):
        s = A[j, j]
        for c in range(j):
            s -= A[j, c] * A[j, c]
        if not (s > 0.0):
            return np.nan
        s = np.sqrt(s)
        A[j, j] = s
        logdet += 2.0 * np.log(s)
        for i in range(j + 1, q):
            t = A[i, j]
            for c in range(j):
                t -= A[i, c] * A[j, c]
            A[i, j] = t / s
    return logdet


@numba.njit(cache=True, fastmath=_FAST)
def _cov_from_chol(L, out, Li):
    """out = A^{-1} = L^{-T} L^{-1} for the lower Cholesky factor ``L`` (``Li`` scratch for L^{-1})."""
    q = L.shape[0]
    for j in range(q):
        for i in range(q):
            Li[i, j] = 0.0
        Li[j, j] = 1.0 / L[j, j]
        for i in range(j + 1, q):
            s = 0.0
            for c in range(j, i):
                s -= L[i, c] * Li[c, j]
            Li[i, j] = s / L[i, i]
    for k in range(q):
        for l in range(k + 1):
            s = 0.0
            for j in range(k, q):
                s += Li[j, k] * Li[j, l]
            out[k, l] = s
            out[l, k] = s


@numba.njit(cache=True, fastmath=_FAST)
def _fa_block(r0, r1, run_start, mis_ptr, mis_idx, g0, W, ipsi, logpsi, logpsi_sum, Afull, E, Bm,
              Lrun, ldrun, run_pattern, perm, latent_mean, latent_cov, rowll, obs_mark, Li, t):
    """Rows r0..r1 of the layout (run g0 holds row r0): per run factor (at its first row), per row solve and
    log-likelihood. Returns (sum of the rows' log-likelihoods, status): status -1 fine, else the run whose
    latent precision is not positive definite."""
    D, q = W.shape
    total = 0.0
    g = g0
    while g < run_start.size - 1 and run_start[g] < r1:
        a = max(run_start[g], r0)
        b = min(run_start[g + 1], r1)
        m = mis_ptr[g + 1] - mis_ptr[g]
        mis = mis_idx[mis_ptr[g]:mis_ptr[g + 1]]
        L = Lrun[g]
        if run_start[g] >= r0:  # first rows of this run: its per-pattern work, once
            ld = _factor_run(W, ipsi, Afull, mis, m, obs_mark, L)
            if np.isnan(ld):
                return 0.0, g
            ldrun[g] = ld
            _cov_from_chol(L, latent_cov[run_pattern[g]], Li)
        lps = logpsi_sum
        for p in range(m):
            lps -= logpsi[mis[p]]
        const = (D - m) * LOG_2PI + lps + ldrun[g]
        for i in range(a, b):
            ii = i - r0
            rr = 0.0
            for j in range(D):
                e = E[0, ii, j]
                rr += e * e * ipsi[j]
            tt = 0.0
            for k in range(q):  # L t = b
                s = Bm[ii, k]
                for c in range(k):
                    s -= L[k, c] * t[c]
                s /= L[k, k]
                t[k] = s
                tt += s * s
            for k in range(q - 1, -1, -1):  # L^T y = t
                s = t[k]
                for c in range(k + 1, q):
                    s -= L[c, k] * t[c]
                t[k] = s / L[k, k]
            row = perm[i]
            for k in range(q):
                latent_mean[row, k] = t[k]
            v = -0.5 * (const + rr - tt)
            rowll[row] = v
            total += v
        g += 1
    return total, -1


@numba.njit(cache=True, fastmath=_FAST)
def _fa_moments(latent_mean, latent_cov, perm, run_start, run_pattern, mis_ptr, mis_idx, Z, S, T, loc):
    """Z[i] = [latent_mean[perm[i]], 1]; per run G = sum z~ z~^T + n_g [cov]; T = sum_g G, S[d] += G for the
    columns d missing in the run. S (D, p, p) and T (p, p) are zeroed here."""
    p = Z.shape[1]
    q = p - 1
    for d in range(S.shape[0]):
        for k in range(p):
            for l in range(p):
                S[d, k, l] = 0.0
    for k in range(p):
        for l in range(p):
            T[k, l] = 0.0
    for g in range(run_start.size - 1):
        for k in range(p):
            for l in range(p):
                loc[k, l] = 0.0
        for i in range(run_start[g], run_start[g + 1]):
            row = perm[i]
            for k in range(q):
                Z[i, k] = latent_mean[row, k]
            Z[i, q] = 1.0
            for k in range(p):
                zk = Z[i, k]
                for l in range(k + 1):
                    loc[k, l] += zk * Z[i, l]
        n_g = run_start[g + 1] - run_start[g]
        C = latent_cov[run_pattern[g]]
        for k in range(q):
            for l in range(k + 1):
                loc[k, l] += n_g * C[k, l]
        for k in range(p):
            for l in range(k):
                loc[l, k] = loc[k, l]
        for k in range(p):
            for l in range(p):
                T[k, l] += loc[k, l]
        for c in range(mis_ptr[g], mis_ptr[g + 1]):
            Sd = S[mis_idx[c]]
            for k in range(p):
                for l in range(p):
                    Sd[k, l] += loc[k, l]


class FAWorkspace:
    """Scratch buffers of the compiled FA EM for one layout and q (reused by every step of a fit).

    ``run_pattern`` (n_runs,): the pattern index (``FAData.row_pattern``) of every run; ``n_rows`` the
    number of rows of the data (the fitted ones first in the layout)."""

    def __init__(self, layout: Layout, n_factors: int, run_pattern, n_rows: int, block_rows: int | None = None):
        D, q, G = layout.n_features, int(n_factors), layout.n_runs
        if block_rows is None:
            block_rows = BLOCK_BYTES // (8 * max(D, 1))
        self.block_rows = int(max(64, min(block_rows, 8192, max(layout.n_fit, 1))))
        B = self.block_rows
        self.layout, self.n_factors, self.n_rows = layout, q, int(n_rows)
        self.run_pattern = np.ascontiguousarray(run_pattern, dtype=np.int64)
        self.E = np.empty((1, B, D))
        self.Bm = np.empty((B, q))
        self.Lrun = np.zeros((G, q, q))
        self.ldrun = np.zeros(G)
        self.obs_mark = np.ones(D, dtype=np.bool_)
        self.Li = np.zeros((q, q))
        self.t = np.zeros(q)
        self.Z = np.empty((layout.n_fit, q + 1))
        self.S = np.empty((D, q + 1, q + 1))
        self.T = np.empty((q + 1, q + 1))
        self.loc = np.empty((q + 1, q + 1))
        X = layout.X[: layout.n_fit]
        self.ex2_observed = np.einsum("nd,nd->d", X, X)  # 0 at missing entries
        counts = np.diff(layout.mis_ptr)
        self.n_missing = np.bincount(layout.mis_idx, weights=np.repeat(np.diff(layout.run_start), counts),
                                     minlength=D).astype(float)
        self.blocks = np.arange(0, layout.n_fit, B, dtype=np.int64)
        self.block_run = (np.searchsorted(layout.run_start, self.blocks, side="right") - 1).astype(np.int64)
        self.lock = threading.Lock()

    def __reduce__(self):  # scratch: a copy gets fresh buffers
        return (FAWorkspace, (self.layout, self.n_factors, self.run_pattern, self.n_rows, self.block_rows))


class LatentNotPositiveDefinite(Exception):
    """The latent precision of run ``args[0]`` is not positive definite."""


def estep(ws: FAWorkspace, mean, loadings, psi, n_patterns: int):
    """E-step at (mean, loadings, psi): ``(latent_mean (n_rows, q), latent_cov (n_patterns, q, q), rowll
    (n_rows,), total)`` in the caller's row order; rows outside the layout's fit get the prior (mean 0,
    covariance I) and log-likelihood 0. Raises :class:`LatentNotPositiveDefinite`."""
    lay = ws.layout
    q = ws.n_factors
    mean = np.ascontiguousarray(mean, dtype=float)
    W = np.ascontiguousarray(loadings, dtype=float)
    psi = np.ascontiguousarray(psi, dtype=float)
    ipsi = 1.0 / psi
    logpsi = np.log(psi)
    Wp = W * ipsi[:, None]
    Afull = np.eye(q) + W.T @ Wp
    latent_mean = np.zeros((ws.n_rows, q))
    latent_cov = np.empty((n_patterns, q, q))
    latent_cov[:] = np.eye(q)  # patterns outside the fit: nothing observed, the prior
    rowll = np.zeros(ws.n_rows)
    means = mean[None]
    total = 0.0
    for b, r0 in enumerate(ws.blocks):
        r1 = min(r0 + ws.block_rows, lay.n_fit)
        nb = r1 - r0
        g0 = ws.block_run[b]
        _center(lay.X, r0, r1, means, lay.run_start, lay.mis_ptr, lay.mis_idx, g0, ws.E)
        np.matmul(ws.E[0, :nb], Wp, out=ws.Bm[:nb])
        part, status = _fa_block(r0, r1, lay.run_start, lay.mis_ptr, lay.mis_idx, g0, W, ipsi, logpsi,
                                 float(logpsi.sum()), Afull, ws.E, ws.Bm, ws.Lrun, ws.ldrun, ws.run_pattern,
                                 lay.perm, latent_mean, latent_cov, rowll, ws.obs_mark, ws.Li, ws.t)
        if status >= 0:
            raise LatentNotPositiveDefinite(status)
        total += part
    mark_loaded("factor")
    return latent_mean, latent_cov, rowll, total


def moments(ws: FAWorkspace, latent_mean, latent_cov):
    """The M-step's sums from an E-step: ``(T (p, p), num (D, p) observed part X^T Z, S (D, p, p))`` with
    p = q + 1 (``S`` is the workspace's buffer: use it before the next call)."""
    lay = ws.layout
    _fa_moments(np.ascontiguousarray(latent_mean, dtype=float), np.ascontiguousarray(latent_cov, dtype=float),
                lay.perm, lay.run_start, ws.run_pattern, lay.mis_ptr, lay.mis_idx, ws.Z, ws.S, ws.T, ws.loc)
    num = lay.X[: lay.n_fit].T @ ws.Z
    return ws.T.copy(), num, ws.S


def warm_up() -> None:
    """Compile (empty numba cache) or load (filled cache) every kernel, on a tiny problem."""
    X = np.array([[0.5, 0.0, 1.0], [0.0, 1.0, 2.0], [1.0, 2.0, 0.0]])
    missing = np.array([[False, False, False], [True, False, False], [False, False, True]])
    lay = Layout(np.where(missing, 0.0, X), missing, 3, np.arange(3))
    ws = FAWorkspace(lay, 1, np.arange(3), 3)
    y, cov, _, _ = estep(ws, np.zeros(3), np.ones((3, 1)), np.ones(3), 3)
    moments(ws, y, cov)
