"""Tests of explorer.learn.treatments: the input treatments, Rubin's rules, BestOfRestarts."""

import warnings

import numpy as np
import pytest
from scipy.optimize import minimize
from sklearn.base import clone
from sklearn.experimental import enable_iterative_imputer  # noqa: F401
from sklearn.impute import IterativeImputer, SimpleImputer
from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge
from sklearn.model_selection import GridSearchCV
from sklearn.neural_network import MLPClassifier
from sklearn.svm import LinearSVC

from explorer.core.classifiers.synthetic_classification import make_dataset
from explorer.core.validation import BadInputError
from explorer.impute.gaussian_mixture import GaussianMixtureImputer
from explorer.learn.treatments import (
    TREATMENTS,
    BestOfRestarts,
    MissingInputClassifier,
    MissingInputRegressor,
    coefficient_covariance,
    rubin_pool,
)

X_TR, Y_TR, _ = make_dataset("mix", 40, np.random.default_rng(0))
X_TE, Y_TE, _ = make_dataset("mix", 40, np.random.default_rng(1))


def _lr(C=1.0):
    return LogisticRegression(C=C, tol=1e-10, max_iter=5000)


def _fast_imputer():
    return GaussianMixtureImputer(n_components=1, max_iter=50, prior=None, empty_rows="marginal")


# ---------------------------------------------------------------- oracle: treatments vs hand-built inputs

def test_zero_mean_single_match_manual_inputs():
    miss = np.isnan(X_TR)
    for t, fill in (("zero", np.zeros(2)), ("mean", np.nanmean(X_TR, axis=0))):
        m = MissingInputClassifier(_lr(), t).fit(X_TR, Y_TR)
        ref = _lr().fit(np.where(miss, fill, X_TR), Y_TR)
        np.testing.assert_allclose(m.estimator_.coef_, ref.coef_, rtol=1e-6)
        mt = np.isnan(X_TE)
        np.testing.assert_allclose(m.predict_proba(X_TE), ref.predict_proba(np.where(mt, fill, X_TE)), atol=1e-9)
    imp = SimpleImputer(strategy="median")
    m = MissingInputClassifier(_lr(), "single", imputer=imp).fit(X_TR, Y_TR)
    ref = _lr().fit(clone(imp).fit_transform(X_TR), Y_TR)
    np.testing.assert_allclose(m.estimator_.coef_, ref.coef_, rtol=1e-6)


def test_augmented_lr_is_the_minimiser_of_eq_6312():
    """F = sum log(1 + exp(-y(b + sum_d r_d(w_d x_d + v_d)))) + lambda(w'w + v'v), lambda = 1/(2C)."""
    C = 0.5
    lam = 1.0 / (2.0 * C)
    r = (~np.isnan(X_TR)).astype(float)
    x = np.nan_to_num(X_TR)
    ypm = 2.0 * Y_TR - 1.0

    def F(theta):
        b, w, v = theta[0], theta[1:3], theta[3:5]
        a = b + np.sum(r * (w * x + v), axis=1)
        return np.sum(np.logaddexp(0.0, -ypm * a)) + lam * (w @ w + v @ v)

    res = minimize(F, np.zeros(5), method="BFGS", options={"gtol": 1e-10})
    m = MissingInputClassifier(_lr(C), "augmented").fit(X_TR, Y_TR)
    ours = np.concatenate([m.estimator_.intercept_, m.estimator_.coef_[0]])
    np.testing.assert_allclose(ours, res.x, atol=1e-4)
    # not the same as mean imputation (the offsets v are learned)
    assert abs(F(ours) - res.fun) < 1e-6


def test_reduced_models_train_on_covering_cases():
    m = MissingInputClassifier(_lr(), "reduced").fit(X_TR, Y_TR)
    obs = ~np.isnan(X_TR)
    assert set(m.reduced_models_) == {(True, True), (False, True), (True, False)}
    # pattern "only x0 observed": every row that observes x0, using x0 only
    rows = obs[:, 0]
    ref = _lr().fit(X_TR[rows][:, [0]], Y_TR[rows])
    np.testing.assert_allclose(m.reduced_models_[(True, False)].coef_, ref.coef_, rtol=1e-6)
    ref11 = _lr().fit(X_TR[obs.all(1)], Y_TR[obs.all(1)])
    np.testing.assert_allclose(m.reduced_models_[(True, True)].coef_, ref11.coef_, rtol=1e-6)
    # test rows use the model of their exact pattern
    xt = np.array([[0.3, np.nan], [0.3, 1.0]])
    P = m.predict_proba(xt)
    np.testing.assert_allclose(P[0], ref.predict_proba([[0.3]])[0])
    np.testing.assert_allclose(P[1], ref11.predict_proba([[0.3, 1.0]])[0])


