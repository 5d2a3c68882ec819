r"""Regression from the joint density: a steppable EM fit of a mixture on (input, target) and its read-outs.

Ghahramani & Jordan (1994) section 4.3 (the ghahramani1994 reference digest, section 2.9). A Gaussian mixture is
fitted by EM to the *joint* density of one input column :math:`x` and one target column :math:`y`,
with missing values in either (the data set's own gaps plus a missingness mechanism). Conditioning
the fitted joint on the input gives the predictive density, again a mixture,

.. math::

    p(y \mid x) = \sum_j h_j(x)\, N\big(y;\ m_j(x),\ S_j\big), \qquad
    h_j(x) \propto \pi_j N(x; \mu_j^x, \Sigma_j^{xx}),

    m_j(x) = \mu_j^y + \Sigma_j^{yx} (\Sigma_j^{xx})^{-1} (x - \mu_j^x), \qquad
    S_j = \Sigma_j^{yy} - \Sigma_j^{yx} (\Sigma_j^{xx})^{-1} \Sigma_j^{xy},

whose mean is the least-squares estimate (eq. 13) :math:`\hat y(x) = \sum_j h_j(x) m_j(x)` and
from which the stochastic estimate draws :math:`y \sim p(y \mid x)`. With diagonal covariances
:math:`m_j(x) = \mu_j^y` (a normalised RBF network). Bands are equal-tailed quantiles of the
mixture (:meth:`explorer.core.gaussians.conditional.ConditionalMixture.interval`).

For a one-to-many mapping (a noisy circle: two values of :math:`y` for one :math:`x`) the
conditional is bimodal and its mean falls *between* the modes, where the density is low: the
least-squares estimate is then a value the data hardly ever take (digest section 7, "the LSE is
inappropriate for one-to-many mappings; use the stochastic estimator"). :func:`between_modes`
detects that case on a density grid.

:class:`RegressionModel` is an :class:`~explorer.ui.state.em_model.EMModel` (so
:class:`~explorer.ui.components.player.StepPlayer` can Step / Play / Reset it) whose data are the two chosen
columns of its :class:`~explorer.ui.state.data_model.DataModel` (``pair_only``). Run to
convergence, its state is the one :class:`explorer.learn.joint.GaussianMixtureRegressor` reaches
with the same settings (same EM, same initialisation seed). :meth:`RegressionModel.readouts` computes
everything a page draws of one state at once, as an immutable :class:`Readouts` (a page computes it on
its session's worker and draws it on the event loop). :func:`compare_methods` scores the joint-density
regression against regressions fitted after imputation on held-out rows; :func:`cached_comparison`
shares its results between sessions (the start screen's comparison is computed once per server). EM is
deterministic given the data, the settings and the seed, so the states of a run are shared too: a
session stepping a run that another session already stepped (the start screen, played at every open)
reads the states instead of computing them again (:class:`SharedRun`). No Panel import here.
"""

from __future__ import annotations

import functools
import hashlib
import threading
import time
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import param

from explorer.core.deprecation import renamed_names
from explorer.core.gaussians.conditional import ConditionalMixture, regression
from explorer.core.gaussians.mixture_regression import mixture_quantile, target_mixtures
from explorer.core.mixtures import em_gmm
from explorer.core.validation import BadInputError
from explorer.ui.state._settings import MAX_SEED
from explorer.ui.state.data_model import DataModel
from explorer.ui.state.em_model import EMModel

__all__ = ["ComparisonRequest", "DensitySlice", "Readouts", "RegressionComparison", "RegressionCurve",
           "RegressionModel", "Scatter", "SharedRun", "TargetMixtures", "between_modes", "between_modes_rows",
           "cached_comparison", "compare_methods", "mixture_density", "significant_modes"]

#: A local maximum of a density counts as a mode when it is at least this fraction of the highest one.
MODE_MIN_HEIGHT = 0.1
#: The mean lies "between modes" when its density is below this fraction of the lower of the two
#: highest modes on either side of it (a real valley, not a shoulder).
VALLEY_RATIO = 0.5
_SETTINGS = ("input_column", "target_column", "n_components", "covariance_type", "seed", "level", "x0",
             "test_fraction", "split_seed")
#: Comparisons kept for every session of the server (each a handful of numbers).
COMPARISONS_CACHED = 64
#: EM runs whose states are kept for every session of the server (the most recently started ones).
RUNS_SHARED = 8


# ============================================================================ pure functions
def mixture_density(weights, means, sds, grid) -> np.ndarray:
    """Densities of many 1-D Gaussian mixtures on a grid (one for all, or one per mixture).

    Parameters
    ----------
    weights, means, sds : array-like of shape (n, K)
    grid : array-like of shape (G,) or (n, G)

    Returns
    -------
    ndarray of shape (n, G): :math:`\\sum_k w_k N(g; m_k, s_k^2)`.
    """
    w, m, s = (np.asarray(a, dtype=float) for a in (weights, means, sds))
    g = np.asarray(grid, dtype=float)
    g = g[None, None, :] if g.ndim == 1 else g[:, None, :]
    z = g - m[:, :, None]
    z /= s[:, :, None]
    z *= z
    z *= -0.5
    np.exp(z, out=z)  # (n, K, G): one array, updated in place (this runs on every frame of the regression page)
    return np.einsum("nk,nkg->ng", w / (np.sqrt(2.0 * np.pi) * s), z)


