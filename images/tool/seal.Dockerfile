# The seal of an agent image, both modes: the agent's build (AGENT_STAGE, its Dockerfile
# run on BASE_IMAGE: the open tool layer in sandbox mode, images/sidecar-agent in sidecar
# mode) with SSEBench's own paths put back as the base has them, and swept. Both are
# image IDs. Built by ssebench.backends.docker (_agent_layer.py, _sidecar_layers.py),
# classic builder; _agent_layer.py explains why each step is safe whatever the agent's
# build left behind.
ARG BASE_IMAGE
ARG AGENT_STAGE
FROM ${BASE_IMAGE} AS base
COPY setup.py /ssebench-tool-setup.py
RUN ["/opt/ssebench/bin/python3.11", "-I", "/ssebench-tool-setup.py", "gather"]

FROM ${AGENT_STAGE}
USER 0:0
# A file replaces whatever the agent's build left at a path; a folder then replaces
# the file: /opt/ssebench, /run/ssebench, ... come back exactly.
COPY --from=base /ssebench-seal/clear/ /
COPY --from=base /ssebench-seal/trees/ /
# Only SSEBench's own runtime runs here, with its own loader and libraries. It records
# the agent's command (the agent stage's CMD, as JSON) for the launcher.
ARG AGENT_COMMAND
RUN ["/opt/ssebench/bin/python3.11", "-I", "/ssebench-tool-setup.py", "seal"]
HEALTHCHECK NONE
