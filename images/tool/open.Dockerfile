# The open tool layer: the tool layer (TOOL_IMAGE, an image ID) without /ssebench and
# /ssebench-repo, where an agent's Dockerfile runs (docs/integrity.md: an agent's Dockerfile
# never runs where hidden material is). The files stay in the tool layer's own image
# layers, but no step built on this image sees them.
#
# Built by ssebench.backends.docker (_agent_layer.py), classic builder.
ARG TOOL_IMAGE
FROM ${TOOL_IMAGE}
COPY setup.py /ssebench-tool-setup.py
RUN ["/opt/ssebench/bin/python3.11", "-I", "/ssebench-tool-setup.py", "open"]
