"""Real Kubernetes control planes for end-to-end tests.

One etcd is shared by N kube-apiservers, each with its own ``--etcd-prefix``,
CA, serving certificate, admin client certificate (``O=system:masters``) and
service-account key, as Kubernetes' own integration tests do.  Each cluster
gets a kwok controller that simulates fake nodes and pods, plus the HyperNode
CRD (``deploy/chart/federation-agent/files/hypernode.yaml``), and a kube-controller-manager built from the
same Kubernetes module running the Deployment, ReplicaSet, StatefulSet, garbage
collector, namespace, PVC-protection and ephemeral-volume controllers, so workloads create
their pods, pods get the claims of their generic ephemeral volumes, and owned objects go
with their owners as in production.  No scheduler runs: bind pods yourself (Binding
subresource).

This module is plain Python (no pytest).  Typical use::

    bin_dir = build_binaries()               # hack/build-controlplane.sh
    with ControlPlane(bin_dir, ["east", "west"]) as cp:
        cp.create_gpu_nodes("east", ["east-gpu-0"], gpus=8)
        async with await cp.api_client("east") as api:
            ...

Binaries come from ``hack/build-controlplane.sh`` (kube-apiserver,
kube-controller-manager, etcd, kwok and kwok's ``stages.yaml``).  Set ``FEDERATION_E2E_KEEP_DIR=1`` to keep
the work directory (logs, kubeconfigs, certificates) after ``stop()``.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import ctypes
import datetime as _dt
import http.client
import ipaddress
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.fixtures.ports import free_port, port_taken

if TYPE_CHECKING:
    from kubernetes_asyncio.client import ApiClient

__all__ = [
    "BUILD_SCRIPT",
    "HYPERNODE_CRD",
    "KWOK_FAKE_NODE_ANNOTATION",
    "KWOK_FAKE_NODE_TAINT",
    "POD_FAIL_LABEL",
    "ApiError",
    "Cluster",
    "ControlPlane",
    "ControlPlaneError",
    "build_binaries",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO_ROOT / "hack" / "build-controlplane.sh"
HYPERNODE_CRD = REPO_ROOT / "deploy" / "chart" / "federation-agent" / "files" / "hypernode.yaml"

HYPERNODE_GROUP = "topology.volcano.sh"
HYPERNODE_VERSION = "v1alpha1"
HYPERNODE_PLURAL = "hypernodes"

#: Nodes carrying this annotation (value "fake") are managed by kwok.
KWOK_FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node"
#: Taint put on every fake node; pods must tolerate it to be scheduled by a
#: real scheduler (binding directly ignores taints).
KWOK_FAKE_NODE_TAINT = {"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}
#: Label a bound pod with ``{POD_FAIL_LABEL: "true"}`` and kwok moves it from
#: Running to Failed (annotations ``<label>/exit-code|reason|message|delay``).
POD_FAIL_LABEL = "pod-container-running-failed.stage.kwok.x-k8s.io"

_LOG_TAIL_LINES = 40


class ControlPlaneError(RuntimeError):
    """A control-plane process failed to build, start or answer."""


class ApiError(ControlPlaneError):
    """The apiserver answered a request with a non-2xx status."""

    def __init__(self, method: str, path: str, status: int, body: str):
        self.method, self.path, self.status, self.body = method, path, status, body
        super().__init__(f"{method} {path}: HTTP {status}: {body[:2000]}")


# ---------------------------------------------------------------------------
# Building
# ---------------------------------------------------------------------------


def build_binaries(*, timeout: float | None = None, env: Mapping[str, str] | None = None) -> Path:
    """Run ``hack/build-controlplane.sh`` and return the bin directory.

    A warm run (everything cached) returns in well under a second; a cold
    build takes many minutes.  Raises :class:`ControlPlaneError` with the tail
    of the build log when the build fails.
    """
    override = os.environ.get("FEDERATION_CONTROLPLANE_BIN")
    if override:
        return Path(override)
    proc = subprocess.run(
        ["bash", str(BUILD_SCRIPT)],
        cwd=REPO_ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = "\n".join(proc.stderr.strip().splitlines()[-_LOG_TAIL_LINES:])
        raise ControlPlaneError(f"{BUILD_SCRIPT} failed with exit code {proc.returncode}:\n{tail}")
    bin_dir = Path(lines[-1])
    missing = [n for n in ("kube-apiserver", "kube-controller-manager", "etcd", "kwok", "stages.yaml")
               if not (bin_dir / n).exists()]
    if missing:
        raise ControlPlaneError(f"{BUILD_SCRIPT} printed {bin_dir}, which lacks {missing}")
    return bin_dir


# ---------------------------------------------------------------------------
# Certificates
# ---------------------------------------------------------------------------


def _new_key() -> ec.EllipticCurvePrivateKey:
    # ECDSA P-256: fast to generate and accepted by kube-apiserver for serving,
    # client authentication and service-account token signing (ES256).
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


@dataclass
class _Issued:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @property
    def cert_pem(self) -> bytes:
        return _cert_pem(self.cert)

    @property
    def key_pem(self) -> bytes:
        return _key_pem(self.key)


def _base_builder(subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey,
                  *, ca: bool) -> x509.CertificateBuilder:
    """Subject, issuer, key, a week's validity, and the constraints and key usage of a CA
    (signs certificates) or of a leaf (signs handshakes only)."""
    now = _dt.datetime.now(_dt.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _dt.timedelta(hours=1))
        .not_valid_after(now + _dt.timedelta(days=7))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=ca,
                crl_sign=ca,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    )


def _make_ca(common_name: str) -> _Issued:
    key = _new_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (
        _base_builder(name, name, key, ca=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return _Issued(cert, key)


def _issue(
    ca: _Issued,
    common_name: str,
    *,
    organizations: Sequence[str] = (),
    server: bool = False,
    dns_names: Sequence[str] = (),
    ips: Sequence[str] = (),
) -> _Issued:
    key = _new_key()
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    builder = (
        _base_builder(x509.Name(attrs), ca.cert.subject, key, ca=False)
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]),
            critical=False,
        )
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), critical=False)
    )
    if dns_names or ips:
        sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns_names]
        sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return _Issued(builder.sign(ca.key, hashes.SHA256()), key)


# ---------------------------------------------------------------------------
# Processes
# ---------------------------------------------------------------------------

def _pdeathsig_preexec() -> None:  # pragma: no cover - runs in the child
    # Ask the kernel to SIGKILL the child when the Python process dies (it
    # fires when the *thread* that forked exits, so only used from the main
    # thread).  Together with stop()/atexit this keeps CI free of orphans even
    # when pytest itself is killed.
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


class _Process:
    """A child process in its own process group, logging to a file."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ):
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log: IO[bytes] = open(log_path, "ab")  # noqa: SIM115 - closed in stop()
        preexec = (
            _pdeathsig_preexec
            if (sys.platform.startswith("linux") and threading.current_thread() is threading.main_thread())
            else None
        )
        try:
            self.popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(env or {})},
                cwd=cwd,
                start_new_session=True,  # own session => own process group
                preexec_fn=preexec,
            )
        except BaseException:
            self._log.close()
            raise

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        try:
            data = self.log_path.read_bytes()[-64 * 1024 :]
        except OSError:
            return ""
        return "\n".join(data.decode("utf-8", "replace").splitlines()[-lines:])

    def failure(self, what: str) -> ControlPlaneError:
        rc = self.popen.poll()
        state = f"exited with code {rc}" if rc is not None else "is still running"
        return ControlPlaneError(f"{self.name} {what} ({state}); last lines of {self.log_path}:\n{self.tail()}")

    def stop(self, timeout: float = 10.0) -> None:
        if self.popen.poll() is None:
            for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.popen.pid, sig)
                try:
                    self.popen.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        else:
            # The leader is gone, but a child might still hold the group.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.popen.pid, signal.SIGKILL)
        self._log.close()


