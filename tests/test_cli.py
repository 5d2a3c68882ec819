"""The ``explorer`` command line (explorer.cli), run in-process with ``main([...])``.

What the command writes is checked against the library called directly (the oracle: the same
estimator, seed and data give the same numbers); errors must be one line on stderr, exit status 2,
and no traceback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from explorer.cli import main
from explorer.export import read_imputations
from explorer.io import from_csv
from explorer.persistence import load_model

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def csv_path(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3)) @ np.array([[1.0, 0.5, 0.2], [0.0, 1.0, 0.4], [0.0, 0.0, 1.0]]) + [5, 10, 20]
    frame = pd.DataFrame(X, columns=["Ozone", "Wind", "Temp"])
    frame.loc[::4, "Ozone"] = np.nan
    frame.loc[1::7, "Temp"] = np.nan
    path = tmp_path / "air.csv"
    frame.to_csv(path, index=False, na_rep="NA")
    return path


def _error_line(capsys):
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("suffix", [".nc", ".csv", ".parquet"])
def test_impute_writes_what_the_library_computes(tmp_path, csv_path, capsys, suffix):
    out = tmp_path / f"imputed{suffix}"
    status = main(["impute", str(csv_path), "--model", "gmm", "--components", "2", "--multiple", "4",
                   "--seed", "3", "--out", str(out), "--save-model", str(tmp_path / "m.json")])
    assert status == 0
    captured = capsys.readouterr()
    assert "60 rows x 3 columns" in captured.out and f"wrote {out}" in captured.out
    for stage in ("read", "fit", "impute", "write"):
        assert f"explorer: {stage}" in captured.err  # one progress line per stage (stderr is not a terminal)
    got = read_imputations(out)
    data = from_csv(csv_path)
    # oracle: the library with the same settings
    from explorer.impute.gaussian_mixture import GaussianMixtureImputer

    X = np.array(data.values)
    est = GaussianMixtureImputer(n_components=2, random_state=3).fit(pd.DataFrame(X, columns=list(data.columns)))
    assert np.array_equal(got.imputed, np.asarray(est.transform(X)))
    draws = np.asarray(est.sample(X, n_imputations=4, random_state=np.random.default_rng([3, 1])))
    assert np.array_equal(got.samples, draws)
    assert np.array_equal(got.missing, data.missing)
    assert got.columns == ["Ozone", "Wind", "Temp"]
    assert np.array_equal(got.imputed[~data.missing], X[~data.missing])
    assert np.isfinite(got.samples).all()
    model = load_model(tmp_path / "m.json")
    assert np.array_equal(np.asarray(model.transform(X)), got.imputed)


@pytest.mark.parametrize(
    ("model", "extra", "expected"),
    [
        ("dpgmm", ["--components", "4"], {"n_components": 4}),
        ("fa", ["--factors", "1"], {"n_factors": 1}),
        ("mfa", ["--components", "2", "--factors", "1"], {"n_components": 2, "n_factors": 1}),
    ],
)
def test_every_model(tmp_path, csv_path, model, extra, expected):
    out = tmp_path / "o.csv"
    status = main(["impute", str(csv_path), "--model", model, *extra, "--seed", "0", "--max-iter", "50",
                   "--quiet", "--out", str(out), "--save-model", str(tmp_path / "m.json")])
    assert status == 0
    got = read_imputations(out)
    assert got.samples is None and np.isfinite(got.imputed).all()
    params = json.loads((tmp_path / "m.json").read_text())["params"]
    assert {k: params[k] for k in expected} == expected and params["max_iter"] == 50


def test_same_seed_same_file(tmp_path, csv_path):
    for name in ("a.nc", "b.nc"):
        assert main(["impute", str(csv_path), "-k", "2", "-m", "3", "--seed", "5", "-q", "-o", str(tmp_path / name)]) == 0
    a, b = read_imputations(tmp_path / "a.nc"), read_imputations(tmp_path / "b.nc")
    assert np.array_equal(a.samples, b.samples) and np.array_equal(a.imputed, b.imputed)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["impute", "{tmp}/absent.csv", "-o", "{tmp}/o.nc"], "no such file"),
        (["impute", "{csv}", "-o", "{tmp}/o.xlsx"], "unknown file type '.xlsx'"),
        (["impute", "{csv}", "-o", "{tmp}/nodir/o.nc"], "does not exist"),
        (["impute", "{csv}", "-o", "{tmp}/o.nc", "--model", "fa", "--components", "2"], "--components does not apply"),
        (["impute", "{csv}", "-o", "{tmp}/o.nc", "--model", "gmm", "--factors", "2"], "--factors applies to"),
        (["impute", "{csv}", "-o", "{tmp}/o.nc", "--components", "0"], "positive integer or 'auto'"),
        (["impute", "{csv}", "-o", "{tmp}/o.nc", "--components", "many"], "positive integer or 'auto'"),
        (["impute", "{csv}", "-o", "{tmp}/o.nc", "--model", "knn"], "invalid choice: 'knn'"),
        (["impute", "{csv}", "-o", "{tmp}/o.nc", "--multiple", "-1"], "integer >= 0"),
        (["impute", "{csv}"], "required: --out"),
        (["frobnicate"], "invalid choice"),
        (["impute", "{text}", "-o", "{tmp}/o.nc"], "has text columns and netCDF holds numbers only"),
        (["impute", "{text}", "-o", "{tmp}/o.nc", "--drop-non-numeric"], "no numeric column"),
    ],
)
def test_errors_exit_2_with_one_line(tmp_path, csv_path, capsys, args, match):
    text = tmp_path / "text.csv"
    text.write_text("name,city\nann,paris\nbob,\n")
    args = [a.format(tmp=tmp_path, csv=csv_path, text=text) for a in args]
    assert main(args) == 2
    line = _error_line(capsys)
    assert match in line, line
    assert not (tmp_path / "o.nc").exists()


@pytest.mark.parametrize("model", ["gmm", "mfa", "dpgmm"])
def test_components_auto_chooses_k(tmp_path, csv_path, model):
    """``--components auto``: K chosen by the library (gmm, mfa), the default truncation of dpgmm."""
    out = tmp_path / "o.nc"
    assert main(["impute", str(csv_path), "--model", model, "--components", "auto", "--seed", "0", "-q",
                 "-o", str(out)]) == 0
    imputed = np.asarray(read_imputations(out).imputed)
    assert imputed.shape == (60, 3) and np.isfinite(imputed).all()


def test_default_components_are_chosen_on_the_data_and_said(tmp_path, csv_path, capsys):
    """No --components: the library's default, n_components="auto"; the summary names the K it chose."""
    out = tmp_path / "o.nc"
    assert main(["impute", str(csv_path), "--seed", "0", "-q", "-o", str(out)]) == 0
    said = capsys.readouterr().out
    from explorer.impute.gaussian_mixture import GaussianMixtureImputer

    data = from_csv(csv_path)
    fitted = GaussianMixtureImputer(random_state=0).fit(pd.DataFrame(data.values, columns=data.columns))
    assert f"imputed with GaussianMixtureImputer, K = {fitted.n_components_} chosen on the data" in said
    if fitted.shrinkage_selection_ is None:  # (60 x 3: the rule is 0.048, below 0.05)
        assert "prior shrinkage" not in said
    # small data (12 rows, 3 columns: the rule 0.2): the prior's shrinkage chosen on held-out entries, and said
    small = tmp_path / "small.csv"
    pd.read_csv(csv_path).iloc[:12].to_csv(small, index=False)
    assert main(["impute", str(small), "--seed", "0", "-q", "-o", str(out)]) == 0
    said = capsys.readouterr().out
    data = from_csv(small)
    fitted = GaussianMixtureImputer(random_state=0).fit(pd.DataFrame(data.values, columns=data.columns))
    lam = fitted.shrinkage_selection_.shrinkage
    assert f"prior shrinkage {lam:.3g} chosen on held-out entries (rule D / (N + D) = 0.2)" in said


