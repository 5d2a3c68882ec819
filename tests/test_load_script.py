"""benchmarks/load_sessions.py (the classroom load test of issues 9 and 19): its pure helpers only.

No server and no browser here: the load test itself takes minutes and is run by hand
(``.venv/bin/python benchmarks/load_sessions.py``, or ``--quick`` for a smoke check).
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def load():
    spec = importlib.util.spec_from_file_location("load_sessions", REPO_ROOT / "benchmarks" / "load_sessions.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("values", [[1.0], [3.0, 1.0], [0.5, 2.0, 9.0, 4.0, 4.0], list(np.linspace(0.1, 7.3, 31))])
@pytest.mark.parametrize("q", [0, 50, 95, 100])
def test_percentile_is_numpys_linear_percentile(load, values, q):
    assert load.percentile(values, q) == pytest.approx(float(np.percentile(values, q)))


def test_percentile_and_summary_of_nothing(load):
    assert load.percentile([], 95) is None
    assert load.summarize([]) == {"n": 0, "p50": None, "p95": None, "max": None}
    s = load.summarize([1, 2, 3, 4])
    assert s["n"] == 4 and s["max"] == 4.0 and s["p50"] == pytest.approx(2.5) and s["p95"] == pytest.approx(3.85)
    with pytest.raises(ValueError):
        load.percentile([1.0], 101)


@pytest.mark.parametrize("address", ["127.0.0.1", "localhost", "LOCALHOST", "127.0.0.2", "::1", "[::1]"])
def test_loopback_addresses_are_accepted(load, address):
    assert load.check_loopback(address)


@pytest.mark.parametrize("address", ["0.0.0.0", "192.168.1.20", "10.0.0.1", "::", "example.org", "", " "])
def test_other_addresses_are_refused(load, address):
    with pytest.raises(ValueError, match="loopback"):
        load.check_loopback(address)


def test_main_refuses_a_network_address_before_starting_anything(load, monkeypatch, capsys):
    with pytest.raises(ValueError):
        load.start_server(5006, "0.0.0.0", 1, None)  # the server helper refuses too (before any Popen)
    started = []
    monkeypatch.setattr(load, "start_server", lambda *a, **k: started.append(a))
    monkeypatch.setattr(load, "run", lambda *a, **k: started.append(a))
    assert load.main(["--address", "0.0.0.0", "--quick"]) == 2
    assert started == []
    assert "loopback" in capsys.readouterr().err


def test_base_url(load):
    assert load.base_url("127.0.0.1", 5006) == "http://localhost:5006"
    assert load.base_url("::1", 5006) == "http://[::1]:5006"


def test_quick_and_full_defaults(load):
    full = load.parse_args([])
    assert (full.sessions, full.playing, full.steps, full.after_wait, full.wave) == (30, 10, 10, 60.0, 5)
    assert full.max_seconds == 600 and full.name == "full"
    assert full.out == REPO_ROOT / "results" / "load_sessions"
    quick = load.parse_args(["--quick"])
    assert (quick.sessions, quick.playing, quick.steps, quick.after_wait) == (4, 1, 3, 10.0)
    assert quick.name == "quick" and quick.out == REPO_ROOT / "test-results" / "load_sessions"  # never committed
    assert load.parse_args(["--quick", "--sessions", "6"]).sessions == 6  # explicit options win
    assert load.parse_args(["--num-procs", "2"]).num_procs == 2
    with pytest.raises(SystemExit):
        load.parse_args(["--name", "../x"])


def test_sessions_go_round_robin_and_the_checkpoints(load):
    slugs = load.session_slugs(30)
    assert slugs[:15] == list(load.PAGES) and slugs[15] == "em_playground"
    apps = sorted(p.stem for p in (REPO_ROOT / "apps").glob("*.py") if p.stem != "main")
    assert sorted(load.PAGES) == apps  # every page of the gallery is in the class
    assert sum(s in load.PLAY_PAGES for s in slugs) >= 10  # enough sessions to play 10
    assert load.after_checkpoints(60) == [15.0, 30.0, 60.0]
    assert load.after_checkpoints(10) == [10.0]
    assert load.after_checkpoints(40) == [15.0, 30.0, 40.0]


def _result(render, steps, warm=(200.0, 10), after=(210.0, 10), step_failures=(), render_failures=()):
    return {
        "name": "full", "command": ".venv/bin/python benchmarks/load_sessions.py", "date_utc": "2026-01-01T00:00:00",
        "machine": {"nproc": 2, "ram_gb": 8, "python": "3.11", "panel": "1.9", "bokeh": "3.9"},
        "settings": {"sessions": len(render), "playing": 10, "steps": len(steps), "num_procs": 1, "wave": 5,
                     "max_seconds": 600, "quick": False},
        "first_render": {"requested": len(render) + len(render_failures), "summary": {
            "n": len(render), "p50": float(np.percentile(render, 50)), "p95": float(np.percentile(render, 95)),
            "max": max(render)}, "per_page": {"em_playground": {"n": 1, "p50": 1.0, "p95": 1.0, "max": 1.0}},
            "failures": [{"slug": "benchmark", "error": e} for e in render_failures]},
        "step_latency": {"requested": len(steps) + len(step_failures), "values": steps, "failures": list(step_failures),
                         "summary": {"n": len(steps), "p50": float(np.percentile(steps, 50)),
                                     "p95": float(np.percentile(steps, 95)), "max": max(steps)}},
        "memory": {"cold_baseline": {"rss_mb": 80.0, "threads": 2},
                   "warm_baseline": {"rss_mb": warm[0], "threads": warm[1]},
                   "peak": {"rss_mb": 400.0, "threads": 30},
                   "after_close": [{"after_s": 15.0, "rss_mb": 300.0, "threads": 20},
                                   {"after_s": 60.0, "rss_mb": after[0], "threads": after[1]}]},
        "play": {"requested": 10, "started": 10, "failed": [], "restarts": 3,
                 "rate": {"asked_iter_per_s": 15.0, "real_iter_per_s": 12.0, "ticks_per_s": 4.0}},
        "sessions_open": 31, "server_log": {"path": "/tmp/x.log", "errors": 0, "warnings": 1, "excerpt": []},
    }


def test_verdicts_pass(load):
    res = _result(render=[1.0, 1.5, 2.0, 2.5], steps=[0.2, 0.3, 0.4])
    rows = {r["metric"]: r for r in load.verdicts(res)}
    assert rows["First render p95"]["status"] == "PASS"
    assert rows["Step click-to-update p95"]["status"] == "PASS"
    assert rows["Memory 60 s after closing"]["status"] == "PASS"  # +5 %: within 10 %
    assert rows["Threads after closing"]["status"] == "PASS"
    assert rows["Memory peak (all open, playing)"]["status"] == "info"
    assert "per open session" in rows["Memory peak (all open, playing)"]["note"]
    assert "80 %" in rows["Play rate (EM, while the others play)"]["note"]


def test_verdicts_say_by_how_much_a_target_is_missed(load):
    res = _result(render=[4.0, 6.0, 8.0], steps=[0.5, 2.0, 2.0], warm=(200.0, 10), after=(250.0, 13))
    rows = {r["metric"]: r for r in load.verdicts(res)}
    fr = rows["First render p95"]
    assert fr["status"] == "MISS" and "MISS by 4.80 s" in fr["note"]  # p95 7.8 s against 3 s
    st = rows["Step click-to-update p95"]
    assert st["status"] == "MISS" and "MISS by 1.50 s" in st["note"]  # p95 2 s against 0.5 s
    mem = rows["Memory 60 s after closing"]
    assert mem["status"] == "MISS" and "+25.0 %" in mem["note"] and "MISS by 15.0 points" in mem["note"]
    thr = rows["Threads after closing"]
    assert thr["status"] == "MISS" and "MISS by 3 threads" in thr["note"]


def test_a_failure_is_a_miss_even_when_the_percentile_passes(load):
    res = _result(render=[1.0, 1.0, 1.0], steps=[0.1], render_failures=["not rendered after 60 s"],
                  step_failures=["click 2: iteration 2 not shown after 30 s"])
    rows = {r["metric"]: r for r in load.verdicts(res)}
    assert rows["First render p95"]["status"] == "MISS" and "1 failed" in rows["First render p95"]["note"]
    assert rows["Step click-to-update p95"]["status"] == "MISS"


def test_nothing_measured_is_not_a_pass(load):
    rows = load.verdicts({"name": "x"})
    assert [r["status"] for r in rows if r["status"] in ("PASS", "MISS")] == []
    assert load.format_report([{"name": "x", "error": "RuntimeError: boom"}]).count("boom") == 1


def test_report_markdown_and_table(load):
    good = _result(render=[1.0, 2.0], steps=[0.2, 0.3])
    bad = dict(_result(render=[9.0, 12.0], steps=[3.0, 4.0]), name="procs2")
    bad["settings"] = dict(bad["settings"], num_procs=2)
    report = load.format_report([good, bad])
    assert report.startswith("# Classroom load test (issues 9 and 19)")
    assert load.FULL_COMMAND in report and "--num-procs 2" in report  # how to run it and to scale out
    assert "## Run `full`" in report and "## Run `procs2`" in report
    assert "| First render p95 | 1.95 s | <= 3 s | **PASS** |" in report
    assert "**MISS**" in report and "MISS by" in report
    assert "Python 3.11, panel 1.9, bokeh 3.9" in report and "2 CPUs" in report
    table = load.format_table(load.verdicts(bad))
    assert "MISS" in table and "First render p95" in table
    quick = dict(good, settings=dict(good["settings"], quick=True))
    assert "quick smoke check: not the committed numbers" in load.format_report([quick])


def test_write_results_rebuilds_the_report_from_every_run(load, tmp_path):
    load.write_results(_result(render=[1.0], steps=[0.1]), tmp_path)
    load.write_results(dict(_result(render=[1.0], steps=[0.1]), name="procs2"), tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["REPORT.md", "full.json", "procs2.json"]
    text = (tmp_path / "REPORT.md").read_text()
    assert "## Run `full`" in text and "## Run `procs2`" in text


def test_scan_log(load):
    text = ("2026 INFO WebSocket connection opened\n2026 ERROR bokeh: something broke\nTraceback (most recent call)\n"
            "2026 WARNING panel: slow\nplain line\n")
    out = load.scan_log(text)
    assert out["errors"] == 2 and out["warnings"] == 1 and len(out["excerpt"]) == 3


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc (Linux)")
def test_sampling_this_process(load):
    s = load.sample_server(os.getpid(), 1, client=True)
    assert s["rss_mb"] > 1 and s["threads"] >= 1 and s["procs"] >= 1 and os.getpid() in s["pids"]
    assert s["machine_cpu_s"] > 0


def test_protocol_student_helpers(load):
    ps = load.ProtocolStudent.__module__ and __import__("_protocol_students")
    html = '<script>const render_items=[{"token":"eyJzZXNz.aW9u-X2lk_","roots":{}}];</script>'
    assert ps.find_token(html) == "eyJzZXNz.aW9u-X2lk_"
    with pytest.raises(ValueError, match="no session token"):
        ps.find_token("<html></html>")
    doc = {"roots": [{"type": "object", "name": "Column", "id": "p1", "attributes": {"children": [
        {"type": "object", "name": "Button", "id": "p2", "attributes": {"label": "Step"}},
        {"type": "object", "name": "Toggle", "id": "p3", "attributes": {"label": "Play"}},
        {"type": "object", "name": "Button", "id": "p4", "attributes": {"label": "Reset"}}]}}]}
    assert ps.find_widgets(doc) == {"Play": "p3", "Reset": "p4"}
    assert ps.find_widgets({"roots": []}) == {}
    patch = json.dumps({"events": [
        {"kind": "ModelChanged", "model": {"id": "p9"}, "attr": "active", "new": True},
        {"kind": "ModelChanged", "model": {"id": "p3"}, "attr": "active", "new": False}]})
    assert ps.play_state_changes(patch, "p3") == [False]
    assert ps.play_state_changes(patch, "p7") == []
    frames = ps.patch_frames([ps.active_event("p3", True), ps.button_click_event("p4"), ps.document_ready_event()])
    header, meta, content = (json.loads(f) for f in frames)
    assert header["msgtype"] == "PATCH-DOC" and meta == {}
    kinds = [e["kind"] for e in content["events"]]
    assert kinds == ["ModelChanged", "MessageSent", "MessageSent"]
    assert content["events"][1]["msg_data"]["name"] == "button_click"


def test_protocol_student_events_decode_in_bokeh(load):
    """The hand-made events are what Bokeh's own serializer makes (decoded by a Bokeh document)."""
    ps = __import__("_protocol_students")
    from bokeh.document import Document
    from bokeh.models import Button, Toggle

    doc = Document()
    toggle, button = Toggle(label="Play"), Button(label="Reset")
    doc.add_root(toggle)
    doc.add_root(button)
    clicks = []
    doc.callbacks.on_message("bokeh_event", lambda event: clicks.append((event.event_name, event.model)))
    content = json.loads(ps.patch_frames([ps.active_event(toggle.id, True), ps.button_click_event(button.id)])[2])
    doc.apply_json_patch(content, setter="test")
    assert toggle.active is True
    assert clicks == [("button_click", button)]


