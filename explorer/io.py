"""Load user data into :class:`~explorer.core.data.IncompleteData` (and back to pandas).

Loaders accept CSV files or uploaded bytes, pandas DataFrames, numpy arrays and xarray objects.
Missing cells become NaN / ``missing=True``: empty cells, ``?`` and ``NA`` by default in text,
``None`` / ``NaN`` / ``pd.NA`` in frames. Columns that are not numeric are an error that names
them, unless ``drop_non_numeric=True`` (the dropped names are then recorded in ``description``).

Uploads (bytes or file-like objects) larger than ``max_bytes`` (default 20 MB) are refused
before parsing, so an app cannot be made to parse arbitrarily large input.
"""

from __future__ import annotations

import csv
import io
import os
import re
from collections.abc import Sequence

import numpy as np
import pandas as pd

from explorer.core.data import IncompleteData
from explorer.core.validation import BadInputError, NonNumericError

__all__ = [
    "DEFAULT_MAX_BYTES",
    "encode_categoricals",
    "frame_values",
    "from_csv",
    "read_csv_table",
    "from_dataframe",
    "from_numpy",
    "from_xarray",
    "to_dataframe",
]

#: Default size limit for uploaded CSV content (bytes or file-like objects).
DEFAULT_MAX_BYTES = 20 * 1024 * 1024
#: A first column with a header, text in every row (no gap; not all numbers) and a different value in each of at least
#: this many rows names the rows, as R's row names do: it is read as the index, not as data (a column of names or
#: identifiers carries nothing a model could use, and as a category it would have a level per row).
ROW_NAME_MIN_ROWS = 20
_NA_DEFAULT = ("?", "NA", "")


# ---------------------------------------------------------------------------- helpers
def _read_text(src, max_bytes: int | None) -> tuple[str, str]:
    """Return ``(text, label)`` from a path, bytes or a file-like object."""
    if isinstance(src, (str, os.PathLike)):
        path = os.fspath(src)
        with open(path, "rb") as fh:
            raw = fh.read()
        return _decode(raw), os.path.basename(path)
    if isinstance(src, (bytes, bytearray, memoryview)):
        raw = bytes(src)
    elif hasattr(src, "read"):
        raw = src.read(-1 if max_bytes is None else max_bytes + 1)
    else:
        raise BadInputError(
            f"from_csv expects a path, bytes or a file-like object; got {type(src).__name__}."
        )
    if max_bytes is not None and len(raw) > max_bytes:
        raise BadInputError(
            f"the uploaded data are larger than the limit of {max_bytes / 2**20:.1f} MB "
            f"({'at least ' if hasattr(src, 'read') else ''}{len(raw) / 2**20:.1f} MB). Upload a smaller "
            "file (e.g. a subset of rows or columns), or raise max_bytes."
        )
    label = getattr(src, "name", "")
    label = os.path.basename(label) if isinstance(label, str) else ""
    return (raw if isinstance(raw, str) else _decode(raw)), label


_BINARY_SIGNATURES = {
    b"PK\x03\x04": "a zip archive (an Excel .xlsx or OpenDocument file is one)",
    b"\xd0\xcf\x11\xe0": "an old Excel / Office file",
    b"\x89HDF": "an HDF5 / netCDF-4 file",
    b"PAR1": "a Parquet file",
    b"%PDF": "a PDF document",
    b"\x1f\x8b": "a gzip-compressed file",
}


