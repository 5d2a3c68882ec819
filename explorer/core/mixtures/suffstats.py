r"""Expected sufficient statistics of EM for Gaussian mixtures with missing values.

The M-step of :mod:`explorer.core.mixtures.em_gmm` needs, per component :math:`j`, only three sums over the
rows (Ghahramani & Jordan 1994; Delalleau et al. section 2):

.. math::

    N_j = \sum_i h_{ij}, \qquad
    S_j = \sum_i h_{ij}\,(\tilde x_{ij} - c_j), \qquad
    T_j = \sum_i h_{ij}\,\big[(\tilde x_{ij} - c_j)(\tilde x_{ij} - c_j)^\top + C_{ij}\big],

with :math:`\tilde x_{ij}` row :math:`i` completed by component :math:`j`'s conditional mean and
:math:`C_{ij}` its conditional covariance on the (m, m) block. The sums are taken about a **shift**
:math:`c_j`, the component mean the E-step ran at: the new mean is close to it, so
:math:`W_j = T_j - S_j S_j^\top / N_j` (the scatter about the new mean) loses no precision to
cancellation, unlike raw moments :math:`\sum h x x^\top - N \bar x \bar x^\top` on data far from
the origin. Every block of rows can compute its statistics on its own with the same shift (the
current parameters), and statistics of blocks add up (:meth:`SufficientStatistics.__add__`): that
is what lets the E-step run as a map over row blocks (Dask) and the completions
:math:`\tilde x_{ij}` never be stored for the whole data set.

* :func:`statistics_from_completions`: the statistics from per-component completions and
  conditional covariances in the layout of :func:`explorer.core.gaussians.gaussian.observed_gaussian`
  (the generic path: any per-component E-step kernel can feed it).
* :func:`estep_statistics`: the E-step of one block of rows (log-likelihoods, responsibilities,
  statistics), the one dispatcher between the compiled kernel and the reference numpy kernels
  (:func:`component_loglik`); :func:`statistics_from_loglik` finishes any kernel's per-component output.
* :func:`m_step`: weights, means and covariances from the statistics, maximum likelihood or the
  posterior mode under a Normal-inverse-Wishart prior (:func:`posterior_mode`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from explorer.core.gaussians.gaussian import (
    DegenerateCovarianceError,
    embed_add,
    observed_diagonal,
    observed_gaussian,
    precision_and_logdet,
)
from explorer.core.gaussians.patterns import MissingPatterns, group_patterns
from explorer.core.validation import BadInputError

__all__ = [
    "AUTO_COMPILED_MIN_WORK",
    "SufficientStatistics",
    "check_finite_log_likelihood",
    "choose_strategy",
    "COVARIANCE_SIDE_MIN_FACTOR_WORK",
    "COVARIANCE_SIDE_RATIO",
    "factorisation_work",
    "component_loglik",
    "estep_statistics",
    "m_step",
    "posterior_mode",
    "statistics_from_completions",
    "statistics_from_loglik",
]

_EPS10 = 10 * np.finfo(float).eps


@dataclass(frozen=True, eq=False, slots=True)
class SufficientStatistics:
    """Expected sufficient statistics of a block of rows, about the shift ``shift`` (see the module docstring).

    Attributes
    ----------
    nk : ndarray of shape (n_components,)
        :math:`N_j = \\sum_i h_{ij}`.
    shift : ndarray of shape (n_components, n_features)
        :math:`c_j`, the component means of the E-step.
    first : ndarray of shape (n_components, n_features)
        :math:`S_j = \\sum_i h_{ij} (\\tilde x_{ij} - c_j)`.
    second : ndarray of shape (n_components, n_features, n_features) or (n_components, n_features)
        :math:`T_j` (full), or its diagonal (diag covariances).
    log_likelihood : float
        :math:`\\sum_i \\log \\sum_j \\pi_j N(x_i^o; \\mu_j^o, \\Sigma_j^{oo})` over the block's rows.
    n_rows : int
        Rows counted (rows with nothing observed are not).
    """

    nk: np.ndarray
    shift: np.ndarray
    first: np.ndarray
    second: np.ndarray
    log_likelihood: float
    n_rows: int

    def __add__(self, other: SufficientStatistics) -> SufficientStatistics:
        if not isinstance(other, SufficientStatistics):
            return NotImplemented
        if self.shift.shape != other.shift.shape or not np.array_equal(self.shift, other.shift):
            raise BadInputError("Sufficient statistics taken about different shifts (E-steps at different "
                                "parameters) cannot be added.")
        return SufficientStatistics(
            nk=self.nk + other.nk,
            shift=self.shift,
            first=self.first + other.first,
            second=self.second + other.second,
            log_likelihood=self.log_likelihood + other.log_likelihood,
            n_rows=self.n_rows + other.n_rows,
        )

    @classmethod
    def zeros(cls, shift: np.ndarray, covariance_type: str = "full") -> SufficientStatistics:
        """Statistics of no rows (the identity of ``+``)."""
        shift = np.asarray(shift, dtype=float)
        K, D = shift.shape
        second = np.zeros((K, D, D) if covariance_type == "full" else (K, D))
        return cls(nk=np.zeros(K), shift=shift, first=np.zeros((K, D)), second=second, log_likelihood=0.0, n_rows=0)

    @property
    def covariance_type(self) -> str:
        return "full" if self.second.ndim == 3 else "diag"


def statistics_from_completions(resp, completions, cond_cov, patterns: MissingPatterns, shift, *,
                                covariance_type: str = "full", exact: bool = True, covariances=None,
                                rows=None, log_likelihood: float = 0.0) -> SufficientStatistics:
    """Statistics from per-component completions (the generic path of any E-step kernel).

    Parameters
    ----------
    resp : ndarray of shape (n_rows, n_components)
        Responsibilities of the rows of ``patterns``.
    completions : ndarray of shape (n_components, n_rows, n_features)
        Rows completed per component (:math:`\\tilde x_{ij}`).
    cond_cov : sequence
        Full covariances: per component, per group of ``patterns``, the conditional covariances of
        the group's distinct patterns, shape (n_unique, m, m) (``observed_gaussian``'s layout).
        Ignored for diag.
    patterns : MissingPatterns
        Grouping of the same rows.
    shift : ndarray of shape (n_components, n_features)
        :math:`c_j` (normally the means of the E-step).
    covariance_type : {"full", "diag"}
    exact : bool
        Include the conditional covariances :math:`C_{ij}` (EM); False drops them (the "naive"
        variant that refits on imputed values).
    covariances : ndarray of shape (n_components, n_features), optional
        The E-step's variances; needed for ``"diag"`` with ``exact`` (:math:`C_{ij}` is their
        restriction to the missing coordinates).
    rows : ndarray of int, optional
        Only these rows count (default: all).
    log_likelihood : float
        Stored as is.
    """
    resp = np.asarray(resp, dtype=float)
    shift = np.asarray(shift, dtype=float)
    K, D = shift.shape
    h = resp if rows is None else np.where(np.isin(np.arange(resp.shape[0]), rows)[:, None], resp, 0.0)
    nk = h.sum(axis=0)
    first = np.empty((K, D))
    full = covariance_type == "full"
    second = np.empty((K, D, D) if full else (K, D))
    if not full and exact:
        if covariances is None:
            raise BadInputError("statistics_from_completions needs the E-step's variances for diag covariances.")
        missing_mass = h.T @ patterns.missing  # (K, D)
    for k in range(K):
        diff = completions[k] - shift[k]
        hk = h[:, k]
        first[k] = hk @ diff
        if full:
            t = (hk[:, None] * diff).T @ diff
            if exact:
                for g, q in zip(patterns.groups, cond_cov[k]):
                    if g.n_missing:
                        embed_add(t, g, q, np.bincount(g.inverse, weights=hk[g.rows], minlength=g.n_unique))
            second[k] = 0.5 * (t + t.T)
        else:
            second[k] = hk @ (diff * diff)
            if exact:
                second[k] += np.asarray(covariances)[k] * missing_mass[k]
    return SufficientStatistics(nk=nk, shift=shift.copy(), first=first, second=second,
                                log_likelihood=float(log_likelihood),
                                n_rows=resp.shape[0] if rows is None else int(np.asarray(rows).size))


#: ``strategy="auto"`` runs the compiled kernel when rows x components x features reaches this (see
#: :func:`choose_strategy`).
AUTO_COMPILED_MIN_WORK = 200_000
#: ``strategy="auto"`` takes the covariance side when its factorisations cost less than this multiple of the
#: precision side's, and those exceed :data:`COVARIANCE_SIDE_MIN_FACTOR_WORK` times the rows' products (see
#: :func:`choose_strategy`; measured in ``results/bench_em_wide.md``).
COVARIANCE_SIDE_RATIO = 1.25
COVARIANCE_SIDE_MIN_FACTOR_WORK = 14.0

_COLLAPSED = ("a component has collapsed onto too few points or onto a subspace (e.g. a constant or duplicated "
              "column). Increase reg_covar, use fewer components, standardise the data, or drop constant columns.")


def factorisation_work(patterns: MissingPatterns) -> tuple[float, float, float]:
    """The cost model's terms for the fitted rows of ``patterns``: ``(precision_side, covariance_side, rows)``.

    :math:`\\sum_u m_u^3` and :math:`\\sum_u (D - m_u)^3` over the distinct patterns (the flops, up to a
    constant, of one component's Cholesky factors, inverses and products of the missing blocks of the precision,
    or of the observed blocks of the covariance), and :math:`N D^2` (one component's products with the rows,
    the same on both sides).
    """
    D = patterns.n_features
    m = np.array([g.n_missing for g in patterns.groups], dtype=float)
    u = np.array([g.n_unique for g in patterns.groups], dtype=float)
    n = float(sum(g.rows.size for g in patterns.groups))
    return float(u @ m**3), float(u @ (D - m) ** 3), n * D * D


def choose_strategy(n_rows: int, n_components: int, n_features: int, covariance_type: str = "full",
                    strategy: str = "auto", patterns: MissingPatterns | None = None, *,
                    kernels_loaded: bool | None = None) -> str:
    """The E-step kernel for ``strategy``: ``"auto"`` resolved to ``"covariance"``, ``"compiled"`` or ``"numpy"``.

    Diagonal covariances always use ``"numpy"`` (their E-step has no per-pattern factorisation). ``"auto"``, from
    the terms of :func:`factorisation_work` when ``patterns`` is given (measured in ``results/bench_em_wide.md``):

    1. ``"covariance"`` (:mod:`explorer.core.mixtures.covariance_side`) when the precision side's factorisations
       dominate the rows' products, :math:`\\sum_u m_u^3 > 14\\, N D^2` (:data:`COVARIANCE_SIDE_MIN_FACTOR_WORK`),
       and the observed blocks cost less than :data:`COVARIANCE_SIDE_RATIO` (1.25) times them: mostly-missing rows
       with many distinct patterns. Measured per step on 2,000 x 20, 1,000 x 50 and 250 x 200 at 30-80 % MCAR
       (``results/bench_em_wide.md``): these thresholds take the fastest kernel, or one within 1 % of it, in every
       measured case; the covariance side wins from 50 % missing at D = 200 and 70 % at D = 50, and not at D = 20
       up to 80 % (7.5 N D^2 until the compiled kernel factored single-row patterns in SIMD lanes, which moved the
       break-even points at D = 50 and D = 20 up; 10 N D^2 and 0.35 before that);
    2. else ``"compiled"`` when the compiled E-step has already run in this process (its one-time load is paid,
       and it is then faster per step: 600 x 5, K = 3, 0.5 against 2.5 ms; 2,000 x 20, K = 3, 2.5-5x) or rows x
       components x features is at least :data:`AUTO_COMPILED_MIN_WORK` (below it a numpy step costs at most about
       17 ms, so a whole fit costs about what loading the kernels would, 0.3-0.7 s);
    3. else ``"numpy"``.

    ``kernels_loaded`` overrides what the process says about step 2 (True / False: as if the compiled E-step had /
    had not run here).
    """
    if covariance_type != "full":
        return "numpy"
    if strategy != "auto":
        return strategy
    if patterns is not None:
        precision_side, covariance_side, rows = factorisation_work(patterns)
        if (precision_side > COVARIANCE_SIDE_MIN_FACTOR_WORK * rows
                and covariance_side < COVARIANCE_SIDE_RATIO * precision_side):
            return "covariance"
    from explorer.core._compiled import compiled_or_numpy

    return compiled_or_numpy("gmm", n_rows * n_components * n_features, AUTO_COMPILED_MIN_WORK, kernels_loaded)


def check_finite_log_likelihood(total: float) -> None:
    """:class:`DegenerateCovarianceError` when an E-step's log-likelihood is not finite."""
    if not np.isfinite(total):
        raise DegenerateCovarianceError(
            "The log-likelihood is not finite: a component assigns zero density to the data. "
            "Increase reg_covar or use fewer components."
        )


