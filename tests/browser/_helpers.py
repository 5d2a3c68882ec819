"""Small helpers shared by the browser tests (``from tests.browser._helpers import ...``)."""

from __future__ import annotations

from collections.abc import Callable


def select_option(page, option_text: str, label: str | None = None) -> None:
    """Choose ``label`` (default ``option_text``) in the first <select> offering an option with ``option_text``."""
    page.locator("select").filter(has=page.locator("option", has_text=option_text)).first.select_option(
        label=label or option_text)


def wait_for_value(page, read: Callable[[], int], predicate: Callable[[int], bool], timeout_s: float = 15.0) -> int:
    """Poll ``read()`` every 100 ms until ``predicate`` holds; returns the value (fails with the last one)."""
    for _ in range(int(timeout_s / 0.1)):
        value = read()
        if predicate(value):
            return value
        page.wait_for_timeout(100)
    raise AssertionError(f"the value stayed at {read()}")


_HAS_TITLE = """(text) => [...Bokeh.documents[0].all_models].some(
    m => m.type == 'Title' && typeof m.text == 'string' && m.text.includes(text))"""


def wait_for_title(page, text: str, timeout_ms: float | None = None) -> None:
    """Wait until a Bokeh plot title containing ``text`` is in the document (``timeout_ms``: the page's default)."""
    page.wait_for_function(_HAS_TITLE, arg=text, **({} if timeout_ms is None else {"timeout": timeout_ms}))
