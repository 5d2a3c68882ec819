r"""MM/CPT-v: a finite multinomial mixture with the CPT-v NMAR selection model, by MAP-EM (Marlin 2008, Section 5.4).

marlin2008 digest, section 4.1, with the identifiability section 2.7 and the errata of Appendix A.

Model (eqs. 5.4.1-5.4.6): :math:`\theta \sim \mathrm{Dir}(\alpha)`, :math:`\beta_{dk} \sim \mathrm{Dir}(\phi)`,
:math:`\mu_v \sim \mathrm{Beta}(\xi_1, \xi_0)`, :math:`z_n \sim \theta`,
:math:`x_{dn} \mid z_n = k \sim \beta_{\cdot dk}` and the selection model
:math:`P(r_{dn} = 1 \mid x_{dn} = v) = \mu_v` (erratum 5.4.6: :math:`x_{dn}`, not :math:`x_{im}`).
``probs[k, d, v]`` stores :math:`\beta_{vdk}`, ``mu[v]`` stores :math:`\mu_v` (codes v = 0..V-1).

Per-entry likelihood factor :math:`\gamma_{dkn}` (5.4.15) for the four (r, a) cases of
:class:`~explorer.core.discrete.ratings_data.RatingData`:

* r=1, a=1: :math:`\beta_{x dk}\,\mu_x`;        r=0, a=1: :math:`\beta_{x dk}\,(1 - \mu_x)`;
* r=1, a=0: :math:`\sum_v \beta_{vdk}\mu_v`;    r=0, a=0: :math:`\sum_v \beta_{vdk}(1 - \mu_v)`.

E-step: :math:`q_n(k) \propto \theta_k \prod_d \gamma_{dkn}` (in log space) and, for an unavailable entry, the
normalised posterior of its value (5.4.18, erratum: it is a posterior, not a joint)
:math:`q_n(k, v, d) = q_n(k)\,\rho^{r_{dn}}_{vdk}` with
:math:`\rho^1_{vdk} = \mu_v\beta_{vdk} / \sum_{v'}\mu_{v'}\beta_{v'dk}` and
:math:`\rho^0_{vdk} = (1-\mu_v)\beta_{vdk} / \sum_{v'}(1-\mu_{v'})\beta_{v'dk}`.

M-step (5.4.20-5.4.23, cleaned up as in the digest; errata 5.4.21-22 :math:`\phi_{vdk}`, and 5.4.19/5.4.23: the
(r=0, a=1) entries are counted in the :math:`\beta` counts and in the :math:`(1-\mu)` counts):

.. math::

    \theta_k = \frac{\alpha - 1 + \sum_n q_n(k)}{N - K + K\alpha},\qquad
    \beta_{vdk} = \frac{\phi - 1 + \sum_n q_n(k)[a_{dn}=1][x_{dn}=v] + q_n(k,v,d)[a_{dn}=0]}{\sum_n q_n(k) - V + V\phi},\qquad
    \mu_v = \frac{\xi_1 - 1 + A_v}{\xi_1 + \xi_0 - 2 + A_v + B_v},

with :math:`A_v` the expected number of (r=1, x=v) entries and :math:`B_v` of (r=0, x=v) entries.

**Vectorisation and memory.** Nothing of size N x D x K x V is ever formed. Because :math:`q_n(k, v, d) =
q_n(k)\rho^{r}_{vdk}` factorises, every expected count is a product of the (N, K) responsibilities with an (N, D)
mask or with the sparse (N, D V) one-hot matrix of the available entries: :math:`\sum_n q_n(k) [a=0][r=1]` is
``q.T @ mask`` (K, D), then times :math:`\rho^1` (K, D, V). The row log-likelihoods are ``onehot @ log(beta)`` (sparse,
O(nnz K)) plus ``mask @ log(S)`` over the unavailable entries (the digest's "precompute over all items, correct over
the r=1 or a=1 entries" trick in matrix form). Memory: O(nnz) for the sparse one-hot (built once per data object and
kept in the state), two (N, D) float masks, O(N K + K D V) for the parameters and counts; time O(nnz K + N D K)
per iteration. (The E-step does not read the data's dense (N, D, V) ``onehot``.)

Objective: the log posterior :math:`\log P(\{x^o_n, r_n\} \mid \theta, \beta, \mu) + \log p(\theta) + \log p(\beta)
+ \log p(\mu)` with normalised Dirichlet / Beta densities (the :math:`\mu` prior is left out when ``mu_fixed`` is
given, CPT-v+); EM never decreases it. Logs of probabilities that reach 0 (possible with priors of exactly 1) are
floored at ``log(1e-300)``.

Also here: CPT-v+ (:func:`mu_from_random_items`, eqs. 5.4.25-5.4.29 with the 5.4.29 erratum), the moment
estimator of :math:`\mu` from the observed marginals (:func:`moment_estimate`, digest 2.7, eq. 5.4.14 with
:math:`\mu_1..\mu_V`), the rating prediction of eq. 5.4.24 (:func:`predict_proba`) with the point prediction
(:func:`predict_median`) and the ranking score (:func:`predict_mean`), and standard errors of :math:`\hat\mu` from
the observed information (:func:`mu_standard_errors`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy.special import gammaln, xlogy

from explorer.core.discrete.rating_metrics import predictive_mean, predictive_median
from explorer.core.discrete.ratings_data import RatingData
from explorer.core.loop import ConvergenceWarning, run_restarts
from explorer.core.validation import BadInputError, check_int, check_nonnegative, check_rng, is_int

__all__ = [
    "CPTvConfig",
    "CPTvState",
    "CPTvResult",
    "ConvergenceWarning",
    "MomentEstimate",
    "init",
    "init_from_parameters",
    "step",
    "fit",
    "log_likelihood_rows",
    "predict_proba",
    "predict_median",
    "predict_mean",
    "mu_from_random_items",
    "moment_estimate",
    "moment_estimate_details",
    "moment_estimate_from_phi",
    "observed_marginals",
    "moment_bootstrap_se",
    "mu_standard_errors",
]

_TINY = 1e-300
_LOG_FLOOR = math.log(_TINY)


def _safe_log(p) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.maximum(np.log(p), _LOG_FLOOR)


def _check_prior(name: str, value) -> float:
    check_nonnegative(name, value)
    if value < 1:
        raise BadInputError(f"{name} must be >= 1 for the MAP estimate to exist (the thesis uses 2); got {value!r}.")
    return float(value)


# --------------------------------------------------------------------------- configuration, state
@dataclass(frozen=True, slots=True)
class CPTvConfig:
    r"""Settings of MM/CPT-v.

    Parameters
    ----------
    n_components : int
        K, the mixture components (the thesis uses 1, 5, 10, 20 on Yahoo!, 5 on Jester).
    alpha, phi : float >= 1
        Symmetric Dirichlet parameters of :math:`\theta` and of every :math:`\beta_{\cdot dk}` (thesis: 2).
    xi1, xi0 : float >= 1
        Beta(:math:`\xi_1, \xi_0`) prior of every :math:`\mu_v` (thesis: 2, 2).
    mu_fixed : sequence of V floats in (0, 1], optional
        CPT-v+: keep :math:`\mu` at these values (e.g. from :func:`mu_from_random_items`) instead of learning it.
    max_iter, tol, n_init
        At most ``max_iter`` EM iterations per restart, stopped when the objective changes by less than ``tol``
        per user; ``n_init`` restarts, the highest log posterior kept (thesis: up to 5000 iterations).
    """

    n_components: int = 5
    alpha: float = 2.0
    phi: float = 2.0
    xi1: float = 2.0
    xi0: float = 2.0
    mu_fixed: tuple | None = None
    max_iter: int = 500
    tol: float = 1e-7
    n_init: int = 1

    def __post_init__(self):
        if not is_int(self.n_components) or self.n_components < 1:
            raise BadInputError(f"n_components must be a positive integer, got {self.n_components!r}.")
        for name in ("alpha", "phi", "xi1", "xi0"):
            _check_prior(name, getattr(self, name))
        check_int("max_iter", self.max_iter, 0)
        check_int("n_init", self.n_init, 1)
        check_nonnegative("tol", self.tol)
        if self.mu_fixed is not None:
            m = np.asarray(self.mu_fixed, dtype=float)
            if m.ndim != 1 or m.size < 2 or not np.all(np.isfinite(m)) or np.any(m <= 0) or np.any(m > 1):
                raise BadInputError(
                    f"mu_fixed must be V >= 2 probabilities in (0, 1] (P(r=1 | x=v)); got {self.mu_fixed!r}.")
            object.__setattr__(self, "mu_fixed", tuple(float(v) for v in m))


@dataclass(frozen=True, eq=False, slots=True)
class CPTvState:
    r"""Parameters after ``iteration`` EM steps, with the E-step at them.

    ``weights`` (K,) :math:`\theta`; ``probs`` (K, D, V) with ``probs[k, d, v]`` = :math:`\beta_{vdk}`; ``mu`` (V,);
    ``resp`` (N, K) :math:`q_n(k)`; ``log_likelihood`` the observed-data log-likelihood of :math:`(x^o, r)`;
    ``objective`` = ``log_likelihood + log_prior``. ``beta_counts`` (K, D, V), ``A`` and ``B`` (V,) are the
    expected counts the next M-step uses (``A[v]``: entries with r=1 and value v; ``B[v]``: r=0 and value v).
    """

    iteration: int
    weights: np.ndarray
    probs: np.ndarray
    mu: np.ndarray
    resp: np.ndarray
    log_likelihood: float
    log_prior: float
    objective: float
    beta_counts: np.ndarray = field(repr=False)
    A: np.ndarray = field(repr=False)
    B: np.ndarray = field(repr=False)
    index: object = field(default=None, repr=False)   # the data's E-step index, reused by step on the same data


@dataclass(frozen=True, eq=False, slots=True)
class CPTvResult:
    state: CPTvState
    converged: bool
    stop_reason: str
    message: str
    n_iter: int
    trace: tuple
    restart_objectives: tuple
    config: CPTvConfig


# --------------------------------------------------------------------------- E-step (shared with logit_vd)
@dataclass(frozen=True, eq=False, slots=True)
class _EStep:
    log_joint: np.ndarray      # (N, K) log theta_k + sum_d log gamma_dkn
    row_loglik: np.ndarray     # (N,)
    resp: np.ndarray           # (N, K)
    beta_counts: np.ndarray    # (K, D, V)
    A: np.ndarray              # (V, D) expected (r=1, x=v) counts per item
    B: np.ndarray              # (V, D) expected (r=0, x=v) counts per item
    rho1: np.ndarray           # (K, D, V)
    rho0: np.ndarray           # (K, D, V)
    index: object = None       # the _Index used


def _value_posteriors(probs: np.ndarray, mu_vd: np.ndarray):
    """rho1, rho0 (K, D, V) of eq. 5.4.18 and the log normalisers log S1, log S0 (K, D)."""
    w1 = probs * mu_vd.T[None]             # beta_vdk mu_vd
    w0 = probs * (1.0 - mu_vd.T)[None]     # beta_vdk (1 - mu_vd)
    s1 = w1.sum(axis=2)
    s0 = w0.sum(axis=2)
    with np.errstate(invalid="ignore", divide="ignore"):
        rho1 = np.where(s1[..., None] > 0, w1 / s1[..., None], 1.0 / probs.shape[2])
        rho0 = np.where(s0[..., None] > 0, w0 / s0[..., None], 1.0 / probs.shape[2])
    return rho1, rho0, _safe_log(s1), _safe_log(s0)


@dataclass(frozen=True, eq=False, slots=True)
class _Index:
    """What the E-step needs from the data, built once per data object (kept in the state and reused by ``step``
    when it is given the same object): the available entries as a sparse (N, D V) one-hot matrix and its
    transpose, their row / item / flat (d, v) indices and r, the (r=1, a=0) and (r=0, a=0) masks, and the counts
    of available (r=1) and (r=0) values per (v, d)."""

    data: RatingData
    oh: object
    oh_t: object
    n_idx: np.ndarray
    flat: np.ndarray
    sel_r: np.ndarray
    m10: np.ndarray
    m00: np.ndarray
    a11: np.ndarray
    a01: np.ndarray


def _index(data: RatingData, cached: _Index | None = None) -> _Index:
    if cached is not None and cached.data is data:
        return cached
    from scipy.sparse import csr_matrix

    N, D, V = data.onehot.shape
    r, a = data.response, data.available
    n_idx, d_idx = np.nonzero(a)
    flat = d_idx * V + data.codes[n_idx, d_idx]
    oh = csr_matrix((np.ones(n_idx.size), (n_idx, flat)), shape=(N, D * V))
    sel_r = r[n_idx, d_idx]
    a11 = np.bincount(flat[sel_r], minlength=D * V).reshape(D, V).T.astype(float)
    a01 = np.bincount(flat[~sel_r], minlength=D * V).reshape(D, V).T.astype(float)
    return _Index(data=data, oh=oh, oh_t=oh.T.tocsr(), n_idx=n_idx, flat=flat, sel_r=sel_r,
                  m10=(r & ~a).astype(float), m00=(~r & ~a).astype(float), a11=a11, a01=a01)


def _e_step(data: RatingData, weights: np.ndarray, probs: np.ndarray, mu_vd: np.ndarray,
            index: _Index | None = None) -> _EStep:
    """E-step of eqs. 5.4.15-5.4.19 (5.6.10-5.6.11 with an item-dependent ``mu_vd`` of shape (V, D))."""
    N, D, V = data.onehot.shape
    K = weights.size
    ix = _index(data, index)
    rho1, rho0, log_s1, log_s0 = _value_posteriors(probs, mu_vd)
    log_beta = _safe_log(probs)                                   # (K, D, V)
    log_joint = (_safe_log(weights)[None, :]
                 + ix.oh @ log_beta.reshape(K, D * V).T           # beta_{x dk} for every available entry
                 + ix.m10 @ log_s1.T + ix.m00 @ log_s0.T)         # the unavailable entries, by r
    # the selection factor of the available entries: the same for every k, but part of the likelihood
    mu_x = mu_vd.T.ravel()[ix.flat]                               # mu_{x d} at the available entries
    sel = np.bincount(ix.n_idx, weights=np.where(ix.sel_r, _safe_log(mu_x), _safe_log(1.0 - mu_x)), minlength=N)
    top = log_joint.max(axis=1, keepdims=True)
    with np.errstate(under="ignore"):
        resp = np.exp(log_joint - top)
    total = resp.sum(axis=1, keepdims=True)
    resp /= total
    row = (top + np.log(total))[:, 0]
    # expected counts
    n10 = resp.T @ ix.m10                                         # (K, D)  sum_n q_n(k) [r=1][a=0]
    n00 = resp.T @ ix.m00                                         # (K, D)  sum_n q_n(k) [r=0][a=0]
    observed = np.asarray(ix.oh_t @ resp).reshape(D, V, K).transpose(2, 0, 1)  # (K, D, V)
    miss1 = n10[..., None] * rho1
    miss0 = n00[..., None] * rho0
    beta_counts = observed + miss1 + miss0
    A = ix.a11 + miss1.sum(axis=0).T
    B = ix.a01 + miss0.sum(axis=0).T
    return _EStep(log_joint=log_joint, row_loglik=row + sel, resp=resp, beta_counts=beta_counts, A=A, B=B,
                  rho1=rho1, rho0=rho0, index=ix)


def _log_dirichlet(p: np.ndarray, conc: float, axis: int = -1) -> float:
    """Sum of log Dir(p | conc, ..., conc) densities along ``axis``."""
    n = p.shape[axis]
    n_dist = p.size // n
    norm = gammaln(n * conc) - n * gammaln(conc)
    return float(n_dist * norm + (xlogy(conc - 1.0, p) if conc != 1 else 0.0 * p).sum())


def _log_beta_density(mu: np.ndarray, a: float, b: float) -> float:
    norm = gammaln(a + b) - gammaln(a) - gammaln(b)
    return float(mu.size * norm + np.sum(xlogy(a - 1.0, mu) + xlogy(b - 1.0, 1.0 - mu)))


def _mixture_log_prior(weights, probs, config) -> float:
    return _log_dirichlet(weights, config.alpha) + _log_dirichlet(probs, config.phi)


def _m_step_mixture(resp: np.ndarray, beta_counts: np.ndarray, alpha: float, phi: float):
    """theta (5.4.20) and beta (5.4.21-22 with the (r=0, a=1) entries counted, errata)."""
    N, K = resp.shape
    V = beta_counts.shape[2]
    nk = resp.sum(axis=0)
    weights = (alpha - 1.0 + nk) / (N - K + K * alpha)
    weights = weights / weights.sum()
    num = phi - 1.0 + beta_counts
    den = num.sum(axis=2, keepdims=True)          # = sum_n q_n(k) - V + V phi
    probs = np.where(den > 0, num / np.where(den > 0, den, 1.0), 1.0 / V)
    return weights, probs


def _mu_update(A: np.ndarray, B: np.ndarray, xi1: float, xi0: float) -> np.ndarray:
    """eq. 5.4.23: mu_v = (xi1 - 1 + A_v) / (xi1 + xi0 - 2 + A_v + B_v) (0.5 when there is no count at all)."""
    num = xi1 - 1.0 + A
    den = xi1 + xi0 - 2.0 + A + B
    return np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.5)


# --------------------------------------------------------------------------- checks
def _check_data(data) -> RatingData:
    if not isinstance(data, RatingData):
        raise BadInputError(f"data must be a RatingData from explorer.core.discrete.ratings_data.prepare; got "
                            f"{type(data).__name__}.")
    return data


def _fixed_mu(config: CPTvConfig, V: int) -> np.ndarray | None:
    if config.mu_fixed is None:
        return None
    if len(config.mu_fixed) != V:
        raise BadInputError(f"mu_fixed has {len(config.mu_fixed)} values but the data have V={V} levels.")
    return np.array(config.mu_fixed)


# --------------------------------------------------------------------------- states
def _state(data: RatingData, config: CPTvConfig, iteration: int, weights, probs, mu, index=None) -> CPTvState:
    V, D = data.n_values, data.n_features
    e = _e_step(data, weights, probs, np.broadcast_to(mu[:, None], (V, D)), index)
    ll = float(e.row_loglik.sum())
    lp = _mixture_log_prior(weights, probs, config)
    if config.mu_fixed is None:
        lp += _log_beta_density(mu, config.xi1, config.xi0)
    A, B = e.A.sum(axis=1), e.B.sum(axis=1)
    for arr in (weights, probs, mu, e.resp, e.beta_counts, A, B):
        arr.setflags(write=False)
    return CPTvState(iteration=iteration, weights=weights, probs=probs, mu=mu, resp=e.resp, log_likelihood=ll,
                     log_prior=lp, objective=ll + lp, beta_counts=e.beta_counts, A=A, B=B, index=e.index)


def init(data: RatingData, config: CPTvConfig, rng: np.random.Generator) -> CPTvState:
    r"""Random start: responsibilities drawn uniformly on (0.5, 1.5) and normalised, :math:`\beta` from the
    available values weighted by them (plus one pseudo-count), :math:`\theta` their normalised sums, :math:`\mu`
    = ``mu_fixed`` or the overall selection rate (MCAR start) for every v; then the E-step."""
    data = _check_data(data)
    check_rng(rng)
    K, V = config.n_components, data.n_values
    mu0 = _fixed_mu(config, V)
    q = rng.uniform(0.5, 1.5, size=(data.n_samples, K))
    q /= q.sum(axis=1, keepdims=True)
    counts = np.einsum("ndv,nk->kdv", data.onehot, q) + 1.0
    probs = counts / counts.sum(axis=2, keepdims=True)
    weights = q.sum(axis=0) / q.sum()
    if mu0 is None:
        rate = float(np.clip(data.response.mean(), 0.05, 0.95))
        mu0 = np.full(V, rate)
    return _state(data, config, 0, weights, probs, mu0)


def init_from_parameters(data: RatingData, config: CPTvConfig, weights, probs, mu) -> CPTvState:
    """The state at iteration 0 at given parameters (validated, copied): ``weights`` (K,), ``probs`` (K, D, V),
    ``mu`` (V,). Used for the oracle tests and to continue a fit."""
    data = _check_data(data)
    K, D, V = config.n_components, data.n_features, data.n_values
    w, p, m = (np.array(x, dtype=float) for x in (weights, probs, mu))
    if w.shape != (K,) or p.shape != (K, D, V) or m.shape != (V,):
        raise BadInputError(f"Parameters have shapes {w.shape}, {p.shape}, {m.shape}; expected {(K,)}, "
                            f"{(K, D, V)}, {(V,)}.")
    if np.any(w < 0) or not np.isclose(w.sum(), 1.0) or np.any(p < 0) or not np.allclose(p.sum(axis=2), 1.0):
        raise BadInputError("weights must be a probability vector and probs[k, d] probability vectors over v.")
    if np.any(m < 0) or np.any(m > 1):
        raise BadInputError(f"mu must lie in [0, 1]; got {m}.")
    return _state(data, config, 0, w, p, m)


def step(state: CPTvState, data: RatingData, config: CPTvConfig) -> CPTvState:
    """One EM iteration: the M-step (5.4.20-5.4.23) from the state's expected counts, then the E-step. Pure."""
    weights, probs = _m_step_mixture(np.asarray(state.resp), np.asarray(state.beta_counts), config.alpha, config.phi)
    mu = _fixed_mu(config, data.n_values)
    if mu is None:
        mu = _mu_update(np.asarray(state.A), np.asarray(state.B), config.xi1, config.xi0)
    return _state(data, config, state.iteration + 1, weights, probs, mu, state.index)


