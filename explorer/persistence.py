"""Save and load fitted imputers as one JSON file, without pickle.

:func:`save_model` writes a fitted :class:`~explorer.impute.gaussian_mixture.GaussianMixtureImputer`,
:class:`~explorer.impute.dp_mixture.DPGMMImputer`, :class:`~explorer.impute.factor.FactorAnalysisImputer`
or :class:`~explorer.impute.factor.MFAImputer` as **one JSON file** (never pickle): the class name,
``get_params()``, the explorer version, the feature names and every fitted attribute, arrays as
``{"dtype", "shape", "data"}`` with ``data`` the flat (C-order) list of values. Python writes each
float with the shortest decimal that reads back to the same float64, so a loaded model gives
bit-identical ``transform``, ``score_samples`` and ``conditional`` results; non-finite floats are
the strings ``"nan"``, ``"inf"``, ``"-inf"`` (the file stays standard JSON). One text file was
chosen over JSON + ``.npz`` so that a model is a single, human-readable, diffable file that any
language can read; it is about 2.5 times the size of the binary arrays. Not saved: ``history_``
(the fit's trace, an xarray Dataset; not needed to use the model) and, unless
``include_training_data=True``, the attributes that hold training rows (DPGMMImputer's ``resp_``
and its copy of the training data, used only by ``weights="responsibilities"`` on that data).
:func:`load_model` only ever builds one of the four classes above from numbers and strings: an
unknown class, format version, parameter or attribute, or arrays of the wrong shape are refused
with a :class:`~explorer.core.validation.BadInputError`.

A fitted :class:`~explorer.impute.transformed.TransformedImputer` (per-column log / logit transforms
around one of the four) is saved in the same file format (same ``format`` and
``format_version``) with ``"class": "TransformedImputer"`` and, instead of ``fitted``:

* ``params``: ``point``, ``margin``, ``transforms`` (``"suggest"``, null, or
  ``{"kind": "transforms", "items": [[column, spec], ...]}`` with ``spec`` null, a name,
  ``["log", lower]``, ``["logit", lower, upper]`` or a ``{"kind": "column_transform", "fields"}``)
  and ``imputer`` (null or ``{"kind": "estimator", "class", "params"}``, the unfitted template);
* ``n_features_in`` and ``feature_names``;
* ``transforms``: one object per column, in order, ``{"column", "kind", "lower", "upper",
  "reason"}`` - the transform as fitted (``kind`` "log", "logit" or null; for null the bounds are
  those the observed values never crossed, used only for the bound-crossing warning);
* ``imputer``: the wrapped fitted model, as the document of a plain model above without the
  ``format`` fields (``class``, ``params``, ``feature_names``, ``fitted``, ``not_saved``).

:func:`load_model` checks every transform (a known kind, finite bounds that fit it: a log has a
lower bound only, a logit lower < upper), that the column count and names agree with the wrapped
model, and names the field of any damage (e.g. ``transforms[0] (column 'ozone')``).
"""


from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import warnings
from pathlib import Path

import numpy as np

from explorer.core.validation import BadInputError

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "load_model", "save_model"]

FORMAT_NAME = "explorer-model"
FORMAT_VERSION = 1

