"""Finding backends and commands through entry points, importing only what is chosen."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from ssebench.spec import settings
from ssebench.spec._backend import Backend
from ssebench.spec._errors import UnknownBackendError

if TYPE_CHECKING:
    from importlib import metadata

BACKENDS_GROUP: Final = "ssebench.backends"
"""Entry-point group naming Backend subclasses."""

COMMANDS_GROUP: Final = "ssebench.commands"
"""Entry-point group naming `typer.Typer` apps mounted under `ssebench`."""

BACKEND_ENV: Final = settings.BACKEND.name
"""Environment variable selecting the backend."""

DEFAULT_BACKEND: Final = settings.BACKEND.default
"""The backend used when none is named."""


def distribution_of(entry: metadata.EntryPoint) -> str:
    """The name of the distribution that installed an entry point."""
    dist = entry.dist
    return dist.metadata["Name"] if dist is not None else "an unknown distribution"


def unique_entry_points(group: str) -> dict[str, list[metadata.EntryPoint]]:
    """The entry points of a group by name, an entry seen twice (same target) counted once."""
    # Imported here: the in-container tools import ssebench.spec and never look up entry points.
    from importlib.metadata import entry_points

    found: dict[str, list[metadata.EntryPoint]] = {}
    for entry in entry_points(group=group):
        same_name = found.setdefault(entry.name, [])
        if all(other.value != entry.value for other in same_name):
            same_name.append(entry)
    return found


def get_backend(name: str) -> Backend[Any]:
    """Create the backend registered under `name` (without arguments).

    Only the chosen entry point is imported.

    Raises:
        UnknownBackendError: no backend has that name, several do, it fails to
            import or to start, or it is not a Backend subclass; the message
            names what was found and the distribution that installed it.
    """
    entries = unique_entry_points(BACKENDS_GROUP)
    candidates = entries.get(name, [])
    if not candidates:
        known = ", ".join(sorted(entries)) or "none"
        raise UnknownBackendError(f"unknown backend {name!r}: installed backends are {known}")
    if len(candidates) > 1:
        origins = "; ".join(f"{e.value} from {distribution_of(e)}" for e in candidates)
        raise UnknownBackendError(f"backend {name!r} is registered more than once: {origins}")
    entry = candidates[0]

    def origin() -> str:
        # Only for errors: reading the distribution's metadata costs start-up time.
        return f"backend {name!r} ({entry.value} from {distribution_of(entry)})"

    try:
        loaded = entry.load()
    except Exception as exc:
        raise UnknownBackendError(f"{origin()} failed to import: {exc}") from exc
    if not (isinstance(loaded, type) and issubclass(loaded, Backend)):
        raise UnknownBackendError(f"{origin()} is not a subclass of ssebench.extensions.Backend")
    try:
        return loaded()
    except Exception as exc:
        raise UnknownBackendError(f"{origin()} failed to start: {exc}") from exc
