"""The "Decision surfaces" page (apps/decision_surface.py), alone and in the gallery, in headless chromium."""

from __future__ import annotations

import re

APP = "apps/decision_surface.py"
GALLERY = "apps/main.py"
VIEWPORT = {"width": 1440, "height": 900}
#: First load of a page in a fresh server (imports, the first fit): generous, the CPU may be shared.
LOAD_TIMEOUT_MS = 60_000

#: The heat maps (ImageRGBA glyphs) of the page: a checksum of each image, and the figures' frames.
HEAT_JS = """() => {
  const out = {images: [], frames: []};
  for (const m of Bokeh.documents[0].all_models) {
    if (m.type === 'Figure') {
      out.frames.push({title: m.title ? m.title.text : '', w: m.frame_width, h: m.frame_height});
      for (const r of m.renderers) {
        if (!r.glyph || r.glyph.type !== 'ImageRGBA') continue;
        const d = r.data_source.data, imgs = (d instanceof Map ? d.get('image') : d['image']) || [];
        let sum = 0;
        for (const img of imgs) { const a = img.data || img; for (let i = 0; i < a.length; i += 7) sum = (sum + a[i] * (i % 13 + 1)) % 1e9; }
        out.images.push(sum);
      }
    }
  }
  return out;
}"""


def _text(page, css_class: str) -> str:
    """The text of a Markdown / HTML pane marked with ``css_class`` (its content is in a shadow root)."""
    return page.locator(f".{css_class}").first.evaluate("e => (e.shadowRoot || e).textContent")


def _title(page) -> str:
    return _text(page, "decision-title")


def _wait_title(page, predicate, timeout_s: float = 30.0) -> str:
    for _ in range(int(timeout_s / 0.2)):
        text = _title(page)
        if predicate(text):
            return text
        page.wait_for_timeout(200)
    raise AssertionError(f"title stayed at {_title(page)!r}")


def _iteration(page) -> int:
    m = re.search(r"EM iteration (\d+)", _title(page))
    return int(m.group(1)) if m else -1


def _heat(page) -> dict:
    return page.evaluate(HEAT_JS)


def _select(page, option_label: str):
    page.locator("select").filter(has=page.locator("option", has_text=option_label)).first.select_option(
        label=option_label)


def _open(serve_app, new_page, watch_errors, wait_for_bokeh, n_per_class: int):
    """The served page (small training sets: the table's fits stay quick) once its first surface is scored:
    (page, its error watcher)."""
    url = serve_app({"decision": APP})
    page = new_page(viewport=VIEWPORT)
    errors = watch_errors(page)
    page.goto(f"{url}/decision?n_per_class={n_per_class}", timeout=LOAD_TIMEOUT_MS)
    wait_for_bokeh(page, timeout=LOAD_TIMEOUT_MS)
    _wait_title(page, lambda t: "test loss" in t)
    return page, errors


