"""Tool layers are found through `ssebench.tool_layers`; a broken one is refused in one line."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ssebench.spec import (
    SANDBOX_TOOL_LAYER,
    TOOL_LAYERS_GROUP,
    UnknownToolLayerError,
    UserError,
    find_home,
    get_tool_layer,
    tool_layer_names,
)

LAYERS = """
from pathlib import Path
from ssebench.extensions import ToolLayer

CONTEXT = Path(__file__).resolve().parent / "good-layer"
CALLS = []

def good():
    CALLS.append("good")
    return ToolLayer(name="good", context=str(CONTEXT), description="a good one")

def misnamed():
    return ToolLayer(name="other", context=str(CONTEXT))

def relative():
    return ToolLayer(name="relative", context="good-layer")

def empty():
    return ToolLayer(name="empty", context=str(CONTEXT.parent))

def failing():
    raise RuntimeError("no luck")

NOT_A_LAYER = {"name": "dict"}
"""


@pytest.fixture
def layers(install_distribution: Callable[..., None], tmp_path: Path) -> Iterator[None]:
    sys.modules.pop("fake_layers", None)
    install_distribution(
        name="fake-layers-one",
        entry_points={
            TOOL_LAYERS_GROUP: {
                "good": "fake_layers:good",
                "misnamed": "fake_layers:misnamed",
                "relative": "fake_layers:relative",
                "empty": "fake_layers:empty",
                "failing": "fake_layers:failing",
                "not-callable": "fake_layers:NOT_A_LAYER",
                "missing": "fake_layers_module_that_does_not_exist:layer",
                "Bad_Name": "fake_layers:good",
                "sidecar": "fake_layers:good",
                "twice": "fake_layers:good",
            }
        },
        modules={"fake_layers.py": LAYERS},
    )
    install_distribution(
        name="fake-layers-two",
        entry_points={TOOL_LAYERS_GROUP: {"twice": "fake_other:layer"}},
        modules={},
    )
    context = tmp_path / "dist-fake-layers-one" / "good-layer"
    context.mkdir()
    (context / "Dockerfile").write_text("ARG SANDBOX_IMAGE\nFROM ${SANDBOX_IMAGE}\n")
    yield
    sys.modules.pop("fake_layers", None)


def test_the_built_in_sandbox_layer_is_an_entry_point_of_ssebench_spec() -> None:
    layer = get_tool_layer(SANDBOX_TOOL_LAYER)

    assert layer.builtin
    assert Path(layer.context) == find_home() / "images" / "tool"
    assert (Path(layer.context) / layer.dockerfile).is_file()


@pytest.mark.usefixtures("layers")
def test_a_registered_layer_is_loaded_only_when_chosen() -> None:
    assert "good" in tool_layer_names()
    assert "fake_layers" not in sys.modules, "listing imports nothing"

    layer = get_tool_layer("good")

    import fake_layers  # type: ignore[import-not-found]

    assert fake_layers.CALLS == ["good"]
    assert (layer.name, layer.description, layer.builtin) == ("good", "a good one", False)


@pytest.mark.usefixtures("layers")
def test_an_unknown_layer_names_the_installed_ones() -> None:
    with pytest.raises(UnknownToolLayerError) as caught:
        get_tool_layer("nope")

    message = str(caught.value)
    assert message.startswith("unknown tool layer 'nope': installed tool layers are ")
    assert ", ".join(tool_layer_names()) in message
    assert "good" in message and "sandbox" in message
    assert isinstance(caught.value, UserError) and "\n" not in message


@pytest.mark.usefixtures("layers")
def test_a_layer_registered_twice_names_both_distributions() -> None:
    with pytest.raises(UnknownToolLayerError, match="registered more than once") as caught:
        get_tool_layer("twice")
    assert "fake-layers-one" in str(caught.value) and "fake-layers-two" in str(caught.value)


@pytest.mark.usefixtures("layers")
@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("misnamed", "did not give a ToolLayer named 'misnamed'"),
        ("not-callable", "failed to load"),
        ("failing", "failed to load: no luck"),
        ("missing", "failed to load"),
        ("relative", "holds no Dockerfile (the context must be an absolute folder path)"),
        ("empty", "holds no Dockerfile"),
        ("Bad_Name", "has an invalid name: use 1-40 of a-z, 0-9 and '-'"),
        ("sidecar", "starting with a letter or digit, other than base and sidecar"),
    ],
)
def test_a_broken_layer_is_refused_in_one_line_naming_its_distribution(
    name: str, says: str
) -> None:
    with pytest.raises(UnknownToolLayerError) as caught:
        get_tool_layer(name)

    message = str(caught.value)
    assert message.startswith(f"tool layer {name!r} (")
    assert "from fake-layers-one" in message
    assert says in message
    assert "\n" not in message
