"""Protected paths: the files of a task's tree whose changes by the agent are dropped
before any check (docs/integrity.md: the diff cannot rewrite how it is judged).

A task's `config.yaml` names them as `protected:` globs; without the key the default
of its `language` applies (`DEFAULT_PROTECTED`, justified in docs/tasks.md), and
`protected: []` protects nothing. A glob is matched against a path relative to the
source tree, `/`-separated, the way `.gitignore` matches:

- `*` is any run of characters but `/`, `?` one of them, `[...]` one of a set
  (`[!...]` one outside it); `**` as a whole part is any number of folders.
- A glob without a `/` (but a trailing one) matches a name in any folder
  (`conftest.py`, `*.pth`); a glob with one matches from the tree's top
  (`tests/**`, `src/*/conftest.py`).
- A glob that matches a folder protects everything beneath it (`tests`, `.mvn/`);
  a trailing `/` matches folders only.

Plain constants and `re`: the daemon imports this in the checker for every diff.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

_PYTHON: Final = (
    "conftest.py",
    "pytest.ini",
    ".pytest.ini",
    "tox.ini",
    "setup.cfg",
    "pyproject.toml",
    "noxfile.py",
    "sitecustomize.py",
    "usercustomize.py",
    "*.pth",
)
_C: Final = ("CTestCustom.cmake", "CTestTestfile.cmake", "*.supp")

DEFAULT_PROTECTED: Final[dict[str, tuple[str, ...]]] = {
    "python": _PYTHON,
    "c": _C,
    "c++": _C,
    "go": ("*_test.go",),
    "rust": (".cargo/config", ".cargo/config.toml", "build.rs", "Cargo.toml"),
    "java": ("pom.xml", ".mvn/", "*.gradle", "*.gradle.kts", "gradle.properties"),
    "javascript": (
        "package.json",
        "jest.config.*",
        "vitest.config.*",
        ".mocharc*",
        "karma.conf.*",
        ".npmrc",
    ),
}
"""The test-runner hooks and configuration an agent could add or change to make the
checks pass, per task language (docs/tasks.md says why each is there)."""

MAX_GLOBS: Final = 200
"""Most globs a task may name."""

MAX_GLOB_CHARS: Final = 500
"""Longest glob, in characters."""


class ProtectedGlobError(ValueError):
    """A glob that cannot be used: the message says what is wrong and what is allowed."""


def default_protected(language: str) -> tuple[str, ...]:
    """The globs a task of `language` gets without a `protected:` key (none for a
    language SSEBench knows no test-runner hooks of)."""
    return DEFAULT_PROTECTED.get(language.strip().lower(), ())


def _part_pattern(part: str, glob: str) -> str:
    """The regular expression of one `/`-free part of a glob."""
    out, index = [], 0
    while index < len(part):
        char = part[index]
        if char == "*":
            while index + 1 < len(part) and part[index + 1] == "*":
                index += 1  # `a**b` is `a*b`, as in .gitignore
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            first = index + 2 if part[index + 1 : index + 2] == "!" else index + 1
            end = part.find("]", first + 1)  # a `]` first in the set is one of its characters
            if end < 0:
                raise ProtectedGlobError(f"protected glob {glob!r}: '[' has no closing ']'")
            body = part[index + 1 : end]
            negate = body.startswith("!")
            body = body[1:] if negate else body
            if not body:
                raise ProtectedGlobError(f"protected glob {glob!r}: '[]' matches nothing")
            escaped = body.replace("\\", "\\\\").replace("^", "\\^").replace("[", "\\[")
            out.append(f"[^/{escaped}]" if negate else f"[{escaped}]")
            index = end
        else:
            out.append(re.escape(char))
        index += 1
    return "".join(out)


def _check_shape(glob: str) -> None:
    if not isinstance(glob, str) or not glob.strip():
        raise ProtectedGlobError(
            "a protected glob is empty: name files of the tree, e.g. 'conftest.py'"
        )
    if len(glob) > MAX_GLOB_CHARS:
        raise ProtectedGlobError(
            f"protected glob {glob[:40]!r}...: longer than {MAX_GLOB_CHARS} characters"
        )
    if glob != glob.strip() or any(ord(char) < 0x20 or char == "\x7f" for char in glob):
        raise ProtectedGlobError(
            f"protected glob {glob!r}: no leading or trailing spaces and no control characters"
        )
    if glob.startswith("/"):
        raise ProtectedGlobError(
            f"protected glob {glob!r}: paths are relative to the source tree: write "
            f"{glob.lstrip('/')!r} (a glob with a '/' already matches from the tree's top)"
        )
    if "\\" in glob:
        raise ProtectedGlobError(f"protected glob {glob!r}: use '/' between folders, not '\\'")
    parts = glob.rstrip("/").split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise ProtectedGlobError(
            f"protected glob {glob!r}: no empty, '.' or '..' part: name paths inside the tree"
        )
    if all(set(part) <= {"*"} for part in parts):
        raise ProtectedGlobError(
            f"protected glob {glob!r} protects the whole tree, so no change of the agent "
            "would be graded: name the files that judge a fix (tests, test-runner configuration)"
        )


@dataclass(frozen=True)
class ProtectedGlob:
    """One checked glob and what it matches."""

    text: str
    regex: re.Pattern[str]
    folders_only: bool

    def matches(self, path: str) -> bool:
        """Whether `path` (relative to the tree, `/`-separated) is this glob's or lies
        beneath a folder it matches."""
        parts = path.split("/")
        # A folder the glob matches covers everything beneath it; the path itself counts
        # only for a glob that is not for folders only.
        candidates = ["/".join(parts[:end]) for end in range(1, len(parts))]
        if not self.folders_only:
            candidates.append(path)
        return any(self.regex.fullmatch(candidate) for candidate in candidates)


def compile_glob(glob: str) -> ProtectedGlob:
    """Check a glob and compile it.

    Raises:
        ProtectedGlobError: it is empty, absolute, malformed, leaves the tree or covers
            the whole tree.
    """
    _check_shape(glob)
    folders_only = glob.endswith("/")
    body = glob.rstrip("/")
    parts = body.split("/")
    if len(parts) == 1:
        pattern = "(?:.*/)?" + _part_pattern(parts[0], glob)
    else:
        pieces: list[str] = []
        for number, part in enumerate(parts):
            last = number == len(parts) - 1
            if part == "**":
                pieces.append(".*" if last else "(?:[^/]+/)*")
            else:
                pieces.append(_part_pattern(part, glob) + ("" if last else "/"))
        pattern = "".join(pieces)
    try:
        regex = re.compile(pattern, re.DOTALL)
    except re.error as exc:  # a set such as [z-a]
        raise ProtectedGlobError(f"protected glob {glob!r}: {exc}") from None
    return ProtectedGlob(glob, regex, folders_only)


class ProtectedPaths:
    """A task's protected globs, compiled once."""

    def __init__(self, globs: Iterable[str]) -> None:
        """Raises:
        ProtectedGlobError: a glob cannot be used, or there are more than `MAX_GLOBS`.
        """
        self.globs = tuple(compile_glob(glob) for glob in globs)
        if len(self.globs) > MAX_GLOBS:
            raise ProtectedGlobError(f"{len(self.globs)} protected globs: at most {MAX_GLOBS}")

    def __bool__(self) -> bool:
        return bool(self.globs)

    def covering(self, path: str) -> str | None:
        """The first glob that protects `path`, or None."""
        for glob in self.globs:
            if glob.matches(path):
                return glob.text
        return None

    def split(self, paths: Sequence[str]) -> tuple[list[str], list[str]]:
        """`paths` as (kept, protected), each in the given order."""
        kept: list[str] = []
        dropped: list[str] = []
        for path in paths:
            (dropped if self.covering(path) is not None else kept).append(path)
        return kept, dropped


def listed(paths: Sequence[str], most: int) -> str:
    """Paths as a message names them: the first `most`, then how many more."""
    shown = ", ".join(paths[:most])
    return shown + (f" and {len(paths) - most} more" if len(paths) > most else "")


def protected_paths(protected: Sequence[str] | None, language: str) -> ProtectedPaths:
    """What a task protects: its own list, or its language's default when it has none.

    Raises:
        ProtectedGlobError: a glob cannot be used.
    """
    return ProtectedPaths(default_protected(language) if protected is None else protected)
