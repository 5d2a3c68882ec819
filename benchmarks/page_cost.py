"""What each gallery page costs the *server* in CPU time, per browser session (issue 19), on this machine only.

One server process (``bash scripts/serve.sh``, NUM_PROCS=1, on a free loopback port; ``--repo DIR`` serves another
checkout, see below) and one headless Chromium (Debian's, 1440x900). The server's CPU is user + system time read from
``/proc/<pid>/stat`` and summed over its process tree (serve.sh execs ``panel serve``; children are summed too, and the
``cutime``/``cstime`` of a parent keep the CPU of children that ended). ``/proc`` counts in clock ticks (10 ms): one
Step's CPU is known to about +-10 ms, which is why the mean of all clicks (their total / n) is kept beside the median.

What is measured, page after page (the Home page, ``/apps`` with no page, first, as a reference row; then every
``PageInfo(slug=...)`` of the served ``apps/main.py``, or ``--pages``):

* **open**: a fresh browser context (a new session) opens ``/apps?page=<slug>``. CPU from just before ``goto``
  until the page is rendered (Bokeh document idle with its plots drawn: ``.bk-Canvas`` present, searched through
  shadow roots, as ``benchmarks/load_sessions.py`` and the browser tests wait for it; the Home page has no plot:
  idle only) **and** the server is quiet again (sampled every 100 ms; quiet = it rose < 5 ms over 500 ms; capped
  at ``--open-cap`` s): whatever a page computes by itself after its first render (e.g. a fit that plays to
  convergence at load) counts. *open wall* is ``goto`` -> rendered. Before the measured pass every page is opened
  once (the **cold** open: module imports, caches; its own column), those sessions are closed and discarded, then
  each page is opened again in a new session: the measured (warm) open, the per-session cost.
* **Step** (pages with a "Step" button and a StepPlayer read-out "Iteration: <label>: n ..."): the player is paused
  and Reset first (pages that play at load, or runs that ended); then each click is timed from the click until the
  read-out says n+1 **and** the page's own mark of the new iteration is in the document (the title / status line its
  browser test waits for, see :data:`STEP_MARKS`), then until the server is quiet. Server CPU per click (median,
  max and mean of ``--steps`` clicks) and the wall time click -> shown (the read-out and the plots change in one
  Bokeh patch; the browser draws it at its next frame). A run that ends meanwhile is Reset (not counted).
* **Play** at the page's default settings: Reset, press Play, and measure over ``--play-seconds`` the server's CPU
  as a fraction of one core, and the pace: every change of the read-out is recorded in the page (a 10 ms poll of
  its Bokeh model), a change that advanced an iteration is a tick shown; ticks shown per second (between the first
  and the last tick of each run) against the pace asked, 1000 / tick period (the sliders' values; iterations per
  tick = "Steps per tick"). A run that ends (converges) inside the window is Reset and played again, as a student
  would, and the notes say so (the Reset's CPU is then in the Play number). The player's own "Playing at x
  ticks/s" note is kept when it shows.

The sessions of the measured pass stay open (paused, idle) until the end, so that one session's cleanup (Bokeh
discards a session 10-15 s after its tab closed) does not land in the next page's numbers. At the end the server's
idle CPU with all of them open is sampled, they are closed, and the cleanup CPU is sampled for
``--close-seconds`` s.

Budgets (MET / MISSED with the margin; the page value of Step is its median click): opening median <= 0.5 s over
the pages (Home excluded), none above 1.0 s; Step median <= 40 ms over the stepping pages, no page's median above
100 ms; Play <= 0.2 of a core on every page that plays, at >= 80 % of the pace asked. It is a benchmark: nothing is
asserted about times, and the exit status is 0 whenever it completed (1 when a page could not be measured).

Every client runs on the same machine as the server and competes with it for the CPU: run it on a quiet machine.
The report gives the load average at the start and the end (and warns when the 1-minute one was above 0.5 at the
start) and the CPU other processes used meanwhile. CPU *time* is what it measures, less sensitive to a shared
machine than wall times, but not immune (caches, frequency).

``--repo DIR`` serves another checkout (e.g. ``git worktree add /tmp/baseline <commit>``) with this checkout's
virtualenv: ``<this>/.venv/bin/panel serve apps/`` with serve.sh's flags, cwd=DIR and ``PYTHONPATH=DIR`` (the venv
has this checkout installed in editable mode; DIR's own serve.sh would try to build a venv in DIR). Either way a
``--setup`` script prints where ``explorer`` resolves to in the server, and the run stops if it is not DIR's.

Usage::

    # every page (about 8-10 minutes); writes results/page_cost.md and results/page_cost.json:
    .venv/bin/python benchmarks/page_cost.py
    # some pages only, another folder:
    .venv/bin/python benchmarks/page_cost.py --pages em_playground,neumann --out /tmp/pc
    # another checkout (here a baseline commit), under its own name, with a note in the report:
    git worktree add /tmp/baseline cba6f97
    .venv/bin/python benchmarks/page_cost.py --repo /tmp/baseline --name page_cost_baseline_cba6f97 \\
        --note "the machine was shared"
    # a smoke check (3 pages + Home, 2 Step clicks, 3 s of Play, no warm-up; writes to test-results/page_cost/):
    .venv/bin/python benchmarks/page_cost.py --quick

Needs Debian's chromium at /usr/bin/chromium (``$EXPLORER_CHROMIUM`` overrides); never ``playwright install``.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime as _dt
import json
import math
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from load_sessions import (  # noqa: E402 - a sibling module: the server, /proc and browser helpers
    CHROMIUM, CHROMIUM_ARGS, VIEWPORT, _children_map, _tree, base_url, check_loopback, free_port, machine_cpu_s,
    machine_info, scan_log, stop_server, wait_liveness)

HOME = "home"
#: The budgets of issue 19
BUDGETS = {
    "open_median_s": 0.5,  # server CPU to open a page, median over the pages
    "open_max_s": 1.0,  # ... and no page above
    "step_median_ms": 40.0,  # server CPU per Step click, median over the stepping pages (of each page's median)
    "step_max_ms": 100.0,  # ... and no page's median above
    "play_cores": 0.2,  # server CPU while playing, fraction of one core, on every page
    "play_pace": 0.8,  # ticks shown per second / ticks asked per second, on every page
}

#: Per page: the text the page shows once a Step is done (``{n}`` = the new iteration), in a Bokeh Title or an
#: HTML / Markdown pane: what the page's browser test (tests/browser/test_<page>.py) waits for. Pages not listed
#: are judged on the StepPlayer read-out alone.
STEP_MARKS = {
    "em_playground": r"Exact EM · iteration {n}\b",
    "variational": r"^A: .*· iteration {n}\b",
    "inpainting": r"at l = {n}\b",
    "responsibilities": r"NSA-M at l = {n}\b",
    "neumann": r"NSA MSE [\d.]+ at l = {n}\b",
    "decision_surface": r"EM iteration {n}\b",
    "ratings": r"(EM iteration|Gibbs sweep|CD update) {n}\b",
    "regression": r"against .*EM iteration {n}\b",
}

QUICK_PAGES = ("em_playground", "neumann", "data_mechanism")
QUICK = dict(steps=2, play_seconds=3.0, warmup=False, close_seconds=0.0, open_cap=20.0, max_seconds=240.0)
DEFAULTS = dict(steps=10, play_seconds=15.0, warmup=True, close_seconds=20.0, open_cap=60.0, max_seconds=1800.0)

SAMPLE_EVERY_S = 0.1
QUIET_WINDOW_S = 0.5
QUIET_RISE_S = 0.005
LOAD_TIMEOUT_S = 90.0  # a page not rendered after this is a failure
STEP_TIMEOUT_S = 30.0
STEP_CAP_S = 30.0  # a click's CPU stops being counted after this (not quiet)
CLICK_TIMEOUT_MS = 10_000
PRE_QUIET_CAP_S = 20.0  # waiting for the server to be quiet before a measure
DISCARD_WAIT_S = 17.0  # Bokeh discards a closed session 10-15 s later (serve.sh's --unused-session-lifetime 10000)
LIVENESS_TIMEOUT_S = 120.0

#: serve.sh's flags (scripts/serve.sh), used when another checkout is served with this virtualenv
SERVE_FLAGS = ["--num-procs", "1", "--num-threads", "4", "--check-unused-sessions", "5000",
               "--unused-session-lifetime", "10000", "--liveness"]

SETUP_SCRIPT = '''\
import importlib.util, sys
_spec = importlib.util.find_spec("explorer")
print("page_cost: explorer resolves to %s" % (_spec.origin if _spec else None), file=sys.stderr, flush=True)
'''
SETUP_LINE = re.compile(r"page_cost: explorer resolves to (.+)")

# In every page: the readiness of the Bokeh document, the StepPlayer read-out, texts, sliders, a read-out recorder.
PAGE_SCRIPT = r"""
(() => {
  if (window.top !== window) return;
  const parser = new DOMParser();
  const unhtml = (s) => parser.parseFromString(s, 'text/html').documentElement.textContent || '';
  const plain = (m) => m.type === 'Title' ? String(m.text) : unhtml(unhtml(m.text));  // HTML panes: escaped HTML
  const canvases = (root) => {
    let n = root.querySelectorAll('.bk-Canvas').length;
    for (const el of root.querySelectorAll('*')) if (el.shadowRoot) n += canvases(el.shadowRoot);
    return n;
  };
  const doc = () => (window.Bokeh && Bokeh.documents.length > 0) ? Bokeh.documents[0] : null;
  let readout = null;
  const findReadout = () => {
    const d = doc();
    if (d === null) return null;
    if (readout !== null && readout.document === d) return readout;
    readout = null;
    for (const m of d.all_models) {
      if (typeof m.text === 'string' && m.text.includes('Iteration:') && plain(m).trim().startsWith('Iteration:')) {
        readout = m;
        break;
      }
    }
    return readout;
  };
  const now = () => performance.timeOrigin + performance.now();
  const pc = {
    idle: null, ready: null, ticks: [], timer: null,
    readout() { const r = findReadout(); return r === null ? null : plain(r).trim(); },
    texts() {
      const d = doc(), out = [];
      if (d === null) return out;
      for (const m of d.all_models) {
        if (m.type === 'Title' && typeof m.text === 'string') out.push(m.text);
        else if (typeof m.text === 'string' && m.type && m.type.startsWith('panel.models.markup')) out.push(plain(m));
      }
      return out;
    },
    hasText(pattern) { const re = new RegExp(pattern, 'm'); return pc.texts().some((t) => re.test(t)); },
    sliders() {
      const d = doc(), out = {};
      if (d !== null) for (const m of d.all_models)
        if (m.type && m.type.endsWith('Slider') && typeof m.title === 'string') out[m.title] = m.value;
      return out;
    },
    startRec() {
      pc.ticks = [];
      clearInterval(pc.timer);
      let last = null;
      pc.timer = setInterval(() => {
        const r = findReadout();
        if (r !== null && r.text !== last) { last = r.text; pc.ticks.push([now(), plain(r).trim()]); }
      }, 10);
    },
    stopRec() { clearInterval(pc.timer); pc.timer = null; return pc.ticks; },
  };
  window.__pc = pc;
  const timer = setInterval(() => {
    try {
      const d = doc();
      if (d !== null && d.is_idle) {
        const n = canvases(document);
        if (pc.idle === null) pc.idle = {t: now(), canvases: n};
        if (n > 0) { pc.ready = {t: now(), canvases: n}; clearInterval(timer); }
      }
    } catch (e) {}
  }, 50);
})();
"""

MIN_RUN_TICKS = 3  # a run's ticks count in the pace from this many
MIN_PACE_INTERVALS = 4
MIN_PACE_SECONDS = 1.0

READOUT_PART = re.compile(r"^\s*(.*?):\s*(-|\d+)(?:\s*\(([^)]*)\))?\s*$")
PLAYING_AT = re.compile(r"Playing at ([\d.]+) ticks/s")


# =============================================================================== pure helpers (no server)


def parse_readout(text: str | None) -> dict | None:
    """The StepPlayer read-out "Iteration: EM: 3 (converged) · naive: 2\\nPlaying at 2.9 ticks/s ..." as
    ``{"labels", "iterations" (None for '-'), "reasons" ('' when running), "playing_at" (ticks/s or None)}``."""
    if not text or not text.strip().startswith("Iteration:"):
        return None
    first = text.strip().split("\n")[0]
    labels, iterations, reasons = [], [], []
    for part in first[len("Iteration:"):].split(" · "):
        m = READOUT_PART.match(part)
        if m is None:
            return None
        labels.append(m.group(1).strip())
        iterations.append(None if m.group(2) == "-" else int(m.group(2)))
        reasons.append((m.group(3) or "").strip())
    at = PLAYING_AT.search(text)
    return {"labels": labels, "iterations": iterations, "reasons": reasons,
            "playing_at": float(at.group(1)) if at else None}


def ended(parsed: dict | None, first: bool = False) -> bool:
    """True when every run of the read-out has ended (converged, max iter, ...): the player is done; with
    ``first``: when the first one has (the one whose iteration a Step is checked on)."""
    if not parsed:
        return False
    return bool(parsed["reasons"][0]) if first else all(parsed["reasons"])


def _total(parsed: dict) -> int:
    return sum(i for i in parsed["iterations"] if i is not None)


def pace_from_ticks(ticks: list) -> dict:
    """Ticks shown per second from the read-out's recorded changes ``[(t_ms, text), ...]``.

    A change whose iterations went up is a tick shown; a change that went down is a Reset (a new run). The pace is
    the number of intervals between the ticks of each run over their time (first to last tick of each run), summed
    over the runs of at least :data:`MIN_RUN_TICKS` ticks; None with fewer than :data:`MIN_PACE_INTERVALS` intervals
    or :data:`MIN_PACE_SECONDS` s (ticks that reach a busy browser together would make a pace of nothing). Also:
    iterations per second of the first model, the runs seen and the player's own "Playing at" note."""
    runs: list[list[tuple[float, dict]]] = [[]]
    last = None
    playing_at = None
    for t, text in ticks:
        p = parse_readout(text)
        if p is None:
            continue
        if p["playing_at"] is not None:
            playing_at = p["playing_at"]
        if last is not None:
            if _total(p) < _total(last):
                runs.append([])
            elif _total(p) > _total(last):
                runs[-1].append((t / 1000.0, p))
        last = p
    intervals = 0
    seconds = 0.0
    first_iters = 0
    for run in runs:
        if len(run) >= MIN_RUN_TICKS:
            intervals += len(run) - 1
            seconds += run[-1][0] - run[0][0]
            a, b = run[0][1]["iterations"][0], run[-1][1]["iterations"][0]
            if a is not None and b is not None:
                first_iters += b - a
    out = {"ticks_shown": sum(len(r) for r in runs), "runs": sum(1 for r in runs if r), "intervals": intervals,
           "seconds": seconds, "playing_at": playing_at}
    enough = intervals >= MIN_PACE_INTERVALS and seconds >= MIN_PACE_SECONDS
    out["ticks_per_s"] = intervals / seconds if enough else None
    out["iterations_per_s"] = first_iters / seconds if enough else None
    return out


