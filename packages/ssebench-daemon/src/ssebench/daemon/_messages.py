"""The daemon's wire types: one request and one response Struct per route.

Requests ignore unknown fields (the `Message` base), so older and newer
clients keep working; a field never changes type, new fields get defaults.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from ssebench.daemon._errors import ErrorCode
from ssebench.spec import Message


class ErrorResponse(Message, frozen=True):
    """Every error answer: a message safe to show and a code from a fixed set."""

    error: str
    code: ErrorCode


class EmptyRequest(Message, frozen=True):
    """A route that takes no body (a body, if sent, must still be a JSON object)."""


# Reading ----------------------------------------------------------------------


class VersionResponse(Message, frozen=True):
    """`GET /version`."""

    version: str


class PublicDescription(Message, frozen=True):
    """The task description, with each crash report's contents instead of its path."""

    issue: str | None = None
    crash_report: list[str] = msgspec.field(default_factory=list)
    bug_description: str | None = None


class PublicScripts(Message, frozen=True):
    """The contents of the build and test scripts (never the run script)."""

    build: str | None = None
    test: str | None = None


class ProjectResponse(Message, frozen=True):
    """`GET /project`: only what the agent may know about the task."""

    id: str
    project: str
    language: str
    source: str
    task_description: PublicDescription
    scripts: PublicScripts


class CapabilitiesResponse(Message, frozen=True):
    """`GET /capabilities`: what this listener's difficulty allows and the task has."""

    can_build: bool
    can_run_poc: bool
    poc_count: int
    has_function_test: bool
    has_intent_test: bool


class DiffResponse(Message, frozen=True):
    """`GET /diff`: the agent's changes to the source tree so far, as a binary git diff."""

    diff: str


FileStatus = Literal["added", "deleted", "modified", "type_changed"]


class ChangedFile(Message, frozen=True):
    """One path the agent's diff touches."""

    path: str
    status: FileStatus


class FilesResponse(Message, frozen=True):
    """`GET /files`: the paths the agent's diff touches, sorted."""

    files: list[ChangedFile]


class FinalDiffResponse(Message, frozen=True):
    """`GET /final_diff`: the diff `prepare_grading` captured (`final.patch`)."""

    diff: str


class DialogRequest(Message, frozen=True):
    """`GET /agent/dialog?since=N`: entries from index N (0-based) on."""

    since: int = 0


class DialogResponse(Message, frozen=True):
    """Lines of the agent's `dialog.jsonl`, each a JSON value; `next` is the `since` to ask next."""

    entries: list[msgspec.Raw]
    next: int


# Tools ------------------------------------------------------------------------


class ToolOutput(Message, frozen=True, omit_defaults=True):
    """What a tool answers whenever the action ran.

    `code` is the command's exit status (-1 when the daemon could not run it
    or stopped it); each stream keeps its first MiB, and `truncated` says that
    the rest was dropped; `timed_out` says the time limit stopped it.
    """

    code: int
    stdout: str
    stderr: str
    truncated: bool = False
    timed_out: bool = False


class BashRequest(Message, frozen=True):
    """`POST /tool/bash?action=execute`: one command for the persistent shell."""

    command: str
    timeout: float | None = None


class BashResponse(ToolOutput, frozen=True):
    """The command's exit status and output."""


class BencherRequest(Message, frozen=True):
    """`POST /tool/bencher?action=…`.

    `poc`: for `run_poc`, the PoC's path from the task config or its index;
    omitted, every PoC runs. `grading` (admin only): start from `/ssebench-repo`.
    `timeout`: seconds the check may take, on every listener; the daemon stops
    it at the shorter of this and `SSE_CHECK_TIMEOUT`, so a request can only
    shorten its own check (the evaluator sends each grading check its share of
    the grading budget). Omitted: `SSE_CHECK_TIMEOUT`.
    """

    poc: str | int | None = None
    grading: bool = False
    timeout: float | None = None


class BencherResponse(ToolOutput, frozen=True):
    """The check's exit status and output.

    `runnable` is False when the daemon could not execute a program of the
    check (its script, or the interpreter the script names): a fault of the
    task's image, never of the agent's patch; grading records a broken task.
    """

    runnable: bool = True


# Admin ------------------------------------------------------------------------


class PrepareGradingResponse(Message, frozen=True):
    """`POST /prepare_grading`: the agent's diff is applied to `/ssebench-repo`."""

    success: bool
    patch_bytes: int = 0
    dropped: list[str] = msgspec.field(default_factory=list)
    """The task's protected paths the agent changed: left out of the applied diff."""


class AgentExitedRequest(Message, frozen=True):
    """`POST /admin/agent_exited`: how the agent's process ended, when the caller knows.

    The backend, which watches the agent container, sends `exit_code` (124 at its
    time limit); the daemon hands the first such report to the entrypoint, which
    ends the agent phase on it. The entrypoint's own call sends `{}`.
    """

    exit_code: int | None = None


class AgentExitedResponse(Message, frozen=True):
    """`POST /admin/agent_exited`: how many `model` processes were killed."""

    success: bool
    killed: int = 0


class ReferencePatchResponse(Message, frozen=True):
    """`GET /reference/patch`: the task's reference fix."""

    diff: str
