"""Old names and old module paths kept importable for one release, with a warning (standard library only).

A renamed name: in the module that renamed it::

    __getattr__ = renamed_names(__name__, globals(), {"OldName": "NewName"})

``module.OldName`` and ``from module import OldName`` then return ``NewName`` with a
``DeprecationWarning``; old names are never in ``__all__``; any other unknown name is an ``AttributeError``.

A moved module: the parent package of the old paths calls :func:`moved_modules` with ``{old: new}``
(dotted names) when it is imported, which happens before any of its submodules is looked up.
``import old`` / ``from old import name`` then warn and give the new module itself (one module object under
both names, so a monkeypatch through either path reaches the same functions). The old paths are not files:
the tree shows only where things are now.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["moved_modules", "moved_names", "renamed_names"]


def renamed_names(module_name: str, namespace: Mapping[str, Any], renames: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` resolving each old name of ``renames`` to its new name, with a warning."""
    renames = dict(renames)

    def __getattr__(name: str) -> Any:
        try:
            new = renames[name]
        except KeyError:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}") from None
        warnings.warn(f"{module_name}.{name} is renamed {module_name}.{new}; the old name will be removed",
                      DeprecationWarning, stacklevel=2)
        return namespace[new]

    return __getattr__


def moved_names(module_name: str, moves: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for names that moved to another module (``{name: new module}``), with a warning.

    ``module.name`` and ``from module import name`` then give the object of the new module, with a
    ``DeprecationWarning``; any other unknown name is an ``AttributeError``.
    """
    moves = dict(moves)

    def __getattr__(name: str) -> Any:
        try:
            target = moves[name]
        except KeyError:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}") from None
        warnings.warn(f"{module_name}.{name} has moved to {target}.{name}; the old path will be removed in the next "
                      "release", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(target), name)

    return __getattr__


class _MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds each old module path and loads it as the module at its new path, with a warning."""

    def __init__(self) -> None:
        self.moves: dict[str, str | tuple[str, ...]] = {}

    def find_spec(self, fullname, path=None, target=None):  # noqa: D102 (importlib protocol)
        if fullname not in self.moves:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):  # noqa: D102 (importlib protocol): the default module, replaced below
        return None

    def exec_module(self, module) -> None:  # noqa: D102 (importlib protocol)
        old = module.__name__
        new = self.moves[old]
        warnings.warn(f"{old} has moved to {' and '.join(new) if isinstance(new, tuple) else new}; the old path "
                      "will be removed in the next release", DeprecationWarning, stacklevel=2)
        if isinstance(new, tuple):  # split in several modules: a thin module that looks in each of them
            targets = [importlib.import_module(name) for name in new]
            module.__all__ = [name for target in targets for name in getattr(target, "__all__", ())]

            def __getattr__(name: str) -> Any:
                for target in targets:
                    if hasattr(target, name):
                        return getattr(target, name)
                raise AttributeError(f"module {old!r} has no attribute {name!r}")

            module.__getattr__ = __getattr__
            return
        # the import system returns whatever sys.modules holds under the old name once this returns
        sys.modules[old] = importlib.import_module(new)


_FINDER = _MovedModuleFinder()


def moved_modules(moves: Mapping[str, str | tuple[str, ...]]) -> None:
    """Keep each old dotted module path of ``moves`` importable as its new path, with a ``DeprecationWarning``.

    A tuple of new paths (a module split in several) gives a thin module whose names are looked up in each.

    Idempotent; the finder is installed once, at the end of :data:`sys.meta_path` (it only answers for the
    old paths, which no other finder knows).
    """
    _FINDER.moves.update(moves)
    if _FINDER not in sys.meta_path:
        sys.meta_path.append(_FINDER)