def median(values) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _judge_upper(value, limit, unit: str, digits: int) -> tuple[str, str]:
    if value is None:
        return "n/a", "not measured"
    if value <= limit:
        return "MET", f"{limit - value:.{digits}f} {unit} to spare"
    return "MISSED", f"over by {value - limit:.{digits}f} {unit} ({(value / limit - 1) * 100:.0f} %)"


def budgets(rows: list[dict]) -> list[dict]:
    """The budget lines: ``{"budget", "value", "status" (MET / MISSED / n/a), "margin", "pages"}``."""
    out = []
    pages = [r for r in rows if r["slug"] != HOME]
    opened = [(r["slug"], r["open"]["cpu_s"]) for r in pages if (r.get("open") or {}).get("cpu_s") is not None]
    failed = [r["slug"] for r in pages if (r.get("open") or {}).get("cpu_s") is None]
    med = median(v for _, v in opened)
    status, margin = _judge_upper(med, BUDGETS["open_median_s"], "s", 2)
    if failed and status == "MET":
        status = "MISSED"
    out.append({"budget": f"open: median over the pages <= {BUDGETS['open_median_s']:g} s",
                "value": "n/a" if med is None else f"{med:.2f} s", "status": status,
                "margin": margin + (f"; not measured: {', '.join(failed)}" if failed else ""),
                "pages": f"{len(opened)} pages"})
    worst = max(opened, key=lambda x: x[1], default=None)
    over = [f"{s} {v:.2f} s" for s, v in opened if v > BUDGETS["open_max_s"]]
    status, margin = _judge_upper(worst and worst[1], BUDGETS["open_max_s"], "s", 2)
    out.append({"budget": f"open: no page above {BUDGETS['open_max_s']:g} s",
                "value": "n/a" if worst is None else f"{worst[1]:.2f} s ({worst[0]})", "status": status,
                "margin": margin + (f"; above: {', '.join(over)}" if len(over) > 1 else ""), "pages": ""})

    stepped = [(r["slug"], r["step"]["cpu_ms"]["median"]) for r in pages
               if ((r.get("step") or {}).get("cpu_ms") or {}).get("median") is not None]
    med = median(v for _, v in stepped)
    status, margin = _judge_upper(med, BUDGETS["step_median_ms"], "ms", 0)
    out.append({"budget": f"Step: median over the stepping pages <= {BUDGETS['step_median_ms']:g} ms",
                "value": "n/a" if med is None else f"{med:.0f} ms", "status": status, "margin": margin,
                "pages": f"{len(stepped)} pages"})
    worst = max(stepped, key=lambda x: x[1], default=None)
    over = [f"{s} {v:.0f} ms" for s, v in stepped if v > BUDGETS["step_max_ms"]]
    status, margin = _judge_upper(worst and worst[1], BUDGETS["step_max_ms"], "ms", 0)
    out.append({"budget": f"Step: no page's median above {BUDGETS['step_max_ms']:g} ms",
                "value": "n/a" if worst is None else f"{worst[1]:.0f} ms ({worst[0]})", "status": status,
                "margin": margin + (f"; above: {', '.join(over)}" if len(over) > 1 else ""), "pages": ""})

    played = [(r["slug"], r["play"]) for r in pages if (r.get("play") or {}).get("cores") is not None]
    worst = max(played, key=lambda x: x[1]["cores"], default=None)
    over = [f"{s} {p['cores']:.2f}" for s, p in played if p["cores"] > BUDGETS["play_cores"]]
    status, margin = _judge_upper(worst and worst[1]["cores"], BUDGETS["play_cores"], "core", 2)
    out.append({"budget": f"Play: <= {BUDGETS['play_cores']:g} of a core on every page",
                "value": "n/a" if worst is None else f"{worst[1]['cores']:.2f} ({worst[0]})", "status": status,
                "margin": margin + (f"; above: {', '.join(over)}" if over else ""), "pages": f"{len(played)} pages"})
    paced = [(s, p["pace_ratio"]) for s, p in played if p.get("pace_ratio") is not None]
    unpaced = [s for s, p in played if p.get("pace_ratio") is None]
    worst = min(paced, key=lambda x: x[1], default=None)
    under = [f"{s} {v * 100:.0f} %" for s, v in paced if v < BUDGETS["play_pace"]]
    if worst is None:
        status, margin = "n/a", "not measured"
    elif worst[1] >= BUDGETS["play_pace"]:
        status, margin = "MET", f"{(worst[1] - BUDGETS['play_pace']) * 100:.0f} points to spare"
    else:
        status, margin = "MISSED", f"under by {(BUDGETS['play_pace'] - worst[1]) * 100:.0f} points"
    out.append({"budget": f"Play: at >= {BUDGETS['play_pace'] * 100:.0f} % of the pace asked on every page",
                "value": "n/a" if worst is None else f"{worst[1] * 100:.0f} % ({worst[0]})", "status": status,
                "margin": margin + (f"; under: {', '.join(under)}" if len(under) > 1 else "")
                + (f"; no pace measured on {', '.join(unpaced)}" if unpaced else ""), "pages": f"{len(paced)} pages"})
    return out