def test_row_names_of_an_r_or_pandas_csv_are_not_imputed(tmp_path, csv_path, capsys):
    """A CSV written with its row names (first header empty): that column is not a feature."""
    frame = pd.read_csv(csv_path)
    named = tmp_path / "named.csv"
    frame.set_axis(np.arange(1, len(frame) + 1)).to_csv(named)
    out = tmp_path / "o.nc"
    assert main(["impute", str(named), "-k", "1", "--seed", "0", "-q", "-o", str(out)]) == 0
    said = capsys.readouterr().out
    assert f"{len(frame)} rows x {frame.shape[1]} columns" in said and "read as row names" in said
    got = read_imputations(out)
    assert list(got.columns) == list(frame.columns) and [str(i) for i in got.index] == [str(i) for i in
                                                                                         range(1, len(frame) + 1)]
    np.testing.assert_array_equal(got.missing, frame.isna().to_numpy())


def test_warnings_of_the_fit_are_one_line_each(tmp_path, csv_path, capsys):
    assert main(["impute", str(csv_path), "-k", "2", "--max-iter", "1", "--seed", "0", "-o", str(tmp_path / "o.nc")]) == 0
    err = capsys.readouterr().err
    assert "explorer: warning:" in err and "Traceback" not in err and "warnings.warn" not in err


