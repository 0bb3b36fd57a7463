"""What a run leaves in its directory: summary.json, run.json, reference.patch, `latest`."""

from __future__ import annotations

import dataclasses
import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import Result

from ssebench.conformance.fake import FakeBackend
from ssebench.runner import _plan
from ssebench.runner._lifecycle import Runner
from ssebench.runner._plan import RunPlan
from ssebench.spec import (
    BackendError,
    Mount,
    RunHandle,
    RunRecord,
    RunSpec,
    Summary,
    contract,
    decode_json,
    labels,
)
from ssebench.spec.lease import current_lease, liveness
from ssebench.spec.recording import RunFile

from .conftest import START, TASK_ID, run_args, run_dir
from .fakes import REFERENCE_PATCH, fake_backend

Cli = Callable[..., Result]

SECRET = "sk-planted-3b9f1c0e7d"


def read(path: Path) -> Any:
    return json.loads(path.read_text())


def test_the_summary_records_the_task_config_grade_and_start(fake: FakeBackend, cli: Cli) -> None:
    cli(*run_args("--difficulty", "3", "--timeout", "60", "--egress", "open"))

    summary = decode_json((run_dir() / "summary.json").read_bytes(), Summary)
    assert summary.task == TASK_ID
    assert summary.run_id == "run-1"
    assert summary.spend is None
    assert summary.patch_result.status == "passed"
    assert summary.runtime_result.agent_duration == 12.5
    assert summary.started_at.endswith("+00:00")
    assert read(run_dir() / "summary.json")["config"] == {
        "agent": "dummy",
        "model": "none",
        "mode": "sandbox",
        "backend": "fake",
        "difficulty": 3,
        "timeout": 60,
        "egress": "open",
        "reference_run": False,
        "keep": False,
        "check_timeout": 1800,
        "budget": None,
        "resources": {"cpus": 2.0, "memory": 4 * 1024**3, "pids": 1024},
        "tool_layer": "sandbox",
        "plugins": [],
    }
    assert summary.usage is None
    assert read(run_dir() / "result.json")["config"] == read(run_dir() / "summary.json")["config"]
    assert (summary.touched, summary.touched_at) == (False, None)


def test_a_run_a_person_touched_before_its_grade_is_marked_touched(
    fake: FakeBackend, cli: Cli
) -> None:
    from ssebench.spec.touched import mark_touched

    marked: list[str] = []
    # As `runs exec` or the web terminal would, while the run is going on.
    fake.hooks["wait"] = lambda *args: marked.append(mark_touched(run_dir()))
    cli(*run_args())

    summary = decode_json((run_dir() / "summary.json").read_bytes(), Summary)
    assert summary.touched is True
    assert summary.touched_at == marked[0]


def test_the_limits_are_the_options_else_the_task_s_resources_else_the_defaults(
    fake: FakeBackend, cli: Cli
) -> None:
    cli(*run_args("--cpus", "0.5", "--memory", "512m", "--pids-limit", "64"))

    config = read(run_dir() / "summary.json")["config"]
    assert config["resources"] == {"cpus": 0.5, "memory": 512 * 1024**2, "pids": 64}
    ((spec,),) = fake.calls_to("start")
    assert spec.resources is not None
    assert spec.resources.memory == 512 * 1024**2


def test_started_at_is_when_the_run_started_in_utc(make_plan: Callable[..., RunPlan]) -> None:
    summary = Runner(fake_backend(), clock=lambda: START).run(make_plan())

    assert summary.started_at == "2025-01-02T03:04:05+00:00"


