"""benchmarks/page_cost.py (issue 19) runs end to end: ``--quick`` serves the gallery with scripts/serve.sh, opens
two pages and Home in Chromium, steps and plays the stepping one, and writes its report under test-results/.

Only that it completed and produced finite numbers for every page asked is checked: it is a benchmark, and
nothing here is about how fast the pages are (the full run is ``.venv/bin/python benchmarks/page_cost.py``).
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / "benchmarks" / "page_cost.py"
OUT = REPO_ROOT / "test-results" / "page_cost"
TIMEOUT_S = 180  # about 50 s on a quiet 2-core machine; the bound only stops a run that hangs
# one page with a player and one without: every path of the script (a third page only added about 10 s)
QUICK_PAGES = ["em_playground", "data_mechanism"]
STEPPING = ["em_playground"]


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


@pytest.mark.slow
def test_page_cost_quick_run_completes_and_reports_every_page():
    t0 = time.time()
    proc = subprocess.Popen([sys.executable, str(SCRIPT), "--quick", "--pages", ",".join(QUICK_PAGES)],
                            cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        output, _ = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)  # the script stops its server on SIGTERM
        try:
            output, _ = proc.communicate(timeout=40)
        except subprocess.TimeoutExpired:
            proc.kill()
            output, _ = proc.communicate()
        pytest.fail(f"page_cost.py --quick did not finish within {TIMEOUT_S} s:\n{output[-4000:]}")
    assert proc.returncode == 0, f"page_cost.py --quick exited with {proc.returncode}:\n{output[-4000:]}"

    md, js = OUT / "page_cost.md", OUT / "page_cost.json"
    for path in (md, js):
        assert path.is_file() and path.stat().st_mtime >= t0 - 1, f"{path} was not written by this run"
    res = json.loads(js.read_text())
    assert not res.get("error"), res.get("error")
    assert res["served"]["repo"] == str(REPO_ROOT)
    assert Path(res["served"]["explorer"]).resolve().is_relative_to(REPO_ROOT)
    rows = {r["slug"]: r for r in res["pages"]}
    assert list(rows) == ["home", *QUICK_PAGES]
    for slug, row in rows.items():
        assert _finite(row["open"]["cpu_s"]) and row["open"]["cpu_s"] >= 0, (slug, row["open"])
        assert _finite(row["open"]["wall_s"]) and row["open"]["wall_s"] > 0, (slug, row["open"])
    for slug in STEPPING:
        step, play = rows[slug].get("step") or {}, rows[slug].get("play") or {}
        assert step.get("clicks"), (slug, step.get("failures"), rows[slug]["notes"])
        assert all(_finite(c["cpu_ms"]) for c in step["clicks"]), (slug, step)
        assert _finite(step["cpu_ms"]["median"]) and _finite(step["cpu_ms"]["max"]), (slug, step)
        assert _finite(play.get("cores")) and _finite(play.get("asked_ticks_per_s")), (slug, play)
    assert "step" not in rows["data_mechanism"] and "play" not in rows["data_mechanism"]  # no Step button there
    text = md.read_text()
    for slug in rows:
        assert f"| {slug} |" in text
    assert "MET" in text or "MISSED" in text
    assert res["machine"]["git_commit"] and res["machine"]["nproc"]
