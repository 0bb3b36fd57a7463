"""The container contract: users, paths, sockets, ports and environment names.

Public module (`ssebench.spec.contract`) because the daemon, the image builders
and the backends all read these names and must agree on them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

# Users ------------------------------------------------------------------------

MODEL_USER: Final = "model"
"""The agent's user, created fresh in every tool image."""

MODEL_UID: Final = 1000
"""uid (and gid) of `model`."""


def is_model_user(user: str | None) -> bool:
    """Whether an exec's user (`name` or `uid`, with an optional `:group`) is `model`, or
    unset (the container's own user): the one user of a checker pair's agent container,
    where no root process ever runs (docs/integrity.md)."""
    if not user:
        return True
    name, _, group = user.partition(":")
    model = {MODEL_USER, str(MODEL_UID)}
    return name in model and (not group or group in model)


RUNNER_USER: Final = "sse-runner"
"""The user every task script runs as: a system uid, own group only."""

# Paths -------------------------------------------------------------------------

TASK_DIR: Final = "/ssebench"
"""Task config, scripts, PoCs and hidden material (root:sse-runner 0710)."""

TASK_CONFIG: Final = "/ssebench/config.yaml"
"""The task's config inside the image."""

SCRIPTS_DIR: Final = "/ssebench/scripts"
"""build.sh, run.sh, test.sh (root:sse-runner 0750)."""

REPO_DIR: Final = "/ssebench-repo"
"""Pristine copy of the project, the one that is graded (root 0700)."""

RUNTIME_DIR: Final = "/opt/ssebench"
"""SSEBench's own Python and packages."""

RUNTIME_PYTHON: Final = "/opt/ssebench/bin/python3.11"
"""The interpreter every in-container SSEBench tool runs with."""

RUNTIME_TOOLS: Final = "/opt/ssebench/tools/bin"
"""The sealed runtime's own programs (images/runtime): bash, git, tar, sleep, touch."""

RUNTIME_GIT: Final = "/opt/ssebench/tools/bin/git"
"""The sealed runtime's own git (images/runtime): the one git root runs in a tool image."""

ROOT_PATH: Final = f"{RUNTIME_TOOLS}:/opt/ssebench/bin"
"""Root's PATH in the checker: the sealed runtime's programs only. Root names every
program it runs by its absolute path; this PATH makes sure a name it forgot finds
nothing of the image's, nor of a PATH folder the agent can write."""

RESULTS_DIR: Final = "/var/lib/ssebench/results"
"""Grade, final patch and logs (root-only; the host's run directory)."""

ARCHIVE_DIR: Final = "/tmp/sse-archive"
"""What the agent writes (owned by model; the host's `archive/`)."""

SCRATCH_DIR: Final = "/var/lib/ssebench-runner"
"""Scratch copies for checks (root:sse-runner 0710)."""

SOCKET_DIR: Final = "/run/ssebench"
"""The admin socket's directory (root 0700; sidecar: a shared root-owned volume)."""

ADMIN_SOCKET: Final = "/run/ssebench/admin.sock"
"""The daemon's privileged socket (0600)."""

SANDBOX_DAEMON_SOCKET: Final = "/tmp/sse.sock"
"""The agent-facing socket in sandbox mode (0666)."""

SIDECAR_DAEMON_SOCKET: Final = "/run/ssebench/sse.sock"
"""The agent-facing socket in sidecar mode (0666)."""

REFERENCE_PATCH: Final = "/reference/patch.diff"
"""Read-only artifact mounted for the reference agent only."""

PLUGINS_DIR: Final = "/opt/ssebench-plugins"
"""Read-only mount of the run's chosen plugin folders (sandbox mode, only when the run has
plugins): `<name>/run.sh` each, and `PLUGINS_PLAN` listing them. Holds no hidden material."""

PLUGINS_PLAN: Final = "plan.json"
"""The runner's list of the run's plugins (name, hook, llm, timeout) in `PLUGINS_DIR`."""

PLUGIN_SCRIPT: Final = "run.sh"
"""The executable every plugin folder holds."""

PLUGINS_RESULTS: Final = "plugins"
"""Every plugin's log (`plugins/<name>.log`) and root-hook plugins' folders
(`plugins/<name>/`) in the results directory; model-hook plugins' folders are
`plugins/<name>/` in the archive, which `model` owns."""

PLUGIN_RESULTS_FILE: Final = "plugins.json"
"""The entrypoint's record of every plugin's outcome, in the results directory."""

GRADED_MARKER: Final = ".graded"
"""Written in the results directory once RESULT_FILE is complete."""

# Run directory -----------------------------------------------------------------
# The files a run leaves in its results directory (in the container: RESULTS_DIR;
# on the host: <HOST_RESULTS_ROOT>/<task>/<model>/<agent>/<run-id>/), named here
# because the daemon, the evaluator, the runner and `ssebench runs` all use them.

HOST_RESULTS_ROOT: Final = "results"
"""Where the runner puts run directories on the host, relative to the current directory."""

