"""The model of the "Decision surfaces" page: classifiers trained on 2-D data with missing features.

Marlin (2008) chapter 6, figures 6.1-6.7 (digest sections 5, 6.4 and 7, figure 9). A
:class:`DecisionModel` holds the settings of the screen (data set, its two feature columns and class
column, missingness mechanism and rate, seeds, the method shown) and computes, without any Panel
import:

* :attr:`DecisionModel.data`, a :class:`ClassificationData`: training and test rows (NaN = missing),
  class codes, axis limits. The synthetic sets (Simple, Mix, Overlap, XOR;
  :mod:`explorer.core.classifiers.synthetic_classification`) draw 100 training and 200 test rows per class as in
  the thesis; the tables (built-in or the session's upload) are split 2/3 - 1/3 per class and
  standardised with the training rows' observed means and deviations;
* a :class:`Surface` of a method (:meth:`DecisionModel.compute_surface`): :math:`P(c \\mid x, y)` on a
  grid, :math:`P(c \\mid y)` for rows missing x (the method's own treatment of a NaN in x), and
  :math:`P(c \\mid x)` for rows missing y, its test loss (mean :math:`-\\log P(c_{true} \\mid x^o)`) and
  error, and for multiple imputation the imputed training points;
* the table of every registered method's test loss and error (:meth:`DecisionModel.score_method`,
  :meth:`DecisionModel.score_all`).

Fitting is slow enough (up to a second per method) that a page runs these off the event loop: the
compute functions are pure (they read the immutable :class:`ClassificationData` given to them) and
the ``publish_*`` methods apply their results, ignoring a result computed for data that are no
longer current (``revision``). Fits depend only on the data, the method and the seed, so their
results are shared by every session of the server (:func:`shared_surface`, :func:`shared_score`): the
start screen's table is computed once per server, not once per student.

:class:`EMClassifierRun` runs the EM mixture classifier (:mod:`explorer.core.classifiers.joint_mixture`) one
iteration at a time for the page's Step / Play / Reset (the protocol of
:class:`explorer.ui.components.player.StepPlayer`).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import io
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import param

from explorer import datasets as ds
from explorer import io as eio
from explorer.core.classifiers.synthetic_classification import DATASETS as SYNTHETIC
from explorer.core.classifiers.synthetic_classification import make_dataset
from explorer.core.data import IncompleteData
from explorer.core.missingness.mechanisms import MECHANISMS, apply_mechanism, get_mechanism
from explorer.core.validation import BadInputError, NonNumericError
from explorer.learn.methods import METHODS, make_method
from explorer.ui.state._settings import MAX_SEED, Settings
from explorer.ui.state._stepped import LockedStepping
from explorer.ui.state.data_model import MAX_UPLOAD_BYTES, NO_MECHANISM, UPLOADED, _guess_separator
from explorer.ui.state.session_data import SessionData

__all__ = ["ClassificationData", "DecisionModel", "EMClassifierRun", "Surface", "TABLES", "SYNTHETIC",
           "MECHANISMS_2D", "GRID_SIZE", "TABLE_COLUMNS", "known_score", "load_classification", "shared_score",
           "shared_surface", "surface_of", "scores_of"]

#: Built-in tables with class labels, and their default pair of feature columns.
TABLES = {"iris": ("petal_length", "petal_width"), "wine": ("flavanoids", "color_intensity"),
          "ionosphere": ("V3", "V5"), "hepatitis": ("ALBUMIN", "PROTIME"), "two_moons": ("x", "y"),
          "three_blobs": ("x", "y")}
#: Mechanisms offered for 2-D data ("patterns" is the thesis's: [1,1], [0,1], [1,0] w.p. 1/3 each).
MECHANISMS_2D = ("patterns", NO_MECHANISM, "mcar", "mar_logistic", "mar_threshold", "self_masking", "nmar_lowest")
GRID_SIZE = 60
TEST_PER_CLASS = 200  # the thesis's test sets
TEST_FRACTION = 1 / 3  # tables: held-out share of every class
MAX_CLASSES = 10
PROBA_FLOOR = 1e-15  # log loss: probabilities clipped here (as scikit-learn's log_loss), so one 0 is not inf
MARGIN = 0.08
STEPPED_MAX_ITER = 300
TABLE_COLUMNS = ("method", "label", "family", "loss", "error_pct", "seconds", "status")
#: Fitted surfaces and scored table rows kept for every session of the server (most recently used).
SURFACES_SHARED = 64
SCORES_SHARED = 2048
_SETTINGS = ("dataset", "n_per_class", "data_seed", "mechanism", "rate", "mask_seed", "x_column", "y_column",
             "class_column", "method", "seed")
_DATA_SETTINGS = _SETTINGS[:-2]


# --------------------------------------------------------------------------- data
@dataclass(frozen=True)
class ClassificationData:
    """Training and test rows of a 2-D classification problem (NaN = missing feature).

    ``y_train`` / ``y_test`` are class codes ``0 .. C-1`` indexing ``classes`` (the labels as text);
    ``X_train_complete`` holds the training rows before amputation (None when unknown); ``xlim`` and
    ``ylim`` cover every observed value with a margin.
    """

    name: str
    columns: tuple[str, str]
    classes: tuple[str, ...]
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    X_train_complete: np.ndarray | None
    xlim: tuple[float, float]
    ylim: tuple[float, float]
    standardised: bool = False
    description: str = ""

    def __post_init__(self):
        for f in ("X_train", "y_train", "X_test", "y_test", "X_train_complete"):
            a = getattr(self, f)
            if a is not None:
                a = np.array(a)
                a.setflags(write=False)
                object.__setattr__(self, f, a)

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    @functools.cached_property
    def fingerprint(self) -> str:
        """A digest of the rows, classes and limits: equal data (in any session) have equal fingerprints."""
        h = hashlib.blake2b(digest_size=16)
        for a in (self.X_train, self.y_train, self.X_test, self.y_test):
            h.update(str(a.shape).encode())
            h.update(np.ascontiguousarray(a).tobytes())
        h.update(repr((self.classes, self.xlim, self.ylim)).encode())
        return h.hexdigest()

    def counts(self) -> dict:
        """Rows of the training set by pattern: complete, missing x only, missing y only, missing both."""
        m = np.isnan(self.X_train)
        return {"complete": int((~m.any(axis=1)).sum()), "missing_x": int((m[:, 0] & ~m[:, 1]).sum()),
                "missing_y": int((m[:, 1] & ~m[:, 0]).sum()), "missing_both": int(m.all(axis=1).sum())}


def _limits(values: np.ndarray) -> tuple[tuple, tuple]:
    lo, hi = np.nanmin(values, axis=0), np.nanmax(values, axis=0)
    span = np.maximum(hi - lo, 1e-6)
    lo, hi = lo - MARGIN * span, hi + MARGIN * span
    return (float(lo[0]), float(hi[0])), (float(lo[1]), float(hi[1]))


def _amputate(X: np.ndarray, mechanism: str, rate: float, rng: np.random.Generator) -> np.ndarray:
    """``X`` with the mechanism's newly missing entries set to NaN (existing NaN stay)."""
    if mechanism == NO_MECHANISM:
        return X.copy()
    mech = get_mechanism(mechanism)
    if np.isnan(X).all(axis=0).any():
        raise BadInputError("A feature has no observed value; choose other columns.")
    mask = apply_mechanism(X, mechanism, rate if mech.has_rate else None, rng=rng)
    out = X.copy()
    out[mask.missing] = np.nan
    return out


