"""The svc plugin's NetworkPolicy, as Volcano's svc plugin makes it
(pkg/controllers/job/plugins/svc, ``createNetworkPolicyIfNotExist``): a job with svc
gets the policy ``<job>`` admitting ingress to its pods only from its own pods, unless
``--disable-network-policy``; it goes with the job (cancel, orphan sweep), a user's policy
of the same name is never replaced or deleted, and the Kubernetes body is the one the
apiserver is given."""

from __future__ import annotations

from agentkit import fake, job, observe, step, work

from agents.core.apply import apply_ops
from agents.core.operations import CreateNetworkPolicy, DeleteNetworkPolicy
from agents.core.reconcile import reconcile
from agents.core.records import ANNOTATION_SPEC_HASH, LABEL_JOB, NetworkPolicyManifest
from agents.core.render import render
from agents.k8s.convert import network_policy_body, network_policy_record
from agents.runtime_jobs import orphan_ops

SVC = (("svc", ()),)


def test_svc_renders_a_policy_that_admits_only_the_jobs_own_pods() -> None:
    policy = render(work(job(plugins=SVC))).network_policy
    assert policy is not None
    assert (policy.name, policy.namespace) == ("train", "default")
    assert policy.labels == {LABEL_JOB: "train"} and policy.selector == {LABEL_JOB: "train"}
    assert all(p.labels[LABEL_JOB] == "train" for p in render(work(job(plugins=SVC))).pods)  # it selects them


def test_frameworks_that_imply_svc_get_the_policy_too() -> None:
    for plugin in ("mpi", "pytorch", "tensorflow"):
        assert render(work(job(tasks=(("master", 1, 0), ("worker", 1, 8)), plugins=((plugin, ()),)))).network_policy


def test_no_policy_without_svc_or_when_disabled() -> None:
    assert render(work(job())).network_policy is None
    assert render(work(job(plugins=(("svc", ("--disable-network-policy",)),)))).network_policy is None
    assert render(work(job(plugins=(("svc", ("--disable-network-policy=true",)),)))).network_policy is None


def test_body_is_volcanos_ingress_rule_and_reads_back() -> None:
    policy = render(work(job(plugins=SVC))).network_policy
    assert policy is not None
    body = network_policy_body(policy)
    pods = {"matchLabels": {LABEL_JOB: "train"}}
    assert body["apiVersion"] == "networking.k8s.io/v1" and body["kind"] == "NetworkPolicy"
    assert body["spec"] == {"podSelector": pods, "ingress": [{"from": [{"podSelector": pods}]}],
                            "policyTypes": ["Ingress"]}
    assert body["metadata"]["annotations"][ANNOTATION_SPEC_HASH] == policy.annotations[ANNOTATION_SPEC_HASH]
    assert network_policy_record(body) == policy


async def test_the_policy_is_created_once_and_withdrawn_with_the_job() -> None:
    cluster = fake()
    w = work(job(plugins=SVC))
    await step(cluster, w)
    assert [p.name for p in cluster.network_policies()] == ["train"]
    again = reconcile(w, await observe(cluster, w))
    assert not [op for op in again.ops if isinstance(op, CreateNetworkPolicy | DeleteNetworkPolicy)]
    await step(cluster, work(w.job, cancelled=True))
    assert cluster.network_policies() == []


async def test_turning_the_policy_off_in_a_new_version_deletes_it() -> None:
    cluster = fake()
    w = work(job(plugins=SVC))
    await step(cluster, w)
    off = work(job(plugins=(("svc", ("--disable-network-policy=true",)),)), version=2)
    result = reconcile(off, await observe(cluster, off))
    assert DeleteNetworkPolicy("default", "train") in result.ops
    assert (await apply_ops(cluster, result.ops)).ok
    assert cluster.network_policies() == []


async def test_a_users_policy_of_that_name_is_neither_replaced_nor_deleted() -> None:
    cluster = fake()
    theirs = NetworkPolicyManifest("train", "default", selector={"app": "web"})
    cluster.add_network_policy(theirs)
    w = work(job(plugins=SVC))
    result = reconcile(w, await observe(cluster, w))
    assert not [op for op in result.ops if isinstance(op, DeleteNetworkPolicy)]  # not labelled: not observed
    applied = await apply_ops(cluster, result.ops)
    assert not applied.ok and "already exists" in applied.error
    assert await cluster.delete_network_policy("default", "train") is False
    assert cluster.network_policies() == [theirs]


def test_orphan_sweep_withdraws_policies_of_jobs_no_longer_wanted() -> None:
    orphan = NetworkPolicyManifest("gone", "ns1", labels={LABEL_JOB: "gone"})
    kept = NetworkPolicyManifest("train", "default", labels={LABEL_JOB: "train"})
    users = NetworkPolicyManifest("web", "default")
    assert orphan_ops((), (), (), {"train"}, (orphan, kept, users)) == (DeleteNetworkPolicy("ns1", "gone"),)
