"""Download buttons of the pages: the data on screen and its imputations as CSV, Parquet or netCDF.

:class:`DownloadPanel` is a small card (format, number of imputations ``m``, buttons, a note
saying what produced the imputations, the last file or a readable error). Its files are built
when a button is clicked, from the session's current state, by callables the page gives:

* ``imputations(m) -> PageImputations``: the single imputation, ``m`` draws (``m = 0``: none) and
  the mask (:class:`PageImputations`);
* ``masked() -> IncompleteData`` (optional): the data with their gaps.

The imputation files are those of :func:`explorer.export.export_imputations` (one long table
with an ``imputation`` column for CSV / Parquet, 0 = the single imputation, 1..m = the draws,
plus ``missing:<column>`` flags; for netCDF an xarray Dataset with an ``imputation``
dimension). The masked data are a plain table with empty cells (CSV) or NaN (Parquet) where a
value is missing, so the CSV can be uploaded again; the netCDF holds ``values`` (NaN =
missing) and ``missing``.

A failure (a fit that cannot be done, a file too large to send, a column name that the long
table cannot hold) is said under the buttons in the user's terms; nothing is downloaded and the
page keeps its state. File names are built from the data set's name, reduced to safe
characters (:func:`safe_filename`).
"""

from __future__ import annotations

import io
import logging
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import panel as pn
import param
from panel.viewable import Viewer

from explorer.core.deprecation import renamed_names
from explorer.core.validation import BadInputError
from explorer.export import export_imputations
from explorer.ui.text import md

__all__ = ["FORMATS", "MAX_CELLS", "MAX_DOWNLOAD_BYTES", "MAX_IMPUTATIONS", "DownloadPanel", "PageImputations",
           "masked_bytes", "imputations_bytes", "safe_filename"]

log = logging.getLogger(__name__)

#: Formats offered: label -> file suffix.
FORMATS = {"CSV": ".csv", "Parquet": ".parquet", "netCDF": ".nc"}
#: Largest file sent to the browser (base64 over the websocket stays well under its 20 MB message limit).
MAX_DOWNLOAD_BYTES = 10 * 2**20
#: Values (rows x columns x tables) a file may hold: refused before anything is computed beyond it.
MAX_CELLS = 600_000
#: Bounds of the number of multiple imputations.
MAX_IMPUTATIONS = 50
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class PageImputations:
    """What a page's ``imputations(m)`` returns.

    Attributes
    ----------
    imputed : ndarray of shape (n_samples, n_features)
        The single imputation (observed entries unchanged, no NaN).
    samples : ndarray of shape (m, n_samples, n_features) or None
        ``m`` draws of the missing entries (observed entries unchanged).
    missing : ndarray of bool, shape (n_samples, n_features)
        True = the entry was missing and is imputed.
    columns : list of str
    source : str
        Markdown (user strings already escaped): the model that produced them, shown after the download.
    """

    imputed: np.ndarray
    samples: np.ndarray | None
    missing: np.ndarray
    columns: list
    source: str


def safe_filename(*parts, suffix: str, max_length: int = 80) -> str:
    """A file name ``part1_part2..suffix`` of letters, digits, dots, underscores and hyphens only.

    No path separator, no leading dot.

    Each part is ``str()``-ed; a known data suffix (``.csv``, ...) at the end of a part is dropped
    (an uploaded ``data.csv`` gives ``data``); runs of other characters become one ``_``. Empty
    parts are skipped; with nothing left the stem is ``data``.
    """
    cleaned = []
    for part in parts:
        text = re.sub(r"\.(csv|tsv|txt|parquet|nc|json)$", "", str(part).strip(), flags=re.IGNORECASE)
        text = _SAFE.sub("_", text).strip("._-")
        if text:
            cleaned.append(text)
    stem = "_".join(cleaned)[:max_length].strip("._-") or "data"
    return stem + suffix


def _check_cells(n_cells: int, what: str) -> None:
    if n_cells > MAX_CELLS:
        raise BadInputError(
            f"This file would hold {n_cells:,} values ({what}); the page sends at most {MAX_CELLS:,} "
            f"(about {MAX_DOWNLOAD_BYTES / 2**20:.0f} MB). Choose fewer imputations, or export from Python "
            "(explorer.export.export_imputations) or with the command line (explorer impute).")