def _wait(what: str, check: Callable[[], Any], timeout: float, proc: _Process | None = None,
          interval: float = 0.2) -> Any:
    """Poll ``check()`` until it returns a truthy value; fail early if ``proc`` dies."""
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        if proc is not None and not proc.alive():
            raise proc.failure(f"died while waiting for {what}")
        try:
            result = check()
            if result:
                return result
        except (OSError, ssl.SSLError, http.client.HTTPException, ApiError) as e:
            last_error = e
        if time.monotonic() > deadline:
            msg = f"timed out after {timeout:.0f}s waiting for {what}"
            if last_error is not None:
                msg += f" (last error: {last_error!r})"
            if proc is not None:
                raise proc.failure(msg)
            raise ControlPlaneError(msg)
        time.sleep(interval)


def _healthz(port: int, tls: bool) -> bool:
    """GET /healthz on loopback (over TLS without verification: a self-signed serving cert)."""
    if tls:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        conn: http.client.HTTPConnection = http.client.HTTPSConnection("127.0.0.1", port, timeout=5, context=context)
    else:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    with contextlib.closing(conn) as c:
        c.request("GET", "/healthz")
        r = c.getresponse()
        r.read()
        return r.status == 200


# ---------------------------------------------------------------------------
# Clusters
# ---------------------------------------------------------------------------

