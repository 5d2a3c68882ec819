r"""Variational Dirichlet-process Gaussian mixture on incomplete data (the POIGMM).

Truncated stick-breaking variational family (Blei & Jordan 2006) with a Normal-Wishart base
measure, fitted directly on rows with missing entries (Garriga Alonso 2017; the
``garriga2017`` reference digest, sections 1.2-1.5 and 1.9, whose corrections are applied here).

Variational posterior (``K`` = truncation level)::

    q = prod_k Beta(v_k | gamma_k1, gamma_k2) * prod_k NW(mu_k, Lambda_k | m_k, beta_k, W_k, nu_k)
        * prod_n [ Mult(z_n | tau_n) * q(x_n^mis | z_n) ]

We store the scatter :math:`\Psi_k = W_k^{-1}` (never inverted explicitly; Cholesky factors only).

One :func:`step` (coordinate ascent, in this order; eta comes last because it needs tau and the
completions, and each state's ELBO is then evaluated at the full new q, exactly where
scikit-learn evaluates its lower bound; :func:`init_from_resp` is the matching first M-step):

1. **tau** (with the completions): for every row and component the conditional Gaussian
   :math:`q(x^m | z=k) = N(\hat x_{nk}^m, C_{nk})` under :math:`\hat\Sigma_k = \Psi_k/\nu_k`
   (this is the exact optimum of :math:`q(x^m|z)` given :math:`q(\mu_k, \Lambda_k)`), then
   :math:`\tau_{nk} \propto \exp(E[\log \pi_k] + E[\log N_{nk}])` with ``responsibilities``:

   * ``"corrected"``: marginal-Wishart form (digest 1.5a, corrected theorem 1.2),
     :math:`\nu' = \nu_k - D + |o|`,
     :math:`\tfrac12[\sum_{i\le|o|}\psi(\tfrac{\nu'+1-i}2) + |o|\log 2 - \log|\Psi^{oo}|]
     - \tfrac{|o|}2\log 2\pi - \tfrac12[|o|/\beta_k + \nu' d^\top(\Psi^{oo})^{-1}d]`;
   * ``"thesis"``: the printed eq. 3.17 (plain block :math:`W^{oo}`, Mahalanobis times
     :math:`\beta_k`, no :math:`|o|/\beta_k`), plus the row-only constants
     :math:`\tfrac{|o|}2(\log 2 - \log 2\pi)` so values are comparable; kept for comparison;
   * ``"augmented"``: :math:`E_{q(\theta)q(x^m|k)}[\log N(x_n;\mu_k,\Lambda_k)] + H[q(x^m|k)]`
     = :math:`\tfrac12[\sum_{i\le D}\psi(\tfrac{\nu_k+1-i}2) + D\log 2 - \log|\Psi^{oo}|]
     - \tfrac{|o|}2\log 2\pi - \tfrac{D}{2\beta_k} - \tfrac{\nu_k}2 d^\top(\Psi^{oo})^{-1}d
     - \tfrac{|m|}2\log\nu_k`. This is the exact coordinate-ascent update of the bound below
     and is what the author's code computes (digest 1.9, with its log-determinant bug fixed).
2. **gamma**: :math:`\gamma_{k1} = 1 + N_k`, :math:`\gamma_{k2} = \alpha + \sum_{j>k} N_j`.
3. **eta** (Bishop 10.60-10.63 with the :math:`1/N_k` typo removed), from the completed rows
   :math:`\tilde x_{nk}` and ``update``:

   * ``"principled"``: :math:`\tilde x_{nk} = [x^o; \hat x^m_{nk}]` and the scatter gets
     :math:`\sum_n \tau_{nk} C_{nk}` on the missing blocks (expected sufficient statistics);
   * ``"thesis"``: :math:`\tilde x_{nk} = [x^o; m_k^{mis}]` (previous means), no correction.

   :math:`\Psi_k = \Psi_0 + S_k + N_k\varepsilon I + \tfrac{\beta_0 N_k}{\beta_0+N_k}(\bar x_k - m_0)(\cdot)^\top`
   with :math:`\varepsilon` = ``reg_covar`` (scikit-learn's convention).

**ELBO.** With :math:`q(x^m|z)` a variational factor, :func:`elbo_terms` evaluates exactly

.. math:: L = E[\log p(X^o, X^m, Z, v, \mu, \Lambda)] - E[\log q(Z, X^m, v, \mu, \Lambda)]

(all normalising constants included; Bishop 10.70-10.77 plus the stick-breaking terms), over the
rows with at least one observed entry. With ``stick="truncated"`` it is a lower bound on
:math:`\log p(X^o)` for any state. With ``update="principled"``,
``responsibilities="augmented"`` and ``reg_covar=0`` every block update is an exact coordinate
maximisation, so :math:`L` never decreases (tested). With ``"corrected"`` responsibilities the
tau update maximises a different (marginal) objective and :math:`L` is reported but not
guaranteed monotone (small decreases, ~1e-4 nats, do occur on random data); ``reg_covar > 0``
also makes the eta update slightly off the exact optimum. With ``update="thesis"`` the completions are point masses, the entropy of
:math:`q(x^m)` is :math:`-\infty` and ``elbo`` is NaN (also at iteration 0 when data are
missing, since :func:`init` fills with cluster means). ``log_likelihood`` is always the
observed-data plug-in log-likelihood
:math:`\sum_n \log\sum_k E[\pi_k] N(x_n^o; m_k^o, \Psi_k^{oo}/\nu_k)`; :func:`fit` stops on the
per-row change of the ELBO when defined, else of that plug-in log-likelihood.

**Sticks.** ``stick="truncated"`` is Blei & Jordan's truncation (:math:`q(v_K=1)=1`, ``gamma``
has K-1 rows). ``stick="sklearn"`` is scikit-learn's ``BayesianGaussianMixture`` convention
(K Beta sticks, ``gamma`` has K rows, the leftover mass is dropped and ``E[pi]`` renormalised);
it exists so complete-data runs can be checked against scikit-learn to round-off.

``n_effective`` is the number of components with :math:`E[\pi_k] > 0.01`.

**E-step kernels.** ``VBConfig.strategy`` (see :func:`resolve_strategy`): ``"numpy"``, the reference, keeps
per-component pieces at the state's parameters in ``state.cache`` (log-densities, Mahalanobis distances, the
(K, N, D) completions and the conditional covariances per pattern) and the next :func:`step` computes tau and
the eta statistics from them. ``"compiled"`` (:mod:`explorer.core._compiled.vb_dpgmm`, em_gmm's engine design) makes
one numba pass over the rows sorted by pattern when a state is made, at its parameters: the plug-in
log-likelihood of the state and, for the next :func:`step`, tau, the entropy of :math:`q(x^m|z)` and the
statistics :math:`N_k, \bar x_k, S_k` (``cache["next"]``), without (K, N, D) arrays; the scratch buffers are
allocated once per data and K (:func:`workspace`, in ``EMData.cache``). Both give the same states to round-off
(tested to 1e-10). ``responsibilities="thesis"`` always uses ``"numpy"``.

**Prior scale.** ``covariance_prior="identity"`` (the default of :class:`VBConfig`, the thesis and the
author's code on standardised data): :math:`\Psi_0 = W_0^{-1}` with :math:`W_0` = identity (or the given
``W0``) and :math:`\nu_0 = D`, so an empty component's plug-in covariance :math:`\Psi_0/\nu_0` is
:math:`I/D`, far narrower than standardised data; on small data many narrow components survive (about
12 of 15 on 150-180 rows) and the 95 % intervals under-cover. ``covariance_prior="data"`` (what
:class:`explorer.impute.dp_mixture.DPGMMImputer` uses by default): :math:`\nu_0 = D + 2` and
:math:`\Psi_0 = \nu_0\hat\Sigma`, with :math:`\hat\Sigma` the data covariance
(:func:`explorer.core.mixtures.em_gmm.data_moments`: sample moments, or the ML single Gaussian when values are
missing, plus ``reg_covar`` on the diagonal). Then :math:`\Psi_k/\nu_k = (\nu_0\hat\Sigma + S_k + \ldots)
/ (\nu_0 + N_k)`: the prior acts as :math:`\nu_0` pseudo-rows with the data covariance, and every
component's Student-t predictive has :math:`\nu_k + 1 - D \ge 3` degrees of freedom (finite mean and
variance). :func:`resolve_prior` gives the prior of a fit; ``results/dpgmm_small_data.md`` measures both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy.special import betaln, digamma, gammaln, logsumexp

from explorer.core.gaussians.conditional import ConditionalMixture
from explorer.core.gaussians.gaussian import (
    LOG_2PI,
    DegenerateCovarianceError,
    cholesky,
    embed_add,
    observed_gaussian,
    precision_and_logdet,
)
from explorer.core.loop import run_restarts
from explorer.core.mixtures.em_gmm import ConvergenceWarning as _EMConvergenceWarning
from explorer.core.mixtures.em_gmm import EMConfig, EMData, data_moments, prepare
from explorer.core.mixtures.em_gmm import _layout as _em_layout
from explorer.core.mixtures.kmeans import kmeans
from explorer.core.validation import BadInputError

__all__ = [
    "INIT_METHODS",
    "RESPONSIBILITIES",
    "STICKS",
    "STRATEGIES",
    "UPDATES",
    "ConvergenceWarning",
    "VBConvergenceWarning",
    "VBConfig",
    "VBResult",
    "VBState",
    "VB_AUTO_COMPILED_MIN_WORK",
    "conditional",
    "elbo_terms",
    "expected_log_weights",
    "expected_weights",
    "fit",
    "init",
    "init_from_resp",
    "prepare",
    "resolve_prior",
    "resolve_strategy",
    "snapshot",
    "step",
    "predictive_conditional",
]

UPDATES = ("principled", "thesis")
RESPONSIBILITIES = ("corrected", "thesis", "augmented")
STICKS = ("truncated", "sklearn")
INIT_METHODS = ("kmeans", "random")
COVARIANCE_PRIORS = ("identity", "data")
STRATEGIES = ("auto", "compiled", "numpy")
_EPS10 = 10 * np.finfo(float).eps
_LOG2 = float(np.log(2.0))
WEIGHT_THRESHOLD = 1e-2


class VBConvergenceWarning(_EMConvergenceWarning):
    """The variational fit stopped before the tolerance was reached (a subclass of EM's warning)."""


#: Every core model module names its convergence warning ``ConvergenceWarning`` (the estimators read
#: ``module.ConvergenceWarning``); the class itself has a name of its own.
ConvergenceWarning = VBConvergenceWarning


def _is_int(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


@dataclass(frozen=True, slots=True)
class VBConfig:
    """Settings of the variational DP mixture (see the module docstring).

    Parameters
    ----------
    n_components : int
        Truncation level K.
    alpha : float or None
        DP concentration; None = 1/K (the author's code).
    mean_prior : array-like of shape (n_features,) or None
        :math:`m_0`; None = 0 (standardised data).
    beta0 : float
        :math:`\\beta_0 > 0`.
    W0 : array-like of shape (n_features, n_features) or None
        Wishart scale :math:`W_0` (SPD); None = identity with ``covariance_prior="identity"``.
        Only with ``covariance_prior="identity"``.
    covariance_prior : {"identity", "data"}
        ``"identity"``: :math:`\\Psi_0 = W_0^{-1}` (identity by default). ``"data"``:
        :math:`\\Psi_0 = \\nu_0\\hat\\Sigma`, the data covariance times :math:`\\nu_0`, set from the data
        by :func:`resolve_prior` (see the module docstring).
    nu0 : float or None
        Wishart degrees of freedom, > n_features - 1; None = n_features (``"identity"``) or
        n_features + 2 (``"data"``).
    update : {"principled", "thesis"}
    responsibilities : {"corrected", "thesis", "augmented"}
    stick : {"truncated", "sklearn"}
    reg_covar : float
        >= 0, added as :math:`N_k \\varepsilon I` to the scatter.
    tol : float
        Tolerance on the per-row change of the objective.
    max_iter, n_init : int
    init : {"kmeans", "random"}
    strategy : {"auto", "compiled", "numpy"}
        The E-step kernel (see :func:`resolve_strategy`): ``"compiled"`` is one numba pass over the rows
        sorted by pattern (:mod:`explorer.core._compiled.vb_dpgmm`, no (K, N, D) completions); ``"numpy"`` the
        reference path (per-component pieces, the completions held in the state's cache). Both give the same
        states to round-off.
    """

    n_components: int = 15
    alpha: float | None = None
    mean_prior: object = None
    beta0: float = 1.0
    W0: object = None
    covariance_prior: str = "identity"
    nu0: float | None = None
    update: str = "principled"
    responsibilities: str = "corrected"
    stick: str = "truncated"
    reg_covar: float = 1e-6
    tol: float = 1e-3
    max_iter: int = 100
    init: str = "kmeans"
    n_init: int = 1
    strategy: str = "auto"

    def __post_init__(self):
        if not _is_int(self.n_components) or self.n_components < 1:
            raise BadInputError(f"n_components must be a positive integer, got {self.n_components!r}.")
        for name in ("alpha", "nu0"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, (int, float, np.number)) and np.isfinite(v) and v > 0):
                raise BadInputError(f"{name} must be a positive number or None, got {v!r}.")
        if not (isinstance(self.beta0, (int, float, np.number)) and np.isfinite(self.beta0) and self.beta0 > 0):
            raise BadInputError(f"beta0 must be a positive number, got {self.beta0!r}.")
        for name, allowed in (("update", UPDATES), ("responsibilities", RESPONSIBILITIES),
                              ("stick", STICKS), ("init", INIT_METHODS), ("covariance_prior", COVARIANCE_PRIORS),
                              ("strategy", STRATEGIES)):
            if getattr(self, name) not in allowed:
                raise BadInputError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}.")
        if not self.reg_covar >= 0:
            raise BadInputError(f"reg_covar must be >= 0, got {self.reg_covar!r}.")
        if not self.tol >= 0:
            raise BadInputError(f"tol must be >= 0, got {self.tol!r}.")
        if not _is_int(self.max_iter) or self.max_iter < 0:
            raise BadInputError(f"max_iter must be a non-negative integer, got {self.max_iter!r}.")
        if not _is_int(self.n_init) or self.n_init < 1:
            raise BadInputError(f"n_init must be a positive integer, got {self.n_init!r}.")
        # arrays are stored as (nested) tuples so that configs stay hashable and comparable
        for name, ndim in (("mean_prior", 1), ("W0", 2)):
            v = getattr(self, name)
            if v is None:
                continue
            try:
                a = np.array(v, dtype=float)
            except (TypeError, ValueError):
                raise BadInputError(f"{name} must be numeric, got {v!r}.") from None
            if a.ndim != ndim or not np.all(np.isfinite(a)):
                raise BadInputError(f"{name} must be a finite {ndim}-D array, got shape {a.shape}.")
            object.__setattr__(self, name, tuple(map(tuple, a)) if ndim == 2 else tuple(a.tolist()))
        if self.covariance_prior == "data" and self.W0 is not None:
            raise BadInputError("W0 sets the Wishart scale by hand and covariance_prior='data' sets it from the data: "
                                "give one of them (W0 with covariance_prior='identity').")

    def prior(self, n_features: int, data_covariance=None) -> dict:
        """Validated prior ``{alpha, m0, beta0, Psi0, logdet_Psi0, nu0}`` for ``n_features`` columns.

        ``data_covariance`` (D, D) is :math:`\\hat\\Sigma`, needed with ``covariance_prior="data"``
        (:func:`resolve_prior` computes it from the data).
        """
        D = n_features
        m0 = np.zeros(D) if self.mean_prior is None else np.array(self.mean_prior, dtype=float)
        if m0.shape != (D,) or not np.all(np.isfinite(m0)):
            raise BadInputError(f"mean_prior must be a finite vector of length {D}, got shape {m0.shape}.")
        default_nu0 = float(D) if self.covariance_prior == "identity" else float(D + 2)
        nu0 = default_nu0 if self.nu0 is None else float(self.nu0)
        if nu0 <= D - 1:
            raise BadInputError(f"nu0 must be > n_features - 1 = {D - 1}, got {nu0}.")
        if self.covariance_prior == "data":
            if data_covariance is None:
                raise BadInputError("covariance_prior='data' sets the prior from the data: use resolve_prior(data, "
                                    "config), or pass data_covariance.")
            C = np.array(data_covariance, dtype=float)
            if C.shape != (D, D) or not np.all(np.isfinite(C)):
                raise BadInputError(f"data_covariance must be a finite ({D}, {D}) matrix, got shape {C.shape}.")
            Psi0 = nu0 * 0.5 * (C + C.T)
            try:
                _, ldP = precision_and_logdet(Psi0[None])
            except DegenerateCovarianceError:
                raise BadInputError("The data covariance is not positive definite (a constant column, or columns that "
                                    "are exact combinations of others): drop such columns or set reg_covar > 0.") from None
            ld0 = float(ldP[0])
        elif self.W0 is None:
            Psi0, ld0 = np.eye(D), 0.0
        else:
            W0 = np.array(self.W0, dtype=float)
            if W0.shape != (D, D) or not np.all(np.isfinite(W0)) or not np.allclose(W0, W0.T):
                raise BadInputError(f"W0 must be a finite symmetric ({D}, {D}) matrix, got shape {W0.shape}.")
            try:
                P, ldW = precision_and_logdet(W0[None])
            except DegenerateCovarianceError:
                raise BadInputError("W0 must be positive definite (it is the Wishart scale matrix).") from None
            Psi0, ld0 = P[0], -float(ldW[0])
        alpha = 1.0 / self.n_components if self.alpha is None else float(self.alpha)
        return {"alpha": alpha, "m0": m0, "beta0": float(self.beta0), "Psi0": Psi0, "logdet_Psi0": ld0, "nu0": nu0}


