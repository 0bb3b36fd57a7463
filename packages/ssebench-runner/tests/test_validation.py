"""Every option is checked before anything happens: one line, exit status 1, nothing created."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from ssebench.conformance.fake import FakeBackend

from .conftest import TASK_ID, run_args, run_dir, write_task
from .fakes import fake_backend

Cli = Callable[..., Result]

MODELS_YAML = """\
budget: 0.5
models:
  scripted:
    litellm: {model: openai/scripted, api_base: "http://127.0.0.1:9/v1"}
  paid:
    litellm: {model: openai/gpt-4o-mini}
    key_env: SSEBENCH_TEST_UNSET_KEY
"""


def refused(outcome: Result, fake: FakeBackend) -> str:
    """The one line a refused run printed, after checking it changed nothing."""
    assert outcome.exit_code == 1, outcome.stdout + outcome.stderr
    assert outcome.stdout == ""
    lines = outcome.stderr.splitlines()
    assert len(lines) == 1, outcome.stderr
    assert lines[0].startswith("ssebench: ")
    assert fake.methods == []
    assert not Path("results").exists()
    return lines[0].removeprefix("ssebench: ")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            ["--task", "no-such-task"],
            "unknown task 'no-such-task' in {dataset}: tasks there are demo-task",
            id="unknown task",
        ),
        pytest.param(
            ["--task", "../etc"],
            "invalid task ID '../etc': use letters and digits separated by single "
            "'.', '_' or '-', at most 128 characters",
            id="malformed task",
        ),
        pytest.param(
            ["--agent", "nobody"],
            "unknown agent 'nobody': known agents are chatty, dummy, reference (looked in ",
            id="unknown agent",
        ),
        pytest.param(
            ["--agent", "chatty"],
            "agent 'chatty' uses a model: choose one with --model (the models in ",
            id="agent with a model",
        ),
        pytest.param(
            ["--agent", "chatty", "--model", "gpt-9"],
            "unknown model 'gpt-9': {home}/models.yaml names paid, scripted",
            id="unknown model",
        ),
        pytest.param(
            ["--agent", "chatty", "--model", "paid"],
            "model 'paid' needs its provider key in the variable SSEBENCH_TEST_UNSET_KEY, "
            "which is not set in this environment",
            id="missing provider key",
        ),
        pytest.param(
            ["--agent", "chatty", "--model", "scripted", "--budget", "0"],
            "invalid budget 0.0: use a positive number of US dollars",
            id="zero budget",
        ),
        pytest.param(
            ["--agent", "chatty", "--model", "scripted", "--budget", "nan"],
            "invalid budget nan: use a positive number of US dollars",
            id="budget not a number",
        ),
        pytest.param(
            ["--budget", "1"],
            "--budget needs a model: choose one with --model",
            id="budget without a model",
        ),
        pytest.param(
            ["--difficulty", "5"], "invalid difficulty 5: use 0 to 4 (default 2)", id="difficulty 5"
        ),
        pytest.param(
            ["--difficulty", "-1"],
            "invalid difficulty -1: use 0 to 4 (default 2)",
            id="difficulty -1",
        ),
        pytest.param(
            ["--timeout", "0"],
            "invalid timeout 0: use a positive number of seconds",
            id="timeout",
        ),
        pytest.param(
            ["--check-timeout", "-5"],
            "invalid check timeout -5: use a positive number of seconds",
            id="check timeout",
        ),
        pytest.param(
            ["--mode", "sidekick"], "invalid mode 'sidekick': use sandbox or sidecar", id="mode"
        ),
        pytest.param(
            ["--egress", "wide"],
            "invalid egress 'wide' (from --egress or SSEBENCH_EGRESS): use restricted or open",
            id="egress",
        ),
        pytest.param(
            ["--backend", "nope"],
            "unknown backend 'nope': installed backends are ",
            id="unknown backend",
        ),
    ],
)
def test_a_bad_option_is_refused_in_one_line(
    fake: FakeBackend,
    cli: Cli,
    home: Path,
    args: list[str],
    message: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (home / "models.yaml").write_text(MODELS_YAML)
    monkeypatch.delenv("SSEBENCH_MODELS", raising=False)
    monkeypatch.delenv("SSEBENCH_TEST_UNSET_KEY", raising=False)
    base = run_args()
    for name, value in zip(args[::2], args[1::2], strict=True):
        if name in base:
            base[base.index(name) + 1] = value
        else:
            base += [name, value]

    line = refused(cli(*base), fake)

    assert line.startswith(message.format(dataset=home / "datasets" / "demo", home=home))


@pytest.mark.parametrize(
    "run_id",
    ["latest", "-leading-dash", ".hidden", "a" * 65, "a/b", "run id", "", "über"],
)
def test_a_malformed_run_id_is_refused(fake: FakeBackend, cli: Cli, run_id: str) -> None:
    line = refused(cli(*run_args(run_id=run_id)), fake)

    assert line == (
        f"invalid run ID {run_id!r}: use 1-64 letters, digits, '.', '_' or '-', "
        "starting with a letter or digit, and not 'latest'"
    )


@pytest.mark.parametrize("run_id", ["a", "A.b_c-9", "9" * 64, "latest2"])
def test_a_well_formed_run_id_is_accepted(fake: FakeBackend, cli: Cli, run_id: str) -> None:
    outcome = cli(*run_args(run_id=run_id))

    assert outcome.exit_code == 0, outcome.stderr
    assert run_dir(run_id=run_id).is_dir()


def test_an_egress_from_the_environment_is_checked(
    fake: FakeBackend, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSEBENCH_EGRESS", "everywhere")

    line = refused(cli(*run_args()), fake)

    assert line.startswith("invalid egress 'everywhere' (from --egress or SSEBENCH_EGRESS)")


def test_the_backend_comes_from_the_environment(
    fake: FakeBackend, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSEBENCH_BACKEND", "fake")
    args = run_args()
    del args[args.index("--backend") : args.index("--backend") + 2]

    outcome = cli(*args)

    assert outcome.exit_code == 0, outcome.stderr
    assert fake.methods[0] == "prepare_images"


def test_an_existing_run_directory_is_refused(fake: FakeBackend, cli: Cli) -> None:
    run_dir().mkdir(parents=True)
    (run_dir() / "keep-me").write_text("earlier run")

    outcome = cli(*run_args())

    assert outcome.exit_code == 1
    assert outcome.stderr == (
        f"ssebench: run directory {run_dir()} already exists: choose another --run-id "
        "or leave it out for a fresh one\n"
    )
    assert fake.methods == []
    assert [p.name for p in run_dir().iterdir()] == ["keep-me"]


def test_a_task_config_that_fails_its_schema_is_refused(
    fake: FakeBackend, cli: Cli, home: Path
) -> None:
    config = home / "datasets" / "demo" / TASK_ID / "sse" / "config.yaml"
    config.write_text(config.read_text() + "bogus: 1\n")

    line = refused(cli(*run_args()), fake)

    assert line == f"{config}: unknown key 'bogus'"


REFERENCE_FIX = """\
diff --git a/tests/helpers.c b/tests/helpers.c
--- a/tests/helpers.c
+++ b/tests/helpers.c
@@ -1 +1 @@
-old
+new
"""


@pytest.mark.parametrize(
    ("protected", "message"),
    [
        pytest.param(
            "['tests/**']",
            "task demo-task: sse/config.yaml key 'protected': 'tests/**' covers "
            "tests/helpers.c, which the reference patch changes, so the reference fix "
            "would be dropped: narrow the glob",
            id="covers the reference fix",
        ),
        pytest.param(
            "['**/*']",
            "{config}: key 'protected': protected glob '**/*' protects the whole tree, so no "
            "change of the agent would be graded: name the files that judge a fix (tests, "
            "test-runner configuration)",
            id="the whole tree",
        ),
        pytest.param(
            "['tests/[x']",
            "{config}: key 'protected': protected glob 'tests/[x': '[' has no closing ']'",
            id="malformed",
        ),
    ],
)
def test_a_task_whose_protected_globs_cannot_be_used_is_refused(
    fake: FakeBackend, cli: Cli, home: Path, protected: str, message: str
) -> None:
    folder = home / "datasets" / "demo" / TASK_ID / "sse"
    (folder / "diffs" / "patch.diff").write_text(REFERENCE_FIX)
    (folder / "config.yaml").write_text(
        (folder / "config.yaml").read_text() + f"protected: {protected}\n"
    )

    line = refused(cli(*run_args()), fake)

    assert line == message.format(config=folder / "config.yaml")


def test_a_task_config_with_a_wrongly_typed_key_is_refused(
    fake: FakeBackend, cli: Cli, tmp_path: Path
) -> None:
    dataset = tmp_path / "other"
    dataset.mkdir()
    (dataset / "dataset.yaml").write_text('version: "2"\n')
    folder = write_task(dataset, "typed", config="id: typed\nproject: [1]\n")
    args = [*run_args("--local", str(dataset))]
    args[args.index("--task") + 1] = "typed"

    line = refused(cli(*args), fake)

    assert line.startswith(f"{folder / 'sse' / 'config.yaml'}: key 'project': Expected `str`")


def test_a_missing_task_names_the_tasks_there_are(fake: FakeBackend, cli: Cli, home: Path) -> None:
    line = refused(cli("run", "--agent", "dummy", "--backend", "fake"), fake)

    assert line == (
        f"no task given: use --task with one of the tasks in {home / 'datasets' / 'demo'}: "
        "demo-task"
    )


def test_a_missing_agent_names_the_agents_there_are(fake: FakeBackend, cli: Cli) -> None:
    line = refused(cli("run", "--task", TASK_ID, "--backend", "fake"), fake)

    assert line == "no agent given: use --agent with one of chatty, dummy, reference"


def test_a_missing_dataset_is_refused(fake: FakeBackend, cli: Cli, tmp_path: Path) -> None:
    line = refused(cli(*run_args("--local", str(tmp_path / "nowhere"))), fake)

    assert line == f"dataset folder {tmp_path / 'nowhere'} does not exist"


def test_images_that_cannot_be_prepared_leave_nothing_behind(
    fake: FakeBackend, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ssebench.spec import ImageUnavailableError

    def unavailable(request: object) -> None:
        raise ImageUnavailableError("image fake/agent-dummy/demo-task:1 cannot be built")

    monkeypatch.setattr(fake, "prepare_images", unavailable)

    outcome = cli(*run_args())

    assert outcome.exit_code == 1
    assert outcome.stderr == "ssebench: image fake/agent-dummy/demo-task:1 cannot be built\n"
    assert not Path("results").exists()


class PrebuiltOnlyBackend(FakeBackend):
    builds_images = False


def test_a_backend_that_cannot_build_images_is_refused(
    home: Path, use_backend: Callable[..., None], cli: Cli
) -> None:
    backend = PrebuiltOnlyBackend()
    use_backend(backend)

    line = refused(cli(*run_args()), backend)

    assert line == (
        "backend 'fake' cannot build images and runs prebuilt images only: add --prebuilt "
        "(or set SSEBENCH_PREBUILT=1)"
    )


@pytest.mark.parametrize("how", ["option", "environment"])
def test_a_backend_that_cannot_build_images_runs_with_prebuilt(
    home: Path,
    use_backend: Callable[..., None],
    cli: Cli,
    monkeypatch: pytest.MonkeyPatch,
    how: str,
) -> None:
    backend = PrebuiltOnlyBackend(built=fake_backend().built)
    use_backend(backend)
    if how == "environment":
        monkeypatch.setenv("SSEBENCH_PREBUILT", "1")

    outcome = cli(*run_args(), *(["--prebuilt"] if how == "option" else []))

    assert outcome.exit_code == 0, outcome.stderr
    (request,) = backend.calls_to("prepare_images")
    assert request[0].prebuilt is True


@pytest.mark.parametrize(
    "platform", ["arm64", "linux", "windows/amd64", "linux/arm64/", "linux/ARM"]
)
def test_a_malformed_platform_is_refused(fake: FakeBackend, cli: Cli, platform: str) -> None:
    line = refused(cli(*run_args(), "--platform", platform), fake)

    assert line == (
        f"invalid platform {platform!r}: use linux/<arch>, such as linux/amd64 or linux/arm64"
    )


def test_the_platform_reaches_every_call_that_takes_one(fake: FakeBackend, cli: Cli) -> None:
    outcome = cli(*run_args(), "--platform", "linux/arm64/v8")

    assert outcome.exit_code == 0, outcome.stderr
    (request,) = fake.calls_to("prepare_images")
    assert request[0].platform == "linux/arm64/v8"
    assert all(call[-1] == "linux/arm64/v8" for call in fake.calls_to("copy_from_image"))
    (start,) = fake.calls_to("start")
    assert start[0].platform == "linux/arm64/v8"


@pytest.mark.parametrize(
    ("option", "value", "said"),
    [
        ("--memory", "lots", "invalid --memory 'lots': use a size such as 4g"),
        ("--memory", "1m", "invalid --memory '1m': at least 64m"),
        ("--cpus", "0", "invalid --cpus 0.0: a positive number of CPUs"),
        ("--pids-limit", "3", "invalid --pids-limit 3: at least 32"),
    ],
)
def test_a_bad_limit_is_refused(
    fake: FakeBackend, cli: Cli, option: str, value: str, said: str
) -> None:
    assert said in refused(cli(*run_args(option, value)), fake)
