"""The result files of a run: result.json and summary.json."""

from __future__ import annotations

from typing import Literal

import msgspec

from ssebench.spec._base import Message
from ssebench.spec._models import Usage
from ssebench.spec._plugins import PluginConfig, PluginResult
from ssebench.spec._resources import Resources
from ssebench.spec._run import Egress, Mode
from ssebench.spec.contract import DEFAULT_CHECK_TIMEOUT

Status = Literal["passed", "failed", "error"]
"""A grade's status: `error` means the run says nothing about the agent."""

ErrorSource = Literal["harness", "task"]
"""Why a grade is `error`: the harness or the engine failed (`harness`), or the task
itself is broken, e.g. a check's script cannot be started (`task`)."""

Outcome = Literal[
    "stopped",
    "infra_error",
    "grader_error",
    "budget_exceeded",
    "agent_timeout",
    "passed",
    "failed",
]
"""How a run ended, exactly one, decided in this order (docs/results.md):

- `stopped`: a signal or `runs stop` ended it;
- `infra_error`: the harness or the engine failed; says nothing about the agent;
- `grader_error`: the task itself is broken (a check's script cannot run);
- `budget_exceeded`: the agent's model budget ran out (its patch is still graded);
- `agent_timeout`: the agent reached its time limit (its patch is still graded);
- `passed` / `failed`: the grade.

Pass rate = passed / (passed + failed + agent_timeout + budget_exceeded);
`infra_error` is retried, `stopped` and `grader_error` are never counted.
"""

InfraReason = Literal["harness", "provider"]
"""Why a run is `infra_error`: the harness or the engine failed (`harness`), or the model's
provider did (`provider`: the run did not pass, its last calls failed at the provider after
the gateway's retries, and it kept under the gateway's cap of calls in flight)."""


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
    check_timeout: int = DEFAULT_CHECK_TIMEOUT
    """Seconds each check (build, a PoC, tests) may take before the daemon stops it
    (`SSE_CHECK_TIMEOUT`); a check stopped there fails, it is never an `error`."""
    budget: float | None = None
    """US dollars the run's model key may spend (`--budget`); None without a model."""
    resources: Resources | None = None
    """The run's CPU, memory and process limits (None in records written before them)."""
    tool_layer: str | None = None
    """The tool layer an `ssebench run` in sandbox mode built (`--tool-layer`, default
    `sandbox`); None where it was not chosen: sidecar and prebuilt runs (their images
    bring their own), evaluations' runs, and records written before it."""
    plugins: list[PluginConfig] = msgspec.field(default_factory=list)
    """The plugins the run runs (`--plugin`, else those plugins.yaml enables), as declared."""


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
    error_source: ErrorSource | None = None
    """Set with status `error`: whose fault it is (None in grades written before it existed,
    read as `harness`)."""
    dropped: list[str] = msgspec.field(default_factory=list)
    """The task's protected paths the agent changed, added or deleted: left out of the
    diff every check applied (docs/integrity.md)."""


class RuntimeResult(Message, kw_only=True, frozen=True):
    """How the agent and the evaluator ran."""

    agent_duration: float | None = None
    agent_timeout: bool = False
    evaluator_timeout: bool = False
    agent_exit_code: int | None = None
    stopped_by: str | None = None
    """The signal (e.g. `SIGTERM`) that stopped the run in its container before it was graded."""


class Result(Message, kw_only=True, frozen=True):
    """`result.json`: written by the evaluator; `config` is added by the runner."""

    patch_result: PatchResult
    runtime_result: RuntimeResult
    config: RunConfig | None = None


class Provenance(Message, kw_only=True, frozen=True):
    """What a run was made of, so that a result can be traced and a rerun judged unchanged."""

    ssebench: dict[str, str]
    """Every installed SSEBench package and its version."""
    agent_version: str
    dataset: str
    """The dataset's name (its folder name when `dataset.yaml` names none)."""
    dataset_version: str
    model: str
    mode: Mode
    difficulty: int
    images: dict[str, str]
    """The images the run was started from, by role (`agent`, and `environment` in
    sidecar mode): what the backend says it started them from (`RunHandle.images`, a
    cluster's resolved digests), else as its `prepare_images` named them."""
    inputs: str
    """A digest of everything the run was made from that is known before it starts
    (the task's and the agent's folders, the run's settings, the versions above):
    an evaluation reruns a run only when this changed."""


class Summary(Message, kw_only=True, frozen=True):
    """`summary.json`: the run's record, written by the runner for every run."""

    task: str
    config: RunConfig
    patch_result: PatchResult
    runtime_result: RuntimeResult
    run_id: str
    started_at: str
    spend: float | None = None
    outcome: Outcome | None = None
    """How the run ended (see `Outcome`); None only in summaries written before it existed."""
    reason: InfraReason | None = None
    """Why the run is `infra_error` (see `InfraReason`); None for every other outcome."""
    provenance: Provenance | None = None
    """What the run was made of; None only in summaries written before it existed."""
    usage: Usage | None = None
    """The run's model calls and tokens, as the model gateway counted them; None without
    a model. `spend` is their cost in US dollars."""
    touched: bool = False
    """A person ran commands in the run's container (the web terminal, `runs exec`) before
    its grade was recorded: the grade may not be the agent's alone, so evaluations leave
    the run out of pass rates by default."""
    touched_at: str | None = None
    """When a person first did so (ISO 8601 UTC); None when `touched` is False."""
    plugin_results: list[PluginResult] = msgspec.field(default_factory=list)
    """How each of `config.plugins` ended, in the order they ran; a plugin never changes
    the grade or the outcome."""
