"""RegressionModel: regression from the joint density (Ghahramani & Jordan eq. 13) as a steppable page model."""

from __future__ import annotations

import re

import numpy as np
import pytest
from scipy import stats

from explorer.core.validation import BadInputError
from explorer.learn.joint import GaussianMixtureRegressor
from explorer.ui.state.data_model import DataModel
from explorer.ui.state.regression_model import (
    JOINT_DRAW,
    JOINT_MEAN,
    METHODS,
    Y_MEAN,
    RegressionModel,
    between_modes,
    between_modes_rows,
    compare_methods,
    mixture_density,
    significant_modes,
)


@pytest.fixture(scope="module")
def ring():
    """The noisy circle with 20 % MCAR, K = 6, run to convergence (shared: read-only use)."""
    m = RegressionModel(data_model=DataModel(dataset="ring", mechanism="mcar", rate=0.2), n_components=6)
    m.run()
    assert m.stop_reason == "tol"
    return m


@pytest.fixture(scope="module")
def linear():
    """The bivariate Gaussian of ghahramani1994 Fig. 1 (a linear Gaussian regression), MCAR 20 %, K = 3."""
    m = RegressionModel(data_model=DataModel(dataset="ghahramani_bivariate", mechanism="mcar", rate=0.2),
                        n_components=3)
    m.run()
    return m


# ---------------------------------------------------------------------------- oracles
def test_converged_curve_is_the_gaussian_mixture_regressor(ring):
    """Stepped to convergence, the page's model is GaussianMixtureRegressor with the same settings."""
    X = ring.em_data.X
    reg = ring.regressor().fit(X[:, :1], X[:, 1])
    curve = ring.curve()
    np.testing.assert_allclose(reg.predict(curve.x[:, None]), curve.mean, atol=1e-10)
    lower, upper = reg.predict_interval(curve.x[:, None], level=ring.level)
    np.testing.assert_allclose(lower, curve.lower, atol=1e-8)
    np.testing.assert_allclose(upper, curve.upper, atol=1e-8)
    s = ring.slice_at(0.5)
    np.testing.assert_allclose(reg.conditional_density([0.5], s.grid), s.density, rtol=1e-10, atol=1e-14)


def test_one_component_on_complete_data_is_least_squares():
    """K = 1 on complete data: E[y | x] (eq. 13) is the ordinary least-squares line."""
    m = RegressionModel(data_model=DataModel(dataset="ghahramani_bivariate", mechanism="none"), n_components=1,
                        reg_covar=0.0)
    m.run()
    X = m.em_data.X
    slope, intercept = np.polyfit(X[:, 0], X[:, 1], 1)
    curve = m.curve(n_grid=7)
    np.testing.assert_allclose(curve.mean, intercept + slope * curve.x, atol=1e-6)
    # the predictive sd is the residual sd of the ML fit
    resid = X[:, 1] - (intercept + slope * X[:, 0])
    assert m.slice_at(5.0).sd == pytest.approx(np.sqrt(np.mean(resid**2)), rel=1e-4)


def test_mixture_density_matches_scipy():
    w = np.array([[0.3, 0.7], [1.0, 0.0]])
    mu = np.array([[-1.0, 2.0], [0.5, 9.0]])
    sd = np.array([[0.5, 1.5], [2.0, 1.0]])
    g = np.linspace(-4, 5, 11)
    expected = np.stack([sum(w[i, k] * stats.norm.pdf(g, mu[i, k], sd[i, k]) for k in range(2)) for i in range(2)])
    np.testing.assert_allclose(mixture_density(w, mu, sd, g), expected, rtol=1e-12)


def test_slice_draws_follow_the_conditional(ring):
    """Monte Carlo: the stochastic estimates at x0 have the predictive mean and sd."""
    s = ring.slice_at(1.0, n_draws=20000, rng=np.random.default_rng(3))
    assert s.draws.mean() == pytest.approx(s.mean, abs=4 * s.sd / np.sqrt(s.draws.size))
    assert s.draws.std() == pytest.approx(s.sd, rel=0.03)
    inside = np.mean((s.draws >= s.lower) & (s.draws <= s.upper))
    assert inside == pytest.approx(s.level, abs=0.01)


