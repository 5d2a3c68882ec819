r"""EM for Gaussian mixtures with missing values on data larger than memory (Dask).

Every EM iteration is one pass over the row blocks of a Dask array: each block computes its
expected sufficient statistics at the current parameters (:func:`explorer.core.mixtures.suffstats.estep_statistics`,
about the shift = the current means, with ``group_patterns`` of the block's missingness), the
statistics of the blocks are summed by a tree reduction (``+``), and the M-step
(:func:`explorer.core.mixtures.suffstats.m_step`) runs on the sum in the calling process. The observed-data
log-likelihood of the current parameters comes with the statistics, so the trace and the stopping
rule (per-row change of the objective below ``tol``, as in :func:`explorer.core.mixtures.em_gmm.fit`) cost
no extra pass. Only the parameters (K x D x D numbers) and the statistics travel; a worker holds
one block at a time plus its E-step (about ``(K + 3) x`` the block's bytes).

Result: the same iterates as the in-memory EM (:func:`explorer.core.mixtures.em_gmm.init_from_parameters`
then :func:`~explorer.core.mixtures.em_gmm.step`) on the same data from the same initial parameters, up to
floating-point summation order (tested to 1e-10 relative). Rows with nothing observed are skipped
by the fit (as in memory) and imputed from the mixture mean.

* :func:`fit` -> :class:`DaskEMResult` (weights, means, covariances, the log-likelihood trace, ...);
* :meth:`DaskEMResult.to_imputer` -> a fitted :class:`~explorer.impute.gaussian_mixture.GaussianMixtureImputer`;
* :func:`impute` -> a lazy Dask array (or DataArray): every block imputed by ``map_blocks``,
  observed entries bit for bit;
* :func:`as_dask_array`: the accepted inputs as one (n, D) float64 Dask array chunked by rows.

Inputs: a Dask array (n, D) with NaN at missing entries (chunked by rows; the columns are rechunked
to one chunk), a 2-D xarray DataArray (chunked or not), the path of a Zarr store (an array, or a
group with one 2-D variable, or ``variable=``), the path of a Parquet file or directory (its numeric
columns; one chunk per row group), or anything numpy reads (wrapped in chunks of ``chunk_rows``).
Validation is lazy but clear: a first pass reduces every block to a small summary (counts,
observed means and variances, infinities, huge values) and the errors name columns and rows.

Defaults (and why they differ from :class:`~explorer.impute.gaussian_mixture.GaussianMixtureImputer`):

* ``prior=None`` (maximum likelihood). ``prior="auto"`` works but needs the data's mean and
  covariance: like the in-memory fit it computes them by a one-component EM (K = 1) on the whole
  data, on Dask, which costs up to 100 extra passes (typically 10-40 on gappy data; one pass when
  nothing is missing). An :class:`~explorer.core.mixtures.em_gmm.NIWPrior` with ``mean`` and ``scale`` given
  needs none.
* Initialisation: k-means (``init``) on a reproducible random sample of ``n_sample=10_000`` rows
  (drawn with ``random_state``, read with one pass), or the given ``init_params``. One start
  (no ``n_init`` restarts: each would cost a full fit).
* ``client=None``: Dask's current scheduler, i.e. the active ``distributed.Client`` if there is
  one, else Dask's in-process threads. ``client="local"`` starts a ``LocalCluster`` (one process
  per core, one thread each) for the fit and closes it afterwards; a scheduler address
  (``"tcp://host:8786"``) connects to it; a ``Client`` is used as is; ``"synchronous"`` runs in the
  calling thread (debugging). Starting processes is not the default because a script that starts
  them needs an ``if __name__ == "__main__":`` guard.

Dask and Zarr are an optional extra: ``pip install 'explorer[dask]'``.
"""

from __future__ import annotations

import os
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, replace

import numpy as np

from explorer.core.gaussians.gaussian import DegenerateCovarianceError
from explorer.core.gaussians.patterns import group_patterns
from explorer.core.loop import run_restarts
from explorer.core.mixtures import em_gmm
from explorer.core.mixtures.prior import default_scale
from explorer.core.mixtures.suffstats import SufficientStatistics, estep_statistics, m_step
from explorer.core.validation import MAX_ABS_VALUE, BadInputError, NonNumericError, as_float_matrix, column_label
from explorer.utils.progress import FitProgress, check_progress_params

__all__ = ["DaskEMResult", "SAMPLE_ROWS", "as_dask_array", "fit", "impute"]

INSTALL_HINT = "pip install 'explorer[dask]'"
#: Rows of the random sample that k-means initialises on (it is read into memory).
SAMPLE_ROWS = 10_000
#: Rows per chunk when wrapping an in-memory array.
DEFAULT_CHUNK_ROWS = 100_000
_SPLIT_EVERY = 8


