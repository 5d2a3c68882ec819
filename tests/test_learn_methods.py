"""The method registry of the "Decision surfaces" page (explorer.learn.methods)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression

from explorer.core.classifiers.synthetic_classification import make_dataset
from explorer.core.validation import BadInputError
from explorer.learn.methods import FAMILIES, METHODS, MISSING_MODULES, make_method, method_names, stepped_methods


@pytest.fixture(scope="module")
def tiny():
    X, y, _ = make_dataset("simple", 15, np.random.default_rng(3), missing=True)
    X_test, y_test, _ = make_dataset("simple", 10, np.random.default_rng(4), missing=True)
    return X, y, X_test, y_test


@pytest.mark.parametrize("name", list(METHODS))
def test_every_method_fits_and_predicts_probabilities(tiny, name):
    X, y, X_test, y_test = tiny
    clf = make_method(name, random_state=0)
    clf.fit(X, y)
    # rows missing x, missing y, and complete rows; also a row with nothing observed
    probe = np.vstack([X_test, [[np.nan, np.nan]]])
    proba = clf.predict_proba(probe)
    assert proba.shape == (probe.shape[0], 2)
    assert np.all(np.isfinite(proba)) and np.all(proba >= 0) and np.all(proba <= 1)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-9)
    assert list(clf.classes_) == [0, 1]
    # Simple is easy: every method beats a coin on its own test set (can fail for a broken method)
    accuracy = np.mean(clf.classes_[proba[:-1].argmax(axis=1)] == y_test)
    assert accuracy >= 0.7, f"{name}: accuracy {accuracy:.2f}"


def test_registry_entries_are_well_formed():
    assert METHODS, "no method registered"
    for name, spec in METHODS.items():
        assert spec.family in FAMILIES, name
        assert spec.label and callable(spec.factory)
        est = spec.factory(0)
        assert est is not make_method(name, 0)  # fresh each time
        clone(est)  # scikit-learn can copy it (GridSearchCV, Pipeline)
    assert set(method_names()) == set(METHODS)
    assert sum(len(method_names(f)) for f in FAMILIES) == len(METHODS)
    assert all(METHODS[k].stepped for k in stepped_methods())


def test_lr_zero_is_logistic_regression_on_zero_filled_inputs(tiny):
    """Oracle: LR with zero imputation = scikit-learn's LogisticRegression on X with NaN -> 0 (eq. 6.5.3)."""
    X, y, X_test, _ = tiny
    ours = make_method("lr_zero", random_state=0).fit(X, y).predict_proba(X_test)
    ref = LogisticRegression(C=1.0, max_iter=1000).fit(np.nan_to_num(X, nan=0.0), y)
    np.testing.assert_allclose(ours, ref.predict_proba(np.nan_to_num(X_test, nan=0.0)), atol=1e-4)


def test_lr_mean_fills_with_training_means(tiny):
    X, y, X_test, _ = tiny
    mean = np.nanmean(X, axis=0)
    ours = make_method("lr_mean", random_state=0).fit(X, y).predict_proba(X_test)
    ref = LogisticRegression(C=1.0, max_iter=1000).fit(np.where(np.isnan(X), mean, X), y)
    np.testing.assert_allclose(ours, ref.predict_proba(np.where(np.isnan(X_test), mean, X_test)), atol=1e-4)


def test_unknown_method_is_a_clear_error():
    with pytest.raises(BadInputError, match="Unknown method 'nope'; registered methods: .*lr_zero"):
        make_method("nope")
    with pytest.raises(BadInputError, match="Unknown method"):
        make_method(3)
    with pytest.raises(BadInputError, match="Unknown family"):
        method_names("Perceptron")


def test_bad_training_data_is_refused(tiny):
    X, y, _, _ = tiny
    clf = make_method("lr_mean", random_state=0)
    with pytest.raises(ValueError, match="(?i)class"):
        clf.fit(X, np.zeros(len(y), dtype=int))  # one class only


def test_missing_modules_are_not_registered():
    """A module that is absent has no method in the registry (nothing is faked)."""
    by_module = {"explorer.learn.joint": "gmm_k1", "explorer.learn.discriminant": "lda",
                 "explorer.learn.treatments": "lr_reduced", "explorer.learn.kernel_logistic": "klr_gauss"}
    for module, name in by_module.items():
        assert (name in METHODS) == (module not in MISSING_MODULES), module
