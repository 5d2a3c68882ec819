"""Where one compiled EM step's time goes, part by part, on a case of ``bench_em.py`` (W1 by default).

Times (median of ``--repeats``) each part of :func:`explorer.core._compiled.gmm.estep` by calling its pieces
the way ``estep`` does, over every block of the fit's layout, at the parameters reached after ``--warm`` EM steps:
the centring pass (``_center``), the BLAS product ``R = E @ P``, the compiled pass (``_solve_block``: factors,
solves, log-densities, responsibilities, first statistic, and the conditional covariances it adds from its
factors), the scatter by ``dsyrk``, the conditional covariances left for after the pass (``_add_conditional``),
the whole ``estep``, the M-step (``suffstats.m_step`` and the precisions), and the whole ``em_gmm.step``; then
scikit-learn's ``_e_step`` + ``_m_step`` on the complete data for scale. The parts are timed apart, so their sum
differs a little from the whole (the Python glue of ``estep``, cache effects).

This is a profile, not a test: it prints a table per case and writes ``profile_em_step.{json,md}`` in ``--out``.

Usage::

    .venv/bin/python benchmarks/profile_em_step.py                    # W1, separated
    .venv/bin/python benchmarks/profile_em_step.py --case W1 --case D50 --out results
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
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_em import CASES, _sklearn, make_data  # noqa: E402


def _median(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def profile(case: str, repeats: int, warm: int, seed: int = 0, rate: float = 0.3) -> dict:
    from scipy.linalg.blas import dsyrk
    from threadpoolctl import threadpool_limits

    from explorer.core._compiled import gmm as kernels
    from explorer.core.gaussians.gaussian import precision_and_logdet
    from explorer.core.mixtures import em_gmm
    from explorer.core.mixtures.suffstats import m_step

    spec = {c[0]: c for c in CASES}[case]
    _, n, d, k, threads, spread = spec
    X, missing = make_data(n, d, k, rate, seed, spread)
    with threadpool_limits(threads):
        data = em_gmm.prepare(np.where(missing, np.nan, X))
        config = em_gmm.EMConfig(n_components=k, strategy="compiled")
        state = em_gmm.init(data, config, np.random.default_rng(seed))
        for _ in range(warm):
            state = em_gmm.step(state, data, config)
        ws = em_gmm.workspace(data, config)
        lay = ws.layout
        weights, means, covs = m_step(state.stats, reg_covar=config.reg_covar, prior=None)
        prec, logdet = precision_and_logdet(np.asarray(covs))
        logw = np.ascontiguousarray(np.log(weights)[None, :])  # (1, K): no per-row offset
        blocks = [(b, r0, min(r0 + ws.block_rows, lay.n_fit)) for b, r0 in enumerate(ws.blocks)]
        resp = np.empty((lay.X.shape[0], k))
        Tt = [ws.T[j].T for j in range(k)]

        def center():
            for b, r0, r1 in blocks:
                kernels._center(lay.X, r0, r1, means, lay.run_start, lay.mis_ptr, lay.mis_idx, ws.block_run[b], ws.E)

        def product():
            for _, r0, r1 in blocks:
                np.matmul(ws.E[:, : r1 - r0], prec, out=ws.R[:, : r1 - r0])

        def centred_blocks():  # E and R of every block, kept, so that the compiled pass can be timed alone
            out = []
            for b, r0, r1 in blocks:
                kernels._center(lay.X, r0, r1, means, lay.run_start, lay.mis_ptr, lay.mis_idx, ws.block_run[b], ws.E)
                np.matmul(ws.E[:, : r1 - r0], prec, out=ws.R[:, : r1 - r0])
                out.append((ws.E.copy(), ws.R.copy()))
            return out

        saved = centred_blocks()

        def solve():
            W, nk, S = np.zeros_like(ws.W), np.zeros(k), np.zeros((k, d))
            C, Wd = np.zeros_like(ws.C), np.zeros_like(ws.Wd)
            for (b, r0, r1), (E, R) in zip(blocks, saved):
                ws.E[...] = E  # the pass writes E in place
                kernels._solve_block(r0, r1, lay.run_start, lay.mis_ptr, lay.mis_idx, ws.block_run[b], prec, logdet,
                                     logw, ws.E, R, lay.perm, resp, W, nk, S, ws.LK, ws.tK, ws.ll, ws.invK, ws.dK,
                                     ws.sc, ws.kv, ws.LK1, ws.LTK1, ws.vK1, ws.rowll, np.zeros(k + 1), ws.QK, C, Wd,
                                     True, ws.Linv, ws.lanes)

        def copies():  # the E copies of ``solve`` alone, subtracted from it
            for E, _ in saved:
                ws.E[...] = E

        def scatter():
            for _, r0, r1 in blocks:
                for j in range(k):
                    dsyrk(1.0, ws.E[j, : r1 - r0].T, beta=1.0, c=Tt[j], trans=0, lower=1, overwrite_c=1)

        nk, _, second, *_ = kernels.estep(ws, weights, means, prec, logdet)
        W = ws.W - ws.Wd  # what the pass left for _add_conditional
        thresh = kernels.SKIP_RTOL * nk / max(lay.n_runs_missing, 1)

        def conditional():
            T = second.copy()
            kernels._add_conditional(lay.mis_ptr, lay.mis_idx, prec, W, thresh, T, ws.L1, ws.LT1, ws.Linv, ws.v1[0],
                                     ws.v1[1], ws.LK, ws.QK, ws.invK, ws.dK, ws.sc, ws.kv)

        def mstep():
            w, m, c = m_step(state.stats, reg_covar=config.reg_covar, prior=None)
            precision_and_logdet(np.asarray(c))

        sklearn_step = _sklearn(X, k, seed)

        parts = {
            "centring (_center)": center,
            "R = E @ P (BLAS)": product,
            "compiled pass (_solve_block)": solve,
            "scatter (dsyrk)": scatter,
            "conditional covariances after the pass (_add_conditional)": conditional,
            "M-step and precisions": mstep,
        }
        out = {name: _median(fn, repeats) for name, fn in parts.items()}
        out["compiled pass (_solve_block)"] -= _median(copies, repeats)
        out["whole E-step (estep)"] = _median(lambda: kernels.estep(ws, weights, means, prec, logdet), repeats)
        holder = {"s": state}

        def whole_step():
            holder["s"] = em_gmm.step(holder["s"], data, config)

        out["whole EM step (em_gmm.step)"] = _median(whole_step, repeats)
        out["scikit-learn step, complete data"] = _median(sklearn_step, repeats)
    return {"case": case, "n_samples": n, "n_features": d, "n_components": k, "blas_threads": threads,
            "n_runs": int(lay.n_runs), "block_rows": int(ws.block_rows), "pairs_added": int(ws.last_pairs_added),
            "seconds": out}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--case", action="append", choices=[c[0] for c in CASES],
                    help="a case of bench_em.py (repeat for several; default W1)")
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--warm", type=int, default=10, help="EM steps before timing (parameters away from the start)")
    ap.add_argument("--out", type=Path, default=None, help="write profile_em_step.{json,md} there")
    args = ap.parse_args(argv)
    cases = args.case or ["W1"]
    results = [profile(case, args.repeats, args.warm) for case in cases]
    command = ("`.venv/bin/python benchmarks/profile_em_step.py " + " ".join(f'--case "{c}"' for c in cases)
               + f" --repeats {args.repeats}`")
    parts = [f"Command: {command} (Python {platform.python_version()}, numpy {np.__version__}, one BLAS thread; 30 % "
             f"MCAR; median of {args.repeats}, each part timed apart, at the parameters after {args.warm} EM "
             "steps)\n"]
    for res in results:
        sec = res["seconds"]
        whole = sec["whole E-step (estep)"]
        lines = ["| part | ms | share of the E-step |", "|---|---|---|"]
        lines += [f"| {name} | {1e3 * v:.2f} | {v / whole:.0%} |" for name, v in sec.items()]
        parts.append(f"## {res['case']}: {res['n_samples']:,} x {res['n_features']}, K = {res['n_components']}\n\n"
                     f"{res['n_runs']:,} runs (rows sharing a pattern), blocks of {res['block_rows']} rows, "
                     f"{res['pairs_added']:,} (run, component) conditional covariances added after the pass.\n\n"
                     + "\n".join(lines) + "\n")
    text = "\n".join(parts)
    print(text)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "profile_em_step.json").write_text(json.dumps({"command": command, "cases": results}, indent=2))
        (args.out / "profile_em_step.md").write_text(text)


if __name__ == "__main__":
    main()
