#!/usr/bin/env bash
# Make sure PostgreSQL server binaries from Debian's packages are present.
# The tests start their own throwaway server (as the `postgres` user when run as root);
# this script only installs the packages. A missing server is an error, never a skip.
set -euo pipefail
if ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
  echo "installing PostgreSQL from Debian's packages" >&2
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  exit 0
fi
echo "PostgreSQL server binaries not found (/usr/lib/postgresql/*/bin/pg_ctl); install Debian's 'postgresql' package" >&2
exit 1
