"""Tests of explorer.learn.kernel_logistic: KLR equivalences with (augmented) LR, the primal objective, bad input."""

import numpy as np
import pytest
from scipy.special import logsumexp
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV

from explorer.core.classifiers import missing_kernels as mk
from explorer.core.classifiers.synthetic_classification import make_dataset
from explorer.core.validation import BadInputError
from explorer.learn.kernel_logistic import KernelLogisticRegression as KLR
from explorer.learn.treatments import MissingInputClassifier

X_TR, Y_TR, _ = make_dataset("mix", 40, np.random.default_rng(0))
X_TE, Y_TE, _ = make_dataset("mix", 50, np.random.default_rng(1))
XOR_TR, XOR_Y, _ = make_dataset("xor", 30, np.random.default_rng(2))


def _tight_lr(C):
    return LogisticRegression(C=C, tol=1e-12, max_iter=20000)


# ---------------------------------------------------------------- oracle: equivalences of the digest

def test_linear_o_klr_equals_zero_imputation_lr():
    C = 0.4
    klr = KLR("linear", C=C, tol=1e-10).fit(X_TR, Y_TR)
    lr = MissingInputClassifier(_tight_lr(2 * C), "zero").fit(X_TR, Y_TR)  # binary LR: C' = 2C
    np.testing.assert_allclose(klr.predict_proba(X_TE), lr.predict_proba(X_TE), atol=1e-6)
    # and not equal with the wrong penalty mapping (the test can fail)
    other = MissingInputClassifier(_tight_lr(C), "zero").fit(X_TR, Y_TR)
    assert np.abs(klr.predict_proba(X_TE) - other.predict_proba(X_TE)).max() > 1e-3


@pytest.mark.parametrize("gamma", [1.0, 4.0])
def test_linear_or_klr_equals_response_augmented_lr(gamma):
    C = 0.3
    klr = KLR("linear", augmented=True, gamma=gamma, C=C, tol=1e-10).fit(X_TR, Y_TR)
    # feature map [x*r, sqrt(gamma) r]: LR on it with C' = 2C
    xr, r = mk.response(X_TR)
    lr = _tight_lr(2 * C).fit(np.hstack([xr, np.sqrt(gamma) * r]), Y_TR)
    xt, rt = mk.response(X_TE)
    np.testing.assert_allclose(klr.predict_proba(X_TE), lr.predict_proba(np.hstack([xt, np.sqrt(gamma) * rt])),
                               atol=1e-6)
    if gamma == 1.0:  # exactly the augmented treatment (eq. 6.3.12)
        aug = MissingInputClassifier(_tight_lr(2 * C), "augmented").fit(X_TR, Y_TR)
        np.testing.assert_allclose(klr.predict_proba(X_TE), aug.predict_proba(X_TE), atol=1e-6)


def _direct_objective(K, codes, C, n_classes):
    n = K.shape[0]
    Y = np.eye(n_classes)[codes]

    def J(theta):
        A = theta[: n * n_classes].reshape(n, n_classes)
        b = theta[n * n_classes:]
        F = K @ A + b
        lse = logsumexp(F, axis=1)
        val = np.sum(lse) - np.sum(F * Y) + 0.5 / C * np.sum(A * (K @ A))
        G = np.exp(F - lse[:, None]) - Y
        return val, np.concatenate([(K @ G + K @ A / C).ravel(), G.sum(0)])

    return J


def test_objective_matches_direct_minimisation_of_eq_652():
    """Gaussian o+r kernel with gamma = inf (PSD): the reparameterised solver reaches the optimum of 6.5.2."""
    C = 2.0
    X, y = XOR_TR[::2], XOR_Y[::2]
    klr = KLR("gaussian", augmented=True, gamma=np.inf, C=C, tol=1e-9).fit(X, y)
    K = mk.gaussian_or(X, ~np.isnan(X), X, ~np.isnan(X), sigma2=2.0, gamma=np.inf)
    J = _direct_objective(K, y, C, 2)
    theta = np.concatenate([klr.dual_coef_.ravel(), klr.intercept_])
    ours, grad = J(theta)
    np.testing.assert_allclose(klr.objective_, ours, rtol=1e-8)
    # J is convex for a PSD K: a vanishing gradient of the direct objective is the global optimum
    assert np.abs(grad).max() < 1e-5
    assert J(np.zeros_like(theta))[0] > ours + 1.0


