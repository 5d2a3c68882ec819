"""The "Sensitivity" page (apps/sensitivity.py) in headless chromium: loads, follows the column and delta, escapes names."""

from __future__ import annotations

from tests.browser._helpers import wait_for_value

APP = "apps/sensitivity.py"
VIEWPORT = {"width": 1440, "height": 900}
WEIRD = "<b>x</b>"

_TITLES_JS = """() => [...Bokeh.documents[0].all_models].filter(m => m.type == 'Figure')
    .map(m => m.title ? m.title.text : '')"""

#: The top of the imputed histogram's bars (the orange one: its glyph's 'top' column), summed.
_IMPUTED_JS = """() => {
  for (const m of Bokeh.documents[0].all_models) {
    if (m.type !== 'GlyphRenderer' || !m.glyph || m.glyph.type !== 'Quad') continue;
    const c = m.glyph.fill_color, color = (typeof c === 'string') ? c : (c && c.value);
    if (color !== '#ff7f0e') continue;
    const f = (m.glyph.top && m.glyph.top.field) || 'top';
    const d = m.data_source.data, top = (d instanceof Map ? d.get(f) : d[f]) || [];
    let s = 0; for (let i = 0; i < top.length; i++) s += top[i] * (i + 1);
    return s;  // a weighted sum: moves when the bars move
  }
  return null;
}"""


def _titles(page) -> list[str]:
    return page.evaluate(_TITLES_JS)


def _title(page, part: str) -> str:
    return next((t for t in _titles(page) if part in t), "")


def test_sensitivity_page_follows_column_and_delta(serve_app, new_page, watch_errors, wait_for_bokeh, screenshot):
    url = serve_app({"sensitivity": APP})
    page = new_page(viewport=VIEWPORT)
    errors = watch_errors(page)
    # every column has missing values (MCAR), 5 imputations: a quick draw
    page.goto(f"{url}/sensitivity?mechanism=mcar&rate=0.2&n_imputations=5&selection=false", timeout=60_000)
    wait_for_bokeh(page)
    page.locator(".sensitivity-sentence", has_text="Without adjustment (MAR) the mean of sepal_length").wait_for(
        timeout=60_000)
    wait_for_value(page, lambda: _title(page, "imputed at delta"), lambda t: t.startswith("sepal_length: imputed"))
    for pane in ("histogram", "estimate"):
        box = page.locator(f".sensitivity-{pane} .bk-Canvas").first.bounding_box()
        assert box["width"] >= 400 and box["height"] >= 400, (pane, box)
        assert box["y"] + box["height"] <= VIEWPORT["height"], (pane, box)
    screenshot(page, "sensitivity", full_page=False)

    # the delta slider moves the imputed histogram (a stream update) and lands in the URL
    before = page.evaluate(_IMPUTED_JS)
    assert before is not None
    handle = page.locator(".delta-slider .noUi-handle").first
    handle.focus()
    for step in ("+0.10 sd", "+0.20 sd", "+0.30 sd", "+0.40 sd"):  # one key at a time, each one shown
        handle.press("ArrowRight")
        wait_for_value(page, lambda: _title(page, "imputed at delta"), lambda t, step=step: step in t)
    wait_for_value(page, lambda: page.evaluate(_IMPUTED_JS), lambda v: v is not None and v > before)
    page.wait_for_function("() => window.location.search.includes('delta_index=14')")

    # another column: both plots follow, the mean estimated follows the shifted column
    page.locator(".shift-column select").select_option(label="petal_width")
    wait_for_value(page, lambda: _title(page, "imputed at delta"), lambda t: t.startswith("petal_width: imputed"))
    wait_for_value(page, lambda: _title(page, "mean of"), lambda t: t == "mean of petal_width")
    page.locator(".sensitivity-sentence", has_text="the mean of petal_width").wait_for()
    page.wait_for_function("() => window.location.search.includes('column=petal_width')")

    # a regression coefficient: the sentence speaks of significance
    page.locator("select").filter(has=page.locator("option", has_text="regression coefficient (OLS)")).first \
        .select_option(label="regression coefficient (OLS)")
    page.locator(".sensitivity-sentence", has_text="The coefficient").wait_for()
    wait_for_value(page, lambda: _title(page, "coefficient of"), lambda t: " ~ " in t)
    errors.assert_none()


def test_uploaded_markup_column_name_is_text(serve_app, new_page, watch_errors, wait_for_bokeh):
    url = serve_app({"sensitivity": APP})
    page = new_page(viewport=VIEWPORT)
    errors = watch_errors(page)
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(f"{url}/sensitivity?n_imputations=4&selection=false", timeout=60_000)
    wait_for_bokeh(page)
    page.locator(".sensitivity-sentence", has_text="Without adjustment").wait_for(timeout=60_000)
    rows = "\n".join(f"{i},{'' if i % 4 == 0 else (i * 7) % 11},{i % 5}" for i in range(1, 41))
    page.locator("input[type=file]").set_input_files(
        {"name": "weird.csv", "mimeType": "text/csv", "buffer": f"a,{WEIRD},c\n{rows}\n".encode()})
    sentence = page.locator(".sensitivity-sentence", has_text=f"the mean of {WEIRD}")
    sentence.wait_for(timeout=60_000)
    assert WEIRD in sentence.locator("p").first.inner_text()
    assert page.locator(".sensitivity-sentence b").count() == 0  # no element made of the name
    wait_for_value(page, lambda: _title(page, "imputed at delta"), lambda t: t.startswith(f"{WEIRD}: imputed"))
    wait_for_bokeh(page)
    assert dialogs == []
    errors.assert_none()