@dataclass(frozen=True, eq=False, slots=True)
class VBState:
    """Variational parameters after ``iteration`` steps (arrays read-only).

    Attributes
    ----------
    resp : ndarray (n_samples, K)
        :math:`\\tau` (rows with nothing observed get ``weights``).
    gamma : ndarray (K-1, 2) or (K, 2) for ``stick="sklearn"``
    means, beta, nu, scatter : ndarrays (K, D), (K,), (K,), (K, D, D)
        Normal-Wishart parameters :math:`m_k, \\beta_k, \\nu_k, \\Psi_k = W_k^{-1}`.
    weights : ndarray (K,)
        :math:`E_q[\\pi_k]`.
    elbo : float
        Evidence lower bound (NaN when undefined, see the module docstring).
    log_likelihood : float
        Observed-data plug-in log-likelihood of :math:`(E[\\pi], m_k, \\Psi_k/\\nu_k)`.
    n_effective : int
        Number of components with ``weights > 0.01``.
    """

    iteration: int
    resp: np.ndarray
    gamma: np.ndarray
    means: np.ndarray
    beta: np.ndarray
    nu: np.ndarray
    scatter: np.ndarray
    weights: np.ndarray
    elbo: float
    log_likelihood: float
    n_effective: int
    cache: dict = field(repr=False)  # pieces at these parameters, in the sorted layout (see _pieces)

    @property
    def n_components(self) -> int:
        return self.weights.shape[0]

    @property
    def covariances(self) -> np.ndarray:
        """Plug-in covariances :math:`\\hat\\Sigma_k = \\Psi_k / \\nu_k`, shape (K, D, D)."""
        return self.scatter / self.nu[:, None, None]

    @property
    def objective(self) -> float:
        """The ELBO when defined, else the plug-in log-likelihood (what :func:`fit` monitors)."""
        return self.elbo if np.isfinite(self.elbo) else self.log_likelihood


