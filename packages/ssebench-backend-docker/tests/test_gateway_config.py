"""LiteLLM's configuration as the gateway writes it (no engine needed)."""

from __future__ import annotations

import msgspec
import pytest

from ssebench.backends.docker._gateway import gateway_config, gateway_name
from ssebench.spec import BackendError, ModelEntry, ModelsFile


def test_prices_go_to_model_info_so_litellm_registers_them_once_not_per_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SSEBENCH_TEST_KEY", "sk-provider")
    litellm = {
        "model": "openai/m",
        "api_base": "http://upstream/v1",
        "input_cost_per_token": 1e-6,
        "output_cost_per_token": 2e-6,
        "cache_read_input_token_cost": 5e-7,
    }
    models = ModelsFile(
        models={
            "m": ModelEntry(litellm=litellm, key_env="SSEBENCH_TEST_KEY"),
            "free": ModelEntry(litellm={"model": "openai/free"}),
            "keyless": ModelEntry(litellm={"model": "openai/x"}, key_env="SSEBENCH_UNSET_KEY"),
        }
    )
    monkeypatch.delenv("SSEBENCH_UNSET_KEY", raising=False)
    config = gateway_config(models, "sk-master")
    assert config["model_list"] == [
        {
            "model_name": "free",
            "litellm_params": {"model": "openai/free", "num_retries": 2, "timeout": 600.0},
        },
        {
            "model_name": "m",
            "litellm_params": {
                "model": "openai/m",
                "api_base": "http://upstream/v1",
                "api_key": "sk-provider",
                "num_retries": 2,
                "timeout": 600.0,
            },
            "model_info": {
                "input_cost_per_token": 1e-6,
                "output_cost_per_token": 2e-6,
                "cache_read_input_token_cost": 5e-7,
            },
        },
    ]
    assert config["general_settings"]["master_key"] == "sk-master"


def test_a_models_retries_timeout_and_run_limits_reach_the_gateway() -> None:
    models = ModelsFile(
        models={
            "m": ModelEntry(
                litellm={"model": "openai/m"},
                retries=0,
                timeout=30,
                concurrency=2,
                provider_failures=5,
            ),
            # LiteLLM's own parameters, when the file names them, win.
            "own": ModelEntry(litellm={"model": "openai/own", "num_retries": 7}),
        }
    )

    config = gateway_config(models, "sk-master")

    params = {entry["model_name"]: entry["litellm_params"] for entry in config["model_list"]}
    assert (params["m"]["num_retries"], params["m"]["timeout"]) == (0, 30)
    assert params["own"]["num_retries"] == 7
    assert config["ssebench"]["models"] == {
        "m": {"concurrency": 2, "provider_failures": 5},
        "own": {"concurrency": 4, "provider_failures": 3},
    }
    # A failed call must not cool a model down for the other runs of the gateway.
    assert config["router_settings"] == {"disable_cooldowns": True}


@pytest.mark.parametrize(
    ("field", "value"),
    [("retries", -1), ("timeout", 0), ("concurrency", 0), ("provider_failures", 0)],
)
def test_a_models_limits_out_of_range_are_refused(field: str, value: float) -> None:
    with pytest.raises(msgspec.ValidationError, match=field):
        msgspec.convert({"litellm": {"model": "x"}, field: value}, ModelEntry)


def test_the_gateway_is_named_after_the_registry_prefix_unless_ssebench_gateway_names_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SSEBENCH_GATEWAY", raising=False)
    monkeypatch.setenv("SSEBENCH_REGISTRY", "127.0.0.1:5000/team")
    assert gateway_name() == "127.0.0.1-5000-team-gateway"
    monkeypatch.setenv("SSEBENCH_GATEWAY", "ssebench-gateway-gw1")
    assert gateway_name() == "ssebench-gateway-gw1"


@pytest.mark.parametrize("name", ["", "../etc", "a/b", "a..b", "-x", "x" * 64, "x y"])
def test_a_gateway_name_that_is_no_container_name_or_leaves_its_folder_is_one_line(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setenv("SSEBENCH_GATEWAY", name)
    with pytest.raises(BackendError) as raised:
        gateway_name()
    assert str(raised.value).startswith(f"SSEBENCH_GATEWAY={name!r} is not a gateway name: ")
    assert "\n" not in str(raised.value)