def test_reduced_unseen_pattern_fallback_and_error():
    X = X_TR[~np.isnan(X_TR).any(1) | np.isnan(X_TR[:, 1])]  # no training row with pattern (miss, obs)
    y = Y_TR[~np.isnan(X_TR).any(1) | np.isnan(X_TR[:, 1])]
    m = MissingInputClassifier(_lr(), "reduced").fit(X, y)
    assert (False, True) not in m.reduced_models_
    rows = ~np.isnan(X[:, 1])
    ref = _lr().fit(X[rows][:, [1]], y[rows])
    np.testing.assert_allclose(m.predict_proba([[np.nan, 0.7]]), ref.predict_proba([[0.7]]))
    # all-missing row: the class frequencies of the training set
    np.testing.assert_allclose(m.predict_proba([[np.nan, np.nan]])[0], np.bincount(y) / len(y))
    # three features, x0 and x1 never observed together: a test row observing both has no model
    rng = np.random.default_rng(2)
    X3 = rng.normal(size=(30, 3))
    X3[:15, 0] = np.nan
    X3[15:, 1] = np.nan
    y3 = np.tile([0, 1], 15)
    m3 = MissingInputClassifier(_lr(), "reduced").fit(X3, y3)
    with pytest.raises(BadInputError, match="no training row observes all of features \\[0, 1, 2\\]"):
        m3.predict([[0.1, 0.2, 0.3]])


def test_multiple_imputation_averages_s_models():
    m = MissingInputClassifier(_lr(), "multiple", imputer=_fast_imputer(), n_imputations=3, random_state=0)
    m.fit(X_TR, Y_TR)
    assert len(m.estimators_) == 3 and len(m.imputers_) == 3
    for Z in m.completions_:  # observed entries kept, missing ones drawn
        obs = ~np.isnan(X_TR)
        np.testing.assert_array_equal(Z[obs], X_TR[obs])
        assert not np.isnan(Z).any()
    assert not np.allclose(m.completions_[0], m.completions_[1])
    # eq. 6.3.10: the average of the S models' probabilities on one completion each
    comps = m._test_completions(X_TE)
    manual = np.mean([e.predict_proba(Z) for e, Z in zip(m.estimators_, comps)], axis=0)
    np.testing.assert_allclose(m.predict_proba(X_TE), manual)
    np.testing.assert_allclose(m.predict_proba(X_TE), m.predict_proba(X_TE))  # deterministic
    one = MissingInputClassifier(_lr(), "multiple", imputer=_fast_imputer(), n_imputations=2,
                                 imputation_models="one", random_state=0).fit(X_TR, Y_TR)
    assert len(one.imputers_) == 1 and len(one.estimators_) == 2
    # an imputer without sample(): separate fits of IterativeImputer(sample_posterior=True)
    it = MissingInputClassifier(_lr(), "multiple", imputer=IterativeImputer(sample_posterior=True, max_iter=3),
                                n_imputations=2, random_state=0).fit(X_TR, Y_TR)
    assert not np.allclose(it.completions_[0], it.completions_[1])


# ---------------------------------------------------------------- oracle: Rubin's rules

def test_rubin_rules_hand_computation():
    Q = np.array([[1.0], [2.0], [4.0]])
    U = np.array([0.5, 0.7, 0.9])
    res = rubin_pool(Q, U[:, None], df_complete=20)
    qbar, ubar = 7 / 3, 0.7
    B = ((1 - 7 / 3) ** 2 + (2 - 7 / 3) ** 2 + (4 - 7 / 3) ** 2) / 2  # = 7/3
    T = ubar + (1 + 1 / 3) * B
    lam = (4 / 3) * B / T
    riv = (4 / 3) * B / ubar
    nu_old = 2 / lam**2
    nu_obs = 21 / 23 * 20 * (1 - lam)
    nu = nu_old * nu_obs / (nu_old + nu_obs)
    np.testing.assert_allclose(res.estimate, [qbar])
    np.testing.assert_allclose(res.within, [ubar])
    np.testing.assert_allclose(res.between, [7 / 3])
    np.testing.assert_allclose(res.total, [T])
    np.testing.assert_allclose(res.std_error, [np.sqrt(T)])
    np.testing.assert_allclose(res.lambda_, [lam])
    np.testing.assert_allclose(res.riv, [riv])
    np.testing.assert_allclose(res.df, [nu])
    np.testing.assert_allclose(res.fmi, [(riv + 2 / (nu + 3)) / (1 + riv)])
    np.testing.assert_allclose(rubin_pool(Q, U[:, None]).df, [nu_old])


