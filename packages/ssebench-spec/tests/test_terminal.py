"""What a run printed, made safe for a terminal: no control characters, a capped length."""

from __future__ import annotations

import re

import pytest

from ssebench.spec import contract
from ssebench.spec.terminal import TerminalFilter, terminal_safe

HOSTILE = (
    "\x1b]0;new window title\x07"  # OSC: set the title
    "\x1b]8;;http://evil.invalid/\x1b\\link\x1b]8;;\x1b\\"  # OSC 8 hyperlink, ST-terminated
    "\x1b[2J\x1b[H"  # CSI: clear the screen, home the cursor
    "\x1b[31;1mred\x1b[0m"  # CSI: colours
    "\x1bPq#0;2;0;0;0\x1b\\"  # DCS (sixel)
    "\x9b6n"  # C1 CSI: ask the terminal to report the cursor
    "\x9d2;title\x9c"  # C1 OSC with C1 ST
    "\x1b7\x1b8\x1bc"  # save/restore cursor, full reset
    "fake\rreal\x08\x07\x00\x7f\x85"  # CR, backspace, bell, NUL, DEL, C1 NEL
    "\ttab stays\n"
)
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def test_escape_sequences_and_control_characters_are_stripped_and_text_kept() -> None:
    assert terminal_safe(HOSTILE) == "linkredfakereal\ttab stays\n"


def test_text_without_control_characters_is_unchanged() -> None:
    text = "grade: failed — PoC 1 of 2 [still] triggers; ünïcode ✓\n\tindented\n"
    assert terminal_safe(text) == text


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64])
def test_sequences_and_characters_split_between_chunks_are_put_back_together(size: int) -> None:
    data = (HOSTILE + "é✓ done\n").encode()
    safe = TerminalFilter(limit=None)
    shown = "".join(safe.feed(data[i : i + size]) for i in range(0, len(data), size))
    shown += safe.finish()
    assert shown == "linkredfakereal\ttab stays\né✓ done\n"


@pytest.mark.parametrize("size", [1, 5, 4096])
def test_no_chunking_lets_a_control_character_through(size: int) -> None:
    # Escape sequences cut anywhere, unfinished ones, invalid UTF-8 and C1 bytes.
    data = (HOSTILE * 3).encode() + b"\x1b[" + b"9" * 500 + b"\xc2\x9b\xff\xfe\x1b]unfinished" * 40
    safe = TerminalFilter(limit=None)
    shown = "".join(safe.feed(data[i : i + size]) for i in range(0, len(data), size))
    shown += safe.finish()
    assert not CONTROL.search(shown)


def test_output_past_the_limit_is_dropped_with_one_marker_line() -> None:
    safe = TerminalFilter(limit=10)
    shown = safe.feed(b"0123456") + safe.feed(b"789abcdef") + safe.feed(b"x" * 100) + safe.finish()
    assert shown == "0123456789\n" + contract.output_cap_line(10, 106)
    assert shown.count(contract.OUTPUT_CAP_MARKER) == 1
    assert contract.output_cap_line(10, 106) == (
        "[ssebench: output capped at 10 bytes; 106 more bytes dropped]\n"
    )


def test_output_within_the_limit_has_no_marker() -> None:
    safe = TerminalFilter(limit=10)
    assert safe.feed(b"0123456789") + safe.finish() == "0123456789"
    assert not safe.capped


def test_the_default_limit_is_the_agents_output_limit() -> None:
    assert TerminalFilter().limit == contract.AGENT_OUTPUT_LIMIT == 16 * 1024 * 1024
