#!/bin/sh
# A manifest of every result file: path, size, SHA-256 and the component that wrote it.
exec "$SSE_PYTHON" -I "$1/artifact.py"
