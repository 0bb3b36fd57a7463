"""The docs in docs/ stay true: what they name exists, and what exists is documented."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import get_args

import click
import msgspec
import pytest
import typer

from ssebench.runner._task_skeleton import TOOLCHAINS
from ssebench.runner.cli import app
from ssebench.spec import (
    AgentConfig,
    Outcome,
    PatchResult,
    Provenance,
    RunConfig,
    RuntimeResult,
    Summary,
    TaskConfig,
    Usage,
    contract,
)

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = sorted(DOCS.glob("*.md"))
COMMAND = re.compile(r"\bssebench((?:\s+[a-z][a-z-]*)+)")


def text(name: str) -> str:
    return (DOCS / name).read_text()


def quoted(page: str) -> set[str]:
    """Every `name` in backquotes on a page."""
    return set(re.findall(r"`([^`\n]+)`", page))


def fields(struct: type[msgspec.Struct]) -> list[str]:
    return [field.name for field in msgspec.structs.fields(struct)]


@pytest.mark.parametrize(
    "struct", [Summary, RunConfig, PatchResult, RuntimeResult, Provenance, Usage]
)
def test_every_field_of_summary_json_is_documented(struct: type[msgspec.Struct]) -> None:
    documented = quoted(text("results.md"))
    missing = [name for name in fields(struct) if name not in documented]
    assert missing == [], f"docs/results.md does not document {struct.__name__}: {missing}"


def test_every_outcome_is_documented_in_the_outcomes_table() -> None:
    table = text("results.md").split("## Outcomes", 1)[1]
    rows = {match for match in re.findall(r"^\| `([a-z_]+)` \|", table, re.MULTILINE)}
    assert rows == set(get_args(Outcome))


def test_every_file_the_runner_and_the_container_write_is_documented() -> None:
    documented = quoted(text("results.md"))
    names = [
        contract.RESULT_FILE,
        contract.SUMMARY_FILE,
        contract.RUN_FILE,
        contract.DIALOG_FILE,
        contract.TOUCHED_FILE,
        contract.ENTRYPOINT_LOG,
        contract.EVALUATOR_LOG,
        contract.GRADED_MARKER,
    ]
    assert [name for name in names if name not in " ".join(documented)] == []


def test_every_task_config_key_and_skeleton_language_is_documented() -> None:
    page = text("tasks.md")
    assert [name for name in fields(TaskConfig) if not re.search(rf"\b{name}\b", page)] == []
    languages = page.split("Languages:", 1)[1].split(".", 1)[0]
    assert {part.strip() for part in languages.replace("\n", " ").split(",")} == set(TOOLCHAINS)


def test_every_agent_config_key_and_environment_variable_is_documented() -> None:
    page = text("agents.md")
    assert [name for name in fields(AgentConfig) if f"{name}:" not in page] == []
    given = [
        contract.ENV_API_KEY,
        contract.ENV_BASE_URL,
        contract.ENV_MODEL_NAME,
        contract.ENV_DIFFICULTY,
        contract.ENV_ARCHIVE,
        contract.ENV_DAEMON_SOCKET,
        contract.ENV_TIMEOUT,
    ]
    assert [name for name in given if f"`{name}`" not in page] == []


def _commands() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        for match in COMMAND.finditer(page.read_text()):
            found.append((page.name, " ".join(match.group(1).split())))
    return found


def test_the_docs_name_commands() -> None:
    assert len(_commands()) > 20


@pytest.mark.parametrize(("page", "words"), sorted(set(_commands())))
def test_every_command_the_docs_name_exists(page: str, words: str) -> None:
    command: click.Command = typer.main.get_command(app)
    context = click.Context(command, info_name="ssebench")
    path = ["ssebench"]
    for word in words.split():
        if not isinstance(command, click.Group):
            break  # the rest is an argument (`ssebench dataset new my-bug`)
        child = command.get_command(context, word)
        assert child is not None, (
            f"docs/{page} names `{' '.join([*path, word])}`, which is no command"
        )
        command, path = child, [*path, word]
        context = click.Context(command, info_name=word, parent=context)


@pytest.mark.process
def test_the_repository_points_to_no_design_document_outside_it() -> None:
    """The code names docs/ pages for its rules, not the design document it was started from."""
    root = DOCS.parent
    needle = "DESIGN" + ".md"  # spelled apart, so this file does not name it
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=root, capture_output=True, text=True, check=True
    ).stdout.split("\0")
    naming = [
        name
        for name in tracked
        if name and (root / name).is_file() and needle in (root / name).read_text(errors="replace")
    ]
    assert not naming, f"these files point to {needle}, which is not in the repository: {naming}"
