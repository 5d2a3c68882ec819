r"""Mixtures of factor analysers / of PPCA (MFA / MPPCA), fitted by EM on complete or incomplete data.

Model (antypas2023 §1.9, marlin2008 §3.4; Ghahramani & Hinton 1996, Tipping & Bishop 1999a):

.. math::

    p(x) = \sum_{k=1}^K \pi_k\, N(x;\ \mu_k,\ W_kW_k^\top + \Psi_k),

with :math:`W_k` (D, q) and diagonal :math:`\Psi_k` (FA) or :math:`\sigma_k^2 I` (PPCA).

**E-step.** For every component the factor posterior given the observed entries ``o`` of a row,
:math:`A_{o,k} = I + W_{k,o}^\top\Psi_{k,o}^{-1}W_{k,o}`, is factored once per distinct missingness
pattern (the shared kernel of :mod:`explorer.core.factor.fa_conditional`), and the responsibilities are

.. math::

    \log r_{nk} = \log\pi_k - \tfrac12\big[|o|\log 2\pi + \log|\Psi_{k,o}| + \log|A_{o,k}|
        + r_k^\top\Psi_{k,o}^{-1}r_k - b_k^\top\mu_{z|o,k}\big] - \log Z_n,

:math:`r_k = x_o - \mu_{k,o}`, :math:`b_k = W_{k,o}^\top\Psi_{k,o}^{-1}r_k`: antypas2023's eq. 2.47 with the
**signs corrected** (the document's :math:`+\tfrac12 r^\top\Psi^{-1}r - \tfrac12 b^\top\mu_z` would favour
distant components; its erratum), :math:`\log|\Psi_{k,o}|` summed over the observed entries only
(never :math:`|M\Psi M| = 0`), and marlin2008's erratum (the normaliser is :math:`|2\pi\Sigma|^{-1/2}`).

**M-step** (marlin2008 4.4.8-4.4.12). :math:`\pi_k = \frac1N\sum_n r_{nk}`, and per component the exact
single-FA M-step of :mod:`explorer.core.factor.factor_analysis` with every row weighted by :math:`r_{nk}`:
the joint :math:`[W_k, \mu_k]` from :math:`\sum_n r_{nk}E[x\tilde z^\top]` and
:math:`\sum_n r_{nk}E[\tilde z\tilde z^\top]` (expected sufficient statistics of the factors **and of
the missing entries**), :math:`\psi_{k,d}` the weighted residual over :math:`N_k = \sum_n r_{nk}`
(PPCA: pooled over the D features, marlin2008's 1/(N_kD)), floored at ``min_psi``. Each piece is the
exact maximiser of the expected complete-data log-likelihood, so the observed-data log-likelihood
never decreases (with ``reg = 0``; ``reg > 0`` adds a ridge to :math:`\sum_n r_{nk}T_n`, i.e. a
Gaussian prior on :math:`[W_k, \mu_k]`, which keeps a component that loses all its rows solvable).
With ``update="px"`` (default) each component's M-step ends with the PX-EM reduction of
:mod:`explorer.core.factor.factor_analysis` (same fixed points, much faster along the means).

**Initialisation** ``"kmeans"``: k-means with partial distances (:mod:`explorer.core.mixtures.kmeans`, no
value imputed), then per cluster the PPCA closed form of its partial covariance around the centre
(:math:`\Psi_k = \sigma_k^2 I` for FA too), :math:`\pi_k` = cluster fractions (antypas2023 §1.12).
``"random"``: the same from a uniformly random partition.

API as the single factor analyser: :func:`prepare`, :func:`init`, :func:`step`, :func:`fit`, frozen
states; :func:`log_likelihood`, :func:`responsibilities` and :func:`conditional`
(:class:`~explorer.core.factor.fa_conditional.MFAConditional`) for any rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from explorer.core.factor.fa_conditional import (
    FAParams,
    MFAConditional,
    _check_rows,
    _gram_of_inverse,
    _pattern_table,
    _readonly,
    component_posteriors,
    mix_log_likelihoods,
    mixture_conditional,
)
from explorer.core.factor.factor_analysis import (
    KINDS,
    STRATEGIES,
    FAData,
    _check_em_settings,
    _check_features,
    _check_n_factors,
    _EMResult,
    _LikelihoodObjective,
    _m_step,
    _partial_scatter,
    _ppca_from_covariance,
    _run_em,
    choose_strategy,
    estep_compiled,
    prepare,
)
from explorer.core.loop import ConvergenceWarning
from explorer.core.mixtures.kmeans import kmeans
from explorer.core.validation import BadInputError

__all__ = [
    "INIT_METHODS", "KINDS", "ConvergenceWarning", "MFAConfig", "MFAParams", "MFAResult", "MFAState",
    "conditional", "fit", "init", "init_from_parameters", "log_likelihood", "prepare", "resolve_strategy",
    "responsibilities", "snapshot", "step",
]

INIT_METHODS = ("kmeans", "random")


# ----------------------------------------------------------------------------- parameters
@dataclass(frozen=True, eq=False, slots=True)
class MFAParams:
    """Parameters of a mixture of factor analysers (read-only arrays).

    Attributes
    ----------
    weights : ndarray of shape (K,)
        Mixture weights, non-negative, summing to one.
    means : ndarray of shape (K, D)
    loadings : ndarray of shape (K, D, q)
    psi : ndarray of shape (K, D)
        Noise variances (> 0); equal within a component for PPCA.
    components : tuple of FAParams
        Component ``k`` as a single factor analyser (views of the arrays above).
    """

    weights: np.ndarray
    means: np.ndarray
    loadings: np.ndarray
    psi: np.ndarray
    components: tuple

    @classmethod
    def from_arrays(cls, weights, means, loadings, psi) -> MFAParams:
        """Validated read-only copies. ``psi`` may be (K, D), or (K,) for one variance per component (PPCA)."""
        try:
            w, mu = np.array(weights, dtype=float), np.array(means, dtype=float)
            W, psi = np.array(loadings, dtype=float), np.array(psi, dtype=float)
        except (TypeError, ValueError):
            raise BadInputError("weights, means, loadings and psi must be numeric arrays.") from None
        if w.ndim != 1 or mu.ndim != 2 or W.ndim != 3 or mu.shape[0] != w.size or W.shape[:2] != mu.shape:
            raise BadInputError(
                f"Need weights (K,), means (K, D) and loadings (K, D, q); got {w.shape}, {mu.shape} and {W.shape}."
            )
        if psi.shape == w.shape:
            psi = np.repeat(psi[:, None], mu.shape[1], axis=1)
        if psi.shape != mu.shape:
            raise BadInputError(f"psi has shape {psi.shape}; expected {mu.shape} (or {w.shape} for PPCA).")
        if not np.all(np.isfinite(w)) or np.any(w < 0) or not np.isclose(w.sum(), 1.0):
            raise BadInputError(f"weights must be non-negative and sum to one; got {w}.")
        comps = tuple(FAParams.from_arrays(mu[k], W[k], psi[k]) for k in range(w.size))
        _readonly(w, mu, W, psi)
        return cls(w, mu, W, psi, comps)

    @classmethod
    def from_components(cls, weights, components) -> MFAParams:
        """Stack single factor analysers (same D and q) with their weights."""
        comps = [_as_fa(c) for c in components]
        return cls.from_arrays(weights, [c.mean for c in comps], [c.loadings for c in comps], [c.psi for c in comps])

    @property
    def n_components(self) -> int:
        return self.weights.size

    @property
    def n_features(self) -> int:
        return self.means.shape[1]

    @property
    def n_factors(self) -> int:
        return self.loadings.shape[2]

    def covariances(self) -> np.ndarray:
        """Dense component covariances :math:`W_kW_k^\\top + \\Psi_k`, shape (K, D, D) (small D only)."""
        return np.stack([c.covariance() for c in self.components])


def _as_fa(obj) -> FAParams:
    if isinstance(obj, FAParams):
        return obj
    if hasattr(obj, "params"):
        return _as_fa(obj.params)
    raise BadInputError(f"Expected FAParams components, got {type(obj).__name__}.")


def _as_mfa(obj) -> MFAParams:
    if isinstance(obj, MFAParams):
        return obj
    for attr in ("params", "state"):
        if hasattr(obj, attr):
            return _as_mfa(getattr(obj, attr))
    raise BadInputError(f"Expected MFAParams, MFAState or MFAResult, got {type(obj).__name__}.")


# ----------------------------------------------------------------------------- using a model
def log_likelihood(model, X, missing=None) -> np.ndarray:
    """Observed-data log-likelihood :math:`\\log\\sum_k\\pi_k N(x_o; \\mu_{k,o}, \\Sigma_{k,oo})` per row, (n,).

    ``model`` is MFAParams / MFAState / MFAResult; rows with nothing observed get 0.
    """
    P = _as_mfa(model)
    _, miss, Xf = _check_rows(P.components[0], X, missing)
    pm, rp = _pattern_table(miss)
    return component_posteriors(P.components, P.weights, Xf, miss, pm, rp)[2]


def responsibilities(model, X, missing=None) -> np.ndarray:
    """Responsibilities :math:`p(k \\mid x_o)` given the observed entries, shape (n, K); rows sum to one."""
    P = _as_mfa(model)
    _, miss, Xf = _check_rows(P.components[0], X, missing)
    pm, rp = _pattern_table(miss)
    return np.exp(component_posteriors(P.components, P.weights, Xf, miss, pm, rp)[1])


def conditional(model, X, missing=None) -> MFAConditional:
    """:math:`p(x_m \\mid x_o)` of every row as a mixture of the components' conditional Gaussians."""
    P = _as_mfa(model)
    return mixture_conditional(P.components, P.weights, X, missing)


