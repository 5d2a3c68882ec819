"""The "Regression from the joint density" page (apps/regression.py), alone and in the gallery, in headless chromium."""

from __future__ import annotations

import gc
import re

from tests.browser._helpers import wait_for_value

APP = "apps/regression.py"
GALLERY = "apps/main.py"
VIEWPORT = {"width": 1440, "height": 900}
XSS_COLUMN = "<img src=x onerror=alert(3)>"

#: Every figure's title and frame, the legends drawn inside a frame, and the scatter's mean curve (width-3 line).
FIGURES_JS = """() => {
  const out = {mean: [], frames: []};
  for (const m of Bokeh.documents[0].all_models) {
    if (m.type !== 'Figure') continue;
    const title = m.title ? m.title.text : '';
    out.frames.push({title, inside: m.center.filter(r => r.type == 'Legend').length});
    if (!title.includes(' against ')) continue;
    for (const r of m.renderers) {
      if (!r.glyph || r.name !== 'E[y | x] (eq. 13)') continue;
      const d = r.data_source.data, y = (d instanceof Map ? d.get('y') : d['y']) || [];
      out.mean = Array.from(y);
    }
  }
  return out;
}"""


#: Per figure view on screen: how many pixels (rows) of its legends reach into its frame (the plotting area).
LEGEND_INTO_FRAME_JS = """() => [...Bokeh.index.query((v) => v.model != null && v.model.type === 'Figure')].map((view) => {
  const fr = view.frame.bbox;
  let worst = 0;
  for (const rv of view.renderer_views.values()) {
    if (rv.model.type !== 'Legend' || rv.bbox == null || rv.bbox.width === 0) continue;
    const b = rv.bbox;
    const dx = Math.min(b.right, fr.right) - Math.max(b.left, fr.left);
    const dy = Math.min(b.bottom, fr.bottom) - Math.max(b.top, fr.top);
    if (dx > 0 && dy > 0) worst = Math.max(worst, dy);
  }
  return worst;
})"""


def _figures(page) -> dict:
    return page.evaluate(FIGURES_JS)


def _title(page, part: str) -> str:
    """The title of the figure whose title contains ``part`` ('' if none)."""
    return next((f["title"] for f in _figures(page)["frames"] if part in f["title"]), "")


def _iteration(page) -> int:
    m = re.search(r"EM iteration (\d+)", _title(page, " against "))
    return int(m.group(1)) if m else -1


def _server_state(page) -> str:
    """What the server (this process) and the page say, for a failure message: the sidebar's read-out, and per
    regression view its last drawn read-outs, its frame jobs and the figure title it set."""
    from explorer.ui.pages.regression import RegressionView

    parts = [f"page: {_title(page, ' against ')!r}, {page.locator('text=Iteration:').first.inner_text()!r}"]
    for view in [o for o in gc.get_objects() if isinstance(o, RegressionView) and not o._destroyed]:
        frames = view._frames
        parts.append(f"server: model iteration {view.model.iteration}, drawn read-outs "
                     f"{getattr(view.readouts, 'iteration', None)}, frame running {frames._running} / again "
                     f"{frames._again}, redraw scheduled {view._redraw._scheduled}, title "
                     f"{view._scatter.figure.title.text!r}, player in flight {view.player._inflight}, "
                     f"{_queued_writes(view._scatter.figure.document)}")
    return "; ".join(parts)


def _queued_writes(doc) -> str:
    """Panel's queue of change messages not yet written to the websocket (see explorer.ui.panel_writes)."""
    from panel.io import document as panel_document

    queued = sum(len(msgs) for msgs in panel_document._WRITE_MSGS.get(doc, {}).values())
    return f"messages queued {queued}, write block {doc in panel_document._WRITE_BLOCK}"


def _wait_title(page, part: str, predicate, timeout_s: float = 30.0) -> str:
    for _ in range(int(timeout_s / 0.2)):
        title = _title(page, part)
        if predicate(title):
            return title
        page.wait_for_timeout(200)
    raise AssertionError(f"title stayed at {_title(page, part)!r}")


def _converged(page, timeout_s: float = 40.0) -> str:
    return _wait_title(page, " against ", lambda t: t.endswith("converged"), timeout_s)


def _check_layout(page) -> None:
    info = _figures(page)
    scatter = [f for f in info["frames"] if " against " in f["title"]]
    density = [f for f in info["frames"] if f["title"].startswith("p(")]
    assert len(scatter) == 1 and len(density) == 1, info["frames"]
    for f in scatter + density:
        assert f["inside"] == 0, "a legend is drawn over the plot"
    assert max(page.evaluate(LEGEND_INTO_FRAME_JS)) <= 2, "a legend reaches into a plot's frame"
    for pane in ("scatter", "density"):
        box = page.locator(f".regression-{pane} .bk-Canvas").first.bounding_box()
        assert box["width"] >= 400 and box["height"] >= 400, (pane, box)
    for name in ("Step", "Play", "Reset"):
        assert page.get_by_role("button", name=name, exact=True).is_visible()


