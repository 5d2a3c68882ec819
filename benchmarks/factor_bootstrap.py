"""Proper multiple imputation for the factor imputers (issue 21, point 3): bootstrap refits and data-augmentation
draws against plug-in draws.

``FactorAnalysisImputer`` and ``MFAImputer`` are fitted by maximum likelihood; their parameter draws can be refits
on bootstrap resamples of the rows (``predictive="bootstrap"``) or the states of a Gibbs sampler under a weak
conjugate prior started at the fit (``predictive="draws"``, :mod:`explorer.core.factor.factor_augmentation`, the
default since this measurement), instead of the plug-in draws at the fit (``predictive="plugin"``). Three
measurements:

* **Per-entry intervals** on the benchmark sets of ``coverage_prior.py`` (standardised on observed entries, 0/1
  columns not scored), whole and in random subsamples of ``--subsamples`` rows, 20 % of the observed entries hidden:
  coverage of the 95 % equal-tailed interval of each hidden entry, NRMSE of ``transform`` (the same for both: the
  fit's conditional mean), NLL per hidden entry, and the fit's seconds (with its refits or chain). Models:
  ``FactorAnalysisImputer(n_factors=2)`` and ``MFAImputer(n_components=2, n_factors=2)``.
* **Rubin's rules** (what proper imputation is for): 40 rows of a one-factor model in 4 columns with 40 % of columns
  1-3 missing (MCAR); the mean of column 3 estimated from ``M = 20`` imputations and pooled by Rubin's rules
  (:func:`explorer.core.rubin.rubin_pool`), over ``--rubin-reps`` data sets: the share of 95 % confidence
  intervals that hold the true mean (0), and their mean half-width.
* **Data from the model** (how the prior's row weight ``TAU`` of :mod:`explorer.core.factor.factor_augmentation`
  was chosen, on data the model is right for rather than on the benchmark sets): 25, 50 and 200 rows of a
  two-factor model in 13 and 30 columns, 20 % MCAR, ``--model-seeds`` data sets each; coverage of the default
  draws' 95 % intervals and the median ratio of the fitted and drawn noise variances to the true ones, with
  ``TAU`` and with 0.01 (the value until the seventeenth session).

One BLAS thread per worker, ``--jobs`` processes. A benchmark, not a test: it writes numbers and asserts nothing.

Usage::

    .venv/bin/python benchmarks/factor_bootstrap.py          # writes results/factor_bootstrap.{json,md}
    .venv/bin/python benchmarks/factor_bootstrap.py --datasets iris --subsamples 25 --seeds 1 --rubin-reps 4 --out /tmp
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import numpy as np  # noqa: E402
from coverage_prior import DATASETS, cell_data  # noqa: E402

MODELS = ("fa", "mfa")
PREDICTIVES = ("plugin", "bootstrap", "draws")
MODEL_FEATURES = (13, 30)
MODEL_ROWS = (25, 50, 200)


def _imputer(model: str, predictive: str, seed: int):
    from explorer.impute.factor import FactorAnalysisImputer, MFAImputer

    if model == "fa":
        return FactorAnalysisImputer(n_factors=2, predictive=predictive, random_state=seed)
    return MFAImputer(n_components=2, n_factors=2, predictive=predictive, random_state=seed)


def run_cell(args):
    name, seed, model, predictive, rate, n_rows = args
    from threadpoolctl import threadpool_limits

    from explorer.core.metrics import nrmse
    from explorer.evaluation import entry_logpdf

    X, Xh, score = cell_data(name, seed, rate, n_rows)
    with threadpool_limits(limits=1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        imp = _imputer(model, predictive, seed).fit(Xh)
        seconds = time.perf_counter() - t0
        cond = imp.conditional(Xh)
        lo, hi = cond.interval(0.95)
        nll = float(-np.mean(entry_logpdf(cond.to_mixture(), X, score)))
        point = imp.transform(Xh)
    return {"dataset": name, "seed": seed, "model": model, "predictive": predictive, "subsample": n_rows,
            "n_rows": X.shape[0], "n_features": X.shape[1], "n_hidden_scored": int(score.sum()),
            "coverage": float(np.mean((X[score] >= lo[score]) & (X[score] <= hi[score]))),
            "nrmse": nrmse(X, point, score), "nll": nll, "seconds": seconds}


def rubin_cell(args):
    rep, predictive, n_imputations = args
    from scipy import stats
    from threadpoolctl import threadpool_limits

    from explorer.core.rubin import rubin_pool
    from explorer.impute.factor import FactorAnalysisImputer

    rng = np.random.default_rng([rep, 77])
    n = 40
    W = np.array([[1.0], [0.8], [0.6], [0.9]])
    psi = np.array([0.3, 0.4, 0.5, 0.3])
    X = rng.normal(size=(n, 1)) @ W.T + rng.normal(size=(n, 4)) * np.sqrt(psi)
    miss = rng.random(X.shape) < 0.4
    miss[:, 0] = False
    Xm = np.where(miss, np.nan, X)
    with threadpool_limits(limits=1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        imp = FactorAnalysisImputer(n_factors=1, predictive=predictive, n_posterior_draws=n_imputations,
                                    random_state=rep).fit(Xm)
        draws = np.asarray(imp.sample(Xm, n_imputations=n_imputations, random_state=rep))
    column = draws[:, :, 3]
    pooled = rubin_pool(column.mean(axis=1)[:, None], (column.var(axis=1, ddof=1) / n)[:, None, None],
                        df_complete=n - 1)
    half = float(stats.t.ppf(0.975, pooled.df[0]) * pooled.std_error[0])
    return {"rep": rep, "predictive": predictive, "estimate": float(pooled.estimate[0]), "half_width": half,
            "covers": bool(abs(pooled.estimate[0]) <= half)}


def model_cell(args):
    """Data drawn from a two-factor model (loadings N(0, 1), noise variances U(0.2, 1), standardised), 20 % MCAR: the
    default draws' per-entry coverage with the prior's row weight ``tau``, and the median ratio of the fitted (ML)
    and drawn noise variances to the true ones."""
    n_features, n_rows, seed, tau = args
    from threadpoolctl import threadpool_limits

    from explorer.core.factor import factor_augmentation
    from explorer.impute.factor import FactorAnalysisImputer

    rng = np.random.default_rng([seed, 91, n_features, n_rows])
    W, psi = rng.normal(size=(n_features, 2)), rng.uniform(0.2, 1.0, n_features)
    X = rng.normal(size=(n_rows, 2)) @ W.T + rng.normal(size=(n_rows, n_features)) * np.sqrt(psi)
    scale = X.std(axis=0)
    X, psi = (X - X.mean(axis=0)) / scale, psi / scale ** 2
    hidden = rng.random(X.shape) < 0.2
    Xh = np.where(hidden, np.nan, X)
    default_prior = factor_augmentation.default_prior
    factor_augmentation.default_prior = lambda data: default_prior(data, tau=tau)  # this worker's prior only
    try:
        with threadpool_limits(limits=1), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            imp = FactorAnalysisImputer(n_factors=2, random_state=seed).fit(Xh)
            lo, hi = imp.conditional(Xh).interval(0.95)
    finally:
        factor_augmentation.default_prior = default_prior
    return {"n_features": n_features, "n_rows": n_rows, "seed": seed, "tau": tau,
            "coverage": float(np.mean((X[hidden] >= lo[hidden]) & (X[hidden] <= hi[hidden]))),
            "ml_psi_ratio": float(np.median(np.ravel(imp.noise_variance_) / psi)),
            "drawn_psi_ratio": float(np.median(imp.posterior_noise_variance_[:, 0, :] / psi))}


def _summary(rows, **key) -> dict:
    cov = [r["coverage"] for r in rows]
    return {**key, "n_runs": len(rows), "coverage": float(np.mean(cov)), "coverage_min": float(np.min(cov)),
            "coverage_max": float(np.max(cov)), "nrmse": float(np.mean([r["nrmse"] for r in rows])),
            "nll": float(np.mean([r["nll"] for r in rows])), "seconds": float(np.mean([r["seconds"] for r in rows])),
            "n_features_range": [min(r["n_features"] for r in rows), max(r["n_features"] for r in rows)]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", nargs="+", default=list(DATASETS))
    ap.add_argument("--subsamples", nargs="*", type=int, default=[25, 50, 100])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--rate", type=float, default=0.2)
    ap.add_argument("--rubin-reps", type=int, default=200)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--predictives", nargs="+", default=list(PREDICTIVES), choices=PREDICTIVES)
    ap.add_argument("--model-seeds", type=int, default=10)
    ap.add_argument("--out", type=Path, default=ROOT / "results")
    args = ap.parse_args(argv)
    predictives = tuple(args.predictives)
    sizes = [None] + list(args.subsamples)
    cells = [(d, s, m, p, args.rate, n) for d in args.datasets for n in sizes for m in MODELS for p in predictives
             for s in range(args.seeds)]
    rubin = [(r, p, 20) for r in range(args.rubin_reps) for p in predictives]
    from explorer.core.factor.factor_augmentation import TAU

    taus = (0.01, TAU) if TAU != 0.01 else (TAU,)  # 0.01: the prior's row weight until the seventeenth session
    model = [(d, n, s, t) for d in MODEL_FEATURES for n in MODEL_ROWS for t in taus for s in range(args.model_seeds)]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        rows = list(pool.map(run_cell, cells))
        rubin_rows = list(pool.map(rubin_cell, rubin))
        model_rows = list(pool.map(model_cell, model))
    wall = time.perf_counter() - t0
    summary = []
    for d in args.datasets:
        for n in sizes:
            for m in MODELS:
                for p in predictives:
                    r = [x for x in rows if (x["dataset"], x["subsample"], x["model"], x["predictive"]) == (d, n, m, p)]
                    summary.append(_summary(r, dataset=d, subsample=n, model=m, predictive=p))
                    s = summary[-1]
                    print(f"{d:>13} {n or 'all':>4} {m:>3} {p:>9}: coverage {s['coverage']:.3f} NRMSE {s['nrmse']:.3f} "
                          f"NLL {s['nll']:.3f} {s['seconds']:.2f} s", flush=True)
    rubin_summary = {p: {"coverage": float(np.mean([r["covers"] for r in rubin_rows if r["predictive"] == p])),
                         "half_width": float(np.mean([r["half_width"] for r in rubin_rows if r["predictive"] == p]))}
                     for p in predictives}
    overall = {(m, p): [s for s in summary if s["model"] == m and s["predictive"] == p] for m in MODELS
               for p in predictives}
    totals = {f"{m}/{p}": {"coverage": float(np.mean([s["coverage"] for s in v])),
                           "in_target": int(sum(0.90 <= s["coverage"] <= 0.98 for s in v)), "cells": len(v),
                           "nll": float(np.mean([s["nll"] for s in v])),
                           "seconds": float(np.mean([s["seconds"] for s in v]))}
              for (m, p), v in overall.items()}
    by_size = {f"{m}/{p}/{n or 'all'}": float(np.mean([s["coverage"] for s in v if s["subsample"] == n]))
               for (m, p), v in overall.items() for n in sizes}
    model_summary = []
    for d in MODEL_FEATURES:
        for n in MODEL_ROWS:
            for t in taus:
                r = [x for x in model_rows if (x["n_features"], x["n_rows"], x["tau"]) == (d, n, t)]
                model_summary.append({"n_features": d, "n_rows": n, "tau": t, **{
                    k: float(np.mean([x[k] for x in r])) for k in ("coverage", "ml_psi_ratio", "drawn_psi_ratio")},
                    "coverage_min": float(np.min([x["coverage"] for x in r]))})
    meta = {"python": platform.python_version(), "numpy": np.__version__, "seeds": args.seeds, "rate": args.rate,
            "subsamples": args.subsamples, "predictives": list(predictives), "rubin_reps": args.rubin_reps,
            "model_seeds": args.model_seeds, "tau": TAU, "jobs": args.jobs, "wall_seconds": wall}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "factor_bootstrap.json").write_text(json.dumps(
        {"meta": meta, "summary": summary, "totals": totals, "by_size": by_size, "rubin": rubin_summary,
         "model": model_summary, "runs": rows, "rubin_runs": rubin_rows, "model_runs": model_rows}, indent=1))
    sub = " ".join(map(str, args.subsamples))
    lines = [
        f"Command: `.venv/bin/python benchmarks/factor_bootstrap.py --seeds {args.seeds} --rate {args.rate:g} "
        f"--subsamples {sub} --rubin-reps {args.rubin_reps} --model-seeds {args.model_seeds} --jobs {args.jobs}"
        + ("" if predictives == PREDICTIVES else f" --predictives {' '.join(predictives)}") + "`",
        "",
        f"{args.rate:.0%} of the observed entries hidden (MCAR), {args.seeds} seeds per cell, data standardised on "
        "observed entries, 0/1 columns not scored. FA: `FactorAnalysisImputer(n_factors=2)`; MFA: "
        "`MFAImputer(n_components=2, n_factors=2)`. plugin: draws and intervals at the maximum-likelihood "
        "fit; bootstrap: the mixture over 20 refits on bootstrap resamples of the rows; draws (the default): the "
        "mixture over 20 "
        "states of the data-augmentation chain under a weak conjugate prior, started at the fit (burn-in 10, one "
        "state in 3). Coverage of the "
        "95 % interval of each hidden entry (mean over seeds, [min, max]); NRMSE of `transform` (the fit's "
        "conditional mean under all three); NLL per hidden entry (standardised units); seconds: the fit with its "
        "refits or chain "
        f"(one BLAS thread; {args.jobs} processes, wall time {wall:.0f} s; numpy {np.__version__}, Python "
        f"{platform.python_version()}; the seconds are indicative when other work shares the machine).",
        "",
        "## Rubin's rules",
        "",
        f"Mean of a column with 40 % missing, 40 rows of a one-factor model, 20 imputations pooled by Rubin's rules, "
        f"{args.rubin_reps} data sets: the share of 95 % confidence intervals holding the true mean.",
        "",
        "| draws | CI coverage | mean half-width |",
        "|---|---|---|",
    ]
    for p in predictives:
        lines.append(f"| {p} | {rubin_summary[p]['coverage']:.3f} | {rubin_summary[p]['half_width']:.3f} |")
    lines += ["", "## Data from the model: the prior's row weight", "",
              f"A two-factor model (loadings N(0, 1), noise variances U(0.2, 1), columns standardised), 20 % MCAR, "
              f"{args.model_seeds} data sets per row; `FactorAnalysisImputer(n_factors=2)` with its default draws, "
              "the prior's [mean, loadings] rows weighing tau rows of the regression (tau = 0.01 until the seventeenth "
              f"session, {TAU:g} now). Coverage of the 95 % intervals of the hidden entries (mean [min]); the median "
              "ratio of the fitted (ML) and the drawn noise variances to the true ones.",
              "", "| D | rows | tau | coverage | ML psi / true | drawn psi / true |", "|---|---|---|---|---|---|"]
    for m in model_summary:
        lines.append(f"| {m['n_features']} | {m['n_rows']} | {m['tau']:g} | {m['coverage']:.3f} "
                     f"[{m['coverage_min']:.3f}] | {m['ml_psi_ratio']:.2f} | {m['drawn_psi_ratio']:.2f} |")
    lines += ["", "## Per-entry 95 % intervals, all cells", "",
              "| model | draws | mean coverage | cells in [0.90, 0.98] | mean NLL | mean seconds |",
              "|---|---|---|---|---|---|"]
    for key, t in totals.items():
        m, p = key.split("/")
        lines.append(f"| {m.upper()} | {p} | {t['coverage']:.3f} | {t['in_target']} of {t['cells']} | "
                     f"{t['nll']:.3f} | {t['seconds']:.2f} |")
    lines += ["", "## Mean coverage by subsample size (over the data sets)", "",
              "| model | rows | " + " | ".join(predictives) + " |", "|---|---|" + "---|" * len(predictives)]
    for m in MODELS:
        for n in sizes:
            label = n or "all"
            lines.append(f"| {m.upper()} | {label} | "
                         + " | ".join(f"{by_size[f'{m}/{p}/{label}']:.3f}" for p in predictives) + " |")
    lines += ["", "## Per cell", "", "| data set | rows | D | model | draws | coverage | NRMSE | NLL | seconds |",
              "|---|---|---|---|---|---|---|---|---|"]
    for s in summary:
        lo, hi = s["n_features_range"]
        lines.append(f"| {s['dataset']} | {s['subsample'] or 'all'} | {lo if lo == hi else f'{lo}-{hi}'} | "
                     f"{s['model'].upper()} | {s['predictive']} | {s['coverage']:.3f} [{s['coverage_min']:.3f}, "
                     f"{s['coverage_max']:.3f}] | {s['nrmse']:.3f} | {s['nll']:.3g} | {s['seconds']:.2f} |")
    (args.out / "factor_bootstrap.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out / 'factor_bootstrap.md'} ({wall:.0f} s)")


if __name__ == "__main__":
    main()