def _class_codes(labels) -> tuple[np.ndarray, tuple[str, ...]]:
    """``(codes, names)``: class codes 0..C-1 (sorted labels) and the labels as text."""
    arr = np.asarray(labels)
    if arr.dtype.kind == "f":
        order, codes = np.unique(arr, return_inverse=True)
        return codes.astype(np.intp), tuple(f"{v:g}" for v in order)
    if arr.dtype.kind not in "iub":
        arr = arr.astype(str)
    order, codes = np.unique(arr, return_inverse=True)
    return codes.astype(np.intp), tuple(str(v) for v in order)


def _split(n_classes: int, codes: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Stratified split: ``TEST_FRACTION`` of every class held out (at least one row each side)."""
    train, test = [], []
    for c in range(n_classes):
        rows = rng.permutation(np.flatnonzero(codes == c))
        k = min(max(1, int(round(TEST_FRACTION * rows.size))), rows.size - 1)
        test.append(rows[:k])
        train.append(rows[k:])
    return np.sort(np.concatenate(train)), np.sort(np.concatenate(test))


def _pick_columns(all_columns: tuple[str, ...], x_column: str, y_column: str, defaults: tuple[str, ...]):
    """The two feature columns: the named ones, else the defaults, else the first two."""
    cols = list(all_columns)
    if len(cols) < 2:
        raise BadInputError(f"The data need at least two feature columns; they have {len(cols)}.")
    for c in (x_column, y_column):
        if c and c not in cols:
            raise BadInputError(f"Column {c!r} is not in the data; columns: {', '.join(cols[:20])}.")
    fallback = [c for c in defaults if c in cols]
    dx, dy = (fallback + [c for c in cols if c not in fallback])[:2]
    x = x_column or (dx if dx != y_column else dy)
    y = y_column or (dy if dy != x else dx)
    if x == y:
        raise BadInputError(f"The x and y columns are both {x!r}; choose two different columns.")
    return x, y


def class_candidates(data: IncompleteData) -> list[str]:
    """Columns of an upload usable as the class: 2 to ``MAX_CLASSES`` distinct observed values."""
    out = []
    for j, c in enumerate(data.columns):
        v = data.values[~data.missing[:, j], j]
        if 2 <= np.unique(v).size <= MAX_CLASSES:
            out.append(c)
    return out


def text_classes_as_codes(content: bytes) -> tuple[IncompleteData, dict[str, tuple[str, ...]]]:
    """An uploaded CSV with text columns as numbers for this page: each text column of 2 to :data:`MAX_CLASSES` levels
    becomes codes 0..L-1 (a class candidate; its levels returned by name, in code order) placed after the numeric
    columns, other text columns are left out (a feature must be a number); empty, ``NA`` and ``?`` cells stay
    missing.

    Raises
    ------
    BadInputError
        The file cannot be read, or none of its text columns can be a class.
    """
    frame = eio.read_csv_table(io.BytesIO(content), max_bytes=MAX_UPLOAD_BYTES, sep=_guess_separator(content),
                               max_levels=10_000)
    text = [c for c in frame.columns if isinstance(frame[c].dtype, pd.CategoricalDtype)]
    classes = [c for c in text if 2 <= len(frame[c].cat.categories) <= MAX_CLASSES]
    if not classes:
        raise BadInputError(
            f"text column(s) {', '.join(repr(c) for c in text[:5])} cannot be the class (a class column has 2 to "
            f"{MAX_CLASSES} distinct values) and the features must be numbers; delete them or encode them as numbers.")
    left_out = [c for c in text if c not in classes]
    columns = [c for c in frame.columns if c not in text] + classes  # numbers first: the default axes
    values = np.column_stack([frame[c].cat.codes.to_numpy(dtype=float) if c in classes
                              else frame[c].to_numpy(dtype=float) for c in columns])
    missing = np.column_stack([frame[c].isna().to_numpy() for c in columns])
    note = f"text classes as codes: {', '.join(classes)}" + (
        f"; text column(s) left out: {', '.join(left_out)}" if left_out else "")
    data = IncompleteData.from_array(np.where(missing, 0.0, values), missing=missing, columns=columns, description=note)
    return data, {c: tuple(str(v) for v in frame[c].cat.categories) for c in classes}


def _uploaded_table(uploaded: IncompleteData | None, class_column: str):
    """``(features IncompleteData, labels, class column)`` of the session's upload (rows without a class dropped)."""
    if uploaded is None:
        raise BadInputError(
            "No file has been uploaded in this browser session (uploaded files stay with the session that "
            "uploaded them and cannot travel in a link). Upload a CSV with a class column in the sidebar.")
    candidates = class_candidates(uploaded)
    if not class_column:
        if not candidates:
            raise BadInputError(
                f"No column of {uploaded.name!r} can be the class: a class column needs 2 to {MAX_CLASSES} "
                "distinct values (numeric codes).")
        class_column = candidates[-1]
    if class_column not in uploaded.columns:
        raise BadInputError(f"Class column {class_column!r} is not in the data; columns: "
                            f"{', '.join(uploaded.columns[:20])}.")
    if class_column not in candidates:
        raise BadInputError(f"Column {class_column!r} cannot be the class: it needs 2 to {MAX_CLASSES} distinct "
                            f"values. Columns that can: {', '.join(candidates) or 'none'}.")
    j = list(uploaded.columns).index(class_column)
    keep = ~uploaded.missing[:, j]
    feats = [k for k in range(uploaded.n_features) if k != j]
    X = uploaded.values[np.ix_(keep, feats)]
    data = IncompleteData.from_array(X, missing=uploaded.missing[np.ix_(keep, feats)],
                                     columns=[uploaded.columns[k] for k in feats], name=uploaded.name)
    return data, uploaded.values[keep, j], class_column


def load_classification(dataset: str, *, n_per_class: int = 100, data_seed: int = 0, mechanism: str = "patterns",
                        rate: float = 0.3, mask_seed: int = 1, x_column: str = "", y_column: str = "",
                        class_column: str = "", uploaded: IncompleteData | None = None,
                        class_levels: dict | None = None) -> ClassificationData:
    """Training and test rows of ``dataset`` with the mechanism's missing values (see the module docstring).

    Parameters
    ----------
    dataset : str
        One of :data:`SYNTHETIC`, :data:`TABLES` or ``"uploaded"`` (then ``uploaded`` is used; ``class_levels``
        maps a column of it that was text to its levels, which name the classes coded 0..L-1).
    n_per_class : int
        Training rows per class of a synthetic set (the test set has ``TEST_PER_CLASS`` per class).
    data_seed, mask_seed : int
        Seeds of the generator / split and of the mechanism.
    mechanism : str
        A key of :data:`explorer.core.missingness.mechanisms.MECHANISMS` or ``"none"`` (keep the data's own gaps);
        applied to the training and the test rows independently.
    rate : float
        Requested missing rate (mechanisms that have one).
    x_column, y_column, class_column : str
        Tables only ("" = the default pair / the last column with few values).

    Raises
    ------
    BadInputError
        For an unknown data set or column, too few rows of a class, a feature never observed.
    """
    rng_mask = np.random.default_rng([mask_seed, 0])
    if dataset in SYNTHETIC:
        _, y_tr, X_tr = make_dataset(dataset, n_per_class, np.random.default_rng([data_seed, 0]), missing=False)
        _, y_te, X_te = make_dataset(dataset, TEST_PER_CLASS, np.random.default_rng([data_seed, 1]), missing=False)
        columns, classes, standardised = ("x1", "x2"), ("0", "1"), False
        complete_tr = X_tr
        desc = (f"Marlin's {dataset!r} set: {n_per_class} training and {TEST_PER_CLASS} test rows per class")
        name = dataset
    else:
        if dataset == UPLOADED:
            table, labels, class_column = _uploaded_table(uploaded, class_column)
            names = (class_levels or {}).get(class_column)
            if names is not None:  # a text column of the file, given as codes 0..L-1: its levels again
                labels = np.asarray(names, dtype=object)[np.asarray(labels, dtype=np.intp)]
            defaults = ()
        elif dataset in TABLES:
            table, labels = ds.load_dataset(dataset, return_labels=True)
            defaults = TABLES[dataset]
        else:
            raise BadInputError(f"Unknown data set {dataset!r}; choose one of "
                                f"{', '.join(list(SYNTHETIC) + list(TABLES) + [UPLOADED])}.")
        x, y = _pick_columns(tuple(table.columns), x_column, y_column, defaults)
        idx = [list(table.columns).index(x), list(table.columns).index(y)]
        values = np.where(table.missing[:, idx], np.nan, table.values[:, idx])
        codes, classes = _class_codes(labels)
        small = [classes[c] for c in range(len(classes)) if (codes == c).sum() < 3]
        if small:
            raise BadInputError(f"Class(es) {', '.join(small)} have fewer than 3 rows; a train/test split needs more.")
        tr, te = _split(len(classes), codes, np.random.default_rng([data_seed, 2]))
        X_tr, y_tr, X_te, y_te = values[tr], codes[tr], values[te], codes[te]
        if np.isnan(X_tr).all(axis=0).any():
            raise BadInputError(f"Column {[x, y][int(np.isnan(X_tr).all(axis=0).argmax())]!r} has no observed "
                                "value in the training rows; choose another column.")
        mean, sd = np.nanmean(X_tr, axis=0), np.nanstd(X_tr, axis=0)
        sd = np.where(sd > 0, sd, 1.0)
        X_tr, X_te = (X_tr - mean) / sd, (X_te - mean) / sd
        columns, standardised = (x, y), True
        complete_tr = None if np.isnan(X_tr).any() else X_tr
        name = table.name or dataset
        desc = f"{name}: columns {x} and {y} (standardised), class {class_column or 'label'}"
    X_train = _amputate(np.asarray(X_tr, dtype=float), mechanism, rate, rng_mask)
    X_test = _amputate(np.asarray(X_te, dtype=float), mechanism, rate, np.random.default_rng([mask_seed, 1]))
    present = np.unique(y_tr)
    if present.size < len(classes):
        raise BadInputError("Every class needs training rows; some class has none.")
    seen = np.vstack([X_tr, X_te])
    xlim, ylim = _limits(seen)
    return ClassificationData(name=name, columns=tuple(columns), classes=tuple(classes), X_train=X_train,
                              y_train=np.asarray(y_tr, dtype=np.intp), X_test=X_test,
                              y_test=np.asarray(y_te, dtype=np.intp), X_train_complete=complete_tr, xlim=xlim,
                              ylim=ylim, standardised=standardised, description=desc)


# --------------------------------------------------------------------------- surfaces and scores
@dataclass(frozen=True)
class Surface:
    """What the page draws for one fitted method on one :class:`ClassificationData`.

    ``proba`` (ny, nx, C) is :math:`P(c \\mid x_j, y_i)` on the grid ``xs`` (nx,) x ``ys`` (ny,);
    ``proba_y_only`` (ny, C) is :math:`P(c \\mid y_i)` (x missing), ``proba_x_only`` (nx, C) is
    :math:`P(c \\mid x_j)` (y missing); ``imputations`` (m, 2) with ``imputation_class`` (m,) are the
    imputed training points of a multiple-imputation method (empty otherwise); ``test_loss`` is the
    mean :math:`-\\log P(c_{true} \\mid x^o)` over the test rows and ``test_error`` their error rate (%).
    """

    method: str
    xs: np.ndarray
    ys: np.ndarray
    proba: np.ndarray
    proba_y_only: np.ndarray
    proba_x_only: np.ndarray
    test_loss: float
    test_error: float
    imputations: np.ndarray = field(default_factory=lambda: np.empty((0, 2)))
    imputation_class: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.intp))
    iteration: int | None = None
    seconds: float = 0.0
    revision: int = -1