# ----------------------------------------------------------------------------- EM
@dataclass(frozen=True, slots=True)
class MFAConfig:
    """Settings of EM for a mixture of factor analysers / PPCA.

    Parameters
    ----------
    n_components : int
        Number of components K (>= 1).
    n_factors : int
        Latent dimension q of every component (1 <= q < n_features).
    kind : {"fa", "ppca"}
        Diagonal :math:`\\Psi_k` or isotropic :math:`\\sigma_k^2 I`.
    tol : float
        Stop when the mean (per fitted row) log-likelihood changes by less than ``tol``.
    max_iter : int
    min_psi : float
        Floor on every noise variance (> 0).
    init : {"kmeans", "random"}
        k-means (partial distances) or a random partition, then per-cluster PPCA.
    reg : float
        Ridge (>= 0) on :math:`\\sum_n r_{nk}E[\\tilde z\\tilde z^\\top]`; 0 is exact maximum-likelihood EM.
    update : {"px", "em"}
        Per-component M-step: marlin2008's joint :math:`[W_k, \\mu_k]` (``"em"``) or with the PX-EM
        reduction (``"px"``, default; :data:`explorer.core.factor.factor_analysis.UPDATES`).
    strategy : {"auto", "compiled", "numpy"}
        The E-step kernel of every component: factor analysis's compiled kernel
        (:mod:`explorer.core._compiled.factor`, one pass per component over the rows sorted by pattern) or the
        numpy one; the results agree to round-off. ``"auto"``:
        :func:`explorer.core.factor.factor_analysis.choose_strategy` with the work of all K components.
    """

    n_components: int = 2
    n_factors: int = 1
    kind: str = "fa"
    tol: float = 1e-6
    max_iter: int = 500
    min_psi: float = 1e-6
    init: str = "kmeans"
    reg: float = 0.0
    update: str = "px"
    strategy: str = "auto"

    def __post_init__(self):
        k = self.n_components
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)) or k < 1:
            raise BadInputError(f"n_components must be a positive integer, got {k!r}.")
        _check_em_settings(self, INIT_METHODS)
        if not (isinstance(self.reg, (int, float, np.floating)) and self.reg >= 0):
            raise BadInputError(f"reg must be a number >= 0, got {self.reg!r}.")
        if self.strategy not in STRATEGIES:
            raise BadInputError(f"strategy must be one of {STRATEGIES}, got {self.strategy!r}.")