def _check_size(content: bytes) -> bytes:
    if len(content) > MAX_DOWNLOAD_BYTES:
        raise BadInputError(
            f"This file has {len(content) / 2**20:.1f} MB; the page sends at most "
            f"{MAX_DOWNLOAD_BYTES / 2**20:.0f} MB. Choose fewer imputations or another format, or export from "
            "Python (explorer.export.export_imputations) or with the command line (explorer impute).")
    return content


def imputations_bytes(imp: PageImputations, suffix: str) -> bytes:
    """The bytes :func:`explorer.export.export_imputations` writes for ``imp`` in the ``suffix`` format."""
    with tempfile.TemporaryDirectory(prefix="explorer-download-") as tmp:
        path = Path(tmp) / f"imputations{suffix}"
        export_imputations(path, imp.imputed, imp.samples, imp.missing, columns=imp.columns)
        return _check_size(path.read_bytes())


def masked_bytes(data, suffix: str) -> bytes:
    """The data with their gaps: CSV (empty cell = missing), Parquet (NaN) or netCDF (``values``, ``missing``).

    ``data`` is an :class:`~explorer.core.data.IncompleteData`.
    """
    columns = [str(c) for c in data.columns]
    frame = pd.DataFrame(np.asarray(data.values, dtype=float), columns=columns)
    if suffix == ".csv":
        return _check_size(frame.to_csv(index=False).encode("utf-8"))
    if suffix == ".parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise BadInputError("Parquet needs the pyarrow package on the server; choose CSV or netCDF.") from None
        buffer = io.BytesIO()
        frame.to_parquet(buffer, index=False, engine="pyarrow")
        return _check_size(buffer.getvalue())
    import xarray as xr

    from explorer import __version__

    ds = xr.Dataset(
        {"values": (("row", "column"), frame.to_numpy(), {"long_name": "the data, NaN = missing"}),
         "missing": (("row", "column"), np.asarray(data.missing, dtype=bool), {"long_name": "True = missing"})},
        coords={"row": np.arange(len(frame), dtype=np.int64), "column": np.asarray(columns, dtype=object)},
        attrs={"title": "data with missing values", "source": f"explorer {__version__}"},
    )
    return _check_size(bytes(ds.to_netcdf(engine="scipy")))


class _LazyDownload(pn.widgets.FileDownload):
    """A FileDownload whose callback may refuse (:class:`_Refused`): then nothing is sent or logged."""

    @param.depends("_clicks", watch=True)
    def _transfer(self):
        if self.callback is None:
            return
        try:
            fileobj = self.callback()
        except _Refused:
            return
        self._sync_data(fileobj)


class _Refused(Exception):
    """A download that could not be built; its reason is already on the page."""


