"""The ``explorer`` command line: impute a CSV file without writing Python.

::

    explorer impute data.csv --model gmm --components 3 --multiple 10 --seed 0 --out imputed.nc
    explorer impute data.csv --model mfa --factors 2 --out imputed.csv --save-model model.json
    explorer impute air.csv --transform auto --multiple 5 --out imputed.nc
    explorer impute air.csv --transform Ozone=log,count=log:-1,share=logit:0:100 --point median --out imputed.csv
    python -m explorer --help

``impute`` reads the file with :func:`explorer.io.from_csv` (empty cells, ``?`` and ``NA`` are
missing), fits the chosen imputer on the observed entries, and writes the single imputation and,
with ``--multiple m``, ``m`` draws with :func:`explorer.export.export_imputations` (format from the
suffix of ``--out``: ``.csv``, ``.parquet`` or ``.nc``); ``--save-model`` writes the fitted model
with :func:`explorer.persistence.save_model`. Progress goes to stderr, the summary to stdout: on a
terminal a bar whose "fit" stage shows the iteration, ``max_iter`` and the objective as the fit
runs; otherwise one line per stage (read, fit, impute, write) with the elapsed time, the fit's with
its number of iterations. Ctrl-C during the fit ends the fit with the best state reached so far (a
warning says after how many iterations) and the command goes on to impute and write; Ctrl-C at any
other time (or before the first iteration) stops the command (exit status 130). Bad input or options
print ``explorer: error: ...`` and exit with status 2, without a traceback.

``--transform`` (impute and evaluate) fits the model on per-column transformed data with
:class:`explorer.impute.transformed.TransformedImputer` and returns imputations and draws on the original
scale: ``none`` (default) fits the plain model; ``auto`` applies the transforms
:func:`explorer.impute.transformed.suggest_transforms` suggests, and a warning line names each one and why;
``COL=KIND[,COL=KIND...]`` (repeatable) gives them, KIND one of ``log``, ``log:LOWER``, ``logit``,
``logit:LO:HI`` or ``none`` (:func:`parse_transform`). ``--point mean|median`` (only with
``--transform``) chooses the single imputation. Warnings of the imputation stage (a draw or
imputation of an untransformed column crossing a bound its observed values never cross) are printed
as the fit's are. In ``evaluate``, Ctrl-C during a fit stops the whole evaluation (exit status 130).

A file with text columns (``impute`` and ``evaluate``, unless ``--drop-non-numeric``) is read with
:func:`explorer.io.read_csv_table` and handled as a table: ``--model gmm`` (the default) becomes
:class:`explorer.impute.mixed.MixedMixtureImputer` (numeric and categorical columns in one mixture);
``evaluate`` scores it and :class:`explorer.baselines.MeanModeImputer` (the column mean / most frequent level;
the baseline) with :func:`explorer.evaluation.evaluate` on the table (cells hidden completely at random; NRMSE,
MAE, coverage and NLL on the numeric columns, PFC and log-loss on the text ones). Options that do not apply
to it (other models, ``--transform``, ``--factors``, another ``--mechanism``, ...) are refused by name.
``--exclude COL[,COL...]`` (``-x``, repeatable) leaves columns out of the model and the output (an identifier, free
text); a first column that names the rows (no header, or text with a different value in each of 20 rows or more)
is read as the row names and written back as the ``row`` labels.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import sys
import threading
import time
import warnings
from pathlib import Path

__all__ = ["main", "parse_transform"]

MODELS = {
    "gmm": "GaussianMixtureImputer (EM Gaussian mixture)",
    "dpgmm": "DPGMMImputer (variational Dirichlet-process mixture)",
    "fa": "FactorAnalysisImputer (one factor analyser)",
    "mfa": "MFAImputer (mixture of factor analysers)",
}


class CommandError(Exception):
    """A problem with the command's options or input, printed as ``explorer: error: ...`` (exit status 2)."""


