"""Numbers typed into the documentation pages are the committed results (issue 20): each table row is rebuilt
from its results/*.json file and must appear in the page as it is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
RESULTS = ROOT / "results"


def _results(name: str) -> dict:
    return json.loads((RESULTS / name).read_text(encoding="utf-8"))


def _page(rel: str) -> str:
    return (DOCS / rel).read_text(encoding="utf-8")


def _row(text: str, starts: str) -> str:
    rows = [line for line in text.splitlines() if line.startswith(starts)]
    assert len(rows) == 1, f"one table row starting {starts!r}, found {len(rows)}"
    return rows[0]


def _cells(row: str) -> list[str]:
    return [c.strip().strip("*") for c in row.strip().strip("|").split("|")]


# ------------------------------------------------------------------------------------------ In a classroom

def test_classroom_numbers_are_the_committed_results():
    """Issue 19: the classroom page quotes results/page_cost.json and results/load_sessions/*.json (moved here with
    the text from the README, same checks)."""
    page = _page("classroom.md")
    cost = {b["budget"]: b["value"] for b in _results("page_cost.json")["budgets"]}
    assert f"| {cost['open: median over the pages <= 0.5 s']} (" in _row(page, "| opening a page, median")
    assert f"| {cost['Step: median over the stepping pages <= 40 ms']} (" in _row(page, "| a Step, median")

    def s(value: float) -> str:
        return f"{value:.1f} s"

    row_probe = _row(page, "| page opened in Chromium during the class")
    row_first = _row(page, "| server part of the first render")
    row_step = _row(page, "| Step click to updated plot")
    row_memory = _row(page, "| memory 60 s after everyone left")
    for name in ("full", "procs2"):
        run = _results(f"load_sessions/{name}.json")
        probe, first = run["probe_render"]["summary"], run["first_render"]["summary"]
        step = run["step_latency"]["summary"]
        assert f"{s(probe['p50'])} / {s(probe['p95'])}" in row_probe, name
        assert f"{s(first['p50'])} / {s(first['p95'])}" in row_first, name
        assert f"{step['p50']:.2f} s / {step['p95']:.2f} s" in row_step, name
        memory = run["memory"]
        after = memory["after_close"][-1]["rss_mb"] if isinstance(memory["after_close"], list) else None
        assert f"{after:.0f} / {memory['warm_baseline']['rss_mb']:.0f} MB" in row_memory, name


# ------------------------------------------------------------------------------------------ user guide

COVERAGE_DATASETS = ("iris", "wine", "boston", "hepatitis", "breast_cancer", "ionosphere")  # the page's column order
COVERAGE_ROWS = {"maximum likelihood": "ml", "F&R prior, Gaussian conditionals (before)": "fraley-raftery",
                 "defaults now": "auto"}


def test_coverage_table_is_results_coverage_prior():
    """user_guide/csv.md: the range over K of each data set's 95 % interval coverage, per prior."""
    page = _page("user_guide/csv.md")
    summary = _results("coverage_prior.json")["summary"]
    header = _cells(_row(page, "| 95 % interval coverage |"))
    assert [h.lower().replace(" ", "_") for h in header[1:]] == list(COVERAGE_DATASETS)
    for label, prior in COVERAGE_ROWS.items():
        starts = f"| **{label}** |" if label == "defaults now" else f"| {label} |"
        cells = _cells(_row(page, starts))[1:]
        for dataset, cell in zip(COVERAGE_DATASETS, cells, strict=True):
            values = [r["coverage"] for r in summary if r["prior"] == prior and r["dataset"] == dataset]
            assert len(values) == 4, (prior, dataset)  # K = 1, 2, 3, 5
            assert cell == f"{min(values):.2f}-{max(values):.2f}", (label, dataset, cell)


K_DATASETS = ("iris", "wine", "boston", "ionosphere", "hepatitis", "breast_cancer")
K_ROWS = {"GMM, K = 1 (the default)": "GMM K=1", "GMM, K = 2": "GMM K=2", "GMM, K = 3": "GMM K=3",
          "GMM, K = 5": "GMM K=5", 'GMM, `n_components="auto"`': "GMM auto = K by DPGMM (default rule)",
          "GMM, K by held-out likelihood": "GMM K by held-out", "GMM, K by BIC": "GMM K by BIC",
          "`DPGMMImputer`": "DPGMM", '`MFAImputer("auto", n_factors=2)`': "MFA auto (q=2)"}


def test_k_selection_table_is_results_k_selection():
    """user_guide/evaluation.md: NRMSE / NLL per hidden entry per data set and their means over the six."""
    page = _page("user_guide/evaluation.md")
    summary = _results("k_selection.json")["summary"]
    header = _cells(_row(page, "| NRMSE / NLL per hidden entry |"))
    assert [h.lower().replace(" ", "_") for h in header[1:]] == [*K_DATASETS, "mean"]

    def result(method: str, dataset: str) -> dict:
        rows = [r for r in summary if r["method"] == method and r["dataset"] == dataset]
        assert len(rows) == 1, (method, dataset)
        return rows[0]

    for label, method in K_ROWS.items():
        cells = _cells(_row(page, f"| {label} |"))[1:]
        rows = [result(method, d) for d in K_DATASETS]
        expected = [f"{r['nrmse']:.3f} / {r['nll']:.3f}" for r in rows]
        expected.append(f"{sum(r['nrmse'] for r in rows) / 6:.3f} / {sum(r['nll'] for r in rows) / 6:.3f}")
        assert cells == expected, label
    trees = [result("trees (chained eq.)", d)["nrmse"] for d in K_DATASETS]
    cells = _cells(_row(page, "| chained equations, extra trees (no intervals) |"))[1:]
    assert cells == [f"{v:.3f}" for v in trees] + [f"{sum(trees) / 6:.3f}"]


# ------------------------------------------------------------------------------------------ reproductions

def test_iris_fig3_table_is_results_gj_iris_fig3():
    """reproductions/gj1994_fig3.md: accuracy mean +- standard error per missing rate, ML and MAP."""
    page = _page("reproductions/gj1994_fig3.md")
    rows = {round(r["rate"] * 100): r["summary"] for r in _results("gj_iris_fig3.json")["rows"]}
    checked = 0
    for rate in (20, 40, 60, 80):
        cells = _cells(_row(page, f"| {rate} % |"))
        s = rows[rate]
        ours = [f"{s[k]['mean']:.3f} ± {s[k]['se']:.3f}" for k in ("em", "mi")]
        maps = [f"{s[k]['mean']:.3f} ± {s[k]['se']:.3f}" for k in ("em_map", "mi_map")]
        assert cells[1:3] == ours and cells[4:6] == maps, (rate, cells)
        checked += 1
    assert checked == 4


def test_garriga2017_page_shows_the_readme_table_generated_from_the_run():
    """The benchmark table is generated into README.md (benchmarks/report_garriga2017.py --readme; checked against
    the run by tests/test_garriga2017_report.py); the reproduction page includes that block, never a copy."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    page = _page("reproductions/garriga2017.md")
    begin = "<!-- garriga2017-table:begin (generated by benchmarks/report_garriga2017.py --readme) -->"
    end = "<!-- garriga2017-table:end -->"
    assert readme.count(begin) == 1 and readme.count(end) == 1
    assert f"```{{include}} ../../README.md\n:start-after: {begin}\n:end-before: {end}\n```" in page
    assert "| BostonHousing | 0.1 |" not in page  # no typed copy that could drift from the generated one


@pytest.mark.parametrize("rel", ["user_guide/csv.md", "user_guide/evaluation.md", "classroom.md",
                                 "reproductions/gj1994_fig3.md"])
def test_checked_pages_name_their_results_file(rel):
    """Each page whose numbers are checked here links the results file they come from."""
    page = _page(rel)
    source = {"user_guide/csv.md": "coverage_prior.md", "user_guide/evaluation.md": "k_selection.md",
              "classroom.md": "page_cost.md", "reproductions/gj1994_fig3.md": "gj_iris_fig3.md"}[rel]
    assert f"results/{source}" in page


RATING_ROWS = {"MM (MAR)": "MM", "MM/CPT-v": "MM/CPT-v", "MM/CPT-v+": "MM/CPT-v+", "MM/Logit-vd": "MM/Logit-vd",
               "DP (MAR)": "DP", "DP/CPT-v": "DP/CPT-v", "DP/CPT-v+": "DP/CPT-v+", "true parameters": "Oracle"}


def test_rating_world_table_is_results_marlin_rating_world():
    """reproductions/marlin2008_ch5.md: strong-generalisation NMAE on random items at s = 0, 0.125, 0.25 and the
    reduction against the MAR model of the same family at s = 0.25."""
    page = _page("reproductions/marlin2008_ch5.md").replace("\n  |", "\n|")  # the table is indented in a list
    res = _results("marlin_rating_world.json")
    for label, model in RATING_ROWS.items():
        cells = _cells(_row(page, f"| {label} |"))
        runs = res["summary"][model]
        expected = [f"{runs[s]['nmae_strong_random']:.3f} +- {runs[s]['nmae_strong_random_se']:.3f}"
                    for s in ("0.0", "0.125", "0.25")]
        assert cells[1:4] == expected, label
        mar = "MM" if model.startswith("MM") else "DP"
        key = f"{model} vs {mar}"
        if key in res["reduction_percent"]:
            red = res["reduction_percent"][key]["0.25"]["strong"]
            assert cells[4] == f"{red['mean']:.1f} +- {red['se']:.1f} %", label
        else:
            assert cells[4] == "", label
