"""Tests of the garriga2017 imputation benchmark runner (explorer.benchmark, benchmarks/run_imputation.py)."""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import multivariate_normal, norm

from explorer.benchmark import (
    METHODS,
    RESULT_COLUMNS,
    Imputed,
    Method,
    _gaussian_factory,
    _mixture_nll_terms,
    _student_t_factory,
    cell_mask,
    evaluate,
    missforest_impute,
    run_benchmark,
    summarise,
)
from explorer.core.data import IncompleteData, standardize
from explorer.core.gaussians.conditional import ConditionalMixture
from explorer.core.metrics import nrmse
from explorer.core.validation import BadInputError
from tests.conftest import REPO_ROOT


def _correlated(n=300, rho=0.9, seed=1, with_binary=False) -> IncompleteData:
    rng = np.random.default_rng(seed)
    d = 4
    cov = np.full((d, d), rho) + (1 - rho) * np.eye(d)
    X = rng.multivariate_normal(np.zeros(d), cov, size=n) * [1.0, 3.0, 10.0, 0.5] + [0.0, 5.0, -2.0, 1.0]
    cols = ["a", "b", "c", "d"]
    binary = [False] * d
    if with_binary:
        X = np.column_stack([X, (X[:, 0] > 0.8).astype(float)])
        cols.append("flag")
        binary.append(True)
    return IncompleteData.from_complete(X, columns=cols, binary=binary, name="corr")


@pytest.fixture(scope="module")
def corr():
    return _correlated()


@pytest.fixture(scope="module")
def corr_binary():
    return _correlated(with_binary=True)


def _value(df, method, metric):
    v = df[(df.method == method) & (df.metric == metric)]["value"]
    assert len(v) == 1, (method, metric, len(v))
    return float(v.iloc[0])


# ------------------------------------------------------------------------------- known orderings
@pytest.fixture(scope="module")
def ordering_run(corr):
    return run_benchmark([corr], ["mcar"], [0.2], ["mean", "em_gmm", "poigmm"], 1, seed=3, quick=True)


def test_model_methods_beat_mean_on_correlated_gaussian(ordering_run):
    df = ordering_run
    assert (df["error"] == "").all(), df[df["error"] != ""]
    mean_nrmse = _value(df, "mean", "nrmse")
    assert 0.9 < mean_nrmse < 1.1  # mean imputation of Gaussian data: NRMSE ~ 1
    for m in ("em_gmm", "poigmm"):
        assert _value(df, m, "nrmse") < 0.8 * mean_nrmse
        assert _value(df, m, "nll") < _value(df, "mean", "nll")
        assert 0.8 < _value(df, m, "coverage95") <= 1.0


def test_mean_method_is_standard_normal_in_standardised_space(ordering_run):
    df = ordering_run
    # N(0, 1) on standardised Gaussian data: about 95 % coverage and ~0.5 log(2 pi e) nats per entry
    assert 0.9 < _value(df, "mean", "coverage95") < 0.99
    n_missing = int(df[df.method == "mean"]["n_missing"].iloc[0])
    per_entry = _value(df, "mean", "nll") / n_missing
    assert abs(per_entry - 0.5 * math.log(2 * math.pi * math.e)) < 0.15
    assert _value(df, "mean", "nll_n_inf") == 0


def test_table_layout_and_shared_mask(ordering_run, corr):
    df = ordering_run
    assert list(df.columns) == list(RESULT_COLUMNS)
    assert set(df["metric"]) == {"nrmse", "rmse", "nll", "nll_n_inf", "nll_t", "coverage95"}  # no binary: no pfc
    # every method saw the same mask, the one cell_mask reproduces
    mask = cell_mask(corr, "mcar", 0.2, 0, seed=3)
    assert df["n_missing"].nunique() == 1 and int(df["n_missing"].iloc[0]) == int(mask.sum())
    assert np.allclose(df["realised_rate"], mask.mean())
    assert (df["seconds"] >= 0).all() and df["variant"].eq("code").all()


# ------------------------------------------------------------------------------- masked entries only
def _constant_method(value: float, name="const") -> Method:
    def run(X, missing, binary, rng, quick):
        return Imputed(mean=np.where(missing, value, X))

    return Method(name, run, "point", "test", "test")


