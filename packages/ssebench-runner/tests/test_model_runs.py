"""`ssebench run --model`: a key per run, handed over, revoked at its end; its spend recorded."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

from ssebench.spec import (
    Backend,
    BackendError,
    contract,
)

from .conftest import TASK_ID, run_args
from .fakes import KEY, FakeGateway, ModelBackend, fake_backend

Cli = Callable[..., Result]

MODELS_YAML = """\
budget: 0.5
models:
  scripted:
    litellm: {model: openai/scripted, api_base: "http://127.0.0.1:9/v1"}
"""


@pytest.fixture
def models_home(home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (home / "models.yaml").write_text(MODELS_YAML)
    monkeypatch.delenv("SSEBENCH_MODELS", raising=False)
    return home


def with_gateway(
    use_backend: Callable[[Backend[Any]], None], refused: int = 0
) -> tuple[ModelBackend, FakeGateway]:
    gateway = FakeGateway(refused)
    template = fake_backend()
    backend = ModelBackend(gateway, built=template.built)
    use_backend(backend)
    return backend, gateway


def model_run_dir() -> Path:
    return Path(contract.HOST_RESULTS_ROOT) / TASK_ID / "scripted" / "chatty" / "run-1"


def test_a_run_with_a_model_gets_its_own_key_and_the_gateway_and_records_its_spend(
    models_home: Path, use_backend: Callable[[Backend[Any]], None], cli: Cli
) -> None:
    backend, gateway = with_gateway(use_backend)

    outcome = cli(*run_args("--model", "scripted", "--budget", "0.25", agent="chatty"))

    assert outcome.exit_code == 0, outcome.stderr
    assert gateway.opened == [("run-1", ["scripted"], 0.25)]
    assert gateway.closed[0] == "run-1"
    (spec,) = backend.specs
    assert spec.env[contract.ENV_API_KEY] == KEY
    assert spec.env[contract.ENV_BASE_URL] == "http://gateway.invalid:4000"
    assert spec.env[contract.ENV_MODEL_NAME] == "scripted"
    assert spec.network.model_proxy and spec.network.egress == "restricted"
    summary = json.loads((model_run_dir() / "summary.json").read_text())
    assert summary["spend"] == 0.06
    assert summary["usage"] == {
        "calls": 3,
        "prompt_tokens": 300,
        "completion_tokens": 150,
        "refused_for_budget": 0,
        "refused_for_concurrency": 0,
        "provider_errors": [],
        "provider_down": False,
    }
    assert summary["config"]["budget"] == 0.25
    assert summary["outcome"] == "passed"
    for path in model_run_dir().rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


def test_the_budget_defaults_to_the_models_file_and_a_refused_call_is_budget_exceeded(
    models_home: Path, use_backend: Callable[[Backend[Any]], None], cli: Cli
) -> None:
    _, gateway = with_gateway(use_backend, refused=1)

    outcome = cli(*run_args("--model", "scripted", agent="chatty"))

    assert outcome.exit_code == 0, outcome.stderr
    assert gateway.opened == [("run-1", ["scripted"], 0.5)]
    summary = json.loads((model_run_dir() / "summary.json").read_text())
    # Graded as usual; the outcome says the budget ran out.
    assert summary["patch_result"]["status"] == "passed"
    assert summary["outcome"] == "budget_exceeded"


def test_a_gateway_that_cannot_start_leaves_nothing_behind(
    models_home: Path, use_backend: Callable[[Backend[Any]], None], cli: Cli
) -> None:
    backend, gateway = with_gateway(use_backend)
    backend.gateway_error = BackendError("the gateway did not answer within 180s")

    outcome = cli(*run_args("--model", "scripted", agent="chatty"))

    assert outcome.exit_code == 1
    assert outcome.stderr.strip() == "ssebench: the gateway did not answer within 180s"
    assert not Path("results").exists()
    assert gateway.opened == []


def test_models_list_shows_each_model_and_whether_its_key_is_set_never_the_key(
    models_home: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    (models_home / "models.yaml").write_text(
        MODELS_YAML + "  paid:\n    litellm: {model: openai/gpt}\n    key_env: PAID_KEY\n"
    )
    monkeypatch.setenv("PAID_KEY", "sk-paid-planted-77")

    outcome = cli("models", "list", "--json")

    assert outcome.exit_code == 0, outcome.stderr
    assert json.loads(outcome.stdout) == [
        {
            "name": "paid",
            "litellm_model": "openai/gpt",
            "key_env": "PAID_KEY",
            "key_set": True,
            "budget": 0.5,
        },
        {
            "name": "scripted",
            "litellm_model": "openai/scripted",
            "key_env": None,
            "key_set": True,
            "budget": 0.5,
        },
    ]
    assert "sk-paid-planted-77" not in outcome.stdout + outcome.stderr


def test_a_key_that_cannot_be_opened_leaves_nothing_behind(
    models_home: Path, use_backend: Callable[[Backend[Any]], None], cli: Cli
) -> None:
    backend, gateway = with_gateway(use_backend)

    def refuse(run_id: str, models: list[str], budget: float | None) -> str:
        raise BackendError("opening the run's model key failed: the gateway's key store: locked")

    gateway.open_key = refuse  # type: ignore[method-assign]

    outcome = cli(*run_args("--model", "scripted", agent="chatty"))

    assert outcome.exit_code == 1
    assert outcome.stderr.strip() == (
        "ssebench: opening the run's model key failed: the gateway's key store: locked"
    )
    assert not Path("results").exists()
    assert backend.specs == []
    assert gateway.closed == ["run-1"]  # revoked all the same (nothing to revoke is fine)


def test_an_evaluation_with_a_model_gives_each_run_a_key_with_the_models_budget(
    models_home: Path, use_backend: Callable[[Backend[Any]], None], cli: Cli
) -> None:
    backend, gateway = with_gateway(use_backend)

    outcome = cli(
        "eval", "--agents", "chatty", "--models", "scripted", "--repeat", "2", "--backend", "fake"
    )

    assert outcome.exit_code == 0, outcome.stderr
    assert [(models, budget) for _, models, budget in gateway.opened] == [
        (["scripted"], 0.5),
        (["scripted"], 0.5),
    ]
    # Each key is revoked (closing again is harmless, and the runner does it in `finally`).
    assert set(gateway.closed) == {run_id for run_id, _, _ in gateway.opened}
    assert all(spec.env[contract.ENV_MODEL_NAME] == "scripted" for spec in backend.specs)
    runs = Path(contract.HOST_RESULTS_ROOT) / TASK_ID / "scripted" / "chatty"
    summaries = [
        json.loads((run / contract.SUMMARY_FILE).read_text())
        for run in runs.iterdir()
        if not run.is_symlink()  # `latest` points at one of them
    ]
    assert [summary["spend"] for summary in summaries] == [0.06, 0.06]
    assert {summary["config"]["budget"] for summary in summaries} == {0.5}


def test_an_evaluation_refuses_a_model_the_models_file_lacks_before_creating_anything(
    models_home: Path, use_backend: Callable[[Backend[Any]], None], cli: Cli
) -> None:
    with_gateway(use_backend)

    outcome = cli("eval", "--agents", "chatty", "--models", "gpt-x", "--backend", "fake")

    assert outcome.exit_code == 1
    assert outcome.stderr.count("\n") == 1 and "gpt-x" in outcome.stderr
    assert not Path("evals").exists()
    assert not Path(contract.HOST_RESULTS_ROOT).exists()


PAID_YAML = MODELS_YAML.replace(
    "  scripted:\n", "  scripted:\n    key_env: SSEBENCH_TEST_UNSET_KEY\n"
)
"""The scripted model with a provider key whose variable this environment lacks."""


class ClusterKeyedBackend(ModelBackend):
    """Its gateway was deployed with the provider keys (as k8s): none is needed here."""

    gateway_keys_from_host = False


@pytest.mark.parametrize("keyed_here", [True, False])
def test_the_provider_key_is_checked_here_only_where_the_gateway_reads_it_from_here(
    home: Path,
    use_backend: Callable[[Backend[Any]], None],
    cli: Cli,
    monkeypatch: pytest.MonkeyPatch,
    keyed_here: bool,
) -> None:
    (home / "models.yaml").write_text(PAID_YAML)
    monkeypatch.delenv("SSEBENCH_MODELS", raising=False)
    monkeypatch.delenv("SSEBENCH_TEST_UNSET_KEY", raising=False)
    gateway = FakeGateway()
    kind = ModelBackend if keyed_here else ClusterKeyedBackend
    use_backend(kind(gateway, built=fake_backend().built))
    refusal = (
        "ssebench: model 'scripted' needs its provider key in the variable "
        "SSEBENCH_TEST_UNSET_KEY, which is not set in this environment\n"
    )

    run = cli(*run_args("--model", "scripted", agent="chatty"))
    evaluation = cli("eval", "--agents", "chatty", "--models", "scripted", "--backend", "fake")

    if keyed_here:
        assert (run.exit_code, run.stderr) == (1, refusal)
        assert (evaluation.exit_code, evaluation.stderr) == (1, refusal)
        assert gateway.opened == [] and not Path(contract.HOST_RESULTS_ROOT).exists()
    else:
        assert run.exit_code == 0, run.stderr
        assert evaluation.exit_code == 0, evaluation.stderr
        assert [models for _, models, _ in gateway.opened] == [["scripted"], ["scripted"]]
        (folder,) = Path("evals").iterdir()
        resumed = cli("eval", "--resume", str(folder))
        assert resumed.exit_code == 0, resumed.stderr
