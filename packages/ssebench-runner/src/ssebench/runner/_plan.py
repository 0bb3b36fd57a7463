"""What one run will be, decided and checked before anything is created: the RunPlan.

`plan_run` turns `ssebench run`'s options into a RunPlan without side effects;
`run_spec` turns a plan and its images into the RunSpec a backend carries out.
"""

from __future__ import annotations

import os
import re
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
    validate_platform,
    validate_run_id,
    validate_timeout,
)
from ssebench.runner._plugins import run_plugins
from ssebench.runner._run_dir import check_run_dir_free, run_dir_path
from ssebench.spec import (
    SANDBOX_TOOL_LAYER,
    Agent,
    Images,
    Mode,
    ModelsFile,
    Mount,
    NetworkPolicy,
    RunConfig,
    RunSpec,
    SidecarPair,
    Task,
    ToolLayer,
    UserError,
    contract,
    default_dataset,
    find_agent,
    find_home,
    find_task,
    get_tool_layer,
    labels,
    list_agents,
    load_dataset,
    load_models,
    models_path,
    protection_problems,
    run_resources,
)
from ssebench.spec.catalog import (
    CATALOG_ENV,
    CaseSource,
    case_source,
    catalog_path,
    catalog_task,
    load_catalog,
)
from ssebench.spec.lease import current_lease

MODEL_NAME_PATTERN: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
"""What a model's name may look like: it becomes a folder of the run directory's path."""

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
    timeout: int = contract.DEFAULT_AGENT_TIMEOUT
    check_timeout: int = contract.DEFAULT_CHECK_TIMEOUT
    egress: str = "restricted"
    run_id: str | None = None
    keep: bool = False
    prebuilt: bool = False
    platform: str | None = None
    model: str = NO_MODEL
    budget: float | None = None
    cpus: float | None = None
    memory: str | None = None
    pids_limit: int | None = None
    catalog: Path | None = None
    build: bool = False
    tool_layer: str | None = None
    plugins: tuple[str, ...] = ()
    """`--plugin` values: exactly these run; empty: those plugins.yaml enables."""


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
    models: ModelsFile | None = None
    """The models file, when the run uses a model (`config.model` is not `none`)."""
    case: CaseSource | None = None
    """Where the case image comes from, for a task from a catalog (`ImageRequest.case`)."""
    tool_layer: ToolLayer | None = None
    """The tool layer from `--tool-layer`; None for the built-in one (or none at all)."""
    plugins_home: Path | None = None
    """The folder holding the folders of `config.plugins` (None: the run has none)."""

    @property
    def reference_run(self) -> bool:
        """Whether this run's agent is the reference agent, the one shown the fix."""
        return self.config.reference_run


def container_env(
    config: RunConfig, *, api_key: str = "", base_url: str = "", model_name: str = NO_MODEL
) -> dict[str, str]:
    """The environment of the run's container (docs/architecture.md).

    Args:
        config: the run's settings.
        api_key: the run's model key (a secret); empty while no agent uses a model.
        base_url: the model proxy's URL; empty while there is none.
        model_name: the model's name, `none` without a model.

    Returns:
        Every variable of the container contract that a sandbox run gets; the process
        limit with the run's limits, for the container to hold where the kernel does
        not (on Kubernetes).
    """
    env = {
        contract.ENV_API_KEY: api_key,
        contract.ENV_BASE_URL: base_url,
        contract.ENV_MODEL_NAME: model_name,
        contract.ENV_ARCHIVE: contract.ARCHIVE_DIR,
        contract.ENV_RESULTS: contract.RESULTS_DIR,
        contract.ENV_DIFFICULTY: str(config.difficulty),
        contract.ENV_TIMEOUT: str(config.timeout),
        contract.ENV_CHECK_TIMEOUT: str(config.check_timeout),
        contract.ENV_KEEP_ALIVE: "1" if config.keep else "0",
        contract.ENV_MODE: config.mode,
        contract.ENV_MCP_URL: contract.MCP_URL,
    }
    if config.resources is not None:
        env[contract.ENV_PIDS_LIMIT] = str(config.resources.pids)
    return env