# ---------------------------------------------------------------------------- properties
def test_curve_shapes_and_band_contains_the_mean(ring, linear):
    for m in (ring, linear):
        c = m.curve(n_grid=50)
        assert c.x.shape == c.mean.shape == c.lower.shape == c.upper.shape == c.between.shape == (50,)
        assert np.all(np.diff(c.x) > 0)
        assert (c.x[0], c.x[-1]) == pytest.approx(m.x_range())
        assert np.all(c.lower <= c.mean) and np.all(c.mean <= c.upper)
        assert np.all(c.upper - c.lower > 0)
    narrow = ring.curve(n_grid=50)
    ring.level = 0.5
    try:
        half = ring.curve(n_grid=50)
    finally:
        ring.level = 0.95
    assert np.all(half.upper - half.lower < narrow.upper - narrow.lower)


def test_slice_components_sum_to_a_normalised_density(ring):
    s = ring.slice_at(-1.0)
    np.testing.assert_allclose(s.components.sum(axis=0), s.density, rtol=1e-12)
    assert np.trapezoid(s.density, s.grid) == pytest.approx(1.0, abs=1e-3)
    assert s.weights.sum() == pytest.approx(1.0)
    assert s.lower < s.mean < s.upper


def test_log_likelihood_never_decreases_over_steps():
    m = RegressionModel(data_model=DataModel(dataset="ring", n_samples=150, mechanism="mcar", rate=0.3),
                        n_components=4)
    ll = [m.log_likelihood]
    for _ in range(25):
        if not m.step():
            break
        ll.append(m.log_likelihood)
    assert len(ll) > 5
    assert np.all(np.diff(ll) >= -1e-9 * np.abs(ll[1:]))


def test_scatter_puts_each_row_in_one_place(ring):
    sc = ring.scatter()
    miss = ring.em_data.missing
    assert sc.observed.shape == (int((~miss.any(axis=1)).sum()), 2)
    assert sc.imputed.shape == (int((miss[:, 1] & ~miss[:, 0]).sum()), 2)
    assert sc.strip.shape == (int((miss[:, 0] & ~miss[:, 1]).sum()),)
    assert sc.n_both_missing == int(miss.all(axis=1).sum())
    # rows with y missing sit at E[y | x]
    np.testing.assert_allclose(sc.imputed[:, 1], ring.predictive(sc.imputed[:, 0]).mean()[:, 0])
    assert np.isfinite(sc.imputed).all() and np.isfinite(sc.strip).all()


def test_x0_outside_the_inputs_falls_back_to_their_middle(ring):
    lo, hi = ring.x_range()
    ring.x0 = hi + 100.0
    try:
        assert ring.x0_used == pytest.approx(0.5 * (lo + hi))
        ring.x0 = lo + 0.25 * (hi - lo)
        assert ring.x0_used == pytest.approx(lo + 0.25 * (hi - lo))
        assert ring.slice_at().x0 == pytest.approx(ring.x0)
    finally:
        ring.x0 = None


# ---------------------------------------------------------------------------- the bimodal case
def test_significant_modes_counts_bumps():
    g = np.linspace(-6, 6, 601)
    two = 0.5 * stats.norm.pdf(g, -3, 0.5) + 0.5 * stats.norm.pdf(g, 3, 0.5)
    assert g[significant_modes(two)] == pytest.approx([-3.0, 3.0], abs=0.02)
    assert significant_modes(stats.norm.pdf(g, 1, 1)).size == 1
    tiny_bump = stats.norm.pdf(g, 0, 1) + 0.01 * stats.norm.pdf(g, 4, 0.2)
    assert significant_modes(tiny_bump).size == 1  # below 10 % of the top: not a mode
    assert significant_modes(np.zeros(5)).size == 0


