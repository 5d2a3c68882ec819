"""The Neumann-convergence page served from apps/neumann.py, driven in headless chromium."""

from __future__ import annotations

import re

from tests.browser._helpers import select_option, wait_for_value

APP = "apps/neumann.py"


def _l(page) -> int:
    text = page.get_by_text(re.compile(r"NSA MSE [\d.]+ at l = \d+")).first.inner_text()
    return int(re.search(r"at l = (\d+)", text).group(1))




# The error plot as BokehJS has it: its y range, the MSE values of every line shown (NSA, oracle, reference levels:
# the y column of every visible line renderer) and the labels of the legend entries shown.
_ERROR_PLOT = """() => {
    const fig = [...Bokeh.documents[0].all_models].find(
        (m) => m.title != null && typeof m.title.text === "string" && m.title.text.startsWith("Error on the missing"));
    const values = [];
    for (const r of fig.renderers) {
        const y = r.glyph != null && r.glyph.y != null ? r.glyph.y.field : undefined;
        const mse = y !== undefined ? r.data_source.data[y] : undefined;
        if (mse !== undefined && r.visible) values.push(...Array.from(mse).filter((v) => Number.isFinite(v)));
    }
    const labels = [];
    for (const legend of [...fig.center, ...fig.left, ...fig.right, ...fig.above, ...fig.below]) {
        if (legend.items === undefined) continue;
        for (const item of legend.items) {
            if (item.visible === false) continue;
            labels.push(typeof item.label === "string" ? item.label : item.label.value);
        }
    }
    return {start: fig.y_range.start, end: fig.y_range.end, min: Math.min(...values), max: Math.max(...values),
            n: values.length, labels};
}"""






def test_step_play_pause_window_and_mask(
    serve_app, new_page, watch_errors, wait_for_bokeh, screenshot, assert_stays_paused,
):
    url = serve_app({"neumann": APP})
    page = new_page(viewport={"width": 1500, "height": 1150})
    errors = watch_errors(page)
    console = errors.console
    page.goto(f"{url}/neumann")
    wait_for_bokeh(page)
    page.get_by_text("NSA never beats the exact solution", exact=False).first.wait_for()  # l = 0: nothing yet
    assert page.locator(".bk-Canvas").count() >= 3
    assert _l(page) == 0
    plot = page.evaluate(_ERROR_PLOT)
    assert "NSA(l)" in plot["labels"]
    assert not any("oracle" in label for label in plot["labels"]), plot["labels"]  # PPCA (K = 1): no oracle

    page.get_by_role("button", name="Step").click()
    wait_for_value(page, lambda: _l(page), lambda v: v == 1)
    page.mouse.move(900, 900)  # the Step button's tooltip would cover Play
    page.get_by_role("button", name="Play").click()
    wait_for_value(page, lambda: _l(page), lambda v: v >= 15, timeout_s=30)
    page.get_by_role("button", name="Pause").click()
    page.get_by_role("button", name="Play").wait_for()
    paused_at = assert_stays_paused(page, lambda: _l(page))
    # on quarters of the 8x8 digits early-stopped NSA is better than the exact solution
    page.get_by_text("NSA beats the exact solution", exact=False).first.wait_for()
    wait_for_bokeh(page)
    # the y range followed the curve: its minimum (the best l of the banner) is inside the frame
    banner = page.get_by_text(re.compile(r"best l = \d+ with MSE [\d.]+")).first.inner_text()
    best = float(re.search(r"best l = \d+ with MSE (\d+\.\d+)", banner).group(1))
    plot = page.evaluate(_ERROR_PLOT)
    assert plot["n"] > paused_at, plot  # the NSA curve has every visited l
    assert plot["start"] <= plot["min"] <= best + 1e-4 and plot["max"] <= plot["end"], plot
    assert not [m for m in console if "nonexistent field" in m], console

    select_option(page, "random pixels", "half")
    page.get_by_text("mask half", exact=False).first.wait_for()
    page.wait_for_function("() => window.location.search.includes('mask=half')")
    assert _l(page) == paused_at  # l is kept when the mask changes
    wait_for_bokeh(page)
    page.wait_for_timeout(400)
    screenshot(page, "neumann")
    plot = page.evaluate(_ERROR_PLOT)
    assert plot["start"] <= plot["min"] and plot["max"] <= plot["end"], plot  # and after the mask changed
    errors.assert_none()