def _decode(raw: bytes) -> str:
    """Text of an uploaded table: UTF-8 (with or without BOM), UTF-16 (BOM, or the NUL pattern of
    UTF-16 without one) or, failing those, Latin-1 (every byte is a character there).

    Binary files (spreadsheets, archives, pickles...) are refused with what they look like: they
    are never parsed, let alone unpickled.
    """
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return raw.decode("utf-16")
        except UnicodeDecodeError:
            raise BadInputError("the file starts like UTF-16 text but is not valid UTF-16; save it as UTF-8 "
                                "(CSV UTF-8 in a spreadsheet's 'Save as').") from None
    for signature, what in _BINARY_SIGNATURES.items():
        if raw.startswith(signature):
            raise BadInputError(f"this is {what}, not a text table; save the data as CSV (comma-separated "
                                "text) and upload that.")
    head = raw[:4096]
    if len(head) >= 4 and head.count(0) >= len(head) // 4:
        # ASCII text in UTF-16 without a BOM: every other byte is NUL
        for enc, zeros in (("utf-16-le", head[1::2]), ("utf-16-be", head[0::2])):
            if zeros.count(0) >= 0.9 * len(zeros):
                try:
                    return raw.decode(enc)
                except UnicodeDecodeError:
                    break
    if raw.startswith(b"\x80") or b"\x00" in head:
        raise BadInputError("this is a binary file, not a text table (pickled or other binary data are never "
                            "read); save the data as CSV (comma-separated text) and upload that.")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def _plain_parse_error(exc: Exception) -> str:
    """pandas' / csv's parse error said in terms of the file (row numbers counted from 1, the header included)."""
    text = str(exc)
    m = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", text)
    if m:
        expected, line, saw = (int(g) for g in m.groups())
        return (f"line {line} has {saw} fields where the lines before it have {expected}; check that line for an "
                "extra separator (a comma inside a number or a name: quote the cell) or a missing one.")
    if "EOF inside string" in text or "unexpected end of data" in text or "EOF following escape" in text:
        m = re.search(r"line (\d+)", text)
        where = f" (starting at line {m.group(1)})" if m else ""
        return f"a quoted cell is never closed{where}: a double quote (\") is missing."
    if "No columns to parse" in text:
        return "the file has no columns to read."
    return ("the file could not be read as a table (rows of different lengths or unbalanced quotes?). "
            "Check the separator and the quoting.")


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _infer_header(rows: pd.DataFrame, na: set[str]) -> bool:
    """First row is a header if it is non-numeric where the rest of its column is numeric.

    Also a header when every cell of the first row is non-numeric text.
    """
    if len(rows) == 0:
        return False
    first = [str(c).strip() for c in rows.iloc[0]]
    if all(c not in na and not _is_number(c) for c in first):
        return True
    for j, cell in enumerate(first):
        if cell in na or _is_number(cell):
            continue
        rest = [str(c).strip() for c in rows.iloc[1:, j]]
        vals = [c for c in rest if c not in na]
        if vals and all(_is_number(c) for c in vals):
            return True
    return False


def _known(df: pd.DataFrame, columns, what: str) -> list[str]:
    """``columns`` as strings, every one a column of ``df`` (else a BadInputError that lists the columns)."""
    names = [str(c) for c in columns]
    unknown = [c for c in names if c not in df.columns]
    if unknown:
        shown = ", ".join(map(repr, list(df.columns)[:20]))
        raise BadInputError(f"{what}unknown column(s) {unknown}; available columns: {shown}.")
    return names


def _select(df: pd.DataFrame, columns) -> pd.DataFrame:
    return df if columns is None else df[_known(df, columns, "")]


def _exclude(df: pd.DataFrame, exclude) -> pd.DataFrame:
    if not exclude:
        return df
    names = _known(df, exclude, "cannot leave out ")
    if len(set(names)) >= df.shape[1]:
        raise BadInputError(f"leaving out {names} leaves no column.")
    return df.drop(columns=names)


def _column_to_float(s: pd.Series, na: set[str]) -> tuple[np.ndarray | None, str | None]:
    """Convert one column to float64 (NaN = missing); return (None, example) if not numeric."""
    dtype = s.dtype
    if pd.api.types.is_bool_dtype(dtype):
        return s.astype("float64").to_numpy(dtype=np.float64, na_value=np.nan), None
    if isinstance(dtype, pd.CategoricalDtype) or pd.api.types.is_datetime64_any_dtype(dtype) or (
        pd.api.types.is_timedelta64_dtype(dtype)
    ):
        bad = s.dropna()
        return None, (str(bad.iloc[0]) if len(bad) else str(dtype))
    if pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_complex_dtype(dtype):
        return s.to_numpy(dtype=np.float64, na_value=np.nan), None
    # object / string: strip, map NA tokens to missing, parse the rest
    out = np.full(len(s), np.nan)
    for i, v in enumerate(s.tolist()):
        if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)):
            continue
        if isinstance(v, (bool, np.bool_)):
            out[i] = float(v)
            continue
        if isinstance(v, (int, float, np.integer, np.floating)):
            out[i] = float(v)
            continue
        text = str(v).strip()
        if text in na:
            continue
        try:
            out[i] = float(text)
        except ValueError:
            return None, text
    return out, None