def test_metrics_use_masked_entries_only(corr):
    df = run_benchmark([corr], ["mcar"], [0.3], [_constant_method(0.0)], 1, seed=5)
    mask = cell_mask(corr, "mcar", 0.3, 0, seed=5)
    truth = np.asarray(corr.truth)
    # 0 in standardised space = observed column mean in original units
    obs_mean = np.array([truth[~mask[:, j], j].mean() for j in range(truth.shape[1])])
    imputed = np.where(mask, obs_mean, truth)
    expected = nrmse(truth, imputed, mask, minmax=(truth.min(0), truth.max(0)))
    assert _value(df, "const", "nrmse") == pytest.approx(expected, rel=1e-12)


def test_evaluate_ignores_observed_entries_and_oracle_scores_zero(corr_binary):
    truth = np.asarray(corr_binary.truth)
    mask = cell_mask(corr_binary, "mcar", 0.25, 0, seed=2)
    _std, scaler = standardize(corr_binary.with_missing(mask))
    oracle = scaler.transform(truth)
    binary = np.asarray(corr_binary.binary)
    scores = evaluate(truth, mask, Imputed(mean=oracle), scaler, binary)
    assert scores["nrmse"][0] == pytest.approx(0.0, abs=1e-12)
    assert scores["pfc"] == (0.0, "")
    garbage = np.where(mask, oracle, 1e6)  # wrong values at observed entries are never scored
    assert evaluate(truth, mask, Imputed(mean=garbage), scaler, binary)["nrmse"][0] == pytest.approx(0.0, abs=1e-12)


def test_methods_receive_standardised_data_and_observed_entries_are_kept(corr):
    seen = {}

    def spy(X, missing, binary, rng, quick):
        seen["X"], seen["missing"] = X.copy(), missing.copy()
        return Imputed(mean=np.where(missing, 0.0, X))

    run_benchmark([corr], ["mcar"], [0.2], [Method("spy", spy, "point", "t", "t")], 1, seed=9)
    mask = cell_mask(corr, "mcar", 0.2, 0, seed=9)
    X = seen["X"]
    np.testing.assert_array_equal(seen["missing"], mask)
    np.testing.assert_array_equal(np.isnan(X), mask)
    assert np.allclose(np.nanmean(X, axis=0), 0.0) and np.allclose(np.nanstd(X, axis=0), 1.0)


def test_method_altering_observed_entries_is_reported(corr):
    def cheat(X, missing, binary, rng, quick):
        out = np.where(missing, 0.0, X)
        out[np.argwhere(~missing)[0][0], np.argwhere(~missing)[0][1]] += 1.0
        return Imputed(mean=out)

    df = run_benchmark([corr], ["mcar"], [0.2], [Method("cheat", cheat, "point", "t", "t")], 1, seed=0)
    assert df["value"].isna().all()
    assert df["error"].str.contains("altered 1 observed entries").all()


# ------------------------------------------------------------------------------- failures and infinities
def test_failing_method_gives_nan_and_message_and_run_continues(corr_binary):
    def boom(X, missing, binary, rng, quick):
        raise RuntimeError("solver exploded")

    df = run_benchmark([corr_binary], ["mcar"], [0.2], [Method("boom", boom, "point", "t", "t"), "mean"], 1,
                       seed=0)
    bad = df[df.method == "boom"]
    assert bad["value"].isna().all() and len(bad) > 0
    assert bad["error"].eq("RuntimeError: solver exploded").all()
    assert "pfc" in set(bad["metric"])  # the binary column has hidden entries
    good = df[df.method == "mean"]
    assert good["value"].notna().all() and good["error"].eq("").all()
    s = summarise(df)
    assert (s[s.method == "boom"]["n_failed"] == 1).all() and (s[s.method == "boom"]["n"] == 0).all()


def test_infinite_nll_is_kept_and_counted(corr):
    def overconfident(X, missing, binary, rng, quick):  # zero variance, far from the truth
        mean = np.where(missing, 50.0, X)
        return Imputed(mean=mean, var=np.zeros_like(X))

    df = run_benchmark([corr], ["mcar"], [0.2], [Method("sure", overconfident, "gaussian", "t", "t")], 2,
                       seed=0)
    nll = df[df.metric == "nll"]["value"]
    assert np.isposinf(nll).all()
    assert (df[df.metric == "nll_n_inf"]["value"] == df[df.metric == "nll_n_inf"]["n_missing"]).all()
    s = summarise(df).set_index("metric")
    assert np.isposinf(s.loc["nll", "mean"]) and s.loc["nll", "n_inf"] == 2 and s.loc["nll", "n"] == 2