def test_run_json_holds_the_spec_with_the_environments_names_only(
    fake: FakeBackend, cli: Cli
) -> None:
    cli(*run_args("--difficulty", "1", "--egress", "open"))

    record = decode_json((run_dir() / "run.json").read_bytes(), RunRecord)
    assert "env" not in read(run_dir() / "run.json")
    assert record.env_names == sorted(
        [
            contract.ENV_API_KEY,
            contract.ENV_BASE_URL,
            contract.ENV_MODEL_NAME,
            contract.ENV_ARCHIVE,
            contract.ENV_RESULTS,
            contract.ENV_DIFFICULTY,
            contract.ENV_TIMEOUT,
            contract.ENV_CHECK_TIMEOUT,
            contract.ENV_KEEP_ALIVE,
            contract.ENV_PIDS_LIMIT,
            contract.ENV_MODE,
            contract.ENV_MCP_URL,
            contract.ENV_DAEMON_SOCKET,
        ]
    )
    folder = run_dir().absolute()
    assert record.run_id == "run-1"
    assert record.task_name == TASK_ID
    assert record.mode == "sandbox"
    assert record.image == "fake/agent-dummy/demo-task:1"
    assert record.results == Mount(target=contract.RESULTS_DIR, source=str(folder))
    assert record.archive == Mount(target=contract.ARCHIVE_DIR, source=str(folder / "archive"))
    assert record.network.egress == "open"
    assert record.timeout == 3600
    assert record.labels == {
        labels.RUN_ID: "run-1",
        labels.WEBUI: "true",
        labels.TASK_ID: TASK_ID,
        labels.MODEL: "none",
        labels.AGENT: "dummy",
        labels.RESULTS: str(folder),
        labels.REFERENCE_RUN: "false",
        **current_lease(),
    }
    # The lease names this process, the runner, and says it is alive.
    assert record.labels[labels.LEASE_PID] == str(os.getpid())
    assert liveness(record.labels) == "alive"
    config = decode_json((run_dir() / "run.json").read_bytes(), RunFile).config
    assert config is not None
    assert config.egress == "open"


def test_the_container_gets_the_contracts_environment(fake: FakeBackend, cli: Cli) -> None:
    cli(*run_args("--difficulty", "0", "--timeout", "99"))

    assert fake.calls_to("start")[0][0].env == {
        "SSE_API_KEY": "",
        "SSE_BASE_URL": "",
        "SSE_MODEL_NAME": "none",
        "SSE_ARCHIVE": "/tmp/sse-archive",
        "SSE_RESULTS": "/var/lib/ssebench/results",
        "SSE_DIFFICULTY": "0",
        "TIMEOUT": "99",
        "SSE_CHECK_TIMEOUT": "1800",
        "SSE_KEEP_ALIVE": "0",
        # The run's process limit, which the container holds where the kernel does not.
        "SSE_PIDS_LIMIT": "1024",
        # How the agent learns its mode and where the MCP server is.
        "SSE_MODE": "sandbox",
        "SSE_MCP_URL": "http://127.0.0.1:3000/mcp",
        # The checker's socket on the volume both containers share, in both modes.
        "SSE_DAEMON_SOCKET": "/run/ssebench/sse.sock",
    }


def test_the_reference_patch_is_mounted_for_the_reference_agent_only(
    fake: FakeBackend, cli: Cli
) -> None:
    cli(*run_args(agent="reference"))
    cli(*run_args(agent="dummy"))

    (reference,), (dummy,) = fake.calls_to("start")
    private = fake.calls_to("copy_from_image")[0][2]
    assert reference.artifacts == [
        Mount(target="/reference/patch.diff", source=str(private), read_only=True)
    ]
    assert reference.labels[labels.REFERENCE_RUN] == "true"
    assert dummy.artifacts == []
    assert dummy.labels[labels.REFERENCE_RUN] == "false"
    assert read(run_dir(agent="reference") / "summary.json")["config"]["reference_run"] is True


