r"""Factor analysis and PPCA on complete data and with missing values (exact EM).

Model (seed003 §1.1, seed004 §3.3): :math:`z \sim N(0, I_q)`, :math:`x \mid z \sim N(\mu + W z, \Psi)`,
so :math:`x \sim N(\mu, WW^\top + \Psi)`; :math:`\Psi` is diagonal (FA) or :math:`\sigma^2 I` (PPCA).

**Posterior of the factors given the observed entries** ``o`` of a row (seed003 eqs. 2.12-2.13;
seed004's "efficient equivalent", valid because :math:`\Psi` is diagonal):

.. math::

    A_o = I_q + W_o^\top \Psi_o^{-1} W_o, \quad
    \Sigma_{z|o} = A_o^{-1}, \quad
    \mu_{z|o} = A_o^{-1} W_o^\top \Psi_o^{-1}(x_o - \mu_o).

:math:`A_o` depends on the missingness pattern only, so it is formed and Cholesky-factored once
per distinct pattern (rows grouped by :mod:`explorer.core.patterns`); no ``D x D`` matrix is ever
factored. The observed-data log-likelihood follows from Woodbury and the determinant lemma
(seed003 eqs. 2.39, 2.44 with the **corrected signs** of its erratum):

.. math::

    \log N(x_o; \mu_o, \Sigma_{oo}) = -\tfrac12\big[|o|\log 2\pi + \log|\Psi_o| + \log|A_o|
        + r^\top\Psi_o^{-1} r - b^\top \mu_{z|o}\big], \quad r = x_o - \mu_o,\ b = W_o^\top\Psi_o^{-1} r .

**Exact EM with missing data** (seed004 §3.3: the missing values are handled jointly with the
factors, not imputed then refitted). With :math:`\tilde W = [W, \mu]` and :math:`\tilde z = [z; 1]`,
:math:`T_n = E[\tilde z\tilde z^\top \mid x_o]`, the M-step is

.. math::

    \tilde W^{new}_d = \Big(\sum_n E[x_{nd}\tilde z_n^\top]\Big)\Big(\sum_n T_n\Big)^{-1}, \qquad
    \psi_d^{new} = \tfrac1N\Big(\sum_n E[x_{nd}^2] - \tilde W^{new}_d \sum_n E[\tilde z_n x_{nd}]\Big),

where, for an entry ``d`` missing in row ``n`` (``x_d`` is independent of ``x_o`` given ``z``),
:math:`E[x_{nd}\tilde z_n^\top] = \tilde W^{old}_d T_n` and
:math:`E[x_{nd}^2] = \tilde W^{old}_d T_n \tilde W^{old\top}_d + \psi^{old}_d`; observed entries give
:math:`x_{nd}\tilde z_n^\top` and :math:`x_{nd}^2`. PPCA pools the residuals:
:math:`\sigma^2 = \frac{1}{ND}\sum_d(\cdot)` (seed004 erratum: the thesis prints ``1/N``). The
joint :math:`[W, \mu]` update is the exact maximiser of the expected complete-data
log-likelihood, and :math:`\psi_d` is floored at ``min_psi`` (the constrained maximiser), so the
observed-data log-likelihood never decreases.

API as :mod:`explorer.core.em_gmm`: :func:`prepare`, :func:`init`, :func:`step`, :func:`fit`;
frozen states. :func:`ppca_closed_form` is Tipping & Bishop's ML solution on complete data,
:func:`conditional` the Gaussian :math:`p(x_m \mid x_o)` of every row (:class:`FAConditional`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.linalg import cho_solve, solve_triangular
from scipy.linalg.lapack import dtrtri as trtri
from scipy.special import ndtri

from ._loop import ConvergenceWarning, run_restarts
from ._validation import (
    BadInputError,
    as_float_matrix,
    check_incomplete,
    check_missing_matches_nan,
)
from .gaussian import LOG_2PI, DegenerateCovarianceError, cholesky
from .patterns import group_patterns

__all__ = [
    "INIT_METHODS", "KINDS", "ConvergenceWarning", "FAConditional", "FAConfig", "FAData", "FAParams",
    "FAResult", "FAState", "conditional", "fit", "init", "init_from_parameters", "log_likelihood",
    "ppca_closed_form", "prepare", "snapshot", "step",
]

KINDS = ("fa", "ppca")
INIT_METHODS = ("pca", "random")
_CHUNK = 1 << 22  # elements of a temporary array in the chunked batched kernels


def _readonly(*arrays):
    for a in arrays:
        if isinstance(a, np.ndarray):
            a.setflags(write=False)


# ----------------------------------------------------------------------------- parameters
@dataclass(frozen=True, eq=False, slots=True)
class FAParams:
    """Parameters of one factor analyser: ``mean`` (D,), ``loadings`` W (D, q), ``psi`` (D,) > 0."""

    mean: np.ndarray
    loadings: np.ndarray
    psi: np.ndarray

    @classmethod
    def from_arrays(cls, mean, loadings, psi) -> FAParams:
        """Validated read-only copies; a scalar ``psi`` means PPCA (:math:`\\sigma^2 I`)."""
        try:
            mu, W = np.array(mean, dtype=float), np.array(loadings, dtype=float)
            psi = np.array(psi, dtype=float)
        except (TypeError, ValueError):
            raise BadInputError("mean, loadings and psi must be numeric arrays.") from None
        if mu.ndim != 1 or W.ndim != 2 or W.shape[0] != mu.size or W.shape[1] < 1:
            raise BadInputError(f"Need mean (D,) and loadings (D, q) with q >= 1; got {mu.shape} and {W.shape}.")
        psi = np.broadcast_to(psi, mu.shape).copy() if psi.ndim == 0 else psi
        if psi.shape != mu.shape:
            raise BadInputError(f"psi has shape {psi.shape}; expected ({mu.size},) (one noise variance per feature).")
        if not all(np.all(np.isfinite(a)) for a in (mu, W, psi)):
            raise BadInputError("mean, loadings and psi must be finite.")
        if np.any(psi <= 0):
            raise BadInputError("psi must be positive (noise variances); floor it, e.g. at 1e-6.")
        _readonly(mu, W, psi)
        return cls(mu, W, psi)

    @property
    def n_features(self) -> int:
        return self.mean.size

    @property
    def n_factors(self) -> int:
        return self.loadings.shape[1]

    def covariance(self) -> np.ndarray:
        """Marginal covariance :math:`WW^\\top + \\Psi`, shape (D, D)."""
        return self.loadings @ self.loadings.T + np.diag(self.psi)


def _as_params(obj) -> FAParams:
    if isinstance(obj, FAParams):
        return obj
    for attr in ("params", "state"):
        if hasattr(obj, attr):
            return _as_params(getattr(obj, attr))
    raise BadInputError(f"Expected FAParams, FAState or FAResult, got {type(obj).__name__}.")


# ----------------------------------------------------------------------------- batched kernels
def _pattern_table(missing: np.ndarray):
    """Distinct missingness patterns: ``(pattern_missing (U, D) bool, row_pattern (n,))``."""
    n, D = missing.shape
    p = group_patterns(missing)
    blocks, row_pattern, offset = [], np.empty(n, dtype=np.intp), 0
    for g in p.groups:
        pm = np.zeros((g.n_unique, D), dtype=bool)
        if g.n_missing:
            pm[np.arange(g.n_unique)[:, None], g.unique_mis] = True
        blocks.append(pm)
        row_pattern[g.rows] = offset + g.inverse
        offset += g.n_unique
    if p.empty_rows.size:
        blocks.append(np.ones((1, D), dtype=bool))
        row_pattern[p.empty_rows] = offset
    return np.concatenate(blocks), row_pattern


def _masked_gram(weights: np.ndarray, W: np.ndarray) -> np.ndarray:
    """:math:`\\sum_d w_{ud} W_{dk} W_{dl}` for every row ``u`` of ``weights`` (U, D): (U, q, q).

    One GEMM ``weights @ P`` with :math:`P_{d,(k,l)} = W_{dk}W_{dl}` over the pairs k <= l (built in
    column chunks): far faster than U small matrix products.
    """
    U, D = weights.shape
    q = W.shape[1]
    k, l = np.triu_indices(q)
    tri = np.empty((U, k.size))
    c = max(1, _CHUNK // max(D, 1))
    for s in range(0, k.size, c):
        tri[:, s : s + c] = weights @ (W[:, k[s : s + c]] * W[:, l[s : s + c]])
    out = np.empty((U, q, q))
    out[:, k, l] = tri
    out[:, l, k] = tri
    return out


def _quadratic_diagonals(S: np.ndarray, W: np.ndarray) -> np.ndarray:
    """:math:`\\mathrm{diag}(W S_u W^\\top)` for every symmetric ``S_u`` of (U, q, q): (U, D), by GEMMs."""
    U, q, _ = S.shape
    k, l = np.triu_indices(q)
    tri = S[:, k, l] * np.where(k == l, 1.0, 2.0)
    out = np.zeros((U, W.shape[0]))
    c = max(1, _CHUNK // max(W.shape[0], 1))
    for s in range(0, k.size, c):
        out += tri[:, s : s + c] @ (W[:, k[s : s + c]] * W[:, l[s : s + c]]).T
    return out


def _per_pattern(M: np.ndarray, row_pattern: np.ndarray, B: np.ndarray, *, transpose=False) -> np.ndarray:
    """``out[n] = M[row_pattern[n]] @ B[n]`` (``M^T`` if ``transpose``) for (U, q, q) and (n, q)."""
    Mt = np.swapaxes(M, 1, 2) if transpose else M
    out = np.empty_like(B)
    if M.shape[0] <= 32:  # few patterns: one matrix product per pattern
        for u in range(M.shape[0]):
            rows = np.flatnonzero(row_pattern == u)
            out[rows] = B[rows] @ Mt[u].T
        return out
    c = max(1, _CHUNK // max(M.shape[1] * M.shape[2], 1))
    for s in range(0, B.shape[0], c):
        out[s : s + c] = np.matmul(Mt[row_pattern[s : s + c]], B[s : s + c, :, None])[..., 0]
    return out


def _tril_inverse(L: np.ndarray) -> np.ndarray:
    """:math:`L^{-1}` of every lower-triangular factor in (U, q, q): LAPACK ``trtri``, a triangular solve
    against the identity (batched ``np.linalg.solve`` runs a general LU, many times slower)."""
    out = np.empty_like(L)
    for u in range(L.shape[0]):
        out[u] = trtri(L[u], lower=1)[0]
    return out


def _gram_of_inverse(Linv: np.ndarray) -> np.ndarray:
    """:math:`A^{-1} = L^{-\\top}L^{-1}` for every pattern, (U, q, q)."""
    return np.einsum("ujk,ujl->ukl", Linv, Linv)


def _factor_precisions(pattern_obs: np.ndarray, W: np.ndarray, psi: np.ndarray):
    """Per pattern: inverse Cholesky factor ``Linv`` of :math:`A_o` (U, q, q) and :math:`\\log|A_o|` (U,)."""
    A = _masked_gram(pattern_obs / psi, W)
    A[:, np.arange(W.shape[1]), np.arange(W.shape[1])] += 1.0
    L = cholesky(A, what="latent posterior precision I + W_o^T Psi_o^-1 W_o")
    return _tril_inverse(L), 2.0 * np.log(np.diagonal(L, axis1=1, axis2=2)).sum(axis=1)


def _posterior(Xf, missing, pattern_missing, row_pattern, params: FAParams):
    """E-step kernel: ``(latent_mean (n, q), Linv (U, q, q), logdet_A (U,), loglik (n,))``.

    ``Xf`` holds any finite value at missing entries; rows with nothing observed get the prior
    (mean 0, covariance I) and log-likelihood 0.
    """
    mu, W, psi = params.mean, params.loadings, params.psi
    Linv, logdet_A = _factor_precisions((~pattern_missing).astype(float), W, psi)
    r = np.where(missing, 0.0, Xf - mu)
    b = r @ (W / psi[:, None])  # W_o^T Psi_o^-1 (x_o - mu_o)
    y = _per_pattern(Linv, row_pattern, _per_pattern(Linv, row_pattern, b), transpose=True)
    quad = (r * r) @ (1.0 / psi) - np.einsum("nk,nk->n", b, y)
    obs = (~missing).astype(float)
    loglik = -0.5 * (obs.sum(axis=1) * LOG_2PI + obs @ np.log(psi) + logdet_A[row_pattern] + quad)
    return y, Linv, logdet_A, loglik


def _check_rows(params: FAParams, X, missing):
    """``(values with NaN, missing, Xf with 0)`` for rows to condition on; empty rows allowed."""
    values = as_float_matrix(X, name="X")
    miss = np.isnan(values) if missing is None else check_missing_matches_nan(values, missing)
    if values.shape[1] != params.n_features:
        raise BadInputError(
            f"X has {values.shape[1]} column(s) but the model has {params.n_features} feature(s)."
        )
    values[miss] = np.nan
    return values, miss, np.where(miss, 0.0, values)


def log_likelihood(params, X, missing=None) -> np.ndarray:
    """Observed-data log-likelihood of every row, :math:`\\log N(x_o; \\mu_o, \\Sigma_{oo})`, shape (n,).

    ``params`` is an :class:`FAParams` (or a state / result). Rows with nothing observed get 0.
    """
    params = _as_params(params)
    _, miss, Xf = _check_rows(params, X, missing)
    pm, rp = _pattern_table(miss)
    return _posterior(Xf, miss, pm, rp, params)[3]


# ----------------------------------------------------------------------------- PPCA closed form
def _ppca_from_covariance(S: np.ndarray, q: int) -> tuple[np.ndarray, float]:
    lam, U = np.linalg.eigh(S)
    lam, U = lam[::-1], U[:, ::-1]
    sigma2 = float(lam[q:].mean())
    if not sigma2 > 0:
        raise DegenerateCovarianceError(
            f"The discarded eigenvalues average {sigma2:.3g}: the data span at most {q} dimensions, so "
            "the noise variance is zero. Use fewer factors or more (non-duplicated) rows."
        )
    return U[:, :q] * np.sqrt(np.maximum(lam[:q] - sigma2, 0.0)), sigma2


def ppca_closed_form(X, n_factors: int) -> FAParams:
    """Maximum-likelihood PPCA on complete data (Tipping & Bishop 1999; seed003 §1.1).

    :math:`\\hat\\mu` = sample mean; with the ML covariance :math:`S = U\\Lambda U^\\top`
    (eigenvalues decreasing), :math:`\\hat\\sigma^2 = \\frac{1}{D-q}\\sum_{j>q}\\lambda_j` and
    :math:`\\hat W = U_q(\\Lambda_q - \\hat\\sigma^2 I)^{1/2}` (rotation R = I).

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features), complete (no NaN)
    n_factors : int, 1 <= q < n_features

    Returns
    -------
    FAParams
        With ``psi`` = :math:`\\hat\\sigma^2` in every entry.
    """
    Xa = as_float_matrix(X)
    if np.isnan(Xa).any():
        raise BadInputError("ppca_closed_form needs complete data; X has NaN. Use fit(prepare(X), FAConfig(kind='ppca')).")
    _check_n_factors(n_factors, Xa.shape[1])
    if Xa.shape[0] < 2:
        raise BadInputError("ppca_closed_form needs at least two rows.")
    mu = Xa.mean(axis=0)
    D = Xa - mu
    W, sigma2 = _ppca_from_covariance(D.T @ D / Xa.shape[0], n_factors)
    return FAParams.from_arrays(mu, W, sigma2)


def _check_n_factors(q, D):
    if isinstance(q, (bool, np.bool_)) or not isinstance(q, (int, np.integer)) or q < 1:
        raise BadInputError(f"n_factors must be a positive integer, got {q!r}.")
    if q >= D:
        raise BadInputError(
            f"n_factors={q} must be smaller than the number of features ({D}); with q >= D the factor "
            "model is a full-covariance Gaussian. Use fewer factors."
        )


# ----------------------------------------------------------------------------- EM
@dataclass(frozen=True, slots=True)
class FAConfig:
    """Settings of EM for factor analysis / PPCA.

    Parameters
    ----------
    n_factors : int
        Latent dimension q (1 <= q < n_features).
    kind : {"fa", "ppca"}
        Diagonal :math:`\\Psi` or isotropic :math:`\\sigma^2 I`.
    tol : float
        Stop when the mean (per fitted row) log-likelihood changes by less than ``tol``.
    max_iter : int
    min_psi : float
        Floor on every noise variance (absolute, in squared data units; > 0).
    init : {"pca", "random"}
        ``"pca"``: the PPCA closed form on the column-mean-imputed data (for FA too, with
        :math:`\\Psi = \\sigma^2 I`); ``"random"``: Gaussian loadings scaled to the column variances.
    """

    n_factors: int = 1
    kind: str = "fa"
    tol: float = 1e-6
    max_iter: int = 500
    min_psi: float = 1e-6
    init: str = "pca"

    def __post_init__(self):
        _check_n_factors(self.n_factors, np.inf)
        if self.kind not in KINDS:
            raise BadInputError(f"kind must be one of {KINDS}, got {self.kind!r}.")
        if not self.tol >= 0:
            raise BadInputError(f"tol must be >= 0, got {self.tol!r}.")
        if not isinstance(self.max_iter, (int, np.integer)) or self.max_iter < 0:
            raise BadInputError(f"max_iter must be a non-negative integer, got {self.max_iter!r}.")
        if not self.min_psi > 0:
            raise BadInputError(f"min_psi must be > 0, got {self.min_psi!r}.")
        if self.init not in INIT_METHODS:
            raise BadInputError(f"init must be one of {INIT_METHODS}, got {self.init!r}.")


@dataclass(frozen=True, eq=False, slots=True)
class FAData:
    """Incomplete data prepared once (see :func:`prepare`); ``Xf`` holds 0 at missing entries."""

    X: np.ndarray
    Xf: np.ndarray
    missing: np.ndarray
    pattern_missing: np.ndarray  # (U, D), distinct patterns
    row_pattern: np.ndarray  # (n,)
    fit_rows: np.ndarray  # rows with at least one observed entry
    col_mean: np.ndarray
    col_var: np.ndarray

    @property
    def n_features(self) -> int:
        return self.X.shape[1]


def prepare(X, missing=None, *, columns=None) -> FAData:
    """Validate incomplete data (NaN = missing unless ``missing`` is given) and index its patterns.

    Raises
    ------
    BadInputError
        Non-numeric or infinite values, wrong shapes, columns with no observed value, fewer than
        two rows with an observed value.
    """
    Xn, miss = check_incomplete(X, missing, columns=columns, allow_empty_rows=True)
    fit_rows = np.flatnonzero(~miss.all(axis=1))
    if fit_rows.size < 2:
        raise BadInputError("At least two rows with an observed value are needed to fit a factor model.")
    pm, rp = _pattern_table(miss)
    Xf = np.where(miss, 0.0, Xn)
    col_mean, col_var = np.nanmean(Xn, axis=0), np.nanvar(Xn, axis=0)
    _readonly(Xn, Xf, miss, pm, rp, fit_rows, col_mean, col_var)
    return FAData(Xn, Xf, miss, pm, rp, fit_rows, col_mean, col_var)


@dataclass(frozen=True, eq=False, slots=True)
class FAState:
    """Parameters after ``iteration`` EM steps and the E-step at them (read-only arrays).

    ``latent_mean`` (n, q) is :math:`E[z \\mid x_o]` per row, ``latent_cov`` (U, q, q) the posterior
    covariance :math:`A_o^{-1}` per distinct pattern (``FAData.row_pattern``), ``log_likelihood``
    the observed-data log-likelihood summed over the fitted rows.
    """

    iteration: int
    params: FAParams
    log_likelihood: float
    latent_mean: np.ndarray
    latent_cov: np.ndarray

    @property
    def objective(self) -> float:
        return self.log_likelihood


@dataclass(frozen=True, eq=False, slots=True)
class FAResult:
    """Outcome of :func:`fit`: final state, whether and why it stopped, trace of snapshots."""

    state: FAState
    converged: bool
    stop_reason: str  # "tol" | "max_iter" | "degenerate"
    message: str
    n_iter: int
    trace: tuple
    config: FAConfig


def _state(data: FAData, iteration: int, params: FAParams) -> FAState:
    y, Linv, _, ll = _posterior(data.Xf, data.missing, data.pattern_missing, data.row_pattern, params)
    cov = _gram_of_inverse(Linv)
    _readonly(y, cov)
    return FAState(iteration, params, float(ll[data.fit_rows].sum()), y, cov)


def init(data: FAData, config: FAConfig, rng: np.random.Generator) -> FAState:
    """Initial state (see ``FAConfig.init``); ``rng`` is used by ``init="random"`` only."""
    D, q = data.n_features, config.n_factors
    _check_n_factors(q, D)
    if config.init == "pca":
        rows = data.fit_rows
        Z = np.where(data.missing[rows], 0.0, data.X[rows] - data.col_mean)
        S = Z.T @ Z / rows.size
        S.flat[:: D + 1] = np.maximum(S.flat[:: D + 1], config.min_psi)
        W, sigma2 = _ppca_from_covariance(S, q)
        psi = np.full(D, max(sigma2, config.min_psi))
    else:
        if not isinstance(rng, np.random.Generator):
            raise BadInputError("rng must be a numpy.random.Generator (np.random.default_rng(seed)).")
        scale = np.sqrt(np.maximum(data.col_var, config.min_psi))
        W = rng.normal(size=(D, q)) * scale[:, None] / np.sqrt(2 * q)
        psi = np.maximum(data.col_var / 2, config.min_psi)
        if config.kind == "ppca":
            psi = np.full(D, psi.mean())
    return _state(data, 0, FAParams.from_arrays(data.col_mean, W, psi))


def init_from_parameters(data: FAData, params) -> FAState:
    """State at iteration 0 from given parameters (FAParams, or a state / result of another fit)."""
    P = _as_params(params)
    if P.n_features != data.n_features:
        raise BadInputError(f"The parameters have {P.n_features} feature(s); the data have {data.n_features}.")
    return _state(data, 0, P)


def _missing_moments(mis, zt, row_pattern, pattern_mis, latent_cov):
    """:math:`S_d = \\sum_n [d \\text{ missing in } n]\\, T_n` for the given columns: (D_m, q+1, q+1)."""
    n, p = zt.shape
    q = p - 1
    S = np.zeros((mis.shape[1], p, p))
    c = max(1, _CHUNK // (p * p))
    for s in range(0, n, c):
        zc = zt[s : s + c]
        S += (mis[s : s + c].T @ (zc[:, :, None] * zc[:, None, :]).reshape(zc.shape[0], p * p)).reshape(-1, p, p)
    counts = np.bincount(row_pattern, minlength=pattern_mis.shape[0]).astype(float)
    S[:, :q, :q] += ((counts[:, None] * pattern_mis).T @ latent_cov.reshape(-1, q * q)).reshape(-1, q, q)
    return S


def step(state: FAState, data: FAData, config: FAConfig) -> FAState:
    """One EM iteration (M-step from the cached E-step, then the E-step at the new parameters); pure."""
    rows, P = data.fit_rows, state.params
    N, q = rows.size, P.n_factors
    rp = data.row_pattern[rows]
    zt = np.hstack([state.latent_mean[rows], np.ones((N, 1))])  # E[z~], (N, q+1)
    T = zt.T @ zt
    T[:q, :q] += np.tensordot(np.bincount(rp, minlength=state.latent_cov.shape[0]), state.latent_cov, 1)
    Xf = data.Xf[rows]
    num = Xf.T @ zt  # sum_n E[x_nd z~_n^T] (observed part), (D, q+1)
    ex2 = np.einsum("nd,nd->d", Xf, Xf)
    cols = np.flatnonzero(data.missing[rows].any(axis=0))
    if cols.size:
        mis = data.missing[rows][:, cols].astype(float)
        S = _missing_moments(mis, zt, rp, data.pattern_missing[:, cols].astype(float), state.latent_cov)
        Wt_old = np.hstack([P.loadings, P.mean[:, None]])[cols]
        WS = np.einsum("dk,dkl->dl", Wt_old, S)
        num[cols] += WS
        ex2[cols] += np.einsum("dl,dl->d", WS, Wt_old) + mis.sum(axis=0) * P.psi[cols]
    Wt = cho_solve((cholesky(T, what="sum of E[z z^T]"), True), num.T).T
    resid = ex2 - np.einsum("dk,dk->d", Wt, num)
    psi = np.full(P.n_features, resid.sum() / (N * P.n_features)) if config.kind == "ppca" else resid / N
    new = FAParams.from_arrays(Wt[:, q], Wt[:, :q], np.maximum(psi, config.min_psi))
    return _state(data, state.iteration + 1, new)


def snapshot(state: FAState) -> dict:
    """Small summary of a state for the trace."""
    return {
        "iteration": state.iteration,
        "log_likelihood": state.log_likelihood,
        "mean_psi": float(state.params.psi.mean()),
        "min_psi": float(state.params.psi.min()),
    }


def fit(
    data: FAData,
    config: FAConfig,
    rng: np.random.Generator,
    *,
    callback: Callable[[FAState], None] | None = None,
    init_state: FAState | None = None,
) -> FAResult:
    """EM from :func:`init` (or ``init_state``) until the per-row log-likelihood change is below
    ``tol`` (``stop_reason="tol"``), ``max_iter`` steps, or a degenerate factorisation.

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
        change=lambda old, new: (new.log_likelihood - old.log_likelihood) / data.fit_rows.size,
        max_iter=config.max_iter,
        tol=config.tol,
        callback=callback,
    )
    return FAResult(out.state, out.stop_reason == "tol", out.stop_reason, out.message, out.state.iteration,
                    out.trace, config)


