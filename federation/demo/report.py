"""The demo's final report (printed and written to OUT/report.md) and its picture.

Sources, so every figure can be checked: job outcomes, placements and recovery events
come from the public API (ListJobs, WatchJobs), the rounds from the audit table
``placement_rounds``, the gang runs (which nodes, the lowest domain holding them, the
runtime multiplier) from the simulated clusters, and "lowest feasible tier" from the
scenario (``federation.sim.tracking.feasibility``: the lowest tier at which any allowed
cluster, empty, could hold the gang — the bench's ``lowestTierFraction`` definition).
"""

from __future__ import annotations

import itertools
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.markdown import Markdown

from federation.demo.fleet import JobRun
from federation.demo.picture import topology_svg
from federation.demo.state import DemoState, EventLine, ShareSample
from federation.demo.view import clock
from federation.sim.scenario import Scenario
from federation.sim.tracking import feasibility
from federation.store.records import RoundRecord
from federation.v1 import jobs_pb2

SECTIONS = ("## Placements", "## Topology", "## Fair share", "## Recovery", "## Planning rounds",
            "## Audit database")
RECOVERY_KINDS = frozenset({"RESTARTED", "REQUEUED", "PREEMPTED", "FAILED"})


@dataclass
class Report:
    scenario: Scenario
    state: DemoState
    runs: dict[tuple[str, str], JobRun]
    faults: list[EventLine]
    rounds: list[RoundRecord]
    db_url: str
    out: Path
    wall_seconds: float
    speed: float
    address: str
    admin_token: str
    failed_nodes: set[str] = field(default_factory=set)
    complete: bool = True

    def runs_of(self, job: str) -> list[JobRun]:
        return sorted((r for r in self.runs.values() if r.job == job), key=lambda r: r.started)


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def _state(job: jobs_pb2.Job | None) -> str:
    if job is None:
        return "not submitted"
    name = jobs_pb2.JobState.Name(job.state).removeprefix("JOB_STATE_").lower()
    return "unschedulable" if job.unschedulable and name == "pending" else name


def _table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(str(c).replace("|", "/") for c in row) + " |" for row in rows]
    return out


def summary(report: Report) -> list[str]:
    s = report.state
    states = Counter(_state(s.jobs.get(j.job.name)) for j in report.scenario.jobs)
    outcome = ", ".join(f"{n} {k}" for k, n in sorted(states.items()))
    status = "finished" if report.complete else "STOPPED AT THE WALL-TIME CAP"
    lines = [f"# federation demo — scenario `{report.scenario.name}`", "",
             f"{len(report.scenario.jobs)} jobs from {len(report.scenario.queues)} tenants on "
             f"{len(report.scenario.clusters)} clusters: {outcome}. Workload {status}: {clock(s.sim_now)} simulated "
             f"in {report.wall_seconds:.0f} s of wall time (x{report.speed:g}).", ""]
    if not report.complete:
        open_jobs = [j for j in report.scenario.jobs
                     if j.job.name not in s.jobs or not s.settled(s.jobs[j.job.name])]
        lines += ["Not finished when the demo stopped:", ""]
        lines += [f"- {j.job.name}: {_state(s.jobs.get(j.job.name))}"
                  + (f" ({s.jobs[j.job.name].reason})" if j.job.name in s.jobs and s.jobs[j.job.name].reason else "")
                  for j in open_jobs] + [""]
    return lines


def placements(report: Report) -> list[str]:
    feasible = feasibility(report.scenario)
    rows = []
    for spec in report.scenario.jobs:
        job = report.state.jobs.get(spec.job.name)
        runs = report.runs_of(spec.job.name)
        last = runs[-1] if runs else None
        best = feasible[spec.job.name].best_tier
        gpus = spec.job.requests.gpus
        ran = (f"{last.domain or '-'} (tier {last.tier}, x{last.slowdown:g}) {clock(last.started)}→"
               f"{clock(last.finished) if last.finished is not None else '…'}") if last else "-"
        moved = " ← " + ", ".join(r.cluster for r in runs[:-1]) if len(runs) > 1 else ""
        rows.append((spec.job.name, spec.job.queue, f"{spec.job.gang_size} pods / {gpus} GPU",
                     (job.cluster or "-") + moved if job else "-", (job.hypernode or "-") if job else "-",
                     job.tier if job and job.tier else "-", best if best is not None else "none", ran, _state(job)))
    return ["## Placements", "",
            "Final placement of every job (cluster ← earlier clusters it was re-placed from), the HyperNode the "
            "planner chose and its tier, the lowest tier any empty allowed cluster offers, and where the gang "
            "actually ran: the lowest domain holding all its pods, the runtime multiplier of that tier, simulated "
            "start→end.", "",
            *_table(("job", "queue", "gang", "cluster", "HyperNode", "tier", "best tier", "ran in", "state"), rows),
            ""]


