"""Sufficient statistics of EM: the M-step from them equals em_gmm's step; blocks add up."""

import numpy as np
import pytest

from explorer.core.gaussians.patterns import group_patterns
from explorer.core.mixtures import em_gmm
from explorer.core.mixtures.suffstats import SufficientStatistics, estep_statistics, m_step
from explorer.core.validation import BadInputError


def _data(n=300, d=5, rate=0.3, seed=0, offset=0.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) @ rng.normal(size=(d, d)) + offset
    X[: n // 2] += 3.0
    miss = rng.random((n, d)) < rate
    miss[0] = True  # a row with nothing observed
    return np.where(miss, np.nan, X)


@pytest.mark.parametrize("covariance_type", ["full", "diag"])
@pytest.mark.parametrize("prior", [None, "auto"])
def test_m_step_from_statistics_equals_em_step(covariance_type, prior):
    X = _data()
    data = em_gmm.prepare(X)
    config = em_gmm.EMConfig(n_components=3, covariance_type=covariance_type, prior=prior)
    state = em_gmm.init(data, config, np.random.default_rng(1))
    expected = em_gmm.step(state, data, config)
    stats, resp, ll = estep_statistics(data.Xp, data.patterns, state.weights, state.means, state.covariances,
                                       covariance_type=covariance_type)
    w, mu, cov = m_step(stats, reg_covar=config.reg_covar, prior=state.prior)
    np.testing.assert_allclose(w, expected.weights, rtol=1e-10)
    np.testing.assert_allclose(mu, expected.means, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(cov, expected.covariances, rtol=1e-9, atol=1e-10)
    assert stats.log_likelihood == pytest.approx(state.log_likelihood, rel=1e-12)
    assert stats.n_rows == data.n_fit


def test_blocks_add_up_to_the_whole():
    X = _data(n=400, seed=3, offset=1e4)  # far from the origin: the shift keeps the scatter exact
    data = em_gmm.prepare(X)
    config = em_gmm.EMConfig(n_components=2)
    state = em_gmm.init(data, config, np.random.default_rng(0))
    miss = np.isnan(X)
    Xf = np.where(miss, 0.0, X)
    total = SufficientStatistics.zeros(state.means)
    for sl in (slice(0, 150), slice(150, 151), slice(151, 400)):
        s, _, _ = estep_statistics(Xf[sl], group_patterns(miss[sl]), state.weights, state.means, state.covariances)
        total = total + s
    whole, _, _ = estep_statistics(Xf, group_patterns(miss), state.weights, state.means, state.covariances)
    np.testing.assert_allclose(total.second, whole.second, rtol=1e-10, atol=1e-8)
    np.testing.assert_allclose(total.nk, whole.nk, rtol=1e-12)
    assert total.n_rows == whole.n_rows == data.n_fit
    w, mu, cov = m_step(total)
    expected = em_gmm.step(state, data, config)
    np.testing.assert_allclose(mu, expected.means, rtol=1e-10)
    np.testing.assert_allclose(cov, expected.covariances, rtol=1e-7, atol=1e-9)


def test_different_shifts_do_not_add():
    a = SufficientStatistics.zeros(np.zeros((2, 3)))
    b = SufficientStatistics.zeros(np.ones((2, 3)))
    with pytest.raises(BadInputError, match="different shifts"):
        a + b


@pytest.mark.parametrize("sort", [False, True])
@pytest.mark.parametrize("exact", [True, False])
def test_compiled_estep_statistics_equal_the_reference(sort, exact):
    X = _data(n=500, seed=4, offset=50.0)
    miss = np.isnan(X)
    patterns = group_patterns(miss, sort=sort)
    Xf = np.where(miss, 7.0, X)  # any finite value at missing entries
    if sort:
        Xf = Xf[patterns.perm]
    data = em_gmm.prepare(X)
    state = em_gmm.init(data, em_gmm.EMConfig(n_components=3), np.random.default_rng(2))
    args = (Xf, patterns, state.weights, state.means, state.covariances)
    ref, resp_ref, ll_ref = estep_statistics(*args, exact=exact, strategy="numpy")
    got, resp, ll = estep_statistics(*args, exact=exact, strategy="compiled")
    for name in ("nk", "first", "second"):
        a, b = getattr(got, name), getattr(ref, name)
        assert np.abs(a - b).max() <= 1e-10 * np.abs(b).max(), name
    assert got.log_likelihood == pytest.approx(ref.log_likelihood, rel=1e-12)
    assert got.n_rows == ref.n_rows
    np.testing.assert_allclose(resp, resp_ref, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(ll, ll_ref, rtol=1e-10, atol=1e-10)
    with pytest.raises(BadInputError, match="strategy"):
        estep_statistics(*args, strategy="tree")


@pytest.mark.parametrize("strategy", ["numpy", "compiled", "covariance"])
@pytest.mark.parametrize("sort", [False, True])
def test_a_log_offset_per_row_enters_the_responsibilities(strategy, sort):
    """``log_offset`` (the location model's categorical term): resp_ik proportional to
    w_k N(x_i^o; mu_k^o, Sigma_k^oo) exp(offset_ik), from scipy's densities; the row log-likelihoods include it;
    a row with nothing observed keeps the weights and 0; the statistics equal the offset-free kernel's weighted
    by these responsibilities (checked through nk and the first moments' totals)."""
    from scipy.special import logsumexp
    from scipy.stats import multivariate_normal

    X = _data(n=160, seed=7)
    miss = np.isnan(X)
    patterns = group_patterns(miss, sort=sort)
    Xf = np.where(miss, 0.0, X)
    if sort:
        Xf, X, miss = Xf[patterns.perm], X[patterns.perm], miss[patterns.perm]
    data = em_gmm.prepare(np.where(np.isnan(X), np.nan, X))
    state = em_gmm.init(data, em_gmm.EMConfig(n_components=3), np.random.default_rng(3))
    w, mu, cov = state.weights, state.means, state.covariances
    offset = np.random.default_rng(8).normal(scale=3.0, size=(X.shape[0], 3))
    stats, resp, row_ll = estep_statistics(Xf, patterns, w, mu, cov, strategy=strategy, log_offset=offset)
    table = np.log(w) + offset
    for i in range(X.shape[0]):
        o = ~miss[i]
        for k in range(3):
            table[i, k] += multivariate_normal(mu[k][o], cov[k][np.ix_(o, o)]).logpdf(X[i, o]) if o.any() else 0.0
    empty = ~(~miss).any(axis=1)
    assert empty.sum() == 1
    want = np.exp(table - logsumexp(table, axis=1, keepdims=True))
    want[empty] = w
    np.testing.assert_allclose(resp, want, rtol=1e-9, atol=1e-12)
    want_ll = np.where(empty, 0.0, logsumexp(table, axis=1))
    np.testing.assert_allclose(row_ll, want_ll, rtol=1e-10, atol=1e-10)
    assert stats.log_likelihood == pytest.approx(want_ll.sum(), rel=1e-12)
    np.testing.assert_allclose(stats.nk, want[~empty].sum(axis=0), rtol=1e-10)
    _, resp0, _ = estep_statistics(Xf, patterns, w, mu, cov, strategy=strategy)
    assert np.abs(resp0 - resp).max() > 0.1  # the offset moved the responsibilities
    with pytest.raises(BadInputError, match="log_offset"):
        estep_statistics(Xf, patterns, w, mu, cov, strategy=strategy, log_offset=offset[:, :2])
