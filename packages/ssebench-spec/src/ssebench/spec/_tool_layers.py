"""Tool layers: what a sandbox run's image is built with on the case image (docs/architecture.md).

A tool layer is found through the entry-point group `ssebench.tool_layers`:
each entry names a callable taking no arguments that returns a `ToolLayer`,
called only when that layer is chosen (`ssebench run --tool-layer NAME`). The
built-in `sandbox` layer (images/tool/) is the default entry; any other layer
is a Dockerfile built after it, given three build arguments (image IDs):

    CASE_IMAGE     the task's case image
    RUNTIME_IMAGE  the SSEBench runtime (/opt/ssebench)
    SANDBOX_IMAGE  the built-in sandbox layer on that case image

It usually starts `FROM ${SANDBOX_IMAGE}` and adds tools. Whatever it does,
the result must be built on the case image (the Docker backend refuses it
otherwise) and keep the container contract (docs/architecture.md): the checks of
ssebench-conformance (`TOOL_LAYER_CHECKS`, `ssebench tool-layers check NAME`)
prove that for any layer.
Sidecar mode has its own two layers, and prebuilt images carry the layer they
were built with, so neither takes another tool layer.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

from ssebench.spec._base import Message
from ssebench.spec._errors import UnknownToolLayerError

TOOL_LAYERS_GROUP: Final = "ssebench.tool_layers"
"""Entry-point group naming callables that return a `ToolLayer`."""

SANDBOX_TOOL_LAYER: Final = "sandbox"
"""The built-in tool layer (images/tool/), the default of `--tool-layer`."""

TOOL_LAYER_NAME: Final = re.compile(r"[a-z0-9][a-z0-9-]{0,39}")
"""What a tool layer's name may look like: it becomes part of an image's name."""

_RESERVED: Final = frozenset({"base", "sidecar"})
"""Names whose `tool-<name>/<task>` images SSEBench makes itself (the open tool layer,
sidecar mode's task image)."""


class ToolLayer(Message, kw_only=True, frozen=True):
    """A tool layer: a build context whose Dockerfile is built on a task's case image.

    Attributes:
        name: the entry point's name (`--tool-layer NAME`).
        context: the absolute path of the folder sent as the build context.
        dockerfile: the Dockerfile's path inside `context`.
        description: one line for listings.
    """

    name: str
    context: str
    dockerfile: str = "Dockerfile"
    description: str = ""

    @property
    def builtin(self) -> bool:
        """Whether this is the built-in sandbox layer, which builders build their own way."""
        return self.name == SANDBOX_TOOL_LAYER


def sandbox_tool_layer() -> ToolLayer:
    """The built-in `sandbox` tool layer: images/tool/ of the SSEBench home.

    Raises:
        UserError: no SSEBench home is found.
    """
    from ssebench.spec._home import find_home  # here: it reads settings only when needed

    return ToolLayer(
        name=SANDBOX_TOOL_LAYER,
        context=str(find_home() / "images" / "tool"),
        description="SSEBench's own layer: the runtime, the users and the contract's paths",
    )


def tool_layer_names() -> list[str]:
    """The names of the installed tool layers, sorted (nothing is imported)."""
    from ssebench.spec._discovery import unique_entry_points  # here: _images imports this module

    return sorted(unique_entry_points(TOOL_LAYERS_GROUP))


def get_tool_layer(name: str) -> ToolLayer:
    """The tool layer registered under `name`; only its entry point is imported.

    Raises:
        UnknownToolLayerError: no tool layer has that name (the message names the
            installed ones), several do, or its entry fails to import, is not
            callable, fails, or gives something other than a `ToolLayer` of that
            name whose context folder holds its Dockerfile.
    """
    from ssebench.spec._discovery import distribution_of, unique_entry_points

    entries = unique_entry_points(TOOL_LAYERS_GROUP)
    candidates = entries.get(name, [])
    if not candidates:
        known = ", ".join(sorted(entries)) or "none"
        raise UnknownToolLayerError(
            f"unknown tool layer {name!r}: installed tool layers are {known}"
        )
    if len(candidates) > 1:
        origins = "; ".join(f"{e.value} from {distribution_of(e)}" for e in candidates)
        raise UnknownToolLayerError(f"tool layer {name!r} is registered more than once: {origins}")
    entry = candidates[0]
    origin = f"tool layer {name!r} ({entry.value} from {distribution_of(entry)})"
    if TOOL_LAYER_NAME.fullmatch(name) is None or name in _RESERVED:
        raise UnknownToolLayerError(
            f"{origin} has an invalid name: use 1-40 of a-z, 0-9 and '-', starting with a "
            f"letter or digit, other than {' and '.join(sorted(_RESERVED))}"
        )
    try:
        made = entry.load()()
    except Exception as exc:
        raise UnknownToolLayerError(f"{origin} failed to load: {exc}") from exc
    if not isinstance(made, ToolLayer) or made.name != name:
        raise UnknownToolLayerError(
            f"{origin} did not give a ToolLayer named {name!r} (ssebench.extensions.ToolLayer)"
        )
    context = Path(made.context)
    if not context.is_absolute() or not (context / made.dockerfile).is_file():
        raise UnknownToolLayerError(
            f"{origin}: its context {made.context} holds no {made.dockerfile} "
            "(the context must be an absolute folder path)"
        )
    return made
