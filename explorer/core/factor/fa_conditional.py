r"""A factor model conditioned on the observed entries of every row.

Shared by :mod:`explorer.core.factor.factor_analysis` (one factor analyser / PPCA),
:mod:`explorer.core.factor.mfa` (mixtures) and :mod:`explorer.core.factor.neumann` (encoders):

* :class:`FAParams`: :math:`\mu` (D,), :math:`W` (D, q), diagonal :math:`\Psi` (D,), so that
  :math:`x \sim N(\mu, WW^\top + \Psi)`;
* the batched E-step kernel: the posterior of the factors given the observed entries ``o``
  (antypas2023 eqs. 2.12-2.13, marlin2008 4.3)

  .. math::

      A_o = I_q + W_o^\top \Psi_o^{-1} W_o, \quad
      \Sigma_{z|o} = A_o^{-1}, \quad
      \mu_{z|o} = A_o^{-1} W_o^\top \Psi_o^{-1}(x_o - \mu_o),

  with one Cholesky factor of :math:`A_o` per distinct missingness pattern (no ``D x D`` matrix
  is ever factored), and the observed-data log-likelihood from Woodbury and the determinant
  lemma (antypas2023 eqs. 2.39, 2.44, 2.47 with the **corrected signs** of its erratum):

  .. math::

      \log N(x_o; \mu_o, \Sigma_{oo}) = -\tfrac12\big[|o|\log 2\pi + \log|\Psi_o| + \log|A_o|
          + r^\top\Psi_o^{-1} r - b^\top \mu_{z|o}\big], \quad r = x_o - \mu_o,\ b = W_o^\top\Psi_o^{-1} r ;

* :class:`FAConditional` (:func:`conditional`): :math:`p(x_m \mid x_o)` of every row, and
  :class:`MFAConditional`: the same for a mixture of factor analysers, a Gaussian mixture per
  row whose weights are the responsibilities given the observed entries (marlin2008 4.4.13).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import solve_triangular
from scipy.linalg.lapack import dtrtri as trtri
from scipy.special import logsumexp, ndtri

from explorer.core.gaussians.gaussian import LOG_2PI, cholesky, normal_logpdf
from explorer.core.gaussians.patterns import group_patterns
from explorer.core.validation import BadInputError, as_float_matrix, check_draws, check_level, check_missing_matches_nan

__all__ = [
    "FAConditional", "FAParams", "MFAConditional", "component_posteriors", "conditional", "log_likelihood",
    "mix_log_likelihoods", "mixture_conditional",
]

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


def _latent_precisions(pattern_obs: np.ndarray, W: np.ndarray, psi: np.ndarray) -> np.ndarray:
    """:math:`A_o = I + W_o^\\top\\Psi_o^{-1}W_o` for every row of ``pattern_obs`` (U, D; 1 = observed): (U, q, q)."""
    A = _masked_gram(pattern_obs / psi, W)
    A[:, np.arange(W.shape[1]), np.arange(W.shape[1])] += 1.0
    return A


def _precision_cholesky(pattern_obs: np.ndarray, W: np.ndarray, psi: np.ndarray):
    """Per pattern: Cholesky factor ``L`` of :math:`A_o` (U, q, q) and :math:`\\log|A_o|` (U,)."""
    L = cholesky(_latent_precisions(pattern_obs, W, psi), what="latent posterior precision I + W_o^T Psi_o^-1 W_o")
    return L, 2.0 * np.log(np.diagonal(L, axis1=1, axis2=2)).sum(axis=1)


def _posterior(Xf, missing, pattern_missing, row_pattern, params: FAParams):
    """E-step kernel: ``(latent_mean (n, q), Linv (U, q, q), logdet_A (U,), loglik (n,))``.

    ``Xf`` holds any finite value at missing entries; rows with nothing observed get the prior
    (mean 0, covariance I) and log-likelihood 0.
    """
    mu, W, psi = params.mean, params.loadings, params.psi
    L, logdet_A = _precision_cholesky((~pattern_missing).astype(float), W, psi)
    Linv = _tril_inverse(L)
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


# ----------------------------------------------------------------------------- conditional
@dataclass(frozen=True, eq=False, slots=True)
class FAConditional:
    """:math:`p(x_m \\mid x_o)` of every row under a factor model (antypas2023 §1.2 [NOTE], marlin2008 4.3.14).

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

    def entry_logpdf(self, truth, hidden) -> np.ndarray:
        """:math:`\\log p(x_{ij} \\mid x_i^o)` at ``truth`` of every entry where ``hidden`` is True, row-major order.

        Exact: each entry's marginal is Gaussian. The entries where ``hidden`` is True must be missing in this
        conditional (``truth`` and ``hidden`` of shape (n_samples, n_features)).
        :func:`explorer.evaluation.entry_logpdf` scores held-out entries with it.
        """
        ri, ci = np.nonzero(hidden)
        x = np.asarray(truth, dtype=np.float64)[ri, ci]
        return normal_logpdf(x, self.mean()[ri, ci], self.variance()[ri, ci])

    def interval(self, level: float = 0.95):
        """Equal-tailed Gaussian intervals ``(lower, upper)``, both (n, D); equal to the value if observed."""
        level = check_level(level)
        half = ndtri(0.5 + 0.5 * float(level)) * np.sqrt(self.variance())
        m = self.mean()
        return np.where(self.missing, m - half, m), np.where(self.missing, m + half, m)

    def sample(self, n_draws: int, rng: np.random.Generator) -> np.ndarray:
        """Draws :math:`x_m = \\mu_m + W_m z + \\varepsilon_m`, :math:`z \\sim N(\\mu_{z|o}, A_o^{-1})`,
        :math:`\\varepsilon \\sim N(0, \\Psi)`; shape (n_draws, n, D), observed entries copied."""
        check_draws(n_draws, rng)
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
        """The same conditional as a one-component :class:`~explorer.core.gaussians.conditional.ConditionalMixture`
        (dense D x D conditioning of :math:`WW^\\top + \\Psi`; for small D, e.g. the density views)."""
        from explorer.core.gaussians.conditional import ConditionalMixture

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


