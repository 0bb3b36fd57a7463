"""An agent's Dockerfile, checked before anything is built.

Integrity rule enforced (docs/integrity.md): an agent's Dockerfile names no image but
its given base. The classic builder resolves any local image that a `FROM` or a
`COPY --from` names, a task's case image (hidden material and all) included, so
an agent's Dockerfile must be:

- `ARG TOOL_IMAGE` (with or without a default, which the build argument always
  overrides) and comments, then exactly one `FROM ${TOOL_IMAGE}` or
  `FROM $TOOL_IMAGE`, optionally `AS <name>`, with no flags;
- after it, only instructions that name no image: no second FROM, no flag on
  COPY or ADD but `--chown` (so no `--from`), no flag on any other instruction;
- none of ONBUILD (its instructions would run in SSEBench's own build on top of
  the agent's), HEALTHCHECK (the engine runs its command as root inside the
  run), VOLUME, ENTRYPOINT (the entrypoint is SSEBench's; the agent command is
  the CMD), nor an instruction the builder does not know.

The file is read the way the engine's parser reads it: a UTF-8 byte-order mark,
parser directives (`# escape=`), comments, line continuations (also across
comment and blank lines), instructions in any case, builder flags with their
quotes and escapes. Where Docker versions read a file differently (whether an
escape directive after `# syntax=` counts; whether an escaped escape character
at the end of a line continues it; which character escapes inside a flag), the
file must pass under every reading, and `--from` is looked for with every quote
and escape character removed.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ssebench.spec import Agent, ImageUnavailableError

ALLOWED: Final = (
    "an agent's Dockerfile builds only on its given base: `ARG TOOL_IMAGE`, then one "
    "`FROM ${TOOL_IMAGE}` (or `$TOOL_IMAGE`, optionally `AS name`), no other FROM, no "
    "--from (COPY and ADD take only --chown), no ONBUILD, HEALTHCHECK, VOLUME or ENTRYPOINT"
)
"""What every refusal ends with."""

BASE_WORDS: Final = ("${TOOL_IMAGE}", "$TOOL_IMAGE")
"""The only images an agent's FROM may name: the build argument SSEBench sets."""

_REFUSED: Final = {
    "onbuild": "its instructions would run in SSEBench's build on top of the agent's",
    "healthcheck": "the engine would run its command as root inside the run",
    "volume": "SSEBench mounts what a run needs",
    "entrypoint": "the entrypoint is SSEBench's; the agent command is the CMD",
}
_ALLOWED_AFTER_FROM: Final = frozenset(
    {"add", "arg", "cmd", "copy", "env", "expose", "label", "maintainer", "run", "shell"}
    | {"stopsignal", "user", "workdir"}
)
_FLAGGED: Final = frozenset({"add", "copy"})
"""Instructions that may carry a flag (`--chown=` only)."""

# Go's unicode.IsSpace, which the parser trims lines and instructions with.
_GO_SPACE: Final = "\t\n\v\f\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000" + "".join(
    chr(code) for code in range(0x2000, 0x200B)
)
# The same test on single bytes, as the builder's flag scanner applies it.
_BYTE_SPACE: Final = frozenset(b"\t\n\v\f\r \x85\xa0")
_WORD_SPACE: Final = re.compile(r"[\t\v\f\r ]+")
_DIRECTIVE: Final = re.compile(
    r"#[\t\n\f\r ]*([a-zA-Z][a-zA-Z0-9]*)[\t\n\f\r ]*=[\t\n\f\r ]*(.+?)[\t\n\f\r ]*\Z"
)
"""A parser directive as newer parsers read it (`syntax`, `escape`, `check`); the Docker
20.10.24 of Debian 12 is one of them."""
_OLD_ESCAPE_DIRECTIVE: Final = re.compile(r"#[ \t]*escape[ \t]*=[ \t]*(.).*\Z")
"""The escape directive as older parsers read it (on the lower-cased line; any other line,
`# syntax=` included, ends the directives)."""
_KNOWN_DIRECTIVES: Final = frozenset({"syntax", "escape", "check"})
_ESCAPES: Final = ("\\", "`")
_ARG_BEFORE_FROM: Final = re.compile(r"TOOL_IMAGE(=\S*)?\Z")


class AgentDockerfileError(ImageUnavailableError):
    """An agent's Dockerfile could name an image other than its base; nothing was built."""


@dataclass(frozen=True)
class Instruction:
    """One instruction as the engine's parser sees it."""

    line: int
    """The file's line (from 1) the instruction starts on."""
    keyword: str
    """Lower case."""
    flags: tuple[bytes, ...]
    args: str
    text: str
    """The whole instruction, continuation lines joined."""


