r"""Compiled E-step of EM for full-covariance Gaussian mixtures with missing values (numba).

One E-step returns the expected sufficient statistics of :mod:`explorer.core.mixtures.suffstats` (about the
E-step's means) and the responsibilities, without ever holding the (K, N, D) completions. Rows are
taken in the *sorted layout* of :func:`~explorer.core.gaussians.patterns.group_patterns` (rows sharing a
missingness pattern are contiguous: a **run**), in blocks of ``block_rows`` rows for all components
at once, so the data are read once per iteration and the block's buffers stay in cache:

1. ``_center``: :math:`d_{ik} = x_i - \mu_k` with the missing entries set to 0, for every component
   (into the workspace's ``E``, shape (K, B, D)).
2. BLAS: :math:`r_{ik} = \Lambda_k d_{ik}` for the whole block (``R = E @ P``; the only N x D x D
   product of the E-step, as scikit-learn's).
3. ``_solve_block`` (one compiled pass): per run and component, the Cholesky factor of the
   precision-side block :math:`\Lambda_{k,mm}` (once per run; see :mod:`explorer.core.gaussians.gaussian`),
   then per row :math:`t = L^{-1} r_m`, the observed Mahalanobis distance
   :math:`d^\top\Lambda d - t^\top t`, :math:`\log|\Sigma_{oo}| = \log|\Sigma| + \log|\Lambda_{mm}|`,
   and the conditional mean written **in place** into ``E`` (``E[k, i, m] = -L^{-\top} t``, i.e. the
   completion minus :math:`\mu_k`); a run of at least :data:`BATCH_MIN_ROWS` rows is solved
   :data:`CHUNK_ROWS` rows at a time with the rows innermost (vectorised), a shorter one row by row with the
   components innermost; then, run by run, the responsibilities (log-sum-exp over components; the
   exponentials by :func:`_exp_neg`, inline), kept in the block's scratch and put in the caller's row order
   at the block's end (:func:`_unsort`), their sums per run :math:`W_{gk}`, the first
   statistic :math:`S_k = \sum_i h_{ik} e_{ik}`, and ``E`` scaled by :math:`\sqrt{h_{ik}}`; and, from the
   factors just made, the conditional covariances :math:`W_{gk}\,\Lambda_{k,mm}^{-1}` of the components taking
   part in a run of at least :data:`M_SWITCH` missing entries, or of every component of a shorter run where a
   third of them or more take part (a second factorisation saved: W2 with overlapping components 10 % and
   D = 50 7 % of a step, ``benchmarks/profile_em_step.py``).
   Single-row runs (random masks: every row its own pattern; up to :data:`LANE_MAX_MISSING` missing entries) are
   left to the end of the block and done by :func:`_solve_lanes` about 32 (row, component) pairs at a time, one per
   SIMD lane: their blocks gathered (with the lanes innermost when the K precisions fit in L1,
   :data:`GATHER_L1_BYTES`; else lane by lane), padded with the identity to the group's largest m (the rows sorted by
   m), factored, solved and, for the conditional covariances, inverted in lanes (D = 50, m ~ 15: the E-step 35 %
   faster than with one factorisation per pair; numba vectorises loops over a runtime number of lanes, not the
   per-pair loops of length m).
4. BLAS: :math:`T_k \mathrel{+}= E_k^\top E_k` by ``dsyrk`` (half a GEMM: the M-step's scatter).

After the last block, ``_add_conditional`` adds the other conditional covariances once per (run,
component): :math:`T_k[m, m] \mathrel{+}= W_{gk}\,\Lambda_{k,mm}^{-1}` with the mass the pass left, skipping the
pairs whose responsibility mass is negligible, :math:`W_{gk} \le 10^{-12} N_k / G` (:data:`SKIP_RTOL`; G runs with
missing entries): the skipped mass is at most :math:`10^{-12} N_k` in total and every skipped term is
bounded by :math:`W_{gk}\Sigma_k` (a conditional covariance is below the marginal one), so the
covariances move by at most 1e-12 relative. For well separated components almost every pair is
skipped, which saves K - 1 of K factorisations in that pass.

Buffers (``E``, ``R``, the per-run masses, the factor scratch) live in a :class:`Workspace` that is
allocated once per (data layout, K) and reused by every step (scratch only: the state's arrays are
always new).
"""

from __future__ import annotations

import threading
from typing import NamedTuple

import numba
import numpy as np
from scipy.linalg.blas import dsyrk

from explorer.core._compiled import mark_loaded

LOG_2PI = float(np.log(2.0 * np.pi))
#: Relative pivot threshold, as :data:`explorer.core.gaussians.gaussian.PIVOT_RTOL` times eps.
_PIVOT_TOL = 1.0 * np.finfo(float).eps
#: (run, component) pairs whose responsibility mass is at most ``SKIP_RTOL * N_k / n_runs`` do not get
#: their conditional covariance added (total effect below SKIP_RTOL relative on the covariances).
SKIP_RTOL = 1e-12
#: LLVM may reassociate sums and fuse multiply-adds (vectorised reductions); no assumption about nan / inf,
#: which the kernels test for.
_FAST = {"nsz", "arcp", "contract", "reassoc"}
#: Responsibilities below exp(_LOG_TINY) ~ 1e-300 are set to 0 (their products would be subnormal numbers).
_LOG_TINY = -690.0
#: Target bytes of one (K, block, D) buffer (E and R both are one): two of them fit the 1 MiB L2 cache.
BLOCK_BYTES = 384 * 1024
#: Runs with at least this many missing entries are factored one component at a time (faster from about
#: 10 on: measured 0.29 -> 0.19 s per E-step pass at D = 50, m ~ 15; all components at once is faster at m ~ 6).
M_SWITCH = 10
#: Single-row runs with ``1 <= m <= LANE_MAX_MISSING`` missing entries (random masks on wide data: every row its
#: own pattern) are factored and solved many (row, component) pairs at once, one pair per SIMD lane
#: (:func:`_solve_lanes`); about this many lanes (a multiple of K).
LANES = 32
LANE_MAX_MISSING = 40
#: Runs of at least this many rows (and fewer than M_SWITCH missing entries) are solved CHUNK_ROWS rows at a time
#: with the rows innermost, which the CPU vectorises (W1, runs of about 20 rows: the pass 0.4 ms faster of 5); the
#: runs of a few rows of W2 stay one row at a time (all its components innermost; batched, its pass was 6 % slower).
BATCH_MIN_ROWS = 8
CHUNK_ROWS = 64
#: When the K precisions fit in this many bytes (a 32 KB L1 data cache), :func:`_solve_lanes` gathers a group's
#: blocks with the lanes innermost (contiguous writes; W2, D = 20 and K = 10 in 32,000 bytes: its step 217 -> 205
#: ms separated and 279 -> 260 ms overlapping, medians of six interleaved profiles); with larger precisions lane by
#: lane, one component's rows at a time (D = 50 overlapping was 15-40 % slower with the other order: every (a, b)
#: entry read from K precisions beyond L1 for one write).
GATHER_L1_BYTES = 32 * 1024
BLOCK_ROWS = None  # fixed block size (tuning), None: from BLOCK_BYTES
#: A component's second moments over a block are summed row by row over its rows with a responsibility above
#: ``SCATTER_MIN_RESP`` when they are at most this share of the block (:func:`_scatter_sparse`), else by one ``dsyrk``
#: over every row.
SCATTER_SPARSE_SHARE = 0.25
#: ... rows whose responsibility is at most this are left out of that sum (each would add less than 1e-12 of a row's
#: share of T_k; the conditional covariances skip such pairs too, ``SKIP_RTOL``). N_k and S_k keep them.
SCATTER_MIN_RESP = 1e-12


