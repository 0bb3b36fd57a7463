"""What the pages show, as JSON: runs from the backend and from `results/`, merged.

Everything here is blocking (the backend's calls, file reads): the app calls it
in a worker thread. A run is named by its run ID; a live run (from
`list_runs`) and a finished one (its `summary.json`) with the same ID are one
row, so a kept run shows its state and its grade together.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Final

import msgspec

from ssebench.runs._entries import Checks, RunEntry, run_entry
from ssebench.runs._results import decode_summary, scan_results
from ssebench.runs._select import LISTED
from ssebench.spec import Backend, DecodeError, Message, RunInfo, Summary, contract, labels
from ssebench.web._files import FINAL_DIFF, MAX_TEXT, check_logs, read_text

LOG_LINES: Final = 5000
"""The most lines of a run's output one answer carries (the page asks again from there)."""


class RunRow(Message, kw_only=True, frozen=True):
    """One run in the list: live, finished, or both (a kept run)."""

    run_id: str
    task: str | None
    agent: str | None
    model: str | None
    state: str
    """The container's state (`running`, `exited`, ...), or `gone` when only its record is left."""
    outcome: str | None
    """`summary.json` `outcome`; None while the run is not yet recorded."""
    checks: Checks | None
    started_at: str | None


class RunsAnswer(Message, kw_only=True, frozen=True):
    """`GET /api/runs`."""

    backend: str
    supports_exec: bool
    runs: list[RunRow]
    total: int
    """Runs before the filters."""
    warnings: list[str]


class CheckLog(Message, kw_only=True, frozen=True):
    name: str
    log: str


class RunAnswer(Message, kw_only=True, frozen=True):
    """`GET /api/runs/{id}`: one run with its settings, grade, checks and diff."""

    run_id: str
    backend: str
    supports_exec: bool
    live: RunEntry | None
    summary: Summary | None
    run_dir: str | None
    checks: list[CheckLog]
    final_diff: str | None


class LogsAnswer(Message, kw_only=True, frozen=True):
    """`GET /api/runs/{id}/logs?since=N`: the run's output from line N on."""

    lines: list[str]
    next: int
    source: str
    """`backend` (the container's output) or `agent.log` (the record, container gone)."""


class Catalogue:
    """The runs of one backend and one results folder."""

    def __init__(self, backend: Backend[Any], results: Path) -> None:
        self.backend = backend
        self.results = results.absolute()

    def live(self, run_id: str | None = None) -> list[RunInfo]:
        wanted = dict(LISTED)
        if run_id is not None:
            wanted[labels.RUN_ID] = run_id
        return self.backend.list_runs(wanted)

    def runs(self, filters: dict[str, str]) -> RunsAnswer:
        """Every run, newest first, with those the filters (task, agent, model, outcome) keep."""
        warnings: list[str] = []
        finished = scan_results(self.results, warnings.append)
        rows: dict[str, RunRow] = {}
        for run in finished:
            rows[run.run_id] = RunRow(
                run_id=run.run_id,
                task=run.task,
                agent=run.agent,
                model=run.model,
                state="gone",
                outcome=run.outcome,
                checks=run.checks,
                started_at=run.started_at,
            )
        for info in self.live():
            entry = run_entry(info)
            known = rows.get(info.run_id)
            rows[info.run_id] = RunRow(
                run_id=info.run_id,
                task=entry.task,
                agent=entry.agent,
                model=entry.model,
                state=info.state,
                outcome=None if known is None else known.outcome,
                checks=None if known is None else known.checks,
                started_at=info.created_at if known is None else known.started_at,
            )
        ordered = sorted(rows.values(), key=lambda row: row.started_at or "", reverse=True)
        kept = [row for row in ordered if _matches(row, filters)]
        return RunsAnswer(
            backend=self.backend.name,
            supports_exec=self.backend.supports_exec,
            runs=kept,
            total=len(ordered),
            warnings=warnings,
        )

    def find(self, run_id: str) -> tuple[RunInfo | None, Path | None]:
        """The live run with this ID (if its container exists) and its run directory.

        The run directory is only one under the results folder: a run's label
        elsewhere is not followed.
        """
        found = self.live(run_id)
        info = found[0] if len(found) == 1 else None
        folder = None
        if info is not None:
            folder = self._inside(info.labels.get(labels.RESULTS))
        if folder is None:
            for run in scan_results(self.results, lambda _: None):
                if run.run_id == run_id:
                    folder = Path(run.run_dir)
                    break
        return info, folder

    def _inside(self, folder: str | None) -> Path | None:
        if not folder:
            return None
        # normpath: a `..` in the label must not lead out of the results folder.
        path = Path(os.path.normpath(Path(folder).absolute()))
        return path if path.is_relative_to(self.results) else None

    def run(self, run_id: str) -> RunAnswer | None:
        """One run, or None when neither the backend nor the results know it."""
        info, folder = self.find(run_id)
        if info is None and folder is None:
            return None
        summary = None if folder is None else read_summary(folder)
        checks = []
        if folder is not None:
            for name, file in check_logs(folder):
                checks.append(CheckLog(name=name, log=read_text(folder, file) or ""))
        return RunAnswer(
            run_id=run_id,
            backend=self.backend.name,
            supports_exec=self.backend.supports_exec,
            live=None if info is None else run_entry(info),
            summary=summary,
            run_dir=None if folder is None else str(folder),
            checks=checks,
            final_diff=None if folder is None else read_text(folder, FINAL_DIFF),
        )

    def logs(self, run_id: str, since: int) -> LogsAnswer | None:
        """The run's output from line `since` on: the container's, or the recorded agent.log."""
        info, folder = self.find(run_id)
        if info is not None:
            lines = list(self.backend.logs(info.handle, follow=False))
            source = "backend"
        elif folder is not None:
            text = read_text(folder, "agent.log") or ""
            lines = text.splitlines()
            source = "agent.log"
        else:
            return None
        chunk = lines[since : since + LOG_LINES]
        return LogsAnswer(lines=chunk, next=since + len(chunk), source=source)

    def dialog(self, run_id: str) -> list[Any] | None:
        """The agent's `archive/dialog.jsonl`, one JSON value a line (None: no such run)."""
        _, folder = self.find(run_id)
        if folder is None:
            return None
        text = read_text(folder, contract.RUN_ARCHIVE, contract.DIALOG_FILE, limit=MAX_TEXT)
        entries: list[Any] = []
        for line in (text or "").splitlines():
            if not line.strip():
                continue
            try:
                entries.append(json.loads(line))
            except ValueError:
                entries.append({"unreadable": line})
        return entries


def read_summary(folder: Path) -> Summary | None:
    data = read_text(folder, contract.SUMMARY_FILE)
    if data is None:
        return None
    try:
        return decode_summary(data.encode(), str(folder / contract.SUMMARY_FILE))
    except DecodeError:
        return None


def _matches(row: RunRow, filters: dict[str, str]) -> bool:
    for key, wanted in filters.items():
        if not wanted:
            continue
        value = row.outcome if key == "outcome" else getattr(row, key)
        if (value or "") != wanted:
            return False
    return True


def to_json(value: object) -> bytes:
    return msgspec.json.encode(value)
