r"""Per-column transforms for bounded columns: log for positive columns, logit for bounded ones.

A Gaussian mixture knows nothing of a column's support: fitted to ozone concentrations it imputes
negative values with intervals such as [-46.7, 29]. This module fits the mixture on transformed
columns and returns every answer on the ORIGINAL scale.

* :func:`suggest_transforms` looks at the observed values of every column and suggests ``"log"``
  (all values > 0 and right-skewed or close to 0), ``"logit"`` (all values in [0, 1], or in
  [0, 100] for a column whose name says it is a percentage) or nothing, with the reason.
  It never changes anything.
* :class:`TransformedImputer` wraps one of explorer's density imputers
  (GaussianMixtureImputer, DPGMMImputer, FactorAnalysisImputer, MFAImputer). With
  ``transforms="suggest"`` it applies the suggestions and says so (a :class:`TransformWarning`
  naming every transformed column and why; ``transforms_`` keeps them); with a dict it applies
  exactly what it is given; with ``None`` it transforms nothing. Whenever a column it does not
  transform has a bound its observed values never cross (0 below for non-negative columns, 1 or 100
  above for fractions and percentages) and an imputation, a draw or an interval crosses it, it
  emits a :class:`BoundCrossingWarning`.

The transforms (:class:`ColumnTransform`), with bounds ``lower`` / ``upper``:

.. math::

    \text{log:}\quad y = \log(x - \ell), \qquad x = \ell + e^{y};
    \qquad
    \text{logit:}\quad y = \log(x - \ell) - \log(u - x), \qquad x = \ell + (u - \ell)\,\sigma(y).

``"log"`` means :math:`\ell = 0`; ``("log", lower)`` shifts (``("log", -1)`` is
:math:`\log(x + 1)` for counts with zeros). ``("logit", lower, upper)`` gives the bounds;
``"logit"`` alone takes [0, 1] when every observed value is in [0, 1] (or [0, 100] for a percentage
column), otherwise the observed range; a bound that an observed value reaches is widened by
``margin`` times the width (the logit of a value on its bound is infinite), and a lower bound
below 0 is raised to 0 when every observed value is > 0. Every observed value must lie strictly
inside the bounds (else a clear error).

Back on the original scale (all exact unless said):

* ``sample``: the inner draws, back-transformed;
* ``interval``: the inner quantiles, back-transformed (quantiles commute with increasing maps);
* ``transform`` (single imputation): with ``point="mean"`` (default) the conditional MEAN on the
  original scale, :math:`E[x^m \mid x^o] = \sum_k h_k E[g^{-1}(Y_k)]`, the least-squares
  imputation (what RMSE / NRMSE reward, and what the untransformed imputers return). It is NOT
  :math:`g^{-1}(E[y])`: for the log, :math:`E[e^Y] = e^{\mu + s^2/2}` per component (closed form);
  for the logit, :math:`E[\sigma(Y)]` has no closed form and is computed by Gauss-Hermite
  quadrature with 96 nodes per component. With ``point="median"`` the conditional median
  (:math:`g^{-1}` of the median of :math:`y`, exact), robust to a heavy right tail and always
  inside the interval;
* ``score_samples`` and ``conditional(X).logpdf``: densities on the original scale, with the
  Jacobian :math:`\log|dy/dx|` of the transformed entries (:math:`-\log(x-\ell)` for the log,
  :math:`\log(u-\ell) - \log(x-\ell) - \log(u-x)` for the logit), so they compare with the same
  imputer fitted without transforms (e.g. in ``GridSearchCV``).

Observed entries are returned as given, bit for bit (never round-tripped through exp(log(x))).
"""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from scipy.special import expit, logsumexp
from sklearn.base import BaseEstimator, TransformerMixin, clone
from sklearn.utils.validation import check_is_fitted

from explorer.core.gaussians.conditional import ConditionalMixture, NegativeIntervalWarning, quantile_of_mixtures
from explorer.core.gaussians.gaussian import normal_logpdf
from explorer.core.validation import BadInputError, as_float_matrix, check_level, column_label
from explorer.utils.inputs import input_kind, unwrap, wrap, wrap_draws

__all__ = [
    "BoundCrossingWarning",
    "ColumnTransform",
    "TransformWarning",
    "TransformedConditional",
    "TransformedImputer",
    "suggest_transforms",
]

KINDS = ("log", "logit")
POINTS = ("mean", "median")
_PERCENT_HINTS = ("%", "percent", "pct", "perc")
_FRACTION_HINTS = ("frac", "share", "proportion", "prob")
#: An unnamed column in [0, 1] is suggested a logit only when its observed values reach within this of both bounds.
_FILLS_UNIT = 0.05
_N_NODES = 96  # Gauss-Hermite nodes per component for the logit moments
_SKEW_LOG = 0.5  # right skew above which a positive column gets a log suggestion


class TransformWarning(UserWarning):
    """``TransformedImputer(transforms="suggest")`` says which transforms it applied and why."""


class BoundCrossingWarning(UserWarning):
    """An imputation, draw or interval of an untransformed column crosses a bound its observed values never cross."""


