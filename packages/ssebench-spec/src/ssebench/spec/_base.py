"""Base Structs every SSEBench type derives from."""

from __future__ import annotations

import msgspec


class Message(msgspec.Struct, kw_only=True, frozen=True):
    """A value that crosses a process or package boundary.

    Unknown fields are ignored on decode, so an older and a newer SSEBench can
    still read each other's messages.
    """


class UserInput(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """A file a person writes (task configs, agent.yaml, dataset.yaml).

    Unknown keys are rejected: a typo must not silently change what runs.
    """
