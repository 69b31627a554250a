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
        one_line_error(await afedctl(server, "submit", "-f", str(tmp_path / "absent.yaml")), code=2,
                       path=f"-f: {tmp_path}")
        one_line_error(await afedctl(server, "apply", "-f", "/dev/zero"), code=2, path="-f: /dev/zero: is over")
        assert counts(store) == before
    store.dispose()


async def test_a_key_given_twice_refuses_its_file_and_an_atomic_apply_stores_nothing(
        sqlite_store: Store, tmp_path: Path) -> None:
    """PyYAML keeps a repeated key's last value: ``weight: 3`` then ``weight: 7`` created the
    queue with weight 7, the 3 dropped without a word."""
    store = sqlite_store
    good, twice = tmp_path / "good.yaml", tmp_path / "twice.yaml"
    good.write_text("apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: fine}\n")
    twice.write_text("apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: twice}\n"
                     "spec:\n  weight: 3\n  weight: 7\n")
    async with running(store) as srv:
        server = f"127.0.0.1:{srv.port}"
        before = counts(store)
        result = await afedctl(server, "apply", "--atomic", "-f", str(good), "-f", str(twice))
        assert result.code == 2, result
        assert f"{twice} error: documents[0]: duplicate key 'weight' at line 6" in result.err
        assert result.err.strip().splitlines()[-1] == "nothing applied (--atomic)"
        for name in ("fine", "twice"):
            assert (await afedctl(server, "get", "queue", name)).code == 1
        assert counts(store) == before
    store.dispose()


async def test_a_queue_file_refused_part_way_says_which_queues_were_written(
        sqlite_store: Store, tmp_path: Path) -> None:
    """``queue create -f`` writes queue by queue; the second refused used to print only its
    error, so the first stayed created without a word."""
    store = sqlite_store
    queues = tmp_path / "queues.yaml"
    queues.write_text("\n---\n".join(f"apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {{name: {n}}}"
                                      for n in ("first", "taken")))
    async with running(store) as srv:
        server = f"127.0.0.1:{srv.port}"
        assert (await afedctl(server, "queue", "create", "taken")).code == 0
        result = await afedctl(server, "queue", "create", "-f", str(queues))
        assert result.code == 1 and result.out == "queue/first created\n", result
        assert result.err.strip() == "error: queue 'taken' already exists (ALREADY_EXISTS)"
    store.dispose()


async def test_a_cancel_reason_reaches_another_terminal_escaped(sqlite_store: Store, tmp_path: Path) -> None:
    """Any tenant's cancel reason is shown by ``get job`` and ``watch``: its escape sequences
    and newlines reached the reader's terminal raw (screen cleared, output lines forged)."""
    store = sqlite_store
    job = tmp_path / "job.yaml"
    job.write_text("apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {name: jx}\nspec:\n"
                   "  queue: default\n  tasks:\n  - {name: w, replicas: 1, "
                   "template: {spec: {containers: [{name: c, image: busybox}]}}}\n")
    async with running(store) as srv:
        server = f"127.0.0.1:{srv.port}"
        assert (await afedctl(server, "queue", "create", "default")).code == 0
        assert (await afedctl(server, "submit", "-f", str(job))).code == 0
        assert (await afedctl(server, "cancel", "jx", "--reason", "bye\x1b[2J\nFAKE: job/y succeeded")).code == 0
        for argv in (("get", "job", "jx"), ("watch", "--count", "2")):  # submitted, cancelled: no control loop
            shown = await afedctl(server, *argv)
            assert shown.code == 0 and "bye\\x1b[2J\\nFAKE" in shown.out, shown
            assert "\x1b" not in shown.out and not any(ln.startswith("FAKE") for ln in shown.out.splitlines())
    store.dispose()
