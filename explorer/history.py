"""Histories of iterative fits as labelled :class:`xarray.Dataset` objects.

The numerical core records one plain dictionary per iteration (see
:func:`explorer.core.mixtures.em_gmm.snapshot`); this module turns such a trace into a Dataset with
dimensions ``iteration``, ``component``, ``feature`` and ``feature_`` (the second axis of a
covariance), so that apps and notebooks can select, plot and save it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict

import numpy as np
import xarray as xr

__all__ = ["em_history", "vb_history"]

_SCALARS = ("log_likelihood", "objective", "resp_entropy", "rmse", "mae")
_VB_SCALARS = ("elbo", "log_likelihood", "objective", "weights_perplexity", "rmse", "mae")


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
    return _build_history(
        trace, scalars=_SCALARS, per_component=("weights", "hard_counts"), integers=(),
        algorithm="EM for Gaussian mixtures with missing values",
        columns=columns, config=config, stop_reason=stop_reason, attrs=attrs,
    )


def vb_history(
    trace: Sequence[dict],
    *,
    columns: Sequence[str] | None = None,
    config=None,
    stop_reason: str | None = None,
    attrs: dict | None = None,
) -> xr.Dataset:
    """Convert a variational DP-mixture trace (:func:`explorer.core.mixtures.vb_dpgmm.snapshot` dicts) to a Dataset.

    Parameters
    ----------
    trace : sequence of dict
        Snapshots with keys ``iteration``, ``elbo``, ``log_likelihood``, ``objective``,
        ``weights`` (K,) (expected weights :math:`E_q[\\pi_k]`), ``means`` (K, D),
        ``covariances`` (K, D, D) (plug-in :math:`\\Psi_k/\\nu_k`), ``n_effective``,
        ``weights_perplexity`` and optionally ``rmse``/``mae``.
    columns, config, stop_reason, attrs
        As in :func:`em_history`.

    Returns
    -------
    xarray.Dataset
        Variables ``elbo(iteration)`` (NaN where undefined), ``log_likelihood(iteration)``
        (plug-in observed-data log-likelihood), ``objective(iteration)``,
        ``weights_perplexity(iteration)``, ``n_effective(iteration)`` (int),
        ``weights(iteration, component)``, ``means(iteration, component, feature)``,
        ``covariances(iteration, component, feature, feature_)`` and, when known,
        ``rmse(iteration)``/``mae(iteration)``.

    Examples
    --------
    >>> import numpy as np
    >>> snap = dict(iteration=0, elbo=-2.0, log_likelihood=-1.0, objective=-2.0, weights=np.ones(1),
    ...             means=np.zeros((1, 2)), covariances=np.eye(2)[None], n_effective=1)
    >>> int(vb_history([snap])["n_effective"][0])
    1
    """
    ds = _build_history(
        trace, scalars=_VB_SCALARS, per_component=("weights",), integers=("n_effective",),
        algorithm="Variational Dirichlet-process Gaussian mixture with missing values",
        columns=columns, config=config, stop_reason=stop_reason, attrs=attrs,
    )
    ds["weights"].attrs["long_name"] = "expected mixing weights E_q[pi_k]"
    if "elbo" in ds:
        ds["elbo"].attrs["long_name"] = "evidence lower bound"
    return ds


def _build_history(trace, *, scalars, per_component, integers, algorithm, columns, config, stop_reason,
                   attrs) -> xr.Dataset:
    """Shared builder: scalar, integer and per-component series plus means and covariances."""
    if not trace:
        raise ValueError("The trace is empty: nothing to convert.")
    n_components, n_features = np.shape(trace[0]["means"])
    columns = list(columns) if columns is not None else [f"x{j}" for j in range(n_features)]
    if len(columns) != n_features:
        raise ValueError(f"{len(columns)} column names for {n_features} features.")
    iters = np.array([t["iteration"] for t in trace], dtype=int)
    data_vars = {}
    for key in scalars:
        if all(key in t for t in trace):
            data_vars[key] = ("iteration", np.array([t[key] for t in trace], dtype=float))
    for key in integers:
        data_vars[key] = ("iteration", np.array([t[key] for t in trace], dtype=int))
    for key in per_component:
        data_vars[key] = (("iteration", "component"), np.stack([t[key] for t in trace]))
    data_vars["means"] = (("iteration", "component", "feature"), np.stack([t["means"] for t in trace]))
    data_vars["covariances"] = (
        ("iteration", "component", "feature", "feature_"),
        np.stack([t["covariances"] for t in trace]),
    )
    all_attrs = {"algorithm": algorithm}
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
    if "log_likelihood" in ds:
        ds["log_likelihood"].attrs["long_name"] = "observed-data log-likelihood"
    return ds
