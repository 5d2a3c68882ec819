r"""A selection model for the Gaussian mixture: logistic self-masking, fitted jointly with the mixture.

Selection-model factorisation (digest section 2.1, thesis section 3.1):
:math:`P(R, X \mid \theta, \phi) = P(R \mid X, \phi)\, P(X \mid \theta)` with the complete-data model a
Gaussian mixture with full covariances and the missing-data model independent logistic self-masking
per column (R = 1 observed):

.. math::

    x_n \sim \sum_k \pi_k N(\mu_k, \Sigma_k), \qquad
    P(R_{nd} = 1 \mid x_{nd}) = \sigma(a_d + b_d x_{nd}).

:math:`b_d = 0` is MCAR for column d; ``mar_columns`` fixes :math:`b_d = 0` (MCAR, a special case of
MAR) for the listed columns. A column with no missing entry has :math:`b_d = 0` and
:math:`a_d = \operatorname{logit}((N + 1/2)/(N + 1))` (the data carry no information on its slope; the add-half
keeps :math:`a_d` finite). When some :math:`b_d \ne 0` the mechanism is NMAR and not ignorable
(digest 2.4, thesis eq. 3.3.1): the likelihood of row n keeps the selection factor,

.. math::

    p(x_n^o, r_n) = \sum_k \pi_k N(x_n^o \mid \mu_k^o, \Sigma_k^{oo}) \prod_{d \in o} \sigma(a_d + b_d x_{nd})
        \; E_{x^m \mid x^o, k}\Big[\prod_{d \in m} \big(1 - \sigma(a_d + b_d x_{d})\big)\Big],

the expectation under the component's conditional Gaussian :math:`N(x^m \mid \hat x_k^m, Q_k)`
(:math:`\hat x_k^m = \mu_k^m + \Sigma_k^{mo}(\Sigma_k^{oo})^{-1}(x^o - \mu_k^o)`,
:math:`Q_k = \Sigma_k^{mm} - \Sigma_k^{mo}(\Sigma_k^{oo})^{-1}\Sigma_k^{om}`, computed with a Cholesky
factor of :math:`\Sigma_k^{oo}` and triangular solves, never an inverse). With every :math:`b_d = 0` the
product does not depend on :math:`x^m` and the likelihood is the MAR mixture likelihood (3.3.2, the
observed-data likelihood of :mod:`explorer.core.mixtures.em_gmm`) times :math:`\prod_d
\sigma(a_d)^{r_{nd}}(1-\sigma(a_d))^{1-r_{nd}}`. Rows with every value missing keep their factor :math:`\sum_k \pi_k
E_k[\prod_d (1 - \sigma)]`: under NMAR they carry information (unlike in the MAR fit, which drops them).

**How the expectations are computed (exactly).** Every expectation over :math:`x^m` under a component's
conditional Gaussian is a weighted sum over nodes :math:`x^m_s = \hat x_k^m + L_k t_s` (:math:`Q_k = L_k L_k^\top`)
with base weights :math:`\omega_s`:

* ``e_step="auto"`` (default): rows with at most ``max_quadrature_missing`` (default 2) missing values use
  the tensor-product Gauss-Hermite rule with ``n_quadrature`` nodes per missing coordinate
  (:math:`t_s = \sqrt 2\,` node, :math:`\omega_s = \prod w / \pi^{m/2}`): deterministic, and near-exact
  because the integrand is smooth; rows with more missing values use importance sampling from the
  conditional Gaussian: ``n_samples`` independent draws :math:`t_s \sim N(0, I)` per row and component,
  :math:`\omega_s = 1/S`;
* ``e_step="importance"``: importance sampling (as above) for every row with a missing value.

The selection factor :math:`g(x^m) = \prod_{d \in m}(1 - \sigma(a_d + b_d x_d))` (summed in log space) weights
the nodes: :math:`\hat E_k = \sum_s \omega_s g(x^m_s)` estimates the expectation, and the normalised weights
:math:`\tilde w_s = \omega_s g(x^m_s) / \hat E_k` (they sum to one) represent
:math:`p(x^m \mid x^o, r, k) \propto N(x^m \mid \hat x_k^m, Q_k)\, g(x^m)` (self-normalised importance sampling;
for quadrature they are the quadrature weights of that density).

**EM (Monte Carlo EM when importance sampling is used).** E-step at :math:`\theta^{(t)}`:
responsibilities :math:`h_{nk} \propto \pi_k N(x_n^o \mid \mu_k^o, \Sigma_k^{oo}) \hat E_{nk}` (the observed factor
:math:`\prod_{d \in o}\sigma` is common to every k), weighted completions
:math:`\bar x_{nk}^m = \sum_s \tilde w_s x^m_s`, and the weighted conditional second moments
:math:`C_{nk} = \sum_s \tilde w_s (x^m_s - \bar x^m_{nk})(x^m_s - \bar x^m_{nk})^\top` (the (m, m) block).
M-step, exactly as the MAR EM (digest 3.5) with :math:`(\hat x, \hat C)` replaced by the weighted
:math:`(\bar x, C)`: :math:`\pi_k = N_k / N`, :math:`\mu_k = \sum_n h_{nk} \bar x_{nk} / N_k`,
:math:`\Sigma_k = \sum_n h_{nk} [(\bar x_{nk} - \mu_k)(\bar x_{nk} - \mu_k)^\top + C_{nk}] / N_k + \varepsilon I`; then
for every column whose slope is free, ``newton_steps`` Newton steps (with step halving, so the weighted
objective never decreases) on the weighted logistic regression of :math:`r_d` on :math:`x_d`: observed entries
with weight 1 and :math:`r = 1`, and for a missing entry every node :math:`x^m_{s,d}` with weight
:math:`h_{nk}\tilde w_s` and :math:`r = 0`, plus a ridge :math:`\tfrac{\lambda}{2}(b_d s_d)^2` on the standardised slope
(:math:`s_d` = observed standard deviation, :math:`\lambda` = ``slope_ridge``, default :math:`10^{-3}`, so that a
separable column keeps a finite slope). A column with ``b`` fixed at 0 has the closed form
:math:`a_d = \operatorname{logit}(N^{obs}_d / N)`.

**Objective.** :attr:`SelectionState.log_likelihood` is the E-step's estimate of the observed-data
log-likelihood :math:`\sum_n \log p(x_n^o, r_n)` at the state's parameters, from the same nodes. With
quadrature (every row at most ``max_quadrature_missing`` missing, ``e_step="auto"``) it is deterministic and
in practice increases at every step; it is not an exact EM bound, because the nodes follow the current
parameters (an approximate E-step) and the logistic M-step is partial. With importance sampling it is
noisy: **it is not monotone**, and the stopping rule ``tol`` then compares two noisy numbers (use ``tol=0``
and a fixed ``max_iter``, or a large ``n_samples``). :func:`log_likelihood` evaluates the likelihood at given
parameters by numerical integration for comparisons.

**Initialisation.** :func:`init` fits the MAR mixture (:mod:`explorer.core.mixtures.em_gmm`, k-means start) for
:math:`(\pi, \mu, \Sigma)`, sets :math:`a_d = \operatorname{logit}(N^{obs}_d / N)` and, for a free slope,
:math:`b_d s_d = -\operatorname{sign}(\text{skewness of the observed } x_d) \times` ``init_slope``. Starting at
:math:`b = 0` would be wrong: the MAR fit with :math:`b = 0` is a stationary point of this likelihood when a
column is uncorrelated with the others (the score in :math:`b_d` is
:math:`N^{obs}_d N^{mis}_d (\bar x^{obs}_d - \hat\mu_d) / N = 0` there). Hiding large values of a Gaussian makes
the observed values left-skewed, hence the sign.

Identification rests on the Gaussian shape of each component (digest section 8: the NMAR parameters are
identified only through the model's assumptions); on real data whose columns are not Gaussian the
fitted :math:`b` absorbs the misfit.

Shape of the API: :func:`prepare` -> :class:`SelectionData`; :func:`init` / :func:`step` (one M + E step,
random generator injected) / :func:`fit` (a loop over :func:`step`); the parameters are a
:class:`SelectionParams`, evaluated by :func:`log_likelihood` and used by :func:`impute` (draws from the
NMAR-aware conditional :math:`p(x^m \mid x^o, r)` and its mean).

No thesis equation is implemented as printed: this model is not in the thesis (it applies the selection-model
factorisation of section 3.1 with the non-ignorable posterior 3.3.1 to the Gaussian mixture of digest 3.5).
Erratum applied: the Gaussian normaliser is :math:`|2\pi\Sigma^{oo}|^{-1/2}` (Appendix A, eqs. 4.4.6/4.4.13).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numpy.polynomial.hermite import hermgauss
from scipy.linalg import solve_triangular
from scipy.special import expit, log_expit, logsumexp

from explorer.core.gaussians.gaussian import LOG_2PI, cholesky
from explorer.core.gaussians.patterns import group_patterns
from explorer.core.loop import ConvergenceWarning, run_restarts
from explorer.core.validation import BadInputError, check_draws, check_incomplete, check_int, check_nonnegative, is_int

__all__ = [
    "SelectionConfig",
    "SelectionParams",
    "SelectionData",
    "SelectionState",
    "SelectionResult",
    "ConvergenceWarning",
    "E_STEPS",
    "prepare",
    "init",
    "init_from_parameters",
    "step",
    "fit",
    "log_likelihood",
    "impute",
    "missing_probability",
]

E_STEPS = ("auto", "importance")
_MAX_BATCH_VALUES = 4_000_000  # proposals x missing values per rejection round of impute (32 MB)


# ----------------------------------------------------------------------------- configuration and parameters
@dataclass(frozen=True, slots=True)
class SelectionConfig:
    """Settings of the Gaussian-mixture selection model.

    Parameters
    ----------
    n_components : int
        Number of mixture components K.
    mar_columns : tuple of int
        Columns whose slope :math:`b_d` is fixed at 0 (missing completely at random in that column).
    e_step : {"auto", "importance"}
        How the expectations over the missing values are computed (see the module docstring).
    n_quadrature : int
        Gauss-Hermite nodes per missing coordinate (``"auto"``, rows with few missing values).
    max_quadrature_missing : int
        ``"auto"`` uses quadrature for rows with at most this many missing values (1..3).
    n_samples : int
        Importance samples per row and component (importance sampling).
    newton_steps : int
        Newton steps of the logistic M-step per EM iteration.
    slope_ridge : float
        :math:`\\lambda` of the ridge on the standardised slope (>= 0).
    init_slope : float
        Magnitude of the standardised initial slope :math:`|b_d s_d|` of the free columns.
    reg_covar : float
        Added to the diagonal of every covariance after each M-step.
    tol, max_iter, n_init
        As in :mod:`explorer.core.mixtures.em_gmm` (``tol`` per fitted row); see the module docstring about ``tol``
        under importance sampling.
    """

    n_components: int = 1
    mar_columns: tuple = ()
    e_step: str = "auto"
    n_quadrature: int = 20
    max_quadrature_missing: int = 2
    n_samples: int = 200
    newton_steps: int = 5
    slope_ridge: float = 1e-3
    init_slope: float = 0.5
    reg_covar: float = 1e-6
    tol: float = 1e-6
    max_iter: int = 200
    n_init: int = 1

    def __post_init__(self):
        check_int("n_components", self.n_components, 1)
        try:
            cols = tuple(self.mar_columns)
        except TypeError:
            raise BadInputError(
                f"mar_columns must be a sequence of column indices, got {self.mar_columns!r}.") from None
        if not all(is_int(j) for j in cols):
            raise BadInputError(f"mar_columns must hold integer column indices, got {self.mar_columns!r}.")
        object.__setattr__(self, "mar_columns", tuple(sorted({int(j) for j in cols})))
        if self.e_step not in E_STEPS:
            raise BadInputError(f"e_step must be one of {E_STEPS}, got {self.e_step!r}.")
        check_int("n_quadrature", self.n_quadrature, 2)
        check_int("max_quadrature_missing", self.max_quadrature_missing, 0)
        if self.max_quadrature_missing > 3:
            raise BadInputError("max_quadrature_missing must be at most 3 (a tensor-product rule grows as "
                                f"n_quadrature ** m), got {self.max_quadrature_missing}.")
        check_int("n_samples", self.n_samples, 1)
        check_int("newton_steps", self.newton_steps, 1)
        check_int("max_iter", self.max_iter, 0)
        check_int("n_init", self.n_init, 1)
        for name in ("slope_ridge", "init_slope", "reg_covar", "tol"):
            check_nonnegative(name, getattr(self, name))


@dataclass(frozen=True, eq=False, slots=True)
class SelectionParams:
    """Parameters of the selection model.

    Attributes
    ----------
    weights : ndarray (K,)
        :math:`\\pi_k`.
    means : ndarray (K, D)
    covariances : ndarray (K, D, D)
    a, b : ndarray (D,)
        Intercepts and slopes of :math:`P(R_d = 1 \\mid x_d) = \\sigma(a_d + b_d x_d)`.
    """

    weights: np.ndarray
    means: np.ndarray
    covariances: np.ndarray
    a: np.ndarray
    b: np.ndarray

    @property
    def n_components(self) -> int:
        return self.weights.shape[0]

    @property
    def n_features(self) -> int:
        return self.means.shape[1]


def _readonly(*arrays):
    for a in arrays:
        a.setflags(write=False)


def _check_params(params, n_features: int | None = None) -> SelectionParams:
    if not isinstance(params, SelectionParams):
        raise BadInputError(f"params must be a SelectionParams, got {type(params).__name__}.")
    try:
        w, mu, cov, a, b = (np.array(v, dtype=float) for v in
                            (params.weights, params.means, params.covariances, params.a, params.b))
    except (TypeError, ValueError):
        raise BadInputError("SelectionParams must hold numeric arrays.") from None
    if w.ndim != 1 or mu.ndim != 2 or mu.shape[0] != w.size:
        raise BadInputError(f"SelectionParams: weights {w.shape} and means {mu.shape} must be (K,) and (K, D).")
    K, D = mu.shape
    if cov.shape != (K, D, D) or a.shape != (D,) or b.shape != (D,):
        raise BadInputError(f"SelectionParams: covariances {cov.shape}, a {a.shape}, b {b.shape}; expected "
                            f"{(K, D, D)}, {(D,)}, {(D,)}.")
    if n_features is not None and D != n_features:
        raise BadInputError(f"The parameters have {D} features but the data have {n_features}.")
    if not all(np.all(np.isfinite(v)) for v in (w, mu, cov, a, b)):
        raise BadInputError("SelectionParams must be finite.")
    if np.any(w < 0) or not np.isclose(w.sum(), 1.0):
        raise BadInputError("SelectionParams.weights must be non-negative and sum to one.")
    if not np.allclose(cov, np.swapaxes(cov, 1, 2), rtol=1e-8, atol=1e-12):
        raise BadInputError("SelectionParams.covariances must be symmetric.")
    cholesky(cov)  # DegenerateCovarianceError (a BadInputError) when not positive definite
    _readonly(w, mu, cov, a, b)
    return SelectionParams(w, mu, cov, a, b)


def missing_probability(params: SelectionParams, X) -> np.ndarray:
    """:math:`P(R_{nd} = 0 \\mid x_{nd}) = 1 - \\sigma(a_d + b_d x_{nd})` for complete rows X (N, D)."""
    X = np.asarray(X, dtype=float)
    return expit(-(params.a + params.b * X))


# ----------------------------------------------------------------------------- data
@dataclass(frozen=True, eq=False, slots=True)
class _Pattern:
    rows: np.ndarray  # row indices
    obs: np.ndarray  # observed column indices
    mis: np.ndarray  # missing column indices


@dataclass(frozen=True, eq=False, slots=True)
class SelectionData:
    """Incomplete data prepared once (see :func:`prepare`): ``X`` with NaN, ``missing`` (True = missing),
    rows grouped by missingness pattern (rows with nothing observed form their own pattern)."""

    X: np.ndarray
    Xf: np.ndarray
    missing: np.ndarray
    patterns: tuple
    center: np.ndarray
    scale: np.ndarray
    skew: np.ndarray

    @property
    def n_samples(self) -> int:
        return self.X.shape[0]

    @property
    def n_features(self) -> int:
        return self.X.shape[1]

    @property
    def n_observed_rows(self) -> int:
        return int(np.sum(~self.missing.all(axis=1)))


def _patterns(missing: np.ndarray) -> tuple:
    """One :class:`_Pattern` per distinct missingness pattern (through :func:`group_patterns`)."""
    D = missing.shape[1]
    allc = np.arange(D)
    out = []
    for g in group_patterns(missing).groups:
        for u, pos in enumerate(g.members):
            mis = np.asarray(g.unique_mis[u], dtype=np.intp)
            out.append(_Pattern(np.asarray(g.rows[pos]), np.setdiff1d(allc, mis), mis))
    empty = np.flatnonzero(missing.all(axis=1))
    if empty.size:
        out.append(_Pattern(empty, np.zeros(0, dtype=np.intp), allc.astype(np.intp)))
    return tuple(out)


def prepare(X, missing=None, *, columns=None) -> SelectionData:
    """Validate incomplete data (NaN or ``missing`` = True marks a missing entry) and group rows by pattern.

    Raises
    ------
    BadInputError
        Non-numeric values, inf, a column with no observed value (nothing identifies its distribution,
        and its slope), fewer than two rows with an observed value.
    """
    Xn, miss = check_incomplete(X, missing, columns=columns, allow_empty_rows=True)
    if int(np.sum(~miss.all(axis=1))) < 2:
        raise BadInputError("At least two rows with an observed value are needed to fit a mixture.")
    center = np.nanmean(Xn, axis=0)
    scale = np.nanstd(Xn, axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    z = (Xn - center) / scale
    skew = np.nanmean(z**3, axis=0)
    Xf = np.where(miss, 0.0, Xn)
    _readonly(Xn, Xf, miss, center, scale, skew)
    return SelectionData(Xn, Xf, miss, _patterns(miss), center, scale, skew)


def _free_columns(data: SelectionData, config: SelectionConfig) -> np.ndarray:
    """Columns whose slope is estimated: some entry missing and not declared MAR."""
    D = data.n_features
    bad = [j for j in config.mar_columns if not 0 <= j < D]
    if bad:
        raise BadInputError(f"mar_columns {bad} are out of range for data with {D} columns (valid: 0..{D - 1}).")
    free = data.missing.any(axis=0)
    free[list(config.mar_columns)] = False
    return np.flatnonzero(free)


# ----------------------------------------------------------------------------- expectations over x^m
def _gh_rule(m: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Tensor Gauss-Hermite rule for E[f(t)], t ~ N(0, I_m): nodes (n^m, m), log weights (n^m,)."""
    x, w = hermgauss(n)
    t1, lw1 = math.sqrt(2.0) * x, np.log(w) - 0.5 * math.log(math.pi)
    grids = np.meshgrid(*([t1] * m), indexing="ij")
    lgrids = np.meshgrid(*([lw1] * m), indexing="ij")
    return np.stack([g.ravel() for g in grids], axis=1), np.sum([g.ravel() for g in lgrids], axis=0)


