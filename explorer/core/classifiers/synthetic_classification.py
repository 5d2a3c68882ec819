"""Marlin's synthetic two-dimensional classification sets (marlin2008 section 6.4, thesis Ch. 6).

Four binary problems in two dimensions, each drawn class by class with ``n_per_class`` rows per
class (the thesis uses 100 per class for training and 200 per class for testing):

==========  =================================================================================
name        class-conditional generator (digest table of section 6.4)
==========  =================================================================================
simple      class 0: N([-1.5, -1.5], 0.5 I);  class 1: N([1.5, 1.5], 0.5 I)
mix         class 0: N([-2, -2], 0.1 I);  class 1: 1/2 N([-1, -1], 0.1 I) + 1/2 N([2, 2], 0.1 I)
overlap     class 0: N([-0.3, 0.8], S);  class 1: N([0.3, -0.8], S),  S = [[0.5, 0.45], [0.45, 0.5]]
xor         class 0: 1/2 N([2.2, 1], 0.2 I) + 1/2 N([-2.2, -1], 0.2 I);
            class 1: 1/2 N([-1, 2.2], 0.2 I) + 1/2 N([1, -2.2], 0.2 I)
==========  =================================================================================

Choices the thesis leaves open (stated here so that they are visible):

* **Mix, class B mixture weights** are not given in the thesis; we use equal weights 1/2, 1/2.
  The XOR mixtures are also taken with equal weights (each class is symmetric).
* The component of each mixture row is drawn independently (multinomial counts), not split
  exactly in halves.
* "Spherical variance v" is read as covariance ``v I`` (variance per dimension, not std).
* The Overlap covariance 0.45 is positive: the class means differ along ``[1, -1]``, the
  low-variance direction (variance 0.05), so the classes separate well with both features and
  overlap heavily once one is missing -- the behaviour the thesis describes for this set.
* Class labels are 0 and 1 (the thesis's A/B, or 1/2 for XOR), rows are ordered class by class;
  shuffle if order matters.

**Missingness (MCAR).** Every row independently gets one of the three response patterns
``r = [1, 1]`` (both observed), ``[0, 1]`` or ``[1, 0]`` with probability 1/3 each. Marlin's
response indicator ``r_d = 1`` means *observed*; this library's ``missing`` mask has **True =
missing**, i.e. ``missing = ~r``. A row never has both features missing.
"""

from __future__ import annotations

import numpy as np

from explorer.core.validation import BadInputError, check_rng

__all__ = [
    "DATASETS",
    "make_simple",
    "make_mix",
    "make_overlap",
    "make_xor",
    "mcar_patterns",
    "make_dataset",
    "SPECS",
]

#: The names accepted by :func:`make_dataset`, in the thesis's order.
DATASETS = ("simple", "mix", "overlap", "xor")

#: Generator specification per data set: for each class a list of (weight, mean, covariance).
SPECS: dict[str, tuple[list[tuple[float, np.ndarray, np.ndarray]], ...]] = {
    "simple": (
        [(1.0, np.array([-1.5, -1.5]), 0.5 * np.eye(2))],
        [(1.0, np.array([1.5, 1.5]), 0.5 * np.eye(2))],
    ),
    "mix": (
        [(1.0, np.array([-2.0, -2.0]), 0.1 * np.eye(2))],
        [
            (0.5, np.array([-1.0, -1.0]), 0.1 * np.eye(2)),
            (0.5, np.array([2.0, 2.0]), 0.1 * np.eye(2)),
        ],
    ),
    "overlap": (
        [(1.0, np.array([-0.3, 0.8]), np.array([[0.5, 0.45], [0.45, 0.5]]))],
        [(1.0, np.array([0.3, -0.8]), np.array([[0.5, 0.45], [0.45, 0.5]]))],
    ),
    "xor": (
        [
            (0.5, np.array([2.2, 1.0]), 0.2 * np.eye(2)),
            (0.5, np.array([-2.2, -1.0]), 0.2 * np.eye(2)),
        ],
        [
            (0.5, np.array([-1.0, 2.2]), 0.2 * np.eye(2)),
            (0.5, np.array([1.0, -2.2]), 0.2 * np.eye(2)),
        ],
    ),
}


def _check_n(n_per_class) -> int:
    if isinstance(n_per_class, bool) or not isinstance(n_per_class, (int, np.integer)) or n_per_class < 1:
        raise BadInputError(f"n_per_class must be a positive integer, got {n_per_class!r}.")
    return int(n_per_class)


