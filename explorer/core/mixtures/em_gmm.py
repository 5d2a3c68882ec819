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

MAP-EM (``EMConfig.prior``; Fraley & Raftery 2007). With a conjugate Normal-inverse-Wishart prior
on every component, :math:`\mu_j \mid \Sigma_j \sim N(\mu_P, \Sigma_j / \kappa_P)` and
:math:`\Sigma_j \sim \mathcal{IW}(\nu_P, \Lambda_P)` (density
:math:`\propto |\Sigma|^{-(\nu_P + D + 1)/2} \exp(-\tfrac12 \operatorname{tr} \Lambda_P \Sigma^{-1})`),
the E-step is unchanged and the M-step takes the posterior mode given the expected sufficient
statistics :math:`N_j`, :math:`\bar x_j = \mu_j^{ML}` and
:math:`W_j = \sum_i h_{ij}[(\tilde x_{ij}-\bar x_j)(\tilde x_{ij}-\bar x_j)^\top + C_{ij}]`
(Fraley & Raftery 2007, Table 2, model VVV):

.. math::

    \mu_j = \frac{N_j \bar x_j + \kappa_P \mu_P}{N_j + \kappa_P}, \qquad
    \Sigma_j = \frac{\Lambda_P + W_j + \frac{\kappa_P N_j}{\kappa_P + N_j}
                     (\bar x_j - \mu_P)(\bar x_j - \mu_P)^\top}{\nu_P + N_j + D + 2} + \varepsilon I .

