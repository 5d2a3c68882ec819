"""A garriga2017 imputation benchmark run cell by cell off the caller's thread, with progress and partial results.

:class:`BenchmarkModel` holds the settings of a run (data sets, mechanism, rates, methods,
repetitions, seed, quick settings, worker processes) and runs :func:`explorer.benchmark.run_benchmark`
off the caller's thread. It imports param, never Panel.

The run is split into cells (data set x rate x method, with all repetitions); every cell is one
``run_benchmark`` call, so masks and method seeds are exactly those of a single full call (they
depend on the names of the cell, never on the order of the jobs). A *step* of the run computes
one cell (with ``n_jobs > 1``: takes the next cell finished by a process pool) and publishes the
partial table; :meth:`BenchmarkModel.cancel` stops before the next cell (and before the next job
of a cell: ``run_benchmark`` checks a ``cancel`` event).

Who runs the steps. A served page passes its session's compute thread to
:meth:`BenchmarkModel.start` (``submit``, e.g. :meth:`~explorer.ui.session.SessionWorker.submit`):
each step is one job there, and the next one is submitted when the previous one has been shown,
so a long run never holds the session's thread for more than a cell. Without ``submit`` (Jupyter,
scripts, tests) the model runs the steps one after the other on a background thread of its own.

Threading contract. A step never touches the model's parameters: it appends its updates
(progress, partial tidy table, its :func:`~explorer.benchmark.summarise` output, the final status)
to a pending buffer under a lock. :meth:`BenchmarkModel.poll` applies what is pending in one
``param.update`` batch, **on the caller's thread**: a Panel view calls it from a periodic callback
of its session (and after every step), a script or a test calls :meth:`BenchmarkModel.wait`. So
parameter watchers (and the widgets and plots they update) never run on the computing thread.

With ``n_jobs > 1`` the cells run in a process pool (spawned workers: forking a threaded server is
unsafe) from :func:`explorer.utils.workers.worker_pool`: the workers exit by themselves when the server
process dies, even by ``kill -9``, and they are terminated at a normal interpreter exit.
:meth:`BenchmarkModel.close` (a page whose browser session ended) cancels the run and terminates
its workers at once.

Loaded result files (:meth:`BenchmarkModel.load_results`) are parsed once per process and shared
by every session, read-only.
"""

from __future__ import annotations

import functools
import multiprocessing
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import param

from explorer import benchmark as bm
from explorer.core.validation import BadInputError
from explorer.reference import GARRIGA2017_RATES
from explorer.ui.state._settings import MAX_SEED, Settings
from explorer.utils.workers import as_done, stop_pool, worker_pool

__all__ = ["BenchmarkModel", "BENCHMARK_DATASETS", "DEFAULT_METHODS", "COMMITTED_SUMMARY", "SUMMARY_COLUMNS",
           "STATUSES", "read_results"]

#: Complete built-in data sets the benchmark can amputate (the thesis used the first two).
BENCHMARK_DATASETS = ("boston", "ionosphere", "wine", "iris")
DEFAULT_METHODS = ("mean", "poigmm", "mice", "knn")
STATUSES = ("idle", "running", "done", "cancelled", "failed")
#: The committed full run written by ``benchmarks/run_imputation.py`` (may not exist yet).
COMMITTED_SUMMARY = Path(__file__).resolve().parents[3] / "results" / "garriga2017_benchmark" / "summary.csv"
#: Columns of :func:`explorer.benchmark.summarise` (and of ``summary.csv``).
SUMMARY_COLUMNS = ("dataset", "mechanism", "rate", "method", "metric", "mean", "std", "n", "n_inf", "n_failed",
                   "realised_rate", "seconds")
_SETTINGS = ("datasets", "mechanism", "rates", "methods", "repetitions", "seed", "quick", "n_jobs", "variant")
_SORT = ["dataset", "mechanism", "rate", "method", "repetition", "metric"]


