"""Peers on missing data: pygmmis and pomegranate against explorer's EM and scikit-learn (complete data).

Issue 11. Two libraries that fit Gaussian mixtures and say something about incomplete data:

* **pygmmis** (Melchior & Goulding 2018) targets *truncated* data (a selection function, handled by
  imputing samples drawn from the model) and *noisy* data (per-sample noise covariances, extreme
  deconvolution after Bovy et al. 2011). Missing features are accepted as NaN: ``pygmmis.fit`` sets
  them to 0 and adds a variance of 1e10 on their diagonal entries of a per-sample noise covariance
  (shape (N, D, D)), so every EM step inverts one D x D matrix per sample and component. This script
  times that EM step (``pygmmis._EMstep``, called with exactly the arguments ``fit`` passes it)
  on the same NaN data as explorer, and checks on a small problem that it converges to the same
  parameters as explorer's EM from the same start.
* **pomegranate** 1.x (torch) takes missing values as ``torch.masked.MaskedTensor``. The script
  records what its ``GeneralMixtureModel`` of ``Normal(covariance_type="full")`` and ``"diag"`` do on
  such a tensor (exception text, or the log-likelihood reached against explorer's EM from the same
  start). It is not timed: the full-covariance mixture does not run on missing data.

Timing (as ``bench_em.py``): one EM iteration (E-step + M-step) of explorer's
:func:`explorer.core.mixtures.em_gmm.step` and of pygmmis on the data with 30 % MCAR missing, and of
scikit-learn's ``GaussianMixture`` (``_e_step`` + ``_m_step``) on the complete matrix; interleaved in
one run (drifts of the machine load hit all alike), one BLAS thread, median over ``--repeats``.
pygmmis is timed twice: serially in this process (its ``parmap`` calls given an in-process pool:
one core, comparable with the others) and with the ``multiprocessing.Pool()`` that ``pygmmis.fit``
creates itself (one process per core; it pickles the data and the (N, D, D) covariances to the
workers at every step).

This is a benchmark, not a test: it prints and writes numbers, it asserts nothing. It needs the
peers installed, which the project does not depend on; use a separate environment::

    python3 -m venv /work/peers-venv
    /work/peers-venv/bin/pip install torch==2.13.0      # first: the CPU build on this machine's disk
    /work/peers-venv/bin/pip install numpy scipy scikit-learn threadpoolctl pygmmis pomegranate
    /work/peers-venv/bin/python benchmarks/bench_peers.py            # W1, writes results/bench_peers.{json,md}
    /work/peers-venv/bin/python benchmarks/bench_peers.py --quick    # N=5,000, writes *_quick.*

A peer that does not import is skipped with the reason printed. explorer is imported from this
repository (or from ``--explorer-root``, e.g. an exported commit, so that uncommitted edits in a
shared work tree do not enter the numbers).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import shlex
import subprocess
import sys
import time
import traceback
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

W1 = (20_000, 10, 5)
QUICK = (5_000, 10, 5)
CHECK = (2_000, 5, 3)  # small problem for the convergence check
PYGMMIS_LARGE = 1e10  # the variance pygmmis.fit puts on a missing coordinate (pygmmis 1.2.3, fit())


def version(dist):
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def try_import(name):
    try:
        return __import__(name), None
    except Exception as exc:  # a peer that does not import is skipped, with the reason
        return None, f"{type(exc).__name__}: {exc}"


def git_info(path):
    try:
        commit = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True,
                                check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(path), "status", "--porcelain", "--", "explorer"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return {"commit": commit, "explorer_dirty": bool(dirty)}
    except Exception:
        return {"commit": None, "explorer_dirty": None}


# --------------------------------------------------------------------------------------------- pygmmis
class SerialPool:
    """Stands in for the multiprocessing pool that pygmmis hands to ``parmap``: runs the tasks here."""

    class _Result:
        def __init__(self, value):
            self.value = value

        def get(self, timeout=None):
            return self.value

    def map_async(self, func, iterable, chunksize=None):
        return self._Result([func(item) for item in iterable])


class PygmmisRun:
    """pygmmis's EM on data with NaN, set up as ``pygmmis.fit`` sets it up, stepped one iteration at a time.

    ``fit`` (pygmmis 1.2.3) replaces NaN by 0 and builds per-sample noise covariances (N, D, D), zero
    except ``1e10`` on the missing coordinates' diagonal, then loops ``_EM`` -> ``_EMstep`` with
    ``R=None, sel_callback=None, background=None, w=0, cutoff=None`` (its defaults). :meth:`step` is
    one such ``_EMstep`` (E-step, M-step, update of ``gmm`` in place).
    """

    def __init__(self, pygmmis, Xnan, weights, means, covariances, pool):
        self.pg = pygmmis
        N, D = Xnan.shape
        K = len(weights)
        missing = np.isnan(Xnan)
        self.data = pygmmis.createShared(np.where(missing, 0.0, Xnan))
        covar = np.zeros((N, D, D))
        for d in range(D):  # as fit(): the diagonal entry of every missing coordinate gets the large variance
            covar[missing[:, d], d, d] += PYGMMIS_LARGE
        self.covar = pygmmis.createShared(covar)
        self.gmm = pygmmis.GMM(K=K, D=D)
        self.gmm.amp[:] = weights
        self.gmm.mean[:] = means
        self.gmm.covar[:] = covariances
        self.log_S = pygmmis.createShared(np.zeros(N))
        self.log_p = [[] for _ in range(K)]
        self.T_inv = [None] * K
        self.U = [None] * K
        self.changeable = {"amp": slice(None), "mean": slice(None), "covar": slice(None)}
        self.pool = pool
        _, self.chunksize = self.gmm._mp_chunksize()
        self.N = N
        self.n_missing = int(missing.sum())

    def step(self):
        log_L, *_ = self.pg._EMstep(self.gmm, self.log_p, self.U, self.T_inv, self.log_S, self.N, self.data,
                                    covar=self.covar, R=None, sel_callback=None, omega=None, covar_callback=None,
                                    background=None, p_bg=None, w=0.0, pool=self.pool, chunksize=self.chunksize,
                                    cutoff=None, tol=1e-3, changeable=self.changeable, it=0)
        return log_L  # at the parameters before this step's update, with the 1e10 variances' constant in it

    def parameters(self):
        return self.gmm.amp.copy(), self.gmm.mean.copy(), self.gmm.covar.copy()


# ------------------------------------------------------------------------------------------------ timing
def bench_case(em_gmm, make_data, n, d, k, rate, repeats, seed, pygmmis, pool_modes):
    from sklearn.mixture import GaussianMixture

    X, missing = make_data(n, d, k, rate, seed)
    Xm = np.where(missing, np.nan, X)
    data = em_gmm.prepare(Xm)
    config = em_gmm.EMConfig(n_components=k, covariance_type="full", tol=0.0, max_iter=repeats + 2)
    state0 = em_gmm.init(data, config, np.random.default_rng(seed))
    holder = {"s": em_gmm.step(state0, data, config)}  # warm-up

    def ours():
        holder["s"] = em_gmm.step(holder["s"], data, config)

    gm = GaussianMixture(k, covariance_type="full", max_iter=2, tol=0.0, random_state=seed, init_params="k-means++")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gm.fit(X)

    def sk():
        _, log_resp = gm._e_step(X)
        gm._m_step(X, log_resp)

    sk()  # warm-up
    fns = {"explorer": ours, "sklearn_complete": sk}
    pools = []
    if pygmmis is not None:
        for mode in pool_modes:
            if mode == "serial":
                pool = SerialPool()
            else:
                import multiprocessing

                pool = multiprocessing.Pool()  # what pygmmis.fit creates: processes = os.cpu_count()
                pools.append(pool)
            # same start as explorer's (its k-means initialisation)
            run = PygmmisRun(pygmmis, Xm, state0.weights, state0.means, state0.full_covariances(), pool)
            run.step()  # warm-up
            fns[f"pygmmis_{mode}"] = run.step
    times = {name: [] for name in fns}
    try:
        for _ in range(repeats):  # interleaved, so that drifts in machine load hit all alike
            for name, fn in fns.items():
                t = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t)
    finally:
        for pool in pools:
            pool.terminate()
    med = {name: float(np.median(v)) for name, v in times.items()}
    row = {"n_samples": n, "n_features": d, "n_components": k, "missing_rate": float(missing.mean()),
           "n_patterns": int(data.patterns.n_patterns), "seconds_per_iter": med, "all_seconds": times,
           "ratio_to_sklearn_complete": {name: med[name] / med["sklearn_complete"] for name in med},
           "ratio_to_explorer": {name: med[name] / med["explorer"] for name in med},
           # ratios within each repeat (the timings of one repeat are adjacent in time): their spread
           "paired_ratio_range_to_sklearn_complete": {
               name: [float(min(r)), float(max(r))] for name in med
               for r in [np.array(times[name]) / np.array(times["sklearn_complete"])]}}
    return row


# ------------------------------------------------------------------------------------ convergence check
def match_components(means_a, means_b):
    from scipy.optimize import linear_sum_assignment

    cost = ((means_a[:, None, :] - means_b[None, :, :]) ** 2).sum(-1)
    return linear_sum_assignment(cost)[1]  # b[perm] lines up with a


def compare(em_gmm, data, cov_type, ref, other):
    """Observed-data log-likelihoods (explorer's formula for both) and parameter differences."""
    w1, m1, c1 = ref
    w2, m2, c2 = other
    perm = match_components(m1, m2)
    w2, m2, c2 = w2[perm], m2[perm], c2[perm]
    w2_sum = float(w2.sum())
    w2 = w2 / w2_sum  # pomegranate's weights sum to 1 only to float32 precision: renormalised for the likelihood
    ll1 = float(em_gmm.observed_log_likelihood(data, w1, m1, c1, cov_type).sum())
    ll2 = float(em_gmm.observed_log_likelihood(data, w2, m2, c2, cov_type).sum())
    return {"loglik_explorer": ll1, "loglik_peer": ll2, "loglik_diff_peer_minus_explorer": ll2 - ll1,
            "max_abs_diff_weights": float(np.abs(w1 - w2).max()), "max_abs_diff_means": float(np.abs(m1 - m2).max()),
            "max_abs_diff_covariances": float(np.abs(c1 - c2).max()),
            "max_abs_covariance": float(np.abs(c1).max()), "peer_weights_sum_before_renormalising": w2_sum}


def start_state(em_gmm, data, config, seed):
    """explorer's k-means starting parameters, with the E-step recomputed at them.

    (``init``'s own state carries the k-means partition's statistics, so its first step is not an EM
    step from those parameters; a peer started from the same parameters would differ at iteration 1.)
    """
    s = em_gmm.init(data, config, np.random.default_rng(seed))
    return em_gmm.init_from_parameters(data, config, s.weights, s.means, s.covariances)


def explorer_run(em_gmm, data, config, state, iters, checkpoints):
    lls = {}
    for it in range(1, iters + 1):
        state = em_gmm.step(state, data, config)
        if it in checkpoints:
            lls[it] = float(state.log_likelihood)
    return state, lls


def one_step_pygmmis(em_gmm, pygmmis, X, missing, config, seed):
    """One step of each from the same parameters, on the rows with something observed.

    Shows what differs from EM's M-step: pygmmis's covariance update is the scatter about the
    *previous* mean (``_Msums``: ``b_k -= gmm.mean[k]`` before ``_update``), i.e. EM's covariance plus
    (mu_new - mu_old)(mu_new - mu_old)^T. (It also keeps rows with nothing observed, whose
    responsibilities are the current weights; explorer leaves them out. Neither changes the fixed points.)
    """
    keep = ~missing.all(axis=1)
    Xm = np.where(missing, np.nan, X)[keep]
    data = em_gmm.prepare(Xm)
    s0 = start_state(em_gmm, data, config, seed)
    s1 = em_gmm.step(s0, data, config)
    run = PygmmisRun(pygmmis, Xm, s0.weights, s0.means, s0.covariances, SerialPool())
    run.step()
    w, m, c = run.parameters()
    shift = m - s0.means
    return {"rows_with_nothing_observed_dropped": int((~keep).sum()),
            "max_abs_diff_weights": float(np.abs(w - s1.weights).max()),
            "max_abs_diff_means": float(np.abs(m - s1.means).max()),
            "max_abs_diff_covariances": float(np.abs(c - s1.covariances).max()),
            "max_abs_diff_covariances_less_mean_shift_outer": float(
                np.abs(c - s1.covariances - np.einsum("ki,kj->kij", shift, shift)).max()),
            "max_abs_mean_shift": float(np.abs(shift).max())}


def check_pygmmis(em_gmm, make_data, pygmmis, rate, seed, iters):
    n, d, k = CHECK
    X, missing = make_data(n, d, k, rate, seed + 1)
    Xm = np.where(missing, np.nan, X)
    data = em_gmm.prepare(Xm)
    config = em_gmm.EMConfig(n_components=k, covariance_type="full", reg_covar=0.0, tol=0.0, max_iter=iters)
    state0 = start_state(em_gmm, data, config, seed)
    checkpoints = sorted({1, 10, 100, iters})
    state, ll_ours = explorer_run(em_gmm, data, config, state0, iters, checkpoints)
    run = PygmmisRun(pygmmis, Xm, state0.weights, state0.means, state0.full_covariances(), SerialPool())
    ll_peer, reported = {}, {}
    for it in range(1, iters + 1):
        log_L = run.step()  # log_L is at the parameters before the update
        if it - 1 in checkpoints:
            reported[it - 1] = float(log_L)
        if it in checkpoints:
            ll_peer[it] = float(em_gmm.observed_log_likelihood(data, *run.parameters(), "full").sum())
    out = compare(em_gmm, data, "full", (state.weights, state.means, state.covariances), run.parameters())
    out["one_step"] = one_step_pygmmis(em_gmm, pygmmis, X, missing, config, seed)
    # pygmmis's own log-likelihood counts each missing coordinate as an observation 0 ~ N(mu, Sigma + 1e10):
    # about -0.5 log(2 pi 1e10) per missing entry more than the observed-data log-likelihood.
    const = -0.5 * np.log(2 * np.pi * PYGMMIS_LARGE) * run.n_missing
    out.update({"n_samples": n, "n_features": d, "n_components": k, "iterations": iters,
                "missing_rate": float(missing.mean()), "reg_covar_explorer": 0.0, "w_pygmmis": 0.0,
                "loglik_by_iteration_explorer": ll_ours, "loglik_by_iteration_peer": ll_peer,
                "pygmmis_reported_loglik_minus_constant": {it: v - const for it, v in reported.items()},
                "pygmmis_constant_per_missing_entry": float(-0.5 * np.log(2 * np.pi * PYGMMIS_LARGE))})
    return out


# ------------------------------------------------------------------------------------------ pomegranate
def _error(exc):
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "pomegranate" in f.filename]
    where = None
    if frames:
        f = frames[-1]
        where = f"{f.filename.split('site-packages/')[-1]}:{f.lineno} ({f.name}): {f.line}"
    msg = str(exc).strip().splitlines()
    return {"ok": False, "error": f"{type(exc).__name__}: {msg[0] if msg else ''}", "error_full": str(exc),
            "raised_at_pomegranate_line": where}


