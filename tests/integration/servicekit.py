"""Helpers for the service tests: a real server on 127.0.0.1 port 0 over a real store.

``running(store, ...)`` is an async context manager rather than a fixture so each test
says which auth mode and control loop it runs with, and the server is stopped even when
the test fails.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any

import grpc
import pytest
from sqlalchemy import func, select

from federation.client import FederationClient, ServiceError
from federation.service.auth import Authenticator, digest
from federation.service.server import RunningServer, build_server
from federation.store import Store
from federation.store.models import JobEventRow, JobRow, QueueRow
from federation.v1 import queues_pb2, types_pb2

ADMIN, NLP, VISION = "tok-admin", "tok-nlp", "tok-vision"
EAST, WEST = "tok-east", "tok-west"
TOKENS: dict[str, Any] = {
    "tenants": {f"sha256:{digest(ADMIN)}": "ops", digest(NLP): "nlp", VISION: "vision"},
    "admins": ["ops"],
    "clusters": {"east": digest(EAST), "west": WEST},
}


def secured() -> Authenticator:
    return Authenticator.from_mapping(TOKENS)


@contextlib.asynccontextmanager
async def running(store: Store, auth: Authenticator | None = None, **kwargs: Any) -> AsyncIterator[RunningServer]:
    kwargs.setdefault("control_loop", False)
    server = await build_server(store, listen="127.0.0.1:0", auth=auth, **kwargs)
    try:
        yield server
    finally:
        await server.stop(grace=1.0)


@contextlib.asynccontextmanager
async def client(server: RunningServer, token: str | None = None) -> AsyncIterator[FederationClient]:
    async with FederationClient(f"127.0.0.1:{server.port}", token=token, timeout=20.0) as c:
        yield c


async def refused(call: Awaitable[Any], code: grpc.StatusCode) -> ServiceError:
    """The error ``call`` fails with, which must carry ``code``."""
    with pytest.raises(ServiceError) as err:
        await call
    assert err.value.code == code, err.value
    return err.value


def counts(store: Store) -> tuple[int, int, int]:
    """(jobs, job events, queues): bad input must leave all three unchanged."""
    with store.db.read() as session:
        return (
            int(session.scalar(select(func.count()).select_from(JobRow)) or 0),
            int(session.scalar(select(func.count()).select_from(JobEventRow)) or 0),
            int(session.scalar(select(func.count()).select_from(QueueRow)) or 0),
        )


def queue(name: str, *owners: str, weight: int = 1) -> queues_pb2.Queue:
    return queues_pb2.Queue(name=name, weight=weight, owners=list(owners))


def spec(name: str, queue: str = "research", *, replicas: int = 2, gpus: str = "1",
         **fields: Any) -> types_pb2.JobSpec:
    """A small valid JobSpec; ``fields`` override top-level JobSpec fields."""
    msg = types_pb2.JobSpec(
        name=name, queue=queue, priority=0,
        tasks=[types_pb2.TaskSpec(name="worker", replicas=replicas,
                                  resources={"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": gpus})],
    )
    for key, value in fields.items():
        if isinstance(value, types_pb2.NetworkTopology):
            msg.network_topology.CopyFrom(value)
        elif isinstance(value, list):  # a repeated field
            getattr(msg, key).extend(value)
        else:
            setattr(msg, key, value)
    return msg


def make_pki(directory: Path) -> dict[str, str]:
    """A throwaway CA, a server certificate for 127.0.0.1/localhost and a client certificate (PEM paths)."""
    import datetime as dt
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    def key() -> ec.EllipticCurvePrivateKey:
        return ec.generate_private_key(ec.SECP256R1())

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    now = dt.datetime.now(dt.UTC)
    ca_key = key()
    ca = (x509.CertificateBuilder().subject_name(name("federation-test-ca")).issuer_name(name("federation-test-ca"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))

    def leaf(cn: str, usage: x509.ObjectIdentifier, sans: list[x509.GeneralName]) -> tuple[bytes, bytes]:
        k = key()
        cert = (x509.CertificateBuilder().subject_name(name(cn)).issuer_name(ca.subject).public_key(k.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
                .add_extension(x509.SubjectAlternativeName(sans), critical=False)
                .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
                .sign(ca_key, hashes.SHA256()))
        return (cert.public_bytes(serialization.Encoding.PEM),
                k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()))

    server_cert, server_key = leaf("federation", ExtendedKeyUsageOID.SERVER_AUTH,
                                   [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    client_cert, client_key = leaf("fedctl", ExtendedKeyUsageOID.CLIENT_AUTH, [x509.DNSName("fedctl")])
    files = {
        "ca": ca.public_bytes(serialization.Encoding.PEM),
        "server_cert": server_cert, "server_key": server_key,
        "client_cert": client_cert, "client_key": client_key,
    }
    out: dict[str, str] = {}
    for label, data in files.items():
        path = directory / f"{label}.pem"
        path.write_bytes(data)
        out[label] = str(path)
    return out