# class name -> module; nothing else is ever built by load_model
_MODEL_CLASSES = {
    "GaussianMixtureImputer": "explorer.impute.gaussian_mixture",
    "DPGMMImputer": "explorer.impute.dp_mixture",
    "FactorAnalysisImputer": "explorer.impute.factor",
    "MFAImputer": "explorer.impute.factor",
}
# wrappers around one of the classes above: class name -> module
_WRAPPER_CLASSES = {"TransformedImputer": "explorer.impute.transformed"}
# fitted attributes holding training rows: saved only with include_training_data=True
_TRAINING_ATTRS = {"DPGMMImputer": ("resp_", "_fit_X")}
# fitted attributes never saved (not needed to use the model; selection_ is the record of n_components="auto":
# the chosen K is saved as n_components_ and in the fitted parameters' shapes; shrinkage_selection_ that of
# prior_shrinkage="auto": the chosen value is saved as shrinkage_ and in prior_)
_SKIPPED_ATTRS = ("history_", "selection_", "shrinkage_selection_")
# what load_model checks before handing the model back
_REQUIRED = {
    "GaussianMixtureImputer": ("weights_", "means_", "covariances_"),
    "DPGMMImputer": ("weights_", "means_", "covariances_", "center_", "scale_", "beta_", "nu_", "scatter_"),
    "FactorAnalysisImputer": ("weights_", "means_", "mean_", "loadings_", "noise_variance_"),
    "MFAImputer": ("weights_", "means_", "loadings_", "noise_variance_"),
}
_ATTR_NAME = re.compile(r"^[a-z][a-z0-9_]*_$")
# settings dataclasses (frozen, numbers and tuples only) that parameters / attributes may hold
_SPEC_TYPES = {"NIWPrior": "explorer.core.mixtures.prior"}
_DTYPES = {"float64": np.float64, "int64": np.int64, "bool": np.bool_, "str": object}


def _plain(value, name: str):
    """Tuples / lists / numbers / strings / None as JSON data (tuples become lists); None if not possible."""
    if isinstance(value, (tuple, list)):
        items = [_plain(v, name) for v in value]
        return items
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise BadInputError(f"cannot save {name!r}: it holds a non-finite number.")
        return value
    raise BadInputError(f"cannot save {name!r}: a field of type {type(value).__name__} is not numbers or strings.")


def _encode_spec(value, name: str):
    """A whitelisted settings dataclass (e.g. NIWPrior) as ``{"kind": "spec", "type", "fields"}``, else None."""
    cls = type(value)
    if not dataclasses.is_dataclass(value) or isinstance(value, type) or cls.__name__ not in _SPEC_TYPES \
            or cls.__module__ != _SPEC_TYPES[cls.__name__]:
        return None
    fields = {f.name: _plain(getattr(value, f.name), f"{name}.{f.name}") for f in dataclasses.fields(value)}
    return {"kind": "spec", "type": cls.__name__, "fields": fields}


def _decode_spec(obj, name: str):
    import importlib

    type_name, fields = obj.get("type"), obj.get("fields")
    if type_name not in _SPEC_TYPES or not isinstance(fields, dict):
        raise BadInputError(f"{name!r}: unknown settings type {type_name!r} (known: {sorted(_SPEC_TYPES)}).")
    cls = getattr(importlib.import_module(_SPEC_TYPES[type_name]), type_name, None)
    if cls is None:
        raise BadInputError(f"{name!r}: this explorer has no {type_name}; use the explorer that wrote the file.")
    try:
        return cls(**fields)
    except TypeError as exc:
        raise BadInputError(f"{name!r}: bad fields for {type_name}: {exc}.") from None


def _encode_float(x: float):
    x = float(x)
    if math.isfinite(x):
        return x
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


def _decode_float(x, name: str) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float, str)):
        raise BadInputError(f"attribute {name!r}: {x!r} is not a number.")
    if isinstance(x, str):
        if x not in ("nan", "inf", "-inf"):
            raise BadInputError(f"attribute {name!r}: {x!r} is not a number.")
        return float(x)
    return float(x)


def _is_json_value(v) -> bool:
    if v is None or isinstance(v, (bool, str)):
        return True
    if isinstance(v, (int, float)):
        return not isinstance(v, float) or math.isfinite(v)
    if isinstance(v, (list, tuple)):
        return all(_is_json_value(x) for x in v)
    if isinstance(v, dict):
        return all(isinstance(k, str) and _is_json_value(x) for k, x in v.items())
    return False