def _dask():
    try:
        import dask
        import dask.array as da
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(f"explorer.dask_em needs Dask: install it with {INSTALL_HINT}") from exc
    return dask, da


# ---------------------------------------------------------------------------- inputs
@dataclass(frozen=True, eq=False)
class _Source:
    array: object  # dask.array (n, D) float64, one chunk along the columns
    columns: tuple | None
    in_memory: bool
    template: object = None  # the DataArray the data came from (impute returns its kind)


def _check_dtype(dtype, where: str) -> None:
    if dtype.kind in "OUSV":
        raise NonNumericError(
            f"{where} has dtype {dtype}, which is not numeric. Encode categories as numbers (e.g. 0/1 for binary "
            "columns; explorer.io.encode_categoricals one-hot encodes a DataFrame's) or drop those columns; use NaN "
            "for missing cells."
        )
    if dtype.kind == "c":
        raise BadInputError(f"{where} has dtype {dtype}. Complex data not supported: split real and imaginary parts "
                            "into separate columns.")
    if dtype.kind not in "iufb":
        raise BadInputError(f"{where} has dtype {dtype}, which is not numeric.")


def _from_dask(arr, where: str, columns=None, template=None, in_memory=False) -> _Source:
    _, da = _dask()
    if arr.ndim != 2:
        raise BadInputError(f"{where} must be 2-D (n_samples, n_features); got shape {arr.shape}. Stack or select "
                            "dimensions first.")
    _check_dtype(arr.dtype, where)
    if any(np.isnan(c) for c in arr.chunks[0]):
        arr = arr.compute_chunk_sizes()
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise BadInputError(f"{where} is empty (shape {arr.shape}).")
    if len(arr.chunks[1]) > 1:
        arr = arr.rechunk({1: -1})
    if arr.dtype != np.float64:
        arr = arr.astype(np.float64)
    if columns is not None and len(columns) != arr.shape[1]:
        raise BadInputError(f"columns has {len(columns)} name(s) but the data have {arr.shape[1]} column(s).")
    return _Source(arr, None if columns is None else tuple(str(c) for c in columns), in_memory, template)


def _from_dataarray(X, columns, chunk_rows) -> _Source:
    _, da = _dask()
    if X.ndim != 2:
        raise BadInputError(f"X must be a 2-D DataArray (rows x columns); got dims {X.dims}. Stack or select "
                            "dimensions first (DataArray.stack / .sel).")
    col_dim = X.dims[1]
    if columns is None and col_dim in X.coords:
        columns = [str(c) for c in X.coords[col_dim].values]
    data = X.data
    in_memory = not hasattr(data, "dask")
    if in_memory:
        _check_dtype(np.asarray(data).dtype, "X")
        data = da.from_array(np.asarray(data), chunks=(chunk_rows or DEFAULT_CHUNK_ROWS, -1))
    return _from_dask(data, "X", columns, template=X, in_memory=in_memory)


def _is_zarr(path: str) -> bool:
    if path.rstrip("/").endswith(".zarr"):
        return True
    return os.path.isdir(path) and any(
        os.path.exists(os.path.join(path, f)) for f in ("zarr.json", ".zgroup", ".zarray"))


def _from_zarr(path: str, variable, columns) -> _Source:
    _, da = _dask()
    try:
        import zarr
    except ImportError as exc:  # pragma: no cover
        raise ImportError(f"Reading Zarr needs zarr: install it with {INSTALL_HINT}") from exc
    node = zarr.open(path, mode="r")
    if not hasattr(node, "array_keys"):  # a bare array
        return _from_dask(da.from_zarr(path), f"the Zarr array {path!r}", columns)
    import xarray as xr

    ds = xr.open_zarr(path, consolidated=False)
    two_d = [str(v) for v in ds.data_vars if ds[v].ndim == 2]
    if variable is None:
        if len(two_d) != 1:
            raise BadInputError(f"The Zarr store {path!r} has {len(two_d)} 2-D variable(s) ({', '.join(two_d) or 'none'}); "
                                "name the one to fit with variable=...")
        variable = two_d[0]
    if variable not in ds.data_vars:
        raise BadInputError(f"The Zarr store {path!r} has no variable {variable!r}; it has {list(map(str, ds.data_vars))}.")
    return _from_dataarray(ds[variable], columns, None)


def _parquet_files(path: str) -> list[str]:
    if os.path.isfile(path):
        return [path]
    files = []
    for root, dirs, names in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
        files += [os.path.join(root, n) for n in sorted(names)
                  if n.endswith((".parquet", ".pq", ".parq")) and not n.startswith((".", "_"))]
    if not files:
        raise BadInputError(f"No Parquet file (*.parquet) under {path!r}.")
    return files


