"""The synthetic rating world and the chapter-5 protocol: mechanism, invariants, drop rule, bad input."""

import numpy as np
import pytest

from explorer.core.discrete.rating_world import (
    THESIS_S,
    linear_value_effect_mu,
    make_rating_world,
    split_protocol,
)
from explorer.core.validation import BadInputError


def test_linear_value_effect_matches_the_thesis():
    assert np.allclose(linear_value_effect_mu(0.25), [0, 0.25, 0.5, 0.75, 1.0])
    assert np.allclose(linear_value_effect_mu(0.0), 0.5)
    for s in THESIS_S:
        assert np.allclose(linear_value_effect_mu(s), s * (np.arange(1, 6) - 3) + 0.5)
    assert np.allclose(linear_value_effect_mu(0.5, n_values=3), [0, 0.5, 1])


def test_world_shapes_parameters_and_selection_rates():
    w = make_rating_world(6000, 12, 4, s=0.125, rng=np.random.default_rng(0))
    assert w.codes.shape == w.response.shape == (6000, 12)
    assert w.codes.min() >= 0 and w.codes.max() <= 4
    assert np.allclose(w.weights.sum(), 1) and np.allclose(w.probs.sum(-1), 1)
    assert w.probs.shape == (4, 12, 5)
    # empirical P(r = 1 | x = v) within 4 standard errors of mu_v
    for v in range(5):
        sel = w.response[w.codes == v]
        se = np.sqrt(w.mu[v] * (1 - w.mu[v]) / sel.size)
        assert abs(sel.mean() - w.mu[v]) < 4 * se
    # the ratings follow the clusters' distributions: item 0 of cluster 0
    x = w.codes[w.clusters == 0, 0]
    freq = np.bincount(x, minlength=5) / x.size
    assert np.abs(freq - w.probs[0, 0]).max() < 4 * np.sqrt(0.25 / x.size)


def test_extreme_effect_and_general_mu():
    w = make_rating_world(300, 10, 3, s=0.25, rng=np.random.default_rng(1))
    assert not w.response[w.codes == 0].any() and w.response[w.codes == 4].all()
    g = make_rating_world(300, 10, 3, mu=[1, 0, 0, 0, 0], rng=np.random.default_rng(1))
    assert np.array_equal(g.response, g.codes == 0)


def test_same_seed_same_world():
    a = make_rating_world(50, 8, 3, s=0.0625, rng=np.random.default_rng(7))
    b = make_rating_world(50, 8, 3, s=0.0625, rng=np.random.default_rng(7))
    assert np.array_equal(a.codes, b.codes) and np.array_equal(a.response, b.response)


@pytest.mark.parametrize("n_random", [1, 3])
def test_protocol_invariants(n_random):
    w = make_rating_world(400, 10, 3, s=0.1875, rng=np.random.default_rng(2))
    sp = split_protocol(w, n_test_users=60, n_holdout_users=40, rng=np.random.default_rng(3),
                        n_random_items=n_random)
    users = np.concatenate([sp.train_users, sp.test_users, sp.holdout_users, sp.dropped])
    assert np.array_equal(np.sort(users), np.arange(400))  # disjoint and complete
    assert sp.test_users.size == 60 and sp.holdout_users.size == 40
    for gen, data, who in (("weak", sp.train, sp.train_users), ("strong", sp.test, sp.test_users)):
        # r is the world's r everywhere (kept for selected test items), values known only where available
        assert np.array_equal(data.response, w.response[who])
        assert np.all(data.response[data.available])  # every observed rating was user-selected
        assert np.array_equal(data.codes[data.available], w.codes[who][data.available])
        rnd, usr = sp.targets[(gen, "random")], sp.targets[(gen, "user")]
        assert len(rnd) == n_random * who.size and len(usr) == who.size
        assert np.array_equal(np.bincount(usr.rows, minlength=who.size), np.ones(who.size))
        for t in (rnd, usr):  # test items are never observed, and their true codes / r are reported
            assert not data.available[t.rows, t.items].any()
            assert np.array_equal(t.codes, w.codes[who][t.rows, t.items])
            assert np.array_equal(t.response, w.response[who][t.rows, t.items])
        assert usr.response.all()
        # no user test item is also a random test item
        rnd_set = set(zip(rnd.rows.tolist(), rnd.items.tolist()))
        assert not rnd_set & set(zip(usr.rows.tolist(), usr.items.tolist()))
        # observed = selected minus the test items, exactly
        selected = w.response[who].copy()
        selected[rnd.rows, rnd.items] = False
        selected[usr.rows, usr.items] = False
        assert np.array_equal(data.available, selected)
        assert (data.available.sum(1) >= 1).all()
    # hold-out users: their random items are available, with r kept ((r=0, a=1) when not selected)
    h = sp.holdout
    assert np.array_equal(h.response, w.response[sp.holdout_users])
    assert np.array_equal(h.codes[h.available], w.codes[sp.holdout_users][h.available])
    n_r0a1 = int((~h.response & h.available).sum())
    assert 0 < n_r0a1 <= n_random * sp.holdout_users.size
    assert h.available.sum() >= n_random * sp.holdout_users.size