def _encode_value(value, name: str):
    """A fitted attribute as a tagged JSON object (arrays, scalars, plain JSON data)."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind == "f":
            data = [_encode_float(x) for x in value.astype(np.float64).ravel().tolist()]
            dtype = "float64"
        elif value.dtype.kind in "iu":
            data, dtype = value.astype(np.int64).ravel().tolist(), "int64"
        elif value.dtype.kind == "b":
            data, dtype = value.ravel().tolist(), "bool"
        elif value.dtype.kind in "OU" and all(isinstance(x, str) for x in value.ravel().tolist()):
            data, dtype = [str(x) for x in value.ravel().tolist()], "str"
        else:
            raise BadInputError(f"cannot save attribute {name!r}: arrays of dtype {value.dtype} are not supported.")
        return {"kind": "array", "dtype": dtype, "shape": list(value.shape), "data": data}
    if isinstance(value, (bool, np.bool_)):
        return {"kind": "bool", "value": bool(value)}
    if isinstance(value, (int, np.integer)):
        return {"kind": "int", "value": int(value)}
    if isinstance(value, (float, np.floating)):
        return {"kind": "float", "value": _encode_float(value)}
    if value is None or isinstance(value, str):
        return {"kind": "json", "value": value}
    if isinstance(value, (list, tuple, dict)) and _is_json_value(value):
        return {"kind": "json", "value": value}
    spec = _encode_spec(value, name)
    if spec is not None:
        return spec
    raise BadInputError(
        f"cannot save attribute {name!r} of type {type(value).__name__}: only arrays, numbers, strings and "
        "lists / dicts of them can be saved (save_model never pickles)."
    )


def _decode_value(obj, name: str):
    if not isinstance(obj, dict) or "kind" not in obj:
        raise BadInputError(f"attribute {name!r} is not a tagged value (kind / value); the file is damaged.")
    kind = obj["kind"]
    if kind == "array":
        dtype, shape, data = obj.get("dtype"), obj.get("shape"), obj.get("data")
        if dtype not in _DTYPES:
            raise BadInputError(f"attribute {name!r}: unknown dtype {dtype!r} (known: {sorted(_DTYPES)}).")
        if not (isinstance(shape, list) and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0
                                                for s in shape) and len(shape) <= 4):
            raise BadInputError(f"attribute {name!r}: bad shape {shape!r}.")
        if not isinstance(data, list) or len(data) != math.prod(shape):
            raise BadInputError(f"attribute {name!r}: {len(data) if isinstance(data, list) else 'no'} value(s) "
                                f"for shape {tuple(shape)}.")
        if dtype == "float64":
            values = [_decode_float(x, name) for x in data]
        elif dtype == "int64":
            if not all(isinstance(x, int) and not isinstance(x, bool) for x in data):
                raise BadInputError(f"attribute {name!r}: int64 array with non-integer values.")
            values = data
        elif dtype == "bool":
            if not all(isinstance(x, bool) for x in data):
                raise BadInputError(f"attribute {name!r}: bool array with non-boolean values.")
            values = data
        else:
            if not all(isinstance(x, str) for x in data):
                raise BadInputError(f"attribute {name!r}: str array with non-string values.")
            values = data
        arr = np.empty(len(values), dtype=_DTYPES[dtype])
        arr[:] = values
        return arr.reshape(shape)
    if kind == "bool" and isinstance(obj.get("value"), bool):
        return obj["value"]
    if kind == "int" and isinstance(obj.get("value"), int) and not isinstance(obj.get("value"), bool):
        return obj["value"]
    if kind == "float":
        return _decode_float(obj.get("value"), name)
    if kind == "json" and "value" in obj:
        return obj["value"]
    if kind == "spec":
        return _decode_spec(obj, name)
    raise BadInputError(f"attribute {name!r}: unknown or malformed value of kind {kind!r}.")


def _jsonable_params(estimator) -> dict:
    params = {}
    for key, value in estimator.get_params(deep=False).items():
        if isinstance(value, np.generic):
            value = value.item()
        if key == "random_state" and isinstance(value, np.random.Generator):
            warnings.warn(
                "random_state is a numpy.random.Generator, which cannot be saved; it is saved as None "
                "(it only matters for refitting).", UserWarning, stacklevel=3)
            value = None
        if key == "callback" and callable(value):
            warnings.warn(
                "callback is a function, which cannot be saved; it is saved as None (it only runs during fit).",
                UserWarning, stacklevel=3)
            value = None
        spec = _encode_spec(value, key)
        if spec is not None:
            params[key] = spec
            continue
        if not _is_json_value(value):
            raise BadInputError(f"cannot save parameter {key}={value!r}: only numbers, strings, None and "
                                "lists / dicts of them can be saved.")
        params[key] = value
    return params


def _model_doc(estimator, include_training_data: bool) -> dict:
    """``class``, ``params``, ``feature_names``, ``fitted``, ``not_saved`` of one fitted plain imputer."""
    cls_name = type(estimator).__name__
    if not hasattr(estimator, "n_features_in_"):
        raise BadInputError(f"this {cls_name} is not fitted: call fit before save_model.")
    training = _TRAINING_ATTRS.get(cls_name, ())
    if (cls_name == "DPGMMImputer" and not include_training_data
            and getattr(estimator, "weights", None) == "responsibilities"):
        warnings.warn(
            "weights='responsibilities' uses the fitted responsibilities of the training rows, which are not "
            "saved without include_training_data=True: the loaded model uses predictive weights for every row.",
            UserWarning, stacklevel=3)
    fitted, skipped = {}, []
    for name, value in sorted(vars(estimator).items()):
        public = _ATTR_NAME.match(name) is not None
        if not public and name not in training:
            continue
        if name in _SKIPPED_ATTRS or (name in training and not include_training_data):
            skipped.append(name)
            continue
        fitted[name] = _encode_value(value, name)
    names = getattr(estimator, "feature_names_in_", None)
    return {
        "class": cls_name,
        "params": _jsonable_params(estimator),
        "feature_names": None if names is None else [str(c) for c in names],
        "fitted": fitted,
        "not_saved": skipped,
    }


def _is_model_class(estimator) -> bool:
    cls_name = type(estimator).__name__
    return cls_name in _MODEL_CLASSES and type(estimator).__module__ == _MODEL_CLASSES[cls_name]


def _finite_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


# ---------------------------------------------------------------------------- TransformedImputer
def _encode_transform_spec(spec, where: str):
    """One column's entry of the ``transforms`` parameter as JSON (tuples become lists; ColumnTransform its fields)."""
    from explorer.impute.transformed import ColumnTransform

    if isinstance(spec, ColumnTransform):
        return {"kind": "column_transform", "fields": _column_transform_fields(spec)}
    if spec is None or isinstance(spec, str):
        return spec
    if isinstance(spec, (tuple, list)):
        return _plain(list(spec), where)
    raise BadInputError(f"cannot save {where}={spec!r}: a transform is None, a name, a tuple or a ColumnTransform.")


