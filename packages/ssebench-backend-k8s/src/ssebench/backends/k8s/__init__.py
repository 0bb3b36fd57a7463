"""The Kubernetes backend: each run a Job on a cluster, from prebuilt images.

Selected with `--backend k8s` (entry point `k8s`); the cluster comes from the
usual kubeconfig rules (`KUBECONFIG`, ~/.kube/config, in-cluster), the
namespace from `SSEBENCH_K8S_NAMESPACE` (default `ssebench`). The backend
needs only the namespaced Role in `role.yaml` (and, for runs with a model,
`gateway-role.yaml`'s in the gateway's namespace).

A run (sandbox mode) is a Job with no retries whose one pod has two containers:

- `run`: the run's image, unchanged; its entrypoint is PID 1 (no shared
  process namespace). It mounts the results (`SSE_RESULTS`) and archive
  (`SSE_ARCHIVE`) directories as emptyDir volumes, the reference patch from
  the run's Secret, and a read-only `control` emptyDir.
- `keeper`: the same image running `sleep infinity`, root with only
  CAP_DAC_READ_SEARCH, mounting the same three volumes. It never ends by
  itself, so the pod, and with it the emptyDir storage, lasts after `run`
  ended, whatever its exit status, until `cleanup` deletes the Job.

Why nothing is lost: everything the entrypoint, the daemon and the agent wrote
lives in the pod's emptyDir volumes, which live as long as the pod, and the
pod lives as long as the keeper, i.e. until `cleanup`. `collect_results`
reads them through the API (`tar` in the keeper, over exec) and copies them
into the run directory. `stop` never deletes the pod: it sends SIGTERM to the
entrypoint (`kill -TERM 1` exec'd in `run`), which records the error grade and
the reason and exits 143; if it is still there when the grace is over, `stop`
writes `control/kill` through the keeper, the `run` container's liveness probe
fails on it and the kubelet kills that one container (restartPolicy Never: it
stays ended; the API cannot kill one container any other way). The pod and the
keeper stay, so what was written before the kill is still collected. Only a
run whose container never started (an image still being pulled) has its pod
deleted by `stop`: it wrote nothing.

What is copied out is tamed on the way (`_copyout`): regular files and
directories only, permission bits masked to 0755, sizes capped with a marker.

A restricted run's pod has an init container first (`policy-wait`): a
NetworkPolicy is enforced some moments after its pod starts (0.1 to 1 s on the
test cluster), so it waits until a connection to the API server's service is
refused or stays unanswered for a second, i.e. until the pod's deny rules are in
force (without it, a restricted run reached another pod in its first moments);
any other failure proves nothing and is tried again. It fails closed after 120 s.
An init container, not a wait in the run container: the backend does not know the
image's command, so it cannot put anything before it.

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

A sidecar run is the same pod with a third container, `task` (the task image,
the daemon as PID 1), listed first, and two more emptyDir volumes both containers
mount, the source tree and the daemon's sockets; an init container copies the
task image's source tree into the first (`_sidecar`). Its results live in the
same emptyDirs, held by the same keeper, so the same reasoning holds. `stop`
ends the agent's container first, then the task's, each with its own kill file.

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
