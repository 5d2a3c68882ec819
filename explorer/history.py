"""Histories of iterative fits as labelled :class:`xarray.Dataset` objects.

The numerical core records one plain dictionary per iteration (see
:func:`explorer.core.em_gmm.snapshot`); this module turns such a trace into a Dataset with
dimensions ``iteration``, ``component``, ``feature`` and ``feature_`` (the second axis of a
covariance), so that apps and notebooks can select, plot and save it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict

import numpy as np
import xarray as xr

__all__ = ["em_history"]

_SCALARS = ("log_likelihood", "objective", "resp_entropy", "rmse", "mae")


def em_history(
    trace: Sequence[dict],
    *,
    columns: Sequence[str] | None = None,
    config=None,
    stop_reason: str | None = None,
    attrs: dict | None = None,
) -> xr.Dataset:
    """Convert an EM trace (a sequence of snapshot dicts) to an xarray Dataset.

    Parameters
    ----------
    trace : sequence of dict
        Snapshots with keys ``iteration``, ``log_likelihood``, ``objective``, ``weights``
        (K,), ``means`` (K, D), ``covariances`` (K, D, D), ``resp_entropy``, ``hard_counts``
        (K,) and optionally ``rmse``/``mae``.
    columns : sequence of str, optional
        Feature names (default ``x0, x1, ...``).
    config : dataclass, optional
        Stored as JSON in ``attrs["config"]``.

    Returns
    -------
    xarray.Dataset
        Variables ``log_likelihood(iteration)``, ``objective(iteration)``,
        ``weights(iteration, component)``, ``means(iteration, component, feature)``,
        ``covariances(iteration, component, feature, feature_)``,
        ``resp_entropy(iteration)``, ``hard_counts(iteration, component)`` and, when the
        ground truth was known, ``rmse(iteration)`` and ``mae(iteration)``.

    Examples
    --------
    >>> import numpy as np
    >>> snap = dict(iteration=0, log_likelihood=-1.0, objective=-1.0, weights=np.ones(1),
    ...             means=np.zeros((1, 2)), covariances=np.eye(2)[None], resp_entropy=0.0,
    ...             hard_counts=np.array([3]))
    >>> em_history([snap]).sizes["iteration"]
    1
    """
    if not trace:
        raise ValueError("The trace is empty: nothing to convert.")
    n_components, n_features = np.shape(trace[0]["means"])
    columns = list(columns) if columns is not None else [f"x{j}" for j in range(n_features)]
    if len(columns) != n_features:
        raise ValueError(f"{len(columns)} column names for {n_features} features.")
    iters = np.array([t["iteration"] for t in trace], dtype=int)
    data_vars = {}
    for key in _SCALARS:
        if all(key in t for t in trace):
            data_vars[key] = ("iteration", np.array([t[key] for t in trace], dtype=float))
    data_vars["weights"] = (("iteration", "component"), np.stack([t["weights"] for t in trace]))
    data_vars["hard_counts"] = (("iteration", "component"), np.stack([t["hard_counts"] for t in trace]))
    data_vars["means"] = (("iteration", "component", "feature"), np.stack([t["means"] for t in trace]))
    data_vars["covariances"] = (
        ("iteration", "component", "feature", "feature_"),
        np.stack([t["covariances"] for t in trace]),
    )
    all_attrs = {"algorithm": "EM for Gaussian mixtures with missing values"}
    if config is not None:
        all_attrs["config"] = json.dumps(asdict(config))
    if stop_reason is not None:
        all_attrs["stop_reason"] = stop_reason
    all_attrs.update(attrs or {})
    ds = xr.Dataset(
        data_vars,
        coords={
            "iteration": iters,
            "component": np.arange(n_components),
            "feature": columns,
            "feature_": columns,
        },
        attrs=all_attrs,
    )
    ds["log_likelihood"].attrs["long_name"] = "observed-data log-likelihood"
    return ds