def test_help_and_version(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "impute" in out
    assert main(["impute", "--help"]) == 0
    out = capsys.readouterr().out
    for option in ("--model", "--components", "--multiple", "--seed", "--save-model", "--out"):
        assert option in out
    assert main(["--version"]) == 0
    assert "explorer 0.1.0" in capsys.readouterr().out


def test_python_dash_m_explorer_help():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
    proc = subprocess.run([sys.executable, "-m", "explorer", "--help"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "usage: explorer" in proc.stdout and "impute" in proc.stdout


def test_library_modules_never_import_panel():
    """explorer.export and explorer.cli are L1 (docs/ARCHITECTURE.md): no Panel / HoloViews / Bokeh."""
    code = ("import sys, explorer.export, explorer.persistence, explorer.cli; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'panel', 'holoviews', 'bokeh'}))")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


needs_evaluation = pytest.mark.skipif(
    __import__("importlib").util.find_spec("explorer.evaluation") is None, reason="explorer.evaluation not available")


@needs_evaluation
def test_evaluate_prints_the_table_of_the_library(tmp_path, csv_path, capsys):
    from sklearn.impute import SimpleImputer

    from explorer import evaluation
    from explorer.impute.factor import FactorAnalysisImputer

    out = tmp_path / "scores.csv"
    status = main(["evaluate", str(csv_path), "--model", "fa", "--factors", "1", "--repeats", "2", "--seed", "4",
                   "--max-iter", "50", "--out", str(out)])
    assert status == 0
    printed = capsys.readouterr().out
    for word in ("nrmse", "mae", "coverage", "nll", "fa", "column mean", "n/a"):
        assert word in printed
    tidy = pd.read_csv(out)
    # oracle: the library's evaluate with the same imputers, data and seed
    data = from_csv(csv_path)
    expected = evaluation.evaluate(
        {"fa": FactorAnalysisImputer(n_factors=1, max_iter=50, random_state=4, empty_rows="marginal"),
         "column mean": SimpleImputer(strategy="mean")},
        np.array(data.values), n_repeats=2, random_state=4)
    assert list(tidy["imputer"]) == list(expected["imputer"])
    assert np.allclose(tidy["value"], expected["value"], rtol=1e-12, equal_nan=True)
    fa_nrmse = expected[(expected.imputer == "fa") & (expected.metric == "nrmse")]["value"].mean()
    assert f"{fa_nrmse:.4g}" in printed


@needs_evaluation
@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["evaluate", "{tmp}/absent.csv"], "no such file"),
        (["evaluate", "{csv}", "--model", "fa", "--components", "2"], "--components does not apply"),
        (["evaluate", "{csv}", "--out", "{tmp}/t.nc"], "give a .csv file"),
        (["evaluate", "{csv}", "--repeats", "0"], "integer >= 1"),
    ],
)
def test_evaluate_errors(tmp_path, csv_path, capsys, args, match):
    args = [a.format(tmp=tmp_path, csv=csv_path) for a in args]
    assert main(args) == 2
    assert match in _error_line(capsys)


# ---------------------------------------------------------------------------- the fit's progress
def test_the_fit_line_counts_the_iterations_of_the_library(tmp_path, csv_path, capsys):
    assert main(["impute", str(csv_path), "-k", "2", "--seed", "0", "-o", str(tmp_path / "o.nc"),
                 "--save-model", str(tmp_path / "m.json")]) == 0  # the saved model keeps no callback
    from explorer.impute.gaussian_mixture import GaussianMixtureImputer

    data = from_csv(csv_path)
    est = GaussianMixtureImputer(n_components=2, random_state=0).fit(
        pd.DataFrame(np.array(data.values), columns=list(data.columns)))
    assert f"s ({est.n_iter_} iterations)" in capsys.readouterr().err
    assert load_model(tmp_path / "m.json").get_params()["callback"] is None


