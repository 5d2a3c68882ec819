"""``explorer.evaluation.evaluate`` on tables (DataFrames with categorical columns) against its array path.

The four points a review of ``evaluate`` on tables raised: coverage of imputers that only sample (PMM), rows the mask
empties, the units of the NLL, and what ``fit_seconds`` times. Each test's oracle is the array path or a direct
recomputation from the recorded seed.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest
from sklearn.base import BaseEstimator, TransformerMixin

from explorer.baselines import MeanModeImputer, PMMImputer
from explorer.evaluation import N_DRAWS, _score_estimator, draws_interval, evaluate, observed_scale
from explorer.impute.gaussian_mixture import GaussianMixtureImputer
from explorer.impute.mixed import MixedMixtureImputer, categorical_columns

COV = np.array([[1.0, 0.7, 0.4], [0.7, 1.0, 0.5], [0.4, 0.5, 1.0]])


def _gaussian_table(n=200, seed=0, gaps=0.1, scale=(1.0, 5.0, 0.2)):
    """Three correlated Gaussian columns on different scales and a two-level category, gaps at random."""
    rng = np.random.default_rng(seed)
    z = rng.multivariate_normal(np.zeros(3), COV, size=n) * np.asarray(scale)
    kind = np.where(z[:, 0] + 0.5 * rng.normal(size=n) > 0, "up", "down")
    frame = pd.DataFrame({"a": z[:, 0], "kind": kind, "b": z[:, 1], "c": z[:, 2]})
    return frame.mask(rng.random(frame.shape) < gaps) if gaps else frame


def _raw_mask(X, rate, seed):
    """The table path's draw of the hidden cells, before any row is given its cells back."""
    return X.notna().to_numpy() & (np.random.default_rng(int(seed)).random(X.shape) < rate)


def _emptied_rows(X, hidden):
    observed = X.notna().to_numpy()
    return observed.any(axis=1) & ~(observed & ~hidden).any(axis=1)


def _scored_mask(X, rate, seed):
    """The hidden cells scored: a row the draw empties keeps all its cells (as ``hide_observed`` on arrays)."""
    hidden = _raw_mask(X, rate, seed)
    hidden[_emptied_rows(X, hidden)] = False
    return hidden


class CodedPMM(TransformerMixin, BaseEstimator):
    """PMM on a table: the category as the position of its level, imputed as a number; ``sample`` returns the coded
    draws as an array (n_imputations, rows, columns) in the table's column order (what benchmarks/mixed_data.py's
    wrapper does)."""

    def __init__(self, random_state=None):
        self.random_state = random_state

    def _codes(self, X):
        out = X.copy()
        for c, levels in self.levels_.items():
            out[c] = X[c].map({v: float(i) for i, v in enumerate(levels)}).astype(float)
        return out.to_numpy(dtype=float)

    def fit(self, X, y=None):
        self.levels_ = {c: sorted(X[c].dropna().unique()) for c in categorical_columns(X)}
        self.pmm_ = PMMImputer(random_state=self.random_state).fit(self._codes(X))
        return self

    def transform(self, X):
        coded = self.pmm_.transform(self._codes(X))
        out = X.copy()
        for j, c in enumerate(X.columns):
            values = coded[:, j]
            out[c] = [self.levels_[c][int(round(v))] for v in values] if c in self.levels_ else values
        return out

    def sample(self, X, n_imputations=5, random_state=None):
        return self.pmm_.sample(self._codes(X), n_imputations=n_imputations, random_state=random_state)


def _values(table, imputer, metric):
    return table[(table.imputer == imputer) & (table.metric == metric)]["value"].to_numpy()


# --------------------------------------------------------------------------- 1. coverage from draws
def test_an_imputer_that_samples_gets_coverage_from_its_draws_on_a_table():
    X = _gaussian_table()
    table = evaluate({"pmm": CodedPMM(random_state=0), "location": MixedMixtureImputer(random_state=0),
                      "mode": MeanModeImputer()}, X, rate=0.2, n_repeats=2, random_state=0)
    coverage = _values(table, "pmm", "coverage")
    assert np.isfinite(coverage).all() and ((coverage >= 0.8) & (coverage <= 1.0)).all()
    assert np.isnan(_values(table, "pmm", "nll")).all()  # draws of observed values give no density
    # the output says where each coverage came from; rows of other metrics say nothing
    source = table.set_index(["imputer", "metric"])["coverage_from"]
    assert set(source.loc[("pmm", "coverage")]) == {"draws"}
    assert set(source.loc[("location", "coverage")]) == {"conditional"}
    assert source.loc[("mode", "coverage")].isna().all() and source.xs("nrmse", level="metric").isna().all()
    # oracle for repeat 0: the equal-tailed interval of N_DRAWS draws seeded by the repeat's seed, as on arrays
    seed = int(table.seed.iloc[0])
    hidden = _scored_mask(X, 0.2, seed)
    held = X.mask(hidden)
    fitted = CodedPMM(random_state=0).fit(held)
    num = [0, 2, 3]
    lo, hi = draws_interval(fitted.sample(held, n_imputations=N_DRAWS, random_state=seed)[:, :, num], 0.95)
    truth, h = X.iloc[:, num].to_numpy(float), hidden[:, num]
    assert coverage[0] == pytest.approx(np.mean((truth[h] >= lo[h]) & (truth[h] <= hi[h])), abs=1e-12)


