"""Sidebar controls for a :class:`~explorer.ui.state.data_model.DataModel`.

Data set, mechanism (with its own parameters, generated from the mechanism registry), rate,
seeds, a CSV upload, the realised missing rate, and a readable error message when something
cannot be done (the data on screen are then kept as they were).
"""

from __future__ import annotations

import panel as pn
import param
from panel.viewable import Viewer

from explorer.core.missingness.mechanisms import MECHANISMS
from explorer.ui.components.upload import FileUpload, decoded
from explorer.ui.state.data_model import (
    MAX_UPLOAD_BYTES,
    NO_MECHANISM,
    UPLOADED,
    DataModel,
    read_table_with_categories,
)
from explorer.ui.text import html, md

__all__ = ["DataControls", "handle_upload"]

_KIND_OF = {name: m.kind for name, m in MECHANISMS.items()}
# mechanism parameters the controls can edit, by registry kind
_EDITABLE = ("float", "int", "choice", "column", "columns")


def _mechanism_label(name: str) -> str:
    if name == NO_MECHANISM:
        return "none (the data's own gaps)"
    return f"{name} ({_KIND_OF[name]})"


def handle_upload(file: dict | None, model: DataModel, on_table=None) -> str:
    """Give the ``file`` of a :class:`~explorer.ui.components.upload.FileUpload` to the page: a CSV with a text column
    to ``on_table(frame, name)`` when the page takes tables with categories, anything else to ``model``
    (:meth:`DataModel.load_csv`, which refuses text columns with a message, or :meth:`DataModel.refuse_upload` for a
    file refused in the browser for its size). Returns ``"table"``, ``"numeric"`` or ``"refused"``."""
    file = file or {}
    name = str(file.get("name") or "upload.csv")
    content = decoded(file)
    if content is None:  # refused in the browser for its size (or unreadable): nothing was sent
        model.refuse_upload(name, int(file.get("size") or 0))
        return "refused"
    if on_table is not None:
        frame = read_table_with_categories(content)
        if frame is not None:
            on_table(frame, name)
            return "table"
    model.load_csv(content, name)
    return "numeric"


