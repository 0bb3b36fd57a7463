from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ssebench.daemon import ConfigError, load_config
from ssebench.daemon._environ import parse_check_timeout, parse_difficulty
from ssebench.daemon.entrypoint import load_settings
from ssebench.spec import contract


def test_an_unset_difficulty_is_two() -> None:
    assert parse_difficulty(None) == 2
    assert load_config({}).difficulty == 2


@pytest.mark.parametrize("value", ["0", "1", "2", "3", "4"])
def test_each_difficulty_from_zero_to_four_is_accepted(value: str) -> None:
    assert load_config({"SSE_DIFFICULTY": value}).difficulty == int(value)


@pytest.mark.parametrize("value", ["5", "-1", "two", "", " 2", "2.0", "02", "1e0"])
def test_any_other_difficulty_is_refused_with_a_message_naming_the_variable(value: str) -> None:
    with pytest.raises(ConfigError, match="SSE_DIFFICULTY"):
        load_config({"SSE_DIFFICULTY": value})


def test_the_check_timeout_defaults_to_1800_seconds_and_must_be_positive() -> None:
    assert parse_check_timeout(None) == 1800
    assert load_config({"SSE_CHECK_TIMEOUT": "2.5"}).check_timeout == 2.5
    for bad in ("0", "-3", "soon", "nan", "inf"):
        with pytest.raises(ConfigError, match="SSE_CHECK_TIMEOUT"):
            parse_check_timeout(bad)


def test_paths_come_from_the_contract_unless_the_environment_names_them() -> None:
    config = load_config({"SSE_RESULTS": "/r", "SSE_DAEMON_SOCKET": "/run/ssebench/sse.sock"})
    assert str(config.results_dir) == "/r"
    assert str(config.agent_socket) == contract.SIDECAR_DAEMON_SOCKET
    assert str(config.admin_socket) == contract.ADMIN_SOCKET
    assert config.http_port == contract.DAEMON_PORT


def test_the_agent_socket_cannot_be_the_admin_socket() -> None:
    with pytest.raises(ConfigError):
        load_config({"SSE_DAEMON_SOCKET": contract.ADMIN_SOCKET})


def _start(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ssebench.daemon"],
        env={"PATH": os.environ["PATH"], **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.process
def test_the_daemon_refuses_to_start_with_a_bad_difficulty() -> None:
    done = _start({"SSE_DIFFICULTY": "9"})
    assert done.returncode == 2
    assert "refusing to start" in done.stderr
    assert "SSE_DIFFICULTY='9'" in done.stderr


@pytest.mark.process
def test_the_daemon_refuses_to_start_without_root_or_the_runner_account() -> None:
    import pwd

    try:
        pwd.getpwnam("sse-runner")
    except KeyError:
        pass
    else:
        pytest.skip("this machine has an sse-runner account")
    done = _start({})
    assert done.returncode == 2
    expected = "'sse-runner' account is missing" if os.geteuid() == 0 else "must run as root"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("model")
        except KeyError:
            expected = "'model' account is missing"
    assert expected in done.stderr


@pytest.mark.process
def test_the_openapi_document_prints_without_root() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ssebench.daemon", "--print-openapi"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0
    assert '"openapi": "3.1.0"' in done.stdout


@pytest.mark.parametrize(
    "environ",
    [
        {"SSE_CHECK_TIMEOUT": "soon"},
        {"SSE_DAEMON_SOCKET": "relative.sock"},
        {"SSE_DAEMON_SOCKET": contract.ADMIN_SOCKET},
    ],
)
def test_the_daemon_and_the_entrypoint_refuse_a_setting_with_one_error_and_message(
    environ: dict[str, str],
) -> None:
    with pytest.raises(ConfigError) as daemon:
        load_config(environ)
    with pytest.raises(ConfigError) as entrypoint:
        load_settings(["true"], environ)
    assert str(daemon.value) == str(entrypoint.value)


def test_an_empty_time_limit_means_the_default_for_every_program() -> None:
    assert load_config({"SSE_CHECK_TIMEOUT": ""}).check_timeout == 1800
    settings = load_settings(["true"], {"SSE_CHECK_TIMEOUT": "", "TIMEOUT": ""})
    assert settings.check_timeout == 1800
    assert settings.timeout == 3600
