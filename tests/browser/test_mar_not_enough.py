"""The "MAR is not enough" page (apps/mar_not_enough.py) in headless chromium at 1440x900."""

from __future__ import annotations

from tests.browser._helpers import wait_for_value

APP = "apps/mar_not_enough.py"
VIEWPORT = {"width": 1440, "height": 900}

#: The sweep figure: its title, the legends inside its frame, the x of the dashed current line, the EM points.
SWEEP_JS = r"""() => {
  for (const m of Bokeh.documents[0].all_models) {
    if (m.type !== 'Figure' || !m.title || !/^(Estimates of P\(X1 = 1\)|No estimate)/.test(String(m.title.text))) continue;
    const out = {title: m.title.text, inside: m.center.filter(r => r.type == 'Legend').length, current: [], em: []};
    for (const r of m.renderers) {
      if (!r.glyph) continue;
      const d = r.data_source.data, get = (k) => Array.from((d instanceof Map ? d.get(k) : d[k]) || []);
      if (r.name === 'current β − δ') out.current = get('x');
      if (r.name === 'EM on the full joint (± 1 s.e.)') out.em = get('y');
    }
    return out;
  }
  return null;
}"""


def _sweep(page):
    return page.evaluate(SWEEP_JS)


def _slider_handle(page, label: str):
    """The noUiSlider handle of the slider whose label starts with ``label``."""
    return page.locator(".bk-input-group", has_text=label).locator(".noUi-handle").first


def test_mar_not_enough_page(serve_app, new_page, watch_errors, wait_for_bokeh, screenshot):
    url = serve_app({"mar": APP}, num_threads=None)
    page = new_page(viewport=VIEWPORT)
    page.set_default_timeout(60_000)  # a loaded machine
    errors = watch_errors(page)
    page.goto(f"{url}/mar?n_cases=600&repeats=6")
    wait_for_bokeh(page, timeout=60_000)
    page.locator(".mar-validity", has_text="Valid MAR setting").wait_for()
    page.locator(".bias-sentence", has_text="a bias of -0.0250").wait_for()
    first = wait_for_value(page, lambda: _sweep(page), lambda s: s is not None and len(s["em"]) == 11)  # 10 points and the current beta
    assert first["inside"] == 0, "a legend is drawn over the plot"
    assert abs(first["current"][0] - 0.25) < 1e-9
    assert "6 x 600 cases" in first["title"]
    box = page.locator(".mar-sweep .bk-Canvas").first.bounding_box()
    assert box["width"] >= 400 and box["height"] >= 400, box
    table = page.locator(".response-table")
    assert table.get_by_text("1−α−β−γ").count() == 1
    screenshot(page, "mar_not_enough", full_page=False)

    # beta one step up (keyboard on the slider): the current line moves, the sentence and the URL follow
    handle = _slider_handle(page, "β: P(r = 01 | x2 = 0)")
    handle.focus()
    handle.press("ArrowRight")
    moved = wait_for_value(page, lambda: _sweep(page), lambda s: abs(s["current"][0] - 0.26) < 1e-9)
    assert moved["em"] != first["em"]
    page.locator(".bias-sentence", has_text="β = 0.360").wait_for()
    page.wait_for_function("() => window.location.search.includes('beta=0.36')")

    # alpha to its end: the table is no longer valid; the indicator turns red and names the inequality
    handle = _slider_handle(page, "α: P(r = 00 | x)")
    handle.focus()
    handle.press("End")
    alert = page.locator(".mar-validity", has_text="Not a valid setting")
    alert.wait_for()
    assert alert.get_by_text("α + β + γ", exact=False).count() == 1
    assert page.locator(".mar-validity.alert-danger").count() == 1  # the red alert
    page.locator(".bias-sentence", has_text="No estimate").wait_for()
    wait_for_value(page, lambda: _sweep(page), lambda s: s["title"].startswith("No estimate") and not s["em"])
    # back to a valid value: green again
    handle.press("Home")
    page.locator(".mar-validity", has_text="Valid MAR setting").wait_for()
    errors.assert_none()
