"""Text from a run made safe for a terminal: control characters stripped, length capped.

Integrity rule (docs/integrity.md, "What reaches the host is tamed"): output the
agent could influence reaches the user's terminal without control characters
— no escape sequences (CSI, OSC, DCS, ...), no other C0 or C1 character but
newline and tab (carriage returns, backspaces and bells are gone too) — and
capped, with one marker line saying how much was dropped. Files in the run
directory keep the output as it was (up to their own caps); only what goes
to a terminal is filtered.

Public module (`ssebench.spec.terminal`): every backend that streams a run's
output and every command that prints it use the same filter.
"""

from __future__ import annotations

import codecs
import re
from typing import Final

from ssebench.spec import contract

_STRING_BODY: Final = r"[^\x07\x1b\x90\x98\x9b\x9c\x9d\x9e\x9f]*"
"""What an OSC/DCS/... string carries; it stops at any introducer, so nothing is rescanned."""

_SEQUENCE: Final = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"  # CSI: parameters, final byte
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])"  # OSC, DCS, SOS, PM, APC strings,
    + _STRING_BODY
    + r"(?:\x07|\x1b\\|\x9c)"  # ended by BEL or ST
    r"|\x1b[ -/]*[0-~]"  # every other escape sequence
)
"""Whole escape sequences, removed with what they carry (a window title, a hyperlink)."""

_CONTROL: Final = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""Every C0 and C1 control character and DEL, except tab and newline."""

_UNFINISHED: Final = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])" + _STRING_BODY + r"\x1b?"
    r"|\x1b[ -/]*"
)
"""An escape sequence cut off by the end of a chunk (a string's ST may be half there)."""

_MAX_HELD: Final = 256
"""An unfinished sequence longer than this is not held back for the next chunk."""

_INTRODUCERS: Final = "\x1b\x9b\x90\x98\x9d\x9e\x9f"


def _unfinished_start(text: str) -> int:
    """Where an escape sequence cut off by the end of `text` starts (`len(text)`: none).

    Only the last `_MAX_HELD` characters are searched; the earliest introducer
    there whose sequence runs unfinished to the end wins (an OSC string whose
    ST is half there starts before the ESC that ends the text).
    """
    for start in range(max(0, len(text) - _MAX_HELD), len(text)):
        if text[start] in _INTRODUCERS and _UNFINISHED.fullmatch(text, start) is not None:
            return start
    return len(text)


def terminal_safe(text: str) -> str:
    """`text` without escape sequences and control characters (newline and tab kept).

    Args:
        text: anything a run may have written.

    Returns:
        The text as a terminal may show it.
    """
    return _CONTROL.sub("", _SEQUENCE.sub("", text))


class TerminalFilter:
    """Turns a byte stream into terminal-safe text, chunk by chunk, capped at `limit` bytes.

    UTF-8 characters and escape sequences split between chunks are put back
    together (invalid UTF-8 becomes U+FFFD). Past `limit` bytes of input the
    rest is dropped and counted; `finish` then ends the text with one marker
    line (`contract.output_cap_line`).
    """

    def __init__(self, limit: int | None = contract.AGENT_OUTPUT_LIMIT) -> None:
        """A filter that passes at most `limit` bytes of input (None: no cap)."""
        self.limit = limit
        self.passed = 0
        self.dropped = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._held = ""
        self._last = "\n"

    @property
    def capped(self) -> bool:
        """Whether input was dropped."""
        return self.dropped > 0

    def feed(self, data: bytes) -> str:
        """The safe text of one more chunk (part of it may be held for the next)."""
        if self.limit is not None:
            room = max(0, self.limit - self.passed)
            self.dropped += max(0, len(data) - room)
            data = data[:room]
        self.passed += len(data)
        text = self._held + self._decoder.decode(data)
        start = _unfinished_start(text)
        text, self._held = text[:start], text[start:]
        return self._emit(terminal_safe(text))

    def finish(self) -> str:
        """The rest of the text, and the marker line if input was dropped."""
        text = terminal_safe(self._held + self._decoder.decode(b"", final=True))
        self._held = ""
        if self.capped and self.limit is not None:
            if not (text or self._last).endswith("\n"):
                text += "\n"
            text += contract.output_cap_line(self.limit, self.dropped)
        return self._emit(text)

    def _emit(self, text: str) -> str:
        if text:
            self._last = text[-1]
        return text
