"""suggest_transforms takes 1 as a bound only when it is certain (issue 21): a column observed in (0.01, 0.9) may
hide a value above 1 (msleep's brainwt), which a logit on [0, 1] would give density 0 (an infinite NLL)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from explorer.evaluation import entry_logpdf
from explorer.impute.gaussian_mixture import GaussianMixtureImputer
from explorer.impute.transformed import TransformedImputer, suggest_transforms


def _weights(n=120, seed=0):
    rng = np.random.default_rng(seed)
    body = np.exp(rng.normal(0, 1.2, n))
    brain = np.clip(0.08 * body ** 0.75 * np.exp(rng.normal(0, 0.2, n)), 0.011, 0.9)
    return pd.DataFrame({"bodywt": body, "brainwt": brain})


def test_a_column_below_one_is_not_given_a_logit():
    df = _weights()
    assert 0.01 < df.brainwt.min() and df.brainwt.max() <= 0.9
    s = suggest_transforms(df)
    assert s["brainwt"].kind != "logit" and "1 is not taken as a bound" in s["brainwt"].reason
    assert s["brainwt"].upper is None


def test_a_hidden_value_above_one_gets_a_finite_density():
    df = _weights()
    truth = df.copy()
    truth.loc[0, "brainwt"] = 1.2  # the hidden true value, above every observed one
    hidden = np.zeros(df.shape, dtype=bool)
    hidden[0, 1] = True
    X = df.mask(hidden)
    imp = TransformedImputer(GaussianMixtureImputer(n_components=1, random_state=0), transforms="suggest").fit(X)
    lp = entry_logpdf(imp.conditional(X), truth.to_numpy(), hidden)
    assert lp.shape == (1,) and np.isfinite(lp).all()


def test_certain_fractions_keep_their_logit():
    rng = np.random.default_rng(1)
    df = pd.DataFrame({"share": rng.beta(2, 5, 200) * 0.8 + 0.05,   # named a fraction
                       "u": rng.uniform(0, 1, 200),                  # fills [0, 1]
                       "small": rng.uniform(0.2, 0.6, 200)})         # stays inside: 1 is not certain
    s = suggest_transforms(df)
    assert (s["share"].kind, s["share"].lower, s["share"].upper) == ("logit", 0.0, 1.0)
    assert "by its name" in s["share"].reason
    assert s["u"].kind == "logit" and "fill" in s["u"].reason
    assert s["small"].kind is None and s["small"].upper is None
