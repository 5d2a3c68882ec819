r"""Bayesian finite multinomial (categorical) mixture with MAR missing data, fitted by MAP-EM.

Marlin (2008) section 4.1 (digest section 3.1). Model (4.1.3-4.1.6): :math:`\theta \sim \mathrm{Dir}(\alpha)`,
:math:`\beta_{dk} \sim \mathrm{Dir}(\phi)`, :math:`P(z_n = k) = \theta_k`,
:math:`P(x_n \mid z_n = k) = \prod_d \prod_v \beta_{vdk}^{[x_{dn} = v]}`, with symmetric priors
(one ``alpha`` for every :math:`\alpha_k`, one ``phi`` for every :math:`\phi_{vdk}`). Under MAR only the
*available* entries (:attr:`~explorer.core.discrete.ratings_data.RatingData.available`, :math:`a_{dn}`) enter the
likelihood; the response indicator :math:`r_{dn}` is ignored.

E-step (4.1.12), in log space:

.. math::

    q_n(k) \propto \theta_k \prod_d \prod_v \beta_{vdk}^{[a_{dn} = 1][x_{dn} = v]}.

M-step (4.1.13-4.1.14), the MAP update (needs :math:`\alpha, \phi \ge 1`):

.. math::

    \theta_k = \frac{\alpha - 1 + \sum_n q_n(k)}{N - K + K\alpha}, \qquad
    \beta_{vdk} = \frac{\phi - 1 + \sum_n q_n(k)[a_{dn} = 1][x_{dn} = v]}
                       {\sum_n q_n(k)[a_{dn} = 1] - V + V\phi}.

N counts every row (a row with no available entry has :math:`q_n = \theta`, as the formula says).
Objective (never decreases): the log posterior up to constants,
:math:`\sum_n \log \sum_k \theta_k \prod_{d,v} \beta_{vdk}^{[a_{dn}][x_{dn}=v]} + (\alpha - 1)\sum_k \log\theta_k
+ (\phi - 1)\sum_{vdk}\log\beta_{vdk}` (the Dirichlet normalisers are left out). With
:math:`\alpha = 1` or :math:`\phi = 1` (maximum likelihood for that block) a probability may reach 0; its log
is floored at ``log(1e-300)`` and a component with no mass in a column gets the uniform 1/V there.

Predictive (4.1.15): :math:`P(x_{dn} = v \mid x_n^o) = \sum_k \beta_{vdk} q_n(k)`, with :math:`q_n` computed
from the row's available entries (:func:`predict_proba`; the same for training rows and new rows).

Bernoulli mixtures are the V = 2 case: with ``alpha = 1`` and ``phi = 1 + a`` this is
:mod:`explorer.core.discrete.bernoulli_mixture` with ``pseudo_count = a`` (same objective, same fixed points;
on complete data the same iterates).

No erratum of the digest's Appendix A concerns section 4.1.

API: :class:`CategoricalConfig`, :func:`init`, :func:`init_from_parameters`, :func:`step`, :func:`fit`
(a loop over :func:`step`, :mod:`explorer.core.loop`), :func:`predict_proba`, :func:`log_likelihood_rows`,
:func:`posterior` (the :math:`q_n(k)` of any data); states are immutable.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from explorer.core.discrete.ratings_data import RatingData
from explorer.core.loop import ConvergenceWarning, run_restarts
from explorer.core.validation import BadInputError, check_dirichlet, check_int, check_nonnegative, is_int

__all__ = [
    "CategoricalConfig",
    "CategoricalState",
    "CategoricalResult",
    "ConvergenceWarning",
    "INITS",
    "init",
    "init_from_parameters",
    "step",
    "fit",
    "posterior",
    "predict_proba",
    "log_likelihood_rows",
]

INITS = ("random_resp", "random_probs")
_LOG_FLOOR = np.log(1e-300)


def _safe_log(p: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.maximum(np.log(p), _LOG_FLOOR)


_DIRICHLET_WHY = ("the MAP-EM updates 4.1.13-4.1.14 need Dirichlet parameters >= 1; use 1 for maximum likelihood, "
                  "2 as in the thesis")


@dataclass(frozen=True, slots=True)
class CategoricalConfig:
    """Settings of the MAP-EM fit.

    Parameters
    ----------
    n_components : int
        K >= 1 (at most the number of rows).
    alpha : float
        Symmetric Dirichlet parameter of the mixing weights, >= 1 (thesis: 2).
    phi : float
        Symmetric Dirichlet parameter of every :math:`\\beta_{dk}`, >= 1 (thesis: 2).
    max_iter : int
        Most EM iterations per restart.
    tol : float
        Stop when the relative change of the objective, ``|new - old| / |old|``, is below ``tol``.
    n_init : int
        Restarts (each from ``init``); the highest final objective is kept.
    init : {"random_resp", "random_probs"}
        ``"random_resp"``: responsibilities drawn from a flat Dirichlet per row, then one M-step;
        ``"random_probs"``: equal weights and every :math:`\\beta_{dk}` drawn from a flat Dirichlet.
        Either way the state at iteration 0 holds the E-step at its parameters.
    """

    n_components: int = 2
    alpha: float = 2.0
    phi: float = 2.0
    max_iter: int = 200
    tol: float = 1e-8
    n_init: int = 1
    init: str = "random_resp"

    def __post_init__(self):
        if not is_int(self.n_components) or self.n_components < 1:
            raise BadInputError(f"n_components must be a positive integer, got {self.n_components!r}.")
        check_dirichlet("alpha", self.alpha, why=_DIRICHLET_WHY)
        check_dirichlet("phi", self.phi, why=_DIRICHLET_WHY)
        check_int("max_iter", self.max_iter, 0)
        check_nonnegative("tol", self.tol)
        check_int("n_init", self.n_init, 1)
        if self.init not in INITS:
            raise BadInputError(f"init must be one of {INITS}, got {self.init!r}.")


@dataclass(frozen=True, eq=False, slots=True)
class CategoricalState:
    """Parameters after ``iteration`` EM steps, with the E-step at them.

    ``weights`` (K,) are :math:`\\theta_k`, ``probs`` (K, D, V) are :math:`\\beta_{vdk}` stored as
    ``probs[k, d, v]``, ``resp`` (N, K) the :math:`q_n(k)` of the training rows at these parameters;
    ``objective`` = ``log_likelihood`` + ``log_prior`` (the log posterior up to constants).
    """

    iteration: int
    weights: np.ndarray
    probs: np.ndarray
    resp: np.ndarray
    log_likelihood: float
    log_prior: float
    objective: float

    @property
    def n_components(self) -> int:
        return int(self.weights.shape[0])


@dataclass(frozen=True, eq=False, slots=True)
class CategoricalResult:
    """What :func:`fit` returns: the kept ``state`` and how the loop ended (as :mod:`explorer.core.loop`)."""

    state: CategoricalState
    converged: bool
    stop_reason: str
    message: str
    n_iter: int
    trace: tuple
    restart_objectives: tuple
    config: CategoricalConfig


def _check_data(data) -> RatingData:
    if not isinstance(data, RatingData):
        raise BadInputError(f"data must be a RatingData (build it with explorer.core.discrete.ratings_data.prepare); "
                            f"got {type(data).__name__}.")
    return data


def _check_fit(data: RatingData, config: CategoricalConfig) -> None:
    _check_data(data)
    if config.n_components > data.n_samples:
        raise BadInputError(f"n_components={config.n_components} is more than the {data.n_samples} rows; "
                            f"use at most {data.n_samples} components.")


def _check_shape(probs: np.ndarray, data: RatingData) -> None:
    _check_data(data)
    _, D, V = probs.shape
    if data.n_features != D:
        raise BadInputError(f"data have {data.n_features} feature(s), but the model has {D}.")
    if data.n_values != V:
        raise BadInputError(f"data have n_values={data.n_values}, but the model has V={V} levels; "
                            f"prepare the data with n_values={V}.")


def _log_joint(onehot: np.ndarray, weights: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """(N, K): :math:`\\log\\theta_k + \\sum_{d,v} [a_{dn}][x_{dn}=v] \\log\\beta_{vdk}` (onehot contracted
    with the log probabilities over (d, v))."""
    return np.tensordot(onehot, _safe_log(probs), axes=([1, 2], [1, 2])) + _safe_log(weights)[None, :]


def _log_prior(weights, probs, config: CategoricalConfig) -> float:
    lp = 0.0
    if config.alpha > 1:
        lp += (config.alpha - 1.0) * float(_safe_log(weights).sum())
    if config.phi > 1:
        lp += (config.phi - 1.0) * float(_safe_log(probs).sum())
    return lp


def _state(data: RatingData, config: CategoricalConfig, iteration: int, weights, probs) -> CategoricalState:
    """E-step (4.1.12) and the objective at the given parameters."""
    table = _log_joint(data.onehot, weights, probs)
    norm = logsumexp(table, axis=1)
    with np.errstate(under="ignore"):
        resp = np.exp(table - norm[:, None])
    ll = float(norm.sum())
    lp = _log_prior(weights, probs, config)
    for arr in (weights, probs, resp):
        arr.setflags(write=False)
    return CategoricalState(iteration=iteration, weights=weights, probs=probs, resp=resp,
                            log_likelihood=ll, log_prior=lp, objective=ll + lp)


def _m_step(resp: np.ndarray, data: RatingData, config: CategoricalConfig):
    """MAP M-step (4.1.13-4.1.14) from responsibilities (N, K): (weights (K,), probs (K, D, V))."""
    N, K = resp.shape
    V = data.n_values
    nk = resp.sum(axis=0)
    weights = (config.alpha - 1.0 + nk) / (N - K + K * config.alpha)
    counts = np.einsum("nk,ndv->kdv", resp, data.onehot)  # sum_n q_n(k)[a_dn][x_dn = v]
    num = config.phi - 1.0 + counts
    den = counts.sum(axis=2, keepdims=True) + V * (config.phi - 1.0)  # sum_n q_n(k)[a_dn] - V + V phi
    probs = np.where(den > 0, num / np.where(den > 0, den, 1.0), 1.0 / V)
    return weights, probs


def init(data: RatingData, config: CategoricalConfig, rng: np.random.Generator) -> CategoricalState:
    """Iteration 0 from ``rng`` (``config.init``): random responsibilities and one M-step, or equal weights
    and random :math:`\\beta`; then the E-step."""
    _check_fit(data, config)
    K, D, V = config.n_components, data.n_features, data.n_values
    if config.init == "random_resp":
        resp = rng.dirichlet(np.ones(K), size=data.n_samples)
        weights, probs = _m_step(resp, data, config)
    else:
        weights = np.full(K, 1.0 / K)
        probs = rng.dirichlet(np.ones(V), size=(K, D))
    return _state(data, config, 0, weights, probs)


def init_from_parameters(data: RatingData, config: CategoricalConfig, weights, probs) -> CategoricalState:
    """Iteration 0 from given parameters (validated and copied): ``weights`` (K,), ``probs`` (K, D, V)."""
    _check_fit(data, config)
    K, D, V = config.n_components, data.n_features, data.n_values
    w = np.array(weights, dtype=float)
    p = np.array(probs, dtype=float)
    if w.shape != (K,) or p.shape != (K, D, V):
        raise BadInputError(f"weights and probs have shapes {w.shape} and {p.shape}; expected {(K,)} and {(K, D, V)}.")
    if np.any(w < 0) or not np.isclose(w.sum(), 1.0) or np.any(p < 0) or not np.allclose(p.sum(axis=2), 1.0):
        raise BadInputError("weights must be a probability vector and probs must sum to one over the last axis (v).")
    return _state(data, config, 0, w, p)


def step(state: CategoricalState, data: RatingData, config: CategoricalConfig) -> CategoricalState:
    """One EM iteration: the M-step from the state's responsibilities, then the E-step. Pure."""
    _check_shape(state.probs, data)
    if state.resp.shape != (data.n_samples, config.n_components):
        raise BadInputError(f"The state has responsibilities of shape {state.resp.shape}; these data and config "
                            f"need {(data.n_samples, config.n_components)}.")
    weights, probs = _m_step(np.asarray(state.resp), data, config)
    return _state(data, config, state.iteration + 1, weights, probs)


