"""The notebooks in a real JupyterLab, offline: every cell runs, every page renders, Step / Play respond.

One JupyterLab server (``python -m jupyterlab``, the project's environment) serves a temporary copy of
``notebooks/`` (no tracked file is rewritten) on a free localhost port with a token, its runtime,
config, data, settings and workspace directories temporary too. Every notebook is opened in its own
chromium page at 1440x900 (JupyterLab's default layout, file browser open) and run with Run > Run All
Cells; the five run at the same time. Every request to a host other than localhost is blocked and
recorded: a page that needs a CDN (``pn.extension()`` without ``inline=True``) renders nothing and the
recorded request fails the test.

Then, for every Panel page shown in a notebook (a cell whose output has the page's "Settings" card, see
``explorer/ui/components/notebook.py``): the card and the Step button sit above the plots, the plots are drawn
at a readable width (the responsive ones at least 400 px, none past the output area), and where the
page has a player, Step adds one to the iteration read-out, Play advances it and Pause stops it. No
JavaScript error, and no request to another host, at any point. Screenshots: test-results/jupyterlab/.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.browser._helpers import wait_for_value

pytestmark = [pytest.mark.slow]

REPO_ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO_ROOT / "notebooks"
VIEWPORT = {"width": 1440, "height": 900}
SCREENSHOTS = REPO_ROOT / "test-results" / "jupyterlab"
SERVER_START_S = 90.0
RUN_ALL_S = 300.0  # the five notebooks at once, on two busy cores


@dataclass(frozen=True)
class Page:
    """What a Panel page in a notebook must show: its figures' minimum width, and a player or not."""

    title: str
    min_figure_width: int = 400  # responsive plots; image tiles have their own fixed size
    n_figures: int = 1
    player: bool = True


@dataclass(frozen=True)
class Notebook:
    name: str
    pages: tuple[Page, ...] = field(default_factory=tuple)


EXPECTED = [
    Notebook("tour.ipynb", (Page("EM playground", n_figures=5),)),
    Notebook("variational_and_benchmark.ipynb", (Page("Variational DP mixture", n_figures=5),
                                                  Page("Benchmark", n_figures=8, player=False))),
    Notebook("factor_models.ipynb", (Page("Inpainting", min_figure_width=100, n_figures=7),)),
    Notebook("learning_with_missing_features.ipynb"),  # tables and numbers, no Panel page
    Notebook("nmar_models.ipynb", (Page("Ratings", n_figures=3),)),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _is_local(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme in ("data", "blob", "about") or parts.hostname in ("127.0.0.1", "localhost", "::1")


# jupyter_server (2.21.1, the newest) registers a kernel before it sets the kernel's ``last_activity``;
# a ``GET /api/kernels`` (JupyterLab polls it) that lands in that window answers 500 ("The
# 'last_activity' trait of a ServerKernelManager instance expected a datetime, not the NoneType
# None"), which the page logs as a console error. With five notebooks starting their kernels at once
# it happened in CI. A user sees nothing (the next poll succeeds); the test server's kernels get a
# start time as their default ``last_activity`` instead, so the console stays a test of the notebooks.
STARTED_KERNEL_MANAGER = """\
from jupyter_server._tz import utcnow
from jupyter_server.services.kernels.kernelmanager import ServerKernelManager
from traitlets import default


class StartedKernelManager(ServerKernelManager):
    @default("last_activity")
    def _default_last_activity(self):
        return utcnow()
"""


@dataclass
class JupyterLab:
    url: str
    token: str
    log: Path
    proc: subprocess.Popen

    def log_tail(self, n: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-n:] if self.log.exists() else ""

    def notebook_url(self, name: str) -> str:
        # a workspace per notebook, reset: a page does not reopen (and re-attach to) the others' notebooks
        return f"{self.url}/lab/workspaces/{Path(name).stem}/tree/notebooks/{name}?reset&token={self.token}"


@pytest.fixture(scope="module")
def jupyterlab(tmp_path_factory):
    """A JupyterLab server on a temporary copy of the notebooks; stopped (with its kernels) at the end."""
    root = tmp_path_factory.mktemp("jupyterlab")
    shutil.copytree(NOTEBOOKS, root / "notebooks", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    (root / "results").symlink_to(REPO_ROOT / "results")  # read by the benchmark cells (../results)
    env = dict(os.environ, JUPYTER_PLATFORM_DIRS="1", PYDEVD_DISABLE_FILE_VALIDATION="1")
    for var in ("JUPYTER_RUNTIME_DIR", "JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "IPYTHONDIR",
                "JUPYTERLAB_SETTINGS_DIR", "JUPYTERLAB_WORKSPACES_DIR"):
        path = root / "jupyter" / var.lower()
        path.mkdir(parents=True)
        env[var] = str(path)
    (root / "server_patch").mkdir()  # on the server's path only for its kernel manager class (see below)
    (root / "server_patch" / "_started_kernel_manager.py").write_text(STARTED_KERNEL_MANAGER)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root / "server_patch"), env.get("PYTHONPATH")]))
    port, token = _free_port(), secrets.token_hex(16)
    log = root / "jupyter.log"
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root",
           "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
           f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
           "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
           "--AsyncMappingKernelManager.kernel_manager_class=_started_kernel_manager.StartedKernelManager"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    lab = JupyterLab(f"http://127.0.0.1:{port}", token, log, proc)
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"jupyter lab exited with {proc.returncode}:\n{lab.log_tail()}")
            try:
                with urllib.request.urlopen(f"{lab.url}/api/status?token={token}", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"jupyter lab did not answer within {SERVER_START_S:.0f} s:\n{lab.log_tail()}")
            time.sleep(0.2)
        yield lab
    finally:
        proc.terminate()  # the server shuts its kernels down on SIGTERM
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait(timeout=10)


