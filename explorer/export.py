"""Write imputations to files and read them back exactly (CSV, Parquet, netCDF).

:func:`export_imputations` writes the single imputation (``transform``'s output), optionally ``m``
multiple imputations (``sample``'s output) and the ``missing`` mask (True = the value was imputed)
in the format its file suffix names; :func:`read_imputations` reads any of them back exactly.

``.csv`` and ``.parquet`` - one long table:

* ``imputation`` (int): 0 = the single imputation, 1..m = the multiple imputations (draws);
* ``row``: the row label (the index given, default 0..n-1);
* one column per feature, in the given order;
* with ``missing``: one boolean column ``missing:<feature>`` per feature (True = imputed), the
  same in every block.

So ``df[df.imputation == 0]`` is the filled table and ``df[df.imputation > 0]`` is the usual long
format of multiple-imputation software (pool with Rubin's rules by ``imputation``). CSV floats are
written with the shortest representation that reads back to the same float64 (read them with
``float_precision="round_trip"`` in pandas 2; pandas 3 does by default).

``.nc`` - netCDF 3 (xarray's ``scipy`` engine, no extra package) holding the
:class:`xarray.Dataset` of :func:`to_dataset`: ``imputed`` (row, column), ``samples``
(imputation, row, column) with ``imputation`` = 1..m, ``missing`` (row, column, bool), and the
``row`` / ``column`` coordinates.

Fitted models are saved by :mod:`explorer.persistence` (``save_model`` / ``load_model``).
"""


from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from explorer.core.deprecation import moved_names
from explorer.core.validation import BadInputError

__all__ = [
    "FORMATS",
    "Imputations",
    "export_imputations",
    "export_table_imputations",
    "read_imputations",
    "to_dataset",
    "to_long_frame",
]

#: File suffixes understood by :func:`export_imputations` / :func:`read_imputations`.
FORMATS = {".csv": "CSV (long table)", ".parquet": "Parquet (long table)", ".nc": "netCDF 3 (xarray Dataset)"}

_ID_COLUMNS = ("imputation", "row")
# pandas < 3 needs the round-trip float parser to read back the float64 it wrote; pandas 3 does by default
_EXACT_FLOATS = {"float_precision": "round_trip"} if int(pd.__version__.split(".")[0]) < 3 else {}
_MASK_PREFIX = "missing:"


# ============================================================================ imputations
@dataclass(frozen=True)
class Imputations:
    """What :func:`read_imputations` returns (and :func:`export_imputations` writes).

    Attributes
    ----------
    imputed : ndarray of shape (n_samples, n_features)
        The single imputation.
    samples : ndarray of shape (m, n_samples, n_features) or None
        The multiple imputations.
    missing : ndarray of bool, shape (n_samples, n_features), or None
        True = the entry was imputed.
    columns : list of str
    index : list
        Row labels.
    """

    imputed: np.ndarray
    samples: np.ndarray | None
    missing: np.ndarray | None
    columns: list
    index: list

    def to_frame(self) -> pd.DataFrame:
        """The single imputation as a DataFrame with the row labels and column names."""
        return pd.DataFrame(self.imputed, index=pd.Index(self.index, name="row"), columns=self.columns)


def _format_of(path) -> str:
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        known = ", ".join(f"{s} ({what})" for s, what in FORMATS.items())
        raise BadInputError(
            f"unknown file type {suffix or '(no suffix)'!r} for {os.fspath(path)!r}; the suffix chooses the "
            f"format: {known}."
        )
    return suffix


def _float_array(value, name: str) -> np.ndarray:
    if isinstance(value, pd.DataFrame):
        value = value.to_numpy()
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise BadInputError(f"{name} must hold numbers only (a float array).") from None
    return arr