def _snapshot(state: CPTvState) -> dict:
    return {"iteration": state.iteration, "log_likelihood": state.log_likelihood, "objective": state.objective,
            "weights": np.array(state.weights), "mu": np.array(state.mu)}


def fit(data: RatingData, config: CPTvConfig, rng: np.random.Generator, *,
        callback: Callable[[CPTvState], None] | None = None, init_state: CPTvState | None = None) -> CPTvResult:
    """``config.n_init`` restarts of a loop over :func:`step`; the highest log posterior is kept."""
    data = _check_data(data)
    check_rng(rng)
    n = max(data.n_samples, 1)
    out = run_restarts(
        n_runs=1 if init_state is not None else config.n_init,
        start=lambda: init_state if init_state is not None else init(data, config, rng),
        step=lambda s: step(s, data, config),
        snapshot=_snapshot,
        change=lambda old, new: (new.objective - old.objective) / n,
        max_iter=config.max_iter,
        tol=config.tol,
        callback=callback,
    )
    return CPTvResult(state=out.state, converged=out.stop_reason == "tol", stop_reason=out.stop_reason,
                      message=out.message, n_iter=out.state.iteration, trace=out.trace,
                      restart_objectives=out.restart_objectives, config=config)


# --------------------------------------------------------------------------- prediction
def _params(state, data: RatingData):
    state = getattr(state, "state", state)   # a CPTvResult works too
    if not hasattr(state, "probs") or not hasattr(state, "mu"):
        raise BadInputError(f"Expected a CPTvState or CPTvResult; got {type(state).__name__}.")
    data = _check_data(data)
    K, D, V = state.probs.shape
    if (data.n_features, data.n_values) != (D, V):
        raise BadInputError(f"The data have D={data.n_features} items and V={data.n_values} levels, but the model "
                            f"was fitted with D={D}, V={V}.")
    mu = np.asarray(state.mu, dtype=float)
    mu_vd = np.broadcast_to(mu[:, None], (V, D)) if mu.ndim == 1 else mu
    return np.asarray(state.weights), np.asarray(state.probs), mu_vd


