"""What an evaluation is: its settings checked, its folder and `eval.json`, and what is left to run.

An evaluation is the cross product of tasks, agents, models and repeats, each
cell (`EvalSlot`) one run of `ssebench run`'s lifecycle. Its folder,
`evals/<eval-id>/` by default, is named after a digest of its settings, so the
same command finds the same folder again and resumes: a cell is skipped when
its last run has an outcome other than `infra_error` or `stopped` and was made
of the same inputs (`Provenance.inputs`); every other cell runs again.

`dataset verify` (task authors) builds on `plan_evaluation` and `Evaluator`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Final, Literal

from ssebench.runner._lifecycle import iso_utc
from ssebench.runner._options import (
    NO_MODEL,
    validate_difficulty,
    validate_egress,
    validate_mode,
    validate_timeout,
)
from ssebench.runner._plan import (
    REFERENCE_AGENT,
    choose_model,
    choose_tool_layer,
    recorded_tool_layer,
)
from ssebench.runner._plugins import run_plugins
from ssebench.runner._provenance import folder_digest, images_started_from, run_inputs
from ssebench.runner._run_dir import run_dir_path
from ssebench.spec import (
    LATER_SETTINGS,
    Agent,
    DecodeError,
    EvalRecord,
    EvalSettings,
    EvalSlot,
    ImageRequest,
    Images,
    ModelsFile,
    Outcome,
    PluginConfig,
    RunConfig,
    SSEBenchError,
    Summary,
    Task,
    ToolLayer,
    UserError,
    contract,
    decode_json,
    default_dataset,
    find_agent,
    find_home,
    find_task,
    load_dataset,
    load_models,
    models_path,
    run_resources,
)

EVALS_ROOT: Final = Path("evals")
"""Where evaluation folders go by default, relative to the current directory."""

EVAL_FILE: Final = "eval.json"
"""An evaluation's settings and run IDs, in its folder."""

RETRIED_OUTCOMES: Final[frozenset[Outcome]] = frozenset({"infra_error"})
"""Outcomes that say nothing about the agent: such a run is retried (`--retries`)."""

RESUMED_OUTCOMES: Final[frozenset[Outcome]] = frozenset({"infra_error", "stopped"})
"""Outcomes whose cell runs again on resume: a stopped run was cut short by the
person who stopped the evaluation, and says nothing about the agent either."""

Reason = Literal["new", "unrecorded", "infra_error", "stopped", "changed"]
"""Why a cell runs: never ran, its last run left no outcome, its last run was an
`infra_error` or was stopped, or its inputs changed since."""


@dataclass(frozen=True, kw_only=True)
class EvalOptions:
    """`ssebench eval`'s options as given, before they are checked."""

    tasks: Sequence[str] | None
    agents: Sequence[str]
    models: Sequence[str] = (NO_MODEL,)
    backend: str
    local: Path | None = None
    mode: str = "sandbox"
    difficulty: int = contract.DEFAULT_DIFFICULTY
    repeat: int = 1
    timeout: int = contract.DEFAULT_AGENT_TIMEOUT
    check_timeout: int = contract.DEFAULT_CHECK_TIMEOUT
    egress: str = "restricted"
    tool_layer: str | None = None
    plugins: tuple[str, ...] = ()
    keys_here: bool = True
    """Whether the backend's gateway reads provider keys from this environment
    (`Backend.gateway_keys_from_host`): they are then checked before anything runs."""


@dataclass(frozen=True, kw_only=True)
class Pending:
    """A cell that will run, and why."""

    index: int
    reason: Reason


@dataclass(frozen=True, kw_only=True)
class Skipped:
    """A cell whose last run stands: same inputs, and an outcome that counts."""

    index: int
    summary: Summary


