r"""Encoders of rows with missing entries under a factor model, and the scaled Neumann series (NSA).

Given a factor model (:math:`\mu`, :math:`W` (D x q), diagonal :math:`\Psi`) and a row whose
observed set is ``o``, every encoder estimates the posterior mean of the factors (antypas2023 §1.2-1.3)

.. math::

    \mu_{z|x_o} = A^{-1} u, \qquad A = I_q + W_o^\top\Psi_o^{-1}W_o, \qquad
    u = W_o^\top\Psi_o^{-1}(x_o - \mu_o) = W^\top\Psi^{-1}(x^{mi} - \mu)

(the last form is the digest's identity 2.19: mean imputation leaves the right-hand side unchanged).

* :func:`encode_exact` — the WNN18 exact solution (2.15-2.16): one Cholesky of A per pattern.
* :func:`encode_fca` — full-covariance approximation (2.20): :math:`(I + W^\top\Psi^{-1}W)^{-1}u` for every row.
* :func:`encode_sca` — scaled-covariance approximation (2.22):
  :math:`[(D_m/D) I + (D_o/D)(I + W^\top\Psi^{-1}W)]^{-1}u`, one eigendecomposition in total.
* :func:`mean_impute` — the MI baseline: :math:`x^{mi}` itself (it has no latent encoding).
* NSA (§1.5-1.7, Algorithm 1) — :func:`prepare` / :func:`init` / :func:`step` / :func:`fit`.
  With the scale :math:`s = \rho(I + W^\top\Psi^{-1}W) + \varepsilon`, computed once for all masks
  (:math:`\rho(A) \le \rho(I + W^\top\Psi^{-1}W)` by interlacing, §1.7), the iteration

  .. math:: y^{(l+1)} = (I - A/s)\,y^{(l)} + u/s, \qquad y^{(0)} = u/s

  gives :math:`y^{(l)} = \frac1s\sum_{j=0}^{l}(I - A/s)^j u \to A^{-1}u` (the digest's
  :math:`y^{(l)}/s`; here the ``1/s`` is folded into ``u`` so ``y`` is the encoding itself).
  One step is one more term, applied matrix-free to all rows at once:
  :math:`Av = v + W^\top(m \odot \psi^{-1} \odot (Wv))`, O(Dq) per row.

Diagnostics per row: the spectral radius :math:`\rho = \rho(I - A/s) = 1 - \lambda_{\min}(A)/s`
(the eigenvalues of I - A/s lie in [0, 1 - 1/s] because :math:`1 \le \lambda(A) \le s`), exact from
``eigvalsh`` of the q x q matrices; the a-priori bound

.. math:: \|y^{(l)} - \mu_{z|x_o}\| \le \frac{\rho^{\,l+1}}{1-\rho}\,\frac{\|u\|}{s}

(the digest's eq. 3.19 with its off-by-one corrected: :math:`y^* - y^{(l)} = (I-A/s)^{l+1}y^*` and
:math:`\|y^*\| \le \|u\|/\lambda_{\min}(A)`); the a-posteriori bound :math:`\|r\|/\lambda_{\min}(A)`; and
the relative residual :math:`\|u - Ay^{(l)}\| / \|u\|`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.linalg import cho_solve
from scipy.linalg.lapack import dsyevd as syevd

from explorer.core.factor.fa_conditional import (
    FAParams,
    _as_params,
    _check_rows,
    _latent_precisions,
    _pattern_table,
    _posterior,
)
from explorer.core.gaussians.gaussian import cholesky
from explorer.core.validation import BadInputError

__all__ = [
    "FALLBACKS", "METHODS", "NeumannConfig", "NeumannProblem", "NeumannResult", "NeumannState", "decode",
    "encode_exact", "encode_fca", "encode_neumann", "encode_sca", "fit", "init", "mean_impute", "prepare",
    "reconstruct", "spectral_scale", "step",
]

FALLBACKS = ("none", "exact")
METHODS = ("mean", "fca", "sca", "exact", "neumann")


def _rhs(params: FAParams, X, missing):
    """Validated rows and :math:`u = W_o^\\top\\Psi_o^{-1}(x_o - \\mu_o)`: ``(values, missing, Xf, u)``."""
    values, miss, Xf = _check_rows(params, X, missing)
    u = np.where(miss, 0.0, Xf - params.mean) @ (params.loadings / params.psi[:, None])
    return values, miss, Xf, u


def _complete_precision(params: FAParams) -> np.ndarray:
    """:math:`P = I + W^\\top\\Psi^{-1}W`, shape (q, q)."""
    W = params.loadings
    return np.eye(W.shape[1]) + W.T @ (W / params.psi[:, None])


def spectral_scale(model, eps: float = 1e-6) -> float:
    """The NSA scale :math:`s = \\rho(I + W^\\top\\Psi^{-1}W) + \\varepsilon` (antypas2023 eq. 3.24).

    For PPCA with the closed-form W this is :math:`\\lambda_1/\\sigma^2 + \\varepsilon`.
    """
    if not (isinstance(eps, (int, float, np.floating)) and eps >= 0):
        raise BadInputError(f"eps must be a non-negative number, got {eps!r}.")
    return float(np.linalg.eigvalsh(_complete_precision(_as_params(model)))[-1] + eps)


# ----------------------------------------------------------------------------- direct encoders
def encode_exact(model, X, missing=None) -> np.ndarray:
    """Exact posterior means :math:`A^{-1}u` (antypas2023 eqs. 2.15-2.16), shape (n, q).

    Batched by missingness pattern: :math:`A = LL^\\top` is formed and factored once per distinct
    pattern (one GEMM for all patterns' :math:`W_o^\\top\\Psi_o^{-1}W_o`, a batched Cholesky, LAPACK
    ``trtri`` for :math:`L^{-1}`), then :math:`y = L^{-\\top}(L^{-1}u)` for all rows of the pattern.
    ``model`` is FAParams / FAState / FAResult; ``X`` has NaN at missing entries (or pass
    ``missing``, True = missing). Rows with nothing observed get 0.
    """
    P = _as_params(model)
    _, miss, Xf = _check_rows(P, X, missing)
    pm, rp = _pattern_table(miss)
    return _posterior(Xf, miss, pm, rp, P)[0]


def encode_fca(model, X, missing=None) -> np.ndarray:
    """Full-covariance approximation (antypas2023 eq. 2.20): :math:`(I + W^\\top\\Psi^{-1}W)^{-1}u`, shape (n, q)."""
    P = _as_params(model)
    u = _rhs(P, X, missing)[3]
    return cho_solve((cholesky(_complete_precision(P)), True), u.T).T


def encode_sca(model, X, missing=None) -> np.ndarray:
    """Scaled-covariance approximation (antypas2023 eq. 2.22), shape (n, q).

    :math:`[(D_m/D) I + (D_o/D) P]^{-1}u` with :math:`P = Q\\Lambda Q^\\top` diagonalised once:
    :math:`Q\\,\\mathrm{diag}(1/(D_m/D + (D_o/D)\\lambda_k))\\,Q^\\top u`.
    """
    P = _as_params(model)
    _, miss, _, u = _rhs(P, X, missing)
    lam, Q = np.linalg.eigh(_complete_precision(P))
    frac_obs = 1.0 - miss.mean(axis=1, keepdims=True)
    return ((u @ Q) / ((1.0 - frac_obs) + frac_obs * lam)) @ Q.T


def mean_impute(model, X, missing=None) -> np.ndarray:
    """The MI baseline :math:`x^{mi}`: missing entries set to :math:`\\mu`, observed ones kept, (n, D)."""
    P = _as_params(model)
    values, miss, _ = _check_rows(P, X, missing)
    return np.where(miss, P.mean, values)


def decode(model, latent) -> np.ndarray:
    """Reconstruction :math:`\\hat x = \\mu + W y` of every row (all pixels), shape (n, D)."""
    P = _as_params(model)
    y = np.asarray(latent, dtype=float)
    if y.ndim != 2 or y.shape[1] != P.n_factors:
        raise BadInputError(f"latent must have shape (n, {P.n_factors}); got {y.shape}.")
    return P.mean + y @ P.loadings.T


# ----------------------------------------------------------------------------- NSA
@dataclass(frozen=True, slots=True)
class NeumannConfig:
    """Settings of :func:`fit`.

    Parameters
    ----------
    n_terms : int
        Number l of Neumann updates (l + 1 terms of the series), >= 0.
    tol : float
        Stop early when every row's relative residual :math:`\\|u - Ay\\|/\\|u\\|` is below ``tol``
        (0 disables the check).
    fallback : {"none", "exact"}
        ``"exact"``: rows still above ``tol`` after ``n_terms`` get the exact solve (reported in
        ``NeumannResult.fell_back``); needs ``tol > 0``.
    """

    n_terms: int = 100
    tol: float = 0.0
    fallback: str = "none"

    def __post_init__(self):
        if isinstance(self.n_terms, (bool, np.bool_)) or not isinstance(self.n_terms, (int, np.integer)) or self.n_terms < 0:
            raise BadInputError(f"n_terms must be a non-negative integer, got {self.n_terms!r}.")
        if not (isinstance(self.tol, (int, float, np.floating)) and self.tol >= 0):
            raise BadInputError(f"tol must be a non-negative number, got {self.tol!r}.")
        if self.fallback not in FALLBACKS:
            raise BadInputError(f"fallback must be one of {FALLBACKS}, got {self.fallback!r}.")
        if self.fallback == "exact" and self.tol == 0:
            raise BadInputError("fallback='exact' needs tol > 0 (rows above tol fall back to the exact solve).")


@dataclass(frozen=True, eq=False, slots=True)
class NeumannProblem:
    """Rows to encode, prepared once (see :func:`prepare`); arrays read-only.

    Attributes
    ----------
    params : FAParams
    values, missing : ndarray of shape (n, D)
    weights : ndarray of shape (n, D)
        :math:`m_j/\\psi_j` (0 at missing entries): the masked precision applied by :math:`A`.
    u : ndarray of shape (n, q)
        Right-hand sides :math:`W_o^\\top\\Psi_o^{-1}(x_o - \\mu_o)`.
    scale : float
        s, the same for every row.
    rho : ndarray of shape (n,)
        :math:`\\rho(I - A/s)` per row: exact when ``rho_exact``, else the universal bound 1 - 1/s.
    lambda_min : ndarray of shape (n,)
        :math:`\\lambda_{\\min}(A)` per row (1, its lower bound, when not ``rho_exact``).
    """

    params: FAParams
    values: np.ndarray
    missing: np.ndarray
    weights: np.ndarray
    u: np.ndarray
    scale: float
    rho: np.ndarray
    lambda_min: np.ndarray
    rho_exact: bool

    @property
    def u_norm(self) -> np.ndarray:
        return np.linalg.norm(self.u, axis=1)

    def apply_A(self, V: np.ndarray) -> np.ndarray:
        """Matrix-free :math:`A v = v + W^\\top(m\\odot\\psi^{-1}\\odot(Wv))` for every row of V (n, q)."""
        W = self.params.loadings
        return V + ((V @ W.T) * self.weights) @ W

    def bound(self, n_terms: int) -> np.ndarray:
        """A-priori error bound :math:`\\rho^{l+1}\\|u\\|/(s(1-\\rho))` after ``n_terms`` = l updates, (n,)."""
        return self.rho ** (n_terms + 1) * self.u_norm / (self.scale * (1.0 - self.rho))


def _eigvalsh(A: np.ndarray) -> np.ndarray:
    """Ascending eigenvalues of every symmetric matrix in (U, q, q): a loop over LAPACK ``syevd``
    (divide and conquer; on this stack several times faster than batched ``np.linalg.eigvalsh``)."""
    return np.array([syevd(a, compute_v=0)[0] for a in A]).reshape(A.shape[:2])


def prepare(model, X, missing=None, *, eps: float = 1e-6, diagnostics: bool = True) -> NeumannProblem:
    """Validate rows, compute the right-hand sides, the scale s and (optionally) the exact per-row rho.

    Parameters
    ----------
    model : FAParams, FAState or FAResult
    X : array-like of shape (n, D)
        NaN = missing unless ``missing`` is given. Rows with nothing observed are allowed (u = 0).
    eps : float
        :math:`\\varepsilon` in :math:`s = \\rho(I + W^\\top\\Psi^{-1}W) + \\varepsilon` (>= 0).
    diagnostics : bool
        Form :math:`A` per distinct pattern and take its eigenvalues (O(U(Dq^2 + q^3))) for the exact
        per-row rho. Without it, rho is the mask-independent bound 1 - 1/s (the timing benchmarks
        switch it off: the iteration itself never forms A).
    """
    P = _as_params(model)
    values, miss, _, u = _rhs(P, X, missing)
    s = spectral_scale(P, eps)
    weights = np.where(miss, 0.0, 1.0 / P.psi)
    n = values.shape[0]
    if diagnostics:
        pm, rp = _pattern_table(miss)
        A = _latent_precisions(~pm, P.loadings, P.psi)
        lam = _eigvalsh(A)  # ascending, (U, q)
        lam_min = lam[:, 0][rp]
        rho = np.maximum(np.abs(1.0 - lam[:, 0] / s), np.abs(1.0 - lam[:, -1] / s))[rp]
    else:
        lam_min, rho = np.ones(n), np.full(n, 1.0 - 1.0 / s)
    for a in (values, miss, weights, u, rho, lam_min):
        a.setflags(write=False)
    return NeumannProblem(P, values, miss, weights, u, s, rho, lam_min, bool(diagnostics))


@dataclass(frozen=True, eq=False, slots=True)
class NeumannState:
    """The encodings after ``n_terms`` updates.

    ``latent`` (n, q) is :math:`y^{(l)}`; ``residual`` (n, q) is :math:`u - Ay^{(l)}` (carried by the
    recurrence :math:`r^{(l+1)} = (I - A/s)r^{(l)}`, one application of A per step).
    """

    n_terms: int
    latent: np.ndarray
    residual: np.ndarray

    def relative_residual(self, problem: NeumannProblem) -> np.ndarray:
        """:math:`\\|u - Ay\\|/\\|u\\|` per row, shape (n,) (0 for rows with u = 0)."""
        un = problem.u_norm
        return np.linalg.norm(self.residual, axis=1) / np.where(un > 0, un, 1.0)

    def error_bound(self, problem: NeumannProblem) -> np.ndarray:
        """A-priori bound on :math:`\\|y^{(l)} - A^{-1}u\\|` per row (see the module docstring)."""
        return problem.bound(self.n_terms)

    def posterior_bound(self, problem: NeumannProblem) -> np.ndarray:
        """A-posteriori bound :math:`\\|u - Ay\\|/\\lambda_{\\min}(A)` per row."""
        return np.linalg.norm(self.residual, axis=1) / problem.lambda_min


def _frozen_state(n_terms, y, r) -> NeumannState:
    y.setflags(write=False)
    r.setflags(write=False)
    return NeumannState(int(n_terms), y, r)


def init(problem: NeumannProblem) -> NeumannState:
    """:math:`y^{(0)} = u/s` (the first term of the series)."""
    y = problem.u / problem.scale
    return _frozen_state(0, y, problem.u - problem.apply_A(y))


def step(state: NeumannState, problem: NeumannProblem) -> NeumannState:
    """One more term: :math:`y \\leftarrow (I - A/s)y + u/s = y + r/s`, :math:`r \\leftarrow r - Ar/s`; pure."""
    r = state.residual
    return _frozen_state(state.n_terms + 1, state.latent + r / problem.scale, r - problem.apply_A(r) / problem.scale)


@dataclass(frozen=True, eq=False, slots=True)
class NeumannResult:
    """Outcome of :func:`fit`.

    ``latent`` (n, q) are the final encodings (exact solves on the ``fell_back`` rows), ``state``
    the last NSA state (before any fallback), ``stop_reason`` ``"tol"`` (every row below ``tol``)
    or ``"n_terms"``; ``trace`` one dict per state (``n_terms``, max/mean relative residual, max bound).
    """

    latent: np.ndarray
    state: NeumannState
    problem: NeumannProblem
    fell_back: np.ndarray
    stop_reason: str
    n_terms: int
    trace: tuple
    config: NeumannConfig

    @property
    def relative_residual(self) -> np.ndarray:
        """Relative residual of the returned encodings (0 on the rows that fell back)."""
        return np.where(self.fell_back, 0.0, self.state.relative_residual(self.problem))

    def reconstruction(self) -> np.ndarray:
        """:math:`\\mu + W y` for every row (all pixels, as in the digest), shape (n, D)."""
        return decode(self.problem.params, self.latent)

    def imputation(self) -> np.ndarray:
        """Missing entries from the reconstruction, observed entries copied bit for bit, (n, D)."""
        return np.where(self.problem.missing, self.reconstruction(), self.problem.values)


def _snap(state: NeumannState, problem: NeumannProblem) -> dict:
    rel = state.relative_residual(problem)
    return {"n_terms": state.n_terms, "max_residual": float(rel.max(initial=0.0)),
            "mean_residual": float(rel.mean()) if rel.size else 0.0,
            "max_bound": float(problem.bound(state.n_terms).max(initial=0.0))}


def fit(
    problem: NeumannProblem,
    config: NeumannConfig = NeumannConfig(),
    *,
    callback: Callable[[NeumannState], None] | None = None,
) -> NeumannResult:
    """Run up to ``config.n_terms`` updates from :func:`init`, stopping early when every row's relative
    residual is below ``config.tol``; optionally fall back to the exact solve on the rows that did not
    converge (honestly reported in ``fell_back``)."""
    if not isinstance(config, NeumannConfig):
        raise BadInputError(f"config must be a NeumannConfig, got {type(config).__name__}.")
    state = init(problem)
    trace = [_snap(state, problem)]
    stop = "n_terms"
    for _ in range(config.n_terms + 1):
        if config.tol > 0 and np.all(state.relative_residual(problem) < config.tol):
            stop = "tol"
            break
        if state.n_terms == config.n_terms:
            break
        state = step(state, problem)
        trace.append(_snap(state, problem))
        if callback is not None:
            callback(state)
    fell_back = np.zeros(problem.u.shape[0], dtype=bool)
    latent = np.array(state.latent)
    if config.fallback == "exact" and stop != "tol":
        fell_back = state.relative_residual(problem) >= config.tol
        if fell_back.any():
            rows = np.flatnonzero(fell_back)
            latent[rows] = encode_exact(problem.params, problem.values[rows], problem.missing[rows])
    latent.setflags(write=False)
    fell_back.setflags(write=False)
    return NeumannResult(latent, state, problem, fell_back, stop, state.n_terms, tuple(trace), config)


def encode_neumann(model, X, missing=None, *, n_terms: int = 100, tol: float = 0.0, eps: float = 1e-6,
                   fallback: str = "none") -> np.ndarray:
    """NSA encodings :math:`y^{(l)}` in one call (no diagnostics), shape (n, q)."""
    config = NeumannConfig(n_terms, tol, fallback)
    return fit(prepare(model, X, missing, eps=eps, diagnostics=False), config).latent


def reconstruct(model, X, missing=None, *, method: str = "exact", n_terms: int = 100, eps: float = 1e-6,
                keep_observed: bool = True) -> np.ndarray:
    """Impute every row with one of :data:`METHODS`, shape (n, D).

    ``"mean"`` is :math:`x^{mi}`; the others decode their encoding, :math:`\\mu + Wy`. With
    ``keep_observed`` (default) observed entries are copied bit for bit; without it every pixel is
    the reconstruction (the digest's convention, §1.2 [NOTE]; MI keeps the observed pixels either way).
    """
    if method not in METHODS:
        raise BadInputError(f"method must be one of {METHODS}, got {method!r}.")
    P = _as_params(model)
    if method == "mean":
        return mean_impute(P, X, missing)
    encoders = {"fca": encode_fca, "sca": encode_sca, "exact": encode_exact}
    if method == "neumann":
        y = encode_neumann(P, X, missing, n_terms=n_terms, eps=eps)
    else:
        y = encoders[method](P, X, missing)
    xhat = decode(P, y)
    if not keep_observed:
        return xhat
    values, miss, _ = _check_rows(P, X, missing)
    return np.where(miss, xhat, values)
