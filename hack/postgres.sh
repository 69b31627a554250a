#!/usr/bin/env bash
# A throwaway PostgreSQL server for tests and local development.
#
#   hack/postgres.sh start    # init (once) and start; prints the SQLAlchemy URL on stdout
#   hack/postgres.sh url      # print the URL of the running server
#   hack/postgres.sh status   # exit 0 when running
#   hack/postgres.sh stop     # fast shutdown (data kept)
#   hack/postgres.sh purge    # stop and delete the data directory
#
# Environment:
#   PGTEST_DIR   where the cluster lives (default ${TMPDIR:-/tmp}/federation-postgres-$UID);
#                the integration tests pass a fresh temporary directory per session.
#   PGTEST_PORT  fixed port (default: the port used last time in PGTEST_DIR, else a free one).
#   PG_BIN       directory holding pg_ctl/initdb (default: the newest /usr/lib/postgresql/*/bin).
#
# Why like this: tests must run against a real server on a clean CI machine as root, but
# pg_ctl refuses to run as root, so as root every server command runs as the `postgres`
# user (runuser). The server listens on 127.0.0.1 only, uses trust auth, and runs with
# fsync off: it holds nothing worth keeping. When the server binaries are missing and we
# are root with apt-get, Debian's `postgresql` package is installed (a missing server is
# an error, never a reason to skip tests).
set -euo pipefail

cmd=${1:-}
DIR=${PGTEST_DIR:-${TMPDIR:-/tmp}/federation-postgres-$(id -u)}
DATA=$DIR/data
IS_ROOT=0
[ "$(id -u)" = "0" ] && IS_ROOT=1

log() { echo "postgres.sh: $*" >&2; }

find_bin() {
  if [ -n "${PG_BIN:-}" ]; then echo "$PG_BIN"; return 0; fi
  local newest
  newest=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -n "$newest" ] && [ -x "$newest/pg_ctl" ]; then echo "$newest"; return 0; fi
  if command -v pg_ctl >/dev/null 2>&1; then dirname "$(command -v pg_ctl)"; return 0; fi
  return 1
}

ensure_installed() {
  if find_bin >/dev/null; then return 0; fi
  if [ "$IS_ROOT" = 1 ] && command -v apt-get >/dev/null 2>&1; then
    log "installing PostgreSQL from Debian's packages"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
    find_bin >/dev/null && return 0
  fi
  log "PostgreSQL server binaries not found (install Debian's 'postgresql' package or set PG_BIN)"
  exit 1
}

# Run a server command as the postgres user when we are root (pg_ctl refuses root).
as_pg() {
  if [ "$IS_ROOT" = 1 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

free_port() {
  python3 - <<'EOF'
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()
EOF
}

url() {
  local port
  port=$(cat "$DIR/port" 2>/dev/null) || { log "no server in $DIR (run: hack/postgres.sh start)"; exit 1; }
  echo "postgresql+psycopg://postgres@127.0.0.1:${port}/postgres"
}

running() {
  local bin
  bin=$(find_bin) || return 1
  [ -f "$DATA/PG_VERSION" ] && as_pg "$bin/pg_ctl" -D "$DATA" status >/dev/null 2>&1
}

start() {
  ensure_installed
  local bin
  bin=$(find_bin)
  if running; then url; return 0; fi
  mkdir -p "$DIR"
  if [ "$IS_ROOT" = 1 ]; then chown postgres: "$DIR"; fi
  chmod 0700 "$DIR"
  if [ ! -f "$DATA/PG_VERSION" ]; then
    as_pg "$bin/initdb" -D "$DATA" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 \
      --no-sync >"$DIR/initdb.log" 2>&1 || { cat "$DIR/initdb.log" >&2; log "initdb failed"; exit 1; }
  fi
  local attempt port previous=""
  # A restarted cluster keeps its port (clients hold URLs) unless that port is now taken.
  [ -z "${PGTEST_PORT:-}" ] && previous=$(cat "$DIR/port" 2>/dev/null || true)
  for attempt in 1 2 3; do
    port=${PGTEST_PORT:-${previous:-$(free_port)}}
    previous=""
    if as_pg "$bin/pg_ctl" -D "$DATA" -l "$DIR/server.log" -w -t 60 -s \
        -o "-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories=$DIR \
            -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300" start; then
      echo "$port" >"$DIR/port"
      url
      return 0
    fi
    log "start on port $port failed (attempt $attempt); server log follows"
    tail -n 20 "$DIR/server.log" >&2 || true
    [ -n "${PGTEST_PORT:-}" ] && break
  done
  exit 1
}

stop() {
  local bin
  bin=$(find_bin) || return 0
  if running; then
    as_pg "$bin/pg_ctl" -D "$DATA" -m fast -w -t 60 -s stop
  fi
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  url) url ;;
  status) running ;;
  purge) stop; rm -rf "$DIR" ;;
  *) echo "usage: $0 start|stop|url|status|purge" >&2; exit 2 ;;
esac
