"""Seconds per iteration of GaussianMixtureImputer (full covariances) and DPGMMImputer, against N, D, K, missing rate.

Times the iterations themselves (not the initialisation or the prior's own fit) with the imputers'
``callback``: the median gap between successive ``IterationInfo.elapsed`` over a few iterations.
P is the number of distinct missingness patterns (what the E-step factorises once per component).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/iteration_cost.py           # the README's table (~2 min)
    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/iteration_cost.py --quick   # a smaller grid

One BLAS thread: on a busy machine OpenBLAS's thread wake-ups dominate these small matrix calls
(measured 3-10x slower per iteration with the default threads on 2 shared cores).
Rows with D >= 100 time DPGMMImputer only: GaussianMixtureImputer's default prior first fits one
Gaussian by up to 500 EM steps (:func:`explorer.core.mixtures.em_gmm.data_moments`), 77 s at N=500, D=100,
90 % missing, before its first iteration.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from explorer.impute.dp_mixture import DPGMMImputer
from explorer.impute.gaussian_mixture import GaussianMixtureImputer


def data(n, d, rate, seed=0):
    rng = np.random.default_rng(seed)
    latent = rng.normal(size=(n, 3))
    X = latent @ rng.normal(size=(3, d)) + rng.normal(scale=0.5, size=(n, d))
    X[rng.random(X.shape) < rate] = np.nan
    empty = np.isnan(X).all(axis=1)
    X[empty, 0] = 0.0
    return X


def seconds_per_iteration(est, X, n_iter):
    elapsed = []
    est.set_params(callback=lambda info: elapsed.append(info.elapsed), tol=0.0, max_iter=n_iter)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X)
    return float(np.median(np.diff(elapsed))) if len(elapsed) > 1 else float("nan")


GRID = [  # (N, D, K, missing rate)
    (500, 10, 3, 0.1), (2000, 10, 3, 0.1), (8000, 10, 3, 0.1),           # N
    (2000, 10, 3, 0.5), (2000, 20, 3, 0.5), (2000, 40, 3, 0.5),          # D (every row its own pattern)
    (2000, 20, 1, 0.5), (2000, 20, 9, 0.5),                              # K
    (2000, 40, 3, 0.02), (2000, 40, 3, 0.9),                             # missing rate at D = 40
]
BIG = [(500, 100, 3, 0.9), (500, 200, 3, 0.9)]  # the D = 200, 90 % missing: DPGMMImputer only
QUICK = [g for g in GRID if g[0] <= 2000 and g[1] <= 20]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    print("| N | D | K | missing | P | GMM s/iter | DPGMM s/iter |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    started = time.perf_counter()
    for n, d, k, rate in QUICK if args.quick else GRID + BIG:
        X = data(n, d, rate)
        patterns = len({row.tobytes() for row in np.isnan(X)})
        n_iter = 4 if d >= 100 else 6
        gmm = float("nan") if d >= 100 else seconds_per_iteration(
            GaussianMixtureImputer(n_components=k, random_state=0), X, n_iter)
        dp = seconds_per_iteration(DPGMMImputer(n_components=k, random_state=0), X, n_iter)
        print(f"| {n} | {d} | {k} | {rate:.0%} | {patterns} | {gmm:.3g} | {dp:.3g} |", flush=True)
    print(f"\n(total {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