@numba.njit(cache=True, fastmath=_FAST)
def _center(X, r0, r1, means, run_start, mis_ptr, mis_idx, g0, E):
    """E[k, i - r0] = X[i] - means[k] with missing entries 0, rows r0..r1 (run g0 holds row r0)."""
    K, D = means.shape
    for k in range(K):
        for i in range(r0, r1):
            for j in range(D):
                E[k, i - r0, j] = X[i, j] - means[k, j]
    g = g0
    while g < run_start.size - 1 and run_start[g] < r1:
        a = max(run_start[g], r0)
        b = min(run_start[g + 1], r1)
        for p in range(mis_ptr[g], mis_ptr[g + 1]):
            j = mis_idx[p]
            for k in range(K):
                for i in range(a, b):
                    E[k, i - r0, j] = 0.0
        g += 1


@numba.njit(cache=True, fastmath=_FAST)
def _gather(P, mis, ml, mg, A, l):
    """A[:mg, :mg, l] = the lower triangle of P[mis][:, mis] (ml x ml), padded to mg x mg with the identity (a padded
    pivot is 1 and a padded entry of a solve stays 0). Returns the largest diagonal entry of the block."""
    big = 0.0
    for a in range(mg):
        if a < ml:
            ja = mis[a]
            for b in range(a + 1):
                A[a, b, l] = P[ja, mis[b]]
            if A[a, a, l] > big:
                big = A[a, a, l]
        else:
            for b in range(a):
                A[a, b, l] = 0.0
            A[a, a, l] = 1.0
    return big


@numba.njit(cache=True, fastmath=_FAST)
def _gather_lanes(prec, mis_idx, rm, ro, nr, mg, A, big):
    """:func:`_gather` for the ``nr`` rows of a group and all K components at once (lane ``r * K + k``; row r's m
    missing columns at ``mis_idx[ro[r]:ro[r] + rm[r]]``), the lanes innermost: contiguous writes, reads from all K
    precisions (for when they fit in L1, :data:`GATHER_L1_BYTES`). ``big[l]`` = the largest diagonal entry."""
    K = prec.shape[0]
    for l in range(nr * K):
        big[l] = 0.0
    for a in range(mg):
        for b in range(a + 1):
            for r in range(nr):
                l0 = r * K
                if a < rm[r]:
                    ja, jb = mis_idx[ro[r] + a], mis_idx[ro[r] + b]
                    for k in range(K):
                        A[a, b, l0 + k] = prec[k, ja, jb]
                else:
                    v = 1.0 if a == b else 0.0
                    for k in range(K):
                        A[a, b, l0 + k] = v
        for r in range(nr):
            if a < rm[r]:
                for k in range(K):
                    l = r * K + k
                    if A[a, a, l] > big[l]:
                        big[l] = A[a, a, l]


@numba.njit(cache=True, fastmath=_FAST)
def _lane_logdet(dv, l, ml, tol):
    """log|P| of lane l from its first ml pivots (:func:`_ldl_lanes`), or nan when a pivot is at most ``tol`` (not
    numerically positive definite: the rule of :func:`_ldl_k`)."""
    prod = 1.0
    logdet = 0.0
    for a in range(ml):
        v = dv[a, l]
        if not (v > tol):
            return np.nan
        prod *= v
        if prod > 1e150 or prod < 1e-150:
            logdet += np.log(prod)
            prod = 1.0
    return logdet + np.log(prod)


@numba.njit(cache=True, fastmath=_FAST)
def _ldl_all(prec, mis, m, L, inv, dv, sc, ld):
    """:func:`_ldl_k` of every component at once, the component innermost (independent chains: the CPU
    overlaps them). L (m, m, K), inv and dv (m, K) = 1 / D and D, ``sc`` (4, K) scratch, ``ld`` (K,) receives
    log|P_mm|. Returns -1, or the first component whose block is not numerically positive definite.

    The algorithm of :func:`_ldl_lanes`, reading the blocks where they are: once per run of a repeated pattern,
    whose blocks are small (m < :data:`M_SWITCH`), a gather pass first made W1's step about 5 % slower and the
    variational mixture's at Boston's size 8 % (measured when the two were one)."""
    K = prec.shape[0]
    big, prod, s, s2 = sc[0], sc[1], sc[2], sc[3]
    for k in range(K):
        big[k] = 0.0
        prod[k] = 1.0
        ld[k] = 0.0
        for c in range(m):
            v = prec[k, mis[c], mis[c]]
            if v > big[k]:
                big[k] = v
    for a in range(m):
        ja = mis[a]
        for k in range(K):
            s[k] = prec[k, ja, ja]
        for c in range(a):
            for k in range(K):
                w = L[a, c, k] * dv[c, k]
                L[c, a, k] = w
                s[k] -= L[a, c, k] * w
        for k in range(K):
            if not (s[k] > _PIVOT_TOL * m * big[k]):
                return k
            inv[a, k] = 1.0 / s[k]
            dv[a, k] = s[k]
            prod[k] *= s[k]
            if prod[k] > 1e150 or prod[k] < 1e-150:
                ld[k] += np.log(prod[k])
                prod[k] = 1.0
        for b in range(a + 1, m):
            jb = mis[b]
            for k in range(K):
                s2[k] = prec[k, jb, ja]
            for c in range(a):
                for k in range(K):
                    s2[k] -= L[b, c, k] * L[c, a, k]
            for k in range(K):
                L[b, a, k] = s2[k] * inv[a, k]
    for k in range(K):
        ld[k] += np.log(prod[k])
    return -1


