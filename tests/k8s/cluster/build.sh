# Sourced by cluster.sh: build the Kubernetes binaries from the Go module proxy.
# shellcheck shell=bash

# The binaries this cluster needs, as `go build` package paths.
K8S_PACKAGES=(
  k8s.io/kubernetes/cmd/kube-apiserver
  k8s.io/kubernetes/cmd/kube-controller-manager
  k8s.io/kubernetes/cmd/kube-scheduler
  k8s.io/kubernetes/cmd/kubelet
  k8s.io/kubernetes/cmd/kubectl
  ./cmd/etcd
)
K8S_BINARIES=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl etcd kube-router)
# The NetworkPolicy controller: kube-router's firewall only (its own module, built as published).
KUBE_ROUTER_MODULE=github.com/cloudnativelabs/kube-router/v2
KUBE_ROUTER_VERSION=v2.1.0

# What the binaries depend on: the wrapper module's files and the Go toolchain.
build_key() {
  {
    go version
    (cd "$HERE/wrapper" && sha256sum go.mod go.sum tools.go cmd/etcd/main.go)
    echo "${K8S_PACKAGES[*]}"
    echo "$KUBE_ROUTER_MODULE@$KUBE_ROUTER_VERSION"
  } | sha256sum | cut -d' ' -f1
}

binaries_current() {
  [ -f "$BIN/.key" ] && [ "$(cat "$BIN/.key")" = "$(build_key)" ] || return 1
  local b
  for b in "${K8S_BINARIES[@]}"; do [ -x "$BIN/$b" ] || return 1; done
}

cmd_build() {
  # The machines' Go lives in /usr/local/go, which a non-login shell may not have on PATH.
  command -v go >/dev/null || [ ! -x /usr/local/go/bin/go ] || PATH=$PATH:/usr/local/go/bin
  command -v go >/dev/null || die "go is not installed (Go >= 1.25 is needed to build Kubernetes $K8S_VERSION)"
  export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0
  export GOMODCACHE="$CACHE/gomod" GOCACHE="$CACHE/gocache"
  mkdir -p "$CACHE"
  exec 8>"$CACHE/.build.lock"
  flock 8
  if binaries_current; then
    say "binaries of $K8S_VERSION are built ($BIN)"
    exec 8>&-
    return 0
  fi
  local log="$CACHE/build.log" work="$CACHE/wrapper" tmp="$CACHE/bin.tmp"
  say "building Kubernetes $K8S_VERSION from the Go module proxy (log: $log); a cold build takes a while"
  rm -rf "$work" "$tmp"
  cp -a "$HERE/wrapper" "$work"
  mkdir -p "$tmp"
  local minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  local ldflags="-s -w" p now
  now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  # What hack/lib/version.sh stamps into both version packages.
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    ldflags+=" -X $p.gitTreeState=clean -X $p.buildDate=$now"
  done
  local start=$SECONDS rc=0
  # Niceness 19 by default: a build beside a developer's work, or beside scripts/test.sh's
  # other tiers, takes only idle CPU (README.md of this folder says what 0 cost).
  local nice=${SSEBENCH_K8S_BUILD_NICE:-19}
  {
    echo "== $(date -u) build $K8S_VERSION with $(go version)"
    [ -f "$work/go.sum" ] || (cd "$work" && nice -n "$nice" go mod tidy)
    (cd "$work" && nice -n "$nice" /usr/bin/time -v go build -p 2 -trimpath -tags selinux,notest \
      -ldflags "$ldflags" -o "$tmp/" "${K8S_PACKAGES[@]}")
    # `go install pkg@version` builds kube-router with its own go.mod and go.sum.
    (cd "$work" && GOBIN="$tmp" GOFLAGS= nice -n "$nice" /usr/bin/time -v go install -trimpath \
      -ldflags "-s -w" "$KUBE_ROUTER_MODULE/cmd/kube-router@$KUBE_ROUTER_VERSION")
  } >>"$log" 2>&1 &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 30
    kill -0 "$pid" 2>/dev/null && say "still building ($((SECONDS - start)) s; $(du -sh "$GOCACHE" 2>/dev/null | cut -f1) in the build cache)"
  done
  wait "$pid" || rc=$?
  if [ "$rc" -ne 0 ]; then
    tail -n 30 "$log" >&2
    die "the build failed (exit $rc); full log: $log"
  fi
  local b
  for b in "${K8S_BINARIES[@]}"; do
    [ -x "$tmp/$b" ] || die "the build did not produce $b; see $log"
  done
  rm -rf "$BIN"
  mv "$tmp" "$BIN"
  build_key >"$BIN/.key"
  echo "== built in $((SECONDS - start)) s" >>"$log"
  say "built $K8S_VERSION in $((SECONDS - start)) s: $("$BIN/kube-apiserver" --version)"
  exec 8>&-
}
