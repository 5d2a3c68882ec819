"""EM on Dask (explorer.dask_em): equals the in-memory EM; Zarr / Parquet / xarray inputs; errors; impute.

One local cluster of two worker processes (loopback only, no dashboard) serves the module.
"""

import pathlib
import sys
import warnings

import numpy as np
import pytest

pytest.importorskip("dask")
pytest.importorskip("distributed")

import dask.array as da  # noqa: E402
import xarray as xr  # noqa: E402

from explorer import dask_em  # noqa: E402
from explorer.core.mixtures import em_gmm  # noqa: E402
from explorer.core.validation import BadInputError, NonNumericError  # noqa: E402

K = 3
CHUNKS = (700, 1, 299, 800, 200)  # irregular; the 1-row chunk is an all-missing row


def _data(n=2000, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) @ rng.normal(size=(d, d)) + 10.0
    X[: n // 2] += 3.0
    X[rng.random((n, d)) < 0.3] = np.nan
    if n > 700:
        X[700] = np.nan  # alone in its chunk
    X[3] = np.nan
    return X


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                       host="127.0.0.1", local_directory=str(tmp_path_factory.mktemp("dask")))
    c = distributed.Client(cluster, set_as_default=False)
    yield c
    c.close()
    cluster.close()


@pytest.fixture(scope="module")
def X():
    return _data()


def _start(X, covariance_type, prior=None):
    data = em_gmm.prepare(X)
    config = em_gmm.EMConfig(n_components=K, covariance_type=covariance_type, prior=prior)
    s = em_gmm.init(data, config, np.random.default_rng(1))
    return data, config, (np.array(s.weights), np.array(s.means), np.array(s.covariances))


def _in_memory(data, config, params, n_iter):
    state = em_gmm.init_from_parameters(data, config, *params)
    lls = [state.log_likelihood]
    for _ in range(n_iter):
        state = em_gmm.step(state, data, config)
        lls.append(state.log_likelihood)
    return state, np.array(lls)