@dataclass(frozen=True, eq=False, slots=True)
class VBResult:
    """Outcome of :func:`fit`: kept restart's final state, stop reason and trace."""

    state: VBState
    converged: bool
    stop_reason: str  # "tol" | "max_iter" | "degenerate"
    message: str
    n_iter: int
    trace: tuple
    restart_objectives: tuple
    config: VBConfig


def _readonly(*arrays):
    for a in arrays:
        if isinstance(a, np.ndarray):
            a.setflags(write=False)


def _digamma_sum(nu: np.ndarray, count: int) -> np.ndarray:
    """:math:`\\sum_{i=1}^{count} \\psi((\\nu + 1 - i)/2)` for an array of ``nu``."""
    i = np.arange(1, count + 1)
    return digamma((np.asarray(nu)[..., None] + 1 - i) / 2).sum(axis=-1)


def _multigammaln(a: np.ndarray, D: int) -> np.ndarray:
    """:func:`scipy.special.multigammaln` for an array ``a`` (one call of gammaln; a > (D - 1) / 2)."""
    return 0.25 * D * (D - 1) * np.log(np.pi) + gammaln(a[:, None] - 0.5 * np.arange(D)).sum(axis=1)


def expected_log_weights(gamma: np.ndarray, stick: str = "truncated") -> np.ndarray:
    """:math:`E[\\log \\pi_k] = E[\\log v_k] + \\sum_{j<k} E[\\log(1-v_j)]`, shape (K,)."""
    s = digamma(gamma.sum(axis=1))
    ea, eb = digamma(gamma[:, 0]) - s, digamma(gamma[:, 1]) - s
    if stick == "truncated":  # q(v_K = 1) = 1
        return np.append(ea, 0.0) + np.concatenate(([0.0], np.cumsum(eb)))
    return ea + np.concatenate(([0.0], np.cumsum(eb)[:-1]))


