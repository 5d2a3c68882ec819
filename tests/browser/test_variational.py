"""The variational DP-mixture page served from apps/variational.py, driven in headless chromium."""

from __future__ import annotations

import re

from tests.browser._helpers import select_option, wait_for_value

APP = "apps/variational.py"

# The ellipses of each scatter panel as the browser traces them from the centres and axes it was sent: for every
# row, the path's length, whether it is finite, and its mean (60 points, the last one closing the path on the first)
# against the row's centre.
ELLIPSES_TRACED_JS = """() => {
  const out = [];
  for (const m of Bokeh.documents[0].all_models) {
    if (m.type !== 'Figure' || (m.title && m.title.text)) continue;
    for (const r of m.renderers) {
      if (!r.glyph || r.glyph.type !== 'MultiLine') continue;
      const src = r.data_source;
      const xs = r.glyph.xs.expr.v_compute(src), ys = r.glyph.ys.expr.v_compute(src);
      const cx = Array.from(src.get_column('cx')), cy = Array.from(src.get_column('cy'));
      const mean = (a) => Array.from(a).slice(0, -1).reduce((s, v) => s + v, 0) / (a.length - 1);
      out.push(cx.map((c, i) => ({n: xs[i].length, finite: [...xs[i], ...ys[i]].every(Number.isFinite),
                                  dx: Math.abs(mean(xs[i]) - c), dy: Math.abs(mean(ys[i]) - cy[i])})));
    }
  }
  return out;
}"""


def _assert_ellipses_traced(page) -> None:
    panels = page.evaluate(ELLIPSES_TRACED_JS)
    assert len(panels) == 2 and all(panels), panels  # both panels draw ellipses
    for rows in panels:
        assert all(r["n"] == 60 and r["finite"] and r["dx"] < 1e-9 and r["dy"] < 1e-9 for r in rows), rows


def _iteration(page, run: str = "A") -> int:
    text = page.get_by_text(re.compile(rf"^{run}: \w+ update · iteration \d+")).first.inner_text()
    return int(re.search(r"iteration (\d+)", text).group(1))


def _wait_iteration(page, predicate, run: str = "A", timeout_s: float = 15.0) -> int:
    return wait_for_value(page, lambda: _iteration(page, run), predicate, timeout_s)


def test_step_play_pause_update_and_dataset(
    serve_app, new_page, watch_errors, wait_for_bokeh, screenshot, panels_showing_their_data, assert_stays_paused,
):
    url = serve_app({"variational": APP})
    page = new_page(viewport={"width": 1400, "height": 1300})
    page_errors = watch_errors(page)
    page.goto(f"{url}/variational")
    wait_for_bokeh(page)
    page.get_by_text("B: thesis update · iteration 0", exact=False).wait_for()
    assert page.locator(".bk-Canvas").count() >= 5  # two panels, weights and two traces

    page.get_by_role("button", name="Step").click()
    _wait_iteration(page, lambda i: i == 1, "A")
    _wait_iteration(page, lambda i: i == 1, "B")

    page.get_by_role("button", name="Play").click()
    _wait_iteration(page, lambda i: i >= 12, timeout_s=30)
    page.get_by_role("button", name="Pause").click()
    page.get_by_role("button", name="Play").wait_for()
    assert_stays_paused(page, lambda: _iteration(page))  # a tick already running may land, later under load
    page.get_by_text("effective", exact=False).first.wait_for()
    wait_for_bokeh(page)
    page.wait_for_timeout(300)
    screenshot(page, "variational")
    _assert_ellipses_traced(page)  # the browser traces the ellipses from their centres and axes

    # model A switches to the thesis update: both runs restart, B takes the principled one
    select_option(page, "augmented", "corrected")  # the responsibilities select is there
    select_option(page, "principled", "thesis")
    page.get_by_text("A: thesis update · iteration 0", exact=False).wait_for()
    page.get_by_text("B: principled update · iteration 0", exact=False).wait_for()
    page.wait_for_function("() => window.location.search.includes('update=thesis')")

    # a 4-D data set through the data controls: shown on a pair of columns, inside the axes
    before = panels_showing_their_data(page, 2)
    select_option(page, "three_blobs", "iris")
    page.get_by_text("Shown: sepal_length vs sepal_width", exact=False).wait_for()
    after = panels_showing_their_data(page, 2, previous=before)
    _wait_iteration(page, lambda i: i == 0)
    page.get_by_role("button", name="Step").click()
    _wait_iteration(page, lambda i: i == 1)
    select_option(page, "petal_width", "petal_length")  # the x-axis select (first one offering petal_width)
    page.get_by_text("Shown: petal_length vs sepal_width", exact=False).wait_for()
    after = panels_showing_their_data(page, 2, previous=after)
    # the y axis set to the x column swaps the pair (x = y would show nothing)
    page.locator("select").filter(has=page.locator("option", has_text="petal_width")).nth(1).select_option(
        label="petal_length")
    page.get_by_text("Shown: sepal_width vs petal_length", exact=False).wait_for()
    select_option(page, "iris", "wine")  # review item 3: wine was entirely off-screen
    page.get_by_text("Shown: alcohol vs malic_acid", exact=False).wait_for()
    panels_showing_their_data(page, 2, previous=after)
    # the folded prior card makes its widgets when opened
    assert page.get_by_text("Wishart scale W0").count() == 0
    page.get_by_text("Prior and initialisation", exact=True).click()
    page.get_by_text("Wishart scale W0").wait_for()
    wait_for_bokeh(page)
    page_errors.assert_none()


