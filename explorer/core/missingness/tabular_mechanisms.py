"""Tabular missingness mechanisms: MCAR, MAR and NMAR masks (garriga2017, ghahramani1994, marlin2008).

The registry, the documentation table and :func:`~explorer.core.missingness.mechanisms.apply_mechanism` are in
:mod:`explorer.core.missingness.mechanisms`, which re-exports every function here.

Incomplete data (NaN entries) are accepted: every mechanism hides **observed** entries only (the
returned mask is False wherever ``X`` is NaN) and ``rate`` is the expected fraction of the
*observed* entries to hide. Value-driven rules use the observed values only (quantiles, ranks,
standardisation); the exact rule for a missing driver is in each docstring. On complete data the
masks are exactly those of the complete-data rules (same draws for the same generator).
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from explorer.core.missingness.mask_helpers import (
    _EPS,
    _binary_flags,
    _check_choice,
    _check_rate,
    _check_rng,
    _check_strength,
    _column,
    _columns,
    _complete,
    _logistic_probs,
    _observed,
    _standardize,
)
from explorer.core.validation import BadInputError, as_float_matrix

__all__ = [
    "quantile_levels", "mcar", "mcar_rows", "mar_rows", "mar_threshold", "mar_logistic", "nmar_lowest",
    "nmar_random", "self_masking", "cpt_v", "logit_vd", "linear_value_effect", "fixed_patterns",
]


# --------------------------------------------------------------------------- MCAR
def mcar(X, rate=0.2, *, rng) -> np.ndarray:
    """MCAR: each entry missing independently with probability ``rate`` (garriga2017 MCAR_total).

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
    return (rng.random(X.shape) < _check_rate(rate, "mcar")) & _observed(X)


def mcar_rows(X, rate=0.2, *, rng, variant: Literal["thesis", "code"] = "thesis") -> np.ndarray:
    """MCAR by rows (garriga2017 MCAR_rows): each row is marked with probability sqrt(r).

    * ``variant="thesis"``: a marked row loses a random sqrt(r) *fraction* of its entries. The
      count ``sqrt(r) * n_features`` is rounded stochastically (floor, plus one with probability
      equal to the fractional part) so that the expected overall rate is exactly ``r``.
    * ``variant="code"``: each entry of a marked row is missing independently w.p. sqrt(r).

    Parameters and returns as in :func:`mcar`; ``rate`` in [0, 1]. On incomplete data the rule
    runs as on complete data and already-missing entries are then left out of the mask (so a
    marked row loses about sqrt(r) of its *observed* entries).
    """
    X = _complete(X, "mcar_rows")
    _check_rng(rng, "mcar_rows")
    _check_choice(variant, ("thesis", "code"), "mcar_rows", "variant")
    s = math.sqrt(_check_rate(rate, "mcar_rows"))
    n, d = X.shape
    marked = rng.random(n) < s
    if variant == "code":
        return marked[:, None] & (rng.random((n, d)) < s) & _observed(X)
    k_float = s * d
    k = math.floor(k_float) + (rng.random(n) < k_float - math.floor(k_float))
    ranks = np.argsort(np.argsort(rng.random((n, d)), axis=1), axis=1)  # a random permutation per row
    return marked[:, None] & (ranks < k[:, None]) & _observed(X)