def _predict(data: RatingData, weights, probs, mu_vd) -> np.ndarray:
    e = _e_step(data, weights, probs, mu_vd)
    N, D, V = data.onehot.shape
    K = weights.size
    p1 = (e.resp @ e.rho1.reshape(K, D * V)).reshape(N, D, V)
    p0 = (e.resp @ e.rho0.reshape(K, D * V)).reshape(N, D, V)
    out = np.where(data.response[..., None], p1, p0)
    out[data.available] = data.onehot[data.available]
    return out


def log_likelihood_rows(state, data: RatingData) -> np.ndarray:
    """Per-row observed-data log-likelihood :math:`\\log P(x^o_n, r_n)` (eq. 5.4.9) at the state's parameters."""
    weights, probs, mu_vd = _params(state, data)
    return _e_step(data, weights, probs, mu_vd).row_loglik


def predict_proba(state, data: RatingData) -> np.ndarray:
    r"""Predictive distribution (N, D, V) of every entry, eq. 5.4.24:

    .. math::

        P(x_{dn} = v \mid x^o_n, r_n) = \sum_k q_n(k)\,[\rho^1_{vdk}]^{[r_{dn}=1]}\,[\rho^0_{vdk}]^{[r_{dn}=0]},

    with :math:`q_n(k)` from the row's available entries **and its response vector** (so it depends on
    :math:`r_{dn}`: a user-selected held-out item and a non-selected item get different predictions). Parameters are
    held fixed, so the same call serves training rows (weak generalisation) and new rows (strong generalisation).
    Available entries get the point mass on their known value (the distribution given the available entries).
    ``state`` is a :class:`CPTvState` or :class:`CPTvResult`.
    """
    return _predict(data, *_params(state, data))


