r"""Bayesian data augmentation for factor analysers and mixtures of factor analysers on incomplete data.

The model of component k is :math:`x = \mu_k + W_k z + e`, :math:`z \sim N(0, I_q)`,
:math:`e \sim N(0, \mathrm{diag}(\psi_k))`, with weights :math:`\pi` (one component for a single factor analyser).
Given the factors :math:`z_n`, the labels and the completed rows, feature d of component k is a linear regression
of column d on :math:`g_n = [1, z_n]` with coefficients :math:`\beta_{kd} = [\mu_{kd}, W_{kd}]` and noise variance
:math:`\psi_{kd}`, so the conjugate prior of the Bayesian linear regression makes both steps of the Gibbs sampler
(Tanner & Wong 1987, data augmentation) exact draws:

* **Prior** (:class:`FAPrior`, :func:`default_prior`), per component and feature, weak and scaled to the data:

  .. math::

      \psi_{kd} \sim \mathrm{IG}(a_0, b_{0d}), \qquad
      \beta_{kd} \mid \psi_{kd} \sim N\big(m_{0d}, \psi_{kd}\,\mathrm{diag}(1/\tau)\big), \qquad
      \pi \sim \mathrm{Dir}(\alpha, \dots, \alpha)

  with :math:`a_0 = 1` (two pseudo-observations: the weakest shape that is still a proper prior with a mode, so
  the noise variances cannot collapse to 0 on few rows, the Heywood cases of maximum likelihood, yet 25 rows
  outweigh it by 12 to 1), :math:`b_{0d} = a_0 \cdot 0.1 \cdot s^2_d` (:data:`NOISE_FRACTION`; :math:`s^2_d` the
  observed variance of column d, in whatever scale the model is fitted on: the prior's guess of the noise is a
  tenth of the column's variance), :math:`m_{0d} = [\bar x_d, 0, \dots, 0]` (the observed column mean; loadings
  centred at 0) and :math:`\tau = 1` (:data:`TAU`: with factors of unit variance, :math:`G^\top G \approx n_k I`,
  so the prior weighs as one row of the regression, a unit-information prior; Kass & Wasserman 1995).
  :math:`\alpha = 1`: the flat Dirichlet.

  Why one row and not less: in this conjugate form the prior of a row brings a factor :math:`\psi^{-(q+1)/2}`,
  and the weaker the row's prior, the freer the loadings are to absorb a column. On data drawn from a two-factor
  model (``results/factor_bootstrap.md``, "data from the model"), :math:`\tau = 0.01` left the drawn noise
  variances of 25 rows where the maximum-likelihood ones are, 0.77-0.82 of the true ones, and the 95 % intervals
  covered 0.87-0.90 of the hidden entries; with :math:`\tau = 1` the draws are 0.92-0.96 of the true ones and
  cover 0.91-0.93 at 25 rows, 0.94 at 50 and 0.95 at 200. For PPCA
  (``kind="ppca"``) one :math:`\psi_k` is shared by the features, with prior :math:`\mathrm{IG}(a_0,
  \bar b_0)` (:math:`\bar b_0` the mean of the :math:`b_{0d}`).
* **P-step** (:func:`regression_posterior`, :func:`draw_parameters`), given :math:`z`, labels and completed rows:
  with :math:`G_k` the :math:`n_k \times (q+1)` design of component k's rows and :math:`x_{kd}` their column d,

  .. math::

      \Lambda_k = G_k^\top G_k + \tau I, \quad
      \hat\beta_{kd} = \Lambda_k^{-1}(G_k^\top x_{kd} + \tau m_{0d}), \quad
      a_k = a_0 + n_k/2, \quad
      b_{kd} = b_{0d} + \tfrac12\big(\|x_{kd} - G_k\hat\beta_{kd}\|^2 + \tau\|\hat\beta_{kd} - m_{0d}\|^2\big),

  :math:`\psi_{kd} \sim \mathrm{IG}(a_k, b_{kd})`, then :math:`\beta_{kd} \sim N(\hat\beta_{kd},
  \psi_{kd}\Lambda_k^{-1})` (one Cholesky factor of :math:`\Lambda_k` per component, shared by its features;
  triangular solves, no inverse), and :math:`\pi \sim \mathrm{Dir}(\alpha + n_1, \dots, \alpha + n_K)`
  (Murphy 2007, *Conjugate Bayesian analysis of the Gaussian distribution*, section 7.6, the Normal-inverse-gamma
  regression). PPCA pools the features: :math:`a_k = a_0 + n_k D / 2`, :math:`b_k = \bar b_0 + \sum_d (b_{kd} -
  b_{0d})`.
* **I-step** (:func:`impute`), given the parameters: per row a label from the responsibilities on the observed
  entries, then the factors from their conditional :math:`z \mid x_o \sim N(A_o^{-1}W_o^\top\Psi_o^{-1}(x_o -
  \mu_o), A_o^{-1})`, :math:`A_o = I + W_o^\top\Psi_o^{-1}W_o` (the kernel of
  :mod:`explorer.core.factor.fa_conditional`, one Cholesky factor per pattern), then the missing entries
  :math:`x_m = \mu_m + W_m z + e_m`, :math:`e_m \sim N(0, \Psi_m)`, independent given z: together a joint draw of
  :math:`(k, z, x_m)` given :math:`x_o`. Observed entries are kept as given.

The chain starts at a fitted state (the maximum-likelihood fit: :func:`init` is an I-step there), and its states
after burn-in, thinned, are draws of the parameters and the gaps from the joint posterior: gaps drawn at kept
parameters are *proper* multiple imputations. Rows with nothing observed are drawn in the I-step but, as in EM,
left out of the P-step (``fit_rows``).

API in the shape of :mod:`explorer.core.mixtures.data_augmentation`: :class:`FADAConfig`, :class:`FADAState`,
:func:`init`, :func:`step` (a P-step then an I-step), :func:`run` (burn-in and thinning); states are immutable,
the generator is injected.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg.lapack import dpotrs, dtrtrs

from explorer.core.factor.fa_conditional import _per_pattern
from explorer.core.factor.mfa import MFAParams
from explorer.core.factor.mfa import conditional as mfa_conditional
from explorer.core.loop import run_thinned
from explorer.core.validation import BadInputError, check_int

__all__ = ["A0", "NOISE_FRACTION", "TAU", "FAPrior", "FADAConfig", "FADAState", "default_prior",
           "regression_posterior", "draw_parameters", "impute", "init", "step", "run"]

#: Shape of the noise variances' inverse-gamma prior (two pseudo-observations).
A0 = 1.0
#: The prior's guess of a noise variance, as a fraction of its column's observed variance (b0 = A0 * this * var).
NOISE_FRACTION = 0.1
#: Prior precision multiplier of a feature's row [mu_kd, W_kd]: its prior covariance is psi_kd / TAU * I (1: the
#: weight of one row of the regression).
TAU = 1.0


@dataclass(frozen=True)
class FAPrior:
    """The conjugate prior: ``mean`` (D,) of :math:`\\mu_{kd}`, ``b0`` (D,) > 0, ``a0`` > 0, ``tau`` > 0."""

    mean: np.ndarray
    b0: np.ndarray
    a0: float = A0
    tau: float = TAU

    def __post_init__(self):
        mean, b0 = np.asarray(self.mean, dtype=float), np.asarray(self.b0, dtype=float)
        if mean.ndim != 1 or b0.shape != mean.shape or not np.all(np.isfinite(mean)):
            raise BadInputError(f"prior mean and b0 must be finite (D,) arrays; got {mean.shape} and {b0.shape}.")
        if not (np.all(np.isfinite(b0)) and np.all(b0 > 0)):
            raise BadInputError("prior b0 must be positive.")
        for name in ("a0", "tau"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and np.isfinite(v) and v > 0):
                raise BadInputError(f"{name} must be a positive number, got {v!r}.")


def default_prior(X_nan, a0: float = A0, noise_fraction: float = NOISE_FRACTION, tau: float = TAU) -> FAPrior:
    """The weak prior scaled to the observed entries of ``X_nan`` (column means and variances; a column with one
    observed value or a constant one takes the mean of the other columns' variances, or 1)."""
    X_nan = np.asarray(X_nan, dtype=float)
    obs = ~np.isnan(X_nan)
    count = obs.sum(axis=0)
    if np.any(count == 0):
        raise BadInputError("Every column needs an observed value to scale the prior.")
    Xf = np.where(obs, X_nan, 0.0)
    mean = Xf.sum(axis=0) / count
    var = np.where(obs, (Xf - mean) ** 2, 0.0).sum(axis=0) / count
    ok = var > 0
    var = np.where(ok, var, var[ok].mean() if ok.any() else 1.0)
    return FAPrior(mean, a0 * noise_fraction * var, float(a0), float(tau))


@dataclass(frozen=True)
class FADAConfig:
    """Settings of the chain.

    Parameters
    ----------
    n_burn : int, default 10
        Steps discarded before the first kept state (the chain starts at the fit).
    n_thin : int, default 3
        Steps between kept states.
    alpha : float, default 1.0
        Symmetric Dirichlet parameter of the weights (> 0; 1 = flat).
    kind : {"fa", "ppca"}
        Per-feature noise variances, or one per component.
    min_psi : float, default 1e-6
        Floor on the drawn noise variances (as the fit's).
    """

    n_burn: int = 10
    n_thin: int = 3
    alpha: float = 1.0
    kind: str = "fa"
    min_psi: float = 1e-6

    def __post_init__(self):
        check_int("n_burn", self.n_burn, 0)
        check_int("n_thin", self.n_thin, 1)
        if not (isinstance(self.alpha, (int, float)) and np.isfinite(self.alpha) and self.alpha > 0):
            raise BadInputError(f"alpha must be a positive number, got {self.alpha!r}.")
        if self.kind not in ("fa", "ppca"):
            raise BadInputError(f"kind must be 'fa' or 'ppca', got {self.kind!r}.")
        if not (isinstance(self.min_psi, (int, float)) and self.min_psi >= 0):
            raise BadInputError(f"min_psi must be a non-negative number, got {self.min_psi!r}.")


@dataclass(frozen=True)
class FADAState:
    """One state of the chain: the parameters, the labels, the factors and the completed rows (caller's order)."""

    iteration: int
    weights: np.ndarray  # (K,)
    means: np.ndarray  # (K, D)
    loadings: np.ndarray  # (K, D, q)
    psi: np.ndarray  # (K, D)
    labels: np.ndarray  # (n,) int
    Z: np.ndarray  # (n, q)
    X: np.ndarray  # (n, D): observed entries as given, missing ones drawn


def _readonly(*arrays):
    for a in arrays:
        a.setflags(write=False)
    return arrays


def regression_posterior(X: np.ndarray, Z: np.ndarray, prior: FAPrior, kind: str = "fa"):
    """The Normal-inverse-gamma posterior of every feature's row :math:`[\\mu_d, W_d]` and noise variance given
    complete rows ``X`` (n, D) and their factors ``Z`` (n, q) (one component's rows).

    Returns
    -------
    L (q+1, q+1), beta (D, q+1), a (scalar), b (D,) or (1,)
        The Cholesky factor of the posterior precision :math:`\\Lambda = G^\\top G + \\tau I` (shared by the
        features), the posterior means of the rows, and the inverse-gamma's shape and scale(s) (PPCA: one scale).
    """
    n, q = Z.shape
    G = np.hstack([np.ones((n, 1)), Z])
    m0 = np.zeros((X.shape[1], q + 1))
    m0[:, 0] = prior.mean
    L = np.linalg.cholesky(G.T @ G + prior.tau * np.eye(q + 1))
    beta = dpotrs(L, G.T @ X + prior.tau * m0.T, lower=1)[0].T  # LAPACK directly: q+1 is tiny
    resid = X - G @ beta.T
    half_ss = 0.5 * (np.sum(resid * resid, axis=0) + prior.tau * np.sum((beta - m0) ** 2, axis=1))
    if kind == "ppca":
        return L, beta, prior.a0 + 0.5 * n * X.shape[1], np.array([prior.b0.mean() + half_ss.sum()])
    return L, beta, prior.a0 + 0.5 * n, prior.b0 + half_ss


def _draw_rows(L, beta, a, b, D: int, rng: np.random.Generator, min_psi: float = 0.0):
    """``(psi (D,), beta (D, q+1))``: :math:`\\psi \\sim \\mathrm{IG}(a, b)` then rows :math:`N(\\hat\\beta,
    \\psi\\Lambda^{-1})` (:math:`L^{-\\top}e` has covariance :math:`\\Lambda^{-1}`)."""
    psi = np.maximum(1.0 / rng.gamma(a, 1.0 / b), min_psi)  # IG(a, b) <=> 1/psi ~ Gamma(a, rate b)
    psi = np.broadcast_to(psi, (D,)).copy()
    e = dtrtrs(L, rng.standard_normal((L.shape[0], D)), lower=1, trans=1)[0]
    return psi, beta + np.sqrt(psi)[:, None] * e.T


def draw_parameters(X: np.ndarray, Z: np.ndarray, labels: np.ndarray, n_components: int, prior: FAPrior,
                    config: FADAConfig, rng: np.random.Generator):
    """The P-step: ``(weights (K,), means (K, D), loadings (K, D, q), psi (K, D))`` drawn from the conjugate
    posterior given the completed rows, their factors and labels."""
    K, D, q = n_components, X.shape[1], Z.shape[1]
    counts = np.bincount(labels, minlength=K).astype(float)
    weights = rng.dirichlet(config.alpha + counts)
    means, loadings, psi = np.empty((K, D)), np.empty((K, D, q)), np.empty((K, D))
    for k in range(K):
        sel = labels == k
        L, beta, a, b = regression_posterior(X[sel], Z[sel], prior, config.kind)
        psi[k], rows = _draw_rows(L, beta, a, b, D, rng, config.min_psi)
        means[k], loadings[k] = rows[:, 0], rows[:, 1:]
    return weights, means, loadings, psi


def impute(X_nan: np.ndarray, weights, means, loadings, psi, rng: np.random.Generator):
    """The I-step: ``(labels (n,), Z (n, q), X (n, D))``, a joint draw of each row's label, factors and missing
    entries given its observed entries at the parameters; observed entries copied."""
    X_nan = np.asarray(X_nan, dtype=float)
    cond = mfa_conditional(MFAParams.from_arrays(weights, means, loadings, psi), X_nan)
    n, D = X_nan.shape
    q = np.shape(loadings)[2]
    cum = np.cumsum(cond.resp, axis=1)
    labels = np.minimum((rng.random(n)[:, None] >= cum[:, :-1]).sum(axis=1), cum.shape[1] - 1)
    e = rng.standard_normal((n, q))
    Z, mean = np.empty((n, q)), np.empty((n, D))
    for k, c in enumerate(cond.components):
        sel = np.flatnonzero(labels == k)
        if sel.size:
            Z[sel] = c.latent_mean[sel] + _per_pattern(c.chol_inv, c.row_pattern[sel], e[sel], transpose=True)
            mean[sel] = c.params.mean + Z[sel] @ c.params.loadings.T
    noise = np.sqrt(np.asarray(psi, dtype=float)[labels]) * rng.standard_normal((n, D))
    return labels, Z, np.where(cond.missing, mean + noise, X_nan)


def init(X_nan, weights, means, loadings, psi, rng: np.random.Generator) -> FADAState:
    """The chain's first state: an I-step at the given parameters (the fit)."""
    weights, means, loadings, psi = (np.array(a, dtype=float) for a in (weights, means, loadings, psi))
    labels, Z, X = impute(X_nan, weights, means, loadings, psi, rng)
    return FADAState(0, *_readonly(weights, means, loadings, psi, labels, Z, X))


def step(state: FADAState, X_nan, prior: FAPrior, config: FADAConfig, rng: np.random.Generator,
         fit_rows=None) -> FADAState:
    """One sweep: a P-step on the completed rows (``fit_rows``: the rows with an observed entry; default all), then
    an I-step at the drawn parameters."""
    rows = slice(None) if fit_rows is None else fit_rows
    params = draw_parameters(state.X[rows], state.Z[rows], state.labels[rows], state.weights.shape[0], prior, config,
                             rng)
    labels, Z, X = impute(X_nan, *params, rng)
    return FADAState(state.iteration + 1, *_readonly(*params, labels, Z, X))


def run(state: FADAState, X_nan, prior: FAPrior, config: FADAConfig, n_draws: int, rng: np.random.Generator,
        fit_rows=None) -> list[FADAState]:
    """``n_draws`` states of the chain from ``state``: ``config.n_burn`` steps discarded, then one state kept every
    ``config.n_thin`` steps."""
    if not isinstance(prior, FAPrior):
        raise BadInputError(f"prior must be an FAPrior (see default_prior), got {type(prior).__name__}.")
    X_nan = np.asarray(X_nan, dtype=float)
    return run_thinned(lambda s: step(s, X_nan, prior, config, rng, fit_rows), state, config.n_burn, config.n_thin,
                       n_draws)
