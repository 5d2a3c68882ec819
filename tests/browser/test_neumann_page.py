"""The Neumann-convergence page served from apps/neumann.py, driven in headless chromium."""

from __future__ import annotations

import re

APP = "apps/neumann.py"


def _l(page) -> int:
    text = page.get_by_text(re.compile(r"NSA MSE [\d.]+ at l = \d+")).first.inner_text()
    return int(re.search(r"at l = (\d+)", text).group(1))


def _wait_l(page, predicate, timeout_s: float = 15.0) -> int:
    for _ in range(int(timeout_s / 0.1)):
        value = _l(page)
        if predicate(value):
            return value
        page.wait_for_timeout(100)
    raise AssertionError(f"l stayed at {_l(page)}")


def _select(page, option_text: str, label: str):
    page.locator("select").filter(has=page.locator("option", has_text=option_text)).first.select_option(label=label)


def test_step_play_pause_window_and_mask(serve_app, new_page, watch_errors, wait_for_bokeh, screenshot):
    url = serve_app({"neumann": APP})
    page = new_page(viewport={"width": 1500, "height": 1150})
    errors = watch_errors(page)
    page.goto(f"{url}/neumann")
    wait_for_bokeh(page)
    page.get_by_text("NSA never beats the exact solution", exact=False).first.wait_for()  # l = 0: nothing yet
    assert page.locator(".bk-Canvas").count() >= 3
    assert _l(page) == 0

    page.get_by_role("button", name="Step").click()
    _wait_l(page, lambda v: v == 1)
    page.mouse.move(900, 900)  # the Step button's tooltip would cover Play
    page.get_by_role("button", name="Play").click()
    _wait_l(page, lambda v: v >= 15, timeout_s=30)
    page.get_by_role("button", name="Pause").click()
    page.get_by_role("button", name="Play").wait_for()
    page.wait_for_timeout(500)
    paused_at = _l(page)
    page.wait_for_timeout(1200)
    assert _l(page) == paused_at, "l kept growing after Pause"
    # on quarters of the 8x8 digits early-stopped NSA is better than the exact solution
    page.get_by_text("NSA beats the exact solution", exact=False).first.wait_for()

    _select(page, "random pixels", "half")
    page.get_by_text("mask half", exact=False).first.wait_for()
    page.wait_for_function("() => window.location.search.includes('mask=half')")
    assert _l(page) == paused_at  # l is kept when the mask changes
    wait_for_bokeh(page)
    page.wait_for_timeout(400)
    screenshot(page, "neumann")
    errors.assert_none()
