r"""MM/Logit-vd: a finite multinomial mixture with the Logit-vd NMAR selection model, by generalised EM
(Marlin 2008, Section 5.6; digest section 4.3).

Selection model (eq. 5.6.1): :math:`\mu_{vd} = P(r_{dn} = 1 \mid x_{dn} = v) = \mathrm{sigmoid}(\sigma_v + \omega_d)`,
a value effect :math:`\sigma_v` shared by all items plus an item effect :math:`\omega_d`, with the priors
:math:`\sigma_v \sim N(\xi, \tau^2)`, :math:`\omega_d \sim N(\nu, \rho^2)` (5.6.4; thesis: N(0, 10^2), erratum
5.6.16-17: :math:`\rho^2`, not :math:`\gamma^2`). The mixture part and its priors are those of
:mod:`explorer.core.discrete.cpt_v`; with every :math:`\omega_d` equal the model is CPT-v with
:math:`\mu_v = \mathrm{sigmoid}(\sigma_v + \omega)`.

E-step (5.6.10-5.6.11): the CPT-v E-step with :math:`\mu_v` replaced by :math:`\mu_{vd}` (shared code,
:func:`explorer.core.discrete.cpt_v._e_step`), giving :math:`q_n(k)`, the normalised value posteriors and the
expected counts

.. math::

    A_{vd} = \sum_n [r=1][a=1][x=v] + q_n(v, d)[r=1][a=0],\qquad
    B_{vd} = \sum_n q_n(v, d)[r=0][a=0] + [r=0][a=1][x=v]

(the last term of :math:`B` is erratum 5.4.19/5.4.23: available non-selected entries count as r=0).

M-step: :math:`\theta`, :math:`\beta` in closed form (as CPT-v). :math:`\sigma, \omega` have no closed form; the
expected complete log posterior in them,

.. math::

    Q(\sigma, \omega) = \sum_{vd} A_{vd}\log\mu_{vd} + B_{vd}\log(1 - \mu_{vd})
        - \sum_v \frac{(\sigma_v - \xi)^2}{2\tau^2} - \sum_d \frac{(\omega_d - \nu)^2}{2\rho^2},

is concave, with the gradient of the digest's A/B form, :math:`\partial Q/\partial\sigma_v = \sum_d [A_{vd}(1 - \mu_{vd})
- B_{vd}\mu_{vd}] - (\sigma_v - \xi)/\tau^2` (and the same sum over v for :math:`\omega_d`). Each
M-step takes ``n_newton`` full Newton steps in :math:`(\sigma, \omega)` jointly (the Hessian is an
arrow matrix: diagonal blocks plus the V x D coupling, solved through a V x V Schur complement), each step halved
until Q does not decrease. (Block-coordinate Newton, sigma then omega, was tried first: it crawls along the
shift direction :math:`\sigma + c, \omega - c` that only the priors pin down.) Q therefore never decreases, and
neither does the log posterior (generalised EM).

Initialisation (thesis): every :math:`\sigma_v` the same small random value, each :math:`\omega_d` a different small
random value (the model is unstable when the :math:`\sigma_v` start out different).

API as :mod:`explorer.core.discrete.cpt_v`: :class:`LogitVdConfig`, :func:`init`, :func:`step`, :func:`fit`,
:func:`predict_proba` (eq. 5.6.18, depends on :math:`r_{dn}`), :func:`log_likelihood_rows`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from explorer.core.discrete.cpt_v import (
    _check_data,
    _check_prior,
    _e_step,
    _m_step_mixture,
    _mixture_log_prior,
    _predict,
)
from explorer.core.discrete.ratings_data import RatingData
from explorer.core.loop import ConvergenceWarning, run_restarts
from explorer.core.validation import BadInputError, check_int, check_nonnegative, check_rng, is_int

__all__ = [
    "LogitVdConfig",
    "LogitVdState",
    "LogitVdResult",
    "ConvergenceWarning",
    "sigmoid",
    "init",
    "init_from_parameters",
    "step",
    "fit",
    "log_likelihood_rows",
    "predict_proba",
]


def sigmoid(t):
    """The logistic function 1 / (1 + exp(-t)), computed without overflow."""
    t = np.asarray(t, dtype=float)
    return np.exp(-np.logaddexp(0.0, -t))


def _log_sig(t):
    return -np.logaddexp(0.0, -t)


@dataclass(frozen=True, slots=True)
class LogitVdConfig:
    r"""Settings of MM/Logit-vd.

    Parameters
    ----------
    n_components, alpha, phi
        As :class:`explorer.core.discrete.cpt_v.CPTvConfig`.
    sigma_mean, sigma_sd : float
        :math:`\xi` and :math:`\tau` of the N(:math:`\xi, \tau^2`) prior of every :math:`\sigma_v` (thesis: 0, 10).
    omega_mean, omega_sd : float
        :math:`\nu` and :math:`\rho` of the prior of every :math:`\omega_d` (thesis: 0, 10).
    n_newton : int
        Newton steps on (sigma, omega) per M-step (>= 1).
    init_scale : float
        Standard deviation of the small random starting values of sigma and omega.
    max_iter, tol, n_init
        As CPT-v.
    """

    n_components: int = 5
    alpha: float = 2.0
    phi: float = 2.0
    sigma_mean: float = 0.0
    sigma_sd: float = 10.0
    omega_mean: float = 0.0
    omega_sd: float = 10.0
    n_newton: int = 3
    init_scale: float = 0.1
    max_iter: int = 500
    tol: float = 1e-7
    n_init: int = 1

    def __post_init__(self):
        if not is_int(self.n_components) or self.n_components < 1:
            raise BadInputError(f"n_components must be a positive integer, got {self.n_components!r}.")
        for name in ("alpha", "phi"):
            _check_prior(name, getattr(self, name))
        for name in ("sigma_mean", "omega_mean"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
                    or not np.isfinite(value):
                raise BadInputError(f"{name} must be a finite number, got {value!r}.")
        for name in ("sigma_sd", "omega_sd"):
            value = getattr(self, name)
            check_nonnegative(name, value)
            if value <= 0:
                raise BadInputError(f"{name} must be > 0 (a prior standard deviation), got {value!r}.")
        check_nonnegative("init_scale", self.init_scale)
        check_int("n_newton", self.n_newton, 1)
        check_int("max_iter", self.max_iter, 0)
        check_int("n_init", self.n_init, 1)
        check_nonnegative("tol", self.tol)


@dataclass(frozen=True, eq=False, slots=True)
class LogitVdState:
    r"""Parameters after ``iteration`` generalised-EM steps, with the E-step at them.

    ``weights`` (K,), ``probs`` (K, D, V) [``probs[k, d, v]`` = :math:`\beta_{vdk}`], ``sigma`` (V,), ``omega`` (D,),
    ``mu`` (V, D) with ``mu[v, d]`` = :math:`P(r=1 \mid x=v)` for item d, ``resp`` (N, K); ``objective`` = the
    log posterior = ``log_likelihood + log_prior``. ``beta_counts`` (K, D, V), ``A``, ``B`` (V, D) are the expected
    counts the next M-step uses.
    """

    iteration: int
    weights: np.ndarray
    probs: np.ndarray
    sigma: np.ndarray
    omega: np.ndarray
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
class LogitVdResult:
    state: LogitVdState
    converged: bool
    stop_reason: str
    message: str
    n_iter: int
    trace: tuple
    restart_objectives: tuple
    config: LogitVdConfig


def _log_normal(x: np.ndarray, mean: float, sd: float) -> float:
    return float(np.sum(-0.5 * ((x - mean) / sd) ** 2 - math.log(sd) - 0.5 * math.log(2 * math.pi)))


def _state(data: RatingData, config: LogitVdConfig, iteration: int, weights, probs, sigma, omega,
           index=None) -> LogitVdState:
    mu = sigmoid(sigma[:, None] + omega[None, :])
    e = _e_step(data, weights, probs, mu, index)
    ll = float(e.row_loglik.sum())
    lp = (_mixture_log_prior(weights, probs, config) + _log_normal(sigma, config.sigma_mean, config.sigma_sd)
          + _log_normal(omega, config.omega_mean, config.omega_sd))
    for arr in (weights, probs, sigma, omega, mu, e.resp, e.beta_counts, e.A, e.B):
        arr.setflags(write=False)
    return LogitVdState(iteration=iteration, weights=weights, probs=probs, sigma=sigma, omega=omega, mu=mu,
                        resp=e.resp, log_likelihood=ll, log_prior=lp, objective=ll + lp,
                        beta_counts=e.beta_counts, A=e.A, B=e.B, index=e.index)


def _q_terms(A, B, eta):
    """A log sigmoid(eta) + B log(1 - sigmoid(eta)), elementwise (V, D)."""
    return A * _log_sig(eta) + B * _log_sig(-eta)


def _q_selection(sigma, omega, A, B, config: LogitVdConfig) -> float:
    """Q(sigma, omega): the expected complete log posterior in the selection parameters (up to constants)."""
    eta = sigma[:, None] + omega[None, :]
    return float(_q_terms(A, B, eta).sum() - 0.5 * np.sum(((sigma - config.sigma_mean) / config.sigma_sd) ** 2)
                 - 0.5 * np.sum(((omega - config.omega_mean) / config.omega_sd) ** 2))


def _newton_direction(sigma, omega, A, B, config: LogitVdConfig):
    r"""The Newton direction of Q in (sigma, omega). With :math:`W_{vd} = (A_{vd} + B_{vd})\mu_{vd}(1 - \mu_{vd})`,
    :math:`-
abla^2 Q = [[\mathrm{diag}(W 1 + 1/	au^2), W], [W^T, \mathrm{diag}(W^T 1 + 1/
ho^2)]]` (positive
    definite); it is solved through the Schur complement of the diagonal omega block, a V x V Cholesky solve, so the
    cost is O(V^2 D + V^3) and no inverse is formed."""
    from scipy.linalg import cho_factor, cho_solve

    m = sigmoid(sigma[:, None] + omega[None, :])
    resid = A * (1.0 - m) - B * m
    g_s = resid.sum(axis=1) - (sigma - config.sigma_mean) / config.sigma_sd ** 2
    g_w = resid.sum(axis=0) - (omega - config.omega_mean) / config.omega_sd ** 2
    W = (A + B) * m * (1.0 - m)
    d_s = W.sum(axis=1) + 1.0 / config.sigma_sd ** 2
    d_w = W.sum(axis=0) + 1.0 / config.omega_sd ** 2
    schur = np.diag(d_s) - (W / d_w[None, :]) @ W.T
    x = cho_solve(cho_factor(schur), g_s - W @ (g_w / d_w))
    y = (g_w - W.T @ x) / d_w
    return x, y


def _m_step_selection(sigma, omega, A, B, config: LogitVdConfig):
    """``n_newton`` Newton steps on Q(sigma, omega) with step halving until Q does not decrease (Q is concave, so
    the full step is usually taken; a step that cannot be made to increase Q is skipped)."""
    s, w = np.array(sigma, dtype=float), np.array(omega, dtype=float)
    q0 = _q_selection(s, w, A, B, config)
    for _ in range(config.n_newton):
        ds, dw = _newton_direction(s, w, A, B, config)
        t = 1.0
        for _ in range(30):
            q1 = _q_selection(s + t * ds, w + t * dw, A, B, config)
            if q1 >= q0:
                s, w, q0 = s + t * ds, w + t * dw, q1
                break
            t *= 0.5
        else:
            break
    return s, w


def init(data: RatingData, config: LogitVdConfig, rng: np.random.Generator) -> LogitVdState:
    r"""Random start (thesis): responsibilities uniform on (0.5, 1.5) normalised, :math:`\beta` from the available
    values weighted by them (plus one), all :math:`\sigma_v` equal to one N(0, ``init_scale ** 2``) draw, each
    :math:`\omega_d` its own draw; then the E-step."""
    data = _check_data(data)
    check_rng(rng)
    K, D, V = config.n_components, data.n_features, data.n_values
    q = rng.uniform(0.5, 1.5, size=(data.n_samples, K))
    q /= q.sum(axis=1, keepdims=True)
    counts = np.einsum("ndv,nk->kdv", data.onehot, q) + 1.0
    probs = counts / counts.sum(axis=2, keepdims=True)
    weights = q.sum(axis=0) / q.sum()
    sigma = np.full(V, rng.normal(0.0, config.init_scale))
    omega = rng.normal(0.0, config.init_scale, size=D)
    return _state(data, config, 0, weights, probs, sigma, omega)


def init_from_parameters(data: RatingData, config: LogitVdConfig, weights, probs, sigma, omega) -> LogitVdState:
    """The state at iteration 0 at given parameters (validated, copied)."""
    data = _check_data(data)
    K, D, V = config.n_components, data.n_features, data.n_values
    w, p, s, o = (np.array(x, dtype=float) for x in (weights, probs, sigma, omega))
    if w.shape != (K,) or p.shape != (K, D, V) or s.shape != (V,) or o.shape != (D,):
        raise BadInputError(f"Parameters have shapes {w.shape}, {p.shape}, {s.shape}, {o.shape}; expected {(K,)}, "
                            f"{(K, D, V)}, {(V,)}, {(D,)}.")
    if np.any(w < 0) or not np.isclose(w.sum(), 1.0) or np.any(p < 0) or not np.allclose(p.sum(axis=2), 1.0):
        raise BadInputError("weights must be a probability vector and probs[k, d] probability vectors over v.")
    if not (np.all(np.isfinite(s)) and np.all(np.isfinite(o))):
        raise BadInputError("sigma and omega must be finite.")
    return _state(data, config, 0, w, p, s, o)


def step(state: LogitVdState, data: RatingData, config: LogitVdConfig) -> LogitVdState:
    """One generalised-EM iteration: closed-form theta and beta, Newton rounds on sigma and omega that do not
    decrease Q, then the E-step. Pure."""
    weights, probs = _m_step_mixture(np.asarray(state.resp), np.asarray(state.beta_counts), config.alpha, config.phi)
    sigma, omega = _m_step_selection(state.sigma, state.omega, np.asarray(state.A), np.asarray(state.B), config)
    return _state(data, config, state.iteration + 1, weights, probs, sigma, omega, state.index)


def _snapshot(state: LogitVdState) -> dict:
    return {"iteration": state.iteration, "log_likelihood": state.log_likelihood, "objective": state.objective,
            "weights": np.array(state.weights), "sigma": np.array(state.sigma), "omega": np.array(state.omega)}


def fit(data: RatingData, config: LogitVdConfig, rng: np.random.Generator, *,
        callback: Callable[[LogitVdState], None] | None = None,
        init_state: LogitVdState | None = None) -> LogitVdResult:
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
    return LogitVdResult(state=out.state, converged=out.stop_reason == "tol", stop_reason=out.stop_reason,
                         message=out.message, n_iter=out.state.iteration, trace=out.trace,
                         restart_objectives=out.restart_objectives, config=config)


def _params(state, data: RatingData):
    state = getattr(state, "state", state)
    if not isinstance(state, LogitVdState):
        raise BadInputError(f"Expected a LogitVdState or LogitVdResult; got {type(state).__name__}.")
    data = _check_data(data)
    K, D, V = state.probs.shape
    if (data.n_features, data.n_values) != (D, V):
        raise BadInputError(f"The data have D={data.n_features} items and V={data.n_values} levels, but the model "
                            f"was fitted with D={D}, V={V}.")
    return np.asarray(state.weights), np.asarray(state.probs), np.asarray(state.mu)


def log_likelihood_rows(state, data: RatingData) -> np.ndarray:
    """Per-row observed-data log-likelihood :math:`\\log P(x^o_n, r_n)` at the state's parameters."""
    weights, probs, mu = _params(state, data)
    return _e_step(data, weights, probs, mu).row_loglik


def predict_proba(state, data: RatingData) -> np.ndarray:
    r"""Predictive distribution (N, D, V), eq. 5.6.18: eq. 5.4.24 of CPT-v with :math:`\mu_{vd}`; depends on
    :math:`r_{dn}`; available entries get the point mass on their value. See
    :func:`explorer.core.discrete.cpt_v.predict_proba`."""
    return _predict(data, *_params(state, data))
