"""Tests of explorer.core.discrete.crbm (Marlin 2008 Section 5.7, digest 4.4) and ratings_data.stack.

Oracles: predict_proba and hidden_proba against brute-force enumeration of the conditional RBM over every hidden
configuration and every value of the predicted entry (both variants, a mix of (r, a) patterns); the CD negative
statistics of long chains against the exact model expectations by enumeration, within Monte Carlo errors.
Properties: fitting data drawn from a known tiny conditional RBM raises the exact conditional log-likelihood;
probabilities sum to one, no NaN; immutable states; reproducible; fit is a loop over step.
Statistical (the thesis's claim, digest 6.3): cRBM/E-v beats cRBM on random items on a world with s = 0.25.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

from explorer.core.discrete import crbm as C
from explorer.core.discrete.rating_world import make_rating_world, score_split, split_protocol
from explorer.core.discrete.ratings_data import prepare, stack
from explorer.core.validation import BadInputError

D, V, K = 3, 3, 2
Z_ALL = np.array(list(itertools.product((0.0, 1.0), repeat=K)))


def tiny_state(rng, variant, scale=1.0, d=D, v=V, k=K):
    W = rng.normal(0, scale, (d, v, k))
    b1 = rng.normal(0, 1, (d, v))
    b0 = rng.normal(0, 1, v) if variant == "ev" else np.zeros(v)
    c = rng.normal(0, 1, k)
    return C.CRBMState(iteration=0, W=W, b1=b1, b0=b0, c=c, objective=0.0, variant=variant)


def tiny_data(rng, n=12):
    """Every (r, a) pattern mix on D = 3 items; one row fully unavailable, one fully available."""
    x = rng.integers(0, V, (n, D))
    a = rng.random((n, D)) < 0.6
    a[0] = False
    a[1] = True
    r = rng.random((n, D)) < 0.5
    return prepare(np.where(a, x, -1), response=r, available=a, n_values=V)


def neg_energy(st, variant, vals: dict, r_row, z):
    """-E of the conditional RBM (5.7.10 / 5.7.18) for the visible values ``vals`` {item: value} and hidden z."""
    e = float(st.c @ z)
    for d, v in vals.items():
        bias = st.b1[d, v] if (variant == "basic" or r_row[d]) else st.b0[v]
        e += float(st.W[d, v] @ z) + bias
    return e


def brute_predict(st, data, variant):
    N = data.n_samples
    out = np.zeros((N, D, V))
    for n in range(N):
        known = {d: int(data.codes[n, d]) for d in range(D) if data.available[n, d]}
        for d in range(D):
            rest = {dd: vv for dd, vv in known.items() if dd != d}
            w = np.array([sum(np.exp(neg_energy(st, variant, {**rest, d: v}, data.response[n], z)) for z in Z_ALL)
                          for v in range(V)])
            out[n, d] = w / w.sum()
    return out


def brute_hidden(st, data):
    out = np.zeros((data.n_samples, K))
    for n in range(data.n_samples):
        known = {d: int(data.codes[n, d]) for d in range(D) if data.available[n, d]}
        w = np.array([np.exp(neg_energy(st, "basic", {}, data.response[n], z)
                             + sum(float(st.W[d, v] @ z) for d, v in known.items())) for z in Z_ALL])
        out[n] = (w[:, None] * Z_ALL).sum(0) / w.sum()
    return out


def brute_expectations(st, data, variant):
    """Exact sum over rows of the model expectations E[[x_d=v] z_k], E[[x_d=v]] (split b1 / b0 entries), E[z_k]
    under P(x_A, z | a_n, r_n), by enumerating the available entries' values and z."""
    eW, ex1, ex0, ec = np.zeros((D, V, K)), np.zeros((D, V)), np.zeros(V), np.zeros(K)
    for n in range(data.n_samples):
        A = [d for d in range(D) if data.available[n, d]]
        configs, weights = [], []
        for vals in itertools.product(range(V), repeat=len(A)):
            for z in Z_ALL:
                configs.append((dict(zip(A, vals)), z))
                weights.append(np.exp(neg_energy(st, variant, dict(zip(A, vals)), data.response[n], z)))
        weights = np.array(weights) / np.sum(weights)
        for (vals, z), w in zip(configs, weights):
            ec += w * z
            for d, v in vals.items():
                eW[d, v] += w * z
                if variant == "basic" or data.response[n, d]:
                    ex1[d, v] += w
                else:
                    ex0[v] += w
    return eW, ex1, ex0, ec


