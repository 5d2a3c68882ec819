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


def _readme_row(readme: str, starts: str) -> str:
    rows = [line for line in readme.splitlines() if line.startswith(starts)]
    assert len(rows) == 1, f"one README table row starting {starts!r}"
    return rows[0]


def test_readme_classroom_numbers_are_the_committed_results():
    """Issue 19: the classroom section quotes results/page_cost.json and results/load_sessions/*.json."""
    import json

    root = Path(__file__).resolve().parents[1]
    readme = (root / "README.md").read_text(encoding="utf-8")
    cost = {b["budget"]: b["value"] for b in json.loads((root / "results" / "page_cost.json").read_text())["budgets"]}
    assert f"| {cost['open: median over the pages <= 0.5 s']} (" in _readme_row(readme, "| opening a page, median")
    assert f"| {cost['Step: median over the stepping pages <= 40 ms']} (" in _readme_row(readme, "| a Step, median")

    def s(value: float) -> str:
        return f"{value:.1f} s"

    row_probe = _readme_row(readme, "| page opened in Chromium during the class")
    row_first = _readme_row(readme, "| server part of the first render")
    row_step = _readme_row(readme, "| Step click to updated plot")
    row_memory = _readme_row(readme, "| memory 60 s after everyone left")
    for name in ("full", "procs2"):
        run = json.loads((root / "results" / "load_sessions" / f"{name}.json").read_text())
        probe, first = run["probe_render"]["summary"], run["first_render"]["summary"]
        step = run["step_latency"]["summary"]
        assert f"{s(probe['p50'])} / {s(probe['p95'])}" in row_probe, name
        assert f"{s(first['p50'])} / {s(first['p95'])}" in row_first, name
        assert f"{step['p50']:.2f} s / {step['p95']:.2f} s" in row_step, name
        memory = run["memory"]
        after = memory["after_close"][-1]["rss_mb"] if isinstance(memory["after_close"], list) else None
        assert f"{after:.0f} / {memory['warm_baseline']['rss_mb']:.0f} MB" in row_memory, name