def test_between_modes_rule():
    g = np.linspace(-6, 6, 601)
    two = 0.5 * stats.norm.pdf(g, -3, 0.5) + 0.5 * stats.norm.pdf(g, 3, 0.5)
    v = between_modes(g, two, 0.0, float(np.interp(0.0, g, two)))
    assert v.between and v.ratio < 1e-6 and v.modes.size == 2
    skewed = 0.8 * stats.norm.pdf(g, 0, 1) + 0.2 * stats.norm.pdf(g, 1.5, 1)
    mean = 0.8 * 0 + 0.2 * 1.5
    assert not between_modes(g, skewed, mean, float(np.interp(mean, g, skewed))).between
    # two overlapping bumps: the mean on a shoulder, not in a valley
    close = 0.5 * stats.norm.pdf(g, -0.6, 0.5) + 0.5 * stats.norm.pdf(g, 0.6, 0.5)
    assert not between_modes(g, close, 0.0, float(np.interp(0.0, g, close))).between
    dens = np.stack([two, skewed, close])
    means = np.array([0.0, mean, 0.0])
    at = np.array([np.interp(m, g, d) for m, d in zip(means, dens)])
    np.testing.assert_array_equal(between_modes_rows(g, dens, means, at), [True, False, False])


def test_bimodal_case_is_detected_on_the_circle_not_on_a_linear_gaussian(ring, linear):
    s = ring.slice_at(0.0)
    assert s.between
    assert s.modes.size >= 2 and s.modes.min() < s.mean < s.modes.max()
    assert s.modes.min() < -2 and s.modes.max() > 2  # the lower and the upper arc of the circle (radius 3)
    assert s.verdict.ratio < 0.1
    assert ring.curve().between_fraction > 0.3
    assert linear.curve().between_fraction == 0.0
    s = linear.slice_at()
    assert not s.between and s.modes.size == 1


# ---------------------------------------------------------------------------- columns and settings
def test_columns_follow_the_data_and_the_choices():
    m = RegressionModel(data_model=DataModel(dataset="iris", mechanism="mcar", rate=0.1), n_components=2,
                        input_column="petal_length", target_column="petal_width")
    assert m.columns == ("petal_length", "petal_width") and m.error == ""
    assert m.data_model.data.columns == ("petal_length", "petal_width")
    run = m.run_id
    m.input_column = "sepal_length"
    assert m.columns == ("sepal_length", "petal_width") and m.run_id == run + 1
    m.param.update(input_column="petal_width", target_column="sepal_length")  # swapped: columns reordered
    assert m.columns == ("petal_width", "sepal_length")
    np.testing.assert_array_equal(m.em_data.X[:, 0], m.data_model.data.values[:, m.data_model.data.columns.index(
        "petal_width")])
    run = m.run_id
    m.n_components = 3
    assert m.run_id == run + 1  # one new run per change
    m.data_model.dataset = "ring"  # the old columns are not in the new data: its pair is taken
    assert (m.input_column, m.target_column) == ("x", "y") and m.columns == ("x", "y") and m.error == ""
    settings = m.settings()
    assert settings["input_column"] == "x" and settings["n_components"] == 3
    other = RegressionModel(data_model=DataModel(dataset="ring"))
    other.apply_settings({"target_column": "x", "input_column": "y"})
    assert other.columns == ("y", "x")


# ---------------------------------------------------------------------------- bad settings
def test_same_input_and_target_column_is_a_clear_error():
    m = RegressionModel(data_model=DataModel(dataset="ring", mechanism="mcar", rate=0.2), n_components=2)
    m.target_column = "x"
    assert m.state is None and m.columns is None and m.curve() is None and m.slice_at() is None
    assert "The input and the target are the same column ('x')" in m.error
    with pytest.raises(BadInputError, match="same column"):
        m.compare()
    m.target_column = "y"
    assert m.error == "" and m.state is not None


def test_non_numeric_column_in_an_upload_is_named():
    m = RegressionModel(data_model=DataModel(dataset="ring"), n_components=2)
    csv = b"size,colour,weight\n1.0,red,2.0\n2.0,blue,3.5\n3.0,red,4.1\n4.0,green,6.2\n"
    assert not m.data_model.load_csv(csv, "shop.csv")
    assert re.search(r"not numeric: 'colour'", m.data_model.error)
    assert m.columns == ("x", "y")  # the data on screen are kept