def _f(value, fmt: str, none: str = "-") -> str:
    return none if value is None or (isinstance(value, float) and not math.isfinite(value)) else format(value, fmt)


def table_rows(rows: list[dict]) -> list[list[str]]:
    """The cells of the result table, one list per page (see :data:`COLUMNS`)."""
    out = []
    for r in rows:
        o, c, s, p = r.get("open") or {}, r.get("cold") or {}, r.get("step") or {}, r.get("play") or {}
        cpu = s.get("cpu_ms") or {}
        step_cpu = "-" if cpu.get("median") is None else f"{cpu['median']:.0f} ({cpu['max']:.0f})"
        pace = "-"
        if p.get("ticks_per_s") is not None and p.get("asked_ticks_per_s"):
            pace = f"{p['ticks_per_s']:.1f} / {p['asked_ticks_per_s']:.1f} ({p['pace_ratio'] * 100:.0f} %)"
        elif p.get("asked_ticks_per_s"):
            pace = f"? / {p['asked_ticks_per_s']:.1f}"
        out.append([r["slug"], _f(o.get("cpu_s"), ".2f"), _f(o.get("wall_s"), ".2f"), _f(c.get("cpu_s"), ".2f"),
                    step_cpu, _f((s.get("wall_ms") or {}).get("median"), ".0f"),
                    "-" if p.get("cores") is None else f"{p['cores']:.2f} ({_f(p.get('cpu_ms_per_tick'), '.0f', '?')})",
                    pace,
                    "; ".join(r.get("notes") or [])])
    return out