def test_on_a_terminal_the_bar_shows_the_iteration_and_objective(tmp_path, csv_path, monkeypatch):
    import io

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    assert main(["impute", str(csv_path), "-k", "2", "--seed", "0", "-o", str(tmp_path / "o.nc")]) == 0
    assert "fit    iteration 1/300 objective" in term.getvalue()


def test_ctrl_c_during_the_fit_keeps_the_fit_so_far_and_writes(tmp_path, csv_path, capsys, monkeypatch):
    from explorer import cli

    def interrupt(self, info):
        if info.iteration == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(cli._Stages, "iteration", interrupt)
    assert main(["impute", str(csv_path), "-k", "2", "--seed", "0", "-o", str(tmp_path / "o.nc")]) == 0
    err = capsys.readouterr().err
    assert "explorer: warning: GaussianMixtureImputer.fit: Interrupted (KeyboardInterrupt) after 2 iteration" in err
    assert np.isfinite(read_imputations(tmp_path / "o.nc").imputed).all()


# ---------------------------------------------------------------------------- --transform
from explorer.cli import CommandError, parse_transform  # noqa: E402


@pytest.fixture
def skewed_csv(tmp_path):
    """A positive, right-skewed column 'conc' (log-normal, driven by x) with gaps, and two other columns."""
    rng = np.random.default_rng(1)
    n = 80
    z = rng.normal(size=n)
    x = z + 0.3 * rng.normal(size=n)
    frame = pd.DataFrame({"x": 10 + 2 * x, "conc": np.exp(z + 0.3 * rng.normal(size=n)), "y": rng.normal(size=n) + x})
    frame.loc[::5, "conc"] = np.nan
    frame.loc[2::9, "y"] = np.nan
    path = tmp_path / "skewed.csv"
    frame.to_csv(path, index=False, na_rep="NA")
    return path


def _library(path, transforms, point="mean", seed=0):
    """The oracle: TransformedImputer(GaussianMixtureImputer) fitted as the CLI fits it."""
    import warnings

    from explorer.impute.gaussian_mixture import GaussianMixtureImputer
    from explorer.impute.transformed import TransformedImputer

    data = from_csv(path)
    X = np.array(data.values)
    est = TransformedImputer(GaussianMixtureImputer(random_state=seed), transforms=transforms, point=point)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(pd.DataFrame(X, columns=list(data.columns)))
    return est, X


def test_transform_auto_keeps_a_positive_column_positive(tmp_path, skewed_csv, capsys):
    out = tmp_path / "o.nc"
    assert main(["impute", str(skewed_csv), "--transform", "auto", "-m", "5", "--seed", "0", "-o", str(out)]) == 0
    captured = capsys.readouterr()
    assert "explorer: warning: TransformedImputer(transforms='suggest') applies 'conc' (column 1): log(x)" in captured.err
    assert "imputed with GaussianMixtureImputer on transformed columns (" in captured.out and "conc: log" in captured.out
    got = read_imputations(out)
    X = np.array(from_csv(skewed_csv).values)
    gaps = np.isnan(X[:, 1])
    assert gaps.sum() == 16
    assert (got.imputed[gaps, 1] > 0).all() and (got.samples[:, gaps, 1] > 0).all()
    assert np.array_equal(got.imputed[~np.isnan(X)], X[~np.isnan(X)])  # observed cells bit for bit
    assert all(np.array_equal(s[~np.isnan(X)], X[~np.isnan(X)]) for s in got.samples)
    # oracle: the library with the same settings
    est, _ = _library(skewed_csv, "suggest")
    assert np.array_equal(got.imputed, np.asarray(est.transform(X)))
    assert np.array_equal(got.samples, np.asarray(est.sample(X, n_imputations=5, random_state=np.random.default_rng([0, 1]))))
    # the same data without --transform: the plain mixture imputes a negative concentration (why the option exists)
    assert main(["impute", str(skewed_csv), "--seed", "0", "-q", "-o", str(tmp_path / "plain.nc")]) == 0
    assert (read_imputations(tmp_path / "plain.nc").imputed[gaps, 1] < 0).any()


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (None, None),
        ([], None),
        (["none"], None),
        (["auto"], "suggest"),
        (["AUTO"], "suggest"),
        (["ozone=log,count=log:-1,share=logit:0:100"],
         {"ozone": "log", "count": ("log", -1.0), "share": ("logit", 0.0, 100.0)}),
        (["ozone=log", "share=logit"], {"ozone": "log", "share": "logit"}),  # repeatable
        (["wind=none"], {"wind": None}),
        (["a = log , b=log:0.5"], {"a": "log", "b": ("log", 0.5)}),
        (["Solar.R=LOG"], {"Solar.R": "log"}),
        (["x,y=log"], {"x,y": "log"}),  # one '=': one pair, the name may hold a comma
        (["rate=logit:-1e-3:1.5"], {"rate": ("logit", -0.001, 1.5)}),
    ],
)
def test_parse_transform_good(values, expected):
    assert parse_transform(values) == expected


