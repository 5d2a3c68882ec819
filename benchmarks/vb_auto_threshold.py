"""Where the variational mixture's compiled E-step starts to pay in a fresh process (``strategy="auto"``).

A fresh process pays the compiled kernels' load (numba cache filled: about 0.4-0.6 s) on its first compiled fit;
the numpy E-step needs no load but costs much more per step than EM's (one observed-block factorisation per
component and pattern). Each case fits ``vb_dpgmm`` (K components, random start, up to 100 steps, tol 1e-3, one
start; 30 % MCAR on the standardised data set) twice, in a fresh subprocess per strategy: the first fit includes the
load, the second does not. ``VB_AUTO_COMPILED_MIN_WORK`` (rows x K x D) is set from these numbers. A benchmark, not
a test: it writes numbers and asserts nothing.

Usage::

    .venv/bin/python benchmarks/vb_auto_threshold.py     # writes results/vb_auto_threshold.{json,md}
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES = [("iris", 5), ("iris", 15), ("boston", 5), ("wine", 15), ("boston", 15)]

_CHILD = r"""
import json, sys, time, warnings
import numpy as np
from explorer.core.mixtures import em_gmm, vb_dpgmm
from explorer.datasets import load_dataset
name, K, strategy = sys.argv[1], int(sys.argv[2]), sys.argv[3]
X = np.asarray(load_dataset(name).values, dtype=float)
X = (X - np.nanmean(X, axis=0)) / np.nanstd(X, axis=0)
missing = np.random.default_rng(0).random(X.shape) < 0.3
missing[missing.all(axis=1), 0] = False
data = em_gmm.prepare(np.where(missing, np.nan, X))
config = vb_dpgmm.VBConfig(n_components=K, init="random", n_init=1, max_iter=100, tol=1e-3, reg_covar=1e-6,
                           strategy=strategy)
seconds = []
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    for seed in (1, 2):
        t = time.perf_counter()
        vb_dpgmm.fit(data, config, np.random.default_rng(seed))
        seconds.append(time.perf_counter() - t)
print(json.dumps({"n": X.shape[0], "d": X.shape[1], "first": seconds[0], "second": seconds[1]}))
"""


def main() -> None:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    rows = []
    for name, K in CASES:
        row = {"dataset": name, "K": K}
        for strategy in ("numpy", "compiled"):
            out = subprocess.run([sys.executable, "-c", _CHILD, name, str(K), strategy], capture_output=True,
                                 text=True, cwd=ROOT, env=env, check=True)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            row.update(n=r["n"], d=r["d"], work=r["n"] * K * r["d"])
            row[strategy] = {"first": r["first"], "second": r["second"]}
        rows.append(row)
        print(f"{name} K={K} work={row['work']}: numpy {row['numpy']['first']:.2f} / {row['numpy']['second']:.2f} s,"
              f" compiled {row['compiled']['first']:.2f} / {row['compiled']['second']:.2f} s", flush=True)
    out_dir = ROOT / "results"
    (out_dir / "vb_auto_threshold.json").write_text(json.dumps(
        {"machine": platform.platform(), "python": platform.python_version(), "rows": rows}, indent=1) + "\n")
    lines = ["# The variational mixture's compiled E-step in a fresh process",
             "",
             "`.venv/bin/python benchmarks/vb_auto_threshold.py` (one BLAS thread; each strategy in a fresh process; "
             "30 % MCAR, standardised; up to 100 steps, tol 1e-3, one random start). Seconds of the first fit "
             "(with the compiled kernels' load) and of a second one.",
             "",
             "| data | K | rows x K x D | numpy, first | numpy, second | compiled, first | compiled, second |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['dataset']} ({r['n']} x {r['d']}) | {r['K']} | {r['work']:,} | {r['numpy']['first']:.2f} | "
                     f"{r['numpy']['second']:.2f} | {r['compiled']['first']:.2f} | {r['compiled']['second']:.2f} |")
    lines += ["", "`strategy=\"auto\"` takes the compiled kernel from rows x K x D = 50,000 "
              "(`vb_dpgmm.VB_AUTO_COMPILED_MIN_WORK`), or once it has run in the process.", ""]
    (out_dir / "vb_auto_threshold.md").write_text("\n".join(lines))


if __name__ == "__main__":
    main()
