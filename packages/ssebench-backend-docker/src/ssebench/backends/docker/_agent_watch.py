"""A pair's agent container, watched from the host: its end, its log, the checker told.

The checker shares no process namespace with the agent container (`ps` there shows
`model`'s processes only), so it cannot see the agent end: the backend, which can,
tells it. `watch_agent` returns the agent's exit status: the container's own when it
exits; in a kept run, whose launcher stays up after the agent, the status the
launcher prints (`contract.AGENT_EXIT_LINE`); 124 when the agent outlived its
`TIMEOUT` by `contract.AGENT_SLACK` (the launcher cuts it off at `TIMEOUT` itself), after
which the container is killed. `write_agent_log` copies the container's output into
the run directory as `agent.log`, capped like every output that reaches the host
(`contract.AGENT_OUTPUT_LIMIT`, then one marker line): the launcher runs as `model`
beside the agent, so its own cap is no guarantee. `report` runs
`ssebench.daemon.report` in the checker, as root, with the status.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import docker
from ssebench.backends.docker._errors import engine_errors
from ssebench.backends.docker._streams import split_lines
from ssebench.spec import (
    BackendError,
    PlatformNotFoundError,
    PlatformRefusedError,
    RunTimeoutError,
    contract,
)
from ssebench.spec.atomic import write_atomically

log = logging.getLogger(__name__)

_POLL: Final = 0.5


def _reported(client: docker.DockerClient, agent_id: str, found: list[int]) -> None:
    """Follow the launcher's stderr until its exit line (kept runs) or the container's end."""
    try:
        with engine_errors("following the agent container's output"):
            chunks = client.api.logs(agent_id, stdout=False, stderr=True, stream=True, follow=True)
            for line in split_lines(chunks):
                if (status := contract.exit_line_status(line)) is not None:
                    found.append(status)
                    return
    except BackendError as exc:  # the engine went away: the state poll decides
        log.debug("following the agent container's output ended: %s", exc)


def _state(client: docker.DockerClient, container_id: str) -> dict[str, object] | None:
    try:
        with engine_errors("watching a run's containers"):
            state: dict[str, object] = client.api.inspect_container(container_id)["State"]
            return state
    except PlatformNotFoundError:
        return None


def watch_agent(
    client: docker.DockerClient,
    agent_id: str,
    checker_id: str,
    agent_timeout: float,
    deadline: float | None,
) -> int | None:
    """Wait until the agent's process ended; its exit status.

    Args:
        agent_timeout: the run's `TIMEOUT`, counted from the agent container's start.
        deadline: when the caller stops waiting (time.monotonic), or None.

    Returns:
        The status; None when the checker ended first (it could not start): nothing
        is left to tell it, and the agent container is killed.

    Raises:
        RunTimeoutError: `deadline` passed first.
    """
    found: list[int] = []
    follower = threading.Thread(
        target=_reported, args=(client, agent_id, found), name="agent-exit", daemon=True
    )
    follower.start()
    cutoff: float | None = None
    while True:
        follower.join(_POLL)
        if found:
            return found[0]
        state = _state(client, agent_id)
        if state is None:
            return None
        if not state.get("Running") and state.get("Status") != "created":
            code = state.get("ExitCode", 0)
            return code if isinstance(code, int) else 1
        if cutoff is None and state.get("Running"):
            cutoff = (
                _started_at(str(state.get("StartedAt", ""))) + agent_timeout + contract.AGENT_SLACK
            )
        checker = _state(client, checker_id)
        if checker is None or (not checker.get("Running") and checker.get("Status") == "exited"):
            kill(client, agent_id)
            return None
        if cutoff is not None and time.time() >= cutoff:
            log.info("the agent container outlived its time limit: killed")
            kill(client, agent_id)
            return contract.TIMEOUT_EXIT
        if deadline is not None and time.monotonic() >= deadline:
            raise RunTimeoutError("the agent container did not end in time")


def _started_at(value: str) -> float:
    """The engine's `StartedAt` (RFC 3339 with nanoseconds) as seconds since the epoch;
    now when it cannot be read."""
    try:
        whole, _, fraction = value.rstrip("Z").partition(".")
        moment = datetime.fromisoformat(whole).replace(tzinfo=UTC)
        return moment.timestamp() + float(f"0.{fraction or 0}")
    except ValueError:
        return time.time()


def kill(client: docker.DockerClient, container_id: str) -> None:
    """Kill a container; one that is gone or already stopped is no error."""
    try:
        with engine_errors("killing the agent container"):
            client.api.kill(container_id)
    except (PlatformNotFoundError, PlatformRefusedError):
        pass


def write_agent_log(client: docker.DockerClient, agent_id: str, results_dir: str) -> None:
    """Copy the agent container's output into `results_dir/agent.log`, capped with a marker."""
    try:
        with engine_errors("reading the agent container's output"):
            chunks = client.api.logs(agent_id, stdout=True, stderr=True, stream=True, follow=False)
            data = contract.capped_output(chunks)
    except BackendError as exc:
        log.warning("cannot read the agent container's output: %s", exc)
        data = b""
    try:
        write_atomically(Path(results_dir) / "agent.log", data)
    except OSError as exc:
        log.warning("cannot write agent.log: %s", exc)


def report(client: docker.DockerClient, checker_id: str, status: int) -> None:
    """Tell the checker the agent ended (`ssebench.daemon.report`, as root, in the checker)."""
    argv = contract.report_command(status)
    try:
        with engine_errors("telling the checker the agent ended"):
            exec_id = client.api.exec_create(checker_id, argv, user="0:0")["Id"]
            output = client.api.exec_start(exec_id)
            code = client.api.exec_inspect(exec_id).get("ExitCode")
    except (PlatformNotFoundError, PlatformRefusedError) as exc:
        log.info("the checker ended before it was told the agent did: %s", exc)
        return
    if code != 0:
        text = output.decode(errors="replace").strip() if isinstance(output, bytes) else ""
        log.warning("the checker was not told the agent ended (status %s): %s", code, text)
