"""The demo's eyes: everything it shows is read through the public API, as ``fedctl`` would.

``Observer.watch`` follows WatchJobs (resuming after the last event id when the stream
breaks) into the event feed; ``Observer.poll`` reads ListClusters and ListJobs, asks
ExplainJob why each shown pending job waits, and samples the queue shares. Times are
stamped with the simulated clock when the demo sees them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection

from federation.client import FederationClient, ServiceError
from federation.demo.state import DemoState, cluster_view, event_line

log = logging.getLogger(__name__)

EXPLAIN_PER_POLL = 8


class Observer:
    def __init__(self, client: FederationClient, state: DemoState, now: Callable[[], float],
                 down: Callable[[], Collection[str]]) -> None:
        self.client = client
        self.state = state
        self.now = now  # simulated seconds since the demo began
        self.down = down  # clusters whose agent the demo has stopped

    async def watch(self) -> None:
        """Follow the job event feed until cancelled."""
        last = 0
        while True:
            try:
                async for ev in self.client.watch_jobs(from_event_id=last):
                    last = ev.event_id
                    self.state.add(event_line(self.now(), ev))
            except ServiceError as exc:
                log.warning("watch interrupted (%s); resuming after event %d", exc, last)
            await asyncio.sleep(0.2)

    async def poll(self) -> None:
        """One observation: clusters, jobs, the reasons of pending jobs, a share sample."""
        jobs = await self.client.list_jobs()
        down = self.down()
        clusters = [cluster_view(c, c.name in down) for c in await self.client.list_clusters()]
        self.state.sim_now = self.now()
        self.state.update_jobs(jobs, clusters)
        reasons: dict[str, str] = {}
        for job in self.state.pending()[:EXPLAIN_PER_POLL]:
            if job.unschedulable:
                reasons[job.spec.name] = job.reason
                continue
            try:
                explained = await self.client.explain_job(job.spec.name)
            except ServiceError:
                continue
            reasons[job.spec.name] = explained.pending.reason or explained.message or "waiting for the next round"
        self.state.reasons = reasons
