#!/usr/bin/env bash
# A one-node Kubernetes cluster built from upstream sources, run as plain
# processes next to (never instead of) the Docker engine of this machine.
#
#   cluster.sh build                 build the binaries (cached; a second run builds nothing)
#   cluster.sh packages              install the missing Debian packages (`up` does it too)
#   cluster.sh up                    build if needed, start, wait until the node is Ready
#   cluster.sh down [--purge]        stop everything; --purge also deletes data and images
#   cluster.sh status                what runs; exit 0 when the node is Ready
#   cluster.sh load-image IMAGE...   push local Docker images to the node's registry;
#                                    prints the reference a pod spec uses, one a line
#   cluster.sh kubeconfig            print the path of the admin kubeconfig
#
# Everything of the cluster's own lives in /run/benchk8s, /var/lib/benchk8s,
# cgroups named benchk8s, iptables chains named BENCHK8S-*, the bridge benchk8s0
# and the binaries' cache (SSEBENCH_K8S_CACHE, default /var/cache/ssebench-k8s).
# dockerd, its containerd, its bridge and its chains are never touched.
set -euo pipefail
shopt -s globstar

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
K8S_VERSION=v1.35.4
CACHE="${SSEBENCH_K8S_CACHE:-/var/cache/ssebench-k8s}/$K8S_VERSION"
BIN="$CACHE/bin"

RUN=/run/benchk8s                 # sockets, PID files, containerd state
DATA=/var/lib/benchk8s            # configs, PKI, data, logs, registry
ETC=$DATA/etc
PKI=$DATA/pki
LOGS=$DATA/logs
KUBECONFIG_PATH=$DATA/admin.kubeconfig
CTR_SOCK=$RUN/containerd.sock

NODE_NAME=bench-node
BRIDGE=benchk8s0
POD_CIDR=10.244.0.0/24
POD_GW=10.244.0.1
CLUSTER_CIDR=10.244.0.0/16
SVC_CIDR=10.96.0.0/16
SVC_IP=10.96.0.1
APISERVER_PORT=6443
REGISTRY=127.0.0.1:${BENCHK8S_REGISTRY_PORT:-5123}
PAUSE_IMAGE=$REGISTRY/benchk8s/pause:1
CGROUP_PARENT=benchk8s
# Sysctls the kubelet sets when protectKernelDefaults is off; restored by `down`.
KUBELET_SYSCTLS=(vm/overcommit_memory kernel/panic kernel/panic_on_oops)

DAEMONS=(registry etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet kube-router)

say() { echo "k8s: $*" >&2; }
die() { echo "k8s: error: $*" >&2; exit 1; }

# shellcheck source=build.sh
. "$HERE/build.sh"

need_root() { [ "$(id -u)" = 0 ] || die "$1 needs root"; }

node_ip() {
  local dev
  dev=$(ip -4 route show default | awk '{print $5; exit}')
  [ -n "$dev" ] || dev=$(ip -4 -o addr show scope global | awk '{print $2; exit}')
  ip -4 -o addr show dev "$dev" scope global | awk '{print $4; exit}' | cut -d/ -f1
}

kubectl_() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG_PATH" "$@"; }

# ---------------------------------------------------------------- processes

# Start NAME as its own session; record "PID EXE" so `down` kills exactly it.
start_daemon() {
  local name=$1; shift
  if daemon_pid "$name" >/dev/null; then return 0; fi
  echo "== $(date -u +%FT%TZ) start: $*" >>"$LOGS/$name.log"
  setsid "$@" >>"$LOGS/$name.log" 2>&1 </dev/null &
  local pid=$!
  echo "$pid $(readlink -f "$1")" >"$RUN/$name.pid"
}

# Print the PID of NAME if the recorded process still runs that executable.
daemon_pid() {
  local f="$RUN/$1.pid" pid exe
  [ -f "$f" ] || return 1
  read -r pid exe <"$f" || return 1
  [ -n "$pid" ] && [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$exe" ] || return 1
  echo "$pid"
}

stop_daemon() {
  local name=$1 pid i
  if pid=$(daemon_pid "$name"); then
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 100); do
      # Gone, or a zombie (whose exe no longer reads).
      readlink "/proc/$pid/exe" >/dev/null 2>&1 || break
      [ "$i" = 100 ] && kill -KILL "$pid" 2>/dev/null
      sleep 0.1
    done
  fi
  rm -f "$RUN/$name.pid"
}