def component_loglik(Xf, missing, patterns, means, covariances, covariance_type, conditionals):
    """The reference (numpy) E-step kernel: per-component observed log-densities (n, K), and with
    ``conditionals`` the completions (K, n, D) and conditional covariances (``observed_gaussian``'s layout) of
    the rows of ``Xf`` (missing entries any finite value) grouped by ``patterns``."""
    K = means.shape[0]
    n = Xf.shape[0]
    ll = np.empty((n, K))
    xhat = np.empty((K,) + Xf.shape) if conditionals else None
    cond = []
    if covariance_type == "full":
        precision, logdet = precision_and_logdet(covariances)
        for k in range(K):
            ll[:, k], _, cc = observed_gaussian(
                Xf, patterns, means[k], precision[k], logdet[k], conditionals=conditionals,
                out=xhat[k] if conditionals else None,
            )
            if conditionals:
                cond.append(tuple(cc))
    else:
        if np.any(covariances <= 0):
            raise DegenerateCovarianceError(
                "A diagonal variance is zero or negative: a component collapsed on a constant feature. "
                "Increase reg_covar or drop constant columns."
            )
        for k in range(K):
            ll[:, k], xh = observed_diagonal(Xf, missing, means[k], covariances[k], conditionals=conditionals)
            if conditionals:
                xhat[k] = xh
    return ll, xhat, tuple(cond)