def grid(data: ClassificationData, size: int = GRID_SIZE) -> tuple[np.ndarray, np.ndarray]:
    """``(xs, ys)``: ``size`` cell centres along each axis, covering ``data.xlim`` x ``data.ylim``."""
    (x0, x1), (y0, y1) = data.xlim, data.ylim
    hx, hy = (x1 - x0) / size, (y1 - y0) / size
    return np.linspace(x0 + hx / 2, x1 - hx / 2, size), np.linspace(y0 + hy / 2, y1 - hy / 2, size)


def scores_of(proba: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """``(loss, error %)``: mean :math:`-\\log P(c_{true})` (probabilities floored at ``PROBA_FLOOR``) and
    the percentage of rows whose most probable class is wrong (Marlin's two metrics, digest 6.4)."""
    proba, y = np.asarray(proba, dtype=float), np.asarray(y, dtype=np.intp)
    p_true = np.clip(proba[np.arange(y.size), y], PROBA_FLOOR, 1.0)
    return float(-np.mean(np.log(p_true))), float(100.0 * np.mean(proba.argmax(axis=1) != y))


def _full_proba(predict_proba: Callable, X: np.ndarray, classes_seen, n_classes: int) -> np.ndarray:
    """(n, C) probabilities in class-code order (columns of classes a method never saw are 0)."""
    p = np.asarray(predict_proba(X), dtype=float)
    out = np.zeros((X.shape[0], n_classes))
    out[:, np.asarray(classes_seen, dtype=np.intp)] = p
    return out


def surface_of(predict_proba: Callable, data: ClassificationData, method: str, *, classes_seen=None,
               imputations=None, iteration: int | None = None, size: int = GRID_SIZE,
               revision: int = -1) -> Surface:
    """The :class:`Surface` of a fitted classifier given by its ``predict_proba(X) -> (n, len(classes_seen))``.

    One call evaluates the grid, the two 1-D strips (rows with x or y missing: NaN in the input, so
    each method's own treatment of a missing feature is what is drawn) and the test rows.
    """
    t0 = time.perf_counter()
    xs, ys = grid(data, size)
    gx, gy = np.meshgrid(xs, ys)
    nan_x, nan_y = np.full_like(ys, np.nan), np.full_like(xs, np.nan)
    X = np.vstack([np.c_[gx.ravel(), gy.ravel()], np.c_[nan_x, ys], np.c_[xs, nan_y], data.X_test])
    seen = range(data.n_classes) if classes_seen is None else classes_seen
    P = _full_proba(predict_proba, X, seen, data.n_classes)
    if not np.all(np.isfinite(P)):
        raise BadInputError(f"{method}: the predicted probabilities are not finite.")
    n_grid = gx.size
    proba = P[:n_grid].reshape(ys.size, xs.size, -1)
    y_only = P[n_grid:n_grid + ys.size]
    x_only = P[n_grid + ys.size:n_grid + ys.size + xs.size]
    loss, err = scores_of(P[n_grid + ys.size + xs.size:], data.y_test)
    imp, imp_class = (np.empty((0, 2)), np.empty(0, dtype=np.intp)) if imputations is None else imputations
    return Surface(method=method, xs=xs, ys=ys, proba=proba, proba_y_only=y_only, proba_x_only=x_only,
                   test_loss=loss, test_error=err, imputations=imp, imputation_class=imp_class,
                   iteration=iteration, seconds=time.perf_counter() - t0, revision=revision)


def _imputed_points(estimator, data: ClassificationData):
    """Imputed training points of a multiple-imputation method: ``(points (m, 2), class codes (m,))`` or None.

    Reads the estimator's ``completions_`` (the S completed training sets of
    :class:`explorer.learn.treatments.MissingInputClassifier` with ``treatment="multiple"``); only the
    rows with exactly one missing feature are returned (their imputed point).
    """
    fitted = getattr(estimator, "completions_", None)
    if not fitted:
        return None
    arr = np.asarray(fitted, dtype=float)
    if arr.ndim != 3 or arr.shape[1:] != data.X_train.shape:
        return None
    miss = np.isnan(data.X_train)
    rows = miss.any(axis=1) & ~miss.all(axis=1)
    pts = arr[:, rows, :].reshape(-1, 2)
    cls = np.tile(data.y_train[rows], arr.shape[0])
    return pts, cls


def fit_method(name: str, data: ClassificationData, seed: int = 0):
    """A registered method fitted on the training rows (class codes as labels)."""
    est = make_method(name, random_state=seed)
    est.fit(data.X_train, data.y_train)
    return est


def fit_surface(name: str, data: ClassificationData, seed: int = 0, revision: int = -1) -> Surface:
    """Fit method ``name`` and return its :class:`Surface` (timed: ``seconds`` includes the fit)."""
    t0 = time.perf_counter()
    est = fit_method(name, data, seed)
    surf = surface_of(est.predict_proba, data, name, classes_seen=est.classes_,
                      imputations=_imputed_points(est, data), revision=revision)
    return dataclasses.replace(surf, seconds=time.perf_counter() - t0)


def score_method(name: str, data: ClassificationData, seed: int = 0) -> dict:
    """One row of the table: fit ``name`` and score it on the test rows (errors are reported, not raised)."""
    spec = METHODS.get(name)
    row = {"method": name, "label": spec.label if spec else name, "family": spec.family if spec else "",
           "loss": np.nan, "error_pct": np.nan, "seconds": np.nan, "status": "pending"}
    t0 = time.perf_counter()
    try:
        est = fit_method(name, data, seed)
        proba = _full_proba(est.predict_proba, data.X_test, est.classes_, data.n_classes)
        loss, err = scores_of(proba, data.y_test)
    except Exception as exc:  # noqa: BLE001 - one failing method is a row of the table, not a broken page
        return row | {"status": f"failed: {type(exc).__name__}: {exc}", "seconds": time.perf_counter() - t0}
    return row | {"loss": loss, "error_pct": err, "seconds": time.perf_counter() - t0, "status": "done"}


class _SharedResults:
    """Results shared by every session of the server: the ``size`` most recently used, thread-safe."""

    def __init__(self, size: int):
        self._items: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self._size = size

    def get(self, key):
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key, value) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)