COLUMNS = ["page", "open CPU s", "open wall s", "cold open CPU s", "Step CPU ms median (max)", "Step wall ms",
           "Play cores (CPU ms per tick)", "Play ticks/s shown / asked", "notes"]


def format_console(res: dict) -> str:
    rows = table_rows(res["pages"])
    cells = [COLUMNS[:-1]] + [r[:-1] for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(COLUMNS) - 1)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cells[0], widths))]
    lines.append("  ".join("-" * w for w in widths))
    for r in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r[:-1], widths)))
    notes = [f"  {r[0]}: {r[-1]}" for r in rows if r[-1]]
    if notes:
        lines += ["notes:"] + notes
    lines.append("")
    for b in res.get("budgets") or budgets(res["pages"]):
        lines.append(f"{b['status']:<7} {b['budget']}: {b['value']} ({b['margin']})")
    return "\n".join(lines)


def _md(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def format_markdown(res: dict) -> str:
    m = res.get("machine", {})
    st = res.get("settings", {})
    out = [f"# Server CPU per page and session (issue 19){' (quick smoke check)' if st.get('quick') else ''}", ""]
    if res.get("note"):
        out += [f"**Note:** {res['note']}", ""]
    load1 = m.get("loadavg_1min_start")
    if load1 is not None and load1 > 0.5:
        out += [f"**Warning: the machine was not quiet** (1-minute load average {load1:.2f} at the start, above "
                "0.5): other work competed for the CPU; the numbers are inflated and indicative.", ""]
    if res.get("error"):
        out += [f"**The run stopped with an error:** `{_md(res['error'])}`", ""]
    out += ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in table_rows(res["pages"]):
        out.append("| " + " | ".join(_md(c) for c in r) + " |")
    out += ["", "Budgets:", "", "| budget | value | status | margin |", "|---|---|---|---|"]
    for b in res.get("budgets") or budgets(res["pages"]):
        status = f"**{b['status']}**" if b["status"] in ("MET", "MISSED") else b["status"]
        out.append(f"| {_md(b['budget'])} | {_md(b['value'])} | {status} | {_md(b['margin'])} |")
    out += ["", "How to read it: *open CPU* is the server's CPU (user + system, its process tree) from `goto` until "
            "the page is rendered and the server is quiet again (< 5 ms over 500 ms), for a new session of a page "
            "already opened once in this server process (*cold open*: the first session, with the imports); *open "
            "wall* is `goto` to rendered (Bokeh idle, plots drawn). *Step*: server CPU per click, from the click "
            "until the read-out and the page's own mark show the new iteration and the server is quiet (median and "
            "max of the clicks; /proc counts in 10 ms ticks); *Step wall*: click to shown. *Play*: server CPU over "
            "the window as a fraction of one core, and ticks shown per second (read-out changes that advanced an "
            "iteration) against 1000 / tick period; the CPU per tick shown (the Play CPU over the ticks shown) is what the "
            "pace asked would cost: ms per tick x ticks per second asked / 1000 cores. Details and every sample: the "
            "JSON file.", ""]
    loads = [(r.get(w) or {}).get("load") for r in res["pages"] for w in ("open", "step", "play")]
    loads = [x for x in loads if x]
    if loads:
        def mm(key):
            vals = [x[key] for x in loads]
            return f"{statistics.median(vals):.2f} / {max(vals):.2f}"
        out += [f"CPU used during the {len(loads)} measured windows (cores, median / max): the server {mm('server_cores')}; "
                f"Chromium and the driver (same machine) {mm('client_cores')}; **other processes {mm('others_cores')}** "
                f"(other people's work: what the numbers competed with).", ""]
    extra = res.get("after") or {}
    if extra:
        parts = []
        if extra.get("idle_cores") is not None:
            parts.append(f"server idle with the {extra.get('sessions_open')} measured sessions open (paused): "
                         f"{extra['idle_cores']:.3f} of a core")
        if extra.get("close_cpu_s") is not None:
            parts.append(f"closing them: {extra['close_cpu_s']:.2f} s of server CPU over {extra['close_seconds']:g} s "
                         f"(Bokeh discards a session 10-15 s after its tab closed)")
        if parts:
            out += ["After the measures: " + "; ".join(parts) + ".", ""]
    out.append(f"Command: `{res.get('command', '?')}`  ")
    out.append(f"Served: `{res.get('served', {}).get('repo', '?')}` at commit `{m.get('git_commit', '?')}`"
               + (" (working tree modified: the served code is the working tree)" if m.get("git_dirty") else "")
               + f"; `explorer` resolved in the server to `{res.get('served', {}).get('explorer', '?')}`  ")
    out.append(f"Server: `{res.get('served', {}).get('command', '?')}`  ")
    out.append(f"Date (UTC): {res.get('date_utc', '?')}; elapsed {res.get('elapsed_s', 0):.0f} s  ")
    out.append(f"Machine: {m.get('nproc', '?')} CPUs ({m.get('cpu_model', '?')}), {m.get('ram_gb', '?')} GB RAM; "
               f"load average {m.get('loadavg_start', '?')} at the start, {m.get('loadavg_end', '?')} at the end"
               + (f"; other processes used {m['others_cores']:.2f} cores on average during the run"
                  if m.get("others_cores") is not None else "") + "  ")
    out.append(f"Software: Python {m.get('python', '?')}, panel {m.get('panel', '?')}, bokeh {m.get('bokeh', '?')}, "
               f"playwright {m.get('playwright', '?')}, chromium {m.get('chromium', '?')}  ")
    out.append(f"Settings: {st.get('steps')} Step clicks, {st.get('play_seconds')} s of Play, warm-up "
               f"{'on' if st.get('warmup') else 'off (the opens are cold)'}, viewport 1440x900, one server process  ")
    out.append(f"Raw samples: `{res.get('json_name', '?')}`")
    log = res.get("server_log") or {}
    if log.get("errors"):
        out += ["", f"Server log: {log.get('errors')} error / traceback lines, e.g.:"]
        out += [f"    {line}" for line in log.get("excerpt", [])[:8]]
    berr = res.get("browser_errors") or []
    if berr:
        out += ["", f"Browser-side errors ({len(berr)}; first ones):"] + [f"    {e[:300]}" for e in berr[:8]]
    return "\n".join(out).rstrip() + "\n"


def page_slugs(repo: Path) -> list[str]:
    """The ``PageInfo(slug=...)`` entries of ``<repo>/apps/main.py``, in order (read, not imported)."""
    return re.findall(r"PageInfo\(\s*slug\s*=\s*[\"']([A-Za-z0-9_]+)[\"']", (repo / "apps" / "main.py").read_text())


# =============================================================================== the server and its CPU


def _ticks_s(pid: int) -> float:
    """utime + stime + cutime + cstime of ``pid`` (its CPU and that of its ended, waited-for children), seconds."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rfind(")") + 2:].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """The CPU seconds of a process tree, from /proc (a process that ended leaves its time in its parent)."""

    def __init__(self, root: int):
        self.root = root
        self.pids: list[int] = [root]

    def __call__(self) -> float:
        self.pids = _tree(_children_map(), self.root)
        total = 0.0
        for pid in self.pids:
            try:
                total += _ticks_s(pid)
            except (OSError, ValueError, IndexError):
                pass  # ended meanwhile
        return total


def wait_quiet(meter: CpuMeter, cap_s: float, every: float = SAMPLE_EVERY_S, window: float = QUIET_WINDOW_S,
               rise: float = QUIET_RISE_S, samples: list | None = None, t0: float | None = None,
               c0: float = 0.0) -> dict:
    """Sample ``meter`` every ``every`` s until it rose < ``rise`` s over the last ``window`` s, or ``cap_s`` passed.

    Returns ``{"cpu": the CPU at the start of the quiet window, "t": its time (monotonic), "capped": bool}``;
    ``samples`` (if given) gets every ``(t - t0, cpu - c0)``."""
    t_start = time.monotonic()
    t0 = t_start if t0 is None else t0
    hist: list[tuple[float, float]] = []
    while True:
        t, c = time.monotonic(), meter()
        hist.append((t, c))
        if samples is not None:
            samples.append((round(t - t0, 3), round(c - c0, 3)))
        old = [h for h in hist if h[0] <= t - window + 1e-3]
        if old and c - old[-1][1] < rise:
            return {"cpu": old[-1][1], "t": old[-1][0], "capped": False}
        if t - t_start >= cap_s:
            return {"cpu": c, "t": t, "capped": True}
        hist = [h for h in hist if h[0] > t - 2 * window] or hist[-1:]
        time.sleep(max(0.0, every - (time.monotonic() - t)))


def _set_pdeathsig():
    """In the server's process: SIGTERM it if this script dies (even by SIGKILL); Linux only, best effort."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001
        pass


def server_command(repo: Path, port: int, address: str, setup: str) -> tuple[list[str], dict, Path]:
    """``(argv, env, cwd)`` that serve ``repo``'s gallery: serve.sh for this checkout, else this venv's panel."""
    env = {k: v for k, v in os.environ.items() if k not in ("ORIGIN", "PYTHONPATH")}
    env.update(PORT=str(port), ADDRESS=check_loopback(address), NUM_PROCS="1")
    if repo.resolve() == ROOT:
        return ["bash", "scripts/serve.sh", "--setup", setup], env, ROOT
    panel = ROOT / ".venv" / "bin" / "panel"
    origins = [f"--allow-websocket-origin=localhost:{port}", f"--allow-websocket-origin=127.0.0.1:{port}"]
    static = []
    if (repo / "assets").is_dir():
        static = ["--static-dirs", "assets=assets"]
        if (repo / "assets" / "thumbnails").is_dir():
            static.append("thumbnails=assets/thumbnails")
    env["PYTHONPATH"] = str(repo.resolve())
    argv = [str(panel), "serve", "apps/", "--port", str(port), "--address", address, *origins, *SERVE_FLAGS,
            *static, "--setup", setup]
    return argv, env, repo.resolve()


def start_server(repo: Path, port: int, address: str, setup: str, log_file) -> tuple[subprocess.Popen, str]:
    argv, env, cwd = server_command(repo, port, address, setup)
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=log_file,
                            stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_set_pdeathsig)
    shown = " ".join(shlex.quote(a) for a in argv)
    if "PYTHONPATH" in env:
        shown = f"(cd {shlex.quote(str(cwd))} && PYTHONPATH={shlex.quote(env['PYTHONPATH'])} {shown})"
    return proc, shown