def probe_pomegranate(em_gmm, make_data, rate, seed, iters):
    import torch
    from pomegranate.distributions import Normal
    from pomegranate.gmm import GeneralMixtureModel

    n, d, k = CHECK
    X, missing = make_data(n, d, k, rate, seed + 1)
    Xm = np.where(missing, np.nan, X)
    data = em_gmm.prepare(Xm)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "The PyTorch API of MaskedTensors is in prototype stage ..."
        masked = torch.masked.MaskedTensor(torch.tensor(np.where(missing, 0.0, X)), mask=torch.tensor(~missing))
    nan_tensor = torch.tensor(Xm)
    out = {"n_samples": n, "n_features": d, "n_components": k, "missing_rate": float(missing.mean()),
           "dtype": "float64"}

    def attempt(make_model, X_in, fit_kwargs=None):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = make_model().fit(X_in, **(fit_kwargs or {}))
            return {"ok": True}, model
        except Exception as exc:
            return _error(exc), None

    def mixture(cov_type, start=None, max_iter=iters, tol=0.1):
        if start is None:
            dists = [Normal(covariance_type=cov_type) for _ in range(k)]
            return GeneralMixtureModel(dists, max_iter=max_iter, tol=tol, random_state=seed)
        w, m, c = start
        dists = [Normal(means=torch.tensor(m[j]), covs=torch.tensor(c[j]), covariance_type=cov_type)
                 for j in range(k)]
        return GeneralMixtureModel(dists, priors=torch.tensor(w), max_iter=max_iter, tol=tol)

    for cov_type in ("full", "diag"):
        config = em_gmm.EMConfig(n_components=k, covariance_type=cov_type, reg_covar=0.0, tol=0.0, max_iter=iters)
        state0 = start_state(em_gmm, data, config, seed)
        start = (state0.weights, state0.means, state0.covariances)
        res = {}
        res["masked_default_init"], _ = attempt(lambda: mixture(cov_type), masked)
        res["nan_tensor_default_init"], _ = attempt(lambda: mixture(cov_type), nan_tensor)
        # from explorer's start, a fixed number of iterations (tol=-inf: never stops early)
        r, model = attempt(lambda: mixture(cov_type, start, tol=-np.inf), masked)
        if r["ok"]:
            state, _ = explorer_run(em_gmm, data, config, state0, iters, {iters})
            w = model.priors.detach().numpy().astype(float)
            m = np.stack([dist.means.detach().numpy() for dist in model.distributions]).astype(float)
            c = np.stack([dist.covs.detach().numpy() for dist in model.distributions]).astype(float)
            r.update(compare(em_gmm, data, cov_type, (state.weights, state.means, state.covariances), (w, m, c)))
            r["iterations"] = iters
        res["masked_from_explorer_start"] = r
        out[cov_type] = res
    return out


