"""Old names kept importable for one release: a module ``__getattr__`` that warns (standard library only).

Use it in the module that renamed something::

    __getattr__ = renamed_names(__name__, globals(), {"OldName": "NewName"})

``module.OldName`` and ``from module import OldName`` then return ``NewName`` with a
``DeprecationWarning``; old names are never in ``__all__``; any other unknown name is an ``AttributeError``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["renamed_names"]


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
