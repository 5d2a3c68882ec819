"""Tests of explorer.core.classifiers.missing_kernels: closed forms, feature maps, definiteness, eigenvalue removal."""

import numpy as np
import pytest

from explorer.core.classifiers import missing_kernels as mk
from explorer.core.validation import BadInputError

NAN = np.nan


def _loop_kernel(name, x1, x2, sigma2=2.0, degree=2, kappa=1.0, gamma=None):
    """Reference: the formulas of eqs. 6.5.3-6.5.10 evaluated with explicit loops."""
    g = np.ones(x1.shape[1]) if gamma is None else np.broadcast_to(np.asarray(gamma, float), (x1.shape[1],))
    K = np.zeros((len(x1), len(x2)))
    for i, a in enumerate(x1):
        for j, b in enumerate(x2):
            ra, rb = ~np.isnan(a), ~np.isnan(b)
            both = ra & rb
            lin = float(np.sum(a[both] * b[both]))
            lin_r = lin + float(np.sum(g[both]))
            d2 = float(np.sum((a[both] - b[both]) ** 2))
            diff = ra != rb
            pen = float(np.sum(g[diff])) if diff.any() else 0.0
            K[i, j] = {
                "lo": lin,
                "lor": lin_r,
                "po": (kappa + lin) ** degree,
                "por": (kappa + lin_r) ** degree,
                "go": np.exp(-d2 / sigma2),
                "gor": np.exp(-(d2 + pen) / sigma2),
            }[name]
    return K


RNG = np.random.default_rng(0)
XA = RNG.normal(size=(7, 3))
XA[RNG.random((7, 3)) < 0.35] = NAN
XB = RNG.normal(size=(5, 3))
XB[RNG.random((5, 3)) < 0.35] = NAN


def _r(X):
    return ~np.isnan(X)


# ---------------------------------------------------------------- oracle: closed forms

def test_hand_case_numbers():
    x1 = np.array([[1.0, NAN], [2.0, 3.0]])
    x2 = np.array([[NAN, 1.0], [4.0, 5.0]])
    r1, r2 = _r(x1), _r(x2)
    np.testing.assert_allclose(mk.linear_o(x1, r1, x2, r2), [[0.0, 4.0], [3.0, 23.0]])
    np.testing.assert_allclose(mk.linear_or(x1, r1, x2, r2, gamma=1.0), [[0.0, 5.0], [4.0, 25.0]])
    np.testing.assert_allclose(mk.polynomial_or(x1, r1, x2, r2, degree=2, kappa=1.0), [[1.0, 36.0], [25.0, 676.0]])
    # D^o2: (1,?) vs (?,1): nothing in common -> 0 -> similarity 1 (the non-PSD culprit)
    np.testing.assert_allclose(mk.gaussian_o(x1, r1, x2, r2, sigma2=2.0)[0, 0], 1.0)
    # D^{o+r}2 = 0 + gamma*(|r differs| = 2 dims) = 2 -> exp(-1)
    np.testing.assert_allclose(mk.gaussian_or(x1, r1, x2, r2, sigma2=2.0, gamma=1.0)[0, 0], np.exp(-1.0))
    # (2,3) vs (4,5): D2 = 4 + 4 = 8
    np.testing.assert_allclose(mk.gaussian_o(x1, r1, x2, r2, sigma2=2.0)[1, 1], np.exp(-4.0))


@pytest.mark.parametrize("name, fn, kw", [
    ("lo", mk.linear_o, {}),
    ("lor", mk.linear_or, {"gamma": [0.5, 1.0, 2.0]}),
    ("po", mk.polynomial_o, {"degree": 3, "kappa": 0.5}),
    ("por", mk.polynomial_or, {"degree": 2, "kappa": 1.0, "gamma": 1.5}),
    ("go", mk.gaussian_o, {"sigma2": 1.3}),
    ("gor", mk.gaussian_or, {"sigma2": 2.0, "gamma": [1.0, 0.3, 2.0]}),
])
def test_vectorised_kernels_equal_loop_formulas(name, fn, kw):
    K = fn(XA, _r(XA), XB, _r(XB), **kw)
    ref = _loop_kernel(name, XA, XB, **{k: v for k, v in kw.items()})
    np.testing.assert_allclose(K, ref, rtol=1e-12, atol=1e-12)


def test_linear_or_is_the_augmented_feature_map():
    gamma = np.array([0.5, 2.0, 3.0])
    xr, r = mk.response(XA)
    Phi = np.hstack([xr, np.sqrt(gamma) * r])
    np.testing.assert_allclose(mk.linear_or(XA, _r(XA), XA, _r(XA), gamma=gamma), Phi @ Phi.T, atol=1e-12)
    np.testing.assert_allclose(mk.linear_o(XA, _r(XA), XA, _r(XA)), xr @ xr.T, atol=1e-12)