def test_pooled_ols_on_complete_data_is_ols_with_classical_covariance():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(50, 2))
    y = 1.0 + X @ [2.0, -1.0] + rng.normal(scale=0.5, size=50)
    m = MissingInputRegressor(LinearRegression(), "multiple", imputer=_fast_imputer(), n_imputations=3,
                              random_state=0).fit(X, y)
    pooled = m.pooled_coefficients()
    D = np.hstack([np.ones((50, 1)), X])
    beta = np.linalg.lstsq(D, y, rcond=None)[0]
    s2 = np.sum((y - D @ beta) ** 2) / (50 - 3)
    cov = s2 * np.linalg.solve(D.T @ D, np.eye(3))
    np.testing.assert_allclose(pooled.estimate, beta, rtol=1e-8)
    np.testing.assert_allclose(pooled.within_cov, cov, rtol=1e-6)
    np.testing.assert_allclose(pooled.between, 0.0, atol=1e-20)
    np.testing.assert_allclose(pooled.df, 48 / 50 * 47)  # B = 0: the Barnard-Rubin nu_obs
    # with missing values the between variance is positive and T > U
    Xm = X.copy()
    Xm[rng.random(50) < 0.4, 1] = np.nan
    pm = MissingInputRegressor(Ridge(alpha=0.1), "multiple", imputer=_fast_imputer(), n_imputations=4,
                               random_state=1).fit(Xm, y).pooled_coefficients()
    assert np.all(pm.between[1:] > 0) and np.all(pm.total > pm.within)


def test_logistic_covariance_is_the_inverse_penalised_hessian():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(80, 2))
    y = (X[:, 0] - X[:, 1] + rng.normal(size=80) > 0).astype(int)
    C = 0.3
    est = _lr(C).fit(X, y)
    theta, cov = coefficient_covariance(est, X, y)
    D = np.hstack([np.ones((80, 1)), X])
    pen = np.array([0.0, 1.0, 1.0])

    def grad(t):
        p = 1 / (1 + np.exp(-D @ t))
        return D.T @ (p - y) + pen * t / C

    np.testing.assert_allclose(grad(theta), 0.0, atol=1e-5)  # theta is the penalised optimum
    h = 1e-5
    H = np.array([(grad(theta + h * e) - grad(theta - h * e)) / (2 * h) for e in np.eye(3)])
    np.testing.assert_allclose(cov @ H, np.eye(3), atol=1e-6)
    m = MissingInputClassifier(_lr(C), "multiple", imputer=_fast_imputer(), n_imputations=2, random_state=0)
    pooled = m.fit(X_TR, Y_TR).pooled_coefficients(df_complete=None)
    assert pooled.estimate.shape == (3,) and np.all(pooled.total > 0)


# ---------------------------------------------------------------- properties

@pytest.mark.parametrize("treatment", TREATMENTS)
def test_every_treatment_probabilities_sum_to_one_and_x_untouched(treatment):
    X, Xt = X_TR.copy(), X_TE.copy()
    m = MissingInputClassifier(_lr(), treatment, imputer=_fast_imputer(), n_imputations=2, random_state=0)
    m.fit(X, Y_TR)
    P = m.predict_proba(Xt)
    np.testing.assert_array_equal(X, X_TR)
    np.testing.assert_array_equal(Xt, X_TE)
    assert P.shape == (len(Xt), 2) and np.all(np.isfinite(P))
    np.testing.assert_allclose(P.sum(1), 1.0)
    assert np.mean(m.predict(Xt) == Y_TE) > 0.6


def test_string_labels_regressor_treatments_and_svc_without_proba():
    y = np.where(Y_TR == 1, "b", "a")
    m = MissingInputClassifier(_lr(), "augmented").fit(X_TR, y)
    assert set(m.predict(X_TE)) <= {"a", "b"} and list(m.classes_) == ["a", "b"]
    svc = MissingInputClassifier(LinearSVC(), "reduced").fit(X_TR, y)
    assert set(svc.predict(X_TE)) <= {"a", "b"}
    assert not hasattr(MissingInputClassifier(LinearSVC(), "multiple"), "predict_proba")
    target = np.nan_to_num(X_TR[:, 0]) + Y_TR
    for t in TREATMENTS:
        r = MissingInputRegressor(LinearRegression(), t, imputer=_fast_imputer(), n_imputations=2,
                                  random_state=0).fit(X_TR, target)
        assert r.predict(X_TE).shape == (len(X_TE),) and np.all(np.isfinite(r.predict(X_TE)))