def _git(repo: Path, *args) -> str:
    try:
        return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _own_cpu_s() -> float:
    """CPU of this script and its children (the Playwright driver, Chromium)."""
    total = 0.0
    for pid in _tree(_children_map(), os.getpid()):
        try:
            total += _ticks_s(pid)
        except (OSError, ValueError, IndexError):
            pass
    return total


def snapshot(meter: CpuMeter) -> dict:
    """The CPU counters of a window's start or end: the machine, the server, this script's tree (Chromium)."""
    return {"t": time.monotonic(), "machine": machine_cpu_s(), "server": meter(), "own": _own_cpu_s()}


def window_load(a: dict, b: dict) -> dict:
    """Cores used between two snapshots by the server, the clients (this script, its driver and Chromium) and every
    other process of the machine (other people's work: the competition the numbers suffered)."""
    dt = max(1e-9, b["t"] - a["t"])
    server, own = b["server"] - a["server"], b["own"] - a["own"]
    return {"server_cores": server / dt, "client_cores": own / dt,
            "others_cores": max(0.0, (b["machine"] - a["machine"]) - server - own) / dt}


# =============================================================================== the browser side


class Session:
    """One page in its own browser context."""

    def __init__(self, browser, slug: str, errors: list):
        self.slug = slug
        self.context = browser.new_context(viewport=VIEWPORT)
        self.context.set_default_timeout(CLICK_TIMEOUT_MS)
        self.context.set_default_navigation_timeout(LOAD_TIMEOUT_S * 1000)
        self.context.add_init_script(PAGE_SCRIPT)
        self.page = self.context.new_page()
        self.page.on("pageerror", lambda exc: errors.append(f"{slug} pageerror: {exc}"))
        self.page.on("console", lambda msg: errors.append(f"{slug} console.error: {msg.text}")
                     if msg.type == "error" else None)

    def js(self, expr: str, arg=None):
        return self.page.evaluate(expr, arg)

    def readout(self) -> dict | None:
        return parse_readout(self.js("() => window.__pc ? window.__pc.readout() : null"))

    def button(self, name: str):
        return self.page.get_by_role("button", name=name, exact=True)

    def has(self, name: str) -> bool:
        try:
            return self.button(name).count() > 0
        except Exception:  # noqa: BLE001
            return False

    def close(self):
        try:
            self.context.close()
        except Exception:  # noqa: BLE001
            pass


def url_of(base: str, slug: str) -> str:
    return f"{base}/apps" if slug == HOME else f"{base}/apps?page={slug}"


