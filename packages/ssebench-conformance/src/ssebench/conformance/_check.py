"""What a check is, and the optional abilities a backend may offer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, get_args

from ssebench.spec import Backend

if TYPE_CHECKING:
    from ssebench.conformance._harness import Harness

Capability = Literal["endpoint", "exec"]
"""An optional ability of a backend: reaching a run's ports, running commands in a run."""

CAPABILITIES: frozenset[Capability] = frozenset(get_args(Capability))

_METHODS: dict[Capability, str] = {"endpoint": "endpoint", "exec": "exec_argv"}


def capabilities(backend: Backend[Any] | type[Backend[Any]]) -> frozenset[Capability]:
    """The optional abilities a backend offers, found one way: the methods it overrides.

    `Backend.endpoint` and `Backend.exec_argv` raise BackendError; a backend
    offers an ability exactly when its class replaces that default. (The
    `supports_exec` flag must agree; a check says so.)
    """
    cls = backend if isinstance(backend, type) else type(backend)
    return frozenset(
        ability
        for ability, method in _METHODS.items()
        if getattr(cls, method) is not getattr(Backend, method)
    )


@dataclass(frozen=True)
class Check:
    """One behaviour every backend must show, named by its function (a sentence).

    Attributes:
        run: the check itself; raises AssertionError (or any error) when the
            backend misbehaves.
        needs: abilities the backend must offer for the check to apply.
        lacks: abilities the backend must not offer (a check of the refusal).
        engine: the check needs a real engine: real processes, ports and
            networks (the probe's serve and connect modes, a local command).
            The rest is the engine-free part, which the fake backend passes.
    """

    run: Callable[[Harness], None]
    needs: frozenset[Capability] = field(default_factory=frozenset)
    lacks: frozenset[Capability] = field(default_factory=frozenset)
    engine: bool = False

    @property
    def name(self) -> str:
        """The check's name: its function's, a sentence with underscores."""
        return self.run.__name__

    def applies_to(self, offered: frozenset[Capability]) -> bool:
        """Whether the check applies to a backend offering `offered`."""
        return self.needs <= offered and not self.lacks & offered

    def why_not(self, backend: str, offered: frozenset[Capability]) -> str:
        """Why the check does not apply to a backend (for a skip's reason)."""
        missing = ", ".join(sorted(self.needs - offered))
        present = ", ".join(sorted(self.lacks & offered))
        if missing:
            return f"the {backend} backend does not offer {missing}"
        return f"the {backend} backend offers {present}; this checks a backend without it"
