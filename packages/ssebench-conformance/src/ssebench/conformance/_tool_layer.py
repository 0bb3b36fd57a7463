"""The tool layer's contract as checks anyone can run against any tool layer's image.

A subject is one tool layer built for one task: its image, the task's config,
and a way to run a command in a fresh container of it (replacing the
entrypoint, no network). `docker_subject` makes one with the docker SDK; a
third party with another engine passes its own `CommandRunner`.

Without pytest: `run_tool_layer_checks(subject)` returns a `ToolLayerReport`.
With pytest, `tool_layer_tests()` gives one test per check, the subjects made
by a `tool_layer_subject` fixture.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from typing_extensions import override

from ssebench.conformance._suite import Outcome
from ssebench.spec import TaskConfig, contract

if TYPE_CHECKING:
    import docker


@dataclass(frozen=True)
class Ran:
    """What one command in a container of the layer did."""

    status: int
    stdout: str
    stderr: str

    def ok(self) -> str:
        """The output of a command that must succeed.

        Raises:
            AssertionError: it exited with another status than 0.
        """
        if self.status != 0:
            raise AssertionError(
                f"exit {self.status}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"
            )
        return self.stdout


class CommandRunner(Protocol):
    """Runs `argv` in a fresh container of the layer, as `user` in `workdir`, no network.

    `argv[0]` replaces the image's entrypoint; the container is gone afterwards.
    """

    def __call__(
        self, argv: Sequence[str], *, user: str | None = None, workdir: str | None = None
    ) -> Ran: ...


@dataclass(frozen=True)
class ToolLayerSubject:
    """One tool layer built for one task, as the checks see it.

    Attributes:
        image: the image's name or ID (for messages).
        config: the task's config (its source folder, hidden files, scripts).
        run: runs a command in a fresh container of the image.
        entrypoint: the image's ENTRYPOINT.
        user: the image's USER ("" when unset).
    """

    image: str
    config: TaskConfig
    run: CommandRunner
    entrypoint: tuple[str, ...]
    user: str

    def python(self, code: str, *args: str, user: str | None = None) -> str:
        """Run `code` with the runtime's own Python (the case image's is never needed)."""
        return self.run([contract.RUNTIME_PYTHON, "-I", "-c", code, *args], user=user).ok()


ToolLayerCheck = Callable[[ToolLayerSubject], None]
"""One behaviour every tool layer must show, named by its function (a sentence)."""


@dataclass(frozen=True)
class ToolLayerReport:
    """The outcomes of every check against one tool layer's image."""

    image: str
    outcomes: tuple[Outcome, ...]

    @property
    def ok(self) -> bool:
        """Whether the layer keeps the contract: no check failed."""
        return all(outcome.status == "passed" for outcome in self.outcomes)

    @override
    def __str__(self) -> str:
        rows = [
            f"{o.status:>7}  {o.check}" + (f": {o.detail}" if o.detail else "")
            for o in self.outcomes
        ]
        return "\n".join([f"tool layer contract of {self.image}", *rows])


def run_tool_layer_checks(
    subject: ToolLayerSubject, checks: Sequence[ToolLayerCheck] | None = None
) -> ToolLayerReport:
    """Run every check (or `checks`) against one subject, without pytest.

    Returns:
        One outcome per check, in order: `passed`, or `failed` with the error's last line.
    """
    from ssebench.conformance._tool_layer_checks import TOOL_LAYER_CHECKS

    outcomes = []
    for check in checks if checks is not None else TOOL_LAYER_CHECKS:
        try:
            check(subject)
        except Exception as exc:
            detail = "".join(traceback.format_exception_only(exc)).strip()
            outcomes.append(Outcome(check.__name__, "failed", detail))
        else:
            outcomes.append(Outcome(check.__name__, "passed"))
    return ToolLayerReport(image=subject.image, outcomes=tuple(outcomes))


def run_in_image(
    engine: docker.DockerClient,
    image: str,
    argv: Sequence[str],
    *,
    user: str | None = None,
    workdir: str | None = None,
    label: str = "tool-layer-conformance",
) -> Ran:
    """Run `argv` (its first word replacing the image's entrypoint) in a fresh container of
    `image` without a network, removed afterwards; the container is labelled
    `ssebench.test=<label>`.

    Raises:
        docker.errors.DockerException: the engine failed, or the command ran over 300 s.
    """
    container = engine.containers.create(
        image,
        list(argv[1:]),
        entrypoint=[argv[0]],
        user=user,
        working_dir=workdir,
        network_disabled=True,
        labels={"ssebench.test": label},
    )
    try:
        container.start()
        status = int(container.wait(timeout=300)["StatusCode"])
        stdout = container.logs(stdout=True, stderr=False).decode(errors="replace")
        stderr = container.logs(stdout=False, stderr=True).decode(errors="replace")
    finally:
        container.remove(force=True)
    return Ran(status=status, stdout=stdout, stderr=stderr)


def docker_subject(
    image: str, config: TaskConfig, client: docker.DockerClient | None = None
) -> ToolLayerSubject:
    """A subject whose commands run in containers of `image` on a Docker engine.

    Args:
        image: a local image (name or ID); nothing is pulled.
        config: the config of the task the layer was built for.
        client: the engine; by default the one the environment names.

    Raises:
        docker.errors.DockerException: the engine cannot be reached or has no such image.
    """
    import docker  # here: the checks themselves need no docker SDK

    engine = client if client is not None else docker.from_env()
    attributes: dict[str, Any] = engine.images.get(image).attrs.get("Config") or {}

    def run(argv: Sequence[str], *, user: str | None = None, workdir: str | None = None) -> Ran:
        return run_in_image(engine, image, argv, user=user, workdir=workdir)

    return ToolLayerSubject(
        image=image,
        config=config,
        run=run,
        entrypoint=tuple(attributes.get("Entrypoint") or ()),
        user=str(attributes.get("User") or ""),
    )
