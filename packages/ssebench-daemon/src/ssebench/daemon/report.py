"""`python -I -m ssebench.daemon.report STATUS`: the backend tells the checker the agent ended.

The backend watches the agent container (the checker cannot: it shares no process
namespace with it) and, once the agent's process exited, runs this in the checker,
as root, with its exit status (124 when the backend cut it off at `TIMEOUT`). It
posts `/admin/agent_exited` on the admin socket: the daemon hands the status to the
entrypoint, which runs the `after-agent` plugins, ends the agent phase (every `model`
process in the checker killed, agent-facing tools refused) and grades. Standard
library and the daemon's client only: it starts on the checker's sealed runtime while
the run waits.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import Final

from ssebench.daemon._client import DaemonUnreachableError
from ssebench.daemon._client._api import DaemonApi
from ssebench.daemon._errors import DaemonError
from ssebench.spec import contract

REPORT_TIMEOUT: Final = 60.0
"""Seconds the daemon gets to take the report."""

START_WAIT: Final = 120.0
"""Seconds to wait for the daemon to answer at all: an agent can end (or its launcher
refuse to start) before the checker's daemon is up."""


def main(argv: Sequence[str] | None = None) -> int:
    """Report the agent's exit status to the checker's daemon.

    Returns:
        0 once the daemon took the report; 1 when it could not be told; 2 for
        a bad argument.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or not (args[0].isascii() and args[0].isdigit() and int(args[0]) < 256):
        sys.stderr.write("usage: python -m ssebench.daemon.report STATUS (0 to 255)\n")
        return 2
    api = DaemonApi(contract.ADMIN_SOCKET)
    end = time.monotonic() + START_WAIT
    try:
        while True:
            try:
                answer = api.agent_exited(exit_code=int(args[0]), timeout=REPORT_TIMEOUT)
                break
            except DaemonUnreachableError:
                if time.monotonic() >= end:
                    raise
                time.sleep(0.1)
    except (DaemonError, OSError) as exc:
        sys.stderr.write(f"ssebench-report: cannot tell the daemon the agent ended: {exc}\n")
        return 1
    sys.stdout.write(f"agent phase over: {answer.killed} process(es) of model killed\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
