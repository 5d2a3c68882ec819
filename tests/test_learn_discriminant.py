"""explorer.learn.discriminant: scikit-learn classifiers with missing features (Marlin 6.2).

Oracles: scikit-learn's LDA / QDA on complete data, the closed-form logistic posterior, the core
marginalisation. Properties: probabilities sum to one, a row with nothing observed gets the prior,
inputs are not modified, clone / Pipeline / GridSearchCV (alpha, gamma of RDA chosen by CV).
Bad input: non-numeric column, inf, wrong shape at predict, too few rows, one class, bad parameters.
"""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit
from sklearn.base import clone
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis, QuadraticDiscriminantAnalysis
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from explorer.core.classifiers.synthetic_classification import make_dataset
from explorer.core.validation import BadInputError
from explorer.learn.discriminant import LDAClassifier, LDAFAClassifier, QDAClassifier, RDAClassifier


def _data(seed=0, n=40, missing=0.0, D=3):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(D, D))
    X = np.vstack([rng.normal(0, 1, (n, D)) @ A, rng.normal(0, 1, (n, D)) @ (0.6 * A) + 1.0])
    y = np.array(["a"] * n + ["b"] * n)
    if missing:
        X[rng.random(X.shape) < missing] = np.nan
    return X, y


# ----------------------------------------------------------------------------- oracles
def test_complete_data_equals_sklearn():
    X, y = _data()
    Xt, _ = _data(1, n=10)
    lda = LDAClassifier(reg_covar=0.0).fit(X, y)
    np.testing.assert_allclose(lda.predict_proba(Xt), LinearDiscriminantAnalysis(solver="lsqr").fit(X, y)
                               .predict_proba(Xt), atol=1e-10)
    qda = QDAClassifier(reg_covar=0.0).fit(X, y)
    np.testing.assert_allclose(qda.predict_proba(Xt), QuadraticDiscriminantAnalysis(reg_param=0.0).fit(X, y)
                               .predict_proba(Xt), atol=1e-10)
    np.testing.assert_array_equal(lda.classes_, ["a", "b"])
    assert lda.n_iter_ == 1 and lda.converged_
    # RDA endpoints
    np.testing.assert_allclose(RDAClassifier(alpha=1.0, gamma=1.0, reg_covar=0.0).fit(X, y).predict_proba(Xt),
                               qda.predict_proba(Xt), atol=1e-12)
    np.testing.assert_allclose(RDAClassifier(alpha=0.0, gamma=1.0, reg_covar=0.0).fit(X, y).predict_proba(Xt),
                               lda.predict_proba(Xt), atol=1e-12)


def test_lda_with_missing_is_logistic_per_pattern():
    X, y = _data(2, missing=0.3)
    clf = LDAClassifier(tol=1e-9).fit(X, y)
    Xt, _ = _data(3, n=15, missing=0.4)
    p = clf.predict_proba(Xt)[:, 1]
    S, mu, th = clf.covariance_, clf.means_, clf.priors_
    for i in range(Xt.shape[0]):
        o = ~np.isnan(Xt[i])
        if not o.any():
            assert p[i] == pytest.approx(th[1])
            continue
        Soo = S[np.ix_(o, o)]
        w = np.linalg.solve(Soo, mu[1, o] - mu[0, o])
        b = -0.5 * w @ (mu[1, o] + mu[0, o]) + np.log(th[1] / th[0])
        assert p[i] == pytest.approx(expit(Xt[i, o] @ w + b), rel=1e-9)


