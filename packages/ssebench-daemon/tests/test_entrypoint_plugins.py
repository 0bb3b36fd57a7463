"""The entrypoint's reading of the runner's plugins plan (the runs themselves: tests/plugins/)."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from ssebench.daemon.entrypoint._plugins import HOOKS, MODEL_HOOKS, load_plan
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
