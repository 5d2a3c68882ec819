"""Tests of explorer.impute.gaussian_mixture: the scikit-learn API of GaussianMixtureImputer, what its methods
compute (checked against explorer.core and against formulas written out here), and amputate()."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.stats import multivariate_normal
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LinearRegression
from sklearn.pipeline import make_pipeline

from explorer.core.gaussians.conditional import ConditionalMixture
from explorer.core.gaussians.conditional_t import StudentTConditionalMixture
from explorer.core.gaussians.gaussian import DegenerateCovarianceError
from explorer.core.mixtures import em_gmm
from explorer.core.mixtures.em_gmm import ConvergenceWarning
from explorer.core.validation import BadInputError
from explorer.impute.gaussian_mixture import GaussianMixtureImputer
from explorer.masking import amputate

PARAMS = {
    "n_components": "auto", "covariance_type": "full", "reg_covar": 1e-6, "tol": 1e-5, "max_iter": 300,
    "init": "kmeans", "n_init": 1, "variant": "em", "prior": "auto", "prior_shrinkage": "auto", "predictive": "auto",
    "n_posterior_draws": 20,
    "empty_rows": "raise", "random_state": None,
    "callback": None, "progress": False,
}


def _mixture(seed=0, n=300, D=3, K=2):
    rng = np.random.default_rng(seed)
    centers = rng.normal(scale=4.0, size=(K, D))
    A = rng.normal(size=(K, D, D)) / np.sqrt(D) + np.eye(D)
    labels = rng.integers(K, size=n)
    return centers[labels] + np.einsum("nij,nj->ni", A[labels], rng.normal(size=(n, D)))


@pytest.fixture(scope="module")
def data():
    """(complete, incomplete, missing) from a 2-component mixture in 3-D, 25 % MCAR."""
    X = _mixture()
    X_nan, missing = amputate(X, "mcar", rate=0.25, random_state=1)
    X_nan[missing.all(axis=1)] = X[missing.all(axis=1)]  # no empty rows here
    missing = np.isnan(X_nan)
    return X, X_nan, missing


@pytest.fixture(scope="module")
def fitted(data):
    return GaussianMixtureImputer(n_components=2, random_state=0).fit(data[1])


# ----------------------------------------------------------------------------- sklearn API
def test_params_are_stored_untouched_and_clone_works():
    imp = GaussianMixtureImputer()
    assert imp.get_params() == PARAMS
    gen = np.random.default_rng(3)
    imp = GaussianMixtureImputer(n_components=0, variant="nonsense", random_state=gen)  # no validation here
    assert imp.get_params()["n_components"] == 0 and imp.get_params()["random_state"] is gen
    imp2 = GaussianMixtureImputer(n_components=3, covariance_type="diag", random_state=5)
    c = clone(imp2)
    assert c is not imp2 and c.get_params() == imp2.get_params()
    assert imp2.set_params(n_components=4, empty_rows="marginal") is imp2
    assert imp2.n_components == 4 and imp2.empty_rows == "marginal"
    with pytest.raises(ValueError, match="Invalid parameter"):
        imp2.set_params(n_component=2)


def test_fit_sets_sklearn_attributes_and_keeps_params(data, fitted):
    X, X_nan, missing = data
    gen = np.random.default_rng(0)
    imp = GaussianMixtureImputer(n_components=2, covariance_type="diag", random_state=gen)
    before = imp.get_params()
    assert imp.fit(X_nan) is imp
    assert imp.get_params() == before and imp.random_state is gen
    K, D = 2, X.shape[1]
    assert imp.n_features_in_ == D and not hasattr(imp, "feature_names_in_")
    assert imp.weights_.shape == (K,) and imp.means_.shape == (K, D) and imp.covariances_.shape == (K, D)
    assert fitted.covariances_.shape == (K, D, D)
    assert fitted.weights_.sum() == pytest.approx(1.0)
    assert fitted.converged_ and fitted.stop_reason_ == "tol" and fitted.n_iter_ > 0
    # the recorded log-likelihood is that of the fitted parameters on the training data
    assert fitted.log_likelihood_ == pytest.approx(fitted.score_samples(X_nan).sum(), rel=1e-10)
    h = fitted.history_
    assert h.sizes["iteration"] == fitted.n_iter_ + 1 and h.sizes["component"] == K
    assert h.attrs["stop_reason"] == "tol"
    np.testing.assert_allclose(h["means"].isel(iteration=-1).values, fitted.means_)
    assert h["log_likelihood"].values[-1] == pytest.approx(fitted.log_likelihood_)
    # two components recover the two clusters: far better than one Gaussian
    one = GaussianMixtureImputer(n_components=1, random_state=0).fit(X_nan)
    assert fitted.log_likelihood_ > one.log_likelihood_ + 50


def test_fit_matches_core_em(data, fitted):
    """The estimator is a thin wrapper: same seed, same result as em_gmm.fit."""
    _, X_nan, _ = data
    res = em_gmm.fit(em_gmm.prepare(X_nan), em_gmm.EMConfig(n_components=2, prior="auto"), np.random.default_rng(0))
    np.testing.assert_array_equal(fitted.means_, res.state.means)
    np.testing.assert_array_equal(fitted.covariances_, res.state.covariances)
    assert fitted.n_iter_ == res.n_iter


def test_random_state_gives_determinism(data):
    _, X_nan, _ = data
    kw = dict(n_components=3, init="random", n_init=2, max_iter=30)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a = GaussianMixtureImputer(random_state=7, **kw).fit(X_nan)
        b = GaussianMixtureImputer(random_state=7, **kw).fit(X_nan)
        c = GaussianMixtureImputer(random_state=np.random.default_rng(7), **kw).fit(X_nan)
    np.testing.assert_array_equal(a.means_, b.means_)
    np.testing.assert_array_equal(a.means_, c.means_)  # an int seeds default_rng


def test_pipeline_with_linear_regression():
    """Imputer + LinearRegression in a Pipeline, on a regression problem with correlated features."""
    rng = np.random.default_rng(0)
    n = 300
    Z = rng.normal(size=(n, 2))
    X = np.column_stack([
        Z[:, 0], 0.9 * Z[:, 0] + 0.3 * rng.normal(size=n),
        Z[:, 1], 0.8 * Z[:, 1] - 0.4 * Z[:, 0] + 0.3 * rng.normal(size=n),
    ])
    y = X @ np.array([2.0, -1.0, 1.5, 1.0]) + 0.5 * rng.normal(size=n)
    X_nan, missing = amputate(X, "mcar", rate=0.2, random_state=2)
    keep = ~missing.all(axis=1)
    X_nan, y = X_nan[keep], y[keep]
    pipe = make_pipeline(GaussianMixtureImputer(random_state=0), LinearRegression()).fit(X_nan, y)
    r2 = pipe.score(X_nan, y)
    imp = GaussianMixtureImputer(random_state=0)
    filled = imp.fit_transform(X_nan)
    np.testing.assert_allclose(pipe.predict(X_nan), LinearRegression().fit(filled, y).predict(filled))
    mean_pipe = make_pipeline(GaussianMixtureImputer(variant="mean_impute", random_state=0), LinearRegression())
    assert r2 > 0.83  # 0.955 on the complete data
    assert r2 > mean_pipe.fit(X_nan, y).score(X_nan, y) + 0.05  # conditional means beat column means
    pipe_clone = clone(pipe)
    assert pipe_clone.get_params()["gaussianmixtureimputer__random_state"] == 0


def test_fit_transform_equals_fit_then_transform(data):
    _, X_nan, _ = data
    a = GaussianMixtureImputer(n_components=2, random_state=3).fit_transform(X_nan)
    b = GaussianMixtureImputer(n_components=2, random_state=3).fit(X_nan).transform(X_nan)
    np.testing.assert_array_equal(a, b)


# ----------------------------------------------------------------------------- transform and friends
@pytest.mark.parametrize("covariance_type", ["full", "diag"])
def test_transform_keeps_observed_entries_and_fills_every_nan(data, covariance_type):
    X, X_nan, missing = data
    imp = GaussianMixtureImputer(n_components=2, covariance_type=covariance_type, random_state=0).fit(X_nan)
    X_in = X_nan.copy()
    out = imp.transform(X_in)
    np.testing.assert_array_equal(X_in, X_nan, strict=True)  # input not modified
    assert out.shape == X.shape and not np.isnan(out).any()
    assert out[~missing].tobytes() == X_nan[~missing].tobytes()  # bit for bit
    # the conditional mean is the right quantity: it matches the core's E-step imputation
    # with the default prior transform is the mean at the fit whatever the predictive: the Student-t posterior
    # predictive's for full covariances, the plug-in Gaussians' for diag (conditional() pools the posterior draws)
    point = "student_t" if covariance_type == "full" else "gaussian"
    same_fit = GaussianMixtureImputer(n_components=2, covariance_type=covariance_type, predictive=point,
                                      random_state=0).fit(X_nan)
    np.testing.assert_array_equal(same_fit.means_, imp.means_)
    mix = same_fit.conditional(X_nan)
    assert isinstance(mix, StudentTConditionalMixture if covariance_type == "full" else ConditionalMixture)
    np.testing.assert_array_equal(out, mix.mean())
    assert imp.predictive_ == "draws" and imp.conditional(X_nan).n_components == 2 * imp.n_posterior_draws
    # and it beats the column means on the hidden values
    rmse = np.sqrt(np.mean((out - X)[missing] ** 2))
    col = np.where(missing, np.nanmean(X_nan, axis=0), X_nan)
    assert rmse < 0.9 * np.sqrt(np.mean((col - X)[missing] ** 2))


def test_transform_single_row_and_unseen_patterns(fitted):
    row = np.array([[np.nan, 0.5, np.nan]])
    out = fitted.transform(row)
    assert out.shape == (1, 3) and out[0, 1] == 0.5 and not np.isnan(out).any()
    complete = np.array([[1.0, 2.0, 3.0]])
    np.testing.assert_array_equal(fitted.transform(complete), complete)


def test_mean_impute_variant_returns_column_means(data):
    _, X_nan, missing = data
    imp = GaussianMixtureImputer(variant="mean_impute", n_components=2, random_state=0).fit(X_nan)
    out = imp.transform(X_nan)
    means = np.nanmean(X_nan, axis=0)
    np.testing.assert_allclose(out[missing], np.broadcast_to(means, out.shape)[missing], rtol=1e-15)
    np.testing.assert_array_equal(out[~missing], X_nan[~missing])


def test_sample_shapes_variation_and_consistency(data, fitted):
    _, X_nan, missing = data
    S = fitted.sample(X_nan, n_imputations=4, random_state=5)
    assert S.shape == (4,) + X_nan.shape and not np.isnan(S).any()
    for s in S:
        assert s[~missing].tobytes() == X_nan[~missing].tobytes()
    assert np.all(np.std(S[:, missing], axis=0) > 0)  # every missing entry varies between draws
    np.testing.assert_array_equal(S, fitted.sample(X_nan, n_imputations=4, random_state=5))
    assert not np.array_equal(S, fitted.sample(X_nan, n_imputations=4, random_state=6))
    assert fitted.sample(X_nan[:3]).shape == (5, 3, 3)  # default n_imputations
    # the draws are centred on the conditional mean, with the conditional variance
    rows = X_nan[:20]
    many = fitted.sample(rows, n_imputations=4000, random_state=0)
    mix = fitted.conditional(rows)
    m = np.isnan(rows)
    se = np.sqrt(mix.variance()[m] / 4000)
    assert np.all(np.abs(many.mean(axis=0)[m] - mix.mean()[m]) < 5 * se + 1e-12)
    np.testing.assert_allclose(many.var(axis=0)[m], mix.variance()[m], rtol=0.15)


@pytest.mark.parametrize("covariance_type", ["full", "diag"])
def test_score_samples_equals_core_observed_log_likelihood(data, covariance_type):
    _, X_nan, _ = data
    imp = GaussianMixtureImputer(n_components=2, covariance_type=covariance_type, random_state=0).fit(X_nan)
    ll = imp.score_samples(X_nan)
    core = em_gmm.observed_log_likelihood(
        em_gmm.prepare(X_nan), imp.weights_, imp.means_, imp.covariances_, covariance_type
    )
    assert ll.shape == (X_nan.shape[0],)
    np.testing.assert_allclose(ll, core, rtol=1e-12, atol=1e-12)
    assert imp.score(X_nan) == pytest.approx(ll.mean())
    # written out for one row with two observed values: log sum_k pi_k N(x_o; mu_k^o, Sigma_k^oo)
    i = int(np.flatnonzero(np.isnan(X_nan).sum(axis=1) == 1)[0])
    o = ~np.isnan(X_nan[i])
    cov = imp.covariances_ if covariance_type == "full" else np.stack([np.diag(c) for c in imp.covariances_])
    dens = sum(w * multivariate_normal(mu[o], c[np.ix_(o, o)]).pdf(X_nan[i, o])
               for w, mu, c in zip(imp.weights_, imp.means_, cov))
    assert ll[i] == pytest.approx(np.log(dens), rel=1e-10)


def test_predict_is_the_eq13_convex_combination(data):
    X, _, _ = data
    imp = GaussianMixtureImputer(n_components=2, random_state=0).fit(X)
    inputs, targets = [0], [2]  # column 1 is marginalised out
    Xq = X[:50].copy()
    Xq[:, 1] = np.nan  # ignored
    pred = imp.regress(Xq, inputs=inputs, targets=targets)
    assert pred.shape == (50, 1)
    # eq. 13 written out with dense linear algebra
    i, t = np.array(inputs), np.array(targets)
    h = np.column_stack([
        w * multivariate_normal(mu[i], c[np.ix_(i, i)]).pdf(Xq[:, i])
        for w, mu, c in zip(imp.weights_, imp.means_, imp.covariances_)
    ])
    h /= h.sum(axis=1, keepdims=True)
    per_k = np.stack([
        mu[t] + (c[np.ix_(t, i)] @ np.linalg.solve(c[np.ix_(i, i)], (Xq[:, i] - mu[i]).T)).T
        for mu, c in zip(imp.means_, imp.covariances_)
    ])  # (K, n, 1)
    expected = np.einsum("nk,knt->nt", h, per_k)
    np.testing.assert_allclose(pred, expected, rtol=1e-9, atol=1e-9)
    assert np.all(pred >= per_k.min(axis=0) - 1e-12) and np.all(pred <= per_k.max(axis=0) + 1e-12)
    # passing only the input columns gives the same answer
    np.testing.assert_allclose(imp.regress(Xq[:, inputs], inputs=inputs, targets=targets), pred, rtol=1e-14)
    np.testing.assert_allclose(imp.regress(Xq[:, 0], inputs=0, targets=2), pred, rtol=1e-14)
    # a missing input is marginalised: with nothing observed the prediction is the marginal mean
    nothing = imp.regress(np.full((2, 1), np.nan), inputs=[0], targets=[1, 2])
    np.testing.assert_allclose(nothing, np.broadcast_to(imp.weights_ @ imp.means_[:, 1:], (2, 2)), rtol=1e-12)
    with pytest.raises(BadInputError, match="both an input and a target"):
        imp.regress(X[:5], inputs=[0, 1], targets=[1])
    with pytest.raises(BadInputError, match="either all 3 features or only"):
        imp.regress(X[:5, :2], inputs=[0], targets=[2])


def test_dataframe_input_keeps_feature_names(data):
    _, X_nan, missing = data
    df = pd.DataFrame(X_nan, columns=["a", "b", "c"], index=np.arange(100, 100 + len(X_nan)))
    imp = GaussianMixtureImputer(n_components=2, random_state=0).fit(df)
    np.testing.assert_array_equal(imp.feature_names_in_, ["a", "b", "c"])
    out = imp.transform(df)  # a DataFrame in, a DataFrame out (index and columns kept)
    assert isinstance(out, pd.DataFrame) and out.index.equals(df.index) and list(out.columns) == ["a", "b", "c"]
    np.testing.assert_array_equal(out.to_numpy(), GaussianMixtureImputer(n_components=2, random_state=0).fit(X_nan).transform(X_nan))
    assert list(imp.history_["feature"].values) == ["a", "b", "c"]
    np.testing.assert_array_equal(imp.get_feature_names_out(), ["a", "b", "c"])
    imp.set_output(transform="pandas")
    out_df = imp.transform(df)
    assert isinstance(out_df, pd.DataFrame) and list(out_df.columns) == ["a", "b", "c"]
    assert list(out_df.index) == list(df.index)
    pred = imp.regress(df, inputs=["a"], targets=["c"])
    np.testing.assert_allclose(pred, imp.regress(X_nan, inputs=[0], targets=[2]))
    with pytest.raises(BadInputError, match="fitted on \\['a', 'b', 'c'\\]"):
        imp.transform(df[["b", "a", "c"]])
    with pytest.raises(BadInputError, match="Unknown column 'z'"):
        imp.regress(df, inputs=["z"], targets=["c"])
    # refitting on an array forgets the names
    assert not hasattr(imp.fit(X_nan), "feature_names_in_")


# ----------------------------------------------------------------------------- policies and errors
def test_empty_rows_policy(data):
    _, X_nan, _ = data
    Xe = np.vstack([X_nan, np.full((2, 3), np.nan)])
    with pytest.raises(BadInputError, match="2 row\\(s\\) have every value missing.*empty_rows='marginal'"):
        GaussianMixtureImputer().fit(Xe)
    imp = GaussianMixtureImputer(n_components=2, empty_rows="marginal", random_state=0).fit(Xe)
    ref = GaussianMixtureImputer(n_components=2, random_state=0).fit(X_nan)
    np.testing.assert_allclose(imp.means_, ref.means_, rtol=1e-12)  # empty rows do not inform the fit
    out = imp.transform(Xe)
    np.testing.assert_allclose(out[-2:], np.broadcast_to(imp.weights_ @ imp.means_, (2, 3)), rtol=1e-12)
    assert np.all(imp.score_samples(Xe)[-2:] == 0.0)
    assert imp.sample(Xe, 2, random_state=0).shape == (2, len(Xe), 3)
    with pytest.raises(BadInputError, match="every value missing"):
        ref.transform(Xe)
    with pytest.raises(BadInputError, match="every value missing"):
        ref.sample(Xe)
    with pytest.raises(BadInputError, match="empty_rows must be one of"):
        GaussianMixtureImputer(empty_rows="drop").fit(X_nan)


@pytest.mark.parametrize("method", ["transform", "sample", "score_samples", "score", "conditional"])
def test_not_fitted_error(method):
    with pytest.raises(NotFittedError):
        getattr(GaussianMixtureImputer(), method)(np.zeros((3, 2)))


def test_regress_not_fitted():
    with pytest.raises(NotFittedError):
        GaussianMixtureImputer().regress(np.zeros((3, 2)), inputs=[0], targets=[1])


@pytest.mark.parametrize("method", ["transform", "sample", "score_samples", "conditional"])
def test_wrong_number_of_features(fitted, method):
    with pytest.raises(BadInputError, match="X has 4 features, but GaussianMixtureImputer is expecting 3 features"):
        getattr(fitted, method)(np.zeros((3, 4)))


@pytest.mark.parametrize(
    "X, match",
    [
        (np.array([["a", 1.0], [2.0, 3.0], [1.0, 2.0]], dtype=object), "non-numeric values in column 0"),
        (np.array([[np.inf, 1.0], [2.0, 3.0], [1.0, 2.0]]), "infinite"),
        (np.array([[1.0, np.nan], [2.0, np.nan], [3.0, np.nan]]), "column 1 has no observed value"),
        (np.arange(5.0), "2-D"),
    ],
)
def test_fit_rejects_bad_data(X, match):
    with pytest.raises(BadInputError, match=match):
        GaussianMixtureImputer().fit(X)


def test_fit_rejects_bad_dataframe_with_the_column_name():
    df = pd.DataFrame({"age": [1.0, 2.0, 3.0], "city": ["x", "y", "z"]})
    with pytest.raises(BadInputError, match="'city' \\(column 1\\)"):
        GaussianMixtureImputer().fit(df)


@pytest.mark.parametrize(
    "params, match",
    [
        (dict(n_components=0), "n_components"),
        (dict(covariance_type="tied"), "covariance_type"),
        (dict(variant="hard"), "variant"),
        (dict(random_state="seed"), "random_state must be None, a non-negative int"),
        (dict(random_state=np.random.RandomState(0)), "RandomState is not supported"),
        (dict(n_components=500), "larger than the number of rows"),
    ],
)
def test_fit_rejects_bad_parameters(data, params, match):
    with pytest.raises(BadInputError, match=match):
        GaussianMixtureImputer(**params).fit(data[1])


def test_sparse_input_is_rejected(fitted):
    from scipy import sparse

    with pytest.raises(TypeError, match="Sparse input is not supported"):
        GaussianMixtureImputer().fit(sparse.csr_matrix(np.eye(3)))
    with pytest.raises(TypeError, match="Sparse input"):
        fitted.transform(sparse.csr_matrix(np.eye(3)))


def test_max_iter_warns_once(data):
    _, X_nan, _ = data
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        imp = GaussianMixtureImputer(n_components=2, max_iter=2, tol=1e-12, random_state=0).fit(X_nan)
    conv = [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert len(conv) == 1 and "max_iter=2" in str(conv[0].message)
    assert conv[0].filename == __file__  # points at the caller's line
    assert not imp.converged_ and imp.stop_reason_ == "max_iter" and imp.n_iter_ == 2


def test_collapse_raises_instead_of_returning_garbage():
    X = np.repeat(np.array([[0.0, 0.0], [5.0, 0.0], [0.0, 5.0]]), 5, axis=0)
    with pytest.raises(DegenerateCovarianceError, match="reg_covar"):
        GaussianMixtureImputer(n_components=3, reg_covar=0.0, prior=None, random_state=0).fit(X)


def test_degenerate_stop_midway_raises(monkeypatch):
    """If EM stops on a collapsed component after some iterations, fit raises (no half-fitted model)."""
    points = np.array([[0.0, 0.0], [5.0, 0.0], [0.0, 5.0]])
    X = np.repeat(points, 5, axis=0)
    real_fit = em_gmm.fit

    def fit_from_a_valid_start(data, config, rng, **kw):
        start = em_gmm.init_from_parameters(data, config, np.ones(3) / 3, points + 0.1, np.stack([np.eye(2)] * 3))
        return real_fit(data, config, rng, init_state=start, **kw)

    monkeypatch.setattr(em_gmm, "fit", fit_from_a_valid_start)
    imp = GaussianMixtureImputer(n_components=3, reg_covar=0.0, prior=None)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)  # the error replaces the warning
        with pytest.raises(DegenerateCovarianceError, match="EM stopped after 1 iteration.*singular"):
            imp.fit(X)
    assert not hasattr(imp, "means_")


# ----------------------------------------------------------------------------- amputate
def test_amputate_rates_and_no_mutation():
    X = np.random.default_rng(0).normal(size=(2000, 5))
    X0 = X.copy()
    X_nan, missing = amputate(X, "mcar", rate=0.3, random_state=4)
    np.testing.assert_array_equal(X, X0, strict=True)
    assert missing.dtype == bool and missing.shape == X.shape and missing.flags.writeable
    assert abs(missing.mean() - 0.3) < 0.015
    np.testing.assert_array_equal(np.isnan(X_nan), missing)
    np.testing.assert_array_equal(X_nan[~missing], X[~missing])
    X_nan2, missing2 = amputate(X, "mcar", rate=0.3, random_state=4)
    np.testing.assert_array_equal(missing, missing2)
    # a deterministic MAR rule realises the requested rate exactly
    _, miss_mar = amputate(X, "mar_threshold", rate=0.1, target=[3, 4], control=0)
    assert miss_mar.mean() == pytest.approx(0.1)
    assert not miss_mar[:, :3].any()
    assert np.all(X[miss_mar[:, 4], 0] > np.median(X[:, 0]))  # the rows with the largest control values
    _, none = amputate(X, "mcar", rate=0.0, random_state=0)
    assert not none.any()


def test_amputate_dataframe():
    df = pd.DataFrame({"a": np.arange(10, dtype=np.int64), "b": np.linspace(0, 1, 10)}, index=list("abcdefghij"))
    df0 = df.copy()
    out, missing = amputate(df, "mcar", rate=0.5, random_state=0, allow_empty=True)  # 2 columns: rows may empty
    pd.testing.assert_frame_equal(df, df0)
    assert isinstance(out, pd.DataFrame) and list(out.columns) == ["a", "b"] and list(out.index) == list(df.index)
    np.testing.assert_array_equal(out.isna().to_numpy(), missing)
    assert 0 < missing.sum() < 20
    np.testing.assert_array_equal(out.to_numpy()[~missing], df.to_numpy(dtype=float)[~missing])


def test_amputate_bad_input():
    X = np.ones((5, 2))
    with pytest.raises(BadInputError, match="Unknown missingness mechanism 'mcr'"):
        amputate(X, "mcr")
    with pytest.raises(BadInputError, match=r"every observed entry of 2 column\(s\).*largest rate"):
        amputate(np.array([[1.0, np.nan], [1.0, 2.0]]), rate=1.0)  # incomplete data are fine, empty columns not
    with pytest.raises(BadInputError, match="has no rate"):
        amputate(np.ones((4, 4)), "half", rate=0.5, image_shape=(2, 2))
    with pytest.raises(BadInputError, match="Unknown parameter"):
        amputate(X, "mcar", colour="red")
    with pytest.raises(BadInputError, match="random_state"):
        amputate(X, random_state=-1)


def test_imputer_is_not_a_predictor():
    """A transformer must not expose predict(): Pipeline/check_estimator would call it with X only."""
    assert not hasattr(GaussianMixtureImputer(), "predict")


def test_too_many_components_is_refused_before_the_prior_is_computed(monkeypatch):
    """Cheap checks first (issue 22): K against the rows before the prior's data moments (EM passes) run."""
    from explorer.core.mixtures import em_gmm

    def data_moments(*args, **kwargs):
        raise AssertionError("the prior's data moments ran before the number of components was checked")

    monkeypatch.setattr(em_gmm, "data_moments", data_moments)
    X = np.random.default_rng(0).standard_normal((30, 4))
    X[::3, 1] = np.nan
    with pytest.raises(BadInputError, match="n_components=50 is larger than the number of rows with observed data"):
        GaussianMixtureImputer(n_components=50, random_state=0).fit(X)