@numba.njit(cache=True, fastmath=_FAST)
def _ldl_k(P, mis, m, L, LT, inv, wv):
    """LDL^T factor of P[mis][:, mis]: unit lower L[:m, :m] (and its transpose in LT), inv[:m] = 1 / D.

    Returns log|P_mm|, or nan when a pivot is below m * eps times the largest diagonal entry (not numerically
    positive definite: the rule of :func:`explorer.core.gaussians.gaussian.cholesky` on squared pivots)."""
    big = 0.0
    for c in range(m):
        v = P[mis[c], mis[c]]
        if v > big:
            big = v
    tol = _PIVOT_TOL * m * big
    prod = 1.0
    logdet = 0.0
    for a in range(m):
        ja = mis[a]
        s = P[ja, ja]
        for c in range(a):
            w = L[a, c] / inv[c]
            wv[c] = w
            s -= L[a, c] * w
        if not (s > tol):
            return np.nan
        ia = 1.0 / s
        inv[a] = ia
        L[a, a] = 1.0
        LT[a, a] = 1.0
        prod *= s
        if prod > 1e150 or prod < 1e-150:
            logdet += np.log(prod)
            prod = 1.0
        for b in range(a + 1, m):
            s2 = P[mis[b], ja]
            for c in range(a):
                s2 -= L[b, c] * wv[c]
            v = s2 * ia
            L[b, a] = v
            LT[a, b] = v
    return logdet + np.log(prod)


@numba.njit(cache=True, fastmath=_FAST, inline="always")
def _maha_rows(a, b, m, mis, E, R, L, inv, t, out, shift, tt, qv):
    """Rows a..b of one run with m < :data:`M_SWITCH` missing entries (``mis``), every component, from the factors of
    :func:`_ldl_all` (L (m, m, K), inv (m, K)): ``out[i, k]`` = the observed Mahalanobis distance
    :math:`d^\\top\\Lambda d - t^\\top D^{-1} t` (:math:`t = L^{-1} r_m`) and, with ``shift``, the conditional
    mean's shift :math:`-\\Lambda_{mm}^{-1} r_m` written into E's missing entries.

    A run of at least :data:`BATCH_MIN_ROWS` rows is done :data:`CHUNK_ROWS` rows at a time with the rows innermost
    (loops the CPU vectorises; ``tt`` (M_SWITCH, CHUNK_ROWS) and ``qv`` (CHUNK_ROWS,) scratch), a shorter one a row
    at a time with the components innermost (``t`` (m, K) scratch). Shared by the EM and the variational passes."""
    K, D = E.shape[0], E.shape[2]
    if b - a >= BATCH_MIN_ROWS:  # a run of many rows: its rows innermost, in chunks (vectorised)
        for c0 in range(a, b, CHUNK_ROWS):  # up to CHUNK_ROWS rows of the run at once, the rows innermost
            n = min(c0 + CHUNK_ROWS, b) - c0
            for k in range(K):
                for i in range(n):  # d' Lambda d
                    acc = 0.0
                    for j in range(D):
                        acc += E[k, c0 + i, j] * R[k, c0 + i, j]
                    qv[i] = acc
                for p in range(m):  # t = L^{-1} r_m (unit lower); q -= t' D^{-1} t
                    jp = mis[p]
                    for i in range(n):
                        tt[p, i] = R[k, c0 + i, jp]
                    for c in range(p):
                        lpc = L[p, c, k]
                        for i in range(n):
                            tt[p, i] -= lpc * tt[c, i]
                    ivp = inv[p, k]
                    for i in range(n):
                        qv[i] -= tt[p, i] * tt[p, i] * ivp
                if shift:
                    for p in range(m - 1, -1, -1):  # L^{-T} D^{-1} t = Lambda_mm^{-1} r_m
                        ivp = inv[p, k]
                        for i in range(n):
                            tt[p, i] *= ivp
                        for c in range(p + 1, m):
                            lcp = L[c, p, k]
                            for i in range(n):
                                tt[p, i] -= lcp * tt[c, i]
                        jp = mis[p]
                        for i in range(n):
                            E[k, c0 + i, jp] = -tt[p, i]
                for i in range(n):
                    out[c0 + i, k] = qv[i]
    else:  # a few rows: one at a time, the components innermost
        for i in range(a, b):
            for k in range(K):
                acc = 0.0
                for j in range(D):
                    acc += E[k, i, j] * R[k, i, j]
                out[i, k] = acc
            if m > 0:
                for p in range(m):  # t = L^{-1} r_m (unit lower), all components
                    jp = mis[p]
                    for k in range(K):
                        t[p, k] = R[k, i, jp]
                    for c in range(p):
                        for k in range(K):
                            t[p, k] -= L[p, c, k] * t[c, k]
                    for k in range(K):
                        out[i, k] -= t[p, k] * t[p, k] * inv[p, k]
                if shift:
                    for p in range(m - 1, -1, -1):  # L^{-T} D^{-1} t = Lambda_mm^{-1} r_m
                        for k in range(K):
                            t[p, k] *= inv[p, k]
                        for c in range(p + 1, m):
                            for k in range(K):
                                t[p, k] -= L[c, p, k] * t[c, k]
                    for p in range(m):
                        jp = mis[p]
                        for k in range(K):
                            E[k, i, jp] = -t[p, k]


@numba.njit(cache=True, fastmath=_FAST)
def _per_component(P, mis, m, logdet_k, a, b, Ek, Rk, ll, k, L, LT, v, D):
    """Rows a..b of one run, one component, long missing blocks (see :func:`_solve_block`). True on failure."""
    inv, wv, tt = v[0], v[1], v[2]
    ldmm = _ldl_k(P, mis, m, L, LT, inv, wv)
    if np.isnan(ldmm):
        return True
    const = (D - m) * LOG_2PI + logdet_k + ldmm
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
        for p in range(m - 1, -1, -1):
            s = tt[p] * inv[p]
            for c in range(p + 1, m):
                s -= LT[p, c] * tt[c]
            tt[p] = s
        for p in range(m):
            Ek[i, mis[p]] = -tt[p]
        ll[i, k] = -0.5 * (const + q)
    return False


#: 2**-n for n = 0..1099 (:func:`_exp_neg`'s scale: n <= 996 for its arguments, which are above _LOG_TINY).
_POW2_NEG = np.ldexp(1.0, -np.arange(1100))


@numba.njit(cache=True, fastmath={"contract"})  # no reassociation: it would undo the two-part ln 2 of the reduction
def _exp_neg(x):
    """exp(x) for ``_LOG_TINY <= x <= 0``, within 1 ulp of libm's (tested on a dense grid): x = n ln 2 + r with
    |r| <= ln 2 / 2 (ln 2 in two parts, FDLIBM's, so n ln 2 is exact), exp(r) by its Taylor polynomial of degree 13
    (remainder below 1e-17 relative), times 2**n from a table. Inlined straight-line code instead of a libm call,
    which the CPU overlaps: W1's pass 0.3 ms faster of 5 (``benchmarks/profile_em_step.py``)."""
    n = np.floor(x * 1.4426950408889634 + 0.5)
    r = (x - n * 6.93147180369123816490e-01) - n * 1.90821492927058770002e-10
    p = 1.0 / 6227020800.0
    p = p * r + 1.0 / 479001600.0
    p = p * r + 1.0 / 39916800.0
    p = p * r + 1.0 / 3628800.0
    p = p * r + 1.0 / 362880.0
    p = p * r + 1.0 / 40320.0
    p = p * r + 1.0 / 5040.0
    p = p * r + 1.0 / 720.0
    p = p * r + 1.0 / 120.0
    p = p * r + 1.0 / 24.0
    p = p * r + 1.0 / 6.0
    p = p * r + 0.5
    p = p * r + 1.0
    p = p * r + 1.0
    return p * _POW2_NEG[np.int64(-n)]


