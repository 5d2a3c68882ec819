"""Gallery navigation: menu clicks, back / forward and reloads always land on the clicked page.

Each step checks the three things a user sees: the highlighted menu entry, the page named in the
URL, and only that page's sidebar and main area on screen. Also: a malformed link never leaves a
blank page (its values are checked, and the ones that cannot be used are said in a notice).
"""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

TITLES = {"home": "Home", "em_playground": "EM playground", "conditional": "Conditional density slices",
          "data_mechanism": "Data & mechanism", "variational": "Variational DP mixture",
          "benchmark": "Benchmark (thesis Fig. A.1-A.5)", "inpainting": "Inpainting with factor models",
          "neumann": "Neumann-series convergence", "responsibilities": "Responsibilities under masking",
          "performance": "EM performance", "decision_surface": "Decision surfaces",
          "regression": "Regression from the joint density", "mar_not_enough": "MAR is not enough",
          "mechanism_gallery": "Mechanism gallery", "ratings": "Ratings: learning the selection model",
          "sensitivity": "Sensitivity to NMAR: delta adjustment"}

# what is on screen: the active menu entry, the shown page parts (by their page-main-/page-sidebar- class),
# and the font size of the sidebar's headings
_SCREEN_JS = """() => {
  const visible = el => !!(el.offsetWidth || el.offsetHeight || el.getClientRects().length);
  const all = [];
  const walk = root => { for (const el of root.querySelectorAll('*')) { all.push(el); if (el.shadowRoot) walk(el.shadowRoot); } };
  walk(document);
  const parts = {main: [], sidebar: []};
  let active = null; const headings = [];
  for (const el of all) {
    for (const c of el.classList) {
      if (c.startsWith('page-main-') && visible(el)) parts.main.push(c.slice(10));
      if (c.startsWith('page-sidebar-') && visible(el)) parts.sidebar.push(c.slice(13));
    }
    if (el.classList.contains('gallery-menu') && el.shadowRoot) {
      const b = el.shadowRoot.querySelector('button.bk-active'); if (b) active = b.textContent.trim(); }
    if (/^H[2-4]$/.test(el.tagName) && visible(el) && el.getBoundingClientRect().left < 330)
      headings.push([el.tagName, el.textContent.trim(), parseFloat(getComputedStyle(el).fontSize)]);
  }
  return {active, main: [...new Set(parts.main)], sidebar: [...new Set(parts.sidebar)], headings};
}"""


def _screen(page) -> dict:
    return page.evaluate(_SCREEN_JS)


def _server_state() -> str:
    """What the server (this process) holds, for a failure message: per live gallery its page, the page parts its
    sidebar and main hold, whether main shows the loading spinner, and Panel's queue of change messages not yet
    written to the websocket (explorer.ui.panel_writes), so a failure says which side lost the switch."""
    import gc

    from panel.io import document as panel_document

    def marks(column) -> list:
        return [c.split("-", 2)[2] for o in column.objects for c in getattr(o, "css_classes", [])
                if c.startswith(("page-main-", "page-sidebar-"))]

    parts = []
    for gallery in [o for o in gc.get_objects() if type(o).__name__ == "Gallery" and hasattr(o, "page_sidebar")]:
        docs = {doc for doc in (getattr(model, "document", None) for model, _ in gallery.main._models.values())
                if doc is not None}
        queued = sum(len(msgs) for d in docs for msgs in panel_document._WRITE_MSGS.get(d, {}).values())
        blocked = any(d in panel_document._WRITE_BLOCK for d in docs)
        parts.append(f"server: page {gallery.page!r}, main {marks(gallery.main)}, sidebar "
                     f"{marks(gallery.page_sidebar)}, loading {gallery.main.loading}, messages queued {queued}, "
                     f"write block {blocked}")
    return "; ".join(parts) or "server: no live gallery"


def _expect(page, slug: str, timeout_s: float = 30.0, errors=None) -> dict:
    """Wait until the screen shows ``slug`` (menu, URL, parts) and return what is on screen (``errors``: the page's
    browser errors so far go into the failure message)."""
    from playwright.sync_api import Error as PlaywrightError

    screen = {}
    for _ in range(int(timeout_s / 0.25)):
        try:  # back / forward reload the page: an evaluation may meet the navigation
            screen = _screen(page)
            search = page.evaluate("window.location.search")
        except PlaywrightError:
            page.wait_for_timeout(250)
            continue
        url_ok = f"page={slug}" in search or (slug == "home" and "page=" not in search)
        sidebar_ok = screen["sidebar"] == ([] if slug == "home" else [slug])
        if screen["active"] == TITLES[slug] and url_ok and screen["main"] == [slug] and sidebar_ok:
            return screen
        page.wait_for_timeout(250)
    raise AssertionError(f"expected page {slug!r}; on screen: active={screen.get('active')!r}, "
                         f"url={page.url[-80:]!r}, main={screen.get('main')}, "
                         f"sidebar={screen.get('sidebar')}; {_server_state()}; browser errors: {list(errors or [])}")


