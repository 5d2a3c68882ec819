r"""Compiled sweep of the collapsed Gibbs sampler of the DP multinomial mixture (numba).

One call is one sweep of :mod:`explorer.core.discrete.dp_multinomial` over the rows in order 0..N-1 (eqs.
4.2.14-4.2.15), on *slot* buffers of some capacity (the caller starts with about 2K + 16 slots and grows them when a
row would open a cluster while every slot is taken; see :func:`sweep`):

* ``sizes[k]`` :math:`c_k`, ``counts[k, d, v]`` :math:`c_{vdk}`, ``totals[k, d]`` :math:`\sum_v c_{vdk}`;
* ``log_num[k, d, v] = log(c_vdk + phi0)`` and ``log_den[k, d] = log(sum_v c_vdk + V phi0)``, cached and
  updated incrementally when a row leaves or joins a slot (2 x its available entries logarithms), so the
  weight of a slot for a row is a sum of table look-ups over the row's available entries.

An empty slot (``sizes == 0``) is free; a new cluster takes the lowest free slot. The caller compacts the
slots afterwards. The categorical draw is by inversion of ``u[n]`` (uniforms drawn by the caller's
``np.random.Generator``), so :func:`sweep` and the numpy reference of :mod:`explorer.core.discrete.dp_multinomial`
make the same draws from the same uniforms.
"""

from __future__ import annotations

import math

import numba
import numpy as np


@numba.njit(cache=True)
def sweep(codes, z, sizes, counts, totals, log_num, log_den, alpha, phi0, u, start):
    """Rows ``start``..N-1 of one collapsed Gibbs sweep, in place (see the module docstring).

    Returns N when the sweep is complete, or the row n at which every slot was occupied when the row
    could open a new cluster: row n is then back in its cluster untouched, and the caller grows the
    buffers and calls again with ``start = n`` (the same uniforms, so the same draws)."""
    N, D = codes.shape
    V = counts.shape[2]
    log_alpha = math.log(alpha)
    log_phi0 = math.log(phi0)
    log_vphi0 = math.log(V * phi0)
    log_v = math.log(V)
    n_slots = 0
    for k in range(sizes.size):
        if sizes[k] > 0:
            n_slots = k + 1
    capacity = sizes.size
    lw = np.empty(capacity + 1)
    for n in range(start, N):
        k_old = z[n]
        n_av = 0
        # remove row n from its cluster (the "-n" counts of 4.2.14)
        sizes[k_old] -= 1
        for d in range(D):
            x = codes[n, d]
            if x >= 0:
                n_av += 1
                counts[k_old, d, x] -= 1
                totals[k_old, d] -= 1
                log_num[k_old, d, x] = math.log(counts[k_old, d, x] + phi0)
                log_den[k_old, d] = math.log(totals[k_old, d] + V * phi0)
        # log weights of the occupied slots (4.2.14) and of a new cluster (4.2.15 = 4.2.12);
        # the common factor 1 / (N - 1 + alpha) is left out
        top = -np.inf
        free = -1
        for k in range(n_slots):
            if sizes[k] == 0:
                if free < 0:
                    free = k
                lw[k] = -np.inf
                continue
            s = math.log(sizes[k])
            for d in range(D):
                x = codes[n, d]
                if x >= 0:
                    s += log_num[k, d, x] - log_den[k, d]
            lw[k] = s
            if s > top:
                top = s
        if free < 0:
            if n_slots == capacity:  # no room for a new cluster: put row n back and hand over to the caller
                sizes[k_old] += 1
                for d in range(D):
                    x = codes[n, d]
                    if x >= 0:
                        counts[k_old, d, x] += 1
                        totals[k_old, d] += 1
                        log_num[k_old, d, x] = math.log(counts[k_old, d, x] + phi0)
                        log_den[k_old, d] = math.log(totals[k_old, d] + V * phi0)
                return n
            free = n_slots
        s_new = log_alpha - n_av * log_v
        if s_new > top:
            top = s_new
        total = 0.0
        for k in range(n_slots):
            if sizes[k] > 0:
                lw[k] = math.exp(lw[k] - top)
                total += lw[k]
            else:
                lw[k] = 0.0
        w_new = math.exp(s_new - top)
        total += w_new
        target = u[n] * total
        k_new = free
        acc = 0.0
        for k in range(n_slots):
            acc += lw[k]
            if target < acc:
                k_new = k
                break
        # add row n to its new cluster
        z[n] = k_new
        sizes[k_new] += 1
        if k_new >= n_slots:
            n_slots = k_new + 1
        for d in range(D):
            x = codes[n, d]
            if x >= 0:
                counts[k_new, d, x] += 1
                totals[k_new, d] += 1
                log_num[k_new, d, x] = math.log(counts[k_new, d, x] + phi0)
                log_den[k_new, d] = math.log(totals[k_new, d] + V * phi0)
        # an emptied slot beyond the last occupied one shrinks the range
        while n_slots > 0 and sizes[n_slots - 1] == 0:
            n_slots -= 1
    return N


def warm_up() -> None:
    """Load (or compile) :func:`sweep` on a two-row problem."""
    codes = np.array([[0, -1], [1, 1]], dtype=np.int64)
    z = np.zeros(2, dtype=np.int64)
    sizes = np.array([2, 0], dtype=np.int64)
    counts = np.zeros((2, 2, 2), dtype=np.int64)
    counts[0, 0, 0] = counts[0, 0, 1] = counts[0, 1, 1] = 1
    totals = counts.sum(axis=2)
    log_num = np.log(counts + 1.0)
    log_den = np.log(totals + 2.0)
    sweep(codes, z, sizes, counts, totals, log_num, log_den, 1.0, 1.0, np.array([0.3, 0.7]), 0)
