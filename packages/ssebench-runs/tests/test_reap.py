"""`ssebench runs reap`: the runs of dead runners are removed and recorded; nothing else is."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
from typing_extensions import override

from ssebench.conformance.fake import FakeBackend
from ssebench.spec import (
    GatewayReport,
    ModelGateway,
    ModelsFile,
    Mount,
    RunConfig,
    RunHandle,
    RunInfo,
    RunSpec,
    Usage,
    contract,
    labels,
)
from ssebench.spec.lease import current_lease
from ssebench.spec.recording import write_run_record

from .conftest import Invoke
from .fakes import fake_run, seeded

UseBackend = Callable[[FakeBackend], FakeBackend]

CONFIG = RunConfig(
    agent="probe",
    model="none",
    mode="sandbox",
    backend="fake",
    difficulty=2,
    timeout=60,
    egress="restricted",
    reference_run=False,
    keep=False,
)


def alive() -> dict[str, str]:
    """The lease of this process, which is alive."""
    return current_lease()


def dead() -> dict[str, str]:
    """A lease of this machine and boot whose process is gone: this PID, another start time
    (what a reused PID looks like), so no process needs to be started and killed."""
    return {**current_lease(), labels.LEASE_START: "0"}


def elsewhere() -> dict[str, str]:
    return {**dead(), labels.LEASE_MACHINE: "another-machine"}


def run_on(
    root: Path, run_id: str, lease: dict[str, str], *, keep: bool = False, state: str = "exited"
) -> RunInfo:
    """A run whose directory exists under `root` with run.json and an empty result.json."""
    run_dir = root / "probe-task" / "none" / "probe" / run_id
    (run_dir / "archive").mkdir(parents=True)
    (run_dir / contract.RESULT_FILE).touch()
    spec = RunSpec(
        run_id=run_id,
        task_name="probe-task",
        mode="sandbox",
        image="fake/probe:1",
        env={},
        results=Mount(target=contract.RESULTS_DIR, source=str(run_dir)),
        archive=Mount(target=contract.ARCHIVE_DIR, source=str(run_dir / "archive")),
    )
    write_run_record(run_dir, spec, CONFIG)
    base = fake_run(run_id, state=state, extra_labels={**lease, labels.RESULTS: str(run_dir)})  # type: ignore[arg-type]
    return msgspec.structs.replace(base, handle=RunHandle(run_id=run_id, name=base.name, keep=keep))


def summary(info: RunInfo) -> dict[str, object] | None:
    path = Path(info.labels[labels.RESULTS]) / contract.SUMMARY_FILE
    return json.loads(path.read_text()) if path.exists() else None


def test_a_dead_runner_s_run_is_removed_and_recorded_as_infra_error(
    invoke: Invoke, use_backend: UseBackend, tmp_path: Path
) -> None:
    orphan = run_on(tmp_path, "orphan", dead())
    live = run_on(tmp_path, "live", alive())
    foreign = run_on(tmp_path, "foreign", elsewhere())
    unleased = run_on(tmp_path, "unleased", {})
    backend = use_backend(seeded(FakeBackend(), [orphan, live, foreign, unleased]))

    outcome = invoke("reap", "--json")

    assert outcome.code == 0, outcome.err
    (entry,) = json.loads(outcome.out)
    assert entry["run_id"] == "orphan"
    assert entry["action"] == "removed"
    assert entry["recorded"] is True
    assert sorted(run.run_id for run in backend.list_runs()) == ["foreign", "live", "unleased"]
    recorded = summary(orphan)
    assert recorded is not None
    assert recorded["outcome"] == "infra_error"
    reason = recorded["patch_result"]["error_msg"]  # type: ignore[index]
    assert f"its runner (pid {os.getpid()}) ended before recording the run" in reason
    assert recorded["config"] == msgspec.to_builtins(CONFIG)
    assert summary(live) is None
    assert summary(foreign) is None
    assert summary(unleased) is None


def test_another_machine_s_expired_renewed_lease_is_reaped_and_not_recorded_here(
    invoke: Invoke, use_backend: UseBackend, tmp_path: Path
) -> None:
    from datetime import UTC, datetime, timedelta

    from ssebench.spec.lease import LEASE_TTL, renewal

    now = datetime.now(UTC)
    expired = run_on(
        tmp_path, "expired", {**elsewhere(), **renewal(now - timedelta(seconds=LEASE_TTL + 5))}
    )
    renewed = run_on(tmp_path, "renewed", {**elsewhere(), **renewal(now)})
    backend = use_backend(seeded(FakeBackend(), [expired, renewed]))

    outcome = invoke("reap", "--json")

    assert outcome.code == 0, outcome.err
    (entry,) = json.loads(outcome.out)
    assert (entry["run_id"], entry["action"], entry["recorded"]) == ("expired", "removed", False)
    assert [run.run_id for run in backend.list_runs()] == ["renewed"]
    # Its run directory is on the other machine: a folder of the same path here is not it.
    assert summary(expired) is None


def test_a_kept_run_is_never_reaped_unless_asked(
    invoke: Invoke, use_backend: UseBackend, tmp_path: Path
) -> None:
    kept = run_on(tmp_path, "kept", dead(), keep=True, state="running")
    backend = use_backend(seeded(FakeBackend(), [kept]))

    assert invoke("reap").code == 0
    assert [run.run_id for run in backend.list_runs()] == ["kept"]
    assert summary(kept) is None

    outcome = invoke("reap", "--include-kept")

    assert outcome.code == 0, outcome.err
    assert "removed run kept" in outcome.err
    assert backend.list_runs() == []
    assert summary(kept) is not None


def test_a_dry_run_changes_nothing(invoke: Invoke, use_backend: UseBackend, tmp_path: Path) -> None:
    orphan = run_on(tmp_path, "orphan", dead())
    backend = use_backend(seeded(FakeBackend(), [orphan]))

    outcome = invoke("reap", "--dry-run")

    assert outcome.code == 0, outcome.err
    assert "would remove run orphan" in outcome.err
    assert [run.run_id for run in backend.list_runs()] == ["orphan"]
    assert summary(orphan) is None


def test_dir_reaps_only_the_runs_recorded_under_it(
    invoke: Invoke, use_backend: UseBackend, tmp_path: Path
) -> None:
    mine = run_on(tmp_path / "mine", "mine", dead())
    theirs = run_on(tmp_path / "mine-too-similar", "theirs", dead())
    backend = use_backend(seeded(FakeBackend(), [mine, theirs]))

    outcome = invoke("reap", "--dir", str(tmp_path / "mine"))

    assert outcome.code == 0, outcome.err
    assert [run.run_id for run in backend.list_runs()] == ["theirs"]


def test_a_recorded_run_is_removed_but_its_record_is_kept(
    invoke: Invoke, use_backend: UseBackend, tmp_path: Path
) -> None:
    orphan = run_on(tmp_path, "orphan", dead())
    run_dir = Path(orphan.labels[labels.RESULTS])
    (run_dir / contract.SUMMARY_FILE).write_text('{"kept": true}')
    use_backend(seeded(FakeBackend(), [orphan]))

    outcome = invoke("reap", "--json")

    assert json.loads(outcome.out)[0]["recorded"] is False
    assert (run_dir / contract.SUMMARY_FILE).read_text() == '{"kept": true}'


def test_a_grade_nobody_recorded_is_kept_aside_and_the_run_is_infra_error(
    invoke: Invoke, use_backend: UseBackend, tmp_path: Path
) -> None:
    orphan = run_on(tmp_path, "orphan", dead())
    run_dir = Path(orphan.labels[labels.RESULTS])
    grade = '{"patch_result": {"status": "passed"}, "runtime_result": {}}'
    (run_dir / contract.RESULT_FILE).write_text(grade)
    use_backend(seeded(FakeBackend(), [orphan]))

    assert invoke("reap").code == 0

    assert (run_dir / "result.json.unrecorded").read_text() == grade
    recorded = summary(orphan)
    assert recorded is not None
    assert recorded["outcome"] == "infra_error"
    assert "kept as result.json.unrecorded" in recorded["patch_result"]["error_msg"]  # type: ignore[index]


class _Gateway(ModelGateway):
    def __init__(self) -> None:
        self.closed: list[str] = []

    @property
    @override
    def base_url(self) -> str:
        return "http://gateway.invalid:4000"

    @override
    def open_key(self, run_id: str, models: list[str], budget: float | None) -> str:
        raise AssertionError("the reaper opens no key")

    @override
    def close_key(self, run_id: str) -> GatewayReport | None:
        self.closed.append(run_id)
        usage = Usage(calls=2, prompt_tokens=20, completion_tokens=10, refused_for_budget=0)
        return GatewayReport(spend=0.03, usage=usage)


class _GatewayBackend(FakeBackend):
    def __init__(self, gateway: _Gateway) -> None:
        super().__init__()
        self.fake_gateway = gateway

    @override
    def gateway(self, models: ModelsFile) -> ModelGateway:
        return self.fake_gateway


def test_a_reaped_run_with_a_model_has_its_key_revoked_and_its_spend_recorded(
    invoke: Invoke,
    use_backend: UseBackend,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    models = tmp_path / "models.yaml"
    models.write_text("budget: 1\nmodels:\n  scripted:\n    litellm: {model: openai/x}\n")
    monkeypatch.setenv("SSEBENCH_MODELS", str(models))
    with_model = run_on(tmp_path, "with-model", dead())
    with_model = msgspec.structs.replace(
        with_model, labels={**with_model.labels, labels.MODEL: "scripted"}
    )
    without = run_on(tmp_path, "without", dead())
    gateway = _Gateway()
    use_backend(seeded(_GatewayBackend(gateway), [with_model, without]))

    outcome = invoke("reap", "--json")

    assert outcome.code == 0, outcome.err
    assert gateway.closed == ["with-model"]  # a run without a model has no key
    recorded = summary(with_model)
    assert recorded is not None
    assert recorded["outcome"] == "infra_error"
    assert recorded["spend"] == 0.03
    assert recorded["usage"] == {
        "calls": 2,
        "prompt_tokens": 20,
        "completion_tokens": 10,
        "refused_for_budget": 0,
        "refused_for_concurrency": 0,
        "provider_errors": [],
        "provider_down": False,
    }
    assert (summary(without) or {}).get("spend") is None
