"""What a check works with: the backend, probe runs it starts and removes, the probe image."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from importlib import resources
from pathlib import Path
from typing import Any, Final

import msgspec

from ssebench.conformance._capture import Captured, capture_output
from ssebench.conformance._check import Capability, capabilities
from ssebench.conformance._network import Network
from ssebench.spec import (
    Backend,
    Egress,
    Mode,
    Mount,
    NetworkPolicy,
    RunHandle,
    RunSpec,
    SidecarPair,
    contract,
    labels,
)

BackendFactory = Callable[[], Backend[Any]]
"""Makes the backend under test (a backend class is one: it is created without arguments)."""

ProbeImageFactory = Callable[[Path], str]
"""Makes the probe image from its build context (`probe_context()`) and returns a name the
backend can run; called at most once per suite, by the first check that needs it."""

PROBE_TASK: Final = "probe-task"


def probe_context() -> Path:
    """The probe image's build context, shipped in this package: a Dockerfile and probe.sh.

    The image is FROM the `SSEBENCH_BASE_IMAGE` build argument; its `PROBE_MODE`
    says how a run behaves: talk, sleep, keep, serve or connect (probe.sh tells).
    """
    return Path(str(resources.files("ssebench.conformance") / "probe"))


PROBE_SOURCE: Final = "/probe-src"
"""A sidecar probe pair's source path (the source volume's mount point in both containers)."""

WHICH_CONTAINER: Final = "PROBE_CONTAINER"
"""A probe run's variable naming its container: `agent` (RunSpec.env) or `task` (the pair's),
so a check can tell where `exec_argv` ran."""


class Suite:
    """What the checks of one suite share: the probe image, once made, and the egress servers.

    `mode` is the mode of every probe run: in sidecar mode each is a pair, the probe
    image as the agent container (in the run's PROBE_MODE) and as the task container
    (sleeping until stopped), with the pair's two volumes.
    """

    def __init__(self, probe_image_factory: ProbeImageFactory, mode: Mode = "sandbox") -> None:
        self.mode: Mode = mode
        self._factory = probe_image_factory
        self._image: str | None = None
        self._lock = threading.Lock()
        self.network = Network()

    def probe_image(self) -> str:
        """The probe image's name, made by the factory the first time it is asked for."""
        with self._lock:
            if self._image is None:
                self._image = self._factory(probe_context())
            return self._image

    def close(self) -> None:
        """Tear down what the suite set up (the egress servers)."""
        self.network.close()


class Harness:
    """One check's view: the backend, its abilities, probe runs, a folder of its own.

    Every run a check starts through `start` is stopped and removed by `close`,
    whatever the check did with it.
    """

    secret: Final = "sk-conformance-" + secrets.token_hex(12)
    """The model key every probe run carries; it must never surface outside the container."""

    def __init__(self, backend: Backend[Any], suite: Suite, workdir: Path) -> None:
        self.backend = backend
        self.suite = suite
        self.workdir = workdir
        self.capabilities: frozenset[Capability] = capabilities(backend)
        self._started: list[RunHandle] = []

    @property
    def probe_image(self) -> str:
        """The probe image's name."""
        return self.suite.probe_image()

    @property
    def network(self) -> Network:
        """The servers egress checks try to reach."""
        return self.suite.network

    def spec(
        self,
        mode: str = "talk",
        *,
        keep: bool = False,
        egress: Egress = "restricted",
        env: dict[str, str] | None = None,
        image: str | None = None,
        run_id: str | None = None,
        checker: bool = False,
    ) -> RunSpec:
        """A probe run's spec with the runner's labels, its run directory made.

        With `checker`, in either mode, a checker pair as the runner asks for one: the
        probe as the agent (in `mode`, through the launcher's stand-in) and as the checker
        (whose end, once the backend reported the agent's, is the run's); see
        probe/runtime.sh."""
        run_id = run_id or f"conf-{secrets.token_hex(4)}"
        run_dir = self.workdir / run_id
        (run_dir / contract.RUN_ARCHIVE).mkdir(parents=True, exist_ok=True)
        run_env = {
            contract.ENV_API_KEY: self.secret,
            "PROBE_MODE": mode,
            WHICH_CONTAINER: "agent",
            contract.ENV_RESULTS: contract.RESULTS_DIR,
            contract.ENV_ARCHIVE: contract.ARCHIVE_DIR,
            **(env or {}),
        }
        sidecar = None
        if self.suite.mode == "sidecar" or checker:
            run_env[contract.ENV_DAEMON_SOCKET] = contract.SIDECAR_DAEMON_SOCKET
            sidecar = SidecarPair.create(
                run_id=run_id,
                environment_image=self.probe_image,
                source_dir=PROBE_SOURCE,
                env=run_env,
                checker=checker,
            )
            if not checker:
                sidecar = msgspec.structs.replace(
                    sidecar, env={**sidecar.env, "PROBE_MODE": "sleep", WHICH_CONTAINER: "task"}
                )
        return RunSpec(
            run_id=run_id,
            task_name=PROBE_TASK,
            mode=self.suite.mode,
            sidecar=sidecar,
            image=image or self.probe_image,
            env=run_env,
            results=Mount(target=contract.RESULTS_DIR, source=str(run_dir)),
            archive=Mount(target=contract.ARCHIVE_DIR, source=str(run_dir / contract.RUN_ARCHIVE)),
            network=NetworkPolicy(egress=egress),
            labels={
                labels.RUN_ID: run_id,
                labels.WEBUI: "true",
                labels.TASK_ID: PROBE_TASK,
                labels.MODEL: "none",
                labels.AGENT: "probe",
                labels.RESULTS: str(run_dir),
                labels.REFERENCE_RUN: "false",
            },
            timeout=60,
            keep=keep,
        )

    def start(
        self,
        mode: str = "talk",
        *,
        keep: bool = False,
        egress: Egress = "restricted",
        env: dict[str, str] | None = None,
        checker: bool = False,
    ) -> tuple[RunSpec, RunHandle]:
        """Start a probe run in `mode` (see probe.sh; `checker`: see `spec`); it is removed
        when the check ends."""
        spec = self.spec(mode, keep=keep, egress=egress, env=env, checker=checker)
        handle = self.backend.start(spec)
        self._started.append(handle)
        return spec, handle

    def capture(self) -> AbstractContextManager[Captured]:
        """Capture this process's stdout and stderr (where a backend relays a run's output)."""
        return capture_output()

    def close(self) -> None:
        """Stop and remove every run the check started.

        Raises:
            BaseException: the first error of a removal, once every run was tried.
        """
        failures: list[BaseException] = []
        for handle in reversed(self._started):
            try:
                self.backend.stop(handle, grace=0)
                self.backend.remove(handle)
            except Exception as exc:
                failures.append(exc)
        self._started.clear()
        if failures:
            raise failures[0]

    def __enter__(self) -> Harness:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
