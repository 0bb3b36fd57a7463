"""`ssebench report DIR`: an evaluation's report as a self-contained HTML file, Markdown, JSON."""

from __future__ import annotations

import webbrowser
from pathlib import Path
from typing import Annotated, Final

import click
import typer

from ssebench.runner._console import fail
from ssebench.runner._lifecycle import said
from ssebench.runner._record import write_json
from ssebench.runner._report import report_of
from ssebench.runner._report_markdown import render_markdown
from ssebench.spec import SSEBenchError, encode_json
from ssebench.spec.atomic import write_atomically

HTML_FILE: Final = "report.html"
"""The page, in the evaluation's folder."""

MARKDOWN_FILE: Final = "report.md"
"""The Markdown summary, in the evaluation's folder."""

JSON_FILE: Final = "report.json"
"""The numbers, in the evaluation's folder."""


def report_command(
    folder: Annotated[
        Path, typer.Argument(metavar="DIR", help="An evaluation's folder (evals/<id>).")
    ],
    open_it: Annotated[
        bool, typer.Option("--open", help="Open the HTML report in a web browser.")
    ] = False,
    json_output: Annotated[
        bool,
        typer.Option("--json", help="Print the report as JSON on stdout and write no file."),
    ] = False,
    include_touched: Annotated[
        bool,
        typer.Option(
            "--include-touched",
            help="Count runs a person ran commands in (web terminal, runs exec) before their "
            "grade; by default they are shown as `touched` and left out of pass rates.",
        ),
    ] = False,
) -> None:
    """Report an evaluation: pass rates with 95% intervals, the task grid, checks, time, spend.

    Writes report.html (self-contained: it fetches nothing), report.md and
    report.json into DIR and prints their paths; with --json, prints the JSON
    only.
    """
    try:
        report = report_of(folder, include_touched=include_touched)
    except (SSEBenchError, OSError) as exc:
        fail(said(exc))
    if json_output:
        click.echo(encode_json(report, pretty=True).decode(), nl=False)
        return
    from ssebench.runner._report_html import render_html  # matplotlib: only for the page

    page = folder / HTML_FILE
    try:
        write_json(folder / JSON_FILE, report)
        _write_text(folder / MARKDOWN_FILE, render_markdown(report))
        _write_text(page, render_html(report, folder.absolute()))
    except OSError as exc:
        fail(f"cannot write the report into {folder}: {exc.strerror or exc}")
    for name in (HTML_FILE, MARKDOWN_FILE, JSON_FILE):
        click.echo(str(folder / name))
    if open_it and not webbrowser.open(page.absolute().as_uri()):
        fail(f"found no web browser to open {page}; open it yourself")


def _write_text(path: Path, text: str) -> None:
    write_atomically(path, text.encode("utf-8"), mode=0o644)
