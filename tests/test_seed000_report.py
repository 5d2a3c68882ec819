"""The committed benchmark run, its report and the README's table agree (nothing typed in by hand)."""

from __future__ import annotations

import importlib.util

import pandas as pd
import pytest

from explorer.benchmark import METHODS
from explorer.reference import seed000_reference
from tests.conftest import REPO_ROOT

RUN = REPO_ROOT / "results" / "seed000_benchmark"


def _report_module():
    spec = importlib.util.spec_from_file_location("report_seed000", REPO_ROOT / "benchmarks" / "report_seed000.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def summary():
    return pd.read_csv(RUN / "summary.csv")


def test_committed_run_covers_the_thesis_grid(summary):
    from explorer.reference import SEED000_RATES

    for dataset in ("boston", "ionosphere"):
        for mech, rates in SEED000_RATES.items():
            cell = summary[(summary.dataset == dataset) & (summary.mechanism == mech) & (summary.metric == "nrmse")]
            assert sorted(cell["rate"].unique()) == pytest.approx(sorted(rates)), (dataset, mech)
            assert set(cell["method"]) == set(METHODS), (dataset, mech)
            assert (cell["n"] >= 2).all() and (cell["n_failed"] == 0).all(), (dataset, mech)
    assert (RUN / "COMMAND.txt").read_text().startswith("python benchmarks/run_imputation.py")


def test_report_and_readme_are_regenerated_from_the_committed_run(summary):
    mod = _report_module()
    ref = seed000_reference()
    command = (RUN / "COMMAND.txt").read_text()
    assert (RUN / "REPORT.md").read_text() == mod.build_report(summary, ref, command)
    readme = (REPO_ROOT / "README.md").read_text()
    assert mod.readme_block(summary, ref) in readme


def test_no_failed_metric_in_the_committed_run():
    res = pd.read_csv(RUN / "results.csv", dtype={"error": str})
    errors = res["error"].fillna("")
    assert (errors == "").all(), res[errors != ""][["dataset", "mechanism", "rate", "method", "metric", "error"]]