def test_mixture_nll_marginalises_the_binary_coordinate():
    mean = np.array([0.5, -1.0, 0.2])
    cov = np.array([[1.0, 0.6, 0.3], [0.6, 2.0, 0.4], [0.3, 0.4, 1.5]])
    X = np.array([[0.3, np.nan, np.nan], [np.nan, 0.1, 1.0]])
    factory = _gaussian_factory(X, np.isnan(X), np.array([1.0]), mean[None], cov[None])
    truth = np.array([[0.3, -0.5, 1.0], [1.2, 0.1, 1.0]])
    numeric = np.array([True, True, False])
    lp = -_mixture_nll_terms(factory, truth, np.isnan(X), numeric)
    # row 0: x1 | x0 (column 2 hidden too, marginalised out); row 1: x0 | x1, x2
    m1 = mean[1] + cov[1, 0] / cov[0, 0] * (0.3 - mean[0])
    v1 = cov[1, 1] - cov[1, 0] ** 2 / cov[0, 0]
    o = [1, 2]
    gain = np.linalg.solve(cov[np.ix_(o, o)], cov[o, 0])
    m0 = mean[0] + gain @ (np.array([0.1, 1.0]) - mean[o])
    v0 = cov[0, 0] - gain @ cov[o, 0]
    np.testing.assert_allclose(lp, [norm.logpdf(-0.5, m1, np.sqrt(v1)), norm.logpdf(1.2, m0, np.sqrt(v0))])
    # without a binary column the joint density of the block is used
    full = -_mixture_nll_terms(factory, truth, np.isnan(X), np.ones(3, bool))
    cond_mean = mean[1:] + cov[1:, :1] @ (np.array([0.3]) - mean[:1]) / cov[0, 0]
    cond_cov = cov[1:, 1:] - np.outer(cov[1:, 0], cov[0, 1:]) / cov[0, 0]
    assert full[0] == pytest.approx(multivariate_normal(cond_mean, cond_cov).logpdf([-0.5, 1.0]))


def test_student_t_nll_marginalises_with_the_same_dof():
    """nll_t: the binary coordinate of a multivariate t is integrated out in closed form (same dof)."""
    from types import SimpleNamespace

    from scipy.stats import multivariate_t

    from explorer.core.gaussians.conditional_t import normal_wishart_predictive

    rng = np.random.default_rng(0)
    A = rng.normal(size=(3, 3))
    state = SimpleNamespace(weights=np.array([1.0]), means=np.array([[0.5, -1.0, 0.2]]), beta=np.array([2.0]),
                            nu=np.array([6.0]), scatter=(A @ A.T + 3 * np.eye(3))[None] * 5)
    loc, S, dof = normal_wishart_predictive(state.means, state.beta, state.nu, state.scatter)
    X = np.array([[0.3, np.nan, np.nan], [np.nan, 0.1, 1.0]])
    truth = np.array([[0.3, -0.5, 1.0], [1.2, 0.1, 1.0]])
    numeric = np.array([True, True, False])
    lp = -_mixture_nll_terms(_student_t_factory(X, np.isnan(X), state), truth, np.isnan(X), numeric)
    # oracle: log p(x_mis | x_obs) = log p(x_mis, x_obs) - log p(x_obs) with scipy's multivariate t
    S, mu, v = S[0], loc[0], dof[0]
    keep = [0, 1]
    joint0 = multivariate_t(mu[keep], S[np.ix_(keep, keep)], df=v).logpdf(truth[0, keep])
    marg0 = multivariate_t(mu[:1], S[:1, :1], df=v).logpdf(truth[0, :1])
    joint1 = multivariate_t(mu, S, df=v).logpdf(truth[1])
    marg1 = multivariate_t(mu[1:], S[1:, 1:], df=v).logpdf(truth[1, 1:])
    np.testing.assert_allclose(lp, [joint0 - marg0, joint1 - marg1], rtol=1e-10)


def test_poigmm_reports_student_t_nll_and_it_is_finite(corr_binary):
    df = run_benchmark([corr_binary], ["mcar"], [0.2], ["poigmm", "mean"], 1, seed=2, quick=True)
    assert (df["error"] == "").all(), df[df["error"] != ""]
    assert "nll_t" in set(df[df.method == "poigmm"]["metric"])
    assert "nll_t" not in set(df[df.method == "mean"]["metric"])
    t, g = _value(df, "poigmm", "nll_t"), _value(df, "poigmm", "nll")
    assert np.isfinite(t) and np.isfinite(g)
    assert t < _value(df, "mean", "nll")  # a fitted density beats N(0, 1) on correlated data


