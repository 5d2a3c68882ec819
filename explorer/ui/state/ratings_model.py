r"""The "Ratings" page's model: NMAR rating models (Marlin ch. 5) fitted live on the synthetic rating world.

A :class:`RatingsModel` draws a synthetic rating world (users x items, latent clusters, V = 5 levels,
the linear value effect :math:`\mu_v(s) = s(v - 3) + 0.5`, digest section 6.2, built by
:mod:`explorer.core.discrete.rating_world`), splits it with the weak-generalisation protocol (one held-out
user-selected item and one random item per user) and fits one of the models of digest sections 3.1,
3.2 and 4.1-4.4 to the training entries, one EM iteration, Gibbs sweep or contrastive-divergence update per
:meth:`step`:

========== =============================================== =========================================
key        model                                           core module
========== =============================================== =========================================
mar_mm     MAR multinomial mixture, MAP-EM (3.1)           :mod:`explorer.core.discrete.categorical_mixture`
cpt_v      MM/CPT-v, MAP-EM (4.1)                          :mod:`explorer.core.discrete.cpt_v`
cpt_v_plus MM/CPT-v+ (mu fixed, 5.4.25-29)                 :mod:`explorer.core.discrete.cpt_v` (erratum 5.4.29 applied)
logit_vd   MM/Logit-vd, generalised EM (4.3)               :mod:`explorer.core.discrete.logit_vd`
dp         DP multinomial mixture, collapsed Gibbs (3.2)   :mod:`explorer.core.discrete.dp_multinomial`
dp_cpt_v   DP/CPT-v, auxiliary-variable Gibbs (4.2)        :mod:`explorer.core.discrete.dp_cpt_v`
crbm       conditional RBM, CD-T (4.4, eqs. 5.7.10-17)     :mod:`explorer.core.discrete.crbm`
crbm_ev    cRBM/E-v, CD-T (4.4, eqs. 5.7.18-25)            :mod:`explorer.core.discrete.crbm`
========== =============================================== =========================================

The conditional RBMs model P(x | r) (a pattern-mixture factorisation), not P(r | x): they have no
selection model to show. cRBM/E-v learns its r = 0 visible biases from ratings of random items, so it is
trained on the training users *and* the hold-out users (digest 4.4), and scored on the training users.

A model whose core module is not installed is listed in :func:`available_models` as missing, and a
model whose module cannot be imported is refused with a message. Read-outs: the learned selection model against the truth
(:meth:`RatingsModel.selection`, with the moment estimate of digest 2.7), the objective per
iteration (:meth:`RatingsModel.trace`), the predictive distributions of one user's held-out
user-selected (r = 1) and unrated (r = 0) items (:meth:`RatingsModel.predictive`, eq. 5.4.24: the
NMAR prediction depends on r), and the weak-generalisation NMAE of the current fit
(:meth:`RatingsModel.scores`); :meth:`RatingsModel.snapshot` makes all of them at once, under the model's
lock, as an immutable :class:`RatingsSnapshot` that a page draws without waiting for the model.
:meth:`RatingsModel.finish` fits a run to its end at once (runs of the same settings are shared by every
model of the process). :func:`compare_models` fits several models at several K and s, repeated over world
seeds, for the comparison table (:class:`Comparison` does it a slice at a time). No Panel import here.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np
import param

from explorer.core.deprecation import renamed_names
from explorer.core.validation import BadInputError
from explorer.ui.state._settings import MAX_SEED, Settings
from explorer.ui.state._stepped import LockedStepping

__all__ = ["MODELS", "S_VALUES", "FinishedRun", "ModelSpec", "RatingsComparison", "RatingsModel", "RatingsSnapshot",
           "Run", "World", "available_models", "compare_models", "make_world", "weak_scores"]

#: The value effects s of the Jester protocol (digest 6.2): mu_v(s) = s (v - 3) + 0.5.
S_VALUES = (0.0, 0.0625, 0.125, 0.1875, 0.25)
V = 5
_SETTINGS = ("n_users", "n_items", "n_clusters", "s", "data_seed", "model", "n_components", "seed", "max_iter",
             "n_sweeps", "user", "compare_ks", "repeats")
#: Clusters a Gibbs sampler that takes a starting number starts from (DP/CPT-v): random assignments.
GIBBS_INIT_CLUSTERS = 10
#: Smallest mu_v CPT-v+ is given (mu_from_random_items returns 0 for a value never selected in the sample).
MU_FLOOR = 1e-3
#: K values the comparison table may use.
COMPARE_KS = (1, 2, 3, 5, 8, 10)


@dataclass(frozen=True)
class ModelSpec:
    """One rating model of the page: its key, label, core module, kind ('em', 'gibbs' or 'cd': contrastive
    divergence), whether its prediction depends on r (``nmar``) and whether it has a number of components K."""

    key: str
    label: str
    module: str
    kind: str
    nmar: bool
    uses_k: bool


MODELS = {
    "mar_mm": ModelSpec("mar_mm", "MAR MM", "explorer.core.discrete.categorical_mixture", "em", False, True),
    "cpt_v": ModelSpec("cpt_v", "MM/CPT-v", "explorer.core.discrete.cpt_v", "em", True, True),
    "cpt_v_plus": ModelSpec("cpt_v_plus", "MM/CPT-v+", "explorer.core.discrete.cpt_v", "em", True, True),
    "logit_vd": ModelSpec("logit_vd", "MM/Logit-vd", "explorer.core.discrete.logit_vd", "em", True, True),
    "dp": ModelSpec("dp", "DP", "explorer.core.discrete.dp_multinomial", "gibbs", False, False),
    "dp_cpt_v": ModelSpec("dp_cpt_v", "DP/CPT-v", "explorer.core.discrete.dp_cpt_v", "gibbs", True, False),
    "crbm": ModelSpec("crbm", "cRBM", "explorer.core.discrete.crbm", "cd", False, True),
    "crbm_ev": ModelSpec("crbm_ev", "cRBM/E-v", "explorer.core.discrete.crbm", "cd", True, True),
}
#: The conditional RBMs' variant (``CRBMConfig.variant``) per model key.
CRBM_VARIANTS = {"crbm": "basic", "crbm_ev": "ev"}


def _module(spec: ModelSpec):
    """The core module of ``spec``, or None when it is not there (yet)."""
    try:
        return importlib.import_module(spec.module)
    except ImportError:
        return None


def available_models() -> dict[str, bool]:
    """``{key: installed}`` for every model of :data:`MODELS`: its core module is there.

    Found without importing it (``importlib.util.find_spec``): a page lists the models when it opens, and
    importing every one would load numba (cRBM, DP/CPT-v) for nobody. A module that is there but fails to
    import is refused with a message when its model is chosen (:class:`Run`).
    """
    return {k: _installed(s) for k, s in MODELS.items()}


def _installed(spec: ModelSpec) -> bool:
    try:
        return importlib.util.find_spec(spec.module) is not None
    except (ImportError, ValueError):
        return False


def true_mu(s: float, n_values: int = V) -> np.ndarray:
    """The linear value effect of the Jester protocol: mu_v(s) = s (v - 3) + 0.5, v = 1..V (digest 6.2)."""
    v = np.arange(1, n_values + 1, dtype=float)
    return s * (v - (n_values + 1) / 2) + 0.5


# ============================================================================ the world and its protocol
@dataclass(frozen=True)
class World:
    """A synthetic rating world (:func:`explorer.core.discrete.rating_world.make_rating_world`) split by the protocol
    (:func:`~explorer.core.discrete.rating_world.split_protocol`, one random and one user-selected test item per user).

    ``world`` the complete :class:`~explorer.core.discrete.rating_world.RatingWorld`; ``split`` its
    :class:`~explorer.core.discrete.rating_world.Split`; ``train`` the training users' RatingData (rows = the
    training users); ``codes`` (N, D) their complete ratings (codes 0..V-1); ``mu`` (V,) the true
    mu_v(s); ``s``. Weak generalisation is scored on ``split.targets[("weak", kind)]``.
    """

    world: object
    split: object
    s: float

    @property
    def train(self):
        return self.split.train

    @property
    def holdout(self):
        return self.split.holdout

    @property
    def mu(self) -> np.ndarray:
        return np.asarray(self.world.mu, dtype=float)

    @property
    def codes(self) -> np.ndarray:
        return self.world.codes[self.split.train_users]

    def targets(self, kind: str):
        return self.split.targets[("weak", kind)]


def make_world(n_users: int = 300, n_items: int = 20, n_clusters: int = 3, s: float = 0.25, seed: int = 0) -> World:
    """Draw the H5 rating world (digest 6.2: mu_v(s) = s (v - 3) + 0.5) and split it for weak generalisation.

    ``n_users`` training users plus ``max(5, n_users // 5)`` hold-out users (their random-item ratings give
    CPT-v+ its mu, eqs. 5.4.25-29) and one test user (the protocol asks for one; strong generalisation
    is not shown on the page). Users the protocol drops (no selected item left) are not replaced.
    """
    from explorer.core.discrete.rating_world import make_rating_world, split_protocol

    for name, value, low in (("n_users", n_users, 10), ("n_items", n_items, 3), ("n_clusters", n_clusters, 1)):
        if int(value) != value or value < low:
            raise BadInputError(f"{name} must be an integer >= {low}; got {value!r}.")
    rng = np.random.default_rng(seed)
    n_holdout = max(5, n_users // 5)
    world = make_rating_world(n_users + n_holdout + 1, n_items, n_clusters, s=s, rng=rng)
    split = split_protocol(world, n_test_users=1, n_holdout_users=n_holdout, rng=rng)
    return World(world=world, split=split, s=float(s))


def weak_scores(world: World, proba) -> dict:
    """Weak-generalisation NMAE (normaliser 1.6, median prediction) on the random and user-selected test items."""
    from explorer.core.discrete.rating_metrics import nmae, predictive_median

    out = {}
    for kind in ("random", "user"):
        t = world.targets(kind)
        out[kind] = nmae(predictive_median(proba[t.rows, t.items]), t.codes) if len(t) else float("nan")
    return out


# ============================================================================ one run of one model
def _config_class(module):
    """The module's Config dataclass (the one public name ending in 'Config')."""
    names = [n for n in dir(module) if n.endswith("Config") and not n.startswith("_")]
    if len(names) != 1:
        raise BadInputError(f"{module.__name__} has no unique *Config class ({names}).")
    return getattr(module, names[0])