def statistics_from_loglik(ll, completions, cond_cov, patterns: MissingPatterns, weights, means, covariances, *,
                           covariance_type: str = "full", exact: bool = True):
    """Responsibilities and statistics from per-component log-densities and completions (any kernel's).

    ``ll`` (n_rows, K), ``completions`` (K, n_rows, D) and ``cond_cov`` in the layout of
    :func:`component_loglik`; rows of ``patterns`` with nothing observed are not counted. Returns
    ``(stats, resp, row_log_likelihood)`` as :func:`estep_statistics`.
    """
    with np.errstate(divide="ignore"):  # a component with weight exactly 0 gets log-weight -inf
        weighted = ll + np.log(weights)
    norm = logsumexp(weighted, axis=1)
    with np.errstate(under="ignore"):  # tiny responsibilities underflow to 0, which is what we want
        resp = np.exp(weighted - norm[:, None])
    empty = patterns.empty_rows
    norm[empty] = 0.0
    total = float(norm.sum())
    check_finite_log_likelihood(total)
    counted = np.setdiff1d(np.arange(resp.shape[0]), empty) if empty.size else None
    stats = statistics_from_completions(resp, completions, cond_cov, patterns, means, covariance_type=covariance_type,
                                        exact=exact, covariances=covariances, rows=counted, log_likelihood=total)
    return stats, resp, norm


