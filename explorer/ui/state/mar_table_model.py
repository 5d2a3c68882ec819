r"""The "MAR is not enough" page's model: Table 3.1 settings, the Table 3.3 sweep, and its reading in words.

Marlin (2008) Section 3.4 (marlin2008 digest, sections 2.3-2.5, :mod:`explorer.core.missingness.mar_table`). Inputs:
the five Table 3.1 parameters (α, β, γ, δ, λ) of the MAR mechanism P(r | x) for two binary variables, the data
distribution (a, b, c, d) = P(x = 00, 01, 10, 11), the number of cases N and of repeats of the simulation, and a
seed. :meth:`MARTableModel.compute` returns a :class:`MARTableResult`:

* the validity of the setting (:attr:`~MARTableResult.problems`: every failed inequality of Table 3.1, and the
  joint when it does not sum to 1) and the raw 4 x 4 response table;
* the Table 3.3 picture as β − δ varies (β swept over its valid range, the other parameters held): the true
  P(X1 = 1) = c + d, the closed form P(X1 = 1 | R1 = 1) (eqs. 3.4.3-3.4.4, the limit of the factorised
  estimate) on a fine grid, and at ``n_points`` values of β (and at the current one) the simulated factorised
  estimate θ_11 (eq. 3.4.2) and the EM estimate of the full joint (eq. 3.4.5 with the C⁰ erratum), mean and
  standard error over the repeats. The simulation draws the 4 x 4 (x, r) cell counts of each data set (one
  multinomial per data set) and runs EM on all data sets at once, so a setting costs a few tens of milliseconds;
* :meth:`MARTableResult.sentence`, the bias at the current setting in words.

No Panel import here.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, fields

import numpy as np
import param

from explorer.core.missingness import mar_table as mt
from explorer.ui.state._settings import MAX_SEED, Settings

__all__ = ["MARTableModel", "MARTableResult", "Sweep"]

_PARAM_BOUNDS = (0.0, 1.0)
#: the fine grid of the closed-form curve
N_GRID = 101


@dataclass(frozen=True)
class Sweep:
    """The Table 3.3 picture: arrays over β (δ and the rest fixed), x = β − δ.

    ``grid_x`` (G,), ``closed`` (G,) the closed form; ``x`` (P,) the simulated points, ``em_mean`` / ``em_se``,
    ``fact_mean`` / ``fact_se`` (P,); ``current`` the index in ``x`` of the current β; ``truth`` c + d.
    """

    grid_x: np.ndarray
    closed: np.ndarray
    x: np.ndarray
    em_mean: np.ndarray
    em_se: np.ndarray
    fact_mean: np.ndarray
    fact_se: np.ndarray
    current: int
    truth: float
    n_cases: int
    repeats: int


@dataclass(frozen=True)
class MARTableResult:
    """What the page shows for one setting (see the module docstring)."""

    params: tuple
    joint: tuple
    table: np.ndarray  # (4, 4) raw entries (negative ones when invalid)
    problems: tuple  # plain-text failed conditions; empty = valid
    sweep: Sweep | None

    @property
    def valid(self) -> bool:
        return not self.problems

    @property
    def closed_form(self) -> float | None:
        """P(X1 = 1 | R1 = 1) at the current setting (None when invalid)."""
        return None if not self.valid else mt.p_x1_given_r1(self.joint, self.params)

    def sentence(self) -> str:
        """The bias at the current setting in plain words (Markdown; numbers only, no user text)."""
        if not self.valid:
            return ("**No estimate:** the setting is not a valid MAR table (see the red message). "
                    "Move the failing parameters until every condition holds.")
        alpha, beta, _, delta, _ = self.params
        s = self.sweep
        truth, cf, i = s.truth, self.closed_form, s.current

        def away(mean, se):
            if not np.isfinite(mean):
                return "not available"
            z = (mean - truth) / se if se > 0 else np.inf
            side = "below" if mean < truth else "above"
            return f"{mean:.4f} ± {se:.4f} ({abs(z):.1f} s.e. {side} the truth)"

        sim = (f"Simulated with {s.repeats} data sets of {s.n_cases} cases (mean ± s.e.): factorised "
               f"{away(s.fact_mean[i], s.fact_se[i])}, EM on the full joint {away(s.em_mean[i], s.em_se[i])}.")
        head = f"At β − δ = {beta - delta:+.3f} (β = {beta:.3f}, δ = {delta:.3f})"
        if abs(beta - delta) < 1e-12:
            return (f"{head}, x2 is MCAR and the factorised estimate of P(X1 = 1) is unbiased: its limit "
                    f"P(X1 = 1 | R1 = 1) = {cf:.4f} equals the truth c + d = {truth:.4f}. {sim}")
        bias = cf - truth
        rel = f" ({100 * bias / truth:+.1f} %)" if truth > 0 else ""
        return (f"{head}, the data are MAR, yet the factorised model converges to P(X1 = 1 | R1 = 1) = {cf:.4f} "
                f"instead of the true P(X1 = 1) = {truth:.4f}: a bias of {bias:+.4f}{rel}. {sim} The bias vanishes "
                "only at β = δ, when x2 is MCAR: MAR with respect to the true model is not enough for a model with "
                "extra independence assumptions.")


class MARTableModel(Settings):
    """Settings and computations of the "MAR is not enough" page.

    Examples
    --------
    >>> result = MARTableModel(n_cases=500, repeats=5, n_points=4).compute()
    >>> result.valid, round(result.closed_form, 4)
    (True, 0.775)
    """

    _SETTINGS = ("alpha", "beta", "gamma", "delta", "lam", "a", "b", "c", "d", "n_cases", "repeats", "n_points",
                 "seed")

    alpha = param.Number(default=0.1, bounds=_PARAM_BOUNDS, doc="P(r = 00 | x): nothing observed")
    beta = param.Number(default=0.35, bounds=_PARAM_BOUNDS, doc="P(r = 01 | x2 = 0): only x2 observed")
    gamma = param.Number(default=0.2, bounds=_PARAM_BOUNDS, doc="P(r = 10 | x1 = 0): only x1 observed")
    delta = param.Number(default=0.1, bounds=_PARAM_BOUNDS, doc="P(r = 01 | x2 = 1): only x2 observed")
    lam = param.Number(default=0.2, bounds=_PARAM_BOUNDS, doc="λ = P(r = 10 | x1 = 1): only x1 observed")
    a = param.Number(default=0.1, bounds=_PARAM_BOUNDS, doc="P(x = 00)")
    b = param.Number(default=0.1, bounds=_PARAM_BOUNDS, doc="P(x = 01)")
    c = param.Number(default=0.7, bounds=_PARAM_BOUNDS, doc="P(x = 10)")
    d = param.Number(default=0.1, bounds=_PARAM_BOUNDS, doc="P(x = 11)")
    n_cases = param.Integer(default=2000, bounds=(50, 20000), doc="Cases N per simulated data set")
    repeats = param.Integer(default=20, bounds=(2, 200), doc="Simulated data sets per point")
    n_points = param.Integer(default=10, bounds=(2, 20), doc="Simulated values of β across its valid range")
    seed = param.Integer(default=0, bounds=(0, MAX_SEED), doc="Seed of the simulation")

    @property
    def params_tuple(self) -> tuple:
        return (self.alpha, self.beta, self.gamma, self.delta, self.lam)

    @property
    def joint(self) -> tuple:
        return (self.a, self.b, self.c, self.d)

    def problems(self) -> list[str]:
        """Every condition the setting fails, in plain words (empty: valid)."""
        out = list(mt.violations(*self.params_tuple))
        total = sum(self.joint)
        if abs(total - 1.0) > 1e-6:
            out.append(f"a + b + c + d = {total:.4g} must equal 1 (use Normalise)")
        if not out and (1 - self.alpha) - (self.a + self.c) * self.beta - (self.b + self.d) * self.delta <= 1e-9:
            out.append("P(R1 = 1) = 0: x1 is never observed")
        return out

    def normalise(self) -> None:
        """Rescale (a, b, c, d) to sum to 1 (all zero: uniform)."""
        total = sum(self.joint)
        new = [0.25] * 4 if total <= 0 else [v / total for v in self.joint]
        self.param.update(**dict(zip("abcd", new)))

    def beta_range(self) -> tuple[float, float]:
        """The values of β for which the table stays valid with the other parameters held: [0, 1 − α − max(γ, λ)]."""
        return 0.0, max(0.0, 1.0 - self.alpha - max(self.gamma, self.lam))

    def compute(self) -> MARTableResult:
        """Validity, table and (when valid) the sweep; see the module docstring.

        Results depend on the settings only (the seed included), so they are shared by every session of the
        process (a small LRU cache; the arrays of a shared result are read-only).
        """
        key = tuple(getattr(self, name) for name in self._SETTINGS)
        with _CACHE_LOCK:
            if key in _CACHE:
                _CACHE.move_to_end(key)
                return _CACHE[key]
        result = _read_only(self._compute())
        with _CACHE_LOCK:
            _CACHE[key] = result
            while len(_CACHE) > CACHE_SIZE:
                _CACHE.popitem(last=False)
        return result

    def _compute(self) -> MARTableResult:
        params, joint = self.params_tuple, self.joint
        table = mt.response_table(*params, check=False)
        problems = tuple(self.problems())
        if problems:
            return MARTableResult(params=params, joint=joint, table=table, problems=problems, sweep=None)
        return MARTableResult(params=params, joint=joint, table=table, problems=(), sweep=self._sweep())

    def _sweep(self) -> Sweep:
        alpha, beta, gamma, delta, lam = self.params_tuple
        joint = np.asarray(self.joint) / sum(self.joint)
        lo, hi = self.beta_range()
        grid = np.linspace(lo, hi, N_GRID)

        def den_ok(b):  # P(R1 = 1) > 0: x1 is observed sometimes
            return (1 - alpha) - (joint[0] + joint[2]) * b - (joint[1] + joint[3]) * delta > 1e-9

        closed = np.array([mt.p_x1_given_r1(joint, (alpha, b, gamma, delta, lam)) if den_ok(b) else np.nan
                           for b in grid])
        betas = np.linspace(lo, hi, self.n_points)
        betas = np.unique(np.r_[betas[[den_ok(b) for b in betas]], beta])
        current = int(np.flatnonzero(betas == beta)[0])
        rng = np.random.default_rng(self.seed)
        cells = np.stack([mt.sample_cells(self.n_cases, joint, (alpha, b, gamma, delta, lam), rng=rng,
                                          size=self.repeats) for b in betas])  # (P, R, 4, 4)
        data = mt.counts_from_cells(cells)
        fact = mt.factorised_estimate(data)[..., 1, 0]  # (P, R): NaN where x1 never observed
        em = mt.fit(data, mt.MARTableEMConfig(tol=1e-10, max_iter=2000)).state.p_x1
        root = np.sqrt(self.repeats)
        return Sweep(grid_x=grid - delta, closed=closed, x=betas - delta,
                     em_mean=em.mean(axis=1), em_se=em.std(axis=1, ddof=1) / root,
                     fact_mean=np.nanmean(fact, axis=1), fact_se=np.nanstd(fact, axis=1, ddof=1) / root,
                     current=current, truth=float(joint[2] + joint[3]), n_cases=self.n_cases, repeats=self.repeats)


#: Results kept for reuse by any session of the process (settings -> result).
CACHE_SIZE = 64
_CACHE: OrderedDict = OrderedDict()
_CACHE_LOCK = threading.Lock()


def _read_only(obj):
    """``obj`` (a result or a sweep) with every array in it made read-only (it is shared between sessions)."""
    for f in fields(obj):
        value = getattr(obj, f.name)
        if isinstance(value, np.ndarray):
            value.setflags(write=False)
        elif isinstance(value, Sweep):
            _read_only(value)
    return obj
