"""The data a page works on: a data set, a missingness mechanism, and the resulting mask.

:class:`DataModel` is a ``param.Parameterized`` object with no Panel import: every setting is a
bounded, documented parameter (serialisable, so the screen can live in the URL), and the outputs
(``complete``, ``data``, ``mask``, ``error``, ``revision``) are constant parameters that only the
model writes. Views depend on ``revision``, which increases whenever ``data`` changes.

Failures never lose the current data: a bad upload or an infeasible mechanism setting leaves
``data`` as it was and puts a readable message in ``error``.

:class:`MixedDataModel` is its counterpart for the mixed-type tables of :func:`explorer.datasets.load_mixed`
(numbers and categories, pandas DataFrames with real gaps), which :class:`~explorer.core.data.IncompleteData`
cannot hold: a table, plus a share of its observed cells hidden at random (MCAR) so that some missing cells
have a known true value. It loads nothing until a table is chosen.
"""

from __future__ import annotations

import inspect
import io

import numpy as np
import pandas as pd
import param

from explorer import datasets as ds
from explorer import io as eio
from explorer.core.data import IncompleteData, standardize
from explorer.core.missingness.mechanisms import MECHANISMS, MaskResult, apply_mechanism, get_mechanism
from explorer.core.validation import BadInputError, InfeasibleRateError
from explorer.ui.state._settings import MAX_SEED, Settings
from explorer.ui.state.session_data import SessionData

__all__ = ["DataModel", "MIXED_NONE", "MIXED_UPLOADED", "MixedDataModel", "NO_MECHANISM", "UPLOADED",
           "read_table_with_categories"]

NO_MECHANISM = "none"
#: The built-in data sets and mechanisms of the pages that draw 2-D data (EM and variational playgrounds).
DATASETS_2D = ["ghahramani_bivariate", "three_blobs", "anisotropic", "two_moons", "ring"]
MECHANISMS_2D = [NO_MECHANISM, "mcar", "mcar_rows", "mar_threshold", "mar_logistic", "mar_rows",
                 "nmar_lowest", "nmar_random", "self_masking"]
UPLOADED = "uploaded"
#: Largest upload a page takes (base64 over the websocket stays under the server's 20 MB message limit).
MAX_UPLOAD_BYTES = 10 * 1024 * 1024
#: Library advice in upload errors, said in terms of the page.
_UPLOAD_ADVICE = {"Drop them (drop_non_numeric=True or select columns=...)": "Delete those columns from the file",
                  "or impute them as categories with explorer.impute.mixed.MixedMixtureImputer on a DataFrame":
                  "or upload the file on the Conditional density slices page, which fits text columns as categories "
                  "(the location model; from Python: explorer.impute.mixed.MixedMixtureImputer)"}


def _guess_separator(content: bytes) -> str:
    """The field separator of an uploaded table: ',' unless the first line has ';' or a tab and no ','."""
    head = bytes(content[:65536]).decode("utf-8", "replace")
    first = next((line for line in head.splitlines() if line.strip()), "")
    for sep in (",", ";", "\t"):
        if sep in first:
            return sep
    return ","


def _image_datasets() -> list[str]:
    return [info.name for info in ds.list_datasets() if ds.image_shape(info.name) is not None]
_SETTINGS = ("dataset", "n_samples", "data_seed", "mechanism", "rate", "mechanism_params", "mask_seed", "standardize",
             "columns")


def _dataset_names() -> list[str]:
    return [info.name for info in ds.list_datasets()]


