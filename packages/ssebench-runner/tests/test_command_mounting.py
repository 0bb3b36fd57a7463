from __future__ import annotations

import sys
from collections.abc import Callable, Iterator

import pytest
from typer.testing import CliRunner

from ssebench.runner.cli import app, installed_packages
from ssebench.spec import COMMANDS_GROUP

GREETER = """
import typer

app = typer.Typer()
IMPORTED = True

@app.command()
def hello(name: str = "world") -> None:
    print(f"hello {name}")

@app.command()
def bye() -> None:
    print("bye")

not_a_typer = object()
"""


@pytest.fixture
def extensions(install_distribution: Callable[..., None]) -> Iterator[None]:
    sys.modules.pop("fake_greeter", None)
    install_distribution(
        name="fake-greeter",
        entry_points={
            COMMANDS_GROUP: {
                "greet": "fake_greeter:app",
                "broken": "fake_missing_module:app",
                "odd": "fake_greeter:not_a_typer",
            }
        },
        modules={"fake_greeter.py": GREETER},
    )
    yield
    sys.modules.pop("fake_greeter", None)


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.usefixtures("extensions")
def test_an_extension_command_is_mounted_under_its_entry_name() -> None:
    code, out, _ = invoke("greet", "hello", "--name", "tests")
    assert (code, out) == (0, "hello tests\n")


@pytest.mark.usefixtures("extensions")
def test_listing_the_commands_imports_no_extension() -> None:
    code, out, err = invoke("--help")
    assert code == 0
    assert "greet" in out
    assert "(from fake-greeter)" in out
    assert "fake_greeter" not in sys.modules
    assert err == ""


@pytest.mark.usefixtures("extensions")
def test_a_broken_extension_is_reported_and_the_others_still_work() -> None:
    code, _, err = invoke("broken")
    assert code != 0
    assert "command 'broken' (fake_missing_module:app from fake-greeter) failed to import" in err
    code, out, _ = invoke("greet", "bye")
    assert (code, out) == (0, "bye\n")


@pytest.mark.usefixtures("extensions")
def test_an_extension_that_is_not_a_typer_app_is_reported() -> None:
    code, _, err = invoke("odd")
    assert code != 0
    assert "is not a typer.Typer and is skipped" in err


def test_version_lists_every_installed_ssebench_package() -> None:
    code, out, _ = invoke("--version")
    assert code == 0
    names = [line.split()[0] for line in out.splitlines()]
    assert names == [name for name, _ in installed_packages()]
    assert {"ssebench-spec", "ssebench-runner", "ssebench-daemon"} <= set(names)
