"""The result files of a run: result.json and summary.json."""

from __future__ import annotations

from typing import Literal

from ssebench.spec._base import Message
from ssebench.spec._run import Egress, Mode

Status = Literal["passed", "failed", "error"]


class RunConfig(Message, kw_only=True, frozen=True):
    """A run's settings, as the runner records them."""

    agent: str
    model: str
    mode: Mode
    backend: str
    difficulty: int
    timeout: int
    egress: Egress
    reference_run: bool
    keep: bool


class PatchResult(Message, kw_only=True, frozen=True):
    """The grade. A check that did not run is None."""

    status: Status
    build_success: bool | None = None
    pov_passed: int | None = None
    pov_total: int | None = None
    func_test_success: bool | None = None
    intent_test_success: bool | None = None
    error_msg: str | None = None
    error_log: str | None = None


class RuntimeResult(Message, kw_only=True, frozen=True):
    """How the agent and the evaluator ran."""

    agent_duration: float | None = None
    agent_timeout: bool = False
    evaluator_timeout: bool = False
    agent_exit_code: int | None = None


class Result(Message, kw_only=True, frozen=True):
    """`result.json`: written by the evaluator; `config` is added by the runner."""

    patch_result: PatchResult
    runtime_result: RuntimeResult
    config: RunConfig | None = None


class Summary(Message, kw_only=True, frozen=True):
    """`summary.json`: the run's record, written by the runner for every run."""

    task: str
    config: RunConfig
    patch_result: PatchResult
    runtime_result: RuntimeResult
    run_id: str
    started_at: str
    spend: float | None = None
