"""What the served pages share: the template, the Panel set-up and the settings kept in the URL.

``apps/<page>.py`` builds its page with :func:`page_template` (``create_app()``), and a view keeps
its settings in the query string with :func:`sync_with_url` (its ``sync_url()`` method). Both do
nothing URL-related outside a served session (Jupyter, scripts, tests). :class:`ModelPage` is the
base of the playgrounds: a ``data_model`` plus a lead model whose settings are the screen's.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Callable, Iterable

import panel as pn
from panel.viewable import Viewer

from explorer.ui.components.banner import DataErrorBanner
from explorer.ui.components.flow import flow
from explorer.ui.components.notebook import notebook_layout
from explorer.ui.model_defaults import install as _install_model_defaults
from explorer.ui.session import served_doc
from explorer.ui.text import md
from explorer.ui.url import UrlBinding, UrlState
from explorer.ui.weak import weak_callback
from explorer.utils.memory import TRIMMER

_install_model_defaults()  # Bokeh's stable property defaults once per class: ~20 % of a page's open

__all__ = ["HEADER_BACKGROUND", "ModelPage", "PageTemplate", "freeze_startup_objects", "bind_url", "page_template", "prefixed", "show_notices", "sync_with_url",
           "url_bindings_of", "url_notice", "weak_callback"]

HEADER_BACKGROUND = "#2f6fb3"
log = logging.getLogger(__name__)


def sync_with_url(*bindings: UrlBinding) -> bool:
    """Mirror parameters in the page URL's query string (shareable screens), when served.

    The link's values are applied to these bindings only (validated: see
    :class:`~explorer.ui.url.UrlState`); values that could not be used are logged. Pages built by
    :func:`page_template` show them instead (use :func:`bind_url` to get them).

    Returns
    -------
    bool
        True if synced; False (nothing done) outside a server session: Jupyter, scripts, tests.
    """
    state = UrlState.of_session()
    for notice in state.bind(bindings):
        log.warning("%s", notice)
    return state.active


def bind_url(bindings: Iterable[UrlBinding]) -> list[str]:
    """Like :func:`sync_with_url`, returning the notices about link values that were clamped or ignored."""
    return UrlState.of_session().bind(bindings)


def url_notice() -> pn.pane.Alert:
    """The (hidden) alert a page shows link notices in: see :func:`show_notices`."""
    return pn.pane.Alert("", alert_type="warning", visible=False, sizing_mode="stretch_width")


def show_notices(alert: pn.pane.Alert, notices: Iterable[str]) -> None:
    """Show ``notices`` (plain text about link values) in ``alert``, escaped; hide it when there are none."""
    notices = list(notices)
    alert.object = "\n\n".join(md(n) for n in notices)
    alert.visible = bool(notices)


_CLOSED_SOCKET_ERRORS = ("WebSocketClosedError", "StreamClosedError")
_startup_frozen = False


def freeze_startup_objects() -> bool:
    """Keep what the server process imported out of every later garbage collection (once per process).

    A full collection walks every tracked object: about 100 ms for the 200,000 objects of the imports alone
    (NumPy, SciPy, Panel, Bokeh, the explorer), paid again by each automatic full collection while a class
    is on and by Panel's ``gc.collect()`` after every closed session. ``gc.freeze()`` moves them to a
    permanent generation that collections skip; they are still freed normally when unreferenced. Called
    before the first session's page is built, so no session's objects are frozen. Returns True the first time.
    """
    global _startup_frozen
    if _startup_frozen:
        return False
    _startup_frozen = True
    gc.collect()
    gc.freeze()
    return True


def quiet_closed_tab_writes() -> None:
    """Keep writes to a tab closed mid-update out of the server log (installed once per event loop).

    When a tab closes while its page updates, Panel 1.9 has already started writes to the closing
    socket. When the session ends it cancels the task that awaits them, so their
    ``WebSocketClosedError`` is never read and asyncio logs "Task exception was never retrieved"
    with a traceback for every such tab: noise that hides real errors in a classroom server's log.
    This event-loop exception handler drops exactly that case (an unread closed-socket error of a
    write task) and passes everything else to the handler that was there before. The messages such a
    tab sent but the server had not handled yet are kept out of the log by :class:`ClosedConnectionFilter`.
    """
    _install_closed_connection_filter()
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    previous = loop.get_exception_handler()
    if getattr(previous, "_explorer_quiet", False):
        return

    closed_errors = _CLOSED_SOCKET_ERRORS  # held here: at interpreter exit, when the loop's last pending tasks are
    # reported, module globals may already be None (the handler then raised "argument of type 'NoneType' ...")

    def handler(loop, context):
        exc = context.get("exception")
        if type(exc).__name__ in closed_errors and "never retrieved" in str(context.get("message", "")):
            return
        if previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    handler._explorer_quiet = True
    loop.set_exception_handler(handler)


class ClosedConnectionFilter(logging.Filter):
    """Drops Bokeh's "error handling message" records for a message of a connection that already closed.

    A tab that closes while its messages wait for the server (a busy server, a page still sending its first
    patches) has its connection detached from the session before those messages are handled; Bokeh then
    fails on ``assert self._session is not None`` in ``ServerConnection.session`` and logs the message with
    a traceback. Nothing is lost (the tab is gone). Only that exact failure is dropped: any other error of
    the message handler is logged as before.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if not isinstance(exc, AssertionError) or not str(record.msg).startswith("error handling message"):
            return True
        tb = exc.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        code = tb.tb_frame.f_code if tb is not None else None
        closed = (code is not None and code.co_name == "session"
                  and code.co_filename.replace("\\", "/").endswith("bokeh/server/connection.py"))
        return not closed


