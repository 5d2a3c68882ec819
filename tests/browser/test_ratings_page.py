"""The "Ratings" page (apps/ratings.py) in headless chromium: load, Step, Play/Pause, model changes (a MAR
mixture, a conditional RBM stepped by CD), the comparison."""

from __future__ import annotations

import re

from tests.browser._helpers import wait_for_value

APP = "apps/ratings.py"
VIEWPORT = {"width": 1440, "height": 900}

#: Every figure's title, its frame width, the legends drawn inside its frame, and the number of
#: rectangles drawn per legend label (the selection-model bars: rows of one source with a ``series``
#: column; a bar that is not drawn has a NaN top).
FIGURES_JS = """() => {
  const out = [];
  for (const m of Bokeh.documents[0].all_models) {
    if (m.type !== 'Figure') continue;
    const bars = {};
    for (const r of m.renderers) {
      if (!r.glyph || r.glyph.type !== 'Quad') continue;
      const d = r.data_source.data, col = (k) => (d instanceof Map ? d.get(k) : d[k]) || [];
      const top = col('top'), series = col('series');
      for (let i = 0; i < top.length; i++) {
        if (Number.isFinite(top[i])) bars[series[i]] = (bars[series[i]] || 0) + 1;
      }
    }
    out.push({title: m.title ? m.title.text : '', inside: m.center.filter(r => r.type == 'Legend').length, bars});
  }
  return out;
}"""


def _figures(page) -> list:
    return page.evaluate(FIGURES_JS)


def _trace_title(page) -> str:
    return next((f["title"] for f in _figures(page) if re.search(r"EM iteration|Gibbs sweep|CD update", f["title"])), "")


def _iter(page) -> int:
    m = re.search(r"(?:EM iteration|Gibbs sweep|CD update) (\d+)", _trace_title(page))
    return int(m.group(1)) if m else -1


def _selection(page) -> dict:
    return next((f for f in _figures(page) if f["title"].startswith("Selection model")), {})


def test_ratings_page(serve_app, new_page, watch_errors, wait_for_bokeh, screenshot, assert_stays_paused):
    url = serve_app({"ratings": APP})
    page = new_page(viewport=VIEWPORT)
    errors = watch_errors(page)
    page.goto(f"{url}/ratings?n_users=150&n_items=12&repeats=2&compare_ks=%5B1%5D", timeout=60_000)  # one K: 8 models x 5 s x 2 worlds
    wait_for_bokeh(page)

    # the start screen: MM/CPT-v plays to convergence by itself
    wait_for_value(page, lambda: _trace_title(page), lambda t: t.endswith("converged"), timeout_s=60)
    figures = _figures(page)
    assert len(figures) == 3 and all(f["inside"] == 0 for f in figures), figures
    for pane in ("selection", "trace", "predictive"):
        box = page.locator(f".ratings-{pane} .bk-Canvas").first.bounding_box()
        assert box["width"] >= 400 and box["height"] >= 250, (pane, box)
    assert _selection(page)["title"].endswith("MM/CPT-v")
    assert page.locator(".predictive-note", has_text="had the user selected it").is_visible()
    screenshot(page, "ratings", full_page=False)

    # Reset, Step, Play, Pause
    page.get_by_role("button", name="Reset").click()
    wait_for_value(page, lambda: _iter(page), lambda i: i == 0)
    page.get_by_role("button", name="Step", exact=True).click()
    # (the step queues behind the session worker's jobs: under the CI's load, with the library tests beside, 15 s
    # were once not enough; a lost click still fails)
    wait_for_value(page, lambda: _iter(page), lambda i: i == 1, timeout_s=60)
    page.mouse.move(5, 5)  # the Step button's tooltip would cover Play
    page.get_by_role("button", name="Play").click()
    wait_for_value(page, lambda: _iter(page), lambda i: i > 1)
    page.get_by_role("button", name="Pause").click()
    page.get_by_role("button", name="Play").wait_for()
    paused = assert_stays_paused(page, lambda: _iter(page))
    assert paused > 1

    # another model: the selection-model plot follows (a MAR model has no learned mu: no red bars)
    before = _selection(page)["bars"]
    assert sum(before.values()) >= 13  # 5 true + 5 learned + the finite moment estimates
    page.locator("select").filter(has=page.locator("option", has_text="MAR MM")).first.select_option(label="MAR MM")
    wait_for_value(page, lambda: _selection(page)["title"], lambda t: t.endswith("· MAR MM"))
    wait_for_value(page, lambda: sum(_selection(page)["bars"].values()), lambda n: n < sum(before.values()))
    page.wait_for_function("() => window.location.search.includes('model=mar_mm')")
    page.locator(".predictive-note", has_text="a MAR model ignores r").wait_for()

    # a conditional RBM (P(x | r), section 5.7): no learned mu, stepped by contrastive divergence, and its
    # prediction for an unselected item changes had it been selected
    page.locator("select").filter(has=page.locator("option", has_text="cRBM/E-v")).first.select_option(label="cRBM/E-v")
    wait_for_value(page, lambda: _selection(page)["title"], lambda t: t.endswith("· cRBM/E-v"))
    page.wait_for_function("() => window.location.search.includes('model=crbm_ev')")
    page.get_by_text("models P(x | r), not P(r | x)").wait_for()
    wait_for_value(page, lambda: _trace_title(page), lambda t: "CD update" in t and "max_iter" in t, timeout_s=60)
    page.locator(".predictive-note", has_text="reads the choice itself").wait_for()

    # the comparison fills in, in the background
    page.get_by_role("button", name="Compare models").click()
    page.locator(".compare-table", has_text="MM/CPT-v").wait_for(timeout=60_000)
    table = page.locator(".compare-table").locator("table").inner_text()
    assert "MAR MM" in table and "s=.25" in table and "±" in table
    page.locator(".compare-note", has_text="over 2 worlds").wait_for()
    page.get_by_role("button", name="user-selected items").click()
    wait_for_value(page, lambda: page.locator(".compare-table").locator("table").inner_text(), lambda t: t != table)
    errors.assert_none()
