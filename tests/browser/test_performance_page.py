"""The EM performance page in the gallery, in headless chromium at 1440x900: Measure, the timing plot, the tree."""

from __future__ import annotations

import logging
import re

from explorer.ui.state.performance_model import PerformanceModel
from tests.browser.test_gallery import REPO_ROOT

NOISY = ("tornado", "asyncio", "bokeh", "panel", "explorer", "explorer_apps")

# Visible Scatter renderers of the figure titled ``title``: number of points of each.
_SCATTERS = """(title) => {
  const out = [];
  for (const v of Bokeh.index.query((v) => v.model != null && v.model.type === 'Figure')) {
    if (v.model.title == null || v.model.title.text !== title) continue;
    for (const rv of v.renderer_views.values()) {
      const m = rv.model;
      if (m.type !== 'GlyphRenderer' || !m.visible || m.glyph.type !== 'Scatter') continue;
      const d = m.data_source.data, x = d instanceof Map ? d.get('x') : d.x;
      out.push(Array.from(x || []).filter((v) => Number.isFinite(v)).length);
    }
  }
  return out;
}"""

# Page coordinates of tree node ``node`` (its circle's centre, the plot scrolled into view), or null.
_NODE_XY = """(node) => {
  for (const v of Bokeh.index.query((v) => v.model != null && v.model.type === 'Figure')) {
    if (v.model.title == null || !String(v.model.title.text).startsWith('Pattern MST')) continue;
    for (const rv of v.renderer_views.values()) {
      const m = rv.model;
      if (m.type !== 'GlyphRenderer' || m.glyph.type !== 'Scatter') continue;
      const d = m.data_source.data, get = (k) => Array.from((d instanceof Map ? d.get(k) : d[k]) || []);
      const i = get('node').indexOf(node);
      if (i < 0) continue;
      v.el.scrollIntoView({block: 'center'});
      const r = v.el.getBoundingClientRect();
      return {x: r.left + v.frame.x_scale.compute(get('x')[i]), y: r.top + v.frame.y_scale.compute(get('y')[i]),
              n: get('node').length};
    }
  }
  return null;
}"""

# Number of points of the red path (the Segments renderer whose line is the path colour).
_PATH_SEGMENTS = """() => {
  for (const v of Bokeh.index.query((v) => v.model != null && v.model.type === 'Figure')) {
    if (v.model.title == null || !String(v.model.title.text).startsWith('Pattern MST')) continue;
    for (const rv of v.renderer_views.values()) {
      const m = rv.model;
      if (m.type !== 'GlyphRenderer' || m.glyph.type !== 'Segment') continue;
      const lw = m.glyph.line_width, width = lw !== null && typeof lw === 'object' ? lw.value : lw;
      if (width !== 5) continue;
      const d = m.data_source.data, cols = d instanceof Map ? [...d.values()] : Object.values(d);
      return cols.length ? Array.from(cols[0]).length : 0;
    }
  }
  return -1;
}"""


def test_measure_and_tap_a_node_of_the_tree(serve_app, new_page, watch_errors, wait_for_bokeh, screenshot, caplog):
    caplog.set_level(logging.WARNING)
    url = serve_app({"apps": str(REPO_ROOT / "apps" / "main.py")})
    page = new_page(viewport={"width": 1440, "height": 900})
    page.set_default_timeout(60_000)
    errors = watch_errors(page)
    page.goto(f"{url}/apps")
    wait_for_bokeh(page, timeout=60_000)
    page.get_by_role("button", name="Open EM performance", exact=True).click()  # from the gallery's home
    page.wait_for_function("() => window.location.search.includes('page=performance')")
    page.get_by_text("Tap a node of the tree", exact=False).first.wait_for()
    page.get_by_text("36 distinct patterns", exact=False).first.wait_for()  # the tree's summary
    assert page.get_by_text("Page unavailable", exact=False).count() == 0

    # Measure: every strategy gets a point at every x (4 points: 2, 5, 14 and 36 patterns)
    model = PerformanceModel()
    n_series, n_points = len(model.series()), len(model.sweep_values())
    page.get_by_role("button", name="Measure", exact=True).click()
    page.get_by_text(re.compile(r"Done: \d+ measurements")).first.wait_for(timeout=180_000)
    assert page.get_by_text(f"Done: {n_series * n_points} measurements", exact=False).count() >= 1
    for _ in range(100):  # the final frame reaches the browser
        counts = page.evaluate(_SCATTERS, "Measured: time per call")
        if counts == [n_points] * n_series:
            break
        page.wait_for_timeout(200)
    assert counts == [n_points] * n_series, counts
    assert page.evaluate(_SCATTERS, "Theory: flops of the factorisations") == [n_points] * 3  # the kernels' counts
    assert page.get_by_text("Some strategies failed", exact=False).count() == 0
    for label in ("precision-side kernel (observed_gaussian) (ms)", "MST kernel (Delalleau et al.) (ms)",
                  "naive per-pattern kernel (ms)"):
        page.get_by_text(label, exact=True).first.wait_for()

    # the tree: 36 nodes drawn; a tap on one shows its path from the root and draws it in red
    assert page.evaluate(_PATH_SEGMENTS) == 0
    tree, _ = model.tree()
    node = int(tree.order[-1])  # a leaf: its path has edges
    at = page.evaluate(_NODE_XY, node)
    assert at is not None and at["n"] == 36, at
    page.mouse.click(at["x"], at["y"])
    page.get_by_text(f"Node {node}", exact=False).first.wait_for()
    page.get_by_text("Path from the root", exact=False).first.wait_for()
    page.get_by_text("Givens rotations", exact=False).first.wait_for()
    page.wait_for_function(f"() => window.location.search.includes('performance.node={node}')")
    depth = int(tree.depth[node])
    refreshed = depth - depth % model.refresh_every if model.refresh_every else 0
    for _ in range(50):
        if page.evaluate(_PATH_SEGMENTS) == depth:
            break
        page.wait_for_timeout(200)
    assert page.evaluate(_PATH_SEGMENTS) == depth  # every edge from the root is drawn
    if refreshed:
        page.get_by_text("factored from scratch again", exact=False).first.wait_for()
    wait_for_bokeh(page, timeout=60_000)
    screenshot(page, "performance")
    errors.assert_none()
    noisy = [f"{r.name}: {r.getMessage()}" for r in caplog.records if r.name.split(".")[0] in NOISY]
    assert noisy == [], "the server logged:\n" + "\n".join(noisy)
