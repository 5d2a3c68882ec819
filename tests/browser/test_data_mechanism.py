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