# --------------------------------------------------------------------------- MAR
def mar_rows(
    X, rate=0.2, *, rng, variant: Literal["thesis", "code"] = "thesis", n_controlling=None, binary=None
) -> np.ndarray:
    """MAR by rows (garriga2017 MAR_rows), driven by a random linear score of "controlling" columns.

    ``n_controlling`` (default ``max(1, int(0.2 * n_features))``, the code's ``int(0.2 D)``) columns
    C are drawn among the non-``binary`` columns, with weights w_j ~ U[-1/2, 1/2]; the score
    alpha_i = sum_{j in C} w_j x_ij uses the raw (unstandardised) values.

    * ``variant="thesis"``: sort rows by increasing alpha and mark the first
      ``round(N sqrt(r) D / (D - |C|))`` (= 5/4 N sqrt(r) when ``|C| = D/5``); in marked rows each
      **non-controlling** value is dropped w.p. sqrt(r). Controlling columns are always observed,
      so the mask is MAR. Expected rate r; feasible only for ``r <= ((D - |C|) / D)**2`` (0.64 in the
      thesis).
    * ``variant="code"``: mark rows with alpha <= the sqrt(r)-quantile of alpha (N sqrt(r) rows, not
      5/4 N sqrt(r)) and drop **every** column, controlling and binary ones included, w.p. sqrt(r).
      Rate ~ r for any r in [0, 1]; since controlling values can be hidden the mask is strictly
      NMAR, not MAR.

    Incomplete data: a row with a missing controlling value has no score (alpha = NaN) and is
    never marked (a missing driver does not trigger); the number of marked rows (thesis) or the
    quantile of alpha (code) is computed over all N rows and taken among the scored rows, so the
    rate stays about r while few rows lack a score. Already-missing entries are left out.

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
    scored = ~np.isnan(alpha)  # a missing controlling value leaves the row unscored: never marked
    droppable = np.ones(d, dtype=bool)
    marked = np.zeros(n, dtype=bool)
    if variant == "thesis":
        marked[np.argsort(alpha, kind="stable")[: int(round(n * s * d / (d - n_c)))]] = True  # NaN last
        droppable[ctrl] = False
    elif scored.any():
        q = min(1.0, s * n / int(scored.sum()))
        marked = alpha <= np.quantile(alpha[scored], q)
    marked &= scored
    return marked[:, None] & droppable[None, :] & (rng.random((n, d)) < s) & _observed(X)


def _targets_and_control(X, rate, target, control, who):
    """Control and target columns and the fraction q of the targets' observed entries to hide.

    q = r n_obs / n_obs_targets (= r D / n_targets on complete data), feasible for q <= 1.
    """
    n, d = X.shape
    ctrl = _column(control, d, who, "control")
    targets = _columns(target, d, who, "target")
    if ctrl in targets:
        raise BadInputError(f"{who}: the control column {ctrl} cannot also be a target; it stays observed.")
    obs = _observed(X)
    n_obs, n_obs_t = int(obs.sum()), int(obs[:, targets].sum())
    if n_obs == n_obs_t:  # nothing observed outside the targets (or nothing at all)
        hi = 1.0
    else:
        hi = n_obs_t / n_obs
    why = (f" (only the {targets.size} target column(s) out of {d} can be missing; add target "
           "columns or lower the rate)")
    if n_obs < n * d:
        why = (f" (only the {n_obs_t} observed entries of the {targets.size} target column(s) out of "
               f"{n_obs} observed entries can be hidden; add target columns or lower the rate)")
    r = _check_rate(rate, who, hi, why)
    if n_obs == n * d:  # complete data: the original formula, bit for bit
        return ctrl, targets, min(1.0, r * d / targets.size)
    return ctrl, targets, (min(1.0, r * n_obs / n_obs_t) if n_obs_t else 0.0)


def mar_threshold(
    X, rate=0.2, *, rng, target=-1, control=0, side: Literal["above", "below"] = "above"
) -> np.ndarray:
    """MAR by thresholding (ghahramani1994 Fig. 1): target(s) missing where ``control`` is above/below t.

    The overall rate ``r`` means each target column loses a fraction q = r D / n_targets, so
    ``r <= n_targets / D``. With k = round(q N), t is the k-th largest (``side="above"``) or k-th
    smallest (``"below"``) control value, and a row loses all its targets iff x_control >= t
    (resp. <= t). The mask is a deterministic function of the control column (ties share their
    fate, so ties can add rows); ``rng`` is validated but unused. The control column is always
    observed.

    Incomplete data: q is the fraction of the targets' *observed* entries to hide
    (q = r n_observed / n_observed_in_targets); t is taken among the observed control values
    with k = min(round(q N), n_observed_control), and a row whose control is missing never
    triggers. The rate is then about r when the targets' own gaps do not depend on the control.

    Parameters
    ----------
    X : array of shape (n_samples, n_features)
    rate : float in [0, n_targets / n_features] (complete data)
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
    x = X[:, ctrl]
    xs = np.sort(x[~np.isnan(x)])  # a missing control value never triggers (NaN >= t is False)
    n_c = xs.size
    k = min(int(round(q * n)), n_c)
    rows = np.zeros(n, dtype=bool)
    if k > 0:
        rows = x >= xs[n_c - k] if side == "above" else x <= xs[k - 1]
    missing = np.zeros(X.shape, dtype=bool)
    missing[:, targets] = rows[:, None]
    return missing & _observed(X)


