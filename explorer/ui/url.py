"""Settings kept in the page URL: read once, validated, written back as they change.

A served page keeps its settings in the query string (``?page=em_playground&em_playground.rate=0.3``)
so a link reproduces the screen. Panel's ``pn.state.location.sync`` re-applies the *whole* current
query to *every* synced object each time a new object is synced; in the gallery, where a page's
settings are synced when the page is first opened, that re-applied the stale ``page=`` of the
query to the menu and made it lag one page behind (and trapped the user on a page). It also passes
URL values to the parameters unchecked: ``data_seed=`` followed by 400 nines reached Bokeh, which
cannot serialise it, and blanked the page.

:class:`UrlState` replaces it:

- :meth:`UrlState.bind` applies the link's values to *one* set of bindings (the page being
  built), each value parsed by its parameter's type and checked against its bounds and choices;
  a value that cannot be used is **clamped** (numbers out of bounds) or **ignored**, and each such
  case is returned as a plain-text notice for the page to show;
- from then on the bound parameters are written to the URL as they change (one history entry per
  change, Panel's ``Location`` behaviour), never read back;
- :func:`parse_value` is the pure parsing/validation step (tested without a server).

Outside a served session (Jupyter, scripts, tests) nothing is read or written.
"""

from __future__ import annotations

import json
import math
import urllib.parse
from collections.abc import Iterable, Mapping

import param

__all__ = ["MAX_VALUE_CHARS", "UrlState", "parse_value", "read_query"]

#: Longest query value considered (longer ones are ignored with a notice).
MAX_VALUE_CHARS = 2000
#: Integers beyond this cannot reach the browser exactly (JavaScript numbers).
MAX_SAFE_INTEGER = 2**53 - 1

#: ``(parameterized object, {parameter name: query-string name})``
UrlBinding = tuple[param.Parameterized, Mapping[str, str]]


class UrlValueError(ValueError):
    """A query value that cannot be used (the message says why, in plain words)."""


def read_query(search: str) -> dict[str, str]:
    """``?a=1&b=x`` -> ``{"a": "1", "b": "x"}``: raw strings (no type guessing), last value wins."""
    return dict(urllib.parse.parse_qsl((search or "").lstrip("?"), keep_blank_values=True))


def request_arguments(arguments) -> dict[str, str]:
    """Tornado-style request arguments (``{name: [b"value", ...]}``) as raw strings, last value wins."""
    out = {}
    for name, values in (arguments or {}).items():
        if isinstance(values, (list, tuple)):
            if not values:
                continue
            values = values[-1]
        out[str(name)] = values.decode("utf-8", "replace") if isinstance(values, bytes) else str(values)
    return out


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "\u2026"


def _json(raw: str):
    try:
        return json.loads(raw)
    except ValueError:
        raise UrlValueError("is not valid JSON") from None


def _clamp(p: param.Number, value):
    """``(value within p's hard bounds, note or "")``."""
    lo, hi = p.bounds if p.bounds is not None else (None, None)
    if lo is not None and value < lo:
        return lo, f"is below the smallest allowed value {lo}; {lo} is used"
    if hi is not None and value > hi:
        return hi, f"is above the largest allowed value {hi}; {hi} is used"
    return value, ""


def parse_value(p: param.Parameter, raw: str):
    """Parse the query text ``raw`` for parameter ``p``: ``(value, note)``.

    ``note`` is "" when ``raw`` was used as given, else why it was clamped. Raises
    :class:`UrlValueError` (a plain-words reason) when it cannot be used at all.
    """
    if len(raw) > MAX_VALUE_CHARS:
        raise UrlValueError(f"is {len(raw):,} characters long (at most {MAX_VALUE_CHARS:,})")
    text = raw.strip()
    if isinstance(p, param.Boolean):
        if text.lower() in ("true", "1", "yes", "on"):
            return True, ""
        if text.lower() in ("false", "0", "no", "off"):
            return False, ""
        raise UrlValueError("is not true or false")
    if isinstance(p, param.Integer):
        try:
            value = int(text)
        except ValueError:
            raise UrlValueError("is not a whole number") from None
        if abs(value) > MAX_SAFE_INTEGER:  # out of any sensible range; clamping would only mislead
            raise UrlValueError(f"is too large (at most {MAX_SAFE_INTEGER:,} in absolute value)")
        return _clamp(p, value)
    if isinstance(p, param.Number):
        try:
            value = float(text)
        except ValueError:
            raise UrlValueError("is not a number") from None
        if not math.isfinite(value):
            raise UrlValueError("is not a finite number")
        return _clamp(p, value)
    if isinstance(p, param.ListSelector):  # before Selector: it is one
        value = _json(text)
        if not isinstance(value, list):
            raise UrlValueError("is not a list")
        allowed = list(p.objects.values() if isinstance(p.objects, dict) else p.objects)
        if allowed and any(v not in allowed for v in value):
            raise UrlValueError("names a choice that is not offered")
        return value, ""
    if isinstance(p, param.Selector):  # Selector and ObjectSelector
        objects = list(p.objects.values() if isinstance(p.objects, dict) else p.objects)
        for obj in objects:
            if isinstance(obj, str) and obj == raw:
                return obj, ""
        for obj in objects:  # non-string choices (numbers): compare their JSON / str forms
            if not isinstance(obj, str) and (str(obj) == text or json.dumps(obj) == text):
                return obj, ""
        shown = ", ".join(map(str, objects[:12])) + (", ..." if len(objects) > 12 else "")
        raise UrlValueError(f"is not one of the choices ({shown})")
    if isinstance(p, param.Dict):
        value = _json(text)
        if not isinstance(value, dict):
            raise UrlValueError("is not a JSON object")
        return value, ""
    if isinstance(p, (param.List, param.Tuple)):
        value = _json(text)
        if not isinstance(value, list):
            raise UrlValueError("is not a list")
        return (tuple(value) if isinstance(p, param.Tuple) else value), ""
    if isinstance(p, param.String):
        return raw, ""
    try:  # anything else: JSON, else the text itself
        return json.loads(text), ""
    except ValueError:
        return raw, ""


