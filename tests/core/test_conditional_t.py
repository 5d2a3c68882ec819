"""Student-t posterior-predictive density imputation (explorer.core.gaussians.conditional_t)."""

from types import SimpleNamespace

import numpy as np
import pytest
from scipy import stats

from explorer.core.gaussians.conditional import ConditionalMixture
from explorer.core.gaussians.conditional_t import (
    StudentTConditionalMixture,
    normal_wishart_predictive,
)
from explorer.core.mixtures import vb_dpgmm as vb
from explorer.core.validation import BadInputError


def _random_model(rng, K=3, D=4, dof_low=3.0):
    A = rng.normal(size=(K, D, D))
    scales = A @ np.swapaxes(A, 1, 2) + 0.5 * np.eye(D)
    loc = rng.normal(scale=2.0, size=(K, D))
    w = rng.dirichlet(np.ones(K))
    dof = rng.uniform(dof_low, dof_low + 6, size=K)
    return w, loc, scales, dof


def _data(rng, n=30, D=4, p=0.4):
    X = rng.normal(scale=2.0, size=(n, D))
    miss = rng.random((n, D)) < p
    miss[0] = True  # a row with nothing observed
    miss[1] = False  # a complete row
    return X, miss


@pytest.fixture(params=[4, 7], ids=["D4-few-patterns", "D7-many-patterns"])
def model(request):
    """D=4: few patterns per group (loop kernels); D=7: many (batched kernels of gaussian.py)."""
    D = request.param
    rng = np.random.default_rng(D)
    w, loc, S, dof = _random_model(rng, D=D)
    X, miss = _data(rng, n=30 if D == 4 else 80, D=D)
    Xn = np.where(miss, np.nan, X)
    c = StudentTConditionalMixture.from_student_t_mixture(Xn, w, loc, S, dof)
    return SimpleNamespace(X=X, miss=miss, Xn=Xn, w=w, loc=loc, S=S, dof=dof, c=c)


def _dense_row(x, miss_row, w, loc, S, dof):
    """Per-row oracle: weights from scipy.stats.multivariate_t marginals, explicit conditioning."""
    o, m = np.flatnonzero(~miss_row), np.flatnonzero(miss_row)
    K = w.size
    lw, locs, scales, dofs = np.log(w).copy(), [], [], []
    for k in range(K):
        if o.size:
            lw[k] += stats.multivariate_t(loc[k][o], S[k][np.ix_(o, o)], df=dof[k]).logpdf(x[o])
            Soo, Smo = S[k][np.ix_(o, o)], S[k][np.ix_(m, o)]
            A = np.linalg.solve(Soo, Smo.T).T
            d = x[o] - loc[k][o]
            delta2 = d @ np.linalg.solve(Soo, d)
            locs.append(loc[k][m] + A @ d)
            scales.append((dof[k] + delta2) / (dof[k] + o.size) * (S[k][np.ix_(m, m)] - A @ Smo.T))
        else:
            locs.append(loc[k][m])
            scales.append(S[k][np.ix_(m, m)])
        dofs.append(dof[k] + o.size)
    h = np.exp(lw - np.logaddexp.reduce(lw))
    return h, np.array(locs), np.array(scales), np.array(dofs), m