# ----------------------------------------------------------------------------- one column's transform
@dataclass(frozen=True)
class ColumnTransform:
    """The transform of one column: ``kind`` in {"log", "logit", None}, its bounds and why it was chosen.

    ``lower`` / ``upper`` are the transform's bounds (``upper`` is None for the log); for
    ``kind=None`` they are the natural bounds the observed values never cross (0 below a
    non-negative column, 1 or 100 above a fraction or percentage), used for the
    :class:`BoundCrossingWarning`, or None.
    """

    kind: str | None
    lower: float | None = None
    upper: float | None = None
    reason: str = ""

    @property
    def spec(self):
        """What to pass back in a ``transforms`` dict: None, "log", ("log", lower) or ("logit", lower, upper)."""
        if self.kind is None:
            return None
        if self.kind == "log":
            return "log" if self.lower == 0.0 else ("log", self.lower)
        return ("logit", self.lower, self.upper)

    def __str__(self) -> str:
        if self.kind is None:
            what = "none"
        elif self.kind == "log":
            what = "log(x)" if self.lower == 0.0 else f"log(x - {self.lower:g})"
        else:
            what = f"logit on ({self.lower:g}, {self.upper:g})"
        return f"{what}: {self.reason}" if self.reason else what

    # the maps (arrays of values inside the bounds)
    def forward(self, x: np.ndarray) -> np.ndarray:
        if self.kind == "log":
            return np.log(x - self.lower)
        if self.kind == "logit":
            return np.log(x - self.lower) - np.log(self.upper - x)
        return x

    def inverse(self, y: np.ndarray) -> np.ndarray:
        if self.kind == "log":
            with np.errstate(over="ignore"):
                return self.lower + np.exp(y)
        if self.kind == "logit":
            return np.clip(self.lower + (self.upper - self.lower) * expit(y), self.lower, self.upper)
        return y

    def log_jacobian(self, x: np.ndarray) -> np.ndarray:
        """:math:`\\log|dy/dx|` at ``x`` (0 for no transform)."""
        if self.kind == "log":
            return -np.log(x - self.lower)
        if self.kind == "logit":
            return np.log(self.upper - self.lower) - np.log(x - self.lower) - np.log(self.upper - x)
        return np.zeros_like(x)

    def inside(self, x: np.ndarray) -> np.ndarray:
        """True where ``x`` is strictly inside the transform's bounds (always True for no transform)."""
        if self.kind is None:
            return np.ones(np.shape(x), dtype=bool)
        ok = x > self.lower
        if self.kind == "logit":
            ok &= x < self.upper
        return ok


# ----------------------------------------------------------------------------- data in and out
def _as_matrix(X):
    """``(float copy with NaN, string column names or None, column labels for messages or None)``.

    Every input kind the imputers accept (array-like, DataFrame, 2-D DataArray, IncompleteData),
    read by the imputers' own ``_unwrap``.
    """
    matrix, names, labels = unwrap(X)
    arr = as_float_matrix(matrix, name="X", columns=labels)
    return arr, (None if names is None else [str(c) for c in names]), labels


def _skewness(v: np.ndarray) -> float:
    d = v - v.mean()
    m2 = np.mean(d * d)
    return float(np.mean(d * d * d) / m2**1.5) if m2 > 0 else 0.0


def _is_percent(name) -> bool:
    return isinstance(name, str) and any(h in name.lower() for h in _PERCENT_HINTS)


def _natural_bounds(v: np.ndarray, name) -> tuple[float | None, float | None]:
    """Bounds the observed values ``v`` never cross: 0 below if all >= 0; 1 (or 100 for a percentage name) above."""
    if v.size == 0 or v.min() < 0:
        return None, None
    if v.max() <= 1.0:
        return 0.0, 1.0
    if _is_percent(name) and v.max() <= 100.0:
        return 0.0, 100.0
    return 0.0, None


def _widened(v: np.ndarray, lo: float, hi: float, margin: float) -> tuple[float, float]:
    """Bounds reached by an observed value move out by ``margin`` times the width."""
    width = hi - lo
    if v.min() <= lo:
        lo = lo - margin * width
    if v.max() >= hi:
        hi = hi + margin * width
    return lo, hi


def _certain_upper(v: np.ndarray, name, hi: float) -> str | None:
    """Why the upper bound ``hi`` (1 or 100) of a column is certain, or None: a percentage or fraction by its name,
    or (for 1) observed values that fill [0, 1], within 0.05 of both ends. Values that merely stay below 1
    (a weight in tonnes, msleep's brainwt) do not make 1 a bound: a hidden value may exceed it."""
    if hi == 100.0:
        return "a percentage (by its name)"
    if isinstance(name, str) and any(h in name.lower() for h in _FRACTION_HINTS):
        return "a fraction (by its name)"
    if v.min() <= _FILLS_UNIT and v.max() >= 1.0 - _FILLS_UNIT:
        return "a fraction (the values fill [0, 1])"
    return None


