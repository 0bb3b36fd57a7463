"""`ssebench run --tool-layer NAME`: sandbox runs that build only; refused otherwise before
anything exists (one line, exit status 1, no image, container or results folder)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from ssebench.conformance.fake import FakeBackend
from ssebench.spec import tool_layer_names

from .conftest import run_args, run_dir
from .test_validation import refused

Cli = Callable[..., Result]


def summary() -> dict[str, object]:
    found: dict[str, object] = json.loads((run_dir() / "summary.json").read_text())
    return found


@pytest.mark.parametrize("layer", ["sandbox", "callers", "no-such-layer"])
def test_a_tool_layer_in_sidecar_mode_is_refused_and_nothing_is_created(
    fake: FakeBackend, cli: Cli, layer: str
) -> None:
    line = refused(cli(*run_args("--mode", "sidecar", "--tool-layer", layer)), fake)

    assert line == (
        "--tool-layer is for sandbox mode only: sidecar mode has its own two layers; "
        "leave --tool-layer out or use --mode sandbox"
    )


@pytest.mark.parametrize("how", ["option", "environment"])
def test_a_tool_layer_with_prebuilt_images_is_refused_and_nothing_is_created(
    fake: FakeBackend, cli: Cli, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    if how == "environment":
        monkeypatch.setenv("SSEBENCH_PREBUILT", "1")
    extra = ["--prebuilt"] if how == "option" else []

    line = refused(cli(*run_args(*extra, "--tool-layer", "callers")), fake)

    assert line == (
        "--tool-layer cannot go with --prebuilt (or SSEBENCH_PREBUILT=1): published "
        "images carry the tool layer they were built with"
    )


def test_an_unknown_tool_layer_is_refused_naming_those_installed(
    fake: FakeBackend, cli: Cli
) -> None:
    line = refused(cli(*run_args("--tool-layer", "nope")), fake)

    installed = tool_layer_names()
    assert {"sandbox", "callers"} <= set(installed)
    assert line == f"unknown tool layer 'nope': installed tool layers are {', '.join(installed)}"


def test_a_tool_layer_from_an_extension_reaches_the_backend_and_the_record(
    fake: FakeBackend, cli: Cli
) -> None:
    outcome = cli(*run_args("--tool-layer", "callers"))

    assert outcome.exit_code == 0, outcome.stderr
    (request,) = fake.calls_to("prepare_images")
    layer = request[0].tool_layer
    assert layer is not None and layer.name == "callers"
    assert (Path(layer.context) / layer.dockerfile).is_file()
    config = summary()["config"]
    assert isinstance(config, dict) and config["tool_layer"] == "callers"


@pytest.mark.parametrize("given", [[], ["--tool-layer", "sandbox"]])
def test_the_built_in_layer_is_the_default_and_the_backend_builds_it_its_own_way(
    fake: FakeBackend, cli: Cli, home: Path, given: list[str]
) -> None:
    # `--tool-layer sandbox` resolves the entry point: the home's images/tool/ must be there.
    (home / "images" / "tool").mkdir(parents=True)
    (home / "images" / "tool" / "Dockerfile").write_text("ARG CASE_IMAGE\nFROM ${CASE_IMAGE}\n")

    outcome = cli(*run_args(*given))

    assert outcome.exit_code == 0, outcome.stderr
    (request,) = fake.calls_to("prepare_images")
    assert request[0].tool_layer is None
    config = summary()["config"]
    assert isinstance(config, dict) and config["tool_layer"] == "sandbox"


@pytest.mark.parametrize("extra", [["--mode", "sidecar"], ["--prebuilt"]])
def test_sidecar_and_prebuilt_runs_record_no_tool_layer(
    fake: FakeBackend, cli: Cli, extra: list[str]
) -> None:
    outcome = cli(*run_args(*extra))

    assert outcome.exit_code == 0, outcome.stderr
    config = summary()["config"]
    assert isinstance(config, dict) and config["tool_layer"] is None
