"""`python -m ssebench.daemon.sidecar`."""

import sys

from ssebench.daemon.sidecar._main import main

sys.exit(main())