def test_draws_given_as_dataframes_are_read_by_column_name():
    """An imputer whose ``sample`` returns DataFrames (MixedMixtureImputer's kind) gets the same coverage as from
    the array of the same draws."""

    class FramedPMM(CodedPMM):
        def sample(self, X, n_imputations=5, random_state=None):
            draws = super().sample(X, n_imputations, random_state)
            return [pd.DataFrame(d, index=X.index, columns=X.columns).iloc[:, ::-1] for d in draws]

    X = _gaussian_table(n=120, seed=1)
    both = evaluate({"array": CodedPMM(random_state=0), "frames": FramedPMM(random_state=0)}, X, rate=0.2,
                    n_repeats=1, n_draws=8, random_state=2)
    assert _values(both, "frames", "coverage")[0] == _values(both, "array", "coverage")[0]


# --------------------------------------------------------------------------- 2. emptied rows
class _SeesRows(MeanModeImputer):
    """MeanModeImputer that records, at every fit, whether some row had no observed cell."""

    seen: list = []

    def fit(self, X, y=None):
        _SeesRows.seen.append(bool(X.isna().all(axis=1).any()))
        return super().fit(X, y)


def test_a_row_the_mask_empties_keeps_its_cells_as_on_arrays():
    X = _gaussian_table(n=150, seed=2, gaps=0.0)
    X.iloc[::2, [0, 2, 3]] = np.nan  # every other row has one observed cell: half of them are emptied at rate 0.5
    _SeesRows.seen = []
    table = evaluate({"mode": _SeesRows()}, X, rate=0.5, n_repeats=2, random_state=0)
    assert _SeesRows.seen == [False, False]
    for seed, n_hidden in table.groupby("seed")["n_hidden"].first().items():
        raw = _raw_mask(X, 0.5, seed)
        emptied = _emptied_rows(X, raw)
        assert emptied.sum() > 5  # the draw empties rows ...
        assert n_hidden == raw[~emptied].sum()  # ... which keep all their cells: only the others are scored
    # the location model refuses rows with nothing observed: it runs now
    evaluate(MixedMixtureImputer(random_state=0), X, rate=0.5, n_repeats=1, random_state=0)


def test_a_column_the_mask_would_empty_is_refused_by_name():
    X = _gaussian_table(n=60, seed=3, gaps=0.0)
    X.loc[X.index[2:], "c"] = np.nan  # two observed cells: some repeat hides both (their rows keep other cells)
    from explorer.core.validation import BadInputError

    with pytest.raises(BadInputError, match="every observed cell of column.*'c'"):
        evaluate(MeanModeImputer(), X, rate=0.6, n_repeats=10, random_state=0)


# --------------------------------------------------------------------------- 3. NLL units
class _NumericGMM(TransformerMixin, BaseEstimator):
    """A Gaussian on the numeric columns of a table (the category filled by its mode), with their conditional."""

    def fit(self, X, y=None):
        self.numeric_columns_ = [c for c in X.columns if c != "kind"]
        self.gmm_ = GaussianMixtureImputer(n_components=1, empty_rows="marginal", random_state=0)
        self.gmm_.fit(X[self.numeric_columns_].to_numpy(float))
        self.mode_ = X["kind"].mode().iloc[0]
        return self

    def transform(self, X):
        out = X.copy()
        out[self.numeric_columns_] = self.gmm_.transform(X[self.numeric_columns_].to_numpy(float))
        out["kind"] = X["kind"].fillna(self.mode_)
        return out

    def conditional(self, X):
        return self.gmm_.conditional(X[self.numeric_columns_].to_numpy(float))


def test_nll_on_a_table_is_the_array_nll_of_the_same_numeric_cells():
    """Tables and arrays report the NLL in the same (data) units: the table's NLL equals the array path's on the
    numeric columns alone with the same hidden cells; NLL of standardised values = NLL + mean log s_j."""
    X = _gaussian_table(n=150, seed=4)
    table = evaluate({"gmm": _NumericGMM()}, X, rate=0.2, n_repeats=2, random_state=5)
    nll = _values(table, "gmm", "nll")
    num = ["a", "b", "c"]
    truth = X[num].to_numpy(float)
    scale = observed_scale(truth)
    for r, seed in table.groupby("repeat")["seed"].first().items():
        h = _scored_mask(X, 0.2, seed)[:, [0, 2, 3]]
        array = _score_estimator(GaussianMixtureImputer(n_components=1, empty_rows="marginal", random_state=0),
                                 truth, np.where(h, np.nan, truth), h, scale, 0.95)
        assert nll[r] == pytest.approx(array["nll"], abs=1e-9)
    # data units: rescaling the numeric columns by 10 adds log 10 per hidden numeric cell
    tenfold = X.assign(**{c: X[c] * 10 for c in num})
    again = evaluate({"gmm": _NumericGMM()}, tenfold, rate=0.2, n_repeats=2, random_state=5)
    np.testing.assert_allclose(_values(again, "gmm", "nll"), nll + np.log(10), atol=1e-6)


# --------------------------------------------------------------------------- 4. fit_seconds
class _SlowToScore(MeanModeImputer):
    """Fits at once, imputes slowly."""

    def transform(self, X):
        time.sleep(0.25)
        return super().transform(X)


def test_fit_seconds_times_the_fit_alone_on_tables_and_arrays():
    X = _gaussian_table(n=60, seed=6)
    for data in (X, X[["a", "b", "c"]].to_numpy(float)):
        table = evaluate({"slow": _SlowToScore()}, data, rate=0.2, n_repeats=1, random_state=0)
        assert (table["fit_seconds"] < 0.2).all(), table["fit_seconds"].max()