@dataclass(frozen=True, kw_only=True)
class EvalPlan:
    """An evaluation, checked: its folder, record, and the tasks and agents it names."""

    folder: Path
    record: EvalRecord
    tasks: dict[str, Task]
    agents: dict[str, Agent]
    models: ModelsFile | None = None
    """The models file, when a cell uses a model; its budgets are the runs' budgets."""
    prebuilt: bool = False
    """Run the images published under SSEBENCH_REGISTRY and build nothing: how this
    invocation gets its images, not a setting of the evaluation (a resume may choose)."""
    tool_layer: ToolLayer | None = None
    """The tool layer of `settings.tool_layer`; None for the built-in one."""
    plugins: list[PluginConfig] = field(default_factory=list)
    """The plugins each run runs (`settings.plugins`, or those plugins.yaml enables)."""
    plugins_home: Path | None = None
    """The folder holding the plugins' folders (None: no plugin runs)."""

    @property
    def results_root(self) -> Path:
        """The results folder its runs are recorded in."""
        return Path(self.record.results)

    def config(self, slot: EvalSlot) -> RunConfig:
        """The settings of a cell's runs."""
        settings = self.record.settings
        budget: float | None = None
        if slot.model != NO_MODEL and self.models is not None:
            entry = self.models.models.get(slot.model)
            budget = entry.budget if entry is not None and entry.budget is not None else None
            budget = budget if budget is not None else self.models.budget
        return RunConfig(
            agent=slot.agent,
            model=slot.model,
            budget=budget,
            mode=settings.mode,
            backend=settings.backend,
            difficulty=settings.difficulty,
            timeout=settings.timeout,
            check_timeout=settings.check_timeout,
            egress=settings.egress,
            reference_run=slot.agent == REFERENCE_AGENT,
            keep=False,
            resources=run_resources(self.tasks[slot.task].config.resources),
            tool_layer=recorded_tool_layer(
                settings.tool_layer, mode=settings.mode, prebuilt=self.prebuilt
            ),
            plugins=self.plugins,
        )

    def image_request(self, slot: EvalSlot) -> ImageRequest:
        """What a cell's runs ask the backend for (as each run's own `prepare_images`)."""
        return ImageRequest(
            mode=self.record.settings.mode,
            task=self.tasks[slot.task],
            agent=self.agents[slot.agent],
            prebuilt=self.prebuilt,
            tool_layer=self.tool_layer,
        )

    def run_dir(self, slot: EvalSlot, run_id: str) -> Path:
        """Where one of a cell's runs is recorded."""
        return run_dir_path(self.results_root, slot.task, slot.model, slot.agent, run_id)


def _split(values: Sequence[str], what: str) -> list[str]:
    names: list[str] = []
    for value in values:
        for name in value.split(","):
            name = name.strip()
            if not name:
                raise UserError(f"empty name in {what} {value!r}: give a comma-separated list")
            if name not in names:
                names.append(name)
    return names


def check_model(agent: Agent, model: str, *, keys_here: bool = True) -> ModelsFile | None:
    """Check that `agent` can run with `model`, as `ssebench run --model` checks it.

    Returns:
        The models file when `model` is not `none`, else None.

    Raises:
        UserError: the model is not in the models file, its provider key is not
            set (with `keys_here`), or the agent needs a model and got `none`.
    """
    models, _ = choose_model(agent, model, None, find_home(), keys_here=keys_here)
    return models


def check_settings(options: EvalOptions) -> tuple[EvalSettings, list[Task], list[Agent]]:
    """Check every option and the tasks and agents they name, creating nothing.

    Returns:
        The settings, the tasks and the agents.

    Raises:
        UserError: an option is invalid, or a task, agent or model is unknown;
            the message names the bad value and what is allowed.
    """
    mode = validate_mode(options.mode)
    difficulty = validate_difficulty(options.difficulty)
    timeout = validate_timeout(options.timeout)
    check_timeout = validate_timeout(options.check_timeout, what="check timeout")
    egress = validate_egress(options.egress)
    if options.repeat < 1:
        raise UserError(f"invalid repeat {options.repeat}: use 1 or more")
    home = find_home()
    dataset = (options.local or default_dataset(home)).absolute()
    if options.tasks:
        tasks = [find_task(dataset, task_id) for task_id in _split(options.tasks, "--tasks")]
    else:
        tasks = load_dataset(dataset)
        if not tasks:
            raise UserError(f"dataset {dataset} has no task")
    agent_names = _split(options.agents, "--agents")
    if not agent_names:
        raise UserError("no agent given: use --agents with a comma-separated list")
    agents = [find_agent(home, name) for name in agent_names]
    # Checked as for built images; `with_images` checks them again against --prebuilt.
    choose_tool_layer(options.tool_layer, mode=mode, prebuilt=False)
    run_plugins(options.plugins, mode=mode, prebuilt=False, home=home)
    models = _split(options.models, "--models")
    for agent in agents:
        for model in models:
            check_model(agent, model, keys_here=options.keys_here)  # before anything is made
    settings = EvalSettings(
        dataset=str(dataset),
        tasks=[task.id for task in tasks],
        agents=[agent.name for agent in agents],
        models=models,
        mode=mode,
        difficulty=difficulty,
        repeat=options.repeat,
        timeout=timeout,
        check_timeout=check_timeout,
        egress=egress,
        backend=options.backend,
        tool_layer=options.tool_layer,
        plugins=list(options.plugins),
    )
    return settings, tasks, agents