# ----------------------------------------------------------------------------- mixtures
class _SharedRows:
    """``values`` / ``missing`` of a per-component bundle: those of ``components[0]`` (all share the rows)."""

    __slots__ = ()
    values = property(lambda self: self.components[0].values, doc="(n, D), NaN at missing entries.")
    missing = property(lambda self: self.components[0].missing, doc="(n, D) bool, True = missing.")


@dataclass(frozen=True, eq=False, slots=True)
class MFAConditional(_SharedRows):
    """:math:`p(x_m \\mid x_o)` of every row under a mixture of factor analysers (marlin2008 4.4.13).

    .. math::

        p(x_m \\mid x_o) = \\sum_k h_{nk}\\, N\\big(\\mu_{k,m} + W_{k,m}\\mu_{z|o,k},\\;
            W_{k,m} A_{o,k}^{-1} W_{k,m}^\\top + \\Psi_{k,m}\\big), \\qquad
        h_{nk} \\propto \\pi_k N(x_o; \\mu_{k,o}, \\Sigma_{k,oo})

    (the responsibilities on the observed entries, correct signs; rows with nothing observed get
    :math:`h_{nk} = \\pi_k`). Build with :func:`mixture_conditional` or
    :func:`explorer.core.factor.mfa.conditional`.

    Attributes
    ----------
    components : tuple of FAConditional
        One per mixture component, all on the same rows.
    weights : ndarray of shape (K,)
        Prior mixture weights :math:`\\pi_k`.
    log_resp : ndarray of shape (n, K)
        :math:`\\log h_{nk}`.
    """

    components: tuple
    weights: np.ndarray
    log_resp: np.ndarray

    @property
    def n_components(self) -> int:
        return len(self.components)

    @property
    def resp(self) -> np.ndarray:
        """Responsibilities :math:`h_{nk}`, shape (n, K); rows sum to one."""
        return np.exp(self.log_resp)

    def component_means(self) -> np.ndarray:
        """Each component's conditional mean (observed entries copied), shape (K, n, D)."""
        return np.stack([c.mean() for c in self.components])

    def mean(self) -> np.ndarray:
        """Responsibility-weighted conditional mean :math:`\\sum_k h_{nk}\\hat x_{nk}`, (n, D); observed copied."""
        m = np.einsum("nk,knd->nd", self.resp, self.component_means())
        return np.where(self.missing, m, self.values)

    def variance(self) -> np.ndarray:
        """Per-entry variance by the law of total variance, (n, D); 0 at observed entries."""
        M = self.component_means()
        dev = M - np.einsum("nk,knd->nd", self.resp, M)[None]
        V = np.stack([c.variance() for c in self.components])
        var = np.einsum("nk,knd->nd", self.resp, V + dev * dev)
        return np.where(self.missing, np.maximum(var, 0.0), 0.0)

    def entry_logpdf(self, truth, hidden) -> np.ndarray:
        """:math:`\\log p(x_{ij} \\mid x_i^o)` at ``truth`` of every entry where ``hidden`` is True, row-major order.

        Exact: each entry's marginal is a 1-D Gaussian mixture weighted by the responsibilities. The entries where
        ``hidden`` is True must be missing in this conditional (``truth`` and ``hidden`` of shape (n_samples,
        n_features)). :func:`explorer.evaluation.entry_logpdf` scores held-out entries with it.
        """
        ri, ci = np.nonzero(hidden)
        x = np.asarray(truth, dtype=np.float64)[ri, ci]
        comp = np.stack([normal_logpdf(x, c.mean()[ri, ci], c.variance()[ri, ci]) for c in self.components])
        return logsumexp(self.log_resp[ri].T + comp, axis=0)

    def interval(self, level: float = 0.95):
        """Equal-tailed intervals of every missing entry's 1-D marginal mixture ``(lower, upper)``, (n, D)."""
        from explorer.core.gaussians.conditional import quantile_of_mixtures

        level = check_level(level)
        lower, upper = self.values.copy(), self.values.copy()
        ri, ci = np.nonzero(self.missing)
        if ri.size:
            M = self.component_means()[:, ri, ci]
            S = np.sqrt(np.stack([c.variance()[ri, ci] for c in self.components]))
            W = self.resp[ri].T
            lower[ri, ci] = quantile_of_mixtures(W, M, S, 0.5 * (1.0 - float(level)))
            upper[ri, ci] = quantile_of_mixtures(W, M, S, 0.5 * (1.0 + float(level)))
        return lower, upper

    def sample(self, n_draws: int, rng: np.random.Generator) -> np.ndarray:
        """Draws: a component :math:`k \\sim \\mathrm{Cat}(h_n)` per draw and row, then that component's
        conditional Gaussian; shape (n_draws, n, D), observed entries copied."""
        check_draws(n_draws, rng)
        n = self.log_resp.shape[0]
        cum = np.cumsum(self.resp, axis=1)
        u = rng.random((n_draws, n))
        comp = (u[..., None] >= cum[None, :, :-1]).sum(axis=2)
        out = np.empty((n_draws, n, self.values.shape[1]))
        for k, c in enumerate(self.components):
            sel = comp == k
            if sel.any():
                out[sel] = c.sample(n_draws, rng)[sel]
        return np.where(self.missing, out, self.values)

    def logpdf(self, values) -> np.ndarray:
        """:math:`\\log\\sum_k h_{nk} N(x_m; \\cdot)` of each row's true missing block, (n,); 0 if complete."""
        lp = np.stack([c.logpdf(values) for c in self.components], axis=1)
        out = logsumexp(self.log_resp + lp, axis=1)
        return np.where(self.missing.any(axis=1), out, 0.0)

    def to_mixture(self):
        """The same conditional as a dense :class:`~explorer.core.gaussians.conditional.ConditionalMixture`
        (small D)."""
        from explorer.core.gaussians.conditional import ConditionalMixture

        P = [c.params for c in self.components]
        return ConditionalMixture.from_gaussian_mixture(
            self.values, self.weights, np.stack([p.mean for p in P]), np.stack([p.covariance() for p in P]),
            missing=self.missing,
        )