@numba.njit(cache=True, fastmath=_FAST, inline="always")  # one call per run: no call overhead (W2: 68,567 runs)
def _resp_rows(a, b, g, ll, logw, E, W, nk, S, rsum, wpart):
    """Responsibilities of the block rows a..b (one run, ``g``) from their log-densities in ``ll[:, :K]``, written
    to ``ll[:, K:2K]`` and the rows' log-likelihoods to ``ll[:, 2K]`` (``ll`` is (block rows, 2K + 1); the block's
    end puts them in the caller's order, :func:`_unsort`); ``logw`` (1, K) the log-weights, or (block rows, K) the
    log-weights plus each row's offset; their sums into ``W[g]``, ``wpart`` (this part of the run)
    and ``nk``, the first statistic, E scaled by :math:`\\sqrt{h}`, the history's summaries into ``rsum``. Returns the
    rows' log-likelihood.

    In passes over the rows (their largest log-term; the exponentials; the normalisation and statistics), so that
    the exponentials of a run are independent calls the CPU overlaps, and the writes go to contiguous rows: at W1
    (957 runs of about 20 rows) the pass took 6.0 ms with one row at a time and the caller's order, 5.3 ms so
    (``benchmarks/profile_em_step.py``)."""
    K, D = logw.shape[1], E.shape[2]
    per_row = logw.shape[0] > 1  # a log-term per block row (an offset, see estep), else one row for all
    total = 0.0
    for i in range(a, b):
        top = -np.inf
        li = i if per_row else 0
        for k in range(K):
            v = ll[i, k] + logw[li, k]
            ll[i, k] = v
            if v > top:
                top = v
        ll[i, 2 * K] = top
    for i in range(a, b):  # one exp per pair: ll[:, :K] becomes log(h) + log(acc), ll[:, K:2K] exp of it
        top = ll[i, 2 * K]
        for k in range(K):
            dk = ll[i, k] - top
            ll[i, k] = dk
            ll[i, K + k] = _exp_neg(max(dk, _LOG_TINY)) if dk > _LOG_TINY else 0.0  # no subnormals: 100x slower
    for i in range(a, b):
        acc = 0.0
        for k in range(K):
            acc += ll[i, K + k]
        la = np.log(acc)
        norm = ll[i, 2 * K] + la
        total += norm
        ll[i, 2 * K] = norm
        inv_acc = 1.0 / acc
        best = -1.0
        kb = 0
        for k in range(K):
            h = ll[i, K + k] * inv_acc
            ll[i, K + k] = h
            if h > best:
                best = h
                kb = k
            if h == 0.0:  # most (row, component) pairs of well separated components
                for j in range(D):
                    E[k, i, j] = 0.0
                continue
            sh = np.sqrt(h)
            W[g, k] += h
            wpart[k] += h
            nk[k] += h
            rsum[K] -= h * (ll[i, k] - la)  # log h (h > 0 here: finite)
            for j in range(D):
                e = E[k, i, j]
                S[k, j] += h * e
                E[k, i, j] = sh * e
        rsum[kb] += 1.0
    return total


@numba.njit(cache=True, fastmath=_FAST)
def _unsort(r0, nb, perm, ll, resp, rowll):
    """The responsibilities and log-likelihoods of the block's ``nb`` rows (:func:`_resp_rows`: in ``ll``) into the
    caller's rows: ``resp[perm[r0 + i]] = ll[i, K:2K]``, ``rowll[perm[r0 + i]] = ll[i, 2K]``. One tight loop of
    scattered writes instead of writes spread through the pass (which cost W1 about 1 ms of 6)."""
    K = resp.shape[1]
    for i in range(nb):
        row = perm[r0 + i]
        rowll[row] = ll[i, 2 * K]
        for k in range(K):
            resp[row, k] = ll[i, K + k]


@numba.njit(cache=True, fastmath=_FAST)
def _scatter_sparse(E, ll, nb, T, share, done):
    """The block's second moments :math:`T_k \mathrel{+}= \sum_i h_{ik} e_{ik} e_{ik}^\top` (upper triangle, as
    ``dsyrk`` leaves it; E holds :math:`\sqrt{h} e`) for each component k whose rows with
    :math:`h_{ik} >` ``SCATTER_MIN_RESP`` (``ll[:, K + k]``) are at most ``share`` of the block's ``nb``: only those
    rows are read. ``done[k]`` says which; the caller gives the others to BLAS (a dense ``dsyrk`` over every row of
    the block, which well separated components mostly leave near zero)."""
    K, D = T.shape[0], T.shape[1]
    for k in range(K):
        count = 0
        for i in range(nb):
            if ll[i, K + k] > SCATTER_MIN_RESP:
                count += 1
        done[k] = count <= share * nb
        if not done[k]:
            continue
        for i in range(nb):
            if ll[i, K + k] > SCATTER_MIN_RESP:
                for a in range(D):
                    ea = E[k, i, a]
                    for b in range(a, D):
                        T[k, a, b] += ea * E[k, i, b]


@numba.njit(cache=True, fastmath=_FAST, inline="always")
def _add_block(Tk, mis, m, w, QK, k):
    """Tk[mis, mis] += w * QK[:m, :m, k]."""
    for p in range(m):
        row = mis[p]
        for c in range(m):
            Tk[row, mis[c]] += w * QK[p, c, k]


@numba.njit(cache=True, fastmath=_FAST, error_model="numpy")  # 1 / 0 = inf: the caller checks the pivots
def _ldl_lanes(A, m, nl, dv, inv, s):
    """LDL^T of ``nl`` m x m blocks at once, the block innermost (one per SIMD lane): A (M, M, lanes) holds each
    block's lower triangle; on return its strict lower triangle holds the unit factor L, its strict upper
    triangle L * D (transposed), ``dv`` / ``inv`` (M, lanes) D and 1 / D. ``s`` (lanes,) scratch."""
    for a in range(m):
        for l in range(nl):
            s[l] = A[a, a, l]
        for c in range(a):
            for l in range(nl):
                w = A[a, c, l] * dv[c, l]
                A[c, a, l] = w
                s[l] -= A[a, c, l] * w
        for l in range(nl):
            dv[a, l] = s[l]
            inv[a, l] = 1.0 / s[l]
        for b in range(a + 1, m):
            for l in range(nl):
                s[l] = A[b, a, l]
            for c in range(a):
                for l in range(nl):
                    s[l] -= A[b, c, l] * A[c, a, l]
            for l in range(nl):
                A[b, a, l] = s[l] * inv[a, l]


