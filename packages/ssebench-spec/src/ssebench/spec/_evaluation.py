"""`eval.json`: an evaluation's settings and the runs it made (`ssebench eval`)."""

from __future__ import annotations

import msgspec

from ssebench.spec._base import Message
from ssebench.spec._run import Egress, Mode


class EvalSettings(Message, kw_only=True, frozen=True):
    """What an evaluation is the cross product of, and how each run is made."""

    dataset: str
    """The dataset folder, absolute."""
    tasks: list[str]
    agents: list[str]
    models: list[str]
    mode: Mode
    difficulty: int
    repeat: int
    timeout: int
    check_timeout: int
    egress: Egress
    backend: str
    tool_layer: str | None = None
    """`--tool-layer`: the tool layer built on each case image (sandbox mode); None: the
    built-in one."""
    plugins: list[str] = msgspec.field(default_factory=list)
    """`--plugin` names: exactly these run; empty: those plugins.yaml enables."""


LATER_SETTINGS: tuple[str, ...] = ("tool_layer", "plugins")
"""`EvalSettings` fields added after the first release: an evaluation's ID leaves them out
while they hold their defaults, so an evaluation made before them keeps its ID."""


class EvalSlot(Message, kw_only=True, frozen=True):
    """One cell of the cross product (task, agent, model, repeat) and its attempts."""

    task: str
    agent: str
    model: str
    repeat: int
    """1 to `EvalSettings.repeat`."""
    run_ids: list[str] = msgspec.field(default_factory=list)
    """Every run made for this cell, oldest first; the last one counts."""


class EvalRecord(Message, kw_only=True, frozen=True):
    """`eval.json`, in the evaluation's own folder; rewritten as its runs are made."""

    eval_id: str
    created_at: str
    settings: EvalSettings
    results: str
    """The results folder the runs are recorded in, absolute: a run's directory is
    `<results>/<task>/<model>/<agent>/<run-id>`."""
    slots: list[EvalSlot]
    updated_at: str | None = None
