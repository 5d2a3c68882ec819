r"""The "Sensitivity" page's model: delta adjustment of Gaussian-mixture imputations, as the NMAR shift grows.

A :class:`~explorer.ui.state.data_model.DataModel` gives the data (a built-in data set or the
session's upload, with a missingness mechanism; the page's default is iris with ``nmar_lowest``
at 10 %: the 47 lowest ``sepal_length`` values are hidden, an NMAR mechanism on one column).
:class:`SensitivityModel` fits :class:`~explorer.impute.gaussian_mixture.GaussianMixtureImputer` (K components),
draws M imputations (the heavy part: :meth:`SensitivityModel.job` / :func:`run_job`, run off the
event loop by the view, adopted with :meth:`SensitivityModel.adopt`) and runs the delta
adjustment of :mod:`explorer.core.missingness.sensitivity` on them (cheap: every other setting only reruns
:meth:`SensitivityModel.analyse`):

* ``column``: whose imputations are shifted (:math:`x \to x + \delta`, :math:`\delta` in units of the
  column's observed standard deviation on the page) or scaled (:math:`x \to \delta x`);
* ``estimate``: the mean of ``mean_column`` or the OLS coefficient of ``predictor`` in the
  regression of ``target`` on it;
* the grid: ``n_deltas`` values over ``±delta_max`` sd (shift) or :math:`1 \pm` ``delta_max``/2
  (scale); ``delta_index`` picks the one whose imputations are drawn.

Outputs (constant parameters, written by the model only): ``table``
(:class:`~explorer.core.missingness.sensitivity.SensitivityTable`), ``tipping``, ``error``, ``status`` and
``revision`` (increases with every new table). No Panel import.

The imputations of a job depend only on its data and settings (the seed included), so
:func:`cached_run_job` keeps the latest results (read-only arrays, :data:`DRAW_CACHE`) for every
session of the server process: the start screen, the same for every student, is drawn once per process.
"""

from __future__ import annotations

import hashlib
import threading
import time
import warnings
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import param

from explorer.core.missingness import sensitivity as core
from explorer.core.validation import BadInputError
from explorer.sensitivity import default_deltas, draw_imputations
from explorer.ui.state._settings import MAX_SEED, Settings
from explorer.ui.state.data_model import DataModel

__all__ = ["DRAW_CACHE", "ESTIMATES", "DrawCache", "DrawJob", "DrawResult", "SensitivityModel", "cached_run_job",
           "run_job"]

#: Page labels of the downstream estimates.
ESTIMATES = {"mean of a column": "mean", "regression coefficient (OLS)": "ols"}
_SETTINGS = ("column", "mode", "delta_max", "n_deltas", "delta_index", "estimate", "mean_column", "target",
             "predictor", "n_imputations", "n_components", "bootstrap", "selection", "seed", "level")
#: Widest data the selection-model reference is fitted on (its E-step integrates over every missing pattern).
MAX_SELECTION_FEATURES = 20
#: Most missing values in a row for the selection-model reference (more: importance sampling, minutes).
MAX_SELECTION_MISSING = 2
#: Seconds the selection model's EM may take before the page gives up on it (it says so).
SELECTION_SECONDS = 20.0


class _OutOfTime(Exception):
    pass


@dataclass(frozen=True)
class DrawJob:
    """Everything the imputation needs, copied from the model (a worker thread reads nothing else)."""

    key: tuple
    values: np.ndarray
    n_imputations: int
    n_components: int
    bootstrap: bool
    seed: int
    selection: bool = False
    missing: np.ndarray | None = None

    def content_key(self) -> tuple:
        """What the result depends on: the data (their bytes) and the settings; the same in every session."""
        digest = hashlib.sha1(np.ascontiguousarray(self.values, dtype=float).tobytes())
        if self.missing is not None:
            digest.update(np.ascontiguousarray(self.missing, dtype=bool).tobytes())
        return (digest.hexdigest(), self.values.shape, self.n_imputations, self.n_components, self.bootstrap,
                self.seed, self.selection)


