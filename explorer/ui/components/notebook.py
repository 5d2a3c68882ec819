"""How a page lays out in a Jupyter notebook: its settings above the plots, the plots at full width.

A served page shows ``view.sidebar`` in the template's sidebar and ``view.main`` in its main area
(:func:`~explorer.ui.page.page_template`, the gallery). A notebook shows ``view.__panel__()``
instead, in an output area about 1000 px wide (JupyterLab on a 1440 px screen, file browser open):
there a sidebar beside the plots would squeeze them, so :func:`notebook_layout` puts the controls
above the plots: Step / Play (the section that runs the page) in a row, the other settings in a
collapsible card, and lays the plots out again at that width (at most two side by side). It reuses the page's own widgets and panes: it builds new layouts
only, so the sidebar and main that a server shows are untouched.

Offline (``pn.extension(inline=True)``), Panel inlines every stylesheet when it first draws a page, but
re-sends a pane's stylesheets as CDN addresses whenever the pane changes (a Markdown read-out after
Step, say): with no internet those requests fail and the pane loses its style. The page's layout
therefore points those addresses at the Jupyter server, which serves Panel's ``dist/`` at
``<base url>panel_dist/`` (Panel's server extension, installed with Panel): see :class:`NotebookPage`.
"""

from __future__ import annotations

import os

import panel as pn
from panel.io.document import create_doc_if_none_exists

from explorer.ui.components.player import StepPlayer

__all__ = ["NotebookPage", "jupyter_dist_url", "notebook_layout"]

#: width of a section of settings, or of a run control (the served sidebar is about as wide)
SECTION_WIDTH = 300
#: at most this many stretching plots side by side (about 500 px each in a notebook)
MAX_PER_ROW = 2

_STRETCHING = ("stretch_width", "stretch_both", "scale_width", "scale_both")


def jupyter_dist_url() -> str:
    """Where the Jupyter server running this kernel serves Panel's ``dist/`` (its base URL + ``panel_dist/``)."""
    return os.environ.get("JUPYTERHUB_SERVICE_PREFIX", "/").rstrip("/") + "/panel_dist/"


class NotebookPage(pn.Column):
    """A Column that, drawn in a notebook with inline resources, keeps its later updates offline too.

    The first drawing is inline (Panel's own handling of ``inline=True``). After it, the document's
    ``dist_url`` (the prefix Panel puts in place of its CDN in stylesheet addresses) is the Jupyter
    server's ``panel_dist/``, so stylesheets re-sent with an update load from the server. Nothing
    changes when served, in tests (no comm), with CDN resources, or in VS Code / Colab (their own comms).
    """

    def get_root(self, doc=None, comm=None, preprocess: bool = True):
        doc = create_doc_if_none_exists(doc)
        root = super().get_root(doc, comm, preprocess)
        if comm is not None and pn.config.inline and pn.config.comms == "default":
            doc._template_variables.setdefault("dist_url", jupyter_dist_url())
        return root


def _is_heading(obj) -> bool:
    return isinstance(obj, pn.pane.Markdown) and str(obj.object).lstrip().startswith("#")


def _heading(obj) -> str:
    return str(obj.object).strip().lstrip("#").strip() if _is_heading(obj) else ""


def settings_sections(sidebar) -> list[list]:
    """The sidebar's items cut at every Markdown heading (each piece starts with its heading).

    Items before the first heading are a section of their own; a sidebar without headings gives one
    section per item.
    """
    items = list(getattr(sidebar, "objects", [sidebar]))
    if not any(_is_heading(o) for o in items):
        return [[o] for o in items]
    groups: list[list] = []
    for obj in items:
        if _is_heading(obj) or not groups:
            groups.append([])
        groups[-1].append(obj)
    return groups


def _is_player(obj) -> bool:
    """A Step / Play player, or the layout a Column made of one (a Viewer in a layout is its view)."""
    if isinstance(obj, StepPlayer):
        return True
    select = getattr(obj, "select", None)
    return select is not None and any(getattr(b, "label", None) == "Step" for b in select(pn.widgets.Button))


def _is_run_section(section: list) -> bool:
    """The section that runs the page: it holds the Step / Play player, or its heading is "Run"."""
    return _heading(section[0]) == "Run" or any(_is_player(o) for o in section)


def _reflow(obj, max_per_row: int):
    """A row of more than ``max_per_row`` stretching items as a grid of ``max_per_row`` columns."""
    if (isinstance(obj, pn.Row) and len(obj.objects) > max_per_row
            and all(getattr(o, "sizing_mode", None) in _STRETCHING for o in obj.objects)):
        return pn.GridBox(*obj.objects, ncols=max_per_row, sizing_mode="stretch_width")
    return obj


def notebook_layout(sidebar, main, *, max_per_row: int = MAX_PER_ROW) -> NotebookPage:
    """The page for a notebook: its run controls, its other settings in a card, then ``main`` at full width.

    The section of the sidebar that runs the page (the one with the Step / Play player, or headed
    "Run") stays visible above the plots, its widgets side by side; the other sections go into a
    collapsible card titled with their headings, folded (open when no section runs the page).

    Parameters
    ----------
    sidebar : panel.layout.ListLike
        The page's sidebar (a Column of widgets, with Markdown headings between its sections).
    main : panel.layout.ListLike
        The page's main area. Its rows of more than ``max_per_row`` stretching items (e.g. three
        scatter panels) become grids of ``max_per_row`` columns, so each plot stays readable.
    max_per_row : int
        Most stretching items side by side.

    Returns
    -------
    NotebookPage
        A Column (its updates stay offline in a notebook, see :class:`NotebookPage`) of new layouts
        holding the page's own components: ``sidebar`` and ``main`` are not modified.
    """
    sections = settings_sections(sidebar)
    run = next((s for s in sections if _is_run_section(s)), None)
    others = [s for s in sections if s is not run]
    parts = []
    if run is not None:
        widgets = [o for o in run if not _is_heading(o)]
        parts.append(pn.FlexBox(*[pn.Column(o, width=SECTION_WIDTH, margin=(0, 10, 0, 0)) for o in widgets]))
    if others:
        names = [h for h in (_heading(s[0]) for s in others) if h]
        title = "Settings" + (": " + " · ".join(names) if names else "")
        columns = [pn.Column(*s, width=SECTION_WIDTH, margin=(0, 10, 10, 0)) for s in others]
        parts.append(pn.Card(pn.FlexBox(*columns), title=title, collapsed=run is not None,
                             sizing_mode="stretch_width", margin=(5, 10)))
    body = pn.Column(*[_reflow(o, max_per_row) for o in main.objects], sizing_mode="stretch_width")
    return NotebookPage(*parts, body, sizing_mode="stretch_width")