def _column_transform_fields(t) -> dict:
    return {"kind": t.kind, "lower": _plain(t.lower, "lower"), "upper": _plain(t.upper, "upper"),
            "reason": t.reason}


def _encode_transforms_param(value):
    """TransformedImputer's ``transforms`` parameter: "suggest", None, or a dict as a list of [column, spec] pairs."""
    if value is None or isinstance(value, str):
        return value
    from collections.abc import Mapping

    if not isinstance(value, Mapping):
        raise BadInputError(f"cannot save the parameter transforms={value!r}: not 'suggest', a dict or None.")
    items = []
    for key, spec in value.items():
        if isinstance(key, np.integer):
            key = int(key)
        if isinstance(key, bool) or not isinstance(key, (int, str)):
            raise BadInputError(f"cannot save the parameter transforms: column key {key!r} is not a name or index.")
        items.append([key, _encode_transform_spec(spec, f"transforms[{key!r}]")])
    return {"kind": "transforms", "items": items}


def _encode_inner_param(value):
    """TransformedImputer's ``imputer`` parameter (unfitted): None or its class and parameters."""
    if value is None:
        return None
    if not _is_model_class(value):
        raise BadInputError(f"save_model saves a TransformedImputer around {', '.join(_MODEL_CLASSES)}; its "
                            f"imputer parameter is a {type(value).__name__}.")
    return {"kind": "estimator", "class": type(value).__name__, "params": _jsonable_params(value)}


