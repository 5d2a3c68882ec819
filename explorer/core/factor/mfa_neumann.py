r"""Encoding rows with missing entries under a mixture of factor analysers: exact and NSA-M.

For a fitted mixture (:mod:`explorer.core.factor.mfa`) and a row with observed set ``o``, every
component ``k`` has its own posterior mean of the factors :math:`\mu_{z|o,k} = A_{o,k}^{-1}u_k`,
:math:`u_k = W_{k,o}^\top\Psi_{k,o}^{-1}(x_o - \mu_{k,o})`, its reconstruction
:math:`\hat x_k = \mu_k + W_k\mu_{z|o,k}` (all pixels), and a responsibility on the visible pixels
(antypas2023 eqs. 2.47, 2.49, with the **corrected signs** of its erratum):

.. math::

    \log r_k = \log\pi_k - \tfrac12\big[|o|\log 2\pi + \log|\Psi_{k,o}| + \log|A_{o,k}|
        + r_k^\top\Psi_{k,o}^{-1}r_k\big] + \tfrac12\,u_k^\top\mu_{z|o,k} - \log Z,
    \qquad r_k = x_o - \mu_{k,o} .

The document's Algorithm 2 prints :math:`t_1 - t_2` (i.e. :math:`+\frac12 r^\top\Psi^{-1}r -
\frac12 u^\top\mu_z`), which would favour distant components; here :math:`-t_1 + t_2`.
:math:`r_k` is formed with the mask and the component's own mean (the digest's pitfall: a single
global mean imputation would give a wrong :math:`u_k`), :math:`\log|\Psi_{k,o}|` is summed over the
visible entries (never :math:`|M\Psi M| = 0`), and :math:`\log|A_{o,k}|` comes from a Cholesky
factor per pattern (Algorithm 2's ``d_i``; NSA-M saves no factorisation, as the thesis says).

* :func:`encode_exact` — the "exact solution mixture": every :math:`\mu_{z|o,k}` solved exactly.
* **NSA-M** (Algorithm 2) — :func:`prepare` / :func:`init` / :func:`step` / :func:`fit`: one
  :class:`~explorer.core.factor.neumann.NeumannProblem` per component, with its own scale
  :math:`s_k = \rho(I + W_k^\top\Psi_k^{-1}W_k) + \varepsilon`, batched over all rows; one step is one
  more term in every component. The responsibilities use the Neumann estimate
  :math:`y_k^{(l)}` in place of :math:`\mu_{z|o,k}` (eq. 3.45), so they converge to the exact ones.

Both give a :class:`MixtureEncoding`: per-component reconstructions with their responsibilities,
the responsibility-weighted imputation, the arg-max assignment, and
:meth:`MixtureEncoding.oracle_impute` — the thesis's error measure, which picks per row the
component closest **to the ground truth** (an oracle, not an imputation method).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from explorer.core.factor import neumann
from explorer.core.factor.fa_conditional import (
    _check_rows,
    _pattern_table,
    _precision_cholesky,
    _readonly,
    _SharedRows,
    component_posteriors,
)
from explorer.core.factor.mfa import MFAParams, _as_mfa
from explorer.core.factor.neumann import NeumannConfig
from explorer.core.gaussians.gaussian import LOG_2PI
from explorer.core.validation import BadInputError, as_float_matrix

__all__ = ["MixtureEncoding", "NSAMProblem", "NSAMState", "encode_exact", "encoding", "fit", "init", "prepare",
           "step"]

PIXELS = ("missing", "all")


# ----------------------------------------------------------------------------- the result
@dataclass(frozen=True, eq=False, slots=True)
class MixtureEncoding:
    """Per-component encodings of every row and the responsibilities on the visible entries.

    Attributes
    ----------
    params : MFAParams
    values, missing : ndarray of shape (n, D)
        The rows (NaN at missing entries) and their mask (True = missing).
    latent : ndarray of shape (K, n, q)
        :math:`\\mu_{z|o,k}` (exact) or its Neumann estimate :math:`y_k^{(l)}`.
    log_resp : ndarray of shape (n, K)
        Normalised log-responsibilities on the visible entries.
    method : str
        ``"exact"`` or ``"neumann"``.
    n_terms : int or None
        Neumann updates l (None for the exact encoding).
    """

    params: MFAParams
    values: np.ndarray
    missing: np.ndarray
    latent: np.ndarray
    log_resp: np.ndarray
    method: str
    n_terms: int | None = None

    @property
    def resp(self) -> np.ndarray:
        """Responsibilities, shape (n, K); rows sum to one."""
        return np.exp(self.log_resp)

    def assignments(self) -> np.ndarray:
        """Arg-max responsibility per row, shape (n,)."""
        return self.log_resp.argmax(axis=1)

    def reconstructions(self) -> np.ndarray:
        """Every component's reconstruction :math:`\\mu_k + W_k y_k` of every row (all pixels), (K, n, D)."""
        P = self.params
        return P.means[:, None, :] + np.einsum("knq,kdq->knd", self.latent, P.loadings)

    def component_imputations(self) -> np.ndarray:
        """Per-component imputations: missing entries from the reconstruction, observed copied, (K, n, D)."""
        return np.where(self.missing, self.reconstructions(), self.values)

    def imputation(self, *, keep_observed: bool = True) -> np.ndarray:
        """Responsibility-weighted reconstruction :math:`\\sum_k r_k\\hat x_k`, shape (n, D).

        With ``keep_observed`` (default) observed entries are copied bit for bit; without it every
        pixel is the weighted reconstruction (the digest's "all pixels" convention).
        """
        xhat = np.einsum("nk,knd->nd", self.resp, self.reconstructions())
        return np.where(self.missing, xhat, self.values) if keep_observed else xhat

    def oracle_impute(self, truth, *, pixels: str = "missing", keep_observed: bool = True):
        """**Oracle** (antypas2023 Table 2's error measure): per row, the component whose reconstruction is
        closest to the ground truth. It looks at ``truth``, so it is not an imputation method; use it only
        to reproduce the published numbers, and label it as an oracle wherever shown.

        Parameters
        ----------
        truth : array-like of shape (n, D)
            The complete rows.
        pixels : {"missing", "all"}
            Squared error over the missing entries only, or over every pixel of the reconstruction.
        keep_observed : bool
            Copy observed entries into the returned imputation.

        Returns
        -------
        imputation : ndarray of shape (n, D)
            The chosen component's reconstruction of each row.
        chosen : ndarray of shape (n,)
            The index of the chosen component.
        """
        if pixels not in PIXELS:
            raise BadInputError(f"pixels must be one of {PIXELS}, got {pixels!r}.")
        T = as_float_matrix(truth, name="truth")
        if T.shape != self.values.shape:
            raise BadInputError(f"truth has shape {T.shape}; expected {self.values.shape}.")
        sel = self.missing if pixels == "missing" else np.ones_like(self.missing)
        if np.isnan(T[sel]).any():
            raise BadInputError("truth has NaN where it is scored; the oracle needs the complete rows.")
        R = self.reconstructions()
        err = np.where(sel, (R - np.where(sel, T, 0.0)) ** 2, 0.0).sum(axis=2)  # (K, n)
        chosen = err.argmin(axis=0)
        best = R[chosen, np.arange(R.shape[1])]
        return (np.where(self.missing, best, self.values) if keep_observed else best), chosen