Manifest = Mapping[str, Any] | str | Path


@dataclass
class Cluster:
    """One kube-apiserver (+ kwok) sharing the control plane's etcd."""

    name: str
    index: int
    dir: Path
    port: int = 0
    etcd_prefix: str = ""
    ca_file: Path = field(default=None)  # type: ignore[assignment]  # set by ControlPlane when it writes the PKI, before any use
    cert_file: Path = field(default=None)  # type: ignore[assignment]  # set by ControlPlane when it writes the PKI, before any use
    key_file: Path = field(default=None)  # type: ignore[assignment]  # set by ControlPlane when it writes the PKI, before any use
    kubeconfig: Path = field(default=None)  # type: ignore[assignment]  # set by ControlPlane when it writes the PKI, before any use
    nodes: list[str] = field(default_factory=list)
    apiserver: _Process | None = field(default=None, repr=False)
    kwok: _Process | None = field(default=None, repr=False)
    controller_manager: _Process | None = field(default=None, repr=False)
    _ssl: ssl.SSLContext | None = field(default=None, repr=False)

    @property
    def server(self) -> str:
        """The apiserver URL, e.g. ``https://127.0.0.1:34567``."""
        return f"https://127.0.0.1:{self.port}"

    def ssl_context(self) -> ssl.SSLContext:
        """TLS context trusting the cluster CA and presenting the admin cert."""
        if self._ssl is None:
            ctx = ssl.create_default_context(cafile=str(self.ca_file))
            ctx.load_cert_chain(str(self.cert_file), str(self.key_file))
            self._ssl = ctx
        return self._ssl

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        timeout: float = 30.0,
        raw: bool = False,
    ) -> Any:
        """Synchronous HTTPS request as cluster admin; returns decoded JSON.

        Raises :class:`ApiError` for non-2xx answers (``.status`` holds the code).
        """
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ssl_context(), timeout=timeout)
        try:
            headers = {"Accept": "application/json"}
            data = None
            if body is not None:
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                headers["Content-Type"] = content_type
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            text = resp.read().decode("utf-8", "replace")
        finally:
            conn.close()
        if not 200 <= resp.status < 300:
            raise ApiError(method, path, resp.status, text)
        if raw:
            return text
        return json.loads(text) if text else None


