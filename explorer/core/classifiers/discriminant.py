r"""Gaussian discriminant classifiers (LDA, QDA, RDA) fitted to incomplete features by EM.

Marlin (2008), chapter 6.2 (the ``marlin2008`` reference digest, sections 5.1-5.2). The labels are complete,
the features may be missing (MAR). Class-conditional model:

.. math::

    P(y = c) = \theta_c, \qquad x \mid y = c \sim N(\mu_c, \Sigma_c),

with a shared covariance :math:`\Sigma_c = \Sigma` (LDA, 6.2.12-6.2.15), one covariance per class
(QDA, 6.2.16-6.2.18), or Friedman's regularised blend (RDA, 6.2.19).

**Prediction by marginalisation** (6.2.21; the generative framework of section 6.1): the missing
features are integrated out, so

.. math::

    P(y = c \mid x^o) \propto \theta_c\, N(x^o; \mu_c^o, \Sigma_c^{oo}),

computed once per distinct missingness pattern (one Cholesky factor of :math:`\Sigma_c^{oo}` per
pattern and class, triangular solves for all its rows). A row with nothing observed gets the
class prior :math:`\theta`.

**Fitting.** With complete labels, :math:`\theta_c = N_c / N` in closed form (every row counts,
including rows with nothing observed). The Gaussian parameters maximise the observed-data
log-likelihood

.. math::

    \ell = \sum_n \log\theta_{y_n} + \sum_n \log N(x_n^o; \mu_{y_n}^o, \Sigma_{y_n}^{oo})

by EM (digest section 3.5 applied within each class, the class being known). E-step, per row of
class :math:`c`:
:math:`\hat x_n^m = \mu_c^m + \Sigma_c^{mo}(\Sigma_c^{oo})^{-1}(x_n^o - \mu_c^o)` and
:math:`C_n^{mm} = \Sigma_c^{mm} - \Sigma_c^{mo}(\Sigma_c^{oo})^{-1}\Sigma_c^{om}` (zero elsewhere).
M-step, with :math:`\tilde x_n` the completed row and :math:`N'_c` the number of class-c rows
with at least one observed feature:

.. math::

    \mu_c = \frac{1}{N'_c}\sum_{y_n = c}\tilde x_n, \qquad
    S_c = \frac{1}{N'_c}\sum_{y_n = c}\big[(\tilde x_n - \mu_c)(\tilde x_n - \mu_c)^\top + C_n\big], \qquad
    S = \frac{\sum_c N'_c S_c}{\sum_c N'_c},

then :math:`\Sigma_c = S_c + \varepsilon I` (QDA), :math:`\Sigma = S + \varepsilon I` (LDA), or the RDA
blend below; :math:`\varepsilon` is ``reg_covar``. For LDA and QDA this is exact EM (with
``reg_covar = 0`` the M-step is the exact maximiser of the expected complete-data log-likelihood;
a small ridge only perturbs it at the 1e-6 level), so :math:`\ell` never decreases. With complete
data the initial state already is the ML fit (class means, ML (divisor :math:`N'_c`) class and
pooled covariances). Rows with nothing observed do not enter the Gaussian M-step (their likelihood
does not depend on :math:`\mu, \Sigma`).

**RDA (6.2.19), applied in the M-step.** Each M-step replaces the class covariances by

.. math::

    \Sigma_c(\alpha, \gamma) = \gamma\big(\alpha S_c + (1 - \alpha) S\big)
        + \frac{1 - \gamma}{D}\operatorname{tr}(S)\, I + \varepsilon I,

with :math:`S_c, S` the expected (completed) class and pooled scatter matrices above. The trace is
that of the *pooled* :math:`S`, as the digest prints 6.2.19 (Friedman 1989 uses the trace of the
class's own blend :math:`\alpha S_c + (1-\alpha)S`; with equal class scatters they agree). Why in
the M-step rather than after fitting: (i) the conditional expectations of the missing features
then use the regularised covariances, which is the point of RDA when :math:`N_c` is small (an
after-the-fit blend would impute with the unregularised, possibly near-singular :math:`S_c`), and
(ii) the endpoints are exact: :math:`(\alpha, \gamma) = (1, 1)` *is* the QDA EM and
:math:`(0, 1)` *is* the LDA EM, with missing data too. The price: for other :math:`(\alpha, \gamma)`
the iteration is a fixed-point iteration with a plug-in M-step, not EM for a likelihood (the blend
is not the maximiser of any penalised expected log-likelihood), so :math:`\ell` is reported and
used for the stopping rule but is not guaranteed monotone. In practice it converges in a few tens
of steps. Choose :math:`(\alpha, \gamma)` by cross-validation (the thesis uses leave-one-out over a
grid; :class:`explorer.learn.discriminant.RDAClassifier` works with ``GridSearchCV``).

API (house style, see :mod:`explorer.core.mixtures.em_gmm`): :func:`prepare` -> :class:`DiscriminantData`,
:func:`init` / :func:`step` / :func:`fit` with frozen :class:`DiscriminantState`;
:func:`class_log_posterior` (prediction by marginalisation), :func:`observed_log_likelihood`,
:func:`rda_covariances`, :func:`logistic_parameters` (the binary LDA as a logistic model,
6.2.12-6.2.15 with the digest's sign corrections).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.linalg import cho_solve
from scipy.special import logsumexp

from explorer.core.gaussians.gaussian import LOG_2PI, DegenerateCovarianceError, cholesky
from explorer.core.gaussians.patterns import group_patterns
from explorer.core.loop import ConvergenceWarning, run_restarts
from explorer.core.validation import BadInputError, check_incomplete

__all__ = [
    "MODELS", "ConvergenceWarning", "DegenerateCovarianceError", "DiscriminantConfig", "DiscriminantData",
    "DiscriminantResult", "DiscriminantState", "PatternBlock", "chol_solve", "class_log_joint", "class_log_posterior", "fit",
    "init", "logistic_parameters", "observed_log_likelihood", "pattern_blocks", "prepare", "rda_covariances",
    "snapshot", "step",
]

MODELS = ("lda", "qda", "rda")


# ----------------------------------------------------------------------------- patterns
def chol_solve(L: np.ndarray, B: np.ndarray) -> np.ndarray:
    """:math:`(LL^\\top)^{-1}B` from a lower Cholesky factor (LAPACK ``potrs`` on a contiguous copy; scipy's
    ``solve_triangular`` is far slower on the small strided right-hand sides used here)."""
    return cho_solve((L, True), np.ascontiguousarray(B), check_finite=False)


@dataclass(frozen=True, eq=False, slots=True)
class PatternBlock:
    """Rows sharing one missingness pattern: observed columns ``obs``, missing ``mis``, row indices ``rows``."""

    obs: np.ndarray
    mis: np.ndarray
    rows: np.ndarray


def pattern_blocks(missing: np.ndarray) -> tuple[tuple[PatternBlock, ...], np.ndarray]:
    """``(blocks, empty_rows)``: one :class:`PatternBlock` per distinct pattern with an observed entry,
    and the rows with nothing observed (grouped by :func:`explorer.core.gaussians.patterns.group_patterns`)."""
    missing = np.asarray(missing, dtype=bool)
    D = missing.shape[1]
    pats = group_patterns(missing)
    blocks = []
    for g in pats.groups:
        for u in range(g.n_unique):
            mis = np.asarray(g.unique_mis[u], dtype=np.intp)
            obs = np.setdiff1d(np.arange(D), mis).astype(np.intp)
            rows = np.sort(g.rows[g.members[u]])
            blocks.append(PatternBlock(obs, mis, rows))
    return tuple(blocks), np.asarray(pats.empty_rows, dtype=np.intp)


# ----------------------------------------------------------------------------- config and data
def _check_unit(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0.0 <= float(value) <= 1.0:
        raise BadInputError(f"{name} must be a number in [0, 1], got {value!r}.")
    return float(value)


@dataclass(frozen=True, slots=True)
class DiscriminantConfig:
    """Settings of the discriminant EM.

    Parameters
    ----------
    model : {"lda", "qda", "rda"}
        Shared covariance, one covariance per class, or Friedman's blend (6.2.19, in the M-step).
    alpha, gamma : float in [0, 1]
        RDA's class-vs-pooled weight and covariance-vs-scaled-identity weight (ignored otherwise).
    reg_covar : float >= 0
        Ridge added to every covariance after each M-step.
    tol : float >= 0
        Stop when the observed-data log-likelihood changes by less than ``tol`` per fitted row.
    max_iter : int >= 0
        Maximum number of EM steps.
    """

    model: str = "lda"
    alpha: float = 0.5
    gamma: float = 0.5
    reg_covar: float = 1e-6
    tol: float = 1e-6
    max_iter: int = 200

    def __post_init__(self):
        if self.model not in MODELS:
            raise BadInputError(f"model must be one of {MODELS}, got {self.model!r}.")
        _check_unit(self.alpha, "alpha")
        _check_unit(self.gamma, "gamma")
        for name in ("reg_covar", "tol"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or not (np.isfinite(v) and v >= 0):
                raise BadInputError(f"{name} must be a finite number >= 0, got {v!r}.")
        m = self.max_iter
        if isinstance(m, (bool, np.bool_)) or not isinstance(m, (int, np.integer)) or m < 0:
            raise BadInputError(f"max_iter must be a non-negative integer, got {m!r}.")


@dataclass(frozen=True, eq=False, slots=True)
class DiscriminantData:
    """Labelled incomplete data prepared once (see :func:`prepare`); read-only arrays.

    ``Xf`` holds 0 at missing entries; ``labels`` are class indices 0..C-1; ``blocks`` group the rows
    by pattern, ``class_blocks`` by (class, pattern) as ``(c, PatternBlock)``; ``fit_counts[c]`` is
    :math:`N'_c`, the number of class-c rows with an observed feature; ``counts[c]`` is :math:`N_c`.
    """

    X: np.ndarray
    Xf: np.ndarray
    missing: np.ndarray
    labels: np.ndarray
    n_classes: int
    counts: np.ndarray
    fit_counts: np.ndarray
    blocks: tuple
    class_blocks: tuple
    empty_rows: np.ndarray

    @property
    def n_samples(self) -> int:
        return self.X.shape[0]

    @property
    def n_features(self) -> int:
        return self.X.shape[1]

    @property
    def n_fit(self) -> int:
        return int(self.fit_counts.sum())


def _readonly(*arrays):
    for a in arrays:
        a.setflags(write=False)


def prepare(X, labels, missing=None, *, n_classes: int | None = None, columns=None) -> DiscriminantData:
    """Validate features (NaN = missing unless ``missing`` is given) and integer class labels.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
    labels : array-like of int, shape (n_samples,)
        Class indices 0..n_classes-1 (complete).
    missing : array-like of bool, optional
    n_classes : int, optional
        Defaults to ``labels.max() + 1``.

    Raises
    ------
    BadInputError
        Non-numeric or infinite values, columns with no observed value, labels of the wrong shape or
        outside 0..C-1, fewer than two classes, a class without a row that has an observed feature.
    """
    Xn, miss = check_incomplete(X, missing, columns=columns, allow_empty_rows=True)
    lab = np.asarray(labels)
    if lab.ndim != 1 or lab.shape[0] != Xn.shape[0]:
        raise BadInputError(f"labels must have shape ({Xn.shape[0]},), got {lab.shape}.")
    if lab.size and not np.issubdtype(lab.dtype, np.integer):
        raise BadInputError(f"labels must be integer class indices, got dtype {lab.dtype}.")
    lab = lab.astype(np.intp)
    C = int(lab.max()) + 1 if n_classes is None and lab.size else int(n_classes or 0)
    if C < 2:
        raise BadInputError(f"At least two classes are needed, got n_classes={C}.")
    if lab.size and (lab.min() < 0 or lab.max() >= C):
        raise BadInputError(f"labels must lie in 0..{C - 1}.")
    counts = np.bincount(lab, minlength=C).astype(float)
    blocks, empty = pattern_blocks(miss)
    nonempty = np.ones(Xn.shape[0], dtype=bool)
    nonempty[empty] = False
    fit_counts = np.bincount(lab[nonempty], minlength=C).astype(float)
    if np.any(fit_counts < 1):
        bad = np.flatnonzero(fit_counts < 1).tolist()
        raise BadInputError(f"Class(es) {bad} have no row with an observed feature; every class needs at least one.")
    class_blocks = []
    for b in blocks:
        yb = lab[b.rows]
        for c in range(C):
            r = b.rows[yb == c]
            if r.size:
                class_blocks.append((c, PatternBlock(b.obs, b.mis, r)))
    Xf = np.where(miss, 0.0, Xn)
    _readonly(Xn, Xf, miss, lab, counts, fit_counts, empty)
    return DiscriminantData(Xn, Xf, miss, lab, C, counts, fit_counts, blocks, tuple(class_blocks), empty)


# ----------------------------------------------------------------------------- state
@dataclass(frozen=True, eq=False, slots=True)
class DiscriminantState:
    """Parameters after ``iteration`` EM steps and the E-step at them.

    Attributes
    ----------
    iteration : int
    priors : ndarray (n_classes,)
        :math:`\\theta_c = N_c / N`.
    means : ndarray (n_classes, n_features)
    covariances : ndarray (n_classes, n_features, n_features)
        One per class (all equal for LDA).
    log_likelihood : float
        Observed-data log-likelihood :math:`\\ell` (module docstring), a sum over all rows.
    objective : float
        ``log_likelihood`` (what the EM loop compares).
    sum_x, sum_xx : ndarray (n_classes, D), (n_classes, D, D)
        Expected sufficient statistics of the E-step at these parameters: :math:`\\sum \\tilde x_n` and
        :math:`\\sum (\\tilde x_n \\tilde x_n^\\top + C_n)` per class over the fitted rows.
    """

    iteration: int
    priors: np.ndarray
    means: np.ndarray
    covariances: np.ndarray
    log_likelihood: float
    objective: float
    sum_x: np.ndarray
    sum_xx: np.ndarray


@dataclass(frozen=True, eq=False, slots=True)
class DiscriminantResult:
    """Outcome of :func:`fit`: final ``state``, ``converged``, ``stop_reason`` (``"tol"`` | ``"max_iter"``
    | ``"degenerate"``), ``message``, ``n_iter``, ``trace`` (snapshots) and the config."""

    state: DiscriminantState
    converged: bool
    stop_reason: str
    message: str
    n_iter: int
    trace: tuple
    config: DiscriminantConfig


def _estep(data: DiscriminantData, means: np.ndarray, covs: np.ndarray):
    """Gaussian log-likelihood of the fitted rows and the completed sums, one factor per (class, pattern)."""
    C, D = data.n_classes, data.n_features
    s1 = np.zeros((C, D))
    s2 = np.zeros((C, D, D))
    ll = 0.0
    for c, b in data.class_blocks:
        o, m, rows = b.obs, b.mis, b.rows
        S = covs[c]
        L = cholesky(S[np.ix_(o, o)], what=f"covariance of class {c} on the observed features")
        d = data.Xf[np.ix_(rows, o)] - means[c, o]
        ll += -0.5 * (np.sum(d * chol_solve(L, d.T).T)
                      + rows.size * (2.0 * np.log(np.diag(L)).sum() + o.size * LOG_2PI))
        xt = np.empty((rows.size, D))
        xt[:, o] = data.Xf[np.ix_(rows, o)]
        if m.size:
            Smo = S[np.ix_(m, o)]
            K = chol_solve(L, Smo.T).T  # Sigma_mo Sigma_oo^-1
            xt[:, m] = means[c, m] + d @ K.T
            cond = S[np.ix_(m, m)] - K @ Smo.T
            s2[c][np.ix_(m, m)] += rows.size * 0.5 * (cond + cond.T)
        s1[c] += xt.sum(axis=0)
        s2[c] += xt.T @ xt
    return ll, s1, s2


def _prior_term(data: DiscriminantData, priors: np.ndarray) -> float:
    with np.errstate(divide="ignore"):
        return float(np.sum(data.counts * np.log(priors)))


def rda_covariances(class_scatter, pooled_scatter, alpha: float, gamma: float, reg_covar: float = 0.0) -> np.ndarray:
    """Friedman's regularised covariances (6.2.19), one per class: (n_classes, D, D).

    :math:`\\gamma(\\alpha S_c + (1-\\alpha) S) + \\frac{1-\\gamma}{D}\\operatorname{tr}(S) I + \\varepsilon I`
    with the pooled :math:`S` (see the module docstring for the trace).
    """
    Sc = np.asarray(class_scatter, dtype=float)
    S = np.asarray(pooled_scatter, dtype=float)
    D = S.shape[0]
    alpha, gamma = _check_unit(alpha, "alpha"), _check_unit(gamma, "gamma")
    out = gamma * (alpha * Sc + (1.0 - alpha) * S[None])
    out += ((1.0 - gamma) * np.trace(S) / D + reg_covar) * np.eye(D)[None]
    return 0.5 * (out + np.swapaxes(out, 1, 2))


def _covariances(config: DiscriminantConfig, Sc: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The model's covariances from the class scatters ``Sc`` (C, D, D) weighted by ``counts``."""
    C, D = Sc.shape[:2]
    S = np.tensordot(counts, Sc, 1) / counts.sum()
    if config.model == "qda":
        alpha, gamma = 1.0, 1.0
    elif config.model == "lda":
        alpha, gamma = 0.0, 1.0
    else:
        alpha, gamma = config.alpha, config.gamma
    return rda_covariances(Sc, S, alpha, gamma, config.reg_covar)