def measure_open(browser, base: str, slug: str, meter: CpuMeter, cap_s: float, errors: list, log) -> tuple:
    """Open ``slug`` in a new session: ``(session, record)``; the record has cpu_s, wall_s, settle_s, samples."""
    pre = wait_quiet(meter, PRE_QUIET_CAP_S)
    s = Session(browser, slug, errors)
    rec: dict = {"pre_quiet_capped": pre["capped"], "samples": []}
    snap0 = snapshot(meter)
    c0 = meter()
    t0_wall, t0 = time.time(), time.monotonic()
    try:
        s.page.goto(url_of(base, slug), wait_until="commit")
    except Exception as exc:  # noqa: BLE001
        rec["error"] = f"goto: {str(exc).splitlines()[0][:200]}"
        return s, rec
    ready = None
    while ready is None:
        t = time.monotonic()
        rec["samples"].append((round(t - t0, 3), round(meter() - c0, 3)))
        try:
            state = s.js("() => window.__pc ? {idle: window.__pc.idle, ready: window.__pc.ready, unavailable: "
                         "window.__pc.idle !== null && window.__pc.hasText('Page unavailable')} : null")
        except Exception:  # noqa: BLE001 - navigation in progress
            state = None
        if state and state["unavailable"]:
            rec["error"] = "the gallery says: Page unavailable"
            return s, rec
        if state:
            ready = state["ready"] or (state["idle"] if slug == HOME else None)
        if ready is None and t - t0 > LOAD_TIMEOUT_S:
            rec["error"] = f"not rendered after {LOAD_TIMEOUT_S:.0f} s (state {state})"
            return s, rec
        if ready is None:
            time.sleep(SAMPLE_EVERY_S)
    wall = ready["t"] / 1000.0 - t0_wall
    rec["wall_s"] = wall if 0 < wall < LOAD_TIMEOUT_S * 2 else time.monotonic() - t0  # else: the driver's view
    rec["canvases"] = ready["canvases"]
    q = wait_quiet(meter, max(1.0, cap_s - (time.monotonic() - t0)), samples=rec["samples"], t0=t0, c0=c0)
    rec["cpu_s"] = q["cpu"] - c0
    rec["settle_s"] = q["t"] - t0
    rec["capped"] = q["capped"]
    rec["load"] = window_load(snap0, snapshot(meter))
    if s.page.get_by_text("Page unavailable", exact=False).count():
        rec["error"] = "the gallery says: Page unavailable"
    log(f"  open {slug:<18} CPU {rec['cpu_s']:6.2f} s  rendered {rec['wall_s']:5.2f} s  quiet after "
        f"{rec['settle_s']:5.1f} s{' (cap)' if q['capped'] else ''}")
    return s, rec


def _pause(s: Session) -> bool:
    """Pause a playing player; True if it was playing."""
    if s.has("Pause"):
        s.page.mouse.move(5, 5)
        s.button("Pause").click()
        s.button("Play").wait_for()
        return True
    return False


def _reset(s: Session, meter: CpuMeter) -> None:
    """Reset the player and wait until the read-out shows the new run and the server is quiet (nothing to do when
    the run is at its start)."""
    before = s.js("() => window.__pc.readout()")
    parsed = parse_readout(before)
    if parsed is not None and _total(parsed) == 0 and not any(parsed["reasons"]):
        return
    s.page.mouse.move(5, 5)
    s.button("Reset").click()
    try:
        s.page.wait_for_function("(prev) => { const r = window.__pc.readout(); return r !== null && r !== prev; }",
                                 arg=before, timeout=STEP_TIMEOUT_S * 1000)
    except Exception:  # noqa: BLE001 - it was already at the start: the read-out does not change
        pass
    wait_quiet(meter, PRE_QUIET_CAP_S)


WAIT_SHOWN = """([prev, n, mark]) => {
  const r = window.__pc.readout();
  if (r === null || r === prev) return false;
  const m = /^Iteration:\\s*.+?:\\s*(\\d+)/.exec(r);
  if (m === null || Number(m[1]) !== n) return false;
  return mark === null || window.__pc.hasText(mark);
}"""


def measure_steps(s: Session, meter: CpuMeter, k: int, notes: list, log) -> dict:
    """``k`` Step clicks: server CPU and wall time each, from the click until shown and quiet."""
    out: dict = {"clicks": [], "failures": [], "resets": 0}
    first = s.readout()
    if first is None:
        notes.append("a Step button but no StepPlayer read-out: Step not measured")
        out["failures"].append("no read-out")
        return out
    if _pause(s):
        out["paused_first"] = True
    wait_quiet(meter, PRE_QUIET_CAP_S)
    if ended(s.readout(), first=True) or _total(s.readout()) > 0:
        _reset(s, meter)
    mark_t = STEP_MARKS.get(s.slug)
    snap0 = snapshot(meter)
    for i in range(k):
        try:
            r = s.readout()
            if ended(r, first=True):
                _reset(s, meter)
                out["resets"] += 1
                r = s.readout()
            n = r["iterations"][0] or 0
            prev = s.js("() => window.__pc.readout()")
            mark = mark_t.format(n=n + 1) if mark_t else None
            s.page.mouse.move(5, 5)
            c0 = meter()
            t0 = time.perf_counter()
            s.button("Step").click()
            t_click = time.perf_counter() - t0
            try:
                s.page.wait_for_function(WAIT_SHOWN, arg=[prev, n + 1, mark], polling="raf",
                                         timeout=STEP_TIMEOUT_S * 1000)
                shown = time.perf_counter() - t0
                marked = mark is not None
            except Exception:  # noqa: BLE001 - the mark did not come: say what the page shows
                now = s.readout()
                if mark is not None and now and now["iterations"][0] == n + 1:
                    shown, marked = None, False
                    notes.append(f"Step: the read-out said {n + 1} but the page's mark /{mark_t}/ did not show")
                else:
                    raise RuntimeError(f"iteration {n + 1} not shown after {STEP_TIMEOUT_S:g} s "
                                       f"(read-out: {now})") from None
            q = wait_quiet(meter, STEP_CAP_S)
            click = {"n": n, "cpu_ms": (q["cpu"] - c0) * 1000.0, "wall_ms": None if shown is None else shown * 1000.0,
                     "click_call_ms": t_click * 1000.0, "mark_seen": marked, "capped": q["capped"]}
            out["clicks"].append(click)
            log(f"    Step {i + 1}/{k}: {n} -> {n + 1}: CPU {click['cpu_ms']:5.0f} ms, shown after "
                f"{_f(click['wall_ms'], '.0f', '?')} ms")
        except Exception as exc:  # noqa: BLE001
            out["failures"].append(f"click {i + 1}: {str(exc).splitlines()[0][:200]}")
            log(f"    Step {i + 1}/{k}: FAILED {out['failures'][-1]}")
    out["load"] = window_load(snap0, snapshot(meter))
    cpu = [c["cpu_ms"] for c in out["clicks"]]
    wall = [c["wall_ms"] for c in out["clicks"] if c["wall_ms"] is not None]
    if cpu:
        out["cpu_ms"] = {"median": statistics.median(cpu), "max": max(cpu), "mean": sum(cpu) / len(cpu),
                         "n": len(cpu)}
    if wall:
        out["wall_ms"] = {"median": statistics.median(wall), "max": max(wall), "n": len(wall)}
    if out["resets"]:
        notes.append(f"Step: the run ended {out['resets']}x during the clicks (Reset, not counted)")
    if out["failures"]:
        notes.append(f"Step: {len(out['failures'])} of {k} clicks failed ({out['failures'][0]})")
    return out