def _transformed_doc(estimator, include_training_data: bool) -> dict:
    """The document of a fitted TransformedImputer: its parameters, per-column transforms and the inner model."""
    if not hasattr(estimator, "n_features_in_") or not hasattr(estimator, "imputer_"):
        raise BadInputError("this TransformedImputer is not fitted: call fit before save_model.")
    inner = estimator.imputer_
    if not _is_model_class(inner):
        raise BadInputError(f"save_model saves a TransformedImputer around {', '.join(_MODEL_CLASSES)}; this one "
                            f"wraps a {type(inner).__name__}.")
    params = estimator.get_params(deep=False)
    names = getattr(estimator, "feature_names_in_", None)
    columns = []
    for key, t in estimator.transforms_.items():
        key = int(key) if isinstance(key, np.integer) else key
        columns.append({"column": key, **_column_transform_fields(t)})
    return {
        "class": "TransformedImputer",
        "params": {
            "point": params["point"],
            "margin": _plain(params["margin"], "margin"),
            "transforms": _encode_transforms_param(params["transforms"]),
            "imputer": _encode_inner_param(params["imputer"]),
        },
        "feature_names": None if names is None else [str(c) for c in names],
        "n_features_in": int(estimator.n_features_in_),
        "transforms": columns,
        "imputer": _model_doc(inner, include_training_data),
    }


def save_model(estimator, path, *, include_training_data: bool = False) -> Path:
    """Save a fitted imputer as one JSON file (never pickle); see :mod:`explorer.export` for the layout.

    Parameters
    ----------
    estimator : GaussianMixtureImputer, DPGMMImputer, FactorAnalysisImputer, MFAImputer or TransformedImputer
        Fitted. A :class:`~explorer.impute.transformed.TransformedImputer` must wrap one of the other four;
        its per-column transforms and the wrapped model are saved together.
    path : str or os.PathLike
        Written (overwritten) as UTF-8 JSON; ``.json`` is the usual suffix.
    include_training_data : bool, default False
        Also save the attributes that hold training rows (DPGMMImputer's ``resp_`` and its copy of
        the training data, which ``weights="responsibilities"`` uses to recognise that data).
        Without them a loaded DPGMMImputer uses predictive weights for every row.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    BadInputError
        Not one of the five classes, not fitted, or an attribute / parameter that is not numbers
        and strings.
    """
    cls_name = type(estimator).__name__
    if cls_name == "TransformedImputer" and type(estimator).__module__ == _WRAPPER_CLASSES[cls_name]:
        body = _transformed_doc(estimator, include_training_data)
    elif _is_model_class(estimator):
        body = _model_doc(estimator, include_training_data)
    else:
        known = ", ".join([*_MODEL_CLASSES, *_WRAPPER_CLASSES])
        raise BadInputError(f"save_model saves {known}; got {cls_name}.")
    from explorer import __version__

    doc = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, "explorer_version": __version__, **body}
    path = Path(path)
    path.write_text(json.dumps(doc, allow_nan=False, ensure_ascii=False), encoding="utf-8")
    return path


def _reject_constant(token: str):
    raise BadInputError(f"the file holds the non-standard JSON value {token}; it was not written by save_model.")


