"""`python -I -m ssebench.daemon.launcher AGENT-COMMAND...`."""

import os
import sys

from ssebench.daemon.launcher._main import main

status = main()
sys.stdout.flush()
sys.stderr.flush()
os._exit(status)
