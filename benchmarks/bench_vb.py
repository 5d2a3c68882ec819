"""Time per variational iteration: explorer's DP mixture against scikit-learn's BayesianGaussianMixture.

For each case the data are drawn as in ``bench_em.py``. scikit-learn's ``BayesianGaussianMixture``
(``weight_concentration_prior_type="dirichlet_process"``, full covariances) iterates on the
**complete** matrix; explorer's :func:`explorer.core.mixtures.vb_dpgmm.step` (principled update, corrected
responsibilities, ELBO computed every iteration, ``strategy="compiled"``: the numba E-step of
``explorer/core/_compiled/vb_dpgmm.py``) iterates once on the same complete matrix and once with 30 % of the
entries missing completely at random. One iteration = one E-step and one M-step; scikit-learn's is
timed through ``_e_step``/``_m_step`` (the body of its ``fit`` loop, without its lower bound, which it
computes only at convergence checks). Medians of interleaved repeats, one BLAS thread (threadpoolctl)
unless ``--threads``. The numpy reference strategy (``strategy="numpy"``) is timed after, with fewer
repeats. Targets (issue 11): ratio <= 1.0 on complete data, <= 1.5 with 30 % missing.

A benchmark, not a test: it prints and writes numbers and asserts nothing.

Usage::

    .venv/bin/python benchmarks/bench_vb.py            # writes results/bench_vb.{json,md}
    .venv/bin/python benchmarks/bench_vb.py --quick
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_em import blas_info, make_data  # noqa: E402

from explorer.core.mixtures import em_gmm, vb_dpgmm  # noqa: E402

CASES = [(506, 13, 15), (20_000, 10, 10)]  # Boston's size with the thesis's truncation; a larger one
QUICK = [(506, 13, 15)]


def _timer(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def _stepper(data, k, seed, repeats, strategy):
    cfg = vb_dpgmm.VBConfig(n_components=k, tol=0.0, max_iter=repeats + 2, init="kmeans", strategy=strategy)
    state = vb_dpgmm.step(vb_dpgmm.init(data, cfg, np.random.default_rng(seed)), data, cfg)  # warm-up
    holder = {"s": state}

    def ours():
        holder["s"] = vb_dpgmm.step(holder["s"], data, cfg)

    ours()
    return ours


def bench_case(n, d, k, rate, repeats, seed, numpy_repeats=3):
    from sklearn.mixture import BayesianGaussianMixture

    X, missing = make_data(n, d, 4, rate, seed)
    runs = {}
    for label, mask in (("complete", np.zeros_like(missing)), ("missing", missing)):
        data = em_gmm.prepare(np.where(mask, np.nan, X))
        runs[label] = (_stepper(data, k, seed, repeats, "compiled"), data.patterns.n_patterns, float(mask.mean()),
                       data)

    bgm = BayesianGaussianMixture(n_components=k, weight_concentration_prior_type="dirichlet_process",
                                  covariance_type="full", max_iter=2, tol=0.0, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bgm.fit(X)

    def sk():
        _, log_resp = bgm._e_step(X)
        bgm._m_step(X, log_resp)

    sk()
    times = {"complete": [], "missing": [], "sklearn": []}
    for _ in range(repeats):  # interleaved so load drifts hit all three alike
        times["complete"].append(_timer(runs["complete"][0]))
        times["missing"].append(_timer(runs["missing"][0]))
        times["sklearn"].append(_timer(sk))
    med = {key: float(np.median(v)) for key, v in times.items()}
    for label in ("complete", "missing"):  # the numpy reference strategy, after (slow: few repeats)
        ref = _stepper(runs[label][3], k, seed, numpy_repeats, "numpy")
        med[f"numpy_{label}"] = float(np.median([_timer(ref) for _ in range(numpy_repeats)]))
    return {"n_samples": n, "n_features": d, "n_components": k, "missing_rate": runs["missing"][2],
            "n_patterns": runs["missing"][1], "explorer_complete_seconds_per_iter": med["complete"],
            "explorer_missing_seconds_per_iter": med["missing"], "sklearn_complete_seconds_per_iter": med["sklearn"],
            "ratio_complete": med["complete"] / med["sklearn"], "ratio_missing": med["missing"] / med["sklearn"],
            "numpy_complete_seconds_per_iter": med["numpy_complete"],
            "numpy_missing_seconds_per_iter": med["numpy_missing"],
            "numpy_ratio_complete": med["numpy_complete"] / med["sklearn"],
            "numpy_ratio_missing": med["numpy_missing"] / med["sklearn"], "all": times}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--numpy-repeats", type=int, default=3, help="repeats of the numpy reference strategy")
    ap.add_argument("--rate", type=float, default=0.3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1, help="BLAS threads for both libraries")
    ap.add_argument("--out", type=Path, default=ROOT / "results")
    args = ap.parse_args(argv)
    from threadpoolctl import threadpool_limits

    rows = []
    load_start = os.getloadavg()
    for n, d, k in QUICK if args.quick else CASES:
        with threadpool_limits(limits=args.threads):
            r = bench_case(n, d, k, args.rate, args.repeats, args.seed, args.numpy_repeats)
        rows.append(r)
        print(f"N={n:>6} D={d:>3} K={k:>3}: explorer complete {r['explorer_complete_seconds_per_iter']:.4f} s/iter, "
              f"with {r['missing_rate']:.0%} missing {r['explorer_missing_seconds_per_iter']:.4f}; scikit-learn "
              f"complete {r['sklearn_complete_seconds_per_iter']:.4f}; ratios {r['ratio_complete']:.2f} / "
              f"{r['ratio_missing']:.2f}", flush=True)
    load_end = os.getloadavg()
    meta = {"python": platform.python_version(), "numpy": np.__version__, "blas": blas_info(),
            "repeats": args.repeats, "numpy_repeats": args.numpy_repeats, "blas_threads": args.threads,
            "strategy": "compiled", "load_average_start": load_start, "load_average_end": load_end,
            "cpu_count": os.cpu_count()}
    name = "bench_vb_quick" if args.quick else "bench_vb"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{name}.json").write_text(json.dumps({"meta": meta, "cases": rows}, indent=2))
    lines = ["| N | D | K | patterns (30 % missing) | explorer s/iter, complete | explorer s/iter, 30 % missing "
             "| scikit-learn s/iter, complete | ratio complete (target <= 1.0) | ratio missing (target <= 1.5) "
             "| numpy strategy ratios complete / missing |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['n_samples']:,} | {r['n_features']} | {r['n_components']} | {r['n_patterns']:,} | "
              f"{r['explorer_complete_seconds_per_iter']:.4f} | {r['explorer_missing_seconds_per_iter']:.4f} | "
              f"{r['sklearn_complete_seconds_per_iter']:.4f} | {r['ratio_complete']:.2f} | "
              f"{r['ratio_missing']:.2f} | {r['numpy_ratio_complete']:.2f} / {r['numpy_ratio_missing']:.2f} |"
              for r in rows]
    load = "/".join(f"{x:.1f}" for x in load_start) + " at the start, " + "/".join(f"{x:.1f}" for x in load_end)
    (args.out / f"{name}.md").write_text(
        f"Command: `.venv/bin/python benchmarks/bench_vb.py{' --quick' if args.quick else ''}` (median of "
        f"{args.repeats} interleaved iterations, {args.threads} BLAS thread(s); explorer "
        f"`VBConfig(strategy='compiled')`, the numpy reference strategy timed after ({args.numpy_repeats} "
        f"iterations); numpy {np.__version__}, Python {platform.python_version()}; {os.cpu_count()} CPUs, load "
        f"average (1 / 5 / 15 min) {load} at the end). Ratio = explorer / scikit-learn (below 1 = explorer "
        "faster); explorer also computes the ELBO and the plug-in log-likelihood every iteration, scikit-learn's "
        "timed step does not.\n\n" + "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
