"""How many EM steps the prior's data moments need (issue 22): imputation RMSE against the cap on those steps.

With incomplete data and full covariances, the MAP prior's scale comes from the one-component ML Gaussian fitted by
EM (:func:`explorer.core.mixtures.em_gmm.data_moments`), stopped when no parameter moves by more than 1e-6 of the
largest covariance entry or at a cap. On small wide data the ML fit does not converge (the likelihood keeps rising
along a ridge), so the cap is what stops it and sets its cost: on 250 x 200 at 70 % MCAR each step costs about as
much as an EM step of the fit itself. This benchmark fits ``GaussianMixtureImputer(n_components=1,
predictive="gaussian")`` (the point imputation ``transform`` does not depend on the draws) with the cap set to each
of ``--caps`` and scores the RMSE of ``transform`` on hidden entries:

* the wide case of ``benchmarks/bench_em_wide.py`` (250 x 200, rank-10 correlated columns, 70 % MCAR; seeds 0-2);
* the six benchmark sets of ``benchmarks/coverage_prior.py`` (standardised, 20 % of the observed entries hidden),
  whole and as random subsamples of 25, 50 and 100 rows (two seeds each).

Each cell is the mean RMSE of a group divided by the same mean with the cap at 100 (the cap before issue 22): below
1 is better. Also the seconds of the prior's moments on the first wide case (one BLAS thread). A benchmark, not a
test: it writes numbers and asserts nothing.

Usage::

    .venv/bin/python benchmarks/moment_steps.py       # writes results/moment_steps.{json,md}
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

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import numpy as np  # noqa: E402
from bench_em_wide import make_data  # noqa: E402
from coverage_prior import DATASETS, hide, load, subsample  # noqa: E402

from explorer import GaussianMixtureImputer  # noqa: E402
from explorer.core.mixtures import em_gmm  # noqa: E402

CAPS = (10, 20, 30, 50, 100)
REFERENCE_CAP = 100
SIZES = (25, 50, 100, None)


def cases():
    """(group, name, training data with NaN, truth, hidden mask) of every case."""
    out = []
    for seed in range(3):
        X, miss = make_data(250, 200, 0.7, seed=seed)
        out.append(("250 x 200, 70 % MCAR", f"wide-{seed}", np.where(miss, np.nan, X), X, miss))
    for name in DATASETS:
        X, numeric = load(name)
        for n_rows in SIZES:
            for seed in range(1 if n_rows is None else 2):
                rng = np.random.default_rng(seed)
                if n_rows is None:
                    Xs, hidden = X, hide(X, 0.2, rng)
                elif n_rows < X.shape[0]:
                    Xs, _, hidden = subsample(X, numeric, n_rows, 0.2, rng)
                else:
                    continue
                out.append((name, f"{name}-{n_rows or 'all'}-{seed}", np.where(hidden, np.nan, Xs), Xs, hidden))
    return out


def rmse(X_train, truth, hidden) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = GaussianMixtureImputer(n_components=1, predictive="gaussian", random_state=0).fit(X_train)
        imputed = model.transform(X_train)
    return float(np.sqrt(np.mean((imputed[hidden] - truth[hidden]) ** 2)))


def moments_seconds(X_train, repeats: int = 3) -> float:
    """Median seconds of :func:`explorer.core.mixtures.em_gmm.resolve_prior` (the moments) on ``X_train``."""
    data = em_gmm.prepare(X_train)
    config = em_gmm.EMConfig(n_components=1, prior="auto")
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        em_gmm.resolve_prior(data, config)
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--caps", type=int, nargs="+", default=list(CAPS))
    ap.add_argument("--out", type=Path, default=ROOT / "results")
    args = ap.parse_args(argv)
    caps = sorted(set(args.caps) | {REFERENCE_CAP})
    all_cases = cases()
    scores: dict[int, dict[str, float]] = {}
    seconds: dict[int, float] = {}
    default_cap = em_gmm.MOMENT_STEPS
    t0 = time.perf_counter()
    try:
        for cap in caps:
            em_gmm.MOMENT_STEPS = cap
            scores[cap] = {name: rmse(Xt, truth, hidden) for _, name, Xt, truth, hidden in all_cases}
            seconds[cap] = moments_seconds(all_cases[0][2])
            print(f"cap {cap}: {time.perf_counter() - t0:.0f} s", flush=True)
    finally:
        em_gmm.MOMENT_STEPS = default_cap
    groups: dict[str, list[str]] = {}
    for group, name, *_ in all_cases:
        groups.setdefault(group, []).append(name)
    by_size: dict[str, list[str]] = {}
    for group, name, *_ in all_cases:
        if not name.startswith("wide"):
            by_size.setdefault(name.split("-")[1], []).append(name)

    def ratio(names, cap):
        return float(np.mean([scores[cap][n] for n in names]) / np.mean([scores[REFERENCE_CAP][n] for n in names]))

    table = {g: {cap: ratio(ns, cap) for cap in caps} for g, ns in groups.items()}
    size_table = {s: {cap: ratio(ns, cap) for cap in caps} for s, ns in by_size.items()}
    command = ".venv/bin/python benchmarks/moment_steps.py" + "".join(f" {a}" for a in (argv or sys.argv[1:]))
    payload = {"command": command, "default_cap": default_cap, "reference_cap": REFERENCE_CAP, "caps": caps,
               "rmse": {str(c): s for c, s in scores.items()},
               "ratio_by_set": {g: {str(c): v for c, v in row.items()} for g, row in table.items()},
               "ratio_by_size": {s: {str(c): v for c, v in row.items()} for s, row in size_table.items()},
               "moments_seconds_wide": {str(c): v for c, v in seconds.items()},
               "python": platform.python_version(), "numpy": np.__version__,
               "seconds": time.perf_counter() - t0}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "moment_steps.json").write_text(json.dumps(payload, indent=1) + "\n")
    head = " | ".join(str(c) for c in caps)
    lines = [f"Command: `{command}` (one BLAS thread; numpy {np.__version__}, Python {platform.python_version()}; "
             f"{payload['seconds']:.0f} s).", "",
             f"Imputation RMSE on hidden entries with the prior's moment steps capped at each value, divided by the "
             f"RMSE with the cap at {REFERENCE_CAP} (below 1: better). `GaussianMixtureImputer(n_components=1)`; "
             f"the library's cap is now {default_cap}.", "",
             f"| set | {head} |", "|---|" + "---|" * len(caps)]
    lines += [f"| {g} | " + " | ".join(f"{row[c]:.3f}" for c in caps) + " |" for g, row in table.items()]
    lines += ["", "The benchmark sets by subsample size (rows; `all` = the whole set):", "",
              f"| rows | {head} |", "|---|" + "---|" * len(caps)]
    lines += [f"| {s} | " + " | ".join(f"{row[c]:.3f}" for c in caps) + " |" for s, row in size_table.items()]
    lines += ["", "Seconds of the prior's moments on the 250 x 200 case (median of 3):", "",
              f"| cap | {head} |", "|---|" + "---|" * len(caps),
              "| seconds | " + " | ".join(f"{seconds[c]:.2f}" for c in caps) + " |"]
    (args.out / "moment_steps.md").write_text("\n".join(lines) + "\n")
    print((args.out / "moment_steps.md").read_text())


if __name__ == "__main__":
    main()
