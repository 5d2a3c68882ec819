"""The Python examples in the README run as written."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_python_blocks_run():
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) >= 2
    namespace: dict = {}
    for block in blocks:  # the blocks build on each other, as a reader would run them
        exec(compile(block, "README.md", "exec"), namespace)
    assert namespace["X_single"].shape == namespace["X"].shape
    assert namespace["result"].stop_reason in ("tol", "max_iter")