@numba.njit(cache=True, fastmath=_FAST)
def _inverse_lanes(L, inv, m, nl, Q, acc):
    """Q[:, :, l] = inv(P_l) of ``nl`` blocks at once from their LDL^T factors (L (M, M, lanes) unit lower in its
    strict lower triangle, inv (M, lanes) = 1 / D), by the backward recurrence on the rows, the block innermost:
    :math:`Q_{ij} = \\delta_{ij} / D_i - \\sum_{c > i} L_{ci} Q_{jc}`, kept symmetric; ``acc`` (lanes,) scratch."""
    for i in range(m - 1, -1, -1):
        for j in range(m - 1, i - 1, -1):
            for l in range(nl):
                acc[l] = 0.0
            for c in range(i + 1, m):
                for l in range(nl):
                    acc[l] += L[c, i, l] * Q[j, c, l]
            if j == i:
                for l in range(nl):
                    Q[i, i, l] = inv[i, l] - acc[l]
            else:
                for l in range(nl):
                    v = -acc[l]
                    Q[i, j, l] = v
                    Q[j, i, l] = v


@numba.njit(cache=True, fastmath=_FAST)
def _flush_inverses(nq, mis_idx, FL, Finv, FQ, fk, fw, fo, fml, C, acc):
    """The queued conditional covariances of :func:`_solve_lanes`: C[k][mis, mis] += w * inv(P_mm) for the ``nq``
    queued (row, component) pairs, their inverses computed in SIMD lanes (padded to the largest m with the
    identity)."""
    mq = 0
    for q in range(nq):
        if fml[q] > mq:
            mq = fml[q]
    for q in range(nq):
        for a in range(fml[q], mq):
            for b in range(a):
                FL[a, b, q] = 0.0
            Finv[a, q] = 1.0
    _inverse_lanes(FL, Finv, mq, nq, FQ, acc)
    for q in range(nq):
        Ck = C[fk[q]]
        w = fw[q]
        o = fo[q]
        for p in range(fml[q]):
            row = mis_idx[o + p]
            for c in range(fml[q]):
                Ck[row, mis_idx[o + c]] += w * FQ[p, c, q]


