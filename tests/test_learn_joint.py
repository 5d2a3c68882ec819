"""Tests of explorer.learn.joint: the scikit-learn layer over the joint-density EM models.

Oracles: GaussianMixtureClassifier(n_components=1) on complete labelled data is ML QDA (closed
form); GaussianMixtureRegressor with one component is ordinary least squares (scikit-learn's
LinearRegression) with Gaussian bands from scipy.stats.norm.ppf; the mixture CDF at a band's edges
is (1 -+ level) / 2; BernoulliMixtureClassifier with one component per class is BernoulliNB.
Properties: predict_proba rows sum to one with missing inputs, empty rows get the class prior,
Step/Play reaches the fitted state, unlabelled rows (-1 / NaN) are accepted, clone / Pipeline /
GridSearchCV work, scikit-learn's estimator checks pass but one (the -1 = unlabelled convention).
Bad input: clear errors with the messages checked.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.stats import multivariate_normal, norm
from sklearn.base import clone
from sklearn.linear_model import LinearRegression
from sklearn.model_selection import GridSearchCV
from sklearn.naive_bayes import BernoulliNB
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import check_estimator

from explorer.core.gaussians.mixture_regression import mixture_cdf, mixture_quantile, target_mixtures
from explorer.core.validation import BadInputError
from explorer.learn.joint import BernoulliMixtureClassifier, GaussianMixtureClassifier, GaussianMixtureRegressor


def blobs(seed=0, n_per=40, D=2):
    rng = np.random.default_rng(seed)
    centers = np.array([[0.0, 0.0], [4.0, 0.0], [0.0, 4.0]])[:, :D]
    X = np.vstack([c + rng.normal(size=(n_per, D)) @ np.array([[1.0, 0.3], [0.0, 0.8]])[:D, :D] for c in centers])
    y = np.repeat(np.arange(3), n_per)
    return X, y


# ============================================================================ classifier
def test_classifier_on_complete_data_is_ml_qda():
    X, y = blobs()
    clf = GaussianMixtureClassifier(reg_covar=0.0, tol=1e-12).fit(X, y)
    logp = []
    for c in range(3):
        Xc = X[y == c]
        d = Xc - Xc.mean(axis=0)
        logp.append(np.log(Xc.shape[0] / X.shape[0])
                    + multivariate_normal(Xc.mean(axis=0), d.T @ d / Xc.shape[0]).logpdf(X))
    logp = np.array(logp).T
    expected = np.exp(logp - logp.max(axis=1, keepdims=True))
    expected /= expected.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(clf.predict_proba(X), expected, atol=1e-10)
    np.testing.assert_array_equal(clf.predict(X), expected.argmax(axis=1))
    assert clf.score(X, y) == np.mean(expected.argmax(axis=1) == y)
    np.testing.assert_allclose(clf.predict_log_proba(X), np.log(expected), atol=1e-8)


def test_probabilities_sum_to_one_with_missing_inputs_and_labels():
    X, y = blobs(1)
    rng = np.random.default_rng(1)
    Xm = X.copy()
    Xm[rng.random(X.shape) < 0.3] = np.nan
    yl = y.astype(float)
    yl[rng.random(y.size) < 0.3] = np.nan
    yl[:5] = -1
    for structure, K in (("per_class", 1), ("joint", 4)):
        clf = GaussianMixtureClassifier(n_components=K, structure=structure, random_state=0).fit(Xm, yl)
        np.testing.assert_array_equal(clf.classes_, [0.0, 1.0, 2.0])
        Q = Xm.copy()
        Q[0] = np.nan
        p = clf.predict_proba(Q)
        np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-12)
        np.testing.assert_allclose(p[0], clf.weights_ @ clf.class_probs_, atol=1e-12)  # class prior
        assert np.all(np.isfinite(clf.predict_log_proba(Q)))
        assert clf.score(X, y) > 0.85


def test_string_labels_and_dataframe_input():
    pd = pytest.importorskip("pandas")
    X, y = blobs(2)
    names = np.array(["setosa", "versicolor", "virginica"])[y].astype(object)
    names[:4] = None  # unlabelled
    df = pd.DataFrame(X, columns=["a", "b"])
    clf = GaussianMixtureClassifier(random_state=0).fit(df, names)
    assert list(clf.classes_) == ["setosa", "versicolor", "virginica"]
    assert set(clf.predict(df)) <= set(clf.classes_)
    with pytest.raises(BadInputError, match="columns"):
        clf.predict(df.rename(columns={"a": "z"}))


def test_start_and_step_reach_the_fitted_state():
    X, y = blobs(3)
    Xm = X.copy()
    Xm[::4, 0] = np.nan
    fitted = GaussianMixtureClassifier(n_components=2, max_iter=12, tol=0.0, random_state=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted.fit(Xm, y)
    stepped = GaussianMixtureClassifier(n_components=2, max_iter=12, tol=0.0, random_state=5).start(Xm, y)
    assert stepped.n_iter_ == 0 and len(stepped.fit_path_) == 1
    objs = [stepped.objective_]
    for _ in range(12):
        objs.append(stepped.step().objective_)
    assert stepped.n_iter_ == 12 and len(stepped.fit_path_) == 13
    assert np.all(np.diff(objs) >= -1e-9)
    np.testing.assert_allclose(stepped.means_, fitted.means_, atol=1e-12)
    np.testing.assert_allclose(stepped.predict_proba(Xm), fitted.predict_proba(Xm), atol=1e-12)
    with pytest.raises(BadInputError, match="n_steps must be a positive integer"):
        stepped.step(0)


def test_clone_pipeline_and_grid_search():
    X, y = blobs(4)
    Xm = X.copy()
    Xm[::5, 1] = np.nan
    clf = GaussianMixtureClassifier(n_components=1, random_state=0)
    assert clone(clf).get_params() == clf.get_params()
    pipe = make_pipeline(StandardScaler(), clf).fit(Xm, y)
    assert pipe.score(Xm, y) > 0.85
    grid = GridSearchCV(clf, {"covariance_type": ["full", "diag"]}, cv=3).fit(Xm, y)
    assert grid.best_params_["covariance_type"] in ("full", "diag")


def test_scikit_learn_checks_pass_except_the_unlabelled_convention():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for est in (GaussianMixtureClassifier(max_iter=20, random_state=0),
                    GaussianMixtureRegressor(max_iter=20, random_state=0)):
            results = check_estimator(est, on_fail=None)
            failed = {r["check_name"] for r in results if r["status"] == "failed"}
            assert len(results) > 40
            # labels {-1, 1}: -1 means "unlabelled" here (scikit-learn's semi-supervised convention)
            expected = {"check_classifiers_classes"} if isinstance(est, GaussianMixtureClassifier) else set()
            assert failed == expected, failed


# ============================================================================ regressor
def _linear_data(seed=0, n=200):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2)) @ np.array([[1.0, 0.5], [0.0, 1.0]])
    y = 1.5 + X @ np.array([2.0, -1.0]) + 0.5 * rng.normal(size=n)
    return X, y


def test_regressor_k1_is_least_squares_with_gaussian_bands():
    X, y = _linear_data()
    reg = GaussianMixtureRegressor(reg_covar=0.0, tol=1e-12).fit(X, y)
    ols = LinearRegression().fit(X, y)
    Xq = np.random.default_rng(9).normal(size=(7, 2))
    np.testing.assert_allclose(reg.predict(Xq), ols.predict(Xq), atol=1e-10)
    # residual variance of the ML fit: mean squared residual
    s = np.sqrt(np.mean((y - ols.predict(X)) ** 2))
    lo, hi = reg.predict_interval(Xq, level=0.9)
    np.testing.assert_allclose(lo, ols.predict(Xq) + norm.ppf(0.05) * s, atol=1e-8)
    np.testing.assert_allclose(hi, ols.predict(Xq) + norm.ppf(0.95) * s, atol=1e-8)
    # a missing input is marginalised: the regression on the other input alone
    Xh = np.c_[Xq[:, 0], np.full(7, np.nan)]
    ols1 = LinearRegression().fit(X[:, :1], y)
    np.testing.assert_allclose(reg.predict(Xh), ols1.predict(Xq[:, :1]), atol=1e-10)
    # targets= form: the same model with y as column 2 of X
    reg2 = GaussianMixtureRegressor(targets=2, reg_covar=0.0, tol=1e-12).fit(np.c_[X, y])
    np.testing.assert_allclose(reg2.predict(np.c_[Xq, np.full(7, np.nan)]), ols.predict(Xq), atol=1e-10)
    # memory layout does not matter (column slices of C arrays and DataFrames are Fortran-ordered)
    np.testing.assert_allclose(reg2.predict(np.asfortranarray(np.c_[Xq, np.zeros(7)])), ols.predict(Xq), atol=1e-10)
    np.testing.assert_allclose(reg.predict(np.asfortranarray(Xq)), ols.predict(Xq), atol=1e-10)


def test_mixture_bands_are_quantiles_of_the_conditional_mixture():
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, 400)
    y = np.where(rng.random(400) < 0.5, 1.0, -1.0) * (0.3 + x**2) + 0.1 * rng.normal(size=400)  # two branches
    y[rng.random(400) < 0.2] = np.nan  # unlabelled targets
    reg = GaussianMixtureRegressor(n_components=4, random_state=0, n_init=2).fit(x[:, None], y)
    Xq = np.linspace(-0.9, 0.9, 9)[:, None]
    for level in (0.5, 0.9):
        lo, hi = reg.predict_interval(Xq, level=level)
        w, m, s = target_mixtures(reg._conditional(Xq))
        np.testing.assert_allclose(mixture_cdf(w, m[:, 0], s[:, 0], lo), (1 - level) / 2, atol=1e-10)
        np.testing.assert_allclose(mixture_cdf(w, m[:, 0], s[:, 0], hi), (1 + level) / 2, atol=1e-10)
        assert np.all(lo < reg.predict(Xq)) and np.all(reg.predict(Xq) < hi)
    # K = 1 quantile solver against scipy
    np.testing.assert_allclose(mixture_quantile([[1.0]], [[0.3]], [[2.0]], 0.8), 0.3 + 2.0 * norm.ppf(0.8),
                               atol=1e-12)
    # the conditional density is bimodal at x = 0.8 (two branches) and integrates to one
    grid = np.linspace(-3, 3, 2001)
    dens = reg.conditional_density([0.8], grid)
    np.testing.assert_allclose(np.trapezoid(dens, grid), 1.0, atol=1e-4)
    peaks = np.flatnonzero((dens[1:-1] > dens[:-2]) & (dens[1:-1] > dens[2:]) & (dens[1:-1] > 0.1 * dens.max()))
    assert peaks.size == 2 and grid[peaks[0] + 1] < 0 < grid[peaks[1] + 1]
    # the least-squares estimate falls between the modes; the draws stay on them
    draws = reg.sample(np.array([[0.8]]), n_draws=400, random_state=3)[:, 0]
    assert draws.shape == (400,)
    assert abs(reg.predict([[0.8]])[0]) < 0.4 < np.median(np.abs(draws))
    np.testing.assert_allclose(draws.mean(), reg.predict([[0.8]])[0], atol=4 * draws.std() / 20)


def test_sample_estimate_is_reproducible_and_shapes_follow_y():
    X, y = _linear_data(2, 120)
    Y = np.c_[y, -y + 0.1 * np.random.default_rng(0).normal(size=120)]
    reg = GaussianMixtureRegressor(n_components=2, estimate="sample", random_state=4).fit(X, Y)
    a, b = reg.predict(X[:5]), reg.predict(X[:5])
    assert a.shape == (5, 2)
    np.testing.assert_array_equal(a, b)
    assert reg.sample(X[:5], n_draws=3, random_state=0).shape == (3, 5, 2)
    assert reg.conditional_density(X[0], np.linspace(-5, 5, 11)).shape == (2, 11)
    lo, hi = reg.predict_interval(X[:5])
    assert lo.shape == hi.shape == (5, 2) and np.all(lo < hi)


# ============================================================================ Bernoulli classifier
def test_bernoulli_classifier_is_naive_bayes_on_complete_data():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 200)
    P = np.array([[0.9, 0.8, 0.2, 0.1], [0.2, 0.3, 0.7, 0.9]])
    X = (rng.random((200, 4)) < P[y]).astype(float)
    clf = BernoulliMixtureClassifier(pseudo_count=1.0, tol=1e-12).fit(X, y)
    nb = BernoulliNB(alpha=1.0).fit(X, y)
    np.testing.assert_allclose(clf.predict_proba(X), nb.predict_proba(X), atol=1e-12)
    Xm = X.copy()
    Xm[rng.random(X.shape) < 0.3] = np.nan
    yl = y.copy()
    yl[::3] = -1
    clf2 = BernoulliMixtureClassifier(n_components=2, structure="joint", random_state=0).fit(Xm, yl)
    np.testing.assert_allclose(clf2.predict_proba(Xm).sum(axis=1), 1.0, atol=1e-12)
    assert clf2.score(X, y) > 0.75


# ============================================================================ bad input
def test_bad_input_gives_clear_errors():
    X, y = blobs(5)
    with pytest.raises(BadInputError, match="inf"):
        GaussianMixtureClassifier().fit(np.r_[X[:-1], [[np.inf, 0.0]]], y)
    with pytest.raises(BadInputError, match="numeric|number"):
        GaussianMixtureClassifier().fit(np.c_[X, np.array(["a"] * len(X), dtype=object)], y)
    with pytest.raises(BadInputError, match="at least two"):
        GaussianMixtureClassifier().fit(X, np.zeros(len(X), dtype=int))
    with pytest.raises(BadInputError, match="at least 2 rows"):
        GaussianMixtureClassifier().fit(X[:1], y[:1])
    with pytest.raises(BadInputError, match="requires y to be passed"):
        GaussianMixtureClassifier().fit(X, None)
    with pytest.raises(BadInputError, match="Unknown label type: continuous"):
        GaussianMixtureClassifier().fit(X, np.linspace(0, 1, len(X)))
    with pytest.raises(BadInputError, match="structure must be one of"):
        GaussianMixtureClassifier(structure="tied").fit(X, y)
    with pytest.raises(BadInputError, match="n_components must be a positive integer"):
        GaussianMixtureClassifier(n_components=0).fit(X, y)
    y_bad = y.copy()
    y_bad[y == 2] = -1
    y_bad[-1] = 2  # one labelled row of class 2
    with pytest.raises(BadInputError, match="Class 2 has 1 labelled row"):
        GaussianMixtureClassifier().fit(X, y_bad)
    clf = GaussianMixtureClassifier().fit(X, y)
    with pytest.raises(BadInputError, match="X has 3 features, but GaussianMixtureClassifier is expecting 2"):
        clf.predict(np.zeros((2, 3)))
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        GaussianMixtureClassifier().predict(X)
    Xr, yr = _linear_data()
    with pytest.raises(BadInputError, match="estimate must be 'mean' or 'sample'"):
        GaussianMixtureRegressor(estimate="median").fit(Xr, yr)
    with pytest.raises(BadInputError, match="either y or targets"):
        GaussianMixtureRegressor(targets=0).fit(Xr, yr)
    with pytest.raises(BadInputError, match="targets must be distinct column indices"):
        GaussianMixtureRegressor(targets=[5]).fit(Xr)
    with pytest.raises(BadInputError, match="y has 3 rows but X has 200"):
        GaussianMixtureRegressor().fit(Xr, np.zeros((3, 2)))
    reg = GaussianMixtureRegressor().fit(Xr, yr)
    with pytest.raises(BadInputError, match="level must be a number strictly between 0 and 1"):
        reg.predict_interval(Xr, level=1.5)
    with pytest.raises(BadInputError, match="X_row must be one row"):
        reg.conditional_density(Xr[:2], np.linspace(0, 1, 3))
    with pytest.raises(BadInputError, match="grid must be a non-empty array"):
        reg.conditional_density(Xr[0], [])
    with pytest.raises(BadInputError, match="n_draws must be a positive integer"):
        reg.sample(Xr, n_draws=0)
    with pytest.raises(BadInputError, match="must be binary"):
        BernoulliMixtureClassifier().fit(X, y)
    with pytest.raises(BadInputError, match="structure must be 'per_class' or 'joint'"):
        BernoulliMixtureClassifier(structure="unsupervised").fit((X > 0).astype(float), y)
