#!/usr/bin/env bash
# Open the notebooks in JupyterLab, run from the project's own environment (.venv), so the kernel,
# Panel and its JupyterLab extension are the ones the tests use. Works offline: the notebooks load
# their JavaScript inline (pn.extension(inline=True)).
#
#   bash scripts/notebooks.sh                 # http://localhost:8888/lab?token=... (printed below)
#   PORT=8890 bash scripts/notebooks.sh       # another port
#   bash scripts/notebooks.sh --ServerApp.token=''   # extra flags are passed to `jupyter lab`
#
# Listens on localhost only. JupyterLab is in the [test] and [notebooks] extras of pyproject.toml;
# it is installed here if missing.
set -euo pipefail
# shellcheck source=scripts/_env.sh
source "$(dirname "${BASH_SOURCE[0]}")/_env.sh"

if [ ! -x .venv/bin/jupyter-lab ]; then
    echo ">> installing JupyterLab into .venv (pip install -e '.[notebooks]')" >&2
    .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[notebooks]' \
        || _explorer_die "pip install -e '.[notebooks]' failed (see above)"
fi

PORT="${PORT:-8888}"
root=()
if [ "$(id -u)" -eq 0 ]; then root=(--allow-root); fi  # containers often run as root

echo ">> JupyterLab on notebooks/ at http://localhost:${PORT}/lab (open the URL with the token printed below)" >&2
exec .venv/bin/jupyter lab \
    --no-browser \
    --ServerApp.ip=127.0.0.1 \
    --ServerApp.port="$PORT" \
    --ServerApp.root_dir=notebooks \
    --LabApp.news_url= \
    --LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate \
    "${root[@]}" \
    "$@"
