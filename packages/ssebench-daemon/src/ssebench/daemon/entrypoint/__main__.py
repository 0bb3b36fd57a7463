"""`python -m ssebench.daemon.entrypoint AGENT-COMMAND...`."""

import os
import sys

from ssebench.daemon.entrypoint._main import main

status = main()
# Everything is written and every child reaped by now: tearing the interpreter down
# (tens of milliseconds) would only delay the container's exit.
sys.stdout.flush()
sys.stderr.flush()
os._exit(status)
