"""A real Prometheus server (Debian's ``prometheus`` package) scraping endpoints on loopback.

``hack/ensure-prometheus.sh`` (run by ``make test``) installs it; a missing binary FAILS
the test with that hint, never skips it. The server gets a temporary config and TSDB,
scrapes every target every second, and is queried through its HTTP API, exactly as an
operator's Prometheus would see our ``/metrics``.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.ports import free_port, port_taken

HINT = "run hack/ensure-prometheus.sh (Debian's 'prometheus' package provides prometheus and promtool)"


def binary(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} not found: {HINT}", pytrace=False)
    return found


def get(url: str, timeout: float = 5.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return bytes(response.read())


def promtool_check(text: bytes) -> subprocess.CompletedProcess[str]:
    """``promtool check metrics`` on an exposition (returns 0 and prints nothing when clean)."""
    return subprocess.run([binary("promtool"), "check", "metrics"], input=text.decode(), capture_output=True,
                          text=True, timeout=60)


@dataclass
class Prometheus:
    url: str

    def api(self, path: str, **params: str) -> Any:
        body = json.loads(get(f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}"))
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        return list(self.api("query", query=expr)["result"])

    def targets_up(self) -> dict[str, str]:
        return {t["labels"]["job"]: t["health"] for t in self.api("targets")["activeTargets"]}

    def wait(self, expr: str, timeout: float = 30.0) -> list[dict[str, Any]]:
        """Poll until ``expr`` returns at least one series; fail with the last answer otherwise."""
        deadline = time.monotonic() + timeout
        while True:
            result = self.query(expr)
            if result:
                return result
            if time.monotonic() > deadline:
                raise AssertionError(f"Prometheus returned nothing for {expr!r} after {timeout}s; "
                                     f"targets: {self.targets_up()}")
            time.sleep(0.25)


def _ready(server: Prometheus, proc: subprocess.Popen[bytes]) -> bool:
    """Whether Prometheus answers ready within 30 s (False as soon as it exits)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            get(f"{server.url}/-/ready", timeout=1)
            return True
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                return False
            time.sleep(0.2)


@contextlib.contextmanager
def prometheus(targets: Mapping[str, str]) -> Iterator[Prometheus]:
    """Run Prometheus scraping ``{job: "host:port"}`` every second until the block ends."""
    exe = binary("prometheus")
    directory = Path(tempfile.mkdtemp(prefix="federation-prom-"))
    jobs = "".join(f"  - job_name: {job}\n    static_configs:\n      - targets: ['{target}']\n"
                   for job, target in targets.items())
    config = directory / "prometheus.yml"
    config.write_text(f"global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n{jobs}")
    # the port may be taken between free_port() and Prometheus's bind: retried on a new one
    for attempt in range(3):
        port = free_port()
        log = (directory / "prometheus.log").open("w")
        proc = subprocess.Popen([exe, f"--config.file={config}", f"--storage.tsdb.path={directory / 'data'}",
                                 f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
        server = Prometheus(f"http://127.0.0.1:{port}")
        if _ready(server, proc):
            break
        proc.kill()
        proc.wait()
        log.close()
        output = (directory / "prometheus.log").read_text()
        if not port_taken(output) or attempt == 2:
            shutil.rmtree(directory, ignore_errors=True)
            pytest.fail(f"Prometheus did not start:\n{output[-3000:]}", pytrace=False)
    try:
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        shutil.rmtree(directory, ignore_errors=True)