@pytest.mark.parametrize(
    ("values", "match"),
    [
        (["ozone"], "expected COLUMN=KIND"),
        (["ozone=log,"], "unknown transform 'log,' for column 'ozone'"),
        (["=log"], "expected COLUMN=KIND"),
        (["ozone="], "expected COLUMN=KIND"),
        (["ozone=sqrt"], "unknown transform 'sqrt' for column 'ozone'"),
        (["ozone=log:1:2"], "unknown transform 'log:1:2'"),
        (["share=logit:0"], "unknown transform 'logit:0'"),
        (["ozone=none:1"], "unknown transform"),
        (["ozone=log:abc"], "lower bound of log for column 'ozone' must be a number"),
        (["ozone=log:inf"], "must be a finite number"),
        (["share=logit:1:0"], "needs LO < HI"),
        (["share=logit:0:nan"], "must be a finite number"),
        (["a=log,a=logit"], "column 'a' is given twice"),
        (["a=log", "a=log"], "column 'a' is given twice"),
        (["auto", "a=log"], "cannot be combined"),
        (["none", "auto"], "cannot be combined"),
    ],
)
def test_parse_transform_bad(values, match):
    with pytest.raises(CommandError, match=match):
        parse_transform(values)


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (["--transform", "conc=sqrt"], "unknown transform 'sqrt' for column 'conc'"),
        (["--transform", "Conc=log"], "--transform names column(s) ['Conc'] that the file does not have"),
        (["--transform", "conc=log:1e9"], "log transform of 'conc' (column 1) needs observed values > 1e+09"),
        (["--transform", "x=logit:0:1"], "logit transform of 'x' (column 0) on (0, 1) needs observed values"),
        (["--point", "median"], "--point applies only with --transform"),
        (["--transform", "none", "--point", "median"], "--point applies only with --transform"),
        (["--transform", "auto", "--point", "mode"], "invalid choice: 'mode'"),
    ],
)
@pytest.mark.parametrize("command", ["impute", "evaluate"])
def test_bad_transform_exits_2_with_the_message(tmp_path, skewed_csv, capsys, extra, match, command):
    out = tmp_path / "o.nc"
    args = ["impute", str(skewed_csv), "-o", str(out)] if command == "impute" else [
        "evaluate", str(skewed_csv), "--repeats", "1", "--max-iter", "5"]
    assert main([*args, *extra]) == 2
    line = _error_line(capsys)
    assert match in line, line
    if "invalid choice" not in match:
        assert line.startswith("explorer: error: ")
    assert not out.exists()


def test_explicit_spec_and_point_median_match_the_library(tmp_path, skewed_csv, capsys):
    out = tmp_path / "o.csv"
    assert main(["impute", str(skewed_csv), "--transform", "conc=log", "--transform", "x=log:-10", "--point", "median",
                 "--seed", "0", "-q", "-o", str(out)]) == 0
    assert "on transformed columns (x: log:-10; conc: log)" in capsys.readouterr().out
    got = read_imputations(out)
    est, X = _library(skewed_csv, {"conc": "log", "x": ("log", -10.0)}, point="median")
    assert np.array_equal(got.imputed, np.asarray(est.transform(X)))
    mean_est, _ = _library(skewed_csv, {"conc": "log", "x": ("log", -10.0)}, point="mean")
    gaps = np.isnan(X[:, 1])
    # a log-normal's median is below its mean: the option reached the estimator
    assert (got.imputed[gaps, 1] < np.asarray(mean_est.transform(X))[gaps, 1]).all()


