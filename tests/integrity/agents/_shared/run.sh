#!/bin/bash
# Every hostile agent's command: its agent.py under the image's python3, or under
# the SSEBench runtime's Python where the case image has none (tlvkit).
PY=$(command -v python3 || echo /opt/ssebench/bin/python3.11)
exec "$PY" /opt/agent/agent.py "$@"
