"""Tests of explorer.history.em_history on traces of real EM fits."""

from __future__ import annotations

import json

import numpy as np
import pytest
import xarray as xr

from explorer.core.mixtures import em_gmm
from explorer.core.mixtures.em_gmm import EMConfig
from explorer.history import em_history


@pytest.fixture(scope="module")
def fit_result():
    rng = np.random.default_rng(3)
    X = np.vstack([rng.normal(size=(60, 3)), rng.normal(size=(60, 3)) * 0.5 + 4.0])
    truth = X.copy()
    X[rng.random(X.shape) < 0.2] = np.nan
    data = em_gmm.prepare(X)
    config = EMConfig(n_components=2, covariance_type="diag", tol=1e-6)
    return em_gmm.fit(data, config, np.random.default_rng(0), truth=truth), config


def test_dims_coords_and_values(fit_result):
    res, config = fit_result
    ds = em_history(res.trace, columns=["a", "b", "c"], config=config, stop_reason=res.stop_reason)
    assert isinstance(ds, xr.Dataset)
    n = res.n_iter + 1
    assert dict(ds.sizes) == {"iteration": n, "component": 2, "feature": 3, "feature_": 3}
    np.testing.assert_array_equal(ds["iteration"].values, np.arange(n))
    np.testing.assert_array_equal(ds["component"].values, [0, 1])
    assert list(ds["feature"].values) == ["a", "b", "c"] and list(ds["feature_"].values) == ["a", "b", "c"]
    assert ds["weights"].dims == ("iteration", "component")
    assert ds["means"].dims == ("iteration", "component", "feature")
    assert ds["covariances"].dims == ("iteration", "component", "feature", "feature_")
    for key in ("log_likelihood", "objective", "resp_entropy", "rmse", "mae"):
        assert ds[key].dims == ("iteration",)
        np.testing.assert_array_equal(ds[key].values, [t[key] for t in res.trace])
    for it in (0, n // 2, n - 1):
        t = res.trace[it]
        np.testing.assert_array_equal(ds["weights"].sel(iteration=it).values, t["weights"])
        np.testing.assert_array_equal(ds["means"].sel(iteration=it).values, t["means"])
        np.testing.assert_array_equal(ds["covariances"].sel(iteration=it).values, t["covariances"])
        np.testing.assert_array_equal(ds["hard_counts"].sel(iteration=it).values, t["hard_counts"])
    # the last iteration is the fitted state; diagonal covariances are stored as full matrices
    last = ds.isel(iteration=-1)
    np.testing.assert_array_equal(last["means"].values, res.state.means)
    np.testing.assert_array_equal(
        np.diagonal(last["covariances"].values, axis1=1, axis2=2), res.state.covariances
    )
    off = last["covariances"].values * (1 - np.eye(3))
    assert not off.any()
    assert last["log_likelihood"].item() == res.state.log_likelihood
    # label-based selection works on feature names
    assert ds["means"].sel(feature="b", component=1).shape == (n,)
    assert ds["log_likelihood"].attrs["long_name"] == "observed-data log-likelihood"
    # EM never decreases the likelihood, and the trace shows it
    assert np.all(ds["log_likelihood"].diff("iteration").values > -1e-8)


def test_attrs_hold_the_config_as_json(fit_result):
    res, config = fit_result
    ds = em_history(res.trace, config=config, stop_reason="tol", attrs={"dataset": "toy", "seed": 0})
    assert EMConfig(**json.loads(ds.attrs["config"])) == config
    assert ds.attrs["stop_reason"] == "tol"
    assert ds.attrs["dataset"] == "toy" and ds.attrs["seed"] == 0
    assert "EM" in ds.attrs["algorithm"]
    bare = em_history(res.trace)
    assert "config" not in bare.attrs and "stop_reason" not in bare.attrs
    assert list(bare["feature"].values) == ["x0", "x1", "x2"]


def test_trace_without_truth_has_no_error_variables():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 2))
    X[::5, 1] = np.nan
    res = em_gmm.fit(em_gmm.prepare(X), EMConfig(tol=1e-8, max_iter=200), rng)
    ds = em_history(res.trace)
    assert "rmse" not in ds and "mae" not in ds
    assert ds.sizes["iteration"] == res.n_iter + 1 and ds.sizes["component"] == 1