def test_summary_names_the_transforms_in_file_order(tmp_path, skewed_csv, capsys):
    assert main(["impute", str(skewed_csv), "--transform", "conc=log,x=log:-10", "--seed", "0", "-q",
                 "-o", str(tmp_path / "o.nc")]) == 0
    assert "GaussianMixtureImputer on transformed columns (x: log:-10; conc: log)" in capsys.readouterr().out


def test_transform_with_save_model_round_trip(tmp_path, skewed_csv):
    out, model_path = tmp_path / "o.nc", tmp_path / "m.json"
    assert main(["impute", str(skewed_csv), "--transform", "auto", "--point", "median", "-m", "3", "--seed", "2",
                 "-q", "-o", str(out), "--save-model", str(model_path)]) == 0
    got = read_imputations(out)
    model = load_model(model_path)
    from explorer.impute.transformed import TransformedImputer

    assert isinstance(model, TransformedImputer) and model.point == "median"
    assert model.get_params()["imputer__callback"] is None and model.imputer_.get_params()["callback"] is None
    X = np.array(from_csv(skewed_csv).values)
    assert np.array_equal(np.asarray(model.transform(X)), got.imputed)
    assert np.array_equal(np.asarray(model.sample(X, n_imputations=3, random_state=np.random.default_rng([2, 1]))),
                          got.samples)


def test_warnings_of_the_impute_stage_are_printed(tmp_path, skewed_csv, capsys):
    """conc given as 'none': draws below 0, a bound its observed values never cross (BoundCrossingWarning)."""
    assert main(["impute", str(skewed_csv), "--transform", "conc=none", "-m", "20", "--seed", "0",
                 "-o", str(tmp_path / "o.nc")]) == 0
    captured = capsys.readouterr()
    err = captured.err
    impute_part = err[err.index("explorer: impute"):]  # printed after the impute stage, as the fit's are
    assert "explorer: warning: " in impute_part and "draw(s) of 'conc' (column 1) go below 0" in impute_part
    assert "explorer: hint: on the command line, --transform COL=log" in err
    assert "Traceback" not in err and "warnings.warn" not in err
    assert "imputed with GaussianMixtureImputer (no column transformed)" in captured.out


def test_the_fit_inside_the_transformed_imputer_reports_progress_and_ctrl_c(tmp_path, skewed_csv, capsys, monkeypatch):
    from explorer import cli

    assert main(["impute", str(skewed_csv), "--transform", "auto", "--seed", "0", "-o", str(tmp_path / "a.nc")]) == 0
    est, _ = _library(skewed_csv, "suggest")
    assert f"s ({est.imputer_.n_iter_} iterations)" in capsys.readouterr().err

    def interrupt(self, info):
        if info.iteration == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(cli._Stages, "iteration", interrupt)
    assert main(["impute", str(skewed_csv), "-k", "2", "--transform", "auto", "--seed", "0",
                 "-o", str(tmp_path / "b.nc")]) == 0
    err = capsys.readouterr().err
    assert "explorer: warning: GaussianMixtureImputer.fit: Interrupted (KeyboardInterrupt) after 2 iteration" in err
    assert np.isfinite(read_imputations(tmp_path / "b.nc").imputed).all()