def test_normal_wishart_predictive_is_bishop_10_81():
    rng = np.random.default_rng(0)
    K, D = 2, 3
    m = rng.normal(size=(K, D))
    beta, nu = np.array([2.0, 10.0]), np.array([5.0, 30.0])
    A = rng.normal(size=(K, D, D))
    Psi = A @ np.swapaxes(A, 1, 2) + np.eye(D)
    loc, S, dof = normal_wishart_predictive(m, beta, nu, Psi)
    np.testing.assert_allclose(dof, nu + 1 - D)
    for k in range(K):  # Bishop: L_k = (nu+1-D) beta / (1+beta) W_k, scale = L^{-1}
        L = dof[k] * beta[k] / (1 + beta[k]) * np.linalg.inv(Psi[k])
        np.testing.assert_allclose(S[k], np.linalg.inv(L), rtol=1e-10)
    # covariance convention: scale * dof / (dof - 2) is the covariance of scipy's multivariate_t
    draws = stats.multivariate_t(loc[1], S[1], df=dof[1]).rvs(size=200000, random_state=1)
    np.testing.assert_allclose(np.cov(draws.T), S[1] * dof[1] / (dof[1] - 2), atol=0.05 * np.abs(S[1]).max())
    with pytest.raises(BadInputError, match="nu must be"):
        normal_wishart_predictive(m, beta, np.array([1.5, 30.0]), Psi)
    with pytest.raises(BadInputError, match="beta must be"):
        normal_wishart_predictive(m, np.array([0.0, 1.0]), nu, Psi)
    with pytest.raises(BadInputError, match="do not match"):
        normal_wishart_predictive(m, beta, nu, Psi[:, :2])


