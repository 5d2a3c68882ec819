"""marlin2008 (section 6.5): Table 6.5, UCI Hepatitis with its real missing values, 10-fold CV.

Usage (from the repository root)::

    .venv/bin/python experiments/marlin_table65_hepatitis.py            # the committed run
    .venv/bin/python experiments/marlin_table65_hepatitis.py --quick    # 3 folds, tiny grids (seconds)

Writes ``results/marlin_table65_hepatitis.{md,json}`` (``--quick``: ``*_quick``).

Protocol (digest section 6.5; what it leaves open, and where this departs from it):

* **Data.** ``load_dataset("hepatitis")``: 155 patients (32 died, 123 lived), 19 features with their real missing
  values (5.7 %, 21 patterns); the 1/2-coded binary attributes recoded to 0/1. Class: DIE_LIVE (die = 1).
* **Evaluation.** Stratified 10-fold CV (seed ``cv_seed``); per fold the test log loss (mean negative log
  probability of the true class, natural log) and error %; the table shows mean ± standard error over the
  10 folds (std / sqrt(10)), as the thesis does.
* **Standardisation inside the folds**: each outer training fold's observed means and standard deviations
  (``StandardScaler``, which ignores NaN) are applied to that fold's training and test rows. **Zero imputation**
  uses scaling *without* centring: after centring, zero imputation would be mean imputation, and the thesis's
  zero and mean rows differ; a zero then stays a zero of the original units (for the binary attributes "no" /
  "male").
* **LR** (``LogisticRegression``, L2): lambda in 2^0, 2^-1, ..., 2^-10 chosen by an inner stratified 10-fold CV
  (log loss) on the training fold. The thesis's objective is sum_n loss_n + lambda |w|^2 (eq. 6.3.12);
  scikit-learn minimises C sum_n loss_n + |w|^2 / 2, the same minimiser for **C = 1 / (2 lambda)**, so
  C in 2^-1 .. 2^9. Treatments by :class:`explorer.learn.treatments.MissingInputClassifier`: Zero, Mean,
  Reduced (one LR per pattern, trained on all rows observing the pattern's features, with its own inner CV;
  the inner folds shrink when a pattern's covering rows hold fewer than 10 deaths), Augmented ([x*r, r],
  eq. 6.3.11, both w and v penalised).
* **LR MixFA** (multiple imputation, eq. 6.3.10): 5 imputation models, each an ``MFAImputer`` with K = 10
  components and Q = 5 factors fitted separately (own seed) on the training fold, one draw per case per model,
  one cross-validated LR per completed training set, test predictions averaged over the 5 models (the test rows
  are completed by the same models). K = 10 *can* be fitted on ~140 rows x 19 features (every component keeps
  weight >= 2 %; the per-component ridge ``reg`` keeps it solvable), but EM does not converge within 500
  iterations (about 30 s per fit here), so EM is **capped at ``mfa_max_iter`` = 100 iterations**.
  Unlike the thesis (imputation before the CV split, "transductive"), the imputation models see only the
  training fold.
* **Discriminative LDA-FA** (``LDAFAClassifier(training="discriminative")``, penalty lambda/2 sum_c mu_c'
  Sigma^-1 mu_c, our reading of the thesis's ambiguous regulariser). The thesis's grid Q in 1..15 x lambda in
  2^0..2^-10 with 10-fold inner CV means 1,650 fits per outer fold at 5-30 s each; **reduced**: Q in
  ``ldafa_q``, lambda in ``ldafa_reg``, ``ldafa_inner``-fold inner CV, L-BFGS capped at ``ldafa_max_iter``.
  **The grid extends above 2^0**: with lambda <= 1 the discriminative fit separates the training fold
  (training conditional log-likelihood near 0) and its test loss is 1-5 nats; lambda = 16 or 256 gives test
  losses near the thesis's 0.43 (our penalty is not scaled like the thesis's; it is also escapable by shrinking
  Sigma, see the report).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sklearn.base import BaseEstimator, ClassifierMixin, clone  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.model_selection import GridSearchCV, StratifiedKFold  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

from explorer.datasets import load_dataset  # noqa: E402
from explorer.impute.factor import MFAImputer  # noqa: E402
from explorer.learn.discriminant import LDAFAClassifier  # noqa: E402
from explorer.learn.treatments import MissingInputClassifier  # noqa: E402

#: Published Table 6.5: (loss, loss s.e., error %, error s.e.).
PAPER = {
    "LR Zero": (0.4012, 0.0439, 20.67, 2.71),
    "LR Mean": (0.4064, 0.0576, 18.00, 2.82),
    "LR MixFA": (0.3517, 0.0506, 13.33, 3.44),
    "LR Reduced": (0.4443, 0.0720, 19.33, 3.78),
    "LR Augmented": (0.5812, 0.1258, 19.33, 4.27),
    "LDA-FA Dis": (0.4312, 0.0720, 20.00, 3.98),
}

FULL = {"outer_folds": 10, "inner_folds": 10, "cv_seed": 0, "lambdas": tuple(2.0 ** -k for k in range(11)),
        "mfa_k": 10, "mfa_q": 5, "mfa_max_iter": 100, "n_imputations": 5,
        "ldafa_q": (1, 3), "ldafa_reg": (2.0 ** 8, 2.0 ** 4, 2.0 ** 0, 2.0 ** -10), "ldafa_inner": 3,
        "ldafa_max_iter": 100}
QUICK = {"outer_folds": 3, "inner_folds": 3, "cv_seed": 0, "lambdas": (2.0 ** -2,),
         "mfa_k": 2, "mfa_q": 1, "mfa_max_iter": 5, "n_imputations": 2,
         "ldafa_q": (1,), "ldafa_reg": (16.0,), "ldafa_inner": 2, "ldafa_max_iter": 10}


def load():
    """Hepatitis as (X with NaN, y) with y = 1 for "die", 0 for "live"."""
    data, labels = load_dataset("hepatitis", return_labels=True)
    X = np.array(data.values, dtype=float)
    X[np.asarray(data.missing)] = np.nan
    y = (np.asarray(labels) == 1).astype(int)
    return X, y, list(data.columns)


def _cv(folds: int, y, seed: int = 0):
    """Stratified folds, fewer when a class is rare (a reduced model's covering rows)."""
    counts = np.bincount(np.asarray(y, dtype=int))
    smallest = int(np.min(counts[counts > 0]))
    return StratifiedKFold(n_splits=max(2, min(folds, smallest)), shuffle=True, random_state=seed)


class CVSearch(ClassifierMixin, BaseEstimator):
    """``GridSearchCV`` by log loss with stratified folds adapted to the class counts; one candidate: no CV."""

    def __init__(self, estimator, param_grid, folds=10):
        self.estimator = estimator
        self.param_grid = param_grid
        self.folds = folds

    def fit(self, X, y):
        if all(len(v) == 1 for v in self.param_grid.values()):
            self.best_params_ = {k: v[0] for k, v in self.param_grid.items()}
            self.best_estimator_ = clone(self.estimator).set_params(**self.best_params_).fit(X, y)
        else:
            search = GridSearchCV(self.estimator, self.param_grid, cv=_cv(self.folds, y), scoring="neg_log_loss",
                                  error_score="raise").fit(X, y)
            self.best_estimator_, self.best_params_ = search.best_estimator_, search.best_params_
        self.classes_ = self.best_estimator_.classes_
        return self

    def predict_proba(self, X):
        return self.best_estimator_.predict_proba(X)

    def predict(self, X):
        return self.best_estimator_.predict(X)


def lr_search(cfg):
    """L2 LR with lambda chosen by inner CV; C = 1 / (2 lambda) (module docstring)."""
    return CVSearch(LogisticRegression(max_iter=1000), {"C": [1.0 / (2.0 * lam) for lam in cfg["lambdas"]]},
                    cfg["inner_folds"])


def methods(cfg, seed):
    """{row: estimator}; every estimator standardises inside the fold it is fitted on."""
    mfa = MFAImputer(n_components=cfg["mfa_k"], n_factors=cfg["mfa_q"], max_iter=cfg["mfa_max_iter"],
                     empty_rows="marginal")
    ldafa = CVSearch(LDAFAClassifier(training="discriminative", max_iter=cfg["ldafa_max_iter"]),
                     {"n_factors": list(cfg["ldafa_q"]), "reg": list(cfg["ldafa_reg"])}, cfg["ldafa_inner"])
    return {
        "LR Zero": make_pipeline(StandardScaler(with_mean=False), MissingInputClassifier(lr_search(cfg), "zero")),
        "LR Mean": make_pipeline(StandardScaler(), MissingInputClassifier(lr_search(cfg), "mean")),
        "LR MixFA": make_pipeline(StandardScaler(), MissingInputClassifier(
            lr_search(cfg), "multiple", imputer=mfa, n_imputations=cfg["n_imputations"], random_state=seed)),
        "LR Reduced": make_pipeline(StandardScaler(), MissingInputClassifier(lr_search(cfg), "reduced")),
        "LR Augmented": make_pipeline(StandardScaler(), MissingInputClassifier(lr_search(cfg), "augmented")),
        "LDA-FA Dis": make_pipeline(StandardScaler(), ldafa),
    }


def _score(model, X, y):
    P = np.clip(model.predict_proba(X), 1e-300, 1.0)
    loss = float(-np.mean(np.log(P[np.arange(len(y)), y])))
    err = float(100.0 * np.mean(np.argmax(P, axis=1) != y))
    return loss, err


def _chosen(model):
    """The hyper-parameters chosen by the inner CV (lists for MI / reduced models)."""
    last = model[-1]
    if isinstance(last, MissingInputClassifier):
        if last.treatment == "multiple":
            return [e.best_params_ for e in last.estimators_]
        if last.treatment == "reduced":
            return [getattr(m, "best_params_", None) for m in last.reduced_models_.values()]
        return last.estimator_.best_params_
    return last.best_params_


def run(cfg, only=(), log=print):
    """{row: {"loss": [per fold], "err": [...], "seconds", "chosen": [...]}} for the outer CV."""
    X, y, _ = load()
    outer = StratifiedKFold(n_splits=cfg["outer_folds"], shuffle=True, random_state=cfg["cv_seed"])
    folds = list(outer.split(X, y))
    out = {}
    for row in methods(cfg, 0):
        if only and row not in only:
            continue
        res = {"loss": [], "err": [], "seconds": 0.0, "chosen": []}
        for k, (tr, te) in enumerate(folds):
            model = methods(cfg, k)[row]
            t0 = time.perf_counter()
            model.fit(X[tr], y[tr])
            loss, err = _score(model, X[te], y[te])
            res["seconds"] += time.perf_counter() - t0
            res["loss"].append(loss)
            res["err"].append(err)
            res["chosen"].append(json.loads(json.dumps(_chosen(model), default=float)))
        out[row] = res
        n = len(folds)
        log(f"  {row:14s} loss {np.mean(res['loss']):.4f} ± {np.std(res['loss'], ddof=1) / np.sqrt(n):.4f}  "
            f"err {np.mean(res['err']):6.2f} ± {np.std(res['err'], ddof=1) / np.sqrt(n):.2f}  "
            f"({res['seconds']:.1f} s)")
    return out


def summarise(raw):
    summary = {}
    for row, r in raw.items():
        n = len(r["loss"])
        summary[row] = {"loss_mean": float(np.mean(r["loss"])),
                        "loss_se": float(np.std(r["loss"], ddof=1) / np.sqrt(n)),
                        "err_mean": float(np.mean(r["err"])), "err_se": float(np.std(r["err"], ddof=1) / np.sqrt(n)),
                        "seconds": r["seconds"], **r}
    return summary


def _edge_share(summary, c_edge: float) -> str:
    """'k of n LR fits' whose chosen C equals ``c_edge``."""
    hits = total = 0
    for row, s in summary.items():
        if not row.startswith("LR"):
            continue
        for c in s["chosen"]:
            for choice in (c if isinstance(c, list) else [c]):
                if isinstance(choice, dict) and "C" in choice:
                    total += 1
                    hits += choice["C"] == c_edge
    return f"{hits} of {total} LR fits"


def _chosen_counts(chosen) -> str:
    """'{params}: count' over folds (lists of per-model choices flattened)."""
    from collections import Counter

    flat = []
    for c in chosen:
        flat.extend(c if isinstance(c, list) else [c])
    counts = Counter(json.dumps(c, sort_keys=True) for c in flat)
    return ", ".join(f"`{k}` x {v}" for k, v in counts.most_common())


def _fmt(m, s, digits):
    return f"{m:.{digits}f} ± {s:.{digits}f}"


def write_report(summary, cfg, meta, out_dir: Path, suffix: str, command: str):
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"marlin_table65_hepatitis{suffix}"
    cfg_json = {k: list(v) if isinstance(v, tuple) else v for k, v in cfg.items()}
    payload = {"config": cfg_json, "command": command, "meta": meta, "summary": summary,
               "paper": {k: {"loss": v[0], "loss_se": v[1], "err": v[2], "err_se": v[3]} for k, v in PAPER.items()}}
    (out_dir / f"{stem}.json").write_text(json.dumps(payload, indent=1, default=float))
    lam = cfg["lambdas"]
    L = ["# Marlin (2008) Table 6.5: UCI Hepatitis (real missing values), 10-fold cross-validation", "",
         f"Command: `{command}`", "",
         f"Ours: stratified {cfg['outer_folds']}-fold CV (seed {cfg['cv_seed']}), mean ± standard error over the "
         f"folds; features standardised inside each training fold (zero imputation: scaled, not centred). LR "
         f"lambda in {{2^0 .. 2^{int(np.log2(min(lam)))}}} ({len(lam)} values) by inner {cfg['inner_folds']}-fold "
         f"CV (log loss), C = 1/(2 lambda). MixFA: {cfg['n_imputations']} separately fitted MFAs (K = "
         f"{cfg['mfa_k']}, Q = {cfg['mfa_q']}, EM capped at {cfg['mfa_max_iter']} iterations), one LR per "
         f"completion, predictions averaged. LDA-FA Dis: Q in {list(cfg['ldafa_q'])}, lambda in "
         f"{[float(v) for v in cfg['ldafa_reg']]} by inner {cfg['ldafa_inner']}-fold CV, L-BFGS capped at "
         f"{cfg['ldafa_max_iter']} iterations. Protocol and choices: the docstring of "
         "`experiments/marlin_table65_hepatitis.py`.", "",
         f"Run time {meta['seconds']:.0f} s ({meta['seconds'] / 60:.1f} min; wall clock, summed over the processes) "
         f"on {meta['machine']}, one BLAS "
         "thread, a 2-core machine shared with other jobs"
         + (f" (rows in {meta['parallel_processes']} parallel processes, {meta['wall_seconds'] / 60:.0f} min wall "
            "clock)" if "parallel_processes" in meta else "") + ".", "",
         "| method | our loss | paper loss | our error % | paper error % | s (all folds) |",
         "|---|---|---|---|---|---|"]
    for row, s in summary.items():
        p = PAPER.get(row)
        L.append(f"| {row} | {_fmt(s['loss_mean'], s['loss_se'], 4)} | {p[0]:.4f} ± {p[1]:.4f} | "
                 f"{_fmt(s['err_mean'], s['err_se'], 2)} | {p[2]:.2f} ± {p[3]:.2f} | {s['seconds']:.0f} |")
    L += ["", "## Hyper-parameters chosen by the inner CV (count over folds; MI: 5 models per fold; reduced: one "
          "model per pattern)", ""]
    for row, s in summary.items():
        L.append(f"* {row}: {_chosen_counts(s['chosen'])}")
    L += ["", "## Where ours differ from the thesis, and why", ""]
    if all(r in summary for r in PAPER):
        best = min(summary, key=lambda r: summary[r]["err_mean"])
        best_loss = min(summary, key=lambda r: summary[r]["loss_mean"])
        L += [f"* The thesis's headline, LR MixFA best (13.33 % / 0.3517), is what we see: lowest error {best} "
              f"({summary[best]['err_mean']:.2f} %), lowest loss {best_loss} ({summary[best_loss]['loss_mean']:.4f}). "
              "But every row lies within about one standard error of every other (the ± are 2-4 points of error), "
              "so neither table ranks the methods significantly.",
              "* Zero and mean imputation are better here than in the thesis (errors "
              f"{summary['LR Zero']['err_mean']:.2f}"
              f" / {summary['LR Mean']['err_mean']:.2f} % against 20.67 / 18.00 %). Possible causes: our per-fold "
              "standardisation (the thesis does not say whether it standardised), a different fold assignment, "
              "and the 1/2 to 0/1 recoding of the binary attributes, which changes what a zero means.",
              f"* LR Augmented: {summary['LR Augmented']['loss_mean']:.4f} loss against the thesis's 0.5812 ± 0.1258. "
              "The thesis's large loss with a large standard error suggests a few overconfident folds; our inner "
              "CV by log loss guards against that.",
              f"* LR lambda: the inner CV chose the strongest penalty of the thesis's grid, lambda = 2^0 (C = 0.5), in "
              f"{_edge_share(summary, 0.5)}, so the optimum may lie above the grid; the grid was kept as published.",
              "* LR MixFA: the imputation models see only the training fold (the thesis imputed before the CV "
              "split) and EM is capped at 100 iterations.",
              "* LDA-FA Dis: the thesis's grid (lambda <= 1) overfits badly in our implementation, so the grid was "
              "extended upwards, and the CV always picks one of the added values (above). Our penalty "
              "lambda/2 sum_c mu_c' Sigma^-1 mu_c can be escaped by shrinking Sigma and rescaling the means (the "
              "posterior depends on Sigma^-1 mu_c and on a bias that the free class priors absorb), so lambda "
              "only slows overfitting down. The thesis's penalty is ambiguous (digest Appendix A). Grid, inner "
              "folds and iterations are also smaller (module docstring)."]
    L += ["", "Each fold's error % is a multiple of 1/15 or 1/16 (15-16 test rows), so one misclassified patient "
          "moves a fold by about 6.5 points.", ""]
    (out_dir / f"{stem}.md").write_text("\n".join(L))
    return out_dir / f"{stem}.md"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="3 outer / 3 inner folds, 2 lambdas, small MFA and LDA-FA")
    ap.add_argument("--only", default="", help="comma-separated rows to run (default: all)")
    ap.add_argument("--cv-seed", type=int, default=None, help="seed of the outer CV split (default 0)")
    ap.add_argument("--partial", default=None, help="write the raw results of these rows to this JSON file, no report")
    ap.add_argument("--merge", nargs="+", default=None,
                    help="build the report from --partial JSON files (rows run as parallel processes)")
    ap.add_argument("--out", default=str(ROOT / "results"), help="output directory")
    args = ap.parse_args(argv)
    cfg = dict(QUICK if args.quick else FULL)
    if args.cv_seed is not None:
        cfg["cv_seed"] = args.cv_seed
    only = tuple(r.strip() for r in args.only.split(",") if r.strip())
    command = ("python experiments/marlin_table65_hepatitis.py "
               + " ".join(repr(a) if " " in a else a for a in (argv if argv is not None else sys.argv[1:]))).strip()
    machine = f"{platform.machine()} {platform.python_version()}"
    if args.merge:
        parts = [json.loads(Path(f).read_text()) for f in args.merge]
        raw = {}
        for part in parts:
            raw.update(part["raw"])
        raw = {row: raw[row] for row in PAPER if row in raw}
        command = ("; ".join(part["command"] for part in parts) + f"; then {command}` (rows in parallel processes; "
                   "the same run in one process: `python experiments/marlin_table65_hepatitis.py")
        meta = {"seconds": float(sum(part["seconds"] for part in parts)), "machine": machine,
                "wall_seconds": float(max(part["seconds"] for part in parts)), "parallel_processes": len(parts)}
    else:
        t0 = time.perf_counter()
        with threadpool_limits(limits=1), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # EM / L-BFGS iteration caps
            raw = run(cfg, only)
        meta = {"seconds": time.perf_counter() - t0, "machine": machine}
        if args.partial:
            Path(args.partial).write_text(json.dumps({"raw": raw, "seconds": meta["seconds"], "command": command},
                                                     default=float))
            print(f"wrote {args.partial} ({meta['seconds']:.0f} s)")
            return raw
    summary = summarise(raw)
    suffix = "_quick" if args.quick else ""
    path = write_report(summary, cfg, meta, Path(args.out), suffix, command)
    print(f"wrote {path} ({meta['seconds']:.0f} s)")
    return summary


if __name__ == "__main__":
    main()
