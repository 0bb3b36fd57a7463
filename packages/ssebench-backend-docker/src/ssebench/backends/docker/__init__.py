"""The Docker backend: DockerBackend and the image builders it uses."""

from ssebench.backends.docker._backend import DockerBackend
from ssebench.backends.docker._build import BuildLine, BuiltImage, Progress, Step, build_layer
from ssebench.backends.docker._gateway import (
    GATEWAY_ALIAS,
    GATEWAY_PORT,
    DockerGateway,
    GatewayStatus,
    gateway_name,
)
from ssebench.backends.docker._gateway_image import build_gateway_image, gateway_image_name
from ssebench.backends.docker._handle import DockerRunHandle
from ssebench.backends.docker._layers import (
    build_case,
    build_runtime,
    build_tool,
    build_tool_images,
    case_image_name,
    runtime_image_name,
    tool_image_name,
)
from ssebench.backends.docker._wheelhouse import RuntimePackages, prepare_runtime_packages

__all__ = [
    "GATEWAY_ALIAS",
    "GATEWAY_PORT",
    "BuildLine",
    "BuiltImage",
    "DockerBackend",
    "DockerGateway",
    "DockerRunHandle",
    "GatewayStatus",
    "Progress",
    "RuntimePackages",
    "Step",
    "build_case",
    "build_gateway_image",
    "build_layer",
    "build_runtime",
    "build_tool",
    "build_tool_images",
    "case_image_name",
    "gateway_image_name",
    "gateway_name",
    "prepare_runtime_packages",
    "runtime_image_name",
    "tool_image_name",
]
