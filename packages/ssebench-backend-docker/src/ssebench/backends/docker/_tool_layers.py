"""A tool layer other than the built-in one, built after it on the task's case image.

    tool-<name>  <registry>/tool-<name>/<task>:<ssebench-daemon version>
                 the layer's own Dockerfile, given CASE_IMAGE, RUNTIME_IMAGE and
                 SANDBOX_IMAGE (the built-in tool layer), all three image IDs

The layer is refused unless its image is built on the case image: the case
image's filesystem layers must be the first of its own. The agent layer is then
built on it exactly as on the built-in one (`_agent_layer.py` takes an image ID),
so what the agent's build may do does not depend on the tool layer.
"""

from __future__ import annotations

from pathlib import Path

import docker
from ssebench.backends.docker._build import BuiltImage, Progress, build_layer, inputs_digest
from ssebench.backends.docker._errors import engine_errors
from ssebench.backends.docker._layers import case_image_name, local_image_id, runtime_image_name
from ssebench.spec import ImageUnavailableError, Task, ToolLayer, registry, runtime_version


def tool_layer_image_name(layer: ToolLayer, task: Task) -> str:
    """`<registry>/tool-<name>/<task>:<ssebench-daemon version>` of a tool layer from an extension.

    Raises:
        ImageUnavailableError: ssebench-daemon is not installed.
    """
    return f"{registry()}/tool-{layer.name}/{task.id.lower()}:{runtime_version()}"


def _filesystem_layers(client: docker.DockerClient, image: str) -> list[str]:
    with engine_errors(f"inspecting the image {image}", family=ImageUnavailableError):
        found = client.images.get(image).attrs.get("RootFS", {}).get("Layers") or []
    return [str(layer) for layer in found]


def build_extension_tool_layer(
    client: docker.DockerClient,
    task: Task,
    layer: ToolLayer,
    sandbox: BuiltImage,
    *,
    force: bool = False,
    progress: Progress,
    platform: str | None = None,
) -> BuiltImage:
    """Build `layer` for `task` after the built-in tool layer `sandbox` (of the same task).

    Args:
        client: the engine.
        task: the task.
        layer: the tool layer, not the built-in one.
        sandbox: the built-in tool layer on the task's case image.
        force: run every step again instead of reusing the engine's cache.
        progress: receives each line of the build's log.
        platform: the `linux/<arch>` to build for; None for the engine's own.

    Returns:
        The tool layer's image.

    Raises:
        ImageUnavailableError: the build failed, or its image is not built on the
            case image (its tag is removed again).
        BackendError: the engine cannot be reached.
    """
    case_id = local_image_id(
        client, case_image_name(task), "build it first (`ssebench build-case`)"
    )
    runtime_id = local_image_id(client, runtime_image_name(), "build it first")
    context = Path(layer.context)
    tag = tool_layer_image_name(layer, task)
    built = build_layer(
        client,
        layer=f"tool-{layer.name}",
        tag=tag,
        context=context,
        dockerfile=layer.dockerfile,
        buildargs={
            "CASE_IMAGE": case_id,
            "RUNTIME_IMAGE": runtime_id,
            "SANDBOX_IMAGE": sandbox.image_id,
        },
        nocache=force,
        inputs=inputs_digest([case_id, runtime_id, sandbox.image_id, layer.dockerfile], context),
        progress=progress,
        platform=platform,
    )
    case_layers = _filesystem_layers(client, case_id)
    if _filesystem_layers(client, built.image_id)[: len(case_layers)] != case_layers:
        with engine_errors(f"removing the tag {tag}"):
            client.images.remove(tag, noprune=True)
        raise ImageUnavailableError(
            f"tool layer {layer.name!r} is not built on the case image of {task.id}: its "
            "Dockerfile must start FROM ${SANDBOX_IMAGE} or ${CASE_IMAGE}"
        )
    return built
