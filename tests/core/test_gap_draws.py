"""The compiled I-step of the data-augmentation chains (explorer.core.mixtures.gap_draws, _compiled/draws).

Oracle: the reference I-step (every component's conditional built by ConditionalMixture, one kept per row) from
the same generator: the same labels, the same draws to round-off, the generator left in the same state; for the
Gaussian chain and for the location model's (categorical evidence as a per-row offset), with rows of every kind
(complete, single-row patterns, runs, rows with nothing observed, rows with categories only). Whole chains with
the plan equal chains without it. Properties: observed entries unchanged, no NaN; the draws' moments match the
conditional's (a check independent of the reference's code). Bad input: a covariance that is not positive
definite, an unknown strategy.
"""

from __future__ import annotations

import numpy as np
import pytest

from explorer.core.gaussians.gaussian import DegenerateCovarianceError
from explorer.core.mixtures import data_augmentation as da
from explorer.core.mixtures import em_gmm
from explorer.core.mixtures import location_augmentation as la
from explorer.core.mixtures import location_model as lm
from explorer.core.mixtures.gap_draws import GapPlan, draw_labels_and_gaps
from explorer.core.validation import BadInputError


def _mixture(rng, K=4, D=6):
    means = rng.normal(0.0, 2.0, (K, D))
    A = rng.normal(size=(K, D, D))
    covs = A @ A.transpose(0, 2, 1) + np.eye(D)
    return rng.dirichlet(np.full(K, 3.0)), means, covs


def _holes(rng, n=600, D=6, rate=0.3):
    X = rng.normal(size=(n, D)) * 2.0
    X[rng.random(X.shape) < rate] = np.nan
    X[:4] = np.nan  # nothing observed
    X[4:40, :3] = np.nan  # a run of one pattern
    X[40:45] = 1.0  # complete rows
    return X


@pytest.mark.parametrize("seed", [0, 1])
def test_the_gaussian_i_step_is_the_reference_from_the_same_generator(seed):
    rng = np.random.default_rng(seed)
    w, mu, cov = _mixture(rng)
    X = _holes(rng)
    plan = GapPlan(X, strategy="compiled")
    r_ref, r_new = np.random.default_rng(seed + 10), np.random.default_rng(seed + 10)
    labels_ref, X_ref = da._impute(X, w, mu, cov, "full", r_ref, plan.patterns)
    labels, X_new = draw_labels_and_gaps(plan, w, mu, cov, r_new)
    np.testing.assert_array_equal(labels, labels_ref)
    np.testing.assert_allclose(X_new, X_ref, rtol=1e-10, atol=1e-10)
    assert r_new.random() == r_ref.random()  # the generator is where the reference leaves it
    obs = ~np.isnan(X)
    assert np.array_equal(X_new[obs], X[obs]) and not np.isnan(X_new).any()


def test_the_location_i_step_is_the_reference_from_the_same_generator():
    rng = np.random.default_rng(3)
    w, mu, cov = _mixture(rng, K=3, D=4)
    X = _holes(rng, n=500, D=4)
    codes = np.stack([rng.integers(0, 3, 500), rng.integers(0, 2, 500)], axis=1)
    codes[rng.random(codes.shape) < 0.2] = -1
    codes[:2] = -1  # rows 0-1: nothing observed at all; rows 2-3: categories only
    codes[2:4] = 1
    probs = (rng.dirichlet(np.ones(3), size=3), rng.dirichlet(np.ones(2), size=3))
    data = lm.prepare(X, codes)
    plan = GapPlan(data.X, strategy="compiled")
    r_ref, r_new = np.random.default_rng(7), np.random.default_rng(7)
    ref = la._impute(data, w, mu, cov, probs, "full", r_ref, plan.patterns)
    new = la._impute(data, w, mu, cov, probs, "full", r_new, plan.patterns, plan)
    np.testing.assert_array_equal(new[0], ref[0])
    np.testing.assert_allclose(new[1], ref[1], rtol=1e-10, atol=1e-10)
    np.testing.assert_array_equal(new[2], ref[2])
    assert r_new.random() == r_ref.random()


def test_chains_with_the_plan_equal_chains_without_it():
    """The Gaussian chain's run() lays out a plan; with the reference forced, the same states to round-off."""
    rng = np.random.default_rng(4)
    X = _holes(rng, n=400, D=5)
    data = em_gmm.prepare(X)
    config = em_gmm.EMConfig(n_components=3, prior="auto")
    state = em_gmm.fit(data, config, np.random.default_rng(0)).state
    prior = em_gmm.resolved_prior(data, config)
    dac = da.DAConfig(n_burn=3, n_thin=2)
    start = da.init(X, state.weights, state.means, state.covariances, dac, np.random.default_rng(1))
    chains = {}
    for kind in ("compiled", "reference"):
        plan = GapPlan(X, strategy=kind)
        r = np.random.default_rng(2)
        s, kept = start, []
        for _ in range(7):
            s = da.step(s, X, prior, dac, r, plan=plan)
            kept.append(s)
        chains[kind] = kept
    for a, b in zip(chains["compiled"], chains["reference"]):
        np.testing.assert_array_equal(a.labels, b.labels)
        np.testing.assert_allclose(a.X, b.X, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(a.covariances, b.covariances, rtol=1e-9, atol=1e-9)


def test_draws_have_the_conditional_moments():
    """Many draws of one row's gaps from one component: their mean and covariance are the conditional's (scipy-free
    closed form from the covariance blocks), within Monte-Carlo error."""
    rng = np.random.default_rng(5)
    _, mu, cov = _mixture(rng, K=1, D=5)
    n = 40_000
    x = rng.normal(size=5)
    X = np.tile(x, (n, 1))
    X[:, [1, 3]] = np.nan
    plan = GapPlan(X, strategy="compiled")
    _, draws = draw_labels_and_gaps(plan, np.ones(1), mu, cov, np.random.default_rng(6))
    m, o = [1, 3], [0, 2, 4]
    S = cov[0]
    gain = S[np.ix_(m, o)] @ np.linalg.solve(S[np.ix_(o, o)], np.eye(3))
    want_mean = mu[0, m] + gain @ (x[o] - mu[0, o])
    want_cov = S[np.ix_(m, m)] - gain @ S[np.ix_(o, m)]
    got = draws[:, m]
    se = np.sqrt(np.diag(want_cov) / n)
    assert np.all(np.abs(got.mean(axis=0) - want_mean) < 5 * se)
    np.testing.assert_allclose(np.cov(got.T), want_cov, rtol=0.05, atol=0.02 * np.abs(want_cov).max())


def test_a_covariance_that_is_not_positive_definite_is_refused_by_name():
    rng = np.random.default_rng(8)
    w, mu, cov = _mixture(rng, K=2, D=3)
    cov[1] = -np.eye(3)
    X = _holes(rng, n=50, D=3)
    with pytest.raises(DegenerateCovarianceError):
        draw_labels_and_gaps(GapPlan(X, strategy="compiled"), w, mu, cov, rng)
    with pytest.raises(BadInputError, match="strategy"):
        GapPlan(X, strategy="gpu")

