"""One log file per check in the results directory: each command, its exit code and output."""

from __future__ import annotations

import os
from pathlib import Path

from ssebench.daemon.server._procs import RunOutput


class CheckLog:
    """The log of one check: `check-<n>-<action>.log`, written as the check goes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        os.close(fd)

    def note(self, text: str) -> None:
        """Add a line of the daemon's own."""
        with self.path.open("a", encoding="utf-8") as log:
            log.write(f"# {text}\n")

    def command(self, label: str, output: RunOutput) -> None:
        """Add one command's record."""
        status = "timed out" if output.timed_out else f"exit code {output.code}"
        lines = [
            f"## {label}",
            f"$ {' '.join(output.argv)}",
            f"# {status} after {output.seconds:.2f} s",
            "# stdout"
            + (f" (first {output.stdout.limit} bytes kept)" if output.stdout.truncated else ""),
            output.stdout.text(),
            "# stderr"
            + (f" (first {output.stderr.limit} bytes kept)" if output.stderr.truncated else ""),
            output.stderr.text(),
            "",
        ]
        with self.path.open("a", encoding="utf-8") as log:
            log.write("\n".join(lines))


class ResultsLog:
    """Numbers checks and opens their logs in the results directory."""

    def __init__(self, results_dir: Path) -> None:
        self.results_dir = results_dir
        self._count = 0

    def next(self, action: str) -> tuple[int, CheckLog]:
        """A new check number and its log."""
        self._count += 1
        self.results_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = self.results_dir / f"check-{self._count:04d}-{action}.log"
        return self._count, CheckLog(path)
