"""A file upload that checks the size in the browser, before anything is sent.

Panel's ``FileInput`` reads any chosen file and sends it over the websocket in one message. A file
larger than the server's message limit (20 MB by default, less after base64) silently drops the
connection: the page then gives no feedback at all and keeps showing the previous error. This
widget looks at the file's size first: a file over ``max_bytes`` is refused in the browser (only
its name and size reach the server, which says so on the page); a file within the limit is read
and sent as base64 with its name, in one change of ``file``.

``file`` is ``{"name": str, "size": int, "data": base64 str or None, "serial": int}``; ``data`` is
None for a refused file. ``serial`` increases with every choice, so choosing the same file twice
is two events.
"""

from __future__ import annotations

import base64
import binascii

import param
from panel.custom import JSComponent

__all__ = ["FileUpload", "decoded"]


def decoded(file: dict) -> bytes | None:
    """The bytes of an accepted ``file`` (None when it was refused for its size or is malformed)."""
    data = (file or {}).get("data")
    if not isinstance(data, str):
        return None
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None


class FileUpload(JSComponent):
    """``<input type=file>`` with a size limit applied before reading (see the module docstring)."""

    accept = param.String(default=".csv,.txt,.tsv,.dat", doc="File types offered by the browser's dialog")
    max_bytes = param.Integer(default=10 * 2**20, bounds=(1, None), doc="Largest file read and sent")
    file = param.Dict(default={}, doc="The last chosen file (see the module docstring)")
    reading = param.Boolean(default=False, doc="True while the browser reads a chosen file")

    _esm = """
    export function render({ model }) {
      const input = document.createElement("input");
      input.type = "file";
      input.accept = model.accept;
      input.style.width = "100%";
      let serial = 0;
      input.addEventListener("change", () => {
        const f = input.files && input.files[0];
        if (!f) { return; }
        serial += 1;
        const mine = serial;
        if (f.size > model.max_bytes) {
          model.file = {name: f.name, size: f.size, data: null, serial: mine};
          input.value = "";
          return;
        }
        model.reading = true;
        const reader = new FileReader();
        reader.onload = () => {
          const url = String(reader.result || "");
          const comma = url.indexOf(",");
          model.file = {name: f.name, size: f.size, data: comma >= 0 ? url.slice(comma + 1) : "", serial: mine};
          model.reading = false;
          input.value = "";
        };
        reader.onerror = () => {
          model.file = {name: f.name, size: f.size, data: null, serial: mine, error: "unreadable"};
          model.reading = false;
          input.value = "";
        };
        reader.readAsDataURL(f);
      });
      model.on("accept", () => { input.accept = model.accept; });
      return input;
    }
    """
