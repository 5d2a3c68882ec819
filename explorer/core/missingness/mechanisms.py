"""Missingness mechanisms ("amputation") and their registry.

Every mechanism is a pure function of the data, its parameters and an injected
``numpy.random.Generator``::

    missing = fn(X, rate, *, rng, **params)      # X: (n_samples, n_features) float, NaN = missing

and returns a boolean array ``missing`` of the same shape, **True = hidden by the mechanism**.
``rate`` is the requested *overall* fraction of entries to hide for the mechanisms that have
one; the others fix their missing fraction through their parameters. Image mechanisms read
each row as a flattened image of ``image_shape=(height, width)`` in row-major (C) order.

**Incomplete data.** ``X`` may already hold NaN (real gaps). The mechanisms then add missingness
to the **observed** entries only: ``missing`` is False wherever ``X`` is NaN (already-missing
entries stay missing and are not counted again), and ``rate`` is the expected fraction of the
*observed* entries to hide, i.e. about ``rate * n_observed`` new gaps. Value-driven rules use
observed values only; a MAR rule whose driver (control) value is missing does not trigger in
that row (see each function). On complete data nothing changes: n_observed = N D and the masks
are those of the complete-data rules. :func:`apply_mechanism` reports the realised rate
relative to the observed entries.

marlin2008 (Marlin) writes the response indicator with the opposite convention, ``r = 1`` for
*observed*; here ``missing = ~r`` everywhere, and Marlin's ``mu_v = P(r = 1 | x = v)`` stays an
*observation* probability.

=======================  =====  ======================================================================
key                      kind   rule (source)
=======================  =====  ======================================================================
``mcar``                 MCAR   each entry missing independently with probability r (garriga2017
                                MCAR_total, marlin2008 ``mcar_bernoulli``)
``mcar_rows``            MCAR   rows marked w.p. sqrt(r); thesis: a sqrt(r) fraction of a marked row
                                removed; code: each entry of a marked row w.p. sqrt(r) (garriga2017)
``mar_rows``             MAR    1/5 "controlling" columns, alpha = X_C w, w ~ U[-1/2, 1/2]; the rows
                                with the lowest alpha lose values w.p. sqrt(r) (garriga2017 MAR_rows)
``mar_threshold``        MAR    target column(s) missing where the control column is above/below a
                                quantile (ghahramani1994 Fig. 1)
``mar_logistic``         MAR    P(target missing) = sigmoid(a + b z_control), a solved for the rate
``nmar_lowest``          NMAR   marked columns lose their lowest values (garriga2017 NMAR / "MNAR_rows")
``nmar_random``          NMAR   marked columns lose a random part of their lowest values (garriga2017
                                NMAR_random / "MNAR_R_rows"); the code variant realises ~ r**1.5
``self_masking``         NMAR   P(x_ij missing) = sigmoid(a_j + strength z_ij), a_j solved per column
``cpt_v``                NMAR   P(observed | x = v) = mu_v for discrete levels v = 1..V (marlin2008 CPT-v)
``logit_vd``             NMAR   P(observed | x = v, column d) = sigmoid(sigma_v + omega_d) (marlin2008 Logit-vd)
``linear_value_effect``  NMAR   CPT-v with mu_v = s (v - (V+1)/2) + 1/2 (marlin2008 Sec. 5.2.1)
``patterns``             MCAR   each row draws one pattern from a fixed list (marlin2008 Ch. 6)
``random_pixels``        MCAR   image pixels missing independently w.p. r (antypas2023 "Random")
``quarter``              MCAR   one quarter of each image, random or fixed (antypas2023/marlin2008 MNIST)
``half``                 MCAR   one half of each image, e.g. the top half (antypas2023 "Halves")
``square``               MCAR   a k x k square, uniform over the fully-inside positions (delalleau2012)
=======================  =====  ======================================================================

:func:`apply_mechanism` validates the parameter names against the registry and wraps the result
in a :class:`MaskResult` (requested and realised rates). Bad input raises
:class:`~explorer.core.validation.BadInputError` with the feasible range or the remedy.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from explorer.core.missingness.image_masks import (
    image_half,
    image_quarter,
    image_square,
    random_pixels,
)
from explorer.core.missingness.mask_helpers import _check_choice
from explorer.core.missingness.tabular_mechanisms import (
    cpt_v,
    fixed_patterns,
    linear_value_effect,
    logit_vd,
    mar_logistic,
    mar_rows,
    mar_threshold,
    mcar,
    mcar_rows,
    nmar_lowest,
    nmar_random,
    quantile_levels,
    self_masking,
)
from explorer.core.validation import BadInputError

__all__ = [
    "Param", "Mechanism", "MaskResult", "MECHANISMS", "get_mechanism", "list_mechanisms",
    "apply_mechanism", "quantile_levels", "mcar", "mcar_rows", "mar_rows", "mar_threshold",
    "mar_logistic", "nmar_lowest", "nmar_random", "self_masking", "cpt_v", "logit_vd", "linear_value_effect",
    "fixed_patterns", "random_pixels", "image_quarter", "image_half", "image_square",
]


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
    """Output of :func:`apply_mechanism`; ``missing`` (n_samples, n_features) is read-only.

    ``missing`` marks the entries hidden by the mechanism (never an entry that was already NaN).
    ``realised_rate = missing.sum() / n_observed``, the fraction of the observed entries hidden
    (the overall fraction of the matrix on complete data); ``n_observed`` counts the non-NaN
    entries of the input (None when unknown, e.g. a mask given by the user).
    """

    missing: np.ndarray
    requested_rate: float | None
    realised_rate: float
    mechanism: str
    kind: str
    params: dict
    n_observed: int | None = None


_VARIANT = Param(
    "variant", "thesis", "choice", choices=("thesis", "code"),
    doc="'thesis' follows the text of garriga2017, 'code' the author's utils.py",
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
              (), "garriga2017 MCAR_total"),
    Mechanism("mcar_rows", mcar_rows, "MCAR",
              "Rows marked w.p. sqrt(rate) lose about sqrt(rate) of their entries",
              (_VARIANT,), "garriga2017 MCAR_rows"),
    Mechanism("mar_rows", mar_rows, "MAR",
              "Rows with a low score of random controlling columns lose values",
              (_VARIANT, Param("n_controlling", None, "int", (1, None), doc="default max(1, int(0.2 D))"),
               _BINARY), "garriga2017 MAR_rows"),
    Mechanism("mar_threshold", mar_threshold, "MAR",
              "Target missing where the control column is above a threshold",
              (_TARGET, _CONTROL, Param("side", "above", "choice", choices=("above", "below"))),
              "ghahramani1994 Fig. 1"),
    Mechanism("mar_logistic", mar_logistic, "MAR",
              "Target missing with logistic probability in the control column",
              (_TARGET, _CONTROL, _STRENGTH), "logistic MAR"),
    Mechanism("nmar_lowest", nmar_lowest, "NMAR", "Random columns lose their lowest values",
              (_VARIANT, _BINARY), "garriga2017 NMAR"),
    Mechanism("nmar_random", nmar_random, "NMAR",
              "Random columns lose a random part of their lowest values (code variant: ~rate**1.5)",
              (_VARIANT, _BINARY), "garriga2017 NMAR_random"),
    Mechanism("self_masking", self_masking, "NMAR",
              "Each value hides itself with logistic probability in its own value",
              (_STRENGTH,), "self-masking logistic"),
    Mechanism("cpt_v", cpt_v, "NMAR", "Value level v is observed with probability mu_v",
              (Param("mu", (0.1, 0.3, 0.5, 0.7, 0.9), "float_vector", (0.0, 1.0), doc="P(observed | v)"),
               _LEVELS), "marlin2008 CPT-v"),
    Mechanism("logit_vd", logit_vd, "NMAR",
              "Value level v of column d is observed with probability sigmoid(sigma_v + omega_d)",
              (Param("sigma", (-2.0, -1.0, 0.0, 1.0, 2.0), "float_vector", (None, None), doc="value logits"),
               Param("omega", None, "float_vector", (None, None), doc="column logits (default 0)"),
               _LEVELS), "marlin2008 eq. 5.6.1"),
    Mechanism("linear_value_effect", linear_value_effect, "NMAR",
              "Observation probability rises linearly with the value level",
              (Param("s", 0.125, "float", (0.0, 0.25), doc="slope, at most 1/(n_levels - 1)"),
               Param("n_levels", 5, "int", (2, 20)), _LEVELS), "marlin2008 Sec. 5.2.1"),
    Mechanism("patterns", fixed_patterns, "MCAR", "Each row draws a pattern from a fixed list",
              (Param("patterns", None, "bool_matrix", doc="(K, D), True = missing; default: see docstring"),
               Param("probs", None, "float_vector", (0.0, 1.0), doc="pattern probabilities (uniform)")),
              "marlin2008 Ch. 6"),
    Mechanism("random_pixels", random_pixels, "MCAR", "Each pixel missing independently w.p. rate",
              (_SHAPE,), "antypas2023 Random"),
    Mechanism("quarter", image_quarter, "MCAR", "One quarter of each image is missing",
              (_SHAPE, Param("quarter", None, "choice", choices=(None, 0, 1, 2, 3),
                             doc="None = random; 0 top-left, 1 top-right, 2 bottom-left, 3 bottom-right")),
              "antypas2023 Quarters"),
    Mechanism("half", image_half, "MCAR", "One half of each image is missing",
              (_SHAPE, Param("side", "top", "choice", choices=("top", "bottom", "left", "right"))),
              "antypas2023 Halves"),
    Mechanism("square", image_square, "MCAR", "A random k x k square of each image is missing",
              (_SHAPE, Param("size", 5, "int", (1, None))), "delalleau2012 Sec. 3.1"),
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
    """Apply the registered mechanism ``name`` to the observed entries of ``X``.

    Parameters
    ----------
    X : array of shape (n_samples, n_features)
        The data; NaN marks an entry that is already missing (it is never part of the result,
        and ``rate`` is relative to the observed entries).
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
        ``missing`` (read-only bool array, True = newly hidden), requested and realised rate
        (relative to the observed entries), ``n_observed``, and the effective parameters
        (defaults filled in).
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
    observed = ~np.isnan(np.asarray(X, dtype=np.float64))
    missing = np.array(missing, dtype=bool) & observed  # image masks are shape-only: keep gaps out
    missing.flags.writeable = False
    n_observed = int(observed.sum())
    realised = float(missing.sum() / n_observed) if n_observed else 0.0
    effective = {p.name: p.default for p in mech.params} | params
    return MaskResult(missing, None if rate is None else float(rate), realised,
                      name, mech.kind, effective, n_observed)
