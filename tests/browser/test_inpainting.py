"""The inpainting page served from apps/inpainting.py, driven in headless chromium."""

from __future__ import annotations

import re

from tests.browser._helpers import select_option, wait_for_value

APP = "apps/inpainting.py"


def _l(page) -> int:
    text = page.get_by_text(re.compile(r"at l = \d+")).first.inner_text()
    return int(re.search(r"at l = (\d+)", text).group(1))




def _missing_count(page) -> int:
    text = page.get_by_text(re.compile(r"^\d+ of 64 missing")).first.inner_text()
    return int(text.split()[0])




def test_step_play_pause_mask_brush_and_drawing(
    serve_app, new_page, watch_errors, wait_for_bokeh, screenshot, assert_stays_paused,
):
    url = serve_app({"inpainting": APP})
    page = new_page(viewport={"width": 1500, "height": 1250})
    errors = watch_errors(page)
    page.goto(f"{url}/inpainting")
    wait_for_bokeh(page)
    page.get_by_text("PPCA (closed form)", exact=False).first.wait_for()
    assert page.locator(".bk-Canvas").count() >= 7  # original, masked and the five encoders
    assert _l(page) == 0

    page.get_by_role("button", name="Step").click()
    wait_for_value(page, lambda: _l(page), lambda v: v == 1)
    page.mouse.move(900, 1000)  # the Step button's tooltip would cover Play
    page.get_by_role("button", name="Play").click()
    wait_for_value(page, lambda: _l(page), lambda v: v >= 8, timeout_s=30)
    page.get_by_role("button", name="Pause").click()
    page.get_by_role("button", name="Play").wait_for()
    assert_stays_paused(page, lambda: _l(page))

    # the mask type through its Select: the top half of every digit goes
    select_option(page, "random pixels", "half")
    page.get_by_text("32 of 64 missing").first.wait_for()
    page.wait_for_function("() => window.location.search.includes('mask=half')")

    # the brush: a click on the masked panel toggles a pixel (the mask becomes "brush")
    before = _missing_count(page)
    canvas = page.locator(".bk-Canvas").nth(1)
    box = canvas.bounding_box()
    canvas.click(position={"x": box["width"] / 2, "y": box["height"] * 0.75})
    page.wait_for_function("() => window.location.search.includes('mask=brush')")
    for _ in range(50):
        if _missing_count(page) != before:
            break
        page.wait_for_timeout(100)
    assert _missing_count(page) == before + 1

    # draw: in ink mode a click on the original panel inks a blank canvas, which is then inpainted
    page.get_by_role("button", name="Clear drawing").click()
    page.get_by_text("drawing, 0 inked").first.wait_for()
    page.wait_for_function("() => window.location.search.includes('source=draw')")
    page.get_by_role("button", name="ink", exact=True).click()
    brush_count = _missing_count(page)
    mse = page.get_by_text(re.compile(r"^MSE")).all_inner_texts()
    canvas = page.locator(".bk-Canvas").nth(0)
    box = canvas.bounding_box()
    canvas.click(position={"x": box["width"] / 2, "y": box["height"] * 0.75})
    for _ in range(150):  # the inked pixel enters the errors of the encoders
        if page.get_by_text(re.compile(r"^MSE")).all_inner_texts() != mse:
            break
        page.wait_for_timeout(100)
    assert page.get_by_text(re.compile(r"^MSE")).all_inner_texts() != mse, "the ink click changed nothing"
    assert _missing_count(page) == brush_count  # ink does not change the mask
    page.get_by_text("drawing, 1 inked").first.wait_for()
    # a drag down the canvas inks a stroke (the bottom half is visible: it is inpainted upwards)
    x0, y0 = box["x"] + box["width"] * 0.4, box["y"] + box["height"] * 0.52
    page.mouse.move(x0, y0)
    page.mouse.down()
    for k in range(1, 9):
        page.mouse.move(x0, y0 + k * box["height"] * 0.05)
        page.wait_for_timeout(60)
    page.mouse.up()
    page.get_by_text(re.compile(r"drawing, ([3-9]|\d\d) inked")).first.wait_for(timeout=15000)

    # grid mode: 16 images for one encoder
    page.locator("input[type=checkbox]").nth(1).check()  # "Grid mode (16 images)" after "Paste ... back"
    page.get_by_text("test images 0–15 (wrapping)", exact=False).first.wait_for()
    wait_for_bokeh(page)
    page.wait_for_timeout(400)
    screenshot(page, "inpainting")
    errors.assert_none()
