"""The notebooks on the documentation site (docs/notebooks/*.ipynb) are copies of notebooks/*.ipynb with the text
outputs of a run (``scripts/make_notebook.py --docs``): the same cells, text stored, no live JavaScript view."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def test_every_notebook_has_its_docs_copy_and_is_listed():
    copies = sorted(p.name for p in (ROOT / "docs" / "notebooks").glob("*.ipynb"))
    assert NOTEBOOKS and copies == NOTEBOOKS
    index = (ROOT / "docs" / "notebooks" / "index.md").read_text(encoding="utf-8")
    for name in NOTEBOOKS:
        assert f"({name})" in index and f"\n{Path(name).stem}\n" in index, name


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_docs_copy_has_the_notebooks_cells_and_their_text_outputs(name):
    source, copy = _load(ROOT / "notebooks" / name), _load(ROOT / "docs" / "notebooks" / name)
    assert [(c["cell_type"], c["source"]) for c in copy["cells"]] == \
        [(c["cell_type"], c["source"]) for c in source["cells"]], \
        f"docs/notebooks/{name} is stale: run .venv/bin/python scripts/make_notebook.py --docs"
    assert all(not c.get("outputs") for c in source["cells"]), "notebooks/ are saved without outputs"
    code = [c for c in copy["cells"] if c["cell_type"] == "code"]
    assert all(c.get("execution_count") for c in code), "every code cell of the copy ran"
    outputs = [o for c in code for o in c["outputs"]]
    assert sum(o["output_type"] == "stream" and o["name"] == "stdout" for o in outputs) >= 3, "printed results kept"
    for output in outputs:
        assert output["output_type"] != "error"
        data = output.get("data", {})
        assert not any(k.startswith(("application/javascript", "application/vnd.")) for k in data), sorted(data)
        assert "<script" not in "".join(data.get("text/html", "")), "no script in stored HTML"
    text = "".join("".join(o.get("text", "")) for o in outputs)
    assert "DeprecationWarning" not in text, "a notebook imports an old module path"
    assert (ROOT / "docs" / "notebooks" / name).stat().st_size < 200_000