def test_every_run_directory_gets_the_reference_patch(fake: FakeBackend, cli: Cli) -> None:
    cli(*run_args(agent="reference"))
    cli(*run_args(agent="dummy"))

    for agent in ("reference", "dummy"):
        assert (run_dir(agent=agent) / "reference.patch").read_bytes() == REFERENCE_PATCH
    assert [(image, path) for image, path, _, _ in fake.calls_to("copy_from_image")] == [
        # The checker's image holds it: no agent image holds hidden material.
        ("fake/tool/demo-task:1", "/ssebench/diffs/patch.diff"),
        ("fake/tool/demo-task:1", "/ssebench/diffs/patch.diff"),
    ]


def test_the_private_patch_lives_outside_the_run_directory_and_is_removed(
    fake: FakeBackend, cli: Cli
) -> None:
    modes: list[int] = []
    fake.hooks["copy_from_image"] = lambda image, path, dest, platform: modes.append(
        stat.S_IMODE(dest.parent.stat().st_mode)
    )
    cli(*run_args(agent="reference"))

    private = fake.calls_to("copy_from_image")[0][2]
    assert modes == [0o700]
    assert not private.is_relative_to(Path.cwd())
    assert not private.exists()
    assert not private.parent.exists()


def test_the_reference_patch_is_readable_in_the_container(
    make_plan: Callable[..., RunPlan],
) -> None:
    modes: list[int] = []
    backend = fake_backend()
    backend.hooks["start"] = lambda spec: modes.append(
        stat.S_IMODE(Path(spec.artifacts[0].source).stat().st_mode)
    )

    Runner(backend).run(make_plan(agent="reference"))

    assert modes == [0o644]


def planted(plan: RunPlan) -> RunPlan:
    return dataclasses.replace(plan, env={**plan.env, contract.ENV_API_KEY: SECRET})


def everything_written(folder: Path) -> str:
    return "\n".join(
        path.read_bytes().decode(errors="replace") for path in folder.rglob("*") if path.is_file()
    )


