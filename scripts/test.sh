#!/usr/bin/env bash
# Run the whole test suite: unit/property tests and browser tests (Playwright + Debian chromium),
# among them every notebook run in JupyterLab (tests/browser/test_jupyterlab.py).
#
#   bash scripts/test.sh                  # everything: tests/ (non-browser tests on 2 workers, then browser tests)
#   bash scripts/test.sh -x -q            # same selection, extra pytest options (given to both phases)
#   bash scripts/test.sh tests/core -q    # explicit paths: one pytest run, options unchanged
#
# EXPLORER_TEST_WORKERS=1 runs the non-browser phase on one worker. Exit status is pytest's (the first failing phase's). Never downloads a browser (no `playwright install`); waits for apt's lock
# when another process holds it. Screenshots go to test-results/ (ignored): a run rewrites no tracked file
# (scripts/refresh_screenshots.sh updates the documentation's pictures).
set -euo pipefail
# shellcheck source=scripts/_env.sh
source "$(dirname "${BASH_SOURCE[0]}")/_env.sh"

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

# Everything, in two phases (the slowest tests are listed at the end of each):
#  1. the unit / property / oracle tests on 2 pytest-xdist workers, a whole file per worker (--dist loadfile:
#     module fixtures such as the garriga2017 reproduction are computed once, not once per worker);
#  2. the browser tests, one at a time: they time pages and players, and two chromiums on 2 cores would make
#     those timings measure the load instead of the app.
# The exit status is non-zero if either phase fails; both always run.
workers="${EXPLORER_TEST_WORKERS:-2}"
echo ">> .venv/bin/python -m pytest tests --ignore=tests/browser -n $workers --dist loadfile --durations=25 $*" >&2
# (pytest's 5, "no test collected", e.g. a -k matching one phase only, counts as failure only if both say it)
unit=0 browser=0
.venv/bin/python -m pytest tests --ignore=tests/browser -n "$workers" --dist loadfile --durations=25 "$@" || unit=$?
echo ">> .venv/bin/python -m pytest tests/browser --durations=25 $*" >&2
.venv/bin/python -m pytest tests/browser --durations=25 "$@" || browser=$?
if [ "$unit" = 5 ] && [ "$browser" = 5 ]; then exit 5; fi
[ "$unit" = 5 ] && unit=0
[ "$browser" = 5 ] && browser=0
if [ "$unit" != 0 ]; then exit "$unit"; fi
exit "$browser"
