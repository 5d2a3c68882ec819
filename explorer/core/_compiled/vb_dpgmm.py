r"""Compiled E-step of the variational DP mixture (:mod:`explorer.core.mixtures.vb_dpgmm`), on the machinery of
:mod:`explorer.core._compiled.gmm` (numba, imported lazily).

The design is em_gmm's compiled E-step (see :mod:`explorer.core._compiled.gmm`): rows in the sorted layout
(runs of one missingness pattern), cache-sized blocks for all components at once, BLAS for the
N x D x D products, one compiled pass per block that factors the precision-side missing block
:math:`W_{k,mm}` once per run (``_ldl_all`` / ``_ldl_k`` of ``_kernels``), the conditional means
written in place, and the statistics accumulated without (K, N, D) completions. Here the precision is
:math:`W_k = \Psi_k^{-1}` and ``logdet`` is :math:`\log|\Psi_k|`, so the pass gives, per row and
component, :math:`\ell = \log N(x^o; m_k^o, \Psi_k^{oo})` and the Mahalanobis distance
:math:`d^\top(\Psi_k^{oo})^{-1}d`, from which every quantity of a VB step is an affine function with
coefficients that depend only on (number observed, component):

* :math:`\log\rho_{nk} = \ell + a^\rho_{ok} + b^\rho_{ok}\,\mathrm{maha} + E[\log\pi_k]`
  (the ``"corrected"`` and ``"augmented"`` responsibilities: digamma sums, :math:`|o|/\beta_k`,
  ... are in :math:`a^\rho`), then :math:`\tau` by log-sum-exp;
* the plug-in log-likelihood :math:`\log\sum_k E[\pi_k] N(x^o; m_k^o, \Psi_k^{oo}/\nu_k)`
  (:math:`a^{pl}_{ok} = \tfrac{|o|}2\log\nu_k`, :math:`b^{pl}_k = \tfrac12(1-\nu_k)`);
* the entropy of :math:`q(x^m|z=k)`: :math:`\tfrac{|m|}2(1+\log 2\pi-\log\nu_k) - \tfrac12\log|W_{k,mm}|`;
* the statistics of the next eta update about the means :math:`m_k`: :math:`N_k=\sum\tau`,
  :math:`\sum\tau e`, :math:`\sum\tau e e^\top` (one batched GEMM per block up to :data:`GEMM_MAX_D`
  features, else ``dsyrk``) with :math:`e = \tilde x - m_k`, and, after
  the last block, :math:`\sum_g W_{gk}\,\nu_k^{-1}W_{k,mm}^{-1}` (``_kernels._add_conditional``) for the
  ``"principled"`` update; the ``"thesis"`` update keeps :math:`e^m = 0` (:math:`\tilde x^m = m_k^m`).
"""

from __future__ import annotations

import numba
import numpy as np
from scipy.linalg.blas import dsyrk

from explorer.core._compiled import drop_stale_cache, mark_loaded
from explorer.core._compiled.gmm import (
    _FAST,
    _LOG_TINY,
    CHUNK_ROWS,
    LOG_2PI,
    M_SWITCH,
    SKIP_RTOL,
    NotPositiveDefinite,
    Workspace,
    _add_conditional,
    _center,
    _ldl_all,
    _ldl_k,
    _maha_rows,
)

__all__ = ["VBWorkspace", "estep", "warm_up"]

# numba keys this module's cache on this file only; its kernels inline gmm's, so an edit of gmm.py must drop it
drop_stale_cache(__file__, "gmm")

#: Up to this many features the second statistic is accumulated by one batched GEMM per block (all components
#: in one call: 1.5-1.7x faster than K ``dsyrk`` calls at D = 10-13, N = 250-2,000 rows per block, where call
#: overhead dominates); above it by ``dsyrk`` per component (half the flops).
GEMM_MAX_D = 32
#: Target bytes of one (K, block, D) buffer: larger blocks than em_gmm's (fewer Python-level calls per step;
#: Boston's size, 506 x 13 with K = 15, is one block: 0.69 against 0.80 ms per pass with two).
VB_BLOCK_BYTES = 1024 * 1024


@numba.njit(cache=True, fastmath=_FAST)
def _maha_component(P, mis, m, a, b, Ek, Rk, MH, k, L, LT, v, D, cond_mean):
    """Rows a..b of one run, one component, long missing blocks: MH[i, k] = Mahalanobis distance of the
    observed part, conditional means (minus the mean) into Ek when ``cond_mean``. Returns log|P_mm| or nan."""
    inv, wv, tt = v[0], v[1], v[2]
    ldmm = _ldl_k(P, mis, m, L, LT, inv, wv)
    if np.isnan(ldmm):
        return ldmm
    for i in range(a, b):
        q = 0.0
        for j in range(D):
            q += Ek[i, j] * Rk[i, j]
        for p in range(m):
            s = Rk[i, mis[p]]
            for c in range(p):
                s -= L[p, c] * tt[c]
            tt[p] = s
            q -= s * s * inv[p]
        MH[i, k] = q
        if cond_mean:
            for p in range(m - 1, -1, -1):
                s = tt[p] * inv[p]
                for c in range(p + 1, m):
                    s -= LT[p, c] * tt[c]
                tt[p] = s
            for p in range(m):
                Ek[i, mis[p]] = -tt[p]
    return ldmm


