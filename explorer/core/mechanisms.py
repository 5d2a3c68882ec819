"""Missingness mechanisms ("amputation" of complete data) and their registry.

Every mechanism is a pure function of the **complete** data, its parameters and an injected
``numpy.random.Generator``::

    missing = fn(X, rate, *, rng, **params)      # X: (n_samples, n_features) float, no NaN

and returns a boolean array ``missing`` of the same shape, **True = missing**. ``rate`` is the
requested *overall* fraction of missing entries (over the whole matrix) for the mechanisms that
have one; the others fix their missing fraction through their parameters. Image mechanisms read
each row as a flattened image of ``image_shape=(height, width)`` in row-major (C) order.

seed004 (Marlin) writes the response indicator with the opposite convention, ``r = 1`` for
*observed*; here ``missing = ~r`` everywhere, and Marlin's ``mu_v = P(r = 1 | x = v)`` stays an
*observation* probability.

=======================  =====  ======================================================================
key                      kind   rule (source)
=======================  =====  ======================================================================
``mcar``                 MCAR   each entry missing independently with probability r (seed000
                                MCAR_total, seed004 ``mcar_bernoulli``)
``mcar_rows``            MCAR   rows marked w.p. sqrt(r); thesis: a sqrt(r) fraction of a marked row
                                removed; code: each entry of a marked row w.p. sqrt(r) (seed000)
``mar_rows``             MAR    1/5 "controlling" columns, alpha = X_C w, w ~ U[-1/2, 1/2]; the rows
                                with the lowest alpha lose values w.p. sqrt(r) (seed000 MAR_rows)
``mar_threshold``        MAR    target column(s) missing where the control column is above/below a
                                quantile (seed001 Fig. 1)
``mar_logistic``         MAR    P(target missing) = sigmoid(a + b z_control), a solved for the rate
``nmar_lowest``          NMAR   marked columns lose their lowest values (seed000 NMAR / "MNAR_rows")
``nmar_random``          NMAR   marked columns lose a random part of their lowest values (seed000
                                NMAR_random / "MNAR_R_rows"); the code variant realises ~ r**1.5
``self_masking``         NMAR   P(x_ij missing) = sigmoid(a_j + strength z_ij), a_j solved per column
``cpt_v``                NMAR   P(observed | x = v) = mu_v for discrete levels v = 1..V (seed004 CPT-v)
``linear_value_effect``  NMAR   CPT-v with mu_v = s (v - (V+1)/2) + 1/2 (seed004 Sec. 5.2.1)
``patterns``             MCAR   each row draws one pattern from a fixed list (seed004 Ch. 6)
``random_pixels``        MCAR   image pixels missing independently w.p. r (seed003 "Random")
``quarter``              MCAR   one quarter of each image, random or fixed (seed003/seed004 MNIST)
``half``                 MCAR   one half of each image, e.g. the top half (seed003 "Halves")
``square``               MCAR   a k x k square, uniform over the fully-inside positions (seed002)
=======================  =====  ======================================================================

:func:`apply_mechanism` validates the parameter names against the registry and wraps the result
in a :class:`MaskResult` (requested and realised rates). Bad input raises
:class:`~explorer.core._validation.BadInputError` with the feasible range or the remedy.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from scipy.optimize import brentq
from scipy.special import expit, logit

from explorer.core._validation import BadInputError, as_float_matrix

__all__ = [
    "Param", "Mechanism", "MaskResult", "MECHANISMS", "get_mechanism", "list_mechanisms",
    "apply_mechanism", "quantile_levels", "mcar", "mcar_rows", "mar_rows", "mar_threshold",
    "mar_logistic", "nmar_lowest", "nmar_random", "self_masking", "cpt_v", "linear_value_effect",
    "fixed_patterns", "random_pixels", "image_quarter", "image_half", "image_square",
]

_EPS = 1e-9  # guards floor(D * sqrt(r)) against round-off (sqrt(0.09) * 10 = 2.9999...)


# --------------------------------------------------------------------------- validation helpers
def _complete(X, who: str) -> np.ndarray:
    arr = as_float_matrix(X, name="X")
    nan = np.isnan(arr)
    if nan.any():
        rows, cols = np.nonzero(nan)
        raise BadInputError(
            f"{who}: X has {int(nan.sum())} NaN value(s) (e.g. row {rows[0]}, column {cols[0]}), but "
            "a missingness mechanism amputates COMPLETE data. Drop or impute the incomplete rows first."
        )
    return arr


def _check_rng(rng, who: str) -> None:
    if not isinstance(rng, np.random.Generator):
        raise BadInputError(
            f"{who}: rng must be a numpy.random.Generator (e.g. numpy.random.default_rng(0)); "
            f"got {type(rng).__name__}."
        )


def _check_rate(rate, who: str, hi: float = 1.0, why: str = "") -> float:
    try:
        r = float(rate)
    except (TypeError, ValueError):
        raise BadInputError(f"{who}: rate must be a number in [0, {hi:.4g}]; got {rate!r}.") from None
    if not 0.0 <= r <= hi:  # also rejects NaN
        raise BadInputError(
            f"{who}: rate={rate!r} is outside the feasible range [0, {hi:.4g}]{why}. Choose a rate in range."
        )
    return r


def _check_choice(value, choices: Sequence, who: str, param: str):
    if value not in choices:
        raise BadInputError(f"{who}: {param} must be one of {list(choices)}; got {value!r}.")
    return value


def _column(j, n_features: int, who: str, param: str) -> int:
    if isinstance(j, bool) or not isinstance(j, (int, np.integer)) or not -n_features <= j < n_features:
        raise BadInputError(
            f"{who}: {param}={j!r} is not a column index of data with {n_features} columns "
            f"(use an integer in [{-n_features}, {n_features - 1}])."
        )
    return int(j) % n_features


def _columns(js, n_features: int, who: str, param: str) -> np.ndarray:
    try:
        items = [js] if isinstance(js, (int, np.integer)) else list(js)
    except TypeError:
        items = [js]  # rejected below with a clear message
    if not items:
        raise BadInputError(f"{who}: {param} must name at least one column.")
    return np.unique([_column(j, n_features, who, param) for j in items])


def _binary_flags(binary, n_features: int, who: str) -> np.ndarray:
    if binary is None:
        return np.zeros(n_features, dtype=bool)
    flags = np.asarray(binary)
    if flags.shape != (n_features,) or not (flags.dtype == bool or np.isin(flags, (0, 1)).all()):
        raise BadInputError(
            f"{who}: binary must be a sequence of {n_features} booleans (True = binary column); "
            f"got shape {flags.shape}."
        )
    return flags.astype(bool)


def _image_shape(image_shape, n_features: int, who: str) -> tuple[int, int]:
    if image_shape is None:
        raise BadInputError(f"{who} needs image_shape=(height, width); rows of X are flattened images.")
    try:
        h, w = (int(v) for v in image_shape)
    except (TypeError, ValueError):
        raise BadInputError(f"{who}: image_shape must be (height, width); got {image_shape!r}.") from None
    if h < 1 or w < 1 or h * w != n_features:
        raise BadInputError(
            f"{who}: image_shape={tuple(image_shape)!r} has {h * w} pixels but X has {n_features} columns; "
            "give the (height, width) of the flattened images (height * width must equal n_features)."
        )
    return h, w


def _standardize(col: np.ndarray) -> np.ndarray:
    sd = col.std()
    return np.zeros_like(col) if sd == 0 else (col - col.mean()) / sd


def _logistic_probs(z: np.ndarray, strength: float, q: float) -> np.ndarray:
    """P = sigmoid(a + strength * z) with the intercept ``a`` solved so that mean(P) = q."""
    if q <= 0.0:
        return np.zeros_like(z)
    if q >= 1.0:
        return np.ones_like(z)
    lin = strength * z
    spread = float(np.max(np.abs(lin))) + 1.0  # at logit(q) -/+ spread every P is below/above q
    a = brentq(lambda a: expit(a + lin).mean() - q, logit(q) - spread, logit(q) + spread, xtol=1e-12)
    return expit(a + lin)


def _check_strength(strength, who: str) -> float:
    try:
        b = float(strength)
    except (TypeError, ValueError):
        b = math.nan
    if not math.isfinite(b):
        raise BadInputError(f"{who}: strength must be a finite number; got {strength!r}.")
    return b


# --------------------------------------------------------------------------- MCAR
def mcar(X, rate=0.2, *, rng) -> np.ndarray:
    """MCAR: each entry missing independently with probability ``rate`` (seed000 MCAR_total).

    Parameters
    ----------
    X : array of shape (n_samples, n_features)
        Complete data (only its shape is used).
    rate : float in [0, 1]
    rng : numpy.random.Generator

    Returns
    -------
    missing : bool ndarray of shape (n_samples, n_features)
    """
    X = _complete(X, "mcar")
    _check_rng(rng, "mcar")
    return rng.random(X.shape) < _check_rate(rate, "mcar")


def mcar_rows(X, rate=0.2, *, rng, variant: Literal["thesis", "code"] = "thesis") -> np.ndarray:
    """MCAR by rows (seed000 MCAR_rows): each row is marked with probability sqrt(r).

    * ``variant="thesis"``: a marked row loses a random sqrt(r) *fraction* of its entries. The
      count ``sqrt(r) * n_features`` is rounded stochastically (floor, plus one with probability
      equal to the fractional part) so that the expected overall rate is exactly ``r``.
    * ``variant="code"``: each entry of a marked row is missing independently w.p. sqrt(r).

    Parameters and returns as in :func:`mcar`; ``rate`` in [0, 1].
    """
    X = _complete(X, "mcar_rows")
    _check_rng(rng, "mcar_rows")
    _check_choice(variant, ("thesis", "code"), "mcar_rows", "variant")
    s = math.sqrt(_check_rate(rate, "mcar_rows"))
    n, d = X.shape
    marked = rng.random(n) < s
    if variant == "code":
        return marked[:, None] & (rng.random((n, d)) < s)
    k_float = s * d
    k = math.floor(k_float) + (rng.random(n) < k_float - math.floor(k_float))
    ranks = np.argsort(np.argsort(rng.random((n, d)), axis=1), axis=1)  # a random permutation per row
    return marked[:, None] & (ranks < k[:, None])


# --------------------------------------------------------------------------- MAR
def mar_rows(
    X, rate=0.2, *, rng, variant: Literal["thesis", "code"] = "thesis", n_controlling=None, binary=None
) -> np.ndarray:
    """MAR by rows (seed000 MAR_rows), driven by a random linear score of "controlling" columns.

    ``n_controlling`` (default ``max(1, int(0.2 * n_features))``, the code's ``int(0.2 D)``) columns
    C are drawn among the non-``binary`` columns, with weights w_j ~ U[-1/2, 1/2]; the score
    alpha_i = sum_{j in C} w_j x_ij uses the raw (unstandardised) values.

    * ``variant="thesis"``: sort rows by increasing alpha and mark the first
      ``round(N sqrt(r) D / (D - |C|))`` (= 5/4 N sqrt(r) when |C| = D/5); in marked rows each
      **non-controlling** value is dropped w.p. sqrt(r). Controlling columns are always observed,
      so the mask is MAR. Expected rate r; feasible only for r <= ((D - |C|) / D)**2 (0.64 in the
      thesis).
    * ``variant="code"``: mark rows with alpha <= the sqrt(r)-quantile of alpha (N sqrt(r) rows, not
      5/4 N sqrt(r)) and drop **every** column, controlling and binary ones included, w.p. sqrt(r).
      Rate ~ r for any r in [0, 1]; since controlling values can be hidden the mask is strictly
      NMAR, not MAR.

    Returns a bool ndarray of shape (n_samples, n_features).
    """
    who = "mar_rows"
    X = _complete(X, who)
    _check_rng(rng, who)
    _check_choice(variant, ("thesis", "code"), who, "variant")
    n, d = X.shape
    numeric = np.flatnonzero(~_binary_flags(binary, d, who))
    n_c = max(1, int(0.2 * d)) if n_controlling is None else n_controlling
    top = min(numeric.size, d - 1 if variant == "thesis" else d)
    if isinstance(n_c, bool) or not isinstance(n_c, (int, np.integer)) or not 1 <= n_c <= top:
        raise BadInputError(
            f"{who}: n_controlling={n_c!r} must be an integer in [1, {top}] for {d} columns of which "
            f"{numeric.size} are non-binary (the thesis variant needs one non-controlling column)."
        )
    if variant == "thesis":
        hi = ((d - n_c) / d) ** 2
        why = (f" of the thesis variant with {n_c} controlling column(s) out of {d}; "
               "use variant='code' for higher rates")
    else:
        hi, why = 1.0, ""
    s = math.sqrt(_check_rate(rate, who, hi, why))
    ctrl = rng.choice(numeric, size=n_c, replace=False)
    alpha = X[:, ctrl] @ rng.uniform(-0.5, 0.5, size=n_c)
    droppable = np.ones(d, dtype=bool)
    if variant == "thesis":
        marked = np.zeros(n, dtype=bool)
        marked[np.argsort(alpha, kind="stable")[: int(round(n * s * d / (d - n_c)))]] = True
        droppable[ctrl] = False
    else:
        marked = alpha <= np.quantile(alpha, s)
    return marked[:, None] & droppable[None, :] & (rng.random((n, d)) < s)


def _targets_and_control(X, rate, target, control, who):
    n, d = X.shape
    ctrl = _column(control, d, who, "control")
    targets = _columns(target, d, who, "target")
    if ctrl in targets:
        raise BadInputError(f"{who}: the control column {ctrl} cannot also be a target; it stays observed.")
    why = (f" (only the {targets.size} target column(s) out of {d} can be missing; add target "
           "columns or lower the rate)")
    r = _check_rate(rate, who, targets.size / d, why)
    return ctrl, targets, min(1.0, r * d / targets.size)


def mar_threshold(
    X, rate=0.2, *, rng, target=-1, control=0, side: Literal["above", "below"] = "above"
) -> np.ndarray:
    """MAR by thresholding (seed001 Fig. 1): target(s) missing where ``control`` is above/below t.

    The overall rate ``r`` means each target column loses a fraction q = r D / n_targets, so
    ``r <= n_targets / D``. With k = round(q N), t is the k-th largest (``side="above"``) or k-th
    smallest (``"below"``) control value, and a row loses all its targets iff x_control >= t
    (resp. <= t). The mask is a deterministic function of the control column (ties share their
    fate, so ties can add rows); ``rng`` is validated but unused. The control column is always
    observed.

    Parameters
    ----------
    X : array of shape (n_samples, n_features)
    rate : float in [0, n_targets / n_features]
    target : int or sequence of int, default -1 (last column)
    control : int, default 0
    side : {"above", "below"}

    Returns a bool ndarray of shape (n_samples, n_features).
    """
    who = "mar_threshold"
    X = _complete(X, who)
    _check_rng(rng, who)
    _check_choice(side, ("above", "below"), who, "side")
    ctrl, targets, q = _targets_and_control(X, rate, target, control, who)
    n = X.shape[0]
    x, k = X[:, ctrl], int(round(q * n))
    rows = np.zeros(n, dtype=bool)
    if k > 0:
        xs = np.sort(x)
        rows = x >= xs[n - k] if side == "above" else x <= xs[k - 1]
    missing = np.zeros(X.shape, dtype=bool)
    missing[:, targets] = rows[:, None]
    return missing


def mar_logistic(X, rate=0.2, *, rng, target=-1, control=0, strength=2.0) -> np.ndarray:
    """Logistic MAR: P(x_it missing) = sigmoid(a + strength * z_i), z the standardised control.

    Each target column t is amputated independently given the control. The intercept ``a`` is
    found by :func:`scipy.optimize.brentq` so that the expected fraction of missing values per
    target on these data, mean_i sigmoid(a + b z_i), equals q = r D / n_targets (so the expected
    overall rate is r; ``r <= n_targets / D``). ``strength=0`` is MCAR on the targets; positive
    strength hides targets where the control is high. The control column is always observed.

    Parameters
    ----------
    X : array of shape (n_samples, n_features)
    rate : float in [0, n_targets / n_features]
    target : int or sequence of int, default -1
    control : int, default 0
    strength : float, the logistic slope b (per standard deviation of the control)

    Returns a bool ndarray of shape (n_samples, n_features).
    """
    who = "mar_logistic"
    X = _complete(X, who)
    _check_rng(rng, who)
    b = _check_strength(strength, who)
    ctrl, targets, q = _targets_and_control(X, rate, target, control, who)
    p = _logistic_probs(_standardize(X[:, ctrl]), b, q)
    missing = np.zeros(X.shape, dtype=bool)
    missing[:, targets] = rng.random((X.shape[0], targets.size)) < p[:, None]
    return missing


# --------------------------------------------------------------------------- NMAR
def _lowest(col: np.ndarray, m: int, rng) -> np.ndarray:
    """Indices of the ``m`` lowest values of ``col``, ties broken at random."""
    return np.lexsort((rng.random(col.size), col))[:m]


def _nmar_columns(X, rate, rng, variant, binary, who, hi=1.0, why=""):
    X = _complete(X, who)
    _check_rng(rng, who)
    _check_choice(variant, ("thesis", "code"), who, "variant")
    d = X.shape[1]
    flags = _binary_flags(binary, d, who)
    s = math.sqrt(_check_rate(rate, who, hi, why))
    if variant == "thesis":  # every column is eligible; `binary` is ignored
        cols = rng.permutation(d)[: math.floor(d * s + _EPS)]
    else:  # int(sqrt(r) D) columns, D counting all columns, drawn among the numeric ones
        numeric = np.flatnonzero(~flags)
        cols = rng.permutation(numeric)[: min(int(s * d + _EPS), numeric.size)]
    return X, s, cols


def nmar_lowest(
    X, rate=0.2, *, rng, variant: Literal["thesis", "code"] = "thesis", binary=None
) -> np.ndarray:
    """NMAR, lowest values removed (seed000 NMAR, a.k.a. NMAR_rows, code "MNAR_rows").

    * ``variant="thesis"``: shuffle the columns, mark the first floor(D sqrt(r)); in each marked
      column the round(N sqrt(r)) lowest values go missing (ties broken at random). All columns
      are eligible (``binary`` is ignored: the thesis notes that "all the zeroes disappeared").
    * ``variant="code"``: int(sqrt(r) D) columns drawn among the **non-binary** columns only
      (columns flagged in ``binary`` are never amputated); in each, the values strictly below the
      column's sqrt(r)-quantile go missing.

    Expected rate ~ r (exactly floor(D sqrt r) round(N sqrt r) / (N D) for the thesis variant).
    In every amputated column, each removed value is <= every kept value.

    Parameters
    ----------
    X : array of shape (n_samples, n_features)
    rate : float in [0, 1]
    binary : sequence of n_features bool, optional

    Returns a bool ndarray of shape (n_samples, n_features).
    """
    X, s, cols = _nmar_columns(X, rate, rng, variant, binary, "nmar_lowest")
    n = X.shape[0]
    missing = np.zeros(X.shape, dtype=bool)
    for j in cols:
        if variant == "thesis":
            missing[_lowest(X[:, j], int(round(n * s)), rng), j] = True
        else:
            missing[:, j] = X[:, j] < np.quantile(X[:, j], s)
    return missing


def nmar_random(
    X, rate=0.2, *, rng, variant: Literal["thesis", "code"] = "thesis", binary=None
) -> np.ndarray:
    """NMAR, a random part of the lowest values removed (seed000 NMAR_random, code "MNAR_R_rows").

    * ``variant="thesis"``: as :func:`nmar_lowest` (floor(D sqrt r) columns), but each marked column
      only *marks* its round(7/5 N sqrt r) lowest values and then drops a random 5/7 of them
      (round(5/7 * marked)). Expected rate r; needs 7/5 sqrt(r) <= 1, i.e. r <= 25/49 ~ 0.51.
    * ``variant="code"``: the author's ``mnar_random_rows(sqrt r, 1.4 sqrt r, sqrt(r)/1.4)``:
      int(sqrt(r) D) non-binary columns, values strictly below the (1.4 sqrt r)-quantile marked,
      each dropped w.p. **sqrt(r)/1.4** (not 5/7).

    .. warning::
       The code variant does **not** realise the requested rate: it realises about
       sqrt(r) * 1.4 sqrt(r) * sqrt(r)/1.4 = **r**1.5** (0.032 / 0.164 / 0.354 for
       r = 0.1 / 0.3 / 0.5). This reproduces the published numbers of seed000, whose figures are
       labelled with the requested r. Use the thesis variant for the stated rate.

    Parameters
    ----------
    X : array of shape (n_samples, n_features)
    rate : float in [0, 25/49]
    binary : sequence of n_features bool, optional (code variant only)

    Returns a bool ndarray of shape (n_samples, n_features).
    """
    why = " (the marked fraction 7/5 sqrt(rate) must not exceed 1)"
    X, s, cols = _nmar_columns(X, rate, rng, variant, binary, "nmar_random", 25 / 49, why)
    n = X.shape[0]
    missing = np.zeros(X.shape, dtype=bool)
    for j in cols:
        if variant == "thesis":
            marked = _lowest(X[:, j], int(round(1.4 * n * s)), rng)
            missing[rng.permutation(marked)[: int(round(marked.size * 5 / 7))], j] = True
        else:
            marked = X[:, j] < np.quantile(X[:, j], min(1.0, 1.4 * s))
            missing[:, j] = marked & (rng.random(n) < s / 1.4)
    return missing


def self_masking(X, rate=0.2, *, rng, strength=2.0) -> np.ndarray:
    """Self-masking logistic NMAR: P(x_ij missing) = sigmoid(a_j + strength * z_ij).

    z is the column-standardised value (ddof 0; a constant column gets z = 0). Each intercept
    a_j is solved with :func:`scipy.optimize.brentq` so that the expected missing fraction of
    column j on these data is ``rate``. Positive strength hides large values (missing values
    have a higher mean than observed ones), negative strength hides small values, 0 is MCAR.

    Parameters
    ----------
    X : array of shape (n_samples, n_features)
    rate : float in [0, 1]
    strength : float

    Returns a bool ndarray of shape (n_samples, n_features).
    """
    X = _complete(X, "self_masking")
    _check_rng(rng, "self_masking")
    r = _check_rate(rate, "self_masking")
    b = _check_strength(strength, "self_masking")
    p = np.column_stack([_logistic_probs(_standardize(X[:, j]), b, r) for j in range(X.shape[1])])
    return rng.random(X.shape) < p


def quantile_levels(X, n_levels: int) -> np.ndarray:
    """Map each column to equal-frequency levels 1..n_levels (1 = lowest values).

    Level = 1 + floor((rank - 1/2) n_levels / N) with average ranks, so tied values share a level
    and, without ties and with N divisible by ``n_levels``, every level holds N / n_levels rows.

    Returns an int ndarray of the shape of ``X``.
    """
    from scipy.stats import rankdata  # local: keeps ``import explorer.core`` light

    X = as_float_matrix(X, name="X")
    ranks = rankdata(X, method="average", axis=0)
    return np.clip(1 + np.floor((ranks - 0.5) * n_levels / X.shape[0]), 1, n_levels).astype(int)


def _levels(X, n_levels: int, levels: str, who: str) -> np.ndarray:
    _check_choice(levels, ("auto", "given", "quantile"), who, "levels")
    is_given = bool(np.all((X == np.round(X)) & (X >= 1) & (X <= n_levels)))
    if levels == "given" and not is_given:
        raise BadInputError(
            f"{who}: with levels='given', X must hold integer levels 1..{n_levels}; it does not. "
            "Use levels='quantile' to bin each column into equal-frequency levels."
        )
    return X.astype(int) if levels != "quantile" and is_given else quantile_levels(X, n_levels)


def _cpt_mask(X, mu: np.ndarray, levels: str, rng, who: str) -> np.ndarray:
    v = _levels(X, mu.size, levels, who)
    return ~(rng.random(X.shape) < mu[v - 1])


def cpt_v(
    X, *, rng, mu=(0.1, 0.3, 0.5, 0.7, 0.9), levels: Literal["auto", "given", "quantile"] = "auto"
) -> np.ndarray:
    """CPT-v value-based NMAR (seed004 eq. 5.4.6): P(observed | x_dn = v) = mu_v, independently.

    Careful with the convention: seed004's ``mu_v = P(r_dn = 1 | x_dn = v)`` is the probability of
    being **observed** (r = 1 observed), so P(missing | v) = 1 - mu_v. Values are levels
    v = 1..V with V = len(mu): ``levels="given"`` requires X to hold such integers (ratings),
    ``"quantile"`` bins every column into V equal-frequency levels (:func:`quantile_levels`),
    ``"auto"`` uses the values when they are integers in 1..V and bins otherwise. The expected
    rate is 1 - sum_v mu_v P(v) (1 - mean(mu) with quantile levels).

    Parameters
    ----------
    X : array of shape (n_samples, n_features)
    mu : sequence of V >= 2 probabilities in [0, 1]

    Returns a bool ndarray of shape (n_samples, n_features).
    """
    X = _complete(X, "cpt_v")
    _check_rng(rng, "cpt_v")
    m = np.asarray(mu, dtype=float)
    if m.ndim != 1 or m.size < 2 or not np.all((m >= 0) & (m <= 1)):
        raise BadInputError(
            f"cpt_v: mu must be a sequence of at least 2 probabilities in [0, 1]; got {mu!r}."
        )
    return _cpt_mask(X, m, levels, rng, "cpt_v")


def linear_value_effect(
    X, *, rng, s=0.125, n_levels=5, levels: Literal["auto", "given", "quantile"] = "auto"
) -> np.ndarray:
    """CPT-v with a linear value effect (seed004 Sec. 5.2.1): mu_v = s (v - (V+1)/2) + 1/2.

    mu_v is the **observation** probability of level v (V = ``n_levels``), s in [0, 1/(V-1)]; s = 0
    is MCAR with rate 1/2 and s = 1/(V-1) gives mu = (0, ..., 1). With quantile (equal-frequency)
    levels the expected rate is 1/2 for every s. See :func:`cpt_v` for ``levels``.

    Returns a bool ndarray of shape (n_samples, n_features).
    """
    who = "linear_value_effect"
    X = _complete(X, who)
    _check_rng(rng, who)
    if isinstance(n_levels, bool) or not isinstance(n_levels, (int, np.integer)) or n_levels < 2:
        raise BadInputError(f"{who}: n_levels must be an integer >= 2; got {n_levels!r}.")
    s_max = 1.0 / (n_levels - 1)
    try:
        slope = float(s)
    except (TypeError, ValueError):
        slope = math.nan
    if not 0.0 <= slope <= s_max + 1e-12:
        raise BadInputError(f"{who}: s={s!r} is outside [0, 1/(V-1)] = [0, {s_max:.4g}] for V={n_levels}.")
    mu = np.clip(slope * (np.arange(1, n_levels + 1) - (n_levels + 1) / 2) + 0.5, 0.0, 1.0)
    return _cpt_mask(X, mu, levels, rng, who)


def fixed_patterns(X, *, rng, patterns=None, probs=None) -> np.ndarray:
    """MCAR from a fixed list of patterns (seed004 Ch. 6): row i gets pattern k w.p. probs[k].

    ``patterns`` is a (K, n_features) boolean array with **True = missing**. seed004 writes
    patterns as response vectors with 1 = observed, e.g. {[1,1], [0,1], [1,0]}; convert with
    ``patterns = ~np.asarray(r, dtype=bool)`` (here [[F,F], [T,F], [F,T]]). The default is that
    generalised to D columns: the complete pattern plus each single-column-missing pattern.
    ``probs`` defaults to uniform.

    Returns a bool ndarray of shape (n_samples, n_features).
    """
    who = "patterns"
    X = _complete(X, who)
    _check_rng(rng, who)
    n, d = X.shape
    pats = np.vstack([np.zeros((1, d)), np.eye(d)]).astype(bool) if patterns is None else np.asarray(patterns)
    if pats.ndim != 2 or pats.shape[1] != d or pats.shape[0] < 1:
        raise BadInputError(f"{who}: patterns must have shape (n_patterns, {d}); got {pats.shape}.")
    if pats.dtype != bool:
        if not np.isin(pats, (0, 1)).all():
            raise BadInputError(f"{who}: patterns must be boolean (True = missing) or 0/1.")
        pats = pats.astype(bool)
    k = pats.shape[0]
    p = np.full(k, 1.0 / k) if probs is None else np.asarray(probs, dtype=float)
    if p.shape != (k,) or np.any(p < 0) or not np.isclose(p.sum(), 1.0, atol=1e-8):
        raise BadInputError(f"{who}: probs must be {k} non-negative numbers summing to 1; got {probs!r}.")
    return pats[rng.choice(k, size=n, p=p / p.sum())].copy()


# --------------------------------------------------------------------------- image masks
def random_pixels(X, rate=0.5, *, rng, image_shape=None) -> np.ndarray:
    """MCAR pixels (seed003 "Random", seed001 Fig. 2): each pixel missing w.p. ``rate``.

    ``image_shape=(height, width)`` with height * width = n_features is required (checked).
    Returns a bool ndarray of shape (n_samples, n_features).
    """
    X = _complete(X, "random_pixels")
    _image_shape(image_shape, X.shape[1], "random_pixels")
    return mcar(X, rate, rng=rng)


def _block_masks(h: int, w: int) -> dict[str, np.ndarray]:
    """Flattened (h*w,) masks of the halves (h//2 rows / w//2 columns each) and quarters."""
    rows, cols = np.arange(h)[:, None], np.arange(w)[None, :]
    top, bottom = rows < h // 2, rows >= h - h // 2
    left, right = cols < w // 2, cols >= w - w // 2
    grid = {"top": top & (cols >= 0), "bottom": bottom & (cols >= 0),
            "left": left & (rows >= 0), "right": right & (rows >= 0),
            0: top & left, 1: top & right, 2: bottom & left, 3: bottom & right}
    return {key: m.ravel() for key, m in grid.items()}


def image_quarter(X, *, rng, image_shape=None, quarter=None) -> np.ndarray:
    """MCAR quarter mask (seed003 "Quarters", seed004 MNIST): one quarter of each image missing.

    ``quarter`` = 0 top-left, 1 top-right, 2 bottom-left, 3 bottom-right, or None to draw one
    uniformly per image. A quarter is an (height//2) x (width//2) corner block; for an odd
    dimension the middle row/column is never removed. Needs height, width >= 2.

    Returns a bool ndarray of shape (n_samples, height * width).
    """
    X = _complete(X, "quarter")
    _check_rng(rng, "quarter")
    h, w = _image_shape(image_shape, X.shape[1], "quarter")
    if quarter is not None:
        _check_choice(quarter, (0, 1, 2, 3), "quarter", "quarter")
    if h < 2 or w < 2:
        raise BadInputError(
            f"quarter: images of shape {(h, w)} have no quarters; height and width must be >= 2."
        )
    masks = _block_masks(h, w)
    stack = np.stack([masks[q] for q in range(4)])
    which = rng.integers(0, 4, size=X.shape[0]) if quarter is None else np.full(X.shape[0], quarter)
    return stack[which]


def image_half(
    X, *, rng, image_shape=None, side: Literal["top", "bottom", "left", "right"] = "top"
) -> np.ndarray:
    """MCAR half mask (seed003 "Halves": the top half of every image is removed).

    The half is height//2 rows (top/bottom) or width//2 columns (left/right); for an odd
    dimension the middle row/column stays observed. Deterministic; ``rng`` is unused.

    Returns a bool ndarray of shape (n_samples, height * width).
    """
    X = _complete(X, "half")
    _check_rng(rng, "half")
    h, w = _image_shape(image_shape, X.shape[1], "half")
    _check_choice(side, ("top", "bottom", "left", "right"), "half", "side")
    if (h if side in ("top", "bottom") else w) < 2:
        raise BadInputError(f"half: images of shape {(h, w)} cannot be split on side={side!r}.")
    return np.broadcast_to(_block_masks(h, w)[side], X.shape).copy()


def image_square(X, *, rng, image_shape=None, size=5) -> np.ndarray:
    """MCAR square mask (seed002 Sec. 3.1): a size x size square per image, fully inside it.

    The top-left corner is uniform over the (height - size + 1) x (width - size + 1) positions
    (576 positions for 5 x 5 squares on 28 x 28 MNIST).

    Returns a bool ndarray of shape (n_samples, height * width).
    """
    X = _complete(X, "square")
    _check_rng(rng, "square")
    h, w = _image_shape(image_shape, X.shape[1], "square")
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or not 1 <= size <= min(h, w):
        raise BadInputError(
            f"square: size={size!r} must be an integer in [1, {min(h, w)}] for images of shape {(h, w)}."
        )
    n = X.shape[0]
    r0 = rng.integers(0, h - size + 1, size=n)[:, None]
    c0 = rng.integers(0, w - size + 1, size=n)[:, None]
    in_r = (np.arange(h) >= r0) & (np.arange(h) < r0 + size)
    in_c = (np.arange(w) >= c0) & (np.arange(w) < c0 + size)
    return (in_r[:, :, None] & in_c[:, None, :]).reshape(n, h * w)


# --------------------------------------------------------------------------- registry
@dataclass(frozen=True)
class Param:
    """One parameter of a mechanism, described for the app.

    ``kind`` is one of "float", "int", "choice", "column", "columns", "bool_vector",
    "float_vector", "bool_matrix", "shape"; ``bounds`` (lo, hi) for numbers (None = open),
    ``choices`` for "choice". A default of None for "shape" means required.
    """

    name: str
    default: Any
    kind: str
    bounds: tuple | None = None
    choices: tuple | None = None
    doc: str = ""


@dataclass(frozen=True)
class Mechanism:
    """A registered mechanism: ``func(X, [rate,] *, rng, **params) -> missing``."""

    name: str
    func: Callable[..., np.ndarray]
    kind: Literal["MCAR", "MAR", "NMAR"]
    summary: str
    params: tuple[Param, ...] = ()
    source: str = ""
    default_rate: float | None = field(init=False)

    def __post_init__(self):
        rate = inspect.signature(self.func).parameters.get("rate")
        object.__setattr__(self, "default_rate", None if rate is None else rate.default)

    @property
    def has_rate(self) -> bool:
        """True when the mechanism takes a requested overall ``rate``."""
        return self.default_rate is not None

    @property
    def image(self) -> bool:
        """True for image masks (they need ``image_shape``)."""
        return any(p.name == "image_shape" for p in self.params)

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)


@dataclass(frozen=True)
class MaskResult:
    """Output of :func:`apply_mechanism`; ``missing`` (n_samples, n_features) is read-only."""

    missing: np.ndarray
    requested_rate: float | None
    realised_rate: float
    mechanism: str
    kind: str
    params: dict


_VARIANT = Param(
    "variant", "thesis", "choice", choices=("thesis", "code"),
    doc="'thesis' follows the text of seed000, 'code' the author's utils.py",
)
_BINARY = Param("binary", None, "bool_vector", doc="binary columns are never amputated by the code variant")
_TARGET = Param("target", -1, "columns", doc="column(s) that can go missing")
_CONTROL = Param("control", 0, "column", doc="column that drives missingness; always observed")
_SHAPE = Param("image_shape", None, "shape", doc="(height, width) of the flattened images (required)")
_LEVELS = Param(
    "levels", "auto", "choice", choices=("auto", "given", "quantile"),
    doc="values are levels 1..V ('given'), binned by quantile, or 'auto'",
)
_STRENGTH = Param("strength", 2.0, "float", (-10.0, 10.0), doc="logistic slope per standard deviation")

_REGISTRY = (
    Mechanism("mcar", mcar, "MCAR", "Each entry missing independently with probability rate",
              (), "seed000 MCAR_total"),
    Mechanism("mcar_rows", mcar_rows, "MCAR",
              "Rows marked w.p. sqrt(rate) lose about sqrt(rate) of their entries",
              (_VARIANT,), "seed000 MCAR_rows"),
    Mechanism("mar_rows", mar_rows, "MAR",
              "Rows with a low score of random controlling columns lose values",
              (_VARIANT, Param("n_controlling", None, "int", (1, None), doc="default max(1, int(0.2 D))"),
               _BINARY), "seed000 MAR_rows"),
    Mechanism("mar_threshold", mar_threshold, "MAR",
              "Target missing where the control column is above a threshold",
              (_TARGET, _CONTROL, Param("side", "above", "choice", choices=("above", "below"))),
              "seed001 Fig. 1"),
    Mechanism("mar_logistic", mar_logistic, "MAR",
              "Target missing with logistic probability in the control column",
              (_TARGET, _CONTROL, _STRENGTH), "logistic MAR"),
    Mechanism("nmar_lowest", nmar_lowest, "NMAR", "Random columns lose their lowest values",
              (_VARIANT, _BINARY), "seed000 NMAR"),
    Mechanism("nmar_random", nmar_random, "NMAR",
              "Random columns lose a random part of their lowest values (code variant: ~rate**1.5)",
              (_VARIANT, _BINARY), "seed000 NMAR_random"),
    Mechanism("self_masking", self_masking, "NMAR",
              "Each value hides itself with logistic probability in its own value",
              (_STRENGTH,), "self-masking logistic"),
    Mechanism("cpt_v", cpt_v, "NMAR", "Value level v is observed with probability mu_v",
              (Param("mu", (0.1, 0.3, 0.5, 0.7, 0.9), "float_vector", (0.0, 1.0), doc="P(observed | v)"),
               _LEVELS), "seed004 CPT-v"),
    Mechanism("linear_value_effect", linear_value_effect, "NMAR",
              "Observation probability rises linearly with the value level",
              (Param("s", 0.125, "float", (0.0, 0.25), doc="slope, at most 1/(n_levels - 1)"),
               Param("n_levels", 5, "int", (2, 20)), _LEVELS), "seed004 Sec. 5.2.1"),
    Mechanism("patterns", fixed_patterns, "MCAR", "Each row draws a pattern from a fixed list",
              (Param("patterns", None, "bool_matrix", doc="(K, D), True = missing; default: see docstring"),
               Param("probs", None, "float_vector", (0.0, 1.0), doc="pattern probabilities (uniform)")),
              "seed004 Ch. 6"),
    Mechanism("random_pixels", random_pixels, "MCAR", "Each pixel missing independently w.p. rate",
              (_SHAPE,), "seed003 Random"),
    Mechanism("quarter", image_quarter, "MCAR", "One quarter of each image is missing",
              (_SHAPE, Param("quarter", None, "choice", choices=(None, 0, 1, 2, 3),
                             doc="None = random; 0 top-left, 1 top-right, 2 bottom-left, 3 bottom-right")),
              "seed003 Quarters"),
    Mechanism("half", image_half, "MCAR", "One half of each image is missing",
              (_SHAPE, Param("side", "top", "choice", choices=("top", "bottom", "left", "right"))),
              "seed003 Halves"),
    Mechanism("square", image_square, "MCAR", "A random k x k square of each image is missing",
              (_SHAPE, Param("size", 5, "int", (1, None))), "seed002 Sec. 3.1"),
)
#: Registry of the mechanisms, keyed by name.
MECHANISMS: dict[str, Mechanism] = {m.name: m for m in _REGISTRY}


def get_mechanism(name: str) -> Mechanism:
    """Return the registered mechanism ``name``; BadInputError lists the available names."""
    try:
        return MECHANISMS[name]
    except (KeyError, TypeError):
        raise BadInputError(
            f"Unknown missingness mechanism {name!r}. Available: {', '.join(sorted(MECHANISMS))}."
        ) from None


def list_mechanisms(kind: str | None = None, image: bool | None = None) -> list[Mechanism]:
    """Registered mechanisms, optionally filtered by ``kind`` ("MCAR", "MAR", "NMAR") and ``image``."""
    if kind is not None:
        _check_choice(kind, ("MCAR", "MAR", "NMAR"), "list_mechanisms", "kind")
    return [m for m in MECHANISMS.values()
            if (kind is None or m.kind == kind) and (image is None or m.image == bool(image))]


def apply_mechanism(X, name: str, rate=None, *, rng, **params) -> MaskResult:
    """Apply the registered mechanism ``name`` to complete data ``X``.

    Parameters
    ----------
    X : array of shape (n_samples, n_features)
        Complete data (no NaN).
    name : str
        Registry key (see :data:`MECHANISMS`).
    rate : float, optional
        Requested overall missing rate; None uses the mechanism's default. Must be None for
        mechanisms without a rate (cpt_v, linear_value_effect, patterns, quarter, half, square).
    rng : numpy.random.Generator
    **params
        Mechanism parameters; unknown names raise BadInputError.

    Returns
    -------
    MaskResult
        ``missing`` (read-only bool array), requested and realised rate, and the effective
        parameters (defaults filled in).
    """
    mech = get_mechanism(name)
    accepted = ", ".join(mech.param_names) or "none"
    unknown = sorted(set(params) - set(mech.param_names))
    if unknown:
        raise BadInputError(
            f"Unknown parameter(s) {', '.join(unknown)} for mechanism {name!r}; accepted parameters: "
            f"{accepted}{' (plus rate)' if mech.has_rate else ''}."
        )
    if mech.has_rate:
        rate = mech.default_rate if rate is None else rate
        missing = mech.func(X, rate, rng=rng, **params)
    else:
        if rate is not None:
            raise BadInputError(
                f"Mechanism {name!r} has no rate: its missing fraction follows from its parameters "
                f"({accepted}). Pass rate=None."
            )
        missing = mech.func(X, rng=rng, **params)
    missing = np.array(missing, dtype=bool)
    missing.flags.writeable = False
    effective = {p.name: p.default for p in mech.params} | params
    return MaskResult(missing, None if rate is None else float(rate), float(missing.mean()),
                      name, mech.kind, effective)
