r"""Dirichlet-process multinomial mixture with MAR missing data: the collapsed Gibbs sampler.

Marlin (2008) section 4.2 (digest section 3.2). Model: :math:`\phi \sim DP(\alpha\phi_0)`,
:math:`\beta_n \sim \phi`, :math:`x_n \sim P(x \mid \beta_n)`, base measure
:math:`\phi_0 = \prod_d \mathrm{Dir}(\beta_d \mid \phi_{d0})` (4.2.10) with a symmetric
:math:`\phi_{vd0} = \phi_0` (``phi0``). The cluster parameters are integrated out; the state is the
partition z. Under MAR only the available entries :math:`a_{dn} = 1` enter (the response :math:`r_{dn}`
is ignored). With :math:`c_k^{-n}` the size of cluster k and :math:`c_{vdk}^{-n}` its counts of value v in
column d, both without row n:

.. math::

    P(z_n = k \mid z^{-n}, x) &\propto \frac{c_k^{-n}}{N - 1 + \alpha} \prod_{d: a_{dn} = 1}
        \frac{c_{x_{dn} dk}^{-n} + \phi_0}{\sum_{v'} c_{v'dk}^{-n} + V\phi_0}   &(4.2.14)\\
    P(z_n = \text{new} \mid z^{-n}, x) &\propto \frac{\alpha}{N - 1 + \alpha} \prod_{d: a_{dn} = 1} \frac{1}{V}
        &(4.2.15 = 4.2.12)

(the CRP predictive with the sum to N - 1: erratum 4.2.5 applied). The counts are cached and updated
incrementally; a cluster is created when a row takes the new option and removed when its last row
leaves. One :func:`step` is a sweep over the rows in order 0..N-1 with uniforms drawn from the injected
``rng`` (the compiled kernel :mod:`explorer.core._compiled.dp_multinomial`, or the numpy reference, which makes the
same draws; ``strategy``). Measured (CPU time, one core) at N = 3000, D = 20, V = 5, 70 % of the entries
unavailable, alpha = phi0 = 2, about 10 clusters: 3.3 ms per compiled sweep (the first sweep from
singletons 0.4 s, the numba load about 1 s per process, a first compilation several seconds) and 0.45 s per
numpy sweep.

The default start is one cluster per row (``init="singletons"``): single-site Gibbs merges clusters easily
but rarely splits one, and on 300 rows from 3 well-separated clusters 8 of 8 chains started from
singletons found them within 100 sweeps, against 5 of 8 from a CRP draw and 0 of 8 from one cluster.

Predictive distributions (:func:`predict_proba`), averaged over the kept samples s = 1..S:

* **training rows** (4.2.19 corrected + 4.2.20): the Rao-Blackwellised cluster parameters
  :math:`\beta_{vdk}^s = (\phi_0 + c_{vdk}^s) / \sum_{v'} (\phi_0 + c_{v'dk}^s)` (erratum 4.2.19: the
  per-column :math:`\phi_{vd0}` and the normaliser summed over v), and
  :math:`P(x_{dn} = v) = \frac1S \sum_s \beta^s_{vd z_n^s}`;
* **novel rows** (4.2.17): each sample as a finite mixture of :math:`K^s + 1` components,
  :math:`\hat\theta_k = c_k / (N + \alpha)`, :math:`\hat\theta_{K^s+1} = \alpha / (N + \alpha)`,
  :math:`\hat\beta_k = \beta^s_k`, :math:`\hat\beta_{vd,K^s+1} = 1/V`, and the finite-mixture predictive
  4.1.15 from the row's available entries.

Which rows are training rows: ``training=None`` (default) treats ``data`` as the training rows when it is
the training :class:`~explorer.core.discrete.ratings_data.RatingData` object itself or has exactly its codes and
availability, and as novel rows otherwise; ``training=True`` / ``False`` forces either. On the training
path only the *number* of rows of ``data`` is used (it must be N): the predictive of row n depends on its
sampled clusters and their training counts, so ``data`` may carry other response indicators or other
held-out entries of the same users (weak generalisation).

API: :class:`DPMultinomialConfig`, :func:`init`, :func:`step` (one sweep), :func:`fit` (burn-in and
thinning -> :class:`DPMultinomialSamples`), :func:`predict_proba`, :func:`log_joint` (the collapsed
:math:`\log P(z) + \log P(x^o \mid z)`, CRP 4.2.8 times the Dirichlet-multinomial marginals).
States are immutable; every step returns new arrays.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln, logsumexp

from explorer.core.discrete.ratings_data import RatingData
from explorer.core.validation import BadInputError, check_int

__all__ = [
    "DPMultinomialConfig",
    "DPMultinomialState",
    "DPMultinomialSamples",
    "INITS",
    "STRATEGIES",
    "init",
    "init_from_labels",
    "step",
    "fit",
    "log_joint",
    "cluster_counts",
    "predict_proba",
    "resolve_strategy",
    "warm_up_kernels",
]

INITS = ("singletons", "crp", "single")
STRATEGIES = ("auto", "compiled", "numpy")


def _check_positive(name: str, value) -> None:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not np.isfinite(value) or value <= 0:
        raise BadInputError(f"{name} must be a finite number > 0, got {value!r}.")


@dataclass(frozen=True, slots=True)
class DPMultinomialConfig:
    """Settings of the collapsed Gibbs sampler.

    Parameters
    ----------
    alpha : float
        DP concentration, > 0 (thesis: 2).
    phi0 : float
        Symmetric Dirichlet parameter of the base measure, > 0 (thesis: 2).
    init : {"singletons", "crp", "single"}
        Starting partition: one cluster per row (default; see the module docstring), drawn from the CRP
        prior with ``rng``, or all rows in one cluster.
    strategy : {"auto", "compiled", "numpy"}
        The sweep: the numba kernel (``"auto"`` when numba imports) or the numpy reference.
    """

    alpha: float = 2.0
    phi0: float = 2.0
    init: str = "singletons"
    strategy: str = "auto"

    def __post_init__(self):
        _check_positive("alpha", self.alpha)
        _check_positive("phi0", self.phi0)
        if self.init not in INITS:
            raise BadInputError(f"init must be one of {INITS}, got {self.init!r}.")
        if self.strategy not in STRATEGIES:
            raise BadInputError(f"strategy must be one of {STRATEGIES}, got {self.strategy!r}.")


@dataclass(frozen=True, eq=False, slots=True)
class DPMultinomialState:
    """The partition after ``sweep`` sweeps: ``z`` (N,) labels 0..K-1 (clusters numbered by first
    occupied slot), ``sizes`` (K,) :math:`c_k`, ``counts`` (K, D, V) :math:`c_{vdk}` (available entries only),
    ``log_joint`` the collapsed :math:`\\log P(z \\mid \\alpha) + \\log P(x^o \\mid z, \\phi_0)`."""

    sweep: int
    z: np.ndarray
    sizes: np.ndarray
    counts: np.ndarray
    log_joint: float

    @property
    def n_clusters(self) -> int:
        return int(self.sizes.shape[0])

    @property
    def objective(self) -> float:
        """The collapsed log joint (for monitors that read ``objective``; a sampler does not maximise it)."""
        return self.log_joint


@dataclass(frozen=True, eq=False, slots=True)
class DPMultinomialSamples:
    """What :func:`fit` returns.

    ``z`` (S, N) the kept partitions, ``sweeps`` (S,) after which sweep each was kept; ``log_joint`` and
    ``n_clusters`` (n_sweeps + 1,) the traces of every sweep (index 0 = the initial state); ``data`` the
    training :class:`~explorer.core.discrete.ratings_data.RatingData`; ``last`` the final state (to continue with
    ``fit(..., init_state=samples.last)``).
    """

    z: np.ndarray
    sweeps: np.ndarray
    log_joint: np.ndarray
    n_clusters: np.ndarray
    data: RatingData
    config: DPMultinomialConfig
    last: DPMultinomialState

    @property
    def n_samples(self) -> int:
        return int(self.z.shape[0])


def _check_data(data) -> RatingData:
    if not isinstance(data, RatingData):
        raise BadInputError(f"data must be a RatingData (build it with explorer.core.discrete.ratings_data.prepare); "
                            f"got {type(data).__name__}.")
    return data


def cluster_counts(z: np.ndarray, data: RatingData, n_clusters: int | None = None):
    """(sizes (K,), counts (K, D, V)) of a labelling z (N,) with labels 0..K-1, available entries only."""
    z = np.asarray(z, dtype=np.int64)
    K = int(z.max()) + 1 if n_clusters is None else int(n_clusters)
    sizes = np.bincount(z, minlength=K).astype(np.int64)
    member = np.zeros((data.n_samples, K))
    member[np.arange(data.n_samples), z] = 1.0
    counts = np.rint(np.tensordot(member, data.onehot, axes=(0, 0))).astype(np.int64)
    return sizes, counts


def log_joint(sizes: np.ndarray, counts: np.ndarray, alpha: float, phi0: float) -> float:
    """Collapsed :math:`\\log P(z \\mid \\alpha) + \\log P(x^o \\mid z, \\phi_0)` of a partition with cluster
    ``sizes`` (K,) and ``counts`` (K, D, V): the CRP probability (4.2.8)
    :math:`\\alpha^K\\Gamma(\\alpha)\\prod_k\\Gamma(c_k)/\\Gamma(N + \\alpha)` times, per cluster and column, the
    Dirichlet-multinomial probability of the sequence of its available values."""
    sizes = np.asarray(sizes)
    N, K, V = int(sizes.sum()), sizes.size, counts.shape[2]
    prior = K * np.log(alpha) + gammaln(alpha) + gammaln(sizes).sum() - gammaln(N + alpha)
    tot = counts.sum(axis=2)
    lik = (gammaln(V * phi0) - gammaln(tot + V * phi0)).sum() + (gammaln(counts + phi0) - gammaln(phi0)).sum()
    return float(prior + lik)


def _make_state(sweep: int, z, sizes, counts, config: DPMultinomialConfig) -> DPMultinomialState:
    lj = log_joint(sizes, counts, config.alpha, config.phi0)
    for arr in (z, sizes, counts):
        arr.setflags(write=False)
    return DPMultinomialState(sweep=sweep, z=z, sizes=sizes, counts=counts, log_joint=lj)


def init_from_labels(data: RatingData, config: DPMultinomialConfig, z) -> DPMultinomialState:
    """Sweep-0 state from a labelling (any integers; relabelled 0..K-1 in order of first appearance)."""
    _check_data(data)
    z = np.asarray(z)
    if z.shape != (data.n_samples,) or z.dtype.kind not in "iu":
        raise BadInputError(f"z must be integer labels of shape {(data.n_samples,)}; got {z.dtype} {z.shape}.")
    _, first, inverse = np.unique(z, return_index=True, return_inverse=True)
    order = np.argsort(np.argsort(first))  # label of each unique value by first appearance
    zz = order[inverse.reshape(-1)].astype(np.int64)
    sizes, counts = cluster_counts(zz, data)
    return _make_state(0, zz, sizes, counts, config)


def init(data: RatingData, config: DPMultinomialConfig, rng: np.random.Generator) -> DPMultinomialState:
    """Sweep-0 state (``config.init``): singletons, a partition drawn from the CRP prior with ``rng``, or one
    cluster."""
    _check_data(data)
    N = data.n_samples
    if config.init == "single":
        z = np.zeros(N, dtype=np.int64)
    elif config.init == "singletons":
        z = np.arange(N, dtype=np.int64)
    else:
        z = np.empty(N, dtype=np.int64)
        sizes: list[int] = []
        u = rng.random(N)
        for n in range(N):  # CRP: existing k with c_k / (n + alpha), new with alpha / (n + alpha)
            cum = np.cumsum(np.append(sizes, config.alpha))
            k = int(np.searchsorted(cum, u[n] * cum[-1], side="right"))
            k = min(k, len(sizes))
            if k == len(sizes):
                sizes.append(0)
            sizes[k] += 1
            z[n] = k
    return init_from_labels(data, config, z)


@functools.cache
def _compiled_sweep():
    """The numba sweep, or None when numba cannot be imported."""
    try:
        from explorer.core._compiled.dp_multinomial import sweep
    except ImportError:  # pragma: no cover - numba is a dependency
        return None
    return sweep


def resolve_strategy(config: DPMultinomialConfig) -> str:
    """``"compiled"`` when asked for or ``"auto"`` and numba imports, else ``"numpy"``."""
    if config.strategy != "auto":
        return config.strategy
    return "numpy" if _compiled_sweep() is None else "compiled"


def warm_up_kernels() -> None:
    """Load (or, with an empty numba cache, compile) the compiled sweep now, e.g. when an app starts."""
    from explorer.core._compiled.dp_multinomial import warm_up

    warm_up()


def _slot_buffers(state: DPMultinomialState, data: RatingData, phi0: float, capacity: int):
    """Slot buffers of ``capacity`` slots holding the state's clusters in slots 0..K-1 (see :mod:`._kernels_dp`)."""
    D, V = data.n_features, data.n_values
    K = state.n_clusters
    sizes = np.zeros(capacity, dtype=np.int64)
    counts = np.zeros((capacity, D, V), dtype=np.int64)
    sizes[:K] = state.sizes
    counts[:K] = state.counts
    totals = counts.sum(axis=2)
    log_num = np.log(counts + phi0)
    log_den = np.log(totals + V * phi0)
    return np.array(state.z, dtype=np.int64), sizes, counts, totals, log_num, log_den


