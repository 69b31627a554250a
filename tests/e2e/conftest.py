"""Fixtures for end-to-end tests against real kube-apiservers (see controlplane.py).

Fixtures:

* ``controlplane_bin_dir`` (session): runs ``hack/build-controlplane.sh``
  (instant when cached) and yields the bin dir.  If the binaries cannot be
  built the fixture FAILS; it never skips.
* ``control_plane`` (session): a started :class:`ControlPlane` with clusters
  ``east`` and ``west`` (one shared etcd, one kube-apiserver + kwok each), the
  HyperNode CRD installed and ``GPU_NODES_PER_CLUSTER`` Ready fake GPU nodes
  per cluster named ``<cluster>-gpu-<i>``.  Stopped at session end.
* ``kube_clients`` (function, async): ``{"east": ApiClient, "west": ApiClient}``
  from ``kubernetes_asyncio``, one private Configuration per cluster; closed
  after the test.

Tests share the session clusters: use unique object names, and clean up what
would disturb other tests.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from kubernetes_asyncio.client import ApiClient

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/e2e is not a package (rootdir-relative imports)
from controlplane import ControlPlane, ControlPlaneError, build_binaries

CLUSTERS = ("east", "west")
GPU_NODES_PER_CLUSTER = 3
GPUS_PER_NODE = 8


def gpu_node_names(cluster: str) -> list[str]:
    """Names of the fake GPU nodes the ``control_plane`` fixture creates in ``cluster``."""
    return [f"{cluster}-gpu-{i}" for i in range(GPU_NODES_PER_CLUSTER)]


@pytest.fixture(scope="session")
def controlplane_bin_dir() -> Path:
    try:
        return build_binaries()
    except (ControlPlaneError, OSError) as e:
        error = str(e)
    pytest.fail(f"cannot build the Kubernetes control plane for e2e tests:\n{error}", pytrace=False)


@pytest.fixture(scope="session")
def control_plane(controlplane_bin_dir: Path) -> Iterator[ControlPlane]:
    cp = ControlPlane(controlplane_bin_dir, CLUSTERS)
    try:
        cp.start()
        for name in CLUSTERS:
            cp.create_gpu_nodes(
                name,
                gpu_node_names(name),
                gpus=GPUS_PER_NODE,
                labels={"federation.e2e/cluster": name},
            )
    except ControlPlaneError as e:
        cp.stop()
        error = str(e)
    except BaseException:
        cp.stop()
        raise
    else:
        error = ""
    if error:
        pytest.fail(f"cannot start the e2e control plane:\n{error}", pytrace=False)
    try:
        yield cp
    finally:
        cp.stop()


@pytest_asyncio.fixture
async def kube_clients(control_plane: ControlPlane) -> AsyncIterator[dict[str, ApiClient]]:
    clients: dict[str, ApiClient] = {}
    try:
        for name in control_plane.cluster_names:
            clients[name] = await control_plane.api_client(name)
        yield clients
    finally:
        for api in clients.values():
            await api.close()