def load_model(path):
    """Load a model written by :func:`save_model`.

    Only the four imputer classes and a TransformedImputer around one of them can come out, built
    from numbers and strings (the file is parsed as JSON; nothing in it is executed or imported by
    name beyond that fixed list).

    Raises
    ------
    BadInputError
        Missing or unreadable file, not a model file, an unknown format version or class, unknown
        parameters or attributes, arrays of the wrong shape or non-finite parameters, an unknown
        transform kind or bounds that do not fit it. The message names the file and the field.
    """
    label = os.fspath(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadInputError(f"no such model file: {label!r}.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInputError(f"cannot read the model file {label!r}: {exc}.") from None
    try:
        doc = json.loads(text, parse_constant=_reject_constant)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise BadInputError(f"{label!r} is not a model file written by save_model (not valid JSON: {exc}).") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_NAME:
        raise BadInputError(f"{label!r} is not a model file written by save_model (no 'format': {FORMAT_NAME!r}).")
    if doc.get("format_version") != FORMAT_VERSION:
        raise BadInputError(f"{label!r} has model format version {doc.get('format_version')!r}; this explorer "
                            f"reads version {FORMAT_VERSION} only. Refit the model or use the explorer that wrote it.")
    cls_name = doc.get("class")
    if cls_name not in _MODEL_CLASSES and cls_name not in _WRAPPER_CLASSES:
        known = ", ".join([*_MODEL_CLASSES, *_WRAPPER_CLASSES])
        raise BadInputError(f"{label!r} holds an unknown model class {cls_name!r}; known: {known}.")
    from explorer import __version__

    if doc.get("explorer_version") != __version__:
        warnings.warn(f"{label!r} was written by explorer {doc.get('explorer_version')!r}; this is {__version__}.",
                      UserWarning, stacklevel=2)
    if cls_name == "TransformedImputer":
        return _build_transformed(doc, label)
    return _build_model(doc, label)


def _model_class(cls_name: str):
    import importlib

    return getattr(importlib.import_module(_MODEL_CLASSES[cls_name]), cls_name)


def _set_params(estimator, params, label: str, where: str = ""):
    cls_name = type(estimator).__name__
    valid = estimator.get_params(deep=False)
    unknown = sorted(set(params) - set(valid))
    if unknown:
        raise BadInputError(f"{label!r}: unknown parameter(s) {unknown} for {cls_name}{where}.")
    params = {k: _decode_spec(v, k) if isinstance(v, dict) and v.get("kind") == "spec" else v
              for k, v in params.items()}
    estimator.set_params(**params)
    return estimator


def _build_model(doc, label: str):
    """One of the four plain imputers from its document (``class``, ``params``, ``fitted``), checked."""
    cls_name = doc.get("class")
    if cls_name not in _MODEL_CLASSES:
        raise BadInputError(f"{label!r} holds an unknown model class {cls_name!r}; known: {', '.join(_MODEL_CLASSES)}.")
    cls = _model_class(cls_name)
    params, fitted = doc.get("params"), doc.get("fitted")
    if not isinstance(params, dict) or not isinstance(fitted, dict):
        raise BadInputError(f"{label!r} lacks its 'params' or 'fitted' section; the file is damaged.")
    estimator = _set_params(cls(), params, label)
    allowed_private = _TRAINING_ATTRS.get(cls_name, ())
    for name, obj in fitted.items():
        if not isinstance(name, str) or not (_ATTR_NAME.match(name) or name in allowed_private):
            raise BadInputError(f"{label!r}: {name!r} is not a fitted attribute name.")
        if hasattr(cls, name):  # a method or property of the class: never overwrite
            raise BadInputError(f"{label!r}: {name!r} is not a fitted attribute of {cls_name}.")
        setattr(estimator, name, _decode_value(obj, name))
    _check_loaded(estimator, cls_name, label)
    return estimator


def _decode_column_transform(obj, where: str, label: str):
    """A ColumnTransform from ``{"kind", "lower", "upper", "reason"}``, its kind and bounds checked."""
    from explorer.impute.transformed import KINDS, ColumnTransform

    if not isinstance(obj, dict) or not set(obj) <= {"column", "kind", "lower", "upper", "reason"}:
        raise BadInputError(f"{label!r}: {where} must be an object with the fields kind, lower, upper, reason; "
                            f"got {obj!r}.")
    kind, lower, upper, reason = obj.get("kind"), obj.get("lower"), obj.get("upper"), obj.get("reason", "")
    if kind is not None and kind not in KINDS:
        raise BadInputError(f"{label!r}: {where} has the unknown transform kind {kind!r}; known: "
                            f"{', '.join(KINDS)} or null (no transform).")
    for side, bound in (("lower", lower), ("upper", upper)):
        if bound is not None and not _finite_number(bound):
            raise BadInputError(f"{label!r}: {where}.{side} must be a finite number or null; got {bound!r}.")
    if kind == "log" and (lower is None or upper is not None):
        raise BadInputError(f"{label!r}: {where} is a log transform, which needs a lower bound and no upper "
                            f"bound; got lower={lower!r}, upper={upper!r}.")
    if kind == "logit" and (lower is None or upper is None or not lower < upper):
        raise BadInputError(f"{label!r}: {where} is a logit transform, which needs lower < upper; got "
                            f"lower={lower!r}, upper={upper!r}.")
    if not isinstance(reason, str):
        raise BadInputError(f"{label!r}: {where}.reason must be a string.")
    return ColumnTransform(kind, None if lower is None else float(lower), None if upper is None else float(upper),
                           reason)


def _decode_transform_spec(spec, where: str, label: str):
    if isinstance(spec, dict):
        if spec.get("kind") != "column_transform":
            raise BadInputError(f"{label!r}: {where} is not a transform (None, a name, a list or a column_transform).")
        return _decode_column_transform(spec.get("fields"), where, label)
    if spec is None or isinstance(spec, str):
        return spec
    if isinstance(spec, list) and spec and isinstance(spec[0], str) \
            and all(_finite_number(b) for b in spec[1:]):
        return tuple(spec)
    raise BadInputError(f"{label!r}: {where} = {spec!r} is not a transform (None, a name, or [name, bounds...]).")


def _decode_transforms_param(value, label: str):
    where = "params.transforms"
    if value is None or isinstance(value, str):
        return value
    if not isinstance(value, dict) or value.get("kind") != "transforms" or not isinstance(value.get("items"), list):
        raise BadInputError(f"{label!r}: {where} must be 'suggest', null or a list of [column, transform] items.")
    out = {}
    for item in value["items"]:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], (int, str))
                and not isinstance(item[0], bool)):
            raise BadInputError(f"{label!r}: {where} item {item!r} is not a [column, transform] pair.")
        key, spec = item
        out[key] = _decode_transform_spec(spec, f"{where}[{key!r}]", label)
    return out


