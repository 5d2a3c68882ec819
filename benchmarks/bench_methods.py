"""Wall time of every imputation method of the garriga2017 benchmark on one cell, in the same run.

Each method imputes the same masked data set (MCAR, rate 0.3, repetition 0, seed 0, the benchmark's
full settings) one after the other, on one BLAS thread, ``--repeats`` times interleaved; the median is
reported with the ratio to the POIGMM. The NRMSE of each run is printed too, so speed is read next to
accuracy. The times are those of the benchmark's method functions (fit + imputation + the
predictive quantities the metrics need), excluding scoring.

A benchmark, not a test: it prints and writes numbers and asserts nothing.

Usage::

    .venv/bin/python benchmarks/bench_methods.py            # writes results/bench_methods.{json,md}
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from explorer.benchmark import METHODS, MISSFOREST_RUNS, _rng, cell_mask, evaluate  # noqa: E402
from explorer.core.data import standardize  # noqa: E402
from explorer.datasets import load_dataset  # noqa: E402

ORDER = ("mean", "knn", "em_gmm", "poigmm", "poigmm_thesis", "mice", "missforest")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", nargs="+", default=["boston", "ionosphere"])
    ap.add_argument("--rate", type=float, default=0.3)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--missforest-runs", type=int, default=3)
    ap.add_argument("--out", type=Path, default=ROOT / "results")
    args = ap.parse_args(argv)
    from threadpoolctl import threadpool_limits

    rows = []
    for name in args.datasets:
        data = load_dataset(name)
        missing = cell_mask(data, "mcar", args.rate, 0, seed=0, dataset=name)
        std, scaler = standardize(data.with_missing(missing))
        X, binary = np.array(std.values), np.asarray(data.binary, dtype=bool)
        times = {m: [] for m in ORDER}
        nrmse = {}
        for _ in range(args.repeats):
            for m in ORDER:
                opts = {"n_runs": args.missforest_runs} if m == "missforest" else {}
                rng = _rng(0, "method", name, "mcar", round(args.rate * 1e6), 0, m)
                with threadpool_limits(limits=1):
                    t = time.perf_counter()
                    out = METHODS[m].func(X, missing, binary, rng, False, **opts)
                    times[m].append(time.perf_counter() - t)
                nrmse[m] = evaluate(np.array(data.truth), missing, out, scaler, binary)["nrmse"][0]
        base = float(np.median(times["poigmm"]))
        for m in ORDER:
            med = float(np.median(times[m]))
            rows.append({"dataset": name, "method": m, "seconds": med, "ratio_to_poigmm": med / base,
                         "nrmse": float(nrmse[m]), "all": times[m]})
            print(f"{name:>10} {m:>14}: {med:8.2f} s  ({med / base:6.2f} x POIGMM)  NRMSE {nrmse[m]:.3f}", flush=True)
    meta = {"python": platform.python_version(), "numpy": np.__version__, "repeats": args.repeats,
            "rate": args.rate, "missforest_runs": args.missforest_runs, "default_missforest_runs": MISSFOREST_RUNS}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_methods.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    lines = ["| data set | method | seconds (median) | x POIGMM | NRMSE |", "|---|---|---|---|---|"]
    lines += [f"| {r['dataset']} | {r['method']} | {r['seconds']:.2f} | {r['ratio_to_poigmm']:.2f} | "
              f"{r['nrmse']:.3f} |" for r in rows]
    (args.out / "bench_methods.md").write_text(
        f"Command: `.venv/bin/python benchmarks/bench_methods.py` (MCAR {args.rate:g}, repetition 0, seed 0; median "
        f"of {args.repeats} interleaved runs, one BLAS thread; missForest with {args.missforest_runs} runs, the "
        f"committed benchmark's setting; numpy {np.__version__}, Python {platform.python_version()}).\n\n"
        + "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
