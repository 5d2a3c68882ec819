"""Bad input in the app gives a readable message, keeps the data on screen, and no browser error."""

from __future__ import annotations


def _upload(page, name: str, content: bytes):
    page.locator("input[type=file]").set_input_files({"name": name, "mimeType": "text/csv", "buffer": content})


def test_bad_uploads_show_readable_errors_and_lose_nothing(serve_app, new_page, watch_errors, wait_for_bokeh):
    url = serve_app({"data_mechanism": "apps/data_mechanism.py"})
    page = new_page()
    errors = watch_errors(page)
    page.goto(f"{url}/data_mechanism")
    wait_for_bokeh(page)
    page.get_by_text("150 rows x 4 columns").first.wait_for()

    # strings in a numeric table
    _upload(page, "words.csv", b"a,b,c\n1,2,x\n3,4,y\n5,6,z\n")
    page.get_by_text("words.csv").first.wait_for()
    page.get_by_text("not numeric").first.wait_for()
    page.get_by_text("150 rows x 4 columns").first.wait_for()  # the previous data are still shown

    # infinities
    _upload(page, "inf.csv", b"a,b\n1,2\n3,inf\n5,6\n")
    page.get_by_text("infinite").first.wait_for()

    # a column with nothing observed
    _upload(page, "empty.csv", b"a,b\n1,\n3,\n5,\n")
    page.get_by_text("no observed value").first.wait_for()
    page.get_by_text("150 rows x 4 columns").first.wait_for()

    # a good file with its own missing values replaces the data and clears the message
    _upload(page, "good.csv", b"a,b,c\n1,2,3\n2,,5\n3,4,?\n4,5,6\n5,7,8\n")
    page.get_by_text("5 rows x 3 columns").first.wait_for()
    page.get_by_text("no observed value").wait_for(state="hidden")
    wait_for_bokeh(page)
    assert "Traceback" not in page.content()
    errors.assert_none()


def test_too_many_components_is_a_readable_message(serve_app, new_page, watch_errors, wait_for_bokeh):
    url = serve_app({"conditional": "apps/conditional.py"})
    page = new_page()
    errors = watch_errors(page)
    page.goto(f"{url}/conditional?n_components=10&data_dataset=ghahramani_bivariate&data_n_samples=10")
    wait_for_bokeh(page)
    page.get_by_text("larger than the number of rows").first.wait_for()
    assert "Traceback" not in page.content()
    errors.assert_none()