def mar_logistic(X, rate=0.2, *, rng, target=-1, control=0, strength=2.0) -> np.ndarray:
    """Logistic MAR: P(x_it missing) = sigmoid(a + strength * z_i), z the standardised control.

    Each target column t is amputated independently given the control. The intercept ``a`` is
    found by :func:`scipy.optimize.brentq` so that the expected fraction of missing values per
    target on these data, mean_i sigmoid(a + b z_i), equals q = r D / n_targets (so the expected
    overall rate is r; ``r <= n_targets / D``). ``strength=0`` is MCAR on the targets; positive
    strength hides targets where the control is high. The control column is always observed.

    Incomplete data: z is standardised over the observed control values; a row whose control is
    missing never triggers (P = 0); ``a`` is solved over the rows with an observed control for the
    mean probability min(1, q N / n_observed_control), q the fraction of the targets' observed
    entries to hide (see :func:`mar_threshold`), so the rate stays about r.

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
    z = _standardize(X[:, ctrl])
    has = ~np.isnan(z)
    p = np.zeros(X.shape[0])
    if has.any():
        p[has] = _logistic_probs(z[has], b, min(1.0, q * X.shape[0] / int(has.sum())))
    missing = np.zeros(X.shape, dtype=bool)
    missing[:, targets] = rng.random((X.shape[0], targets.size)) < p[:, None]
    return missing & _observed(X)


# --------------------------------------------------------------------------- NMAR
def _lowest(col: np.ndarray, m: int, rng) -> np.ndarray:
    """Indices of the ``m`` lowest values of ``col``, ties broken at random (NaN sort last)."""
    return np.lexsort((rng.random(col.size), col))[:m]


def _below_quantile(col: np.ndarray, q: float) -> np.ndarray:
    """``col < quantile(observed values of col, q)``; False at NaN and for a column with no value."""
    obs = ~np.isnan(col)
    if not obs.any():
        return np.zeros(col.shape, dtype=bool)
    return col < np.quantile(col[obs], q)


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
    """NMAR, lowest values removed (garriga2017 NMAR, a.k.a. NMAR_rows, code "MNAR_rows").

    * ``variant="thesis"``: shuffle the columns, mark the first floor(D sqrt(r)); in each marked
      column the round(N sqrt(r)) lowest values go missing (ties broken at random). All columns
      are eligible (``binary`` is ignored: the thesis notes that "all the zeroes disappeared").
    * ``variant="code"``: int(sqrt(r) D) columns drawn among the **non-binary** columns only
      (columns flagged in ``binary`` are never amputated); in each, the values strictly below the
      column's sqrt(r)-quantile go missing.

    Expected rate ~ r (exactly floor(D sqrt r) round(N sqrt r) / (N D) for the thesis variant).
    In every amputated column, each removed value is <= every kept value.

    Incomplete data: counts and quantiles are over each column's observed values (the thesis
    variant hides round(n_observed_j sqrt r) of them), so the rate is about r of the observed
    entries.

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
    n_obs = _observed(X).sum(axis=0)
    for j in cols:
        if variant == "thesis":
            missing[_lowest(X[:, j], int(round(n_obs[j] * s)), rng), j] = True
        else:
            missing[:, j] = _below_quantile(X[:, j], s)
    return missing