def test_one_column_upload_is_a_clear_error():
    m = RegressionModel(data_model=DataModel(dataset="ring"), n_components=2)
    m.data_model.load_csv(b"a\n1\n2\n3\n4\n5\n", "one.csv")
    assert m.state is None
    assert "Regression needs two numeric columns" in m.error


def test_more_components_than_rows_is_a_clear_error():
    m = RegressionModel(data_model=DataModel(dataset="ring"), n_components=2)
    rows = "\n".join(f"{i},{i * i}" for i in range(12))
    assert m.data_model.load_csv(f"u,v\n{rows}\n".encode(), "small.csv")
    assert m.columns == ("u", "v") and m.error == ""
    m.n_components = 15
    assert m.state is None
    assert re.search(r"K = 15 components need at least 15 rows .* has 12 .*Choose K <= 12", m.error)


def test_bad_parameter_values_are_refused():
    m = RegressionModel(data_model=DataModel(dataset="ring"), n_components=2)
    with pytest.raises(ValueError, match="level"):
        m.level = 1.5
    with pytest.raises(ValueError, match="covariance_type"):
        m.covariance_type = "spherical"
    with pytest.raises(ValueError, match="test_fraction"):
        m.test_fraction = 0.9


# ---------------------------------------------------------------------------- comparison
def test_compare_methods_scores_every_method_on_held_out_rows():
    rng = np.random.default_rng(0)
    x = rng.normal(size=300)
    X = np.column_stack([x, 1.0 + 2.0 * x + 0.3 * rng.normal(size=300)])
    X[rng.random(300) < 0.15, 0] = np.nan
    X[rng.random(300) < 0.15, 1] = np.nan
    c = compare_methods(X, n_components=1, seed=0, test_fraction=0.25, split_seed=1)
    assert [r["method"] for r in c.rows] == list(METHODS)
    assert all(not r["error"] for r in c.rows)
    labelled = int((~np.isnan(X[:, 1])).sum())
    assert c.n_test == round(0.25 * labelled) and c.n_train == 300 - c.n_test
    assert c.n_train_labelled == labelled - c.n_test and c.n_test_x_missing > 0
    rmse = {r["method"]: r for r in c.rows}
    # a linear Gaussian: the least-squares estimate beats the draw and the constant
    assert rmse[JOINT_MEAN]["rmse"] < rmse[JOINT_DRAW]["rmse"] < rmse[Y_MEAN]["rmse"]
    assert rmse[JOINT_MEAN]["rmse_x_observed"] < 0.5
    # oracle for the constant: the mean of the training targets, scored on the held-out ones
    test = np.sort(np.random.default_rng(1).choice(np.flatnonzero(~np.isnan(X[:, 1])), c.n_test, replace=False))
    train_y = np.delete(X[:, 1], test)
    expected = np.sqrt(np.mean((X[test, 1] - np.nanmean(train_y)) ** 2))
    assert rmse[Y_MEAN]["rmse"] == pytest.approx(expected, rel=1e-12)
    assert rmse[c.best()]["rmse"] == min(r["rmse"] for r in c.rows)


def test_compare_needs_enough_labelled_rows():
    X = np.column_stack([np.arange(10.0), np.r_[np.arange(5.0), [np.nan] * 5]])
    with pytest.raises(BadInputError, match="at least 3 test and 3 training rows"):
        compare_methods(X, n_components=1, test_fraction=0.3)
    with pytest.raises(BadInputError, match="two columns"):
        compare_methods(np.zeros((10, 3)), n_components=1)


def test_compare_reports_a_method_that_cannot_fit():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(20, 2))
    c = compare_methods(X, n_components=25, test_fraction=0.3)  # more components than training rows
    joint = {r["method"]: r for r in c.rows}[JOINT_MEAN]
    assert "n_components=25 is larger than the number of rows" in joint["error"] and np.isnan(joint["rmse"])
    assert all(not r["error"] for r in c.rows if not r["method"].startswith("Joint"))


def test_regressor_matches_the_model_settings(ring):
    reg = ring.regressor()
    assert isinstance(reg, GaussianMixtureRegressor)
    assert (reg.n_components, reg.covariance_type, reg.random_state, reg.tol) == (
        ring.n_components, ring.covariance_type, ring.seed, ring.tol)



