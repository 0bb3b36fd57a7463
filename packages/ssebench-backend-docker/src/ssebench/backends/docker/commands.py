"""Commands the Docker backend contributes to `ssebench` (entry-point group `ssebench.commands`)."""

from __future__ import annotations

from collections import deque

import typer
from rich.console import Console

from ssebench.backends.docker._base_image import bootstrap_base_image
from ssebench.backends.docker._engine import docker_client
from ssebench.spec import SSEBenchError, base_image

images_app = typer.Typer(
    name="images",
    help="Manage SSEBench's images on the local Docker engine.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

_stderr = Console(stderr=True)


@images_app.callback()
def _images() -> None:
    """Manage SSEBench's images on the local Docker engine."""


@images_app.command("bootstrap-base")
def bootstrap_base(
    force: bool = typer.Option(False, "--force", help="Rebuild even if the image exists."),
) -> None:
    """Build the base image (SSEBENCH_BASE_IMAGE) offline from Debian packages if it is missing."""
    name = base_image()
    recent: deque[str] = deque(maxlen=1)
    try:
        client = docker_client()
        with _stderr.status(f"bootstrapping {name} from Debian packages") as status:

            def progress(line: str) -> None:
                recent.append(line)
                status.update(f"bootstrapping {name}: {line[:100]}")

            built = bootstrap_base_image(client, name, force=force, progress=progress)
    except SSEBenchError as exc:
        _stderr.print(f"ssebench: {exc}", markup=False, highlight=False)
        raise typer.Exit(1) from exc
    if built:
        _stderr.print(f"built base image {name}", markup=False, highlight=False)
    else:
        _stderr.print(f"base image {name} already exists", markup=False, highlight=False)