def test_rewind_slider_goes_back_to_any_iteration_including_0(serve_app, new_page, watch_errors,
                                                              wait_for_bokeh):
    """Review item 4: after 6 steps, moving the rewind slider to 0 did nothing."""
    url = serve_app({"variational": APP})
    page = new_page(viewport={"width": 1400, "height": 1100})
    page_errors = watch_errors(page)
    page.goto(f"{url}/variational")
    wait_for_bokeh(page)
    page.get_by_text("B: thesis update · iteration 0", exact=False).wait_for()
    handle = page.locator(".bk-input-group", has_text="Rewind to iteration").locator(".noUi-handle").first
    # to 0 (the slider's value at creation), to 3, then to 3 again (the previous release value)
    for top, keys, target in ((6, ["Home"], 0), (4, ["ArrowLeft"], 3), (5, ["ArrowLeft", "ArrowLeft"], 3)):
        while _iteration(page) < top:
            it = _iteration(page)
            page.get_by_role("button", name="Step").click()
            _wait_iteration(page, lambda i, it=it: i == it + 1)
        _wait_iteration(page, lambda i, top=top: i == top, "B")
        page.get_by_text(f"Rewind to iteration: {top}", exact=False).wait_for()
        wait_for_bokeh(page)
        handle.focus()
        for key in keys:
            page.keyboard.press(key)
            page.wait_for_timeout(300)
        _wait_iteration(page, lambda i, t=target: i == t, "A")
        _wait_iteration(page, lambda i, t=target: i == t, "B")
    page_errors.assert_none()


def test_the_gallery_opens_the_variational_page(serve_app, new_page, watch_errors, wait_for_bokeh):
    url = serve_app({"main": "apps/main.py"})
    page = new_page(viewport={"width": 1400, "height": 1000})
    errors = watch_errors(page)
    page.goto(f"{url}/main")
    wait_for_bokeh(page)
    page.get_by_role("button", name="Open Variational DP mixture", exact=True).click()
    page.wait_for_function("() => window.location.search.includes('page=variational')")
    page.get_by_text("B: thesis update · iteration 0", exact=False).wait_for()
    page.get_by_role("button", name="Step", exact=True).click()
    _wait_iteration(page, lambda i: i == 1, "B")
    errors.assert_none()
