"""``explorer evaluate`` on a CSV with text columns (issue 21): scored as a table, as ``impute`` imputes it.

The oracle is the library: :func:`explorer.evaluation.evaluate` on the table :func:`explorer.io.read_csv_table`
reads, with MixedMixtureImputer and MeanModeImputer at the same seed, gives the numbers the command writes.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from explorer.cli import main
from tests.test_cli import _error_line


def _survey(path, seed=0, n=90):
    """A yes/no column, two numeric ones, gaps everywhere and pandas' row names (an empty header)."""
    rng = np.random.default_rng(seed)
    g = rng.integers(0, 2, n)
    frame = pd.DataFrame({"smoker": np.where(rng.random(n) < np.where(g == 0, 0.9, 0.1), "yes", "no"),
                          "age": 40 + 10 * g + rng.normal(size=n) * 3, "bmi": 25 + 3 * g + rng.normal(size=n)},
                         index=[f"p{i}" for i in range(n)])
    holes = frame.mask(rng.random(frame.shape) < 0.15)
    holes.to_csv(path)
    assert path.read_text().startswith(",smoker,age,bmi")
    return holes


def test_evaluate_scores_a_table_with_a_text_column(tmp_path, capsys):
    from explorer import evaluation
    from explorer.baselines import MeanModeImputer
    from explorer.impute.mixed import MixedMixtureImputer
    from explorer.io import read_csv_table

    src, out = tmp_path / "survey.csv", tmp_path / "scores.csv"
    holes = _survey(src)
    assert main(["evaluate", str(src), "--repeats", "2", "--seed", "3", "-k", "2", "-q", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    n_missing = int(holes.isna().to_numpy().sum())
    assert f"90 rows x 3 columns (1 text / category: smoker), {n_missing} missing" in printed
    for word in ("nrmse", "coverage", "nll", "pfc", "logloss", "MixedMixtureImputer", "column mean / mode", "n/a"):
        assert word in printed
    tidy = pd.read_csv(out)
    # oracle: the library's evaluate on the same table, imputers and seed
    table = read_csv_table(src)
    assert list(table.index[:2]) == ["p0", "p1"] and list(table.columns) == ["smoker", "age", "bmi"]
    expected = evaluation.evaluate({"MixedMixtureImputer": MixedMixtureImputer(n_components=2, random_state=3),
                                    "column mean / mode": MeanModeImputer()}, table, n_repeats=2, random_state=3)
    assert list(tidy["imputer"]) == list(expected["imputer"]) and list(tidy["metric"]) == list(expected["metric"])
    np.testing.assert_allclose(tidy["value"], expected["value"], rtol=1e-10, equal_nan=True)
    summary = evaluation.summarize(expected)
    pfc = summary.loc[("MixedMixtureImputer", "pfc"), "mean"]
    assert f"{pfc:.4g}" in printed
    # the model uses age and bmi to guess smoker: fewer wrong categories than the most frequent level
    assert pfc < summary.loc[("column mean / mode", "pfc"), "mean"]


def test_no_baseline_and_drop_non_numeric(tmp_path, capsys):
    src = tmp_path / "survey.csv"
    _survey(src)
    assert main(["evaluate", str(src), "--repeats", "1", "--no-baseline", "-q"]) == 0
    printed = capsys.readouterr().out
    assert "MixedMixtureImputer" in printed and "column mean" not in printed
    assert main(["evaluate", str(src), "--repeats", "1", "--drop-non-numeric", "-q"]) == 0
    printed = capsys.readouterr().out  # the numeric path on age and bmi
    assert "90 rows x 2 columns" in printed and "pfc" not in printed and "column mean" in printed


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (["--model", "gmm", "mfa"], "--model mfa does not apply"),
        (["--model", "fa"], "--model fa does not apply"),
        (["--transform", "auto"], "--transform does not apply"),
        (["--factors", "2"], "--factors does not apply"),
        (["--mechanism", "mar"], "--mechanism mar does not apply"),
    ],
)
def test_evaluate_refuses_what_does_not_apply_to_a_table(tmp_path, capsys, extra, match):
    src = tmp_path / "survey.csv"
    _survey(src)
    assert main(["evaluate", str(src), "--repeats", "1", "-q", *extra]) == 2
    line = _error_line(capsys)
    assert match in line and "has text columns" in line and "--drop-non-numeric" in line


def test_components_auto_on_a_csv_with_text_columns(tmp_path, capsys):
    """``--components auto`` is MixedMixtureImputer(n_components="auto"), in impute and in evaluate."""
    from explorer.impute.mixed import MixedMixtureImputer
    from explorer.io import read_csv_table

    src = tmp_path / "survey.csv"
    _survey(src)
    assert main(["impute", str(src), "--components", "auto", "--seed", "0", "-q", "-o", str(tmp_path / "o.csv")]) == 0
    said = capsys.readouterr().out
    lib = MixedMixtureImputer(n_components="auto", random_state=0).fit(read_csv_table(src))
    assert f"MixedMixtureImputer, K = {lib.n_components_} chosen on the data (held-out cells)" in said
    assert main(["evaluate", str(src), "--components", "auto", "--repeats", "1", "--no-baseline", "-q"]) == 0
    assert "MixedMixtureImputer" in capsys.readouterr().out