@dataclass(frozen=True)
class Reading:
    """One way a Docker version may read the file."""

    escape: str
    strict_continuation: bool
    """Newer parsers: an escape character preceded by another does not continue the line."""


class _Refusal(Exception):
    def __init__(self, line: int, problem: str) -> None:
        super().__init__(problem)
        self.line = line
        self.problem = problem


def _lstrip(text: str) -> str:
    return text.lstrip(_GO_SPACE)


def _lines(text: str) -> list[str]:
    """The file's lines as the parser scans them: split at LF only, CRs at the end dropped."""
    if text.startswith("\ufeff"):
        text = text[1:]
    return [line.rstrip("\r") for line in text.split("\n")]


def _readings(lines: Sequence[str]) -> list[Reading]:
    """Every way some Docker version reads these lines, the most common first.

    Raises:
        _Refusal: a parser directive no Docker version accepts.
    """
    escapes = [_escape_new(lines), _escape_old(lines)]
    unique = list(dict.fromkeys(escapes))
    return [Reading(escape, strict) for strict, escape in itertools.product((True, False), unique)]


def _escape_new(lines: Sequence[str]) -> str:
    escape, seen = "\\", set[str]()
    for number, line in enumerate(lines, 1):
        match = _DIRECTIVE.match(_lstrip(line))
        if match is None or match[1].lower() not in _KNOWN_DIRECTIVES:
            break
        key = match[1].lower()
        if key in seen:
            raise _Refusal(number, f"a second `{key}` parser directive")
        seen.add(key)
        if key == "escape":
            if match[2] not in _ESCAPES:
                raise _Refusal(number, f"parser directive escape={match[2]!r} (allowed: \\ or `)")
            escape = match[2]
    return escape


def _escape_old(lines: Sequence[str]) -> str:
    escape, seen = "\\", False
    for number, line in enumerate(lines, 1):
        match = _OLD_ESCAPE_DIRECTIVE.match(_lstrip(line).lower())
        if match is None:
            break
        if seen:
            raise _Refusal(number, "a second `escape` parser directive")
        if match[1] not in _ESCAPES:
            raise _Refusal(number, f"parser directive escape={match[1]!r} (allowed: \\ or `)")
        escape, seen = match[1], True
    return escape


def _continuation(reading: Reading) -> re.Pattern[str]:
    token = re.escape(reading.escape)
    if reading.strict_continuation:
        return re.compile(rf"([^{token}]){token}[ \t]*\Z|\A{token}[ \t]*\Z")
    return re.compile(rf"(){token}[ \t]*\Z")


def _trim_continuation(line: str, pattern: re.Pattern[str]) -> tuple[str, bool]:
    """The line without its continuation character, and whether the instruction goes on."""
    match = pattern.search(line)
    if match is None:
        return line, False
    return line[: match.start()] + (match[1] or ""), True


def _is_comment(line: str) -> bool:
    return _lstrip(line).startswith("#")


def _instructions(lines: Sequence[str], reading: Reading) -> Iterator[Instruction]:
    """The instructions of the file, read one way."""
    pattern = _continuation(reading)
    index = 0
    while index < len(lines):
        start = index + 1
        line = _lstrip(lines[index])
        index += 1
        if line.startswith("#"):
            continue
        line, more = _trim_continuation(line, pattern)
        if not more and not line:
            continue
        parts = [line]
        while more and index < len(lines):
            raw = lines[index]
            index += 1
            if _is_comment(raw) or not _lstrip(raw):
                continue
            piece, more = _trim_continuation(raw, pattern)
            parts.append(piece)
        yield _instruction(start, "".join(parts), reading.escape)


def _instruction(line: int, text: str, escape: str) -> Instruction:
    words = _WORD_SPACE.split(text.strip(_GO_SPACE), maxsplit=1)
    rest = words[1] if len(words) == 2 else ""
    args, flags = _builder_flags(rest.encode(errors="surrogateescape"), ord(escape))
    return Instruction(
        line=line,
        keyword=words[0].lower(),
        flags=tuple(flags),
        args=args.decode(errors="surrogateescape").strip(_GO_SPACE),
        text=text,
    )