def _check_finite(arr: np.ndarray, name: str, columns) -> None:
    bad = ~np.isfinite(arr)
    if bad.any():
        where = np.argwhere(bad)[0]
        col = columns[where[-1]]
        what = "NaN" if np.isnan(arr[tuple(where)]) else "infinite"
        raise BadInputError(
            f"{name} has {int(bad.sum())} NaN or infinite value(s) (the first, {what}, in column {col!r}); "
            "export imputed data (the output of transform / sample), not the incomplete data."
        )


def _prepare(X_imputed, samples, missing, columns, index):
    """Validated ``(X, samples, missing, columns, index)``: float arrays, bool mask, str names, row labels."""
    if isinstance(X_imputed, pd.DataFrame):
        columns = list(X_imputed.columns) if columns is None else columns
        index = list(X_imputed.index) if index is None else index
    X = _float_array(X_imputed, "X_imputed")
    if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
        raise BadInputError(f"X_imputed must be a non-empty 2-D table (rows x columns); got shape {X.shape}.")
    n, d = X.shape
    columns = [f"x{j}" for j in range(d)] if columns is None else [str(c) for c in columns]
    if len(columns) != d:
        raise BadInputError(f"{len(columns)} column name(s) given for the {d} column(s) of X_imputed.")
    if len(set(columns)) != d:
        dup = sorted({c for c in columns if columns.count(c) > 1})
        raise BadInputError(f"column names must be unique; repeated: {dup}.")
    index = list(range(n)) if index is None else list(np.asarray(index, dtype=object).tolist())
    if len(index) != n:
        raise BadInputError(f"{len(index)} row label(s) given for the {n} row(s) of X_imputed.")
    if len(pd.unique(pd.Series(index, dtype=object))) != n:
        raise BadInputError("row labels (index) must be unique.")
    _check_finite(X, "X_imputed", columns)
    if missing is not None:
        m_arr = np.asarray(missing)
        if m_arr.shape != (n, d):
            raise BadInputError(f"missing has shape {m_arr.shape} but X_imputed has shape {(n, d)}.")
        if m_arr.dtype != bool:
            if not np.isin(m_arr, (0, 1)).all():
                raise BadInputError("missing must be boolean (True = missing) or 0/1.")
            m_arr = m_arr.astype(bool)
        missing = m_arr
    if samples is not None:
        S = _float_array(samples, "samples")
        if S.ndim != 3 or S.shape[1:] != (n, d) or S.shape[0] == 0:
            raise BadInputError(
                f"samples must have shape (m, {n}, {d}) (m imputations of X_imputed's rows and columns); "
                f"got {S.shape}."
            )
        _check_finite(S, "samples", columns)
        if missing is not None:
            obs = ~missing
            for k in range(S.shape[0]):
                if not np.array_equal(S[k][obs], X[obs]):
                    raise BadInputError(
                        f"imputation {k + 1} differs from X_imputed on observed entries (missing is False); "
                        "observed values are the data and must be the same in every imputation. Pass the "
                        "samples and the single imputation of the same data."
                    )
        samples = S
    return X, samples, missing, columns, index


def to_long_frame(X_imputed, samples=None, missing=None, *, columns=None, index=None) -> pd.DataFrame:
    """The long table written to CSV / Parquet (see the module docstring for its layout)."""
    X, S, missing, columns, index = _prepare(X_imputed, samples, missing, columns, index)
    clash = [c for c in columns if c in _ID_COLUMNS or c.startswith(_MASK_PREFIX)]
    if clash:
        raise BadInputError(
            f"column name(s) {clash} clash with the long table's own columns ('imputation', 'row', "
            f"'{_MASK_PREFIX}<column>'); rename them, or write a .nc file."
        )
    blocks = [X] if S is None else [X, *S]
    n = X.shape[0]
    frame = pd.DataFrame(np.concatenate(blocks, axis=0), columns=columns)
    frame.insert(0, "row", pd.Series(index * len(blocks), dtype=object if not _all_int(index) else np.int64))
    frame.insert(0, "imputation", np.repeat(np.arange(len(blocks), dtype=np.int64), n))
    if missing is not None:
        mask = pd.DataFrame(np.tile(missing, (len(blocks), 1)), columns=[_MASK_PREFIX + c for c in columns])
        frame = pd.concat([frame, mask], axis=1)
    return frame


