"""A tab closed while playing: the server stops working for it at once, and its log stays clean.

Reported: a tab closed during Play logged tracebacks (``WebSocketClosedError``, an
``AssertionError`` in the patch handler, ``'DocumentCallbackManager' object has no attribute
'_change_callbacks'``) and kept computing until the session expired.
"""

from __future__ import annotations

import importlib.util
import logging
import time
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
NOISY = ("tornado", "asyncio", "bokeh", "panel")


def _load(slug: str):
    spec = importlib.util.spec_from_file_location(f"_lifecycle_{slug}", REPO_ROOT / "apps" / f"{slug}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _wait(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout_s} s waiting for: {what}")


@pytest.mark.parametrize("slug, model", [("em_playground", "em"), ("variational", "vb")])
def test_closing_a_playing_tab_stops_its_work_and_leaves_the_log_clean(slug, model, serve_app, browser, caplog,
                                                                       wait_for_bokeh):
    from explorer.ui.page import page_template

    module, views = _load(slug), []

    def app():
        view = module.create_view()
        views.append(view)
        return page_template(slug, lambda: view, threaded=True)

    caplog.set_level(logging.WARNING)
    url = serve_app({slug: app}, check_unused_sessions_milliseconds=300, unused_session_lifetime_milliseconds=600)
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    page = context.new_page()
    page.goto(f"{url}/{slug}")
    wait_for_bokeh(page)
    page.get_by_role("button", name="Play").click()
    # the page's session: the one that plays. With the short unused-session lifetime above, the session
    # made by the page's GET is discarded when the websocket connects more than 0.6 s later (a busy
    # machine), and Bokeh makes a second one for the websocket: the first view is then not the page's.
    _wait(lambda: any(getattr(v, model).iteration >= 3 for v in views), 30, "Play advances the model")
    view = next(v for v in views if getattr(v, model).iteration >= 3)
    stepped = getattr(view, model)
    context.close()  # the student closes the tab while the page plays
    player = view.player
    _wait(lambda: not player.playing, 10, "Play stops once the browser is gone")
    stopped_at = stepped.iteration
    time.sleep(1.5)
    assert stepped.iteration == stopped_at, "the server kept computing for a closed tab"
    worker = player._worker  # the session's one compute thread (explorer.ui.session.SessionWorker)
    assert worker is not None
    _wait(lambda: player._destroyed and worker.stopped and not worker._thread.is_alive(), 20,
          "the session ends and its thread stops")
    time.sleep(1.0)  # anything still scheduled for the closed session would log now
    noisy = [f"{r.name}: {r.getMessage()}" for r in caplog.records if r.name.split(".")[0] in NOISY]
    assert noisy == [], "the server logged:\n" + "\n".join(noisy)
