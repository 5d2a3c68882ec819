"""Browser-test harness: Panel apps served in-process, driven by Playwright on Debian's chromium.

Every test in ``tests/browser`` is marked ``browser`` automatically. Nothing is skipped: when
``/usr/bin/chromium`` (or ``$EXPLORER_CHROMIUM``) is missing, the tests FAIL with the command that
fixes it. No browser is ever downloaded (``playwright install`` is never needed).

The fixtures are self-contained (Playwright's sync API only). If the pytest-playwright plugin is
installed, ``browser``/``context``/``page`` here override its fixtures; the plugin then merely
adds a ``[chromium]`` suffix to test ids.

Fixtures
--------
browser                 session-wide ``playwright.sync_api.Browser`` (headless chromium)
new_page(**ctx_kwargs)  factory: a page in a fresh browser context (1280x800, 20 s timeouts);
                        one context per call, so two calls = two independent sessions
page                    ``new_page()`` for the common single-page case
page_errors             :class:`PageErrors` attached to ``page`` before the test runs
watch_errors(page)      attach a :class:`PageErrors` to any other page (call before ``goto``)
serve_app(apps, ...)    start ``pn.serve`` in a thread on a free port, wait for ``/liveness``,
                        return the base URL ``http://localhost:<port>``; stopped at teardown
wait_for_bokeh(page)    wait until the Bokeh document is rendered and idle
screenshot(target, name)  save ``test-results/screenshots/<name>.png`` (page = full page, or a
                        locator; ``directory=`` to save elsewhere; $EXPLORER_SCREENSHOT_DIR
                        overrides the default: scripts/refresh_screenshots.sh uses docs/screenshots)

Typical test::

    def test_gmm_page(serve_app, page, page_errors, wait_for_bokeh):
        url = serve_app({"gmm": "apps/gmm.py"})
        page.goto(f"{url}/gmm")
        wait_for_bokeh(page)
        page.get_by_role("button", name="Step").click()
        ...
        page_errors.assert_none()
"""

from __future__ import annotations

import os
import re
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
#: Where ``screenshot(...)`` saves: test-results/screenshots (git-ignored), so a test run rewrites no
#: tracked file. ``scripts/refresh_screenshots.sh`` points it at docs/screenshots (the README's pictures).
SCREENSHOT_DIR = Path(os.environ.get("EXPLORER_SCREENSHOT_DIR") or REPO_ROOT / "test-results" / "screenshots")
CHROMIUM = os.environ.get("EXPLORER_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
]
VIEWPORT = {"width": 1280, "height": 800}
DEFAULT_TIMEOUT_MS = 20_000
SERVER_START_TIMEOUT_S = 30.0
SERVER_STOP_TIMEOUT_S = 10.0

_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    """Mark every test below tests/browser with ``browser`` (select with ``-m browser``)."""
    for item in items:
        if _HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.browser)


# --------------------------------------------------------------------------- browser / pages


@pytest.fixture(scope="session")
def _sync_playwright():
    from playwright.sync_api import sync_playwright

    pw = sync_playwright().start()
    yield pw
    pw.stop()


@pytest.fixture(scope="session")
def browser(_sync_playwright):
    """Headless Debian chromium, shared by the whole session."""
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        pytest.fail(
            f"Chromium not found at {CHROMIUM}. Browser tests must run: install Debian's chromium "
            "with `apt-get update && apt-get install -y chromium` (scripts/test.sh does this), or "
            "point EXPLORER_CHROMIUM at a chromium binary. Do not run `playwright install`.",
            pytrace=False,
        )
    browser = _sync_playwright.chromium.launch(
        executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True
    )
    yield browser
    browser.close()


@pytest.fixture
def new_page(browser):
    """Factory: ``new_page(**context_kwargs) -> Page`` in its own browser context."""
    contexts = []

    def _new_page(**context_kwargs):
        context_kwargs.setdefault("viewport", VIEWPORT)
        context = browser.new_context(**context_kwargs)
        context.set_default_timeout(DEFAULT_TIMEOUT_MS)
        context.set_default_navigation_timeout(DEFAULT_TIMEOUT_MS)
        contexts.append(context)
        return context.new_page()

    yield _new_page
    for context in contexts:
        context.close()