def _state(data: DiscriminantData, iteration: int, priors, means, covs) -> DiscriminantState:
    ll, s1, s2 = _estep(data, means, covs)
    total = ll + _prior_term(data, priors)
    if not np.isfinite(total):
        raise DegenerateCovarianceError("The observed-data log-likelihood is not finite: a covariance is degenerate. "
                                        "Increase reg_covar.")
    _readonly(priors, means, covs, s1, s2)
    return DiscriminantState(iteration, priors, means, covs, float(total), float(total), s1, s2)


def init(data: DiscriminantData, config: DiscriminantConfig, rng: np.random.Generator | None = None) -> DiscriminantState:
    """Initial state: observed class means (6.2.22) and the scatter of the rows completed by them.

    Deterministic (``rng`` is accepted for the house signature and not used). Missing entries are
    filled with their class's observed mean (a column never observed in a class: the overall
    observed mean); the class scatters of those rows give the covariances by the model's rule. With
    complete data this is already the ML fit.
    """
    C, D = data.n_classes, data.n_features
    obs = ~data.missing
    overall = np.nanmean(data.X, axis=0)
    means = np.empty((C, D))
    Sc = np.empty((C, D, D))
    for c in range(C):
        rows = np.flatnonzero(data.labels == c)
        rows = np.setdiff1d(rows, data.empty_rows)
        n_obs = obs[rows].sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            mc = np.where(n_obs > 0, data.Xf[rows].sum(axis=0) / np.maximum(n_obs, 1), overall)
        means[c] = mc
        filled = np.where(obs[rows], data.Xf[rows], mc) - mc
        Sc[c] = filled.T @ filled / rows.size
    covs = _covariances(config, Sc, data.fit_counts)
    priors = data.counts / data.counts.sum()
    return _state(data, 0, priors, means, covs)