def _sample_mixture(components, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` draws from a Gaussian mixture given as a list of (weight, mean, covariance)."""
    weights = np.array([w for w, _, _ in components])
    counts = rng.multinomial(n, weights / weights.sum()) if len(components) > 1 else np.array([n])
    parts = []
    for (_, mean, cov), count in zip(components, counts):
        chol = np.linalg.cholesky(cov)
        parts.append(mean + rng.standard_normal((count, mean.size)) @ chol.T)
    X = np.concatenate(parts, axis=0)
    return X[rng.permutation(n)]


def _make(name: str, n_per_class, rng) -> tuple[np.ndarray, np.ndarray]:
    n = _check_n(n_per_class)
    rng = check_rng(rng)
    X = np.concatenate([_sample_mixture(spec, n, rng) for spec in SPECS[name]], axis=0)
    y = np.repeat(np.arange(len(SPECS[name])), n)
    return X, y


def make_simple(n_per_class: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Simple: two spherical Gaussians (variance 0.5) at [-1.5, -1.5] and [1.5, 1.5].

    Returns ``X`` of shape (2 n_per_class, 2) (complete) and ``y`` in {0, 1}, class by class.
    """
    return _make("simple", n_per_class, rng)


def make_mix(n_per_class: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Mix: class 0 at [-2, -2]; class 1 an equal-weight mixture at [-1, -1] and [2, 2]; variance 0.1.

    The class-1 mixture weights are not given in the thesis; equal weights are our choice.
    """
    return _make("mix", n_per_class, rng)


def make_overlap(n_per_class: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Overlap: means [-0.3, 0.8] and [0.3, -0.8], shared covariance [[0.5, 0.45], [0.45, 0.5]]."""
    return _make("overlap", n_per_class, rng)


def make_xor(n_per_class: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """XOR: class 0 at +-[2.2, 1], class 1 at +-[-1, 2.2] (equal-weight pairs), variance 0.2."""
    return _make("xor", n_per_class, rng)


_MAKERS = {"simple": make_simple, "mix": make_mix, "overlap": make_overlap, "xor": make_xor}

#: Marlin's three response patterns (r = 1 observed), as rows of ``missing`` (True = missing).
_PATTERNS_MISSING = np.array([[False, False], [True, False], [False, True]])


def mcar_patterns(n_samples: int, rng: np.random.Generator) -> np.ndarray:
    """The thesis's MCAR mask: each row gets r = [1,1], [0,1] or [1,0] with probability 1/3 each.

    Parameters
    ----------
    n_samples : int
        Number of rows.
    rng : numpy.random.Generator

    Returns
    -------
    missing : ndarray of bool, shape (n_samples, 2)
        **True = missing** (``missing = ~r`` in Marlin's notation, where r_d = 1 means observed).
        Pattern r = [0, 1] is ``missing = [True, False]`` (first feature missing). No row has
        both features missing.
    """
    if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)) or n_samples < 0:
        raise BadInputError(f"n_samples must be a non-negative integer, got {n_samples!r}.")
    rng = check_rng(rng)
    which = rng.integers(0, 3, size=int(n_samples))
    return _PATTERNS_MISSING[which].copy()


def make_dataset(
    name: str, n_per_class: int, rng: np.random.Generator, missing: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Draw one of the four sets, optionally with the thesis's MCAR missingness.

    Parameters
    ----------
    name : {"simple", "mix", "overlap", "xor"}
    n_per_class : int
        Rows per class (thesis: 100 train, 200 test).
    rng : numpy.random.Generator
    missing : bool, default True
        Apply :func:`mcar_patterns` (NaN = missing); False returns the complete data twice.

    Returns
    -------
    X : ndarray (2 n_per_class, 2)
        Features with NaN at the missing entries.
    y : ndarray of int (2 n_per_class,)
        Labels 0/1.
    X_complete : ndarray (2 n_per_class, 2)
        The same rows before the values were hidden.
    """
    key = str(name).lower() if isinstance(name, str) else name
    if key not in _MAKERS:
        raise BadInputError(f"Unknown data set {name!r}; choose one of {DATASETS}.")
    X_complete, y = _MAKERS[key](n_per_class, rng)
    X = X_complete.copy()
    if missing:
        X[mcar_patterns(X.shape[0], rng)] = np.nan
    return X, y, X_complete
