"""What a run is, as the runner hands it to a backend, and what a backend reports back."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from ssebench.spec._base import Message
from ssebench.spec._errors import UserError

Mode = Literal["sandbox", "sidecar"]
Egress = Literal["restricted", "open"]
RunState = Literal["created", "running", "exited", "unknown"]


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


class SidecarPair(Message, kw_only=True, frozen=True):
    """Sidecar mode: the task container and what it shares with the agent's.

    Its fields and helpers arrive with sidecar mode.
    """


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
    timeout: int = 3600
    keep: bool = False
    sidecar: SidecarPair | None = None

    def __post_init__(self) -> None:
        if self.mode == "sidecar" and self.sidecar is None:
            raise UserError("a sidecar run needs a SidecarPair (RunSpec.sidecar)")
        if self.mode == "sandbox" and self.sidecar is not None:
            raise UserError("a sandbox run takes no SidecarPair; use mode='sidecar'")

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{name}={getattr(self, name)!r}" for name in self.__struct_fields__ if name != "env"
        )
        return f"RunSpec({shown}, env=<{len(self.env)} variables: {', '.join(sorted(self.env))}>)"

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
    timeout: int = 3600
    keep: bool = False
    sidecar: SidecarPair | None = None


class RunHandle(Message, kw_only=True, frozen=True):
    """What a backend needs to find a run again; a backend may subclass it."""

    run_id: str
    name: str
    keep: bool = False


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


class ProxyEndpoint(Message, kw_only=True, frozen=True):
    """A backend's own model proxy: where the runner reaches it, and the run's SSE_BASE_URL."""

    host_url: str
    service_url: str
