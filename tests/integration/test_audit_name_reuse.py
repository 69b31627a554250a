"""A job name used again after its first job's queue was deleted (job names are unique only
among the jobs that exist) starts a new audit. The planning audit outlives jobs, so
without that the new job's owner — possibly another tenant — read the first job's
decisions as its own (clusters, nodes, score terms, preemptors), over real gRPC on both
dialects, and the new job's first decision could be taken for a repeat of the old one."""

from __future__ import annotations

from datetime import UTC, datetime

from servicekit import ADMIN, NLP, VISION, client, queue, running, secured, spec

from federation.domain import Placement, Plan, PodAssignment, Unplaced
from federation.store import Store
from federation.store.plan_records import decisions_from_plan, round_from_plan, updates_from_plan

T0 = datetime(2026, 1, 1, 12, tzinfo=UTC)


def _record(store: Store, plan: Plan) -> int:
    versions = {r.name: r.version for r in store.jobs.in_states(["pending", "placed", "dispatched", "running"])}
    return store.audit.record_round(round_from_plan(plan, started_at=T0, ended_at=T0), decisions_from_plan(plan),
                                    updates_from_plan(plan, versions)).round_id


async def test_a_reused_job_name_does_not_show_the_first_jobs_audit(store: Store) -> None:
    store.clusters.register("east", 1)
    async with running(store, secured()) as srv, \
            client(srv, ADMIN) as admin, client(srv, NLP) as nlp, client(srv, VISION) as vision:
        await admin.create_queue(queue("nlp-q", "nlp"))
        await nlp.submit_job(spec("pretrain", "nlp-q"))
        secret = PodAssignment("worker", 0, "nlp-secret-node")
        _record(store, Plan(unplaced=(Unplaced("pretrain", "no room in nlp-reserved", "capacity", "east"),)))
        _record(store, Plan(placements=(Placement("pretrain", "east", "nlp-leaf", 1, (secret,)),)))
        await nlp.cancel_job("pretrain")
        await admin.delete_queue("nlp-q")

        await admin.create_queue(queue("vision-q", "vision"))
        await vision.submit_job(spec("pretrain", "vision-q"))
        assert list((await vision.job_audit("pretrain")).decisions) == []
        explained = await vision.explain_job("pretrain")
        assert (explained.pending.round_id, explained.pending.closest_cluster) == (0, "")
        assert "nlp" not in str(explained)

        # The new job's first decision is its own, even when it reads like the old one's.
        mine = _record(store, Plan(unplaced=(Unplaced("pretrain", "no room in nlp-reserved", "capacity", "east"),)))
        audit = await vision.job_audit("pretrain")
        assert [d.round.round_id for d in audit.decisions] == [mine]
        assert (await vision.explain_job("pretrain")).pending.round_id == mine
        # Admins, too, read the job's own decisions while it exists.
        assert len((await admin.job_audit("pretrain")).decisions) == 1
