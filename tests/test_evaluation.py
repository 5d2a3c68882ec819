"""amputate on incomplete data, the evaluation helper and the held-out scorer.

Oracles: NRMSE / MAE against a hand computation; per-entry NLL against scipy's conditional
Gaussian (dense solve) and a two-component mixture written out; coverage of the intervals of the
true Gaussian equals 95 % within Monte-Carlo error. Properties (hypothesis): amputate never alters
an observed entry, hides observed entries only, and realises the rate; a perfect imputer scores 0.
"""

from __future__ import annotations

import re
import time
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import multivariate_normal, norm
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.impute import KNNImputer, SimpleImputer
from sklearn.model_selection import GridSearchCV, KFold

from explorer.core.gaussians.conditional import ConditionalMixture
from explorer.core.validation import BadInputError
from explorer.evaluation import (
    METRICS,
    entry_logpdf,
    evaluate,
    held_out_scorer,
    hide_observed,
    imputation_scores,
    observed_scale,
    summarize,
)
from explorer.impute.gaussian_mixture import GaussianMixtureImputer
from explorer.masking import EmptyRowsWarning, amputate

COV = np.array([[1.0, 0.8, 0.3], [0.8, 1.0, 0.5], [0.3, 0.5, 2.0]])
MEAN = np.array([1.0, -2.0, 0.5])


class OracleImputer(TransformerMixin, BaseEstimator):
    """Knows the true Gaussian: conditional means and the exact conditional mixture."""

    def __init__(self, mean=None, cov=None):
        self.mean = mean
        self.cov = cov

    def fit(self, X, y=None):
        return self

    def conditional(self, X):
        return ConditionalMixture.from_gaussian_mixture(np.asarray(X, float), [1.0], self.mean[None], self.cov[None])

    def transform(self, X):
        return self.conditional(X).mean()


class PerfectImputer(TransformerMixin, BaseEstimator):
    """Returns the truth (a test double for the metrics of a perfect imputer)."""

    def __init__(self, truth=None):
        self.truth = truth

    def fit(self, X, y=None):
        return self

    def transform(self, X):
        return np.where(np.isnan(X), self.truth, X)


def _gaussian(n, seed=0, frac=0.0):
    rng = np.random.default_rng(seed)
    X = rng.multivariate_normal(MEAN, COV, size=n)
    if frac:
        X[rng.random(X.shape) < frac] = np.nan
    return X


# ----------------------------------------------------------------------------- amputate on incomplete data
@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), frac=st.floats(0.0, 0.5), rate=st.floats(0.0, 0.44),
       mechanism=st.sampled_from(["mcar", "mcar_rows", "self_masking", "nmar_lowest", "mar_rows"]))
def test_amputate_keeps_observed_values_and_hides_observed_entries_only(seed, frac, rate, mechanism):
    X = _gaussian(80, seed, frac)
    X[0] = [1.0, 2.0, 3.0]  # at least one observed entry per column
    X0 = X.copy()
    X_nan, hidden, info = amputate(X, mechanism, rate, random_state=seed, allow_empty=True, return_info=True)
    np.testing.assert_array_equal(X, X0)  # input untouched
    observed = ~np.isnan(X)
    assert not (hidden & ~observed).any()  # hidden entries are a subset of the observed ones
    np.testing.assert_array_equal(np.isnan(X_nan), hidden | ~observed)  # the total mask
    kept = observed & ~hidden
    np.testing.assert_array_equal(X_nan[kept], X[kept])  # observed values never altered, bit for bit
    assert info.realised_rate == hidden.sum() / observed.sum() and info.n_observed == observed.sum()


def test_amputate_realises_the_rate_of_the_observed_entries():
    X = _gaussian(3000, 1, frac=0.4)
    _, hidden, info = amputate(X, "mcar", 0.25, random_state=0, return_info=True, allow_empty=True)
    n_obs = (~np.isnan(X)).sum()
    se = np.sqrt(0.25 * 0.75 / n_obs)
    assert abs(info.realised_rate - 0.25) < 4 * se
    assert hidden.sum() == pytest.approx(0.25 * n_obs, rel=0.08)  # not 0.25 of the whole matrix (+50 %)


