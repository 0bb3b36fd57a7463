"""`ssebench images prune`: remove the SSEBench images no current input needs.

Only images of the active `SSEBENCH_REGISTRY` prefix are touched: those named
under it, and the unnamed ones whose `REGISTRY_LABEL` says they were built
under it (a rebuild takes the name of a layer whose inputs changed and leaves
the old image unnamed). Several users or checkouts can share one engine under
different prefixes, and none prunes another's.

A named image is needed when its tag is the current version of what it holds:
the ssebench-daemon version for the runtime and the tool layers (also those of
extensions, `tool-<name>`), the agent's
version (from its agent.yaml) for agent layers. Case images, agents this home
does not know and names of other shapes are kept: nothing says they are stale.
Removing a name deletes the image only when no other name holds it, and the
engine then deletes its unnamed parents with it. An image a container uses is
kept and reported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import docker
from ssebench.backends.docker._build import REGISTRY_LABEL
from ssebench.backends.docker._errors import engine_errors
from ssebench.backends.docker._prepare import split_tag
from ssebench.spec import (
    ImageUnavailableError,
    Message,
    PlatformNotFoundError,
    PlatformRefusedError,
    registry,
)

_RUNTIME_KINDS: Final = frozenset({"runtime", "tool", "tool-base", "tool-sidecar"})
"""Names (their first part after the prefix) tagged with the ssebench-daemon version."""
_TOOL_LAYER_KIND: Final = "tool-"
"""A tool layer from an extension (`tool-<name>`) is tagged with the daemon version too."""


class Pruned(Message, frozen=True, kw_only=True):
    """One image `images prune` removed (or would), as `--json` prints it."""

    image: str
    """A name it had, or its ID when it had none."""
    id: str
    reason: str
    size: int
    """Bytes its removal frees (its layers no other image shares)."""
    removed: bool
    error: str | None = None


@dataclass
class PruneReport:
    """What prune found: the images and the bytes freed (or that would be)."""

    images: list[Pruned] = field(default_factory=list)

    @property
    def freed(self) -> int:
        return sum(image.size for image in self.images if image.removed)

    @property
    def would_free(self) -> int:
        return sum(image.size for image in self.images if image.error is None)


def stale_reason(
    name: str, prefix: str, daemon_version: str, agent_versions: Mapping[str, str]
) -> str | None:
    """Why the image name `name` under `prefix` is no longer needed, or None if it is."""
    repository, tag = split_tag(name)
    parts = repository.removeprefix(prefix + "/").split("/")
    kind = parts[0]
    if kind in _RUNTIME_KINDS or kind.startswith(_TOOL_LAYER_KIND):
        if tag != daemon_version:
            return f"runtime {tag}, the current one is {daemon_version}"
        return None
    agent = parts[1] if kind == "agent-stage" and len(parts) > 1 else kind.removeprefix("agent-")
    if kind.startswith("agent-") and agent in agent_versions and tag != agent_versions[agent]:
        return f"agent {agent} {tag}, the current version is {agent_versions[agent]}"
    return None


def _sizes(client: docker.DockerClient) -> dict[str, int]:
    """Each image's bytes no other image shares (the engine's disk usage report)."""
    with engine_errors("asking the Docker engine for its disk usage"):
        usage: dict[str, Any] = client.df()
    return {
        str(entry["Id"]): max(int(entry.get("Size") or 0) - int(entry.get("SharedSize") or 0), 0)
        for entry in usage.get("Images") or []
    }


def prune_images(
    client: docker.DockerClient,
    agent_versions: Mapping[str, str],
    daemon_version: str,
    *,
    dry_run: bool,
) -> PruneReport:
    """Remove (or with `dry_run` list) the active prefix's images that nothing needs.

    Args:
        client: the engine.
        agent_versions: the current version of every agent this home knows, by name.
        daemon_version: the installed ssebench-daemon version.
        dry_run: remove nothing.

    Raises:
        BackendError: the engine cannot be reached.
    """
    prefix = registry()
    sizes = _sizes(client)
    report = PruneReport()
    with engine_errors("listing images"):
        # The engine's summaries, not the SDK's images: it inspects each one listed, and
        # one that another process removed meanwhile failed the whole listing.
        summaries: list[dict[str, Any]] = client.api.images()
    for summary in summaries:
        image_id = str(summary["Id"])
        tags = [tag for tag in summary.get("RepoTags") or [] if tag != "<none>:<none>"]
        ours = [tag for tag in tags if tag.startswith(prefix + "/")]
        if not tags and (summary.get("Labels") or {}).get(REGISTRY_LABEL) == prefix:
            stale = {image_id: "unnamed: a rebuild replaced it"}
        else:
            reasons = {
                tag: stale_reason(tag, prefix, daemon_version, agent_versions) for tag in ours
            }
            stale = {tag: reason for tag, reason in reasons.items() if reason is not None}
        if not stale:
            continue
        # The image goes only when every name it has goes; otherwise just the stale names.
        whole = len(stale) == max(len(tags), 1)
        size = sizes.get(image_id, 0) if whole else 0
        for index, (name, reason) in enumerate(sorted(stale.items())):
            entry = Pruned(
                image=name,
                id=image_id,
                reason=reason,
                size=size if index == len(stale) - 1 else 0,
                removed=False,
            )
            if not dry_run:
                entry = _remove(client, entry)
            report.images.append(entry)
    return report


def _remove(client: docker.DockerClient, entry: Pruned) -> Pruned:
    try:
        with engine_errors(f"removing {entry.image}"):
            client.images.remove(entry.image, noprune=False)
    except (PlatformRefusedError, PlatformNotFoundError, ImageUnavailableError) as exc:
        # In use by a container, or gone meanwhile: kept, and said.
        return Pruned(
            image=entry.image,
            id=entry.id,
            reason=entry.reason,
            size=entry.size,
            removed=False,
            error=str(exc),
        )
    return Pruned(
        image=entry.image, id=entry.id, reason=entry.reason, size=entry.size, removed=True
    )