#: The point prediction of the thesis (Section 5.4, the median code) and the ranking score (NDCG, the mean code):
#: the same functions as :mod:`explorer.core.discrete.rating_metrics` (codes 0..V-1; add 1 for ratings 1..V).
predict_median = predictive_median
predict_mean = predictive_mean


# --------------------------------------------------------------------------- CPT-v+
def mu_from_random_items(data: RatingData, rows=None, *, floor: float = 0.0) -> np.ndarray:
    r"""CPT-v+ selection model from random-item ratings, eqs. 5.4.25-5.4.29 (erratum 5.4.29 applied):

    .. math::

        \mu_v = \frac{P(x=v \mid r=1) P(r=1)}{P(x=v \mid r=1) P(r=1) + P(x=v \mid r=0) P(r=0)},

    with :math:`P(r=1)` the fraction of the rows' entries with r=1 (available or not), :math:`P(x=v \mid r=1)` the
    histogram of the (r=1, a=1) values and :math:`P(x=v \mid r=0)` that of the (r=0, a=1) values (the random items
    the user would not have chosen; the printed denominator counts [r=1][a=0], the erratum says [r=0][a=1]).

    ``rows``: the held-out users to use (indices or a boolean mask); default every row with at least one
    (r=0, a=1) entry. A level never seen among the random items gets :math:`\mu_v = 1` (it is then estimated
    as always selected); a level seen nowhere gets NaN, and a :class:`BadInputError` is raised for it.

    ``floor``: the estimates are raised to at least this value. A level that no user selected is estimated
    at :math:`\mu_v = 0` (e.g. rating 1 under the linear value effect at s = 0.25), which
    ``CPTvConfig(mu_fixed=...)`` refuses (a zero makes such a value impossible to observe, and its log
    undefined); pass e.g. ``floor=1e-3`` to use the estimate there.
    """
    data = _check_data(data)
    r, a = data.response, data.available
    if rows is None:
        sel = np.any(~r & a, axis=1)
    else:
        idx = np.asarray(rows)
        sel = np.zeros(data.n_samples, dtype=bool)
        try:
            sel[idx] = True
        except (IndexError, ValueError):
            raise BadInputError(f"rows must index the {data.n_samples} rows of the data (indices or a mask).") \
                from None
    if not np.any(~r[sel] & a[sel]):
        raise BadInputError("mu_from_random_items needs ratings of random items the users did not select "
                            "(entries with response=False and available=True) in the chosen rows; there are none.")
    if not np.any(r[sel] & a[sel]):
        raise BadInputError("mu_from_random_items needs user-selected ratings (response=True, available=True) in "
                            "the chosen rows; there are none.")
    oh = data.onehot[sel]
    c1 = np.einsum("ndv,nd->v", oh, (r & a)[sel].astype(float))
    c0 = np.einsum("ndv,nd->v", oh, (~r & a)[sel].astype(float))
    p_r1 = float(r[sel].mean())
    num = c1 / c1.sum() * p_r1
    den = num + c0 / c0.sum() * (1.0 - p_r1)
    if np.any(den == 0):
        missing = np.flatnonzero(den == 0).tolist()
        raise BadInputError(f"mu_from_random_items: level(s) (codes) {missing} occur in no rating of the chosen "
                            "rows, so their mu cannot be estimated; use more held-out users.")
    check_nonnegative("floor", floor)
    if floor >= 1:
        raise BadInputError(f"floor must be below 1 (it is a lower bound on probabilities); got {floor!r}.")
    return np.maximum(num / den, floor)