class DataModel(Settings):
    """Load a data set and remove values with a missingness mechanism.

    Examples
    --------
    >>> m = DataModel(dataset="ghahramani_bivariate", mechanism="mcar", rate=0.2)
    >>> m.data.n_features, round(m.mask.realised_rate, 1)
    (2, 0.2)
    """

    _SETTINGS = _SETTINGS

    dataset = param.Selector(default="three_blobs", objects=_dataset_names() + [UPLOADED], doc="Data set")
    n_samples = param.Integer(default=300, bounds=(10, 20000), doc="Rows drawn for synthetic data sets")
    data_seed = param.Integer(default=0, bounds=(0, MAX_SEED), doc="Seed of the synthetic data generator")
    mechanism = param.Selector(
        default="mcar", objects=[NO_MECHANISM] + list(MECHANISMS), doc="Missingness mechanism"
    )
    rate = param.Number(default=0.3, bounds=(0.0, 0.95), doc="Requested overall missing rate")
    mechanism_params = param.Dict(default={}, doc="Extra parameters of the mechanism (JSON-serialisable)")
    mask_seed = param.Integer(default=1, bounds=(0, MAX_SEED), doc="Seed of the missingness mechanism")
    standardize = param.Boolean(default=False, doc="Standardise columns with their observed entries")

    complete = param.ClassSelector(class_=IncompleteData, constant=True, allow_None=True, precedence=-1,
                                   doc="The data before amputation (truth where known)")
    data = param.ClassSelector(class_=IncompleteData, constant=True, allow_None=True, precedence=-1,
                               doc="The data with missing values")
    mask = param.ClassSelector(class_=MaskResult, constant=True, allow_None=True, precedence=-1)
    error = param.String(default="", constant=True, precedence=-1, doc="Last error, readable")
    suggestion = param.Dict(default={}, constant=True, precedence=-1,
                            doc="With an error: the nearest setting that works, {'text': ..., 'settings': {...}} "
                                "(see apply_suggestion); {} when there is none")
    revision = param.Integer(default=0, constant=True, precedence=-1, doc="Increases when data changes")
    session = param.ClassSelector(class_=SessionData, default=None, allow_None=True, precedence=-1,
                                  doc="The browser session's user data, shared with its other pages "
                                      "(default: a store of this model's own)")
    pair_only = param.Boolean(default=False, precedence=-1,
                              doc="Keep two columns only (pages that draw 2-D data): ``columns``, else the first two")
    columns = param.List(default=[], item_type=str, doc="With pair_only: the two columns used")

    def __init__(self, **params):
        if params.get("session") is None:
            params["session"] = SessionData()
        super().__init__(**params)
        self._loaded_key: tuple | None = None
        self.all_columns: tuple[str, ...] = ()  # the loaded data set's columns (before pair_only)
        self.session.param.watch(self._on_session_upload, "revision")
        self._load()

    @property
    def _uploaded(self) -> IncompleteData | None:
        return self.session.uploaded

    def _on_session_upload(self, event) -> None:
        """Data given on another page (or this one): shown at once when ``uploaded`` is the data set."""
        if self.dataset == UPLOADED:
            self._load()
        else:  # offered from now on: views listing the data sets follow ``revision``
            self._publish(revision=self.revision + 1)

    # ------------------------------------------------------------------ properties
    @property
    def image_shape(self) -> tuple[int, int] | None:
        """(height, width) when rows are flattened images (a built-in image data set), else None."""
        return None if self.dataset == UPLOADED else ds.image_shape(self.dataset)

    @property
    def takes_n_samples(self) -> bool:
        """Whether the selected data set is synthetic (``n_samples`` and ``data_seed`` change it)."""
        return "n_samples" in self._loader_options()

    def _loader_options(self) -> dict:
        """The options of the selected built-in data set's loader this model sets (none for uploads)."""
        if self.dataset == UPLOADED:
            return {}
        accepted = inspect.signature(ds._entry(self.dataset).load).parameters
        options = {"n_samples": self.n_samples, "random_state": self.data_seed}
        return {k: v for k, v in options.items() if k in accepted}

    @property
    def has_uploaded(self) -> bool:
        """Whether an uploaded file or user-given points exist (the ``uploaded`` data set)."""
        return self._uploaded is not None

    @property
    def mechanism_info(self):
        return None if self.mechanism == NO_MECHANISM else get_mechanism(self.mechanism)

    # ------------------------------------------------------------------ effects
    def _publish(self, **outputs):
        if "error" in outputs and not outputs["error"]:
            outputs.setdefault("suggestion", {})
        with param.edit_constant(self):
            self.param.update(**outputs)

    def _fail(self, exc: Exception):
        self._publish(error=str(exc), suggestion=self._suggestion_for(exc))

    def _suggestion_for(self, exc: Exception) -> dict:
        """The nearest setting that works after ``exc`` ({} if none is known)."""
        if isinstance(exc, InfeasibleRateError):
            hi = exc.feasible[1]
            rate = min(float(np.floor(hi * 1000) / 1000), self.param.rate.bounds[1])  # just inside the range
            if rate <= 0:
                return {}
            return {"text": f"The largest feasible rate here is {hi:.1%}.", "label": f"Use {rate:.1%}",
                    "settings": {"rate": rate}}
        return dict(getattr(exc, "suggestion", None) or {})

    def apply_suggestion(self) -> bool:
        """Apply the suggested settings (after an error); False when there is nothing to apply."""
        settings = dict(self.suggestion.get("settings") or {})
        if not settings:
            return False
        self.param.update(**settings)
        return True

    @param.depends("dataset", "n_samples", "data_seed", "standardize", "columns", "pair_only", watch=True)
    def _load(self):
        """Read the data set and apply the mechanism; on failure keep the previous data *and* its
        complete version (never a new ``complete`` next to an old ``data``) and say why."""
        try:
            complete = self._read_dataset()
            data, mask = self._amputated(complete)
        except BadInputError as exc:
            self._fail(exc)
            return
        self._loaded_key = self._load_key()
        self._publish(complete=complete, data=data, mask=mask, error="", revision=self.revision + 1)

    def _load_key(self) -> tuple:
        return (self.dataset, self.n_samples, self.data_seed, self.standardize, id(self._uploaded),
                tuple(self.columns), self.pair_only)

    def _read_dataset(self) -> IncompleteData:
        if self.dataset == UPLOADED:
            if self._uploaded is None:
                exc = BadInputError(
                    "This link names uploaded data, but no file has been uploaded in this browser session: "
                    "uploaded files stay with the session that uploaded them and cannot travel in a link. "
                    "Upload the file again (\"Upload a CSV\" on the Data & mechanism page or in this sidebar).")
                shown = self._loaded_key[0] if self._loaded_key else None
                if shown and shown != UPLOADED:
                    exc.suggestion = {"text": f"Or go back to the data on screen ({shown}).",
                                      "label": f"Use {shown}", "settings": {"dataset": shown}}
                raise exc
            data = self._uploaded
        else:
            data = ds.load_dataset(self.dataset, **self._loader_options())
        self.all_columns = tuple(data.columns)
        return self._pair(data)

    def _pair(self, data: IncompleteData) -> IncompleteData:
        """With ``pair_only``: ``data`` restricted to the chosen two columns (else its first two)."""
        if not self.pair_only or data.n_features <= 2:
            return data
        cols = list(data.columns)
        pair = [c for c in self.columns if c in cols][:2]
        if len(pair) < 2 or pair[0] == pair[1]:
            pair = cols[:2]
        idx = [cols.index(c) for c in pair]
        if list(self.columns) != pair:
            with param.parameterized.discard_events(self):  # no reload: this is the load
                self.columns = pair
        return IncompleteData.from_array(
            data.values[:, idx], missing=data.missing[:, idx],
            truth=None if data.truth is None else data.truth[:, idx], columns=pair,
            binary=[data.binary[j] for j in idx] if data.binary else None, name=data.name,
            description=(f"{data.description}; " if data.description else "") + f"columns {pair[0]} and {pair[1]}")

    @param.depends("mechanism", "rate", "mechanism_params", "mask_seed", watch=True)
    def _amputate(self):
        complete = self.complete
        if complete is None or self._loaded_key != self._load_key():
            self._load()  # the selected data set is not the one on screen (its load had failed): load it now
            return
        try:
            data, mask = self._amputated(complete)
        except BadInputError as exc:
            self._fail(exc)
            return
        self._publish(data=data, mask=mask, error="", revision=self.revision + 1)

    def _amputated(self, complete: IncompleteData):
        data, mask = self._apply(complete)
        if self.standardize:
            data, _ = standardize(data)
        return data, mask

    def _apply(self, complete: IncompleteData):
        if self.mechanism == NO_MECHANISM or complete.truth is None:
            missing = complete.missing
            mask = MaskResult(missing, None, float(missing.mean()), NO_MECHANISM, "given", {})
            return complete, mask
        mech = get_mechanism(self.mechanism)
        params = dict(self.mechanism_params)
        if mech.image:
            if self.image_shape is None:
                exc = BadInputError(
                    f"Mechanism {mech.name!r} is an image mask; choose an image data set "
                    f"({', '.join(_image_datasets())}) or a tabular mechanism."
                )
                exc.suggestion = {"text": "MCAR works on any data set.", "label": "Use mcar",
                                  "settings": {"mechanism": "mcar"}}
                raise exc
            params.setdefault("image_shape", self.image_shape)
        if "binary" in mech.param_names:
            params.setdefault("binary", complete.binary)
        rng = np.random.default_rng(self.mask_seed)
        mask = apply_mechanism(complete.truth, mech.name, self.rate if mech.has_rate else None, rng=rng, **params)
        return complete.with_missing(mask.missing), mask

    # ------------------------------------------------------------------ actions
    def load_csv(self, content: bytes, filename: str = "upload.csv") -> bool:
        """Use an uploaded CSV file (bytes). Returns False (and sets ``error``) if it cannot be used.

        The file's own missing cells (empty, ``?``, ``NA``) are kept as missing and no mechanism
        is applied on top unless one is chosen afterwards.
        """
        try:
            if not bytes(content or b"").strip():
                raise BadInputError("the file is empty.")
            if len(content) > MAX_UPLOAD_BYTES:  # before decoding anything
                raise BadInputError(f"the file has {len(content):,} bytes; the limit is {MAX_UPLOAD_BYTES:,}.")
            data = eio.from_csv(content, max_bytes=MAX_UPLOAD_BYTES, sep=_guess_separator(content))
        except BadInputError as exc:
            message = str(exc)
            for library, page in _UPLOAD_ADVICE.items():
                message = message.replace(library, page)
            self._fail(BadInputError(f"{filename}: {message}"))
            return False
        self.session.put(IncompleteData.from_array(
            data.values, missing=data.missing, columns=data.columns, name=filename,
            description=data.description,
        ))  # every page of the session offers it from now on
        # (when ``uploaded`` was already the data set, the store's news reloaded it)
        with param.parameterized.batch_call_watchers(self):
            self.param.update(mechanism=NO_MECHANISM if data.missing.any() else self.mechanism, dataset=UPLOADED)
        return not self.error

    def refuse_upload(self, filename: str, size: int) -> None:
        """Say that ``filename`` (``size`` bytes) was not taken because it is too large; data kept as they were."""
        self._fail(BadInputError(
            f"{filename}: the file has {size / 2**20:.1f} MB; the limit is {MAX_UPLOAD_BYTES / 2**20:.0f} MB. Upload a "
            "smaller file (a subset of the rows or columns), or use the library from Python for large data "
            "(explorer.io.from_csv)."))

    def set_points(self, X) -> None:
        """Replace the data by user-given complete points (e.g. clicked in a 2-D view)."""
        try:
            data = IncompleteData.from_complete(np.asarray(X, dtype=float), columns=self.complete.columns
                                                if self.complete is not None and self.complete.n_features == np.shape(X)[1]
                                                else None, name="points")
        except BadInputError as exc:
            self._fail(exc)
            return
        self.session.put(data)  # reloads this model when ``uploaded`` is its data set already
        self.dataset = UPLOADED  # else: triggers _load