def nmar_random(
    X, rate=0.2, *, rng, variant: Literal["thesis", "code"] = "thesis", binary=None
) -> np.ndarray:
    """NMAR, a random part of the lowest values removed (garriga2017 NMAR_random, code "MNAR_R_rows").

    * ``variant="thesis"``: as :func:`nmar_lowest` (floor(D sqrt r) columns), but each marked column
      only *marks* its round(7/5 N sqrt r) lowest values and then drops a random 5/7 of them
      (round(5/7 * marked)). Expected rate r; needs 7/5 sqrt(r) <= 1, i.e. r <= 25/49 ~ 0.51.
    * ``variant="code"``: the author's ``mnar_random_rows(sqrt r, 1.4 sqrt r, sqrt(r)/1.4)``:
      int(sqrt(r) D) non-binary columns, values strictly below the (1.4 sqrt r)-quantile marked,
      each dropped w.p. **sqrt(r)/1.4** (not 5/7).

    .. warning::
       The code variant does **not** realise the requested rate: it realises about
       sqrt(r) * 1.4 sqrt(r) * sqrt(r)/1.4 = **r**1.5** (0.032 / 0.164 / 0.354 for
       r = 0.1 / 0.3 / 0.5). This reproduces the published numbers of garriga2017, whose figures are
       labelled with the requested r. Use the thesis variant for the stated rate.

    Incomplete data: counts and quantiles are over each column's observed values, as in
    :func:`nmar_lowest`.

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
    n_obs = _observed(X).sum(axis=0)
    missing = np.zeros(X.shape, dtype=bool)
    for j in cols:
        if variant == "thesis":
            marked = _lowest(X[:, j], int(round(1.4 * n_obs[j] * s)), rng)
            missing[rng.permutation(marked)[: int(round(marked.size * 5 / 7))], j] = True
        else:
            marked = _below_quantile(X[:, j], min(1.0, 1.4 * s))
            missing[:, j] = marked & (rng.random(n) < s / 1.4)
    return missing


def self_masking(X, rate=0.2, *, rng, strength=2.0) -> np.ndarray:
    """Self-masking logistic NMAR: P(x_ij missing) = sigmoid(a_j + strength * z_ij).

    z is the column-standardised value (ddof 0; a constant column gets z = 0). Each intercept
    a_j is solved with :func:`scipy.optimize.brentq` so that the expected missing fraction of
    column j on these data is ``rate``. Positive strength hides large values (missing values
    have a higher mean than observed ones), negative strength hides small values, 0 is MCAR.

    Incomplete data: z and a_j use the observed values of column j only; the expected fraction
    of its *observed* values hidden is ``rate``.

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
    p = np.zeros(X.shape)
    for j in range(X.shape[1]):
        z = _standardize(X[:, j])
        has = ~np.isnan(z)
        if has.any():
            p[has, j] = _logistic_probs(z[has], b, r)
    return (rng.random(X.shape) < p) & _observed(X)


def quantile_levels(X, n_levels: int) -> np.ndarray:
    """Map each column to equal-frequency levels 1..n_levels (1 = lowest values).

    Level = 1 + floor((rank - 1/2) n_levels / N) with average ranks, so tied values share a level
    and, without ties and with N divisible by ``n_levels``, every level holds N / n_levels rows.
    With NaN, ranks and N are those of each column's observed values, and NaN entries get level
    0 (no level).

    Returns an int ndarray of the shape of ``X``.
    """
    from scipy.stats import rankdata  # local: keeps ``import explorer.core`` light

    X = as_float_matrix(X, name="X")
    obs = _observed(X)
    if obs.all():
        ranks = rankdata(X, method="average", axis=0)
        return np.clip(1 + np.floor((ranks - 0.5) * n_levels / X.shape[0]), 1, n_levels).astype(int)
    out = np.zeros(X.shape, dtype=int)
    for j in range(X.shape[1]):
        o = obs[:, j]
        if o.any():
            ranks = rankdata(X[o, j], method="average")
            out[o, j] = np.clip(1 + np.floor((ranks - 0.5) * n_levels / o.sum()), 1, n_levels)
    return out


def _levels(X, n_levels: int, levels: str, who: str) -> np.ndarray:
    """Levels 1..n_levels of every observed entry (0 at NaN entries)."""
    _check_choice(levels, ("auto", "given", "quantile"), who, "levels")
    obs = _observed(X)
    vals = X[obs]
    is_given = bool(np.all((vals == np.round(vals)) & (vals >= 1) & (vals <= n_levels)))
    if levels == "given" and not is_given:
        raise BadInputError(
            f"{who}: with levels='given', X must hold integer levels 1..{n_levels}; it does not. "
            "Use levels='quantile' to bin each column into equal-frequency levels."
        )
    if levels != "quantile" and is_given:
        return np.where(obs, X, 0.0).astype(int)
    return quantile_levels(X, n_levels)


def _cpt_mask(X, mu: np.ndarray, levels: str, rng, who: str) -> np.ndarray:
    v = _levels(X, mu.size, levels, who)
    obs = v > 0
    return ~(rng.random(X.shape) < mu[np.where(obs, v, 1) - 1]) & obs