def _all_int(values) -> bool:
    return all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in values)


def to_dataset(X_imputed, samples=None, missing=None, *, columns=None, index=None, attrs=None):
    """The :class:`xarray.Dataset` written to netCDF: ``imputed``, ``samples`` (``imputation`` = 1..m), ``missing``."""
    import xarray as xr

    X, S, missing, columns, index = _prepare(X_imputed, samples, missing, columns, index)
    row = np.asarray(index, dtype=np.int64 if _all_int(index) else object)
    if row.dtype == object:
        row = np.asarray([str(v) for v in index], dtype=object)
    coords = {"row": row, "column": np.asarray(columns, dtype=object)}
    data = {"imputed": (("row", "column"), X, {"long_name": "single imputation (observed values unchanged)"})}
    if S is not None:
        coords["imputation"] = np.arange(1, S.shape[0] + 1, dtype=np.int64)
        data["samples"] = (("imputation", "row", "column"), S,
                           {"long_name": "multiple imputations (draws of the missing values)"})
    if missing is not None:
        data["missing"] = (("row", "column"), missing, {"long_name": "True = the value was missing and imputed"})
    from explorer import __version__

    ds_attrs = {"title": "imputed data", "source": f"explorer {__version__}"}
    ds_attrs.update(attrs or {})
    return xr.Dataset(data, coords=coords, attrs=ds_attrs)


def export_imputations(path, X_imputed, samples=None, missing=None, *, columns=None, index=None) -> Path:
    """Write the single imputation, optionally ``m`` multiple imputations and the ``missing`` mask.

    The format follows the suffix of ``path``: ``.csv`` / ``.parquet`` (one long table with an
    ``imputation`` column, 0 = the single imputation, 1..m = the draws) or ``.nc`` (netCDF 3, an
    xarray Dataset with an ``imputation`` dimension); see :mod:`explorer.export`.

    Parameters
    ----------
    path : str or os.PathLike
        Overwritten if it exists.
    X_imputed : array-like or DataFrame of shape (n_samples, n_features)
        The single imputation (no NaN). A DataFrame gives the default ``columns`` and ``index``.
    samples : array-like of shape (m, n_samples, n_features), optional
        Multiple imputations (no NaN).
    missing : array-like of bool, shape (n_samples, n_features), optional
        True = imputed. When given, every imputation must equal ``X_imputed`` where it is False.
    columns : sequence of str, optional
        Default ``x0, x1, ...`` (or the DataFrame's columns).
    index : sequence, optional
        Row labels, unique; default 0..n-1 (or the DataFrame's index).

    Returns
    -------
    pathlib.Path
        The path written.

    Raises
    ------
    BadInputError
        Unknown suffix, shape mismatch, NaN / inf values, observed values that differ between
        imputations, column names that clash with the long table's own, Parquet without pyarrow.
    """
    fmt = _format_of(path)
    path = Path(path)
    if fmt == ".nc":
        ds = to_dataset(X_imputed, samples, missing, columns=columns, index=index)
        ds.to_netcdf(path, engine="scipy")
        return path
    return _write_long_table(to_long_frame(X_imputed, samples, missing, columns=columns, index=index), path, fmt)


def _write_long_table(frame: pd.DataFrame, path: Path, fmt: str) -> Path:
    if fmt == ".csv":
        frame.to_csv(path, index=False)
    else:
        _require_pyarrow()
        frame.to_parquet(path, index=False, engine="pyarrow")
    return path