# --------------------------------------------------------------------------- moment estimator
@dataclass(frozen=True, eq=False, slots=True)
class MomentEstimate:
    r"""The moment estimator of :math:`\mu` (digest 2.7, eq. 5.4.14).

    ``mu`` (V,) = 1 / ``inverse_mu``, the least-squares solution of :math:`\Phi y = 1` over all items;
    ``condition_number`` of :math:`\Phi` (D, V) (ratio of extreme singular values, as ``numpy.linalg.cond``);
    ``block_condition_number`` of the best-conditioned V x V block of V items, ``block_items`` those items and
    ``block_search`` how they were found ("exhaustive" over all item subsets, or "pivoted-qr", a greedy choice,
    when there are more than 3003 subsets, or "skipped"); ``valid`` is False when some :math:`\mu_v` falls outside (0, 1]
    (a misspecified model or too little data); ``residual`` = ``max(abs(Phi @ y - 1))``; ``phi`` the marginals used.
    """

    mu: np.ndarray
    inverse_mu: np.ndarray
    condition_number: float
    block_condition_number: float
    block_items: tuple
    block_search: str
    valid: bool
    residual: float
    phi: np.ndarray


def observed_marginals(data: RatingData) -> np.ndarray:
    r""":math:`\Phi(d, v) = P(w_d = v) = P(r_d = 1, x_d = v)` (D, V), estimated from all rows.

    :math:`P(r_d = 1)` counts every entry with r=1 (also held-out ones, a=0); the value distribution among selected
    entries comes from the (r=1, a=1) entries (held-out selected entries are assumed a random subset of the
    selected ones): :math:`\hat\Phi(d, v) = \hat P(r_d=1)\,\#\{r=1, a=1, x=v\} / \#\{r=1, a=1\}` for item d.
    (r=0) entries, available or not, are :math:`w_d = \emptyset`.
    """
    data = _check_data(data)
    r, a = data.response, data.available
    counts = np.einsum("ndv,nd->dv", data.onehot, (r & a).astype(float))
    n_sel = counts.sum(axis=1, keepdims=True)
    p_r1 = r.mean(axis=0)[:, None]
    return np.where(n_sel > 0, p_r1 * counts / np.where(n_sel > 0, n_sel, 1.0), 0.0)