def topology(report: Report) -> list[str]:
    feasible = feasibility(report.scenario)
    hits, gangs, misses = 0, 0, []
    for spec in report.scenario.jobs:
        best = feasible[spec.job.name].best_tier
        runs = [r for r in report.runs_of(spec.job.name) if r.finished is not None] or report.runs_of(spec.job.name)
        if spec.job.gang_size < 2 or best is None or not runs:
            continue
        gangs += 1
        tier = runs[-1].tier
        if tier <= best:
            hits += 1
        else:
            misses.append(f"{spec.job.name} (tier {tier}, best {best})")
    fraction = hits / gangs if gangs else 1.0
    lines = ["## Topology", "",
             f"Gangs of two or more pods in the lowest feasible tier: **{hits}/{gangs} = {fraction:.2f}** "
             "(tier of the lowest domain holding all of the gang's pods in its last run)."]
    if misses:
        lines.append(f"Above it: {', '.join(misses)} — soft-mode gangs take a higher tier rather than wait, and "
                     "re-placed gangs go where there is room.")
    return [*lines, "", "The picture `topology.svg` draws each cluster's HyperNode tree with the gangs in the domains "
            "they occupied.", ""]


def shares(samples: Sequence[ShareSample], queues: Sequence[str]) -> dict[str, tuple[float, float, float]]:
    """Per queue: time-weighted mean dominant share, fair share and mean absolute deviation."""
    acc = {q: [0.0, 0.0, 0.0] for q in queues}
    span = 0.0
    for a, b in itertools.pairwise(samples):
        dt = max(0.0, b.at - a.at)
        span += dt
        for q in queues:
            share, fair = a.shares.get(q, (0.0, 0.0))
            acc[q][0] += share * dt
            acc[q][1] += fair * dt
            acc[q][2] += abs(share - fair) * dt
    return {q: (v[0] / span, v[1] / span, v[2] / span) if span else (0.0, 0.0, 0.0) for q, v in acc.items()}


def fairness(report: Report) -> list[str]:
    names = [q.name for q in report.scenario.queues]
    means = shares(report.state.samples, names)
    weights = {q.name: q.weight for q in report.scenario.queues}
    rows = [(q, weights[q], f"{m[0]:.3f}", f"{m[1]:.3f}", f"{m[2]:.3f}") for q, m in means.items()]
    worst = max((m[2] for m in means.values()), default=0.0)
    return ["## Fair share", "",
            "Dominant share of each queue (its running jobs' requests over the capacity of the clusters not lost) "
            "against its weighted water-filled fair share (`federation.placement.fairshare`), time-weighted over "
            "the run. Gangs are indivisible, so a queue sits above or below its share until a gang ends.", "",
            *_table(("queue", "weight", "mean share", "mean fair share", "mean deviation"), rows), "",
            f"Largest mean deviation: **{worst:.3f}**.", ""]