def eval_id(settings: EvalSettings) -> str:
    """The ID of the evaluation made of `settings`: the same settings, the same ID."""
    import msgspec

    from ssebench.spec import encode_json

    fields = msgspec.structs.asdict(settings)
    for name in LATER_SETTINGS:
        if not fields[name]:  # None or []: as an evaluation made before the field was
            del fields[name]
    return hashlib.sha256(encode_json(fields)).hexdigest()[:16]


def read_record(folder: Path) -> EvalRecord:
    """Read `eval.json` from an evaluation's folder.

    Raises:
        UserError: there is none, or it is unreadable.
    """
    path = folder / EVAL_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"{folder} is not an evaluation's folder: it has no {EVAL_FILE}") from None
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror}") from exc
    try:
        return decode_json(data, EvalRecord, what=str(path))
    except DecodeError as exc:
        raise UserError(str(exc)) from exc


def plan_evaluation(
    options: EvalOptions, *, results_root: Path, evals_root: Path, now: datetime
) -> EvalPlan:
    """Check the options and find or make the evaluation they describe, creating nothing.

    Args:
        options: the command line's options.
        results_root: where runs are recorded (`results/`).
        evals_root: where evaluation folders go (`evals/`).
        now: the time the command started.

    Returns:
        The plan: a new record, or the one already in the folder of the same
        settings (then it resumes).

    Raises:
        UserError: see `check_settings`; or the folder's `eval.json` is unreadable.
    """
    settings, tasks, agents = check_settings(options)
    folder = (evals_root / eval_id(settings)).absolute()
    if (folder / EVAL_FILE).exists():
        return _plan(folder, read_record(folder), tasks, agents)
    slots = [
        EvalSlot(task=task.id, agent=agent.name, model=model, repeat=repeat)
        for task in tasks
        for agent in agents
        for model in settings.models
        for repeat in range(1, settings.repeat + 1)
    ]
    record = EvalRecord(
        eval_id=folder.name,
        created_at=iso_utc(now),
        settings=settings,
        results=str(results_root.absolute()),
        slots=slots,
    )
    return _plan(folder, record, tasks, agents)


def resume_plan(folder: Path, *, keys_here: bool = True) -> EvalPlan:
    """The plan of the evaluation recorded in `folder` (`--resume DIR`); `keys_here` as
    in `EvalOptions`.

    Raises:
        UserError: the folder has no readable `eval.json`, or a task, agent or
            model it names is gone.
    """
    record = read_record(folder)
    settings = record.settings
    options = EvalOptions(
        tasks=settings.tasks,
        agents=settings.agents,
        models=settings.models,
        backend=settings.backend,
        local=Path(settings.dataset),
        mode=settings.mode,
        difficulty=settings.difficulty,
        repeat=settings.repeat,
        timeout=settings.timeout,
        check_timeout=settings.check_timeout,
        egress=settings.egress,
        tool_layer=settings.tool_layer,
        plugins=tuple(settings.plugins),
        keys_here=keys_here,
    )
    _, tasks, agents = check_settings(options)
    return _plan(folder.absolute(), record, tasks, agents)


