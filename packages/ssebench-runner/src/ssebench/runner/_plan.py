"""What one run will be, decided and checked before anything is created: the RunPlan.

`plan_run` turns `ssebench run`'s options into a RunPlan without side effects;
`run_spec` turns a plan and its images into the RunSpec a backend carries out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Final

from ssebench.runner._options import (
    NO_MODEL,
    new_run_id,
    validate_difficulty,
    validate_egress,
    validate_mode,
    validate_run_id,
    validate_timeout,
)
from ssebench.runner._run_dir import ARCHIVE_DIR, check_run_dir_free, run_dir_path
from ssebench.spec import (
    Agent,
    Images,
    Mount,
    NetworkPolicy,
    RunConfig,
    RunSpec,
    Task,
    UserError,
    contract,
    default_dataset,
    find_agent,
    find_home,
    find_task,
    labels,
    list_agents,
    load_dataset,
)

REFERENCE_AGENT: Final = "reference"
"""The agent that applies the task's reference patch; the only one that is shown it."""


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    """`ssebench run`'s options as given, before they are checked."""

    task: str | None
    agent: str | None
    backend: str
    local: Path | None = None
    mode: str = "sandbox"
    difficulty: int = contract.DEFAULT_DIFFICULTY
    timeout: int = 3600
    check_timeout: int = contract.DEFAULT_CHECK_TIMEOUT
    egress: str = "restricted"
    run_id: str | None = None
    keep: bool = False


@dataclass(frozen=True, kw_only=True)
class RunPlan:
    """One run, fully decided: what the Runner needs and nothing it has to look up.

    `env` is the container's environment and holds the model key, so it is
    left out of `repr`.
    """

    run_id: str
    task: Task
    agent: Agent
    config: RunConfig
    run_dir: Path
    env: dict[str, str] = field(repr=False)
    prebuilt: bool = False
    platform: str | None = None

    @property
    def reference_run(self) -> bool:
        """Whether this run's agent is the reference agent, the one shown the fix."""
        return self.config.reference_run


def container_env(
    config: RunConfig, *, api_key: str = "", base_url: str = "", model_name: str = NO_MODEL
) -> dict[str, str]:
    """The environment of the run's container (DESIGN.md §4).

    Args:
        config: the run's settings.
        api_key: the run's model key (a secret); empty while no agent uses a model.
        base_url: the model proxy's URL; empty while there is none.
        model_name: the model's name, `none` without a model.

    Returns:
        Every variable of the container contract that a sandbox run gets.
    """
    return {
        contract.ENV_API_KEY: api_key,
        contract.ENV_BASE_URL: base_url,
        contract.ENV_MODEL_NAME: model_name,
        contract.ENV_ARCHIVE: contract.ARCHIVE_DIR,
        contract.ENV_RESULTS: contract.RESULTS_DIR,
        contract.ENV_DIFFICULTY: str(config.difficulty),
        contract.ENV_TIMEOUT: str(config.timeout),
        contract.ENV_CHECK_TIMEOUT: str(config.check_timeout),
        contract.ENV_KEEP_ALIVE: "1" if config.keep else "0",
    }


def plan_run(options: RunOptions, *, results_root: Path, now: datetime) -> RunPlan:
    """Check every option and decide the run, creating nothing.

    Args:
        options: the command line's options.
        results_root: the folder run directories go in.
        now: the time the command started; a generated run ID is made from it.

    Returns:
        The run's plan.

    Raises:
        UserError: an option is invalid, the task or agent is unknown, the
            task's config fails its schema (`TaskConfigError`), or the run
            directory exists; the message names the bad value and what is allowed.
    """
    mode = validate_mode(options.mode)
    difficulty = validate_difficulty(options.difficulty)
    timeout = validate_timeout(options.timeout)
    check_timeout = validate_timeout(options.check_timeout, what="check timeout")
    egress = validate_egress(options.egress)
    run_id = validate_run_id(options.run_id) if options.run_id is not None else new_run_id(now)
    home = find_home()
    dataset = options.local if options.local is not None else default_dataset(home)
    if not options.task:
        known = ", ".join(task.id for task in load_dataset(dataset)) or "none"
        raise UserError(f"no task given: use --task with one of the tasks in {dataset}: {known}")
    task = find_task(dataset, options.task)
    if not options.agent:
        raise UserError(f"no agent given: use --agent with one of {_agent_names(home)}")
    agent = find_agent(home, options.agent)
    if agent.uses_model:
        raise UserError(
            f"agent {agent.name!r} uses a model, and this ssebench cannot give it one yet; "
            f"use an agent that needs no model: {_agent_names(home, uses_model=False)}"
        )
    config = RunConfig(
        agent=agent.name,
        model=NO_MODEL,
        mode=mode,
        backend=options.backend,
        difficulty=difficulty,
        timeout=timeout,
        check_timeout=check_timeout,
        egress=egress,
        reference_run=agent.name == REFERENCE_AGENT,
        keep=options.keep,
    )
    run_dir = run_dir_path(results_root, task.id, config.model, agent.name, run_id)
    check_run_dir_free(run_dir)
    return RunPlan(
        run_id=run_id,
        task=task,
        agent=agent,
        config=config,
        run_dir=run_dir,
        env=container_env(config),
    )


def _agent_names(home: Path, *, uses_model: bool | None = None) -> str:
    names = [
        agent.name
        for agent in list_agents(home)
        if uses_model is None or agent.uses_model == uses_model
    ]
    return ", ".join(names) or "none"


def run_labels(plan: RunPlan) -> dict[str, str]:
    """The labels of the container `ssebench runs` and the web UI list (the seed's "Labels")."""
    return {
        labels.RUN_ID: plan.run_id,
        labels.WEBUI: "true",
        labels.TASK_ID: plan.task.id,
        labels.MODEL: plan.config.model,
        labels.AGENT: plan.agent.name,
        labels.RESULTS: str(plan.run_dir),
        labels.REFERENCE_RUN: "true" if plan.reference_run else "false",
    }


def run_spec(plan: RunPlan, images: Images, reference_patch: Path) -> RunSpec:
    """The RunSpec of a planned run.

    Args:
        plan: the run.
        images: what `prepare_images` returned for it.
        reference_patch: the private copy of the task's reference fix; mounted
            for the reference agent only.

    Returns:
        The spec to hand to `Backend.start`.
    """
    artifacts = (
        [Mount(target=contract.REFERENCE_PATCH, source=str(reference_patch), read_only=True)]
        if plan.reference_run
        else []
    )
    return RunSpec(
        run_id=plan.run_id,
        task_name=plan.task.id,
        mode=plan.config.mode,
        image=images.agent,
        env=dict(plan.env),
        results=Mount(target=contract.RESULTS_DIR, source=str(plan.run_dir)),
        archive=Mount(target=contract.ARCHIVE_DIR, source=str(plan.run_dir / ARCHIVE_DIR)),
        artifacts=artifacts,
        network=NetworkPolicy(egress=plan.config.egress),
        platform=plan.platform,
        labels=run_labels(plan),
        timeout=plan.config.timeout,
        keep=plan.config.keep,
    )
