"""delalleau2012 (Delalleau, Courville & Bengio): per-digit Gaussian mixtures on MNIST with a random 5x5 square
missing in every image; the minimum-spanning-tree E-step against the naive per-pattern EM.

Usage (from the repository root)::

    .venv/bin/python experiments/delalleau_mnist.py            # the committed run (about 15 min, 1 BLAS thread)
    .venv/bin/python experiments/delalleau_mnist.py --quick    # digits 1 and 7, smaller grid (about 2 min)

Writes ``results/delalleau_mnist.{json,md}`` and ``docs/figures/delalleau_mnist_inpainting.png``
(``--quick`` writes ``*_quick`` files).

Protocol (delalleau2012 digest §3.1 and §7.10; what the document leaves open, and where this departs from it):

* **Data.** The project ships the MNIST *test* set (10,000 images); the paper trained on the first 4,500 images of
  each class of the 60,000-image training set and selected hyper-parameters on the rest. Here, per class, the first
  70 % of that class's test images train (about 690) and the rest validate (about 300). Pixels / 255.
* **Missingness.** One 5x5 square per image, its top-left corner uniform over the 24 x 24 = 576 fully-inside
  positions (the paper does not say how squares were placed), so a class has about 400 distinct patterns.
* **Model.** A full-covariance Gaussian mixture fitted by exact EM on the incomplete images (learnt mixing weights;
  the paper's equations fix them equal, footnote 1). Regularisation: a ridge ``reg_covar`` on the diagonal (the
  paper's option (a)); its MNIST runs used PCA truncation (option (b)), which the project does not implement.
* **Selection.** K in a small grid x 2 k-means seeds, by the validation mean negative observed-data
  log-likelihood per image (paper: K = 1..10 x 3 PCA fractions x 5 seeds; the grid is cut to keep the run short).
* **Timing.** The selected model of every class is retrained from the same initial parameters for a few
  iterations with each E-step strategy: ``naive`` (the paper's baseline: per distinct pattern, a Cholesky factor of
  Sigma_oo and Sigma_mm - Sigma_mo Sigma_oo^-1 Sigma_om from scratch), ``tree`` (the paper's algorithm: patterns
  visited along the Hamming minimum spanning tree, the factor of Sigma_oo updated by Givens removals and appends,
  the conditional covariance by the inverse variance lemma) and the project's default engine (``strategy="auto"``,
  the precision-side complement of digest §9, which factors only the 25 x 25 missing block per pattern). Seconds
  per iteration are medians; the log-likelihood trajectories and final parameters of the three are compared.
* **Figure.** Validation images: original, masked (the square in red) and imputed by the selected mixture's
  conditional mean.

One BLAS thread (threadpoolctl) for every timing, so the ratios compare algorithms, not thread counts.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "experiments"))

from explorer.core.missingness.image_masks import image_square  # noqa: E402
from explorer.core.mixtures import em_gmm  # noqa: E402
from explorer.datasets import load_dataset  # noqa: E402

SHAPE = (28, 28)
PAPER_SPEEDUP = {"32-bit Pentium 4, 3.2 GHz": 8, "64-bit Athlon, 2.2 GHz": 20}

FULL = {"digits": tuple(range(10)), "grid": (1, 2, 3), "seeds": (0, 1), "select_iter": 10, "time_iter": 2,
        "reg_covar": 0.01, "train_fraction": 0.7, "figure_images": 2}
QUICK = {"digits": (1, 7), "grid": (1, 2), "seeds": (0,), "select_iter": 6, "time_iter": 2,
         "reg_covar": 0.01, "train_fraction": 0.7, "figure_images": 3}
STRATEGIES = ("naive", "tree", "auto")


def class_split(images, labels, digit, fraction, rng):
    """Train / validation images of one class with one random 5x5 square missing per image."""
    X = images[labels == digit]
    n_train = int(round(fraction * X.shape[0]))
    missing = image_square(X, rng=rng, image_shape=SHAPE, size=5)
    Xm = np.where(missing, np.nan, X)
    return X[:n_train], Xm[:n_train], X[n_train:], Xm[n_train:]


def n_distinct(missing: np.ndarray) -> int:
    return int(np.unique(np.packbits(missing, axis=1), axis=0).shape[0])


def select(Xtr, Xva, cfg):
    """Fit every (K, seed) of the grid; the lowest validation NLL per image wins."""
    data = em_gmm.prepare(Xtr)
    val = em_gmm.prepare(Xva)
    rows = []
    best = None
    for K in cfg["grid"]:
        for seed in cfg["seeds"]:
            config = em_gmm.EMConfig(n_components=K, reg_covar=cfg["reg_covar"], max_iter=cfg["select_iter"],
                                     tol=1e-4)
            t = time.perf_counter()
            with _quiet():
                res = em_gmm.fit(data, config, np.random.default_rng(seed))
            st = res.state
            nll = -float(em_gmm.observed_log_likelihood(val, st.weights, st.means, st.covariances, "full").mean())
            row = {"K": K, "seed": seed, "n_iter": res.n_iter, "train_ll_per_image": st.log_likelihood / data.n_fit,
                   "val_nll_per_image": nll, "seconds": time.perf_counter() - t}
            rows.append(row)
            if best is None or nll < best[0]["val_nll_per_image"]:
                best = (row, res, config)
    return rows, best


class _quiet:
    def __enter__(self):
        import warnings

        self._w = warnings.catch_warnings()
        self._w.__enter__()
        warnings.simplefilter("ignore")

    def __exit__(self, *exc):
        self._w.__exit__(*exc)


def time_strategies(Xtr, K, seed, cfg):
    """Retrain the selected model from the same initial state with each strategy; per-iteration seconds and traces."""
    out = {}
    data = em_gmm.prepare(Xtr)
    base = em_gmm.EMConfig(n_components=K, reg_covar=cfg["reg_covar"], max_iter=cfg["time_iter"], tol=0.0)
    with _quiet():
        start = em_gmm.init(data, base, np.random.default_rng(seed))
    params = (np.array(start.weights), np.array(start.means), np.array(start.covariances))
    for strategy in STRATEGIES:
        from dataclasses import replace

        config = replace(base, strategy=strategy)
        with _quiet():
            t0 = time.perf_counter()
            state = em_gmm.init_from_parameters(data, config, *params)
            t_init = time.perf_counter() - t0
            times, lls = [], [state.log_likelihood]
            for _ in range(cfg["time_iter"]):
                t = time.perf_counter()
                state = em_gmm.step(state, data, config)
                times.append(time.perf_counter() - t)
                lls.append(state.log_likelihood)
        out[strategy] = {"seconds_per_iter": float(np.median(times)), "times": times, "init_seconds": t_init,
                         "log_likelihood": lls, "state": state}
    ref = out["naive"]["state"]
    for strategy in STRATEGIES:
        st = out[strategy]["state"]
        out[strategy]["max_rel_diff_covariances"] = float(np.abs(st.covariances - ref.covariances).max()
                                                          / np.abs(ref.covariances).max())
        out[strategy]["max_rel_diff_means"] = float(np.abs(st.means - ref.means).max() / np.abs(ref.means).max())
        out[strategy]["max_rel_diff_loglik"] = float(max(abs(a - b) / abs(b) for a, b in
                                                         zip(out[strategy]["log_likelihood"], out["naive"]["log_likelihood"])))
    return out


def tree_stats(Xm):
    from explorer.core.gaussians.patterns import group_patterns
    from explorer.core.mixtures.pattern_tree import build_pattern_tree

    t = time.perf_counter()
    tree = build_pattern_tree(group_patterns(np.isnan(Xm), sort=True))
    s = tree.stats()
    s["build_seconds"] = time.perf_counter() - t
    return s


def run(cfg, seed):
    from threadpoolctl import threadpool_limits

    data, labels = load_dataset("mnist", return_labels=True)
    images = np.asarray(data.values, dtype=float)
    labels = np.asarray(labels)
    rng = np.random.default_rng(seed)
    classes, examples = [], {"original": [], "masked": [], "imputed": []}
    with threadpool_limits(1):
        for digit in cfg["digits"]:
            t0 = time.perf_counter()
            Xtr_true, Xtr, Xva_true, Xva = class_split(images, labels, digit, cfg["train_fraction"], rng)
            grid, (best_row, best_res, best_cfg) = select(Xtr, Xva, cfg)
            timing = time_strategies(Xtr, best_row["K"], best_row["seed"], cfg)
            val = em_gmm.prepare(Xva)
            with _quiet():
                imputed = em_gmm.impute(em_gmm.init_from_parameters(val, best_cfg, best_res.state.weights,
                                                                    best_res.state.means, best_res.state.covariances),
                                        val, best_cfg)
            miss = np.isnan(Xva)
            rmse = float(np.sqrt(np.mean((imputed - Xva_true)[miss] ** 2)))
            mean_rmse = float(np.sqrt(np.mean((np.where(miss, np.nanmean(Xtr, axis=0), Xva) - Xva_true)[miss] ** 2)))
            for key, arr in (("original", Xva_true), ("masked", Xva), ("imputed", imputed)):
                examples[key].extend(arr[: cfg["figure_images"]])
            cls = {
                "digit": int(digit), "n_train": int(Xtr.shape[0]), "n_val": int(Xva.shape[0]),
                "train_patterns": n_distinct(np.isnan(Xtr)), "tree": tree_stats(Xtr), "grid": grid,
                "selected": {"K": best_row["K"], "seed": best_row["seed"],
                             "val_nll_per_image": best_row["val_nll_per_image"]},
                "val_rmse_missing": rmse, "val_rmse_mean_imputation": mean_rmse,
                "timing": {s: {k: v for k, v in d.items() if k != "state"} for s, d in timing.items()},
                "seconds": time.perf_counter() - t0,
            }
            tn, tt, ta = (timing[s]["seconds_per_iter"] for s in STRATEGIES)
            print(f"digit {digit}: K={best_row['K']} patterns={cls['train_patterns']} naive {tn:.2f}s tree {tt:.2f}s "
                  f"(x{tn / tt:.1f}) default {ta:.3f}s (x{tn / ta:.0f}); max rel diff tree/naive cov "
                  f"{timing['tree']['max_rel_diff_covariances']:.1e}; val RMSE {rmse:.3f} (mean {mean_rmse:.3f}); "
                  f"{cls['seconds']:.0f}s", flush=True)
            classes.append(cls)
    return {"config": {k: list(v) if isinstance(v, tuple) else v for k, v in cfg.items()}, "seed": seed,
            "classes": classes, "environment": _environment()}, examples


def _environment():
    import numpy
    import scipy

    try:
        import numba

        nb = numba.__version__
    except ImportError:
        nb = None
    from threadpoolctl import threadpool_info

    blas = [f"{i.get('internal_api')} {i.get('version')}" for i in threadpool_info() if i.get("user_api") == "blas"]
    import os

    return {"load_average": list(os.getloadavg()), "python": platform.python_version(), "numpy": numpy.__version__, "scipy": scipy.__version__,
            "numba": nb, "blas": blas, "cpu": platform.processor() or platform.machine(), "blas_threads": 1}


def write_markdown(res, command: str) -> str:
    cl = res["classes"]
    L = ["# delalleau2012: fast EM on MNIST with a 5x5 square missing per image", "",
         f"Command: `{command}` (one BLAS thread; {res['environment']['blas']}; numpy {res['environment']['numpy']}, "
         f"numba {res['environment']['numba']}, Python {res['environment']['python']}; load average at the end "
         f"{'/'.join(f'{v:.1f}' for v in res['environment']['load_average'])} on 2 CPUs).", "",
         "Protocol and departures from the paper: see the docstring of `experiments/delalleau_mnist.py` (MNIST *test* "
         "set, 70 % / 30 % per class; ridge regularisation; a reduced K grid).", "",
         "## Speed of one EM iteration (median), same initial parameters", "",
         "| digit | train images | distinct patterns | MST weight | mean n_d | max depth | K | naive s/iter | tree s/iter "
         "| tree speed-up | default s/iter | default speed-up over naive | max rel. diff tree vs naive (cov / loglik) |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    sp_tree, sp_def = [], []
    for c in cl:
        t = c["timing"]
        tn, tt, ta = t["naive"]["seconds_per_iter"], t["tree"]["seconds_per_iter"], t["auto"]["seconds_per_iter"]
        sp_tree.append(tn / tt)
        sp_def.append(tn / ta)
        L.append(f"| {c['digit']} | {c['n_train']} | {c['train_patterns']} | {c['tree']['total_weight']} | "
                 f"{c['tree']['mean_nd']:.1f} | {c['tree']['max_depth']} | {c['selected']['K']} | {tn:.2f} | {tt:.2f} | "
                 f"{tn / tt:.1f}x | {ta:.3f} | {tn / ta:.0f}x | {t['tree']['max_rel_diff_covariances']:.1e} / "
                 f"{t['tree']['max_rel_diff_loglik']:.1e} |")
    L += ["", f"Mean speed-up of the tree over the naive per-pattern EM: **{np.mean(sp_tree):.1f}x** "
          f"(range {min(sp_tree):.1f}-{max(sp_tree):.1f}); the paper reports about 8x (32-bit Pentium 4) and about "
          f"20x (64-bit Athlon). The project's default engine is {np.mean(sp_def):.0f}x faster than the naive EM "
          f"(range {min(sp_def):.0f}-{max(sp_def):.0f}).", "",
          "## Model selection (validation NLL per image) and imputation", "",
          "| digit | K grid: val NLL per image | selected K | val RMSE on missing pixels | mean imputation RMSE |",
          "|---|---|---|---|---|"]
    for c in cl:
        by_k = {}
        for r in c["grid"]:
            by_k[r["K"]] = min(by_k.get(r["K"], np.inf), r["val_nll_per_image"])
        grid = ", ".join(f"K={k}: {v:.1f}" for k, v in sorted(by_k.items()))
        L.append(f"| {c['digit']} | {grid} | {c['selected']['K']} | {c['val_rmse_missing']:.3f} | "
                 f"{c['val_rmse_mean_imputation']:.3f} |")
    return "\n".join(L) + "\n"


def write_figure(examples, path: Path):
    from neumann_mnist_report import _save_mosaic

    _save_mosaic({"5x5": {k: np.asarray(v) for k, v in examples.items()}}, path, shape=SHAPE)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    cfg = QUICK if args.quick else FULL
    stem = "delalleau_mnist_quick" if args.quick else "delalleau_mnist"
    command = ".venv/bin/python experiments/delalleau_mnist.py" + (" --quick" if args.quick else "")
    res, examples = run(cfg, args.seed)
    (ROOT / "results").mkdir(exist_ok=True)
    (ROOT / "results" / f"{stem}.json").write_text(json.dumps(res, indent=1))
    (ROOT / "results" / f"{stem}.md").write_text(write_markdown(res, command))
    fig = ROOT / "docs" / "figures" / f"{stem}_inpainting.png"
    write_figure(examples, fig)
    print(f"wrote results/{stem}.md, results/{stem}.json, {fig.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
