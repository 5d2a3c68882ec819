#!/usr/bin/env bash
# Refresh the documentation's pictures (docs/screenshots/*.png: the README's and docs/pages.md's) from the browser tests.
#
#   bash scripts/refresh_screenshots.sh            # every browser test that takes a documentation picture
#   bash scripts/refresh_screenshots.sh -k gallery # extra pytest options
#
# The normal test run (scripts/test.sh) saves its screenshots in test-results/screenshots (ignored by
# git), so it never rewrites a tracked file; this script is the one way to update docs/screenshots.
# Review the result with `git diff --stat docs/screenshots` and commit the pictures you want.
set -euo pipefail
# shellcheck source=scripts/_env.sh
source "$(dirname "${BASH_SOURCE[0]}")/_env.sh"

export EXPLORER_SCREENSHOT_DIR="$REPO_ROOT/docs/screenshots"
tests=()
for f in tests/browser/test_*.py; do
    if grep -q 'screenshot(page, "' "$f"; then tests+=("$f"); fi
done
echo ">> refreshing docs/screenshots from: ${tests[*]}" >&2
exec bash scripts/test.sh "${tests[@]}" "$@"
