#!/usr/bin/env bash
# Run the whole test suite: unit/property tests and browser tests (Playwright + Debian chromium),
# among them every notebook run in JupyterLab (tests/browser/test_jupyterlab.py).
#
#   bash scripts/test.sh                  # everything: tests/ (non-browser tests on 2 workers, browser tests beside)
#   bash scripts/test.sh -x -q            # same selection, extra pytest options (given to both phases)
#   bash scripts/test.sh tests/core -q    # explicit paths: one pytest run, options unchanged
#
# EXPLORER_TEST_WORKERS=1 runs the non-browser phase on one worker. Exit status is pytest's (the first failing phase's). Never downloads a browser (no `playwright install`); waits for apt's lock
# when another process holds it. Screenshots go to test-results/ (ignored): a run rewrites no tracked file
# (scripts/refresh_screenshots.sh updates the documentation's pictures).
set -euo pipefail
# shellcheck source=scripts/_env.sh
source "$(dirname "${BASH_SOURCE[0]}")/_env.sh"

# Hypothesis runs the same examples every time (the "ci" profile of tests/conftest.py: derandomised), so a run of
# this command is reproducible wherever it runs; HYPOTHESIS_PROFILE=explorer draws new examples each run (exploring).
export HYPOTHESIS_PROFILE="${HYPOTHESIS_PROFILE:-ci}"

CHROMIUM="${EXPLORER_CHROMIUM:-/usr/bin/chromium}"
if [ ! -x "$CHROMIUM" ]; then
    if [ -n "${EXPLORER_CHROMIUM:-}" ]; then
        _explorer_die "EXPLORER_CHROMIUM=$EXPLORER_CHROMIUM is not an executable."
    fi
    command -v apt-get >/dev/null 2>&1 \
        || _explorer_die "/usr/bin/chromium is missing and apt-get is not available; install Chromium."
    echo ">> /usr/bin/chromium missing: installing Debian's chromium with apt-get" >&2
    _explorer_apt update
    _explorer_apt install -y chromium \
        || _explorer_die "apt-get install -y chromium failed"
    [ -x /usr/bin/chromium ] || _explorer_die "chromium installed but /usr/bin/chromium is missing"
fi

# Default targets unless the caller named a path (an argument that exists on disk, with an
# optional ::test suffix). Notebooks are added only when there is at least one.
have_target=0
for arg in "$@"; do
    case "$arg" in
        -*) ;;
        *) if [ -e "${arg%%::*}" ]; then have_target=1; fi ;;
    esac
done

# The notebooks run (every cell, offline) inside a real JupyterLab in tests/browser/test_jupyterlab.py,
# which also checks their pages; running them a second time with nbmake only cost time (about 95 s).
# `bash scripts/test.sh notebooks --nbmake` still runs them headless on their own.
if [ "$have_target" = 1 ]; then
    echo ">> .venv/bin/python -m pytest --durations=25 $*" >&2
    exec .venv/bin/python -m pytest --durations=25 "$@"
fi

# Everything, in two phases that run at the same time (the slowest tests are listed at the end of each):
#  1. the unit / property / oracle tests on 2 pytest-xdist workers, a whole file per worker (--dist loadfile:
#     module fixtures such as the garriga2017 reproduction are computed once, not once per worker);
#  2. the browser tests, one at a time (one chromium; no browser test asserts a duration), beside phase 1: a
#     browser test mostly waits for pages to load and draw (the two cores were 35-50 % idle while they ran
#     alone), so the whole run is shorter than the two phases one after the other.
# Phase 2's output is shown after phase 1's (kept in test-results/, ignored by git). EXPLORER_TEST_SERIAL=1 runs
# the phases one after the other. The exit status is non-zero if either phase fails; both always run.
workers="${EXPLORER_TEST_WORKERS:-2}"
# One BLAS / OpenMP thread per process: the two workers and the browser phase already fill the two cores, and
# OpenBLAS's extra threads, spinning while they wait for work, starved the other processes (a run of the
# non-browser tests alone: 487 s with OpenBLAS's 2 threads per worker, 339 s with one). Set them to override.
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}" OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" \
    MKL_NUM_THREADS="${MKL_NUM_THREADS:-1}"
mkdir -p test-results
browser_log=test-results/browser-phase.log
browser_cmd=(.venv/bin/python -m pytest tests/browser --durations=25 "$@")
unit=0 browser=0
if [ "${EXPLORER_TEST_SERIAL:-0}" = 1 ]; then
    echo ">> ${browser_cmd[*]} (after the non-browser tests)" >&2
else
    echo ">> ${browser_cmd[*]} (beside the non-browser tests; its output follows theirs)" >&2
    "${browser_cmd[@]}" >"$browser_log" 2>&1 &
    browser_pid=$!
    trap 'kill "$browser_pid" 2>/dev/null || true' INT TERM  # an interrupted run leaves no browser phase behind
fi
echo ">> .venv/bin/python -m pytest tests --ignore=tests/browser -n $workers --dist loadfile --durations=25 $*" >&2
# (pytest's 5, "no test collected", e.g. a -k matching one phase only, counts as failure only if both say it)
.venv/bin/python -m pytest tests --ignore=tests/browser -n "$workers" --dist loadfile --durations=25 "$@" || unit=$?
if [ "${EXPLORER_TEST_SERIAL:-0}" = 1 ]; then
    "${browser_cmd[@]}" || browser=$?
else
    wait "$browser_pid" || browser=$?
    echo ">> browser tests (${browser_cmd[*]}):" >&2
    cat "$browser_log"
fi
if [ "$unit" = 5 ] && [ "$browser" = 5 ]; then exit 5; fi
[ "$unit" = 5 ] && unit=0
[ "$browser" = 5 ] && browser=0
if [ "$unit" != 0 ]; then exit "$unit"; fi
exit "$browser"
