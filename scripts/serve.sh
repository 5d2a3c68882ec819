#!/usr/bin/env bash
# Serve the explorer (apps/main.py is the gallery; `panel serve apps/` is a Bokeh directory app).
#
#   bash scripts/serve.sh                 # http://localhost:5006/apps (this machine only)
#   PORT=8000 bash scripts/serve.sh       # another port
#   bash scripts/serve.sh --dev           # extra flags are passed to `panel serve`
#
# By default the server listens on localhost only: nobody else on the network can reach it.
# In a classroom, open it to the local network (students then use http://<this machine's IP>:5006/apps):
#
#   ADDRESS=0.0.0.0 bash scripts/serve.sh
#
# ADDRESS=0.0.0.0 also accepts websocket connections from any host name the students type (ORIGIN='*');
# set ORIGIN=host:port to accept only that one. Only do this on a network you trust: the gallery has no
# login. NUM_PROCS=N runs N server processes (each with its own memory; see docs/classroom.md).
set -euo pipefail
# shellcheck source=scripts/_env.sh
source "$(dirname "${BASH_SOURCE[0]}")/_env.sh"

PORT="${PORT:-5006}"
ADDRESS="${ADDRESS:-127.0.0.1}"
NUM_PROCS="${NUM_PROCS:-1}"
if [ "$ADDRESS" = 127.0.0.1 ] || [ "$ADDRESS" = localhost ]; then
    ORIGIN="${ORIGIN:-localhost:${PORT}}"
    origins=(--allow-websocket-origin="$ORIGIN" --allow-websocket-origin="127.0.0.1:${PORT}")
else
    ORIGIN="${ORIGIN:-*}"
    origins=(--allow-websocket-origin="$ORIGIN")
fi

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
elif [ "$ADDRESS" = 127.0.0.1 ]; then
    echo ">> only this machine can connect; for a classroom: ADDRESS=0.0.0.0 bash scripts/serve.sh" >&2
fi

# Bokeh's production settings (its docs: "may afford a small performance improvement"): no signature check of
# every on_change callback (Panel links each property of each model: ~15 % of the server's CPU to open a page
# here) and no validation pass over every new document. Set either to true when developing pages.
export BOKEH_PERFORM_ERROR_DIAGNOSTICS="${BOKEH_PERFORM_ERROR_DIAGNOSTICS:-false}"
export BOKEH_VALIDATE_DOC="${BOKEH_VALIDATE_DOC:-false}"

# Memory a class leaves behind. With Python's own small-object allocator, the 1 MiB arenas a class of thirty
# filled stay mapped after everyone left as long as a few long-lived objects sit in each of them: the server
# stayed 11 % above its warm size after a class (no object leaked; a second class added < 1 %). With glibc's
# malloc for every object (PYTHONMALLOC=malloc; two arenas), the trim after the last session closed returns
# it: +1 % after a class, for about 10 % more CPU to open a page (docs/NOTES.md, 2026-11-28). Set
# PYTHONMALLOC=pymalloc to trade the memory back for that CPU.
export PYTHONMALLOC="${PYTHONMALLOC:-malloc}"
export MALLOC_ARENA_MAX="${MALLOC_ARENA_MAX:-2}"

exec .venv/bin/panel serve apps/ \
    --port "$PORT" \
    --address "$ADDRESS" \
    "${origins[@]}" \
    --num-procs "$NUM_PROCS" \
    --num-threads 4 \
    --check-unused-sessions 5000 \
    --unused-session-lifetime 10000 \
    --liveness \
    "${static_args[@]}" \
    "$@"
