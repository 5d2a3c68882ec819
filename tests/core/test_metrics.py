"""Imputation metrics against hand-computed values on tiny literal arrays."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from explorer.core.metrics import gaussian_nll, interval_coverage, mae, nll_from_logpdf, nrmse, pfc, rmse
from explorer.core.validation import BadInputError

T = np.array([[1.0, 2.0], [3.0, 4.0]])
IMP = np.array([[1.0, 0.0], [6.0, 4.0]])
M = np.array([[False, True], [True, False]])
# masked errors: (0,1): 2 - 0 = 2 ; (1,0): 3 - 6 = -3


def test_rmse_mae_hand_values():
    assert rmse(T, IMP, M) == pytest.approx(math.sqrt((4 + 9) / 2))
    assert mae(T, IMP, M) == pytest.approx(2.5)
    assert rmse(T, IMP, M, columns=[1]) == pytest.approx(2.0)
    assert mae(T, IMP, M, columns=np.array([True, False])) == pytest.approx(3.0)


def test_observed_entries_never_count():
    wild = IMP.copy()
    wild[~M] = 1e9
    assert rmse(T, wild, M) == rmse(T, IMP, M)
    nan_obs = IMP.copy()
    nan_obs[~M] = np.nan  # NaN where observed is irrelevant
    assert mae(T, nan_obs, M) == pytest.approx(2.5)


def test_nrmse_hand_values():
    # pooled true masked values [2, 3]: variance 0.25
    assert nrmse(T, IMP, M) == pytest.approx(math.sqrt(6.5 / 0.25))
    # explicit min-max: lo (0, 0), hi (10, 2): scaled diffs 1 and -0.3; true scaled [1, 0.3]
    got = nrmse(T, IMP, M, minmax=(np.array([0.0, 0.0]), np.array([10.0, 2.0])))
    assert got == pytest.approx(math.sqrt(((1.0 + 0.09) / 2) / np.var([1.0, 0.3])))
    # minmax from truth: lo (1, 2), hi (3, 4): diffs 1 and -1.5; true scaled [0, 1]
    assert nrmse(T, IMP, M, minmax="truth") == pytest.approx(math.sqrt(((1 + 2.25) / 2) / 0.25))


def test_nrmse_of_the_pooled_true_mean_is_one():
    rng = np.random.default_rng(3)
    truth = rng.normal(size=(30, 4))
    miss = rng.random((30, 4)) < 0.4
    imputed = np.where(miss, truth[miss].mean(), truth)
    assert nrmse(truth, imputed, miss) == pytest.approx(1.0)
    assert nrmse(truth, np.where(miss, truth, 0.0), miss) == 0.0


def test_nrmse_zero_variance_and_bad_minmax():
    with pytest.raises(BadInputError, match="zero variance"):
        nrmse(T, IMP, M, columns=[1])  # a single masked entry
    with pytest.raises(BadInputError, match="minmax"):
        nrmse(T, IMP, M, minmax="columns")
    with pytest.raises(BadInputError, match="max >= min"):
        nrmse(T, IMP, M, minmax=([0.0, 5.0], [1.0, 1.0]))


def test_pfc_thresholds_at_half():
    truth = np.array([[0.0, 1.0], [1.0, 0.0]])
    imputed = np.array([[0.2, 0.7], [0.4, 0.5]])  # -> 0, 1, 0, 1 ; truth 0, 1, 1, 0
    miss = np.ones((2, 2), dtype=bool)
    assert pfc(truth, imputed, miss) == pytest.approx(0.5)
    assert pfc(truth, imputed, miss, threshold=0.35) == pytest.approx(0.25)  # 0.4 -> 1
    assert pfc(truth, truth, miss) == 0.0


def test_pfc_requires_binary_truth():
    truth = np.array([[0.0, 2.5], [1.0, 3.0]])
    miss = np.ones((2, 2), dtype=bool)
    with pytest.raises(BadInputError, match="other than 0/1"):
        pfc(truth, truth, miss)
    assert pfc(truth, np.zeros((2, 2)), miss, columns=[0]) == pytest.approx(0.5)


def test_gaussian_nll_hand_and_scipy_oracle():
    truth = np.array([[1.0, 0.0], [2.0, -1.0]])
    mean = np.zeros((2, 2))
    var = np.array([[1.0, 4.0], [0.5, 2.0]])
    miss = np.array([[True, False], [True, True]])
    per = gaussian_nll(truth, mean, var, miss, reduction="none")
    assert per[0] == pytest.approx(0.5 * (math.log(2 * math.pi) + 1.0))
    oracle = -stats.norm.logpdf(truth[miss], loc=0.0, scale=np.sqrt(var[miss]))
    np.testing.assert_allclose(per, oracle)
    assert gaussian_nll(truth, mean, var, miss) == pytest.approx(oracle.sum())
    assert gaussian_nll(truth, mean, var, miss, reduction="mean") == pytest.approx(oracle.mean())


def test_gaussian_nll_reports_infinity_for_zero_variance_misses():
    truth = np.array([[1.0, 2.0]])
    miss = np.array([[True, True]])
    zero = np.zeros((1, 2))
    assert gaussian_nll(truth, np.array([[1.0, 0.0]]), zero, miss) == math.inf
    hit = gaussian_nll(truth, truth, zero, miss)  # exact hit with var clipped at tiny: finite, very negative
    assert np.isfinite(hit) and hit < -600
    with pytest.raises(BadInputError, match="negative"):
        gaussian_nll(truth, truth, -np.ones((1, 2)), miss)
    with pytest.raises(BadInputError, match="reduction"):
        gaussian_nll(truth, truth, np.ones((1, 2)), miss, reduction="max")


def test_nll_from_logpdf_keeps_infinities():
    assert nll_from_logpdf([-1.0, -2.0]) == pytest.approx(3.0)
    assert nll_from_logpdf(np.array([-1.0, -2.0]), reduction="mean") == pytest.approx(1.5)
    np.testing.assert_array_equal(nll_from_logpdf([-1.0, 0.5], reduction="none"), [1.0, -0.5])
    assert nll_from_logpdf([-1.0, -np.inf]) == math.inf
    assert nll_from_logpdf([-1.0, np.inf]) == -math.inf
    with pytest.raises(BadInputError, match="NaN"):
        nll_from_logpdf([-1.0, np.nan])
    with pytest.raises(BadInputError, match="both \\+inf and -inf"):
        nll_from_logpdf([np.inf, -np.inf])
    with pytest.raises(BadInputError, match="empty"):
        nll_from_logpdf([])


def test_interval_coverage_hand_values():
    truth = np.array([[1.0, 2.0, 3.0]])
    lower = np.array([[0.0, 2.0, 3.5]])
    upper = np.array([[0.5, 2.5, 4.0]])
    miss = np.array([[True, True, True]])
    assert interval_coverage(truth, lower, upper, miss) == pytest.approx(1 / 3)  # bound included
    assert interval_coverage(truth, lower - 10, upper + 10, miss) == 1.0
    with pytest.raises(BadInputError, match="lower > upper"):
        interval_coverage(truth, upper, lower, miss)


@pytest.mark.parametrize("fn", [rmse, mae, nrmse, pfc])
def test_common_bad_inputs(fn):
    with pytest.raises(BadInputError, match="imputed has shape"):
        fn(T, IMP[:, :1], M)
    with pytest.raises(BadInputError, match="missing has shape"):
        fn(T, IMP, M[:1])
    with pytest.raises(BadInputError, match="no masked"):
        fn(T, IMP, np.zeros_like(M))
    with pytest.raises(BadInputError, match="no masked.*selected columns"):
        fn(T, IMP, np.array([[False, False], [True, False]]), columns=[1])
    bad = IMP.copy()
    bad[0, 1] = np.nan
    with pytest.raises(BadInputError, match=r"imputed has 1 NaN value\(s\) at masked entries.*\(0, 1\)"):
        fn(T, bad, M)
    with pytest.raises(BadInputError, match="must be boolean"):
        fn(T, IMP, np.array([[0.0, 0.5], [1.0, 0.0]]))
    with pytest.raises(BadInputError, match="out of range"):
        fn(T, IMP, M, columns=[5])


def test_nan_truth_at_masked_entries_and_bad_predictions():
    t = T.copy()
    t[0, 1] = np.nan
    with pytest.raises(BadInputError, match="truth has 1 NaN"):
        rmse(t, IMP, M)
    with pytest.raises(BadInputError, match="mean has 1 NaN"):
        gaussian_nll(T, np.array([[0.0, np.nan], [0.0, 0.0]]), np.ones((2, 2)), M)
    with pytest.raises(BadInputError, match="var has shape"):
        gaussian_nll(T, IMP, np.ones(3), M)
    with pytest.raises(BadInputError, match="upper has 1 NaN"):
        interval_coverage(T, T - 1, np.array([[0.0, np.nan], [9.0, 0.0]]), M)


@settings(max_examples=50, deadline=None)
@given(st.floats(-100, 100), st.floats(0.1, 10))
def test_rmse_nrmse_affine_behaviour(shift, scale):
    rng = np.random.default_rng(0)
    truth = rng.normal(size=(8, 3))
    imputed = truth + rng.normal(size=(8, 3))
    miss = rng.random((8, 3)) < 0.5
    miss[0, 0] = miss[1, 1] = True
    base_rmse, base_nrmse = rmse(truth, imputed, miss), nrmse(truth, imputed, miss)
    # RMSE scales with the data and ignores shifts; NRMSE is invariant to both
    assert rmse(scale * truth + shift, scale * imputed + shift, miss) == pytest.approx(scale * base_rmse, rel=1e-6)
    assert nrmse(scale * truth + shift, scale * imputed + shift, miss) == pytest.approx(base_nrmse, rel=1e-6)
    assert rmse(truth, imputed, miss) >= mae(truth, imputed, miss) - 1e-12
