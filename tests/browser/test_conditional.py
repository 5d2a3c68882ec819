"""The served "Conditional density slices" page (apps/conditional.py) in headless chromium."""

from __future__ import annotations

import re

from tests.browser._helpers import select_option, wait_for_title

STATUS = re.compile(r"(Converged after|Stopped at max_iter) \d+ iterations?")


def status_text(page) -> str:
    """The model status line (from 'Converged' / 'Stopped' / 'Fitting' / 'Iteration')."""
    return page.locator(".fit-status p").first.inner_text()


def wait_until(condition, page, timeout_ms: int = 20_000) -> None:
    for _ in range(timeout_ms // 100):
        if condition():
            return
        page.wait_for_timeout(100)
    raise AssertionError("condition not met in time")


def test_conditional_page(serve_app, new_page, watch_errors, wait_for_bokeh, screenshot):
    url = serve_app({"conditional": "apps/conditional.py"})
    page = new_page(viewport={"width": 1280, "height": 1000})
    errors = watch_errors(page)
    page.goto(f"{url}/conditional")
    wait_for_bokeh(page)

    # the fit started by the app (a background thread) converges and the slice of row 0 appears
    page.get_by_text(STATUS).wait_for()
    wait_for_title(page, "row 0: p(")

    # a typed row: a parse error is shown readably, then a valid row (sepals known, petals missing)
    page.get_by_role("button", name="custom row").click()
    box = page.get_by_placeholder("e.g. 6.8")
    box.fill("6.8, abc, ?, ?")
    box.press("Enter")
    page.get_by_text("Value 2 (sepal_width) is 'abc', which is not a number").wait_for()
    box.fill("6.8, 3.0, ?, ?")
    box.press("Enter")
    page.get_by_text("is not a number").wait_for(state="hidden")
    wait_for_title(page, "custom row: p(petal_length | observed)")
    page.get_by_text("custom row: 2 observed, 2 missing").wait_for()
    wait_for_bokeh(page)
    page.wait_for_timeout(300)  # let the canvas repaint
    screenshot(page, "conditional")

    # two missing features: the joint 2-D slice
    select_option(page, "(none: 1-D slice)", "petal_width")
    wait_for_title(page, "custom row: p(petal_length, petal_width | observed)")

    # the Fit button: with auto-refit off a settings change resets the model, Fit runs EM again
    page.get_by_role("checkbox").uncheck()  # "Refit when settings change" off
    select_option(page, "diag")
    page.get_by_text("not fitted yet: press Fit").wait_for()
    page.get_by_role("button", name="Fit", exact=True).click()
    page.get_by_text(STATUS).wait_for()
    assert "Converged" in status_text(page) or "max_iter" in status_text(page)

    # a new mechanism through the Select (auto-refit on again): new data, refitted model
    page.get_by_role("checkbox").check()  # on again
    before = status_text(page)
    select_option(page, "mcar_rows (MCAR)")
    page.get_by_text("Rows marked w.p. sqrt(rate) lose about sqrt(rate) of their entries").first.wait_for()
    wait_until(lambda: STATUS.search(status_text(page)) and status_text(page) != before, page)

    # a data row picked at random
    page.get_by_role("button", name="data row").click()
    page.get_by_role("button", name="Random row").click()
    page.get_by_text(re.compile(r"row \d+ \(\d+ of \d+ incomplete rows\)")).wait_for()
    wait_for_title(page, "row ")
    wait_for_bokeh(page)
    errors.assert_none()


def test_conditional_page_with_the_variational_model(serve_app, new_page, watch_errors, wait_for_bokeh,
                                                      screenshot):
    url = serve_app({"conditional": "apps/conditional.py"})
    page = new_page(viewport={"width": 1280, "height": 1000})
    errors = watch_errors(page)
    page.goto(f"{url}/conditional")
    wait_for_bokeh(page)
    page.get_by_text(STATUS).wait_for()
    wait_for_title(page, "row 0: p(")

    # the variational DP mixture is fitted in the background when chosen
    select_option(page, "Variational DP mixture")
    page.get_by_text("Truncation K").first.wait_for()  # the slider (the download note may name it too)
    page.get_by_text(re.compile(r"\d+ effective components")).first.wait_for()  # status line and download note
    wait_until(lambda: STATUS.search(status_text(page)) is not None, page)
    page.get_by_text("(plug-in Gaussians)", exact=False).first.wait_for()
    page.wait_for_function("() => window.location.search.includes('model_kind=vb')")

    # its Student-t posterior predictive, on a 2-D slice too
    select_option(page, "Student-t predictive")
    page.get_by_text("(Student-t predictive)", exact=False).first.wait_for()
    page.get_by_role("button", name="custom row").click()
    box = page.get_by_placeholder("e.g. 6.8")
    box.fill("6.8, 3.0, ?, ?")
    box.press("Enter")
    page.get_by_text("custom row: 2 observed, 2 missing").wait_for()
    wait_for_title(page, "custom row: p(petal_length | observed)")
    wait_for_bokeh(page)
    page.wait_for_timeout(300)
    screenshot(page, "conditional_variational")
    select_option(page, "(none: 1-D slice)", "petal_width")
    wait_for_title(page, "custom row: p(petal_length, petal_width | observed)")

    # a variational setting: the thesis update (its ELBO is undefined) refits
    select_option(page, "principled", "thesis")
    page.get_by_text("ELBO undefined", exact=False).wait_for()
    wait_until(lambda: STATUS.search(status_text(page)) is not None, page)

    # back to EM: its fit is still there
    select_option(page, "EM mixture")
    page.get_by_text("Components K").wait_for()
    wait_until(lambda: STATUS.search(status_text(page)) and "effective" not in status_text(page), page)
    wait_for_bokeh(page)
    errors.assert_none()


def test_conditional_page_variational_on_digits(serve_app, new_page, watch_errors, wait_for_bokeh):
    """digits_8x8 has constant (always blank) border pixels: the variational model still fits."""
    url = serve_app({"conditional": "apps/conditional.py"})
    page = new_page(viewport={"width": 1280, "height": 1000})
    errors = watch_errors(page)
    page.goto(f"{url}/conditional")
    wait_for_bokeh(page)
    page.get_by_text(STATUS).wait_for()
    select_option(page, "Variational DP mixture")
    page.get_by_text(re.compile(r"\d+ effective components")).first.wait_for()  # status line and download note
    # the weights legend sits above the bars, not over them
    legends_inside = page.evaluate("""() => [...Bokeh.documents[0].all_models]
        .filter(m => m.type == 'Figure' && m.title && m.title.text && m.title.text.startsWith('Component weights'))
        .map(f => f.center.filter(r => r.type == 'Legend').length + ':' + f.above.filter(r => r.type == 'Legend').length)""")
    assert legends_inside == ["0:1"]

    select_option(page, "digits_8x8")
    # the note comes with the fitted status: 13 VB iterations on 300 x 64 (0.5-0.9 s each on a busy machine)
    page.get_by_text("prior scale W₀ = I", exact=False).wait_for(timeout=60_000)
    wait_until(lambda: STATUS.search(status_text(page)) is not None, page)
    assert "observed_variance" not in page.inner_text("body")
    wait_for_title(page, "row 0: p(r")
    page.get_by_text("The table shows 20 of the 64 features", exact=False).wait_for()
    # the slider counts incomplete rows like the read-out next to the plots (1-based)
    page.get_by_text("Incomplete row (of 300): 1", exact=True).wait_for()
    page.get_by_text("row 0 (1 of 300 incomplete rows)", exact=False).wait_for()
    wait_for_bokeh(page)
    errors.assert_none()
