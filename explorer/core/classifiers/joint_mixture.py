r"""EM for a joint mixture over features and a class label, with missing features and missing labels.

Ghahramani & Jordan (1994) section 4.4 (digest section 2.10). The model is a mixture of M components,
each a Gaussian over the features :math:`x \in \mathbb R^D` times a multinomial over the class
:math:`c \in \{0..C-1\}`, the label conditionally independent of :math:`x` within a component:

.. math::

    P(x, c) = \sum_{j=1}^M \pi_j\, \mu_{jc}\, N(x; m_j, \Sigma_j), \qquad \mu_{jc} = P(c \mid \omega_j),
    \quad \sum_c \mu_{jc} = 1 .

Two structures (``JointConfig.structure``):

* ``"joint"``: M = ``n_components`` components, every :math:`\mu_{j\cdot}` learned (G&J's model);
* ``"per_class"``: ``n_components`` components per class (M = C x ``n_components``), component j
  owned by one class, :math:`\mu_{j\cdot}` fixed one-hot (mixture discriminant analysis; with one
  component per class and complete labelled data, QDA with maximum-likelihood covariances).

E-step (digest section 2.10 with errata 4, 5 and 8 applied: the left side is
:math:`P(\omega_j \mid x_i^o, c_i)` and the weights :math:`\pi_j` are included). For a labelled row
:math:`h_{ij} \propto \pi_j \mu_{j c_i} N(x_i^o; m_j^o, \Sigma_j^{oo})`; for an unlabelled row
:math:`h_{ij} \propto \pi_j N(x_i^o; m_j^o, \Sigma_j^{oo})` (the plain GMM case, eq. 6 on the observed
coordinates). Missing features are completed per component exactly as in missing-data EM
(:mod:`explorer.core.mixtures.em_gmm`, eq. 10: conditional means :math:`\hat x_{ij}^m` and conditional
covariances :math:`Q_{ij}`); the statistics are those of :mod:`explorer.core.mixtures.suffstats`.

M-step: the Gaussian parameters and :math:`\pi_j = N_j / N` by :func:`explorer.core.mixtures.suffstats.m_step`
(maximum likelihood, or the Normal-inverse-Wishart posterior mode with ``prior`` as in
:mod:`explorer.core.mixtures.em_gmm`), and for ``"joint"``

.. math::

    \mu_{jc} = \frac{\sum_i h_{ij} c_{ijc} + \alpha}{\sum_i h_{ij} + C\alpha}, \qquad
    c_{ijc} = \mathbb 1[c_i = c] \text{ (labelled)}, \quad c_{ijc} = \mu_{jc}^{old} \text{ (unlabelled)},

the component-specific expected statistic :math:`E[z_{ij} 1(c_i = c)] = h_{ij}\mu_{jc}^{old}`
(erratum 8: *not* the marginal label posterior :math:`\sum_j h_{ij}\mu_{jd}`), with
:math:`\alpha` = ``label_prior`` (a symmetric Dirichlet(1 + alpha) prior; 0 = maximum likelihood).

Objective (never decreases; property-tested): the observed-data log-likelihood of the observed
features and the observed labels,

.. math::

    \ell = \sum_{i \text{ labelled}} \log \sum_j \pi_j \mu_{jc_i} N(x_i^o; m_j^o, \Sigma_j^{oo})
         + \sum_{i \text{ unlabelled}} \log \sum_j \pi_j N(x_i^o; m_j^o, \Sigma_j^{oo}),

plus the log-prior (NIW densities, and :math:`\alpha \sum_{jc} \log\mu_{jc}` for the Dirichlet, up to
its constant). Rows with no observed feature count when they are labelled (their term is
:math:`\log P(c_i) = \log\sum_j \pi_j\mu_{jc_i}`; they complete every feature with the component
mean and covariance); rows with nothing observed and no label carry nothing and are left out.

Prediction (digest section 2.10, "Prediction"): missing test features are marginalised exactly,

.. math::

    P(c \mid x^o) = \frac{\sum_j \pi_j N(x^o; m_j^o, \Sigma_j^{oo})\, \mu_{jc}}
                         {\sum_j \pi_j N(x^o; m_j^o, \Sigma_j^{oo})} .

API (house style, see :mod:`explorer.core.mixtures.em_gmm`): :func:`prepare` -> :class:`JointData`,
:func:`init` -> :class:`JointState`, :func:`step` (pure), :func:`fit` (a loop over :func:`step`
with restarts), :func:`predict_log_proba`, :func:`log_joint`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
from scipy.special import logsumexp

from explorer.core.gaussians.gaussian import DegenerateCovarianceError
from explorer.core.gaussians.patterns import group_patterns
from explorer.core.loop import ConvergenceWarning, run_restarts
from explorer.core.mixtures.em_gmm import COVARIANCE_TYPES, EMConfig, EMData, resolved_prior
from explorer.core.mixtures.em_gmm import prepare as _prepare_features
from explorer.core.mixtures.kmeans import kmeans
from explorer.core.mixtures.prior import PRIORS, NIWPrior, log_prior
from explorer.core.mixtures.suffstats import SufficientStatistics, component_loglik, m_step, statistics_from_completions
from explorer.core.validation import BadInputError, check_incomplete, check_int, check_nonnegative, is_int

__all__ = [
    "STRUCTURES",
    "JOINT_INIT_METHODS",
    "JointConfig",
    "JointData",
    "JointState",
    "JointResult",
    "ConvergenceWarning",
    "prepare",
    "init",
    "init_from_parameters",
    "step",
    "fit",
    "predict_log_proba",
    "log_joint",
    "snapshot",
    "component_owners",
]

STRUCTURES = ("per_class", "joint")
JOINT_INIT_METHODS = ("kmeans", "random")
_EPS10 = 10 * np.finfo(float).eps



@dataclass(frozen=True, slots=True)
class JointConfig:
    """Settings of the joint feature-label mixture.

    Parameters
    ----------
    n_classes : int
        Number of classes C (>= 2).
    n_components : int
        Components per class (``"per_class"``) or in total (``"joint"``).
    structure : {"per_class", "joint"}
        See the module docstring.
    covariance_type : {"full", "diag"}
    reg_covar : float
        Added to every covariance's diagonal after each M-step (>= 0).
    prior : None, "auto", "fraley-raftery" or NIWPrior
        Normal-inverse-Wishart prior on every component (MAP-EM), as ``EMConfig.prior``.
    label_prior : float
        Dirichlet pseudo-count :math:`\\alpha \\ge 0` added to every :math:`\\mu_{jc}` count
        (``"joint"`` only; 0 = maximum likelihood).
    tol : float
        Stop when the objective changes by less than ``tol`` per fitted row.
    max_iter : int
    n_init : int
        Restarts; the one with the highest objective is kept.
    init : {"kmeans", "random"}
        k-means with partial distances (per class for ``"per_class"``) or random responsibilities.
    """

    n_classes: int
    n_components: int = 1
    structure: str = "per_class"
    covariance_type: str = "full"
    reg_covar: float = 1e-6
    prior: object = None
    label_prior: float = 0.0
    tol: float = 1e-6
    max_iter: int = 200
    n_init: int = 1
    init: str = "kmeans"

    def __post_init__(self):
        if not is_int(self.n_classes) or self.n_classes < 2:
            raise BadInputError(f"n_classes must be an integer >= 2, got {self.n_classes!r}.")
        if not is_int(self.n_components) or self.n_components < 1:
            raise BadInputError(f"n_components must be a positive integer, got {self.n_components!r}.")
        if self.structure not in STRUCTURES:
            raise BadInputError(f"structure must be one of {STRUCTURES}, got {self.structure!r}.")
        if self.covariance_type not in COVARIANCE_TYPES:
            raise BadInputError(f"covariance_type must be one of {COVARIANCE_TYPES}, got {self.covariance_type!r}.")
        for name in ("reg_covar", "label_prior", "tol"):
            check_nonnegative(name, getattr(self, name))
        check_int("max_iter", self.max_iter, 0)
        check_int("n_init", self.n_init, 1)
        if self.init not in JOINT_INIT_METHODS:
            raise BadInputError(f"init must be one of {JOINT_INIT_METHODS}, got {self.init!r}.")
        if not (self.prior is None or isinstance(self.prior, NIWPrior)
                or (isinstance(self.prior, str) and self.prior in PRIORS)):
            raise BadInputError(f"prior must be None (maximum likelihood), 'auto', 'fraley-raftery' or an NIWPrior, "
                                f"got {self.prior!r}.")

    @property
    def total_components(self) -> int:
        """M: ``n_classes * n_components`` for ``"per_class"``, ``n_components`` for ``"joint"``."""
        return self.n_classes * self.n_components if self.structure == "per_class" else self.n_components

    def em_config(self) -> EMConfig:
        """The :class:`~explorer.core.mixtures.em_gmm.EMConfig` of the Gaussian part (for the prior and the kernels)."""
        return EMConfig(n_components=self.total_components, covariance_type=self.covariance_type,
                        reg_covar=self.reg_covar, prior=self.prior, strategy="numpy")


def component_owners(config: JointConfig) -> np.ndarray | None:
    """Class of every component for ``"per_class"`` (component j belongs to class ``j // n_components``);
    None for ``"joint"``."""
    if config.structure != "per_class":
        return None
    return np.repeat(np.arange(config.n_classes), config.n_components)


@dataclass(frozen=True, eq=False, slots=True)
class JointData:
    """Features and labels prepared once (see :func:`prepare`).

    Attributes
    ----------
    em : EMData
        The features, grouped by missingness (:func:`explorer.core.mixtures.em_gmm.prepare`; its sorted
        layout ``em.Xp`` is the layout of the E-step).
    labels : ndarray of int, shape (n_samples,)
        Class codes ``0 .. n_classes - 1``, ``-1`` = unlabelled (caller's order).
    n_classes : int
    labels_p : ndarray of int
        ``labels`` in the sorted layout.
    fit_p : ndarray of int
        Rows (sorted layout) that enter the fit: an observed feature, or a label.
    empty_labelled_p : ndarray of int
        Rows (sorted layout) with a label and no observed feature.
    """

    em: EMData
    labels: np.ndarray
    n_classes: int
    labels_p: np.ndarray
    fit_p: np.ndarray
    empty_labelled_p: np.ndarray

    @property
    def n_samples(self) -> int:
        return self.em.n_samples

    @property
    def n_features(self) -> int:
        return self.em.n_features

    @property
    def n_fit(self) -> int:
        return int(self.fit_p.size)

    @property
    def n_labelled(self) -> int:
        return int(np.count_nonzero(self.labels >= 0))


def prepare(X, labels, n_classes: int | None = None, *, missing=None, columns=None) -> JointData:
    """Validate features (NaN = missing) and integer labels (-1 = unlabelled).

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
    labels : array-like of int, shape (n_samples,)
        Class codes 0 .. n_classes - 1, or -1 for an unlabelled row.
    n_classes : int, optional
        Default: ``labels.max() + 1``.

    Raises
    ------
    BadInputError
        Bad features (see :func:`explorer.core.mixtures.em_gmm.prepare`), labels of the wrong shape, not
        integers, or out of range; no labelled row.
    """
    em = _prepare_features(X, missing, columns=columns)
    lab = np.asarray(labels)
    if lab.ndim != 1 or lab.shape[0] != em.n_samples:
        raise BadInputError(f"labels must be 1-D with one entry per row ({em.n_samples}); got shape {lab.shape}.")
    if lab.dtype.kind == "f":
        if not np.all(np.isfinite(lab)) or np.any(lab != np.round(lab)):
            raise BadInputError("labels must be integer class codes (-1 = unlabelled); got non-integer values.")
        lab = lab.astype(np.intp)
    elif lab.dtype.kind not in "iu":
        raise BadInputError(f"labels must be integer class codes (-1 = unlabelled); got dtype {lab.dtype}.")
    lab = lab.astype(np.intp)
    if n_classes is None:
        n_classes = int(lab.max()) + 1 if lab.size else 0
    if not is_int(n_classes) or n_classes < 2:
        raise BadInputError(f"n_classes must be an integer >= 2, got {n_classes!r}.")
    if np.any(lab < -1) or np.any(lab >= n_classes):
        raise BadInputError(f"labels must be in -1 .. {n_classes - 1} (-1 = unlabelled); got values from "
                            f"{lab.min()} to {lab.max()}.")
    if not np.any(lab >= 0):
        raise BadInputError("No row is labelled (all labels are -1); at least one labelled row is needed.")
    perm = em.patterns.perm
    labels_p = lab[perm]
    has_data = np.ones(em.n_samples, dtype=bool)
    has_data[em.n_fit:] = False  # the sorted layout puts the rows with nothing observed last
    fit_p = np.flatnonzero(has_data | (labels_p >= 0))
    empty_labelled_p = np.flatnonzero(~has_data & (labels_p >= 0))
    for a in (lab, labels_p, fit_p, empty_labelled_p):
        a.setflags(write=False)
    return JointData(em=em, labels=lab, n_classes=int(n_classes), labels_p=labels_p, fit_p=fit_p,
                     empty_labelled_p=empty_labelled_p)


@dataclass(frozen=True, eq=False, slots=True)
class JointState:
    """Parameters after ``iteration`` EM steps, with the E-step computed at those parameters.

    Attributes
    ----------
    iteration : int
    weights : ndarray (M,)
        :math:`\\pi_j`.
    means : ndarray (M, D)
    covariances : ndarray (M, D, D) or (M, D)
    label_probs : ndarray (M, C)
        :math:`\\mu_{jc} = P(c \\mid \\omega_j)` (one-hot for ``"per_class"``).
    log_likelihood : float
        Observed-data log-likelihood of the observed features and labels (the fitted rows).
    objective : float
        ``log_likelihood + log_prior``.
    log_prior : float
    resp : ndarray (n_samples, M)
        :math:`h_{ij}` (caller's order; rows outside the fit get :math:`\\pi_j`).
    stats : SufficientStatistics
        Gaussian statistics of the E-step (for the next M-step).
    label_counts : ndarray (M, C)
        :math:`\\sum_i h_{ij} c_{ijc}` (for the next M-step).
    prior : object
        The resolved NIW prior (or None).
    """

    iteration: int
    weights: np.ndarray
    means: np.ndarray
    covariances: np.ndarray
    label_probs: np.ndarray
    log_likelihood: float
    objective: float
    log_prior: float
    resp: np.ndarray
    stats: SufficientStatistics = field(repr=False)
    label_counts: np.ndarray = field(repr=False)
    prior: object = field(default=None, repr=False)

    @property
    def n_components(self) -> int:
        return self.weights.shape[0]

    def full_covariances(self) -> np.ndarray:
        """Covariances as (M, D, D) whatever the covariance type."""
        if self.covariances.ndim == 3:
            return self.covariances
        return np.einsum("kd,de->kde", self.covariances, np.eye(self.covariances.shape[1]))

    def class_priors(self) -> np.ndarray:
        """:math:`P(c) = \\sum_j \\pi_j \\mu_{jc}`, shape (C,)."""
        return self.weights @ self.label_probs


@dataclass(frozen=True, eq=False, slots=True)
class JointResult:
    """Outcome of :func:`fit`: the kept restart's final state, its stop reason and trace."""

    state: JointState
    converged: bool
    stop_reason: str
    message: str
    n_iter: int
    trace: tuple
    restart_objectives: tuple
    config: JointConfig


# ----------------------------------------------------------------------------- E-step
def _label_term(labels_p: np.ndarray, label_probs: np.ndarray) -> np.ndarray:
    """(n, M): :math:`\\log\\mu_{j c_i}` for labelled rows, 0 for unlabelled ones."""
    n, M = labels_p.size, label_probs.shape[0]
    out = np.zeros((n, M))
    lab = labels_p >= 0
    with np.errstate(divide="ignore"):
        out[lab] = np.log(label_probs[:, labels_p[lab]]).T
    return out


def _state(data: JointData, config: JointConfig, iteration: int, weights, means, covariances, label_probs,
           prior) -> JointState:
    """E-step at the given parameters, packaged as a state."""
    em = data.em
    pats = em.patterns
    ll, xhat, cond = component_loglik(em.Xp, pats.missing, pats, means, covariances, config.covariance_type, True)
    with np.errstate(divide="ignore"):
        weighted = ll + np.log(weights) + _label_term(data.labels_p, label_probs)
    norm = logsumexp(weighted, axis=1)
    fit = data.fit_p
    total = float(norm[fit].sum())
    if not np.isfinite(total):
        raise DegenerateCovarianceError(
            "The log-likelihood is not finite: the model gives zero probability to an observed row or label. "
            "Increase reg_covar, set label_prior > 0, or use fewer components.")
    with np.errstate(under="ignore", invalid="ignore"):
        resp_p = np.exp(weighted - norm[:, None])
    outside = np.setdiff1d(np.arange(resp_p.shape[0]), fit)
    resp_p[outside] = weights
    stats = statistics_from_completions(resp_p, xhat, cond, pats, means, covariance_type=config.covariance_type,
                                        exact=True, covariances=covariances, rows=fit, log_likelihood=total)
    empty = data.empty_labelled_p
    if empty.size and config.covariance_type == "full":
        # labelled rows with nothing observed: every feature missing, completion = the mean, C_ij = Sigma_j
        mass = resp_p[empty].sum(axis=0)
        stats = replace(stats, second=stats.second + mass[:, None, None] * covariances)
    lab = data.labels_p[fit] >= 0
    h_fit = resp_p[fit]
    counts = h_fit[lab].T @ np.eye(data.n_classes)[data.labels_p[fit][lab]]
    counts = counts + h_fit[~lab].sum(axis=0)[:, None] * label_probs
    lp = log_prior(means, covariances, prior)
    if config.structure == "joint" and config.label_prior > 0:
        lp += float(config.label_prior * np.log(label_probs).sum())
    resp = np.empty_like(resp_p)
    resp[pats.perm] = resp_p
    for a in (weights, means, covariances, label_probs, resp, counts):
        a.setflags(write=False)
    return JointState(iteration=iteration, weights=weights, means=means, covariances=covariances,
                      label_probs=label_probs, log_likelihood=total, objective=total + lp, log_prior=lp,
                      resp=resp, stats=stats, label_counts=counts, prior=prior)


# ----------------------------------------------------------------------------- initialisation
def _owned_label_probs(config: JointConfig) -> np.ndarray:
    owners = component_owners(config)
    return np.eye(config.n_classes)[owners]


def _cluster_parameters(Xr, obs, r, global_mean, global_var, full: bool, reg_covar: float):
    """Means and covariances of soft clusters ``r`` (n, K) of incomplete rows (a starting point only).

    Missing entries are filled by the cluster's observed mean; a column a cluster observes fewer
    than twice gets the global observed variance (so a never-seen feature is not a spike).
    """
    K = r.shape[1]
    D = Xr.shape[1]
    nk = r.sum(axis=0) + _EPS10
    obs_f = obs.astype(float)
    seen = r.T @ obs_f
    col_means = (r.T @ np.where(obs, Xr, 0.0) + _EPS10 * global_mean) / (seen + _EPS10)
    means = np.empty((K, D))
    covs = np.empty((K, D, D) if full else (K, D))
    for k in range(K):
        filled = np.where(obs, Xr, col_means[k])
        means[k] = r[:, k] @ filled / nk[k]
        diff = filled - means[k]
        if full:
            cov = (r[:, k, None] * diff).T @ diff / nk[k]
            thin = seen[k] < 2
            idx = np.flatnonzero(thin)
            cov[idx, :] = 0.0
            cov[:, idx] = 0.0
            cov[idx, idx] = global_var[idx]
            cov = 0.5 * (cov + cov.T)
            cov.flat[:: D + 1] += reg_covar
        else:
            cov = r[:, k] @ (diff * diff) / nk[k]
            cov = np.where(seen[k] < 2, global_var, cov) + reg_covar
        covs[k] = cov
    return nk, means, covs


def _responsibilities(Xr, obs, K: int, method: str, rng: np.random.Generator) -> np.ndarray:
    if method == "random":
        r = rng.uniform(size=(Xr.shape[0], K))
        return r / r.sum(axis=1, keepdims=True)
    _, lab = kmeans(np.where(obs, Xr, 0.0), obs, K, rng)
    r = np.zeros((Xr.shape[0], K))
    r[np.arange(Xr.shape[0]), lab] = 1.0
    return r


def init(data: JointData, config: JointConfig, rng: np.random.Generator) -> JointState:
    """Initial parameters from the labelled rows (per class) or all rows (``"joint"``).

    ``"per_class"``: each class's ``n_components`` components from k-means (partial distances)
    or random responsibilities over the class's labelled rows that have an observed feature;
    :math:`\\pi_j` = class frequency x cluster share. ``"joint"``: M clusters over every row with
    an observed feature; :math:`\\mu_{jc}` from the labels in each cluster plus one pseudo-count.
    Unlabelled rows enter at the first E-step.

    Raises
    ------
    BadInputError
        A class with fewer labelled rows (with an observed feature) than ``max(2, n_components)``
        for ``"per_class"``; more components than rows for ``"joint"``; ``n_classes`` differs from the data's.
    """
    _check_match(data, config)
    em = data.em
    K, C, D = config.n_components, config.n_classes, data.n_features
    full = config.covariance_type == "full"
    fit_rows = em.fit_rows  # caller's order, rows with an observed feature
    X, miss = em.X, em.missing
    gmean = np.array(em.col_mean)
    gvar = np.nanvar(X[fit_rows], axis=0)
    gvar = np.where(np.isfinite(gvar) & (gvar > 0), gvar, 1.0)
    prior = resolved_prior(em, config.em_config())
    if config.structure == "per_class":
        M = C * K
        weights = np.empty(M)
        means = np.empty((M, D))
        covs = np.empty((M, D, D) if full else (M, D))
        rows_by_class = [fit_rows[data.labels[fit_rows] == c] for c in range(C)]
        n_lab = sum(r.size for r in rows_by_class)
        for c, rows in enumerate(rows_by_class):
            need = max(2, K)
            if rows.size < need:
                raise BadInputError(
                    f"Class {c} has {rows.size} labelled row(s) with an observed feature; the per-class mixture with "
                    f"n_components={K} needs at least {need}. Label more rows or use fewer components.")
            Xr, obs = X[rows], ~miss[rows]
            r = _responsibilities(Xr, obs, K, config.init, rng)
            nk, mk, ck = _cluster_parameters(Xr, obs, r, gmean, gvar, full, config.reg_covar)
            sl = slice(c * K, (c + 1) * K)
            weights[sl] = rows.size / n_lab * nk / nk.sum()
            means[sl], covs[sl] = mk, ck
        label_probs = _owned_label_probs(config)
    else:
        M = K
        if M > fit_rows.size:
            raise BadInputError(f"n_components={M} is larger than the number of rows with observed data "
                                f"({fit_rows.size}). Use fewer components.")
        Xr, obs = X[fit_rows], ~miss[fit_rows]
        r = _responsibilities(Xr, obs, M, config.init, rng)
        nk, means, covs = _cluster_parameters(Xr, obs, r, gmean, gvar, full, config.reg_covar)
        weights = nk / nk.sum()
        lab = data.labels[fit_rows]
        counts = r[lab >= 0].T @ np.eye(C)[lab[lab >= 0]] + 1.0
        label_probs = counts / counts.sum(axis=1, keepdims=True)
    weights = weights / weights.sum()
    return _state(data, config, 0, weights, means, covs, label_probs, prior)


def init_from_parameters(data: JointData, config: JointConfig, weights, means, covariances,
                         label_probs=None) -> JointState:
    """State at iteration 0 from given parameters (validated, copied). ``label_probs`` defaults to the
    one-hot ownership for ``"per_class"`` (and must be given for ``"joint"``)."""
    _check_match(data, config)
    M, D, C = config.total_components, data.n_features, config.n_classes
    w = np.array(weights, dtype=float)
    mu = np.array(means, dtype=float)
    cov = np.array(covariances, dtype=float)
    if label_probs is None:
        if config.structure != "per_class":
            raise BadInputError("label_probs (M, n_classes) are needed for structure='joint'.")
        lp = _owned_label_probs(config)
    else:
        lp = np.array(label_probs, dtype=float)
    expected = (M, D, D) if config.covariance_type == "full" else (M, D)
    if w.shape != (M,) or mu.shape != (M, D) or cov.shape != expected or lp.shape != (M, C):
        raise BadInputError(f"Parameters have shapes weights {w.shape}, means {mu.shape}, covariances {cov.shape}, "
                            f"label_probs {lp.shape}; expected {(M,)}, {(M, D)}, {expected}, {(M, C)}.")
    if np.any(w < 0) or not np.isclose(w.sum(), 1.0):
        raise BadInputError("weights must be non-negative and sum to one.")
    if np.any(lp < 0) or not np.allclose(lp.sum(axis=1), 1.0):
        raise BadInputError("Every row of label_probs must be non-negative and sum to one.")
    return _state(data, config, 0, w, mu, cov, lp, resolved_prior(data.em, config.em_config()))


def _check_match(data: JointData, config: JointConfig) -> None:
    if data.n_classes != config.n_classes:
        raise BadInputError(f"The data were prepared with n_classes={data.n_classes} but the config has "
                            f"n_classes={config.n_classes}.")


# ----------------------------------------------------------------------------- step and fit
def step(state: JointState, data: JointData, config: JointConfig) -> JointState:
    """One EM iteration: M-step from the state's E-step statistics, then the E-step at the new parameters.

    Pure (``state`` is unchanged). Raises :class:`~explorer.core.gaussians.gaussian.DegenerateCovarianceError`
    when a component collapses.
    """
    weights, means, covs = m_step(state.stats, reg_covar=config.reg_covar, prior=state.prior)
    if config.structure == "joint":
        counts = np.asarray(state.label_counts) + config.label_prior
        tot = counts.sum(axis=1, keepdims=True)
        label_probs = np.where(tot > 0, counts / np.where(tot > 0, tot, 1.0), 1.0 / config.n_classes)
    else:
        label_probs = np.array(state.label_probs)
    return _state(data, config, state.iteration + 1, weights, means, covs, label_probs, state.prior)


def snapshot(state: JointState, data: JointData, config: JointConfig) -> dict:
    """Small summary of a state (trace entry): objective, parameters and training accuracy on the labelled rows."""
    lab = data.labels >= 0
    post = state.resp[lab] @ state.label_probs
    acc = float(np.mean(post.argmax(axis=1) == data.labels[lab]))
    return {
        "iteration": state.iteration,
        "log_likelihood": state.log_likelihood,
        "objective": state.objective,
        "weights": np.array(state.weights),
        "means": np.array(state.means),
        "covariances": np.array(state.full_covariances()),
        "label_probs": np.array(state.label_probs),
        "train_accuracy": acc,
    }


def fit(data: JointData, config: JointConfig, rng: np.random.Generator, *,
        callback: Callable[[JointState], None] | None = None, init_state: JointState | None = None) -> JointResult:
    """Run EM: ``config.n_init`` restarts, each a loop over :func:`step` until ``tol`` (per fitted row),
    ``max_iter`` or a degenerate component; keep the restart with the highest objective.

    Warns :class:`ConvergenceWarning` when the kept run did not stop on the tolerance.
    """
    n_fit = max(data.n_fit, 1)
    out = run_restarts(
        n_runs=1 if init_state is not None else config.n_init,
        start=lambda: init_state if init_state is not None else init(data, config, rng),
        step=lambda s: step(s, data, config),
        snapshot=lambda s: snapshot(s, data, config),
        change=lambda old, new: (new.objective - old.objective) / n_fit,
        max_iter=config.max_iter,
        tol=config.tol,
        callback=callback,
    )
    return JointResult(state=out.state, converged=out.stop_reason == "tol", stop_reason=out.stop_reason,
                       message=out.message, n_iter=out.state.iteration, trace=out.trace,
                       restart_objectives=out.restart_objectives, config=config)


# ----------------------------------------------------------------------------- prediction
def _component_log_density(state: JointState, X, missing, covariance_type: str):
    """(n, M): :math:`\\log \\pi_j + \\log N(x^o; m_j^o, \\Sigma_j^{oo})` of new rows (no density term for
    empty rows)."""
    Xn, miss = check_incomplete(X, missing, allow_empty_rows=True, allow_empty_columns=True)
    D = state.means.shape[1]
    if Xn.shape[1] != D:
        raise BadInputError(f"X has {Xn.shape[1]} feature(s), but the model was fitted with {D}.")
    pats = group_patterns(miss)
    ll, _, _ = component_loglik(np.ascontiguousarray(np.where(miss, 0.0, Xn)), miss, pats, np.asarray(state.means),
                                 np.asarray(state.covariances), covariance_type, False)
    with np.errstate(divide="ignore"):
        return ll + np.log(state.weights)


def _log_joint_table(state: JointState, X, missing, covariance_type: str) -> np.ndarray:
    """(n, C): :math:`\\log P(x^o, c) = \\log\\sum_j \\pi_j \\mu_{jc} N(x^o; m_j^o, \\Sigma_j^{oo})`."""
    lw = _component_log_density(state, X, missing, covariance_type)
    with np.errstate(divide="ignore"):
        llab = np.log(state.label_probs)  # (M, C)
    return logsumexp(lw[:, :, None] + llab[None], axis=1)


def predict_log_proba(state: JointState, X, config: JointConfig, *, missing=None) -> np.ndarray:
    """:math:`\\log P(c \\mid x^o)`, shape (n_samples, n_classes); missing features marginalised exactly.

    A row with nothing observed gets the class prior :math:`P(c) = \\sum_j \\pi_j \\mu_{jc}`.
    """
    table = _log_joint_table(state, X, missing, config.covariance_type)
    return table - logsumexp(table, axis=1, keepdims=True)


def log_joint(state: JointState, X, labels, config: JointConfig, *, missing=None) -> np.ndarray:
    """Per-row :math:`\\log P(x_i^o, c_i)` (labelled) or :math:`\\log P(x_i^o)` (label -1), shape (n_samples,).

    Summed over the training rows it is the state's ``log_likelihood`` (rows with nothing observed
    and no label give 0).
    """
    table = _log_joint_table(state, X, missing, config.covariance_type)
    lab = np.asarray(labels, dtype=np.intp).reshape(-1)
    if lab.shape[0] != table.shape[0]:
        raise BadInputError(f"labels has {lab.shape[0]} entries but X has {table.shape[0]} rows.")
    if np.any(lab < -1) or np.any(lab >= config.n_classes):
        raise BadInputError(f"labels must be in -1 .. {config.n_classes - 1}.")
    out = logsumexp(table, axis=1)
    has = lab >= 0
    out[has] = table[np.flatnonzero(has), lab[has]]
    return out
