r"""Density imputation with Student-t mixtures: the posterior predictive of the variational DP mixture.

The plug-in conditional of :func:`explorer.core.mixtures.vb_dpgmm.conditional` uses Gaussians
:math:`N(m_k, \Psi_k/\nu_k)` and ignores the posterior uncertainty of the parameters, so the
likelihood of a value several standard deviations away vanishes (the NLL overflow of the POIGMM
thesis, garriga2017 digest, §3.2 and §6). Integrating the Normal-Wishart posterior out gives the
posterior predictive (Bishop eq. 10.81, with :math:`W_k = \Psi_k^{-1}`): component ``k`` is the
multivariate Student-t

.. math::

    St(x \mid m_k, S_k, \mathrm{dof}_k), \qquad \mathrm{dof}_k = \nu_k + 1 - D, \qquad
    S_k = \frac{1 + \beta_k}{\beta_k\,\mathrm{dof}_k}\,\Psi_k ,

with density :math:`\frac{\Gamma((v+p)/2)}{\Gamma(v/2)(v\pi)^{p/2}|S|^{1/2}}(1 + \delta^2/v)^{-(v+p)/2}`,
:math:`\delta^2 = (x-m)^\top S^{-1}(x-m)`, and covariance :math:`S\,v/(v-2)` for :math:`v > 2`
(``S`` is the *scale*, as in :class:`scipy.stats.multivariate_t`). See :func:`normal_wishart_predictive`.

For a row with observed ``o`` (``|o|`` entries) and missing ``m`` coordinates:

* marginal: :math:`St(x^o \mid m_k^o, S_k^{oo}, \mathrm{dof}_k)`;
* conditional: :math:`St(x^m \mid \hat x_k^m, c_{nk} Q_k, \mathrm{dof}_k + |o|)` with the Gaussian
  location :math:`\hat x_k^m = m_k^m + S_k^{mo}(S_k^{oo})^{-1}(x^o - m_k^o)`, the Schur complement
  :math:`Q_k = S_k^{mm} - S_k^{mo}(S_k^{oo})^{-1}S_k^{om}` and the row factor
  :math:`c_{nk} = (\mathrm{dof}_k + \delta_{nk}^2)/(\mathrm{dof}_k + |o|)`,
  :math:`\delta_{nk}^2 = (x^o - m_k^o)^\top (S_k^{oo})^{-1}(x^o - m_k^o)`;
* row weights: :math:`w_{nk} \propto E[\pi_k]\,St(x_n^o \mid m_k^o, S_k^{oo}, \mathrm{dof}_k)` (log-sum-exp).

Implementation: :math:`\hat x_k`, :math:`Q_k` and its Cholesky factors are those of the Gaussian
mixture with covariances :math:`S_k`, so a :class:`~explorer.core.gaussians.conditional.ConditionalMixture`
built from :math:`(E[\pi], m_k, S_k)` (the ``base``) holds them once per (pattern, component);
:math:`\delta^2` and :math:`\log|S^{oo}|` come from
:func:`~explorer.core.gaussians.gaussian.observed_gaussian` evaluated at precisions :math:`S^{-1}` and
:math:`2S^{-1}` (the two log-densities differ by :math:`\delta^2/2 - |o|\log 2/2`). Only the
(n, K) arrays ``weights``, ``dof`` and ``row_scale`` = :math:`c_{nk}` are stored per row.

Summaries: mean = :math:`\sum_k w_k\hat x_k` (exists when every weighted dof > 1, else NaN);
variance and covariance by the law of total variance with component covariances
:math:`c_{nk}Q_k\,v/(v-2)` (``inf`` when a weighted component has :math:`v \le 2`: its variance
does not exist); sampling as a Gaussian scale mixture :math:`x = \hat x + \sqrt{v/g}\,L z`,
:math:`g \sim \chi^2_v`; intervals by bisection on the mixture of :func:`scipy.stats.t` CDFs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln, logsumexp, stdtr, stdtrit

from explorer.core.gaussians.conditional import ConditionalMixture, _as_array, draw_components, warn_below_zero
from explorer.core.gaussians.gaussian import LOG_2PI, observed_gaussian, precision_and_logdet
from explorer.core.gaussians.patterns import group_patterns
from explorer.core.validation import BadInputError, check_draws, check_level

__all__ = ["StudentTConditionalMixture", "log_student_t", "normal_wishart_predictive"]

_LOG2 = float(np.log(2.0))


def normal_wishart_predictive(means, beta, nu, scatter):
    r"""Student-t posterior predictive of Normal-Wishart components (Bishop eq. 10.81).

    Parameters
    ----------
    means : array-like (K, D)
        :math:`m_k`.
    beta, nu : array-like (K,)
        :math:`\beta_k > 0`, :math:`\nu_k > D - 1`.
    scatter : array-like (K, D, D)
        :math:`\Psi_k = W_k^{-1}`.

    Returns
    -------
    locations : ndarray (K, D)
    scales : ndarray (K, D, D)
        :math:`S_k = (1+\beta_k)/(\beta_k\,\mathrm{dof}_k)\,\Psi_k`.
    dof : ndarray (K,)
        :math:`\nu_k + 1 - D`.
    """
    m, b, v, P = (_as_array(a, n) for a, n in ((means, "means"), (beta, "beta"), (nu, "nu"), (scatter, "scatter")))
    if m.ndim != 2 or b.shape != (m.shape[0],) or v.shape != b.shape or P.shape != m.shape + (m.shape[1],):
        raise BadInputError(f"means (K, D), beta (K,), nu (K,), scatter (K, D, D) do not match: got shapes "
                            f"{m.shape}, {b.shape}, {v.shape}, {P.shape}.")
    D = m.shape[1]
    if not (np.all(np.isfinite(b)) and np.all(b > 0)):
        raise BadInputError("beta must be positive and finite.")
    if not (np.all(np.isfinite(v)) and np.all(v > D - 1)):
        raise BadInputError(f"nu must be finite and > n_features - 1 = {D - 1}; got {v}.")
    dof = v + 1.0 - D
    return m.copy(), ((1.0 + b) / (b * dof))[:, None, None] * P, dof


def log_student_t(delta2, logdet, dof, p):
    """Log-density of a p-variate Student-t from its Mahalanobis distance and log|scale| (broadcasting)."""
    dof = np.asarray(dof, dtype=float)
    return (gammaln(0.5 * (dof + p)) - gammaln(0.5 * dof) - 0.5 * p * np.log(dof * np.pi)
            - 0.5 * logdet - 0.5 * (dof + p) * np.log1p(delta2 / dof))


def _t_mixture_quantile(W, M, S, V, q: float) -> np.ndarray:
    """q-quantiles of N 1-D t mixtures (columns of (K, N) arrays: weights, locations, scales, dof)."""
    comp_q = M + stdtrit(V, q) * S
    live = W > 0
    lo = np.where(live, comp_q, np.inf).min(axis=0)
    hi = np.where(live, comp_q, -np.inf).max(axis=0)
    floor = 1e-14 * S.max(axis=0)
    for _ in range(200):
        width = hi - lo
        if np.all(width <= np.maximum(4 * np.finfo(float).eps * np.maximum(np.abs(lo), np.abs(hi)), floor)):
            break
        mid = lo + 0.5 * width
        below = (W * stdtr(V, (mid - M) / S)).sum(axis=0) < q
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
    return 0.5 * (lo + hi)


@dataclass(frozen=True, eq=False, slots=True, repr=False)
class StudentTConditionalMixture:
    """Per-row conditional densities :math:`p(x^m_n \\mid x^o_n)` as Student-t mixtures.

    Build with :meth:`from_student_t_mixture` (or :func:`explorer.core.mixtures.vb_dpgmm.predictive_conditional`).

    Attributes
    ----------
    base : ConditionalMixture
        Gaussian conditioning of :math:`(m_k, S_k)`: locations (``completions``), Schur blocks
        :math:`Q_k` and their Cholesky factors, pattern bookkeeping. Its weights are not used.
    weights : ndarray (n_samples, K)
        Student-t weights :math:`w_{nk}`.
    dof : ndarray (n_samples, K)
        Conditional degrees of freedom :math:`\\mathrm{dof}_k + |o_n|`.
    row_scale : ndarray (n_samples, K)
        :math:`c_{nk}`; the conditional scale matrix is ``row_scale * Q_k``.
    """

    base: ConditionalMixture
    weights: np.ndarray
    dof: np.ndarray
    row_scale: np.ndarray
    positive: np.ndarray | None = None  # (n_features,) bool: columns whose intervals should stay above 0

    @classmethod
    def from_student_t_mixture(cls, X, weights, locations, scales, dof, *, missing=None,
                               columns: Sequence[str] | None = None) -> StudentTConditionalMixture:
        """Condition a Student-t mixture on the observed entries of every row of ``X``.

        Parameters
        ----------
        X : array-like (n_samples, n_features)
            NaN marks missing entries (or pass ``missing``, True = missing).
        weights : array-like (K,)
            Mixture weights (non-negative, summing to one).
        locations : array-like (K, D)
        scales : array-like (K, D, D)
            Symmetric positive-definite scale matrices (not covariances).
        dof : array-like (K,)
            Degrees of freedom, positive and finite.
        missing, columns
            As in :meth:`ConditionalMixture.from_gaussian_mixture`.

        Raises
        ------
        BadInputError
            Bad shapes or values (same checks as the Gaussian version, plus ``dof``).
        """
        base = ConditionalMixture.from_gaussian_mixture(X, weights, locations, scales, missing=missing,
                                                        columns=columns)
        K = base.n_components
        v = _as_array(dof, "dof")
        if v.shape != (K,) or not np.all(np.isfinite(v)) or np.any(v <= 0):
            raise BadInputError(f"dof must be {K} positive finite number(s) (one per component); got {dof!r}.")
        n, D = base.values.shape
        miss = base.missing
        Xf = np.where(miss, 0.0, base.values)
        patterns = group_patterns(miss)
        S = _as_array(scales, "scales")
        prec, logdet = precision_and_logdet(0.5 * (S + np.swapaxes(S, 1, 2)))
        w = _as_array(weights, "weights")
        p = (D - miss.sum(axis=1)).astype(float)[:, None]  # |o|
        l1, delta2 = np.empty((n, K)), np.empty((n, K))
        loc = _as_array(locations, "locations")
        d2 = np.empty(n)
        for k in range(K):
            l1[:, k] = observed_gaussian(Xf, patterns, loc[k], prec[k], logdet[k], conditionals=False,
                                         maha_out=d2)[0]
            delta2[:, k] = d2
        logdet_oo = -2.0 * l1 - p * LOG_2PI - delta2
        lt = np.where(p > 0, log_student_t(delta2, logdet_oo, v, p), 0.0)
        with np.errstate(divide="ignore"):  # rows with nothing observed: lt = 0, weights = prior weights
            lw = lt + np.log(w / w.sum())
        with np.errstate(under="ignore"):
            resp = np.exp(lw - logsumexp(lw, axis=1, keepdims=True))
        vrow = np.broadcast_to(v + p, (n, K)).copy()
        cscale = (v + delta2) / (v + p)
        for a in (resp, vrow, cscale):
            a.setflags(write=False)
        return cls(base=base, weights=resp, dof=vrow, row_scale=cscale)

    # ---------------------------------------------------------------- sizes and views
    values = property(lambda self: self.base.values, doc="Conditioning data, NaN at missing entries.")
    missing = property(lambda self: self.base.missing, doc="True = missing, (n_samples, n_features).")
    completions = property(lambda self: self.base.completions, doc="Locations :math:`\\hat x_k`, (K, n, D).")
    columns = property(lambda self: self.base.columns)
    n_samples = property(lambda self: self.base.n_samples)
    n_features = property(lambda self: self.base.n_features)
    n_components = property(lambda self: self.base.n_components)

    def __repr__(self) -> str:
        return (f"StudentTConditionalMixture(n_samples={self.n_samples}, n_features={self.n_features}, "
                f"n_components={self.n_components}, n_missing={int(self.missing.sum())})")

    # ---------------------------------------------------------------- summaries
    def _scale_diag(self) -> np.ndarray:
        """(K, n, D): diagonal of each component's conditional scale ``c_nk Q_k``, 0 at observed entries."""
        return self.base._conditional_variances() * self.row_scale.T[:, :, None]

    def _live(self, threshold: float) -> np.ndarray:
        """(n,) True when every component with positive weight has dof > threshold."""
        return np.all((self.dof > threshold) | (self.weights <= 0), axis=1)

    def mean(self) -> np.ndarray:
        """Single imputation :math:`\\sum_k w_k \\hat x_k`, shape (n_samples, n_features).

        Observed entries are the input values. Missing entries are NaN in rows where a weighted
        component has dof <= 1 (the t mean does not exist).
        """
        mu = np.einsum("nk,knd->nd", self.weights, self.completions)
        mu = np.where(self._live(1.0)[:, None], mu, np.nan)
        return np.where(self.missing, mu, self.values)

    def entry_logpdf(self, truth, hidden) -> np.ndarray:
        """:math:`\\log p(x_{ij} \\mid x_i^o)` at ``truth`` of every entry where ``hidden`` is True, row-major order.

        Exact: each entry's marginal is a 1-D Student-t mixture. The entries where ``hidden`` is True must be
        missing in this conditional (``truth`` and ``hidden`` of shape (n_samples, n_features)).
        :func:`explorer.evaluation.entry_logpdf` scores held-out entries with it.
        """
        ri, ci = np.nonzero(hidden)
        x = np.asarray(truth, dtype=np.float64)[ri, ci]
        M = self.completions[:, ri, ci]
        S = np.maximum(self._scale_diag()[:, ri, ci], np.finfo(np.float64).tiny)
        with np.errstate(divide="ignore"):
            logw = np.log(self.weights[ri].T)
        return logsumexp(logw + log_student_t((x - M) ** 2 / S, np.log(S), self.dof[ri].T, 1), axis=0)

    def variance(self) -> np.ndarray:
        """Per-entry predictive variance (law of total variance), shape (n_samples, n_features).

        Component variances are ``scale * dof / (dof - 2)``; ``inf`` at missing entries of rows where a
        weighted component has dof <= 2 (the variance does not exist). 0 at observed entries.
        """
        mu = np.einsum("nk,knd->nd", self.weights, self.completions)
        with np.errstate(divide="ignore", invalid="ignore"):
            f = np.where(self.dof > 2, self.dof / (self.dof - 2), 0.0).T[:, :, None]
        dev = self.completions - mu[None]
        var = np.einsum("nk,knd->nd", self.weights, self._scale_diag() * f + dev * dev)
        var = np.where(self._live(2.0)[:, None], np.maximum(var, 0.0), np.inf)
        return np.where(self.missing, var, 0.0)

    def component_parameters(self, row: int):
        """The t mixture of one row: ``(weights (K,), locations (K, m), scales (K, m, m), dof (K,), mis (m,))``."""
        _, M, C, mis = self.base.component_parameters(row)
        r = self.base._locate(row)[0]
        return self.weights[r].copy(), M, C * self.row_scale[r][:, None, None], self.dof[r].copy(), mis

    def covariance(self, row: int) -> np.ndarray:
        """Joint predictive covariance of the missing block of one row, shape (m, m) (``inf`` if dof <= 2)."""
        w, M, S, v, _ = self.component_parameters(row)
        if np.any((v <= 2) & (w > 0)):
            return np.full(S.shape[1:], np.inf)
        f = np.where(w > 0, v / np.where(v > 2, v - 2, 1.0), 0.0)
        dev = M - w @ M
        cov = np.einsum("k,kij->ij", w * f, S) + np.einsum("k,ki,kj->ij", w, dev, dev)
        return 0.5 * (cov + cov.T)

    def interval(self, level: float = 0.95):
        """Equal-tailed intervals of every missing entry's marginal t mixture; ``lower = upper = value`` if observed."""
        level = check_level(level)
        lower, upper = self.values.copy(), self.values.copy()
        ri, ci = np.nonzero(self.missing)
        if ri.size:
            M = self.completions[:, ri, ci]
            S = np.sqrt(self._scale_diag()[:, ri, ci])
            W, V = self.weights[ri].T, self.dof[ri].T
            lower[ri, ci] = _t_mixture_quantile(W, M, S, V, 0.5 * (1.0 - level))
            upper[ri, ci] = _t_mixture_quantile(W, M, S, V, 0.5 * (1.0 + level))
        warn_below_zero(lower, self.missing, self.positive, self.columns, level)
        return lower, upper

    # ---------------------------------------------------------------- sampling and densities
    def sample(self, n_draws: int, rng: np.random.Generator) -> np.ndarray:
        """Multiple imputation, shape (n_draws, n_samples, n_features); observed entries kept.

        ``k ~ Cat(w_n)``, ``g ~ chi2(dof_nk)``, ``x^m = xhat_k + sqrt(dof_nk c_nk / g) L_k z``, ``z ~ N(0, I)``.
        """
        check_draws(n_draws, rng)
        b0 = self.base
        n, K = self.weights.shape
        comp = draw_components(self.weights, n_draws, rng)
        cols = np.arange(n)[None, :]
        out = self.completions[comp, cols]
        v = self.dof[cols, comp]
        factor = np.sqrt(v * self.row_scale[cols, comp] / rng.chisquare(v))  # (n_draws, n)
        for b, rows in enumerate(b0.block_rows):
            m = b0.block_mis[b].shape[1]
            if m == 0 or rows.size == 0:
                continue
            pats = b0.row_pattern[rows]
            z = rng.standard_normal((n_draws, rows.size, m))
            noise = np.zeros_like(z)
            cb = comp[:, rows]
            for k in range(K):
                nk = np.einsum("rij,srj->sri", b0.block_chol[b][k, pats], z)
                noise = np.where((cb == k)[..., None], nk, noise)
            out[:, rows[:, None], b0.block_mis[b][pats]] += noise * factor[:, rows, None]
        return np.where(self.missing, out, self.values)

    def logpdf(self, values) -> np.ndarray:
        """Joint log-density of each row's missing entries under its t mixture, shape (n_samples,); 0 if none missing."""
        V = self.base._checked_values(values)
        out = np.zeros(self.n_samples)
        with np.errstate(divide="ignore"):
            logw = np.log(self.weights)
        for rows, m, maha, logdet in self.base._whitened_blocks(V):  # under the scale S; rescale by c
            c = self.row_scale[rows]
            comp_ll = log_student_t(maha / c, logdet + m * np.log(c), self.dof[rows], m)
            out[rows] = logsumexp(comp_ll + logw[rows], axis=1)
        return out

    def marginal_pdf(self, row: int, feature, grid):
        """Density of one missing feature of one row on a grid: ``(density (G,), components (K, G))``."""
        r, b, u, mis = self.base._locate(row)
        p = self.base._missing_position(r, feature, mis)
        g = _as_array(grid, "grid").reshape(-1)
        mu = self.completions[:, r, mis[p]][:, None]
        s2 = (self.base.blocks[b][:, u, p, p] * self.row_scale[r])[:, None]
        comp = self.weights[r][:, None] * np.exp(log_student_t((g - mu) ** 2 / s2, np.log(s2),
                                                               self.dof[r][:, None], 1))
        return comp.sum(axis=0), comp

    def marginal_pdf_2d(self, row: int, f1, f2, gx, gy):
        """Joint density of two missing features on a grid: ``(density (Gy, Gx), components (K, Gy, Gx))``."""
        r, b, u, mis = self.base._locate(row)
        p1, p2 = self.base._missing_position(r, f1, mis), self.base._missing_position(r, f2, mis)
        if p1 == p2:
            raise BadInputError("marginal_pdf_2d needs two different features; use marginal_pdf for one.")
        gx, gy = _as_array(gx, "gx").reshape(-1), _as_array(gy, "gy").reshape(-1)
        C = self.base.blocks[b][:, u] * self.row_scale[r][:, None, None]
        l11 = np.sqrt(C[:, p1, p1])
        l21 = C[:, p1, p2] / l11
        l22 = np.sqrt(C[:, p2, p2] - l21 * l21)
        e = (slice(None), None, None)
        y1 = (gx[None, None, :] - self.completions[:, r, mis[p1]][e]) / l11[e]
        y2 = (gy[None, :, None] - self.completions[:, r, mis[p2]][e] - l21[e] * y1) / l22[e]
        logdet = 2.0 * (np.log(l11) + np.log(l22))
        comp = self.weights[r][e] * np.exp(log_student_t(y1 * y1 + y2 * y2, logdet[e], self.dof[r][e], 2))
        return comp.sum(axis=0), comp
