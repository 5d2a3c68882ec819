r"""Compiled kernels of the conditional RBM (:mod:`explorer.core.discrete.crbm`): the leave-one-out predictive
(numba).

Moved here from the algorithm module, which imports this module lazily; the numpy references and the
tests that compare them stay there.
"""

from __future__ import annotations

import math

import numba
import numpy as np


@numba.njit(cache=True)
def softplus(t):  # pragma: no cover - compiled
    return max(t, 0.0) + math.log1p(math.exp(-abs(t)))


@numba.njit(cache=True)
def loo_kernel(W, b1, b0, b1_entry, h, codes, avail, out, only_available):  # pragma: no cover - compiled
    """Eq. 5.7.17 / 5.7.25 in log space for every entry (or, with ``only_available``, the available ones only,
    ``out`` untouched): fills ``out`` (N, D, V) with log P(x_dn = v | rest) and returns the sum over available
    entries of log P(x_dn = their value). ``h`` (N, K) is the full hidden input; an available entry's own term
    W[d, x_dn, :] is subtracted from it (the leave-one-out predictive)."""
    N, D = codes.shape
    V, K = W.shape[1], W.shape[2]
    hm = np.empty(K)
    s = np.empty(V)
    total = 0.0
    for n in range(N):
        for d in range(D):
            a = avail[n, d]
            if only_available and not a:
                continue
            for k in range(K):
                hm[k] = h[n, k] - (W[d, codes[n, d], k] if a else 0.0)
            top = -np.inf
            for v in range(V):
                acc = b1[d, v] if b1_entry[n, d] else b0[v]
                for k in range(K):
                    acc += softplus(W[d, v, k] + hm[k])
                s[v] = acc
                top = max(top, acc)
            z = 0.0
            for v in range(V):
                z += math.exp(s[v] - top)
            lse = top + math.log(z)
            if a:
                total += s[codes[n, d]] - lse
            if not only_available:
                for v in range(V):
                    out[n, d, v] = s[v] - lse
    return total
