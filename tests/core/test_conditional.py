"""Tests of explorer.core.gaussians.conditional: brute-force conditioning oracles, Monte-Carlo checks of the
summaries, densities, intervals, regression (eq. 13) and bad input."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from scipy.special import logsumexp

from explorer.core.gaussians.conditional import ConditionalMixture, regression
from explorer.core.gaussians.gaussian import DegenerateCovarianceError
from explorer.core.validation import BadInputError


def random_mixture(rng, K, D, *, diag=False):
    w = rng.dirichlet(np.ones(K) * 2)
    mu = rng.normal(scale=2.0, size=(K, D))
    if diag:
        cov = rng.uniform(0.3, 2.0, size=(K, D))
    else:
        A = rng.normal(size=(K, D, D))
        cov = A @ A.transpose(0, 2, 1) / D + 0.3 * np.eye(D)
    return w, mu, cov


def random_data(rng, n, D, p=0.4, *, empty=True, complete=True):
    X = rng.normal(scale=2.0, size=(n, D))
    miss = rng.random((n, D)) < p
    if empty:
        miss[0] = True
    if complete:
        miss[1] = False
    X[miss] = np.nan
    return X, miss


def dense_oracle(x, w, mu, cov):
    """Per-row conditioning by linear solves on Sigma_oo and scipy densities."""
    o, m = ~np.isnan(x), np.isnan(x)
    K = w.size
    logp, means, covs = np.empty(K), [], []
    for k in range(K):
        S = cov[k] if cov.ndim == 3 else np.diag(cov[k])
        Soo, Smo, Smm = S[np.ix_(o, o)], S[np.ix_(m, o)], S[np.ix_(m, m)]
        if o.any():
            logp[k] = np.log(w[k]) + stats.multivariate_normal(mu[k, o], Soo).logpdf(x[o])
            means.append(mu[k, m] + Smo @ np.linalg.solve(Soo, x[o] - mu[k, o]))
            covs.append(Smm - Smo @ np.linalg.solve(Soo, Smo.T))
        else:
            logp[k] = np.log(w[k])
            means.append(mu[k, m])
            covs.append(Smm)
    h = np.exp(logp - logsumexp(logp))
    return h, np.array(means), np.array(covs), np.flatnonzero(m)


@pytest.fixture
def setup():
    rng = np.random.default_rng(11)
    w, mu, cov = random_mixture(rng, 3, 4)
    X, miss = random_data(rng, 12, 4)
    return w, mu, cov, X, miss, ConditionalMixture.from_gaussian_mixture(X, w, mu, cov)


# ------------------------------------------------------------------ oracles
@pytest.mark.parametrize("diag", [False, True])
def test_matches_dense_oracle(diag):
    rng = np.random.default_rng(1)
    w, mu, cov = random_mixture(rng, 3, 5, diag=diag)
    X, _ = random_data(rng, 40, 5)
    cm = ConditionalMixture.from_gaussian_mixture(X, w, mu, cov, covariance_type="diag" if diag else "full")
    for i in range(X.shape[0]):
        h, M, C, mis = dense_oracle(X[i], w, mu, cov)
        cw, cM, cC, cmis = cm.component_parameters(i)
        np.testing.assert_array_equal(cmis, mis)
        np.testing.assert_allclose(cw, h, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(cM, M, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(cC, C, rtol=1e-9, atol=1e-9)


def test_matches_oracle_when_every_row_has_its_own_pattern():
    # 600 rows, 14 features: large groups of distinct patterns take the per-row gather path
    rng = np.random.default_rng(2)
    w, mu, cov = random_mixture(rng, 2, 14)
    X, _ = random_data(rng, 600, 14, p=0.3)
    cm = ConditionalMixture.from_gaussian_mixture(X, w, mu, cov)
    for i in rng.choice(600, size=25, replace=False):
        h, M, C, _ = dense_oracle(X[i], w, mu, cov)
        cw, cM, cC, _ = cm.component_parameters(i)
        np.testing.assert_allclose(cw, h, rtol=1e-8, atol=1e-12)
        np.testing.assert_allclose(cM, M, rtol=1e-8, atol=1e-8)
        np.testing.assert_allclose(cC, C, rtol=1e-8, atol=1e-8)


@settings(max_examples=20)
@given(seed=st.integers(0, 2**32 - 1), K=st.integers(1, 3), D=st.integers(1, 5), p=st.floats(0.0, 1.0))
def test_oracle_property(seed, K, D, p):
    rng = np.random.default_rng(seed)
    w, mu, cov = random_mixture(rng, K, D)
    X, _ = random_data(rng, 6, D, p=p, empty=False, complete=False)
    cm = ConditionalMixture.from_gaussian_mixture(X, w, mu, cov)
    mean, var = cm.mean(), cm.variance()
    assert np.all(np.isfinite(mean)) and np.all(var >= 0)
    for i in range(X.shape[0]):
        h, M, C, mis = dense_oracle(X[i], w, mu, cov)
        np.testing.assert_allclose(cm.weights[i], h, rtol=1e-7, atol=1e-10)
        np.testing.assert_allclose(mean[i, mis], h @ M, rtol=1e-7, atol=1e-8)
        dev = M - h @ M
        tot = np.einsum("k,kij->ij", h, C) + np.einsum("k,ki,kj->ij", h, dev, dev)
        np.testing.assert_allclose(cm.covariance(i), tot, rtol=1e-7, atol=1e-8)


def test_missing_argument_ignores_values_at_missing_entries():
    rng = np.random.default_rng(3)
    w, mu, cov = random_mixture(rng, 2, 3)
    X, miss = random_data(rng, 8, 3)
    filled = np.where(miss, 123.0, X)
    a = ConditionalMixture.from_gaussian_mixture(X, w, mu, cov)
    b = ConditionalMixture.from_gaussian_mixture(filled, w, mu, cov, missing=miss)
    np.testing.assert_array_equal(a.mean(), b.mean())
    np.testing.assert_array_equal(a.weights, b.weights)
    assert np.isnan(b.values[miss]).all()


# ------------------------------------------------------------------ summaries
def test_mean_keeps_observed_and_is_convex_sum(setup):
    w, mu, cov, X, miss, cm = setup
    mean = cm.mean()
    assert np.array_equal(mean[~miss], X[~miss])  # bit for bit
    for i in range(X.shape[0]):
        cw, cM, _, mis = cm.component_parameters(i)
        np.testing.assert_allclose(mean[i, mis], cw @ cM, rtol=1e-12)
    var = cm.variance()
    assert np.all(var[~miss] == 0) and np.all(var[miss] > 0)
    for i in range(X.shape[0]):
        mis = cm.component_parameters(i)[3]
        np.testing.assert_allclose(np.diag(cm.covariance(i)), var[i, mis], rtol=1e-10)


def test_empty_rows_use_the_prior(setup):
    w, mu, cov, X, miss, cm = setup
    assert miss[0].all()
    np.testing.assert_array_equal(cm.weights[0], w)
    np.testing.assert_allclose(cm.mean()[0], w @ mu, rtol=1e-12)
    dev = mu - w @ mu
    full = np.einsum("k,kij->ij", w, cov) + np.einsum("k,ki,kj->ij", w, dev, dev)
    np.testing.assert_allclose(cm.covariance(0), full, rtol=1e-10)
    lo, hi = cm.interval(0.9)
    for a in (cm.mean(), cm.variance(), lo, hi, cm.sample(3, np.random.default_rng(0))[0]):
        assert np.all(np.isfinite(a))


def test_all_rows_empty():
    rng = np.random.default_rng(4)
    w, mu, cov = random_mixture(rng, 2, 3)
    cm = ConditionalMixture.from_gaussian_mixture(np.full((3, 3), np.nan), w, mu, cov)
    np.testing.assert_allclose(cm.mean(), np.tile(w @ mu, (3, 1)))
    assert np.all(np.isfinite(cm.logpdf(np.zeros((3, 3)))))


def test_monte_carlo_moments_and_observed_unchanged(setup):
    w, mu, cov, X, miss, cm = setup
    draws = cm.sample(20000, np.random.default_rng(5))
    assert draws.shape == (20000,) + X.shape
    assert np.array_equal(draws[:, ~miss], np.broadcast_to(X[~miss], (20000, (~miss).sum())))
    mean, var = cm.mean(), cm.variance()
    se = np.sqrt(var[miss] / 20000)
    assert np.all(np.abs(draws.mean(axis=0)[miss] - mean[miss]) < 5 * se + 1e-12)
    np.testing.assert_allclose(draws.var(axis=0)[miss], var[miss], rtol=0.06)
    # joint covariance of a row with several missing entries
    row = int(np.argmax(miss.sum(axis=1)[1:])) + 1
    mis = cm.component_parameters(row)[3]
    emp = np.cov(draws[:, row, mis].T)
    np.testing.assert_allclose(emp, cm.covariance(row), atol=0.08 * np.abs(cm.covariance(row)).max())


def test_sample_is_reproducible(setup):
    cm = setup[-1]
    a = cm.sample(5, np.random.default_rng(9))
    b = cm.sample(5, np.random.default_rng(9))
    assert np.array_equal(a, b)


def test_logpdf_matches_brute_force():
    rng = np.random.default_rng(6)
    for ctype in ("full", "diag"):
        w, mu, cov = random_mixture(rng, 3, 4, diag=ctype == "diag")
        X, miss = random_data(rng, 15, 4)
        truth = rng.normal(scale=2.0, size=X.shape)
        cm = ConditionalMixture.from_gaussian_mixture(X, w, mu, cov, covariance_type=ctype)
        lp = cm.logpdf(np.where(miss, truth, X))
        assert lp[1] == 0.0  # nothing missing
        for i in range(X.shape[0]):
            h, M, C, mis = dense_oracle(X[i], w, mu, cov)
            if mis.size == 0:
                continue
            ref = logsumexp(
                [np.log(h[k]) + stats.multivariate_normal(M[k], C[k]).logpdf(truth[i, mis]) for k in range(3)]
            )
            np.testing.assert_allclose(lp[i], ref, rtol=1e-9)
        # observed entries of ``values`` are ignored
        np.testing.assert_array_equal(cm.logpdf(np.where(miss, truth, 0.0)), lp)


def test_marginal_pdf_integrates_and_matches_histogram(setup):
    w, mu, cov, X, miss, cm = setup
    row = 0
    grid = np.linspace(-25, 25, 8001)
    dens, comp = cm.marginal_pdf(row, 2, grid)
    assert dens.shape == (8001,) and comp.shape == (3, 8001)
    np.testing.assert_allclose(comp.sum(axis=0), dens, rtol=1e-12)
    np.testing.assert_allclose(np.trapezoid(dens, grid), 1.0, atol=1e-6)
    draws = cm.sample(40000, np.random.default_rng(7))[:, row, 2]
    hist, edges = np.histogram(draws, bins=30, density=True)
    centres = 0.5 * (edges[1:] + edges[:-1])
    np.testing.assert_allclose(hist, cm.marginal_pdf(row, 2, centres)[0], atol=0.15 * hist.max())


def test_marginal_pdf_2d_integrates_to_the_1d_marginal(setup):
    cm = setup[-1]
    gx = np.linspace(-20, 20, 401)
    gy = np.linspace(-20, 20, 381)
    dens, comp = cm.marginal_pdf_2d(0, 1, 3, gx, gy)
    assert dens.shape == (381, 401) and comp.shape == (3, 381, 401)
    np.testing.assert_allclose(np.trapezoid(np.trapezoid(dens, gx, axis=1), gy), 1.0, atol=1e-4)
    np.testing.assert_allclose(np.trapezoid(dens, gy, axis=0), cm.marginal_pdf(0, 1, gx)[0], atol=1e-5)
    # against scipy at one point
    w, M, C, mis = cm.component_parameters(0)
    point = [gx[150], gy[200]]
    ref = sum(w[k] * stats.multivariate_normal(M[k, [1, 3]], C[k][np.ix_([1, 3], [1, 3])]).pdf(point) for k in range(3))
    np.testing.assert_allclose(dens[200, 150], ref, rtol=1e-10)


def test_interval_quantiles_and_coverage(setup):
    w, mu, cov, X, miss, cm = setup
    lo, hi = cm.interval(0.9)
    assert np.array_equal(lo[~miss], X[~miss]) and np.array_equal(hi[~miss], X[~miss])
    assert np.all(lo[miss] < hi[miss])
    for i, j in zip(*np.nonzero(miss)):
        cw, cM, cC, mis = cm.component_parameters(i)
        p = int(np.flatnonzero(mis == j)[0])
        sd = np.sqrt(cC[:, p, p])
        cdf = lambda x: float(cw @ stats.norm.cdf(x, cM[:, p], sd))  # noqa: E731
        assert cdf(lo[i, j]) == pytest.approx(0.05, abs=1e-9)
        assert cdf(hi[i, j]) == pytest.approx(0.95, abs=1e-9)
    draws = cm.sample(4000, np.random.default_rng(8))
    inside = (draws >= lo) & (draws <= hi)
    np.testing.assert_allclose(inside[:, miss].mean(axis=0), 0.9, atol=0.035)


def test_interval_single_component_is_the_normal_quantile():
    rng = np.random.default_rng(10)
    w, mu, cov = random_mixture(rng, 1, 3)
    X, miss = random_data(rng, 6, 3)
    cm = ConditionalMixture.from_gaussian_mixture(X, w, mu, cov)
    lo, hi = cm.interval(0.8)
    z = stats.norm.ppf(0.9)
    sd = np.sqrt(cm.variance())
    np.testing.assert_allclose(lo[miss], cm.mean()[miss] - z * sd[miss], rtol=1e-12)
    np.testing.assert_allclose(hi[miss], cm.mean()[miss] + z * sd[miss], rtol=1e-12)


def test_zero_weight_component_is_ignored():
    rng = np.random.default_rng(16)
    w, mu, cov = random_mixture(rng, 2, 3)
    X, miss = random_data(rng, 10, 3)
    truth = rng.normal(size=X.shape)
    two = ConditionalMixture.from_gaussian_mixture(X, [0.0, 1.0], mu, cov)
    one = ConditionalMixture.from_gaussian_mixture(X, [1.0], mu[1:], cov[1:])
    assert np.all(two.weights[:, 0] == 0)
    np.testing.assert_allclose(two.mean(), one.mean(), rtol=1e-12)
    np.testing.assert_allclose(two.variance(), one.variance(), rtol=1e-12)
    np.testing.assert_allclose(two.interval(0.5), one.interval(0.5), rtol=1e-12)
    np.testing.assert_allclose(two.logpdf(truth), one.logpdf(truth), rtol=1e-12)
    draws = two.sample(50, np.random.default_rng(0))
    assert np.all(np.isfinite(draws))


# ------------------------------------------------------------------ regression
def test_regression_equals_conditioning_with_only_the_target_missing():
    rng = np.random.default_rng(12)
    w, mu, cov = random_mixture(rng, 3, 4)
    X = rng.normal(size=(7, 4))
    X[3, 1] = np.nan  # a missing input is marginalised
    reg = regression(w, mu, cov, X[:, [0, 1, 3]], inputs=[0, 1, 3], targets=2)
    Xm = X.copy()
    Xm[:, 2] = np.nan
    cm = ConditionalMixture.from_gaussian_mixture(Xm, w, mu, cov)
    assert reg.n_features == 1 and reg.missing.all()
    np.testing.assert_allclose(reg.mean()[:, 0], cm.mean()[:, 2], rtol=1e-12)
    np.testing.assert_allclose(reg.variance()[:, 0], cm.variance()[:, 2], rtol=1e-12)
    np.testing.assert_allclose(reg.weights, cm.weights, rtol=1e-12)
    truth = rng.normal(size=(7, 1))
    one = np.arange(7) != 3  # row 3 of cm also misses column 1, so its logpdf is a joint one
    ref = cm.logpdf(np.where(np.isnan(Xm), np.where(np.isnan(X), 0.0, truth), Xm))
    np.testing.assert_allclose(reg.logpdf(truth)[one], ref[one], rtol=1e-12)


def test_regression_k1_is_linear_regression():
    rng = np.random.default_rng(13)
    S = np.array([[2.0, 0.8], [0.8, 1.5]])
    mu = np.array([1.0, -2.0])
    x = rng.normal(size=20)
    reg = regression([1.0], mu[None], S[None], x, inputs=0, targets=1)
    slope = S[1, 0] / S[0, 0]
    np.testing.assert_allclose(reg.mean()[:, 0], mu[1] + slope * (x - mu[0]), rtol=1e-12)
    np.testing.assert_allclose(reg.variance()[:, 0], S[1, 1] - S[1, 0] ** 2 / S[0, 0], rtol=1e-12)


def test_regression_eq13_is_a_convex_sum_of_component_regressions():
    rng = np.random.default_rng(14)
    w, mu, cov = random_mixture(rng, 3, 4)
    x = rng.normal(size=(9, 1))
    reg = regression(w, mu, cov, x, inputs=[2], targets=[3, 0])  # column 1 is marginalised
    t, i = np.array([3, 0]), 2
    logh = np.log(w) + stats.norm.logpdf(x, mu[:, i], np.sqrt(cov[:, i, i]))  # (9, K)
    h = np.exp(logh - logsumexp(logh, axis=1, keepdims=True))
    comp = mu[None, :, t] + (cov[:, t, i] / cov[:, i, i, None])[None] * (x - mu[:, i])[..., None]  # (9, K, 2)
    lse = np.einsum("nk,nkt->nt", h, comp)
    np.testing.assert_allclose(reg.weights, h, rtol=1e-10)
    np.testing.assert_allclose(reg.mean(), lse, rtol=1e-10)
    S = cov[:, t][:, :, t] - np.einsum("kt,ks->kts", cov[:, t, i], cov[:, t, i]) / cov[:, i, i, None, None]
    second = np.einsum("nk,kts->nts", h, S) + np.einsum("nk,nkt,nks->nts", h, comp, comp)
    pred_cov = second - np.einsum("nt,ns->nts", lse, lse)
    np.testing.assert_allclose(reg.variance(), np.diagonal(pred_cov, axis1=1, axis2=2), rtol=1e-9)
    np.testing.assert_allclose(reg.covariance(4), pred_cov[4], rtol=1e-9, atol=1e-12)


def test_regression_with_names_diag_and_all_inputs_missing():
    rng = np.random.default_rng(15)
    w, mu, var = random_mixture(rng, 2, 3, diag=True)
    x = np.array([[0.5], [np.nan]])
    reg = regression(w, mu, var, x, inputs=["a"], targets=["c"], covariance_type="diag", columns=["a", "b", "c"])
    assert reg.columns == ("c",)
    np.testing.assert_array_equal(reg.weights[1], w)
    np.testing.assert_allclose(reg.mean()[1, 0], w @ mu[:, 2])
    _, M, C, _ = reg.component_parameters(0)
    np.testing.assert_allclose(M[:, 0], mu[:, 2])  # diag: the component means do not move
    np.testing.assert_allclose(C[:, 0, 0], var[:, 2])
    dens, _ = reg.marginal_pdf(0, "c", np.linspace(-30, 30, 6001))
    np.testing.assert_allclose(np.trapezoid(dens, np.linspace(-30, 30, 6001)), 1.0, atol=1e-6)


# ------------------------------------------------------------------ immutability and bad input
def test_frozen_and_read_only(setup):
    cm = setup[-1]
    with pytest.raises(ValueError, match="read-only"):
        cm.weights[0, 0] = 1.0
    with pytest.raises(AttributeError):
        cm.weights = None
    assert (cm.n_samples, cm.n_features, cm.n_components) == (12, 4, 3)
    assert "n_components=3" in repr(cm)


def test_bad_inputs(setup):
    w, mu, cov, X, miss, cm = setup
    make = ConditionalMixture.from_gaussian_mixture
    with pytest.raises(BadInputError, match="X has 3 column"):
        make(X[:, :3], w, mu, cov)
    with pytest.raises(BadInputError, match="sum to one"):
        make(X, w * 2, mu, cov)
    with pytest.raises(BadInputError, match="covariance_type"):
        make(X, w, mu, cov, covariance_type="spherical")
    with pytest.raises(BadInputError, match="expected \\(3, 4\\)"):
        make(X, w, mu, cov, covariance_type="diag")
    with pytest.raises(BadInputError, match="symmetric"):
        bad = cov.copy()
        bad[0, 0, 1] += 1.0
        make(X, w, mu, bad)
    with pytest.raises(DegenerateCovarianceError, match="not positive definite"):
        make(X, w, mu, np.zeros_like(cov))
    with pytest.raises(BadInputError, match="marked observed"):
        make(X, w, mu, cov, missing=np.zeros_like(miss))
    with pytest.raises(BadInputError, match="columns has 2 name"):
        make(X, w, mu, cov, columns=["a", "b"])
    with pytest.raises(BadInputError, match="infinite"):
        make(np.where(miss, np.inf, X), w, mu, cov)
    with pytest.raises(BadInputError, match="NaN value\\(s\\) at missing"):
        cm.logpdf(X)
    with pytest.raises(BadInputError, match="shape"):
        cm.logpdf(np.zeros((3, 4)))
    with pytest.raises(BadInputError, match="observed in row 1"):
        cm.marginal_pdf(1, 0, [0.0])
    with pytest.raises(BadInputError, match="observed in row 1"):
        cm.marginal_pdf_2d(1, 0, 2, [0.0], [0.0])
    with pytest.raises(BadInputError, match="two different"):
        cm.marginal_pdf_2d(0, 2, 2, [0.0], [0.0])
    with pytest.raises(BadInputError, match="Unknown column 'z'"):
        cm.marginal_pdf(0, "z", [0.0])
    with pytest.raises(BadInputError, match="out of range"):
        cm.component_parameters(99)
    with pytest.raises(BadInputError, match="strictly between"):
        cm.interval(1.0)
    with pytest.raises(BadInputError, match="n_draws"):
        cm.sample(0, np.random.default_rng(0))
    with pytest.raises(BadInputError, match="Generator"):
        cm.sample(2, 0)


def test_bad_regression_inputs(setup):
    w, mu, cov = setup[:3]
    x = np.zeros((4, 2))
    with pytest.raises(BadInputError, match="both an input and a target"):
        regression(w, mu, cov, x, inputs=[0, 1], targets=[1])
    with pytest.raises(BadInputError, match="Unknown column 'q'"):
        regression(w, mu, cov, x, inputs=["a", "q"], targets=["c"], columns="abcd")
    with pytest.raises(BadInputError, match="out of range"):
        regression(w, mu, cov, x, inputs=[0, 7], targets=[1])
    with pytest.raises(BadInputError, match="X_inputs has 2 column"):
        regression(w, mu, cov, x, inputs=[0], targets=[1])
    with pytest.raises(BadInputError, match="more than once"):
        regression(w, mu, cov, x, inputs=[0, 0], targets=[1])
    with pytest.raises(BadInputError, match="targets is empty"):
        regression(w, mu, cov, x, inputs=[0, 2], targets=[])


def test_regression_does_not_depend_on_the_memory_order_of_the_inputs():
    # a Fortran-ordered input (a column slice of a larger array, some DataFrames) once gave wrong means:
    # the zeroing of missing entries in observed_gaussian landed on a copy
    rng = np.random.default_rng(5)
    weights = np.array([0.4, 0.6])
    means = rng.normal(size=(2, 3))
    A = rng.normal(size=(2, 3, 3))
    covs = A @ A.transpose(0, 2, 1) + np.eye(3)
    complete = rng.normal(size=(40, 2))
    gappy = complete.copy()
    gappy[rng.random(gappy.shape) < 0.3] = np.nan
    for Xq in (complete, gappy):
        c_order = regression(weights, means, covs, Xq, inputs=[0, 1], targets=[2]).mean()
        f_order = regression(weights, means, covs, np.asfortranarray(Xq), inputs=[0, 1], targets=[2]).mean()
        assert np.isfinite(c_order).all()
        np.testing.assert_allclose(f_order, c_order, rtol=1e-12, atol=1e-12)


def test_patterns_grouped_once_give_the_same_conditional_and_a_wrong_grouping_is_refused():
    """A caller conditioning many mixtures on the same gaps (the data-augmentation chain) passes the grouping in."""
    from explorer.core.gaussians.patterns import group_patterns

    rng = np.random.default_rng(4)
    X = rng.normal(size=(50, 4))
    X[rng.random(X.shape) < 0.3] = np.nan
    X[3] = np.nan
    weights, means = np.array([0.4, 0.6]), np.array([[0.0, 0.0, 0.0, 0.0], [1.0, -1.0, 0.5, 2.0]])
    covs = np.stack([np.eye(4), 0.5 * np.eye(4) + 0.2])
    ref = ConditionalMixture.from_gaussian_mixture(X, weights, means, covs)
    got = ConditionalMixture.from_gaussian_mixture(X, weights, means, covs, patterns=group_patterns(np.isnan(X)))
    np.testing.assert_array_equal(got.mean(), ref.mean())
    np.testing.assert_array_equal(np.asarray(got.weights), np.asarray(ref.weights))
    np.testing.assert_array_equal(got.interval(0.9)[0], ref.interval(0.9)[0])
    other = np.isnan(X)
    other[0, 0] = ~other[0, 0]
    with pytest.raises(BadInputError, match="another mask"):
        ConditionalMixture.from_gaussian_mixture(X, weights, means, covs, patterns=group_patterns(other))
