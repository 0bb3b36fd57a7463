"""Fixtures every test tier shares.

A test that needs an engine or a cluster skips with the reason when it is
missing, except under CI=true, where a missing engine is a failure: CI must
never go green by skipping what it was meant to prove.
"""

from __future__ import annotations

import os
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest

IN_CI = os.environ.get("CI") == "true"

UNIT_TIERS = (
    "packages/ssebench-spec/tests",
    "packages/ssebench-runner/tests",
    "packages/ssebench-runs/tests",
)
"""Test folders whose tests (unless marked `docker` or `process`) may start no process."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """`integrity` implies `docker` (README.md, Tests): `-m docker` selects those tests too,
    and whatever applies to Docker tests (the leftover check of tests/conftest.py) applies
    to them. First, so `-m` selection already sees the added marker."""
    for item in items:
        if item.get_closest_marker("integrity") and not item.get_closest_marker("docker"):
            item.add_marker(pytest.mark.docker)
        item.user_properties.append(("tier", tier_of(item)))


XDIST_GROUPS = {
    # Session runs in both modes, a PoC that hangs from the session's start, one stand-in.
    "tests/integrity/": "integrity",
    # The gateway's modules each on the worker's own gateway (tests/gateway/conftest.py):
    # the two agents' are the longest (their layers built per task), so they start early.
    "tests/gateway/test_mini_swe_agent.py": "gateway-mini-swe-agent",
    # The cluster's fixed probe tag; the pushed agents, tasks and graders.
    "tests/k8s/backend/test_conformance.py": "k8s-conformance",
    "tests/k8s/backend/test_runs.py": "k8s-pushed",
    "tests/k8s/backend/test_eval.py": "k8s-pushed",
    "tests/k8s/backend/test_sidecar.py": "k8s-pushed-sidecar",
    "tests/k8s/backend/test_stop_grading.py": "k8s-pushed-sidecar",
    # One registry, and case images untagged and pulled again.
    "tests/prebuilt/": "prebuilt",
    "tests/gateway/test_opencode.py": "gateway-opencode",
    # test_probe_image asserts no probe container is on the engine; scan and verify make some.
    "packages/ssebench-backend-docker/tests/test_probe_image.py": "probe-containers",
    "packages/ssebench-runner/tests/test_dataset_scan.py": "probe-containers",
    "packages/ssebench-runner/tests/test_dataset_verify.py": "probe-containers",
}
"""Tests that share a session's work or the engine's state run on one pytest-xdist worker
(`-n N --dist loadgroup`); every other module is a group of its own, so a module's fixtures
are made once. The groups named here are handed out first, in this order (the longest
first: a long group started last would end the tier alone), then the rest, most tests
first."""


def xdist_group_of(nodeid: str) -> str:
    """The group of the test `nodeid` (relative to this folder)."""
    path = nodeid.split("::", 1)[0]
    return next((g for prefix, g in XDIST_GROUPS.items() if path.startswith(prefix)), path)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadgroup` by XDIST_GROUPS. xdist's own reads `xdist_group` marks by
    rewriting node IDs, which pytest 9 no longer lets it do: every test became a group of
    its own, and the gateway's tests ran on four workers at once."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return xdist_group_of(nodeid)

        def _assign_work_unit(self, node: Any) -> None:
            # The queue, not the workers' collections: work is sent as indexes into those.
            queue = self.workqueue
            for group in sorted(queue, key=lambda group: _rank(group, len(queue[group]))):
                queue.move_to_end(group)
            super()._assign_work_unit(node)

    return GroupScheduling(config, log)


def _rank(group: str, size: int) -> tuple[int, int]:
    """Groups handed out first sort first: the named ones in order, then the largest."""
    named = list(dict.fromkeys(XDIST_GROUPS.values()))
    return (named.index(group) if group in named else len(named)), -size


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.user_properties.append(("started", f"{time.time():.3f}"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    """Each test's start and end (epoch seconds) go to the junit file beside its tier:
    tiers that share a parallel run (docker and integrity) each get their own wall time,
    from their first test's start to their last one's end (scripts/tier_report.py)."""
    try:
        yield
    finally:
        item.user_properties.append(("ended", f"{time.time():.3f}"))


def tier_of(item: pytest.Item) -> str:
    """The tier a test is timed in (scripts/test.sh runs each as a pytest run of its own;
    scripts/tier_report.py reads the junit property this sets): the first that applies of
    chaos, k8s, integrity, docker, process, else unit."""
    if Path(item.path).resolve().is_relative_to(Path(__file__).resolve().parent / "tests/chaos"):
        return "chaos"
    for marker in ("k8s", "integrity", "docker", "process"):
        if item.get_closest_marker(marker):
            return marker
    return "unit"


def missing(reason: str) -> None:
    """Skip the test, or fail it under CI=true."""
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: a missing engine is a failure, not a skip)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def chromium_executable() -> str:
    """Debian's chromium, installed by scripts/setup-chromium.sh when missing (root only).

    Every tier that opens a page asks here, so a fresh machine gets it before the first
    such test, whichever tier runs first.
    """
    import shutil
    import subprocess

    found = shutil.which("chromium")
    if found is None:
        setup = Path(__file__).resolve().parent / "scripts" / "setup-chromium.sh"
        done = subprocess.run([str(setup)], capture_output=True, text=True, check=False)
        found = shutil.which("chromium")
        if found is None:
            missing(f"chromium is missing and {setup.name} failed: {done.stderr.strip()}")
            raise AssertionError("unreachable: missing() skips or fails")
    return found


@pytest.fixture(scope="session")
def docker_client() -> Iterator[docker.DockerClient]:
    """A client of the local Docker engine."""
    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as exc:
        missing(f"no Docker engine answers: {exc}")
    yield client
    client.close()


@pytest.fixture(scope="session")
def base_image(docker_client: docker.DockerClient) -> str:
    """The base image name; present locally (set-up bootstraps it)."""
    from ssebench.spec import base_image as configured

    name = configured()
    try:
        docker_client.images.get(name)
    except docker.errors.ImageNotFound:
        missing(f"base image {name} is missing: run `ssebench images bootstrap-base`")
    return name


PROBE_TAG = "ssebench-test/probe:conformance"


@pytest.fixture(scope="session")
def probe_image(docker_client: docker.DockerClient, base_image: str) -> str:
    """The conformance suite's probe image (from ssebench-conformance), built once per session.

    A small image FROM the base image whose PROBE_MODE says how a run behaves:
    talk, sleep, keep, serve or connect.
    """
    from ssebench.conformance import probe_context

    return _build_probe(docker_client, base_image, probe_context())


def _build_probe(client: docker.DockerClient, base_image: str, context: Path) -> str:
    client.images.build(
        path=str(context),
        tag=PROBE_TAG,
        buildargs={"SSEBENCH_BASE_IMAGE": base_image},
        rm=True,
        pull=False,
    )
    return PROBE_TAG


@pytest.fixture
def conformance_probe_image_factory(
    docker_client: docker.DockerClient, base_image: str
) -> Callable[[Path], str]:
    """The conformance suite's `ProbeImageFactory` on this engine: builds its context FROM
    the base image (the k8s tier overrides it to push to the cluster's registry)."""

    return lambda context: _build_probe(docker_client, base_image, context)


@pytest.fixture(scope="session")
def ssebench_home() -> Path:
    """The SSEBench home of this checkout (images/, datasets/, uv.lock)."""
    from ssebench.spec import find_home

    return find_home(Path(__file__).resolve().parent)


@pytest.fixture(scope="session")
def runtime_image(docker_client: docker.DockerClient, base_image: str, ssebench_home: Path) -> str:
    """The runtime image's name, built once per session from this checkout.

    The first build of a machine takes minutes; afterwards the engine's cache and
    the prepared package trees make an unchanged rebuild take seconds, and a change
    to ssebench-daemon's source rebuilds only the steps that copy it.
    """
    from ssebench.backends.docker import build_runtime

    return build_runtime(docker_client, ssebench_home).tag


ToolImage = Callable[..., str]
"""`tool_image(task_id, dataset=None)`: the name of a task's tool layer, built once per session."""


@pytest.fixture(scope="session")
def tool_image(
    docker_client: docker.DockerClient, runtime_image: str, ssebench_home: Path
) -> ToolImage:
    """Build a task's case image and tool layer (once per session) and give the tool layer's name.

    `tool_image("tlvkit-heap-overflow")` takes the task from the demo dataset;
    `tool_image("x", dataset=folder)` from another dataset folder. The layer's
    entrypoint is the SSEBench entrypoint: override it to run another command.
    """
    from ssebench.backends.docker import build_case, build_tool
    from ssebench.spec import default_dataset, find_task

    built: dict[tuple[str, Path], str] = {}

    def build(task_id: str, dataset: Path | None = None) -> str:
        folder = (dataset or default_dataset(ssebench_home)).resolve()
        if (task_id, folder) not in built:
            task = find_task(folder, task_id)
            build_case(docker_client, task)
            built[task_id, folder] = build_tool(docker_client, task, ssebench_home).tag
        return built[task_id, folder]

    return build


InstallDistribution = Callable[..., None]


@pytest.fixture
def install_distribution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> InstallDistribution:
    """Install throw-away distributions with entry points on sys.path, the way pip would.

    Call it with `name`, `entry_points` (group to {entry: "module:attr"}) and
    `modules` (file name to source); sys.path is restored after the test.
    """

    def install(
        *, name: str, entry_points: dict[str, dict[str, str]], modules: dict[str, str]
    ) -> None:
        root = tmp_path / f"dist-{name}"
        info = root / f"{name.replace('-', '_')}-1.0.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        lines = []
        for group, entries in entry_points.items():
            lines.append(f"[{group}]")
            lines += [f"{entry} = {target}" for entry, target in entries.items()]
        (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
        for filename, source in modules.items():
            (root / filename).write_text(textwrap.dedent(source))
        monkeypatch.syspath_prepend(str(root))

    return install


class SubprocessRefused(RuntimeError):
    """A unit test tried to start a process."""


_SPAWN_EVENTS = frozenset(
    {
        "subprocess.Popen",
        "os.system",
        "os.posix_spawn",
        "os.fork",
        "os.forkpty",
        "os.exec",
        "os.spawn",
    }
)
"""Audit events (PEP 578) of every way the standard library starts or replaces a process."""

_refusing: list[str] = []
"""The node IDs of the tests currently refusing processes (at most one)."""


def _refused(what: str) -> SubprocessRefused:
    return SubprocessRefused(
        f"{_refusing[-1]}: a unit test starts no process ({what} refused); use a fake, "
        "or mark the test `process`"
    )


def _refuse(event: str, args: tuple[Any, ...]) -> None:
    if _refusing and event in _SPAWN_EVENTS:
        raise _refused(event)


_hook_installed: list[bool] = []


@pytest.fixture(scope="session")
def _one_time_caches() -> None:
    """Fill the caches a library fills with a process on its first use on a machine,
    before a test refuses processes: matplotlib's font list (it runs `fc-list` once;
    `ssebench report` draws with matplotlib). A fresh machine has none of them."""
    try:
        import matplotlib.font_manager  # noqa: F401  (importing it builds the cache)
    except ImportError:
        return


@pytest.fixture
def no_subprocesses(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, _one_time_caches: None
) -> Iterator[None]:
    """Refuse every way of starting a process for the test's duration.

    An audit hook (it cannot be removed, so it is installed once and checks
    `_refusing`) turns subprocess, os.system, posix_spawn, fork and exec into
    `SubprocessRefused`; `_posixsubprocess.fork_exec`, which multiprocessing's
    spawn and forkserver call without an audit event, is replaced too.
    """
    import _posixsubprocess

    if not _hook_installed:
        sys.addaudithook(_refuse)
        _hook_installed.append(True)

    def fork_exec(*args: object, **kwargs: object) -> int:
        raise _refused("_posixsubprocess.fork_exec")

    monkeypatch.setattr(_posixsubprocess, "fork_exec", fork_exec)
    _refusing.append(request.node.nodeid)
    try:
        yield
    finally:
        _refusing.pop()


@pytest.fixture(autouse=True)
def _unit_tiers_start_no_process(request: pytest.FixtureRequest) -> None:
    """Tests in UNIT_TIERS refuse processes (`no_subprocesses`) unless marked docker or process."""
    node = request.node
    if node.get_closest_marker("docker") or node.get_closest_marker("process"):
        return
    path, root = Path(node.path).resolve(), Path(__file__).resolve().parent
    if path.is_relative_to(root) and path.relative_to(root).as_posix().startswith(UNIT_TIERS):
        request.getfixturevalue("no_subprocesses")
