"""A seed000 imputation benchmark run in a background thread, with progress and partial results.

:class:`BenchmarkModel` holds the settings of a run (data sets, mechanism, rates, methods,
repetitions, seed, quick settings, worker processes) and runs :func:`explorer.benchmark.run_benchmark`
off the caller's thread. It imports param, never Panel.

Threading contract. The worker thread never touches the model's parameters: it appends its
updates (progress, partial tidy table, its :func:`~explorer.benchmark.summarise` output, the final
status) to a pending buffer under a lock. :meth:`BenchmarkModel.poll` applies what is pending in one
``param.update`` batch, **on the caller's thread**: a Panel view calls it from a periodic callback of
its session, a script or a test calls :meth:`BenchmarkModel.wait`. So parameter watchers (and the
widgets and plots they update) never run on the worker thread.

The run is split into cells (data set x rate x method, with all repetitions); every cell is one
``run_benchmark`` call, so masks and method seeds are exactly those of a single full call (they
depend on the names of the cell, never on the order of the jobs). After each cell the partial
table is published; :meth:`BenchmarkModel.cancel` stops before the next cell (and before the next
job when ``run_benchmark`` accepts a ``cancel`` event). With ``n_jobs > 1`` the cells run in a
process pool (spawned workers: forking a threaded server is unsafe) from :func:`explorer._workers.worker_pool`:
the workers exit by themselves when the server process dies, even by ``kill -9``, and they are
terminated at a normal interpreter exit. :meth:`BenchmarkModel.close` (a page whose browser
session ended) cancels the run and terminates its workers at once.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import param

from explorer import benchmark as bm
from explorer._workers import as_done, stop_pool, worker_pool
from explorer.core._validation import BadInputError
from explorer.ui.state._settings import MAX_SEED, Settings
from explorer.reference import SEED000_RATES

__all__ = ["BenchmarkModel", "BENCHMARK_DATASETS", "DEFAULT_METHODS", "COMMITTED_SUMMARY", "SUMMARY_COLUMNS",
           "STATUSES"]

#: Complete built-in data sets the benchmark can amputate (the thesis used the first two).
BENCHMARK_DATASETS = ("boston", "ionosphere", "wine", "iris")
DEFAULT_METHODS = ("mean", "poigmm", "mice", "knn")
STATUSES = ("idle", "running", "done", "cancelled", "failed")
#: The committed full run written by ``benchmarks/run_imputation.py`` (may not exist yet).
COMMITTED_SUMMARY = Path(__file__).resolve().parents[3] / "results" / "seed000_benchmark" / "summary.csv"
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


class BenchmarkModel(Settings):
    """Settings, background run and (partial) results of the seed000 imputation benchmark.

    Outputs are constant parameters updated by :meth:`poll` (never by the worker thread).

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
    mechanism = param.Selector(default="mcar", objects=list(SEED000_RATES), doc="Missingness mechanism")
    rates = param.List(default=[0.1, 0.3], item_type=(float, int),
                       doc="Requested missing rates (seed000's rates of the mechanism by default)")
    methods = param.ListSelector(default=list(DEFAULT_METHODS), objects=list(bm.METHODS), doc="Imputation methods")
    repetitions = param.Integer(default=1, bounds=(1, 100), doc="Independent masks per cell")
    seed = param.Integer(default=0, bounds=(0, MAX_SEED), doc="Seed of the masks and of the methods")
    quick = param.Boolean(default=True, doc="Cheap method settings (a smoke run, not the thesis settings)")
    n_jobs = param.Integer(default=1, bounds=(1, 64), doc="Worker processes (1 = in the background thread)")
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
        self._lock = threading.Lock()  # guards _pending / _thread / _token
        self._poll_lock = threading.Lock()
        self._pending: dict = {}
        self._thread: threading.Thread | None = None
        self._cancel = threading.Event()
        self._abandon = threading.Event()  # set by close(): end the run's worker processes now
        self._pool = None  # the running process pool (n_jobs > 1), guarded by _lock
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
        """True while the worker thread is alive (also while it finishes after :meth:`cancel`)."""
        t = self._thread
        return t is not None and t.is_alive()

    @param.depends("mechanism", watch=True)
    def _rates_for_mechanism(self):
        """Keep the rates seed000 used for the new mechanism; none left: all of seed000's."""
        allowed = SEED000_RATES[self.mechanism]
        kept = [r for r in self.rates if any(np.isclose(r, a) for a in allowed)]
        self.rates = kept or list(allowed)

    def _plan(self) -> _Plan:
        """Check the settings together (param checks each one) and freeze them for the worker."""
        if not self.datasets:
            raise BadInputError("Choose at least one data set.")
        if not self.methods:
            raise BadInputError(f"Choose at least one method ({', '.join(bm.METHODS)}).")
        if not self.rates:
            raise BadInputError(f"Choose at least one missing rate (seed000 used {list(SEED000_RATES[self.mechanism])} "
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
    def start(self) -> bool:
        """Start a run in a background thread; False (with :attr:`error` set) if it cannot start.

        The outputs are reset at once; progress arrives through :meth:`poll`.
        """
        with self._lock:
            if self.running:
                busy = "is being cancelled" if self._cancel.is_set() else "is running"
                self._publish(error=f"A benchmark {busy}; wait for it to stop (or cancel it) first.")
                return False
            self._token += 1
            self._pending = {}
            self._cancel = threading.Event()
            self._abandon = threading.Event()
        try:
            plan = self._plan()
        except (BadInputError, ValueError, OSError) as exc:
            self._publish(status="failed", error=str(exc), done=0, total=0, eta=None, elapsed=0.0, last_job="")
            return False
        self._publish(status="running", error="", done=0, total=plan.total, eta=None, elapsed=0.0, results=None,
                      summary=None, last_job="", source="run", run_id=self.run_id + 1)
        thread = threading.Thread(target=self._work, args=(plan, self._cancel, self._abandon), daemon=True,
                                  name=f"benchmark-{plan.token}")
        with self._lock:
            self._thread = thread
        thread.start()
        return True

    def cancel(self) -> bool:
        """Ask the running benchmark to stop before its next cell (or job); True if one was running.

        The partial results stay; :attr:`status` becomes "cancelled" once the worker has stopped.
        """
        if not self.running:
            return False
        self._cancel.set()
        self._push(self._token, last_job="cancelling after the current job ...")
        return True

    def close(self) -> bool:
        """Cancel the run and terminate its worker processes now; True if a run was going.

        For a page whose browser session has ended: nobody will read the results, so the running
        jobs of a process pool (``n_jobs > 1``) are abandoned instead of finished, and their
        memory is freed at once. With ``n_jobs == 1`` the job running in the background thread
        still finishes (a thread cannot be killed), then the run stops. Idempotent; the model
        can :meth:`start` again afterwards.
        """
        was_running = self.cancel()
        with self._lock:
            abandon, pool = self._abandon, self._pool
            abandon.set()  # under the lock: _work_pool either sees it or has published its pool
        if pool is not None:
            stop_pool(pool)
        return was_running

    def poll(self) -> bool:
        """Apply the worker's pending updates on the calling thread; True if anything changed.

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
        """Block until the worker stops (or ``timeout`` seconds), apply its updates, return :attr:`status`."""
        t = self._thread
        if t is not None:
            t.join(timeout)
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
            if not path.is_file():
                raise BadInputError(f"{path} does not exist. Write a full run with "
                                    "`python benchmarks/run_imputation.py --out results/seed000_benchmark`.")
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
        except (OSError, ValueError, pd.errors.ParserError) as exc:
            self._publish(error=f"Could not load {path.name}: {exc}" if not isinstance(exc, BadInputError)
                          else str(exc))
            return False
        with self._lock:
            self._token += 1  # a late update of an earlier run must not overwrite the loaded table
            self._pending = {}
        mechs = [m for m in SEED000_RATES if m in set(df["mechanism"])]
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

    # ------------------------------------------------------------------ worker thread
    def _work(self, plan: _Plan, cancel: threading.Event, abandon: threading.Event) -> None:
        t0 = time.perf_counter()
        frames: list[pd.DataFrame] = []
        finished = 0
        try:
            if plan.n_jobs > 1:
                self._work_pool(plan, cancel, frames, t0, abandon)
            else:
                self._work_thread(plan, cancel, frames, t0)
            finished = sum(len(f.drop_duplicates(["dataset", "rate", "method", "repetition"])) for f in frames)
            status = "cancelled" if cancel.is_set() and finished < plan.total else "done"
            final = dict(status=status, eta=0.0 if status == "done" else None, elapsed=time.perf_counter() - t0)
            if status == "cancelled":
                final["last_job"] = f"cancelled after {finished} of {plan.total} jobs"
            self._push(plan.token, **final)
        except Exception as exc:  # noqa: BLE001 - reported in the UI, never raised into a server thread
            self._push(plan.token, status="failed", error=f"The benchmark stopped: {type(exc).__name__}: {exc}",
                       eta=None, elapsed=time.perf_counter() - t0)

    def _publish_tables(self, plan: _Plan, frames: list[pd.DataFrame], done: int, t0: float, last: str) -> None:
        table = pd.concat(frames, ignore_index=True).sort_values(_SORT, kind="stable").reset_index(drop=True)
        elapsed = time.perf_counter() - t0
        self._push(plan.token, results=table, summary=bm.summarise(table), done=done, elapsed=elapsed,
                   eta=elapsed / max(done, 1) * (plan.total - done), last_job=last)

    def _work_thread(self, plan: _Plan, cancel: threading.Event, frames: list, t0: float) -> None:
        base = 0
        for dataset, rate, method in plan.cells:
            if cancel.is_set():
                return

            def progress(info, base=base):
                done = base + int(info["done"])
                elapsed = time.perf_counter() - t0
                err = f" FAILED: {info['error'][:160]}" if info.get("error") else ""
                self._push(plan.token, done=done, elapsed=elapsed, eta=elapsed / done * (plan.total - done),
                           last_job=f"{info['dataset']} · {info['mechanism']} r={info['rate']:g} · "
                                    f"rep {info['repetition']} · {info['method']}: {info['seconds']:.1f} s{err}")

            df = bm.run_benchmark([dataset], [plan.mechanism], [rate], [method], plan.repetitions, seed=plan.seed,
                                  variant=plan.variant, quick=plan.quick, progress=progress, n_jobs=1, cancel=cancel)
            if len(df):  # a cell cancelled before its first job is empty
                frames.append(df)
                base += len(df.drop_duplicates(["dataset", "rate", "method", "repetition"]))
                with self._lock:
                    last = self._pending.get("last_job", "")
                self._publish_tables(plan, frames, base, t0, last)

    def _work_pool(self, plan: _Plan, cancel: threading.Event, frames: list, t0: float,
                   abandon: threading.Event) -> None:
        ctx = multiprocessing.get_context("spawn")
        with worker_pool(plan.n_jobs, mp_context=ctx) as pool:
            with self._lock:
                self._pool = pool
                abandoned = abandon.is_set()  # close() came before the pool existed
            try:
                if not abandoned:
                    self._collect(pool, plan, cancel, frames, t0)
            except RuntimeError:  # BrokenProcessPool, or submit() after shutdown
                if not abandon.is_set():
                    raise
                # close() terminated the workers: nothing more will come
            finally:
                with self._lock:
                    self._pool = None
                if abandon.is_set():
                    stop_pool(pool)  # do not wait for running cells on the way out of the with block

    def _collect(self, pool, plan: _Plan, cancel: threading.Event, frames: list, t0: float) -> None:
        done = 0
        futures = {pool.submit(_run_cell, d, plan.mechanism, r, m, plan.repetitions, plan.seed, plan.variant,
                               plan.quick): (d, r, m) for d, r, m in plan.cells}
        for fut in as_done(futures):
            if cancel.is_set():
                for f in futures:
                    f.cancel()  # not started: skipped; running cells finish and are kept
            if fut.cancelled():
                continue
            df = fut.result()
            frames.append(df)
            done += plan.repetitions
            d, r, m = futures[fut]
            secs = df.drop_duplicates("repetition")["seconds"].sum()
            err = "; ".join(sorted({e for e in df["error"] if e}))[:160]
            self._publish_tables(plan, frames, done, t0,
                                 f"{d} · {plan.mechanism} r={r:g} · {plan.repetitions} rep · {m}: {secs:.1f} s"
                                 + (f" FAILED: {err}" if err else ""))

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
