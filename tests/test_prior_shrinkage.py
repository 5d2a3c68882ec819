"""The prior's shrinkage towards the diagonal: a field of NIWPrior, the rule D / (N + D), and its held-out choice
(``GaussianMixtureImputer(prior_shrinkage="auto")``, :func:`explorer.model_selection.select_shrinkage`)."""

from __future__ import annotations

import time
import warnings

import numpy as np
import pytest
from sklearn.base import clone

from explorer.core.mixtures import em_gmm
from explorer.core.mixtures.prior import (
    NIWPrior,
    complete_prior,
    default_scale,
    prior_mode_divisor,
    shrinkage_rule,
)
from explorer.core.validation import BadInputError
from explorer.impute.gaussian_mixture import GaussianMixtureImputer
from explorer.model_selection import (
    SHRINKAGE_MAX_ENTRIES,
    ShrinkageSelection,
    select_shrinkage,
    shrinkage_selected,
)


def _data(kind: str, seed: int, n: int = 60, D: int = 20, rate: float = 0.2):
    """``(X, X with NaN, missing)``: two strong factors behind 20 columns ("corr"), or independent columns."""
    rng = np.random.default_rng(seed)
    if kind == "corr":
        X = rng.normal(size=(n, 2)) @ (1.5 * rng.normal(size=(2, D))) + 0.3 * rng.normal(size=(n, D))
    else:
        X = rng.normal(size=(n, D)) * rng.uniform(0.5, 2.0, size=D)
    missing = rng.random(X.shape) < rate
    missing[missing.all(axis=1), 0] = False
    return X, np.where(missing, np.nan, X), missing


def _coverage(imp, X, X_nan, missing) -> float:
    lo, hi = imp.conditional(X_nan).interval(0.95)
    return float(np.mean((X[missing] >= lo[missing]) & (X[missing] <= hi[missing])))


# ---------------------------------------------------------------------------------------------- the core's field
def test_default_scale_shrinks_by_the_given_value_in_closed_form():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(5, 5))
    C = A @ A.T + np.eye(5)
    K, dof, D = 2, 7.0, 5
    for lam in (0.0, 0.3, 1.0):
        expected = ((1 - lam) * C + lam * np.diag(np.diag(C))) / K ** (2 / D) * prior_mode_divisor(dof, D)
        np.testing.assert_allclose(default_scale(C, K, dof, "full", "auto", 40, shrinkage=lam), expected,
                                   rtol=1e-14)
    # None: the rule D / (N + D); no n_samples and no shrinkage: none
    lam0 = shrinkage_rule(D, 40)
    assert lam0 == pytest.approx(5 / 45)
    np.testing.assert_allclose(default_scale(C, K, dof, "full", "auto", 40),
                               default_scale(C, K, dof, "full", "auto", None, shrinkage=lam0), rtol=1e-14)
    np.testing.assert_allclose(default_scale(C, K, dof, "full", "auto", None),
                               C / K ** (2 / D) * prior_mode_divisor(dof, D), rtol=1e-14)


def test_complete_prior_records_the_shrinkage_it_used():
    C = np.array([[2.0, 1.5], [1.5, 2.0]])
    moments = lambda: (np.zeros(2), C)  # noqa: E731
    rule = complete_prior("auto", 2, 1, "full", moments, n_samples=18)
    assert rule.shrinkage == pytest.approx(0.1)
    given = complete_prior(NIWPrior(shrinkage=0.5), 2, 1, "full", moments, n_samples=18)
    assert given.shrinkage == 0.5
    assert np.array(given.scale)[0, 1] == pytest.approx(0.5 * 1.5 * prior_mode_divisor(4.0, 2))
    assert complete_prior("auto", 2, 1, "diag", moments, n_samples=18).shrinkage is None  # the diagonal: no effect


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan"), True, "half"])
def test_bad_shrinkage_field_is_refused(bad):
    with pytest.raises(BadInputError, match="NIWPrior.shrinkage must be a number in"):
        NIWPrior(shrinkage=bad)


