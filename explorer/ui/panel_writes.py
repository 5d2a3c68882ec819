"""Panel's queued writes to the browser: a queued change message is always sent (Panel 1.9.4 can leave one behind).

When a block of changes made on the event loop ends (Panel's ``unlocked``, under ``pn.io.hold``) while the
session's websocket is busy writing, Panel serialises the changes into a PATCH-DOC message, queues it in
``panel.io.document._WRITE_MSGS`` and starts a task, ``_dispatch_msgs``, that writes the queue while a write block
(``_WRITE_BLOCK``) is set. A task removes the block once it has awaited its writes. A second task, started for a
message queued in the same turn of the loop as the first task's writes completed, runs after the first has removed
the block, finds none and returns: its message stays queued, unsent until a later change queues another. On a page
that then has nothing more to say, never: a Step computed and drawn on the server while the browser shows the
previous iteration for good. That is the signature of the regression page's rare failure under load
(``tests/browser/test_regression_page.py``, about once in a hundred runs: the read-out's message arrived, the one
with the scatter's new title and curve did not, and nothing was pending on the server); with the socket's writes
slowed, Panel's task left messages queued on that page in 2 of 25 runs, this wrapper in none (docs/NOTES.md).

:func:`complete_queued_writes` wraps ``_dispatch_msgs``: when a task has finished and messages are still queued
with no write block, it sets the block and starts a task for them, as queuing them would have. It is installed
when :mod:`explorer.ui.session` is imported (every page imports it), once, and only where Panel has this path.
"""

from __future__ import annotations

__all__ = ["complete_queued_writes"]

_MARK = "_explorer_completes_queued_writes"


def complete_queued_writes() -> bool:
    """Make Panel send every queued change message (see the module's text); True when installed (or already)."""
    try:
        from panel.io import document as panel_document
    except ImportError:  # pragma: no cover - Panel is a dependency
        return False
    original = getattr(panel_document, "_dispatch_msgs", None)
    names = ("_WRITE_MSGS", "_WRITE_BLOCK", "_dispatch_write_task")
    if original is None or not all(hasattr(panel_document, name) for name in names):
        return False  # a Panel that writes another way: nothing to complete
    if getattr(original, _MARK, False):
        return True

    async def dispatch_msgs(doc):
        await original(doc)
        if doc in panel_document._WRITE_MSGS and doc not in panel_document._WRITE_BLOCK:
            # queued while this task awaited its writes, and its own task found the block gone: send them now
            panel_document._WRITE_BLOCK[doc] = True
            panel_document._dispatch_write_task(doc, dispatch_msgs, doc)

    setattr(dispatch_msgs, _MARK, True)
    dispatch_msgs.__wrapped__ = original
    panel_document._dispatch_msgs = dispatch_msgs
    return True
