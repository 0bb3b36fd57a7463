"""`python -m ssebench.daemon` (start it with `-I`, as the entrypoint does)."""

import os
import sys
from pathlib import Path

# Root never imports from the folder it was started in (it may be the agent's tree):
# without -I, `-m` put that folder first on sys.path, and modules load lazily later.
if not sys.flags.safe_path:
    _started_in = str(Path.cwd())
    sys.path[:] = [entry for entry in sys.path if entry not in ("", _started_in)]
os.chdir("/")

from ssebench.daemon.server._server import main  # noqa: E402

sys.exit(main())
