"""Bokeh property defaults computed once per model class instead of at every read.

Bokeh 3 recomputes a property's default each time an unset property is read: it copies the declared
default, looks up the class's overrides and validates the result (``prepare_value``). Serving a page
reads every property of every model several times (the document's model graph is walked when the
page is attached and again to serialise it), and most properties are left at their defaults, so this
recomputation was about a fifth of the server's CPU to open a page of the gallery (py-spy and
``cProfile``; ``docs/NOTES.md``, 2026-11-28 third session).

:func:`install` memoises exactly the defaults whose recomputation cannot give another value: an
*immutable* value (``None``, ``bool``, ``int``, ``float``, ``str``, ``Undefined``) of a property whose
default is *stable* (Bokeh's own term: not a callable, not a container), for an instance with no
theme value for that property; the key is ``(model class, property name)``, so class overrides of a
default are honoured. Containers, callables, model instances and themed values keep Bokeh's path
(a container already made for the instance is returned from the instance's own store, as Bokeh does,
without Bokeh's two failing attribute lookups for the theme). Every read gives a value equal to Bokeh's own (``tests/test_model_defaults.py`` compares
every property of every Bokeh and Panel model class). Process-wide and idempotent; importing
:mod:`explorer.ui.page` (which every page does) calls it. If Bokeh's internals differ from the ones this was
written for (Bokeh 3.x), it installs nothing and says so in the ``explorer`` log.
"""

from __future__ import annotations

import logging

__all__ = ["install", "installed"]

_log = logging.getLogger(__name__)
_installed = False


def installed() -> bool:
    """Whether :func:`install` replaced Bokeh's default lookup in this process."""
    return _installed


def install() -> bool:
    """Memoise Bokeh's stable immutable property defaults (once per process); True if installed now."""
    global _installed
    if _installed:
        return False
    try:
        from bokeh.core.property.descriptors import PropertyDescriptor
        from bokeh.core.property.singletons import Undefined
    except ImportError:  # pragma: no cover - another Bokeh layout
        _log.info("Bokeh property defaults not memoised: unknown Bokeh internals")
        return False
    original = getattr(PropertyDescriptor, "_get_default", None)
    if original is None or not hasattr(PropertyDescriptor, "has_unstable_default"):  # pragma: no cover
        _log.info("Bokeh property defaults not memoised: unknown Bokeh internals")
        return False

    immutable = (type(None), bool, int, float, str, type(Undefined))
    cache: dict[tuple[type, str], object] = {}
    missing = object()

    def _get_default(self, obj):
        # Bokeh reads the theme with getattr(obj, "__themed_values__", None), a failing attribute lookup
        # through HasProps.__getattr__ twice per read; apply_theme stores it in the instance dict
        themed = obj.__dict__.get("__themed_values__")
        name = self.name
        if themed is not None and name in themed:  # a theme's value: Bokeh's path
            return original(self, obj)
        value = obj._unstable_default_values.get(name, missing)  # a container default already made
        if value is not missing:
            return value
        key = (obj.__class__, name)
        value = cache.get(key, missing)
        if value is not missing:
            return value
        value = original(self, obj)
        if type(value) in immutable and not self.has_unstable_default(obj):
            cache[key] = value
        return value

    _get_default.__wrapped__ = original  # type: ignore[attr-defined]
    _get_default.cache = cache  # type: ignore[attr-defined]
    PropertyDescriptor._get_default = _get_default
    _installed = True
    return True
