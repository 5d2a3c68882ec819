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
        # the Student-t predictive: with the default posterior draws (issue 21) the pooled mixture of an over-fitted
        # K = 6 scores 1.396 against K = 3's 1.430, more than min_gain apart (measured), so held-out NLL alone would
        # pick 6 there; the rule is tested on the deterministic predictive
        sel = select_n_components(GaussianMixtureImputer(random_state=0, predictive="student_t"), Xn,
                                  grid=[1, 2, 3, 4, 6], criterion=criterion, patience=None)
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


# ------------------------------------------------------------------ "auto" is the default (issue 21)
def test_auto_is_the_default_of_both_mixture_imputers():
    assert GaussianMixtureImputer().n_components == "auto" and MFAImputer().n_components == "auto"
    _, Xn = _clusters()
    imp = GaussianMixtureImputer(random_state=0).fit(Xn)
    assert imp.n_components_ == 3 and imp.selection_.criterion == "dpgmm"  # the three clusters, by default


def _one_cloud_and_two_small_groups(seed=0):
    """228 x 11: a correlated cloud of 214 rows and two far groups of 7 rows (fewer rows than features)."""
    rng = np.random.default_rng(seed)
    D = 11
    A = rng.normal(size=(D, D)) / np.sqrt(D) + np.eye(D)
    X = np.vstack([rng.normal(size=(214, D)) @ A, rng.normal(size=(7, D)) * 0.5 + 6, rng.normal(size=(7, D)) * 0.5 - 6])
    X[rng.random(X.shape) < 0.1] = np.nan
    return X


def test_auto_does_not_choose_components_it_then_warns_about():
    """The variational mixture sees 3 effective components, two of 7 rows in 11-D; EM at K = 3 warns about them,
    so "auto" counts only components with at least D expected rows."""
    from explorer.core.mixtures.em_gmm import ComponentCollapseWarning

    X = _one_cloud_and_two_small_groups()
    with pytest.warns(ComponentCollapseWarning, match="fewer rows than features"):
        GaussianMixtureImputer(n_components=3, random_state=0).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ComponentCollapseWarning)
        imp = GaussianMixtureImputer(random_state=0).fit(X)
    row = imp.selection_.table[0]
    assert row["score"] == 3 and row["supported"] == 1 and imp.n_components_ == 1


def test_auto_refits_with_fewer_components_when_the_fit_still_collapses(monkeypatch):
    """Should the chosen K still leave a component below D expected rows, fit_auto refits with fewer."""
    from explorer import model_selection
    from explorer.core.mixtures.em_gmm import ComponentCollapseWarning

    X = _one_cloud_and_two_small_groups()
    chosen = model_selection.KSelection(n_components=3, criterion="dpgmm", table=({"n_components": 3},), rate=0.0,
                                        n_repeats=0)
    monkeypatch.setattr(model_selection, "select_n_components", lambda *a, **k: chosen)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ComponentCollapseWarning)
        imp = GaussianMixtureImputer(random_state=0).fit(X)
    assert imp.n_components_ == 1 and imp.selection_.n_components == 1
    assert imp.selection_.table[-1]["collapsed_at"] == (3,)
    assert imp.get_params()["n_components"] == "auto"


def test_auto_draws_the_posterior_once_at_the_final_k(monkeypatch):
    """A refit after a collapse does not throw a chain away: the data-augmentation chain runs once, at the final K,
    and gives exactly the draws of a fit with that K and the same seed."""
    from explorer import model_selection
    from explorer.core.mixtures import data_augmentation

    X = _one_cloud_and_two_small_groups()
    chosen = model_selection.KSelection(n_components=3, criterion="dpgmm", table=({"n_components": 3},), rate=0.0,
                                        n_repeats=0)
    monkeypatch.setattr(model_selection, "select_n_components", lambda *a, **k: chosen)
    runs = []
    real_run = data_augmentation.run
    monkeypatch.setattr(data_augmentation, "run", lambda *a, **k: runs.append(a[0].means.shape[0]) or real_run(*a, **k))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        auto = GaussianMixtureImputer(random_state=0).fit(X)
        fixed = GaussianMixtureImputer(n_components=1, random_state=0).fit(X)
    assert auto.selection_.table[-1]["collapsed_at"] == (3,) and runs == [1, 1]  # auto's one chain, then fixed's
    np.testing.assert_array_equal(auto.posterior_means_, fixed.posterior_means_)
    np.testing.assert_array_equal(auto.posterior_covariances_, fixed.posterior_covariances_)
    assert not hasattr(auto, "_deferred_posterior") and not hasattr(auto, "_defer_posterior")


def test_an_interrupted_auto_fit_is_kept_not_refitted():
    from explorer import FitInterruptedWarning

    X = _one_cloud_and_two_small_groups()
    calls = []

    def stop(state):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt

    with pytest.warns(FitInterruptedWarning):
        imp = GaussianMixtureImputer(random_state=0, callback=stop).fit(X)
    assert imp.stop_reason_ == "interrupted" and len(calls) == 2


def test_auto_checks_parameters_and_data_before_any_fit(monkeypatch):
    """Cheap checks first: a bad parameter or a text column is refused before the selection's fits."""
    from explorer import model_selection

    monkeypatch.setattr(model_selection, "select_n_components", lambda *a, **k: pytest.fail("selection ran"))
    with pytest.raises(BadInputError, match="variant"):
        GaussianMixtureImputer(variant="nonsense").fit(_clusters()[1])
    with pytest.raises(BadInputError, match="non-numeric"):
        GaussianMixtureImputer().fit(np.array([["a", "1.0"], ["b", "2.0"], ["c", "3.0"]], dtype=object))