def significant_modes(density, min_height: float = MODE_MIN_HEIGHT) -> np.ndarray:
    """Indices of the local maxima of a density on a grid that reach ``min_height`` x its maximum.

    A plateau counts once (its first point); the grid's end points count when the density falls
    from them. Returns an empty array for an all-zero density.
    """
    d = np.asarray(density, dtype=float)
    if d.size == 0 or not np.any(d > 0):
        return np.zeros(0, dtype=int)
    left = np.r_[-np.inf, d[:-1]]
    right = np.r_[d[1:], -np.inf]
    peaks = np.flatnonzero((d > left) & (d >= right) & (d >= min_height * d.max()))
    return peaks


@dataclass(frozen=True)
class ModeVerdict:
    """Where the mean of a 1-D density sits relative to its modes (see :func:`between_modes`)."""

    modes: np.ndarray  # grid values of the significant modes, increasing
    heights: np.ndarray  # their densities
    between: bool  # modes on both sides of the mean and the mean in a valley
    ratio: float  # density at the mean / density of the highest mode


def between_modes(grid, density, mean: float, mean_density: float, *, min_height: float = MODE_MIN_HEIGHT,
                  valley: float = VALLEY_RATIO) -> ModeVerdict:
    """Does the mean of a density lie between two of its modes, where the density is low?

    True when there is a significant mode (:func:`significant_modes`) on each side of ``mean`` and
    the density at the mean is below ``valley`` times the lower of the highest mode on the left
    and the highest mode on the right. A unimodal density (skewed or not) is never "between".

    Parameters
    ----------
    grid, density : arrays of shape (G,)
    mean : float
        The mean of the density (e.g. the least-squares estimate, eq. 13).
    mean_density : float
        The density at ``mean`` (exact, not read off the grid).
    """
    g = np.asarray(grid, dtype=float)
    d = np.asarray(density, dtype=float)
    idx = significant_modes(d, min_height)
    modes, heights = g[idx], d[idx]
    top = float(heights.max()) if heights.size else 0.0
    ratio = float(mean_density / top) if top > 0 else 1.0
    lower, upper = heights[modes < mean], heights[modes > mean]
    between = bool(lower.size and upper.size and mean_density < valley * min(lower.max(), upper.max()))
    return ModeVerdict(modes=modes, heights=heights, between=between, ratio=ratio)


def between_modes_rows(grid, density, mean, mean_density, *, min_height: float = MODE_MIN_HEIGHT,
                       valley: float = VALLEY_RATIO) -> np.ndarray:
    """:func:`between_modes` for many densities at once: ``grid`` (G,) or (n, G), ``density`` (n, G),
    ``mean`` and ``mean_density`` (n,); returns the ``between`` flags (n,) (same rule, vectorised)."""
    g = np.asarray(grid, dtype=float)
    d = np.asarray(density, dtype=float)
    mean = np.asarray(mean, dtype=float)[:, None]
    left = np.concatenate([np.full((d.shape[0], 1), -np.inf), d[:, :-1]], axis=1)
    right = np.concatenate([d[:, 1:], np.full((d.shape[0], 1), -np.inf)], axis=1)
    top = d.max(axis=1, keepdims=True)
    peak = (d > left) & (d >= right) & (d >= min_height * top) & (top > 0)
    lower = np.where(peak & (g < mean), d, -np.inf).max(axis=1)
    upper = np.where(peak & (g > mean), d, -np.inf).max(axis=1)
    return np.isfinite(lower) & np.isfinite(upper) & (np.asarray(mean_density) < valley * np.minimum(lower, upper))


@dataclass(frozen=True)
class TargetMixtures:
    """p(y | x) of many inputs as 1-D Gaussian mixtures: weights ``w``, means ``m`` and sds ``s``, each (n, K).

    What every read-out of :class:`RegressionModel` is computed from (one conditioning of the joint
    density serves the curve, the draws, the imputed rows and the density slice of a frame).
    """

    w: np.ndarray
    m: np.ndarray
    s: np.ndarray

    def take(self, rows) -> TargetMixtures:
        """The mixtures of some rows (a slice or an index array)."""
        return TargetMixtures(self.w[rows], self.m[rows], self.s[rows])

    def mean(self) -> np.ndarray:
        """E[y | x] (eq. 13), shape (n,)."""
        return np.einsum("nk,nk->n", self.w, self.m)

    def variance(self) -> np.ndarray:
        """The predictive variance (law of total variance), shape (n,)."""
        dev = self.m - self.mean()[:, None]
        return np.maximum(np.einsum("nk,nk->n", self.w, self.s * self.s + dev * dev), 0.0)

    def interval(self, level: float) -> tuple[np.ndarray, np.ndarray]:
        """Equal-tailed intervals at ``level`` (quantiles of the mixtures, by bisection): ``(lower, upper)``."""
        return (mixture_quantile(self.w, self.m, self.s, 0.5 * (1.0 - level)),
                mixture_quantile(self.w, self.m, self.s, 0.5 * (1.0 + level)))

    def sample(self, n_draws: int, rng: np.random.Generator) -> np.ndarray:
        """Draws from every row's mixture, shape (n_draws, n): a component by its weight, then its Gaussian."""
        n = self.w.shape[0]
        u = rng.random((n_draws, n))
        comp = (u[:, :, None] >= np.cumsum(self.w, axis=1)[None, :, :-1]).sum(axis=2)
        rows = np.arange(n)[None, :]
        return self.m[rows, comp] + self.s[rows, comp] * rng.standard_normal((n_draws, n))


