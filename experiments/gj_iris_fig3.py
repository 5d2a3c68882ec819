"""Reproduce Ghahramani & Jordan (1994) Fig. 3: iris classification accuracy against the proportion of missing features.

Protocol (ghahramani1994 digest, sections 4.1, 4.3 and 5; the details the paper leaves open are chosen and recorded here):

* Fisher's iris (the scikit-learn bundled copy in ``assets/iris.csv``), 150 rows, 4 features, 3 classes;
* every repetition draws a new random split, 100 rows for training and 50 for testing (plain random,
  not stratified: the paper does not say), and a new MCAR mask: every feature entry of the training
  **and** the test rows is missing independently with probability ``rate`` (rows may lose every
  feature: a training row then still counts through its label, a test row is classified by the
  class prior);
* **EM**: the class-conditional Gaussian classifier with one full-covariance Gaussian per class
  (``GaussianMixtureClassifier(n_components=1, structure="per_class")``, i.e. QDA with ML
  covariances), fitted by EM on the incomplete training features (missing entries integrated out
  through their conditional means and covariances), test features with missing entries
  classified by exact marginalisation, P(c | x^o);
* **MI** (the baseline): every missing training and test entry replaced by the observed *training*
  column mean (unconditional, all classes pooled), then the *same* class-conditional Gaussian
  classifier fitted by maximum likelihood on the filled training matrix and applied to the
  filled test rows;
* ``reg_covar`` 1e-6 for both (the paper gives none), tolerance 1e-8 per row, at most 500 EM
  steps (maximum likelihood does not converge at high missing rates: see the report);
  ``--repeats`` repetitions (paper: 5); accuracy on the 50 test rows, mean +- 1 standard error
  (sd / sqrt(n), sd with n - 1);
* the same two methods with the data-scaled Normal-inverse-Wishart prior (``prior='auto'``,
  MAP-EM) as extra columns.

The "reference" column holds the numbers given with the task (EM / MI at 20/40/60/80 %: 0.96/0.94,
0.92/0.86, 0.83/0.74, 0.59/0.56). The digest of the memo says the curve values of Fig. 3 cannot
be read from its text (only the caption survives), so their provenance is not verified here.

Usage::

    .venv/bin/python experiments/gj_iris_fig3.py            # writes results/gj_iris_fig3.{json,md}
    .venv/bin/python experiments/gj_iris_fig3.py --quick    # 2 repetitions, 2 rates, prints only
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from explorer.core.missingness.mechanisms import apply_mechanism  # noqa: E402
from explorer.datasets import load_dataset  # noqa: E402
from explorer.learn.joint import GaussianMixtureClassifier  # noqa: E402

REFERENCE = {0.2: (0.96, 0.94), 0.4: (0.92, 0.86), 0.6: (0.83, 0.74), 0.8: (0.59, 0.56)}
METHODS = ("em", "mi", "em_map", "mi_map")
LABELS = {"em": "EM, ML", "mi": "MI, ML", "em_map": "EM, MAP (prior='auto')", "mi_map": "MI, MAP (prior='auto')"}


def _classifier(reg_covar: float, tol: float, max_iter: int, seed: int, prior=None) -> GaussianMixtureClassifier:
    return GaussianMixtureClassifier(n_components=1, structure="per_class", covariance_type="full",
                                     reg_covar=reg_covar, prior=prior, tol=tol, max_iter=max_iter, random_state=seed)


def run_once(X, y, rate: float, seed: int, reg_covar: float, tol: float, max_iter: int) -> dict:
    """One repetition at one rate: a new split and a new mask; accuracy of EM and MI on the test rows."""
    rng = np.random.default_rng(seed)
    perm = rng.permutation(X.shape[0])
    train, test = perm[:100], perm[100:]
    if rate > 0:
        missing = apply_mechanism(X, "mcar", rate, rng=rng).missing
    else:
        missing = np.zeros(X.shape, dtype=bool)
    Xm = np.where(missing, np.nan, X)
    Xtr, Xte, ytr, yte = Xm[train], Xm[test], y[train], y[test]
    out = {"seed": seed, "realised_rate": float(missing.mean()),
           "empty_test_rows": int(np.isnan(Xte).all(axis=1).sum()),
           "empty_train_rows": int(np.isnan(Xtr).all(axis=1).sum())}
    col_mean = np.nanmean(Xtr, axis=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for suffix, prior in (("", None), ("_map", "auto")):
            em = _classifier(reg_covar, tol, max_iter, seed, prior).fit(Xtr, ytr)
            out["em" + suffix] = float(np.mean(em.predict(Xte) == yte))
            out["em" + suffix + "_iterations"] = int(em.n_iter_)
            out["em" + suffix + "_converged"] = bool(em.converged_)
            out["em" + suffix + "_min_eigenvalue"] = float(np.linalg.eigvalsh(em.covariances_).min())
            mi = _classifier(reg_covar, tol, max_iter, seed, prior).fit(np.where(np.isnan(Xtr), col_mean, Xtr), ytr)
            out["mi" + suffix] = float(np.mean(mi.predict(np.where(np.isnan(Xte), col_mean, Xte)) == yte))
    out["warnings"] = sorted({f"{w.category.__name__}: {str(w.message)[:120]}" for w in caught})
    return out


def summarise(runs: list[dict]) -> dict:
    res = {}
    for m in METHODS:
        acc = np.array([r[m] for r in runs])
        se = float(acc.std(ddof=1) / np.sqrt(acc.size)) if acc.size > 1 else float("nan")
        res[m] = {"mean": float(acc.mean()), "se": se, "values": acc.tolist()}
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--rates", type=float, nargs="+", default=[0.0, 0.2, 0.4, 0.6, 0.8])
    ap.add_argument("--reg-covar", type=float, default=1e-6)
    ap.add_argument("--tol", type=float, default=1e-8)
    ap.add_argument("--max-iter", type=int, default=500)
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--out", type=Path, default=ROOT / "results")
    ap.add_argument("--from-json", action="store_true",
                    help="only rewrite the .md from the saved results/gj_iris_fig3.json (no fitting)")
    ap.add_argument("--quick", action="store_true",
                    help="2 repetitions at 20 %% and 80 %%, at most 200 EM steps, print only (no files)")
    args = ap.parse_args(argv)
    if args.from_json:
        result = json.loads((args.out / "gj_iris_fig3.json").read_text())
        (args.out / "gj_iris_fig3.md").write_text(report(result))
        return result
    if args.quick:
        args.repeats, args.rates, args.max_iter = 2, [0.2, 0.8], 200
    ds, y = load_dataset("iris", return_labels=True)
    X = np.asarray(ds.truth, dtype=float)
    y = np.asarray(y)
    started = time.perf_counter()
    rows = []
    for rate in args.rates:
        runs = [run_once(X, y, rate, args.seed + 1000 * r + int(round(100 * rate)), args.reg_covar, args.tol,
                         args.max_iter) for r in range(args.repeats)]
        rows.append({"rate": rate, "summary": summarise(runs), "runs": runs})
        s = rows[-1]["summary"]
        print(f"rate {rate:.0%}: " + "   ".join(f"{LABELS[m]} {s[m]['mean']:.3f} +- {s[m]['se']:.3f}" for m in METHODS),
              flush=True)
    seconds = time.perf_counter() - started
    command = "python experiments/gj_iris_fig3.py" + (" " + " ".join(argv) if argv else " " + " ".join(sys.argv[1:]))
    result = {
        "experiment": "Ghahramani & Jordan (1994) Fig. 3, iris classification with missing features",
        "command": command.strip(),
        "protocol": {"train": 100, "test": 50, "mechanism": "MCAR per entry, train and test features",
                     "classifier": "one full-covariance Gaussian per class (per_class, n_components=1)",
                     "baseline": "training column means fill train and test, same classifier",
                     "repeats": args.repeats, "reg_covar": args.reg_covar, "tol": args.tol,
                     "max_iter": args.max_iter, "seed": args.seed},
        "reference": {str(k): {"em": v[0], "mi": v[1]} for k, v in REFERENCE.items()},
        "rows": rows,
        "seconds": seconds,
    }
    print(f"{seconds:.1f} s")
    if args.quick:
        return result
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gj_iris_fig3.json").write_text(json.dumps(result, indent=2, default=str))
    (args.out / "gj_iris_fig3.md").write_text(report(result))
    return result


def report(result: dict) -> str:
    p = result["protocol"]
    lines = [
        "# Ghahramani & Jordan (1994) Fig. 3: iris, classification with missing features",
        "",
        f"Command: `{result['command']}` ({result['seconds']:.1f} s).",
        "",
        f"Protocol: {p['train']} training / {p['test']} test rows, a new random split and a new mask per repetition; "
        f"{p['mechanism']}; {p['repeats']} repetitions, accuracy on the test rows as mean ± 1 s.e. "
        f"(sd/√n). EM: {p['classifier']}, fitted by EM on the incomplete training data, missing test features "
        "marginalised exactly (P(c | x^o)). MI: every missing train and test entry replaced by the observed "
        "training column mean (classes pooled), then the same class-conditional Gaussian classifier fitted by "
        f"maximum likelihood. reg_covar {p['reg_covar']:g}, tol {p['tol']:g} per row, max_iter {p['max_iter']}.",
        "",
        "Main comparison (the paper's): EM, ML against MI, ML. The MAP columns repeat both with the data-scaled "
        "Normal-inverse-Wishart prior (`prior='auto'`, MAP-EM) because maximum likelihood degenerates at high "
        "missing rates (see the notes).",
        "",
        "| missing | EM, ML | MI, ML | EM − MI (ML) | reference EM / MI | EM, MAP | MI, MAP |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in result["rows"]:
        s = row["summary"]
        ref = REFERENCE.get(round(row["rate"], 2))
        ref_s = f"{ref[0]:.2f} / {ref[1]:.2f}" if ref else "—"
        diff = s["em"]["mean"] - s["mi"]["mean"]
        cell = {m: f"{s[m]['mean']:.3f} ± {s[m]['se']:.3f}" for m in METHODS}
        lines.append(f"| {row['rate']:.0%} | {cell['em']} | {cell['mi']} | {diff:+.3f} | {ref_s} | "
                     f"{cell['em_map']} | {cell['mi_map']} |")
    notes = []
    for row in result["rows"]:
        runs = row["runs"]
        its = [r["em_iterations"] for r in runs]
        conv = sum(r["em_converged"] for r in runs)
        its_map = [r["em_map_iterations"] for r in runs]
        conv_map = sum(r["em_map_converged"] for r in runs)
        eig = min(r["em_min_eigenvalue"] for r in runs)
        empty = [r["empty_test_rows"] for r in runs]
        notes.append(f"* {row['rate']:.0%}: EM (ML) iterations {min(its)}–{max(its)}, converged {conv}/{len(its)}, "
                     f"smallest covariance eigenvalue {eig:.2g}; EM (MAP) iterations {min(its_map)}–{max(its_map)}, "
                     f"converged {conv_map}/{len(its_map)}; test rows with no observed feature "
                     f"{min(empty)}–{max(empty)} of 50.")
    lines += [
        "",
        "Reference: the numbers given with the task for the published curve (EM / MI). The digest of the memo "
        "(ghahramani1994, section 5) says the values of Fig. 3 cannot be read from the text, which keeps only the caption; "
        "they are not verified here.",
        "",
        "Maximum likelihood at high missing rates: with 60-80 % of the entries missing, few training rows of a "
        "class observe two given features together, and the observed-data likelihood of a full-covariance class "
        "Gaussian grows without bound as its covariance becomes singular along directions those few rows span. EM "
        "(ML) then does not converge: it creeps towards that singularity (the smallest covariance eigenvalue below "
        "shrinks with the iterations) and is stopped at max_iter, so its accuracy there depends on max_iter. The "
        "paper gives no regulariser, iteration count or tolerance for iris. MAP-EM (the Normal-inverse-Wishart "
        "prior) converges and is the stable version of the same comparison.",
        "",
        "Per rate (all repetitions):",
        "",
        *notes,
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
