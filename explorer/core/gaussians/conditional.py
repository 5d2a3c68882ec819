r"""Density imputation: :math:`p(x^m \mid x^o)` of every row as a Gaussian mixture.

For a Gaussian mixture :math:`p(x) = \sum_k \pi_k N(x; \mu_k, \Sigma_k)` and a row split into
observed ``o`` and missing ``m`` coordinates, the conditional density is again a mixture
(Ghahramani & Jordan 1994 §4.3; garriga2017 eq. 3.27):

.. math::

    p(x^m \mid x^o) = \sum_k h_k\, N(x^m;\ \hat x_k^m,\ Q_k), \qquad
    h_k = \frac{\pi_k N(x^o; \mu_k^o, \Sigma_k^{oo})}{\sum_l \pi_l N(x^o; \mu_l^o, \Sigma_l^{oo})},

    \hat x_k^m = \mu_k^m + \Sigma_k^{mo}(\Sigma_k^{oo})^{-1}(x^o - \mu_k^o), \qquad
    Q_k = \Sigma_k^{mm} - \Sigma_k^{mo}(\Sigma_k^{oo})^{-1}\Sigma_k^{om} .

Rows with nothing observed get :math:`h_k = \pi_k`, :math:`\hat x_k = \mu_k`, :math:`Q_k = \Sigma_k`;
rows with nothing missing have an empty missing block. The conditioning itself is done by
:func:`explorer.core.gaussians.gaussian.observed_gaussian` / :func:`~explorer.core.gaussians.gaussian.observed_diagonal`
(precision side, one factorisation per missingness pattern). :math:`Q_k` depends on the pattern
and the component only, so it is stored once per (pattern, component), with its Cholesky factor
:math:`Q_k = L_k L_k^\top`: memory is :math:`O(nKD + \text{patterns}\cdot K m^2)`.

Summaries, with :math:`\bar x^m = \sum_k h_k \hat x_k^m`:

* single imputation (the least-squares estimate): :math:`E[x^m \mid x^o] = \bar x^m`;
* law of total covariance: :math:`\mathrm{Cov}[x^m \mid x^o] = \sum_k h_k\,[Q_k + (\hat x_k^m - \bar x^m)(\hat x_k^m - \bar x^m)^\top]`,
  whose diagonal is the per-entry predictive variance;
* multiple imputation: :math:`k \sim \mathrm{Cat}(h)`, then :math:`x^m = \hat x_k^m + L_k z`, :math:`z \sim N(0, I)`;
* joint log-density of a row's true missing block (the garriga2017 NLL, "joint per row"):
  :math:`\log\sum_k h_k N(x^m; \hat x_k^m, Q_k)` with :math:`\log N = -\tfrac12(m\log 2\pi + 2\sum_i\log L_{k,ii} + \|L_k^{-1}(x^m-\hat x^m_k)\|^2)`,
  combined by log-sum-exp;
* equal-tailed intervals: the marginal of one missing entry is the 1-D mixture
  :math:`F(x) = \sum_k h_k \Phi((x - \hat x_k)/\sqrt{Q_{k,jj}})`. Its :math:`q`-quantile lies between the
  smallest and the largest component :math:`q`-quantiles (at the smallest every :math:`F_k \le q`, at the
  largest every :math:`F_k \ge q`), so a vectorised bisection on that bracket finds it.

**Regression** (Ghahramani & Jordan eq. 13). To predict target columns ``t`` from input columns
``i``, the columns that are neither are marginalised out by dropping them from
:math:`(\mu_k, \Sigma_k)`; then the model on ``t`` + ``i`` is conditioned on the observed inputs
(inputs that are NaN are marginalised the same way). The result is a mixture with weights
:math:`h_k(x^i) \propto \pi_k N(x^i; \mu_k^i, \Sigma_k^{ii})` and means
:math:`\mu_k^t + \Sigma_k^{ti}(\Sigma_k^{ii})^{-1}(x^i - \mu_k^i)`, whose mean is the LSE
:math:`\hat x^t = \sum_k h_k[\mu_k^t + \Sigma_k^{ti}(\Sigma_k^{ii})^{-1}(x^i - \mu_k^i)]`. The targets
are put first, so they are the leading block of every row's missing block; the covariance of the
targets is the leading sub-block of the joint conditional covariance, and its Cholesky factor the
leading sub-block of the joint factor.
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp, ndtr, ndtri

from explorer.core.gaussians.gaussian import (
    LOG_2PI,
    DegenerateCovarianceError,
    normal_logpdf,
    observed_diagonal,
    observed_gaussian,
    precision_and_logdet,
)
from explorer.core.gaussians.patterns import MissingPatterns, group_patterns
from explorer.core.validation import (
    BadInputError,
    as_float_matrix,
    check_draws,
    check_level,
    check_missing_matches_nan,
    column_label,
)

__all__ = ["ConditionalMixture", "regression", "COVARIANCE_TYPES", "NegativeIntervalWarning", "warn_below_zero"]

COVARIANCE_TYPES = ("full", "diag")


# ----------------------------------------------------------------------------- validation helpers
def _as_array(a, name: str) -> np.ndarray:
    try:
        return np.array(a, dtype=np.float64)
    except (TypeError, ValueError):
        raise BadInputError(f"{name} must be numeric.") from None


def _check_parameters(weights, means, covariances, covariance_type, n_features=None):
    """Validate mixture parameters; return float copies ``(weights, means, covariances)``."""
    if covariance_type not in COVARIANCE_TYPES:
        raise BadInputError(f"covariance_type must be one of {COVARIANCE_TYPES}, got {covariance_type!r}.")
    w, mu, cov = _as_array(weights, "weights"), _as_array(means, "means"), _as_array(covariances, "covariances")
    if w.ndim != 1 or w.size == 0:
        raise BadInputError(f"weights must be a non-empty 1-D array (n_components,); got shape {w.shape}.")
    K = w.size
    if mu.ndim != 2 or mu.shape[0] != K or mu.shape[1] == 0:
        raise BadInputError(f"means must have shape (n_components, n_features) = ({K}, D); got {mu.shape}.")
    D = mu.shape[1]
    if n_features is not None and D != n_features:
        raise BadInputError(
            f"The model has {D} feature(s) (means {mu.shape}) but X has {n_features} column(s). "
            "Pass data with the columns the model was fitted on, in the same order."
        )
    full = covariance_type == "full"
    expected = (K, D, D) if full else (K, D)
    if cov.shape != expected:
        raise BadInputError(
            f"covariances have shape {cov.shape}; expected {expected} for covariance_type={covariance_type!r}."
        )
    for name, a in (("weights", w), ("means", mu), ("covariances", cov)):
        if not np.all(np.isfinite(a)):
            raise BadInputError(f"{name} contain NaN or inf; the mixture parameters must be finite.")
    if np.any(w < 0) or not np.isclose(w.sum(), 1.0, rtol=0.0, atol=1e-8):
        raise BadInputError(f"weights must be non-negative and sum to one; they sum to {w.sum():.6g}.")
    w = w / w.sum()
    if full:
        scale = np.abs(cov).max()
        if not np.allclose(cov, np.swapaxes(cov, 1, 2), rtol=1e-8, atol=1e-12 * scale):
            raise BadInputError("covariances must be symmetric matrices.")
        cov = 0.5 * (cov + np.swapaxes(cov, 1, 2))
    elif np.any(cov <= 0):
        raise DegenerateCovarianceError("Diagonal covariances must be positive; increase reg_covar.")
    return w, mu, cov


def _check_columns(columns, n_features: int):
    if columns is None:
        return None
    cols = tuple(str(c) for c in columns)
    if len(cols) != n_features:
        raise BadInputError(f"columns has {len(cols)} name(s) but the data have {n_features} column(s).")
    return cols


def _feature(f, n_features: int, columns, what: str = "feature") -> int:
    """Column index of ``f`` (an integer index or, when ``columns`` are known, a column name)."""
    if isinstance(f, str):
        if columns is None or f not in columns:
            known = f"; known columns: {list(columns)}" if columns is not None else " (no column names were given)"
            raise BadInputError(f"Unknown column {f!r} in {what}{known}.")
        return columns.index(f)
    if isinstance(f, (bool, np.bool_)):
        raise BadInputError(f"{what} must be column indices or names, got a boolean {f!r}.")
    try:
        j = operator.index(f)
    except TypeError:
        raise BadInputError(f"{what} must be column indices or names, got {f!r}.") from None
    if not 0 <= j < n_features:
        raise BadInputError(f"Column index {j} in {what} is out of range for {n_features} column(s).")
    return j


def _feature_list(spec, n_features: int, columns, what: str) -> np.ndarray:
    items = [spec] if isinstance(spec, (str, int, np.integer)) else list(spec)
    idx = [_feature(f, n_features, columns, what) for f in items]
    if not idx:
        raise BadInputError(f"{what} is empty; give at least one column.")
    if len(set(idx)) != len(idx):
        raise BadInputError(f"{what} lists a column more than once: {items}.")
    return np.array(idx, dtype=np.intp)


def _block_cholesky(blocks: np.ndarray) -> np.ndarray:
    """Lower Cholesky factors of (K, U, m, m) conditional covariances."""
    if blocks.shape[-1] == 0:
        return blocks.copy()
    try:
        return np.linalg.cholesky(blocks)
    except np.linalg.LinAlgError:
        bad = next(k for k in range(blocks.shape[0]) if np.any(np.linalg.eigvalsh(blocks[k]) <= 0))
        raise DegenerateCovarianceError(
            f"A conditional covariance of component {bad} is not positive definite: the component is "
            "(nearly) singular. Increase reg_covar or standardise the data."
        ) from None


def _diag_blocks(var: np.ndarray) -> np.ndarray:
    """Diagonal matrices (..., m, m) from variances (..., m)."""
    m = var.shape[-1]
    out = np.zeros(var.shape + (m,))
    idx = np.arange(m)
    out[..., idx, idx] = var
    return out


def draw_components(weights: np.ndarray, n_draws: int, rng: np.random.Generator) -> np.ndarray:
    """One component index per draw and row, ``k ~ Cat(weights[n])``; shape (n_draws, n_samples)."""
    n, K = weights.shape
    u = rng.random((n_draws, n))
    cum = np.cumsum(weights, axis=1)
    comp = np.zeros((n_draws, n), dtype=np.intp)
    for k in range(K - 1):
        comp += u >= cum[:, k]
    return comp


def _readonly(*arrays):
    for a in arrays:
        a.setflags(write=False)


def quantile_of_mixtures(W: np.ndarray, M: np.ndarray, S: np.ndarray, q: float) -> np.ndarray:
    """q-quantiles of N independent 1-D mixtures (columns of the (K, N) arrays), by bisection."""
    comp_q = M + ndtri(q) * S
    live = W > 0
    lo = np.where(live, comp_q, np.inf).min(axis=0)
    hi = np.where(live, comp_q, -np.inf).max(axis=0)
    floor = 1e-14 * S.max(axis=0)
    for _ in range(200):
        width = hi - lo
        if np.all(width <= np.maximum(4 * np.finfo(float).eps * np.maximum(np.abs(lo), np.abs(hi)), floor)):
            break
        mid = lo + 0.5 * width
        below = (W * ndtr((mid - M) / S)).sum(axis=0) < q
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
    return 0.5 * (lo + hi)


class NegativeIntervalWarning(UserWarning):
    """A predictive interval of a column whose observed values are all positive reaches below zero."""


def warn_below_zero(lower, missing, positive, columns, level: float) -> None:
    """Warn (:class:`NegativeIntervalWarning`) when a missing entry of a ``positive`` column has ``lower < 0``.

    ``positive``: (n_features,) bool or None (no check); the imputers set it to the columns whose observed training
    values are all above zero (issue 21: a Gaussian model gives such a column negative values without saying so).
    """
    if positive is None:
        return
    crossing = missing & (lower < 0) & np.asarray(positive, dtype=bool)[None, :]
    if not crossing.any():
        return
    counts = crossing.sum(axis=0)
    cols = np.flatnonzero(counts)
    named = ", ".join(f"{column_label(int(j), columns)}: {int(counts[j])} of {int(missing[:, j].sum())}"
                      for j in cols[:5]) + (" ..." if cols.size > 5 else "")
    warnings.warn(
        f"{level:.0%} intervals of missing entries of column(s) whose observed values are all positive reach below "
        f"zero ({named}). The Gaussian model puts probability on negative values there; for a positive, skewed column "
        "fit on the log scale (explorer.TransformedImputer with transforms={'<column>': 'log'}, or "
        "transforms='suggest').", NegativeIntervalWarning, stacklevel=3)


# ----------------------------------------------------------------------------- the class
@dataclass(frozen=True, eq=False, slots=True, repr=False)
class ConditionalMixture:
    """Per-row conditional densities :math:`p(x^m_n \\mid x^o_n)` as Gaussian mixtures.

    Build with :meth:`from_gaussian_mixture` or :func:`regression`, not directly. All arrays are
    read-only.

    Attributes
    ----------
    values : ndarray of shape (n_samples, n_features)
        The conditioning data, NaN at missing entries.
    missing : ndarray of bool, shape (n_samples, n_features)
        True = missing (the entries the mixture describes).
    weights : ndarray of shape (n_samples, n_components)
        Posterior component weights :math:`h_{nk}` given the observed entries.
    completions : ndarray of shape (n_components, n_samples, n_features)
        Each row completed by each component's conditional mean (observed entries copied).
    blocks, block_chol : tuple of ndarray
        Per storage block ``b``: conditional covariances and their lower Cholesky factors,
        shape (n_components, n_unique_b, m_b, m_b).
    block_mis : tuple of ndarray
        Per block: the missing columns of each stored pattern, shape (n_unique_b, m_b).
    block_rows : tuple of ndarray
        Per block: the rows it serves.
    row_block, row_pattern : ndarray of shape (n_samples,)
        Row ``n`` uses ``blocks[row_block[n]][:, row_pattern[n]]``.
    columns : tuple of str or None
        Column names (for messages and name look-ups).
    """

    values: np.ndarray
    missing: np.ndarray
    weights: np.ndarray
    completions: np.ndarray
    blocks: tuple
    block_chol: tuple
    block_mis: tuple
    block_rows: tuple
    row_block: np.ndarray
    row_pattern: np.ndarray
    columns: tuple | None = None
    positive: np.ndarray | None = None  # (n_features,) bool: columns whose intervals should stay above 0

    # ---------------------------------------------------------------- construction
    @classmethod
    def from_gaussian_mixture(
        cls,
        X,
        weights,
        means,
        covariances,
        *,
        covariance_type: str = "full",
        missing=None,
        columns: Sequence[str] | None = None,
        patterns: MissingPatterns | None = None,
    ) -> ConditionalMixture:
        """Condition a Gaussian mixture on the observed entries of every row of ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            NaN marks missing entries (unless ``missing`` is given, in which case the values at
            missing entries are ignored). Rows with every entry missing are allowed.
        weights : array-like of shape (n_components,)
        means : array-like of shape (n_components, n_features)
        covariances : array-like
            (n_components, n_features, n_features) for ``"full"``, (n_components, n_features) for ``"diag"``.
        covariance_type : {"full", "diag"}
        missing : array-like of bool, shape (n_samples, n_features), optional
            True = missing.
        columns : sequence of str, optional
            Column names, for messages and for addressing features by name.
        patterns : MissingPatterns, optional
            :func:`~explorer.core.gaussians.patterns.group_patterns` of the missing entries, when the caller
            conditions many mixtures on the same gaps (a data-augmentation chain) and has grouped them once.

        Returns
        -------
        ConditionalMixture

        Raises
        ------
        BadInputError
            Shapes that do not match, non-numeric or infinite values, NaN at entries marked
            observed, invalid parameters (``DegenerateCovarianceError`` for singular covariances).
        """
        cols = None if columns is None else tuple(str(c) for c in columns)
        values = as_float_matrix(X, name="X", columns=cols)
        cols = _check_columns(cols, values.shape[1])
        nan = np.isnan(values)
        if missing is None:
            miss = nan
        else:
            miss = check_missing_matches_nan(values, missing, columns=cols)
        values[miss] = np.nan
        w, mu, cov = _check_parameters(weights, means, covariances, covariance_type, values.shape[1])
        return _condition(values, miss, w, mu, cov, covariance_type, cols, patterns)

    # ---------------------------------------------------------------- sizes
    @property
    def n_samples(self) -> int:
        return self.values.shape[0]

    @property
    def n_features(self) -> int:
        return self.values.shape[1]

    @property
    def n_components(self) -> int:
        return self.weights.shape[1]

    def __repr__(self) -> str:
        return (
            f"ConditionalMixture(n_samples={self.n_samples}, n_features={self.n_features}, "
            f"n_components={self.n_components}, n_missing={int(self.missing.sum())})"
        )

    # ---------------------------------------------------------------- internals
    def _locate(self, row):
        try:
            r = operator.index(row)
        except TypeError:
            raise BadInputError(f"row must be an integer, got {row!r}.") from None
        if not -self.n_samples <= r < self.n_samples:
            raise BadInputError(f"row {r} is out of range for {self.n_samples} row(s).")
        r %= self.n_samples
        b, u = self.row_block[r], self.row_pattern[r]
        return r, b, u, self.block_mis[b][u]

    def _missing_position(self, row, feature, mis) -> int:
        j = _feature(feature, self.n_features, self.columns)
        pos = np.flatnonzero(mis == j)
        if pos.size == 0:
            raise BadInputError(
                f"{column_label(j, self.columns)} is observed in row {row}; its value is known, so it has "
                "no predictive density. Pick a feature that is missing in this row."
            )
        return int(pos[0])

    def _conditional_variances(self) -> np.ndarray:
        """(K, n, D): diagonal of each component's conditional covariance, 0 at observed entries."""
        out = np.zeros(self.completions.shape)
        for b, rows in enumerate(self.block_rows):
            if self.block_mis[b].shape[1] == 0 or rows.size == 0:
                continue
            pats = self.row_pattern[rows]
            diag = np.diagonal(self.blocks[b], axis1=-2, axis2=-1)[:, pats]
            out[:, rows[:, None], self.block_mis[b][pats]] = diag
        return out

    def _mixture_mean(self) -> np.ndarray:
        return np.einsum("nk,knd->nd", self.weights, self.completions)

    # ---------------------------------------------------------------- summaries
    def mean(self) -> np.ndarray:
        """Single imputation :math:`E[x \\mid x^o]`, shape (n_samples, n_features).

        Observed entries are exactly the input values.
        """
        return np.where(self.missing, self._mixture_mean(), self.values)

    def variance(self) -> np.ndarray:
        """Per-entry predictive variance (law of total variance), shape (n_samples, n_features).

        0 at observed entries.
        """
        dev = self.completions - self._mixture_mean()[None]
        var = np.einsum("nk,knd->nd", self.weights, self._conditional_variances() + dev * dev)
        return np.where(self.missing, np.maximum(var, 0.0), 0.0)

    def entry_logpdf(self, truth, hidden) -> np.ndarray:
        """:math:`\\log p(x_{ij} \\mid x_i^o)` at ``truth`` of every entry where ``hidden`` is True, row-major order.

        Exact: each entry's marginal is a 1-D Gaussian mixture. The entries where ``hidden`` is True must be missing
        in this conditional (``truth`` and ``hidden`` of shape (n_samples, n_features)).
        :func:`explorer.evaluation.entry_logpdf` scores held-out entries with it.
        """
        ri, ci = np.nonzero(hidden)
        x = np.asarray(truth, dtype=np.float64)[ri, ci]
        with np.errstate(divide="ignore"):
            logw = np.log(self.weights[ri].T)
        comp = normal_logpdf(x, self.completions[:, ri, ci], self._conditional_variances()[:, ri, ci])
        return logsumexp(logw + comp, axis=0)

    def covariance(self, row: int) -> np.ndarray:
        """Joint predictive covariance of the missing block of one row, shape (m, m).

        The order of the block is that of ``component_parameters(row)[3]`` (increasing column).
        """
        w, M, C, _ = self.component_parameters(row)
        dev = M - w @ M
        cov = np.einsum("k,kij->ij", w, C) + np.einsum("k,ki,kj->ij", w, dev, dev)
        return 0.5 * (cov + cov.T)

    def component_parameters(self, row: int):
        """The mixture of one row: ``(weights (K,), means (K, m), covariances (K, m, m), mis (m,))``.

        ``mis`` are the missing column indices (the coordinates of the block), increasing.
        """
        r, b, u, mis = self._locate(row)
        return (
            self.weights[r].copy(),
            self.completions[:, r, mis].copy(),
            self.blocks[b][:, u].copy(),
            np.array(mis),
        )

    def interval(self, level: float = 0.95):
        """Equal-tailed predictive intervals of every missing entry's marginal mixture.

        Parameters
        ----------
        level : float in (0, 1)

        Returns
        -------
        lower, upper : ndarray of shape (n_samples, n_features)
            :math:`F^{-1}((1-\\text{level})/2)` and :math:`F^{-1}((1+\\text{level})/2)`;
            ``lower = upper = value`` at observed entries.
        """
        level = check_level(level)
        lower, upper = self.values.copy(), self.values.copy()
        ri, ci = np.nonzero(self.missing)
        if ri.size:
            M = self.completions[:, ri, ci]
            S = np.sqrt(self._conditional_variances()[:, ri, ci])
            W = self.weights[ri].T
            lower[ri, ci] = quantile_of_mixtures(W, M, S, 0.5 * (1.0 - level))
            upper[ri, ci] = quantile_of_mixtures(W, M, S, 0.5 * (1.0 + level))
        warn_below_zero(lower, self.missing, self.positive, self.columns, level)
        return lower, upper

    # ---------------------------------------------------------------- sampling and densities
    def sample(self, n_draws: int, rng: np.random.Generator) -> np.ndarray:
        """Multiple imputation: draws from every row's conditional mixture.

        Parameters
        ----------
        n_draws : int
        rng : numpy.random.Generator

        Returns
        -------
        ndarray of shape (n_draws, n_samples, n_features)
            Observed entries equal the input values in every draw.
        """
        check_draws(n_draws, rng)
        n, K = self.weights.shape
        comp = draw_components(self.weights, n_draws, rng)
        out = self.completions[comp, np.arange(n)[None, :]]
        for b, rows in enumerate(self.block_rows):
            m = self.block_mis[b].shape[1]
            if m == 0 or rows.size == 0:
                continue
            pats = self.row_pattern[rows]
            z = rng.standard_normal((n_draws, rows.size, m))
            noise = np.zeros_like(z)
            cb = comp[:, rows]
            for k in range(K):
                nk = np.einsum("rij,srj->sri", self.block_chol[b][k, pats], z)
                noise = np.where((cb == k)[..., None], nk, noise)
            out[:, rows[:, None], self.block_mis[b][pats]] += noise
        return np.where(self.missing, out, self.values)

    def logpdf(self, values) -> np.ndarray:
        """Joint log-density of each row's missing entries under its conditional mixture.

        Parameters
        ----------
        values : array-like of shape (n_samples, n_features)
            Complete rows (e.g. the true values of a masked data set). Only the entries that
            are missing in this mixture are scored; the others are ignored.

        Returns
        -------
        ndarray of shape (n_samples,)
            :math:`\\log p(x^m_n \\mid x^o_n)`; 0 for rows with nothing missing.
        """
        V = self._checked_values(values)
        out = np.zeros(self.n_samples)
        with np.errstate(divide="ignore"):
            logw = np.log(self.weights)
        for rows, m, maha, logdet in self._whitened_blocks(V):
            out[rows] = logsumexp(-0.5 * (m * LOG_2PI + logdet + maha) + logw[rows], axis=1)
        return out

    def _checked_values(self, values) -> np.ndarray:
        """Complete rows to score: right shape, no NaN at the missing entries."""
        V = as_float_matrix(values, name="values", columns=self.columns)
        if V.shape != self.values.shape:
            raise BadInputError(f"values have shape {V.shape}; expected {self.values.shape}.")
        hole = np.isnan(V) & self.missing
        if hole.any():
            r, c = np.argwhere(hole)[0]
            raise BadInputError(
                f"values has {hole.sum()} NaN value(s) at missing entries, e.g. row {r} of "
                f"{column_label(c, self.columns)}; logpdf needs the complete values there."
            )
        return V

    def _whitened_blocks(self, V: np.ndarray):
        """Per block of rows with missing entries: ``(rows, m, maha, logdet)``.

        ``maha[i, k]`` is the squared Mahalanobis distance of row ``rows[i]``'s missing values
        from component ``k``'s conditional mean under its conditional covariance, and
        ``logdet[i, k]`` that covariance's log-determinant; both shape (n_rows, K).
        """
        for b, rows in enumerate(self.block_rows):
            m = self.block_mis[b].shape[1]
            if m == 0 or rows.size == 0:
                continue
            pats = self.row_pattern[rows]
            mis = self.block_mis[b][pats]
            x = V[rows[:, None], mis]
            maha = np.empty((rows.size, self.n_components))
            logdet = np.empty((rows.size, self.n_components))
            for k in range(self.n_components):
                L = self.block_chol[b][k, pats]
                y = np.linalg.solve(L, (x - self.completions[k, rows[:, None], mis])[..., None])[..., 0]
                maha[:, k] = np.einsum("ij,ij->i", y, y)
                logdet[:, k] = 2.0 * np.log(np.diagonal(L, axis1=-2, axis2=-1)).sum(axis=-1)
            yield rows, m, maha, logdet

    def marginal_pdf(self, row: int, feature, grid):
        """Density of one missing feature of one row on a grid (a 1-D slice view).

        Parameters
        ----------
        row : int
        feature : int or str
            Column index or name; must be missing in ``row``.
        grid : array-like of shape (G,)

        Returns
        -------
        density : ndarray of shape (G,)
        components : ndarray of shape (n_components, G)
            :math:`h_k N(x; \\hat x_k, Q_{k,jj})`; they sum to ``density``.
        """
        r, b, u, mis = self._locate(row)
        p = self._missing_position(r, feature, mis)
        g = _as_array(grid, "grid").reshape(-1)
        mu = self.completions[:, r, mis[p]][:, None]
        var = self.blocks[b][:, u, p, p][:, None]
        comp = self.weights[r][:, None] * np.exp(-0.5 * ((g - mu) ** 2 / var + np.log(var) + LOG_2PI))
        return comp.sum(axis=0), comp

    def marginal_pdf_2d(self, row: int, f1, f2, gx, gy):
        """Joint density of two missing features of one row on a grid.

        Parameters
        ----------
        row : int
        f1, f2 : int or str
            Features on the x and y axes; both must be missing in ``row`` and distinct.
        gx : array-like of shape (Gx,)
        gy : array-like of shape (Gy,)

        Returns
        -------
        density : ndarray of shape (Gy, Gx)
        components : ndarray of shape (n_components, Gy, Gx)
        """
        r, b, u, mis = self._locate(row)
        p1, p2 = self._missing_position(r, f1, mis), self._missing_position(r, f2, mis)
        if p1 == p2:
            raise BadInputError("marginal_pdf_2d needs two different features; use marginal_pdf for one.")
        gx = _as_array(gx, "gx").reshape(-1)
        gy = _as_array(gy, "gy").reshape(-1)
        C = self.blocks[b][:, u]
        s11, s22, s12 = C[:, p1, p1], C[:, p2, p2], C[:, p1, p2]
        l11 = np.sqrt(s11)
        l21 = s12 / l11
        l22 = np.sqrt(s22 - l21 * l21)
        dx = gx[None, None, :] - self.completions[:, r, mis[p1]][:, None, None]
        dy = gy[None, :, None] - self.completions[:, r, mis[p2]][:, None, None]
        y1 = dx / l11[:, None, None]
        y2 = (dy - l21[:, None, None] * y1) / l22[:, None, None]
        logdet = 2.0 * (np.log(l11) + np.log(l22))
        logn = -0.5 * (2 * LOG_2PI + logdet[:, None, None] + y1 * y1 + y2 * y2)
        comp = self.weights[r][:, None, None] * np.exp(logn)
        return comp.sum(axis=0), comp

    # ---------------------------------------------------------------- restriction (regression)
    def _leading(self, n_lead: int, columns) -> ConditionalMixture:
        """Marginal of the first ``n_lead`` columns, which must be missing in every row."""
        lead = np.arange(n_lead)
        blocks, chol, mis = [], [], []
        for b, bm in enumerate(self.block_mis):
            assert bm.shape[1] >= n_lead and np.all(bm[:, :n_lead] == lead)
            blocks.append(np.ascontiguousarray(self.blocks[b][..., :n_lead, :n_lead]))
            chol.append(np.ascontiguousarray(self.block_chol[b][..., :n_lead, :n_lead]))
            mis.append(np.broadcast_to(lead, (bm.shape[0], n_lead)).copy())
        values = self.values[:, :n_lead].copy()
        missing = self.missing[:, :n_lead].copy()
        completions = np.ascontiguousarray(self.completions[:, :, :n_lead])
        _readonly(values, missing, completions, *blocks, *chol, *mis)
        return ConditionalMixture(
            values=values,
            missing=missing,
            weights=self.weights,
            completions=completions,
            blocks=tuple(blocks),
            block_chol=tuple(chol),
            block_mis=tuple(mis),
            block_rows=self.block_rows,
            row_block=self.row_block,
            row_pattern=self.row_pattern,
            columns=columns,
        )


