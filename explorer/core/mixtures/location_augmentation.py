r"""Bayesian data augmentation for the location model: posterior draws of its parameters and of the gaps.

The location model (:mod:`explorer.core.mixtures.location_model`) puts in every component a Gaussian over the
numeric columns and one categorical distribution per categorical column. With its priors (Dirichlet(:math:`\alpha`)
on the weights, Dirichlet(:math:`\phi_j`) on every level table :math:`\theta_{kj}`, the Normal-inverse-Wishart on
the numeric block) all are conjugate, so both steps of data augmentation (Tanner & Wong 1987) are exact draws, as
for the Gaussian mixture (:mod:`explorer.core.mixtures.data_augmentation`):

* **I-step** (imputation), given :math:`\theta`: per row a component :math:`z_n \sim \mathrm{Cat}(r_n)`,

  .. math::

      r_{nk} \propto \pi_k\, N(x_n^o \mid \mu_k^o, \Sigma_k^{oo}) \prod_{j \in O_n} \theta_{kj}[c_{nj}]

  (the location model's responsibilities: the observed numbers, the observed levels and the weights), then every
  missing category :math:`c_{nj} \sim \mathrm{Cat}(\theta_{z_n j})` and the missing numbers from component
  :math:`z_n`'s conditional Gaussian :math:`N(\mu^{m|o}, \Sigma^{m|o})`.
* **P-step** (posterior), given the labels and the completed rows:

  .. math::

      \pi \sim \mathrm{Dir}(\alpha + n_1, \dots, \alpha + n_K), \qquad
      \theta_{kj} \sim \mathrm{Dir}(\phi_j + n_{kj1}, \dots, \phi_j + n_{kjV_j}),

  with :math:`n_k` the rows labelled k and :math:`n_{kjv}` those of them whose column j is *observed* at level v,
  and :math:`(\mu_k, \Sigma_k)` from the Normal-inverse-Wishart posterior of the completed numbers of the rows
  labelled k (:func:`~explorer.core.mixtures.data_augmentation.posterior_parameters` and that module's draw).

Which rows enter the P-step is the choice of the MAP-EM fit (:mod:`explorer.core.mixtures.location_model`):
every row with an observed entry counts in :math:`n_k`; a missing category is drawn in the I-step but integrated
out of the level counts (a categorical factor sums to one); a row whose numbers are all missing is drawn in the
I-step but left out of the Gaussian posterior (integrated out, as EM does); a row with nothing observed is left out
of the P-step altogether. Leaving out a variable whose conditional given the label integrates to one gives the
collapsed Gibbs sampler of the same posterior (the I-step draws everything again from the new parameters), which
mixes faster than counting the drawn values.

The I-step reuses the Gaussian chain's pieces: the numeric conditional is the
:class:`~explorer.core.gaussians.conditional.ConditionalMixture` of the parameters (its weights times the observed
levels' probabilities are the responsibilities), labels are drawn as
:func:`explorer.core.mixtures.data_augmentation` draws them, and the numbers by the conditional with a one-hot
weight per row; the P-step's weights and numeric block are that module's P-step. So with no categorical column the
chain is the Gaussian one: from the same parameters and generator it visits the same states (exactly, when the
Gaussian chain takes its precision-side I-step: diagonal covariances, or rows not mostly missing; for mostly-missing
rows with full covariances that chain factors the observed blocks instead, an equivalent draw from other random
numbers, which this module does not use since mixed tables are narrow). With no numeric column only the
categorical parts remain.

API in the shape of :mod:`explorer.core.mixtures.data_augmentation`: :class:`LocationDAConfig`,
:class:`LocationDAState`, :func:`init` (the first I-step at given parameters, e.g. the MAP-EM fit), :func:`step`
(a P-step then an I-step), :func:`run` (burn-in and thinning); states are immutable, the generator is injected.
The data are a :class:`~explorer.core.mixtures.location_model.LocationData` (:func:`location_model.prepare
<explorer.core.mixtures.location_model.prepare>`), the prior the fit's resolved numeric prior
(``LocationState.prior``; None only without numeric columns).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from explorer.core.gaussians.conditional import ConditionalMixture
from explorer.core.loop import run_thinned
from explorer.core.mixtures import data_augmentation as da
from explorer.core.mixtures import location_model as lm
from explorer.core.mixtures.gap_draws import GapPlan, draw_labels_and_gaps
from explorer.core.validation import BadInputError, check_dirichlet

__all__ = ["LocationDAConfig", "LocationDAState", "init", "step", "run"]


@dataclass(frozen=True)
class LocationDAConfig:
    """Settings of the chain: ``n_burn``, ``n_thin``, ``alpha`` (the weights' Dirichlet) and ``covariance_type`` as
    :class:`~explorer.core.mixtures.data_augmentation.DAConfig` (:meth:`gaussian` is that config), and ``phi``, the
    symmetric Dirichlet parameter of every level table (>= 1; None: :math:`1 + 1/V_j` per column), as
    ``LocationConfig.phi``."""

    n_burn: int = 20
    n_thin: int = 5
    alpha: float = 1.0
    phi: float | None = None
    covariance_type: str = "full"

    def __post_init__(self):
        self.gaussian()  # checks n_burn, n_thin, alpha and covariance_type
        if self.phi is not None:
            check_dirichlet("phi", self.phi, why="the level tables' prior, as LocationConfig.phi")

    def gaussian(self) -> da.DAConfig:
        """The :class:`~explorer.core.mixtures.data_augmentation.DAConfig` of the weights and the numeric block."""
        return da.DAConfig(n_burn=self.n_burn, n_thin=self.n_thin, alpha=self.alpha,
                           covariance_type=self.covariance_type)


@dataclass(frozen=True)
class LocationDAState(da.DAState):
    """One state of the chain: the Gaussian chain's state (parameters of the weights and the numeric block, labels,
    completed numbers; caller's row order) with the level tables and the completed levels."""

    probs: tuple  # per categorical column, (K, V_j)
    codes: np.ndarray  # (n, J) int64: observed levels as given, missing ones drawn


def _state(iteration, weights, means, covariances, probs, labels, X, codes) -> LocationDAState:
    da._readonly(weights, means, covariances, *probs, labels, X, codes)
    return LocationDAState(iteration, weights, means, covariances, labels, X, probs=tuple(probs), codes=codes)


def _rows(data: lm.LocationData):
    """Caller's rows of the P-step: those with an observed entry, and those with an observed number."""
    fit = np.sort(data.perm[data.fit_p])
    numeric = fit[~data.missing[fit].all(axis=1)] if data.n_numeric else fit[:0]
    return fit, numeric


def _draw_levels(p: np.ndarray, labels: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One level per row from its component's level table ``p`` (K, V)."""
    u = rng.random(labels.size)
    return np.minimum((u[:, None] > np.cumsum(p, axis=1)[labels]).sum(axis=1), p.shape[1] - 1)


def _impute(data: lm.LocationData, weights, means, covariances, probs, covariance_type: str,
            rng: np.random.Generator, patterns=None, plan: GapPlan | None = None):
    """The I-step: ``(labels, X, codes)`` drawn at the parameters (caller's order). ``plan``: a
    :class:`~explorer.core.mixtures.gap_draws.GapPlan` of ``data.X``, which takes the compiled kernels where the
    E-step's rule does (the same draws to round-off)."""
    K = weights.shape[0]
    evidence = lm._to_original(lm._categorical_loglik(data, probs, K), data.perm)
    cm = None
    diag = data.n_numeric and covariance_type == "diag"
    fast = (data.n_numeric and not diag and plan is not None and plan.strategy(K) == "compiled")
    with np.errstate(divide="ignore"):  # a weight of exactly 0 is log-weight -inf
        if diag:  # the Gaussian chain's diagonal I-step: no per-pattern conditional to build
            log_resp = da._diag_log_weighted(data.X, weights, means, covariances) + evidence
        elif fast:  # labels and numbers drawn together, as below
            labels, X = draw_labels_and_gaps(plan, weights, means, covariances, rng, log_offset=evidence)
        elif data.n_numeric:
            cm = ConditionalMixture.from_gaussian_mixture(data.X, weights, means, covariances,
                                                          covariance_type=covariance_type, patterns=patterns)
            log_resp = np.log(cm.weights) + evidence  # the numbers' responsibilities times the levels' evidence
        else:
            log_resp = np.log(weights) + evidence
    if not fast:
        labels = da._draw_labels(log_resp, rng)
        X = np.array(data.X, dtype=float)
    if diag:
        X = da._diag_draw(data.X, labels, means, covariances, rng)
    elif cm is not None and data.missing.any():  # one-hot weights: the draw comes from the chosen component
        X = replace(cm, weights=np.eye(K)[labels]).sample(1, rng)[0]
    codes = np.array(data.codes)
    for j, p in enumerate(probs):
        miss = np.flatnonzero(codes[:, j] < 0)
        if miss.size:
            codes[miss, j] = _draw_levels(p, labels[miss], rng)
    return labels, X, codes


def _draw_parameters(state: LocationDAState, data: lm.LocationData, prior, config: LocationDAConfig,
                     rng: np.random.Generator):
    """The P-step: ``(weights, means, covariances, probs)`` from the conjugate posterior (see the module text)."""
    K = state.weights.shape[0]
    fit, numeric = _rows(data)
    weights = None
    if data.n_numeric:
        weights, means, covs = da._draw_parameters(state.X[numeric], state.labels[numeric], K, prior,
                                                   config.gaussian(), rng)
    else:
        means, covs = lm._empty_gaussian(K, config.covariance_type)
    if weights is None or numeric.size != fit.size:  # rows with levels but no number count in the weights too
        weights = rng.dirichlet(config.alpha + np.bincount(state.labels[fit], minlength=K))
    probs = []
    for j, (V, phi) in enumerate(zip(data.n_levels, lm._phis(config, data))):
        rows = fit[data.codes[fit, j] >= 0]  # observed cells only: a missing level is integrated out
        counts = np.bincount(state.labels[rows] * V + data.codes[rows, j], minlength=K * V).reshape(K, V)
        probs.append(np.array([rng.dirichlet(phi + counts[k]) for k in range(K)]))
    return weights, means, covs, tuple(probs)


def _check(data, weights, means, covariances, probs, config: LocationDAConfig):
    if not isinstance(data, lm.LocationData):
        raise BadInputError(f"data must be a LocationData (build it with location_model.prepare); got "
                            f"{type(data).__name__}.")
    K, D = (weights.shape[0] if weights.ndim == 1 else -1), data.n_numeric
    expected = (K, D, D) if config.covariance_type == "full" else (K, D)
    if K < 1 or means.shape != (K, D) or covariances.shape != expected:
        raise BadInputError(f"Parameters have shapes weights {weights.shape}, means {means.shape}, covariances "
                            f"{covariances.shape}; these data and config need {(K,)}, {(K, D)}, {expected}.")
    if tuple(p.shape for p in probs) != tuple((K, V) for V in data.n_levels):
        raise BadInputError(f"probs have shapes {[p.shape for p in probs]}; the data's levels need "
                            f"{[(K, V) for V in data.n_levels]}.")


def _check_prior(prior, data: lm.LocationData):
    if data.n_numeric:
        da._check_prior(prior)


def init(data: lm.LocationData, weights, means, covariances, probs, config: LocationDAConfig,
         rng: np.random.Generator) -> LocationDAState:
    """The chain's first state: an I-step at the given parameters (the MAP-EM fit's ``weights``, ``means``,
    ``covariances`` and ``probs``, one (K, V_j) array per categorical column; means (K, 0) without numbers)."""
    weights, means, covariances = (np.array(a, dtype=float) for a in (weights, means, covariances))
    probs = tuple(np.array(p, dtype=float) for p in probs)
    _check(data, weights, means, covariances, probs, config)
    labels, X, codes = _impute(data, weights, means, covariances, probs, config.covariance_type, rng)
    return _state(0, weights, means, covariances, probs, labels, X, codes)


def step(state: LocationDAState, data: lm.LocationData, prior, config: LocationDAConfig, rng: np.random.Generator,
         *, patterns=None, plan: GapPlan | None = None) -> LocationDAState:
    """One sweep: a P-step on the completed rows with an observed entry, then an I-step at the drawn parameters
    (``patterns``: :func:`~explorer.core.gaussians.patterns.group_patterns` of the numeric gaps, to skip grouping
    them again; ``plan``: a :class:`~explorer.core.mixtures.gap_draws.GapPlan` of ``data.X``, for the compiled
    I-step on larger data). ``prior``: the fit's resolved numeric prior (None only without numeric columns)."""
    _check_prior(prior, data)
    weights, means, covs, probs = _draw_parameters(state, data, prior, config, rng)
    if plan is not None:
        patterns = plan.patterns
    labels, X, codes = _impute(data, weights, means, covs, probs, config.covariance_type, rng, patterns, plan)
    return _state(state.iteration + 1, weights, means, covs, probs, labels, X, codes)


def run(state: LocationDAState, data: lm.LocationData, prior, config: LocationDAConfig, n_draws: int,
        rng: np.random.Generator, *, plan: GapPlan | None = None) -> list[LocationDAState]:
    """``n_draws`` states of the chain from ``state``: ``config.n_burn`` steps discarded, then one state kept every
    ``config.n_thin`` steps (a loop over :func:`step`; the numeric gaps are grouped and laid out once, in ``plan``,
    a :class:`~explorer.core.mixtures.gap_draws.GapPlan` of ``data.X``, by default one with ``strategy="auto"``)."""
    _check_prior(prior, data)
    if plan is None and data.n_numeric:
        plan = GapPlan(data.X)
    return run_thinned(lambda s: step(s, data, prior, config, rng, plan=plan), state, config.n_burn,
                       config.n_thin, n_draws)