def _best_block(phi: np.ndarray, max_subsets: int = 3003):
    D, V = phi.shape
    if D < V:
        return math.inf, (), "none"
    if math.comb(D, V) <= max_subsets:
        best, items = math.inf, ()
        for sub in itertools.combinations(range(D), V):
            c = float(np.linalg.cond(phi[list(sub)]))
            if c < best:
                best, items = c, sub
        return best, tuple(int(i) for i in items), "exhaustive"
    from scipy.linalg import qr

    _, _, piv = qr(phi.T, pivoting=True, mode="economic")
    items = tuple(sorted(int(i) for i in piv[:V]))
    return float(np.linalg.cond(phi[list(items)])), items, "pivoted-qr"


def moment_estimate_from_phi(phi, *, best_block: bool = True) -> MomentEstimate:
    r"""Solve :math:`\sum_v \Phi(d, v)/\mu_v = 1` for every item d (eq. 5.4.14, Glonek's 5.4.10 when D = V = 2)
    by least squares (``numpy.linalg.lstsq``). ``phi`` (D, V) with D >= V (D = V: the exact solve).

    ``best_block=False`` skips the search for the best-conditioned V x V block (``block_condition_number`` NaN,
    ``block_items`` empty, ``block_search`` "skipped"): up to 3003 condition numbers, e.g. D = 15, V = 5."""
    p = np.asarray(phi, dtype=float)
    if p.ndim != 2 or p.shape[1] < 2 or p.shape[0] < p.shape[1]:
        raise BadInputError(f"phi must be a (D, V) matrix with D >= V >= 2 (at least V items); got shape {p.shape}.")
    if not np.all(np.isfinite(p)) or np.any(p < 0) or np.any(p.sum(axis=1) > 1 + 1e-9):
        raise BadInputError("phi must hold probabilities P(w_d = v) >= 0 with sum_v phi[d, v] <= 1 for every item.")
    y, *_ = np.linalg.lstsq(p, np.ones(p.shape[0]), rcond=None)
    with np.errstate(divide="ignore"):
        mu = np.where(y != 0, 1.0 / y, np.inf)
    valid = bool(np.all(np.isfinite(mu)) and np.all(mu > 0) and np.all(mu <= 1.0 + 1e-9))
    block_cond, items, how = _best_block(p) if best_block else (math.nan, (), "skipped")
    return MomentEstimate(mu=mu, inverse_mu=y, condition_number=float(np.linalg.cond(p)),
                          block_condition_number=block_cond, block_items=items, block_search=how, valid=valid,
                          residual=float(np.max(np.abs(p @ y - 1.0))), phi=p)


