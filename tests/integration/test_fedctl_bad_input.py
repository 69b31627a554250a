"""The issue's bad-input list through ``fedctl`` (a real process): one stderr line naming
the field path, exit code 2, and nothing stored.

Manifest errors are caught while loading the file (paths are manifest-shaped:
``documents[0].spec...``); what only the server can know (the queue exists, the size
limit) comes back as INVALID_ARGUMENT with the wire path (``spec.queue``). Runs against a
service in the test's event loop over SQLite; the gRPC-level test covers PostgreSQL too.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from fedctlkit import MANIFESTS, afedctl, one_line_error
from servicekit import counts, running

from federation.store import Store
from federation.store import migrate as migrations

FILES = [
    ("bad-zero-replicas.yaml", "documents[0].spec.tasks[0].replicas"),
    ("bad-min-available-too-big.yaml", "documents[0].spec.minAvailable"),
    ("bad-malformed-quantity.yaml", "documents[0].spec.tasks[0].template.spec.containers[0].resources.requests.memory"),
    ("bad-duplicate-task.yaml", "documents[0].spec.tasks[1].name"),
    ("bad-tier-zero.yaml", "documents[0].spec.networkTopology.highestTierAllowed"),
    ("bad-both-tier-limits.yaml", "documents[0].spec.networkTopology.highestTierName"),
    ("bad-unknown-event.yaml", "documents[0].spec.policies[0].event"),
    ("bad-unknown-action.yaml", "documents[0].spec.tasks[0].policies[0].action"),
    ("bad-invalid-yaml.yaml", "invalid YAML at line 9"),
    ("bad-unknown-kind.yaml", "documents[0].kind"),
]


def _big_job(directory: Path) -> Path:
    """A valid Volcano Job whose pod template is over the service's 1 MiB JobSpec limit."""
    doc = yaml.safe_load((MANIFESTS / "pytorch-llama-pretrain.yaml").read_text().split("\n---")[0])
    doc["spec"]["queue"] = "default"
    container = doc["spec"]["tasks"][0]["template"]["spec"]["containers"][0]
    container["env"] = [{"name": "BLOB", "value": "x" * (1100 * 1024)}]
    path = directory / "too-big.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Store:
    url = f"sqlite:///{tmp_path / 'bad.db'}"
    migrations.upgrade(url)
    return Store(url)


async def test_every_bad_manifest_is_one_line_exit_2_and_stores_nothing(sqlite_store: Store, tmp_path: Path) -> None:
    store = sqlite_store
    async with running(store) as srv:
        server = f"127.0.0.1:{srv.port}"
        assert (await afedctl(server, "queue", "create", "default")).code == 0
        before = counts(store)
        for name, path in FILES:
            one_line_error(await afedctl(server, "submit", "-f", str(MANIFESTS / name)), code=2, path=path)
        unknown_queue = await afedctl(server, "submit", "-f", str(MANIFESTS / "pytorch-llama-pretrain.yaml"))
        one_line_error(unknown_queue, code=2, path="spec.queue")
        assert "INVALID_ARGUMENT" in unknown_queue.err
        one_line_error(await afedctl(server, "submit", "-f", str(_big_job(tmp_path))), code=2, path="spec:")
        one_line_error(await afedctl(server, "queue", "create", "q2", "--capability", "cpu=8Gx"),
                       code=2, path="queue.capability.quantities.cpu")
        one_line_error(await afedctl(server, "queue", "create", "q3", "--guarantee", "gpu"), code=2, path="--guarantee")
        one_line_error(await afedctl(server, "list", "jobs", "--state", "sleeping"), code=2, path="--state")
        one_line_error(await afedctl(server, "submit", "-f", str(tmp_path / "absent.yaml")), code=2, path=str(tmp_path))
        assert counts(store) == before
    store.dispose()
