"""`python -m ssebench.daemon`."""

import sys

from ssebench.daemon._server import main

sys.exit(main())
