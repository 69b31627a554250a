"""Cluster NoExecute taints and failover timing per toleration (propagation/taints.py,
Karmada's taint manager): a decision table, the parse of ``tolerationSeconds``, the
planner refusing a new placement a bounded toleration would only evict again, and the
round's input (``control.snapshot.build``) naming who leaves now and when the next one does."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from federation.control.snapshot import build
from federation.domain.clusters import ClusterSnapshot
from federation.domain.errors import InvalidInput
from federation.domain.jobs import Job, Task
from federation.domain.manifests import load_manifests
from federation.domain.nodes import Node, Taint, Toleration
from federation.domain.propagation import PropagationPolicy
from federation.domain.queues import Queue
from federation.domain.resources import Resources
from federation.placement.eligibility import cluster_block
from federation.propagation.taints import (
    NOT_READY,
    UNREACHABLE,
    evicting_taints,
    eviction,
    unreachable_taint,
    with_defaults,
)
from federation.store import ClusterRecord, JobRecord

T = 1_000.0  # when the taint was put on
UNREACH = Taint(UNREACHABLE, "", "NoExecute", time_added=T)
DRAIN = Taint("maintenance", "", "NoExecute", time_added=T + 50)


def tol(key: str = UNREACHABLE, seconds: int | None = None, *, op: str = "Exists", effect: str = "NoExecute",
        value: str = "") -> Toleration:
    return Toleration(key, op, value, effect, seconds=seconds)


@pytest.mark.parametrize(("taints", "tolerations", "grace", "at", "why"), [
    pytest.param((), (), 0, None, "", id="no NoExecute taint: stays"),
    pytest.param((Taint("gpu", "", "NoSchedule", None),), (), 0, None, "", id="NoSchedule never evicts"),
    pytest.param((UNREACH,), (), 0, T, "failover grace 0s", id="no toleration, grace 0: leaves at once"),
    pytest.param((UNREACH,), (), 60, T + 60, "failover grace 60s", id="no toleration: the service grace"),
    pytest.param((UNREACH,), (tol(seconds=300),), 60, T + 300, "tolerated for 300s",
                 id="own tolerationSeconds replaces the default"),
    pytest.param((UNREACH,), (tol(seconds=5),), 60, T + 5, "tolerated for 5s", id="shorter than the grace too"),
    pytest.param((UNREACH,), (tol(),), 60, None, "", id="no tolerationSeconds: for ever"),
    pytest.param((UNREACH,), (tol("", op="Exists", effect=""),), 0, None, "", id="tolerates everything"),
    pytest.param((UNREACH,), (tol(seconds=-5),), 60, T, "tolerated for -5s", id="negative: at once (Kubernetes)"),
    pytest.param((DRAIN,), (), 60, T + 50, "maintenance:NoExecute not tolerated", id="admin taint not tolerated"),
    pytest.param((DRAIN,), (tol("maintenance", 30),), 0, T + 80, "maintenance:NoExecute tolerated for 30s",
                 id="admin taint tolerated a while"),
    pytest.param((UNREACH, DRAIN), (tol(seconds=300), tol("maintenance", 30)), 0, T + 80, "maintenance",
                 id="two taints: the earliest end"),
    pytest.param((UNREACH, DRAIN), (tol(),), 0, T + 50, "maintenance", id="one taint tolerated, one not: leaves"),
    pytest.param((Taint(NOT_READY, "", "NoExecute", T),), (tol(seconds=10),), 30, T + 30, "failover grace 30s",
                 id="a toleration of unreachable does not cover not-ready"),
    pytest.param((Taint("x", "1", "NoExecute", T),), (tol("x", 10, op="Equal", value="2"),), 0, T,
                 "x=1:NoExecute not tolerated", id="Equal needs the value"),
])
def test_when_a_job_leaves_a_tainted_cluster(taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...],
                                             grace: float, at: float | None, why: str) -> None:
    verdict = eviction(taints, tolerations, grace, now=T + 1)
    assert verdict.at == at
    assert why in verdict.reason


def test_a_taint_without_a_time_counts_from_now() -> None:
    assert eviction((Taint(UNREACHABLE, "", "NoExecute"),), (tol(seconds=10),), 0, now=7.0).at == 17.0


def test_defaults_are_added_only_where_the_job_has_no_toleration_of_its_own() -> None:
    keys = [(t.key, t.seconds) for t in with_defaults((tol(seconds=9),), 42)]
    assert keys == [(UNREACHABLE, 9), (NOT_READY, 42)]


def test_a_lost_cluster_is_unreachable_since_it_was_last_heard() -> None:
    assert evicting_taints((), lost=True, last_heard=5.0) == (Taint(UNREACHABLE, "", "NoExecute", 5.0),)
    assert evicting_taints((UNREACH, Taint("a")), lost=True, last_heard=5.0) == (UNREACH,)
    assert evicting_taints((Taint("a"),), lost=False, last_heard=5.0) == ()
    assert unreachable_taint(3.0) == Taint(UNREACHABLE, "", "NoExecute", 3.0)


def _job(name: str, tolerations: tuple[Toleration, ...] = ()) -> Job:
    return Job(name, "q", (Task("w", 1, Resources.of(gpu=1)),),
               propagation=PropagationPolicy(cluster_tolerations=tolerations) if tolerations else None)


def test_a_bounded_toleration_admits_no_new_placement_an_unbounded_one_does() -> None:
    cluster = ClusterSnapshot("east", (Node("n", Resources.of(gpu=8), Resources.of(gpu=8)),),
                              taints=(Taint("maintenance", "", "NoExecute", T),))
    assert cluster_block(_job("a", (tol("maintenance", 600),)), cluster) == "taints"
    assert cluster_block(_job("b", (tol("maintenance"),)), cluster) is None
    assert cluster_block(_job("c"), cluster) == "taints"


POLICY = """
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {{name: p}}
spec:
  resourceSelectors: [{{apiVersion: batch.volcano.sh/v1alpha1, kind: Job, name: j}}]
  placement:
    clusterTolerations: [{toleration}]