def _conditional(X_rows: np.ndarray, pat: _Pattern, mean: np.ndarray, cov: np.ndarray):
    """log N(x^o | mu^o, Sigma^oo) (n_p,), conditional means (n_p, m), Cholesky factor of Q (m, m)."""
    o, m = pat.obs, pat.mis
    n_p = X_rows.shape[0]
    if o.size:
        L_oo = cholesky(cov[np.ix_(o, o)], what="observed block of a covariance")
        # L_oo^{-1} by a triangular solve of the identity (small, o x o), then einsum over the rows: no BLAS
        # call whose size grows with n (thread oversubscription made those 10x slower on a loaded machine)
        Linv = solve_triangular(L_oo, np.eye(o.size), lower=True)
        z = np.einsum("ij,nj->ni", Linv, X_rows[:, o] - mean[o])  # (n_p, n_o)
        logn = -0.5 * (o.size * LOG_2PI + 2.0 * np.log(np.diag(L_oo)).sum() + np.einsum("ni,ni->n", z, z))
        if m.size == 0:
            return logn, np.zeros((n_p, 0)), np.zeros((0, 0))
        A = Linv @ cov[np.ix_(o, m)]  # (n_o, m) = L_oo^{-1} Sigma_om
        xhat = mean[m] + np.einsum("ni,im->nm", z, A)
        Q = cov[np.ix_(m, m)] - A.T @ A
    else:
        logn = np.zeros(n_p)
        xhat = np.broadcast_to(mean[m], (n_p, m.size)).copy()
        Q = cov[np.ix_(m, m)]
    Q = 0.5 * (Q + Q.T)
    return logn, xhat, cholesky(Q, what="conditional covariance")