# ---------------------------------------------------------------------------------------------- the imputer
def test_a_fixed_shrinkage_is_the_core_fit_with_that_prior():
    _, X_nan, _ = _data("corr", 0)
    imp = GaussianMixtureImputer(n_components=2, prior_shrinkage=0.3, random_state=0).fit(X_nan)
    res = em_gmm.fit(em_gmm.prepare(X_nan), em_gmm.EMConfig(n_components=2, prior=NIWPrior(shrinkage=0.3)),
                     np.random.default_rng(0))
    np.testing.assert_array_equal(imp.covariances_, res.state.covariances)
    assert imp.shrinkage_ == 0.3 and imp.prior_.shrinkage == 0.3 and imp.shrinkage_selection_ is None
    rule = GaussianMixtureImputer(n_components=2, prior_shrinkage="rule", random_state=0).fit(X_nan)
    res = em_gmm.fit(em_gmm.prepare(X_nan), em_gmm.EMConfig(n_components=2, prior="auto"), np.random.default_rng(0))
    np.testing.assert_array_equal(rule.covariances_, res.state.covariances)  # the core's default is the rule
    assert rule.shrinkage_ == pytest.approx(20 / 80) and rule.shrinkage_selection_ is None


def test_the_selections_candidate_is_the_fit_with_that_shrinkage():
    """select_shrinkage gives each candidate the prior's mean and scale from one moment fit per mask: the same prior,
    and (from another start for K = 1) the same optimum, as a fit with prior_shrinkage=lambda."""
    _, X_nan, _ = _data("corr", 1)
    lam = 0.07
    direct = GaussianMixtureImputer(n_components=1, prior_shrinkage=lam, tol=1e-12, max_iter=2000,
                                    random_state=0).fit(X_nan)
    data = em_gmm.prepare(X_nan)
    mean, cov = em_gmm.data_moments(data, direct._config())
    prior = NIWPrior(mean=mean, scale=default_scale(cov, 1, 22.0, "full", "auto", data.n_fit, shrinkage=lam))
    np.testing.assert_array_equal(np.array(prior.scale), np.array(direct.prior_.scale))
    np.testing.assert_array_equal(np.array(prior.mean), np.array(direct.prior_.mean))
    given = GaussianMixtureImputer(n_components=1, prior=prior, tol=1e-12, max_iter=2000, random_state=0).fit(X_nan)
    np.testing.assert_allclose(given.means_, direct.means_, atol=1e-6)  # EM stopped at tol: to ~1e-7
    np.testing.assert_allclose(given.covariances_, direct.covariances_, atol=1e-6)


def test_held_out_choice_follows_the_correlations_and_fixes_the_over_coverage():
    """Two strong factors: the rule throws away correlations the data support (intervals cover 0.99-1.00); the
    held-out choice shrinks at most a quarter as much and covers less. Independent columns: the diagonal."""
    cov_auto, cov_rule = [], []
    for seed in range(3):
        X, X_nan, missing = _data("corr", seed)
        imp = GaussianMixtureImputer(n_components=1, random_state=seed).fit(X_nan)
        sel = imp.shrinkage_selection_
        assert isinstance(sel, ShrinkageSelection) and sel.rule == pytest.approx(0.25) and sel.n_components == 1
        assert imp.shrinkage_ == sel.shrinkage == imp.prior_.shrinkage <= sel.rule / 4
        assert sel.table[0]["multiplier"] == 1.0  # the search starts at the rule ...
        assert min(r["score"] for r in sel.table) == next(r["score"] for r in sel.table
                                                           if r["shrinkage"] == sel.shrinkage)  # ... keeps the best
        cov_auto.append(_coverage(imp, X, X_nan, missing))
        rule = GaussianMixtureImputer(n_components=1, prior_shrinkage="rule", random_state=seed).fit(X_nan)
        cov_rule.append(_coverage(rule, X, X_nan, missing))
    assert np.mean(cov_rule) >= 0.99 and np.mean(cov_auto) <= 0.985
    for seed in range(2):
        _, X_nan, _ = _data("indep", seed)
        imp = GaussianMixtureImputer(n_components=1, random_state=seed).fit(X_nan)
        assert imp.shrinkage_ >= 2 * imp.shrinkage_selection_.rule


def test_auto_components_then_shrinkage_at_the_chosen_k():
    _, X_nan, _ = _data("corr", 2)
    imp = GaussianMixtureImputer(random_state=0).fit(X_nan)
    assert imp.selection_ is not None and imp.shrinkage_selection_.n_components == imp.n_components_
    again = clone(imp).fit(X_nan)
    assert again.shrinkage_ == imp.shrinkage_  # an int random_state: the same masks, the same choice
    np.testing.assert_array_equal(again.means_, imp.means_)


