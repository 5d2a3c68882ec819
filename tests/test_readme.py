"""The README (issue 20, item 6; issue 21: the example reads a CSV with gaps and a text column): at most 250 lines, one
picture, the four commands, a ten-line library example that
runs as written, and links into the documentation that resolve. Its long content moved to docs/ (its code is run by
tests/test_docs_pages.py, its numbers checked by tests/test_docs_numbers.py)."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")

#: Markdown links and images: [text](target) / ![alt](target)
LINK = re.compile(r"(!?)\[[^\]]*\]\(([^)\s]+)\)")


def test_readme_is_at_most_250_lines():
    assert len(README.splitlines()) <= 250


def test_readme_python_block_is_the_ten_line_example_and_runs():
    blocks = re.findall(r"```python\n(.*?)```", README, flags=re.S)
    assert len(blocks) == 1, "one library example"
    lines = [line for line in blocks[0].splitlines() if line.strip()]
    assert len(lines) <= 11, f"the example has {len(lines)} lines"
    namespace: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # no old module path in the first thing people copy
        exec(compile(blocks[0], "README.md", "exec"), namespace)
    data, filled, draws, proba = namespace["data"], namespace["filled"], namespace["draws"], namespace["proba"]
    missing = data.isna().to_numpy()
    assert missing.any() and data["Month"].isna().any(), "the CSV has gaps, also in its text column"
    assert str(data["Month"].dtype) == "category"
    assert filled.shape == data.shape and not filled.isna().to_numpy().any()
    assert list(filled.columns) == list(data.columns) and str(filled["Month"].dtype) == "category"
    for c in data.columns:  # observed cells kept
        kept = data[c].notna()
        assert (filled.loc[kept, c] == data.loc[kept, c]).all(), c
    assert set(filled["Month"]) <= {"May", "June"}
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)
    assert set(proba.columns) == {"May", "June"}
    hidden_month = data["Month"].isna()
    assert (filled.loc[hidden_month, "Month"] == proba.loc[hidden_month].idxmax(axis=1)).all()  # the most probable
    assert len(draws) == 10 and all(d.shape == data.shape for d in draws)
    lower, upper = namespace["lower"], namespace["upper"]
    num_missing = data.drop(columns="Month").isna().to_numpy()
    assert np.all(lower[num_missing] < upper[num_missing])


def test_readme_has_one_picture_and_it_exists():
    images = [target for bang, target in LINK.findall(README) if bang]
    assert len(images) == 1
    assert (ROOT / images[0]).is_file(), images[0]


def test_readme_gives_the_four_commands():
    bash = "\n".join(re.findall(r"```bash\n(.*?)```", README, flags=re.S))
    for command in ("bash scripts/serve.sh", "bash scripts/test.sh", "bash scripts/notebooks.sh", "bash scripts/docs.sh"):
        assert re.search(rf"^{re.escape(command)}\b", bash, flags=re.M), command
        assert (ROOT / command.split()[1]).is_file(), command


def test_readme_links_resolve_and_reach_every_part_of_the_docs():
    targets = [target for _, target in LINK.findall(README) if not target.startswith(("http://", "https://", "#"))]
    for target in targets:
        assert (ROOT / target.split("#")[0]).exists(), target
    for page in ("docs/commands.md", "docs/user_guide/index.md", "docs/pages.md", "docs/classroom.md",
                 "docs/notebooks/index.md", "docs/reproductions/index.md", "docs/performance.md",
                 "docs/ARCHITECTURE.md"):
        assert page in targets, f"the README links {page}"