def _read_row_group(path: str, index: int, columns: list, label: str) -> np.ndarray:
    import pyarrow.parquet as pq

    from explorer.io import frame_values

    frame = pq.ParquetFile(path).read_row_group(index, columns=columns).to_pandas()
    return frame_values(frame, name=label)


def _from_parquet(path: str, columns) -> _Source:
    dask, da = _dask()
    import pyarrow.parquet as pq

    from explorer.io import frame_values

    files = _parquet_files(path)
    names = None
    chunks = []
    for f in files:
        pf = pq.ParquetFile(f)
        here = [c for c in pf.schema_arrow.names if not c.startswith("__index_level_")]
        if names is None:
            names = list(here) if columns is None else [str(c) for c in columns]
            unknown = [c for c in names if c not in here]
            if unknown:
                raise BadInputError(f"unknown column(s) {unknown}; available columns: {here}.")
            # the non-numeric columns, with io's message, from the first rows (the rest are checked per chunk)
            head = next(pf.iter_batches(batch_size=1000, columns=names), None)
            if head is not None:
                frame_values(head.to_pandas(), name=f"the Parquet data {os.path.basename(f)!r}")
        elif any(c not in here for c in names):
            raise BadInputError(f"The Parquet file {f!r} lacks column(s) {[c for c in names if c not in here]} "
                                f"that {files[0]!r} has: every file must have the same columns.")
        for i in range(pf.metadata.num_row_groups):
            n = pf.metadata.row_group(i).num_rows
            if n:
                label = f"the Parquet data {os.path.basename(f)!r} (row group {i})"
                part = dask.delayed(_read_row_group, pure=True)(f, i, names, label)
                chunks.append(da.from_delayed(part, shape=(n, len(names)), dtype=np.float64))
    if not chunks:
        raise BadInputError(f"The Parquet data at {path!r} have no rows.")
    return _from_dask(da.concatenate(chunks, axis=0), f"the Parquet data {path!r}", names)


def _source(X, *, variable=None, columns=None, chunk_rows=None) -> _Source:
    _, da = _dask()
    if isinstance(X, da.Array):
        return _from_dask(X, "X", columns)
    if isinstance(X, (str, os.PathLike)):
        path = os.fspath(X)
        if not os.path.exists(path):
            raise BadInputError(f"No file or directory {path!r}.")
        return _from_zarr(path, variable, columns) if _is_zarr(path) else _from_parquet(path, columns)
    module = type(X).__module__ or ""
    if module.startswith("xarray"):
        if type(X).__name__ == "Dataset":
            two_d = [str(v) for v in X.data_vars if X[v].ndim == 2]
            if variable is None and len(two_d) == 1:
                variable = two_d[0]
            if variable is None:
                raise BadInputError(f"X is an xarray Dataset with {len(two_d)} 2-D variable(s) ({', '.join(two_d)}); "
                                    "pass one DataArray, or name it with variable=...")
            X = X[variable]
        return _from_dataarray(X, columns, chunk_rows)
    if module.startswith("pandas") and hasattr(X, "columns"):
        from explorer.io import frame_values

        columns = [str(c) for c in X.columns] if columns is None else columns
        X = frame_values(X, name="X")
    arr = np.asarray(X)
    if arr.ndim != 2:
        raise BadInputError(f"X must be 2-D (n_samples, n_features); got shape {arr.shape}.")
    arr = as_float_matrix(arr, name="X", columns=columns)
    return _from_dask(da.from_array(arr, chunks=(chunk_rows or DEFAULT_CHUNK_ROWS, -1)), "X", columns, in_memory=True)


def as_dask_array(X, *, variable=None, columns=None, chunk_rows=None):
    """``(array, columns)``: any accepted input as an (n, D) float64 Dask array chunked by rows only.

    ``columns`` is the tuple of column names (DataArray coordinate of the second dimension, Parquet
    column names, ``columns=``) or None. Nothing is computed except the chunk sizes of arrays that
    do not know them.
    """
    src = _source(X, variable=variable, columns=columns, chunk_rows=chunk_rows)
    return src.array, src.columns


# ---------------------------------------------------------------------------- the validation pass
@dataclass(frozen=True, eq=False, slots=True)
class _Summary:
    """Per-column observed counts, means and sums of squared deviations (Chan et al. merge), and bad values."""

    n_rows: int
    n_empty: int
    count: np.ndarray
    mean: np.ndarray
    m2: np.ndarray
    n_inf: int
    first_inf: tuple | None  # (row, column)
    n_big: int
    first_big: tuple | None  # (row, column, value)