def measure_play(s: Session, meter: CpuMeter, seconds: float, notes: list, log) -> dict:
    """Play at the page's defaults for ``seconds``: server cores and the pace of the ticks shown."""
    out: dict = {"restarts": 0}
    _pause(s)
    _reset(s, meter)
    sliders = s.js("() => window.__pc.sliders()")
    period = sliders.get("Tick period (ms)")
    per_tick = sliders.get("Steps per tick")
    out.update(period_ms=period, steps_per_tick=per_tick,
               asked_ticks_per_s=1000.0 / period if period else None,
               asked_iterations_per_s=per_tick * 1000.0 / period if period and per_tick else None)
    s.js("() => window.__pc.startRec()")
    s.page.mouse.move(5, 5)
    snap0 = snapshot(meter)
    c0, t0 = meter(), time.monotonic()
    s.button("Play").click()
    samples = []
    t_end = t0 + seconds
    while True:
        t = time.monotonic()
        samples.append((round(t - t0, 3), round(meter() - c0, 3)))
        if t >= t_end:
            break
        if not s.has("Pause") and s.has("Play") and t - t0 > 0.5:  # the run ended: Reset, Play again
            s.button("Reset").click()
            s.button("Play").click()
            out["restarts"] += 1
        time.sleep(min(0.25, max(0.0, t_end - time.monotonic())))
    c1, t1 = meter(), time.monotonic()
    out["load"] = window_load(snap0, snapshot(meter))
    _pause(s)
    ticks = s.js("() => window.__pc.stopRec()")
    out["cores"] = (c1 - c0) / (t1 - t0)
    out["seconds"] = t1 - t0
    out["cpu_s"] = c1 - c0
    out["samples"] = samples
    out["readout_changes"] = [(round(t / 1000.0, 3), text) for t, text in ticks]
    pace = pace_from_ticks(ticks)
    out.update(pace)
    out["cpu_ms_per_tick"] = out["cpu_s"] * 1000.0 / pace["ticks_shown"] if pace["ticks_shown"] else None
    out["pace_ratio"] = (pace["ticks_per_s"] / out["asked_ticks_per_s"]
                         if pace["ticks_per_s"] is not None and out["asked_ticks_per_s"] else None)
    if out["restarts"]:
        runs_ticks = pace["ticks_shown"] / max(1, pace["runs"])
        notes.append(f"Play: the run ended {out['restarts']}x in {seconds:g} s (Reset and Play again; about "
                     f"{runs_ticks:.0f} ticks per run; the Resets' CPU is in the Play number)")
    if pace["ticks_per_s"] is None:
        notes.append(f"Play: pace not measured ({pace['ticks_shown']} ticks shown in {seconds:g} s)")

    if pace.get("playing_at") is not None:
        notes.append(f"the player said 'Playing at {pace['playing_at']:g} ticks/s'")
    log(f"    Play {seconds:g} s: {out['cores']:.3f} cores, {_f(pace['ticks_per_s'], '.2f', '?')} ticks/s shown of "
        f"{_f(out['asked_ticks_per_s'], '.2f', '?')} asked, {out['restarts']} restarts")
    return out


# =============================================================================== the run


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="Full run: .venv/bin/python benchmarks/page_cost.py\n"
                                        "Smoke check: .venv/bin/python benchmarks/page_cost.py --quick")
    ap.add_argument("--quick", action="store_true",
                    help=f"smoke check: {', '.join(QUICK_PAGES)} (+ Home), 2 Step clicks, 3 s of Play, no warm-up; "
                         "writes to test-results/page_cost/ (explicit options win)")
    ap.add_argument("--pages", help="comma-separated slugs (default: every page of the served apps/main.py)")
    ap.add_argument("--steps", type=int, help="Step clicks per stepping page (default 10)")
    ap.add_argument("--play-seconds", type=float, help="seconds of Play per page (default 15)")
    ap.add_argument("--open-cap", type=float, help="longest open measured, goto to quiet, s (default 60)")
    ap.add_argument("--close-seconds", type=float, help="seconds the cleanup is sampled after closing (default 20)")
    ap.add_argument("--warmup", action=argparse.BooleanOptionalAction, default=None,
                    help="open every page once before the measured pass (default on; off with --quick)")
    ap.add_argument("--max-seconds", type=float, help="overall time budget: the run stops by itself (default 1800)")
    ap.add_argument("--repo", type=Path, default=ROOT, help="the checkout to serve (default: this one)")
    ap.add_argument("--address", default="127.0.0.1", help="loopback address to listen on (anything else is refused)")
    ap.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    ap.add_argument("--out", type=Path, help="output folder (default results/, or test-results/page_cost/ with --quick)")
    ap.add_argument("--name", default="page_cost", help="file names: <out>/<name>.md and .json (default page_cost)")
    ap.add_argument("--note", default="", help="a sentence put at the top of the report")
    return ap


def parse_args(argv=None) -> argparse.Namespace:
    args = build_parser().parse_args(argv)
    defaults = dict(DEFAULTS)
    if args.quick:
        defaults.update(QUICK)
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.out is None:
        args.out = ROOT / ("test-results/page_cost" if args.quick else "results")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", args.name):
        raise SystemExit(f"--name {args.name!r}: use letters, digits, '_', '-', '.'")
    if args.steps < 0 or args.play_seconds < 0:
        raise SystemExit("--steps and --play-seconds must be >= 0")
    args.repo = args.repo.resolve()
    if not (args.repo / "apps" / "main.py").is_file():
        raise SystemExit(f"--repo {args.repo}: no apps/main.py there")
    known = page_slugs(args.repo)
    if args.pages:
        args.page_list = [p.strip() for p in args.pages.split(",") if p.strip() and p.strip() != HOME]
        unknown = [p for p in args.page_list if p not in known]
        if unknown:
            raise SystemExit(f"unknown page(s) {', '.join(unknown)}; the pages are: {', '.join(known)}")
    else:
        args.page_list = [p for p in QUICK_PAGES if p in known] if args.quick else known
    return args