@numba.njit(cache=True, fastmath=_FAST)
def _solve_block_vb(r0, r1, run_start, mis_ptr, mis_idx, g0, prec, logdet, coef, elogpi, logw, cond_mean, E, R,
                    tau, W, nk, S, L, t, MH, inv, dv, sc, kv, rv, L1, LT1, v1):
    """One block: per run the factor, the Mahalanobis distances (MH) and conditional means, then per row
    tau (into ``tau``, layout order), the plug-in row log-likelihood, the entropy, N_k, the first statistic
    and E scaled by sqrt(tau). ``coef`` (5, D + 1, K): a_rho, b_rho, a_plugin, b_plugin, h (entropy constant)
    by number observed. Returns (plug-in log-likelihood of the block, entropy of the block, status)."""
    K, D = logdet.size, E.shape[2]
    ld = kv[0]
    rho, plug, hk = rv[0], rv[1], rv[2]
    tt, qv = np.empty((M_SWITCH, CHUNK_ROWS)), np.empty(CHUNK_ROWS)  # _maha_rows's scratch
    total = 0.0
    ent = 0.0
    g = g0
    while g < run_start.size - 1 and run_start[g] < r1:
        a = max(run_start[g], r0) - r0
        b = min(run_start[g + 1], r1) - r0
        m = mis_ptr[g + 1] - mis_ptr[g]
        o = D - m
        mis = mis_idx[mis_ptr[g]:mis_ptr[g + 1]]
        if m >= M_SWITCH:
            for k in range(K):
                v = _maha_component(prec[k], mis, m, a, b, E[k], R[k], MH, k, L1, LT1, v1, D, cond_mean)
                if np.isnan(v):
                    return 0.0, 0.0, k
                ld[k] = v
        else:
            if m > 0:
                bad = _ldl_all(prec, mis, m, L, inv, dv, sc, ld)
                if bad >= 0:
                    return 0.0, 0.0, bad
            else:
                for k in range(K):
                    ld[k] = 0.0
            _maha_rows(a, b, m, mis, E, R, L, inv, t, MH, cond_mean, tt, qv)
        # responsibilities, plug-in likelihood, entropy and statistics of the run's rows
        for k in range(K):
            hk[k] = coef[4, o, k] - 0.5 * ld[k]
        for i in range(a, b):
            top = -np.inf
            topp = -np.inf
            for k in range(K):
                mh = MH[i, k]
                base = -0.5 * (o * LOG_2PI + logdet[k] + ld[k] + mh)
                v = base + coef[0, o, k] + coef[1, o, k] * mh + elogpi[k]
                rho[k] = v
                if v > top:
                    top = v
                w = base + coef[2, o, k] + coef[3, o, k] * mh + logw[k]
                plug[k] = w
                if w > topp:
                    topp = w
            acc = 0.0
            accp = 0.0
            for k in range(K):
                acc += np.exp(rho[k] - top)
                accp += np.exp(plug[k] - topp)
            norm = top + np.log(acc)
            total += topp + np.log(accp)
            row = r0 + i
            for k in range(K):
                v = rho[k] - norm
                sh = np.exp(0.5 * v) if v > _LOG_TINY else 0.0  # no subnormal numbers: they slow products 100x
                h = sh * sh
                tau[row, k] = h
                if h == 0.0:
                    for j in range(D):
                        E[k, i, j] = 0.0
                    continue
                W[g, k] += h
                nk[k] += h
                ent += h * hk[k]
                for j in range(D):
                    e = E[k, i, j]
                    S[k, j] += h * e
                    E[k, i, j] = sh * e
        g += 1
    return total, ent, -1


class VBWorkspace(Workspace):
    """:class:`explorer.core._compiled.gmm.Workspace` plus the VB pass's per-component scratch."""

    def __init__(self, layout, n_components: int, block_rows: int | None = None):
        if block_rows is None:
            block_rows = VB_BLOCK_BYTES // (8 * n_components * max(layout.n_features, 1))
        super().__init__(layout, n_components, block_rows)
        self.rv = np.zeros((3, n_components))
        self.TT = np.empty_like(self.T)

    def __reduce__(self):  # scratch: a copy gets fresh buffers
        return (VBWorkspace, (self.layout, self.n_components, self.block_rows))


