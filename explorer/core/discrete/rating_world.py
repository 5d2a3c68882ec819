r"""A synthetic rating world with a known NMAR selection mechanism, and the Marlin chapter-5 protocol.

The Yahoo! LaunchCast ratings of marlin2008 (digest section 6.1) cannot be had, and the Jester set of
section 6.2 is the thesis's own *synthetic-missingness* world. This module builds the same kind of
world from scratch, so that every rating - selected or not - is known:

* :func:`make_rating_world`: users in latent clusters, complete ratings (codes 0..V-1) drawn from
  per-cluster per-item rating distributions, and the response indicator
  :math:`r_{dn} \sim \mathrm{Bernoulli}(\mu_{x_{dn}})` of a CPT-v mechanism (eq. 5.4.6) - by default
  the linear value effect :math:`\mu_v(s) = s\,(v - (V+1)/2) + 1/2` of section 5.2.1
  (:math:`v - 3` for V = 5; :math:`s \in \{0, 0.0625, 0.125, 0.1875, 0.25\}` in the thesis).
* :func:`split_protocol`: the protocol of digest sections 6.1-6.2 - per user random test item(s)
  drawn uniformly *regardless of selection* (if selected, the rating is hidden but ``r = 1`` is kept,
  the (r=1, a=0) case), one user-selected test item (r=1, a=0), the remaining selected ratings
  observed (r=1, a=1); users split into training, test (strong generalisation: inference from their
  observed ratings only, with the parameters fitted on the training users) and hold-out users whose
  random-item ratings feed CPT-v+ (eqs. 5.4.25-5.4.29, corrected: the (r=0, a=1) entries).

Rule for sparse users: a user needs at least ``min_observed`` (default 1) observed rating after the
test items are taken out, and at least one selected item that is not a random test item (to be its
user-selected test item). Users who fail are **dropped** before the split (``Split.dropped`` lists
them, ``Split.n_dropped`` counts them). Under a strong value effect this drops users whose ratings
are mostly low (few selections), a mild selection of its own; at the sizes of the experiment
(20+ items, mean selection rate 1/2) it is well under 1 % of users.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer.core.discrete.rating_metrics import ndcg, nmae, predictive_mean, predictive_median
from explorer.core.discrete.ratings_data import RatingData, prepare
from explorer.core.validation import BadInputError, check_int, check_rng

__all__ = [
    "RatingWorld", "Split", "Targets", "THESIS_S", "linear_value_effect_mu", "make_rating_world", "score_split",
    "split_protocol",
]

#: the five slopes of the Jester experiment (section 5.2.1)
THESIS_S = (0.0, 0.0625, 0.125, 0.1875, 0.25)


def linear_value_effect_mu(s: float, n_values: int = 5) -> np.ndarray:
    """mu_v(s) = s (v - (V+1)/2) + 1/2 for v = 1..V (section 5.2.1; s (v - 3) + 0.5 for V = 5).

    ``s`` must lie in [0, 1/(V-1)] so that every mu_v is a probability (s = 0.25 gives
    (0, 0.25, 0.5, 0.75, 1) for V = 5). Returns an array of shape (V,).
    """
    check_int("n_values", n_values, 2)
    s_max = 1.0 / (n_values - 1)
    try:
        slope = float(s)
    except (TypeError, ValueError):
        raise BadInputError(f"s must be a number in [0, {s_max:.4g}]; got {s!r}.") from None
    if not 0.0 <= slope <= s_max + 1e-12:
        raise BadInputError(f"s={s!r} is outside [0, 1/(V-1)] = [0, {s_max:.4g}] for n_values={n_values}.")
    return np.clip(slope * (np.arange(1, n_values + 1) - (n_values + 1) / 2) + 0.5, 0.0, 1.0)


@dataclass(frozen=True, eq=False, slots=True)
class RatingWorld:
    """The complete synthetic world.

    Attributes
    ----------
    codes : (N, D) int64, every rating as a code 0..V-1 (rating v = code + 1)
    response : (N, D) bool, r_dn (True = the user selected / rated the item)
    clusters : (N,) int64, the latent cluster z_n of each user
    weights : (K,) cluster proportions theta
    probs : (K, D, V) per-cluster per-item rating distributions beta (probs[k, d, v] = beta_vdk)
    mu : (V,) the selection model P(r = 1 | x = v)
    n_values : V
    """

    codes: np.ndarray
    response: np.ndarray
    clusters: np.ndarray
    weights: np.ndarray
    probs: np.ndarray
    mu: np.ndarray
    n_values: int

    @property
    def n_users(self) -> int:
        return int(self.codes.shape[0])

    @property
    def n_items(self) -> int:
        return int(self.codes.shape[1])


def _check_mu(mu, n_values: int) -> np.ndarray:
    m = np.asarray(mu, dtype=float)
    if m.shape != (n_values,) or not np.all(np.isfinite(m)) or np.any((m < 0) | (m > 1)):
        raise BadInputError(f"mu must be {n_values} probabilities in [0, 1] (one per rating value); got {mu!r}.")
    if not np.any(m > 0):
        raise BadInputError("mu is all zeros: no rating would ever be selected.")
    return m


def make_rating_world(
    n_users: int,
    n_items: int,
    n_clusters: int,
    *,
    n_values: int = 5,
    s: float | None = None,
    mu=None,
    rng: np.random.Generator,
    concentration: float = 0.3,
    weight_concentration: float = 10.0,
) -> RatingWorld:
    r"""Draw a rating world: clusters, complete ratings and a CPT-v selection mask.

    Generative process (the model of digest section 4.1 with the parameters drawn once):

    * theta ~ Dirichlet(``weight_concentration`` * 1_K) (the default 10 keeps every cluster populated);
    * beta_dk ~ Dirichlet(``concentration`` * 1_V) for every cluster k and item d - a small value
      (default 0.3) makes each cluster's rating of an item peaked, so that knowing a user's cluster
      predicts their ratings (the clusters are informative);
    * z_n ~ theta, x_dn | z_n = k ~ beta_dk (codes 0..V-1);
    * r_dn ~ Bernoulli(mu_{x_dn}) independently (CPT-v, eq. 5.4.6).

    Give the mechanism as ``s`` (the linear value effect, :func:`linear_value_effect_mu`) or as a
    general CPT-v ``mu`` of length V; exactly one of the two. ``rng`` is required (no global state).
    """
    for name, val, lo in (("n_users", n_users, 1), ("n_items", n_items, 1), ("n_clusters", n_clusters, 1),
                          ("n_values", n_values, 2)):
        check_int(name, val, lo)
    check_rng(rng)
    if (s is None) == (mu is None):
        raise BadInputError("Give exactly one of s (the linear value effect) or mu (a general CPT-v).")
    m = linear_value_effect_mu(s, n_values) if mu is None else _check_mu(mu, n_values)
    for name, val in (("concentration", concentration), ("weight_concentration", weight_concentration)):
        if not (np.isscalar(val) and np.isfinite(val) and val > 0):
            raise BadInputError(f"{name} must be a positive number; got {val!r}.")
    weights = rng.dirichlet(np.full(n_clusters, float(weight_concentration)))
    probs = rng.dirichlet(np.full(n_values, float(concentration)), size=(n_clusters, n_items))
    clusters = rng.choice(n_clusters, size=n_users, p=weights).astype(np.int64)
    # inverse-CDF sampling of x_dn from beta_{., d, z_n}
    cdf = np.cumsum(probs[clusters], axis=-1)  # (N, D, V)
    u = rng.random((n_users, n_items, 1))
    codes = np.minimum((u > cdf).sum(-1), n_values - 1).astype(np.int64)
    response = rng.random((n_users, n_items)) < m[codes]
    for a in (codes, response, clusters, weights, probs, m):
        a.setflags(write=False)
    return RatingWorld(codes=codes, response=response, clusters=clusters, weights=weights, probs=probs, mu=m,
                       n_values=int(n_values))


@dataclass(frozen=True, eq=False, slots=True)
class Targets:
    """Test entries: ``rows`` index the rows of the matching :class:`RatingData`, ``items`` the items,
    ``codes`` the true codes, ``response`` the r_dn of each entry (always True for user-selected items)."""

    rows: np.ndarray
    items: np.ndarray
    codes: np.ndarray
    response: np.ndarray

    def __len__(self) -> int:
        return int(self.rows.size)


@dataclass(frozen=True, eq=False, slots=True)
class Split:
    """The result of :func:`split_protocol`.

    ``train`` / ``test`` / ``holdout``: :class:`RatingData` of the training, test and hold-out users
    (rows in the order of ``train_users`` / ``test_users`` / ``holdout_users``, indices into the
    world's users). In ``train`` and ``test`` the observed ratings are available (r=1, a=1); the test
    items are unavailable with their true r kept ((r=1, a=0) for the user-selected test item and a
    selected random item, (r=0, a=0) for an unselected random item). ``holdout`` additionally makes
    the random items available ((r=0, a=1) when not selected) for CPT-v+.

    ``targets[(generalisation, kind)]`` with generalisation in {"weak", "strong"} (rows of ``train``
    / ``test``) and kind in {"random", "user"}.
    """

    train: RatingData
    test: RatingData
    holdout: RatingData | None
    train_users: np.ndarray
    test_users: np.ndarray
    holdout_users: np.ndarray
    targets: dict
    dropped: np.ndarray

    @property
    def n_dropped(self) -> int:
        return int(self.dropped.size)


def _rating_data(world: RatingWorld, users, observed, extra_available=None) -> RatingData:
    avail = observed[users] if extra_available is None else observed[users] | extra_available[users]
    x = np.where(avail, world.codes[users], -1)
    return prepare(x, world.response[users], avail, n_values=world.n_values)


def _targets(world: RatingWorld, users, test_mask) -> Targets:
    rows, items = np.nonzero(test_mask[users])
    codes = world.codes[users][rows, items]
    resp = world.response[users][rows, items]
    return Targets(rows=rows.astype(np.int64), items=items.astype(np.int64), codes=codes.astype(np.int64),
                   response=resp)


def split_protocol(
    world: RatingWorld,
    *,
    n_test_users: int,
    n_holdout_users: int,
    rng: np.random.Generator,
    n_random_items: int = 1,
    min_observed: int = 1,
) -> Split:
    """Split a :class:`RatingWorld` by the Jester / Yahoo protocol (digest sections 6.1-6.2).

    For every user:

    1. ``n_random_items`` test items drawn uniformly without replacement from all items, regardless
       of selection (1 in the Jester protocol, 10 of 1000 in the Yahoo survey). A selected one has
       its rating removed from the observed set with r = 1 kept.
    2. One user-selected test item drawn uniformly from the selected items that are not random test
       items (r = 1, a = 0).
    3. Observed = the remaining selected ratings (r = 1, a = 1).

    Users with fewer than ``min_observed`` observed ratings, or with no selected item left for step 2,
    are dropped (see the module docstring). The kept users are permuted by ``rng``: the first
    ``n_test_users`` are test users (strong generalisation), the next ``n_holdout_users`` hold-out
    users, the rest training users (at least one). ``n_holdout_users = 0`` gives ``holdout=None``.
    """
    if not isinstance(world, RatingWorld):
        raise BadInputError(f"world must be a RatingWorld from make_rating_world; got {type(world).__name__}.")
    check_rng(rng)
    check_int("n_test_users", n_test_users, 1)
    check_int("n_holdout_users", n_holdout_users, 0)
    check_int("n_random_items", n_random_items, 1)
    check_int("min_observed", min_observed, 0)
    n, d = world.codes.shape
    if n_random_items >= d:
        raise BadInputError(f"n_random_items={n_random_items} must be smaller than the number of items ({d}).")
    sel = world.response
    # 1. random test items: the first n_random_items of a random permutation of the items, per user
    order = np.argsort(rng.random((n, d)), axis=1)
    random_mask = np.zeros((n, d), bool)
    np.put_along_axis(random_mask, order[:, :n_random_items], True, axis=1)
    # 2. one user-selected test item among the selected non-random items (uniform: the argmax of
    # uniform keys restricted to the candidates)
    candidates = sel & ~random_mask
    keys = np.where(candidates, rng.random((n, d)), -1.0)
    user_item = keys.argmax(1)
    has_user_item = candidates.any(1)
    user_mask = np.zeros((n, d), bool)
    user_mask[np.arange(n)[has_user_item], user_item[has_user_item]] = True
    observed = sel & ~random_mask & ~user_mask
    keep = has_user_item & (observed.sum(1) >= min_observed)
    kept = np.flatnonzero(keep)
    dropped = np.flatnonzero(~keep)
    if kept.size < n_test_users + n_holdout_users + 1:
        raise BadInputError(
            f"Only {kept.size} users qualify (at least {min_observed} observed rating(s) and one selected "
            f"test item; {dropped.size} dropped), fewer than n_test_users + n_holdout_users + 1 = "
            f"{n_test_users + n_holdout_users + 1}. Use more users or fewer test/hold-out users."
        )
    perm = rng.permutation(kept)
    test_users = np.sort(perm[:n_test_users])
    holdout_users = np.sort(perm[n_test_users:n_test_users + n_holdout_users])
    train_users = np.sort(perm[n_test_users + n_holdout_users:])
    train = _rating_data(world, train_users, observed)
    test = _rating_data(world, test_users, observed)
    holdout = _rating_data(world, holdout_users, observed, random_mask) if holdout_users.size else None
    targets = {
        ("weak", "random"): _targets(world, train_users, random_mask),
        ("weak", "user"): _targets(world, train_users, user_mask),
        ("strong", "random"): _targets(world, test_users, random_mask),
        ("strong", "user"): _targets(world, test_users, user_mask),
    }
    for a in (train_users, test_users, holdout_users, dropped):
        a.setflags(write=False)
    return Split(train=train, test=test, holdout=holdout, train_users=train_users, test_users=test_users,
                 holdout_users=holdout_users, targets=targets, dropped=dropped)


def score_split(split: Split, proba_train, proba_test, *, normaliser: float | None = None) -> dict:
    """The chapter-5 scores of one fitted model on one :class:`Split`.

    ``proba_train`` (N_train, D, V) and ``proba_test`` (N_test, D, V) are the model's ``predict_proba`` on
    ``split.train`` and ``split.test``. Returns ``nmae_{weak,strong}_{random,user}`` (the median prediction,
    :func:`~explorer.core.discrete.rating_metrics.nmae` with ``normaliser``) and ``ndcg_{weak,strong}_random`` (each
    user's random items ranked by the predictive mean, eq. 5.8.1, averaged over users; None when every user has a
    single random item, where NDCG is 1 by definition).
    """
    V = split.train.n_values
    probs = {"weak": np.asarray(proba_train, dtype=float), "strong": np.asarray(proba_test, dtype=float)}
    for gen, data in (("weak", split.train), ("strong", split.test)):
        want = (data.n_samples, data.n_features, V)
        if probs[gen].shape != want:
            raise BadInputError(f"proba_{'train' if gen == 'weak' else 'test'} has shape {probs[gen].shape}; "
                                f"expected {want} (predict_proba on split.{'train' if gen == 'weak' else 'test'}).")
    out = {}
    for (gen, kind), t in split.targets.items():
        p = probs[gen][t.rows, t.items]
        out[f"nmae_{gen}_{kind}"] = nmae(predictive_median(p), t.codes, n_values=V, normaliser=normaliser)
        if kind == "random":
            several = np.bincount(t.rows).max() > 1
            out[f"ndcg_{gen}_random"] = (float(np.mean(ndcg(predictive_mean(p), t.codes, groups=t.rows)))
                                         if several else None)
    return out