def _suggest_column(v: np.ndarray, name, label: str, margin: float) -> ColumnTransform:
    n = v.size
    if n < 3 or np.unique(v).size <= 2:
        return ColumnTransform(None, reason=f"{np.unique(v).size} distinct observed value(s): left as is")
    lo, hi = _natural_bounds(v, name)
    span = f"min {v.min():.4g}, max {v.max():.4g}"
    note = ""
    if hi is not None:
        why = _certain_upper(v, name, hi)
        if why is not None:
            wlo, whi = _widened(v, lo, hi, margin)
            return ColumnTransform("logit", wlo, whi,
                                   f"all {n} observed values within [{lo:g}, {hi:g}] ({span}): {why}")
        note = (f"; within [0, 1] ({span}) but neither named a fraction nor filling it, so 1 is not taken as a "
                "bound (no logit)")
    if lo is not None and v.min() > 0:
        skew = _skewness(v)
        low = v.mean() - 2.0 * v.std()
        facts = f"all {n} observed values > 0, skewness {skew:.2f}, mean - 2 sd = {low:.4g}"
        if skew >= _SKEW_LOG or low <= 0:
            return ColumnTransform("log", 0.0, None, facts + note)
        shape = "left-skewed (a log would skew it further)" if skew <= -_SKEW_LOG else "nearly symmetric"
        return ColumnTransform(None, 0.0, None, f"{facts}: {shape} and far from 0, left as is{note}")
    if lo is not None:
        zeros = int(np.sum(v == 0))
        return ColumnTransform(
            None, 0.0, None,
            f"all {n} observed values >= 0 but {zeros} are 0, so log does not apply; for counts consider "
            f"('log', -1), i.e. log(x + 1), or ('logit', lower, upper){note}",
        )
    return ColumnTransform(None, reason=f"takes negative values ({span}): no bound detected")


def suggest_transforms(X, margin: float = 0.01) -> dict:
    """Suggest a transform for every column from its observed values; changes nothing.

    Rules (columns with at most 2 distinct values, e.g. 0/1, are left as is):

    * all observed values in [0, 1] and the bound 1 certain: a name containing "frac", "share",
      "proportion" or "prob", or values that fill the interval (min <= 0.05 and max >= 0.95) -> ``"logit"``
      on [0, 1]; in [0, 100] with a name containing "%", "percent", "pct" or "perc" -> ``"logit"`` on
      [0, 100] (a bound some value reaches is widened by ``margin`` times the width). Values that merely
      stay below 1 do not make 1 a bound (a hidden brain weight may exceed 1 kg; a logit would give it
      density 0): such a column goes to the rules below (a log when positive and skewed);
    * all > 0 and skewness >= 0.5, or mean - 2 sd <= 0 (a Gaussian would put visible mass below
      0) -> ``"log"``;
    * otherwise nothing, with the reason (non-negative columns with zeros are named, with the
      ``("log", -1)`` option for counts).

    Parameters
    ----------
    X : array-like, DataFrame or IncompleteData of shape (n_samples, n_features)
        NaN marks a missing entry.
    margin : float, default 0.01

    Returns
    -------
    dict
        Column name (or index for unnamed columns) -> :class:`ColumnTransform` with ``kind``,
        bounds and ``reason``. Pass it (edited or not) as ``TransformedImputer(transforms=...)``.

    Examples
    --------
    >>> import numpy as np
    >>> from explorer.impute.transformed import suggest_transforms
    >>> rng = np.random.default_rng(0)
    >>> X = np.column_stack([np.exp(rng.normal(3, 0.8, 100)), rng.uniform(0, 1, 100), rng.normal(0, 1, 100)])
    >>> {j: t.kind for j, t in suggest_transforms(X).items()}
    {0: 'log', 1: 'logit', 2: None}
    """
    margin = check_margin(margin)
    arr, names, _ = _as_matrix(X)
    out = {}
    for j in range(arr.shape[1]):
        v = arr[~np.isnan(arr[:, j]), j]
        key = j if names is None else names[j]
        out[key] = _suggest_column(v, key, column_label(j, names), margin)
    return out


def check_margin(margin) -> float:
    if isinstance(margin, bool) or not isinstance(margin, numbers.Real) or not 0.0 < margin < 0.5:
        raise BadInputError(f"margin must be a number in (0, 0.5), got {margin!r}.")
    return float(margin)