def estep_statistics(Xf, patterns: MissingPatterns, weights, means, covariances, *,
                     covariance_type: str = "full", exact: bool = True, strategy: str = "auto", workspace=None,
                     with_summary: bool = False, log_offset=None):
    """The E-step of EM for Gaussian mixtures on a block of rows: statistics and responsibilities.

    The one E-step dispatcher: EM (:mod:`explorer.core.mixtures.em_gmm`, its whole data set), the Dask E-step
    (:mod:`explorer.dask_em`, one block per task) and the tests all call it.

    Parameters
    ----------
    Xf : ndarray of shape (n_rows, n_features)
        The block, missing entries set to any finite value (0).
    patterns : MissingPatterns
        ``group_patterns(missing)`` of the block (any layout, ``Xf`` in the same row order).
    weights, means, covariances
        Current parameters, shapes (K,), (K, D), (K, D, D) or (K, D).
    exact : bool
        The exact E-step (conditional covariances counted); False gives the "naive" variant's statistics.
    strategy : {"auto", "compiled", "numpy", "covariance"}
        ``"compiled"``: the numba kernel of :mod:`explorer.core._compiled.gmm` (full covariances; the
        results agree with the numpy kernels to round-off); ``"numpy"``: the reference kernels of
        :mod:`explorer.core.gaussians.gaussian` (:func:`component_loglik`); ``"covariance"``: the
        covariance-side kernel of :mod:`explorer.core.mixtures.covariance_side` (observed blocks factored, for
        mostly-missing rows); ``"auto"``: :func:`choose_strategy`.
        Diagonal covariances always use numpy.
    workspace : explorer.core._compiled.gmm.Workspace, optional
        The compiled kernel's layout and buffers for these rows, reused across steps (EM caches one per data
        set); without it one is built. If another thread holds it, a private copy is used.
    log_offset : ndarray of shape (n_rows, n_components), optional
        A term added to each row's component log-densities before the responsibilities, in the row order of ``Xf``
        (the location model's categorical log-probabilities); the log-likelihoods include it. Rows with nothing
        observed still get ``weights`` and 0.
    with_summary : bool
        Also return the compiled kernel's :class:`explorer.core._compiled.gmm.RespSummary` of the responsibilities
        (entropy and hard counts over the counted rows, summed in its pass), or None from the other kernels.

    Returns
    -------
    stats : SufficientStatistics
        About ``shift = means``; rows with nothing observed are not counted.
    resp : ndarray of shape (n_rows, n_components)
        Responsibilities (the weights for rows with nothing observed), in the row order of ``Xf``, or in the
        caller's order of ``workspace``'s layout when one is given.
    row_log_likelihood : ndarray of shape (n_rows,)
        Per-row observed-data log-likelihood (0 for rows with nothing observed).
    summary : RespSummary or None
        With ``with_summary=True`` only (see above).
    """
    weights = np.asarray(weights, dtype=float)
    means = np.asarray(means, dtype=float)
    covariances = np.asarray(covariances, dtype=float)
    n, D = Xf.shape
    if strategy not in ("auto", "compiled", "numpy", "covariance"):
        raise BadInputError(f"strategy must be 'auto', 'compiled', 'numpy' or 'covariance', got {strategy!r}.")
    if log_offset is not None:
        log_offset = np.asarray(log_offset, dtype=float)
        if log_offset.shape != (n, means.shape[0]):
            raise BadInputError(f"log_offset must have shape {(n, means.shape[0])}, got {log_offset.shape}.")
        if patterns.empty_rows.size:  # rows with nothing observed: weights and 0, as without an offset
            log_offset = log_offset.copy()
            log_offset[patterns.empty_rows] = 0.0
    chosen = choose_strategy(n, means.shape[0], D, covariance_type, strategy, patterns)
    if chosen == "compiled":
        out = _estep_compiled(np.asarray(Xf, dtype=float), patterns, weights, means, covariances, exact, workspace,
                              log_offset)
        return out if with_summary else out[:3]
    if chosen == "covariance":
        from explorer.core.mixtures.covariance_side import covariance_side_estep

        nk, first, second, total, resp, row_ll = covariance_side_estep(Xf, patterns, weights, means, covariances,
                                                                       exact=exact, log_offset=log_offset)
        check_finite_log_likelihood(total)
        stats = SufficientStatistics(nk=nk, shift=means.copy(), first=first, second=second, log_likelihood=total,
                                     n_rows=n - patterns.empty_rows.size)
        return (stats, resp, row_ll, None) if with_summary else (stats, resp, row_ll)
    ll, completions, cond = component_loglik(Xf, patterns.missing, patterns, means, covariances, covariance_type, True)
    if log_offset is not None:
        ll += log_offset
    out = statistics_from_loglik(ll, completions, cond, patterns, weights, means, covariances,
                                 covariance_type=covariance_type, exact=exact)
    return (*out, None) if with_summary else out


