#!/usr/bin/env bash
# Make sure the Prometheus server and promtool from Debian's `prometheus` package are present.
# The metrics integration test starts its own throwaway Prometheus on loopback that scrapes the
# service, and runs `promtool check metrics` on what it scraped; this script only installs the
# package. A missing binary is an error, never a skip.
set -euo pipefail
if command -v prometheus >/dev/null && command -v promtool >/dev/null; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
  echo "installing Prometheus from Debian's packages" >&2
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  # --no-install-recommends: the server and promtool only, not the node exporter and web assets.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  exit 0
fi
echo "prometheus/promtool not found; install Debian's 'prometheus' package" >&2
exit 1