def resolve_transform(spec, v: np.ndarray, name, label: str, margin: float) -> ColumnTransform:
    """A user's spec for one column (None, "log", "logit", tuples, ColumnTransform) checked against its observed values."""
    if isinstance(spec, ColumnTransform):
        reason = spec.reason
        spec = spec.spec
    else:
        reason = "given"
    if spec is None or (isinstance(spec, str) and spec.lower() in ("none", "identity")):
        lo, hi = _natural_bounds(v, name)
        return ColumnTransform(None, lo, hi, reason)
    kind, bounds = (spec, ()) if isinstance(spec, str) else (spec[0] if len(spec) else None, tuple(spec[1:]))
    if kind not in KINDS:
        raise BadInputError(
            f"Unknown transform {spec!r} for {label}: use None, 'log', ('log', lower), 'logit' or "
            "('logit', lower, upper)."
        )
    try:
        bounds = tuple(float(b) for b in bounds)
    except (TypeError, ValueError):
        raise BadInputError(f"The bounds of {spec!r} for {label} must be numbers.") from None
    if not all(np.isfinite(bounds)):
        raise BadInputError(f"The bounds of {spec!r} for {label} must be finite.")
    if kind == "log":
        if len(bounds) > 1:
            raise BadInputError(f"{spec!r} for {label}: a log takes one bound, ('log', lower).")
        lo = bounds[0] if bounds else 0.0
        if v.size and v.min() <= lo:
            bad = int(np.sum(v <= lo))
            raise BadInputError(
                f"log transform of {label} needs observed values > {lo:g}, but {bad} of {v.size} are <= {lo:g} "
                f"(min {v.min():.4g}). Use ('log', lower) with lower < {v.min():.4g} (e.g. ('log', -1) for counts), "
                "or no transform."
            )
        return ColumnTransform("log", lo, None, reason)
    if len(bounds) == 2:
        lo, hi = bounds
        if not lo < hi:
            raise BadInputError(f"{spec!r} for {label}: lower must be < upper.")
        if v.size and (v.min() <= lo or v.max() >= hi):
            raise BadInputError(
                f"logit transform of {label} on ({lo:g}, {hi:g}) needs observed values strictly inside, but they "
                f"span [{v.min():.4g}, {v.max():.4g}]. Widen the bounds or pass 'logit' to take them from the data."
            )
        return ColumnTransform("logit", lo, hi, reason)
    if bounds:
        raise BadInputError(f"{spec!r} for {label}: a logit takes two bounds, ('logit', lower, upper), or none.")
    if v.size < 2 or v.min() == v.max():
        raise BadInputError(f"logit transform of {label} needs at least two distinct observed values to find bounds.")
    lo, hi = _natural_bounds(v, name)
    if hi is None:  # bounds from the observed range
        lo, hi = v.min(), v.max()
        lo2, hi2 = _widened(v, lo, hi, margin)
        lo = max(lo2, 0.0) if v.min() > 0 else lo2
        return ColumnTransform("logit", float(lo), float(hi2), reason)
    lo, hi = _widened(v, lo, hi, margin)
    return ColumnTransform("logit", float(lo), float(hi), reason)


def _column_keys(transforms: Mapping, names, n_features: int) -> dict[int, object]:
    """Map the keys of a user's dict (names or indices) to column indices, with clear errors."""
    out = {}
    for key, spec in transforms.items():
        if isinstance(key, str):
            if names is None or key not in names:
                raise BadInputError(
                    f"Unknown column {key!r} in transforms: the data have "
                    f"{names if names is not None else 'unnamed columns (use integer indices)'}."
                )
            j = names.index(key)
        elif isinstance(key, numbers.Integral) and not isinstance(key, bool) and -n_features <= key < n_features:
            j = int(key) % n_features
        else:
            raise BadInputError(f"Unknown column {key!r} in transforms: the data have {n_features} column(s).")
        if j in out:
            raise BadInputError(f"Column {column_label(j, names)} appears twice in transforms.")
        out[j] = spec
    return out


# ----------------------------------------------------------------------------- the conditional on the original scale
def _gauss_hermite():
    z, w = np.polynomial.hermite_e.hermegauss(_N_NODES)
    return z, w / np.sqrt(2.0 * np.pi)


def _as_mixture(cond) -> ConditionalMixture:
    if isinstance(cond, ConditionalMixture):
        return cond
    if hasattr(cond, "to_mixture"):
        return cond.to_mixture()
    raise BadInputError(
        f"The imputer's conditional is a {type(cond).__name__}, which is not a Gaussian mixture and has no "
        "to_mixture(); TransformedImputer needs one of explorer's density imputers with Gaussian conditionals "
        "(for GaussianMixtureImputer: predictive='auto', 'draws' or 'gaussian')."
    )


