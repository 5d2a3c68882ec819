"""The committed benchmark run, its report and the README's table agree (nothing typed in by hand)."""

from __future__ import annotations

import importlib.util

import pandas as pd
import pytest

from explorer.benchmark import METHODS
from explorer.reference import garriga2017_reference
from tests.conftest import REPO_ROOT

RUN = REPO_ROOT / "results" / "garriga2017_benchmark"


def _report_module():
    spec = importlib.util.spec_from_file_location("report_garriga2017", REPO_ROOT / "benchmarks" / "report_garriga2017.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def summary():
    return pd.read_csv(RUN / "summary.csv")


def test_committed_run_covers_the_thesis_grid(summary):
    from explorer.reference import GARRIGA2017_RATES

    for dataset in ("boston", "ionosphere"):
        for mech, rates in GARRIGA2017_RATES.items():
            cell = summary[(summary.dataset == dataset) & (summary.mechanism == mech) & (summary.metric == "nrmse")]
            assert sorted(cell["rate"].unique()) == pytest.approx(sorted(rates)), (dataset, mech)
            assert set(cell["method"]) == set(METHODS), (dataset, mech)
            assert (cell["n"] >= 2).all() and (cell["n_failed"] == 0).all(), (dataset, mech)
    assert (RUN / "COMMAND.txt").read_text().startswith("python benchmarks/run_imputation.py")


def test_report_and_readme_are_regenerated_from_the_committed_run(summary):
    mod = _report_module()
    ref = garriga2017_reference()
    command = (RUN / "COMMAND.txt").read_text()
    assert (RUN / "REPORT.md").read_text() == mod.build_report(summary, ref, command)
    readme = (REPO_ROOT / "README.md").read_text()
    assert mod.readme_block(summary, ref) in readme


def test_no_failed_metric_in_the_committed_run():
    res = pd.read_csv(RUN / "results.csv", dtype={"error": str})
    errors = res["error"].fillna("")
    assert (errors == "").all(), res[errors != ""][["dataset", "mechanism", "rate", "method", "metric", "error"]]