_SURFACES = _SharedResults(SURFACES_SHARED)
_SCORES = _SharedResults(SCORES_SHARED)


def shared_surface(name: str, data: ClassificationData, seed: int = 0, revision: int = -1) -> Surface:
    """:func:`fit_surface`, fitted once for every session of the server (same method, data and seed).

    Raises what :func:`fit_surface` raises (a failure is not kept).
    """
    key = (name, data.fingerprint, seed)
    surface = _SURFACES.get(key)
    if surface is None:
        surface = fit_surface(name, data, seed)
        _SURFACES.put(key, surface)
    return dataclasses.replace(surface, revision=revision)


def known_score(name: str, data: ClassificationData, seed: int = 0) -> dict | None:
    """The table row of ``name`` if some session of the server has scored it on these data (else None)."""
    row = _SCORES.get((name, data.fingerprint, seed))
    return None if row is None else dict(row)


def shared_score(name: str, data: ClassificationData, seed: int = 0) -> dict:
    """:func:`score_method`, scored once for every session of the server (same method, data and seed)."""
    row = known_score(name, data, seed)
    if row is None:
        row = score_method(name, data, seed)
        _SCORES.put((name, data.fingerprint, seed), dict(row))
    return row


def empty_table(methods=None) -> pd.DataFrame:
    """The table before any method is scored (every row 'pending')."""
    rows = [{"method": k, "label": METHODS[k].label, "family": METHODS[k].family, "loss": np.nan,
             "error_pct": np.nan, "seconds": np.nan, "status": "pending"} for k in (methods or list(METHODS))]
    return pd.DataFrame(rows, columns=list(TABLE_COLUMNS))


