"""The agent's command the launcher runs when the backend gives it none: the one the seal
recorded in the image (`contract.AGENT_COMMAND_FILE`), checked before anything starts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ssebench.daemon._errors import ConfigError
from ssebench.daemon.launcher._main import launcher_settings, recorded_command


def test_the_recorded_command_is_the_agents_and_arguments_come_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As model, as in the agent container (the launcher refuses root before all else).
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    recorded = tmp_path / "agent-command.json"
    recorded.write_text('["/bin/bash", "/opt/agent/run.sh"]')
    assert recorded_command(recorded) == ["/bin/bash", "/opt/agent/run.sh"]
    assert launcher_settings([], {}, recorded).agent_command == ["/bin/bash", "/opt/agent/run.sh"]
    assert launcher_settings(["/bin/true"], {}, recorded).agent_command == ["/bin/true"]


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (None, "is missing (an agent image SSEBench did not seal)"),
        ("[]", "holds no command (give the agent's Dockerfile a CMD)"),
        ("null", "holds no command"),
        ('"/bin/sh -c run"', "holds no command"),
        ('["/bin/sh", 1]', "holds no command"),
        ("[", "cannot be read"),
    ],
)
def test_a_missing_or_malformed_record_is_one_line(
    tmp_path: Path, text: str | None, why: str
) -> None:
    recorded = tmp_path / "agent-command.json"
    if text is not None:
        recorded.write_text(text)
    with pytest.raises(ConfigError, match="no agent command") as raised:
        recorded_command(recorded)
    assert why in str(raised.value) and "\n" not in str(raised.value)
