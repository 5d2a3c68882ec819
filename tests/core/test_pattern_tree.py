"""delalleau2012 as published: pattern MST, incremental Cholesky, inverse variance lemma, tree / naive E-steps."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse.csgraph import minimum_spanning_tree
from scipy.spatial.distance import cdist

from explorer.core.gaussians.gaussian import DegenerateCovarianceError, observed_gaussian, precision_and_logdet
from explorer.core.gaussians.patterns import group_patterns
from explorer.core.mixtures.pattern_tree import (
    build_pattern_tree,
    cholesky_update,
    hamming_distances,
    lemma_add_missing,
    lemma_remove_missing,
    observed_gaussian_naive,
    observed_gaussian_tree,
    unique_patterns,
)
from explorer.core.validation import BadInputError


def _spd(rng, d, jitter=0.5):
    A = rng.standard_normal((d, d + 3))
    return A @ A.T / d + jitter * np.eye(d)


def _squares(n, side, k, rng):
    """Rows of a side x side image each missing one random k x k square."""
    pos = rng.integers(0, side - k + 1, size=(n, 2))
    miss = np.zeros((n, side, side), dtype=bool)
    for i, (r, c) in enumerate(pos):
        miss[i, r:r + k, c:c + k] = True
    return miss.reshape(n, side * side)


def _all_squares(side, k):
    out = []
    for r in range(side - k + 1):
        for c in range(side - k + 1):
            m = np.zeros((side, side), dtype=bool)
            m[r:r + k, c:c + k] = True
            out.append(m.ravel())
    return np.array(out)


def _scipy_mst_weight(P):
    H = hamming_distances(P).astype(float)
    return minimum_spanning_tree(H).sum()  # unique patterns are >= 1 apart: no zero off the diagonal


# --------------------------------------------------------------------------- patterns and trees


def test_unique_patterns_cover_groups_and_counts():
    rng = np.random.default_rng(0)
    missing = rng.random((300, 6)) < 0.4
    missing[:4] = True  # empty rows are not patterns
    p = group_patterns(missing)
    up = unique_patterns(p)
    assert up.n_patterns == p.n_patterns
    distinct = {tuple(r) for r in missing if not r.all()}
    assert {tuple(r) for r in up.missing} == distinct
    assert up.counts.sum() == (~missing.all(axis=1)).sum()
    for gi, g in enumerate(p.groups):
        for u in range(g.n_unique):
            i = up.group_index[gi][u]
            assert up.node_group[i] == gi and up.node_unique[i] == u
            np.testing.assert_array_equal(np.flatnonzero(up.missing[i]), g.unique_mis[u])
            assert up.counts[i] == g.members[u].size


def test_hamming_matches_scipy():
    rng = np.random.default_rng(1)
    A = rng.random((40, 33)) < 0.3
    np.testing.assert_array_equal(hamming_distances(A), np.rint(cdist(A, A, "hamming") * 33))


@pytest.mark.parametrize("seed,n,d,rate", [(0, 300, 12, 0.3), (1, 500, 40, 0.1), (2, 200, 6, 0.5)])
def test_mst_weight_matches_scipy(seed, n, d, rate):
    rng = np.random.default_rng(seed)
    p = group_patterns(rng.random((n, d)) < rate)
    tree = build_pattern_tree(p)
    assert tree.n_clusters == 1
    assert tree.total_weight == pytest.approx(_scipy_mst_weight(tree.patterns))
    H = hamming_distances(tree.patterns)
    for child, parent in tree.edges:
        assert tree.weights[child] == H[child, parent] >= 1


def test_mnist_squares_tree():
    """Digest section 4.2: 576 positions of a 5x5 square on 28x28, MST weight 575 x 10."""
    P = _all_squares(28, 5)
    p = group_patterns(P)
    tree = build_pattern_tree(p)
    assert tree.n_patterns == 576
    assert tree.total_weight == 5750
    H = hamming_distances(tree.patterns)
    assert H[~np.eye(576, dtype=bool)].min() == 10
    assert np.all(tree.weights[tree.parents >= 0] == 10)
    assert tree.mean_nd == 10.0
    assert tree.max_depth <= 47  # a centre root: at most half the longest path, + 1
    assert tree.peak_states <= 6


def _check_traversal(tree):
    p = tree.n_patterns
    assert sorted(tree.order.tolist()) == list(range(p))
    where = np.empty(p, dtype=int)
    where[tree.order] = np.arange(p)
    for v in range(p):
        u = tree.parents[v]
        if u >= 0:
            assert where[u] < where[v]
            assert tree.depth[v] == tree.depth[u] + 1
            assert tree.cluster[u] == tree.cluster[v]
        else:
            assert tree.depth[v] == 0 and tree.weights[v] == 0


def test_traversal_parent_before_child_tree_and_forest():
    rng = np.random.default_rng(3)
    p = group_patterns(rng.random((600, 10)) < 0.35)
    tree = build_pattern_tree(p)
    _check_traversal(tree)
    forest = build_pattern_tree(p, max_mst_patterns=60)  # footnote 3: k-median clusters, one MST each
    _check_traversal(forest)
    assert forest.n_clusters == forest.roots.size > 1
    assert np.bincount(forest.cluster).max() <= 60
    assert forest.total_weight >= tree.total_weight
    np.testing.assert_array_equal(forest.patterns, tree.patterns)


# --------------------------------------------------------------------------- incremental Cholesky


def _chol_of(cov, perm):
    return np.linalg.cholesky(cov[np.ix_(perm, perm)])


def test_cholesky_append_and_remove_match_lapack():
    rng = np.random.default_rng(4)
    d = 30
    cov = _spd(rng, d)
    for trial in range(25):
        n0 = int(rng.integers(0, d))
        perm = rng.permutation(d)[:n0]
        L = _chol_of(cov, perm) if n0 else np.zeros((0, 0))
        n_rm = int(rng.integers(0, n0 + 1))
        remove = rng.choice(perm, size=n_rm, replace=False) if n_rm else []
        free = np.setdiff1d(np.arange(d), perm)
        n_add = int(rng.integers(0, free.size + 1))
        append = rng.permutation(free)[:n_add]
        L2, perm2 = cholesky_update(L, perm, cov, remove=remove, append=append)
        kept = [v for v in perm if v not in set(np.asarray(remove).tolist())]
        np.testing.assert_array_equal(perm2, np.concatenate([kept, append]).astype(int))
        if perm2.size:
            np.testing.assert_allclose(L2, _chol_of(cov, perm2), rtol=0, atol=1e-10)


@pytest.mark.parametrize("k", [0, 5, 11])
def test_cholesky_remove_each_position(k):
    rng = np.random.default_rng(5)
    cov = _spd(rng, 12)
    perm = rng.permutation(12)
    L2, perm2 = cholesky_update(_chol_of(cov, perm), perm, cov, remove=[perm[k]])
    np.testing.assert_array_equal(perm2, np.delete(perm, k))
    np.testing.assert_allclose(L2, _chol_of(cov, perm2), atol=1e-12)


def test_cholesky_append_singular_raises():
    rng = np.random.default_rng(6)
    A = rng.standard_normal((5, 8))
    cov = A @ A.T
    cov = np.block([[cov, cov[:, :1]], [cov[:1, :], cov[:1, :1]]])  # feature 5 duplicates feature 0
    perm = np.arange(5)
    with pytest.raises(DegenerateCovarianceError, match="feature 5.*non-positive pivot"):
        cholesky_update(_chol_of(cov, perm), perm, cov, append=[5])
    # several appends at once (one blocked forward substitution): the failing one is named
    with pytest.raises(DegenerateCovarianceError, match="feature 5.*non-positive pivot"):
        cholesky_update(_chol_of(cov, perm[:3]), perm[:3], cov, remove=[1], append=[3, 4, 5])


# --------------------------------------------------------------------------- inverse variance lemma


def _schur(cov, mis):
    obs = np.setdiff1d(np.arange(cov.shape[0]), mis)
    return cov[np.ix_(mis, mis)] - cov[np.ix_(mis, obs)] @ np.linalg.solve(cov[np.ix_(obs, obs)], cov[np.ix_(obs, mis)])


def test_lemma_add_and_remove_match_schur_complement():
    rng = np.random.default_rng(7)
    d = 15
    cov = _spd(rng, d)
    prec = precision_and_logdet(cov[None])[0][0]
    for trial in range(20):
        order = rng.permutation(d)
        nx, ny = int(rng.integers(0, 8)), int(rng.integers(1, 5))
        X, Y = order[:nx], order[nx:nx + ny]
        K = _schur(cov, X) if nx else np.zeros((0, 0))
        K2, mis2 = lemma_add_missing(K, X, Y, prec)
        np.testing.assert_array_equal(mis2, np.concatenate([X, Y]))
        np.testing.assert_allclose(K2, _schur(cov, mis2), rtol=1e-10, atol=1e-12)
        K3, mis3 = lemma_remove_missing(K2, mis2, Y)  # back again
        np.testing.assert_array_equal(mis3, X)
        np.testing.assert_allclose(K3, K if nx else np.zeros((0, 0)), rtol=1e-10, atol=1e-12)


def test_lemma_general_case_either_order():
    rng = np.random.default_rng(8)
    d = 14
    cov = _spd(rng, d)
    prec = precision_and_logdet(cov[None])[0][0]
    a, b = np.array([0, 3, 5, 9]), np.array([3, 9, 11, 12, 2])  # 0, 5 observed again; 11, 12, 2 newly missing
    Ka = _schur(cov, a)
    Kr, mr = lemma_remove_missing(Ka, a, [0, 5])
    K1, m1 = lemma_add_missing(Kr, mr, [11, 12, 2], prec)
    Kg, mg = lemma_add_missing(Ka, a, [11, 12, 2], prec)
    K2, m2 = lemma_remove_missing(Kg, mg, [0, 5])
    for K, m in ((K1, m1), (K2, m2)):
        np.testing.assert_allclose(K, _schur(cov, m), rtol=1e-10, atol=1e-12)


# --------------------------------------------------------------------------- E-step oracles


def _case(kind, rng):
    if kind == "mcar":
        n, d = 250, 12
        missing = rng.random((n, d)) < 0.3
    elif kind == "squares":
        n, d = 200, 64
        missing = _squares(n, 8, 3, rng)
    elif kind == "few":  # 5 patterns shared by 300 rows: the BLAS-3 (LAPACK) path of the per-row solves
        n, d = 300, 60
        templates = rng.random((5, d)) < 0.15
        missing = templates[rng.integers(0, 5, size=n)]
    else:  # blocks of consecutive columns, some rows complete
        n, d = 150, 30
        start = rng.integers(0, 26, size=n)
        width = rng.integers(0, 5, size=n)
        cols = np.arange(d)
        missing = (cols >= start[:, None]) & (cols < (start + width)[:, None])
    missing[:3] = True  # rows with nothing observed
    missing[3] = False
    cov = _spd(rng, d)
    mean = rng.standard_normal(d)
    X = rng.multivariate_normal(mean, cov, size=missing.shape[0])
    return np.where(missing, 0.0, X), missing, mean, cov


def _assert_same(res, ref):
    ll, xhat, cond = res
    rl, rx, rc = ref
    np.testing.assert_allclose(ll, rl, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(xhat, rx, rtol=1e-8, atol=1e-8)
    assert len(cond) == len(rc)
    for a, b in zip(cond, rc):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("kind", ["mcar", "squares", "blocks", "few"])
@pytest.mark.parametrize("sort", [False, True])
def test_tree_and_naive_equal_observed_gaussian(kind, sort):
    rng = np.random.default_rng(len(kind) + sort)
    Xf, missing, mean, cov = _case(kind, rng)
    p = group_patterns(missing, sort=sort)
    if sort:
        Xf = Xf[p.perm]
    prec, logdet = precision_and_logdet(cov[None])
    maha_ref = np.empty(Xf.shape[0])
    ref = observed_gaussian(Xf, p, mean, prec[0], logdet[0], maha_out=maha_ref)
    tree = build_pattern_tree(p)
    for kwargs in ({"refresh_every": None}, {"refresh_every": 3}, {"refresh_every": 1, "precision": prec[0]}):
        maha = np.empty(Xf.shape[0])
        _assert_same(observed_gaussian_tree(Xf, p, mean, cov, tree=tree, maha_out=maha, **kwargs), ref)
        np.testing.assert_allclose(maha, maha_ref, rtol=1e-8, atol=1e-8)
    _assert_same(observed_gaussian_naive(Xf, p, mean, cov), ref)
    ll, xh, cc = observed_gaussian_tree(Xf, p, mean, cov, conditionals=False, tree=tree)
    assert xh is None and cc is None
    np.testing.assert_allclose(ll, ref[0], rtol=1e-8, atol=1e-8)
    out = np.empty_like(Xf)
    res = observed_gaussian_naive(Xf, p, mean, cov, out=out)
    assert res[1] is out
    obs = ~p.missing
    assert res[1][obs].tobytes() == Xf[obs].tobytes()
    assert np.all(res[0][p.empty_rows] == 0) and np.all(res[1][p.empty_rows] == mean)


def test_forest_e_step_matches():
    rng = np.random.default_rng(11)
    Xf, missing, mean, cov = _case("mcar", rng)
    p = group_patterns(missing)
    prec, logdet = precision_and_logdet(cov[None])
    forest = build_pattern_tree(p, max_mst_patterns=40)
    stats = {}
    _assert_same(observed_gaussian_tree(Xf, p, mean, cov, tree=forest, stats=stats, refresh_every=None),
                 observed_gaussian(Xf, p, mean, prec[0], logdet[0]))
    assert stats["n_scratch"] == forest.n_clusters
    assert stats["n_updates"] == forest.n_patterns - forest.n_clusters
    assert stats["sum_nd"] == forest.total_weight


@pytest.mark.parametrize("refresh", [None, 0, 1, 4])
def test_refresh_every_recomputes_at_multiples_of_depth(refresh):
    rng = np.random.default_rng(12)
    Xf, missing, mean, cov = _case("squares", rng)
    p = group_patterns(missing)
    tree = build_pattern_tree(p)
    stats = {}
    observed_gaussian_tree(Xf, p, mean, cov, tree=tree, refresh_every=refresh, stats=stats)
    expected = set(tree.roots.tolist())
    if refresh:
        expected |= set(np.flatnonzero(tree.depth % refresh == 0).tolist())
    assert set(stats["scratch_nodes"]) == expected
    np.testing.assert_array_equal(np.flatnonzero(tree.scratch_nodes(refresh)), sorted(expected))
    if not refresh:
        assert stats["peak_states"] == tree.peak_states


def test_deep_chain_drift_without_refresh():
    """Sliding window of 6 missing columns over 110: a chain of 105 patterns, depth ~52 from the centre."""
    rng = np.random.default_rng(13)
    d, w = 110, 6
    cols = np.arange(d)
    starts = np.repeat(np.arange(d - w + 1), 2)
    missing = (cols >= starts[:, None]) & (cols < starts[:, None] + w)
    cov = _spd(rng, d, jitter=1.0)
    mean = rng.standard_normal(d)
    Xf = np.where(missing, 0.0, rng.multivariate_normal(mean, cov, size=missing.shape[0]))
    p = group_patterns(missing)
    tree = build_pattern_tree(p)
    assert tree.max_depth >= 50
    exact = observed_gaussian_naive(Xf, p, mean, cov)
    drift = observed_gaussian_tree(Xf, p, mean, cov, tree=tree, refresh_every=None)
    _assert_same(drift, exact)


# --------------------------------------------------------------------------- bad input


def test_singular_covariance_raises_clear_error():
    rng = np.random.default_rng(14)
    Xf, missing, mean, cov = _case("mcar", rng)
    A = rng.standard_normal((12, 4))
    singular = A @ A.T  # rank 4
    p = group_patterns(missing)
    for f in (observed_gaussian_tree, observed_gaussian_naive):
        with pytest.raises(DegenerateCovarianceError, match="singular or not positive definite"):
            f(Xf, p, mean, singular)


def test_wrong_shapes_and_arguments_raise_bad_input():
    rng = np.random.default_rng(15)
    Xf, missing, mean, cov = _case("mcar", rng)
    p = group_patterns(missing)
    for f in (observed_gaussian_tree, observed_gaussian_naive):
        with pytest.raises(BadInputError, match="Xf must have the shape"):
            f(Xf[:, :5], p, mean, cov)
        with pytest.raises(BadInputError, match="mean must have shape"):
            f(Xf, p, mean[:3], cov)
        with pytest.raises(BadInputError, match="covariance must have shape"):
            f(Xf, p, mean, cov[:3, :3])
        with pytest.raises(BadInputError, match="symmetric"):
            f(Xf, p, mean, cov + np.triu(np.ones_like(cov), 1))
        with pytest.raises(BadInputError, match="MissingPatterns"):
            f(Xf, missing, mean, cov)
    other = build_pattern_tree(group_patterns(rng.random((50, 12)) < 0.2))
    with pytest.raises(BadInputError, match="other missingness patterns"):
        observed_gaussian_tree(Xf, p, mean, cov, tree=other)
    with pytest.raises(BadInputError, match="refresh_every"):
        observed_gaussian_tree(Xf, p, mean, cov, refresh_every=-2)
    with pytest.raises(BadInputError, match="not in perm"):
        cholesky_update(np.eye(2), np.array([0, 1]), np.eye(3), remove=[2])


@pytest.mark.parametrize(
    "missing",
    [
        np.ones((4, 3), dtype=bool),  # nothing observed anywhere: no pattern at all
        np.zeros((5, 3), dtype=bool),  # one pattern, complete rows
        np.array([[1, 1, 0], [0, 1, 1], [1, 0, 1], [0, 0, 0], [1, 1, 1], [1, 1, 0]], dtype=bool),  # n_o = 0 in between
    ],
)
def test_edge_cases_match_observed_gaussian(missing):
    rng = np.random.default_rng(16)
    cov = _spd(rng, 3)
    mean = rng.standard_normal(3)
    Xf = np.where(missing, 0.0, rng.standard_normal(missing.shape))
    p = group_patterns(missing)
    prec, logdet = precision_and_logdet(cov[None])
    ref = observed_gaussian(Xf, p, mean, prec[0], logdet[0])
    tree = build_pattern_tree(p)
    assert tree.n_patterns == p.n_patterns
    _check_traversal(tree)
    for res in (observed_gaussian_tree(Xf, p, mean, cov, tree=tree, refresh_every=None),
                observed_gaussian_naive(Xf, p, mean, cov)):
        _assert_same(res, ref)


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_cholesky_update_property(data):
    """Any removals then appends give the factor of the permuted submatrix (hypothesis, sparingly)."""
    d = data.draw(st.integers(1, 9), label="d")
    seed = data.draw(st.integers(0, 2**16), label="seed")
    cov = _spd(np.random.default_rng(seed), d)
    perm = np.array(data.draw(st.permutations(range(d)), label="perm")[: data.draw(st.integers(0, d))], dtype=int)
    remove = data.draw(st.lists(st.sampled_from(perm.tolist()), unique=True), label="remove") if perm.size else []
    free = [v for v in range(d) if v not in set(perm.tolist())]
    append = data.draw(st.permutations(free), label="append")[: data.draw(st.integers(0, len(free)))] if free else []
    L = _chol_of(cov, perm) if perm.size else np.zeros((0, 0))
    L2, perm2 = cholesky_update(L, perm, cov, remove=remove, append=append)
    kept = [v for v in perm.tolist() if v not in set(remove)]
    assert perm2.tolist() == kept + list(append)
    if perm2.size:
        np.testing.assert_allclose(L2, _chol_of(cov, perm2), rtol=0, atol=1e-10)