def expected_weights(gamma: np.ndarray, stick: str = "truncated") -> np.ndarray:
    """:math:`E_q[\\pi_k]` (independent sticks), shape (K,); sums to one."""
    ev = gamma[:, 0] / gamma.sum(axis=1)
    rest = np.concatenate(([1.0], np.cumprod(1.0 - ev)))
    if stick == "truncated":
        return np.append(ev, 1.0) * rest
    w = ev * rest[:-1]
    return w / w.sum()


def _pieces(data: EMData, means, scatter, need_thesis: bool) -> dict:
    """Per-row, per-component quantities at (m_k, Psi_k), rows of the fit in the sorted layout.

    ``ll`` = log N(x^o; m^o, Psi^oo), ``maha`` = d^T (Psi^oo)^{-1} d, ``xhat`` conditional means
    (K, n, D) and ``cond`` the conditional covariances of Psi (divide by nu_k for Sigma_hat);
    with ``need_thesis`` also log|W^oo| and d^T W^oo d (plain blocks of W = Psi^{-1}).
    """
    p, n_fit = data.patterns, data.n_fit
    K, D = means.shape
    W, logdet = precision_and_logdet(scatter)
    n_obs = D - p.missing[:n_fit].sum(axis=1)
    ll, maha = np.empty((n_fit, K)), np.empty((n_fit, K))
    xhat = np.empty((K,) + data.Xp.shape)
    cond = []
    d2 = np.empty(data.Xp.shape[0])
    for k in range(K):
        l1, _, cc = observed_gaussian(data.Xp, p, means[k], W[k], logdet[k], out=xhat[k], maha_out=d2)
        ll[:, k] = l1[:n_fit]
        maha[:, k] = d2[:n_fit]
        cond.append(tuple(cc))
    out = {"ll": ll, "maha": maha, "xhat": xhat, "cond": tuple(cond), "logdet": logdet, "n_obs": n_obs}
    if need_thesis:
        ldw = np.broadcast_to(-logdet, (n_fit, K)).copy()  # log|W^oo| = log|W| + log|Psi^mm|
        for g in p.groups:
            if g.n_missing:
                um = g.unique_mis
                L = cholesky(scatter[:, um[:, :, None], um[:, None, :]], what="missing block of the scatter")
                ldmm = 2.0 * np.log(np.diagonal(L, axis1=-2, axis2=-1)).sum(axis=-1)  # (K, U)
                ldw[g.rows] += ldmm[:, g.inverse].T
        diff = np.where(p.missing[:n_fit, None, :], 0.0, data.Xp[:n_fit, None, :] - means[None])
        out["logdet_Woo"] = ldw
        out["quad_Woo"] = np.einsum("nkd,kde,nke->nk", diff, W, diff)
    _readonly(ll, maha, xhat)
    return out


def _expected_log_lik(pc: dict, beta, nu, D: int, kind: str) -> np.ndarray:
    """:math:`E[\\log N_{nk}]` of the ``responsibilities`` rule ``kind``, shape (n_fit, K)."""
    ll, maha, o = pc["ll"], pc["maha"], pc["n_obs"]
    out = np.empty_like(ll)
    if kind == "augmented":
        mis = (D - o)[:, None]
        return (ll + 0.5 * _digamma_sum(nu, D) + 0.5 * D * _LOG2 - 0.5 * D / beta
                - 0.5 * (nu - 1.0) * maha - 0.5 * mis * np.log(nu))
    for oc in np.unique(o):
        rows = o == oc
        nup = nu - D + oc  # (K,)
        dsum = _digamma_sum(nup, int(oc))
        if kind == "corrected":
            out[rows] = (ll[rows] + 0.5 * dsum + 0.5 * oc * _LOG2 - 0.5 * oc / beta
                         - 0.5 * (nup - 1.0) * maha[rows])
        else:  # literal thesis eq. 3.17 (+ row constants |o|/2 (log 2 - log 2 pi))
            out[rows] = (0.5 * pc["logdet_Woo"][rows] + 0.5 * dsum - 0.5 * beta * nup * pc["quad_Woo"][rows]
                         + 0.5 * oc * (_LOG2 - LOG_2PI))
    return out