@needs_evaluation
def test_evaluate_with_transform_prints_the_table_of_the_library(tmp_path, skewed_csv, capsys):
    import warnings

    from sklearn.impute import SimpleImputer

    from explorer import evaluation
    from explorer.impute.gaussian_mixture import GaussianMixtureImputer
    from explorer.impute.transformed import TransformedImputer

    out = tmp_path / "scores.csv"
    assert main(["evaluate", str(skewed_csv), "--transform", "conc=log", "--point", "median", "--repeats", "2",
                 "--seed", "4", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "(--transform conc=log, point median)" in captured.out
    tidy = pd.read_csv(out)
    data = from_csv(skewed_csv)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = evaluation.evaluate(
            {"gmm": TransformedImputer(GaussianMixtureImputer(random_state=4, empty_rows="marginal"),
                                       transforms={1: "log"}, point="median"),
             "column mean": SimpleImputer(strategy="mean")},
            np.array(data.values), n_repeats=2, random_state=4)
    assert list(tidy["imputer"]) == list(expected["imputer"])
    assert np.allclose(tidy["value"], expected["value"], rtol=1e-12, equal_nan=True)
    # auto: the suggestion is announced with the column's name, not only its index
    assert main(["evaluate", str(skewed_csv), "--transform", "auto", "--repeats", "1", "--no-baseline"]) == 0
    assert "applies 'conc' (column 1): log(x)" in capsys.readouterr().err


@needs_evaluation
def test_ctrl_c_during_evaluate_stops_it(tmp_path, skewed_csv, capsys, monkeypatch):
    from explorer import evaluation

    fits = []
    real_fit = evaluation._score_estimator

    def counting(est, *args, **kwargs):
        fits.append(1)

        def interrupt(info):
            if info.iteration == 2:
                raise KeyboardInterrupt

        est.set_params(callback=interrupt)
        return real_fit(est, *args, **kwargs)

    monkeypatch.setattr(evaluation, "_score_estimator", counting)
    assert main(["evaluate", str(skewed_csv), "-k", "2", "--repeats", "3", "--no-baseline"]) == 130
    assert fits == [1]
    assert "explorer: interrupted after" in capsys.readouterr().err


# ------------------------------------------------------------------ a CSV with text columns (issue 21)
def _text_csv(path, seed=0, n=228):
    rng = np.random.default_rng(seed)
    g = rng.integers(0, 2, n)
    frame = pd.DataFrame({"smoker": np.where(rng.random(n) < np.where(g == 0, 0.85, 0.15), "yes", "no"),
                          "age": 40 + 10 * g + rng.normal(size=n) * 3, "bmi": 25 + 3 * g + rng.normal(size=n)})
    holes = frame.mask(rng.random(frame.shape) < 0.15)
    holes.to_csv(path)  # with pandas' row names, as a user would
    return frame, holes


def test_a_csv_with_a_yes_no_column_is_imputed_as_categories(tmp_path, capsys):
    from explorer.impute.mixed import MixedMixtureImputer
    from explorer.io import read_csv_table

    src, out = tmp_path / "survey.csv", tmp_path / "imputed.csv"
    truth, holes = _text_csv(src)
    assert main(["impute", str(src), "-m", "3", "--seed", "0", "-q", "-o", str(out)]) == 0
    said = capsys.readouterr().out
    assert "228 rows x 3 columns (1 text / category: smoker)" in said
    table = pd.read_csv(out, keep_default_na=False, na_values=[""])
    first = table[table.imputation == 0].set_index("row")
    assert set(first["smoker"]) == {"yes", "no"} and not first[["age", "bmi"]].isna().any().any()
    assert sorted(table.imputation.unique()) == [0, 1, 2, 3]
    # oracle: the library on the same table with the same seed
    fitted = MixedMixtureImputer(random_state=0).fit(read_csv_table(src))
    assert f"MixedMixtureImputer, K = {fitted.n_components_} chosen on the data (held-out cells)" in said
    lib = fitted.transform(read_csv_table(src))
    np.testing.assert_allclose(first["age"].to_numpy(), lib["age"].to_numpy(), rtol=1e-12)
    assert (first["smoker"].to_numpy() == lib["smoker"].astype(object).to_numpy()).all()
    observed = holes["smoker"].notna().to_numpy()
    assert (first["smoker"].to_numpy()[observed] == holes["smoker"].to_numpy()[observed]).all()
    hidden = ~observed
    assert (first["smoker"].to_numpy()[hidden] == truth["smoker"].to_numpy()[hidden]).mean() > 0.7


def test_a_named_first_column_of_names_labels_the_rows_of_the_output(tmp_path, capsys):
    """A CSV whose first column names the rows ('name': msleep's animals, a customer id) is imputed without it, on
    the table path and on the numeric path, and the output's ``row`` column carries the names."""
    _, holes = _text_csv(tmp_path / "base.csv", n=60)
    numbers = holes[["age", "bmi"]][holes[["age", "bmi"]].notna().any(axis=1)]  # (no row with nothing observed)
    for path, frame in ((tmp_path / "people.csv", holes), (tmp_path / "numbers.csv", numbers)):
        names = [f"person {i:02d}" for i in range(len(frame))]
        frame.set_axis(pd.Index(names, name="name")).to_csv(path)
        out = tmp_path / f"{path.stem}_imputed.csv"
        assert main(["impute", str(path), "--seed", "0", "-q", "-o", str(out)]) == 0
        said = capsys.readouterr().out
        assert (f"first column 'name' ({len(frame)} distinct text values, one per row, such as 'person 00') read as "
                "row names") in said
        assert f"{len(frame)} rows x {frame.shape[1]} columns" in said  # the names are not a column
        table = pd.read_csv(out, keep_default_na=False, na_values=[""])
        assert list(table["row"]) == names and "name" not in table.columns
        assert not table[["age", "bmi"]].isna().any().any()


def test_exclude_leaves_an_identifier_out_of_impute_and_evaluate(tmp_path, capsys):
    """An id column in the middle of a table (150 distinct texts, too many levels for a category): refused with a
    message that names --exclude, which leaves it out of the model and the output."""
    truth, holes = _text_csv(tmp_path / "base.csv", n=150)
    frame = holes.copy()
    frame.insert(1, "id", [f"c{i:04d}" for i in range(len(frame))])
    src = tmp_path / "customers.csv"
    frame.to_csv(src, index=False)
    out = tmp_path / "out.csv"
    assert main(["impute", str(src), "-q", "-o", str(out)]) == 2
    assert "'id' has 150 distinct text values" in capsys.readouterr().err
    assert main(["impute", str(src), "--exclude", "id", "--seed", "0", "-q", "-o", str(out)]) == 0
    assert "150 rows x 3 columns (1 text / category: smoker)" in capsys.readouterr().out
    table = pd.read_csv(out, keep_default_na=False, na_values=[""])
    assert "id" not in table.columns and not table[["smoker", "age", "bmi"]].isna().any().any()
    assert main(["evaluate", str(src), "-x", "id,bmi", "--repeats", "1", "--no-baseline", "-q"]) == 0
    said = capsys.readouterr().out
    assert "150 rows x 2 columns" in said and "MixedMixtureImputer" in said
    assert main(["impute", str(src), "--exclude", "nope", "-q", "-o", str(out)]) == 2
    assert "cannot leave out unknown column(s) ['nope']" in capsys.readouterr().err
    # 60 rows: the id column is under max_levels, so it is modelled, and the warning names it and --exclude
    small = frame.iloc[:60]
    small.to_csv(src, index=False)
    assert main(["impute", str(src), "--components", "2", "--seed", "0", "-q", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert ("explorer: warning: MixedMixtureImputer: column 'id' has a different value in each of its 60 observed "
            "rows") in err and "--exclude 'id'" in err


def test_a_csv_with_text_columns_refuses_what_does_not_apply(tmp_path, capsys):
    src = tmp_path / "survey.csv"
    _text_csv(src)
    assert main(["impute", str(src), "-o", str(tmp_path / "o.nc")]) == 2
    assert "netCDF holds numbers only" in capsys.readouterr().err
    assert main(["impute", str(src), "--model", "mfa", "-o", str(tmp_path / "o.csv")]) == 2
    assert "--model mfa does not apply" in capsys.readouterr().err
    assert main(["impute", str(src), "--drop-non-numeric", "--empty-rows", "marginal", "-q",
                 "-o", str(tmp_path / "o.csv")]) == 0
    assert "2 columns" in capsys.readouterr().out


@needs_evaluation
def test_evaluate_prints_a_warning_of_every_repeat_once(skewed_csv, capsys):
    """'conc' without a transform: its intervals reach below 0 in every repeat, with other counts each time; the
    warning is printed once, followed by how many more of its kind there were."""
    assert main(["evaluate", str(skewed_csv), "--repeats", "3", "--seed", "0", "--no-baseline", "-k", "1"]) == 0
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("explorer: warning:")]
    negative = [line for line in lines if "reach below zero" in line]
    assert len(negative) == 1 and "'conc' (column 1)" in negative[0]
    more = [line for line in lines if "more NegativeIntervalWarning message(s) like it" in line]
    assert len(more) == 1 and int(more[0].split("... and ")[1].split()[0]) >= 1
    assert err.count("explorer: hint: on the command line, --transform COL=log") == 1  # the flag, not Python