class ControlPlane:
    """One etcd plus one kube-apiserver and kwok per named cluster.

    ``ControlPlane(bin_dir, ["east", "west"]).start()`` starts everything
    (apiservers one at a time), installs the CRDs and writes a kubeconfig per
    cluster; ``stop()`` kills every process group and removes the work dir.
    Usable as a context manager.  Cluster arguments accept a name or a
    :class:`Cluster`.
    """

    def __init__(
        self,
        bin_dir: Path | str,
        clusters: Sequence[str] = ("east", "west"),
        *,
        crds: Sequence[Path | str] = (HYPERNODE_CRD,),
        kwok: bool = True,
        work_dir: Path | str | None = None,
        keep_dir: bool | None = None,
        start_timeout: float = 300.0,
        apiserver_args: Sequence[str] = (),
    ):
        if not clusters:
            raise ValueError("need at least one cluster")
        if len(set(clusters)) != len(clusters):
            raise ValueError(f"duplicate cluster names: {list(clusters)}")
        self.bin_dir = Path(bin_dir)
        self.cluster_names = list(clusters)
        self.crds = [Path(c) for c in crds]
        self.use_kwok = kwok
        self.start_timeout = start_timeout
        self.apiserver_args = list(apiserver_args)
        self._work_dir_arg = Path(work_dir) if work_dir is not None else None
        if keep_dir is None:
            keep_dir = os.environ.get("FEDERATION_E2E_KEEP_DIR", "") not in ("", "0", "false")
        self.keep_dir = keep_dir
        self.work_dir: Path | None = None
        self.etcd: _Process | None = None
        self.etcd_url = ""
        self.clusters: dict[str, Cluster] = {}
        self._started = False
        self._stopped = False
        for name in ("kube-apiserver", "kube-controller-manager", "etcd") + (("kwok", "stages.yaml") if kwok else ()):
            if not (self.bin_dir / name).exists():
                raise ControlPlaneError(f"{self.bin_dir / name} not found; run {BUILD_SCRIPT}")

    # -- lifecycle ---------------------------------------------------------

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __getitem__(self, name: str) -> Cluster:
        return self.clusters[name]

    def start(self) -> ControlPlane:
        if self._started:
            raise ControlPlaneError("ControlPlane.start() called twice")
        self._started = True
        _live.add(self)
        try:
            if self._work_dir_arg is not None:
                self._work_dir_arg.mkdir(parents=True, exist_ok=True)
                self.work_dir = Path(tempfile.mkdtemp(prefix="controlplane-", dir=self._work_dir_arg))
            else:
                _remove_stale_work_dirs()
                self.work_dir = Path(tempfile.mkdtemp(prefix=_WORK_DIR_PREFIX))
            (self.work_dir / _OWNER_FILE).write_text(str(os.getpid()))
            self._start_etcd()
            for i, name in enumerate(self.cluster_names):
                self._start_cluster(i, name)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Kill all processes (kwok, apiservers, etcd) and remove the work dir. Idempotent."""
        if self._stopped or not self._started:
            return
        self._stopped = True
        procs: list[_Process] = [c.kwok for c in self.clusters.values() if c.kwok]
        procs += [c.controller_manager for c in self.clusters.values() if c.controller_manager]
        procs += [c.apiserver for c in self.clusters.values() if c.apiserver]
        if self.etcd is not None:
            procs.append(self.etcd)
        for p in procs:  # ask everything to exit, then wait
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if p.alive():
                    os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            p.stop()
        _live.discard(self)
        if self.work_dir is not None and not self.keep_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def _start_etcd(self) -> None:
        assert self.work_dir is not None
        for attempt in range(3):
            client_port, peer_port = free_port(), free_port()
            client = f"http://127.0.0.1:{client_port}"
            peer = f"http://127.0.0.1:{peer_port}"
            data_dir = self.work_dir / "etcd" / f"data-{attempt}"
            proc = _Process(
                "etcd",
                [
                    str(self.bin_dir / "etcd"),
                    "--name=e2e",
                    f"--data-dir={data_dir}",
                    f"--listen-client-urls={client}",
                    f"--advertise-client-urls={client}",
                    f"--listen-peer-urls={peer}",
                    f"--initial-advertise-peer-urls={peer}",
                    f"--initial-cluster=e2e={peer}",
                    "--initial-cluster-state=new",
                    "--unsafe-no-fsync=true",
                    "--log-level=warn",
                    "--quota-backend-bytes=4294967296",
                ],
                self.work_dir / "etcd" / "etcd.log",
            )
            self.etcd = proc

            def healthy(client_port: int = client_port) -> bool:
                with contextlib.closing(http.client.HTTPConnection("127.0.0.1", client_port, timeout=5)) as c:
                    c.request("GET", "/health")
                    r = c.getresponse()
                    return r.status == 200 and b"true" in r.read()

            try:
                _wait("etcd /health", healthy, self.start_timeout, proc)
            except ControlPlaneError:
                if attempt < 2 and not proc.alive() and port_taken(proc.tail(200)):
                    proc.stop()
                    continue
                raise
            self.etcd_url = client
            return

    def _start_cluster(self, index: int, name: str) -> None:
        assert self.work_dir is not None
        cdir = self.work_dir / f"cluster-{name}"
        (cdir / "pki").mkdir(parents=True)
        cluster = Cluster(name=name, index=index, dir=cdir, etcd_prefix=f"/c{index}/registry")
        self.clusters[name] = cluster
        pki = cdir / "pki"

        ca = _make_ca(f"{name}-ca")
        serving = _issue(
            ca,
            "kube-apiserver",
            server=True,
            dns_names=[
                "localhost",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ],
            ips=["127.0.0.1", "10.0.0.1"],
        )
        admin = _issue(ca, "admin", organizations=["system:masters"])
        sa_key = _new_key()
        files = {
            "ca.crt": ca.cert_pem,
            "ca.key": ca.key_pem,
            "apiserver.crt": serving.cert_pem,
            "apiserver.key": serving.key_pem,
            "admin.crt": admin.cert_pem,
            "admin.key": admin.key_pem,
            "sa.key": _key_pem(sa_key),
            "sa.pub": sa_key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            ),
        }
        for fname, data in files.items():
            (pki / fname).write_bytes(data)
            os.chmod(pki / fname, 0o600)
        cluster.ca_file, cluster.cert_file, cluster.key_file = pki / "ca.crt", pki / "admin.crt", pki / "admin.key"

        for attempt in range(3):
            cluster.port = free_port()
            cluster._ssl = None
            proc = _Process(
                f"kube-apiserver[{name}]",
                [
                    str(self.bin_dir / "kube-apiserver"),
                    f"--etcd-servers={self.etcd_url}",
                    f"--etcd-prefix={cluster.etcd_prefix}",
                    f"--cert-dir={pki}",
                    f"--tls-cert-file={pki / 'apiserver.crt'}",
                    f"--tls-private-key-file={pki / 'apiserver.key'}",
                    f"--client-ca-file={pki / 'ca.crt'}",
                    "--bind-address=127.0.0.1",
                    "--advertise-address=127.0.0.1",
                    f"--secure-port={cluster.port}",
                    "--service-cluster-ip-range=10.0.0.0/24",
                    "--allow-privileged=true",
                    "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
                    "--authorization-mode=RBAC",
                    "--endpoint-reconciler-type=none",
                    f"--service-account-issuer=https://127.0.0.1:{cluster.port}/",
                    f"--service-account-key-file={pki / 'sa.pub'}",
                    f"--service-account-signing-key-file={pki / 'sa.key'}",
                    "--profiling=false",
                    *self.apiserver_args,
                ],
                cdir / "kube-apiserver.log",
                env={"GOMAXPROCS": "1"},
            )
            cluster.apiserver = proc
            try:
                _wait(
                    f"{name} kube-apiserver /readyz",
                    lambda: cluster.request("GET", "/readyz", raw=True, timeout=5).strip() == "ok",
                    self.start_timeout,
                    proc,
                    interval=0.25,
                )
            except ControlPlaneError:
                if attempt < 2 and not proc.alive() and port_taken(proc.tail(200)):
                    proc.stop()
                    continue
                raise
            break

        # The system-namespaces controller creates these shortly after /readyz.
        for ns in ("default", "kube-system", "kube-node-lease"):
            _wait(
                f"{name} namespace {ns}",
                partial(cluster.request, "GET", f"/api/v1/namespaces/{ns}"),
                60,
                cluster.apiserver,
            )

        cluster.kubeconfig = cdir / "kubeconfig"
        self._write_kubeconfig(cluster, ca.cert_pem, admin.cert_pem, admin.key_pem)

        for crd in self.crds:
            self.install_crd(cluster, crd)

        self._start_controller_manager(cluster)
        if self.use_kwok:
            self._start_kwok(cluster)

    def _write_kubeconfig(self, cluster: Cluster, ca_pem: bytes, cert_pem: bytes, key_pem: bytes) -> None:
        def b64(data: bytes) -> str:
            return base64.b64encode(data).decode()

        kubeconfig = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": cluster.name, "cluster": {"server": cluster.server, "certificate-authority-data": b64(ca_pem)}}
            ],
            "users": [
                {
                    "name": f"{cluster.name}-admin",
                    "user": {"client-certificate-data": b64(cert_pem), "client-key-data": b64(key_pem)},
                }
            ],
            "contexts": [
                {
                    "name": cluster.name,
                    "context": {"cluster": cluster.name, "user": f"{cluster.name}-admin", "namespace": "default"},
                }
            ],
            "current-context": cluster.name,
            "preferences": {},
        }
        cluster.kubeconfig.write_text(yaml.safe_dump(kubeconfig, sort_keys=False))
        os.chmod(cluster.kubeconfig, 0o600)

    def _start_on_free_port(self, what: str, start: Any, tls: bool, timeout: float) -> _Process:
        """Start ``start(port)`` and wait for its ``/healthz`` on that port; retried on a
        port taken between choosing it and binding it."""
        for attempt in range(3):
            port = free_port()
            proc: _Process = start(port)
            try:
                _wait(f"{what} /healthz", partial(_healthz, port, tls), timeout, proc)
            except ControlPlaneError:
                if attempt < 2 and not proc.alive() and port_taken(proc.tail(200)):
                    proc.stop()
                    continue
                raise
            return proc
        raise ControlPlaneError(f"{what}: no free port after 3 attempts")

    def _start_controller_manager(self, cluster: Cluster) -> None:
        """kube-controller-manager with only the controllers the e2e tests rely on:
        Deployments -> ReplicaSets -> pods, StatefulSets -> pods, the garbage collector
        (owned objects go with their owner), namespace deletion, PVC protection (a
        deleted claim goes once no pod uses it; the apiserver's StorageObjectInUseProtection
        admission puts the finalizer on every claim), and the ephemeral volume controller
        (claim ``<pod>-<volume>``, owned by the pod, for each generic ephemeral volume)."""

        def start(port: int) -> _Process:
            cluster.controller_manager = _Process(
                f"kube-controller-manager[{cluster.name}]",
                [
                    str(self.bin_dir / "kube-controller-manager"),
                    f"--kubeconfig={cluster.kubeconfig}",
                    f"--authentication-kubeconfig={cluster.kubeconfig}",
                    f"--authorization-kubeconfig={cluster.kubeconfig}",
                    "--controllers=deployment-controller,replicaset-controller,statefulset-controller,"
                    "garbage-collector-controller,namespace-controller,persistentvolumeclaim-protection-controller,"
                    "ephemeral-volume-controller",
                    "--leader-elect=false",
                    "--bind-address=127.0.0.1",
                    f"--secure-port={port}",
                    f"--cert-dir={cluster.dir / 'kcm-certs'}",
                    "--concurrent-deployment-syncs=2",
                    "--concurrent-replicaset-syncs=2",
                    "--concurrent-statefulset-syncs=2",
                    "--profiling=false",
                ],
                cluster.dir / "kube-controller-manager.log",
                env={"GOMAXPROCS": "1"},
            )
            return cluster.controller_manager

        self._start_on_free_port(f"{cluster.name} kube-controller-manager", start, True, self.start_timeout)

    def _start_kwok(self, cluster: Cluster) -> None:
        assert self.work_dir is not None
        kwok_home = cluster.dir / "kwok-home"
        kwok_home.mkdir(exist_ok=True)
        # Distinct pod CIDR per cluster so pod IPs differ across clusters.
        octet = 64 + cluster.index % 128

        def start(port: int) -> _Process:
            cluster.kwok = _Process(
                f"kwok[{cluster.name}]",
                [
                    str(self.bin_dir / "kwok"),
                    f"--kubeconfig={cluster.kubeconfig}",
                    f"--config={self.bin_dir / 'stages.yaml'}",
                    "--manage-all-nodes=false",
                    f"--manage-nodes-with-annotation-selector={KWOK_FAKE_NODE_ANNOTATION}=fake",
                    f"--cidr=10.{octet}.0.1/16",
                    f"--node-ip=10.{octet}.255.254",
                    "--node-lease-duration-seconds=40",
                    f"--server-address=127.0.0.1:{port}",
                ],
                cluster.dir / "kwok.log",
                env={"GOMAXPROCS": "1", "HOME": str(kwok_home)},
                cwd=cluster.dir,
            )
            return cluster.kwok

        self._start_on_free_port(f"{cluster.name} kwok", start, False, 60)

    # -- accessors -----------------------------------------------------------

    def cluster(self, cluster: str | Cluster) -> Cluster:
        if isinstance(cluster, Cluster):
            return cluster
        try:
            return self.clusters[cluster]
        except KeyError:
            raise KeyError(f"unknown cluster {cluster!r}; have {list(self.clusters)}") from None

    def kubeconfig(self, cluster: str | Cluster) -> Path:
        """Path of the cluster's admin kubeconfig (certificates embedded)."""
        return self.cluster(cluster).kubeconfig

    def request(self, cluster: str | Cluster, method: str, path: str, body: Any = None, **kw: Any) -> Any:
        """Synchronous request as admin (see :meth:`Cluster.request`)."""
        return self.cluster(cluster).request(method, path, body, **kw)

    async def api_client(self, cluster: str | Cluster) -> ApiClient:
        """A fresh ``kubernetes_asyncio`` ApiClient for one cluster.

        Built from a private Configuration (never the global default), so
        clients of different clusters cannot leak into each other.  Close it
        (``async with await cp.api_client("east") as api: ...``).
        """
        from kubernetes_asyncio import client, config

        cfg = client.Configuration()
        await config.load_kube_config(
            config_file=str(self.kubeconfig(cluster)), client_configuration=cfg, persist_config=False
        )
        return client.ApiClient(configuration=cfg)

    # -- objects ---------------------------------------------------------------

    def install_crd(self, cluster: str | Cluster, crd: Manifest, timeout: float = 60.0) -> list[dict[str, Any]]:
        """Create (or replace) CRDs and wait until they are Established and served."""
        c = self.cluster(cluster)
        out = []
        for obj in _load_manifests(crd):
            created = _upsert(c, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", obj)
            name = obj["metadata"]["name"]

            def established(name: str = name) -> bool:
                cur = c.request("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
                return any(
                    cond.get("type") == "Established" and cond.get("status") == "True"
                    for cond in (cur.get("status") or {}).get("conditions") or []
                )

            _wait(f"{c.name} CRD {name} Established", established, timeout, c.apiserver)
            spec = obj["spec"]
            version = next(v["name"] for v in spec["versions"] if v.get("served", True))
            served_path = f"/apis/{spec['group']}/{version}/{spec['names']['plural']}?limit=1"
            _wait(f"{c.name} CRD {name} served", partial(c.request, "GET", served_path), timeout, c.apiserver)
            out.append(created)
        return out

    def create_gpu_nodes(
        self,
        cluster: str | Cluster,
        names: Iterable[str],
        gpus: int = 8,
        cpu: str = "96",
        memory: str = "1024Gi",
        labels: Mapping[str, str] | None = None,
        *,
        pods: str = "110",
        annotations: Mapping[str, str] | None = None,
        extra_resources: Mapping[str, str] | None = None,
        wait_ready: bool = True,
        timeout: float = 60.0,
    ) -> list[dict[str, Any]]:
        """Create fake kwok nodes with ``nvidia.com/gpu`` capacity.

        Nodes carry the ``kwok.x-k8s.io/node: fake`` annotation and the
        matching NoSchedule taint; capacity and allocatable are equal.  With
        ``wait_ready`` (default) returns once kwok has marked them Ready.
        Returns the created Node objects (as dicts).
        """
        c = self.cluster(cluster)
        names = list(names)
        resources = {"cpu": str(cpu), "memory": str(memory), "pods": str(pods), "ephemeral-storage": "1Ti"}
        if gpus:
            resources["nvidia.com/gpu"] = str(gpus)
        resources.update({k: str(v) for k, v in (extra_resources or {}).items()})
        created = []
        for node_name in names:
            node = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": node_name,
                    "labels": {
                        "kubernetes.io/hostname": node_name,
                        "kubernetes.io/os": "linux",
                        "kubernetes.io/arch": "amd64",
                        "type": "kwok",
                        **({"nvidia.com/gpu.present": "true"} if gpus else {}),
                        **dict(labels or {}),
                    },
                    "annotations": {
                        KWOK_FAKE_NODE_ANNOTATION: "fake",
                        "node.alpha.kubernetes.io/ttl": "0",
                        **dict(annotations or {}),
                    },
                },
                "spec": {"taints": [dict(KWOK_FAKE_NODE_TAINT)]},
                "status": {
                    "capacity": dict(resources),
                    "allocatable": dict(resources),
                    "nodeInfo": {
                        "architecture": "amd64",
                        "operatingSystem": "linux",
                        "kubeletVersion": "fake",
                        "kubeProxyVersion": "fake",
                    },
                },
            }
            created.append(c.request("POST", "/api/v1/nodes", node))
            if node_name not in c.nodes:
                c.nodes.append(node_name)
        if wait_ready:
            self.wait_nodes_ready(c, names, timeout=timeout)
        return created

    def wait_nodes_ready(self, cluster: str | Cluster, names: Iterable[str], timeout: float = 60.0) -> None:
        """Block until every named node has condition Ready=True."""
        c = self.cluster(cluster)
        pending = set(names)

        def check() -> bool:
            items = c.request("GET", "/api/v1/nodes")["items"]
            for n in items:
                conds = n.get("status", {}).get("conditions") or []
                if any(x.get("type") == "Ready" and x.get("status") == "True" for x in conds):
                    pending.discard(n["metadata"]["name"])
            return not pending

        _wait(f"{c.name} nodes Ready", check, timeout, c.kwok)

    def apply_hypernodes(
        self, cluster: str | Cluster, manifests: Manifest | Iterable[Mapping[str, Any]]
    ) -> list[dict[str, Any]]:
        """Create or replace HyperNode objects (dicts, YAML text or a YAML file).

        ``apiVersion``/``kind`` default to topology.volcano.sh/v1alpha1
        HyperNode.  A ``status`` in a manifest is written through the status
        subresource.  Returns the stored objects.
        """
        c = self.cluster(cluster)
        base = f"/apis/{HYPERNODE_GROUP}/{HYPERNODE_VERSION}/{HYPERNODE_PLURAL}"
        out = []
        for obj in _load_manifests(manifests):
            obj = dict(obj)
            obj.setdefault("apiVersion", f"{HYPERNODE_GROUP}/{HYPERNODE_VERSION}")
            obj.setdefault("kind", "HyperNode")
            if obj["kind"] != "HyperNode":
                raise ValueError(f"not a HyperNode: {obj.get('kind')}")
            stored = _upsert(c, base, obj)
            if obj.get("status"):
                stored = c.request(
                    "PUT", f"{base}/{obj['metadata']['name']}/status", {**stored, "status": obj["status"]}
                )
            out.append(stored)
        return out


