"""`python -m ssebench.daemon.mcp`."""

import sys

from ssebench.daemon.mcp._main import main

sys.exit(main())
