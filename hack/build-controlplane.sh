#!/usr/bin/env bash
# Build a real Kubernetes control plane (kube-apiserver, kube-controller-manager,
# etcd) and kwok from Go modules, for the end-to-end tests in tests/e2e/.
#
#   hack/build-controlplane.sh            # prints the bin dir on the last line
#   BIN=$(hack/build-controlplane.sh)     # stdout carries only the bin dir
#
# Output (keyed by version, reused when complete):
#   ${FEDERATION_CACHE:-$HOME/.cache/federation}/controlplane/k8s-v1.34.9-kcm_etcd-v3.6.4_kwok-v0.8.0/bin/
#     kube-apiserver  kube-controller-manager  etcd  kwok  stages.yaml
# The key names the set of binaries as well as their versions ("-kcm": the
# controller manager joined the set), so a cache restored from before the
# controller manager existed is never taken as complete.
# Go's module and build caches live under ${FEDERATION_CACHE}/go so that a CI
# cache of that one directory makes rebuilds quick.
#
# Why wrapper modules: k8s.io/kubernetes and go.etcd.io/etcd/server/v3 carry
# replace directives, so `go install ...@version` refuses them. The modules in
# hack/controlplane/{k8s,etcd} pin the staging modules to real tags instead
# (kubernetes/kubernetes#79384, etcd-io/etcd#18501). Kubernetes is 1.34.9, not
# 1.34.7: the module proxy does not serve 15 k8s.io staging modules at v0.34.7
# (see hack/controlplane/k8s/go.mod). kube-controller-manager is built from the
# same k8s.io/kubernetes module as kube-apiserver, so the two always agree on
# API versions (its ReplicaSet and StatefulSet controllers create the pods of
# Deployments and StatefulSets in the e2e clusters, as in production). kwok v0.8.0 ships no default stages, so
# stages.yaml is assembled from the kwok module's kustomize/stage directory.
#
# Progress goes to stderr; requires Go >= 1.26 (kwok v0.8.0) and the Go module
# proxy. Binaries are built one at a time (about 2 GiB RSS per build).
set -euo pipefail

K8S_VERSION=v1.34.9
ETCD_VERSION=v3.6.4
KWOK_VERSION=v0.8.0

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${FEDERATION_CACHE:-$HOME/.cache/federation}
BIN=$CACHE/controlplane/k8s-${K8S_VERSION}-kcm_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}/bin

log() { printf '[build-controlplane] %s\n' "$*" >&2; }

complete() {
  [[ -x $BIN/kube-apiserver && -x $BIN/kube-controller-manager && -x $BIN/etcd && -x $BIN/kwok && -s $BIN/stages.yaml ]]
}

# Warm run: everything is already there.
if complete; then
  echo "$BIN"
  exit 0
fi

GO=${GO:-}
if [[ -z $GO ]]; then
  if command -v go >/dev/null 2>&1; then GO=$(command -v go)
  elif [[ -x /usr/local/go/bin/go ]]; then GO=/usr/local/go/bin/go
  else log "error: go not found (set GO=/path/to/go)"; exit 1
  fi
fi

for pin in "hack/controlplane/k8s/go.mod:k8s.io/kubernetes $K8S_VERSION" \
           "hack/controlplane/etcd/go.mod:go.etcd.io/etcd/server/v3 $ETCD_VERSION"; do
  grep -q "^require ${pin#*:}\$" "$ROOT/${pin%%:*}" || {
    log "error: ${pin%%:*} does not require ${pin#*:}; update the versions at the top of $0"; exit 1; }
done

mkdir -p "$BIN" "$CACHE/go"

# Serialise concurrent builders (parallel CI jobs, pytest sessions, make -j).
if command -v flock >/dev/null 2>&1; then
  exec 9>"$CACHE/controlplane/.build.lock"
  flock 9
  if complete; then echo "$BIN"; exit 0; fi
fi

export GOTOOLCHAIN=local
export CGO_ENABLED=0
export GOWORK=off
export GOFLAGS=-modcacherw
export GOMODCACHE=$CACHE/go/mod
export GOCACHE=$CACHE/go/build
export GOPATH=$CACHE/go/path
JOBS=${CONTROLPLANE_BUILD_JOBS:-2}

GO_VERSION=$("$GO" version) || { log "error: '$GO version' failed"; exit 1; }
log "go: $GO_VERSION"
log "cache: $CACHE"
start_all=$SECONDS