def exact_loglik(st, data, variant):
    """sum_n log P(x^o_n | a_n, r_n) of the conditional RBM, by enumeration."""
    total = 0.0
    for n in range(data.n_samples):
        A = [d for d in range(D) if data.available[n, d]]
        known = {d: int(data.codes[n, d]) for d in A}
        num = np.logaddexp.reduce([neg_energy(st, variant, known, data.response[n], z) for z in Z_ALL])
        den = np.logaddexp.reduce([neg_energy(st, variant, dict(zip(A, vals)), data.response[n], z)
                                   for vals in itertools.product(range(V), repeat=len(A)) for z in Z_ALL])
        total += num - den
    return total


# --------------------------------------------------------------------------- stack
def test_stack_concatenates_rows_and_validates():
    rng = np.random.default_rng(0)
    a, b = tiny_data(rng, 4), tiny_data(rng, 5)
    s = stack(a, b)
    assert s.n_samples == 9 and s.n_values == V
    for name in ("codes", "response", "available", "onehot"):
        np.testing.assert_array_equal(getattr(s, name), np.concatenate([getattr(a, name), getattr(b, name)]))
        assert not getattr(s, name).flags.writeable
    with pytest.raises(BadInputError, match="n_features"):
        stack(a, prepare(np.zeros((2, 4), int), n_values=V))
    with pytest.raises(BadInputError, match="n_values"):
        stack(a, prepare(np.zeros((2, 3), int), n_values=4))
    with pytest.raises(BadInputError, match="RatingData"):
        stack(a, np.zeros((2, 3)))
    with pytest.raises(BadInputError):
        stack()


# --------------------------------------------------------------------------- oracles
@pytest.mark.parametrize("variant", ["basic", "ev"])
def test_predict_and_hidden_match_enumeration(variant):
    rng = np.random.default_rng(1)
    st, data = tiny_state(rng, variant), tiny_data(rng)
    np.testing.assert_allclose(C.predict_proba(st, data), brute_predict(st, data, variant), atol=1e-10, rtol=0)
    np.testing.assert_allclose(C.hidden_proba(st, data), brute_hidden(st, data), atol=1e-10, rtol=0)


def test_ev_prediction_depends_on_r_and_basic_does_not():
    rng = np.random.default_rng(2)
    data = tiny_data(rng)
    flipped = prepare(np.where(data.available, data.codes, -1), response=~data.response,
                      available=data.available, n_values=V)
    ev = tiny_state(np.random.default_rng(3), "ev")
    basic = dataclasses.replace(ev, variant="basic")
    assert np.max(np.abs(C.predict_proba(ev, data) - C.predict_proba(ev, flipped))) > 1e-3
    np.testing.assert_array_equal(C.predict_proba(basic, data), C.predict_proba(basic, flipped))


@pytest.mark.parametrize("variant", ["basic", "ev"])
def test_negative_statistics_match_exact_expectations(variant):
    rng = np.random.default_rng(4)
    st, base = tiny_state(rng, variant, scale=0.8), tiny_data(rng, 8)
    reps = 60
    data = prepare(np.tile(np.where(base.available, base.codes, -1), (reps, 1)),
                   response=np.tile(base.response, (reps, 1)), available=np.tile(base.available, (reps, 1)),
                   n_values=V)
    eW, ex1, ex0, ec = (e * reps for e in brute_expectations(st, base, variant))
    batches = []
    for b in range(20):
        w, xm, cs = C._negative_statistics(st.W, st.b1, st.b0, st.c, data, variant, 15, np.random.default_rng([5, b]))
        x1, x0 = C._bias_statistics(xm, data, variant)
        batches.append(np.concatenate([w.ravel(), x1.ravel(), x0.ravel(), cs]))
    batches = np.array(batches)
    exact = np.concatenate([eW.ravel(), ex1.ravel(), ex0.ravel(), ec])
    mean, se = batches.mean(0), batches.std(0, ddof=1) / np.sqrt(len(batches))
    z = np.abs(mean - exact) / np.maximum(se, 1e-12)
    assert np.all((z < 5) | (np.abs(mean - exact) < 1e-9)), (z.max(), mean, exact)
    # and the chain is not just sitting at the data: the data statistics differ from the model's
    pw, _ = C._positive_statistics(st.W, st.c, data)
    assert np.max(np.abs(pw.ravel() - eW.ravel())) > 10 * se.max()


