"""What a student sees on every page of the gallery, at 1440x900 and at 1024x768 (issue 9, "Pictures").

One test serves the gallery (apps/main.py) once and opens every page in turn at 1440x900 (a fresh
session per page, so each starts with its defaults), then narrows the same window to 1024x768. At each size it
waits for the render, saves a screenshot
``test-results/screenshots/<page>-<w>x<h>.png`` and reads Bokeh's layout from BokehJS: for every
Figure view on screen, its size, its legends' boxes and the screen positions of its glyphs (the glyph
views' own screen coordinates: points, bar rectangles, line vertices and segments, clipped to the frame).
It checks:

* no legend box covers a data point, a bar or a line of its figure;
* no plot is narrower than 400 px, except image thumbnails (see :func:`is_thumbnail`);
* no plot, table or form control reaches past the right edge of the window (the page needs no sideways scroll);
* Step / Play / Reset, on the pages that have them, are inside the 1440x900 viewport without scrolling
  (the page freshly opened, nothing scrolled: their boxes lie within the window).

All problems of all pages are gathered and reported together.
"""

from __future__ import annotations

from tests.browser.test_gallery import REPO_ROOT

#: (screenshot name, query): every page of the gallery with its defaults, and the data page on wine (13 columns:
#: its per-column missing-rate chart must stay readable).
PAGES = [(slug, f"page={slug}") for slug in ("em_playground", "conditional", "data_mechanism", "variational",
                                             "benchmark", "inpainting", "neumann", "responsibilities",
                                             "performance", "decision_surface", "regression",
                                             "mar_not_enough", "mechanism_gallery", "ratings", "sensitivity")]
PAGES.append(("data_mechanism-wine", "page=data_mechanism&data_mechanism.dataset=wine"))
VIEWPORTS = [(1440, 900), (1024, 768)]
MIN_PLOT_WIDTH = 400
#: The run controls: on every page that has a Step button, all three must show without scrolling at 1440x900.
RUN_BUTTONS = ("Step", "Play", "Reset")
#: The Play toggle reads "Pause" while a run plays (the Regression page plays every new fit by itself).
BUTTON_NAMES = {"Play": ("Play", "Pause")}
#: A marginal strip beside or below a main panel (the Decision surfaces page's rows missing x): a 1-D display
#: whose long side follows the main panel; its short side is exempt from the width rule.
STRIP_SHORT_MAX, STRIP_LONG_MIN = 200, 400
#: A legend's border and padding may touch a glyph drawn on the frame's very edge: pixels ignored at its rim.
LEGEND_RIM = 2

