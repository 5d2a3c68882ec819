"""The served "Data & mechanism" page (apps/data_mechanism.py) in headless chromium."""

from __future__ import annotations

from tests.browser._helpers import select_option, wait_for_title


def test_data_mechanism_page(serve_app, new_page, watch_errors, wait_for_bokeh, screenshot):
    url = serve_app({"data_mechanism": "apps/data_mechanism.py"})
    page = new_page(viewport={"width": 1280, "height": 1180})
    errors = watch_errors(page)
    page.goto(f"{url}/data_mechanism")
    wait_for_bokeh(page)

    # default: iris with nmar_lowest; the matrix is sorted by pattern, the marginal shows the bias
    wait_for_title(page, "Missingness matrix (by pattern)")
    wait_for_title(page, "Missing rate per column (dashed: requested 30%)")
    page.get_by_text("Random columns lose their lowest values (requested 30%").wait_for()
    page.get_by_text("bias of the observed-data mean").wait_for()
    wait_for_bokeh(page)
    screenshot(page, "data_mechanism")

    # the row-order toggle redraws the matrix
    page.get_by_role("button", name="Original order").click()
    wait_for_title(page, "Missingness matrix (original order)")

    # a MAR mechanism chosen through the Select: new explanation, rates and marginal
    select_option(page, "mar_rows (MAR)")
    page.get_by_text("Rows with a low score of random controlling columns lose values").first.wait_for()
    page.get_by_text("Missing at random: missingness depends only on values that stay observed").wait_for()

    # an image mask on tabular data: a readable error, the plots stay
    select_option(page, "quarter (MCAR)")
    page.get_by_text("is an image mask; choose an image data set").wait_for()

    # the image data set: the quarter mask applies, masked digits appear
    select_option(page, "digits_5x7")
    page.get_by_text("One quarter of each image is missing").first.wait_for()
    wait_for_title(page, "of 100 values missing")
    page.get_by_text("is an image mask").wait_for(state="hidden")
    wait_for_bokeh(page)

    # every built-in image set takes the image masks (the 8x8 digits: 64 pixels per image)
    select_option(page, "digits_8x8")
    page.get_by_text("x 64 columns").first.wait_for()
    page.get_by_text("is an image mask").wait_for(state="hidden")
    # "uploaded" is offered only once something was uploaded
    assert page.locator("option", has_text="uploaded").count() == 0
    # an empty file gets its own message
    page.locator("input[type=file]").set_input_files(
        files=[{"name": "empty.csv", "mimeType": "text/csv", "buffer": b""}])
    page.get_by_text("empty.csv: the file is empty").wait_for()
    # a ;-separated file is read with its own separator
    page.locator("input[type=file]").set_input_files(
        files=[{"name": "semi.csv", "mimeType": "text/csv", "buffer": b"a;b;c\n1;2;3\n4;;6\n5;1;2\n"}])
    page.get_by_text("semi.csv: 3 rows x 3 columns").first.wait_for()
    assert page.locator("option", has_text="uploaded").count() == 1
    wait_for_bokeh(page)
    errors.assert_none()


_BANNER_BOX = """() => {
  const find = root => { for (const el of root.querySelectorAll('*')) {
      if (el.classList.contains('data-error-banner')) return el;
      if (el.shadowRoot) { const f = find(el.shadowRoot); if (f) return f; } } return null; };
  const el = find(document); if (!el) return null;
  const r = el.getBoundingClientRect(); return {top: r.top, bottom: r.bottom, left: r.left, height: r.height};
}"""


def test_an_infeasible_setting_is_said_at_the_top_with_the_nearest_one_that_works(serve_app, new_page,
                                                                                  watch_errors, wait_for_bokeh):
    """Wine, then mar_logistic at 30 %: the error shows at the top of the main area, within the first
    screen (it used to sit ~1,300 px down the sidebar), the old results are dimmed and said to be
    the old ones, and one click applies the largest feasible rate."""
    url = serve_app({"data_mechanism": "apps/data_mechanism.py"})
    page = new_page(viewport={"width": 1440, "height": 900})
    errors = watch_errors(page)
    page.goto(f"{url}/data_mechanism")
    wait_for_bokeh(page)
    select_option(page, "wine")
    page.get_by_text("178 rows x 13 columns").first.wait_for()
    select_option(page, "mar_logistic (MAR)")
    page.get_by_text("The largest feasible rate here is 7.7%").first.wait_for()
    page.get_by_text("The results below are still those of wine with nmar_lowest").first.wait_for()
    box = page.evaluate(_BANNER_BOX)
    assert box is not None and box["height"] > 0 and box["top"] < 250 and box["left"] > 300, box  # main area, top
    page.get_by_role("button", name="Use 7.6%").click()
    page.get_by_text("The largest feasible rate here is 7.7%").first.wait_for(state="hidden")
    page.get_by_text("by mar_logistic", exact=False).first.wait_for()
    wait_for_title(page, "Missing rate per column (dashed: requested 8%)")
    errors.assert_none()
