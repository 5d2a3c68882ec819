"""MixedMixtureImputer(n_components="auto"), the default: K by held-out cells with a size guard (issue 21).

Oracles: data simulated from a location model with three well-separated components (fitted from k-means starts,
not from the truth) give K = 3 (held-out cells and BIC); one-component data give K = 1; the held-out score of a
row is the log predictive of its hidden cells given its kept ones, computed here independently (scipy's Gaussian
conditional for numbers, enumeration over components for levels); the choice is the one-standard-error rule read
off the table; a fit with a component of fewer expected rows than numeric columns is never chosen, even when its
score is the best. Properties of the masks: only observed cells are hidden, every row keeps a cell and every
column two values, the kept values are unchanged.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import multivariate_normal
from sklearn.base import clone

from explorer.core.mixtures import location_model as lm
from explorer.core.validation import BadInputError
from explorer.impute.mixed import MixedMixtureImputer


def _location_data(K, n=300, seed=0, rate=0.15):
    """K components: two correlated numbers 4 sd apart, a 3-level column and a yes/no column that depend on k."""
    rng = np.random.default_rng(seed)
    z = rng.integers(0, K, n)
    centres = 4.0 * np.array([[0, 0], [1, 0], [0, 1]])[:K]
    x = centres[z] + rng.normal(size=(n, 2)) @ np.array([[1, 0.3], [0, 0.8]])
    theta = np.array([[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8]])[:K]
    level = np.array([rng.choice(3, p=theta[k]) for k in z])
    flag = rng.random(n) < np.array([0.9, 0.2, 0.5])[z]
    df = pd.DataFrame({"a": x[:, 0], "b": x[:, 1], "c": np.array(["u", "v", "w"])[level],
                       "flag": np.where(flag, "yes", "no")})
    return df.mask(rng.random(df.shape) < rate)


def _check_guard(imp, df):
    frame = imp.selection_
    guard = max(len(imp.numeric_columns_), 1)
    chosen = frame[frame.n_components == imp.n_components_].iloc[0]
    assert not chosen.refused
    assert (frame.refused == ((frame.n_components > 1) & (frame.min_rows < guard))).all()
    allowed = frame[~frame.refused]
    best = allowed.heldout.max()  # one standard error: the smallest allowed K within its se of the best score
    assert imp.n_components_ == allowed[allowed.heldout >= best - allowed.heldout_se].n_components.min()


@pytest.mark.parametrize("seed", [0, 1])
def test_three_separated_components_give_three(seed):
    df = _location_data(3, seed=seed)
    imp = MixedMixtureImputer(random_state=seed).fit(df)  # "auto" is the default
    assert imp.n_components == "auto"
    assert imp.n_components_ == 3 and imp.weights_.shape == (3,)
    _check_guard(imp, df)
    frame = imp.selection_
    assert list(frame.n_components[:4]) == [1, 2, 3, 4] and frame.attrs["criterion"] == "heldout"
    assert frame.heldout.iloc[2] > frame.heldout.iloc[1] > frame.heldout.iloc[0]  # 3 clearly beats 1 and 2


@pytest.mark.parametrize("seed", [0, 1])
def test_bic_gives_three_as_well(seed):
    df = _location_data(3, seed=seed)
    imp = MixedMixtureImputer(n_components=1, random_state=seed)
    data = imp._prepare(*imp._split(df, fitting=True))
    config = lm.LocationConfig(n_components=1)
    result, rows = lm.select_components(data, config, np.random.default_rng(seed), criterion="bic")
    frame = pd.DataFrame(list(rows))
    assert result.state.n_components == 3
    allowed = frame[~frame.refused]
    assert allowed.bic.idxmin() == frame.index[frame.n_components == 3][0]
    assert frame.heldout.isna().all()


@pytest.mark.parametrize("seed", [0, 1])
def test_one_component_gives_one(seed):
    df = _location_data(1, seed=seed)
    imp = MixedMixtureImputer(random_state=seed).fit(df)
    assert imp.n_components_ == 1
    _check_guard(imp, df)


def test_the_guard_refuses_a_component_of_a_few_rows():
    rng = np.random.default_rng(0)
    n = 200
    x = rng.normal(size=(n, 3))
    x[:2] += 40  # two far rows: the held-out cells want a component of their own, which holds fewer rows than the
    df = pd.DataFrame({"a": x[:, 0], "b": x[:, 1], "c": x[:, 2], "k": rng.choice(["p", "q"], n)})  # 3 numbers
    df = df.mask(rng.random(df.shape) < 0.1)
    imp = MixedMixtureImputer(random_state=0).fit(df)
    frame = imp.selection_.set_index("n_components")
    assert frame.heldout.idxmax() > 1 and frame.loc[frame.heldout.idxmax(), "refused"]  # the score alone: K > 1
    assert frame.loc[2, "refused"] and frame.loc[2, "min_rows"] < 3
    assert imp.n_components_ == 1
    _check_guard(imp, df)


def _mixed_state(rng):
    """A fitted K = 2 location model on two numbers and a 3-level column, its data and one mask."""
    df = _location_data(2, n=120, seed=int(rng.integers(100)), rate=0.2)
    imp = MixedMixtureImputer(n_components=2, predictive="plugin", random_state=0).fit(df)
    data = imp._prepare(*imp._split(df, fitting=False))
    (masked, per_row), = lm.heldout_masks(data, 0.3, 1, rng)
    return imp._state, data, masked, per_row


def test_the_heldout_score_is_the_predictive_of_the_hidden_cells():
    rng = np.random.default_rng(3)
    state, data, masked, per_row = _mixed_state(rng)
    got = lm.heldout_log_predictive(state, data, masked)
    assert np.all(got[per_row == 0] == 0.0) and (per_row > 0).sum() > 30
    w, mu, cov = state.weights, state.means, state.covariances
    for n in np.flatnonzero(per_row > 0):
        def joint(num_obs, cat_obs):  # log p(numbers in num_obs, levels in cat_obs) by enumeration over k
            terms = np.log(w).copy()
            for k in range(w.size):
                if num_obs.any():
                    terms[k] += multivariate_normal(mu[k][num_obs], cov[k][np.ix_(num_obs, num_obs)]).logpdf(
                        data.X[n, num_obs])
                for j, p in enumerate(state.probs):
                    if cat_obs[j]:
                        terms[k] += np.log(p[k, data.codes[n, j]])
            return np.logaddexp.reduce(terms)
        full = joint(~data.missing[n], data.codes[n] >= 0)
        kept = joint(~masked.missing[n], masked.codes[n] >= 0)
        np.testing.assert_allclose(got[n], full - kept, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("seed", range(3))
def test_masks_hide_only_observed_cells_and_keep_every_row_and_column(seed):
    rng = np.random.default_rng(seed)
    df = _location_data(2, n=40, seed=seed, rate=0.4)
    imp = MixedMixtureImputer(n_components=1)
    data = imp._prepare(*imp._split(df, fitting=True))
    observed = np.concatenate([~data.missing, data.codes >= 0], axis=1)
    for masked, per_row in lm.heldout_masks(data, 0.5, 3, rng):
        kept = np.concatenate([~masked.missing, masked.codes >= 0], axis=1)
        assert np.all(kept <= observed)  # nothing new observed
        hidden = observed & ~kept
        assert np.array_equal(hidden.sum(axis=1), per_row)
        assert hidden.sum() > 0.2 * observed.sum()  # (rows of one cell keep it)
        assert np.all(kept.any(axis=1) | ~observed.any(axis=1)) and np.all(kept.sum(axis=0) >= 2)
        np.testing.assert_array_equal(masked.X[~masked.missing], data.X[~masked.missing])
        assert np.array_equal(masked.codes[masked.codes >= 0], data.codes[masked.codes >= 0])
        assert masked.n_levels == data.n_levels


def test_a_wrong_criterion_is_refused():
    df = _location_data(1, n=60)
    imp = MixedMixtureImputer(n_components=1)
    data = imp._prepare(*imp._split(df, fitting=True))
    with pytest.raises(BadInputError, match="criterion"):
        lm.select_components(data, lm.LocationConfig(n_components=1), np.random.default_rng(0), criterion="aic")


def test_a_table_too_small_for_two_components_is_fitted_once():
    df = _location_data(1, n=9, seed=0, rate=0.1)  # 9 rows, 4 columns: K = 1 is the only candidate
    imp = MixedMixtureImputer(random_state=0).fit(df)
    assert imp.n_components_ == 1 and len(imp.selection_) == 1 and np.isnan(imp.selection_.heldout[0])


def test_the_table_and_auto_survive_clone():
    df = _location_data(3, n=150, seed=2)
    imp = MixedMixtureImputer(random_state=0).fit(df)
    data = imp._prepare(*imp._split(df, fitting=False))
    state = imp._state
    p = lm.n_parameters(state)
    K = imp.n_components_
    assert p == (K - 1) + K * (2 + 3 + 2 + 1)  # weights; per component 2 means, 3 covariance entries, 2 + 1 levels
    row = imp.selection_.set_index("n_components").loc[K]
    np.testing.assert_allclose(row.log_likelihood, float(lm.log_likelihood_rows(state, data).sum()), rtol=1e-8)
    again = clone(imp)
    assert again.n_components == "auto" and not hasattr(again, "selection_")
    refit = MixedMixtureImputer(n_components=2, random_state=0).fit(df)
    assert not hasattr(refit, "selection_")
    out = imp.transform(df)
    assert not out.isna().any().any()


def test_auto_fits_the_chosen_k_as_a_fixed_k_fits_it():
    df = _location_data(3, n=150, seed=4)
    imp = MixedMixtureImputer(random_state=7).fit(df)
    fixed = MixedMixtureImputer(n_components=imp.n_components_, random_state=7).fit(df)
    np.testing.assert_array_equal(imp.weights_, fixed.weights_)
    np.testing.assert_array_equal(imp.covariances_, fixed.covariances_)
    np.testing.assert_array_equal(imp.posterior_means_, fixed.posterior_means_)  # the chain too
    pd.testing.assert_frame_equal(imp.transform(df), fixed.transform(df))


def test_no_further_mask_once_the_masks_hold_enough_cells():
    df = _location_data(2, n=300, seed=5)
    imp = MixedMixtureImputer(n_components=1)
    data = imp._prepare(*imp._split(df, fitting=True))
    one = lm.heldout_masks(data, 0.1, 2, np.random.default_rng(0), enough=1)
    both = lm.heldout_masks(data, 0.1, 2, np.random.default_rng(0), enough=10**6)
    assert len(one) == 1 and len(both) == 2 and len(lm.heldout_masks(data, 0.1, 2, np.random.default_rng(0))) == 2
    np.testing.assert_array_equal(one[0][1], both[0][1])  # the same first mask either way
    assert int(one[0][1].sum()) < lm.HELDOUT_ENOUGH_CELLS  # (so this table's choice uses both)