def _list_bad(bad) -> str:
    listed = ", ".join(f"{c!r} (e.g. {ex!r})" for c, ex in bad[:8])
    more = f" and {len(bad) - 8} more" if len(bad) > 8 else ""
    return f"{len(bad)} column(s) are not numeric: {listed}{more}"


def frame_values(df: pd.DataFrame, *, name: str = "X", na_values: Sequence[str] = _NA_DEFAULT) -> np.ndarray:
    """The float64 matrix of a DataFrame's numeric columns (NaN / None / ``pd.NA`` / ``na_values`` = missing).

    What the estimators do with a DataFrame: the conversion of :func:`from_dataframe`, column by
    column, with an error naming every non-numeric column (categorical, text, dates) and the remedy
    (:func:`encode_categoricals`).

    Raises
    ------
    BadInputError
        Non-numeric columns.
    """
    na = {str(t).strip() for t in (na_values or ())}
    arrays, bad = [], []
    for j in range(df.shape[1]):
        arr, example = _column_to_float(df.iloc[:, j], na)
        if arr is None:
            bad.append((f"{str(df.columns[j])!r} (column {j})", example))
        else:
            arrays.append(arr)
    if bad:
        listed = ", ".join(f"{c}, e.g. {ex!r}" for c, ex in bad[:8]) + (f" and {len(bad) - 8} more" if len(bad) > 8 else "")
        raise NonNumericError(
            f"{name}: {len(bad)} column(s) are not numeric: {listed}. Impute them as categories with "
            "explorer.impute.mixed.MixedMixtureImputer (the DataFrame as it is); or one-hot encode categories with "
            "explorer.io.encode_categoricals(df, how='onehot'), drop those columns "
            "(encode_categoricals(df, how='drop')), or encode them as numbers yourself (0/1 for yes/no); "
            "missing cells are NaN."
        )
    if not arrays:
        return np.empty((df.shape[0], 0))
    return np.column_stack(arrays)


def encode_categoricals(df: pd.DataFrame, how: str = "onehot", *, columns: Sequence[str] | None = None,
                        max_levels: int = 50, na_values: Sequence[str] = _NA_DEFAULT, sep: str = "=") -> pd.DataFrame:
    """Make a DataFrame numeric for the imputers: one-hot encode or drop its non-numeric columns.

    Numeric, boolean and nullable columns, and text columns whose cells all parse as numbers, are
    kept unchanged. Every other column (categorical, text, dates) is either replaced, in place, by
    one 0/1 indicator column per level named ``"<column><sep><level>"`` (``how="onehot"``), or
    dropped (``how="drop"``). A missing cell (NaN, None, ``pd.NA`` or one of ``na_values``) stays
    missing: all indicators of that row are NaN, so an imputer fills them in (with real numbers
    between about 0 and 1; the largest of a group is the most likely level).

    Parameters
    ----------
    df : pandas.DataFrame
    how : {"onehot", "drop"}, default "onehot"
    columns : sequence of str, optional
        Columns to encode (they may be numeric, e.g. integer codes of categories); default: every
        non-numeric column.
    max_levels : int, default 50
        Refuse to one-hot encode a column with more distinct values (an identifier or free text
        would add a column per row); drop such columns instead.
    na_values : sequence of str, default ('?', 'NA', '')
        Cell texts that mean "missing".
    sep : str, default "="
        Between the column name and the level in the indicator names.

    Returns
    -------
    pandas.DataFrame
        Same index; the numeric columns first kept in their order with the indicators in place of
        their column.

    Raises
    ------
    BadInputError
        Unknown ``how`` or column, a date column with ``how="onehot"``, more than ``max_levels`` levels.

    Examples
    --------
    >>> import pandas as pd
    >>> from explorer.io import encode_categoricals
    >>> df = pd.DataFrame({"size": [1.0, 2.0, None], "colour": ["red", None, "blue"]})
    >>> encode_categoricals(df)
       size  colour=blue  colour=red
    0   1.0          0.0         1.0
    1   2.0          NaN         NaN
    2   NaN          1.0         0.0
    >>> list(encode_categoricals(df, how="drop").columns)
    ['size']
    """
    if not isinstance(df, pd.DataFrame):
        raise BadInputError(f"encode_categoricals expects a pandas DataFrame; got {type(df).__name__}.")
    if how not in ("onehot", "drop"):
        raise BadInputError(f"how must be 'onehot' or 'drop', got {how!r}.")
    na = {str(t).strip() for t in (na_values or ())}
    labels = [str(c) for c in df.columns]
    if columns is not None:
        wanted = [str(c) for c in columns]
        unknown = [c for c in wanted if c not in labels]
        if unknown:
            raise BadInputError(f"unknown column(s) {unknown}; available columns: {labels[:20]}.")
    parts = []
    for j, label in enumerate(labels):
        s = df.iloc[:, j]
        numeric = _column_to_float(s, na)[0]
        encode = label in wanted if columns is not None else numeric is None
        if not encode:
            parts.append(s.rename(label).to_frame())
            continue
        if how == "drop":
            continue
        if pd.api.types.is_datetime64_any_dtype(s.dtype) or pd.api.types.is_timedelta64_dtype(s.dtype):
            raise BadInputError(
                f"column {label!r} holds dates or durations, which one-hot encoding would turn into a column per "
                "value; convert it to a number (e.g. days since a start date) or drop it (how='drop')."
            )
        present = s.notna().to_numpy()
        text = [str(v).strip() if ok else None for v, ok in zip(s.tolist(), present)]
        text = [None if t is None or t in na else t for t in text]
        if isinstance(s.dtype, pd.CategoricalDtype):
            levels = [str(c).strip() for c in s.cat.categories]
        else:
            levels = sorted({t for t in text if t is not None})
        if len(levels) > max_levels:
            raise BadInputError(
                f"column {label!r} has {len(levels)} distinct values (more than max_levels={max_levels}); one-hot "
                "encoding would add a column for each. Drop it (how='drop' or leave it out of columns=), or "
                "raise max_levels."
            )
        miss = np.array([t is None for t in text], dtype=bool)
        block = {}
        for level in levels:
            ind = np.array([t == level for t in text], dtype=np.float64)
            ind[miss] = np.nan
            block[f"{label}{sep}{level}"] = ind
        parts.append(pd.DataFrame(block, index=df.index))
    if not parts:
        return pd.DataFrame(index=df.index)
    return pd.concat(parts, axis=1)


