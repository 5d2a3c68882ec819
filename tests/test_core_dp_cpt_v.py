"""DP/CPT-v auxiliary-variable Gibbs sampler (explorer.core.discrete.dp_cpt_v, Marlin 5.5, digest 4.2).

Oracle: on a tiny data set (N=3 rows, D=2 items, V=2 values, every (r, a) kind present) the
posterior over partitions is computed exactly by enumeration -- CRP prior (4.2.8) times, per cluster
and item, the integral over beta of prod_n gamma_dn(beta), a polynomial in beta: a sum over the
completions of the unavailable entries of Dirichlet moments weighted by mu / (1 - mu) -- and compared
with the sampler's partition frequencies (total variation). Perturbed samplers (no auxiliary counts,
the garbled new-cluster term, a new cluster's beta from the prior) must fail the same check. With mu
free, the posterior mean of mu is compared with Gauss-Legendre quadrature over (mu_0, mu_1), which is
exact here (the integrand is a polynomial in mu).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.special import gammaln

from explorer.core.discrete import dp_cpt_v as dp
from explorer.core.discrete.ratings_data import prepare
from explorer.core.validation import BadInputError

# Tiny data set: every (r, a) kind. kind 0: r=1,a=1; 1: r=1,a=0; 2: r=0,a=0; 3: r=0,a=1.
_KIND = np.array([[2, 2, 0], [3, 1, 2], [0, 2, 1]])
_X = np.array([[-1, -1, 1], [1, -1, -1], [0, -1, -1]])
_MU = (0.1, 0.9)
_ALPHA = 1.0
_PHI0 = 0.3


def _tiny():
    r = (_KIND == 0) | (_KIND == 1)
    return prepare(_X, response=r, available=_X >= 0, n_values=2)


def _partitions(n):
    """Set partitions of range(n) as canonical label tuples (restricted growth strings)."""
    def grow(prefix, top):
        if len(prefix) == n:
            yield tuple(prefix)
            return
        for k in range(top + 2):
            yield from grow(prefix + [k], max(top, k))
    yield from grow([0], 0)


def _canonical(z):
    seen = {}
    return tuple(seen.setdefault(int(k), len(seen)) for k in z)


def _entry_weights(data, n, d, mu):
    """w(v) with gamma_dn(beta) = sum_v w(v) beta_v (mu: (V, ...) arrays)."""
    V = data.n_values
    if data.available[n, d]:
        x = data.codes[n, d]
        f = mu[x] if data.response[n, d] else 1.0 - mu[x]
        return [f if v == x else 0.0 * mu[0] for v in range(V)]
    return [mu[v] if data.response[n, d] else 1.0 - mu[v] for v in range(V)]


def _cluster_likelihood(data, members, mu, phi0):
    """prod_d E_Dir(phi0)[prod_{n in members} gamma_dn(beta_d)], summed over completions."""
    V = data.n_values
    total = 1.0
    for d in range(data.n_features):
        weights = [_entry_weights(data, n, d, mu) for n in members]
        acc = 0.0
        for values in itertools.product(range(V), repeat=len(members)):
            w = 1.0
            for wn, v in zip(weights, values):
                w = w * wn[v]
            c = np.bincount(values, minlength=V)
            log_moment = (gammaln(V * phi0) - gammaln(V * phi0 + c.sum())
                          + sum(gammaln(phi0 + c[v]) - gammaln(phi0) for v in range(V)))
            acc = acc + w * math.exp(log_moment)
        total = total * acc
    return total


def _partition_weights(data, mu, alpha, phi0):
    """Unnormalised P(partition, data | mu) for every partition (dict), mu: (V, ...) arrays."""
    N = data.n_samples
    out = {}
    for part in _partitions(N):
        K = max(part) + 1
        sizes = np.bincount(part)
        log_prior = K * math.log(alpha) + gammaln(alpha) + sum(gammaln(c) for c in sizes) - gammaln(N + alpha)
        lik = 1.0
        for k in range(K):
            lik = lik * _cluster_likelihood(data, [n for n in range(N) if part[n] == k], mu, phi0)
        out[part] = math.exp(log_prior) * lik
    return out


def _exact_posterior(data, mu, alpha, phi0):
    w = _partition_weights(data, np.asarray(mu), alpha, phi0)
    total = sum(w.values())
    return {p: v / total for p, v in w.items()}


def _run(data, config, n_sweeps, seed):
    rng = np.random.default_rng(seed)
    state = dp.init(data, config, rng)
    freq = {}
    mus = []
    for i in range(n_sweeps):
        state = dp.step(state, data, config, rng)
        p = _canonical(state.z)
        freq[p] = freq.get(p, 0) + 1
        mus.append(state.mu)
    return {p: c / n_sweeps for p, c in freq.items()}, np.array(mus)


def _tv(p, q):
    keys = set(p) | set(q)
    return 0.5 * sum(abs(p.get(k, 0.0) - q.get(k, 0.0)) for k in keys)


# ---------------------------------------------------------------------------------------------------
# oracle: partition posterior by enumeration (mu fixed)

_FIXED = dp.DPCPTvConfig(alpha=_ALPHA, phi0=_PHI0, mu_fixed=_MU)


@pytest.fixture(scope="module")
def exact_partitions():
    return _exact_posterior(_tiny(), _MU, _ALPHA, _PHI0)


def test_enumeration_oracle_is_a_distribution(exact_partitions):
    assert len(exact_partitions) == 5
    assert sum(exact_partitions.values()) == pytest.approx(1.0)
    assert min(exact_partitions.values()) > 0.02  # every partition is visited often enough to be checked


def test_partition_frequencies_match_the_exact_posterior(exact_partitions):
    freq, _ = _run(_tiny(), _FIXED, 4000, seed=1)
    assert _tv(freq, exact_partitions) < 0.03


def _perturbed_tv(monkeypatch, exact, n_sweeps=1500):
    freq, _ = _run(_tiny(), _FIXED, n_sweeps, seed=2)
    return _tv(freq, exact)


def test_without_auxiliary_counts_the_sampler_is_wrong(monkeypatch, exact_partitions):
    """beta drawn from the available counts only (no 5.5.10-11): the check above must fail."""
    original = dp._auxiliary_counts
    monkeypatch.setattr(dp, "_auxiliary_counts",
                        lambda sym, z, beta, mu, rng: original(sym, z, beta, mu, rng, aux=False))
    assert _perturbed_tv(monkeypatch, exact_partitions) > 0.06


def test_garbled_new_cluster_term_is_wrong(monkeypatch, exact_partitions):
    """5.5.9 as printed (the unavailable entries' factors lost from the new-cluster term) fails."""
    original = dp._new_cluster_table

    def garbled(phi_bar, mu):
        table = original(phi_bar, mu)
        table[..., mu.shape[0]:] = 0.0
        return table

    monkeypatch.setattr(dp, "_new_cluster_table", garbled)
    assert _perturbed_tv(monkeypatch, exact_partitions) > 0.06


def test_new_cluster_beta_from_the_prior_is_wrong(monkeypatch, exact_partitions):
    """A new cluster's beta from the base measure instead of H_n (its posterior given case n) fails."""
    original = dp._new_cluster_pool

    def prior_pool(rng, D, V, phi0):
        g, e, u = original(rng, D, V, phi0)
        return g, np.zeros_like(e), u

    monkeypatch.setattr(dp, "_new_cluster_pool", prior_pool)
    assert _perturbed_tv(monkeypatch, exact_partitions) > 0.06


# ---------------------------------------------------------------------------------------------------
# oracle: posterior mean of mu (mu free) by Gauss-Legendre quadrature (exact: polynomial integrand)

_XI = 2.0


def _exact_mu_mean(data, alpha, phi0, xi, n_nodes=12):
    nodes, w = np.polynomial.legendre.leggauss(n_nodes)
    nodes, w = (nodes + 1) / 2, w / 2
    m0, m1 = np.meshgrid(nodes, nodes, indexing="ij")
    weights = np.outer(w, w)
    mu = np.stack([m0, m1])
    lik = sum(_partition_weights(data, mu, alpha, phi0).values())
    post = weights * lik * (m0 * (1 - m0)) ** (xi - 1) * (m1 * (1 - m1)) ** (xi - 1)
    return np.array([(post * m0).sum(), (post * m1).sum()]) / post.sum()


def test_quadrature_is_converged():
    data = _tiny()
    assert np.allclose(_exact_mu_mean(data, _ALPHA, _PHI0, _XI, 12), _exact_mu_mean(data, _ALPHA, _PHI0, _XI, 20))


def test_posterior_mean_of_mu_matches_quadrature(monkeypatch):
    data = _tiny()
    config = dp.DPCPTvConfig(alpha=_ALPHA, phi0=_PHI0, xi1=_XI, xi0=_XI)
    exact = _exact_mu_mean(data, _ALPHA, _PHI0, _XI)
    _, mus = _run(data, config, 4000, seed=3)
    assert np.abs(mus[200:].mean(axis=0) - exact).max() < 0.02
    # the same check fails without the auxiliary counts in 5.5.13
    original = dp._auxiliary_counts
    monkeypatch.setattr(dp, "_auxiliary_counts",
                        lambda sym, z, beta, mu, rng: original(sym, z, beta, mu, rng, aux=False))
    _, wrong = _run(data, config, 1200, seed=3)
    assert np.abs(wrong[200:].mean(axis=0) - exact).max() > 0.06


# ---------------------------------------------------------------------------------------------------
# properties

def _synthetic(seed=0, N=60, D=6, V=3):
    rng = np.random.default_rng(seed)
    mu = np.linspace(0.2, 0.8, V)
    beta = rng.dirichlet(np.ones(V), size=(2, D))
    z = rng.integers(0, 2, N)
    x = np.array([[rng.choice(V, p=beta[z[n], d]) for d in range(D)] for n in range(N)])
    r = rng.random((N, D)) < mu[x]
    avail = r & (rng.random((N, D)) < 0.8)
    avail[:, 0] |= ~r[:, 0] & (rng.random(N) < 0.3)   # some random-item ratings (r=0, a=1)
    return prepare(np.where(avail, x, -1), response=r, available=avail, n_values=V)


def test_states_are_consistent_and_data_unchanged():
    data = _synthetic()
    before = [a.copy() for a in (data.codes, data.response, data.available, data.onehot)]
    seen = []
    samples = dp.fit(data, dp.DPCPTvConfig(), np.random.default_rng(0), n_sweeps=30, burn_in=10, thin=5,
                     callback=seen.append)
    assert len(seen) == 30 and [s.sweep for s in seen] == list(range(1, 31))
    assert len(samples) == 4 and samples.states[-1] is seen[-1]
    for s in samples.states:
        K = s.n_clusters
        assert s.z.min() == 0 and s.z.max() == K - 1
        assert np.all(s.counts > 0) and s.counts.sum() == data.n_samples
        assert s.beta.shape == (K, data.n_features, data.n_values)
        assert np.allclose(s.beta.sum(axis=2), 1.0) and np.all(s.beta > 0)
        assert np.all((s.mu > 0) & (s.mu < 1))
    for a, b in zip(before, (data.codes, data.response, data.available, data.onehot)):
        assert np.array_equal(a, b)


def test_same_seed_same_chain_and_stop_iteration():
    data = _synthetic(1)
    a = dp.fit(data, dp.DPCPTvConfig(), np.random.default_rng(5), n_sweeps=12, burn_in=2, thin=5)
    b = dp.fit(data, dp.DPCPTvConfig(), np.random.default_rng(5), n_sweeps=12, burn_in=2, thin=5)
    assert np.array_equal(a.states[-1].z, b.states[-1].z) and np.array_equal(a.mu, b.mu)

    def stop(state):
        if state.sweep == 7:
            raise StopIteration

    c = dp.fit(data, dp.DPCPTvConfig(), np.random.default_rng(5), n_sweeps=50, burn_in=2, thin=5, callback=stop)
    assert c.n_sweeps == 7 and len(c) == 1


def test_mu_fixed_is_kept():
    data = _synthetic(2)
    samples = dp.fit(data, dp.DPCPTvConfig(mu_fixed=(0.2, 0.5, 0.7)), np.random.default_rng(0), n_sweeps=5,
                     burn_in=0, thin=1)
    assert np.allclose(samples.mu, [0.2, 0.5, 0.7])


def test_predict_proba_training_rows_follow_5_5_14():
    data = _synthetic(3)
    samples = dp.fit(data, dp.DPCPTvConfig(), np.random.default_rng(1), n_sweeps=6, burn_in=2, thin=2)
    pred = dp.predict_proba(samples, data)
    assert pred.shape == (data.n_samples, data.n_features, data.n_values)
    assert np.allclose(pred.sum(axis=2), 1.0) and np.all(pred >= 0)
    expected = np.zeros_like(pred)
    for s in samples.states:
        for n in range(data.n_samples):
            for d in range(data.n_features):
                f = s.mu if data.response[n, d] else 1 - s.mu
                p = s.beta[s.z[n], d] * f
                expected[n, d] = expected[n, d] + p / p.sum()
    assert np.allclose(pred, expected / len(samples))
    # the training rows are recognised (also in a re-prepared copy of the data); training=False is the pseudo-mixture
    copy = prepare(np.where(data.available, data.codes, -1), response=data.response, available=data.available,
                   n_values=data.n_values)
    assert np.array_equal(dp.predict_proba(samples, copy), pred)
    assert not np.allclose(dp.predict_proba(samples, data, training=False), pred)


def test_predict_proba_new_rows_is_the_crp_pseudo_mixture():
    data = _synthetic(4)
    state = dp.fit(data, dp.DPCPTvConfig(alpha=1.5), np.random.default_rng(2), n_sweeps=4, burn_in=3,
                   thin=1).states[-1]
    new = _synthetic(5, N=7)
    pred = dp.predict_proba(state, new)
    assert np.allclose(pred.sum(axis=2), 1.0)
    N, K, V = data.n_samples, state.n_clusters, data.n_values
    betas = list(state.beta) + [np.full((data.n_features, V), 1 / V)]
    weights = list(state.counts / (N + 1.5)) + [1.5 / (N + 1.5)]
    for n in range(new.n_samples):
        q = np.zeros(K + 1)
        for k in range(K + 1):
            lik = weights[k]
            for d in range(new.n_features):   # gamma_dkn of 5.4.15, all four cases
                f = state.mu if new.response[n, d] else 1 - state.mu
                lik *= (betas[k][d] * f)[new.codes[n, d]] if new.available[n, d] else (betas[k][d] * f).sum()
            q[k] = lik
        q /= q.sum()
        for d in range(new.n_features):
            f = state.mu if new.response[n, d] else 1 - state.mu
            expect = sum(q[k] * betas[k][d] * f / (betas[k][d] * f).sum() for k in range(K + 1))
            assert np.allclose(pred[n, d], expect)


def test_prediction_depends_on_the_response_indicator():
    """With mu increasing in v, a held-out user-selected entry (r=1) is predicted higher than an unselected one."""
    data = _synthetic(6)
    samples = dp.fit(data, dp.DPCPTvConfig(mu_fixed=(0.1, 0.5, 0.9)), np.random.default_rng(0), n_sweeps=4,
                     burn_in=1, thin=1)
    x = np.full((2, data.n_features), -1)
    x[:, 1:] = data.codes[0, 1:].clip(0)
    probe = prepare(x, response=np.array([[True] * data.n_features, [False] * data.n_features]),
                    available=x >= 0, n_values=data.n_values)
    pred = dp.predict_proba(samples, probe)
    v = np.arange(data.n_values)
    assert pred[0, 0] @ v > pred[1, 0] @ v


# ---------------------------------------------------------------------------------------------------
# bad input

@pytest.mark.parametrize("kwargs, match", [
    (dict(alpha=0.0), "alpha"), (dict(phi0=-1.0), "phi0"), (dict(xi1=float("nan")), "xi1"),
    (dict(mu_fixed=(0.5, 1.0)), "strictly between"), (dict(mu_fixed=(0.5,)), "V >= 2"),
])
def test_bad_config(kwargs, match):
    with pytest.raises(BadInputError, match=match):
        dp.DPCPTvConfig(**kwargs)


def test_bad_inputs():
    data = _synthetic(7)
    rng = np.random.default_rng(0)
    with pytest.raises(BadInputError, match="RatingData"):
        dp.init(np.zeros((3, 2)), dp.DPCPTvConfig(), rng)
    with pytest.raises(BadInputError, match="n_values=3"):
        dp.init(data, dp.DPCPTvConfig(mu_fixed=(0.2, 0.8)), rng)
    with pytest.raises(BadInputError, match="Generator"):
        dp.init(data, dp.DPCPTvConfig(), 0)
    with pytest.raises(BadInputError, match="burn_in"):
        dp.fit(data, dp.DPCPTvConfig(), rng, n_sweeps=10, burn_in=10)
    state = dp.init(data, dp.DPCPTvConfig(), rng)
    with pytest.raises(BadInputError, match="does not match"):
        dp.step(state, _synthetic(8, N=10), dp.DPCPTvConfig(), rng)
    with pytest.raises(BadInputError, match="training=True"):
        dp.predict_proba(state, _synthetic(8, N=10), training=True)
    with pytest.raises(BadInputError, match="samples must be"):
        dp.predict_proba([], data)


def test_log_joint_by_brute_force():
    data = _synthetic(9, N=12, D=3)
    config = dp.DPCPTvConfig(alpha=1.3, phi0=0.7, xi1=2.5, xi0=1.5)
    s = dp.fit(data, config, np.random.default_rng(3), n_sweeps=3, burn_in=2, thin=1).states[-1]
    N, K = data.n_samples, s.n_clusters
    sizes = s.counts
    total = K * np.log(1.3) + math.lgamma(1.3) + sum(math.lgamma(c) for c in sizes) - math.lgamma(N + 1.3)
    V = data.n_values
    for k in range(K):
        for d in range(data.n_features):   # Dirichlet(0.7) density
            total += math.lgamma(0.7 * V) - V * math.lgamma(0.7) + sum(-0.3 * math.log(b) for b in s.beta[k, d])
    for m in s.mu:   # Beta(2.5, 1.5) density
        total += 1.5 * math.log(m) + 0.5 * math.log(1 - m) - (math.lgamma(2.5) + math.lgamma(1.5) - math.lgamma(4.0))
    for n in range(N):
        for d in range(data.n_features):
            f = s.mu if data.response[n, d] else 1 - s.mu
            g = s.beta[s.z[n], d] * f
            total += np.log(g[data.codes[n, d]] if data.available[n, d] else g.sum())
    assert s.log_joint == pytest.approx(total, rel=1e-10)
