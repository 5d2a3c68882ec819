"""scripts/serve.sh: the gallery command (README, docs/commands.md) serves on localhost only unless told otherwise."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening_addresses(port: int) -> set[str]:
    """Local IPv4 addresses listening on ``port`` (from /proc/net/tcp, state 0A = LISTEN)."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        addr, p = local.split(":")
        if state == "0A" and int(p, 16) == port:
            found.add(socket.inet_ntoa(bytes.fromhex(addr)[::-1]))
    return found


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads listening sockets from /proc (Linux)")
def test_serve_script_serves_the_gallery_on_localhost_only():
    port = _free_port()
    unset = ("ADDRESS", "ORIGIN", "NUM_PROCS", "BOKEH_PERFORM_ERROR_DIAGNOSTICS", "BOKEH_VALIDATE_DOC", "PYTHONMALLOC",
             "MALLOC_ARENA_MAX")
    env = {k: v for k, v in os.environ.items() if k not in unset} | {"PORT": str(port)}
    proc = subprocess.Popen(["bash", "scripts/serve.sh"], cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline, status = time.monotonic() + 120, None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/apps?page=home", timeout=5) as resp:
                    status = resp.status
                    body = resp.read().decode("utf-8", "replace")
                    break
            except OSError:
                time.sleep(0.5)
        assert status == 200, f"the gallery did not answer (exit code {proc.poll()})"
        assert "Imputation explorer" in body
        assert _listening_addresses(port) == {"127.0.0.1"}
        # the server runs with Bokeh's production settings (issue 19: what opening a page costs); serve.sh execs it
        environ = dict(item.split("=", 1) for item in
                       Path(f"/proc/{proc.pid}/environ").read_text().split("\0") if "=" in item)
        assert environ.get("BOKEH_PERFORM_ERROR_DIAGNOSTICS") == "false"
        assert environ.get("BOKEH_VALIDATE_DOC") == "false"
        # and glibc's malloc for every object, so that a class's memory goes back after it left
        assert environ.get("PYTHONMALLOC") == "malloc" and environ.get("MALLOC_ARENA_MAX") == "2"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    assert "only this machine can connect" in proc.stderr.read()