def encode_exact(model, X, missing=None) -> MixtureEncoding:
    """Exact per-component posterior means and responsibilities ("exact solution mixture")."""
    P = _as_mfa(model)
    values, miss, Xf = _check_rows(P.components[0], X, missing)
    pm, rp = _pattern_table(miss)
    post, log_resp, _ = component_posteriors(P.components, P.weights, Xf, miss, pm, rp)
    latent = np.stack([p[0] for p in post])
    _readonly(values, miss, latent, log_resp)
    return MixtureEncoding(P, values, miss, latent, log_resp, "exact")


# ----------------------------------------------------------------------------- NSA-M
@dataclass(frozen=True, eq=False, slots=True)
class NSAMProblem(_SharedRows):
    """Rows to encode under a mixture, prepared once (see :func:`prepare`); arrays read-only.

    Attributes
    ----------
    params : MFAParams
    components : tuple of NeumannProblem
        One per mixture component (its own u_k, scale s_k and per-row rho).
    log_prior_terms : ndarray of shape (n, K)
        Everything in :math:`\\log\\pi_k p(x_o \\mid k)` except :math:`+\\frac12 u_k^\\top y_k`:
        :math:`\\log\\pi_k - \\frac12[|o|\\log 2\\pi + \\log|\\Psi_{k,o}| + \\log|A_{o,k}|
        + r_k^\\top\\Psi_{k,o}^{-1}r_k]`.
    """

    params: MFAParams
    components: tuple
    log_prior_terms: np.ndarray

    @property
    def scales(self) -> np.ndarray:
        """:math:`s_k` per component, shape (K,)."""
        return np.array([p.scale for p in self.components])

    @property
    def rho(self) -> np.ndarray:
        """:math:`\\rho(I - A_{o,k}/s_k)` per component and row, shape (K, n)."""
        return np.stack([p.rho for p in self.components])


