"""Callbacks that do not keep a closed session's view alive (shared by the views; no other view import)."""

from __future__ import annotations

import weakref

__all__ = ["weak_callback"]


def weak_callback(method):
    """A plain function calling the bound ``method`` while its object lives, else doing nothing.

    For stream subscribers and param watchers on objects that outlive the view (a model shared
    with other views, a stream): they must not keep a closed session's view alive.
    """
    ref = weakref.WeakMethod(method)

    def call(*args, **kwargs):
        m = ref()
        if m is not None:
            m(*args, **kwargs)

    return call
