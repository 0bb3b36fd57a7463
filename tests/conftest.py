"""After a whole suite that ran Docker tests: nothing carrying an `ssebench.*` label may remain
that was not there when it started.

The check runs in CI (`CI` set) or when `SSEBENCH_CHECK_LEFTOVERS=1`: on a
workstation other runs of the user's own may legitimately be up.
"""

from __future__ import annotations

import os

import pytest

from ssebench.spec import labels


def _labelled(found_labels: dict[str, str] | None) -> bool:
    return any(key.startswith(labels.PREFIX) for key in found_labels or {})


def ssebench_leftovers() -> list[str]:
    """Every container, network and volume of the engine that carries an `ssebench.*` label."""
    import docker

    client = docker.from_env()
    try:
        found = [
            f"container {c['Names'][0].lstrip('/')}"
            for c in client.api.containers(all=True)
            if _labelled(c.get("Labels"))
        ]
        found += [
            f"network {n['Name']}" for n in client.api.networks() if _labelled(n.get("Labels"))
        ]
        volumes = client.api.volumes().get("Volumes") or []
        found += [f"volume {v['Name']}" for v in volumes if _labelled(v.get("Labels"))]
    finally:
        client.close()
    return found


_docker_tests_ran: list[str] = []
"""Node IDs of Docker tests that reported; under pytest-xdist the controller hears every
worker's reports here, and its own `session.items` is empty."""


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" and "docker" in report.keywords:
        _docker_tests_ran.append(report.nodeid)


_there_before: set[str] = set()
"""What the engine held when the session started: left by something else (a run of the
user's, a killed earlier session), not by this suite; it is reported as such, not failed."""


def _wanted() -> bool:
    return bool(os.environ.get("CI")) or os.environ.get("SSEBENCH_CHECK_LEFTOVERS") == "1"


def pytest_sessionstart(session: pytest.Session) -> None:
    if hasattr(session.config, "workerinput") or not _wanted():
        return
    try:
        _there_before.update(ssebench_leftovers())
    except Exception:  # no engine yet: everything found at the end is new
        return
    if _there_before:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(
                "on the engine before the suite: " + ", ".join(sorted(_there_before))
            )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if hasattr(session.config, "workerinput"):
        return  # an xdist worker: the others may still have runs up; the controller checks
    wanted = _wanted()
    ran_docker = _docker_tests_ran or any(
        item.get_closest_marker("docker") for item in session.items
    )
    if not (wanted and ran_docker):
        return
    left = [found for found in ssebench_leftovers() if found not in _there_before]
    if left:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = "left behind after the suite: " + ", ".join(left)
        if reporter is not None:
            reporter.write_line(message, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