def test_decision_surface_page(serve_app, new_page, watch_errors, wait_for_bokeh, screenshot):
    page, errors = _open(serve_app, new_page, watch_errors, wait_for_bokeh, 40)
    heat = _heat(page)
    assert len(heat["images"]) == 3, heat  # main panel and the two strips
    frames = {f["title"]: f for f in heat["frames"]}
    assert frames["complete cases"]["w"] >= 400 and frames["complete cases"]["h"] >= 400, frames
    for _ in range(150):
        if re.search(r"[1-9]\d* / \d+ methods scored", _text(page, "decision-progress")):
            break
        page.wait_for_timeout(200)
    assert re.search(r"[1-9]\d* / \d+ methods scored", _text(page, "decision-progress"))

    # another method: new surface (title and heat map)
    _select(page, "LR, zero imputation")
    _wait_title(page, lambda t: "LR, zero imputation" in t and "test loss" in t)
    page.wait_for_function("() => window.location.search.includes('method=lr_zero')")
    wait_for_bokeh(page)
    after_method = _heat(page)
    assert after_method["images"] != heat["images"], "the heat map did not change with the method"

    # another data set: new data, new surface, the table starts again
    table_before = _text(page, "decision-table")
    _select(page, "XOR (Marlin 6.4)")
    for _ in range(100):
        if "xor" in _text(page, "decision-info"):
            break
        page.wait_for_timeout(200)
    assert "xor" in _text(page, "decision-info")
    _wait_title(page, lambda t: "LR, zero imputation" in t and "test loss" in t)
    wait_for_bokeh(page)
    assert _heat(page)["images"] != after_method["images"], "the heat map did not change with the data set"
    for _ in range(100):
        if _text(page, "decision-table") != table_before:
            break
        page.wait_for_timeout(200)
    assert _text(page, "decision-table") != table_before

    # the EM mixture classifier: Step, Play, Pause
    _select(page, "Gaussian classes (EM), K = 1 per class")
    _wait_title(page, lambda t: "EM iteration 0" in t)
    before = _heat(page)["images"]
    page.get_by_role("button", name="Step").click()
    _wait_title(page, lambda t: "EM iteration 1" in t)
    page.mouse.move(5, 5)  # the Step button's tooltip would cover Play
    page.get_by_role("button", name="Play").click()
    _wait_title(page, lambda t: _iteration(page) >= 4 or "converged" in t)
    page.get_by_role("button", name="Pause").click()
    wait_for_bokeh(page)
    assert _heat(page)["images"] != before, "the EM steps did not change the heat map"

    # layout: the left strip beside the main panel, the bottom strip below it
    page.get_by_role("button", name="Play").wait_for()
    canvases = page.locator(".decision-plots .bk-Canvas")
    boxes = [canvases.nth(i).bounding_box() for i in range(canvases.count())]
    boxes = [b for b in boxes if b and b["width"] > 20]
    main = max(boxes, key=lambda b: b["width"] * b["height"])
    assert main["width"] >= 400 and main["height"] >= 400, main
    lefts = [b for b in boxes if b["x"] + b["width"] <= main["x"] + 5 and b["height"] >= 400]
    belows = [b for b in boxes if b["y"] >= main["y"] + main["height"] - 5 and b["width"] >= 400]
    assert lefts and belows, boxes
    screenshot(page, "decision_surface")
    errors.assert_none()


def test_decision_surface_in_the_gallery(serve_app, new_page, watch_errors, wait_for_bokeh):
    url = serve_app({"main": GALLERY})
    page = new_page(viewport=VIEWPORT)
    errors = watch_errors(page)
    page.goto(f"{url}/main?page=decision_surface&decision_surface.dataset=simple&decision_surface.n_per_class=30",
              timeout=LOAD_TIMEOUT_MS)
    wait_for_bokeh(page, timeout=LOAD_TIMEOUT_MS)
    _wait_title(page, lambda t: "test loss" in t)
    assert "simple" in _text(page, "decision-info")
    assert len(_heat(page)["images"]) == 3
    errors.assert_none()


def test_an_uploaded_csv_with_text_classes(serve_app, new_page, watch_errors, wait_for_bokeh, tmp_path):
    """The penguins as pandas writes them (species as text, NA gaps, row names): the species are the classes, named
    in the legend, on the first two numeric columns."""
    from explorer import datasets as ds

    path = tmp_path / "penguins.csv"
    ds.load_mixed("penguins").to_csv(path, na_rep="NA")
    page, errors = _open(serve_app, new_page, watch_errors, wait_for_bokeh, 30)
    page.locator("input[type=file]").first.set_input_files(str(path))
    page.get_by_text("class Chinstrap", exact=False).wait_for(timeout=LOAD_TIMEOUT_MS)
    _wait_title(page, lambda t: "test loss" in t)
    info = _text(page, "decision-info")
    assert "penguins.csv" in info and "bill_length_mm" in info and "bill_depth_mm" in info
    errors.assert_none()
