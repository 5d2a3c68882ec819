r"""Factor analysis and PPCA on complete data and with missing values (exact EM).

Model (antypas2023 §1.1, marlin2008 §3.3): :math:`z \sim N(0, I_q)`, :math:`x \mid z \sim N(\mu + W z, \Psi)`,
so :math:`x \sim N(\mu, WW^\top + \Psi)`; :math:`\Psi` is diagonal (FA) or :math:`\sigma^2 I` (PPCA).

The E-step (posterior of the factors given the observed entries, one Cholesky factor of
:math:`A_o = I_q + W_o^\top\Psi_o^{-1}W_o` per distinct missingness pattern) and the observed-data
log-likelihood (Woodbury and the determinant lemma, with the corrected signs of antypas2023's erratum)
live in :mod:`explorer.core.factor.fa_conditional`, shared with the mixtures of :mod:`explorer.core.factor.mfa`.

**Exact EM with missing data** (marlin2008 §3.3: the missing values are handled jointly with the
factors, not imputed then refitted). With :math:`\tilde W = [W, \mu]` and :math:`\tilde z = [z; 1]`,
:math:`T_n = E[\tilde z\tilde z^\top \mid x_o]`, the M-step is

.. math::

    \tilde W^{new}_d = \Big(\sum_n E[x_{nd}\tilde z_n^\top]\Big)\Big(\sum_n T_n\Big)^{-1}, \qquad
    \psi_d^{new} = \tfrac1N\Big(\sum_n E[x_{nd}^2] - \tilde W^{new}_d \sum_n E[\tilde z_n x_{nd}]\Big),

where, for an entry ``d`` missing in row ``n`` (``x_d`` is independent of ``x_o`` given ``z``),
:math:`E[x_{nd}\tilde z_n^\top] = \tilde W^{old}_d T_n` and
:math:`E[x_{nd}^2] = \tilde W^{old}_d T_n \tilde W^{old\top}_d + \psi^{old}_d`; observed entries give
:math:`x_{nd}\tilde z_n^\top` and :math:`x_{nd}^2`. PPCA pools the residuals:
:math:`\sigma^2 = \frac{1}{ND}\sum_d(\cdot)` (marlin2008 erratum: the thesis prints ``1/N``). The
joint :math:`[W, \mu]` update is the exact maximiser of the expected complete-data
log-likelihood, and :math:`\psi_d` is floored at ``min_psi`` (the constrained maximiser), so the
observed-data log-likelihood never decreases. The mixture M-step is the same with every row
weighted by its responsibility (:func:`_m_step` with ``resp``).

**PX-EM** (``FAConfig.update="px"``, the default). This M-step converges slowly when the noise is
small: a shift of :math:`\mu` along the columns of :math:`W` is absorbed by the mean of
:math:`E[z]` and shrinks only by :math:`\sigma^2/(\lambda+\sigma^2)` per iteration (on 16 x 16
photo patches a two-component mixture's means were still 0.35 away from their weighted sample
means after 200 iterations). Parameter-expanded EM (Liu, Rubin & Wu 1998) lets the factors have
a free mean b and covariance S in the M-step (their maximisers are the weighted mean and
covariance of :math:`E[z]`, read off :math:`\sum_n T_n`), then folds them back:
:math:`\mu \leftarrow \mu + Wb`, :math:`W \leftarrow W\,\mathrm{chol}(S)`. The expanded model
has the same marginal of x, so the observed-data log-likelihood still never decreases and the
fixed points are those of EM; on complete data :math:`\mu` is the (weighted) sample mean after one
step. ``update="em"`` keeps marlin2008's plain M-step.

API as :mod:`explorer.core.mixtures.em_gmm`: :func:`prepare`, :func:`init`, :func:`step`, :func:`fit`;
frozen states. :func:`ppca_closed_form` is Tipping & Bishop's ML solution on complete data,
:func:`conditional` the Gaussian :math:`p(x_m \mid x_o)` of every row (:class:`FAConditional`,
re-exported from :mod:`explorer.core.factor.fa_conditional`).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy.linalg import cho_solve

from explorer.core.factor.fa_conditional import (  # noqa: F401  (private kernels re-exported for neumann.py and mfa.py)
    _CHUNK,
    FAConditional,
    FAParams,
    _as_params,
    _check_rows,
    _gram_of_inverse,
    _masked_gram,
    _pattern_table,
    _per_pattern,
    _posterior,
    _readonly,
    conditional,
    log_likelihood,
)
from explorer.core.gaussians.gaussian import DegenerateCovarianceError, cholesky
from explorer.core.loop import ConvergenceWarning, run_restarts
from explorer.core.validation import BadInputError, as_float_matrix, check_incomplete

__all__ = [
    "INIT_METHODS", "KINDS", "ConvergenceWarning", "FAConditional", "FAConfig", "FAData", "FAParams",
    "FAResult", "FAState", "conditional", "fit", "init", "init_from_parameters", "log_likelihood",
    "ppca_closed_form", "prepare", "snapshot", "step", "choose_strategy", "estep_compiled", "resolve_strategy",
]

KINDS = ("fa", "ppca")
INIT_METHODS = ("pca", "random")
#: M-step variants. ``"em"``: marlin2008's M-step, the joint regression of x on (z, 1) for
#: :math:`[W, \mu]`; converges slowly along the principal directions when the noise is small
#: (a shift of :math:`\mu` along :math:`W` is absorbed by :math:`E[z]`, contraction
#: :math:`\lambda/(\lambda+\sigma^2)` per iteration). ``"px"`` (default): parameter-expanded EM
#: (Liu, Rubin & Wu 1998): the same regression, then the factors' weighted mean b and covariance S
#: are folded back, :math:`\mu \leftarrow \mu + Wb`, :math:`W \leftarrow W\,\mathrm{chol}(S)`.
#: Same fixed points, still monotone, and on complete data :math:`\mu` is the (weighted) sample mean
#: after one step.
UPDATES = {"px": "parameter-expanded EM", "em": "EM (marlin2008 M-step)"}
#: E-step / M-step statistics kernels (``FAConfig.strategy``; see :func:`resolve_strategy`).
STRATEGIES = ("auto", "compiled", "numpy")
#: ``strategy="auto"`` compiles when fitted rows x features x factors reaches this (see :func:`resolve_strategy`).
AUTO_COMPILED_MIN_WORK = 200_000

# ----------------------------------------------------------------------------- PPCA closed form
def _ppca_from_covariance(S: np.ndarray, q: int, floor: float = 0.0) -> tuple[np.ndarray, float]:
    lam, U = np.linalg.eigh(S)
    lam, U = lam[::-1], U[:, ::-1]
    sigma2 = float(lam[q:].mean())
    if floor > 0 and np.isfinite(sigma2):  # roundoff of a rank-deficient S on a large scale: the floor holds
        sigma2 = max(sigma2, floor)
    if not sigma2 > 0:
        raise DegenerateCovarianceError(
            f"The discarded eigenvalues average {sigma2:.3g}: the data span at most {q} dimensions, so "
            "the noise variance is zero. Use fewer factors or more (non-duplicated) rows."
        )
    return U[:, :q] * np.sqrt(np.maximum(lam[:q] - sigma2, 0.0)), sigma2


def ppca_closed_form(X, n_factors: int) -> FAParams:
    """Maximum-likelihood PPCA on complete data (Tipping & Bishop 1999; antypas2023 §1.1).

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
    update : {"px", "em"}
        ``"em"``: the M-step of marlin2008 (joint :math:`[W, \\mu]`); ``"px"``: the same followed by the
        parameter-expanded (PX-EM) reduction, see :data:`UPDATES`.
    strategy : {"auto", "compiled", "numpy"}
        The E-step and M-step statistics: ``"compiled"`` (:mod:`explorer.core._compiled.factor`: rows sorted by
        pattern, one numba pass per block, BLAS for the N x D x q products), ``"numpy"`` (the reference
        kernels of :mod:`explorer.core.factor.fa_conditional`), ``"auto"``: see :func:`resolve_strategy`. Both give
        the same results (to round-off).
    """

    n_factors: int = 1
    kind: str = "fa"
    tol: float = 1e-6
    max_iter: int = 500
    min_psi: float = 1e-6
    init: str = "pca"
    update: str = "px"
    strategy: str = "auto"

    def __post_init__(self):
        _check_em_settings(self, INIT_METHODS)
        if self.strategy not in STRATEGIES:
            raise BadInputError(f"strategy must be one of {STRATEGIES}, got {self.strategy!r}.")


def _check_em_settings(config, init_methods) -> None:
    """Checks shared by :class:`FAConfig` and :class:`~explorer.core.factor.mfa.MFAConfig`."""
    _check_n_factors(config.n_factors, np.inf)
    if config.kind not in KINDS:
        raise BadInputError(f"kind must be one of {KINDS}, got {config.kind!r}.")
    if not (isinstance(config.tol, numbers.Real) and config.tol >= 0):
        raise BadInputError(f"tol must be a number >= 0, got {config.tol!r}.")
    m = config.max_iter
    if isinstance(m, (bool, np.bool_)) or not isinstance(m, (int, np.integer)) or m < 0:
        raise BadInputError(f"max_iter must be a non-negative integer, got {m!r}.")
    if not (isinstance(config.min_psi, numbers.Real) and config.min_psi > 0):
        raise BadInputError(f"min_psi must be > 0, got {config.min_psi!r}.")
    if config.init not in init_methods:
        raise BadInputError(f"init must be one of {init_methods}, got {config.init!r}.")
    if config.update not in UPDATES:
        raise BadInputError(f"update must be one of {tuple(UPDATES)}, got {config.update!r}.")


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
    cache: dict = field(default_factory=dict, repr=False)  # the compiled kernels' layout and workspaces

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


class _LikelihoodObjective:
    """``objective`` (what the EM loop maximises) = ``log_likelihood``; shared by the FA and MFA states."""

    __slots__ = ()

    @property
    def objective(self) -> float:
        return self.log_likelihood


@dataclass(frozen=True, eq=False, slots=True)
class FAState(_LikelihoodObjective):
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


@dataclass(frozen=True, eq=False, slots=True)
class _EMResult:
    """Outcome of an EM ``fit``: final state, whether and why it stopped, trace of snapshots."""

    state: object
    converged: bool
    stop_reason: str  # "tol" | "max_iter" | "degenerate"
    message: str
    n_iter: int
    trace: tuple
    config: object


@dataclass(frozen=True, eq=False, slots=True)
class FAResult(_EMResult):
    """Outcome of :func:`fit`: final ``state`` (:class:`FAState`), ``converged``, ``stop_reason``
    (``"tol"`` | ``"max_iter"`` | ``"degenerate"``), ``message``, ``n_iter``, ``trace`` of
    snapshots and the :class:`FAConfig`."""


def _state(data: FAData, iteration: int, params: FAParams, strategy: str = "numpy") -> FAState:
    if strategy == "compiled":
        y, cov, _, total = estep_compiled(data, params)
    else:
        y, Linv, _, ll = _posterior(data.Xf, data.missing, data.pattern_missing, data.row_pattern, params)
        cov = _gram_of_inverse(Linv)
        total = float(ll[data.fit_rows].sum())
    _readonly(y, cov)
    return FAState(iteration, params, total, y, cov)


# ----------------------------------------------------------------------------- compiled kernels
def resolve_strategy(data: FAData, config: FAConfig) -> str:
    """The kernels a fit uses: ``"compiled"`` or ``"numpy"``.

    ``"auto"`` mirrors :func:`explorer.core.mixtures.em_gmm.resolve_strategy` with the factors in place of the
    components: ``"compiled"`` when fitted rows x features x factors is at least
    :data:`AUTO_COMPILED_MIN_WORK` (200,000), or the compiled FA step has already run in this process, and numba
    imports, else ``"numpy"``. Measured
    (``results/bench_fa.md``, one BLAS thread): once loaded the compiled step is faster than the numpy
    step at every size tried (300 x 10, q = 2, 30 % MCAR: 0.7 vs 2.0 ms; 2,000 x 20, q = 3: 2.6 vs
    11.6 ms; 20,000 x 50, q = 5: 61 vs 208 ms; complete data 1.7-2.5x), but the first compiled step of
    a process pays about 0.7 s to import numba and load the cached machine code (several seconds when
    it compiles); below the threshold a numpy step takes at most about 10 ms, so a whole fit of small
    data costs about that load, and small interactive fits (the app's pages) never wait for it.
    """
    return choose_strategy(data, config.n_factors, config.strategy)


def choose_strategy(data: FAData, n_factors: int, strategy: str = "auto", n_components: int = 1) -> str:
    """:func:`resolve_strategy` for ``n_components`` factor models on ``data`` (the mixture of factor analysers
    runs one compiled E-step per component): the work is fitted rows x features x factors x components."""
    if strategy != "auto":
        return strategy
    key = ("fa auto strategy", int(n_factors), int(n_components))
    chosen = data.cache.get(key)  # once per data, q and K: a fit never switches kernel half-way
    if chosen is None:
        from explorer.core._compiled import compiled_or_numpy

        work = data.fit_rows.size * data.n_features * n_factors * n_components
        chosen = data.cache[key] = compiled_or_numpy("factor", work, AUTO_COMPILED_MIN_WORK)
    return chosen


def _layout(data: FAData):
    """The fitted rows sorted by pattern (one run per distinct pattern; cached on ``data``) and each
    run's pattern index."""
    from explorer.core._compiled.gmm import Layout

    out = data.cache.get("fa_layout")
    if out is None:
        rows = data.fit_rows
        perm = rows[np.argsort(data.row_pattern[rows], kind="stable")]
        lay = Layout(data.Xf[perm], data.missing[perm], perm.size, perm)
        out = data.cache["fa_layout"] = (lay, data.row_pattern[perm[lay.run_start[:-1]]])
    return out


def workspace(data: FAData, n_factors: int):
    """The compiled kernels' scratch buffers for this data and q (allocated once per data and q, cached)."""
    from explorer.core._compiled.factor import FAWorkspace

    key = ("fa_workspace", int(n_factors))
    ws = data.cache.get(key)
    if ws is None:
        lay, run_pattern = _layout(data)
        ws = data.cache[key] = FAWorkspace(lay, n_factors, run_pattern, data.X.shape[0])
    return ws


class _Scratch:
    """``with _Scratch(data, q) as ws``: the cached workspace, or a private one when another thread holds it."""

    def __init__(self, data, q):
        self.ws = workspace(data, q)

    def __enter__(self):
        if not self.ws.lock.acquire(blocking=False):
            from explorer.core._compiled.factor import FAWorkspace

            ws = self.ws
            self.ws = FAWorkspace(ws.layout, ws.n_factors, ws.run_pattern, ws.n_rows, ws.block_rows)
            self.ws.lock.acquire()
        return self.ws

    def __exit__(self, *exc):
        self.ws.lock.release()


def estep_compiled(data: FAData, params: FAParams):
    """The E-step at ``params`` by the compiled kernel: ``(latent_mean (n, q), latent_cov (U, q, q), row
    log-likelihoods (n,), total over the fitted rows)``, as the numpy kernel of
    :mod:`explorer.core.factor.fa_conditional` gives them (rows with nothing observed: the prior, log-likelihood 0).
    """
    from explorer.core._compiled.factor import LatentNotPositiveDefinite, estep

    with _Scratch(data, params.n_factors) as ws:
        try:
            y, cov, rowll, total = estep(ws, params.mean, params.loadings, params.psi, data.pattern_missing.shape[0])
        except LatentNotPositiveDefinite:
            raise DegenerateCovarianceError(
                "The latent posterior precision I + W_o^T Psi_o^-1 W_o is not numerically positive definite: "
                "the loadings or noise variances are not finite or extreme. Standardise the data or raise min_psi."
            ) from None
    return y, cov, rowll, float(total)


def _partial_scatter(data: FAData, rows: np.ndarray, centre: np.ndarray) -> np.ndarray:
    """Scatter of ``rows`` around ``centre`` over their observed entries (missing ones count 0), / n: (D, D)."""
    Z = np.where(data.missing[rows], 0.0, data.X[rows] - centre)
    return Z.T @ Z / rows.size


def _check_features(P, data: FAData) -> None:
    if P.n_features != data.n_features:
        raise BadInputError(f"The parameters have {P.n_features} feature(s); the data have {data.n_features}.")


def init(data: FAData, config: FAConfig, rng: np.random.Generator) -> FAState:
    """Initial state (see ``FAConfig.init``); ``rng`` is used by ``init="random"`` only."""
    D, q = data.n_features, config.n_factors
    _check_n_factors(q, D)
    if config.init == "pca":
        S = _partial_scatter(data, data.fit_rows, data.col_mean)
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
    return _state(data, 0, FAParams.from_arrays(data.col_mean, W, psi), resolve_strategy(data, config))


def init_from_parameters(data: FAData, params) -> FAState:
    """State at iteration 0 from given parameters (FAParams, or a state / result of another fit)."""
    P = _as_params(params)
    _check_features(P, data)
    return _state(data, 0, P)


def _missing_moments(mis, zt, row_pattern, pattern_mis, latent_cov, resp=None):
    """:math:`S_d = \\sum_n r_n [d \\text{ missing in } n]\\, T_n` for the given columns: (D_m, q+1, q+1).

    ``mis`` (n, D_m) already carries the row weights ``r_n`` (``resp``, 1 when None).
    """
    n, p = zt.shape
    q = p - 1
    S = np.zeros((mis.shape[1], p, p))
    c = max(1, _CHUNK // (p * p))
    for s in range(0, n, c):
        zc = zt[s : s + c]
        S += (mis[s : s + c].T @ (zc[:, :, None] * zc[:, None, :]).reshape(zc.shape[0], p * p)).reshape(-1, p, p)
    counts = np.bincount(row_pattern, weights=resp, minlength=pattern_mis.shape[0]).astype(float)
    S[:, :q, :q] += ((counts[:, None] * pattern_mis).T @ latent_cov.reshape(-1, q * q)).reshape(-1, q, q)
    return S


def _px_expansion(T: np.ndarray, q: int, N: float):
    """PX-EM: the M-step of the expanded model's factor distribution z ~ N(b, S), from
    :math:`\\sum_n r_n E[\\tilde z\\tilde z^\\top]` (``T``, (q+1, q+1)) and :math:`N = \\sum_n r_n`:
    ``(b, chol(S))``, the weighted mean and the Cholesky factor of the weighted covariance of the
    factors; None when S is not positive definite (a component without rows keeps the plain M-step)."""
    if not N > 0:
        return None
    b = T[:q, q] / N
    try:
        L = np.linalg.cholesky(T[:q, :q] / N - np.outer(b, b))
    except np.linalg.LinAlgError:
        return None
    return (b, L) if np.all(np.isfinite(L)) else None


def _m_step(data: FAData, P: FAParams, latent_mean, latent_cov, kind: str, min_psi: float,
            resp: np.ndarray | None = None, ridge: float = 0.0, expand: bool = False) -> FAParams:
    """The exact M-step (module docstring) from the E-step at ``P``: new :class:`FAParams`.

    ``latent_mean`` (n, q) and ``latent_cov`` (U, q, q) are the E-step at ``P`` for all rows of
    ``data``. ``resp`` (n_fit,): weights of the fitted rows (a mixture component's
    responsibilities; None = 1). ``ridge`` >= 0 is added to the diagonal of
    :math:`\\sum_n r_n T_n` (0: the exact maximiser). ``expand``: the parameter-expanded M-step
    (PX-EM, see :data:`UPDATES`).
    """
    rows = data.fit_rows
    q = P.n_factors
    rp = data.row_pattern[rows]
    zt = np.hstack([latent_mean[rows], np.ones((rows.size, 1))])  # E[z~], (N, q+1)
    wz = zt if resp is None else zt * resp[:, None]
    N = rows.size if resp is None else float(resp.sum())
    T = wz.T @ zt
    counts = np.bincount(rp, weights=resp, minlength=latent_cov.shape[0])
    T[:q, :q] += np.tensordot(counts, latent_cov, 1)
    Xf = data.Xf[rows]
    num = Xf.T @ wz  # sum_n r_n E[x_nd z~_n^T] (observed part), (D, q+1)
    ex2 = np.einsum("nd,nd->d", Xf, Xf) if resp is None else resp @ (Xf * Xf)
    cols = np.flatnonzero(data.missing[rows].any(axis=0))
    if cols.size:
        mis = data.missing[rows][:, cols].astype(float)
        if resp is not None:
            mis *= resp[:, None]
        S = _missing_moments(mis, zt, rp, data.pattern_missing[:, cols].astype(float), latent_cov, resp)
        _add_missing(P, cols, S, mis.sum(axis=0), num, ex2)
    return _m_step_finish(P, T, num, ex2, N, kind, min_psi, ridge, expand)


def _add_missing(P: FAParams, cols, S, n_missing, num, ex2) -> None:
    """Adds the missing entries' expectations (module docstring) to ``num`` and ``ex2`` in place, from
    their moments ``S`` (len(cols), q+1, q+1) and (weighted) counts ``n_missing``."""
    Wt_old = np.hstack([P.loadings, P.mean[:, None]])[cols]
    WS = np.einsum("dk,dkl->dl", Wt_old, S)
    num[cols] += WS
    ex2[cols] += np.einsum("dl,dl->d", WS, Wt_old) + n_missing * P.psi[cols]


def _m_step_finish(P: FAParams, T, num, ex2, N, kind, min_psi, ridge=0.0, expand=False) -> FAParams:
    """The M-step from its sums: :math:`\\sum r T_n` (``T``), :math:`\\sum r E[x\\tilde z^\\top]`
    (``num``), :math:`\\sum r E[x_d^2]` (``ex2``) and :math:`\\sum r` (``N``)."""
    q = P.n_factors
    expansion = _px_expansion(T, q, N) if expand else None  # before the ridge: the factors' own moments
    if ridge:
        T.flat[:: q + 2] += ridge
    Wt = cho_solve((cholesky(T, what="sum of E[z z^T]"), True), num.T).T
    resid = ex2 - np.einsum("dk,dk->d", Wt, num)
    N = max(N, np.finfo(float).tiny)
    psi = np.full(P.n_features, resid.sum() / (N * P.n_features)) if kind == "ppca" else resid / N
    W, mu = Wt[:, :q], Wt[:, q]
    if expansion is not None:  # x = mu* + W* z + e with z ~ N(b, L L^T) is mu = mu* + W* b, W = W* L, z ~ N(0, I)
        b, L = expansion
        W, mu = W @ L, mu + W @ b
    return FAParams.from_arrays(mu, W, np.maximum(psi, min_psi))


def _m_step_compiled(data: FAData, P: FAParams, latent_mean, latent_cov, kind: str, min_psi: float,
                     expand: bool = False) -> FAParams:
    """:func:`_m_step` (no weights, no ridge) with its sums from :func:`explorer.core._compiled.factor.moments`."""
    from explorer.core._compiled.factor import moments

    with _Scratch(data, P.n_factors) as ws:
        T, num, S = moments(ws, latent_mean, latent_cov)
        ex2 = ws.ex2_observed.copy()
        cols = np.flatnonzero(ws.n_missing)
        if cols.size:
            _add_missing(P, cols, S[cols], ws.n_missing[cols], num, ex2)
    return _m_step_finish(P, T, num, ex2, float(data.fit_rows.size), kind, min_psi, expand=expand)


def step(state: FAState, data: FAData, config: FAConfig) -> FAState:
    """One EM iteration (M-step from the cached E-step, then the E-step at the new parameters); pure."""
    strategy = resolve_strategy(data, config)
    m_step = _m_step_compiled if strategy == "compiled" else _m_step
    new = m_step(data, state.params, state.latent_mean, state.latent_cov, config.kind, config.min_psi,
                 expand=config.update == "px")
    return _state(data, state.iteration + 1, new, strategy)


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
    return _run_em(FAResult, data, config, rng, init, step, snapshot, callback, init_state)


def _run_em(result_cls, data, config, rng, init, step, snapshot, callback, init_state):
    """The EM loop of :func:`fit` and :func:`explorer.core.factor.mfa.fit` (one run; warns at their caller)."""
    out = run_restarts(
        n_runs=1,
        start=lambda: init_state if init_state is not None else init(data, config, rng),
        step=lambda s: step(s, data, config),
        snapshot=snapshot,
        change=lambda old, new: (new.log_likelihood - old.log_likelihood) / data.fit_rows.size,
        max_iter=config.max_iter,
        tol=config.tol,
        callback=callback,
        stacklevel=4,  # run_restarts -> _run_em -> fit -> the caller of fit
    )
    return result_cls(out.state, out.stop_reason == "tol", out.stop_reason, out.message, out.state.iteration,
                      out.trace, config)