def _make_config(module, **wanted):
    """The module's Config with those of ``wanted`` it accepts (None values left at their defaults)."""
    import dataclasses

    cls = _config_class(module)
    accepted = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in wanted.items() if k in accepted and v is not None})


def _objective(state) -> float:
    """The state's objective (EM: log posterior; Gibbs: the log joint it reports), NaN when it has none."""
    for name in ("objective", "log_joint", "log_posterior", "log_likelihood"):
        value = getattr(state, name, None)
        if value is not None:
            return float(value)
    return float("nan")


@dataclass(frozen=True)
class FinishedRun:
    """The end of a :class:`Run`: its last state, objective per iteration, Gibbs samples and why it stopped."""

    state: object
    objectives: tuple
    samples: tuple
    stop_reason: str


#: Runs fitted to their end by :meth:`RatingsModel.finish`, by settings, shared by every session of the process
#: (the start screen's fit is the same for everyone): at most this many.
FINISHED_RUNS_KEPT = 32
_FINISHED_RUNS: OrderedDict = OrderedDict()
_FINISHED_RUNS_LOCK = threading.Lock()


def _finished_run(key) -> FinishedRun | None:
    with _FINISHED_RUNS_LOCK:
        result = _FINISHED_RUNS.get(key)
        if result is not None:
            _FINISHED_RUNS.move_to_end(key)
        return result


