"""`ssebench models`: the models of models.yaml, and a scripted model to stand in for one."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import click
import typer

from ssebench.runner._console import fail
from ssebench.runner._lifecycle import said
from ssebench.runner.scripted import ScriptedModel, load_script
from ssebench.spec import Message, SSEBenchError, encode_json, find_home, load_models, models_path

models_app = typer.Typer(
    name="models",
    help="The models runs may use (models.yaml), and a scripted model server.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


class ModelListing(Message, kw_only=True, frozen=True):
    """One model as `ssebench models list --json` prints it (never a key)."""

    name: str
    litellm_model: str
    key_env: str | None
    key_set: bool
    budget: float


@models_app.command("list")
def list_models(
    json_output: Annotated[bool, typer.Option("--json", help="Print a JSON list.")] = False,
) -> None:
    """The models of models.yaml, with the variable of each one's provider key and its budget."""
    try:
        path = models_path(find_home())
        models = load_models(path)
    except SSEBenchError as exc:
        fail(said(exc))
    listing = [
        ModelListing(
            name=name,
            litellm_model=str(entry.litellm.get("model", "")),
            key_env=entry.key_env,
            key_set=entry.key_env is None or bool(os.environ.get(entry.key_env)),
            budget=entry.budget if entry.budget is not None else models.budget,
        )
        for name, entry in sorted(models.models.items())
    ]
    if json_output:
        click.echo(encode_json(listing, pretty=True).decode(), nl=False)
        return
    click.echo(f"# {path}", err=True)
    for item in listing:
        key = "no key needed" if item.key_env is None else item.key_env
        state = "" if item.key_set else " (not set)"
        click.echo(f"{item.name}\t{item.litellm_model}\t{key}{state}\tbudget ${item.budget:g}")


@models_app.command("serve-script")
def serve_script(
    script: Annotated[Path, typer.Argument(metavar="FILE", help="The JSON script to replay.")],
    host: Annotated[str, typer.Option("--host", help="The address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="The port; 0 picks a free one.")] = 8808,
) -> None:
    """Serve OpenAI-compatible chat completions that replay a JSON script (see the README)."""
    try:
        loaded = load_script(script)
        server = ScriptedModel(loaded, host=host, port=port)
    except SSEBenchError as exc:
        fail(said(exc))
    except OSError as exc:
        fail(f"cannot listen on {host}:{port}: {exc.strerror}")
    click.echo(f"scripted model: http://{host}:{server.port}/v1 ({len(loaded.replies)} replies)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        server.close()