# ---------------------------------------------------------------------------------------------- report
def blas_info():
    try:
        from threadpoolctl import threadpool_info

        return [{k: v for k, v in info.items() if k in ("internal_api", "version", "num_threads", "architecture")}
                for info in threadpool_info()]
    except Exception as exc:  # informational only
        return [repr(exc)]


def fmt_err(r):
    return f"`{r['error']}`" + (f" (raised at `{r['raised_at_pomegranate_line']}`)" if r.get("raised_at_pomegranate_line") else "")


def write_md(path, res, args):
    meta = res["meta"]
    lines = [f"Command: `{meta['command']}`", "",
             "Rerun: `/work/peers-venv/bin/python benchmarks/bench_peers.py` (set-up of that environment in the "
             "script's docstring; `--quick` for N=5,000).", ""]
    lines.append(
        f"Median of {args.repeats} interleaved iterations, {args.threads} BLAS thread(s). Versions: "
        + ", ".join(f"{k} {v}" for k, v in meta["versions"].items() if v) + f"; Python {meta['python']}. "
        f"explorer from `{meta['explorer_root']}` ({meta['explorer_label']}).")
    lo = meta["loadavg_before"], meta["loadavg_after"]
    lines.append("")
    lines.append(
        f"Machine: {meta['cpu_count']} cores shared with other sessions; 1-minute load average {lo[0][0]:.2f} before, "
        f"{lo[1][0]:.2f} after the timings"
        + (" -- **timings taken on a loaded machine**: absolute seconds are inflated and noisy; the ratios within "
           "one interleaved run are what count." if max(lo[0][0], lo[1][0]) > 1.0 else ".")
        + " pygmmis with its own pool uses every core, the other rows one; on a loaded 2-core machine that "
        "parallel row is the least reliable.")
    lines.append("")
    for case in res["cases"]:
        s, r1, r2 = case["seconds_per_iter"], case["ratio_to_sklearn_complete"], case["ratio_to_explorer"]
        lines.append(f"**N={case['n_samples']:,}, D={case['n_features']}, K={case['n_components']}, "
                     f"{case['missing_rate']:.0%} MCAR** ({case['n_patterns']:,} missingness patterns)")
        lines.append("")
        lines.append("| one EM iteration of | data | s/iter | / scikit-learn complete | / explorer |")
        lines.append("|---|---|---|---|---|")
        desc = {"sklearn_complete": ("scikit-learn GaussianMixture (`_e_step` + `_m_step`)", "complete"),
                "explorer": ("explorer `em_gmm.step`", "missing (NaN)"),
                "pygmmis_serial": ("pygmmis `_EMstep`, in-process (1 core)", "missing (NaN -> 1e10 variance)"),
                "pygmmis_pool": ("pygmmis `_EMstep`, its own `multiprocessing.Pool()`", "missing (NaN -> 1e10 variance)")}
        for name in s:
            lines.append(f"| {desc[name][0]} | {desc[name][1]} | {s[name]:.4f} | {r1[name]:.2f} | {r2[name]:.2f} |")
        lines.append("")
        rng_ = case["paired_ratio_range_to_sklearn_complete"]
        lines.append("Ratio to scikit-learn within each repeat (min - max over the repeats): "
                     + "; ".join(f"{name} {lo:.1f} - {hi:.1f}" for name, (lo, hi) in rng_.items()
                                 if name != "sklearn_complete") + ".")
        if "pygmmis_serial" in s and (case["n_samples"], case["n_features"], case["n_components"]) == W1:
            lines.append("")
            lines.append(
                f"Issue 11 quotes pygmmis as 48x slower than scikit-learn-complete on W1 from an earlier measurement "
                f"whose protocol is not recorded; this run, same data generator, one EM step each, gives "
                f"{r1['pygmmis_serial']:.0f}x in-process and {r1.get('pygmmis_pool', float('nan')):.0f}x with its own "
                "pool. pygmmis's time is numpy einsum loops (no BLAS), so it does not gain from more BLAS threads "
                "while scikit-learn does: a multi-threaded or less loaded measurement moves this ratio.")
        lines.append("")
    for name, reason in res["skipped"].items():
        lines.append(f"Skipped {name}: {reason}")
        lines.append("")

    lines.append("## pygmmis")
    lines.append("")
    lines.append(
        "pygmmis has no missing-data model of its own: `pygmmis.fit` accepts NaN and turns each missing entry into "
        "an observation 0 with noise variance 1e10 (a per-sample noise covariance of shape (N, D, D), zero except on "
        "the missing coordinates' diagonal), then runs its extreme-deconvolution EM (Bovy et al. 2011). Each step "
        "inverts T = Sigma_k + S_i for every sample and component (`np.linalg.inv` on an (N, D, D) stack, kept in "
        "memory for the M-step) and forms b = mu + Sigma T^-1 (x - mu) and B = Sigma - Sigma T^-1 Sigma with "
        "three-operand `np.einsum` calls that numpy evaluates without contraction-order optimisation, i.e. as "
        "O(N D^4) loops per component; a profile of one step at N=5,000, D=10, K=5 put 85 % of its time in those "
        "einsums and 9 % in the inverses. This happens for every row, complete or not; explorer groups the rows by "
        "missingness pattern and factors once per pattern and component. With 1e10 standing in for infinity this is "
        "Ghahramani & Jordan's EM up to terms of order 1e-10 (the missing coordinate's conditional mean is pulled "
        "towards 0 by Sigma_mm / 1e10). Its truncation machinery (`sel_callback`, imputation samples) is for "
        "selection, not for missing features, and its default convergence test is a relative change of 1e-3 in the "
        "total log-likelihood.")
    lines.append("")
    chk = res.get("pygmmis_check")
    if chk:
        its = sorted(chk["loglik_by_iteration_explorer"], key=int)
        trail = "; ".join(f"{it}: {chk['loglik_by_iteration_explorer'][it]:.4f} vs "
                          f"{chk['loglik_by_iteration_peer'][it]:.4f}" for it in its)
        lines.append(
            f"Convergence check (N={chk['n_samples']:,}, D={chk['n_features']}, K={chk['n_components']}, "
            f"{chk['missing_rate']:.0%} MCAR, both from explorer's k-means start, no regularisation, "
            f"{chk['iterations']} iterations): observed-data log-likelihood (explorer's formula) after iteration "
            f"explorer vs pygmmis -- {trail}. After {chk['iterations']}: difference "
            f"{chk['loglik_diff_peer_minus_explorer']:+.3g}; largest parameter differences: weights "
            f"{chk['max_abs_diff_weights']:.2g}, means {chk['max_abs_diff_means']:.2g}, covariances "
            f"{chk['max_abs_diff_covariances']:.2g} (largest covariance entry {chk['max_abs_covariance']:.3g}). "
            f"pygmmis's own reported log-likelihood carries {chk['pygmmis_constant_per_missing_entry']:.3f} per "
            "missing entry (the density of 0 under the 1e10 variance); less that constant it reads "
            + "; ".join(f"{it}: {v:.4f}" for it, v in sorted(chk["pygmmis_reported_loglik_minus_constant"].items(),
                                                             key=lambda t: int(t[0])))
            + " -- the same numbers: pygmmis reports the observed-data log-likelihood up to that constant.")
        o = chk["one_step"]
        lines.append("")
        lines.append(
            "Its step is not exactly EM's, though the fixed points are the same (hence the agreement above and the "
            "small gap at iteration 1): (a) the covariance update is the scatter about the *previous* mean "
            "(`_Msums` subtracts `gmm.mean[k]` before `_update` moves it), i.e. EM's covariance plus "
            "(mu_new - mu_old)(mu_new - mu_old)^T; (b) rows with nothing observed stay in the sums with the current "
            "weights and means as their responsibilities and expectations, where explorer leaves them out. Measured "
            f"on one step from the same start with the {o['rows_with_nothing_observed_dropped']} empty rows dropped: "
            f"weights agree to {o['max_abs_diff_weights']:.1g}, means to {o['max_abs_diff_means']:.1g}, covariances "
            f"differ by up to {o['max_abs_diff_covariances']:.2g} and by {o['max_abs_diff_covariances_less_mean_shift_outer']:.1g} "
            "once the mean-shift outer product is taken off.")
        lines.append("")
    elif "pygmmis" in res["skipped"]:
        pass

    lines.append("## pomegranate")
    lines.append("")
    pom = res.get("pomegranate")
    if pom:
        full, diag = pom["full"], pom["diag"]
        lines.append(
            "pomegranate 1.x takes missing values only as a `torch.masked.MaskedTensor` (mask True = observed); NaN in "
            "a plain tensor is not treated as missing (its k-means initialisation on NaN leaves a component with no "
            "rows, hence the IndexError below). Its `Normal` has no marginalisation for the full covariance: "
            "`log_probability` multiplies X by the inverse covariance and `summarize` accumulates X^T W X, neither of "
            "which MaskedTensor supports. The diagonal `Normal` works coordinate by coordinate, so the masked entries "
            "just drop out of the sums: the log-density is the observed coordinates' marginal, and the M-step is the "
            "available-case update (weighted means and variances over the observed entries of each column). That is "
            "not the EM M-step (which would fill a missing entry with the component mean and add its variance) but "
            "has the same fixed points.")
        lines.append("")
        lines.append(f"Observed on N={pom['n_samples']:,}, D={pom['n_features']}, K={pom['n_components']}, "
                     f"{pom['missing_rate']:.0%} MCAR, float64:")
        lines.append("")
        for cov, r in (("full", full), ("diag", diag)):
            for key, label in (("masked_default_init", "MaskedTensor, default (k-means) initialisation"),
                               ("masked_from_explorer_start", "MaskedTensor, started from explorer's initial "
                                                              "parameters (skips its k-means)"),
                               ("nan_tensor_default_init", "plain tensor with NaN")):
                x = r[key]
                if x["ok"] and "loglik_explorer" in x:
                    txt = (f"fits; after {x['iterations']} iterations its observed-data log-likelihood is "
                           f"{x['loglik_peer']:.4f} against explorer's diagonal EM {x['loglik_explorer']:.4f} "
                           f"(difference {x['loglik_diff_peer_minus_explorer']:+.3g}; largest parameter differences: "
                           f"weights {x['max_abs_diff_weights']:.2g}, means {x['max_abs_diff_means']:.2g}, variances "
                           f"{x['max_abs_diff_covariances']:.2g}); its mixing weights summed to "
                           f"{x['peer_weights_sum_before_renormalising']:.10f} even with float64 inputs (float32 "
                           "precision somewhere in its weight update) and were renormalised before computing the "
                           "log-likelihood (unnormalised, they add N log(sum) to it)")
                elif x["ok"]:
                    txt = "fits (no error)"
                else:
                    txt = "fails: " + fmt_err(x)
                lines.append(f"- `Normal(covariance_type=\"{cov}\")`, {label}: {txt}.")
        lines.append("")
    lines.append("Numbers in `bench_peers.json` (all repeats, per-iteration log-likelihoods, full error texts).")
    path.write_text("\n".join(lines) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help=f"N={QUICK[0]:,} instead of W1 (N={W1[0]:,})")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--rate", type=float, default=0.3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--check-iters", type=int, default=200, help="iterations of the small convergence checks")
    ap.add_argument("--pygmmis-pool", choices=["serial", "pool", "both"], default="both")
    ap.add_argument("--threads", type=int, default=1, help="BLAS threads (default 1)")
    ap.add_argument("--out", type=Path, default=ROOT / "results")
    ap.add_argument("--explorer-root", type=Path, default=ROOT,
                    help="directory holding the explorer package to measure (default: this repository)")
    ap.add_argument("--explorer-label", default=None, help="how to name --explorer-root in the report")
    args = ap.parse_args(argv)

    sys.path.insert(0, str(args.explorer_root))
    from explorer.core.mixtures import em_gmm  # noqa: E402

    sys.path.insert(1, str(ROOT / "benchmarks"))
    from bench_em import make_data  # noqa: E402  (same generator as bench_em.py; explorer already imported)
    from threadpoolctl import threadpool_limits

    gi = git_info(args.explorer_root) if (Path(args.explorer_root) / ".git").exists() else {}
    label = args.explorer_label or (f"commit {gi.get('commit', '?')[:10]}"
                                    + (" plus uncommitted edits in explorer/" if gi.get("explorer_dirty") else ""))
    skipped = {}
    pygmmis, why = try_import("pygmmis")
    if pygmmis is None:
        skipped["pygmmis"] = why
        print(f"skipping pygmmis: {why}", flush=True)
    pomegranate, why = try_import("pomegranate")
    if pomegranate is None:
        skipped["pomegranate"] = why
        print(f"skipping pomegranate: {why}", flush=True)

    modes = ["serial", "pool"] if args.pygmmis_pool == "both" else [args.pygmmis_pool]
    n, d, k = QUICK if args.quick else W1
    load_before = os.getloadavg()
    with threadpool_limits(limits=args.threads):
        case = bench_case(em_gmm, make_data, n, d, k, args.rate, args.repeats, args.seed, pygmmis, modes)
    load_after = os.getloadavg()
    s, r1, r2 = case["seconds_per_iter"], case["ratio_to_sklearn_complete"], case["ratio_to_explorer"]
    print(f"N={n} D={d} K={k}, {case['missing_rate']:.0%} missing, load {load_before[0]:.2f} -> {load_after[0]:.2f}")
    for name in s:
        print(f"  {name:18s} {s[name]:8.4f} s/iter   / sklearn-complete {r1[name]:7.2f}   / explorer {r2[name]:7.2f}",
              flush=True)

    res = {"cases": [case], "skipped": skipped}
    with threadpool_limits(limits=args.threads):
        if pygmmis is not None:
            chk = check_pygmmis(em_gmm, make_data, pygmmis, args.rate, args.seed, args.check_iters)
            res["pygmmis_check"] = chk
            print(f"pygmmis check: loglik explorer {chk['loglik_explorer']:.4f}, pygmmis {chk['loglik_peer']:.4f}, "
                  f"max |d means| {chk['max_abs_diff_means']:.2g}, max |d cov| {chk['max_abs_diff_covariances']:.2g}",
                  flush=True)
        if pomegranate is not None:
            pom = probe_pomegranate(em_gmm, make_data, args.rate, args.seed, args.check_iters)
            res["pomegranate"] = pom
            for cov in ("full", "diag"):
                for key, r in pom[cov].items():
                    print(f"pomegranate {cov:4s} {key:28s}: "
                          + ("ok" + (f", loglik {r['loglik_peer']:.4f} vs explorer {r['loglik_explorer']:.4f}"
                                     if "loglik_peer" in r else "") if r["ok"] else r["error"]), flush=True)

    res["meta"] = {
        "command": shlex.join([Path(sys.executable).as_posix(), "benchmarks/bench_peers.py"] + sys.argv[1:]),
        "python": platform.python_version(), "machine": platform.machine(), "cpu_count": os.cpu_count(),
        "versions": {p: version(p) for p in ("numpy", "scipy", "scikit-learn", "threadpoolctl", "pygmmis",
                                             "pomegranate", "torch")},
        "blas": blas_info(), "blas_threads": args.threads, "repeats": args.repeats,
        "explorer_root": str(args.explorer_root), "explorer_label": label, "explorer_git": gi,
        "loadavg_before": load_before, "loadavg_after": load_after,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    name = "bench_peers_quick" if args.quick else "bench_peers"
    (args.out / f"{name}.json").write_text(json.dumps(res, indent=2, default=str))
    write_md(args.out / f"{name}.md", res, args)
    print(f"wrote {args.out / name}.json and .md")


if __name__ == "__main__":
    main()
