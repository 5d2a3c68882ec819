"""The served benchmark page (apps/benchmark.py) in headless chromium: Run, progress, result plots."""

from __future__ import annotations

# the number of result bars (Rectangles glyphs' data) in the Bokeh document, summed over the panels
N_BARS = """() => [...Bokeh.documents[0].all_models]
    .filter(m => m.type == 'ColumnDataSource' && m.data && m.data.x1 !== undefined && m.data.n_failed !== undefined)
    .reduce((n, m) => n + m.data.method.length, 0)"""
PROGRESS = """() => { const p = [...Bokeh.documents[0].all_models].find(m => m.type.endsWith('.Progress'));
    return p ? [p.value ?? 0, p.max] : null }"""


def test_benchmark_page_run(serve_app, new_page, watch_errors, wait_for_bokeh, screenshot):
    # the cheapest run: one method pair, quick settings, two rates (4 jobs of well under a second each)
    url = serve_app({"benchmark": "apps/benchmark.py"})
    page = new_page(viewport={"width": 1280, "height": 1000})
    errors = watch_errors(page)
    page.goto(f"{url}/benchmark?methods=%5B%22mean%22%2C%20%22poigmm%22%5D")
    wait_for_bokeh(page)
    page.get_by_text("Not run yet.").wait_for()
    assert page.evaluate(N_BARS) == 0  # only the reference marks before a run

    # a mechanism chosen through its Select, then back (the URL keeps the settings)
    box = page.locator("select", has=page.locator("option", has_text="MAR_rows (Fig. A.3)"))
    box.select_option(label="MAR_rows (Fig. A.3) · mar_rows")
    page.get_by_text("MAR_rows (thesis Fig. A.3)").first.wait_for()
    box.select_option(label="MCAR_total (Fig. A.4) · mcar")
    page.get_by_text("MCAR_total (thesis Fig. A.4)").first.wait_for()

    page.get_by_role("button", name="Run", exact=True).click()
    page.get_by_text("running:").first.wait_for()
    page.wait_for_function(f"() => ({PROGRESS})() && ({PROGRESS})()[1] == 4")
    page.get_by_text("done: 4/4 jobs").wait_for(timeout=40_000)
    assert page.evaluate(PROGRESS) == [4, 4]
    # bars: mean and poigmm at two rates in the NRMSE, NLL, PFC and coverage rows
    page.wait_for_function(f"() => ({N_BARS})() == 16")
    assert page.get_by_role("button", name="Cancel").is_disabled()
    assert page.get_by_role("button", name="Run", exact=True).is_enabled()
    page.locator(".tabulator-cell", has_text="poigmm").first.wait_for()  # the summary table
    page.mouse.move(700, 5)  # no button tooltip in the screenshot
    wait_for_bokeh(page)
    screenshot(page, "benchmark")
    errors.assert_none()