# ----------------------------------------------------------------------------------------- the notebook UI

PROMPTS_JS = """() => [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell')]
    .map(c => (c.querySelector('.jp-InputPrompt') || {}).textContent || '')"""


def _prompts(page) -> list[str]:
    return [p.strip() for p in page.evaluate(PROMPTS_JS)]


def _code_cells(name: str) -> int:
    cells = json.loads((NOTEBOOKS / name).read_text())["cells"]
    return sum(c["cell_type"] == "code" for c in cells)


def _run_all(page, name: str) -> None:
    """Run > Run All Cells, once the kernel is idle; retried if the click did not start a run."""
    n_code = _code_cells(name)
    page.locator(".jp-Notebook").first.wait_for(timeout=60_000)
    page.wait_for_function(f"() => document.querySelectorAll('.jp-Notebook .jp-CodeCell').length === {n_code}",
                           timeout=60_000)
    for _ in range(3):
        page.get_by_text(re.compile(r"\| Idle$")).first.wait_for(timeout=90_000)  # the status bar's kernel status
        page.get_by_role("menuitem", name="Run", exact=True).click()
        page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
        try:  # the first cell is queued or done: the run started
            page.wait_for_function(f"({PROMPTS_JS})().length && !/^\\[ \\]:$/.test(({PROMPTS_JS})()[0].trim())",
                                   timeout=15_000)
            return
        except Exception:  # noqa: BLE001 - the menu opened before the kernel was ready: try again
            page.keyboard.press("Escape")
    raise AssertionError(f"{name}: Run All Cells did not start a run: prompts {_prompts(page)}")


def _errors_in_outputs(page) -> list[str]:
    return [t[:2000] for t in page.locator(".jp-OutputArea-output").all_inner_texts()
            if "Traceback (most recent call last)" in t]


def _wait_until_run(page, name: str, deadline: float) -> None:
    """Every code cell has an execution count (none queued or running), or fail with the error shown."""
    while True:
        prompts = _prompts(page)
        if prompts and all(re.fullmatch(r"\[\d+\]:", p) for p in prompts):
            return
        errors = _errors_in_outputs(page)
        if errors:
            raise AssertionError(f"{name}: a cell failed:\n" + "\n---\n".join(errors))
        if "[*]:" not in prompts and page.get_by_text(re.compile(r"\| Idle$")).count():
            # idle, nothing queued, some cells never ran: Run All stopped (an error) or never reached them
            page.wait_for_timeout(1000)
            if _prompts(page) == prompts:
                raise AssertionError(f"{name}: the run stopped with prompts {prompts}; errors: {errors}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{name}: cells still running after {RUN_ALL_S:.0f} s: {prompts}")
        page.wait_for_timeout(500)


@pytest.fixture(scope="module")
def notebooks(request, jupyterlab, browser):
    """The selected tests' notebooks open, one page each, and run to the end (at the same time).

    Returns ``{name: (page, blocked, errors)}``: ``blocked`` lists the requests to other hosts than
    localhost, ``errors`` the page's JavaScript errors (uncaught exceptions and console errors).
    """
    selected = {item.callspec.params["nb"].name for item in request.session.items
                if getattr(item, "module", None) is request.module and hasattr(item, "callspec")}  # nbmake items have none
    blocked: dict[str, list[str]] = {}
    errors: dict[str, list[str]] = {}

    def block(route, out: list[str]):
        out.append(route.request.url)
        route.abort("internetdisconnected")

    contexts, pages = [], {}
    try:
        for nb in [nb for nb in EXPECTED if nb.name in selected]:
            # a context each: JupyterLab windows sharing one browser storage clash when they start together
            context = browser.new_context(viewport=VIEWPORT)
            context.set_default_timeout(30_000)
            blocked[nb.name] = []  # offline: a request to a CDN fails, and is recorded
            context.route(lambda url: not _is_local(url), lambda route, out=blocked[nb.name]: block(route, out))
            contexts.append(context)
            page = context.new_page()
            errors[nb.name] = page_errors = []
            page.on("pageerror", lambda exc, out=page_errors: out.append(f"pageerror: {exc}"))
            page.on("console", lambda msg, out=page_errors: out.append(f"console.error: {msg.text}")
                    if msg.type == "error" else None)
            page.goto(jupyterlab.notebook_url(nb.name), wait_until="domcontentloaded")
            pages[nb.name] = page
        for name, page in pages.items():
            _run_all(page, name)
        deadline = time.monotonic() + RUN_ALL_S
        for name, page in pages.items():
            try:
                _wait_until_run(page, name, deadline)
            except AssertionError as exc:
                raise AssertionError(f"{exc}\n\nJupyter log:\n{jupyterlab.log_tail()}") from None
        yield {name: (page, blocked[name], errors[name]) for name, page in pages.items()}
    finally:
        for context in contexts:
            context.close()