def _install_closed_connection_filter() -> None:
    logger = logging.getLogger("bokeh.server.protocol_handler")
    if not any(isinstance(f, ClosedConnectionFilter) for f in logger.filters):
        logger.addFilter(ClosedConnectionFilter())


def prefixed(bindings: Iterable[UrlBinding], prefix: str) -> list[UrlBinding]:
    """The same bindings with ``prefix`` before every query name (pages sharing one URL: the gallery)."""
    return [(obj, {name: prefix + query for name, query in dict(names).items()}) for obj, names in bindings]


def url_bindings_of(module, view) -> list[UrlBinding]:
    """The URL bindings of a page: ``module.url_bindings(view)``, else ``view.url_bindings()``, else none."""
    if hasattr(module, "url_bindings"):
        return list(module.url_bindings(view))
    if hasattr(view, "url_bindings"):
        return list(view.url_bindings())
    return []


class PageTemplate(pn.template.BootstrapTemplate):
    """Panel's BootstrapTemplate, its document built under one Bokeh model freeze.

    The template adds its parts to the document as separate roots; each ``add_root`` ends with Bokeh
    walking the whole model graph again (``DocumentModelManager.recompute``): eight walks of every
    model per page opened, about a quarter of the server's CPU for the open. Under one freeze the
    graph is walked once, when the document is complete.
    """

    def _init_doc(self, doc=None, comm=None, title=None, notebook=False, location=True):
        document = doc if doc is not None else pn.state.curdoc
        if document is None:
            return super()._init_doc(doc, comm, title, notebook, location)
        with document.models.freeze():
            return super()._init_doc(document, comm, title, notebook, location)


