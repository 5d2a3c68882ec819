"""Numbers typed into the documentation pages are the committed results (issue 20): each table row is rebuilt
from its results/*.json file and must appear in the page as it is."""

from __future__ import annotations

import decimal
import json
import re
import statistics
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


_NUMBER = r"(-?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?)"


def _typed(text: str, template: str) -> list[str]:
    """The numbers typed where template has {} (whitespace and line breaks ignored; the template must occur once).
    {p} matches a number that is not ours (a published value) without returning it."""
    pieces = re.split(r"(\{p?\})", " ".join(template.split()))
    pattern = "".join(_NUMBER if p == "{}" else r"-?\d[\d.,]*" if p == "{p}" else re.escape(p) for p in pieces)
    found = re.findall(pattern, " ".join(text.split()))
    assert len(found) == 1, f"the sentence {template!r} once in the page, found {len(found)}"
    return [found[0]] if isinstance(found[0], str) else list(found[0])


def _printed(value: float, typed: str) -> str:
    """value printed with the precision of typed: as many decimals, or as many in the mantissa of e notation."""
    typed = typed.replace(",", "")
    if "e" in typed:
        mantissa = typed.split("e")[0]
        text = f"{value:.{len(mantissa.split('.')[1]) if '.' in mantissa else 0}e}"
        return re.sub(r"e([-+])0*(\d)", r"e\1\2", text).replace("e+", "e")
    return f"{value:.{len(typed.split('.')[1]) if '.' in typed else 0}f}"


def _roundings(value: float, typed: str) -> set[str]:
    """value printed as typed; a value that is a decimal tie at that precision (7.55 to one decimal: the mean of
    errors in quarter points, stored as 7.5499999...) may be rounded either way."""
    printed = {_printed(value, typed)}
    if "e" not in typed and isinstance(value, float):
        exact = decimal.Decimal(repr(value))
        step = decimal.Decimal(1).scaleb(-len(typed.split(".")[1]) if "." in typed else 0)
        printed |= {str(exact.quantize(step, rounding=r)) for r in (decimal.ROUND_HALF_UP, decimal.ROUND_HALF_DOWN)}
    return printed


