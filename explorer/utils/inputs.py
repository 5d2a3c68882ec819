"""Input adapters of the estimators: every accepted kind of ``X`` in, the same kind out.

An estimator accepts a numpy array (NaN = missing), a pandas DataFrame, a 2-D xarray DataArray or an
:class:`~explorer.core.data.IncompleteData`. :func:`unwrap` gives the matrix to validate with its column
names; :func:`wrap` and :func:`wrap_draws` give results back in the kind of the input (same index, columns,
coordinates); :func:`input_kind` names the kind. Sparse input is refused (:func:`reject_sparse`).
:func:`check_feature_names` keeps an estimator's ``n_features_in_`` / ``feature_names_in_`` (set in fit, checked
after) and :func:`feature_names_out` gives its ``get_feature_names_out``.
"""

from __future__ import annotations

import numpy as np

from explorer.core.data import IncompleteData
from explorer.core.validation import BadInputError

__all__ = [
    "check_feature_names",
    "feature_names",
    "feature_names_out",
    "input_kind",
    "reject_sparse",
    "unwrap",
    "wrap",
    "wrap_draws",
]


def reject_sparse(X) -> None:
    if hasattr(X, "tocsr") or hasattr(X, "sparse") and hasattr(X.sparse, "to_dense"):
        raise TypeError(
            "Sparse input is not supported: missing entries must be NaN in a dense array. "
            "Convert with X.toarray() (or DataFrame.sparse.to_dense())."
        )


def feature_names(X):
    """Column names of a DataFrame-like ``X`` as an object array, or None (all must be str)."""
    cols = getattr(X, "columns", None)
    if cols is None:
        return None
    names = np.asarray(list(cols), dtype=object)
    if names.size and all(isinstance(c, str) for c in names):
        return names
    return None


def check_feature_names(est, names, n_features: int | None = None, *, reset: bool = False) -> None:
    """scikit-learn's bookkeeping of the features of ``est``, with this library's messages.

    ``reset=True`` (in fit): set ``est.n_features_in_ = n_features`` and ``est.feature_names_in_ = names``
    (deleted when ``names`` is None: an array after a DataFrame forgets the names). ``reset=False`` (after
    fit): ``names`` (the string column names of the input, from :func:`unwrap`, or None) must equal the
    fitted ones when both exist, and ``n_features`` (None = not checked, e.g. before the values are read)
    must equal ``est.n_features_in_``; else a :class:`BadInputError` naming both.
    """
    if reset:
        if n_features is None:
            raise TypeError("check_feature_names(reset=True) needs n_features.")
        if names is not None:
            est.feature_names_in_ = names
        elif hasattr(est, "feature_names_in_"):
            del est.feature_names_in_
        est.n_features_in_ = int(n_features)
        return
    fitted = getattr(est, "feature_names_in_", None)
    if names is not None and fitted is not None and not np.array_equal(names, fitted):
        raise BadInputError(
            f"X has columns {list(names)} but {type(est).__name__} was fitted on {list(fitted)}. "
            "Pass the same columns in the same order."
        )
    if n_features is not None and n_features != est.n_features_in_:
        raise BadInputError(
            f"X has {n_features} features, but {type(est).__name__} is expecting {est.n_features_in_} features as "
            "input. Pass data with the same columns, in the same order, as in fit."
        )


def feature_names_out(est, input_features=None) -> np.ndarray:
    """``get_feature_names_out`` of an imputer (it keeps the columns): ``input_features`` checked against the
    fitted names, else the fitted names, else ``x0, x1, ...``."""
    from sklearn.utils.validation import check_is_fitted

    check_is_fitted(est, "n_features_in_")
    fitted = getattr(est, "feature_names_in_", None)
    if input_features is not None:
        names = np.asarray(input_features, dtype=object)
        if names.size != est.n_features_in_ or (fitted is not None and not np.array_equal(names, fitted)):
            raise BadInputError("input_features do not match the features seen in fit.")
        return names
    if fitted is not None:
        return fitted.copy()
    return np.asarray([f"x{j}" for j in range(est.n_features_in_)], dtype=object)


