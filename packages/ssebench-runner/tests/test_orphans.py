"""`ssebench run` and `ssebench eval` reap their own orphans at start as `runs reap` does:
a reaped run that used a model has its key revoked and its spend recorded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ssebench.runner._orphans import reap_own_orphans
from ssebench.spec import (
    Mount,
    PlatformUnavailableError,
    RunConfig,
    RunHandle,
    RunInfo,
    RunSpec,
    contract,
    labels,
)
from ssebench.spec.lease import current_lease
from ssebench.spec.recording import write_run_record

from .fakes import FakeGateway, ModelBackend


def _orphan(root: Path, run_id: str, model: str) -> RunInfo:
    """A run of a dead runner of this machine, recorded under `root` without a summary."""
    run_dir = root / "probe-task" / model / "probe" / run_id
    (run_dir / "archive").mkdir(parents=True)
    spec = RunSpec(
        run_id=run_id,
        task_name="probe-task",
        mode="sandbox",
        image="fake/probe:1",
        env={},
        results=Mount(target=contract.RESULTS_DIR, source=str(run_dir)),
        archive=Mount(target=contract.ARCHIVE_DIR, source=str(run_dir / "archive")),
    )
    config = RunConfig(
        agent="probe",
        model=model,
        mode="sandbox",
        backend="fake",
        difficulty=2,
        timeout=60,
        egress="restricted",
        reference_run=False,
        keep=False,
    )
    write_run_record(run_dir, spec, config)
    lease = {**current_lease(), labels.LEASE_START: "0"}  # this PID, another start: dead
    name = f"ssebench-{run_id}-probe"
    return RunInfo(
        run_id=run_id,
        name=name,
        state="exited",
        image="fake/probe:1",
        labels={
            labels.RUN_ID: run_id,
            labels.WEBUI: "true",
            labels.MODEL: model,
            labels.RESULTS: str(run_dir),
            **lease,
        },
        handle=RunHandle(run_id=run_id, name=name),
    )


def _summary(run: RunInfo) -> dict[str, object]:
    path = Path(run.labels[labels.RESULTS]) / contract.SUMMARY_FILE
    found: dict[str, object] = json.loads(path.read_text())
    return found


@pytest.fixture
def models_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    models = tmp_path / "models.yaml"
    models.write_text("budget: 1\nmodels:\n  scripted:\n    litellm: {model: openai/x}\n")
    monkeypatch.setenv("SSEBENCH_MODELS", str(models))


@pytest.mark.usefixtures("models_file")
def test_an_orphan_with_a_model_has_its_key_revoked_and_its_spend_recorded(
    tmp_path: Path,
) -> None:
    with_model = _orphan(tmp_path, "with-model", "scripted")
    without = _orphan(tmp_path, "without", "none")
    gateway = FakeGateway()
    backend = ModelBackend(gateway)
    for run in (with_model, without):
        backend.add_run(run)

    assert reap_own_orphans(backend, tmp_path) == 2

    assert gateway.closed == ["with-model"]
    assert backend.list_runs() == []
    recorded = _summary(with_model)
    assert recorded["outcome"] == "infra_error"
    assert recorded["spend"] == 0.06
    assert recorded["usage"] == {
        "calls": 3,
        "prompt_tokens": 300,
        "completion_tokens": 150,
        "refused_for_budget": 0,
        "refused_for_concurrency": 0,
        "provider_errors": [],
        "provider_down": False,
    }
    assert _summary(without).get("spend") is None


@pytest.mark.usefixtures("models_file")
def test_a_gateway_that_cannot_be_reached_leaves_the_orphan_recorded_without_spend(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    orphan = _orphan(tmp_path, "with-model", "scripted")
    backend = ModelBackend(FakeGateway())
    backend.gateway_error = PlatformUnavailableError("the gateway cannot be started")
    backend.add_run(orphan)

    assert reap_own_orphans(backend, tmp_path) == 1

    assert _summary(orphan)["outcome"] == "infra_error"
    assert _summary(orphan).get("spend") is None
    assert "cannot revoke the model key of run with-model" in caplog.text