@dataclass(frozen=True, eq=False, slots=True)
class NSAMState:
    """Every component's Neumann state after ``n_terms`` updates."""

    n_terms: int
    components: tuple  # of NeumannState


def prepare(model, X, missing=None, *, eps: float = 1e-6, diagnostics: bool = True) -> NSAMProblem:
    """Validate rows and prepare one Neumann problem per component plus the responsibility terms.

    Parameters
    ----------
    model : MFAParams, MFAState or MFAResult
    X : array-like of shape (n, D)
        NaN = missing unless ``missing`` is given; rows with nothing observed are allowed.
    eps : float
        :math:`\\varepsilon` of every component's scale.
    diagnostics : bool
        Exact per-row rho (see :func:`explorer.core.factor.neumann.prepare`).
    """
    P = _as_mfa(model)
    probs = tuple(neumann.prepare(c, X, missing, eps=eps, diagnostics=diagnostics) for c in P.components)
    miss = probs[0].missing
    Xf = np.where(miss, 0.0, probs[0].values)
    obs = (~miss).astype(float)
    pm, rp = _pattern_table(miss)
    terms = np.empty((miss.shape[0], P.n_components))
    with np.errstate(divide="ignore"):
        log_w = np.log(P.weights)
    for k, c in enumerate(P.components):
        logdet_A = _precision_cholesky(~pm, c.loadings, c.psi)[1]
        r = np.where(miss, 0.0, Xf - c.mean)
        terms[:, k] = log_w[k] - 0.5 * (
            obs.sum(axis=1) * LOG_2PI + obs @ np.log(c.psi) + logdet_A[rp] + (r * r) @ (1.0 / c.psi)
        )
    terms.setflags(write=False)
    return NSAMProblem(P, probs, terms)


def init(problem: NSAMProblem) -> NSAMState:
    """:math:`y_k^{(0)} = u_k/s_k` in every component."""
    return NSAMState(0, tuple(neumann.init(p) for p in problem.components))


def step(state: NSAMState, problem: NSAMProblem) -> NSAMState:
    """One more Neumann term in every component; pure."""
    return NSAMState(state.n_terms + 1, tuple(neumann.step(s, p) for s, p in zip(state.components, problem.components)))


def _encoding(problem: NSAMProblem, latents, n_terms) -> MixtureEncoding:
    """Responsibilities (eq. 3.45, corrected signs) from the per-component latent estimates."""
    quad = np.stack([np.einsum("nq,nq->n", p.u, y) for p, y in zip(problem.components, latents)], axis=1)
    joint = problem.log_prior_terms + 0.5 * quad
    log_resp = joint - logsumexp(joint, axis=1, keepdims=True)
    latent = np.stack(latents)
    _readonly(latent, log_resp)
    return MixtureEncoding(problem.params, problem.values, problem.missing, latent, log_resp, "neumann", n_terms)


def encoding(problem: NSAMProblem, state: NSAMState) -> MixtureEncoding:
    """The :class:`MixtureEncoding` of a state (per-component :math:`y^{(l)}` and NSA-M responsibilities)."""
    return _encoding(problem, [s.latent for s in state.components], state.n_terms)


def fit(
    problem: NSAMProblem,
    config: NeumannConfig = NeumannConfig(),
    *,
    callback: Callable[[NSAMState], None] | None = None,
) -> MixtureEncoding:
    """Algorithm 2: ``config.n_terms`` Neumann updates in every component, then the responsibilities.

    With ``config.tol > 0`` every component stops early once all its rows' relative residuals are
    below ``tol``; with ``fallback="exact"`` rows still above it get the exact solve (as in
    :func:`explorer.core.factor.neumann.fit`). ``callback`` sees the joint state after every term (when given,
    all components run the full ``n_terms`` without early stopping or fallback).
    """
    if not isinstance(config, NeumannConfig):
        raise BadInputError(f"config must be a NeumannConfig, got {type(config).__name__}.")
    if callback is not None:
        state = init(problem)
        for _ in range(config.n_terms):
            state = step(state, problem)
            callback(state)
        return encoding(problem, state)
    results = [neumann.fit(p, config) for p in problem.components]
    return _encoding(problem, [r.latent for r in results], max(r.n_terms for r in results))

