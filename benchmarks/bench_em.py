"""Time and memory per EM iteration: explorer (with 30 % MCAR missing) against scikit-learn (complete data).

For each case, the same data set is drawn from a K-component Gaussian mixture; scikit-learn's
``GaussianMixture`` (full covariances) iterates on the **complete** matrix, explorer's EM on the
matrix with 30 % of the entries missing completely at random. One iteration = one E-step plus
one M-step in both; scikit-learn's is timed through its ``_e_step``/``_m_step`` (the body of its
``fit`` loop), explorer's through :func:`explorer.core.mixtures.em_gmm.step` (``strategy="compiled"``, and
the numpy reference kernels for comparison). Timings alternate between the libraries (interleaved,
so that drifts in machine load hit both alike); the median is reported, with the ratio explorer /
scikit-learn (below 1 = explorer faster). Peak memory of one step (tracemalloc: numpy's allocations,
after a warm-up step, so the compiled kernel's per-fit workspace is not counted; its size is
reported apart) is compared at N = 1,000,000. The first-call latency of the compiled kernel
(import + first E-step, fresh process) is measured with an empty and with a filled numba cache.

This is a benchmark, not a test: it prints and writes numbers, it asserts nothing.

Usage::

    .venv/bin/python benchmarks/bench_em.py                 # every case, writes results/bench_em.{json,md}
    .venv/bin/python benchmarks/bench_em.py --quick         # small cases only (CI: add --tiny)
    .venv/bin/python benchmarks/bench_em.py --all           # and every other row of issue 11's table
    .venv/bin/python benchmarks/bench_em.py --table-only    # results/bench_targets.md from the committed JSON files

``--all`` also runs, after the EM cases, the other rows of issue 11's table, each by its own script (in a
subprocess, with ``--quick`` / tiny sizes when asked): the variational mixture against scikit-learn's
``BayesianGaussianMixture`` (``benchmarks/bench_vb.py``), delalleau2012's tree against the naive per-pattern EM
(full: ``experiments/delalleau_mnist.py``, the ten MNIST digits; quick: ``benchmarks/bench_pattern_tree.py``,
one component's E-step), EM on Dask with 1 and 2 workers (``benchmarks/bench_dask.py``) and, when the separate
environment of ``benchmarks/bench_peers.py`` exists, pygmmis. It then writes ``bench_targets.md`` in ``--out``:
every row of the table with its target, the measured value and whether it is met, read from the JSON files the
scripts wrote (a row whose script did not run in this mode says so).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import tracemalloc
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from explorer.core.mixtures import em_gmm  # noqa: E402

# (name, N, D, K, BLAS threads, spread of the component means: N(0, spread^2) per coordinate)
SEPARATED, OVERLAPPING = 3.0, 1.0
CASES = [("W1", 20_000, 10, 5, 1, SEPARATED), ("W1, overlapping", 20_000, 10, 5, 1, OVERLAPPING),
         ("W2", 100_000, 20, 10, 1, SEPARATED), ("W2, overlapping", 100_000, 20, 10, 1, OVERLAPPING),
         ("D50", 20_000, 50, 5, 1, SEPARATED), ("D50, overlapping", 20_000, 50, 5, 1, OVERLAPPING),
         ("W2, 2 threads", 100_000, 20, 10, 2, SEPARATED)]
TARGETS = {"W1": 0.5, "W1, overlapping": 0.5, "W2": 1.0, "W2, overlapping": 1.0, "D50": 2.0,
           "D50, overlapping": 2.0, "W2, 2 threads": 1.0}
#: Target of the whole-fit ratio (prepare + init + FIT_ITERS iterations against scikit-learn's fit, same iterations).
FIT_TARGETS = {"W1": 1.0, "W1, overlapping": 1.0}
FIT_ITERS = 100
QUICK = [("W1 (5k)", 5_000, 10, 5, 1, SEPARATED), ("W1 (5k), overlapping", 5_000, 10, 5, 1, OVERLAPPING)]
TINY = [("tiny", 600, 5, 3, 1, SEPARATED)]
MEMORY = (1_000_000, 10, 5)
MEMORY_QUICK = (20_000, 10, 5)
MEMORY_TINY = (2_000, 5, 3)


def make_data(n, d, k, rate, seed, spread=SEPARATED):
    rng = np.random.default_rng(seed)
    centers = rng.normal(0.0, spread, (k, d))
    labels = rng.integers(k, size=n)
    A = rng.normal(size=(k, d, d)) / np.sqrt(d)
    X = centers[labels] + np.einsum("nij,nj->ni", A[labels], rng.standard_normal((n, d))) + 0.3 * rng.standard_normal((n, d))
    missing = rng.random((n, d)) < rate
    return X, missing


def _sklearn(X, k, seed):
    from sklearn.mixture import GaussianMixture

    gm = GaussianMixture(k, covariance_type="full", max_iter=2, tol=0.0, random_state=seed, init_params="k-means++")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gm.fit(X)

    def sk():
        _, log_resp = gm._e_step(X)
        gm._m_step(X, log_resp)

    return sk


def _ours(data, config, seed):
    state = em_gmm.init(data, config, np.random.default_rng(seed))
    holder = {"s": em_gmm.step(state, data, config)}  # warm-up (compiles or loads the kernels, allocates the workspace)

    def ours():
        holder["s"] = em_gmm.step(holder["s"], data, config)

    return ours


def _timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def whole_fits(X, Xm, k, seed, iters):
    """Seconds of explorer's whole fit (prepare + k-means init + ``iters`` EM iterations, ``strategy="auto"``, no
    prior, on the data with missing values) and of scikit-learn's ``GaussianMixture.fit`` (k-means init, the same
    iterations, complete data); one run each, explorer first."""
    from sklearn.mixture import GaussianMixture

    def ours():
        data = em_gmm.prepare(Xm)
        em_gmm.fit(data, em_gmm.EMConfig(n_components=k, tol=0.0, max_iter=iters), np.random.default_rng(seed))

    def sk():
        GaussianMixture(k, covariance_type="full", max_iter=iters, tol=0.0, init_params="kmeans",
                        random_state=seed).fit(X)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _timed(ours), _timed(sk)


def bench_case(name, n, d, k, threads, spread, rate, repeats, seed, numpy_repeats, fit_iters):
    from threadpoolctl import threadpool_limits

    X, missing = make_data(n, d, k, rate, seed, spread)
    Xm = np.where(missing, np.nan, X)
    with threadpool_limits(limits=threads):
        t0 = time.perf_counter()
        data = em_gmm.prepare(Xm)
        t_prepare = time.perf_counter() - t0
        config = em_gmm.EMConfig(n_components=k, covariance_type="full", tol=0.0, strategy="compiled")
        ours = _ours(data, config, seed)
        sk = _sklearn(X, k, seed)
        sk()  # warm-up
        ours_all, sk_all = [], []
        for _ in range(repeats):  # interleaved
            ours_all.append(_timed(ours))
            sk_all.append(_timed(sk))
        numpy_all = []
        if numpy_repeats:
            ref = _ours(data, replace(config, strategy="numpy"), seed)
            numpy_all = [_timed(ref) for _ in range(numpy_repeats)]
        fit_ours, fit_sk = whole_fits(X, Xm, k, seed, fit_iters) if fit_iters else (None, None)
    t_ours, t_sk = float(np.median(ours_all)), float(np.median(sk_all))
    t_np = float(np.median(numpy_all)) if numpy_all else None
    return {
        "case": name, "n_samples": n, "n_features": d, "n_components": k, "blas_threads": threads, "spread": spread,
        "fit_iterations": fit_iters, "explorer_fit_seconds": fit_ours, "sklearn_fit_seconds": fit_sk,
        "fit_ratio": None if fit_ours is None else fit_ours / fit_sk, "fit_target": FIT_TARGETS.get(name),
        "missing_rate": float(missing.mean()), "n_patterns": data.patterns.n_patterns,
        "prepare_seconds": t_prepare, "explorer_seconds_per_iter": t_ours, "sklearn_complete_seconds_per_iter": t_sk,
        "ratio": t_ours / t_sk, "target": TARGETS.get(name), "numpy_strategy_seconds_per_iter": t_np,
        "numpy_strategy_ratio": None if t_np is None else t_np / t_sk,
        "explorer_all": ours_all, "sklearn_all": sk_all, "numpy_all": numpy_all,
    }


def _peak(fn):
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak - base


def bench_memory(n, d, k, rate, seed):
    from threadpoolctl import threadpool_limits

    X, missing = make_data(n, d, k, rate, seed)
    data = em_gmm.prepare(np.where(missing, np.nan, X))
    config = em_gmm.EMConfig(n_components=k, covariance_type="full", tol=0.0, strategy="compiled")
    with threadpool_limits(limits=1):
        ours = _ours(data, config, seed)
        sk = _sklearn(X, k, seed)
        sk()
        peak_ours, peak_sk = _peak(ours), _peak(sk)
    ws = em_gmm.workspace(data, config)
    ws_bytes = sum(a.nbytes for a in vars(ws).values() if isinstance(a, np.ndarray))
    return {"n_samples": n, "n_features": d, "n_components": k, "explorer_step_peak_bytes": peak_ours,
            "sklearn_step_peak_bytes": peak_sk, "ratio": peak_ours / peak_sk, "workspace_bytes": ws_bytes,
            "data_bytes": X.nbytes}


_LATENCY_SCRIPT = """
import time
t0 = time.perf_counter()
import numpy as np
from explorer.core.mixtures import em_gmm
t1 = time.perf_counter()
rng = np.random.default_rng(0)
X = rng.normal(size=(300, 4)); X[rng.random(X.shape) < 0.3] = np.nan
data = em_gmm.prepare(X)
cfg = em_gmm.EMConfig(n_components=2, strategy="compiled")
s = em_gmm.init(data, em_gmm.EMConfig(n_components=2, strategy="numpy"), rng)
t2 = time.perf_counter()
s = em_gmm.step(s, data, cfg)
t3 = time.perf_counter()
s = em_gmm.step(s, data, cfg)
t4 = time.perf_counter()
print(t1 - t0, t3 - t2, t4 - t3)
"""


def first_call_latency():
    """(import, first compiled step, second step) in seconds, fresh processes: empty cache, then filled."""
    out = {}
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache, OPENBLAS_NUM_THREADS="1")
        for label in ("cold_cache", "warm_cache"):
            res = subprocess.run([sys.executable, "-c", _LATENCY_SCRIPT], capture_output=True, text=True, env=env,
                                 cwd=ROOT, check=True)
            imp, first, second = map(float, res.stdout.split())
            out[label] = {"import_seconds": imp, "first_step_seconds": first, "next_step_seconds": second}
    return out


def blas_info():
    try:
        from threadpoolctl import threadpool_info

        return [{k: v for k, v in info.items() if k in ("internal_api", "version", "num_threads", "architecture")}
                for info in threadpool_info()]
    except Exception as exc:  # informational only
        return [repr(exc)]


def _mb(b):
    return f"{b / 2**20:,.1f}"


def _row(r):
    target = "" if r["target"] is None else f"<= {r['target']}"
    ref = ""
    if r["numpy_strategy_seconds_per_iter"] is not None:
        ref = f"{r['numpy_strategy_seconds_per_iter']:.4f} ({r['numpy_strategy_ratio']:.2f})"
    fit = ""
    if r.get("fit_ratio") is not None:
        fit = (f"{r['explorer_fit_seconds']:.2f} / {r['sklearn_fit_seconds']:.2f} = {r['fit_ratio']:.2f}"
               + ("" if r["fit_target"] is None else f" (target <= {r['fit_target']})"))
    return (f"| {r['case']} | {r['n_samples']:,} | {r['n_features']} | {r['n_components']} | {r['blas_threads']} | "
            f"{r['n_patterns']:,} | {r['explorer_seconds_per_iter']:.4f} | {r['sklearn_complete_seconds_per_iter']:.4f} "
            f"| {r['ratio']:.2f} | {target} | {ref} | {fit} |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="one small case, small memory case")
    ap.add_argument("--tiny", action="store_true", help="with --quick: tiny sizes (CI smoke test)")
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--numpy-repeats", type=int, default=3, help="iterations of the numpy reference strategy (0: skip)")
    ap.add_argument("--rate", type=float, default=0.3)
    ap.add_argument("--fit-iters", type=int, default=None,
                    help=f"iterations of the whole-fit comparison (default {FIT_ITERS}; --quick: 10; 0: skip)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=ROOT / "results")
    ap.add_argument("--all", action="store_true", help="also every other row of issue 11's table (see the docstring)")
    ap.add_argument("--table-only", action="store_true",
                    help="only (re)write bench_targets.md from the JSON files already in --out (no timing)")
    args = ap.parse_args(argv)
    if args.table_only:
        table = targets_table(args.out, quick=args.quick, how="--table-only")
        (args.out / "bench_targets.md").write_text(table)
        print(table)
        return
    if args.all:
        args.out.mkdir(parents=True, exist_ok=True)
    if args.quick:
        cases, mem = (TINY, MEMORY_TINY) if args.tiny else (QUICK, MEMORY_QUICK)
        repeats = min(args.repeats, 3)
    else:
        cases, mem, repeats = CASES, MEMORY, args.repeats
    load_start = os.getloadavg()
    rows = []
    fit_iters = args.fit_iters if args.fit_iters is not None else (10 if args.quick else FIT_ITERS)
    for name, n, d, k, threads, spread in cases:
        r = bench_case(name, n, d, k, threads, spread, args.rate, repeats, args.seed, args.numpy_repeats, fit_iters)
        rows.append(r)
        print(f"{name}: N={n} D={d} K={k} threads={threads}: explorer {r['explorer_seconds_per_iter']:.4f} s/iter "
              f"({r['n_patterns']} patterns, {r['missing_rate']:.0%} missing), scikit-learn complete "
              f"{r['sklearn_complete_seconds_per_iter']:.4f} s/iter, ratio {r['ratio']:.2f}; whole fit "
              f"{r['explorer_fit_seconds']} / {r['sklearn_fit_seconds']} s", flush=True)
    memory = bench_memory(*mem, args.rate, args.seed)
    print(f"peak memory of a step at N={mem[0]}: explorer {_mb(memory['explorer_step_peak_bytes'])} MiB, scikit-learn "
          f"{_mb(memory['sklearn_step_peak_bytes'])} MiB, ratio {memory['ratio']:.2f}", flush=True)
    latency = first_call_latency()
    print(f"first-call latency: {latency}", flush=True)
    load_end = os.getloadavg()
    meta = {"python": platform.python_version(), "numpy": np.__version__, "machine": platform.machine(),
            "processor": platform.processor(), "blas": blas_info(), "repeats": repeats,
            "load_average_start": load_start, "load_average_end": load_end, "cpu_count": os.cpu_count()}
    args.out.mkdir(parents=True, exist_ok=True)
    name = "bench_em_quick" if args.quick else "bench_em"
    (args.out / f"{name}.json").write_text(json.dumps({"meta": meta, "cases": rows, "memory": memory,
                                                       "first_call_latency": latency}, indent=2))
    lines = [
        "| case | N | D | K | BLAS threads | patterns | explorer s/iter (30 % missing) | scikit-learn s/iter (complete) "
        f"| ratio | target | numpy strategy s/iter (ratio) | whole fit, {fit_iters} iterations: explorer / scikit-learn "
        "s = ratio |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ] + [_row(r) for r in rows]
    cmd = "benchmarks/bench_em.py" + (" --quick" if args.quick else "") + (" --tiny" if args.tiny else "")
    text = (
        f"Command: `.venv/bin/python {cmd}` (median of {repeats} interleaved iterations; numpy "
        f"{np.__version__}, Python {platform.python_version()}; explorer: `EMConfig(strategy='compiled')`, "
        f"the numpy reference strategy timed after, {args.numpy_repeats} iterations; {os.cpu_count()} CPUs, load "
        f"average (1 / 5 / 15 min) {'/'.join(f'{v:.1f}' for v in load_start)} at the start, "
        f"{'/'.join(f'{v:.1f}' for v in load_end)} at the end).\n\n"
        + "\n".join(lines) + "\n\n"
        f"Peak memory of one step (tracemalloc, after a warm-up step) at N = {memory['n_samples']:,}, "
        f"D = {memory['n_features']}, K = {memory['n_components']}: explorer {_mb(memory['explorer_step_peak_bytes'])} "
        f"MiB (30 % missing), scikit-learn {_mb(memory['sklearn_step_peak_bytes'])} MiB (complete data), ratio "
        f"{memory['ratio']:.2f} (target <= 1.5). The compiled kernel's workspace, allocated once per fit, is "
        f"{_mb(memory['workspace_bytes'])} MiB (the data matrix: {_mb(memory['data_bytes'])} MiB).\n\n"
        "First-call latency (fresh process; import of explorer.core.mixtures.em_gmm, first compiled step -- "
        "importing numba, "
        "compiling or loading the kernels -- and the next one on 300 x 4 data):\n\n| numba cache | import s | first step s | next step s |\n|---|---|---|---|\n"
        + "\n".join(f"| {label.replace('_', ' ')} | {v['import_seconds']:.2f} | {v['first_step_seconds']:.2f} | "
                    f"{v['next_step_seconds']:.4f} |" for label, v in latency.items()) + "\n"
    )
    (args.out / f"{name}.md").write_text(text)
    print(text)
    if not args.quick:  # the small wide data of issue 22 (its own script and files)
        _run([sys.executable, ROOT / "benchmarks" / "bench_em_wide.py", "--out", args.out], "250 x 200, 70 % MCAR")
    if args.all:
        run_other_rows(args.out, quick=args.quick, tiny=args.tiny)
        table = targets_table(args.out, quick=args.quick)
        (args.out / "bench_targets.md").write_text(table)
        print(table)


PEERS_PYTHON = Path("/work/peers-venv/bin/python")


def _run(cmd: list, what: str) -> bool:
    print(f">> {what}: {' '.join(str(c) for c in cmd)}", flush=True)
    done = subprocess.run([str(c) for c in cmd], cwd=ROOT)
    if done.returncode:
        print(f">> {what} failed with exit status {done.returncode}", flush=True)
    return done.returncode == 0


def run_other_rows(out: Path, *, quick: bool, tiny: bool) -> None:
    """Run the other benchmarks of issue 11's table, each writing its JSON into ``out`` (see the docstring)."""
    py = sys.executable
    vb = [py, ROOT / "benchmarks" / "bench_vb.py", "--out", out]
    if quick:
        vb += ["--quick"] + (["--repeats", "2", "--numpy-repeats", "1"] if tiny else [])
    _run(vb, "variational mixture vs BayesianGaussianMixture")
    if not quick:
        _run([py, ROOT / "experiments" / "delalleau_mnist.py"], "delalleau2012 on MNIST (writes results/)")
    else:
        tree = [py, ROOT / "benchmarks" / "bench_pattern_tree.py", "--repeats", "1", "--json", out / "bench_pattern_tree.json"]
        _run(tree + (["--rows", "200"] if tiny else ["--mnist", "3"]), "delalleau2012: one E-step, tree vs naive")
    dask = [py, ROOT / "benchmarks" / "bench_dask.py", "--out", out / ("bench_dask_quick" if quick else "bench_dask")]
    if quick:
        dask += ["--n", "20000", "--iters", "2"] if tiny else ["--quick"]
    _run(dask, "EM on Dask, 1 and 2 workers")
    if PEERS_PYTHON.exists() and not tiny:
        _run([PEERS_PYTHON, ROOT / "benchmarks" / "bench_peers.py"] + (["--quick"] if quick else []), "pygmmis")
    else:
        print(f">> pygmmis: skipped ({PEERS_PYTHON} is not there: see benchmarks/bench_peers.py)", flush=True)


