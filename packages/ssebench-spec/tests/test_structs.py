from __future__ import annotations

import typing
from typing import Any

import msgspec
import pytest

import ssebench.extensions
import ssebench.spec
from ssebench.spec import (
    Agent,
    DecodeError,
    ImageRequest,
    Images,
    Mount,
    NetworkPolicy,
    PatchResult,
    Result,
    RunConfig,
    RunHandle,
    RunInfo,
    RunRecord,
    RunSpec,
    RuntimeResult,
    SidecarPair,
    Summary,
    Task,
    TaskConfig,
    TaskDescription,
    TaskFiles,
    TaskScripts,
    UserError,
    contract,
    decode_json,
    encode_json,
    prebuilt_images,
)

SECRET = "sk-planted-secret-0123456789"


def task_config() -> TaskConfig:
    return TaskConfig(
        id="demo-task",
        project="demo",
        repository="bundled",
        language="c",
        source="/src/demo",
        task_description=TaskDescription(bug_description="overflow"),
        scripts=TaskScripts(build="scripts/build.sh", run="scripts/run.sh", test="scripts/test.sh"),
        files=TaskFiles(patch="diffs/patch.diff", poc=["pocs/a"], future_test="diffs/test.diff"),
    )


def run_spec(**changes: Any) -> RunSpec:
    fields: dict[str, Any] = {
        "run_id": "r1",
        "task_name": "demo-task",
        "mode": "sandbox",
        "image": "ssebench/agent-dummy/demo-task:1",
        "env": {"SSE_API_KEY": SECRET, "SSE_DIFFICULTY": "2"},
        "results": Mount(target="/var/lib/ssebench/results", source="/tmp/run"),
        "archive": Mount(target="/tmp/sse-archive", source="/tmp/run/archive"),
        "labels": {"ssebench.run-id": "r1"},
    }
    fields.update(changes)
    return RunSpec(**fields)


CONFIG = RunConfig(
    agent="dummy",
    model="none",
    mode="sandbox",
    backend="docker",
    difficulty=2,
    timeout=3600,
    egress="restricted",
    reference_run=False,
    keep=False,
)
PATCH = PatchResult(status="failed", build_success=True, pov_passed=0, pov_total=1)
TASK = Task(
    id="demo-task", folder="/d/demo-task", dataset="demo", dataset_version="1", config=task_config()
)
AGENT = Agent(name="dummy", version="1", uses_model=False, folder="/a/dummy")

PAIR = SidecarPair.create(
    run_id="r1",
    environment_image="reg/tool-sidecar/demo-task:1",
    source_dir="/src/demo",
    env={
        "SSE_API_KEY": "sk-never-for-the-task-container",
        "SSE_DIFFICULTY": "2",
        "SSE_RESULTS": "/var/lib/ssebench/results",
        "SSE_ARCHIVE": "/tmp/sse-archive",
        "SSE_CHECK_TIMEOUT": "60",
        "TIMEOUT": "3600",
    },
)

EXAMPLES: list[msgspec.Struct] = [
    Mount(target="/x", source="vol", kind="volume", read_only=True),
    NetworkPolicy(egress="open"),
    PAIR,
    RunHandle(run_id="r1", name="ssebench-r1", keep=True),
    RunInfo(
        run_id="r1",
        name="c",
        state="exited",
        image="i",
        handle=RunHandle(run_id="r1", name="c"),
        exit_code=143,
        labels={"a": "b"},
        created_at="2026-11-29T00:00:00Z",
    ),
    ImageRequest(mode="sandbox", task=TASK, agent=AGENT, prebuilt=True, platform="linux/amd64"),
    Images(agent="a", environment="e"),
    CONFIG,
    PATCH,
    RuntimeResult(agent_duration=1.5, agent_timeout=True, agent_exit_code=124),
    RuntimeResult(stopped_by="SIGTERM"),
    PatchResult(status="error", error_msg="no check ran", error_source="task"),
    Result(patch_result=PATCH, runtime_result=RuntimeResult(), config=CONFIG),
    Summary(
        task="demo-task",
        config=CONFIG,
        patch_result=PATCH,
        runtime_result=RuntimeResult(),
        run_id="r1",
        started_at="2026-11-29T00:00:00Z",
        outcome="agent_timeout",
    ),
    task_config(),
    TASK,
    AGENT,
    run_spec(),
    run_spec().record(),
]

EXAMPLES_BY_TYPE = {type(value).__name__: value for value in EXAMPLES}


