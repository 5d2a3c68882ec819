"""Issue 3's acceptance numbers, recomputed live (not read from the committed table).

BostonHousing, MCAR_total (garriga2017 Fig. A.4): the POIGMM's NRMSE within 0.05 of the thesis
notebook's at every rate, and the NRMSE ordering MissForest < POIGMM < MICE < mean at r = 0.1-0.5.
One repetition with the benchmark's full settings except missForest's number of runs (1 instead of
10: the ordering is about the point imputation, which one run already gives). About a minute.
"""

from __future__ import annotations

import numpy as np
import pytest

from explorer.benchmark import run_benchmark, summarise
from explorer.reference import garriga2017_reference

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def boston_mcar():
    poigmm = run_benchmark("boston", ["mcar"], [0.1, 0.3, 0.5, 0.7, 0.9], ["poigmm"], 1, seed=0)
    others = run_benchmark("boston", ["mcar"], [0.1, 0.3, 0.5], ["missforest", "mice", "mean"], 1, seed=0,
                           method_options={"missforest": {"n_runs": 1}})
    import pandas as pd

    df = pd.concat([poigmm, others], ignore_index=True)
    assert (df["error"] == "").all(), df[df["error"] != ""][["method", "rate", "metric", "error"]]
    s = summarise(df)
    return s[s.metric == "nrmse"].set_index(["method", "rate"])["mean"]


def _ref(method, rate):
    ref = garriga2017_reference()
    row = ref[(ref.dataset == "boston") & (ref.mechanism == "mcar") & (ref.method == method)
              & (ref.metric == "nrmse") & np.isclose(ref.rate, rate)]
    assert len(row) == 1
    return float(row["mean"].iloc[0])


@pytest.mark.parametrize("rate", [0.1, 0.3, 0.5, 0.7, 0.9])
def test_poigmm_nrmse_within_005_of_the_thesis(boston_mcar, rate):
    ours, ref = boston_mcar[("poigmm", rate)], _ref("poigmm", rate)
    assert abs(ours - ref) <= 0.05, f"r={rate}: ours {ours:.3f}, thesis notebook {ref:.3f}"


@pytest.mark.parametrize("rate", [0.1, 0.3, 0.5])
def test_nrmse_ordering_missforest_poigmm_mice_mean(boston_mcar, rate):
    vals = [boston_mcar[(m, rate)] for m in ("missforest", "poigmm", "mice", "mean")]
    assert vals == sorted(vals) and len(set(vals)) == 4, dict(zip(("missforest", "poigmm", "mice", "mean"), vals))
    # and the same ordering is in the reference itself
    refs = [_ref(m, rate) for m in ("missforest", "poigmm", "mice", "mean")]
    assert refs == sorted(refs)