# ----------------------------------------------------------------------------- mixed-type tables
#: :attr:`MixedDataModel.dataset` when no table is chosen (nothing loaded).
MIXED_NONE = "none"
#: :attr:`MixedDataModel.dataset` of a table given by :meth:`MixedDataModel.use_table` (an uploaded CSV).
MIXED_UPLOADED = "uploaded"


def _mixed_names() -> list[str]:
    return [info.name for info in ds.list_mixed()]


class MixedDataModel(Settings):
    """A mixed-type table (numbers and categories) with a share of its observed cells hidden at random.

    ``data`` is the table of :func:`explorer.datasets.load_mixed` (its own gaps kept) with, in addition, each
    observed cell hidden with probability ``hide_rate`` (MCAR, seed ``mask_seed``); ``hidden`` marks those cells,
    whose true values are in ``complete``. A column never loses all its observed cells. With ``dataset`` =
    :data:`MIXED_NONE` nothing is loaded (``data`` is None).

    Examples
    --------
    >>> m = MixedDataModel(dataset="penguins", hide_rate=0.1)
    >>> m.data.shape, str(m.data["sex"].dtype), bool(m.hidden.any())
    ((344, 8), 'category', True)
    """

    _SETTINGS = ("dataset", "hide_rate", "mask_seed")

    dataset = param.Selector(default=MIXED_NONE, objects=[MIXED_NONE] + _mixed_names() + [MIXED_UPLOADED],
                             doc="Mixed-type table (none: no table; uploaded: the table given by use_table)")
    hide_rate = param.Number(default=0.1, bounds=(0.0, 0.5), doc="Share of the observed cells hidden at random (MCAR)")
    mask_seed = param.Integer(default=1, bounds=(0, MAX_SEED), doc="Seed of the hidden cells")

    complete = param.ClassSelector(class_=pd.DataFrame, constant=True, allow_None=True, precedence=-1,
                                   doc="The table as loaded (its own gaps only): the truth of the hidden cells")
    data = param.ClassSelector(class_=pd.DataFrame, constant=True, allow_None=True, precedence=-1,
                               doc="The table with its own gaps and the hidden cells")
    hidden = param.Array(default=None, constant=True, allow_None=True, precedence=-1,
                         doc="(n_rows, n_columns) bool: the cells hidden here (true value known)")
    error = param.String(default="", constant=True, precedence=-1, doc="Last error, readable")
    revision = param.Integer(default=0, constant=True, precedence=-1, doc="Increases when data changes")

    def __init__(self, **params):
        self._uploaded = None  # (name, DataFrame) of use_table
        super().__init__(**params)
        self._load()

    @property
    def uploaded_name(self) -> str | None:
        """The name of the table given by :meth:`use_table` (None before one is)."""
        return None if self._uploaded is None else self._uploaded[0]

    def use_table(self, frame: pd.DataFrame, name: str) -> bool:
        """Show ``frame`` (numbers and ``category`` columns, NaN = missing, e.g. an uploaded CSV read by
        :func:`explorer.io.read_csv_table`) as the ``uploaded`` table; ``hide_rate`` of its observed cells are hidden
        as for the built-in tables. Returns False (and sets ``error``, keeping the table shown) if it cannot be used."""
        try:
            if not isinstance(frame, pd.DataFrame) or frame.shape[0] < 2 or frame.shape[1] < 2:
                raise BadInputError(f"{name}: a table of at least 2 rows and 2 columns is needed, got "
                                    f"{getattr(frame, 'shape', None)}.")
            data, hidden = hide_cells(frame, self.hide_rate, np.random.default_rng(self.mask_seed))
        except BadInputError as exc:
            self._publish(error=str(exc))
            return False
        self._uploaded = (str(name), frame)
        if self.dataset == MIXED_UPLOADED:  # a second upload: the watcher would not fire
            self._publish(complete=frame, data=data, hidden=hidden, error="", revision=self.revision + 1)
        else:
            self.dataset = MIXED_UPLOADED
        return not self.error

    @property
    def info(self):
        """The chosen table's :class:`~explorer.datasets.MixedDatasetInfo` (None without a table)."""
        return next((i for i in ds.list_mixed() if i.name == self.dataset), None)

    @property
    def categorical(self) -> list[str]:
        """The categorical columns of ``data`` (category dtype), in column order."""
        if self.data is None:
            return []
        return [str(c) for c in self.data.columns if isinstance(self.data[c].dtype, pd.CategoricalDtype)]

    def incomplete_rows(self) -> np.ndarray:
        """Positions of the rows of ``data`` with at least one missing cell."""
        if self.data is None:
            return np.zeros(0, dtype=int)
        return np.flatnonzero(self.data.isna().to_numpy().any(axis=1))

    def _publish(self, **outputs):
        with param.edit_constant(self):
            self.param.update(**outputs)

    @param.depends("dataset", "hide_rate", "mask_seed", watch=True)
    def _load(self):
        if self.dataset == MIXED_NONE:
            self._publish(complete=None, data=None, hidden=None, error="", revision=self.revision + 1)
            return
        try:
            if self.dataset == MIXED_UPLOADED:
                if self._uploaded is None:
                    raise BadInputError("No table with categories has been uploaded in this browser session: upload a "
                                        "CSV with text columns under the data set (the numeric data's upload).")
                complete = self._uploaded[1]
            else:
                complete = ds.load_mixed(self.dataset)
            data, hidden = hide_cells(complete, self.hide_rate, np.random.default_rng(self.mask_seed))
        except BadInputError as exc:
            self._publish(error=str(exc))
            return
        self._publish(complete=complete, data=data, hidden=hidden, error="", revision=self.revision + 1)


