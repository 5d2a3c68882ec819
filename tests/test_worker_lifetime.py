"""Worker processes of the benchmark never outlive their parent (issue 9, "orphans").

A parent Python process (a stand-in for the Panel server) starts a process pool whose jobs sleep
(each writes its pid to a directory first, so the test knows the workers are busy); the test kills
the parent with SIGKILL, when no cleanup code of the parent can run, and requires every descendant
of the parent (the workers, and multiprocessing's resource tracker) to be gone within
``GONE_SECONDS``. Zombies count as gone: they hold no memory, and who reaps an orphan is the
container's init, not us. Every wait is bounded and stray processes are killed in ``finally``.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import CancelledError, Future
from pathlib import Path

import pytest

from explorer.utils import workers as _workers

psutil = pytest.importorskip("psutil")
pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="POSIX signals")

ROOT = Path(__file__).resolve().parents[1]
GONE_SECONDS = 10.0  # after SIGKILL of the parent, its workers must be gone within this
READY_SECONDS = 120.0  # spawned workers import explorer (pandas, scikit-learn) on a busy 2-core machine

NAP = '''
import os
import time
from pathlib import Path


def nap(seconds=300.0):
    """A long job: leave this worker's pid in the directory of the test, then sleep."""
    Path(os.environ["EXPLORER_TEST_PID_DIR"], str(os.getpid())).touch()
    time.sleep(seconds)
    return os.getpid()


def nap_method(X, missing, binary, rng, quick):
    """A benchmark method (explorer.benchmark.Method.func) that never finishes in time."""
    nap()
    raise RuntimeError("the test should have killed this worker")
'''

POOL_PARENT = '''
import multiprocessing
import sys
import time

sys.path.insert(0, {here!r})
import nap
from explorer.utils import workers as _workers

if __name__ == "__main__":
    start_method, mode = sys.argv[1:3]
    if mode == "watchdog":  # no death signal: forked workers inherit this, only the watchdog is left
        _workers._die_with_parent_signal = lambda: False
    poll = 3600.0 if mode == "pdeathsig" else 0.2  # "pdeathsig": the watchdog would look too late
    with _workers.worker_pool(2, mp_context=multiprocessing.get_context(start_method), poll_seconds=poll) as pool:
        futures = [pool.submit(nap.nap) for _ in range(4)]
        time.sleep(600)
'''

RUN_BENCHMARK_PARENT = '''
import sys
import time

sys.path.insert(0, {here!r})
import nap
from explorer import benchmark as bm

if __name__ == "__main__":
    slow = bm.Method("nap", nap.nap_method, "point", "sleeps", "test only")
    bm.run_benchmark("iris", ["mcar"], [0.1, 0.3], [slow], 2, seed=0, quick=True, n_jobs=2)
    time.sleep(600)  # never reached in time
'''

MODEL_PARENT = '''
import sys
import time

sys.path.insert(0, {here!r})
import nap
from explorer import benchmark as bm
from explorer.ui.state.benchmark_model import BenchmarkModel

# Module level: spawned workers run this file again (as __mp_main__), so their "mean" sleeps too.
bm.METHODS["mean"] = bm.Method("mean", nap.nap_method, "point", "sleeps", "test only")

if __name__ == "__main__":
    model = BenchmarkModel(datasets=["iris"], methods=["mean"], rates=[0.1, 0.3, 0.5], n_jobs=2)
    assert model.start(), model.error
    time.sleep(600)
'''

EXIT_PARENT = '''
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, {here!r})
import nap
from explorer.utils import workers as _workers


def serve():  # a server's worker thread, blocked on the pool like BenchmarkModel's
    with _workers.worker_pool(2) as pool:
        futures = [pool.submit(nap.nap) for _ in range(6)]
        for f in _workers.as_done(futures):
            pass


if __name__ == "__main__":
    threading.Thread(target=serve, daemon=True).start()
    go = Path(os.environ["EXPLORER_TEST_PID_DIR"]).parent / "go"
    while not go.exists():  # the test has seen two busy workers (it bounds the wait)
        time.sleep(0.05)
    sys.exit(0)  # a normal exit: must not wait for the six 300 s jobs