def _snapshot(state: CategoricalState) -> dict:
    return {"iteration": state.iteration, "objective": state.objective, "log_likelihood": state.log_likelihood,
            "weights": np.array(state.weights)}


def _relative_change(old: CategoricalState, new: CategoricalState) -> float:
    return (new.objective - old.objective) / max(abs(old.objective), 1e-300)


def fit(data: RatingData, config: CategoricalConfig, rng: np.random.Generator, *,
        callback: Callable[[CategoricalState], None] | None = None,
        init_state: CategoricalState | None = None) -> CategoricalResult:
    """``config.n_init`` restarts of a loop over :func:`step` until the relative objective change is below
    ``config.tol`` (or ``max_iter``: a :class:`ConvergenceWarning`); the highest objective is kept."""
    _check_fit(data, config)
    out = run_restarts(
        n_runs=1 if init_state is not None else config.n_init,
        start=lambda: init_state if init_state is not None else init(data, config, rng),
        step=lambda s: step(s, data, config),
        snapshot=_snapshot,
        change=_relative_change,
        max_iter=config.max_iter,
        tol=config.tol,
        callback=callback,
    )
    return CategoricalResult(state=out.state, converged=out.stop_reason == "tol", stop_reason=out.stop_reason,
                             message=out.message, n_iter=out.state.iteration, trace=out.trace,
                             restart_objectives=out.restart_objectives, config=config)


def log_likelihood_rows(state: CategoricalState, data: RatingData) -> np.ndarray:
    """Per-row :math:`\\log P(x_n^o)` (N,) at the state's parameters (0 for a row with nothing available)."""
    _check_shape(state.probs, data)
    return logsumexp(_log_joint(data.onehot, state.weights, state.probs), axis=1)


def posterior(state: CategoricalState, data: RatingData) -> np.ndarray:
    """:math:`q_n(k) = P(z_n = k \\mid x_n^o)` (N, K) from each row's available entries (4.1.12)."""
    _check_shape(state.probs, data)
    table = _log_joint(data.onehot, state.weights, state.probs)
    with np.errstate(under="ignore"):
        return np.exp(table - logsumexp(table, axis=1, keepdims=True))


def predict_proba(state: CategoricalState, data: RatingData) -> np.ndarray:
    """(N, D, V): :math:`P(x_{dn} = v \\mid x_n^o) = \\sum_k \\beta_{vdk} q_n(k)` (4.1.15), :math:`q_n` from the
    row's available entries, parameters held fixed (training rows and new rows alike)."""
    return np.einsum("nk,kdv->ndv", posterior(state, data), state.probs)