@dataclass(frozen=True, eq=False, slots=True)
class MFAState(_LikelihoodObjective):
    """Parameters after ``iteration`` EM steps and the E-step at them (read-only arrays).

    Attributes
    ----------
    params : MFAParams
    log_likelihood : float
        Observed-data log-likelihood summed over the fitted rows.
    log_resp : ndarray of shape (n, K)
        Log-responsibilities on the observed entries (prior weights for empty rows).
    latent_mean : ndarray of shape (K, n, q)
        :math:`E[z \\mid x_o, k]`.
    latent_cov : ndarray of shape (K, U, q, q)
        :math:`A_{o,k}^{-1}` per component and distinct pattern (``FAData.row_pattern``). Memory is
        :math:`O(KUq^2)`: small on complete data or few masks (U = 1 for the thesis's training on
        complete images), large for random masks with big q (U ~ n).
    """

    iteration: int
    params: MFAParams
    log_likelihood: float
    log_resp: np.ndarray
    latent_mean: np.ndarray
    latent_cov: np.ndarray

    @property
    def resp(self) -> np.ndarray:
        return np.exp(self.log_resp)


@dataclass(frozen=True, eq=False, slots=True)
class MFAResult(_EMResult):
    """Outcome of :func:`fit`: final ``state`` (:class:`MFAState`), ``converged``, ``stop_reason``
    (``"tol"`` | ``"max_iter"`` | ``"degenerate"``), ``message``, ``n_iter``, ``trace`` of
    snapshots and the :class:`MFAConfig`."""


