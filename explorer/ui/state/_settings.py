"""Settings of a model object as a JSON-serialisable dict (the state of a screen, kept in the URL)."""

from __future__ import annotations

import json

import param

from explorer.core.validation import BadInputError

__all__ = ["MAX_SEED", "Settings"]

#: Largest seed a page accepts (numpy takes any non-negative int; a bound keeps URL values sane).
MAX_SEED = 2**32 - 1


class Settings(param.Parameterized):
    """Mixin: ``settings()`` / ``apply_settings()`` over the parameters named in ``_SETTINGS``."""

    __abstract = True
    _SETTINGS: tuple = ()

    def settings(self) -> dict:
        """The inputs as a JSON-serialisable dict."""
        return json.loads(self.param.serialize_parameters(subset=list(self._SETTINGS)))

    def apply_settings(self, settings: dict) -> None:
        """Set inputs from :meth:`settings` output (unknown keys are an error)."""
        unknown = sorted(set(settings) - set(self._SETTINGS))
        if unknown:
            raise BadInputError(f"Unknown settings {unknown}; accepted: {list(self._SETTINGS)}.")
        self.param.update(**self.param.deserialize_parameters(json.dumps(settings)))