def test_gaussian_o_klr_removes_negative_eigenvalues_or_refuses():
    klr = KLR("gaussian", augmented=False).fit(XOR_TR, XOR_Y)
    assert klr.min_eigenvalue_ < 0 and klr.n_negative_removed_ > 0
    with pytest.raises(BadInputError, match="indefinite"):
        KLR("gaussian", remove_negative=False).fit(XOR_TR, XOR_Y)
    # the PSD polynomial kernel fits without removal
    KLR("polynomial", augmented=True, remove_negative=False, max_iter=50).fit(XOR_TR, XOR_Y)


# ---------------------------------------------------------------- properties

@pytest.mark.parametrize("kernel, aug", [("polynomial", False), ("polynomial", True), ("gaussian", False),
                                         ("gaussian", True)])
def test_probabilities_and_learning_on_xor(kernel, aug):
    klr = KLR(kernel, augmented=aug, C=10.0).fit(XOR_TR, XOR_Y)
    P = klr.predict_proba(XOR_TR)
    np.testing.assert_allclose(P.sum(1), 1.0)
    assert klr.converged_
    # J(solution) below J(0) = n log 2
    assert klr.objective_ < len(XOR_Y) * np.log(2) - 1.0
    # the thesis: polynomial KLR with the "o" kernel fails on XOR (Table 6.3, 25.75 % error)
    assert np.mean(klr.predict(XOR_TR) == XOR_Y) > (0.6 if (kernel, aug) == ("polynomial", False) else 0.85)


def test_multiclass_labels_and_caller_data_untouched():
    rng = np.random.default_rng(5)
    X = np.vstack([rng.normal(m, 0.3, size=(15, 2)) for m in ([0, 0], [3, 0], [0, 3])])
    X[::4, 0] = np.nan
    y = np.repeat(["a", "b", "c"], 15)
    before = X.copy()
    klr = KLR("gaussian", augmented=True).fit(X, y)
    np.testing.assert_array_equal(X, before)
    assert list(klr.classes_) == ["a", "b", "c"]
    assert klr.predict_proba(X).shape == (45, 3)
    assert np.mean(klr.predict(X) == y) > 0.9


def test_clone_and_grid_search():
    gs = GridSearchCV(KLR("polynomial", max_iter=100), {"C": [0.1, 10.0]}, cv=3).fit(XOR_TR, XOR_Y)
    assert gs.best_params_["C"] in (0.1, 10.0)
    c = clone(KLR(kernel="linear", C=3.0))
    assert c.get_params()["C"] == 3.0 and not hasattr(c, "dual_coef_")


# ---------------------------------------------------------------- bad input

def test_bad_inputs():
    with pytest.raises(BadInputError, match="kernel must be one of"):
        KLR("rbf").fit(X_TR, Y_TR)
    with pytest.raises(BadInputError, match="C must be"):
        KLR(C=0).fit(X_TR, Y_TR)
    with pytest.raises(BadInputError, match="sigma2"):
        KLR(sigma2=-1).fit(X_TR, Y_TR)
    with pytest.raises(BadInputError, match="at least two"):
        KLR().fit(X_TR, np.zeros(len(Y_TR)))
    bad = X_TR.copy()
    bad[0, 0] = np.inf
    with pytest.raises(BadInputError, match="infinite|inf"):
        KLR().fit(bad, Y_TR)
    klr = KLR("linear").fit(X_TR, Y_TR)
    with pytest.raises(BadInputError, match="features"):
        klr.predict(np.zeros((3, 3)))
    with pytest.raises(BadInputError, match="max_iter"):
        KLR(max_iter=0).fit(X_TR, Y_TR)
    with pytest.raises(BadInputError, match="augmented"):
        KLR(augmented="yes").fit(X_TR, Y_TR)
