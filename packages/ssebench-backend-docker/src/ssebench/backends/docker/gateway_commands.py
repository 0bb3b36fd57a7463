"""`ssebench proxy`: the model gateway on the local Docker engine.

    ssebench proxy up [--json]       start it (or keep it) serving models.yaml's models
    ssebench proxy down              remove its container (keys and spend are kept)
    ssebench proxy status [--json]   whether it runs, where, which models it serves

`ssebench run --model NAME` starts it when needed. With `--backend k8s` (or
`SSEBENCH_BACKEND=k8s`) the gateway is the cluster's: `up` builds its image
here, pushes it to `SSEBENCH_REGISTRY` and deploys it with the cluster rights
of the kubeconfig in force (a Deployment, a Secret, a Service and a
NetworkPolicy in `SSEBENCH_K8S_GATEWAY_NAMESPACE`, the admin token's Secret in
`SSEBENCH_K8S_NAMESPACE`); runs never start it there. Progress and errors go
to stderr; no command prints a key.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Annotated, Any, NoReturn, Protocol, runtime_checkable

import click
import typer

from ssebench.backends.docker._engine import docker_client
from ssebench.backends.docker._gateway import DockerGateway, gateway_config
from ssebench.spec import (
    Message,
    SSEBenchError,
    UserError,
    encode_json,
    find_home,
    get_backend,
    load_models,
    models_path,
    settings,
)

proxy_app = typer.Typer(
    name="proxy",
    help="The model gateway (a LiteLLM proxy) that runs with a model reach.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


class GatewayListing(Message, frozen=True):
    """The gateway as `--json` prints it."""

    name: str
    state: str
    image: str | None
    address: str | None
    models: list[str]


class _Status(Protocol):
    """A gateway's state as a backend reports it (Docker's GatewayStatus, the cluster's)."""

    @property
    def name(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def image(self) -> str | None: ...
    @property
    def address(self) -> str | None: ...
    @property
    def models(self) -> tuple[str, ...]: ...


@runtime_checkable
class _GatewayHost(Protocol):
    """A backend whose gateway these commands deploy (the k8s backend)."""

    def gateway_up(
        self, config: dict[str, Any], image: str, say: Callable[[str], None]
    ) -> _Status: ...
    def gateway_down(self) -> bool: ...
    def gateway_status(self) -> _Status: ...


BackendOption = Annotated[
    str | None,
    typer.Option(
        "--backend",
        help="Where the gateway runs: docker (the local engine) or k8s (the cluster). "
        "Default: SSEBENCH_BACKEND, else docker.",
    ),
]


def _backend_name(given: str | None) -> str:
    return given or os.environ.get(settings.BACKEND.name) or "docker"


def _host(name: str) -> _GatewayHost:
    """The backend `name`, which must deploy its own gateway.

    Raises:
        UserError: it does not (or is unknown).
    """
    backend = get_backend(name)
    if not isinstance(backend, _GatewayHost):
        raise UserError(f"the {name} backend has no model gateway of its own: use docker or k8s")
    return backend


def _say(line: str) -> None:
    click.echo(line, err=True)


def _fail(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    raise typer.Exit(1)


def _show(status: _Status, json_output: bool) -> None:
    listing = GatewayListing(
        name=status.name,
        state=status.state,
        image=status.image,
        address=status.address,
        models=list(status.models),
    )
    if json_output:
        click.echo(encode_json(listing, pretty=True).decode(), nl=False)
        return
    click.echo(f"{status.name}: {status.state}")
    if status.address:
        click.echo(f"address: http://{status.address}")
    if status.models:
        click.echo(f"models: {', '.join(status.models)}")


@proxy_app.command("up")
def up(
    json_output: Annotated[bool, typer.Option("--json", help="Print the status as JSON.")] = False,
    backend: BackendOption = None,
) -> None:
    """Start the model gateway with the models of models.yaml whose provider keys are set."""
    try:
        name = _backend_name(backend)
        home = find_home()
        models = load_models(models_path(home))
        started = time.monotonic()
        status: _Status
        if name == "docker":
            gateway = DockerGateway(docker_client(), reservation=models.reservation)
            status = gateway.up(models, say=_say)
        else:
            from ssebench.backends.docker._gateway_publish import publish_gateway

            host = _host(name)
            image = publish_gateway(docker_client(), home, _say)
            # The master key is the cluster's to keep (in the gateway's Secret).
            status = host.gateway_up(gateway_config(models, ""), image, _say)
        click.echo(f"ready after {time.monotonic() - started:.1f}s", err=True)
    except SSEBenchError as exc:
        _fail(str(exc))
    _show(status, json_output)


@proxy_app.command("down")
def down(backend: BackendOption = None) -> None:
    """Remove the model gateway; on Docker, open keys and spend stay in its store."""
    try:
        name = _backend_name(backend)
        if name == "docker":
            removed = DockerGateway(docker_client()).down()
        else:
            removed = _host(name).gateway_down()
    except SSEBenchError as exc:
        _fail(str(exc))
    click.echo("removed" if removed else "not running", err=True)


@proxy_app.command("status")
def status(
    json_output: Annotated[bool, typer.Option("--json", help="Print the status as JSON.")] = False,
    backend: BackendOption = None,
) -> None:
    """Whether the model gateway runs, where it is reached, and its models."""
    try:
        name = _backend_name(backend)
        found: _Status
        if name == "docker":
            found = DockerGateway(docker_client()).status()
        else:
            found = _host(name).gateway_status()
    except SSEBenchError as exc:
        _fail(str(exc))
    _show(found, json_output)