def moment_estimate_details(data: RatingData, *, best_block: bool = True) -> MomentEstimate:
    """:func:`moment_estimate_from_phi` on the empirical marginals :func:`observed_marginals` of ``data``."""
    data = _check_data(data)
    if data.n_features < data.n_values:
        raise BadInputError(f"The moment estimator needs at least V={data.n_values} items; the data have "
                            f"{data.n_features}.")
    return moment_estimate_from_phi(observed_marginals(data), best_block=best_block)


def moment_estimate(data: RatingData) -> tuple[np.ndarray, float]:
    r"""``(mu, condition_number)``: the moment estimate of :math:`\mu` from the observed marginals
    (:math:`\Phi [1/\mu] = 1`, least squares over all items) and the condition number of :math:`\Phi`. See
    :func:`moment_estimate_details` for the validity flag and the best V x V block (not searched here, so this
    costs one least-squares solve and one SVD)."""
    est = moment_estimate_details(data, best_block=False)
    return est.mu, est.condition_number


def moment_bootstrap_se(data: RatingData, rng: np.random.Generator, n_boot: int = 200) -> np.ndarray:
    r"""Bootstrap standard errors (V,) of the moment estimate: ``n_boot`` resamples of the rows (users) with
    replacement, :math:`\hat\Phi` and the least-squares :math:`\mu` recomputed on each; the standard deviation
    over resamples. Resamples whose solution is not finite are dropped (NaN if all are)."""
    data = _check_data(data)
    check_rng(rng)
    check_int("n_boot", n_boot, 2)
    N, D, V = data.onehot.shape
    if D < V:
        raise BadInputError(f"The moment estimator needs at least V={V} items; the data have {D}.")
    r, a = data.response, data.available
    sel = (r & a)
    oh11 = data.onehot.reshape(N, D * V) * np.repeat(sel, V, axis=1)
    W = rng.multinomial(N, np.full(N, 1.0 / N), size=n_boot).astype(float)    # (B, N) resampling weights
    counts = (W @ oh11).reshape(n_boot, D, V)
    p_r1 = (W @ r.astype(float)) / N                                           # (B, D)
    n_sel = counts.sum(axis=2, keepdims=True)
    phi = np.where(n_sel > 0, p_r1[..., None] * counts / np.where(n_sel > 0, n_sel, 1.0), 0.0)
    mus = []
    for b in range(n_boot):
        y, *_ = np.linalg.lstsq(phi[b], np.ones(D), rcond=None)
        with np.errstate(divide="ignore"):
            m = 1.0 / y
        if np.all(np.isfinite(m)):
            mus.append(m)
    if not mus:
        return np.full(V, np.nan)
    return np.std(np.array(mus), axis=0, ddof=1)


