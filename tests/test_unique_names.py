"""Issue 20, names: every class of explorer has a name of its own; renamed names still import, with a warning."""

from __future__ import annotations

import ast
import importlib
import warnings
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "explorer"

RENAMED = [
    ("explorer.core.missingness.mar_table", "EMConfig", "MARTableEMConfig"),
    ("explorer.core.missingness.mar_table", "EMState", "MARTableEMState"),
    ("explorer.core.missingness.mar_table", "EMResult", "MARTableEMResult"),
    ("explorer.ui.components.downloads", "Imputations", "PageImputations"),
    ("explorer.ui.state.ratings_model", "Comparison", "RatingsComparison"),
    ("explorer.ui.state.regression_model", "Comparison", "RegressionComparison"),
    ("explorer.reference", "seed000_reference", "garriga2017_reference"),
]


def test_no_class_name_is_defined_twice():
    where = defaultdict(list)
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                where[node.name].append(str(path.relative_to(PACKAGE.parent)))
    twice = {name: files for name, files in where.items() if len(files) > 1}
    assert not twice, twice
    assert len(where) > 100  # the scan saw the package's classes


@pytest.mark.parametrize(("module", "old", "new"), RENAMED)
def test_a_renamed_name_still_imports_with_a_warning(module, old, new):
    mod = importlib.import_module(module)
    with pytest.warns(DeprecationWarning, match=rf"{module}\.{old} is renamed {module}\.{new}"):
        value = getattr(mod, old)
    assert value is getattr(mod, new)
    assert new in mod.__all__ and old not in mod.__all__


def test_the_new_names_import_silently_and_unknown_names_still_fail():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from explorer.core.missingness.mar_table import MARTableEMState  # noqa: F401
        from explorer.core.mixtures import vb_dpgmm
        from explorer.ui.components.downloads import PageImputations  # noqa: F401
    assert vb_dpgmm.ConvergenceWarning is vb_dpgmm.VBConvergenceWarning  # the core modules' protocol name
    with pytest.raises(AttributeError, match="no attribute 'EMStat'"):
        importlib.import_module("explorer.core.missingness.mar_table").EMStat  # noqa: B018