def _summarise(block: np.ndarray, offset: int) -> _Summary:
    block = np.asarray(block, dtype=float)
    inf = np.isinf(block)
    n_inf = int(inf.sum())
    first_inf = None
    if n_inf:
        r, c = np.argwhere(inf)[0]
        first_inf = (offset + int(r), int(c))
    vals = np.where(inf, np.nan, block)
    obs = ~np.isnan(vals)
    count = obs.sum(axis=0).astype(float)
    with np.errstate(invalid="ignore"):
        big = np.abs(vals) > MAX_ABS_VALUE
    n_big = int(big.sum())
    first_big = None
    if n_big:
        r, c = np.argwhere(big)[0]
        first_big = (offset + int(r), int(c), float(vals[r, c]))
    filled = np.where(obs, vals, 0.0)
    mean = filled.sum(axis=0) / np.maximum(count, 1)
    m2 = (np.where(obs, filled - mean, 0.0) ** 2).sum(axis=0)
    return _Summary(block.shape[0], int((~obs).all(axis=1).sum()) if block.shape[1] else 0, count, mean, m2,
                    n_inf, first_inf, n_big, first_big)


def _merge_summaries(*parts: _Summary) -> _Summary:
    out = parts[0]
    for p in parts[1:]:
        n = out.count + p.count
        delta = p.mean - out.mean
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(n > 0, out.mean + delta * p.count / np.maximum(n, 1), 0.0)
            m2 = out.m2 + p.m2 + np.where(n > 0, delta**2 * out.count * p.count / np.maximum(n, 1), 0.0)
        out = _Summary(out.n_rows + p.n_rows, out.n_empty + p.n_empty, n, mean, m2, out.n_inf + p.n_inf,
                       out.first_inf or p.first_inf, out.n_big + p.n_big, out.first_big or p.first_big)
    return out


def _tree(parts: list, combine):
    """One delayed object: ``combine`` applied to groups of ``_SPLIT_EVERY`` until one is left."""
    dask, _ = _dask()
    parts = list(parts)
    while len(parts) > 1:
        parts = [dask.delayed(combine, pure=True)(*parts[i : i + _SPLIT_EVERY])
                 for i in range(0, len(parts), _SPLIT_EVERY)]
    return parts[0]


def _row_offsets(arr) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(arr.chunks[0])[:-1]]).astype(int)


def _validate(src: _Source, scheduler) -> _Summary:
    dask, _ = _dask()
    blocks = src.array.to_delayed().ravel()
    parts = [dask.delayed(_summarise, pure=True)(b, int(o)) for b, o in zip(blocks, _row_offsets(src.array))]
    summary = dask.compute(_tree(parts, _merge_summaries), scheduler=scheduler)[0]
    cols = src.columns
    if summary.n_inf:
        r, c = summary.first_inf
        raise BadInputError(f"X contains {summary.n_inf} infinite value(s), e.g. row {r} of {column_label(c, cols)}. "
                            "Replace them by NaN to treat them as missing, or clip them to a finite range.")
    if summary.n_big:
        r, c, v = summary.first_big
        raise BadInputError(
            f"X has {summary.n_big} value(s) beyond ±{MAX_ABS_VALUE:.0e}, e.g. {v:.6g} in row {r} of "
            f"{column_label(c, cols)}. The models square values and multiply them by covariances, which overflows "
            "floating point: mark such values missing (NaN) or rescale the column(s).")
    empty = np.flatnonzero(summary.count == 0)
    if empty.size:
        shown = ", ".join(column_label(int(j), cols) for j in empty[:5]) + (" ..." if empty.size > 5 else "")
        raise BadInputError(f"{shown} {'has' if empty.size == 1 else 'have'} no observed value, so nothing can be "
                            "learned about them. Drop those columns before fitting.")
    if summary.n_rows - summary.n_empty < 2:
        raise BadInputError("At least two rows with an observed value are needed to fit a mixture.")
    return summary


# ---------------------------------------------------------------------------- one pass of E-steps
def _block_statistics(block: np.ndarray, params: tuple) -> SufficientStatistics:
    weights, means, covariances, covariance_type = params
    X = np.asarray(block, dtype=float)
    if X.shape[0] == 0:
        return SufficientStatistics.zeros(means, covariance_type)
    missing = np.isnan(X)
    patterns = group_patterns(missing, sort=True)  # contiguous groups: the kernels use slices
    Xp = np.where(missing, 0.0, X)[patterns.perm]
    stats, _, _ = estep_statistics(Xp, patterns, weights, means, covariances, covariance_type=covariance_type)
    return stats


def _sum_statistics(*parts: SufficientStatistics) -> SufficientStatistics:
    out = parts[0]
    for p in parts[1:]:
        out = out + p
    return out


