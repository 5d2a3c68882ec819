r"""LDA with a factor-analysis covariance (LDA-FA) and missing features, generative or discriminative.

Marlin (2008), sections 6.2.5-6.2.6 (the ``marlin2008`` reference digest, section 5.3, errata in Appendix A).
Model: class priors :math:`\theta_c`, class means :math:`\mu_c` and one shared covariance with a
factor-analysis structure,

.. math::

    \Sigma = \Lambda\Lambda^\top + \Psi, \qquad \Lambda \in \mathbb R^{D \times Q},\ \Psi\ \text{diagonal},

and prediction by marginalisation (6.2.21): :math:`P(y = c \mid x^o) \propto \theta_c N(x^o; \mu_c^o,
\Sigma^{oo})` (:func:`log_posterior`, through :func:`explorer.core.classifiers.discriminant.class_log_posterior`).

**Generative training (two stages, as the thesis).**

1. Class means from the observed entries (6.2.22):
   :math:`\mu_{dc} = \sum_n [y_n = c][r_{dn} = 1] x_{dn} / \sum_n [y_n = c][r_{dn} = 1]`; priors
   :math:`\theta_c = N_c / N`.
2. Class-centre the observed entries, :math:`\hat x_{dn} = x_{dn} - \mu_{d, y_n}` where
   :math:`r_{dn} = 1` (6.2.23, read with the digest's erratum ``[r_dn = 1]``; missing entries stay
   missing), and fit :math:`\hat x \sim N(0, \Lambda\Lambda^\top + \Psi)` by the missing-data FA EM of
   digest section 3.3 with :math:`\mu` fixed at 0 (:func:`fa_init` / :func:`fa_step` / :func:`fa_fit`).
   :mod:`explorer.core.factor.factor_analysis` updates :math:`[\Lambda, \mu]` jointly and has no fixed-mean
   option, so the (short) fixed-mean EM is written here. E-step per distinct pattern (the efficient
   form of the digest): :math:`A_o = I + \Lambda_o^\top\Psi_o^{-1}\Lambda_o` (one Cholesky factor),
   :math:`\Sigma_{t|o} = A_o^{-1}`, :math:`E[t] = \Sigma_{t|o}\Lambda_o^\top\Psi_o^{-1}x^o`. M-step
   (4.3.11-4.3.12 with :math:`\mu = 0`):
   :math:`\Lambda = (\sum_n E[x t^\top])(\sum_n E[tt^\top])^{-1}`,
   :math:`\psi_d = \frac1N(\sum_n E[x_d^2] - \Lambda_d\sum_n E[t x_d])`, floored at ``min_psi``;
   for a missing :math:`x_d`, :math:`E[x_d t^\top] = \Lambda_d E[tt^\top]` and
   :math:`E[x_d^2] = \Lambda_d E[tt^\top]\Lambda_d^\top + \psi_d` (old parameters; :math:`x_d \perp x^o \mid t`).
   Exact EM: the observed-data log-likelihood of the centred data never decreases.

   As the thesis says, this two-stage fit is not the joint ML estimate (the means of stage 1 ignore
   the correlations; under MAR they can be biased).

**Discriminative training.** Maximise the conditional log-likelihood (6.2.24) minus an L2 penalty,

.. math::

    F = \sum_n \log P(y_n \mid x_n^o) - \frac{\lambda}{2}\sum_c \mu_c^\top\Sigma^{-1}\mu_c ,

over the unconstrained :math:`(\omega, \mu, \Lambda, \phi)` with :math:`\theta = \mathrm{softmax}(\omega)`
and :math:`\Psi = \mathrm{diag}(e^{\phi})`. **The penalty is a choice**: the thesis prints
:math:`\mu_c^\top\Sigma\mu_c` while calling it weight decay on the class hyperplane, whose normal is
:math:`\Sigma^{-1}\mu_c`; the digest reads the intended penalty as :math:`\mu_c^\top\Sigma^{-1}\mu_c`, which
is what is implemented. It pulls the class means towards the origin, so centre the features first
(:class:`explorer.learn.discriminant.LDAFAClassifier` centres them by their observed column means).
With :math:`G_{nc} = [y_n = c] - P_n^c`, :math:`e_{nc} = x_n^o - \mu_c^o` and
:math:`S_n = (\Sigma^{o_n o_n})^{-1}`, the gradients (6.2.28, 6.2.31, 6.2.38, 6.2.43, signs as the
digest) are

.. math::

    \frac{\partial F}{\partial\omega_c} = \sum_n G_{nc}, \qquad
    \frac{\partial F}{\partial\mu_c} = \sum_n G_{nc} H_n^o S_n e_{nc} - \lambda\Sigma^{-1}\mu_c,

    \frac{\partial F}{\partial\Sigma} = \tfrac12 M + \tfrac{\lambda}{2}\Sigma^{-1}B\Sigma^{-1},\quad
    M = \sum_n\sum_c G_{nc} H_n^o S_n e_{nc}e_{nc}^\top S_n H_n^{o\top},\quad B = \sum_c\mu_c\mu_c^\top,

    \frac{\partial F}{\partial\Lambda} = 2\frac{\partial F}{\partial\Sigma}\Lambda, \qquad
    \frac{\partial F}{\partial\phi_d} = \Big(\frac{\partial F}{\partial\Sigma}\Big)_{dd}\psi_d .

The :math:`-S_n` term of 6.2.38 / 6.2.43 cancels because :math:`\sum_c G_{nc} = 0` and :math:`S_n` is shared
by the classes (digest, "Simplification"); so does the log-determinant in the posterior. One Cholesky
factor of :math:`\Sigma^{oo}` per distinct pattern serves all its rows and classes. Optimiser:
``scipy.optimize.minimize(method="L-BFGS-B", jac=True)`` on :math:`-F`, at most ``max_iter`` iterations,
started from the generative fit (:func:`fit_discriminative`); a trial point whose :math:`\Sigma^{oo}` is not
numerically positive definite gets :math:`-F = +\infty`, so the line search backtracks. L-BFGS is one scipy call, not an
``init``/``step`` loop; its per-iteration objective is recorded in the result's ``trace``.

:math:`Q = 0` is allowed (:math:`\Sigma = \Psi`, diagonal), as in the thesis's grids.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

from explorer.core.classifiers.discriminant import DiscriminantData, chol_solve, class_log_posterior, prepare
from explorer.core.gaussians.gaussian import LOG_2PI, DegenerateCovarianceError, cholesky
from explorer.core.loop import ConvergenceWarning, run_restarts
from explorer.core.validation import BadInputError

__all__ = [
    "ConvergenceWarning", "DiscriminativeResult", "FAFixedMeanResult", "FAFixedMeanState", "LDAFAConfig",
    "LDAFAParams", "centred", "class_means", "conditional_log_likelihood", "fa_fit", "fa_init", "fa_step",
    "fit_discriminative", "fit_generative", "log_posterior", "negative_objective", "pack", "prepare", "unpack",
]


def logsumexp(a: np.ndarray, axis=None, keepdims: bool = False):
    """``log(sum(exp(a)))`` along ``axis`` (plain numpy; scipy's version costs more than the rest of an
    objective evaluation on these small arrays)."""
    m = np.max(a, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    out = np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m
    return out if keepdims else (np.squeeze(out, axis=axis) if axis is not None else out.reshape(()))[()]


# ----------------------------------------------------------------------------- parameters, config
@dataclass(frozen=True, eq=False, slots=True)
class LDAFAParams:
    """LDA-FA parameters: ``priors`` (C,), ``means`` (C, D), ``loadings`` :math:`\\Lambda` (D, Q), ``psi`` (D,)."""

    priors: np.ndarray
    means: np.ndarray
    loadings: np.ndarray
    psi: np.ndarray

    @property
    def covariance(self) -> np.ndarray:
        """:math:`\\Sigma = \\Lambda\\Lambda^\\top + \\Psi` (D, D)."""
        return self.loadings @ self.loadings.T + np.diag(self.psi)

    @property
    def n_factors(self) -> int:
        return self.loadings.shape[1]


def _int(value, name: str, low: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < low:
        raise BadInputError(f"{name} must be an integer >= {low}, got {value!r}.")
    return int(value)


def _nonneg(value, name: str, positive: bool = False) -> float:
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and np.isfinite(value)
    if not ok or value < 0 or (positive and value == 0):
        raise BadInputError(f"{name} must be a finite number {'>' if positive else '>='} 0, got {value!r}.")
    return float(value)


@dataclass(frozen=True, slots=True)
class LDAFAConfig:
    """Settings of LDA-FA training.

    Parameters
    ----------
    n_factors : int >= 0
        Q, the number of factors (Q < n_features; 0 gives a diagonal covariance).
    reg : float >= 0
        :math:`\\lambda` of the discriminative penalty (module docstring).
    max_iter : int >= 0
        L-BFGS-B iterations of the discriminative training.
    fa_max_iter : int >= 0, fa_tol : float >= 0
        The generative FA EM's iterations and per-row tolerance.
    min_psi : float > 0
        Floor of the FA EM's noise variances.
    """

    n_factors: int = 1
    reg: float = 1e-3
    max_iter: int = 1000
    fa_max_iter: int = 500
    fa_tol: float = 1e-6
    min_psi: float = 1e-6

    def __post_init__(self):
        _int(self.n_factors, "n_factors", 0)
        _nonneg(self.reg, "reg")
        _int(self.max_iter, "max_iter", 0)
        _int(self.fa_max_iter, "fa_max_iter", 0)
        _nonneg(self.fa_tol, "fa_tol")
        _nonneg(self.min_psi, "min_psi", positive=True)


def _check_q(data: DiscriminantData, config: LDAFAConfig) -> None:
    if config.n_factors >= data.n_features:
        raise BadInputError(f"n_factors={config.n_factors} must be smaller than the number of features "
                            f"({data.n_features}); use fewer factors.")


# ----------------------------------------------------------------------------- generative stage 1
def class_means(data: DiscriminantData) -> np.ndarray:
    """Observed-entry class means (6.2.22), (C, D); a column never observed in a class gets its overall mean."""
    C = data.n_classes
    obs = (~data.missing).astype(float)
    onehot = np.eye(C)[data.labels]
    n_obs = onehot.T @ obs
    overall = np.nanmean(data.X, axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n_obs > 0, (onehot.T @ data.Xf) / np.maximum(n_obs, 1), overall)


def centred(data: DiscriminantData, means: np.ndarray) -> np.ndarray:
    """Class-centred features (6.2.23): :math:`x_{dn} - \\mu_{d, y_n}` where observed, 0 where missing."""
    return np.where(data.missing, 0.0, data.Xf - means[data.labels])


# ----------------------------------------------------------------------------- generative stage 2: FA EM, mu = 0
@dataclass(frozen=True, eq=False, slots=True)
class FAFixedMeanState:
    """FA EM state with the mean fixed at 0: ``loadings`` (D, Q), ``psi`` (D,), the observed-data
    ``log_likelihood`` of the centred data (= ``objective``), and the E-step sums at these parameters:
    ``sum_tt`` :math:`\\sum_n E[tt^\\top]` (Q, Q), ``sum_xt`` :math:`\\sum_n E[x t^\\top]` (D, Q),
    ``sum_xx`` :math:`\\sum_n E[x_d^2]` (D,)."""

    iteration: int
    loadings: np.ndarray
    psi: np.ndarray
    log_likelihood: float
    objective: float
    sum_tt: np.ndarray
    sum_xt: np.ndarray
    sum_xx: np.ndarray


@dataclass(frozen=True, eq=False, slots=True)
class FAFixedMeanResult:
    """Outcome of :func:`fa_fit` (fields as :class:`explorer.core.classifiers.discriminant.DiscriminantResult`)."""

    state: FAFixedMeanState
    converged: bool
    stop_reason: str
    message: str
    n_iter: int
    trace: tuple


def _fa_state(data: DiscriminantData, Z: np.ndarray, iteration: int, W: np.ndarray, psi: np.ndarray) -> FAFixedMeanState:
    D, Q = W.shape
    tt = np.zeros((Q, Q))
    xt = np.zeros((D, Q))
    xx = np.zeros(D)
    ll = 0.0
    for b in data.blocks:
        o, m, rows = b.obs, b.mis, b.rows
        n = rows.size
        zo = Z[np.ix_(rows, o)]
        Wo, po = W[o], psi[o]
        u = zo / po  # Psi_o^-1 x^o
        quad = np.sum(zo * u)
        logdet = n * np.log(po).sum()
        if Q:
            A = np.eye(Q) + Wo.T @ (Wo / po[:, None])
            L = cholesky(A, what="posterior precision of the factors")
            v = u @ Wo  # (n, Q): Lambda_o^T Psi_o^-1 x^o
            Et = chol_solve(L, v.T).T
            quad -= np.sum(v * Et)
            logdet += 2.0 * n * np.log(np.diag(L)).sum()
            cov_t = chol_solve(L, np.eye(Q))
            Ttb = n * 0.5 * (cov_t + cov_t.T) + Et.T @ Et
            tt += Ttb
            xt[o] += zo.T @ Et
            if m.size:
                WTm = W[m] @ Ttb
                xt[m] += WTm
                xx[m] += np.einsum("dq,dq->d", WTm, W[m])
        xx[o] += np.sum(zo * zo, axis=0)
        xx[m] += n * psi[m]
        ll += -0.5 * (quad + logdet + n * o.size * LOG_2PI)
    if not np.isfinite(ll):
        raise DegenerateCovarianceError("The FA log-likelihood is not finite; increase min_psi.")
    for a in (W, psi, tt, xt, xx):
        a.setflags(write=False)
    return FAFixedMeanState(iteration, W, psi, float(ll), float(ll), tt, xt, xx)


def fa_init(data: DiscriminantData, Z: np.ndarray, config: LDAFAConfig,
            rng: np.random.Generator | None = None) -> FAFixedMeanState:
    """PPCA closed form of the second moment of the zero-filled centred data ``Z`` (deterministic;
    ``rng`` kept for the house signature): :math:`\\Lambda = U_Q(\\Lambda_Q - \\sigma^2 I)^{1/2}`,
    :math:`\\Psi = \\sigma^2 I` (Q = 0: :math:`\\psi_d` = observed mean square of column d)."""
    _check_q(data, config)
    Q, D = config.n_factors, data.n_features
    rows = np.setdiff1d(np.arange(data.n_samples), data.empty_rows)
    obs = ~data.missing[rows]
    n_obs = np.maximum(obs.sum(axis=0), 1)
    if Q == 0:
        psi = np.maximum((Z[rows] ** 2).sum(axis=0) / n_obs, config.min_psi)
        return _fa_state(data, Z, 0, np.zeros((D, 0)), psi)
    Zr = Z[rows]
    pair = np.maximum(obs.T.astype(float) @ obs, 1.0)
    S = (Zr.T @ Zr) / pair  # pairwise-observed second moments
    lam, U = np.linalg.eigh(0.5 * (S + S.T))
    lam, U = lam[::-1], U[:, ::-1]
    sigma2 = max(float(lam[Q:].mean()), config.min_psi, 1e-3 * float(np.abs(lam).max()))
    W = U[:, :Q] * np.sqrt(np.maximum(lam[:Q] - sigma2, 1e-3 * sigma2))
    return _fa_state(data, Z, 0, np.ascontiguousarray(W), np.full(D, sigma2))


def fa_step(state: FAFixedMeanState, data: DiscriminantData, Z: np.ndarray, config: LDAFAConfig) -> FAFixedMeanState:
    """One EM iteration with :math:`\\mu = 0` (M-step from the state's sums, then the E-step); pure."""
    D, Q = state.loadings.shape
    N = data.n_fit
    if Q:
        L = cholesky(state.sum_tt, what="sum of E[t t^T]")
        W = chol_solve(L, state.sum_xt.T).T
        resid = state.sum_xx - np.einsum("dq,dq->d", W, state.sum_xt)
    else:
        W, resid = np.zeros((D, 0)), np.array(state.sum_xx)
    psi = np.maximum(resid / N, config.min_psi)
    return _fa_state(data, Z, state.iteration + 1, W, psi)


def fa_fit(data: DiscriminantData, Z: np.ndarray, config: LDAFAConfig, rng: np.random.Generator | None = None, *,
           callback: Callable | None = None, init_state: FAFixedMeanState | None = None) -> FAFixedMeanResult:
    """The fixed-mean FA EM: a loop over :func:`fa_step` until ``fa_tol`` per fitted row or ``fa_max_iter``."""
    out = run_restarts(
        n_runs=1,
        start=lambda: init_state if init_state is not None else fa_init(data, Z, config, rng),
        step=lambda s: fa_step(s, data, Z, config),
        snapshot=lambda s: {"iteration": s.iteration, "log_likelihood": s.log_likelihood},
        change=lambda old, new: (new.objective - old.objective) / max(data.n_fit, 1),
        max_iter=config.fa_max_iter,
        tol=config.fa_tol,
        callback=callback,
        stacklevel=4,
    )
    return FAFixedMeanResult(out.state, out.stop_reason == "tol", out.stop_reason, out.message,
                             out.state.iteration, out.trace)


def fit_generative(data: DiscriminantData, config: LDAFAConfig,
                   rng: np.random.Generator | None = None) -> tuple[LDAFAParams, FAFixedMeanResult]:
    """Two-stage generative LDA-FA (6.2.22, 6.2.23, then :func:`fa_fit`): ``(params, fa_result)``."""
    _check_q(data, config)
    means = class_means(data)
    Z = centred(data, means)
    res = fa_fit(data, Z, config, rng)
    priors = data.counts / data.counts.sum()
    return LDAFAParams(priors, means, np.array(res.state.loadings), np.array(res.state.psi)), res


# ----------------------------------------------------------------------------- discriminative
def pack(params: LDAFAParams) -> np.ndarray:
    """The unconstrained vector :math:`[\\omega, \\mu, \\Lambda, \\phi]` with :math:`\\omega = \\log\\theta`, :math:`\\phi = \\log\\psi`."""
    with np.errstate(divide="ignore"):
        omega = np.log(params.priors)
    return np.concatenate([omega, params.means.ravel(), params.loadings.ravel(), np.log(params.psi)])


def unpack(vector: np.ndarray, n_classes: int, n_features: int, n_factors: int) -> LDAFAParams:
    """Inverse of :func:`pack` (priors by softmax, psi by exp)."""
    C, D, Q = n_classes, n_features, n_factors
    v = np.asarray(vector, dtype=float)
    if v.shape != (C + C * D + D * Q + D,):
        raise BadInputError(f"The parameter vector has {v.size} entries; expected {C + C * D + D * Q + D}.")
    omega = v[:C]
    priors = np.exp(omega - logsumexp(omega))
    means = v[C:C + C * D].reshape(C, D)
    W = v[C + C * D:C + C * D + D * Q].reshape(D, Q)
    psi = np.exp(v[C + C * D + D * Q:])
    return LDAFAParams(priors, means.copy(), W.copy(), psi)


def _objective(data: DiscriminantData, params: LDAFAParams, reg: float, gradient: bool):
    """F (module docstring) and, with ``gradient``, its gradient as (g_omega, g_mu, g_Lambda, g_phi)."""
    C, D = params.means.shape
    W, psi, mu = params.loadings, params.psi, params.means
    Sigma = params.covariance
    with np.errstate(divide="ignore"):
        log_theta = np.log(params.priors)
    value = 0.0
    g_omega = np.zeros(C)
    g_mu = np.zeros((C, D))
    M = np.zeros((D, D))
    onehot = np.eye(C)
    for b in data.blocks:
        o, rows = b.obs, b.rows
        n = rows.size
        L = cholesky(Sigma[np.ix_(o, o)], what="LDA-FA covariance on the observed features")
        e = data.Xf[np.ix_(rows, o)][:, None, :] - mu[None][:, :, o]  # (n, C, |o|)
        Se = chol_solve(L, e.reshape(n * C, o.size).T).T.reshape(n, C, o.size)
        logits = log_theta - 0.5 * np.sum(e * Se, axis=2)
        logp = logits - logsumexp(logits, axis=1, keepdims=True)
        y = data.labels[rows]
        value += float(logp[np.arange(n), y].sum())
        if gradient:
            G = onehot[y] - np.exp(logp)
            g_omega += G.sum(axis=0)
            g_mu[:, o] += np.einsum("nc,nco->co", G, Se)
            # sum_n sum_c G_nc Se_nc Se_nc^T as one BLAS product (the three-operand einsum was ~20x slower at
            # o = 588, MNIST with a quadrant missing)
            M[np.ix_(o, o)] += (G[:, :, None] * Se).reshape(-1, o.size).T @ Se.reshape(-1, o.size)
    if data.empty_rows.size:  # nothing observed: P(y | x^o) = theta
        y = data.labels[data.empty_rows]
        value += float((log_theta[y] - logsumexp(log_theta)).sum())
        if gradient:
            g_omega += (onehot[y] - params.priors).sum(axis=0)
    gSigma = 0.5 * M
    if reg:
        Lf = cholesky(Sigma, what="LDA-FA covariance")
        U = chol_solve(Lf, mu.T)  # Sigma^-1 mu_c, (D, C)
        value -= 0.5 * reg * float(np.sum(mu.T * U))
        if gradient:
            g_mu -= reg * U.T
            gSigma += 0.5 * reg * (U @ U.T)
    if not gradient:
        return value
    gSigma = 0.5 * (gSigma + gSigma.T)
    return value, (g_omega, g_mu, 2.0 * gSigma @ W, np.diag(gSigma) * psi)


def conditional_log_likelihood(data: DiscriminantData, params: LDAFAParams, reg: float = 0.0) -> float:
    """:math:`F = \\sum_n \\log P(y_n \\mid x_n^o) - \\frac\\lambda2\\sum_c\\mu_c^\\top\\Sigma^{-1}\\mu_c` (6.2.24 with
    the penalty; ``reg = 0`` gives the plain conditional log-likelihood)."""
    return _objective(data, params, _nonneg(reg, "reg"), False)


def negative_objective(vector: np.ndarray, data: DiscriminantData, n_factors: int, reg: float):
    """``(-F, -grad F)`` at the unconstrained ``vector`` (:func:`pack`), what L-BFGS-B minimises."""
    params = unpack(vector, data.n_classes, data.n_features, n_factors)
    value, (go, gm, gw, gp) = _objective(data, params, reg, True)
    return -value, -np.concatenate([go, gm.ravel(), gw.ravel(), gp])


@dataclass(frozen=True, eq=False, slots=True)
class DiscriminativeResult:
    """Outcome of :func:`fit_discriminative`: final ``params``; ``start_objective`` and ``objective``
    (F at the generative start and at the end); L-BFGS-B's ``converged``, ``message``, ``n_iter``;
    ``trace`` of F after every iteration."""

    params: LDAFAParams
    start: LDAFAParams
    start_objective: float
    objective: float
    converged: bool
    message: str
    n_iter: int
    trace: tuple


def fit_discriminative(data: DiscriminantData, config: LDAFAConfig, start: LDAFAParams | None = None,
                       rng: np.random.Generator | None = None) -> DiscriminativeResult:
    """Maximise F (module docstring) by L-BFGS-B from ``start`` (default: :func:`fit_generative`).

    Warns
    -----
    ConvergenceWarning
        When L-BFGS-B stops at ``max_iter`` or on a line-search failure.
    """
    import warnings

    _check_q(data, config)
    if start is None:
        start, _ = fit_generative(data, config, rng)
    if start.means.shape != (data.n_classes, data.n_features) or start.loadings.shape != (data.n_features,
                                                                                          config.n_factors):
        raise BadInputError("start parameters do not match the data's classes / features or n_factors.")
    x0 = pack(start)
    if not np.all(np.isfinite(x0)):
        raise BadInputError("start parameters must have positive priors and noise variances.")
    Q = config.n_factors
    trace = []
    f0, _ = negative_objective(x0, data, Q, config.reg)
    last = {}

    def fun(x):
        try:
            value, grad = negative_objective(x, data, Q, config.reg)
        except DegenerateCovarianceError:  # a trial step made Sigma^oo singular: reject it (the line search backtracks)
            value, grad = np.inf, np.zeros_like(x)
        last["x"], last["f"] = x.copy(), value
        return value, grad

    def record(xk):  # the iterate was just evaluated by the line search: reuse its value
        same = "x" in last and np.array_equal(last["x"], xk)
        trace.append(-float(last["f"] if same else negative_objective(xk, data, Q, config.reg)[0]))

    res = minimize(fun, x0, jac=True, method="L-BFGS-B", callback=record, options={"maxiter": config.max_iter})
    x = res.x
    value = -float(res.fun)
    if not np.isfinite(value):
        x, value = x0, -float(f0)
    if value < -f0:  # L-BFGS-B returns its best point; keep the start if nothing improved on it
        x, value = x0, -float(f0)
    if not res.success:
        warnings.warn(f"Discriminative LDA-FA: L-BFGS-B stopped after {res.nit} iterations without converging "
                      f"({res.message}).", ConvergenceWarning, stacklevel=2)
    params = unpack(x, data.n_classes, data.n_features, Q)
    return DiscriminativeResult(params, start, -float(f0), value, bool(res.success), str(res.message),
                                int(res.nit), tuple(trace))


def log_posterior(params: LDAFAParams, X, missing=None) -> np.ndarray:
    """:math:`\\log P(y = c \\mid x^o)` by marginalisation (6.2.21), (n, C): NaN (or ``missing``) marks a
    missing feature; a row with nothing observed gets the priors."""
    return class_log_posterior(X, params.priors, params.means, params.covariance, missing)
