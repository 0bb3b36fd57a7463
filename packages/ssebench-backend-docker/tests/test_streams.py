"""A run's output on the CLI's terminal: control characters stripped, capped with a marker."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from ssebench.backends.docker import DockerBackend
from ssebench.backends.docker._backend import LOG_CONFIG
from ssebench.backends.docker._streams import RELAY_LIMIT, _pump, join_relay, start_relay
from ssebench.spec import Mount, RunSpec, contract, labels

HOSTILE = "\x1b]0;owned\x07\x1b[2J\x1b[31mred\x1b[0m\rback\x08\x00\x9b6n\n".encode()
PRINTED = b"\x1b]0;owned\x07\x1b[31mred\x1b[0m\r\n"
"""What the real container prints first (shown as `red` and a newline)."""


def test_escape_sequences_never_reach_either_stream_even_split_between_chunks(
    capsysbinary: pytest.CaptureFixture[bytes],
) -> None:
    out = HOSTILE + "é done\n".encode()
    chunks = [(out[i : i + 3], None) for i in range(0, len(out), 3)]
    chunks += [(None, b"\x1b[1mto stderr\x1b[0m\r\n")]
    _pump(iter(chunks))
    captured = capsysbinary.readouterr()
    assert captured.out == "redback\né done\n".encode()
    assert captured.err == b"to stderr\n"


def test_each_stream_is_capped_with_one_marker_line_and_read_to_its_end(
    capsysbinary: pytest.CaptureFixture[bytes],
) -> None:
    read: list[int] = []

    def chunks() -> Iterator[tuple[bytes | None, bytes | None]]:
        for number in range(10):
            read.append(number)
            yield b"0123456789", b"ee"

    _pump(chunks(), limit=25)
    captured = capsysbinary.readouterr()
    assert read == list(range(10)), "the engine's stream is drained past the cap"
    marker = contract.output_cap_line(25, 75).encode()
    assert captured.out == b"0123456789" * 2 + b"01234\n" + marker
    assert captured.err == b"e" * 20


def test_the_terminal_shows_the_entrypoints_cap_and_room_for_its_own_lines() -> None:
    assert RELAY_LIMIT == contract.AGENT_OUTPUT_LIMIT + 1024 * 1024


@pytest.mark.docker
def test_a_real_containers_hostile_output_reaches_the_terminal_tamed(
    docker_client: docker.DockerClient,
    base_image: str,
    capfdbinary: pytest.CaptureFixture[bytes],
) -> None:
    octal = "".join(f"\\{byte:03o}" for byte in PRINTED)
    script = (
        f"printf '{octal}'; head -c {RELAY_LIMIT + 1000} /dev/zero | tr '\\0' x;"
        r" printf '\033[2Jto stderr\n' >&2"
    )
    container = docker_client.api.create_container(
        base_image, command=["sh", "-c", script], labels={labels.RUN_ID: "streams-test"}
    )["Id"]
    try:
        start_relay(docker_client, container)
        docker_client.api.start(container)
        assert docker_client.api.wait(container, timeout=120)["StatusCode"] == 0
        join_relay(container, timeout=60)
    finally:
        docker_client.api.remove_container(container, force=True)
    captured = capfdbinary.readouterr()
    marker = contract.output_cap_line(RELAY_LIMIT, len(PRINTED) + 1000).encode()
    assert captured.out == b"red\n" + b"x" * (RELAY_LIMIT - len(PRINTED)) + b"\n" + marker
    assert captured.err == b"to stderr\n"


@pytest.mark.docker
def test_a_runs_engine_log_is_bounded_by_the_log_drivers_limits(
    docker_client: docker.DockerClient, probe_image: str, tmp_path: Path
) -> None:
    run_id = f"logs-{secrets.token_hex(4)}"
    (tmp_path / "archive").mkdir()
    spec = RunSpec(
        run_id=run_id,
        task_name="probe-task",
        mode="sandbox",
        image=probe_image,
        env={"PROBE_MODE": "talk"},
        results=Mount(target=contract.RESULTS_DIR, source=str(tmp_path)),
        archive=Mount(target=contract.ARCHIVE_DIR, source=str(tmp_path / "archive")),
        labels={labels.RUN_ID: run_id},
        timeout=60,
    )
    backend = DockerBackend()
    handle = backend.start(spec)
    try:
        assert backend.wait(handle, timeout=60) == 0
        config = docker_client.api.inspect_container(handle.container_id)["HostConfig"]
        assert config["LogConfig"] == {"Type": "json-file", "Config": LOG_CONFIG}
        assert "probe: line one" in list(backend.logs(handle))
    finally:
        backend.remove(handle)
