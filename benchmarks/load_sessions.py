"""Classroom load test (issues 9 and 19): many browser sessions on one served gallery, on this machine only.

What it does, in order (every wait is bounded, and the whole run stops by itself after ``--max-seconds``):

1. starts ``bash scripts/serve.sh`` itself (PORT = a free port, ADDRESS = loopback only: any other address
   is refused; ``--num-procs`` is passed as NUM_PROCS), waits for ``/liveness``, samples the server's
   memory (RSS summed over its process tree) and threads: the **cold baseline**;
2. warm-up: opens one session on every page used, closes it; then (protocol students) plays every playing
   page once, all together, for 5 s and closes them; waits ``--warm-wait`` s (60): the **warm baseline**
   (the pages' modules are imported, their Play paths run and Panel's thread pool started by then; the
   memory and thread targets are judged on it);
3. opens ``--sessions`` sessions (30) round-robin over the pages, ``--wave`` at a time (5). By default
   (``--clients protocol``) they are *protocol students* (``benchmarks/_protocol_students.py``): each makes
   the requests a browser makes (the page's GET, then Bokeh's websocket protocol: the whole document, the
   ``document_ready`` event, every patch the server sends) without drawing anything, and its **first render,
   server part** is timed from the GET to the whole document received. With ``--clients browser`` they are
   Chromium pages (one browser context each, 1440x900) timed from ``goto`` to the Bokeh document idle with
   the page's plots drawn (``.bk-Canvas`` present). 60 s without that is a failure;
4. presses Play on ``--playing`` of the sessions whose page has Play (10) and keeps them playing (a run that
   ends is Reset and played again, as a student would);
5. with protocol students, times ``--probes`` **first renders in Chromium** (8: one per page, one at a time,
   each closed after) while the class is open and playing: what a student who opens a page then sees;
6. opens one **extra** EM-playground session in Chromium and times ``--steps`` Step clicks (10): click to the
   "Exact EM · iteration n+1" title; then measures the real Play rate of a playing EM session
   (iterations/s from the "Iteration: EM: n" read-out, against steps per tick x 1000 / tick period);
7. holds everything playing for ``--hold`` s, closes every browser context, and samples memory and threads
   15, 30 and 60 s later (``--after-wait``).

Peak memory / threads are sampled every 0.5 s in a thread from ``/proc`` (Linux only). Writes
``<out>/<name>.json`` and regenerates ``<out>/REPORT.md`` from every ``*.json`` in ``<out>`` (so runs with
other settings, e.g. ``--num-procs 2 --name procs2``, sit side by side), with the targets and PASS / MISS
(and by how much) next to each number. The server's log goes to a temporary file, named in the report.

Every client runs on the same machine as the server and competes with it for the CPU: run the full test on a
quiet machine (not while tests run). Thirty Chromium pages (``--clients browser``) used four times the CPU of
the server itself here, so they measured the browsers more than the server; students' browsers run on their
own computers, hence the protocol students by default and a few real pages timed beside them.

Usage::

    # the full run whose results are committed (30 sessions, 10 playing; about 6-8 minutes):
    .venv/bin/python benchmarks/load_sessions.py
    # the same with two server processes, next to it in the report:
    .venv/bin/python benchmarks/load_sessions.py --num-procs 2 --name procs2
    # a smoke check (4 sessions, 1 playing, 3 Step clicks, short waits; writes to test-results/load_sessions/):
    .venv/bin/python benchmarks/load_sessions.py --quick

Needs Debian's chromium at /usr/bin/chromium (``$EXPLORER_CHROMIUM`` overrides); never ``playwright install``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import ipaddress
import json
import math
import os
import platform
import re
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _protocol_students import Classroom, ProtocolStudent  # noqa: E402 - a sibling module of this script
CHROMIUM = os.environ.get("EXPLORER_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
VIEWPORT = {"width": 1440, "height": 900}

#: The gallery's pages (``/apps?page=<slug>``), in the round-robin order of the sessions
PAGES = ("em_playground", "conditional", "variational", "data_mechanism", "inpainting", "benchmark", "neumann",
         "performance", "responsibilities", "mar_not_enough", "decision_surface", "mechanism_gallery", "ratings",
         "sensitivity", "regression")
#: Pages with Step / Play / Pause / Reset
PLAY_PAGES = ("em_playground", "variational", "inpainting", "neumann", "responsibilities", "decision_surface",
              "ratings", "regression")

#: The targets of issue 19 (one server process)
TARGETS = {
    "first_render_p95_s": 3.0,  # a page opened in Chromium while the class plays, 95th percentile
    "step_p95_s": 0.5,  # Step click to the updated title on an extra session, 95th percentile
    "play_pace": 0.8,  # every playing page shows at least this fraction of the ticks per second it asks
    "memory_after_ratio": 1.10,  # memory after closing: within 10 % of the (warm) baseline
    "threads_after_extra": 0,  # threads after closing: back to the (warm) baseline
    "log_errors": 0,  # no traceback or error line in the server's log
}

FULL_COMMAND = ".venv/bin/python benchmarks/load_sessions.py"
QUICK_COMMAND = ".venv/bin/python benchmarks/load_sessions.py --quick"

LOAD_TIMEOUT_S = 60.0  # a session not rendered after this is a failure
STEP_TIMEOUT_S = 30.0  # a Step not shown after this is a failure (slower ones count in the percentiles)
CLICK_TIMEOUT_MS = 10_000
LIVENESS_TIMEOUT_S = 120.0
SAMPLE_EVERY_S = 0.5
AFTER_CHECKPOINTS_S = (15, 30, 60)

QUICK = dict(sessions=4, playing=1, steps=3, probes=2, after_wait=10.0, warm_wait=10.0, hold=5.0, wave=4, max_seconds=300.0)

# In every page: note when the Bokeh document is idle with at least one canvas (searched through shadow roots).
READY_SCRIPT = """
(() => {
  if (window.top !== window) return;
  const canvases = (root) => {
    let n = root.querySelectorAll('.bk-Canvas').length;
    for (const el of root.querySelectorAll('*')) if (el.shadowRoot) n += canvases(el.shadowRoot);
    return n;
  };
  window.__loadState = () => {
    const idle = !!(window.Bokeh && Bokeh.documents.length > 0 && Bokeh.documents[0].is_idle);
    return {idle: idle, canvases: canvases(document)};
  };
  const timer = setInterval(() => {
    try {
      if (window.Bokeh && Bokeh.documents.length > 0 && Bokeh.documents[0].is_idle) {
        const n = canvases(document);
        if (n > 0) {
          window.__loadReady = {t: performance.timeOrigin + performance.now(), canvases: n};
          clearInterval(timer);
        }
      }
    } catch (e) {}
  }, 50);
})();
"""

EM_TITLE = re.compile(r"Exact EM · iteration (\d+)")
EM_READOUT = re.compile(r"Iteration: EM: (\d+)( \((converged|max iter|degenerate)\))?")


# =============================================================================== pure helpers (tested)


def percentile(values, q: float) -> float | None:
    """The ``q``-th percentile (0-100) with linear interpolation (numpy's default); None when empty."""
    xs = sorted(float(v) for v in values)
    if not xs:
        return None
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} is not in [0, 100]")
    pos = (len(xs) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def summarize(values) -> dict:
    """``{"n", "p50", "p95", "max"}`` of a list of seconds (None for an empty list)."""
    values = [float(v) for v in values]
    return {"n": len(values), "p50": percentile(values, 50), "p95": percentile(values, 95),
            "max": max(values) if values else None}


def check_loopback(address: str) -> str:
    """Return ``address`` if it is a loopback address (127.0.0.0/8, ::1 or ``localhost``), else raise ValueError.

    The load test must never open the gallery to the network (the gallery has no login).
    """
    text = (address or "").strip()
    if text.lower() == "localhost":
        return "localhost"
    try:
        ip = ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        raise ValueError(f"address {address!r} is not a loopback address: the load test only listens on "
                         "127.0.0.1 / localhost / ::1") from None
    if not ip.is_loopback:
        raise ValueError(f"address {address!r} is not a loopback address: the load test only listens on "
                         "127.0.0.1 / localhost / ::1 (never on the network)")
    return str(ip)


def base_url(address: str, port: int) -> str:
    """The URL the browsers open (serve.sh's websocket origins accept ``localhost:PORT`` for 127.0.0.1)."""
    if address in ("127.0.0.1", "localhost"):
        return f"http://localhost:{port}"
    return f"http://[{address}]:{port}" if ":" in address else f"http://{address}:{port}"


def _fmt_s(value) -> str:
    return "n/a" if value is None else f"{value:.2f} s"


def _fmt_mb(value) -> str:
    return "n/a" if value is None else f"{value:.0f} MB"


def judge_upper(value, target: float, failures: int = 0, unit: str = "s") -> tuple[str, str]:
    """PASS / MISS of ``value <= target`` (any failure is a MISS), with how much it missed by."""
    if value is None:
        return ("MISS" if failures else "n/a"), (f"{failures} failed, none measured" if failures else "not measured")
    parts = []
    status = "PASS"
    if value > target:
        status = "MISS"
        parts.append(f"MISS by {value - target:.2f} {unit} ({(value / target - 1) * 100:.0f} % over the target)")
    if failures:
        status = "MISS"
        parts.append(f"{failures} failed (timed out)")
    return status, "; ".join(parts) if parts else f"{target - value:.2f} {unit} to spare"


def verdicts(res: dict) -> list[dict]:
    """The rows of the verdict table: metric, value, target, status (PASS / MISS / n/a / info), note."""
    rows = []
    protocol = (res.get("settings") or {}).get("clients", "browser") == "protocol"
    renders = [("first_render", "First render, server part p95" if protocol else "First render p95", "sessions")]
    if protocol:
        renders.append(("probe_render", "First render in Chromium p95 (probes)", "probes"))
    for key, metric, what in renders:
        fr = res.get(key, {})
        s = fr.get("summary") or {}
        status, note = judge_upper(s.get("p95"), TARGETS["first_render_p95_s"], len(fr.get("failures", [])))
        rows.append(dict(metric=metric, value=_fmt_s(s.get("p95")),
                         target=f"<= {TARGETS['first_render_p95_s']:g} s", status=status,
                         note=f"{note}; p50 {_fmt_s(s.get('p50'))}, max {_fmt_s(s.get('max'))}, "
                              f"{s.get('n', 0)} of {fr.get('requested', s.get('n', 0))} {what} rendered"))
    st = res.get("step_latency", {})
    s = st.get("summary") or {}
    status, note = judge_upper(s.get("p95"), TARGETS["step_p95_s"], len(st.get("failures", [])))
    rows.append(dict(metric="Step click-to-update p95", value=_fmt_s(s.get("p95")),
                     target=f"<= {TARGETS['step_p95_s']:g} s", status=status,
                     note=f"{note}; p50 {_fmt_s(s.get('p50'))}, max {_fmt_s(s.get('max'))}, "
                          f"{s.get('n', 0)} of {st.get('requested', s.get('n', 0))} clicks"))

    mem = res.get("memory", {})
    warm, cold, peak = mem.get("warm_baseline") or {}, mem.get("cold_baseline") or {}, mem.get("peak") or {}
    after = (mem.get("after_close") or [{}])[-1]
    base_rss, after_rss = warm.get("rss_mb"), after.get("rss_mb")
    if base_rss and after_rss is not None:
        ratio = after_rss / base_rss
        ok = ratio <= TARGETS["memory_after_ratio"]
        over = (ratio - 1) * 100
        note = (f"{over:+.1f} % vs the warm baseline {_fmt_mb(base_rss)}"
                + ("" if ok else f": MISS by {over - (TARGETS['memory_after_ratio'] - 1) * 100:.1f} points"))
        if cold.get("rss_mb"):
            note += f" ({(after_rss / cold['rss_mb'] - 1) * 100:+.0f} % vs the cold baseline {_fmt_mb(cold['rss_mb'])})"
        rows.append(dict(metric=f"Memory {after.get('after_s', '?'):g} s after closing" if after.get("after_s")
                         is not None else "Memory after closing", value=_fmt_mb(after_rss),
                         target=f"<= {TARGETS['memory_after_ratio']:.2f} x warm baseline",
                         status="PASS" if ok else "MISS", note=note))
    else:
        rows.append(dict(metric="Memory after closing", value="n/a", target="<= 1.10 x warm baseline",
                         status="n/a", note="not measured"))
    if peak.get("rss_mb") is not None:
        note = ""
        if base_rss and res.get("sessions_open"):
            note = (f"{(peak['rss_mb'] - base_rss) / res['sessions_open']:.1f} MB per open session above the warm "
                    f"baseline ({res['sessions_open']} session{'s' if res['sessions_open'] != 1 else ''})")
        rows.append(dict(metric="Memory peak (all open, playing)", value=_fmt_mb(peak["rss_mb"]), target="-",
                         status="info", note=note))

    base_thr, after_thr = warm.get("threads"), after.get("threads")
    if base_thr is not None and after_thr is not None:
        extra = after_thr - base_thr
        ok = extra <= TARGETS["threads_after_extra"]
        rows.append(dict(metric="Threads after closing", value=str(after_thr), target=f"<= warm baseline {base_thr}",
                         status="PASS" if ok else "MISS",
                         note=("back to the baseline" if extra == 0 else f"{-extra} below the baseline") if ok
                         else f"MISS by {extra} thread{'s' if extra != 1 else ''}"
                              + (f" (cold baseline {cold['threads']})" if cold.get("threads") is not None else "")))
    else:
        rows.append(dict(metric="Threads after closing", value="n/a", target="<= warm baseline", status="n/a",
                         note="not measured"))
    if peak.get("threads") is not None:
        rows.append(dict(metric="Threads peak", value=str(peak["threads"]), target="-", status="info", note=""))

    play = res.get("play", {})
    rate = play.get("rate") or {}
    if rate.get("real_iter_per_s") is not None:
        asked = rate.get("asked_iter_per_s")
        frac = rate["real_iter_per_s"] / asked if asked else None
        rows.append(dict(metric="Play rate (EM, while the others play)", value=f"{rate['real_iter_per_s']:.1f} it/s",
                         target=f"asked {asked:.1f} it/s" if asked else "-", status="info",
                         note=(f"{frac * 100:.0f} % of the pace asked" if frac is not None else "")
                         + (f"; {rate['ticks_per_s']:.1f} ticks/s" if rate.get("ticks_per_s") else "")))
    else:
        rows.append(dict(metric="Play rate (EM)", value="n/a", target="-", status="info",
                         note=rate.get("error", "not measured")))
    paces = [(s.get("slug"), s["pace"]) for s in res.get("sessions", []) if s.get("playing") and s.get("pace")]
    if paces:
        slowest = min(paces, key=lambda x: x[1])
        ok = slowest[1] >= TARGETS["play_pace"]
        by_page: dict = {}
        for slug, pace in paces:
            by_page.setdefault(slug, []).append(pace)
        rows.append(dict(metric="Pace of every playing page (protocol students)", value=f"{slowest[1] * 100:.0f} %",
                         target=f">= {TARGETS['play_pace'] * 100:.0f} % of the asked ticks/s", status="PASS" if ok
                         else "MISS", note=f"slowest {slowest[0]}; " + ", ".join(
                             f"{slug} {min(v) * 100:.0f} %" for slug, v in sorted(by_page.items()))))
    elif protocol:
        rows.append(dict(metric="Pace of every playing page (protocol students)", value="n/a",
                         target=f">= {TARGETS['play_pace'] * 100:.0f} %", status="n/a", note="not measured"))
    log_info = res.get("server_log") or {}
    if "errors" in log_info:
        n_err = int(log_info.get("errors") or 0)
        rows.append(dict(metric="Server log", value=f"{n_err} error / traceback lines", target="none",
                         status="PASS" if n_err <= TARGETS["log_errors"] else "MISS",
                         note="see the log excerpt below" if n_err else ""))
    rows.append(dict(metric="Sessions playing", value=f"{play.get('started', 0)} of {play.get('requested', 0)}",
                     target="-", status="info" if play.get("started", 0) >= play.get("requested", 0) else "MISS",
                     note=f"{play.get('restarts', 0)} finished runs Reset and played again"
                          + (f"; failed: {'; '.join(play['failed'])}" if play.get("failed") else "")))
    return rows


def format_table(rows: list[dict]) -> str:
    """Plain-text table of ``verdicts`` for the console."""
    head = ("metric", "value", "target", "status", "note")
    cols = [[r[k] for r in rows] for k in head[:4]]
    widths = [max(len(h), *(len(str(c)) for c in col)) for h, col in zip(head, cols)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head[:4], widths)) + "  note"]
    lines.append("  ".join("-" * w for w in widths) + "  ----")
    for r in rows:
        lines.append("  ".join(str(r[k]).ljust(w) for k, w in zip(head[:4], widths)) + "  " + r["note"])
    return "\n".join(lines)