class TransformedConditional:
    """:math:`p(x^m \\mid x^o)` of every row on the ORIGINAL scale: the inner conditional of the
    transformed data, pushed through the inverse transforms.

    Built by :meth:`TransformedImputer.conditional`. Methods mirror
    :class:`~explorer.core.gaussians.conditional.ConditionalMixture`: ``mean``, ``median``, ``variance``,
    ``interval``, ``sample``, ``logpdf``; observed entries are the input values.
    """

    def __init__(self, inner, values: np.ndarray, transforms: tuple[ColumnTransform, ...]):
        self.inner = inner
        self.values = values
        self.missing = np.isnan(values)
        self.transforms = transforms
        self._mix = None

    @property
    def mixture(self) -> ConditionalMixture:
        """The inner conditional as a Gaussian mixture on the transformed scale."""
        if self._mix is None:
            self._mix = _as_mixture(self.inner)
        return self._mix

    def _entries(self, kind):
        """Missing entries of the columns of one kind: ``(rows, cols)``."""
        cols = np.array([t.kind == kind for t in self.transforms])
        return np.nonzero(self.missing & cols[None, :])

    def _components(self, ri, ci):
        """Per-entry mixture on the transformed scale: weights, means, sds, each (K, N)."""
        mix = self.mixture
        W = mix.weights[ri].T
        M = mix.completions[:, ri, ci]
        S = np.sqrt(mix._conditional_variances()[:, ri, ci])
        return W, M, S

    def _finish(self, out: np.ndarray, what: str) -> np.ndarray:
        bad = ~np.isfinite(out)
        if bad.any():
            r, c = np.argwhere(bad)[0]
            raise BadInputError(
                f"The {what} of {bad.sum()} entries overflow on the original scale, e.g. row {r} of column {c}: "
                "the transformed model's tail is too heavy for a finite answer. Use point='median' or "
                "intervals instead."
            )
        return np.where(self.missing, out, self.values)

    def _moments(self, power: int) -> np.ndarray:
        """:math:`E[x^p \\mid x^o]` (p = 1, 2) at the missing entries; observed entries untouched."""
        inner_mean = np.asarray(self.mixture.mean())
        out = inner_mean.copy() if power == 1 else np.asarray(self.mixture.variance()) + inner_mean**2
        ri, ci = self._entries("log")
        if ri.size:
            W, M, S = self._components(ri, ci)
            lo = np.array([self.transforms[c].lower for c in ci])
            with np.errstate(divide="ignore", over="ignore"):
                logw = np.log(W)
                e1 = np.exp(logsumexp(logw + M + 0.5 * S * S, axis=0))
                if power == 1:
                    out[ri, ci] = lo + e1
                else:
                    e2 = np.exp(logsumexp(logw + 2.0 * M + 2.0 * S * S, axis=0))
                    out[ri, ci] = lo * lo + 2.0 * lo * e1 + e2
        ri, ci = self._entries("logit")
        if ri.size:
            W, M, S = self._components(ri, ci)
            lo = np.array([self.transforms[c].lower for c in ci])
            width = np.array([self.transforms[c].upper for c in ci]) - lo
            z, wz = _gauss_hermite()
            u = np.zeros(ri.size)
            for zi, wi in zip(z, wz):
                s = expit(M + S * zi)
                x = lo + width * s
                u += wi * (W * (x if power == 1 else x * x)).sum(axis=0)
            out[ri, ci] = u
        return out

    def entry_logpdf(self, truth, hidden) -> np.ndarray:
        """:math:`\\log p(x_{ij} \\mid x_i^o)` at ``truth`` of every entry where ``hidden`` is True, row-major order.

        The 1-D mixture of the transformed scale at the transformed value plus the log-Jacobian; ``-inf`` outside
        the transform's bounds (the model's density is 0 there). The entries where ``hidden`` is True must be
        missing in this conditional (``truth`` and ``hidden`` of shape (n_samples, n_features)).
        :func:`explorer.evaluation.entry_logpdf` scores held-out entries with it.
        """
        ri, ci = np.nonzero(hidden)
        x = np.asarray(truth, dtype=np.float64)[ri, ci]
        W, M, S = self._components(ri, ci)  # (K, h) on the transformed scale
        y = x.copy()
        jac = np.zeros_like(x)
        inside = np.ones(x.shape, dtype=bool)
        for j in np.unique(ci):
            t = self.transforms[j]
            if t.kind is None:
                continue
            sel = np.flatnonzero(ci == j)
            ok = t.inside(x[sel])
            y[sel[ok]] = t.forward(x[sel[ok]])
            jac[sel[ok]] = t.log_jacobian(x[sel[ok]])
            y[sel[~ok]] = 0.0
            inside[sel] = ok
        with np.errstate(divide="ignore"):
            logw = np.log(W)
        out = logsumexp(logw + normal_logpdf(y, M, S * S), axis=0) + jac
        out[~inside] = -np.inf
        return out

    def mean(self) -> np.ndarray:
        """:math:`E[x \\mid x^o]` on the original scale (closed form for the log, quadrature for the logit)."""
        return self._finish(self._moments(1), "conditional means")

    def variance(self) -> np.ndarray:
        """Per-entry predictive variance on the original scale; 0 at observed entries."""
        m1 = self._finish(self._moments(1), "conditional means")
        m2 = self._finish(self._moments(2), "conditional second moments")
        return np.where(self.missing, np.maximum(m2 - m1 * m1, 0.0), 0.0)

    def median(self) -> np.ndarray:
        """The conditional median of every missing entry, back-transformed (exact: the maps are increasing)."""
        out = self.values.copy()
        ri, ci = np.nonzero(self.missing)
        if ri.size:
            W, M, S = self._components(ri, ci)
            out[ri, ci] = quantile_of_mixtures(W, M, S, 0.5)
        return self._finish(self._back(out), "medians")

    def interval(self, level: float = 0.95):
        """Equal-tailed predictive intervals, the inner ones back-transformed (exact); ``lower = upper = value`` at observed entries."""
        level = check_level(level)
        with warnings.catch_warnings():  # zero on the transformed scale means nothing: _finish checks the bounds
            warnings.simplefilter("ignore", NegativeIntervalWarning)
            lower, upper = self.inner.interval(level)
        return self._finish(self._back(np.asarray(lower)), "interval ends"), self._finish(
            self._back(np.asarray(upper)), "interval ends")

    def sample(self, n_draws: int, rng: np.random.Generator) -> np.ndarray:
        """Draws of the inner conditional, back-transformed; shape (n_draws, n_samples, n_features)."""
        draws = np.asarray(self.inner.sample(n_draws, rng))
        return np.stack([self._finish(self._back(d), "draws") for d in draws])

    def logpdf(self, values) -> np.ndarray:
        """Joint log-density of each row's missing entries on the original scale (with the Jacobian).

        ``-inf`` for a row whose value lies outside a transform's bounds (the density is 0 there);
        0 for rows with nothing missing.
        """
        V = as_float_matrix(values, name="values")
        if V.shape != self.values.shape:
            raise BadInputError(f"values have shape {V.shape}; expected {self.values.shape}.")
        if np.any(np.isnan(V) & self.missing):
            raise BadInputError("values has NaN at missing entries; logpdf needs the complete values there.")
        outside = np.zeros(V.shape[0], dtype=bool)
        Y = V.copy()
        jac = np.zeros(V.shape[0])
        for j, t in enumerate(self.transforms):
            if t.kind is None:
                continue
            m = self.missing[:, j]
            ok = t.inside(V[:, j]) & m
            outside |= m & ~ok
            Y[ok, j] = t.forward(V[ok, j])
            Y[m & ~ok, j] = 0.0
            jac[ok] += t.log_jacobian(V[ok, j])
        out = np.asarray(self.inner.logpdf(Y)) + jac
        out[outside] = -np.inf
        return out

    def _back(self, Y: np.ndarray) -> np.ndarray:
        """Inverse transforms of every column; observed entries restored from ``values``."""
        out = Y.copy()
        for j, t in enumerate(self.transforms):
            if t.kind is not None:
                out[:, j] = t.inverse(Y[:, j])
        return np.where(self.missing, out, self.values)


