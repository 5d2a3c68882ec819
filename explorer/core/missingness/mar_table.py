r"""MAR is not enough: the Table 3.1 MAR mechanism for 2-D binary data and the Section 3.4 demonstration.

Marlin (2008), Section 3.2 (Tables 3.1 / 3.2) and Section 3.4; the marlin2008 reference digest, sections 2.3-2.5
and Appendix A. Codes: ``x = 2 x1 + x2`` and ``r = 2 r1 + r2`` (rows / columns 00, 01, 10, 11), r_d = 1
when x_d is **observed** (the thesis's convention; the library's masks are ``missing = ~r``).

**Table 3.1**: the most general MAR parameterisation of :math:`P(R = r \mid X = x)`,

====== ===== ===== ===== ===================
x \ r   00    01    10    11
====== ===== ===== ===== ===================
00      α     β     γ     1 − α − β − γ
01      α     δ     γ     1 − α − δ − γ
10      α     β     λ     1 − α − β − λ
11      α     δ     λ     1 − α − δ − λ
====== ===== ===== ===== ===================

(r = 01 observes x2 only, so its probability may depend on x2 only: β or δ; r = 10 observes x1 only: γ or
λ; r = 00 observes nothing: α.) Every entry must be in [0, 1]: :func:`violations` names each failed
inequality. With the data distribution of Table 3.2, :math:`P(x) = (a, b, c, d)`.

**The factorised model** :math:`P^M(x) = \prod_d \theta_{x_d d}` fitted by observed-data ML gives
:math:`\theta_{vd} = \sum_n r_{dn}[x_{dn} = v] / \sum_n r_{dn}` (eq. 3.4.2, :func:`factorised_estimate`),
which tends to :math:`P(X_d = v \mid R_d = 1)`; for d = 1 (eqs. 3.4.3-3.4.4, :func:`p_x1_given_r1`)

.. math::

    P(X_1 = 1 \mid R_1 = 1) = \frac{(c + d)(1 - α) - cβ - dδ}{(1 - α) - (a + c)β - (b + d)δ},

equal to the true :math:`P(X_1 = 1) = c + d` iff β = δ (x2 MCAR). **The full joint** φ fitted by EM
(eq. 3.4.5) is unbiased under MAR. *Erratum applied* (Appendix A, 3.4.5): the printed update has no term
for the cases with r = 00 and its division by N does not normalise; here

.. math::

    φ_{ij} \leftarrow \frac{1}{N}\Big(C^0 φ_{ij} + C^1_{ij} + C^2_i \frac{φ_{ij}}{\sum_{j'} φ_{ij'}}
    + C^3_j \frac{φ_{ij}}{\sum_{i'} φ_{i'j}}\Big),

C^0 the number of cases with nothing observed, C^1 both observed, C^2 only x1, C^3 only x2 (:func:`counts`).
Objective (never decreases): the observed-data log-likelihood
:math:`\sum_{ij} C^1_{ij}\log φ_{ij} + \sum_i C^2_i \log φ_{i\cdot} + \sum_j C^3_j \log φ_{\cdot j}` (the MAR
mechanism's factor is constant in φ and left out, eq. 3.3.2).

Everything is vectorised over leading "batch" axes (many simulated data sets at once): counts of shape
(..., 2, 2), EM states with φ of shape (..., 2, 2). :func:`sample` draws cases one by one;
:func:`sample_cells` draws the 4 x 4 table of (x, r) cell counts directly (multinomial, the same
distribution of every statistic used here, much faster for many repeats).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.special import xlogy

from explorer.core.deprecation import renamed_names
from explorer.core.loop import ConvergenceWarning, run_restarts
from explorer.core.validation import BadInputError, check_int, check_nonnegative, check_rng

__all__ = [
    "PARAM_NAMES", "CODES", "MARCounts", "MARTableEMConfig", "MARTableEMState", "MARTableEMResult",
    "ConvergenceWarning",
    "response_table", "violations", "is_valid", "check_params", "check_joint", "is_mar", "mar_violations",
    "sample", "sample_cells", "cell_counts", "counts", "counts_from_cells", "factorised_estimate",
    "p_x1_given_r1", "p_x1_given_r1_enumerated", "log_likelihood", "init", "step", "fit", "mar_table_2d",
]

#: The five free parameters of Table 3.1 (``lam`` is λ).
PARAM_NAMES = ("alpha", "beta", "gamma", "delta", "lam")
#: Row / column labels of the tables: x = 2 x1 + x2, r = 2 r1 + r2.
CODES = ("00", "01", "10", "11")
_GREEK = {"alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "lam": "λ"}
# the four r = 11 entries 1 - alpha - (beta|delta) - (gamma|lam), one per x
_ROWS_11 = (("beta", "gamma"), ("delta", "gamma"), ("beta", "lam"), ("delta", "lam"))
_TINY = 1e-300


# ============================================================================ Table 3.1
def _as_params(params) -> tuple[float, float, float, float, float]:
    """``params`` as (alpha, beta, gamma, delta, lam): a sequence of 5 numbers or a mapping of PARAM_NAMES."""
    if isinstance(params, dict):
        missing = [k for k in PARAM_NAMES if k not in params]
        extra = sorted(set(params) - set(PARAM_NAMES))
        if missing or extra:
            raise BadInputError(f"MAR table parameters must be exactly {PARAM_NAMES}; missing {missing}, "
                                f"unknown {extra}.")
        params = [params[k] for k in PARAM_NAMES]
    try:
        values = tuple(float(v) for v in params)
    except (TypeError, ValueError):
        raise BadInputError(f"MAR table parameters must be 5 numbers (alpha, beta, gamma, delta, lam); "
                            f"got {params!r}.") from None
    if len(values) != 5:
        raise BadInputError(f"MAR table parameters must be 5 numbers (alpha, beta, gamma, delta, lam); "
                            f"got {len(values)}.")
    return values  # type: ignore[return-value]


def violations(alpha, beta, gamma, delta, lam) -> list[str]:
    """The inequalities of Table 3.1 that fail, in plain words (empty when the table is valid).

    Each parameter must be a finite number in [0, 1] and each r = 11 entry non-negative:
    α+β+γ ≤ 1, α+δ+γ ≤ 1, α+β+λ ≤ 1, α+δ+λ ≤ 1 (digest 2.3).
    """
    p = dict(zip(PARAM_NAMES, (alpha, beta, gamma, delta, lam)))
    out = []
    for name, v in p.items():
        if not np.isfinite(v) or not 0.0 <= v <= 1.0:
            out.append(f"{_GREEK[name]} = {v:.4g} must be in [0, 1]")
    if out:
        return out
    for second, third in _ROWS_11:
        total = p["alpha"] + p[second] + p[third]
        if total > 1.0 + 1e-12:
            out.append(f"α + {_GREEK[second]} + {_GREEK[third]} = {total:.4g} > 1 "
                       f"(P(r = 11 | x) would be {1.0 - total:.4g} < 0)")
    return out


def is_valid(alpha, beta, gamma, delta, lam) -> bool:
    """True when every entry of the Table 3.1 response table is a probability (:func:`violations` empty)."""
    return not violations(alpha, beta, gamma, delta, lam)


def check_params(params) -> tuple[float, float, float, float, float]:
    """``params`` (5 numbers or a mapping) validated; BadInputError names every violated inequality."""
    values = _as_params(params)
    bad = violations(*values)
    if bad:
        raise BadInputError("Invalid Table 3.1 MAR parameters: " + "; ".join(bad) + ". Each parameter is a "
                            "probability and each r = 11 entry 1 − α − (β or δ) − (γ or λ) must stay >= 0: lower α "
                            "or the parameters of the failing sum.")
    return values


def response_table(alpha, beta, gamma, delta, lam, *, check: bool = True) -> np.ndarray:
    """The (4, 4) table P(R = r | X = x) of Table 3.1: rows x = 00, 01, 10, 11, columns r = 00, 01, 10, 11.

    Raises BadInputError (naming the violated inequality) when an entry would leave [0, 1]; with
    ``check=False`` the raw entries are returned instead (negative ones included, to show what fails).
    """
    if not check:
        a, b, g, d, lam_ = _as_params((alpha, beta, gamma, delta, lam))
        return np.array([[a, b, g, 1.0 - a - b - g], [a, d, g, 1.0 - a - d - g],
                         [a, b, lam_, 1.0 - a - b - lam_], [a, d, lam_, 1.0 - a - d - lam_]])
    a, b, g, d, lam_ = check_params((alpha, beta, gamma, delta, lam))
    table = np.array([
        [a, b, g, 1.0 - a - b - g],
        [a, d, g, 1.0 - a - d - g],
        [a, b, lam_, 1.0 - a - b - lam_],
        [a, d, lam_, 1.0 - a - d - lam_],
    ])
    return np.clip(table, 0.0, 1.0)  # only rounding below 0 is clipped (validity checked above)


def check_joint(joint) -> np.ndarray:
    """The data distribution (a, b, c, d) = P(x = 00, 01, 10, 11) (Table 3.2) as a (4,) array, validated."""
    try:
        p = np.asarray(joint, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise BadInputError(f"joint must be 4 probabilities (a, b, c, d); got {joint!r}.") from None
    if p.shape != (4,) or not np.all(np.isfinite(p)) or np.any(p < 0) or not np.isclose(p.sum(), 1.0, atol=1e-8):
        raise BadInputError(f"joint must be 4 non-negative probabilities (a, b, c, d) summing to 1; got {joint!r}"
                            + (f" (sum {p.sum():.4g})" if p.shape == (4,) else "") + ".")
    return p / p.sum()


def _bits(code: int) -> tuple[int, int]:
    return code >> 1, code & 1


def mar_violations(table) -> list[tuple[str, str, str]]:
    """Pairs (r, x, x') that break the MAR symmetry of a (4, 4) P(r | x) table, found by enumeration.

    For each r and each two values x, x' that agree on the dimensions observed under r (Rubin's
    definition, digest 2.2), P(r | x) must equal P(r | x'). Returns the failing triples as codes.
    """
    t = np.asarray(table, dtype=float)
    out = []
    for r in range(4):
        obs = _bits(r)
        for x in range(4):
            for x2 in range(x + 1, 4):
                same = all(o == 0 or bx == bx2 for o, bx, bx2 in zip(obs, _bits(x), _bits(x2)))
                if same and not np.isclose(t[x, r], t[x2, r], atol=1e-12):
                    out.append((CODES[r], CODES[x], CODES[x2]))
    return out


def is_mar(table) -> bool:
    """True when the (4, 4) table P(r | x) satisfies the MAR symmetry for every r and x (enumeration)."""
    return not mar_violations(table)


# ============================================================================ sampling
def sample(n: int, joint, params, *, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Draw n cases: x ~ joint (Table 3.2), then r ~ P(r | x) of Table 3.1.

    Returns
    -------
    x : int ndarray (n, 2) of 0/1 (both values, observed or not)
    r : bool ndarray (n, 2), True = observed
    """
    check_int("n", n, 1)
    p = check_joint(joint)
    table = response_table(*check_params(params))
    check_rng(rng)
    xc = rng.choice(4, size=n, p=p)
    x = np.stack([xc >> 1, xc & 1], axis=1).astype(np.int64)
    return x, _draw_r(xc, table, rng)


def _draw_r(xc: np.ndarray, table: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """r (n, 2) bool drawn from the rows ``table[xc]`` (inverse CDF of one uniform per case)."""
    cum = np.cumsum(table, axis=1)
    cum[:, -1] = 1.0
    rc = (rng.random(xc.size)[:, None] >= cum[xc]).sum(axis=1)
    return np.stack([(rc >> 1) == 1, (rc & 1) == 1], axis=1)


def sample_cells(n: int, joint, params, *, rng: np.random.Generator, size=None) -> np.ndarray:
    """The (x, r) cell counts of n cases drawn as in :func:`sample`, without drawing the cases.

    One multinomial draw over the 16 cells with probabilities P(x) P(r | x); ``size`` (int or tuple)
    draws that many independent data sets. Returns int counts of shape ``(*size, 4, 4)`` ``[x, r]``.
    """
    check_int("n", n, 1)
    probs = check_joint(joint)[:, None] * response_table(*check_params(params))
    check_rng(rng)
    flat = probs.reshape(-1)
    cells = rng.multinomial(n, flat / flat.sum(), size=size)
    return cells.reshape(cells.shape[:-1] + (4, 4))


def cell_counts(x, r) -> np.ndarray:
    """The (4, 4) table of cell counts [x code, r code] of cases x (n, 2) 0/1 and r (n, 2) bool."""
    x, r = _check_cases(x, r)
    xc = 2 * x[:, 0] + x[:, 1]
    rc = 2 * r[:, 0].astype(int) + r[:, 1].astype(int)
    return np.bincount(4 * xc + rc, minlength=16).reshape(4, 4)


def _check_cases(x, r):
    x = np.asarray(x)
    r = np.asarray(r)
    if x.ndim != 2 or x.shape[1] != 2 or r.shape != x.shape:
        raise BadInputError(f"x and r must both have shape (n, 2); got {x.shape} and {r.shape}.")
    if not np.isin(x, (0, 1)).all():
        raise BadInputError("x must hold binary values 0/1 (the unobserved ones too; r says which are seen).")
    if r.dtype != bool:
        if not np.isin(r, (0, 1)).all():
            raise BadInputError("r must be boolean (True = observed) or 0/1.")
        r = r.astype(bool)
    return x.astype(np.int64), r


@dataclass(frozen=True, eq=False)
class MARCounts:
    """The sufficient statistics of eq. 3.4.5 (leading batch axes allowed).

    ``c0`` (...) cases with nothing observed; ``c1`` (..., 2, 2) both observed, [x1, x2]; ``c2`` (..., 2)
    only x1 observed, [x1]; ``c3`` (..., 2) only x2 observed, [x2]; ``n`` (...) all cases.
    """

    c0: np.ndarray
    c1: np.ndarray
    c2: np.ndarray
    c3: np.ndarray

    @property
    def n(self) -> np.ndarray:
        return self.c0 + self.c1.sum(axis=(-2, -1)) + self.c2.sum(axis=-1) + self.c3.sum(axis=-1)

    @property
    def batch_shape(self) -> tuple:
        return np.shape(self.c0)


def counts_from_cells(cells) -> MARCounts:
    """:class:`MARCounts` of (x, r) cell counts of shape (..., 4, 4) [x code, r code]."""
    c = np.asarray(cells, dtype=float)
    if c.shape[-2:] != (4, 4) or np.any(c < 0):
        raise BadInputError(f"cells must be non-negative counts of shape (..., 4, 4); got shape {c.shape}.")
    grid = c.reshape(c.shape[:-2] + (2, 2, 4))  # [x1, x2, r]
    return MARCounts(c0=grid[..., 0].sum(axis=(-2, -1)), c1=grid[..., 3],
                     c2=grid[..., 2].sum(axis=-1), c3=grid[..., 1].sum(axis=-2))


def counts(x, r) -> MARCounts:
    """:class:`MARCounts` of cases x (n, 2) 0/1 and r (n, 2) bool (True = observed)."""
    return counts_from_cells(cell_counts(x, r))


# ============================================================================ estimators
def factorised_estimate(data: MARCounts) -> np.ndarray:
    """θ_vd of the factorised model by observed-data ML (eq. 3.4.2): θ[..., v, d].

    θ_vd = Σ_n r_dn [x_dn = v] / Σ_n r_dn. A dimension never observed gives NaN.
    """
    x1 = data.c1.sum(axis=-1) + data.c2  # x1 observed: both, or x1 only
    x2 = data.c1.sum(axis=-2) + data.c3
    obs = np.stack([x1, x2], axis=-1)  # [..., v, d]
    total = obs.sum(axis=-2, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, obs / np.where(total > 0, total, 1.0), np.nan)


def p_x1_given_r1(joint, params) -> float:
    """The closed form of eqs. 3.4.3-3.4.4, the limit of the factorised estimate of P(X1 = 1):

    P(X1 = 1 | R1 = 1) = [(c + d)(1 − α) − cβ − dδ] / [(1 − α) − (a + c)β − (b + d)δ].
    """
    a, b, c, d = check_joint(joint)
    alpha, beta, _, delta, _ = check_params(params)
    den = (1 - alpha) - (a + c) * beta - (b + d) * delta
    if den <= 0:
        raise BadInputError("P(R1 = 1) = 0 under these parameters: x1 is never observed, so P(X1 = 1 | R1 = 1) "
                            "is undefined. Lower α, β or δ.")
    return float(((c + d) * (1 - alpha) - c * beta - d * delta) / den)


def p_x1_given_r1_enumerated(joint, params) -> float:
    """P(X1 = 1 | R1 = 1) by summing P(x) P(r | x) over the table (a check of :func:`p_x1_given_r1`)."""
    cells = check_joint(joint)[:, None] * response_table(*check_params(params))
    r1 = cells[:, 2:]  # r = 10, 11
    return float(r1[2:].sum() / r1.sum())


# ============================================================================ EM on the full joint (eq. 3.4.5)
@dataclass(frozen=True, slots=True)
class MARTableEMConfig:
    """Settings of the full-joint EM.

    ``init``: "uniform" (φ = 1/4) or "random" (φ ~ Dirichlet(1, 1, 1, 1), needs the rng); ``tol``: stop when
    the largest per-case change of the log-likelihood over the batch is below it; ``max_iter``.
    """

    init: str = "uniform"
    tol: float = 1e-12
    max_iter: int = 5000

    def __post_init__(self):
        if self.init not in ("uniform", "random"):
            raise BadInputError(f"init must be 'uniform' or 'random', got {self.init!r}.")
        check_nonnegative("tol", self.tol)
        check_int("max_iter", self.max_iter, 0)


@dataclass(frozen=True, eq=False, slots=True)
class MARTableEMState:
    """φ (..., 2, 2) [x1, x2]; ``objectives`` (...) observed-data log-likelihoods; ``objective`` their sum."""

    phi: np.ndarray
    objectives: np.ndarray
    objective: float
    iteration: int

    @property
    def p_x1(self) -> np.ndarray:
        """The EM estimate of P(X1 = 1) = φ_10 + φ_11."""
        return self.phi[..., 1, :].sum(axis=-1)


@dataclass(frozen=True, eq=False, slots=True)
class MARTableEMResult:
    state: MARTableEMState
    converged: bool
    stop_reason: str
    message: str
    n_iter: int
    trace: tuple


def log_likelihood(phi, data: MARCounts) -> np.ndarray:
    """The observed-data log-likelihood of φ (..., 2, 2) given the counts (eq. 3.3.2 for this model)."""
    phi = np.asarray(phi, dtype=float)
    return (xlogy(data.c1, phi).sum(axis=(-2, -1)) + xlogy(data.c2, phi.sum(axis=-1)).sum(axis=-1)
            + xlogy(data.c3, phi.sum(axis=-2)).sum(axis=-1))


def _state(phi, data, iteration) -> MARTableEMState:
    ll = log_likelihood(phi, data)
    return MARTableEMState(phi=phi, objectives=ll, objective=float(np.sum(ll)), iteration=iteration)


def init(data: MARCounts, config: MARTableEMConfig = MARTableEMConfig(),
         rng: np.random.Generator | None = None) -> MARTableEMState:
    """The starting φ: uniform, or Dirichlet(1, 1, 1, 1) draws (one per batch element) with ``rng``."""
    if not isinstance(data, MARCounts):
        raise BadInputError("data must be MARCounts (see counts() and counts_from_cells()).")
    if np.any(data.n <= 0):
        raise BadInputError("Every data set needs at least one case.")
    shape = data.batch_shape + (2, 2)
    if config.init == "uniform":
        phi = np.full(shape, 0.25)
    else:
        if not isinstance(rng, np.random.Generator):
            raise BadInputError("init='random' needs rng, a numpy.random.Generator.")
        phi = rng.dirichlet(np.ones(4), size=data.batch_shape).reshape(shape)
    return _state(phi, data, 0)


def step(state: MARTableEMState, data: MARCounts,
         config: MARTableEMConfig = MARTableEMConfig()) -> MARTableEMState:
    """One EM update of φ, eq. 3.4.5 with the C⁰ φ_ij term of the erratum (returns a new state)."""
    phi = state.phi
    rows = np.maximum(phi.sum(axis=-1, keepdims=True), _TINY)  # φ_i.
    cols = np.maximum(phi.sum(axis=-2, keepdims=True), _TINY)  # φ_.j
    new = (np.asarray(data.c0, dtype=float)[..., None, None] * phi + data.c1
           + data.c2[..., :, None] * phi / rows + data.c3[..., None, :] * phi / cols)
    new = new / np.asarray(data.n, dtype=float)[..., None, None]
    return _state(new, data, state.iteration + 1)


def fit(data: MARCounts, config: MARTableEMConfig = MARTableEMConfig(), rng: np.random.Generator | None = None, *,
        callback: Callable[[MARTableEMState], None] | None = None) -> MARTableEMResult:
    """A loop over :func:`step` from :func:`init` until the largest per-case change is below ``tol``."""
    n = np.maximum(np.asarray(data.n, dtype=float), 1.0)
    out = run_restarts(
        n_runs=1,
        start=lambda: init(data, config, rng),
        step=lambda s: step(s, data, config),
        snapshot=lambda s: {"iteration": s.iteration, "objective": s.objective},
        change=lambda old, new: float(np.max(np.abs(new.objectives - old.objectives) / n)),
        max_iter=config.max_iter,
        tol=config.tol,
        callback=callback,
    )
    return MARTableEMResult(state=out.state, converged=out.stop_reason == "tol", stop_reason=out.stop_reason,
                            message=out.message, n_iter=out.state.iteration, trace=out.trace)


# ============================================================================ as a mask generator
def mar_table_2d(X, *, rng: np.random.Generator, alpha=0.1, beta=0.1, gamma=0.2, delta=0.1, lam=0.2) -> np.ndarray:
    """Missingness mask of the Table 3.1 MAR mechanism for two binary columns (digest 2.6 ``mar_table_2d``).

    Same calling convention as the mechanisms of :mod:`explorer.core.missingness.mechanisms` (``fn(X, *, rng,
    **params)``, True = missing), but X must be complete with exactly two 0/1 columns, so it is not in that registry
    (whose mechanisms apply to any table). Row i gets r ~ P(r | x_i) of Table 3.1 and ``missing = ~r``.
    """
    Xa = np.asarray(X, dtype=float)
    if Xa.ndim != 2 or Xa.shape[1] != 2 or not np.isin(Xa, (0.0, 1.0)).all():
        raise BadInputError("mar_table_2d needs X of shape (n, 2) holding only 0/1 (complete binary data).")
    check_rng(rng)
    table = response_table(alpha, beta, gamma, delta, lam)
    return ~_draw_r((2 * Xa[:, 0] + Xa[:, 1]).astype(int), table, rng)


#: Old names (before class names were made unique across explorer), importable for one release with a warning
__getattr__ = renamed_names(__name__, globals(), {"EMConfig": "MARTableEMConfig", "EMState": "MARTableEMState",
                                                  "EMResult": "MARTableEMResult"})