# Every Figure view on screen: its box, frame, legends and glyph geometry in canvas pixels.
LAYOUT_JS = """() => {
  const figs = [];
  const shown = (el) => el != null && el.isConnected && el.getClientRects().length > 0;
  const num = (v) => typeof v === 'number' && Number.isFinite(v);
  for (const view of Bokeh.index.query((v) => v.model != null && v.model.type === 'Figure')) {
    if (!shown(view.el)) continue;
    const bb = view.bbox, fr = view.frame.bbox;
    const rect = view.el.getBoundingClientRect();
    const title = view.model.title != null && typeof view.model.title.text === 'string' ? view.model.title.text : '';
    const legends = [], points = [], boxes = [], segments = [], glyph_types = [];
    const clip = (x, y) => x >= fr.left && x <= fr.right && y >= fr.top && y <= fr.bottom;
    for (const rv of view.renderer_views.values()) {
      const m = rv.model;
      if (!m.visible) continue;
      if (m.type === 'Legend') {
        const lb = rv.bbox;
        if (lb != null && lb.width > 0 && lb.height > 0 && m.items.length > 0)
          legends.push({left: lb.left, top: lb.top, right: lb.right, bottom: lb.bottom});
        continue;
      }
      if (m.type !== 'GlyphRenderer' || rv.glyph == null) continue;
      const g = rv.glyph, type = m.glyph.type;
      glyph_types.push(type);
      if (type === 'Image' || type === 'ImageRGBA' || type === 'ImageStack') continue;
      if (g.sleft != null && g.sright != null && g.stop != null && g.sbottom != null) {  // bars, quads
        for (let i = 0; i < g.sleft.length; i++) {
          const b = {left: Math.min(g.sleft[i], g.sright[i]), right: Math.max(g.sleft[i], g.sright[i]),
                     top: Math.min(g.stop[i], g.sbottom[i]), bottom: Math.max(g.stop[i], g.sbottom[i])};
          if (![b.left, b.right, b.top, b.bottom].every(num)) continue;
          b.left = Math.max(b.left, fr.left); b.right = Math.min(b.right, fr.right);
          b.top = Math.max(b.top, fr.top); b.bottom = Math.min(b.bottom, fr.bottom);
          if (b.right > b.left && b.bottom > b.top) boxes.push({...b, type, i});
        }
        continue;
      }
      if (g.sx != null && g.sy != null && g.sx.length === g.sy.length) {
        const sx = Array.from(g.sx), sy = Array.from(g.sy);
        const line = type === 'Line' || type === 'Step';
        for (let i = 0; i < sx.length; i++) {
          if (num(sx[i]) && num(sy[i]) && clip(sx[i], sy[i])) points.push([sx[i], sy[i], type, i]);
          if (line && i > 0 && [sx[i - 1], sy[i - 1], sx[i], sy[i]].every(num))
            segments.push([sx[i - 1], sy[i - 1], sx[i], sy[i], type]);
        }
      }
      if (g.sx0 != null && g.sy0 != null && g.sx1 != null && g.sy1 != null) {  // Segment
        for (let i = 0; i < g.sx0.length; i++)
          if ([g.sx0[i], g.sy0[i], g.sx1[i], g.sy1[i]].every(num))
            segments.push([g.sx0[i], g.sy0[i], g.sx1[i], g.sy1[i], type]);
      }
    }
    figs.push({id: view.model.id, title, width: bb.width, height: bb.height,
               page_left: rect.left + window.scrollX, page_top: rect.top + window.scrollY,
               frame: {left: fr.left, top: fr.top, right: fr.right, bottom: fr.bottom},
               legends, points, boxes, segments, glyph_types});
  }
  return figs;
}"""


# What must stop changing before a page is read: every figure's box and frame, and the length of every data column.
GEOMETRY_JS = """() => JSON.stringify([...Bokeh.index.query((v) => v.model != null && v.model.type === 'Figure')]
  .map((f) => [f.bbox.left, f.bbox.top, f.bbox.width, f.bbox.height, f.frame.bbox.width, f.frame.bbox.height,
               f.model.renderers.map((r) => r.data_source == null ? 0 : Object.values(
                 r.data_source.data instanceof Map ? Object.fromEntries(r.data_source.data) : r.data_source.data)
                 .map((c) => c == null || c.length == null ? 0 : c.length).join(','))]))"""


def _inside(x: float, y: float, r: dict, pad: float = 0.0) -> bool:
    return r["left"] - pad <= x <= r["right"] + pad and r["top"] - pad <= y <= r["bottom"] + pad


def _overlaps(box: dict, r: dict) -> bool:
    return box["left"] < r["right"] and r["left"] < box["right"] and box["top"] < r["bottom"] and r["top"] < box["bottom"]


def _clip(r: dict, frame: dict) -> dict:
    return {"left": max(r["left"], frame["left"]), "right": min(r["right"], frame["right"]),
            "top": max(r["top"], frame["top"]), "bottom": min(r["bottom"], frame["bottom"])}