def input_kind(X) -> str:
    """``"incomplete"``, ``"dataframe"``, ``"dataarray"`` or ``"array"`` (anything else numpy reads)."""
    if isinstance(X, IncompleteData):
        return "incomplete"
    module = type(X).__module__ or ""
    if module.startswith("pandas") and hasattr(X, "columns") and hasattr(X, "iloc"):
        return "dataframe"
    if module.startswith("xarray"):
        if type(X).__name__ == "DataArray":
            return "dataarray"
        raise BadInputError(
            f"X is an xarray {type(X).__name__}; pass a 2-D DataArray (rows x columns), e.g. "
            "ds.to_dataarray(dim='feature').T, or convert it with explorer.io.from_xarray(ds)."
        )
    return "array"


def unwrap(X, name: str = "X"):
    """``(matrix, names, labels)`` of any accepted input kind.

    ``matrix`` is what :func:`as_float_matrix` validates, ``names`` the string column names (for
    ``feature_names_in_``; None when the columns are unnamed or not all strings) and ``labels``
    column names for error messages (or None).
    """
    kind = input_kind(X)
    if kind == "incomplete":
        names = np.asarray(X.columns, dtype=object)
        return np.array(X.values), names, list(X.columns)
    reject_sparse(X)
    if kind == "dataframe":
        from explorer.io import frame_values

        names = feature_names(X)
        return frame_values(X, name=name), names, [str(c) for c in X.columns]
    if kind == "dataarray":
        if X.ndim != 2:
            raise BadInputError(
                f"{name} must be a 2-D DataArray (rows x columns); got dims {X.dims}. Stack or select "
                "dimensions first (DataArray.stack / .sel)."
            )
        col_dim = X.dims[1]
        names = None
        if col_dim in X.coords:
            coord = list(X.coords[col_dim].values)
            if coord and all(isinstance(c, str) for c in coord):
                names = np.asarray(coord, dtype=object)
        labels = None if names is None else list(names)
        return np.asarray(X.values), names, labels
    names = feature_names(X)
    return X, names, None if names is None else [str(c) for c in names]


def wrap(X, out: np.ndarray, what: str = ""):
    """``out`` (n_samples, n_features) in the kind of ``X``: DataFrame, DataArray, IncompleteData or array."""
    kind = input_kind(X)
    if kind == "dataframe":
        import pandas as pd

        return pd.DataFrame(out, index=X.index, columns=X.columns)
    if kind == "dataarray":
        return X.copy(data=out)
    if kind == "incomplete":
        note = f"{int(X.missing.sum())} missing entries imputed{what}"
        return IncompleteData(
            values=out, missing=np.zeros(out.shape, dtype=bool), columns=X.columns, binary=X.binary,
            name=X.name, description=f"{X.description}; {note}" if X.description else note,
        )
    return out


def wrap_draws(X, draws: np.ndarray):
    """``draws`` (n_imputations, n_samples, n_features) in the kind of ``X`` (see ``sample``)."""
    kind = input_kind(X)
    m = draws.shape[0]
    if kind == "dataframe":
        import pandas as pd

        frames = [pd.DataFrame(d, index=X.index, columns=X.columns) for d in draws]
        return pd.concat(frames, keys=range(m), names=["imputation", *X.index.names])
    if kind == "dataarray":
        import xarray as xr

        if "imputation" in X.dims:
            raise BadInputError("X already has a dimension named 'imputation'; rename it before sampling.")
        coords = {k: v for k, v in X.coords.items()}
        coords["imputation"] = np.arange(m)
        return xr.DataArray(draws, dims=("imputation", *X.dims), coords=coords, name=X.name, attrs=dict(X.attrs))
    if kind == "incomplete":
        import xarray as xr

        return xr.DataArray(
            draws, dims=("imputation", "sample", "feature"),
            coords={"imputation": np.arange(m), "feature": list(X.columns)},
            name=X.name or None, attrs={"description": X.description} if X.description else {},
        )
    return draws
