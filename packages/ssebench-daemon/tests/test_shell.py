"""The bash tool: one persistent shell as `model` in the source tree."""

from __future__ import annotations

import os

import httpx
import pytest

from .conftest import Running

pytestmark = pytest.mark.process


def bash(client: httpx.Client, command: str, **extra: object) -> dict[str, object]:
    response = client.post("/tool/bash", json={"command": command, **extra})
    assert response.status_code == 200, response.text
    body: dict[str, object] = response.json()
    return body


def test_cd_export_and_variables_persist_between_commands(running: Running) -> None:
    assert bash(running.agent, "pwd")["stdout"] == f"{running.daemon.source}\n"
    bash(running.agent, "cd tests && export GREETING=hello && plain=kept")
    assert bash(running.agent, 'echo "$PWD $GREETING $plain"')["stdout"] == (
        f"{running.daemon.source}/tests hello kept\n"
    )
    # The HTTP listener talks to the same shell.
    assert bash(running.http, "echo $GREETING")["stdout"] == "hello\n"


def test_exit_codes_stdout_and_stderr_come_back_apart(running: Running) -> None:
    assert bash(
        running.agent, "echo out; echo err >&2; exit_with() { return $1; }; exit_with 3"
    ) == {
        "code": 3,
        "stdout": "out\n",
        "stderr": "err\n",
    }
    assert bash(running.agent, "printf 'no newline'")["stdout"] == "no newline"
    assert bash(running.agent, "printf 'two\\n\\n'")["stdout"] == "two\n\n"


def test_quotes_newlines_heredocs_and_unicode_survive(running: Running) -> None:
    command = "cat <<'EOF'\nit's \"quoted\" $HOME `x` \\ back\nünïcødé ✓\nEOF"
    assert bash(running.agent, command)["stdout"] == (
        'it\'s "quoted" $HOME `x` \\ back\nünïcødé ✓\n'
    )


def test_a_syntax_error_does_not_end_the_shell(running: Running) -> None:
    bash(running.agent, "export KEEP=1")
    result = bash(running.agent, "if then fi")
    assert result["code"] == 2
    assert "syntax error" in str(result["stderr"])
    assert bash(running.agent, "echo $KEEP")["stdout"] == "1\n"


def test_exit_ends_the_shell_and_the_next_command_gets_a_fresh_one(running: Running) -> None:
    bash(running.agent, "cd tests; export GONE=1")
    result = bash(running.agent, "exit 7")
    assert result["code"] == 7
    assert "the shell exited" in str(result["stderr"])
    assert bash(running.agent, 'echo "$PWD:$GONE"')["stdout"] == f"{running.daemon.source}:\n"


def test_commands_read_no_stdin_and_background_jobs_do_not_block(running: Running) -> None:
    assert bash(running.agent, "cat")["stdout"] == ""
    result = bash(running.agent, "sleep 30 & setsid sleep 30 & echo started")
    assert result["stdout"] == "started\n"


def test_the_shell_environment_is_models_without_the_admin_socket_or_secrets(
    start_daemon: object,
) -> None:
    daemon = start_daemon()  # type: ignore[operator]
    env_text = str(bash(daemon.agent, "env")["stdout"])
    env = dict(line.split("=", 1) for line in env_text.splitlines() if "=" in line)
    me = daemon.privileges.model
    assert env["HOME"] == me.home
    assert env["USER"] == me.name
    assert env["SSE_DAEMON_SOCKET"] == str(daemon.config.agent_socket)
    assert "admin.sock" not in env_text
    assert str(daemon.config.admin_socket) not in env_text
    assert "/opt/ssebench" not in env_text
    assert "SSE_API_KEY" not in env
    ids = bash(daemon.agent, "id -u; id -G")["stdout"]
    assert ids == f"{me.uid}\n{me.gid}\n"
    assert os.getpid() != 0


def test_a_nul_in_the_command_is_a_bad_request(running: Running) -> None:
    response = running.agent.post("/tool/bash", json={"command": "echo a\u0000b"})
    assert response.status_code == 400