def _estep_pass(arr, weights, means, covariances, covariance_type, scheduler) -> SufficientStatistics:
    dask, _ = _dask()
    params = dask.delayed((np.asarray(weights), np.asarray(means), np.asarray(covariances), covariance_type),
                          pure=True, traverse=False)
    parts = [dask.delayed(_block_statistics, pure=True)(b, params) for b in arr.to_delayed().ravel()]
    return dask.compute(_tree(parts, _sum_statistics), scheduler=scheduler)[0]


# ---------------------------------------------------------------------------- schedulers
@contextmanager
def _scheduler(client):
    """What ``dask.compute(scheduler=...)`` gets, and whether it is a distributed client; closes what it opened."""
    if client is None or (isinstance(client, str) and client in ("synchronous", "sync", "threads", "processes")):
        yield client, _active_client() if client is None else None
        return
    try:
        from distributed import Client, LocalCluster
    except ImportError as exc:  # pragma: no cover
        raise ImportError(f"client={client!r} needs dask.distributed: install it with {INSTALL_HINT}") from exc
    if isinstance(client, Client):
        yield client, client
        return
    if not isinstance(client, str):
        raise BadInputError(f"client must be None, 'local', 'synchronous', a scheduler address ('tcp://host:8786') or "
                            f"a distributed.Client; got {client!r}.")
    cluster = None
    if client == "local":
        cluster = LocalCluster(n_workers=os.cpu_count() or 1, threads_per_worker=1, processes=True,
                               dashboard_address=None)
        c = Client(cluster)
    else:
        try:
            c = Client(client, timeout="20s")
        except OSError as exc:
            raise BadInputError(f"Could not connect to the Dask scheduler at {client!r}: {exc}") from exc
    try:
        yield c, c
    finally:
        c.close()
        if cluster is not None:
            cluster.close()


def _active_client():
    try:
        from distributed import default_client
    except ImportError:
        return None
    try:
        return default_client()
    except ValueError:
        return None