def with_images(plan: EvalPlan, *, prebuilt: bool) -> EvalPlan:
    """The plan as this invocation runs it: with published images (`prebuilt`) or built
    ones, and the tool layer and plugins that go with that, as `ssebench run` chooses them.

    Raises:
        UserError: a tool layer or `--plugin` with published images, or outside
            sandbox mode; a tool layer or plugin that is gone.
    """
    settings = plan.record.settings
    layer = choose_tool_layer(settings.tool_layer, mode=settings.mode, prebuilt=prebuilt)
    plugins, plugins_home = run_plugins(
        tuple(settings.plugins), mode=settings.mode, prebuilt=prebuilt, home=find_home()
    )
    return dataclasses.replace(
        plan, prebuilt=prebuilt, tool_layer=layer, plugins=plugins, plugins_home=plugins_home
    )


def _plan(folder: Path, record: EvalRecord, tasks: list[Task], agents: list[Agent]) -> EvalPlan:
    # Every model was checked against every agent (check_settings): read the file once.
    uses_models = any(model != NO_MODEL for model in record.settings.models)
    models = load_models(models_path(find_home())) if uses_models else None
    return EvalPlan(
        folder=folder,
        record=record,
        tasks={task.id: task for task in tasks},
        agents={agent.name: agent for agent in agents},
        models=models,
    )


def read_summary(run_dir: Path) -> Summary | None:
    """A run's `summary.json`, or None when it has none (or an unreadable one)."""
    try:
        data = (run_dir / contract.SUMMARY_FILE).read_bytes()
        return decode_json(data, Summary, what=contract.SUMMARY_FILE)
    except (OSError, DecodeError):
        return None


ImagesOf = Callable[[ImageRequest], Images]
"""The backend's `prepare_images`: today's images of a cell."""


def what_to_run(
    plan: EvalPlan, images_of: ImagesOf | None = None
) -> tuple[list[Pending], list[Skipped]]:
    """Which cells run and which stand, comparing each cell's last run with today's inputs:
    its folders and settings (`run_inputs`) and, with `images_of`, the images it would
    start from (asked once per task and agent, for the cells that would stand only).

    Raises:
        OSError: a file of a task or an agent cannot be read.
    """
    task_digests = {
        task_id: folder_digest(Path(task.folder)) for task_id, task in plan.tasks.items()
    }
    agent_digests = {name: folder_digest(Path(agent.folder)) for name, agent in plan.agents.items()}
    today: dict[tuple[str, str], dict[str, str] | None] = {}

    def same_images(slot: EvalSlot, recorded: dict[str, str]) -> bool:
        if images_of is None:
            return True
        key = (slot.task, slot.agent)
        if key not in today:
            try:
                today[key] = images_started_from(images_of(plan.image_request(slot)))
            except SSEBenchError:
                today[key] = None  # the run itself will say why
        return today[key] == recorded

    pending: list[Pending] = []
    skipped: list[Skipped] = []
    for index, slot in enumerate(plan.record.slots):
        if not slot.run_ids:
            pending.append(Pending(index=index, reason="new"))
            continue
        summary = read_summary(plan.run_dir(slot, slot.run_ids[-1]))
        if summary is None or summary.outcome is None:
            pending.append(Pending(index=index, reason="unrecorded"))
            continue
        if summary.outcome in RESUMED_OUTCOMES:
            reason: Reason = "stopped" if summary.outcome == "stopped" else "infra_error"
            pending.append(Pending(index=index, reason=reason))
            continue
        inputs = run_inputs(
            plan.tasks[slot.task],
            plan.agents[slot.agent],
            plan.config(slot),
            task_digest=task_digests[slot.task],
            agent_digest=agent_digests[slot.agent],
        )
        if (
            summary.provenance is None
            or summary.provenance.inputs != inputs
            or not same_images(slot, summary.provenance.images)
        ):
            pending.append(Pending(index=index, reason="changed"))
            continue
        skipped.append(Skipped(index=index, summary=summary))
    return pending, skipped


def eval_folder_shown(folder: Path) -> str:
    """The folder relative to the current directory when it is below it."""
    try:
        return os.path.relpath(folder) if folder.is_relative_to(Path.cwd()) else str(folder)
    except ValueError:
        return str(folder)