"""
JOB = """apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: j}
spec:
  tasks: [{name: t, replicas: 1, template: {spec: {containers: [{name: c, image: x}]}}}]
"""


def test_toleration_seconds_are_parsed_with_noexecute_and_refused_otherwise() -> None:
    text = JOB + POLICY.format(toleration="{key: cluster.karmada.io/unreachable, operator: Exists, "
                                          "effect: NoExecute, tolerationSeconds: 120}")
    policy = load_manifests(text).job.propagation
    assert policy is not None and policy.cluster_tolerations == (tol(seconds=120),)
    with pytest.raises(InvalidInput) as info:
        load_manifests(JOB + POLICY.format(toleration="{key: k, effect: NoSchedule, tolerationSeconds: 1}"))
    assert info.value.path == "documents[1].spec.placement.clusterTolerations[0].tolerationSeconds"
    assert "NoExecute" in info.value.rule


@pytest.mark.parametrize("seconds", [-(10 * 365 * 86_400) - 1, 10 * 365 * 86_400 + 1, 10**30])
def test_toleration_seconds_out_of_range_are_refused_naming_the_field(seconds: int) -> None:
    """Bounded at the edge: 10**30 used to pass the parser and fail the int64 wire conversion."""
    with pytest.raises(InvalidInput) as info:
        load_manifests(JOB + POLICY.format(toleration="{key: k, operator: Exists, effect: NoExecute, "
                                                      f"tolerationSeconds: {seconds}}}"))
    assert info.value.path == "documents[1].spec.placement.clusterTolerations[0].tolerationSeconds"
    assert "ten years" in info.value.rule


def _record(name: str, cluster: str, job: Job) -> JobRecord:
    at = datetime.fromtimestamp(T, tz=UTC)
    return JobRecord(name=name, queue="q", tenant="t", job=job, spec_digest="", state="running",
                     unschedulable=False, reason="", message="", cluster=cluster, hypernode="r", tier=1, restarts=0,
                     created_at=at, updated_at=at, version=1)


def test_the_round_input_names_who_leaves_now_and_when_the_next_one_does() -> None:
    at = datetime.fromtimestamp(T, tz=UTC)
    east = ClusterRecord(name="east", epoch=1, agent_id="a", labels={}, taints=(UNREACH,), healthy=False,
                         lost=True, registered_at=at, last_heartbeat=at, summary=None, tree_error=None)
    active = [_record("plain", "east", _job("plain")),
              _record("patient", "east", _job("patient", (tol(seconds=120),))),
              _record("loyal", "east", _job("loyal", (tol(),)))]
    data = build([], [east], [Queue("q")], [], active, [], now=T + 30, failover_grace=20)
    assert {c: dict(j) for c, j in data.evictions.items()} == {
        "east": {"plain": f"left cluster east: taint {UNREACHABLE}:NoExecute: failover grace 20s"}}
    assert data.next_eviction == T + 120
    # Those that stay still count toward their queue (tests/unit/test_taint_usage.py).
    assert [r.job.name for r in data.snapshot.running] == ["patient", "loyal"]
    later = build([], [east], [Queue("q")], [], active[1:], [], now=T + 121, failover_grace=20)
    assert list(later.evictions["east"]) == ["patient"] and later.next_eviction is None


@pytest.mark.parametrize(("failover", "path", "rule"), [
    pytest.param("{application: {decisionConditions: {tolerationSeconds: 150}, purgeMode: Immediately}}",
                 "documents[1].spec.failover.application", "application failover",
                 id="application failover (corpus: federated-resource-quota policy)"),
    pytest.param("{cluster: {purgeMode: Directly}}", "documents[1].spec.failover.cluster", "NoExecute taints",
                 id="cluster failover is the taints' business"),
    pytest.param("{}", "documents[1].spec.failover", "means nothing", id="empty"),
])
def test_policy_failover_is_refused_naming_the_behaviour(failover: str, path: str, rule: str) -> None:
    text = JOB + POLICY.format(toleration="") + f"  failover: {failover}\n"
    with pytest.raises(InvalidInput) as info:
        load_manifests(text)
    assert info.value.path == path and info.value.rule.startswith("not supported") and rule in info.value.rule


def test_an_empty_operator_is_equal_as_in_kubernetes() -> None:
    """``operator: ""`` is Kubernetes' default (Equal), in YAML as over gRPC; it was refused."""
    policy = load_manifests(JOB + POLICY.format(toleration='{key: k, operator: "", value: v, effect: NoSchedule}'))
    assert policy.job.propagation is not None
    assert policy.job.propagation.cluster_tolerations == (
        Toleration(key="k", operator="Equal", value="v", effect="NoSchedule"),)


def test_an_empty_operator_in_a_pod_template_toleration_is_equal() -> None:
    """A pod template's ``operator: ""`` is Equal too, as in Kubernetes, a policy's
    ``clusterTolerations`` and a gRPC toleration: it was refused as not Equal or Exists."""
    text = """apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: j}
spec:
  tasks:
  - name: w
    replicas: 1
    template:
      spec:
        tolerations: [{key: gpu, operator: "", value: x, effect: NoSchedule}]
        containers: [{name: c, image: x}]
"""
    job = load_manifests(text).job
    assert job.tasks[0].constraints.tolerations == (Toleration("gpu", "Equal", "x", "NoSchedule"),)
