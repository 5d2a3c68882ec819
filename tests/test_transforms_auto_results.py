"""results/transforms_auto.md says what results/transforms_auto.json holds (issue 21, point 4): the per-set
numbers are the means of the recorded runs, the relative NRMSE differences and the decision follow from them,
and the md's decision sentence and table rows are those rebuilt from the JSON."""

from __future__ import annotations

import importlib.util
import json
import math

import numpy as np
import pytest

from tests.conftest import REPO_ROOT

RESULTS = REPO_ROOT / "results"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("transforms_auto", REPO_ROOT / "benchmarks" / "transforms_auto.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def results():
    return json.loads((RESULTS / "transforms_auto.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def md():
    return (RESULTS / "transforms_auto.md").read_text(encoding="utf-8")


def _close(a, b):
    return (a is None and b is None) or (a is not None and b is not None and (a == b or math.isclose(a, b, rel_tol=1e-9)))


def test_summary_is_the_mean_of_the_runs(results, bench):
    runs, summary = results["runs"], results["summary"]
    assert [s["dataset"] for s in summary] == results["meta"]["datasets"]
    for s in summary:
        for m in bench.METHODS:
            ok = [r for r in runs if r["dataset"] == s["dataset"] and r["method"] == m and "error" not in r]
            assert len([r for r in runs if r["dataset"] == s["dataset"] and r["method"] == m]) == results["meta"]["seeds"]
            for key in ("nrmse", "coverage", "nll"):
                assert _close(s[m][key], float(np.mean([r[key] for r in ok])) if ok else None), (s["dataset"], m, key)
            assert s[m]["n_cross0"] == sum(r["n_cross0"] for r in ok)
        p, a = s["plain"]["nrmse"], s["auto"]["nrmse"]
        assert _close(s["rel_nrmse"], (a - p) / p)


def test_decision_follows_from_the_per_set_numbers(results):
    summary, dec = results["summary"], results["decision"]
    plain = [s["plain"]["nrmse"] for s in summary]
    auto = [s["auto"]["nrmse"] for s in summary]
    rel = {s["dataset"]: (s["auto"]["nrmse"] - s["plain"]["nrmse"]) / s["plain"]["nrmse"] for s in summary}
    assert _close(dec["mean_nrmse_plain"], float(np.mean(plain)))
    assert _close(dec["mean_nrmse_auto"], float(np.mean(auto)))
    wins = float(np.mean(auto)) < float(np.mean(plain))
    never = all(v <= 0.02 for v in rel.values())
    assert dec["auto_wins_on_average"] is wins and dec["never_loses_more_than_2pct"] is never
    assert dec["decision"] == ("yes" if wins and never else "no")
    assert dec["worst_set"] == max(rel, key=rel.get)
    for d, v in rel.items():
        assert _close(dec["rel_nrmse"][d], v)


def test_md_decision_line_and_rows_are_the_json(results, md, bench):
    dec = results["decision"]
    lines = md.splitlines()
    assert bench.decision_line(dec) in lines
    assert f"**{dec['decision']}**" in bench.decision_line(dec)
    per_set = "Relative NRMSE difference (auto - plain) / plain per set: " + ", ".join(
        f"{d} {100 * v:+.1f} %" for d, v in dec["rel_nrmse"].items()) + "."
    assert per_set in lines
    for s in results["summary"]:
        for m in bench.METHODS:
            assert bench.set_row(s, m) in lines, (s["dataset"], m)
        assert any(line.startswith(f"Relative NRMSE (auto - plain) / plain: {100 * s['rel_nrmse']:+.1f} %")
                   for line in lines), s["dataset"]
    assert lines[0].startswith("Command: `.venv/bin/python benchmarks/transforms_auto.py --seeds "
                               f"{results['meta']['seeds']} ")


def test_user_guide_paragraph_quotes_the_results(results):
    """docs/user_guide/fits_and_output.md, "When to use it": the numbers are those of the JSON."""
    page = (REPO_ROOT / "docs" / "user_guide" / "fits_and_output.md").read_text(encoding="utf-8")
    text = " ".join(page.split())
    d = results["decision"]
    rel = d["rel_nrmse"]
    n_sets, seeds = len(results["meta"]["datasets"]), results["meta"]["seeds"]
    assert f"measured on {n_sets} data sets with {seeds} seeds" in text
    assert f"mean NRMSE of {d['mean_nrmse_auto']:.3f} against {d['mean_nrmse_plain']:.3f}" in text
    for name, label in (("breast_cancer", "breast cancer"), ("hepatitis", "hepatitis"), ("iris", "iris"),
                        ("msleep", "msleep")):
        pct = 100 * rel[name]
        assert f"{label} {'+' if pct > 0 else '-'}{abs(pct):.1f} %" in text, name
    better = sum(r < 0 for r in rel.values())
    assert f"was better on {better} of the {n_sets} sets" in text
    assert d["decision"] == "no" and f"failed on {d['worst_set']}" in text
    cross = {s["dataset"]: s["plain"]["cross0"] for s in results["summary"]}
    lo, hi = sorted((cross["hepatitis"], cross["msleep"]))
    assert f"({100 * lo:.0f}-{100 * hi:.0f} % of them on hepatitis and msleep" in text
