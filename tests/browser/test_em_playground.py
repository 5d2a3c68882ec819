"""The EM playground page served from apps/em_playground.py, driven in headless chromium."""

from __future__ import annotations

import re

APP = "apps/em_playground.py"

#: For every scatter panel (the figures without a title): its x/y range in the browser and the
#: circles it draws (the observed points), read from the page's Bokeh models.
ZOOM_JS = """([id, x0, x1]) => {
  const m = [...Bokeh.documents[0].all_models].find(m => m.id === id);
  m.x_range.setv({start: x0, end: x1});  // as a wheel zoom does: synced to the server
}"""


def _iteration(page, title: str = "Exact EM") -> int:
    text = page.get_by_text(f"{title} · iteration", exact=False).first.inner_text()
    return int(re.search(r"iteration (\d+)", text).group(1))


def _wait_iteration(page, predicate, title: str = "Exact EM", timeout_s: float = 15.0) -> int:
    for _ in range(int(timeout_s / 0.1)):
        it = _iteration(page, title)
        if predicate(it):
            return it
        page.wait_for_timeout(100)
    raise AssertionError(f"{title}: iteration stayed at {_iteration(page, title)}")


def test_step_play_pause_mechanism_and_tap(serve_app, new_page, watch_errors, wait_for_bokeh, screenshot,
                                           assert_stays_paused):
    url = serve_app({"em": APP})
    page = new_page(viewport={"width": 1400, "height": 1250})  # tall enough for the README screenshot
    page_errors = watch_errors(page)
    page.goto(f"{url}/em")
    wait_for_bokeh(page)
    page.get_by_text("Naive refit · iteration 0", exact=False).wait_for()
    assert page.locator(".bk-Canvas").count() >= 5  # three panels and two traces

    page.get_by_role("button", name="Step").click()
    for title in ("Exact EM", "Naive refit", "Mean imputation + EM"):
        _wait_iteration(page, lambda i: i == 1, title)

    page.get_by_role("button", name="Play").click()
    _wait_iteration(page, lambda i: i >= 40, timeout_s=30)
    page.get_by_role("button", name="Pause").click()
    page.get_by_role("button", name="Play").wait_for()
    assert_stays_paused(page, lambda: _iteration(page))  # a tick already running may land, later under load
    assert page.get_by_text("Iteration: EM:", exact=False).first.is_visible()

    screenshot(page, "em_playground")

    # a new mechanism restarts the three runs and is mirrored in the URL
    mechanism = page.locator("select").filter(has=page.locator("option", has_text="mcar (MCAR)"))
    mechanism.select_option(label="mcar (MCAR)")
    page.get_by_text("Mechanism: mcar", exact=False).wait_for()
    _wait_iteration(page, lambda i: i == 0)
    page.wait_for_function("() => window.location.search.includes('mechanism=mcar')")

    # clicking on a panel adds a complete point to the data
    figure = page.locator(".bk-Canvas").first
    box = figure.bounding_box()
    page.mouse.click(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.5)
    page.get_by_text("201 points", exact=False).wait_for()
    page_errors.assert_none()


def test_axes_follow_the_data_set_and_keep_a_zoom_while_stepping(serve_app, new_page, watch_errors,
                                                                   wait_for_bokeh, panels_showing_their_data):
    """Review item 2: after a new data set the panels kept the old ranges (data off-screen)."""
    url = serve_app({"em": APP})
    page = new_page(viewport={"width": 1400, "height": 1100})
    page_errors = watch_errors(page)
    page.goto(f"{url}/em")
    wait_for_bokeh(page)
    page.get_by_text("Naive refit · iteration 0", exact=False).wait_for()
    panels = panels_showing_their_data(page, 3)
    dataset = page.locator("select").filter(has=page.locator("option", has_text="three_blobs")).first
    for name in ("three_blobs", "ring"):
        dataset.select_option(label=name)
        panels = panels_showing_their_data(page, 3, previous=panels)

    # a zoom survives Step (the same data): the server does not reset the range
    wait_for_bokeh(page)
    panel = panels[0]
    page.evaluate(ZOOM_JS, [panel["id"], -1.0, 1.0])
    page.wait_for_timeout(500)
    page.get_by_role("button", name="Step").click()
    _wait_iteration(page, lambda i: i == 1)
    wait_for_bokeh(page)
    page.wait_for_timeout(500)
    zoomed = next(p for p in panels_showing_their_data.read(page) if p["id"] == panel["id"])
    assert zoomed["x"] == [-1.0, 1.0]
    page_errors.assert_none()