# --------------------------------------------------------------------------- properties
def sample_from_model(st, variant, rng, n):
    """Rows drawn exactly from the conditional RBM: a and r at random, then x_A ~ P(x_A | a, r) by enumeration."""
    a = rng.random((n, D)) < 0.75
    r = rng.random((n, D)) < 0.6
    a[:, 0] |= ~a.any(axis=1)
    x = np.full((n, D), -1)
    for i in range(n):
        A = [d for d in range(D) if a[i, d]]
        cfgs = list(itertools.product(range(V), repeat=len(A)))
        logw = np.array([np.logaddexp.reduce([neg_energy(st, variant, dict(zip(A, vals)), r[i], z) for z in Z_ALL])
                         for vals in cfgs])
        p = np.exp(logw - logw.max())
        x[i, A] = cfgs[rng.choice(len(cfgs), p=p / p.sum())]
    return prepare(x, response=r, available=a, n_values=V)


@pytest.mark.parametrize("variant", ["basic", "ev"])
def test_fit_raises_exact_conditional_likelihood(variant):
    rng = np.random.default_rng(6)
    truth = tiny_state(rng, variant, scale=0.3)
    W = np.array(truth.W)
    W[:, 0, 0], W[:, 2, 0], W[:, 2, 1], W[:, 0, 1] = 3.0, -3.0, 3.0, -3.0   # two "taste" units: low vs high
    truth = dataclasses.replace(truth, W=W, c=np.array([-1.5, -1.5]))
    data = sample_from_model(truth, variant, rng, 400)
    cfg = C.CRBMConfig(n_components=K, variant=variant, max_iter=300, learning_rate=0.5, schedule=100)
    res = C.fit(data, cfg, np.random.default_rng(7))
    start = C.init(data, cfg, np.random.default_rng(7))
    ll0, ll1 = exact_loglik(start, data, variant), exact_loglik(res.state, data, variant)
    ll_true = exact_loglik(truth, data, variant)
    assert ll1 > ll0 + 0.05 * data.n_samples, (ll0, ll1, ll_true)
    assert ll1 <= ll_true + 0.05 * data.n_samples   # a fit on 400 rows should not beat the truth by much
    p = C.predict_proba(res, data)
    assert np.all(np.isfinite(p)) and np.allclose(p.sum(axis=2), 1.0)
    assert res.n_iter == 300 and res.stop_reason == "max_iter" and len(res.trace) == 301
    assert res.trace[-1]["objective"] > res.trace[0]["objective"]


def test_fit_is_a_loop_over_step_reproducible_and_immutable():
    rng = np.random.default_rng(8)
    data = tiny_data(rng, 40)
    cfg = C.CRBMConfig(n_components=2, variant="ev", max_iter=7, learning_rate=0.3, schedule=3)
    res = C.fit(data, cfg, np.random.default_rng(9))
    again = C.fit(data, cfg, np.random.default_rng(9))
    g = np.random.default_rng(9)
    st = C.init(data, cfg, g)
    for _ in range(7):
        st = C.step(st, data, cfg, g)
    for name in ("W", "b1", "b0", "c"):
        np.testing.assert_array_equal(getattr(res.state, name), getattr(st, name))
        np.testing.assert_array_equal(getattr(res.state, name), getattr(again.state, name))
    assert res.state.objective == st.objective and st.iteration == 7
    with pytest.raises(ValueError):
        st.W[0, 0, 0] = 1.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        st.iteration = 3
    basic = C.fit(data, dataclasses.replace(cfg, variant="basic"), np.random.default_rng(9)).state
    assert np.all(basic.b0 == 0) and basic.variant == "basic"
    assert C.n_gibbs_steps(1, 200) == 1 and C.n_gibbs_steps(200, 200) == 1 and C.n_gibbs_steps(201, 200) == 2