@pytest.fixture
def page(new_page):
    """A fresh page (own context, 1280x800 viewport, 20 s default timeouts)."""
    return new_page()


class PageErrors(list):
    """Browser-side errors of one page: console messages of type ``error`` and ``pageerror``s.

    Attach it before navigating so that errors raised while loading are caught.
    """

    def __init__(self, page):
        super().__init__()
        self.console: list[str] = []  # every console warning and error, "type: text" (errors are also in self)
        page.on("console", self._on_console)
        page.on("pageerror", self._on_pageerror)

    def _on_console(self, msg):
        if msg.type in ("warning", "error"):
            self.console.append(f"{msg.type}: {msg.text}")
        if msg.type == "error":
            loc = msg.location or {}
            where = f" ({loc.get('url', '')}:{loc.get('lineNumber', '')})" if loc.get("url") else ""
            self.append(f"console.error: {msg.text}{where}")

    def _on_pageerror(self, exc):
        self.append(f"pageerror: {exc.message}\n{getattr(exc, 'stack', '') or ''}".rstrip())

    def assert_none(self):
        assert not self, "the page reported errors:\n" + "\n".join(self)


@pytest.fixture
def watch_errors() -> Callable[..., PageErrors]:
    """``watch_errors(page) -> PageErrors`` for pages made with ``new_page``."""
    return PageErrors


@pytest.fixture
def page_errors(page) -> PageErrors:
    """Errors reported by ``page`` (console errors and uncaught exceptions)."""
    return PageErrors(page)


# --------------------------------------------------------------------------- helpers

_BOKEH_READY = (
    "() => window.Bokeh !== undefined && Bokeh.documents.length > 0"
    " && Bokeh.documents[0].is_idle"
)


def _wait_for_bokeh(page, timeout: float = DEFAULT_TIMEOUT_MS) -> None:
    page.wait_for_function(_BOKEH_READY, timeout=timeout)


@pytest.fixture
def wait_for_bokeh() -> Callable[..., None]:
    """``wait_for_bokeh(page, timeout=20000)``: block until the Bokeh document is idle."""
    return _wait_for_bokeh


def _save_screenshot(target, name: str, *, directory: Path | str | None = None, **kwargs) -> Path:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
        raise ValueError(f"screenshot name {name!r}: use letters, digits, '_', '-', '.' only")
    directory = Path(directory) if directory is not None else SCREENSHOT_DIR
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.png"
    if hasattr(target, "context"):  # a Page (a Locator has .page but no .context)
        kwargs.setdefault("full_page", True)
    target.screenshot(path=str(path), **kwargs)
    return path


def _assert_stays_paused(page, read: Callable[[], int], *, settle_s: float = 10.0, quiet_ms: int = 2000,
                         hold_ms: int = 1500) -> int:
    """After Pause: wait until ``read()`` has not changed for ``quiet_ms`` (a tick already running may still
    land, more than a second later on a busy machine), then check it stays put for ``hold_ms`` more. Fails if
    it never settles within ``settle_s`` (Play kept going: ticks come every 0.2 s)."""
    last, quiet, deadline = read(), 0, time.monotonic() + settle_s
    while quiet < quiet_ms:
        page.wait_for_timeout(200)
        now = read()
        quiet = quiet + 200 if now == last else 0
        if now != last and time.monotonic() > deadline:
            raise AssertionError(f"still advancing {settle_s} s after Pause ({last} -> {now})")
        last = now
    page.wait_for_timeout(hold_ms)
    assert read() == last, "kept advancing after Pause"
    return last


@pytest.fixture
def assert_stays_paused() -> Callable[..., int]:
    """``assert_stays_paused(page, read)``: the counter read by ``read()`` stops after Pause (see above)."""
    return _assert_stays_paused