def cpt_v(
    X, *, rng, mu=(0.1, 0.3, 0.5, 0.7, 0.9), levels: Literal["auto", "given", "quantile"] = "auto"
) -> np.ndarray:
    """CPT-v value-based NMAR (marlin2008 eq. 5.4.6): P(observed | x_dn = v) = mu_v, independently.

    Careful with the convention: marlin2008's ``mu_v = P(r_dn = 1 | x_dn = v)`` is the probability of
    being **observed** (r = 1 observed), so P(missing | v) = 1 - mu_v. Values are levels
    v = 1..V with V = len(mu): ``levels="given"`` requires X to hold such integers (ratings),
    ``"quantile"`` bins every column into V equal-frequency levels (:func:`quantile_levels`),
    ``"auto"`` uses the values when they are integers in 1..V and bins otherwise. The expected
    rate is 1 - sum_v mu_v P(v) (1 - mean(mu) with quantile levels). On incomplete data the
    levels are those of the observed values (quantiles per column over its observed values) and
    only observed entries can be hidden.

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


def logit_vd(
    X, *, rng, sigma=(-2.0, -1.0, 0.0, 1.0, 2.0), omega=None,
    levels: Literal["auto", "given", "quantile"] = "auto",
) -> np.ndarray:
    """Logit-vd value-and-item NMAR (marlin2008 eq. 5.6.1): P(observed | x_dn = v) = sigmoid(sigma_v + omega_d).

    ``sigma_v`` is a value effect shared by every column (item), ``omega_d`` an effect of column d (exposure,
    promotion); with all ``omega_d`` equal this is :func:`cpt_v` with mu_v = sigmoid(sigma_v + omega), and it draws
    the same mask as :func:`cpt_v` from the same generator. As in :func:`cpt_v`, marlin2008's r = 1 is *observed*:
    the returned mask (True = missing) is drawn with P(missing | v, d) = 1 - sigmoid(sigma_v + omega_d). Values are
    levels v = 1..V with V = len(sigma) (``levels`` as in :func:`cpt_v`); only observed entries can be hidden.

    Parameters
    ----------
    X : array of shape (n_samples, n_features)
    sigma : sequence of V >= 2 finite numbers (logits of the value effect)
    omega : sequence of n_features finite numbers, optional (default: all 0)

    Returns a bool ndarray of shape (n_samples, n_features).
    """
    who = "logit_vd"
    X = _complete(X, who)
    _check_rng(rng, who)
    s = np.asarray(sigma, dtype=float) if np.ndim(sigma) == 1 else np.array([np.nan])
    if s.size < 2 or not np.all(np.isfinite(s)):
        raise BadInputError(f"{who}: sigma must be a sequence of at least 2 finite numbers (value logits); "
                            f"got {sigma!r}.")
    d = X.shape[1]
    w = np.zeros(d) if omega is None else np.asarray(omega, dtype=float)
    if w.shape != (d,) or not np.all(np.isfinite(w)):
        raise BadInputError(f"{who}: omega must hold one finite number per column ({d}); got {omega!r}.")
    v = _levels(X, s.size, levels, who)
    obs = v > 0
    prob = 1.0 / (1.0 + np.exp(-(s[np.where(obs, v, 1) - 1] + w[None, :])))
    return ~(rng.random(X.shape) < prob) & obs


def linear_value_effect(
    X, *, rng, s=0.125, n_levels=5, levels: Literal["auto", "given", "quantile"] = "auto"
) -> np.ndarray:
    """CPT-v with a linear value effect (marlin2008 Sec. 5.2.1): mu_v = s (v - (V+1)/2) + 1/2.

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
    """MCAR from a fixed list of patterns (marlin2008 Ch. 6): row i gets pattern k w.p. probs[k].

    ``patterns`` is a (K, n_features) boolean array with **True = missing**. marlin2008 writes
    patterns as response vectors with 1 = observed, e.g. {[1,1], [0,1], [1,0]}; convert with
    ``patterns = ~np.asarray(r, dtype=bool)`` (here [[F,F], [T,F], [F,T]]). The default is that
    generalised to D columns: the complete pattern plus each single-column-missing pattern.
    ``probs`` defaults to uniform. On incomplete data a pattern hides only the entries of the row
    that are observed.

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
    return pats[rng.choice(k, size=n, p=p / p.sum())] & _observed(X)