def _estep_compiled(Xf, patterns: MissingPatterns, weights, means, covariances, exact, workspace, log_offset=None):
    """:func:`estep_statistics` by the compiled kernel (rows sorted by pattern unless they already are)."""
    from explorer.core._compiled.gmm import Layout, NotPositiveDefinite, Workspace, estep

    precision, logdet = precision_and_logdet(covariances)
    ws = workspace
    if ws is None:
        if patterns.perm is not None:  # the sorted layout: Xf's rows are already in runs, empty rows last
            order, missing = None, patterns.missing
            X = np.where(missing, 0.0, Xf)
        else:
            order = group_patterns(patterns.missing, sort=True).perm
            missing = patterns.missing[order]
            X = np.where(missing, 0.0, Xf[order])
        ws = Workspace(Layout(X, missing, Xf.shape[0] - patterns.empty_rows.size, order), means.shape[0])
    if not ws.lock.acquire(blocking=False):  # another thread steps on the same data: private scratch
        ws = Workspace(ws.layout, means.shape[0], ws.block_rows)
        ws.lock.acquire()
    try:
        nk, first, second, total, resp, summary = estep(ws, weights, means, precision, logdet, exact=exact,
                                                        log_offset=log_offset)
    except NotPositiveDefinite as exc:
        raise DegenerateCovarianceError(
            f"The missing-block precision (component {exc.args[0]}) is singular or not positive definite: "
            + _COLLAPSED
        ) from None
    finally:
        ws.lock.release()
    check_finite_log_likelihood(total)
    stats = SufficientStatistics(nk=nk, shift=means.copy(), first=first, second=second, log_likelihood=float(total),
                                 n_rows=ws.layout.n_fit)
    return stats, resp, ws.rowll, summary


