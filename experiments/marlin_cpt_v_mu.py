"""marlin2008 (section 5.4; digest 2.7 and 4.1): recovering the CPT-v selection model mu.

Usage (from the repository root)::

    .venv/bin/python experiments/marlin_cpt_v_mu.py            # the committed run
    .venv/bin/python experiments/marlin_cpt_v_mu.py --quick    # 2 replicates, N = 2000 (a minute)

Writes ``results/marlin_cpt_v_mu.{md,json}`` (``--quick``: ``*_quick``).

The digest's independent check: K = 3, D = 10, V = 5, N = 8000, true mu = (0.1, 0.3, 0.5, 0.7, 0.9); EM (with the
corrected M-step and Dirichlet(2) / Beta(2, 2) priors) gave mu ~ (0.093, 0.303, 0.526, 0.697, 0.897), the
least-squares moment estimator over all 10 items (0.099, 0.304, 0.507, 0.674, 0.904), the condition number of the
first 5 x 5 block of Phi ~ 326, and the mean absolute error of the item marginals P(x_d = v) 0.0075 for MM/CPT-v
against 0.0765 for the MAR mixture. The generator of theta and beta is not given; here theta ~ Dir(5, 5, 5) and
every beta_dk ~ Dir(1, ..., 1), so condition numbers are not comparable draw for draw.

Per replicate (a new data set, new theta and beta): MM/CPT-v MAP-EM from a random start (:func:`cpt_v.fit`, at most
3000 iterations, tol 1e-8 per user) with the observed-information standard errors of mu
(:func:`cpt_v.mu_standard_errors`); the moment estimator (:func:`cpt_v.moment_estimate_details`) with 200 bootstrap
resamples of users for its standard errors, the condition number of Phi, of its best 5 x 5 block and of its first
5 x 5 block; the MAR multinomial mixture (CPT-v with mu held constant, which makes the selection factor independent
of x) for the marginal-error comparison. Across replicates: the mean estimate, the standard deviation of the
estimates (the honest sampling error) next to the mean reported standard error (its calibration).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from explorer.core.discrete import cpt_v as C  # noqa: E402
from explorer.core.discrete.ratings_data import prepare  # noqa: E402
from explorer.core.validation import BadInputError  # noqa: E402

MU = np.array([0.1, 0.3, 0.5, 0.7, 0.9])
THESIS = {"em": [0.093, 0.303, 0.526, 0.697, 0.897], "moment": [0.099, 0.304, 0.507, 0.674, 0.904],
          "first_block_cond": 326.0, "marginal_mae_cptv": 0.0075, "marginal_mae_mar": 0.0765}


def world(rng, N, D=10, V=5, K=3):
    theta = rng.dirichlet(np.full(K, 5.0))
    beta = rng.dirichlet(np.ones(V), size=(K, D))
    z = rng.choice(K, size=N, p=theta)
    x = (rng.random((N, D, 1)) > np.cumsum(beta[z], axis=2)).sum(axis=2)
    r = rng.random((N, D)) < MU[x]
    return x, r, theta, beta


def marginals(state) -> np.ndarray:
    return np.einsum("k,kdv->dv", state.weights, state.probs)


def replicate(seed: int, N: int, truth_start: bool = False, ml: bool = False) -> dict:
    rng = np.random.default_rng(seed)
    x, r, theta, beta = world(rng, N)
    true_marg = np.einsum("k,kdv->dv", theta, beta)
    data = prepare(x, response=r, available=r, n_values=5)
    t0 = time.perf_counter()
    prior = {"alpha": 1.0, "phi": 1.0, "xi1": 1.0, "xi0": 1.0} if ml else {}
    cfg = C.CPTvConfig(n_components=3, max_iter=3000, tol=1e-8, **prior)
    start = C.init_from_parameters(data, cfg, theta, beta, MU) if truth_start else None
    res = C.fit(data, cfg, rng, init_state=start)
    try:
        se = C.mu_standard_errors(res.state, data, cfg)
    except BadInputError:          # a probability at 0 (possible with flat priors): no Laplace s.e.
        se = np.full(5, np.nan)
    t_em = time.perf_counter() - t0
    mar_cfg = C.CPTvConfig(n_components=3, max_iter=3000, tol=1e-8, mu_fixed=(0.5,) * 5, **prior)
    mar_start = C.init_from_parameters(data, mar_cfg, theta, beta, np.full(5, 0.5)) if truth_start else None
    mar = C.fit(data, mar_cfg, rng, init_state=mar_start)
    mom = C.moment_estimate_details(data)
    mom_se = C.moment_bootstrap_se(data, rng, n_boot=200)
    return {
        "seed": seed, "N": N, "em_mu": res.state.mu.tolist(), "em_se": se.tolist(), "em_iter": res.n_iter,
        "em_stop": res.stop_reason, "em_seconds": t_em,
        "moment_mu": mom.mu.tolist(), "moment_se": mom_se.tolist(), "moment_valid": mom.valid,
        "cond_phi": mom.condition_number, "cond_best_block": mom.block_condition_number,
        "best_block_items": list(mom.block_items), "cond_first_block": float(np.linalg.cond(mom.phi[:5])),
        "marginal_mae_cptv": float(np.mean(np.abs(marginals(res.state) - true_marg))),
        "marginal_mae_mar": float(np.mean(np.abs(marginals(mar.state) - true_marg))),
    }


def fmt(v, nd=3):
    return "(" + ", ".join(f"{x:.{nd}f}" for x in v) + ")"


def report(runs: list[dict], N: int, command: str, variant: str = "") -> str:
    em = np.array([r["em_mu"] for r in runs])
    em_se = np.array([r["em_se"] for r in runs])
    mo = np.array([r["moment_mu"] for r in runs])
    mo_se = np.array([r["moment_se"] for r in runs])
    R = len(runs)
    lines = [
        f"# CPT-v: recovering mu (K=3, D=10, V=5, N={N}, {R} replicates{variant})", "",
        f"Command: `{command}`", "",
        f"True mu = {fmt(MU, 1)}.", "",
        "| estimator | mean over replicates | sd over replicates | mean reported s.e. | thesis-digest check (N=8000, one draw) |",
        "|---|---|---|---|---|",
        f"| MM/CPT-v MAP-EM | {fmt(em.mean(0))} | {fmt(em.std(0, ddof=1) if R > 1 else np.zeros(5))} | "
        f"{fmt(em_se.mean(0))} (observed information) | {fmt(THESIS['em'])} |",
        f"| moment, Phi [1/mu] = 1 | {fmt(mo.mean(0))} | {fmt(mo.std(0, ddof=1) if R > 1 else np.zeros(5))} | "
        f"{fmt(mo_se.mean(0))} (bootstrap) | {fmt(THESIS['moment'])} |",
        "",
        "| replicate | EM mu (+- s.e.) | moment mu (+- s.e.) | cond(Phi) | best 5x5 block | first 5x5 block | "
        "marginal MAE CPT-v / MAR | EM iterations |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        em_s = ", ".join(f"{m:.3f}+-{s:.3f}" for m, s in zip(r["em_mu"], r["em_se"]))
        mo_s = ", ".join(f"{m:.3f}+-{s:.3f}" for m, s in zip(r["moment_mu"], r["moment_se"]))
        lines.append(f"| {r['seed']} | {em_s} | {mo_s}{'' if r['moment_valid'] else ' (invalid)'} | "
                     f"{r['cond_phi']:.1f} | {r['cond_best_block']:.1f} | {r['cond_first_block']:.1f} | "
                     f"{r['marginal_mae_cptv']:.4f} / {r['marginal_mae_mar']:.4f} | {r['em_iter']} ({r['em_stop']}) |")
    cptv = np.array([r["marginal_mae_cptv"] for r in runs])
    marv = np.array([r["marginal_mae_mar"] for r in runs])
    z_em = (em - MU) / em_se
    lines += [
        "",
        f"Item-marginal MAE: MM/CPT-v {cptv.mean():.4f} +- {cptv.std(ddof=1) / np.sqrt(R) if R > 1 else 0:.4f}, "
        f"MAR mixture {marv.mean():.4f} +- {marv.std(ddof=1) / np.sqrt(R) if R > 1 else 0:.4f} "
        f"(thesis-digest check: {THESIS['marginal_mae_cptv']} vs {THESIS['marginal_mae_mar']}).",
        f"EM z-scores (mu_hat - mu) / s.e.: largest |z| {np.nanmax(np.abs(z_em)):.2f}, "
        f"rms {np.sqrt(np.nanmean(z_em ** 2)):.2f} over {np.isfinite(z_em).sum()} values (1 if the s.e. is calibrated).",
        f"Digest's first-5x5-block condition number: {THESIS['first_block_cond']} (a different theta, beta draw).",
    ]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--replicates", type=int, default=8)
    ap.add_argument("--n", type=int, default=8000)
    ap.add_argument("--truth-start", action="store_true", help="start EM at the true parameters (bias checks)")
    ap.add_argument("--ml", action="store_true", help="flat priors (alpha = phi = xi = 1): maximum likelihood")
    args = ap.parse_args(argv)
    R, N = (2, 2000) if args.quick else (args.replicates, args.n)
    runs = []
    with threadpool_limits(limits=1):
        for seed in range(R):
            runs.append(replicate(seed, N, args.truth_start, args.ml))
            print(f"replicate {seed}: EM {fmt(runs[-1]['em_mu'])}, moment {fmt(runs[-1]['moment_mu'])}", flush=True)
    extra = (" --truth-start" if args.truth_start else "") + (" --ml" if args.ml else "")
    command = "python experiments/marlin_cpt_v_mu.py" + (" --quick" if args.quick else "") + \
        ("" if args.quick or (R, N) == (8, 8000) else f" --replicates {R} --n {N}") + extra
    variant = (", EM started at the truth" if args.truth_start else "") + (", flat priors (ML)" if args.ml else "")
    out = Path(__file__).resolve().parents[1] / "results"
    stem = "marlin_cpt_v_mu" + ("_quick" if args.quick else "") + \
        ("" if args.quick or (R, N) == (8, 8000) else f"_n{N}_r{R}") + extra.replace(" --", "_").replace("-", "_")
    (out / f"{stem}.md").write_text(report(runs, N, command, variant))
    (out / f"{stem}.json").write_text(json.dumps({"N": N, "runs": runs, "thesis_digest": THESIS}, indent=1))
    print(report(runs, N, command, variant))


if __name__ == "__main__":
    main()
