"""Plots updated in place must survive data that shrink (fewer columns, fewer rows, fewer components).

Regression test: categorical bar charts whose factors shrink (4 columns -> 3) made BokehJS throw
"Size mismatch" in about two runs of three; the bars are now drawn at numeric positions.
"""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("repeat", range(3))
def test_uploading_fewer_columns_raises_no_browser_error(repeat, serve_app, new_page, watch_errors, wait_for_bokeh):
    url = serve_app({"data_mechanism": "apps/data_mechanism.py"})
    page = new_page()
    errors = watch_errors(page)
    page.goto(f"{url}/data_mechanism")
    wait_for_bokeh(page)
    page.get_by_text("150 rows x 4 columns").first.wait_for()
    wait_for_bokeh(page)
    page.locator("input[type=file]").set_input_files(
        {"name": "small.csv", "mimeType": "text/csv", "buffer": b"a,b,c\n1,2,3\n2,,5\n3,4,?\n4,5,6\n5,7,8\n"})
    page.get_by_text("5 rows x 3 columns").first.wait_for()
    wait_for_bokeh(page)
    page.wait_for_timeout(300)
    errors.assert_none()