def _heading_sizes(screen: dict) -> dict:
    return {(tag, text): size for tag, text, size in screen["headings"]}


def test_any_sequence_of_clicks_back_forward_and_reloads_lands_on_the_page(serve_app, new_page, watch_errors,
                                                                          wait_for_bokeh):
    url = serve_app({"apps": str(REPO_ROOT / "apps" / "main.py")})
    page = new_page(viewport={"width": 1440, "height": 900})
    errors = watch_errors(page)
    page.goto(f"{url}/apps?page=em_playground")
    wait_for_bokeh(page)
    _expect(page, "em_playground", errors=errors)
    # every page, then back and forth (the reported trap: neumann, then back to em_playground did nothing)
    sequence = ["neumann", "em_playground", "conditional", "data_mechanism", "variational", "benchmark",
                "inpainting", "responsibilities", "performance", "home", "data_mechanism", "neumann", "em_playground",
                "performance", "decision_surface", "regression", "mar_not_enough", "ratings", "sensitivity",
                "mechanism_gallery", "neumann", "responsibilities", "em_playground",
                "home", "variational"]
    sizes: dict = {}
    visited = ["em_playground"]
    for slug in sequence:
        page.get_by_role("button", name=TITLES[slug], exact=True).first.click()
        screen = _expect(page, slug, errors=errors)
        visited.append(slug)
        for key, size in _heading_sizes(screen).items():  # the same heading keeps its size between visits
            key = (slug, *key)
            assert sizes.setdefault(key, size) == size, f"heading {key} changed size: {sizes[key]} -> {size}"
    # browser back / forward follow the history of the clicks
    page.go_back()
    _expect(page, visited[-2], errors=errors)
    page.go_back()
    _expect(page, visited[-3], errors=errors)
    page.go_forward()
    _expect(page, visited[-2], errors=errors)
    # a reload shows the page of the URL
    page.reload()
    wait_for_bokeh(page)
    _expect(page, visited[-2], errors=errors)
    page.get_by_role("button", name=TITLES["neumann"], exact=True).first.click()
    _expect(page, "neumann", errors=errors)
    page.get_by_role("button", name=TITLES["em_playground"], exact=True).first.click()
    _expect(page, "em_playground", errors=errors)
    # Back right after a reload, before the page has rendered: Chromium keeps the earlier entries
    # same-document, so popstate reaches the new page early (a listener installed by a component missed
    # it under load in CI: the address said em_playground, the screen stayed on Home)
    page.reload(wait_until="domcontentloaded")
    page.go_back()
    _expect(page, "neumann", errors=errors)
    errors.assert_none()


def test_a_malformed_link_never_blanks_the_page(serve_app, new_page, watch_errors, wait_for_bokeh):
    url = serve_app({"apps": str(REPO_ROOT / "apps" / "main.py")})
    page = new_page(viewport={"width": 1440, "height": 900})
    errors = watch_errors(page)
    nines = "9" * 400
    page.goto(f"{url}/apps?page=data_mechanism&data_mechanism.data_seed={nines}&data_mechanism.rate=7"
              "&data_mechanism.dataset=%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E&data_mechanism.mask_seed=abc")
    wait_for_bokeh(page)
    _expect(page, "data_mechanism", errors=errors)
    for expected in ("data_mechanism.data_seed='9999", "too large",  # each value that cannot be used is said
                     "data_mechanism.mask_seed='abc' was ignored: it is not a whole number",
                     "data_mechanism.dataset='<img src=x onerror=alert(1)>' was ignored",  # shown as text
                     "data_mechanism.rate='7' is above the largest allowed value 0.95; 0.95 is used"):
        page.get_by_text(expected, exact=False).first.wait_for()
    page.get_by_text("150 rows x 4 columns", exact=False).first.wait_for()  # iris: the page works
    assert "data_mechanism.data_seed=0" in page.evaluate("window.location.search")  # the URL says what is shown
    # an unknown page name: the home page and a notice
    page.goto(f"{url}/apps?page=nosuchpage")
    wait_for_bokeh(page)
    _expect(page, "home", errors=errors)
    page.get_by_text("The link's page='nosuchpage' was ignored", exact=False).first.wait_for()
    errors.assert_none()
