"""Tests of explorer.core.discrete.dp_multinomial (Marlin 2008 section 4.2, the collapsed Gibbs sampler).

Oracle: the stationary distribution. On a tiny case (4 rows, D = 2, V = 2, some entries unavailable)
every one of the 15 partitions is enumerated and its exact posterior P(z | x) computed from the CRP
prior (sequential seating, 4.2.6-4.2.7) times each cluster's Polya-urn marginal likelihood (written
independently of the module's gammaln form); the sampler's partition frequencies over many sweeps must
agree within batch-means standard errors, and a sampler whose new-cluster weight or base measure is
perturbed must fail the same check. Further oracles: the compiled sweep and the numpy reference make
the same draws; log_joint equals the enumeration; the novel-row predictive (4.2.17) equals the exact
collapsed predictive from augmented partitions; the training-row predictive is the Rao-Blackwellised
4.2.19 (corrected) formula. Properties: cached counts match z, states are immutable, predictions sum to
one. Bad input: alpha or phi0 <= 0, burn_in >= n_sweeps, wrong V or D.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

from explorer.core.discrete import dp_multinomial as dp
from explorer.core.discrete.ratings_data import prepare
from explorer.core.validation import BadInputError

TINY = np.array([[0.0, 1.0],
                 [0.0, np.nan],
                 [1.0, 1.0],
                 [np.nan, 0.0]])
ALPHA, PHI0 = 1.3, 0.6


def set_partitions(n):
    """Every labelling of 0..n-1 in canonical form (labels by first appearance)."""
    def grow(prefix):
        if len(prefix) == n:
            yield tuple(prefix)
            return
        for k in range(max(prefix, default=-1) + 2):
            yield from grow(prefix + [k])
    return list(grow([]))


def canonical(z):
    seen = {}
    return tuple(seen.setdefault(int(k), len(seen)) for k in z)


def exact_log_posterior(x, z, alpha, phi0, V=2):
    """log CRP(z) + log P(x^o | z), by sequential seating and sequential Polya urns."""
    lp, sizes = 0.0, {}
    for n, k in enumerate(z):
        lp += np.log(sizes[k] / (n + alpha)) if k in sizes else np.log(alpha / (n + alpha))
        sizes[k] = sizes.get(k, 0) + 1
    for k in set(z):
        members = [n for n in range(len(z)) if z[n] == k]
        for d in range(x.shape[1]):
            seen = np.zeros(V)
            for n in members:
                if not np.isnan(x[n, d]):
                    v = int(x[n, d])
                    lp += np.log((phi0 + seen[v]) / (V * phi0 + seen.sum()))
                    seen[v] += 1
    return lp


def exact_posterior(x, alpha, phi0):
    parts = set_partitions(x.shape[0])
    logp = np.array([exact_log_posterior(x, z, alpha, phi0) for z in parts])
    p = np.exp(logp - logp.max())
    return parts, p / p.sum()


def batch_z_scores(zs, parts, p, n_batches=25):
    """Largest |frequency - p| / standard error over the partitions; the standard error from batch means
    (floored at the iid value, autocorrelation only widens it)."""
    index = {z: i for i, z in enumerate(parts)}
    hits = np.zeros((len(zs), len(parts)))
    hits[np.arange(len(zs)), [index[canonical(z)] for z in zs]] = 1.0
    T = len(zs) - len(zs) % n_batches
    batches = hits[:T].reshape(n_batches, -1, len(parts)).mean(axis=1)
    freq = batches.mean(axis=0)
    se = np.maximum(batches.std(axis=0, ddof=1) / np.sqrt(n_batches), np.sqrt(p * (1 - p) / T))
    return float(np.max(np.abs(freq - p) / se)), float(0.5 * np.abs(freq - p).sum())


def test_log_joint_is_the_enumerated_crp_times_polya_urn():
    data = prepare(TINY, n_values=2)
    cfg = dp.DPMultinomialConfig(alpha=ALPHA, phi0=PHI0)
    for z in set_partitions(4):
        st = dp.init_from_labels(data, cfg, np.array(z))
        np.testing.assert_allclose(st.log_joint, exact_log_posterior(TINY, z, ALPHA, PHI0), rtol=1e-12)
    assert len(set_partitions(4)) == 15


def test_stationary_distribution_is_the_enumerated_posterior():
    data = prepare(TINY, n_values=2)
    parts, p = exact_posterior(TINY, ALPHA, PHI0)
    assert p.min() > 0.005  # every partition is visited often enough to be checked

    def agrees(alpha, phi0, n_sweeps, seed):
        """Every partition's frequency within 4.5 batch-means standard errors of the exact posterior (a
        Bonferroni bound over the 15 cells) and total variation below 0.03."""
        samples = dp.fit(data, dp.DPMultinomialConfig(alpha=alpha, phi0=phi0), np.random.default_rng(seed),
                         n_sweeps=n_sweeps + 100, burn_in=100, thin=1)
        zmax, tv = batch_z_scores(samples.z, parts, p)
        return zmax < 4.5 and tv < 0.03

    assert agrees(ALPHA, PHI0, 12000, seed=0)
    # the same check rejects samplers with a perturbed conditional, even on half as many sweeps: the
    # new-cluster weight alpha / (N + alpha) where 4.2.15 has alpha / (N - 1 + alpha) (alpha scaled by
    # (N - 1 + alpha) / (N + alpha)), and a base measure phi0 off by 50 %
    N = 4
    assert not agrees(ALPHA * (N - 1 + ALPHA) / (N + ALPHA), PHI0, 6000, seed=1)
    assert not agrees(ALPHA, 1.5 * PHI0, 6000, seed=2)


def separated_data(rng, n=200, D=8, V=4, K=3, hole=0.3):
    protos = rng.dirichlet(np.full(V, 0.15), size=(K, D))
    z = rng.integers(0, K, n)
    x = np.array([[rng.choice(V, p=protos[k, d]) for d in range(D)] for k in z], dtype=float)
    x[rng.random(x.shape) < hole] = np.nan
    return x, z


def test_compiled_and_numpy_sweeps_make_the_same_draws_and_keep_counts_consistent():
    rng = np.random.default_rng(2)
    x, _ = separated_data(rng, n=80, D=5, V=3)
    data = prepare(x, n_values=3)
    # alpha = 40 from one cluster: many new clusters, so the slot buffers (2K + 16) must grow
    for alpha, how in [(40.0, "single"), (2.0, "crp")]:
        a = dp.DPMultinomialConfig(alpha=alpha, phi0=0.5, init=how, strategy="compiled")
        b = dp.DPMultinomialConfig(alpha=alpha, phi0=0.5, init=how, strategy="numpy")
        sa = sb = dp.init(data, a, np.random.default_rng(3))
        ra, rb = np.random.default_rng(4), np.random.default_rng(4)
        for _ in range(4):
            prev_z, prev_counts = sa.z.copy(), sa.counts.copy()
            old = sa
            sa, sb = dp.step(sa, data, a, ra), dp.step(sb, data, b, rb)
            np.testing.assert_array_equal(sa.z, sb.z)
            np.testing.assert_array_equal(sa.counts, sb.counts)
            np.testing.assert_array_equal(old.z, prev_z)  # the input state is untouched
            np.testing.assert_array_equal(old.counts, prev_counts)
            sizes, counts = dp.cluster_counts(sa.z, data)
            np.testing.assert_array_equal(sa.sizes, sizes)
            np.testing.assert_array_equal(sa.counts, counts)
            assert sa.sizes.min() >= 1 and sa.sizes.sum() == 80 and sa.sweep == old.sweep + 1
            np.testing.assert_allclose(sa.log_joint, dp.log_joint(sizes, counts, alpha, 0.5), rtol=1e-12)
        if alpha == 40.0:
            assert sa.n_clusters > 18  # more than the first buffer capacity
    with pytest.raises(ValueError):
        sa.z[0] = 1


def test_sampler_finds_well_separated_clusters():
    rng = np.random.default_rng(5)
    x, truth = separated_data(rng, n=300, D=10, V=4, K=3, hole=0.3)
    samples = dp.fit(prepare(x, n_values=4), dp.DPMultinomialConfig(), rng, n_sweeps=200, burn_in=100, thin=10)
    assert dp.DPMultinomialConfig().init == "singletons"
    assert samples.n_samples == 10
    np.testing.assert_array_equal(samples.sweeps, np.arange(110, 201, 10))
    assert samples.log_joint.shape == (201,) and samples.n_clusters.shape == (201,)
    assert np.median([adjusted_rand_score(truth, z) for z in samples.z]) > 0.85
    assert samples.log_joint[-1] > samples.log_joint[0]


def test_novel_row_predictive_is_the_exact_collapsed_predictive():
    rng = np.random.default_rng(6)
    x, _ = separated_data(rng, n=12, D=3, V=3, hole=0.3)
    data = prepare(x, n_values=3)
    cfg = dp.DPMultinomialConfig(alpha=1.7, phi0=0.8)
    samples = dp.fit(data, cfg, rng, n_sweeps=3, burn_in=0, thin=3)
    assert samples.n_samples == 1
    z = samples.z[0]
    new = np.array([[2.0, np.nan, 0.0], [np.nan, np.nan, np.nan], [np.nan, 1.0, np.nan]])
    pred = dp.predict_proba(samples, prepare(new, n_values=3))
    np.testing.assert_allclose(pred.sum(axis=2), 1.0, atol=1e-12)
    K = int(z.max()) + 1
    for i, row in enumerate(new):
        for d in np.flatnonzero(np.isnan(row)):
            joint = np.zeros(3)
            for v in range(3):
                row_v = row.copy()
                row_v[d] = v
                aug = prepare(np.vstack([x, row_v]), n_values=3)
                for k in range(K + 1):  # the new row in cluster k, or in a new one
                    sizes, counts = dp.cluster_counts(np.append(z, k), aug)
                    joint[v] += np.exp(dp.log_joint(sizes, counts, cfg.alpha, cfg.phi0))
            np.testing.assert_allclose(pred[i, d], joint / joint.sum(), rtol=1e-10)


def test_training_rows_use_the_rao_blackwellised_parameters():
    rng = np.random.default_rng(7)
    x, _ = separated_data(rng, n=40, D=4, V=3, hole=0.4)
    data = prepare(x, n_values=3)
    phi0 = 0.7
    samples = dp.fit(data, dp.DPMultinomialConfig(phi0=phi0), rng, n_sweeps=6, burn_in=2, thin=2)
    pred = dp.predict_proba(samples, data)
    expected = np.zeros_like(pred)
    for z in samples.z:
        for n in range(40):
            members = z == z[n]
            for d in range(4):
                col = x[members, d]
                c = np.array([(col == v).sum() for v in range(3)])
                expected[n, d] += (phi0 + c) / (3 * phi0 + c.sum())  # 4.2.19 corrected
    np.testing.assert_allclose(pred, expected / samples.n_samples, atol=1e-12)
    np.testing.assert_allclose(dp.predict_proba(samples, prepare(x, n_values=3)), pred)  # same content
    novel = dp.predict_proba(samples, data, training=False)
    np.testing.assert_allclose(novel.sum(axis=2), 1.0, atol=1e-12)
    assert not np.allclose(novel, pred)


def test_bad_input_is_refused_with_a_remedy():
    data = prepare(TINY, n_values=2)
    rng = np.random.default_rng(8)
    with pytest.raises(BadInputError, match="alpha must be a finite number > 0"):
        dp.DPMultinomialConfig(alpha=0.0)
    with pytest.raises(BadInputError, match="phi0 must be a finite number > 0"):
        dp.DPMultinomialConfig(phi0=-1.0)
    with pytest.raises(BadInputError, match="strategy must be one of"):
        dp.DPMultinomialConfig(strategy="gpu")
    with pytest.raises(BadInputError, match="burn_in < n_sweeps"):
        dp.fit(data, dp.DPMultinomialConfig(), rng, n_sweeps=10, burn_in=10)
    with pytest.raises(BadInputError, match="thin must be a positive integer"):
        dp.fit(data, dp.DPMultinomialConfig(), rng, n_sweeps=10, burn_in=0, thin=0)
    with pytest.raises(BadInputError, match="RatingData"):
        dp.init(TINY, dp.DPMultinomialConfig(), rng)
    samples = dp.fit(data, dp.DPMultinomialConfig(), rng, n_sweeps=4, burn_in=0, thin=2)
    with pytest.raises(BadInputError, match="n_values=3, but the model has V=2"):
        dp.predict_proba(samples, prepare(TINY, n_values=3))
    with pytest.raises(BadInputError, match="3 feature"):
        dp.predict_proba(samples, prepare(np.zeros((2, 3)), n_values=2))
    with pytest.raises(BadInputError, match="training=True needs the 4 training rows"):
        dp.predict_proba(samples, prepare(np.zeros((2, 2)), n_values=2), training=True)
    other = prepare(np.zeros((5, 2)), n_values=2)
    with pytest.raises(BadInputError, match="these data have 5 rows"):
        dp.step(samples.last, other, dp.DPMultinomialConfig(), rng)
