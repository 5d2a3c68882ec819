"""Tests of explorer.core.discrete.bernoulli_mixture (Ghahramani & Jordan 1994 section 4.1.3, with the class
variable of section 4.4).

Oracles: K = 1 on complete data gives the column frequencies (and (count + a) / (n + 2a) with a
Beta pseudo-count); K = 1 with MCAR holes gives the observed frequencies; one component per class
on complete labelled data is scikit-learn's BernoulliNB (same smoothing); the posterior with a
missing entry equals the brute-force sum over its two values. Properties: the objective never
decreases (missing entries, unlabelled rows), posteriors sum to one.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from sklearn.naive_bayes import BernoulliNB

from explorer.core.discrete import bernoulli_mixture as bm
from explorer.core.validation import BadInputError

PROTOS = np.array([[0.9, 0.8, 0.7, 0.2, 0.1, 0.2],
                   [0.1, 0.2, 0.3, 0.8, 0.9, 0.8],
                   [0.9, 0.1, 0.9, 0.1, 0.9, 0.1]])


def binary_classes(rng, n=150, C=3):
    y = rng.integers(0, C, n)
    X = (rng.random((n, PROTOS.shape[1])) < PROTOS[y]).astype(float)
    return X, y


def test_k1_complete_data_gives_the_frequencies():
    rng = np.random.default_rng(0)
    X = (rng.random((200, 6)) < np.linspace(0.05, 0.95, 6)).astype(float)
    res = bm.fit(bm.prepare(X), bm.BernoulliConfig(pseudo_count=0.0, tol=1e-14), rng)
    np.testing.assert_allclose(res.state.probs[0], X.mean(axis=0), atol=1e-14)
    a = 2.0
    res = bm.fit(bm.prepare(X), bm.BernoulliConfig(pseudo_count=a, tol=1e-14), rng)
    np.testing.assert_allclose(res.state.probs[0], (X.sum(axis=0) + a) / (200 + 2 * a), atol=1e-14)
    # the log-likelihood is the Bernoulli one at the frequencies
    p = X.mean(axis=0)
    res0 = bm.fit(bm.prepare(X), bm.BernoulliConfig(pseudo_count=0.0, tol=1e-14), rng)
    expected = np.sum(X * np.log(p) + (1 - X) * np.log(1 - p))
    np.testing.assert_allclose(res0.state.log_likelihood, expected, rtol=1e-12)


def test_k1_with_missing_entries_gives_the_observed_frequencies():
    rng = np.random.default_rng(1)
    X = (rng.random((300, 5)) < np.linspace(0.1, 0.9, 5)).astype(float)
    X[rng.random(X.shape) < 0.4] = np.nan
    res = bm.fit(bm.prepare(X), bm.BernoulliConfig(pseudo_count=0.0, tol=1e-15, max_iter=2000), rng)
    np.testing.assert_allclose(res.state.probs[0], np.nanmean(X, axis=0), atol=1e-9)


def test_one_component_per_class_is_bernoulli_naive_bayes():
    rng = np.random.default_rng(2)
    X, y = binary_classes(rng)
    for a in (1.0, 0.5):
        cfg = bm.BernoulliConfig(n_components=1, n_classes=3, structure="per_class", pseudo_count=a, tol=1e-14)
        st = bm.fit(bm.prepare(X, y, 3), cfg, rng).state
        nb = BernoulliNB(alpha=a).fit(X, y)
        np.testing.assert_allclose(np.log(st.probs), nb.feature_log_prob_, atol=1e-12)
        np.testing.assert_allclose(np.log(st.weights), nb.class_log_prior_, atol=1e-12)
        np.testing.assert_allclose(np.exp(bm.predict_log_proba(st, X)), nb.predict_proba(X), atol=1e-12)


def test_posterior_with_missing_entries_is_the_sum_over_their_values():
    rng = np.random.default_rng(3)
    X, y = binary_classes(rng)
    Xm = X.copy()
    Xm[rng.random(X.shape) < 0.3] = np.nan
    lab = y.copy()
    lab[rng.random(y.size) < 0.5] = -1
    cfg = bm.BernoulliConfig(n_components=3, n_classes=3, structure="joint", label_prior=0.1)
    st = bm.fit(bm.prepare(Xm, lab, 3), cfg, rng).state
    row = np.array([1.0, np.nan, 0.0, np.nan, np.nan, 1.0])
    miss = np.flatnonzero(np.isnan(row))
    joint = np.zeros(3)
    for vals in itertools.product([0.0, 1.0], repeat=miss.size):
        x = row.copy()
        x[miss] = vals
        comp = st.weights * np.prod(st.probs ** x * (1 - st.probs) ** (1 - x), axis=1)
        joint += comp @ st.label_probs
    got = np.exp(bm.predict_log_proba(st, row[None]))[0]
    np.testing.assert_allclose(got, joint / joint.sum(), atol=1e-12)
    # log P(x^o) of the same row by brute force
    total = 0.0
    for vals in itertools.product([0.0, 1.0], repeat=miss.size):
        x = row.copy()
        x[miss] = vals
        total += np.sum(st.weights * np.prod(st.probs ** x * (1 - st.probs) ** (1 - x), axis=1))
    np.testing.assert_allclose(bm.log_likelihood_rows(st, row[None])[0], np.log(total), atol=1e-12)


@pytest.mark.parametrize("structure,K,a,seed", [
    ("unsupervised", 3, 1.0, 0), ("unsupervised", 4, 0.0, 1), ("per_class", 2, 1.0, 2), ("joint", 4, 0.5, 3),
])
def test_objective_never_decreases(structure, K, a, seed):
    rng = np.random.default_rng(seed)
    X, y = binary_classes(rng, n=120)
    X[rng.random(X.shape) < 0.35] = np.nan
    X[:3] = np.nan
    lab = y.copy()
    lab[rng.random(y.size) < 0.5] = -1
    sup = structure != "unsupervised"
    cfg = bm.BernoulliConfig(n_components=K, n_classes=3 if sup else 0, structure=structure, pseudo_count=a,
                             label_prior=0.2 if structure == "joint" else 0.0)
    data = bm.prepare(X, lab if sup else None, 3 if sup else 0)
    st = bm.init(data, cfg, rng)
    objs = [st.objective]
    for _ in range(40):
        st = bm.step(st, data, cfg)
        objs.append(st.objective)
    assert np.all(np.diff(objs) >= -1e-9), np.diff(objs).min()
    assert objs[-1] > objs[0]
    np.testing.assert_allclose(st.weights.sum(), 1.0)
    if sup:
        p = np.exp(bm.predict_log_proba(st, X))
        np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-12)
    # log-likelihood = independent per-row evaluation (unlabelled case)
    if not sup:
        np.testing.assert_allclose(bm.log_likelihood_rows(st, X).sum(), st.log_likelihood, rtol=1e-10)


def test_step_is_pure():
    rng = np.random.default_rng(4)
    X, y = binary_classes(rng)
    cfg = bm.BernoulliConfig(n_components=2, n_classes=3, structure="per_class")
    data = bm.prepare(X, y, 3)
    st = bm.init(data, cfg, rng)
    probs = st.probs.copy()
    new = bm.step(st, data, cfg)
    np.testing.assert_array_equal(st.probs, probs)
    assert new.iteration == st.iteration + 1


@pytest.mark.parametrize("kwargs,match", [
    (dict(n_components=0), "n_components must be a positive integer"),
    (dict(structure="per_class", n_classes=1), "needs n_classes >= 2"),
    (dict(structure="unsupervised", n_classes=2), "takes n_classes=0"),
    (dict(pseudo_count=-1.0), "pseudo_count must be a finite number >= 0"),
    (dict(structure="tree"), "structure must be one of"),
    (dict(max_iter=1.5), "max_iter must be a non-negative integer"),
])
def test_config_rejects_bad_settings(kwargs, match):
    with pytest.raises(BadInputError, match=match):
        bm.BernoulliConfig(**kwargs)


def test_prepare_rejects_bad_data():
    X = np.array([[0, 1], [1, 0], [1, 1.0]])
    with pytest.raises(BadInputError, match="must be binary"):
        bm.prepare(np.array([[0, 2.0], [1, 0], [1, 1]]))
    with pytest.raises(BadInputError, match="inf"):
        bm.prepare(np.array([[0, np.inf], [1, 0], [1, 1]]))
    with pytest.raises(BadInputError, match="At least two rows"):
        bm.prepare(np.array([[0, 1], [np.nan, np.nan]]))
    with pytest.raises(BadInputError, match="labels must be in"):
        bm.prepare(X, np.array([0, 1, 2]), 2)
    with pytest.raises(BadInputError, match="No row is labelled"):
        bm.prepare(X, np.array([-1, -1, -1]), 2)
    st = bm.fit(bm.prepare(X), bm.BernoulliConfig(), np.random.default_rng(0)).state
    with pytest.raises(BadInputError, match="no class variable"):
        bm.predict_log_proba(st, X)
    with pytest.raises(BadInputError, match="X has 3 feature"):
        bm.log_likelihood_rows(st, np.zeros((1, 3)))
