"""What a run is, as the runner hands it to a backend, and what a backend reports back."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

import msgspec
from typing_extensions import override

from ssebench.spec import contract
from ssebench.spec._base import Message
from ssebench.spec._errors import UserError
from ssebench.spec._resources import Resources

Mode = Literal["sandbox", "sidecar"]
Egress = Literal["restricted", "open"]
RunState = Literal["created", "running", "exited", "unknown"]
ContainerRole = Literal["task", "agent"]
"""Which container of a run `endpoint` and `exec_argv` reach: the task container (the
checker, the default; the daemon, the project) or the agent's. A run in one container
(kept from before both modes had two, or a backend's own) is both."""


class Mount(Message, kw_only=True, frozen=True):
    """A place in the container (`target`) and where its content comes from.

    `source` is a path on the runner's host for kind "bind", a volume name for
    kind "volume".
    """

    target: str
    source: str
    kind: Literal["bind", "volume"] = "bind"
    read_only: bool = False


class NetworkPolicy(Message, kw_only=True, frozen=True):
    """Where the run may connect: the model proxy only, or also the internet."""

    egress: Egress = "restricted"
    model_proxy: bool = False
    """Whether the run reaches the backend's model gateway (`Backend.gateway`): with
    `restricted`, at its address and port and nothing else."""


SIDECAR_SHARED_ENV: Final = (
    contract.ENV_DIFFICULTY,
    contract.ENV_RESULTS,
    contract.ENV_ARCHIVE,
    contract.ENV_DAEMON_SOCKET,
)
"""What both containers of a pair get: the same difficulty, results, archive and socket."""

SIDECAR_ENVIRONMENT_ENV: Final = (
    *SIDECAR_SHARED_ENV,
    contract.ENV_CHECK_TIMEOUT,
    contract.ENV_PIDS_LIMIT,
    contract.ENV_TIMEOUT,
    contract.ENV_KEEP_ALIVE,
    contract.ENV_MODEL_NAME,
)
"""What the checker (the environment, or task, container) gets: the daemon's and the
entrypoint's settings, the process limit its supervisor holds, the agent's time limit
(the checker's fallback when no report of the agent's end comes) and the model's name
for the grade; never a secret."""

MODEL_KEY_ENV: Final = (contract.ENV_API_KEY, contract.ENV_BASE_URL)
"""What the checker also gets from the run's variables when a plugin of the run uses the
model (`SidecarPair.model_key`): the run's key and the gateway's URL."""

SOURCE_VOLUME: Final = "source"
"""The suffix of the volume holding the project's source tree (owned by `model`)."""

SOCKETS_VOLUME: Final = "sockets"
"""The suffix of the volume holding the daemon's sockets (`/run/ssebench`, root's)."""


class SidecarPair(Message, kw_only=True, frozen=True):
    """A run's second container, the checker or the task container, and what it shares
    with the agent's (both modes; the runner gives every run one).

    `RunSpec.image` is the agent container; this is the other one, the environment
    (task) container, which starts first. Its image is the task's tool image in
    both modes (`Images.environment`); the modes differ in the agent's image.

    With `checker` (what the runner asks for), the environment container is the
    run's checker: the task's tool image running SSEBench's entrypoint as root with
    `contract.AGENT_CONTAINER_FLAG` (daemon, MCP server, evaluator), whose end is the
    run's; the agent container runs SSEBench's launcher (`contract.LAUNCHER_MODULE`)
    as `model` (uid 1000, no capability), without the results; the backend watches
    it, and once the agent's process ended (its container exited, or in a kept run
    the launcher printed `contract.AGENT_EXIT_LINE`; 124 past `TIMEOUT`) copies its
    output into `agent.log` (`contract.capped_output`) and runs
    `contract.REPORT_MODULE` with the status in the checker, as root. Without it
    (the conformance suite's probe pairs, until they move), each container runs its
    image's own entrypoint, the agent container is the awaited one, and the
    environment container keeps running until it is stopped.

    `volumes` are the two run-scoped volumes both containers mount (the source
    tree at `source_dir`, the sockets at `/run/ssebench`); the backend creates
    them before the containers start and removes them with the run. `env` is
    what the environment container gets (`SIDECAR_ENVIRONMENT_ENV`, never a
    secret). `run_id` names the pair: both containers and both volumes carry it
    as the `ssebench.run` label.
    """

    run_id: str
    environment_image: str
    source_dir: str
    volumes: list[Mount]
    env: dict[str, str] = msgspec.field(default_factory=dict)
    checker: bool = False
    model_key: bool = False
    """The checker also gets `MODEL_KEY_ENV` from `RunSpec.env` (the run's key, from where
    the backend keeps the run's secrets, never from `env`): a plugin of the run uses the
    model (`llm`), and plugins run in the checker. The entrypoint hands the key to those
    plugins alone; no check, service or other plugin sees it."""

    def __post_init__(self) -> None:
        if not self.source_dir.startswith("/"):
            raise UserError(f"the source directory {self.source_dir!r} must be an absolute path")
        if len(self.volumes) != 2 or any(mount.kind != "volume" for mount in self.volumes):
            raise UserError("a SidecarPair has exactly two volumes: the source tree and sockets")
        secret = sorted(set(self.env) & contract.SECRET_ENV)
        if secret:
            raise UserError(f"the environment container never gets a secret: {', '.join(secret)}")

    @classmethod
    def create(
        cls,
        *,
        run_id: str,
        environment_image: str,
        source_dir: str,
        env: Mapping[str, str],
        checker: bool = False,
        model_key: bool = False,
    ) -> SidecarPair:
        """The pair of a run: its volumes named after `run_id`, its environment taken
        from the run's `env` (`SIDECAR_ENVIRONMENT_ENV` only, with the sidecar socket)."""
        chosen = {name: env[name] for name in SIDECAR_ENVIRONMENT_ENV if name in env}
        chosen[contract.ENV_DAEMON_SOCKET] = contract.SIDECAR_DAEMON_SOCKET
        return cls(
            run_id=run_id,
            environment_image=environment_image,
            source_dir=source_dir,
            volumes=[
                Mount(
                    target=source_dir, source=f"ssebench-{run_id}-{SOURCE_VOLUME}", kind="volume"
                ),
                Mount(
                    target=contract.SOCKET_DIR,
                    source=f"ssebench-{run_id}-{SOCKETS_VOLUME}",
                    kind="volume",
                ),
            ],
            env=chosen,
            checker=checker,
            model_key=model_key,
        )

    def shared_env(self) -> dict[str, str]:
        """What both containers get."""
        return {name: self.env[name] for name in SIDECAR_SHARED_ENV if name in self.env}

    def environment_env(self, run_env: Mapping[str, str] | None = None) -> dict[str, str]:
        """What the environment container gets: the shared variables and the daemon's own;
        with `model_key`, `MODEL_KEY_ENV` from `run_env` too (`RunSpec.env`)."""
        found = dict(self.env)
        if self.model_key and run_env is not None:
            found.update({name: run_env[name] for name in MODEL_KEY_ENV if name in run_env})
        return found

    def shared_mounts(self, results: Mount, archive: Mount) -> list[Mount]:
        """The four mounts both containers have: results, archive, source tree, sockets.

        The agent container never mounts the task's own files; artifacts (the
        reference patch) go to the agent container alone.
        """
        return [results, archive, *self.volumes]


class RunSpec(Message, kw_only=True, frozen=True):
    """Everything a backend needs to carry out one run.

    `env` holds the model key: it is left out of `repr`, and `record()` keeps
    only its names for anything written to disk.
    """

    run_id: str
    task_name: str
    mode: Mode
    image: str
    env: dict[str, str]
    results: Mount
    archive: Mount
    artifacts: list[Mount] = msgspec.field(default_factory=list)
    network: NetworkPolicy = msgspec.field(default_factory=NetworkPolicy)
    platform: str | None = None
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    timeout: int = contract.DEFAULT_AGENT_TIMEOUT
    keep: bool = False
    sidecar: SidecarPair | None = None
    resources: Resources | None = None
    """CPU, memory and process limits of the run's containers; None: the platform's own."""

    def __post_init__(self) -> None:
        if self.mode == "sidecar" and self.sidecar is None:
            raise UserError("a sidecar run needs a SidecarPair (RunSpec.sidecar)")
        if self.mode == "sandbox" and self.sidecar is not None and not self.sidecar.checker:
            raise UserError("a sandbox run's SidecarPair is a checker pair (checker=True)")

    @override
    def __repr__(self) -> str:
        shown = ", ".join(
            f"{name}={getattr(self, name)!r}" for name in self.__struct_fields__ if name != "env"
        )
        return f"RunSpec({shown}, env=<{len(self.env)} variables: {', '.join(sorted(self.env))}>)"

    @override
    def __rich_repr__(self) -> Any:
        for name in self.__struct_fields__:
            yield (name, sorted(self.env) if name == "env" else getattr(self, name))

    def record(self) -> RunRecord:
        """This spec as it may be written to disk: the environment's names, no values."""
        fields = {name: getattr(self, name) for name in self.__struct_fields__ if name != "env"}
        return RunRecord(env_names=sorted(self.env), **fields)


class RunRecord(Message, kw_only=True, frozen=True):
    """A RunSpec as written to `run.json`: the environment's names and none of its values."""

    run_id: str
    task_name: str
    mode: Mode
    image: str
    env_names: list[str]
    results: Mount
    archive: Mount
    artifacts: list[Mount] = msgspec.field(default_factory=list)
    network: NetworkPolicy = msgspec.field(default_factory=NetworkPolicy)
    platform: str | None = None
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    timeout: int = contract.DEFAULT_AGENT_TIMEOUT
    keep: bool = False
    sidecar: SidecarPair | None = None
    resources: Resources | None = None
    """CPU, memory and process limits of the run's containers; None: the platform's own."""


class RunHandle(Message, kw_only=True, frozen=True):
    """What a backend needs to find a run again; a backend may subclass it."""

    run_id: str
    name: str
    keep: bool = False
    images: dict[str, str] = msgspec.field(default_factory=dict)
    """What the platform says it started the run's containers from, by role (`agent`,
    `environment`), as an image ID or digest, when `start` learns more than the names
    `prepare_images` gave (a cluster resolves a tag when it pulls). The runner records
    these in the run's provenance in place of the names."""


class RunInfo(Message, kw_only=True, frozen=True):
    """A run as a backend sees it now."""

    run_id: str
    name: str
    state: RunState
    image: str
    handle: RunHandle
    exit_code: int | None = None
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    created_at: str | None = None
