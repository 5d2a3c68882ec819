"""Log / logit transforms chosen on the data ("auto") against the plain Gaussian mixture (issue 21, point 4).

Two imputers, on data sets on their ORIGINAL scale (not standardised: a standardised column crosses 0,
so no transform would ever apply):

* plain: ``GaussianMixtureImputer(random_state=seed)`` (its defaults: ``n_components="auto"``, the MAP
  prior and the predictive over 20 parameter draws of data augmentation);
* auto: ``TransformedImputer(GaussianMixtureImputer(random_state=seed), transforms="suggest")``, which
  applies ``suggest_transforms``' log (positive, right-skewed or near-0 columns) and logit (fractions,
  percentages) inside ``fit`` and answers on the original scale: intervals and densities from the inner
  imputer's default predictive (the mixture over the parameter draws, as plain's), the imputation from its
  fitted Gaussians (plain's: the Student-t predictive's mean at the fit; the back-transformed mean of either the
  draws or a Student-t has too heavy a tail), so a set where no column is transformed differs from plain only
  in the point imputation.

Data sets: (a) the six of ``benchmarks/coverage_prior.py`` (iris, wine, boston, ionosphere, hepatitis with its
own gaps, scikit-learn's bundled breast cancer) with the values as loaded, unstandardised; (b) scikit-learn's
bundled diabetes data with ``scaled=False`` (10 features and the target; ``sex`` is 1/2), and the numeric
columns of explorer's mixed tables with real gaps when ``explorer.datasets.load_mixed`` exists (msleep: body
and brain weight, strongly skewed; penguins; auto_mpg; abalone), rows with no numeric value dropped.

Protocol, for ``--seeds`` seeds: 20 % of the OBSERVED entries hidden MCAR (``coverage_prior.hide``: uniformly
among observed entries, a row left empty gets one entry back); both imputers fitted on what is left; scored on
the hidden entries of the non-binary columns (more than 2 distinct observed values):

* NRMSE: ``sqrt(mean(((truth - transform(X)) / sd_j)^2))`` pooled over hidden entries, ``sd_j`` the sd of
  column j's observed values (full data, original scale), i.e. in units of each column's observed sd;
* coverage: share of hidden true values inside the equal-tailed 95 % interval of ``conditional(X)``;
* NLL: mean of ``-log p(x_true | x_obs) - log sd_j`` per hidden entry (``explorer.evaluation.entry_logpdf``;
  the density on the original scale, with the Jacobian for transformed columns, expressed per unit of sd_j
  so that the numbers are those of standardised units and comparable across columns); +inf when a hidden
  true value lies outside a transform's bounds (density 0), so the count of such entries and the mean over
  the others are recorded too;
* the same for a third fit, "gaussian": plain with ``predictive="gaussian"`` (plug-in Gaussians at the fit),
  for reference (not part of the decision);
* crossing 0: among hidden entries of positive columns (every observed value > 0), the share whose 95 %
  interval has its lower end below 0. Also recorded: whether the plain fit or its answers raised any warning.

Decision rule: auto is worth making the default if it wins on average (mean over sets of the mean NRMSE
over seeds is lower) AND never loses more than 2 % NRMSE on a set (relative difference
``(auto - plain) / plain <= 0.02`` on every set).

One BLAS thread per worker (threadpoolctl), ``--jobs`` processes. A benchmark: it writes numbers and
asserts nothing.

Usage::

    .venv/bin/python benchmarks/transforms_auto.py --seeds 5 --jobs 2   # writes results/transforms_auto.{json,md}
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

import numpy as np

from benchmarks.coverage_prior import DATASETS as BENCH_SETS
from benchmarks.coverage_prior import hide

SKLEARN_SETS = ("diabetes",)
MIXED_SETS = ("msleep", "penguins", "auto_mpg", "abalone")
METHODS = ("plain", "auto", "gaussian")  # gaussian: plain with predictive="gaussian" (auto's inner predictive)
RULE_TOLERANCE = 0.02


def has_mixed() -> bool:
    import explorer.datasets as ds

    return hasattr(ds, "load_mixed")


def default_sets() -> list[str]:
    return list(BENCH_SETS) + list(SKLEARN_SETS) + (list(MIXED_SETS) if has_mixed() else [])


def load_original(name: str):
    """(values on the original scale with NaN at the data's own gaps, scored-column mask, column names)."""
    if name in BENCH_SETS:
        from explorer.core.data import IncompleteData
        from explorer.datasets import load_dataset

        if name == "breast_cancer":  # as coverage_prior.load, without its standardize
            from sklearn.datasets import load_breast_cancer

            bc = load_breast_cancer()
            data = IncompleteData.from_complete(bc.data, name=name)
            names = [str(c) for c in bc.feature_names]
        else:
            data = load_dataset(name)
            names = [str(c) for c in data.columns] if getattr(data, "columns", None) is not None else None
        X = np.array(data.values, dtype=float)
        X[np.asarray(data.missing)] = np.nan
        binary = np.asarray(data.binary, dtype=bool)
    elif name == "diabetes":
        from sklearn.datasets import load_diabetes

        d = load_diabetes(scaled=False)
        X = np.column_stack([d.data, d.target]).astype(float)
        names = [str(c) for c in d.feature_names] + ["target"]
        binary = np.zeros(X.shape[1], dtype=bool)
    elif name in MIXED_SETS:
        from explorer.datasets import load_mixed

        df = load_mixed(name)
        num = df.select_dtypes(include="number")
        X = num.to_numpy(dtype=float)
        X = X[~np.isnan(X).all(axis=1)]
        names = [str(c) for c in num.columns]
        binary = np.zeros(X.shape[1], dtype=bool)
    else:
        raise ValueError(f"unknown data set {name!r}")
    if names is None or len(names) != X.shape[1]:
        names = [f"x{j}" for j in range(X.shape[1])]
    distinct = np.array([np.unique(X[~np.isnan(X[:, j]), j]).size for j in range(X.shape[1])])
    scored = ~binary & (distinct > 2)
    return X, scored, names


def _fit_answer(method: str, seed: int, Xh: np.ndarray):
    """(conditional, mean, lower, upper, transforms applied {col index: kind}, warning categories) of one method."""
    from explorer.impute.gaussian_mixture import GaussianMixtureImputer
    from explorer.impute.transformed import TransformedImputer

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        inner = GaussianMixtureImputer(random_state=seed)
        if method in ("plain", "gaussian"):
            if method == "gaussian":
                inner.set_params(predictive="gaussian")
            imp = inner.fit(Xh)
            applied = {}
        else:
            imp = TransformedImputer(inner, transforms="suggest").fit(Xh)
            applied = {int(j): t.kind for j, t in imp.transforms_.items() if t.kind is not None}
        cond = imp.conditional(Xh)
        lo, hi = cond.interval(0.95)
        # the point imputation is what a user gets from transform (the fitted model's conditional mean; the
        # conditional's own mean is over the parameter draws); TransformedImputer warns here (BoundCrossingWarning) ...
        mean = imp.transform(Xh)
        if hasattr(imp, "interval"):
            imp.interval(Xh, 0.95)  # ... and here, for untransformed columns with a bound
    kinds = sorted({w.category.__name__ for w in caught})
    return imp, cond, np.asarray(mean), np.asarray(lo), np.asarray(hi), applied, kinds


def run_cell(args):
    name, seed, method, rate = args
    from threadpoolctl import threadpool_limits

    from explorer.evaluation import entry_logpdf

    X, scored, names = load_original(name)
    rng = np.random.default_rng([seed, 2024])
    hidden = hide(X, rate, rng)
    Xh = np.where(hidden, np.nan, X)
    score = hidden & scored[None, :]
    sd = np.nanstd(X, axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    positive = np.array([np.all(X[~np.isnan(X[:, j]), j] > 0) for j in range(X.shape[1])])
    t0 = time.perf_counter()
    out = {"dataset": name, "seed": seed, "method": method, "n_rows": X.shape[0], "n_features": X.shape[1],
           "n_scored_columns": int(scored.sum()), "n_hidden_scored": int(score.sum()),
           "n_positive_columns": int((positive & scored).sum())}
    try:
        with threadpool_limits(limits=1):
            imp, cond, mean, lo, hi, applied, kinds = _fit_answer(method, seed, Xh)
            with np.errstate(divide="ignore"):
                lp = entry_logpdf(cond, X, score)
    except Exception as exc:  # noqa: BLE001 -- a benchmark records failures instead of stopping
        out.update(error=f"{type(exc).__name__}: {exc}", seconds=time.perf_counter() - t0)
        return out
    ri, ci = np.nonzero(score)  # row-major, the order of entry_logpdf
    z = (X[ri, ci] - mean[ri, ci]) / sd[ci]
    pos = score & positive[None, :]
    out.update(
        nrmse=float(np.sqrt(np.mean(z * z))),
        coverage=float(np.mean((X[score] >= lo[score]) & (X[score] <= hi[score]))),
        nll=float(np.mean(-lp - np.log(sd[ci]))),
        n_infinite_nll=int(np.sum(~np.isfinite(lp))),
        nll_finite=float(np.mean((-lp - np.log(sd[ci]))[np.isfinite(lp)])),
        n_positive_hidden=int(pos.sum()),
        cross0=float(np.mean(lo[pos] < 0)) if pos.any() else None,
        n_cross0=int(np.sum(lo[pos] < 0)),
        applied={names[j]: k for j, k in applied.items()},
        warnings=kinds,
        K_chosen=int(getattr(getattr(imp, "imputer_", imp), "n_components_", -1)),
        seconds=time.perf_counter() - t0,
    )
    return out


def _mean(rows, key):
    vals = [r[key] for r in rows if r.get(key) is not None]
    return float(np.mean(vals)) if vals else None


def summarise(rows, sets):
    summary = []
    for d in sets:
        entry = {"dataset": d}
        for m in METHODS:
            r = [x for x in rows if x["dataset"] == d and x["method"] == m]
            ok = [x for x in r if "error" not in x]
            entry["n_rows"], entry["n_features"] = r[0]["n_rows"], r[0]["n_features"]
            entry["n_scored_columns"], entry["n_positive_columns"] = r[0]["n_scored_columns"], r[0]["n_positive_columns"]
            applied: dict[str, dict[str, int]] = {}
            for x in ok:
                for col, kind in x["applied"].items():
                    applied.setdefault(f"{kind}({col})", {"n": 0})["n"] += 1
            entry[m] = {
                "n_runs": len(r), "n_failed": len(r) - len(ok),
                "errors": sorted({x["error"] for x in r if "error" in x}),
                **{k: _mean(ok, k) for k in ("nrmse", "coverage", "nll", "nll_finite", "cross0", "seconds")},
                "n_cross0": int(sum(x["n_cross0"] for x in ok)),
                "n_positive_hidden": int(sum(x["n_positive_hidden"] for x in ok)),
                "n_infinite_nll": int(sum(x["n_infinite_nll"] for x in ok)),
                "applied": {k: v["n"] for k, v in sorted(applied.items())},
                "warnings": sorted({w for x in ok for w in x["warnings"]}),
                "K_chosen": sorted({x["K_chosen"] for x in ok}),
            }
        p, a, g = entry["plain"]["nrmse"], entry["auto"]["nrmse"], entry["gaussian"]["nrmse"]
        entry["rel_nrmse"] = None if p is None or a is None else float((a - p) / p)
        entry["rel_nrmse_vs_gaussian"] = None if g is None or a is None else float((a - g) / g)
        summary.append(entry)
    return summary


def decide(summary):
    ok = [s for s in summary if s["rel_nrmse"] is not None]
    mean_plain = float(np.mean([s["plain"]["nrmse"] for s in ok]))
    mean_auto = float(np.mean([s["auto"]["nrmse"] for s in ok]))
    worst = max(ok, key=lambda s: s["rel_nrmse"])
    wins = mean_auto < mean_plain
    never = all(s["rel_nrmse"] <= RULE_TOLERANCE for s in ok)
    complete = len(ok) == len(summary)
    return {"mean_nrmse_plain": mean_plain, "mean_nrmse_auto": mean_auto, "auto_wins_on_average": bool(wins),
            "never_loses_more_than_2pct": bool(never), "worst_set": worst["dataset"], "worst_rel": worst["rel_nrmse"],
            "all_sets_scored": complete, "decision": "yes" if wins and never and complete else "no",
            "rel_nrmse": {s["dataset"]: s["rel_nrmse"] for s in summary}}


def decision_line(dec) -> str:
    """The md's decision sentence (tests/test_transforms_auto_results.py rebuilds it from the JSON)."""
    return (f"Decision (auto wins on average (mean NRMSE) and never loses more than 2 % NRMSE on a set): "
            f"**{dec['decision']}**. Mean NRMSE plain {dec['mean_nrmse_plain']:.4f}, auto {dec['mean_nrmse_auto']:.4f} "
            f"({'auto wins' if dec['auto_wins_on_average'] else 'auto does not win'} on average); worst set "
            f"{dec['worst_set']} at {100 * dec['worst_rel']:+.1f} % "
            f"({'within' if dec['never_loses_more_than_2pct'] else 'beyond'} the 2 % tolerance).")


def _f(v, fmt):
    return "n/a" if v is None else format(v, fmt)


def set_row(s, m) -> str:
    """One table row of the md (tests rebuild it from the JSON)."""
    r = s[m]
    cross = "n/a" if r["cross0"] is None else f"{100 * r['cross0']:.1f} % ({r['n_cross0']}/{r['n_positive_hidden']})"
    fail = f" ({r['n_failed']} failed)" if r["n_failed"] else ""
    nll = _f(r["nll"], ".3f") if not r["n_infinite_nll"] else (
        f"inf ({r['n_infinite_nll']} outside; others {_f(r['nll_finite'], '.3f')})")
    return (f"| {s['dataset']} | {m}{fail} | {_f(r['nrmse'], '.4f')} | {_f(r['coverage'], '.3f')} | "
            f"{nll} | {cross} | {', '.join(map(str, r['K_chosen']))} |")


def render(args, meta, summary, dec) -> str:
    cmd = (f".venv/bin/python benchmarks/transforms_auto.py --seeds {args.seeds} --rate {args.rate:g} --jobs {args.jobs}"
           + ("" if args.datasets is None else " --datasets " + " ".join(args.datasets)))
    lines = [
        f"Command: `{cmd}`",
        "",
        (f"`transforms=\"suggest\"` (auto: `TransformedImputer(GaussianMixtureImputer(random_state=seed), "
        f"transforms=\"suggest\")`) against the plain `GaussianMixtureImputer(random_state=seed)`, on the ORIGINAL "
        f"scale. {args.rate:.0%} of the observed entries hidden MCAR, {args.seeds} seeds, non-binary columns scored. "
        "NRMSE in units of each column's observed sd; coverage of the 95 % equal-tailed intervals; NLL per hidden "
        "entry in sd units (-log p - log sd; 'inf (n outside)': n hidden true values outside a transform's bounds, "
        "where auto's density is 0, e.g. a logit whose bounds come from the values left after hiding; the mean "
        "over the other entries follows); crossing 0: share of the 95 % intervals of hidden entries of positive "
        "columns (all observed values > 0) whose lower end is below 0 (count / hidden entries of positive columns, "
        "over the seeds); K: components chosen over the seeds. gaussian: plain with predictive='gaussian' (plug-in "
        "Gaussians at the fit), for reference (not in the decision). Plain's and auto's intervals and NLL come from the "
        "default predictive (the mixture over 20 parameter draws of data augmentation); auto's imputation is the "
        "back-transformed mean of its inner fitted Gaussians, plain's the Student-t predictive's mean at the fit. "
        f"Wall time {meta['wall_seconds']:.0f} s ({args.jobs} processes, one BLAS thread each; numpy "
        f"{meta['numpy']}, Python {meta['python']})."),
        "",
        decision_line(dec),
        "",
        "Relative NRMSE difference (auto - plain) / plain per set: "
        + ", ".join(f"{d} {_f(None if v is None else 100 * v, '+.1f')} %" for d, v in dec["rel_nrmse"].items()) + ".",
        "",
    ]
    for s in summary:
        lines += [
            (f"### {s['dataset']} ({s['n_rows']} x {s['n_features']}, {s['n_scored_columns']} scored columns, "
            f"{s['n_positive_columns']} positive)"),
            "",
            "| data set | method | NRMSE | coverage | NLL | crossing 0 | K |",
            "|---|---|---|---|---|---|---|",
            set_row(s, "plain"),
            set_row(s, "auto"),
            set_row(s, "gaussian"),
            "",
            (f"Relative NRMSE (auto - plain) / plain: {_f(None if s['rel_nrmse'] is None else 100 * s['rel_nrmse'], '+.1f')} %"
            f" (auto against gaussian, plug-in Gaussians without transforms: "
            f"{_f(None if s['rel_nrmse_vs_gaussian'] is None else 100 * s['rel_nrmse_vs_gaussian'], '+.1f')} %)."),
            "Transforms applied (times over the seeds): "
            + (", ".join(f"{k} x{v}" for k, v in s["auto"]["applied"].items()) or "none") + ".",
            (f"Warnings raised: plain {', '.join(s['plain']['warnings']) or 'none'}; "
            f"auto {', '.join(s['auto']['warnings']) or 'none'}; gaussian {', '.join(s['gaussian']['warnings']) or 'none'} "
            "(fit, conditional, transform and interval)."),
        ]
        for m in METHODS:
            if s[m]["errors"]:
                lines.append(f"Errors ({m}): " + "; ".join(e[:200] for e in s[m]["errors"]) + ".")
        lines.append("")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", nargs="+", default=None, help="default: all (mixed tables if load_mixed exists)")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--rate", type=float, default=0.2)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=ROOT / "results")
    args = ap.parse_args(argv)
    sets = args.datasets or default_sets()
    cells = [(d, s, m, args.rate) for d in sets for s in range(args.seeds) for m in METHODS]
    # the longest cells first so that the pool ends together
    order = {d: i for i, d in enumerate(("abalone", "breast_cancer", "ionosphere", "boston", "diabetes"))}
    cells.sort(key=lambda c: order.get(c[0], 99))
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        rows = list(pool.map(run_cell, cells))
    wall = time.perf_counter() - t0
    summary = summarise(rows, sets)
    dec = decide(summary)
    for s in summary:
        print(f"{s['dataset']:>13}: NRMSE plain {_f(s['plain']['nrmse'], '.4f')} auto {_f(s['auto']['nrmse'], '.4f')} "
              f"({_f(s['rel_nrmse'], '+.3f')}); cross0 plain {_f(s['plain']['cross0'], '.3f')} "
              f"auto {_f(s['auto']['cross0'], '.3f')}; applied {s['auto']['applied']}", flush=True)
    meta = {"python": platform.python_version(), "numpy": np.__version__, "seeds": args.seeds, "rate": args.rate,
            "jobs": args.jobs, "datasets": sets, "wall_seconds": wall, "argv": sys.argv[1:] if argv is None else argv}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "transforms_auto.json").write_text(json.dumps(
        {"meta": meta, "decision": dec, "summary": summary, "runs": rows}, indent=1))
    (args.out / "transforms_auto.md").write_text(render(args, meta, summary, dec) + "\n")
    print(decision_line(dec))
    print(f"wall {wall:.0f} s")


if __name__ == "__main__":
    main()