# ----------------------------------------------------------------------------- conditional
@dataclass(frozen=True, eq=False, slots=True)
class FAConditional:
    """:math:`p(x_m \\mid x_o)` of every row under a factor model (seed003 §1.2 [NOTE], seed004 4.3.14).

    .. math::

        x_m \\mid x_o \\sim N\\big(\\mu_m + W_m \\mu_{z|o},\\; W_m A_o^{-1} W_m^\\top + \\Psi_m\\big)

    Stored in O(nq + Uq^2): the latent means and one inverse Cholesky factor ``Linv`` of
    :math:`A_o` per pattern (:math:`A_o^{-1} = L^{-\\top}L^{-1}`); missing blocks are never formed.
    Build with :func:`conditional`.
    """

    values: np.ndarray  # (n, D), NaN at missing entries
    missing: np.ndarray  # (n, D)
    params: FAParams
    latent_mean: np.ndarray  # (n, q)
    chol_inv: np.ndarray  # (U, q, q)
    logdet_A: np.ndarray  # (U,)
    row_pattern: np.ndarray  # (n,)

    def mean(self) -> np.ndarray:
        """Conditional mean, observed entries copied bit for bit, shape (n, D)."""
        P = self.params
        return np.where(self.missing, P.mean + self.latent_mean @ P.loadings.T, self.values)

    def variance(self) -> np.ndarray:
        """Per-entry conditional variance :math:`\\mathrm{diag}(W_m A_o^{-1}W_m^\\top) + \\psi_m`; 0 if observed."""
        Linv = self.chol_inv
        var_u = _quadratic_diagonals(_gram_of_inverse(Linv), self.params.loadings) + self.params.psi
        return np.where(self.missing, var_u[self.row_pattern], 0.0)

    def interval(self, level: float = 0.95):
        """Equal-tailed Gaussian intervals ``(lower, upper)``, both (n, D); equal to the value if observed."""
        if not isinstance(level, (int, float, np.floating)) or not 0.0 < float(level) < 1.0:
            raise BadInputError(f"level must be a number strictly between 0 and 1, got {level!r}.")
        half = ndtri(0.5 + 0.5 * float(level)) * np.sqrt(self.variance())
        m = self.mean()
        return np.where(self.missing, m - half, m), np.where(self.missing, m + half, m)

    def sample(self, n_draws: int, rng: np.random.Generator) -> np.ndarray:
        """Draws :math:`x_m = \\mu_m + W_m z + \\varepsilon_m`, :math:`z \\sim N(\\mu_{z|o}, A_o^{-1})`,
        :math:`\\varepsilon \\sim N(0, \\Psi)`; shape (n_draws, n, D), observed entries copied."""
        if isinstance(n_draws, (bool, np.bool_)) or not isinstance(n_draws, (int, np.integer)) or n_draws < 1:
            raise BadInputError(f"n_draws must be a positive integer, got {n_draws!r}.")
        if not isinstance(rng, np.random.Generator):
            raise BadInputError("rng must be a numpy.random.Generator (np.random.default_rng(seed)).")
        P = self.params
        n, q = self.latent_mean.shape
        e = rng.standard_normal((n_draws, n, q))
        z = self.latent_mean + np.stack([_per_pattern(self.chol_inv, self.row_pattern, ed, transpose=True) for ed in e])
        x = P.mean + z @ P.loadings.T + np.sqrt(P.psi) * rng.standard_normal((n_draws, n, P.n_features))
        return np.where(self.missing, x, self.values)

    def logpdf(self, values) -> np.ndarray:
        """Joint log-density of each row's missing entries, shape (n,); 0 for complete rows.

        With :math:`A = I + W^\\top\\Psi^{-1}W` (all features), Woodbury and the determinant lemma
        give :math:`|C| = |\\Psi_m|\\,|A|/|A_o|` and
        :math:`C^{-1} = \\Psi_m^{-1} - \\Psi_m^{-1}W_m A^{-1} W_m^\\top\\Psi_m^{-1}` for the
        conditional covariance C: O(Dq) per row after one q x q Cholesky.
        """
        V = as_float_matrix(values, name="values")
        if V.shape != self.values.shape:
            raise BadInputError(f"values have shape {V.shape}; expected {self.values.shape}.")
        if np.isnan(V[self.missing]).any():
            raise BadInputError("values has NaN at missing entries; logpdf needs the complete values there.")
        P = self.params
        r = np.where(self.missing, V - self.mean(), 0.0)
        c = r @ (P.loadings / P.psi[:, None])
        Lf = cholesky(np.eye(P.n_factors) + P.loadings.T @ (P.loadings / P.psi[:, None]))
        logdet_full = 2.0 * np.log(np.diag(Lf)).sum()
        t = solve_triangular(Lf, c.T, lower=True)
        mis = self.missing.astype(float)
        logdet = mis @ np.log(P.psi) + logdet_full - self.logdet_A[self.row_pattern]
        quad = (r * r) @ (1.0 / P.psi) - np.einsum("kn,kn->n", t, t)
        out = -0.5 * (mis.sum(axis=1) * LOG_2PI + logdet + quad)
        return np.where(self.missing.any(axis=1), out, 0.0)

    def to_mixture(self):
        """The same conditional as a one-component :class:`~explorer.core.conditional.ConditionalMixture`
        (dense D x D conditioning of :math:`WW^\\top + \\Psi`; for small D, e.g. the density views)."""
        from .conditional import ConditionalMixture

        P = self.params
        return ConditionalMixture.from_gaussian_mixture(
            self.values, [1.0], P.mean[None], P.covariance()[None], missing=self.missing
        )


def conditional(model, X, missing=None) -> FAConditional:
    """Condition a factor model (:class:`FAParams`, :class:`FAState` or :class:`FAResult`) on every row.

    Parameters
    ----------
    model : FAParams, FAState or FAResult
    X : array-like of shape (n_samples, n_features)
        NaN = missing unless ``missing`` (bool, True = missing) is given; empty rows are allowed
        (they get the marginal :math:`N(\\mu, WW^\\top + \\Psi)`).
    """
    P = _as_params(model)
    values, miss, Xf = _check_rows(P, X, missing)
    pm, rp = _pattern_table(miss)
    y, Linv, logdet_A, _ = _posterior(Xf, miss, pm, rp, P)
    _readonly(values, miss, y, Linv, logdet_A, rp)
    return FAConditional(values, miss, P, y, Linv, logdet_A, rp)
