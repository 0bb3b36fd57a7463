# The sidecar agent layer: an agent's build (AGENT_STAGE, its Dockerfile run on the
# sidecar agent base) with SSEBench's own paths put back as the base (BASE_IMAGE) has
# them; images/tool/seal.Dockerfile for a base with no task. Both are image IDs.
# Built by ssebench.backends.docker (_sidecar_layers.py), classic builder.
ARG BASE_IMAGE
ARG AGENT_STAGE
FROM ${BASE_IMAGE} AS base
COPY setup.py /ssebench-tool-setup.py
RUN ["/opt/ssebench/bin/python3.11", "-I", "/ssebench-tool-setup.py", "gather-sidecar"]

FROM ${AGENT_STAGE}
USER 0:0
COPY --from=base /ssebench-seal/clear/ /
COPY --from=base /ssebench-seal/trees/ /
RUN ["/opt/ssebench/bin/python3.11", "-I", "/ssebench-tool-setup.py", "seal-sidecar"]
HEALTHCHECK NONE
