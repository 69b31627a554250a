"""Big nodes stay for big pods (``Scoring.oversize``): tables over a fleet of two node sizes.

Fleet (``_fleet``): cluster ``s`` has two 4-GPU nodes with 2 GPUs free each; cluster ``b``
has two 8-GPU nodes with 1 GPU free each, so by free room alone ``b`` is the tighter fit for a
1-GPU pod. A 2-pod gang of 8-GPU pods (``BIG``) fits nowhere now: while it is queued, the
8-GPU nodes are what queued work needs, even busy ones (their pods end, the small pod's
may not).
"""

from __future__ import annotations

import pytest
from placement_builders import checked, flat, job, snap

from federation.domain import ClusterAffinity, ClusterSnapshot, FederationSnapshot, Job, PropagationPolicy
from federation.domain.topology import ROOT_DOMAIN
from federation.placement.score import OVERSIZE, Scoring

BIG = job("big", pods=2)
ONE = job("one", gpus=1)


def _fleet(*jobs: Job) -> FederationSnapshot:
    return snap([flat("s", [2, 2], gpus=4), flat("b", [1, 1])], list(jobs))


def _only_b(name: str, gpus: int) -> Job:
    return job(name, gpus=gpus, propagation=PropagationPolicy(cluster_affinity=ClusterAffinity(cluster_names=("b",))))


@pytest.mark.parametrize(
    ("pending", "cluster", "expect"),
    [
        ((ONE, BIG), "b", OVERSIZE),
        ((ONE, BIG), "s", 0),
        ((ONE,), "b", 0),
        ((job("eight"), BIG), "b", 0),
        ((_only_b("pinned", 1), BIG), "b", 0),
        ((ONE, BIG, job("huge", gpus=16)), "b", OVERSIZE),
    ],
    ids=[
        "a 1-GPU pod on 8-GPU nodes while 8-GPU pods queue and 4-GPU nodes exist",
        "the same pod on the 4-GPU nodes",
        "no queued pod needs 8-GPU nodes: they cost nothing",
        "an 8-GPU pod has no smaller class to use",
        "a job that may only use cluster b has no smaller class to use",
        "a pod bigger than every node never runs and does not switch the term off",
    ],
)
def test_oversize_prices_a_bigger_node_class_than_the_job_needs(pending: tuple[Job, ...], cluster: str,
                                                                expect: int) -> None:
    s = _fleet(*pending)
    scoring = Scoring(s)
    assert scoring.oversize(pending[0], cluster, ROOT_DOMAIN) == expect


def test_one_node_size_in_the_fleet_never_prices_a_class() -> None:
    s = snap([flat("a", [8, 1]), flat("c", [2, 2])], [ONE, BIG])
    assert Scoring(s).one_node_class()
    assert Scoring(s).oversize(ONE, "a", ROOT_DOMAIN) == 0


def test_a_domain_with_a_small_node_that_holds_the_pod_is_not_oversized() -> None:
    nodes = flat("m", [8, 8]).nodes + flat("t", [4], gpus=4).nodes
    s = snap([ClusterSnapshot("m", nodes)], [ONE, BIG])
    assert Scoring(s).oversize(ONE, "m", ROOT_DOMAIN) == 0


@pytest.mark.parametrize("planner", ["greedy", "cpsat"])
@pytest.mark.parametrize(
    ("queued", "cluster"),
    [(True, "s"), (False, "b")],
    ids=["a queued 8-GPU gang keeps the 8-GPU nodes for it", "without one, plain best fit (b is tightest)"],
)
def test_small_pods_go_to_small_nodes_while_big_pods_queue(planner: str, queued: bool, cluster: str) -> None:
    s = _fleet(*((ONE, BIG) if queued else (ONE,)))
    result = checked(planner, s)
    placed = result.placement("one")
    assert placed is not None and placed.cluster == cluster
    assert result.placement("big") is None
