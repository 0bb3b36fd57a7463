"""The daemon server (`python -m ssebench.daemon`): one API on three listeners.

Its public names are exported by `ssebench.daemon`; the modules here are its
parts (docs/agents.md).
"""
