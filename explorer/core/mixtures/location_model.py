r"""The location model: a finite mixture over numeric and categorical columns with missing entries anywhere, by MAP-EM.

Model (the latent-class form of the location model; Ghahramani & Jordan 1994 treat real and discrete features
in one mixture, section 4.1). A row has D numeric columns :math:`x \in \mathbb R^D` and J categorical
columns :math:`c_j \in \{0, \dots, V_j - 1\}`; given its component :math:`z = k` they are independent
blocks, a Gaussian for the numeric block and one categorical distribution per categorical column:

.. math::

    p(x, c) = \sum_{k=1}^K \pi_k\, N(x; \mu_k, \Sigma_k) \prod_{j=1}^J \theta_{kj}[c_j],
    \qquad \sum_v \theta_{kj}[v] = 1,

with :math:`\Sigma_k` full or diagonal (``covariance_type``). Within a component the numeric columns are
correlated; the categorical columns are related to each other and to the numeric ones only through
:math:`z` (a latent-class model for the categories). The location model proper (known since 1961; Krzanowski
1993) puts a Gaussian in every cell of the categories' cross-classification; this latent-class form puts one in
every component instead, as Hunt & Jorgensen's MULTIMIX, which generalises both the latent class model and the
Gaussian mixture.

Missing entries (MAR) may be anywhere. Row :math:`n` has observed numeric coordinates :math:`o_n`
(missing :math:`m_n`) and observed categorical columns :math:`O_n`. Its observed-data likelihood
integrates the missing entries out, which for a categorical column simply drops its factor:

.. math::

    p(x_n^o, c_n^o) = \sum_k \pi_k\, N(x_n^o; \mu_k^o, \Sigma_k^{oo}) \prod_{j \in O_n} \theta_{kj}[c_{nj}] .

E-step (in log space):

.. math::

    \log r_{nk} = \log\pi_k + \log N(x_n^o; \mu_k^o, \Sigma_k^{oo})
                  + \sum_{j \in O_n} \log\theta_{kj}[c_{nj}] - \log p(x_n^o, c_n^o),

and for the numeric block the conditional completions and covariances of
:mod:`explorer.core.mixtures.em_gmm`, :math:`\hat x_{nk}^m = \mu_k^m + \Sigma_k^{mo}(\Sigma_k^{oo})^{-1}
(x_n^o - \mu_k^o)`, :math:`Q_{nk} = \Sigma_k^{mm} - \Sigma_k^{mo}(\Sigma_k^{oo})^{-1}\Sigma_k^{om}`.
The Gaussian engine computes them: :func:`~explorer.core.mixtures.suffstats.estep_statistics` takes the
categorical term as a per-row offset of the numeric block's per-component log-densities and gives the
responsibilities and the expected Gaussian sufficient statistics :math:`N_k^x, S_k, T_k`
(:mod:`explorer.core.mixtures.suffstats`) by any of its kernels, the compiled one on larger data
(``LocationConfig.strategy``); rows with no numeric observation get theirs from the categorical term alone.

Which entries are "missing data" of the EM (a choice; every choice below is an EM, increases the
objective, and has the same fixed points, the stationary points of the observed-data log posterior):

* a **missing categorical cell** is integrated out, not completed: it contributes nothing to the expected
  level counts (the standard observed-data EM for a categorical factor; completing it, i.e. counting
  :math:`r_{nk}\theta_{kj}^{old}` as :mod:`explorer.core.classifiers.joint_mixture` does for a missing
  label, gives the same fixed points and converges more slowly);
* a **partly observed numeric block** is completed (:math:`\hat x_{nk}^m`, :math:`Q_{nk}`), as in
  :mod:`explorer.core.mixtures.em_gmm`: a Gaussian's marginal has no closed-form M-step of its own;
* a **wholly missing numeric block** is integrated out, like a categorical cell: such a row (categories
  only) counts in :math:`N_k` for the weights and in the level counts, not in the Gaussian statistics;
* a row with **nothing observed** has :math:`r_n = \pi` and does not enter the fit (its likelihood is
  1 whatever the parameters), as in :mod:`explorer.core.mixtures.em_gmm`.

M-step (MAP), with :math:`N` the rows with at least one observed entry and
:math:`N_k = \sum_n r_{nk}` over them:

.. math::

    \pi_k = \frac{\alpha - 1 + N_k}{N - K + K\alpha}, \qquad
    \theta_{kj}[v] = \frac{\phi_j - 1 + n_{kjv}}{\sum_u n_{kju} + V_j(\phi_j - 1)}, \qquad
    n_{kjv} = \sum_{n:\, j \in O_n,\, c_{nj} = v} r_{nk},

(Marlin 2008 eqs. 4.1.13-4.1.14, :mod:`explorer.core.discrete.categorical_mixture`; a component with no
mass in a column gets the uniform :math:`1/V_j` when :math:`\phi_j = 1`), and :math:`(\mu_k, \Sigma_k)` the
Normal-inverse-Wishart posterior mode of :func:`~explorer.core.mixtures.suffstats.m_step` from the Gaussian
statistics, sums over the rows with a numeric observation (Fraley & Raftery 2007; see
:mod:`explorer.core.mixtures.em_gmm`).

Objective (the log posterior up to the Dirichlet normalisers; never decreases, with ``reg_covar = 0``
exactly):

.. math::

    \sum_{n} \log p(x_n^o, c_n^o) + \sum_k \log \mathrm{NIW}(\mu_k, \Sigma_k)
    + (\alpha - 1)\sum_k \log\pi_k + \sum_j (\phi_j - 1) \sum_{k, v} \log\theta_{kj}[v] .

Priors and their defaults:

* Gaussian block: ``prior="auto"``, the data-scaled Normal-inverse-Wishart prior of
  :mod:`explorer.core.mixtures.em_gmm` computed on the numeric block alone (``"fraley-raftery"``, an
  :class:`~explorer.core.mixtures.prior.NIWPrior`, or None for maximum likelihood, as ``EMConfig.prior``);
* weights: symmetric Dirichlet(:math:`\alpha`), default :math:`\alpha = 1` (maximum-likelihood weights, as
  the Gaussian mixture's MAP-EM, which puts no prior on them): with no categorical column the model and its
  iterates are then those of :mod:`explorer.core.mixtures.em_gmm`;
* every :math:`\theta_{kj}`: symmetric Dirichlet(:math:`\phi_j`), default :math:`\phi_j = 1 + 1/V_j`. The MAP
  adds :math:`1/V_j` to every level's count, one pseudo-observation per component and column whatever the
  number of levels: no level gets probability 0 (a level a component never saw keeps
  :math:`(1/V_j)/(N_{kj} + 1)`, so an imputation is never certain from a few rows), and a column with many
  levels is not flattened, which a constant :math:`\phi = 1.5` or 2 (Marlin's thesis) would do by adding
  :math:`V_j/2` or :math:`V_j` pseudo-observations (50 or 100 for 100 levels, more than a small component
  holds). A number sets the same :math:`\phi \ge 1` for every column (1 = maximum likelihood).

Reductions, tested: with no categorical column this is :mod:`explorer.core.mixtures.em_gmm` (same iterates
from the same parameters, same prior); with no numeric column it is
:mod:`explorer.core.discrete.categorical_mixture` (same iterates when every row has an observed entry; that
module also counts rows with nothing observed in N, with :math:`q_n = \pi`, which changes the iterates but
not the fixed points).

Predictions (:func:`predict_proba`): :math:`P(c_{nj} = v \mid \text{row}) = \sum_k r_{nk}^{(-j)}
\theta_{kj}[v]`, where :math:`r^{(-j)}` conditions on every observed entry of the row except column
:math:`j` itself. For a missing cell that is all the row's evidence (the predictive used for imputation);
for an observed cell it is the leave-that-cell-out prediction (what the model would say had the cell been
hidden), never the observed level with certainty. The numeric block (:func:`conditional_numeric`) is the
Gaussian-mixture conditional :math:`\sum_k r_{nk} N(x^m; \hat x_{nk}^m, Q_{nk})` with weights :math:`r_{nk}`
that include the categorical evidence. :func:`sample` draws both jointly: :math:`k \sim r_n`, then every
missing category from :math:`\theta_{kj}` and the missing numeric entries from component :math:`k`'s
conditional Gaussian.

Input: numeric columns as floats with NaN = missing, categorical columns as integer codes
:math:`0..V_j - 1` with ``-1`` = missing (:func:`prepare`). A categorical column with one level is allowed
(it carries no information and is predicted with certainty); one with more than ``max_levels`` levels
(default 100) is rejected as an identifier or free text.

The E-step runs on the numpy reference kernel: the compiled and covariance-side kernels of
:func:`~explorer.core.mixtures.suffstats.estep_statistics` return finished statistics and take no extra
per-row log-likelihood term.

API (as :mod:`explorer.core.mixtures.em_gmm` and :mod:`explorer.core.discrete.categorical_mixture`):
:class:`LocationConfig`, :func:`prepare` -> :class:`LocationData`, :func:`init` /
:func:`init_from_parameters` -> :class:`LocationState`, :func:`step` (pure), :func:`fit` (a loop over
:func:`step`, :mod:`explorer.core.loop`), :func:`select_components` (K by held-out cells or BIC, guarded),
:func:`log_likelihood_rows`, :func:`posterior`,
:func:`predict_proba`, :func:`conditional_numeric`, :func:`impute`, :func:`sample`. States are immutable.

References: Z. Ghahramani and M. I. Jordan, *Learning from incomplete data*, MIT AI Memo 1509 (1994);
W. J. Krzanowski, *The location model for mixtures of categorical and continuous variables*, Journal of
Classification 10:25-49 (1993); L. Hunt and M. Jorgensen, *Mixture model clustering using the MULTIMIX program*,
Australian & New Zealand Journal of Statistics 41 (1999); B. M. Marlin, *Missing data problems in machine
learning*, PhD thesis (2008), section 4.1; C. Fraley and A. E. Raftery, *Bayesian regularization for normal
mixture estimation and model-based clustering*, Journal of Classification 24 (2007).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from scipy.special import logsumexp

from explorer.core.gaussians.conditional import ConditionalMixture, draw_components
from explorer.core.gaussians.patterns import MissingPatterns, group_patterns
from explorer.core.loop import ConvergenceWarning, run_restarts
from explorer.core.mixtures.em_gmm import COVARIANCE_TYPES, EMConfig, resolve_prior
from explorer.core.mixtures.em_gmm import prepare as _prepare_numeric
from explorer.core.mixtures.kmeans import kmeans
from explorer.core.mixtures.prior import PRIORS, NIWPrior, log_prior, resolved_arrays
from explorer.core.mixtures.suffstats import (
    SufficientStatistics,
    check_finite_log_likelihood,
    choose_strategy,
    component_loglik,
    estep_statistics,
    m_step,
    statistics_from_completions,
)
from explorer.core.validation import (
    BadInputError,
    check_dirichlet,
    check_draws,
    check_incomplete,
    check_int,
    check_nonnegative,
    column_label,
    is_int,
)

__all__ = [
    "LocationConfig",
    "LocationData",
    "LocationState",
    "LocationResult",
    "ConvergenceWarning",
    "INIT_METHODS",
    "STRATEGIES",
    "MAX_LEVELS",
    "prepare",
    "init",
    "init_from_parameters",
    "step",
    "fit",
    "n_parameters",
    "select_components",
    "SELECT_MAX_K",
    "SELECT_N_INIT",
    "SELECT_CRITERIA",
    "HELDOUT_RATE",
    "HELDOUT_REPEATS",
    "HELDOUT_TOL",
    "HELDOUT_ENOUGH_CELLS",
    "guard_rows",
    "heldout_masks",
    "heldout_log_predictive",
    "log_likelihood_rows",
    "posterior",
    "predict_proba",
    "conditional_numeric",
    "impute",
    "sample",
]

INIT_METHODS = ("kmeans", "random")
#: The numeric block's E-step kernels (:func:`~explorer.core.mixtures.suffstats.estep_statistics`).
STRATEGIES = ("auto", "compiled", "numpy", "covariance")
#: Default of :func:`prepare`'s ``max_levels``: a categorical column with more levels is refused.
MAX_LEVELS = 100
_EPS10 = 10 * np.finfo(float).eps
_LOG_FLOOR = np.log(1e-300)


def _safe_log(p: np.ndarray) -> np.ndarray:
    """log with 0 floored at log(1e-300) (a maximum-likelihood probability may reach 0)."""
    with np.errstate(divide="ignore"):
        return np.maximum(np.log(p), _LOG_FLOOR)


def _readonly(*arrays):
    for a in arrays:
        if isinstance(a, np.ndarray):
            a.setflags(write=False)


# ----------------------------------------------------------------------------- configuration
@dataclass(frozen=True, slots=True)
class LocationConfig:
    """Settings of the MAP-EM fit of the location model.

    Parameters
    ----------
    n_components : int
        K >= 1 (at most the number of rows with an observed entry). Default 2: with one component the
        categorical columns are independent of the numeric ones and of each other.
    covariance_type : {"full", "diag"}
        Of the numeric block.
    reg_covar : float
        Added to the diagonal of every covariance after each M-step (>= 0).
    prior : None, "auto", "fraley-raftery" or NIWPrior, default "auto"
        Normal-inverse-Wishart prior on the numeric block of every component, as ``EMConfig.prior`` of
        :mod:`explorer.core.mixtures.em_gmm` (its defaults computed from the numeric columns); None =
        maximum likelihood for that block.
    alpha : float
        Symmetric Dirichlet parameter of the weights, >= 1 (default 1: maximum-likelihood weights, as
        the Gaussian mixture).
    phi : float or None
        Symmetric Dirichlet parameter of every :math:`\\theta_{kj}`, >= 1; None (default) = :math:`1 + 1/V_j`
        per column (see the module docstring).
    tol : float
        Stop when the objective changes by less than ``tol`` per fitted row.
    max_iter : int
        Most EM steps per restart.
    n_init : int
        Restarts; the one with the highest final objective is kept.
    init : {"kmeans", "random"}
        ``"kmeans"``: k-means with partial distances (k-means++ seeds) on the standardised numeric columns
        and the one-hot categorical columns scaled by :math:`1/\\sqrt 2` (two different levels are at
        squared distance 1, as one standard deviation); ``"random"``: responsibilities drawn from a flat
        Dirichlet per row. Either way one M-step from those responsibilities gives the parameters (missing
        numeric entries filled by the cluster's observed mean), then the E-step.
    strategy : {"auto", "compiled", "numpy", "covariance"}
        The numeric block's E-step kernel, as ``EMConfig.strategy`` of :mod:`explorer.core.mixtures.em_gmm`
        (the categorical log-probabilities enter it as a per-row offset; every kernel gives the same fit to
        round-off). ``"auto"``: :func:`~explorer.core.mixtures.suffstats.choose_strategy`, once per data and K.
    """

    n_components: int = 2
    covariance_type: str = "full"
    reg_covar: float = 1e-6
    prior: object = "auto"
    alpha: float = 1.0
    phi: float | None = None
    tol: float = 1e-5
    max_iter: int = 300
    n_init: int = 1
    init: str = "kmeans"
    strategy: str = "auto"

    def __post_init__(self):
        if not is_int(self.n_components) or self.n_components < 1:
            raise BadInputError(f"n_components must be a positive integer, got {self.n_components!r}.")
        if self.covariance_type not in COVARIANCE_TYPES:
            raise BadInputError(f"covariance_type must be one of {COVARIANCE_TYPES}, got {self.covariance_type!r}.")
        check_nonnegative("reg_covar", self.reg_covar)
        if not (self.prior is None or isinstance(self.prior, NIWPrior)
                or (isinstance(self.prior, str) and self.prior in PRIORS)):
            raise BadInputError(f"prior must be None (maximum likelihood), 'auto', 'fraley-raftery' or an NIWPrior, "
                                f"got {self.prior!r}.")
        check_dirichlet("alpha", self.alpha)
        if self.phi is not None:
            check_dirichlet("phi", self.phi)
        check_nonnegative("tol", self.tol)
        check_int("max_iter", self.max_iter, 0)
        check_int("n_init", self.n_init, 1)
        if self.init not in INIT_METHODS:
            raise BadInputError(f"init must be one of {INIT_METHODS}, got {self.init!r}.")
        if self.strategy not in STRATEGIES:
            raise BadInputError(f"strategy must be one of {STRATEGIES}, got {self.strategy!r}.")

    def em_config(self) -> EMConfig:
        """The :class:`~explorer.core.mixtures.em_gmm.EMConfig` of the numeric block (its prior's defaults)."""
        return EMConfig(n_components=self.n_components, covariance_type=self.covariance_type,
                        reg_covar=self.reg_covar, prior=self.prior, strategy="numpy")


# ----------------------------------------------------------------------------- data
@dataclass(frozen=True, eq=False, slots=True)
class LocationData:
    """Mixed incomplete data prepared once (see :func:`prepare`).

    The numeric rows are grouped by missingness in the *sorted layout* of
    :func:`~explorer.core.gaussians.patterns.group_patterns` (rows with no numeric observation last);
    ``perm`` maps it to the caller's rows (``layout_row = caller_row[perm]``), and every ``_p`` array is in it.

    Attributes
    ----------
    X : ndarray of shape (n_samples, n_numeric)
        Numeric columns, NaN at missing entries (caller's order).
    missing : ndarray of bool, shape (n_samples, n_numeric)
    codes : ndarray of int64, shape (n_samples, n_categorical)
        Level codes ``0 .. n_levels[j] - 1``, ``-1`` = missing (caller's order).
    n_levels : tuple of int
        :math:`V_j` per categorical column.
    patterns : MissingPatterns or None
        The numeric block's grouping in the sorted layout (None without numeric columns).
    Xp : ndarray of shape (n_samples, n_numeric)
        ``X`` in the sorted layout, 0 at missing entries.
    perm : ndarray of shape (n_samples,)
    observed_p : tuple
        Per categorical column ``(rows, codes)``: the layout rows where it is observed and their codes.
    fit_p : ndarray
        Layout rows with at least one observed entry (numeric or categorical).
    numeric_columns, categorical_columns : tuple of str or None
        Names, for messages.
    """

    X: np.ndarray
    missing: np.ndarray
    codes: np.ndarray
    n_levels: tuple
    patterns: MissingPatterns | None
    Xp: np.ndarray
    perm: np.ndarray
    observed_p: tuple
    fit_p: np.ndarray
    numeric_columns: tuple | None = None
    categorical_columns: tuple | None = None
    # the numeric block as EMData for the prior's data moments, built on first use
    cache: dict = field(default_factory=dict, repr=False)

    @property
    def n_samples(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_numeric(self) -> int:
        return int(self.X.shape[1])

    @property
    def n_categorical(self) -> int:
        return int(self.codes.shape[1])

    @property
    def n_fit(self) -> int:
        return int(self.fit_p.size)


def _names(columns, count: int, what: str):
    if columns is None:
        return None
    names = tuple(str(c) for c in columns)
    if len(names) != count:
        raise BadInputError(f"{what} has {len(names)} name(s) but the data have {count} such column(s).")
    return names


def _as_codes(codes, n_rows) -> np.ndarray:
    """Codes as a 2-D int64 array (-1 = missing; NaN in float input also means missing)."""
    if codes is None:
        return np.zeros((0 if n_rows is None else n_rows, 0), dtype=np.int64)
    arr = np.asarray(codes)
    if arr.ndim != 2:
        raise BadInputError(f"codes must be a 2-D array (n_samples, n_categorical) of integer level codes; got "
                            f"{arr.ndim} dimension(s). Reshape a single column with codes.reshape(-1, 1).")
    if arr.dtype.kind == "f":
        if np.isinf(arr).any():
            raise BadInputError("codes hold infinite values; use -1 (or NaN) for a missing category.")
        known = ~np.isnan(arr)
        if np.any(arr[known] != np.round(arr[known])):
            raise BadInputError("codes must be integer level codes 0..V-1 (-1 = missing); found non-integer values.")
        arr = np.where(known, arr, -1.0)
    elif arr.dtype.kind not in "iu":
        raise BadInputError(f"codes must be integer level codes 0..V-1 (-1 = missing); got dtype {arr.dtype}. Encode "
                            "text categories as codes first (e.g. pandas.factorize or pandas.Categorical.codes).")
    return np.array(arr, dtype=np.int64)


def _levels(codes: np.ndarray, n_levels, max_levels: int, columns) -> tuple:
    J = codes.shape[1]
    if n_levels is None:
        levels = tuple(max(1, int(codes[:, j].max(initial=-1)) + 1) for j in range(J))
    else:
        levels = tuple(np.atleast_1d(np.asarray(n_levels, dtype=object)).tolist())
        if len(levels) != J:
            raise BadInputError(f"n_levels has {len(levels)} entr(ies) but codes have {J} column(s); give one "
                                "number of levels per categorical column.")
        for j, v in enumerate(levels):
            if not is_int(v) or v < 1:
                raise BadInputError(f"n_levels of categorical {column_label(j, columns)} must be a positive integer, "
                                    f"got {v!r}.")
        levels = tuple(int(v) for v in levels)
    for j, v in enumerate(levels):
        if v > max_levels:
            raise BadInputError(
                f"categorical {column_label(j, columns)} has {v} levels, more than max_levels={max_levels}: it "
                "looks like an identifier or free text rather than a category. Drop it, group its rare levels, "
                "or raise max_levels if the levels are real categories.")
    return levels


def _check_code_range(codes: np.ndarray, levels: tuple, columns) -> None:
    for j, v in enumerate(levels):
        col = codes[:, j]
        bad = np.flatnonzero((col < -1) | (col >= v))
        if bad.size:
            raise BadInputError(
                f"categorical {column_label(j, columns)} has {bad.size} code(s) outside -1..{v - 1} (n_levels={v}), "
                f"e.g. {col[bad[0]]} in row {bad[0]}. Codes are 0..V-1, and -1 marks a missing category.")


def prepare(X_numeric=None, codes=None, n_levels=None, *, numeric_columns: Sequence[str] | None = None,
            categorical_columns: Sequence[str] | None = None, max_levels: int = MAX_LEVELS) -> LocationData:
    """Validate mixed incomplete data once.

    Parameters
    ----------
    X_numeric : array-like of shape (n_samples, n_numeric), optional
        NaN marks a missing entry. None (or zero columns): no numeric column.
    codes : array-like of int, shape (n_samples, n_categorical), optional
        Level codes ``0 .. V_j - 1`` per column, ``-1`` = missing (NaN in a float array also). None: no
        categorical column.
    n_levels : sequence of int, optional
        :math:`V_j` per categorical column (>= 1). Default: the largest observed code + 1. Give it when
        preparing new rows for a fitted model (the model's levels) or when a level may be unobserved.
    numeric_columns, categorical_columns : sequence of str, optional
        Column names, for messages.
    max_levels : int
        A categorical column with more levels is refused (default 100).

    Rows with nothing observed and columns with no observed value are accepted here (new rows to predict
    may have them); :func:`init` and :func:`fit` refuse a column with no observed value.

    Raises
    ------
    BadInputError
        No column at all; numeric and categorical blocks with different numbers of rows; non-numeric or
        infinite numeric values (:func:`~explorer.core.validation.check_incomplete`); codes that are not
        integers or lie outside ``-1 .. V_j - 1``; a column with more than ``max_levels`` levels.
    """
    check_int("max_levels", max_levels, 1)
    n_num_rows = None if X_numeric is None else (np.shape(X_numeric)[0] if np.ndim(X_numeric) >= 1 else 0)
    cat = _as_codes(codes, n_num_rows)
    if X_numeric is not None and np.ndim(X_numeric) == 2 and np.shape(X_numeric)[1] == 0:
        X_numeric = None
    if X_numeric is None and cat.shape[1] == 0:
        raise BadInputError("The data have no column: give numeric columns (X_numeric), categorical codes, or both.")
    if X_numeric is not None and codes is not None and n_num_rows != cat.shape[0]:
        raise BadInputError(f"X_numeric has {n_num_rows} row(s) but codes have {cat.shape[0]}; the two blocks must "
                            "describe the same rows, in the same order.")
    cat_names = _names(categorical_columns, cat.shape[1], "categorical_columns")
    levels = _levels(cat, n_levels, max_levels, cat_names)
    _check_code_range(cat, levels, cat_names)
    n = cat.shape[0]
    if X_numeric is None:
        X = np.zeros((n, 0))
        miss = np.zeros((n, 0), dtype=bool)
        patterns, perm, Xp, n_numeric_rows = None, np.arange(n), X, 0
        num_names = None
    else:
        num_names = None if numeric_columns is None else tuple(str(c) for c in numeric_columns)
        X, miss = check_incomplete(X_numeric, columns=num_names, allow_empty_rows=True, allow_empty_columns=True,
                                   name="X_numeric")
        num_names = _names(num_names, X.shape[1], "numeric_columns")
        patterns = group_patterns(miss, sort=True)
        perm = np.asarray(patterns.perm)
        Xp = np.ascontiguousarray(np.where(miss, 0.0, X)[perm])
        n_numeric_rows = X.shape[0] - patterns.empty_rows.size  # first in the layout
    codes_p = cat[perm]
    observed_p = []
    for j in range(cat.shape[1]):
        rows = np.flatnonzero(codes_p[:, j] >= 0)
        observed_p.append((rows, codes_p[rows, j].copy()))
    has_data = (codes_p >= 0).any(axis=1)
    has_data[:n_numeric_rows] = True
    fit_p = np.flatnonzero(has_data)
    _readonly(X, miss, cat, Xp, perm, fit_p, *(a for pair in observed_p for a in pair))
    return LocationData(X=X, missing=miss, codes=cat, n_levels=levels, patterns=patterns, Xp=Xp, perm=perm,
                        observed_p=tuple(observed_p), fit_p=fit_p, numeric_columns=num_names,
                        categorical_columns=cat_names)


def _to_original(a: np.ndarray, perm: np.ndarray) -> np.ndarray:
    """Rows of ``a`` (sorted layout) back in the caller's order."""
    out = np.empty_like(a)
    out[perm] = a
    return out


# ----------------------------------------------------------------------------- state
@dataclass(frozen=True, eq=False, slots=True)
class LocationState:
    """Parameters after ``iteration`` EM steps, with the E-step computed at them.

    Attributes
    ----------
    iteration : int
    weights : ndarray (K,)
        :math:`\\pi_k`.
    means : ndarray (K, D)
    covariances : ndarray (K, D, D) or (K, D)
        Of the numeric block (``D = 0`` without numeric columns).
    probs : tuple of ndarray
        Per categorical column ``j``, :math:`\\theta_{kj}` as an array (K, V_j).
    resp : ndarray (n_samples, K)
        :math:`r_{nk}` (caller's order; :math:`\\pi` for rows with nothing observed).
    log_likelihood : float
        Observed-data log-likelihood of the rows with an observed entry.
    log_prior : float
        NIW log densities plus the Dirichlet terms (without their normalisers).
    objective : float
        ``log_likelihood + log_prior``, the quantity EM increases.
    nk : ndarray (K,)
        :math:`N_k` over the fitted rows (the weights' M-step).
    stats : SufficientStatistics or None
        The numeric block's expected statistics (None without numeric columns).
    counts : tuple of ndarray
        :math:`n_{kjv}` per categorical column, (K, V_j).
    prior : ResolvedPrior or None
        The numeric block's prior, resolved at initialisation.
    """

    iteration: int
    weights: np.ndarray
    means: np.ndarray
    covariances: np.ndarray
    probs: tuple
    resp: np.ndarray
    log_likelihood: float
    log_prior: float
    objective: float
    nk: np.ndarray = field(repr=False)
    stats: SufficientStatistics | None = field(repr=False)
    counts: tuple = field(repr=False)
    prior: object = field(default=None, repr=False)

    @property
    def n_components(self) -> int:
        return int(self.weights.shape[0])

    @property
    def covariance_type(self) -> str:
        return "full" if self.covariances.ndim == 3 else "diag"


@dataclass(frozen=True, eq=False, slots=True)
class LocationResult:
    """What :func:`fit` returns: the kept ``state`` and how the loop ended (as :mod:`explorer.core.loop`)."""

    state: LocationState
    converged: bool
    stop_reason: str
    message: str
    n_iter: int
    trace: tuple
    restart_objectives: tuple
    config: LocationConfig


# ----------------------------------------------------------------------------- E-step
def _phis(config: LocationConfig, data: LocationData) -> tuple:
    if config.phi is None:
        return tuple(1.0 + 1.0 / v for v in data.n_levels)
    return (float(config.phi),) * data.n_categorical


def _categorical_loglik(data: LocationData, probs, K: int) -> np.ndarray:
    """(n, K) in the layout: :math:`\\sum_{j \\in O_n} \\log\\theta_{kj}[c_{nj}]`."""
    out = np.zeros((data.n_samples, K))
    for (rows, codes), p in zip(data.observed_p, probs):
        out[rows] += _safe_log(p).T[codes]
    return out


def _log_joint(data: LocationData, weights, means, covariances, probs, conditionals: bool):
    """(n, K) :math:`\\log\\pi_k + \\log p(x_n^o, c_n^o \\mid k)` in the layout, and the numeric block's
    per-component completions and conditional covariances (``conditionals``) for the statistics."""
    K = weights.shape[0]
    table = _categorical_loglik(data, probs, K)
    numeric = None
    if data.n_numeric:
        p = data.patterns
        ll, xhat, cond = component_loglik(data.Xp, p.missing, p, means, covariances,
                                          "full" if covariances.ndim == 3 else "diag", conditionals)
        table += ll
        numeric = (table.copy(), xhat, cond)
    with np.errstate(divide="ignore"):  # a weight exactly 0 gets log-weight -inf
        table += np.log(weights)
    return table, numeric


def _estep(data: LocationData, config: LocationConfig, weights, means, covariances, probs):
    """The E-step: responsibilities and per-row log-likelihoods (layout), and the numeric block's statistics (None
    without numeric columns).

    The numeric block goes through :func:`~explorer.core.mixtures.suffstats.estep_statistics` (the compiled kernel
    on larger data) with the categorical log-probabilities as its per-row offset; rows with no numeric observation
    (last in the layout) get theirs from the categorical columns alone."""
    K = weights.shape[0]
    cat = _categorical_loglik(data, probs, K)
    if not data.n_numeric:
        with np.errstate(divide="ignore"):  # a weight exactly 0 gets log-weight -inf
            return (*_responsibilities(data, cat + np.log(weights), weights), None)
    p = data.patterns
    strategy = _strategy(data, config, K)
    ws = _workspace(data, K) if strategy == "compiled" else None
    stats, resp, norm = estep_statistics(data.Xp, p, weights, means, covariances,
                                         covariance_type=config.covariance_type, strategy=strategy, workspace=ws,
                                         log_offset=cat)
    resp, norm = resp.copy(), norm.copy()  # the compiled kernel's row log-likelihoods are its scratch
    empty = p.empty_rows
    if empty.size:  # no numeric observation: the categorical columns alone (rows with nothing at all: weights, 0)
        with np.errstate(divide="ignore"):
            resp[empty], norm[empty] = _responsibilities_of(cat[empty] + np.log(weights))
        _nothing_observed(data, resp, norm, weights)
    return resp, norm, stats


def _strategy(data: LocationData, config: LocationConfig, K: int) -> str:
    """The numeric block's kernel, chosen once per data and K (a fit never switches kernel half-way)."""
    if config.strategy != "auto" or config.covariance_type != "full":
        return choose_strategy(0, K, data.n_numeric, config.covariance_type, config.strategy)
    key = ("strategy", K)
    chosen = data.cache.get(key)
    if chosen is None:
        n_rows = data.n_samples - data.patterns.empty_rows.size
        chosen = data.cache[key] = choose_strategy(n_rows, K, data.n_numeric, "full", "auto", data.patterns)
    return chosen


def _workspace(data: LocationData, K: int):
    """The compiled kernel's layout and buffers for the numeric block (cached on ``data`` per K)."""
    from explorer.core._compiled.gmm import Layout, Workspace

    key = ("workspace", K)
    ws = data.cache.get(key)
    if ws is None:
        lay = data.cache.get("layout")
        if lay is None:  # data.Xp is in runs of one pattern, rows with no numeric observation last
            p = data.patterns
            lay = data.cache["layout"] = Layout(data.Xp, p.missing, data.n_samples - p.empty_rows.size, None)
        ws = data.cache[key] = Workspace(lay, K)
    return ws


def _responsibilities_of(table: np.ndarray):
    """Softmax of the rows of a log-joint table, and their log-normalisers."""
    norm = logsumexp(table, axis=1)
    with np.errstate(under="ignore"):  # tiny responsibilities underflow to 0, which is what we want
        return np.exp(table - norm[:, None]), norm


def _nothing_observed(data: LocationData, resp: np.ndarray, norm: np.ndarray, weights: np.ndarray) -> None:
    """Rows with nothing observed (layout) get :math:`\\pi` and log-likelihood 0, in place."""
    outside = np.ones(data.n_samples, dtype=bool)
    outside[data.fit_p] = False
    resp[outside] = weights
    norm[outside] = 0.0


def _responsibilities(data: LocationData, table: np.ndarray, weights: np.ndarray):
    """Responsibilities and per-row log-likelihoods (layout) from the log-joint table; rows with nothing
    observed get :math:`\\pi` and 0."""
    resp, norm = _responsibilities_of(table)
    _nothing_observed(data, resp, norm, weights)
    return resp, norm


def _level_counts(data: LocationData, resp_p: np.ndarray) -> tuple:
    """:math:`n_{kjv} = \\sum_{n: c_{nj} = v} r_{nk}` per categorical column, (K, V_j) each."""
    K = resp_p.shape[1]
    out = []
    for (rows, codes), V in zip(data.observed_p, data.n_levels):
        flat = (codes[:, None] * K + np.arange(K)).ravel()
        out.append(np.bincount(flat, weights=resp_p[rows].ravel(), minlength=V * K).reshape(V, K).T.copy())
    return tuple(out)


def _log_prior(weights, means, covariances, probs, alpha: float, phis: tuple, prior) -> float:
    lp = log_prior(means, covariances, prior) if means.shape[1] else 0.0
    if alpha > 1:
        lp += (alpha - 1.0) * float(_safe_log(weights).sum())
    for p, phi in zip(probs, phis):
        if phi > 1:
            lp += (phi - 1.0) * float(_safe_log(p).sum())
    return float(lp)


def _state(data: LocationData, config: LocationConfig, iteration: int, weights, means, covariances, probs,
           prior) -> LocationState:
    """The E-step at the given parameters, packaged as a state."""
    resp_p, norm, stats = _estep(data, config, weights, means, covariances, probs)
    total = float(norm.sum())
    check_finite_log_likelihood(total)
    nk = resp_p[data.fit_p].sum(axis=0)
    counts = _level_counts(data, resp_p)
    lp = _log_prior(weights, means, covariances, probs, config.alpha, _phis(config, data), prior)
    resp = _to_original(resp_p, data.perm)
    _readonly(weights, means, covariances, resp, nk, *probs, *counts)
    return LocationState(iteration=iteration, weights=weights, means=means, covariances=covariances,
                         probs=tuple(probs), resp=resp, log_likelihood=total, log_prior=lp, objective=total + lp,
                         nk=nk, stats=stats, counts=counts, prior=prior)


# ----------------------------------------------------------------------------- M-step
def _mixing_weights(nk: np.ndarray, alpha: float) -> np.ndarray:
    """:math:`(\\alpha - 1 + N_k) / (N - K + K\\alpha)`; :math:`N_k` gets 10 eps (no weight exactly 0)."""
    num = alpha - 1.0 + nk + _EPS10
    return num / num.sum()


def _level_probs(counts: np.ndarray, phi: float) -> np.ndarray:
    """MAP :math:`\\theta_{kj}` from the counts (K, V); uniform where a component has no mass (phi = 1)."""
    V = counts.shape[1]
    num = phi - 1.0 + counts
    den = counts.sum(axis=1, keepdims=True) + V * (phi - 1.0)
    return np.where(den > 0, num / np.where(den > 0, den, 1.0), 1.0 / V)


def _empty_gaussian(K: int, covariance_type: str):
    return np.zeros((K, 0)), np.zeros((K, 0, 0) if covariance_type == "full" else (K, 0))


def _resolved_prior(data: LocationData, config: LocationConfig):
    """The numeric block's prior as arrays (:func:`~explorer.core.mixtures.em_gmm.resolved_prior` on its
    EMData); None without a prior or without numeric columns."""
    spec = _resolve_spec(data, config)
    return None if spec is None else resolved_arrays(spec, config.covariance_type)


def _resolve_spec(data: LocationData, config: LocationConfig):
    if config.prior is None or data.n_numeric == 0:
        return None
    em = data.cache.get("em_data")
    if em is None:
        em = data.cache["em_data"] = _prepare_numeric(data.X, columns=data.numeric_columns)
    return resolve_prior(em, config.em_config())


def step(state: LocationState, data: LocationData, config: LocationConfig) -> LocationState:
    """One EM iteration: the M-step from the state's E-step, then the E-step at the new parameters. Pure.

    The numeric prior is the one ``state`` carries (resolved by :func:`init`).

    Raises
    ------
    DegenerateCovarianceError
        When a component's covariance stops being positive definite.
    """
    _check_compatible(state, data, config)
    if state.resp.shape != (data.n_samples, config.n_components):
        raise BadInputError(f"The state has responsibilities of shape {state.resp.shape}; these data and config "
                            f"need {(data.n_samples, config.n_components)}.")
    prior = state.prior
    if prior is None and config.prior is not None and data.n_numeric:  # an ML state continued under a prior
        prior = _resolved_prior(data, config)
    weights = _mixing_weights(np.asarray(state.nk), config.alpha)
    if data.n_numeric:
        _, means, covs = m_step(state.stats, reg_covar=config.reg_covar, prior=prior)
    else:
        means, covs = _empty_gaussian(config.n_components, config.covariance_type)
    probs = tuple(_level_probs(c, phi) for c, phi in zip(state.counts, _phis(config, data)))
    return _state(data, config, state.iteration + 1, weights, means, covs, probs, prior)


# ----------------------------------------------------------------------------- initialisation
def _check_fit(data: LocationData, config: LocationConfig) -> None:
    if not isinstance(data, LocationData):
        raise BadInputError(f"data must be a LocationData (build it with location_model.prepare); got "
                            f"{type(data).__name__}.")
    if config.n_components > data.n_fit:
        raise BadInputError(f"n_components={config.n_components} is more than the {data.n_fit} row(s) with an "
                            "observed entry; use fewer components.")
    empty_num = np.flatnonzero(data.missing.all(axis=0))
    if empty_num.size:
        raise BadInputError(f"numeric {column_label(int(empty_num[0]), data.numeric_columns)} has no observed value, "
                            "so nothing can be learned about it. Drop it before fitting.")
    for j, (rows, _) in enumerate(data.observed_p):
        if rows.size == 0:
            raise BadInputError(f"categorical {column_label(j, data.categorical_columns)} has no observed value, so "
                                "nothing can be learned about it. Drop it before fitting.")


def _check_compatible(state: LocationState, data: LocationData, config: LocationConfig | None = None) -> None:
    if not isinstance(data, LocationData):
        raise BadInputError(f"data must be a LocationData (build it with location_model.prepare); got "
                            f"{type(data).__name__}.")
    if state.means.shape[1] != data.n_numeric:
        raise BadInputError(f"data have {data.n_numeric} numeric column(s), but the model has {state.means.shape[1]}.")
    model_levels = tuple(int(p.shape[1]) for p in state.probs)
    if model_levels != data.n_levels:
        raise BadInputError(f"data have n_levels={data.n_levels}, but the model has {model_levels}; prepare the data "
                            f"with n_levels={model_levels}.")
    if config is not None and (state.n_components != config.n_components
                               or (data.n_numeric and state.covariance_type != config.covariance_type)):
        raise BadInputError(f"The state has {state.n_components} component(s) with {state.covariance_type!r} "
                            f"covariances; the config asks for {config.n_components} with "
                            f"{config.covariance_type!r}.")


def _cluster_features(data: LocationData, rows_p: np.ndarray):
    """k-means input of the layout rows ``rows_p``: standardised numeric columns and one-hot categories / sqrt 2,
    with the observed mask (a missing category hides all its one-hot columns)."""
    X = data.Xp[rows_p]
    obs = ~data.patterns.missing[rows_p] if data.n_numeric else np.zeros((rows_p.size, 0), dtype=bool)
    if data.n_numeric:
        count = np.maximum(obs.sum(axis=0), 1)
        mean = X.sum(axis=0) / count
        sd = np.sqrt(np.where(obs, (X - mean) ** 2, 0.0).sum(axis=0) / count)
        X = np.where(obs, (X - mean) / np.where(sd > 0, sd, 1.0), 0.0)
    blocks, masks = [X], [obs]
    position = np.full(data.n_samples, -1)
    position[rows_p] = np.arange(rows_p.size)
    for (rows, codes), V in zip(data.observed_p, data.n_levels):
        onehot = np.zeros((rows_p.size, V))
        seen = np.zeros((rows_p.size, V), dtype=bool)
        where = position[rows]
        keep = where >= 0
        onehot[where[keep], codes[keep]] = np.sqrt(0.5)
        seen[where[keep]] = True
        blocks.append(onehot)
        masks.append(seen)
    return np.concatenate(blocks, axis=1), np.concatenate(masks, axis=1)


def _parameters_from_responsibilities(data: LocationData, config: LocationConfig, resp_p: np.ndarray, prior):
    """One M-step from responsibilities (layout rows; zero outside the fit), the numeric block's missing entries
    filled by each cluster's observed mean (a starting point only: the first E-step corrects it)."""
    K = config.n_components
    weights = _mixing_weights(resp_p[data.fit_p].sum(axis=0), config.alpha)
    probs = tuple(_level_probs(c, phi) for c, phi in zip(_level_counts(data, resp_p), _phis(config, data)))
    if not data.n_numeric:
        return weights, *_empty_gaussian(K, config.covariance_type), probs
    p = data.patterns
    n_rows = data.n_samples - p.empty_rows.size  # the rows with a numeric observation come first
    obs = ~p.missing[:n_rows]
    r = resp_p[:n_rows]
    overall = data.Xp[:n_rows].sum(axis=0) / np.maximum(obs.sum(axis=0), 1)
    cluster_means = (r.T @ data.Xp[:n_rows] + _EPS10 * overall) / (r.T @ obs + _EPS10)
    filled = np.where(p.missing[None], cluster_means[:, None, :], data.Xp[None])
    stats = statistics_from_completions(resp_p, filled, None, p, cluster_means, covariance_type=config.covariance_type,
                                        exact=False, rows=np.arange(n_rows))
    _, means, covs = m_step(stats, reg_covar=config.reg_covar, prior=prior)
    return weights, means, covs, probs


def _init(data: LocationData, config: LocationConfig, rng: np.random.Generator, prior) -> LocationState:
    K, rows = config.n_components, data.fit_p
    if config.init == "random":
        r = rng.dirichlet(np.ones(K), size=rows.size)
    else:
        Z, seen = _cluster_features(data, rows)
        _, labels = kmeans(Z, seen, K, rng)
        r = np.zeros((rows.size, K))
        r[np.arange(rows.size), labels] = 1.0
    resp_p = np.zeros((data.n_samples, K))
    resp_p[rows] = r
    weights, means, covs, probs = _parameters_from_responsibilities(data, config, resp_p, prior)
    return _state(data, config, 0, weights, means, covs, probs, prior)


def init(data: LocationData, config: LocationConfig, rng: np.random.Generator) -> LocationState:
    """Iteration 0 from ``rng`` (``config.init``): responsibilities from k-means or at random, one M-step,
    then the E-step (see :class:`LocationConfig`).

    Raises
    ------
    BadInputError
        More components than rows with an observed entry; a column with no observed value.
    """
    _check_fit(data, config)
    return _init(data, config, rng, _resolved_prior(data, config))


def init_from_parameters(data: LocationData, config: LocationConfig, weights, means, covariances,
                         probs) -> LocationState:
    """Iteration 0 from given parameters (validated and copied), with the E-step at them.

    ``weights`` (K,), ``means`` (K, D), ``covariances`` (K, D, D) or (K, D), ``probs`` a sequence of J arrays
    (K, V_j); ``means`` and ``covariances`` may be None without numeric columns.
    """
    if not isinstance(data, LocationData):
        raise BadInputError(f"data must be a LocationData (build it with location_model.prepare); got "
                            f"{type(data).__name__}.")
    K, D, full = config.n_components, data.n_numeric, config.covariance_type == "full"
    w = np.array(weights, dtype=float)
    if D == 0 and means is None and covariances is None:
        mu, cov = _empty_gaussian(K, config.covariance_type)
    else:
        mu, cov = np.array(means, dtype=float), np.array(covariances, dtype=float)
    expected = (K, D, D) if full else (K, D)
    if w.shape != (K,) or mu.shape != (K, D) or cov.shape != expected:
        raise BadInputError(f"Initial parameters have shapes weights {w.shape}, means {mu.shape}, covariances "
                            f"{cov.shape}; expected {(K,)}, {(K, D)}, {expected}.")
    if np.any(w < 0) or not np.isclose(w.sum(), 1.0):
        raise BadInputError("Initial weights must be non-negative and sum to one.")
    probs = [np.array(p, dtype=float) for p in probs]
    if len(probs) != data.n_categorical:
        raise BadInputError(f"probs has {len(probs)} array(s); the data have {data.n_categorical} categorical "
                            "column(s).")
    for j, (p, V) in enumerate(zip(probs, data.n_levels)):
        if p.shape != (K, V):
            raise BadInputError(f"probs[{j}] has shape {p.shape}; expected {(K, V)} (components x levels).")
        if np.any(p < 0) or not np.allclose(p.sum(axis=1), 1.0):
            raise BadInputError(f"probs[{j}] must be non-negative and sum to one over the levels (axis 1).")
    if not (np.all(np.isfinite(mu)) and np.all(np.isfinite(cov))):
        raise BadInputError("Initial means and covariances must be finite.")
    return _state(data, config, 0, w, mu, cov, tuple(probs), _resolved_prior(data, config))


# ----------------------------------------------------------------------------- fit
def _snapshot(state: LocationState) -> dict:
    return {"iteration": state.iteration, "objective": state.objective, "log_likelihood": state.log_likelihood,
            "weights": np.array(state.weights)}


def fit(data: LocationData, config: LocationConfig, rng: np.random.Generator, *,
        callback: Callable[[LocationState], None] | None = None,
        init_state: LocationState | None = None) -> LocationResult:
    """``config.n_init`` restarts of a loop over :func:`step` until the objective changes by less than
    ``config.tol`` per fitted row (or ``max_iter``, or a degenerate covariance: a :class:`ConvergenceWarning`);
    the restart with the highest objective is kept. The numeric prior is resolved once for all restarts.

    Parameters
    ----------
    data : LocationData
    config : LocationConfig
    rng : numpy.random.Generator
        Used by the initialisations (restart ``r`` continues the same stream).
    callback : callable or LoopMonitor, optional
        Called after every iteration (see :func:`explorer.core.loop.run_restarts`).
    init_state : LocationState, optional
        Start from this state instead of initialising (one run).
    """
    _check_fit(data, config)
    n_fit = data.n_fit
    prior = None
    if init_state is None:
        prior = _resolved_prior(data, config)
    out = run_restarts(
        n_runs=1 if init_state is not None else config.n_init,
        start=lambda: init_state if init_state is not None else _init(data, config, rng, prior),
        step=lambda s: step(s, data, config),
        snapshot=_snapshot,
        change=lambda old, new: (new.objective - old.objective) / n_fit,
        max_iter=config.max_iter,
        tol=config.tol,
        callback=callback,
    )
    return LocationResult(state=out.state, converged=out.stop_reason == "tol", stop_reason=out.stop_reason,
                          message=out.message, n_iter=out.state.iteration, trace=out.trace,
                          restart_objectives=out.restart_objectives, config=config)


# ----------------------------------------------------------------------------- choosing K
#: Largest K :func:`select_components` tries.
SELECT_MAX_K = 8
#: Restarts of every BIC candidate of :func:`select_components` with K >= 2 (at least; more when the config asks).
SELECT_N_INIT = 3
#: Share of the observed cells (numbers and levels) hidden by each mask of the held-out criterion.
HELDOUT_RATE = 0.1
#: Masks of the held-out criterion, at most (every candidate K is fitted once per mask) ...
HELDOUT_REPEATS = 2
#: ... but no further mask once the masks hide this many cells: on a large table one mask holds enough cells and
#: the candidates' fits cost half (4,177 x 9 abalone with 20 % missing: 3,000 cells per mask).
HELDOUT_ENOUGH_CELLS = 2000
#: The held-out candidates' stopping tolerance (at least; the final fit keeps the config's): on abalone, penguins,
#: auto_mpg and breast cancer (two seeds each) it moved the scores by at most 0.013 nats per hidden cell against 1e-5
#: and changed the choice once in eight (auto_mpg, 5 -> 6), for 10-55 % less time (1e-3 changed it three times).
HELDOUT_TOL = 1e-4
SELECT_CRITERIA = ("heldout", "bic")


def n_parameters(state: LocationState) -> int:
    """Free parameters of a location model: K - 1 weights and, per component, the numeric mean and covariance
    (full: D(D+1)/2 entries, diagonal: D) and :math:`V_j - 1` level probabilities per categorical column."""
    K = state.n_components
    D = int(state.means.shape[1])
    cov = D * (D + 1) // 2 if state.covariance_type == "full" else D
    return (K - 1) + K * (D + cov + sum(int(p.shape[1]) - 1 for p in state.probs))


def guard_rows(data: LocationData) -> int:
    """The fewest expected rows :func:`select_components` lets a component of K >= 2 have: the numeric columns
    (a component's covariance needs as many rows as it has dimensions, the guard of
    :func:`explorer.model_selection.fit_auto` for the Gaussian mixture; level tables have a Dirichlet prior of
    their own), at least 1 (no empty component)."""
    return max(int(data.n_numeric), 1)


def heldout_masks(data: LocationData, rate: float, n_repeats: int, rng: np.random.Generator, *,
                  enough: int | None = None) -> list[tuple[LocationData, np.ndarray]]:
    """``n_repeats`` copies of ``data`` with about ``rate`` of its observed cells hidden completely at random (fewer
    when the copies made hide at least ``enough`` cells together).

    A row left with no observed cell and a column left with fewer than two observed values get their hidden
    cells back (so every masked table can be fitted as the whole one can). Returns ``(masked data, hidden cells
    per row)`` per mask; the masked data keep the levels of ``data``.
    """
    D = data.n_numeric
    observed = np.concatenate([~data.missing, data.codes >= 0], axis=1)
    out = []
    for _ in range(int(n_repeats)):
        hidden = observed & (rng.random(observed.shape) < rate)
        hidden[~(observed & ~hidden).any(axis=1)] = False
        hidden[:, (observed & ~hidden).sum(axis=0) < 2] = False
        X = np.where(hidden[:, :D], np.nan, data.X) if D else None
        codes = np.where(hidden[:, D:], -1, data.codes) if data.n_categorical else None
        masked = prepare(X, codes, data.n_levels, numeric_columns=data.numeric_columns,
                         categorical_columns=data.categorical_columns, max_levels=max(max(data.n_levels, default=1), 1))
        out.append((masked, hidden.sum(axis=1)))
        if enough is not None and sum(int(h.sum()) for _, h in out) >= enough:
            break
    return out


def heldout_log_predictive(state: LocationState, data: LocationData, masked: LocationData) -> np.ndarray:
    r"""Per row (caller's order), the log predictive of the cells ``masked`` hides given the ones it keeps, at the
    state's parameters: :math:`\log p(\text{hidden}_n \mid \text{kept}_n) = \log p(\text{observed}_n) -
    \log p(\text{kept}_n)` (numbers as densities, levels as probabilities; 0 for a row with nothing hidden). The
    rows of both tables are the same, ``masked`` hiding a subset of the cells ``data`` observes."""
    return log_likelihood_rows(state, data) - log_likelihood_rows(state, masked)


def select_components(data: LocationData, config: LocationConfig, rng: np.random.Generator, *,
                      criterion: str = "heldout", max_components: int = SELECT_MAX_K, n_init: int = SELECT_N_INIT,
                      patience: int | None = 2, rate: float = HELDOUT_RATE, n_repeats: int = HELDOUT_REPEATS,
                      refit_rng: np.random.Generator | None = None, callback=None) -> tuple[LocationResult, tuple]:
    r"""Choose K among 1 .. min(``max_components``, n // (D + 1)) by held-out cells (default) or BIC, guarded.

    n is the number of rows with an observed entry, D the number of columns (numeric and categorical).

    ``criterion="heldout"`` (the default, what ``MixedMixtureImputer(n_components="auto")`` uses): ``n_repeats``
    masks each hide ``rate`` of the observed cells, numbers and levels (:func:`heldout_masks`; no further mask once
    they hide ``HELDOUT_ENOUGH_CELLS``); every K is fitted
    on every masked table (``config.n_init`` restarts, tolerance at least ``HELDOUT_TOL``) and scored by the log
    predictive of the hidden cells given the row's kept ones (:func:`heldout_log_predictive`), per hidden cell and
    pooled over the masks. The score is the one the imputation is judged by
    (the predictive of a missing cell), so it trades the fit of more
    components against their estimation error on the data at hand, where BIC's penalty is asymptotic. K is the
    smallest allowed one whose score is within one standard error of the best score (Breiman's one-standard-error
    rule; the error of the paired difference to the best K over the rows with hidden cells): beyond the true
    number of components the scores differ by less than their noise (the Gaussian mixture's held-out rule,
    :func:`explorer.model_selection.select_n_components`, uses a fixed 0.02 nats instead). Then the chosen K is
    fitted on all the data as a fixed K would be (``config.n_init`` restarts; ``n_init`` is BIC's), with
    ``refit_rng`` when given (a fresh generator of the caller's seed makes the fit the one ``fit`` gives at that K)
    and ``rng``, continued, otherwise.

    ``criterion="bic"``: K minimises :math:`\mathrm{BIC} = -2\,\ell(\hat\theta) + p \log n`, :math:`\ell` the
    observed-data log-likelihood of numbers and levels (``LocationState.log_likelihood``; the prior left out) at
    the MAP-EM fit on all the data, :math:`p` = :func:`n_parameters`; K = 1 with ``config.n_init`` restarts,
    larger K with at least ``n_init``.

    The guard (either criterion): a K >= 2 whose fit has a component of fewer expected rows than
    :func:`guard_rows` (the numeric columns; with held-out cells, in any mask's fit) is never chosen. The scan stops
    after ``patience`` successive K that do not improve the best allowed score (None: all of them). With a single
    candidate (K = 1) no cell is hidden: K = 1 is fitted once on all the data (its row has its BIC).

    Returns
    -------
    (LocationResult, tuple of dict)
        The fit at the chosen K (its warnings re-emitted, the candidates' not) and one dict per K tried:
        ``n_components``, ``heldout`` (mean log predictive per hidden cell; NaN with BIC) and ``heldout_se`` (the
        standard error of its difference to the best allowed K's) or ``bic`` (NaN with held-out cells),
        ``log_likelihood`` (of the fit on all the data; NaN for a held-out candidate not chosen),
        ``n_parameters``, ``min_rows`` (the smallest :math:`N_k`) and ``refused`` (the guard; also True for a K
        that could not be fitted, with ``error``).
    """
    if criterion not in SELECT_CRITERIA:
        raise BadInputError(f"criterion must be one of {SELECT_CRITERIA}, got {criterion!r}.")
    _check_fit(data, replace(config, n_components=1))
    n = data.n_fit
    D = data.n_numeric + data.n_categorical
    top = max(1, min(int(max_components), n // (D + 1)))
    guard = guard_rows(data)
    heldout = criterion == "heldout" and top > 1
    masks = heldout_masks(data, rate, n_repeats, rng, enough=HELDOUT_ENOUGH_CELLS) if heldout else []
    n_hidden = max(sum(int(per_row.sum()) for _, per_row in masks), 1)
    rows, fits, row_scores, best, stale = [], {}, {}, -np.inf, 0
    for K in range(1, top + 1):
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                if heldout:
                    cfg = replace(config, n_components=K, tol=max(config.tol, HELDOUT_TOL))
                    per_row, min_rows, stop = [], np.inf, None
                    for masked, _ in masks:
                        result = fit(masked, cfg, rng, callback=callback)
                        per_row.append(heldout_log_predictive(result.state, data, masked))
                        min_rows = min(min_rows, float(np.min(result.state.nk)))
                        stop = stop or (result.stop_reason == "interrupted")
                    row_scores[K] = np.concatenate(per_row)
                    score = float(row_scores[K].sum()) / n_hidden
                    row = {"n_components": K, "heldout": score, "heldout_se": float("nan"), "bic": float("nan"),
                           "log_likelihood": float("nan"), "n_parameters": int(n_parameters(result.state)),
                           "min_rows": min_rows}
                else:
                    restarts = config.n_init if K == 1 else max(config.n_init, n_init)
                    result = fit(data, replace(config, n_components=K, n_init=restarts), rng, callback=callback)
                    state = result.state
                    p = n_parameters(state)
                    bic = -2.0 * float(state.log_likelihood) + p * np.log(n)
                    score = -bic
                    row = {"n_components": K, "heldout": float("nan"), "heldout_se": float("nan"), "bic": float(bic),
                           "log_likelihood": float(state.log_likelihood), "n_parameters": int(p),
                           "min_rows": float(np.min(state.nk))}
                    stop = result.stop_reason == "interrupted"
                    fits[K] = (result, caught)
        except (BadInputError, ArithmeticError, np.linalg.LinAlgError) as exc:
            if K == 1:
                raise
            rows.append({"n_components": K, "heldout": float("nan"), "heldout_se": float("nan"), "bic": float("nan"),
                         "log_likelihood": float("nan"), "n_parameters": 0, "min_rows": float("nan"), "refused": True,
                         "error": str(exc)})
            break  # a larger K will not fit either
        row["refused"] = bool(K > 1 and (row["min_rows"] < guard or not np.isfinite(score)))
        rows.append(row)
        if not row["refused"] and score > best:
            best, stale = score, 0
        else:
            stale += 1
        if stop or (patience is not None and stale >= patience):
            break  # (Ctrl-C means stop: the fits so far are compared)
    allowed = [r for r in rows if not r["refused"]]
    if not heldout:
        chosen = min(allowed, key=lambda r: r["bic"])["n_components"]
    else:  # one standard error: the smallest K within the noise of the best score
        best_k = max(allowed, key=lambda r: r["heldout"])["n_components"]
        hidden_rows = np.concatenate([per_row > 0 for _, per_row in masks])
        n_rows = int(hidden_rows.sum())
        for r in allowed:
            diff = (row_scores[best_k] - row_scores[r["n_components"]])[hidden_rows]
            r["heldout_se"] = float(np.sqrt(n_rows) * np.std(diff, ddof=1) / n_hidden) if n_rows > 1 else 0.0
        chosen = min([r["n_components"] for r in allowed if r["heldout"] >= best - r["heldout_se"]] or [best_k])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = fit(data, replace(config, n_components=chosen), rng if refit_rng is None else refit_rng,
                         callback=callback)
        fits[chosen] = (result, caught)
        row = next(r for r in rows if r["n_components"] == chosen)
        row["log_likelihood"] = float(result.state.log_likelihood)
    result, caught = fits[chosen]
    for w in caught:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return result, tuple(rows)


# ----------------------------------------------------------------------------- predictions
def _table(state: LocationState, data: LocationData) -> np.ndarray:
    _check_compatible(state, data)
    table, _ = _log_joint(data, state.weights, state.means, state.covariances, state.probs, conditionals=False)
    return table


def log_likelihood_rows(state: LocationState, data: LocationData) -> np.ndarray:
    """Per-row :math:`\\log p(x_n^o, c_n^o)` (n_samples,) at the state's parameters, caller's order; 0 for a row
    with nothing observed."""
    _, norm = _responsibilities(data, _table(state, data), state.weights)
    return _to_original(norm, data.perm)


def posterior(state: LocationState, data: LocationData) -> np.ndarray:
    """:math:`r_{nk} = P(z_n = k \\mid x_n^o, c_n^o)` (n_samples, K) of any data prepared with the model's
    columns and levels (caller's order; :math:`\\pi` for a row with nothing observed)."""
    resp, _ = _responsibilities(data, _table(state, data), state.weights)
    return _to_original(resp, data.perm)


def predict_proba(state: LocationState, data: LocationData) -> tuple:
    """Per categorical column ``j``, the (n_samples, V_j) predictive :math:`\\sum_k r^{(-j)}_{nk}\\theta_{kj}`.

    :math:`r^{(-j)}_n` conditions on every observed entry of row ``n``, numeric and categorical, except column
    ``j`` itself: for a missing cell it is the predictive of the missing level given all the row shows; for an
    observed cell the leave-that-cell-out prediction (what the model would say had the cell been hidden). Rows
    sum to one; caller's order.
    """
    table = _table(state, data)
    out = []
    for (rows, codes), p in zip(data.observed_p, state.probs):
        t = table.copy()
        t[rows] -= _safe_log(p).T[codes]
        with np.errstate(under="ignore"):
            q = np.exp(t - logsumexp(t, axis=1, keepdims=True))
        out.append(_to_original(q @ p, data.perm))
    return tuple(out)


def conditional_numeric(state: LocationState, data: LocationData) -> ConditionalMixture:
    """The numeric block's per-row conditional :math:`p(x_n^m \\mid x_n^o, c_n^o)` as a
    :class:`~explorer.core.gaussians.conditional.ConditionalMixture`.

    Its components are the Gaussian conditionals of the numeric block given the observed numeric entries, and
    its weights the responsibilities :math:`r_{nk}`, which include the observed categories (a row with no
    numeric observation gets the component marginals weighted by what its categories say). Means, intervals,
    densities and draws then come from the mixture's methods.

    Raises
    ------
    BadInputError
        Without numeric columns.
    """
    if data.n_numeric == 0 or state.means.shape[1] == 0:
        raise BadInputError("The data have no numeric column, so there is no numeric conditional; use predict_proba "
                            "for the categorical columns.")
    resp = posterior(state, data)
    cm = ConditionalMixture.from_gaussian_mixture(data.X, state.weights, state.means, state.covariances,
                                                  covariance_type=state.covariance_type,
                                                  columns=data.numeric_columns)
    resp.setflags(write=False)
    return replace(cm, weights=resp)


def impute(state: LocationState, data: LocationData) -> tuple[np.ndarray, np.ndarray]:
    """Single imputation: ``(X, codes)`` with missing numeric entries set to their conditional mean
    :math:`E[x^m \\mid x^o, c^o]` and missing categories to their most probable level (:func:`predict_proba`);
    observed entries are copied unchanged."""
    X = conditional_numeric(state, data).mean() if data.n_numeric else data.X.copy()
    codes = np.array(data.codes)
    for j, proba in enumerate(predict_proba(state, data)):
        miss = codes[:, j] < 0
        codes[miss, j] = proba[miss].argmax(axis=1)
    return X, codes


def sample(state: LocationState, data: LocationData, n_draws: int,
           rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Multiple imputation: joint draws of every row's missing numeric and categorical entries.

    Per draw and row: :math:`k \\sim \\mathrm{Cat}(r_n)`, then each missing category from :math:`\\theta_{kj}`
    and the missing numeric entries from component :math:`k`'s conditional Gaussian given the observed numeric
    entries.

    Returns
    -------
    numeric : ndarray of shape (n_draws, n_samples, n_numeric)
    codes : ndarray of int64, shape (n_draws, n_samples, n_categorical)
        Observed entries equal the data in every draw.
    """
    check_draws(n_draws, rng)
    resp = posterior(state, data)
    K = state.n_components
    comp = draw_components(resp, n_draws, rng)  # (n_draws, n)
    codes = np.broadcast_to(data.codes, (n_draws,) + data.codes.shape).copy()
    for j, p in enumerate(state.probs):
        miss = np.flatnonzero(data.codes[:, j] < 0)
        if miss.size == 0:
            continue
        cum = np.cumsum(p, axis=1)[comp[:, miss], :-1]  # (n_draws, n_miss, V - 1)
        u = rng.random((n_draws, miss.size))
        codes[:, miss, j] = (u[..., None] >= cum).sum(axis=-1)
    numeric = np.broadcast_to(data.X, (n_draws,) + data.X.shape).copy()
    if data.n_numeric and data.missing.any():
        cm = conditional_numeric(state, data)
        eye = np.eye(K)
        for s in range(n_draws):  # a one-hot weight per row makes the mixture draw from the chosen component
            numeric[s] = replace(cm, weights=eye[comp[s]]).sample(1, rng)[0]
    return numeric, codes