def _grow(buffers, phi0: float):
    """The slot buffers with twice the capacity (the new slots empty)."""
    z, sizes, counts, totals, log_num, log_den = buffers
    extra = sizes.size
    V = counts.shape[2]
    return (z, np.concatenate([sizes, np.zeros(extra, dtype=np.int64)]),
            np.concatenate([counts, np.zeros((extra,) + counts.shape[1:], dtype=np.int64)]),
            np.concatenate([totals, np.zeros((extra,) + totals.shape[1:], dtype=np.int64)]),
            np.concatenate([log_num, np.full((extra,) + log_num.shape[1:], np.log(phi0))]),
            np.concatenate([log_den, np.full((extra,) + log_den.shape[1:], np.log(V * phi0))]))


def _sweep_numpy(codes, z, sizes, counts, totals, log_num, log_den, alpha, phi0, u, start):
    """The numpy reference of :func:`explorer.core._compiled.dp_multinomial.sweep` (same slots, same order, same draws,
    same hand-over when every slot is taken)."""
    N, D = codes.shape
    V = counts.shape[2]
    capacity = sizes.size
    occupied = np.flatnonzero(sizes)
    n_slots = int(occupied[-1]) + 1 if occupied.size else 0
    log_v = np.log(V)
    for n in range(start, N):
        k_old = z[n]
        d_av = np.flatnonzero(codes[n] >= 0)
        x_av = codes[n, d_av]

        def move(k, delta):
            sizes[k] += delta
            counts[k, d_av, x_av] += delta
            totals[k, d_av] += delta
            log_num[k, d_av, x_av] = np.log(counts[k, d_av, x_av] + phi0)
            log_den[k, d_av] = np.log(totals[k, d_av] + V * phi0)

        move(k_old, -1)
        sz = sizes[:n_slots]
        occ = sz > 0
        empty = np.flatnonzero(~occ)
        if not empty.size and n_slots == capacity:
            move(k_old, 1)
            return n
        free = int(empty[0]) if empty.size else n_slots
        with np.errstate(divide="ignore"):
            s = np.log(sz.astype(float))
        for d, x in zip(d_av, x_av):
            s = s + (log_num[:n_slots, d, x] - log_den[:n_slots, d])
        s_new = np.log(alpha) - d_av.size * log_v
        top = max(s[occ].max(initial=-np.inf), s_new)
        w = np.where(occ, np.exp(np.where(occ, s, 0.0) - top), 0.0)
        acc = np.cumsum(w)
        total = (acc[-1] if acc.size else 0.0) + np.exp(s_new - top)
        hit = np.flatnonzero(u[n] * total < acc)
        k_new = int(hit[0]) if hit.size else free
        z[n] = k_new
        move(k_new, 1)
        n_slots = max(n_slots, k_new + 1)
        while n_slots > 0 and sizes[n_slots - 1] == 0:
            n_slots -= 1
    return N