# --------------------------------------------------------------------------- the page model
def _dataset_choices() -> list[str]:
    return list(SYNTHETIC) + list(TABLES) + [UPLOADED]


class DecisionModel(Settings):
    """Settings and results of the "Decision surfaces" page (see the module docstring).

    Examples
    --------
    >>> m = DecisionModel(dataset="simple", method="lr_mean")
    >>> m.data.X_train.shape, m.data.classes
    ((200, 2), ('0', '1'))
    >>> s = m.refresh_surface(); s.proba.shape
    (60, 60, 2)
    """

    _SETTINGS = _SETTINGS

    dataset = param.Selector(default="mix", objects=_dataset_choices(), doc="Data set")
    n_per_class = param.Integer(default=100, bounds=(5, 500), doc="Training rows per class (synthetic sets)")
    data_seed = param.Integer(default=0, bounds=(0, MAX_SEED), doc="Seed of the generator / train-test split")
    mechanism = param.Selector(default="patterns", objects=list(MECHANISMS_2D), doc="Missingness mechanism")
    rate = param.Number(default=0.3, bounds=(0.0, 0.9), doc="Requested missing rate (mechanisms with a rate)")
    mask_seed = param.Integer(default=1, bounds=(0, MAX_SEED), doc="Seed of the mechanism")
    x_column = param.String(default="", doc="Feature on the horizontal axis (tables; '' = default)")
    y_column = param.String(default="", doc="Feature on the vertical axis (tables; '' = default)")
    class_column = param.String(default="", doc="Class column of an uploaded table ('' = last one with few values)")
    method = param.Selector(default=next(iter(METHODS), None), objects=list(METHODS), doc="Method drawn")
    seed = param.Integer(default=0, bounds=(0, MAX_SEED), doc="Seed of the methods (initialisation, draws)")

    session = param.ClassSelector(class_=SessionData, default=None, allow_None=True, precedence=-1,
                                  doc="The browser session's user data (shared with the other pages)")
    data = param.ClassSelector(class_=ClassificationData, default=None, allow_None=True, constant=True,
                               precedence=-1, doc="The current training / test data")
    revision = param.Integer(default=0, constant=True, precedence=-1, doc="Increases when ``data`` changes")
    error = param.String(default="", constant=True, precedence=-1, doc="Why the last data setting failed")
    surface = param.ClassSelector(class_=Surface, default=None, allow_None=True, constant=True, precedence=-1,
                                  doc="The surface of ``method`` on ``data`` (None while computing)")
    surface_error = param.String(default="", constant=True, precedence=-1, doc="Why the method failed")
    table = param.DataFrame(default=None, allow_None=True, constant=True, precedence=-1,
                            doc="Test loss and error of every method (rows 'pending' until scored)")

    def __init__(self, **params):
        if params.get("session") is None:
            params["session"] = SessionData()
        self._levels: tuple = (None, {})  # (the upload, {text column: its levels}) of this page's last upload
        super().__init__(**params)
        self._lock = threading.Lock()
        self.all_columns: tuple[str, ...] = ()
        self.class_columns: list[str] = []
        self.session.param.watch(self._on_upload, "revision")
        self.param.watch(self._on_settings, [*_DATA_SETTINGS, "seed"])
        self.load()

    # ------------------------------------------------------------------ data
    def _publish(self, **outputs):
        with param.edit_constant(self):
            self.param.update(**outputs)

    def _on_upload(self, event) -> None:
        if self.dataset == UPLOADED:
            self.load()

    @property
    def takes_rate(self) -> bool:
        """Whether the chosen mechanism has a rate."""
        return self.mechanism != NO_MECHANISM and MECHANISMS[self.mechanism].has_rate

    def _on_settings(self, *events) -> None:
        """A data setting changed: load again. A new data set alone forgets the previous one's columns."""
        changed = {e.name for e in events}
        columns = {"x_column", "y_column", "class_column"}
        if "dataset" in changed and not changed & columns and any(getattr(self, c) for c in columns):
            with param.parameterized.discard_events(self):
                self.param.update(x_column="", y_column="", class_column="")
        self.load()

    def load(self) -> bool:
        """Build :attr:`data` from the settings; on failure keep the previous data and set :attr:`error`.

        A new method seed also starts again (new ``revision``: every method is fitted again)."""
        try:
            data = load_classification(
                self.dataset, n_per_class=self.n_per_class, data_seed=self.data_seed, mechanism=self.mechanism,
                rate=self.rate, mask_seed=self.mask_seed, x_column=self.x_column, y_column=self.y_column,
                class_column=self.class_column, uploaded=self.session.uploaded,
                class_levels=self._levels[1] if self._levels[0] is self.session.uploaded else None)
        except BadInputError as exc:
            self._publish(error=str(exc))
            return False
        self._columns_of_source()
        self._publish(data=data, error="", surface=None, surface_error="", table=empty_table(),
                      revision=self.revision + 1)
        return True

    def _columns_of_source(self) -> None:
        if self.dataset in SYNTHETIC:
            self.all_columns, self.class_columns = ("x1", "x2"), []
        elif self.dataset == UPLOADED:
            up = self.session.uploaded
            self.class_columns = [] if up is None else class_candidates(up)
            cls = self.class_column or (self.class_columns[-1] if self.class_columns else "")
            self.all_columns = () if up is None else tuple(c for c in up.columns if c != cls)
        else:
            self.all_columns, self.class_columns = tuple(ds.load_dataset(self.dataset).columns), []

    def load_csv(self, content: bytes, filename: str = "upload.csv") -> bool:
        """Make an uploaded CSV the session's data and show it (False, with :attr:`error`, if it cannot be read)."""
        try:
            if not bytes(content or b"").strip():
                raise BadInputError("the file is empty.")
            if len(content) > MAX_UPLOAD_BYTES:
                raise BadInputError(f"the file has {len(content):,} bytes; the limit is {MAX_UPLOAD_BYTES:,}.")
            try:
                table = eio.from_csv(content, max_bytes=MAX_UPLOAD_BYTES, sep=_guess_separator(content))
                levels = {}
            except NonNumericError:  # text columns: the class is usually one (a label such as 'Adelie')
                table, levels = text_classes_as_codes(content)
        except BadInputError as exc:
            self._publish(error=f"{filename}: {exc}")
            return False
        data = IncompleteData.from_array(table.values, missing=table.missing, columns=table.columns, name=filename,
                                         description=table.description)
        self._levels = (data, levels)
        self.session.put(data)
        with param.parameterized.batch_call_watchers(self):  # the class: the file's first text column, if any
            self.param.update(dataset=UPLOADED, x_column="", y_column="", class_column=next(iter(levels), ""),
                              mechanism=NO_MECHANISM if table.missing.any() else self.mechanism)
        return not self.error

    # ------------------------------------------------------------------ compute (pure, any thread)
    def snapshot(self) -> tuple[ClassificationData | None, int, str, int]:
        """``(data, revision, method, seed)`` read together (what a worker thread computes on)."""
        with self._lock:
            return self.data, self.revision, self.method, self.seed

    def compute_surface(self, method: str | None = None, data: ClassificationData | None = None,
                        revision: int | None = None) -> Surface:
        """Fit ``method`` (default: the chosen one) on ``data`` (default: the current) and return its surface."""
        cur_data, cur_rev, cur_method, seed = self.snapshot()
        data = cur_data if data is None else data
        if data is None:
            raise BadInputError(self.error or "No data.")
        return fit_surface(method or cur_method, data, seed, cur_rev if revision is None else revision)

    def score_all(self, data: ClassificationData | None = None, cancel: threading.Event | None = None,
                  progress: Callable[[dict], None] | None = None) -> pd.DataFrame:
        """Score every registered method on ``data`` (default: the current), calling ``progress(row)`` after each."""
        cur_data, _, _, seed = self.snapshot()
        data = cur_data if data is None else data
        rows = []
        for name in METHODS:
            if cancel is not None and cancel.is_set():
                break
            row = shared_score(name, data, seed)
            rows.append(row)
            if progress is not None:
                progress(row)
        return pd.DataFrame(rows, columns=list(TABLE_COLUMNS))

    def iter_scores(self, data: ClassificationData, seed: int) -> Iterator[dict]:
        """Rows of the table one method at a time (for a worker that publishes as it goes; shared between
        sessions, see :func:`shared_score`)."""
        for name in METHODS:
            yield shared_score(name, data, seed)

    # ------------------------------------------------------------------ publish (the owner's thread)
    def publish_surface(self, surface: Surface | None, revision: int, error: str = "") -> bool:
        """Show ``surface`` if it was computed for the current data (``revision``); False when stale."""
        if revision != self.revision:
            return False
        self._publish(surface=surface, surface_error=error)
        return True

    def publish_row(self, row: dict, revision: int) -> bool:
        """Put one scored method into :attr:`table` if computed for the current data; False when stale."""
        return self.publish_rows([row], revision)

    def publish_rows(self, rows: list[dict], revision: int) -> bool:
        """Put scored methods into :attr:`table` (one new table) if computed for the current data; False when stale."""
        if revision != self.revision or self.table is None:
            return False
        if not rows:
            return True
        table = self.table.copy()
        for row in rows:
            i = table.index[table["method"] == row["method"]]
            if len(i):
                for k in TABLE_COLUMNS:
                    table.at[i[0], k] = row[k]
        self._publish(table=table)
        return True

    # ------------------------------------------------------------------ synchronous (scripts, tests)
    def refresh_surface(self) -> Surface | None:
        """Compute and publish the chosen method's surface now (on this thread); None on failure."""
        data, rev, method, seed = self.snapshot()
        if data is None:
            return None
        try:
            surf = shared_surface(method, data, seed, rev)
        except Exception as exc:  # noqa: BLE001 - shown on the page
            self.publish_surface(None, rev, f"{METHODS[method].label if method in METHODS else method}: {exc}")
            return None
        self.publish_surface(surf, rev)
        return surf

    def refresh_table(self) -> pd.DataFrame | None:
        """Score every method now (on this thread) and publish the table."""
        data, rev, _, seed = self.snapshot()
        if data is None:
            return None
        for row in self.iter_scores(data, seed):
            self.publish_row(row, rev)
        return self.table

    def table_progress(self) -> tuple[int, int]:
        """``(scored, total)`` rows of the table."""
        if self.table is None:
            return 0, len(METHODS)
        return int((self.table["status"] != "pending").sum()), len(self.table)