# ----------------------------------------------------------------------------- the meta-estimator
class TransformedImputer(TransformerMixin, BaseEstimator):
    """Fit a density imputer on per-column transformed data (log / logit) and answer on the original scale.

    Parameters
    ----------
    imputer : estimator, default None
        One of explorer's density imputers (anything with ``conditional(X)``); None means
        ``GaussianMixtureImputer()``. It is cloned in ``fit`` (``imputer_``); a DPGMMImputer clone whose
        ``conditional_density`` is ``"auto"`` gets ``"gaussian"``, because the Student-t posterior predictive of a
        log-transformed column has no finite mean on the original scale (GaussianMixtureImputer's default predictive,
        a Gaussian mixture over parameter draws, is kept for ``conditional``, ``interval`` and ``sample``, as are
        the factor imputers' (data-augmentation draws by default, plug-in or bootstrap); an explicit
        ``predictive="student_t"`` is refused by the back-transform's check). ``transform`` with ``point="mean"`` is the
        back-transformed mean of the inner model's Gaussians at its fitted parameters (the mean over parameter draws
        has tails as heavy as the widest draw's); with ``point="median"`` it is the median of the same predictive as
        ``interval`` and ``sample``, so it always lies inside the interval.
    transforms : "suggest", dict or None, default "suggest"
        ``"suggest"``: the transforms of :func:`suggest_transforms`, announced by a
        :class:`TransformWarning` in ``fit`` (never silent). A dict: column name (or index) ->
        None, ``"log"``, ``("log", lower)``, ``"logit"``, ``("logit", lower, upper)`` or a
        :class:`ColumnTransform`; columns not named are left as is. None: no transform (then
        a :class:`BoundCrossingWarning` says when answers cross a bound the data never cross).
    point : {"mean", "median"}, default "mean"
        Single imputation of ``transform``: the conditional mean on the original scale (least
        squares; log: closed form, logit: quadrature) at the fitted parameters, or the back-transformed
        median of the predictive that ``interval`` uses (inside every interval it gives).
    margin : float in (0, 0.5), default 0.01
        How far a logit bound reached by an observed value is widened, as a share of its width.

    Attributes
    ----------
    imputer_ : the fitted inner imputer (on the transformed scale)
    transforms_ : dict
        Column name (or index) -> :class:`ColumnTransform` of every column, as applied.
    n_features_in_ : int
    feature_names_in_ : ndarray of str (only for DataFrames with string column names)

    Examples
    --------
    >>> import numpy as np
    >>> from explorer.impute.transformed import TransformedImputer
    >>> rng = np.random.default_rng(0)
    >>> X = np.exp(rng.multivariate_normal([3.0, 1.0], [[0.5, 0.3], [0.3, 0.4]], size=200))
    >>> X[::5, 0] = np.nan
    >>> imp = TransformedImputer(transforms={0: "log", 1: "log"}).fit(X)
    >>> Xi = imp.transform(X)
    >>> bool((Xi > 0).all()), bool(np.array_equal(Xi[1::5], X[1::5]))
    (True, True)
    """

    def __init__(self, imputer=None, transforms="suggest", point="mean", margin=0.01):
        self.imputer = imputer
        self.transforms = transforms
        self.point = point
        self.margin = margin

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags

    # ------------------------------------------------------------------ fitting
    def fit(self, X, y=None):
        """Choose the transforms on the observed values of ``X``, transform, fit the inner imputer.

        Raises
        ------
        BadInputError
            Unknown transform names or columns, a log of a column with values <= its bound, a logit
            whose bounds do not contain the observed values, a bad ``point`` or ``margin``.

        Warns
        -----
        TransformWarning
            With ``transforms="suggest"``, naming every transformed column and why.
        """
        if self.point not in POINTS:
            raise BadInputError(f"point must be one of {POINTS}, got {self.point!r}.")
        margin = check_margin(self.margin)
        arr, names, _ = _as_matrix(X)
        D = arr.shape[1]
        observed = [arr[~np.isnan(arr[:, j]), j] for j in range(D)]
        labels = [column_label(j, names) for j in range(D)]
        keys = [j if names is None else names[j] for j in range(D)]
        if isinstance(self.transforms, str) and self.transforms == "suggest":
            chosen = [_suggest_column(observed[j], keys[j], labels[j], margin) for j in range(D)]
            applied = [f"{labels[j]}: {chosen[j]}" for j in range(D) if chosen[j].kind is not None]
            if applied:
                warnings.warn(
                    "TransformedImputer(transforms='suggest') applies " + "; ".join(applied)
                    + ". Imputations, draws and intervals are returned on the original scale. Pass a dict "
                    "(e.g. from suggest_transforms, edited) to choose, or transforms=None for none.",
                    TransformWarning, stacklevel=2,
                )
        elif self.transforms is None or isinstance(self.transforms, Mapping):
            given = _column_keys(self.transforms or {}, names, D)
            chosen = [resolve_transform(given.get(j), observed[j], keys[j], labels[j], margin) for j in range(D)]
        else:
            raise BadInputError(
                f"transforms must be 'suggest', a dict column -> transform, or None; got {self.transforms!r}."
            )
        self._transforms = tuple(chosen)
        self.transforms_ = dict(zip(keys, chosen))
        inner = self.imputer
        if inner is None:
            from explorer.impute.gaussian_mixture import GaussianMixtureImputer

            inner = GaussianMixtureImputer()
        if not hasattr(inner, "conditional") or not hasattr(inner, "fit"):
            raise BadInputError(
                f"imputer must be one of explorer's density imputers (with fit and conditional), got {inner!r}."
            )
        inner = clone(inner)
        if inner.get_params().get("conditional_density") == "auto":  # DPGMMImputer's
            # the Student-t predictive of a log column has no finite mean on the original scale: Gaussians here
            # (GaussianMixtureImputer's "auto" is a Gaussian mixture over parameter draws: kept)
            inner.set_params(conditional_density="gaussian")
        self.imputer_ = inner.fit(self._forward(arr, names, labels))
        self.n_features_in_ = D
        if names is not None:
            self.feature_names_in_ = np.asarray(names, dtype=object)
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        return self

    def _forward(self, arr: np.ndarray, names, labels):
        """The transformed copy of ``arr`` (NaN kept), as a DataFrame when the columns have names."""
        Y = arr.copy()
        for j, t in enumerate(self._transforms):
            if t.kind is None:
                continue
            v = arr[:, j]
            obs = ~np.isnan(v)
            bad = np.zeros_like(obs)
            bad[obs] = ~t.inside(v[obs])
            if bad.any():
                r = int(np.flatnonzero(bad)[0])
                raise BadInputError(
                    f"{labels[j]} has {bad.sum()} value(s) outside the bounds of its transform ({t}), e.g. "
                    f"{v[r]:.6g} in row {r}. Refit on data that include such values, or change the transform."
                )
            Y[obs, j] = t.forward(v[obs])
        if names is None:
            return Y
        from explorer.core.data import IncompleteData

        return IncompleteData.from_array(Y, columns=tuple(names))

    def _prepare(self, X):
        """Validated ``(original values, transformed values for the inner imputer, column labels)``."""
        check_is_fitted(self, "imputer_")
        arr, names, labels = _as_matrix(X)
        fitted = getattr(self, "feature_names_in_", None)
        if names is not None and fitted is not None and list(fitted) != names:
            raise BadInputError(
                f"X has columns {names} but the imputer was fitted on {list(fitted)}. "
                "Pass the same columns in the same order."
            )
        if arr.shape[1] != self.n_features_in_:
            raise BadInputError(
                f"X has {arr.shape[1]} features, but {type(self).__name__} is expecting {self.n_features_in_} "
                "features as input. Pass data with the same columns, in the same order, as in fit."
            )
        cols = labels if labels is not None else (None if fitted is None else [str(c) for c in fitted])
        labels = [column_label(j, cols) for j in range(arr.shape[1])]
        return arr, self._forward(arr, None, labels), cols

    # ------------------------------------------------------------------ using the model
    def conditional(self, X) -> TransformedConditional:
        """The conditional :math:`p(x^m \\mid x^o)` of every row on the original scale (:class:`TransformedConditional`)."""
        arr, Y, _ = self._prepare(X)
        return TransformedConditional(self.imputer_.conditional(Y), arr, self._transforms)

    def transform(self, X):
        """Single imputation on the original scale (``point``: conditional mean or median); observed entries bit for bit.

        Returns the kind of ``X`` (ndarray, DataFrame, DataArray or IncompleteData), as the imputers'
        ``transform`` does. No NaN.
        """
        arr, Y, cols = self._prepare(X)
        if self.point == "median":
            # the median of the predictive that ``interval`` and ``sample`` use, so the imputation lies inside its
            # own interval whatever the level (the plug-in median need not: a draws chain can leave a small
            # component of the MAP fit, and with it the rows it explained)
            cond = TransformedConditional(self.imputer_.conditional(Y), arr, self._transforms)
            out = cond.median()
        else:
            # the mean is that of the inner model's fitted Gaussians: the back-transformed mean of a mixture over
            # parameter draws has tails as heavy as the widest draw's (measured: iris NRMSE 0.47 -> 2e4), and that
            # of a Student-t predictive is infinite
            plugin = getattr(self.imputer_, "_plugin_conditional", self.imputer_.conditional)
            cond = TransformedConditional(plugin(Y), arr, self._transforms)
            out = cond.mean()
        self._warn_crossing(out, out, cond.missing, cols, "imputation(s)")
        return wrap(X, out)

    def interval(self, X, level: float = 0.95):
        """Equal-tailed predictive intervals on the original scale: ``(lower, upper)``, each (n_samples, n_features).

        ndarrays (DataFrames / DataArrays like ``X`` when it is one); ``lower = upper = value`` at observed entries.
        """
        arr, Y, cols = self._prepare(X)
        cond = TransformedConditional(self.imputer_.conditional(Y), arr, self._transforms)
        lower, upper = cond.interval(level)
        self._warn_crossing(lower, upper, cond.missing, cols, f"{check_level(level):.0%} interval(s)")
        if input_kind(X) in ("dataframe", "dataarray"):
            return wrap(X, lower), wrap(X, upper)
        return lower, upper

    def sample(self, X, n_imputations=5, random_state=None) -> np.ndarray:
        """Multiple imputation on the original scale: the inner imputer's draws, back-transformed.

        Returns
        -------
        ndarray of shape (n_imputations, n_samples, n_features)
            Observed entries equal ``X`` bit for bit in every imputation. For a DataFrame, DataArray or
            IncompleteData, the same kinds as the imputers' ``sample`` (a long DataFrame with an
            ``imputation`` index level, a DataArray with an ``imputation`` dimension).
        """
        arr, Y, cols = self._prepare(X)
        draws = np.asarray(self.imputer_.sample(Y, n_imputations=n_imputations, random_state=random_state))
        cond = TransformedConditional(None, arr, self._transforms)
        out = np.stack([cond._finish(cond._back(d), "draws") for d in draws])
        self._warn_crossing(out.min(axis=0), out.max(axis=0), cond.missing, cols, "draw(s)")
        return wrap_draws(X, out)

    def score_samples(self, X) -> np.ndarray:
        """Observed-data log-likelihood of every row on the original scale (the inner one plus the Jacobian)."""
        arr, Y, _ = self._prepare(X)
        out = np.asarray(self.imputer_.score_samples(Y), dtype=float).copy()
        for j, t in enumerate(self._transforms):
            if t.kind is not None:
                obs = ~np.isnan(arr[:, j])
                out[obs] += t.log_jacobian(arr[obs, j])
        return out

    def score(self, X, y=None) -> float:
        """Mean observed-data log-likelihood per row on the original scale."""
        return float(np.mean(self.score_samples(X)))

    def get_feature_names_out(self, input_features=None):
        """Output feature names (the input ones)."""
        check_is_fitted(self, "n_features_in_")
        fitted = getattr(self, "feature_names_in_", None)
        if input_features is not None:
            return np.asarray(input_features, dtype=object)
        if fitted is not None:
            return fitted.copy()
        return np.asarray([f"x{j}" for j in range(self.n_features_in_)], dtype=object)

    def _warn_crossing(self, lower, upper, missing, cols, what: str) -> None:
        """BoundCrossingWarning for untransformed columns whose answers cross a bound the observed values never cross."""
        for j, t in enumerate(self._transforms):
            if t.kind is not None or (t.lower is None and t.upper is None):
                continue
            m = missing[:, j]
            below = m & (lower[:, j] < t.lower) if t.lower is not None else np.zeros_like(m)
            above = m & (upper[:, j] > t.upper) if t.upper is not None else np.zeros_like(m)
            for side, hit, bound in (("below", below, t.lower), ("above", above, t.upper)):
                if hit.any():
                    r = int(np.flatnonzero(hit)[0])
                    shown = (f"{lower[r, j]:.4g}" if lower is upper else f"[{lower[r, j]:.4g}, {upper[r, j]:.4g}]")
                    suggestion = "'log'" if t.upper is None else "'logit'"
                    warnings.warn(
                        f"{hit.sum()} {what} of {column_label(j, cols)} go {side} {bound:g}, a bound its observed "
                        f"values never cross (e.g. row {r}: {shown}). Consider TransformedImputer(transforms="
                        f"{{{(cols[j] if cols else j)!r}: {suggestion}}}); suggest_transforms(X) gives each "
                        "column's reason.",
                        BoundCrossingWarning, stacklevel=3,
                    )