def _frame_to_data(
    df: pd.DataFrame, *, na_values, drop_non_numeric: bool, name: str, description: str
) -> IncompleteData:
    na = {str(t).strip() for t in (na_values or ())}
    cols, arrays, bad = [], [], []
    for label in df.columns:
        arr, example = _column_to_float(df[label], na)
        if arr is None:
            bad.append((str(label), example))
        else:
            cols.append(str(label))
            arrays.append(arr)
    if bad and not drop_non_numeric:
        raise NonNumericError(
            f"{_list_bad(bad)}. Drop them (drop_non_numeric=True or select columns=...) or encode them as "
            "numbers (0/1 for yes/no; explorer.io.encode_categoricals(df) one-hot encodes categories), or impute "
            "them as categories with explorer.impute.mixed.MixedMixtureImputer on a DataFrame; mark "
            f"missing cells with one of {sorted(na)}."
        )
    if not arrays:
        raise BadInputError("no numeric column left; the data need at least one numeric column.")
    if bad:
        note = "dropped non-numeric columns: " + ", ".join(c for c, _ in bad)
        description = f"{description}; {note}" if description else note
    X = np.column_stack(arrays)
    return IncompleteData.from_array(X, columns=cols, name=name, description=description)


def _read_raw(path_or_buffer, *, columns, na_values, max_bytes, header, names, sep, description, exclude=None):
    """``(frame of the cells as pandas parsed them, label, description)``: the shared reading of :func:`from_csv`
    and :func:`read_csv_table` (header inference, row names, NA tokens, column selection)."""
    text, label = _read_text(path_or_buffer, max_bytes)
    na = {str(t).strip() for t in na_values}
    engine = "python" if sep is None else "c"

    def parse(**kw) -> pd.DataFrame:
        try:
            return pd.read_csv(io.StringIO(text), sep=sep, header=None, skip_blank_lines=True, engine=engine, **kw)
        except (pd.errors.ParserError, pd.errors.EmptyDataError, csv.Error, ValueError) as exc:
            raise BadInputError(f"could not read the CSV data: {_plain_parse_error(exc)}") from None

    # the first rows as text decide the header; the full parse then uses pandas' C float parser
    peek = parse(dtype=str, keep_default_na=False, na_filter=False, nrows=50)
    has_header = _infer_header(peek, na) if header == "infer" else bool(header)
    row_names = False
    if has_header:
        head = [str(c).strip() for c in peek.iloc[0]]
        # R's write.csv and pandas' to_csv write the row names / index as a first column with an empty header
        row_names = peek.shape[1] > 1 and head[0] in ("", "Unnamed: 0")
        head = [c if c else f"x{j}" for j, c in enumerate(head)]
    elif names is not None:
        head = [str(c) for c in names]
        if len(head) != peek.shape[1]:
            raise BadInputError(f"{len(head)} names given for {peek.shape[1]} columns in the file.")
    else:
        head = [f"x{j}" for j in range(peek.shape[1])]
    if len(set(head)) != len(head):
        dup = sorted({c for c in head if head.count(c) > 1})
        raise BadInputError(f"the header repeats column name(s) {dup}; make the names unique.")
    raw = parse(
        skiprows=1 if has_header else 0,
        names=head,
        na_values=sorted(na),
        keep_default_na=False,
        skipinitialspace=True,
    )
    if len(raw) == 0:
        raise BadInputError("the CSV data have no data row.")
    raw.columns = head
    if row_names:
        first = raw.iloc[:, 0]
        if first.notna().all() and first.is_unique:
            raw = raw.iloc[:, 1:].set_axis(pd.Index([str(v).strip() for v in first], name=None), axis=0)
            note = (f"the first column (no header, {len(first)} distinct values such as {str(first.iloc[0])!r}) "
                    "read as row names, not as data")
            description = f"{description}; {note}" if description else note
    elif (has_header and raw.shape[1] > 1 and len(raw) >= ROW_NAME_MIN_ROWS
          and head[0] not in [str(c) for c in (columns or [])] + [str(c) for c in (exclude or [])]):
        first = raw.iloc[:, 0]
        names_ = [str(v).strip() for v in first] if first.notna().all() else []
        if names_ and len(set(names_)) == len(names_) and _column_to_float(first, na)[0] is None:
            raw = raw.iloc[:, 1:].set_axis(pd.Index(names_, name=head[0]), axis=0)
            note = (f"the first column {head[0]!r} ({len(names_)} distinct text values, one per row, such as "
                    f"{names_[0]!r}) read as row names, not as data")
            description = f"{description}; {note}" if description else note
    raw = _exclude(_select(raw, columns), exclude)
    return raw, label, description


