"""Seconds per EM iteration of factor analysis with missing values: compiled against numpy, and scikit-learn.

Cases (issue 11): N = 20,000, D = 50, q = 5 with 30 % of the entries missing completely at random, and an
MNIST-like D = 784 (28 x 28 images of rank-10 structure plus noise), q = 10, N = 2,000 with one 10 x 10
square missing per image (random position); plus two small cases for ``strategy="auto"``'s threshold.
explorer's :func:`explorer.core.factor.factor_analysis.step` (FA, PX-EM; one step = the M-step from the cached
E-step and the E-step at the new parameters, log-likelihood included) with ``strategy="compiled"``
(``explorer/core/_compiled/factor.py``) and ``strategy="numpy"`` (the reference), timed in interleaved repeats
(medians), on the incomplete data and on the complete matrix; scikit-learn's ``FactorAnalysis`` (complete
data only: it has no missing-value support) timed as a whole ``fit`` with ``tol=0`` and a fixed
``max_iter``, divided by ``n_iter_`` (its per-iteration time includes its SVD, ``svd_method`` as given).
One BLAS thread (threadpoolctl). The first compiled step of the process (importing numba, loading the
cached machine code, or compiling) is reported separately.

A benchmark, not a test: it prints and writes numbers and asserts nothing.

Usage::

    .venv/bin/python benchmarks/bench_fa.py            # writes results/bench_fa.{json,md}
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from explorer.core.factor import factor_analysis as fa  # noqa: E402


def _timer(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def make_mcar(rng, n, D, q, frac):
    W = rng.normal(size=(D, q))
    X = rng.normal(size=(n, q)) @ W.T + 0.5 * rng.normal(size=(n, D))
    Xm = X.copy()
    Xm[rng.random((n, D)) < frac] = np.nan
    return X, Xm


def make_images(rng, n, side, q, square):
    yy, xx = np.mgrid[0:side, 0:side] / side
    basis = np.stack([np.sin((k + 1) * np.pi * xx + k) * np.cos((k % 3 + 1) * np.pi * yy) for k in range(q)])
    X = rng.normal(size=(n, q)) @ basis.reshape(q, -1) + 0.3 * rng.normal(size=(n, side * side))
    Xm = X.copy().reshape(n, side, side)
    for i in range(n):
        r, c = rng.integers(0, side - square + 1, size=2)
        Xm[i, r:r + square, c:c + square] = np.nan
    return X, Xm.reshape(n, -1)


def _stepper(data, q, strategy):
    cfg = fa.FAConfig(n_factors=q, tol=0.0, strategy=strategy)
    holder = {"s": fa.step(fa.init(data, cfg, None), data, cfg)}  # warm-up (and buffers)

    def run():
        holder["s"] = fa.step(holder["s"], data, cfg)

    return run


def time_case(name, X, Xm, q, repeats, sk_iter):
    out = {"case": name, "n": X.shape[0], "D": X.shape[1], "q": q,
           "missing_fraction": float(np.isnan(Xm).mean())}
    runs = {}
    for label, M in (("incomplete", Xm), ("complete", X)):
        data = fa.prepare(M)
        for strategy in ("compiled", "numpy"):
            runs[f"{strategy}_{label}"] = _stepper(data, q, strategy)
    times = {k: [] for k in runs}
    for _ in range(repeats):  # interleaved
        for k, fn in runs.items():
            times[k].append(_timer(fn))
    for k, v in times.items():
        out[f"s_per_iter_{k}"] = statistics.median(v)
    if sk_iter:
        from sklearn.decomposition import FactorAnalysis

        sk = []
        for _ in range(max(1, repeats // 2)):
            m = FactorAnalysis(n_components=q, tol=0.0, max_iter=sk_iter)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t = _timer(lambda: m.fit(X))
            sk.append(t / m.n_iter_)
        out["s_per_iter_sklearn_complete"] = statistics.median(sk)
        out["sklearn_n_iter"] = int(m.n_iter_)
        out["sklearn_svd_method"] = m.svd_method
    c = out["s_per_iter_compiled_incomplete"]
    out["numpy_over_compiled_incomplete"] = out["s_per_iter_numpy_incomplete"] / c
    out["numpy_over_compiled_complete"] = out["s_per_iter_numpy_complete"] / out["s_per_iter_compiled_complete"]
    if sk_iter:
        out["compiled_complete_over_sklearn"] = out["s_per_iter_compiled_complete"] / out["s_per_iter_sklearn_complete"]
        out["compiled_incomplete_over_sklearn_complete"] = c / out["s_per_iter_sklearn_complete"]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--out", default=str(ROOT / "results" / "bench_fa"))
    args = ap.parse_args()
    from threadpoolctl import threadpool_info, threadpool_limits

    rng = np.random.default_rng(0)
    results = []
    with threadpool_limits(1):
        X, Xm = make_mcar(rng, 300, 10, 2, 0.3)
        d = fa.prepare(Xm)
        cfg = fa.FAConfig(n_factors=2, strategy="compiled")
        s = fa.init(d, fa.FAConfig(n_factors=2, strategy="numpy"), None)
        first = _timer(lambda: fa.step(s, d, cfg))  # imports numba, loads (or compiles) the kernels
        cases = [
            ("small 300 x 10, q=2, 30% MCAR", *make_mcar(rng, 300, 10, 2, 0.3), 2, 0),
            ("small 2,000 x 20, q=3, 30% MCAR", *make_mcar(rng, 2000, 20, 3, 0.3), 3, 0),
            ("20,000 x 50, q=5, 30% MCAR", *make_mcar(rng, 20_000, 50, 5, 0.3), 5, 30),
            ("MNIST-like 2,000 x 784, q=10, 10x10 square", *make_images(rng, 2000, 28, 10, 10), 10, 30),
        ]
        for name, X, Xm, q, sk_iter in cases:
            reps = args.repeats if X.shape[0] * X.shape[1] > 50_000 else 31
            r = time_case(name, X, Xm, q, reps, sk_iter)
            results.append(r)
            print(json.dumps(r), flush=True)
    payload = {"command": "OMP_NUM_THREADS unset; .venv/bin/python benchmarks/bench_fa.py "
               + " ".join(sys.argv[1:]), "blas": [{k: v for k, v in i.items() if k in ("internal_api", "version")}
                                                  for i in threadpool_info()],
               "threads": 1, "first_compiled_step_s": first, "python": platform.python_version(),
               "machine": platform.machine(), "results": results}
    Path(args.out + ".json").write_text(json.dumps(payload, indent=1))
    lines = [
        "# Factor analysis EM: seconds per iteration (benchmarks/bench_fa.py)", "",
        f"Command: `.venv/bin/python benchmarks/bench_fa.py {' '.join(sys.argv[1:])}` (one BLAS thread, "
        "interleaved medians; shared 2-core machine, so expect ~10-20 % noise).", "",
        f"First compiled step of the process (numba import + cached kernels): {first:.2f} s.", "",
        "| case | compiled (missing) | numpy (missing) | numpy / compiled | compiled (complete) | numpy (complete) "
        "| sklearn (complete) | compiled complete / sklearn | compiled missing / sklearn |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        sk = r.get("s_per_iter_sklearn_complete")
        f = (lambda v: f"{v * 1e3:.2f} ms")
        lines.append(
            f"| {r['case']} | {f(r['s_per_iter_compiled_incomplete'])} | {f(r['s_per_iter_numpy_incomplete'])} | "
            f"{r['numpy_over_compiled_incomplete']:.2f} | {f(r['s_per_iter_compiled_complete'])} | "
            f"{f(r['s_per_iter_numpy_complete'])} | {f(sk) if sk else '-'} | "
            f"{r['compiled_complete_over_sklearn']:.2f} | {r['compiled_incomplete_over_sklearn_complete']:.2f} |"
            if sk else
            f"| {r['case']} | {f(r['s_per_iter_compiled_incomplete'])} | {f(r['s_per_iter_numpy_incomplete'])} | "
            f"{r['numpy_over_compiled_incomplete']:.2f} | {f(r['s_per_iter_compiled_complete'])} | "
            f"{f(r['s_per_iter_numpy_complete'])} | - | - | - |"
        )
    Path(args.out + ".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
