"""Imputation benchmark of garriga2017 (issue 3): mechanisms x rates x methods on Boston / Ionosphere.

Runs :func:`explorer.benchmark.run_benchmark` and writes, into ``--out``:

* ``results.csv``: the tidy table (one row per data set x mechanism x rate x method x repetition x metric);
* ``summary.csv``: mean, std, n, n_inf, n_failed per cell (:func:`explorer.benchmark.summarise`);
* ``summary.nc``: the summary as an xarray Dataset (NetCDF), when xarray can write it.

A line is printed per finished job with its time, the elapsed time and an ETA. Without ``--rates``
each mechanism uses the rates of garriga2017 (§2.2): mcar 0.1-0.9, mcar_rows 0.1/0.3, the others 0.1/0.3/0.5.

Usage::

    .venv/bin/python benchmarks/run_imputation.py --quick --out /tmp/bench      # Boston, MCAR .1/.3, cheap settings
    .venv/bin/python benchmarks/run_imputation.py --datasets boston ionosphere --repetitions 5 --out results/garriga2017
    .venv/bin/python benchmarks/run_imputation.py --list-methods
"""

from __future__ import annotations

import os

# Each job runs on one BLAS thread; parallelism comes from --n-jobs. (Set before numpy loads: with several
# workers, multi-threaded BLAS on small matrices oversubscribes the cores and ran MICE ~20x slower here.)
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import pandas as pd

from explorer.benchmark import METHODS, run_benchmark, summarise

GARRIGA2017_RATES = {
    "mcar": (0.1, 0.3, 0.5, 0.7, 0.9),
    "mcar_rows": (0.1, 0.3),
    "mar_rows": (0.1, 0.3, 0.5),
    "nmar_lowest": (0.1, 0.3, 0.5),
    "nmar_random": (0.1, 0.3, 0.5),
}
DEFAULT_METHODS = ("mean", "poigmm", "poigmm_thesis", "em_gmm", "mice", "missforest", "knn")


def _hms(seconds: float) -> str:
    seconds = int(float(seconds) + 0.5)
    return f"{seconds // 3600:d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def _progress(prefix: str):
    def show(d: dict) -> None:
        err = f"  FAILED: {d['error'][:120]}" if d["error"] else ""
        print(f"{prefix}[{d['done']}/{d['total']}] {d['dataset']} {d['mechanism']} r={d['rate']:g} "
              f"rep={d['repetition']} {d['method']}: {d['seconds']:.1f}s | elapsed {_hms(d['elapsed'])} "
              f"ETA {_hms(d['eta'])}{err}", flush=True)

    return show


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", nargs="+", default=None, help="built-in data sets (default boston ionosphere)")
    p.add_argument("--mechanisms", nargs="+", default=None, help=f"default {' '.join(GARRIGA2017_RATES)}")
    p.add_argument("--rates", nargs="+", type=float, default=None, help="default: garriga2017 rates per mechanism")
    p.add_argument("--methods", nargs="+", default=None, choices=list(METHODS), help="default: all")
    p.add_argument("--repetitions", type=int, default=None, help="default 3 (1 with --quick)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--variant", choices=("code", "thesis"), default="code", help="mechanism variant")
    p.add_argument("--n-jobs", type=int, default=1, help="worker processes (-1 = all cores)")
    p.add_argument("--out", type=Path, default=ROOT / "results" / "garriga2017_benchmark")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: boston, mcar 0.1 0.3, 1 repetition, cheap method settings (unless overridden)")
    p.add_argument("--missforest-runs", type=int, default=None,
                   help="missForest runs (imputations) per job (default 10, the author's; 2 with --quick)")
    p.add_argument("--append", action="store_true",
                   help="merge into an existing results.csv in --out (new jobs replace old ones with the same "
                        "data set, mechanism, rate, repetition and method) and re-summarise")
    p.add_argument("--list-methods", action="store_true", help="describe the methods and exit")
    return p


def _write_netcdf(summary: pd.DataFrame, path: Path) -> str:
    try:
        ds = summary.set_index(["dataset", "mechanism", "rate", "method", "metric"]).to_xarray()
        for name in ("dataset", "mechanism", "method", "metric"):
            ds[name] = ds[name].astype(str)
        ds.attrs["description"] = "garriga2017 imputation benchmark summary (explorer.benchmark.summarise)"
        ds.to_netcdf(path)
        return str(path)
    except Exception as exc:  # noqa: BLE001 - the CSVs are the primary output
        return f"not written ({type(exc).__name__}: {exc})"


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.list_methods:
        for m in METHODS.values():
            print(f"{m.name} [{m.kind}]\n  {m.description}\n  differs: {m.differs}\n")
        return 0
    datasets = args.datasets or (["boston"] if args.quick else ["boston", "ionosphere"])
    mechanisms = args.mechanisms or (["mcar"] if args.quick else list(GARRIGA2017_RATES))
    rates = args.rates or ([0.1, 0.3] if args.quick else None)
    methods = args.methods or list(DEFAULT_METHODS)
    reps = args.repetitions or (1 if args.quick else 3)
    groups = [(mechanisms, rates)] if rates else [([m], list(GARRIGA2017_RATES.get(m, (0.1, 0.3, 0.5))))
                                                  for m in mechanisms]
    t0 = time.perf_counter()
    frames = []
    for i, (mechs, rs) in enumerate(groups, 1):
        prefix = f"({i}/{len(groups)}) " if len(groups) > 1 else ""
        options = ({"missforest": {"n_runs": args.missforest_runs}}
                   if args.missforest_runs is not None and "missforest" in methods else None)
        frames.append(run_benchmark(datasets, mechs, rs, methods, reps, seed=args.seed, variant=args.variant,
                                    progress=_progress(prefix), n_jobs=args.n_jobs, quick=args.quick,
                                    method_options=options))
    df = pd.concat(frames, ignore_index=True)
    args.out.mkdir(parents=True, exist_ok=True)
    command = "python benchmarks/run_imputation.py " + " ".join(sys.argv[1:] if argv is None else argv)
    old_path = args.out / "results.csv"
    if args.append and old_path.exists():
        old = pd.read_csv(old_path, dtype={"error": str})
        old["error"] = old["error"].fillna("")
        keys = ["dataset", "mechanism", "rate", "repetition", "method"]
        new_keys = set(map(tuple, df[keys].astype(str).to_numpy()))
        keep = [tuple(k) not in new_keys for k in old[keys].astype(str).to_numpy()]
        df = pd.concat([old[keep], df], ignore_index=True)
        with open(args.out / "COMMAND.txt", "a") as fh:
            fh.write(command + "\n")
    else:
        (args.out / "COMMAND.txt").write_text(command + "\n")
    summary = summarise(df)
    df.to_csv(args.out / "results.csv", index=False)
    summary.to_csv(args.out / "summary.csv", index=False)
    nc = _write_netcdf(summary, args.out / "summary.nc")
    n_fail = int((df["error"] != "").sum())
    print(f"done in {_hms(time.perf_counter() - t0)}: {len(df)} rows, {n_fail} failed metric value(s), "
          f"{int(summary['n_inf'].sum())} infinite value(s)")
    print(f"wrote {args.out / 'results.csv'}, {args.out / 'summary.csv'}, summary.nc: {nc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
