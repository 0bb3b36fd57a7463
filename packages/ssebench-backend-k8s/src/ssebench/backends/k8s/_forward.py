"""`endpoint`: a port-forward to 127.0.0.1 that outlives the calling process.

`forward_url` starts this module as a detached process (its own session, no
terminal, output to /dev/null) that listens on a free loopback port and relays
each connection to the pod's port through the API (the client's port-forward
over WebSocket). It records `{"pid", "port"}` in a state file named after the
namespace, pod and port, so the next call reuses it; `stop_forwards` (run by
`cleanup` and `remove`) ends the run's forwarders. A forwarder also ends by
itself once its pod is gone. Only 127.0.0.1 is bound: the daemon's agent-facing
API is unauthenticated, so only this machine's users reach it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Final

from ssebench.spec import BackendError
from ssebench.spec.atomic import write_atomically

_MODULE: Final = "ssebench.backends.k8s._forward"
_START_TIMEOUT: Final = 30.0


def state_dir() -> Path:
    """Where forwarders are recorded: `$XDG_RUNTIME_DIR/ssebench-k8s` or ~/.cache."""
    base = os.environ.get("XDG_RUNTIME_DIR") or str(Path.home() / ".cache")
    return Path(base) / "ssebench" / "k8s-forwards"


def _state_file(namespace: str, pod: str, port: int) -> Path:
    return state_dir() / f"{namespace}.{pod}.{port}.json"


def _ours(pid: int) -> bool:
    """Whether `pid` is a forwarder of ours (not a process that reused its number)."""
    try:
        return _MODULE.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _answers(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
        return True
    return False


def _recorded(path: Path) -> dict[str, int] | None:
    try:
        found: dict[str, int] = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if isinstance(found, dict) and _ours(int(found.get("pid", 0))):
        return found
    return None


def forward_url(namespace: str, pod: str, port: int) -> str:
    """The URL of the run's forwarder for `port`, started if there is none.

    Raises:
        BackendError: the forwarder did not come up.
    """
    path = _state_file(namespace, pod, port)
    found = _recorded(path)
    if found is not None and _answers(found["port"]):
        return f"http://127.0.0.1:{found['port']}"
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.unlink(missing_ok=True)
    argv = [sys.executable, "-m", _MODULE, namespace, pod, str(port), str(path)]
    subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )
    deadline = time.monotonic() + _START_TIMEOUT
    while time.monotonic() < deadline:
        found = _recorded(path)
        if found is not None:
            return f"http://127.0.0.1:{found['port']}"
        time.sleep(0.1)
    raise BackendError(f"the port-forward to {pod}:{port} did not start in {_START_TIMEOUT}s")


def stop_forwards(namespace: str, pod: str) -> None:
    """End every forwarder of the pod and forget it."""
    for path in state_dir().glob(f"{namespace}.{pod}.*.json"):
        found = _recorded(path)
        if found is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(found["pid"], signal.SIGTERM)
        path.unlink(missing_ok=True)


# ---------------------------------------------------------------- the forwarder process


def _pipe(source: Any, target: Any) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            target.sendall(data)
    for end in (source, target):
        with contextlib.suppress(OSError):
            end.shutdown(socket.SHUT_RDWR)


def _serve(namespace: str, pod: str, port: int, state: Path) -> None:
    from kubernetes import client
    from kubernetes.stream import portforward

    from ssebench.backends.k8s._api import api_client

    core = client.CoreV1Api(api_client())
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(5)
    served = {"pid": os.getpid(), "port": listener.getsockname()[1]}
    write_atomically(state, json.dumps(served).encode())
    while True:
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            try:
                core.read_namespaced_pod(pod, namespace)
            except Exception:  # gone or unreachable: this forwarder has no run any more
                break
            continue
        try:
            forward: Any = portforward(
                core.connect_get_namespaced_pod_portforward, pod, namespace, ports=str(port)
            )
            remote = forward.socket(port)
        except Exception:
            conn.close()
            continue
        threading.Thread(target=_pipe, args=(conn, remote), daemon=True).start()
        threading.Thread(target=_pipe, args=(remote, conn), daemon=True).start()
    state.unlink(missing_ok=True)


def main() -> None:
    parser = argparse.ArgumentParser(prog=_MODULE)
    parser.add_argument("namespace")
    parser.add_argument("pod")
    parser.add_argument("port", type=int)
    parser.add_argument("state", type=Path)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    _serve(args.namespace, args.pod, args.port, args.state)


if __name__ == "__main__":
    main()
