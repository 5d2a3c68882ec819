"""What keeps a classroom server's log clean and gives closed sessions' memory back (issue 9)."""

from __future__ import annotations

import logging
import sys
import time

from bokeh.server.connection import ServerConnection

from explorer.ui.page import ClosedConnectionFilter, _install_closed_connection_filter
from explorer.utils.memory import MemoryTrimmer, malloc_trim

MSG = "error handling message\n message: %r \n error: %r"


def _record(exc_info, msg=MSG):
    return logging.LogRecord("bokeh.server.protocol_handler", logging.ERROR, __file__, 1, msg, ("m", "e"), exc_info)


def _closed_connection_error():
    """The real failure: Bokeh's ServerConnection.session of a connection whose session was detached."""
    conn = object.__new__(ServerConnection)
    conn._session = None
    try:
        conn.session  # noqa: B018 - the property asserts
    except AssertionError:
        return sys.exc_info()
    raise AssertionError("ServerConnection.session no longer asserts: the filter is obsolete")


def test_the_closed_connection_failure_is_dropped():
    assert ClosedConnectionFilter().filter(_record(_closed_connection_error())) is False


def test_every_other_error_is_kept():
    f = ClosedConnectionFilter()
    try:
        assert 1 == 2  # noqa: PLR0133 - an AssertionError raised elsewhere
    except AssertionError:
        other_assert = sys.exc_info()
    try:
        raise ValueError("a real bug")
    except ValueError:
        value_error = sys.exc_info()
    assert f.filter(_record(other_assert)) is True
    assert f.filter(_record(value_error)) is True
    assert f.filter(_record(None)) is True
    # the same exception under another message is not the case the filter knows
    assert f.filter(_record(_closed_connection_error(), msg="something else")) is True


def test_the_filter_is_installed_once():
    logger = logging.getLogger("bokeh.server.protocol_handler")
    before = list(logger.filters)
    try:
        _install_closed_connection_filter()
        _install_closed_connection_filter()
        assert sum(isinstance(f, ClosedConnectionFilter) for f in logger.filters) == 1
    finally:
        logger.filters[:] = before


def _handler_and_previous():
    """quiet_closed_tab_writes installed on a fresh loop over a recording handler: (handler, contexts passed on)."""
    import asyncio

    from explorer.ui.page import quiet_closed_tab_writes

    passed_on = []
    loop = asyncio.new_event_loop()
    try:
        loop.set_exception_handler(lambda loop, context: passed_on.append(context))

        async def install():
            quiet_closed_tab_writes()

        loop.run_until_complete(install())
        return loop, loop.get_exception_handler(), passed_on
    finally:
        loop.close()


def test_an_unread_closed_socket_error_is_dropped_and_everything_else_passed_on():
    from tornado.websocket import WebSocketClosedError

    loop, handler, passed_on = _handler_and_previous()
    handler(loop, {"message": "Task exception was never retrieved", "exception": WebSocketClosedError()})
    assert passed_on == []
    other = {"message": "Task exception was never retrieved", "exception": ValueError("a real error")}
    pending = {"message": "Task was destroyed but it is pending!"}
    handler(loop, other)
    handler(loop, pending)
    assert passed_on == [other, pending]


def test_the_handler_still_works_when_module_globals_are_gone(monkeypatch):
    """At interpreter exit the loop reports its last pending tasks after modules' globals may be None."""
    from explorer.ui import page

    loop, handler, passed_on = _handler_and_previous()
    monkeypatch.setattr(page, "_CLOSED_SOCKET_ERRORS", None)
    pending = {"message": "Task was destroyed but it is pending!"}
    handler(loop, pending)  # raised TypeError ("argument of type 'NoneType' is not iterable")
    assert passed_on == [pending]


def test_malloc_trim_runs():
    assert malloc_trim() in (True, False)


def test_trimmer_debounces_a_burst_of_closes():
    t = MemoryTrimmer(delay_s=0.2)
    for _ in range(5):
        t.request(object())  # called as a session-destroyed callback: the argument is ignored
        time.sleep(0.02)
    assert t.trims == 0  # still waiting for the burst to end
    deadline = time.monotonic() + 5
    while t.trims == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    assert t.trims == 1


def test_trimmer_cancel():
    t = MemoryTrimmer(delay_s=0.1)
    t.request()
    t.cancel()
    time.sleep(0.3)
    assert t.trims == 0
