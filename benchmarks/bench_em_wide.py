"""Small, wide data with heavy missingness (issue 22): 250 rows x 200 correlated columns, 70 % MCAR.

Times, on one BLAS thread, in one process:

* the default imputer fit (``GaussianMixtureImputer(n_components=1)``: MAP-EM with the data-scaled prior, whose
  moments are the one-component ML fit, then the data-augmentation chain of ``predictive="draws"``), the same
  without the chain (``predictive="student_t"``), each the median of three fits, and the prior's moments alone
  (after one small fit in the process, so that one-time imports are not counted); the MAP-EM fit with ``strategy="auto"`` (which picks the covariance
  side here) and with
  the precision-side numpy kernels (``strategy="numpy"``, the path ``"auto"`` took before issue 22), through
  :func:`explorer.core.mixtures.em_gmm.fit` as the imputer runs it;
* the diagonal one-iteration fit (its prior's moments are now the column summaries);
* how long a hopeless request (``n_components=1000`` on 250 rows of text) takes to be refused;
* the imputation RMSE on the masked entries with the prior's scale from the ML moments (the default) against the
  one-pass pairwise-available covariance (eigenvalues floored at 1e-6 of the largest, or shrunk towards the
  diagonal until the correlation matrix's smallest eigenvalue is 0.01), the alternative issue 22 offered; it is
  why the default keeps the ML moments.

This is a benchmark, not a test. Usage::

    .venv/bin/python benchmarks/bench_em_wide.py            # writes results/bench_em_wide.{json,md}
    .venv/bin/python benchmarks/bench_em_wide.py --small    # 120 x 80 (CI smoke run), writes nothing unless --out
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from explorer import GaussianMixtureImputer  # noqa: E402
from explorer.core.mixtures import em_gmm, suffstats  # noqa: E402
from explorer.core.mixtures.prior import NIWPrior, prior_mode_divisor  # noqa: E402
from explorer.core.validation import BadInputError  # noqa: E402

FIT_REPEATS = 3


def make_data(n, d, rate, seed=0):
    rng = np.random.default_rng(seed)
    loadings = rng.normal(size=(d, 10))
    X = rng.normal(size=(n, 10)) @ loadings.T + 0.5 * rng.normal(size=(n, d))
    missing = rng.random((n, d)) < rate
    return X, missing


def pairwise_scale(Xm, shrink):
    """The prior's scale of ``prior="auto"`` at K = 1 with the pairwise-available covariance as data covariance."""
    observed = ~np.isnan(Xm)
    mean = np.nanmean(Xm, axis=0)
    c = np.where(observed, Xm - mean, 0.0)
    o = observed.astype(float)
    cov = (c.T @ c) / np.maximum(o.T @ o, 1.0)
    cov = 0.5 * (cov + cov.T)
    d = cov.shape[0]
    if shrink:
        s = np.sqrt(np.diag(cov))
        R = cov / np.outer(s, s)
        w = np.linalg.eigvalsh(R)[0]
        if w < 0.01:
            lam = (0.01 - w) / (1.0 - w)
            R = (1.0 - lam) * R
            R.flat[:: d + 1] += lam
        cov = R * np.outer(s, s)
    else:
        w, V = np.linalg.eigh(cov)
        cov = (V * np.maximum(w, 1e-6 * w[-1])) @ V.T
    cov.flat[:: d + 1] += 1e-6
    return mean, cov * prior_mode_divisor(d + 2.0, d)


def _timed(fn, repeats: int = 1):
    """(median seconds over ``repeats`` calls, the last call's result)."""
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times)), out


