"""Input handling shared by the supervised estimators of :mod:`explorer.learn`.

Every estimator here takes ``X`` with NaN marking a missing feature (numpy arrays, pandas
DataFrames with numeric columns, 2-D xarray DataArrays, :class:`~explorer.core.data.IncompleteData`)
and gives the same clear errors as the imputers (non-numeric columns, infinities, wrong shapes,
sparse input, values beyond ``±1e100``). Rows whose features are *all* missing are allowed: a
classifier then predicts from the class prior, which is the right answer.

Labels: ``y`` is any 1-D array of class labels. The estimators that *learn from unlabelled rows*
(:class:`~explorer.learn.joint.GaussianMixtureClassifier`,
:class:`~explorer.learn.joint.BernoulliMixtureClassifier`) read ``-1``, NaN and None as "unlabelled"
(scikit-learn's semi-supervised convention, :mod:`sklearn.semi_supervised`); every other classifier
here is fully supervised and treats ``-1`` as an ordinary class label (NaN / None are errors), as any
scikit-learn classifier does.
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import DataConversionWarning
from sklearn.utils.multiclass import check_classification_targets

from explorer.core.validation import BadInputError, check_incomplete, check_magnitude, column_label
from explorer.utils.inputs import unwrap

UNLABELLED = -1


def check_features(X, *, n_features: int | None = None, name: str = "X", allow_empty_columns: bool = False,
                   estimator: str = "the estimator"):
    """``(X_nan, missing, names)`` of any accepted input kind.

    ``X_nan`` is a float64 copy with NaN where a feature is missing, ``missing`` the boolean mask
    (True: missing) and ``names`` the string column names (None when unnamed). With
    ``n_features``, a different number of columns is an error that says both numbers (in
    scikit-learn's words). ``allow_empty_columns``: a column with no observed value is accepted
    (at prediction time a batch may miss a feature everywhere; a fit needs every column).
    """
    matrix, names, labels = unwrap(X, name=name)
    Xn, missing = check_incomplete(matrix, columns=labels, allow_empty_rows=True,
                                   allow_empty_columns=allow_empty_columns, name=name)
    check_magnitude(Xn, columns=labels, name=name)
    if n_features is not None and Xn.shape[1] != n_features:
        raise BadInputError(
            f"{name} has {Xn.shape[1]} features, but {estimator} is expecting {n_features} features as input.")
    return Xn, missing, names


def check_labels(y, n_samples: int, *, allow_unlabelled: bool = False):
    """``(codes, classes)``: ``codes[i]`` indexes ``classes`` (``-1`` marks an unlabelled row).

    ``classes`` are the sorted distinct labels seen (at least two). With ``allow_unlabelled``, the
    label ``-1``, NaN and None mark unlabelled rows; without it, ``-1`` is an ordinary label and
    NaN / None are errors (see the module docstring).
    """
    if y is None:
        raise BadInputError("This classifier requires y to be passed, but the target y is None (give the class "
                            "label of every row" + (", or -1 for an unlabelled row)." if allow_unlabelled else ")."))
    arr = np.asarray(y, dtype=object if not hasattr(y, "dtype") else None)
    if arr.ndim == 2 and arr.shape[1] == 1:
        warnings.warn("A column-vector y was passed when a 1d array was expected; it is read as y.ravel().",
                      DataConversionWarning, stacklevel=3)
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise BadInputError(f"y must be 1-D (one label per row); got shape {arr.shape}.")
    if arr.shape[0] != n_samples:
        raise BadInputError(f"y has {arr.shape[0]} labels but X has {n_samples} rows.")
    unlabelled = np.array([_is_unlabelled(v, minus_one=allow_unlabelled) for v in arr], dtype=bool)
    if unlabelled.any() and not allow_unlabelled:
        rows = np.flatnonzero(unlabelled)[:5].tolist()
        raise BadInputError(
            f"y has {int(unlabelled.sum())} missing labels (NaN or None; e.g. rows {rows}); this estimator "
            "needs a label for every row (the mixture classifiers of explorer.learn.joint learn from unlabelled rows).")
    labelled = arr[~unlabelled]
    if labelled.dtype == object:  # plain numbers or strings, read as such
        try:
            labelled = np.asarray(labelled.tolist())
        except Exception:
            pass
    try:  # a continuous target: scikit-learn's "Unknown label type" message, as a BadInputError
        check_classification_targets(labelled)
    except ValueError as exc:
        raise BadInputError(str(exc)) from None
    try:
        classes = np.unique(labelled)
    except TypeError as exc:
        raise BadInputError(f"y mixes label types that cannot be compared ({exc}).") from None
    if classes.size < 2:
        raise BadInputError(
            f"y has {classes.size} class{'es' if classes.size != 1 else ''} among the labelled rows; "
            "a classifier needs at least two classes.")
    codes = np.full(n_samples, UNLABELLED, dtype=np.intp)
    codes[~unlabelled] = np.searchsorted(classes, labelled)
    if classes.dtype == object:  # plain numbers back as numbers
        try:
            classes = np.asarray(classes.tolist())
        except Exception:
            pass
    return codes, classes


def _is_unlabelled(value, *, minus_one: bool = True) -> bool:
    if value is None:
        return True
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return bool(np.isnan(value)) or (minus_one and value == UNLABELLED)
    return False


class SupervisedMixin:
    """Feature-name bookkeeping and the ``allow_nan`` tag for the estimators of :mod:`explorer.learn`.

    ``_fit_features`` validates training ``X`` and records ``n_features_in_`` (and
    ``feature_names_in_`` for named columns); ``_predict_features`` validates later ``X`` against
    them.
    """

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags

    def _fit_features(self, X):
        Xn, missing, names = check_features(X)
        if Xn.shape[0] < 2:
            raise BadInputError(f"X has n_samples={Xn.shape[0]}; at least 2 rows are needed to fit.")
        self.n_features_in_ = Xn.shape[1]
        if names is not None:
            self.feature_names_in_ = names
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        return Xn, missing

    def _predict_features(self, X):
        from sklearn.utils.validation import check_is_fitted

        check_is_fitted(self, "n_features_in_")
        Xn, missing, names = check_features(X, n_features=self.n_features_in_, allow_empty_columns=True,
                                            estimator=type(self).__name__)
        fitted = getattr(self, "feature_names_in_", None)
        if fitted is not None and names is not None and list(names) != list(fitted):
            raise BadInputError(
                f"X has columns {list(names)[:5]}..., but the estimator was fitted with {list(fitted)[:5]}...")
        return Xn, missing


def check_finite_output(values: np.ndarray, what: str) -> np.ndarray:
    """``values`` when all finite; otherwise a clear error naming the first bad rows (no NaN leaks out)."""
    bad = ~np.isfinite(values)
    if bad.any():
        rows = np.unique(np.nonzero(bad)[0])[:5].tolist()
        raise BadInputError(f"{what} is not finite for rows {rows}; the fitted model is degenerate there.")
    return values


__all__ = ["UNLABELLED", "check_features", "check_labels", "SupervisedMixin", "check_finite_output",
           "BaseEstimator", "column_label"]
