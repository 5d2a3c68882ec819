"""What a Markdown / Alert pane shows a reader: its text rendered by Panel's own Markdown renderer."""

from __future__ import annotations

import html
import re


def shown(pane) -> str:
    """The plain text a Markdown/Alert ``pane`` (or a Markdown string) displays, white space collapsed."""
    from panel.pane.markup import Markdown

    text = pane if isinstance(pane, str) else pane.object
    rendered = html.unescape(Markdown(text)._transform_object(text)["object"])  # the HTML the browser gets
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", rendered)).split())
