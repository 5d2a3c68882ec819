"""Students without a browser, for the classroom load test: the requests a browser makes, and nothing else.

A :class:`ProtocolStudent` does what a page in a browser does to the server, over the same HTTP and websocket
connections and in Bokeh's own protocol (``bokeh.protocol``: a message is a header, a metadata and a content
frame, then two frames per buffer):

1. ``GET /apps?page=<slug>``: the server creates the session (runs the gallery for that page) and returns the
   HTML with the session's token;
2. opens the websocket ``/apps/ws`` with that token, waits for the server's ``ACK``, sends ``PULL-DOC-REQ`` and
   reads the whole document (``PULL-DOC-REPLY``);
3. sends the ``document_ready`` event, as BokehJS does once the page is drawn (Panel runs the page's ``onload``
   callbacks on it);
4. afterwards reads every message the server sends (the patches of a playing page) and throws them away, except
   the changes of its Play toggle; it can press Play (``active = true`` on the toggle) and Reset (a
   ``button_click`` event), and presses Reset then Play again when a run ends, as a student would (a
   second between each: a Play sent with the Reset would start on the ended run and end at once).

What it leaves out is the browser's own work: no JavaScript, no layout, no canvas. That is the point: on this
2-core machine thirty Chromium tabs drawing playing plots used four times the CPU of the server itself
(``results/load_sessions/REPORT.md``, the run with ``--clients browser``), so they measured the browsers, not the
server. Students' browsers run on their own computers. The load test still times real Chromium pages (probes)
while these students load the server.

Every student of a class runs on one asyncio loop in one thread (:class:`Classroom`); the main thread calls it
through :meth:`Classroom.call`, bounded by a timeout.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import threading
import time
from urllib.parse import urlencode, urlsplit

import numpy as np

_TOKEN = re.compile(r'"token"\s*:\s*"([A-Za-z0-9_\-.=]+)"')
_msgids = itertools.count(1)
#: A student looks at an ended run this long before Reset, and at the reset page this long before Play
RESTART_PAUSE_S = 1.0


def find_token(html: str) -> str:
    """The session token a Bokeh server page embeds for its websocket (``"token":"..."``)."""
    m = _TOKEN.search(html)
    if m is None:
        raise ValueError("no session token in the page (is it a Bokeh server page?)")
    return m.group(1)


def find_widgets(doc_json, labels=("Play", "Reset")) -> dict[str, str]:
    """Ids of the Toggle / Button models labelled ``labels`` in a serialized Bokeh document (first of each)."""
    found: dict[str, str] = {}
    stack = [doc_json]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node.get("type") == "object" and node.get("name") in ("Toggle", "Button"):
                label = (node.get("attributes") or {}).get("label")
                if label in labels and label not in found and "id" in node:
                    found[label] = node["id"]
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found


def find_readout(doc_json) -> tuple[str | None, float | None]:
    """The id of the Step/Play read-out (the text model that starts with "Iteration:") and the asked pace in
    ticks per second (1000 / the "Tick period (ms)" slider's value), from a serialized Bokeh document."""
    readout, period = None, None
    stack = [doc_json]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            attrs = node.get("attributes") if node.get("type") == "object" else None
            if isinstance(attrs, dict):
                text = attrs.get("text")
                if readout is None and isinstance(text, str) and "Iteration:" in text and "id" in node:
                    readout = node["id"]
                if period is None and attrs.get("title") == "Tick period (ms)" and isinstance(attrs.get("value"),
                                                                                             (int, float)):
                    period = float(attrs["value"])
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return readout, (1000.0 / period if period else None)


def text_changes(content: str, model_id: str) -> int:
    """How many times one ``PATCH-DOC`` content changes the ``text`` of ``model_id`` (a read-out shown anew)."""
    return len(new_texts(content, model_id))


def new_texts(content: str, model_id: str) -> list[str]:
    """The new ``text`` values of ``model_id`` in one ``PATCH-DOC`` content, in order."""
    if model_id not in content or '"text"' not in content:
        return []
    events = json.loads(content).get("events", [])
    return [e.get("new") if isinstance(e.get("new"), str) else "" for e in events
            if e.get("kind") == "ModelChanged" and e.get("attr") == "text" and (e.get("model") or {}).get("id") == model_id]


_ITERATION = re.compile(r"(?:strong>|strong&gt;): (\d+)")


def readout_progress(text: str) -> int | None:
    """The sum of the iterations a Step/Play read-out shows ("Iteration: **EM**: 12 · **naive**: 10"), None when
    it shows none. A tick shown advances it; a Reset lowers it; a change of the rate note leaves it."""
    found = _ITERATION.findall(text or "")
    return sum(int(n) for n in found) if found else None


def playing_pace(times: list, asked: float | None, gap: float = 3.0) -> float | None:
    """Ticks shown per second while a page really plays, as a fraction of the ``asked`` ticks per second.

    ``times`` are the moments a tick was shown (the read-out's iterations advanced); a None in it breaks the
    series (a Reset: no interval across it). Intervals longer than ``gap`` asked periods (a run that ended,
    the student's Reset and the pause before Play) are left out: they measure the student, not the server.
    """
    if not asked:
        return None
    intervals = [b - a for a, b in zip(times, times[1:]) if a is not None and b is not None]
    d = np.asarray(intervals, dtype=float)
    d = d[d <= gap / asked]
    if d.size < 2 or d.sum() <= 0:
        return None
    return float(d.size / d.sum() / asked)


def _frames(msgtype: str, content: dict) -> list[str]:
    header = {"msgid": f"load{next(_msgids)}", "msgtype": msgtype}
    return [json.dumps(header), "{}", json.dumps(content, separators=(",", ":"))]


def patch_frames(events: list[dict]) -> list[str]:
    """The three frames of a ``PATCH-DOC`` message carrying ``events``."""
    return _frames("PATCH-DOC", {"events": events})


def document_ready_event() -> dict:
    return {"kind": "MessageSent", "msg_type": "bokeh_event",
            "msg_data": {"type": "event", "name": "document_ready", "values": {"type": "map"}}}


def button_click_event(model_id: str) -> dict:
    return {"kind": "MessageSent", "msg_type": "bokeh_event",
            "msg_data": {"type": "event", "name": "button_click",
                         "values": {"type": "map", "entries": [["model", {"id": model_id}]]}}}


def active_event(model_id: str, value: bool) -> dict:
    return {"kind": "ModelChanged", "model": {"id": model_id}, "attr": "active", "new": bool(value)}


def play_state_changes(content: str, toggle_id: str) -> list[bool]:
    """The values the server gave the Play toggle's ``active`` in one ``PATCH-DOC`` content (usually none).

    Cheap on the patches of a playing page: the content is parsed only when it names the toggle.
    """
    if toggle_id not in content or '"active"' not in content:
        return []
    events = json.loads(content).get("events", [])
    return [bool(e.get("new")) for e in events
            if e.get("kind") == "ModelChanged" and e.get("attr") == "active"
            and (e.get("model") or {}).get("id") == toggle_id]


class ProtocolStudent:
    """One session driven over Bokeh's protocol (see the module docstring)."""

    def __init__(self, base: str, slug: str, index: int):
        self.base, self.slug, self.index = base.rstrip("/"), slug, index
        self.first_render_s = None  # GET to the whole document read and document_ready sent
        self.get_s = None  # the GET alone (the server builds the session)
        self.error = None
        self.cut = False
        self.playing = False
        self.restarts = 0
        self.messages = 0
        self.bytes = 0
        self.doc_bytes = None  # the document's JSON, as PULL-DOC-REPLY carries it
        self.widgets: dict[str, str] = {}
        self.readout: str | None = None  # the Step/Play read-out's model id
        self.asked_ticks_per_s: float | None = None
        self.tick_times: list = []  # when a tick was shown while playing (None: a Reset broke the series)
        self._progress: int | None = None  # the iterations the read-out showed last
        self.browser_errors: list[str] = []  # the load test's report reads it for every kind of session
        self._ws = None
        self._reader = None
        self._restarting = False

    # ------------------------------------------------------------------ protocol
    async def _read_message(self):
        """(header, content) of the next message; None when the socket closed."""
        ws = self._ws
        header = await ws.read_message()
        if header is None:
            return None
        meta = await ws.read_message()
        content = await ws.read_message()
        if meta is None or content is None:
            return None
        head = json.loads(header)
        size = len(header) + len(meta) + len(content)
        for _ in range(2 * int(head.get("num_buffers", 0))):
            frame = await ws.read_message()
            if frame is None:
                return None
            size += len(frame)
        self.messages += 1
        self.bytes += size
        return head, content

    async def _send(self, frames: list[str]) -> None:
        for frame in frames:
            await self._ws.write_message(frame)

    async def open(self, timeout_s: float) -> None:
        from tornado.httpclient import AsyncHTTPClient, HTTPRequest
        from tornado.websocket import websocket_connect

        t0 = time.monotonic()
        try:
            url = f"{self.base}/apps?{urlencode({'page': self.slug})}"
            resp = await AsyncHTTPClient().fetch(url, request_timeout=timeout_s)
            self.get_s = time.monotonic() - t0
            token = find_token(resp.body.decode("utf-8", "replace"))
            parts = urlsplit(self.base)
            ws_url = f"ws://{parts.netloc}/apps/ws"
            left = max(1.0, timeout_s - (time.monotonic() - t0))
            request = HTTPRequest(ws_url, headers={"Origin": f"{parts.scheme}://{parts.netloc}"},
                                  connect_timeout=left, request_timeout=left)
            self._ws = await websocket_connect(request, subprotocols=["bokeh", token],
                                               max_message_size=200 * 1024 * 1024)

            async def handshake():
                msg = await self._read_message()
                if msg is None or msg[0].get("msgtype") != "ACK":
                    raise RuntimeError(f"expected ACK, got {msg and msg[0].get('msgtype')}")
                await self._send(_frames("PULL-DOC-REQ", {}))
                while True:
                    msg = await self._read_message()
                    if msg is None:
                        raise RuntimeError("the server closed the websocket before sending the document")
                    if msg[0].get("msgtype") == "PULL-DOC-REPLY":
                        return msg[1]
                    if msg[0].get("msgtype") == "ERROR":
                        raise RuntimeError(f"server error: {msg[1][:200]}")

            content = await asyncio.wait_for(handshake(), max(1.0, timeout_s - (time.monotonic() - t0)))
            self.doc_bytes = len(content)
            doc_json = json.loads(content)
            self.widgets = find_widgets(doc_json)
            self.readout, self.asked_ticks_per_s = find_readout(doc_json)
            await self._send(patch_frames([document_ready_event()]))
            self.first_render_s = time.monotonic() - t0
            self._reader = asyncio.ensure_future(self._read_forever())
        except asyncio.TimeoutError:
            self.error = f"not served after {time.monotonic() - t0:.0f} s"
        except Exception as exc:  # noqa: BLE001 - the report says what went wrong
            self.error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"

    async def _read_forever(self) -> None:
        toggle = self.widgets.get("Play")
        while True:
            msg = await self._read_message()
            if msg is None:
                return
            head, content = msg
            if self.readout and self.playing and head.get("msgtype") == "PATCH-DOC":
                now = time.monotonic()
                for text in new_texts(content, self.readout):
                    progress = readout_progress(text)
                    if progress is None:
                        continue
                    if self._progress is not None and progress > self._progress:
                        self.tick_times.append(now)  # a tick shown
                    elif self._progress is not None and progress < self._progress:
                        self.tick_times.append(None)  # a Reset: no interval across it
                    self._progress = progress
            if toggle and head.get("msgtype") == "PATCH-DOC" and self.playing:
                changes = play_state_changes(content, toggle)
                if changes and not changes[-1] and not self._restarting:  # the run ended: as a student would
                    self._restarting = True
                    self.restarts += 1
                    asyncio.ensure_future(self._restart())

    async def _restart(self) -> None:
        """Reset, look at the new start a moment (the reset has run by then), Play again."""
        try:
            await asyncio.sleep(RESTART_PAUSE_S)
            if "Reset" in self.widgets and self.playing:
                await self._send(patch_frames([button_click_event(self.widgets["Reset"])]))
                await asyncio.sleep(RESTART_PAUSE_S)
            if self.playing:
                await self._press_play()
        except Exception:  # noqa: BLE001 - the socket closed meanwhile
            pass
        finally:
            self._restarting = False

    async def _press_play(self) -> None:
        await self._send(patch_frames([active_event(self.widgets["Play"], True)]))

    async def play(self) -> None:
        if "Play" not in self.widgets:
            raise RuntimeError(f"no Play toggle on {self.slug}")
        await self._press_play()
        self.playing = True

    async def close(self) -> None:
        self.playing = False
        if self._ws is not None:
            self._ws.close()
        if self._reader is not None:
            try:
                await asyncio.wait_for(self._reader, 5.0)
            except Exception:  # noqa: BLE001 - closing anyway
                self._reader.cancel()

    def record(self) -> dict:
        return {"index": self.index, "slug": self.slug, "client": "protocol", "first_render_s": self.first_render_s,
                "get_s": self.get_s, "error": self.error, "cut": self.cut, "playing": self.playing,
                "restarts": self.restarts,
                "pace": playing_pace(self.tick_times, self.asked_ticks_per_s), "asked_ticks_per_s": self.asked_ticks_per_s,
                "ticks_shown": len(self.tick_times), "doc_kb": self.doc_bytes and self.doc_bytes / 1e3, "messages": self.messages, "mb_received": self.bytes / 1e6}


class Classroom(threading.Thread):
    """An asyncio loop in a thread of its own, where every :class:`ProtocolStudent` lives."""

    def __init__(self):
        super().__init__(daemon=True, name="load-students")
        self.loop = asyncio.new_event_loop()
        self._started = threading.Event()

    def run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self._started.set()
        self.loop.run_forever()

    def start(self) -> None:
        super().start()
        self._started.wait(10)

    def call(self, coro, timeout_s: float):
        """Run ``coro`` on the class's loop and wait for it (at most ``timeout_s``)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    def open_wave(self, base: str, todo: list[tuple[int, str]], timeout_s: float) -> list[ProtocolStudent]:
        """Open a wave of students together; each is served or has failed when this returns."""
        students = [ProtocolStudent(base, slug, index) for index, slug in todo]

        async def opening():
            await asyncio.gather(*(s.open(timeout_s) for s in students))

        self.call(opening(), timeout_s + 30)
        return students

    def close(self, students: list[ProtocolStudent], timeout_s: float = 30.0) -> None:
        """Close ``students`` (their sockets); the class's loop keeps running for the others."""
        async def closing():
            await asyncio.gather(*(s.close() for s in students), return_exceptions=True)

        self.call(closing(), timeout_s)

    def close_all(self, students: list[ProtocolStudent], timeout_s: float = 30.0) -> None:
        """Close ``students`` and stop the class's loop (the end of the run)."""
        try:
            self.close(students, timeout_s)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
