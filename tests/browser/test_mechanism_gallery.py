"""The "Mechanism gallery" page (apps/mechanism_gallery.py) in headless chromium at 1440x900."""

from __future__ import annotations

from tests.browser._helpers import select_option, wait_for_value

APP = "apps/mechanism_gallery.py"
VIEWPORT = {"width": 1440, "height": 900}

#: Titles of the figures and the number of legends drawn inside each frame.
FIGURES_JS = """() => [...Bokeh.documents[0].all_models].filter(m => m.type === 'Figure').map(m => ({
  title: m.title ? String(m.title.text) : '', inside: m.center.filter(r => r.type == 'Legend').length}))"""


def _titles(page) -> list[str]:
    return sorted(f["title"] for f in page.evaluate(FIGURES_JS))


def test_mechanism_gallery_page(serve_app, new_page, watch_errors, wait_for_bokeh, screenshot):
    url = serve_app({"gallery": APP}, num_threads=None)
    page = new_page(viewport=VIEWPORT)
    page.set_default_timeout(60_000)  # a loaded machine
    errors = watch_errors(page)
    page.goto(f"{url}/gallery?n_users=200&n_items=30")
    wait_for_bokeh(page, timeout=60_000)
    page.locator(".gallery-sentence", has_text="Under CPT-v").wait_for()
    titles = wait_for_value(page, lambda: _titles(page), lambda t: len(t) == 4)
    assert any(t.startswith("Observed vs true marginal · symmetrised KL") for t in titles), titles
    assert all(f["inside"] == 0 for f in page.evaluate(FIGURES_JS)), "a legend is drawn over a plot"
    for css in ("bars", "heat", "mask", "marginals"):
        box = page.locator(f".gallery-{css} .bk-Canvas").first.bounding_box()
        assert box["width"] >= 400 and box["height"] >= 300, (css, box)
    screenshot(page, "mechanism_gallery", full_page=False)

    # the linear value effect at s = 0 is MCAR: said in the sentence, the SKL near zero
    select_option(page, "Linear value effect μ_v(s)")
    page.locator(".gallery-sentence", has_text="Under the linear value effect").wait_for()
    handle = page.locator(".bk-input-group", has_text="s (0 = MCAR)").locator(".noUi-handle").first
    handle.focus()
    handle.press("Home")
    page.locator(".gallery-sentence", has_text="(MCAR)").wait_for()
    page.wait_for_function("() => window.location.search.includes('s=0')")

    # Logit-vd: the heat map of P(r = 1 | value, item); then the MAR table with an invalid alpha
    select_option(page, "Logit-vd (value and item effects)")
    page.locator(".gallery-sentence", has_text="Under Logit-vd").wait_for()
    select_option(page, "Table 3.1 MAR (2 binary variables)")
    page.locator(".gallery-sentence", has_text="Among the cases with x1 observed").wait_for()
    wait_for_value(page, lambda: _titles(page),
                   lambda t: any(x.startswith("Observed vs true marginal per variable") for x in t))
    handle = page.locator(".bk-input-group", has_text="α").locator(".noUi-handle").first
    handle.focus()
    handle.press("End")
    page.locator(".gallery-alert", has_text="α + β + γ").wait_for()
    handle.press("Home")
    page.locator(".gallery-alert").first.wait_for(state="hidden")
    errors.assert_none()