# build <name> <module dir> <package> <ldflags>: one binary, written atomically.
build() {
  local name=$1 dir=$2 pkg=$3 ldflags=$4 t=$SECONDS
  if [[ -x $BIN/$name ]]; then log "$name: cached"; return; fi
  (
    cd "$dir"
    if [[ ! -s go.sum ]]; then
      log "$name: go.sum missing, running go mod tidy"
      "$GO" mod tidy
    fi
    log "$name: go build $pkg"
    "$GO" build -p "$JOBS" -trimpath -ldflags "$ldflags" -o "$BIN/.$name.tmp" "$pkg"
  )
  mv -f "$BIN/.$name.tmp" "$BIN/$name"
  log "$name: built in $((SECONDS - t))s"
}

K8S_MINOR=${K8S_VERSION#v1.}; K8S_MINOR=${K8S_MINOR%%.*}
K8S_LDFLAGS="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  K8S_LDFLAGS+=" -X '$p.gitVersion=$K8S_VERSION' -X '$p.gitMajor=1' -X '$p.gitMinor=$K8S_MINOR'"
  K8S_LDFLAGS+=" -X '$p.gitTreeState=clean'"
done
build kube-apiserver "$ROOT/hack/controlplane/k8s" k8s.io/kubernetes/cmd/kube-apiserver "$K8S_LDFLAGS"
build kube-controller-manager "$ROOT/hack/controlplane/k8s" k8s.io/kubernetes/cmd/kube-controller-manager "$K8S_LDFLAGS"

build etcd "$ROOT/hack/controlplane/etcd" . \
  "-s -w -X 'go.etcd.io/etcd/api/v3/version.GitSHA=$ETCD_VERSION'"

if [[ ! -x $BIN/kwok ]]; then
  t=$SECONDS
  tmpbin=$(mktemp -d "$BIN/.kwok.XXXXXX")
  log "kwok: go install sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
  (cd "$tmpbin" && GOBIN=$tmpbin "$GO" install -p "$JOBS" -trimpath \
      -ldflags "-s -w -X 'sigs.k8s.io/kwok/pkg/consts.version=$KWOK_VERSION'" \
      "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION")
  mv -f "$tmpbin/kwok" "$BIN/kwok"
  rm -rf "$tmpbin"
  log "kwok: built in $((SECONDS - t))s"
else
  log "kwok: cached"
fi

# kwok v0.8.0 has no built-in stages: assemble them from the module zip.
STAGE_DIR=$GOMODCACHE/sigs.k8s.io/kwok@$KWOK_VERSION/kustomize/stage
if [[ ! -d $STAGE_DIR ]]; then
  (cd "$BIN" && "$GO" mod download "sigs.k8s.io/kwok@$KWOK_VERSION" >/dev/null)
fi
stages=(
  "$STAGE_DIR/node/fast/node-initialize.yaml"
  "$STAGE_DIR/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml"
  "$STAGE_DIR/pod/fast/pod-ready.yaml"
  "$STAGE_DIR/pod/fast/pod-complete.yaml"
  "$STAGE_DIR/pod/fast/pod-delete.yaml"
  "$STAGE_DIR/pod/chaos/pod-container-running-failed.yaml"
)
{
  echo "# Generated by hack/build-controlplane.sh from sigs.k8s.io/kwok@$KWOK_VERSION kustomize/stage."
  first=1
  for f in "${stages[@]}"; do
    [[ -f $f ]] || { log "error: missing kwok stage $f"; exit 1; }
    [[ $first == 1 ]] || echo '---'
    first=0
    echo "# ${f#"$STAGE_DIR"/}"
    # Drop leading document separators/comments (we add our own separator),
    # keep any inner ones.
    awk 'body || !/^(---[[:space:]]*|[[:space:]]*(#.*)?)$/ { body = 1; print }' "$f"
  done
} > "$BIN/.stages.yaml.tmp"
want=${#stages[@]}
got=$(grep -c '^kind: Stage$' "$BIN/.stages.yaml.tmp" || true)
if [[ $got != "$want" || $(grep -c '^kind:' "$BIN/.stages.yaml.tmp") != "$want" ]]; then
  log "error: expected $want kwok Stage documents in stages.yaml, found $got"; exit 1
fi
mv -f "$BIN/.stages.yaml.tmp" "$BIN/stages.yaml"

log "kube-apiserver: $("$BIN/kube-apiserver" --version 2>&1)"
log "kube-controller-manager: $("$BIN/kube-controller-manager" --version 2>&1)"
log "etcd: $("$BIN/etcd" --version 2>&1 | head -1)"
log "done in $((SECONDS - start_all))s"
complete
echo "$BIN"