def legend_overlaps(fig: dict) -> list[str]:
    """What of ``fig``'s glyphs lies under one of its legends (points, bars, line segments sampled)."""
    problems = []
    for legend in fig["legends"]:
        inner = {k: legend[k] + (LEGEND_RIM if k in ("left", "top") else -LEGEND_RIM) for k in legend}
        hit = _clip(inner, fig["frame"])
        if hit["right"] <= hit["left"] or hit["bottom"] <= hit["top"]:
            continue  # a legend outside the frame covers nothing
        under = [f"{t}[{i}] at ({x:.0f}, {y:.0f})" for x, y, t, i in fig["points"] if _inside(x, y, hit)]
        under += [f"{b['type']}[{b['i']}] bar" for b in fig["boxes"] if _overlaps(b, hit)]
        for x0, y0, x1, y1, t in fig["segments"]:
            for k in range(11):
                x, y = x0 + (x1 - x0) * k / 10, y0 + (y1 - y0) * k / 10
                if _inside(x, y, hit) and _inside(x, y, fig["frame"]):
                    under.append(f"{t} segment through ({x:.0f}, {y:.0f})")
                    break
        if under:
            problems.append(f"legend at {[round(legend[k]) for k in ('left', 'top', 'right', 'bottom')]} covers "
                            f"{len(under)} glyph(s): {', '.join(under[:5])}")
    return problems


def is_thumbnail(fig: dict) -> bool:
    """A figure drawing only images, with no legend: exempt from the width rule.

    These are small pictures whose purpose is to be compared side by side, at a size that keeps a row of them
    on one line: the inpainting page's 8x8 digits (original, masked, MI, FCA, SCA, exact, NSA(l): 118 px each,
    seven in a row), its per-component reconstructions and the grid mode's masked / imputed mosaics; the
    responsibilities page's original, masked and component means; the data page's true / masked images.
    Stretching them to 400 px would break those rows without showing more (an 8x8 image has 64 pixels).
    """
    return bool(fig["glyph_types"]) and not fig["legends"] and all(
        t in ("Image", "ImageRGBA", "ImageStack") for t in fig["glyph_types"])


def is_strip(fig: dict) -> bool:
    """A marginal strip (see ``STRIP_SHORT_MAX``): at most 200 px wide and at least 400 px tall."""
    return fig["width"] <= STRIP_SHORT_MAX and fig["height"] >= STRIP_LONG_MIN


def _open_page(page, url: str, query: str, wait_for_bokeh) -> None:
    slug = query.split("&")[0].removeprefix("page=")
    page.goto(f"{url}/main?{query}", timeout=60_000)  # like the waits below: a busy machine serves slowly
    wait_for_bokeh(page, timeout=60_000)
    page.locator(f".page-main-{slug}").first.wait_for(timeout=60_000)
    page.locator(".bk-Canvas").first.wait_for(timeout=60_000)
    assert page.get_by_text("Page unavailable", exact=False).count() == 0, f"{slug}: page unavailable"
    _settle(page, wait_for_bokeh)


def _settle(page, wait_for_bokeh) -> None:
    """The figures drawn (every figure view on screen has a frame) and the document idle for a moment."""
    page.wait_for_function(
        """() => { const v = [...Bokeh.index.query((v) => v.model != null && v.model.type === 'Figure')]
                     .filter((f) => f.el.isConnected && f.el.getClientRects().length > 0);
                   return v.length > 0 && v.every((f) => f.frame != null && f.frame.bbox.width > 0); }""",
        timeout=60_000)
    wait_for_bokeh(page, timeout=60_000)
    # then until the figures' geometry and data lengths have not changed for half a second (a page's first
    # fit can land a moment after its figures are drawn; a fixed 1.2 s wait cost 40 s over the 32 checks)
    last, quiet = None, 0
    for _ in range(60):
        now = page.evaluate(GEOMETRY_JS)
        quiet = quiet + 1 if now == last else 0
        if quiet >= 2:
            break
        last = now
        page.wait_for_timeout(250)
    wait_for_bokeh(page, timeout=60_000)