@pytest.mark.parametrize("value", EXAMPLES, ids=lambda value: type(value).__name__)
def test_every_struct_survives_a_round_trip_through_json(value: msgspec.Struct) -> None:
    assert decode_json(encode_json(value), type(value)) == value


def test_a_sidecar_run_without_a_pair_is_refused() -> None:
    with pytest.raises(UserError, match="sidecar run needs a SidecarPair"):
        run_spec(mode="sidecar")


def test_a_sandbox_runs_pair_is_a_checker_pair() -> None:
    with pytest.raises(UserError, match="sandbox run's SidecarPair is a checker pair"):
        run_spec(sidecar=msgspec.structs.replace(PAIR, checker=False))
    assert run_spec(sidecar=msgspec.structs.replace(PAIR, checker=True)).sidecar is not None


def test_a_pair_names_its_volumes_after_the_run_and_shares_what_both_containers_need() -> None:
    assert [(m.target, m.source, m.kind) for m in PAIR.volumes] == [
        ("/src/demo", "ssebench-r1-source", "volume"),
        ("/run/ssebench", "ssebench-r1-sockets", "volume"),
    ]
    assert PAIR.shared_env() == {
        "SSE_DIFFICULTY": "2",
        "SSE_RESULTS": "/var/lib/ssebench/results",
        "SSE_ARCHIVE": "/tmp/sse-archive",
        "SSE_DAEMON_SOCKET": "/run/ssebench/sse.sock",
    }
    # The checker also gets the agent's time limit (its fallback when no report comes).
    assert PAIR.environment_env() == {
        **PAIR.shared_env(),
        "SSE_CHECK_TIMEOUT": "60",
        "TIMEOUT": "3600",
    }
    results = Mount(target="/var/lib/ssebench/results", source="/h/run")
    archive = Mount(target="/tmp/sse-archive", source="/h/run/archive")
    assert PAIR.shared_mounts(results, archive) == [results, archive, *PAIR.volumes]
    sidecar = run_spec(mode="sidecar", sidecar=PAIR)
    assert sidecar.sidecar == PAIR


def test_a_pair_hands_the_checker_the_runs_key_only_when_a_plugin_uses_the_model() -> None:
    run_env = {"SSE_API_KEY": SECRET, "SSE_BASE_URL": "http://gw:4000", "SSE_DIFFICULTY": "2"}
    assert "SSE_API_KEY" not in PAIR.environment_env(run_env)
    keyed = msgspec.structs.replace(PAIR, model_key=True)
    found = keyed.environment_env(run_env)
    assert (found["SSE_API_KEY"], found["SSE_BASE_URL"]) == (SECRET, "http://gw:4000")
    # The key is never the pair's own: its record and repr carry the flag alone.
    for text in (repr(keyed), encode_json(keyed).decode()):
        assert SECRET not in text


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"env": {"SSE_API_KEY": "sk"}}, "never gets a secret: SSE_API_KEY"),
        ({"source_dir": "src"}, "must be an absolute path"),
        ({"volumes": []}, "exactly two volumes"),
    ],
)
def test_a_pair_refuses_a_secret_a_relative_source_and_other_volumes(
    change: dict[str, object], message: str
) -> None:
    with pytest.raises(UserError, match=message):
        msgspec.structs.replace(PAIR, **change)


def test_the_model_key_is_absent_from_the_run_specs_repr() -> None:
    spec = run_spec()
    for text in (repr(spec), str(spec), f"{spec!r}", repr([spec])):
        assert SECRET not in text
    assert "SSE_API_KEY" in repr(spec)


def test_the_record_written_to_disk_keeps_the_environments_names_only() -> None:
    record = run_spec().record()
    data = encode_json(record, pretty=True)
    assert SECRET.encode() not in data
    assert decode_json(data, RunRecord).env_names == ["SSE_API_KEY", "SSE_DIFFICULTY"]


def test_a_decode_error_names_the_field_but_never_the_environments_values() -> None:
    raw = msgspec.json.encode(msgspec.to_builtins(run_spec()) | {"timeout": "soon"})
    with pytest.raises(DecodeError) as caught:
        decode_json(raw, RunSpec, what="run spec")
    assert "$.timeout" in str(caught.value)
    assert SECRET not in str(caught.value)


def test_a_decode_error_is_also_a_value_error() -> None:
    with pytest.raises(ValueError, match=r"result\.json"):
        decode_json(b"{", Result, what="result.json")