def _plugin_loglik(pc: dict, log_w, nu) -> np.ndarray:
    """Per-row :math:`\\log\\sum_k E[\\pi_k] N(x^o; m_k^o, \\Psi_k^{oo}/\\nu_k)` (fit rows, layout)."""
    o = pc["n_obs"][:, None]
    with np.errstate(divide="ignore"):
        return logsumexp(log_w + pc["ll"] + 0.5 * o * np.log(nu) + 0.5 * (1.0 - nu) * pc["maha"], axis=1)


def _gamma(nk: np.ndarray, alpha: float, stick: str) -> np.ndarray:
    tail = np.concatenate((np.cumsum(nk[::-1])[-2::-1], [0.0]))
    g = np.stack((1.0 + nk, alpha + tail), axis=1)
    return g[:-1] if stick == "truncated" else g


def _eta(tau, xt, cond, nu_prev, data: EMData, prior: dict, reg_covar: float):
    """Normal-Wishart update from responsibilities and completed rows; also the statistics."""
    K, _, D = xt.shape
    nk = tau.sum(axis=0) + _EPS10
    xbar = np.einsum("nk,knd->kd", tau, xt) / nk[:, None]
    S = np.empty((K, D, D))
    for k in range(K):
        diff = xt[k] - xbar[k]
        S[k] = (tau[:, k, None] * diff).T @ diff
        if cond is not None:
            for g, q in zip(data.patterns.groups, cond[k]):
                if g.n_missing:
                    w = np.bincount(g.inverse, weights=tau[g.rows, k], minlength=g.n_unique)
                    embed_add(S[k], g, q / nu_prev[k], w)
        S[k] = 0.5 * (S[k] + S[k].T)
    stats = {"nk": nk, "xbar": xbar, "S": S}
    return (stats,) + _eta_from_stats(stats, prior, reg_covar)


def _eta_from_stats(stats: dict, prior: dict, reg_covar: float):
    """Normal-Wishart parameters (beta, nu, means, scatter) from the statistics ``nk``, ``xbar``, ``S``."""
    nk, xbar, S = stats["nk"], stats["xbar"], stats["S"]
    D = xbar.shape[1]
    beta, nu = prior["beta0"] + nk, prior["nu0"] + nk
    means = (prior["beta0"] * prior["m0"] + nk[:, None] * xbar) / beta[:, None]
    dm = xbar - prior["m0"]
    scatter = (prior["Psi0"] + S + (nk * reg_covar)[:, None, None] * np.eye(D)
               + (prior["beta0"] * nk / beta)[:, None, None] * dm[:, :, None] * dm[:, None, :])
    return beta, nu, means, scatter


def elbo_terms(tau, entropy_xmis, stats, gamma, means, beta, nu, scatter, prior: dict, stick: str, *,
               precision_logdet=None) -> dict:
    """Terms of the evidence lower bound (all constants included); ``sum(values)`` is the ELBO.

    Parameters
    ----------
    tau : ndarray (n_fit, K)
    entropy_xmis : float
        :math:`\\sum_{n,k}\\tau_{nk} H[q(x_n^m | z_n = k)]` (0 for complete data).
    stats : dict
        ``nk`` (K,), ``xbar`` (K, D) and ``S`` (K, D, D): the tau-weighted expected statistics of
        the completed rows, :math:`S_k = \\sum_n\\tau_{nk}[(\\tilde x-\\bar x)(\\cdot)^\\top + C_{nk}]`.
    gamma, means, beta, nu, scatter, prior, stick
        Current variational and prior parameters.
    precision_logdet : tuple, optional
        ``precision_and_logdet(scatter)`` when the caller has it.
    """
    _K, D = means.shape
    W, ld = precision_and_logdet(scatter) if precision_logdet is None else precision_logdet
    ld0, nu0, b0, m0 = prior["logdet_Psi0"], prior["nu0"], prior["beta0"], prior["m0"]
    elog_lam = _digamma_sum(nu, D) + D * _LOG2 - ld
    nk, xbar, S = tau.sum(axis=0), stats["xbar"], stats["S"]
    dx = xbar - means
    trace_x = np.einsum("kde,kde->k", W, S + nk[:, None, None] * dx[:, :, None] * dx[:, None, :])
    t = {}
    t["log_lik"] = float(np.sum(0.5 * nk * (elog_lam - D / beta - D * LOG_2PI) - 0.5 * nu * trace_x))
    dm = means - m0
    log_b0 = 0.5 * nu0 * ld0 - 0.5 * nu0 * D * _LOG2 - _multigammaln(np.array([0.5 * nu0]), D)[0]
    log_b = 0.5 * nu * ld - 0.5 * nu * D * _LOG2 - _multigammaln(0.5 * nu, D)
    t["log_p_theta"] = float(np.sum(
        0.5 * (D * np.log(b0 / (2 * np.pi)) + elog_lam - D * b0 / beta - b0 * nu * np.einsum("kd,kde,ke->k", dm, W, dm))
        + log_b0 + 0.5 * (nu0 - D - 1) * elog_lam - 0.5 * nu * np.einsum("de,ked->k", prior["Psi0"], W)))
    h_wishart = -log_b - 0.5 * (nu - D - 1) * elog_lam + 0.5 * nu * D
    t["neg_log_q_theta"] = -float(np.sum(0.5 * elog_lam + 0.5 * D * np.log(beta / (2 * np.pi)) - 0.5 * D - h_wishart))
    t["log_p_z"] = float(np.sum(tau @ expected_log_weights(gamma, stick)))
    with np.errstate(divide="ignore", invalid="ignore"):
        t["neg_log_q_z"] = -float(np.sum(np.where(tau > 0, tau * np.log(tau), 0.0)))
    s = digamma(gamma.sum(axis=1))
    ea, eb = digamma(gamma[:, 0]) - s, digamma(gamma[:, 1]) - s
    alpha = prior["alpha"]
    t["log_p_v"] = float(np.sum(np.log(alpha) + (alpha - 1.0) * eb))
    t["neg_log_q_v"] = -float(np.sum((gamma[:, 0] - 1) * ea + (gamma[:, 1] - 1) * eb - betaln(gamma[:, 0], gamma[:, 1])))
    t["entropy_xmis"] = float(entropy_xmis)
    return t


