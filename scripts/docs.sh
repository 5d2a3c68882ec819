#!/usr/bin/env bash
# Build the documentation site offline into docs/_build/html (Sphinx, pydata-sphinx-theme, numpydoc, MyST).
#
#   bash scripts/docs.sh            # warnings are errors: a broken reference or docstring fails the build
#   bash scripts/docs.sh -q         # extra options go to sphinx-build
#
# The API pages are generated into docs/api/ (ignored by git) from the docstrings at every build. The notebooks are
# rendered from docs/notebooks/*.ipynb as stored (text outputs of a run; `scripts/make_notebook.py --docs` refreshes
# them), never executed here: the build stays offline and under two minutes.
set -euo pipefail
# shellcheck source=scripts/_env.sh
source "$(dirname "${BASH_SOURCE[0]}")/_env.sh"

out="${EXPLORER_DOCS_OUT:-docs/_build/html}"
rm -rf docs/api
exec .venv/bin/python -m sphinx -b html -E -W --keep-going -j auto "$@" docs "$out"