_WORK_DIR_PREFIX = "federation-e2e-"
_OWNER_FILE = "owner.pid"


def _remove_stale_work_dirs() -> None:
    """Remove work dirs left by killed sessions (their owner process is gone).

    Child processes die with their owner (PR_SET_PDEATHSIG), but a SIGKILLed
    session cannot remove its temp dir.
    """
    for d in Path(tempfile.gettempdir()).glob(f"{_WORK_DIR_PREFIX}*"):
        try:
            pid = int((d / _OWNER_FILE).read_text())
        except (OSError, ValueError):
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
        except PermissionError:
            pass


def _load_manifests(manifests: Any) -> list[dict[str, Any]]:
    if isinstance(manifests, Path) or (
        isinstance(manifests, str) and "\n" not in manifests and Path(manifests).exists()
    ):
        manifests = Path(manifests).read_text()
    if isinstance(manifests, str):
        docs = [d for d in yaml.safe_load_all(manifests) if d]
    elif isinstance(manifests, Mapping):
        docs = [dict(manifests)]
    else:
        docs = [dict(m) for m in manifests]
    out = []
    for d in docs:
        if d.get("kind", "").endswith("List") and "items" in d:
            out.extend(d["items"])
        else:
            out.append(d)
    return out


def _upsert(c: Cluster, collection: str, obj: Mapping[str, Any]) -> dict[str, Any]:
    """POST ``obj``; on 409 replace the existing object (PUT with its resourceVersion)."""
    body = {k: v for k, v in obj.items() if k != "status"}
    try:
        created: dict[str, Any] = c.request("POST", collection, body)
        return created
    except ApiError as e:
        if e.status != 409:
            raise
    name = obj["metadata"]["name"]
    path = f"{collection}/{urllib.parse.quote(name)}"
    for _ in range(5):
        cur = c.request("GET", path)
        meta = {**body.get("metadata", {}), "resourceVersion": cur["metadata"]["resourceVersion"]}
        try:
            replaced: dict[str, Any] = c.request("PUT", path, {**body, "metadata": meta})
            return replaced
        except ApiError as e:
            if e.status != 409:
                raise
    raise ControlPlaneError(f"could not replace {path}: repeated conflicts")


# Stop every live control plane when the interpreter exits, so an aborted
# session (Ctrl-C, an exception outside the fixture) leaves nothing behind.
_live: set[ControlPlane] = set()


@atexit.register
def _stop_all() -> None:
    for cp in list(_live):
        with contextlib.suppress(Exception):
            cp.stop()