# wait_for WHAT SECONDS CMD...: retry CMD until it succeeds.
wait_for() {
  local what=$1 secs=$2 i; shift 2
  for i in $(seq $((secs * 4))); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.25
  done
  die "$what did not come up within ${secs}s (logs: $LOGS)"
}

# ---------------------------------------------------------------- prerequisites

ensure_packages() {
  local missing=() cmd pkg
  for pair in containerd:containerd runc:runc docker-registry:docker-registry \
              iptables:iptables ip6tables:iptables openssl:openssl gcc:gcc python3:python3 \
              /usr/lib/cni/bridge:containernetworking-plugins /usr/include/stdio.h:libc6-dev \
              /bin/busybox:busybox-static curl:curl ss:iproute2 flock:util-linux ipset:ipset; do
    cmd=${pair%%:*}; pkg=${pair#*:}
    if [ "${cmd#/}" != "$cmd" ]; then [ -e "$cmd" ] && continue
    else command -v "$cmd" >/dev/null && continue; fi
    missing+=("$pkg")
  done
  [ ${#missing[@]} = 0 ] && return 0
  say "installing Debian packages: ${missing[*]}"
  # Debian's sysvinit scripts would start containerd/docker-registry; keep apt from it.
  local prc=/usr/sbin/policy-rc.d made=
  if [ ! -e "$prc" ]; then printf '#!/bin/sh\nexit 101\n' >"$prc"; chmod +x "$prc"; made=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 update -qq
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  [ -n "$made" ] && rm -f "$prc"
  return 0
}

# ---------------------------------------------------------------- PKI and configs

make_pki() {
  local ip=$1
  mkdir -p "$PKI"
  (
    cd "$PKI"
    umask 077
    # A new node address invalidates the serving certificates: start over.
    if [ -f apiserver.crt ] && ! openssl x509 -in apiserver.crt -noout -ext subjectAltName 2>/dev/null | grep -q "IP Address:$ip\b"; then
      rm -f ./*.crt ./*.key ./*.srl
    fi
    [ -f ca.key ] || {
      openssl genrsa -out ca.key 2048 2>/dev/null
      openssl req -x509 -new -key ca.key -subj "/CN=benchk8s-ca" -days 3650 -out ca.crt
    }
    [ -f sa.key ] || { openssl genrsa -out sa.key 2048 2>/dev/null; openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null; }
    cert() {  # NAME SUBJECT EKU [SANS]
      local name=$1 subj=$2 eku=$3 sans=${4:-}
      [ -f "$name.crt" ] && return 0
      openssl genrsa -out "$name.key" 2048 2>/dev/null
      openssl req -new -key "$name.key" -subj "$subj" -out "$name.csr"
      { echo "basicConstraints=CA:FALSE"; echo "keyUsage=critical,digitalSignature,keyEncipherment"
        echo "extendedKeyUsage=$eku"; [ -z "$sans" ] || echo "subjectAltName=$sans"; } >"$name.ext"
      openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
        -extfile "$name.ext" -out "$name.crt" 2>/dev/null
      rm -f "$name.csr" "$name.ext"
    }
    cert apiserver "/CN=kube-apiserver" serverAuth \
      "DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost,IP:127.0.0.1,IP:$ip,IP:$SVC_IP,IP:$POD_GW"
    cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
    cert admin "/O=system:masters/CN=benchk8s-admin" clientAuth
    cert controller-manager "/CN=system:kube-controller-manager" clientAuth
    cert scheduler "/CN=system:kube-scheduler" clientAuth
    cert kubelet "/O=system:nodes/CN=system:node:$NODE_NAME" clientAuth
    cert kube-router "/CN=benchk8s:kube-router" clientAuth
    cert kubelet-serving "/CN=$NODE_NAME" serverAuth "DNS:$NODE_NAME,DNS:localhost,IP:127.0.0.1,IP:$ip"
  )
  local n
  for n in admin controller-manager scheduler kubelet kube-router; do
    write_kubeconfig "$n" "$DATA/$n.kubeconfig"
  done
}

write_kubeconfig() {  # USER PATH: certificates embedded, so the file stands alone
  local n=$1 out=$2
  (umask 077; cat >"$out.tmp" <<KC
apiVersion: v1
kind: Config
clusters:
- name: benchk8s
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority-data: $(base64 -w0 <"$PKI/ca.crt")
users:
- name: $n
  user:
    client-certificate-data: $(base64 -w0 <"$PKI/$n.crt")
    client-key-data: $(base64 -w0 <"$PKI/$n.key")
contexts:
- name: benchk8s
  context: {cluster: benchk8s, user: $n, namespace: default}
current-context: benchk8s
KC
  )
  mv "$out.tmp" "$out"
}

write_configs() {
  local ip=$1
  mkdir -p "$ETC/cni" "$ETC/certs.d/$REGISTRY"
  cat >"$ETC/containerd.toml" <<EOF
version = 2
root = "$DATA/containerd"
state = "$RUN/containerd"
oom_score = 0
[grpc]
  address = "$CTR_SOCK"
[ttrpc]
  address = "$CTR_SOCK.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$DATA/containerd-opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  # No CAP_SYS_RESOURCE on the test VMs: negative oom_score_adj fails in runc.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$ETC/cni"
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$ETC/certs.d"
EOF
  cat >"$ETC/certs.d/$REGISTRY/hosts.toml" <<EOF
server = "http://$REGISTRY"
[host."http://$REGISTRY"]
  capabilities = ["pull", "resolve"]
EOF
  # No default route in pods: only the pod subnet and the service range (via
  # the bridge, where BENCHK8S-INPUT decides what reaches the host).
  cat >"$ETC/cni/10-benchk8s.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "benchk8s",
  "plugins": [
    {
      "type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
      "ipam": {
        "type": "host-local", "dataDir": "$RUN/cni-ipam",
        "ranges": [[{"subnet": "$POD_CIDR", "gateway": "$POD_GW"}]],
        "routes": [{"dst": "$SVC_CIDR"}]
      }
    }
  ]
}
EOF
  cat >"$ETC/registry.yml" <<EOF
version: 0.1
log: {level: warn, accesslog: {disabled: true}}
storage:
  filesystem: {rootdirectory: $DATA/registry}
  delete: {enabled: true}
http: {addr: $REGISTRY, secret: $(openssl rand -hex 16)}
EOF
  echo "nameserver 127.0.0.1" >"$ETC/resolv.conf"
  cat >"$ETC/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://$CTR_SOCK
cgroupDriver: cgroupfs
cgroupRoot: /$CGROUP_PARENT
failCgroupV1: false
oomScoreAdj: 0
maxOpenFiles: $(ulimit -Hn)
address: $ip
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: $PKI/kubelet-serving.crt
tlsPrivateKeyFile: $PKI/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
clusterDomain: cluster.local
resolvConf: $ETC/resolv.conf
podLogsDir: $DATA/pod-logs
failSwapOn: false
# Every pod's process cap, as a cluster that takes runs should set it (the API has
# no per-pod limit; the runs' own \`pids\` is enforced inside the run): the host's
# pid_max is 32768, and one fork bomb must not take all of it.
podPidsLimit: 4096
# The log API serves stdout and stderr apart (the k8s backend relays them apart).
featureGates: {PodLogsQuerySplitStreams: true}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# Absolute disk floors: on a big shared disk that other work has nearly filled, a
# percentage taints the node (disk-pressure) and no pod is scheduled at all.
evictionHard: {memory.available: "200Mi", nodefs.available: "256Mi", imagefs.available: "256Mi", nodefs.inodesFree: "2%"}
serializeImagePulls: false
rotateCertificates: false
serverTLSBootstrap: false
syncFrequency: 10s
fileCheckFrequency: 10s
EOF
}

# ---------------------------------------------------------------- host plumbing

# Rules that keep pods in: (1) nothing from the pod bridge opens a connection
# to the host except the API server; (2) nothing is forwarded off the bridge
# (or onto it from other interfaces); (3) the `kubernetes` service address
# leads to the API server. Each table gets its own chain and one jump.
add_rules() {
  del_rules
  iptables -N BENCHK8S-INPUT
  iptables -A BENCHK8S-INPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT
  iptables -A BENCHK8S-INPUT -d "$POD_GW" -p tcp --dport "$APISERVER_PORT" -j ACCEPT
  iptables -A BENCHK8S-INPUT -p tcp -j REJECT --reject-with tcp-reset
  iptables -A BENCHK8S-INPUT -j REJECT --reject-with icmp-port-unreachable
  iptables -I INPUT 1 -i "$BRIDGE" -j BENCHK8S-INPUT
  iptables -N BENCHK8S-FORWARD
  iptables -A BENCHK8S-FORWARD -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT
  iptables -A BENCHK8S-FORWARD -j REJECT --reject-with icmp-net-prohibited
  iptables -I FORWARD 1 -i "$BRIDGE" -j BENCHK8S-FORWARD
  iptables -I FORWARD 1 -o "$BRIDGE" -j BENCHK8S-FORWARD
  iptables -t nat -N BENCHK8S-PREROUTING
  iptables -t nat -A BENCHK8S-PREROUTING -d "$SVC_IP" -p tcp --dport 443 -j DNAT --to-destination "$POD_GW:$APISERVER_PORT"
  iptables -t nat -I PREROUTING 1 -i "$BRIDGE" -j BENCHK8S-PREROUTING
  ip6tables -N BENCHK8S-INPUT
  ip6tables -A BENCHK8S-INPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT
  ip6tables -A BENCHK8S-INPUT -j REJECT
  ip6tables -I INPUT 1 -i "$BRIDGE" -j BENCHK8S-INPUT
  ip6tables -N BENCHK8S-FORWARD
  ip6tables -A BENCHK8S-FORWARD -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT
  ip6tables -A BENCHK8S-FORWARD -j REJECT
  ip6tables -I FORWARD 1 -i "$BRIDGE" -j BENCHK8S-FORWARD
  ip6tables -I FORWARD 1 -o "$BRIDGE" -j BENCHK8S-FORWARD
  # The same in the mangle table, which runs before every filter chain: kube-router
  # keeps its own jumps first in filter INPUT/FORWARD and ACCEPTs what the
  # NetworkPolicies allow there, so the filter chains above alone would not hold.
  # mangle cannot REJECT: new connections are dropped.
  local cmd
  for cmd in iptables ip6tables; do
    "$cmd" -t mangle -N BENCHK8S-GUARD-IN
    "$cmd" -t mangle -A BENCHK8S-GUARD-IN -m conntrack --ctstate ESTABLISHED,RELATED -j RETURN
    [ "$cmd" = ip6tables ] ||
      "$cmd" -t mangle -A BENCHK8S-GUARD-IN -d "$POD_GW" -p tcp --dport "$APISERVER_PORT" -j RETURN
    "$cmd" -t mangle -A BENCHK8S-GUARD-IN -j DROP
    "$cmd" -t mangle -I INPUT 1 -i "$BRIDGE" -j BENCHK8S-GUARD-IN
    "$cmd" -t mangle -N BENCHK8S-GUARD-FWD
    "$cmd" -t mangle -A BENCHK8S-GUARD-FWD -i "$BRIDGE" -o "$BRIDGE" -j RETURN
    "$cmd" -t mangle -A BENCHK8S-GUARD-FWD -j DROP
    "$cmd" -t mangle -I FORWARD 1 -i "$BRIDGE" -j BENCHK8S-GUARD-FWD
    "$cmd" -t mangle -I FORWARD 1 -o "$BRIDGE" -j BENCHK8S-GUARD-FWD
  done
}

# Remove every jump to a BENCHK8S-* or KUBE-* chain, then those chains (all
# flushed before any is deleted: they jump to each other), then kube-router's
# ipsets. KUBE-* are the kubelet's (canaries, KUBE-FIREWALL with its "block
# incoming localnet connections" rule) and kube-router's (KUBE-ROUTER-*,
# KUBE-POD-FW-*, KUBE-NWPLCY-*); no other Kubernetes runs on these machines, and
# Docker's chains are DOCKER*.
del_rules() {
  local cmd table rule chain chains
  for cmd in iptables ip6tables; do
    for table in filter nat mangle; do
      "$cmd" -t "$table" -S 2>/dev/null | grep -E -- '^-A [A-Z]+ .*-j (BENCHK8S-|KUBE-)' |
        while read -r rule; do
          # "-A CHAIN args" -> "-D CHAIN args"
          eval "\"$cmd\" -t \"$table\" -D ${rule#-A }" 2>/dev/null || true
        done || true
      chains=$("$cmd" -t "$table" -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^(BENCHK8S-|KUBE-)/ {print $2}')
      for chain in $chains; do "$cmd" -t "$table" -F "$chain" 2>/dev/null || true; done
      for chain in $chains; do "$cmd" -t "$table" -X "$chain" 2>/dev/null || true; done
    done
  done
  if command -v ipset >/dev/null; then
    for chain in $(ipset list -n 2>/dev/null | grep -E '^(inet6:)?KUBE-(SRC|DST)-'); do
      ipset destroy "$chain" 2>/dev/null || true
    done
  fi
}

# The kubelet wants its cgroupRoot to exist in every hierarchy.
make_cgroups() {
  local d
  for d in /sys/fs/cgroup/*/; do
    [ -f "$d/cgroup.procs" ] || continue
    mkdir -p "$d$CGROUP_PARENT"
    case "$d" in
      */cpuset/)
        cat "${d}cpuset.cpus" >"$d$CGROUP_PARENT/cpuset.cpus"
        cat "${d}cpuset.mems" >"$d$CGROUP_PARENT/cpuset.mems" ;;
    esac
  done
}

del_cgroups() {
  local d
  for d in /sys/fs/cgroup/*/"$CGROUP_PARENT"; do
    [ -d "$d" ] || continue
    # Deepest first; a cgroup with tasks left in it cannot go and is reported.
    find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || true
    [ -d "$d" ] && say "warning: cgroup $d still has tasks"
  done
  return 0
}

unmount_ours() {
  local m
  # Deepest mount points first.
  awk '{print $5}' /proc/self/mountinfo | grep -E "^($RUN|$DATA)(/|$)" | sort -r |
    while read -r m; do umount -l "$m" 2>/dev/null || true; done || true
}

save_sysctls() {
  local s
  [ -f "$RUN/sysctls" ] && return 0
  for s in "${KUBELET_SYSCTLS[@]}"; do echo "$s $(cat "/proc/sys/$s")"; done >"$RUN/sysctls"
}

restore_sysctls() {
  local s v
  [ -f "$RUN/sysctls" ] || return 0
  while read -r s v; do echo "$v" >"/proc/sys/$s" 2>/dev/null || true; done <"$RUN/sysctls"
  rm -f "$RUN/sysctls"
}

# ---------------------------------------------------------------- pause image

pause_image() {
  local out="$CACHE/pause" src="$HERE/pause/pause.c" sum
  sum=$(cat "$src" "$HERE/pause/oci-image.py" | sha256sum | cut -c1-16)
  if [ ! -f "$out/$sum.tar" ]; then
    rm -rf "$out"; mkdir -p "$out"
    gcc -Os -static -o "$out/pause" "$src"
    strip "$out/pause"
    python3 "$HERE/pause/oci-image.py" "$out/$sum.tar.tmp" "$PAUSE_IMAGE" /pause "$out/pause:/pause"
    mv "$out/$sum.tar.tmp" "$out/$sum.tar"
  fi
  echo "$out/$sum.tar"
}

ctr_() { ctr --address "$CTR_SOCK" --namespace k8s.io "$@"; }

# ---------------------------------------------------------------- health

node_ready() {
  [ "$(kubectl_ get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}

# kube-router jumps to its chains and has written its "ACCEPT what complies" rule.
kube_router_synced() {
  iptables -S FORWARD | grep -q -- '-j KUBE-ROUTER-FORWARD' &&
    iptables -S KUBE-ROUTER-FORWARD | grep -q -- '--mark 0x20000/0x20000 -j ACCEPT'
}

curl_k8s() { curl -fsS --max-time 3 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" "$@"; }

# ---------------------------------------------------------------- commands

cmd_up() {
  need_root "cluster.sh up"
  local t0=$SECONDS ip
  ensure_packages
  cmd_build
  if node_ready 2>/dev/null && [ "$(all_running)" = yes ]; then
    say "cluster is up; kubeconfig: $KUBECONFIG_PATH"
    echo "$KUBECONFIG_PATH"
    return 0
  fi
  if [ -d "$RUN" ]; then
    say "a cluster is partly up; taking it down first"
    cmd_down
  fi
  ip=$(node_ip)
  [ -n "$ip" ] || die "cannot find this machine's address (no default route?)"
  # The bridge's subnet must not collide with anything already routed here.
  if ip -4 route show | grep -v "dev $BRIDGE" | grep -q "^10\.244\."; then
    die "10.244.0.0/16 is already routed on this machine: $(ip -4 route show | grep '^10\.244\.')"
  fi
  local port
  for port in 2379 2380 "$APISERVER_PORT" 10248 10250 10257 10259 "${REGISTRY##*:}"; do
    if ss -Hltn "sport = :$port" | grep -q .; then die "port $port is taken: $(ss -Hltnp "sport = :$port")"; fi
  done
  say "starting a one-node cluster ($K8S_VERSION, node address $ip)"
  mkdir -p "$RUN" "$DATA" "$LOGS" "$ETC"
  # A fresh cluster every time; the registry (images) and the PKI are kept.
  rm -rf "$DATA/etcd" "$DATA/kubelet" "$DATA/containerd" "$DATA/pod-logs" "$DATA/containerd-opt"
  make_pki "$ip"
  write_kubeconfig admin "$KUBECONFIG_PATH"
  write_configs "$ip"
  add_rules
  make_cgroups
  save_sysctls

  start_daemon registry "$(command -v docker-registry)" serve "$ETC/registry.yml"
  start_daemon etcd "$BIN/etcd" --name benchk8s --data-dir "$DATA/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster benchk8s=http://127.0.0.1:2380 --listen-metrics-urls= \
    --quota-backend-bytes=2147483648 --unsafe-no-fsync --log-level=warn
  start_daemon containerd "$(command -v containerd)" --config "$ETC/containerd.toml"
  wait_for etcd 30 curl -fsS --max-time 2 http://127.0.0.1:2379/health
  start_daemon kube-apiserver "$BIN/kube-apiserver" \
    --etcd-servers=http://127.0.0.1:2379 \
    --bind-address=0.0.0.0 --secure-port="$APISERVER_PORT" --advertise-address="$ip" \
    --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
    --client-ca-file="$PKI/ca.crt" \
    --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" \
    --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority="$PKI/ca.crt" --kubelet-preferred-address-types=InternalIP \
    --service-account-issuer=https://kubernetes.default.svc \
    --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
    --service-cluster-ip-range="$SVC_CIDR" \
    --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
    --allow-privileged=true --profiling=false --v=1 \
    --feature-gates=PodLogsQuerySplitStreams=true
  wait_for containerd 30 ctr_ version
  ctr_ images import --all-platforms "$(pause_image)" >/dev/null
  wait_for registry 30 curl -fsS --max-time 2 "http://$REGISTRY/v2/"
  # Also in the registry: when the disk runs low, the kubelet's eviction manager deletes
  # unused images, the pause image among them (containerd 1.6 does not pin it), and
  # every new pod then waits forever for a sandbox image nothing can pull.
  ctr_ images push --plain-http "$PAUSE_IMAGE" >/dev/null
  wait_for kube-apiserver 90 curl_k8s "https://127.0.0.1:$APISERVER_PORT/readyz"
  start_daemon kube-controller-manager "$BIN/kube-controller-manager" \
    --kubeconfig="$DATA/controller-manager.kubeconfig" \
    --authentication-kubeconfig="$DATA/controller-manager.kubeconfig" \
    --authorization-kubeconfig="$DATA/controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --leader-elect=false --use-service-account-credentials=true \
    --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
    --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
    --service-cluster-ip-range="$SVC_CIDR" \
    --allocate-node-cidrs=true --cluster-cidr="$CLUSTER_CIDR" --node-cidr-mask-size=24 \
    --controllers='*' --profiling=false --v=1
  start_daemon kube-scheduler "$BIN/kube-scheduler" --kubeconfig="$DATA/scheduler.kubeconfig" \
    --authentication-kubeconfig="$DATA/scheduler.kubeconfig" \
    --authorization-kubeconfig="$DATA/scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --leader-elect=false --profiling=false --v=1
  start_daemon kubelet "$BIN/kubelet" --config="$ETC/kubelet.yaml" \
    --kubeconfig="$DATA/kubelet.kubeconfig" --root-dir="$DATA/kubelet" \
    --hostname-override="$NODE_NAME" --node-ip="$ip" --v=1
  say "waiting for the node to be Ready"
  wait_for "a Ready node" 120 node_ready
  # NetworkPolicies: kube-router's firewall only (no routing, service proxy or CNI).
  kubectl_ apply -f - >/dev/null <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "benchk8s:kube-router"}
rules:
- apiGroups: [""]
  resources: [namespaces, pods, services, endpoints, nodes]
  verbs: [get, list, watch]
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [get, list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [events]
  verbs: [create, patch, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "benchk8s:kube-router"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "benchk8s:kube-router"}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: "benchk8s:kube-router"}
EOF
  # Its iptables-restore restores only its own chains (kube-router/iptables-restore).
  (
    export PATH="$HERE/kube-router:$PATH"
    start_daemon kube-router "$BIN/kube-router" --kubeconfig="$DATA/kube-router.kubeconfig" \
      --hostname-override="$NODE_NAME" --run-firewall=true --run-router=false \
      --run-service-proxy=false --enable-cni=false --enable-ipv4=true --enable-ipv6=false \
      --service-cluster-ip-range="$SVC_CIDR" --health-port=0 --metrics-port=0 --v=1
  )
  wait_for "kube-router's first sync" 60 kube_router_synced
  wait_for "the default service account" 60 kubectl_ get serviceaccount default -n default
  wait_for "the kube-root-ca.crt config map" 60 kubectl_ get configmap kube-root-ca.crt -n default
  say "cluster is up in $((SECONDS - t0)) s; kubeconfig: $KUBECONFIG_PATH"
  echo "$KUBECONFIG_PATH"
}

all_running() {
  local d
  for d in "${DAEMONS[@]}"; do daemon_pid "$d" >/dev/null || { echo no; return; }; done
  echo yes
}

cmd_down() {
  need_root "cluster.sh down"
  local purge=${1:-} i
  if [ -d "$RUN" ] || [ -n "$purge" ]; then say "stopping the cluster"; fi
  # No new pods; then let the kubelet stop every pod (network teardown included).
  stop_daemon kube-router
  stop_daemon kube-controller-manager
  stop_daemon kube-scheduler
  if daemon_pid kubelet >/dev/null && daemon_pid kube-apiserver >/dev/null && [ -x "$BIN/kubectl" ]; then
    kubectl_ delete pods --all --all-namespaces --force --grace-period=0 --wait=false >/dev/null 2>&1 || true
    for i in $(seq 60); do
      [ -z "$(ctr_ tasks ls -q 2>/dev/null)" ] && break
      sleep 0.5
    done
  fi
  stop_daemon kubelet
  # Whatever the kubelet left: kill tasks, delete containers, via our containerd only.
  if daemon_pid containerd >/dev/null; then
    local id
    for id in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks kill -a -s KILL "$id" >/dev/null 2>&1 || true; done
    for i in $(seq 20); do
      [ -z "$(ctr_ tasks ls 2>/dev/null | awk 'NR > 1 && $3 != "STOPPED"')" ] && break
      sleep 0.25
    done
    for id in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks delete -f "$id" >/dev/null 2>&1 || true; done
    for id in $(ctr_ containers ls -q 2>/dev/null); do ctr_ containers rm "$id" >/dev/null 2>&1 || true; done
  fi
  stop_daemon containerd
  kill_our_shims
  kill_cgroup_tasks
  stop_daemon kube-apiserver
  stop_daemon etcd
  stop_daemon registry
  unmount_ours
  ip link show "$BRIDGE" >/dev/null 2>&1 && ip link del "$BRIDGE"
  del_rules
  del_cgroups
  restore_sysctls
  # The kubelet links every container log from /var/log/containers.
  find /var/log/containers -maxdepth 1 -lname "$DATA/*" -delete 2>/dev/null || true
  rmdir /var/log/containers 2>/dev/null || true
  rm -rf "$RUN"
  if [ -n "$purge" ]; then rm -rf "$DATA"; fi
  return 0
}

# containerd-shim-runc-v2 processes started by *our* containerd (their
# -address names our socket); dockerd's shims name dockerd's socket.
kill_our_shims() {
  local p
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/exe" 2>/dev/null)" = "$(readlink -f "$(command -v containerd-shim-runc-v2)")" ] || continue
    tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -q -- "-address $CTR_SOCK " || continue
    kill -KILL "${p#/proc/}" 2>/dev/null || true
  done
}

# Whatever still runs in our cgroups (everything under the kubelet's cgroupRoot is
# a pod's): containers whose shim is gone, e.g. after containerd was killed.
kill_cgroup_tasks() {
  local i pid found
  for i in $(seq 25); do
    found=
    for pid in $(cat /sys/fs/cgroup/*/"$CGROUP_PARENT"/cgroup.procs \
                     /sys/fs/cgroup/*/"$CGROUP_PARENT"/**/cgroup.procs 2>/dev/null | sort -u); do
      kill -KILL "$pid" 2>/dev/null && found=1
    done
    [ -z "$found" ] && return 0
    sleep 0.2
  done
}

cmd_status() {
  local d pid rc=0
  for d in "${DAEMONS[@]}"; do
    if pid=$(daemon_pid "$d"); then echo "$d: running (pid $pid)"; else echo "$d: stopped"; rc=1; fi
  done
  if [ -x "$BIN/kubectl" ] && [ -f "$KUBECONFIG_PATH" ] && node_ready; then
    echo "node $NODE_NAME: Ready"
  else
    echo "node $NODE_NAME: not Ready"; rc=1
  fi
  echo "kubeconfig: $KUBECONFIG_PATH"
  return $rc
}

cmd_load_image() {
  [ $# -gt 0 ] || die "usage: cluster.sh load-image IMAGE..."
  curl -fsS --max-time 2 "http://$REGISTRY/v2/" >/dev/null 2>&1 || die "the node's registry ($REGISTRY) does not answer: run cluster.sh up"
  local img name ref
  for img in "$@"; do
    name=$img
    # Drop a registry host (first component with a dot or a colon, or localhost).
    case "${name%%/*}" in *.*|*:*|localhost) [ "${name#*/}" != "$name" ] && name=${name#*/} ;; esac
    ref="$REGISTRY/$name"
    [[ "${name##*/}" == *[:@]* ]] || ref="$ref:latest"
    docker tag "$img" "$ref"
    if ! docker push -q "$ref" >/dev/null 2>"$LOGS/push.err"; then
      docker rmi "$ref" >/dev/null 2>&1 || true
      die "docker push $ref failed: $(cat "$LOGS/push.err")"
    fi
    docker rmi "$ref" >/dev/null 2>&1 || true   # the tag only; the image stays
    echo "$ref"
  done
}

case "${1:-}" in
  packages) ensure_packages ;;
  build) cmd_build ;;
  up) cmd_up ;;
  down)
    case "${2:-}" in --purge) cmd_down purge ;; "") cmd_down ;; *) die "usage: cluster.sh down [--purge]" ;; esac ;;
  status) cmd_status ;;
  load-image) shift; cmd_load_image "$@" ;;
  kubeconfig) echo "$KUBECONFIG_PATH" ;;
  *) die "usage: $0 {packages|build|up|down [--purge]|status|load-image IMAGE...|kubeconfig}" ;;
esac