def resolve_strategy(data: FAData, config: MFAConfig) -> str:
    """The E-step kernel of a fit: ``"compiled"`` or ``"numpy"`` (see :class:`MFAConfig`)."""
    return choose_strategy(data, config.n_factors, config.strategy, config.n_components)


def _state(data: FAData, iteration: int, params: MFAParams, strategy: str = "numpy") -> MFAState:
    if strategy == "compiled":
        post = [estep_compiled(data, P) for P in params.components]
        log_resp, ll = mix_log_likelihoods([p[2] for p in post], params.weights, data.missing)
        y = np.stack([p[0] for p in post])
        cov = np.stack([p[1] for p in post])
    else:
        post, log_resp, ll = component_posteriors(
            params.components, params.weights, data.Xf, data.missing, data.pattern_missing, data.row_pattern
        )
        y = np.stack([p[0] for p in post])
        cov = np.stack([_gram_of_inverse(p[1]) for p in post])
    _readonly(log_resp, y, cov)
    return MFAState(iteration, params, float(ll[data.fit_rows].sum()), log_resp, y, cov)


def _check_sizes(data: FAData, n_components: int, n_factors: int) -> None:
    _check_n_factors(n_factors, data.n_features)
    if n_components > data.fit_rows.size:
        raise BadInputError(
            f"n_components={n_components} exceeds the number of rows with an observed value "
            f"({data.fit_rows.size}). Use fewer components or more rows."
        )


def _cluster_ppca(data: FAData, rows: np.ndarray, centre: np.ndarray, q: int, min_psi: float):
    """PPCA closed form of the partial covariance of ``rows`` around ``centre``: ``(W (D, q), sigma2)``."""
    S = _partial_scatter(data, rows, centre)
    S.flat[:: S.shape[0] + 1] += min_psi  # keeps the discarded eigenvalues >= min_psi
    # (on columns at 1e6 and beyond, min_psi is below the roundoff of S: the floor is then applied to sigma2)
    return _ppca_from_covariance(S, q, floor=min_psi)


