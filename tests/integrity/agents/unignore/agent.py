"""Hole 3 of issue 13 (an ignored file): the task's image holds generated.txt, which its
.gitignore ignores, so the agent's first commit lacks it. The agent un-ignores it and
changes it; its diff must still apply to the graded copy, which has always held it."""

from __future__ import annotations

from pathlib import Path

import ssehostile as h


def main() -> None:
    ignore = Path(".gitignore")
    ignore.write_text(ignore.read_text().replace("generated.txt\n", ""))
    with Path("generated.txt").open("a") as generated:
        generated.write("a line the agent added\n")
    h.write_report(
        {"gitignore": ignore.read_text(), "generated": Path("generated.txt").read_text()}
    )
    print("unignore: generated.txt is tracked now")


if __name__ == "__main__":
    main()