def _serialize(obj: param.Parameterized, name: str) -> str | None:
    value = getattr(obj, name)
    if value is None:
        return None
    try:
        value = obj.param[name].serialize(value)
    except Exception:
        pass
    return value if isinstance(value, str) else json.dumps(value)


class UrlState:
    """The settings of one browser session kept in its URL (see the module docstring).

    Parameters
    ----------
    location : panel.io.location.Location or None
        ``pn.state.location`` of the session; None (not served) makes every method a no-op.
    """

    def __init__(self, location=None, *, loaded: bool = True, arguments: Mapping[str, str] | None = None):
        self._loc = location
        # the request's query, for a session whose location is still empty (see query())
        self._arguments = dict(arguments or {})
        self._watchers: list[tuple[param.Parameterized, object]] = []
        # before the browser has loaded the page, its own address replaces whatever the server writes:
        # writes wait until then (see of_session)
        self._loaded = loaded
        self._pending: dict[str, str] = {}

    @classmethod
    def of_session(cls) -> UrlState:
        """The current served session's URL state (a no-op object outside a served session)."""
        import panel as pn  # views layer: Panel is available here

        loc, doc = pn.state.location, pn.state.curdoc
        served = loc is not None and doc is not None and doc.session_context is not None
        if not served:
            return cls(None)
        state = cls(loc, loaded=False, arguments=request_arguments(pn.state.session_args))
        pn.state.onload(state._on_load)
        return state

    def _on_load(self) -> None:
        """The page is loaded: from now on writes go to the address bar; pending ones go now."""
        self._loaded = True
        pending, self._pending = self._pending, {}
        self.write(pending)

    @property
    def active(self) -> bool:
        return self._loc is not None

    def query(self) -> dict[str, str]:
        """The query string now, as raw strings.

        Before the page has loaded, a location without a query falls back to the request's arguments: a
        session created by its websocket rather than by the page's GET (with ``--num-procs 2`` the two
        may reach different server processes) has only those, taken from the session token.
        """
        if self._loc is None:
            return {}
        query = read_query(self._loc.search)
        if not query and not self._loaded and self._arguments:
            return dict(self._arguments)
        return query

    def apply(self, bindings: Iterable[UrlBinding], query: Mapping[str, str] | None = None) -> list[str]:
        """Set the bound parameters from ``query`` (default: the URL now); returns notices (plain text).

        Valid values of one object are set together (one batch of events); a value the object
        still refuses (a combination it cannot use) is reported and left out.
        """
        query = self.query() if query is None else query
        notices: list[str] = []
        for obj, names in bindings:
            values = {}
            for pname, qname in dict(names).items():
                if qname not in query:
                    continue
                raw = query[qname]
                try:
                    value, note = parse_value(obj.param[pname], raw)
                except UrlValueError as exc:
                    notices.append(f"The link's {qname}={_short(raw)!r} was ignored: it {exc}.")
                    continue
                if note:
                    notices.append(f"The link's {qname}={_short(raw)!r} {note}.")
                try:
                    same = bool(value == getattr(obj, pname))
                except Exception:
                    same = False
                if not same:
                    values[pname] = value
            if not values:
                continue
            try:
                obj.param.update(**values)
            except Exception:
                for pname, value in values.items():  # find the value(s) the object refuses
                    try:
                        obj.param.update(**{pname: value})
                    except Exception as exc:
                        qname = dict(names)[pname]
                        notices.append(f"The link's {qname}={_short(str(query[qname]))!r} was ignored: {exc}")
        return notices

    def bind(self, bindings: Iterable[UrlBinding], *, apply: bool = True) -> list[str]:
        """Apply the URL's values to ``bindings`` (when ``apply``), then keep the URL up to date with them.

        Returns the notices of :meth:`apply`. Only these bindings are touched: objects bound
        earlier are not re-read (that re-reading is what made the gallery's menu lag).
        """
        if self._loc is None:
            return []
        bindings = [(obj, dict(names)) for obj, names in bindings]
        notices = self.apply(bindings) if apply else []
        current = {}
        for obj, names in bindings:
            watcher = obj.param.watch(lambda *events, names=names: self._on_change(names, events), list(names))
            self._watchers.append((obj, watcher))
            for pname, qname in names.items():
                value = _serialize(obj, pname)
                if value is not None:
                    current[qname] = value
        self.write(current)
        return notices

    def write(self, values: Mapping[str, str]) -> None:
        """Put ``values`` (query name -> text) in the URL; no change, no new history entry."""
        if self._loc is None or not values:
            return
        if not self._loaded:
            self._pending.update(values)
            return
        query = self.query()
        new = query | dict(values)
        if new != query:
            self._loc.search = "?" + urllib.parse.urlencode(new)

    def _on_change(self, names: Mapping[str, str], events) -> None:
        values = {}
        for e in events:
            value = _serialize(e.obj, e.name)
            if value is not None and e.name in names:
                values[names[e.name]] = value
        self.write(values)

    def close(self) -> None:
        """Stop writing (remove the watchers); idempotent."""
        for obj, watcher in self._watchers:
            try:
                obj.param.unwatch(watcher)
            except Exception:
                pass
        self._watchers.clear()
