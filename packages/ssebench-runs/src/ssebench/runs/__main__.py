"""`python -m ssebench.runs`: the same as `ssebench-runs`."""

from ssebench.runs.cli import main

main()