def page_template(title: str, create_view: Callable, *, extensions: tuple = (), stretch_width: bool = True,
                  threaded: bool = False, sidebar_width: int = 340,
                  url: Callable[[object], Iterable[UrlBinding]] | None = None) -> PageTemplate:
    """The served page of ``apps/<page>.py``: Panel set up, a fresh view, its settings in the URL.

    Parameters
    ----------
    title : str
        Title in the template's header.
    create_view : callable
        ``create_view() -> view``: a Viewer with ``sidebar`` and ``main`` (built after Panel is set up).
    extensions : tuple of str
        Panel extensions to load (e.g. ``("tabulator",)``).
    stretch_width : bool
        Make ``sizing_mode="stretch_width"`` the default of the page's components.
    threaded : bool
        Give the session a thread pool (``nthreads=4``) when served without ``--num-threads``, so
        that periodic callbacks (Play, progress polling) run off the event loop.
    sidebar_width : int
        Width of the template's sidebar in pixels.
    url : callable, optional
        ``url(view) -> [(object, {parameter: query name}), ...]``, the parameters kept in the URL
        (see :func:`sync_with_url`). Default: the view's own ``url_bindings()``. Link values that
        were clamped or ignored are said in a notice above the page.

    Returns
    -------
    PageTemplate
        A BootstrapTemplate. Sidebar: ``view.sidebar``; main area: ``view.main``.
    """
    if pn.state.curdoc is not None and pn.state.curdoc.session_context is not None:
        freeze_startup_objects()
    pn.extension(*extensions, **({"sizing_mode": "stretch_width"} if stretch_width else {}), notifications=False)
    if threaded and pn.config.nthreads is None:  # served without --num-threads: still work off the event loop
        pn.extension(nthreads=4)
    view = create_view()
    if pn.state.curdoc is not None and pn.state.curdoc.session_context is not None:
        quiet_closed_tab_writes()
        # a closed session's heap goes back to the OS (glibc keeps it otherwise): one trim per burst of closes
        pn.state.on_session_destroyed(TRIMMER.request)
    bindings = url(view) if url is not None else view.url_bindings()
    notice = url_notice()
    show_notices(notice, bind_url(bindings))
    # busy_indicator=None: Panel keeps every template's spinner in one process-wide list and sets all of them
    # whenever any session handles an event, so each student's click also sent a patch to every other open
    # tab (and cost ~10-15 % of a Step here); the pages show their own progress instead
    return PageTemplate(title=title, sidebar=[view.sidebar], main=[notice, view.main],
                                         sidebar_width=sidebar_width, header_background=HEADER_BACKGROUND,
                                         busy_indicator=None)


class ModelPage(Viewer):
    """A page on a ``data_model`` and a lead model: layout ``self._layout`` (``sidebar`` + ``main``).

    Subclasses set ``_LEAD`` (the attribute holding the lead model, also the key of its settings)
    and ``_DATA_URL`` / ``_LEAD_URL`` (the data and lead-model parameters that are the state of the
    screen, kept in the URL), and build the layout with :meth:`_arrange`.
    """

    __abstract = True
    _LEAD: str = ""
    _DATA_URL: tuple = ()
    _LEAD_URL: tuple = ()

    def __panel__(self):
        return self._layout

    def _arrange(self, sidebar, panels: list, plots: list, explanation: str) -> None:
        """Set ``sidebar``, ``main`` and the notebook layout (settings above main, see ``_notebook``).

        ``main`` is: the data error with its suggestion (``self._banner``), the models' error alert
        (``self._alert``), an info line (``self._info``), a row of ``panels``, a row of HoloViews
        ``plots`` (axes not linked) and the ``explanation`` (Markdown).
        """
        self._alert = pn.pane.Alert("", alert_type="danger", visible=False, sizing_mode="stretch_width")
        self._info = pn.pane.Markdown("", sizing_mode="stretch_width", margin=(0, 10))
        self.sidebar = sidebar
        # wrapped onto the next line rather than squeezed under 420 px (see _flow)
        results = [flow(*panels), flow(*plots)]
        # a data setting that cannot be applied: said first, with the nearest one that works (results dimmed)
        self._banner = DataErrorBanner(data_model=self.data_model, results=results)
        self.main = pn.Column(
            self._banner, self._alert, self._info, *results,
            pn.pane.Markdown(explanation, sizing_mode="stretch_width"),
            sizing_mode="stretch_width",
        )
        self._layout = notebook_layout(self.sidebar, self.main)

    _served_doc = staticmethod(served_doc)  # the session's document, None when not served

    def _on_destroyed(self, session_context) -> None:
        """Session-destroyed hook: a page's worker results are dropped from then on (see ``_destroyed``)."""
        self._destroyed = True

    def settings(self) -> dict:
        """Data and model settings (JSON-serialisable): the state of the screen."""
        lead = getattr(self, self._LEAD).settings()
        return {"data": self.data_model.settings(), self._LEAD: {k: lead[k] for k in self._LEAD_URL}}

    def url_bindings(self) -> list[UrlBinding]:
        """The data and lead-model settings that are the state of the screen, as URL bindings."""
        return [(self.data_model, {k: k for k in self._DATA_URL}),
                (getattr(self, self._LEAD), {k: k for k in self._LEAD_URL})]

    def sync_url(self, prefix: str = "") -> bool:
        """Keep the data and model settings in the page URL (when served). Returns True if synced."""
        return sync_with_url(*prefixed(self.url_bindings(), prefix))
