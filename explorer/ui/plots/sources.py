"""Assigning data to a Bokeh ``ColumnDataSource`` only when it changed (an unchanged frame sends nothing)."""

from __future__ import annotations

import numpy as np
from bokeh.models import ColumnDataSource

__all__ = ["set_data"]


def set_data(source: ColumnDataSource, data: dict) -> bool:
    """Assign ``data`` to ``source`` unless it holds these values already (nothing is sent then).

    Returns True when the source changed.
    """
    old = source.data
    if old.keys() == data.keys() and all(_same(old[k], v) for k, v in data.items()):
        return False
    source.data = data
    return True


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype.kind != b.dtype.kind:
        return False
    return bool(np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))
