"""The central chart's probes with ``tls.enabled`` (the documented install): the kubelet's
``grpc:`` probe is plaintext only, so both probes must ask the plaintext health-only port
(``--health-listen``), never the TLS API port; without TLS they stay on the API port. The
rendered probes are then asked, as the kubelet would, of a real TLS server started with the
rendered ``--health-listen``."""

from __future__ import annotations

import asyncio
import datetime as dt
import ipaddress
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from federation.service.server import ServerTls, build_server
from federation.store import Store
from federation.store import migrate as migrations
from tests.fixtures.gotools import arun_tool
from tests.fixtures.helm import CENTRAL, CENTRAL_VALUES, one, render
from tests.fixtures.ports import free_port

pytestmark = pytest.mark.e2e

TLS_VALUES = {**CENTRAL_VALUES, "tls.enabled": "true", "tls.secretName": "central-tls"}


def _central(values: dict[str, Any]) -> dict[str, Any]:
    containers: list[dict[str, Any]] = one(render(CENTRAL, values), "Deployment")["spec"]["template"]["spec"][
        "containers"]
    return containers[0]


def test_with_tls_both_probes_ask_the_plaintext_health_port_and_without_tls_the_api_port() -> None:
    central = _central(TLS_VALUES)
    ports = {p["name"]: p["containerPort"] for p in central["ports"]}
    assert ports == {"grpc": 50051, "health": 50052, "metrics": 9090}
    assert "--health-listen=0.0.0.0:50052" in central["args"]
    assert central["readinessProbe"]["grpc"] == {"port": 50052}
    assert central["livenessProbe"]["grpc"] == {"port": 50052, "service": "grpc.health.v1.Health"}

    moved = _central({**TLS_VALUES, "healthPort": "6000"})
    assert "--health-listen=0.0.0.0:6000" in moved["args"]
    assert moved["readinessProbe"]["grpc"]["port"] == moved["livenessProbe"]["grpc"]["port"] == 6000

    plaintext = _central(CENTRAL_VALUES)  # unchanged without TLS
    assert not [a for a in plaintext["args"] if a.startswith("--health-listen")]
    assert "health" not in {p["name"] for p in plaintext["ports"]}
    assert plaintext["readinessProbe"]["grpc"] == {"port": 50051}
    assert plaintext["livenessProbe"]["grpc"] == {"port": 50051, "service": "grpc.health.v1.Health"}


async def test_the_rendered_tls_probes_pass_against_a_running_tls_server(tmp_path: Path) -> None:
    """What the kubelet would ask (plaintext, at the rendered probe port and service) of a server
    started with the rendered TLS and ``--health-listen`` flags."""
    port = free_port()
    central = _central({**TLS_VALUES, "healthPort": str(port)})
    (listen,) = [a.removeprefix("--health-listen=") for a in central["args"] if a.startswith("--health-listen=")]
    assert listen == f"0.0.0.0:{port}"
    cert, key = _self_signed(tmp_path)
    url = f"sqlite:///{tmp_path / 'federation.db'}"
    await asyncio.to_thread(migrations.upgrade, url)
    store = Store(url)
    server = await build_server(store, tls=ServerTls(cert, key), health_listen=f"127.0.0.1:{port}")
    try:
        for probe in (central["readinessProbe"]["grpc"], central["livenessProbe"]["grpc"]):
            proc = await arun_tool("grpc-health-probe", f"-addr=127.0.0.1:{probe['port']}",
                                   f"-service={probe.get('service', '')}", "-connect-timeout=5s")
            assert proc.returncode == 0 and "SERVING" in proc.stdout + proc.stderr, (probe, proc.stderr)
        # The API port itself refuses the plaintext probe: TLS is on.
        api = await arun_tool("grpc-health-probe", f"-addr=127.0.0.1:{server.port}", "-connect-timeout=3s")
        assert api.returncode != 0
    finally:
        await server.stop(grace=1.0)
        store.dispose()


def _self_signed(directory: Path) -> tuple[str, str]:
    """A throwaway certificate for 127.0.0.1 (the probe never reads it: the point is that TLS is on)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "federation")])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / "tls.crt", directory / "tls.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_path), str(key_path)