#: ``strategy="auto"`` takes the compiled VB E-step from this many rows x components x features in a fresh process
#: (EM's threshold is 200,000): the numpy VB step factors every component's observed blocks, so it costs several
#: times EM's. ``results/vb_auto_threshold.md`` (fresh processes): at Boston's size with K = 15 (98,670) a first
#: compiled fit, load included, took 0.38 s against numpy's 0.40 s (0.06 against 0.61 s once loaded); below 50,000
#: numpy's first fits took 0.10-0.80 s against 0.36-0.45 s compiled, so numpy stays for small interactive data.
VB_AUTO_COMPILED_MIN_WORK = 50_000


def resolve_strategy(data: EMData, config: VBConfig) -> str:
    """The E-step kernel a fit uses: ``"compiled"`` or ``"numpy"``.

    ``responsibilities="thesis"`` (the printed eq. 3.17, kept for comparison: it needs the plain blocks
    :math:`W^{oo}`) always uses ``"numpy"``. ``"auto"`` follows :func:`explorer.core.mixtures.em_gmm.resolve_strategy`
    with its own threshold: ``"compiled"`` when the compiled VB E-step has already run in this process or rows x
    components x features is at least :data:`VB_AUTO_COMPILED_MIN_WORK`, and numba imports, else ``"numpy"`` (small
    interactive data never wait for the first compiled call, about 0.4-0.6 s with a filled numba cache; once it is
    paid, the compiled step is the faster one).
    """
    if config.responsibilities == "thesis":
        return "numpy"
    if config.strategy != "auto":
        return config.strategy
    key = ("vb auto strategy", config.n_components)
    chosen = data.cache.get(key)  # once per data and K: a fit never switches kernel half-way
    if chosen is None:
        from explorer.core._compiled import compiled_or_numpy

        work = data.n_fit * config.n_components * data.n_features
        chosen = data.cache[key] = compiled_or_numpy("vb_dpgmm", work, VB_AUTO_COMPILED_MIN_WORK)
    return chosen


def workspace(data: EMData, n_components: int):
    """The compiled VB E-step's scratch buffers for this data and K (allocated once per data, cached)."""
    from explorer.core._compiled.vb_dpgmm import VBWorkspace

    key = ("vb_workspace", n_components)
    ws = data.cache.get(key)
    if ws is None:
        ws = data.cache[key] = VBWorkspace(_em_layout(data, EMConfig(n_components=n_components)), n_components)
    return ws


def _coefficients(D: int, beta, nu, logdet, kind: str) -> np.ndarray:
    """(5, D + 1, K): the affine coefficients of :func:`explorer.core._compiled.vb_dpgmm._solve_block_vb` by the
    number of observed entries o (row o = 0 unused): log rho = ll + a + b maha (``kind``), plug-in
    ll + 0.5 o log nu + 0.5 (1 - nu) maha, entropy constant 0.5 (D - o)(1 + log 2 pi - log nu)."""
    K = nu.shape[0]
    o = np.arange(D + 1, dtype=float)[:, None]
    coef = np.zeros((5, D + 1, K))
    lognu = np.log(nu)
    if kind == "augmented":
        coef[0] = 0.5 * _digamma_sum(nu, D) + 0.5 * D * _LOG2 - 0.5 * D / beta - 0.5 * (D - o) * lognu
        coef[1] = -0.5 * (nu - 1.0)
    else:  # corrected: nu' = nu - D + o and sum_{i<=o} psi((nu' + 1 - i) / 2) = sum_{j<o} psi((nu - D + 1 + j) / 2)
        dsum = np.cumsum(digamma((nu[None, :] - D + 1 + np.arange(D)[:, None]) / 2), axis=0)  # (D, K): o = j + 1
        coef[0, 1:] = 0.5 * dsum + 0.5 * o[1:] * _LOG2 - 0.5 * o[1:] / beta
        coef[1] = -0.5 * (nu - D + o - 1.0)
    coef[2] = 0.5 * o * lognu
    coef[3] = 0.5 * (1.0 - nu)
    coef[4] = 0.5 * (D - o) * (1.0 + LOG_2PI - lognu)
    return coef


def _compiled_pass(data: EMData, config: VBConfig, means, beta, nu, scatter, gamma, weights, precision_logdet=None):
    """The compiled E-step at these parameters: (plug-in log-likelihood, the next step's tau / stats / entropy)."""
    from explorer.core._compiled.vb_dpgmm import NotPositiveDefinite, VBWorkspace, estep

    K, D = means.shape
    W, logdet = precision_and_logdet(scatter) if precision_logdet is None else precision_logdet
    coef = _coefficients(D, beta, nu, logdet, config.responsibilities)
    principled = config.update == "principled"
    with np.errstate(divide="ignore"):
        logw = np.log(weights)
    ws = workspace(data, K)
    if not ws.lock.acquire(blocking=False):  # another thread steps on the same data: private scratch
        ws = VBWorkspace(ws.layout, K, ws.block_rows)
        ws.lock.acquire()
    try:
        tau, nk_raw, first, second, entropy, plug = estep(
            ws, means, W, logdet, coef, expected_log_weights(gamma, config.stick), logw, cond_mean=principled,
            cond_scale=1.0 / nu if principled else None)
    except NotPositiveDefinite as exc:
        raise DegenerateCovarianceError(
            f"The missing block of a scatter matrix (component {exc.args[0]}) is not positive definite: a component "
            "collapsed. Increase reg_covar or use fewer components.") from None
    finally:
        ws.lock.release()
    # statistics about the means m_k -> about the weighted means (as _eta computes them)
    nk = nk_raw + _EPS10
    xbar = means + first / nk[:, None]
    S = second - (2.0 / nk - nk_raw / nk**2)[:, None, None] * first[:, :, None] * first[:, None, :]
    S = 0.5 * (S + S.transpose(0, 2, 1))
    if not principled:
        entropy = float("nan") if data.patterns.missing[: data.n_fit].any() else 0.0
    return plug, {"tau": tau, "stats": {"nk": nk, "xbar": xbar, "S": S}, "entropy": entropy,
                  "key": _pass_key(config)}


def _pass_key(config: VBConfig) -> tuple:
    """The settings a compiled pass depends on (a state stepped under other settings redoes the pass)."""
    return (config.update, config.responsibilities, config.stick)


