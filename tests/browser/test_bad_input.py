"""Bad input in the app gives a readable message, keeps the data on screen, and no browser error."""

from __future__ import annotations

import pytest


def _upload(page, name: str, content: bytes):
    """Upload through the page's visible file input (the Conditional page shows a second one with a table)."""
    page.locator("input[type=file] >> visible=true").first.set_input_files(
        {"name": name, "mimeType": "text/csv", "buffer": content})


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
    page.get_by_text("has no observed value").first.wait_for()
    page.get_by_text("150 rows x 4 columns").first.wait_for()

    # a good file with its own missing values replaces the data and clears the message
    _upload(page, "good.csv", b"a,b,c\n1,2,3\n2,,5\n3,4,?\n4,5,6\n5,7,8\n")
    page.get_by_text("5 rows x 3 columns").first.wait_for()
    # "has": the download card's note speaks of "rows with no observed value" and stays
    page.get_by_text("has no observed value").wait_for(state="hidden")
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


# ----------------------------------------------------------------------------- user strings are data
XSS_NAME = "<img src=x onerror=alert(1)>.csv"
XSS_COLUMN = "<img src=x onerror=alert(2)>"
XSS_CELL = "<script>alert(3)</script>"

_INJECTED_JS = """() => {
  const found = [];
  const walk = root => { for (const el of root.querySelectorAll('img[src="x"], script')) {
      if (el.tagName === 'IMG' || (el.textContent || '').includes('alert(')) found.push(el.outerHTML); }
    for (const el of root.querySelectorAll('*')) if (el.shadowRoot) walk(el.shadowRoot); };
  walk(document);
  return found;
}"""


def _no_injection(page, dialogs):
    page.wait_for_timeout(500)  # an onerror handler runs as soon as the broken image is inserted
    assert dialogs == [], f"script ran in the page: {dialogs}"
    assert page.evaluate(_INJECTED_JS) == []


@pytest.mark.parametrize("app", ["data_mechanism", "conditional", "em_playground"])
def test_file_names_columns_and_cells_are_shown_as_text(app, serve_app, new_page, watch_errors, wait_for_bokeh):
    url = serve_app({app: f"apps/{app}.py"})
    page = new_page()
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    errors = watch_errors(page)
    page.goto(f"{url}/{app}")
    wait_for_bokeh(page)
    # a file with a text column: an error quoting the file name, a column name and a cell; the Conditional page
    # takes it as a table with categories instead (its name in the table selector, as text; two rows are too few)
    _upload(page, XSS_NAME, f"a,{XSS_COLUMN}\n1,{XSS_CELL}\n2,3\n".encode())
    if app == "conditional":
        page.get_by_text("could not be fitted", exact=False).first.wait_for()
        chosen = page.locator("select").filter(has=page.locator("option", has_text="penguins:")).first
        assert chosen.evaluate("s => s.options[s.selectedIndex].text") == (
            f"uploaded {XSS_NAME}: 2 rows, categories {XSS_COLUMN}")
    else:
        page.get_by_text("not numeric").first.wait_for()
        page.get_by_text(XSS_NAME, exact=False).first.wait_for()  # the name is on screen, as text
        page.get_by_text(XSS_CELL, exact=False).first.wait_for()
    _no_injection(page, dialogs)
    # a good file whose name and column names are markup: summary, tables, labels, plot titles
    rows = "\n".join(f"{i},{(i * 7) % 5 if i % 3 else ''},{i % 4}" for i in range(1, 40))
    _upload(page, XSS_NAME, f"a,{XSS_COLUMN},**c**\n{rows}\n".encode())
    # (the EM playground draws two of the three columns, picked in its sidebar)
    page.get_by_text("39 rows x 3 columns" if app != "em_playground" else "x column", exact=False).first.wait_for()
    wait_for_bokeh(page)
    _no_injection(page, dialogs)
    errors.assert_none()


def test_oversized_and_foreign_uploads_get_plain_messages(serve_app, new_page, watch_errors, wait_for_bokeh, tmp_path):
    url = serve_app({"data_mechanism": "apps/data_mechanism.py"})
    page = new_page()
    errors = watch_errors(page)
    page.goto(f"{url}/data_mechanism")
    wait_for_bokeh(page)
    page.get_by_text("150 rows x 4 columns").first.wait_for()
    # 53 MB: refused in the browser (never sent, so the connection stays), with a message
    big = tmp_path / "big.csv"
    big.write_bytes(b"a,b\n" + b"1.2345678,2.3456789\n" * (53 * 2**20 // 20))
    page.locator("input[type=file]").set_input_files(str(big))
    page.get_by_text("big.csv: the file has 53.0 MB; the limit is 10 MB", exact=False).first.wait_for()
    page.get_by_text("150 rows x 4 columns").first.wait_for()  # nothing lost
    # the connection still works: a good file loads and clears the message
    _upload(page, "utf16.csv", "x,y\n1,2\n3,\n4,5\n".encode("utf-16"))
    page.get_by_text("3 rows x 2 columns", exact=False).first.wait_for()
    page.get_by_text("the limit is 10 MB").first.wait_for(state="hidden")
    _upload(page, "latin1.csv", "température,y\n1,2\n3,\n4,5\n5,6\n".encode("latin-1"))
    page.get_by_text("4 rows x 2 columns", exact=False).first.wait_for()
    _upload(page, "model.pkl", b"\x80\x04\x95" + bytes(64))
    page.get_by_text("binary file", exact=False).first.wait_for()
    _upload(page, "ragged.csv", b"a,b,c\n1,2,3\n1,2,3,4\n")
    page.get_by_text("line 3 has 4 fields", exact=False).first.wait_for()
    assert "C error" not in page.content() and "Traceback" not in page.content()
    errors.assert_none()
