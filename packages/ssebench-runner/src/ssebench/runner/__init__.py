"""The `ssebench` command and the runner."""
