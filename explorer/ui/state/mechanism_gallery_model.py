r"""The "Mechanism gallery" page's model: Marlin's missing-data mechanisms on a synthetic ratings matrix.

Marlin (2008); marlin2008 digest, sections 2.6 and 7 ("Mechanism gallery"). One family at a time:

* ``cpt_v`` - CPT-v (eq. 5.4.6): P(r = 1 | x = v) = μ_v, five sliders;
* ``linear`` - the linear value effect of the Jester runs (section 5.2.1): μ_v(s) = s (v − 3) + 1/2, s in
  [0, 0.25] (s = 0 is MCAR);
* ``logit_vd`` - Logit-vd (eq. 5.6.1): P(r = 1 | x = v, item d) = sigmoid(σ_v + ω_d), five value logits σ_v and
  item effects ω_d spread evenly over [−spread, spread] (item 1 lowest);
* ``mar_table`` - the Table 3.1 MAR mechanism on two binary variables (data (a, b, c, d) = (0.1, 0.1, 0.7, 0.1)
  of Table 3.3), where P(r_d = 1 | x_d = v) is obtained by summing over the other variable.

The data: complete ratings (V = 5) of users in latent clusters from
:func:`explorer.core.discrete.rating_world.make_rating_world` (its own selection is not used), masked by the chosen
family's function of :mod:`explorer.core.missingness.tabular_mechanisms` (``cpt_v``, ``linear_value_effect``,
``logit_vd``, levels given) or, for the MAR table, cases drawn by
:func:`explorer.core.missingness.mar_table.sample`. Read-outs (:class:`GalleryResult`): the per-value response
probabilities (V, D), the true and sampled masks, the true and observed marginals of the values (Fig. 5.2 style) and
their symmetrised KL divergence (eq. 5.1.1: each empirical distribution smoothed by +1 count per value, in bits),
overall and per item (median).

No Panel import here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import param

from explorer.core.discrete.rating_world import make_rating_world
from explorer.core.missingness import mar_table as mt
from explorer.core.missingness import tabular_mechanisms as tm
from explorer.ui.state._settings import MAX_SEED, Settings

__all__ = ["FAMILIES", "GalleryResult", "MechanismGalleryModel", "symmetrised_kl"]

#: family key -> label
FAMILIES = {"cpt_v": "CPT-v (μ_v per value)", "linear": "Linear value effect μ_v(s)",
            "logit_vd": "Logit-vd (value and item effects)", "mar_table": "Table 3.1 MAR (2 binary variables)"}
#: The data distribution of the MAR-table family (Table 3.3's)
MAR_JOINT = (0.1, 0.1, 0.7, 0.1)
N_VALUES = 5


def symmetrised_kl(counts_p, counts_q) -> float:
    """Symmetrised KL divergence in bits between two count vectors, each smoothed by +1 per value (eq. 5.1.1).

    SKL = Σ_v [P log2(P / Q) + Q log2(Q / P)] with P = (c_p + 1) / Σ (c_p + 1), likewise Q.
    """
    p = np.asarray(counts_p, dtype=float) + 1.0
    q = np.asarray(counts_q, dtype=float) + 1.0
    p, q = p / p.sum(axis=-1, keepdims=True), q / q.sum(axis=-1, keepdims=True)
    return np.sum((p - q) * np.log2(p / q), axis=-1)


@dataclass(frozen=True)
class GalleryResult:
    """What the page shows for one setting.

    ``values`` (V,) labels of the values; ``response_probs`` (V, D) P(r = 1 | x = v, item d); ``codes`` (N, D)
    value codes 0..V-1; ``response`` (N, D) bool r (True = observed); ``true_counts`` / ``observed_counts`` (V,);
    ``skl`` in bits; ``item_skl`` (D,) per item.
    """

    family: str
    values: tuple
    response_probs: np.ndarray
    codes: np.ndarray
    response: np.ndarray
    true_counts: np.ndarray
    observed_counts: np.ndarray
    skl: float
    item_skl: np.ndarray

    def variable_marginals(self) -> tuple[list[str], np.ndarray, np.ndarray]:
        """Per item (variable) and value: labels "x1 = 0", ..., true and observed shares within each item.

        Used for the MAR table (two variables), where pooling x1 and x2 would mix two different biases.
        """
        n_values = len(self.values)
        onehot = self.codes[..., None] == np.arange(n_values)  # (N, D, V)
        true = onehot.sum(axis=0).astype(float)
        obs = (onehot & self.response[..., None]).sum(axis=0).astype(float)
        true /= np.maximum(true.sum(axis=1, keepdims=True), 1)
        obs /= np.maximum(obs.sum(axis=1, keepdims=True), 1)
        labels = [f"x{d + 1} = {v}" for d in range(self.codes.shape[1]) for v in self.values]
        return labels, true.ravel(), obs.ravel()

    @property
    def observed_rate(self) -> float:
        return float(self.response.mean())

    @property
    def true_marginal(self) -> np.ndarray:
        return self.true_counts / max(self.true_counts.sum(), 1)

    @property
    def observed_marginal(self) -> np.ndarray:
        return self.observed_counts / max(self.observed_counts.sum(), 1)

    def sentence(self) -> str:
        """The reading in words (Markdown; numbers only)."""
        t, o = self.true_marginal, self.observed_marginal
        if self.family == "mar_table":
            _, true, obs = self.variable_marginals()
            return (f"Under the Table 3.1 MAR table, {100 * self.observed_rate:.1f} % of the entries are observed. "
                    f"Among the cases with x1 observed, x1 = 1 has a share of {100 * obs[1]:.1f} % against "
                    f"{100 * true[1]:.1f} % of all cases (x2: {100 * obs[3]:.1f} % against {100 * true[3]:.1f} %): "
                    "under MAR the observed marginal of x1 is biased whenever β ≠ δ and that of x2 whenever γ ≠ λ, "
                    "because the response of one variable depends on the other one's value. Symmetrised KL (eq. 5.1.1, +1 smoothing) between "
                    f"observed and true marginals: x1 {self.item_skl[0]:.4f} bits, x2 {self.item_skl[1]:.4f} bits.")
        top = int(np.argmax(np.abs(o - t)))
        word = "over" if o[top] > t[top] else "under"
        mean_t = float(np.dot(np.arange(len(t)), t))
        mean_o = float(np.dot(np.arange(len(o)), o))
        mech = {"cpt_v": "CPT-v", "linear": "the linear value effect", "logit_vd": "Logit-vd",
                "mar_table": "the Table 3.1 MAR table"}[self.family]
        head = f"Under {mech}, {100 * self.observed_rate:.1f} % of the entries are observed. "
        if np.ptp(self.response_probs) < 1e-12:
            return (head + "The response does not depend on the value (MCAR): the observed marginal differs from "
                    f"the true one by sampling noise only (symmetrised KL {self.skl:.4f} bits, eq. 5.1.1 with +1 "
                    f"smoothing; per item, median {float(np.median(self.item_skl)):.3f} bits, noise of the "
                    "small per-item counts).")
        return (head + f"The response depends on the value, so the observed values are a biased sample: value "
                f"{self.values[top]} is "
                f"{word}-represented ({100 * o[top]:.1f} % of the observed entries against {100 * t[top]:.1f} % of all), "
                f"the mean value code moves from {mean_t:.2f} to {mean_o:.2f}, and the symmetrised KL divergence "
                f"between the observed and true marginals (eq. 5.1.1, +1 smoothing) is {self.skl:.3f} bits "
                f"(per item, median {float(np.median(self.item_skl)):.3f} bits).")


class MechanismGalleryModel(Settings):
    """Settings and computations of the mechanism gallery page.

    Examples
    --------
    >>> result = MechanismGalleryModel(family="linear", s=0.0, n_users=100, n_items=10).compute()
    >>> result.response_probs.shape, bool(np.allclose(result.response_probs, 0.5))
    ((5, 10), True)
    """

    _SETTINGS = ("family", "mu1", "mu2", "mu3", "mu4", "mu5", "s", "sigma1", "sigma2", "sigma3", "sigma4",
                 "sigma5", "item_spread", "alpha", "beta", "gamma", "delta", "lam", "n_users", "n_items",
                 "n_clusters", "seed")

    family = param.Selector(default="cpt_v", objects=list(FAMILIES), doc="The mechanism family shown")
    mu1 = param.Number(default=0.1, bounds=(0.0, 1.0), doc="P(r = 1 | x = 1)")
    mu2 = param.Number(default=0.3, bounds=(0.0, 1.0), doc="P(r = 1 | x = 2)")
    mu3 = param.Number(default=0.5, bounds=(0.0, 1.0), doc="P(r = 1 | x = 3)")
    mu4 = param.Number(default=0.7, bounds=(0.0, 1.0), doc="P(r = 1 | x = 4)")
    mu5 = param.Number(default=0.9, bounds=(0.0, 1.0), doc="P(r = 1 | x = 5)")
    s = param.Number(default=0.125, bounds=(0.0, 0.25), doc="Slope of the linear value effect (0 = MCAR)")
    sigma1 = param.Number(default=-2.0, bounds=(-5.0, 5.0), doc="Logit-vd value effect σ_1")
    sigma2 = param.Number(default=-1.0, bounds=(-5.0, 5.0), doc="Logit-vd value effect σ_2")
    sigma3 = param.Number(default=0.0, bounds=(-5.0, 5.0), doc="Logit-vd value effect σ_3")
    sigma4 = param.Number(default=1.0, bounds=(-5.0, 5.0), doc="Logit-vd value effect σ_4")
    sigma5 = param.Number(default=2.0, bounds=(-5.0, 5.0), doc="Logit-vd value effect σ_5")
    item_spread = param.Number(default=1.5, bounds=(0.0, 5.0), doc="Item effects ω_d evenly in [−spread, spread]")
    alpha = param.Number(default=0.1, bounds=(0.0, 1.0), doc="Table 3.1 α")
    beta = param.Number(default=0.4, bounds=(0.0, 1.0), doc="Table 3.1 β")
    gamma = param.Number(default=0.2, bounds=(0.0, 1.0), doc="Table 3.1 γ")
    delta = param.Number(default=0.1, bounds=(0.0, 1.0), doc="Table 3.1 δ")
    lam = param.Number(default=0.2, bounds=(0.0, 1.0), doc="Table 3.1 λ")
    n_users = param.Integer(default=300, bounds=(20, 3000), doc="Users (rows)")
    n_items = param.Integer(default=40, bounds=(2, 200), doc="Items (columns); the MAR table has 2")
    n_clusters = param.Integer(default=4, bounds=(1, 12), doc="Latent user clusters of the synthetic world")
    seed = param.Integer(default=0, bounds=(0, MAX_SEED), doc="Seed of the world and of the mask")

    @property
    def mu(self) -> np.ndarray:
        return np.array([self.mu1, self.mu2, self.mu3, self.mu4, self.mu5])

    @property
    def sigma(self) -> np.ndarray:
        return np.array([self.sigma1, self.sigma2, self.sigma3, self.sigma4, self.sigma5])

    @property
    def mar_params(self) -> tuple:
        return (self.alpha, self.beta, self.gamma, self.delta, self.lam)

    def omega(self, n_items: int | None = None) -> np.ndarray:
        """The item effects ω_d of Logit-vd: evenly spaced over [−spread, spread]."""
        d = self.n_items if n_items is None else n_items
        return self.item_spread * np.linspace(-1.0, 1.0, d) if d > 1 else np.zeros(d)

    def problems(self) -> list[str]:
        """What stops the current family from being drawn (plain words; empty: fine)."""
        if self.family == "mar_table":
            return mt.violations(*self.mar_params)
        if self.family == "cpt_v" and not np.any(self.mu > 0):
            return ["every μ_v is 0: nothing would be observed"]
        return []

    def response_probs(self) -> np.ndarray:
        """P(r = 1 | x = v, item d) of the current family, (V, D)."""
        if self.family == "cpt_v":
            return np.repeat(self.mu[:, None], self.n_items, axis=1)
        if self.family == "linear":
            mu = np.clip(self.s * (np.arange(1, N_VALUES + 1) - 3) + 0.5, 0.0, 1.0)
            return np.repeat(mu[:, None], self.n_items, axis=1)
        if self.family == "logit_vd":
            return 1.0 / (1.0 + np.exp(-(self.sigma[:, None] + self.omega()[None, :])))
        table = mt.response_table(*self.mar_params)  # [x code, r code]
        joint = np.asarray(MAR_JOINT)
        out = np.zeros((2, 2))
        for v in (0, 1):
            rows1 = [2 * v, 2 * v + 1]  # x1 = v
            out[v, 0] = np.dot(joint[rows1], table[rows1][:, 2:].sum(axis=1)) / joint[rows1].sum()
            rows2 = [v, 2 + v]  # x2 = v
            out[v, 1] = np.dot(joint[rows2], table[rows2][:, [1, 3]].sum(axis=1)) / joint[rows2].sum()
        return out

    def compute(self) -> GalleryResult:
        """Draw the world and the mask of the current family (raises BadInputError on an invalid setting)."""
        rng = np.random.default_rng(self.seed)
        if self.family == "mar_table":
            mt.check_params(self.mar_params)
            codes, response = mt.sample(self.n_users, MAR_JOINT, self.mar_params, rng=rng)
            values = ("0", "1")
        else:
            world = make_rating_world(self.n_users, self.n_items, self.n_clusters, n_values=N_VALUES, s=0.0, rng=rng)
            codes = np.array(world.codes)
            X = (codes + 1).astype(float)
            if self.family == "cpt_v":
                missing = tm.cpt_v(X, rng=rng, mu=tuple(self.mu), levels="given")
            elif self.family == "linear":
                missing = tm.linear_value_effect(X, rng=rng, s=self.s, n_levels=N_VALUES, levels="given")
            else:
                missing = tm.logit_vd(X, rng=rng, sigma=tuple(self.sigma), omega=tuple(self.omega()), levels="given")
            response = ~missing
            values = tuple(str(v) for v in range(1, N_VALUES + 1))
        n_values = len(values)
        true_counts = np.bincount(codes.ravel(), minlength=n_values).astype(float)
        observed_counts = np.bincount(codes[response], minlength=n_values).astype(float)
        onehot = codes[..., None] == np.arange(n_values)  # (N, D, V)
        item_true = onehot.sum(axis=0)
        item_obs = (onehot & response[..., None]).sum(axis=0)
        return GalleryResult(
            family=self.family, values=values, response_probs=self.response_probs(), codes=codes, response=response,
            true_counts=true_counts, observed_counts=observed_counts,
            skl=float(symmetrised_kl(observed_counts, true_counts)),
            item_skl=np.asarray(symmetrised_kl(item_obs, item_true)))