# ============================================================================ read-out records
@dataclass(frozen=True)
class RegressionCurve:
    """The regression read-outs along a grid of inputs (see :meth:`RegressionModel.curve`).

    ``x`` (G,); ``mean`` (G,) the least-squares estimate E[y | x] (eq. 13); ``lower``/``upper`` (G,) the
    equal-tailed band at ``level``; ``between`` (G,) bool, the mean lies between modes of p(y | x).
    """

    x: np.ndarray
    mean: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    between: np.ndarray
    level: float

    @property
    def between_fraction(self) -> float:
        """Fraction of the input grid where the mean lies between modes (the bimodal case)."""
        return float(np.mean(self.between)) if self.between.size else 0.0


@dataclass(frozen=True)
class DensitySlice:
    """p(y | x = x0) on a grid (see :meth:`RegressionModel.slice_at`)."""

    x0: float
    grid: np.ndarray  # (G,)
    density: np.ndarray  # (G,)
    components: np.ndarray  # (K, G): h_j(x0) N(y; m_j(x0), S_j), summing to density
    weights: np.ndarray  # (K,) h_j(x0)
    mean: float  # E[y | x0], eq. 13
    mean_density: float  # p(mean | x0)
    sd: float  # predictive standard deviation
    lower: float
    upper: float
    level: float
    draws: np.ndarray  # stochastic estimates at x0
    verdict: ModeVerdict

    @property
    def modes(self) -> np.ndarray:
        return self.verdict.modes

    @property
    def between(self) -> bool:
        return self.verdict.between


@dataclass(frozen=True)
class Scatter:
    """The data as the scatter draws them (see :meth:`RegressionModel.scatter`)."""

    observed: np.ndarray  # (n, 2) rows with x and y observed
    imputed: np.ndarray  # (n, 2) rows with y missing, x observed: (x, E[y | x])
    strip: np.ndarray  # (n,) observed y of the rows whose x is missing
    n_both_missing: int


@dataclass(frozen=True)
class RegressionComparison:
    """Held-out RMSE of several regressions (see :func:`compare_methods`).

    ``rows``: one dict per method with ``method``, ``rmse``, ``rmse_x_observed``, ``rmse_x_missing``
    (NaN when there is no such test row) and ``error`` (why a method failed, else "").
    """

    rows: tuple
    n_train: int
    n_train_labelled: int
    n_test: int
    n_test_x_missing: int
    seconds: float

    def best(self) -> str:
        """The method with the lowest RMSE."""
        ok = [r for r in self.rows if not r["error"]]
        return min(ok, key=lambda r: r["rmse"])["method"] if ok else ""


@dataclass(frozen=True)
class Readouts:
    """Everything a page draws of one state of a run, computed together (see :meth:`RegressionModel.readouts`).

    Immutable: a page computes it on its session's worker (under the model's lock, so the state, the data
    and the settings belong to one run) and draws it on the event loop. Without a run (an error) the
    arrays are None; ``problem`` says why the read-outs of an existing state could not be computed (a
    numerically broken state), else "".
    """

    run_id: int
    iteration: int
    stop_reason: str
    finished: bool  # no step is left in this run (it stopped, or there is none)
    log_likelihood: float | None
    error: str
    problem: str
    data_name: str
    columns: tuple | None
    counts: dict | None  # rows: "complete", "y_missing", "x_missing", "both_missing"
    x_range: tuple | None
    y_range: tuple | None
    x0: float | None
    curve: RegressionCurve | None
    slice: DensitySlice | None
    draws: np.ndarray | None
    scatter: Scatter | None
    comparison: ComparisonRequest | None


# ============================================================================ comparison
JOINT_MEAN = "Joint mixture: E[y | x] (eq. 13)"
JOINT_DRAW = "Joint mixture: one draw from p(y | x)"
MEAN_LINEAR = "Mean imputation + linear regression"
INDICATOR_LINEAR = "Mean imputation + indicator + linear regression"
MEAN_KNN = "Mean imputation + 10-NN regression"
Y_MEAN = "Mean of y (ignores x)"
METHODS = (JOINT_MEAN, JOINT_DRAW, MEAN_LINEAR, INDICATOR_LINEAR, MEAN_KNN, Y_MEAN)


def _imputation_regressors(n_train: int) -> dict:
    """The regressions fitted after imputation: explorer.learn.treatments when present, else scikit-learn pipelines.

    Both give the same predictions: the mean of the observed training inputs fills a missing input
    (the indicator variant adds the response indicator r as a feature, Marlin's augmentation).
    """
    from sklearn.dummy import DummyRegressor
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LinearRegression
    from sklearn.neighbors import KNeighborsRegressor
    from sklearn.pipeline import make_pipeline

    knn = KNeighborsRegressor(n_neighbors=max(1, min(10, n_train)))
    try:
        from explorer.learn.treatments import MissingInputRegressor
    except ImportError:  # the treatments module is optional here
        return {MEAN_LINEAR: make_pipeline(SimpleImputer(), LinearRegression()),
                INDICATOR_LINEAR: make_pipeline(SimpleImputer(add_indicator=True), LinearRegression()),
                MEAN_KNN: make_pipeline(SimpleImputer(), knn),
                Y_MEAN: DummyRegressor()}
    return {MEAN_LINEAR: MissingInputRegressor(LinearRegression(), "mean"),
            INDICATOR_LINEAR: MissingInputRegressor(LinearRegression(), "augmented"),
            MEAN_KNN: MissingInputRegressor(knn, "mean"),
            Y_MEAN: DummyRegressor()}