def plan_run(
    options: RunOptions, *, results_root: Path, now: datetime, keys_here: bool = True
) -> RunPlan:
    """Check every option and decide the run, creating nothing.

    Args:
        options: the command line's options.
        results_root: the folder run directories go in.
        now: the time the command started; a generated run ID is made from it.
        keys_here: whether the chosen backend's gateway reads provider keys from
            this environment (`Backend.gateway_keys_from_host`).

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
    platform = validate_platform(options.platform) if options.platform else None
    tool_layer = choose_tool_layer(options.tool_layer, mode=mode, prebuilt=options.prebuilt)
    tool_layer_name = recorded_tool_layer(options.tool_layer, mode=mode, prebuilt=options.prebuilt)
    home = find_home()
    task, case = _task_choice(options, home)
    protection = protection_problems(task)[0]
    if protection:
        raise UserError(f"task {task.id}: {protection[0]}")
    if not options.agent:
        raise UserError(f"no agent given: use --agent with one of {_agent_names(home)}")
    agent = find_agent(home, options.agent)
    models, budget = choose_model(agent, options.model, options.budget, home, keys_here=keys_here)
    plugins, plugins_home = run_plugins(
        options.plugins, mode=mode, prebuilt=options.prebuilt, home=home
    )
    resources = run_resources(
        task.config.resources, cpus=options.cpus, memory=options.memory, pids=options.pids_limit
    )
    config = RunConfig(
        agent=agent.name,
        model=options.model,
        budget=budget,
        mode=mode,
        backend=options.backend,
        difficulty=difficulty,
        timeout=timeout,
        check_timeout=check_timeout,
        egress=egress,
        reference_run=agent.name == REFERENCE_AGENT,
        keep=options.keep,
        resources=resources,
        tool_layer=tool_layer_name,
        plugins=plugins,
    )
    return plan_of(
        task,
        agent,
        config,
        run_id=run_id,
        results_root=results_root,
        prebuilt=options.prebuilt,
        platform=platform,
        models=models,
        case=case,
        tool_layer=tool_layer,
        plugins_home=plugins_home,
    )


def _task_choice(options: RunOptions, home: Path) -> tuple[Task, CaseSource | None]:
    """The run's task: from `--local`, else from the catalog (`--catalog`, `SSEBENCH_CATALOG`,
    the demo dataset's manifest); a home without a demo manifest runs its demo folder."""
    if options.build and options.prebuilt:
        raise UserError(
            "--build builds the case image and --prebuilt builds nothing: use one of them"
        )
    if options.local is not None and options.catalog is not None:
        raise UserError("--local and --catalog both say where the task comes from: use one")
    path = catalog_path(options.catalog, home)
    explicit = options.catalog is not None or bool(os.environ.get(CATALOG_ENV))
    if options.local is not None or not (explicit or path.exists()):
        dataset = options.local if options.local is not None else default_dataset(home)
        if not options.task:
            known = ", ".join(task.id for task in load_dataset(dataset)) or "none"
            raise UserError(
                f"no task given: use --task with one of the tasks in {dataset}: {known}"
            )
        return find_task(dataset, options.task), None
    catalog = load_catalog(path)
    if not options.task:
        known = ", ".join(entry.id for entry in catalog.manifest.tasks) or "none"
        raise UserError(f"no task given: use --task with one of the tasks in {path}: {known}")
    task, entry = catalog_task(catalog, options.task)
    # A prebuilt run needs no case image: the catalog gives its metadata only.
    return task, None if options.prebuilt else case_source(catalog, entry, build=options.build)


def plan_of(
    task: Task,
    agent: Agent,
    config: RunConfig,
    *,
    run_id: str,
    results_root: Path,
    prebuilt: bool = False,
    platform: str | None = None,
    models: ModelsFile | None = None,
    case: CaseSource | None = None,
    tool_layer: ToolLayer | None = None,
    plugins_home: Path | None = None,
) -> RunPlan:
    """The plan of a run whose task, agent and settings are already checked.

    Args:
        task: the task.
        agent: the agent.
        config: the run's settings.
        run_id: a valid run ID.
        results_root: the folder run directories go in.
        prebuilt: run published images and build nothing.
        platform: the checked platform of every image and container, or None.
        models: the models file, for a run with a model; None without one.
        case: where the case image comes from, for a task from a catalog.
        tool_layer: a checked tool layer from an extension; None for the built-in one.
        plugins_home: the folder holding the folders of `config.plugins`.

    Returns:
        The run's plan.

    Raises:
        UserError: the run directory exists.
    """
    run_dir = run_dir_path(results_root, task.id, config.model, agent.name, run_id)
    check_run_dir_free(run_dir)
    return RunPlan(
        run_id=run_id,
        task=task,
        agent=agent,
        config=config,
        run_dir=run_dir,
        env=container_env(config),
        prebuilt=prebuilt,
        platform=platform,
        models=models,
        case=case,
        tool_layer=tool_layer,
        plugins_home=plugins_home,
    )


def recorded_tool_layer(name: str | None, *, mode: str, prebuilt: bool) -> str | None:
    """The tool layer a run's `config` records: the one it builds (`name`, else the
    built-in one), in sandbox mode with built images; None where sidecar or prebuilt
    images bring their own."""
    return (name or SANDBOX_TOOL_LAYER) if mode == "sandbox" and not prebuilt else None


