# shellcheck shell=bash
# Shared bootstrap for scripts/test.sh and scripts/serve.sh. Source it, don't run it.
#
# After sourcing:
#   * the working directory is the repository root and REPO_ROOT is set;
#   * .venv/ exists (created with `python3 -m venv` if missing, Python >= 3.11);
#   * the package is installed in it with `pip install -e '.[test]'`. pip runs again only when
#     pyproject.toml changed since the last successful install (sha256 kept in .venv/).
#
# Environment knobs:
#   EXPLORER_PYTHON  interpreter used to create the venv (default: first of python3, python3.13,
#                    python3.12, python3.11 on PATH that is >= 3.11)
#   EXPLORER_FORCE_INSTALL=1  reinstall even if pyproject.toml is unchanged

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_ROOT"

_explorer_die() {
    echo "ERROR: $*" >&2
    exit 1
}

_explorer_py_ok() {
    # true if "$1" is a runnable Python >= 3.11
    "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' >/dev/null 2>&1
}

_explorer_pick_python() {
    local cand
    if [ -n "${EXPLORER_PYTHON:-}" ]; then
        _explorer_py_ok "$EXPLORER_PYTHON" \
            || _explorer_die "EXPLORER_PYTHON=$EXPLORER_PYTHON is not a Python >= 3.11."
        echo "$EXPLORER_PYTHON"
        return
    fi
    for cand in python3 python3.13 python3.12 python3.11; do
        if command -v "$cand" >/dev/null 2>&1 && _explorer_py_ok "$cand"; then
            command -v "$cand"
            return
        fi
    done
    _explorer_die "Python >= 3.11 is required to create .venv, but none was found on PATH \
(found: $(python3 --version 2>&1 || echo 'no python3')). On Debian 12: apt-get install -y python3 python3-venv; \
or point EXPLORER_PYTHON at a suitable interpreter."
}

# apt waits for a lock held by another process (unattended upgrades, a second run) instead of failing.
EXPLORER_APT_LOCK_TIMEOUT="${EXPLORER_APT_LOCK_TIMEOUT:-600}"
_explorer_apt() {
    # DPkg::Lock::Timeout makes apt wait for the dpkg lock; a lists lock held by a concurrent
    # `apt-get update` can still fail at once, so a failed call is retried while the timeout lasts.
    local waited=0
    until _explorer_as_root env DEBIAN_FRONTEND=noninteractive \
            apt-get -o "DPkg::Lock::Timeout=${EXPLORER_APT_LOCK_TIMEOUT}" "$@"; do
        if [ "$waited" -ge "$EXPLORER_APT_LOCK_TIMEOUT" ]; then
            return 1
        fi
        echo ">> apt-get $1 failed (another apt holding a lock?); retrying in 10 s" >&2
        sleep 10
        waited=$((waited + 10))
    done
}

_explorer_as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        _explorer_die "need root (or sudo) to run: $*"
    fi
}

_explorer_make_venv() {
    local py err
    py="$(_explorer_pick_python)" || exit 1
    echo ">> creating .venv with $py ($("$py" --version 2>&1))" >&2
    err="$(mktemp)"
    if ! "$py" -m venv .venv 2>"$err"; then
        rm -rf .venv
        # Debian ships ensurepip separately (python3-venv / python3.X-venv).
        if grep -qi 'ensurepip' "$err" && command -v apt-get >/dev/null 2>&1; then
            local ver
            ver="$("$py" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
            echo ">> $py has no ensurepip; installing python${ver}-venv with apt-get" >&2
            _explorer_apt update
            _explorer_apt install -y "python${ver}-venv" \
                || _explorer_die "could not install python${ver}-venv"
            "$py" -m venv .venv || _explorer_die "'$py -m venv .venv' failed"
        else
            cat "$err" >&2
            _explorer_die "'$py -m venv .venv' failed (see above)"
        fi
    fi
    rm -f "$err"
}

if [ ! -x .venv/bin/python ]; then
    _explorer_make_venv
fi
_explorer_py_ok .venv/bin/python \
    || _explorer_die ".venv/bin/python is older than 3.11 or broken; delete .venv and rerun."

_explorer_install() {
    local stamp=.venv/.explorer-pyproject.sha256 want have=""
    want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
    [ -f "$stamp" ] && have="$(cat "$stamp")"
    if [ "$want" != "$have" ] || [ "${EXPLORER_FORCE_INSTALL:-0}" = 1 ]; then
        echo ">> installing explorer into .venv (pip install -e '.[test]')" >&2
        .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]' \
            || _explorer_die "pip install -e '.[test]' failed (see above)"
        echo "$want" >"$stamp"
    fi
}

# Serialise concurrent bootstraps (two test runs started at once must not both run pip).
if command -v flock >/dev/null 2>&1; then
    exec {_explorer_lock_fd}>.venv/.explorer-install.lock
    flock "$_explorer_lock_fd"
    _explorer_install
    flock -u "$_explorer_lock_fd"
    exec {_explorer_lock_fd}>&-
else
    _explorer_install
fi
unset -f _explorer_pick_python _explorer_make_venv _explorer_install _explorer_py_ok