def step(state: DiscriminantState, data: DiscriminantData, config: DiscriminantConfig) -> DiscriminantState:
    """One EM iteration: the M-step from the state's E-step sums, then the E-step at the new parameters (pure)."""
    n = data.fit_counts
    means = state.sum_x / n[:, None]
    Sc = state.sum_xx / n[:, None, None] - means[:, :, None] * means[:, None, :]
    covs = _covariances(config, Sc, n)
    return _state(data, state.iteration + 1, np.array(state.priors), means, covs)


def snapshot(state: DiscriminantState) -> dict:
    """Small summary of a state for the trace."""
    return {"iteration": state.iteration, "log_likelihood": state.log_likelihood,
            "means": np.array(state.means)}


def fit(data: DiscriminantData, config: DiscriminantConfig, rng: np.random.Generator | None = None, *,
        callback: Callable[[DiscriminantState], None] | None = None,
        init_state: DiscriminantState | None = None) -> DiscriminantResult:
    """EM from :func:`init` (or ``init_state``): a loop over :func:`step` until the per-row change of the
    observed-data log-likelihood is below ``tol``, ``max_iter`` steps, or a degenerate covariance.

    Warns
    -----
    ConvergenceWarning
        When it did not stop on the tolerance.
    """
    out = run_restarts(
        n_runs=1,
        start=lambda: init_state if init_state is not None else init(data, config, rng),
        step=lambda s: step(s, data, config),
        snapshot=snapshot,
        change=lambda old, new: (new.objective - old.objective) / max(data.n_fit, 1),
        max_iter=config.max_iter,
        tol=config.tol,
        callback=callback,
    )
    return DiscriminantResult(out.state, out.stop_reason == "tol", out.stop_reason, out.message,
                              out.state.iteration, out.trace, config)


