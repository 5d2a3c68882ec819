"""results/bench_chains.md says what results/bench_chains.json holds, the JSON backs the claim that the compiled
I-step and the location model's compiled E-step give the reference's results (same labels, differences at
round-off), and docs/performance.md quotes the JSON's medians."""

from __future__ import annotations

import json
import statistics

import pytest

import benchmarks.bench_chains as bench_chains
from tests.conftest import REPO_ROOT

SAVED = REPO_ROOT / "results" / "bench_chains"


@pytest.fixture(scope="module")
def results():
    return json.loads(SAVED.with_suffix(".json").read_text(encoding="utf-8"))


def _median(values) -> str:
    return f"{statistics.median(values):.2f}"


def test_the_md_is_rendered_from_the_json(results):
    assert SAVED.with_suffix(".md").read_text(encoding="utf-8") == bench_chains.render(results)


def test_both_sides_gave_the_same_results(results):
    parts = results["parts"]
    assert len(parts) == 5 and results["repeats"] >= 3
    for part in parts:
        assert part["max_difference"] < 1e-9, part["case"]
        assert part["same_labels"] in (True, None), part["case"]
        assert all(len(v) == results["repeats"] for v in part["times"].values())
    assert sum(p["same_labels"] is True for p in parts) == 3  # the three chains


def test_the_performance_page_quotes_the_medians(results):
    text = " ".join((REPO_ROOT / "docs" / "performance.md").read_text(encoding="utf-8").split())
    gmm, loc_em, loc_chain = results["parts"][:3]
    fits = results["fits"]
    quotes = [f"(K = 5) {_median(gmm['times']['reference'])} -> {_median(gmm['times']['compiled'])} s",
              f"EM {_median(loc_em['times']['numpy'])} -> {_median(loc_em['times']['auto'])} s",
              f"chain {_median(loc_chain['times']['reference'])} -> {_median(loc_chain['times']['compiled'])} s",
              f"takes {_median(fits[1]['seconds'])} s on Abalone and {_median(fits[2]['seconds'])} s on three copies",
              f"`GaussianMixtureImputer()` {_median(fits[0]['seconds'])} s"]
    for quote in quotes:
        assert quote in text, quote
