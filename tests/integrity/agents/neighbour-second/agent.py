"""The second run of test_neighbours.py: learns the first run's daemon address from the
internet stand-in (as an attacker's server would tell it) and asks that daemon for the
reference patch, grading, the end of the agent phase and a shell command."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import ssehostile as h

STANDIN = "198.18.9.2:8099"


def targets() -> list[str]:
    found: list[str] = json.loads(h.fetch(STANDIN, "/targets") or "[]")
    return found


def ask(target: str) -> dict[str, object]:
    """Every request at once (a blocked address answers none: each waits its 5 s)."""
    requests = {
        "GET /version": lambda: h.call("GET", "/version", via=target, timeout=5),
        "GET /reference/patch": lambda: h.call("GET", "/reference/patch", via=target, timeout=5),
        "POST /prepare_grading": lambda: h.call(
            "POST", "/prepare_grading", {}, via=target, timeout=5
        ),
        "POST /admin/agent_exited": lambda: h.call(
            "POST", "/admin/agent_exited", {}, via=target, timeout=5
        ),
        "POST /tool/bash": lambda: h.bash("cat /ssebench/diffs/patch.diff", via=target, timeout=5),
    }
    with ThreadPoolExecutor(len(requests)) as pool:
        answers = {name: pool.submit(request) for name, request in requests.items()}
        return {name: answer.result() for name, answer in answers.items()}


def main() -> None:
    wanted = targets()
    found: dict[str, object] = {"targets": wanted}
    for target in wanted:
        found[target] = ask(target)
    h.write_report(found)


if __name__ == "__main__":
    main()