# ------------------------------------------------------------------------------- missForest
def test_missforest_recovers_a_deterministic_column_and_keeps_observed():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    X[:, 2] = 2 * X[:, 0] - X[:, 1]
    missing = np.zeros_like(X, dtype=bool)
    missing[rng.choice(200, 40, replace=False), 2] = True
    Xm = np.where(missing, np.nan, X)
    out, n_iter = missforest_impute(Xm, missing, n_trees=50, random_state=1)
    assert np.array_equal(out[~missing], X[~missing])
    err = np.sqrt(np.mean((out[missing] - X[missing]) ** 2))
    assert err < 0.5 * X[:, 2].std()  # far better than the mean start
    assert 1 <= n_iter <= 10
    again, _ = missforest_impute(Xm, missing, n_trees=50, random_state=1)
    np.testing.assert_array_equal(out, again)


def test_missforest_stops_when_the_change_increases(monkeypatch):
    """The R stopping rule: return the previous imputation the first time the change grows."""
    import sklearn.ensemble

    calls = {"n": 0}
    outputs = [2.0, 2.5, 2.6, 4.0, 4.1]  # mean start 1.0; relative changes .043, .0099, .0004, .056 -> stop at 4

    class Fake:
        def __init__(self, **kw):
            pass

        def fit(self, X, y):
            return self

        def predict(self, X):
            calls["n"] += 1
            return np.full(len(X), outputs[calls["n"] - 1])

    monkeypatch.setattr(sklearn.ensemble, "RandomForestRegressor", Fake)
    X = np.array([[0.0, 1.0], [1.0, np.nan], [2.0, 0.0], [3.0, 2.0]])
    out, n_iter = missforest_impute(X, np.isnan(X), max_iter=10, random_state=0)
    assert n_iter == 4 and out[1, 1] == 2.6 and calls["n"] == 4


# ------------------------------------------------------------------------------- runner behaviour
def test_cancel_returns_the_partial_table(corr):
    import threading

    ev = threading.Event()
    seen = []

    def progress(d):
        seen.append(d["done"])
        if d["done"] == 2:
            ev.set()

    df = run_benchmark([corr], ["mcar"], [0.1, 0.2, 0.3], ["mean", "knn"], 1, seed=0, progress=progress, cancel=ev)
    assert seen == [1, 2]
    assert len(df.groupby(["rate", "method"])) == 2


def test_method_options_reach_the_method_and_are_checked(corr):
    df = run_benchmark([corr], ["mcar"], [0.2], ["missforest"], 1, seed=0, quick=True,
                       method_options={"missforest": {"n_runs": 3}})
    assert (df["n_imputations"] == 3).all()
    with pytest.raises(BadInputError, match="has no option"):
        run_benchmark([corr], ["mcar"], [0.2], ["missforest"], 1, seed=0, method_options={"missforest": {"x": 1}})
    with pytest.raises(BadInputError, match="not among the methods run"):
        run_benchmark([corr], ["mcar"], [0.2], ["mean"], 1, seed=0, method_options={"missforest": {"n_runs": 2}})
    with pytest.raises(BadInputError, match="n_runs must be a positive integer"):
        from explorer.benchmark import _missforest

        _missforest(np.zeros((3, 2)), np.zeros((3, 2), bool), np.zeros(2, bool), np.random.default_rng(0), True,
                    n_runs=0)



def test_reproducible_and_summary_statistics(corr):
    kw = {"seed": 4, "quick": True}
    a = run_benchmark([corr], ["mcar", "mcar_rows"], [0.2], ["mean", "knn"], 2, **kw)
    b = run_benchmark([corr], ["mcar", "mcar_rows"], [0.2], ["mean", "knn"], 2, **kw)
    pd.testing.assert_frame_equal(a.drop(columns="seconds"), b.drop(columns="seconds"))
    reps = a[(a.method == "knn") & (a.metric == "nrmse") & (a.mechanism == "mcar")]["value"].to_numpy()
    assert reps[0] != reps[1]  # different masks per repetition
    s = summarise(a)
    row = s[(s.method == "knn") & (s.metric == "nrmse") & (s.mechanism == "mcar")].iloc[0]
    assert row["n"] == 2 and row["mean"] == pytest.approx(reps.mean())
    assert row["std"] == pytest.approx(np.std(reps, ddof=1))
    assert len(s) == 2 * 2 * 5 - 2 * 3  # knn has no nll / nll_n_inf / coverage95