def run(n, d, rate):
    from threadpoolctl import threadpool_limits

    X, missing = make_data(n, d, rate)
    Xm = np.where(missing, np.nan, X)
    rows = {}
    with threadpool_limits(limits=1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # a first small fit loads what any fit imports once per process (xarray for the history, the kernels)
        warm = X[:40, :8].copy()
        warm[::3, 0] = np.nan
        GaussianMixtureImputer(n_components=1, random_state=0).fit(warm)
        # the two imputer fits: median of 3 (one fit varies by about 15 % from run to run)
        t, model = _timed(lambda: GaussianMixtureImputer(n_components=1, random_state=0).fit(Xm), FIT_REPEATS)
        rmse = float(np.sqrt(np.mean((model.transform(Xm)[missing] - X[missing]) ** 2)))
        rows["imputer default fit"] = {"seconds": t, "n_iter": int(model.n_iter_), "rmse": rmse}
        t, model = _timed(lambda: GaussianMixtureImputer(n_components=1, predictive="student_t",
                                                         random_state=0).fit(Xm), FIT_REPEATS)
        rows["imputer fit without the draws (predictive='student_t')"] = {"seconds": t, "n_iter": int(model.n_iter_)}
        data = em_gmm.prepare(Xm)
        t, _ = _timed(lambda: em_gmm.resolve_prior(data, em_gmm.EMConfig(n_components=1, prior="auto")))
        rows["the prior's data moments (em_gmm.resolve_prior)"] = {"seconds": t}
        for strategy in ("auto", "numpy"):
            def fit(strategy=strategy):
                data = em_gmm.prepare(Xm)
                config = em_gmm.EMConfig(n_components=1, prior="auto", strategy=strategy)
                return em_gmm.fit(data, config, np.random.default_rng(0)), em_gmm.resolve_strategy(data, config)
            t, (res, used) = _timed(fit)
            rows[f"em_gmm.fit, strategy={strategy!r}"] = {"seconds": t, "n_iter": int(res.n_iter), "kernel": used}
        t, model = _timed(lambda: GaussianMixtureImputer(n_components=1, covariance_type="diag", max_iter=1,
                                                         random_state=0).fit(Xm))
        rows["imputer diag, max_iter=1"] = {"seconds": t, "n_iter": int(model.n_iter_)}
        text = np.where(missing, "", X.round(3).astype(str)).astype(object)
        t0 = time.perf_counter()
        try:
            GaussianMixtureImputer(n_components=1000, random_state=0).fit(text)
            message = "no error"
        except (BadInputError, ValueError) as exc:
            message = str(exc).splitlines()[0][:90] + " ..."
        rows["n_components=1000 on text, refused"] = {"seconds": time.perf_counter() - t0, "message": message}
        for name, shrink in (("pairwise, eigenvalues floored", False), ("pairwise, shrunk to diagonal", True)):
            mean, scale = pairwise_scale(Xm, shrink)
            prior = NIWPrior(mean=mean, scale=scale)
            t, model = _timed(lambda prior=prior: GaussianMixtureImputer(n_components=1, prior=prior,
                                                                         random_state=0).fit(Xm))
            rmse = float(np.sqrt(np.mean((model.transform(Xm)[missing] - X[missing]) ** 2)))
            rows[f"prior scale from {name}"] = {"seconds": t, "n_iter": int(model.n_iter_), "rmse": rmse}
    return rows


SWEEP = [(2000, 20, 3), (1000, 50, 2), (250, 200, 1)]  # (N, D, K)
SWEEP_RATES = (0.3, 0.5, 0.6, 0.7, 0.8)


def sweep(cases=SWEEP, rates=SWEEP_RATES, repeats=3):
    """Seconds per EM step of each E-step kernel (median of ``repeats``, one BLAS thread) and the one
    ``strategy="auto"`` picks, on data of :func:`make_data` at several missing rates: where the cost rule's
    break-even lies."""
    from threadpoolctl import threadpool_limits

    from explorer.core.mixtures.suffstats import choose_strategy, factorisation_work

    out = []
    with threadpool_limits(limits=1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for n, d, k in cases:
            for rate in rates:
                X, missing = make_data(n, d, rate, seed=1)
                data = em_gmm.prepare(np.where(missing, np.nan, X))
                base = em_gmm.EMConfig(n_components=k, strategy="numpy")
                start = em_gmm.init(data, base, np.random.default_rng(0))
                row = {"n": n, "d": d, "k": k, "rate": rate, "patterns": data.patterns.n_patterns}
                for label, ready in (("auto", False), ("auto_loaded", True)):
                    row[label] = choose_strategy(data.n_fit, k, d, "full", "auto", data.patterns, kernels_loaded=ready)
                prec, cov, rows = factorisation_work(data.patterns)
                row.update(precision_side=prec, covariance_side=cov, rows_work=rows)
                for strategy in ("numpy", "compiled", "covariance"):
                    config = replace(base, strategy=strategy)
                    em_gmm.step(start, data, config)  # warm-up (compiled: load the kernels, build the workspace)
                    times = []
                    for _ in range(repeats):
                        t0 = time.perf_counter()
                        em_gmm.step(start, data, config)
                        times.append(time.perf_counter() - t0)
                    row[strategy] = float(np.median(times))
                out.append(row)
                print({key: (round(v, 4) if isinstance(v, float) else v) for key, v in row.items()}, flush=True)
    return out


def sweep_report(rows):
    lines = ["| N x D, K | missing | patterns | sum m^3 / N D^2 | sum o^3 / sum m^3 | numpy s | compiled s | covariance s "
             "| fastest | auto, fresh process | auto, kernels loaded |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        fastest = min(("numpy", "compiled", "covariance"), key=lambda s: r[s])
        ratio = r["covariance_side"] / r["precision_side"] if r["precision_side"] else float("inf")
        lines.append(f"| {r['n']} x {r['d']}, {r['k']} | {r['rate']:.0%} | {r['patterns']} | "
                     f"{r['precision_side'] / r['rows_work']:.2f} | {ratio:.2f} | {r['numpy']:.4f} | "
                     f"{r['compiled']:.4f} | {r['covariance']:.4f} | {fastest} | {r['auto']} | {r['auto_loaded']} |")
    return "\n".join(lines) + "\n"


def report(rows, n, d, rate, command):
    lines = [f"Command: `{command}` ({n} x {d}, {rate:.0%} MCAR, one BLAS thread; numpy {np.__version__}, Python "
             f"{platform.python_version()}; load average {os.getloadavg()[0]:.1f} at the end).", "",
             "| case | seconds | iterations | kernel / RMSE / message |", "|---|---|---|---|"]
    for name, r in rows.items():
        extra = r.get("kernel") or r.get("message") or (f"RMSE {r['rmse']:.4f}" if "rmse" in r else "")
        lines.append(f"| {name} | {r['seconds']:.2f} | {r.get('n_iter', '')} | {extra} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="120 x 80 instead of 250 x 200")
    parser.add_argument("--out", type=Path, default=None, help="directory for bench_em_wide.{json,md}")
    args = parser.parse_args(argv)
    n, d = (120, 80) if args.small else (250, 200)
    rows = run(n, d, 0.7)
    command = ".venv/bin/python benchmarks/bench_em_wide.py" + (" --small" if args.small else "")
    text = report(rows, n, d, 0.7, command)
    grid = sweep([(400, 20, 2)], (0.3, 0.8), repeats=1) if args.small else sweep()
    text += ("\nSeconds per EM step (median of 3, one BLAS thread) of each E-step kernel on the same kind of data at "
             "several missing rates, and what `strategy=\"auto\"` picks (its rule: the covariance side when "
             f"sum m^3 > {suffstats.COVARIANCE_SIDE_MIN_FACTOR_WORK:g} N D^2 and sum o^3 < "
             f"{suffstats.COVARIANCE_SIDE_RATIO:g} sum m^3 over the distinct patterns; else compiled when the "
             f"compiled E-step already ran in the process or rows x K x D >= {suffstats.AUTO_COMPILED_MIN_WORK:,}; "
             "else numpy):\n\n" + sweep_report(grid))
    print(text)
    out = args.out if args.out is not None else (None if args.small else ROOT / "results")
    if args.small and out is not None:
        raise SystemExit("--small writes nothing (its numbers are a smoke run)")
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "bench_em_wide.json").write_text(json.dumps({"n": n, "d": d, "rate": 0.7, "rows": rows,
                                                             "sweep": grid}, indent=1))
        (out / "bench_em_wide.md").write_text(text)


if __name__ == "__main__":
    main()