def _hms(seconds) -> str:
    if seconds is None or not np.isfinite(seconds):
        return "-"
    s = int(float(seconds) + 0.5)
    return f"{s // 3600:d}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60:d}:{s % 60:02d}"


#: Parsed result files: (path, modification time, size) -> (tidy results or None, summary). Read-only, shared.
_TABLES: dict[tuple, tuple[pd.DataFrame | None, pd.DataFrame]] = {}
_TABLES_LOCK = threading.Lock()
_TABLES_KEPT = 4


def read_results(path: Path) -> tuple[pd.DataFrame | None, pd.DataFrame]:
    """The tidy results (None for a summary file) and the summary of a result file, parsed once per process.

    A file is parsed again when its modification time or size changed. The tables are shared by every
    session: never modify them.

    Raises
    ------
    BadInputError
        The file does not exist or is not a benchmark summary (or tidy results table).
    OSError, ValueError, pandas.errors.ParserError
        The file cannot be read or parsed.
    """
    if not path.is_file():
        raise BadInputError(f"{path} does not exist. Write a full run with "
                            "`python benchmarks/run_imputation.py --out results/garriga2017_benchmark`.")
    stat = path.stat()
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    with _TABLES_LOCK:
        cached = _TABLES.get(key)
    if cached is not None:
        return cached
    df = pd.read_csv(path)
    results = None
    if "value" in df.columns:
        missing = sorted(set(bm.RESULT_COLUMNS) - set(df.columns))
        if missing:
            raise BadInputError(f"{path.name} looks like a tidy results table but lacks {missing}.")
        df["error"] = df["error"].astype(object).fillna("").astype(str)
        results, df = df, bm.summarise(df)
    missing = sorted(set(SUMMARY_COLUMNS) - set(df.columns))
    if missing:
        raise BadInputError(f"{path.name} is not a benchmark summary: columns {missing} are missing "
                            f"(expected {list(SUMMARY_COLUMNS)}).")
    if df.empty:
        raise BadInputError(f"{path.name} has no rows.")
    with _TABLES_LOCK:
        while len(_TABLES) >= _TABLES_KEPT:
            _TABLES.pop(next(iter(_TABLES)))
        _TABLES[key] = (results, df)
    return results, df


def _run_cell(dataset, mechanism, rate, method, repetitions, seed, variant, quick) -> pd.DataFrame:
    """One cell in a worker process (module level: picklable)."""
    return bm.run_benchmark([dataset], [mechanism], [rate], [method], repetitions, seed=seed, variant=variant,
                            quick=quick)


@dataclass(frozen=True)
class _Plan:
    token: int
    datasets: tuple
    mechanism: str
    rates: tuple
    methods: tuple
    repetitions: int
    seed: int
    variant: str
    quick: bool
    n_jobs: int

    @property
    def cells(self) -> list[tuple]:
        return [(d, r, m) for d in self.datasets for r in self.rates for m in self.methods]

    @property
    def total(self) -> int:
        return len(self.cells) * self.repetitions


class _Run:
    """The state of one run, shared by its steps (one at a time) and :meth:`BenchmarkModel.close`."""

    def __init__(self, plan: _Plan):
        self.plan = plan
        self.t0 = time.perf_counter()
        self.cancel = threading.Event()
        self.abandon = threading.Event()  # set by close(): end the run's worker processes now
        self.frames: list[pd.DataFrame] = []  # the finished cells' tidy tables
        self.done = 0  # finished jobs
        self.last_job = ""
        self.next_cell = 0  # n_jobs == 1: the next cell to compute
        self.pool = None  # n_jobs > 1: the process pool (guarded by the model's lock) ...
        self.pool_context = None  # ... its worker_pool context, left when the run ends
        self.futures: dict = {}  # future -> (dataset, rate, method)
        self.finished_cells = None  # as_done(futures)
        self.remaining = 0  # cells not yet taken from finished_cells
        self.lock = threading.Lock()  # guards working / ending
        self.working = False  # a step is computing
        self.ending = False  # _end has begun
        self.finished = threading.Event()  # the final status is pending (or applied)


