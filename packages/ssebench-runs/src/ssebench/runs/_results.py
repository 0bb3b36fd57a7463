"""Finding finished runs from the `summary.json` files under a results folder.

The layout is `results/<task>/<model>/<agent>/<run-id>/summary.json`. The walk
does not follow symbolic links (so each `latest` link is skipped and no run
is listed twice) and does not descend into a run directory (its `archive/`
holds the agent's own files). It reads files only: no backend, no engine.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Final

import msgspec

from ssebench.runs._entries import CheckOutcome, Checks, FinishedRun
from ssebench.spec import DecodeError, PatchResult, Summary, contract

RUN_FILES: Final = frozenset({contract.RESULT_FILE, contract.RUN_FILE})
"""Files of a run directory: one holding them but no summary yet is a run in progress."""

MAX_SUMMARY_SIZE: Final = 1 << 24
"""A summary is a few kilobytes; a bigger file is not one and is not read."""

_READ_SIZE: Final = 1 << 16
_decoder: Final = msgspec.json.Decoder(Summary)

Warn = Callable[[str], None]


def decode_summary(data: bytes, path: str) -> Summary:
    """Decode a `summary.json`.

    Raises:
        DecodeError: the data is not JSON, or not a run's summary; names `path`.
    """
    try:
        return _decoder.decode(data)
    except msgspec.DecodeError as exc:
        raise DecodeError(f"{path}: not a run summary: {exc}") from exc


def _read(path: str) -> bytes:
    """The bytes of a regular file of at most MAX_SUMMARY_SIZE; never blocks on a FIFO.

    Raises:
        OSError: the file cannot be read, is not a regular file, or is too large.
    """
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise OSError("not a regular file")
        if status.st_size > MAX_SUMMARY_SIZE:
            raise OSError(f"larger than {MAX_SUMMARY_SIZE} bytes")
        chunks = []
        while chunk := os.read(descriptor, _READ_SIZE):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(descriptor)


def _outcome(success: bool | None) -> CheckOutcome:
    if success is None:
        return "not run"
    return "passed" if success else "failed"


def checks_of(result: PatchResult) -> Checks:
    """Each check's outcome in a grade; the PoCs pass when every one of them is fixed."""
    pocs = None if result.pov_total is None else (result.pov_passed or 0) >= result.pov_total
    return Checks(
        build=_outcome(result.build_success),
        poc=_outcome(pocs),
        function_test=_outcome(result.func_test_success),
        intent_test=_outcome(result.intent_test_success),
        pocs_fixed=result.pov_passed,
        pocs_total=result.pov_total,
    )


def finished_run(summary: Summary, run_dir: str) -> FinishedRun:
    """The JSON view of a recorded run.

    Args:
        summary: its `summary.json`.
        run_dir: the run directory it was read from.
    """
    return FinishedRun(
        run_id=summary.run_id,
        task=summary.task,
        agent=summary.config.agent,
        model=summary.config.model,
        status=summary.patch_result.status,
        outcome=summary.outcome,
        checks=checks_of(summary.patch_result),
        started_at=summary.started_at,
        run_dir=run_dir,
    )


def scan_results(root: Path, warn: Warn) -> list[FinishedRun]:
    """Every finished run under `root`, newest first (by `started_at`).

    Args:
        root: the results folder, or any folder in it (a run directory too).
        warn: told one line per file or folder that is skipped (unreadable,
            not JSON, not a run summary); the scan goes on.

    Returns:
        The runs; none when `root` does not exist.
    """
    found: list[FinishedRun] = []
    # Strings and os calls, not Path: this loop runs once per run directory.
    pending = [str(root.absolute())]
    while pending:
        folder = pending.pop()
        summary_path = f"{folder}{os.sep}{contract.SUMMARY_FILE}"
        try:
            data = _read(summary_path)
        except (FileNotFoundError, NotADirectoryError):
            pending.extend(_subfolders(folder, warn))
            continue
        except OSError as exc:
            warn(f"skipped {summary_path}: cannot read: {exc.strerror or exc}")
            continue
        try:
            summary = decode_summary(data, summary_path)
        except DecodeError as exc:
            warn(f"skipped {exc}")
            continue
        found.append(finished_run(summary, folder))
    found.sort(key=lambda run: run.started_at, reverse=True)
    return found


def _subfolders(folder: str, warn: Warn) -> list[str]:
    """The folders in `folder` to look into; none if it is a run still in progress."""
    try:
        with os.scandir(folder) as entries:
            listed = list(entries)
    except FileNotFoundError:
        return []
    except NotADirectoryError:
        return []
    except OSError as exc:
        warn(f"skipped {folder}: cannot list: {exc.strerror or exc}")
        return []
    if any(entry.name in RUN_FILES for entry in listed):
        return []
    folders = [entry.path for entry in listed if _is_folder(entry)]
    folders.sort(reverse=True)
    return folders


def _is_folder(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False
