#!/usr/bin/env bash
# Serve the explorer (apps/main.py is the gallery; `panel serve apps/` is a Bokeh directory app).
#
#   bash scripts/serve.sh                 # http://localhost:5006/apps
#   PORT=8000 bash scripts/serve.sh       # another port
#   bash scripts/serve.sh --dev           # extra flags are passed to `panel serve`
#
# Listens on all interfaces and accepts websocket connections from any origin, so it also works
# behind port forwarding (containers, remote classroom machines).
set -euo pipefail
# shellcheck source=scripts/_env.sh
source "$(dirname "${BASH_SOURCE[0]}")/_env.sh"

PORT="${PORT:-5006}"
ADDRESS="${ADDRESS:-0.0.0.0}"

[ -f apps/main.py ] || _explorer_die "apps/main.py is missing: 'panel serve apps/' needs it (the gallery page)."

# Optional static folders (argparse: --static-dirs takes several KEY=VALUE, so it comes after apps/).
static=()
if [ -d assets ]; then static+=("assets=assets"); fi
if [ -d assets/thumbnails ]; then static+=("thumbnails=assets/thumbnails"); fi
static_args=()
if [ "${#static[@]}" -gt 0 ]; then
    static_args=(--static-dirs "${static[@]}")
fi

echo ">> explorer: http://localhost:${PORT}/apps  (listening on ${ADDRESS}:${PORT}; Ctrl-C to stop)" >&2
host_ip="$(hostname -I 2>/dev/null | awk '{print $1}' || true)"
if [ -n "$host_ip" ] && [ "$ADDRESS" = 0.0.0.0 ]; then
    echo ">> from another machine: http://${host_ip}:${PORT}/apps" >&2
fi

exec .venv/bin/panel serve apps/ \
    --port "$PORT" \
    --address "$ADDRESS" \
    --allow-websocket-origin='*' \
    --num-threads 4 \
    --liveness \
    "${static_args[@]}" \
    "$@"