def _make_state(data, config, prior, iteration, tau, gamma, stats, means, beta, nu, scatter, entropy) -> VBState:
    """Assemble a state: ELBO (NaN if ``entropy`` is NaN), the E-step at the new parameters, plug-in LL.

    ``"numpy"``: the per-component pieces at the new parameters (the next :func:`step` computes tau and the
    completions from them). ``"compiled"``: one compiled pass at the new parameters gives the plug-in
    log-likelihood and the next step's tau, statistics and entropy (``cache["next"]``).
    """
    weights = expected_weights(gamma, config.stick)
    prec = None
    if resolve_strategy(data, config) == "compiled":
        prec = precision_and_logdet(scatter)
        ll, nxt = _compiled_pass(data, config, means, beta, nu, scatter, gamma, weights, prec)
        pc = {"next": nxt}
    else:
        pc = _pieces(data, means, scatter, config.responsibilities == "thesis")
        ll = None
    terms = None
    if np.isfinite(entropy):
        terms = elbo_terms(tau, entropy, stats, gamma, means, beta, nu, scatter, prior, config.stick,
                           precision_logdet=prec)
        elbo = float(sum(terms.values()))
    else:
        elbo = float("nan")
    if ll is None:
        with np.errstate(divide="ignore"):
            ll = float(_plugin_loglik(pc, np.log(weights), nu).sum())
    if not np.isfinite(ll):
        raise DegenerateCovarianceError("The plug-in log-likelihood is not finite: a component collapsed. "
                                        "Increase reg_covar or use fewer components.")
    resp = np.empty((data.n_samples, tau.shape[1]))
    resp[data.patterns.perm[: data.n_fit]] = tau
    resp[data.patterns.perm[data.n_fit:]] = weights
    cache = dict(pc, tau=tau, stats=stats, prior=prior, elbo_terms=terms)
    _readonly(tau, gamma, means, beta, nu, scatter, weights, resp)
    return VBState(iteration=iteration, resp=resp, gamma=gamma, means=means, beta=beta, nu=nu, scatter=scatter,
                   weights=weights, elbo=elbo, log_likelihood=ll,
                   n_effective=int(np.sum(weights > WEIGHT_THRESHOLD)), cache=cache)


def resolve_prior(data: EMData, config: VBConfig) -> dict:
    """The prior of a fit: :meth:`VBConfig.prior` with :math:`\\hat\\Sigma` from ``data`` when
    ``covariance_prior="data"``.

    :math:`\\hat\\Sigma` is :func:`explorer.core.mixtures.em_gmm.data_moments` at K = 1 (the sample covariance,
    divisor n, of complete data; the ML single Gaussian fitted by EM on incomplete data) plus
    ``reg_covar`` on the diagonal.
    """
    if config.covariance_prior != "data":
        return config.prior(data.n_features)
    _, cov = data_moments(data, EMConfig(n_components=1, covariance_type="full", reg_covar=config.reg_covar))
    return config.prior(data.n_features, data_covariance=cov)


def init_from_resp(data: EMData, config: VBConfig, resp) -> VBState:
    """Iteration-0 state from responsibilities (n_samples, K) in the caller's row order.

    gamma and eta are computed from ``resp`` with the missing entries filled by each component's
    tau-weighted observed column means (no covariance correction), as scikit-learn's
    ``_initialize`` does on complete data. The ELBO is NaN if a fitted row has a missing entry.
    """
    K, D = config.n_components, data.n_features
    resp = np.array(resp, dtype=float)
    if resp.shape != (data.n_samples, K) or not np.all(np.isfinite(resp)) or np.any(resp < 0):
        raise BadInputError(f"resp must be a non-negative finite array of shape {(data.n_samples, K)}, got {resp.shape}.")
    zero = np.flatnonzero(resp[data.fit_rows].sum(axis=1) <= 0)
    if zero.size:
        raise BadInputError(f"resp has {zero.size} row(s) summing to zero (e.g. row {data.fit_rows[zero[0]]}); "
                            "every row needs positive responsibility mass.")
    if K > data.n_fit:
        raise BadInputError(f"n_components={K} is larger than the number of rows with observed data ({data.n_fit}).")
    prior = resolve_prior(data, config)
    tau = resp[data.patterns.perm[: data.n_fit]]
    tau = tau / tau.sum(axis=1, keepdims=True)
    X, miss = data.Xp[: data.n_fit], data.patterns.missing[: data.n_fit]
    obs = (~miss).astype(float)
    colm = (tau.T @ X + _EPS10 * data.col_mean) / (tau.T @ obs + _EPS10)
    xt = np.where(miss[None], colm[:, None, :], X[None])
    stats, beta, nu, means, scatter = _eta(tau, xt, None, None, data, prior, config.reg_covar)
    gamma = _gamma(stats["nk"], prior["alpha"], config.stick)
    entropy = 0.0 if not miss.any() else float("nan")
    return _make_state(data, config, prior, 0, tau, gamma, stats, means, beta, nu, scatter, entropy)


def init(data: EMData, config: VBConfig, rng: np.random.Generator) -> VBState:
    """Iteration-0 state from k-means labels (partial distances) or random responsibilities."""
    K, n_fit = config.n_components, data.n_fit
    if K > n_fit:
        raise BadInputError(f"n_components={K} is larger than the number of rows with observed data ({n_fit}). "
                            "Use a smaller truncation level.")
    rows = data.fit_rows
    if config.init == "random":
        r = rng.uniform(size=(rows.size, K))
        r /= r.sum(axis=1, keepdims=True)
    else:
        _, labels = kmeans(data.Xf[rows], ~data.missing[rows], K, rng)
        r = np.zeros((rows.size, K))
        r[np.arange(rows.size), labels] = 1.0
    resp = np.full((data.n_samples, K), 1.0 / K)
    resp[rows] = r
    return init_from_resp(data, config, resp)