@dataclass(frozen=True)
class DrawResult:
    """What :func:`run_job` returns: the MAR imputations (M, N, D) and, when asked for, draws (M, N, D) from the
    fitted selection model (``selection``, or None with ``note`` saying why; ``timed_out`` when its fit ran
    out of time, which depends on the machine's load rather than on the job)."""

    imputations: np.ndarray
    selection: np.ndarray | None = None
    note: str = ""
    timed_out: bool = False

    @property
    def nbytes(self) -> int:
        return int(self.imputations.nbytes + (0 if self.selection is None else self.selection.nbytes))


def run_job(job: DrawJob, progress=None) -> DrawResult:
    r"""The imputations of ``job`` (fit + draws; no parameter of any model is touched).

    With ``job.selection``: also the Gaussian-mixture selection model with logistic self-masking
    (:mod:`explorer.core.mixtures.gaussian_selection`, K components, fitted jointly by EM) and M draws from its
    NMAR-aware conditional :math:`p(x^m \mid x^o, r)`: the page's model-based reference.
    """
    imps = draw_imputations(job.values, job.n_imputations, n_components=job.n_components, bootstrap=job.bootstrap,
                            random_state=job.seed, progress=progress)
    if not job.selection:
        return DrawResult(imps)
    if job.values.shape[1] > MAX_SELECTION_FEATURES:
        return DrawResult(imps, None, f"no selection model: more than {MAX_SELECTION_FEATURES} columns")
    if int(job.missing.sum(axis=1).max()) > MAX_SELECTION_MISSING:
        return DrawResult(imps, None, f"no selection model: rows with more than {MAX_SELECTION_MISSING} missing values "
                                      "make its fit take minutes")
    try:
        from explorer.core.mixtures import gaussian_selection as gs
    except ImportError:  # pragma: no cover - the module is optional here
        return DrawResult(imps, None, "no selection model in this installation")
    if progress:
        progress(0, 0)
    rng = np.random.default_rng(job.seed)
    try:
        data = gs.prepare(job.values, job.missing)
        deadline = time.monotonic() + SELECTION_SECONDS

        def budget(state):
            if time.monotonic() > deadline:
                raise _OutOfTime

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a fit stopped at max_iter still gives a usable reference
            result = gs.fit(data, gs.SelectionConfig(n_components=job.n_components), rng, callback=budget)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            draws, _ = gs.impute(result.state.params, job.values, job.missing, rng=rng, n_draws=job.n_imputations)
    except _OutOfTime:
        return DrawResult(imps, None, f"no selection model: its fit took more than {SELECTION_SECONDS:.0f} s",
                          timed_out=True)
    except (BadInputError, np.linalg.LinAlgError, ValueError) as exc:
        return DrawResult(imps, None, f"no selection model: {exc}")
    return DrawResult(imps, np.asarray(draws, dtype=float))


class DrawCache:
    """Results of :func:`run_job` shared by the sessions of a server process: least recently used out first.

    Parameters
    ----------
    max_bytes : int
        The arrays kept, in bytes, at most (a larger result is not kept).
    """

    def __init__(self, max_bytes: int):
        self.max_bytes = int(max_bytes)
        self._results: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0

    def __contains__(self, key) -> bool:
        with self._lock:
            return key in self._results

    def get(self, key) -> DrawResult | None:
        with self._lock:
            result = self._results.get(key)
            if result is not None:
                self._results.move_to_end(key)
                self.hits += 1
            return result

    def put(self, key, result: DrawResult) -> None:
        if result.nbytes > self.max_bytes:
            return
        with self._lock:
            self._results[key] = result
            self._results.move_to_end(key)
            while sum(r.nbytes for r in self._results.values()) > self.max_bytes:
                self._results.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._results.clear()


#: The process's shared results (the default screen: 20 x 150 x 4 values and as many selection-model draws).
DRAW_CACHE = DrawCache(max_bytes=64 * 2**20)


def cached_run_job(job: DrawJob, progress=None) -> DrawResult:
    """:func:`run_job`, or the result a session of this process already computed for the same data and settings.

    The arrays of a result are read-only (sessions share them). A selection model that ran out of time is
    not kept (another try may finish).
    """
    key = job.content_key()
    result = DRAW_CACHE.get(key)
    if result is None:
        result = run_job(job, progress)
        for array in (result.imputations, result.selection):
            if array is not None:
                array.flags.writeable = False
        if not result.timed_out:
            DRAW_CACHE.put(key, result)
    return result