# ---------------------------------------------------------------------------- read-outs of a page frame
def test_readouts_are_the_read_out_methods_computed_together(ring):
    """One conditioning for the whole frame gives the numbers of curve(), draws(), scatter() and slice_at()."""
    r = ring.readouts(n_draws=120, n_slice_draws=80)
    assert (r.run_id, r.iteration, r.stop_reason, r.finished) == (ring.run_id, ring.iteration, "tol", True)
    curve, s = ring.curve(), ring.slice_at(n_draws=80)
    np.testing.assert_array_equal(r.curve.mean, curve.mean)
    np.testing.assert_array_equal(r.curve.between, curve.between)
    np.testing.assert_allclose(r.curve.lower, curve.lower, atol=1e-12)
    np.testing.assert_allclose(r.curve.upper, curve.upper, atol=1e-12)
    np.testing.assert_array_equal(r.draws, ring.draws(120))
    np.testing.assert_allclose(r.scatter.imputed, ring.scatter().imputed, atol=1e-12)
    np.testing.assert_array_equal(r.scatter.strip, ring.scatter().strip)
    np.testing.assert_array_equal(r.slice.density, s.density)
    np.testing.assert_array_equal(r.slice.draws, s.draws)
    assert (r.slice.lower, r.slice.upper) == pytest.approx((s.lower, s.upper), abs=1e-12)
    assert r.x_range == ring.x_range() and r.x0 == ring.x0_used and r.columns == ("x", "y")
    miss = ring.em_data.missing
    assert r.counts == {"complete": int((~miss.any(axis=1)).sum()), "y_missing": int((miss[:, 1] & ~miss[:, 0]).sum()),
                        "x_missing": int((miss[:, 0] & ~miss[:, 1]).sum()), "both_missing": int(miss.all(axis=1).sum())}


def test_readouts_without_a_run_say_why():
    m = RegressionModel(data_model=DataModel(dataset="ring", mechanism="mcar", rate=0.2), n_components=2)
    m.target_column = "x"
    r = m.readouts()
    assert r.columns is None and r.curve is None and r.comparison is None and r.finished
    assert "same column" in r.error


def test_a_comparison_is_shared_by_equal_requests(ring):
    from explorer.ui.state import regression_model

    request = ring.comparison_request()
    other = RegressionModel(data_model=DataModel(dataset="ring", mechanism="mcar", rate=0.2), n_components=6)
    assert other.comparison_request() == request and hash(other.comparison_request()) == hash(request)
    other.split_seed = 5
    assert other.comparison_request() != request
    assert not request.values.flags.writeable
    regression_model.cached_comparison.cache_clear()
    assert ring.compare() is ring.compare()  # computed once, then shared
    assert regression_model.cached_comparison.cache_info().misses == 1


def test_a_run_is_stepped_once_for_every_session(monkeypatch):
    """Two sessions on the same data, settings and seed share the states of their run (computed once); they are
    the states EM computes, and another seed is another run."""
    from explorer.core.mixtures import em_gmm
    from explorer.ui.state.regression_model import SharedRun

    def session():
        return RegressionModel(data_model=DataModel(dataset="ring", n_samples=120, mechanism="mcar", rate=0.3,
                                                    data_seed=7), n_components=3)

    a, b = session(), session()
    assert isinstance(a._CORE, SharedRun) and a._CORE is b._CORE
    a.run(10)
    steps = []
    step = em_gmm.step
    monkeypatch.setattr(em_gmm, "step", lambda *args: (steps.append(1), step(*args))[1])
    b.run(12)
    monkeypatch.undo()
    assert len(steps) == 2  # iterations 11 and 12: the first ten were read
    assert all(x is y for x, y in zip(a.states, b.states[:11]))
    state = a.states[0]
    for _ in range(12):
        state = em_gmm.step(state, b.em_data, b.config())
    np.testing.assert_array_equal(state.means, b.state.means)
    b.seed = 1
    assert b._CORE is not a._CORE and b.state is not a.states[0]
