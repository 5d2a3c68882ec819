"""n_components="auto" and explorer.model_selection.select_n_components.

Oracle: the default rule is the variational mixture's effective components; BIC equals scikit-learn's GaussianMixture.bic on complete data (K = 1, maximum likelihood);
the held-out score equals the mean negative entry log-density recomputed by hand on the same masks;
three well-separated clusters give K = 3 by both rules. Property: the auto imputer is a normal fitted
imputer (observed entries unchanged, no NaN, clone keeps "auto", reproducible). Bad input: clear errors.
"""

import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.mixture import GaussianMixture

from explorer.core.validation import BadInputError
from explorer.evaluation import entry_logpdf, hide_observed
from explorer.impute.dp_mixture import DPGMMImputer
from explorer.impute.factor import MFAImputer
from explorer.impute.gaussian_mixture import GaussianMixtureImputer
from explorer.model_selection import default_grid, select_n_components


def _clusters(n=450, seed=0, rate=0.1):
    rng = np.random.default_rng(seed)
    centres = np.array([[0.0, 0.0, 0.0], [6.0, 0.0, 1.0], [0.0, 6.0, -1.0]])
    X = centres[rng.integers(0, 3, n)] + rng.normal(scale=0.7, size=(n, 3))
    miss = rng.random(X.shape) < rate
    miss[miss.all(axis=1), 0] = False
    return X, np.where(miss, np.nan, X)


def test_oracle_bic_matches_scikit_learn_on_complete_data():
    X, _ = _clusters()
    sel = select_n_components(GaussianMixtureImputer(prior=None, random_state=0), X, grid=[1], criterion="bic")
    expected = GaussianMixture(1, reg_covar=1e-6).fit(X).bic(X)
    assert sel.table[0]["score"] == pytest.approx(expected, rel=1e-8)


def test_oracle_heldout_score_is_the_mean_entry_nll_on_the_same_masks():
    _, Xn = _clusters(seed=1)
    est = GaussianMixtureImputer(random_state=0)
    sel = select_n_components(est, Xn, grid=[2], criterion="heldout", rate=0.1, n_repeats=2, random_state=7)
    rng = np.random.default_rng(7)
    per = []
    for _ in range(2):
        Xh, hidden, _ = hide_observed(Xn, "mcar", 0.1, random_state=rng)
        cond = clone(est).set_params(n_components=2).fit(Xh).conditional(Xh)
        per.append(-np.mean(entry_logpdf(cond, Xn, hidden)))
    assert sel.table[0]["per_repeat"] == pytest.approx(tuple(per), rel=1e-12)
    assert sel.table[0]["score"] == pytest.approx(np.mean(per), rel=1e-12)


@pytest.mark.parametrize("criterion", ["dpgmm", "heldout", "bic"])
def test_three_separated_clusters_give_three_components(criterion):
    _, Xn = _clusters(seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sel = select_n_components(GaussianMixtureImputer(random_state=0), Xn, grid=[1, 2, 3, 4, 6],
                                  criterion=criterion, patience=None)
    scores = {r["n_components"]: r["score"] for r in sel.table}
    assert sel.n_components == 3, scores
    if criterion == "dpgmm":
        return
    assert scores[3] < scores[2] < scores[1]
    # the parsimony rule (held-out): nothing smaller than K = 3 is within min_gain of the best score
    assert criterion == "bic" or min(scores.values()) + sel.min_gain >= scores[3] and scores[2] > min(scores.values()) + sel.min_gain


def test_property_auto_imputer_is_an_ordinary_fitted_imputer():
    _, Xn = _clusters(seed=3)
    imp = GaussianMixtureImputer("auto", random_state=0).fit(Xn)
    assert imp.n_components == "auto" and imp.n_components_ == imp.weights_.shape[0] == imp.selection_.n_components
    assert 1 <= imp.n_components_ <= max(default_grid(*Xn.shape)) and imp.selection_.criterion == "dpgmm"
    dp = DPGMMImputer(random_state=0).fit(Xn)  # the rule: the variational mixture's effective components
    assert imp.n_components_ == min(dp.n_effective_, max(default_grid(*Xn.shape)))
    out = imp.transform(Xn)
    obs = ~np.isnan(Xn)
    assert np.isfinite(out).all() and out[obs].tobytes() == Xn[obs].tobytes()
    assert np.isclose(imp.weights_.sum(), 1.0)
    again = clone(imp).fit(Xn)
    assert again.get_params()["n_components"] == "auto"
    np.testing.assert_array_equal(again.means_, imp.means_)  # reproducible with an int random_state
    assert imp.selection_.to_frame().shape[0] == len(imp.selection_.table)
    fixed = GaussianMixtureImputer(2, random_state=0).fit(Xn)
    assert fixed.n_components_ == 2 and fixed.selection_ is None


def test_mfa_auto():
    _, Xn = _clusters(seed=4, n=120)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        imp = MFAImputer("auto", n_factors=1, max_iter=60, random_state=0).fit(Xn)
    assert imp.n_components_ == imp.selection_.n_components >= 2
    assert np.isfinite(imp.transform(Xn)).all()


def test_default_grid_respects_rows_per_feature():
    assert default_grid(150, 4) == (1, 2, 3, 4, 5, 6, 8)
    assert default_grid(40, 13) == (1, 2, 3)
    assert default_grid(5, 10) == (1,)


@pytest.mark.parametrize("kwargs, words", [
    (dict(grid=[3, 2], criterion="heldout"), "increasing"), (dict(grid=[0, 1], criterion="heldout"), "increasing"), (dict(criterion="aic"), "criterion"),
    (dict(rate=1.5, criterion="heldout"), "rate"), (dict(n_repeats=0, criterion="heldout"), "n_repeats"),
])
def test_bad_arguments_are_refused(kwargs, words):
    _, Xn = _clusters()
    with pytest.raises(BadInputError, match=words):
        select_n_components(GaussianMixtureImputer(), Xn, **kwargs)


def test_auto_is_refused_where_it_does_not_apply():
    _, Xn = _clusters()
    with pytest.raises(BadInputError, match="n_components"):
        DPGMMImputer(n_components="auto").fit(Xn)
    with pytest.raises(BadInputError, match="n_components"):
        GaussianMixtureImputer(n_components="three").fit(Xn)


def test_auto_on_fewer_rows_than_the_default_truncation():
    X, _ = _clusters(n=10, seed=5)
    X[2, 1] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        imp = GaussianMixtureImputer("auto", random_state=0).fit(X)
    assert imp.n_components_ == 1  # at most n_rows / n_features = 3, and 10 rows support no more
    assert np.isfinite(imp.transform(X)).all()