def test_errors():
    with pytest.raises(ValueError, match="empty"):
        em_history([])
    snap = dict(iteration=0, log_likelihood=-1.0, objective=-1.0, weights=np.ones(1), means=np.zeros((1, 2)),
                covariances=np.eye(2)[None], resp_entropy=0.0, hard_counts=np.array([3]))
    with pytest.raises(ValueError, match="3 column names for 2 features"):
        em_history([snap], columns=["a", "b", "c"])


# ----------------------------------------------------------------------------- vb_history
@pytest.fixture(scope="module")
def vb_result():
    from explorer.core.mixtures import vb_dpgmm

    rng = np.random.default_rng(5)
    X = np.vstack([rng.normal(size=(50, 2)), rng.normal(size=(50, 2)) + 5.0])
    truth = X.copy()
    X[rng.random(X.shape) < 0.15] = np.nan
    X[np.isnan(X).all(axis=1), 0] = truth[np.isnan(X).all(axis=1), 0]
    config = vb_dpgmm.VBConfig(n_components=6, tol=1e-6, max_iter=200)
    return vb_dpgmm.fit(vb_dpgmm.prepare(X), config, np.random.default_rng(0), truth=truth), config


def test_vb_history_dims_and_values(vb_result):
    from explorer.core.mixtures.vb_dpgmm import VBConfig
    from explorer.history import vb_history

    res, config = vb_result
    ds = vb_history(res.trace, columns=["u", "v"], config=config, stop_reason=res.stop_reason)
    n = res.n_iter + 1
    assert dict(ds.sizes) == {"iteration": n, "component": 6, "feature": 2, "feature_": 2}
    for key in ("elbo", "log_likelihood", "objective", "weights_perplexity", "rmse", "mae"):
        assert ds[key].dims == ("iteration",)
        np.testing.assert_array_equal(ds[key].values, [t[key] for t in res.trace])
    assert ds["n_effective"].dtype.kind == "i"
    np.testing.assert_array_equal(ds["n_effective"].values, [t["n_effective"] for t in res.trace])
    last = ds.isel(iteration=-1)
    s = res.state
    np.testing.assert_array_equal(last["weights"].values, s.weights)
    np.testing.assert_array_equal(last["means"].values, s.means)
    np.testing.assert_array_equal(last["covariances"].values, s.covariances)
    assert last["elbo"].item() == s.elbo and last["log_likelihood"].item() == s.log_likelihood
    assert last["n_effective"].item() == s.n_effective == int(np.sum(s.weights > 0.01))
    # expected weights sum to one at every iteration; the ELBO is undefined at the mean-filled start
    np.testing.assert_allclose(ds["weights"].sum("component").values, 1.0)
    assert np.isnan(ds["elbo"].values[0]) and np.all(np.isfinite(ds["elbo"].values[1:]))
    assert VBConfig(**{k: v for k, v in json.loads(ds.attrs["config"]).items()}) == config
    assert "Dirichlet" in ds.attrs["algorithm"] and ds.attrs["stop_reason"] == res.stop_reason
    assert ds["elbo"].attrs["long_name"] == "evidence lower bound"
    assert "hard_counts" not in ds and "resp_entropy" not in ds


def test_vb_history_errors():
    from explorer.history import vb_history

    with pytest.raises(ValueError, match="empty"):
        vb_history([])
    snap = {"iteration": 0, "elbo": -2.0, "log_likelihood": -1.0, "objective": -2.0, "weights": np.ones(1),
            "means": np.zeros((1, 2)), "covariances": np.eye(2)[None], "n_effective": 1}
    with pytest.raises(ValueError, match="1 column names for 2 features"):
        vb_history([snap], columns=["a"])
    ds = vb_history([snap])
    assert "rmse" not in ds and "weights_perplexity" not in ds
