"""experiments/neumann_mnist.py --quick: output structure and facts that must hold (antypas2023 on MNIST)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
MASKS = ("R", "Q", "H", "S")


def _load(name):
    sys.path.insert(0, str(ROOT / "experiments"))
    spec = importlib.util.spec_from_file_location(name, ROOT / "experiments" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("neumann")
    assert _load("neumann_mnist").main(["--quick", "--out", str(out), "--figures", str(out)]) == 0
    return out, json.loads((out / "neumann_mnist_quick.json").read_text())


def _row(table, mask, split, method, pixels="missing", l_value=None):
    rows = [r for r in table if (r["mask"], r["split"], r["pixels"], r["method"]) == (mask, split, pixels, method)
            and (l_value is None or r.get("l") == l_value)]
    assert rows, (mask, split, method)
    return rows[0]


def test_quick_run_writes_json_markdown_and_figures(quick):
    out, res = quick
    assert set(res) >= {"config", "experiment_a", "experiment_b", "timing", "checks", "seconds", "figures"}
    assert res["seconds"]["total"] < 120
    for key in ("experiment_a", "experiment_b"):
        part = res[key]
        assert set(part["error_vs_l"]) == set(MASKS) and set(part["l_tuned"]) == set(MASKS)
        assert {r["split"] for r in part["table"]} == {"train", "validation", "test"}
        assert {r["pixels"] for r in part["table"]} == {"missing", "all"}
        assert all(r["se"] >= 0 and r["mean"] > 0 and r["n"] > 1 for r in part["table"])
    grid = res["config"]["l_grid"]
    assert grid[0] == 1 and 300 in grid and 1000 in grid
    assert all(len(v) == len(grid) for v in res["experiment_a"]["error_vs_l"]["R"]["nsa"].values())
    md = (out / "neumann_mnist_quick.md").read_text()
    assert "ORACLE" in md and "responsibility-weighted" in md and "validation" in md
    assert "0.5953 ± 0.0002" in md and "4.6215 ± 0.0013" in md  # the published tables sit next to ours
    pngs = sorted(out.glob("*.png"))
    assert len(pngs) == 4 and all(p.stat().st_size > 1000 for p in pngs)
    assert {r["mask"] for r in res["timing"]} == {"H", "R"}
    assert all(r["winner"] in ("NSA", "exact") and r["exact_s"] > 0 and r["nsa_s"] > 0 for r in res["timing"])


def test_l_is_tuned_on_the_validation_split(quick):
    _, res = quick
    a = res["experiment_a"]
    for m in MASKS:
        curve = a["error_vs_l"][m]["nsa"]["validation"]
        assert a["l_tuned"][m] == a["error_vs_l"][m]["l"][int(np.argmin(curve))]
    b = res["experiment_b"]
    for m in MASKS:
        curve = b["error_vs_l"][m]["curves"]["NSA-M, responsibility-weighted"]["validation"]
        assert b["l_tuned"][m]["NSA-M"] == b["error_vs_l"][m]["l"][int(np.argmin(curve))]


def test_closed_form_curves_agree_with_the_library_solvers(quick):
    _, res = quick
    assert len(res["checks"]) >= 4 * 3 + 4 * 3
    for c in res["checks"]:
        assert c["value"] < 1e-10, c


def test_spectral_radius_below_one_for_every_row(quick):
    _, res = quick
    for m in MASKS:
        models = [res["experiment_a"]["rho"][m], res["experiment_b"]["rho"][m]["single"],
                  *res["experiment_b"]["rho"][m]["components"]]
        for r in models:
            assert r["all_below_one"] and r["quantiles"]["q100"] < 1.0
            assert 0.0 < r["quantiles"]["q0"] <= r["quantiles"]["q50"] <= r["quantiles"]["q100"]
            assert sum(r["hist_log10_gap"]) == r["n_rows"] > 0  # the histogram's range covers every image
            decay = r["mean_rho_power_l"]
            assert all(x >= y for x, y in zip(decay, decay[1:]))
            # the mean contraction can never beat the universal worst case (1 - 1/s)^l
            assert all(m_ <= w + 1e-12 for m_, w in zip(decay, r["worst_case_power_l"]))


def test_nsa_converges_to_exact(quick):
    """||y(l) - y*|| = ||(I - A/s)^(l+1) y*|| <= rho^(l+1) ||y*||: non-increasing in l; within 1e-6 (relative)
    wherever rho^(l+1) < 1e-6, e.g. at l = 1000 when the median image needs fewer than 1000 terms."""
    _, res = quick
    grid = res["config"]["l_grid"]
    for m in MASKS:
        for r in (res["experiment_a"]["rho"][m], res["experiment_b"]["rho"][m]["single"]):
            dist = r["relative_distance_to_exact_q50"]
            assert all(x >= y - 1e-15 for x, y in zip(dist, dist[1:]))
            assert dist[-1] < 1e-6  # l = 10000
            if r["terms_for_1e-6"]["q50"] <= 1000:
                assert dist[grid.index(1000)] < 1e-6
        e = res["experiment_a"]["error_vs_l"][m]
        exact = e["reference"]["exact"]["test"][0]
        assert e["nsa"]["test"][-1] == pytest.approx(exact, rel=1e-6)
    assert res["experiment_b"]["rho"]["R"]["single"]["terms_for_1e-6"]["q50"] <= 1000  # the case above is exercised


def test_exact_beats_the_approximations_on_average(quick):
    """The exact posterior mean is never worse than SCA / FCA / MI on average on the training images, and on
    the test images under random masks (contiguous masks on a small training set can over-fit; see the report)."""
    _, res = quick
    a, b = res["experiment_a"]["table"], res["experiment_b"]["table"]
    for m in MASKS:
        for split in ("train", "test") if m == "R" else ("train",):
            ex = _row(a, m, split, "exact")["mean"]
            assert ex <= _row(a, m, split, "SCA")["mean"] <= _row(a, m, split, "MI")["mean"]
            assert ex <= _row(a, m, split, "FCA")["mean"]
            exb = _row(b, m, split, "exact (single PPCA)")["mean"]
            assert exb <= min(_row(b, m, split, k)["mean"] for k in ("SCA", "FCA", "MI"))


def test_mixture_outputs_are_consistent(quick):
    _, res = quick
    b = res["experiment_b"]
    assert sorted(b["component_digit"]) == [1, 7]
    assert b["cluster_accuracy"]["complete"]["train"] > 0.6  # unsupervised clusters: better than chance, not perfect
    for m in MASKS:
        for acc in b["cluster_accuracy"][m].values():
            assert 0.0 <= acc["train"] <= 1.0 and 0.0 <= acc["test"] <= 1.0
        # the responsibilities as printed in the thesis (flipped signs) favour the distant component
        printed = b["cluster_accuracy"][m]["exact mixture, thesis's printed signs"]["train"]
        assert printed < b["cluster_accuracy"][m]["exact mixture"]["train"] - 0.2
        for split in ("train", "test"):
            for pixels in ("missing", "all"):  # the oracle picks the better component, so it never loses
                w = _row(b["table"], m, split, "exact mixture (weighted)", pixels)["mean"]
                o = _row(b["table"], m, split, "exact mixture (oracle)", pixels)["mean"]
                assert o <= w + 1e-12
    assert b["label_counts"]["1"] + b["label_counts"]["7"] == b["n_images"]


def test_timing_only_reruns_the_timing_and_keeps_the_experiments(quick):
    out, res = quick
    mod = _load("neumann_mnist")
    assert mod.main(["--quick", "--out", str(out), "--timing-only"]) == 0
    new = json.loads((out / "neumann_mnist_quick.json").read_text())
    assert new["experiment_a"] == res["experiment_a"] and new["experiment_b"] == res["experiment_b"]
    assert len(new["timing"]) == len(res["timing"]) and new["timing_command"].endswith("--timing-only --seed 3")
    # the study pins one BLAS thread (set before NumPy is imported) and records it
    assert new["timing_load_average"]["blas_threads"] and max(new["timing_load_average"]["blas_threads"]) == 1
    assert "BLAS threads: 1" in (out / "neumann_mnist_quick.md").read_text()
    with pytest.raises(SystemExit):
        mod.main(["--quick", "--out", str(out / "empty"), "--timing-only"])


def test_the_readme_timing_summary_matches_the_committed_run():
    """The README states ranges, not one run's digits (timings near break-even are noisy): check them against
    results/neumann_mnist.json, and that the cost grows linearly in l (one BLAS thread, no oversubscription)."""
    res = json.loads((ROOT / "results" / "neumann_mnist.json").read_text())
    rows = res["timing"]
    assert max(res["timing_load_average"]["blas_threads"]) == 1
    for mask, (lo, hi) in {"H": (5, 50), "R": (20, 170)}.items():
        be = [r["break_even_l"] for r in rows if r["mask"] == mask]
        assert lo <= min(be) and max(be) <= hi, (mask, min(be), max(be))
    wins = {lv: sum(r["winner"] == "NSA" for r in rows if r["l"] == lv) for lv in {r["l"] for r in rows}}
    assert wins[10] >= 10 and 1 <= wins[100] <= 2 and wins[300] == 0 and wins[1000] == 0
    for r in rows:
        if r["l"] == 1000:  # NSA's time is linear in l: 1000 terms cost 5-15x what 100 terms cost
            r100 = next(x for x in rows if (x["D"], x["K"], x["mask"], x["l"]) == (r["D"], r["K"], r["mask"], 100))
            assert 5 < r["nsa_s"] / r100["nsa_s"] < 15