def step(state: VBState, data: EMData, config: VBConfig) -> VBState:
    """One round: tau (with q(x^m|z) at the current eta), then gamma, then eta; pure.

    Raises
    ------
    DegenerateCovarianceError
        When a scatter matrix stops being positive definite.
    """
    c, D = state.cache, data.n_features
    prior = c["prior"]
    nxt = c.get("next")
    if nxt is not None and nxt["key"] != _pass_key(config):
        nxt = None
    if nxt is None and resolve_strategy(data, config) == "compiled":  # a state made under other settings
        nxt = _compiled_pass(data, config, state.means, state.beta, state.nu, state.scatter, state.gamma,
                             state.weights)[1]
    if nxt is not None:  # the compiled E-step at the state's parameters
        stats, entropy = nxt["stats"], nxt["entropy"]
        beta, nu, means, scatter = _eta_from_stats(stats, prior, config.reg_covar)
        gamma = _gamma(stats["nk"], prior["alpha"], config.stick)
        return _make_state(data, config, prior, state.iteration + 1, nxt["tau"], gamma, stats, means, beta, nu,
                           scatter, entropy)
    if "ll" not in c or (config.responsibilities == "thesis" and "logdet_Woo" not in c):
        c = dict(c, **_pieces(data, state.means, state.scatter, config.responsibilities == "thesis"))
    log_rho = _expected_log_lik(c, state.beta, state.nu, D, config.responsibilities)
    log_rho = log_rho + expected_log_weights(state.gamma, config.stick)
    with np.errstate(under="ignore"):
        tau = np.exp(log_rho - logsumexp(log_rho, axis=1, keepdims=True))
    n_fit, miss = data.n_fit, data.patterns.missing[: data.n_fit]
    if config.update == "principled":
        xt, cond = c["xhat"][:, :n_fit], c["cond"]
        # H[N(xhat, Q_Psi / nu)] with log|Q_Psi| = log|Psi| - log|Psi^oo|
        n_mis = (D - c["n_obs"])[:, None]
        ld_oo = -2.0 * c["ll"] - c["n_obs"][:, None] * LOG_2PI - c["maha"]
        h = 0.5 * n_mis * (1.0 + LOG_2PI - np.log(state.nu)) + 0.5 * (c["logdet"] - ld_oo) * (n_mis > 0)
        entropy = float(np.sum(tau * h))
    else:
        X = data.Xp[:n_fit]
        xt = np.where(miss[None], state.means[:, None, :], X[None])
        cond = None
        entropy = float("nan") if miss.any() else 0.0
    stats, beta, nu, means, scatter = _eta(tau, xt, cond, state.nu, data, prior, config.reg_covar)
    gamma = _gamma(stats["nk"], prior["alpha"], config.stick)
    return _make_state(data, config, prior, state.iteration + 1, tau, gamma, stats, means, beta, nu, scatter, entropy)


def conditional(state: VBState, data: EMData, *, columns=None) -> ConditionalMixture:
    r"""Semi-Bayesian density imputation p(x^m | x^o) of every row (digest 1.6).

    Plug-in parameters :math:`E[\pi_k]`, :math:`\hat\mu_k = m_k`, :math:`\hat\Sigma_k = \Psi_k/\nu_k`;
    the row weights are :math:`\propto E[\pi_k] N(x^o; m_k^o, \hat\Sigma_k^{oo})` (the author's code),
    not the fitted :math:`\tau` of the thesis.
    """
    return ConditionalMixture.from_gaussian_mixture(
        data.X, state.weights, state.means, state.covariances, missing=data.missing, columns=columns)


def snapshot(state: VBState, data: EMData | None = None, config: VBConfig | None = None, truth=None) -> dict:
    """Small summary of a state for histories (same style as :func:`em_gmm.snapshot`).

    With ``data`` and ``truth`` (complete data, shape of ``data.X``) it also records the RMSE and
    MAE of the plug-in conditional-mean imputation (see :func:`conditional`) on the missing entries.
    """
    w = np.asarray(state.weights)
    with np.errstate(divide="ignore", invalid="ignore"):
        perplexity = float(np.exp(-np.sum(np.where(w > 0, w * np.log(w), 0.0))))
    snap = {
        "iteration": state.iteration,
        "elbo": state.elbo,
        "log_likelihood": state.log_likelihood,
        "objective": state.objective,
        "weights": np.array(state.weights),
        "means": np.array(state.means),
        "covariances": np.array(state.covariances),
        "n_effective": state.n_effective,
        "weights_perplexity": perplexity,
    }
    if truth is not None and data is not None and data.missing.any():
        err = (conditional(state, data).mean() - np.asarray(truth, dtype=float))[data.missing]
        snap["rmse"] = float(np.sqrt(np.mean(err**2)))
        snap["mae"] = float(np.mean(np.abs(err)))
    return snap


def fit(data: EMData, config: VBConfig, rng: np.random.Generator, *,
        callback: Callable[[VBState], None] | None = None, init_state: VBState | None = None,
        truth=None) -> VBResult:
    """``config.n_init`` restarts of :func:`step` loops; keeps the restart with the highest objective.

    Stops a restart when the per-row change of :attr:`VBState.objective` is below ``tol``
    ("tol"), after ``max_iter`` steps ("max_iter"), or on a collapsed component ("degenerate").

    Warns
    -----
    VBConvergenceWarning
        When the kept run did not stop on the tolerance.
    """
    if truth is not None and np.shape(truth) != data.X.shape:
        raise BadInputError(f"truth has shape {np.shape(truth)}, expected {data.X.shape}.")

    def change(old, new):  # the objective switches from the plug-in likelihood to the ELBO once it is defined
        prev = old.objective if np.isfinite(old.elbo) == np.isfinite(new.elbo) else np.nan
        return (new.objective - prev) / data.n_fit

    out = run_restarts(
        n_runs=1 if init_state is not None else config.n_init,
        start=lambda: init_state if init_state is not None else init(data, config, rng),
        step=lambda state: step(state, data, config),
        snapshot=lambda state: snapshot(state, data, config, truth),
        change=change,
        max_iter=config.max_iter,
        tol=config.tol,
        callback=callback,
        warning=VBConvergenceWarning,
    )
    return VBResult(state=out.state, converged=out.stop_reason == "tol", stop_reason=out.stop_reason,
                    message=out.message, n_iter=out.state.iteration, trace=out.trace,
                    restart_objectives=out.restart_objectives, config=config)


def predictive_conditional(state: VBState, data: EMData, *, kind: str = "student_t", columns=None):
    r"""Posterior-predictive density imputation p(x^m | x^o) of every row.

    ``kind="student_t"``: the Normal-Wishart posterior predictive, a Student-t mixture with
    :math:`\mathrm{dof}_k = \nu_k + 1 - D` and scale :math:`(1+\beta_k)/(\beta_k\mathrm{dof}_k)\Psi_k`
    (see :mod:`explorer.core.gaussians.conditional_t`); ``kind="plugin"``: :func:`conditional`.
    """
    from explorer.core.gaussians.conditional_t import StudentTConditionalMixture, normal_wishart_predictive

    if kind == "plugin":
        return conditional(state, data, columns=columns)
    if kind != "student_t":
        raise BadInputError(f"kind must be 'student_t' or 'plugin', got {kind!r}.")
    loc, scales, dof = normal_wishart_predictive(state.means, state.beta, state.nu, state.scatter)
    return StudentTConditionalMixture.from_student_t_mixture(
        data.X, state.weights, loc, scales, dof, missing=data.missing, columns=columns)