def _md_escape(text) -> str:
    return str(text).replace("|", "\\|")


def format_run_markdown(res: dict) -> str:
    """One run's section of REPORT.md."""
    m = res.get("machine", {})
    st = res.get("settings", {})
    out = [f"## Run `{res.get('name', '?')}`" + (" (quick smoke check: not the committed numbers)"
                                                 if st.get("quick") else ""), ""]
    out.append(f"Command: `{res.get('command', '?')}`  ")
    out.append(f"Date (UTC): {res.get('date_utc', '?')}; elapsed {res.get('elapsed_s', 0):.0f} s of a "
               f"{st.get('max_seconds', '?')} s budget  ")
    out.append(f"Machine: {m.get('nproc', '?')} CPUs ({m.get('cpu_model', '?')}), {m.get('ram_gb', '?')} GB RAM, "
               f"load average {m.get('loadavg_start', '?')} at the start and {m.get('loadavg_end', '?')} at the end  ")
    out.append(f"Software: Python {m.get('python', '?')}, panel {m.get('panel', '?')}, bokeh {m.get('bokeh', '?')}, "
               f"playwright {m.get('playwright', '?')}, chromium {m.get('chromium', '?')}; "
               f"explorer at {m.get('git_commit', '?')}{' (working tree modified)' if m.get('git_dirty') else ''}  ")
    clients = st.get("clients", "browser")
    out.append(f"Load: {st.get('sessions', '?')} sessions "
               + ("(protocol students: no browser) " if clients == "protocol" else "(Chromium pages) ")
               + f"in waves of {st.get('wave', '?')}, {st.get('playing', '?')} playing, "
               + (f"{st.get('probes', '?')} Chromium probes, " if clients == "protocol" else "")
               + f"1 extra EM session in Chromium with {st.get('steps', '?')} Step clicks, "
               f"server processes (NUM_PROCS): {st.get('num_procs', '?')}; every client ran on the same machine")
    out.append("")
    if res.get("cut"):
        out.append("**Cut short:** " + "; ".join(res["cut"]))
        out.append("")
    if res.get("error"):
        out.append(f"**The run stopped with an error:** `{_md_escape(res['error'])}`")
        out.append("")
    out += ["| metric | value | target | status | note |", "|---|---|---|---|---|"]
    for r in verdicts(res):
        status = f"**{r['status']}**" if r["status"] in ("PASS", "MISS") else r["status"]
        out.append(f"| {r['metric']} | {r['value']} | {_md_escape(r['target'])} | {status} | {_md_escape(r['note'])} |")
    out.append("")

    titles = {"first_render": "First render per page, server part (s; GET to the whole document received):"
              if clients == "protocol" else "First render per page (s):",
              "probe_render": "First render in Chromium per page, while the class is open and playing (s):"}
    for key, title in titles.items():
        per_page = (res.get(key) or {}).get("per_page") or {}
        if not per_page:
            continue
        out += [title, "", "| page | n | p50 | p95 | max | failed |", "|---|---|---|---|---|---|"]
        fails = {}
        for f in (res.get(key) or {}).get("failures", []):
            fails[f.get("slug")] = fails.get(f.get("slug"), 0) + 1
        for slug, s in per_page.items():
            cells = ["-" if s.get(k) is None else f"{s[k]:.2f}" for k in ("p50", "p95", "max")]
            out.append(f"| {slug} | {s.get('n', 0)} | {' | '.join(cells)} | {fails.get(slug, 0)} |")
        out.append("")
    warmup = res.get("warmup") or []
    if warmup:
        out.append("Warm-up (one session per page, before the load): " + ", ".join(
            f"{w['slug']} {_fmt_s(w.get('first_render_s'))}" + (" FAILED" if w.get("error") else "") for w in warmup))
        out.append("")
    extra = res.get("extra_session") or {}
    if extra:
        out.append(f"Extra EM session (opened while the others played): first render "
                   f"{_fmt_s(extra.get('first_render_s'))}" + (f", error: {extra['error']}" if extra.get("error") else ""))
        out.append("")

    mem = res.get("memory") or {}
    rows = [("cold baseline (right after /liveness)", mem.get("cold_baseline")),
            ("warm baseline (every page opened once and every playing page played once, closed, waited)", mem.get("warm_baseline")),
            ("peak while open and playing", mem.get("peak"))]
    rows += [(f"{a.get('after_s', 0):g} s after closing every session", a) for a in mem.get("after_close") or []]
    if any(r for _, r in rows):
        out += ["Server memory and threads (summed over the server's process tree):", "",
                "| when | RSS | PSS | threads | processes | connections |", "|---|---|---|---|---|---|"]
        for label, r in rows:
            if r:
                out.append(f"| {label} | {_fmt_mb(r.get('rss_mb'))} | {_fmt_mb(r.get('pss_mb'))} | "
                           f"{r.get('threads', 'n/a')} | {r.get('procs', 'n/a')} | {r.get('conns', 'n/a')} |")
        out.append("")
    cpu = res.get("server_cpu") or {}
    if cpu.get("load_cores") is not None:
        line = (f"CPU while the sessions were open (average cores of {m.get('nproc', '?')}): server "
                f"{cpu['load_cores']:.2f}")
        if cpu.get("browser_cores") is not None:
            line += f", clients (protocol students, browsers, driver) {cpu['browser_cores']:.2f}"
        if cpu.get("machine_cores") is not None:
            line += f", whole machine {cpu['machine_cores']:.2f} (the rest is other work on the machine)"
        if cpu.get("browser_pss_peak_mb"):
            line += f"; the clients used up to {cpu['browser_pss_peak_mb']:.0f} MB (PSS)"
        out += [line + ".", ""]
    rate = (res.get("play") or {}).get("rate") or {}
    if rate:
        out.append("Play rate: " + ", ".join(f"{k} = {v if not isinstance(v, float) else round(v, 2)}"
                                             for k, v in rate.items() if k != "samples"))
        out.append("")
    log = res.get("server_log") or {}
    if log:
        out.append(f"Server log ({log.get('path', '?')}): {log.get('errors', 0)} error / traceback lines, "
                   f"{log.get('warnings', 0)} warnings.")
        for line in log.get("excerpt", [])[:10]:
            out.append(f"    {line}")
        out.append("")
    berr = res.get("browser_errors") or []
    if berr:
        out.append(f"Browser-side errors ({len(berr)}; first ones):")
        for line in berr[:10]:
            out.append(f"    {line[:300]}")
        out.append("")
    return "\n".join(out)