def posterior_mode(nk: float, xbar: np.ndarray, scatter: np.ndarray, prior):
    """Mode of one component's NIW posterior from its (expected) sufficient statistics.

    ``nk`` = :math:`N_j`, ``xbar`` = :math:`\\bar x_j`, ``scatter`` = :math:`W_j` (D x D, or its
    diagonal (D,) for the independent inverse-gamma prior of "diag"); ``prior`` has fields
    ``mean``, ``kappa``, ``dof``, ``scale`` (arrays). Returns
    :math:`((N_j \\bar x_j + \\kappa_P \\mu_P) / (N_j + \\kappa_P),
    (\\Lambda_P + W_j + \\frac{\\kappa_P N_j}{\\kappa_P + N_j} d d^\\top) / (\\nu_P + N_j + D + 2))` with
    :math:`d = \\bar x_j - \\mu_P` (Fraley & Raftery 2007, Table 2, VVV); for "diag" the same per
    coordinate with D = 1 (denominator :math:`\\nu_P + N_j + 3`).
    """
    shrink = prior.kappa * nk / (prior.kappa + nk)
    dev = xbar - prior.mean
    mean = (nk * xbar + prior.kappa * prior.mean) / (nk + prior.kappa)
    if scatter.ndim == 2:
        D = scatter.shape[0]
        return mean, (prior.scale + scatter + shrink * np.outer(dev, dev)) / (prior.dof + nk + D + 2.0)
    return mean, (prior.scale + scatter + shrink * dev * dev) / (prior.dof + nk + 3.0)


def m_step(stats: SufficientStatistics, *, reg_covar: float = 1e-6, prior=None):
    """Weights, means and covariances from sufficient statistics (ML, or the NIW posterior mode).

    :math:`\\pi_j = N_j / \\sum_l N_l`, :math:`\\bar x_j = c_j + S_j / N_j`,
    :math:`W_j = T_j - S_j S_j^\\top / N_j`; ML: :math:`\\Sigma_j = W_j / N_j + \\varepsilon I`; under
    ``prior`` (a resolved prior with array fields, see :func:`posterior_mode`) the posterior mode
    plus :math:`\\varepsilon I`. :math:`N_j` gets 10 eps so an empty component does not divide by zero.
    """
    nk = stats.nk + _EPS10
    weights = nk / nk.sum()
    K, D = stats.shift.shape
    full = stats.second.ndim == 3
    means = np.empty((K, D))
    covs = np.empty_like(stats.second)
    for k in range(K):
        delta = stats.first[k] / nk[k]
        xbar = stats.shift[k] + delta
        if full:
            scatter = stats.second[k] - nk[k] * np.outer(delta, delta)
            scatter = 0.5 * (scatter + scatter.T)
        else:
            scatter = np.maximum(stats.second[k] - nk[k] * delta * delta, 0.0)
        if prior is None:
            means[k], cov = xbar, scatter / nk[k]
        else:
            means[k], cov = posterior_mode(nk[k], xbar, scatter, prior)
        if full:
            cov = 0.5 * (cov + cov.T)
            cov.flat[:: D + 1] += reg_covar
        else:
            cov = cov + reg_covar
        covs[k] = cov
    return weights, means, covs