def _build_transformed(doc, label: str):
    """A fitted TransformedImputer from its document: parameters, per-column transforms, the inner model."""
    from explorer.impute.transformed import POINTS, TransformedImputer, check_margin

    params, columns, inner_doc = doc.get("params"), doc.get("transforms"), doc.get("imputer")
    if not isinstance(params, dict) or not isinstance(columns, list) or not isinstance(inner_doc, dict):
        raise BadInputError(f"{label!r} lacks the 'params', 'transforms' or 'imputer' section of a "
                            "TransformedImputer; the file is damaged.")
    unknown = sorted(set(params) - set(TransformedImputer().get_params(deep=False)))
    if unknown:
        raise BadInputError(f"{label!r}: unknown parameter(s) {unknown} for TransformedImputer.")
    point = params.get("point", "mean")
    if point not in POINTS:
        raise BadInputError(f"{label!r}: params.point must be one of {POINTS}; got {point!r}.")
    try:
        margin = check_margin(params.get("margin", 0.01))
    except BadInputError as exc:
        raise BadInputError(f"{label!r}: params.{exc}") from None
    inner_param = params.get("imputer")
    if inner_param is not None:
        if not isinstance(inner_param, dict) or inner_param.get("kind") != "estimator" \
                or inner_param.get("class") not in _MODEL_CLASSES or not isinstance(inner_param.get("params"), dict):
            raise BadInputError(f"{label!r}: params.imputer must be null or an estimator of class "
                                f"{', '.join(_MODEL_CLASSES)}.")
        inner_param = _set_params(_model_class(inner_param["class"])(), inner_param["params"], label,
                                  " (in params.imputer)")
    est = TransformedImputer(imputer=inner_param, transforms=_decode_transforms_param(params.get("transforms"), label),
                             point=point, margin=margin)
    try:
        inner = _build_model(inner_doc, label)
    except BadInputError as exc:
        raise BadInputError(f"{exc} (in the 'imputer' section: the model TransformedImputer wraps)") from None
    d = doc.get("n_features_in")
    if not isinstance(d, int) or isinstance(d, bool) or d != inner.n_features_in_:
        raise BadInputError(f"{label!r}: n_features_in is {d!r} but the wrapped model has "
                            f"{inner.n_features_in_} feature(s); the file is damaged.")
    names = doc.get("feature_names")
    if names is not None and not (isinstance(names, list) and len(names) == d
                                  and all(isinstance(c, str) for c in names) and len(set(names)) == d):
        raise BadInputError(f"{label!r}: feature_names must be null or {d} distinct strings.")
    inner_names = getattr(inner, "feature_names_in_", None)
    if names is not None and inner_names is not None and list(inner_names) != names:
        raise BadInputError(f"{label!r}: feature_names {names} differ from the wrapped model's "
                            f"{list(inner_names)}; the file is damaged.")
    if len(columns) != d:
        raise BadInputError(f"{label!r}: 'transforms' lists {len(columns)} column(s) for {d} feature(s).")
    keys = list(range(d)) if names is None else names
    chosen = []
    for j, (key, obj) in enumerate(zip(keys, columns)):
        where = f"transforms[{j}] (column {key!r})"
        if isinstance(obj, dict) and obj.get("column", key) != key:
            raise BadInputError(f"{label!r}: {where} is labelled {obj.get('column')!r}; the file is damaged.")
        chosen.append(_decode_column_transform(obj, where, label))
    # the fitted state exactly as TransformedImputer.fit leaves it
    est._transforms = tuple(chosen)
    est.transforms_ = dict(zip(keys, chosen))
    est.imputer_ = inner
    est.n_features_in_ = d
    if names is not None:
        est.feature_names_in_ = np.asarray(names, dtype=object)
    return est