def _keep_finished_run(key, result: FinishedRun) -> None:
    with _FINISHED_RUNS_LOCK:
        _FINISHED_RUNS[key] = result
        while len(_FINISHED_RUNS) > FINISHED_RUNS_KEPT:
            _FINISHED_RUNS.popitem(last=False)


class Run:
    """One fit of one model to a world's training data, advanced by :meth:`advance` (not thread-safe).

    EM models stop when the objective changes by less than ``tol`` per user or after ``max_iter``
    iterations; Gibbs samplers after ``n_sweeps`` sweeps, keeping every ``thin``-th state after
    ``burn_in`` as a sample for prediction (digest 4.2: 1000 / 100 / 10 in the thesis); the conditional
    RBMs after ``max_iter`` contrastive-divergence updates (their objective, the log pseudo-likelihood of
    the training entries, is a monitor: CD does not maximise it, so no ``tol``). ``fit_data`` is what the
    model learns from: the training users, plus the hold-out users for cRBM/E-v.
    """

    def __init__(self, spec: ModelSpec, world: World, *, n_components: int = 3, seed: int = 0, max_iter: int = 200,
                 tol: float = 1e-6, n_sweeps: int = 100, burn_in: int | None = None, thin: int = 2):
        module = _module(spec)
        if module is None:
            raise BadInputError(f"{spec.label} is not available: its module {spec.module} is not installed yet.")
        self.spec, self.world, self.module = spec, world, module
        self.data = world.train
        self.fit_data = self.data
        if spec.key == "crbm_ev":  # its r = 0 biases are learned from the hold-out users' random-item ratings
            from explorer.core.discrete.ratings_data import stack

            self.fit_data = stack(world.train, world.holdout)
        self.max_iter, self.tol, self.n_sweeps = int(max_iter), float(tol), int(n_sweeps)
        self.burn_in = max(1, self.n_sweeps // 4) if burn_in is None else int(burn_in)
        self.thin = int(thin)
        mu_fixed = None
        if spec.key == "cpt_v_plus":
            # a value never selected in the sample gives mu_v = 0, which the EM's config refuses (an observed
            # rating of that value would have probability 0): floored at MU_FLOOR
            mu_fixed = module.mu_from_random_items(world.holdout, floor=MU_FLOOR)
        self.mu_fixed = mu_fixed
        self.config = _make_config(module, n_components=n_components, max_iter=max_iter, tol=tol,
                                   mu_fixed=None if mu_fixed is None else tuple(float(m) for m in mu_fixed),
                                   variant=CRBM_VARIANTS.get(spec.key))
        self.rng = np.random.default_rng(seed)
        if spec.kind == "gibbs" and "n_clusters" in inspect.signature(module.init).parameters:
            # DP/CPT-v from one cluster takes far more than 100 sweeps to split it (weak NMAE 0.56-0.59 against
            # 0.39-0.47 from 10 random clusters at s = 0, 300 users x 20 items)
            self.state = module.init(self.data, self.config, self.rng, n_clusters=GIBBS_INIT_CLUSTERS)
        else:
            self.state = module.init(self.fit_data, self.config, self.rng)
        self.samples: list = []
        #: the objective per iteration (a sampler without one: its number of clusters, see ``trace_name``)
        self.trace_name = "objective" if np.isfinite(_objective(self.state)) else "clusters"
        self.objectives = [self._value()]
        self.stop_reason = ""
        self._proba = None  # (iteration, proba) cache

    def _value(self) -> float:
        return _objective(self.state) if self.trace_name == "objective" else float(self.n_clusters())

    @property
    def iteration(self) -> int:
        return len(self.objectives) - 1

    @property
    def finished(self) -> bool:
        return bool(self.stop_reason)

    def advance(self) -> bool:
        """One EM iteration or Gibbs sweep; False when the run is already over."""
        if self.finished:
            return False
        if self.spec.kind == "gibbs":
            self.state = self.module.step(self.state, self.data, self.config, self.rng)
            it = self.iteration + 1
            if it > self.burn_in and (it - self.burn_in) % self.thin == 0:
                self.samples.append(self.state)
            self.objectives.append(self._value())
            if it >= self.n_sweeps:
                self.stop_reason = "n_sweeps"
        elif self.spec.kind == "cd":
            self.state = self.module.step(self.state, self.fit_data, self.config, self.rng)
            self.objectives.append(_objective(self.state))
            if self.iteration >= self.max_iter:
                self.stop_reason = "max_iter"
        else:
            old = self.objectives[-1]
            self.state = self.module.step(self.state, self.data, self.config)
            self.objectives.append(_objective(self.state))
            change = abs(self.objectives[-1] - old) / max(1, self.data.n_samples)
            if change < self.tol:
                self.stop_reason = "tol"
            elif self.iteration >= self.max_iter:
                self.stop_reason = "max_iter"
        self._proba = None
        return True

    def run(self) -> "Run":
        while self.advance():
            pass
        return self

    def result(self) -> FinishedRun:
        """What :meth:`restore` needs to put a run of the same settings where this one is (call it once finished)."""
        return FinishedRun(state=self.state, objectives=tuple(self.objectives), samples=tuple(self.samples),
                           stop_reason=self.stop_reason)

    def restore(self, result: FinishedRun) -> None:
        """Jump to the end of a run of the same model, world and settings (its states are shared, never changed:
        the core modules' steps make new states)."""
        self.state, self.objectives = result.state, list(result.objectives)
        self.samples, self.stop_reason = list(result.samples), result.stop_reason
        self._proba = None

    def fitted(self):
        """What ``predict_proba`` takes: the EM state, or the Gibbs samples kept so far (the current state
        before the first one): a list of states (DP/CPT-v) or a ``DPMultinomialSamples`` (DP)."""
        if self.spec.kind != "gibbs":
            return self.state
        states = list(self.samples) if self.samples else [self.state]
        if self.spec.key == "dp":
            z = np.array([s.z for s in states], dtype=np.int64)
            return self.module.DPMultinomialSamples(
                z=z, sweeps=np.array([s.sweep for s in states], dtype=np.int64), log_joint=np.array(self.objectives),
                n_clusters=np.array([s.n_clusters for s in states], dtype=np.int64), data=self.data,
                config=self.config, last=self.state)
        return states

    def _predict(self, data) -> np.ndarray:
        if self.spec.kind == "gibbs":  # rows of the training data: their sampled clusters (weak generalisation)
            return np.asarray(self.module.predict_proba(self.fitted(), data, training=True))
        return np.asarray(self.module.predict_proba(self.fitted(), data))

    def predict_proba(self, data=None) -> np.ndarray:
        """(N, D, V) predictive distributions of the training users' entries (or of ``data``, the same users
        with other response indicators)."""
        if data is not None:
            return self._predict(data)
        if self._proba is None or self._proba[0] != self.iteration:
            self._proba = (self.iteration, self._predict(self.data))
        return self._proba[1]

    def n_clusters(self) -> int:
        """Components of the current state (occupied clusters for the samplers)."""
        s = self.state
        if hasattr(s, "sizes"):
            return int(np.asarray(s.sizes).shape[0])
        if hasattr(s, "beta"):
            return int(np.asarray(s.beta).shape[0])
        return int(np.asarray(s.weights).shape[0])

    def mu(self) -> np.ndarray | None:
        """The learned selection model: (V,) for CPT-v models, (V, D) for Logit-vd, None for MAR models and for
        the conditional RBMs (they model P(x | r), not P(r | x))."""
        if not self.spec.nmar or self.spec.kind == "cd":
            return None
        if self.spec.kind == "gibbs":
            states = self.samples or [self.state]
            return np.mean([np.asarray(s.mu, dtype=float) for s in states], axis=0)
        return np.asarray(self.state.mu, dtype=float)


class RatingsComparison:
    """The fits of :func:`compare_models`, done a slice at a time by :meth:`advance` (not thread-safe: one
    thread advances it).

    A page runs it on its session's worker in slices of a fraction of a second, so that Step and Play are
    served between two slices of a long comparison; :func:`compare_models` runs it to its end at once.
    The arguments are those of :func:`compare_models`.

    Attributes
    ----------
    done, total : int
        Fits done (one model at one K on one world) and to do.
    rows : list of dict
        The rows of the cells done so far (see :func:`compare_models`).
    finished : bool
        Every fit done, or cancelled.
    seconds : float
        Time spent computing (in :meth:`advance`).
    """

    def __init__(self, models=("mar_mm", "cpt_v"), ks=(1, 3), s_values=S_VALUES, *, n_users: int = 300,
                 n_items: int = 20, n_clusters: int = 3, repeats: int = 3, seed: int = 0, max_iter: int = 100,
                 tol: float = 1e-4, n_sweeps: int = 100):
        specs = [MODELS[m] for m in models]
        self._jobs = [(spec, k) for spec in specs for k in (ks if spec.uses_k else (None,))]
        self._s_values, self._repeats, self._seed = tuple(s_values), int(repeats), int(seed)
        self._world_settings = dict(n_users=n_users, n_items=n_items, n_clusters=n_clusters)
        self._fit_settings = dict(max_iter=max_iter, tol=tol, n_sweeps=n_sweeps)
        self.total = len(self._jobs) * len(self._s_values) * self._repeats
        self.done = 0
        self.rows: list[dict] = []
        self.finished = False
        self.seconds = 0.0
        self._work = self._fits()
        self._slice_start = 0.0

    def _elapsed(self) -> float:
        return self.seconds + (time.perf_counter() - self._slice_start)

    def _fits(self):
        """The fits, pausing (``yield``) after every world drawn, fit started, iteration, fit done and cell done
        (the row of a cell is in :attr:`rows` as soon as its last fit is counted in :attr:`done`)."""
        for s in self._s_values:
            worlds = []
            for i in range(self._repeats):
                worlds.append(make_world(s=s, seed=self._seed + i, **self._world_settings))
                yield
            for spec, k in self._jobs:
                scores, t0, error = [], self._elapsed(), ""
                for i, world in enumerate(worlds):
                    if not error:
                        try:
                            run = Run(spec, world, n_components=k or 1, seed=self._seed + i, **self._fit_settings)
                            yield
                            while run.advance():
                                yield
                            scores.append(weak_scores(world, run.predict_proba()))
                        except BadInputError as exc:  # this model cannot be fitted here: said in its row
                            error = str(exc)
                    self.done += 1
                    if i < len(worlds) - 1:
                        yield
                r = np.array([[sc["random"], sc["user"]] for sc in scores]) if not error else np.full((1, 2), np.nan)
                se = r.std(axis=0, ddof=1) / np.sqrt(len(r)) if len(r) > 1 else np.full(2, np.nan)
                self.rows.append({"model": spec.label, "K": k, "s": float(s), "random": float(r[:, 0].mean()),
                                  "random_se": float(se[0]), "user": float(r[:, 1].mean()),
                                  "user_se": float(se[1]), "seconds": self._elapsed() - t0, "error": error})
                yield

    def advance(self, seconds: float | None = None, *, progress=None, cancelled=None) -> bool:
        """Compute for about ``seconds`` (at least one piece of work: a world drawn, a fit started, one
        iteration, a fit scored; None: to the end). Returns False once finished.

        ``progress(done, total)`` is called after every fit; ``cancelled()`` is asked before every piece
        of work, and True finishes the comparison where it is (the rows done so far stay).
        Raises :class:`~explorer.core.validation.BadInputError` when a world cannot be drawn.
        """
        if self.finished:
            return False
        self._slice_start = time.perf_counter()
        try:
            while True:
                if cancelled is not None and cancelled():
                    self.finished = True
                    break
                done = self.done
                try:
                    next(self._work)
                except StopIteration:
                    self.finished = True
                    break
                if progress is not None and self.done != done:
                    progress(self.done, self.total)
                if seconds is not None and time.perf_counter() - self._slice_start >= seconds:
                    break
        except BaseException:
            self.finished = True
            raise
        finally:
            self.seconds += time.perf_counter() - self._slice_start
        return not self.finished


def compare_models(models=("mar_mm", "cpt_v"), ks=(1, 3), s_values=S_VALUES, *, n_users: int = 300,
                   n_items: int = 20, n_clusters: int = 3, repeats: int = 3, seed: int = 0, max_iter: int = 100,
                   tol: float = 1e-4, n_sweeps: int = 100, progress=None, cancelled=None) -> list[dict]:
    """Weak-generalisation NMAE of several models at several K and s, mean and s.e. over ``repeats`` worlds.

    World ``i`` of every s is drawn with seed ``seed + i``, so models and K are compared on the same
    worlds. DP models do not depend on K (fitted once per world). EM stops at ``tol`` per user (1e-4: the
    NMAE moves by less than its standard error against 1e-6, at a third of the iterations) or ``max_iter``
    (Logit-vd, a generalised EM, is the slow one: at K = 1, s = 0.25 its random-item NMAE is 0.59 after 50
    iterations and 0.48 after 100); Gibbs runs ``n_sweeps`` sweeps, a quarter
    burn-in (DP/CPT-v starts from one cluster and needs about 100 to grow the clusters of the world). ``progress(done, total)`` is called
    after every fit; ``cancelled()`` returning True stops early (the rows done so far are returned).
    :class:`Comparison` does the same a slice at a time.

    Returns one dict per (model, K, s): ``model`` (label), ``K`` (None for DP), ``s``, ``random``,
    ``random_se``, ``user``, ``user_se`` (NMAE), ``seconds`` and ``error`` (why the model could not be
    fitted on one of the worlds, e.g. CPT-v+ when a rating value never occurs among the hold-out users'
    ratings; its NMAE is then NaN).
    """
    comparison = RatingsComparison(models, ks, s_values, n_users=n_users, n_items=n_items, n_clusters=n_clusters,
                                   repeats=repeats, seed=seed, max_iter=max_iter, tol=tol, n_sweeps=n_sweeps)
    comparison.advance(progress=progress, cancelled=cancelled)
    return comparison.rows


# ============================================================================ what a page draws
def _frozen(value):
    """A read-only copy of an array (other values as they are)."""
    if isinstance(value, np.ndarray):
        value = np.array(value, copy=True)
        value.flags.writeable = False
    return value


def _frozen_dict(d: dict | None) -> MappingProxyType | None:
    return None if d is None else MappingProxyType({k: _frozen(v) for k, v in d.items()})


@dataclass(frozen=True)
class RatingsSnapshot:
    """The read-outs of a :class:`RatingsModel` at one moment, made under its lock and never changed after.

    A page draws from the last snapshot it was given: drawing never waits for the model (which may be
    stepping on another thread), and every plot shows the same iteration. Made by
    :meth:`RatingsModel.snapshot`; arrays are read-only copies.

    ``model`` is the model's key, ``trace`` the objective per iteration (``trace_name``: 'objective', or
    'clusters' for a sampler without one), ``selection``, ``predictive`` and ``scores`` what
    :meth:`RatingsModel.selection`, :meth:`~RatingsModel.predictive` and :meth:`~RatingsModel.scores` return,
    ``world`` a summary of the world (None without one: ``n_users``, ``n_items``, ``s``, ``n_observed``,
    ``selected_fraction``, ``n_random``, ``n_user``, ``n_holdout_users``) and ``readout_error`` why a
    read-out could not be made ('' when it could).
    """

    run_id: int
    model: str
    iteration: int
    stop_reason: str
    error: str
    user: int
    trace: np.ndarray
    trace_name: str = "objective"
    selection: MappingProxyType | None = None
    predictive: MappingProxyType | None = None
    scores: MappingProxyType | None = None
    world: MappingProxyType | None = None
    readout_error: str = ""

    @property
    def spec(self) -> ModelSpec:
        return MODELS[self.model]


def _world_summary(world: World | None) -> MappingProxyType | None:
    if world is None:
        return None
    data = world.train
    return MappingProxyType({
        "n_users": int(data.n_samples), "n_items": int(data.n_features), "s": float(world.s),
        "n_observed": int(data.available.sum()), "selected_fraction": float(data.response.sum() / data.response.size),
        "n_random": len(world.targets("random")), "n_user": len(world.targets("user")),
        "n_holdout_users": len(world.split.holdout_users)})


# ============================================================================ the page's model object
class RatingsModel(LockedStepping, Settings):
    """One rating model fitted live on a synthetic world; Step / Play / Reset through the shared player.

    A new world is drawn when a world setting changes, a new run starts when a model setting changes
    (both through :meth:`reset`); errors (bad settings, a model whose module is missing) are published
    in ``error`` instead of raised.

    Examples
    --------
    >>> m = RatingsModel(model="cpt_v", n_users=200, n_items=15)  # doctest: +SKIP
    >>> m.step(); m.iteration  # doctest: +SKIP
    1
    """

    _SETTINGS = _SETTINGS

    n_users = param.Integer(default=300, bounds=(20, 5000), doc="Training users N")
    n_items = param.Integer(default=20, bounds=(5, 200), doc="Items D")
    n_clusters = param.Integer(default=3, bounds=(1, 10), doc="Clusters of the true world")
    s = param.Selector(default=0.25, objects=list(S_VALUES), doc="Value effect s: mu_v = s (v - 3) + 0.5")
    data_seed = param.Integer(default=0, bounds=(0, MAX_SEED), doc="Seed of the world and its split")
    model = param.Selector(default="cpt_v", objects=list(MODELS), doc="The rating model fitted")
    n_components = param.Integer(default=3, bounds=(1, 20), doc="Components K (finite mixtures)")
    seed = param.Integer(default=0, bounds=(0, MAX_SEED), doc="Seed of the initialisation / sampler")
    max_iter = param.Integer(default=300, bounds=(1, 5000), doc="EM iterations (or CD updates) at most")
    n_sweeps = param.Integer(default=150, bounds=(2, 5000), doc="Gibbs sweeps (a quarter burn-in)")
    user = param.Integer(default=0, bounds=(0, 5000), doc="The user whose predictive distributions are shown")
    compare_ks = param.ListSelector(default=[1, 3], objects=list(COMPARE_KS), doc="K values of the comparison table")
    repeats = param.Integer(default=3, bounds=(2, 10), doc="Worlds (seeds) per cell of the comparison table")

    world = param.Parameter(default=None, constant=True, precedence=-1, doc="The current World")
    iteration = param.Integer(default=0, constant=True, precedence=-1)
    objective = param.Number(default=None, allow_None=True, constant=True, precedence=-1)
    stop_reason = param.String(default="", constant=True, precedence=-1, doc="'', 'tol', 'max_iter', 'n_sweeps'")
    error = param.String(default="", constant=True, precedence=-1, doc="Readable error of the last action")
    run_id = param.Integer(default=0, constant=True, precedence=-1, doc="Increases at every reset")

    def __init__(self, **params):
        super().__init__(**params)
        self._lock = threading.RLock()
        self._run: Run | None = None
        self._world_key = None
        self._snapshot_cache: tuple | None = None  # (what it was made of, RatingsSnapshot)
        self.reset()

    # ------------------------------------------------------------------ helpers
    def _publish(self, **outputs):
        with param.edit_constant(self):
            self.param.update(**outputs)

    @property
    def lock(self) -> threading.RLock:
        return self._lock

    @property
    def spec(self) -> ModelSpec:
        return MODELS[self.model]

    @property
    def run_object(self) -> Run | None:
        """The current :class:`Run` (None after an error)."""
        return self._run

    @property
    def finished(self) -> bool:
        return self._run is None or self._run.finished

    def compare_settings(self) -> dict:
        """The keyword arguments of :func:`compare_models` for the current settings (every available model)."""
        have = available_models()
        return {"models": tuple(k for k in MODELS if have[k]), "ks": tuple(sorted(self.compare_ks)) or (1,),
                "s_values": S_VALUES, "n_users": self.n_users, "n_items": self.n_items,
                "n_clusters": self.n_clusters, "repeats": self.repeats, "seed": self.data_seed}

    def world_settings(self) -> dict:
        return {"n_users": self.n_users, "n_items": self.n_items, "n_clusters": self.n_clusters, "s": self.s,
                "seed": self.data_seed}

    # ------------------------------------------------------------------ actions
    @param.depends("n_users", "n_items", "n_clusters", "s", "data_seed", "model", "n_components", "seed",
                   "max_iter", "n_sweeps", watch=True)
    def reset(self):
        """Draw the world (when its settings changed) and start a new run of the chosen model."""
        with self._lock:
            self._run = None
            world = self.world
            try:
                key = tuple(self.world_settings().values())
                if world is None or key != self._world_key:
                    world = None  # a world that cannot be drawn is not shown with the old one
                    world = make_world(**self.world_settings())
                    self._world_key = key
                self._run = Run(self.spec, world, n_components=self.n_components, seed=self.seed,
                                max_iter=self.max_iter, n_sweeps=self.n_sweeps)
            except BadInputError as exc:
                self._publish(world=world, iteration=0, objective=None,
                              stop_reason="", error=str(exc), run_id=self.run_id + 1)
                return
            r = self._run
            self._publish(world=world, iteration=0, objective=r.objectives[-1], stop_reason="", error="",
                          run_id=self.run_id + 1)

    def _step(self) -> bool:
        if self.finished:
            return False
        try:
            self._run.advance()
        except BadInputError as exc:
            self._run.stop_reason = "error"
            self._publish(stop_reason="error", error=str(exc))
            return False
        r = self._run
        self._publish(iteration=r.iteration, objective=r.objectives[-1], stop_reason=r.stop_reason, error="")
        return True

    def finish(self, run_id: int | None = None) -> bool:
        """Fit the current run to its end at once (with ``run_id``: only if that run is still the current one).

        A run of the same settings finished before, in any session of this process, is not fitted again: its
        end is taken from a cache (:data:`FINISHED_RUNS_KEPT` runs), so that the start screen's fit costs the
        first session only. Returns False when there was nothing to do.
        """
        with self._lock:
            if (run_id is not None and run_id != self.run_id) or self.finished:
                return False
            run = self._run
            key = (tuple(self.world_settings().values()), self.model, self.n_components, self.seed, self.max_iter,
                   self.n_sweeps)
            done = _finished_run(key)
            if done is not None:
                run.restore(done)
            else:
                try:
                    run.run()
                except BadInputError as exc:
                    run.stop_reason = "error"
                    self._publish(iteration=run.iteration, objective=run.objectives[-1], stop_reason="error",
                                  error=str(exc))
                    return True
                _keep_finished_run(key, run.result())
            self._publish(iteration=run.iteration, objective=run.objectives[-1], stop_reason=run.stop_reason, error="")
            return True

    # ------------------------------------------------------------------ read-outs
    def trace(self) -> np.ndarray:
        """The objective after every iteration so far (index = iteration)."""
        with self._lock:
            return np.array(self._run.objectives) if self._run is not None else np.zeros(0)

    def selection(self) -> dict | None:
        """The selection model against the truth: ``truth`` (V,), ``learned`` (V,) or None (MAR),
        ``learned_vd`` (V, D) for Logit-vd, ``moment`` (V,) and ``condition`` (digest 2.7) or None."""
        with self._lock:
            world, run = self.world, self._run
            if world is None:
                return None
            learned = run.mu() if run is not None else None
            out = {"truth": world.mu, "learned": None, "learned_vd": None, "moment": None, "condition": None,
                   "fixed": run is not None and run.mu_fixed is not None}
            if learned is not None and learned.ndim == 2:
                out["learned_vd"], out["learned"] = learned, learned.mean(axis=1)
            else:
                out["learned"] = learned
        moment = self.moment(world)
        if moment is not None:
            out["moment"], out["condition"] = moment
        return out

    def moment(self, world: World | None = None) -> tuple[np.ndarray, float] | None:
        """The moment estimate of mu and its condition number (digest 2.7) for the world's training data,
        computed once per world (None without :mod:`explorer.core.discrete.cpt_v` or when it fails)."""
        world = self.world if world is None else world
        if world is None:
            return None
        cached = getattr(self, "_moment_cache", None)
        if cached is not None and cached[0] is world:
            return cached[1]
        result = None
        cpt = _module(MODELS["cpt_v"])
        if cpt is not None:
            try:
                # the least-squares solve of Phi [1/mu] = 1 and the condition number of the whole Phi (no search
                # for the best-conditioned V x V block: C(D, V) condition numbers, 1.7 s at D = 20)
                result = cpt.moment_estimate(world.train)
            except (BadInputError, np.linalg.LinAlgError):
                result = None
        self._moment_cache = (world, result)
        return result

    def scores(self) -> dict | None:
        """Weak-generalisation NMAE of the current fit on the random and the user-selected held-out items."""
        with self._lock:
            if self._run is None:
                return None
            return weak_scores(self.world, self._run.predict_proba())

    def snapshot(self) -> RatingsSnapshot:
        """Every read-out of the current run at once, for drawing (:class:`RatingsSnapshot`).

        Made under the model's lock (so all of it is of one iteration) and kept until the run, its
        iteration or the user changes: asking again costs nothing. Call it off the event loop (a page's
        session worker): it waits while a step holds the lock.
        """
        with self._lock:
            key = (self.run_id, self.iteration, self.user, self.error, self.stop_reason)
            if self._snapshot_cache is not None and self._snapshot_cache[0] == key:
                return self._snapshot_cache[1]
            run = self._run
            values = dict(run_id=self.run_id, model=self.model, iteration=self.iteration,
                          stop_reason=self.stop_reason, error=self.error, user=self.user,
                          trace=_frozen(self.trace()), trace_name=run.trace_name if run is not None else "objective",
                          world=_world_summary(self.world))
            try:
                values.update(selection=_frozen_dict(self.selection()), predictive=_frozen_dict(self.predictive()),
                              scores=_frozen_dict(self.scores()))
            except BadInputError as exc:
                values["readout_error"] = str(exc)
            snap = RatingsSnapshot(**values)
            self._snapshot_cache = (key, snap)
            return snap

    def predictive(self, user: int | None = None) -> dict | None:
        """For one user: the predictive over 1..5 of a held-out user-selected item (r = 1) and of an unrated
        item (r = 0), with the true ratings, and the unrated item's predictive had it been selected (r = 1).

        Returns ``user``, ``rated_item``, ``unrated_item`` (item indices, -1: none), ``p_rated``, ``p_unrated``,
        ``p_unrated_if_selected`` (V,) arrays or None, ``true_rated``, ``true_unrated`` (ratings 1..5).
        """
        from explorer.core.discrete.ratings_data import prepare

        with self._lock:
            run, world = self._run, self.world
            if run is None or world is None:
                return None
            data = world.train
            n = min(self.user if user is None else int(user), data.n_samples - 1)
            proba = run.predict_proba()
            user_t, random_t = world.targets("user"), world.targets("random")
            rated = int(user_t.items[user_t.rows == n][0]) if np.any(user_t.rows == n) else -1
            # the random test item when the user did not select it, else the first item neither selected nor known
            own = random_t.items[(random_t.rows == n) & ~random_t.response]
            others = np.flatnonzero(~data.response[n] & ~data.available[n])
            unrated = int(own[0]) if own.size else (int(others[0]) if others.size else -1)
            out = {"user": n, "rated_item": rated, "unrated_item": unrated, "p_rated": None, "p_unrated": None,
                   "p_unrated_if_selected": None, "true_rated": None, "true_unrated": None}
            codes = world.codes
            if rated >= 0:
                out["p_rated"], out["true_rated"] = proba[n, rated], int(codes[n, rated]) + 1
            if unrated >= 0:
                out["p_unrated"], out["true_unrated"] = proba[n, unrated], int(codes[n, unrated]) + 1
                flipped = np.array(data.response)
                flipped[n, unrated] = True
                alt = prepare(np.where(data.available, data.codes, -1), response=flipped, available=data.available,
                              n_values=data.n_values)
                out["p_unrated_if_selected"] = run.predict_proba(alt)[n, unrated]
            return out


#: Old names (before class names were made unique across explorer), importable for one release with a warning
__getattr__ = renamed_names(__name__, globals(), {"Comparison": "RatingsComparison"})