def read_table_with_categories(content: bytes) -> pd.DataFrame | None:
    """An uploaded CSV read with its text columns as categories (:func:`explorer.io.read_csv_table`, the size limit and
    separator of :meth:`DataModel.load_csv`), or None when it has no text column or cannot be read that way (the
    numeric upload then reports why)."""
    if not bytes(content or b"").strip() or len(content) > MAX_UPLOAD_BYTES:
        return None
    try:
        frame = eio.read_csv_table(io.BytesIO(content), max_bytes=MAX_UPLOAD_BYTES, sep=_guess_separator(content))
    except BadInputError:
        return None
    if not any(isinstance(frame[c].dtype, pd.CategoricalDtype) for c in frame.columns):
        return None
    return frame


def hide_cells(frame: pd.DataFrame, rate: float, rng: np.random.Generator) -> tuple[pd.DataFrame, np.ndarray]:
    """``frame`` with each observed cell hidden with probability ``rate`` (MCAR), and the (n, d) mask of those.

    Every column keeps at least one observed cell (one hidden cell is given back to a column that would lose
    them all); the dtypes (categories and their levels) are kept.
    """
    observed = frame.notna().to_numpy()
    hidden = observed & (rng.random(observed.shape) < rate)
    for j in np.flatnonzero(observed.any(axis=0) & ~(observed & ~hidden).any(axis=0)):
        hidden[rng.choice(np.flatnonzero(hidden[:, j])), j] = False
    out = frame.copy()
    for j, column in enumerate(frame.columns):
        if hidden[:, j].any():
            out[column] = frame[column].mask(hidden[:, j])
    hidden.setflags(write=False)
    return out, hidden
