"""Baseline ``volcano-greedy``: volcano-global dispatch + Volcano's topology-aware allocate.

Modelled from the published descriptions (no code copied):

* volcano-sh/volcano-global ``pkg/dispatcher/dispatcher.go`` with its capacity and
  priority plugins: queues ordered by ``Queue.spec.priority``; a job is let through when
  the summed free resources allow it. The member cluster is then chosen by Karmada, which
  volcano-global does not optimise: we model it as *the first allowed cluster, in name
  order, whose summed free resources cover the gang's minResources and whose nodes have
  enough pod slots* (Karmada's accurate scheduler-estimator; still topology-blind —
  volcano-global itself checks sums only, issue #32). If Volcano then cannot
  place the gang in that cluster, the job stays pending there this round.
* volcano-sh/volcano at ed72c7c (2026-08-20), ``pkg/scheduler/actions/allocate/allocate.go``
  and ``pkg/scheduler/plugins/network-topology-aware/network_topology_aware.go``, with the
  plugins of the default ``volcano-scheduler.conf`` plus network-topology-aware: queues
  by priority then proportion's share (``volcano_proportion``: allocated / deserved, a queue
  at its deserved share is skipped and a gang that would take it past it waits), jobs by
  priority then creation time. Hard mode with a tier limit, **and soft mode** (converted by
  the session to hard mode up to the virtual top tier, ``framework/session.go``
  ``convertSoftToHardTopology``, volcano-sh/volcano#5206, since v1.15.0): HyperNodes whose
  idle covers minResources are grouped by ascending tier (``hyperNodeGradientFn``); the
  whole gang is dry-run on every HyperNode of the lowest tier, the best HyperNode bin-pack
  score over CPU and memory wins (random among equals), and the next tier is tried only
  when none fits. Jobs without topology (and hard mode without a resolved limit, which
  Volcano does not treat as hard) are allocated pod by pod over the whole cluster. Every
  pod goes to the node of best summed score of the default plugins (``volcano_scores``:
  nodeorder's LeastAllocated and binpack cancel out, so nodes are *not* bin-packed; pods
  with topology prefer the leaf of the job's pods placed so far, pods without it the
  fullest HyperNodes), ties drawn at random.
* Volcano's ``enqueue`` action runs first (``volcano_enqueue``; queues in proportion's
  share order, fixed during the action, so one queue's jobs are all tried before the
  next's): only jobs its overcommit and proportion plugins admitted (``JobEnqueueable``)
  are allocated, each in the cluster it was admitted to; admission persists across rounds
  as the PodGroup's Inqueue phase, until karmada-descheduler has the job re-dispatched
  because the estimator says its cluster cannot hold it while another can
  (``_redispatched``). Overcommit is per member cluster, proportion's JobEnqueueable per
  federation queue (volcano-global's dispatcher); proportion's deserved share inside
  allocate is per member cluster, as each member runs its own Volcano.
* No preemption (``preempt``/``reclaim`` are not in Volcano's default action list).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import replace
from random import Random

from federation.domain.clusters import ClusterSnapshot
from federation.domain.jobs import Job
from federation.domain.nodes import Node
from federation.domain.plans import FederationSnapshot, PendingJob, Placement, Plan, PlanLimits, PodAssignment, Unplaced
from federation.domain.resources import CPU, MEMORY, Resources, total
from federation.domain.topology import ROOT_DOMAIN, Domain
from federation.placement.baselines.common import (
    Attempt,
    BaselineLedger,
    Failures,
    Pod,
    PodFilter,
    by_submission,
    gang_met,
    kept_partitions,
    placed_request,
    placement_for,
    unplaced,
)
from federation.placement.baselines.volcano_enqueue import EnqueueGate, rejection
from federation.placement.baselines.volcano_proportion import Proportion
from federation.placement.baselines.volcano_scores import TOP, DryRun, pick, tie_breaker
from federation.placement.eligibility import (
    allowed_clusters,
    can_ever_hold,
    candidate_domains,
    tier_limit,
    usable_nodes,
)


def _free(cluster: ClusterSnapshot, ledger: BaselineLedger) -> dict[str, Resources]:
    return {n.name: ledger.node_free(cluster.name, n) for n in cluster.nodes}


def _topology_job(job: Job) -> bool:
    """The job has a ``networkTopology`` (network-topology-aware scores its nodes by LCA tier)."""
    return job.network_topology is not None


def _gradient_path(job: Job, cluster: ClusterSnapshot) -> bool:
    """Volcano allocates the job HyperNode by HyperNode (``allocateForJob``): hard mode with a
    resolved tier limit, and soft mode, which the session converts to hard mode with the
    virtual top's tier (``pkg/scheduler/framework/session.go`` ``convertSoftToHardTopology``,
    volcano-sh/volcano#5206). Hard mode without a resolved limit is not hard to Volcano
    (``SubJobInfo.IsHardTopologyMode``) and takes the whole-cluster path."""
    topo = job.network_topology
    if topo is None:
        return False
    return not topo.hard or tier_limit(job, cluster) is not None


def task_order(job: Job, pods: Sequence[Pod]) -> list[Pod]:
    """Volcano's TaskOrderFn for one job's pods: the gang's pods first (an elastic job's
    extras after them), then by pod index within its task (``pkg/controllers/job/helpers/
    helpers.go`` ``CompareTask``: index 0 of every task before index 1 of any), ties in
    task order (creation order). Pod priority would come first; tasks here have none."""
    gang = {(t, i) for t, i, _ in job.gang_pods()}
    position = {t.name: k for k, t in enumerate(job.tasks)}
    return sorted(pods, key=lambda p: ((p[0], p[1]) not in gang, p[1], position[p[0]]))


def _bind(job: Job, cluster: ClusterSnapshot, nodes: list[Node], ledger: BaselineLedger,
          rng: Random) -> tuple[PodAssignment, ...] | None:
    """``allocateResourcesForTasks``: pods in task order, each on its best-scoring node among
    ``nodes`` (``volcano_scores``), the gang's pods or none; an elastic job's extra pods
    follow where they fit. The ledger is not changed."""
    pods = ledger.pods(job)
    run = DryRun(cluster, _free(cluster, ledger), _topology_job(job), len(pods))
    allows = PodFilter(job)
    gang = {(t, i) for t, i, _ in job.gang_pods()}
    out: list[PodAssignment] = []
    for task, index, request in task_order(job, pods):
        fits = [n for n in nodes if request.fits_in(run.free[n.name]) and allows(task, n)]
        best = pick(run.scores(fits, request), rng)
        if best is None:
            if (task, index) in gang:
                return None
            continue
        run.place(best.name, request)
        allows.took(task, best)
        out.append(PodAssignment(task, index, best.name))
    return tuple(out)


def _hard(job: Job, cluster: ClusterSnapshot, ledger: BaselineLedger, rng: Random) -> Attempt:
    """``allocateForJob``: HyperNodes within the limit whose idle covers minResources, by
    ascending tier; the gang is dry-run in each HyperNode of the lowest tier and the one of
    best HyperNode bin-pack score wins (random among equals); the next tier only when none fits."""
    need = ledger.gang_request(job)
    usable = {n.name: n for n in usable_nodes(cluster, job)}
    gradients: dict[int, list[Domain]] = {}
    for domain in candidate_domains(job, cluster):
        members = [usable[n] for n in sorted(domain.nodes) if n in usable]
        idle = total(ledger.node_free(cluster.name, n) for n in members)
        if members and need.fits_in(idle):
            gradients.setdefault(domain.tier, []).append(domain)
    base = DryRun(cluster, _free(cluster, ledger), True, 0)
    everything = total(r for _, _, r in ledger.pods(job))
    for tier in sorted(gradients):
        found: list[tuple[float, tuple[str, tuple[PodAssignment, ...]]]] = []
        for domain in gradients[tier]:
            members = [usable[n] for n in sorted(domain.nodes) if n in usable]
            pods = _bind(job, cluster, members, ledger, rng)
            if pods is not None:
                name = TOP if domain.name == ROOT_DOMAIN else domain.name
                found.append((base.hypernode_score(name, everything), (domain.name, pods)))
        best = pick(found, rng)
        if best is not None:
            return Attempt(placement_for(job, cluster, best[1], best[0]))
    return Attempt(None, "topology", f"no HyperNode of tier <= limit in {cluster.name} can hold the gang now",
                   cluster.name)


def _whole_cluster(job: Job, cluster: ClusterSnapshot, ledger: BaselineLedger, rng: Random) -> Attempt:
    """A job without a (hard, resolved) topology: its pods over every node of the cluster."""
    pods = _bind(job, cluster, list(usable_nodes(cluster, job)), ledger, rng)
    if pods is not None and gang_met(job, pods):
        return Attempt(placement_for(job, cluster, pods))
    return Attempt(None, "capacity", f"Volcano in {cluster.name} cannot bind the gang (fragmented nodes)",
                   cluster.name)


def _room(job: Job, cluster: ClusterSnapshot, ledger: BaselineLedger) -> bool:
    """Karmada's estimate that the cluster can run the gang: enough summed free for its
    minResources and enough pod slots node by node (the accurate scheduler-estimator,
    ``pkg/estimator/server``), still blind to the network topology."""
    if not ledger.gang_request(job).fits_in(ledger.cluster_free(cluster, job)):
        return False
    pod = max((r for _, _, r in ledger.pods(job)), key=lambda r: (r.gpus, r.get(CPU), r.get(MEMORY)))
    slots = 0
    for node in usable_nodes(cluster, job):
        have = ledger.node_free(cluster.name, node)
        slots += min((have.get(k) // v for k, v in pod if v > 0), default=0)
        if slots >= job.gang_size:
            return True
    return False


def _dispatch(job: Job, snapshot: FederationSnapshot, ledger: BaselineLedger) -> ClusterSnapshot | None:
    """volcano-global lets the job through; Karmada picks the first allowed cluster with room."""
    for group in allowed_clusters(job, snapshot):
        for cluster in sorted(group, key=lambda c: c.name):
            if _room(job, cluster, ledger):
                return cluster
    return None


def _allocate(job: Job, cluster: ClusterSnapshot, ledger: BaselineLedger, rng: Random) -> Attempt:
    if _gradient_path(job, cluster):
        return _hard(job, cluster, ledger, rng)
    return _whole_cluster(job, cluster, ledger, rng)


def _gating_cluster(job: Job, snapshot: FederationSnapshot, ledger: BaselineLedger) -> ClusterSnapshot | None:
    """The member cluster whose Volcano sees the job: Karmada's choice (the first with room).

    When no cluster has room now, Karmada does not bind the job anywhere, so no Volcano
    gates it, unless it may use one cluster only. Then it is created there and waits in
    that cluster's enqueue, as on a single Volcano cluster.
    """
    chosen = _dispatch(job, snapshot, ledger)
    if chosen is not None:
        return chosen
    allowed = [c for group in allowed_clusters(job, snapshot) for c in group]
    if len(allowed) == 1 and can_ever_hold(job, allowed[0]):
        return allowed[0]
    return None


def _redispatched(job: Job, home: str, snapshot: FederationSnapshot, ledger: BaselineLedger) -> bool:
    """Karmada takes an Inqueue job away from ``home``: the cluster was lost or is no longer
    allowed, or karmada-descheduler evicts its unschedulable pods because the estimator
    says ``home`` cannot hold the gang (no summed room now, or never within its hard tier
    limit) while another allowed cluster can (``volcano_enqueue`` module docstring)."""
    allowed = [c for group in allowed_clusters(job, snapshot) for c in group]
    cluster = next((c for c in allowed if c.name == home), None)
    if cluster is None:
        return True
    if can_ever_hold(job, cluster) and _room(job, cluster, ledger):
        return False
    return any(c.name != home and can_ever_hold(job, c) and _room(job, c, ledger) for c in allowed)


def _enqueue(order: list[PendingJob], snapshot: FederationSnapshot, ledger: BaselineLedger,
             gate: EnqueueGate, running: dict[str, dict[str, Resources]]) -> dict[str, Unplaced]:
    """Volcano's enqueue action in each member cluster over the jobs Karmada dispatched there;
    returns the ones it left Pending.

    ``pkg/scheduler/actions/enqueue/enqueue.go`` pops the first queue by ``QueueOrderFn``,
    tries its next job and pushes the queue back. Proportion's share (allocated / deserved)
    changes only when a task is allocated, never during enqueue, so the queue order is fixed
    for the whole action: **every pending job of the first queue is tried before the next
    queue's**, in job order (priority, then creation time).
    """
    jobs = {p.job.name: p.job for p in order}
    for name, home in list(gate.admitted.items()):
        job = jobs.get(name)
        if job is None or _redispatched(job, home, snapshot, ledger):
            del gate.admitted[name]  # dispatched afresh below
    gate.hold((p.job, ledger.gang_request(p.job)) for p in order)
    waiting: dict[str, list[Job]] = {}
    inqueue: dict[str, list[Job]] = {}
    for pending in by_submission(order):
        job = pending.job
        if job.name in gate.admitted:
            inqueue.setdefault(gate.admitted[job.name], []).append(job)
            continue
        if ledger.verdict(job) is not None:
            continue
        cluster = _gating_cluster(job, snapshot, ledger)
        if cluster is not None:
            waiting.setdefault(cluster.name, []).append(job)
    clusters = {c.name: c for c in snapshot.clusters}
    rejected: dict[str, Unplaced] = {}
    for name in sorted(waiting):
        cluster = clusters[name]
        prop = _proportion(cluster, inqueue.get(name, []), snapshot, running)

        def share(queue_name: str, prop: Proportion = prop) -> tuple[int, float, str]:
            queue = snapshot.queue(queue_name)
            state = prop.state(queue_name)
            return (-(queue.priority if queue is not None else 0), state.share if state is not None else 0.0,
                    queue_name)

        for queue_name in sorted({j.queue for j in waiting[name]}, key=share):
            for job in (j for j in waiting[name] if j.queue == queue_name):
                plugin = gate.verdict(job, ledger.gang_request(job), cluster)
                if plugin is not None:
                    constraint, reason = rejection(plugin, cluster.name)
                    rejected[job.name] = Unplaced(job.name, reason, constraint, cluster.name)
    return rejected


def _try(job: Job, snapshot: FederationSnapshot, ledger: BaselineLedger, failures: Failures, rng: Random,
         admitted: ClusterSnapshot | None = None) -> Placement | Unplaced:
    """Dispatch then allocate one job; failures are remembered per gang shape (and cluster)
    because free capacity only shrinks within a round, so an identical gang fails again.
    A job Volcano enqueued in ``admitted`` is allocated there only."""
    known = failures.get(job, admitted.name if admitted is not None else "")
    if known is not None:
        return known
    if not ledger.within_capability(job, ledger.gang_request(job)):
        why = Attempt(None, "queue-capability", f"queue {job.queue} capability would be exceeded")
        return failures.add(job, unplaced(job, ledger, why))
    cluster = admitted if admitted is not None else _dispatch(job, snapshot, ledger)
    if cluster is None:
        why = Attempt(None, "capacity", "no allowed cluster has room for the gang")
        return failures.add(job, unplaced(job, ledger, why))
    known = failures.get(job, cluster.name)
    if known is not None:
        return known
    attempt = kept_partitions(job, ledger, _allocate(job, cluster, ledger, rng))
    if attempt.placement is not None and ledger.within_capability(job, placed_request(job, attempt.placement)):
        return attempt.placement
    return failures.add(job, unplaced(job, ledger, attempt), cluster.name)


def _running(snapshot: FederationSnapshot, ledger: BaselineLedger) -> dict[str, dict[str, Resources]]:
    """What the running jobs hold, per member cluster and queue (computed once a round)."""
    out: dict[str, dict[str, Resources]] = {}
    for run in snapshot.running:
        pods = ledger.pods(run.job)
        if len(run.placement.pods) == len(pods):
            held = run.job.requests
        else:  # an elastic job at another size than its replicas
            reqs = {(t, i): r for t, i, r in pods}
            held = total(reqs[(p.task, p.index)] for p in run.placement.pods)
        queues = out.setdefault(run.placement.cluster, {})
        queues[run.job.queue] = queues.get(run.job.queue, Resources()) + held
    return out


_CAPACITY: dict[int, tuple[ClusterSnapshot, Resources]] = {}


def _capacity(cluster: ClusterSnapshot) -> Resources:
    """The cluster's usable allocatable (remembered by snapshot identity: snapshots are immutable)."""
    hit = _CAPACITY.get(id(cluster))
    if hit is not None and hit[0] is cluster:
        return hit[1]
    found = total(n.allocatable for n in cluster.nodes if n.usable) if cluster.healthy else Resources()
    if len(_CAPACITY) > 512:  # bounded: entries keep their snapshots alive
        _CAPACITY.clear()
    _CAPACITY[id(cluster)] = (cluster, found)
    return found


