"""Reference numbers of garriga2017 (the thesis notebook behind Figures A.1-A.5), as a tidy table.

The thesis itself has no numeric results: Appendix A only has bar charts. The digest
(``/work/shared/reference/seed000-poigmm-variational-dp-gmm.md``, section 4.2) transcribes the
author's notebook ``timeless-imputation/Plot report.ipynb`` (commit 2339431), which very likely holds
the data of those figures. Every number of its tables is in
``assets/reference/garriga2017_reference.csv``, one row per data set x mechanism x rate x method x metric:

=============  ======================================================================================
column         meaning
=============  ======================================================================================
dataset        ``boston`` (BostonHousing) or ``ionosphere``
mechanism      registry name (:mod:`explorer.core.missingness.mechanisms`): ``mcar`` = MCAR_total (Fig. A.4),
               ``mcar_rows`` = MCAR_rows (A.5), ``mar_rows`` = MAR_rows (A.3), ``nmar_lowest`` = NMAR,
               notebook "MNAR_rows" (A.2), ``nmar_random`` = NMAR_random, "MNAR_R_rows" (A.1)
rate           requested missing rate r
method         ``poigmm`` (the notebook's GMM), ``missforest`` ("Missforest_mult"), ``mice`` (pmm,
               m = 10), ``mean`` (N(0, 1))
metric         ``nrmse``, ``pfc``, or ``nll`` = minus the notebook's log-likelihood (sum over rows,
               standardised units); an LL of -inf is an NLL of +inf
mean, std      mean and sample std over the pooled repetitions; ``std`` is NaN when the digest gives
               none (single run); ``mean`` is NaN where the notebook has NaN (missing or failed run,
               e.g. MICE at r = 0.9)
note           provenance remarks (no std, -inf, realised rate ~ r^1.5 for ``nmar_random``, ...)
=============  ======================================================================================

Cells the digest marks "–" (Ionosphere MCAR_rows PFC of the methods other than the GMM) have no
row. Ionosphere MAR_rows has no row at all (the notebook has no Ionosphere MAR results), and the
NMAR mechanisms have no PFC (they only hide numeric columns).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from explorer.core.deprecation import renamed_names

__all__ = ["REFERENCE_COLUMNS", "REFERENCE_CSV", "GARRIGA2017_FIGURES", "GARRIGA2017_RATES", "garriga2017_reference",
           "reference_cells"]

#: Location of the transcription (found relative to the repository, like the data sets).
REFERENCE_CSV = Path(__file__).resolve().parents[1] / "assets" / "reference" / "garriga2017_reference.csv"
#: Columns of :func:`garriga2017_reference`.
REFERENCE_COLUMNS = ("dataset", "mechanism", "rate", "method", "metric", "mean", "std", "note")
#: Requested missing rates of the thesis experiments per mechanism (digest section 2.2).
GARRIGA2017_RATES: dict[str, tuple[float, ...]] = {
    "mcar": (0.1, 0.3, 0.5, 0.7, 0.9),
    "mcar_rows": (0.1, 0.3),
    "mar_rows": (0.1, 0.3, 0.5),
    "nmar_lowest": (0.1, 0.3, 0.5),
    "nmar_random": (0.1, 0.3, 0.5),
}
#: Thesis figure of each mechanism (Appendix A) and the thesis's name for it.
GARRIGA2017_FIGURES: dict[str, tuple[str, str]] = {
    "nmar_random": ("A.1", "NMAR_random"),
    "nmar_lowest": ("A.2", "NMAR"),
    "mar_rows": ("A.3", "MAR_rows"),
    "mcar": ("A.4", "MCAR_total"),
    "mcar_rows": ("A.5", "MCAR_rows"),
}


@lru_cache(maxsize=1)
def _load() -> pd.DataFrame:
    if not REFERENCE_CSV.is_file():
        raise FileNotFoundError(f"{REFERENCE_CSV} is missing: the garriga2017 reference table ships with the "
                                "repository (assets/reference/); restore it from git.")
    df = pd.read_csv(REFERENCE_CSV, dtype={"dataset": str, "mechanism": str, "method": str, "metric": str,
                                           "note": str}, keep_default_na=False, na_values={"mean": [""],
                                                                                          "std": [""]})
    df["rate"] = df["rate"].astype(float)
    df["mean"] = df["mean"].astype(float)  # "inf" parses to +inf
    df["std"] = df["std"].astype(float)
    return df[list(REFERENCE_COLUMNS)]


def garriga2017_reference() -> pd.DataFrame:
    """The garriga2017 reference numbers (digest section 4.2) as a tidy table.

    Returns
    -------
    pandas.DataFrame
        One row per (dataset, mechanism, rate, method, metric) with columns
        :data:`REFERENCE_COLUMNS` (279 rows). A fresh copy: callers may modify it.

    Examples
    --------
    >>> ref = garriga2017_reference()
    >>> row = ref.query("dataset == 'boston' and mechanism == 'mcar' and rate == 0.1 "
    ...                 "and method == 'poigmm' and metric == 'nrmse'")
    >>> float(row["mean"].iloc[0]), float(row["std"].iloc[0])
    (0.340023, 0.026)
    """
    return _load().copy()


def reference_cells(mechanism: str, metric: str, datasets=None, methods=None) -> pd.DataFrame:
    """The reference rows of one figure panel: a mechanism and a metric (optionally filtered).

    Parameters
    ----------
    mechanism : str
        Registry name (``mcar``, ``mcar_rows``, ``mar_rows``, ``nmar_lowest``, ``nmar_random``).
    metric : str
        ``nrmse``, ``pfc`` or ``nll``; other metrics (``coverage95``, ``nll_t``, ...) have no
        reference and give an empty table.
    datasets, methods : sequence of str, optional
        Keep only these data sets / methods.

    Returns
    -------
    pandas.DataFrame
        Rows of :func:`garriga2017_reference` (same columns), sorted by dataset, rate, method.
    """
    ref = _load()
    keep = (ref["mechanism"] == mechanism) & (ref["metric"] == metric)
    if datasets is not None:
        keep &= ref["dataset"].isin(list(datasets))
    if methods is not None:
        keep &= ref["method"].isin(list(methods))
    out = ref[keep].sort_values(["dataset", "rate", "method"], kind="stable").reset_index(drop=True)
    out["mean"] = out["mean"].astype(np.float64)
    return out


#: Old names (before the source documents were cited by key) -> new names. Kept importable for one
#: release with a DeprecationWarning; not in ``__all__``.
_RENAMED = {
    "SEED000_RATES": "GARRIGA2017_RATES",
    "SEED000_FIGURES": "GARRIGA2017_FIGURES",
    "seed000_reference": "garriga2017_reference",
}


__getattr__ = renamed_names(__name__, globals(), _RENAMED)
