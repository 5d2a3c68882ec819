"""Assigning data to a Bokeh ``ColumnDataSource``, sending only what changed (an unchanged frame sends nothing)."""

from __future__ import annotations

import numpy as np
from bokeh.models import ColumnDataSource

__all__ = ["set_data"]


def _same(a, b) -> bool:
    """True when two columns hold the same values (NaN equal to NaN; ragged columns compared row by row)."""
    try:
        a, b = np.asarray(a), np.asarray(b)
    except ValueError:  # ragged (lists of paths)
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if a.shape != b.shape or a.dtype.kind != b.dtype.kind:
        if a.dtype == object or b.dtype == object:  # lists of arrays: compare element by element
            return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
        return False
    if a.dtype == object:
        return len(a) == len(b) and all(_same(x, y) if isinstance(x, (list, tuple, np.ndarray)) else x == y
                                        for x, y in zip(a, b))
    return bool(np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))


def set_data(source: ColumnDataSource, data: dict) -> bool:
    """Give ``source`` the columns ``data``, sending only what changed.

    With the same column names and as many rows as before, only the columns whose values differ are replaced (one
    partial update: a point's marker or size is not sent again with every frame); otherwise the whole data.
    Returns True when anything was sent.
    """
    old = source.data
    rows = {len(v) for v in data.values()}
    if set(old) != set(data) or len(rows) > 1 or {len(v) for v in old.values()} != rows:
        source.data = data
        return True
    changed = {k: v for k, v in data.items() if not _same(old[k], v)}
    if changed:
        source.data.update(changed)
    return bool(changed)