def _proportion(cluster: ClusterSnapshot, jobs: list[Job], snapshot: FederationSnapshot,
                running: dict[str, dict[str, Resources]]) -> Proportion:
    """Proportion in ``cluster``: allocated by the jobs running there, requested by ``jobs``
    (Inqueue there: their pods exist), dealt out of the cluster's usable allocatable."""
    requested: dict[str, Resources] = {}
    for job in jobs:
        requested[job.queue] = requested.get(job.queue, Resources()) + job.requests
    capacity = _capacity(cluster)
    return Proportion(capacity, snapshot.queues, dict(running.get(cluster.name, {})), requested,
                      guarantees=len(snapshot.clusters) == 1)


def _allocate_in(cluster: ClusterSnapshot, jobs: list[Job], snapshot: FederationSnapshot, ledger: BaselineLedger,
                 failures: Failures, rng: Random, running: dict[str, dict[str, Resources]],
                 ) -> tuple[list[Placement], list[Unplaced]]:
    """Volcano's ``allocate`` action in one member cluster over the jobs Inqueue there:
    the queue of highest priority and lowest proportion share first, one job at a time in
    job order; an overused queue is skipped for the rest of the action, and a job is
    allocated only while its queue stays within its deserved share (``volcano_proportion``).
    A job that does not start stays Inqueue in ``cluster``."""
    prop = _proportion(cluster, jobs, snapshot, running)
    queues: dict[str, deque[Job]] = {}
    for job in jobs:
        queues.setdefault(job.queue, deque()).append(job)
    placements: list[Placement] = []
    failed: list[Unplaced] = []

    def order(name: str) -> tuple[int, float, str]:
        queue = snapshot.queue(name)
        state = prop.state(name)
        return (-(queue.priority if queue is not None else 0), state.share if state is not None else 0.0, name)

    while queues:
        name = min(queues, key=order)
        state = prop.state(name)
        if state is not None and state.overused:
            for job in queues.pop(name):
                failed.append(Unplaced(job.name, f"Volcano proportion in {cluster.name}: queue {name} has reached "
                                                 f"its deserved share (overused)", "fairness", cluster.name))
            continue
        job = queues[name].popleft()
        if not queues[name]:
            del queues[name]
        if state is not None and not state.allocatable(ledger.gang_request(job)):
            outcome: Placement | Unplaced = Unplaced(
                job.name, f"Volcano proportion in {cluster.name}: queue {name}'s allocated + the gang would exceed "
                          f"its deserved share", "fairness", cluster.name)
        else:
            outcome = _try(job, snapshot, ledger, failures, rng, cluster)
        if isinstance(outcome, Placement):
            ledger.commit(job, outcome)
            if state is not None:
                state.allocate(placed_request(job, outcome))
            placements.append(outcome)
        elif not outcome.unschedulable:
            failed.append(replace(outcome, closest_cluster=cluster.name))  # stays Inqueue here
        else:
            failed.append(outcome)
    return placements, failed


