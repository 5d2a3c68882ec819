r"""What the compiled I-step and the location model's compiled E-step save, against their references in one run.

The default imputers end their fit with a data-augmentation chain (20 kept states, burn-in 10, thinning 3: 70
sweeps). Its I-step drew each row's gaps from a conditional mixture built for every component
(``GapPlan(strategy="reference")``); it now takes the responsibilities from the compiled E-step and draws from the
drawn component only (``"compiled"``, :mod:`explorer.core.mixtures.gap_draws`). The location model's EM ran its
numeric block on the numpy kernels (``LocationConfig(strategy="numpy")``); it now goes through the E-step
dispatcher with the categorical term as a per-row offset (``"auto"``: the compiled kernel on these sizes). Each pair
is timed interleaved on the same data and the same generator, and the largest difference between the two sides'
results is printed next to the times (the same chain and the same fit, to round-off).

Cases: a Gaussian mixture's chain on 20,000 x 10 (K = 5, 30 % MCAR; the W1 shape of ``bench_em.py``), and the
location model (EM at K = 4, then its chain) on Abalone whole (4,177 x 9, one text column, 20 % MCAR) and three
copies of it (12,531 rows); then the whole default fits (``GaussianMixtureImputer()`` with its K chosen on the
data, ``MixedMixtureImputer()``), current code only.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_chains.py   # writes results/bench_chains.{json,md}
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def _w1(seed=0):
    rng = np.random.default_rng(seed)
    K, D, n = 5, 10, 20_000
    means = rng.normal(0, 3, (K, D))
    z = rng.integers(0, K, n)
    X = means[z] + rng.normal(size=(n, D)) @ rng.normal(size=(D, D)) * 0.5
    X[rng.random(X.shape) < 0.3] = np.nan
    return X


def _abalone(copies: int, seed=1):
    import pandas as pd

    from explorer.datasets import load_mixed

    df = load_mixed("abalone").reset_index(drop=True)
    df = pd.concat([df] * copies, ignore_index=True)
    return df.mask(np.random.default_rng(seed).random(df.shape) < 0.2)


def gaussian_chain(repeats: int) -> dict:
    from explorer.core.mixtures import data_augmentation as da
    from explorer.core.mixtures import em_gmm
    from explorer.core.mixtures.gap_draws import GapPlan

    X = _w1()
    data = em_gmm.prepare(X)
    config = em_gmm.EMConfig(n_components=5, prior="auto")
    state = em_gmm.fit(data, config, np.random.default_rng(0)).state
    prior = em_gmm.resolved_prior(data, config)
    dac = da.DAConfig(n_burn=10, n_thin=3)
    start = da.init(X, state.weights, state.means, state.covariances, dac, np.random.default_rng(1))
    times = {"reference": [], "compiled": []}
    kept = {}
    for _ in range(repeats):
        for kind in times:
            plan = GapPlan(X, strategy=kind)
            t, out = _timed(lambda: da.run(start, X, prior, dac, 20, np.random.default_rng(2), data.fit_rows,
                                           plan=plan))
            times[kind].append(t)
            kept[kind] = out
    diff = max(float(np.abs(a.covariances - b.covariances).max()) for a, b in zip(kept["reference"], kept["compiled"]))
    same_labels = all(np.array_equal(a.labels, b.labels) for a, b in zip(kept["reference"], kept["compiled"]))
    return {"case": "Gaussian mixture's chain, 20,000 x 10, K = 5 (70 sweeps)", "times": times,
            "max_difference": diff, "same_labels": same_labels}


def location_parts(copies: int, repeats: int) -> list[dict]:
    from explorer.core.mixtures import location_augmentation as la
    from explorer.core.mixtures import location_model as lm
    from explorer.core.mixtures.gap_draws import GapPlan

    df = _abalone(copies)
    num = df.select_dtypes("number").to_numpy(dtype=float)
    codes = df["sex"].cat.codes.to_numpy(dtype=np.int64)[:, None]  # -1 = missing
    data = lm.prepare(num, codes)
    rows = f"{len(df):,}"
    em_times = {"numpy": [], "auto": []}
    fits = {}
    for _ in range(repeats):
        for kind in em_times:
            config = lm.LocationConfig(n_components=4, strategy=kind)
            d = lm.prepare(num, codes)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t, fit = _timed(lambda: lm.fit(d, config, np.random.default_rng(0)))
            em_times[kind].append(t)
            fits[kind] = fit
    a, b = fits["numpy"].state, fits["auto"].state
    em_diff = float(max(np.abs(a.means - b.means).max(), np.abs(a.covariances - b.covariances).max()))
    state = a
    dac = la.LocationDAConfig(n_burn=10, n_thin=3)
    start = la.init(data, state.weights, state.means, state.covariances, state.probs, dac, np.random.default_rng(1))
    chain_times = {"reference": [], "compiled": []}
    kept = {}
    for _ in range(repeats):
        for kind in chain_times:
            plan = GapPlan(data.X, strategy=kind)
            t, out = _timed(lambda: la.run(start, data, state.prior, dac, 20, np.random.default_rng(2), plan=plan))
            chain_times[kind].append(t)
            kept[kind] = out
    chain_diff = max(float(np.abs(x.covariances - y.covariances).max()) for x, y in zip(kept["reference"],
                                                                                     kept["compiled"]))
    same = all(np.array_equal(x.labels, y.labels) and np.array_equal(x.codes, y.codes)
               for x, y in zip(kept["reference"], kept["compiled"]))
    return [{"case": f"location model's EM, Abalone {rows} rows, K = 4 ({fits['auto'].n_iter} iterations)",
             "times": em_times, "max_difference": em_diff, "same_labels": None},
            {"case": f"location model's chain, Abalone {rows} rows, K = 4 (70 sweeps)", "times": chain_times,
             "max_difference": chain_diff, "same_labels": same}]


def whole_fits(repeats: int) -> list[dict]:
    from explorer.impute.gaussian_mixture import GaussianMixtureImputer
    from explorer.impute.mixed import MixedMixtureImputer

    out = []
    cases = [("GaussianMixtureImputer(), 20,000 x 10", _w1(), GaussianMixtureImputer),
             ("MixedMixtureImputer(), Abalone 4,177 rows", _abalone(1), MixedMixtureImputer),
             ("MixedMixtureImputer(), Abalone x 3, 12,531 rows", _abalone(3), MixedMixtureImputer),
             ("MixedMixtureImputer(n_components=2), Abalone 4,177 rows", _abalone(1),
              lambda **kw: MixedMixtureImputer(n_components=2, **kw))]
    for name, X, make in cases:
        times, K = [], None
        for _ in range(repeats):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t, fitted = _timed(lambda: make(random_state=0).fit(X))
            times.append(t)
            K = fitted.n_components_
        out.append({"case": name, "seconds": times, "n_components": int(K)})
    return out


def render(result: dict) -> str:
    med = statistics.median
    lines = [f"Command: `{result['command']}` (median of {result['repeats']} interleaved repeats; "
             f"{result['env']})", "",
             "# The chains' compiled I-step and the location model's compiled E-step", "",
             "| part | reference s | now s | ratio | largest difference | same draws |", "|---|---|---|---|---|---|"]
    for row in result["parts"]:
        ref_key, new_key = list(row["times"])
        ref, new = med(row["times"][ref_key]), med(row["times"][new_key])
        same = "" if row["same_labels"] is None else ("yes" if row["same_labels"] else "no")
        lines.append(f"| {row['case']} | {ref:.2f} ({ref_key}) | {new:.2f} ({new_key}) | {new / ref:.2f} | "
                     f"{row['max_difference']:.1e} | {same} |")
    lines += ["", "Whole default fits (current code):", "", "| fit | s | K |", "|---|---|---|"]
    for row in result["fits"]:
        lines.append(f"| {row['case']} | {med(row['seconds']):.2f} | {row['n_components']} |")
    lines += ["", "\"Largest difference\": the largest absolute difference between the two sides' covariances (the "
              "kept states of the chains, or the EM fits); \"same draws\": every kept state's labels (and drawn "
              "levels) equal. The first fit of a process also loads the compiled kernels (0.3-0.7 s); these are "
              "timed after a warm-up.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "results")
    args = parser.parse_args()
    from explorer.core.mixtures.em_gmm import warm_up_kernels

    warm_up_kernels(background=False)
    parts = [gaussian_chain(args.repeats)] + location_parts(1, args.repeats) + location_parts(3, args.repeats)
    fits = whole_fits(args.repeats)
    env = (f"numpy {np.__version__}, Python {platform.python_version()}, "
           f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}, "
           f"load average {os.getloadavg()[0]:.1f}")
    result = {"command": "OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_chains.py", "repeats": args.repeats,
              "env": env, "parts": parts, "fits": fits}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_chains.json").write_text(json.dumps(result, indent=1))
    text = render(result)
    (args.out / "bench_chains.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