def init(data: FAData, config: MFAConfig, rng: np.random.Generator) -> MFAState:
    """Initial state: k-means (or a random partition), then per-cluster PPCA (see the module docstring)."""
    K, q = config.n_components, config.n_factors
    _check_sizes(data, K, q)
    if not isinstance(rng, np.random.Generator):
        raise BadInputError("rng must be a numpy.random.Generator (np.random.default_rng(seed)).")
    rows = data.fit_rows
    obs = ~data.missing[rows]
    if config.init == "kmeans":
        centres, labels = kmeans(data.Xf[rows], obs, K, rng)
    else:
        labels = rng.permutation(np.arange(rows.size) % K)  # every cluster non-empty
        counts = np.stack([obs[labels == k].sum(axis=0) for k in range(K)])
        sums = np.stack([data.Xf[rows][labels == k].sum(axis=0) for k in range(K)])
        centres = np.where(counts > 0, sums / np.maximum(counts, 1), data.col_mean)
    D = data.n_features
    W, psi = np.empty((K, D, q)), np.empty((K, D))
    sizes = np.bincount(labels, minlength=K)
    for k in range(K):
        members = rows[labels == k] if sizes[k] > q else rows  # too few rows: the pooled spread
        W[k], s2 = _cluster_ppca(data, members, centres[k], q, config.min_psi)
        psi[k] = max(s2, config.min_psi)
    weights = np.maximum(sizes, 1) / np.maximum(sizes, 1).sum()
    return _state(data, 0, MFAParams.from_arrays(weights, centres, W, psi), resolve_strategy(data, config))


def init_from_parameters(data: FAData, params) -> MFAState:
    """State at iteration 0 from given parameters (MFAParams, or a state / result of another fit)."""
    P = _as_mfa(params)
    _check_features(P, data)
    return _state(data, 0, P)


def step(state: MFAState, data: FAData, config: MFAConfig) -> MFAState:
    """One EM iteration (weighted M-step per component from the cached E-step, then the E-step); pure."""
    resp = np.exp(state.log_resp[data.fit_rows])  # (N, K)
    nk = resp.sum(axis=0)
    comps = [
        _m_step(data, P, state.latent_mean[k], state.latent_cov[k], config.kind, config.min_psi,
                resp=resp[:, k], ridge=config.reg, expand=config.update == "px")
        for k, P in enumerate(state.params.components)
    ]
    return _state(data, state.iteration + 1, MFAParams.from_components(nk / nk.sum(), comps),
                  resolve_strategy(data, config))


def snapshot(state: MFAState) -> dict:
    """Small summary of a state for the trace."""
    P = state.params
    return {
        "iteration": state.iteration,
        "log_likelihood": state.log_likelihood,
        "weights": P.weights.copy(),
        "mean_psi": P.psi.mean(axis=1),
    }


def fit(
    data: FAData,
    config: MFAConfig,
    rng: np.random.Generator,
    *,
    callback: Callable[[MFAState], None] | None = None,
    init_state: MFAState | None = None,
) -> MFAResult:
    """EM from :func:`init` (or ``init_state``) until the per-row log-likelihood change is below
    ``tol`` (``stop_reason="tol"``), ``max_iter`` steps, or a degenerate factorisation
    (``"degenerate"``: a component lost all its rows; use ``reg > 0`` or fewer components).

    Warns
    -----
    ConvergenceWarning
        When it did not stop on the tolerance.
    """
    if not isinstance(config, MFAConfig):
        raise BadInputError(f"config must be an MFAConfig, got {type(config).__name__}.")
    return _run_em(MFAResult, data, config, rng, init, step, snapshot, callback, init_state)