def plan(snapshot: FederationSnapshot, limits: PlanLimits | None = None, previous: Plan | None = None) -> Plan:
    """Volcano's enqueue then allocate over all pending jobs (``limits`` unused; ``previous``
    tells which jobs were already Inqueue). Each member cluster allocates the jobs Inqueue
    there; a job no Volcano has admitted (Karmada has not bound it) is dispatched and
    allocated after them, in queue order."""
    del limits
    ledger = BaselineLedger(snapshot)
    gate = EnqueueGate(snapshot, previous)
    rng = tie_breaker(snapshot.now)
    running = _running(snapshot, ledger)
    rejected = _enqueue(list(snapshot.pending), snapshot, ledger, gate, running)
    placements: list[Placement] = []
    failed: list[Unplaced] = []
    failures = Failures()
    clusters = {c.name: c for c in snapshot.clusters}
    inqueue: dict[str, list[Job]] = {}
    queues: dict[str, deque[PendingJob]] = {}
    for pending in by_submission(snapshot.pending):
        job = pending.job
        if job.name in rejected:
            failed.append(rejected[job.name])
        elif job.name in gate.admitted:
            inqueue.setdefault(gate.admitted[job.name], []).append(job)
        else:
            queues.setdefault(job.queue, deque()).append(pending)
    for home in sorted(inqueue):
        done, left = _allocate_in(clusters[home], inqueue[home], snapshot, ledger, failures, rng, running)
        placements.extend(done)
        failed.extend(left)

    def order(name: str) -> tuple[int, float, str]:
        queue = snapshot.queue(name)
        weight = queue.weight if queue is not None else 1
        return (-(queue.priority if queue is not None else 0), ledger.share(name) / weight, name)

    while queues:
        name = min(queues, key=order)
        job = queues[name].popleft().job
        if not queues[name]:
            del queues[name]
        outcome = _try(job, snapshot, ledger, failures, rng)
        if isinstance(outcome, Placement):
            ledger.commit(job, outcome)
            placements.append(outcome)
        else:
            failed.append(outcome)
    return Plan(tuple(placements), tuple(failed), (), "GREEDY")