class DownloadPanel(Viewer):
    """Format, ``m``, download buttons and their messages for one page.

    Parameters
    ----------
    stem : callable
        ``stem() -> tuple`` of the parts of the file names (data set name, mechanism, model...);
        made safe by :func:`safe_filename`.
    imputations : callable
        ``imputations(m) -> PageImputations`` (``m = 0``: the single imputation only); raises
        :class:`~explorer.core.validation.BadInputError` with a readable message.
    masked : callable, optional
        ``masked() -> IncompleteData``: the data with their gaps (a third button, ``masked_button``; None
        without ``masked``).
    note : callable
        ``note() -> str``: Markdown shown above the buttons (what produces the imputations), user
        strings escaped; re-read by :meth:`refresh`.
    """

    file_format = param.Selector(default="CSV", objects=list(FORMATS), doc="File format")
    n_imputations = param.Integer(default=5, bounds=(1, MAX_IMPUTATIONS), doc="Number of multiple imputations m")

    def __init__(self, *, stem: Callable[[], tuple], imputations: Callable[[int], PageImputations],
                 note: Callable[[], str], masked: Callable | None = None, **params):
        super().__init__(**params)
        self._stem, self._imputations, self._masked, self._note_of = stem, imputations, masked, note
        self._format = pn.widgets.RadioButtonGroup.from_param(
            self.param.file_format, label="Format", color="primary", variant="outline", sizing_mode="stretch_width")
        self._m = pn.widgets.IntInput.from_param(self.param.n_imputations, label="Multiple imputations m",
                                                 start=1, end=MAX_IMPUTATIONS, sizing_mode="stretch_width")
        button = dict(color="primary", variant="outline", sizing_mode="stretch_width")
        self.imputed_button = _LazyDownload(callback=self._file_imputed, label="Imputed data",
                                            filename="imputed.csv", **button)
        self.multiple_button = _LazyDownload(callback=self._file_multiple, label="m imputations",
                                             filename="imputations.csv", **button)
        # only for pages that give the masked data (a hidden button would still be sent to the browser)
        self.masked_button = (None if masked is None else _LazyDownload(
            callback=self._file_masked, label="Masked data (with gaps)", filename="masked.csv", **button))
        self._note = pn.pane.Markdown(sizing_mode="stretch_width", margin=(0, 10), css_classes=["download-note"])
        self._status = pn.pane.Markdown("", sizing_mode="stretch_width", margin=(0, 10), visible=False,
                                        css_classes=["download-status"])
        self._error = pn.pane.Alert("", alert_type="danger", visible=False, sizing_mode="stretch_width",
                                    css_classes=["download-error"])
        self.refresh()
        self._layout = pn.Column(
            pn.pane.Markdown("#### Download", margin=(10, 10, 0, 10)), self._note, self._format, self._m,
            *([] if self.masked_button is None else [self.masked_button]), self.imputed_button, self.multiple_button,
            self._status, self._error,
            sizing_mode="stretch_width", css_classes=["downloads"])

    def __panel__(self):
        return self._layout

    def refresh(self) -> None:
        """Re-read the note (call it when the data or the model shown change)."""
        try:
            self._note.object = self._note_of()
        except Exception:  # a note must never break the page
            log.exception("download note")
            self._note.object = ""

    # ------------------------------------------------------------------ the files (built on the click)
    @property
    def suffix(self) -> str:
        return FORMATS[self.file_format]

    def _file_imputed(self) -> io.BytesIO:
        return self._build(self.imputed_button, "imputed", lambda: self._imputed_file(0))

    def _file_multiple(self) -> io.BytesIO:
        m = int(self.n_imputations)
        return self._build(self.multiple_button, f"imputed_m{m}", lambda: self._imputed_file(m))

    def _file_masked(self) -> io.BytesIO:
        def make():
            data = self._masked()
            if data is None:
                raise BadInputError("No data loaded.")
            _check_cells(data.n_samples * data.n_features, f"{data.n_samples} rows x {data.n_features} columns")
            return masked_bytes(data, self.suffix), "the data on screen, with their gaps"
        return self._build(self.masked_button, "masked", make)

    def _imputed_file(self, m: int):
        imp = self._imputations(m)
        n, d = imp.imputed.shape
        _check_cells(n * d * (m + 1), f"{n} rows x {d} columns x {m + 1} imputation(s)")
        return imputations_bytes(imp, self.suffix), imp.source

    def _build(self, button, what: str, make) -> io.BytesIO:
        """Run ``make() -> (bytes, source)``; name the file; on failure say why and refuse the download."""
        self._error.visible = False
        try:
            stem = self._stem()
            content, source = make()
        except BadInputError as exc:
            self._fail(str(exc))
            raise _Refused() from None
        except Exception as exc:  # unexpected: the user gets a sentence, the server log the traceback
            log.exception("download %s", what)
            self._fail(f"The file could not be built ({type(exc).__name__}: {exc}).")
            raise _Refused() from None
        filename = safe_filename(*stem, what, suffix=self.suffix)
        button.filename = filename
        size = len(content)
        shown = f"{size / 1024:.0f} kB" if size < 2**20 else f"{size / 2**20:.1f} MB"
        self._status.object = f"Last file: **{md(filename)}** ({shown}): {source}."
        self._status.visible = True
        return io.BytesIO(content)

    def _fail(self, message: str) -> None:
        self._error.object = md(message)
        self._error.visible = True


#: Old names (before class names were made unique across explorer), importable for one release with a warning
__getattr__ = renamed_names(__name__, globals(), {"Imputations": "PageImputations"})
