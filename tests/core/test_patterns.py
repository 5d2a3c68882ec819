"""Grouping rows by missingness, and the Gaussian kernels on both row layouts."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import multivariate_normal

from explorer.core.gaussians.gaussian import observed_gaussian, precision_and_logdet
from explorer.core.gaussians.patterns import group_patterns


def _random_case(rng, n, d, rate):
    A = rng.standard_normal((d, d))
    cov = A @ A.T + 0.5 * np.eye(d)
    mean = rng.standard_normal(d)
    X = rng.multivariate_normal(mean, cov, size=n)
    missing = rng.random((n, d)) < rate
    return X, missing, mean, cov


def _brute_force(X, missing, mean, cov):
    n, d = X.shape
    ll = np.zeros(n)
    xhat = X.copy()
    for i in range(n):
        o, m = ~missing[i], missing[i]
        if not o.any():
            xhat[i] = mean
            continue
        ll[i] = multivariate_normal(mean[o], cov[np.ix_(o, o)]).logpdf(X[i, o])
        if m.any():
            B = np.linalg.solve(cov[np.ix_(o, o)], cov[np.ix_(o, m)]).T
            xhat[i, m] = mean[m] + B @ (X[i, o] - mean[o])
    return ll, xhat


def test_groups_partition_rows_and_patterns():
    missing = np.array([[0, 1, 0], [0, 0, 0], [1, 1, 1], [0, 1, 0], [1, 0, 0], [0, 0, 1]], dtype=bool)
    p = group_patterns(missing)
    rows = np.sort(np.concatenate([g.rows for g in p.groups] + [p.empty_rows]))
    np.testing.assert_array_equal(rows, np.arange(6))
    assert p.empty_rows.tolist() == [2]
    assert p.n_patterns == 4  # [0,0,0], [0,1,0] (twice), [1,0,0], [0,0,1]
    for g in p.groups:
        for i, pos in zip(g.rows, range(g.rows.size)):
            np.testing.assert_array_equal(np.flatnonzero(missing[i]), g.unique_mis[g.inverse[pos]])


def test_sorted_layout_is_contiguous_and_sorted_by_pattern():
    rng = np.random.default_rng(3)
    missing = rng.random((500, 6)) < 0.4
    p = group_patterns(missing, sort=True)
    np.testing.assert_array_equal(np.sort(p.perm), np.arange(500))
    np.testing.assert_array_equal(p.missing, missing[p.perm])
    start = 0
    for g in p.groups:
        assert g.start == start and g.stop == start + g.rows.size
        assert np.all(np.diff(g.inverse) >= 0)
        start = g.stop
    assert p.empty_rows.tolist() == list(range(start, 500))


@pytest.mark.parametrize("n,d,rate", [(400, 6, 0.4), (300, 20, 0.75), (2000, 4, 0.3), (50, 3, 0.0)])
@pytest.mark.parametrize("sort", [False, True])
def test_observed_gaussian_matches_dense_conditioning(n, d, rate, sort):
    """Loop path (few patterns), batched small blocks (many patterns) and LAPACK path (m > 12)."""
    rng = np.random.default_rng(n + d)
    X, missing, mean, cov = _random_case(rng, n, d, rate)
    p = group_patterns(missing, sort=sort)
    order = p.perm if sort else np.arange(n)
    Xf = np.where(missing, 0.0, X)[order]
    prec, logdet = precision_and_logdet(cov[None])
    ll, xhat, cond = observed_gaussian(Xf, p, mean, prec[0], logdet[0])
    ref_ll, ref_x = _brute_force(X[order], missing[order], mean, cov)
    np.testing.assert_allclose(ll, ref_ll, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(xhat, ref_x, rtol=1e-9, atol=1e-9)
    obs = ~missing[order]
    assert xhat[obs].tobytes() == X[order][obs].tobytes()
    for g, q in zip(p.groups, cond):
        for u in range(g.n_unique):
            mi = g.unique_mis[u]
            if mi.size == 0:
                continue
            o = np.setdiff1d(np.arange(d), mi)
            ref_q = cov[np.ix_(mi, mi)] - cov[np.ix_(mi, o)] @ np.linalg.solve(cov[np.ix_(o, o)], cov[np.ix_(o, mi)])
            np.testing.assert_allclose(q[u], ref_q, rtol=1e-8, atol=1e-10)
