"""The compiled FA / PPCA EM (explorer.core._compiled.factor, FAConfig.strategy) against the numpy reference."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from explorer.core.factor import factor_analysis as fa
from explorer.core.validation import BadInputError

RTOL = 1e-10


def _data(rng, n, D, q, mask):
    W = rng.normal(size=(D, q))
    X = rng.normal(size=(n, q)) @ W.T + 0.5 * rng.normal(size=(n, D)) + 3.0
    if mask == "mcar":
        miss = rng.random((n, D)) < 0.3
    elif mask == "structured":  # a few block patterns: the last columns missing in the first half, ...
        miss = np.zeros((n, D), dtype=bool)
        miss[: n // 2, D - D // 3:] = True
        miss[n // 2: 3 * n // 4, : D // 2] = True
    elif mask == "heavy":  # most entries missing: A_o summed over the observed entries
        miss = rng.random((n, D)) < 0.8
    else:
        miss = np.zeros((n, D), dtype=bool)
    if mask != "complete":
        miss[:3] = True  # rows with nothing observed
    X[miss] = np.nan
    return fa.prepare(X)


def _rel(a, b):
    return np.max(np.abs(np.asarray(a) - np.asarray(b))) / max(np.max(np.abs(a)), 1e-300)


def _both(data, n_steps, **kw):
    out = {}
    for strategy in ("numpy", "compiled"):
        cfg = fa.FAConfig(strategy=strategy, **kw)
        s = fa.init(data, cfg, np.random.default_rng(1))
        states = [s]
        for _ in range(n_steps):
            s = fa.step(s, data, cfg)
            states.append(s)
        out[strategy] = states
    return out["numpy"], out["compiled"]


@pytest.mark.parametrize("mask", ["complete", "mcar", "structured", "heavy"])
@pytest.mark.parametrize("kind", ["fa", "ppca"])
@pytest.mark.parametrize("update", ["px", "em"])
def test_compiled_equals_numpy(mask, kind, update):
    data = _data(np.random.default_rng(0), 240, 12, 3, mask)
    ref, comp = _both(data, 5, n_factors=3, kind=kind, update=update)
    for a, b in zip(ref, comp):
        assert a.iteration == b.iteration
        assert abs(a.log_likelihood - b.log_likelihood) <= RTOL * abs(a.log_likelihood)
        for x, y in [(a.params.mean, b.params.mean), (a.params.loadings, b.params.loadings),
                     (a.params.psi, b.params.psi), (a.latent_mean, b.latent_mean), (a.latent_cov, b.latent_cov)]:
            assert x.shape == y.shape
            assert _rel(x, y) <= RTOL
        assert not b.latent_mean.flags.writeable and not b.latent_cov.flags.writeable
    lls = [s.log_likelihood for s in comp]
    assert all(b >= a - 1e-9 * abs(a) for a, b in zip(lls, lls[1:]))


def test_empty_rows_get_the_prior():
    data = _data(np.random.default_rng(2), 100, 6, 2, "mcar")
    s = fa.step(fa.init(data, fa.FAConfig(n_factors=2, strategy="compiled"), None), data,
                fa.FAConfig(n_factors=2, strategy="compiled"))
    assert np.all(s.latent_mean[:3] == 0.0)
    assert np.allclose(s.latent_cov[data.row_pattern[0]], np.eye(2))


@pytest.mark.filterwarnings("ignore:Stopped after")
def test_random_init_and_fit_match():
    data = _data(np.random.default_rng(3), 300, 10, 2, "mcar")
    res = {st: fa.fit(data, fa.FAConfig(n_factors=2, init="random", max_iter=15, tol=0.0, strategy=st),
                      np.random.default_rng(7)) for st in ("numpy", "compiled")}
    a, b = res["numpy"].state, res["compiled"].state
    assert a.iteration == b.iteration == 15
    assert abs(a.log_likelihood - b.log_likelihood) <= RTOL * abs(a.log_likelihood)
    assert _rel(a.params.loadings, b.params.loadings) <= RTOL


def test_workspace_allocated_once_and_picklable():
    data = _data(np.random.default_rng(4), 200, 8, 2, "mcar")
    cfg = fa.FAConfig(n_factors=2, strategy="compiled")
    s = fa.step(fa.init(data, cfg, None), data, cfg)
    ws = fa.workspace(data, 2)
    buffers = (ws.E, ws.Bm, ws.Lrun, ws.Z, ws.S)
    s = fa.step(s, data, cfg)
    assert fa.workspace(data, 2) is ws and all(a is b for a, b in zip(buffers, (ws.E, ws.Bm, ws.Lrun, ws.Z, ws.S)))
    assert ws.layout.n_runs == np.unique(data.row_pattern[data.fit_rows]).size  # one run per distinct pattern
    ws2 = pickle.loads(pickle.dumps(ws))
    assert ws2.Z.shape == ws.Z.shape and ws2.Z is not ws.Z


def test_small_blocks_split_runs():
    """Runs split across blocks keep their factor: results do not depend on the block size."""
    from explorer.core._compiled.factor import FAWorkspace

    data = _data(np.random.default_rng(5), 400, 9, 2, "structured")
    cfg = fa.FAConfig(n_factors=2, strategy="compiled")
    s0 = fa.init(data, cfg, None)
    ref = fa.step(s0, data, cfg)
    ws = fa.workspace(data, 2)
    data.cache[("fa_workspace", 2)] = FAWorkspace(ws.layout, 2, ws.run_pattern, ws.n_rows, block_rows=64)
    small = fa.step(s0, data, cfg)
    assert _rel(ref.latent_mean, small.latent_mean) <= RTOL
    assert abs(ref.log_likelihood - small.log_likelihood) <= RTOL * abs(ref.log_likelihood)


def test_strategy_validation_and_auto():
    with pytest.raises(BadInputError, match="strategy"):
        fa.FAConfig(strategy="fast")
    small = _data(np.random.default_rng(6), 50, 5, 2, "mcar")
    import explorer.core._compiled as compiled_pkg

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(compiled_pkg, "_LOADED", set())
        assert fa.resolve_strategy(small, fa.FAConfig(n_factors=2)) == "numpy"  # small, kernels not loaded
        compiled_pkg.mark_loaded("factor")
        assert fa.resolve_strategy(small, fa.FAConfig(n_factors=2)) == "numpy"  # chosen once per data and q
        fresh = _data(np.random.default_rng(6), 50, 5, 2, "mcar")
        assert fa.resolve_strategy(fresh, fa.FAConfig(n_factors=2)) == "compiled"  # the load is paid
    assert fa.resolve_strategy(small, fa.FAConfig(n_factors=2, strategy="compiled")) == "compiled"
    big = _data(np.random.default_rng(6), 5000, 20, 2, "complete")
    assert fa.resolve_strategy(big, fa.FAConfig(n_factors=2)) == "compiled"


@pytest.mark.parametrize("mask", ["mcar", "structured", "heavy"])
@pytest.mark.parametrize("kind", ["fa", "ppca"])
def test_mixture_of_factor_analysers_on_the_compiled_kernel_equals_numpy(mask, kind):
    """Issue 22: the MFA's E-step runs one compiled FA pass per component; five EM steps from one start agree
    with the numpy kernels to 1e-10 (weights, means, loadings, noise, responsibilities, log-likelihood)."""
    from dataclasses import replace

    from explorer.core.factor import mfa

    data = _data(np.random.default_rng(21), 600, 12, 2, mask)
    base = mfa.MFAConfig(n_components=3, n_factors=2, kind=kind, strategy="numpy")
    start = mfa.init(data, base, np.random.default_rng(0))
    runs = {}
    for strategy in ("numpy", "compiled"):
        config = replace(base, strategy=strategy)
        state = mfa.init_from_parameters(data, start.params)
        lls = []
        for _ in range(5):
            state = mfa.step(state, data, config)
            lls.append(state.log_likelihood)
        runs[strategy] = (state, lls)
    (a, lla), (b, llb) = runs["numpy"], runs["compiled"]
    assert lla[-1] > lla[0]  # the steps moved the fit
    np.testing.assert_allclose(llb, lla, rtol=RTOL)
    np.testing.assert_allclose(b.log_resp, a.log_resp, rtol=1e-9, atol=1e-10)
    for pa, pb in zip(a.params.components, b.params.components):
        assert _rel(pb.mean, pa.mean) < RTOL and _rel(pb.loadings, pa.loadings) < RTOL and _rel(pb.psi, pa.psi) < RTOL
    assert _rel(b.params.weights, a.params.weights) < RTOL
    assert _rel(b.latent_cov, a.latent_cov) < RTOL and _rel(b.latent_mean, a.latent_mean) < RTOL


def test_mixture_of_factor_analysers_strategy_rule(monkeypatch):
    import explorer.core._compiled as compiled_pkg
    from explorer.core.factor import mfa

    with pytest.raises(BadInputError, match="strategy"):
        mfa.MFAConfig(strategy="fast")
    monkeypatch.setattr(compiled_pkg, "_LOADED", set())
    small = _data(np.random.default_rng(6), 200, 10, 2, "mcar")
    assert mfa.resolve_strategy(small, mfa.MFAConfig(n_components=3, n_factors=2)) == "numpy"
    big = _data(np.random.default_rng(6), 5000, 10, 2, "mcar")  # 5,000 x 10 x 2 x 3 >= 200,000
    assert mfa.resolve_strategy(big, mfa.MFAConfig(n_components=3, n_factors=2)) == "compiled"
    compiled_pkg.mark_loaded("factor")
    assert mfa.resolve_strategy(small, mfa.MFAConfig(n_components=3, n_factors=2)) == "numpy"  # once per data
    fresh = _data(np.random.default_rng(6), 200, 10, 2, "mcar")
    assert mfa.resolve_strategy(fresh, mfa.MFAConfig(n_components=3, n_factors=2)) == "compiled"
