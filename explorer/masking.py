"""Masking ("amputation"): hide observed entries of a data set with a registered missingness mechanism.

:func:`amputate` applies one of the mechanisms of :mod:`explorer.core.missingness.mechanisms` (MCAR, MAR,
NMAR, image masks) to the observed entries of ``X`` (entries already missing stay missing), in the kind of
``X`` (array or DataFrame), and refuses masks that would empty a column, or a row unless asked; it is how
the benchmarks, :func:`explorer.evaluation.evaluate` and the pages make the missing values they score.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from explorer.core.missingness.mask_helpers import emptied
from explorer.core.missingness.mechanisms import apply_mechanism
from explorer.core.validation import BadInputError, as_float_matrix
from explorer.utils.random_state import check_random_state

__all__ = ["EmptyRowsWarning", "amputate"]


class EmptyRowsWarning(UserWarning):
    """:func:`amputate` hid every observed entry of some rows."""


def amputate(X, mechanism="mcar", rate=0.2, random_state=None, *, allow_empty="rows", return_info=False,
             **params):
    """Hide observed entries of ``X`` with a registered missingness mechanism.

    ``X`` may be complete or already incomplete (NaN = missing). The mechanism only hides
    **observed** entries; entries that are already missing stay missing.

    Parameters
    ----------
    X : array-like or DataFrame of shape (n_samples, n_features)
        The data, NaN at the entries that are already missing. Never modified.
    mechanism : str, default "mcar"
        A key of :data:`explorer.core.missingness.mechanisms.MECHANISMS` ("mcar", "mar_threshold",
        "self_masking", "square", ...).
    rate : float or None, default 0.2
        Fraction of the **observed** entries to hide (about ``rate * n_observed`` new gaps, e.g.
        0.2 of the 800 observed entries of a 100 x 10 matrix with 200 real gaps hides about 160;
        on complete data, the overall fraction of missing entries). Must be None for mechanisms
        without a rate (e.g. "square", "half", "patterns").
    random_state : int, numpy.random.Generator or None
    allow_empty : {"rows", False, True}, default "rows"
        What to do when the hidden entries would leave a row or a column that had an observed
        entry with none left:

        * ``"rows"`` (default): an emptied **column** is refused (BadInputError, e.g.
          ``rate=1.0``) unless the mechanism has no rate (``rate=None``: a fixed pattern such as
          an image's top half empties its columns by design); emptied rows are accepted with an
          :class:`EmptyRowsWarning` (a random
          mechanism empties some rows of narrow data at any rate: under MCAR a row of d observed
          entries is emptied with probability rate**d).
        * ``False``: emptied rows are refused too.
        * ``True``: both accepted, silently.

        The error gives the largest rate that empties nothing refused, for the same
        ``random_state`` (found by bisection on the same draws).
    return_info : bool, default False
        Also return the :class:`~explorer.core.missingness.mechanisms.MaskResult` (``realised_rate``,
        ``n_observed``, effective parameters).
    **params
        Parameters of the mechanism (e.g. ``target=1, control=0`` for "mar_threshold").

    Returns
    -------
    X_nan : ndarray or DataFrame of shape (n_samples, n_features)
        A float copy of ``X`` with NaN at the entries that were missing **or** are now hidden
        (a DataFrame with the same index and columns when ``X`` is one).
    missing : ndarray of bool, shape (n_samples, n_features)
        True = hidden by this call: only entries that were observed in ``X`` (their true values
        are ``X[missing]``). On complete data it is the whole missing mask; on incomplete data
        the total mask is ``np.isnan(X_nan) == missing | np.isnan(X)``. The realised rate is
        ``missing.sum() / (~np.isnan(X)).sum()``.
    info : MaskResult
        Only with ``return_info=True``.

    Examples
    --------
    >>> import numpy as np
    >>> from explorer.masking import amputate
    >>> X = np.arange(20.0).reshape(10, 2)
    >>> X_nan, missing = amputate(X, "mar_threshold", rate=0.25, target=1, control=0)
    >>> int(missing[:, 1].sum()), bool(np.isnan(X_nan[missing]).all()), bool(np.isnan(X).any())
    (5, True, False)
    >>> X[:4, 0] = np.nan  # real gaps: 16 observed entries
    >>> X_nan, hidden, info = amputate(X, "mcar", rate=0.25, random_state=0, return_info=True)
    >>> bool(hidden[:4, 0].any()), info.n_observed, info.realised_rate == hidden.sum() / 16
    (False, 16, True)
    """
    import copy

    if allow_empty not in (False, True, "rows"):
        raise BadInputError(f"allow_empty must be False, 'rows' or True; got {allow_empty!r}.")
    rng = check_random_state(random_state)
    replay = copy.deepcopy(rng)  # the same draws, to search for the largest safe rate
    names = getattr(X, "columns", None)
    arr = as_float_matrix(X, name="X", columns=None if names is None else [str(c) for c in names])
    observed = ~np.isnan(arr)
    result = apply_mechanism(arr, mechanism, rate, rng=rng, **params)
    missing = np.array(result.missing, dtype=bool)
    if allow_empty is not True:
        # a mechanism without a rate hides a fixed pattern (an image's top half, a square, given patterns):
        # the columns it empties are the pattern itself, not an accident of the rate
        _refuse_empty(arr, observed, missing, mechanism, result.requested_rate, replay, params,
                      rows_ok=allow_empty == "rows", cols_ok=rate is None, names=names)
        rows, _ = emptied(observed, missing)
        if rows.size:
            warnings.warn(
                f"amputate: {mechanism!r} hid every observed entry of {rows.size} row(s) (e.g. row "
                f"{', '.join(str(r) for r in rows[:5])}). explorer's imputers refuse such rows unless "
                "empty_rows='marginal'; pass allow_empty=False to refuse them here, or True to silence this.",
                EmptyRowsWarning, stacklevel=2,
            )
    out = arr.copy()
    out[missing] = np.nan
    if names is not None and hasattr(X, "index"):
        import pandas as pd

        out = pd.DataFrame(out, index=X.index, columns=X.columns)
    return (out, missing, result) if return_info else (out, missing)


def _refuse_empty(arr, observed, missing, mechanism, rate, replay, params, *, rows_ok, cols_ok=False, names):
    """BadInputError when ``missing`` empties a row (unless ``rows_ok``) or a column that had values (unless
    ``cols_ok``)."""

    def bad(m):
        rows, cols = emptied(observed, m)
        return (cols.size > 0 and not cols_ok) or (rows.size > 0 and not rows_ok)

    if not bad(missing):
        return
    rows, cols = emptied(observed, missing)
    parts = []
    if cols.size and not cols_ok:
        labels = [str(names[j]) if names is not None else str(j) for j in cols[:5]]
        parts.append(f"{cols.size} column(s) ({', '.join(labels)}{', ...' if cols.size > 5 else ''})")
    if rows.size and not rows_ok:
        parts.append(f"{rows.size} row(s) (e.g. row {', '.join(str(r) for r in rows[:5])})")
    what = " and ".join(parts)
    rate_txt = "" if rate is None else f" at rate={rate:g}"
    advice = ("Change the mechanism's parameters" if rate is None else
              f"Lower the rate: the largest rate that leaves every {'column' if rows_ok else 'row and column'} "
              f"an observed entry with this random_state is "
              f"{math.floor(_largest_safe_rate(arr, mechanism, rate, replay, params, bad) * 1000) / 1000:g}")
    raise BadInputError(
        f"amputate: {mechanism!r}{rate_txt} would hide every observed entry of {what}. {advice}; or pass "
        "allow_empty='rows' to accept rows with no observed entry (explorer's imputers then need "
        "empty_rows='marginal'), or allow_empty=True to accept empty columns too."
    )


def _largest_safe_rate(arr, mechanism, rate, replay, params, bad) -> float:
    """Bisection over [0, rate] on the same draws for the largest rate whose mask is not ``bad``."""
    import copy

    lo, hi = 0.0, float(rate)
    for _ in range(30):
        mid = 0.5 * (lo + hi)
        m = apply_mechanism(arr, mechanism, mid, rng=copy.deepcopy(replay), **params).missing
        if bad(m):
            hi = mid
        else:
            lo = mid
        if hi - lo < 1e-4:
            break
    return lo