'''


def _alive(proc) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _start(tmp_path: Path, template: str, *args: str):
    (tmp_path / "nap.py").write_text(textwrap.dedent(NAP))
    script = tmp_path / "parent.py"
    script.write_text(template.format(here=str(tmp_path)))
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    env = dict(os.environ, EXPLORER_TEST_PID_DIR=str(pid_dir),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    log = open(tmp_path / "parent.log", "w")  # noqa: SIM115 - closed by _cleanup
    parent = subprocess.Popen([sys.executable, str(script), *args], cwd=ROOT, env=env, stdout=log,
                              stderr=subprocess.STDOUT)
    return parent, pid_dir, log


def _procs(pid_dir: Path) -> list:
    """The workers that left their pid in ``pid_dir`` and still exist."""
    out = []
    for p in pid_dir.iterdir():
        with contextlib.suppress(psutil.Error):
            out.append(psutil.Process(int(p.name)))
    return out


def _log(tmp_path: Path) -> str:
    return (tmp_path / "parent.log").read_text()[-3000:]


def _wait_for_busy_workers(parent, pid_dir: Path, tmp_path: Path, n: int = 2) -> list[int]:
    """Pids of ``n`` workers that are running a job (bounded wait)."""
    deadline = time.monotonic() + READY_SECONDS
    while len(list(pid_dir.iterdir())) < n:
        assert parent.poll() is None, f"the parent exited early ({parent.returncode}):\n{_log(tmp_path)}"
        assert time.monotonic() < deadline, f"no {n} busy workers after {READY_SECONDS} s:\n{_log(tmp_path)}"
        time.sleep(0.1)
    return sorted(int(p.name) for p in pid_dir.iterdir())


def _cleanup(parent, procs, log) -> None:
    if parent.poll() is None:
        parent.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        parent.wait(timeout=10)
    for p in procs:
        if _alive(p):
            with contextlib.suppress(psutil.Error):
                p.kill()
    log.close()


def _wait_gone(procs) -> list:
    """Wait (at most ``GONE_SECONDS``) for ``procs`` to end; those still running."""
    deadline = time.monotonic() + GONE_SECONDS
    while any(_alive(p) for p in procs) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [p.pid for p in procs if _alive(p)]


def _kill_parent_and_check(parent, pid_dir: Path, tmp_path: Path, seen: list) -> None:
    """SIGKILL the parent once two workers are busy; all its descendants must then go."""
    workers = _wait_for_busy_workers(parent, pid_dir, tmp_path)
    seen += psutil.Process(parent.pid).children(recursive=True)
    assert set(workers) <= {p.pid for p in seen}, "the busy workers are not the parent's descendants"
    assert all(_alive(p) for p in seen)
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait(timeout=10)
    left = _wait_gone(seen)
    assert not left, f"still running {GONE_SECONDS} s after SIGKILL of their parent: {left}"


def _killed_parent_case(tmp_path: Path, template: str, *args: str) -> None:
    parent, pid_dir, log = _start(tmp_path, template, *args)
    seen: list = []
    try:
        _kill_parent_and_check(parent, pid_dir, tmp_path, seen)
    finally:
        _cleanup(parent, seen + _procs(pid_dir), log)


@pytest.mark.parametrize("start_method, mode", [("spawn", "both"), ("fork", "watchdog"), ("spawn", "pdeathsig")])
def test_pool_workers_exit_when_the_parent_is_killed(tmp_path, start_method, mode):
    if mode == "pdeathsig" and not sys.platform.startswith("linux"):
        pytest.skip("PR_SET_PDEATHSIG is Linux only")
    _killed_parent_case(tmp_path, POOL_PARENT, start_method, mode)


def test_run_benchmark_workers_exit_when_the_parent_is_killed(tmp_path):
    _killed_parent_case(tmp_path, RUN_BENCHMARK_PARENT)


def test_benchmark_model_workers_exit_when_the_server_is_killed(tmp_path):
    _killed_parent_case(tmp_path, MODEL_PARENT)


def test_a_normal_exit_stops_the_pools_instead_of_running_the_queue(tmp_path):
    parent, pid_dir, log = _start(tmp_path, EXIT_PARENT)
    seen: list = []
    try:
        workers = _wait_for_busy_workers(parent, pid_dir, tmp_path)
        seen += psutil.Process(parent.pid).children(recursive=True)
        assert set(workers) <= {p.pid for p in seen}
        (tmp_path / "go").touch()
        try:  # the parent exits normally now
            parent.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the parent did not exit: its exit waited for the queued jobs\n{_log(tmp_path)}")
        assert parent.returncode == 0, _log(tmp_path)
        assert not _wait_gone(seen)
    finally:
        _cleanup(parent, seen + _procs(pid_dir), log)


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_a_pool_that_finishes_its_jobs_shuts_down_normally(start_method):
    # A forked worker inherits the exit hook and a copy of the pool, whose lock submit() held while
    # forking: the hook must leave that copy alone, or the worker never exits and shutdown() hangs.
    if start_method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"no {start_method!r} start method here")
    code = textwrap.dedent(f'''
        import multiprocessing
        from explorer.utils import workers as _workers

        if __name__ == "__main__":
            with _workers.worker_pool(2, mp_context=multiprocessing.get_context({start_method!r})) as pool:
                assert list(pool.map(abs, [-1, -2, -3, -4])) == [1, 2, 3, 4]
            print("shut down")
    ''')
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    try:
        out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                             timeout=90)
    except subprocess.TimeoutExpired:  # its workers then exit by themselves: their parent was killed
        pytest.fail("the pool did not shut down after its jobs")
    assert out.returncode == 0 and out.stdout.strip() == "shut down", out.stderr[-2000:]


def _sleep(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def test_leaving_the_pool_by_an_exception_does_not_wait_for_the_queue():
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        with _workers.worker_pool(2, poll_seconds=0.2) as pool:
            futures = [pool.submit(_sleep, 60.0) for _ in range(4)]
            time.sleep(0.5)
            raise KeyboardInterrupt  # Ctrl-C in a script running the benchmark
    assert time.monotonic() - t0 < 30  # the four jobs would take 120 s
    deadline = time.monotonic() + 30
    while not all(f.done() for f in futures) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(f.done() for f in futures)
    for f in futures:  # cancelled, or BrokenProcessPool (a RuntimeError): the workers were terminated
        with pytest.raises((CancelledError, RuntimeError)):
            f.result(timeout=0)


def test_as_done_yields_futures_that_were_cancelled_without_notice():
    done, cancelled, late = Future(), Future(), Future()
    done.set_result(1)
    assert cancelled.cancel()  # as shutdown(cancel_futures=True) does: no waiter is ever notified
    seen = []

    def consume():
        seen.extend(_workers.as_done([done, cancelled, late], poll_seconds=0.05))

    t = threading.Thread(target=consume, daemon=True)
    t.start()
    time.sleep(0.3)
    assert seen == [done, cancelled]  # as_completed would still wait for `cancelled`
    late.set_result(2)
    t.join(timeout=10)
    assert not t.is_alive() and seen == [done, cancelled, late]


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="max_workers"):
        with _workers.worker_pool(0):
            pass
    with pytest.raises(ValueError, match="poll_seconds"):
        _workers.exit_with_parent(os.getppid(), poll_seconds=0)
