"""The "EM performance" page's model: E-step kernels timed live, and the pattern spanning tree of a small case.

Two parts (imports param, numpy, pandas and the core; never Panel):

* **Sweep** (:meth:`PerformanceModel.sweep`): for a few values of the chosen x-axis (the number of distinct
  missingness patterns, the number of features D, or the missing rate), build a small data set with a
  structured mask (a k x k square per row of a side x side image, or MCAR patterns) and time, per strategy,

  - one component's E-step with each kernel: the project's precision-side kernel
    :func:`explorer.core.gaussians.gaussian.observed_gaussian` (factors the m x m missing block of the precision per
    pattern), Delalleau et al.'s minimum-spanning-tree kernel
    :func:`explorer.core.mixtures.pattern_tree.observed_gaussian_tree` and the paper's naive baseline
    :func:`explorer.core.mixtures.pattern_tree.observed_gaussian_naive`;
  - when :class:`explorer.core.mixtures.em_gmm.EMConfig` has a ``strategy`` field (checked at run time with
    :func:`dataclasses.fields`, see :func:`em_strategies`), also one full EM ``step`` (K = 1) per strategy
    (``numpy``, ``compiled``, ``tree``, ``naive``).

  Every number is a measurement (``time.perf_counter``, the best of ``repeats`` calls after one untimed
  warm-up call); a strategy that fails is reported in the ``error`` column, never hidden. Beside them the
  theoretical flop counts of the three kernels (:func:`theoretical_flops`).

* **Tree** (:meth:`PerformanceModel.tree_case`, :meth:`PerformanceModel.path`): the MST over the distinct
  patterns of a small case (squares on a small image: nodes at the square positions; MCAR: a layered layout
  by depth), with the nodes factored from scratch for a ``refresh_every``, and for one node the chain of
  Cholesky / K updates from its root (or from the last refreshed node) with their costs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import threading
import time
from collections.abc import Callable

import numpy as np
import pandas as pd
import param

from explorer.core.gaussians.gaussian import observed_gaussian, precision_and_logdet
from explorer.core.gaussians.patterns import group_patterns
from explorer.core.validation import BadInputError
from explorer.ui.state._settings import MAX_SEED, Settings

__all__ = ["KERNELS", "EM_STRATEGIES", "MASKS", "X_AXES", "PerformanceModel", "em_strategies", "theoretical_flops",
           "square_patterns", "mcar_patterns", "SWEEP_COLUMNS"]

#: The E-step kernels of one component: key -> label.
KERNELS = {"precision": "precision-side kernel (observed_gaussian)", "tree": "MST kernel (Delalleau et al.)",
           "naive": "naive per-pattern kernel"}
#: EMConfig.strategy values timed as a full EM step (when the field exists): key -> label.
EM_STRATEGIES = {"numpy": "EM step · numpy (precision side)", "compiled": "EM step · compiled",
                 "tree": "EM step · tree", "naive": "EM step · naive"}
MASKS = {"squares": "k x k square per row (image)", "mcar": "MCAR patterns (tabular)"}
X_AXES = {"patterns": "number of distinct patterns", "features": "number of features D",
          "rate": "missing rate"}
#: Columns of :meth:`PerformanceModel.sweep`'s table.
SWEEP_COLUMNS = ("x", "series", "kind", "strategy", "seconds", "n_patterns", "n_features", "missing_rate", "n_rows",
                 "flops", "error")
#: Smallest image side of the square masks (D = side x side >= 16).
MIN_SIDE = 4


def em_strategies() -> tuple[str, ...]:
    """The strategies of a full EM step that can be timed: those of :data:`EM_STRATEGIES` when
    ``explorer.core.mixtures.em_gmm.EMConfig`` has a ``strategy`` field, else none (only the kernels are timed)."""
    from explorer.core.mixtures import em_gmm

    names = {f.name for f in dataclasses.fields(em_gmm.EMConfig)}
    if "strategy" not in names:
        return ()
    allowed = getattr(em_gmm, "STRATEGIES", tuple(EM_STRATEGIES))
    return tuple(s for s in EM_STRATEGIES if s in allowed)


# ----------------------------------------------------------------------------- mask generators
def square_positions(side: int, size: int) -> list[tuple[int, int]]:
    """Top-left corners (row, column) of every size x size square inside a side x side image."""
    return [(r, c) for r in range(side - size + 1) for c in range(side - size + 1)]


def square_patterns(side: int, size: int, n_patterns: int, rng: np.random.Generator):
    """``n_patterns`` distinct square masks (True = missing) of a side x side image, and their corners.

    All positions when ``n_patterns`` is at least their number, else a random subset (sorted).
    """
    if not 1 <= size <= side:
        raise BadInputError(f"the square side {size} must be between 1 and the image side {side}.")
    pos = square_positions(side, size)
    if n_patterns < len(pos):
        pick = np.sort(rng.choice(len(pos), size=n_patterns, replace=False))
        pos = [pos[i] for i in pick]
    out = np.zeros((len(pos), side, side), dtype=bool)
    for i, (r, c) in enumerate(pos):
        out[i, r:r + size, c:c + size] = True
    return out.reshape(len(pos), side * side), pos


def mcar_patterns(n_features: int, rate: float, n_patterns: int, rng: np.random.Generator) -> np.ndarray:
    """``n_patterns`` distinct MCAR patterns: each entry missing with probability ``rate``, at least one
    entry observed and one missing per pattern (rows of the shared E-step need both)."""
    if n_features < 2:
        raise BadInputError(f"MCAR patterns need at least 2 features, got {n_features}.")
    possible = 2 ** n_features - 2 if n_features < 60 else math.inf
    if n_patterns > possible:
        raise BadInputError(f"{n_patterns} distinct MCAR patterns cannot be made with {n_features} features "
                            f"(at most {int(possible)}); use fewer patterns or more features.")
    seen: dict[bytes, np.ndarray] = {}
    for _ in range(200):
        block = rng.random((max(2 * n_patterns, 16), n_features)) < rate
        for row in block:
            if row.any() and not row.all():
                seen.setdefault(row.tobytes(), row)
                if len(seen) == n_patterns:
                    return np.array(list(seen.values()))
    raise BadInputError(f"could not draw {n_patterns} distinct MCAR patterns of {n_features} features at rate "
                        f"{rate:g} (only {len(seen)}); use a rate nearer 0.5, fewer patterns or more features.")


def _random_covariance(d: int, rng: np.random.Generator) -> np.ndarray:
    A = rng.standard_normal((d, d))
    cov = A @ A.T / d + np.eye(d)
    return 0.5 * (cov + cov.T)


def theoretical_flops(patterns: np.ndarray, parents=None, weights=None, scratch=None) -> dict:
    """Flop counts of one component's factorisations (leading terms), per kernel.

    ``naive``: sum of n_o^3/3 over the patterns; ``precision``: d^3 once (precision) + sum of m^3/3;
    ``tree`` (needs the tree's ``parents``, edge ``weights`` n_d and the ``scratch`` mask): n_o^3/3 per
    node factored from scratch + n_d n_o^2 per other node (Cholesky updates along its edge).
    """
    patterns = np.asarray(patterns, dtype=bool)
    d = patterns.shape[1]
    m = patterns.sum(axis=1).astype(float)
    n_o = d - m
    out = {"naive": float(np.sum(n_o ** 3) / 3), "precision": float(d ** 3 + np.sum(m ** 3) / 3)}
    if parents is not None:
        scratch = np.asarray(scratch, dtype=bool)
        w = np.asarray(weights, dtype=float)
        out["tree"] = float(np.sum(n_o[scratch] ** 3) / 3 + np.sum(w[~scratch] * n_o[~scratch] ** 2))
    return out


# ----------------------------------------------------------------------------- the model
_SWEEP_SETTINGS = ("x_axis", "mask", "n_patterns", "n_features", "missing_rate", "rows_per_pattern", "n_points",
                   "repeats", "kernels", "em_step", "seed")
_TREE_SETTINGS = ("tree_mask", "tree_side", "tree_square", "tree_features", "tree_rate", "tree_rows",
                  "refresh_every", "colour_by", "node")


_WARM = {"started": False}
_WARM_LOCK = threading.Lock()


def warm_up_kernels() -> None:
    """Load (or, on a fresh clone, compile) the numba kernels of every strategy once per process, on a daemon
    thread, so that the first Measure does not pay it (about 0.5 s from numba's disk cache, 6-9 s to compile)."""
    with _WARM_LOCK:
        if _WARM["started"]:
            return
        _WARM["started"] = True

    def run():
        try:
            from explorer.core.gaussians.patterns import group_patterns
            from explorer.core.mixtures.em_gmm import warm_up_kernels as warm_em
            from explorer.core.mixtures.pattern_tree import observed_gaussian_tree

            warm_em(background=False)
            missing = np.zeros((4, 3), dtype=bool)
            missing[0, 0] = missing[1, 1] = missing[2, :2] = True
            observed_gaussian_tree(np.zeros((4, 3)), group_patterns(missing), np.zeros(3), np.eye(3))
        except Exception:  # pragma: no cover - best effort: a real problem shows in the measurement
            pass

    threading.Thread(target=run, name="explorer-performance-warm-up", daemon=True).start()


class PerformanceModel(Settings):
    """Settings and computations of the EM performance page (see the module docstring).

    Examples
    --------
    >>> model = PerformanceModel(n_points=2, repeats=1)
    >>> table = model.sweep()
    >>> sorted(table["series"].unique())[:3]
    ['em:compiled', 'em:naive', 'em:numpy']
    >>> bool((table["seconds"] > 0).all())
    True
    """

    _SETTINGS = _SWEEP_SETTINGS + _TREE_SETTINGS

    # ---- sweep
    x_axis = param.Selector(default="patterns", objects=list(X_AXES), doc="What the sweep varies")
    mask = param.Selector(default="squares", objects=list(MASKS), doc="How the sweep's patterns are made")
    n_patterns = param.Integer(default=36, bounds=(2, 400),
                               doc="Distinct patterns (the largest of the sweep when it varies them)")
    n_features = param.Integer(default=64, bounds=(8, 256),
                               doc="Features D (the largest of the sweep when it varies them; squares: side^2)")
    missing_rate = param.Number(default=0.15, bounds=(0.02, 0.8),
                                doc="Missing rate (the largest of the sweep when it varies it)")
    rows_per_pattern = param.Integer(default=4, bounds=(1, 50), doc="Data rows per distinct pattern")
    n_points = param.Integer(default=4, bounds=(2, 8), doc="Points of the sweep")
    repeats = param.Integer(default=3, bounds=(1, 10), doc="Timed calls per point (the best is kept)")
    kernels = param.ListSelector(default=list(KERNELS), objects=list(KERNELS), doc="E-step kernels to time")
    em_step = param.Boolean(default=True, doc="Also time a full EM step per EMConfig.strategy (when available)")
    seed = param.Integer(default=0, bounds=(0, MAX_SEED), doc="Seed of the patterns, data and covariance")

    # ---- tree drawing
    tree_mask = param.Selector(default="squares", objects=list(MASKS), doc="Patterns of the drawn case")
    tree_side = param.Integer(default=8, bounds=(MIN_SIDE, 12), doc="Image side of the drawn case (squares)")
    tree_square = param.Integer(default=3, bounds=(1, 8), doc="Side k of the missing square (squares)")
    tree_features = param.Integer(default=8, bounds=(3, 16), doc="Features of the drawn case (MCAR)")
    tree_rate = param.Number(default=0.3, bounds=(0.05, 0.8), doc="Missing rate of the drawn case (MCAR)")
    tree_rows = param.Integer(default=200, bounds=(2, 2000), doc="Rows of the drawn case")
    refresh_every = param.Integer(default=4, bounds=(0, 32),
                                  doc="Factor from scratch at depths that are multiples of this (0: roots only)")
    colour_by = param.Selector(default="depth", objects=["depth", "from scratch"], doc="Node colour of the tree")
    node = param.Integer(default=-1, bounds=(-1, 100_000), doc="Selected node of the tree (-1: none)")

    def __init__(self, **params):
        super().__init__(**params)
        self._tree_cache = None
        # No warm-up of the numba kernels here: a daemon thread loading them when the page opened stalled Play on
        # other pages of the same server (tests/browser/test_session_lifecycle.py after test_pictures.py); the first
        # Measure pays the load (0.5-0.7 s from numba's disk cache) under its progress bar. warm_up_kernels() stays
        # for scripts that want it.

    # ------------------------------------------------------------------ checks
    def check(self) -> None:
        """Raise :class:`BadInputError` (plain words) when the sweep settings cannot be measured."""
        if not self.kernels and not (self.em_step and em_strategies()):
            raise BadInputError("Pick at least one kernel to time (or the full EM step).")
        if self.mask == "squares":
            side = math.isqrt(self.n_features)
            if side < MIN_SIDE:
                raise BadInputError(f"Square masks need an image of at least {MIN_SIDE}x{MIN_SIDE}: "
                                    f"D = {self.n_features} < {MIN_SIDE ** 2}.")
            if self._square_size(side, self.missing_rate) >= side:
                raise BadInputError(f"A missing rate of {self.missing_rate:g} hides the whole {side}x{side} image: "
                                    "use a lower rate.")
        else:
            if self.x_axis != "features" and 2 ** min(self.n_features, 60) - 2 < self.n_patterns:
                raise BadInputError(f"{self.n_patterns} distinct MCAR patterns cannot be made with {self.n_features} "
                                    "features; use fewer patterns or more features.")

    @staticmethod
    def _square_size(side: int, rate: float) -> int:
        return max(1, int(round(math.sqrt(rate * side * side))))

    # ------------------------------------------------------------------ the sweep
    def sweep_values(self) -> list:
        """The requested values of the x-axis (the realised ones are in the table's ``x`` column)."""
        n = self.n_points
        if self.x_axis == "patterns":
            top = self.n_patterns
            if self.mask == "squares":
                side = math.isqrt(self.n_features)
                top = min(top, len(square_positions(side, self._square_size(side, self.missing_rate))))
            lo = min(2, top)
            return sorted({int(round(v)) for v in np.geomspace(lo, top, n)})
        if self.x_axis == "features":
            if self.mask == "squares":
                top = math.isqrt(self.n_features)
                return sorted({int(round(s)) ** 2 for s in np.linspace(MIN_SIDE, top, n)})
            return sorted({int(round(v)) for v in np.geomspace(8, max(8, self.n_features), n)})
        if self.mask == "squares":  # one point per square side k (rate k^2 / D)
            side = math.isqrt(self.n_features)
            top = min(self._square_size(side, self.missing_rate), side - 1)
            return [k * k / side ** 2 for k in sorted({int(round(v)) for v in np.linspace(1, top, n)})]
        return [float(v) for v in np.linspace(min(0.05, self.missing_rate), self.missing_rate, n)]

    def case(self, value, rng: np.random.Generator) -> dict:
        """The data of one sweep point: ``missing``, ``X`` (NaN at missing), ``Xf``, ``mean``, ``covariance``."""
        n_pat, d, rate = self.n_patterns, self.n_features, self.missing_rate
        if self.x_axis == "patterns":
            n_pat = int(value)
        elif self.x_axis == "features":
            d = int(value)
        else:
            rate = float(value)
        for _ in range(100):  # every column observed in some pattern (EM cannot learn a column never seen)
            if self.mask == "squares":
                side = math.isqrt(d)
                pats, _ = square_patterns(side, min(self._square_size(side, rate), side - 1), n_pat, rng)
            else:
                pats = mcar_patterns(d, rate, n_pat, rng)
            if not pats.all(axis=0).any():
                break
        else:
            raise BadInputError(f"{n_pat} patterns at this rate always hide some column in every row: use more "
                                "patterns or a lower missing rate.")
        d = pats.shape[1]
        missing = np.repeat(pats, self.rows_per_pattern, axis=0)
        cov = _random_covariance(d, rng)
        X = rng.standard_normal((missing.shape[0], d)) @ np.linalg.cholesky(cov).T
        Xf = np.where(missing, 0.0, X)
        return {"patterns": pats, "missing": missing, "X": np.where(missing, np.nan, X), "Xf": Xf,
                "mean": np.zeros(d), "covariance": cov}

    def series(self) -> list[tuple[str, str, str]]:
        """``(series key, kind, strategy)`` of what the sweep times: kernels, then EM steps (when available)."""
        out = [(k, "kernel", k) for k in KERNELS if k in self.kernels]
        if self.em_step:
            out += [(f"em:{s}", "em_step", s) for s in em_strategies()]
        return out

    def sweep(self, progress: Callable | None = None, cancel=None) -> pd.DataFrame:
        """Measure every series at every sweep point; returns the table (columns :data:`SWEEP_COLUMNS`).

        Parameters
        ----------
        progress : callable, optional
            ``progress(done, total, table_so_far)`` after each measurement (from the calling thread).
        cancel : threading.Event, optional
            Stops before the next measurement when set (the table so far is returned).
        """
        from explorer.core.mixtures import pattern_tree

        self.check()
        with _MEASURING, _one_blas_thread():
            return self._sweep(progress, cancel)

    def _sweep(self, progress, cancel) -> pd.DataFrame:
        from explorer.core.mixtures import pattern_tree

        rng = np.random.default_rng(self.seed)
        values, series = self.sweep_values(), self.series()
        total = len(values) * len(series)
        rows: list[dict] = []
        done = 0
        for value in values:
            case = self.case(value, rng)
            missing, pats = case["missing"], case["patterns"]
            grouped = group_patterns(missing, sort=True)
            tree = pattern_tree.build_pattern_tree(grouped)
            scratch = tree.scratch_nodes(self.refresh_every)
            flops = theoretical_flops(tree.patterns, tree.parents, tree.weights, scratch)
            d = missing.shape[1]
            rate = float(missing.mean())
            x = {"patterns": tree.n_patterns, "features": d, "rate": rate}[self.x_axis]
            for key, kind, strategy in series:
                if cancel is not None and cancel.is_set():
                    return _table(rows)
                try:
                    fn = (self._kernel_call(strategy, case, grouped, tree) if kind == "kernel"
                          else self._em_call(strategy, case))
                    seconds, error = _best_time(fn, self.repeats), ""
                except Exception as exc:  # reported in the table, never hidden
                    seconds, error = float("nan"), f"{type(exc).__name__}: {exc}"
                rows.append({"x": x, "series": key, "kind": kind, "strategy": strategy, "seconds": seconds,
                             "n_patterns": tree.n_patterns, "n_features": d, "missing_rate": rate,
                             "n_rows": missing.shape[0], "flops": flops.get(strategy, float("nan")) if kind == "kernel"
                             else float("nan"), "error": error})
                done += 1
                if progress is not None:
                    progress(done, total, _table(rows))
        return _table(rows)

    def _kernel_call(self, strategy: str, case: dict, grouped, tree):
        from explorer.core.mixtures import pattern_tree

        Xf, mean, cov = case["Xf"], case["mean"], case["covariance"]
        if strategy == "precision":
            def call():
                prec, logdet = precision_and_logdet(cov[None])
                return observed_gaussian(Xf, grouped, mean, prec[0], float(logdet[0]))
        elif strategy == "tree":
            refresh = self.refresh_every

            def call():
                return pattern_tree.observed_gaussian_tree(Xf, grouped, mean, cov, tree=tree, refresh_every=refresh)
        else:
            def call():
                return pattern_tree.observed_gaussian_naive(Xf, grouped, mean, cov)
        return call

    def _em_call(self, strategy: str, case: dict):
        from explorer.core.mixtures import em_gmm

        data = em_gmm.prepare(case["X"])
        config = em_gmm.EMConfig(n_components=1, strategy=strategy)
        state = em_gmm.init(data, config, np.random.default_rng(0))
        return lambda: em_gmm.step(state, data, config)

    # ------------------------------------------------------------------ the tree
    def _tree_key(self):
        return (self.tree_mask, self.tree_side, self.tree_square, self.tree_features, self.tree_rate, self.tree_rows,
                self.seed)

    def check_tree(self) -> None:
        """Raise :class:`BadInputError` when the drawn case's settings cannot be used."""
        if self.tree_mask == "squares" and self.tree_square >= self.tree_side:
            raise BadInputError(f"The missing square ({self.tree_square}x{self.tree_square}) must be smaller than "
                                f"the {self.tree_side}x{self.tree_side} image.")

    def tree_missing(self) -> tuple[np.ndarray, list | None]:
        """The drawn case's rows (True = missing) and, for squares, every possible square corner."""
        self.check_tree()
        rng = np.random.default_rng(self.seed)
        if self.tree_mask == "squares":
            side, k = self.tree_side, self.tree_square
            pos = square_positions(side, k)
            pick = rng.integers(0, len(pos), size=self.tree_rows)
            masks, _ = square_patterns(side, k, len(pos), rng)
            return masks[pick], pos
        missing = rng.random((self.tree_rows, self.tree_features)) < self.tree_rate
        full = missing.all(axis=1)  # rows with nothing observed are kept apart by the kernels: not drawn
        missing[full, rng.integers(0, self.tree_features, size=int(full.sum()))] = False
        return missing, None

    def tree(self):
        """``(PatternTree, missing rows)`` of the drawn case (cached for the same settings)."""
        from explorer.core.mixtures import pattern_tree

        key = self._tree_key()
        if self._tree_cache is None or self._tree_cache[0] != key:
            missing, _ = self.tree_missing()
            self._tree_cache = (key, pattern_tree.build_pattern_tree(group_patterns(missing, sort=True)), missing)
        return self._tree_cache[1], self._tree_cache[2]

    def tree_case(self) -> dict:
        """Everything the tree plot draws: ``nodes`` and ``edges`` tables, ``summary`` numbers, ``layout``."""
        tree, missing = self.tree()
        p, d = tree.patterns.shape
        scratch = tree.scratch_nodes(self.refresh_every)
        if self.tree_mask == "squares":
            k = self.tree_square
            xs, ys = [], []
            for pat in tree.patterns:
                rr, cc = np.nonzero(pat.reshape(self.tree_side, self.tree_side))
                xs.append(cc.min() + (k - 1) / 2)
                ys.append(rr.min() + (k - 1) / 2)
            x, y, layout = np.array(xs, float), np.array(ys, float), "grid"
        else:
            x, y = _layered_layout(tree)
            layout = "layers"
        n_miss = tree.patterns.sum(axis=1)
        n_obs = d - n_miss
        nodes = pd.DataFrame({
            "x": x, "y": y, "node": np.arange(p), "rows": tree.counts, "depth": tree.depth,
            "scratch": np.where(scratch, "from scratch", "updated"), "n_missing": n_miss, "n_observed": n_obs,
            "parent": tree.parents, "n_d": tree.weights,
            "size": 8 + 22 * np.sqrt(tree.counts / max(1, tree.counts.max())),
        })
        child = np.flatnonzero(tree.parents >= 0)
        par = tree.parents[child]
        edges = pd.DataFrame({"x0": x[par], "y0": y[par], "x1": x[child], "y1": y[child], "n_d": tree.weights[child],
                              "xm": (x[par] + x[child]) / 2, "ym": (y[par] + y[child]) / 2,
                              "label": [str(int(w)) for w in tree.weights[child]]})
        flops = theoretical_flops(tree.patterns, tree.parents, tree.weights, scratch)
        summary = {"n_patterns": p, "n_rows": int(missing.shape[0]), "n_features": d,
                   "total_weight": tree.total_weight, "mean_nd": tree.mean_nd, "max_depth": tree.max_depth,
                   "peak_states": tree.peak_states, "n_scratch": int(scratch.sum()), "n_clusters": tree.n_clusters,
                   "naive_flops": flops["naive"], "tree_flops": flops["tree"], "precision_flops": flops["precision"],
                   "mean_n_observed": float(n_obs.mean()) if p else 0.0}
        return {"nodes": nodes, "edges": edges, "summary": summary, "layout": layout}

    def nearest_node(self, x: float, y: float, max_distance: float | None = None) -> int:
        """The node drawn nearest to ``(x, y)`` (-1 when none is within ``max_distance``)."""
        case = self.tree_case()
        nodes = case["nodes"]
        if not len(nodes):
            return -1
        dist = np.hypot(nodes["x"].to_numpy() - x, nodes["y"].to_numpy() - y)
        i = int(np.argmin(dist))
        if max_distance is not None and dist[i] > max_distance:
            return -1
        return i

    def _variable(self, j: int) -> str:
        if self.tree_mask == "squares":
            return f"pixel ({j // self.tree_side}, {j % self.tree_side})"
        return f"x{j}"

    def path(self, node: int | None = None) -> dict:
        """The updates that give ``node``'s factors (default: the selected node).

        Returns ``{"node", "nodes" (root first), "start" (the node factored from scratch where the chain
        starts: the root or the last refreshed node on the way), "steps" (one per edge after ``start``:
        parent, child, n_d, removed / appended variables, K operations, costs), "update_flops",
        "scratch_flops" (factoring ``node`` from scratch, n_o^3/3)}``.
        """
        tree, _ = self.tree()
        node = self.node if node is None else int(node)
        if not 0 <= node < tree.n_patterns:
            raise BadInputError(f"node must be one of the {tree.n_patterns} patterns (0 to {tree.n_patterns - 1}), "
                                f"got {node}.")
        chain = [node]
        while tree.parents[chain[-1]] >= 0:
            chain.append(int(tree.parents[chain[-1]]))
        chain.reverse()
        scratch = tree.scratch_nodes(self.refresh_every)
        start = max(i for i, v in enumerate(chain) if scratch[v])
        d = tree.patterns.shape[1]
        steps = []
        for u, v in zip(chain[start:-1], chain[start + 1:]):
            old, new = tree.patterns[u], tree.patterns[v]
            removed = np.flatnonzero(new & ~old)  # become missing: rows / columns removed from L
            appended = np.flatnonzero(old & ~new)  # become observed: appended to L
            n_o_parent, n_o = int(d - old.sum()), int(d - new.sum())
            n_m = int(new.sum())
            chol = float(len(removed) * n_o_parent ** 2 + len(appended) * n_o ** 2)
            lemma = float((len(removed) + len(appended)) * max(n_m, 1) ** 2)
            steps.append({"parent": u, "child": v, "n_d": int(len(removed) + len(appended)),
                          "removed": [self._variable(j) for j in removed],
                          "appended": [self._variable(j) for j in appended],
                          "n_o": n_o, "n_m": n_m, "cholesky_flops": chol, "lemma_flops": lemma,
                          "scratch_flops": n_o ** 3 / 3})
        n_o_node = int(d - tree.patterns[node].sum())
        return {"node": node, "nodes": chain, "start": chain[start], "steps": steps,
                "update_flops": float(sum(s["cholesky_flops"] for s in steps)),
                "scratch_flops": n_o_node ** 3 / 3, "n_observed": n_o_node,
                "n_missing": int(tree.patterns[node].sum()), "rows": int(tree.counts[node]),
                "depth": int(tree.depth[node])}


#: One sweep at a time in this process: two at once would time each other (the CPU is the shared resource).
_MEASURING = threading.Lock()


def _one_blas_thread():
    """Time with one BLAS thread: with small matrices and busy cores, BLAS threads only wait for each other
    (measured: the precision-side kernel 8x slower at 36 patterns with the default threads)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - comes with scikit-learn
        return contextlib.nullcontext()
    return threadpool_limits(limits=1)


def _best_time(fn: Callable, repeats: int) -> float:
    """Seconds of the fastest of ``repeats`` calls of ``fn``, after one untimed warm-up call."""
    fn()
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _table(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=list(SWEEP_COLUMNS))


def _layered_layout(tree) -> tuple[np.ndarray, np.ndarray]:
    """A tidy layered layout: y = depth, leaves at consecutive x (depth-first order), parents centred above."""
    p = tree.n_patterns
    children = [[] for _ in range(p)]
    for v in range(p):
        if tree.parents[v] >= 0:
            children[tree.parents[v]].append(v)
    x = np.zeros(p)
    nxt = 0.0
    for root in tree.roots:
        stack = [(int(root), False)]
        while stack:  # post-order: children placed before their parent
            v, seen = stack.pop()
            if seen or not children[v]:
                if children[v]:
                    x[v] = np.mean([x[c] for c in children[v]])
                else:
                    x[v] = nxt
                    nxt += 1.0
                continue
            stack.append((v, True))
            stack.extend((c, False) for c in reversed(children[v]))
        nxt += 1.0  # a gap between the trees of a forest
    return x, tree.depth.astype(float)
