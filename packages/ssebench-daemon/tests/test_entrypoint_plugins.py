"""The entrypoint's reading of the runner's plugins plan (the runs themselves: tests/plugins/)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import msgspec
import pytest

from ssebench.daemon.entrypoint._plugins import HOOKS, MODEL_HOOKS, load_plan
from ssebench.daemon.entrypoint._run import Entrypoint
from ssebench.spec import HOOKS as SPEC_HOOKS
from ssebench.spec import PluginConfig, contract
from ssebench.spec._plugins import MODEL_HOOKS as SPEC_MODEL_HOOKS


def test_the_entrypoint_knows_the_hooks_the_spec_names() -> None:
    assert HOOKS == SPEC_HOOKS
    assert MODEL_HOOKS == SPEC_MODEL_HOOKS


def test_no_plan_means_no_plugins(tmp_path: Path) -> None:
    assert load_plan(tmp_path) == []


def test_the_runners_plan_is_read_as_written(tmp_path: Path) -> None:
    written = [
        PluginConfig(name="probe", hook="on-agent", timeout=7),
        PluginConfig(name="critic", hook="after-grading", llm=True),
    ]
    (tmp_path / contract.PLUGINS_PLAN).write_bytes(msgspec.json.encode(written))
    plan = load_plan(tmp_path)
    assert [(p.name, p.hook, p.llm, p.timeout, p.as_model) for p in plan] == [
        ("probe", "on-agent", False, 7.0, True),
        ("critic", "after-grading", True, 300.0, False),
    ]


@pytest.mark.parametrize(
    "plan",
    [
        "not json",
        json.dumps({"name": "x"}),
        json.dumps([{"name": "x", "hook": "lunch", "llm": False, "timeout": 1}]),
        json.dumps([{"name": "../x", "hook": "on-agent", "llm": False, "timeout": 1}]),
        json.dumps([{"name": "x", "hook": "on-agent", "llm": False, "timeout": 0}]),
        json.dumps([{"name": "x", "hook": "on-agent"}]),
    ],
)
def test_a_malformed_plan_is_refused(tmp_path: Path, plan: str) -> None:
    (tmp_path / contract.PLUGINS_PLAN).write_text(plan)
    with pytest.raises(ValueError, match="plan"):
        load_plan(tmp_path)


class _BeforeGrading:
    """The plugins seen by `Entrypoint._before_grading`: one `before-grading` plugin."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.skipped: list[str] = []

    def of(self, hook: str) -> list[str]:
        return ["probe"] if hook == "before-grading" else []

    def run_hook(self, hook: str) -> None:
        self.ran.append(hook)

    def skip_hook(self, hook: str, reason: str) -> None:
        self.skipped.append(f"{hook}: {reason}")


def _before_grading(*, ended: bool, answer: bytes | None) -> _BeforeGrading:
    """Ask `_before_grading` with a daemon that answers `answer` to POST /prepare_grading
    (b"": it closed the connection without a word; None: it could not be reached)."""
    entrypoint = Entrypoint.__new__(Entrypoint)  # only the two parts this step uses
    plugins = _BeforeGrading()
    entrypoint.plugins = plugins  # type: ignore[assignment]
    ours: socket.socket | None = None
    if answer is not None:
        ours, theirs = socket.socketpair()
        theirs.sendall(answer)
        theirs.close()
    entrypoint._ask_to_prepare_grading = lambda: ours  # type: ignore[method-assign]
    assert entrypoint._before_grading(ended) is False  # the evaluator needs not ask early
    return plugins


def test_before_grading_plugins_run_once_the_daemon_answers_that_it_took_the_diff() -> None:
    plugins = _before_grading(ended=True, answer=b"HTTP/1.1 200 OK\r\n")
    assert plugins.ran == ["before-grading"] and plugins.skipped == []


@pytest.mark.parametrize(
    ("ended", "answer"), [(True, b""), (True, None), (False, b"HTTP/1.1 200 OK\r\n")]
)
def test_before_grading_plugins_are_skipped_unless_the_diff_was_taken(
    ended: bool, answer: bytes | None
) -> None:
    """Run before the daemon took the agent's diff, a root plugin could change what is
    graded: when the phase did not end cleanly or the daemon never answered, none runs."""
    plugins = _before_grading(ended=ended, answer=answer)
    assert plugins.ran == []
    assert plugins.skipped == [
        "before-grading: the daemon did not say it had taken the agent's diff"
    ]