def test_progress_callback_and_parallel_match(corr):
    events = []
    a = run_benchmark([corr], ["mcar"], [0.1, 0.3], ["mean", "knn"], 1, seed=1, progress=events.append)
    assert [e["done"] for e in events] == [1, 2, 3, 4] and all(e["total"] == 4 for e in events)
    assert events[-1]["eta"] == 0 and all(e["elapsed"] >= 0 for e in events)
    b = run_benchmark([corr], ["mcar"], [0.1, 0.3], ["mean", "knn"], 1, seed=1, n_jobs=2)
    pd.testing.assert_frame_equal(a.drop(columns="seconds"), b.drop(columns="seconds"))


def test_bad_inputs(corr):
    with pytest.raises(BadInputError, match="Unknown benchmark method 'nope'"):
        run_benchmark([corr], ["mcar"], [0.2], ["nope"], 1, seed=0)
    with pytest.raises(BadInputError, match="Unknown missingness mechanism"):
        run_benchmark([corr], ["mcar_total"], [0.2], ["mean"], 1, seed=0)
    with pytest.raises(BadInputError, match="seed must be a non-negative integer"):
        run_benchmark([corr], ["mcar"], [0.2], ["mean"], 1, seed=-1)
    with pytest.raises(BadInputError, match="repetitions must be a positive integer"):
        run_benchmark([corr], ["mcar"], [0.2], ["mean"], 0, seed=0)
    incomplete = IncompleteData.from_array([[1.0, np.nan], [2.0, 3.0], [0.0, 1.0]])
    with pytest.raises(BadInputError, match="must be complete"):
        run_benchmark([incomplete], ["mcar"], [0.2], ["mean"], 1, seed=0)


def test_registry_documents_differences():
    assert {"mean", "poigmm", "poigmm_thesis", "em_gmm", "mice", "missforest", "knn"} <= set(METHODS)
    for m in METHODS.values():
        assert m.description and m.differs and m.kind in {"mixture", "samples", "point", "gaussian"}


def test_sample_methods_reduce_imputations(corr_binary):
    df = run_benchmark([corr_binary], ["mcar"], [0.2], ["mice"], 1, seed=0, quick=True)
    assert (df["error"] == "").all(), df[df["error"] != ""]
    assert (df["n_imputations"] == 3).all()
    assert {"nrmse", "pfc", "nll", "coverage95"} <= set(df["metric"])
    assert _value(df, "mice", "nrmse") < 0.8  # linear chained equations exploit the correlation


# ------------------------------------------------------------------------------- CLI
def _cli():
    spec = importlib.util.spec_from_file_location("run_imputation", REPO_ROOT / "benchmarks" / "run_imputation.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_cli_quick_end_to_end(tmp_path, capsys):
    cli = _cli()
    out = tmp_path / "bench"
    assert cli.main(["--quick", "--methods", "mean", "knn", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "[4/4] boston mcar r=0.3 rep=0 knn" in text and "ETA" in text and "elapsed" in text
    res = pd.read_csv(out / "results.csv")
    assert set(res["rate"]) == {0.1, 0.3} and set(res["method"]) == {"mean", "knn"}
    assert set(res["dataset"]) == {"boston"} and "pfc" in set(res["metric"])
    summary = pd.read_csv(out / "summary.csv")
    assert {"mean", "std", "n", "n_inf", "n_failed"} <= set(summary.columns)
    assert (out / "summary.nc").exists()
    assert (out / "COMMAND.txt").read_text().startswith("python benchmarks/run_imputation.py --quick")
    # --append merges a second run (another method) and re-summarises both
    assert cli.main(["--quick", "--methods", "poigmm", "--out", str(out), "--append"]) == 0
    merged = pd.read_csv(out / "results.csv")
    assert set(merged["method"]) == {"mean", "knn", "poigmm"} and len(merged) > len(res)
    assert "poigmm" in set(pd.read_csv(out / "summary.csv")["method"])
    assert len((out / "COMMAND.txt").read_text().splitlines()) == 2
    assert cli.main(["--list-methods"]) == 0
    assert "missforest [samples]" in capsys.readouterr().out
