r"""EM for Bernoulli mixtures with missing entries, optionally with a class label (semi-supervised).

Ghahramani & Jordan (1994) section 4.1.3 (digest section 2.7), with the class variable of section
4.4 (digest section 2.10). Binary features :math:`x_d \in \{0, 1\}`, R = 1 where observed:

.. math::

    P(x, c) = \sum_{j=1}^M \pi_j\, \lambda_{jc} \prod_{d=1}^D \mu_{jd}^{x_d} (1 - \mu_{jd})^{1 - x_d},

with :math:`\lambda_{jc} = P(c \mid \omega_j)` (no class: :math:`\lambda \equiv 1`). Missing entries
drop out of the likelihood: the product runs over the observed coordinates only.

E-step (eq. 11 on the observed coordinates, :math:`\pi_j` included, erratum 5):
:math:`h_{ij} \propto \pi_j \lambda_{jc_i} \prod_{d \in o_i} \mu_{jd}^{x_{id}}(1-\mu_{jd})^{1-x_{id}}`
(:math:`\lambda_{jc_i}` only for labelled rows); :math:`E[z_{ij} x_{id}] = h_{ij}\mu_{jd}` for a missing
entry (coordinates are independent within a component, so no second moment is needed).

M-step (eq. 12 with the expectations substituted, MAP under a Beta(1 + a, 1 + a) prior on every
:math:`\mu_{jd}`, a = ``pseudo_count``):

.. math::

    \mu_{jd} = \frac{\sum_i h_{ij}[R_{id} x_{id} + (1 - R_{id}) \mu_{jd}^{old}] + a}{\sum_i h_{ij} + 2a},
    \qquad \pi_j = \frac{1}{N}\sum_i h_{ij},

and the class probabilities as in :mod:`explorer.core.classifiers.joint_mixture` (``"joint"``:
:math:`\lambda_{jc} \propto \sum_i h_{ij} c_{ijc} + \alpha`, :math:`c_{ijc} = \lambda^{old}_{jc}` for unlabelled
rows; ``"per_class"``: one-hot, ``n_components`` components per class).

Objective (never decreases): the observed-data log-likelihood of the observed entries and labels
plus :math:`a\sum_{jd}[\log\mu_{jd} + \log(1-\mu_{jd})]` (+ :math:`\alpha\sum\log\lambda_{jc}`), both up to
constants. With ``pseudo_count = 0`` (maximum likelihood) a probability may reach 0 or 1; its log is
then floored at ``log(1e-300)`` so that the arithmetic stays finite.

API: :func:`prepare`, :func:`init`, :func:`step`, :func:`fit` (a loop over :func:`step`),
:func:`predict_log_proba`, :func:`log_likelihood_rows`; states are immutable.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy.special import logsumexp

from explorer.core.loop import ConvergenceWarning, run_restarts
from explorer.core.validation import BadInputError, check_incomplete, check_int, check_nonnegative, is_int

__all__ = [
    "BernoulliConfig",
    "BernoulliData",
    "BernoulliState",
    "BernoulliResult",
    "ConvergenceWarning",
    "prepare",
    "init",
    "init_from_parameters",
    "step",
    "fit",
    "predict_log_proba",
    "log_likelihood_rows",
    "STRUCTURES",
]

STRUCTURES = ("unsupervised", "per_class", "joint")
_LOG_FLOOR = np.log(1e-300)



def _safe_log(p: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.maximum(np.log(p), _LOG_FLOOR)


@dataclass(frozen=True, slots=True)
class BernoulliConfig:
    """Settings of the Bernoulli mixture.

    Parameters
    ----------
    n_components : int
        Components in total (``"unsupervised"``, ``"joint"``) or per class (``"per_class"``).
    n_classes : int
        0 for ``"unsupervised"``, else >= 2.
    structure : {"unsupervised", "per_class", "joint"}
    pseudo_count : float
        a >= 0 of the Beta(1 + a, 1 + a) prior on every :math:`\\mu_{jd}` (0 = maximum likelihood).
    label_prior : float
        Dirichlet pseudo-count on :math:`\\lambda_{jc}` (``"joint"``).
    tol, max_iter, n_init
        As in :mod:`explorer.core.mixtures.em_gmm`.
    """

    n_components: int = 1
    n_classes: int = 0
    structure: str = "unsupervised"
    pseudo_count: float = 1.0
    label_prior: float = 0.0
    tol: float = 1e-6
    max_iter: int = 200
    n_init: int = 1

    def __post_init__(self):
        if not is_int(self.n_components) or self.n_components < 1:
            raise BadInputError(f"n_components must be a positive integer, got {self.n_components!r}.")
        if self.structure not in STRUCTURES:
            raise BadInputError(f"structure must be one of {STRUCTURES}, got {self.structure!r}.")
        if not is_int(self.n_classes) or self.n_classes < 0:
            raise BadInputError(f"n_classes must be a non-negative integer, got {self.n_classes!r}.")
        if self.structure == "unsupervised" and self.n_classes != 0:
            raise BadInputError("structure='unsupervised' takes n_classes=0.")
        if self.structure != "unsupervised" and self.n_classes < 2:
            raise BadInputError(f"structure={self.structure!r} needs n_classes >= 2, got {self.n_classes}.")
        for name in ("pseudo_count", "label_prior", "tol"):
            check_nonnegative(name, getattr(self, name))
        check_int("max_iter", self.max_iter, 0)
        check_int("n_init", self.n_init, 1)

    @property
    def total_components(self) -> int:
        return self.n_classes * self.n_components if self.structure == "per_class" else self.n_components

    @property
    def supervised(self) -> bool:
        return self.structure != "unsupervised"


@dataclass(frozen=True, eq=False, slots=True)
class BernoulliData:
    """Binary data prepared once: ``X`` (NaN = missing), ``ones``/``zeros`` observed-1 / observed-0
    indicators (float), labels (-1 = unlabelled; all -1 without classes) and the rows that enter the fit."""

    X: np.ndarray
    missing: np.ndarray
    ones: np.ndarray
    zeros: np.ndarray
    labels: np.ndarray
    n_classes: int
    fit_rows: np.ndarray

    @property
    def n_samples(self) -> int:
        return self.X.shape[0]

    @property
    def n_features(self) -> int:
        return self.X.shape[1]


def _binary(X, missing=None, *, allow_empty_columns=False, name="X"):
    Xn, miss = check_incomplete(X, missing, allow_empty_rows=True, allow_empty_columns=allow_empty_columns, name=name)
    vals = Xn[~miss]
    bad = (vals != 0) & (vals != 1)
    if bad.any():
        raise BadInputError(f"{name} must be binary (0 or 1, NaN = missing); found {int(bad.sum())} other value(s), "
                            f"e.g. {vals[bad][0]!r}.")
    return Xn, miss


def prepare(X, labels=None, n_classes: int = 0, *, missing=None) -> BernoulliData:
    """Validate binary data (0/1, NaN = missing) and optional labels (int, -1 = unlabelled).

    Raises
    ------
    BadInputError
        Values other than 0/1, inf, columns never observed, fewer than two rows with data, labels
        of the wrong shape or range.
    """
    Xn, miss = _binary(X, missing)
    n = Xn.shape[0]
    if labels is None:
        lab = np.full(n, -1, dtype=np.intp)
        n_classes = 0
    else:
        lab = np.asarray(labels)
        if lab.ndim != 1 or lab.shape[0] != n:
            raise BadInputError(f"labels must be 1-D with one entry per row ({n}); got shape {lab.shape}.")
        if lab.dtype.kind not in "iu":
            raise BadInputError(f"labels must be integer class codes (-1 = unlabelled); got dtype {lab.dtype}.")
        lab = lab.astype(np.intp)
        if not is_int(n_classes) or n_classes < 2:
            raise BadInputError(f"n_classes must be an integer >= 2 with labels, got {n_classes!r}.")
        if np.any(lab < -1) or np.any(lab >= n_classes):
            raise BadInputError(f"labels must be in -1 .. {n_classes - 1}.")
        if not np.any(lab >= 0):
            raise BadInputError("No row is labelled (all labels are -1).")
    has_data = (~miss).any(axis=1)
    if np.count_nonzero(has_data) < 2:
        raise BadInputError("At least two rows with an observed value are needed to fit a mixture.")
    fit_rows = np.flatnonzero(has_data | (lab >= 0))
    obs = ~miss
    ones = (obs & (np.where(miss, 0.0, Xn) == 1)).astype(float)
    zeros = (obs & (np.where(miss, 1.0, Xn) == 0)).astype(float)
    for a in (Xn, miss, ones, zeros, lab, fit_rows):
        a.setflags(write=False)
    return BernoulliData(X=Xn, missing=miss, ones=ones, zeros=zeros, labels=lab, n_classes=int(n_classes),
                         fit_rows=fit_rows)


@dataclass(frozen=True, eq=False, slots=True)
class BernoulliState:
    """Parameters after ``iteration`` steps with the E-step at them.

    ``probs`` (M, D) are :math:`\\mu_{jd} = P(x_d = 1 \\mid \\omega_j)`, ``label_probs`` (M, C) the
    :math:`\\lambda_{jc}` (shape (M, 0) without classes), ``resp`` (n, M) the :math:`h_{ij}`; ``ones_mass``
    (M, D) and ``label_counts`` (M, C) the expected counts the next M-step needs.
    """

    iteration: int
    weights: np.ndarray
    probs: np.ndarray
    label_probs: np.ndarray
    log_likelihood: float
    objective: float
    log_prior: float
    resp: np.ndarray
    ones_mass: np.ndarray = field(repr=False)
    label_counts: np.ndarray = field(repr=False)


@dataclass(frozen=True, eq=False, slots=True)
class BernoulliResult:
    state: BernoulliState
    converged: bool
    stop_reason: str
    message: str
    n_iter: int
    trace: tuple
    restart_objectives: tuple
    config: BernoulliConfig


def _check_match(data: BernoulliData, config: BernoulliConfig) -> None:
    if config.supervised and data.n_classes != config.n_classes:
        raise BadInputError(f"The data have n_classes={data.n_classes} but the config n_classes={config.n_classes}.")
    if config.supervised and not np.any(data.labels >= 0):
        raise BadInputError("A supervised structure needs labelled rows.")


def _log_comp(ones, zeros, probs):
    """(n, M): :math:`\\sum_{d \\in o} x_d\\log\\mu_{jd} + (1 - x_d)\\log(1 - \\mu_{jd})`."""
    return ones @ _safe_log(probs).T + zeros @ _safe_log(1.0 - probs).T


def _state(data: BernoulliData, config: BernoulliConfig, iteration, weights, probs, label_probs) -> BernoulliState:
    n = data.n_samples
    with np.errstate(divide="ignore"):
        weighted = _log_comp(data.ones, data.zeros, probs) + np.log(weights)
    C = label_probs.shape[1]
    if C:
        lab = data.labels >= 0
        weighted[lab] += _safe_log(label_probs[:, data.labels[lab]]).T
    norm = logsumexp(weighted, axis=1)
    fit = data.fit_rows
    total = float(norm[fit].sum())
    if not np.isfinite(total):
        raise BadInputError("The log-likelihood is not finite; set pseudo_count > 0.")
    with np.errstate(under="ignore"):
        resp = np.exp(weighted - norm[:, None])
    h = np.zeros_like(resp)
    h[fit] = resp[fit]
    # expected count of ones: observed ones plus h_ij mu_jd for the missing entries
    ones_mass = h.T @ data.ones + (h.T @ data.missing.astype(float)) * probs
    if C:
        lab = data.labels >= 0
        counts = h[lab].T @ np.eye(C)[data.labels[lab]] + h[~lab].sum(axis=0)[:, None] * label_probs
    else:
        counts = np.zeros((weights.size, 0))
    a = config.pseudo_count
    lp = float(a * (_safe_log(probs).sum() + _safe_log(1.0 - probs).sum())) if a > 0 else 0.0
    if config.structure == "joint" and config.label_prior > 0:
        lp += float(config.label_prior * _safe_log(label_probs).sum())
    outside = np.setdiff1d(np.arange(n), fit)
    resp[outside] = weights
    for arr in (weights, probs, label_probs, resp, ones_mass, counts):
        arr.setflags(write=False)
    return BernoulliState(iteration=iteration, weights=weights, probs=probs, label_probs=label_probs,
                          log_likelihood=total, objective=total + lp, log_prior=lp, resp=resp,
                          ones_mass=ones_mass, label_counts=counts)


def _m_step(data: BernoulliData, config: BernoulliConfig, resp_fit: np.ndarray, ones_mass: np.ndarray,
            counts: np.ndarray, label_probs_old: np.ndarray):
    nk = resp_fit.sum(axis=0)
    a = config.pseudo_count
    weights = (nk + 1e-300) / (nk + 1e-300).sum()
    denom = nk[:, None] + 2.0 * a
    probs = np.where(denom > 0, (ones_mass + a) / np.where(denom > 0, denom, 1.0), 0.5)
    probs = np.clip(probs, 0.0, 1.0)
    if config.structure == "joint":
        c = counts + config.label_prior
        tot = c.sum(axis=1, keepdims=True)
        label_probs = np.where(tot > 0, c / np.where(tot > 0, tot, 1.0), 1.0 / config.n_classes)
    else:
        label_probs = np.array(label_probs_old)
    return weights, probs, label_probs


def _owned(config: BernoulliConfig) -> np.ndarray:
    if config.structure == "per_class":
        return np.eye(config.n_classes)[np.repeat(np.arange(config.n_classes), config.n_components)]
    if config.structure == "joint":
        return np.full((config.n_components, config.n_classes), 1.0 / config.n_classes)
    return np.zeros((config.n_components, 0))


def init(data: BernoulliData, config: BernoulliConfig, rng: np.random.Generator) -> BernoulliState:
    """Random responsibilities (compatible with the labels for ``"per_class"``), then one M-step with
    the missing entries counted at probability 1/2, then the E-step."""
    _check_match(data, config)
    M = config.total_components
    fit = data.fit_rows
    r = rng.uniform(0.5, 1.5, size=(fit.size, M))
    if config.structure == "per_class":
        owners = np.repeat(np.arange(config.n_classes), config.n_components)
        lab = data.labels[fit]
        mask = (lab[:, None] < 0) | (owners[None, :] == lab[:, None])
        r = r * mask
    r /= r.sum(axis=1, keepdims=True)
    ones_mass = r.T @ data.ones[fit] + 0.5 * (r.T @ data.missing[fit].astype(float))
    C = config.n_classes
    if config.structure == "joint":
        lab = data.labels[fit]
        counts = r[lab >= 0].T @ np.eye(C)[lab[lab >= 0]] + 1.0
    else:
        counts = np.zeros((M, C))
    init_cfg = config if config.pseudo_count > 0 else _with_pseudo(config)
    weights, probs, label_probs = _m_step(data, init_cfg, r, ones_mass, counts, _owned(config))
    return _state(data, config, 0, weights, probs, label_probs)


def _with_pseudo(config: BernoulliConfig) -> BernoulliConfig:
    from dataclasses import replace

    return replace(config, pseudo_count=1.0)


def init_from_parameters(data: BernoulliData, config: BernoulliConfig, weights, probs, label_probs=None):
    """State at iteration 0 from given parameters (validated and copied)."""
    _check_match(data, config)
    M, D = config.total_components, data.n_features
    w = np.array(weights, dtype=float)
    p = np.array(probs, dtype=float)
    lp = _owned(config) if label_probs is None else np.array(label_probs, dtype=float)
    if w.shape != (M,) or p.shape != (M, D) or lp.shape != (M, config.n_classes):
        raise BadInputError(f"Parameters have shapes {w.shape}, {p.shape}, {lp.shape}; expected {(M,)}, {(M, D)}, "
                            f"{(M, config.n_classes)}.")
    if np.any(w < 0) or not np.isclose(w.sum(), 1.0) or np.any(p < 0) or np.any(p > 1):
        raise BadInputError("weights must be a probability vector and probs must lie in [0, 1].")
    return _state(data, config, 0, w, p, lp)


def step(state: BernoulliState, data: BernoulliData, config: BernoulliConfig) -> BernoulliState:
    """One EM iteration (M-step from the state's expected counts, then the E-step). Pure."""
    h = np.asarray(state.resp)[data.fit_rows]
    weights, probs, label_probs = _m_step(data, config, h, np.asarray(state.ones_mass),
                                          np.asarray(state.label_counts), state.label_probs)
    return _state(data, config, state.iteration + 1, weights, probs, label_probs)


def _snapshot(state: BernoulliState) -> dict:
    return {"iteration": state.iteration, "log_likelihood": state.log_likelihood, "objective": state.objective,
            "weights": np.array(state.weights), "probs": np.array(state.probs),
            "label_probs": np.array(state.label_probs)}


def fit(data: BernoulliData, config: BernoulliConfig, rng: np.random.Generator, *,
        callback: Callable[[BernoulliState], None] | None = None,
        init_state: BernoulliState | None = None) -> BernoulliResult:
    """``config.n_init`` restarts of a loop over :func:`step`; keep the highest objective."""
    n_fit = max(int(data.fit_rows.size), 1)
    out = run_restarts(
        n_runs=1 if init_state is not None else config.n_init,
        start=lambda: init_state if init_state is not None else init(data, config, rng),
        step=lambda s: step(s, data, config),
        snapshot=_snapshot,
        change=lambda old, new: (new.objective - old.objective) / n_fit,
        max_iter=config.max_iter,
        tol=config.tol,
        callback=callback,
    )
    return BernoulliResult(state=out.state, converged=out.stop_reason == "tol", stop_reason=out.stop_reason,
                           message=out.message, n_iter=out.state.iteration, trace=out.trace,
                           restart_objectives=out.restart_objectives, config=config)


def _component_table(state: BernoulliState, X, missing):
    Xn, miss = _binary(X, missing, allow_empty_columns=True)
    if Xn.shape[1] != state.probs.shape[1]:
        raise BadInputError(f"X has {Xn.shape[1]} feature(s), but the model was fitted with {state.probs.shape[1]}.")
    obs = ~miss
    ones = (obs & (np.where(miss, 0.0, Xn) == 1)).astype(float)
    zeros = (obs & (np.where(miss, 1.0, Xn) == 0)).astype(float)
    with np.errstate(divide="ignore"):
        return _log_comp(ones, zeros, state.probs) + np.log(state.weights)


def log_likelihood_rows(state: BernoulliState, X, *, missing=None) -> np.ndarray:
    """Per-row :math:`\\log P(x_i^o)` (0 for rows with nothing observed)."""
    return logsumexp(_component_table(state, X, missing), axis=1)


def predict_log_proba(state: BernoulliState, X, *, missing=None) -> np.ndarray:
    """:math:`\\log P(c \\mid x^o)` (n, C), missing entries marginalised (they drop out of the product)."""
    if state.label_probs.shape[1] == 0:
        raise BadInputError("This mixture has no class variable (structure='unsupervised').")
    table = _component_table(state, X, missing)
    joint = logsumexp(table[:, :, None] + _safe_log(state.label_probs)[None], axis=1)
    return joint - logsumexp(joint, axis=1, keepdims=True)