# ----------------------------------------------------------------------------- prediction
def _as_covariances(covariances, C: int, D: int) -> np.ndarray:
    covs = np.asarray(covariances, dtype=float)
    if covs.shape == (D, D):
        return covs[None]
    if covs.shape != (C, D, D):
        raise BadInputError(f"covariances must have shape ({D}, {D}) or ({C}, {D}, {D}), got {covs.shape}.")
    return covs


def class_log_joint(X, priors, means, covariances, missing=None) -> np.ndarray:
    """:math:`\\log\\theta_c + \\log N(x_n^o; \\mu_c^o, \\Sigma_c^{oo})` for every row and class: (n, C).

    ``X`` has NaN at missing entries (or give ``missing``); ``covariances`` is (C, D, D) or one shared
    (D, D) matrix (then one Cholesky factor per pattern serves every class). Rows with nothing
    observed get :math:`\\log\\theta_c`.
    """
    X = np.asarray(X, dtype=float)
    miss = np.isnan(X) if missing is None else np.asarray(missing, dtype=bool)
    priors = np.asarray(priors, dtype=float)
    means = np.asarray(means, dtype=float)
    C, D = means.shape
    if X.ndim != 2 or X.shape[1] != D or miss.shape != X.shape:
        raise BadInputError(f"X must have shape (n, {D}) with a matching mask, got {X.shape}.")
    covs = _as_covariances(covariances, C, D)
    Xf = np.where(miss, 0.0, X)
    with np.errstate(divide="ignore"):
        out = np.tile(np.log(priors), (X.shape[0], 1))
    blocks, _ = pattern_blocks(miss)
    for b in blocks:
        o, rows = b.obs, b.rows
        xo = Xf[np.ix_(rows, o)]
        for c in range(C):
            k = 0 if covs.shape[0] == 1 else c
            if c == 0 or k:
                L = cholesky(covs[k][np.ix_(o, o)], what="covariance on the observed features")
                logdet = 2.0 * np.log(np.diag(L)).sum()
            d = xo - means[c, o]
            out[rows, c] += -0.5 * (np.sum(d * chol_solve(L, d.T).T, axis=1) + logdet + o.size * LOG_2PI)
    return out


