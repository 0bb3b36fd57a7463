#!/bin/sh
# The run's model compares the agent's patch with the reference (through the run's key).
exec "$SSE_PYTHON" -I "$1/review.py"
