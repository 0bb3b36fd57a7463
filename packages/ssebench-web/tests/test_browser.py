"""The page in headless Chromium (Debian's `chromium`, driven by Playwright).

Screenshots go to $SSEBENCH_WEB_SCREENSHOTS (default /var/tmp/ssebench-web-screenshots)
and their paths are printed.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ssebench.conformance.fake import FakeBackend
from ssebench.spec import labels
from ssebench.web._app import create_app
from ssebench.web._assets import node_modules

from .conftest import fake_run, record, summary

SHOTS = Path(os.environ.get("SSEBENCH_WEB_SCREENSHOTS", "/var/tmp/ssebench-web-screenshots"))
HOME = Path(__file__).resolve().parents[3]
TEST_AGENTS = HOME / "tests" / "agents"
TASK = "pyarchive-path-traversal"

pytestmark = pytest.mark.process


def shot(page: object, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)  # type: ignore[attr-defined]
    print(f"screenshot: {path}")


@pytest.fixture
def browser(chromium_executable: str) -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        launched = driver.chromium.launch(
            executable_path=chromium_executable, args=["--no-sandbox"]
        )
        try:
            yield launched
        finally:
            launched.close()


@pytest.mark.slow
def test_the_runs_page_with_1000_recorded_and_20_live_runs(browser: object, tmp_path: Path) -> None:
    import uvicorn

    results = tmp_path / "results"
    for number in range(1000):
        started = f"2025-01-01T{number // 3600:02d}:{number // 60 % 60:02d}:{number % 60:02d}Z"
        record(results, f"rec-{number:04d}", summary(f"rec-{number:04d}", started))
    backend = FakeBackend(images={})
    for number in range(20):
        backend.add_run(fake_run(f"live-{number:02d}", results, created_at="2026-01-01T00:00:00Z"))
    token = secrets.token_urlsafe(16)
    app = create_app(backend, results, tmp_path / "evals", token, node_modules())
    server = uvicorn.Server(uvicorn.Config(app, port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        page = browser.new_page()  # type: ignore[attr-defined]
        page.goto(f"http://127.0.0.1:{port}/?token={token}")  # sets the cookie
        begun = time.perf_counter()
        page.reload()
        page.wait_for_selector("body[data-loaded=true]")
        seconds = time.perf_counter() - begun
        assert page.locator("#runs tbody tr").count() == 1020
        in_page = int(page.get_attribute("body", "data-rendered-ms") or "0") / 1000
        print(
            f"runs page, 1000 recorded + 20 live runs: rendered {in_page:.3f} s after the "
            f"navigation began (page clock); {seconds:.3f} s from reload() to the full list "
            "(driver clock)"
        )
        shot(page, "runs-1020")
    finally:
        server.should_exit = True
        thread.join(10)


def _start_web(results: Path) -> tuple[subprocess.Popen[str], str]:
    script = Path(sys.executable).with_name("ssebench")
    web = subprocess.Popen(
        [str(script), "web", "--dir", str(results), "--backend", "docker"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert web.stdout is not None
    for _ in range(5):
        line = web.stdout.readline()
        found = re.search(r"http://\S+", line)
        if found:
            return web, found.group(0)
    web.kill()
    raise AssertionError(f"ssebench web printed no URL: {web.stderr.read() if web.stderr else ''}")


@dataclass
class Served:
    """`ssebench web` on the Docker backend, and the kept runs a test started."""

    url: str
    results: Path
    start: Callable[..., str]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    import docker

    env = {**os.environ, "SSEBENCH_AGENT_PATH": str(TEST_AGENTS), "SSEBENCH_HOME": str(HOME)}
    script = Path(sys.executable).with_name("ssebench")
    web, url = _start_web(tmp_path / "results")
    runs: list[tuple[str, subprocess.Popen[bytes], Any]] = []

    def start(agent: str, *options: str) -> str:
        run_id = f"web-{agent}-{secrets.token_hex(3)}"
        log = (tmp_path / f"{run_id}.log").open("wb")
        argv = [str(script), "run", "--task", TASK, "--agent", agent, "--run-id", run_id]
        process = subprocess.Popen(
            [*argv, "--keep-container", "--json", *options],
            cwd=tmp_path,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        runs.append((run_id, process, log))
        return run_id

    try:
        yield Served(url=url, results=tmp_path / "results", start=start)
    finally:
        web.terminate()
        web.wait(10)
        client = docker.from_env()
        for run_id, process, log in runs:
            if process.poll() is None:
                process.kill()
                process.wait()
            log.close()
            # The checker carries the run's ID; the agent container and the pair's volumes
            # its pair label. The agent container first: it uses the checker's network.
            by_id = {"label": f"{labels.RUN_ID}={run_id}"}
            pair = {"label": f"{labels.RUN}={run_id}"}
            found = {c.id: c for c in client.containers.list(all=True, filters=by_id)}
            found.update({c.id: c for c in client.containers.list(all=True, filters=pair)})
            for container in sorted(found.values(), key=lambda c: not c.name.endswith("-agent")):
                container.remove(force=True, v=True)
            for network in client.networks.list(filters=by_id):
                network.remove()
            for volume in client.volumes.list(filters=pair):
                volume.remove(force=True)


def _summary(served: Served, agent: str, run_id: str) -> dict[str, Any]:
    path = served.results / TASK / "none" / agent / run_id / "summary.json"
    data: dict[str, Any] = json.loads(path.read_text())
    return data


@pytest.mark.docker
@pytest.mark.slow
def test_a_kept_run_is_listed_graded_with_its_diff_and_a_terminal_as_model(
    browser: object, served: Served
) -> None:
    from playwright.sync_api import expect

    run_id = served.start("reference")
    page = browser.new_page()  # type: ignore[attr-defined]
    page.goto(served.url)
    page.wait_for_selector(f"tr[data-run-id='{run_id}']", timeout=1_200_000)
    shot(page, "runs-live")
    page.goto(served.url.split("?")[0] + f"runs/{run_id}")
    page.wait_for_selector("body[data-outcome='passed']", timeout=600_000)
    assert page.locator("#outcome").inner_text() == "passed"
    page.wait_for_selector("#diff div.file")
    assert "diff --git" in page.locator("#diff").inner_text()
    assert _summary(served, "reference", run_id)["outcome"] == "passed"
    shot(page, "run-graded")
    page.click("#terminal-open")
    page.wait_for_selector(".xterm-rows")
    time.sleep(1)
    page.keyboard.type("id\n")
    # The page's policy forbids eval: poll the terminal's text from here.
    expect(page.locator(".xterm-rows")).to_contain_text("uid=1000(model)", timeout=30_000)
    shot(page, "run-terminal")


@pytest.mark.docker
@pytest.mark.slow
def test_a_run_that_ends_while_its_page_is_open_shows_its_grade_without_a_reload(
    browser: object, served: Served
) -> None:
    # The sleeper overruns its 20 s: its page is open, ungraded, long before it ends.
    run_id = served.start("sleeper", "--timeout", "20")
    page = browser.new_page()  # type: ignore[attr-defined]
    page.goto(served.url)
    page.wait_for_selector(f"tr[data-run-id='{run_id}']", timeout=1_200_000)
    page.goto(served.url.split("?")[0] + f"runs/{run_id}")
    page.wait_for_selector("#run-id:not(:empty)")
    assert page.get_attribute("body", "data-outcome") in (None, "")
    shot(page, "run-before-grade")
    navigations: list[str] = []
    page.on("framenavigated", lambda frame: navigations.append(frame.url))
    page.wait_for_selector("body[data-outcome='agent_timeout']", timeout=300_000)
    assert navigations == []
    assert page.locator("#outcome").inner_text() == "agent_timeout"
    shot(page, "run-graded-live")
