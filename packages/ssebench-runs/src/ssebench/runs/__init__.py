"""ssebench runs: find, watch, stop and reach the runs that exist.

The commands live in `ssebench.runs.cli` (`ssebench-runs`, also `ssebench
runs`); this module offers what they are built on, for tools that would
rather call Python than parse JSON.
"""

from ssebench.runs._entries import Checks, Endpoint, FinishedRun, RunEntry, RunList, run_entry
from ssebench.runs._errors import AmbiguousRunError, NoSuchRunError, NotRunningError, RunsError
from ssebench.runs._results import decode_summary, scan_results
from ssebench.runs._select import find_run, list_runs, open_backend

__all__ = [
    "AmbiguousRunError",
    "Checks",
    "Endpoint",
    "FinishedRun",
    "NoSuchRunError",
    "NotRunningError",
    "RunEntry",
    "RunList",
    "RunsError",
    "decode_summary",
    "find_run",
    "list_runs",
    "open_backend",
    "run_entry",
    "scan_results",
]
