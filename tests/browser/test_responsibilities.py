"""The responsibilities page served from apps/responsibilities.py, driven in headless chromium."""

from __future__ import annotations

import re

from tests.browser._helpers import select_option, wait_for_value

APP = "apps/responsibilities.py"


def _l(page) -> int:
    text = page.get_by_text(re.compile(r"NSA-M at l = \d+")).first.inner_text()
    return int(re.search(r"at l = (\d+)", text).group(1))








def test_step_play_pause_and_mask(
    serve_app, new_page, watch_errors, wait_for_bokeh, screenshot, assert_stays_paused,
):
    url = serve_app({"responsibilities": APP})
    page = new_page(viewport={"width": 1500, "height": 1150})
    errors = watch_errors(page)
    console = errors.console
    page.goto(f"{url}/responsibilities")
    wait_for_bokeh(page)
    page.get_by_text("component 1 ≈ digit", exact=False).first.wait_for()
    assert page.locator(".bk-Canvas").count() >= 5  # 3 images, the bars, the scatter, the accuracy
    assert _l(page) == 0

    page.get_by_role("button", name="Step").click()
    wait_for_value(page, lambda: _l(page), lambda v: v == 1)
    page.mouse.move(900, 1000)  # the Step button's tooltip would cover Play
    page.get_by_role("button", name="Play").click()
    wait_for_value(page, lambda: _l(page), lambda v: v >= 6, timeout_s=30)
    page.get_by_role("button", name="Pause").click()
    page.get_by_role("button", name="Play").wait_for()
    assert_stays_paused(page, lambda: _l(page))
    wait_for_bokeh(page)
    page.wait_for_timeout(400)
    # BokehJS warned "attempted to retrieve property array for nonexistent field 'none'" twice per update
    assert not [m for m in console if "nonexistent field" in m], console
    screenshot(page, "responsibilities")  # the default mask: the left half of the 3s and 8s

    select_option(page, "random pixels", "quarter")
    page.wait_for_function("() => window.location.search.includes('mask=quarter')")
    page.get_by_text(re.compile(r"Image \d+ \(digit \d\)")).first.wait_for()
    wait_for_bokeh(page)
    assert not [m for m in console if "nonexistent field" in m], console
    errors.assert_none()
