r"""EM for Gaussian mixtures on data with missing values.

Algorithm (Ghahramani & Jordan 1994, section 4.1.1; Delalleau, Courville & Bengio, section 2),
with the errata of the reference digest applied (negative signs in the complete-data
log-likelihood; the mixing weights :math:`\pi_j` included in the responsibilities; the third
expectation is the outer product :math:`E[z_{ij} x^m x^{m\top} | x^o]`).

For every row :math:`i` with observed coordinates :math:`o_i` and missing :math:`m_i`:

E-step, at the current parameters :math:`\theta^{(t)}`:

.. math::

    h_{ij} = \frac{\pi_j N(x_i^o; \mu_j^o, \Sigma_j^{oo})}{\sum_l \pi_l N(x_i^o; \mu_l^o, \Sigma_l^{oo})},
    \qquad
    \hat x_{ij}^m = \mu_j^m + \Sigma_j^{mo} (\Sigma_j^{oo})^{-1} (x_i^o - \mu_j^o),
    \qquad
    Q_{ij} = \Sigma_j^{mm} - \Sigma_j^{mo} (\Sigma_j^{oo})^{-1} \Sigma_j^{om}.

M-step, with :math:`\tilde x_{ij}` the row completed by :math:`\hat x_{ij}^m` and :math:`C_{ij}`
the :math:`D \times D` matrix that is :math:`Q_{ij}` on the (m, m) block and 0 elsewhere:

.. math::

    N_j = \sum_i h_{ij}, \quad \pi_j = N_j / \sum_l N_l, \quad
    \mu_j = \frac{1}{N_j}\sum_i h_{ij}\tilde x_{ij}, \quad
    \Sigma_j = \frac{1}{N_j}\sum_i h_{ij}\big[(\tilde x_{ij}-\mu_j)(\tilde x_{ij}-\mu_j)^\top + C_{ij}\big]
               + \varepsilon I .

:math:`\varepsilon` is ``reg_covar`` (as in scikit-learn), and :math:`N_j` gets ``10 * eps`` so an
empty component does not divide by zero. The observed-data log-likelihood
:math:`\ell = \sum_i \log \sum_j \pi_j N(x_i^o; \mu_j^o, \Sigma_j^{oo})` never decreases.

Variants (``EMConfig.variant``), kept as ablations for teaching:

* ``"em"``: the algorithm above.
* ``"naive"``: impute the conditional means and refit, i.e. drop :math:`C_{ij}`. Not EM: the
  likelihood can decrease and the covariances shrink (the paper's warning).
* ``"mean_impute"``: replace every missing entry by its observed column mean once, then run
  complete-data EM. The observed-data log-likelihood of its parameters is still reported.

Shape of the API (see ``docs/ARCHITECTURE.md``): :func:`prepare` the data once,
:func:`init` -> :class:`EMState`, :func:`step` (one E+M, pure), :func:`fit` (a loop over
:func:`step` with restarts and a stop reason). States are immutable.

Rows with every value missing do not enter the fit (their likelihood is 1 whatever the
parameters); they are imputed with the mixture mean.

References: Z. Ghahramani and M. I. Jordan, *Learning from incomplete data*, MIT AI Memo 1509
(1994); O. Delalleau, A. Courville and Y. Bengio, *Efficient EM training of Gaussian mixtures
with missing data*.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy.special import logsumexp

from ._loop import ConvergenceWarning, run_restarts
from ._validation import BadInputError, check_incomplete
from .gaussian import DegenerateCovarianceError, embed_add, observed_diagonal, observed_gaussian, precision_and_logdet
from .kmeans import kmeans, kmeans_plusplus
from .patterns import MissingPatterns, group_patterns

__all__ = [
    "EMConfig",
    "EMData",
    "EMState",
    "EMResult",
    "ConvergenceWarning",
    "prepare",
    "init",
    "init_from_parameters",
    "step",
    "fit",
    "impute",
    "observed_log_likelihood",
    "snapshot",
    "COVARIANCE_TYPES",
    "VARIANTS",
    "INIT_METHODS",
]

COVARIANCE_TYPES = ("full", "diag")
VARIANTS = ("em", "naive", "mean_impute")
INIT_METHODS = ("kmeans", "kmeans++", "random")
_EPS10 = 10 * np.finfo(float).eps


@dataclass(frozen=True, slots=True)
class EMConfig:
    """Settings of EM for a Gaussian mixture with missing values.

    Parameters
    ----------
    n_components : int
        Number of mixture components K.
    covariance_type : {"full", "diag"}
    reg_covar : float
        Added to the diagonal of every covariance after each M-step (>= 0).
    tol : float
        Stop when the mean (per fitted row) log-likelihood changes by less than ``tol``.
    max_iter : int
        Maximum number of EM steps per restart.
    init : {"kmeans", "kmeans++", "random"}
        k-means with partial distances (seeded by k-means++), k-means++ seeds only, or
        random responsibilities.
    n_init : int
        Number of restarts; the one with the highest final objective is kept.
    variant : {"em", "naive", "mean_impute"}
        See the module docstring.
    """

    n_components: int = 1
    covariance_type: str = "full"
    reg_covar: float = 1e-6
    tol: float = 1e-5
    max_iter: int = 300
    init: str = "kmeans"
    n_init: int = 1
    variant: str = "em"

    def __post_init__(self):
        if not isinstance(self.n_components, (int, np.integer)) or self.n_components < 1:
            raise BadInputError(f"n_components must be a positive integer, got {self.n_components!r}.")
        if self.covariance_type not in COVARIANCE_TYPES:
            raise BadInputError(f"covariance_type must be one of {COVARIANCE_TYPES}, got {self.covariance_type!r}.")
        if not self.reg_covar >= 0:
            raise BadInputError(f"reg_covar must be >= 0, got {self.reg_covar!r}.")
        if not self.tol >= 0:
            raise BadInputError(f"tol must be >= 0, got {self.tol!r}.")
        if not isinstance(self.max_iter, (int, np.integer)) or self.max_iter < 0:
            raise BadInputError(f"max_iter must be a non-negative integer, got {self.max_iter!r}.")
        if self.init not in INIT_METHODS:
            raise BadInputError(f"init must be one of {INIT_METHODS}, got {self.init!r}.")
        if not isinstance(self.n_init, (int, np.integer)) or self.n_init < 1:
            raise BadInputError(f"n_init must be a positive integer, got {self.n_init!r}.")
        if self.variant not in VARIANTS:
            raise BadInputError(f"variant must be one of {VARIANTS}, got {self.variant!r}.")


@dataclass(frozen=True, eq=False, slots=True)
class EMData:
    """Incomplete data prepared once for EM (see :func:`prepare`).

    ``X`` holds NaN at missing entries, ``Xf`` holds 0 there (both in the caller's row order).
    ``patterns`` groups the rows in the *sorted layout* (see
    :func:`~explorer.core.patterns.group_patterns`): the kernels work on ``Xp = Xf[perm]`` where
    every group is a contiguous block of rows; results are put back in the caller's order.
    For the ``mean_impute`` variant the model is fitted on ``mean_filled`` instead.
    """

    X: np.ndarray
    Xf: np.ndarray
    missing: np.ndarray
    patterns: MissingPatterns
    Xp: np.ndarray
    rows_p: np.ndarray
    col_mean: np.ndarray
    fit_rows: np.ndarray
    mean_filled: np.ndarray
    no_missing: np.ndarray
    filled_patterns: MissingPatterns
    all_rows: np.ndarray

    @property
    def n_samples(self) -> int:
        return self.X.shape[0]

    @property
    def n_features(self) -> int:
        return self.X.shape[1]

    @property
    def n_fit(self) -> int:
        return int(self.fit_rows.size)

    @property
    def empty_rows(self) -> np.ndarray:
        """Rows (caller's order) with nothing observed; ``patterns.empty_rows`` are in the sorted layout."""
        return np.sort(self.patterns.perm[self.n_fit :])


def prepare(X, missing=None, *, columns=None) -> EMData:
    """Validate incomplete data and group its rows by missingness.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        NaN marks missing entries (unless ``missing`` is given).
    missing : array-like of bool, optional
        True = missing.

    Raises
    ------
    BadInputError
        Non-numeric values, inf, all-missing columns, fewer than two rows with data.
    """
    Xn, miss = check_incomplete(X, missing, columns=columns, allow_empty_rows=True)
    patterns = group_patterns(miss, sort=True)
    n_nonempty = Xn.shape[0] - patterns.empty_rows.size
    fit_rows = np.sort(patterns.perm[:n_nonempty])
    if fit_rows.size < 2:
        raise BadInputError("At least two rows with an observed value are needed to fit a mixture.")
    Xf = np.where(miss, 0.0, Xn)
    col_mean = np.nanmean(Xn, axis=0)
    mean_filled = np.where(miss, col_mean, Xn)
    no_missing = np.zeros_like(miss)
    all_rows = np.arange(Xn.shape[0])
    Xp = np.ascontiguousarray(Xf[patterns.perm])
    rows_p = np.arange(n_nonempty)
    _readonly(Xn, Xf, miss, col_mean, fit_rows, mean_filled, no_missing, all_rows, Xp, rows_p)
    return EMData(
        X=Xn,
        Xf=Xf,
        missing=miss,
        patterns=patterns,
        Xp=Xp,
        rows_p=rows_p,
        col_mean=col_mean,
        fit_rows=fit_rows,
        mean_filled=mean_filled,
        no_missing=no_missing,
        filled_patterns=group_patterns(no_missing),
        all_rows=all_rows,
    )


@dataclass(frozen=True, eq=False, slots=True)
class EMState:
    """Parameters after ``iteration`` EM steps, with the E-step computed at those parameters.

    Attributes
    ----------
    iteration : int
    weights : ndarray of shape (n_components,)
    means : ndarray of shape (n_components, n_features)
    covariances : ndarray
        (n_components, n_features, n_features) for ``"full"``, (n_components, n_features) for ``"diag"``.
    log_likelihood : float
        Observed-data log-likelihood of these parameters on the rows with data.
    objective : float
        The quantity the variant maximises (equal to ``log_likelihood`` except for ``mean_impute``,
        where it is the complete-data log-likelihood of the mean-filled matrix).
    resp : ndarray of shape (n_samples, n_components)
        Responsibilities :math:`h_{ij}` (the weights for rows with nothing observed).
    """

    iteration: int
    weights: np.ndarray
    means: np.ndarray
    covariances: np.ndarray
    log_likelihood: float
    objective: float
    resp: np.ndarray
    xhat: np.ndarray = field(repr=False)  # (K, n, D) rows completed per component, in the fit layout (see _fit_view)
    cond_cov: tuple = field(repr=False)  # per component, per group: (n_unique, m, m) (full only)

    @property
    def n_components(self) -> int:
        return self.weights.shape[0]

    def full_covariances(self) -> np.ndarray:
        """Covariances as (n_components, n_features, n_features) whatever the covariance type."""
        if self.covariances.ndim == 3:
            return self.covariances
        return np.einsum("kd,de->kde", self.covariances, np.eye(self.covariances.shape[1]))


@dataclass(frozen=True, eq=False, slots=True)
class EMResult:
    """Outcome of :func:`fit`: the best restart's final state, why it stopped, and its trace."""

    state: EMState
    converged: bool
    stop_reason: str  # "tol" | "max_iter" | "degenerate"
    message: str
    n_iter: int
    trace: tuple  # snapshots (dicts) of every iteration of the kept restart, see snapshot()
    restart_objectives: tuple
    config: EMConfig


def _readonly(*arrays):
    for a in arrays:
        if isinstance(a, np.ndarray):
            a.setflags(write=False)


def _component_loglik(Xf, missing, patterns, means, covariances, covariance_type, conditionals):
    """Per-component observed log-densities (n, K), completions (K, n, D) and conditional covariances."""
    K = means.shape[0]
    n = Xf.shape[0]
    ll = np.empty((n, K))
    xhat = np.empty((K,) + Xf.shape) if conditionals else None
    cond = []
    if covariance_type == "full":
        precision, logdet = precision_and_logdet(covariances)
        for k in range(K):
            ll[:, k], _, cc = observed_gaussian(
                Xf, patterns, means[k], precision[k], logdet[k], conditionals=conditionals,
                out=xhat[k] if conditionals else None,
            )
            if conditionals:
                cond.append(tuple(cc))
    else:
        if np.any(covariances <= 0):
            raise DegenerateCovarianceError(
                "A diagonal variance is zero or negative: a component collapsed on a constant feature. "
                "Increase reg_covar or drop constant columns."
            )
        for k in range(K):
            ll[:, k], xh = observed_diagonal(Xf, missing, means[k], covariances[k], conditionals=conditionals)
            if conditionals:
                xhat[k] = xh
    return ll, xhat, tuple(cond)


def _e_step(Xf, missing, patterns, weights, means, covariances, covariance_type, fit_rows, conditionals=True):
    ll, xhat, cond = _component_loglik(Xf, missing, patterns, means, covariances, covariance_type, conditionals)
    with np.errstate(divide="ignore"):  # a component with weight exactly 0 gets log-weight -inf
        weighted = ll + np.log(weights)
    norm = logsumexp(weighted, axis=1)
    with np.errstate(under="ignore"):  # tiny responsibilities underflow to 0, which is what we want
        resp = np.exp(weighted - norm[:, None])
    total = float(norm[fit_rows].sum())
    if not np.isfinite(total):
        raise DegenerateCovarianceError(
            "The log-likelihood is not finite: a component assigns zero density to the data. "
            "Increase reg_covar or use fewer components."
        )
    return total, resp, xhat, cond


def _m_step(resp, xhat, cond, prev_covariances, patterns, fit_rows, config: EMConfig):
    """Closed-form M-step from the E-step computed at the previous parameters."""
    K = config.n_components
    n_features = xhat.shape[2]
    h_all = np.zeros_like(resp)
    h_all[fit_rows] = resp[fit_rows]
    nk = h_all.sum(axis=0) + _EPS10
    weights = nk / nk.sum()
    means = (h_all.T[:, None, :] @ xhat)[:, 0, :] / nk[:, None]
    full = config.covariance_type == "full"
    covs = np.empty((K, n_features, n_features) if full else (K, n_features))
    exact = config.variant == "em"
    if not full and exact:
        # C term of the diagonal case: Q_ij = diag(sigma^2_jd) on the missing coordinates
        missing_mass = h_all.T @ patterns.missing  # (K, D): sum_i h_ij [d missing in row i]
    for k in range(K):
        h = h_all[:, k]
        diff = xhat[k] - means[k]
        if full:
            cov = (h[:, None] * diff).T @ diff
            if exact:
                for g, q in zip(patterns.groups, cond[k]):
                    if g.n_missing:
                        embed_add(cov, g, q, np.bincount(g.inverse, weights=h[g.rows], minlength=g.n_unique))
            cov /= nk[k]
            cov = 0.5 * (cov + cov.T)
            cov.flat[:: n_features + 1] += config.reg_covar
            covs[k] = cov
        else:
            var = h @ (diff * diff)
            if exact:
                var = var + prev_covariances[k] * missing_mass[k]
            covs[k] = var / nk[k] + config.reg_covar
    return weights, means, covs


def _state_from_parameters(data: EMData, config: EMConfig, iteration, weights, means, covariances) -> EMState:
    Xfit, miss_fit, pats_fit, rows_fit, perm = _fit_view(data, config)
    objective, resp_p, xhat, cond = _e_step(
        Xfit, miss_fit, pats_fit, weights, means, covariances, config.covariance_type, rows_fit
    )
    resp = _to_original(resp_p, perm)
    if config.variant == "mean_impute":
        ll = observed_log_likelihood(data, weights, means, covariances, config.covariance_type)[data.fit_rows].sum()
    else:
        ll = objective
    _readonly(weights, means, covariances, resp, xhat)
    return EMState(
        iteration=iteration,
        weights=weights,
        means=means,
        covariances=covariances,
        log_likelihood=float(ll),
        objective=float(objective),
        resp=resp,
        xhat=xhat,
        cond_cov=cond,
    )


def _fit_view(data: EMData, config: EMConfig):
    """(matrix, missing, patterns, rows, perm) the variant fits on, in its row layout.

    ``perm`` maps the layout to the caller's rows (``layout_row = original_row[perm]``), or is
    None when the layout is the caller's order.
    """
    if config.variant == "mean_impute":
        return data.mean_filled, data.no_missing, data.filled_patterns, data.all_rows, None
    p = data.patterns
    return data.Xp, p.missing, p, data.rows_p, p.perm


def _to_original(a: np.ndarray, perm) -> np.ndarray:
    """Rows of ``a`` (in a fit layout) back in the caller's order."""
    if perm is None:
        return a
    out = np.empty_like(a)
    out[perm] = a
    return out


def init_from_parameters(data: EMData, config: EMConfig, weights, means, covariances) -> EMState:
    """State at iteration 0 from given parameters (validated and copied)."""
    K, D = config.n_components, data.n_features
    weights = np.array(weights, dtype=float)
    means = np.array(means, dtype=float)
    covariances = np.array(covariances, dtype=float)
    expected = (K, D, D) if config.covariance_type == "full" else (K, D)
    if weights.shape != (K,) or means.shape != (K, D) or covariances.shape != expected:
        raise BadInputError(
            f"Initial parameters have shapes weights {weights.shape}, means {means.shape}, covariances "
            f"{covariances.shape}; expected {(K,)}, {(K, D)}, {expected}."
        )
    if np.any(weights < 0) or not np.isclose(weights.sum(), 1.0):
        raise BadInputError("Initial weights must be non-negative and sum to one.")
    return _state_from_parameters(data, config, 0, weights, means, covariances)


def init(data: EMData, config: EMConfig, rng: np.random.Generator) -> EMState:
    """Initial parameters from k-means (partial distances) or random responsibilities.

    The responsibilities of the initialisation give the weights; each cluster's means and
    covariances are computed from its members with missing entries filled by the cluster's
    observed means (a starting point only: the first EM step corrects it).
    """
    K = config.n_components
    Xfit, miss_fit, _, rows_fit, _ = _fit_view(data, config)
    if K > rows_fit.size:
        raise BadInputError(
            f"n_components={K} is larger than the number of rows with observed data ({rows_fit.size}). "
            "Use fewer components."
        )
    Xr, obs = Xfit[rows_fit], ~miss_fit[rows_fit]
    if config.init == "random":
        r = rng.uniform(size=(rows_fit.size, K))
        r /= r.sum(axis=1, keepdims=True)
    else:
        if config.init == "kmeans":
            _, labels = kmeans(Xr, obs, K, rng)
        else:
            from .kmeans import partial_sq_distances

            labels = partial_sq_distances(Xr, obs, kmeans_plusplus(Xr, obs, K, rng)).argmin(axis=1)
        r = np.zeros((rows_fit.size, K))
        r[np.arange(rows_fit.size), labels] = 1.0
    nk = r.sum(axis=0) + _EPS10
    weights = nk / nk.sum()
    obs_f = obs.astype(float)
    col_means = (r.T @ Xr + _EPS10 * data.col_mean) / (r.T @ obs_f + _EPS10)  # observed mean per cluster
    D = data.n_features
    full = config.covariance_type == "full"
    covs = np.empty((K, D, D) if full else (K, D))
    means = np.empty((K, D))
    for k in range(K):
        filled = np.where(obs, Xr, col_means[k])
        means[k] = r[:, k] @ filled / nk[k]
        diff = filled - means[k]
        if full:
            cov = (r[:, k, None] * diff).T @ diff / nk[k]
            cov.flat[:: D + 1] += config.reg_covar
            covs[k] = 0.5 * (cov + cov.T)
        else:
            covs[k] = r[:, k] @ (diff * diff) / nk[k] + config.reg_covar
    return _state_from_parameters(data, config, 0, weights, means, covs)


def step(state: EMState, data: EMData, config: EMConfig) -> EMState:
    """One EM iteration (M-step from the cached E-step, then the E-step at the new parameters).

    Pure: returns a new :class:`EMState`; ``state`` is unchanged.

    Raises
    ------
    DegenerateCovarianceError
        When a component collapses (a covariance stops being positive definite).
    """
    _, _, pats_fit, rows_fit, perm = _fit_view(data, config)
    resp_p = state.resp if perm is None else state.resp[perm]
    weights, means, covs = _m_step(resp_p, state.xhat, state.cond_cov, state.covariances, pats_fit, rows_fit, config)
    return _state_from_parameters(data, config, state.iteration + 1, weights, means, covs)


def impute(state: EMState, data: EMData, config: EMConfig) -> np.ndarray:
    """Single imputation: the conditional mean :math:`E[x^m | x^o] = \\sum_j h_{ij} \\hat x_{ij}^m`.

    Observed entries are copied from the data unchanged. ``mean_impute`` imputes the column means.
    """
    if config.variant == "mean_impute":
        fill = np.broadcast_to(data.col_mean, data.X.shape)
    else:
        perm = data.patterns.perm
        fill = _to_original(np.einsum("nk,knd->nd", state.resp[perm], state.xhat), perm)
    return np.where(data.missing, fill, data.X)


def observed_log_likelihood(data: EMData, weights, means, covariances, covariance_type: str) -> np.ndarray:
    """Per-row observed-data log-likelihood :math:`\\log\\sum_j \\pi_j N(x_i^o; \\mu_j^o, \\Sigma_j^{oo})`.

    Rows with nothing observed get 0.
    """
    p = data.patterns
    ll, _, _ = _component_loglik(
        data.Xp, p.missing, p, np.asarray(means), np.asarray(covariances), covariance_type, False
    )
    with np.errstate(divide="ignore"):
        out = logsumexp(ll + np.log(np.asarray(weights)), axis=1)
    out[p.empty_rows] = 0.0
    return _to_original(out, p.perm)


def snapshot(state: EMState, data: EMData, config: EMConfig, truth=None) -> dict:
    """Small summary of a state for the history (see :mod:`explorer.history`)."""
    resp = state.resp[data.fit_rows]
    with np.errstate(divide="ignore", invalid="ignore"):  # 0 * log 0 = 0
        ent = -np.nansum(np.where(resp > 0, resp * np.log(resp), 0.0), axis=1).mean()
    snap = {
        "iteration": state.iteration,
        "log_likelihood": state.log_likelihood,
        "objective": state.objective,
        "weights": np.array(state.weights),
        "means": np.array(state.means),
        "covariances": np.array(state.full_covariances()),
        "resp_entropy": float(ent),
        "hard_counts": np.bincount(resp.argmax(axis=1), minlength=state.n_components),
    }
    if truth is not None and data.missing.any():
        imp = impute(state, data, config)
        err = (imp - truth)[data.missing]
        snap["rmse"] = float(np.sqrt(np.mean(err**2)))
        snap["mae"] = float(np.mean(np.abs(err)))
    return snap


def fit(
    data: EMData,
    config: EMConfig,
    rng: np.random.Generator,
    *,
    callback: Callable[[EMState], None] | None = None,
    truth=None,
    init_state: EMState | None = None,
) -> EMResult:
    """Run EM: ``config.n_init`` restarts, each a loop over :func:`step` until the tolerance,
    ``max_iter`` or a degenerate component; keep the restart with the highest objective.

    Parameters
    ----------
    data : EMData
        From :func:`prepare`.
    config : EMConfig
    rng : numpy.random.Generator
        Used for the initialisations (restart ``r`` continues the same stream).
    callback : callable, optional
        Called with every new state.
    truth : ndarray, optional
        Complete data; the trace then records the imputation error on the missing entries.
    init_state : EMState, optional
        Start from this state instead of initialising (single run).

    Warns
    -----
    ConvergenceWarning
        When the kept run stopped at ``max_iter`` or on a degenerate component.
    """
    if truth is not None:
        truth = np.asarray(truth, dtype=float)
        if truth.shape != data.X.shape:
            raise BadInputError(f"truth has shape {truth.shape}, expected {data.X.shape}.")
    n_fit = _fit_view(data, config)[3].size
    out = run_restarts(
        n_runs=1 if init_state is not None else config.n_init,
        start=lambda: init_state if init_state is not None else init(data, config, rng),
        step=lambda state: step(state, data, config),
        snapshot=lambda state: snapshot(state, data, config, truth),
        change=lambda old, new: (new.objective - old.objective) / n_fit,
        max_iter=config.max_iter,
        tol=config.tol,
        callback=callback,
    )
    return EMResult(
        state=out.state,
        converged=out.stop_reason == "tol",
        stop_reason=out.stop_reason,
        message=out.message,
        n_iter=out.state.iteration,
        trace=out.trace,
        restart_objectives=out.restart_objectives,
        config=config,
    )
