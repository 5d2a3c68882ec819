"""Mechanisms on incomplete data: only observed entries are hidden, rates are relative to them.

Properties (hypothesis): for every registered mechanism the mask is a subset of the observed
entries and ``realised_rate = missing.sum() / n_observed``. Statistical checks: the realised rate
is within Monte-Carlo error of the requested one. Rules: a missing MAR driver never triggers;
the NMAR "lowest values" rule removes the lowest *observed* values.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.core.missingness.mechanisms import MECHANISMS, apply_mechanism

IMG = (4, 6)


def _incomplete(seed, n=60, d=6, frac=0.2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[rng.random(X.shape) < frac] = np.nan
    return X


def _call(X, name, rate, rng):
    mech = MECHANISMS[name]
    params = {"image_shape": IMG} if mech.image else {}
    if name == "square":
        params["size"] = 3
    if name in ("mar_threshold", "mar_logistic"):
        params.update(target=list(range(4, X.shape[1])), control=0)
    return apply_mechanism(X, name, rate if mech.has_rate else None, rng=rng, **params)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), frac=st.floats(0.0, 0.6), rate=st.floats(0.0, 0.3),
       name=st.sampled_from(sorted(MECHANISMS)))
def test_only_observed_entries_are_hidden(seed, frac, rate, name):
    X = _incomplete(seed, n=40, d=IMG[0] * IMG[1], frac=frac)
    X0 = X.copy()
    res = _call(X, name, rate, np.random.default_rng(seed))
    observed = ~np.isnan(X)
    np.testing.assert_array_equal(X, X0)  # the input is never modified
    assert res.missing.shape == X.shape and res.missing.dtype == bool
    assert not (res.missing & ~observed).any()  # hidden entries are a subset of the observed ones
    assert res.n_observed == observed.sum()
    assert res.realised_rate == pytest.approx(res.missing.sum() / max(observed.sum(), 1))


@pytest.mark.parametrize(("name", "rate", "tol"), [
    ("mcar", 0.3, 0.01), ("mcar_rows", 0.3, 0.02), ("self_masking", 0.25, 0.01),
    ("nmar_lowest", 0.25, 0.01), ("nmar_random", 0.25, 0.01), ("mar_rows", 0.2, 0.03),
])
def test_realised_rate_is_relative_to_the_observed_entries(name, rate, tol):
    X = _incomplete(1, n=4000, d=10, frac=0.3)
    rates = [apply_mechanism(X, name, rate, rng=np.random.default_rng(s)).realised_rate for s in range(5)]
    assert abs(np.mean(rates) - rate) < tol
    # the overall missing fraction is NOT the asked rate: 0.3 + 0.7 * rate
    res = apply_mechanism(X, name, rate, rng=np.random.default_rng(0))
    total = (np.isnan(X) | res.missing).mean()
    assert total == pytest.approx(np.isnan(X).mean() + (1 - np.isnan(X).mean()) * res.realised_rate)


@pytest.mark.parametrize("name", ["mar_threshold", "mar_logistic"])
def test_a_missing_driver_never_triggers_and_the_rate_holds(name):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(6000, 4))
    X[rng.random(6000) < 0.4, 0] = np.nan  # the control column has real gaps
    X[rng.random(6000) < 0.2, 3] = np.nan  # so has the target
    rate = 0.1
    res = apply_mechanism(X, name, rate, rng=np.random.default_rng(0), target=3, control=0)
    no_control = np.isnan(X[:, 0])
    assert not res.missing[no_control].any()
    assert not res.missing[:, :3].any()
    assert res.realised_rate == pytest.approx(rate, abs=0.01)
    hidden_ctrl = X[res.missing[:, 3], 0]
    assert np.all(np.isfinite(hidden_ctrl)) and hidden_ctrl.mean() > np.nanmean(X[:, 0]) + 0.25  # high controls


def test_mar_threshold_feasible_range_counts_observed_entries():
    X = np.random.default_rng(0).normal(size=(100, 4))
    X[:50, 3] = np.nan  # target has 50 of 350 observed entries
    with pytest.raises(ValueError, match=r"feasible range \[0, 0.1429\].*observed entries"):
        apply_mechanism(X, "mar_threshold", 0.2, rng=np.random.default_rng(0), target=3, control=0)


def test_mar_rows_rows_without_a_score_are_never_marked():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(3000, 5))
    X[:1000, :] = np.where(rng.random((1000, 5)) < 0.5, np.nan, X[:1000, :])
    for variant in ("thesis", "code"):
        res = apply_mechanism(X, "mar_rows", 0.03, rng=np.random.default_rng(1), variant=variant, n_controlling=4)
        # 4 controlling columns of 5: a row with 2+ gaps always misses a controlling value
        unscored = np.isnan(X).sum(axis=1) >= 2
        assert not res.missing[unscored].any()
        assert res.missing[~unscored].any()


def test_nmar_lowest_hides_the_lowest_observed_values():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(500, 4))
    X[rng.random(X.shape) < 0.3] = np.nan
    res = apply_mechanism(X, "nmar_lowest", 0.25, rng=np.random.default_rng(0))
    n_obs = (~np.isnan(X)).sum(axis=0)
    for j in np.flatnonzero(res.missing.any(axis=0)):
        removed, kept = X[res.missing[:, j], j], X[~res.missing[:, j] & ~np.isnan(X[:, j]), j]
        assert removed.size == round(n_obs[j] * 0.5)
        assert removed.max() <= kept.min()


def test_value_level_mechanisms_and_empty_columns_do_not_crash():
    X = _incomplete(4, n=200, d=5, frac=0.3)
    X[:, 2] = np.nan  # a column with no observed value
    for name in ("self_masking", "cpt_v", "linear_value_effect", "nmar_lowest", "nmar_random", "patterns"):
        res = _call(X, name, 0.2, np.random.default_rng(0))
        assert not res.missing[:, 2].any() and not (res.missing & np.isnan(X)).any()
        assert res.missing.any()
    lv = apply_mechanism(np.where(np.isnan(X), np.nan, np.clip(np.round(X + 3), 1, 5)), "cpt_v",
                         rng=np.random.default_rng(0), levels="given")
    assert not (lv.missing & np.isnan(X)).any()


def test_complete_data_give_the_complete_data_masks():
    """No NaN: the same mask as the rule on complete data, and realised_rate = missing.mean()."""
    X = np.random.default_rng(0).normal(size=(300, 5))
    for name in ("mcar", "mar_logistic", "self_masking", "nmar_lowest"):
        res = apply_mechanism(X, name, 0.1, rng=np.random.default_rng(7))
        fn = MECHANISMS[name].func
        np.testing.assert_array_equal(res.missing, fn(X, 0.1, rng=np.random.default_rng(7)))
        assert res.realised_rate == res.missing.mean() and res.n_observed == X.size
