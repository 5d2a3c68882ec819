"""EM on Dask (explorer.dask_em): seconds per iteration on 1 and 2 worker processes, speed-up, memory per worker.

The data never sit in memory: N rows x D = 10 columns are generated lazily per chunk with a seeded
``dask.array.random.default_rng`` (a mixture of three shifted correlated Gaussians), and 30 % of the
entries are set to NaN completely at random (MCAR), chunk by chunk; every EM pass regenerates its
chunks (deterministically), so a "second per iteration" includes drawing the chunk, as reading it from
disk would. The fit starts from fixed parameters (so that only EM passes are timed; k-means on a sample
would add one pass) and runs ``--iters`` iterations (tol = 0) on a ``LocalCluster`` of 1 and then 2
worker processes with 1 thread each. Reported: the median seconds of the iteration passes (iteration 0's
pass, which warms the workers up, is left out), the speed-up 1 -> 2 workers, and the peak resident memory
of every worker process (``ru_maxrss``) against its memory before the fit and the chunk's size. Both
runs must give the same log-likelihoods (checked to 1e-10).

This is a benchmark, not a test: it prints and writes numbers (results/bench_dask.{json,md}).

Usage::

    .venv/bin/python benchmarks/bench_dask.py            # N = 10,000,000 (quiet machine with 2 cores)
    .venv/bin/python benchmarks/bench_dask.py --quick    # N = 200,000 (a minute)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import dask  # noqa: E402
import dask.array as da  # noqa: E402
import distributed  # noqa: E402

from explorer import dask_em  # noqa: E402
from explorer.core.mixtures import em_gmm  # noqa: E402

D = 10
K = 3
RATE = 0.3


def mixture(seed: int = 0):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(D, D)) / np.sqrt(D) + np.eye(D)
    shifts = rng.normal(0.0, 3.0, size=(K, D))
    return A, shifts


def lazy_data(n: int, chunk_rows: int, seed: int = 0):
    """(n, D) Dask array: a K-component mixture, 30 % MCAR NaN; nothing is computed."""
    A, shifts = mixture(seed)
    rs = da.random.default_rng(seed)
    z = rs.standard_normal((n, D), chunks=(chunk_rows, D))
    u = rs.random((n, 1), chunks=(chunk_rows, 1))
    X = z @ A + shifts[0] + (u < 1 / 3) * (shifts[1] - shifts[0]) + (u > 2 / 3) * (shifts[2] - shifts[0])
    hide = rs.random((n, D), chunks=(chunk_rows, D)) < RATE
    return da.where(hide, np.nan, X)


def start_parameters(seed: int = 0):
    """Fixed start: the true centres moved by one unit, identity covariances, equal weights."""
    _, shifts = mixture(seed)
    means = shifts + 1.0
    return np.full(K, 1 / K), means, np.stack([np.eye(D) * 2.0] * K)


def _rss_kib() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def _peak_kib() -> int:
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def run(n: int, chunk_rows: int, n_workers: int, iters: int) -> dict:
    with distributed.LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=None,
                                  host="127.0.0.1", memory_limit=None) as cluster, distributed.Client(cluster) as client:
        client.run(lambda: __import__("explorer.dask_em"))  # imports outside the timings
        before = client.run(_rss_kib)
        X = lazy_data(n, chunk_rows)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", em_gmm.ConvergenceWarning)
            res = dask_em.fit(X, K, init_params=start_parameters(), max_iter=iters, tol=0.0, client=client)
        total = time.perf_counter() - t0
        peak = client.run(_peak_kib)
    passes = [s["seconds"] for s in res.trace]
    return {
        "n_workers": n_workers,
        "seconds_per_iteration": float(np.median(passes[1:])),
        "iteration_seconds": passes,
        "fit_seconds": total,
        "rss_before_mib": [v / 1024 for v in before.values()],
        "peak_rss_mib": [v / 1024 for v in peak.values()],
        "log_likelihood": res.log_likelihood_trace.tolist(),
        "n_iter": res.n_iter,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N = 200,000 instead of 10,000,000")
    parser.add_argument("--n", type=int, default=None, help="rows (overrides --quick)")
    parser.add_argument("--chunk-rows", type=int, default=None, help="rows per chunk (default N / 40)")
    parser.add_argument("--iters", type=int, default=3, help="EM iterations per run (default 3)")
    parser.add_argument("--out", default=str(ROOT / "results" / "bench_dask"), help="output stem (.json, .md)")
    args = parser.parse_args(argv)
    n = args.n or (200_000 if args.quick else 10_000_000)
    chunk = args.chunk_rows or max(1000, n // 40)
    chunk_mib = chunk * D * 8 / 2**20
    load = os.getloadavg()[0]
    command = "python benchmarks/bench_dask.py " + " ".join(argv if argv is not None else sys.argv[1:])
    print(f"{command.strip()}: N={n:,} D={D} K={K} chunk={chunk:,} rows ({chunk_mib:.1f} MiB), {args.iters} iterations",
          flush=True)
    runs = []
    for w in (1, 2):
        r = run(n, chunk, w, args.iters)
        runs.append(r)
        print(f"  {w} worker(s): {r['seconds_per_iteration']:.2f} s/iteration (passes {', '.join(f'{s:.2f}' for s in r['iteration_seconds'])}), "
              f"peak RSS per worker {', '.join(f'{m:.0f}' for m in r['peak_rss_mib'])} MiB "
              f"(before {', '.join(f'{m:.0f}' for m in r['rss_before_mib'])} MiB)", flush=True)
    speedup = runs[0]["seconds_per_iteration"] / runs[1]["seconds_per_iteration"]
    same = bool(np.allclose(runs[0]["log_likelihood"], runs[1]["log_likelihood"], rtol=1e-10, atol=0))
    print(f"  speed-up 1 -> 2 workers: {speedup:.2f}x (target ~1.8x); same log-likelihoods: {same}")
    out = {
        "command": command.strip(), "n_rows": n, "n_features": D, "n_components": K, "missing_rate": RATE,
        "chunk_rows": chunk, "chunk_mib": chunk_mib, "n_chunks": -(-n // chunk), "iterations": args.iters,
        "runs": runs, "speedup": speedup, "same_log_likelihoods": same,
        "machine": {"cpus": os.cpu_count(), "load_average_at_start": load, "python": platform.python_version(),
                    "dask": dask.__version__, "numpy": np.__version__},
    }
    stem = Path(args.out)
    stem.parent.mkdir(parents=True, exist_ok=True)
    stem.with_suffix(".json").write_text(json.dumps(out, indent=1) + "\n")
    lines = [
        "# EM on Dask: seconds per iteration, speed-up, memory per worker", "",
        f"Command: `{out['command']}` ({time.strftime('%Y-%m-%d')}, {os.cpu_count()} CPUs, load average {load:.1f} at the "
        f"start (above 0.5 the timings and the speed-up are not those of a quiet machine), dask {dask.__version__}).", "",
        f"N = {n:,} rows, D = {D}, K = {K}, {RATE:.0%} MCAR, generated lazily per chunk; chunks of {chunk:,} rows "
        f"({chunk_mib:.1f} MiB of float64, {out['n_chunks']} chunks); {args.iters} EM iterations from fixed "
        "parameters, full covariances; LocalCluster, worker processes with 1 thread each.", "",
        "| workers | s / iteration (median) | fit (s, incl. validation pass) | peak RSS per worker (MiB) | RSS before fit (MiB) |",
        "| ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in runs:
        lines.append(f"| {r['n_workers']} | {r['seconds_per_iteration']:.2f} | {r['fit_seconds']:.1f} | "
                     f"{', '.join(f'{m:.0f}' for m in r['peak_rss_mib'])} | {', '.join(f'{m:.0f}' for m in r['rss_before_mib'])} |")
    lines += ["", f"Speed-up 1 -> 2 workers: **{speedup:.2f}x** (target about 1.8x on 2 idle cores). "
              f"Same log-likelihoods in both runs (1e-10): {same}.", "",
              "Peak RSS includes the worker's Python, numpy and explorer (the 'before' column); the E-step of a "
              f"chunk holds about (K + 3) chunks = {(K + 3) * chunk_mib:.0f} MiB on top of it.", ""]
    stem.with_suffix(".md").write_text("\n".join(lines))
    print(f"wrote {stem.with_suffix('.json')} and {stem.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