def step(state: DPMultinomialState, data: RatingData, config: DPMultinomialConfig,
         rng: np.random.Generator) -> DPMultinomialState:
    """One collapsed Gibbs sweep (4.2.14-4.2.15) over the rows 0..N-1; a new state (new arrays), clusters
    relabelled 0..K-1 in slot order."""
    _check_data(data)
    if state.z.shape != (data.n_samples,) or state.counts.shape[1:] != (data.n_features, data.n_values):
        raise BadInputError(f"The state was made for {state.z.shape[0]} rows and counts {state.counts.shape[1:]}; "
                            f"these data have {data.n_samples} rows and {(data.n_features, data.n_values)}.")
    N = data.n_samples
    buffers = _slot_buffers(state, data, config.phi0, min(N, 2 * state.n_clusters + 16))
    u = rng.random(N)
    codes = np.ascontiguousarray(data.codes)
    sweep = _compiled_sweep() if resolve_strategy(config) == "compiled" else _sweep_numpy
    if sweep is None:
        raise BadInputError("strategy='compiled' needs numba, which cannot be imported; use strategy='numpy'.")
    n = 0
    while True:
        n = sweep(codes, *buffers, float(config.alpha), float(config.phi0), u, n)
        if n == N:
            break
        buffers = _grow(buffers, config.phi0)
    z, sizes, counts = buffers[:3]
    occupied = np.flatnonzero(sizes)
    relabel = np.full(sizes.size, -1, dtype=np.int64)
    relabel[occupied] = np.arange(occupied.size)
    return _make_state(state.sweep + 1, relabel[z], sizes[occupied].copy(), counts[occupied].copy(), config)


