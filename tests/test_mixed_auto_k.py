"""MixedMixtureImputer(n_components="auto"): BIC over K with the guard of fit_auto (issue 21).

Oracles: data simulated from a location model with three well-separated components (fitted from k-means starts,
not from the truth) give K = 3; one-component data give K = 1; a fit with a component of fewer expected rows than
columns is never chosen, even when its BIC is the lowest.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

from explorer.core.mixtures import location_model as lm
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
    D = df.shape[1]
    chosen = frame[frame.n_components == imp.n_components_].iloc[0]
    assert not chosen.refused
    assert np.min(imp._state.nk) >= D or imp.n_components_ == 1
    assert (frame.refused == ((frame.n_components > 1) & (frame.min_rows < D))).all()
    allowed = frame[~frame.refused]
    assert chosen.bic == allowed.bic.min()  # the lowest BIC the guard allows


@pytest.mark.parametrize("seed", [0, 1])
def test_three_separated_components_give_three(seed):
    df = _location_data(3, seed=seed)
    imp = MixedMixtureImputer(n_components="auto", random_state=seed).fit(df)
    assert imp.n_components_ == 3 and imp.weights_.shape == (3,)
    _check_guard(imp, df)
    frame = imp.selection_
    assert list(frame.n_components[:4]) == [1, 2, 3, 4] and imp.selection_.attrs["criterion"] == "bic"


@pytest.mark.parametrize("seed", [0, 1])
def test_one_component_gives_one(seed):
    df = _location_data(1, seed=seed)
    imp = MixedMixtureImputer(n_components="auto", random_state=seed).fit(df)
    assert imp.n_components_ == 1
    _check_guard(imp, df)


def test_the_guard_refuses_a_component_of_a_few_rows():
    rng = np.random.default_rng(0)
    n = 200
    x = rng.normal(size=(n, 3))
    x[:3] += 40  # three far rows: BIC wants a component of their own, which holds fewer rows than the 4 columns
    df = pd.DataFrame({"a": x[:, 0], "b": x[:, 1], "c": x[:, 2], "k": rng.choice(["p", "q"], n)})
    df = df.mask(rng.random(df.shape) < 0.1)
    imp = MixedMixtureImputer(n_components="auto", random_state=0).fit(df)
    frame = imp.selection_
    assert frame.bic.idxmin() != frame.index[frame.n_components == imp.n_components_][0]  # BIC alone: K = 2
    assert frame.set_index("n_components").loc[2, "refused"]
    assert imp.n_components_ == 1
    _check_guard(imp, df)


def test_bic_is_what_the_table_says_and_auto_survives_clone():
    df = _location_data(3, n=150, seed=2)
    imp = MixedMixtureImputer(n_components="auto", random_state=0).fit(df)
    data = imp._prepare(*imp._split(df, fitting=False))
    state = imp._state
    p = lm.n_parameters(state)
    # 3 components: 2 weights + 3 x (2 means + 3 covariance entries + 2 + 1 level probabilities)
    K = imp.n_components_
    assert p == (K - 1) + K * (2 + 3 + 2 + 1)  # weights; per component 2 means, 3 covariance entries, 2 + 1 levels
    row = imp.selection_.set_index("n_components").loc[imp.n_components_]
    ll = float(lm.log_likelihood_rows(state, data).sum())
    np.testing.assert_allclose(row.bic, -2 * ll + p * np.log(data.n_fit), rtol=1e-8)
    again = clone(imp)
    assert again.n_components == "auto" and not hasattr(again, "selection_")
    refit = MixedMixtureImputer(n_components=2, random_state=0).fit(df)
    assert not hasattr(refit, "selection_")
    out = imp.transform(df)
    assert not out.isna().any().any()
