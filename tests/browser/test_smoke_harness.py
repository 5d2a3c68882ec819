"""Proves the browser harness end to end on a throwaway app defined here.

A Button increments a counter shown in a Markdown pane. The app is built per session by a
function, so two browser contexts get two independent counters.
"""

from __future__ import annotations

import panel as pn
import pytest


def make_counter_app(created: list | None = None):
    """Build one session's app: a 'Add one' button and a Markdown pane 'Count: N'."""
    state = {"count": 0}
    button = pn.widgets.Button(label="Add one")
    text = pn.pane.Markdown("Count: 0")

    def on_click(event):
        state["count"] += 1
        text.object = f"Count: {state['count']}"

    button.on_click(on_click)
    if created is not None:
        created.append(state)
    return pn.Column("# Harness smoke test", button, text)


def test_button_click_updates_markdown(
    serve_app, page, page_errors, wait_for_bokeh, screenshot, tmp_path
):
    created = []
    url = serve_app({"counter": lambda: make_counter_app(created)})
    requested = []
    page.on("request", lambda req: requested.append(req.url))

    page.goto(f"{url}/counter")
    wait_for_bokeh(page)
    count = page.get_by_text("Count: 0", exact=True)
    count.wait_for()  # (read at once, a busy CI machine once gave the pane's text before it was drawn: "")
    assert count.inner_text().strip() == "Count: 0"

    button = page.get_by_role("button", name="Add one")
    button.click()
    page.get_by_text("Count: 1", exact=True).wait_for()
    button.click()
    button.click()
    page.get_by_text("Count: 3", exact=True).wait_for()

    # the server-side state of this session agrees with what the browser shows
    assert len(created) == 1 and created[0]["count"] == 3
    # offline-safe: every resource comes from the local server (no CDN)
    external = [u for u in requested if not u.startswith((url, "data:", "blob:"))]
    assert not external, f"requests outside the app server: {external}"
    path = screenshot(page, "harness-smoke", directory=tmp_path)  # not a docs image
    assert path == tmp_path / "harness-smoke.png"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 1000
    assert screenshot(page.get_by_role("button", name="Add one"), "button", directory=tmp_path)
    page_errors.assert_none()


def test_sessions_are_isolated(serve_app, new_page, watch_errors, wait_for_bokeh):
    created = []
    url = serve_app({"counter": lambda: make_counter_app(created)})
    first, second = new_page(), new_page()
    errors = [watch_errors(first), watch_errors(second)]
    for p in (first, second):
        p.goto(f"{url}/counter")
        wait_for_bokeh(p)

    first.get_by_role("button", name="Add one").click()
    first.get_by_text("Count: 1", exact=True).wait_for()

    assert second.get_by_text("Count: ", exact=False).inner_text().strip() == "Count: 0"
    assert sorted(s["count"] for s in created) == [0, 1]
    for e in errors:
        e.assert_none()


def test_page_errors_catches_javascript_errors(serve_app, page, page_errors, wait_for_bokeh):
    # the error collector must not be vacuous: a thrown exception and a console.error are seen
    url = serve_app({"counter": make_counter_app})
    page.goto(f"{url}/counter")
    wait_for_bokeh(page)
    page.evaluate("() => { console.error('deliberate console error'); }")
    page.evaluate("() => { setTimeout(() => { throw new Error('deliberate page error'); }, 0); }")
    for _ in range(100):  # the timer fires asynchronously: poll up to ~5 s
        if any("deliberate page error" in e for e in page_errors):
            break
        page.wait_for_timeout(50)
    assert any("deliberate console error" in e for e in page_errors)
    assert any("deliberate page error" in e for e in page_errors)


def test_a_server_that_will_not_stop_does_not_break_later_teardowns():
    """One stuck server thread once made Panel's kill_all_servers raise "Thread already stopping" in the teardown of
    every later browser test (47 errors in a CI run): the harness now drops it from Panel's registry."""
    from tests.browser.conftest import _stop_all_servers

    class StuckThread:
        server_id = "stuck-server"

        def stop(self):
            raise RuntimeError("Thread already stopping")

        def join(self, timeout=None):
            pass

        def is_alive(self):
            return True

    stuck = StuckThread()
    pn.state._threads[stuck.server_id] = stuck
    pn.state._servers[stuck.server_id] = (object(), None, [])
    with pytest.raises(RuntimeError, match="already stopping"):
        pn.state.kill_all_servers()  # what Panel does with it
    _stop_all_servers()  # what the harness does: no error, and the registry is clean for the next test
    assert stuck.server_id not in pn.state._threads and stuck.server_id not in pn.state._servers
    _stop_all_servers()


def test_a_stuck_servers_failure_shows_where_every_thread_waits():
    import threading

    from tests.browser.conftest import _thread_stacks

    lock, started = threading.Lock(), threading.Event()
    lock.acquire()

    def waits_for_the_page_lock():
        started.set()
        with lock:
            pass

    thread = threading.Thread(target=waits_for_the_page_lock, name="pool-thread-stand-in", daemon=True)
    thread.start()
    started.wait(5)
    try:
        stacks = _thread_stacks()
    finally:
        lock.release()
        thread.join(5)
    part = stacks.split("--- thread pool-thread-stand-in")[1].split("--- thread")[0]
    assert "waits_for_the_page_lock" in part and "with lock:" in part
