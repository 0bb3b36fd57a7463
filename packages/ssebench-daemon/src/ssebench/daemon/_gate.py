"""The difficulty gate: which bencher actions the agent may run itself."""

from __future__ import annotations

from typing import Final, Literal, get_args

from ssebench.spec import Check, TaskConfig

Action = Literal["build", "run_poc", "function_test", "intent_test"]
"""The bencher's actions."""

ACTIONS: Final[tuple[Action, ...]] = get_args(Action)
"""Every bencher action, in grading order."""

CHECK_OF: Final[dict[Action, Check]] = {
    "build": "build",
    "run_poc": "poc",
    "function_test": "function_test",
    "intent_test": "intent_test",
}
"""The task check each action runs."""

ALLOWED: Final[dict[int, frozenset[Action]]] = {
    0: frozenset(ACTIONS),
    1: frozenset({"build", "run_poc", "function_test"}),
    2: frozenset({"build", "function_test"}),
    3: frozenset({"build"}),
    4: frozenset(),
}
"""Difficulty -> the actions agent-facing listeners allow (the admin socket is never gated)."""


def allowed(difficulty: int | None) -> frozenset[Action]:
    """The actions a listener allows; `None` is the admin socket (everything)."""
    if difficulty is None:
        return frozenset(ACTIONS)
    return ALLOWED[difficulty]


def task_has(task: TaskConfig, action: Action) -> bool:
    """Whether the task has the check an action runs."""
    return CHECK_OF[action] in task.checks()
