#!/bin/bash
# OpenCode on the task: launch.py says what it does. The runtime's Python, isolated (-I) and
# without its site-packages (-S): the agent imports nothing of /opt/ssebench's packages.
exec /opt/ssebench/bin/python3.11 -I -S /opt/agent/launch.py
