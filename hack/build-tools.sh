#!/usr/bin/env bash
# Build the third-party Go clients the tests drive the service with, from their Go
# modules through the module proxy:
#
#   grpc-health-probe  the standard gRPC health checker (Kubernetes exec probes use it)
#   grpcurl            lists, describes and calls services through server reflection
#   helm               lints, renders and installs deploy/chart/
#
#   hack/build-tools.sh          # prints the bin dir on the last line
#   BIN=$(hack/build-tools.sh)   # stdout carries only the bin dir
#
# Output (keyed by version, reused when complete):
#   ${FEDERATION_CACHE:-$HOME/.cache/federation}/tools/<versions>/bin/
# Go's module and build caches are shared with hack/build-controlplane.sh under
# ${FEDERATION_CACHE}/go. Progress goes to stderr.
set -euo pipefail

HEALTH_PROBE_VERSION=v0.4.61
GRPCURL_VERSION=v1.9.4
HELM_VERSION=v3.21.4

CACHE=${FEDERATION_CACHE:-$HOME/.cache/federation}
BIN=$CACHE/tools/probe-${HEALTH_PROBE_VERSION}_grpcurl-${GRPCURL_VERSION}_helm-${HELM_VERSION}/bin

log() { printf '[build-tools] %s\n' "$*" >&2; }

complete() { [[ -x $BIN/grpc-health-probe && -x $BIN/grpcurl && -x $BIN/helm ]]; }

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

mkdir -p "$BIN" "$CACHE/go"
if command -v flock >/dev/null 2>&1; then
  exec 9>"$CACHE/tools/.build.lock"
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
JOBS=${TOOLS_BUILD_JOBS:-2}

# install <name> <package@version> [ldflags]: one binary, moved into place atomically.
install() {
  local name=$1 pkg=$2 ldflags=${3:-"-s -w"} t=$SECONDS
  if [[ -x $BIN/$name ]]; then log "$name: cached"; return; fi
  local tmp
  tmp=$(mktemp -d "$BIN/.$name.XXXXXX")
  log "$name: go install $pkg"
  (cd "$tmp" && GOBIN=$tmp "$GO" install -p "$JOBS" -trimpath -ldflags "$ldflags" "$pkg")
  mv -f "$tmp/$name" "$BIN/$name"
  rm -rf "$tmp"
  log "$name: built in $((SECONDS - t))s"
}

install grpc-health-probe "github.com/grpc-ecosystem/grpc-health-probe@$HEALTH_PROBE_VERSION"
install grpcurl "github.com/fullstorydev/grpcurl/cmd/grpcurl@$GRPCURL_VERSION" \
  "-s -w -X main.version=$GRPCURL_VERSION"
install helm "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" \
  "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"

log "grpc-health-probe: $("$BIN/grpc-health-probe" -version 2>&1 | head -1)"
log "helm: $("$BIN/helm" version --short 2>&1)"
complete
echo "$BIN"