SCATTER_PANELS_JS = """() => {
  const out = [];
  for (const m of Bokeh.documents[0].all_models) {
    if (m.type !== 'Figure' || (m.title && m.title.text)) continue;
    const xs = [], ys = [];
    for (const r of m.renderers) {
      if (!r.glyph || r.glyph.type !== 'Scatter') continue;
      const d = r.data_source.data, get = k => Array.from((d instanceof Map ? d.get(k) : d[k]) || []);
      const x = get('x'), y = get('y'), marker = get('marker');
      x.forEach((v, i) => { if (marker[i] === 'circle') { xs.push(v); ys.push(y[i]); } });
    }
    out.push({id: m.id, x: [m.x_range.start, m.x_range.end], y: [m.y_range.start, m.y_range.end], xs, ys});
  }
  return out;
}"""


def _panels_showing_their_data(page, n_panels: int, previous: list[dict] | None = None,
                              timeout_s: float = 20.0) -> list[dict]:
    """Wait until every scatter panel draws points (other ones than in ``previous``) inside its axes."""
    panels = []
    for _ in range(int(timeout_s / 0.2)):
        panels = page.evaluate(SCATTER_PANELS_JS)
        if len(panels) == n_panels and all(
                p["xs"] and p["x"][0] <= min(p["xs"]) and max(p["xs"]) <= p["x"][1]
                and p["y"][0] <= min(p["ys"]) and max(p["ys"]) <= p["y"][1] for p in panels) and (
                previous is None or all(p["xs"] != q["xs"] for p, q in zip(panels, previous))):
            return panels
        page.wait_for_timeout(200)
    summary = [(p["x"], p["y"], (min(p["xs"], default=None), max(p["xs"], default=None)),
                (min(p["ys"], default=None), max(p["ys"], default=None))) for p in panels]
    raise AssertionError(f"the axes do not contain the drawn points (x range, y range, x data, y data): {summary}")


@pytest.fixture
def panels_showing_their_data() -> Callable[..., list]:
    """``panels_showing_their_data(page, n_panels, previous=None)``: wait until every scatter panel draws
    points inside its axes (and other points than ``previous``); returns the panels' ranges and points.
    ``panels_showing_their_data.read(page)`` returns them at once, without waiting."""
    return _panels_showing_their_data


def _read_scatter_panels(page) -> list[dict]:
    return page.evaluate(SCATTER_PANELS_JS)


_panels_showing_their_data.read = _read_scatter_panels  # the panels now, whatever they show


@pytest.fixture
def screenshot() -> Callable[..., Path]:
    """``screenshot(page_or_locator, name, directory=None, **kw) -> Path``.

    Saves ``<SCREENSHOT_DIR>/<name>.png`` (or ``<directory>/<name>.png``); a Page is captured
    full-page, a Locator just its element. Extra keywords go to Playwright's ``screenshot``.
    """
    return _save_screenshot


# --------------------------------------------------------------------------- server