def _fit(X, params, covariance_type="full", n_iter=4, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", em_gmm.ConvergenceWarning)
        return dask_em.fit(X, K, covariance_type=covariance_type, init_params=params, max_iter=n_iter, tol=0.0, **kw)


def _close(a, b, rtol=1e-10):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape
    assert np.max(np.abs(a - b)) <= rtol * np.max(np.abs(b)), np.max(np.abs(a - b)) / np.max(np.abs(b))


@pytest.mark.parametrize("covariance_type, prior, where", [("full", None, "cluster"), ("diag", None, "cluster"),
                                                           ("full", "auto", "synchronous"),
                                                           ("diag", "auto", "synchronous")])
def test_equals_in_memory_em(client, X, covariance_type, prior, where):
    data, config, params = _start(X, covariance_type, prior)
    state, lls = _in_memory(data, config, params, 4)
    res = _fit(da.from_array(X, chunks=(CHUNKS, -1)), params, covariance_type, prior=prior,
               client=client if where == "cluster" else where)
    assert res.n_iter == 4 and res.stop_reason == "max_iter" and not res.converged
    _close(res.weights, state.weights)
    _close(res.means, state.means)
    _close(res.covariances, state.covariances)
    _close(res.log_likelihood_trace, lls)
    assert res.n_fit == data.n_fit < X.shape[0] - 1 and res.n_samples == X.shape[0]
    if prior is not None:
        assert res.objective == pytest.approx(state.objective, rel=1e-10)
        for field in ("mean", "scale"):
            _close(getattr(res.prior, field), getattr(state.prior.spec, field))


def test_zarr_parquet_xarray_give_the_dask_result(client, X, tmp_path):
    pd = pytest.importorskip("pandas")
    cols = ["a", "b", "c", "d"]
    _, _, params = _start(X, "full")
    ref = _fit(da.from_array(X, chunks=(CHUNKS, -1)), params, n_iter=3, client="synchronous")
    arr = xr.DataArray(X, dims=("row", "feature"), coords={"feature": cols}, name="x").chunk({"row": 500})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zarr v3: string coordinates and consolidated metadata are not in the spec
        arr.to_dataset().to_zarr(tmp_path / "x.zarr", mode="w")
    pd.DataFrame(X, columns=cols).to_parquet(tmp_path / "x.parquet", row_group_size=600)
    for source, client_ in ((arr, "synchronous"), (str(tmp_path / "x.zarr"), "synchronous"),
                            (tmp_path / "x.parquet", client)):
        res = _fit(source, params, n_iter=3, client=client_)
        assert res.columns == tuple(cols)
        _close(res.means, ref.means, 1e-12)
        _close(res.covariances, ref.covariances, 1e-12)
        _close(res.log_likelihood_trace, ref.log_likelihood_trace, 1e-12)


def test_default_scheduler_kmeans_init_and_progress(X, capsys):
    """client=None without an active distributed client: Dask's threads; k-means on the sample; one call per iteration."""
    calls = []
    res = dask_em.fit(da.from_array(X, chunks=(500, -1)), K, max_iter=30, tol=1e-4, random_state=0,
                      callback=calls.append, progress=True)
    assert res.converged and res.stop_reason == "tol"
    assert [c.iteration for c in calls] == list(range(1, res.n_iter + 1))
    assert calls[-1].objective == pytest.approx(res.objective)
    assert np.all(np.diff(res.log_likelihood_trace) > -1e-8)  # EM never decreases the likelihood
    assert "dask_em.fit" in capsys.readouterr().err
    again = dask_em.fit(X, K, max_iter=30, tol=1e-4, random_state=0, chunk_rows=500)  # numpy in: wrapped
    np.testing.assert_allclose(again.means, res.means, rtol=1e-10)


def test_callback_can_stop():
    def stop(info):
        raise StopIteration

    res = dask_em.fit(_data(n=300), 2, random_state=0, callback=stop, client="synchronous")
    assert res.n_iter == 1 and res.stop_reason == "callback"


def test_bad_inputs(tmp_path):
    pd = pytest.importorskip("pandas")
    X = _data(n=200)
    bad = X.copy()
    bad[150, 2] = np.inf
    with pytest.raises(BadInputError, match=r"infinite value.*row 150 of column 2"):
        dask_em.fit(da.from_array(bad, chunks=(50, -1)), 2, client="synchronous")
    frame = pd.DataFrame(X[:, :2], columns=["x", "y"]).assign(city=["Paris", "Lyon"] * 100)
    frame.to_parquet(tmp_path / "t.parquet")
    with pytest.raises(NonNumericError, match=r"'city'.*encode_categoricals"):
        dask_em.fit(tmp_path / "t.parquet", 2, client="synchronous")
    with pytest.raises(BadInputError, match="must be 2-D"):
        dask_em.fit(da.zeros((10, 2, 2), chunks=5), 2)
    with pytest.raises(BadInputError, match=r"n_components=5 is larger than the number of rows with observed data \(4\)"):
        dask_em.fit(da.from_array(X[4:8], chunks=2), 5)
    empty = X.copy()
    empty[:, 1] = np.nan
    with pytest.raises(BadInputError, match="column 1 has no observed value"):
        dask_em.fit(da.from_array(empty, chunks=50), 2)
    with pytest.raises(NonNumericError):
        dask_em.fit(da.from_array(np.array([["a", "b"]] * 4)), 1)
    with pytest.raises(BadInputError, match="client must be"):
        dask_em.fit(X, 2, client=3)


def test_missing_dask_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "dask", None)
    with pytest.raises(ImportError, match=r"pip install 'explorer\[dask\]'"):
        dask_em.fit(np.zeros((4, 2)), 1)


def test_impute_blocks(client, X):
    _, _, params = _start(X, "full")
    res = _fit(da.from_array(X, chunks=(CHUNKS, -1)), params, n_iter=3, client="synchronous")
    Xd = da.from_array(X, chunks=(CHUNKS, -1))
    out = dask_em.impute(Xd, res)
    assert isinstance(out, da.Array) and out.chunks == Xd.chunks
    got = out.compute(scheduler=client)
    obs = ~np.isnan(X)
    assert np.array_equal(got[obs], X[obs])  # bit for bit
    assert not np.isnan(got).any()
    np.testing.assert_array_equal(got, res.to_imputer().transform(X))
    np.testing.assert_allclose(got[700], res.weights @ res.means)  # the all-missing row: the mixture mean
    arr = xr.DataArray(X, dims=("row", "feature"), coords={"feature": list("abcd")}).chunk({"row": 333})
    named = _fit(arr, params, n_iter=2, client="synchronous")
    lazy = dask_em.impute(arr, named)
    assert isinstance(lazy, xr.DataArray) and lazy.chunks is not None
    assert list(lazy.feature.values) == list("abcd")
    assert not np.isnan(lazy.values).any()
    with pytest.raises(BadInputError, match="fitted on"):
        dask_em.impute(arr.assign_coords(feature=list("wxyz")), named)


def test_core_does_not_import_dask():
    core = pathlib.Path(em_gmm.__file__).parent
    assert not [p.name for p in core.glob("*.py") if "import dask" in p.read_text() or "from dask" in p.read_text()]