def test_grid_search_over_wrapped_estimator_params_and_clone():
    m = MissingInputClassifier(LogisticRegression(), "augmented")
    gs = GridSearchCV(m, {"estimator__C": [1e-3, 10.0]}, cv=3, scoring="neg_log_loss").fit(X_TR, Y_TR)
    assert gs.best_params_["estimator__C"] == 10.0
    c = clone(m.set_params(estimator__C=5.0))
    assert c.get_params()["estimator__C"] == 5.0 and not hasattr(c, "estimator_")


def test_neural_network_via_treatments_and_best_of_restarts():
    net = MLPClassifier(hidden_layer_sizes=(6,), activation="logistic", solver="lbfgs", max_iter=200, alpha=1e-3)
    best = BestOfRestarts(net, n_restarts=3, random_state=0)
    m = MissingInputClassifier(best, "augmented").fit(X_TR, Y_TR)
    inner = m.estimator_
    assert len(inner.losses_) == 3 and inner.losses_[inner.best_index_] == inner.losses_.min()
    assert inner.best_estimator_.loss_ == inner.losses_.min()
    # augmented first layer (6.6.12): 2 value weights + 2 response weights per hidden unit
    assert inner.best_estimator_.coefs_[0].shape == (4, 6)
    np.testing.assert_allclose(m.predict_proba(X_TE).sum(1), 1.0)
    # losses without loss_: the training log loss
    lr_best = BestOfRestarts(LogisticRegression(), n_restarts=2, random_state=0).fit(np.nan_to_num(X_TR), Y_TR)
    assert lr_best.losses_.shape == (2,)


# ---------------------------------------------------------------- bad input

def test_bad_inputs():
    with pytest.raises(BadInputError, match="treatment must be one of"):
        MissingInputClassifier(_lr(), "median").fit(X_TR, Y_TR)
    with pytest.raises(BadInputError, match="n_imputations"):
        MissingInputClassifier(_lr(), "multiple", n_imputations=0).fit(X_TR, Y_TR)
    with pytest.raises(BadInputError, match="imputation_models"):
        MissingInputClassifier(_lr(), "multiple", imputation_models="many").fit(X_TR, Y_TR)
    with pytest.raises(BadInputError, match="sample method"):
        MissingInputClassifier(_lr(), "multiple", imputer=IterativeImputer(), imputation_models="one").fit(X_TR, Y_TR)
    with pytest.raises(BadInputError, match="estimator must be"):
        MissingInputClassifier(None).fit(X_TR, Y_TR)
    with pytest.raises(BadInputError, match="at least two"):
        MissingInputClassifier(_lr()).fit(X_TR, np.zeros(len(X_TR)))
    bad = X_TR.copy()
    bad[0, 1] = np.inf
    with pytest.raises(BadInputError, match="inf"):
        MissingInputClassifier(_lr()).fit(bad, Y_TR)
    with pytest.raises(BadInputError, match="numbers|numeric"):
        MissingInputClassifier(_lr()).fit(np.array([["a", 1.0], ["b", 2.0], ["c", 3.0]], dtype=object), [0, 1, 0])
    m = MissingInputClassifier(_lr(), "zero").fit(X_TR, Y_TR)
    with pytest.raises(BadInputError, match="features"):
        m.predict(np.zeros((2, 3)))
    with pytest.raises(BadInputError, match="at least 2 rows"):
        MissingInputClassifier(_lr()).fit(np.nan_to_num(X_TR[:1]), Y_TR[:1])
    with pytest.raises(BadInputError, match="treatment='multiple'"):
        m.pooled_coefficients()
    with pytest.raises(BadInputError, match="y has NaN"):
        MissingInputRegressor(LinearRegression()).fit(X_TR, np.full(len(X_TR), np.nan))
    with pytest.raises(BadInputError, match="random_state"):
        BestOfRestarts(LinearRegression()).fit(np.nan_to_num(X_TR), Y_TR)
    with pytest.raises(BadInputError, match="n_restarts"):
        BestOfRestarts(_lr(), n_restarts=0).fit(np.nan_to_num(X_TR), Y_TR)
    with pytest.raises(BadInputError, match="S >= 2"):
        rubin_pool([[1.0]], [[1.0]])
    with pytest.raises(BadInputError, match="no coefficient covariance"):
        coefficient_covariance(LinearSVC().fit(np.nan_to_num(X_TR), Y_TR), np.nan_to_num(X_TR), Y_TR)
