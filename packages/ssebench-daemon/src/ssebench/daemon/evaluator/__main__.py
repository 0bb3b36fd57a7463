"""`python -m ssebench.daemon.evaluator`."""

import sys

from ssebench.daemon.evaluator._main import main

sys.exit(main())