def _condition(values, missing, weights, means, covariances, covariance_type, columns,
               patterns=None) -> ConditionalMixture:
    """Build a ConditionalMixture from validated arrays (see the module docstring)."""
    n, D = values.shape
    K = weights.size
    Xf = np.where(missing, 0.0, values)
    if patterns is None:
        patterns = group_patterns(missing)
    elif patterns.missing.shape != missing.shape or not np.array_equal(patterns.missing, missing):
        raise BadInputError("patterns were grouped from another mask than the missing entries of X.")
    ll = np.empty((n, K))
    completions = np.empty((K, n, D))
    if covariance_type == "full":
        precision, logdet = precision_and_logdet(covariances)
        per_k = []
        for k in range(K):
            ll[:, k], completions[k], cc = observed_gaussian(Xf, patterns, means[k], precision[k], logdet[k])
            per_k.append(cc)
        blocks = [np.stack([per_k[k][gi] for k in range(K)]) for gi in range(len(patterns.groups))]
        marginal_cov = covariances
    else:
        for k in range(K):
            ll[:, k], completions[k] = observed_diagonal(Xf, missing, means[k], covariances[k])
        blocks = [_diag_blocks(covariances[:, g.unique_mis]) for g in patterns.groups]
        marginal_cov = _diag_blocks(covariances)
    block_mis = [np.array(g.unique_mis) for g in patterns.groups]
    block_rows = [np.array(g.rows) for g in patterns.groups]
    row_block = np.zeros(n, dtype=np.intp)
    row_pattern = np.zeros(n, dtype=np.intp)
    for gi, g in enumerate(patterns.groups):
        row_block[g.rows] = gi
        row_pattern[g.rows] = g.inverse
    empty = np.array(patterns.empty_rows)
    if empty.size:
        row_block[empty] = len(blocks)
        blocks.append(np.array(marginal_cov)[:, None])
        block_mis.append(np.arange(D, dtype=np.intp)[None])
        block_rows.append(empty)
    with np.errstate(divide="ignore"):  # a component with weight 0 gets log-weight -inf
        lw = ll + np.log(weights)
    with np.errstate(under="ignore"):
        resp = np.exp(lw - logsumexp(lw, axis=1, keepdims=True))
    resp[empty] = weights
    chol = [_block_cholesky(bl) for bl in blocks]
    _readonly(values, missing, resp, completions, row_block, row_pattern, *blocks, *chol, *block_mis, *block_rows)
    return ConditionalMixture(
        values=values,
        missing=missing,
        weights=resp,
        completions=completions,
        blocks=tuple(blocks),
        block_chol=tuple(chol),
        block_mis=tuple(block_mis),
        block_rows=tuple(block_rows),
        row_block=row_block,
        row_pattern=row_pattern,
        columns=columns,
    )


