"""The practitioners' baselines of :mod:`explorer.baselines`: PMM chained equations and mean / mode imputation.

Oracles: the regression step against ``numpy.linalg.lstsq`` and its posterior draws against their known moments;
the matching step against a brute-force nearest-donor search; PMM on an exact linear relation (every imputation one
of the donors nearest the truth); MeanModeImputer against pandas' ``mean`` / ``mode`` / ``value_counts``.
Properties: observed entries bit for bit, reproducibility, independent chains, shapes, input kinds, scikit-learn's
estimator checks, a pipeline, and ``evaluate``'s coverage from draws.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LinearRegression
from sklearn.pipeline import make_pipeline
from sklearn.utils.estimator_checks import check_estimator

from explorer.baselines import MeanModeImputer, PMMImputer, norm_draw, pmm_match
from explorer.core.validation import BadInputError, NonNumericError
from explorer.evaluation import draws_interval, evaluate, held_out_scorer, summarize


def _gaussian(n=200, rate=0.2, seed=0):
    rng = np.random.default_rng(seed)
    cov = np.array([[1.0, 0.8, 0.5, 0.3], [0.8, 1.0, 0.6, 0.4], [0.5, 0.6, 1.0, 0.5], [0.3, 0.4, 0.5, 1.0]])
    X = rng.multivariate_normal(np.zeros(4), cov, size=n)
    Xm = X.copy()
    Xm[rng.random(X.shape) < rate] = np.nan
    return X, Xm


# --------------------------------------------------------------------------- the regression step
def test_norm_draw_estimate_is_least_squares_and_the_ridge_a_small_shrinkage():
    rng = np.random.default_rng(1)
    Z = np.column_stack([np.ones(80), rng.normal(size=(80, 3))])
    y = Z @ np.array([1.0, -2.0, 0.5, 3.0]) + rng.normal(size=80)
    coef, rss, *_ = np.linalg.lstsq(Z, y, rcond=None)
    exact = norm_draw(Z, y, np.random.default_rng(0), ridge=0.0)
    np.testing.assert_allclose(exact.coef, coef, rtol=1e-10, atol=1e-12)
    assert exact.df == 80 - 4
    assert exact.sigma_hat == pytest.approx(np.sqrt(rss[0] / 76), rel=1e-10)
    ridged = norm_draw(Z, y, np.random.default_rng(0))  # mice's 1e-5 relative to diag(Z'Z)
    np.testing.assert_allclose(ridged.coef, coef, rtol=1e-3, atol=1e-4)
    assert not np.array_equal(ridged.coef, coef)


def test_norm_draw_posterior_draws_have_the_normal_model_moments():
    """RSS / sigma*^2 ~ chi2(df); (beta* - beta_hat) / sigma* ~ N(0, (Z'Z)^-1) (ridge 0)."""
    rng = np.random.default_rng(2)
    Z = np.column_stack([np.ones(30), rng.normal(size=(30, 2))])
    y = Z @ np.array([0.5, 1.0, -1.0]) + 0.7 * rng.normal(size=30)
    draws = [norm_draw(Z, y, rng, ridge=0.0) for _ in range(4000)]
    rss = draws[0].sigma_hat ** 2 * draws[0].df
    g = np.array([rss / d.sigma ** 2 for d in draws])
    assert g.mean() == pytest.approx(27, rel=0.03) and g.var() == pytest.approx(2 * 27, rel=0.1)
    u = np.array([(d.beta - d.coef) / d.sigma for d in draws])
    V = np.linalg.solve(Z.T @ Z, np.eye(3))
    assert np.all(np.abs(u.mean(axis=0)) < 4 * np.sqrt(np.diag(V) / len(draws)))
    np.testing.assert_allclose(np.cov(u.T), V, rtol=0.1, atol=0.1 * np.abs(V).max())


def test_norm_draw_singular_predictors_fall_back_on_the_ridge():
    rng = np.random.default_rng(3)
    x = rng.normal(size=40)
    Z = np.column_stack([np.ones(40), x, x, np.zeros(40)])  # duplicated and all-zero predictors
    d = norm_draw(Z, 2 * x, rng, ridge=0.0)
    assert np.all(np.isfinite(d.coef)) and np.all(np.isfinite(d.beta))
    np.testing.assert_allclose(Z @ d.coef, 2 * x, atol=1e-3)


# --------------------------------------------------------------------------- the matching step
def test_pmm_match_draws_among_the_k_nearest_donors_uniformly():
    rng = np.random.default_rng(4)
    obs, mis = rng.normal(size=50), rng.normal(size=30) * 1.5
    dist = np.abs(obs[None, :] - mis[:, None])
    kth = np.sort(dist, axis=1)[:, 4]
    counts = np.zeros((30, 50))
    for _ in range(400):
        idx = pmm_match(obs, mis, 5, rng)
        assert np.all(dist[np.arange(30), idx] <= kth + 1e-15)
        counts[np.arange(30), idx] += 1
    assert np.all((counts > 0).sum(axis=1) == 5)  # all five used, each about 1/5 of the time
    assert np.all(np.abs(counts[counts > 0] / 400 - 0.2) < 0.1)
    np.testing.assert_array_equal(pmm_match(obs, mis, 1, rng), dist.argmin(axis=1))
    # fewer donors than asked: all of them, as mice's matchindex
    assert set(pmm_match(obs[:3], np.zeros(200), 5, rng)) == {0, 1, 2}


def test_pmm_match_ties_are_broken_at_random():
    rng = np.random.default_rng(5)
    picks = np.concatenate([pmm_match(np.zeros(10), np.zeros(50), 1, rng) for _ in range(20)])
    assert len(set(picks)) == 10  # equal predictions: every donor gets drawn


# --------------------------------------------------------------------------- PMMImputer: oracles
def test_every_imputation_is_an_observed_value_of_its_column():
    _, Xm = _gaussian()
    imp = PMMImputer(random_state=0).fit(Xm)
    miss = np.isnan(Xm)
    for out in (imp.transform(Xm), *imp.sample(Xm, n_imputations=3, random_state=1)):
        for j in range(4):
            assert np.isin(out[miss[:, j], j], Xm[~miss[:, j], j]).all()


def test_exact_linear_relation_imputes_from_the_donors_nearest_the_truth():
    rng = np.random.default_rng(6)
    x = rng.uniform(0, 10, 300)
    X = np.column_stack([x, 2 * x + 1])
    Xm = X.copy()
    miss = rng.random(300) < 0.3
    Xm[miss, 1] = np.nan
    observed = Xm[~miss, 1]
    dist = np.abs(observed[None, :] - X[miss, 1][:, None])
    for donors in (1, 5):
        out = PMMImputer(donors=donors, random_state=0).fit_transform(Xm)
        err = np.abs(out[miss, 1] - X[miss, 1])
        kth = np.sort(dist, axis=1)[:, donors - 1]
        assert np.all(err <= kth + 1e-3)
        assert err.mean() < 0.2  # a random donor would be off by about 6.7
    assert np.array_equal(out[~miss], X[~miss])


# --------------------------------------------------------------------------- PMMImputer: properties
def test_observed_entries_bit_for_bit_no_nan_and_reproducible():
    _, Xm = _gaussian(seed=1)
    miss = np.isnan(Xm)
    a = PMMImputer(random_state=3).fit(Xm)
    out = a.transform(Xm)
    assert np.array_equal(out[~miss], Xm[~miss]) and np.isfinite(out).all()
    np.testing.assert_array_equal(out, a.completed_)
    np.testing.assert_array_equal(PMMImputer(random_state=3).fit_transform(Xm), out)
    np.testing.assert_array_equal(clone(a).fit(Xm).transform(Xm), out)
    assert not np.array_equal(PMMImputer(random_state=4).fit_transform(Xm), out)
    s1 = a.sample(Xm, n_imputations=4, random_state=7)
    np.testing.assert_array_equal(s1, a.sample(Xm, n_imputations=4, random_state=7))
    assert s1.shape == (4, *Xm.shape) and np.isfinite(s1).all()
    assert all(np.array_equal(d[~miss], Xm[~miss]) for d in s1)
    assert all(not np.array_equal(s1[0][miss], d[miss]) for d in s1[1:])  # independent chains differ
    gen = np.random.default_rng(0)
    assert not np.array_equal(a.sample(Xm, 2, gen), a.sample(Xm, 2, gen))  # a Generator is consumed
    assert a.chain_mean_.shape == (5, 4) and np.isfinite(a.chain_mean_).all() and a.n_iter_ == 5


def test_new_rows_use_the_training_rows_as_regression_data_and_donors():
    X, Xm = _gaussian(n=260, seed=2)
    train, new = Xm[:200], Xm[200:].copy()
    new[np.isnan(new).all(axis=1), 0] = 0.0
    new[~np.isnan(new)] += 1e-7  # new observed values never appear among the training values
    imp = PMMImputer(random_state=0).fit(train)
    out = imp.transform(new)
    np.testing.assert_array_equal(out, imp.transform(new))  # a function of its input once fitted
    miss = np.isnan(new)
    assert np.array_equal(out[~miss], new[~miss])
    for j in range(4):
        assert np.isin(out[miss[:, j], j], train[~np.isnan(train[:, j]), j]).all()
    draws = imp.sample(new, n_imputations=3, random_state=0)
    assert draws.shape == (3, 60, 4) and all(np.array_equal(d[~miss], new[~miss]) for d in draws)
    # a column complete in training but missing in a new row is imputed too; a complete X comes back as is
    one = np.array([[0.5, np.nan, np.nan, np.nan]])
    assert np.isfinite(imp.transform(one)).all()
    np.testing.assert_array_equal(imp.transform(X[:5]), X[:5])


def test_fewer_observed_values_than_donors_match_among_all_of_them():
    rng = np.random.default_rng(8)
    X = rng.normal(size=(40, 2))
    X[3:, 1] = np.nan  # three observed values in column 1
    imp = PMMImputer(donors=5, random_state=0).fit(X)
    np.testing.assert_array_equal(imp.n_donors_, [5, 3])
    draws = imp.sample(X, n_imputations=10, random_state=0)
    assert set(np.unique(draws[:, 3:, 1])) == set(X[:3, 1])


def test_dataframe_and_empty_rows():
    _, Xm = _gaussian(n=80, seed=3)
    Xm[5] = np.nan
    df = pd.DataFrame(Xm, columns=list("abcd"), index=pd.RangeIndex(100, 180, name="id"))
    imp = PMMImputer(random_state=0).fit(df)
    out = imp.transform(df)
    assert isinstance(out, pd.DataFrame) and out.index.equals(df.index) and list(out.columns) == list("abcd")
    assert out.notna().all().all() and list(imp.feature_names_in_) == list("abcd")
    draws = imp.sample(df, n_imputations=2, random_state=0)
    assert draws.index.names == ["imputation", "id"] and draws.shape == (160, 4)
    with pytest.raises(BadInputError, match="fitted on"):
        imp.transform(df.rename(columns={"a": "z"}))


def test_pipeline():
    X, Xm = _gaussian(n=150, seed=4)
    y = X @ np.array([1.0, -1.0, 0.5, 2.0])
    for imputer in (PMMImputer(random_state=0), MeanModeImputer()):
        model = make_pipeline(imputer, LinearRegression()).fit(Xm[:100], y[:100])
        pred = model.predict(Xm[100:])
        assert pred.shape == (50,) and np.isfinite(pred).all()
        assert np.corrcoef(pred, y[100:])[0, 1] > 0.8


# --------------------------------------------------------------------------- bad input
def test_pmm_bad_input():
    _, Xm = _gaussian(n=30)
    for params, match in [({"donors": 0}, "donors"), ({"donors": 1.5}, "donors"), ({"max_iter": 0}, "max_iter"),
                          ({"ridge": -1.0}, "ridge"), ({"random_state": "a"}, "random_state")]:
        with pytest.raises(BadInputError, match=match):
            PMMImputer(**params).fit(Xm)
    with pytest.raises(BadInputError, match="2-D"):
        PMMImputer().fit(Xm[:, 0])
    with pytest.raises(BadInputError, match="empty"):
        PMMImputer().fit(np.empty((0, 3)))
    with pytest.raises(BadInputError, match="n_samples=1"):
        PMMImputer().fit(Xm[:1])
    bad = Xm.copy()
    bad[2, 1] = np.inf
    with pytest.raises(BadInputError, match="infinite"):
        PMMImputer().fit(bad)
    bad = Xm.copy()
    bad[:, 2] = np.nan
    with pytest.raises(BadInputError, match=r"column 2 has no observed value.*PMM"):
        PMMImputer().fit(bad)
    df = pd.DataFrame({"x": [1.0, np.nan, 3.0], "kind": ["a", "b", None]})
    with pytest.raises(NonNumericError, match=r"'kind'.*MeanModeImputer"):
        PMMImputer().fit(df)
    imp = PMMImputer(random_state=0).fit(Xm)
    with pytest.raises(BadInputError, match="expecting 4 features"):
        imp.transform(Xm[:, :3])
    with pytest.raises(BadInputError, match="n_imputations"):
        imp.sample(Xm, n_imputations=0)


# --------------------------------------------------------------------------- MeanModeImputer
def _mixed_frame():
    rng = np.random.default_rng(9)
    n = 60
    df = pd.DataFrame({
        "x": rng.normal(size=n),
        "n": pd.array(rng.integers(0, 10, n), dtype="Int64"),
        "cat": pd.Categorical(rng.choice(["lo", "mid", "hi"], n, p=[0.2, 0.5, 0.3]),
                              categories=["lo", "mid", "hi", "never"]),
        "txt": pd.array(rng.choice(["u", "v"], n, p=[0.3, 0.7]), dtype="string"),
        "obj": rng.choice(["p", "q", "r"], n).astype(object),
        "flag": pd.array(rng.random(n) < 0.3, dtype="boolean"),
        "k": rng.integers(0, 3, n),
    }, index=pd.Index([f"r{i}" for i in range(n)], name="row"))
    for c in ["x", "n", "cat", "txt", "obj", "flag"]:
        df.loc[df.index[rng.random(n) < 0.2], c] = None
    return df


def test_mean_mode_matches_pandas_and_keeps_dtypes():
    df = _mixed_frame()
    imp = MeanModeImputer().fit(df)
    out = imp.transform(df)
    assert out.index.equals(df.index) and list(out.columns) == list(df.columns)
    assert out.notna().all().all()
    assert imp.kinds_ == ["numeric", "numeric", "categorical", "categorical", "categorical", "categorical", "numeric"]
    for j, c in enumerate(df.columns):
        miss, s = df[c].isna(), df[c]
        expect = s.mean() if imp.kinds_[j] == "numeric" else s.mode().iloc[0]
        assert imp.statistics_[j] == expect
        assert (out.loc[miss, c] == expect).all()
        assert out.loc[~miss, c].equals(s[~miss].astype(out[c].dtype))
        if c != "n":
            assert out[c].dtype == s.dtype, c
    assert str(out["n"].dtype) == "Float64"  # nullable integers: the mean, as a nullable float
    assert list(out["cat"].cat.categories) == ["lo", "mid", "hi", "never"]
    probs = imp.category_probabilities_
    assert set(probs) == {"cat", "txt", "obj", "flag"}
    for c, p in probs.items():
        pd.testing.assert_series_equal(p, df[c].value_counts(normalize=True))
        assert p.sum() == pytest.approx(1.0)
    assert probs["cat"]["never"] == 0.0


def test_mean_mode_arrays_and_bad_input():
    _, Xm = _gaussian(n=50)
    imp = MeanModeImputer().fit(Xm)
    out = imp.transform(Xm)
    np.testing.assert_array_equal(out, np.where(np.isnan(Xm), np.nanmean(Xm, axis=0), Xm))
    assert imp.category_probabilities_ == {}
    bad = Xm.copy()
    bad[:, 1] = np.nan
    with pytest.raises(BadInputError, match="column 1 has no observed value"):
        MeanModeImputer().fit(bad)
    with pytest.raises(BadInputError, match="'s'.*no observed value"):
        MeanModeImputer().fit(pd.DataFrame({"x": [1.0, 2.0], "s": [None, None]}))
    with pytest.raises(BadInputError, match="'d'.*neither numeric nor categorical"):
        MeanModeImputer().fit(pd.DataFrame({"x": [1.0, 2.0], "d": pd.to_datetime(["2020-01-01", None])}))
    with pytest.raises(BadInputError, match="infinite"):
        MeanModeImputer().fit(pd.DataFrame({"x": [1.0, np.inf]}))
    fitted = MeanModeImputer().fit(_mixed_frame())
    with pytest.raises(BadInputError, match="categorical columns"):
        fitted.transform(np.zeros((2, 7)))
    with pytest.raises(BadInputError, match="fitted on"):
        fitted.transform(_mixed_frame().iloc[:, ::-1])
    with pytest.raises(BadInputError, match="expecting 4 features"):
        imp.transform(Xm[:, :2])


def test_mean_mode_new_batch_with_an_all_missing_text_column():
    df = _mixed_frame()
    imp = MeanModeImputer().fit(df)
    batch = df.iloc[:3].copy()
    batch["obj"] = np.nan  # float NaN now
    out = imp.transform(batch)
    assert (out["obj"] == df["obj"].mode().iloc[0]).all()


# --------------------------------------------------------------------------- scikit-learn checks
@pytest.mark.parametrize("est", [PMMImputer(max_iter=2, random_state=0), MeanModeImputer()],
                         ids=lambda e: type(e).__name__)
def test_sklearn_estimator_checks(est):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(est, on_fail=None)
    failed = {r["check_name"]: str(r["exception"])[:200] for r in results if r["status"] == "failed"}
    assert failed == {} and len(results) > 40


# --------------------------------------------------------------------------- evaluate
def test_evaluate_scores_pmm_coverage_from_draws_and_leaves_simple_imputer_nan():
    X, _ = _gaussian(n=200, seed=5)
    res = evaluate({"pmm": PMMImputer(random_state=0), "mean": SimpleImputer()}, X, rate=0.2, n_repeats=2,
                   random_state=0)
    table = summarize(res)["mean"]
    assert 0.5 < table["pmm", "coverage"] < 1.0
    assert np.isnan(table["pmm", "nll"]) and np.isnan(table["mean", "coverage"]) and np.isnan(table["mean", "nll"])
    assert np.isfinite(table["pmm", "nrmse"]) and np.isfinite(table["mean", "nrmse"])
    again = evaluate({"pmm": PMMImputer(random_state=0)}, X, rate=0.2, n_repeats=2, random_state=0)
    np.testing.assert_array_equal(again["value"], res[res["imputer"] == "pmm"]["value"])
    with pytest.raises(BadInputError, match="n_draws"):
        evaluate(PMMImputer(), X, n_draws=0)
    # the scorer: coverage from draws for PMM, nll still refused
    imp = PMMImputer(random_state=0).fit(X)
    assert -1.0 <= held_out_scorer(metric="coverage", n_draws=10)(imp, X) <= 0.0
    with pytest.raises(BadInputError, match="needs an estimator with conditional"):
        held_out_scorer(metric="nll")(imp, X)


def test_draws_interval_is_the_equal_tailed_empirical_range():
    draws = np.arange(21.0).reshape(21, 1, 1) * np.ones((1, 2, 3))
    lo, hi = draws_interval(draws, 0.9)
    assert lo.shape == hi.shape == (2, 3)
    np.testing.assert_allclose(lo, 1.0)  # quantiles 0.05 and 0.95 of 0..20
    np.testing.assert_allclose(hi, 19.0)
