# Shared by the set-up scripts: where SSEBench keeps its tools, and how it finds uv.
# shellcheck shell=bash

SSEBENCH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SSEBENCH_TOOLS=${SSEBENCH_TOOLS:-$HOME/.local/share/ssebench}
UV_LINK_DIR=${SSEBENCH_UV_LINK_DIR:-/usr/local/bin}
export UV_PYTHON_DOWNLOADS=never

say() { printf 'setup: %s\n' "$*" >&2; }

# uv from PyPI, in a venv of its own, when none is on PATH.
ensure_uv() {
    if command -v uv >/dev/null 2>&1; then
        UV=$(command -v uv)
        return
    fi
    UV=$SSEBENCH_TOOLS/uv/bin/uv
    if [ ! -x "$UV" ]; then
        say "installing uv from PyPI into $SSEBENCH_TOOLS/uv"
        python3 -m venv "$SSEBENCH_TOOLS/uv"
        "$SSEBENCH_TOOLS/uv/bin/pip" install --quiet --disable-pip-version-check uv
    fi
}

# The README's commands are `uv run ...`: put the uv found or installed on PATH.
link_uv() {
    if command -v uv >/dev/null 2>&1; then
        return
    fi
    if [ -d "$UV_LINK_DIR" ] && [ -w "$UV_LINK_DIR" ]; then
        ln -sf "$UV" "$UV_LINK_DIR/uv"
        say "uv linked into $UV_LINK_DIR (on PATH)"
    else
        say "uv is $UV: add $(dirname "$UV") to PATH for the README's 'uv run' commands"
    fi
}
