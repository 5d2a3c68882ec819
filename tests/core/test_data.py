"""IncompleteData container and observed-entry standardisation."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from explorer.core.data import IncompleteData, Standardizer, standardize
from explorer.core.validation import BadInputError


@pytest.fixture
def rng():
    return np.random.default_rng(20240601)


def _random_data(rng, n=40, d=4, rate=0.3, binary_col=True):
    X = rng.normal(3.0, 2.0, size=(n, d))
    if binary_col:
        X[:, -1] = rng.integers(0, 2, size=n)
    miss = rng.random((n, d)) < rate
    miss[0] = False  # every column keeps an observed value
    return X, miss


# ---------------------------------------------------------------- container invariants
def test_from_array_nan_exactly_where_missing(rng):
    X, miss = _random_data(rng)
    data = IncompleteData.from_array(X, miss, truth=X)
    np.testing.assert_array_equal(np.isnan(data.values), miss)
    np.testing.assert_array_equal(data.values[~miss], X[~miss])
    np.testing.assert_array_equal(data.missing, miss)
    np.testing.assert_array_equal(data.observed, ~miss)
    assert data.values.dtype == np.float64 and data.missing.dtype == bool
    assert data.shape == (40, 4) and data.n_samples == 40 and data.n_features == 4
    assert data.missing_rate == pytest.approx(miss.mean())


def test_missing_taken_from_nan_when_not_given():
    X = np.array([[1.0, np.nan], [np.nan, 4.0], [5.0, 6.0]])
    data = IncompleteData.from_array(X)
    np.testing.assert_array_equal(data.missing, [[False, True], [True, False], [False, False]])
    assert data.truth is None
    assert data.columns == ("x0", "x1")


def test_arrays_are_read_only_and_decoupled_from_input(rng):
    X, miss = _random_data(rng)
    data = IncompleteData.from_array(X, miss, truth=X)
    for arr in (data.values, data.missing, data.truth, data.observed):
        assert not arr.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            arr[0, 0] = 1
    X[:] = 0.0
    miss[:] = True
    assert not data.missing.all() and np.nanmax(np.abs(data.values)) > 0
    with pytest.raises(AttributeError):
        data.values = X  # frozen


def test_filled_is_a_writeable_copy(rng):
    X, miss = _random_data(rng)
    data = IncompleteData.from_array(X, miss)
    f = data.filled(-7.0)
    assert f.flags.writeable
    np.testing.assert_array_equal(f[miss], -7.0)
    np.testing.assert_array_equal(f[~miss], X[~miss])
    f[0, 0] = 123.0
    assert data.values[0, 0] != 123.0
    assert not np.isnan(data.filled()).any()


def test_with_missing_round_trip(rng):
    X, miss = _random_data(rng)
    full = IncompleteData.from_complete(X, columns=["a", "b", "c", "d"], name="t")
    assert not full.missing.any() and np.array_equal(full.truth, X)
    amp = full.with_missing(miss)
    np.testing.assert_array_equal(amp.values, np.where(miss, np.nan, X))
    np.testing.assert_array_equal(amp.truth, X)
    assert amp.columns == full.columns and amp.binary == full.binary and amp.name == "t"
    back = amp.with_missing(np.zeros_like(miss))
    np.testing.assert_array_equal(back.values, X)
    assert amp.with_missing(miss, name="other").name == "other"


def test_a_mask_may_hide_a_whole_column_but_a_fit_refuses_it(rng):
    """Image masks (the top half of every image) hide whole columns: the container shows them, EM says why
    it cannot learn them."""
    from explorer.core.mixtures import em_gmm

    X, miss = _random_data(rng)
    hide_col = np.zeros_like(miss)
    hide_col[:, 1] = True
    amp = IncompleteData.from_complete(X).with_missing(hide_col)
    assert np.isnan(amp.values[:, 1]).all() and amp.missing[:, 1].all()
    with pytest.raises(BadInputError, match="no observed value"):
        em_gmm.prepare(amp.values, amp.missing)
    with pytest.raises(BadInputError, match="no observed value"):  # user data with an empty column: refused
        IncompleteData.from_array(np.where(hide_col, np.nan, X))


def test_with_missing_errors(rng):
    X, miss = _random_data(rng)
    with pytest.raises(BadInputError, match="no truth"):
        IncompleteData.from_array(X, miss).with_missing(miss)
    full = IncompleteData.from_complete(X)
    with pytest.raises(BadInputError, match="shape"):
        full.with_missing(miss[:, :2])


def test_rows_with_every_entry_missing_are_allowed():
    X = np.array([[1.0, 2.0], [np.nan, np.nan], [3.0, 5.0]])
    data = IncompleteData.from_array(X)
    assert data.missing[1].all()


def test_binary_detection_and_declaration():
    X = np.array([[0.0, 1.0, 2.0], [1.0, np.nan, 0.5], [1.0, 0.0, 0.0]])
    assert IncompleteData.from_array(X).binary == (True, True, False)
    assert IncompleteData.from_array(X, binary=[False, True, False]).binary == (False, True, False)
    with pytest.raises(BadInputError, match="'c'.*declared binary"):
        IncompleteData.from_array(X, columns=["a", "b", "c"], binary=[True, True, True])
    with pytest.raises(BadInputError, match="2 flags for 3 columns"):
        IncompleteData.from_array(X, binary=[True, False])


def test_truth_must_agree_and_be_complete():
    X = np.array([[1.0, np.nan], [3.0, 4.0]])
    with pytest.raises(BadInputError, match="differs from values on observed"):
        IncompleteData.from_array(X, truth=[[1.5, 2.0], [3.0, 4.0]])
    with pytest.raises(BadInputError, match="complete and finite"):
        IncompleteData.from_array(X, truth=X)
    with pytest.raises(BadInputError, match="truth has shape"):
        IncompleteData.from_array(X, truth=np.ones((3, 2)))


def test_bad_inputs_are_reported():
    with pytest.raises(BadInputError, match="non-numeric"):
        IncompleteData.from_array([["a", 1.0], [2.0, 3.0]])
    with pytest.raises(BadInputError, match="unique"):
        IncompleteData.from_array(np.ones((2, 2)), columns=["a", "a"])
    with pytest.raises(BadInputError, match="1 column names given for 2"):
        IncompleteData.from_array(np.ones((2, 2)), columns=["a"])
    with pytest.raises(BadInputError, match="NaN exactly where missing"):
        IncompleteData(values=np.ones((2, 2)), missing=np.eye(2, dtype=bool))
    with pytest.raises(BadInputError, match="NaN value"):
        IncompleteData.from_complete([[1.0, np.nan], [2.0, 3.0]])
    with pytest.raises(BadInputError, match="infinite"):
        IncompleteData.from_array([[1.0, np.inf], [2.0, 3.0]])


def test_pattern_counts_hand_example():
    nan = np.nan
    X = np.array([[1, nan], [2, nan], [3, 4], [nan, 5], [6, nan], [7, 8.0]])
    patterns, counts = IncompleteData.from_array(X).pattern_counts()
    np.testing.assert_array_equal(counts, [3, 2, 1])
    np.testing.assert_array_equal(patterns, [[False, True], [False, False], [True, False]])
    assert counts.sum() == 6


def test_observed_mean_and_std_match_nan_oracles(rng):
    X, miss = _random_data(rng)
    data = IncompleteData.from_array(X, miss)
    Xn = np.where(miss, np.nan, X)
    np.testing.assert_allclose(data.observed_mean(), np.nanmean(Xn, axis=0))
    np.testing.assert_allclose(data.observed_std(), np.nanstd(Xn, axis=0))
    np.testing.assert_allclose(data.observed_std(ddof=1), np.nanstd(Xn, axis=0, ddof=1))


# ---------------------------------------------------------------- standardisation
def test_standardizer_uses_observed_entries_only(rng):
    X, miss = _random_data(rng, binary_col=False)
    Xn = np.where(miss, np.nan, X)
    st_ = Standardizer.fit(IncompleteData.from_array(X, miss))
    np.testing.assert_allclose(st_.mean_, np.nanmean(Xn, axis=0))
    np.testing.assert_allclose(st_.scale_, np.nanstd(Xn, axis=0, ddof=0))
    # changing the hidden values must not change the statistics
    X2 = np.where(miss, 1e6, X)
    st2 = Standardizer.fit(IncompleteData.from_array(X2, miss, truth=X2))
    np.testing.assert_array_equal(st2.mean_, st_.mean_)
    np.testing.assert_array_equal(st2.scale_, st_.scale_)
    Z = st_.transform(Xn)
    np.testing.assert_allclose(np.nanmean(Z, axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(np.nanstd(Z, axis=0), 1.0)


def test_binary_columns_skipped_and_constant_columns_safe():
    X = np.array([[0.0, 5.0, 1.0], [1.0, 5.0, 2.0], [1.0, 5.0, np.nan], [0.0, np.nan, 4.0]])
    data = IncompleteData.from_array(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        st_ = Standardizer.fit(data)
        z, _ = standardize(data)
    assert st_.mean_[0] == 0.0 and st_.scale_[0] == 1.0  # binary left as 0/1
    assert st_.scale_[1] == 1.0 and st_.mean_[1] == 5.0  # constant column: centred, not divided
    np.testing.assert_array_equal(z.values[:, 0], X[:, 0])
    np.testing.assert_array_equal(z.values[[0, 1, 2], 1], 0.0)
    assert z.binary == data.binary
    st_all = Standardizer.fit(data, skip_binary=False)
    assert st_all.mean_[0] == pytest.approx(0.5) and st_all.scale_[0] == pytest.approx(0.5)
    z_all, _ = standardize(data, skip_binary=False)
    assert z_all.binary == (False, False, False)


def test_standardize_transforms_truth_consistently(rng):
    X, miss = _random_data(rng)
    data = IncompleteData.from_complete(X, name="r").with_missing(miss)
    z, st_ = standardize(data)
    np.testing.assert_allclose(z.truth, st_.transform(X))
    np.testing.assert_array_equal(z.missing, miss)
    np.testing.assert_allclose(st_.inverse_transform(z.truth), X, rtol=1e-12, atol=1e-12)
    assert z.name == "r" and "standardised" in z.description
    np.testing.assert_allclose(st_.inverse_transform_variance(np.ones((1, 4))), st_.scale_[None] ** 2)


@settings(max_examples=40, deadline=None)
@given(
    arrays(np.float64, (12, 3), elements=st.floats(-1e3, 1e3, allow_nan=False)),
    arrays(bool, (12, 3)),
)
def test_inverse_transform_round_trips(X, miss):
    miss[0] = False
    data = IncompleteData.from_array(X, miss)
    st_ = Standardizer.fit(data)
    back = st_.inverse_transform(st_.transform(data.values))
    np.testing.assert_array_equal(np.isnan(back), miss)  # NaN preserved
    np.testing.assert_allclose(back[~miss], X[~miss], rtol=1e-9, atol=1e-9)
    assert (st_.scale_ > 0).all()


def test_standardizer_shape_and_parameter_errors():
    st_ = Standardizer(np.zeros(3), np.ones(3))
    assert not st_.mean_.flags.writeable
    with pytest.raises(BadInputError, match="3 columns"):
        st_.transform(np.ones((2, 2)))
    with pytest.raises(BadInputError, match="positive scales"):
        Standardizer(np.zeros(2), np.array([1.0, 0.0]))
    with pytest.raises(BadInputError, match="expects IncompleteData"):
        standardize(np.ones((2, 2)))