def test_predictions_are_finite_with_extreme_parameters():
    rng = np.random.default_rng(10)
    st = tiny_state(rng, "ev", scale=400.0)
    p = C.predict_proba(st, tiny_data(rng))
    assert np.all(np.isfinite(p)) and np.allclose(p.sum(axis=2), 1.0)
    assert np.all(np.isfinite(C.hidden_proba(st, tiny_data(rng))))


# --------------------------------------------------------------------------- bad input
def test_bad_input():
    rng = np.random.default_rng(11)
    data = tiny_data(rng)
    for kwargs in ({"n_components": 0}, {"n_components": 1.5}, {"variant": "rbm"}, {"learning_rate": 0.0},
                   {"learning_rate": -1.0}, {"learning_rate": float("nan")}, {"schedule": 0}, {"schedule": 2.5},
                   {"weight_decay": -1.0}, {"max_iter": -1}, {"init_scale": -0.1}):
        with pytest.raises(BadInputError):
            C.CRBMConfig(**kwargs)
    only_selected = prepare(np.where(data.available, data.codes, -1), response=data.available,
                            available=data.available, n_values=V)
    with pytest.raises(BadInputError, match="random items"):
        C.fit(only_selected, C.CRBMConfig(variant="ev", max_iter=1), rng)
    C.init(only_selected, C.CRBMConfig(variant="basic"), rng)    # fine without random items
    with pytest.raises(BadInputError, match="RatingData"):
        C.init(np.zeros((3, 3)), C.CRBMConfig(), rng)
    with pytest.raises(BadInputError, match="Generator"):
        C.init(data, C.CRBMConfig(), np.random.RandomState(0))
    st = C.init(data, C.CRBMConfig(n_components=2), rng)
    with pytest.raises(BadInputError, match="D=4"):
        C.predict_proba(st, prepare(np.zeros((2, 4), int), n_values=V))
    with pytest.raises(BadInputError, match="V=4"):
        C.hidden_proba(st, prepare(np.zeros((2, 3), int), n_values=4))
    with pytest.raises(BadInputError, match="CRBMState"):
        C.predict_proba("state", data)
    with pytest.raises(BadInputError, match="variant"):
        C.step(st, data, C.CRBMConfig(n_components=2, variant="basic"), rng)


# --------------------------------------------------------------------------- the thesis's claim
def test_ev_beats_basic_on_random_items_at_strong_selection():
    """Digest 6.3 / Table 5.2: cRBM/E-v (trained on training + hold-out users) beats cRBM on random items.
    Weak generalisation NMAE, world with s = 0.25, paired over seeds; margin > 3 standard errors."""
    diffs = []
    for seed in range(3):
        rng = np.random.default_rng([57, seed])
        world = make_rating_world(700, 20, 5, s=0.25, rng=rng)
        split = split_protocol(world, n_test_users=100, n_holdout_users=120, rng=rng, n_random_items=4)
        nmae = {}
        for variant, data in (("basic", split.train), ("ev", stack(split.train, split.holdout))):
            cfg = C.CRBMConfig(n_components=5, variant=variant, max_iter=120, learning_rate=0.5, schedule=60)
            st = C.fit(data, cfg, np.random.default_rng([58, seed])).state
            nmae[variant] = score_split(split, C.predict_proba(st, split.train),
                                        C.predict_proba(st, split.test))["nmae_weak_random"]
        diffs.append(nmae["basic"] - nmae["ev"])
    diffs = np.array(diffs)
    assert diffs.mean() > 3 * diffs.std(ddof=1) / np.sqrt(diffs.size), diffs