#: What ends right of the window: plots' canvases, tables and form controls (in shadow roots too), with their right
#: edges and widths.
PAST_RIGHT_EDGE_JS = """() => {
  const out = [];
  const walk = (root) => {
    for (const el of root.querySelectorAll('*')) {
      if (el.shadowRoot) walk(el.shadowRoot);
      const kind = el.classList.contains('bk-Canvas') ? 'plot' : ['TABLE', 'SELECT', 'INPUT', 'BUTTON'].includes(
        el.tagName) ? el.tagName.toLowerCase() : null;
      if (!kind) continue;
      const b = el.getBoundingClientRect();
      if (b.width > 0 && b.height > 0 && b.right > window.innerWidth + 1)
        out.push([kind, (el.textContent || el.getAttribute('name') || '').trim().slice(0, 40), Math.round(b.right),
                  Math.round(b.width)]);
    }
  };
  walk(document);
  return out;
}"""


def check_page(page, slug: str, width: int, height: int) -> list[str]:
    """The problems of the open page ``slug`` (empty when it looks right)."""
    problems = []
    for kind, text, right, w in page.evaluate(PAST_RIGHT_EDGE_JS):
        problems.append(f"a {kind} ({w} px wide{', ' + repr(text) if text else ''}) ends at {right} px, past the "
                        f"{width} px window")
    figs = page.evaluate(LAYOUT_JS)
    if not figs:
        problems.append("no figure on screen")
    for fig in figs:
        name = f"figure {fig['title']!r}" if fig["title"] else f"untitled figure ({', '.join(sorted(set(fig['glyph_types'])))})"
        for p in legend_overlaps(fig):
            problems.append(f"{name}: {p}")
        if fig["width"] < MIN_PLOT_WIDTH and not is_thumbnail(fig) and not is_strip(fig):
            problems.append(f"{name}: {fig['width']:.0f} px wide (< {MIN_PLOT_WIDTH})")
    has_player = page.get_by_role("button", name="Step", exact=True).count() > 0
    if has_player and (width, height) == (1440, 900):
        page.evaluate("window.scrollTo(0, 0)")
        for label in RUN_BUTTONS:
            names = BUTTON_NAMES.get(label, (label,))
            button = page.get_by_role("button", name=names[0], exact=True)
            for other in names[1:]:
                button = button.or_(page.get_by_role("button", name=other, exact=True))
            if button.count() == 0:
                problems.append(f"no {label} button")
                continue
            box = button.first.bounding_box()
            if box is None or not (0 <= box["x"] and box["x"] + box["width"] <= width
                                   and 0 <= box["y"] and box["y"] + box["height"] <= height):
                problems.append(f"{label} button not within the {width}x{height} viewport without scrolling: {box}")
    return [f"{slug} at {width}x{height}: {p}" for p in problems]


def test_every_page_reads_well(serve_app, new_page, watch_errors, wait_for_bokeh, screenshot):
    """Every page opened at 1440x900 and checked, then the same window narrowed to 1024x768 and checked again
    (a laptop user who shrinks the window: the responsive plots relayout without a reload)."""
    url = serve_app({"main": str(REPO_ROOT / "apps" / "main.py")})
    problems = []
    (width, height), *smaller = VIEWPORTS
    for name, query in PAGES:
        page = new_page(viewport={"width": width, "height": height})
        errors = watch_errors(page)
        _open_page(page, url, query, wait_for_bokeh)
        problems += check_page(page, name, width, height)
        screenshot(page, f"{name}-{width}x{height}")
        for w, h in smaller:
            page.set_viewport_size({"width": w, "height": h})
            _settle(page, wait_for_bokeh)
            problems += check_page(page, name, w, h)
            screenshot(page, f"{name}-{w}x{h}")
        problems += [f"{name}: {e}" for e in errors]
        page.context.close()
    print("\n".join(problems))  # all of them (pytest shortens the assertion's message)
    assert not problems, "\n".join(problems)
