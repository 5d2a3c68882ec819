"""The garriga2017 reference table (explorer.reference) against the digest it transcribes.

Three layers: every cell of the digest's section 4.2 tables is parsed from the markdown (when
``/work/shared/reference`` is available) and compared with the CSV; a handful of values copied by
hand are checked whatever the environment; and the orderings the digest states hold in the table.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from explorer.reference import (REFERENCE_COLUMNS, GARRIGA2017_FIGURES, GARRIGA2017_RATES, reference_cells,
                                garriga2017_reference)

REPO = Path(__file__).resolve().parents[1]
DIGEST = REPO.parent / "shared" / "reference" / "seed000-poigmm-variational-dp-gmm.md"

FIG_MECH = {fig: mech for mech, (fig, _) in GARRIGA2017_FIGURES.items()}
METHOD = {"GMM": "poigmm", "MissForest": "missforest", "MICE": "mice", "mean": "mean"}
METRIC = {"NRMSE": "nrmse", "LL": "nll", "PFC": "pfc"}


@pytest.fixture(scope="module")
def ref() -> pd.DataFrame:
    return garriga2017_reference()


def cell(ref, dataset, mechanism, rate, method, metric) -> pd.Series:
    hit = ref[(ref.dataset == dataset) & (ref.mechanism == mechanism) & np.isclose(ref.rate, rate)
              & (ref.method == method) & (ref.metric == metric)]
    assert len(hit) == 1, f"{dataset} {mechanism} {rate} {method} {metric}: {len(hit)} rows"
    return hit.iloc[0]


def mean_of(ref, *key) -> float:
    return float(cell(ref, *key)["mean"])


# --------------------------------------------------------------------------- digest parsing
def _number(text: str) -> float:
    return float(text.replace("−", "-").replace("**", "").strip())


def _digest_cells() -> list[tuple]:
    """(dataset, mechanism, rate, method, metric, value, std) for every numeric cell of section 4.2.

    ``value`` is as printed (LL, not NLL); ``std`` is None when the cell has no "±".
    """
    text = DIGEST.read_text(encoding="utf-8")
    sec = text[text.index("### 4.2"):text.index("#### Consistency")]
    out, mech, dataset, metric, header = [], None, None, None, []
    for line in sec.splitlines():
        if m := re.match(r"#### (A\.\d)", line):
            mech, metric = FIG_MECH[m.group(1)], None
            dataset = "boston" if "BostonHousing only" in line else None
        elif line.startswith(("BostonHousing", "Ionosphere")) and not line.startswith("Ionosphere PFC"):
            dataset = "boston" if line.startswith("Boston") else "ionosphere"
            metric = next((v for k, v in METRIC.items() if re.search(rf"\b{k}\b", line)), None)
        elif line.startswith("| r |"):
            header = [h.strip() for h in line.strip("| \n").split("|")]
        elif line.startswith("| 0."):
            cells = [c.strip() for c in line.strip("| \n").split("|")]
            rate, start, met = float(cells[0]), 1, metric
            if header[1] == "metric":
                met, start = METRIC[cells[1]], 2
            for name, c in zip(header[start:], cells[start:]):
                c = re.sub(r"\((GMM|—)\)", "", c).strip()
                if c in ("–", "—"):
                    continue
                if c == "NaN":
                    out.append((dataset, mech, rate, METHOD[name], met, math.nan, None))
                    continue
                value, _, std = c.partition("±")
                out.append((dataset, mech, rate, METHOD[name], met, _number(value),
                            _number(std) if std else None))
        elif line.startswith("Ionosphere PFC, GMM only"):
            values = re.search(r": ([\d., ]+) for r", line).group(1).split(",")
            out += [("ionosphere", "mcar", r, "poigmm", "pfc", float(v), None)
                    for r, v in zip(GARRIGA2017_RATES["mcar"], values)]
    return out


@pytest.mark.skipif(not DIGEST.is_file(), reason="the garriga2017 digest (../shared/reference) is not available")
def test_every_digest_cell_is_in_the_table(ref):
    cells = _digest_cells()
    assert len(cells) == len(ref) == 279
    for dataset, mech, rate, method, metric, value, std in cells:
        row = cell(ref, dataset, mech, rate, method, metric)
        expected = -value if metric == "nll" else value  # the table stores NLL = -LL
        if math.isnan(expected):
            assert math.isnan(row["mean"])
        else:
            assert row["mean"] == pytest.approx(expected, rel=1e-12), (dataset, mech, rate, method, metric)
        if std is None:
            assert math.isnan(row["std"]), (dataset, mech, rate, method, metric)
        else:
            assert row["std"] == pytest.approx(std, rel=1e-12, abs=0.0)


# --------------------------------------------------------------------------- hand-copied values
@pytest.mark.parametrize(("key", "mean", "std"), [
    (("boston", "mcar", 0.1, "poigmm", "nrmse"), 0.340023, 0.026000),
    (("boston", "mcar", 0.9, "poigmm", "nrmse"), 0.694411, 0.016116),
    (("boston", "mcar", 0.1, "missforest", "nrmse"), 0.291342, None),
    (("boston", "mcar", 0.5, "mean", "nll"), 4324.421541, 93.795382),
    (("boston", "mcar", 0.1, "mice", "nll"), 2.936281e307, None),
    (("ionosphere", "mcar", 0.3, "poigmm", "nll"), 35295.54, None),
    (("boston", "mcar_rows", 0.3, "mice", "pfc"), 0.078387, 0.023922),
    (("boston", "mar_rows", 0.1, "poigmm", "nll"), 411.024820, 201.787127),
    (("boston", "nmar_lowest", 0.1, "missforest", "nll"), 7.374540e6, 1.065845e7),
    (("ionosphere", "nmar_lowest", 0.5, "poigmm", "nrmse"), 1.752458, 0.005014),
    (("boston", "nmar_random", 0.5, "mice", "nrmse"), 0.753711, 0.131047),
    (("ionosphere", "nmar_random", 0.3, "poigmm", "nrmse"), 0.889303, 0.0),
    (("ionosphere", "mcar", 0.9, "poigmm", "pfc"), 0.148265, None),
])
def test_hand_copied_values(ref, key, mean, std):
    row = cell(ref, *key)
    assert row["mean"] == pytest.approx(mean, rel=1e-12)
    if std is None:
        assert math.isnan(row["std"])
    else:
        assert row["std"] == pytest.approx(std, rel=1e-12, abs=0.0)


def test_infinite_ll_is_infinite_nll_and_nan_stays_nan(ref):
    assert mean_of(ref, "boston", "mcar", 0.1, "poigmm", "nll") == math.inf
    assert mean_of(ref, "ionosphere", "nmar_lowest", 0.5, "missforest", "nll") == math.inf
    assert "-inf" in cell(ref, "boston", "mcar", 0.1, "poigmm", "nll")["note"]
    nan = cell(ref, "boston", "mcar", 0.9, "mice", "nrmse")
    assert math.isnan(nan["mean"]) and "NaN" in nan["note"]
    assert (ref["mean"] == -math.inf).sum() == 0  # NLL is never -inf: LL was never +inf
    assert (ref.loc[ref.metric == "nll", "mean"] == math.inf).sum() == 30


def test_schema_and_coverage(ref):
    assert tuple(ref.columns) == REFERENCE_COLUMNS
    assert set(ref.dataset) == {"boston", "ionosphere"}
    assert set(ref.mechanism) == set(GARRIGA2017_RATES)
    assert set(ref.method) == {"poigmm", "missforest", "mice", "mean"}
    assert set(ref.metric) == {"nrmse", "pfc", "nll"}
    assert not ref.duplicated(["dataset", "mechanism", "rate", "method", "metric"]).any()
    for mech, rates in GARRIGA2017_RATES.items():
        assert tuple(sorted(ref.loc[ref.mechanism == mech, "rate"].unique())) == rates
    # no PFC for the NMAR mechanisms, no Ionosphere MAR_rows (as the digest says)
    assert ref[ref.mechanism.str.startswith("nmar") & (ref.metric == "pfc")].empty
    assert ref[(ref.mechanism == "mar_rows") & (ref.dataset == "ionosphere")].empty
    assert (ref["std"].dropna() >= 0).all()


def test_rates_match_the_benchmark_runner():
    import importlib.util

    spec = importlib.util.spec_from_file_location("run_imputation", REPO / "benchmarks" / "run_imputation.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert {k: tuple(v) for k, v in module.GARRIGA2017_RATES.items()} == GARRIGA2017_RATES


def test_reference_cells_filters_one_panel():
    panel = reference_cells("mcar", "nrmse", datasets=["boston"], methods=["poigmm", "mean"])
    assert len(panel) == 10
    assert set(panel.method) == {"poigmm", "mean"} and set(panel.dataset) == {"boston"}
    assert list(panel.rate) == sorted(panel.rate)
    assert reference_cells("mcar", "coverage95").empty


# --------------------------------------------------------------------------- orderings the digest states
@pytest.mark.parametrize(("mechanism", "rates"), [("mcar", (0.1, 0.3, 0.5, 0.7)), ("mcar_rows", (0.1, 0.3)),
                                                  ("mar_rows", (0.1, 0.3, 0.5))])
def test_boston_nrmse_missforest_gmm_mice_mean(ref, mechanism, rates):
    for r in rates:
        v = [mean_of(ref, "boston", mechanism, r, m, "nrmse") for m in ("missforest", "poigmm", "mice", "mean")]
        assert v == sorted(v) and len(set(v)) == 4, (mechanism, r, v)


def test_gmm_beats_missforest_at_mcar_09(ref):
    assert mean_of(ref, "boston", "mcar", 0.9, "poigmm", "nrmse") < mean_of(ref, "boston", "mcar", 0.9,
                                                                            "missforest", "nrmse")


def test_ionosphere_mcar_mice_beats_gmm_at_most_rates(ref):
    wins = [mean_of(ref, "ionosphere", "mcar", r, "mice", "nrmse")
            < mean_of(ref, "ionosphere", "mcar", r, "poigmm", "nrmse") for r in GARRIGA2017_RATES["mcar"]]
    assert sum(wins) >= 3


def test_nmar_gmm_best_nrmse_on_ionosphere_and_boston_01(ref):
    for r in GARRIGA2017_RATES["nmar_lowest"]:
        g = mean_of(ref, "ionosphere", "nmar_lowest", r, "poigmm", "nrmse")
        assert all(g < mean_of(ref, "ionosphere", "nmar_lowest", r, m, "nrmse") for m in ("missforest", "mice", "mean"))
    g = mean_of(ref, "boston", "nmar_lowest", 0.1, "poigmm", "nrmse")
    assert all(g < mean_of(ref, "boston", "nmar_lowest", 0.1, m, "nrmse") for m in ("missforest", "mice", "mean"))
    # NRMSE > 1 under NMAR: the hidden values are the low tail, with a small variance
    assert (ref.query("mechanism == 'nmar_lowest' and metric == 'nrmse'")["mean"] > 1).all()


@pytest.mark.parametrize("key", [("ionosphere", "mcar", 0.3), ("ionosphere", "nmar_lowest", 0.1),
                                 ("ionosphere", "nmar_random", 0.1), ("ionosphere", "nmar_random", 0.5),
                                 ("boston", "mar_rows", 0.5)])
def test_mean_imputation_has_lower_nll_than_gmm_in_the_cells_the_digest_names(ref, key):
    assert mean_of(ref, *key, "mean", "nll") < mean_of(ref, *key, "poigmm", "nll")


def test_gmm_nll_finite_where_others_overflow(ref):
    """Boston MAR_rows r <= 0.3: GMM finite and smallest; MF / MICE astronomically large or infinite."""
    for r in (0.1, 0.3):
        g = mean_of(ref, "boston", "mar_rows", r, "poigmm", "nll")
        assert np.isfinite(g)
        assert all(g < mean_of(ref, "boston", "mar_rows", r, m, "nll") for m in ("missforest", "mice", "mean"))
        assert mean_of(ref, "boston", "mar_rows", r, "missforest", "nll") > 1e270


@pytest.mark.parametrize("old, new", [("SEED000_RATES", "GARRIGA2017_RATES"),
                                      ("SEED000_FIGURES", "GARRIGA2017_FIGURES"),
                                      ("seed000_reference", "garriga2017_reference")])
def test_old_names_still_import_with_a_deprecation_warning(old, new):
    """The names before the citation keys keep working for one release, with a warning, outside ``__all__``."""
    import explorer.reference as module

    with pytest.warns(DeprecationWarning, match=rf"{old} is renamed .*{new}; the old name will be removed"):
        value = getattr(module, old)
    assert value is getattr(module, new)
    assert old not in module.__all__ and new in module.__all__


def test_old_name_from_import_warns_and_unknown_names_still_fail():
    import explorer.reference as module

    with pytest.warns(DeprecationWarning, match="seed000_reference is renamed"):
        from explorer.reference import seed000_reference
    assert seed000_reference is module.garriga2017_reference
    with pytest.raises(AttributeError, match="no_such_name"):
        module.no_such_name  # noqa: B018
