"""Commands in a pod's container through the API (exec over WebSocket)."""

from __future__ import annotations

import tempfile
import time
from typing import IO, Any, Final

from kubernetes import client
from kubernetes.stream.ws_client import ERROR_CHANNEL, STDOUT_CHANNEL, websocket_call

from ssebench.backends.k8s._api import api_errors
from ssebench.spec import PlatformRefusedError, PlatformTimeoutError

_SPOOL: Final = 8 * 1024 * 1024

NOT_STARTED: Final = ("container not found", "does not have a host assigned")
"""What an exec is answered while its pod is not scheduled or its container not made yet:
the kubelet finds containers in the runtime itself, so an exec works as soon as the
container runs, before the pod's status says so (up to a second later: the kubelet
learns of container changes by listing them every second)."""


def run_in(
    core: client.CoreV1Api | client.ApiClient,
    namespace: str,
    pod: str,
    container: str,
    command: list[str],
    timeout: float = 60,
    *,
    until_started: float = 0,
) -> tuple[int, IO[bytes]]:
    """Run `command`; its exit status and its stdout (a spooled file, rewound).

    With `until_started`, an exec refused because the container does not run yet is
    tried again, every 50 ms, for that many seconds; so is one refused with a bare 400
    (the answer before the pod is scheduled), and so is any command the runtime could
    not start (126: a container being started on a busy node refuses exec in other
    words than NOT_STARTED's). Use it only on a pod and container known to exist.

    Raises:
        PlatformTimeoutError: it did not finish in `timeout` seconds.
        BackendError: the cluster refused the exec.
    """
    started = time.monotonic() + until_started
    while True:
        try:
            code, out, error = _exec(core, namespace, pod, container, command, timeout)
        except PlatformRefusedError as exc:
            if not until_started or "400" not in str(exc) or time.monotonic() > started:
                raise
        else:
            if code != 126 or not (until_started or any(why in error for why in NOT_STARTED)):
                return code, out
            out.close()
        if time.monotonic() > started:
            raise PlatformTimeoutError(f"{pod}/{container} did not start in {until_started:g}s")
        time.sleep(0.05)


def _exec(
    core: client.CoreV1Api | client.ApiClient,
    namespace: str,
    pod: str,
    container: str,
    command: list[str],
    timeout: float,
) -> tuple[int, IO[bytes], str]:
    out: IO[bytes] = tempfile.SpooledTemporaryFile(max_size=_SPOOL)  # noqa: SIM115
    # The WebSocket call `kubernetes.stream` makes, without the generated `CoreV1Api`
    # (half a second of imports, see _rest) and without swapping the transport of a
    # shared client (a log request made meanwhile by another thread would go out as a
    # WebSocket upgrade and fail).
    api = core if isinstance(core, client.ApiClient) else core.api_client
    query = [("container", container), *(("command", word) for word in command)]
    query += [("stdin", "false"), ("stdout", "true"), ("stderr", "false"), ("tty", "false")]
    method, url, headers, _, _ = api.param_serialize(
        method="GET",
        resource_path=f"/api/v1/namespaces/{namespace}/pods/{pod}/exec",
        query_params=query,
        header_params={},
        auth_settings=["BearerToken"],
    )
    with api_errors(f"running a command in {pod}/{container}"):
        ws: Any = websocket_call(  # type: ignore[no-untyped-call]
            api.configuration, method, url, headers=headers, _preload_content=False, binary=True
        )
        deadline = time.monotonic() + timeout
        try:
            while ws.is_open():
                if time.monotonic() > deadline:
                    raise PlatformTimeoutError(f"a command in {pod} did not finish in {timeout}s")
                ws.update(timeout=1)
                out.write(ws.read_channel(STDOUT_CHANNEL, timeout=0) or b"")
            out.write(ws.read_channel(STDOUT_CHANNEL, timeout=0) or b"")
            # Looked at first: `returncode` consumes it.
            error = bytes(ws.peek_channel(ERROR_CHANNEL, timeout=0) or b"").decode(errors="replace")
            try:
                code = ws.returncode
            except (ValueError, KeyError, TypeError):
                code = 126  # the runtime could not start the command (the client cannot parse why)
        finally:
            ws.close()
    out.seek(0)
    return (code if code is not None else 1), out, error
