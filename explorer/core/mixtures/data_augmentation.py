r"""Bayesian data augmentation for the Gaussian mixture on incomplete data: draws of the parameters and of the gaps.

Ghahramani & Jordan (1994) name Bayesian data augmentation as the Bayesian alternative to EM; with the conjugate
Normal-inverse-Wishart prior of the MAP fit (:mod:`explorer.core.mixtures.prior`) both of its steps are exact
draws (Tanner & Wong 1987, the Gibbs sampler of the mixture with missing entries):

* **I-step** (imputation), given :math:`\theta = (\pi, \mu_k, \Sigma_k)`: per row, a component
  :math:`z_n \sim \mathrm{Cat}(r_n)` with :math:`r_{nk} \propto \pi_k N(x_n^o \mid \mu_k^o, \Sigma_k^{oo})`, then
  the missing entries :math:`x_n^m \sim N(\mu_k^{m|o}, \Sigma_k^{m|o})` from that component's conditional.
* **P-step** (posterior), given the completed data and the labels: with :math:`n_k` rows in component k, their
  mean :math:`\bar x_k` and scatter :math:`S_k` about it,

  .. math::

      \pi \sim \mathrm{Dir}(\alpha + n_1, \dots, \alpha + n_K), \qquad
      \Sigma_k \sim \mathcal{IW}(\nu_0 + n_k,\; \Lambda_0 + S_k + \tfrac{\kappa_0 n_k}{\kappa_0 + n_k}
      (\bar x_k - m_0)(\bar x_k - m_0)^\top), \qquad
      \mu_k \sim N\Big(\frac{\kappa_0 m_0 + n_k \bar x_k}{\kappa_0 + n_k}, \frac{\Sigma_k}{\kappa_0 + n_k}\Big)

  (Murphy 2007, *Conjugate Bayesian analysis of the Gaussian distribution*, section 9); for diagonal covariances
  the independent per-coordinate form, :math:`\sigma^2_{kd} \sim \mathrm{IG}((\nu_0 + n_k)/2, (\lambda_{0d} +
  S_{k,dd} + \tfrac{\kappa_0 n_k}{\kappa_0 + n_k}(\bar x_{kd} - m_{0d})^2)/2)`. :math:`\alpha = 1` is the flat
  Dirichlet of the MAP fit's maximum-likelihood weights.

The chain starts at a fitted state (the MAP-EM fit: already in the posterior's bulk, so a short burn-in), and its
states after burn-in, thinned, are draws of :math:`(\theta, x^m)` from the joint posterior: the gaps drawn at a
kept state are *proper* multiple imputations (they carry the uncertainty of the parameters, unlike draws at the
fitted parameters), and the kept parameters give the posterior predictive of new rows as a mixture of their
conditionals. Rows with nothing observed are drawn in the I-step but, as in EM, left out of the P-step.

API in the project's shape: :class:`DAConfig`, :class:`DAState`, :func:`init` (the first I-step at given
parameters), :func:`step` (a P-step then an I-step), :func:`run` (burn-in and thinning, a loop over :func:`step`);
states are immutable, the generator is injected. The prior is the resolved prior of the fit
(:func:`explorer.core.mixtures.em_gmm.resolved_prior`): data augmentation needs a proper prior.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np
from scipy.linalg.lapack import dpotrs
from scipy.special import logsumexp
from scipy.stats import invwishart

from explorer.core.gaussians.conditional import ConditionalMixture
from explorer.core.gaussians.gaussian import LOG_2PI, cholesky, tril_inverse
from explorer.core.gaussians.patterns import group_patterns
from explorer.core.loop import run_thinned
from explorer.core.mixtures.gap_draws import GapPlan, draw_labels_and_gaps
from explorer.core.mixtures.prior import ResolvedPrior
from explorer.core.validation import BadInputError, check_int

__all__ = ["DAConfig", "DAState", "init", "step", "run", "posterior_parameters"]


@dataclass(frozen=True)
class DAConfig:
    """Settings of the chain.

    Parameters
    ----------
    n_burn : int, default 20
        Steps discarded before the first kept state (the chain starts at the MAP fit).
    n_thin : int, default 5
        Steps between kept states (their autocorrelation falls with it).
    alpha : float, default 1.0
        Symmetric Dirichlet parameter of the weights (> 0; 1 = flat, the MAP fit's maximum-likelihood weights).
    covariance_type : {"full", "diag"}
    """

    n_burn: int = 20
    n_thin: int = 5
    alpha: float = 1.0
    covariance_type: str = "full"

    def __post_init__(self):
        check_int("n_burn", self.n_burn, 0)
        check_int("n_thin", self.n_thin, 1)
        if not (isinstance(self.alpha, (int, float)) and np.isfinite(self.alpha) and self.alpha > 0):
            raise BadInputError(f"alpha must be a positive number, got {self.alpha!r}.")
        if self.covariance_type not in ("full", "diag"):
            raise BadInputError(f"covariance_type must be 'full' or 'diag', got {self.covariance_type!r}.")


@dataclass(frozen=True)
class DAState:
    """One state of the chain: the parameters, the labels and the completed data (caller's row order)."""

    iteration: int
    weights: np.ndarray  # (K,)
    means: np.ndarray  # (K, D)
    covariances: np.ndarray  # (K, D, D) or (K, D)
    labels: np.ndarray  # (n,) int
    X: np.ndarray  # (n, D): observed entries as given, missing ones drawn


def _readonly(*arrays):
    for a in arrays:
        a.setflags(write=False)
    return arrays


def _check_prior(prior) -> ResolvedPrior:
    if not isinstance(prior, ResolvedPrior):
        raise BadInputError("Data augmentation draws from the posterior, so it needs the fit's resolved conjugate "
                            "prior (em_gmm.resolved_prior; a maximum-likelihood fit, prior=None, has no posterior).")
    return prior


def _draw_labels(log_weighted: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One component per row from the rows' unnormalised log responsibilities (n, K)."""
    resp = np.exp(log_weighted - logsumexp(log_weighted, axis=1)[:, None])
    u = rng.random(resp.shape[0])
    return np.minimum((u[:, None] > np.cumsum(resp, axis=1)).sum(axis=1), resp.shape[1] - 1)


def _per_row(mats: np.ndarray, g, vecs: np.ndarray, transpose: bool = False) -> np.ndarray:
    """``mats[g.inverse[i]] @ vecs[i]`` (or ``.T @``) for every row i of a pattern group, without gathering an
    (n_rows, o, o) copy when patterns repeat (a product per pattern) or when every row has its own pattern."""
    if g.rows.size >= 4 * g.n_unique:
        out = np.empty_like(vecs)
        for u, pos in enumerate(g.members):
            out[pos] = vecs[pos] @ (mats[u] if transpose else mats[u].T)
        return out
    spec = "nji,nj->ni" if transpose else "nij,nj->ni"
    if g.n_unique == g.rows.size:  # one row per pattern: the patterns in row order are a permutation
        out = np.empty_like(vecs)
        out[g.order] = np.einsum(spec, mats, vecs[g.order])
        return out
    return np.einsum(spec, mats[g.inverse], vecs)


#: From this many observed entries per row up, the I-step solves with the observed blocks' Cholesky factors by
#: LAPACK's ``dpotrs``, once per pattern with its rows as right-hand sides; below it, triangular inverses and
#: batched products (many small patterns: a Python call each would cost more). Quiet machine, 250 rows each its own
#: pattern: 60 x 60 blocks 1.7 ms against 7.9 ms (inverse then two products), 16 x 16 1.0 against 2.8 ms.
SOLVE_MIN_OBSERVED = 16


def _solve_rows(L: np.ndarray, g, rhs: np.ndarray) -> np.ndarray:
    """:math:`\\Sigma_{oo}^{-1}` ``rhs[i]`` for every row i of the pattern group ``g``, from the Cholesky factors ``L``
    (n_unique, o, o) of its patterns' observed blocks: one ``dpotrs`` per pattern."""
    out = np.empty_like(rhs)
    for u, pos in enumerate(g.members):
        out[pos] = dpotrs(L[u], rhs[pos].T, lower=1)[0].T
    return out


def _solve_by_inverse(L_inv: np.ndarray, g, rhs: np.ndarray) -> np.ndarray:
    """As :func:`_solve_rows`, from the inverse factors: :math:`L^{-\\top}(L^{-1} r)` per row, batched."""
    return _per_row(L_inv, g, _per_row(L_inv, g, rhs), transpose=True)


def _impute_full(X_nan: np.ndarray, weights, means, covariances, rng: np.random.Generator, patterns=None):
    r"""The I-step for full covariances on the covariance side (one o x o factor per pattern and component), used
    when the rows are mostly missing (sum of o^3 below sum of m^3; else the conditional mixture's m x m factors of
    the precision are the cheaper ones).

    Per row, the observed log-density under every component gives the label (not needed with one component);
    then, with :math:`y \sim N(\mu_k, \Sigma_k)` drawn whole, :math:`x = y + \Sigma_k E_o \Sigma_{k,oo}^{-1}(x_o -
    y_o)` has the conditional law :math:`N(\mu^{m|o}_k, \Sigma^{m|o}_k)` on the missing coordinates (Matheron's
    rule: the conditional of a Gaussian draw corrected by the regression on its observed part), and the observed
    ones are kept as given. No m x m conditional covariance is formed or factored: per pattern and component one
    Cholesky factor :math:`L` of :math:`\Sigma_{k,oo}`, and :math:`\Sigma_{k,oo}^{-1} r` by LAPACK's ``dpotrs``
    per pattern (from :data:`SOLVE_MIN_OBSERVED` observed entries up) or as :math:`L^{-\top}(L^{-1} r)` with
    batched triangular inverses (smaller blocks). ``patterns``: the grouping of ``np.isnan(X_nan)``
    (:func:`~explorer.core.gaussians.patterns.group_patterns`), computed once per chain by :func:`run`.
    """
    n, D = X_nan.shape
    K = means.shape[0]
    miss = np.isnan(X_nan)
    Xf = np.where(miss, 0.0, X_nan)
    if patterns is None:
        patterns = group_patterns(miss)
    log_weighted = np.zeros((n, K))
    factors_o = []  # per group: (group, observed index per row, per component its solver)
    for g in patterns.groups:
        obs, flat = g.observed_layout(D)
        o = obs.shape[1]
        cols = obs[g.inverse]
        x_o = Xf[g.rows[:, None], cols]
        solvers = []  # per component: rhs (n_g, o) -> Sigma_oo^{-1} rhs per row
        for k in range(K):
            L = cholesky(np.take(np.ascontiguousarray(covariances[k]).ravel(), flat),
                         what="observed-block covariance")
            if o >= SOLVE_MIN_OBSERVED:
                solve = partial(_solve_rows, L, g)
            else:
                L_inv = tril_inverse(L)
                solve = partial(_solve_by_inverse, L_inv, g)
            if K > 1:  # one component: every label is 0, no density needed
                logdet = 2.0 * np.log(np.diagonal(L, axis1=-2, axis2=-1)).sum(axis=-1)
                d = x_o - means[k][cols]
                log_weighted[g.rows, k] = -0.5 * (o * LOG_2PI + logdet[g.inverse] + np.einsum("ni,ni->n", d, solve(d)))
            solvers.append(solve)
        factors_o.append((g, cols, solvers))
    with np.errstate(divide="ignore"):  # a weight of exactly 0 is log-weight -inf
        log_weighted += np.log(weights)
    labels = _draw_labels(log_weighted, rng)
    X = np.array(X_nan, dtype=float)
    if not miss.any():
        return labels, X
    factors = cholesky(covariances)
    z = rng.standard_normal((n, D))
    draw = np.empty((n, D))
    for k in range(K):  # y ~ N(mu_k, Sigma_k) for the rows labelled k (one product per component, no gather)
        sel = labels == k
        draw[sel] = means[k] + z[sel] @ factors[k].T
    out = draw.copy()  # rows with nothing observed: the whole draw
    for g, cols, solvers in factors_o:
        resid = Xf[g.rows[:, None], cols] - draw[g.rows[:, None], cols]
        for k in range(K):
            sel = labels[g.rows] == k
            if not sel.any():
                continue
            u = solvers[k](resid)
            rows = g.rows[sel]
            v = np.zeros((rows.size, D))
            v[np.arange(rows.size)[:, None], cols[sel]] = u[sel]
            out[rows] = draw[rows] + v @ covariances[k]  # Sigma_k symmetric: (Sigma_k v)^T = v^T Sigma_k
    return labels, np.where(miss, out, X)


def _diag_log_weighted(X_nan: np.ndarray, weights, means, variances) -> np.ndarray:
    """(n, K) log weight plus log density of each row's observed entries under diagonal Gaussians."""
    miss = np.isnan(X_nan)
    Xf = np.where(miss, 0.0, X_nan)
    log_weighted = np.empty((X_nan.shape[0], means.shape[0]))
    for k in range(means.shape[0]):
        terms = (Xf - means[k]) ** 2 / variances[k] + np.log(2.0 * np.pi * variances[k])
        log_weighted[:, k] = -0.5 * np.sum(np.where(miss, 0.0, terms), axis=1)
    with np.errstate(divide="ignore"):  # a weight of exactly 0 is log-weight -inf
        return log_weighted + np.log(weights)


def _diag_draw(X_nan: np.ndarray, labels, means, variances, rng: np.random.Generator) -> np.ndarray:
    """The missing entries drawn from the labels' diagonal Gaussians (a diagonal Gaussian's conditional is its
    marginal on the missing coordinates); observed entries kept."""
    X = np.array(X_nan, dtype=float)
    miss = np.isnan(X)
    if miss.any():
        draw = means[labels] + np.sqrt(variances[labels]) * rng.standard_normal(X.shape)
        X = np.where(miss, draw, X)
    return X


def _impute_diag(X_nan: np.ndarray, weights, means, variances, rng: np.random.Generator):
    """The I-step for diagonal covariances: a row's label from the densities of its observed entries, then its
    missing entries independent draws from the label's coordinates. No per-pattern work: O(n D K)."""
    labels = _draw_labels(_diag_log_weighted(X_nan, weights, means, variances), rng)
    return labels, _diag_draw(X_nan, labels, means, variances, rng)


def _impute(X_nan: np.ndarray, weights, means, covariances, covariance_type: str, rng: np.random.Generator,
            patterns=None, plan: GapPlan | None = None):
    """The I-step: ``(labels, X)`` drawn at the parameters (``patterns``: the grouping of the gaps, if known;
    ``plan``: a :class:`~explorer.core.mixtures.gap_draws.GapPlan` of ``X_nan``, which takes the compiled kernels
    where the E-step's rule does, with the same draws to round-off)."""
    X_nan = np.asarray(X_nan, dtype=float)
    if covariance_type == "diag":
        return _impute_diag(X_nan, np.asarray(weights, dtype=float), np.asarray(means, dtype=float),
                            np.asarray(covariances, dtype=float), rng)
    if covariance_type == "full":
        m = np.isnan(X_nan).sum(axis=1)
        o = X_nan.shape[1] - m
        if np.sum(o.astype(float) ** 3) < np.sum(m.astype(float) ** 3):  # mostly-missing rows: factor o x o blocks
            return _impute_full(X_nan, weights, means, covariances, rng, patterns)
        if plan is not None and plan.strategy(np.asarray(weights).shape[0]) == "compiled":
            return draw_labels_and_gaps(plan, weights, means, covariances, rng)
    cm = ConditionalMixture.from_gaussian_mixture(X_nan, weights, means, covariances, covariance_type=covariance_type,
                                                  patterns=patterns)
    resp = np.asarray(cm.weights)
    u = rng.random(resp.shape[0])
    labels = np.minimum((u[:, None] > np.cumsum(resp, axis=1)).sum(axis=1), resp.shape[1] - 1)
    X = np.array(X_nan, dtype=float)
    if np.isnan(X).any():
        from dataclasses import replace

        X = replace(cm, weights=np.eye(resp.shape[1])[labels]).sample(1, rng)[0]
    return labels, X


def posterior_parameters(X: np.ndarray, labels: np.ndarray, n_components: int, prior: ResolvedPrior,
                         covariance_type: str = "full"):
    """The conjugate posterior of every component given complete rows and labels.

    Returns
    -------
    counts (K,), m_n (K, D), kappa_n (K,), nu_n (K,), scale_n (K, D, D) or (K, D)
        :math:`n_k`, the posterior mean's location, its pseudo-count, the degrees of freedom and the scale of
        the inverse-Wishart (or, per coordinate, twice the inverse-gamma's scale).
    """
    prior = _check_prior(prior)
    K, D = n_components, X.shape[1]
    counts = np.bincount(labels, minlength=K).astype(float)
    kappa_n = prior.kappa + counts
    nu_n = prior.dof + counts
    m_n = np.empty((K, D))
    scale_n = np.empty((K, D, D)) if covariance_type == "full" else np.empty((K, D))
    for k in range(K):
        rows = X[labels == k]
        xbar = rows.mean(axis=0) if rows.shape[0] else np.zeros(D)
        dev = rows - xbar
        shrink = prior.kappa * counts[k] / kappa_n[k]
        diff = xbar - prior.mean
        m_n[k] = (prior.kappa * prior.mean + counts[k] * xbar) / kappa_n[k]
        if covariance_type == "full":
            scale_n[k] = prior.scale + dev.T @ dev + shrink * np.outer(diff, diff)
        else:
            scale_n[k] = prior.scale + np.sum(dev * dev, axis=0) + shrink * diff * diff
    return counts, m_n, kappa_n, nu_n, scale_n


def _draw_parameters(X, labels, K, prior, config: DAConfig, rng):
    """The P-step: ``(weights, means, covariances)`` drawn from the conjugate posterior."""
    counts, m_n, kappa_n, nu_n, scale_n = posterior_parameters(X, labels, K, prior, config.covariance_type)
    weights = rng.dirichlet(config.alpha + counts)
    D = X.shape[1]
    means = np.empty((K, D))
    if config.covariance_type == "full":
        covs = np.empty((K, D, D))
        for k in range(K):
            S = invwishart.rvs(df=nu_n[k], scale=scale_n[k], random_state=rng)
            covs[k] = np.atleast_2d(S)
            L = np.linalg.cholesky(covs[k] / kappa_n[k])
            means[k] = m_n[k] + L @ rng.standard_normal(D)
    else:
        # sigma^2 ~ IG(nu/2, scale/2)  <=>  1/sigma^2 ~ Gamma(nu/2, rate = scale/2)
        covs = 1.0 / rng.gamma(0.5 * nu_n[:, None], 2.0 / scale_n)
        means = m_n + np.sqrt(covs / kappa_n[:, None]) * rng.standard_normal((K, D))
    return weights, means, covs


def init(X_nan, weights, means, covariances, config: DAConfig, rng: np.random.Generator) -> DAState:
    """The chain's first state: an I-step at the given parameters (the MAP-EM fit)."""
    X_nan = np.asarray(X_nan, dtype=float)
    weights, means, covariances = (np.array(a, dtype=float) for a in (weights, means, covariances))
    labels, X = _impute(X_nan, weights, means, covariances, config.covariance_type, rng)
    return DAState(0, *_readonly(weights, means, covariances, labels, X))


def step(state: DAState, X_nan, prior: ResolvedPrior, config: DAConfig, rng: np.random.Generator,
         fit_rows=None, *, patterns=None, plan: GapPlan | None = None) -> DAState:
    """One sweep: a P-step on the completed rows (``fit_rows``: the rows with an observed entry; default all),
    then an I-step at the drawn parameters (``patterns``: :func:`~explorer.core.gaussians.patterns.group_patterns`
    of the gaps, to skip grouping them again; ``plan``: a :class:`~explorer.core.mixtures.gap_draws.GapPlan` of
    ``X_nan``, for the compiled I-step on larger data)."""
    rows = slice(None) if fit_rows is None else fit_rows
    K = state.weights.shape[0]
    weights, means, covs = _draw_parameters(state.X[rows], state.labels[rows], K, prior, config, rng)
    if plan is not None:
        patterns = plan.patterns
    labels, X = _impute(np.asarray(X_nan, dtype=float), weights, means, covs, config.covariance_type, rng, patterns,
                        plan)
    return DAState(state.iteration + 1, *_readonly(weights, means, covs, labels, X))


def run(state: DAState, X_nan, prior: ResolvedPrior, config: DAConfig, n_draws: int, rng: np.random.Generator,
        fit_rows=None, *, plan: GapPlan | None = None) -> list[DAState]:
    """``n_draws`` states of the chain from ``state``: ``config.n_burn`` steps discarded, then one state kept every
    ``config.n_thin`` steps (a loop over :func:`step`; the gaps are grouped and laid out once, in ``plan``, a
    :class:`~explorer.core.mixtures.gap_draws.GapPlan` of ``X_nan``, by default one with ``strategy="auto"``)."""
    _check_prior(prior)
    X_nan = np.asarray(X_nan, dtype=float)
    plan = GapPlan(X_nan) if plan is None else plan
    return run_thinned(lambda s: step(s, X_nan, prior, config, rng, fit_rows, plan=plan), state,
                       config.n_burn, config.n_thin, n_draws)