def format_report(runs: list[dict]) -> str:
    """REPORT.md: how to run, the targets, then one section per run."""
    out = ["# Classroom load test (issues 9 and 19)", "",
           "Generated by `benchmarks/load_sessions.py` (do not edit by hand: every run rewrites this file from the "
           "`*.json` next to it).", "",
           "Full run (the numbers to commit; on a quiet machine, about 6-8 minutes):", "",
           f"    {FULL_COMMAND}", "",
           "Scaling out (N server processes, each with its own memory):", "",
           f"    {FULL_COMMAND} --num-procs 2 --name procs2", "",
           f"Smoke check (`{QUICK_COMMAND}`) writes to test-results/load_sessions/ instead.", "",
           "Targets (issue 19, one server process): a page opened in Chromium while the class plays, p95 <= 3 s; "
           "Step click-to-update p95 <= 0.5 s on an extra EM session while the others play; every playing page at "
           ">= 80 % of the ticks per second it asks (read off each protocol student's Play read-out, Reset pauses "
           "left out); server memory (RSS of the process tree) 60 s after closing every session within 10 % of "
           "the warm baseline; threads back to the warm baseline; no error or traceback in the server's log. The "
           "cold baseline (right after start, before any page module is imported) is shown too.", "",
           "How the class is simulated: by default the 30 sessions are *protocol students* "
           "(`benchmarks/_protocol_students.py`): each makes the requests a browser makes (the page's GET, then "
           "Bokeh's websocket protocol: the document, `document_ready`, Play and Reset, every patch of a playing "
           "page) but draws nothing. Their first render, *server part*, runs from the GET to the whole document "
           "received. Real pages are timed in Chromium beside them: a *probe* per page (opened one at a "
           "time while the class is on; from `goto` to the Bokeh document idle with the plots drawn) and the extra "
           "EM session (Step clicks, Play rate). Thirty Chromium tabs on this 2-core machine used four times the "
           "CPU of the server itself (an earlier run with `--clients browser`), so they measured the browsers; "
           "students' browsers run on their own computers.", "",
           "Reading the numbers: every client runs on the same machine as the server (their CPU is reported), so "
           "the Chromium probes also pay for their own rendering. Threads above the warm baseline after closing "
           "may be Panel's thread pool (`--num-threads 4` in serve.sh), which starts its threads on demand and "
           "keeps them, or per-session threads that did not stop: the timeline in the JSON shows when they "
           "appeared.", ""]
    if not runs:
        out.append("No run yet.")
    for res in runs:
        out += [format_run_markdown(res), ""]
    return "\n".join(out).rstrip() + "\n"