# ---------------------------------------------------------------------------- loaders
def from_csv(
    path_or_buffer,
    *,
    columns: Sequence[str] | None = None,
    na_values: Sequence[str] = _NA_DEFAULT,
    max_bytes: int | None = DEFAULT_MAX_BYTES,
    drop_non_numeric: bool = False,
    header: bool | str = "infer",
    names: Sequence[str] | None = None,
    sep: str | None = ",",
    name: str | None = None,
    description: str = "",
    exclude: Sequence[str] | None = None,
) -> IncompleteData:
    """Read a delimited text table into :class:`IncompleteData`.

    Parameters
    ----------
    path_or_buffer : str, os.PathLike, bytes or file-like
        A file path, or uploaded content (bytes, ``io.BytesIO``/``io.StringIO``...).
    columns : sequence of str, optional
        Keep only these columns, in this order (applied before the numeric check).
    exclude : sequence of str, optional
        Leave these columns out (after ``columns``; an identifier, free text, a column not to impute).
    na_values : sequence of str, default ('?', 'NA', '')
        Cell texts (after stripping spaces) that mean "missing".
    max_bytes : int or None, default 20 MB
        Size limit for bytes / file-like input (paths are not limited); None disables it.
    drop_non_numeric : bool, default False
        Drop non-numeric columns instead of raising; their names go into ``description``.
    header : bool or 'infer', default 'infer'
        Whether the first row names the columns. 'infer' treats it as a header when it holds text
        above numbers (or only text). A header whose first name is empty, over a first column of distinct
        values with no gap, is the row names R's ``write.csv`` and pandas' ``to_csv`` write: that column is
        not data; it is dropped and ``description`` says so (rows keep their order). So is a named first column
        of text with a different value in each of at least ``ROW_NAME_MIN_ROWS`` (20) rows and no gap (names or
        identifiers, e.g. msleep's animal names), unless ``columns`` asks for it.
    names : sequence of str, optional
        Column names for files without a header (default ``x0, x1, ...``).
    sep : str or None, default ','
        Field separator; None sniffs it (python engine).
    name, description : str
        Stored in the result; ``name`` defaults to the file name.

    Raises
    ------
    BadInputError
        Oversized upload, unparsable text, unknown or non-numeric columns, columns with no
        observed value, inf values.
    """
    raw, label, description = _read_raw(path_or_buffer, columns=columns, exclude=exclude, na_values=na_values,
                                        max_bytes=max_bytes, header=header, names=names, sep=sep,
                                        description=description)
    return _frame_to_data(
        raw,
        na_values=na_values,
        drop_non_numeric=drop_non_numeric,
        name=label if name is None else name,
        description=description,
    )