def test_observed_entries_kept_and_no_nan():
    X, X_nan, missing = _data("corr", 3, n=30, D=8, rate=0.3)
    imp = GaussianMixtureImputer(n_components=1, random_state=0).fit(X_nan)
    assert imp.shrinkage_selection_ is not None
    Xi = imp.transform(X_nan)
    assert not np.isnan(Xi).any()
    np.testing.assert_array_equal(Xi[~missing], X[~missing])
    draws = imp.sample(X_nan, n_imputations=3, random_state=0)
    assert not np.isnan(draws).any() and np.array_equal(draws[:, ~missing], np.broadcast_to(X[~missing], (3,) +
                                                                                              X[~missing].shape))


def test_the_choice_runs_only_where_it_matters():
    assert shrinkage_selected(60, 20) and not shrinkage_selected(600, 20)  # rule 0.25 / 0.032
    assert not shrinkage_selected(SHRINKAGE_MAX_ENTRIES // 100 + 1, 100)  # rule 0.33 but too many entries
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 4))
    X[rng.random(X.shape) < 0.1] = np.nan
    big = GaussianMixtureImputer(n_components=1, random_state=0).fit(X)
    assert big.shrinkage_selection_ is None and big.shrinkage_ == pytest.approx(4 / 404)
    _, X_nan, _ = _data("corr", 0)
    for params in (dict(covariance_type="diag"), dict(prior=None, predictive="gaussian"),
                   dict(prior=NIWPrior(kappa=1.0))):
        imp = GaussianMixtureImputer(n_components=1, random_state=0, **params).fit(X_nan)
        assert imp.shrinkage_selection_ is None
    assert GaussianMixtureImputer(n_components=1, prior=None, random_state=0).fit(X_nan).shrinkage_ is None


@pytest.mark.parametrize("bad", [-0.1, 1.5, "cv", True, None])
def test_bad_prior_shrinkage_is_refused_before_any_fit(bad):
    too_big = np.full((200_000, 50), np.nan)  # the parameter error comes before reading (or fitting) the data
    t0 = time.perf_counter()
    with pytest.raises(BadInputError, match="prior_shrinkage must be 'auto', 'rule' or a number in"):
        GaussianMixtureImputer(n_components=1, prior_shrinkage=bad).fit(too_big)
    assert time.perf_counter() - t0 < 1.0


def test_a_fixed_shrinkage_needs_a_prior():
    _, X_nan, _ = _data("corr", 0)
    with pytest.raises(BadInputError, match="needs a prior"):
        GaussianMixtureImputer(prior=None, predictive="gaussian", prior_shrinkage=0.2).fit(X_nan)
    assert GaussianMixtureImputer(prior=None, predictive="gaussian", prior_shrinkage="rule", n_components=1,
                                  random_state=0).fit(X_nan).prior_ is None


def test_select_shrinkage_bad_arguments_and_no_entries_to_hide():
    _, X_nan, _ = _data("corr", 0)
    est = GaussianMixtureImputer(n_components=1, random_state=0)
    with pytest.raises(BadInputError, match="rate"):
        select_shrinkage(est, X_nan, rate=0.0)
    with pytest.raises(BadInputError, match="n_repeats"):
        select_shrinkage(est, X_nan, n_repeats=0)
    one = np.array([[1.0, np.nan], [np.nan, 2.0], [0.5, np.nan]])  # one observed entry per row: none can go
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(BadInputError, match="too few observed entries"):
            select_shrinkage(est, one)


def test_k_selection_candidates_keep_the_rule_and_the_final_fit_chooses(monkeypatch):
    """select_n_components' candidate fits ("heldout") do not run a held-out choice each; the final fit does, once."""
    import explorer.impute.gaussian_mixture as gm
    from explorer.model_selection import select_n_components

    calls = []
    real = gm.select_shrinkage
    monkeypatch.setattr(gm, "select_shrinkage", lambda *a, **k: calls.append(1) or real(*a, **k))
    _, X_nan, _ = _data("corr", 4)
    est = GaussianMixtureImputer(random_state=0)
    selection = select_n_components(est, X_nan, criterion="heldout", grid=(1, 2))
    assert len(selection.table) == 2 and calls == []
    GaussianMixtureImputer(n_components=selection.n_components, random_state=0).fit(X_nan)
    assert calls == [1]
    fixed = GaussianMixtureImputer(prior_shrinkage=0.2, random_state=0)
    assert fixed._selection_params == {}  # a value the user fixed is kept by the candidates