def estep(ws: VBWorkspace, means, precision, logdet, coef, elogpi, logw, *, cond_mean: bool,
          cond_scale=None, skip_rtol: float = SKIP_RTOL):
    """One VB E-step pass over the layout of ``ws`` at (m_k, W_k = Psi_k^{-1}, log|Psi_k|).

    ``coef`` (5, D + 1, K) and ``elogpi`` / ``logw`` (K,) are described in :func:`_solve_block_vb`.
    With ``cond_scale`` (K,) the conditional covariances :math:`W_{gk}\\,c_k\\,W_{k,mm}^{-1}` are added to
    the second statistic. Returns ``(tau, nk, first, second, entropy, plugin_log_likelihood)`` with ``tau``
    (n_fit, K) in the layout's row order and the statistics about ``means``. Raises ``NotPositiveDefinite(k)``.
    """
    lay = ws.layout
    K = ws.n_components
    means = np.ascontiguousarray(means, dtype=float)
    precision = np.ascontiguousarray(precision, dtype=float)
    logdet = np.ascontiguousarray(logdet, dtype=float)
    coef = np.ascontiguousarray(coef, dtype=float)
    elogpi = np.ascontiguousarray(elogpi, dtype=float)
    logw = np.ascontiguousarray(logw, dtype=float)
    tau = np.empty((lay.n_fit, K))
    W, T = ws.W, ws.T
    W[...] = 0.0
    T[...] = 0.0
    nk = np.zeros(K)
    S = np.zeros((K, lay.n_features))
    total = 0.0
    entropy = 0.0
    gemm = lay.n_features <= GEMM_MAX_D
    Tt = [T[k].T for k in range(K)]  # Fortran-ordered views: dsyrk accumulates in place
    for b, r0 in enumerate(ws.blocks):
        r1 = min(r0 + ws.block_rows, lay.n_fit)
        nb = r1 - r0
        g0 = ws.block_run[b]
        E, R = ws.E[:, :nb], ws.R[:, :nb]
        _center(lay.X, r0, r1, means, lay.run_start, lay.mis_ptr, lay.mis_idx, g0, ws.E)
        np.matmul(E, precision, out=R)
        part, ent, status = _solve_block_vb(r0, r1, lay.run_start, lay.mis_ptr, lay.mis_idx, g0, precision, logdet,
                                            coef, elogpi, logw, cond_mean, ws.E, ws.R, tau, W, nk, S, ws.LK, ws.tK,
                                            ws.ll, ws.invK, ws.dK, ws.sc, ws.kv, ws.rv, ws.L1, ws.LT1, ws.v1)
        if status >= 0:
            raise NotPositiveDefinite(status)
        total += part
        entropy += ent
        if gemm:
            np.matmul(E.transpose(0, 2, 1), E, out=ws.TT)
            T += ws.TT
        else:
            for k in range(K):
                dsyrk(1.0, E[k].T, beta=1.0, c=Tt[k], trans=0, lower=1, overwrite_c=1)
    if gemm:
        second = T.copy()
    else:
        second = np.triu(T) + np.triu(T, 1).transpose(0, 2, 1)  # dsyrk filled the upper triangle (C order)
    ws.last_pairs_added = 0
    if cond_scale is not None and lay.n_runs_missing:
        cond_scale = np.asarray(cond_scale, dtype=float)
        thresh = skip_rtol * nk / lay.n_runs_missing * cond_scale
        Wc = W * cond_scale[None, :]
        added, status = _add_conditional(lay.mis_ptr, lay.mis_idx, precision, Wc, thresh, second, ws.L1, ws.LT1,
                                          ws.Linv, ws.v1[0], ws.v1[1], ws.LK, ws.QK, ws.invK, ws.dK, ws.sc, ws.kv)
        if status >= 0:
            raise NotPositiveDefinite(status)
        ws.last_pairs_added = int(added)
    mark_loaded("vb_dpgmm")
    return tau, nk, S, second, float(entropy), float(total)


def warm_up() -> None:
    """Compile (empty numba cache) or load (filled cache) the VB kernels, on a tiny problem."""
    from explorer.core._compiled.gmm import Layout

    X = np.array([[0.5, 0.0], [0.0, 1.0], [1.0, 2.0], [0.3, -1.0]])
    missing = np.array([[False, True], [True, False], [False, False], [False, False]])
    order = np.array([2, 3, 0, 1])
    lay = Layout(np.where(missing, 0.0, X)[order], missing[order], 4, order)
    ws = VBWorkspace(lay, 2)
    prec = np.stack([np.eye(2), 2.0 * np.eye(2)])
    coef = np.zeros((5, 3, 2))
    for cond_mean in (True, False):
        estep(ws, np.zeros((2, 2)), prec, np.array([0.0, -2.0 * np.log(2.0)]), coef, np.zeros(2), np.zeros(2),
              cond_mean=cond_mean, cond_scale=np.ones(2) if cond_mean else None)
