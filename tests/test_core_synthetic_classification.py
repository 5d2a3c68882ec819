"""Tests of explorer.core.classifiers.synthetic_classification: Marlin's four 2-D sets and the MCAR pattern scheme."""

import numpy as np
import pytest

from explorer.core.classifiers.synthetic_classification import (
    DATASETS,
    SPECS,
    make_dataset,
    make_mix,
    make_overlap,
    make_simple,
    make_xor,
    mcar_patterns,
)
from explorer.core.validation import BadInputError

N_BIG = 40_000


def _mixture_moments(spec):
    w = np.array([c[0] for c in spec])
    w = w / w.sum()
    means = np.array([c[1] for c in spec])
    mean = w @ means
    cov = sum(wk * (c[2] + np.outer(m - mean, m - mean)) for wk, m, c in zip(w, means, spec))
    return mean, cov


# ---------------------------------------------------------------- oracle: moments match the digest table

def test_simple_moments_match_spec():
    X, y = make_simple(N_BIG, np.random.default_rng(0))
    for c, mu in enumerate(([-1.5, -1.5], [1.5, 1.5])):
        Xc = X[y == c]
        np.testing.assert_allclose(Xc.mean(0), mu, atol=0.02)
        np.testing.assert_allclose(np.cov(Xc.T), 0.5 * np.eye(2), atol=0.02)


def test_overlap_moments_match_spec():
    X, y = make_overlap(N_BIG, np.random.default_rng(1))
    S = np.array([[0.5, 0.45], [0.45, 0.5]])
    for c, mu in enumerate(([-0.3, 0.8], [0.3, -0.8])):
        Xc = X[y == c]
        np.testing.assert_allclose(Xc.mean(0), mu, atol=0.02)
        np.testing.assert_allclose(np.cov(Xc.T), S, atol=0.02)


@pytest.mark.parametrize("maker, name", [(make_mix, "mix"), (make_xor, "xor")])
def test_mixture_sets_moments_match_spec(maker, name):
    X, y = maker(N_BIG, np.random.default_rng(2))
    for c in (0, 1):
        mean, cov = _mixture_moments(SPECS[name][c])
        Xc = X[y == c]
        np.testing.assert_allclose(Xc.mean(0), mean, atol=0.04)
        np.testing.assert_allclose(np.cov(Xc.T), cov, atol=0.06)


def test_mix_class_b_is_bimodal_with_equal_weights():
    X, y = make_mix(N_BIG, np.random.default_rng(3))
    B = X[y == 1]
    near_high = np.mean(B[:, 0] > 0.5)
    assert abs(near_high - 0.5) < 0.01
    # each mode has the spherical variance 0.1
    np.testing.assert_allclose(np.var(B[B[:, 0] > 0.5], axis=0), 0.1, atol=0.005)


def test_xor_exact_means_spec():
    assert np.allclose(SPECS["xor"][0][0][1], [2.2, 1.0])
    assert np.allclose(SPECS["xor"][1][1][1], [1.0, -2.2])
    X, y = make_xor(N_BIG, np.random.default_rng(4))
    A = X[y == 0]
    np.testing.assert_allclose(A[A[:, 0] > 0].mean(0), [2.2, 1.0], atol=0.02)


# ---------------------------------------------------------------- property: the MCAR pattern scheme

def test_pattern_frequencies_are_one_third_and_never_both_missing():
    missing = mcar_patterns(30_000, np.random.default_rng(5))
    assert missing.dtype == bool and missing.shape == (30_000, 2)
    assert not np.any(missing.all(axis=1))
    freq = [np.mean(~missing.any(1)), np.mean(missing[:, 0]), np.mean(missing[:, 1])]
    np.testing.assert_allclose(freq, 1 / 3, atol=0.012)


def test_make_dataset_nan_at_mask_and_complete_kept():
    X, y, Xc = make_dataset("mix", 500, np.random.default_rng(6))
    nan = np.isnan(X)
    assert not np.any(nan.all(axis=1))
    assert 0.25 < nan[:, 0].mean() < 0.42
    np.testing.assert_array_equal(X[~nan], Xc[~nan])
    assert not np.isnan(Xc).any()
    assert np.bincount(y).tolist() == [500, 500]


def test_make_dataset_without_missing_and_determinism():
    X, _, Xc = make_dataset("xor", 10, np.random.default_rng(7), missing=False)
    np.testing.assert_array_equal(X, Xc)
    a = make_dataset("overlap", 20, np.random.default_rng(8))
    b = make_dataset("overlap", 20, np.random.default_rng(8))
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)
    assert DATASETS == ("simple", "mix", "overlap", "xor")


# ---------------------------------------------------------------- bad input

def test_bad_inputs():
    rng = np.random.default_rng(0)
    with pytest.raises(BadInputError, match="Unknown data set"):
        make_dataset("moons", 10, rng)
    with pytest.raises(BadInputError, match="n_per_class"):
        make_simple(0, rng)
    with pytest.raises(BadInputError, match="n_per_class"):
        make_xor(2.5, rng)
    with pytest.raises(BadInputError, match="numpy.random.Generator"):
        make_mix(10, 42)
    with pytest.raises(BadInputError, match="n_samples"):
        mcar_patterns(-1, rng)