RESULT_FILE: Final = "result.json"
"""The grade, written by the evaluator; the runner adds the run's settings to it."""

SUMMARY_FILE: Final = "summary.json"
"""The run's record, written by the runner for every run."""

RUN_FILE: Final = "run.json"
"""The RunSpec with the environment's names and none of its values (runner)."""

RUN_ARCHIVE: Final = "archive"
"""The run directory's folder holding what the agent wrote (mounted at ARCHIVE_DIR)."""

DIALOG_FILE: Final = "dialog.jsonl"
"""The agent's dialog, one JSON value a line, in the archive."""

TOUCHED_FILE: Final = "touched"
"""Created in the host run directory (holding when, ISO 8601 UTC) the first time a person
runs commands in the run's container (web terminal, `runs exec`); the runner reads it into
`summary.json` `touched`. The container cannot write it: the directory is root-only there."""

ENTRYPOINT_LOG: Final = "entrypoint.log"
"""The entrypoint's own log, in the results directory."""

EVALUATOR_LOG: Final = "evaluator.log"
"""The evaluator's output, in the results directory."""

# Ports -------------------------------------------------------------------------

DAEMON_PORT: Final = 4263
"""The daemon's agent-facing HTTP port."""

MCP_PORT: Final = 3000
"""The MCP server's streamable HTTP port."""

AGENT_ALIVE_PORT: Final = 4264
"""In a checker pair's pod on Kubernetes: the checker answers HTTP here with 200 while the
agent container may run and 503 once its kill file (`ENV_AGENT_KILL_FILE`) exists. The
agent container's liveness probe is the kubelet's request to it, so no probe runs a program
of the agent's image; the checker, root's, holds the port from before the agent starts."""

MCP_PATH: Final = "/mcp"
"""The MCP server's path."""

MCP_URL: Final = f"http://127.0.0.1:{MCP_PORT}{MCP_PATH}"
"""Where the agent reaches the MCP server (`ENV_MCP_URL`): the checker's loopback, which
the agent container shares."""

AGENT_GO_FILE: Final = "/run/ssebench/agent-go"
"""Written by the checker's entrypoint once its services answer and the `before-agent`
plugins ran; the launcher of the agent container starts the agent when it appears."""

ENTRYPOINT_MODULE: Final = "ssebench.daemon.entrypoint"
"""The checker's PID 1 (`python -I -m` it, as root)."""

AGENT_CONTAINER_FLAG: Final = "--agent-container"
"""The entrypoint's argument in a checker: the agent runs in a container of its own, and
the backend reports its end (`REPORT_MODULE`)."""

LAUNCHER_MODULE: Final = "ssebench.daemon.launcher"
"""The agent container's PID 1 (`python -I -m` it, as `model`, with no argument), set by
the backend: it runs the command of `AGENT_COMMAND_FILE`."""

CHECKER_COMMAND: Final = (RUNTIME_PYTHON, "-I", "-m", ENTRYPOINT_MODULE, AGENT_CONTAINER_FLAG)
"""The checker's command, whatever its image says: the entrypoint, told that the agent runs
in a container of its own."""

LAUNCHER_COMMAND: Final = (RUNTIME_PYTHON, "-I", "-m", LAUNCHER_MODULE)
"""The agent container's command, whatever its image says (its image's CMD is unused)."""

AGENT_COMMAND_FILE: Final = "/opt/ssebench/agent-command.json"
"""In an agent image, root's: the agent's command (its Dockerfile's CMD, a JSON list of
strings), recorded by the seal, the image's last step; the launcher runs it, so a backend
needs nothing of the image's configuration (a cluster could not read it)."""

TIMEOUT_EXIT: Final = 124
"""The agent's exit status when its time limit ended it (as `timeout(1)`)."""

AGENT_SLACK: Final = 10.0
"""Seconds past `TIMEOUT` before a backend ends an agent container its launcher did not
(an agent that stopped or replaced it)."""

AGENT_EXIT_LINE: Final = "ssebench-launcher: the agent's exit status: "
"""The launcher's stderr line (this, then the status) once the agent's process ended: how
a backend learns it in a kept run, whose agent container stays up after it."""

REPORT_MODULE: Final = "ssebench.daemon.report"
"""Run by the backend in the checker, as root, with the agent's exit status."""


def exit_line_status(line: str) -> int | None:
    """The agent's exit status in one line of the launcher's stderr (`AGENT_EXIT_LINE`
    and the status), or None for any other line."""
    status = line.removeprefix(AGENT_EXIT_LINE)
    return int(status) if status != line and status.isdigit() else None


def report_command(status: int) -> list[str]:
    """What a backend runs in the checker, as root, to report the agent's exit status."""
    return [RUNTIME_PYTHON, "-I", "-m", REPORT_MODULE, str(status)]


# Environment -------------------------------------------------------------------

ENV_API_KEY: Final = "SSE_API_KEY"
"""The model key (a secret)."""