def test_gram_dispatch_and_values_at_unobserved_entries_ignored():
    r = _r(XA)
    garbage = np.where(r, XA, 1e6)  # values behind r = 0 must not matter
    for kernel in mk.KERNELS:
        for aug in (False, True):
            np.testing.assert_allclose(mk.gram(XA, r, XB, _r(XB), kernel, aug),
                                       mk.gram(garbage, r, XB, _r(XB), kernel, aug))


# ---------------------------------------------------------------- property: definiteness

def test_gaussian_or_infinite_gamma_block_diagonal_by_pattern_and_psd():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(40, 2))
    pat = rng.integers(0, 3, size=40)
    X[pat == 1, 0] = NAN
    X[pat == 2, 1] = NAN
    K = mk.gaussian_or(X, _r(X), X, _r(X), sigma2=2.0, gamma=np.inf)
    same = pat[:, None] == pat[None, :]
    assert np.all(K[~same] == 0.0)
    assert np.all(K[same] > 0.0)
    assert np.linalg.eigvalsh(K).min() > -1e-10
    # gamma inf in one dimension only: zero exactly where that dimension's r differs
    K1 = mk.gaussian_or(X, _r(X), X, _r(X), sigma2=2.0, gamma=[np.inf, 1.0])
    diff0 = _r(X)[:, 0][:, None] != _r(X)[:, 0][None, :]
    assert np.all(K1[diff0] == 0.0) and np.all(K1[~diff0] > 0.0)


def test_gaussian_o_is_indefinite_and_removal_fixes_it():
    # a = (0, ?), b = (?, 0), c = (0, 10): K(a,b) = 1 (nothing in common), K(a,c) = 1, K(b,c) ~ 0
    X = np.array([[0.0, NAN], [NAN, 0.0], [0.0, 10.0]])
    K = mk.gaussian_o(X, _r(X), X, _r(X), sigma2=2.0)
    lam = np.linalg.eigvalsh(K)
    np.testing.assert_allclose(np.sort(lam), [1 - np.sqrt(2), 1.0, 1 + np.sqrt(2)], atol=1e-10)
    assert lam.min() < -0.4
    K_psd, P = mk.remove_negative_eigenvalues(K, return_projector=True)
    assert np.linalg.eigvalsh(K_psd).min() > -1e-12
    # consistency of the test-row projection: training rows through K @ P give the clipped Gram
    np.testing.assert_allclose(K @ P, K_psd, atol=1e-12)
    np.testing.assert_allclose(mk.psd_projector(K), P, atol=1e-12)
    # only the negative part is removed: K_psd - K is the negative eigencomponent, PSD
    assert np.linalg.eigvalsh(K_psd - K).min() > -1e-12
    np.testing.assert_allclose(np.linalg.eigvalsh(K_psd - K).max(), np.sqrt(2) - 1, atol=1e-10)


def test_gaussian_o_indefinite_on_random_incomplete_data():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(60, 2)) * 2
    pat = rng.integers(0, 3, size=60)
    X[pat == 1, 0] = NAN
    X[pat == 2, 1] = NAN
    K = mk.gaussian_o(X, _r(X), X, _r(X), sigma2=2.0)
    assert np.linalg.eigvalsh(K).min() < -1e-3


def test_removal_leaves_psd_matrix_unchanged():
    xr, _ = mk.response(XA)
    K = mk.polynomial_or(XA, _r(XA), XA, _r(XA))
    np.testing.assert_allclose(mk.remove_negative_eigenvalues(K), K, atol=1e-9 * np.abs(K).max())


# ---------------------------------------------------------------- bad input

def test_bad_inputs():
    r = _r(XA)
    with pytest.raises(BadInputError, match="features"):
        mk.linear_o(XA, r, XB[:, :2], _r(XB[:, :2]))
    with pytest.raises(BadInputError, match="response indicator"):
        mk.linear_o(XA, r[:, :2], XB, _r(XB))
    with pytest.raises(BadInputError, match="gamma"):
        mk.linear_or(XA, r, XB, _r(XB), gamma=-1.0)
    with pytest.raises(BadInputError, match="gamma"):
        mk.linear_or(XA, r, XB, _r(XB), gamma=np.inf)
    with pytest.raises(BadInputError, match="one value per feature"):
        mk.gaussian_or(XA, r, XB, _r(XB), gamma=[1.0, 2.0])
    with pytest.raises(BadInputError, match="sigma2"):
        mk.gaussian_o(XA, r, XB, _r(XB), sigma2=0.0)
    with pytest.raises(BadInputError, match="degree"):
        mk.polynomial_o(XA, r, XB, _r(XB), degree=0)
    with pytest.raises(BadInputError, match="kernel must be one of"):
        mk.gram(XA, r, XB, _r(XB), kernel="rbf")
    bad = XA.copy()
    bad[0, 0] = np.inf
    with pytest.raises(BadInputError, match="infinite"):
        mk.linear_o(bad, np.ones_like(bad, bool), XB, _r(XB))
    with pytest.raises(BadInputError, match="square"):
        mk.remove_negative_eigenvalues(np.ones((3, 2)))
    with pytest.raises(BadInputError, match="2-D"):
        mk.linear_o(XA[0], r[0], XB, _r(XB))