def fit(data: RatingData, config: DPMultinomialConfig, rng: np.random.Generator, *, n_sweeps: int = 1000,
        burn_in: int = 100, thin: int = 10, init_state: DPMultinomialState | None = None,
        callback: Callable[[DPMultinomialState], None] | None = None) -> DPMultinomialSamples:
    """Run ``n_sweeps`` sweeps (a loop over :func:`step`) from ``init_state`` or :func:`init`; keep the
    partition after every sweep t > ``burn_in`` with (t - burn_in) divisible by ``thin``, i.e.
    (n_sweeps - burn_in) // thin samples. ``callback(state)`` is called after every sweep (raise
    ``StopIteration`` to stop early; the samples so far are returned)."""
    _check_data(data)
    check_int("n_sweeps", n_sweeps, 1)
    check_int("burn_in", burn_in, 0)
    check_int("thin", thin, 1)
    if burn_in >= n_sweeps:
        raise BadInputError(f"burn_in={burn_in} leaves no sweep to keep out of n_sweeps={n_sweeps}; "
                            f"use burn_in < n_sweeps.")
    state = init(data, config, rng) if init_state is None else init_state
    start = state.sweep
    kept, when = [], []
    lj, nk = [state.log_joint], [state.n_clusters]
    for t in range(1, n_sweeps + 1):
        state = step(state, data, config, rng)
        lj.append(state.log_joint)
        nk.append(state.n_clusters)
        if t > burn_in and (t - burn_in) % thin == 0:
            kept.append(state.z)
            when.append(start + t)
        if callback is not None:
            try:
                callback(state)
            except StopIteration:
                break
    z = np.array(kept, dtype=np.int64).reshape(len(kept), data.n_samples)
    arrays = (z, np.array(when, dtype=np.int64), np.array(lj), np.array(nk, dtype=np.int64))
    for arr in arrays:
        arr.setflags(write=False)
    return DPMultinomialSamples(z=arrays[0], sweeps=arrays[1], log_joint=arrays[2], n_clusters=arrays[3],
                                data=data, config=config, last=state)


