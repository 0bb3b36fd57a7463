"""Mounting the `ssebench.commands` entry points under `ssebench`, each imported only when used."""

from __future__ import annotations

import sys
from importlib import metadata
from typing import Any

import click
import typer
from typer.core import TyperGroup
from typing_extensions import override

from ssebench.spec import COMMANDS_GROUP, distribution_of, unique_entry_points

_LISTING = "ssebench.listing-commands"


def _report(message: str) -> None:
    print(f"ssebench: {message}", file=sys.stderr)


def load_extension_command(name: str, entry: metadata.EntryPoint) -> click.Command | None:
    """Import one entry point and turn it into a click command named `name`.

    A broken entry is reported on stderr and gives None, so it never breaks `ssebench`.
    """
    origin = f"command {name!r} ({entry.value} from {distribution_of(entry)})"
    try:
        loaded = entry.load()
    except Exception as exc:
        _report(f"{origin} failed to import and is skipped: {exc}")
        return None
    if isinstance(loaded, typer.Typer):
        try:
            command = typer.main.get_command(loaded)
        except Exception as exc:
            _report(f"{origin} is not a usable command and is skipped: {exc}")
            return None
    elif isinstance(loaded, click.Command):
        command = loaded
    else:
        _report(f"{origin} is not a typer.Typer and is skipped")
        return None
    command.name = name
    return command


class ExtensionGroup(TyperGroup):
    """A typer group that also offers every `ssebench.commands` entry point.

    Listing the commands (help) shows extensions without importing them; a
    command's module is imported when it is invoked or its own help is asked.
    """

    def _extension_entries(self) -> dict[str, metadata.EntryPoint]:
        entries = {}
        for name, found in unique_entry_points(COMMANDS_GROUP).items():
            if name in self.commands:
                continue
            if len(found) > 1:
                origins = ", ".join(distribution_of(entry) for entry in found)
                _report(f"command {name!r} is registered more than once ({origins}) and is skipped")
                continue
            entries[name] = found[0]
        return entries

    @override
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self._extension_entries()})

    @override
    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        builtin = super().get_command(ctx, cmd_name)
        if builtin is not None:
            return builtin
        entry = self._extension_entries().get(cmd_name)
        if entry is None:
            return None
        if ctx.meta.get(_LISTING):
            return click.Command(cmd_name, help=f"(from {distribution_of(entry)})")
        return load_extension_command(cmd_name, entry)

    @override
    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> Any:
        ctx.meta[_LISTING] = True
        try:
            return super().format_help(ctx, formatter)
        finally:
            ctx.meta.pop(_LISTING, None)
