r"""Conditional RBMs for missing ratings, trained by contrastive divergence (Marlin 2008, Section 5.7).

marlin2008 digest, section 4.4. Data: :class:`~explorer.core.discrete.ratings_data.RatingData` (codes 0..V-1, response
:math:`r_{dn}`, availability :math:`a_{dn}`). K binary hidden units :math:`z_k`, one categorical visible unit per
item. ``W[d, v, k]`` stores :math:`W_{vdk}`, ``b1[d, v]`` :math:`b^1_{vd}`, ``b0[v]`` :math:`b^0_v`,
``c[k]`` :math:`c_k`.

**cRBM** (``variant="basic"``, eqs. 5.7.10-5.7.17). The energy of a user's available values and the hidden units,
conditional on the availability pattern :math:`a_n` (5.7.10):

.. math::

    E(x, z) = -\sum_{d,v,k} W_{vdk}[x_d=v][z_k=1][a_{dn}=1] - \sum_{d,v} b_{vd}[x_d=v][a_{dn}=1] - \sum_k c_k z_k,

so unavailable visibles drop out. :math:`P(z_k=1 \mid x^o, a) = \sigma(\sum_{d,v}W_{vdk}[x_{dn}=v][a_{dn}=1] + c_k)`
(5.7.15, :func:`hidden_proba`) and :math:`P(x_d=v \mid z) = \mathrm{softmax}_v(\sum_k W_{vdk}z_k + b_{vd})`.

**cRBM/E-v** (``variant="ev"``, eqs. 5.7.18-5.7.25): the visible bias of an available entry depends on its
response indicator, :math:`b^1_{vd}` when :math:`r_{dn}=1` and :math:`b^0_v` (shared over items, the role of
CPT-v's :math:`\mu_v`) when :math:`r_{dn}=0`; deliberately no :math:`V_{dk}[r=1][a=1]z_k` term (5.7.18). Learning
:math:`b^0` needs available entries with :math:`r=0` (ratings of random items); without any, :func:`init` and
:func:`step` raise :class:`~explorer.core.validation.BadInputError`. The thesis trains cRBM/E-v on the training
users **plus the hold-out users**, whose random-item ratings supply them
(:func:`explorer.core.discrete.ratings_data.stack`).

**Learning: CD-T** (5.7.16, 5.7.21-5.7.24), full batch, gradients averaged over users:

.. math::

    \Delta W_{vdk} = \eta\Big(\tfrac1N\sum_n [a_{dn}=1]\big([x_{dn}=v]P(z_k \mid x^o_n)
    - [x^T_{dn}=v]P(z_k \mid x^T_n)\big)
    - \lambda W_{vdk}\Big),

:math:`\Delta c_k = \tfrac{\eta}{N}\sum_n (P(z_k \mid x^o_n) - P(z_k \mid x^T_n))`,
:math:`\Delta b^1_{vd} = \tfrac{\eta}{N}\sum_n [a=1][r=1]([x_{dn}=v] - [x^T_{dn}=v])` (basic: every available entry)
and :math:`\Delta b^0_v = \tfrac{\eta}{N}\sum_{n,d}[a=1][r=0]([x_{dn}=v] - [x^T_{dn}=v])`. The negative statistics
come from one Gibbs chain per user started at the data that resamples **only the available entries**
(:math:`z \sim P(z \mid x)`, then every available :math:`x_d \sim P(x_d \mid z, r_d)`). Schedule (thesis): at CD
iteration i = 1, 2, ..., T = ceil(i / ``schedule``) Gibbs steps of burn-in, then T samples averaged: the states
:math:`x^T, x^{T+1}, ..., x^{2T-1}` (so T = 1 is ordinary CD-1, whose only sample is :math:`x^1`). Each sample
contributes :math:`[x^t=v]P(z \mid x^t)` (the hidden units Rao-Blackwellised, as in 5.7.9). Weight decay
:math:`\lambda` (``weight_decay``, thesis 1e-4) acts on W only.

**Prediction** (5.7.17 / 5.7.25), hidden units summed out analytically: for entry (n, d),

.. math::

    P(x_{dn}=v \mid \cdot) \propto \exp(\beta_{vdn}) \prod_k \big(1 + \exp(W_{vdk} + \sum_{d' \ne d}\sum_{v'}
    W_{v'd'k}[x_{d'n}=v'][a_{d'n}=1] + c_k)\big),

with :math:`\beta_{vdn} = b_{vd}` (basic) or :math:`b^1_{vd}[r_{dn}=1] + b^0_v[r_{dn}=0]` (ev). For an available
entry its own term is left out (:math:`d' \ne d`: the leave-one-out predictive), for an unavailable one nothing
is left out. Computed in log space with :math:`\log(1+e^t)` = ``logaddexp(0, t)`` and a log-sum-exp over v.

**Objective** (a monitor; CD does not maximise it): the mean log pseudo-likelihood of the available entries,
:math:`\frac{1}{\#\{a=1\}}\sum_{a_{dn}=1}\log P(x_{dn} \mid x^o_{n,-d})`, the leave-one-out predictive above.

**Settings and what the thesis leaves open.** Thesis: 1000 CD iterations, the ceil(i/200) schedule, weight decay
1e-4, K in {1, 5, 10, 20}. Not given, chosen here: the learning rate (default 1.0, with gradients averaged over
users, so a W entry of an item rated by a fraction f of the users moves by at most about f per step). Measured on
the 20-item rating world (s = 0.25, about 1000 fitting users, K = 5): the mean log pseudo-likelihood went from
-1.09 to -1.09 / -1.03 / -0.85 after 200-300 CD iterations at rates 0.1 / 0.3 / 1.0 (0.1 barely moves the
weights), and with K = 20 and the thesis's 1000 iterations at 1.0 it rose from -1.09 to -0.66, its best value
at the last iteration (larger rates were not tried); full-batch rather than mini-batch updates (deterministic
given the rng, and N is small); no momentum; the initialisation (``b1`` from the add-one smoothed log frequencies of
the available values - r=1 ones for ev - ``b0`` likewise from the r=0 available values, ``W`` ~
N(0, ``init_scale``\ :sup:`2`), ``c`` = 0); the reading of "collect ceil(i/200) samples" above. ``tol`` is accepted
for a uniform interface but unused: CD has no objective that it increases, so :func:`fit` always runs
``max_iter`` iterations (stop reason ``"max_iter"``, no warning).

Cost per CD iteration: O(N D V K) for the statistics and per Gibbs step (vectorised numpy, every user at once)
and O(#available V K) softplus evaluations for the objective. The predictive is a compiled loop (numba) over
entries: in numpy it formed an (N, D, V, K) array and took two thirds of the time of a CD iteration.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from explorer.core.discrete.cpt_v import _check_data
from explorer.core.discrete.ratings_data import RatingData
from explorer.core.loop import ConvergenceWarning, run_restarts
from explorer.core.validation import BadInputError, check_int, check_nonnegative, check_rng

__all__ = ["CRBMConfig", "CRBMState", "CRBMResult", "init", "step", "fit", "predict_proba", "hidden_proba"]

VARIANTS = ("basic", "ev")


# --------------------------------------------------------------------------- configuration, state
@dataclass(frozen=True, slots=True)
class CRBMConfig:
    r"""Settings of the cRBM / cRBM/E-v (see the module docstring).

    ``n_components`` K hidden units; ``variant`` "basic" (cRBM) or "ev" (cRBM/E-v); ``max_iter`` CD iterations
    (thesis 1000); ``learning_rate`` :math:`\eta` > 0 (not in the thesis; gradients averaged over users; default 1.0);
    ``weight_decay`` :math:`\lambda` >= 0 on W (thesis 1e-4); ``schedule`` > 0: iteration i uses
    ceil(i / schedule) burn-in steps and as many samples (thesis 200); ``init_scale`` >= 0 the standard deviation
    of the initial W; ``tol`` >= 0 accepted and unused (CD always runs ``max_iter`` iterations).
    """

    n_components: int = 5
    variant: str = "ev"
    max_iter: int = 1000
    learning_rate: float = 1.0
    weight_decay: float = 1e-4
    schedule: int = 200
    init_scale: float = 0.01
    tol: float = 0.0

    def __post_init__(self):
        check_int("n_components", self.n_components, 1)
        if self.variant not in VARIANTS:
            raise BadInputError(f"variant must be one of {VARIANTS} ('basic' = cRBM, 'ev' = cRBM/E-v); "
                                f"got {self.variant!r}.")
        check_int("max_iter", self.max_iter, 0)
        check_int("schedule", self.schedule, 1)
        for name in ("learning_rate", "weight_decay", "init_scale", "tol"):
            check_nonnegative(name, getattr(self, name))
        if not self.learning_rate > 0:
            raise BadInputError(f"learning_rate must be positive, got {self.learning_rate!r}.")


def _kernels():
    """The compiled kernels of this module (imported on first use: ``import explorer`` never loads numba)."""
    from explorer.core._compiled import crbm

    return crbm



@dataclass(frozen=True, eq=False, slots=True)
class CRBMState:
    r"""Parameters after ``iteration`` CD steps (read-only arrays).

    ``W`` (D, V, K) :math:`W_{vdk}`; ``b1`` (D, V) the visible biases (basic: the only ones; ev: of r = 1
    entries); ``b0`` (V,) the r = 0 visible biases of ev (basic: zeros, unused); ``c`` (K,); ``objective`` the
    mean log pseudo-likelihood of the available entries of the data the state was computed on (a monitor);
    ``variant`` the model the parameters belong to ("basic" or "ev"), which :func:`predict_proba` needs.
    """

    iteration: int
    W: np.ndarray
    b1: np.ndarray
    b0: np.ndarray
    c: np.ndarray
    objective: float
    variant: str = "ev"


@dataclass(frozen=True, eq=False, slots=True)
class CRBMResult:
    state: CRBMState
    stop_reason: str
    message: str
    n_iter: int
    trace: tuple
    config: CRBMConfig


# --------------------------------------------------------------------------- model pieces
def _state_of(state) -> CRBMState:
    state = getattr(state, "state", state)   # a CRBMResult works too
    if not isinstance(state, CRBMState):
        raise BadInputError(f"Expected a CRBMState or CRBMResult; got {type(state).__name__}.")
    return state


def _check_match(state: CRBMState, data) -> RatingData:
    data = _check_data(data)
    D, V, _ = state.W.shape
    if (data.n_features, data.n_values) != (D, V):
        raise BadInputError(f"The data have D={data.n_features} items and V={data.n_values} levels, but the model "
                            f"has D={D}, V={V}.")
    return data


def _check_fit_data(data, config: CRBMConfig) -> RatingData:
    data = _check_data(data)
    if config.variant == "ev" and not np.any(data.available & ~data.response):
        raise BadInputError("cRBM/E-v (variant='ev') needs ratings of random items (entries with response=False "
                            "and available=True) to learn b0; these data have none. Train it on the training "
                            "users plus the hold-out users (ratings_data.stack), or use variant='basic'.")
    return data


def _b1_mask(data: RatingData, variant: str) -> np.ndarray:
    """(N, D) float: the available entries whose visible bias is b1 (basic: all; ev: r = 1)."""
    a = data.available
    return (a if variant == "basic" else a & data.response).astype(float)


def _visible_bias(b1, b0, data: RatingData, variant: str) -> np.ndarray:
    """(N, D, V) visible bias of every entry: b1[d] (basic, or ev with r = 1), b0 (ev with r = 0)."""
    if variant == "basic":
        return np.broadcast_to(b1[None], data.onehot.shape)
    return np.where(data.response[..., None], b1[None], b0[None, None])


def _hidden_input(W, c, x: np.ndarray) -> np.ndarray:
    """(N, K): sum_{d,v} W_vdk x[n, d, v] + c_k for a (N, D, V) (masked) one-hot array x."""
    D, V, K = W.shape
    return x.reshape(x.shape[0], D * V) @ W.reshape(D * V, K) + c


def _loo(W, b1, b0, c, data: RatingData, variant: str, only_available: bool):
    b1_entry = np.ones(data.codes.shape, dtype=bool) if variant == "basic" else data.response
    out = np.empty((0, 0, 0)) if only_available else np.empty(data.onehot.shape)
    total = _kernels().loo_kernel(np.ascontiguousarray(W, dtype=float), np.ascontiguousarray(b1, dtype=float),
                        np.ascontiguousarray(b0, dtype=float), np.ascontiguousarray(b1_entry),
                        _hidden_input(W, c, data.onehot), np.ascontiguousarray(data.codes),
                        np.ascontiguousarray(data.available), out, only_available)
    return total, out


def _log_predict(W, b1, b0, c, data: RatingData, variant: str) -> np.ndarray:
    """(N, D, V) log of eq. 5.7.17 / 5.7.25 (leave-one-out for available entries)."""
    return _loo(W, b1, b0, c, data, variant, False)[1]


def _objective(W, b1, b0, c, data: RatingData, variant: str) -> float:
    """Mean leave-one-out log predictive of the available entries (the log pseudo-likelihood per entry)."""
    return float(_loo(W, b1, b0, c, data, variant, True)[0] / data.available.sum())


def _sample_visibles(W, bias_av, z, entries, shape, rng) -> np.ndarray:
    """One draw of every available x_d ~ softmax_v(sum_k W_vdk z_k + bias): the masked (N, D, V) one-hot.
    ``entries`` = (row, item) indices of the available entries, ``bias_av`` (M, V) their visible biases."""
    N, D, V = shape
    rows, items = entries
    logits = (z @ W.reshape(D * V, -1).T).reshape(N, D, V)[rows, items] + bias_av      # (M, V)
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    cdf = np.cumsum(p, axis=1)
    u = rng.random((rows.size, 1)) * cdf[:, -1:]
    idx = np.minimum((u > cdf).sum(axis=1), V - 1)
    x = np.zeros(shape)
    x[rows, items, idx] = 1.0
    return x


def _negative_statistics(W, b1, b0, c, data: RatingData, variant: str, n_steps: int, rng: np.random.Generator):
    """CD-T negative statistics, summed over users: ``(W_stat (D, V, K), x_mean (N, D, V), c_stat (K,))``.

    One chain per user starts at the data; a Gibbs step draws z ~ P(z | x) and then every available x_d (the
    unavailable ones stay absent). After ``n_steps`` burn-in steps the states x^T, ..., x^{2T-1} (T = n_steps)
    are averaged: ``W_stat`` = sum_n mean_t x^t_n (x) P(z | x^t_n), ``x_mean`` the per-user mean one-hot of the
    samples and ``c_stat`` = sum_n mean_t P(z | x^t_n)."""
    D, V, K = W.shape
    entries = np.nonzero(data.available)
    bias_av = _visible_bias(b1, b0, data, variant)[entries]
    x = data.onehot
    w_stat = np.zeros((D * V, K))
    x_sum = np.zeros(x.shape)
    c_stat = np.zeros(K)
    pz = expit(_hidden_input(W, c, x))
    for t in range(1, 2 * n_steps):
        z = (rng.random(pz.shape) < pz).astype(float)
        x = _sample_visibles(W, bias_av, z, entries, x.shape, rng)
        pz = expit(_hidden_input(W, c, x))  # P(z | x^t): the sample's statistic and the next step's z
        if t >= n_steps:
            w_stat += x.reshape(x.shape[0], D * V).T @ pz
            x_sum += x
            c_stat += pz.sum(axis=0)
    return w_stat.reshape(D, V, K) / n_steps, x_sum / n_steps, c_stat / n_steps


def _positive_statistics(W, c, data: RatingData):
    """``(W_stat (D, V, K), c_stat (K,))``: sum_n [x_dn = v][a_dn = 1] P(z_k | x^o_n) and sum_n P(z_k | x^o_n)."""
    D, V, K = W.shape
    pz = expit(_hidden_input(W, c, data.onehot))
    return (data.onehot.reshape(data.n_samples, D * V).T @ pz).reshape(D, V, K), pz.sum(axis=0)


def _bias_statistics(x: np.ndarray, data: RatingData, variant: str):
    """Sums of a (N, D, V) one-hot (data or sample mean) over the b1 entries (D, V) and the b0 entries (V,)."""
    m1 = _b1_mask(data, variant)
    s1 = np.einsum("ndv,nd->dv", x, m1)
    s0 = np.einsum("ndv,nd->v", x, data.available.astype(float) - m1)
    return s1, s0


def _freeze(iteration, W, b1, b0, c, data, variant) -> CRBMState:
    for a in (W, b1, b0, c):
        a.setflags(write=False)
    return CRBMState(iteration=iteration, W=W, b1=b1, b0=b0, c=c,
                     objective=_objective(W, b1, b0, c, data, variant), variant=variant)


def n_gibbs_steps(iteration: int, schedule: int) -> int:
    """T = ceil(iteration / schedule) (at least 1): the burn-in steps and the samples of CD iteration ``iteration``."""
    return max(1, math.ceil(iteration / schedule))


# --------------------------------------------------------------------------- init / step / fit
def init(data: RatingData, config: CRBMConfig, rng: np.random.Generator) -> CRBMState:
    """Iteration 0: ``b1`` the add-one smoothed log frequencies of the available values per item (ev: of the r = 1
    ones), ``b0`` those of the r = 0 available values over all items (basic: zeros), ``W`` ~ N(0, init_scale^2)
    from ``rng``, ``c`` = 0."""
    data = _check_fit_data(data, config)
    check_rng(rng)
    D, V, K = data.n_features, data.n_values, config.n_components
    n1, n0 = _bias_statistics(data.onehot, data, config.variant)
    b1 = np.log((n1 + 1.0) / (n1.sum(axis=1, keepdims=True) + V))
    b0 = np.log((n0 + 1.0) / (n0.sum() + V)) if config.variant == "ev" else np.zeros(V)
    W = rng.normal(0.0, config.init_scale, size=(D, V, K))
    return _freeze(0, W, b1, b0, np.zeros(K), data, config.variant)


def step(state: CRBMState, data: RatingData, config: CRBMConfig, rng: np.random.Generator) -> CRBMState:
    """One CD-T update (5.7.16, 5.7.21-5.7.24) with T = ceil(i / schedule) at iteration i = state.iteration + 1.
    Pure: returns a new state."""
    state = _state_of(state)
    data = _check_fit_data(data, config)
    _check_match(state, data)
    check_rng(rng)
    if state.variant != config.variant:
        raise BadInputError(f"The state is a variant={state.variant!r} model but the config asks for "
                            f"variant={config.variant!r}.")
    W, b1, b0, c = (np.asarray(a) for a in (state.W, state.b1, state.b0, state.c))
    i = state.iteration + 1
    N = data.n_samples
    pos_w, pos_c = _positive_statistics(W, c, data)
    pos_b1, pos_b0 = _bias_statistics(data.onehot, data, config.variant)
    neg_w, x_mean, neg_c = _negative_statistics(W, b1, b0, c, data, config.variant,
                                                n_gibbs_steps(i, config.schedule), rng)
    neg_b1, neg_b0 = _bias_statistics(x_mean, data, config.variant)
    lr = config.learning_rate
    W_new = W + lr * ((pos_w - neg_w) / N - config.weight_decay * W)
    b1_new = b1 + lr * (pos_b1 - neg_b1) / N
    b0_new = b0 + lr * (pos_b0 - neg_b0) / N if config.variant == "ev" else b0.copy()
    c_new = c + lr * (pos_c - neg_c) / N
    return _freeze(i, W_new, b1_new, b0_new, c_new, data, config.variant)


def fit(data: RatingData, config: CRBMConfig, rng: np.random.Generator, *,
        callback: Callable[[CRBMState], None] | None = None, init_state: CRBMState | None = None) -> CRBMResult:
    """``init`` (or ``init_state``) then ``config.max_iter`` calls of :func:`step`. ``callback`` as in
    :func:`explorer.core.loop.run_restarts` (a callable or a LoopMonitor; StopIteration ends the fit).
    ``trace``: iteration and objective of every state."""
    data = _check_fit_data(data, config)
    check_rng(rng)
    with warnings.catch_warnings():
        # CD has no convergence test: reaching max_iter is the normal end, not a warning.
        warnings.filterwarnings("ignore", message="Stopped after max_iter", category=ConvergenceWarning)
        out = run_restarts(
            n_runs=1,
            start=lambda: init_state if init_state is not None else init(data, config, rng),
            step=lambda s: step(s, data, config, rng),
            snapshot=lambda s: {"iteration": s.iteration, "objective": s.objective},
            change=lambda old, new: new.objective - old.objective,
            max_iter=config.max_iter,
            tol=0.0,
            callback=callback,
        )
    return CRBMResult(state=out.state, stop_reason=out.stop_reason, message=out.message,
                      n_iter=out.state.iteration, trace=out.trace, config=config)


# --------------------------------------------------------------------------- prediction
def predict_proba(state, data: RatingData) -> np.ndarray:
    """(N, D, V) predictive of every entry by eq. 5.7.17 (basic) / 5.7.25 (ev, the entry's r choosing b1 or b0),
    hidden units summed out; for an available entry its own value is left out (leave-one-out). Rows sum to one.
    ``state`` is a :class:`CRBMState` or :class:`CRBMResult`; the parameters are fixed, so the same call serves
    training users (weak generalisation) and new users (strong)."""
    state = _state_of(state)
    data = _check_match(state, data)
    return np.exp(_log_predict(np.asarray(state.W), np.asarray(state.b1), np.asarray(state.b0),
                               np.asarray(state.c), data, state.variant))


def hidden_proba(state, data: RatingData) -> np.ndarray:
    """(N, K) P(z_k = 1 | x^o_n, a_n) of eq. 5.7.15 (the r of the entries does not enter)."""
    state = _state_of(state)
    data = _check_match(state, data)
    return expit(_hidden_input(np.asarray(state.W), np.asarray(state.c), data.onehot))