def test_ldafa_discriminative_beats_generative_on_mix():
    """Marlin Table 6.1's headline: on Mix, discriminative LDA-FA is far better than generative."""
    rng = np.random.default_rng(0)
    X, y, _ = make_dataset("mix", 100, rng)
    Xt, yt, _ = make_dataset("mix", 200, rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gen = LDAFAClassifier(n_factors=1).fit(X, y)
        dis = LDAFAClassifier(n_factors=1, training="discriminative", reg=1e-3, max_iter=100).fit(X, y)
    assert dis.conditional_log_likelihood_ >= gen.conditional_log_likelihood_
    assert dis.generative_conditional_log_likelihood_ == pytest.approx(gen.conditional_log_likelihood_)
    err = {k: np.mean(m.predict(Xt) != yt) for k, m in (("gen", gen), ("dis", dis))}
    assert err["dis"] < 0.6 * err["gen"]
    np.testing.assert_allclose(gen.covariance_, gen.loadings_ @ gen.loadings_.T + np.diag(gen.psi_))


# ----------------------------------------------------------------------------- properties
@pytest.mark.parametrize("make", [
    lambda: LDAClassifier(), lambda: QDAClassifier(), lambda: RDAClassifier(alpha=0.3, gamma=0.8),
    lambda: LDAFAClassifier(n_factors=1), lambda: LDAFAClassifier(n_factors=0, training="discriminative",
                                                                  max_iter=30)])
def test_probabilities_prior_for_empty_rows_inputs_unchanged(make):
    X, y = _data(4, n=25, missing=0.3)
    X[0] = np.nan
    X0, y0 = X.copy(), y.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = make().fit(X, y)
    Xt = np.array([[np.nan, np.nan, np.nan], [0.1, np.nan, np.nan], [np.nan, 0.3, -0.2], [0.5, 0.1, 2.0]])
    Xt0 = Xt.copy()
    p = clf.predict_proba(Xt)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(p[0], clf.priors_, rtol=1e-12)  # nothing observed -> the class prior
    np.testing.assert_allclose(np.exp(clf.predict_log_proba(Xt)), p, rtol=1e-12)
    assert set(clf.predict(Xt)) <= {"a", "b"}
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(y, y0)
    np.testing.assert_array_equal(Xt, Xt0)
    assert 0.0 <= clf.score(X, y) <= 1.0


def test_clone_pickle_pipeline_dataframe():
    X, y = _data(5, missing=0.2)
    clf = RDAClassifier(alpha=0.2, gamma=0.9).fit(X, y)
    again = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(again.predict_proba(X), clf.predict_proba(X))
    assert clone(clf).get_params() == clf.get_params()
    pipe = make_pipeline(StandardScaler(), LDAClassifier()).fit(X, y)  # StandardScaler passes NaN through
    assert pipe.predict_proba(X).shape == (X.shape[0], 2)
    df = pd.DataFrame(X, columns=["u", "v", "w"])
    m = LDAClassifier().fit(df, y)
    np.testing.assert_allclose(m.predict_proba(df), LDAClassifier().fit(X, y).predict_proba(X))
    with pytest.raises(BadInputError, match="fitted with"):
        m.predict(df.rename(columns={"u": "z"}))


def test_rda_alpha_gamma_by_grid_search():
    """alpha and gamma are ordinary parameters: GridSearchCV chooses them (the thesis uses CV over a grid)."""
    rng = np.random.default_rng(6)
    n = 30  # classes with very different covariances: the per-class end of the grid should win
    X = np.vstack([rng.normal(0, 1, (n, 2)) * [3.0, 0.2], rng.normal(0, 1, (n, 2)) * [0.2, 3.0]])
    y = np.repeat([0, 1], n)
    X[rng.random(X.shape) < 0.2] = np.nan
    grid = GridSearchCV(RDAClassifier(), {"alpha": [0.0, 1.0], "gamma": [0.5, 1.0]}, cv=3,
                        scoring="neg_log_loss").fit(X, y)
    assert grid.best_params_["alpha"] == 1.0
    assert grid.best_estimator_.predict_proba(X).shape == (2 * n, 2)


def test_minus_one_is_an_ordinary_label():
    X, _ = _data(7, n=15)
    y = np.repeat([-1, 1], 15)
    clf = LDAClassifier().fit(X, y)
    np.testing.assert_array_equal(clf.classes_, [-1, 1])


# ----------------------------------------------------------------------------- bad input
def test_bad_input():
    X, y = _data(8, n=10)
    df = pd.DataFrame(X, columns=["u", "v", "w"]).assign(v=["x"] * 20)
    with pytest.raises(BadInputError, match="v"):
        LDAClassifier().fit(df, y)
    bad = X.copy()
    bad[1, 1] = np.inf
    with pytest.raises(BadInputError, match="inf"):
        QDAClassifier().fit(bad, y)
    clf = LDAClassifier().fit(X, y)
    with pytest.raises(BadInputError, match="X has 2 features, but LDAClassifier is expecting 3"):
        clf.predict(X[:, :2])
    with pytest.raises(BadInputError, match="at least 2 rows"):
        LDAClassifier().fit(X[:1], y[:1])
    with pytest.raises(BadInputError, match="at least two classes"):
        LDAClassifier().fit(X, np.zeros(20))
    with pytest.raises(BadInputError, match="missing labels"):
        LDAClassifier().fit(X, np.r_[np.nan, np.zeros(19)])
    with pytest.raises(ValueError, match="Unknown label type"):
        LDAClassifier().fit(X, np.linspace(0, 1, 20))
    with pytest.raises(BadInputError, match=r"alpha must be a number in \[0, 1\]"):
        RDAClassifier(alpha=2.0).fit(X, y)
    with pytest.raises(BadInputError, match="reg_covar must be"):
        QDAClassifier(reg_covar=-1.0).fit(X, y)
    with pytest.raises(BadInputError, match="max_iter must be"):
        LDAClassifier(max_iter=-3).fit(X, y)
    with pytest.raises(BadInputError, match="training must be one of"):
        LDAFAClassifier(training="em").fit(X, y)
    with pytest.raises(BadInputError, match="n_factors=3 must be smaller than n_features=3"):
        LDAFAClassifier(n_factors=3).fit(X, y)
    with pytest.raises(BadInputError, match="reg must be"):
        LDAFAClassifier(reg=-1.0).fit(X, y)
    with pytest.raises(BadInputError, match="random_state"):
        LDAFAClassifier(random_state="seed").fit(X, y)
    Xc = X.copy()
    Xc[y == "b"] = np.nan
    with pytest.raises(BadInputError, match="no row with an observed feature"):
        LDAClassifier().fit(Xc, y)