def recovery(report: Report) -> list[str]:
    lines = ["## Recovery", "", "Faults injected:", ""]
    lines += [f"- `{clock(f.at)}` {f.text}" for f in sorted(report.faults, key=lambda f: f.at)] or ["- none"]
    events = sorted((e for e in report.state.events if e.kind in RECOVERY_KINDS), key=lambda e: e.at)
    lines += ["", "What the system did (job events from WatchJobs):", ""]
    lines += [f"- `{clock(e.at)}` **{e.kind.lower()}** {e.job}: {e.text}" for e in events] or ["- none"]
    moved = []
    for spec in report.scenario.jobs:
        runs = report.runs_of(spec.job.name)
        clusters = [r.cluster for r in runs]
        if len(set(clusters)) > 1:
            hops = " → ".join(f"{r.cluster}/{r.domain} (tier {r.tier})" for r in runs)
            moved.append(f"- {spec.job.name}: {hops}")
    restarts = sum(1 for e in events if e.kind == "RESTARTED")
    lines += ["", f"In-place restarts: **{restarts}**. Jobs that ran on more than one cluster (re-placed after the "
              f"outage, a preemption or a replan): **{len(moved)}**.", ""]
    return [*lines, *moved, ""] if moved else lines


def rounds(report: Report) -> list[str]:
    rs = report.rounds
    wall = [(r.ended_at - r.started_at).total_seconds() * 1000 for r in rs]
    solve = [r.solve_seconds * 1000 for r in rs]
    statuses = Counter(r.solver_status for r in rs)
    lines = ["## Planning rounds", "",
             f"{len(rs)} rounds recorded in `placement_rounds` ({', '.join(f'{n} {s}' for s, n in statuses.items())}); "
             f"{sum(r.placed_count for r in rs)} placements, {sum(r.preempted_count for r in rs)} preemptions.", ""]
    if rs:
        lines += _table(("latency (wall)", "p50", "p99", "max", "mean"), [
            ("whole round: read, plan, audit transaction", f"{percentile(wall, 50):.0f} ms",
             f"{percentile(wall, 99):.0f} ms", f"{max(wall):.0f} ms", f"{statistics.fmean(wall):.0f} ms"),
            ("planner call (greedy + CP-SAT)", f"{percentile(solve, 50):.0f} ms", f"{percentile(solve, 99):.0f} ms",
             f"{max(solve):.0f} ms", f"{statistics.fmean(solve):.0f} ms")])
    return [*lines, ""]


def audit(report: Report) -> list[str]:
    example = next((j.job.name for j in report.scenario.jobs if len(report.runs_of(j.job.name)) > 1),
                   report.scenario.jobs[0].job.name if report.scenario.jobs else "JOB")
    db = report.db_url
    path = db.removeprefix("sqlite:///")
    tokens = report.out / "tokens.yaml"
    lines = ["## Audit database", "",
             f"Every round and decision is in `{db}` (tables `placement_rounds`, `placement_decisions`, `job_events`)."
             f" The demo's server ({report.address}) stopped when the demo ended; serve the same database again "
             "and ask with fedctl:", "", "```sh",
             f"federation serve --listen 127.0.0.1:50051 --db {db} --tokens {tokens} &",
             f"fedctl --server 127.0.0.1:50051 --token {report.admin_token} audit {example}",
             f"fedctl --server 127.0.0.1:50051 --token {report.admin_token} explain {example}",
             "```", "",
             "(`federation demo --hold` keeps the demo's own server up instead.)"]
    if db.startswith("sqlite:///"):
        lines += ["Or read the tables directly:", "", "```sh",
                  f"sqlite3 {path} \"select round_id, outcome, cluster, hypernode, tier, reason from "
                  f"placement_decisions where job = '{example}'\"", "```"]
    return [*lines, ""]


def markdown(report: Report) -> str:
    parts = [*summary(report), *placements(report), *topology(report), *fairness(report), *recovery(report),
             *rounds(report), *audit(report)]
    return "\n".join(parts).rstrip() + "\n"


def write_outputs(report: Report, out: Path, console: Console, *, plain: bool) -> str:
    """Write OUT/report.md and OUT/topology.svg, print the report; returns the markdown."""
    text = markdown(report)
    (out / "report.md").write_text(text, encoding="utf-8")
    svg = topology_svg(report.scenario, list(report.runs.values()), report.state, failed_nodes=report.failed_nodes)
    (out / "topology.svg").write_text(svg, encoding="utf-8")
    console.print()
    if plain:
        console.print(text, markup=False, highlight=False)
    else:
        console.print(Markdown(text))
    console.print(f"report: {out / 'report.md'} · picture: {out / 'topology.svg'} · audit: {report.db_url}",
                  markup=False, highlight=False)
    return text
