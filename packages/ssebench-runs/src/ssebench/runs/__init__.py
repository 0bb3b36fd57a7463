"""ssebench runs: find, watch, stop and reach runs (commands arrive with their issue)."""
