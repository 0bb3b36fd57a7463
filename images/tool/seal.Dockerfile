# The agent layer: an agent's build (AGENT_STAGE, its Dockerfile run on the open tool
# layer) with SSEBench's own paths put back as the tool layer (TOOL_IMAGE) has them.
# Both are image IDs. Built by ssebench.backends.docker (_agent_layer.py), which
# explains why each step is safe whatever the agent's build left behind.
ARG TOOL_IMAGE
ARG AGENT_STAGE
FROM ${TOOL_IMAGE} AS tool
COPY setup.py /ssebench-tool-setup.py
RUN ["/opt/ssebench/bin/python3.11", "-I", "/ssebench-tool-setup.py", "gather"]

FROM ${AGENT_STAGE}
USER 0:0
# A file replaces whatever the agent's build left at a path; a folder then replaces
# the file: /ssebench, /ssebench-repo, /opt/ssebench, ... come back exactly.
COPY --from=tool /ssebench-seal/clear/ /
COPY --from=tool /ssebench-seal/trees/ /
# Only SSEBench's own runtime runs here, with its own loader and libraries.
RUN ["/opt/ssebench/bin/python3.11", "-I", "/ssebench-tool-setup.py", "seal"]
HEALTHCHECK NONE
