#!/bin/bash
# mini-swe-agent on an SSEBench task: the task's text from the daemon's /project, the
# model through the gateway (SSE_BASE_URL, SSE_API_KEY: read from the environment by
# sse_mswea.py, never put on a command line), one line per model call in
# $SSE_ARCHIVE/dialog.jsonl, the trajectory in $SSE_ARCHIVE/trajectory.json.
# The run's TIMEOUT is kept by the entrypoint, which kills the agent there; each
# dialog line is written when its call returns, so a killed agent loses none.
# In sidecar mode (SSE_MODE) its commands go through the daemon's bash tool, in the
# checker where the project's toolchain is; in sandbox mode through its own local
# shell, in its own container, which holds the project and its toolchain.
set -euo pipefail
export MSWEA_CONFIGURED=true MSWEA_GLOBAL_CONFIG_DIR=/tmp/mswea-config
export MSWEA_COST_TRACKING=ignore_errors MSWEA_SILENT_STARTUP=1
export LITELLM_LOCAL_MODEL_COST_MAP=True LITELLM_LOG=ERROR NO_COLOR=1
export PYTHONPATH=/opt/agent PYTHONDONTWRITEBYTECODE=1
python=/opt/agent/venv/bin/python
task=$("$python" -m sse_daemon task)
environment=local
if [ "${SSE_MODE:-sandbox}" = sidecar ]; then
    environment=sse_mswea.DaemonEnvironment
fi
exec "$python" -m minisweagent.run.mini --yolo --exit-immediately \
    -c mini.yaml -c /opt/agent/sse.yaml \
    --agent-class default --environment-class "$environment" \
    --model-class sse_mswea.DialogModel -m "openai/${SSE_MODEL_NAME:?}" \
    -o "${SSE_ARCHIVE:?}/trajectory.json" -t "$task"
