"""Every notebook is run by the test suite: ``scripts/test.sh`` no longer runs them with nbmake, so each
``notebooks/*.ipynb`` must be listed in the JupyterLab browser test (which runs every cell offline)."""

from __future__ import annotations

from pathlib import Path

from tests.browser.test_jupyterlab import EXPECTED

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def test_every_notebook_is_run_in_jupyterlab():
    on_disk = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))
    assert on_disk, "no notebook found"
    assert sorted(nb.name for nb in EXPECTED) == on_disk