def _rmse(pred, truth, rows) -> float:
    return float(np.sqrt(np.mean((pred[rows] - truth[rows]) ** 2))) if np.any(rows) else float("nan")


def compare_methods(values, *, n_components: int, covariance_type: str = "full", seed: int = 0,
                    test_fraction: float = 0.3, split_seed: int = 0, tol: float = 1e-5, max_iter: int = 300,
                    reg_covar: float = 1e-6) -> RegressionComparison:
    """Held-out RMSE of the joint-density regression and of regressions fitted after imputation.

    The rows whose target is observed are split at random (``split_seed``): ``test_fraction`` of
    them are held out, their target hidden. Every method is fitted on the other rows and predicts
    the held-out targets from their inputs (a missing input included):

    * the joint mixture (:class:`explorer.learn.joint.GaussianMixtureRegressor`, ``n_components``
      Gaussians on (x, y), fitted on *every* training row, those with y missing too): its
      least-squares estimate (eq. 13) and its stochastic estimate (one draw, seed ``seed``);
    * mean imputation + linear regression, + the missing-input indicator, + 10-nearest-neighbour
      regression, and the mean of y: fitted on the training rows with y observed.

    Parameters
    ----------
    values : array of shape (n_samples, 2)
        Input and target columns; NaN = missing.

    Raises
    ------
    BadInputError
        Fewer than 3 held-out or 3 training rows with an observed target.
    """
    from explorer.learn.joint import GaussianMixtureRegressor

    start = time.perf_counter()
    values = np.asarray(values, dtype=float)
    if values.ndim != 2 or values.shape[1] != 2:
        raise BadInputError(f"values must have two columns (input, target); got shape {values.shape}.")
    labelled = np.flatnonzero(~np.isnan(values[:, 1]))
    n_test = int(round(test_fraction * labelled.size))
    if n_test < 3 or labelled.size - n_test < 3:
        raise BadInputError(
            f"A held-out comparison needs at least 3 test and 3 training rows with an observed target; "
            f"{labelled.size} rows have one (test fraction {test_fraction:.0%}).")
    rng = np.random.default_rng(split_seed)
    test = np.sort(rng.choice(labelled, size=n_test, replace=False))
    train = np.setdiff1d(np.arange(values.shape[0]), test)
    x_tr, y_tr = values[train, :1], values[train, 1]
    x_te, y_te = values[test, :1], values[test, 1]
    x_missing = np.isnan(x_te[:, 0])
    lab = ~np.isnan(y_tr)
    rows = []

    def add(method, pred=None, error=""):
        pred = None if pred is None else np.asarray(pred, dtype=float).reshape(-1)
        everyone = np.ones(n_test, dtype=bool)
        rows.append({"method": method, "error": error,
                     "rmse": float("nan") if pred is None else _rmse(pred, y_te, everyone),
                     "rmse_x_observed": float("nan") if pred is None else _rmse(pred, y_te, ~x_missing),
                     "rmse_x_missing": float("nan") if pred is None else _rmse(pred, y_te, x_missing)})

    gmr = GaussianMixtureRegressor(n_components=n_components, covariance_type=covariance_type, reg_covar=reg_covar,
                                   tol=tol, max_iter=max_iter, random_state=seed)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a ConvergenceWarning at max_iter: the table still says the RMSE
            gmr.fit(x_tr, y_tr)
        add(JOINT_MEAN, gmr.predict(x_te))
        add(JOINT_DRAW, gmr.sample(x_te, 1, random_state=seed)[0])
    except BadInputError as exc:
        add(JOINT_MEAN, error=str(exc))
        add(JOINT_DRAW, error=str(exc))
    for method, est in _imputation_regressors(int(lab.sum())).items():
        try:
            est.fit(x_tr[lab], y_tr[lab])
            add(method, est.predict(x_te))
        except (BadInputError, ValueError) as exc:
            add(method, error=str(exc))
    return RegressionComparison(rows=tuple(rows), n_train=int(train.size), n_train_labelled=int(lab.sum()),
                                n_test=n_test, n_test_x_missing=int(x_missing.sum()),
                                seconds=time.perf_counter() - start)


@dataclass(frozen=True, eq=False)
class ComparisonRequest:
    """What :func:`compare_methods` computes on: the run's (input, target) values and the settings.

    Equal (and hashed) by content, so :func:`cached_comparison` finds a comparison made for the same
    values and settings in another session, and a page recomputes only when ``key`` changes.
    """

    values: np.ndarray
    settings: tuple  # (name, value) pairs: the keyword arguments of compare_methods

    @functools.cached_property
    def key(self) -> tuple:
        values = np.ascontiguousarray(self.values, dtype=float)
        digest = hashlib.blake2b(values.tobytes(), digest_size=16).hexdigest()
        return (digest, values.shape, self.settings)

    def __eq__(self, other) -> bool:
        return isinstance(other, ComparisonRequest) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)


