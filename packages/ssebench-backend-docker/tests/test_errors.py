"""The Docker backend's one error boundary, proven: every exception of the libraries below is
translated to the most specific SSEBench error, and nothing calls the SDK around it.

The classes are found by walking the modules (docker.errors, requests.exceptions and
urllib3.exceptions, whose errors the SDK's raw stream reads let through), so a class a
new release adds is checked without anyone listing it.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from types import ModuleType

import docker.errors
import pytest
import requests.exceptions
import urllib3.exceptions

from ssebench.backends.docker import _errors
from ssebench.backends.docker._errors import (
    TRANSLATIONS,
    CopyFromImageError,
    error_class,
    translate,
)
from ssebench.spec import (
    BackendError,
    ImageUnavailableError,
    PlatformNotFoundError,
    PlatformRefusedError,
    PlatformTimeoutError,
    PlatformUnavailableError,
    SSEBenchError,
)

SDK_MODULES: tuple[ModuleType, ...] = (docker.errors, requests.exceptions, urllib3.exceptions)

PACKAGE = Path(_errors.__file__).parent


def sdk_exceptions() -> list[type[BaseException]]:
    """Every exception class the three modules define (warnings are not raised).

    What they only import from elsewhere (json's JSONDecodeError, http.client's
    IncompleteRead) is not theirs: the SDK raises its own classes around those.
    """
    return [
        value
        for module in SDK_MODULES
        for _, value in inspect.getmembers(module, inspect.isclass)
        if value.__module__ == module.__name__
        and issubclass(value, Exception)
        and not issubclass(value, Warning)
    ]


def meaning(cls: type[BaseException]) -> type[SSEBenchError]:
    """What an SDK error means for SSEBench, stated apart from the boundary's table."""
    cannot_have_the_image = (
        docker.errors.ImageNotFound,
        docker.errors.BuildError,
        docker.errors.ImageLoadError,
    )
    if issubclass(cls, cannot_have_the_image):
        return ImageUnavailableError
    if issubclass(cls, docker.errors.NotFound):
        return PlatformNotFoundError  # the engine has no such object
    if issubclass(cls, requests.exceptions.HTTPError):
        return PlatformRefusedError  # the engine answered, with an error status
    if issubclass(cls, requests.exceptions.Timeout | urllib3.exceptions.ReadTimeoutError):
        return PlatformTimeoutError
    if issubclass(cls, requests.exceptions.ConnectionError):
        return PlatformUnavailableError
    return BackendError


def bare(cls: type[BaseException]) -> BaseException:
    """An instance of `cls`, its constructor aside (their signatures differ widely)."""
    return cls.__new__(cls)


def name(cls: type[BaseException]) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def test_the_walk_finds_the_classes_the_boundary_is_about() -> None:
    found = sdk_exceptions()
    assert len(found) > 60, len(found)
    for cls in (
        docker.errors.APIError,
        requests.exceptions.ReadTimeout,
        urllib3.exceptions.HTTPError,
    ):
        assert cls in found


@pytest.mark.parametrize("cls", sdk_exceptions(), ids=name)
def test_every_exception_of_the_sdk_becomes_the_most_specific_ssebench_error(
    cls: type[BaseException],
) -> None:
    assert error_class(bare(cls)) is meaning(cls)


def test_every_line_of_the_table_decides_for_some_exception() -> None:
    """Deleting any line changes the answer for some class, so the test above fails."""
    classes = sdk_exceptions()

    def first_match(table: tuple[tuple[type[BaseException], type[SSEBenchError]], ...]) -> dict:
        return {
            cls: next((ours for sdk, ours in table if issubclass(cls, sdk)), None)
            for cls in classes
        }

    complete = first_match(TRANSLATIONS)
    for index, (sdk, ours) in enumerate(TRANSLATIONS):
        without = first_match(TRANSLATIONS[:index] + TRANSLATIONS[index + 1 :])
        changed = [cls for cls in classes if without[cls] != complete[cls]]
        assert changed, f"the line {sdk.__name__} -> {ours.__name__} decides nothing"


def test_a_connection_error_around_a_read_timeout_is_a_timeout() -> None:
    read_timeout = urllib3.exceptions.ReadTimeoutError(None, "/containers/x/wait", "timed out")  # type: ignore[arg-type]
    assert error_class(requests.exceptions.ConnectionError(read_timeout)) is PlatformTimeoutError
    retried = urllib3.exceptions.MaxRetryError(None, "/x", reason=read_timeout)  # type: ignore[arg-type]
    assert error_class(requests.exceptions.ConnectionError(retried)) is PlatformTimeoutError
    aborted = urllib3.exceptions.ProtocolError("Connection aborted.")
    assert error_class(requests.exceptions.ConnectionError(aborted)) is PlatformUnavailableError