# ---------------------------------------------------------------------------- progress
class _Stages:
    """Progress over the stages of a command, on stderr.

    On a terminal: a tqdm bar (stage name, stages done, elapsed time) redrawn every 0.2 s, so the
    clock runs during a long fit; :meth:`iteration`, the fit's ``callback``, adds the iteration and
    the objective to the stage name. Otherwise (a log file, a pipe): one line per finished stage with
    its duration (and the number of iterations the stage's fit reported). Nothing when disabled.
    """

    def __init__(self, stages, enabled: bool):
        self._n, self._enabled = len(stages), enabled
        self._tty = enabled and hasattr(sys.stderr, "isatty") and sys.stderr.isatty()
        self._bar = None
        self._stop = threading.Event()
        self._thread = None
        self._name = ""
        self._iterations = 0
        self._drawn = 0.0

    def _open_bar(self):
        from tqdm import tqdm

        self._bar = tqdm(total=self._n, file=sys.stderr, leave=True, dynamic_ncols=True,
                         bar_format="{desc} |{bar}| {n_fmt}/{total_fmt} stages [{elapsed}]")
        self._thread = threading.Thread(target=self._tick, daemon=True)
        self._thread.start()

    def _tick(self):
        while not self._stop.wait(0.2):
            self._bar.refresh()

    @contextlib.contextmanager
    def stage(self, name: str):
        if self._tty and self._bar is None:
            self._open_bar()
        if self._bar is not None:
            self._bar.set_description_str(f"{name:<6}", refresh=True)
        self._name, self._iterations = name, 0
        start = time.perf_counter()
        yield
        if self._bar is not None:
            self._bar.update(1)
        elif self._enabled:
            n = self._iterations
            counted = f" ({n} iteration{'s' if n != 1 else ''})" if n else ""
            print(f"explorer: {name:<6} done in {time.perf_counter() - start:.2f} s{counted}", file=sys.stderr)

    def iteration(self, info) -> None:
        """The fit's ``callback``: count the iteration, and on a terminal show it with the objective."""
        self._iterations += 1
        if self._bar is not None:
            now = time.perf_counter()
            draw = now - self._drawn >= 0.1  # at most 10 redraws a second (the ticking thread does the rest)
            if draw:
                self._drawn = now
            restart = f" restart {info.restart + 1}/{info.n_restarts}" if info.n_restarts > 1 else ""
            self._bar.set_description_str(
                f"{self._name:<6} iteration {info.iteration}/{info.max_iter}{restart} objective {info.objective:.6g}",
                refresh=draw)

    def write(self, text: str) -> None:
        if self._bar is not None:
            self._bar.write(text, file=sys.stderr)
        else:
            print(text, file=sys.stderr)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._bar is not None:
            self._bar.close()


# ---------------------------------------------------------------------------- options
def _names(text: str) -> list[str]:
    """``--exclude a,b``: the column names, stripped; empty names refused."""
    names = [t.strip() for t in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"expected column names separated by commas, got {text!r}")
    return names


def _excluded(args) -> list[str] | None:
    """The columns of every ``--exclude``, in order, once each (None without one)."""
    given = getattr(args, "exclude", None)
    return list(dict.fromkeys(n for group in given for n in group)) if given else None


def _components(text: str):
    if text == "auto":
        return "auto"
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer or 'auto', got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer or 'auto', got {text!r}")
    return value


