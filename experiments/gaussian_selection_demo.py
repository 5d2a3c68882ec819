"""The Gaussian-mixture selection model against complete-case and MAR EM when one column is self-masking NMAR.

Protocol (chosen here; the thesis has no such experiment, it motivates it: digest section 2.4, non-ignorable
missingness biases the MAR estimates):

* **Real data** (``explorer.datasets``): for every repetition, one column of the complete data set is made
  self-masking NMAR with :func:`explorer.core.missingness.tabular_mechanisms.self_masking` (``rate`` expected missing
  fraction, ``strength`` on the standardised value: P(missing) = sigmoid(a + strength * z), so large values are
  hidden); the other columns stay complete. The mean of that column is then estimated by

  - complete case: the mean of its observed values;
  - MAR GMM EM: :mod:`explorer.core.mixtures.em_gmm` with K full-covariance components, the fitted mixture mean;
  - selection model: :mod:`explorer.core.mixtures.gaussian_selection` with the same K, the fitted mixture mean.

  The truth is the mean of the complete column. Mean +- 1 standard error (sd / sqrt(repeats), sd with n - 1) of
  the estimate, its bias and RMSE over the repetitions, and the fitted slope b next to the mechanism's
  (in raw units: b_true = -strength / sd(column), sd with ddof 0; our b multiplies P(observed)).
* **Synthetic check** (the design of ``tests/test_core_gaussian_selection.py``): K = 1, D = 2, mean (1, -1),
  covariance [[1, 0.6], [0.6, 1]], N = 1500, P(x_0 observed) = sigmoid(1.5 - 1.5 x_0); the spread of the
  fitted slope and mean over repetitions justifies the test's tolerances.

Every fit: selection model ``SelectionConfig(n_components=K, max_iter=300, tol=1e-6)`` (one missing column:
every expectation by Gauss-Hermite quadrature, a deterministic E-step), MAR EM ``EMConfig(n_components=K,
max_iter=500, tol=1e-6)``.

Usage::

    .venv/bin/python experiments/gaussian_selection_demo.py            # writes results/gaussian_selection.{json,md}
    .venv/bin/python experiments/gaussian_selection_demo.py --quick    # 3 repetitions, prints only
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from scipy.special import expit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from explorer.core.missingness.tabular_mechanisms import self_masking  # noqa: E402
from explorer.core.mixtures import em_gmm  # noqa: E402
from explorer.core.mixtures import gaussian_selection as gs  # noqa: E402
from explorer.datasets import load_dataset  # noqa: E402

SETTINGS = (
    {"dataset": "iris", "columns": None, "target": "sepal_length", "n_components": 3},
    {"dataset": "boston", "columns": ("RM", "LSTAT", "NOX", "DIS", "PTRATIO"), "target": "RM", "n_components": 2},
)
METHODS = ("complete_case", "mar_em", "selection")
LABELS = {"complete_case": "complete case", "mar_em": "MAR GMM EM", "selection": "selection model"}


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def _fit_both(Xm: np.ndarray, K: int, seed: int) -> dict:
    t0 = time.perf_counter()
    res = _quiet(gs.fit, gs.prepare(Xm), gs.SelectionConfig(n_components=K, max_iter=300, tol=1e-6),
                 np.random.default_rng(seed))
    t1 = time.perf_counter()
    mar = _quiet(em_gmm.fit, em_gmm.prepare(Xm), em_gmm.EMConfig(n_components=K, max_iter=500, tol=1e-6),
                 np.random.default_rng(seed))
    p = res.state.params
    ll = [s["log_likelihood"] for s in res.trace]
    return {"selection_mean": (p.weights @ p.means).tolist(),
            "mar_mean": (mar.state.weights @ mar.state.means).tolist(),
            "a": p.a.tolist(), "b": p.b.tolist(), "n_iter": res.n_iter, "stop": res.stop_reason,
            "monotone": bool(np.all(np.diff(ll) > -1e-8 * np.abs(np.asarray(ll[1:])))),
            "seconds": t1 - t0}


def run_real(setting: dict, repeats: int, rate: float, strength: float, seed: int) -> dict:
    ds = load_dataset(setting["dataset"])
    cols = list(ds.columns) if setting["columns"] is None else list(setting["columns"])
    X = np.asarray(ds.truth, dtype=float)[:, [ds.columns.index(c) for c in cols]]
    j = cols.index(setting["target"])
    truth = float(X[:, j].mean())
    b_true = -strength / float(X[:, j].std())
    runs = []
    for r in range(repeats):
        rng = np.random.default_rng(seed + r)
        miss = np.zeros(X.shape, dtype=bool)
        miss[:, j] = self_masking(X[:, [j]], rate, rng=rng, strength=strength)[:, 0]
        Xm = np.where(miss, np.nan, X)
        out = _fit_both(Xm, setting["n_components"], seed + r)
        runs.append({"missing_fraction": float(miss[:, j].mean()),
                     "complete_case": float(np.nanmean(Xm[:, j])),
                     "mar_em": out["mar_mean"][j], "selection": out["selection_mean"][j],
                     "b": out["b"][j], "n_iter": out["n_iter"], "stop": out["stop"], "monotone": out["monotone"],
                     "seconds": out["seconds"]})
        print(f"  {setting['dataset']} rep {r}: " + "  ".join(f"{m} {runs[-1][m]:.3f}" for m in METHODS)
              + f"  b {runs[-1]['b']:.3f} (true {b_true:.3f})  it {out['n_iter']}", flush=True)
    return {"setting": {**setting, "columns": cols}, "truth": truth, "b_true": b_true,
            "summary": _summary(runs, truth, b_true), "runs": runs}


def _stats(values, truth):
    v = np.asarray(values, dtype=float)
    return {"mean": float(v.mean()), "se": float(v.std(ddof=1) / np.sqrt(v.size)) if v.size > 1 else float("nan"),
            "sd": float(v.std(ddof=1)) if v.size > 1 else float("nan"),
            "bias": float(v.mean() - truth), "rmse": float(np.sqrt(np.mean((v - truth) ** 2)))}


def _summary(runs, truth, b_true):
    s = {m: _stats([r[m] for r in runs], truth) for m in METHODS}
    s["b"] = _stats([r["b"] for r in runs], b_true)
    s["missing_fraction"] = float(np.mean([r["missing_fraction"] for r in runs]))
    s["all_monotone"] = all(r["monotone"] for r in runs)
    s["stops"] = sorted({r["stop"] for r in runs})
    s["mean_iterations"] = float(np.mean([r["n_iter"] for r in runs]))
    return s


def run_synthetic(repeats: int, seed: int) -> dict:
    runs = []
    for r in range(repeats):
        rng = np.random.default_rng(100 + r)
        X = rng.multivariate_normal([1.0, -1.0], [[1.0, 0.6], [0.6, 1.0]], size=1500)
        miss = np.zeros(X.shape, dtype=bool)
        miss[:, 0] = rng.random(1500) > expit(1.5 - 1.5 * X[:, 0])
        out = _fit_both(np.where(miss, np.nan, X), 1, seed + r)
        sample = float(X[:, 0].mean())
        runs.append({"selection_minus_sample": out["selection_mean"][0] - sample,
                     "mar_minus_sample": out["mar_mean"][0] - sample, "b": out["b"][0], "n_iter": out["n_iter"],
                     "monotone": out["monotone"]})
        print(f"  synthetic rep {r}: sel-sample {runs[-1]['selection_minus_sample']:+.3f}  "
              f"mar-sample {runs[-1]['mar_minus_sample']:+.3f}  b {out['b'][0]:.3f}", flush=True)
    keys = ("selection_minus_sample", "mar_minus_sample", "b")
    return {"design": "K=1, D=2, mean (1,-1), cov [[1,.6],[.6,1]], N=1500, P(obs x0)=sigmoid(1.5-1.5 x0)",
            "b_true": -1.5, "summary": {k: _stats([r[k] for r in runs], -1.5 if k == "b" else 0.0) for k in keys},
            "all_monotone": all(r["monotone"] for r in runs), "runs": runs}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--synthetic-repeats", type=int, default=12)
    ap.add_argument("--rate", type=float, default=0.3)
    ap.add_argument("--strength", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--out", type=Path, default=ROOT / "results")
    ap.add_argument("--from-json", action="store_true", help="only rewrite the .md from the saved json")
    ap.add_argument("--quick", action="store_true", help="3 repetitions (2 synthetic), print only")
    args = ap.parse_args(argv)
    if args.from_json:
        result = json.loads((args.out / "gaussian_selection.json").read_text())
        (args.out / "gaussian_selection.md").write_text(report(result))
        return result
    if args.quick:
        args.repeats, args.synthetic_repeats = 3, 2
    started = time.perf_counter()
    real = [run_real(s, args.repeats, args.rate, args.strength, args.seed) for s in SETTINGS]
    synthetic = run_synthetic(args.synthetic_repeats, args.seed)
    seconds = time.perf_counter() - started
    command = "python experiments/gaussian_selection_demo.py" + ("".join(" " + a for a in (argv or sys.argv[1:])))
    result = {"experiment": "Gaussian-mixture selection model vs complete case and MAR EM, one self-masking column",
              "command": command, "protocol": {"rate": args.rate, "strength": args.strength, "repeats": args.repeats,
                                               "synthetic_repeats": args.synthetic_repeats, "seed": args.seed},
              "real": real, "synthetic": synthetic, "seconds": seconds}
    print(f"{seconds:.1f} s")
    if args.quick:
        return result
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gaussian_selection.json").write_text(json.dumps(result, indent=2))
    (args.out / "gaussian_selection.md").write_text(report(result))
    return result


def report(result: dict) -> str:
    p = result["protocol"]
    lines = [
        "# Gaussian-mixture selection model (logistic self-masking) vs complete case and MAR EM",
        "",
        f"Command: `{result['command']}` ({result['seconds']:.0f} s on a shared, loaded 2-core machine).",
        "",
        f"Protocol: one column of a complete data set made self-masking NMAR by `tabular_mechanisms.self_masking` "
        f"(expected missing fraction {p['rate']}, strength {p['strength']} on the standardised value: large values "
        f"hidden), the other columns complete; {p['repeats']} repetitions (new mask each). The column mean is "
        "estimated by the complete-case mean, the MAR GMM EM mixture mean (`em_gmm`) and the selection model's mixture "
        "mean (`gaussian_selection`, same K, full covariances, slopes of the complete columns fixed at 0 automatically). "
        "Mean ± 1 s.e. (sd/√n) of the estimate over the repetitions, bias and RMSE against the complete column's mean. "
        "b: the fitted slope of P(observed | x) = σ(a + b x) against the mechanism's, b_true = −strength / sd(column) "
        "(the mechanism is exactly this logistic form, so b_true is the model's true value).",
        "",
    ]
    for block in result["real"]:
        st, s = block["setting"], block["summary"]
        lines += [
            f"## {st['dataset']}: column {st['target']}, K = {st['n_components']}",
            "",
            f"Columns: {', '.join(st['columns'])}. True mean {block['truth']:.4f}; mean missing fraction "
            f"{s['missing_fraction']:.2f}.",
            "",
            "| estimator | mean ± s.e. | bias | RMSE |",
            "|---|---|---|---|",
        ]
        for m in METHODS:
            lines.append(f"| {LABELS[m]} | {s[m]['mean']:.4f} ± {s[m]['se']:.4f} | {s[m]['bias']:+.4f} | "
                         f"{s[m]['rmse']:.4f} |")
        lines += [
            f"| slope b (true {block['b_true']:.3f}) | {s['b']['mean']:.3f} ± {s['b']['se']:.3f} | "
            f"{s['b']['bias']:+.3f} | {s['b']['rmse']:.3f} |",
            "",
            f"Selection fits: stop reasons {', '.join(s['stops'])}, {s['mean_iterations']:.0f} iterations on average; "
            f"quadrature log-likelihood non-decreasing in every run: {'yes' if s['all_monotone'] else 'NO'}.",
            "",
        ]
    syn = result["synthetic"]
    ss = syn["summary"]
    lines += [
        "## Synthetic check (the unit test's design)",
        "",
        f"{syn['design']}; {len(syn['runs'])} repetitions. Differences to the complete column's sample mean "
        "(mean ± s.e., sd):",
        "",
        "| quantity | mean ± s.e. | sd |",
        "|---|---|---|",
        f"| selection mean − sample mean | {ss['selection_minus_sample']['mean']:+.4f} ± "
        f"{ss['selection_minus_sample']['se']:.4f} | {ss['selection_minus_sample']['sd']:.4f} |",
        f"| MAR EM mean − sample mean | {ss['mar_minus_sample']['mean']:+.4f} ± {ss['mar_minus_sample']['se']:.4f} | "
        f"{ss['mar_minus_sample']['sd']:.4f} |",
        f"| fitted b (true −1.5) | {ss['b']['mean']:.4f} ± {ss['b']['se']:.4f} | {ss['b']['sd']:.4f} |",
        "",
        f"Quadrature log-likelihood non-decreasing in every run: {'yes' if syn['all_monotone'] else 'NO'}.",
        "",
        "## Notes",
        "",
        "* On the synthetic data the model is correctly specified: the selection fit removes the MAR bias and "
        "recovers b. On real data the columns are not Gaussian within components, and the NMAR parameters are "
        "identified only through that Gaussian shape (digest section 8), so the fitted slope also absorbs the "
        "misfit: read the real-data rows as a demonstration, not a guarantee.",
        "* The real data set is fixed, so the standard errors above measure the variability over masks only, not "
        "over samples of the population.",
        "* The E-step here is deterministic (Gauss-Hermite, 20 nodes: one missing value per row). With more than two "
        "missing values per row the E-step uses importance sampling and the per-iteration log-likelihood estimate "
        "is noisy (not monotone); see the module docstring.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
