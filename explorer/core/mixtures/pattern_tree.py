r"""Delalleau, Courville & Bengio's tree-ordered E-step for full-covariance Gaussians (delalleau2012).

One component's E-step needs, for every distinct missingness pattern, a factorisation of the
observed block :math:`\Sigma_{oo}` (log-density, conditional mean) and the conditional covariance
:math:`K = \Sigma_{mm} - \Sigma_{mo}\Sigma_{oo}^{-1}\Sigma_{om}`. Computing both from scratch costs
:math:`O(n_o^3)` per pattern (the paper's *naive* baseline, :func:`observed_gaussian_naive`). The
paper instead

1. extracts the distinct patterns (:func:`unique_patterns`),
2. links them by a minimum spanning tree (MST) of the complete graph whose edge weights are
   Hamming distances :math:`n_d` between missingness vectors (:func:`build_pattern_tree`),
3. walks the tree parent-before-child and derives every pattern's matrices from its parent's:

   * the Cholesky factor :math:`L L^\top = \Sigma_{oo}` by removing the rows/columns of newly
     missing variables (Givens rotations: a rank-one *update* of the trailing block) and then
     appending newly observed variables as last row/column (forward substitution),
     :math:`O(n_d n_o^2)` per edge (:func:`cholesky_update`);
   * :math:`K` by the inverse variance lemma with the global precision :math:`P=\Sigma^{-1}`,
     :math:`O(n_d n_m^2)` per edge (:func:`lemma_remove_missing`, :func:`lemma_add_missing`).

:func:`observed_gaussian_tree` and :func:`observed_gaussian_naive` return exactly what
:func:`explorer.core.gaussians.gaussian.observed_gaussian` returns (log-densities with the *correct*
normaliser :math:`(2\pi)^{-n_o/2}|\Sigma_{oo}|^{-1/2}`, erratum of eq. 2; completions; one
``(n_unique, m, m)`` stack of conditional covariances per group, in the group's pattern order and
sorted-missing-column order), but take the covariance instead of the precision. The project's
default kernel :func:`~explorer.core.gaussians.gaussian.observed_gaussian` works on the precision side and
factors only the ``m x m`` block per pattern (the digest's section 9 "complement trick"); when
:math:`n_m \ll n_o` (MNIST squares) it is much faster than both of these, see
``benchmarks/bench_pattern_tree.py``.

Design decisions (the paper leaves them open)
---------------------------------------------
* **Root**: the *centre* of each MST (middle of a longest path, hop count), which minimises the
  tree height, i.e. the longest chain of incremental updates and so the accumulated round-off
  (the paper's stability concern; REF-IMPL instead picks the root minimising memory). Memory is
  still kept small: children are visited in increasing order of their Strahler-like "number of
  states held at once" (``PatternTree.need``) and the last (heaviest) child inherits its parent's
  state in place, so only branching nodes with unvisited children keep a copy; the peak number of
  live factor buffers is ``PatternTree.peak_states`` (3-5 for the MNIST grid).
* **Refresh**: a pattern whose depth is a multiple of ``refresh_every`` (default
  :data:`REFRESH_EVERY`) is recomputed from scratch; ``0`` or ``None`` = only the roots.
* **Update order** along an edge: Cholesky side removals then appends (removals fused into one
  sweep of Givens rotations over the trailing block, appends into one multi-column forward
  substitution: the same factor as one variable at a time, with one pass over memory per edge);
  :math:`K` side "remove missing" (variables that become observed) then "add missing". Both shrink
  first, so the intermediate matrices are the smaller ones (intersection patterns, always SPD).
* **Large p** (footnote 3): above :data:`MST_MAX_PATTERNS` distinct patterns, the patterns are
  first clustered by Hamming k-median (majority-vote templates, deterministic farthest-point
  start) into clusters of at most that size, one MST per cluster, each cluster root from scratch.
  The dense Hamming matrix of a cluster is then at most 4000 x 4000 (64 MB as float32).
* **Storage and kernels**: a factor is kept as ``U = L^T`` in the upper triangle of a C-ordered
  ``(s, s)`` buffer (``s`` = the largest number of observed features of a pattern) with the feature
  order ``perm`` beside it; the per-edge updates are numba
  kernels (removals fused into one Givens sweep, appends into one blocked forward substitution,
  which give the same factor as one variable at a time). Per-row solves use all the rows of a
  pattern as right-hand sides, in numba below :data:`NUMBA_SOLVE_MAX` multiply-adds.

Using it from EM
----------------
Build the tree once per data set, ``tree = build_pattern_tree(patterns)``, with the very
:class:`MissingPatterns` passed to the E-step (``sort=True`` or not: the patterns, not the rows,
matter; a tree from other patterns is rejected with a :class:`BadInputError`), then per component
``observed_gaussian_tree(Xf, patterns, means[k], covariances[k], tree=tree, out=xhat[k])``; pass
``precision=`` when :math:`\Sigma^{-1}` is at hand, else it is computed (one ``d x d`` Cholesky)
when ``conditionals`` is true.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from scipy.linalg.lapack import dtrtrs
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import breadth_first_order

from explorer.core.gaussians.gaussian import (
    LOG_2PI,
    PIVOT_RTOL,
    DegenerateCovarianceError,
    cholesky,
    precision_and_logdet,
)
from explorer.core.gaussians.patterns import MissingPatterns
from explorer.core.validation import BadInputError

__all__ = [
    "MST_MAX_PATTERNS",
    "REFRESH_EVERY",
    "UniquePatterns",
    "PatternTree",
    "unique_patterns",
    "hamming_distances",
    "build_pattern_tree",
    "cholesky_update",
    "lemma_add_missing",
    "lemma_remove_missing",
    "observed_gaussian_tree",
    "observed_gaussian_naive",
]

#: Above this many distinct patterns the MST is built per Hamming k-median cluster (footnote 3):
#: a dense p x p Hamming matrix and Prim's O(p^2) stay below ~0.1 s and 64 MB per cluster.
MST_MAX_PATTERNS = 4000
#: Default refresh period: patterns at depths 0, 32, 64, ... are factored from scratch.
REFRESH_EVERY = 32


# --------------------------------------------------------------------------- unique patterns


def _kernels():
    """The compiled kernels of this module (imported on first use: ``import explorer`` never loads numba)."""
    from explorer.core._compiled import pattern_tree

    return pattern_tree



@dataclass(frozen=True, eq=False, slots=True)
class UniquePatterns:
    """The distinct missingness patterns of the non-empty rows of a :class:`MissingPatterns`.

    Attributes
    ----------
    missing : ndarray of bool, shape (n_patterns, n_features)
        One row per distinct pattern (True = missing), groups in order, then the group's
        ``unique_mis`` order.
    counts : ndarray of int, shape (n_patterns,)
        Number of data rows with each pattern.
    group_index : tuple of ndarray
        ``group_index[g][u]`` is the index into ``missing`` of unique pattern ``u`` of group ``g``.
    node_group, node_unique : ndarray of int, shape (n_patterns,)
        The inverse map: pattern ``i`` is unique pattern ``node_unique[i]`` of group ``node_group[i]``.
    """

    missing: np.ndarray
    counts: np.ndarray
    group_index: tuple
    node_group: np.ndarray
    node_unique: np.ndarray

    @property
    def n_patterns(self) -> int:
        return self.missing.shape[0]


def _ro(*arrays):
    for a in arrays:
        a.setflags(write=False)


def unique_patterns(patterns: MissingPatterns) -> UniquePatterns:
    """Distinct patterns of all groups (a group is one number of missing entries, so groups never share one)."""
    if not isinstance(patterns, MissingPatterns):
        raise BadInputError(f"patterns must be a MissingPatterns (from group_patterns), got {type(patterns).__name__}.")
    d = patterns.n_features
    blocks, counts, index, ng, nu = [], [], [], [], []
    start = 0
    for gi, g in enumerate(patterns.groups):
        nu_g = g.n_unique
        block = np.zeros((nu_g, d), dtype=bool)
        if g.n_missing:
            block[np.arange(nu_g)[:, None], g.unique_mis] = True
        blocks.append(block)
        counts.append(np.bincount(g.inverse, minlength=nu_g))
        index.append(np.arange(start, start + nu_g))
        ng.append(np.full(nu_g, gi))
        nu.append(np.arange(nu_g))
        start += nu_g
    cat = (lambda xs, shape, dt: np.concatenate(xs) if xs else np.zeros(shape, dtype=dt))
    out = UniquePatterns(
        missing=cat(blocks, (0, d), bool), counts=cat(counts, 0, np.intp), group_index=tuple(index),
        node_group=cat(ng, 0, np.intp), node_unique=cat(nu, 0, np.intp),
    )
    _ro(out.missing, out.counts, out.node_group, out.node_unique, *out.group_index)
    return out


# --------------------------------------------------------------------------- MST


def hamming_distances(A: np.ndarray, B: np.ndarray | None = None) -> np.ndarray:
    """Hamming distances between the boolean rows of ``A`` and ``B`` (default ``A``), int32.

    By one matrix product on the 0/1 matrices: :math:`|a| + |b| - 2 a\\cdot b` (float32 products are
    exact below 2**24 features).
    """
    A = np.asarray(A, dtype=bool)
    B = A if B is None else np.asarray(B, dtype=bool)
    a = A.astype(np.float32)
    b = a if B is A else B.astype(np.float32)
    H = a.sum(axis=1)[:, None] + b.sum(axis=1)[None, :] - 2.0 * (a @ b.T)
    return np.rint(H).astype(np.int32)


def _kmedian_clusters(A: np.ndarray, max_size: int, n_iter: int = 20) -> list[np.ndarray]:
    """Hamming k-median clusters of the rows of ``A`` (majority-vote templates), each at most ``max_size``.

    Deterministic: farthest-point start from row 0, Lloyd-style iterations. Clusters that are still
    too large are split again; empty ones are dropped.
    """
    p = A.shape[0]
    if p <= max_size:
        return [np.arange(p)]
    k = max(2, int(np.ceil(2 * p / max_size)))
    centres = [0]
    dmin = hamming_distances(A, A[[0]])[:, 0]
    for _ in range(k - 1):
        c = int(np.argmax(dmin))
        centres.append(c)
        dmin = np.minimum(dmin, hamming_distances(A, A[[c]])[:, 0])
    T = A[centres]
    label = np.full(p, -1)
    for _ in range(n_iter):
        new = np.argmin(hamming_distances(A, T), axis=1)
        if np.array_equal(new, label):
            break
        label = new
        T = np.stack([A[label == j].mean(axis=0) >= 0.5 if np.any(label == j) else T[j] for j in range(T.shape[0])])
    out = []
    for j in range(T.shape[0]):
        idx = np.flatnonzero(label == j)
        if idx.size == 0:
            continue
        if idx.size > max_size:
            if idx.size == p:  # no progress (e.g. identical templates): split by index
                out.extend(np.array_split(idx, int(np.ceil(idx.size / max_size))))
            else:
                out.extend(idx[sub] for sub in _kmedian_clusters(A[idx], max_size, n_iter))
        else:
            out.append(idx)
    return out


def _tree_centre(adj: csr_matrix, start: int) -> int:
    """Middle node of a longest (hop-count) path of the tree containing ``start``."""
    order, _ = breadth_first_order(adj, start, directed=False, return_predecessors=True)
    a = int(order[-1])
    order, pred = breadth_first_order(adj, a, directed=False, return_predecessors=True)
    path = [int(order[-1])]
    while path[-1] != a:
        path.append(int(pred[path[-1]]))
    return path[len(path) // 2]


@dataclass(frozen=True, eq=False, slots=True)
class PatternTree:
    """The spanning forest over the distinct patterns and its traversal (build once per data set).

    Node ``i`` is pattern ``patterns[i]`` (the order of :func:`unique_patterns`). Each cluster
    (one unless ``n_patterns > MST_MAX_PATTERNS``) is one tree, rooted at its centre.

    Attributes
    ----------
    patterns : ndarray of bool, shape (n_patterns, n_features)
        The distinct missingness patterns (True = missing).
    counts : ndarray of int, shape (n_patterns,)
        Data rows per pattern.
    node_group, node_unique : ndarray of int, shape (n_patterns,)
        Node ``i`` is unique pattern ``node_unique[i]`` of group ``node_group[i]`` of the
        :class:`MissingPatterns` the tree was built from.
    parents : ndarray of int, shape (n_patterns,)
        Parent node, -1 at the roots.
    order : ndarray of int, shape (n_patterns,)
        Depth-first preorder (every parent before its children); a node's children follow in
        increasing order of ``need`` so that the last one inherits the parent's state.
    depth : ndarray of int, shape (n_patterns,)
        Number of edges to the root (= number of incremental updates without refresh).
    weights : ndarray of int, shape (n_patterns,)
        Hamming distance :math:`n_d` of the edge to the parent (0 at the roots).
    cluster : ndarray of int, shape (n_patterns,)
        Cluster (tree) of each node.
    need : ndarray of int, shape (n_patterns,)
        Strahler-like number of states the subtree's traversal holds at once.
    total_weight : int
        Sum of the edge weights (the MST weight; per tree, summed over the forest).
    peak_states : int
        Peak number of stored factors during the traversal (without refreshes).
    """

    patterns: np.ndarray
    counts: np.ndarray
    node_group: np.ndarray
    node_unique: np.ndarray
    parents: np.ndarray
    order: np.ndarray
    depth: np.ndarray
    weights: np.ndarray
    cluster: np.ndarray
    need: np.ndarray
    total_weight: int
    peak_states: int

    @property
    def n_patterns(self) -> int:
        return self.patterns.shape[0]

    @property
    def roots(self) -> np.ndarray:
        return np.flatnonzero(self.parents < 0)

    @property
    def n_clusters(self) -> int:
        return int(self.roots.size)

    @property
    def edges(self) -> np.ndarray:
        """(n_edges, 2) array of (child, parent) pairs."""
        child = np.flatnonzero(self.parents >= 0)
        return np.column_stack([child, self.parents[child]])

    @property
    def max_depth(self) -> int:
        return int(self.depth.max()) if self.depth.size else 0

    @property
    def mean_nd(self) -> float:
        """Mean Hamming weight of the edges (the paper's :math:`n_d`)."""
        w = self.weights[self.parents >= 0]
        return float(w.mean()) if w.size else 0.0

    def scratch_nodes(self, refresh_every: int | None = REFRESH_EVERY) -> np.ndarray:
        """Boolean mask of the nodes factored from scratch: roots and depths that are multiples of ``refresh_every``."""
        r = _check_refresh(refresh_every)
        mask = self.parents < 0
        if r:
            mask = mask | (self.depth % r == 0)
        return mask

    def stats(self) -> dict:
        """Summary numbers for display: patterns, clusters, total and mean edge weight, depths, peak states."""
        return {
            "n_patterns": self.n_patterns, "n_clusters": self.n_clusters, "total_weight": self.total_weight,
            "mean_nd": self.mean_nd, "max_depth": self.max_depth,
            "mean_depth": float(self.depth.mean()) if self.depth.size else 0.0, "peak_states": self.peak_states,
        }


def _check_refresh(refresh_every) -> int:
    if refresh_every is None:
        return 0
    ok = isinstance(refresh_every, (int, np.integer)) and not isinstance(refresh_every, (bool, np.bool_))
    if not ok or refresh_every < 0:
        raise BadInputError(
            f"refresh_every must be a non-negative integer or None (0/None = never), got {refresh_every!r}."
        )
    return int(refresh_every)


def _peak_states(parents: np.ndarray, order: np.ndarray) -> int:
    """Simulate the traversal of :func:`_walk` (no refresh): peak number of live states."""
    remaining = np.bincount(parents[parents >= 0], minlength=parents.size)
    live = peak = 0
    cur = -1
    saved = set()
    for v in order:
        u = parents[v]
        if cur >= 0 and (u < 0 or cur != u):
            live -= 1  # cur is a leaf: released
            cur = -1
        if u >= 0:
            remaining[u] -= 1
            last = remaining[u] == 0
            if cur == u:
                if not last:
                    saved.add(u)
                    live += 1  # copy
            else:
                if last:
                    saved.discard(u)
                else:
                    live += 1
        else:
            live += 1
        cur = v
        peak = max(peak, live)
    return peak


def build_pattern_tree(patterns: MissingPatterns, *, max_mst_patterns: int = MST_MAX_PATTERNS) -> PatternTree:
    """Hamming-distance MST (a forest above ``max_mst_patterns`` patterns) and its traversal.

    Parameters
    ----------
    patterns : MissingPatterns
    max_mst_patterns : int
        Clusters of at most this many patterns get one dense MST each (see :data:`MST_MAX_PATTERNS`).
    """
    up = unique_patterns(patterns)
    if not isinstance(max_mst_patterns, (int, np.integer)) or max_mst_patterns < 2:
        raise BadInputError(f"max_mst_patterns must be an integer >= 2, got {max_mst_patterns!r}.")
    A = up.missing
    p = A.shape[0]
    parents = np.full(p, -1, dtype=np.intp)
    weights = np.zeros(p, dtype=np.intp)
    cluster = np.zeros(p, dtype=np.intp)
    clusters = _kmedian_clusters(A, int(max_mst_patterns)) if p else []
    for ci, idx in enumerate(clusters):
        cluster[idx] = ci
        H = hamming_distances(A[idx])
        par = _kernels().prim_dense(H)
        child = np.flatnonzero(par >= 0)
        if child.size == 0:
            continue
        adj = csr_matrix((np.ones(child.size), (child, par[child])), shape=(idx.size, idx.size))
        root = _tree_centre(adj, 0)
        order, pred = breadth_first_order(adj, root, directed=False, return_predecessors=True)
        local_par = np.where(pred < 0, -1, pred)
        local_par[root] = -1
        nonroot = local_par >= 0
        parents[idx[nonroot]] = idx[local_par[nonroot]]
        weights[idx[nonroot]] = H[np.flatnonzero(nonroot), local_par[nonroot]]
    # depths (BFS order of each tree: parents first), needs (reverse), preorder
    children = [[] for _ in range(p)]
    for v in range(p):
        if parents[v] >= 0:
            children[parents[v]].append(v)
    roots = np.flatnonzero(parents < 0)
    bfs = list(roots)
    for v in bfs:  # grows while iterating
        bfs.extend(children[v])
    depth = np.zeros(p, dtype=np.intp)
    for v in bfs:
        if parents[v] >= 0:
            depth[v] = depth[parents[v]] + 1
    need = np.ones(p, dtype=np.intp)
    for v in reversed(bfs):
        ch = children[v]
        if ch:
            ch.sort(key=lambda c: (need[c], c))
            a = [need[c] for c in ch]
            need[v] = max(a[-1], a[-2] + 1) if len(a) > 1 else a[-1]
    order = []
    stack = list(reversed(roots.tolist()))
    while stack:
        v = stack.pop()
        order.append(v)
        stack.extend(reversed(children[v]))
    order = np.asarray(order, dtype=np.intp)
    tree = PatternTree(
        patterns=A, counts=up.counts, node_group=up.node_group, node_unique=up.node_unique,
        parents=parents, order=order, depth=depth, weights=weights, cluster=cluster, need=need,
        total_weight=int(weights.sum()), peak_states=_peak_states(parents, order) if p else 0,
    )
    _ro(parents, order, depth, weights, cluster, need)
    return tree


# --------------------------------------------------------------------------- incremental Cholesky (numba)


# The factors are stored transposed, as the upper triangle U = L^T of a C-ordered square buffer: row i
# of U is column i of L, so the Givens rotations of a removal (column operations on L) and the
# forward substitution of an append (column-oriented) run over contiguous memory and vectorise.


def _pivot_tol(covariance: np.ndarray) -> float:
    d = covariance.shape[0]
    return float(PIVOT_RTOL * d * np.finfo(float).eps * np.max(np.diag(covariance))) if d else 0.0


def _append_error(v: int) -> DegenerateCovarianceError:
    return DegenerateCovarianceError(
        f"Appending feature {v} to the Cholesky factor of the observed-block covariance gave a non-positive "
        "pivot (its conditional variance given the observed features is zero or negative): the covariance is "
        "singular or not positive definite. Increase reg_covar, use fewer components, standardise the data, "
        "or drop constant / duplicated columns."
    )


def _apply_chol_update(L, perm, n, remove_pos, append_vars, covariance, tol) -> int:
    remove_pos = np.ascontiguousarray(remove_pos, dtype=np.int64)  # any order
    append_vars = np.ascontiguousarray(append_vars, dtype=np.int64)
    new_n = _kernels().chol_update(L, perm, n, remove_pos, append_vars, covariance, tol)
    if new_n < 0:
        raise _append_error(int(append_vars[-1 - new_n]))
    return new_n


def cholesky_update(L: np.ndarray, perm: np.ndarray, covariance: np.ndarray, *, remove=(), append=()):
    """Update a permuted Cholesky factor of an observed block (digest section 2.4), returning new arrays.

    Parameters
    ----------
    L : ndarray of shape (n_o, n_o)
        Lower factor of ``covariance[perm][:, perm]``.
    perm : ndarray of int, shape (n_o,)
        Feature index of each row of ``L``.
    covariance : ndarray of shape (n_features, n_features)
    remove : sequence of int
        Features (present in ``perm``) that become missing: removed first (one fused sweep).
    append : sequence of int
        Features (absent from ``perm``) that become observed: appended as last rows, in this order.

    Returns
    -------
    L_new : ndarray (lower triangle; the upper is zero)
    perm_new : ndarray of int

    Raises
    ------
    DegenerateCovarianceError
        When an appended feature has a non-positive conditional variance.
    """
    covariance = np.ascontiguousarray(covariance, dtype=float)
    d = covariance.shape[0]
    n = L.shape[0]
    buf = np.zeros((d, d))
    buf[:n, :n] = np.tril(L).T
    pbuf = np.zeros(d, dtype=np.int64)
    pbuf[:n] = perm
    pos = {int(v): i for i, v in enumerate(perm)}
    try:
        rpos = [pos[int(v)] for v in remove]
    except KeyError as e:
        raise BadInputError(f"cannot remove feature {e.args[0]}: it is not in perm.") from None
    if any(int(v) in pos and int(v) not in set(map(int, remove)) for v in append):
        raise BadInputError("cannot append a feature that is already in perm.")
    n = _apply_chol_update(buf, pbuf, n, rpos, np.asarray(append, dtype=np.int64), covariance, _pivot_tol(covariance))
    return np.tril(buf[:n, :n].T), pbuf[:n].copy()


# --------------------------------------------------------------------------- inverse variance lemma


#: Triangular solves run in the numba loop (no copy of the factor, no BLAS threads) when they have at
#: most :data:`NUMBA_SOLVE_MAX_RHS` right-hand sides or at most :data:`NUMBA_SOLVE_MAX` multiply-adds;
#: otherwise through LAPACK ``dtrtrs`` (BLAS-3) on one contiguous copy of the factor. OpenBLAS
#: threads its multi-right-hand-side solves, which on a busy machine costs 0.05-1 ms of
#: synchronisation per call, more than a small solve itself; for a 759 x 759 factor the numba loop
#: wins up to about 3 right-hand sides, LAPACK beyond (measured single-threaded).
NUMBA_SOLVE_MAX = 1 << 16
NUMBA_SOLVE_MAX_RHS = 3


class _Factor:
    """``U = L^T`` (upper, any layout) ready for repeated solves ``L^{-1} B`` / ``L^{-T} B``."""

    __slots__ = ("U", "L_f")

    def __init__(self, U: np.ndarray, n_rhs: int):
        n = U.shape[0]
        self.U = U
        use_lapack = n_rhs > NUMBA_SOLVE_MAX_RHS and n * n * n_rhs > NUMBA_SOLVE_MAX
        self.L_f = np.ascontiguousarray(U).T if use_lapack else None  # lower L, Fortran-ordered: no copy by f2py

    def solve(self, B: np.ndarray, *, trans: bool = False) -> np.ndarray:
        """``L^{-1} B`` (or ``L^{-T} B``), reading only the upper triangle of ``U``."""
        B = np.asarray(B, dtype=float)
        if B.ndim == 1:
            return self.solve(B[:, None], trans=trans)[:, 0]
        if self.U.shape[0] == 0 or B.shape[1] == 0:
            return np.zeros(B.shape)
        if self.L_f is None:
            return _kernels().tri_solve_numba(self.U, B, trans)
        X, info = dtrtrs(self.L_f, B, lower=1, trans=1 if trans else 0)
        if info != 0:
            raise DegenerateCovarianceError("A triangular factor has a zero pivot: the covariance is singular.")
        return X


def _tri_solve(U: np.ndarray, B: np.ndarray, *, trans: bool = False) -> np.ndarray:
    """``L^{-1} B`` (or ``L^{-T} B``) given ``U = L^T``, reading only the upper triangle of ``U``."""
    return _Factor(U, 1 if np.ndim(B) == 1 else np.shape(B)[1]).solve(B, trans=trans)


def _cho_solve(C: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``(C C^T)^{-1} B`` from a lower Cholesky factor ``C``."""
    return _tri_solve(C.T, _tri_solve(C.T, B), trans=True)


def _spd_factor(S: np.ndarray, what: str) -> np.ndarray:
    return cholesky(S, what=what)


def lemma_remove_missing(K: np.ndarray, mis: np.ndarray, observed_now) -> tuple[np.ndarray, np.ndarray]:
    """Conditional covariance after the missing features ``observed_now`` become observed.

    :math:`K_X = K_{XX} - K_{XY}K_{YY}^{-1}K_{YX}` (condition further on :math:`Y`), by a Cholesky
    factor of :math:`K_{YY}`; cost :math:`O(n_d n_m^2)`. ``K`` is in ``mis`` order; the result keeps
    the order of the remaining features.
    """
    mis = np.asarray(mis)
    gone = np.isin(mis, np.asarray(observed_now, dtype=np.intp))
    if not gone.any():
        return K, mis
    y = np.flatnonzero(gone)
    x = np.flatnonzero(~gone)
    C = _spd_factor(K[np.ix_(y, y)], "conditional covariance block")
    W = _tri_solve(C.T, K[np.ix_(y, x)])
    Kx = K[np.ix_(x, x)] - W.T @ W
    return 0.5 * (Kx + Kx.T), mis[x]


def lemma_add_missing(
    K: np.ndarray, mis: np.ndarray, missing_now, precision: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Conditional covariance after the observed features ``missing_now`` become missing (eqs 9-11).

    With :math:`X` = ``mis``, :math:`Y` = ``missing_now`` and :math:`P = \\Sigma^{-1}`:
    :math:`B = P_{YX}K`, :math:`S = P_{YY} - B P_{XY}`, and the new :math:`K` (in order ``mis`` then
    ``missing_now``) is :math:`\\begin{pmatrix}K + B^T S^{-1} B & -B^T S^{-1}\\\\ -S^{-1}B & S^{-1}\\end{pmatrix}`.
    Cost :math:`O(n_d n_m^2 + n_d^3)`.
    """
    y = np.asarray(missing_now, dtype=np.intp)
    if y.size == 0:
        return K, np.asarray(mis)
    mis = np.asarray(mis, dtype=np.intp)
    Pyx = precision[np.ix_(y, mis)]
    B = Pyx @ K
    S = precision[np.ix_(y, y)] - B @ Pyx.T
    C = _spd_factor(0.5 * (S + S.T), "conditional precision block")
    T = _cho_solve(C, B)  # S^{-1} B
    Sinv = _cho_solve(C, np.eye(y.size))
    m, nd = mis.size, y.size
    out = np.empty((m + nd, m + nd))
    out[:m, :m] = K + B.T @ T
    out[:m, m:] = -T.T
    out[m:, :m] = -T
    out[m:, m:] = 0.5 * (Sinv + Sinv.T)
    out[:m, :m] = 0.5 * (out[:m, :m] + out[:m, :m].T)
    return out, np.concatenate([mis, y])


# --------------------------------------------------------------------------- E-step kernels


def _check_inputs(Xf, patterns, mean, covariance, out, maha_out):
    if not isinstance(patterns, MissingPatterns):
        raise BadInputError(f"patterns must be a MissingPatterns (from group_patterns), got {type(patterns).__name__}.")
    Xf = np.asarray(Xf)
    n, d = patterns.missing.shape
    if Xf.ndim != 2 or Xf.shape != (n, d):
        raise BadInputError(f"Xf must have the shape of patterns.missing, {(n, d)}, got {Xf.shape}.")
    mean = np.asarray(mean, dtype=float)
    if mean.shape != (d,):
        raise BadInputError(f"mean must have shape ({d},) (one entry per feature), got {mean.shape}.")
    covariance = np.ascontiguousarray(covariance, dtype=float)
    if covariance.shape != (d, d):
        raise BadInputError(f"covariance must have shape ({d}, {d}), got {covariance.shape}.")
    if not np.all(np.isfinite(covariance)) or not np.all(np.isfinite(mean)):
        raise BadInputError("mean and covariance must be finite (no NaN or inf).")
    scale = max(1.0, float(np.abs(covariance).max(initial=0.0)))
    if not np.allclose(covariance, covariance.T, rtol=1e-10, atol=1e-12 * scale):
        raise BadInputError("covariance must be symmetric.")
    if out is not None and out.shape != (n, d):
        raise BadInputError(f"out must have shape {(n, d)}, got {out.shape}.")
    if maha_out is not None and maha_out.shape != (n,):
        raise BadInputError(f"maha_out must have shape ({n},), got {maha_out.shape}.")
    return Xf, mean, covariance


class _Out:
    """Output arrays shared by both kernels, initialised as :func:`observed_gaussian` does."""

    def __init__(self, Xf, patterns, mean, conditionals, out, maha_out):
        n, d = Xf.shape
        self.loglik = np.zeros(n)
        self.maha = maha_out
        if maha_out is not None:
            maha_out[...] = 0.0
        self.xhat = None
        self.cond_cov = None
        if conditionals:
            self.xhat = out if out is not None else np.empty((n, d))
            self.xhat[...] = Xf
            if patterns.empty_rows.size:
                self.xhat[patterns.empty_rows] = mean
            self.cond_cov = [np.zeros((g.n_unique, g.n_missing, g.n_missing)) if g.n_missing else np.zeros((1, 0, 0))
                             for g in patterns.groups]

    def rows(self, Xf, rows, Uo, obs, mis, mean, covariance, conditionals):
        """Per-row work of one pattern, all its rows as right-hand sides (BLAS-3).

        ``Uo = L^T`` with ``L L^T = covariance[obs][:, obs]`` (``obs`` in factor order); ``mis`` sorted.
        """
        n_o = obs.size
        Z = np.take(np.take(Xf, rows, axis=0), obs, axis=1) - mean[obs]  # (n_r, n_o)
        factor = _Factor(Uo, rows.size)
        W = factor.solve(Z.T)  # L^{-1} z
        quad = np.einsum("ij,ij->j", W, W)
        logdet = 2.0 * np.log(np.diagonal(Uo)).sum()
        self.loglik[rows] = -0.5 * (n_o * LOG_2PI + logdet + quad)
        if self.maha is not None:
            self.maha[rows] = quad
        if conditionals and mis.size:
            A = factor.solve(W, trans=True)  # Sigma_oo^{-1} z
            xm = mean[mis][:, None] + covariance[np.ix_(mis, obs)] @ A
            self.xhat[rows[:, None], mis[None, :]] = xm.T

    def result(self):
        return self.loglik, self.xhat, self.cond_cov


def observed_gaussian_naive(
    Xf: np.ndarray,
    patterns: MissingPatterns,
    mean: np.ndarray,
    covariance: np.ndarray,
    *,
    conditionals: bool = True,
    out: np.ndarray | None = None,
    maha_out: np.ndarray | None = None,
    stats: dict | None = None,
):
    """The paper's naive baseline: per distinct pattern, a Cholesky factor of :math:`\\Sigma_{oo}` from
    scratch (:math:`O(n_o^3)`) and :math:`K = \\Sigma_{mm} - \\Sigma_{mo}\\Sigma_{oo}^{-1}\\Sigma_{om}`.

    Same arguments and output as :func:`explorer.core.gaussians.gaussian.observed_gaussian`, except that it
    takes ``covariance`` (n_features, n_features) instead of ``precision`` and ``logdet_cov``.
    ``stats``, if given, receives ``pattern_seconds``, ``row_seconds``, ``n_scratch``.

    Raises
    ------
    DegenerateCovarianceError
        When an observed block is singular or not positive definite.
    """
    Xf, mean, covariance = _check_inputs(Xf, patterns, mean, covariance, out, maha_out)
    res = _Out(Xf, patterns, mean, conditionals, out, maha_out)
    d = covariance.shape[0]
    t_pat = t_row = 0.0
    n_scratch = 0
    allcols = np.arange(d)
    for gi, g in enumerate(patterns.groups):
        for u in range(g.n_unique):
            t0 = time.perf_counter()
            mis = g.unique_mis[u]
            obs = np.setdiff1d(allcols, mis, assume_unique=True) if mis.size else allcols
            Lo = cholesky(covariance[np.ix_(obs, obs)], what="observed-block covariance")
            Uo = np.ascontiguousarray(Lo.T)  # the row-major U = L^T the solves stream through
            n_scratch += 1
            if conditionals and mis.size:
                V = _tri_solve(Uo, covariance[np.ix_(obs, mis)])
                K = covariance[np.ix_(mis, mis)] - V.T @ V
                res.cond_cov[gi][u] = 0.5 * (K + K.T)
            t1 = time.perf_counter()
            res.rows(Xf, g.rows[g.members[u]], Uo, obs, mis, mean, covariance, conditionals)
            t_pat += t1 - t0
            t_row += time.perf_counter() - t1
    if stats is not None:
        stats.update(pattern_seconds=t_pat, row_seconds=t_row, n_scratch=n_scratch, n_updates=0, sum_nd=0)
    return res.result()


class _State:
    """A node's matrices: Cholesky factor ``U = L^T`` (active n x n of a buffer) with its feature order, and K."""

    __slots__ = ("node", "L", "perm", "n", "K", "mis")

    def __init__(self, node, L, perm, n, K, mis):
        self.node, self.L, self.perm, self.n, self.K, self.mis = node, L, perm, n, K, mis


def observed_gaussian_tree(
    Xf: np.ndarray,
    patterns: MissingPatterns,
    mean: np.ndarray,
    covariance: np.ndarray,
    *,
    conditionals: bool = True,
    out: np.ndarray | None = None,
    maha_out: np.ndarray | None = None,
    tree: PatternTree | None = None,
    refresh_every: int | None = REFRESH_EVERY,
    precision: np.ndarray | None = None,
    stats: dict | None = None,
):
    """Delalleau et al.'s E-step of one component: walk the pattern MST, updating L and K along the edges.

    Same arguments and output as :func:`explorer.core.gaussians.gaussian.observed_gaussian`, except that it
    takes ``covariance`` instead of ``precision`` / ``logdet_cov``, plus:

    Parameters
    ----------
    tree : PatternTree, optional
        From :func:`build_pattern_tree` on the same patterns (build it once per data set and pass it
        on every call; built here when omitted).
    refresh_every : int or None
        Factor from scratch at depths that are multiples of this (0/None: only at the roots).
    precision : ndarray of shape (n_features, n_features), optional
        :math:`\\Sigma^{-1}` if the caller has it (e.g. from ``precision_and_logdet``); otherwise it is
        computed here through a Cholesky factor, only when ``conditionals``.
    stats : dict, optional
        Receives ``pattern_seconds`` (factor and K updates), ``row_seconds`` (per-row solves),
        ``n_scratch`` (from-scratch factorisations), ``n_updates`` (incremental edges), ``sum_nd``
        (Hamming weight of the edges used), ``peak_states`` and ``scratch_nodes`` (list of nodes).

    Raises
    ------
    DegenerateCovarianceError
        When the covariance (or an observed block) is singular or not positive definite.
    """
    Xf, mean, covariance = _check_inputs(Xf, patterns, mean, covariance, out, maha_out)
    r = _check_refresh(refresh_every)
    if tree is None:
        tree = build_pattern_tree(patterns)
    elif not isinstance(tree, PatternTree):
        raise BadInputError(f"tree must be a PatternTree (from build_pattern_tree), got {type(tree).__name__}.")
    else:
        up = unique_patterns(patterns)
        if tree.patterns.shape != up.missing.shape or not np.array_equal(tree.patterns, up.missing):
            raise BadInputError(
                f"tree was built on other missingness patterns ({tree.n_patterns} patterns of "
                f"{tree.patterns.shape[1]} features; these data have {up.n_patterns} of {up.missing.shape[1]}): "
                "rebuild it with build_pattern_tree(patterns)."
            )
    d = covariance.shape[0]
    if conditionals and precision is None:
        precision = precision_and_logdet(covariance[None])[0][0]
    res = _Out(Xf, patterns, mean, conditionals, out, maha_out)
    tol = _pivot_tol(covariance)
    allcols = np.arange(d)
    # factor buffers are (size, size) with size the largest observed count: an edge removes before it
    # appends, so no intermediate factor is larger than its two end patterns
    size = int(tree.n_patterns and (~tree.patterns).sum(axis=1).max())
    pool: list[np.ndarray] = []
    live = peak = 0

    def new_buffer():
        nonlocal live, peak
        live += 1
        peak = max(peak, live)
        return pool.pop() if pool else np.empty((size, size))

    def release(state):
        nonlocal live
        live -= 1
        pool.append(state.L)

    def copy(state):
        L = new_buffer()
        n = state.n
        L[:n, :n] = state.L[:n, :n]
        return _State(state.node, L, state.perm.copy(), n, state.K, state.mis)  # K, mis are never modified in place

    def scratch(v):
        mis = np.flatnonzero(tree.patterns[v])
        obs = np.setdiff1d(allcols, mis, assume_unique=True) if mis.size else allcols
        Lo = cholesky(covariance[np.ix_(obs, obs)], what="observed-block covariance")
        L = new_buffer()
        L[: obs.size, : obs.size] = Lo.T
        perm = np.zeros(size, dtype=np.int64)
        perm[: obs.size] = obs
        K = None
        if conditionals:
            if mis.size:  # eq. 5: K = ((Sigma^{-1})_mm)^{-1}, by a Cholesky factor of P_mm
                C = cholesky(precision[np.ix_(mis, mis)], what="missing-block precision")
                K = _cho_solve(C, np.eye(mis.size))
                K = 0.5 * (K + K.T)
            else:
                K = np.zeros((0, 0))
        return _State(v, L, perm, obs.size, K, mis)

    def update(state, v):
        old = tree.patterns[state.node]
        new = tree.patterns[v]
        now_missing = np.flatnonzero(new & ~old)
        now_observed = np.flatnonzero(old & ~new)
        n = state.n
        if now_missing.size:
            where = np.zeros(d, dtype=bool)
            where[now_missing] = True
            rpos = np.flatnonzero(where[state.perm[:n]])
        else:
            rpos = np.zeros(0, dtype=np.int64)
        state.n = _apply_chol_update(state.L, state.perm, n, rpos, now_observed, covariance, tol)
        if conditionals:
            K, mis = lemma_remove_missing(state.K, state.mis, now_observed)
            state.K, state.mis = lemma_add_missing(K, mis, now_missing, precision)
        state.node = v
        return now_missing.size + now_observed.size

    refresh = tree.scratch_nodes(r)
    remaining = np.bincount(tree.parents[tree.parents >= 0], minlength=tree.n_patterns)
    saved: dict[int, _State] = {}
    cur = None
    t_pat = t_row = 0.0
    n_updates = sum_nd = 0
    scratch_list = []
    for v in tree.order:
        t0 = time.perf_counter()
        u = tree.parents[v]
        if cur is not None and (u < 0 or cur.node != u):
            release(cur)  # a leaf: nothing more hangs from it
            cur = None
        base = None
        if u >= 0:
            remaining[u] -= 1
            last = remaining[u] == 0
            if cur is not None:  # cur is u's state
                if not last:
                    saved[u] = cur
                base, cur = cur, None
            else:
                base = saved.pop(u) if last else saved[u]
            if refresh[v] and last:
                release(base)
                base = None
            elif not last:
                base = None if refresh[v] else copy(base)
        if base is None:
            state = scratch(v)
            scratch_list.append(int(v))
        else:
            state = base
            sum_nd += update(state, v)
            n_updates += 1
        g_idx, uu = tree.node_group[v], tree.node_unique[v]
        g = patterns.groups[g_idx]
        mis_sorted = g.unique_mis[uu]
        if conditionals and mis_sorted.size:
            pos = np.argsort(state.mis)  # state.mis[pos] is sorted
            res.cond_cov[g_idx][uu] = state.K[np.ix_(pos, pos)]
        t1 = time.perf_counter()
        res.rows(Xf, g.rows[g.members[uu]], state.L[: state.n, : state.n], state.perm[: state.n], mis_sorted,
                 mean, covariance, conditionals)
        t_pat += t1 - t0
        t_row += time.perf_counter() - t1
        cur = state
    if stats is not None:
        stats.update(pattern_seconds=t_pat, row_seconds=t_row, n_scratch=len(scratch_list), n_updates=n_updates,
                     sum_nd=sum_nd, peak_states=peak, scratch_nodes=scratch_list)
    return res.result()