def _wait_for_liveness(url: str, thread, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if thread is not None and not thread.is_alive():
            pytest.fail(f"the Panel server thread died while starting ({url}); see the log above")
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return
                last = f"HTTP {resp.status}"
        except (urllib.error.URLError, ConnectionError, OSError) as exc:
            last = repr(exc)
        time.sleep(0.05)
    pytest.fail(f"{url} did not answer within {timeout:.0f} s (last error: {last})")


@pytest.fixture
def serve_app():
    """Factory: serve Panel apps in-process and return the base URL.

    ``serve_app(apps, *, num_threads=4, **serve_kwargs) -> "http://localhost:<port>"``

    ``apps`` is a dict ``{slug: function_or_path}`` (served at ``/<slug>``), or a single function
    or path (served at ``/app``). Pass functions or file paths, never a shared Panel object: a
    function builds a fresh app per browser session, like ``panel serve``. ``num_threads`` sets
    Panel's thread pool as ``panel serve --num-threads`` does (``None`` disables it). Extra
    keyword arguments go to ``pn.serve`` (e.g. ``check_unused_sessions_milliseconds``). Every
    server is stopped when the test ends.
    """
    import panel as pn

    threads = []

    def _serve(apps, *, num_threads: int | None = 4, **serve_kwargs) -> str:
        if not isinstance(apps, Mapping):
            apps = {"app": apps}
        apps = {slug: str(app) if isinstance(app, Path) else app for slug, app in apps.items()}
        for slug, app in apps.items():
            if isinstance(app, str) and not Path(app).exists():
                raise FileNotFoundError(f"serve_app: {slug!r} -> {app} does not exist")
        # a fresh pool per test: setting the same value twice would not recreate it after reset
        pn.config.nthreads = None
        pn.config.nthreads = num_threads
        server_id = uuid.uuid4().hex
        thread = pn.serve(
            apps, port=0, threaded=True, show=False, liveness=True, verbose=False,
            server_id=server_id, **serve_kwargs,
        )
        threads.append(thread)
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while server_id not in pn.state._servers:
            if not thread.is_alive() or time.monotonic() > deadline:
                pytest.fail(f"Panel server for {sorted(apps)} did not start; see the log above")
            time.sleep(0.02)
        port = pn.state._servers[server_id][0].port
        base = f"http://localhost:{port}"
        _wait_for_liveness(f"{base}/liveness", thread, SERVER_START_TIMEOUT_S)
        return base

    yield _serve
    stuck = []
    for thread in threads:
        try:
            thread.stop()
        except RuntimeError:  # Panel's "Thread already stopping"
            pass
        thread.join(timeout=SERVER_STOP_TIMEOUT_S)
        if thread.is_alive():
            stuck.append(thread)
    _forget_servers(stuck)
    pn.config.nthreads = None
    if stuck:
        pytest.fail(f"{len(stuck)} Panel server thread(s) of this test did not stop within {SERVER_STOP_TIMEOUT_S} s "
                    "(dropped from Panel's registry so that the next tests start clean); where every thread was:\n"
                    + _thread_stacks())


def _thread_stacks() -> str:
    """The stack of every other thread of this process: for a server that would not stop, what its loop and the
    session's threads were waiting on."""
    import sys
    import threading
    import traceback

    names = {t.ident: t.name for t in threading.enumerate()}
    me = threading.get_ident()
    return "\n".join(f"--- thread {names.get(ident, ident)}\n" + "".join(traceback.format_stack(frame, limit=30))
                     for ident, frame in sys._current_frames().items() if ident != me)


def _forget_servers(threads) -> None:
    """Drop server threads that would not stop from Panel's registry (``pn.state._servers`` / ``_threads``).

    Left there, ``pn.state.kill_all_servers()`` raises "Thread already stopping" on them before it clears the
    registry, so every later test erred at teardown (47 errors in one CI run after one stuck server). The threads
    are daemons: they end with the process."""
    import panel as pn

    for thread in threads:
        sid = getattr(thread, "server_id", None)
        pn.state._servers.pop(sid, None)
        pn.state._threads.pop(sid, None)


@pytest.fixture(autouse=True)
def _reset_panel_state():
    """Leave no servers, sessions, caches or thread pools behind between browser tests."""
    yield
    _stop_all_servers()


def _stop_all_servers() -> None:
    """Stop every Panel server of the process and reset Panel's state; a server thread that will not stop is
    dropped from the registry instead of failing every later test's teardown."""
    import panel as pn

    for thread in list(pn.state._threads.values()):
        try:
            thread.stop()
        except RuntimeError:  # "Thread already stopping": a server that would not stop
            pass
        thread.join(timeout=SERVER_STOP_TIMEOUT_S)
    _forget_servers([thread for thread in pn.state._threads.values() if thread.is_alive()])
    pn.state.kill_all_servers()  # what is left has stopped (or is not threaded)
    pn.state.reset()
    pn.config.nthreads = None