def _nodes(xhat: np.ndarray, Lq: np.ndarray, rule, n_samples: int, rng):
    """Nodes x^m (n_p, S, m) and base log weights (n_p, S) or (S,): quadrature ``rule`` or IS draws."""
    n_p, m = xhat.shape
    if rule is not None:
        t, lw0 = rule
        return xhat[:, None, :] + np.einsum("sj,ij->si", t, Lq)[None, :, :], lw0
    if rng is None:
        raise BadInputError("Importance sampling needs an injected rng (np.random.default_rng(seed)).")
    t = rng.standard_normal((n_p, n_samples, m))
    return xhat[:, None, :] + np.einsum("nsj,ij->nsi", t, Lq), np.full(n_samples, -math.log(n_samples))


def _log_keep(xs: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """log prod_{d in m} (1 - sigma(a_d + b_d x_d)) at the nodes (summed over the last axis)."""
    return log_expit(-(a + b * xs)).sum(axis=-1)


def _rule_for(m: int, e_step: str, n_quadrature: int, max_quadrature_missing: int, cache: dict):
    if e_step == "auto" and m <= max_quadrature_missing:
        if m not in cache:
            cache[m] = _gh_rule(m, n_quadrature)
        return cache[m]
    return None


# ----------------------------------------------------------------------------- state
@dataclass(frozen=True, eq=False, slots=True)
class _Stats:
    """What the M-step needs: N_k, sums about ``center``, logistic nodes per free column."""

    nk: np.ndarray
    s1: np.ndarray
    s2: np.ndarray
    logistic: dict  # column -> (x of missing nodes, weights)


@dataclass(frozen=True, eq=False, slots=True)
class SelectionState:
    """Parameters after ``iteration`` steps with the E-step computed at them.

    ``log_likelihood`` (= ``objective``) is the E-step's estimate of :math:`\\sum_n \\log p(x_n^o, r_n)` (quadrature
    or importance sampling, see the module docstring: not monotone under importance sampling); ``resp`` (N, K)
    the responsibilities :math:`h_{nk}`; ``min_ess`` the smallest effective sample size
    :math:`1/\\sum_s \\tilde w_s^2` over the importance-sampled (row, component) pairs (NaN when none).
    """

    iteration: int
    params: SelectionParams
    log_likelihood: float
    objective: float
    resp: np.ndarray
    min_ess: float
    stats: _Stats = field(repr=False)


@dataclass(frozen=True, eq=False, slots=True)
class SelectionResult:
    state: SelectionState
    converged: bool
    stop_reason: str
    message: str
    n_iter: int
    trace: tuple
    restart_objectives: tuple
    config: SelectionConfig


def _e_step(data: SelectionData, config: SelectionConfig, params: SelectionParams, free: np.ndarray, rng):
    """Responsibilities, the likelihood estimate and the M-step statistics at ``params``."""
    N, D = data.X.shape
    K = params.n_components
    log_w = np.log(np.maximum(params.weights, 1e-300))
    obs_factor = np.where(data.missing, 0.0, log_expit(params.a + params.b * data.Xf)).sum(axis=1)
    resp = np.zeros((N, K))
    row_ll = np.zeros(N)
    nk = np.zeros(K)
    s1 = np.zeros((K, D))
    s2 = np.zeros((K, D, D))
    free_set = set(free.tolist())
    pts: dict = {int(j): ([], []) for j in free}
    cache: dict = {}
    min_ess = np.inf
    for pat in data.patterns:
        Xr = data.Xf[pat.rows]
        n_p, m = pat.rows.size, pat.mis.size
        rule = _rule_for(m, config.e_step, config.n_quadrature, config.max_quadrature_missing, cache) if m else None
        lj = np.empty((n_p, K))
        per_k = []
        for k in range(K):
            logn, xhat, Lq = _conditional(Xr, pat, params.means[k], params.covariances[k])
            if m:
                xs, lw0 = _nodes(xhat, Lq, rule, config.n_samples, rng)
                lt = lw0 + _log_keep(xs, params.a[pat.mis], params.b[pat.mis])
                logE = logsumexp(lt, axis=1)
                wn = np.exp(lt - logE[:, None])
                if rule is None:
                    min_ess = min(min_ess, float(np.min(1.0 / np.sum(wn * wn, axis=1))))
                per_k.append((xs, wn))
            else:
                logE = 0.0
            lj[:, k] = log_w[k] + logn + logE
        tot = logsumexp(lj, axis=1)
        h = np.exp(lj - tot[:, None])
        resp[pat.rows] = h
        row_ll[pat.rows] = tot + obs_factor[pat.rows]
        for k in range(K):
            hk = h[:, k]
            xfull = Xr - data.center
            if m:
                xs, wn = per_k[k]
                xbar = np.einsum("ns,nsm->nm", wn, xs)
                dev = xs - xbar[:, None, :]
                C = np.einsum("ns,nsi,nsj->ij", wn * hk[:, None], dev, dev)
                xfull[:, pat.mis] = xbar - data.center[pat.mis]
                s2[k][np.ix_(pat.mis, pat.mis)] += C
                for j, d in enumerate(pat.mis):
                    if int(d) in free_set:
                        pts[int(d)][0].append(xs[:, :, j].ravel())
                        pts[int(d)][1].append((hk[:, None] * wn).ravel())
            nk[k] += hk.sum()
            s1[k] += np.einsum("n,nd->d", hk, xfull)
            s2[k] += np.einsum("n,ni,nj->ij", hk, xfull, xfull)
    logistic = {d: (np.concatenate(v[0]) if v[0] else np.zeros(0), np.concatenate(v[1]) if v[1] else np.zeros(0))
                for d, v in pts.items()}
    stats = _Stats(nk, s1, s2, logistic)
    return resp, float(row_ll.sum()), (min_ess if np.isfinite(min_ess) else float("nan")), stats


def _state(data, config, iteration, params, rng) -> SelectionState:
    free = _free_columns(data, config)
    resp, ll, ess, stats = _e_step(data, config, params, free, rng)
    _readonly(resp)
    return SelectionState(iteration, params, ll, ll, resp, ess, stats)


# ----------------------------------------------------------------------------- M-step
def _newton_logistic(a0, b0, x_obs, x_mis, w_mis, center, scale, ridge, n_steps):
    """A few Newton steps (step halving) on the weighted logistic log-likelihood of r on x, standardised.

    Maximises :math:`\\sum_{obs}\\log\\sigma(\\alpha + \\beta u) + \\sum_{mis} w \\log(1-\\sigma(\\alpha+\\beta u))
    - \\tfrac{\\lambda}{2}\\beta^2` with :math:`u = (x - c)/s`; returns :math:`(a, b) = (\\alpha - \\beta c / s, \\beta / s)`.
    """
    uo, um = (x_obs - center) / scale, (x_mis - center) / scale

    def objective(al, be):
        return (log_expit(al + be * uo).sum() + (w_mis * log_expit(-(al + be * um))).sum() - 0.5 * ridge * be * be)

    al, be = a0 + b0 * center, b0 * scale
    f = objective(al, be)
    for _ in range(n_steps):
        po, pm = expit(al + be * uo), expit(al + be * um)
        go, gm = 1.0 - po, -w_mis * pm
        g = np.array([go.sum() + gm.sum(), np.sum(go * uo) + np.sum(gm * um) - ridge * be])
        vo, vm = po * (1.0 - po), w_mis * pm * (1.0 - pm)
        h01 = np.sum(vo * uo) + np.sum(vm * um)
        H = np.array([[vo.sum() + vm.sum(), h01],
                      [h01, np.sum(vo * uo * uo) + np.sum(vm * um * um) + ridge]])  # minus the Hessian
        try:
            Lh = np.linalg.cholesky(H + 1e-12 * np.eye(2))
            delta = solve_triangular(Lh.T, solve_triangular(Lh, g, lower=True), lower=False)
        except np.linalg.LinAlgError:
            delta = g / max(np.trace(H), 1e-12)
        t = 1.0
        for _ in range(30):
            cand = (al + t * delta[0], be + t * delta[1])
            fc = objective(*cand)
            if fc >= f:
                al, be, f = cand[0], cand[1], fc
                break
            t *= 0.5
        else:
            break
    return al - be * center / scale, be / scale


def _m_step(data: SelectionData, config: SelectionConfig, state: SelectionState) -> SelectionParams:
    st, p = state.stats, state.params
    N, D = data.X.shape
    nk = st.nk + 10 * np.finfo(float).eps
    weights = nk / nk.sum()
    dmu = st.s1 / nk[:, None]
    covs = st.s2 / nk[:, None, None] - dmu[:, :, None] * dmu[:, None, :]
    covs = 0.5 * (covs + np.swapaxes(covs, 1, 2))
    covs[:, np.arange(D), np.arange(D)] += config.reg_covar
    means = data.center + dmu
    a, b = np.array(p.a), np.array(p.b)
    free = _free_columns(data, config)
    n_obs = (~data.missing).sum(axis=0)
    for d in range(D):
        if d in free:
            obs = ~data.missing[:, d]
            x_mis, w_mis = st.logistic[int(d)]
            a[d], b[d] = _newton_logistic(a[d], b[d], data.X[obs, d], x_mis, w_mis, data.center[d], data.scale[d],
                                          config.slope_ridge, config.newton_steps)
        else:
            a[d], b[d] = _fixed_intercept(n_obs[d], N), 0.0
    out = SelectionParams(weights, means, covs, a, b)
    _readonly(weights, means, covs, a, b)
    return out


def _fixed_intercept(n_obs: int, N: int) -> float:
    p = (N + 0.5) / (N + 1.0) if n_obs == N else n_obs / N
    return float(np.log(p) - np.log1p(-p))


# ----------------------------------------------------------------------------- init / step / fit
def _check_fit(data: SelectionData, config: SelectionConfig) -> np.ndarray:
    if not isinstance(data, SelectionData):
        raise BadInputError(f"data must come from gaussian_selection.prepare, got {type(data).__name__}.")
    free = _free_columns(data, config)
    if config.n_components > data.n_observed_rows:
        raise BadInputError(f"n_components={config.n_components} is larger than the number of rows with observed data "
                            f"({data.n_observed_rows}). Use fewer components.")
    return free


def init(data: SelectionData, config: SelectionConfig, rng: np.random.Generator) -> SelectionState:
    """MAR mixture fit for (pi, mu, Sigma), logit of the observed fraction for a, the skewness-signed
    ``init_slope`` for the free slopes (see the module docstring); then the E-step."""
    from explorer.core.mixtures import em_gmm

    free = _check_fit(data, config)
    check_draws(1, rng)
    emd = em_gmm.prepare(data.X)
    cfg = em_gmm.EMConfig(n_components=config.n_components, reg_covar=max(config.reg_covar, 1e-6), max_iter=100,
                          tol=1e-4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = em_gmm.fit(emd, cfg, rng)
    N, D = data.X.shape
    n_obs = (~data.missing).sum(axis=0)
    a = np.array([_fixed_intercept(n_obs[d], N) for d in range(D)])
    b = np.zeros(D)
    for d in free:
        sign = -1.0 if data.skew[d] > 0 else 1.0
        b[d] = sign * config.init_slope / data.scale[d]
        a[d] -= b[d] * data.center[d]
    params = _check_params(SelectionParams(res.state.weights, res.state.means, res.state.full_covariances(), a, b), D)
    return _state(data, config, 0, params, rng)


def init_from_parameters(data: SelectionData, config: SelectionConfig, params: SelectionParams,
                         rng: np.random.Generator | None = None) -> SelectionState:
    """State at iteration 0 from given parameters (validated; slopes of MAR / complete columns are NOT reset)."""
    _check_fit(data, config)
    params = _check_params(params, data.n_features)
    if params.n_components != config.n_components:
        raise BadInputError(f"The parameters have {params.n_components} components, the config {config.n_components}.")
    return _state(data, config, 0, params, rng)


def step(state: SelectionState, data: SelectionData, config: SelectionConfig,
         rng: np.random.Generator | None = None) -> SelectionState:
    """One iteration: M-step from the state's statistics, then the E-step at the new parameters (``rng`` draws the
    importance samples; unused when every expectation is by quadrature). Pure: returns a new state."""
    params = _m_step(data, config, state)
    return _state(data, config, state.iteration + 1, params, rng)


def _snapshot(state: SelectionState) -> dict:
    p = state.params
    return {"iteration": state.iteration, "log_likelihood": state.log_likelihood, "objective": state.objective,
            "weights": np.array(p.weights), "means": np.array(p.means), "covariances": np.array(p.covariances),
            "a": np.array(p.a), "b": np.array(p.b), "min_ess": state.min_ess}


def fit(data: SelectionData, config: SelectionConfig, rng: np.random.Generator, *,
        callback: Callable[[SelectionState], None] | None = None,
        init_state: SelectionState | None = None) -> SelectionResult:
    """``config.n_init`` restarts of a loop over :func:`step`; keep the highest (estimated) log-likelihood.

    The trace records, per iteration, the estimate of the observed-data log-likelihood (``log_likelihood``):
    deterministic with quadrature, noisy (not monotone) with importance sampling.
    """
    check_draws(1, rng)
    n_fit = max(data.n_samples, 1)
    out = run_restarts(
        n_runs=1 if init_state is not None else config.n_init,
        start=lambda: init_state if init_state is not None else init(data, config, rng),
        step=lambda s: step(s, data, config, rng),
        snapshot=_snapshot,
        change=lambda old, new: (new.objective - old.objective) / n_fit,
        max_iter=config.max_iter,
        tol=config.tol,
        callback=callback,
    )
    return SelectionResult(out.state, out.stop_reason == "tol", out.stop_reason, out.message, out.state.iteration,
                           out.trace, out.restart_objectives, config)


# ----------------------------------------------------------------------------- evaluation and imputation
def _prepare_eval(params, X, missing):
    Xn, miss = check_incomplete(X, missing, allow_empty_rows=True, allow_empty_columns=True)
    params = _check_params(params, Xn.shape[1])
    return params, Xn, np.where(miss, 0.0, Xn), miss


def log_likelihood(params: SelectionParams, X, missing=None, *, rng: np.random.Generator | None = None,
                   n_quadrature: int = 48, n_draws: int = 20000) -> np.ndarray:
    """Per-row :math:`\\log p(x_n^o, r_n)` (shape (N,)) by numerical integration over :math:`x^m`.

    Rows with at most 2 missing values: tensor Gauss-Hermite with ``n_quadrature`` nodes per missing coordinate
    (deterministic). Rows with more: plain Monte Carlo with ``n_draws`` draws from each component's conditional
    Gaussian (``rng``, default ``np.random.default_rng(0)``: a local generator, so the result is reproducible).
    Rows with nothing missing are exact.
    """
    params, Xn, Xf, miss = _prepare_eval(params, X, missing)
    check_int("n_quadrature", n_quadrature, 2)
    check_draws(n_draws, rng if rng is not None else np.random.default_rng(0))
    rng = rng if rng is not None else np.random.default_rng(0)
    K = params.n_components
    obs_factor = np.where(miss, 0.0, log_expit(params.a + params.b * Xf)).sum(axis=1)
    out = np.zeros(Xn.shape[0])
    cache: dict = {}
    for pat in _patterns(miss):
        Xr = Xf[pat.rows]
        m = pat.mis.size
        rule = _rule_for(m, "auto", n_quadrature, 2, cache) if m else None
        lj = np.empty((pat.rows.size, K))
        for k in range(K):
            logn, xhat, Lq = _conditional(Xr, pat, params.means[k], params.covariances[k])
            logE = 0.0
            if m:
                xs, lw0 = _nodes(xhat, Lq, rule, n_draws, rng)
                logE = logsumexp(lw0 + _log_keep(xs, params.a[pat.mis], params.b[pat.mis]), axis=1)
            with np.errstate(divide="ignore"):
                lj[:, k] = np.log(params.weights[k]) + logn + logE
        out[pat.rows] = logsumexp(lj, axis=1) + obs_factor[pat.rows]
    return out


def impute(params: SelectionParams, X, missing=None, *, rng: np.random.Generator, n_draws: int = 20,
           n_quadrature: int = 48, n_samples: int = 2000, max_proposals: int = 200_000):
    """Draws from the NMAR-aware conditional :math:`p(x^m \\mid x^o, r)` and its mean.

    Exact draws by rejection: propose :math:`k \\sim P(k \\mid x^o)` (the MAR responsibilities) and
    :math:`x^m \\sim N(\\hat x_k^m, Q_k)`, accept with probability :math:`\\prod_{d \\in m}(1 - \\sigma(a_d + b_d x_d)) \\le 1`;
    the accepted pairs follow :math:`p(k, x^m \\mid x^o, r)` (the factor of the observed entries does not depend on
    them). A row whose acceptance rate is so low that ``max_proposals`` proposals do not give ``n_draws`` draws falls
    back to sampling-importance-resampling from its proposals, with a warning.

    The mean :math:`E[x^m \\mid x^o, r] = \\sum_k h_k \\sum_s \\tilde w_s x_s^m` uses the expectations of the module
    docstring (Gauss-Hermite, ``n_quadrature`` nodes per coordinate, for rows with <= 2 missing values; importance
    sampling with ``n_samples`` draws otherwise).

    Returns
    -------
    draws : ndarray (n_draws, N, D)
        Observed entries copied unchanged.
    mean : ndarray (N, D)
        Observed entries copied unchanged.
    """
    params, Xn, Xf, miss = _prepare_eval(params, X, missing)
    check_draws(n_draws, rng)
    check_int("n_quadrature", n_quadrature, 2)
    check_int("n_samples", n_samples, 1)
    check_int("max_proposals", max_proposals, 1)
    K = params.n_components
    draws = np.broadcast_to(Xn, (n_draws,) + Xn.shape).copy()
    mean = Xn.copy()
    cache: dict = {}
    n_fallback = 0
    log_w = np.log(np.maximum(params.weights, 1e-300))
    for pat in _patterns(miss):
        m = pat.mis.size
        if m == 0:
            continue
        Xr = Xf[pat.rows]
        n_p = pat.rows.size
        rule = _rule_for(m, "auto", n_quadrature, 2, cache)
        cond = [_conditional(Xr, pat, params.means[k], params.covariances[k]) for k in range(K)]
        lj_mar = np.stack([log_w[k] + cond[k][0] for k in range(K)], axis=1)
        h_mar = np.exp(lj_mar - logsumexp(lj_mar, axis=1, keepdims=True))
        # the mean
        lj = np.empty((n_p, K))
        xbar = np.empty((K, n_p, m))
        for k in range(K):
            xs, lw0 = _nodes(cond[k][1], cond[k][2], rule, n_samples, rng)
            lt = lw0 + _log_keep(xs, params.a[pat.mis], params.b[pat.mis])
            logE = logsumexp(lt, axis=1)
            xbar[k] = np.einsum("ns,nsm->nm", np.exp(lt - logE[:, None]), xs)
            lj[:, k] = lj_mar[:, k] + logE
        h = np.exp(lj - logsumexp(lj, axis=1, keepdims=True))
        mean[np.ix_(pat.rows, pat.mis)] = np.einsum("nk,knm->nm", h, xbar)
        # exact draws by rejection
        got = np.zeros((n_p, n_draws, m))
        count = np.zeros(n_p, dtype=np.intp)
        spent = np.zeros(n_p, dtype=np.intp)
        last = None
        batch = n_draws
        while True:
            todo = np.flatnonzero((count < n_draws) & (spent < max_proposals))
            if todo.size == 0:
                break
            B = int(max(1, min(batch, max_proposals, _MAX_BATCH_VALUES // (todo.size * m))))  # memory cap
            ks = _categorical(h_mar[todo], B, rng)  # (n_t, B)
            xs = np.empty((todo.size, B, m))
            for k in range(K):
                sel = ks == k
                if sel.any():
                    ii = np.nonzero(sel)[0]
                    z = rng.standard_normal((ii.size, m))
                    xs[sel] = cond[k][1][todo[ii]] + z @ cond[k][2].T
            lkeep = _log_keep(xs, params.a[pat.mis], params.b[pat.mis])
            acc = np.log(rng.random(lkeep.shape)) < lkeep
            for i_loc, i in enumerate(todo):
                take = xs[i_loc][acc[i_loc]][: n_draws - count[i]]
                got[i, count[i]: count[i] + take.shape[0]] = take
                count[i] += take.shape[0]
            spent[todo] += B
            last = (todo, xs, lkeep)
            batch = min(batch * 4, max_proposals)
        short = np.flatnonzero(count < n_draws)
        if short.size:  # SIR fallback on the last batch of proposals
            n_fallback += short.size
            todo, xs, lkeep = last
            where = {int(i): j for j, i in enumerate(todo)}
            for i in short:
                j = where[int(i)]
                p = np.exp(lkeep[j] - logsumexp(lkeep[j]))
                pick = rng.choice(xs.shape[1], size=n_draws - count[i], p=p)
                got[i, count[i]:] = xs[j, pick]
                count[i] = n_draws
        rows = pat.rows
        for j, d in enumerate(pat.mis):
            draws[:, rows, d] = got[:, :, j].T
    if n_fallback:
        warnings.warn(f"{n_fallback} row(s) had an acceptance rate below n_draws / max_proposals; their draws "
                      "come from sampling-importance-resampling (approximate). Raise max_proposals.", RuntimeWarning,
                      stacklevel=2)
    draws[:, ~miss] = np.broadcast_to(Xn[~miss], (n_draws, int((~miss).sum())))
    return draws, mean


def _categorical(probs: np.ndarray, size: int, rng) -> np.ndarray:
    """``size`` component indices per row from the rows of ``probs`` (n, K)."""
    c = np.cumsum(probs, axis=1)
    c[:, -1] = 1.0
    u = rng.random((probs.shape[0], size))
    return (u[:, :, None] > c[:, None, :]).sum(axis=2)