def _check(text: str, template: str, *values: float) -> int:
    """Each number typed at a {} of template is the matching value rounded as printed; returns how many."""
    typed = _typed(text, template)
    assert len(typed) == len(values), (template, typed)
    for number, value in zip(typed, values, strict=True):
        assert number.replace(",", "") in _roundings(value, number.replace(",", "")), (template, number, value)
    return len(typed)


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
COVERAGE_ROWS = {"maximum likelihood": "ml", "F&R prior, Gaussian conditionals (before issue 10)": "fraley-raftery",
                 "prior not shrunk, Student-t (before issue 21)": "previous", "draws, shrinkage rule": "rule",
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
            assert len(values) == 5, (prior, dataset)  # K = 1, 2, 3, 5 and "auto"
            assert cell.strip("*") == f"{min(values):.2f}-{max(values):.2f}", (label, dataset, cell)


def test_small_data_coverage_table_is_results_coverage_prior():
    """user_guide/csv.md, "Small data": each set's coverage at 25 / 50 / 100 rows, before issue 21, with the
    shrinkage rule and now."""
    page = _page("user_guide/csv.md")
    sub = _results("coverage_prior.json")["subsamples"]
    header = _cells(_row(page, "| 95 % coverage, 25 / 50 / 100 rows |"))
    assert [h.lower().replace(" ", "_") for h in header[1:]] == list(COVERAGE_DATASETS)
    for label, prior in (("before issue 21, by size", "previous"), ("shrinkage rule, by size", "rule"),
                         ("**defaults now, by size**", "auto")):
        cells = _cells(_row(page, f"| {label} |"))[1:]
        for dataset, cell in zip(COVERAGE_DATASETS, cells, strict=True):
            values = [r["coverage"] for r in sub if r["prior"] == prior and r["dataset"] == dataset]
            assert [r["subsample"] for r in sub if r["prior"] == prior and r["dataset"] == dataset] == [25, 50, 100]
            assert cell.strip("*") == " / ".join(f"{v:.2f}" for v in values), (label, dataset, cell)


K_DATASETS = ("iris", "wine", "boston", "ionosphere", "hepatitis", "breast_cancer")
K_ROWS = {"GMM, K = 1": "GMM K=1", "GMM, K = 2": "GMM K=2", "GMM, K = 3": "GMM K=3",
          "GMM, K = 5": "GMM K=5", 'GMM, `n_components="auto"` (the default)': "GMM auto = K by DPGMM (default rule)",
          "GMM, K by held-out likelihood": "GMM K by held-out", "GMM, K by BIC": "GMM K by BIC",
          "`DPGMMImputer`": "DPGMM",
          '`MFAImputer("auto", n_factors=2, predictive="plugin")`': "MFA auto (q=2)"}


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


# ------------------------------------------------------------------------------------------ pages with running text
# Each test below rebuilds every number of a page that comes from a results file; the published values the pages
# quote next to ours are matched as {p} (or left in a cell that is not compared) and never checked against ours.

def test_digits_5x7_page_is_results_digits_5x7():
    """reproductions/gj1994_fig2.md: the EM / mean-imputation table and the scale-free gap."""
    page = _page("reproductions/gj1994_fig2.md")
    res = _results("digits_5x7.json")
    checked = 0
    for label, key in {"EM on incomplete data": "em", "mean imputation + EM": "mean_impute"}.items():
        s = res["summary"][key]
        cells = _cells(_row(page, f"| {label} |"))
        assert cells[1] == f"{s['log_likelihood_mean']:.1f} +- {s['log_likelihood_se']:.1f}", label
        assert cells[3].startswith(f"{s['n_iter_mean']:.0f} ("), label  # "(about 60)": the paper's
        assert cells[4] == f"{s['template_distance_mean']:.2f} +- {s['template_distance_se']:.2f}", label
        checked += 5
    settings = res["settings"]
    checked += _check(page, "(EM - MI per observed entry) is {} nats here against {p} published",
                      next(r["gap_per_entry"] for r in res["noise_sweep"] if r["noise"] == settings["noise"]))
    checked += _check(page, "({} diagonal Gaussians, 100 noisy digits, {} repetitions;",
                      settings["components"], settings["repeats"])
    checked += _check(page, "ours are positive because the noise sd is {} on 0/1 templates", settings["noise"])
    checked += _check(page, "5x7 digits with {} % of the pixels missing", 100 * settings["rate"])
    assert checked == 15


# antypas2023's first table: the rows are masks of experiment A, the columns its methods (test split, missing pixels)
NEUMANN_A_COLUMNS = ("MI", "FCA", "SCA", "exact", "NSA (l = 100, thesis)")
NEUMANN_B_COLUMNS = ("exact (single PPCA)", "NSA (single PPCA)", "exact mixture (weighted)", "NSA-M (weighted)",
                     "exact mixture (oracle)", "NSA-M (oracle)")


def test_neumann_page_is_results_neumann_mnist():
    """reproductions/antypas2023.md: both tables (MSE on the missing test pixels x 1e-2; the published values in
    brackets are not ours) and the numbers of the text."""
    page = _page("reproductions/antypas2023.md")
    res = _results("neumann_mnist.json")
    a, b = res["experiment_a"], res["experiment_b"]

    def mse(table: list[dict], mask: str, method: str) -> float:
        """x 1e-2; the NSA rows at the thesis's l (A: 100, B: 300), the tuned one at its l"""
        l_value = a["l_tuned"][mask] if "tuned" in method else 100 if "l = 100" in method else 300 if "NSA" in method else None
        rows = [r for r in table if (r["mask"], r["split"], r["pixels"], r["method"], r.get("l"))
                == (mask, "test", "missing", method, l_value)]
        assert rows and len({r["mean"] for r in rows}) == 1, (mask, method)  # B lists l = 300 twice where it is tuned
        return 100 * rows[0]["mean"]

    checked = 0
    for label, mask in {"A, random pixels": "R", "A, quarter": "Q"}.items():
        cells = _cells(_row(page, f"| {label} |"))[1:]
        for cell, method in zip(cells, NEUMANN_A_COLUMNS, strict=False):
            assert cell.split(" (")[0] == f"{mse(a['table'], mask, method):.2f}", (label, method, cell)
        tuned = mse(a["table"], mask, "NSA (l tuned on validation)")
        assert cells[5] == f"{tuned:.2f} (l = {a['l_tuned'][mask]})", label
        checked += 7
    for label, mask in {"random pixels": "R", "quarter": "Q", "top half": "H"}.items():
        cells = _cells(_row(page, f"| {label} |"))[1:]
        for cell, method in zip(cells, NEUMANN_B_COLUMNS, strict=True):
            assert cell.split(" (")[0] == f"{mse(b['table'], mask, method):.2f}", (label, method, cell)
            checked += 1
    split = a["split_sizes"]
    checked += _check(page, "(PPCA, q = {} for {} % of the variance; the thesis: q = {p})", a["q"],
                      100 * a["explained_variance"])
    checked += _check(page, "B uses the {} test-set 1s and 7s", b["n_images"])
    checked += _check(page, "A applies the Frey-faces protocol to {} MNIST digits", a["n_images"])
    checked += _check(page, "Splits {}/{}/{};", *(100 * split[k] / a["n_images"] for k in ("train", "validation", "test")))
    # NSA at the thesis's l = 100 against the exact solution, test split: random pixels, then the block masks
    change = {m: mse(a["table"], m, NEUMANN_A_COLUMNS[4]) / mse(a["table"], m, "exact") - 1 for m in "RQHS"}
    blocks = [-100 * change[m] for m in "QHS"]
    checked += _check(page, "(test: {} % random pixels, -{} to -{} % for quarters, halves, squares)",
                      100 * change["R"], min(blocks), max(blocks))
    weights = b["fit"]["weights"]
    checked += _check(page, "with q = {} per component and ~{} training images each", b["q"],
                      round(b["split_sizes"]["train"] / len(weights), -1))
    checked += _check(page, "(noise variances {} and {})", *b["fit"]["sigma2"])
    rhos = [r["quantiles"][q] for r in a["rho"].values() for q in ("q0", "q100")]
    for r in b["rho"].values():
        rhos += [c["quantiles"][q] for c in (r["single"], *r["components"]) for q in ("q0", "q100")]
    checked += _check(page, "rho(I - A/s) is {}-{},", min(rhos), max(rhos))
    at300 = res["config"]["l_grid"].index(300)
    dist_a = [100 * r["relative_distance_to_exact_q50"][at300] for r in a["rho"].values()]
    dist_b = [100 * r["single"]["relative_distance_to_exact_q50"][at300] for r in b["rho"].values()]
    checked += _check(page, "at l = 300 the median distance to the exact encoding is {}-{} % (A) and {}-{} % (B)",
                      min(dist_a), max(dist_a), min(dist_b), max(dist_b))
    acc = b["cluster_accuracy"]["H"]
    checked += _check(page, "(arg-max responsibility vs digit): {} % train / {} % test here, {p} % / {p} % in the thesis",
                      100 * acc["exact mixture"]["train"], 100 * acc["exact mixture"]["test"])
    printed = acc["exact mixture, thesis's printed signs"]
    checked += _check(page, "pick the wrong digit almost always ({} % / {} % correct)",
                      100 * printed["train"], 100 * printed["test"])
    config = res["config"]
    checked += _check(page, "synthetic models, D in {{}, {}}, q in {{}, {}, {}}, {} rows",
                      *(s * s for s in config["timing_sides"]), *config["timing_K"], config["timing_rows"])
    assert checked == 7 * 2 + 6 * 3 + 2 + 1 + 1 + 3 + 3 + 2 + 2 + 2 + 4 + 2 + 2 + 6


def _delalleau() -> dict:
    """Per-digit figures of results/delalleau_mnist.json: seconds per iteration, speed-ups, tree shapes."""
    classes = _results("delalleau_mnist.json")["classes"]
    t = {e: [c["timing"][e]["seconds_per_iter"] for c in classes] for e in ("naive", "tree", "auto")}
    return {"classes": classes, "seconds": t,
            "tree": [n / s for n, s in zip(t["naive"], t["tree"], strict=True)],
            "default": [n / s for n, s in zip(t["naive"], t["auto"], strict=True)],
            "tree_over_default": [s / d for s, d in zip(t["tree"], t["auto"], strict=True)]}


def test_delalleau_page_is_results_delalleau_mnist():
    """reproductions/delalleau2012.md: the timing table (ranges over the ten digits, mean speed-ups with their range),
    the agreement of the three E-steps, the tree shapes and the imputation RMSE (8x / 20x are the paper's)."""
    page = _page("reproductions/delalleau2012.md")
    d = _delalleau()
    classes, secs = d["classes"], d["seconds"]
    checked = 0
    for starts, engine, speedup in (("| naive:", "naive", None), ("| tree:", "tree", "tree"),
                                    ("| the project's default engine", "auto", "default")):
        cells = _cells(_row(page, starts))
        decimals = 2 if engine == "auto" else 1
        assert cells[1] == f"{min(secs[engine]):.{decimals}f}-{max(secs[engine]):.{decimals}f}", cells
        if speedup is None:
            assert cells[2] == "1"
        else:
            s = d[speedup]
            decimals = 1 if speedup == "tree" else 0
            expected = f"{statistics.mean(s):.{decimals}f}x ({min(s):.{decimals}f}-{max(s):.{decimals}f}x)"
            assert cells[2].replace("**", "") == expected, cells
        checked += 2 if speedup is None else 4
    tree_shape = [c["tree"] for c in classes]
    diffs = [c["timing"][e] for c in classes for e in ("tree", "auto")]
    checked += _check(page, "The three agree: covariances within {} relative, log-likelihoods within {}.",
                      max(x["max_rel_diff_covariances"] for x in diffs), max(x["max_rel_diff_loglik"] for x in diffs))
    checked += _check(page, "not reproduced: {}x here.", statistics.mean(d["tree"]))
    checked += _check(page, "(about {} distinct patterns per class, MST weight about {}, mean n_d {}, depth {}-{})",
                      round(statistics.mean(t["n_patterns"] for t in tree_shape), -2),
                      round(statistics.mean(t["total_weight"] for t in tree_shape), -3),
                      statistics.mean(t["mean_nd"] for t in tree_shape),
                      min(t["max_depth"] for t in tree_shape), max(t["max_depth"] for t in tree_shape))
    config = _results("delalleau_mnist.json")["config"]
    checked += _check(page, "{} % of each class to train and {} % to choose K in {{}, {}, {}} x {} seeds",
                      100 * config["train_fraction"], 100 - 100 * config["train_fraction"], *config["grid"],
                      len(config["seeds"]))
    checked += _check(page, "ridge regularisation {} (the paper's", config["reg_covar"])
    checked += _check(page, "and wins by another {}x.", statistics.mean(d["tree_over_default"]))
    checked += _check(page, "seconds per EM iteration, {} digits", len(config["digits"]))
    checked += _check(page, "(about {} minutes, one BLAS thread;", sum(c["seconds"] for c in classes) / 60)
    rmse = [c["val_rmse_missing"] for c in classes]
    mean_rmse = [c["val_rmse_mean_imputation"] for c in classes]
    checked += _check(page, "the RMSE is {}-{} against {}-{} for the training mean",
                      min(rmse), max(rmse), min(mean_rmse), max(mean_rmse))
    assert checked == 10 + 2 + 1 + 5 + 6 + 1 + 1 + 1 + 1 + 4


def _claim_verdicts() -> dict[str, int]:
    """The verdict column of results/marlin_chapter6_claims.md counted the way the page words it."""
    counts = {"hold": 0, "hold weakly": 0, "partly": 0, "does not": 0}
    weak = ("not significantly", "within the noise", "clearly on error only")
    for line in (RESULTS / "marlin_chapter6_claims.md").read_text(encoding="utf-8").splitlines():
        cells = _cells(line) if re.match(r"\| \d+ \|", line) else None
        if cells:
            verdict = line.strip().strip("|").split("|")[-1].strip()
            kind = ("partly" if verdict.startswith("**Partly") else "does not" if verdict.startswith("**Does not")
                    else "hold weakly" if any(w in verdict for w in weak) else "hold")
            assert kind != "hold" or verdict.startswith("**Holds"), verdict
            counts[kind] += 1
    return counts


def test_chapter6_page_is_the_chapter6_results():
    """reproductions/marlin2008_ch6.md: the numbers of Tables 6.1-6.5 and 6.8 and the claims count; the thesis's
    numbers in brackets are not ours ({p})."""
    page = _page("reproductions/marlin2008_ch6.md")
    t61 = _results("marlin_table61.json")
    s61 = t61["summary"]
    checked = _check(page, "--cv-iter 100`, {} min, `results/marlin_table61.md`, {} seeds)", t61["seconds"] / 60,
                     t61["settings"]["seeds"])
    checked += _check(page, "error {} ± {} % against {} ± {} % (thesis {p} and {p}); on Overlap they are alike ({} %;",
                      s61["Dis/mix"]["error_mean"], s61["Dis/mix"]["error_se"], s61["Gen/mix"]["error_mean"],
                      s61["Gen/mix"]["error_se"],
                      (s61["Gen/overlap"]["error_mean"] + s61["Dis/overlap"]["error_mean"]) / 2)
    checked += _check(page, "log loss* on Simple ({} ± {}, thesis {p}) and Mix ({} ± {}, thesis {p})",
                      s61["Dis/simple"]["loss_mean"], s61["Dis/simple"]["loss_se"], s61["Dis/mix"]["loss_mean"],
                      s61["Dis/mix"]["loss_se"])
    dis = {ds: [r["loss"] for r in t61["rows"] if r["model"] == "Dis" and r["dataset"] == ds] for ds in ("simple", "mix")}
    checked += _check(page, "(worst {}; medians {} and {})", max(dis["simple"] + dis["mix"]),
                      statistics.median(dis["simple"]), statistics.median(dis["mix"]))
    checked += _check(page, "the thesis's penalty grid (lambda <= {})", max(t61["lambdas"]))
    checked += _check(page, "The run used {}-fold CV", t61["settings"]["folds"])

    t62 = _results("marlin_tables62_64.json")
    checked += _check(page, "(`explorer.core.classifiers.synthetic_classification`), {} rows per class for training and "
                            "{} for testing", t62["config"]["n_train"], t62["config"]["n_test"])
    mix = t62["summary"]["6.2"]["mix"]
    checked += _check(page, "`python experiments/marlin_tables62_64.py`, {} min on a shared machine, "
                            "`results/marlin_tables62_64.md`, {} seeds)", t62["meta"]["seconds"] / 60,
                      len(t62["config"]["seeds"]))
    checked += _check(page, "Mix error: zero imputation {} ± {} % (thesis {p}), mean {} ± {} ({p}), multiple imputation "
                            "with K = 1 {} ± {} ({p}), reduced models {} ± {} ({p}), augmentation {} ± {} ({p})",
                      *(v for k in ("Zero", "Mean", "Mix K=1", "Reduced", "Augmented")
                        for v in (mix[k]["err_mean"], mix[k]["err_se"])))
    xor = t62["summary"]["6.3"]["xor"]
    gklr = [v["err_mean"] for k, v in xor.items() if k.startswith("gKLR")]
    checked += _check(page, "XOR, polynomial KLR zero / mean {} / {} % ({p} / {p}), Gaussian KLR {}-{} % for every "
                            "treatment ({p}-{p})", xor["pKLR Zero"]["err_mean"], xor["pKLR Mean"]["err_mean"],
                      min(gklr), max(gklr))
    overlap = t62["summary"]["6.2"]["overlap"]
    treated = [v["err_mean"] for k, v in overlap.items() if k != "complete data (reference)"]
    checked += _check(page, "on Overlap nothing works (every treatment {}-{} %, complete data {} %)", min(treated),
                      max(treated), overlap["complete data (reference)"]["err_mean"])
    nn_zero = t62["summary"]["6.4"]["xor"]["NN Zero"]
    checked += _check(page, "holds only within a standard error ({} ± {} % against the thesis's {p})",
                      nn_zero["err_mean"], nn_zero["err_se"])

    t65 = _results("marlin_table65_hepatitis.json")
    hep = t65["summary"]
    checked += _check(page, "10-fold CV, {} min on a shared machine", t65["meta"]["wall_seconds"] / 60)
    checked += _check(page, "(K = {}, Q = {}) is best, as in the thesis, {} ± {} % error / {} loss (thesis {p} / {p})",
                      t65["config"]["mfa_k"], t65["config"]["mfa_q"], hep["LR MixFA"]["err_mean"],
                      hep["LR MixFA"]["err_se"], hep["LR MixFA"]["loss_mean"])
    checked += _check(page, "(zero {} %, mean {} %, reduced {} %, augmented {} %, discriminative LDA-FA {} %)",
                      *(hep[k]["err_mean"] for k in ("LR Zero", "LR Mean", "LR Reduced", "LR Augmented", "LDA-FA Dis")))
    regs = {c["reg"] for c in hep["LDA-FA Dis"]["chosen"]}
    assert len(regs) == 1  # "in every fold"
    checked += _check(page, "(lambda = {} in every fold)", regs.pop())

    t68 = _results("marlin_table68_mnist.json")
    mn = t68["summary"]
    checked += _check(page, "`results/marlin_table68_mnist.md`, {} splits)", len(t68["config"]["splits"]))
    checked += _check(page, "each split draws {} training and {} test images per class", t68["config"]["n_train"],
                      t68["config"]["n_test"])
    checked += _check(page, "LR zero / mean / reduced / augmented {} / {} / {} / {} % (thesis {p} / {p} / {p} / {p}), network "
                            "{} / {} / {} % ({p} / {p} / {p}), Gaussian KLR mean / reduced / augmented {} / {} / {} % "
                            "({p} / {p} / {p})",
                      *(mn[f"LR {k}"]["err_mean"] for k in ("Zero", "Mean", "Reduced", "Augmented")),
                      *(mn[f"{f} {k}"]["err_mean"] for f in ("NN", "gKLR") for k in ("Mean", "Reduced", "Augmented")))
    checked += _check(page, "LDA-FA (loss {} against {p})", mn["LDA-FA Dis"]["loss_mean"])
    checked += _check(page, "so the run made {} L-BFGS steps from the generative fit with Q = {} and no CV",
                      t68["config"]["ldafa_max_iter"], t68["config"]["ldafa_q"])

    verdicts = _claim_verdicts()
    checked += _check(page, "checks the chapter's claims one by one: {} hold, {} hold weakly, {} partly",
                      verdicts["hold"], verdicts["hold weakly"], verdicts["partly"])
    checked += _check(page, "{} does not (augmented LR", verdicts["does not"])
    checked += _check(page, "beats generative on Mix by {}x in error but {}x in loss, thesis {p}x)",
                      s61["Gen/mix"]["error_mean"] / s61["Dis/mix"]["error_mean"],
                      s61["Gen/mix"]["loss_mean"] / s61["Dis/mix"]["loss_mean"])
    assert checked == 2 + 5 + 4 + 3 + 1 + 1 + 2 + 2 + 10 + 4 + 3 + 2 + 1 + 5 + 5 + 1 + 1 + 2 + 10 + 1 + 2 + 3 + 1 + 2


def _report_notes(name: str) -> str:
    """The hand-written notes of a generated report (the spread over several runs lives only there)."""
    return " ".join((RESULTS / name).read_text(encoding="utf-8").split())


def test_performance_page_is_the_benchmark_results():
    """performance.md: the EM table (last run from results/bench_em.json, the spread over four runs from the notes of
    results/bench_em.md) and the numbers of the variational, factor-analysis, tree, Dask, peers and methods
    paragraphs, each from its results/bench_*.json."""
    page = _page("performance.md")
    em, run2 = _results("bench_em.json"), _results("bench_em_run2.json")
    cases, cases2 = ({c["case"]: c for c in r["cases"]} for r in (em, run2))
    notes = _report_notes("bench_em.md")
    assert "bench_em_run2.json" in notes  # the notes say where the second run is

    def verdict(a, b, target):
        return "met" if a <= target and b <= target else ("not reliably met" if min(a, b) <= target else "missed")

    checked = 0
    for case, label in (("W1", "W1: N = 20,000, D = 10, K = 5"), ("W1, overlapping", "W1, overlapping components"),
                        ("W2", "W2: N = 100,000, D = 20, K = 10"), ("W2, overlapping", "W2, overlapping components"),
                        ("D50", "N = 20,000, D = 50, K = 5"), ("D50, overlapping", "D = 50, overlapping components"),
                        ("W2, 2 threads", "W2 with 2 BLAS threads")):
        c, c2 = cases[case], cases2[case]
        cells = _cells(_row(page, f"| {label} |"))
        assert cells[1] == f"{c['ratio']:.2f}" and cells[2] == f"{c2['ratio']:.2f}", case
        assert cells[3].replace("*", "") == f"<= {c['target']:.1f}: {verdict(c['ratio'], c2['ratio'], c['target'])}", case
        assert cells[4].startswith(f"{c['fit_ratio']:.2f}"), case
        if c.get("fit_target"):
            assert cells[4].replace("*", "") == (f"{c['fit_ratio']:.2f} (<= {c['fit_target']:.1f}: "
                                f"{verdict(c['fit_ratio'], c2['fit_ratio'], c['fit_target'])}; {c2['fit_ratio']:.2f} in "
                                "the second run)"), case
        checked += 4
    m, m2 = em["memory"], run2["memory"]
    cells = _cells(_row(page, f"| peak memory of a step, N = {m['n_samples']:,} |"))
    assert [c.replace("*", "") for c in cells[1:4]] == [f"{m['ratio']:.2f}", f"{m2['ratio']:.2f}",
                                                       f"<= 1.5: {verdict(m['ratio'], m2['ratio'], 1.5)}"]
    checked += 3
    before = re.search(r"were ([\d.]+)-(\d+)x \(W1\), ([\d.]+)-([\d.]+)x \(W2\) and (\d+)x \(D = 50\)", notes)
    w1_before = _cells(_row(page, "| W1: "))[5].split("-")
    assert w1_before[0] == before.group(1) and f"{float(w1_before[1]):.0f}" == before.group(2)  # the notes: 2.5-3x
    assert _cells(_row(page, "| W2: "))[5] == f"{before.group(3)}-{before.group(4)}"
    assert _cells(_row(page, "| N = 20,000, D = 50"))[5] == before.group(5)
    checked += 3
    checked += _check(page, "on data with {} % MCAR against", 100 * cases["W1"]["missing_rate"])
    prof = {c["case"]: c["seconds"] for c in _results("profile_em_step.json")["cases"]}
    assert "profile_em_step.md" in notes  # the notes say where the profile is
    w1, w2o, d50 = prof["W1"], prof["W2, overlapping"], prof["D50"]
    ms = 1e3
    checked += _check(page, "takes {} ms of a\n{} ms E-step and the BLAS products {} ms, against {} ms for scikit-learn's",
                      ms * w1["compiled pass (_solve_block)"], ms * w1["whole E-step (estep)"],
                      ms * (w1["R = E @ P (BLAS)"] + w1["scatter (dsyrk)"]), ms * w1["scikit-learn step, complete data"])
    checked += _check(page, "the pass takes {} ms of a {} ms E-step there", ms * w2o["compiled pass (_solve_block)"],
                      ms * w2o["whole E-step (estep)"])
    checked += _check(page, "(the compiled pass, conditional covariances included, {} ms of a {} ms E-step, against",
                      ms * d50["compiled pass (_solve_block)"], ms * d50["whole E-step (estep)"])
    checked += _check(page, "W2 has {} patterns x {} components", cases["W2"]["n_patterns"], cases["W2"]["n_components"])
    checked += _check(page, "At D = {} ({} missing entries per row", cases["D50"]["n_features"],
                      cases["D50"]["n_features"] * cases["D50"]["missing_rate"])
    checked += _check(page, "kernels (`strategy=\"numpy\"`) are {}x, {}x and {}x scikit-learn on the separated cases",
                      *(cases[c]["numpy_strategy_ratio"] for c in ("W1", "W2", "D50")))
    latency = [r["first_call_latency"] for r in (em, run2)]
    warm = [x["warm_cache"]["import_seconds"] + x["warm_cache"]["first_step_seconds"] for x in latency]
    cold = [x["cold_cache"]["import_seconds"] + x["cold_cache"]["first_step_seconds"] for x in latency]
    checked += _check(page, "pays about {} s to load them; the very first run after a clone compiles them, about {} s",
                      max(warm), max(cold))
    # the wide data and the cost rule (results/bench_em_wide.json)
    wide = _results("bench_em_wide.json")
    rows = wide["rows"]
    sweep = {(r["n"], r["d"], round(r["rate"], 2)): r for r in wide["sweep"]}

    def cov_gain(key):
        return sweep[key]["compiled"] / sweep[key]["covariance"]

    numpy_over_compiled = [r["numpy"] / r["compiled"] for r in wide["sweep"]
                           if min(("numpy", "compiled", "covariance"), key=lambda k: r[k]) != "covariance"]
    checked += _check(page, "missing at D = 200 ({}x faster at 50 %) and from 70 % at D = 50 ({}x), and not at D = "
                            "20 up to 80 % missing (there the compiled kernel's step costs {} of the covariance side's; "
                            "at D = 50 with 60 % missing, {})", cov_gain((250, 200, 0.5)), cov_gain((1000, 50, 0.7)),
                      cov_gain((2000, 20, 0.8)), cov_gain((1000, 50, 0.6)))
    checked += _check(page, "the compiled kernel was {}-{}x as fast as numpy wherever", min(numpy_over_compiled),
                      max(numpy_over_compiled))
    # the rule takes the fastest kernel, or one within 1 % of it, in every measured case (kernels loaded), and the
    # fresh-process choice differs from it only where numpy stands in for a not yet loaded compiled kernel
    for key, r in sweep.items():
        fastest = min(("numpy", "compiled", "covariance"), key=lambda k: r[k])
        assert r[r["auto_loaded"]] <= 1.01 * r[fastest], key
        assert r["auto"] == r["auto_loaded"] or (r["auto"], r["auto_loaded"]) == ("numpy", "compiled"), key
    assert "in all 15 measured cases" in " ".join(page.split()) and len(sweep) == 15
    default, auto, ref = rows["imputer default fit"], rows["em_gmm.fit, strategy='auto'"], rows["em_gmm.fit, strategy='numpy'"]
    assert auto["kernel"] == "covariance" and auto["n_iter"] == ref["n_iter"] == default["n_iter"]
    checked += _check(page, "fit takes {} s, against 48-68", default["seconds"])
    checked += _check(page, "the prior's moments take {} s", rows["the prior's data moments (em_gmm.resolve_prior)"]["seconds"])
    checked += _check(page, "the MAP fit {} EM steps", default["n_iter"])
    checked += _check(page, "takes {} s on the covariance side and {} s on the numpy kernels, same {} iterations",
                      auto["seconds"], ref["seconds"], auto["n_iter"])
    checked += _check(page, "({} s without it, `predictive=\"student_t\"`",
                      rows["imputer fit without the draws (predictive='student_t')"]["seconds"])
    checked += _check(page, "went from {} (ML moments) to {} (pairwise, eigenvalues floored) or {} (shrunk", default["rmse"],
                      rows["prior scale from pairwise, eigenvalues floored"]["rmse"],
                      rows["prior scale from pairwise, shrunk to diagonal"]["rmse"])
    checked += _check(page, "A diagonal one-iteration fit takes {} s", rows["imputer diag, max_iter=1"]["seconds"])
    checked += _check(page, "text are refused in {} s", rows["n_components=1000 on text, refused"]["seconds"])
    speedups = [r["speedup"] for r in _results("bench_mfa.json")["cases"]]
    checked += _check(page, "(its weighted M-step stays in numpy): {} to {}x faster", min(speedups), max(speedups))
    assert checked == 7 * 4 + 3 + 3 + 1 + 8 + 2 + 2 + 3 + 2 + 4 + 2 + 1 + 1 + 1 + 3 + 1 + 3 + 1 + 1 + 2

    checked = 0
    vb = _results("bench_vb.json")["cases"]
    checked += _check(page, "{}x on complete data and {}x with 30 % MCAR at {} x {}, K = {}; {}x and {}x at {} x {}, "
                            "K = {} (targets",
                      *(c[k] for c in vb for k in ("ratio_complete", "ratio_missing", "n_samples", "n_features",
                                                   "n_components")))
    before = re.search(r"numpy path\): ([\d.]+) / ([\d.]+) and ([\d.]+) / ([\d.]+);", _report_notes("bench_vb.md"))
    before_complete, before_missing = [float(before.group(i)) for i in (1, 3)], [float(before.group(i)) for i in (2, 4)]
    checked += _check(page, "before: {}-{}x and {}-{}x)", min(before_complete), max(before_complete),
                      min(before_missing), max(before_missing))
    checked += _check(page, "(about {}x scikit-learn with gaps)", vb[0]["numpy_ratio_missing"])
    vb_auto = {(r["dataset"], r["K"]): r for r in _results("vb_auto_threshold.json")["rows"]}
    boston = vb_auto[("boston", 15)]
    small = [r for r in vb_auto.values() if r["work"] < 50_000]
    checked += _check(page, "at Boston's size with K = {} ({}) a first fit, load included, took {} s compiled "
                            "against {} s with numpy, and {} s against {} s once loaded; below 50,000 numpy's first "
                            "fits took {}-{} s against {}-{} s compiled", 15, boston["work"],
                      boston["compiled"]["first"], boston["numpy"]["first"], boston["compiled"]["second"],
                      boston["numpy"]["second"], min(r["numpy"]["first"] for r in small),
                      max(r["numpy"]["first"] for r in small), min(r["compiled"]["first"] for r in small),
                      max(r["compiled"]["first"] for r in small))
    from explorer.core.mixtures.vb_dpgmm import VB_AUTO_COMPILED_MIN_WORK

    assert VB_AUTO_COMPILED_MIN_WORK == 50_000 and boston["work"] >= VB_AUTO_COMPILED_MIN_WORK
    assert boston["compiled"]["first"] < boston["numpy"]["first"]  # the threshold's case: compiled wins, load included

    fa = _results("bench_fa.json")["results"]
    speedups = [r["numpy_over_compiled_incomplete"] for r in fa]
    big = next(r for r in fa if (r["n"], r["D"], r["q"]) == (20000, 50, 5))
    checked += _check(page, "the compiled EM step is {}-{}x faster than the numpy one; at {} x {}, q = {} with 30 % MCAR "
                            "it costs {}x scikit-learn's", min(speedups), max(speedups), big["n"], big["D"], big["q"],
                      big["compiled_incomplete_over_sklearn_complete"])
    checked += _check(page, "(which has no missing-value support), {}x on complete data",
                      big["compiled_complete_over_sklearn"])

    d = _delalleau()
    checked += _check(page, "{}x faster than the naive per-pattern EM on MNIST with a 5 x 5 square per image, against "
                            "the paper's {p}-{p}x; the default engine is {}x faster than naive.",
                      statistics.mean(d["tree"]), statistics.mean(d["default"]))

    dask = _results("bench_dask.json")
    one, two = (next(r for r in dask["runs"] if r["n_workers"] == w) for w in (1, 2))
    peaks = one["peak_rss_mib"] + two["peak_rss_mib"]
    checked += _check(page, "{} million rows x {} columns with 30 % MCAR (generated lazily per chunk of {} rows, {} MiB; "
                            "the {} MiB matrix never sits in memory), K = {},", dask["n_rows"] / 1e6,
                      dask["n_features"], dask["chunk_rows"], dask["chunk_mib"],
                      dask["n_rows"] * dask["n_features"] * 8 / 2**20, dask["n_components"])
    checked += _check(page, "{} s per EM iteration on one worker, {} s on two: **{}x**", one["seconds_per_iteration"],
                      two["seconds_per_iteration"], dask["speedup"])
    checked += _check(page, "Peak resident memory per worker {}-{} MiB against {} MiB for an idle worker", min(peaks),
                      max(peaks), one["rss_before_mib"][0])
    checked += _check(page, "(about {} chunks' worth here",
                      (one["peak_rss_mib"][0] - one["rss_before_mib"][0]) / dask["chunk_mib"])

    peers = _results("bench_peers.json")
    w1 = peers["cases"][0]
    pool = [w1["ratio_to_explorer"]["pygmmis_pool"], w1["ratio_to_sklearn_complete"]["pygmmis_pool"]]
    checked += _check(page, "costs {}x scikit-learn's complete-data iteration and {}x explorer's ({}-{}x with its own "
                            "process pool)", w1["ratio_to_sklearn_complete"]["pygmmis_serial"],
                      w1["ratio_to_explorer"]["pygmmis_serial"], min(pool), max(pool))
    check = peers["pygmmis_check"]
    checked += _check(page, "(parameters within {} after {} iterations)",
                      max(check[f"max_abs_diff_{k}"] for k in ("weights", "means", "covariances")), check["iterations"])
    diag = peers["pomegranate"]["diag"]["masked_from_explorer_start"]
    checked += _check(page, "matches explorer's diagonal EM to {} once its weights, which sum to {}, are renormalised",
                      abs(diag["loglik_diff_peer_minus_explorer"]), diag["peer_weights_sum_before_renormalising"])

    methods = _results("bench_methods.json")
    secs = {(r["dataset"], r["method"]): r for r in methods["rows"]}
    checked += _check(page, "(`.venv/bin/python benchmarks/bench_methods.py --repeats {}`", methods["meta"]["repeats"])
    checked += _check(page, "one cell (MCAR {}) with the benchmark's settings", methods["meta"]["rate"])
    versions = peers["meta"]["versions"]
    flat = " ".join(page.split())
    assert f"pygmmis ({versions['pygmmis']})" in flat and f"pomegranate {versions['pomegranate']} takes" in flat
    checked += _check(page, "takes {} s on Boston and {} s on Ionosphere; the MissForest re-implementation ({} runs) {} s "
                            "and {} s ({}x and {}x the POIGMM) for the best NRMSE; MICE ({p} imputations) {} s and {} s; "
                            "the EM mixture {} s and {} s.",
                      secs["boston", "poigmm"]["seconds"], secs["ionosphere", "poigmm"]["seconds"],
                      methods["meta"]["missforest_runs"], secs["boston", "missforest"]["seconds"],
                      secs["ionosphere", "missforest"]["seconds"], secs["boston", "missforest"]["ratio_to_poigmm"],
                      secs["ionosphere", "missforest"]["ratio_to_poigmm"], secs["boston", "mice"]["seconds"],
                      secs["ionosphere", "mice"]["seconds"], secs["boston", "em_gmm"]["seconds"],
                      secs["ionosphere", "em_gmm"]["seconds"])
    assert checked == 10 + 4 + 1 + 6 + 1 + 2 + 6 + 3 + 3 + 1 + 4 + 2 + 2 + 1 + 1 + 11 + 10


def test_gaussian_selection_page_is_results_gaussian_selection():
    """reproductions/gaussian_selection.md: column means (truth, complete case, MAR EM, selection model) and slopes."""
    page = _page("reproductions/gaussian_selection.md")
    res = _results("gaussian_selection.json")
    iris, boston = ({r["setting"]["dataset"]: r for r in res["real"]}[k] for k in ("iris", "boston"))
    s = iris["summary"]
    checked = _check(page, "{} masks, about {} % of one column hidden", res["protocol"]["repeats"],
                     100 * res["protocol"]["rate"])
    checked += _check(page, "the column mean of iris sepal length (truth {}) is {} +- {} from complete cases, {} +- {} "
                            "from MAR EM and {} +- {} from the selection model (fitted slope {} +- {}, true {});",
                      iris["truth"], *(s[k][v] for k in ("complete_case", "mar_em", "selection", "b")
                                       for v in ("mean", "se")), iris["b_true"])
    s = boston["summary"]
    checked += _check(page, "on Boston RM (truth {}) {}, {} and {}:", boston["truth"],
                      *(s[k]["mean"] for k in ("complete_case", "mar_em", "selection")))
    checked += _check(page, "overestimates the slope ({} against {})", s["b"]["mean"], boston["b_true"])
    assert checked == 2 + 10 + 4 + 2


def test_table33_page_is_results_marlin_table33():
    """reproductions/marlin2008_table33.md: setting, agreement with the thesis's closed form, EM and factorised ranges
    (the thesis's ranges are {p})."""
    page = _page("reproductions/marlin2008_table33.md")
    res = _results("marlin_table33.json")
    meta, rows = res["meta"], res["rows"]
    checked = _check(page, "`python experiments/marlin_table33.py` ({} s;", meta["seconds"])
    step = rows[1]["beta"] - rows[0]["beta"]
    checked += _check(page, "alpha = delta = {}, gamma = {}, beta = {} + {} t, N = {}, {} repeats, and **lambda = {}**",
                      meta["alpha"], meta["gamma"], rows[0]["beta"] - step * rows[0]["t"], step, meta["n"],
                      meta["repeats"], meta["lam"])
    assert meta["alpha"] == meta["delta"]
    checked += _check(page, "matches the thesis to {}.",
                      max(abs(r["closed_form"] - r["published"]["closed_form"]) for r in rows))
    em = [r["em_mean"] for r in rows]
    within_em = sum(abs(r["em_mean"] - r["true_p_x1"]) <= 2 * r["em_se"] for r in rows)
    within_fact = sum(abs(r["fact_mean"] - r["closed_form"]) <= 2 * r["fact_se"] for r in rows)
    checked += _check(page, "within 2 s.e. of the true {} in all {} rows ({}-{}; thesis {p}-{p})", rows[0]["true_p_x1"],
                      within_em, min(em), max(em))
    checked += _check(page, "within 2 s.e. in all {} rows (ours {} ... {}, thesis {p} ... {p})", within_fact,
                      rows[0]["fact_mean"], rows[-1]["fact_mean"])
    assert len(rows) == within_em == within_fact
    checked += _check(page, "a bias of up to {} on data", max(r["true_p_x1"] - r["closed_form"] for r in rows))
    assert checked == 1 + 7 + 1 + 4 + 3 + 1


def test_user_guide_text_numbers_are_the_results():
    """user_guide/csv.md and evaluation.md: the numbers of the text around the two checked tables
    (results/coverage_prior.json, dpgmm_small_data.json, k_selection.json)."""
    csv_page = _page("user_guide/csv.md")
    coverage = _results("coverage_prior.json")
    summary = coverage["summary"]
    auto = [r["coverage"] for r in summary if r["prior"] == "auto"]
    assert coverage["meta"]["components"][-1] == "auto"
    checked = _check(csv_page, ": {} data sets, {} % of the observed entries hidden, K = {}, {}, {}, {}, auto, {} seeds)",
                     len({r["dataset"] for r in summary}), 100 * coverage["meta"]["rate"],
                     *coverage["meta"]["components"][:-1], coverage["meta"]["seeds"])
    previous = [r["coverage"] for r in summary if r["prior"] == "previous"]
    checked += _check(csv_page, "The target (90-98 % for every K) is met in {} of {} (data set, K) cells ({} before);",
                      sum(0.90 <= c <= 0.98 for c in auto), len(auto), sum(0.90 <= c <= 0.98 for c in previous))
    at_k = {(r["prior"], r["dataset"]): r for r in summary if r["K"] == "auto"}
    checked += _check(csv_page, "NRMSE with the default K moved from {} to {} on Ionosphere and from {} to {} on breast",
                      at_k["previous", "ionosphere"]["nrmse"], at_k["auto", "ionosphere"]["nrmse"],
                      at_k["previous", "breast_cancer"]["nrmse"], at_k["auto", "breast_cancer"]["nrmse"])
    sub = coverage["subsamples"]
    pairs = {(r["dataset"], r["subsample"]): {} for r in sub}
    for r in sub:
        pairs[r["dataset"], r["subsample"]][r["prior"]] = r
    in_now = sum(0.90 <= p["auto"]["coverage"] <= 0.98 for p in pairs.values())
    in_before = sum(0.90 <= p["previous"]["coverage"] <= 0.98 for p in pairs.values())
    in_rule = sum(0.90 <= p["rule"]["coverage"] <= 0.98 for p in pairs.values())
    fell = sum(p["auto"]["nrmse"] < p["previous"]["nrmse"] for p in pairs.values())
    checked += _check(csv_page, "{} of the {} cells are in 90-98 % ({} before issue 21, {} with the shrinkage rule",
                      in_now, len(pairs), in_before, in_rule)
    checked += _check(csv_page, "against the fit before issue 21, NRMSE fell in {} of the {} cells (wine at {} rows: {} "
                      "to {})", fell, len(pairs), 25, pairs["wine", 25]["previous"]["nrmse"],
                      pairs["wine", 25]["auto"]["nrmse"])
    checked += _check(csv_page, "Against the rule alone, NRMSE fell in {} of the {} cells and the NLL in {};",
                      sum(p["auto"]["nrmse"] < p["rule"]["nrmse"] for p in pairs.values()), len(pairs),
                      sum(p["auto"]["nll"] < p["rule"]["nll"] for p in pairs.values()))
    missed = {k: p["auto"]["coverage"] for k, p in pairs.items() if not 0.90 <= p["auto"]["coverage"] <= 0.98}
    assert list(missed) == [("boston", 25)]
    checked += _check(csv_page, "The one miss is Boston at 25 rows ({}), where the choice", missed["boston", 25])
    median = statistics.median
    assert median(pairs["boston", 25]["auto"]["shrinkage"]) == median(pairs["boston", 25]["rule"]["shrinkage"])
    ratio = {k: median(p["auto"]["shrinkage"]) / median(p["rule"]["shrinkage"]) for k, p in pairs.items()}
    breast = [ratio["breast_cancer", n] for n in (25, 50, 100)]
    hepatitis = [ratio["hepatitis", n] for n in (25, 50, 100)]
    assert min(breast) == 1 / 8 and max(breast) == 1 / 4 and round(min(hepatitis)) == 2 and round(max(hepatitis)) == 4
    assert "breast cancer it picked an eighth to a quarter of the rule, on hepatitis two to four times the rule" in \
        " ".join(csv_page.split())
    dp = [r for r in _results("dpgmm_small_data.json")["summary"] if r["config"] == "data (default)"]
    cov = {r["dataset"]: r["coverage_t"] for r in dp}
    met = [c for c in cov.values() if 0.90 <= c <= 0.98]
    checked += _check(csv_page, "now {}-{} effective components on average and {}-{} on four of the six sets (hepatitis {},"
                                " Ionosphere {};", min(r["n_eff"] for r in dp), max(r["n_eff"] for r in dp), min(met),
                      max(met), cov["hepatitis"], cov["ionosphere"])
    at_auto = {r["dataset"]: r["coverage"] for r in summary if r["prior"] == "auto" and r["K"] == "auto"}
    checked += _check(csv_page, "the coverage is {}-{} on all six sets (Ionosphere {} before:",
                      min(at_auto.values()), max(at_auto.values()), at_k["previous", "ionosphere"]["coverage"])
    assert checked == 7 + 3 + 4 + 4 + 5 + 3 + 1 + 6 + 3
    assert len(met) == 4 and "on four of the six sets" in " ".join(csv_page.split())

    page = _page("user_guide/evaluation.md")
    rows = _results("k_selection.json")["summary"]
    datasets = ("iris", "wine", "boston", "ionosphere", "hepatitis", "breast_cancer")

    def r(method: str, dataset: str) -> dict:
        return next(x for x in rows if x["method"] == method and x["dataset"] == dataset)

    def mean(method: str, key: str) -> float:
        return sum(r(method, d)[key] for d in datasets) / len(datasets)

    auto, held, k1 = "GMM auto = K by DPGMM (default rule)", "GMM K by held-out", "GMM K=1"
    words = {4: "four", 5: "five", 6: "six"}
    flat = " ".join(page.split())
    # the held-out rule beats "auto" on both metrics on wine only (after the prior's shrinkage and the draws)
    both = [d for d in datasets if r(held, d)["nrmse"] < r(auto, d)["nrmse"] and r(held, d)["nll"] < r(auto, d)["nll"]]
    assert both == ["wine"] and "The held-out rule is better on both only on wine" in flat
    Ks = [k for d in datasets for k in r(auto, d)["K"]]
    checked = _check(page, "it picks {}-{} components.", min(Ks), max(Ks))
    checked += _check(page, "\"auto\" has a mean NRMSE of {} and a mean NLL of {}.", mean(auto, "nrmse"),
                      mean(auto, "nll"))
    cost = [r(held, d)["seconds"] / r(auto, d)["seconds"] for d in datasets]
    checked += _check(page, "with means {} / {}, at {} to {} times the cost", mean(held, "nrmse"), mean(held, "nll"),
                      round(min(cost), 1), round(max(cost)))
    bic_one = [d for d in datasets if set(r("GMM K by BIC", d)["K"]) == {1}]
    assert bic_one == ["wine", "hepatitis"] and "BIC chose K = 1 on wine and hepatitis" in flat
    checked += _check(page, "K = 5 has the best mean NLL of the Gaussian-mixture settings ({} against {} for \"auto\")",
                      mean("GMM K=5", "nll"), mean(auto, "nll"))
    checked += _check(page, "best mean NLL of all, {}, from Boston", mean("MFA auto (q=2)", "nll"))
    beat_nll = sum(r(auto, d)["nll"] < r(k1, d)["nll"] for d in datasets)
    beat_nrmse = [d for d in datasets if r(auto, d)["nrmse"] < r(k1, d)["nrmse"]]
    assert f"beat K = 1 on NLL on all {words[beat_nll]} sets and on NRMSE on {words[len(beat_nrmse)]}" in flat
    assert sorted(set(datasets) - set(beat_nrmse)) == ["hepatitis", "ionosphere"]
    checked += _check(page, "(it lost Ionosphere by {} and hepatitis by {})",
                      r(auto, "ionosphere")["nrmse"] - r(k1, "ionosphere")["nrmse"],
                      r(auto, "hepatitis")["nrmse"] - r(k1, "hepatitis")["nrmse"])
    trees = "trees (chained eq.)"
    checked += _check(page, "reach NRMSE {}; the best of explorer's density models is `DPGMMImputer` at {} (GMM \"auto\" "
                            "{}, GMM K = 1 {}): here the gap is under {} %", r(trees, "wine")["nrmse"],
                      r("DPGMM", "wine")["nrmse"], r(auto, "wine")["nrmse"], r(k1, "wine")["nrmse"],
                      0.5 + 100 * (r("DPGMM", "wine")["nrmse"] / r(trees, "wine")["nrmse"] - 1))
    gmms = [r(m, "ionosphere")["nrmse"] for m in ("GMM K=1", "GMM K=2", "GMM K=3", "GMM K=5", auto, held,
                                                  "GMM K by BIC", "DPGMM")]
    checked += _check(page, "clearly ahead on Boston ({} against {}) and Ionosphere ({} against {} for the mixture of "
                            "factor analysers, {}-{} for the Gaussian mixtures) and have the best mean NRMSE ({});",
                      r(trees, "boston")["nrmse"], min(r(m, "boston")["nrmse"] for m in (auto, held, "DPGMM")),
                      r(trees, "ionosphere")["nrmse"], r("MFA auto (q=2)", "ionosphere")["nrmse"], min(gmms),
                      max(gmms), mean(trees, "nrmse"))
    checked += _check(page, "behind on iris, hepatitis and breast cancer ({} against {})",
                      r(trees, "breast_cancer")["nrmse"], r(auto, "breast_cancer")["nrmse"])
    assert checked == 2 + 2 + 4 + 2 + 1 + 2 + 5 + 7 + 2


def test_readme_performance_table_is_the_benchmark_results():
    """Issue 22: the README's performance table is the last run of benchmarks/bench_em.py and bench_em_wide.py."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    cases = {c["case"]: c for c in _results("bench_em.json")["cases"]}
    for label, case in (("| 20,000 x 10, K = 5 (W1) |", "W1"), ("| 100,000 x 20, K = 10 (W2) |", "W2"),
                        ("| 20,000 x 50, K = 5 |", "D50")):
        sep, ovl = cases[case], cases[f"{case}, overlapping"]
        cells = _cells(_row(readme, label))
        assert cells[1] == f"{sep['ratio']:.2f} / {ovl['ratio']:.2f}", case
        assert cells[2] == f"{sep['fit_ratio']:.2f} / {ovl['fit_ratio']:.2f}", case
        assert cells[3] == f"<= {sep['target']:.1f}", case
    wide = _results("bench_em_wide.json")["rows"]["imputer default fit"]
    cells = _cells(_row(readme, "| 250 x 200, 70 % MCAR: `GaussianMixtureImputer(n_components=1)` fit |"))
    assert cells[1] == f"{wide['seconds']:.1f} s" and cells[3] == "<= 3 s"
    # the cost rule, as the README and the performance page state it, is the code's
    from explorer.core.mixtures import suffstats

    rule = (f"`sum m^3 > {suffstats.COVARIANCE_SIDE_MIN_FACTOR_WORK:g} N D^2` and `sum o^3 < "
            f"{suffstats.COVARIANCE_SIDE_RATIO:g} sum m^3`")
    assert rule in " ".join(readme.split()) and rule in " ".join(_page("performance.md").split())


def test_factor_models_bootstrap_paragraph_is_results_factor_bootstrap():
    """user_guide/factor_models.md, "Draws and intervals": the numbers of results/factor_bootstrap.json (plug-in,
    bootstrap and data-augmentation draws)."""
    page = _page("user_guide/factor_models.md")
    assert "results/factor_bootstrap.md" in page
    res = _results("factor_bootstrap.json")
    rubin, totals, by_size = res["rubin"], res["totals"], res["by_size"]
    checked = _check(page, "the 95 % confidence interval held the true mean in {} of the data sets with data "
                     "augmentation and {} with the bootstrap against {} with plug-in draws", rubin["draws"]["coverage"],
                     rubin["bootstrap"]["coverage"], rubin["plugin"]["coverage"])
    checked += _check(page, "{} data sets), the 95 %", res["meta"]["rubin_reps"])
    checked += _check(page, "mean coverage of the 95 % intervals was {} with data augmentation, {} with the bootstrap "
                      "and {} plug-in (FA), and {}, {} and {} (MFA)", *(totals[f"{m}/{p}"]["coverage"] for m in
                      ("fa", "mfa") for p in ("draws", "bootstrap", "plugin")))
    checked += _check(page, "lowest mean NLL per hidden entry ({} for FA, {} for MFA)", totals["fa/draws"]["nll"],
                      totals["mfa/draws"]["nll"])
    checked += _check(page, "on {} rows mean coverage rose from {} to {} (FA) and from {} to {} (MFA)",
                      25, by_size["fa/plugin/25"], by_size["fa/draws/25"], by_size["mfa/plugin/25"],
                      by_size["mfa/draws/25"])
    checked += _check(page, "data augmentation took {} s and the bootstrap {} s against {} s plug-in",
                      totals["fa/draws"]["seconds"], totals["fa/bootstrap"]["seconds"], totals["fa/plugin"]["seconds"])
    checked += _check(page, "per MFA fit {} s against {} s plug-in", totals["mfa/draws"]["seconds"],
                      totals["mfa/plugin"]["seconds"])
    ratios = sorted(totals[f"{m}/draws"]["seconds"] / totals[f"{m}/plugin"]["seconds"] for m in ("fa", "mfa"))
    checked += _check(page, "data augmentation, at {} to {} times the plug-in fit's cost", *ratios)
    small_cells = [s for s in res["summary"] if s["predictive"] == "draws" and s["subsample"] in (25, 50)]
    checked += _check(page, "still cover less than 0.90 ({} of the {} cells of 25 or 50 rows of the two models; "
                      "ionosphere's {} columns the lowest, {} with MFA)", sum(s["coverage"] < 0.90 for s in small_cells),
                      len(small_cells), 33, min(s["coverage"] for s in small_cells))
    lowest = min(small_cells, key=lambda s: s["coverage"])
    assert (lowest["dataset"], lowest["model"]) == ("ionosphere", "mfa")
    model = {(m["n_features"], m["n_rows"], m["tau"]): m for m in res["model"]}
    assert res["meta"]["tau"] == 1.0
    weak, unit = model[13, 25, 0.01], model[13, 25, 1.0]
    checked += _check(page, "the drawn noise variances of {} rows where the maximum-likelihood ones are, {} of the true "
                      "ones in {} columns, and the intervals covered {}; weighing one row, the draws are {} of the true "
                      "ones and cover {} ({} at {} rows, {} at {})", 25, weak["drawn_psi_ratio"], 13,
                      weak["coverage"], unit["drawn_psi_ratio"], unit["coverage"], model[13, 50, 1.0]["coverage"], 50,
                      model[13, 200, 1.0]["coverage"], 200)
    assert abs(weak["drawn_psi_ratio"] - weak["ml_psi_ratio"]) < 0.05  # "where the maximum-likelihood ones are"
    # the row weight of one row covers closer to 0.95 than a hundredth of a row in every (columns, rows) setting
    assert all(abs(model[d, n, 1.0]["coverage"] - 0.95) < abs(model[d, n, 0.01]["coverage"] - 0.95)
               for (d, n, t) in model if t == 1.0)
    assert checked == 38
    assert min(res["meta"]["subsamples"]) == 25
    # the claims in words: the bootstrap lowers coverage on small subsamples of the wide sets, not from 100 rows up;
    # data augmentation covers at least as often as plug-in in every cell, and it is the default
    cells = {(s["dataset"], s["subsample"], s["model"], s["predictive"]): s["coverage"] for s in res["summary"]}
    small = [cells[d, n, m, "bootstrap"] - cells[d, n, m, "plugin"] for d in ("ionosphere", "breast_cancer")
             for n in (25, 50) for m in ("fa", "mfa")]
    assert statistics.mean(small) < 0
    large = [cells[d, n, m, "bootstrap"] - cells[d, n, m, "plugin"] for (d, n, m, p) in cells if p == "plugin"
             and (n is None or n >= 100)]
    assert statistics.mean(large) > 0
    assert all(cells[d, n, m, "draws"] >= cells[d, n, m, "plugin"] - 5e-4 for (d, n, m, p) in cells if p == "plugin")
    assert max(totals[f"{m}/draws"]["nll"] - totals[f"{m}/{p}"]["nll"] for m in ("fa", "mfa")
               for p in ("plugin", "bootstrap")) < 0  # the lowest mean NLL of the three
    from explorer.impute.factor import FactorAnalysisImputer, MFAImputer

    assert 'proper multiple imputations by default (`predictive="draws"`' in " ".join(page.split())
    assert FactorAnalysisImputer().predictive == MFAImputer().predictive == "draws"