def scan_log(text: str, limit: int = 30) -> dict:
    """Count error and warning lines of the server's log; keep the first ``limit`` of them."""
    errors = warnings = 0
    excerpt = []
    for line in text.splitlines():
        low = line.lower()
        if "traceback" in low or " error" in low or low.startswith("error") or "exception" in low:
            errors += 1
        elif "warn" in low:
            warnings += 1
        else:
            continue
        if len(excerpt) < limit:
            excerpt.append(line.rstrip()[:300])
    return {"errors": errors, "warnings": warnings, "excerpt": excerpt}


def after_checkpoints(after_wait: float) -> list[float]:
    """Seconds after closing at which memory is read: 15, 30, 60 below ``after_wait``, and ``after_wait``."""
    return sorted({float(c) for c in AFTER_CHECKPOINTS_S if c < after_wait} | {float(after_wait)})


def session_slugs(n: int) -> list[str]:
    """The page of each of ``n`` sessions (round-robin over :data:`PAGES`)."""
    return [PAGES[i % len(PAGES)] for i in range(n)]


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=f"Full run: {FULL_COMMAND}\nSmoke check: {QUICK_COMMAND}")
    ap.add_argument("--quick", action="store_true",
                    help="smoke check: 4 sessions, 1 playing, 3 Step clicks, 10 s waits (explicit options win)")
    ap.add_argument("--sessions", type=int, help="sessions to open (default 30)")
    ap.add_argument("--clients", choices=("protocol", "browser"), default="protocol",
                    help="what the sessions are: protocol students without a browser (default) or Chromium pages")
    ap.add_argument("--probes", type=int,
                    help="with protocol students: first renders timed in Chromium during the load (default 8)")
    ap.add_argument("--playing", type=int, help="sessions to Play (default 10)")
    ap.add_argument("--steps", type=int, help="Step clicks timed on the extra session (default 10)")
    ap.add_argument("--wave", type=int, help="sessions opened at a time (default 5)")
    ap.add_argument("--hold", type=float, help="seconds everything stays open and playing after the measures (30)")
    ap.add_argument("--warm-wait", type=float, help="seconds between the warm-up and the warm baseline (60)")
    ap.add_argument("--after-wait", type=float, help="seconds of sampling after closing (60; read at 15, 30, 60)")
    ap.add_argument("--rate-seconds", type=float, default=5.0, help="seconds the Play rate is observed (5)")
    ap.add_argument("--max-seconds", type=float, help="overall time budget; the run stops by itself (600)")
    ap.add_argument("--num-procs", type=int, default=1, help="server processes (NUM_PROCS of serve.sh; default 1)")
    ap.add_argument("--address", default="127.0.0.1", help="loopback address to listen on (anything else is refused)")
    ap.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    ap.add_argument("--name", help="results name: <out>/<name>.json (default 'full', or 'quick' with --quick)")
    ap.add_argument("--out", type=Path,
                    help="output folder (default results/load_sessions, or test-results/load_sessions with --quick)")
    return ap


def parse_args(argv=None) -> argparse.Namespace:
    """Parse the command line and fill the defaults (``--quick`` changes them; explicit options win)."""
    args = build_parser().parse_args(argv)
    defaults = dict(sessions=30, playing=10, steps=10, probes=len(PAGES), after_wait=60.0, warm_wait=60.0, hold=30.0, wave=5,
                    max_seconds=600.0)
    if args.quick:
        defaults.update(QUICK)
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    args.name = args.name or ("quick" if args.quick else "full")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", args.name):
        raise SystemExit(f"--name {args.name!r}: use letters, digits, '_', '-', '.'")
    if args.out is None:
        args.out = ROOT / ("test-results" if args.quick else "results") / "load_sessions"
    for key in ("sessions", "wave", "num_procs"):
        if getattr(args, key) < 1:
            raise SystemExit(f"--{key.replace('_', '-')} must be >= 1")
    for key in ("playing", "steps", "probes"):
        if getattr(args, key) < 0:
            raise SystemExit(f"--{key} must be >= 0")
    return args


# =============================================================================== the server and /proc