# ----------------------------------------------------------------------------------------- the pages

def _page_cells(page):
    """The code cells whose output is a Panel page (its collapsible settings card), in notebook order."""
    return page.locator(".jp-CodeCell").filter(has=page.locator(".card-header", has_text="Settings"))


def _readout(cell) -> str:
    # text_content: the text even while the cell is scrolled away (JupyterLab skips drawing it then)
    return cell.get_by_text(re.compile(r"^Iteration: ")).first.text_content()


def _iteration(cell) -> int:
    """The first number of the player's read-out ("Iteration: EM: 3 · naive: 3 · ...")."""
    match = re.search(r"Iteration: [^:]+: (\d+)", _readout(cell))
    assert match, f"no iteration in the read-out {_readout(cell)!r}"
    return int(match.group(1))


def _boxes(locator) -> list[dict]:
    return [b for b in (locator.nth(i).bounding_box() for i in range(locator.count())) if b]


def _shoot(page, cell, name: str) -> None:
    """Screenshots of the window: the page's top (its controls), then its first plots."""
    page.add_style_tag(content=".jp-toast-container, .Toastify { display: none !important; }")  # the news prompt
    cell.locator(".jp-OutputArea").first.scroll_into_view_if_needed()
    cell.locator(".jp-OutputArea").first.evaluate("e => e.scrollIntoView({block: 'start'})")
    page.screenshot(path=str(SCREENSHOTS / f"{name}-top.png"))
    cell.locator(".bk-Figure").first.evaluate("e => e.scrollIntoView({block: 'start'})")
    page.screenshot(path=str(SCREENSHOTS / f"{name}-plots.png"))


def _step_play_pause(page, cell, title: str) -> None:
    before = _iteration(cell)
    cell.get_by_role("button", name="Step", exact=True).click()
    wait_for_value(page, lambda: _iteration(cell), lambda it: it == before + 1, timeout_s=30)
    stepped = _iteration(cell)
    cell.get_by_role("button", name="Play", exact=True).click()
    wait_for_value(page, lambda: _iteration(cell), lambda it: it >= stepped + 3, timeout_s=30)
    cell.get_by_role("button", name="Pause", exact=True).click()
    cell.get_by_role("button", name="Play", exact=True).wait_for(timeout=30_000)
    last = _iteration(cell)  # a tick already running may still land: wait until the count settles
    for _ in range(20):
        page.wait_for_timeout(500)
        now = _iteration(cell)
        if now == last:
            break
        last = now
    page.wait_for_timeout(1000)
    assert _iteration(cell) == last, f"{title}: kept playing after Pause ({_readout(cell)!r})"


@pytest.mark.parametrize("nb", EXPECTED, ids=[nb.name for nb in EXPECTED])
def test_notebook_runs_offline_and_its_pages_render_and_step(notebooks, nb):
    page, blocked, errors = notebooks[nb.name]
    assert not blocked, f"requests to other hosts than localhost (blocked; a CDN?): {sorted(set(blocked))[:10]}"
    cells = _page_cells(page)
    assert cells.count() == len(nb.pages), f"{nb.name}: {cells.count()} Panel pages rendered, expected {len(nb.pages)}"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for i, spec in enumerate(nb.pages):
        cell = cells.nth(i)
        cell.scroll_into_view_if_needed()
        out_box = cell.locator(".jp-OutputArea").first.bounding_box()
        boxes = _boxes(cell.locator(".bk-Figure"))
        assert len(boxes) >= spec.n_figures, f"{spec.title}: {len(boxes)} figures drawn, expected {spec.n_figures}"
        widths = sorted(round(b["width"]) for b in boxes)
        assert widths[0] >= spec.min_figure_width, f"{spec.title}: figures squeezed, widths {widths}"
        assert max(b["x"] + b["width"] for b in boxes) <= out_box["x"] + out_box["width"] + 2, \
            f"{spec.title}: figures overflow the output area ({out_box['width']:.0f} px wide)"
        top_of_plots = min(b["y"] for b in boxes)
        card = cell.locator(".card-header", has_text="Settings").first.bounding_box()
        assert card["y"] < top_of_plots, f"{spec.title}: the settings are not above the plots"
        if spec.player:
            step = cell.get_by_role("button", name="Step", exact=True).bounding_box()
            assert step["y"] < top_of_plots, f"{spec.title}: Step is not above the plots"
            _step_play_pause(page, cell, spec.title)
        _shoot(page, cell, f"{Path(nb.name).stem}-{i}")
    assert not blocked, f"requests to other hosts than localhost: {sorted(set(blocked))[:10]}"
    assert not errors, f"{nb.name}: the page reported errors:\n" + "\n".join(errors)