def _load(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _verdict(value, target) -> str:
    return "met" if value <= target else f"missed by {value / target:.2f}x"


def targets_table(out: Path, *, quick: bool, how: str = "--all") -> str:
    """Issue 11's table: target, measured value and verdict per row, from the JSON files in ``out``."""
    sfx = "_quick" if quick else ""
    rows = []
    em = _load(out / f"bench_em{sfx}.json")
    for case in (em or {}).get("cases", []):
        t = TARGETS.get(case["case"])
        rows.append((f"EM {case['case']} (N={case['n_samples']:,}, D={case['n_features']}, K={case['n_components']}, "
                     f"{case['blas_threads']} thread(s)), 30 % MCAR vs scikit-learn complete",
                     f"<= {t}x" if t else "-", f"{case['ratio']:.2f}x", _verdict(case["ratio"], t) if t else "-"))
        if case.get("fit_ratio") is not None:
            ft = case.get("fit_target")
            rows.append((f"EM {case['case']}: whole fit (prepare + {case['fit_iterations']} iterations) vs scikit-learn's "
                         "fit", f"<= {ft}x" if ft else "-", f"{case['fit_ratio']:.2f}x",
                         _verdict(case["fit_ratio"], ft) if ft else "-"))
    wide = None if quick else _load(out / "bench_em_wide.json")
    if wide:
        r = wide["rows"]["imputer default fit"]
        rows.append((f"EM {wide['n']} x {wide['d']}, 70 % MCAR, default imputer fit, K = 1", "<= 3 s",
                     f"{r['seconds']:.1f} s", _verdict(r["seconds"], 3.0)))
    if em:
        m = em["memory"]
        rows.append((f"peak memory of a step, N={m['n_samples']:,}", "<= 1.5x", f"{m['ratio']:.2f}x",
                     _verdict(m["ratio"], 1.5)))
        lat = em["first_call_latency"].get("warm_cache")
        if lat:
            rows.append(("first compiled step, filled numba cache", "<= 1 s", f"{lat['first_step_seconds']:.2f} s",
                         _verdict(lat["first_step_seconds"], 1.0)))
    vb = _load(out / f"bench_vb{sfx}.json")
    for case in (vb or {}).get("cases", []):
        label = f"VB DP mixture N={case['n_samples']:,}, D={case['n_features']}, K={case['n_components']} vs BayesianGaussianMixture"
        rows.append((label + ", complete", "<= 1.0x", f"{case['ratio_complete']:.2f}x", _verdict(case["ratio_complete"], 1.0)))
        rows.append((label + ", 30 % MCAR", "<= 1.5x", f"{case['ratio_missing']:.2f}x", _verdict(case["ratio_missing"], 1.5)))
    mnist = None if quick else _load(ROOT / "results" / "delalleau_mnist.json")
    if mnist:
        sp = [c["timing"]["naive"]["seconds_per_iter"] / c["timing"]["tree"]["seconds_per_iter"] for c in mnist["classes"]]
        diff = max(c["timing"]["tree"]["max_rel_diff_loglik"] for c in mnist["classes"])
        rows.append(("delalleau2012: MNIST, 5x5 square per image, per-digit mixtures, tree vs naive per-pattern EM",
                     ">= 8-20x (paper), same log-likelihood", f"{np.mean(sp):.1f}x (range {min(sp):.1f}-{max(sp):.1f}), "
                     f"log-likelihoods within {diff:.0e}", _verdict(8.0, float(np.mean(sp))) if np.mean(sp) < 8 else "met"))
    tree = _load(out / "bench_pattern_tree.json") if quick else None
    if tree:
        rows.append((f"delalleau2012, one E-step ({tree['rows']} rows, {tree['n_patterns']} patterns, D={tree['n_features']}), "
                     "tree vs naive", ">= 8x", f"{tree['naive_over_tree']:.1f}x", _verdict(8.0, tree["naive_over_tree"])
                     if tree["naive_over_tree"] < 8 else "met"))
    dask = _load(out / f"bench_dask{sfx}.json")
    if dask:
        rows.append((f"Dask, N={dask['n_rows']:,}, D={dask['n_features']}: 2 workers vs 1", "~1.8x faster",
                     f"{dask['speedup']:.2f}x", "met" if dask["speedup"] >= 1.7 else "missed"))
    peers = _load(ROOT / "results" / f"bench_peers{sfx}.json")
    for case in (peers or {}).get("cases", []):
        r = case["ratio_to_sklearn_complete"]
        if "pygmmis_serial" in r:
            rows.append((f"pygmmis (N={case['n_samples']:,}, D={case['n_features']}, K={case['n_components']}, 30 % MCAR, "
                         "one process) vs scikit-learn complete / vs explorer", "report",
                         f"{r['pygmmis_serial']:.0f}x / {case['ratio_to_explorer']['pygmmis_serial']:.0f}x", "-"))
    lines = ["# Issue 11's targets: measured", "",
             f"Written by `benchmarks/bench_em.py {how}{' --quick' if quick else ''}` from the JSON files in "
             f"`{out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}`; every number comes from its script's "
             "last run (medians; see each script's md for the command, the machine load and notes).", "",
             "| row | target | measured | verdict |", "|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