def free_port(address: str = "127.0.0.1") -> int:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family) as s:
        s.bind(("127.0.0.1" if address == "localhost" else address, 0))
        return s.getsockname()[1]


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rfind(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    return children


def _tree(children: dict[int, list[int]], root: int) -> list[int]:
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def process_tree(root: int) -> list[int]:
    """``root`` and all its descendants (from /proc)."""
    return _tree(_children_map(), root)


def machine_cpu_s() -> float:
    """CPU seconds the whole machine spent busy (all cores, from /proc/stat)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _status(pid: int) -> dict:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "Threads"):
            fields[key] = int(value.split()[0])
    return fields


def _pss_kb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _cpu_s(pid: int) -> float:
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rfind(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def established_connections(port: int) -> int:
    """Established TCP connections whose local port is ``port`` (the server's side of every connection)."""
    n = 0
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            if parts[3] == "01" and int(parts[1].rsplit(":", 1)[1], 16) == port:
                n += 1
    return n


def _sum_procs(pids) -> dict:
    rss = pss = threads = 0
    cpu = 0.0
    alive = []
    for pid in pids:
        try:
            st = _status(pid)
            cpu += _cpu_s(pid)
        except (OSError, ValueError, IndexError):
            continue  # the process ended meanwhile
        alive.append(pid)
        rss += st.get("VmRSS", 0)
        threads += st.get("Threads", 0)
        pss += _pss_kb(pid) or 0
    return {"rss_mb": rss / 1024, "pss_mb": pss / 1024, "threads": threads, "cpu_s": cpu, "pids": alive}


def sample_server(root: int, port: int, client: bool = False) -> dict:
    """RSS / PSS (MB), threads and CPU seconds summed over the server's process tree, and its connections.

    With ``client``: also the CPU seconds and RSS of this script's other processes (the Playwright driver and
    the browsers, which compete with the server for the CPU) and of the whole machine.
    """
    children = _children_map()
    server_pids = _tree(children, root)
    out = _sum_procs(server_pids)
    out.update(t=time.monotonic(), procs=len(out["pids"]), conns=established_connections(port))
    if client:
        others = [p for p in _tree(children, os.getpid()) if p not in set(server_pids)]
        c = _sum_procs(others)
        out.update(client_cpu_s=c["cpu_s"], client_pss_mb=c["pss_mb"], machine_cpu_s=machine_cpu_s())
    return out


def steady_sample(root: int, port: int, n: int = 5, every: float = 0.4) -> dict:
    """The median of ``n`` samples ``every`` s apart (threads and processes: the last sample)."""
    samples = []
    for i in range(n):
        samples.append(sample_server(root, port))
        if i < n - 1:
            time.sleep(every)
    last = samples[-1]
    return {"rss_mb": statistics.median(s["rss_mb"] for s in samples),
            "pss_mb": statistics.median(s["pss_mb"] for s in samples),
            "threads": last["threads"], "procs": last["procs"], "conns": last["conns"]}


class Sampler(threading.Thread):
    """Samples the server every :data:`SAMPLE_EVERY_S` s; keeps a timeline labelled with the current phase."""

    def __init__(self, root: int, port: int, t0: float):
        super().__init__(daemon=True, name="load-sampler")
        self.root, self.port, self.t0 = root, port, t0
        self.phase = "start"
        self.timeline: list[dict] = []
        self.last_pids: list[int] = []
        self._stop = threading.Event()

    def run(self):
        while not self._stop.is_set():
            try:
                s = sample_server(self.root, self.port, client=True)
                self.last_pids = s.pop("pids")
                s["t"] = round(s["t"] - self.t0, 2)
                s["phase"] = self.phase
                self.timeline.append(s)
            except Exception:  # noqa: BLE001 - sampling must never stop the run
                pass
            self._stop.wait(SAMPLE_EVERY_S)

    def stop(self):
        self._stop.set()

    def peak(self, phases) -> dict:
        rows = [s for s in self.timeline if s["phase"] in phases]
        if not rows:
            return {}
        top = max(rows, key=lambda s: s["rss_mb"])
        return {"rss_mb": top["rss_mb"], "pss_mb": max(s["pss_mb"] for s in rows),
                "threads": max(s["threads"] for s in rows), "procs": max(s["procs"] for s in rows),
                "conns": max(s["conns"] for s in rows), "t": top["t"]}

    def cpu_cores(self, phases, key: str = "cpu_s") -> float | None:
        """Average cores used during ``phases`` by the server (``cpu_s``), the browsers (``client_cpu_s``) or the
        whole machine (``machine_cpu_s``)."""
        rows = [s for s in self.timeline if s["phase"] in phases and key in s]
        if len(rows) < 2 or rows[-1]["t"] <= rows[0]["t"]:
            return None
        # the sum of the increases: a process that exits takes its CPU seconds with it
        used = sum(max(0.0, b[key] - a[key]) for a, b in zip(rows, rows[1:]))
        return used / (rows[-1]["t"] - rows[0]["t"])


def start_server(port: int, address: str, num_procs: int, log_file) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in ("ORIGIN",)}
    env.update(PORT=str(port), ADDRESS=check_loopback(address), NUM_PROCS=str(num_procs))
    return subprocess.Popen(["bash", "scripts/serve.sh"], cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                            stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True)


def wait_liveness(url: str, proc: subprocess.Popen, timeout_s: float) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with code {proc.returncode} before answering /liveness")
        try:
            with urllib.request.urlopen(f"{url}/liveness", timeout=3) as resp:
                if resp.status == 200:
                    return time.monotonic() - t0
        except OSError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"/liveness did not answer within {timeout_s:.0f} s")


def stop_server(proc: subprocess.Popen, extra_pids=()) -> None:
    """SIGTERM the server's process group, SIGKILL after 20 s; then any leftover process of its tree."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=10)
    for pid in extra_pids:  # e.g. a worker that left the group
        if pid != proc.pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def machine_info() -> dict:
    info = {"nproc": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}
    try:
        info["nproc_usable"] = len(os.sched_getaffinity(0))
    except AttributeError:
        pass
    try:
        mem = Path("/proc/meminfo").read_text()
        info["ram_gb"] = round(int(re.search(r"MemTotal:\s+(\d+)", mem).group(1)) / 1024 ** 2, 1)
        model = re.search(r"model name\s*:\s*(.+)", Path("/proc/cpuinfo").read_text())
        info["cpu_model"] = model.group(1).strip() if model else "?"
    except (OSError, AttributeError):
        pass
    info["loadavg_start"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    for mod in ("panel", "bokeh", "playwright"):
        try:
            from importlib.metadata import version

            info[mod] = version(mod)
        except Exception:  # noqa: BLE001
            info[mod] = "?"
    try:
        info["git_commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                            text=True, timeout=10).stdout.strip()
        info["git_dirty"] = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                                                capture_output=True, text=True, timeout=10).stdout.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    return info


# =============================================================================== the browser side


class Session:
    """One student: a browser context with one page on ``slug``."""

    def __init__(self, index: int, slug: str):
        self.index, self.slug = index, slug
        self.context = self.page = None
        self.t_goto_wall = None
        self.t_goto = None
        self.first_render_s = None
        self.canvases = None
        self.error = None
        self.cut = False
        self.playing = False
        self.restarts = 0
        self.browser_errors: list[str] = []

    def record(self) -> dict:
        return {"index": self.index, "slug": self.slug, "first_render_s": self.first_render_s,
                "canvases": self.canvases, "error": self.error, "cut": self.cut, "playing": self.playing, "restarts": self.restarts,
                "browser_errors": len(self.browser_errors)}


def _new_session(browser, index: int, slug: str) -> Session:
    s = Session(index, slug)
    s.context = browser.new_context(viewport=VIEWPORT)
    s.context.set_default_timeout(LOAD_TIMEOUT_S * 1000)
    s.context.set_default_navigation_timeout(LOAD_TIMEOUT_S * 1000)
    s.context.add_init_script(READY_SCRIPT)
    s.page = s.context.new_page()
    s.page.on("pageerror", lambda exc, s=s: s.browser_errors.append(f"{s.slug}#{s.index} pageerror: {exc}"))
    s.page.on("console", lambda msg, s=s: s.browser_errors.append(f"{s.slug}#{s.index} console.error: {msg.text}")
              if msg.type == "error" else None)
    return s


def _who(s: Session) -> str:
    kind = 'warm-up' if s.index < 0 else ('probe' if s.index >= 1000 else f'session {s.index:2d}')
    return f"{kind} {s.slug:<17}"


def open_wave(browser, base: str, todo: list[tuple[int, str]], deadline: float, log) -> list[Session]:
    """Open the sessions of one wave together; return them when each is rendered or has timed out."""
    sessions = []
    for index, slug in todo:
        s = _new_session(browser, index, slug)
        sessions.append(s)
        s.t_goto_wall = time.time()
        s.t_goto = time.monotonic()
        try:
            s.page.goto(f"{base}/apps?page={slug}", wait_until="commit", timeout=LOAD_TIMEOUT_S * 1000)
        except Exception as exc:  # noqa: BLE001
            s.error = f"goto: {str(exc).splitlines()[0][:200]}"
    pending = [s for s in sessions if s.error is None]
    while pending:
        now = time.monotonic()
        for s in list(pending):
            try:
                ready = s.page.evaluate("() => window.__loadReady || null")
            except Exception as exc:  # noqa: BLE001 - e.g. a navigation in progress
                ready, err = None, str(exc).splitlines()[0][:200]
            else:
                err = None
            if ready:
                s.first_render_s = ready["t"] / 1000.0 - s.t_goto_wall
                if not 0 < s.first_render_s < LOAD_TIMEOUT_S * 2:  # clocks disagree: the driver's view
                    s.first_render_s = time.monotonic() - s.t_goto
                s.canvases = ready["canvases"]
                pending.remove(s)
                log(f"  {_who(s)} first render {s.first_render_s:6.2f} s "
                    f"({s.canvases} canvases)")
            elif now - s.t_goto > LOAD_TIMEOUT_S or now > deadline:
                s.cut = now - s.t_goto <= LOAD_TIMEOUT_S  # stopped by the time budget, not timed out
                try:
                    state = s.page.evaluate("() => window.__loadState ? window.__loadState() : null")
                except Exception:  # noqa: BLE001
                    state = None
                s.error = (("cut by the time budget: " if s.cut else "")
                           + f"not rendered after {now - s.t_goto:.0f} s (document idle: "
                           f"{state and state.get('idle')}, canvases: {state and state.get('canvases')})"
                           + (f"; {err}" if err else ""))
                pending.remove(s)
                log(f"  {_who(s)} FAILED: {s.error}")
        if pending:
            time.sleep(0.2)
    return sessions


def _button(page, name: str):
    return page.get_by_role("button", name=name, exact=True)


def click_play(s: Session) -> None:
    _button(s.page, "Play").click(timeout=CLICK_TIMEOUT_MS)
    _button(s.page, "Pause").wait_for(timeout=CLICK_TIMEOUT_MS)
    s.playing = True


def keep_playing(sessions: list[Session]) -> None:
    """A playing session whose run ended (Play shown again) is Reset and played again."""
    for s in sessions:
        if not s.playing:
            continue
        try:
            if _button(s.page, "Play").count() and not _button(s.page, "Pause").count():
                _button(s.page, "Reset").click(timeout=CLICK_TIMEOUT_MS)
                click_play(s)
                s.restarts += 1
        except Exception as exc:  # noqa: BLE001
            s.browser_errors.append(f"{s.slug}#{s.index} keep playing: {str(exc).splitlines()[0][:200]}")


def em_iteration(page) -> int:
    """Exact EM's iteration from its title "Exact EM · iteration n · log-lik. ..."."""
    text = page.get_by_text(EM_TITLE).first.inner_text(timeout=CLICK_TIMEOUT_MS)
    m = EM_TITLE.search(text)
    if m is None:
        raise ValueError(f"unexpected EM title {text[:120]!r}")
    return int(m.group(1))