# ---------------------------------------------------------------------------- results
@dataclass(frozen=True, eq=False)
class DaskEMResult:
    """A Gaussian mixture fitted by :func:`fit` on Dask.

    Attributes
    ----------
    weights, means, covariances : ndarray
        (K,), (K, D), (K, D, D) for "full" or (K, D) for "diag".
    covariance_type : str
    log_likelihood : float
        Observed-data log-likelihood of the final parameters (a sum over the fitted rows).
    objective : float
        ``log_likelihood + log_prior`` (what EM maximised).
    log_prior : float
    trace : tuple of dict
        One dict per iteration (0 = the initial parameters): ``iteration``, ``log_likelihood``,
        ``objective``, ``weights``, ``means``, ``covariances``, ``seconds`` (of its pass).
    n_iter : int
    converged : bool
    stop_reason : str
        ``"tol"``, ``"max_iter"``, ``"callback"`` or ``"interrupted"``.
    message : str
    n_samples, n_fit : int
        Rows, and rows with an observed value (those the fit uses).
    columns : tuple of str or None
        Column names (DataArray coordinate, Parquet columns, ``columns=``).
    component_sizes : ndarray (K,)
        :math:`N_k`, the responsibilities summed at the final parameters.
    col_means : ndarray (D,)
        Observed column means.
    prior : NIWPrior or None
        The prior used, every field resolved.
    reg_covar : float
    """

    weights: np.ndarray
    means: np.ndarray
    covariances: np.ndarray
    covariance_type: str
    log_likelihood: float
    objective: float
    log_prior: float
    trace: tuple
    n_iter: int
    converged: bool
    stop_reason: str
    message: str
    n_samples: int
    n_fit: int
    columns: tuple | None
    component_sizes: np.ndarray
    col_means: np.ndarray
    prior: object
    reg_covar: float
    tol: float
    max_iter: int

    @property
    def n_components(self) -> int:
        return int(self.weights.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.means.shape[1])

    @property
    def log_likelihood_trace(self) -> np.ndarray:
        """Log-likelihood of iterations 0 .. n_iter."""
        return np.array([s["log_likelihood"] for s in self.trace])

    def parameters(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(weights, means, covariances)`` (copies)."""
        return self.weights.copy(), self.means.copy(), self.covariances.copy()

    def to_imputer(self, predictive: str = "auto"):
        """A fitted :class:`~explorer.impute.gaussian_mixture.GaussianMixtureImputer` with these parameters.

        ``transform`` / ``sample`` / ``conditional`` / ``score_samples`` then work on in-memory data
        (or per block: :func:`impute`). ``empty_rows="marginal"`` (rows with nothing observed are
        imputed with the mixture mean); ``predictive`` as in the imputer ("auto": the Student-t
        posterior predictive with a prior and full covariances, else the plug-in Gaussian mixture: the in-memory
        imputer's default, posterior draws by data augmentation, needs the rows, which a Dask fit does not keep).
        There is no ``history_`` (the trace is :attr:`trace`).
        """
        from explorer.impute.gaussian_mixture import GaussianMixtureImputer

        if predictive == "draws":
            raise BadInputError("predictive='draws' runs data augmentation over the training rows, which a Dask fit "
                                "does not keep: use 'auto', 'student_t' or 'gaussian' (or fit GaussianMixtureImputer "
                                "in memory).")

        imp = GaussianMixtureImputer(
            n_components=self.n_components, covariance_type=self.covariance_type, reg_covar=self.reg_covar,
            tol=self.tol, max_iter=self.max_iter, prior=self.prior, predictive=predictive, empty_rows="marginal",
        )
        imp._config()  # validates predictive against the prior
        imp.weights_ = self.weights.copy()
        imp.means_ = self.means.copy()
        imp.covariances_ = self.covariances.copy()
        imp.col_means_ = self.col_means.copy()
        imp.log_likelihood_ = float(self.log_likelihood)
        imp.log_prior_ = float(self.log_prior)
        imp.prior_ = self.prior
        imp.component_sizes_ = self.component_sizes.copy()
        imp.predictive_ = ("student_t" if predictive == "student_t" or (
            predictive == "auto" and self.prior is not None and self.covariance_type == "full") else "gaussian")
        imp.converged_ = bool(self.converged)
        imp.n_iter_ = int(self.n_iter)
        imp.stop_reason_ = self.stop_reason
        imp.n_components_ = self.n_components
        imp.selection_ = None
        names = None if self.columns is None else np.asarray(self.columns, dtype=object)
        imp._set_features(names, self.n_features)
        return imp


@dataclass(frozen=True, eq=False, slots=True)
class _DaskState:
    iteration: int
    weights: np.ndarray
    means: np.ndarray
    covariances: np.ndarray
    log_likelihood: float
    objective: float
    log_prior: float
    stats: SufficientStatistics
    seconds: float


def _snapshot(state: _DaskState) -> dict:
    return {"iteration": state.iteration, "log_likelihood": state.log_likelihood, "objective": state.objective,
            "weights": state.weights, "means": state.means, "covariances": state.covariances,
            "seconds": state.seconds}


# ---------------------------------------------------------------------------- fit
def _moments(arr, summary: _Summary, reg_covar: float, covariance_type: str, scheduler):
    """Mean and ML covariance (+ reg_covar) of the data, as :func:`explorer.core.mixtures.em_gmm.data_moments`,
    on Dask (diagonal covariances with missing values: the column summaries, no EM pass)."""
    var = summary.m2 / summary.count + reg_covar
    means, covs = summary.mean[None].copy(), np.diag(var)[None]
    any_missing = bool(np.any(summary.count < summary.n_rows))
    if any_missing and covariance_type != "full":
        return summary.mean.copy(), np.diag(var)
    try:
        for _ in range(1 if not any_missing else em_gmm.MOMENT_STEPS):
            stats = _estep_pass(arr, np.ones(1), means, covs, "full", scheduler)
            _, new_means, new_covs = m_step(stats, reg_covar=reg_covar)
            size = 1.0 + np.abs(new_covs).max()
            done = max(np.abs(new_means - means).max(), np.abs(new_covs - covs).max()) < 1e-6 * size
            means, covs = new_means, new_covs
            if done:
                break
    except DegenerateCovarianceError:
        return summary.mean.copy(), np.diag(var)
    return means[0], covs[0]


def _full_prior(prior, config: em_gmm.EMConfig, arr, summary, scheduler):
    """``prior`` with ``mean`` and ``scale`` set (from the data's moments when left None), or None."""
    if prior is None:
        return None
    rule = prior if isinstance(prior, str) else "auto"
    spec = em_gmm.NIWPrior() if isinstance(prior, str) else prior
    if spec.mean is not None and spec.scale is not None:
        return spec
    D, K = summary.mean.shape[0], config.n_components
    m_hat, c_hat = _moments(arr, summary, config.reg_covar, config.covariance_type, scheduler)
    dof = float(D + 2) if spec.dof is None else spec.dof
    scale = default_scale(c_hat, K, dof, config.covariance_type, rule, summary.n_rows - summary.n_empty,
                          shrinkage=spec.shrinkage)
    return replace(spec, mean=m_hat if spec.mean is None else spec.mean,
                   scale=scale if spec.scale is None else spec.scale)


def _sample(arr, n_sample: int, rng: np.random.Generator, scheduler) -> np.ndarray:
    n = arr.shape[0]
    idx = np.sort(rng.choice(n, size=min(int(n_sample), n), replace=False))
    import dask

    return dask.compute(arr[idx], scheduler=scheduler)[0]


def fit(X, n_components: int, *, covariance_type: str = "full", max_iter: int = 100, tol: float = 1e-5,
        reg_covar: float = 1e-6, prior=None, init: str = "kmeans", init_params=None, n_sample: int = SAMPLE_ROWS,
        random_state=None, client=None, callback=None, progress: bool = False, variable=None, columns=None,
        chunk_rows=None) -> DaskEMResult:
    """Fit a Gaussian mixture with missing values by EM, one pass over the row blocks per iteration.

    Parameters
    ----------
    X : dask.array, xarray.DataArray, str or path, or array-like
        (n_samples, n_features), NaN = missing: a Dask array chunked by rows, a DataArray (rows along its
        first dimension), the path of a Zarr store or of a Parquet file / directory, or an in-memory array.
    n_components : int
    covariance_type : {"full", "diag"}
    max_iter, tol, reg_covar
        As :class:`explorer.core.mixtures.em_gmm.EMConfig` (stop when the objective changes by less than ``tol``
        per fitted row).
    prior : None, "auto", "fraley-raftery" or NIWPrior, default None
        None: maximum likelihood. "auto" needs a one-component EM on Dask for the data moments (see the
        module docstring).
    init : {"kmeans", "kmeans++", "random"}
        Initialisation on a random sample of ``n_sample`` rows (ignored with ``init_params``).
    init_params : (weights, means, covariances), optional
        Start from these parameters.
    n_sample : int, default 10_000
    random_state : int, numpy.random.Generator or None
        The sample of rows and k-means.
    client : None, "local", "synchronous", scheduler address or distributed.Client
        See the module docstring.
    callback : callable, optional
        Called after every iteration with an :class:`~explorer.utils.progress.IterationInfo`; raise
        ``StopIteration`` to stop (the state so far is kept).
    progress : bool
        A tqdm bar on stderr, one step per iteration.
    variable : str, optional
        The variable of a Zarr store / xarray Dataset.
    columns : sequence of str, optional
        Column names (Parquet: the columns to read).
    chunk_rows : int, optional
        Rows per chunk when ``X`` is in memory (default 100_000).

    Returns
    -------
    DaskEMResult

    Raises
    ------
    BadInputError
        Invalid parameters or data (non-numeric, infinite or huge values, wrong number of dimensions,
        columns with no observed value, more components than rows with data).
    DegenerateCovarianceError
        A component collapsed.
    ImportError
        Dask is not installed (``pip install 'explorer[dask]'``).

    Warns
    -----
    ConvergenceWarning
        ``max_iter`` reached before ``tol``.
    """
    from explorer.utils.random_state import check_random_state

    config = em_gmm.EMConfig(n_components=n_components, covariance_type=covariance_type, reg_covar=reg_covar,
                             tol=tol, max_iter=max_iter, init=init, prior=prior)
    check_progress_params(callback, progress)
    if isinstance(n_sample, bool) or not isinstance(n_sample, (int, np.integer)) or n_sample < 2:
        raise BadInputError(f"n_sample must be an integer >= 2, got {n_sample!r}.")
    rng = check_random_state(random_state)
    src = _source(X, variable=variable, columns=columns, chunk_rows=chunk_rows)
    K, D = config.n_components, src.array.shape[1]
    with _scheduler(client) as (scheduler, dclient):
        arr = src.array
        if src.in_memory and dclient is not None:
            arr = dclient.persist(arr)
        summary = _validate(replace(src, array=arr), scheduler)
        n_fit = summary.n_rows - summary.n_empty
        if K > n_fit:
            raise BadInputError(f"n_components={K} is larger than the number of rows with observed data ({n_fit}). "
                                "Use fewer components.")
        spec = _full_prior(config.prior, config, arr, summary, scheduler)
        config = replace(config, prior=spec)
        if init_params is None:
            sample = _sample(arr, n_sample, rng, scheduler)
        else:  # no pass for a sample: two complete rows stand in (shape checks, the prior as arrays)
            sample = np.vstack([summary.mean, summary.mean + np.sqrt(summary.m2 / summary.count) + 1.0])
        try:
            sample_data = em_gmm.prepare(sample, columns=src.columns)
        except BadInputError as exc:
            raise BadInputError(f"The random sample of {sample.shape[0]} rows for the initialisation cannot be used "
                                f"({exc}) Raise n_sample or pass init_params.") from exc
        if init_params is not None:
            if len(init_params) != 3:
                raise BadInputError("init_params must be (weights, means, covariances).")
            start = em_gmm.init_from_parameters(sample_data, config, *init_params)
        else:
            start = em_gmm.init(sample_data, config, rng)
        resolved = start.prior  # the prior as arrays (None for ML)

        def state_at(iteration, weights, means, covariances):
            t0 = time.perf_counter()
            stats = _estep_pass(arr, weights, means, covariances, config.covariance_type, scheduler)
            lp = em_gmm.log_prior(means, covariances, resolved)
            for a in (weights, means, covariances):
                a.setflags(write=False)
            return _DaskState(iteration, weights, means, covariances, stats.log_likelihood,
                              stats.log_likelihood + lp, lp, stats, time.perf_counter() - t0)

        def step(state: _DaskState) -> _DaskState:
            w, mu, cov = m_step(state.stats, reg_covar=config.reg_covar, prior=resolved)
            return state_at(state.iteration + 1, w, mu, cov)

        with FitProgress(callback, progress, "dask_em.fit") as monitor:
            out = run_restarts(
                n_runs=1,
                start=lambda: state_at(0, np.array(start.weights), np.array(start.means), np.array(start.covariances)),
                step=step, snapshot=_snapshot, change=lambda old, new: (new.objective - old.objective) / n_fit,
                max_iter=config.max_iter, tol=config.tol, callback=monitor, stacklevel=3,
            )
    if out.stop_reason == "degenerate":
        raise DegenerateCovarianceError(f"EM on Dask stopped after {out.state.iteration} iteration(s): {out.message}")
    state = out.state
    nk = state.stats.nk
    small = np.flatnonzero(nk < D)
    if small.size:
        names = ", ".join(f"component {k} (effective size {nk[k]:.3g})" for k in small)
        warnings.warn(f"{names} of {K} fitted to {D} feature(s): fewer rows than features support it, so its "
                      "covariance is set by reg_covar or the prior rather than the data; use fewer components.",
                      em_gmm.ComponentCollapseWarning, stacklevel=2)
    count = summary.count
    return DaskEMResult(
        weights=np.array(state.weights), means=np.array(state.means), covariances=np.array(state.covariances),
        covariance_type=config.covariance_type, log_likelihood=float(state.log_likelihood),
        objective=float(state.objective), log_prior=float(state.log_prior), trace=out.trace, n_iter=state.iteration,
        converged=out.stop_reason == "tol", stop_reason=out.stop_reason, message=out.message,
        n_samples=int(summary.n_rows), n_fit=int(n_fit), columns=src.columns, component_sizes=np.array(nk),
        col_means=np.where(count > 0, summary.mean, np.nan), prior=spec, reg_covar=float(config.reg_covar),
        tol=float(config.tol), max_iter=int(config.max_iter),
    )


# ---------------------------------------------------------------------------- impute
def _impute_block(block: np.ndarray, imputer) -> np.ndarray:
    if block.shape[0] == 0:
        return np.asarray(block, dtype=float)
    return imputer.transform(np.asarray(block, dtype=float))


def impute(X, result: DaskEMResult, *, predictive: str = "auto", variable=None, columns=None, chunk_rows=None):
    """Conditional-mean imputation of every block, lazily (``map_blocks``).

    Parameters
    ----------
    X
        Any input of :func:`fit`, with the fitted number of columns.
    result : DaskEMResult
    predictive : {"auto", "student_t", "gaussian"}
        See :meth:`DaskEMResult.to_imputer`.

    Returns
    -------
    dask.array.Array (n, D), or a DataArray backed by one when ``X`` is a DataArray
        Observed entries bit for bit, missing ones imputed; nothing is computed until asked
        (``.compute()``, ``.to_zarr(...)``). A block with a value the model cannot impute
        (inf, beyond ±1e100) raises when it is computed.
    """
    src = _source(X, variable=variable, columns=columns, chunk_rows=chunk_rows)
    arr = src.array
    if arr.shape[1] != result.n_features:
        raise BadInputError(f"X has {arr.shape[1]} column(s) but the mixture was fitted on {result.n_features}.")
    if src.columns is not None and result.columns is not None and tuple(src.columns) != tuple(result.columns):
        raise BadInputError(f"X has columns {list(src.columns)} but the mixture was fitted on {list(result.columns)}. "
                            "Pass the same columns in the same order.")
    imputer = result.to_imputer(predictive)
    if result.columns is not None:  # blocks are plain arrays: the names were checked above
        imputer._set_features(None, result.n_features)
    out = arr.map_blocks(_impute_block, imputer, dtype=np.float64)
    if src.template is not None:
        return src.template.copy(data=out)
    return out
