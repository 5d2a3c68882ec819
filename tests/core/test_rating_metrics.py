"""NMAE and NDCG (Marlin ch. 5) against enumeration and hand-computed values."""

import itertools
import math

import numpy as np
import pytest

from explorer.core.discrete.rating_metrics import (
    expected_uniform_mae,
    ndcg,
    nmae,
    predictive_mean,
    predictive_median,
)
from explorer.core.validation import BadInputError


@pytest.mark.parametrize("v", [2, 3, 5, 7])
def test_uniform_guess_scores_one_by_enumeration(v):
    pairs = np.array(list(itertools.product(range(v), repeat=2)))  # every (guess, truth) equally likely
    brute = np.mean(np.abs(pairs[:, 0] - pairs[:, 1]))
    assert expected_uniform_mae(v) == pytest.approx(brute, abs=1e-12)
    assert nmae(pairs[:, 0], pairs[:, 1], n_values=v) == pytest.approx(1.0, abs=1e-12)


def test_nmae_default_normaliser_is_1_6_for_five_values_and_explicit_values_are_used():
    assert expected_uniform_mae(5) == pytest.approx(1.6)
    pred, true = np.array([0, 2, 4, 3]), np.array([1, 2, 2, 3])  # |errors| 1, 0, 2, 0 -> MAE 0.75
    assert nmae(pred, true) == pytest.approx(0.75 / 1.6)
    assert nmae(pred, true, normaliser=4.0) == pytest.approx(0.75 / 4.0)  # Jester: the rating range
    assert nmae(true, true) == 0.0
    assert nmae(pred.astype(float) + 0.5, true) == pytest.approx(np.mean(np.abs(pred + 0.5 - true)) / 1.6)


def test_ndcg_true_order_is_one_and_a_hand_computed_case():
    codes = np.array([0, 2, 1, 4])
    assert ndcg(codes.astype(float), codes) == pytest.approx(1.0)
    assert ndcg(-np.argsort(np.argsort(-codes)).astype(float), codes) == pytest.approx(1.0)
    # ratings 1, 3, 2 -> gains 1, 7, 3; predicted order item0, item1, item2
    got = ndcg(np.array([3.0, 2.0, 1.0]), np.array([0, 2, 1]))
    dcg = 1 / math.log2(2) + 7 / math.log2(3) + 3 / math.log2(4)
    ideal = 7 / math.log2(2) + 3 / math.log2(3) + 1 / math.log2(4)
    assert got == pytest.approx(dcg / ideal)
    assert got < 1.0


def test_ndcg_ties_equal_the_average_over_all_tie_breakings():
    rng = np.random.default_rng(3)
    for _ in range(20):
        codes = rng.integers(0, 5, size=6)
        scores = rng.integers(0, 3, size=6).astype(float)  # many ties
        gains = 2.0 ** (codes + 1) - 1
        ideal = np.sort(gains)[::-1] @ (1 / np.log2(np.arange(2, 8)))
        # brute force: every permutation consistent with the scores' order, equally likely
        vals = []
        for perm in itertools.permutations(range(6)):
            s = scores[list(perm)]
            if np.all(np.diff(s) <= 0):
                vals.append(gains[list(perm)] @ (1 / np.log2(np.arange(2, 8))) / ideal)
        assert ndcg(scores, codes) == pytest.approx(np.mean(vals), abs=1e-12)
        # the item order does not matter
        p = rng.permutation(6)
        assert ndcg(scores[p], codes[p]) == pytest.approx(ndcg(scores, codes), abs=1e-12)


def test_ndcg_rows_and_groups_agree():
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 5, size=(4, 5))
    scores = rng.random((4, 5))
    rows = ndcg(scores, codes)
    assert rows.shape == (4,) and np.all((rows > 0) & (rows <= 1 + 1e-12))
    groups = np.repeat([10, 3, 7, 5], 5)  # labels sorted by np.unique: 3, 5, 7, 10
    by_group = ndcg(scores.ravel(), codes.ravel(), groups=groups)
    assert np.allclose(by_group, rows[[1, 3, 2, 0]])


def test_predictive_median_and_mean():
    p = np.array([[0.5, 0.5, 0, 0, 0], [0.1, 0.1, 0.1, 0.6, 0.1], [0, 0, 0, 0, 1.0], [0.2] * 5])
    assert predictive_median(p).tolist() == [0, 3, 4, 2]
    assert np.allclose(predictive_mean(p), [0.5, 0.1 + 0.2 + 1.8 + 0.4, 4.0, 2.0])
    rng = np.random.default_rng(1)
    q = rng.dirichlet(np.ones(5), size=(50, 3))
    med = predictive_median(q)
    cdf = np.cumsum(q, -1)
    lower = np.take_along_axis(np.concatenate([np.zeros((50, 3, 1)), cdf], -1), med[..., None], -1)[..., 0]
    assert np.all(np.take_along_axis(cdf, med[..., None], -1)[..., 0] >= 0.5 - 1e-9)
    assert np.all(lower < 0.5)


@pytest.mark.parametrize("call, match", [
    (lambda: nmae([0, 1], [0, 1, 2]), "shape"),
    (lambda: nmae([0, 1], [0, 7]), "codes 0..4"),
    (lambda: nmae([0, np.nan], [0, 1]), "NaN"),
    (lambda: nmae([0, 1], [0, 1], normaliser=0.0), "positive"),
    (lambda: nmae([], []), "empty"),
    (lambda: ndcg([1.0, 2.0], [0]), "shape"),
    (lambda: ndcg([1.0, 2.0], [0, -1]), "non-negative"),
    (lambda: ndcg(np.ones((2, 2, 2)), np.ones((2, 2, 2), int)), "1-D"),
    (lambda: ndcg([1.0, 2.0], [0, 1], groups=[0]), "groups"),
    (lambda: predictive_median([[0.5, 0.6]]), "sum to one"),
    (lambda: predictive_mean([1.0]), "V >= 2"),
    (lambda: expected_uniform_mae(1), "n_values"),
])
def test_bad_input(call, match):
    with pytest.raises(BadInputError, match=match):
        call()
