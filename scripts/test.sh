#!/usr/bin/env bash
# Run the whole test suite: unit/property tests and browser tests (Playwright + Debian chromium),
# among them every notebook run in JupyterLab (tests/browser/test_jupyterlab.py).
#
#   bash scripts/test.sh                  # everything: tests/
#   bash scripts/test.sh -x -q            # same selection, extra pytest options
#   bash scripts/test.sh tests/core -q    # explicit paths: passed to pytest unchanged
#
# Exit status is pytest's. Never downloads a browser (no `playwright install`); waits for apt's lock
# when another process holds it. Screenshots go to test-results/ (ignored): a run rewrites no tracked file
# (scripts/refresh_screenshots.sh updates the README's pictures).
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
targets=()
if [ "$have_target" = 0 ]; then
    targets=(tests)
fi

# the slowest tests are listed at the end of every run (keep the suite fast as the project grows)
echo ">> .venv/bin/python -m pytest ${targets[*]} --durations=25 $*" >&2
exec .venv/bin/python -m pytest "${targets[@]}" --durations=25 "$@"