def test_dropped_users_follow_the_rule():
    # few selections: many users cannot give an observed rating and a user-selected test item
    w = make_rating_world(300, 6, 2, mu=[0.15] * 5, rng=np.random.default_rng(4))
    sp = split_protocol(w, n_test_users=5, n_holdout_users=0, rng=np.random.default_rng(5))
    assert sp.n_dropped > 0 and sp.holdout is None
    assert np.all(w.response[sp.dropped].sum(1) <= 2)  # at most: one random + one user item, no observed
    assert np.all(w.response[sp.train_users].sum(1) >= 2)


@pytest.mark.parametrize("call, match", [
    (lambda: make_rating_world(10, 5, 2, rng=np.random.default_rng(0)), "exactly one"),
    (lambda: make_rating_world(10, 5, 2, s=0.1, mu=[0.5] * 5, rng=np.random.default_rng(0)), "exactly one"),
    (lambda: make_rating_world(10, 5, 2, s=0.3, rng=np.random.default_rng(0)), "outside"),
    (lambda: make_rating_world(10, 5, 2, mu=[0.5] * 4, rng=np.random.default_rng(0)), "5 probabilities"),
    (lambda: make_rating_world(10, 5, 2, mu=[0.0] * 5, rng=np.random.default_rng(0)), "all zeros"),
    (lambda: make_rating_world(10, 5, 0, s=0.1, rng=np.random.default_rng(0)), "n_clusters"),
    (lambda: make_rating_world(10, 5, 2, s=0.1, rng=0), "Generator"),
    (lambda: make_rating_world(10, 5, 2, s=0.1, rng=np.random.default_rng(0), concentration=0), "concentration"),
    (lambda: split_protocol("w", n_test_users=1, n_holdout_users=0, rng=np.random.default_rng(0)), "RatingWorld"),
    (lambda: split_protocol(make_rating_world(20, 5, 2, s=0.1, rng=np.random.default_rng(0)), n_test_users=30,
                            n_holdout_users=0, rng=np.random.default_rng(0)), "qualify"),
    (lambda: split_protocol(make_rating_world(20, 5, 2, s=0.1, rng=np.random.default_rng(0)), n_test_users=2,
                            n_holdout_users=0, rng=np.random.default_rng(0), n_random_items=5), "smaller"),
])
def test_bad_input(call, match):
    with pytest.raises(BadInputError, match=match):
        call()


def test_score_split_perfect_and_uniform_predictions():
    from explorer.core.discrete.rating_world import score_split
    w = make_rating_world(200, 8, 2, s=0.125, rng=np.random.default_rng(6))
    sp = split_protocol(w, n_test_users=40, n_holdout_users=0, rng=np.random.default_rng(7), n_random_items=3)
    perfect = {}
    for name, data, who in (("train", sp.train, sp.train_users), ("test", sp.test, sp.test_users)):
        perfect[name] = np.eye(5)[w.codes[who]]  # point mass on every true rating
    got = score_split(sp, perfect["train"], perfect["test"])
    assert all(got[f"nmae_{g}_{k}"] == 0.0 for g in ("weak", "strong") for k in ("random", "user"))
    assert got["ndcg_weak_random"] == pytest.approx(1.0) and got["ndcg_strong_random"] == pytest.approx(1.0)
    flat = score_split(sp, np.full((sp.train.n_samples, 8, 5), 0.2), np.full((sp.test.n_samples, 8, 5), 0.2))
    t = sp.targets[("strong", "user")]
    assert flat["nmae_strong_user"] == pytest.approx(np.mean(np.abs(2 - t.codes)) / 1.6)  # median code 2
    with pytest.raises(BadInputError, match="shape"):
        score_split(sp, perfect["test"], perfect["test"])
