"""Reproduce Ghahramani & Jordan (1994) Fig. 2: clustering noisy 5x7 digits with 50 % missing pixels.

Protocol (ghahramani1994 digest, section 4 and 5; unstated details chosen and recorded here):

* ten 5x7 binary templates, 10 noisy copies each (Gaussian noise, sd ``--noise``), 100 rows x 35 pixels;
* 50 % of the pixels missing completely at random, per entry (``mcar``);
* a mixture of 12 diagonal Gaussians with learned weights, fitted by
  - EM on the incomplete data (``variant="em"``), and
  - mean imputation (each missing pixel replaced by its observed column mean) followed by
    complete-data EM (``variant="mean_impute"``), the paper's "MI";
* k-means initialisation on the observed data, tolerance 1e-6 on the mean log-likelihood,
  ``reg_covar`` 1e-3 (the paper gives no regulariser; 1e-3 is 2.5 % of the noise variance);
* ``--repeats`` repetitions (paper: 5), each with new noise, new mask and new initialisation;
  mean +- 1 standard error (sd / sqrt(n)).

Reported, for both methods: the **observed-data log-likelihood** of the fitted parameters on the
training rows, sum_i log sum_j pi_j N(x_i^o; mu_j^o, Sigma_j^oo) (the paper does not say which
log-likelihood it plots; for MI we evaluate its parameters on the same observed data, so the two
numbers are comparable), the number of EM passes to convergence, and the distance from each
template to the nearest learned mean (the paper's visual comparison, made numeric).

Usage::

    .venv/bin/python experiments/digits_5x7.py            # writes results/digits_5x7.{json,md}
                                                          # and docs/figures/digits_5x7.png
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
from explorer.core.mixtures import em_gmm  # noqa: E402
from explorer.datasets import DIGIT_SHAPE, digit_templates, load_dataset  # noqa: E402

PUBLISHED = {"em": (-4633.0, 328.0), "mean_impute": (-10062.0, 1263.0)}
LABELS = {"em": "EM on incomplete data", "mean_impute": "mean imputation + EM (MI)"}


def run_once(seed: int, noise: float, rate: float, n_components: int, reg_covar: float, tol: float):
    rng = np.random.default_rng(seed)
    data = load_dataset("digits_5x7", noise=noise, random_state=rng)
    mask = apply_mechanism(data.truth, "mcar", rate, rng=rng)
    X = np.where(mask.missing, np.nan, data.truth)
    prepared = em_gmm.prepare(X)
    out = {"realised_rate": mask.realised_rate}
    init_seed = int(rng.integers(2**31))
    for variant in ("em", "mean_impute"):
        config = em_gmm.EMConfig(n_components=n_components, covariance_type="diag", reg_covar=reg_covar,
                                 tol=tol, max_iter=2000, variant=variant)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", em_gmm.ConvergenceWarning)
            res = em_gmm.fit(prepared, config, np.random.default_rng(init_seed))
        means = res.state.means
        templates = digit_templates(flat=True)
        dist = np.sqrt(((templates[:, None, :] - means[None, :, :]) ** 2).sum(-1)).min(axis=1)
        out[variant] = {
            "log_likelihood": res.state.log_likelihood,
            "n_iter": res.n_iter,
            "stop_reason": res.stop_reason,
            "template_distance": float(dist.mean()),
            "means": means,
        }
    out["example"] = (data.truth, X)
    return out


def mosaic(rows_of_images, pad=1, scale=12):
    """Grid of 7x5 images (NaN = missing, drawn red) as an RGB uint8 array."""
    h, w = DIGIT_SHAPE
    n_rows, n_cols = len(rows_of_images), max(len(r) for r in rows_of_images)
    H, W = n_rows * (h + pad) + pad, n_cols * (w + pad) + pad
    img = np.full((H, W, 3), 255, dtype=np.uint8)
    for r, row in enumerate(rows_of_images):
        for c, flat in enumerate(row):
            tile = np.asarray(flat, dtype=float).reshape(h, w)
            nan = np.isnan(tile)
            g = np.clip(1.0 - np.nan_to_num(tile), 0, 1)  # dark = ink
            rgb = np.stack([g, g, g], axis=-1)
            rgb[nan] = (0.85, 0.25, 0.25)
            y, x = pad + r * (h + pad), pad + c * (w + pad)
            img[y : y + h, x : x + w] = (rgb * 255).astype(np.uint8)
    return np.kron(img, np.ones((scale, scale, 1), dtype=np.uint8))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--noise", type=float, default=0.2)
    ap.add_argument("--rate", type=float, default=0.5)
    ap.add_argument("--components", type=int, default=12)
    ap.add_argument("--reg-covar", type=float, default=1e-3)
    ap.add_argument("--tol", type=float, default=1e-6)
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--out", type=Path, default=ROOT / "results")
    ap.add_argument("--figure", type=Path, default=ROOT / "docs" / "figures" / "digits_5x7.png")
    ap.add_argument("--noise-sweep", type=float, nargs="*", default=[0.1, 0.2, 0.3, 0.5, 0.8])
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    runs = [run_once(args.seed + r, args.noise, args.rate, args.components, args.reg_covar, args.tol)
            for r in range(args.repeats)]
    elapsed = time.perf_counter() - t0
    summary = {}
    for v in ("em", "mean_impute"):
        ll = np.array([r[v]["log_likelihood"] for r in runs])
        it = np.array([r[v]["n_iter"] for r in runs])
        dist = np.array([r[v]["template_distance"] for r in runs])
        se = lambda a: float(a.std(ddof=1) / np.sqrt(a.size)) if a.size > 1 else float("nan")  # noqa: E731
        summary[v] = {
            "log_likelihood_mean": float(ll.mean()), "log_likelihood_se": se(ll),
            "n_iter_mean": float(it.mean()), "template_distance_mean": float(dist.mean()),
            "template_distance_se": se(dist), "published": PUBLISHED[v], "runs": ll.tolist(),
            "stop_reasons": [r[v]["stop_reason"] for r in runs],
        }
    n_obs = 100 * 35 * (1 - np.mean([r["realised_rate"] for r in runs]))
    result = {"settings": vars(args) | {"out": str(args.out)}, "seconds": elapsed, "summary": summary,
              "observed_entries_per_run": n_obs}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "digits_5x7.json").write_text(json.dumps(result, indent=2, default=str))

    em, mi = summary["em"], summary["mean_impute"]
    ratio = mi["log_likelihood_mean"] / em["log_likelihood_mean"]
    pub_ratio = PUBLISHED["mean_impute"][0] / PUBLISHED["em"][0]
    lines = [
        "# Ghahramani & Jordan (1994) Fig. 2 reproduction: 5x7 digits, 50 % missing, 12 diagonal Gaussians",
        "",
        f"Command: `.venv/bin/python experiments/digits_5x7.py` (repeats={args.repeats}, noise sd={args.noise}, "
        f"rate={args.rate}, K={args.components}, reg_covar={args.reg_covar}, tol={args.tol}, seed={args.seed}); "
        f"{elapsed:.1f} s.",
        "",
        "| method | log-likelihood (ours), mean +- s.e. | published | per observed entry (ours) | EM passes | "
        "template distance |",
        "|---|---|---|---|---|---|",
    ]
    for v in ("em", "mean_impute"):
        s = summary[v]
        lines.append(
            f"| {LABELS[v]} | {s['log_likelihood_mean']:.1f} +- {s['log_likelihood_se']:.1f} | "
            f"{PUBLISHED[v][0]:.0f} +- {PUBLISHED[v][1]:.0f} | {s['log_likelihood_mean'] / n_obs:.3f} | "
            f"{s['n_iter_mean']:.0f} | {s['template_distance_mean']:.3f} +- {s['template_distance_se']:.3f} |"
        )
    # scale-free comparison: the EM - MI gap per observed entry does not change when the pixels are
    # rescaled (both log-likelihoods shift by the same n_obs * log(scale)); it does depend on the noise.
    pub_gap = (PUBLISHED["em"][0] - PUBLISHED["mean_impute"][0]) / (100 * 35 * 0.5)
    sweep = []
    for noise in args.noise_sweep:
        rs = [run_once(args.seed + r, noise, args.rate, args.components, args.reg_covar, args.tol)
              for r in range(args.repeats)]
        nob = 100 * 35 * (1 - np.mean([r["realised_rate"] for r in rs]))
        gap = np.array([(r["em"]["log_likelihood"] - r["mean_impute"]["log_likelihood"]) / nob for r in rs])
        sweep.append((noise, float(gap.mean()), float(gap.std(ddof=1) / np.sqrt(gap.size)),
                      float(np.mean([r["em"]["n_iter"] for r in rs])),
                      float(np.mean([r["mean_impute"]["n_iter"] for r in rs]))))
    result["noise_sweep"] = [dict(zip(("noise", "gap_per_entry", "gap_se", "em_passes", "mi_passes"), row))
                             for row in sweep]
    (args.out / "digits_5x7.json").write_text(json.dumps(result, indent=2, default=str))
    lines += [
        "",
        "Scale-free comparison: (log-likelihood of EM - log-likelihood of MI) per observed entry, against the noise "
        f"sd (the published numbers give {pub_gap:.2f} nats per entry, assuming 1750 observed entries):",
        "",
        "| noise sd | EM - MI per observed entry (mean +- s.e.) | EM passes | MI passes |",
        "|---|---|---|---|",
    ] + [f"| {n} | {g:.3f} +- {se:.3f} | {a:.0f} | {b:.0f} |" for n, g, se, a, b in sweep]
    lines += [
        "",
        f"Ordering: EM {'>' if em['log_likelihood_mean'] > mi['log_likelihood_mean'] else '<='} MI "
        f"(published: EM > MI). Ratio MI/EM of the log-likelihoods: {ratio:.2f} (published {pub_ratio:.2f}; a ratio "
        "is only meaningful when both are negative, which depends on the pixel scale).",
        "",
        "The absolute values cannot match: the paper does not give the noise level, the pixel scale or on which "
        "data the likelihood is computed, and a Gaussian log-likelihood shifts with the scale of the data "
        "(the published -4633 over about 1750 observed entries is about -2.6 per entry, which implies a noise sd "
        "near 3 in its units; ours is 0.2 on 0/1 templates). What is comparable is the ordering, the number of "
        "passes (paper: EM about 60, MI about 30) and the template recovery. The scale-free gap is smaller than the "
        "published one at every noise level we tried; it grows as the noise shrinks, so the paper probably used "
        "less noise relative to the template contrast, or a regulariser that lets MI's variances collapse further "
        "on imputed pixels.",
    ]
    (args.out / "digits_5x7.md").write_text("\n".join(lines) + "\n")

    # figure: templates / noisy / masked / MI means / EM means (first run)
    truth, X = runs[0]["example"]
    first = [truth[i * 10] for i in range(10)]
    masked = [X[i * 10] for i in range(10)]
    order = lambda means: [means[np.argmin(((means - t) ** 2).sum(1))] for t in digit_templates(flat=True)]  # noqa
    fig = mosaic([list(digit_templates(flat=True)), first, masked,
                  order(runs[0]["mean_impute"]["means"]), order(runs[0]["em"]["means"])])
    try:
        from PIL import Image

        args.figure.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(fig).save(args.figure)
    except ImportError:  # pillow comes with bokeh; without it only the tables are written
        pass
    print("\n".join(lines))


if __name__ == "__main__":
    main()