class DataControls(Viewer):
    """Widgets for a DataModel; ``datasets`` and ``mechanisms`` restrict the choices shown."""

    model = param.ClassSelector(class_=DataModel)
    datasets = param.List(default=None, allow_None=True, doc="Data sets offered (default: all)")
    mechanisms = param.List(default=None, allow_None=True, doc="Mechanisms offered (default: all)")
    allow_upload = param.Boolean(default=True)
    show_error = param.Boolean(default=True, doc="Show the data error here (False: the page shows it in its "
                                                 "main area, see explorer.ui.components.banner)")
    on_table = param.Callable(default=None, allow_None=True,
                              doc="Called as on_table(frame, filename) with an uploaded CSV that has text columns, "
                                  "read with them as categories (a page with a mixed-data model takes it); None: "
                                  "every upload goes to the numeric model, which refuses text columns")

    def __init__(self, **params):
        super().__init__(**params)
        m = self.model
        ds_options = self.datasets or list(m.param.dataset.objects)
        if m.dataset not in ds_options:
            ds_options = [m.dataset] + ds_options
        mech_names = self.mechanisms or list(m.param.mechanism.objects)
        self._ds_options = ds_options
        self._dataset = pn.widgets.Select.from_param(m.param.dataset, options=self._dataset_options(),
                                                     label="Data set")
        self._mechanism = pn.widgets.Select.from_param(
            m.param.mechanism, options={_mechanism_label(n): n for n in mech_names}, label="Mechanism"
        )
        self._rate = pn.widgets.FloatSlider.from_param(m.param.rate, step=0.05, label="Missing rate")
        self._n = pn.widgets.IntInput.from_param(m.param.n_samples, label="Rows (synthetic)", step=50)
        self._data_seed = pn.widgets.IntInput.from_param(m.param.data_seed, label="Data seed")
        self._mask_seed = pn.widgets.IntInput.from_param(m.param.mask_seed, label="Mask seed")
        self._summary = pn.pane.Markdown(sizing_mode="stretch_width", margin=(0, 10))
        self._error = pn.pane.Alert("", alert_type="danger", visible=False, sizing_mode="stretch_width")
        self._params_box = pn.Column(sizing_mode="stretch_width")
        # the size is checked in the browser: an oversized file is never sent (it would drop the connection)
        self._upload = FileUpload(max_bytes=MAX_UPLOAD_BYTES, visible=self.allow_upload, sizing_mode="stretch_width")
        self._upload.param.watch(self._on_upload, "file")
        self._reading = pn.pane.Markdown("*Reading the file...*", visible=False, margin=(0, 10))
        self._upload.param.watch(lambda e: setattr(self._reading, "visible", bool(e.new)), "reading")
        m.param.watch(self._refresh, ["revision", "error", "mechanism", "dataset"])
        self._refresh()
        kinds = "numeric or text columns (text: categories, the location model)" if self.on_table else "numeric columns"
        self._layout = pn.Column(
            self._dataset, self._n, self._data_seed, self._mechanism, self._rate, self._params_box,
            self._mask_seed, pn.pane.Markdown(
                f"Upload a CSV ({kinds}, "
                f"empty or `?` = missing; UTF-8, UTF-16 or Latin-1; at most "
                f"{MAX_UPLOAD_BYTES / 2**20:.0f} MB):", visible=self.allow_upload, margin=(5, 10, 0, 10)),
            self._upload, self._reading, self._summary, self._error, sizing_mode="stretch_width",
        )

    def __panel__(self):
        return self._layout

    # ------------------------------------------------------------------ callbacks
    def _dataset_options(self) -> list[str]:
        """The data sets offered; ``uploaded`` only once there is an uploaded file or clicked points."""
        m = self.model
        return [d for d in self._ds_options if d != UPLOADED or m.has_uploaded or m.dataset == UPLOADED]

    def _on_upload(self, event):
        handle_upload(event.new, self.model, self.on_table)

    def _set_param(self, name, value):
        params = dict(self.model.mechanism_params)
        params[name] = value
        self.model.mechanism_params = params

    def _param_widgets(self):
        info = self.model.mechanism_info
        if info is None:
            return []
        data = self.model.complete
        columns = list(data.columns) if data is not None else []
        current = self.model.mechanism_params
        widgets = []
        for p in info.params:
            if p.kind not in _EDITABLE:
                continue
            value = current.get(p.name, p.default)
            label = p.name.replace("_", " ")
            if p.kind == "choice":  # None means "chosen at random / from the data" in the registry
                options = {("random" if c is None else str(c)): c for c in p.choices}
                w = pn.widgets.Select(label=label, options=options, value=value)
            elif p.kind == "int":
                lo, hi = p.bounds or (None, None)
                # a default of None means "derived from the data" (e.g. mar_rows' n_controlling)
                w = pn.widgets.IntInput(label=label, value=None if value is None else int(value), start=lo, end=hi)
            elif p.kind == "float":
                lo, hi = p.bounds or (None, None)
                w = pn.widgets.FloatInput(label=label, value=None if value is None else float(value), start=lo,
                                          end=hi, step=0.1)
            elif p.kind == "column" and columns:
                idx = value % len(columns) if isinstance(value, int) else 0
                w = pn.widgets.Select(label=label, options={c: i for i, c in enumerate(columns)}, value=idx)
            elif p.kind == "columns" and columns:
                vals = [value] if isinstance(value, int) else list(value or [])
                # Choices.js renders option labels as HTML: column names are user data
                w = pn.widgets.MultiChoice(label=label, options={html(c): i for i, c in enumerate(columns)},
                                           value=[v % len(columns) for v in vals])
            else:
                continue
            w.description = p.doc
            w.param.watch(lambda e, name=p.name: self._set_param(name, e.new), "value")
            widgets.append(w)
        return widgets

    def _refresh(self, *events):
        m = self.model
        names = {e.name for e in events}
        if not events or names & {"mechanism", "dataset"}:
            self._params_box.objects = self._param_widgets()
            info = m.mechanism_info
            self._rate.disabled = info is None or not info.has_rate
        if not events or names & {"dataset", "revision"}:
            options = self._dataset_options()
            if options != list(self._dataset.options):
                self._dataset.options = options
            self._n.disabled = not m.takes_n_samples
        self._error.object = md(m.error) if self.show_error else ""  # else the page's banner says it
        self._error.visible = bool(m.error) and self.show_error
        if m.data is not None and m.mask is not None:
            # what is on screen: the mechanism that was applied, which differs from the selected one
            # when the selection could not be applied (the error says why)
            applied = m.mask.mechanism
            summary = (MECHANISMS[applied].summary if applied in MECHANISMS else "the data's own missing values")
            shown = "" if not m.error else " (still showing the last data that worked)"
            self._summary.object = (
                f"**{md(m.data.name or m.dataset)}**: {m.data.n_samples} rows x {m.data.n_features} columns{shown}. "
                f"Missing: **{m.mask.realised_rate:.1%}** of entries "
                f"({len(m.data.pattern_counts()[1])} patterns), by **{applied}**: *{summary}*"
            )
