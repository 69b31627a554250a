"""How ``fedctl`` prints: aligned tables and key/value blocks for people, JSON for scripts.

Kept apart from the command wiring so the JSON shape (the proto's JSON mapping, with
every field present so scripts need no defaults) is decided in one place.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from google.protobuf import json_format
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from federation.v1 import audit_pb2, clusters_pb2, jobs_pb2, objects_pb2, queues_pb2

OBJECT_KINDS = ("propagationpolicy", "clusterpropagationpolicy", "priorityclass")


def to_dict(msg: Message) -> dict[str, object]:
    return json_format.MessageToDict(msg, always_print_fields_with_no_presence=True)


def dumps(value: object) -> str:
    return json.dumps(value, indent=2, sort_keys=False)


def json_one(msg: Message) -> str:
    return dumps(to_dict(msg))


def json_many(key: str, msgs: Iterable[Message]) -> str:
    return dumps({key: [to_dict(m) for m in msgs]})


def printable(text: str) -> str:
    """``text`` with every character a terminal would act on shown as an escape (``\\x1b``, ``\\n``).

    Free text comes from other parties — a tenant's cancel reason, a container's
    termination message relayed by an agent — and was printed raw: ``ESC [2J`` cleared
    an operator's screen, ``ESC ] 0;…`` retitled it, and a newline forged a line of output.
    """
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)


def _lines(lines: Iterable[str]) -> str:
    return "\n".join(printable(line) for line in lines)


def table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    cells = [list(headers)] + [["" if c is None else printable(str(c)) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells)


def when(stamp: Timestamp) -> str:
    if not stamp.seconds and not stamp.nanos:
        return "-"
    return datetime.fromtimestamp(stamp.seconds + stamp.nanos / 1e9, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def state(value: int) -> str:
    return jobs_pb2.JobState.Name(value).removeprefix("JOB_STATE_").lower()  # type: ignore[arg-type]  # Name() is typed for the enum, takes any int


def _short(text: str, width: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def jobs_table(jobs: Iterable[jobs_pb2.Job]) -> str:
    return table(
        ("NAME", "QUEUE", "STATE", "CLUSTER", "HYPERNODE", "TIER", "REASON"),
        ((j.id, j.spec.queue, state(j.state), j.cluster or "-", j.hypernode or "-", j.tier or "-",
          _short(j.reason) or "-") for j in jobs),
    )


def job_block(job: jobs_pb2.Job) -> str:
    spec = job.spec
    lines = [
        f"name:       {job.id}",
        f"queue:      {spec.queue}",
        f"tenant:     {job.tenant or '-'}",
        f"state:      {state(job.state)}" + (" (unschedulable)" if job.unschedulable else ""),
        f"priority:   {job.effective_priority}" + (f" ({spec.priority_class})" if spec.priority_class else ""),
        f"cluster:    {job.cluster or '-'}",
        f"hypernode:  {job.hypernode or '-'}" + (f" (tier {job.tier})" if job.hypernode else ""),
        f"submitted:  {when(job.submitted)}",
        f"updated:    {when(job.updated)}",
        f"restarts:   {job.restarts}",
        f"reason:     {job.reason or '-'}",
    ]
    if spec.HasField("ttl_seconds_after_finished"):
        lines.append(f"ttl:        {spec.ttl_seconds_after_finished}s after it finishes"
                     + (f" (deleted at {when(job.expires)})" if job.HasField("expires") else ""))
    if job.message:
        lines.append(f"message:    {job.message}")
    lines.append("tasks:")
    for task in spec.tasks:
        res = ", ".join(f"{k}={v}" for k, v in sorted(task.resources.items()))
        lines.append(f"  - {task.name}: {task.replicas} x {{{res}}}")
    return _lines(lines)


def explain_block(resp: jobs_pb2.ExplainJobResponse) -> str:
    lines = [f"job {resp.name} is {state(resp.state)}"]
    if resp.policy:
        lines.append(f"propagation policy: {resp.policy}")
    if resp.HasField("placement"):
        p = resp.placement
        lines.append(f"placed on cluster {p.cluster} in HyperNode {p.hypernode or '-'} (tier {p.tier})"
                     + (f" by round {resp.round_id}" if resp.round_id else ""))
        for pod in p.pods:
            lines.append(f"  {pod.task}[{pod.index}] -> {pod.node or '-'}")
    elif resp.HasField("pending"):
        e = resp.pending
        lines.append(f"pending: {e.reason or '-'}")
        lines.append(f"blocking constraint: {e.constraint or '-'}")
        lines.append(f"closest cluster: {e.closest_cluster or '-'}")
        if e.unschedulable:
            lines.append("unschedulable: no allowed cluster could hold it even empty")
        if e.round_id:
            lines.append(f"round: {e.round_id} at {when(e.round_time)}")
    if resp.topology_wait:
        lines.append(resp.topology_wait)
    if resp.message:
        lines.append(resp.message)
    return _lines(lines)


def _quantities(q: dict[str, str] | object) -> str:
    items = sorted(q.items()) if isinstance(q, dict) else sorted(getattr(q, "items", lambda: [])())
    return ",".join(f"{k}={v}" for k, v in items) or "-"


def queues_table(queues: Iterable[queues_pb2.Queue]) -> str:
    return table(
        ("NAME", "WEIGHT", "PRIORITY", "CAPABILITY", "GUARANTEE", "OWNERS", "PENDING", "RUNNING", "SHARE"),
        ((q.name, q.weight, q.priority,
          _quantities(dict(q.capability.quantities)) if q.HasField("capability") else "-",
          _quantities(dict(q.guarantee)), ",".join(q.owners) or "*",
          q.status.pending_jobs, q.status.running_jobs, f"{q.status.dominant_share:.2f}") for q in queues),
    )


def clusters_table(clusters: Iterable[clusters_pb2.Cluster]) -> str:
    def health(c: clusters_pb2.Cluster) -> str:
        return clusters_pb2.ClusterHealth.Name(c.health).removeprefix("CLUSTER_HEALTH_").lower()

    return table(
        ("NAME", "HEALTH", "EPOCH", "NODES", "READY", "HYPERNODES", "ACTIVE-JOBS", "LAST-HEARTBEAT", "TAINTS"),
        ((c.name, health(c), c.epoch, c.last_snapshot.nodes, c.last_snapshot.ready_nodes,
          c.last_snapshot.hypernodes, c.active_jobs, when(c.last_heartbeat),
          ",".join(f"{t.key}={t.value}:{t.effect or 'NoSchedule'}" for t in (*c.taints, *c.admin_taints)) or "-")
         for c in clusters),
    )


def audit_table(audit: audit_pb2.JobAudit) -> str:
    pruned = ""
    if audit.HasField("pruned_before"):
        pruned = (f"note: audit retention pruned the rounds that ended before {when(audit.pruned_before)}; "
                  f"older decisions about {audit.job} are no longer kept\n")
    if not audit.decisions:
        return pruned + f"job {audit.job}: no planning round has considered it yet"
    return pruned + table(
        ("ROUND", "TIME", "OUTCOME", "CLUSTER", "HYPERNODE", "TIER", "CONSTRAINT", "REASON"),
        ((d.round.round_id, when(d.round.started), d.outcome, d.cluster or "-", d.hypernode or "-",
          d.tier if d.cluster else "-", d.constraint or "-", _short(d.reason) or "-") for d in audit.decisions),
    )


def event_line(ev: jobs_pb2.JobEvent) -> str:
    kind = jobs_pb2.JobEventType.Name(ev.type).removeprefix("JOB_EVENT_TYPE_").lower()
    line = f"{ev.event_id}  {when(ev.time)}  {ev.job.id}  {kind}  {state(ev.job.state)}  {ev.message}"
    return printable(line.rstrip(" "))


def _policy_ref(p: objects_pb2.Policy) -> str:
    return f"{p.kind.lower()}/{p.namespace + '/' if p.namespace else ''}{p.name}"


def policies_table(policies: Iterable[objects_pb2.Policy]) -> str:
    return table(("POLICY", "PRIORITY", "VERSION", "JOBS", "UPDATED"),
                 ((_policy_ref(p), p.priority, p.version, len(p.jobs), when(p.updated)) for p in policies))


def policy_block(p: objects_pb2.Policy) -> str:
    spec = json.loads(p.document_json or "{}").get("spec", {})
    lines = [f"policy:     {_policy_ref(p)}", f"priority:   {p.priority}", f"version:    {p.version}",
             f"updated:    {when(p.updated)}", f"jobs:       {', '.join(p.jobs) or '-'}",
             "spec:       " + json.dumps(spec, sort_keys=True)]
    return _lines(lines)


def classes_table(classes: Iterable[objects_pb2.PriorityClass]) -> str:
    return table(("NAME", "VALUE", "GLOBAL-DEFAULT", "PREEMPTION", "DESCRIPTION"),
                 ((c.name, c.value, str(c.global_default).lower(), c.preemption_policy, _short(c.description))
                  for c in classes))