def em_readout(page) -> tuple[int, bool, str]:
    """(exact EM's iteration, whether its run has ended, the read-out text) from "Iteration: EM: n ..."."""
    text = page.get_by_text("Iteration: EM:", exact=False).first.inner_text(timeout=CLICK_TIMEOUT_MS)
    m = EM_READOUT.search(text)
    if m is None:
        raise ValueError(f"unexpected read-out {text[:120]!r}")
    return int(m.group(1)), bool(m.group(2)), text


def measure_steps(s: Session, k: int, others: list[Session], deadline: float,
                  log) -> tuple[list[float], list[str], list[float]]:
    """Time ``k`` Step clicks on the EM page: click to "Exact EM · iteration n+1" on the page."""
    latencies, failures, click_times = [], [], []
    page = s.page
    try:  # the runs start with the page; wait for their read-out before the first click
        page.get_by_text(re.compile(r"Iteration: EM: \d+")).first.wait_for(timeout=LOAD_TIMEOUT_S * 1000)
    except Exception as exc:  # noqa: BLE001
        return [], [f"no EM read-out: {str(exc).splitlines()[0][:200]}"], []
    for i in range(k):
        if time.monotonic() > deadline:
            failures.append(f"click {i + 1}: skipped (time budget)")
            break
        keep_playing(others)
        try:
            _, ended, _ = em_readout(page)
            if ended:
                _button(page, "Reset").click(timeout=CLICK_TIMEOUT_MS)
                page.get_by_text(re.compile(r"Exact EM · iteration 0\b")).first.wait_for(timeout=CLICK_TIMEOUT_MS)
            n = em_iteration(page)
            target = page.get_by_text(re.compile(rf"Exact EM · iteration {n + 1}\b")).first
            t0 = time.perf_counter()
            _button(page, "Step").click(timeout=CLICK_TIMEOUT_MS)
            clicked = time.perf_counter() - t0
            try:
                target.wait_for(timeout=STEP_TIMEOUT_S * 1000)
            except Exception:  # noqa: BLE001 - say what the page shows instead
                now = em_iteration(page)
                raise RuntimeError(f"iteration {n + 1} not shown after {STEP_TIMEOUT_S:g} s "
                                   f"(the title says {now})") from None
            latencies.append(time.perf_counter() - t0)
            click_times.append(clicked)
            log(f"  Step {i + 1}/{k}: iteration {n} -> {n + 1} in {latencies[-1]:.3f} s "
                f"(the click itself {clicked:.3f} s)")
        except Exception as exc:  # noqa: BLE001
            failures.append(f"click {i + 1}: {str(exc).splitlines()[0][:200]}")
            log(f"  Step {i + 1}/{k}: FAILED {failures[-1]}")
        time.sleep(0.5)  # a student's pace
    return latencies, failures, click_times


def _slider_value(page, label: str) -> int | None:
    try:
        text = page.get_by_text(label, exact=False).first.inner_text(timeout=CLICK_TIMEOUT_MS)
        return int(re.search(rf"{re.escape(label)}\s*:?\s*(\d+)", text).group(1))
    except Exception:  # noqa: BLE001
        return None


def measure_play_rate(s: Session, seconds: float) -> dict:
    """Iterations/s of a playing EM page (Reset and played again first), from its "Iteration: EM: n" read-out."""
    page = s.page
    period = _slider_value(page, "Tick period (ms)")
    per_tick = _slider_value(page, "Steps per tick")
    out = {"tick_period_ms": period, "steps_per_tick": per_tick,
           "asked_iter_per_s": per_tick * 1000.0 / period if period and per_tick else None,
           "asked_ticks_per_s": 1000.0 / period if period else None, "session": f"{s.slug}#{s.index}"}
    was_playing = s.playing
    s.playing = False  # keep_playing must leave it alone while measured
    try:
        if _button(page, "Pause").count():
            _button(page, "Pause").click(timeout=CLICK_TIMEOUT_MS)
            _button(page, "Play").wait_for(timeout=CLICK_TIMEOUT_MS)
        _button(page, "Reset").click(timeout=CLICK_TIMEOUT_MS)
        page.get_by_text(re.compile(r"Iteration: EM: 0\b")).first.wait_for(timeout=CLICK_TIMEOUT_MS)
        _button(page, "Play").click(timeout=CLICK_TIMEOUT_MS)
        _button(page, "Pause").wait_for(timeout=CLICK_TIMEOUT_MS)
        changes, last, ended, note = [], None, False, ""
        t_end = time.monotonic() + seconds
        while time.monotonic() < t_end:
            it, ended, text = em_readout(page)
            if it != last:
                changes.append((time.monotonic(), it))
                last = it
            m = re.search(r"Playing at ([\d.]+) ticks/s", text)
            if m:
                note = m.group(0)
            if ended:
                break
            time.sleep(0.1)
        out["samples"] = len(changes)
        out["ended_early"] = ended
        if note:
            out["app_says"] = note
        if len(changes) >= 3 and changes[-1][0] > changes[1][0]:
            # from the first change seen after the start (the first value may be an old one)
            (t1, i1), (t2, i2) = changes[1], changes[-1]
            out["real_iter_per_s"] = (i2 - i1) / (t2 - t1)
            out["ticks_per_s"] = (len(changes) - 2) / (t2 - t1)
            out["observed_s"] = t2 - t1
        else:
            out["error"] = f"only {len(changes)} read-out changes in {seconds:.0f} s"
    except Exception as exc:  # noqa: BLE001
        out["error"] = str(exc).splitlines()[0][:200]
    finally:
        s.playing = was_playing
        if was_playing:
            keep_playing([s])
        elif _safe_count(page, "Pause"):
            _button(page, "Pause").click(timeout=CLICK_TIMEOUT_MS)
    return out