def test_unknown_fields_from_a_newer_version_are_ignored_in_messages() -> None:
    raw = b'{"egress": "open", "added_later": 1}'
    assert decode_json(raw, NetworkPolicy) == NetworkPolicy(egress="open")


def test_images_name_the_task_image_in_either_mode() -> None:
    assert Images(agent="a").task_image() == "a"
    assert Images(agent="a", environment="e").task_image() == "e"


def test_prebuilt_images_are_named_under_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SSEBENCH_REGISTRY", "registry.example:5000/team")
    task = msgspec.structs.replace(TASK, id="Demo-Task")
    request = ImageRequest(mode="sandbox", task=task, agent=AGENT)
    assert prebuilt_images(request) == Images(
        agent="registry.example:5000/team/agent-dummy/demo-task:1",
        environment=f"registry.example:5000/team/tool/demo-task:{ssebench.spec.runtime_version()}",
    )
    sidecar = prebuilt_images(msgspec.structs.replace(request, mode="sidecar"))
    assert sidecar.agent == "registry.example:5000/team/agent-dummy/sidecar:1"
    assert sidecar.environment == (
        f"registry.example:5000/team/tool-sidecar/demo-task:{ssebench.spec.runtime_version()}"
    )


@pytest.mark.parametrize("module", [ssebench.spec, ssebench.extensions])
def test_public_names_are_sorted_and_exist(module: Any) -> None:
    def isort_style(name: str) -> tuple[int, str]:  # ruff's RUF022 order
        return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)

    assert module.__all__ == sorted(module.__all__, key=isort_style)
    for name in module.__all__:
        assert hasattr(module, name), name


def test_every_lazily_loaded_name_is_public_and_every_public_name_has_a_home() -> None:
    homes = set(ssebench.spec._HOMES) | set(ssebench.spec._SUBMODULES)
    assert homes == set(ssebench.spec.__all__)
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        _ = ssebench.spec.Nothing  # type: ignore[attr-defined]


def test_the_extensions_api_is_the_seeds() -> None:
    from ssebench.extensions import Backend, RunSpec  # noqa: F401  (the seed's import)

    assert ssebench.extensions.Backend is ssebench.spec.Backend


def test_the_on_disk_record_mirrors_every_field_of_the_run_spec_but_the_values() -> None:
    spec_fields = [name for name in RunSpec.__struct_fields__ if name != "env"]
    record_fields = [name for name in RunRecord.__struct_fields__ if name != "env_names"]
    assert spec_fields == record_fields


def test_results_written_before_outcomes_and_error_sources_still_decode() -> None:
    old = {
        "task": "demo-task",
        "config": msgspec.to_builtins(CONFIG),
        "patch_result": {"status": "error", "error_msg": "the run left no result.json"},
        "runtime_result": {"agent_timeout": False},
        "run_id": "r1",
        "started_at": "2026-11-29T00:00:00Z",
    }
    summary = decode_json(msgspec.json.encode(old), Summary)
    assert summary.outcome is None
    assert summary.patch_result.error_source is None
    assert summary.runtime_result.stopped_by is None


@pytest.mark.parametrize(
    ("field", "value"),
    [("outcome", "retried"), ("outcome", "error"), ("error_source", "agent")],
)
def test_an_outcome_or_error_source_outside_the_fixed_set_is_refused(
    field: str, value: str
) -> None:
    data = msgspec.to_builtins(EXAMPLES_BY_TYPE["Summary"])
    if field == "outcome":
        data["outcome"] = value
    else:
        data["patch_result"]["error_source"] = value
    with pytest.raises(DecodeError):
        decode_json(msgspec.json.encode(data), Summary)


def test_the_outcomes_are_the_designs_seven_in_their_order() -> None:
    assert typing.get_args(ssebench.spec.Outcome) == (
        "stopped",
        "infra_error",
        "grader_error",
        "budget_exceeded",
        "agent_timeout",
        "passed",
        "failed",
    )


def test_the_launchers_exit_line_and_the_report_command_are_read_and_made_in_one_place() -> None:
    assert contract.exit_line_status(f"{contract.AGENT_EXIT_LINE}124") == 124
    for other in ("agent: done", f"{contract.AGENT_EXIT_LINE}", f"{contract.AGENT_EXIT_LINE}-1"):
        assert contract.exit_line_status(other) is None
    assert contract.report_command(7) == [
        contract.RUNTIME_PYTHON,
        "-I",
        "-m",
        contract.REPORT_MODULE,
        "7",
    ]
