"""`exec_argv`'s command: a small exec client over the API (`python -m` this module).

kubectl is not needed (nor trusted to be on PATH), and `kubectl exec` can neither
switch user nor set the environment. This client does both without a value on any
command line, here or in the container:

1. with `--env NAME`, it reads each value from its own environment and sends them,
   NUL-separated, on the stdin of a first exec, which stores them in a fresh
   root-only directory under /tmp (`mkdir` refuses a name that exists; the name is
   random, in a sticky directory, so no other user can put or read anything there);
2. the second exec runs `WRAPPER` under bash as the container's user (root): it
   reads and deletes that file, exports the values, changes to the working
   directory, drops to `--user` (setpriv, else the SSEBench runtime's Python) and
   execs the command, whose arguments never pass through a shell.

Its stdin, stdout and stderr are this process's; with `--tty` the local terminal is
put in raw mode and its size follows SIGWINCH. It exits with the command's status,
126 when the command could not be started in the container, 125 when the client
itself failed (one line on stderr).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import signal
import sys
import termios
import threading
import tty
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final

FAILED: Final = 125
"""The client's own failure (no cluster, no such pod, a refused exec)."""

CANNOT_RUN: Final = 126
"""The command could not be started in the container."""

WRAPPER: Final = r"""
user=$1 workdir=$2 envdir=$3
shift 3
if [ -n "$envdir" ]; then
    while IFS= read -r -d '' pair; do export "$pair"; done < "$envdir/env"
    rm -rf -- "$envdir"
fi
if [ -n "$workdir" ]; then cd -- "$workdir" || exit 126; fi
if [ -n "$user" ]; then
    uid=$(id -u -- "$user" 2>/dev/null) && gid=$(id -g -- "$user" 2>/dev/null) \
        || { echo "ssebench: there is no user $user in the container" >&2; exit 126; }
    home=$(getent passwd "$uid" 2>/dev/null | cut -d: -f6)
    if [ -n "$home" ]; then export HOME="$home"; fi
    if command -v setpriv >/dev/null 2>&1; then
        exec setpriv --reuid="$uid" --regid="$gid" --init-groups -- "$@"
    fi
    if [ -x /opt/ssebench/bin/python3.11 ]; then
        exec /opt/ssebench/bin/python3.11 -I -c '
import os, sys
uid, gid, name = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
os.initgroups(name, gid); os.setgid(gid); os.setuid(uid)
os.execvp(sys.argv[4], sys.argv[4:])' "$uid" "$gid" "$user" "$@"
    fi
    echo "ssebench: cannot become $user in the container (no setpriv, no SSEBench runtime)" >&2
    exit 126
fi
exec "$@"
"""
"""Run by bash in the container: environment, working directory, user, then the command."""

_STAGE: Final = 'umask 077 && mkdir -- "$1" && head -c "$2" > "$1/env"'
"""Stores the environment's values (stdin) in a new root-only directory."""


def argv(
    namespace: str,
    pod: str,
    container: str,
    command: Sequence[str],
    *,
    user: str | None,
    workdir: str | None,
    tty: bool,
    stdin: bool,
    env_names: Sequence[str],
) -> list[str]:
    """The local command that runs `command` in the container (no value of `env_names`)."""
    line = [sys.executable, "-I", "-m", __name__, "--namespace", namespace, "--pod", pod]
    line += ["--container", container]
    # The caller may run it with an environment of its own: the cluster is this one's.
    files = [Path(p) for p in (os.environ.get("KUBECONFIG") or "~/.kube/config").split(os.pathsep)]
    if any(path.expanduser().is_file() for path in files):
        line += ["--kubeconfig", os.pathsep.join(str(p.expanduser().absolute()) for p in files)]
    if user:
        line += ["--user", user]
    if workdir:
        line += ["--workdir", workdir]
    if tty:
        line.append("--tty")
    if stdin:
        line.append("--stdin")
    for name in env_names:
        line += ["--env", name]
    return [*line, "--", *command]


def _exec(core: Any, args: argparse.Namespace, command: list[str], **streams: bool) -> Any:
    from kubernetes.stream import stream

    return stream(
        core.connect_get_namespaced_pod_exec,
        args.pod,
        args.namespace,
        container=args.container,
        command=command,
        binary=True,
        _preload_content=False,
        **streams,
    )