def _safe_count(page, name: str) -> int:
    try:
        return _button(page, name).count()
    except Exception:  # noqa: BLE001
        return 0


def hold(sessions: list[Session], seconds: float, deadline: float) -> None:
    t_end = min(time.monotonic() + seconds, deadline)
    while time.monotonic() < t_end:
        keep_playing(sessions)
        time.sleep(min(2.0, max(0.0, t_end - time.monotonic())))


# =============================================================================== the run


def _watchdog(deadline_s: float, proc_holder: dict) -> None:
    """Past the budget (+90 s grace) interrupt the main thread; 30 s later kill the server and exit."""
    def run():
        time.sleep(max(0.0, deadline_s - time.monotonic()) + 90)
        print("!! load test: over its time budget, interrupting", file=sys.stderr, flush=True)
        import _thread

        _thread.interrupt_main()
        time.sleep(30)
        proc = proc_holder.get("proc")
        if proc is not None:
            stop_server(proc, proc_holder.get("pids", ()))
        print("!! load test: killed after its time budget", file=sys.stderr, flush=True)
        os._exit(3)

    threading.Thread(target=run, daemon=True, name="load-watchdog").start()


def run(args) -> dict:
    address = check_loopback(args.address)
    if not Path("/proc/self/status").exists():
        raise SystemExit("this load test reads the server's memory from /proc (Linux only)")
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        raise SystemExit(f"chromium not found at {CHROMIUM}: apt-get install -y chromium (never `playwright install`)")
    t_start = time.monotonic()
    deadline = t_start + args.max_seconds
    # the measuring phases stop early enough to leave room for closing and the after-close samples
    work_deadline = deadline - args.after_wait - 20
    port = args.port or free_port(address)
    base = base_url(address, port)
    command = " ".join([".venv/bin/python", "benchmarks/load_sessions.py"] + [shlex.quote(a) for a in sys.argv[1:]])
    res = {"name": args.name, "command": command, "date_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(
        timespec="seconds"), "machine": machine_info(), "targets": TARGETS, "cut": [],
           "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}}
    res["settings"]["port"] = port
    log_fd, log_path = tempfile.mkstemp(prefix=f"load_sessions_{port}_", suffix=".log")
    res["server_log"] = {"path": log_path}
    holder: dict = {}
    _watchdog(deadline, holder)

    def log(msg):
        print(f"[{time.monotonic() - t_start:6.1f} s] {msg}", flush=True)

    def cut(what):
        res["cut"].append(what)
        log(f"!! {what}")

    sampler = None
    with os.fdopen(log_fd, "w") as log_file:
        proc = start_server(port, address, args.num_procs, log_file)
        holder["proc"] = proc
        try:
            log(f"server: bash scripts/serve.sh on {address}:{port} (NUM_PROCS={args.num_procs}), pid {proc.pid}, "
                f"log {log_path}")
            res["server_start_s"] = wait_liveness(base, proc, LIVENESS_TIMEOUT_S)
            sampler = Sampler(proc.pid, port, t_start)
            sampler.start()
            time.sleep(2.0)
            res["memory"] = {"cold_baseline": steady_sample(proc.pid, port)}
            log(f"liveness after {res['server_start_s']:.1f} s; cold baseline {res['memory']['cold_baseline']}")
            _browse(args, res, base, sampler, proc, holder, deadline, work_deadline, log, cut)
        except KeyboardInterrupt:
            res["error"] = "interrupted (Ctrl-C, SIGTERM or the time budget)"
            log("!! interrupted")
        except Exception as exc:  # noqa: BLE001 - the report says what went wrong
            res["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            log(f"!! {res['error']}")
        finally:
            if sampler is not None:
                sampler.stop()
                holder["pids"] = sampler.last_pids
            stop_server(proc, holder.get("pids", ()))
            log("server stopped")
    res["elapsed_s"] = time.monotonic() - t_start
    res["machine"]["loadavg_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    if sampler is not None:
        res["timeline"] = sampler.timeline
    try:
        res["server_log"].update(scan_log(Path(log_path).read_text(errors="replace")))
    except OSError:
        pass
    return res


WARM_PLAY_S = 5.0  # the warm-up's Play on every playing page, all together


def _warm_play(classroom, base: str, slugs: list[str], res: dict, log) -> None:
    """Open one protocol student per page in ``slugs``, play them together for WARM_PLAY_S, close them."""
    if not slugs:
        return
    log(f"warm-up Play ({WARM_PLAY_S:.0f} s): {', '.join(slugs)}")
    students = classroom.open_wave(base, [(-2 - i, slug) for i, slug in enumerate(slugs)], LOAD_TIMEOUT_S)
    played = []
    for st in students:
        if st.error is None:
            try:
                classroom.call(st.play(), CLICK_TIMEOUT_MS / 1000)
                played.append(st.slug)
            except Exception as exc:  # noqa: BLE001 - reported, the run goes on
                log(f"  warm-up Play on {st.slug} FAILED: {str(exc).splitlines()[0][:200]}")
    time.sleep(WARM_PLAY_S)
    classroom.close(students)
    res["warmup_played"] = played


def _browse(args, res, base, sampler, proc, holder, deadline, work_deadline, log, cut) -> None:
    from playwright.sync_api import sync_playwright

    slugs = session_slugs(args.sessions)
    warm_slugs = list(dict.fromkeys(slugs + ["em_playground"]))
    sessions: list = []  # Session (Chromium) or ProtocolStudent
    extra = None
    classroom = None
    if args.clients == "protocol":
        classroom = Classroom()
        classroom.start()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        res["machine"]["chromium"] = browser.version
        try:
            # ---- warm-up: every page used, once, one at a time
            sampler.phase = "warmup"
            log(f"warm-up: {', '.join(warm_slugs)}")
            res["warmup"] = []
            for slug in warm_slugs:
                if time.monotonic() > work_deadline:
                    cut(f"warm-up stopped before {slug} (time budget)")
                    break
                (s,) = open_wave(browser, base, [(-1, slug)], work_deadline, log)
                res["warmup"].append({"slug": slug, "first_render_s": s.first_render_s, "error": s.error})
                s.context.close()
            if classroom is not None:  # and every playing page played once: its Play path's imports and caches
                _warm_play(classroom, base, [slug for slug in warm_slugs if slug in PLAY_PAGES], res, log)
            sampler.phase = "warm_wait"
            wait = min(args.warm_wait, max(0.0, work_deadline - time.monotonic() - 60))
            if wait < args.warm_wait:
                cut(f"warm wait shortened to {wait:.0f} s (time budget)")
            log(f"waiting {wait:.0f} s for the warm baseline")
            time.sleep(max(0.0, wait - 2.0))
            res["memory"]["warm_baseline"] = steady_sample(proc.pid, sampler.port)
            log(f"warm baseline {res['memory']['warm_baseline']}")

            # ---- the class arrives, in waves
            sampler.phase = "load"
            t_load = time.monotonic()
            todo = list(enumerate(slugs))
            for w in range(0, len(todo), args.wave):
                if time.monotonic() > work_deadline:
                    cut(f"opened {len(sessions)} of {len(slugs)} sessions (time budget)")
                    break
                log(f"wave {w // args.wave + 1}: sessions {w}-{min(w + args.wave, len(todo)) - 1}")
                if classroom is None:
                    sessions += open_wave(browser, base, todo[w:w + args.wave], work_deadline, log)
                    continue
                wave = classroom.open_wave(base, todo[w:w + args.wave],
                                           max(1.0, min(LOAD_TIMEOUT_S, work_deadline - time.monotonic())))
                for st in wave:
                    log(f"  {_who(st)} " + (f"FAILED: {st.error}" if st.error else
                                            f"served {st.first_render_s:6.2f} s (GET {st.get_s:.2f} s)"))
                sessions += wave
            res["load_phase_s"] = time.monotonic() - t_load
            ok = [s for s in sessions if s.error is None]
            res["first_render"] = {
                "requested": len(slugs), "summary": summarize([s.first_render_s for s in ok]),
                "per_page": {slug: summarize([s.first_render_s for s in ok if s.slug == slug])
                             for slug in dict.fromkeys(slugs)},
                "failures": [{"index": s.index, "slug": s.slug, "error": s.error} for s in sessions
                             if s.error and not s.cut]}
            if any(s.cut for s in sessions):
                res["first_render"]["requested"] -= sum(s.cut for s in sessions)
                cut(f"{sum(s.cut for s in sessions)} sessions were still loading when the time budget ran out "
                    "(left out of the first-render numbers)")

            # ---- Play on some of them
            sampler.phase = "play"
            candidates = [s for s in ok if s.slug in PLAY_PAGES]
            play = {"requested": args.playing, "started": 0, "failed": []}
            res["play"] = play
            if len(candidates) < args.playing:
                play["failed"].append(f"only {len(candidates)} rendered sessions have Play")
            for s in candidates[:args.playing]:
                try:
                    if isinstance(s, ProtocolStudent):
                        classroom.call(s.play(), CLICK_TIMEOUT_MS / 1000)
                    else:
                        click_play(s)
                    play["started"] += 1
                    log(f"  Play on session {s.index} ({s.slug})")
                except Exception as exc:  # noqa: BLE001
                    play["failed"].append(f"{s.slug}#{s.index}: {str(exc).splitlines()[0][:200]}")
                    log(f"  Play on session {s.index} ({s.slug}) FAILED")
            playing = [s for s in sessions if s.playing and isinstance(s, Session)]  # Chromium: kept by the driver
            res["sessions_playing"] = sum(1 for s in sessions if s.playing)

            # ---- real pages opened while the class is on (protocol students only)
            if classroom is not None and args.probes:
                sampler.phase = "probes"
                probes = []
                for i, slug in enumerate(session_slugs(args.probes)):
                    if time.monotonic() > work_deadline:
                        cut(f"{i} of {args.probes} Chromium probes (time budget)")
                        break
                    keep_playing(playing)
                    (p,) = open_wave(browser, base, [(1000 + i, slug)], work_deadline, log)
                    probes.append(p)
                    p.context.close()
                ok_probes = [p for p in probes if p.error is None]
                res["probe_render"] = {
                    "requested": len(probes), "summary": summarize([p.first_render_s for p in ok_probes]),
                    "per_page": {slug: summarize([p.first_render_s for p in ok_probes if p.slug == slug])
                                 for slug in dict.fromkeys(p.slug for p in probes)},
                    "failures": [{"index": p.index, "slug": p.slug, "error": p.error} for p in probes
                                 if p.error and not p.cut]}
                res.setdefault("probe_errors", []).extend(e for p in probes for e in p.browser_errors)

            # ---- the extra session: Step latency while the others play
            if time.monotonic() < work_deadline:
                sampler.phase = "steps"
                log("extra EM session")
                (extra,) = open_wave(browser, base, [(len(slugs), "em_playground")], work_deadline, log)
                res["extra_session"] = {"first_render_s": extra.first_render_s, "error": extra.error}
                keep_playing(playing)
                lat, fails, clicks = ([], ["the extra session did not render"], []) if extra.error else \
                    measure_steps(extra, args.steps, playing, work_deadline, log)
                res["step_latency"] = {"requested": args.steps, "values": lat, "summary": summarize(lat),
                                       "failures": fails, "click_call_s": clicks}
            else:
                cut("Step latency not measured (time budget)")

            # ---- the real Play rate of a playing EM session
            if time.monotonic() + args.rate_seconds + 15 < work_deadline:
                target = next((s for s in playing if s.slug == "em_playground"), None)
                if target is None and extra is not None and extra.error is None:
                    target = extra
                if target is not None:
                    log(f"Play rate on {target.slug}#{target.index}")
                    play["rate"] = measure_play_rate(target, args.rate_seconds)
                    log(f"  {play['rate']}")
                else:
                    play["rate"] = {"error": "no rendered EM session"}
            else:
                cut("Play rate not measured (time budget)")

            # ---- everyone keeps playing a while
            sampler.phase = "hold"
            hold_s = min(args.hold, max(0.0, work_deadline - time.monotonic()))
            if hold_s < args.hold:
                cut(f"hold shortened to {hold_s:.0f} s (time budget)")
            log(f"holding {hold_s:.0f} s with {len(playing)} sessions playing")
            hold(playing, hold_s, work_deadline)
            play["restarts"] = sum(s.restarts for s in sessions if s.playing)
            res["sessions_open"] = len(ok) + (1 if extra is not None and extra.error is None else 0)
            res["browser_errors"] = [e for s in sessions + ([extra] if extra else []) for e in s.browser_errors]
            res["sessions"] = [s.record() for s in sessions] + ([dict(extra.record(), extra=True)] if extra else [])
        finally:
            # ---- the class leaves
            sampler.phase = "closing"
            for s in [s for s in sessions if isinstance(s, Session)] + ([extra] if extra else []):
                try:
                    s.context.close()
                except Exception:  # noqa: BLE001
                    pass
            if classroom is not None:
                try:
                    classroom.close_all([s for s in sessions if isinstance(s, ProtocolStudent)])
                except Exception as exc:  # noqa: BLE001 - closing anyway
                    log(f"!! closing the protocol students: {exc}")
            try:
                browser.close()
            except Exception:  # noqa: BLE001
                pass
    t_close = time.monotonic()
    sampler.phase = "after"
    busy = {"load", "play", "probes", "steps", "hold"}
    res["memory"]["peak"] = sampler.peak(busy)
    res["server_cpu"] = {"load_cores": sampler.cpu_cores(busy),
                         "browser_cores": sampler.cpu_cores(busy, "client_cpu_s"),
                         "machine_cores": sampler.cpu_cores(busy, "machine_cpu_s"),
                         "browser_pss_peak_mb": max((s.get("client_pss_mb", 0) for s in sampler.timeline
                                                     if s["phase"] in busy), default=None)}
    log(f"every session closed; peak {res['memory']['peak']}; sampling after closing")
    res["memory"]["after_close"] = []
    for c in after_checkpoints(args.after_wait):
        wait = t_close + c - 1.0 - time.monotonic()  # the steady sample spans ~1.6 s around c
        if time.monotonic() + max(wait, 0) + 2 > deadline:
            cut(f"after-close sampling stopped before {c:g} s (time budget)")
            break
        time.sleep(max(0.0, wait))
        row = dict(steady_sample(proc.pid, sampler.port), after_s=c)
        res["memory"]["after_close"].append(row)
        log(f"  {c:g} s after closing: {row}")


def write_results(res: dict, out: Path) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{res['name']}.json"
    path.write_text(json.dumps(res, indent=1, default=str) + "\n")
    runs = []
    for p in sorted(out.glob("*.json")):
        try:
            runs.append(json.loads(p.read_text()))
        except (OSError, ValueError):
            continue
    report = out / "REPORT.md"
    report.write_text(format_report(runs))
    return path, report


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        check_loopback(args.address)
    except ValueError as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 2

    def on_term(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C works even when started with SIGINT ignored
    res = run(args)
    rows = verdicts(res)
    print()
    print(f"Classroom load test `{res['name']}`: {args.sessions} sessions, {args.playing} playing, "
          f"NUM_PROCS={args.num_procs}, {res['elapsed_s']:.0f} s")
    print(format_table(rows))
    if res.get("cut"):
        print("cut short: " + "; ".join(res["cut"]))
    if res.get("error"):
        print(f"error: {res['error']}")
    log = res.get("server_log", {})
    print(f"server log: {log.get('path')} ({log.get('errors', '?')} error lines, {log.get('warnings', '?')} warnings)")
    path, report = write_results(res, args.out)
    print(f"wrote {path} and {report}")
    if args.quick:
        print(f"(a smoke check; the full run is: {FULL_COMMAND})")
    return 1 if res.get("error") else 0


if __name__ == "__main__":
    sys.exit(main())