def component_posteriors(components, weights, Xf, missing, pattern_missing, row_pattern):
    """Per-component E-step kernels and the responsibilities on the observed entries.

    Returns ``(posteriors, log_resp (n, K), loglik (n,))``: ``posteriors[k]`` is
    :func:`_posterior`'s ``(latent_mean, Linv, logdet_A, loglik_k)``; ``loglik`` the mixture's
    observed-data log-likelihood per row (0 for rows with nothing observed, whose responsibilities
    are the prior weights).
    """
    post = [_posterior(Xf, missing, pattern_missing, row_pattern, P) for P in components]
    return (post, *mix_log_likelihoods([p[3] for p in post], weights, missing))


def mix_log_likelihoods(component_loglik, weights, missing):
    """``(log_resp (n, K), loglik (n,))`` of a mixture from its components' per-row log-likelihoods (a sequence of
    K arrays (n,)); ``loglik`` is 0 for rows with nothing observed, whose responsibilities are the weights."""
    with np.errstate(divide="ignore"):
        joint = np.stack(list(component_loglik), axis=1) + np.log(weights)
    ll = logsumexp(joint, axis=1)
    log_resp = joint - ll[:, None]
    ll[missing.all(axis=1)] = 0.0
    return log_resp, ll


def mixture_conditional(components, weights, X, missing=None) -> MFAConditional:
    """Condition a mixture of factor analysers on every row.

    Parameters
    ----------
    components : sequence of FAParams
        The K components (same D).
    weights : array-like of shape (K,)
        Mixture weights (non-negative, summing to one).
    X : array-like of shape (n, D)
        NaN = missing unless ``missing`` is given; rows with nothing observed are allowed.
    """
    comps = [_as_params(c) for c in components]
    w = np.array(weights, dtype=float)
    if w.shape != (len(comps),) or np.any(w < 0) or not np.isclose(w.sum(), 1.0):
        raise BadInputError(f"weights must be {len(comps)} non-negative numbers summing to one; got {w!r}.")
    values, miss, Xf = _check_rows(comps[0], X, missing)
    pm, rp = _pattern_table(miss)
    post, log_resp, _ = component_posteriors(comps, w, Xf, miss, pm, rp)
    _readonly(values, miss, rp, w, log_resp)
    out = []
    for P, (y, Linv, logdet_A, _) in zip(comps, post):
        _readonly(y, Linv, logdet_A)
        out.append(FAConditional(values, miss, P, y, Linv, logdet_A, rp))
    return MFAConditional(tuple(out), w, log_resp)