@functools.lru_cache(maxsize=COMPARISONS_CACHED)
def cached_comparison(request: ComparisonRequest) -> RegressionComparison:
    """:func:`compare_methods` on ``request``, computed once for every session of the server.

    Raises what :func:`compare_methods` raises (a failure is not kept).
    """
    return compare_methods(request.values, **dict(request.settings))


class SharedRun:
    """The EM states of one run (data, settings and seed), computed once for every session of the server.

    Stands in for :mod:`explorer.core.mixtures.em_gmm` as a model's ``_CORE`` (``init``, ``step``, ``snapshot``):
    ``init`` gives the run's first state, ``step(old)`` the state after ``old`` when some session has
    already computed it (the very same object), else computes it with :func:`explorer.core.mixtures.em_gmm.step`
    and keeps it for the next session. States are immutable; EM is deterministic, so a session that
    reads them sees exactly what it would have computed.
    """

    _runs: ClassVar[OrderedDict] = OrderedDict()  # run key -> SharedRun, the RUNS_SHARED most recently started
    _runs_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self):
        self._states: list = []
        self._lock = threading.Lock()

    @classmethod
    def of(cls, values: np.ndarray, config: em_gmm.EMConfig, seed: int) -> SharedRun:
        """The shared run of ``values`` (NaN = missing) with ``config`` from ``seed``."""
        values = np.ascontiguousarray(values, dtype=float)
        key = (hashlib.blake2b(values.tobytes(), digest_size=16).hexdigest(), values.shape, config, seed)
        with cls._runs_lock:
            run = cls._runs.get(key)
            if run is None:
                run = cls._runs[key] = cls()
            cls._runs.move_to_end(key)
            while len(cls._runs) > RUNS_SHARED:
                cls._runs.popitem(last=False)
        return run

    @property
    def computed(self) -> int:
        """States of the run computed so far (by any session)."""
        return len(self._states)

    def init(self, data, config, rng):
        with self._lock:
            if self._states:
                return self._states[0]
        state = em_gmm.init(data, config, rng)
        with self._lock:
            if not self._states:
                self._states.append(state)
            return self._states[0]

    def step(self, old, data, config):
        i = old.iteration
        with self._lock:
            if i + 1 < len(self._states) and self._states[i] is old:
                return self._states[i + 1]
        new = em_gmm.step(old, data, config)
        with self._lock:
            if len(self._states) == i + 1 and self._states[i] is old:
                self._states.append(new)
        return new

    snapshot = staticmethod(em_gmm.snapshot)