@numba.njit(cache=True, fastmath=_FAST)
def _solve_lanes(pend, npend, run_start, mis_ptr, mis_idx, prec, logdet, logw, E, R, W, nk, S, ll,
                 rsum, C, Wd, exact, A, dv, inv, t, lv, iv, qK, fq):
    """Single-row runs of a block (see :data:`LANES`; ``pend[0, :npend]`` the runs, ``pend[1, :npend]`` their row in
    the block; a longer run counts where only one of its rows is in the block): what :func:`_per_component` and the
    long-block branch of :func:`_solve_block` do, for ``LANES // K`` rows and all their components at once.

    The runs are taken in order of their number of missing entries; each group's blocks are gathered into ``A``
    (lane ``r * K + k``: the group's row r, component k) and padded to the group's largest m with the identity
    (a padded pivot is 1 and a padded entry of the solve stays 0, so nothing changes), factored by
    :func:`_ldl_lanes`, and solved; then each row's responsibilities (:func:`_resp_rows`) and, with ``exact``,
    the conditional covariances of the components that take part, from the lanes' factors. Returns
    (log-likelihood, status) as :func:`_solve_block`. ``lv`` (5, lanes) and ``iv`` (5, lanes) int scratch, qK (K,)
    scratch; ``fq`` the queue of conditional covariances (:func:`_flush_inverses`)."""
    K, D = logdet.size, E.shape[2]
    lanes_inner = K * D * D * 8 <= GATHER_L1_BYTES
    s, big, ld, q, const = lv[0], lv[1], lv[2], lv[3], lv[4]
    mlv, rg, ri, ro, rm = iv[0], iv[1], iv[2], iv[3], iv[4]  # per lane: m; per row of a group: run, row, offset, m
    rows_per = max(1, A.shape[2] // K)
    FL, Finv, FQ, fk, fw, fo, fml = fq
    nqmax = FL.shape[2]
    nq = np.int64(0)  # not the literal 0: numba would compile the callees for it too (a second signature)
    ms = np.empty(npend, dtype=np.int64)
    for p in range(npend):
        g = pend[0, p]
        ms[p] = mis_ptr[g + 1] - mis_ptr[g]
    count = np.zeros(A.shape[0] + 2, dtype=np.int64)  # the rows ordered by m (a stable counting sort)
    for p in range(npend):
        count[ms[p] + 1] += 1
    for v in range(1, count.size):
        count[v] += count[v - 1]
    order = np.empty(npend, dtype=np.int64)
    for p in range(npend):
        order[count[ms[p]]] = p
        count[ms[p]] += 1
    total = 0.0
    for p0 in range(0, npend, rows_per):
        p1 = min(p0 + rows_per, npend)
        nl = (p1 - p0) * K
        mg = ms[order[p1 - 1]]
        for r in range(p1 - p0):  # the group's rows
            g = pend[0, order[p0 + r]]
            o = mis_ptr[g]
            ml = mis_ptr[g + 1] - o
            rg[r], ri[r], ro[r], rm[r] = g, pend[1, order[p0 + r]], o, ml
            for k in range(K):
                mlv[r * K + k] = ml
        if lanes_inner:  # gather the blocks, padded to the group's largest m (see _gather), the lanes innermost
            _gather_lanes(prec, mis_idx, rm, ro, p1 - p0, mg, A, big)
        else:
            for r in range(p1 - p0):
                o, ml = ro[r], rm[r]
                for k in range(K):
                    big[r * K + k] = _gather(prec[k], mis_idx[o:o + ml], ml, mg, A, r * K + k)
        for l in range(nl):
            big[l] *= _PIVOT_TOL * mlv[l]
        _ldl_lanes(A, mg, nl, dv, inv, s)
        for l in range(nl):  # the pivot rule of _ldl_k, and log|P_mm|
            ld[l] = _lane_logdet(dv, l, mlv[l], big[l])
            if np.isnan(ld[l]):
                return 0.0, l % K
        for r in range(p1 - p0):  # t = r_m, q = d' Lambda d
            i, o, ml = ri[r], ro[r], rm[r]
            for k in range(K):
                l = r * K + k
                acc = 0.0
                for j in range(D):
                    acc += E[k, i, j] * R[k, i, j]
                q[l] = acc
                const[l] = (D - ml) * LOG_2PI + logdet[k] + ld[l]
                for p in range(mg):
                    t[p, l] = R[k, i, mis_idx[o + p]] if p < ml else 0.0
        for p in range(mg):  # t = L^{-1} r_m; q -= t' D^{-1} t
            for c in range(p):
                for l in range(nl):
                    t[p, l] -= A[p, c, l] * t[c, l]
            for l in range(nl):
                q[l] -= t[p, l] * t[p, l] * inv[p, l]
        for p in range(mg - 1, -1, -1):  # L^{-T} D^{-1} t = Lambda_mm^{-1} r_m
            for l in range(nl):
                t[p, l] *= inv[p, l]
            for c in range(p + 1, mg):
                for l in range(nl):
                    t[p, l] -= A[c, p, l] * t[c, l]
        for r in range(p1 - p0):
            g, i, o, ml = rg[r], ri[r], ro[r], rm[r]
            for k in range(K):
                l = r * K + k
                for p in range(ml):
                    E[k, i, mis_idx[o + p]] = -t[p, l]
                ll[i, k] = -0.5 * (const[l] + q[l])
            wpart = qK
            for k in range(K):
                wpart[k] = 0.0
            total += _resp_rows(i, i + 1, g, ll, logw, E, W, nk, S, rsum, wpart)
            if exact:
                mass = 0.0
                for k in range(K):
                    mass += wpart[k]
                for k in range(K):
                    w = wpart[k]
                    if w > 1e-12 * mass:  # queued: its factor copied, inverted with 31 others in lanes
                        l = r * K + k
                        for a in range(ml):
                            for b in range(a):
                                FL[a, b, nq] = A[a, b, l]
                            Finv[a, nq] = inv[a, l]
                        fk[nq] = k
                        fw[nq] = w
                        fo[nq] = o
                        fml[nq] = ml
                        nq += 1
                        Wd[g, k] += w
                        if nq == nqmax:
                            _flush_inverses(nq, mis_idx, FL, Finv, FQ, fk, fw, fo, fml, C, s)
                            nq = 0
    if nq:
        _flush_inverses(nq, mis_idx, FL, Finv, FQ, fk, fw, fo, fml, C, s)
    return total, -1


@numba.njit(cache=True, fastmath=_FAST)
def _solve_block(r0, r1, run_start, mis_ptr, mis_idx, g0, prec, logdet, logw, E, R, perm, resp,
                 W, nk, S, L, t, ll, inv, dv, sc, kv, L1, LT1, v1, rowll, rsum, QK, C, Wd, exact, Q1, lanes):
    """Per run: factor, solve, log-densities, conditional means (in E), then the run's responsibilities and
    statistics. Returns (log-likelihood of the block, status): status -1 = fine, k = the missing-block
    precision of component k is not positive definite. ``kv`` (3, K) scratch.

    Runs with fewer than :data:`M_SWITCH` missing entries factor every component at once (component
    innermost: independent chains); longer blocks one component at a time with contiguous inner
    products (L1, LT1 (K, m, m): each component's factor and its transpose; v1 (K, 3, m) scratch).

    With ``exact``, the conditional covariances are added here, from the factors just made for the densities, for
    the components that take part in a run with at least :data:`M_SWITCH` missing entries (responsibility mass above
    1e-12 of the run's) and for every component of a shorter run in which a third of them or more take part
    (overlapping components): :math:`C_k[m, m] \\mathrel{+}= w_k \\Lambda_{k,mm}^{-1}` with :math:`w_k` this part of
    the run's responsibility mass, which ``Wd[g]`` records (:func:`_add_conditional` then adds only what is left,
    ``W - Wd``); QK (m, m, K) and Q1 (m, m) scratch. Before, those blocks were factored a second time after the pass.

    ``rsum`` (K + 1,) accumulates the history's summaries of the responsibilities: ``rsum[k]`` the rows whose
    largest :math:`h_{ik}` is component k's (the first on ties, as ``argmax``), ``rsum[K]`` the entropy
    :math:`-\\sum_{ik} h_{ik}\\log h_{ik}`."""
    K, D = logdet.size, E.shape[2]
    ld, const = kv[0], kv[1]
    pend, A, dvl, invl, tl, lv, iv, fq = lanes
    tt, qv = np.empty((M_SWITCH, CHUNK_ROWS)), np.empty(CHUNK_ROWS)  # _maha_rows's scratch
    mmax_lanes = A.shape[0]
    npend = np.int64(0)  # see _solve_lanes's nq
    total = 0.0
    g = g0
    while g < run_start.size - 1 and run_start[g] < r1:
        a = max(run_start[g], r0) - r0
        b = min(run_start[g + 1], r1) - r0
        m = mis_ptr[g + 1] - mis_ptr[g]
        mis = mis_idx[mis_ptr[g]:mis_ptr[g + 1]]
        wpart = sc[1]
        if 0 < m <= mmax_lanes and b - a == 1:  # batched across rows (_solve_lanes)
            pend[0, npend] = g
            pend[1, npend] = a  # the row in the block (a run may straddle two blocks)
            npend += 1
            g += 1
            continue
        if m >= M_SWITCH:
            for k in range(K):  # every component's factor kept (L1, LT1, v1 per component)
                if _per_component(prec[k], mis, m, logdet[k], a, b, E[k], R[k], ll, k, L1[k], LT1[k], v1[k], D):
                    return 0.0, k
            for k in range(K):
                wpart[k] = 0.0
            total += _resp_rows(a, b, g, ll, logw, E, W, nk, S, rsum, wpart)
            if exact:  # the conditional covariances of the components that take part, from these factors
                mass = 0.0
                for k in range(K):
                    mass += wpart[k]
                for k in range(K):
                    w = wpart[k]
                    if w > 1e-12 * mass:
                        _add_inverse(LT1[k], v1[k, 0], m, mis, w, Q1, C[k])
                        Wd[g, k] += w
            g += 1
            continue
        if m > 0:
            bad = _ldl_all(prec, mis, m, L, inv, dv, sc, ld)
            if bad >= 0:
                return 0.0, bad
        for k in range(K):
            const[k] = (D - m) * LOG_2PI + logdet[k] + (ld[k] if m > 0 else 0.0)
        _maha_rows(a, b, m, mis, E, R, L, inv, t, ll, True, tt, qv)
        for i in range(a, b):
            for k in range(K):
                ll[i, k] = -0.5 * (const[k] + ll[i, k])
        for k in range(K):
            wpart[k] = 0.0
        total += _resp_rows(a, b, g, ll, logw, E, W, nk, S, rsum, wpart)
        if exact and m > 0:
            mass = 0.0
            for k in range(K):
                mass += wpart[k]
            taking = 0
            for k in range(K):
                if wpart[k] > 1e-12 * mass:
                    taking += 1
            if 3 * taking >= K:  # overlapping here: every component's conditional covariance, from these factors
                _inverse_lanes(L, inv, m, K, QK, sc[0])
                for k in range(K):
                    w = wpart[k]
                    if not (w > 0.0):
                        continue
                    _add_block(C[k], mis, m, w, QK, k)
                    Wd[g, k] += w
        g += 1
    if npend:
        part, status = _solve_lanes(pend, npend, run_start, mis_ptr, mis_idx, prec, logdet, logw, E, R,
                                    W, nk, S, ll, rsum, C, Wd, exact, A, dvl, invl, tl, lv, iv, sc[1], fq)
        if status >= 0:
            return 0.0, status
        total += part
    _unsort(r0, r1 - r0, perm, ll, resp, rowll)
    return total, -1


@numba.njit(cache=True, fastmath=_FAST)
def _add_conditional(mis_ptr, mis_idx, prec, W, thresh, T, L, LT, Linv, inv, wv, LK, QK, invK, dK, sc, kv):
    """T[k][mis, mis] += W[g, k] * inv(P_k[mis, mis]) for every run g and component k with W[g, k] > thresh[k].

    Runs with fewer than :data:`M_SWITCH` missing entries where at least a third of the components take part
    (overlapping components) factor and invert every component at once, the component innermost
    (:func:`_ldl_all`; LK, QK (m, m, K), invK, dK (m, K), sc (4, K), kv (3, K) scratch); the others one
    component at a time. Returns (pairs added, status): status -1 = fine, k = component k's block is not
    positive definite."""
    K = prec.shape[0]
    added = 0
    for g in range(W.shape[0]):
        m = mis_ptr[g + 1] - mis_ptr[g]
        if m == 0:
            continue
        mis = mis_idx[mis_ptr[g]:mis_ptr[g + 1]]
        active = 0
        for k in range(K):
            if W[g, k] > thresh[k]:
                active += 1
        if active == 0:
            continue
        if m < M_SWITCH and 3 * active >= K:
            bad = _ldl_all(prec, mis, m, LK, invK, dK, sc, kv[0])
            if bad >= 0:
                return added, bad
            _inverse_lanes(LK, invK, m, K, QK, kv[1])  # the recurrence of the per-component branch below
            for k in range(K):
                w = W[g, k]
                if not (w > thresh[k]):
                    continue
                _add_block(T[k], mis, m, w, QK, k)
                added += 1
            continue
        for k in range(K):
            w = W[g, k]
            if not (w > thresh[k]):
                continue
            if np.isnan(_ldl_k(prec[k], mis, m, L, LT, inv, wv)):
                return added, k
            _add_inverse(LT, inv, m, mis, w, Linv, T[k])
            added += 1
    return added, -1


@numba.njit(cache=True, fastmath=_FAST)
def _add_inverse(LT, inv, m, mis, w, Q, Tk):
    """Tk[mis, mis] += w * inv(P_mm) from its LDL^T factor (LT the transposed unit factor, inv = 1 / D); Q (m, m)
    scratch."""
    # Q = inv(P_mm) = LT^{-1} D^{-1} LT^{-T} by the backward recurrence on its rows (LDL^T inverse):
    # Q[i, j] = delta_ij / D_i - sum_{c > i} LT[i, c] Q[c, j], rows i = m-1 .. 0, Q kept symmetric so
    # that every inner product runs over contiguous memory
    for i in range(m - 1, -1, -1):
        for j in range(m - 1, i, -1):
            acc = 0.0
            for c in range(i + 1, m):
                acc += LT[i, c] * Q[j, c]
            Q[i, j] = -acc
            Q[j, i] = -acc
        acc = 0.0
        for c in range(i + 1, m):
            acc += LT[i, c] * Q[i, c]
        Q[i, i] = inv[i] - acc
    for p in range(m):
        row = mis[p]
        for c in range(m):
            Tk[row, mis[c]] += w * Q[p, c]


class Layout:
    """Rows of a fit in runs of one pattern each: ``X`` (C-contiguous, 0 at missing entries), the first
    ``n_fit`` rows fitted, ``perm`` mapping layout rows to the caller's rows."""

    def __init__(self, X, missing, n_fit, perm):
        self.X = np.ascontiguousarray(X, dtype=float)
        self.n_fit = int(n_fit)
        self.n_features = self.X.shape[1]
        self.perm = np.arange(self.X.shape[0], dtype=np.int64) if perm is None else np.asarray(perm, dtype=np.int64)
        miss = np.asarray(missing[: self.n_fit], dtype=bool)
        if self.n_fit:
            change = np.flatnonzero(np.any(miss[1:] != miss[:-1], axis=1)) + 1
            self.run_start = np.concatenate([[0], change, [self.n_fit]]).astype(np.int64)
            first = miss[self.run_start[:-1]]
        else:
            self.run_start = np.zeros(1, dtype=np.int64)
            first = np.zeros((0, self.n_features), dtype=bool)
        counts = first.sum(axis=1)
        self.mis_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self.mis_idx = np.nonzero(first)[1].astype(np.int64)
        self.n_runs = self.run_start.size - 1
        self.n_runs_missing = int(np.count_nonzero(counts))
        self.max_missing = int(counts.max()) if counts.size else 0


class Workspace:
    """Scratch buffers of the compiled E-step for one layout and K (reused by every step of a fit)."""

    def __init__(self, layout: Layout, n_components: int, block_rows: int | None = None):
        block_rows = block_rows if block_rows is not None else BLOCK_ROWS
        K, D = n_components, layout.n_features
        if block_rows is None:
            block_rows = BLOCK_BYTES // (8 * K * max(D, 1))
        self.block_rows = int(max(64, min(block_rows, 8192, max(layout.n_fit, 1))))
        B = self.block_rows
        self.layout = layout
        self.n_components = K
        self.E = np.empty((K, B, D))
        self.R = np.empty((K, B, D))
        self.ll = np.empty((B, 2 * K + 1))  # log-densities, then responsibilities and the rows' log-likelihoods
        self.W = np.empty((layout.n_runs, K))
        self.rowll = np.zeros(layout.X.shape[0])  # per-row log-likelihood of the last E-step (caller's order)
        m = max(layout.max_missing, 1)
        self.Linv = np.zeros((m, m))
        self.LK = np.zeros((m, m, K))  # per-component factors, component innermost
        self.QK = np.zeros((m, m, K))  # their inverses (conditional covariances), component innermost
        self.tK = np.empty((m, K))
        self.invK = np.empty((m, K))
        self.dK = np.empty((m, K))
        self.sc = np.empty((4, K))
        self.kv = np.zeros((3, K))
        self.L1 = np.zeros((m, m))
        self.LT1 = np.zeros((m, m))
        self.v1 = np.zeros((3, m))
        # every component's factor of a long block, kept through the pass (its conditional covariances, see
        # _solve_block): (K, m, m) twice, only where long blocks exist
        mk = m if layout.max_missing >= M_SWITCH else 1
        self.LK1 = np.zeros((K, mk, mk))
        self.LTK1 = np.zeros((K, mk, mk))
        self.vK1 = np.zeros((K, 3, mk))
        # single-row runs of 1..LANE_MAX_MISSING missing entries, factored in SIMD lanes (_solve_lanes); empty
        # buffers where no row has a missing entry (A.shape[0] = 0 turns the branch off)
        ml = min(layout.max_missing, LANE_MAX_MISSING)
        on = ml > 0
        nl = K * max(1, LANES // K) if on else 1
        nq = LANES if on else 1
        self.lanes = (np.zeros((2, self.block_rows if on else 1), dtype=np.int64), np.zeros((ml, ml, nl)),
                      np.zeros((ml, nl)), np.zeros((ml, nl)), np.zeros((ml, nl)), np.zeros((5, max(nl, nq, K))),
                      np.zeros((5, nl), dtype=np.int64),
                      (np.zeros((ml, ml, nq)), np.zeros((ml, nq)), np.zeros((ml, ml, nq)), np.zeros(nq, dtype=np.int64),
                       np.zeros(nq), np.zeros(nq, dtype=np.int64), np.zeros(nq, dtype=np.int64)))
        self.T = np.empty((K, D, D))
        self.done = np.zeros(K, dtype=np.bool_)  # components whose block scatter _scatter_sparse did
        self.C = np.empty((K, D, D))  # conditional covariances added in the pass (see _solve_block)
        self.Wd = np.empty((layout.n_runs, K))  # the responsibility mass they were added for
        # first run of every block
        starts = np.arange(0, layout.n_fit, B, dtype=np.int64)
        self.blocks = starts
        self.block_run = (np.searchsorted(layout.run_start, starts, side="right") - 1).astype(np.int64)
        self.lock = threading.Lock()
        self.last_pairs_added = 0

    def __reduce__(self):  # scratch: a copy (e.g. of EMData sent to a worker process) gets fresh buffers
        return (Workspace, (self.layout, self.n_components, self.block_rows))


def estep(ws: Workspace, weights, means, precision, logdet, *, exact: bool = True, skip_rtol: float = SKIP_RTOL,
          log_offset=None):
    """One E-step over the layout of ``ws``.

    ``log_offset`` (n_rows, K) in the caller's order, optional: a term added to every fitted row's component
    log-densities before the responsibilities (the location model's categorical log-probabilities,
    :mod:`explorer.core.mixtures.location_model`); the log-likelihoods then include it.

    Returns ``(nk, first, second, log_likelihood, resp, summary)`` with ``resp`` of shape (n_rows, K) in the
    caller's row order (rows outside the fit get ``weights``), ``second`` the full :math:`T_k`, ``summary`` a
    :class:`RespSummary` of the fitted rows.
    Raises ``ValueError(k)`` -- caught by the caller -- when a missing-block precision is not positive definite.
    """
    lay = ws.layout
    K, D = ws.n_components, lay.n_features
    means = np.ascontiguousarray(means, dtype=float)
    precision = np.ascontiguousarray(precision, dtype=float)
    logdet = np.ascontiguousarray(logdet, dtype=float)
    with np.errstate(divide="ignore"):
        logw = np.ascontiguousarray(np.log(np.asarray(weights, dtype=float))[None, :])
    if log_offset is not None:  # one row of log-terms per fitted row, in the layout's order
        logw = np.ascontiguousarray(np.asarray(log_offset, dtype=float)[lay.perm[:lay.n_fit]] + logw)
    per_row = log_offset is not None
    resp = np.empty((lay.X.shape[0], K))
    if lay.n_fit < lay.X.shape[0]:
        resp[lay.perm[lay.n_fit:]] = weights
    W, T = ws.W, ws.T
    W[...] = 0.0
    T[...] = 0.0
    ws.C[...] = 0.0
    ws.Wd[...] = 0.0
    nk = np.zeros(K)
    S = np.zeros((K, D))
    rsum = np.zeros(K + 1)
    total = 0.0
    Tt = [T[k].T for k in range(K)]  # Fortran-ordered views: dsyrk accumulates in place
    for b, r0 in enumerate(ws.blocks):
        r1 = min(r0 + ws.block_rows, lay.n_fit)
        nb = r1 - r0
        g0 = ws.block_run[b]
        E, R = ws.E[:, :nb], ws.R[:, :nb]
        _center(lay.X, r0, r1, means, lay.run_start, lay.mis_ptr, lay.mis_idx, g0, ws.E)
        np.matmul(E, precision, out=R)
        part, status = _solve_block(r0, r1, lay.run_start, lay.mis_ptr, lay.mis_idx, g0, precision, logdet,
                                    logw[r0:r1] if per_row else logw,
                                    ws.E, ws.R, lay.perm, resp, W, nk, S, ws.LK, ws.tK, ws.ll, ws.invK, ws.dK,
                                    ws.sc, ws.kv, ws.LK1, ws.LTK1, ws.vK1, ws.rowll, rsum, ws.QK, ws.C, ws.Wd,
                                    bool(exact), ws.Linv, ws.lanes)
        if status >= 0:
            raise NotPositiveDefinite(status)
        total += part
        _scatter_sparse(ws.E, ws.ll, nb, T, SCATTER_SPARSE_SHARE, ws.done)
        for k in range(K):
            if not ws.done[k]:
                dsyrk(1.0, E[k].T, beta=1.0, c=Tt[k], trans=0, lower=1, overwrite_c=1)
    second = np.triu(T) + np.triu(T, 1).transpose(0, 2, 1)  # dsyrk filled the upper triangle (C order)
    ws.last_pairs_added = 0
    if exact and lay.n_runs_missing:
        second += ws.C  # the pairs of overlapping runs, added in the pass
        thresh = skip_rtol * nk / lay.n_runs_missing
        added, status = _add_conditional(lay.mis_ptr, lay.mis_idx, precision, W - ws.Wd, thresh, second, ws.L1, ws.LT1,
                                          ws.Linv, ws.v1[0], ws.v1[1], ws.LK, ws.QK, ws.invK, ws.dK, ws.sc, ws.kv)
        if status >= 0:
            raise NotPositiveDefinite(status)
        ws.last_pairs_added = int(added)
    mark_loaded("gmm")
    return nk, S, second, float(total), resp, RespSummary(float(rsum[K]), rsum[:K].astype(np.int64))


class RespSummary(NamedTuple):
    """What a fit's history records of the responsibilities (:func:`explorer.core.mixtures.em_gmm.snapshot`),
    summed over the fitted rows by the compiled pass at no extra pass: ``entropy`` :math:`-\\sum_{ik} h_{ik}
    \\log h_{ik}` and ``hard_counts``, the rows whose largest responsibility is each component's."""

    entropy: float
    hard_counts: np.ndarray


class NotPositiveDefinite(Exception):
    """A missing-block precision of component ``args[0]`` is not positive definite."""


def warm_up() -> None:
    """Compile (empty numba cache) or load (filled cache) every kernel, on a tiny problem."""
    X = np.array([[0.5, 0.0], [0.0, 1.0], [1.0, 2.0], [0.3, -1.0]])
    missing = np.array([[False, True], [True, False], [False, False], [False, False]])
    order = np.array([2, 3, 0, 1])  # the sorted layout: complete rows first
    lay = Layout(np.where(missing, 0.0, X)[order], missing[order], 4, order)
    ws = Workspace(lay, 2)
    prec = np.stack([np.eye(2), 2.0 * np.eye(2)])
    estep(ws, np.array([0.5, 0.5]), np.zeros((2, 2)), prec, np.array([0.0, -2.0 * np.log(2.0)]))