def test_matches_dense_oracle(model):
    X, miss, w, loc, S, dof, c = model.X, model.miss, model.w, model.loc, model.S, model.dof, model.c
    lp = c.logpdf(X)
    for r in range(X.shape[0]):
        h, locs, scales, dofs, m = _dense_row(X[r], miss[r], w, loc, S, dof)
        cw, cl, cs, cd, cm = c.component_parameters(r)
        np.testing.assert_allclose(cw, h, rtol=1e-8, atol=1e-12)
        np.testing.assert_array_equal(cm, m)
        np.testing.assert_allclose(cd, dofs)
        if m.size == 0:
            assert lp[r] == 0.0
            continue
        np.testing.assert_allclose(cl, locs, rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(cs, scales, rtol=1e-8, atol=1e-10)
        ref = np.logaddexp.reduce([np.log(h[k]) + stats.multivariate_t(locs[k], scales[k], df=dofs[k]).logpdf(X[r, m])
                                   for k in range(w.size)])
        np.testing.assert_allclose(lp[r], ref, rtol=1e-9)


def test_observed_entries_untouched_and_summaries_consistent(model):
    X, miss, w, c = model.X, model.miss, model.w, model.c
    rng = np.random.default_rng(3)
    draws = c.sample(5, rng)
    lo, hi = c.interval(0.9)
    for arr in (c.mean(), lo, hi, *draws):
        np.testing.assert_array_equal(arr[~miss], X[~miss])
    assert np.all(c.variance()[~miss] == 0)
    assert np.all(lo[miss] < hi[miss])
    r = 0  # nothing observed: 2-D marginal density integrates to ~1 over a wide grid; 1-D matches scipy mixture
    _, locs, scales, dofs, _ = c.component_parameters(r)
    g = np.linspace(-60, 60, 4001)
    dens, comp = c.marginal_pdf(r, 2, g)
    ref = sum(c.weights[r, k] * stats.t.pdf(g, dofs[k], locs[k, 2], np.sqrt(scales[k, 2, 2])) for k in range(w.size))
    np.testing.assert_allclose(dens, ref, rtol=1e-9)
    np.testing.assert_allclose(comp.sum(0), dens)
    # interval endpoints have the requested CDF mass
    cdf = lambda x: sum(c.weights[r, k] * stats.t.cdf(x, dofs[k], locs[k, 2], np.sqrt(scales[k, 2, 2]))
                        for k in range(w.size))
    np.testing.assert_allclose([cdf(lo[r, 2]), cdf(hi[r, 2])], [0.05, 0.95], atol=1e-9)
    gx, gy = np.linspace(-40, 40, 401), np.linspace(-40, 40, 401)
    d2, _ = c.marginal_pdf_2d(r, 0, 1, gx, gy)
    ref2 = sum(c.weights[r, k] * stats.multivariate_t(locs[k, :2], scales[k, :2, :2], df=dofs[k]).pdf(
        np.stack(np.meshgrid(gx[::50], gy[::50]), -1)) for k in range(w.size))
    np.testing.assert_allclose(d2[::50, ::50], ref2, rtol=1e-8)


def test_sample_moments_match_mean_and_variance(model):
    miss, c = model.miss, model.c
    draws = c.sample(20000, np.random.default_rng(7))
    mu, var = c.mean(), c.variance()
    sd = np.sqrt(var[miss])
    err_mean = np.abs(draws.mean(0)[miss] - mu[miss]) / sd
    assert np.all(err_mean < 0.06)
    ratio = draws.var(0)[miss] / var[miss]
    assert np.all(np.abs(ratio - 1) < 0.2)  # heavy tails (dof >= 3): loose but real
    r = int(np.flatnonzero(miss.sum(1) >= 2)[1])
    mis = c.component_parameters(r)[-1]
    emp = np.cov(draws[:, r, mis].T)
    cov = c.covariance(r)
    np.testing.assert_allclose(np.diag(cov), var[r, mis])
    np.testing.assert_allclose(emp, cov, atol=0.2 * np.abs(cov).max())


def test_moments_do_not_exist_for_small_dof():
    rng = np.random.default_rng(2)
    w, loc, S, _ = _random_model(rng, K=2, D=2)
    X = np.array([[np.nan, np.nan], [1.0, np.nan]])
    c = StudentTConditionalMixture.from_student_t_mixture(X, w, loc, S, np.array([0.8, 5.0]))
    assert np.all(np.isnan(c.mean()[0])) and np.isfinite(c.mean()[1, 1])  # dof 0.8 + |o| = 1.8 > 1 in row 1
    assert np.all(np.isinf(c.variance()[0])) and np.isinf(c.variance()[1, 1])  # 1.8 <= 2
    assert np.all(np.isinf(c.covariance(0)))
    assert np.all(np.isfinite(c.logpdf(np.zeros((2, 2)))))


def test_converges_to_plugin_gaussian_for_large_beta_nu():
    rng = np.random.default_rng(4)
    K, D = 3, 4
    _, loc, Sigma, _ = _random_model(rng, K, D)
    w = rng.dirichlet(np.ones(K))
    X, miss = _data(rng, n=25, D=D)
    Xn = np.where(miss, np.nan, X)
    gauss = ConditionalMixture.from_gaussian_mixture(Xn, w, loc, Sigma)
    gaps = []
    for big in (1e2, 1e4, 1e6):
        nu = np.full(K, big)
        loc_t, S, dof = normal_wishart_predictive(loc, np.full(K, big), nu, Sigma * big)
        t = StudentTConditionalMixture.from_student_t_mixture(Xn, w, loc_t, S, dof)
        gaps.append(np.max(np.abs(t.logpdf(X) - gauss.logpdf(X))))
    assert gaps[0] > gaps[1] > gaps[2]
    assert gaps[2] < 1e-4
    np.testing.assert_allclose(t.weights, gauss.weights, atol=1e-4)
    np.testing.assert_allclose(t.mean(), gauss.mean(), atol=1e-4)
    np.testing.assert_allclose(t.variance(), gauss.variance(), rtol=1e-3, atol=1e-6)


@pytest.mark.filterwarnings("ignore::explorer.core.mixtures.vb_dpgmm.VBConvergenceWarning")
def test_far_outliers_keep_a_finite_nll_where_the_gaussian_collapses():
    """The thesis motivation (garriga2017 §3.2): plug-in Gaussians give vanishing likelihood far away."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(300, 3))
    X[:, 1] += X[:, 0]
    Xm = X.copy()
    Xm[rng.random(X.shape) < 0.25] = np.nan
    Xm[:3, :2] = [[0.0, np.nan], [0.5, np.nan], [np.nan, np.nan]]
    data = vb.prepare(Xm)
    state = vb.fit(data, vb.VBConfig(n_components=2, max_iter=30, tol=1e-4), np.random.default_rng(0)).state
    t = vb.predictive_conditional(state, data)
    g = vb.predictive_conditional(state, data, kind="plugin")
    assert isinstance(g, ConditionalMixture)
    truth = np.where(np.isnan(Xm), X, Xm)
    truth[:3, 1] = [60.0, -80.0, 100.0]  # ~60-100 sd away
    with np.errstate(all="ignore"):
        lt, lg = t.logpdf(truth), g.logpdf(truth)
    # t tails decay polynomially: a few hundred nats; the Gaussian's quadratic decay costs thousands
    assert np.all(np.isfinite(lt[:3])) and np.all(lt[:3] > -1000)
    assert np.all(lg[:3] < 5 * lt[:3])
    # on typical rows the two agree closely (large posterior counts)
    typical = np.isnan(Xm[3:]).any(1)
    assert abs(np.mean(lt[3:][typical]) - np.mean(lg[3:][typical])) < 0.1


@pytest.mark.filterwarnings("ignore::explorer.core.mixtures.vb_dpgmm.VBConvergenceWarning")
def test_predictive_conditional_uses_state_parameters():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(60, 3))
    X[rng.random(X.shape) < 0.3] = np.nan
    data = vb.prepare(X)
    state = vb.fit(data, vb.VBConfig(n_components=3, max_iter=5), np.random.default_rng(1)).state
    t = vb.predictive_conditional(state, data, columns=["a", "b", "c"])
    loc, S, dof = normal_wishart_predictive(state.means, state.beta, state.nu, state.scatter)
    ref = StudentTConditionalMixture.from_student_t_mixture(X, state.weights, loc, S, dof)
    np.testing.assert_allclose(t.weights, ref.weights)
    assert t.columns == ("a", "b", "c")
    r = int(np.flatnonzero(np.isnan(X).any(1))[0])
    j = int(np.flatnonzero(np.isnan(X[r]))[0])
    np.testing.assert_allclose(t.marginal_pdf(r, "abc"[j], [0.0])[0], ref.marginal_pdf(r, j, [0.0])[0])
    with pytest.raises(BadInputError, match="kind must be"):
        vb.predictive_conditional(state, data, kind="gauss")


def test_bad_inputs(model):
    X, miss, Xn, w, loc, S, dof, c = (model.X, model.miss, model.Xn, model.w, model.loc, model.S, model.dof,
                                      model.c)
    make = StudentTConditionalMixture.from_student_t_mixture
    with pytest.raises(BadInputError, match="dof must be"):
        make(Xn, w, loc, S, dof[:2])
    with pytest.raises(BadInputError, match="dof must be"):
        make(Xn, w, loc, S, -dof)
    with pytest.raises(BadInputError, match="sum to one"):
        make(Xn, 2 * w, loc, S, dof)
    with pytest.raises(BadInputError, match="X has 3 column"):
        make(Xn[:, :3], w, loc, S, dof)
    with pytest.raises(BadInputError, match="symmetric"):
        make(Xn, w, loc, S + np.triu(np.ones(S.shape[1:]), 1), dof)
    with pytest.raises(BadInputError, match="NaN value"):
        make(Xn, w, loc, S, dof, missing=np.zeros_like(miss))
    with pytest.raises(BadInputError, match="level must be"):
        c.interval(1.5)
    with pytest.raises(BadInputError, match="rng must be"):
        c.sample(2, 0)
    with pytest.raises(BadInputError, match="n_draws"):
        c.sample(0, np.random.default_rng(0))
    with pytest.raises(BadInputError, match="complete values"):
        c.logpdf(Xn)
    with pytest.raises(BadInputError, match="expected"):
        c.logpdf(X[:3])
    with pytest.raises(BadInputError, match="is observed in row"):
        c.marginal_pdf(1, 0, [0.0])
    with pytest.raises(BadInputError, match="two different"):
        c.marginal_pdf_2d(0, 1, 1, [0.0], [0.0])
    with pytest.raises(BadInputError, match="out of range"):
        c.component_parameters(999)