def _builder_flags(line: bytes, escape: int) -> tuple[bytes, list[bytes]]:
    """The leading `--flag` words of an instruction and the rest, byte by byte like the builder."""
    in_spaces, in_word, in_quote = 0, 1, 2
    words: list[bytes] = []
    word = bytearray()
    phase, quote, blank_ok, position, char = in_spaces, 0, False, 0, 0
    while position <= len(line):
        if position != len(line):
            char = line[position]
        if phase == in_spaces:
            if position == len(line):
                break
            if char in _BYTE_SPACE:
                position += 1
                continue
            if line[position : position + 2] != b"--":
                return line[position:], words
            phase = in_word
        if phase in (in_word, in_quote) and position == len(line):
            if bytes(word) != b"--" and (blank_ok or word):
                words.append(bytes(word))
            break
        if phase == in_word:
            if char in _BYTE_SPACE:
                phase = in_spaces
                if bytes(word) == b"--":
                    return line[position:], words
                if blank_ok or word:
                    words.append(bytes(word))
                word.clear()
                blank_ok = False
                position += 1
                continue
            if char in b"'\"":
                quote, blank_ok, phase = char, True, in_quote
                position += 1
                continue
            if char == escape:
                if position + 1 == len(line):
                    position += 1
                    continue
                position += 1
                char = line[position]
            word.append(char)
            position += 1
            continue
        # In quotes: the closing quote, or an escape ending the line, ends the quote.
        if char == quote or (char == escape and position + 1 == len(line)):
            phase = in_word
        else:
            if char == escape:
                position += 1
                char = line[position]
            word.append(char)
        position += 1
    return b"", words


def _names_another_image(text: str) -> bool:
    """Whether `--from` appears once every quote and escape character is gone (any case)."""
    bare = re.sub(r"[\"'\\`]", "", text).lower()
    return "--from" in bare


def _cut(text: str, limit: int = 60) -> str:
    text = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _check_instructions(found: Sequence[Instruction]) -> None:
    """Refuse instructions that could name an image other than the base (see the module).

    Raises:
        _Refusal: the first instruction that breaks the rule.
    """
    based = False
    for step in found:
        shown = f"`{_cut(step.text)}`"
        if step.keyword == "from":
            if based:
                raise _Refusal(step.line, f"a second FROM {shown}")
            _check_from(step, shown)
            based = True
            continue
        if not based:
            if step.keyword != "arg" or step.flags or not _ARG_BEFORE_FROM.match(step.args):
                raise _Refusal(step.line, f"{shown} before FROM (only ARG TOOL_IMAGE may be)")
            continue
        if step.keyword in _REFUSED:
            raise _Refusal(step.line, f"{shown}: {_REFUSED[step.keyword]}")
        if step.keyword not in _ALLOWED_AFTER_FROM:
            raise _Refusal(step.line, f"{shown}: not an instruction the builder knows")
        if step.keyword in _FLAGGED and _names_another_image(step.text):
            raise _Refusal(step.line, f"{shown} names another image (--from)")
        for flag in step.flags:
            if step.keyword not in _FLAGGED or not flag.startswith(b"--chown="):
                raise _Refusal(step.line, f"{shown}: flag {_cut(flag.decode(errors='replace'))}")
    if not based:
        raise _Refusal(found[-1].line if found else 1, "no FROM")


def _check_from(step: Instruction, shown: str) -> None:
    words = _WORD_SPACE.split(step.args) if step.args else []
    named = len(words) == 1 or (len(words) == 3 and words[1].lower() == "as")
    if step.flags or not named or words[0] not in BASE_WORDS:
        raise _Refusal(step.line, f"{shown} (the base must be ${{TOOL_IMAGE}})")


def check_dockerfile_text(text: str, *, agent: str, path: str) -> None:
    """Check a Dockerfile's text under every reading (see the module).

    Args:
        text: the Dockerfile.
        agent: the agent's name, for the message.
        path: the Dockerfile's path, for the message.

    Raises:
        AgentDockerfileError: the text breaks the rule under some reading; the one-line
            message names the agent, the file and line, and what is allowed.
    """
    lines = _lines(text)
    try:
        for reading in _readings(lines):
            _check_instructions(list(_instructions(lines, reading)))
    except _Refusal as refusal:
        raise AgentDockerfileError(
            f"agent {agent}: {path} line {refusal.line}: {refusal.problem}; {ALLOWED}"
        ) from None


def check_agent_dockerfile(agent: Agent) -> None:
    """Refuse an agent whose Dockerfile could name an image other than its given base.

    Args:
        agent: the agent; its folder's `Dockerfile` is read.

    Raises:
        AgentDockerfileError: the Dockerfile cannot be read or breaks the rule.
    """
    path = Path(agent.folder) / "Dockerfile"
    try:
        text = path.read_bytes().decode(errors="surrogateescape")
    except OSError as exc:
        raise AgentDockerfileError(
            f"agent {agent.name}: cannot read {path}: {exc.strerror or exc}"
        ) from exc
    check_dockerfile_text(text, agent=agent.name, path=str(path))