def test_amputate_keeps_a_dataframe_and_its_gaps():
    df = pd.DataFrame(_gaussian(50, 2, frac=0.2), columns=["a", "b", "c"], index=np.arange(100, 150))
    out, hidden = amputate(df, "mcar", 0.2, random_state=0, allow_empty=True)
    assert list(out.columns) == ["a", "b", "c"] and list(out.index) == list(df.index)
    assert out.isna().to_numpy()[df.isna().to_numpy()].all()
    assert not hidden[df.isna().to_numpy()].any()


def test_amputate_refuses_to_empty_columns_and_gives_the_largest_safe_rate():
    X = _gaussian(40, 3)
    with pytest.raises(BadInputError, match=r"3 column\(s\).*largest rate that leaves every column"):
        amputate(X, "mcar", rate=1.0, random_state=0)  # default: emptied columns refused
    with pytest.raises(BadInputError, match=r"3 column\(s\) .*40 row\(s\).*every row and column") as err:
        amputate(X, "mcar", rate=1.0, random_state=0, allow_empty=False)
    safe = float(re.search(r"with this random_state is ([0-9.e-]+);", str(err.value)).group(1))
    assert 0 < safe < 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, hidden = amputate(X, "mcar", rate=safe, random_state=0, allow_empty=False)  # safe: no row, no column emptied
    assert ((~hidden).sum(axis=1) > 0).all() and ((~hidden).sum(axis=0) > 0).all()
    _, everything = amputate(X, "mcar", rate=1.0, allow_empty=True)  # asked for
    assert everything.all()