# --------------------------------------------------------------------------- standard errors
def _free_to_params(eta: np.ndarray, K: int, D: int, V: int):
    a = np.concatenate([eta[:K - 1], [0.0]])
    b = np.concatenate([eta[K - 1:K - 1 + K * D * (V - 1)].reshape(K, D, V - 1), np.zeros((K, D, 1))], axis=2)
    m = eta[K - 1 + K * D * (V - 1):]
    weights = np.exp(a - a.max())
    weights /= weights.sum()
    probs = np.exp(b - b.max(axis=2, keepdims=True))
    probs /= probs.sum(axis=2, keepdims=True)
    mu = 1.0 / (1.0 + np.exp(-m))
    return weights, probs, mu


def _free_gradient(eta, data: RatingData, config: CPTvConfig, K: int, index=None) -> np.ndarray:
    """Exact gradient of the log posterior in the free parameters (Fisher's identity: the expected complete-data
    gradient under the E-step posterior at the same parameters)."""
    D, V = data.n_features, data.n_values
    weights, probs, mu = _free_to_params(eta, K, D, V)
    e = _e_step(data, weights, probs, np.broadcast_to(mu[:, None], (V, D)), index)
    nk = e.resp.sum(axis=0)
    g_a = (nk - nk.sum() * weights) + (config.alpha - 1.0) * (1.0 - K * weights)
    g_b = (e.beta_counts - e.beta_counts.sum(axis=2, keepdims=True) * probs) + (config.phi - 1.0) * (1.0 - V * probs)
    A, B = e.A.sum(axis=1), e.B.sum(axis=1)
    g_m = A * (1.0 - mu) - B * mu + (config.xi1 - 1.0) * (1.0 - mu) - (config.xi0 - 1.0) * mu
    return np.concatenate([g_a[:K - 1], g_b[:, :, :V - 1].ravel(), g_m])


def mu_standard_errors(state, data: RatingData, config: CPTvConfig, *, step_size: float = 1e-5) -> np.ndarray:
    r"""Standard errors of :math:`\hat\mu` (V,) from the observed information at the MAP estimate.

    The log posterior is written in free parameters (softmax logits of :math:`\theta` and of every
    :math:`\beta_{\cdot dk}` with the last one fixed at 0, logits of :math:`\mu`); its exact gradient comes from
    Fisher's identity (the E-step expected counts), its Hessian H from central differences of that gradient,
    and the covariance of the logits of :math:`\mu` is the corresponding block of :math:`(-H)^{-1}` (a linear solve,
    so the uncertainty of :math:`\theta, \beta` is accounted for). The delta method then gives
    :math:`\mathrm{se}(\mu_v) = \mu_v(1 - \mu_v)\,\mathrm{se}(\mathrm{logit}\,\mu_v)`. A Laplace approximation:
    valid near a well-separated maximum, with all parameters strictly inside their simplices. Not for CPT-v+.
    """
    if config.mu_fixed is not None:
        raise BadInputError("mu is fixed (CPT-v+): it has no standard error from this fit.")
    weights, probs, mu_vd = _params(state, data)
    mu = np.asarray(getattr(state, "state", state).mu, dtype=float)
    if mu.ndim != 1 or np.any(mu <= 0) or np.any(mu >= 1) or np.any(probs <= 0) or np.any(weights <= 0):
        raise BadInputError("Standard errors need every probability strictly inside (0, 1).")
    K, D, V = probs.shape
    lw = np.log(weights)
    lb = np.log(probs)
    eta = np.concatenate([(lw - lw[-1])[:K - 1], (lb - lb[:, :, -1:])[:, :, :V - 1].ravel(),
                          np.log(mu) - np.log1p(-mu)])
    n = eta.size
    ix = _index(data, getattr(getattr(state, "state", state), "index", None))
    H = np.empty((n, n))
    for i in range(n):
        e_i = np.zeros(n)
        e_i[i] = step_size
        up = _free_gradient(eta + e_i, data, config, K, ix)
        H[:, i] = (up - _free_gradient(eta - e_i, data, config, K, ix)) / (2 * step_size)
    H = 0.5 * (H + H.T)
    rhs = np.zeros((n, V))
    rhs[n - V:, :] = np.eye(V)
    cov = np.linalg.solve(-H, rhs)[n - V:, :]
    var = np.diag(cov)
    if np.any(var <= 0):
        raise BadInputError("The observed information is not positive definite at this state (not a maximum?); "
                            "run the EM longer.")
    return mu * (1.0 - mu) * np.sqrt(var)
