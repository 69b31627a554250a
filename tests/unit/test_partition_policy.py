"""Volcano task partitionPolicy at the edges: the manifest's fields parsed or refused naming
the field (Volcano's admission rules), carried over the wire and bounded there."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from federation.domain.errors import InvalidInput
from federation.domain.jobs import NetworkTopology, PartitionPolicy
from federation.domain.manifests_volcano import parse_job
from federation.wire.jobs import job_from_proto, job_to_proto
from federation.wire.limits import check_job_spec

JOB = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: llm}
spec:
  networkTopology: {mode: hard, highestTierAllowed: 2}
  tasks:
  - name: trainer
    replicas: 8
    partitionPolicy: {totalPartitions: 2, partitionSize: 4}
    template:
      spec:
        containers: [{name: c, image: i, resources: {requests: {nvidia.com/gpu: 8}}}]
"""


def doc(**policy: Any) -> dict[str, Any]:
    raw: dict[str, Any] = yaml.safe_load(JOB)
    task = raw["spec"]["tasks"][0]
    for key, value in policy.items():
        if key in ("minAvailable", "replicas"):
            task[key] = value
        elif key == "taskTopology":
            task["networkTopology"] = value
        elif value is None:
            task["partitionPolicy"].pop(key, None)
        else:
            task["partitionPolicy"][key] = value
    return raw


def test_the_policy_is_parsed() -> None:
    job = parse_job(doc(minPartitions=2, networkTopology={"mode": "hard", "highestTierAllowed": 1}), "d", None)
    assert job.tasks[0].partition_policy == PartitionPolicy(2, 4, 2, NetworkTopology("hard", 1))
    # Volcano's mutating webhook: minAvailable = minPartitions x partitionSize when not given
    assert job.tasks[0].min_available == 8 and job.gang_counts == (8,)


def test_an_elastic_gang_rounds_up_to_whole_partitions() -> None:
    raw = doc()
    raw["spec"]["minAvailable"] = 3
    assert parse_job(raw, "d", None).gang_counts == (4,)


REFUSED = [
    ("product is not replicas", {"replicas": 6}, "d.spec.tasks[0].partitionPolicy", "must equal replicas (6)"),
    ("minAvailable disagrees with minPartitions", {"minPartitions": 1, "minAvailable": 8},
     "d.spec.tasks[0].minAvailable", "must equal minPartitions x partitionSize (4)"),
    ("more minPartitions than partitions", {"minPartitions": 3}, "d.spec.tasks[0].partitionPolicy.minPartitions",
     "between 0 and totalPartitions"),
    ("no partition size", {"partitionSize": None}, "d.spec.tasks[0].partitionPolicy.partitionSize", "is required"),
    ("zero partitions", {"totalPartitions": 0}, "d.spec.tasks[0].partitionPolicy.totalPartitions", "must be >= 1"),
    ("an unknown field", {"spread": 1}, "d.spec.tasks[0].partitionPolicy.spread", "not supported"),
    ("both tier fields", {"networkTopology": {"highestTierAllowed": 1, "highestTierName": "leaf"}},
     "d.spec.tasks[0].partitionPolicy.networkTopology.highestTierName", "mutually exclusive"),
]


@pytest.mark.parametrize(("change", "path", "rule"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_refusals_name_the_field(change: dict[str, Any], path: str, rule: str) -> None:
    with pytest.raises(InvalidInput) as err:
        parse_job(doc(**change), "d", None)
    assert err.value.path == path and rule in err.value.rule


def test_a_task_level_network_topology_is_refused_not_dropped() -> None:
    """Volcano's blog example puts networkTopology beside partitionPolicy, where Volcano's
    CRD has no such field: its API server prunes it, so refusing beats dropping it."""
    with pytest.raises(InvalidInput) as err:
        parse_job(doc(taskTopology={"mode": "hard", "highestTierAllowed": 1}), "d", None)
    assert err.value.path == "d.spec.tasks[0].networkTopology" and "partitionPolicy.networkTopology" in err.value.rule


def test_the_policy_round_trips_over_the_wire() -> None:
    job = parse_job(doc(minPartitions=2, networkTopology={"mode": "soft", "highestTierName": "leaf"}), "d", None)
    assert job_from_proto(job_to_proto(job)) == job


def test_the_partition_tier_is_bounded_on_the_wire() -> None:
    msg = job_to_proto(parse_job(doc(networkTopology={"mode": "hard", "highestTierAllowed": 99}), "d", None))
    with pytest.raises(InvalidInput) as err:
        check_job_spec(msg)
    assert err.value.path == "spec.tasks[0].partitionPolicy.networkTopology.highestTierAllowed"


def test_a_bad_wire_policy_names_its_field() -> None:
    msg = job_to_proto(parse_job(doc(), "d", None))
    msg.tasks[0].partition_policy.partition_size = 3
    with pytest.raises(InvalidInput) as err:
        job_from_proto(msg)
    assert err.value.path == "spec.tasks[0].partitionPolicy"