def choose_tool_layer(name: str | None, *, mode: Mode, prebuilt: bool) -> ToolLayer | None:
    """The tool layer `--tool-layer NAME` asks for; None for the built-in `sandbox` one.

    Raises:
        UserError: a tool layer is named in sidecar mode or with prebuilt images,
            or no usable tool layer has that name (the message names those installed).
    """
    if name is None:
        return None
    if mode != "sandbox":
        raise UserError(
            f"--tool-layer is for sandbox mode only: {mode} mode has its own two layers; "
            "leave --tool-layer out or use --mode sandbox"
        )
    if prebuilt:
        raise UserError(
            "--tool-layer cannot go with --prebuilt (or SSEBENCH_PREBUILT=1): published "
            "images carry the tool layer they were built with"
        )
    layer = get_tool_layer(name)
    return None if layer.builtin else layer


def choose_model(
    agent: Agent, model: str, budget: float | None, home: Path, *, keys_here: bool = True
) -> tuple[ModelsFile | None, float | None]:
    """The models file and the run's budget, checked: (None, None) for a run without a model.

    Args:
        agent: the run's agent.
        model: the model's name in the models file, or `none`.
        budget: US dollars the run may spend; None for the models file's default.
        home: the SSEBench home (its `models.yaml`, unless `SSEBENCH_MODELS` names another).
        keys_here: whether the backend's gateway takes the provider keys from this
            environment (`Backend.gateway_keys_from_host`), so they are checked here.

    Raises:
        UserError: the agent needs a model and none is given, the model is not in
            the models file, its provider key's variable is unset here (with
            `keys_here`), or the budget is
            not a positive number (or is given without a model).
    """
    if model == NO_MODEL:
        if agent.uses_model:
            raise UserError(
                f"agent {agent.name!r} uses a model: choose one with --model "
                f"(the models in {models_path(home)}: {_model_names(home)})"
            )
        if budget is not None:
            raise UserError("--budget needs a model: choose one with --model")
        return None, None
    if not MODEL_NAME_PATTERN.fullmatch(model):
        raise UserError(f"invalid model name {model!r}: use letters, digits, '.', '_' or '-'")
    path = models_path(home)
    models = load_models(path)
    entry = models.entry(model, str(path))
    if keys_here and entry.key_env is not None and not os.environ.get(entry.key_env):
        raise UserError(
            f"model {model!r} needs its provider key in the variable {entry.key_env}, "
            "which is not set in this environment"
        )
    if budget is None:
        budget = entry.budget if entry.budget is not None else models.budget
    if not budget > 0 or budget != budget or budget == float("inf"):
        raise UserError(f"invalid budget {budget}: use a positive number of US dollars")
    return models, budget


def _model_names(home: Path) -> str:
    try:
        return ", ".join(sorted(load_models(models_path(home)).models)) or "none"
    except UserError:
        return "unreadable"


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
        # Who started the run, so `ssebench runs reap` can tell a dead runner's runs.
        **current_lease(),
    }


def run_spec(
    plan: RunPlan, images: Images, reference_patch: Path, plugins: Path | None = None
) -> RunSpec:
    """The RunSpec of a planned run.

    Args:
        plan: the run.
        images: what `prepare_images` returned for it.
        reference_patch: the private copy of the task's reference fix; mounted
            for the reference agent only.
        plugins: the staged plugins folder (`stage_plugins`), mounted read-only at
            `contract.PLUGINS_DIR`; None when the run has no plugins.

    Returns:
        The spec to hand to `Backend.start`, with its `SidecarPair` (a checker pair in
        both modes).

    Raises:
        UserError: the images have no checker's image.
    """
    artifacts = (
        [Mount(target=contract.REFERENCE_PATCH, source=str(reference_patch), read_only=True)]
        if plan.reference_run
        else []
    )
    if plugins is not None:
        artifacts.append(Mount(target=contract.PLUGINS_DIR, source=str(plugins), read_only=True))
    env = dict(plan.env)
    if images.environment is None:
        raise UserError(f"the backend gave no checker's image for run {plan.run_id}")
    # The agent reaches the daemon in the checker through the shared socket.
    env[contract.ENV_DAEMON_SOCKET] = contract.SIDECAR_DAEMON_SOCKET
    sidecar = SidecarPair.create(
        run_id=plan.run_id,
        environment_image=images.environment,
        source_dir=plan.task.config.source,
        env=env,
        checker=True,
        # Plugins run in the checker: one that uses the model needs the run's key there.
        model_key=plan.config.model != NO_MODEL and any(p.llm for p in plan.config.plugins),
    )
    return RunSpec(
        run_id=plan.run_id,
        task_name=plan.task.id,
        mode=plan.config.mode,
        image=images.agent,
        env=env,
        results=Mount(target=contract.RESULTS_DIR, source=str(plan.run_dir)),
        archive=Mount(target=contract.ARCHIVE_DIR, source=str(plan.run_dir / contract.RUN_ARCHIVE)),
        artifacts=artifacts,
        network=NetworkPolicy(egress=plan.config.egress, model_proxy=plan.config.model != NO_MODEL),
        platform=plan.platform,
        labels=run_labels(plan),
        timeout=plan.config.timeout,
        keep=plan.config.keep,
        sidecar=sidecar,
        resources=plan.config.resources,
    )
