"""`python -m ssebench.daemon.entrypoint AGENT-COMMAND...`."""

import sys

from ssebench.daemon.entrypoint._main import main

sys.exit(main())
