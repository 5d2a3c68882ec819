"""The gallery (apps/main.py) served as a script and as the Bokeh directory app ``apps/``."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]

PAGES = {"em_playground": "EM playground", "conditional": "Conditional density slices",
         "data_mechanism": "Data & mechanism"}


def _open(page, label: str, slug: str) -> None:
    page.get_by_role("button", name=label, exact=True).click()
    page.wait_for_function(f"() => window.location.search.includes('page={slug}')")
    page.locator(".bk-Canvas").first.wait_for()  # the page's plots are drawn
    assert page.get_by_text("Page unavailable", exact=False).count() == 0


def test_gallery_navigates_to_every_page(serve_app, new_page, watch_errors, wait_for_bokeh, screenshot):
    url = serve_app({"main": str(REPO_ROOT / "apps" / "main.py")})
    page = new_page(viewport={"width": 1400, "height": 1000})
    errors = watch_errors(page)
    page.goto(f"{url}/main")
    wait_for_bokeh(page)
    page.get_by_role("heading", name="Built-in data sets").wait_for()
    for title in PAGES.values():  # one card per page
        assert page.get_by_role("button", name=f"Open {title}", exact=True).is_visible()
    assert page.get_by_text("ghahramani_bivariate", exact=False).first.is_visible()
    screenshot(page, "gallery")

    _open(page, "EM playground", "em_playground")
    page.get_by_text("Exact EM · iteration 0", exact=False).wait_for()
    page.get_by_role("button", name="Step", exact=True).click()
    page.get_by_text("Exact EM · iteration 1", exact=False).wait_for()

    _open(page, "Conditional density slices", "conditional")
    _open(page, "Data & mechanism", "data_mechanism")
    page.get_by_role("button", name="Home", exact=True).click()
    page.get_by_role("button", name="Open EM playground", exact=True).click()
    page.get_by_text("Exact EM · iteration 1", exact=False).wait_for()  # built once, state kept
    errors.assert_none()


@pytest.mark.parametrize("slug", ["em_playground"])
def test_directory_app_opens_a_page_from_the_url(slug, serve_app, page, page_errors, wait_for_bokeh):
    # `panel serve apps/` runs apps/ as a Bokeh directory app (main.py) at /apps; pn.serve takes a
    # directory only as a ready-made Bokeh Application (a plain path string would be shown as text)
    from panel.io.application import build_single_handler_application

    url = serve_app({"apps": build_single_handler_application(str(REPO_ROOT / "apps"))})
    page.goto(f"{url}/apps?page={slug}")
    wait_for_bokeh(page)
    page.get_by_text("Exact EM · iteration 0", exact=False).wait_for()
    assert page.get_by_role("button", name=PAGES[slug], exact=True).is_visible()
    page_errors.assert_none()


def test_the_gallery_url_keeps_the_settings_of_the_open_page(serve_app, new_page, watch_errors, wait_for_bokeh):
    """A page's settings go into the gallery's URL (prefixed with the page) and a link restores them."""
    url = serve_app({"main": str(REPO_ROOT / "apps" / "main.py")})
    page = new_page(viewport={"width": 1400, "height": 1000})
    errors = watch_errors(page)
    page.goto(f"{url}/main?page=data_mechanism&data_mechanism.dataset=wine&data_mechanism.mechanism=mcar")
    wait_for_bokeh(page)
    page.get_by_text("178 rows x 13 columns", exact=False).first.wait_for()  # wine, from the link
    page.get_by_text("by mcar", exact=False).first.wait_for()
    box = page.locator("select", has=page.locator("option", has_text="mar_rows (MAR)"))
    box.select_option(label="mar_rows (MAR)")
    page.wait_for_function("() => window.location.search.includes('data_mechanism.mechanism=mar_rows')")
    assert "page=data_mechanism" in page.evaluate("window.location.search")
    link = page.evaluate("window.location.href")
    fresh = new_page(viewport={"width": 1400, "height": 1000})
    fresh.goto(link)
    wait_for_bokeh(fresh)
    fresh.get_by_text("by mar_rows", exact=False).first.wait_for()
    fresh.get_by_text("178 rows x 13 columns", exact=False).first.wait_for()
    errors.assert_none()


def _offers(page, option: str) -> bool:
    return page.locator("select option", has_text=option).count() > 0


def test_an_upload_is_offered_by_every_page_of_the_session(serve_app, new_page, watch_errors, wait_for_bokeh):
    from tests.browser._helpers import select_option

    url = serve_app({"main": str(REPO_ROOT / "apps" / "main.py")})
    page = new_page(viewport={"width": 1440, "height": 900})
    errors = watch_errors(page)
    page.goto(f"{url}/main?page=data_mechanism")
    wait_for_bokeh(page)
    rows = "\n".join(f"{i},{(i * 7) % 11},{i % 5},{(i * 3) % 7 if i % 4 else ''}" for i in range(1, 41))
    page.locator("input[type=file]").set_input_files(
        {"name": "mine.csv", "mimeType": "text/csv", "buffer": f"a,b,c,d\n{rows}\n".encode()})
    page.get_by_text("40 rows x 4 columns", exact=False).first.wait_for()
    # the EM playground (2-D) offers it and draws two of its columns, chosen in the sidebar
    _open(page, "EM playground", "em_playground")
    select_option(page, "uploaded", label="uploaded")
    page.get_by_text("x column", exact=True).first.wait_for()
    page.get_by_text("Exact EM · iteration 0", exact=False).first.wait_for()
    assert page.get_by_text("needs 2-D data", exact=False).count() == 0
    page.get_by_role("button", name="Step", exact=True).click()
    page.get_by_text("Exact EM · iteration 1", exact=False).first.wait_for()
    for label, slug in (("Conditional density slices", "conditional"), ("Variational DP mixture", "variational")):
        _open(page, label, slug)
        assert _offers(page, "uploaded"), f"{slug} does not offer the upload"
    # a link naming uploaded data, opened in a new session, says the file must be uploaded again
    fresh = new_page(viewport={"width": 1440, "height": 900})
    fresh.goto(f"{url}/main?page=data_mechanism&data_mechanism.dataset=uploaded")
    wait_for_bokeh(fresh)
    fresh.get_by_text("Upload the file again", exact=False).first.wait_for()
    errors.assert_none()
