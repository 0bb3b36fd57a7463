"""A Backend that runs nothing: it records the calls and keeps the results "remote"."""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ssebench.spec import (
    Backend,
    BackendError,
    ImageRequest,
    Images,
    RunHandle,
    RunInfo,
    RunSpec,
    RunTimeoutError,
)

PASSED_RESULT: dict[str, Any] = {
    "patch_result": {
        "status": "passed",
        "build_success": True,
        "pov_passed": 2,
        "pov_total": 2,
        "func_test_success": True,
        "intent_test_success": None,
        "error_msg": None,
        "error_log": None,
    },
    "runtime_result": {
        "agent_duration": 12.5,
        "agent_timeout": False,
        "evaluator_timeout": False,
        "agent_exit_code": 0,
    },
    # A field this runner does not know: it must survive the runner's rewrite.
    "evaluator_version": "9.9.9",
}

FAILED_RESULT: dict[str, Any] = {
    **PASSED_RESULT,
    "patch_result": {**PASSED_RESULT["patch_result"], "status": "failed", "pov_passed": 1},
}

REFERENCE_PATCH = b"--- a/tlv.c\n+++ b/tlv.c\n@@ -1 +1 @@\n-bug\n+fix\n"


class FakeBackend(Backend[RunHandle]):
    """Implements the real interface; tells the runner what the options say.

    The "container" writes its files in this object (`remote`); they reach the
    run directory only in `collect_results`, as with a backend that keeps
    results in its own storage.
    """

    name = "fake"
    builds_images = True

    def __init__(
        self,
        *,
        result: bytes | None = None,
        exit_status: int = 0,
        fail_start: bool = False,
        fail_copy: bool = False,
        wait_error: BaseException | None = None,
        collect_error: BaseException | None = None,
        block_until_stopped: bool = False,
        ignore_stop: bool = False,
        remove_result: bool = False,
        on_start: Callable[[RunSpec], None] | None = None,
    ) -> None:
        self.remote: dict[str, bytes] = {
            "result.json": json.dumps(PASSED_RESULT).encode() if result is None else result,
            "final.patch": b"diff --git a/x b/x\n",
            "archive/dialog.jsonl": b'{"role": "agent"}\n',
        }
        self.exit_status = exit_status
        self.fail_start = fail_start
        self.fail_copy = fail_copy
        self.wait_error = wait_error
        self.collect_error = collect_error
        self.block_until_stopped = block_until_stopped
        self.ignore_stop = ignore_stop
        self.remove_result = remove_result
        self.on_start = on_start
        self.calls: list[str] = []
        self.specs: list[RunSpec] = []
        self.requests: list[ImageRequest] = []
        self.copies: list[tuple[str, str, Path, str | None]] = []
        self.private_mode: int | None = None
        self.seen_at_start: dict[str, Any] = {}
        self.seen_at_wait: dict[str, Any] = {}
        self.stopped = threading.Event()
        self.stop_calls = 0
        self.stop_called = threading.Event()
        self.waiting = threading.Event()

    def prepare_images(self, request: ImageRequest) -> Images:
        self.calls.append("prepare_images")
        self.requests.append(request)
        return Images(agent=f"fake/agent-{request.agent.name}/{request.task.id.lower()}:1")

    def copy_from_image(
        self, image: str, path: str, dest: Path, platform: str | None = None
    ) -> None:
        self.calls.append("copy_from_image")
        self.copies.append((image, path, dest, platform))
        if self.fail_copy:
            raise RuntimeError(f"no file {path} in {image}")
        self.private_mode = stat.S_IMODE(dest.parent.stat().st_mode)
        dest.write_bytes(REFERENCE_PATCH)
        dest.chmod(0o600)

    def start(self, spec: RunSpec) -> RunHandle:
        self.calls.append("start")
        self.specs.append(spec)
        run_dir = Path(spec.results.source)
        self.seen_at_start = {
            "files": sorted(p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*")),
            "result": (run_dir / "result.json").read_bytes(),
        }
        if self.on_start is not None:
            self.on_start(spec)
        if self.fail_start:
            raise BackendError("the platform has no room for the container")
        return RunHandle(run_id=spec.run_id, name=f"fake-{spec.run_id}", keep=spec.keep)

    def wait(self, handle: RunHandle, timeout: float | None = None) -> int:
        self.calls.append("wait")
        run_dir = Path(self.specs[-1].results.source)
        self.seen_at_wait = {"result": (run_dir / "result.json").read_bytes()}
        self.waiting.set()
        if self.block_until_stopped:
            deadline = time.monotonic() + 30
            while not self.stopped.wait(0.01):
                if time.monotonic() > deadline:
                    raise RunTimeoutError("the fake container never stopped")
            return 143
        if self.wait_error is not None:
            raise self.wait_error
        return self.exit_status

    def logs(self, handle: RunHandle, follow: bool = False) -> Iterator[str]:
        self.calls.append("logs")
        yield from ()

    def collect_results(self, handle: RunHandle, dest: Path) -> None:
        self.calls.append("collect_results")
        if self.collect_error is not None:
            raise self.collect_error
        for name, content in self.remote.items():
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
        if self.remove_result:
            (dest / "result.json").unlink()

    def stop(self, handle: RunHandle, grace: float = 20) -> None:
        self.calls.append("stop")
        self.stop_calls += 1
        self.stop_called.set()
        if not self.ignore_stop:
            self.stopped.set()

    def cleanup(self, handle: RunHandle) -> None:
        self.calls.append("cleanup")

    def list_runs(self, labels: dict[str, str] | None = None) -> list[RunInfo]:
        return []


def send_signal_when(
    event: threading.Event,
    signum: int,
    *,
    then: threading.Event | None = None,
    second: int | None = None,
) -> threading.Thread:
    """Send `signum` to this process once `event` is set; `second` once `then` is set."""

    def send() -> None:
        if not event.wait(10):
            return
        os.kill(os.getpid(), signum)
        if second is not None and then is not None and then.wait(10):
            os.kill(os.getpid(), second)

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread
