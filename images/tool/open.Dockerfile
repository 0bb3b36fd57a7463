# The open tool layer: the tool layer (TOOL_IMAGE, an image ID) without /ssebench and
# /ssebench-repo, where an agent's Dockerfile runs in sandbox mode (docs/integrity.md: an
# agent's Dockerfile never runs where hidden material is, and the agent's container never
# holds it). The files stay in the tool layer's own image layers, but no step built on
# this image, and no container of it, sees them.
#
# The agent's container runs SSEBench's launcher as model (the backend sets the same
# entrypoint and user whatever an image says): it waits for the checker, which runs
# from the tool layer itself, and runs the agent's CMD.
#
# Built by ssebench.backends.docker (_agent_layer.py), classic builder.
ARG TOOL_IMAGE
FROM ${TOOL_IMAGE}
COPY setup.py /ssebench-tool-setup.py
RUN ["/opt/ssebench/bin/python3.11", "-I", "/ssebench-tool-setup.py", "open"]
WORKDIR /
# -I: the working directory (the shared source tree) never joins the import path.
ENTRYPOINT ["/opt/ssebench/bin/python3.11", "-I", "-m", "ssebench.daemon.launcher"]
