"""The mixture of factor analysers on the compiled FA kernel (issue 22): seconds per EM step, numpy vs compiled.

Each case draws K clusters on a q-dimensional linear subspace plus noise, hides a fraction of the entries
completely at random, and times :func:`explorer.core.factor.mfa.step` (weighted M-step per component, then the
E-step of every component) with ``strategy="numpy"`` and ``strategy="compiled"`` from the same state, interleaved,
one BLAS thread, median of ``--repeats``. The two strategies give the same parameters to 1e-10
(``tests/core/test_fa_engine.py``). This is a benchmark, not a test.

Usage::

    .venv/bin/python benchmarks/bench_mfa.py            # writes results/bench_mfa.{json,md}
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from explorer.core.factor import factor_analysis as fa  # noqa: E402
from explorer.core.factor import mfa  # noqa: E402

CASES = [(2_000, 20, 3, 2, 0.3), (20_000, 50, 5, 5, 0.3), (1_000, 64, 4, 4, 0.5)]  # (N, D, K, q, missing rate)


def case(n, d, k, q, rate, repeats):
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, q)) @ rng.normal(size=(q, d)) + 0.5 * rng.normal(size=(n, d))
    X += 2.0 * rng.integers(k, size=n)[:, None]
    X[rng.random(X.shape) < rate] = np.nan
    data = fa.prepare(X)
    base = mfa.MFAConfig(n_components=k, n_factors=q, strategy="numpy")
    with threadpool_limits(limits=1):
        start = mfa.init(data, base, np.random.default_rng(0))
        configs = {s: replace(base, strategy=s) for s in ("numpy", "compiled")}
        for config in configs.values():
            mfa.step(start, data, config)  # warm-up (loads the compiled kernel, builds its workspace)
        times = {s: [] for s in configs}
        for _ in range(repeats):
            for s, config in configs.items():
                t0 = time.perf_counter()
                mfa.step(start, data, config)
                times[s].append(time.perf_counter() - t0)
    med = {s: float(np.median(v)) for s, v in times.items()}
    return {"n": n, "d": d, "k": k, "q": q, "rate": rate, "numpy_seconds": med["numpy"],
            "compiled_seconds": med["compiled"], "speedup": med["numpy"] / med["compiled"]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", type=Path, default=ROOT / "results")
    args = ap.parse_args(argv)
    rows = [case(*c, args.repeats) for c in CASES]
    lines = [f"Command: `.venv/bin/python benchmarks/bench_mfa.py` (median of {args.repeats} interleaved steps, one BLAS "
             f"thread; numpy {np.__version__}, Python {platform.python_version()}).", "",
             "| N x D | K | q | missing | numpy s/step | compiled s/step | speed-up |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['n']:,} x {r['d']} | {r['k']} | {r['q']} | {r['rate']:.0%} | {r['numpy_seconds']:.4f} | "
                     f"{r['compiled_seconds']:.4f} | {r['speedup']:.2f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_mfa.json").write_text(json.dumps({"cases": rows}, indent=1))
    (args.out / "bench_mfa.md").write_text(text)


if __name__ == "__main__":
    main()
