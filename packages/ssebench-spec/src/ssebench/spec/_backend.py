"""The Backend interface: how the runner and `ssebench runs` drive a container platform."""

from __future__ import annotations

import abc
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import ClassVar, Generic, TypeVar

import msgspec

from ssebench.spec import contract, labels
from ssebench.spec._errors import BackendError
from ssebench.spec._images import ImageRequest, Images
from ssebench.spec._models import ModelGateway, ModelsFile
from ssebench.spec._run import ContainerRole, RunHandle, RunInfo, RunSpec

HandleT = TypeVar("HandleT", bound=RunHandle)


def refuse_in_agent_container(user: str | None) -> None:
    """Refuse a command in a checker pair's agent container as anyone but `model`
    (`exec_argv`): no root process ever runs there (docs/integrity.md).

    Raises:
        BackendError: `user` is not model.
    """
    if not contract.is_model_user(user):
        raise BackendError(
            f"the agent container runs {contract.MODEL_USER} only, never {user!r}: "
            "leave the user out, or use the task container"
        )


class Backend(abc.ABC, Generic[HandleT]):
    """Carries out runs on one container platform.

    A backend is created without arguments, holds no run state between calls
    (what it needs to control a run is in the handle `start` returns; it may
    keep its connection to the platform), and
    finds runs again by their labels. It never puts a secret on a command
    line, in a repr, in a log or in an error.
    """

    name: ClassVar[str]
    """The name `--backend` selects it by."""

    builds_images: ClassVar[bool] = False
    """Whether `prepare_images` can build layers; if not, runs need `--prebuilt`."""

    supports_exec: ClassVar[bool] = False
    """Whether `exec_argv` is implemented."""

    gateway_keys_from_host: ClassVar[bool] = True
    """Whether `gateway` reads the provider keys from this process's environment, so a
    run with a model is refused up front when its key's variable is unset. False where
    the keys live with a gateway deployed apart, which refuses a model it does not
    serve when the run's key is made (`ModelGateway.open_key`)."""

    @abc.abstractmethod
    def prepare_images(self, request: ImageRequest) -> Images:
        """Make the run's images available and return their names.

        With `request.prebuilt`, pull or check the published images; otherwise
        build the layers.

        Raises:
            UserError: a layer fails to build or an image cannot be found
                (`ImageUnavailableError` in particular).
        """

    @abc.abstractmethod
    def copy_from_image(
        self, image: str, path: str, dest: Path, platform: str | None = None
    ) -> None:
        """Copy one file out of an image without starting a run.

        Raises:
            BackendError: the image or the file cannot be read, or dest cannot be
                written (the same family as every other method's errors).
        """

    @abc.abstractmethod
    def start(self, spec: RunSpec) -> HandleT:
        """Start the run and return once its containers exist.

        From then on the container's output goes to this process's stdout and
        stderr as it is written.

        Raises:
            BackendError: the run cannot be started; nothing of it is left behind.
        """

    @abc.abstractmethod
    def wait(self, handle: HandleT, timeout: float | None = None) -> int:
        """Wait for the container the run waits for to exit; return its exit status.

        A stopped container ends with 128 plus the signal: 143 for the SIGTERM
        of `stop`. For a kept run, returns as soon as the grade marker
        `$SSE_RESULTS/.graded` exists (the container keeps running).

        Raises:
            TimeoutError: `timeout` seconds passed first (`RunTimeoutError`).
            BackendError: the run cannot be watched.
        """

    @abc.abstractmethod
    def logs(self, handle: HandleT, follow: bool = False) -> Iterator[str]:
        """Yield the container's output, stdout and stderr together, one line at a time.

        With `follow`, until the container exits.

        Raises:
            BackendError: the run's output cannot be read.
        """

    @abc.abstractmethod
    def collect_results(self, handle: HandleT, dest: Path) -> None:
        """Put the run's results in `dest`, the run directory on the runner's host.

        When it returns, `dest` holds what the container wrote to its results
        and archive directories.

        Raises:
            BackendError: the results cannot be read.
        """

    @abc.abstractmethod
    def stop(self, handle: HandleT, grace: float = contract.STOP_GRACE) -> None:
        """Ask the run's containers to stop; kill them after `grace` seconds.

        Safe to call at any time: before the container has started, after it
        exited, and more than once. Leaves the containers in place.
        """

    @abc.abstractmethod
    def cleanup(self, handle: HandleT) -> None:
        """Remove what the run left: containers, volumes, other objects.

        Best effort: never raises for something already gone. Does nothing for
        a run started with `keep`.
        """

    def remove(self, handle: HandleT) -> None:
        """Remove everything of a run, kept or not, running or not.

        Unlike `cleanup`, this also removes a run started with `keep`; a
        running container is killed first. `ssebench runs remove` calls it.
        The default stops the run without grace and calls `cleanup` with the
        handle's `keep` cleared; a backend overrides it when that is not all
        of the run.

        Raises:
            BackendError: something of the run exists and cannot be removed.
        """
        self.stop(handle, grace=0)
        self.cleanup(msgspec.structs.replace(handle, keep=False))

    @abc.abstractmethod
    def list_runs(self, labels: dict[str, str] | None = None) -> list[RunInfo]:
        """The runs that carry every label in `labels`, running or not.

        Raises:
            BackendError: the platform cannot be asked.
        """

    def inspect_run(self, run_id: str) -> RunInfo | None:
        """The run with that `ssebench.run-id` label, or None.

        Raises:
            BackendError: several runs carry that ID, or the platform cannot be asked.
        """
        runs = self.list_runs({labels.RUN_ID: run_id})
        if len(runs) > 1:
            raise BackendError(f"{len(runs)} runs have the ID {run_id!r}")
        return runs[0] if runs else None

    def endpoint(self, handle: HandleT, port: int, container: ContainerRole = "task") -> str:
        """`http://host:port` at which this machine reaches `port` of the run's container.

        `container` chooses the container of a run: the task container (the checker,
        the default) or the agent's; a run in one container is both. In the agent
        container of a checker pair a command runs as `model` only
        (`refuse_in_agent_container`).
        The URL stays valid after this call returns and after the calling
        process exits; it carries no credentials.

        Raises:
            BackendError: the run is not running, or the backend cannot do this.
        """
        raise BackendError(f"the {self.name} backend cannot reach a run's ports")

    def exec_argv(
        self,
        handle: HandleT,
        command: Sequence[str],
        *,
        user: str | None = None,
        workdir: str | None = None,
        tty: bool = False,
        stdin: bool = False,
        env_names: Sequence[str] = (),
        container: ContainerRole = "task",
    ) -> list[str]:
        """The argument vector of a local command that runs `command` in the run's container.

        `container` chooses the container of a run: the task container (the checker,
        the default) or the agent's; a run in one container is both.
        `command` reaches the container as separate arguments, never parsed by
        a shell. Each of `env_names` reaches the container's process with the
        value it has in the caller's environment; the vector never carries a
        variable's value.

        Raises:
            BackendError: the backend cannot do this (`supports_exec` is False).
        """
        raise BackendError(f"the {self.name} backend cannot run commands in a run")

    def probe_image(
        self, image: str, argv: Sequence[str], env: dict[str, str], timeout: float = 600
    ) -> bytes:
        """Run `argv` in a throwaway container of `image` as `model` and return its stdout.

        The image's ENTRYPOINT is bypassed (the image is seen as built), the
        container runs as uid/gid `contract.MODEL_UID` with no network, no
        capability and no new privileges, and is removed afterwards, also on
        error. `ssebench dataset scan` looks for a task's hidden material this way.

        Raises:
            ImageUnavailableError: there is no such image.
            BackendError: the backend cannot do this, the engine failed, or the
                command did not finish within `timeout` seconds.
        """
        raise BackendError(f"the {self.name} backend cannot look inside images")

    def gateway(self, models: ModelsFile) -> ModelGateway:
        """The model gateway runs of this backend reach, started if needed, serving `models`.

        A run whose `RunSpec.network.model_proxy` is set reaches it at
        `ModelGateway.base_url`. Provider keys are read from the host variables
        `models` names and never leave the gateway.

        Raises:
            BackendError: the backend has no gateway, or it cannot be started.
        """
        raise BackendError(f"the {self.name} backend has no model gateway")