def test_amputate_rows_policy():
    X = _gaussian(400, 4)[:, :2]
    with pytest.warns(EmptyRowsWarning, match=r"every observed entry of \d+ row"):
        _, hidden = amputate(X, "mcar", 0.4, random_state=0)  # default: emptied rows are accepted, with a warning
    assert (hidden.all(axis=1)).any()
    with pytest.raises(BadInputError, match=r"row\(s\).*allow_empty='rows'"):
        amputate(X, "mcar", 0.4, random_state=0, allow_empty=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        amputate(X, "mcar", 0.4, random_state=0, allow_empty=True)
    with pytest.raises(BadInputError, match="allow_empty must be"):
        amputate(X, allow_empty="columns")


def test_hide_observed_never_empties_a_row():
    X = _gaussian(500, 5, frac=0.3)[:, :2]
    X_hidden, hidden, info = hide_observed(X, "mcar", 0.3, random_state=0)
    had = (~np.isnan(X)).any(axis=1)
    assert (~np.isnan(X_hidden))[had].any(axis=1).all()
    assert info.realised_rate == hidden.sum() / (~np.isnan(X)).sum()
    assert 0.15 < info.realised_rate < 0.3  # rows that would be emptied keep their entries


# ----------------------------------------------------------------------------- metrics
def test_nrmse_and_mae_match_a_hand_computation():
    truth = np.array([[1.0, 10.0], [2.0, np.nan], [3.0, 30.0], [6.0, 40.0]])
    imputed = np.array([[1.5, 10.0], [2.0, 0.0], [3.0, 20.0], [4.0, 40.0]])
    hidden = np.array([[True, False], [False, False], [False, True], [True, False]])
    # observed std (ddof 0) of each column: col 0 of [1, 2, 3, 6], col 1 of [10, 30, 40]
    s0 = np.sqrt(np.mean((np.array([1, 2, 3, 6]) - 3.0) ** 2))
    s1 = np.sqrt(np.mean((np.array([10, 30, 40]) - 80 / 3) ** 2))
    np.testing.assert_allclose(observed_scale(truth), [s0, s1])
    z = np.array([-0.5 / s0, 10 / s1, 2 / s0])
    scores = imputation_scores(truth, imputed, hidden)
    assert scores["nrmse"] == pytest.approx(np.sqrt(np.mean(z**2)), rel=1e-12)
    assert scores["mae"] == pytest.approx((0.5 + 10 + 2) / 3, rel=1e-12)
    assert np.isnan(scores["coverage"]) and np.isnan(scores["nll"])


def test_column_mean_imputation_scores_about_one_under_mcar():
    X = _gaussian(4000, 6)
    res = evaluate(SimpleImputer(), X, rate=0.2, n_repeats=2, random_state=1)
    nrmse = res.loc[res.metric == "nrmse", "value"]
    assert np.all(np.abs(nrmse - 1.0) < 0.05)


def test_a_perfect_imputer_scores_zero_and_full_coverage():
    X = _gaussian(200, 7, frac=0.1)
    res = evaluate({"perfect": PerfectImputer(truth=X)}, X, n_repeats=2)
    v = res.set_index("metric")["value"]
    assert (v["nrmse"] == 0).all() and (v["mae"] == 0).all()
    lower = upper = X  # a zero-width interval at the truth covers every hidden entry
    hidden = hide_observed(X, random_state=0)[1]
    assert imputation_scores(X, X, hidden, interval=(lower, upper))["coverage"] == 1.0


def test_entry_logpdf_matches_the_conditional_gaussian_and_a_written_out_mixture():
    rng = np.random.default_rng(8)
    X = rng.multivariate_normal(MEAN, COV, size=30)
    hidden = rng.random(X.shape) < 0.4
    hidden[0] = [True, True, False]
    gaps = np.zeros_like(hidden)
    gaps[1, 2] = not hidden[1, 2]  # a real gap, integrated out
    Xh = np.where(hidden | gaps, np.nan, X)
    # one Gaussian: dense conditional of each hidden entry on the observed entries of its row
    lp = entry_logpdf(OracleImputer(MEAN, COV).conditional(Xh), X, hidden)
    expect = []
    for i, j in zip(*np.nonzero(hidden), strict=True):
        o = np.flatnonzero(~np.isnan(Xh[i]))
        if o.size:
            w = np.linalg.solve(COV[np.ix_(o, o)], COV[o, j])
            m, v = MEAN[j] + w @ (X[i, o] - MEAN[o]), COV[j, j] - COV[j, o] @ w
        else:
            m, v = MEAN[j], COV[j, j]
        expect.append(norm.logpdf(X[i, j], m, np.sqrt(v)))
    np.testing.assert_allclose(lp, expect, rtol=1e-10)
    # two components: h_k ∝ pi_k N(x_o), entry density sum_k h_k N(x_j | x_o, k)
    means = np.stack([MEAN, -MEAN])
    covs = np.stack([COV, np.diag([0.5, 1.5, 1.0])])
    pis = np.array([0.3, 0.7])
    cond = ConditionalMixture.from_gaussian_mixture(Xh, pis, means, covs)
    got = entry_logpdf(cond, X, hidden)
    expect = []
    for i, j in zip(*np.nonzero(hidden), strict=True):
        o = np.flatnonzero(~np.isnan(Xh[i]))
        dens, h = [], []
        for k in range(2):
            C, M = covs[k], means[k]
            if o.size:
                w = np.linalg.solve(C[np.ix_(o, o)], C[o, j])
                m, v = M[j] + w @ (X[i, o] - M[o]), C[j, j] - C[j, o] @ w
                h.append(pis[k] * multivariate_normal(M[o], C[np.ix_(o, o)]).pdf(X[i, o]))
            else:
                m, v = M[j], C[j, j]
                h.append(pis[k])
            dens.append(norm.pdf(X[i, j], m, np.sqrt(v)))
        h = np.array(h) / np.sum(h)
        expect.append(np.log(h @ np.array(dens)))
    np.testing.assert_allclose(got, expect, rtol=1e-9)


def test_intervals_of_the_true_gaussian_cover_95_percent():
    X = _gaussian(6000, 9)
    res = evaluate({"oracle": OracleImputer(MEAN, COV)}, X, rate=0.3, n_repeats=1, random_state=3)
    v = res.set_index("metric")["value"]
    n_hidden = int(res["n_hidden"].iloc[0])
    se = np.sqrt(0.95 * 0.05 / n_hidden)
    assert abs(v["coverage"] - 0.95) < 3.5 * se
    # the mean NLL of the true model is its expected conditional entropy: finite and close to the hand value
    assert np.isfinite(v["nll"]) and 0.5 < v["nll"] < 2.0


# ----------------------------------------------------------------------------- evaluate / summarize
def test_evaluate_table_for_explorer_and_sklearn_imputers():
    X = _gaussian(150, 10, frac=0.1)
    res = evaluate({"gmm": GaussianMixtureImputer(random_state=0), "mean": SimpleImputer(), "knn": KNNImputer()},
                   X, rate=0.2, n_repeats=2, random_state=0)
    assert list(res.columns) == ["imputer", "repeat", "seed", "mechanism", "rate", "realised_rate", "n_hidden",
                                 "fit_seconds", "metric", "value"]
    assert len(res) == 3 * 2 * len(METRICS)
    point = res[res.metric.isin(["nrmse", "mae"])]
    assert np.isfinite(point.value).all()
    prob = res[res.metric.isin(["coverage", "nll"])]
    assert prob[prob.imputer == "gmm"].value.notna().all()
    assert prob[prob.imputer != "gmm"].value.isna().all()  # documented: no distribution, NaN
    # the same hidden entries for every imputer of a repeat, different ones across repeats
    assert res.groupby("repeat").seed.nunique().eq(1).all() and res.seed.nunique() == 2
    # reproducible, and the seed reproduces the mask
    res2 = evaluate({"gmm": GaussianMixtureImputer(random_state=0), "mean": SimpleImputer(), "knn": KNNImputer()},
                    X, rate=0.2, n_repeats=2, random_state=0)
    pd.testing.assert_series_equal(res.value, res2.value)
    hidden = hide_observed(X, "mcar", 0.2, random_state=int(res.seed.iloc[0]))[1]
    assert hidden.sum() == res.n_hidden.iloc[0]
    summ = summarize(res)
    assert summ.loc[("mean", "nrmse"), "n"] == 2 and summ.loc[("mean", "coverage"), "n"] == 0
    vals = res[(res.imputer == "gmm") & (res.metric == "mae")].value
    assert summ.loc[("gmm", "mae"), "mean"] == pytest.approx(vals.mean())
    assert summ.loc[("gmm", "mae"), "std"] == pytest.approx(vals.std(ddof=1))
    assert summ.loc[("gmm", "nrmse"), "mean"] < summ.loc[("mean", "nrmse"), "mean"]  # correlated data


def test_evaluate_bad_input():
    X = _gaussian(30, 11, frac=0.1)
    with pytest.raises(BadInputError, match="n_repeats"):
        evaluate(SimpleImputer(), X, n_repeats=0)
    with pytest.raises(BadInputError, match="keep_empty_features"):
        Xe = X.copy()
        Xe[:, 2] = np.nan  # SimpleImputer drops the empty column
        evaluate(SimpleImputer(), Xe, n_repeats=1)
    with pytest.raises(BadInputError, match="Unknown missingness mechanism"):
        evaluate(SimpleImputer(), X, mechanism="mcr")
    with pytest.raises(BadInputError, match="summarize expects"):
        summarize(pd.DataFrame({"a": [1]}))


# ----------------------------------------------------------------------------- GridSearchCV
def test_gridsearch_tunes_n_components_by_held_out_entries():
    rng = np.random.default_rng(12)
    a = rng.multivariate_normal([0, 0, -4], [[1, 0.95, 0], [0.95, 1, 0], [0, 0, 0.3]], size=90)
    b = rng.multivariate_normal([0, 0, 4], [[1, -0.95, 0], [-0.95, 1, 0], [0, 0, 0.3]], size=90)
    X = np.vstack([a, b])
    X[rng.random(X.shape) < 0.1] = np.nan  # real gaps in the training and validation rows
    t0 = time.perf_counter()
    gs = GridSearchCV(GaussianMixtureImputer(random_state=0, max_iter=100), {"n_components": [1, 2]},
                      scoring=held_out_scorer(), cv=KFold(3, shuffle=True, random_state=0), error_score="raise")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence / small-component warnings are not the point here
        gs.fit(X)
    assert time.perf_counter() - t0 < 20
    scores = gs.cv_results_["mean_test_score"]
    assert np.all(np.isfinite(scores)) and np.all(scores < 0)  # -NRMSE
    assert gs.best_params_ == {"n_components": 2} and scores[1] > scores[0] + 0.1
    # deterministic: the same entries are hidden for every candidate
    scorer = held_out_scorer(metric="nll")
    est = gs.best_estimator_
    assert scorer(est, X[:60]) == scorer(est, X[:60])
    assert -1.0 <= held_out_scorer(metric="coverage")(est, X) <= 0.0


def test_scorer_bad_input():
    with pytest.raises(BadInputError, match="metric must be one of"):
        held_out_scorer(metric="r2")
    with pytest.raises(BadInputError, match="random_state"):
        held_out_scorer(random_state=np.random.default_rng(0))
    X = _gaussian(60, 13, frac=0.1)
    with pytest.raises(BadInputError, match="needs an estimator with conditional"):
        held_out_scorer(metric="nll")(SimpleImputer().fit(X), X)
    assert held_out_scorer()(SimpleImputer().fit(X), X) < 0


def test_entry_logpdf_of_factor_and_student_t_conditionals_matches_their_densities():
    from explorer.impute.dp_mixture import DPGMMImputer
    from explorer.impute.factor import FactorAnalysisImputer, MFAImputer

    X = _gaussian(120, 14, frac=0.15)
    Xh, hidden, _ = hide_observed(X, random_state=0)
    ri, ci = np.nonzero(hidden)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fa = FactorAnalysisImputer(n_factors=1, random_state=0).fit(Xh)
        mfa = MFAImputer(n_components=2, n_factors=1, random_state=0).fit(Xh)
        dp = DPGMMImputer(random_state=0).fit(Xh)
    for est in (fa, mfa):  # oracle: the same conditional as a dense ConditionalMixture
        cond = est.conditional(Xh)
        np.testing.assert_allclose(entry_logpdf(cond, X, hidden), entry_logpdf(cond.to_mixture(), X, hidden),
                                   rtol=1e-8)
    pred = dp.predictive(Xh)  # Student-t mixture: its own 1-D marginal density, entry by entry
    expect = [np.log(pred.marginal_pdf(i, j, [X[i, j]])[0][0]) for i, j in zip(ri, ci, strict=True)]
    np.testing.assert_allclose(entry_logpdf(pred, X, hidden), expect, rtol=1e-9)


# ----------------------------------------------------------------------------- Ctrl-C inside loops of fits
FITS: list[str] = []


class CountingGMM(GaussianMixtureImputer):
    """GaussianMixtureImputer that records every fit it starts (a wrapper to count fits across clones)."""

    def fit(self, X, y=None):
        FITS.append("fit")
        return super().fit(X, y)


def _interrupt_first_fit_at_iteration_2():
    """A callback that raises KeyboardInterrupt at iteration 2 of the first fit only (as a Ctrl-C would)."""

    def callback(info):
        if len(FITS) == 1 and info.iteration == 2:
            raise KeyboardInterrupt

    return callback


def test_evaluate_stops_the_loop_when_a_fit_was_interrupted():
    from explorer import FitInterruptedWarning

    X = _gaussian(120, 21, frac=0.05)
    FITS.clear()
    imputers = {"a": CountingGMM(n_components=2, random_state=0, callback=_interrupt_first_fit_at_iteration_2()),
                "b": CountingGMM(n_components=1, random_state=0)}
    with pytest.warns(FitInterruptedWarning, match="after 2 iteration"):
        with pytest.raises(KeyboardInterrupt):
            evaluate(imputers, X, n_repeats=3, random_state=0)
    assert FITS == ["fit"]  # no further fit: neither "b" nor the next repeats
    # without the interrupt the same loop runs every fit (the counter counts)
    FITS.clear()
    evaluate({"b": CountingGMM(n_components=1, random_state=0, max_iter=20),
              "c": CountingGMM(n_components=1, random_state=1, max_iter=20)}, X,
             n_repeats=2, random_state=0)
    assert FITS == ["fit"] * 4


def test_evaluate_stops_when_the_fit_inside_a_transformed_imputer_was_interrupted():
    from explorer.impute.transformed import TransformedImputer

    X = np.exp(_gaussian(120, 22, frac=0.05) / 2)
    FITS.clear()
    inner = CountingGMM(n_components=1, random_state=0, callback=_interrupt_first_fit_at_iteration_2())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(KeyboardInterrupt):
            evaluate({"t": TransformedImputer(inner, transforms={0: "log"}), "b": CountingGMM(n_components=1, random_state=0)},
                     X, n_repeats=2, random_state=0)
    assert FITS == ["fit"]


def test_gridsearch_stops_at_the_first_interrupted_fit():
    """GridSearchCV loops over fits; the held-out scorer it calls after each fit stops it on an interrupted one."""
    X = _gaussian(90, 23, frac=0.05)
    FITS.clear()
    gs = GridSearchCV(CountingGMM(random_state=0, callback=_interrupt_first_fit_at_iteration_2()),
                      {"n_components": [1, 2]}, scoring=held_out_scorer(), cv=KFold(3), error_score="raise")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(KeyboardInterrupt):
            gs.fit(X)
    assert FITS == ["fit"]


# ----------------------------------------------------------------------------- NLL of TransformedImputer
def test_entry_logpdf_of_a_transformed_conditional_matches_its_joint_density_on_single_gaps():
    """Oracle: on rows with ONE missing entry the per-entry marginal is the row's joint density
    (TransformedConditional.logpdf, with the Jacobian); and it is not the Gaussian moment approximation."""
    from explorer.impute.transformed import TransformedImputer

    rng = np.random.default_rng(31)
    Z = rng.multivariate_normal([0.0, 0.5, 0.0], [[1.0, 0.6, 0.3], [0.6, 1.0, 0.2], [0.3, 0.2, 1.0]], size=200)
    truth = np.column_stack([np.exp(Z[:, 0]), 10.0 / (1.0 + np.exp(-Z[:, 1])), Z[:, 2]])  # log, logit (0, 10), none
    X = truth.copy()
    X[rng.random(X.shape) < 0.15] = np.nan
    imp = TransformedImputer(GaussianMixtureImputer(n_components=2, random_state=0),
                             transforms={0: "log", 1: ("logit", 0.0, 10.0)}).fit(X)
    hidden = np.isnan(X)
    cond = imp.conditional(X)
    got = entry_logpdf(cond, truth, hidden)
    ri, ci = np.nonzero(hidden)
    single = hidden.sum(axis=1)[ri] == 1
    assert single.sum() > 20 and set(ci[single]) == {0, 1, 2}
    joint = cond.logpdf(np.where(hidden, truth, X))
    np.testing.assert_allclose(got[single], joint[ri[single]], rtol=1e-10, atol=1e-10)
    gaussian = norm.logpdf(truth[ri, ci], cond.mean()[ri, ci], np.sqrt(cond.variance()[ri, ci]))
    assert np.abs(got - gaussian).max() > 0.1  # the exact density differs from the moment approximation
    assert np.isfinite(got).all()
    # a value outside the logit's bounds has density 0
    outside = truth.copy()
    outside[ri[ci == 1][0], 1] = 11.0
    assert entry_logpdf(cond, outside, hidden)[np.flatnonzero(ci == 1)[0]] == -np.inf