ENV_BASE_URL: Final = "SSE_BASE_URL"
"""The model proxy's URL."""

ENV_MODEL_NAME: Final = "SSE_MODEL_NAME"
"""The model's name."""

ENV_ARCHIVE: Final = "SSE_ARCHIVE"
"""The archive directory's path."""

ENV_RESULTS: Final = "SSE_RESULTS"
"""The results directory's path."""

ENV_DIFFICULTY: Final = "SSE_DIFFICULTY"
"""The run's difficulty, 0-4."""

ENV_TIMEOUT: Final = "TIMEOUT"
"""The agent's time limit in seconds."""

ENV_KEEP_ALIVE: Final = "SSE_KEEP_ALIVE"
"""`1`: the container stays up after grading."""

ENV_AGENT_KILL_FILE: Final = "SSE_AGENT_KILL_FILE"
"""The checker's, on Kubernetes: the file whose presence ends the agent container (its
liveness probe on `AGENT_ALIVE_PORT` fails); the checker serves that port only when set."""

ENV_DAEMON_SOCKET: Final = "SSE_DAEMON_SOCKET"
"""The agent-facing socket's path."""

ENV_CHECK_TIMEOUT: Final = "SSE_CHECK_TIMEOUT"
"""Seconds one check may take before it is stopped."""

ENV_PIDS_LIMIT: Final = "SSE_PIDS_LIMIT"
"""The run's process limit (`--pids-limit`): the processes and threads each of its
containers may hold; the container's root process holds it where the kernel does not
(`ssebench.daemon._pids`)."""

ENV_MODE: Final = "SSE_MODE"
"""The agent's mode, `sandbox` or `sidecar`: how an agent learns whether the project's
toolchain is in its own container."""

ENV_IMAGE_PATH: Final = "SSE_IMAGE_PATH"
"""Set by the checker's entrypoint for its services: the image's PATH, which the children
running as `model` or `sse-runner` (checks, the agent's shell) and root's plugins get,
while root's own PATH is `ROOT_PATH`."""

ENV_MCP_URL: Final = "SSE_MCP_URL"
"""The MCP server's URL as the agent reaches it (`MCP_URL`)."""

SECRET_ENV: Final = frozenset({ENV_API_KEY})
"""Environment names whose values are secrets."""

# Limits ------------------------------------------------------------------------

DEFAULT_DIFFICULTY: Final = 2
"""Difficulty when none is given: no PoC, no intent test."""

DIFFICULTIES: Final = range(5)
"""Valid difficulties."""

DEFAULT_CHECK_TIMEOUT: Final = 1800
"""Default of SSE_CHECK_TIMEOUT, in seconds."""

STOP_GRACE: Final = 20
"""Seconds between SIGTERM and SIGKILL when a run is stopped."""

DEFAULT_AGENT_TIMEOUT: Final = 3600
"""The agent's time limit in seconds when none is given (`--timeout`, ENV_TIMEOUT)."""

MAX_BODY_BYTES: Final = 1024 * 1024
"""Largest request body the daemon accepts."""

MAX_STREAM_BYTES: Final = 1024 * 1024
"""Output kept per stream of a script run; the rest is dropped."""

AGENT_OUTPUT_LIMIT: Final = 16 * 1024 * 1024
"""Bytes of the agent's output (stdout and stderr together) relayed to `agent.log` and
the container's output; the rest is read and dropped, and one line starting with
`OUTPUT_CAP_MARKER` says how much. The same bound holds for the evaluator's relayed
output, and a terminal shows at most this much of a stream (plus SSEBench's own lines)."""

OUTPUT_CAP_MARKER: Final = "[ssebench: output capped"
"""The stable start of the one line written where capped output was cut, e.g.
`[ssebench: output capped at 16777216 bytes; 1048576 more bytes dropped]`."""


def output_cap_line(limit: int, dropped: int) -> str:
    """The marker line written where capped output was cut (with its newline).

    Args:
        limit: how many bytes were kept.
        dropped: how many bytes after them were dropped.

    Returns:
        `[ssebench: output capped at <limit> bytes; <dropped> more bytes dropped]` and a newline.
    """
    return f"{OUTPUT_CAP_MARKER} at {limit} bytes; {dropped} more bytes dropped]\n"


def capped_output(chunks: Iterable[bytes], limit: int = AGENT_OUTPUT_LIMIT) -> bytes:
    """A stream's first `limit` bytes, then `output_cap_line` if more came (all of it read).

    How a backend writes `agent.log` from the agent container's output: the launcher
    that runs the agent is the agent's to subvert, so the cap is applied here.
    """
    kept: list[bytes] = []
    size = dropped = 0
    for chunk in chunks:
        room = max(0, limit - size)
        kept.append(chunk[:room])
        size += min(len(chunk), room)
        dropped += max(0, len(chunk) - room)
    data = b"".join(kept)
    if dropped:
        line = output_cap_line(limit, dropped).encode()
        data += line if data.endswith(b"\n") or not data else b"\n" + line
    return data