# ============================================================================ the model
class RegressionModel(EMModel):
    """EM on the joint density of an input and a target column, and the regression it implies.

    Parameters
    ----------
    data_model : DataModel
        Its ``pair_only`` is switched on and its ``columns`` follow ``input_column`` /
        ``target_column`` (default: the noisy circle ``ring``, MCAR 20 %).
    input_column, target_column : str
        The input x and the target y (default: the data's first two columns). The same column for
        both is an error (``error`` says so and there is no fit).
    n_components, covariance_type, seed, tol, max_iter :
        EM settings (:class:`~explorer.ui.state.em_model.EMModel`); ``covariance_type`` "full" or
        "diag" (with "diag" eq. 13 is a normalised RBF network: :math:`\\sum_j h_j(x) \\mu_j^y`).
    level : float
        Coverage of the predictive band.
    x0 : float or None
        The input of the density slice p(y | x = x0) (None, or outside the observed inputs: their middle).
    test_fraction, split_seed :
        The held-out split of :meth:`compare`.

    Examples
    --------
    >>> m = RegressionModel(data_model=DataModel(dataset="ring", mechanism="mcar", rate=0.2), n_components=6)
    >>> m.run() > 0, m.input_column, m.target_column
    (True, 'x', 'y')
    >>> m.slice_at(0.0).between  # on the circle, p(y | x = 0) has modes near -3 and 3, its mean near 0
    True
    """

    _SETTINGS = tuple(EMModel._SETTINGS) + tuple(s for s in _SETTINGS if s not in EMModel._SETTINGS)

    n_components = param.Integer(default=6, bounds=(1, 30), doc="Number of components K")
    covariance_type = param.Selector(default="full", objects=["full", "diag"], doc="Covariance type")
    input_column = param.String(default="", doc="The input column x")
    target_column = param.String(default="", doc="The target column y")
    level = param.Number(default=0.95, bounds=(0.5, 0.99), doc="Coverage of the predictive band")
    x0 = param.Number(default=None, allow_None=True, doc="Input of the density slice p(y | x = x0)")
    test_fraction = param.Number(default=0.3, bounds=(0.1, 0.5), doc="Held-out share of the rows with y observed")
    split_seed = param.Integer(default=0, bounds=(0, MAX_SEED), doc="Seed of the held-out split")

    def __init__(self, **params):
        dm = params.get("data_model")
        if dm is None:
            dm = params["data_model"] = DataModel(dataset="ring", mechanism="mcar", rate=0.2)
        pair = [params.get("input_column") or "", params.get("target_column") or ""]
        with param.parameterized.batch_call_watchers(dm):
            dm.pair_only = True
            if pair[0] and pair[1] and pair[0] != pair[1] and all(c in dm.all_columns for c in pair):
                dm.columns = pair
        self._adopting = False
        self._run_columns: tuple | None = None
        super().__init__(**params)

    # ------------------------------------------------------------------ columns
    @property
    def all_columns(self) -> tuple:
        """Every column of the loaded data set (the choices for input and target)."""
        return tuple(self.data_model.all_columns)

    @property
    def truth(self):
        return None  # no imputation RMSE in the trace: the page shows regression read-outs (and steps faster)

    def _adopt_columns(self) -> None:
        """Input and target not in the data (another data set was loaded): take the data's pair."""
        data = self.data_model.data
        if data is None or data.n_features < 2:
            return
        cols = tuple(data.columns)
        if self.input_column in cols and self.target_column in cols:
            return
        self._adopting = True
        try:
            self.param.update(input_column=cols[0], target_column=cols[1])
        finally:
            self._adopting = False

    @param.depends("input_column", "target_column", watch=True)
    def _on_columns(self) -> None:
        """New input / target: reload the pair (its revision starts a new run), or start one at once."""
        if self._adopting:
            return
        dm, pair = self.data_model, [self.input_column, self.target_column]
        if pair[0] != pair[1] and all(c in dm.all_columns for c in pair) and list(dm.columns) != pair:
            revision = dm.revision
            dm.columns = pair
            if dm.revision != revision:
                return  # the new data reset the run
        if self._run_columns != tuple(pair) or self.error:
            self.reset()

    # ------------------------------------------------------------------ SteppedModel hooks
    @param.depends("data_model.revision", "n_components", "covariance_type", "variant", "init", "reg_covar", "seed",
                   watch=True)
    def reset(self):
        """Start a new run from the current data and settings (iteration 0)."""
        self._adopt_columns()
        super().reset()

    def _prepare(self, data) -> None:
        self._run_columns = None
        name = repr(data.name) if data.name else "the data"
        if data.n_features < 2:
            raise BadInputError(f"Regression needs two numeric columns (an input and a target); {name} has "
                                f"{data.n_features}.")
        inp, tgt = self.input_column, self.target_column
        if inp == tgt:
            raise BadInputError(f"The input and the target are the same column ({inp!r}): choose two different "
                                "columns.")
        cols = list(data.columns)
        for c in (inp, tgt):
            if c not in cols:
                raise BadInputError(f"There is no column {c!r} in {name}; its columns are "
                                    f"{', '.join(repr(c) for c in self.all_columns)}.")
        idx = [cols.index(inp), cols.index(tgt)]
        values, missing = data.values[:, idx], data.missing[:, idx]
        n_rows = int((~missing).any(axis=1).sum())
        if self.n_components > n_rows:
            raise BadInputError(f"K = {self.n_components} components need at least {self.n_components} rows with an "
                                f"observed value; {name} has {n_rows} in these columns. Choose K <= {n_rows}.")
        self._config = self.config()
        self._data = em_gmm.prepare(values, missing, columns=[inp, tgt])
        self._run_columns = (inp, tgt)
        self._CORE = SharedRun.of(self._data.X, self._config, self.seed)  # this run's states, shared

    # ------------------------------------------------------------------ read-outs
    @property
    def columns(self) -> tuple | None:
        """``(input, target)`` of the current run (None without one)."""
        return self._run_columns if self._data is not None else None

    def regressor(self):
        """An unfitted :class:`~explorer.learn.joint.GaussianMixtureRegressor` with this model's EM settings.

        Fitted on the run's columns (``fit(X[:, :1], X[:, 1])``) it reaches the state this model reaches
        when run to convergence: same EM, same initialisation seed.
        """
        from explorer.learn.joint import GaussianMixtureRegressor

        return GaussianMixtureRegressor(n_components=self.n_components, covariance_type=self.covariance_type,
                                        reg_covar=self.reg_covar, tol=self.tol, max_iter=self.max_iter,
                                        random_state=self.seed)

    def predictive(self, x) -> ConditionalMixture | None:
        """:math:`p(y \\mid x)` for the inputs ``x`` (NaN = missing: then p(y)) under the current state."""
        state = self.state
        if state is None or self._data is None:
            return None
        return regression(state.weights, state.means, state.covariances, np.asarray(x, dtype=float).reshape(-1, 1),
                          inputs=[0], targets=[1], covariance_type=self._config.covariance_type)

    def _observed(self, j: int) -> np.ndarray:
        X = self._data.X
        return X[~np.isnan(X[:, j]), j]

    def x_range(self) -> tuple[float, float]:
        """Smallest and largest observed input (a unit range around a single value)."""
        x = self._observed(0)
        lo, hi = float(x.min()), float(x.max())
        return (lo - 0.5, hi + 0.5) if hi <= lo else (lo, hi)

    def y_range(self) -> tuple[float, float]:
        """Smallest and largest observed target (a unit range around a single value)."""
        y = self._observed(1)
        lo, hi = float(y.min()), float(y.max())
        return (lo - 0.5, hi + 0.5) if hi <= lo else (lo, hi)

    @property
    def x0_used(self) -> float | None:
        """``x0`` when it lies within the observed inputs, else their middle (None without a run)."""
        if self._data is None:
            return None
        lo, hi = self.x_range()
        if self.x0 is not None and lo <= self.x0 <= hi:
            return float(self.x0)
        return 0.5 * (lo + hi)

    def target_mixtures(self, x) -> TargetMixtures | None:
        """p(y | x) for the inputs ``x`` as 1-D mixtures (None without a state)."""
        cond = self.predictive(x)
        if cond is None:
            return None
        w, m, s = target_mixtures(cond)
        return TargetMixtures(w, m[:, 0], s[:, 0])

    def _y_grids(self, mix: TargetMixtures, n_grid: int) -> np.ndarray:
        """One target grid per row of ``mix`` (n, n_grid): mean ± 4 sd of each component of weight > 1e-3.

        Every grid spans at least 2 % of the observed targets' range (a near-deterministic
        conditional is not drawn as a zero-width spike).
        """
        keep = mix.w > 1e-3
        lo = np.min(np.where(keep, mix.m - 4 * mix.s, np.inf), axis=1)
        hi = np.max(np.where(keep, mix.m + 4 * mix.s, -np.inf), axis=1)
        ylo, yhi = self.y_range()
        pad = np.maximum(0.0, 0.02 * (yhi - ylo) - (hi - lo)) / 2
        return np.linspace(lo - pad, hi + pad, n_grid, axis=1)

    def _curve_of(self, x, mix: TargetMixtures, interval, n_density: int) -> RegressionCurve:
        mean = mix.mean()
        lower, upper = interval
        grid = self._y_grids(mix, n_density)
        dens = mixture_density(mix.w, mix.m, mix.s, grid)
        z = (mean[:, None] - mix.m) / mix.s
        at_mean = np.sum(mix.w * np.exp(-0.5 * z * z) / (np.sqrt(2.0 * np.pi) * mix.s), axis=1)  # p(mean(x) | x)
        between = between_modes_rows(grid, dens, mean, at_mean)
        return RegressionCurve(x=x, mean=mean, lower=lower, upper=upper, between=between, level=self.level)

    def _slice_of(self, x0: float, mix: TargetMixtures, interval, n_grid: int, n_draws: int,
                  rng: np.random.Generator) -> DensitySlice:
        grid = self._y_grids(mix, n_grid)[0]
        w, m, s = mix.w[0], mix.m[0], mix.s[0]
        z = (grid[None, :] - m[:, None]) / s[:, None]
        components = w[:, None] * np.exp(-0.5 * z * z) / (np.sqrt(2.0 * np.pi) * s[:, None])
        density = components.sum(axis=0)
        mean = float(mix.mean()[0])
        mean_density = float(mixture_density(mix.w, mix.m, mix.s, [mean])[0, 0])
        verdict = between_modes(grid, density, mean, mean_density)
        return DensitySlice(x0=x0, grid=grid, density=density, components=components, weights=np.array(w),
                            mean=mean, mean_density=mean_density, sd=float(np.sqrt(mix.variance()[0])),
                            lower=float(interval[0][0]), upper=float(interval[1][0]), level=self.level,
                            draws=mix.sample(n_draws, rng)[:, 0], verdict=verdict)

    def _draw_inputs(self, n_draws: int, rng: np.random.Generator) -> np.ndarray:
        lo, hi = self.x_range()
        return np.sort(rng.uniform(lo, hi, size=n_draws))

    def curve(self, n_grid: int = 160, n_density: int = 240) -> RegressionCurve | None:
        """E[y | x] (eq. 13), the band at ``level`` and the bimodal flag along the observed inputs.

        The inputs are ``n_grid`` points over the observed inputs; the bimodal flag compares the
        mean with the modes of p(y | x) on ``n_density`` target values (:func:`between_modes`).
        None without a state.
        """
        if self.state is None or self._data is None:
            return None
        x = np.linspace(*self.x_range(), n_grid)
        mix = self.target_mixtures(x)
        return self._curve_of(x, mix, mix.interval(self.level), n_density)

    def draws(self, n_draws: int = 400, rng: np.random.Generator | None = None) -> np.ndarray | None:
        """``n_draws`` stochastic estimates at inputs spread uniformly over the observed ones: (n_draws, 2) (x, y)."""
        if self.state is None or self._data is None:
            return None
        rng = np.random.default_rng(self.seed) if rng is None else rng
        x = self._draw_inputs(n_draws, rng)
        return np.column_stack([x, self.target_mixtures(x).sample(1, rng)[0]])

    def slice_at(self, x0: float | None = None, n_grid: int = 400, n_draws: int = 200,
                 rng: np.random.Generator | None = None) -> DensitySlice | None:
        """p(y | x = x0) on a grid, its components, mean (eq. 13), band, draws and modes; None without a state.

        ``x0`` None: :attr:`x0_used`.
        """
        if self.state is None or self._data is None:
            return None
        x0 = self.x0_used if x0 is None else float(x0)
        rng = np.random.default_rng(self.seed) if rng is None else rng
        mix = self.target_mixtures([x0])
        return self._slice_of(x0, mix, mix.interval(self.level), n_grid, n_draws, rng)

    def scatter(self) -> Scatter | None:
        """Observed rows, rows with y missing at (x, E[y | x]), the observed y of rows whose x is missing."""
        if self._data is None:
            return None
        x = self._imputed_inputs()
        y = self.target_mixtures(x).mean() if x.size and self.state is not None else None
        return self._scatter_of(y)

    def _imputed_inputs(self) -> np.ndarray:
        miss = self._data.missing
        return self._data.X[miss[:, 1] & ~miss[:, 0], 0]

    def _scatter_of(self, imputed_y) -> Scatter:
        X, miss = self._data.X, self._data.missing
        x = self._imputed_inputs()
        imputed = np.zeros((0, 2)) if imputed_y is None else np.column_stack([x, imputed_y])
        return Scatter(observed=X[~miss.any(axis=1)], imputed=imputed, strip=X[miss[:, 0] & ~miss[:, 1], 1],
                       n_both_missing=int(miss.all(axis=1).sum()))

    def comparison_request(self) -> ComparisonRequest | None:
        """The values and settings :meth:`compare` works on (None without a run). Hold :attr:`lock` for a
        request that matches the current run."""
        if self._data is None:
            return None
        values = np.array(self._data.X, dtype=float)
        values.setflags(write=False)
        settings = (("n_components", self.n_components), ("covariance_type", self.covariance_type),
                    ("seed", self.seed), ("test_fraction", self.test_fraction), ("split_seed", self.split_seed),
                    ("tol", self.tol), ("max_iter", self.max_iter), ("reg_covar", self.reg_covar))
        return ComparisonRequest(values=values, settings=settings)

    def compare(self) -> RegressionComparison:
        """Held-out RMSE of the joint mixture and of regressions after imputation (:func:`compare_methods`;
        shared with the other sessions through :func:`cached_comparison`)."""
        request = self.comparison_request()
        if request is None:
            raise BadInputError(self.error or "No data to compare on.")
        return cached_comparison(request)

    def readouts(self, n_draws: int = 300, n_slice_draws: int = 200) -> Readouts:
        """Everything a page draws of the current state, computed together under :attr:`lock`.

        The curve (:meth:`curve`), the density slice at :attr:`x0_used` (:meth:`slice_at`, ``n_slice_draws``
        draws), ``n_draws`` stochastic estimates (:meth:`draws`), the scatter (:meth:`scatter`), the row
        counts, the ranges and the :meth:`comparison_request`. A numerically broken state gives read-outs
        without arrays and its error in ``problem``.
        """
        with self._lock:
            dm = self.data_model.data
            base = {"run_id": self.run_id, "iteration": self.iteration, "stop_reason": self.stop_reason,
                    "finished": self.finished, "log_likelihood": self.log_likelihood, "error": self.error,
                    "data_name": (dm.name if dm is not None else "") or "data"}
            none = {"problem": "", "columns": None, "counts": None, "x_range": None, "y_range": None, "x0": None,
                    "curve": None, "slice": None, "draws": None, "scatter": None, "comparison": None}
            if self._data is None or self.columns is None:
                return Readouts(**base, **none)
            miss = self._data.missing
            counts = {"complete": int((~miss.any(axis=1)).sum()), "y_missing": int((miss[:, 1] & ~miss[:, 0]).sum()),
                      "x_missing": int((miss[:, 0] & ~miss[:, 1]).sum()), "both_missing": int(miss.all(axis=1).sum())}
            shared = {"columns": self.columns, "counts": counts, "x_range": self.x_range(), "y_range": self.y_range(),
                      "x0": self.x0_used, "comparison": self.comparison_request()}
            try:
                arrays = self._readout_arrays(n_draws, n_slice_draws)
            except BadInputError as exc:
                arrays = {"curve": None, "slice": None, "draws": None, "scatter": None, "problem": str(exc)}
            return Readouts(**base, **shared, **arrays)

    def _readout_arrays(self, n_draws: int, n_slice_draws: int, n_grid: int = 160, n_density: int = 240,
                        n_slice_grid: int = 400) -> dict:
        """The curve, the draws, the scatter and the slice of :meth:`readouts` from ONE conditioning of the joint
        density (the same numbers as :meth:`curve`, :meth:`draws`, :meth:`scatter` and :meth:`slice_at`)."""
        if self.state is None:
            return {"curve": None, "slice": None, "draws": None, "scatter": self._scatter_of(None), "problem": ""}
        rng = np.random.default_rng(self.seed)
        x_curve = np.linspace(*self.x_range(), n_grid)
        x_draws = self._draw_inputs(n_draws, rng)
        x_imputed = self._imputed_inputs()
        x0 = self.x0_used
        mix = self.target_mixtures(np.concatenate([x_curve, x_draws, x_imputed, [x0]]))
        ends = np.cumsum([n_grid, n_draws, x_imputed.size])
        banded = np.r_[0:n_grid, ends[2]]  # the curve's rows and x0's: one bisection for both
        lower, upper = mix.take(banded).interval(self.level)
        curve = self._curve_of(x_curve, mix.take(slice(0, n_grid)), (lower[:-1], upper[:-1]), n_density)
        draws = np.column_stack([x_draws, mix.take(slice(ends[0], ends[1])).sample(1, rng)[0]])
        imputed = mix.take(slice(ends[1], ends[2])).mean() if x_imputed.size else None
        density = self._slice_of(x0, mix.take(slice(ends[2], ends[2] + 1)), (lower[-1:], upper[-1:]), n_slice_grid,
                                 n_slice_draws, np.random.default_rng(self.seed))
        return {"curve": curve, "slice": density, "draws": draws, "scatter": self._scatter_of(imputed), "problem": ""}


#: Old names (before class names were made unique across explorer), importable for one release with a warning
__getattr__ = renamed_names(__name__, globals(), {"Comparison": "RegressionComparison"})