def test_every_playing_page_s_pace_and_the_log_are_verdicts(load):
    res = _result(render=[1.0, 1.5], steps=[0.2, 0.3])
    res["settings"]["clients"] = "protocol"
    res["sessions"] = [{"slug": "em_playground", "playing": True, "pace": 0.95},
                       {"slug": "ratings", "playing": True, "pace": 0.6},
                       {"slug": "conditional", "playing": False, "pace": None}]
    res["server_log"] = {"errors": 2}
    rows = {r["metric"]: r for r in load.verdicts(res)}
    pace = rows["Pace of every playing page (protocol students)"]
    assert pace["status"] == "MISS" and pace["value"] == "60 %" and "slowest ratings" in pace["note"]
    assert rows["Server log"]["status"] == "MISS"
    res["sessions"][1]["pace"], res["server_log"]["errors"] = 0.85, 0
    rows = {r["metric"]: r for r in load.verdicts(res)}
    assert rows["Pace of every playing page (protocol students)"]["status"] == "PASS"
    assert rows["Server log"]["status"] == "PASS"


def test_protocol_students_read_the_pace_off_the_readout():
    import _protocol_students as ps

    doc = {"doc": {"roots": [{"type": "object", "name": "HTML", "id": "p1",
                              "attributes": {"text": "&lt;p&gt;Iteration: EM: 0&lt;/p&gt;"}},
                             {"type": "object", "name": "Slider", "id": "p2",
                              "attributes": {"title": "Tick period (ms)", "value": 200}}]}}
    assert ps.find_readout(doc) == ("p1", 5.0)
    content = '{"events": [{"kind": "ModelChanged", "model": {"id": "p1"}, "attr": "text", "new": "x"}]}'
    assert ps.text_changes(content, "p1") == 1 and ps.text_changes(content, "p9") == 0
    assert ps.new_texts(content, "p1") == ["x"]
    # 5 ticks/s asked; ticks every 0.25 s (80 %), with a 2 s pause (a Reset) left out
    times = [0.0, 0.25, 0.5, 0.75, 2.75, 3.0, 3.25]
    assert abs(ps.playing_pace(times, 5.0) - 0.8) < 1e-9
    assert ps.playing_pace([0.0, 1.0], 5.0) is None  # too few ticks to say
    # a Reset breaks the series: the quick changes around it are no ticks
    assert abs(ps.playing_pace([0.0, 0.25, 0.5, None, 0.55, 0.8, 1.05], 5.0) - 0.8) < 1e-9
    # ticks are read-outs whose iterations advanced (escaped HTML as Bokeh sends it); a rate note is none
    text = "&lt;p&gt;Iteration: &lt;strong&gt;EM&lt;/strong&gt;: 12 · &lt;strong&gt;naive&lt;/strong&gt;: 10&lt;/p&gt;"
    assert ps.readout_progress(text) == 22
    assert ps.readout_progress("<p>Iteration: <strong>EM</strong>: 3 (converged)</p>") == 3
    assert ps.readout_progress("<p>Playing at 2.4 ticks/s: each tick takes longer than the 200 ms</p>") is None