def class_log_posterior(X, priors, means, covariances, missing=None) -> np.ndarray:
    """:math:`\\log P(y = c \\mid x^o)` by marginalisation (6.2.21): (n, C), rows normalised."""
    lj = class_log_joint(X, priors, means, covariances, missing)
    return lj - logsumexp(lj, axis=1, keepdims=True)


def observed_log_likelihood(data: DiscriminantData, priors, means, covariances) -> float:
    """:math:`\\ell = \\sum_n \\log\\theta_{y_n} + \\log N(x_n^o; \\mu_{y_n}^o, \\Sigma_{y_n}^{oo})` (a dense
    reference for the EM's bookkeeping, via :func:`class_log_joint`)."""
    lj = class_log_joint(data.X, priors, means, covariances, data.missing)
    return float(lj[np.arange(data.n_samples), data.labels].sum())


def logistic_parameters(priors, means, covariance) -> tuple[np.ndarray, float]:
    """Binary LDA as a logistic model (6.2.12-6.2.15, signs as corrected in the digest's errata).

    :math:`P(y = 1 \\mid x) = \\sigma(w^\\top x + b)` with :math:`w = \\Sigma^{-1}(\\mu_1 - \\mu_0)` and
    :math:`b = -\\tfrac12(\\mu_1 - \\mu_0)^\\top\\Sigma^{-1}(\\mu_1 + \\mu_0) + \\log(\\theta_1/\\theta_0)`
    (class 1 plays the thesis's :math:`+1`, class 0 its :math:`-1`). Complete ``x`` only; with missing
    features the same formula holds on the observed block (:math:`\\Sigma^{oo}`, :math:`\\mu^o`).
    """
    priors = np.asarray(priors, dtype=float)
    means = np.asarray(means, dtype=float)
    if priors.shape != (2,) or means.shape[0] != 2:
        raise BadInputError("logistic_parameters needs exactly two classes.")
    cov = np.asarray(covariance, dtype=float)
    L = cholesky(cov)
    diff = means[1] - means[0]
    w = chol_solve(L, diff)
    b = -0.5 * float(w @ (means[1] + means[0])) + float(np.log(priors[1] / priors[0]))
    return w, b