# --------------------------------------------------------------------------- the stepped EM classifier
class EMClassifierRun(LockedStepping, param.Parameterized):
    """EM of the Gaussian mixture classifier on the model's training rows, one iteration per :meth:`step`.

    Wraps :mod:`explorer.core.classifiers.joint_mixture` (``prepare``, ``init``, ``step``, ``predict_log_proba``)
    with the settings of the registered estimator of ``method`` (its ``get_params()`` that are
    :class:`~explorer.core.classifiers.joint_mixture.JointConfig` fields), the iteration cap ``STEPPED_MAX_ITER``.
    A new run starts when the data, the method or the seed change. Thread-safe like
    :class:`explorer.ui.state._stepped.SteppedModel`.
    """

    model = param.ClassSelector(class_=DecisionModel, doc="The page model whose data are fitted")
    method = param.String(default="", doc="The stepped method (a key of METHODS with stepped=True)")

    state = param.Parameter(default=None, constant=True, precedence=-1)
    iteration = param.Integer(default=0, constant=True, precedence=-1)
    stop_reason = param.String(default="", constant=True, precedence=-1)
    error = param.String(default="", constant=True, precedence=-1)
    run_id = param.Integer(default=0, constant=True, precedence=-1)

    def __init__(self, **params):
        super().__init__(**params)
        self._lock = threading.RLock()
        self._data = None
        self._config = None
        self._revision = -1
        self.model.param.watch(self._on_model, ["revision", "method", "seed"])
        self._follow_method()
        self.reset()

    def _publish(self, **outputs):
        with param.edit_constant(self):
            self.param.update(**outputs)

    @property
    def finished(self) -> bool:
        return bool(self.stop_reason) or self.state is None

    @property
    def lock(self) -> threading.RLock:
        """The lock ``step`` and ``reset`` hold: hold it to read a state with its iteration and stop reason."""
        return self._lock

    @property
    def revision(self) -> int:
        """The model revision whose data the current run fits."""
        return self._revision

    def _follow_method(self) -> bool:
        m = self.model.method
        if m in METHODS and METHODS[m].stepped and m != self.method:
            self.method = m
            return True
        return False

    def _on_model(self, *events):
        changed = self._follow_method()
        if changed or any(e.name in ("revision", "seed") for e in events):
            self.reset()

    def reset(self):
        """Start a new run (iteration 0) on the model's current data."""
        from explorer.core.classifiers import joint_mixture as jm

        with self._lock:
            data, rev = self.model.data, self.model.revision
            self._revision = rev
            try:
                if not self.method or self.method not in METHODS:
                    raise BadInputError("No EM mixture classifier is registered (explorer.learn.joint is missing).")
                if data is None:
                    raise BadInputError(self.model.error or "No data.")
                est = make_method(self.method, random_state=self.model.seed)
                fields = {f.name for f in dataclasses.fields(jm.JointConfig)}
                options = {k: v for k, v in est.get_params().items() if k in fields and k != "n_init"}
                options["max_iter"] = min(int(options.get("max_iter", STEPPED_MAX_ITER)), STEPPED_MAX_ITER)
                self._config = jm.JointConfig(n_classes=data.n_classes, **options)
                self._data = jm.prepare(data.X_train, data.y_train, data.n_classes)
                state = jm.init(self._data, self._config, np.random.default_rng(self.model.seed))
            except BadInputError as exc:
                self._data = None
                self._publish(state=None, iteration=0, stop_reason="", error=str(exc), run_id=self.run_id + 1)
                return
            self._publish(state=state, iteration=state.iteration, stop_reason="", error="", run_id=self.run_id + 1)

    def _step(self) -> bool:
        from explorer.core.classifiers import joint_mixture as jm

        if self.finished:
            return False
        old = self.state
        try:
            new = jm.step(old, self._data, self._config)
        except BadInputError as exc:
            self._publish(stop_reason="degenerate", error=str(exc))
            return False
        change = (new.objective - old.objective) / max(1, self._data.n_fit)
        stop = "tol" if abs(change) < self._config.tol else "max_iter" if new.iteration >= self._config.max_iter else ""
        self._publish(state=new, iteration=new.iteration, stop_reason=stop, error="")
        return True

    def predict_proba(self, X) -> np.ndarray:
        """:math:`P(c \\mid x^o)` under the current state (missing features marginalised), shape (n, C)."""
        from explorer.core.classifiers import joint_mixture as jm

        with self._lock:
            state, config = self.state, self._config
        if state is None:
            raise BadInputError(self.error or "No run.")
        return np.exp(jm.predict_log_proba(state, np.asarray(X, dtype=float), config))

    def surface(self) -> Surface | None:
        """The :class:`Surface` of the current state on the run's data (None without a run or when stale)."""
        with self._lock:
            state, rev = self.state, self._revision
        data = self.model.data
        if state is None or data is None or rev != self.model.revision:
            return None
        return surface_of(self.predict_proba, data, self.method, iteration=state.iteration, revision=rev)
