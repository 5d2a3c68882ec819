"""MixedMixtureImputer: a DataFrame with numeric, categorical, text and boolean columns imputed as it is (issue 21)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

from explorer.core.mixtures import location_model as lm
from explorer.core.validation import BadInputError
from explorer.impute.mixed import MixedMixtureImputer, categorical_columns


def _table(n=400, seed=0, rate=0.2):
    """Two groups: a categorical 'group', a text 'colour' and a boolean 'flag' that depend on it, two numbers."""
    rng = np.random.default_rng(seed)
    g = rng.integers(0, 2, n)
    colour = np.where(rng.random(n) < np.where(g == 0, 0.85, 0.1), "red", np.where(rng.random(n) < 0.5, "blue", "green"))
    frame = pd.DataFrame({
        "group": pd.Categorical(np.array(["g0", "g1"])[g]),
        "size": np.where(g == 0, 0.0, 4.0) + rng.normal(size=n),
        "colour": colour.astype(object),
        "flag": rng.random(n) < np.where(g == 0, 0.9, 0.15),
        "weight": 2.0 * np.where(g == 0, 0.0, 4.0) + rng.normal(size=n),
    })
    miss = rng.random(frame.shape) < rate
    return frame, frame.mask(miss), miss


def test_columns_are_split_by_dtype_and_dtypes_come_back():
    truth, df, miss = _table()
    assert categorical_columns(df) == ["group", "colour", "flag"]
    imp = MixedMixtureImputer(random_state=0).fit(df)
    out = imp.transform(df)
    assert not out.isna().any().any()
    assert isinstance(out["group"].dtype, pd.CategoricalDtype) and list(out["group"].cat.categories) == ["g0", "g1"]
    assert out["flag"].dtype == bool and out["size"].dtype == float
    assert out.index.equals(df.index) and list(out.columns) == list(df.columns)
    obs = ~miss
    for j, c in enumerate(df.columns):  # observed cells unchanged
        assert (out[c][obs[:, j]].to_numpy() == df[c][obs[:, j]].to_numpy()).all(), c
    assert imp.categories_["colour"] == ["blue", "green", "red"]


def test_transform_is_the_core_model_on_the_encoded_data():
    """Oracle: the estimator is location_model fitted on the codes it documents (positions in categories_)."""
    _, df, _ = _table(200, seed=1)
    imp = MixedMixtureImputer(n_components=2, random_state=3).fit(df)
    num = df[["size", "weight"]].to_numpy(dtype=float)
    codes = np.column_stack([
        df[c].astype(object).map({v: i for i, v in enumerate(imp.categories_[c])}).fillna(-1).to_numpy(dtype=np.int64)
        for c in ("group", "colour", "flag")])
    data = lm.prepare(num, codes, [2, 3, 2])
    result = lm.fit(data, lm.LocationConfig(n_components=2), np.random.default_rng(3))
    np.testing.assert_allclose(imp.means_, result.state.means, rtol=1e-12)
    x, c = lm.impute(result.state, data)
    out = imp.transform(df)
    np.testing.assert_allclose(out[["size", "weight"]].to_numpy(), x, rtol=1e-12)
    assert (out["colour"].to_numpy() == np.array(imp.categories_["colour"], dtype=object)[c[:, 1]]).all()


def test_missing_categories_are_recovered_better_than_the_most_frequent_level():
    truth, df, miss = _table(600, seed=2)
    imp = MixedMixtureImputer(random_state=0).fit(df)
    out = imp.transform(df)
    for j, c in ((0, "group"), (2, "colour"), (3, "flag")):
        hidden = miss[:, j]
        acc = (out[c][hidden].to_numpy() == truth[c][hidden].to_numpy()).mean()
        mode = df[c].mode().iloc[0]
        baseline = (truth[c][hidden].to_numpy() == mode).mean()
        assert acc > baseline + 0.1, (c, acc, baseline)


def test_predict_proba_sums_to_one_and_its_argmax_is_the_imputation():
    _, df, miss = _table(300, seed=4)
    imp = MixedMixtureImputer(random_state=0).fit(df)
    proba = imp.predict_proba(df)
    out = imp.transform(df)
    for j, c in ((0, "group"), (2, "colour"), (3, "flag")):
        p = proba[c]
        assert list(p.columns) == imp.categories_[c] and p.index.equals(df.index)
        np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-12)
        hidden = miss[:, j]
        assert (p[hidden].idxmax(axis=1).to_numpy() == out[c][hidden].to_numpy()).all()


def test_draws_keep_observed_cells_and_vary():
    _, df, miss = _table(200, seed=5)
    imp = MixedMixtureImputer(random_state=0).fit(df)
    draws = imp.sample(df, 4, random_state=1)
    assert len(draws) == 4
    for d in draws:
        assert not d.isna().any().any()
        for j, c in enumerate(df.columns):
            assert (d[c][~miss[:, j]].to_numpy() == df[c][~miss[:, j]].to_numpy()).all()
    assert not draws[0]["size"].equals(draws[1]["size"])
    again = imp.sample(df, 4, random_state=1)
    assert all(a.equals(b) for a, b in zip(draws, again))
    lo, hi = imp.conditional(df).interval(0.95)
    assert lo.shape == (len(df), 2) and (lo <= hi).all() and np.isfinite(lo).all()


def test_clone_and_params():
    imp = MixedMixtureImputer(n_components=3, phi=2.0)
    assert clone(imp).get_params() == imp.get_params()


def test_bad_input_is_refused_clearly():
    _, df, _ = _table(100, seed=6)
    ids = df.assign(name=[f"person {i}" for i in range(len(df))])
    with pytest.raises(BadInputError, match=r"'name' has 100 distinct values.*identifier or free text"):
        MixedMixtureImputer(max_levels=50).fit(ids)
    imp = MixedMixtureImputer(random_state=0).fit(df)
    new = df.head(3).copy()
    new["colour"] = ["purple", None, "red"]
    with pytest.raises(BadInputError, match=r"'colour' has the level 'purple', which the training rows never showed"):
        imp.transform(new)
    with pytest.raises(BadInputError, match="columns"):
        imp.transform(df[["size", "group", "colour", "flag", "weight"]])
    with pytest.raises(BadInputError, match="numeric when fitted"):
        imp.transform(df.assign(size=["big"] * len(df)))
    with pytest.raises(BadInputError, match="more than the number of rows|exceeds|n_components"):
        MixedMixtureImputer(n_components=500).fit(df)
    with pytest.raises(BadInputError, match="no observed value"):
        MixedMixtureImputer().fit(df.assign(colour=None))


def test_the_gaussian_imputer_points_to_this_class_for_text_columns():
    from explorer.impute.gaussian_mixture import GaussianMixtureImputer

    _, df, _ = _table(50, seed=7)
    with pytest.raises(BadInputError, match="MixedMixtureImputer"):
        GaussianMixtureImputer().fit(df.assign(colour=df["colour"].astype(object)))


def test_evaluate_scores_pfc_and_logloss_on_categorical_cells():
    from explorer.baselines import MeanModeImputer
    from explorer.evaluation import evaluate, summarize

    _, df, _ = _table(300, seed=8, rate=0.1)
    table = evaluate({"mixed": MixedMixtureImputer(random_state=0), "mode": MeanModeImputer()}, df, rate=0.2,
                     n_repeats=2, random_state=0)
    s = summarize(table)["mean"]
    assert set(table.metric) == {"nrmse", "mae", "coverage", "nll", "pfc", "logloss"}
    # the location model predicts the categories from the rest of the row; the mode cannot
    assert s["mixed", "pfc"] < s["mode", "pfc"] - 0.1 and s["mixed", "logloss"] < s["mode", "logloss"] - 0.1
    assert s["mixed", "nrmse"] < s["mode", "nrmse"] and 0.85 < s["mixed", "coverage"] <= 1.0
    assert np.isnan(s["mode", "coverage"]) and np.isfinite(s["mode", "logloss"])
    # oracle for one repeat: PFC and log-loss recomputed by hand from the same mask
    seed = int(table.seed.iloc[0])
    hidden = df.notna().to_numpy() & (np.random.default_rng(seed).random(df.shape) < 0.2)
    held = df.mask(hidden)
    imp = MixedMixtureImputer(random_state=0).fit(held)
    filled, proba = imp.transform(held), imp.predict_proba(held)
    wrong, loss, count = 0, [], 0
    for j, c in ((0, "group"), (2, "colour"), (3, "flag")):
        rows = np.flatnonzero(hidden[:, j])
        count += rows.size
        wrong += int((filled[c].iloc[rows].astype(object).to_numpy() != df[c].iloc[rows].astype(object).to_numpy()).sum())
        loss += [-np.log(max(proba[c].iloc[i][df[c].iloc[i]], 1e-15)) for i in rows]
    first = table[(table.imputer == "mixed") & (table.repeat == 0)].set_index("metric")["value"]
    assert first["pfc"] == pytest.approx(wrong / count, rel=1e-12)
    assert first["logloss"] == pytest.approx(np.mean(loss), rel=1e-12)


def test_evaluate_on_a_table_refuses_other_mechanisms():
    from explorer.evaluation import evaluate

    _, df, _ = _table(50, seed=9)
    with pytest.raises(BadInputError, match="completely at random"):
        evaluate(MixedMixtureImputer(), df, mechanism="mar")


def test_an_identifier_column_is_named_in_a_warning():
    """A text column with a different value in every observed row (20 or more) is an identifier: fitted, with an
    IdentifierWarning that names it and how to leave it out; 19 rows, or one repeated value, are not."""
    from explorer.impute.mixed import IDENTIFIER_MIN_ROWS, IdentifierWarning

    frame, holes, _ = _table(n=60, seed=3)
    holes.insert(2, "code", [f"k{i:03d}" for i in range(len(holes))])
    holes.loc[[4, 9], "code"] = None  # gaps do not count: 58 observed values, all different
    with pytest.warns(IdentifierWarning, match=r"'code' has a different value in each of its 58 observed rows.*"
                                               r"--exclude 'code'"):
        MixedMixtureImputer(n_components=2, random_state=0, n_posterior_draws=2).fit(holes)
    import warnings as _w

    for table in (holes.iloc[:IDENTIFIER_MIN_ROWS + 1].drop([4, 9]).iloc[:IDENTIFIER_MIN_ROWS - 1],
                  holes.assign(code=holes["code"].where(holes.index != 7, "k000"))):
        with _w.catch_warnings():
            _w.simplefilter("error", IdentifierWarning)
            MixedMixtureImputer(n_components=1, random_state=0, n_posterior_draws=2).fit(table)