def _check_loaded(est, cls_name: str, label: str) -> None:
    """Shapes, finiteness and weights of a loaded model; a damaged file gives a clear error."""
    need = ("n_features_in_", *_REQUIRED[cls_name])
    absent = [a for a in need if not hasattr(est, a)]
    if absent:
        raise BadInputError(f"{label!r} lacks the fitted attribute(s) {absent} of {cls_name}.")
    d = est.n_features_in_
    if not isinstance(d, int) or d < 1:
        raise BadInputError(f"{label!r}: n_features_in_ must be a positive integer, got {d!r}.")
    names = getattr(est, "feature_names_in_", None)
    if names is not None and (not isinstance(names, np.ndarray) or names.shape != (d,)):
        raise BadInputError(f"{label!r}: feature_names_in_ must list {d} names.")
    weights = est.weights_
    if not isinstance(weights, np.ndarray) or weights.ndim != 1 or weights.size < 1:
        raise BadInputError(f"{label!r}: weights_ must be a non-empty 1-D array.")
    k = weights.size
    shapes = {"weights_": (k,), "means_": (k, d), "mean_": (d,), "center_": (d,), "scale_": (d,),
              "beta_": (k,), "nu_": (k,), "scatter_": (k, d, d), "noise_variance_": (k, d)}
    if cls_name == "FactorAnalysisImputer":
        shapes["noise_variance_"] = (d,)
    if cls_name in ("GaussianMixtureImputer", "DPGMMImputer"):
        diag = getattr(est, "covariance_type", "full") == "diag"
        shapes["covariances_"] = (k, d) if diag else (k, d, d)
    if cls_name == "GaussianMixtureImputer":
        shapes["col_means_"] = (d,)
    for name, shape in shapes.items():
        if name not in need and not hasattr(est, name):
            continue
        value = getattr(est, name)
        if not isinstance(value, np.ndarray) or value.shape != shape or value.dtype != np.float64:
            got = value.shape if isinstance(value, np.ndarray) else type(value).__name__
            raise BadInputError(f"{label!r}: {name} must be a float array of shape {shape}; got {got}.")
        if not np.isfinite(value).all():
            raise BadInputError(f"{label!r}: {name} holds NaN or infinite values; the file is damaged.")
    if "loadings_" in need:
        load = est.loadings_
        ok = isinstance(load, np.ndarray) and load.dtype == np.float64 and np.isfinite(load).all()
        lead = (d,) if cls_name == "FactorAnalysisImputer" else (k, d)
        if not ok or load.ndim != len(lead) + 1 or load.shape[:-1] != lead:
            raise BadInputError(f"{label!r}: loadings_ must be a finite float array of shape {(*lead, 'q')}.")
    if (weights < 0).any() or not np.isclose(weights.sum(), 1.0, rtol=0, atol=1e-8):
        raise BadInputError(f"{label!r}: weights_ must be non-negative and sum to 1; the file is damaged.")
