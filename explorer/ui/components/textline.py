"""A line of text that changes every frame (a read-out, a caption) drawn by one HTML model made once.

A Panel ``Markdown`` pane re-renders its Markdown and re-sends its stylesheets whenever its text changes: about
1 ms of server CPU per change, several per frame on the factor-analysis pages. :class:`TextLine` keeps the
Bokeh model such a pane would make (Panel's ``HTML`` markup model, so the page reads like any other to the
browser and to ``benchmarks/page_cost.py``) and sets its ``text`` directly (one property, about 0.06 ms). It
takes the little Markdown those lines use: ``**bold**`` and ``*italic*``; everything else is shown as written
(HTML is escaped).
"""

from __future__ import annotations

import html
import re

import panel as pn
from panel.models.markup import HTML
from panel.viewable import Viewer

__all__ = ["TextLine", "inline_markdown"]

_BOLD = re.compile(r"\*\*(.+?)\*\*")
_ITALIC = re.compile(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])")


def inline_markdown(text: str) -> str:
    """``text`` as HTML: escaped, with ``**bold**`` and ``*italic*`` marked up."""
    out = _BOLD.sub(r"<b>\1</b>", html.escape(text, quote=False))
    return _ITALIC.sub(r"<i>\1</i>", out)


def _escaped_html(text: str) -> str:
    return html.escape(inline_markdown(text))


class TextLine(Viewer):
    """One line (or paragraph) of text in an HTML model made once; setting :attr:`object` changes its text only.

    Parameters
    ----------
    text : str
        The first text (inline Markdown, see :func:`inline_markdown`).
    width : int, optional
        Fixed width in pixels; None stretches the line to its container's width.
    margin : tuple
        Panel-style margin (top, right, bottom, left) or (vertical, horizontal).
    styles : dict, optional
        CSS of the line (e.g. ``{"font-size": "12px", "text-align": "center"}``).

    Attributes
    ----------
    model : panel.models.markup.HTML
        The Bokeh model (its ``text`` is the escaped HTML, as Panel's HTML pane sends it).
    pane : panel.pane.Bokeh
    """

    def __init__(self, text: str = "", *, width: int | None = None, margin=(5, 10), styles: dict | None = None):
        super().__init__()
        size = {"width": width, "sizing_mode": "fixed"} if width else {"sizing_mode": "stretch_width"}
        self._text = text
        self.model = HTML(text=_escaped_html(text), styles=styles or {}, **size)
        self.pane = pn.pane.Bokeh(self.model, margin=margin, **size)

    @property
    def object(self) -> str:
        """The text shown (as given, before its Markdown is turned into HTML)."""
        return self._text

    @object.setter
    def object(self, text: str) -> None:
        if text != self._text:
            self._text = text
            self.model.text = _escaped_html(text)

    def __panel__(self):
        return self.pane