class SensitivityModel(Settings):
    """Delta-adjustment sensitivity analysis on the data of a :class:`DataModel` (see the module docstring).

    Examples
    --------
    >>> m = SensitivityModel(data_model=DataModel(dataset="iris", mechanism="nmar_lowest", rate=0.1), n_imputations=5)
    >>> m.refresh()
    >>> m.column, len(m.table.delta), m.table.estimand.kind
    ('sepal_length', 21, 'mean')
    """

    _SETTINGS = _SETTINGS

    data_model = param.ClassSelector(class_=DataModel, precedence=-1)
    column = param.String(default="", doc="The column whose imputations are shifted or scaled")
    mode = param.Selector(default="shift", objects=list(core.MODES), doc="Shift x -> x + delta, or scale x -> delta x")
    delta_max = param.Number(default=1.0, bounds=(0.1, 3.0), doc="Grid half-width: observed sd (shift), 2x (scale)")
    n_deltas = param.Integer(default=21, bounds=(5, 61), doc="Values of delta on the grid")
    delta_index = param.Integer(default=10, bounds=(0, 60), doc="The grid value whose imputations are shown")
    estimate = param.Selector(default="mean", objects=list(ESTIMATES.values()), doc="Downstream estimate")
    mean_column = param.String(default="", doc="Column whose mean is estimated (default: the shifted column)")
    target = param.String(default="", doc="Regression target")
    predictor = param.String(default="", doc="Regression predictor (its coefficient is reported)")
    n_imputations = param.Integer(default=20, bounds=(2, 100), doc="Imputations M")
    n_components = param.Integer(default=2, bounds=(1, 10), doc="Mixture components K of the imputer")
    bootstrap = param.Boolean(default=False, doc="One mixture per imputation, fitted on a bootstrap resample")
    selection = param.Boolean(default=True, doc="Also fit the selection model (logistic self-masking) as a reference")
    seed = param.Integer(default=0, bounds=(0, MAX_SEED), doc="Seed of the fit and the draws")
    level = param.Number(default=0.95, bounds=(0.5, 0.99), doc="Coverage of the intervals")

    table = param.Parameter(default=None, constant=True, precedence=-1, doc="The SensitivityTable (None: none yet)")
    tipping = param.Parameter(default=None, constant=True, precedence=-1, doc="TippingPoint or None")
    error = param.String(default="", constant=True, precedence=-1, doc="Why there is no table, readable")
    revision = param.Integer(default=0, constant=True, precedence=-1, doc="Increases with every new table")
    selection_estimate = param.Parameter(default=None, constant=True, precedence=-1,
                                         doc="(estimate, lower, upper) pooled over the selection model's draws, or None")
    selection_note = param.String(default="", constant=True, precedence=-1, doc="Why there is no selection estimate")

    def __init__(self, **params):
        if params.get("data_model") is None:
            params["data_model"] = DataModel(dataset="iris", mechanism="nmar_lowest", rate=0.1)
        super().__init__(**params)
        self._lock = threading.RLock()
        self._imputations: np.ndarray | None = None
        self._selection_draws: np.ndarray | None = None
        self._drawn_key: tuple | None = None
        self._adopting = False
        self._adopt_columns()
        self.data_model.param.watch(self._on_data, "revision")
        self.param.watch(self._on_analysis_settings, ["column", "mode", "delta_max", "n_deltas", "estimate",
                                                      "mean_column", "target", "predictor", "level"])

    # ------------------------------------------------------------------ columns
    @property
    def columns(self) -> tuple:
        data = self.data_model.data
        return tuple(str(c) for c in data.columns) if data is not None else ()

    @property
    def incomplete_columns(self) -> tuple:
        """The columns with at least one missing value (the choices for ``column``)."""
        data = self.data_model.data
        if data is None:
            return ()
        return tuple(str(c) for c, any_missing in zip(data.columns, data.missing.any(axis=0)) if any_missing)

    def _adopt_columns(self) -> None:
        """Columns not in the data (first load, another data set): take sensible ones."""
        cols, incomplete = self.columns, self.incomplete_columns
        if not cols:
            return
        new = {}
        if self.column not in cols:
            new["column"] = incomplete[0] if incomplete else cols[0]
        column = new.get("column", self.column)
        if self.mean_column not in cols:
            new["mean_column"] = column
        if self.target not in cols:
            new["target"] = column
        target = new.get("target", self.target)
        if self.predictor not in cols or self.predictor == target:
            new["predictor"] = self._best_predictor(target)
        if new:
            self._adopting = True
            try:
                self.param.update(**new)
            finally:
                self._adopting = False

    def _best_predictor(self, target: str) -> str:
        """The other column most correlated with ``target`` on the rows where both are observed."""
        data, cols = self.data_model.data, list(self.columns)
        t = cols.index(target)
        best, best_r = (cols[1] if t == 0 and len(cols) > 1 else cols[0]), -1.0
        for j, c in enumerate(cols):
            both = ~data.missing[:, j] & ~data.missing[:, t]
            if j == t or both.sum() < 3:
                continue
            x, y = data.values[both, j], data.values[both, t]
            if np.std(x) > 0 and np.std(y) > 0:
                r = abs(float(np.corrcoef(x, y)[0, 1]))
                if r > best_r:
                    best, best_r = c, r
        return best

    def _on_data(self, event=None) -> None:
        self._adopt_columns()

    # ------------------------------------------------------------------ the grid
    def observed(self, column: str | None = None) -> np.ndarray:
        """Observed values of ``column`` (default: the shifted one)."""
        data = self.data_model.data
        j = list(self.columns).index(column or self.column)
        return data.values[~data.missing[:, j], j]

    def deltas(self) -> np.ndarray:
        """The delta grid in data units (shift) or as factors (scale)."""
        return default_deltas(self.observed(), self.mode, n=self.n_deltas, width=self.delta_max)

    @property
    def delta(self) -> float:
        """The grid value at ``delta_index`` (clipped to the grid)."""
        grid = self.deltas()
        return float(grid[min(self.delta_index, grid.size - 1)])

    @property
    def scale_sd(self) -> float:
        """The shifted column's observed standard deviation (the page's unit of a shift)."""
        x = self.observed()
        sd = float(np.std(x, ddof=1)) if x.size > 1 else 1.0
        return sd if sd > 0 else 1.0

    # ------------------------------------------------------------------ imputation (heavy, off the event loop)
    def draw_key(self) -> tuple:
        return (self.data_model.revision, id(self.data_model.data), self.n_imputations, self.n_components,
                self.bootstrap, self.selection, self.seed)

    @property
    def needs_draw(self) -> bool:
        return self._drawn_key != self.draw_key() or self._imputations is None

    @property
    def imputations(self) -> np.ndarray | None:
        """The unadjusted completed data sets (M, N, D) of the current data, or None."""
        return None if self.needs_draw else self._imputations

    def job(self) -> DrawJob | None:
        """The imputation to run for the current data and settings (None, with ``error`` set, when there is none)."""
        data = self.data_model.data
        if data is None:
            self._publish(error=self.data_model.error or "No data.", table=None, tipping=None)
            return None
        try:
            self._check_data()
        except BadInputError as exc:
            self._publish(error=str(exc), table=None, tipping=None)
            return None
        return DrawJob(key=self.draw_key(), values=np.array(data.values), n_imputations=self.n_imputations,
                       n_components=self.n_components, bootstrap=self.bootstrap, seed=self.seed,
                       selection=self.selection, missing=np.array(data.missing))

    def _check_data(self) -> None:
        data = self.data_model.data
        name = repr(data.name) if data.name else "the data"
        if not data.missing.any():
            raise BadInputError(f"{name} has no missing values: there are no imputations to shift. Choose a "
                                "missingness mechanism (or data with missing values).")
        n_rows = int((~data.missing).any(axis=1).sum())
        if self.n_components > n_rows:
            raise BadInputError(f"K = {self.n_components} components need at least {self.n_components} rows with an "
                                f"observed value; {name} has {n_rows}. Choose a smaller K.")

    def adopt(self, job: DrawJob, result: DrawResult | None = None, error: str = "") -> bool:
        """Keep the draws of ``job`` (if it is still the current one) and analyse them; False if stale."""
        with self._lock:
            if job.key != self.draw_key():
                return False
            if error:
                self._imputations, self._drawn_key, self._selection_draws = None, None, None
                self._publish(error=error, table=None, tipping=None, selection_estimate=None)
                return True
            self._imputations, self._drawn_key = np.asarray(result.imputations, dtype=float), job.key
            self._selection_draws = result.selection
            with param.edit_constant(self):
                self.selection_note = result.note
        self.analyse()
        return True

    def refresh(self) -> None:
        """Draw (in this thread) if needed, then analyse: for notebooks, scripts and tests."""
        if self.needs_draw:
            job = self.job()
            if job is None:
                return
            try:
                result = cached_run_job(job)
            except BadInputError as exc:
                self.adopt(job, error=str(exc))
                return
            self.adopt(job, result)
        else:
            self.analyse()

    # ------------------------------------------------------------------ analysis (cheap)
    def estimand(self) -> core.Estimand:
        cols = list(self.columns)
        for name, value in (("column", self.column), ("mean column", self.mean_column), ("target", self.target),
                            ("predictor", self.predictor)):
            if value not in cols:
                raise BadInputError(f"There is no {name} {value!r} in these data.")
        if self.estimate == "mean":
            return core.mean_of(cols.index(self.mean_column))
        if self.target == self.predictor:
            raise BadInputError(f"The target and the predictor are the same column ({self.target!r}): choose two "
                                "different columns.")
        return core.ols_coefficient(cols.index(self.target), [cols.index(self.predictor)])

    def reference(self, table: core.SensitivityTable) -> float:
        """The tipping point's reference: 0 for a coefficient, the unadjusted estimate for a mean."""
        if table.estimand.kind == "ols":
            return 0.0
        return float(table.estimate[int(np.argmin(np.abs(table.delta - table.neutral)))])

    def analyse(self) -> None:
        """Recompute the table and the tipping point from the current imputations (no draw)."""
        with self._lock:
            imps = self.imputations
            if imps is None:
                return
            data = self.data_model.data
            try:
                j = list(self.columns).index(self.column) if self.column in self.columns else -1
                if j < 0:
                    raise BadInputError(f"There is no column {self.column!r} in these data.")
                table = core.delta_adjustment(imps, np.array(data.missing), j, self.deltas(), self.estimand(),
                                              mode=self.mode, level=self.level)
                selection = self._selection_pooled(table)
            except BadInputError as exc:
                self._publish(error=str(exc), table=None, tipping=None, selection_estimate=None)
                return
            self._publish(table=table, tipping=core.tipping_point(table, self.reference(table)), error="",
                          selection_estimate=selection)

    def _selection_pooled(self, table: core.SensitivityTable) -> tuple | None:
        """The estimate pooled (Rubin) over the selection model's draws: (estimate, lower, upper), or None."""
        draws = self._selection_draws
        if draws is None or draws.shape[0] < 2:
            return None
        one = core.delta_adjustment(draws, np.array(self.data_model.data.missing), table.column, [table.neutral],
                                    table.estimand, mode=table.mode, level=table.level)
        return float(one.estimate[0]), float(one.lower[0]), float(one.upper[0])

    def matching_delta(self) -> float | None:
        """The delta at which the adjusted estimate equals the selection model's (linear between grid values), or None."""
        table, sel = self.table, self.selection_estimate
        if table is None or sel is None:
            return None
        d, e = table.delta, table.estimate - sel[0]
        order = np.argsort(d)
        d, e = d[order], e[order]
        hits = np.flatnonzero(np.sign(e[:-1]) * np.sign(e[1:]) <= 0)
        if hits.size == 0:
            return None
        i = int(hits[np.argmin(np.abs(d[hits] - table.neutral))])
        if e[i + 1] == e[i]:
            return float(d[i])
        return float(d[i] - e[i] * (d[i + 1] - d[i]) / (e[i + 1] - e[i]))

    def _on_analysis_settings(self, *events) -> None:
        """Re-analyse; the estimated mean follows the shifted column when it was that column's."""
        if self._adopting:
            return
        for e in events:
            if e.name == "column" and self.mean_column == e.old and e.new in self.columns:
                self._adopting = True
                try:
                    self.mean_column = e.new
                finally:
                    self._adopting = False
        self.analyse()

    def _publish(self, **outputs) -> None:
        with param.edit_constant(self):
            self.param.update(**outputs, revision=self.revision + 1)

    # ------------------------------------------------------------------ read-outs
    def truth(self) -> float | None:
        """The estimate on the complete data when the hidden values are known (built-in data), else None."""
        complete, table = self.data_model.complete, self.table
        if complete is None or complete.truth is None or table is None:
            return None
        X = complete.truth[None]
        if self.data_model.standardize:
            return None
        try:
            Q, _, _ = core.estimate_sets(X, table.estimand)
        except BadInputError:
            return None
        return float(Q[0])

    def imputed_values(self, delta: float | None = None) -> np.ndarray:
        """Every imputed value of the shifted column, over the M sets, adjusted by ``delta`` (default: :attr:`delta`)."""
        imps = self.imputations
        if imps is None or self.column not in self.columns:
            return np.zeros(0)
        data = self.data_model.data
        j = list(self.columns).index(self.column)
        rows = data.missing[:, j]
        d = self.delta if delta is None else float(delta)
        block = imps[:, rows, j].ravel()
        return block + d if self.mode == "shift" else d * block

    def hidden_values(self) -> np.ndarray | None:
        """The true values behind the missing entries of the shifted column, when known."""
        data, complete = self.data_model.data, self.data_model.complete
        if complete is None or complete.truth is None or self.data_model.standardize:
            return None
        j = list(self.columns).index(self.column)
        return complete.truth[data.missing[:, j], j]

    def delta_label(self, delta: float) -> str:
        """A delta as the page shows it: ``+0.40 sd (+0.33)`` for a shift, ``x 1.20`` for a scale."""
        if self.mode == "scale":
            return f"x {delta:.2f}"
        return f"{delta / self.scale_sd:+.2f} sd ({delta:+.3g})"

    def sentence(self, names=None) -> str:
        """Plain-text sentences about the table (the caller escapes them for Markdown)."""
        text = self._sentence()
        sel = self.selection_estimate
        if not text or sel is None:
            return text
        match = self.matching_delta()
        where = (f"; the delta adjustment reaches it at delta = {self.delta_label(match)}" if match is not None
                 else "; the delta adjustment does not reach it on this grid")
        return text + (f" The selection model (logistic self-masking, fitted jointly with the mixture) gives "
                       f"{sel[0]:.3g} (CI {sel[1]:.3g} to {sel[2]:.3g}){where}.")

    def _sentence(self) -> str:
        table, tp = self.table, self.tipping
        if table is None:
            return ""
        what = table.estimand.label(self.columns)
        neutral = int(np.argmin(np.abs(table.delta - table.neutral)))
        est, lo, hi = table.estimate[neutral], table.lower[neutral], table.upper[neutral]
        pct = f"{table.level:.0%}"
        head = (f"Without adjustment (MAR) the {what} is {est:.3g} ({pct} CI {lo:.3g} to {hi:.3g}), "
                f"from {table.n_imputations} imputations of {table.n_missing} missing values of {self.column}. ")
        side = "shifting" if self.mode == "shift" else "scaling"
        if table.estimand.kind == "ols":
            significant = bool(table.excludes(0.0)[neutral])
            if tp is None:
                verdict = ("significant" if significant else "non-significant")
                return head + (f"The coefficient stays {verdict} (CI {'excludes' if significant else 'includes'} 0) "
                               f"over the whole grid of {side} the imputations of {self.column}.")
            if significant:
                return head + (f"The coefficient stays significant until delta = {self.delta_label(tp.delta)}, "
                               f"where its CI ({tp.lower:.3g} to {tp.upper:.3g}) first includes 0.")
            return head + (f"The coefficient becomes significant at delta = {self.delta_label(tp.delta)}, where its "
                           f"CI ({tp.lower:.3g} to {tp.upper:.3g}) first excludes 0.")
        if tp is None:
            return head + (f"Over the whole grid the CI keeps covering the unadjusted estimate {est:.3g}: within this "
                           "range the NMAR departure does not change the conclusion.")
        return head + (f"The CI first excludes the unadjusted estimate {est:.3g} at delta = "
                       f"{self.delta_label(tp.delta)} (estimate {tp.estimate:.3g}, CI {tp.lower:.3g} to {tp.upper:.3g}).")
