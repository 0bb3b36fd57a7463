"""The Kubernetes backend: each run a Job on a cluster, from prebuilt images.

Selected with `--backend k8s` (entry point `k8s`); the cluster comes from the
usual kubeconfig rules (`KUBECONFIG`, ~/.kube/config, in-cluster), the
namespace from `SSEBENCH_K8S_NAMESPACE` (default `ssebench`). The backend
needs only the namespaced Role in `role.yaml` (and, for runs with a model,
`gateway-role.yaml`'s in the gateway's namespace).

A run, in either mode, is a Job with no retries whose one pod holds the run's two
containers (`_sidecar`; docs/architecture.md) and a keeper, with no shared process namespace:

- `task`, the checker: the task's tool image (never the agent's), SSEBench's
  entrypoint as root, PID 1, with `--agent-container`: the daemon, the MCP server,
  the evaluator. It mounts the results (`SSE_RESULTS`) and archive (`SSE_ARCHIVE`)
  directories as emptyDir volumes, the source tree and sockets emptyDirs it shares
  with the agent, and a read-only `control` emptyDir. Its end is the run's.
- `run`, the agent's container: the agent's image as `model` (uid 1000, no
  capability, no privilege escalation, RuntimeDefault seccomp), SSEBench's launcher
  as its command, without the results. The backend watches it (`_agent_watch`)
  and tells the checker, by exec of `ssebench.daemon.report`, when the agent ended.
- `keeper`: the checker's image running `sleep infinity`, root with only
  CAP_DAC_READ_SEARCH, mounting the results, archive and control volumes. It never
  ends by itself, so the pod, and with it the emptyDir storage, lasts after the
  others ended, whatever their exit status, until `cleanup` deletes the Job.

Why nothing is lost: everything the entrypoint, the daemon and the agent wrote
lives in the pod's emptyDir volumes, which live as long as the pod, and the
pod lives as long as the keeper, i.e. until `cleanup`. `collect_results`
reads them through the API (`tar` in the keeper, over exec) and copies them
into the run directory. `stop` never deletes the pod: it sends SIGTERM to each
container's PID 1 by exec (the agent's first, as `model`: the container's user), and
the checker records the error grade
and the reason and exits 143; a container still there when the grace is over gets
its kill file written into `control/` through the keeper: its liveness probe
fails on it and the kubelet kills that one container (restartPolicy Never: it
stays ended; the API cannot kill one container any other way). The agent
container's probe runs nothing of its image: it is an HTTP request to the port
the checker serves (`contract.AGENT_ALIVE_PORT`, 503 once `control/kill` exists).
The pod and the keeper stay, so what was written before the kill is still
collected. Only a run whose containers never started (an image still being
pulled) has its pod deleted by `stop`: it wrote nothing.

What is copied out is tamed on the way (`_copyout`): regular files and
directories only, permission bits masked to 0755, sizes capped with a marker.

A restricted run's pod has an init container first (`policy-wait`): a
NetworkPolicy is enforced some moments after its pod starts (0.1 to 1 s on the
test cluster), so it waits until a connection to the API server's service is
refused or stays unanswered for a second, i.e. until the pod's deny rules are in
force (without it, a restricted run reached another pod in its first moments);
any other failure proves nothing and is tried again. It fails closed after 120 s.
An init container of the checker's image, so nothing of the agent's image runs,
even as `model`, before the policy holds.

`endpoint` starts a detached forwarder process (`_forward`) on 127.0.0.1 that
relays to the pod through the API, records itself in a state file so the next
call reuses it, and is ended by `cleanup`/`remove` (or by itself once the pod
is gone).

The run's environment lives in a Secret owned by the Job (only references to
it are in the Job's spec), its network in a NetworkPolicy owned by the Job: no
ingress; egress nothing when restricted, everything when open. The Job is
created suspended, its Secret and policy next (owned by it), and only then
resumed, so its pod never exists without them. Labels Kubernetes refuses as
values (the run directory) go into annotations under the same key; `list_runs`
accepts both.

The modes differ in the agent's image only (the open tool layer plus the agent in
sandbox mode, the runtime base plus the agent in sidecar mode); an init container
copies the checker image's source tree into the source volume (`_sidecar`).

`exec_argv` is an exec client of our own over the API (`_exec_cli`, run as
`python -m`), not kubectl: kubectl exec can neither switch user nor pass an
environment. Values of `--env` reach the container by the client's stdin, never
on a command line.

The model gateway (`_gateway`, `_gateway_deploy`): `ssebench proxy up --backend
k8s` deploys LiteLLM as the Deployment `ssebench-gateway` in a namespace of its
own (`SSEBENCH_K8S_GATEWAY_NAMESPACE`); a run with a model reaches its pod by
address, its NetworkPolicy allowing egress to the gateway's pods (namespace and
pod selector, port 4000) and nothing else when restricted; its key is opened,
bound to the run pod's address and closed through the gateway's admin route,
by the API server's service proxy (`gateway-role.yaml`: the one right the
backend holds there).

A run's limits (`RunSpec.resources`) are its run container's CPU and memory
limits, with small requests; as the API has no per-pod process limit, the run's
own is held inside its containers by their root process, under the node's
`podPidsLimit` (`_limits`). While the runner lives it
renews the lease annotation `ssebench.lease.renewed` of its runs' pods, so
`ssebench runs reap` finds a dead runner's runs from any machine (`_lease`).

Waiting for a pod is a watch, not a poll, and pods are listed and watched,
a run's objects created and its output read without the client's generated API
classes (`_rest`): `ssebench runs list` and a run's start cost requests and the
client's import, not seconds of model classes. `copy_from_image` (the reference
patch, before every run) execs `cat` into a short pod of the image from its
creation on, without waiting for its status to say Running (`_exec`).
"""

from __future__ import annotations

from ssebench.backends.k8s._backend import KubernetesBackend
from ssebench.backends.k8s._handle import K8sRunHandle

__all__ = ["K8sRunHandle", "KubernetesBackend"]
