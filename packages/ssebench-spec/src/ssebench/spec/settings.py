"""Every `SSEBENCH_*` environment setting on the host, in one table.

Public module (`ssebench.spec.settings`) because three packages read these
settings and the README documents them (a test checks that it documents each
one). The code that reads a setting takes its name, and its default where the
default is a plain value, from here. Standard library only, like `contract`.

The container's own variables (`SSE_*`, `TIMEOUT`) are part of the container
contract and live in `ssebench.spec.contract`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class Setting:
    """One environment setting: its name, default, meaning and reader."""

    name: str
    """The environment variable, `SSEBENCH_…`."""

    default: str
    """The value in force when the variable is unset or empty (as the README shows it)."""

    meaning: str
    """What it sets, in one line."""

    read_by: str
    """The package that reads it."""


REGISTRY: Final = Setting(
    name="SSEBENCH_REGISTRY",
    default="ssebench",
    meaning="the name prefix of every SSEBench image (a registry host for prebuilt images)",
    read_by="ssebench-spec",
)

BASE_IMAGE: Final = Setting(
    name="SSEBENCH_BASE_IMAGE",
    default="debian:bookworm-slim",
    meaning="the image every case image is built FROM; bootstrapped when missing, never pulled",
    read_by="ssebench-spec",
)

HOME: Final = Setting(
    name="SSEBENCH_HOME",
    default="the nearest parent folder whose pyproject.toml has [tool.ssebench]",
    meaning="the SSEBench home (agents/, datasets/, images/)",
    read_by="ssebench-spec",
)

AGENT_PATH: Final = Setting(
    name="SSEBENCH_AGENT_PATH",
    default="",
    meaning="extra folders holding agents, separated like PATH, searched after <home>/agents",
    read_by="ssebench-spec",
)

BACKEND: Final = Setting(
    name="SSEBENCH_BACKEND",
    default="docker",
    meaning="the container platform when --backend is not given",
    read_by="ssebench-spec",
)

EGRESS: Final = Setting(
    name="SSEBENCH_EGRESS",
    default="restricted",
    meaning="--egress's default: restricted or open",
    read_by="ssebench-runner",
)

CACHE_DIR: Final = Setting(
    name="SSEBENCH_CACHE_DIR",
    default="$XDG_CACHE_HOME/ssebench, else ~/.cache/ssebench",
    meaning="the host-side cache (prepared package trees for the images)",
    read_by="ssebench-backend-docker",
)

DEBIAN_MIRROR: Final = Setting(
    name="SSEBENCH_DEBIAN_MIRROR",
    default="http://deb.debian.org/debian",
    meaning="the Debian mirror the base image is bootstrapped from",
    read_by="ssebench-backend-docker",
)

TOOLS: Final = Setting(
    name="SSEBENCH_TOOLS",
    default="~/.local/share/ssebench",
    meaning="where scripts/setup.sh installs uv; searched when uv is not on PATH",
    read_by="ssebench-backend-docker",
)

PREBUILT: Final = Setting(
    name="SSEBENCH_PREBUILT",
    default="0",
    meaning="--prebuilt's default: 1 runs the published images and builds nothing",
    read_by="ssebench-runner",
)

MODELS: Final = Setting(
    name="SSEBENCH_MODELS",
    default="<home>/models.yaml",
    meaning="the models file: each model a run may use and its provider key's variable",
    read_by="ssebench-spec",
)

PLUGINS: Final = Setting(
    name="SSEBENCH_PLUGINS",
    default="<home>/plugins/plugins.yaml",
    meaning="the plugins file: the plugins a run may choose (their folders beside it)",
    read_by="ssebench-spec",
)

GATEWAY: Final = Setting(
    name="SSEBENCH_GATEWAY",
    default="<registry prefix>-gateway",
    meaning="the model gateway's container; its network, keys file and key store take its name",
    read_by="ssebench-backend-docker",
)

GATEWAY_SECRETS: Final = Setting(
    name="SSEBENCH_GATEWAY_SECRETS",
    default="/run/ssebench-gateway if /run is a tmpfs, else /dev/shm/ssebench-gateway",
    meaning="the tmpfs folder holding the gateway's keys file (root only, never a disk)",
    read_by="ssebench-backend-docker",
)

WEB_ASSETS: Final = Setting(
    name="SSEBENCH_WEB_ASSETS",
    default="packages/ssebench-web/node_modules",
    meaning="the node_modules folder holding the front-end code (xterm.js) `ssebench web` serves",
    read_by="ssebench-web",
)

K8S_NAMESPACE: Final = Setting(
    name="SSEBENCH_K8S_NAMESPACE",
    default="ssebench",
    meaning="the Kubernetes namespace the k8s backend's runs live in",
    read_by="ssebench-backend-k8s",
)

K8S_GATEWAY_NAMESPACE: Final = Setting(
    name="SSEBENCH_K8S_GATEWAY_NAMESPACE",
    default="ssebench-gateway",
    meaning="the Kubernetes namespace of the model gateway (the k8s backend holds one right there)",
    read_by="ssebench-backend-k8s",
)

CATALOG: Final = Setting(
    name="SSEBENCH_CATALOG",
    default="<home>/datasets/demo/manifest.json",
    meaning="the task catalog's manifest `ssebench run` reads without --local or --catalog",
    read_by="ssebench-spec",
)

SETTINGS: Final = (
    REGISTRY,
    BASE_IMAGE,
    HOME,
    AGENT_PATH,
    BACKEND,
    EGRESS,
    PREBUILT,
    CATALOG,
    MODELS,
    PLUGINS,
    CACHE_DIR,
    DEBIAN_MIRROR,
    TOOLS,
    GATEWAY,
    GATEWAY_SECRETS,
    WEB_ASSETS,
    K8S_NAMESPACE,
    K8S_GATEWAY_NAMESPACE,
)
"""Every setting, in the order the README's table lists them."""
