"""Delta-adjustment NMAR sensitivity analysis: explorer.core.missingness.sensitivity and explorer.sensitivity."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from explorer.core.missingness import sensitivity as sens
from explorer.core.rubin import rubin_pool
from explorer.core.validation import BadInputError
from explorer.sensitivity import sensitivity_analysis


def _imputed_sets(M=6, N=80, D=3, seed=0, frac=0.3):
    """M completed sets sharing the observed entries; imputed entries differ between sets."""
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(N, D))
    base[:, 2] = 1.5 * base[:, 0] - 0.5 * base[:, 1] + 0.4 * rng.normal(size=N)
    missing = rng.random((N, D)) < frac
    missing[:, 0] = False  # a fully observed column
    missing[0] = [False, True, True]  # at least one missing entry in columns 1 and 2
    Y = np.repeat(base[None], M, axis=0)
    Y[:, missing] = base[missing] + rng.normal(scale=0.7, size=(M, int(missing.sum())))
    return Y, missing


# ---------------------------------------------------------------------------------------- oracles
@pytest.mark.parametrize("column", [1, 2])
def test_shift_moves_pooled_mean_by_delta_times_missing_fraction(column):
    Y, missing = _imputed_sets()
    deltas = np.array([-2.0, -0.5, 0.0, 0.3, 1.7])
    table = sens.delta_adjustment(Y, missing, column, deltas, sens.mean_of(column))
    frac = missing[:, column].mean()
    at0 = table.estimate[2]
    np.testing.assert_allclose(table.estimate - at0, deltas * frac, rtol=0, atol=1e-12)
    # every set moves by the same amount: the between-imputation variance does not change
    np.testing.assert_allclose(table.between, table.between[2], rtol=1e-10)
    # the mean of another column does not move at all
    other = sens.delta_adjustment(Y, missing, column, deltas, sens.mean_of(0))
    np.testing.assert_allclose(other.estimate, other.estimate[0], rtol=0, atol=1e-13)


def test_scale_moves_pooled_mean_by_imputed_sum():
    Y, missing = _imputed_sets(seed=3)
    j, N = 1, Y.shape[1]
    deltas = np.array([0.5, 1.0, 2.0])
    table = sens.delta_adjustment(Y, missing, j, deltas, sens.mean_of(j), mode="scale")
    imputed_sum = Y[:, missing[:, j], j].sum(axis=1).mean()
    np.testing.assert_allclose(table.estimate - table.estimate[1], (deltas - 1.0) * imputed_sum / N, atol=1e-12)
    assert table.neutral == 1.0


def test_ols_at_delta_zero_is_rubin_pooling_of_per_set_fits():
    Y, missing = _imputed_sets(M=5, N=60)
    M, N, _ = Y.shape
    est = sens.ols_coefficient(2, [0, 1], term=1)
    table = sens.delta_adjustment(Y, missing, 2, [0.0, 1.0], est, level=0.9)
    # by hand: per-set normal equations and sigma^2 (X'X)^-1, then Rubin 1987 / Barnard-Rubin 1999
    Q, U = np.empty(M), np.empty(M)
    for m in range(M):
        X = np.column_stack([np.ones(N), Y[m][:, [0, 1]]])
        y = Y[m][:, 2]
        gram = X.T @ X
        beta = np.linalg.solve(gram, X.T @ y)
        s2 = np.sum((y - X @ beta) ** 2) / (N - 3)
        Q[m], U[m] = beta[2], s2 * np.linalg.solve(gram, np.eye(3))[2, 2]
    qbar, ubar, b = Q.mean(), U.mean(), Q.var(ddof=1)
    t = ubar + (1 + 1 / M) * b
    lam = (1 + 1 / M) * b / t
    nu_old = (M - 1) / lam**2
    nu_com = N - 3
    nu_obs = (nu_com + 1) / (nu_com + 3) * nu_com * (1 - lam)
    nu = nu_old * nu_obs / (nu_old + nu_obs)
    half = stats.t.ppf(0.95, nu) * np.sqrt(t)
    np.testing.assert_allclose([table.estimate[0], table.within[0], table.between[0], table.total[0], table.df[0]],
                               [qbar, ubar, b, t, nu], rtol=1e-9)
    np.testing.assert_allclose([table.lower[0], table.upper[0]], [qbar - half, qbar + half], rtol=1e-9)
    np.testing.assert_allclose(table.per_set[0], Q, rtol=1e-9)


def test_ols_fit_matches_scipy_linregress():
    rng = np.random.default_rng(7)
    x = rng.normal(size=50)
    y = 2.0 - 0.7 * x + rng.normal(scale=0.5, size=50)
    beta, cov, dof = sens.ols_fit(x[:, None], y)
    ref = stats.linregress(x, y)
    np.testing.assert_allclose(beta, [ref.intercept, ref.slope], rtol=1e-10)
    np.testing.assert_allclose(np.sqrt(np.diag(cov)), [ref.intercept_stderr, ref.stderr], rtol=1e-10)
    assert dof == 48


def test_rubin_pool_moved_to_core_and_reexported():
    from explorer.learn import treatments

    assert treatments.rubin_pool is rubin_pool
    assert treatments.PooledEstimate is sens.rubin_pool.__globals__["PooledEstimate"]


# ---------------------------------------------------------------------------------------- properties
@pytest.mark.parametrize("mode,deltas", [("shift", np.linspace(-3, 3, 7)), ("scale", np.linspace(0.2, 3, 7))])
def test_adjust_leaves_observed_entries_and_other_columns_unchanged(mode, deltas):
    Y, missing = _imputed_sets(seed=11)
    j = 2
    for delta in deltas:
        A = sens.adjust(Y, missing, j, delta, mode)
        assert np.array_equal(A[:, ~missing], Y[:, ~missing])
        assert np.array_equal(np.delete(A, j, axis=2), np.delete(Y, j, axis=2))
        expected = Y[:, missing[:, j], j] + delta if mode == "shift" else delta * Y[:, missing[:, j], j]
        np.testing.assert_allclose(A[:, missing[:, j], j], expected, rtol=1e-14)
    assert not np.shares_memory(sens.adjust(Y, missing, j, 0.0), Y)


def test_intervals_have_positive_width_and_mean_is_monotone_in_delta():
    Y, missing = _imputed_sets(seed=5)
    deltas = np.linspace(-2, 2, 21)
    for est in (sens.mean_of(1), sens.ols_coefficient(2, [0, 1], term=0)):
        table = sens.delta_adjustment(Y, missing, 1, deltas, est)
        assert np.all(table.upper - table.lower > 0)
        assert np.all(table.lower < table.estimate) and np.all(table.estimate < table.upper)
        assert len(table.rows()) == 21 and set(table.rows()[0]) == set(sens.SensitivityTable.FIELDS)
    mean_table = sens.delta_adjustment(Y, missing, 1, deltas, sens.mean_of(1))
    assert np.all(np.diff(mean_table.estimate) > 0)


def test_tipping_point_is_the_nearest_grid_delta_where_the_verdict_flips():
    Y, missing = _imputed_sets(seed=2, N=200)
    deltas = np.linspace(-3, 3, 61)
    table = sens.delta_adjustment(Y, missing, 1, deltas, sens.mean_of(1))
    at0 = float(table.estimate[30])
    tp = sens.tipping_point(table, at0)
    assert tp is not None and not tp.excluded_at_neutral
    excluded = table.excludes(at0)
    assert excluded[deltas == tp.delta][0]
    closer = np.abs(deltas) < abs(tp.delta) - 1e-12
    assert not excluded[closer].any()
    assert tp.lower > at0 or tp.upper < at0
    # a reference excluded at delta = 0: the tipping point is where the interval first covers it
    ref = float(table.upper[30]) + 0.05
    tp2 = sens.tipping_point(table, ref)
    assert tp2.excluded_at_neutral and tp2.delta > 0 and tp2.lower <= ref <= tp2.upper
    # never flips on a grid too narrow
    narrow = sens.delta_adjustment(Y, missing, 1, [-1e-3, 0.0, 1e-3], sens.mean_of(1))
    assert sens.tipping_point(narrow, at0) is None


def test_library_front_end_fits_draws_and_pools():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(150, 3))
    X[:, 2] = 0.8 * X[:, 0] + 0.3 * rng.normal(size=150)
    X[X[:, 2] > 0.5, 2] = np.nan  # NMAR: high values hidden
    df = pd.DataFrame(X, columns=["a", "<b>x</b>", "y"])
    rep = sensitivity_analysis(df, "y", [-1.0, 0.0, 1.0], estimate="ols", target="y", predictors=["a"],
                               n_imputations=4, random_state=1)
    assert rep.label == "coefficient of a in y ~ a"
    assert list(rep.table.columns) == list(sens.SensitivityTable.FIELDS) and len(rep.table) == 3
    observed = ~rep.missing
    assert np.array_equal(rep.imputations[:, observed], np.repeat(X[None], 4, axis=0)[:, observed])
    assert rep.tipping is None or rep.tipping.reference == 0.0
    mean_rep = sensitivity_analysis(df, 2, [0.0, 2.0], n_imputations=3, random_state=1)
    np.testing.assert_allclose(np.diff(mean_rep.table["estimate"]), 2.0 * np.isnan(X[:, 2]).mean(), atol=1e-12)


# ---------------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("change,message", [
    (lambda Y, m: (Y[:1], m), "at least 2"),
    (lambda Y, m: (Y[0], m), "shape (M, N, D)"),
    (lambda Y, m: (np.where(m, np.nan, Y), m), "NaN"),
    (lambda Y, m: (Y, m[:-1]), "missing must have shape"),
    (lambda Y, m: (Y, m.astype(int)), "boolean"),
    (lambda Y, m: (Y + np.arange(Y.shape[0])[:, None, None], m), "observed entries"),
])
def test_bad_imputations(change, message):
    Y, missing = _imputed_sets()
    Y, missing = change(Y, missing)
    with pytest.raises(BadInputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        sens.delta_adjustment(Y, missing, 1, [0.0, 1.0], sens.mean_of(1))


@pytest.mark.parametrize("kwargs,message", [
    ({"column": 0}, "fully observed"),
    ({"column": 7}, "out of range"),
    ({"deltas": []}, "non-empty"),
    ({"deltas": [[0.0, 1.0]]}, "1-D"),
    ({"deltas": [0.0, np.nan]}, "finite"),
    ({"deltas": [1.0, 1.0]}, "repeat"),
    ({"deltas": "abc"}, "finite"),
    ({"mode": "scale", "deltas": [0.0, 1.0]}, "positive"),
    ({"mode": "tilt"}, "mode"),
    ({"level": 1.5}, "level"),
    ({"estimand": "mean"}, "estimand"),
    ({"estimand": sens.mean_of(9)}, "out of range"),
])
def test_bad_settings(kwargs, message):
    Y, missing = _imputed_sets()
    args = {"column": 1, "deltas": [0.0, 1.0], "estimand": sens.mean_of(1)} | kwargs
    with pytest.raises(BadInputError, match=message):
        sens.delta_adjustment(Y, missing, args.pop("column"), args.pop("deltas"), args.pop("estimand"), **args)


def test_bad_estimands_and_designs():
    with pytest.raises(BadInputError, match="also a predictor"):
        sens.ols_coefficient(1, [0, 1])
    with pytest.raises(BadInputError, match="repeat"):
        sens.ols_coefficient(2, [0, 0])
    with pytest.raises(BadInputError, match="not one of the predictors"):
        sens.ols_coefficient(2, [0], term=1)
    with pytest.raises(BadInputError, match="at least one predictor"):
        sens.ols_coefficient(2, [])
    with pytest.raises(BadInputError, match="integer"):
        sens.mean_of(1.5)
    Y, missing = _imputed_sets()
    Y[:, :, 0] = 1.0  # a constant predictor: collinear with the intercept
    with pytest.raises(BadInputError, match="rank-deficient"):
        sens.delta_adjustment(Y, missing, 1, [0.0], sens.ols_coefficient(2, [0, 1]))
    table = sens.delta_adjustment(*_imputed_sets(), 1, [0.0], sens.mean_of(1))
    with pytest.raises(BadInputError, match="finite"):
        sens.tipping_point(table, float("nan"))


def test_library_bad_input():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(40, 2))
    X[:5, 1] = np.nan
    with pytest.raises(BadInputError, match="fully observed"):
        sensitivity_analysis(X, 0, [0.0, 1.0], n_imputations=2)
    with pytest.raises(BadInputError, match="no column 'z'"):
        sensitivity_analysis(pd.DataFrame(X, columns=["a", "b"]), "z")
    words = pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "name": ["x"] * 40})
    with pytest.raises(BadInputError, match="name"):
        sensitivity_analysis(words, "b")
    with pytest.raises(BadInputError, match="n_imputations"):
        sensitivity_analysis(X, 1, [0.0, 1.0], n_imputations=1)
    with pytest.raises(BadInputError, match="estimate must be"):
        sensitivity_analysis(X, 1, [0.0], estimate="median")
    with pytest.raises(BadInputError, match="needs a target"):
        sensitivity_analysis(X, 1, [0.0], estimate="ols")
    X[:, 1] = np.nan
    with pytest.raises(BadInputError, match="no observed value"):
        sensitivity_analysis(X, 1, [0.0])