def read_csv_table(
    path_or_buffer,
    *,
    columns: Sequence[str] | None = None,
    na_values: Sequence[str] = _NA_DEFAULT,
    max_bytes: int | None = DEFAULT_MAX_BYTES,
    header: bool | str = "infer",
    names: Sequence[str] | None = None,
    sep: str | None = ",",
    max_levels: int = 100,
    exclude: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Read a delimited text table with numeric **and text** columns into a DataFrame.

    The same reading as :func:`from_csv` (header inference, NA tokens, size limit, row names as the index: R's
    unnamed first column, or a named first column of distinct texts in at least ``ROW_NAME_MIN_ROWS`` rows, becomes
    the index and ``frame.attrs["description"]`` says so), but a column that is not all numbers becomes a pandas
    ``category`` column (cells stripped of spaces; the NA tokens are missing) instead of an error: the input of
    :class:`explorer.impute.mixed.MixedMixtureImputer`. Numeric columns are float64 with NaN for missing cells.
    ``columns`` keeps only the named columns and ``exclude`` leaves the named ones out, as in :func:`from_csv`.

    Raises
    ------
    BadInputError
        As :func:`from_csv`; a column with no observed value; a text column with more than ``max_levels``
        distinct values (an identifier or free text, not a category).
    """
    raw, _, description = _read_raw(path_or_buffer, columns=columns, exclude=exclude, na_values=na_values,
                                    max_bytes=max_bytes, header=header, names=names, sep=sep, description="")
    na = {str(t).strip() for t in na_values}
    out = {}
    for label in raw.columns:
        arr, _ = _column_to_float(raw[label], na)
        if arr is not None:
            out[str(label)] = arr
            continue
        cells = [None if v is None or (isinstance(v, float) and np.isnan(v)) or str(v).strip() in na
                 else str(v).strip() for v in raw[label].tolist()]
        levels = sorted({c for c in cells if c is not None})
        if len(levels) > max_levels:
            raise BadInputError(
                f"column {str(label)!r} has {len(levels)} distinct text values, more than max_levels={max_levels}: "
                "it looks like an identifier or free text, not a category; leave it out (exclude=[...]; on the "
                "command line --exclude NAME) or raise max_levels.")
        out[str(label)] = pd.Categorical(cells, categories=levels)
    frame = pd.DataFrame(out, index=raw.index)
    empty = [c for c in frame.columns if frame[c].isna().all()]
    if empty:
        raise BadInputError(f"column(s) {empty} have no observed value; drop them (columns=...).")
    if description:
        frame.attrs["description"] = description
    return frame


def from_dataframe(
    df: pd.DataFrame,
    *,
    columns: Sequence[str] | None = None,
    na_values: Sequence[str] = _NA_DEFAULT,
    drop_non_numeric: bool = False,
    name: str = "",
    description: str = "",
) -> IncompleteData:
    """Convert a DataFrame: numeric, boolean and nullable columns; NaN / None / pd.NA = missing.

    Text columns whose cells all parse as numbers (or are in ``na_values``) are converted too.
    Categorical, datetime and other text columns are non-numeric (see :func:`from_csv`). The
    index is ignored; column labels become strings.
    """
    if not isinstance(df, pd.DataFrame):
        raise BadInputError(f"from_dataframe expects a pandas DataFrame; got {type(df).__name__}.")
    if df.shape[0] == 0 or df.shape[1] == 0:
        raise BadInputError(f"the DataFrame is empty (shape {df.shape}).")
    df = df.copy()
    df.columns = [str(c) for c in df.columns]
    if len(set(df.columns)) != df.shape[1]:
        raise BadInputError("the DataFrame has repeated column labels; make them unique.")
    return _frame_to_data(
        _select(df, columns), na_values=na_values, drop_non_numeric=drop_non_numeric, name=name, description=description
    )


def from_numpy(
    X,
    missing=None,
    *,
    columns: Sequence[str] | None = None,
    binary: Sequence[bool] | None = None,
    name: str = "",
    description: str = "",
) -> IncompleteData:
    """Wrap an array (NaN = missing unless ``missing`` is given); see :meth:`IncompleteData.from_array`."""
    return IncompleteData.from_array(X, missing, columns=columns, binary=binary, name=name, description=description)


def from_xarray(
    obj,
    *,
    feature_dim: str | None = None,
    drop_non_numeric: bool = False,
    name: str | None = None,
    description: str = "",
) -> IncompleteData:
    """Convert an ``xarray.DataArray`` (2-D) or ``xarray.Dataset`` (1-D variables) to data.

    Parameters
    ----------
    obj : xarray.DataArray or xarray.Dataset
        A DataArray must be 2-D; ``feature_dim`` (default: its last dimension) indexes the
        columns, whose names come from that dimension's coordinate when there is one. A Dataset
        gives one column per data variable; all variables must be 1-D along the same dimension
        (a Dataset holding a single 2-D variable is treated as that DataArray).
    feature_dim : str, optional
    drop_non_numeric : bool, default False
    name, description : str
        ``name`` defaults to the DataArray's name / the Dataset's ``name`` attribute.
    """
    import xarray as xr

    if isinstance(obj, xr.Dataset):
        variables = list(obj.data_vars)
        if not variables:
            raise BadInputError("the Dataset has no data variable.")
        if len(variables) == 1 and obj[variables[0]].ndim == 2:
            return from_xarray(obj[variables[0]], feature_dim=feature_dim, name=name, description=description)
        dims = {v: obj[v].dims for v in variables}
        if any(len(d) != 1 for d in dims.values()) or len(set(dims.values())) != 1:
            shown = ", ".join(f"{v}{tuple(d)}" for v, d in dims.items())
            raise BadInputError(
                f"Dataset variables must all be 1-D along the same dimension (one column each); got {shown}. "
                "Select or stack them first, or pass a 2-D DataArray."
            )
        df = pd.DataFrame({str(v): obj[v].values for v in variables})
        label = str(obj.attrs.get("name", "")) if name is None else name
        return from_dataframe(df, drop_non_numeric=drop_non_numeric, name=label, description=description)
    if not isinstance(obj, xr.DataArray):
        raise BadInputError(f"from_xarray expects an xarray DataArray or Dataset; got {type(obj).__name__}.")
    if obj.ndim != 2:
        raise BadInputError(
            f"the DataArray must be 2-D (samples x features); got dims {obj.dims}. Stack or select dimensions first."
        )
    fdim = obj.dims[-1] if feature_dim is None else feature_dim
    if fdim not in obj.dims:
        raise BadInputError(f"feature_dim {fdim!r} is not a dimension of the DataArray {obj.dims}.")
    sdim = next(d for d in obj.dims if d != fdim)
    arr = obj.transpose(sdim, fdim)
    if fdim in arr.coords:
        columns = [str(c) for c in arr.coords[fdim].values]
    else:
        columns = [f"x{j}" for j in range(arr.sizes[fdim])]
    label = (str(obj.name) if obj.name is not None else "") if name is None else name
    if arr.dtype.kind in "OUS":
        df = pd.DataFrame(np.asarray(arr.values), columns=columns)
        return from_dataframe(df, drop_non_numeric=drop_non_numeric, name=label, description=description)
    return IncompleteData.from_array(np.asarray(arr.values), columns=columns, name=label, description=description)


def to_dataframe(data: IncompleteData, imputed=None) -> pd.DataFrame:
    """DataFrame of ``data`` (NaN at missing entries), or of the completed matrix.

    Parameters
    ----------
    data : IncompleteData
    imputed : array_like of shape (n_samples, n_features), optional
        Imputed matrix; only its values at the missing entries are used, the observed entries
        are copied from ``data`` unchanged.
    """
    if not isinstance(data, IncompleteData):
        raise BadInputError(f"to_dataframe expects IncompleteData; got {type(data).__name__}.")
    values = np.array(data.values, copy=True)
    if imputed is not None:
        imp = np.asarray(imputed, dtype=np.float64)
        if imp.shape != data.shape:
            raise BadInputError(f"imputed has shape {imp.shape} but the data have shape {data.shape}.")
        values[data.missing] = imp[data.missing]
    return pd.DataFrame(values, columns=list(data.columns))