def export_table_imputations(path, imputed, samples=None, missing=None) -> Path:
    """Write imputations of a table with text / category columns (``MixedMixtureImputer``'s output).

    The long table of :func:`export_imputations` (``imputation``, ``row``, the columns, ``missing:<column>``)
    with each column's own type (categories as their level text). CSV or Parquet; netCDF holds numbers only and
    is refused.

    Parameters
    ----------
    path : str or os.PathLike
    imputed : DataFrame
        The single imputation (``transform``); its index labels the rows.
    samples : list of DataFrame, optional
        The draws (``sample``).
    missing : ndarray of bool (n_samples, n_features), optional
    """
    fmt = _format_of(path)
    if fmt == ".nc":
        raise BadInputError("netCDF holds numbers only; write a table with text columns to .csv or .parquet.")
    clash = [c for c in imputed.columns if str(c) in _ID_COLUMNS or str(c).startswith(_MASK_PREFIX)]
    if clash:
        raise BadInputError(f"column name(s) {clash} clash with the long table's own columns; rename them.")
    blocks = []
    for m, block in enumerate([imputed, *(samples or [])]):
        frame = block.copy()
        frame.insert(0, "row", list(imputed.index))
        frame.insert(0, "imputation", m)
        if missing is not None:
            for j, c in enumerate(imputed.columns):
                frame[f"{_MASK_PREFIX}{c}"] = np.asarray(missing)[:, j]
        blocks.append(frame)
    table = pd.concat(blocks, ignore_index=True)
    for c in imputed.columns:  # categories as their text: one dtype per column across the blocks
        if isinstance(imputed[c].dtype, pd.CategoricalDtype):
            table[c] = table[c].astype(object)
    return _write_long_table(table, Path(path), fmt)


def _require_pyarrow() -> None:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise BadInputError(
            "writing or reading Parquet needs the pyarrow package (pip install pyarrow); or use .csv or .nc."
        ) from None


def read_imputations(path) -> Imputations:
    """Read a file written by :func:`export_imputations` (format from the suffix)."""
    fmt = _format_of(path)
    if not Path(path).is_file():
        raise BadInputError(f"no such file: {os.fspath(path)!r}.")
    if fmt == ".nc":
        import xarray as xr

        with xr.open_dataset(path, engine="scipy") as ds:
            ds = ds.load()
        if "imputed" not in ds:
            raise BadInputError(f"{os.fspath(path)!r} has no 'imputed' variable: not written by export_imputations.")
        return Imputations(
            imputed=np.asarray(ds["imputed"].values, dtype=np.float64),
            samples=np.asarray(ds["samples"].values, dtype=np.float64) if "samples" in ds else None,
            missing=np.asarray(ds["missing"].values, dtype=bool) if "missing" in ds else None,
            columns=[str(c) for c in ds["column"].values],
            index=ds["row"].values.tolist(),
        )
    if fmt == ".csv":
        frame = pd.read_csv(path, **_EXACT_FLOATS)
    else:
        _require_pyarrow()
        frame = pd.read_parquet(path, engine="pyarrow")
    if list(frame.columns[:2]) != list(_ID_COLUMNS):
        raise BadInputError(f"{os.fspath(path)!r} does not start with the columns 'imputation', 'row': "
                            "not written by export_imputations.")
    mask_cols = [c for c in frame.columns if str(c).startswith(_MASK_PREFIX)]
    columns = [str(c) for c in frame.columns[2:] if c not in mask_cols]
    imp = frame["imputation"].to_numpy()
    first = frame[imp == 0]
    n, m = len(first), int(imp.max())
    values = frame[columns].to_numpy(dtype=np.float64)
    samples = values[n:].reshape(m, n, len(columns)) if m > 0 else None
    missing = first[mask_cols].to_numpy(dtype=bool) if mask_cols else None
    return Imputations(imputed=values[:n], samples=samples, missing=missing, columns=columns,
                       index=first["row"].tolist())


# ============================================================================ models


# save_model / load_model moved to explorer.persistence: the old path warns for one release
__getattr__ = moved_names(__name__, {"save_model": "explorer.persistence", "load_model": "explorer.persistence"})
