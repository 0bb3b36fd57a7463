"""The runner's tests drive the shared fake backend (ssebench.conformance.fake).

`fake_backend` sets it up as these tests need: the image it builds holds the
reference patch and runs an "agent" that writes a result, a final patch and a
dialog; options make a call fail, the agent wait until stopped or ignore the
stop.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

from ssebench.conformance.fake import FakeBackend, FakeContainer, FakeImage, Program
from ssebench.spec import (
    BackendError,
    GatewayReport,
    ModelGateway,
    ModelsFile,
    RunHandle,
    RunSpec,
    Usage,
    contract,
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


def agent(
    *,
    result: bytes | None = None,
    exit_status: int = 0,
    until_stopped: bool = False,
    ignore_stop: bool = False,
    remove_result: bool = False,
) -> Program:
    """An agent's container: writes its files, then exits (or waits to be stopped, or killed)."""

    def program(container: FakeContainer) -> int:
        results, archive = contract.RESULTS_DIR, contract.ARCHIVE_DIR
        outcome = json.dumps(PASSED_RESULT).encode() if result is None else result
        container.write(f"{results}/result.json", outcome)
        container.write(f"{results}/final.patch", b"diff --git a/x b/x\n")
        container.write(f"{archive}/dialog.jsonl", b'{"role": "agent"}\n')
        if remove_result:
            container.remove(f"{results}/result.json")
        if ignore_stop:
            container.wait_for_kill()
        elif until_stopped:
            container.wait_for_stop()
            return 143
        return exit_status

    return program


def raises(error: BaseException) -> Any:
    """A hook that makes the call fail with `error`."""

    def hook(*args: Any) -> None:
        raise error

    return hook


def fake_backend(
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
) -> FakeBackend:
    """The shared fake, building an image whose container is `agent(...)`.

    `fail_copy` leaves the reference patch out of the image; the errors are
    raised by the call they name.
    """
    files = {} if fail_copy else {f"{contract.TASK_DIR}/diffs/patch.diff": REFERENCE_PATCH}
    program = agent(
        result=result,
        exit_status=exit_status,
        until_stopped=block_until_stopped,
        ignore_stop=ignore_stop,
        remove_result=remove_result,
    )
    backend = FakeBackend(built=FakeImage(files=files, program=program))
    if fail_start:
        backend.hooks["start"] = raises(BackendError("the platform has no room for the container"))
    if wait_error is not None:
        backend.hooks["wait"] = raises(wait_error)
    if collect_error is not None:
        backend.hooks["collect_results"] = raises(collect_error)
    return backend


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


KEY = "sk-ssebench-planted-9c1f2e"


class FakeGateway(ModelGateway):
    def __init__(self, refused: int = 0) -> None:
        self.opened: list[tuple[str, list[str], float | None]] = []
        self.closed: list[str] = []
        self.refused = refused

    @property
    def base_url(self) -> str:
        return "http://gateway.invalid:4000"

    def open_key(self, run_id: str, models: list[str], budget: float | None) -> str:
        self.opened.append((run_id, models, budget))
        return KEY

    def close_key(self, run_id: str) -> GatewayReport | None:
        self.closed.append(run_id)
        usage = Usage(
            calls=3, prompt_tokens=300, completion_tokens=150, refused_for_budget=self.refused
        )
        return GatewayReport(spend=0.06, usage=usage)


class ModelBackend(FakeBackend):
    """The fake backend with a gateway; keeps the spec it was given."""

    gateway_error: BackendError | None = None

    def __init__(self, gateway: FakeGateway, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.fake_gateway = gateway
        self.specs: list[RunSpec] = []

    def gateway(self, models: ModelsFile) -> ModelGateway:
        if self.gateway_error is not None:
            raise self.gateway_error
        assert "scripted" in models.models
        return self.fake_gateway

    def start(self, spec: RunSpec) -> RunHandle:
        self.specs.append(spec)
        return super().start(spec)