def _count(minimum: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {text!r}")
        return value

    return parse


_KINDS_HELP = "log, log:LOWER, logit, logit:LO:HI or none"


def _number(text: str, what: str) -> float:
    import math

    try:
        value = float(text)
    except ValueError:
        raise CommandError(f"--transform: {what} must be a number, got {text!r}.") from None
    if not math.isfinite(value):
        raise CommandError(f"--transform: {what} must be a finite number, got {text!r}.")
    return value


def _kind(column: str, text: str):
    """One column's KIND of ``--transform`` as TransformedImputer's spec: None, "log", ("log", lo), "logit", ("logit", lo, hi)."""
    parts = text.strip().split(":")
    kind = parts[0].strip().lower()
    where = f"column {column!r}"
    if kind == "none" and len(parts) == 1:
        return None
    if kind == "log" and len(parts) <= 2:
        return "log" if len(parts) == 1 else ("log", _number(parts[1], f"the lower bound of log for {where}"))
    if kind == "logit" and len(parts) in (1, 3):
        if len(parts) == 1:
            return "logit"
        lo = _number(parts[1], f"the lower bound of logit for {where}")
        hi = _number(parts[2], f"the upper bound of logit for {where}")
        if not lo < hi:
            raise CommandError(f"--transform: logit:{parts[1]}:{parts[2]} for {where} needs LO < HI.")
        return ("logit", lo, hi)
    raise CommandError(f"--transform: unknown transform {text!r} for {where}; use {_KINDS_HELP}.")


def parse_transform(values) -> str | dict | None:
    """The ``--transform`` options (a list of strings, one per use) as TransformedImputer's ``transforms``.

    Returns None for no transform (no option, or ``none``), ``"suggest"`` for ``auto``, otherwise
    a dict column name -> spec: ``"ozone=log,count=log:-1,share=logit:0:100"`` gives
    ``{"ozone": "log", "count": ("log", -1.0), "share": ("logit", 0.0, 100.0)}``. A value with a
    single ``=`` is one pair, so a column name may contain commas. Raises :class:`CommandError`
    on bad syntax, an unknown kind, a column given twice, or ``auto`` / ``none`` mixed with pairs.
    """
    if not values:
        return None
    words = [v.strip() for v in values]
    if any(w.lower() in ("auto", "none") for w in words):
        if len(words) > 1:
            raise CommandError("--transform auto or none cannot be combined with other --transform options.")
        return "suggest" if words[0].lower() == "auto" else None
    spec: dict = {}
    for word in words:
        pairs = [word] if word.count("=") == 1 else word.split(",")
        for pair in pairs:
            column, eq, kind = pair.rpartition("=")
            column = column.strip()
            if not eq or not column or not kind.strip():
                raise CommandError(f"--transform: expected COLUMN=KIND (KIND one of {_KINDS_HELP}), auto or none; "
                                   f"got {pair!r}.")
            if column in spec:
                raise CommandError(f"--transform: column {column!r} is given twice.")
            spec[column] = _kind(column, kind)
    return spec


def _parser() -> argparse.ArgumentParser:
    from explorer import __version__

    parser = argparse.ArgumentParser(
        prog="explorer",
        description="Probabilistic imputation of missing data (Gaussian mixtures, factor analysers).",
    )
    parser.add_argument("--version", action="version", version=f"explorer {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    imp = sub.add_parser(
        "impute", help="fit an imputer on a CSV file and write imputed data",
        description="Fit an imputer on the observed entries of a CSV file (empty cells, '?' and 'NA' are missing) "
                    "and write the single imputation and, with --multiple, m multiple imputations.",
        epilog="Output layout: .csv / .parquet hold one long table with an 'imputation' column (0 = the single "
               "imputation, 1..m = the draws), 'row', the data columns and 'missing:<column>' (True = imputed); "
               ".nc holds an xarray Dataset (imputed, samples with an 'imputation' dimension, missing).",
    )
    imp.add_argument("input", help="CSV file with missing values")
    imp.add_argument("--out", "-o", required=True, help="output file: .csv, .parquet or .nc")
    imp.add_argument("--model", choices=sorted(MODELS), default="gmm",
                     help="; ".join(f"{k}: {v}" for k, v in MODELS.items()) + " (default gmm)")
    imp.add_argument("--components", "-k", type=_components, default=None,
                     help="number of mixture components, or 'auto' (gmm, dpgmm: truncation level, mfa); "
                          "default: the estimator's own")
    imp.add_argument("--factors", type=_count(1), default=None, help="latent dimension q (fa, mfa; default 1)")
    imp.add_argument("--multiple", "-m", type=_count(0), default=0, metavar="M",
                     help="also write M multiple imputations (draws from p(missing | observed)); default 0")
    imp.add_argument("--seed", type=_count(0), default=None, help="random seed (fit and draws) for reproducible runs")
    imp.add_argument("--max-iter", type=_count(1), default=None, help="maximum number of iterations of the fit")
    imp.add_argument("--save-model", metavar="PATH", default=None,
                     help="also save the fitted model as JSON (explorer.persistence.load_model reads it)")
    imp.add_argument("--drop-non-numeric", action="store_true",
                     help="drop text columns instead of stopping with an error")
    imp.add_argument("--exclude", "-x", action="append", type=_names, default=None, metavar="COL[,COL...]",
                     help="leave these columns out of the model and of the output (an identifier, free text); "
                          "repeatable")
    imp.add_argument("--empty-rows", choices=("raise", "marginal"), default="raise",
                     help="rows with every value missing: stop with an error (default) or impute them from the "
                          "marginal distribution")
    _add_transform_options(imp)
    imp.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    imp.set_defaults(run=_impute)
    if importlib.util.find_spec("explorer.evaluation") is not None:
        _add_evaluate(sub)
    return parser


def _add_evaluate(sub) -> None:
    ev = sub.add_parser(
        "evaluate", help="score imputers on hidden observed entries of a CSV file",
        description="Hide a share of the observed entries (by a missingness mechanism, over several seeds), fit "
                    "each imputer on the data with its real and hidden gaps, and print NRMSE, MAE, the coverage "
                    "of the 95%% intervals and the NLL on the hidden entries (explorer.evaluation.evaluate), "
                    "mean +- standard deviation over the repeats. A file with text columns is scored as a table: "
                    "MixedMixtureImputer (for gmm) and the column mean / mode, with PFC and log-loss on the text "
                    "columns (mechanism mcar).",
    )
    ev.add_argument("input", help="CSV file with missing values")
    ev.add_argument("--model", nargs="+", choices=sorted(MODELS), default=["gmm"], metavar="MODEL",
                    help="one or more of " + ", ".join(sorted(MODELS)) + " (default gmm)")
    ev.add_argument("--components", "-k", type=_components, default=None,
                    help="number of components of gmm, dpgmm and mfa, or 'auto'")
    ev.add_argument("--factors", type=_count(1), default=None, help="latent dimension q (fa, mfa)")
    ev.add_argument("--mechanism", default="mcar", help="missingness mechanism that hides entries (default mcar)")
    ev.add_argument("--rate", type=float, default=0.2, help="fraction of the observed entries hidden (default 0.2)")
    ev.add_argument("--repeats", type=_count(1), default=5, help="number of masks (seeds); default 5")
    ev.add_argument("--seed", type=_count(0), default=0, help="seed of the masks and the fits (default 0)")
    ev.add_argument("--max-iter", type=_count(1), default=None, help="maximum number of iterations of each fit")
    ev.add_argument("--no-baseline", action="store_true",
                    help="leave out the column-mean imputer (scikit-learn's SimpleImputer; with text columns "
                         "explorer.baselines.MeanModeImputer) kept for reference")
    ev.add_argument("--out", "-o", default=None, help="also write the tidy table (one row per imputer, repeat and "
                                                      "metric) to this CSV file")
    ev.add_argument("--drop-non-numeric", action="store_true",
                    help="drop text columns instead of scoring them as categories")
    ev.add_argument("--exclude", "-x", action="append", type=_names, default=None, metavar="COL[,COL...]",
                    help="leave these columns out (an identifier, free text); repeatable")
    _add_transform_options(ev)
    ev.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    ev.set_defaults(run=_evaluate, empty_rows="marginal")


def _add_transform_options(sub) -> None:
    sub.add_argument(
        "--transform", action="append", default=None, metavar="SPEC",
        help="per-column transforms (explorer.impute.transformed.TransformedImputer): 'none' (default); 'auto' applies "
             "the suggested log / logit transforms and says which on stderr; or COL=KIND[,COL=KIND...], KIND one "
             f"of {_KINDS_HELP} (e.g. ozone=log,count=log:-1,share=logit:0:100; repeatable). The model is fitted "
             "on the transformed columns; imputations and draws come back on the original scale.")
    sub.add_argument("--point", choices=("mean", "median"), default=None,
                     help="with --transform: the single imputation is the conditional mean on the original scale "
                          "(default) or the conditional median")


# ---------------------------------------------------------------------------- impute
def _estimator(args, model=None):
    model = args.model if model is None else model
    kwargs = {"random_state": args.seed, "empty_rows": args.empty_rows}
    if args.max_iter is not None:
        kwargs["max_iter"] = args.max_iter
    if model == "fa":
        if args.components is not None:
            raise CommandError("--components does not apply to --model fa (one factor analyser); "
                               "use --factors, or --model mfa for a mixture.")
    elif args.components is not None and not (model == "dpgmm" and args.components == "auto"):
        kwargs["n_components"] = args.components  # dpgmm "auto": its default truncation, pruned by the fit
    if args.factors is not None:
        if model not in ("fa", "mfa"):
            raise CommandError(f"--factors applies to --model fa or mfa, not {model}.")
        kwargs["n_factors"] = args.factors
    if model == "gmm":
        from explorer.impute.gaussian_mixture import GaussianMixtureImputer as cls
    elif model == "dpgmm":
        from explorer.impute.dp_mixture import DPGMMImputer as cls
    elif model == "fa":
        from explorer.impute.factor import FactorAnalysisImputer as cls
    else:
        from explorer.impute.factor import MFAImputer as cls
    return cls(**kwargs)


def _with_transforms(args, estimator, transforms):
    """``estimator`` itself (no ``--transform``) or ``TransformedImputer(estimator, transforms, point)``."""
    if transforms is None:
        if args.point is not None:
            raise CommandError("--point applies only with --transform (auto or COL=KIND): without transforms the "
                               "single imputation is the conditional mean.")
        return estimator
    from explorer.impute.transformed import TransformedImputer

    return TransformedImputer(estimator, transforms=transforms, point=args.point or "mean")


def _check_columns(transforms, data) -> None:
    """Every column named in ``--transform`` is a column of the file, and its transform fits its observed values.

    The second check is TransformedImputer's own (the same messages), made before any fit.
    """
    if not isinstance(transforms, dict):
        return
    import numpy as np

    from explorer.core.validation import BadInputError, column_label
    from explorer.impute.transformed import resolve_transform

    columns = [str(c) for c in data.columns]
    unknown = [c for c in transforms if c not in columns]
    if unknown:
        raise CommandError(f"--transform names column(s) {unknown} that the file does not have; its columns are "
                           f"{columns}.")
    values = np.asarray(data.values, dtype=np.float64)
    for name, spec in transforms.items():
        j = columns.index(name)
        v = values[~np.isnan(values[:, j]), j]
        try:
            resolve_transform(spec, v, name, column_label(j, columns), 0.01)
        except BadInputError as exc:
            raise CommandError(f"--transform {name}=...: {exc} (on the command line: {name}=log:LOWER, "
                               f"{name}=logit:LO:HI or {name}=none)") from None


def _set_callback(estimator, callback) -> None:
    """Set the fit's ``callback`` of the imputer (or of the one a TransformedImputer wraps and of its fitted copy)."""
    if hasattr(estimator, "imputer_") or "imputer" in estimator.get_params(deep=False):
        estimator.set_params(imputer__callback=callback)
        if hasattr(estimator, "imputer_"):
            estimator.imputer_.set_params(callback=callback)
    else:
        estimator.set_params(callback=callback)


def _model_name(estimator) -> str:
    """The class of the imputer; for a TransformedImputer the class it wraps and the transforms applied."""
    inner = getattr(estimator, "imputer_", None)
    if inner is None:
        return type(estimator).__name__
    applied = [f"{col}: {_short(t)}" for col, t in estimator.transforms_.items() if t.kind is not None]
    return (f"{type(inner).__name__} on transformed columns ({'; '.join(applied)})" if applied
            else f"{type(inner).__name__} (no column transformed)")


def _short(t) -> str:
    """A ColumnTransform as the --transform KIND that gives it back (log, log:LOWER, logit:LO:HI)."""
    if t.kind == "log":
        return "log" if t.lower == 0.0 else f"log:{t.lower:g}"
    return f"logit:{t.lower:g}:{t.upper:g}"


def _write_warnings(progress, caught, columns=None) -> None:
    """Each distinct warning message once, on stderr; a hint in command-line terms after bound crossings and
    intervals of a positive column that reach below zero.

    With ``columns`` (evaluate fits on the bare matrix), "column j" in a message becomes "'name' (column j)".
    """
    import re

    def named(message: str) -> str:
        if columns is None:
            return message
        return re.sub(r"(?<!' \()\bcolumn (\d+)\b",  # not one already named: 'name' (column j)
                      lambda m: (f"{columns[int(m.group(1))]!r} ({m.group(0)})" if int(m.group(1)) < len(columns)
                                 else m.group(0)), message)

    # explorer's own warnings come once per kind: evaluate's repeats (and a fit's restarts) raise the same warning
    # with other counts, which repeated five times buried the results; other warnings each distinct message once
    shown: dict = {}
    for w in caught:
        text = named(str(w.message))
        kind = w.category.__name__ if w.category.__module__.startswith("explorer") else None
        # the same kind: the same class and the same opening words once the numbers are set aside
        shown.setdefault((kind, re.sub(r"\d+", "#", text)[:60] if kind else text), []).append(text)
    for (kind, _), messages in shown.items():
        distinct = list(dict.fromkeys(messages))
        progress.write(f"explorer: warning: {distinct[0]}")
        if len(distinct) > 1:
            progress.write(f"explorer: warning: ... and {len(distinct) - 1} more {kind} message(s) like it (other "
                           "repeats, fits or columns)")
    # the library's advice names Python (TransformedImputer); on the command line it is --transform
    if any(type(w.message).__name__ in ("BoundCrossingWarning", "NegativeIntervalWarning") for w in caught):
        progress.write("explorer: hint: on the command line, --transform COL=log (COL=log:LOWER for a column with "
                       "zeros, LOWER below its smallest value), COL=logit:LO:HI, or --transform auto.")


def _check_output(path: str, what: str) -> None:
    parent = Path(path).parent
    if not parent.is_dir():
        raise CommandError(f"cannot write {what} {path!r}: the folder {str(parent)!r} does not exist.")


def _impute(args, progress: _Stages) -> int:
    import numpy as np
    import pandas as pd

    from explorer import export, persistence
    from explorer.core.validation import NonNumericError
    from explorer.io import from_csv

    export._format_of(args.out)  # an unknown suffix fails before the fit
    _check_output(args.out, "the output")
    if args.save_model is not None:
        _check_output(args.save_model, "the model")
    transforms = parse_transform(args.transform)
    estimator = _with_transforms(args, _estimator(args), transforms)
    with progress.stage("read"):
        if not Path(args.input).exists():
            raise CommandError(f"no such file: {args.input!r}.")
        try:
            data = from_csv(args.input, drop_non_numeric=args.drop_non_numeric, exclude=_excluded(args))
        except NonNumericError:  # text columns: the table imputer takes them as categories
            data = None
        if data is not None:
            _check_columns(transforms, data)
    if data is None:
        return _impute_table(args, progress, transforms)
    values = np.array(data.values)
    frame = pd.DataFrame(values, columns=list(data.columns))  # fit on a frame: the model keeps the names
    with progress.stage("fit"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            # a plain function, not the bound method: TransformedImputer clones its imputer, and a clone
            # deep-copies a bound method together with its object (the progress bar)
            _set_callback(estimator, lambda info: progress.iteration(info))
            try:
                estimator.fit(frame)
            finally:
                _set_callback(estimator, None)  # a saved model keeps no function
    _write_warnings(progress, caught)
    with progress.stage("impute"):
        with warnings.catch_warnings(record=True) as caught:  # e.g. BoundCrossingWarning of TransformedImputer
            warnings.simplefilter("always")
            imputed = np.asarray(estimator.transform(values), dtype=np.float64)
            samples = None
            if args.multiple > 0:
                rng = np.random.default_rng(None if args.seed is None else [args.seed, 1])
                samples = np.asarray(estimator.sample(values, n_imputations=args.multiple, random_state=rng),
                                     dtype=np.float64)
    _write_warnings(progress, caught)
    with progress.stage("write"):
        row_names = None
        if "row names" in (data.description or ""):  # from_csv dropped them from the data: the output keeps them
            row_names = pd.read_csv(args.input, usecols=[0], dtype=str, keep_default_na=False).iloc[:, 0]
            row_names = [str(v).strip() for v in row_names]
        export.export_imputations(args.out, imputed, samples, data.missing, columns=list(data.columns),
                                  index=row_names)
        if args.save_model is not None:
            persistence.save_model(estimator, args.save_model)
    progress.close()
    n, d = imputed.shape
    n_missing = int(data.missing.sum())
    fitted = getattr(estimator, "imputer_", estimator)  # TransformedImputer's fitted inner model
    chosen = ""
    if getattr(fitted, "n_components", None) == "auto" and hasattr(fitted, "n_components_"):
        chosen = f", K = {fitted.n_components_} chosen on the data"
    selection = getattr(fitted, "shrinkage_selection_", None)
    if selection is not None:  # small data: the prior's shrinkage towards the diagonal was chosen too
        chosen += (f"{',' if chosen else ''} prior shrinkage {selection.shrinkage:.3g} chosen on held-out entries "
                   f"(rule D / (N + D) = {selection.rule:.3g})")
    print(f"{args.input}: {n} rows x {d} columns, {n_missing} missing value(s) ({n_missing / (n * d):.1%}) imputed "
          f"with {_model_name(estimator)}{chosen}"
          + (f" ({args.multiple} multiple imputations)" if args.multiple else ""))
    if "row names" in (data.description or ""):
        print(f"{args.input}: {data.description.split('; ')[-1]}")
    print(f"wrote {args.out}" + (f" and {args.save_model}" if args.save_model else ""))
    return 0


def _impute_table(args, progress: _Stages, transforms) -> int:
    """``impute`` on a CSV with text columns: :class:`~explorer.impute.mixed.MixedMixtureImputer` on the table."""
    import numpy as np

    from explorer import export
    from explorer.io import read_csv_table

    refused = [what for what, given in (("--model " + args.model, args.model != "gmm"),
                                        ("--transform", transforms is not None), ("--save-model", args.save_model),
                                        ("--factors", args.factors is not None)) if given]
    if refused:
        raise CommandError(
            f"{args.input} has text columns, which the default model (gmm) imputes as categories with "
            f"MixedMixtureImputer; {', '.join(refused)} does not apply to it yet. Drop --{refused[0].split()[0][2:]}, "
            "or keep numeric columns only with --drop-non-numeric.")
    if Path(args.out).suffix.lower() == ".nc":
        raise CommandError(f"{args.input} has text columns and netCDF holds numbers only: write --out to .csv or "
                           ".parquet (or --drop-non-numeric).")
    table = read_csv_table(args.input, exclude=_excluded(args))  # (the "read" stage found the text columns)
    estimator = _mixed_imputer(args)
    with progress.stage("fit"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            estimator.fit(table)
    _write_warnings(progress, caught)
    with progress.stage("impute"):
        imputed = estimator.transform(table)
        samples = None
        if args.multiple > 0:
            rng = np.random.default_rng(None if args.seed is None else [args.seed, 1])
            samples = estimator.sample(table, n_imputations=args.multiple, random_state=rng)
    missing = table.isna().to_numpy()
    with progress.stage("write"):
        export.export_table_imputations(args.out, imputed, samples, missing)
    progress.close()
    n, d = table.shape
    n_missing = int(missing.sum())
    print(f"{args.input}: {_table_size(table)}, {n_missing} missing "
          f"value(s) ({n_missing / (n * d):.1%}) imputed with MixedMixtureImputer, K = {estimator.n_components_}"
          f"{' chosen on the data (held-out cells)' if estimator.n_components == 'auto' else ''} "
          "(numeric and categorical columns together; a missing category gets its most probable level)"
          + (f" ({args.multiple} multiple imputations)" if args.multiple else ""))
    if "row names" in table.attrs.get("description", ""):
        print(f"{args.input}: {table.attrs['description'].split('; ')[-1]}")
    print(f"wrote {args.out}")
    return 0


def _mixed_imputer(args):
    """The MixedMixtureImputer of ``--components``, ``--max-iter`` and ``--seed`` (a CSV with text columns)."""
    from explorer.impute.mixed import MixedMixtureImputer

    kwargs = {"random_state": args.seed}
    if args.components is not None:
        kwargs["n_components"] = args.components
    if args.max_iter is not None:
        kwargs["max_iter"] = args.max_iter
    return MixedMixtureImputer(**kwargs)


def _table_size(table) -> str:
    """``n rows x d columns (c text / category: names)`` of a table with text columns."""
    from explorer.impute.mixed import categorical_columns

    n, d = table.shape
    cats = categorical_columns(table)
    shown = ", ".join(cats[:5]) + (f" and {len(cats) - 5} more" if len(cats) > 5 else "")
    return f"{n} rows x {d} columns ({len(cats)} text / category: {shown})"


# ---------------------------------------------------------------------------- evaluate
def _evaluate(args, progress: _Stages) -> int:
    import numpy as np

    from explorer import evaluation
    from explorer.core.validation import NonNumericError
    from explorer.io import from_csv

    if args.out is not None:
        if Path(args.out).suffix.lower() != ".csv":
            raise CommandError(f"--out writes a CSV table; give a .csv file, not {args.out!r}.")
        _check_output(args.out, "the table")
    if args.components is not None and set(args.model) == {"fa"}:
        raise CommandError("--components does not apply to --model fa (one factor analyser); use --factors.")
    transforms = parse_transform(args.transform)
    models = {}
    for model in dict.fromkeys(args.model):
        components = args.components if model != "fa" else None
        factors = args.factors if model in ("fa", "mfa") else None
        sub = argparse.Namespace(**{**vars(args), "components": components, "factors": factors})
        models[model] = _estimator(sub, model)
    _with_transforms(args, None, transforms)  # --point without --transform fails before the file is read
    with progress.stage("read"):
        if not Path(args.input).exists():
            raise CommandError(f"no such file: {args.input!r}.")
        try:
            data = from_csv(args.input, drop_non_numeric=args.drop_non_numeric, exclude=_excluded(args))
        except NonNumericError:  # text columns: scored as a table, as impute imputes them
            data = None
        if data is not None:
            _check_columns(transforms, data)
    if data is None:
        return _evaluate_table(args, progress, transforms)
    if isinstance(transforms, dict):  # evaluate works on the matrix: column names -> indices
        columns = list(data.columns)
        transforms = {columns.index(c): spec for c, spec in transforms.items()}
    imputers = {model: _with_transforms(args, est, transforms) for model, est in models.items()}
    if not args.no_baseline:
        from sklearn.impute import SimpleImputer

        imputers["column mean"] = SimpleImputer(strategy="mean")
    with progress.stage("score"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            results = evaluation.evaluate(imputers, np.array(data.values), mechanism=args.mechanism, rate=args.rate,
                                          n_repeats=args.repeats, random_state=args.seed)
    _write_warnings(progress, caught, columns=[str(c) for c in data.columns])
    with progress.stage("write"):
        if args.out is not None:
            results.to_csv(args.out, index=False)
    progress.close()
    n, d = data.values.shape
    print(_evaluation_table(evaluation.summarize(results), args, f"{n} rows x {d} columns, "
                                                                   f"{int(data.missing.sum())} missing"))
    if args.out is not None:
        print(f"wrote {args.out}")
    return 0


def _evaluate_table(args, progress: _Stages, transforms) -> int:
    """``evaluate`` on a CSV with text columns: :func:`explorer.evaluation.evaluate` on the table read by
    :func:`explorer.io.read_csv_table`, scoring :class:`~explorer.impute.mixed.MixedMixtureImputer` (what
    ``impute`` fits on such a file, in place of ``--model gmm``) and, unless ``--no-baseline``,
    :class:`~explorer.baselines.MeanModeImputer` (column mean / most frequent level): NRMSE, MAE, coverage and NLL
    on the numeric columns, PFC and log-loss on the categorical ones."""
    from explorer import evaluation
    from explorer.baselines import MeanModeImputer
    from explorer.io import read_csv_table

    others = [m for m in dict.fromkeys(args.model) if m != "gmm"]
    refused = [what for what, given in (("--model " + " ".join(others), others),
                                        ("--transform", transforms is not None),
                                        ("--factors", args.factors is not None),
                                        (f"--mechanism {args.mechanism}", args.mechanism != "mcar")) if given]
    if refused:
        raise CommandError(
            f"{args.input} has text columns, which evaluate scores as a table with MixedMixtureImputer (in place of "
            f"--model gmm) and cells hidden completely at random; {', '.join(refused)} does not apply to it. Drop "
            f"--{refused[0].split()[0][2:]}, or keep numeric columns only with --drop-non-numeric.")
    table = read_csv_table(args.input, exclude=_excluded(args))  # (the "read" stage found the text columns)
    imputers = {"MixedMixtureImputer": _mixed_imputer(args)}
    if not args.no_baseline:
        imputers["column mean / mode"] = MeanModeImputer()
    with progress.stage("score"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            results = evaluation.evaluate(imputers, table, mechanism="mcar", rate=args.rate,
                                          n_repeats=args.repeats, random_state=args.seed)
    _write_warnings(progress, caught)
    with progress.stage("write"):
        if args.out is not None:
            results.to_csv(args.out, index=False)
    progress.close()
    print(_evaluation_table(evaluation.summarize(results), args,
                            f"{_table_size(table)}, {int(table.isna().to_numpy().sum())} missing", categorical=True))
    if args.out is not None:
        print(f"wrote {args.out}")
    return 0


def _evaluation_table(summary, args, size: str, *, categorical: bool = False) -> str:
    """``mean +- std`` per imputer (rows) and metric (columns), with a heading that says what was hidden
    (``size``: the data's rows, columns and missing cells)."""
    import pandas as pd

    cells = {}
    for (imputer, metric), row in summary.iterrows():
        text = "n/a" if row["n"] == 0 else f"{row['mean']:.4g}" + (
            f" +- {row['std']:.2g}" if row["n"] > 1 else "")
        cells.setdefault(imputer, {})[metric] = text
    table = pd.DataFrame.from_dict(cells, orient="index")
    table.index.name = "imputer"
    head = (f"{args.input}: {size}; {args.rate:.0%} of the "
            f"observed entries hidden by {args.mechanism!r}, {args.repeats} repeat(s), seed {args.seed}"
            + _transform_note(args) + ".\n"
            + ("nrmse, mae, coverage, nll on the numeric columns, pfc and logloss on the text ones. " if categorical
               else "")
            + "nrmse: RMSE / observed column sd (lower is better); mae in data units; coverage of the 95% "
            "intervals (0.95 is calibrated; n/a without a predictive distribution); nll per hidden entry."
            + ("\npfc: share of the hidden categories imputed wrong; logloss: -log of the probability given to the "
               "hidden level (lower is better)." if categorical else ""))
    return head + "\n" + table.to_string()


def _transform_note(args) -> str:
    if not args.transform or [w.strip().lower() for w in args.transform] == ["none"]:
        return ""
    point = f", point {args.point}" if args.point else ""
    return f"; explorer's imputers fitted on transformed columns (--transform {','.join(args.transform)}{point})"


# ---------------------------------------------------------------------------- entry point
def main(argv=None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit status.

    0 on success, 2 on bad options or input (the message on stderr, no traceback), 130 when
    interrupted.
    """
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help / --version (0) or a usage error (2), already printed
        return int(exc.code or 0)
    from explorer.core.validation import BadInputError

    stages = ("read", "fit", "impute", "write") if args.command == "impute" else ("read", "score", "write")
    progress = _Stages(stages, enabled=not getattr(args, "quiet", False))
    started = time.perf_counter()
    try:
        return args.run(args, progress)
    except (CommandError, BadInputError, ValueError, OSError) as exc:
        progress.close()
        message = str(exc) if not isinstance(exc, OSError) or not exc.filename else (
            f"{exc.strerror or exc}: {exc.filename!r}")
        print(f"explorer: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        progress.close()
        print(f"explorer: interrupted after {time.perf_counter() - started:.1f} s", file=sys.stderr)
        return 130
    finally:
        progress.close()
