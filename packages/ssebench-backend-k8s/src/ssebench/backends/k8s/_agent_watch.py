"""A pod's agent container, watched from the API: its end, the checker told, its log.

The checker shares no process namespace with the agent container, so it cannot see
the agent end: the backend tells it (`ssebench.daemon.report`, run in the checker by
exec). The agent's status is its container's exit status; in a kept run, whose
launcher stays up after the agent, the status the launcher prints
(`contract.AGENT_EXIT_LINE`); 124 when the agent outlived its `TIMEOUT` by
`contract.AGENT_SLACK`, after which its kill file ends the container (its liveness probe).
`agent_log` is the container's output capped like every output that reaches the host.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any, Final

from kubernetes import client

from ssebench.backends.k8s import _objects as objects
from ssebench.backends.k8s import _rest as rest
from ssebench.backends.k8s._api import api_errors
from ssebench.backends.k8s._exec import run_in
from ssebench.backends.k8s._handle import K8sRunHandle
from ssebench.backends.k8s._sidecar import TASK_CONTAINER
from ssebench.spec import BackendError, PlatformNotFoundError, RunTimeoutError, contract

_POLL: Final = 0.5
_TAIL: Final = 20
"""Lines of a kept run's agent output looked at for the launcher's exit line."""


def _status(pod: Any, container: str) -> Any:
    return next((s for s in pod.status.container_statuses or [] if s.name == container), None)


def _reported(api: client.ApiClient, handle: K8sRunHandle) -> int | None:
    """The launcher's exit line in the last lines of the agent container's output."""
    path = f"/api/v1/namespaces/{handle.namespace}/pods/{handle.pod}/log"
    query = {"container": objects.RUN_CONTAINER, "tailLines": str(_TAIL)}
    with api_errors(f"reading the output of run {handle.run_id}"):
        response: Any = rest.request(api, "GET", path, query)
        try:
            text = response.data.decode("utf-8", errors="replace")
        finally:
            response.release_conn()
    for line in reversed(text.splitlines()):
        if (status := contract.exit_line_status(line)) is not None:
            return status
    return None


def watch_agent(
    api: client.ApiClient, core: Any, handle: K8sRunHandle, deadline: float | None
) -> int | None:
    """Wait until the agent's process ended; its exit status, or None when the checker
    ended first (it could not start) or the pod is gone.

    Raises:
        RunTimeoutError: `deadline` (time.monotonic) passed first.
    """
    assert handle.agent_timeout is not None
    while True:
        try:
            with api_errors(f"watching run {handle.run_id}"):
                pod: Any = core.read_namespaced_pod(handle.pod, handle.namespace)
        except PlatformNotFoundError:
            return None
        agent = _status(pod, objects.RUN_CONTAINER)
        checker = _status(pod, TASK_CONTAINER)
        state = agent.state if agent is not None else None
        if state is not None and state.terminated is not None:
            return int(state.terminated.exit_code)
        if checker is not None and checker.state and checker.state.terminated is not None:
            return None
        if pod.status.phase in ("Failed", "Succeeded"):
            return None
        if state is not None and state.running is not None:
            if handle.keep and (found := _reported(api, handle)) is not None:
                return found
            started = state.running.started_at
            if isinstance(started, datetime):
                elapsed = datetime.now(UTC).timestamp() - started.timestamp()
                if elapsed > handle.agent_timeout + contract.AGENT_SLACK:
                    end_agent(core, handle)
                    return contract.TIMEOUT_EXIT
        if deadline is not None and time.monotonic() > deadline:
            raise RunTimeoutError(f"the agent of run {handle.run_id} did not end in time")
        time.sleep(_POLL)


def end_agent(core: Any, handle: K8sRunHandle) -> None:
    """The agent container's kill file: its liveness probe fails and the kubelet ends it."""
    run_in(
        core,
        handle.namespace,
        handle.pod,
        objects.KEEPER_CONTAINER,
        [handle.helper_tool("touch"), f"{objects.KEEP_ROOT}/control/{objects.KILL_FILE}"],
        timeout=10,
    )


def tell_checker(core: Any, handle: K8sRunHandle, status: int) -> None:
    """Tell the checker the agent ended; a checker that has ended needs no telling."""
    argv = contract.report_command(status)
    try:
        code, out = run_in(core, handle.namespace, handle.pod, TASK_CONTAINER, argv, timeout=180)
    except BackendError as exc:
        print(f"ssebench: run {handle.run_id}: cannot tell the checker: {exc}", flush=True)
        return
    with out:
        if code != 0:
            text = out.read().decode(errors="replace").strip()
            print(f"ssebench: run {handle.run_id}: the checker was not told ({code}): {text}")


def agent_log(api: client.ApiClient, handle: K8sRunHandle) -> bytes:
    """The agent container's whole output, capped (`contract.capped_output`)."""
    path = f"/api/v1/namespaces/{handle.namespace}/pods/{handle.pod}/log"
    with api_errors(f"reading the output of run {handle.run_id}"):
        response: Any = rest.request(api, "GET", path, {"container": objects.RUN_CONTAINER})
        try:
            return contract.capped_output(response.stream(64 * 1024))
        finally:
            response.release_conn()