def run(args, log) -> dict:
    address = check_loopback(args.address)
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        raise SystemExit(f"chromium not found at {CHROMIUM}: apt-get install -y chromium (never `playwright install`)")
    t_start = time.monotonic()
    deadline = t_start + args.max_seconds
    port = args.port or free_port(address)
    base = base_url(address, port)
    slugs = [HOME] + list(args.page_list)
    command = " ".join([".venv/bin/python", "benchmarks/page_cost.py"] + [shlex.quote(a) for a in sys.argv[1:]])
    machine = machine_info()
    machine["loadavg_1min_start"] = os.getloadavg()[0]
    machine["git_commit"] = _git(args.repo, "rev-parse", "HEAD")
    machine["git_dirty"] = bool(_git(args.repo, "status", "--porcelain", "--untracked-files=no"))
    res = {"name": args.name, "command": command, "note": args.note, "budgets_def": BUDGETS, "pages": [],
           "date_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), "machine": machine,
           "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
           "served": {"repo": str(args.repo)}, "browser_errors": []}
    res["settings"]["port"] = port
    setup_fd, setup_path = tempfile.mkstemp(prefix="page_cost_setup_", suffix=".py")
    with os.fdopen(setup_fd, "w") as f:
        f.write(SETUP_SCRIPT)
    log_fd, log_path = tempfile.mkstemp(prefix=f"page_cost_{port}_", suffix=".log")
    res["server_log"] = {"path": log_path}
    own0, machine0, t_m0 = _own_cpu_s(), machine_cpu_s(), time.monotonic()
    server0 = None
    meter = None
    with os.fdopen(log_fd, "w") as log_file:
        proc, shown = start_server(args.repo, port, address, setup_path, log_file)
        res["served"]["command"] = shown
        try:
            log(f"server: {shown}; pid {proc.pid}; log {log_path}")
            res["server_start_s"] = wait_liveness(base, proc, LIVENESS_TIMEOUT_S)
            text = Path(log_path).read_text(errors="replace")
            m = SETUP_LINE.search(text)
            res["served"]["explorer"] = m.group(1).strip() if m else None
            origin = Path(m.group(1).strip()).resolve() if m and m.group(1).strip() != "None" else None
            if origin is None or args.repo not in origin.parents:
                raise RuntimeError(f"the server's `explorer` is {origin}, not {args.repo}'s: refusing to measure it")
            log(f"liveness after {res['server_start_s']:.1f} s; explorer from {origin}")
            meter = CpuMeter(proc.pid)
            server0 = meter()
            _browse(args, res, base, slugs, meter, deadline, log)
        except KeyboardInterrupt:
            res["error"] = "interrupted (Ctrl-C, SIGTERM or the time budget)"
            log("!! interrupted")
        except Exception as exc:  # noqa: BLE001 - the report says what went wrong
            res["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            log(f"!! {res['error']}")
        finally:
            server1 = meter() if meter is not None else None
            own1, machine1, t_m1 = _own_cpu_s(), machine_cpu_s(), time.monotonic()
            stop_server(proc, meter.pids if meter is not None else ())
            log("server stopped")
            os.unlink(setup_path)
    if server0 is not None and server1 is not None and t_m1 > t_m0:
        others = (machine1 - machine0) - (server1 - server0) - (own1 - own0)
        res["machine"]["others_cores"] = max(0.0, others) / (t_m1 - t_m0)
    res["elapsed_s"] = time.monotonic() - t_start
    res["machine"]["loadavg_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    try:
        res["server_log"].update(scan_log(Path(log_path).read_text(errors="replace")))
    except OSError:
        pass
    res["budgets"] = budgets(res["pages"])
    return res


def _browse(args, res, base, slugs, meter, deadline, log) -> None:
    from playwright.sync_api import sync_playwright

    errors = res["browser_errors"]
    rows = {slug: {"slug": slug, "notes": []} for slug in slugs}
    res["pages"] = [rows[s] for s in slugs]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        res["machine"]["chromium"] = browser.version
        sessions: list[Session] = []
        try:
            if args.warmup:
                log("cold pass: every page once (imports, caches)")
                for slug in slugs:
                    if time.monotonic() > deadline:
                        raise KeyboardInterrupt
                    s, rec = measure_open(browser, base, slug, meter, args.open_cap, errors, log)
                    sessions.append(s)
                    rows[slug]["cold"] = rec
                log(f"closing the cold sessions; waiting {DISCARD_WAIT_S:g} s for the server to discard them")
                for s in sessions:
                    s.close()
                sessions = []
                c0 = meter()
                time.sleep(DISCARD_WAIT_S)
                res["cold_close_cpu_s"] = meter() - c0
            log("measured pass: one new session per page")
            for slug in slugs:
                if time.monotonic() > deadline:
                    raise KeyboardInterrupt
                s = measure_page(args, browser, base, slug, rows[slug], meter, errors, log)
                sessions.append(s)
                busy_note(rows[slug])
            # the sessions stay open until here: the server's idle cost with all of them, then their cleanup
            after = {"sessions_open": len(sessions), "close_seconds": args.close_seconds}
            c0, t0 = meter(), time.monotonic()
            time.sleep(3.0)
            after["idle_cores"] = (meter() - c0) / (time.monotonic() - t0)
            res["after"] = after
            for s in sessions:
                s.close()
            sessions = []
            if args.close_seconds:
                log(f"closed every session; sampling the cleanup for {args.close_seconds:g} s")
                c0 = meter()
                time.sleep(args.close_seconds)
                after["close_cpu_s"] = meter() - c0
        finally:
            for s in sessions:
                s.close()
            try:
                browser.close()
            except Exception:  # noqa: BLE001
                pass


def measure_page(args, browser, base: str, slug: str, row: dict, meter: CpuMeter, errors: list, log) -> Session:
    """The measured pass on one page: open it in a new session, then Step and Play it if it has them."""
    s, rec = measure_open(browser, base, slug, meter, args.open_cap, errors, log)
    row["open"] = rec
    if not args.warmup:
        row["cold"] = rec
    if rec.get("error"):
        row["notes"].append(f"open: {rec['error']}")
        return s
    if rec.get("capped"):
        row["notes"].append(f"open: not quiet after {args.open_cap:g} s (cap): the CPU is counted to the cap")
    if rec.get("settle_s", 0) > rec.get("wall_s", 0) + 2.0:
        row["notes"].append(f"open: the server kept computing {rec['settle_s'] - rec['wall_s']:.1f} s after the render")
    if slug == HOME:
        row["notes"].append("reference: the gallery's home page")
        return s
    try:
        first = s.readout()
        if first is not None and _total(first) > 0:
            row["notes"].append(f"plays by itself at open (to iteration {first['iterations'][0]}"
                                f"{' ' + first['reasons'][0] if first['reasons'][0] else ''}; counted in open)")
        if not s.has("Step"):
            return s
        if args.steps:
            row["step"] = measure_steps(s, meter, args.steps, row["notes"], log)
        if args.play_seconds and s.readout() is not None and (s.has("Play") or s.has("Pause")):
            row["play"] = measure_play(s, meter, args.play_seconds, row["notes"], log)
    except Exception as exc:  # noqa: BLE001 - the next page is measured anyway
        row["notes"].append(f"error: {str(exc).splitlines()[0][:200]}")
        log(f"  !! {slug}: {row['notes'][-1]}")
        _safe_pause(s)
    return s


BUSY_CORES = 0.5  # other processes using more than this during a page's measures: said in its notes


def busy_note(row: dict) -> None:
    """Say in the page's notes when other processes used the machine while it was measured."""
    loads = [(what, (row.get(what) or {}).get("load")) for what in ("open", "step", "play")]
    loads = [(what, load["others_cores"]) for what, load in loads if load]
    worst = max(loads, key=lambda x: x[1], default=None)
    if worst is not None and worst[1] > BUSY_CORES:
        row["notes"].append(f"machine busy: other processes used {worst[1]:.1f} cores during {worst[0]}")


def _safe_pause(s: Session) -> None:
    try:
        _pause(s)
    except Exception:  # noqa: BLE001
        pass


def _jsonable(obj):
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    return obj


def write_results(res: dict, out: Path) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out / f"{res['name']}.json", out / f"{res['name']}.md"
    res["json_name"] = json_path.name
    json_path.write_text(json.dumps(_jsonable(res), indent=1, default=str, allow_nan=False) + "\n")
    md_path.write_text(format_markdown(res))
    return md_path, json_path


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        check_loopback(args.address)
    except ValueError as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 2
    if not Path("/proc/self/stat").exists():
        print("this benchmark reads the server's CPU from /proc (Linux only)", file=sys.stderr)
        return 2

    def on_term(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    t0 = time.monotonic()

    def log(msg):
        print(f"[{time.monotonic() - t0:6.1f} s] {msg}", flush=True)

    load1 = os.getloadavg()[0]
    if load1 > 0.5:
        log(f"!! the 1-minute load average is {load1:.2f} (> 0.5): the machine is not quiet; the report says so")
    res = run(args, log)
    print()
    print(format_console(res))
    if res.get("error"):
        print(f"error: {res['error']}")
    md_path, json_path = write_results(res, args.out)
    print(f"wrote {md_path} and {json_path}")
    failed = [r["slug"] for r in res["pages"] if (r.get("open") or {}).get("cpu_s") is None]
    return 1 if res.get("error") or failed else 0


if __name__ == "__main__":
    sys.exit(main())
