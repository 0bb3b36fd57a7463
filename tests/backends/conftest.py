"""The backend conformance suite's fixtures: every backend, a probe image, a run factory."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from ssebench.spec import Backend, Mount, NetworkPolicy, RunHandle, RunSpec, contract, labels

SECRET = "sk-conformance-" + secrets.token_hex(12)


@pytest.fixture(params=["docker"])
def backend(request: pytest.FixtureRequest, docker_client: docker.DockerClient) -> Backend[Any]:
    """Each built-in backend, found the way the runner finds it."""
    from ssebench.spec import get_backend

    return get_backend(request.param)


StartRun = Callable[..., tuple[RunSpec, RunHandle]]


@pytest.fixture
def planted_secret() -> str:
    """The model key every probe run carries; it must never surface outside the container."""
    return SECRET


@pytest.fixture
def start_run(backend: Backend[Any], probe_image: str, tmp_path: Path) -> Iterator[StartRun]:
    """Start probe runs; whatever a test leaves is removed afterwards."""
    started: list[RunHandle] = []

    def start(
        mode: str = "talk",
        *,
        keep: bool = False,
        egress: str = "restricted",
        extra_env: dict[str, str] | None = None,
    ) -> tuple[RunSpec, RunHandle]:
        run_id = f"conf-{secrets.token_hex(4)}"
        run_dir = tmp_path / run_id
        (run_dir / "archive").mkdir(parents=True)
        spec = RunSpec(
            run_id=run_id,
            task_name="probe-task",
            mode="sandbox",
            image=probe_image,
            env={
                contract.ENV_API_KEY: SECRET,
                "PROBE_MODE": mode,
                contract.ENV_RESULTS: contract.RESULTS_DIR,
                contract.ENV_ARCHIVE: contract.ARCHIVE_DIR,
                **(extra_env or {}),
            },
            results=Mount(target=contract.RESULTS_DIR, source=str(run_dir)),
            archive=Mount(target=contract.ARCHIVE_DIR, source=str(run_dir / "archive")),
            network=NetworkPolicy(egress=egress),  # type: ignore[arg-type]
            labels={
                labels.RUN_ID: run_id,
                labels.WEBUI: "true",
                labels.TASK_ID: "probe-task",
                labels.MODEL: "none",
                labels.AGENT: "probe",
                labels.RESULTS: str(run_dir),
                labels.REFERENCE_RUN: "false",
            },
            timeout=60,
            keep=keep,
        )
        handle = backend.start(spec)
        started.append(handle)
        return spec, handle

    yield start
    for handle in started:
        backend.stop(handle, grace=0)
        remove = getattr(backend, "remove", None)
        if remove is not None:
            remove(handle)
        else:
            backend.cleanup(handle)
