"""The container contract: users, paths, sockets, ports and environment names.

Public module (`ssebench.spec.contract`) because the daemon, the image builders
and the backends all read these names and must agree on them.
"""

from __future__ import annotations

from typing import Final

# Users ------------------------------------------------------------------------

MODEL_USER: Final = "model"
"""The agent's user, created fresh in every tool image."""

MODEL_UID: Final = 1000
"""uid (and gid) of `model`."""

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

RUNTIME_GIT: Final = "/opt/ssebench/tools/bin/git"
"""The sealed runtime's own git (images/runtime): the one git root runs in a tool image."""

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

MCP_PATH: Final = "/mcp"
"""The MCP server's path."""

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

ENV_DAEMON_SOCKET: Final = "SSE_DAEMON_SOCKET"
"""The agent-facing socket's path."""

ENV_CHECK_TIMEOUT: Final = "SSE_CHECK_TIMEOUT"
"""Seconds one check may take before it is stopped."""

ENV_PIDS_LIMIT: Final = "SSE_PIDS_LIMIT"
"""The run's process limit (`--pids-limit`): the processes and threads each of its
containers may hold; the container's root process holds it where the kernel does not
(`ssebench.daemon._pids`)."""

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
