r"""Compiled kernels of the DP/CPT-v Gibbs sampler (:mod:`explorer.core.discrete.dp_cpt_v`): log tables, the
likelihood, the assignment sweep and the auxiliary counts (numba).

Moved here from the algorithm module, which imports this module lazily; the numpy references and the
tests that compare them stay there.
"""

from __future__ import annotations

import math

import numba
import numpy as np


@numba.njit(cache=True)
def tables_kernel(beta, mu):  # pragma: no cover - compiled
    """_log_tables on rows (M, V) -> (M, V+2)."""
    M, V = beta.shape
    out = np.empty((M, V + 2))
    for i in range(M):
        sel = 0.0
        unsel = 0.0
        for w in range(V):
            b = beta[i, w]
            out[i, w] = math.log(max(b, 1e-300))
            sel += mu[w] * b
            unsel += (1.0 - mu[w]) * b
        out[i, V] = math.log(max(sel, 1e-300))
        out[i, V + 1] = math.log(max(unsel, 1e-300))
    return out


@numba.njit(cache=True)
def log_likelihood_kernel(sym, response, z, beta, mu):  # pragma: no cover - compiled
    """sum_n sum_d log gamma_{d z_n n} (5.4.15, the mu factors of available entries included)."""
    N, D = sym.shape
    V = beta.shape[2]
    total = 0.0
    for n in range(N):
        k = z[n]
        for d in range(D):
            s = sym[n, d]
            if s < V:
                g = beta[k, d, s] * (mu[s] if response[n, d] else 1.0 - mu[s])
            else:
                g = 0.0
                for w in range(V):
                    g += beta[k, d, w] * (mu[w] if s == V else 1.0 - mu[w])
            total += math.log(max(g, 1e-300))
    return total


@numba.njit(cache=True)
def fill_slot(slot, sym_row, mu, g, e, uu, beta, table):  # pragma: no cover - compiled
    """beta[slot] ~ H_n from one pool entry, and its log-table row (see _log_tables)."""
    D, V = g.shape
    for d in range(D):
        s = sym_row[d]
        if s < V:
            v = s
        else:
            total = 0.0
            for w in range(V):
                total += mu[w] if s == V else 1.0 - mu[w]
            target = uu[d] * total
            acc = 0.0
            v = V - 1
            for w in range(V):
                acc += mu[w] if s == V else 1.0 - mu[w]
                if acc >= target:
                    v = w
                    break
        norm = 0.0
        for w in range(V):
            b = g[d, w] + (e[d] if w == v else 0.0)
            if b < 1e-300:
                b = 1e-300
            beta[slot, d, w] = b
            norm += b
        sel = 0.0
        unsel = 0.0
        for w in range(V):
            beta[slot, d, w] /= norm
            table[slot, d, w] = math.log(beta[slot, d, w])
            sel += mu[w] * beta[slot, d, w]
            unsel += (1.0 - mu[w]) * beta[slot, d, w]
        table[slot, d, V] = math.log(max(sel, 1e-300))
        table[slot, d, V + 1] = math.log(max(unsel, 1e-300))


@numba.njit(cache=True)
def assign_rows(start, sym, z, counts, beta, table, new_table, log_alpha, u, hw, mu,
                 pool_g, pool_e, pool_u, pool_pos):  # pragma: no cover - compiled
    """Gibbs updates of z_n for n = start.. (module docstring, step (a)). Returns (next row, hw, pool_pos):
    next row < N when the pool of new-cluster draws is used up (the caller refills it and calls again).
    ``hw``: slots 0..hw-1 may be occupied (``counts`` > 0)."""
    N, D = sym.shape
    logp = np.empty(counts.shape[0] + 1)
    for n in range(start, N):
        if pool_pos >= pool_g.shape[0]:
            return n, hw, pool_pos
        counts[z[n]] -= 1
        best = -np.inf
        for k in range(hw):
            if counts[k] > 0:
                s = math.log(counts[k])
                for d in range(D):
                    s += table[k, d, sym[n, d]]
                logp[k] = s
                if s > best:
                    best = s
            else:
                logp[k] = -np.inf
        s = log_alpha
        for d in range(D):
            s += new_table[d, sym[n, d]]
        logp[hw] = s
        if s > best:
            best = s
        total = 0.0
        for k in range(hw + 1):
            p = math.exp(logp[k] - best) if logp[k] > -np.inf else 0.0
            logp[k] = p
            total += p
        target = u[n] * total
        acc = 0.0
        choice = hw
        for k in range(hw + 1):
            acc += logp[k]
            if logp[k] > 0.0 and acc >= target:
                choice = k
                break
        if choice < hw:
            z[n] = choice
            counts[choice] += 1
        else:
            slot = -1
            for k in range(hw):
                if counts[k] == 0:
                    slot = k
                    break
            if slot < 0:
                slot = hw
                hw += 1
            z[n] = slot
            counts[slot] = 1
            fill_slot(slot, sym[n], mu, pool_g[pool_pos], pool_e[pool_pos], pool_u[pool_pos], beta, table)
            pool_pos += 1
    return N, hw, pool_pos


@numba.njit(cache=True)
def complete_counts(sym, z, beta, mu, u, aux):  # pragma: no cover - compiled
    """Counts (K, D, V) of the available values plus, with ``aux``, the auxiliary counts of 5.5.10-11
    (one categorical draw per unavailable entry from mu_v beta_vdk or (1 - mu_v) beta_vdk, normalised,
    by inversion of ``u``), and the totals (V,) of the auxiliary values drawn for (r=1, a=0) and (r=0, a=0)."""
    K, D, V = beta.shape
    N = sym.shape[0]
    counts = np.zeros((K, D, V))
    sel = np.zeros(V)
    unsel = np.zeros(V)
    for n in range(N):
        k = z[n]
        for d in range(D):
            s = sym[n, d]
            if s < V:
                counts[k, d, s] += 1.0
            elif aux:
                total = 0.0
                for w in range(V):
                    total += beta[k, d, w] * (mu[w] if s == V else 1.0 - mu[w])
                target = u[n, d] * total
                acc = 0.0
                v = V - 1
                for w in range(V):
                    acc += beta[k, d, w] * (mu[w] if s == V else 1.0 - mu[w])
                    if acc >= target:
                        v = w
                        break
                counts[k, d, v] += 1.0
                if s == V:
                    sel[v] += 1.0
                else:
                    unsel[v] += 1.0
    return counts, sel, unsel
