"""Time per EM iteration: explorer (with 30 % MCAR missing) against scikit-learn (complete data).

For each case, the same data set is drawn from a K-component Gaussian mixture; scikit-learn's
``GaussianMixture`` (full covariances) iterates on the **complete** matrix, explorer's EM on the
matrix with 30 % of the entries missing completely at random. One iteration = one E-step plus
one M-step in both; scikit-learn's is timed through its ``_e_step``/``_m_step`` (the body of its
``fit`` loop), explorer's through :func:`explorer.core.em_gmm.step`. Each is repeated and the
median is reported, with the ratio explorer / scikit-learn (below 1 = explorer faster).

This is a benchmark, not a test: it prints and writes numbers, it asserts nothing.

Usage::

    .venv/bin/python benchmarks/bench_em.py                 # both issue cases, writes results/bench_em.{json,md}
    .venv/bin/python benchmarks/bench_em.py --quick         # small cases only
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from explorer.core import em_gmm  # noqa: E402

CASES = [(20_000, 10, 5), (100_000, 20, 10)]
QUICK = [(5_000, 10, 5)]


def make_data(n, d, k, rate, seed):
    rng = np.random.default_rng(seed)
    centers = rng.normal(0.0, 3.0, (k, d))
    labels = rng.integers(k, size=n)
    A = rng.normal(size=(k, d, d)) / np.sqrt(d)
    X = centers[labels] + np.einsum("nij,nj->ni", A[labels], rng.standard_normal((n, d))) + 0.3 * rng.standard_normal((n, d))
    missing = rng.random((n, d)) < rate
    return X, missing


def median_time(fn, repeats):
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times)), times


def bench_case(n, d, k, rate, repeats, seed):
    from sklearn.mixture import GaussianMixture

    X, missing = make_data(n, d, k, rate, seed)
    Xm = np.where(missing, np.nan, X)

    t0 = time.perf_counter()
    data = em_gmm.prepare(Xm)
    t_prepare = time.perf_counter() - t0
    config = em_gmm.EMConfig(n_components=k, covariance_type="full", tol=0.0, max_iter=repeats + 2)
    state = em_gmm.init(data, config, np.random.default_rng(seed))
    state = em_gmm.step(state, data, config)  # warm-up
    holder = {"s": state}

    def ours():
        holder["s"] = em_gmm.step(holder["s"], data, config)

    gm = GaussianMixture(k, covariance_type="full", max_iter=2, tol=0.0, random_state=seed, init_params="k-means++")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gm.fit(X)

    def sk():
        _, log_resp = gm._e_step(X)
        gm._m_step(X, log_resp)

    sk()  # warm-up
    ours_all, sk_all = [], []
    for _ in range(repeats):  # interleaved, so that drifts in machine load hit both alike
        ours_all += median_time(ours, 1)[1]
        sk_all += median_time(sk, 1)[1]
    t_ours, t_sk = float(np.median(ours_all)), float(np.median(sk_all))
    return {
        "n_samples": n, "n_features": d, "n_components": k, "missing_rate": float(missing.mean()),
        "n_patterns": data.patterns.n_patterns, "prepare_seconds": t_prepare,
        "explorer_seconds_per_iter": t_ours, "sklearn_complete_seconds_per_iter": t_sk,
        "ratio": t_ours / t_sk, "explorer_all": ours_all, "sklearn_all": sk_all,
    }


def blas_info():
    try:
        from threadpoolctl import threadpool_info

        return [{k: v for k, v in info.items() if k in ("internal_api", "version", "num_threads", "architecture")}
                for info in threadpool_info()]
    except Exception as exc:  # informational only
        return [repr(exc)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--rate", type=float, default=0.3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=ROOT / "results")
    ap.add_argument("--threads", type=int, default=1,
                    help="BLAS threads for both libraries (default 1: on a shared 2-core machine, multi-threaded "
                         "timings of the small case varied by 3x between runs)")
    args = ap.parse_args(argv)
    cases = QUICK if args.quick else CASES
    rows = []
    from threadpoolctl import threadpool_limits

    for n, d, k in cases:
        with threadpool_limits(limits=args.threads):
            r = bench_case(n, d, k, args.rate, args.repeats, args.seed)
        rows.append(r)
        print(f"N={n:>7} D={d:>3} K={k:>3}: explorer {r['explorer_seconds_per_iter']:.3f} s/iter "
              f"({r['n_patterns']} patterns, {r['missing_rate']:.0%} missing), scikit-learn complete "
              f"{r['sklearn_complete_seconds_per_iter']:.3f} s/iter, ratio {r['ratio']:.2f}", flush=True)
    meta = {"python": platform.python_version(), "numpy": np.__version__, "machine": platform.machine(),
            "processor": platform.processor(), "blas": blas_info(), "repeats": args.repeats,
            "blas_threads": args.threads}
    args.out.mkdir(parents=True, exist_ok=True)
    name = "bench_em_quick" if args.quick else "bench_em"
    (args.out / f"{name}.json").write_text(json.dumps({"meta": meta, "cases": rows}, indent=2))
    lines = [
        "| N | D | K | missing | patterns | explorer s/iter (missing data) | scikit-learn s/iter (complete data) "
        "| ratio |",
        "|---|---|---|---|---|---|---|---|",
    ] + [
        f"| {r['n_samples']:,} | {r['n_features']} | {r['n_components']} | {r['missing_rate']:.0%} | "
        f"{r['n_patterns']:,} | {r['explorer_seconds_per_iter']:.3f} | {r['sklearn_complete_seconds_per_iter']:.3f} "
        f"| {r['ratio']:.2f} |"
        for r in rows
    ]
    (args.out / f"{name}.md").write_text(
        f"Command: `.venv/bin/python benchmarks/bench_em.py{' --quick' if args.quick else ''}` "
        f"(median of {args.repeats} interleaved iterations, {args.threads} BLAS thread(s); numpy {np.__version__}, "
        f"Python {platform.python_version()}).\n\n"
        + "\n".join(lines) + "\n"
    )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