def _stage_env(core: Any, args: argparse.Namespace, values: dict[str, str]) -> str:
    """Store the values in the container; the directory that holds them."""
    from kubernetes.stream.ws_client import STDERR_CHANNEL

    payload = b"".join(f"{name}={value}".encode() + b"\0" for name, value in values.items())
    folder = f"/tmp/.ssebench-exec-{secrets.token_hex(16)}"
    ws = _exec(
        core,
        args,
        ["/bin/sh", "-c", _STAGE, "stage", folder, str(len(payload))],
        stdin=True,
        stdout=False,
        stderr=True,
        tty=False,
    )
    said = b""
    try:
        ws.write_stdin(payload)
        while ws.is_open():
            ws.update(timeout=1)
            said += ws.read_channel(STDERR_CHANNEL, timeout=0) or b""
        code = ws.returncode
    finally:
        ws.close()
    if code != 0:
        why = said.decode(errors="replace").strip().splitlines()[-1:] or ["no reason given"]
        raise RuntimeError(f"could not pass the environment into the container: {why[0][:200]}")
    return folder


@contextlib.contextmanager
def _raw_terminal(enabled: bool) -> Iterator[None]:
    if not (enabled and os.isatty(0)):
        yield
        return
    saved = termios.tcgetattr(0)
    tty.setraw(0)
    try:
        yield
    finally:
        termios.tcsetattr(0, termios.TCSADRAIN, saved)


def _size() -> dict[str, int] | None:
    for fd in (0, 1, 2):
        with contextlib.suppress(OSError):
            columns, lines = os.get_terminal_size(fd)
            return {"Width": columns, "Height": lines}
    return None


def _pump_stdin(ws: Any) -> None:
    from kubernetes.stream.ws_client import STDIN_CHANNEL, V5_CHANNEL_PROTOCOL

    with contextlib.suppress(Exception):
        while data := os.read(0, 65536):
            ws.write_channel(STDIN_CHANNEL, data)
        if ws.subprotocol == V5_CHANNEL_PROTOCOL:
            ws.close_channel(STDIN_CHANNEL)


def _interact(core: Any, args: argparse.Namespace, command: list[str]) -> int:
    from kubernetes.stream.ws_client import RESIZE_CHANNEL, STDERR_CHANNEL, STDOUT_CHANNEL

    ws = _exec(
        core, args, command, stdin=args.stdin, stdout=True, stderr=not args.tty, tty=args.tty
    )

    def resize(*_: object) -> None:
        size = _size()
        if size is not None:
            with contextlib.suppress(Exception):
                ws.write_channel(RESIZE_CHANNEL, json.dumps(size))

    try:
        with _raw_terminal(args.tty):
            if args.tty:
                resize()
                signal.signal(signal.SIGWINCH, resize)
            if args.stdin:
                threading.Thread(target=_pump_stdin, args=(ws,), daemon=True).start()
            while ws.is_open():
                ws.update(timeout=0.2)
                for channel, fd in ((STDOUT_CHANNEL, 1), (STDERR_CHANNEL, 2)):
                    data = ws.read_channel(channel, timeout=0)
                    if data:
                        os.write(fd, data)
            for channel, fd in ((STDOUT_CHANNEL, 1), (STDERR_CHANNEL, 2)):
                data = ws.read_channel(channel, timeout=0)
                if data:
                    os.write(fd, data)
            try:
                code = ws.returncode
            except (ValueError, KeyError, TypeError):
                code = CANNOT_RUN
    finally:
        ws.close()
    return int(code) if code is not None else 1


def _parse(line: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="ssebench-k8s-exec", add_help=False)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--pod", required=True)
    parser.add_argument("--container", required=True)
    parser.add_argument("--kubeconfig", default="")
    parser.add_argument("--user", default="")
    parser.add_argument("--workdir", default="")
    parser.add_argument("--tty", action="store_true")
    parser.add_argument("--stdin", action="store_true")
    parser.add_argument("--env", action="append", default=[])
    parser.add_argument("command", nargs="+")
    return parser.parse_args(line)


def main(line: Sequence[str] | None = None) -> int:
    """Run the command in the pod's container; its exit status (see the module's docstring)."""
    args = _parse(sys.argv[1:] if line is None else line)
    missing = [name for name in args.env if name not in os.environ]
    if missing:
        print(f"ssebench: {missing[0]} is not set in this environment", file=sys.stderr)
        return FAILED
    if args.kubeconfig:
        os.environ["KUBECONFIG"] = args.kubeconfig
    from kubernetes import client

    from ssebench.backends.k8s._api import api_client, api_errors
    from ssebench.spec import SSEBenchError

    try:
        core = client.CoreV1Api(api_client())
        with api_errors(f"running a command in {args.pod}/{args.container}"):
            folder = ""
            if args.env:
                folder = _stage_env(core, args, {name: os.environ[name] for name in args.env})
            command = ["/bin/bash", "-c", WRAPPER, "ssebench-exec", args.user, args.workdir]
            return _interact(core, args, [*command, folder, *args.command])
    except (SSEBenchError, RuntimeError) as exc:
        print(f"ssebench: {exc}", file=sys.stderr)
        return FAILED


if __name__ == "__main__":
    sys.exit(main())