(The joint mode of :math:`(\mu, \Sigma)`: the Gaussian prior on :math:`\mu` contributes
:math:`|\Sigma|^{-1/2}`, hence :math:`D + 2`.) The weights keep their ML update (no prior on them).
For ``"diag"`` the matching prior is independent per coordinate:
:math:`\mu_{jd} \mid \sigma^2_{jd} \sim N(\mu_{Pd}, \sigma^2_{jd}/\kappa_P)`,
:math:`\sigma^2_{jd} \sim \text{Inv-Gamma}(\nu_P/2, \Lambda_{P,dd}/2)`, whose mode is the formula above
with :math:`D = 1` per coordinate (denominator :math:`\nu_P + N_j + 3`), as F&R's diagonal models.
The tracked objective is then the log-posterior :math:`\ell + \sum_j \log p(\mu_j, \Sigma_j)` (normalised
prior densities), which never decreases (with ``reg_covar = 0`` the M-step is its exact maximiser).
Defaults (``prior="auto"`` or fields of :class:`NIWPrior` left None): :math:`\mu_P` = data mean,
:math:`\kappa_P = 0.01`, :math:`\nu_P = D + 2` (F&R's ``priorControl``) and
:math:`\Lambda_P = (\nu_P + D + 2)\,\hat\Sigma / K^{2/D}`, so that the prior's covariance mode
:math:`\Lambda_P / (\nu_P + D + 2)` is :math:`\hat\Sigma / K^{2/D}` (K components sharing the
data's volume). This departs from F&R, whose scale :math:`\Lambda_P = \hat\Sigma / K^{2/D}` puts
the mode 2D + 4 times lower: their prior only keeps clustering away from singular covariances, and
its pull towards small covariances made 95 % predictive intervals cover 41-77 % on the project's
small benchmark sets with K = 2-5 (``results/coverage_prior.md``). ``prior="fraley-raftery"`` keeps
F&R's scale. With :math:`(\hat\mu, \hat\Sigma)` the data mean and (ML)
covariance: sample moments for complete data, and for incomplete data the ML fit of a single Gaussian
by this EM (K = 1), which is consistent under MAR and positive definite, unlike pairwise-complete
moments (biased unless MCAR, and not always positive semi-definite). F&R use R's ``var`` (divisor
n - 1); here the divisor is n (a factor n / (n - 1) on :math:`\Lambda_P`). See :func:`resolve_prior`.
``EMConfig.prior`` defaults to None (maximum likelihood), so the paper reproductions are unchanged.

At the end of :func:`fit`, a :class:`ComponentCollapseWarning` names every component whose effective
size :math:`N_j` is below the dimension D (its covariance is then set by ``reg_covar`` or the prior,
not by the data).

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
with missing data*; C. Fraley and A. E. Raftery, *Bayesian regularization for normal mixture
estimation and model-based clustering*, Journal of Classification 24:155-181 (2007).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
from scipy.special import entr, logsumexp

from explorer.core.gaussians.gaussian import (
    DegenerateCovarianceError,
    cholesky,
    observed_gaussian,
    precision_and_logdet,
)
from explorer.core.gaussians.patterns import MissingPatterns, group_patterns
from explorer.core.loop import ConvergenceWarning, run_restarts
from explorer.core.mixtures.kmeans import kmeans, kmeans_plusplus
from explorer.core.mixtures.prior import (
    PRIORS,
    NIWPrior,
    ResolvedPrior,
    complete_prior,
    log_prior,
    posterior_predictive,
    prior_mode_divisor,
    resolved_arrays,
)
from explorer.core.mixtures.suffstats import (
    SufficientStatistics,
    choose_strategy,
    component_loglik,
    estep_statistics,
    m_step,
    posterior_mode,
    statistics_from_loglik,
)
from explorer.core.validation import BadInputError, check_incomplete

__all__ = [
    "EMConfig",
    "MOMENT_STEPS",
    "NIWPrior",
    "prior_mode_divisor",
    "posterior_predictive",
    "ComponentCollapseWarning",
    "resolve_prior",
    "resolved_prior",
    "component_loglik",
    "log_prior",
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
    "completions",
    "resolve_strategy",
    "workspace",
    "warm_up_kernels",
    "STRATEGIES",
    "observed_log_likelihood",
    "snapshot",
    "data_moments",
    "effective_sizes",
    "collapsed_components",
    "COVARIANCE_TYPES",
    "VARIANTS",
    "INIT_METHODS",
]

COVARIANCE_TYPES = ("full", "diag")
VARIANTS = ("em", "naive", "mean_impute")
INIT_METHODS = ("kmeans", "kmeans++", "random")
STRATEGIES = ("auto", "compiled", "numpy", "covariance", "tree", "naive")
_EPS10 = 10 * np.finfo(float).eps


class ComponentCollapseWarning(UserWarning):
    """A fitted component's effective size (sum of responsibilities) is below the dimension."""


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
    prior : None, "auto", "fraley-raftery" or NIWPrior, default None
        None: maximum likelihood. ``"auto"`` (= ``NIWPrior()``): MAP-EM with the data-scaled
        Normal-inverse-Wishart prior whose covariance mode is the data covariance / K^(2/D);
        ``"fraley-raftery"``: the same prior with Fraley & Raftery's scale (mode about 2D + 4 times
        smaller); a :class:`NIWPrior` sets its fields. The objective is then the log-posterior. See
        the module docstring.
    strategy : {"auto", "compiled", "numpy", "covariance", "tree", "naive"}
        How the E-step computes the per-pattern quantities (full covariances; the results agree to
        round-off). ``"compiled"``: one numba pass over the rows sorted by pattern, in cache-sized
        blocks (:mod:`explorer.core._compiled.gmm`); ``"numpy"``: the reference kernels of
        :mod:`explorer.core.gaussians.gaussian`; ``"covariance"``: the observed blocks of the covariance are
        factored instead of the missing blocks of the precision (:mod:`explorer.core.mixtures.covariance_side`;
        for mostly-missing rows); ``"tree"`` / ``"naive"``: Delalleau et al.'s minimum-spanning-tree
        algorithm and their per-pattern baseline (:mod:`explorer.core.mixtures.pattern_tree`). ``"auto"``: see
        :func:`resolve_strategy`. Diagonal covariances always use the numpy kernels.
    """

    n_components: int = 1
    covariance_type: str = "full"
    reg_covar: float = 1e-6
    tol: float = 1e-5
    max_iter: int = 300
    init: str = "kmeans"
    n_init: int = 1
    variant: str = "em"
    prior: object = None
    strategy: str = "auto"

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
        if not (self.prior is None or isinstance(self.prior, NIWPrior)
                or (isinstance(self.prior, str) and self.prior in PRIORS)):
            raise BadInputError(f"prior must be None (maximum likelihood), 'auto', 'fraley-raftery' or an NIWPrior, "
                                f"got {self.prior!r}.")
        if self.strategy not in STRATEGIES:
            raise BadInputError(f"strategy must be one of {STRATEGIES}, got {self.strategy!r}.")


@dataclass(frozen=True, eq=False, slots=True)
class EMData:
    """Incomplete data prepared once for EM (see :func:`prepare`).

    ``X`` holds NaN at missing entries, ``Xf`` holds 0 there (both in the caller's row order).
    ``patterns`` groups the rows in the *sorted layout* (see
    :func:`~explorer.core.gaussians.patterns.group_patterns`): the kernels work on ``Xp = Xf[perm]`` where
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
    # scratch of the E-step kernels (row layouts, workspaces, pattern trees), filled on first use
    cache: dict = field(default_factory=dict, repr=False)

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
        The quantity the variant maximises: ``log_likelihood`` (for ``mean_impute`` the complete-data
        log-likelihood of the mean-filled matrix), plus ``log_prior`` under a prior (the log-posterior).
    log_prior : float
        :math:`\\sum_j \\log p(\\mu_j, \\Sigma_j)` under the prior (0 without one).
    prior : ResolvedPrior or None
        The prior resolved at initialisation (carried from step to step).
    resp : ndarray of shape (n_samples, n_components)
        Responsibilities :math:`h_{ij}` (the weights for rows with nothing observed).
    stats : SufficientStatistics
        The E-step's expected sufficient statistics about its means (what the next M-step needs;
        see :mod:`explorer.core.mixtures.suffstats`). The completed rows are not stored: :func:`completions`
        computes them on demand.
    resp_summary : RespSummary or None
        The entropy and hard counts of ``resp`` over the fitted rows when the compiled kernel summed them in its
        pass (:func:`snapshot` reads them instead of a pass over ``resp``); None from the other kernels.
    """

    iteration: int
    weights: np.ndarray
    means: np.ndarray
    covariances: np.ndarray
    log_likelihood: float
    objective: float
    resp: np.ndarray
    stats: SufficientStatistics = field(repr=False)
    log_prior: float = 0.0
    prior: object = field(default=None, repr=False)
    resp_summary: object = field(default=None, repr=False)

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


#: The cap on the EM steps of :func:`data_moments` (``results/moment_steps.md``).
MOMENT_STEPS = 30


def data_moments(data: EMData, config: EMConfig) -> tuple[np.ndarray, np.ndarray]:
    """Mean and (ML, divisor n) covariance of the data the fit runs on, plus ``reg_covar`` on the diagonal.

    Complete rows: the sample moments. Incomplete data, ``"diag"`` (whose prior reads only the diagonal): each
    column's observed mean and variance, the ML diagonal Gaussian, in one pass. Incomplete data, ``"full"``: the
    ML single Gaussian fitted by this EM (K = 1, from the observed column means and variances, until no parameter
    moves by more than 1e-6 of the largest covariance entry, at most 30 steps: it sets a prior's scale, which
    needs no more precision), which uses every observed entry and is consistent under MAR. Where the ML fit does not
    converge (small wide data: the likelihood keeps rising along a ridge) the cap stops it; 30 steps imputed as well
    as 100 on every set of ``results/moment_steps.md`` (RMSE ratios 0.987-1.001, the 250 x 200 case 0.998) at a
    third of the cost, and 10 steps were 13 % worse on the wide case. Its steps use the
    E-step kernel ``strategy="auto"`` picks for one component (the covariance side on mostly-missing rows). The
    one-pass pairwise-available covariance is not used: on 250 x 200 correlated data at 70 % MCAR the fit's
    imputation RMSE with it was two to three times that with the ML moments (``results/bench_em_wide.md``),
    because the prior weighs D + 2 pseudo-observations. The ``mean_impute`` variant uses the mean-filled matrix it fits on.
    """
    key = _moments_key(config)
    if key not in data.cache:  # the prior and the one-component start (init) both read them
        data.cache[key] = _data_moments(data, config)
    mean, cov = data.cache[key]
    return mean.copy(), cov.copy()


def _moments_key(config: EMConfig) -> tuple:
    return ("data moments", config.variant == "mean_impute", config.covariance_type, float(config.reg_covar))


def _data_moments(data: EMData, config: EMConfig) -> tuple[np.ndarray, np.ndarray]:
    Xfit, miss_fit, _, rows_fit, _ = _fit_view(data, config)
    X, miss = Xfit[rows_fit], miss_fit[rows_fit]
    D = X.shape[1]
    if not miss.any():
        mean = X.mean(axis=0)
        diff = X - mean
        cov = diff.T @ diff / X.shape[0]
        cov = 0.5 * (cov + cov.T)
        cov.flat[:: D + 1] += config.reg_covar
        return mean, cov
    var = np.nanvar(data.X[data.fit_rows], axis=0) + config.reg_covar
    if config.covariance_type != "full":
        return np.array(data.col_mean), np.diag(var)
    one = EMConfig(n_components=1, covariance_type="full", reg_covar=config.reg_covar, variant="em")
    try:
        state = init_from_parameters(data, one, np.ones(1), data.col_mean[None], np.diag(var)[None])
        for _ in range(MOMENT_STEPS):
            new = step(state, data, one)
            size = 1.0 + np.abs(new.covariances).max()
            done = max(np.abs(new.means - state.means).max(), np.abs(new.covariances - state.covariances).max()) < 1e-6 * size
            state = new
            if done:
                break
        return np.array(state.means[0]), np.array(state.covariances[0])
    except DegenerateCovarianceError:  # e.g. a constant column with reg_covar = 0: the diagonal moments
        return np.array(data.col_mean), np.diag(var)


def resolve_prior(data: EMData, config: EMConfig) -> NIWPrior | None:
    """The concrete prior of a fit: ``config.prior`` with every field left None set from the data.

    :func:`explorer.core.mixtures.prior.complete_prior` with the data moments of :func:`data_moments`
    (computed only when a field needs them). None without a prior.
    """
    n_rows = data.n_samples if config.variant == "mean_impute" else data.n_fit
    return complete_prior(config.prior, data.n_features, config.n_components, config.covariance_type,
                          lambda: data_moments(data, config), n_samples=n_rows)


def resolved_prior(data: EMData, config: EMConfig) -> ResolvedPrior | None:
    """:func:`resolve_prior` as arrays and constants for the M-step and :func:`log_prior`; None without a prior."""
    spec = resolve_prior(data, config)
    return None if spec is None else resolved_arrays(spec, config.covariance_type)


_posterior_mode = posterior_mode  # the NIW posterior mode lives beside the statistics it uses


def _state_from_parameters(data: EMData, config: EMConfig, iteration, weights, means, covariances,
                           prior=None) -> EMState:
    stats, resp, summary = _estep(data, config, weights, means, covariances)
    objective = stats.log_likelihood
    if config.variant == "mean_impute":
        ll = observed_log_likelihood(data, weights, means, covariances, config.covariance_type)[data.fit_rows].sum()
    else:
        ll = objective
    lp = log_prior(means, covariances, prior)
    _readonly(weights, means, covariances, resp, stats.nk, stats.shift, stats.first, stats.second)
    return EMState(
        iteration=iteration,
        weights=weights,
        means=means,
        covariances=covariances,
        log_likelihood=float(ll),
        objective=float(objective) + lp,
        resp=resp,
        stats=stats,
        log_prior=lp,
        prior=prior,
        resp_summary=summary,
    )


def resolve_strategy(data: EMData, config: EMConfig) -> str:
    """The E-step kernel a fit uses: ``"compiled"``, ``"numpy"``, ``"covariance"``, ``"tree"`` or ``"naive"``.

    Diagonal covariances always use ``"numpy"`` (their E-step has no per-pattern factorisation).
    ``"auto"`` is :func:`~explorer.core.mixtures.suffstats.choose_strategy` on the fit's rows and patterns
    (its rule and measurements; ``results/bench_em_wide.md``), chosen once per data and K so that a fit never
    switches kernel half-way: the covariance side when mostly-missing rows make the missing blocks'
    factorisations dominate (250 x 200 at 70 % MCAR: every row its own pattern, about 140 missing entries), else
    ``"compiled"`` when the compiled E-step has already run in this process or rows x components x features is
    at least :data:`AUTO_COMPILED_MIN_WORK` (200,000), else ``"numpy"``. The compiled kernel was also faster than
    the tree and naive kernels (800 x 8, K = 3, 30 % MCAR, three steps: 0.05 s against 1.4 s and 0.5 s), so
    ``"auto"`` never picks those. Below the threshold a fresh process stays on numpy: the first compiled step
    costs about 0.6 s with a filled numba cache (several seconds when it compiles), and small interactive data
    (the app's pages) never wait for it.
    """
    rows = data.n_samples if config.variant == "mean_impute" else data.n_fit
    if config.strategy != "auto" or config.covariance_type != "full":
        return choose_strategy(rows, config.n_components, data.n_features, config.covariance_type, config.strategy)
    key = ("auto strategy", config.variant == "mean_impute", config.n_components)
    chosen = data.cache.get(key)
    if chosen is None:
        pats_fit = _fit_view(data, config)[2]
        chosen = data.cache[key] = choose_strategy(rows, config.n_components, data.n_features, "full", "auto",
                                                   pats_fit)
    return chosen


def _estep(data: EMData, config: EMConfig, weights, means, covariances):
    """E-step at the given parameters: (SufficientStatistics about ``means``, responsibilities in the caller's order,
    the compiled kernel's summary of them for :func:`snapshot` or None).

    :func:`~explorer.core.mixtures.suffstats.estep_statistics` on the fit's layout (with the cached compiled
    workspace), or the pattern tree's kernels (``"tree"`` / ``"naive"``) finished by
    :func:`~explorer.core.mixtures.suffstats.statistics_from_loglik`.
    """
    strategy = resolve_strategy(data, config)
    Xfit, _, pats_fit, _, perm = _fit_view(data, config)
    exact = config.variant == "em"
    if strategy in ("tree", "naive"):
        ll, xhat, cond = _component_loglik_tree(data, config, Xfit, pats_fit, means, covariances, strategy)
        stats, resp, _ = statistics_from_loglik(ll, xhat, cond, pats_fit, weights, means, covariances,
                                                covariance_type=config.covariance_type, exact=exact)
        return stats, _to_original(resp, perm), None
    ws = workspace(data, config) if strategy == "compiled" else None
    stats, resp, _, summary = estep_statistics(Xfit, pats_fit, weights, means, covariances,
                                               covariance_type=config.covariance_type, exact=exact,
                                               strategy=strategy, workspace=ws, with_summary=True)
    return stats, (resp if ws is not None else _to_original(resp, perm)), summary


def _layout(data: EMData, config: EMConfig):
    """The compiled kernel's row layout of the fit (cached on ``data``)."""
    from explorer.core._compiled.gmm import Layout

    key = ("layout", config.variant == "mean_impute")
    lay = data.cache.get(key)
    if lay is None:
        Xfit, miss_fit, _, rows_fit, perm = _fit_view(data, config)
        lay = data.cache[key] = Layout(Xfit, miss_fit, rows_fit.size, perm)
    return lay


def workspace(data: EMData, config: EMConfig):
    """The compiled E-step's scratch buffers for this data and ``config.n_components`` (allocated once, cached)."""
    from explorer.core._compiled.gmm import Workspace

    key = ("workspace", config.variant == "mean_impute", config.n_components)
    ws = data.cache.get(key)
    if ws is None:
        ws = data.cache[key] = Workspace(_layout(data, config), config.n_components)
    return ws


def warm_up_kernels(*, background: bool = True):
    """Load (or, with an empty numba cache, compile) the compiled E-step now, e.g. when an app starts, and the
    compiled I-step of the data-augmentation chains (:mod:`explorer.core.mixtures.gap_draws`).

    The first compiled step of a process otherwise pays it: about 1 s with a filled on-disk cache
    (importing numba and loading the machine code), several seconds on the very first run (compiling;
    see ``results/bench_em.md``). ``background=True`` does it on a daemon thread and returns the thread.
    """
    def run():
        try:
            from explorer.core._compiled import draws, gmm

            gmm.warm_up()
            draws.warm_up()
        except Exception:  # pragma: no cover - best effort: the first step reports any real problem
            pass

    if not background:
        run()
        return None
    import threading

    thread = threading.Thread(target=run, name="explorer-warm-up-kernels", daemon=True)
    thread.start()
    return thread


def _component_loglik_tree(data, config, Xfit, pats_fit, means, covariances, strategy):
    """Per-component log-densities and conditionals by :mod:`explorer.core.mixtures.pattern_tree` (imported lazily)."""
    from explorer.core.mixtures import pattern_tree

    K = means.shape[0]
    ll = np.empty((Xfit.shape[0], K))
    xhat = np.empty((K,) + Xfit.shape)
    cond = []
    cholesky(np.asarray(covariances))  # a clear error on a singular covariance, as the other kernels
    for k in range(K):
        if strategy == "tree":
            key = ("pattern_tree", config.variant == "mean_impute")
            tree = data.cache.get(key)
            if tree is None:
                tree = data.cache[key] = pattern_tree.build_pattern_tree(pats_fit)
            ll[:, k], _, cc = pattern_tree.observed_gaussian_tree(Xfit, pats_fit, means[k], covariances[k],
                                                                  out=xhat[k], tree=tree)
        else:
            ll[:, k], _, cc = pattern_tree.observed_gaussian_naive(Xfit, pats_fit, means[k], covariances[k],
                                                                   out=xhat[k])
        cond.append(tuple(cc))
    return ll, xhat, tuple(cond)


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
    return _state_from_parameters(data, config, 0, weights, means, covariances, resolved_prior(data, config))


def _check_components(n_components: int, n_fit: int) -> None:
    """BadInputError when there are more components than rows with observed data to fit them."""
    if n_components > n_fit:
        raise BadInputError(
            f"n_components={n_components} is larger than the number of rows with observed data ({n_fit}). "
            "Use fewer components."
        )


def init(data: EMData, config: EMConfig, rng: np.random.Generator) -> EMState:
    """Initial parameters from k-means (partial distances) or random responsibilities.

    The responsibilities of the initialisation give the weights; each cluster's means and
    covariances are computed from its members with missing entries filled by the cluster's
    observed means (a starting point only: the first EM step corrects it). One full-covariance component with a
    prior on incomplete data (not ``init="random"``) starts instead at the ML Gaussian of :func:`data_moments`,
    which the prior's scale was made from: the MAP fit reaches the same optimum in fewer steps (250 x 200 at
    70 % MCAR: 13 instead of 21, same objective to 1e-8 relative; imputation RMSE within 0.1 % on every case of
    ``benchmarks/moment_steps.py``).
    """
    K = config.n_components
    Xfit, miss_fit, _, rows_fit, _ = _fit_view(data, config)
    _check_components(K, rows_fit.size)
    Xr, obs = Xfit[rows_fit], ~miss_fit[rows_fit]
    prior = resolved_prior(data, config)
    if (K == 1 and prior is not None and config.covariance_type == "full" and config.variant == "em"
            and not obs.all() and config.init != "random" and _moments_key(config) in data.cache):
        # one component with a data-scaled prior: start at the ML Gaussian the prior's scale was made from (already
        # computed, cached on data; a prior given whole never pays for them), not at the mean-filled scatter, whose
        # variances are too small by about the missing share; on 250 x 200 at 70 % MCAR the MAP fit then stops
        # after 13 steps instead of 21
        mean, cov = data_moments(data, config)
        return _state_from_parameters(data, config, 0, np.ones(1), mean[None], cov[None], prior)
    if config.init == "random":
        r = rng.uniform(size=(rows_fit.size, K))
        r /= r.sum(axis=1, keepdims=True)
    else:
        if config.init == "kmeans":
            _, labels = kmeans(Xr, obs, K, rng)
        else:
            from explorer.core.mixtures.kmeans import partial_sq_distances

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
        scatter = (r[:, k, None] * diff).T @ diff if full else r[:, k] @ (diff * diff)
        if prior is not None:  # the posterior mode of the cluster, as the M-step (no singular start)
            means[k], cov = _posterior_mode(nk[k], means[k], scatter, prior)
        else:
            cov = scatter / nk[k]
        if full:
            cov.flat[:: D + 1] += config.reg_covar
            covs[k] = 0.5 * (cov + cov.T)
        else:
            covs[k] = cov + config.reg_covar
    return _state_from_parameters(data, config, 0, weights, means, covs, prior)


def step(state: EMState, data: EMData, config: EMConfig) -> EMState:
    """One EM iteration (M-step from the cached E-step, then the E-step at the new parameters).

    Pure: returns a new :class:`EMState`; ``state`` is unchanged. The prior is the one ``state``
    carries (resolved by :func:`init`), so ``config.prior="auto"`` is not recomputed at every step.

    Raises
    ------
    DegenerateCovarianceError
        When a component collapses (a covariance stops being positive definite).
    """
    prior = state.prior
    if prior is None and config.prior is not None:  # a state from an ML run continued under a prior
        prior = resolved_prior(data, config)
    weights, means, covs = m_step(state.stats, reg_covar=config.reg_covar, prior=prior)
    return _state_from_parameters(data, config, state.iteration + 1, weights, means, covs, prior)


def impute(state: EMState, data: EMData, config: EMConfig) -> np.ndarray:
    """Single imputation: the conditional mean :math:`E[x^m | x^o] = \\sum_j h_{ij} \\hat x_{ij}^m`.

    Observed entries are copied from the data unchanged. ``mean_impute`` imputes the column means.
    """
    if config.variant == "mean_impute":
        fill = np.broadcast_to(data.col_mean, data.X.shape)
    else:
        fill = np.zeros(data.X.shape)
        for k, xk in enumerate(_completions_by_component(state, data, config, None)):
            fill += state.resp[:, k, None] * xk
    return np.where(data.missing, fill, data.X)


def completions(state: EMState, data: EMData, config: EMConfig, rows=None) -> np.ndarray:
    """Rows completed by every component's conditional mean at the state's parameters, computed on demand.

    Returns an array of shape (n_components, n_rows, n_features): observed entries copied from the data,
    missing ones :math:`\\hat x_{ij}^m = E_j[x^m | x^o]` (the component mean for rows with nothing observed;
    ``mean_impute``: the column means). ``rows`` (caller's indices, default all) limits the work to them.
    """
    idx = np.arange(data.n_samples) if rows is None else np.asarray(rows, dtype=np.intp).reshape(-1)
    if idx.size and (idx.min() < -data.n_samples or idx.max() >= data.n_samples):
        raise BadInputError(f"rows must be indices below n_samples = {data.n_samples}.")
    return np.stack(list(_completions_by_component(state, data, config, None if rows is None else idx)))


def _completions_by_component(state: EMState, data: EMData, config: EMConfig, rows):
    """Yield, per component, the completed rows (caller's order; ``rows`` or all)."""
    K = state.n_components
    if config.variant == "mean_impute":
        base = data.mean_filled if rows is None else data.mean_filled[rows]
        for _ in range(K):
            yield base.copy()
        return
    if rows is None:
        X, pats, perm = data.Xp, data.patterns, data.patterns.perm
        miss = pats.missing
    else:
        X, miss, perm = data.Xf[rows], data.missing[rows], None
        pats = group_patterns(miss)
    if config.covariance_type == "full":
        precision, logdet = precision_and_logdet(np.asarray(state.covariances))
        for k in range(K):
            _, xk, _ = observed_gaussian(X, pats, state.means[k], precision[k], logdet[k])
            yield _to_original(xk, perm)
    else:
        for k in range(K):
            yield _to_original(np.where(miss, state.means[k], X), perm)


def observed_log_likelihood(data: EMData, weights, means, covariances, covariance_type: str) -> np.ndarray:
    """Per-row observed-data log-likelihood :math:`\\log\\sum_j \\pi_j N(x_i^o; \\mu_j^o, \\Sigma_j^{oo})`.

    Rows with nothing observed get 0.
    """
    p = data.patterns
    ll, _, _ = component_loglik(
        data.Xp, p.missing, p, np.asarray(means), np.asarray(covariances), covariance_type, False
    )
    with np.errstate(divide="ignore"):
        out = logsumexp(ll + np.log(np.asarray(weights)), axis=1)
    out[p.empty_rows] = 0.0
    return _to_original(out, p.perm)


def effective_sizes(state: EMState, data: EMData, config: EMConfig) -> np.ndarray:
    """:math:`N_j = \\sum_i h_{ij}` over the rows the fit uses (shape (n_components,))."""
    rows = _fit_view(data, config)[3] if config.variant == "mean_impute" else data.fit_rows
    return state.resp[rows].sum(axis=0)


def collapsed_components(state: EMState, data: EMData, config: EMConfig) -> np.ndarray:
    """Indices of the components whose effective size :math:`N_j` is below the dimension D."""
    return np.flatnonzero(effective_sizes(state, data, config) < data.n_features)


def snapshot(state: EMState, data: EMData, config: EMConfig, truth=None) -> dict:
    """Small summary of a state for the history (see :mod:`explorer.history`)."""
    summary = state.resp_summary
    if summary is not None and config.variant != "mean_impute":  # summed by the compiled pass over the fitted rows
        ent, hard = summary.entropy / data.n_fit, summary.hard_counts.copy()
    else:  # every row is fitted unless some have nothing observed: no copy then; entr(0) = 0
        resp = state.resp if data.fit_rows.size == data.n_samples else state.resp[data.fit_rows]
        ent = entr(resp).sum() / resp.shape[0]
        hard = np.bincount(resp.argmax(axis=1), minlength=state.n_components)
    snap = {
        "iteration": state.iteration,
        "log_likelihood": state.log_likelihood,
        "objective": state.objective,
        "weights": np.array(state.weights),
        "means": np.array(state.means),
        "covariances": np.array(state.full_covariances()),
        "resp_entropy": float(ent),
        "hard_counts": hard,
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
    ComponentCollapseWarning
        When a component of the kept run has an effective size (sum of responsibilities) below
        the number of features (see :func:`collapsed_components`).
    """
    if truth is not None:
        truth = np.asarray(truth, dtype=float)
        if truth.shape != data.X.shape:
            raise BadInputError(f"truth has shape {truth.shape}, expected {data.X.shape}.")
    n_fit = _fit_view(data, config)[3].size
    if init_state is None:
        _check_components(config.n_components, n_fit)  # a cheap check before the prior's data moments
    run_config = config
    if config.prior is not None and init_state is None:  # resolve "auto" once for every restart
        run_config = replace(config, prior=resolve_prior(data, config))
    out = run_restarts(
        n_runs=1 if init_state is not None else config.n_init,
        start=lambda: init_state if init_state is not None else init(data, run_config, rng),
        step=lambda state: step(state, data, config),
        snapshot=lambda state: snapshot(state, data, config, truth),
        change=lambda old, new: (new.objective - old.objective) / n_fit,
        max_iter=config.max_iter,
        tol=config.tol,
        callback=callback,
    )
    small = collapsed_components(out.state, data, config)
    if small.size:
        nk = effective_sizes(out.state, data, config)
        names = ", ".join(f"component {k} (effective size {nk[k]:.3g})" for k in small)
        remedy = ("use fewer components" if config.prior is not None
                  else "use fewer components or the data-scaled prior (prior='auto')")
        warnings.warn(
            f"{names} of {config.n_components} fitted to {data.n_features} feature(s): fewer rows than features "
            f"support {'it' if small.size == 1 else 'them'}, so {'its' if small.size == 1 else 'their'} covariance "
            f"is set by {'the prior' if config.prior is not None else 'reg_covar'} rather than the data and "
            f"predictive intervals may be unreliable; {remedy}.",
            ComponentCollapseWarning, stacklevel=2,
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