def test_anything_else_is_not_the_boundarys_to_translate() -> None:
    assert error_class(ValueError("ours")) is None
    with pytest.raises(TypeError):
        translate(KeyError("ours"), "doing it")


def test_an_operation_keeps_the_family_it_promises() -> None:
    missing_image = docker.errors.ImageNotFound("No such image: x")
    assert type(translate(missing_image, "starting run r1", family=BackendError)) is BackendError
    copied = translate(missing_image, "copying /f out of x", family=CopyFromImageError)
    assert type(copied) is CopyFromImageError
    assert isinstance(copied, RuntimeError)
    gone = docker.errors.NotFound("No such container: c")
    assert type(translate(gone, "stopping run r1", family=BackendError)) is PlatformNotFoundError


def test_the_message_names_the_operation_and_the_engines_words_without_a_secret() -> None:
    secret = "sk-planted-0123456789"
    refused = docker.errors.APIError(
        "500 Server Error", explanation=f"invalid environment value {secret}"
    )
    error = translate(refused, "starting run r1", secrets=[secret])
    assert str(error) == "starting run r1 failed: invalid environment value <redacted>"
    assert isinstance(error, PlatformRefusedError)


# -- the boundary is the only place ------------------------------------------------------------

FOREIGN = ("docker.errors", "requests", "urllib3")


def modules() -> list[Path]:
    return sorted(PACKAGE.glob("*.py"))


@pytest.mark.parametrize("path", modules(), ids=lambda path: path.name)
def test_only_the_boundary_names_the_sdks_exceptions(path: Path) -> None:
    if path.name == "_errors.py":
        return
    source = path.read_text()
    tree = ast.parse(source)
    imported = [
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    ] + [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    assert not [name for name in imported if name.startswith(FOREIGN)]
    assert "docker.errors" not in source


def _root(node: ast.expr) -> ast.expr:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node


def _is_sdk_call(node: ast.AST) -> bool:
    """A call on the client (`client.api.stop(...)`) or on the SDK's module (`docker.from_env()`).

    `docker.utils` helpers only parse strings and talk to no engine.
    """
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return False
    root = _root(node.func)
    if not isinstance(root, ast.Name) or root.id not in ("client", "docker"):
        return False
    return not ast.unparse(node.func).startswith("docker.utils.")


def _in_boundary(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.With | ast.AsyncWith):
            for item in node.items:
                call = item.context_expr
                if isinstance(call, ast.Call) and ast.unparse(call.func) == "engine_errors":
                    return True
    return False


def _function_of(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> ast.FunctionDef | None:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.FunctionDef):
            return node
    return None


def _covered(
    node: ast.AST, parents: dict[ast.AST, ast.AST], tree: ast.Module, depth: int = 0
) -> bool:
    """Inside `with engine_errors(...)`, or in a helper every caller in the module calls there."""
    if _in_boundary(node, parents):
        return True
    function = _function_of(node, parents)
    if function is None or depth > 3:
        return False
    callers = [
        call
        for call in ast.walk(tree)
        if isinstance(call, ast.Call) and ast.unparse(call.func).split(".")[-1] == function.name
    ]
    return bool(callers) and all(_covered(call, parents, tree, depth + 1) for call in callers)


@pytest.mark.parametrize("path", modules(), ids=lambda path: path.name)
def test_every_call_into_the_sdk_runs_inside_the_boundary(path: Path) -> None:
    tree = ast.parse(path.read_text())
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    outside = [
        f"line {node.lineno}: {ast.unparse(node.func)}"  # type: ignore[attr-defined]
        for node in ast.walk(tree)
        if _is_sdk_call(node) and not _covered(node, parents, tree)
    ]
    assert outside == []


def test_the_static_check_sees_a_call_outside_the_boundary() -> None:
    tree = ast.parse(
        "def f(client):\n"
        "    client.api.stop('c')\n"
        "    with engine_errors('x'):\n"
        "        client.api.start('c')\n"
    )
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    calls = [node for node in ast.walk(tree) if _is_sdk_call(node)]
    assert [_covered(call, parents, tree) for call in calls] == [False, True]