@pytest.mark.parametrize(
    "backend",
    [
        pytest.param(fake_backend(), id="passed"),
        pytest.param(fake_backend(fail_start=True), id="failed start"),
        pytest.param(fake_backend(result=b"not json"), id="unreadable result"),
        pytest.param(
            fake_backend(wait_error=BackendError("lost"), collect_error=BackendError("gone")),
            id="wait and collect fail",
        ),
    ],
)
def test_a_planted_secret_never_surfaces(
    make_plan: Callable[..., RunPlan],
    backend: FakeBackend,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level("DEBUG")
    plan = planted(make_plan(agent="reference"))

    summary = Runner(backend).run(plan)

    assert backend.calls_to("start")[0][0].env[contract.ENV_API_KEY] == SECRET
    captured = capsys.readouterr()
    shown = [
        everything_written(Path("results")),
        caplog.text,
        captured.out,
        captured.err,
        repr(plan),
        repr(backend.calls_to("start")[0][0]),
        repr(summary),
    ]
    for text in shown:
        assert SECRET not in text
    assert contract.ENV_API_KEY in read(plan.run_dir / "run.json")["env_names"]


def test_a_planted_secret_never_reaches_the_cli_output(
    fake: FakeBackend, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = _plan.container_env

    def with_secret(*args: Any, **kwargs: Any) -> dict[str, str]:
        return {**real(*args, **kwargs), contract.ENV_API_KEY: SECRET}

    monkeypatch.setattr(_plan, "container_env", with_secret)

    for extra in ([], ["--json"]):
        outcome = cli(*run_args(*extra, run_id=f"run{len(extra)}"))
        assert outcome.exit_code == 0, outcome.stderr
        assert SECRET not in outcome.stdout + outcome.stderr
    assert all(spec.env[contract.ENV_API_KEY] == SECRET for (spec,) in fake.calls_to("start"))
    assert SECRET not in everything_written(Path("results"))


def test_a_spec_never_shows_its_environment() -> None:
    spec = RunSpec(
        run_id="r",
        task_name="t",
        mode="sandbox",
        image="i",
        env={contract.ENV_API_KEY: SECRET},
        results=Mount(target="/r", source="/s"),
        archive=Mount(target="/a", source="/s/a"),
    )

    assert SECRET not in repr(spec)
    assert SECRET not in repr(spec.record())


def test_latest_points_at_the_newest_run(fake: FakeBackend, cli: Cli) -> None:
    for run_id in ("b-first", "a-second"):
        assert cli(*run_args(run_id=run_id)).exit_code == 0

    latest = run_dir(run_id="latest")
    assert latest.is_symlink()
    assert latest.readlink() == Path("a-second")
    assert latest.resolve() == run_dir(run_id="a-second").resolve()
    assert sorted(p.name for p in latest.parent.iterdir()) == ["a-second", "b-first", "latest"]


def test_latest_is_made_even_when_the_run_fails_to_start(
    home: Path, use_backend: Callable[..., None], cli: Cli
) -> None:
    use_backend(fake_backend(fail_start=True))

    cli(*run_args())

    assert run_dir(run_id="latest").readlink() == Path("run-1")


def test_an_unusable_latest_does_not_stop_the_run(fake: FakeBackend, cli: Cli) -> None:
    latest = run_dir(run_id="latest")
    latest.mkdir(parents=True)
    (latest / "something").write_text("a folder where the link should be")

    outcome = cli(*run_args())

    assert outcome.exit_code == 0
    assert "cannot point" in outcome.stderr
    assert (run_dir() / "summary.json").is_file()
    assert not [p for p in latest.parent.iterdir() if p.name.startswith(".latest")]


def test_the_check_timeout_reaches_the_container_and_the_recorded_config(
    fake: FakeBackend, cli: Cli
) -> None:
    cli(*run_args("--check-timeout", "45"))

    assert fake.calls_to("start")[0][0].env[contract.ENV_CHECK_TIMEOUT] == "45"
    summary = json.loads((run_dir() / "summary.json").read_text())
    assert summary["config"]["check_timeout"] == 45


def test_the_summary_names_what_the_backend_says_it_started_the_run_from(
    fake: FakeBackend, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cluster resolves a tag when it pulls: the digest it started from is recorded,
    not the tag `prepare_images` named (RunHandle.images)."""
    digest = f"fake/agent-dummy/{TASK_ID}@sha256:{'0' * 64}"
    start = fake.start

    def resolving(spec: RunSpec) -> RunHandle:
        return msgspec.structs.replace(start(spec), images={"agent": digest})

    monkeypatch.setattr(fake, "start", resolving)
    outcome = cli(*run_args())

    assert outcome.exit_code == 0, outcome.stderr
    assert read(run_dir() / "summary.json")["provenance"]["images"] == {
        "agent": digest,
        "environment": f"fake/tool/{TASK_ID}:1",
    }


def test_the_summary_records_what_the_run_was_made_of(
    fake: FakeBackend, cli: Cli, make_plan: Callable[..., RunPlan]
) -> None:
    from ssebench.runner import run_inputs

    plan = make_plan(run_id="other")
    outcome = cli(*run_args())

    assert outcome.exit_code == 0, outcome.stderr
    provenance = read(run_dir() / "summary.json")["provenance"]
    assert provenance["images"] == {
        "agent": f"fake/agent-dummy/{TASK_ID}:1",
        "environment": f"fake/tool/{TASK_ID}:1",
    }
    assert provenance["agent_version"] == "1.0"
    assert (provenance["dataset"], provenance["dataset_version"]) == ("demo", "1")
    assert (provenance["model"], provenance["mode"], provenance["difficulty"]) == (
        "none",
        "sandbox",
        2,
    )
    # The digest leaves the run ID out: another run of the same inputs has the same one.
    assert provenance["inputs"] == run_inputs(plan.task, plan.agent, plan.config)
    # Any file of the task changes it.
    (Path(plan.task.folder) / "sse" / "extra.txt").write_text("x")
    assert provenance["inputs"] != run_inputs(plan.task, plan.agent, plan.config)