def test_regression_page_alone(serve_app, new_page, watch_errors, wait_for_bokeh, screenshot):
    url = serve_app({"regression": APP})
    page = new_page(viewport=VIEWPORT)
    errors = watch_errors(page)
    page.goto(f"{url}/regression?n_samples=150&n_components=5")  # a smaller circle: quicker fits
    wait_for_bokeh(page)

    # the noisy circle: the fit plays to convergence by itself; at the middle p(y | x) is bimodal
    _converged(page)
    page.locator(".bimodal-note", has_text="The mean falls between the modes").wait_for()
    page.locator(".comparison-table", has_text="Joint mixture: E[y | x]").wait_for(timeout=40_000)
    wait_for_bokeh(page)
    page.wait_for_timeout(300)
    _check_layout(page)
    screenshot(page, "regression", full_page=False)
    full = _figures(page)["mean"]
    assert len(full) > 50

    # the density panel follows a clicked x0 (the Tap stream on the scatter)
    before = _title(page, "p(y | x =")
    canvas = page.locator(".regression-scatter .bk-Canvas").first
    box = canvas.bounding_box()
    page.mouse.click(box["x"] + 0.8 * box["width"], box["y"] + 0.6 * box["height"])
    after = _wait_title(page, "p(y | x =", lambda t: t and t != before)
    assert float(re.search(r"= (-?[\d.]+)", after).group(1)) > 0.5, after
    page.wait_for_function("() => window.location.search.includes('x0=')")

    # diagonal covariances: a new run, played to convergence, a different curve
    # (a page under load may draw only the new run's last frame: a frame of the run playing is not waited for)
    page.get_by_role("button", name="diag").click()
    page.wait_for_function("() => window.location.search.includes('covariance_type=diag')")
    wait_for_value(page, lambda: _figures(page)["mean"], lambda m: len(m) == len(full) and m != full)
    _converged(page)

    # the same column as input and target: a readable error, no curve; another target: a new fit
    page.locator(".input-column select").select_option(label="y")  # the target is y too
    page.get_by_text("The input and the target are the same column").first.wait_for()
    page.locator(".target-column select").select_option(label="x")
    _wait_title(page, " against ", lambda t: t.startswith("x against y"))
    _converged(page)
    page.get_by_text("The input and the target are the same column").first.wait_for(state="hidden")

    # Reset, Step, Play
    page.get_by_role("button", name="Reset").click()
    wait_for_value(page, lambda: _iteration(page), lambda i: i == 0)
    page.get_by_role("button", name="Step", exact=True).click()
    try:
        wait_for_value(page, lambda: _iteration(page), lambda i: i == 1)
    except AssertionError as exc:  # say what each side shows, and what Panel left queued (explorer.ui.panel_writes)
        raise AssertionError(f"{exc}; {_server_state(page)}") from exc
    page.mouse.move(5, 5)  # the Step button's tooltip would cover Play
    page.get_by_role("button", name="Play").click()
    wait_for_value(page, lambda: _iteration(page), lambda i: i > 1)
    errors.assert_none()


def test_regression_page_in_the_gallery_with_an_upload(serve_app, new_page, watch_errors, wait_for_bokeh, screenshot):
    url = serve_app({"main": GALLERY})
    page = new_page(viewport=VIEWPORT)
    errors = watch_errors(page)
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(f"{url}/main?page=regression&regression.n_components=4")
    wait_for_bokeh(page)
    _converged(page)
    page.locator(".bimodal-note").first.wait_for()
    _check_layout(page)
    assert page.get_by_role("button", name="Regression from the joint density").is_visible()
    page.get_by_text(re.compile(r"Components K: ?4")).first.wait_for()

    # an upload whose column name is a script payload: shown as text, never run
    rows = "\n".join(f"{i / 4:.2f},{(i / 4) ** 2 + (i % 3) / 5:.3f}" for i in range(40))
    page.locator(".page-sidebar-regression input[type=file]").set_input_files(
        {"name": "payload.csv", "mimeType": "text/csv", "buffer": f"{XSS_COLUMN},b\n{rows}\n".encode()})
    page.get_by_text(f"input {XSS_COLUMN}, target b", exact=False).first.wait_for()
    _wait_title(page, " against ", lambda t: t.startswith(f"b against {XSS_COLUMN}"))
    _converged(page)
    wait_for_bokeh(page)
    page.wait_for_timeout(500)  # an onerror handler runs as soon as a broken image is inserted
    assert dialogs == [], f"script ran in the page: {dialogs}"
    assert page.locator("img[src=x]").count() == 0
    screenshot(page, "regression_gallery_upload", full_page=False)
    errors.assert_none()
