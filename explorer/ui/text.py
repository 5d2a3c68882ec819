"""User strings are data, never markup: the one place where user text meets Markdown or HTML.

File names, column names, cell values, URL values and error messages that quote them come from the
user. Panel's Markdown, Alert and HTML panes (and Choices.js labels of ``MultiChoice``) render their
text as markup, so every user string interpolated into them goes through one of these helpers:

- :func:`md` for Markdown / Alert panes: HTML characters become entities and Markdown punctuation
  is backslash-escaped, so ``<img onerror=...>``, ``**bold**`` or ``[link](javascript:...)`` show
  as the literal text they are;
- :func:`html` for HTML panes and HTML labels (Choices.js, Tabulator titles).

Text the project writes itself (headings, explanations) needs neither.
"""

from __future__ import annotations

import html as _html
import re

__all__ = ["html", "md", "shorten"]

# every ASCII punctuation character Markdown (CommonMark) lets a backslash escape, except '&' and
# ';' (entities made by html.escape must survive) and the ones html.escape already turned into entities
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~=:$^])")


def html(text) -> str:
    """``text`` (any object, ``str()``-ed) escaped for HTML: ``<``, ``>``, ``&``, quotes become entities."""
    return _html.escape(str(text), quote=True)


def md(text) -> str:
    """``text`` escaped for a Markdown pane: shows literally, never as HTML or Markdown formatting.

    Runs of white space (new lines included) become one space: a user string is one line of text.
    """
    # quote=False: quotes are plain text in Markdown, and their entities (&#x27;) would meet the '#' escape
    escaped = _MD_SPECIAL.sub(r"\\\1", _html.escape(str(text), quote=False))
    return " ".join(escaped.split())


def shorten(text, limit: int = 80) -> str:
    """``str(text)`` cut to ``limit`` characters (with an ellipsis), for quoting user values in messages."""
    text = str(text)
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"