def _is_training(samples: DPMultinomialSamples, data: RatingData) -> bool:
    train = samples.data
    return data is train or (data.codes.shape == train.codes.shape and np.array_equal(data.codes, train.codes)
                             and np.array_equal(data.available, train.available))


def _rao_blackwell(counts: np.ndarray, phi0: float) -> np.ndarray:
    """4.2.19 (corrected): :math:`(\\phi_0 + c_{vdk}) / \\sum_{v'}(\\phi_0 + c_{v'dk})`, (K, D, V)."""
    num = counts + phi0
    return num / num.sum(axis=2, keepdims=True)


def predict_proba(samples: DPMultinomialSamples, data: RatingData, *, training: bool | None = None) -> np.ndarray:
    """(N, D, V) predictive distribution of every entry of ``data`` given the row's available entries,
    averaged over the samples: training rows by 4.2.19-4.2.20 (their sampled z), novel rows by the
    :math:`K^s + 1` pseudo-mixture 4.2.17 (see the module docstring for ``training``)."""
    _check_data(data)
    if not isinstance(samples, DPMultinomialSamples):
        raise BadInputError(f"samples must be what dp_multinomial.fit returns; got {type(samples).__name__}.")
    if samples.n_samples == 0:
        raise BadInputError("No sample was kept; fit with n_sweeps > burn_in + thin.")
    train = samples.data
    if data.n_features != train.n_features:
        raise BadInputError(f"data have {data.n_features} feature(s), but the model was fitted with "
                            f"{train.n_features}.")
    if data.n_values != train.n_values:
        raise BadInputError(f"data have n_values={data.n_values}, but the model has V={train.n_values} levels; "
                            f"prepare the data with n_values={train.n_values}.")
    is_train = _is_training(samples, data) if training is None else bool(training)
    if is_train and data.n_samples != train.n_samples:
        raise BadInputError(f"training=True needs the {train.n_samples} training rows; data have {data.n_samples}.")
    alpha, phi0 = samples.config.alpha, samples.config.phi0
    N, V = train.n_samples, train.n_values
    out = np.zeros((data.n_samples, data.n_features, V))
    for z in samples.z:
        sizes, counts = cluster_counts(z, train)
        beta = _rao_blackwell(counts, phi0)
        if is_train:
            out += beta[z]
            continue
        weights = np.append(sizes, alpha) / (N + alpha)
        beta_hat = np.concatenate([beta, np.full((1,) + beta.shape[1:], 1.0 / V)])
        table = np.tensordot(data.onehot, np.log(beta_hat), axes=([1, 2], [1, 2])) + np.log(weights)[None, :]
        q = np.exp(table - logsumexp(table, axis=1, keepdims=True))
        out += np.einsum("nk,kdv->ndv", q, beta_hat)
    return out / samples.n_samples
