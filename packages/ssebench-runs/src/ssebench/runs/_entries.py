"""What `ssebench runs` prints as JSON: one Struct per answer, derived from spec's Message."""

from __future__ import annotations

from typing import Literal

from ssebench.spec import Message, Outcome, RunInfo, RunState, Status, labels


class RunEntry(Message, kw_only=True, frozen=True):
    """One run, as `runs list --json` and `runs inspect --json` print it.

    Only the run's `ssebench.*` labels are shown; never its environment.
    """

    run_id: str
    name: str
    state: RunState
    exit_code: int | None
    image: str
    created_at: str | None
    task: str | None
    model: str | None
    agent: str | None
    reference_run: bool
    results_dir: str | None
    labels: dict[str, str]


class RunList(Message, kw_only=True, frozen=True):
    """`runs list --json`: the backend, whether it can exec, and its runs, newest first."""

    backend: str
    supports_exec: bool
    runs: list[RunEntry]


class Endpoint(Message, kw_only=True, frozen=True):
    """`runs endpoint --json`: where this machine reaches a port of a running run."""

    run_id: str
    port: int
    url: str


CheckOutcome = Literal["passed", "failed", "not run"]


class Checks(Message, kw_only=True, frozen=True):
    """The outcome of each check of a finished run; a check that did not run is `not run`."""

    build: CheckOutcome
    poc: CheckOutcome
    function_test: CheckOutcome
    intent_test: CheckOutcome
    pocs_fixed: int | None = None
    pocs_total: int | None = None


class FinishedRun(Message, kw_only=True, frozen=True):
    """`runs results --json`: one recorded run, read from its `summary.json`."""

    run_id: str
    task: str
    agent: str
    model: str
    status: Status
    outcome: Outcome | None
    """How the run ended (`summary.json` `outcome`); None for runs recorded before it existed."""
    checks: Checks
    started_at: str
    run_dir: str


def run_entry(run: RunInfo) -> RunEntry:
    """The JSON view of a run: its fields, what its labels say, and its `ssebench.*` labels.

    Args:
        run: the run as the backend reports it.

    Returns:
        The entry; labels outside the `ssebench.` prefix are left out.
    """
    tags = run.labels
    return RunEntry(
        run_id=run.run_id,
        name=run.name,
        state=run.state,
        exit_code=run.exit_code,
        image=run.image,
        created_at=run.created_at,
        task=tags.get(labels.TASK_ID),
        model=tags.get(labels.MODEL),
        agent=tags.get(labels.AGENT),
        reference_run=tags.get(labels.REFERENCE_RUN) == "true",
        results_dir=tags.get(labels.RESULTS),
        labels={key: value for key, value in sorted(tags.items()) if key.startswith(labels.PREFIX)},
    )