def regression(
    weights,
    means,
    covariances,
    X_inputs,
    *,
    inputs,
    targets,
    covariance_type: str = "full",
    columns: Sequence[str] | None = None,
) -> ConditionalMixture:
    """Predictive mixture of target columns given input columns (Ghahramani & Jordan eq. 13).

    Parameters
    ----------
    weights, means, covariances :
        A Gaussian mixture on all ``n_features`` columns (as in :meth:`ConditionalMixture.from_gaussian_mixture`).
    X_inputs : array-like of shape (n_samples, n_inputs)
        Values of the input columns, in the order of ``inputs``; NaN inputs are marginalised.
        A 1-D array is accepted when there is a single input.
    inputs, targets : int, str or sequence of them
        Column indices (or names, with ``columns``); disjoint. Columns in neither list are
        marginalised out.
    covariance_type : {"full", "diag"}
    columns : sequence of str, optional
        Names of the model's columns.

    Returns
    -------
    ConditionalMixture
        Over the target columns only (``n_features = len(targets)``, every entry missing), in the
        order of ``targets``: ``mean()`` is the least-squares estimate of eq. 13 and
        ``variance()`` the predictive variance.
    """
    w, mu, cov = _check_parameters(weights, means, covariances, covariance_type)
    D = mu.shape[1]
    cols = _check_columns(columns, D)
    inp = _feature_list(inputs, D, cols, "inputs")
    tgt = _feature_list(targets, D, cols, "targets")
    both = np.intersect1d(inp, tgt)
    if both.size:
        shown = ", ".join(column_label(j, cols) for j in both)
        raise BadInputError(f"{shown} cannot be both an input and a target; the two lists must be disjoint.")
    Xi = np.asarray(X_inputs)
    if Xi.ndim == 1 and inp.size == 1:
        Xi = Xi.reshape(-1, 1)
    in_names = None if cols is None else [cols[j] for j in inp]
    Xi = as_float_matrix(Xi, name="X_inputs", columns=in_names)
    if Xi.shape[1] != inp.size:
        raise BadInputError(
            f"X_inputs has {Xi.shape[1]} column(s) but {inp.size} input(s) were named; give one column per input, "
            "in the order of inputs."
        )
    n, T = Xi.shape[0], tgt.size
    sel = np.concatenate([tgt, inp])
    values = np.concatenate([np.full((n, T), np.nan), Xi], axis=1)
    missing = np.isnan(values)
    sub_cov = cov[:, sel][:, :, sel] if covariance_type == "full" else cov[:, sel]
    joint = _condition(values, missing, w, mu[:, sel], sub_cov, covariance_type, None)
    return joint._leading(T, None if cols is None else tuple(cols[j] for j in tgt))