class BenchmarkModel(Settings):
    """Settings, run (off the caller's thread) and (partial) results of the garriga2017 imputation benchmark.

    Outputs are constant parameters updated by :meth:`poll` (never by the computing thread).

    Examples
    --------
    >>> model = BenchmarkModel(methods=["mean", "knn"], rates=[0.2])
    >>> model.start()
    True
    >>> model.wait(timeout=60)
    'done'
    >>> model.done, model.total, sorted(model.summary["method"].unique())
    (2, 2, ['knn', 'mean'])
    """

    _SETTINGS = _SETTINGS

    datasets = param.ListSelector(default=["boston"], objects=list(BENCHMARK_DATASETS),
                                  doc="Complete data sets to amputate (one figure column each)")
    mechanism = param.Selector(default="mcar", objects=list(GARRIGA2017_RATES), doc="Missingness mechanism")
    rates = param.List(default=[0.1, 0.3], item_type=(float, int),
                       doc="Requested missing rates (garriga2017's rates of the mechanism by default)")
    methods = param.ListSelector(default=list(DEFAULT_METHODS), objects=list(bm.METHODS), doc="Imputation methods")
    repetitions = param.Integer(default=1, bounds=(1, 100), doc="Independent masks per cell")
    seed = param.Integer(default=0, bounds=(0, MAX_SEED), doc="Seed of the masks and of the methods")
    quick = param.Boolean(default=True, doc="Cheap method settings (a smoke run, not the thesis settings)")
    n_jobs = param.Integer(default=1, bounds=(1, 64), doc="Worker processes (1 = in the computing thread)")
    variant = param.Selector(default="code", objects=["code", "thesis"],
                             doc="Mechanism variant: the author's code or the thesis text")

    status = param.Selector(default="idle", objects=list(STATUSES), constant=True, precedence=-1)
    done = param.Integer(default=0, constant=True, precedence=-1, doc="Finished jobs")
    total = param.Integer(default=0, constant=True, precedence=-1, doc="Jobs of the run")
    elapsed = param.Number(default=0.0, constant=True, precedence=-1, doc="Seconds since start")
    eta = param.Number(default=None, allow_None=True, constant=True, precedence=-1, doc="Seconds left (estimate)")
    last_job = param.String(default="", constant=True, precedence=-1, doc="The last finished job, as text")
    error = param.String(default="", constant=True, precedence=-1, doc="Readable error of the last action")
    results = param.DataFrame(default=None, allow_None=True, constant=True, precedence=-1,
                              doc="Tidy table (explorer.benchmark.RESULT_COLUMNS), partial while running")
    summary = param.DataFrame(default=None, allow_None=True, constant=True, precedence=-1,
                              doc="explorer.benchmark.summarise(results), or a loaded summary.csv")
    source = param.String(default="", constant=True, precedence=-1, doc="'run' or the loaded file name")
    run_id = param.Integer(default=0, constant=True, precedence=-1, doc="Increases at every start / load")

    def __init__(self, **params):
        super().__init__(**params)
        self._lock = threading.Lock()  # guards _pending / _run / _token and the run's pool
        self._poll_lock = threading.Lock()
        self._pending: dict = {}
        self._run: _Run | None = None  # the current (or last) run
        self._token = 0

    # ------------------------------------------------------------------ helpers
    def _publish(self, **outputs) -> None:
        with param.edit_constant(self):
            self.param.update(**outputs)

    def _push(self, token: int, **outputs) -> None:
        """Worker side: queue outputs for :meth:`poll` (dropped if the run is no longer current)."""
        with self._lock:
            if token == self._token:
                self._pending.update(outputs)

    @property
    def running(self) -> bool:
        """True from :meth:`start` until the run has ended (also while it finishes after :meth:`cancel`)."""
        run = self._run
        return run is not None and not run.finished.is_set()

    @param.depends("mechanism", watch=True)
    def _rates_for_mechanism(self):
        """Keep the rates garriga2017 used for the new mechanism; none left: all of garriga2017's."""
        allowed = GARRIGA2017_RATES[self.mechanism]
        kept = [r for r in self.rates if any(np.isclose(r, a) for a in allowed)]
        self.rates = kept or list(allowed)

    def _plan(self) -> _Plan:
        """Check the settings together (param checks each one) and freeze them for the worker."""
        if not self.datasets:
            raise BadInputError("Choose at least one data set.")
        if not self.methods:
            raise BadInputError(f"Choose at least one method ({', '.join(bm.METHODS)}).")
        if not self.rates:
            raise BadInputError(f"Choose at least one missing rate (garriga2017 used {list(GARRIGA2017_RATES[self.mechanism])} "
                                f"for {self.mechanism}).")
        rates = tuple(sorted({round(float(r), 6) for r in self.rates}))
        bad = [r for r in rates if not 0.0 < r < 1.0]
        if bad:
            raise BadInputError(f"Missing rates must be in (0, 1); got {bad}.")
        from explorer.datasets import load_dataset

        for name in self.datasets:  # the mechanism refuses infeasible rates with the feasible range
            data = load_dataset(name)
            for r in rates:
                try:
                    bm.cell_mask(data, self.mechanism, r, 0, seed=self.seed, variant=self.variant, dataset=name)
                except BadInputError as exc:
                    raise BadInputError(f"{name}, {self.mechanism} at rate {r:g}: {exc}") from None
        return _Plan(self._token, tuple(self.datasets), self.mechanism, rates, tuple(self.methods),
                     int(self.repetitions), int(self.seed), self.variant, bool(self.quick), int(self.n_jobs))

    # ------------------------------------------------------------------ actions
    def start(self, submit: Callable | None = None) -> bool:
        """Start a run; False (with :attr:`error` set) if it cannot start.

        Parameters
        ----------
        submit : callable, optional
            ``submit(work, then) -> bool`` runs ``work()`` off the caller's thread, then ``then(result, error)``
            on the thread that owns the model (a served page passes its session's
            :meth:`~explorer.ui.session.SessionWorker.submit`); False when it refused the job. Each job is
            one cell of the run, and ``then`` submits the next one. Default: the cells run one after the
            other on a background thread of the model (Jupyter, scripts, tests).

        The outputs are reset at once; progress arrives through :meth:`poll`.
        """
        with self._lock:
            run = self._run
            busy = run is not None and not run.finished.is_set()
            if not busy:
                self._token += 1
                self._pending = {}
        if busy:
            what = "is being cancelled" if run.cancel.is_set() else "is running"
            self._publish(error=f"A benchmark {what}; wait for it to stop (or cancel it) first.")
            return False
        try:
            plan = self._plan()
        except (BadInputError, ValueError, OSError) as exc:
            self._publish(status="failed", error=str(exc), done=0, total=0, eta=None, elapsed=0.0, last_job="")
            return False
        self._publish(status="running", error="", done=0, total=plan.total, eta=None, elapsed=0.0, results=None,
                      summary=None, last_job="", source="run", run_id=self.run_id + 1)
        run = _Run(plan)
        with self._lock:
            self._run = run
        if submit is None:
            threading.Thread(target=self._run_steps, args=(run,), daemon=True, name=f"benchmark-{plan.token}").start()
        elif not self._submit_step(run, submit):
            self._stop_early(run)
        return True

    def cancel(self) -> bool:
        """Ask the running benchmark to stop before its next cell (or job); True if one was running.

        The partial results stay; :attr:`status` becomes "cancelled" once the run has stopped.
        """
        run = self._run
        if run is None or run.finished.is_set():
            return False
        run.cancel.set()
        self._push(run.plan.token, last_job="cancelling after the current job ...")
        return True

    def close(self) -> bool:
        """Cancel the run and terminate its worker processes now; True if a run was going.

        For a page whose browser session has ended: nobody will read the results, so the running
        jobs of a process pool (``n_jobs > 1``) are abandoned instead of finished, and their
        memory is freed at once. With ``n_jobs == 1`` the cell being computed still finishes (a
        thread cannot be killed), then the run stops; a run between two cells (its next cell
        waiting for, or dropped with, the session's thread) ends here. Idempotent; the model can
        :meth:`start` again afterwards.
        """
        was_running = self.cancel()
        run = self._run
        if run is None:
            return was_running
        with self._lock:
            run.abandon.set()  # under the lock: the pool step either sees it or has published its pool
            pool = run.pool
        if pool is not None:
            stop_pool(pool)
        with run.lock:
            between_cells = not run.working
        if between_cells:
            self._end(run)
        return was_running

    def poll(self) -> bool:
        """Apply the run's pending updates on the calling thread; True if anything changed.

        Call it from the thread that owns the UI (a Panel periodic callback of the session).
        Concurrent calls do not queue: a call made while another is applying returns False.
        """
        if not self._poll_lock.acquire(blocking=False):
            return False
        try:
            with self._lock:
                pending, self._pending = self._pending, {}
            if pending:
                self._publish(**pending)
            return bool(pending)
        finally:
            self._poll_lock.release()

    def wait(self, timeout: float | None = None) -> str:
        """Block until the run has ended (or ``timeout`` seconds), apply its updates, return :attr:`status`."""
        run = self._run
        if run is not None:
            run.finished.wait(timeout)
        self.poll()
        return self.status

    def load_results(self, path=None) -> bool:
        """Show a finished run from disk: a ``summary.csv`` (or a tidy ``results.csv``).

        Parameters
        ----------
        path : str or Path, optional
            Default :data:`COMMITTED_SUMMARY`. A summary needs the columns :data:`SUMMARY_COLUMNS`;
            a tidy table (with a ``value`` column) is summarised here.

        Returns
        -------
        bool
            False, with :attr:`error` set, when the file cannot be used (nothing else changes).
        """
        path = Path(COMMITTED_SUMMARY if path is None else path)
        if self.running:
            self._publish(error="A benchmark is running: cancel it before loading results.")
            return False
        try:
            results, df = read_results(path)
        except (OSError, ValueError, pd.errors.ParserError) as exc:
            self._publish(error=f"Could not load {path.name}: {exc}" if not isinstance(exc, BadInputError)
                          else str(exc))
            return False
        with self._lock:
            self._token += 1  # a late update of an earlier run must not overwrite the loaded table
            self._pending = {}
        mechs = [m for m in GARRIGA2017_RATES if m in set(df["mechanism"])]
        updates = dict(status="done", error="", done=0, total=0, eta=None, elapsed=0.0, results=results,
                       summary=df, last_job="", source=path.name, run_id=self.run_id + 1)
        if mechs and self.mechanism not in mechs:
            updates["mechanism"] = mechs[0]
        self._publish(**updates)
        self._match_settings(df)
        return True

    def _match_settings(self, df: pd.DataFrame) -> None:
        """Make the settings describe a loaded table: its data sets, methods, rates of the mechanism
        shown and repetitions (settings left from an earlier run would not match the plots)."""
        datasets = [d for d in self.param.datasets.objects if d in set(df["dataset"])][:2]
        methods = [m for m in self.param.methods.objects if m in set(df["method"])]
        shown = df[df["mechanism"] == self.mechanism]
        rates = sorted({float(r) for r in shown["rate"]}) if len(shown) else []
        settings = {}
        if datasets:
            settings["datasets"] = datasets
        if methods:
            settings["methods"] = methods
        if rates:
            settings["rates"] = rates
        if "n" in df.columns and df["n"].notna().any():
            settings["repetitions"] = int(min(max(df["n"].max(), 1), self.param.repetitions.bounds[1]))
        settings["quick"] = False  # a full run is what a loaded table holds
        self.param.update(**settings)


    # ------------------------------------------------------------------ the run, one cell per step
    def _submit_step(self, run: _Run, submit: Callable) -> bool:
        return submit(functools.partial(self._step, run), functools.partial(self._stepped, run, submit))

    def _stepped(self, run: _Run, submit: Callable, more: bool, error: BaseException | None) -> None:
        """After a step, on the thread that owns the model: queue the next cell, apply the progress."""
        if error is not None:  # _step reports its errors itself; a refused or broken job ends the run
            self._end(run, error)
        elif more and not self._submit_step(run, submit):
            self._stop_early(run)
        self.poll()

    def _run_steps(self, run: _Run) -> None:
        """The model's own background thread (no ``submit``): every step, one after the other."""
        while self._step(run):
            pass

    def _stop_early(self, run: _Run) -> None:
        """The next cell cannot be run (the session's thread has stopped): the run ends as cancelled."""
        run.cancel.set()
        self._end(run)

    def _step(self, run: _Run) -> bool:
        """Compute the next cell of ``run`` (off the model's thread); True while cells remain.

        Never raises: an error ends the run with status "failed". The last step ends the run.
        """
        with run.lock:
            if run.finished.is_set() or run.ending:
                return False
            run.working = True
        try:
            more = self._pool_step(run) if run.plan.n_jobs > 1 else self._cell_step(run)
        except Exception as exc:  # noqa: BLE001 - reported in the UI, never raised into a server thread
            with run.lock:
                run.working = False
            self._end(run, exc)
            return False
        with run.lock:
            run.working = False
        if not more:
            self._end(run)
        return more

    def _end(self, run: _Run, error: BaseException | None = None) -> None:
        """Close the run's pool and publish its final status (once, whoever gets here first)."""
        with run.lock:
            if run.ending:
                return
            run.ending = True
        plan = run.plan
        try:
            self._close_pool(run, stop=error is not None or run.abandon.is_set())
        finally:
            elapsed = time.perf_counter() - run.t0
            if error is not None:
                self._push(plan.token, status="failed", error=f"The benchmark stopped: {type(error).__name__}: "
                                                              f"{error}", eta=None, elapsed=elapsed)
            else:
                finished = sum(len(f.drop_duplicates(["dataset", "rate", "method", "repetition"])) for f in run.frames)
                status = "cancelled" if run.cancel.is_set() and finished < plan.total else "done"
                final = dict(status=status, eta=0.0 if status == "done" else None, elapsed=elapsed)
                if status == "cancelled":
                    final["last_job"] = f"cancelled after {finished} of {plan.total} jobs"
                self._push(plan.token, **final)
            run.finished.set()

    def _publish_tables(self, run: _Run, last: str) -> None:
        plan = run.plan
        table = pd.concat(run.frames, ignore_index=True).sort_values(_SORT, kind="stable").reset_index(drop=True)
        elapsed = time.perf_counter() - run.t0
        self._push(plan.token, results=table, summary=bm.summarise(table), done=run.done, elapsed=elapsed,
                   eta=elapsed / max(run.done, 1) * (plan.total - run.done), last_job=last)

    def _cell_step(self, run: _Run) -> bool:
        """One cell in this process (``n_jobs == 1``), a progress update after each of its jobs."""
        plan = run.plan
        if run.cancel.is_set() or run.next_cell >= len(plan.cells):
            return False
        dataset, rate, method = plan.cells[run.next_cell]
        run.next_cell += 1
        base = run.done

        def progress(info):
            done = base + int(info["done"])
            elapsed = time.perf_counter() - run.t0
            err = f" FAILED: {info['error'][:160]}" if info.get("error") else ""
            run.last_job = (f"{info['dataset']} · {info['mechanism']} r={info['rate']:g} · rep {info['repetition']} · "
                            f"{info['method']}: {info['seconds']:.1f} s{err}")
            self._push(plan.token, done=done, elapsed=elapsed, eta=elapsed / done * (plan.total - done),
                       last_job=run.last_job)

        df = bm.run_benchmark([dataset], [plan.mechanism], [rate], [method], plan.repetitions, seed=plan.seed,
                              variant=plan.variant, quick=plan.quick, progress=progress, n_jobs=1, cancel=run.cancel)
        if len(df):  # a cell cancelled before its first job is empty
            run.frames.append(df)
            run.done += len(df.drop_duplicates(["dataset", "rate", "method", "repetition"]))
            self._publish_tables(run, run.last_job)
        return run.next_cell < len(plan.cells) and not run.cancel.is_set()

    def _pool_step(self, run: _Run) -> bool:
        """``n_jobs > 1``: the first step starts the pool with every cell; each step takes the next finished cell."""
        plan = run.plan
        try:
            if run.finished_cells is None:
                pool_context = worker_pool(plan.n_jobs, mp_context=multiprocessing.get_context("spawn"))
                pool = pool_context.__enter__()  # left in _close_pool, by the step that ends the run
                with self._lock:
                    run.pool, run.pool_context = pool, pool_context
                    abandoned = run.abandon.is_set()  # close() came before the pool existed
                if abandoned:
                    return False
                run.futures = {pool.submit(_run_cell, d, plan.mechanism, r, m, plan.repetitions, plan.seed,
                                           plan.variant, plan.quick): (d, r, m) for d, r, m in plan.cells}
                run.remaining = len(run.futures)
                run.finished_cells = as_done(run.futures)
            for fut in run.finished_cells:
                run.remaining -= 1
                if run.cancel.is_set():
                    for f in run.futures:
                        f.cancel()  # not started: skipped; running cells finish and are kept
                if fut.cancelled():
                    continue
                df = fut.result()
                run.frames.append(df)
                run.done += plan.repetitions
                d, r, m = run.futures[fut]
                secs = df.drop_duplicates("repetition")["seconds"].sum()
                err = "; ".join(sorted({e for e in df["error"] if e}))[:160]
                self._publish_tables(run, f"{d} · {plan.mechanism} r={r:g} · {plan.repetitions} rep · {m}: "
                                          f"{secs:.1f} s" + (f" FAILED: {err}" if err else ""))
                return run.remaining > 0
            return False
        except RuntimeError:  # BrokenProcessPool, or submit() after shutdown
            if not run.abandon.is_set():
                raise
            return False  # close() terminated the workers: nothing more will come

    def _close_pool(self, run: _Run, stop: bool) -> None:
        """Leave the run's pool: shut down normally after its cells, or stopped at once (abandoned, failed)."""
        with self._lock:
            pool_context, run.pool_context = run.pool_context, None
            run.pool = None
        if pool_context is None:
            return
        if stop:  # as an exception leaving ``with worker_pool(...)``: pending jobs cancelled, workers terminated
            pool_context.__exit__(RuntimeError, RuntimeError("the benchmark run was stopped"), None)
        else:
            pool_context.__exit__(None, None, None)

    # ------------------------------------------------------------------ read-outs
    def progress_text(self) -> str:
        """One line: jobs done, elapsed, ETA and the last finished job (for the UI)."""
        if self.status == "idle":
            return "Not run yet."
        if self.source not in ("", "run"):
            return f"Loaded `{self.source}` ({0 if self.summary is None else len(self.summary)} summary rows)."
        head = f"{self.status}: {self.done}/{self.total} jobs · elapsed {_hms(self.elapsed)}"
        if self.status == "running":
            head += f" · ETA {_hms(self.eta)}"
        return head + (f" · last: {self.last_job}" if self.last_job else "")
