"""The demo's live terminal view (rich) and its plain-line twin for logs and pipes.

Both read only ``DemoState`` (filled from the public API by the demo's poller and its
WatchJobs stream), so what is shown is what ``fedctl`` would show.
"""

from __future__ import annotations

import asyncio

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from federation.demo.state import DECISIONS, RECOVERY, ClusterView, DemoState, EventLine, QueueView

HEALTH_STYLE = {"healthy": "green", "unhealthy": "yellow", "down": "bold red", "lost": "bold red"}
KIND_STYLE = {"PLACED": "cyan", "RUNNING": "blue", "SUCCEEDED": "green", "FAILED": "bold red",
              "RESTARTED": "yellow", "REQUEUED": "magenta", "PREEMPTED": "magenta", "FAULT": "bold red",
              "UNSCHEDULABLE": "red", "WAITING": "dim", "REFUSED": "red", "CANCELLED": "dim"}
QUIET = frozenset({"DISPATCHED", "SUBMITTED"})


def clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _share_bar(share: float, fair: float, width: int = 20) -> Text:
    """A bar of the dominant share with a marker at the fair share."""
    filled = min(width, round(share * width))
    mark = min(width - 1, round(fair * width))
    text = Text()
    for i in range(width):
        if i == mark:
            text.append("┃", style="bold white")
        else:
            text.append("█" if i < filled else "·", style="cyan" if i < filled else "grey50")
    return text


def clusters_table(clusters: list[ClusterView]) -> Table:
    table = Table(title="clusters", title_justify="left", expand=True, pad_edge=False, box=None)
    for col in ("cluster", "fabric", "health", "GPUs used", "", "nodes", "jobs"):
        table.add_column(col, no_wrap=True, justify="right" if col in ("nodes", "jobs", "") else "left")
    for c in clusters:
        table.add_row(c.name, c.fabric, Text(c.health, style=HEALTH_STYLE.get(c.health, "")),
                      ProgressBar(total=max(1, c.gpus), completed=c.gpus_used, width=16),
                      f"{c.gpus_used}/{c.gpus}", f"{c.ready_nodes}/{c.nodes}", str(c.active_jobs))
    return table


def queues_table(queues: list[QueueView]) -> Table:
    table = Table(title="queues: dominant share ┃ fair share", title_justify="left", expand=True, pad_edge=False,
                  box=None)
    for col in ("queue", "w", "run", "pend", "GPUs", "share", "", "fair"):
        table.add_column(col, no_wrap=True, justify="left" if col in ("queue", "") else "right")
    for q in queues:
        table.add_row(q.name, str(q.weight), str(q.running), str(q.pending), str(q.gpus), f"{q.share:.2f}",
                      _share_bar(q.share, q.fair), f"{q.fair:.2f}")
    return table


def pending_table(state: DemoState) -> Table:
    table = Table(title="pending jobs and why", title_justify="left", expand=True, pad_edge=False, box=None)
    table.add_column("job", no_wrap=True)
    table.add_column("reason", overflow="ellipsis", no_wrap=True, ratio=1)
    pending = state.pending()
    for job in pending[:8]:
        reason = state.reasons.get(job.spec.name) or job.reason or "waiting for the next round"
        table.add_row(job.spec.name, Text(reason, style="red" if job.unschedulable else ""))
    if len(pending) > 8:
        table.add_row(f"… {len(pending) - 8} more", "")
    if not pending:
        table.add_row(Text("none", style="dim"), "")
    return table


def events_table(lines: list[EventLine], title: str) -> Table:
    table = Table(title=title, title_justify="left", expand=True, pad_edge=False, box=None)
    table.add_column("t", no_wrap=True, style="dim")
    table.add_column("job", no_wrap=True)
    table.add_column("what", overflow="ellipsis", no_wrap=True, ratio=1)
    for line in lines:
        table.add_row(clock(line.at), line.job, Text(line.text, style=KIND_STYLE.get(line.kind, "")))
    if not lines:
        table.add_row("", Text("none yet", style="dim"), "")
    return table


def _pair(left: RenderableType, right: RenderableType, wide: bool) -> RenderableType:
    """Side by side on a wide terminal, one above the other on a narrow one."""
    if not wide:
        return Group(left, Text(""), right)
    grid = Table.grid(expand=True, padding=(0, 2))
    grid.add_column(ratio=1)
    grid.add_column(ratio=1)
    grid.add_row(left, right)
    return grid


def render(state: DemoState, width: int = 200) -> RenderableType:
    header = Text.assemble(("federation demo", "bold"), f" · scenario {state.scenario.name} · simulated ",
                           (clock(state.sim_now), "bold"), f" (x{state.speed:g}) · wall {state.wall:.0f} s · ",
                           ("server ", ""), (state.address, "bold"))
    wide = width >= 150
    top = _pair(clusters_table(state.clusters), queues_table(state.queues), wide)
    decisions = [e for e in state.events if e.kind in DECISIONS][-8 if wide else -5:]
    recovery = [e for e in state.events if e.kind in RECOVERY][-8 if wide else -6:]
    middle = _pair(pending_table(state), events_table(decisions, "recent decisions"), wide)
    progress = Table.grid(padding=(0, 1))
    progress.add_row(Text("workload", style="bold"), ProgressBar(total=max(1, state.total), completed=state.finished,
                                                                 width=40),
                     f"{state.finished}/{state.total} jobs finished · {state.submitted} submitted")
    body = Group(top, Text(""), middle, Text(""), events_table(recovery, "faults and recovery"), Text(""), progress)
    return Panel(body, title=header, title_align="left", border_style="blue")


async def live_view(state: DemoState, console: Console) -> None:
    with Live(render(state, console.size.width), console=console, refresh_per_second=4, transient=False) as live:
        while not state.done:
            await asyncio.sleep(0.25)
            live.update(render(state, console.size.width))
        live.update(render(state, console.size.width))


class PlainPrinter:
    """One line per event worth reading, and a status line every few seconds."""

    def __init__(self, state: DemoState, console: Console, every: float = 5.0) -> None:
        self.state = state
        self.console = console
        self.every = every
        self._seen = 0
        self._next_status = 0.0

    def step(self, final: bool = False) -> None:
        s = self.state
        for line in s.events[self._seen:]:
            if line.kind not in QUIET:
                self.console.print(f"[{clock(line.at)}] {line.kind:<13} {line.job:<18} {line.text}",
                                   highlight=False, markup=False)
        self._seen = len(s.events)
        if s.clusters and (final or s.wall >= self._next_status):
            self._next_status = s.wall + self.every
            self.console.print(self.status(), highlight=False, markup=False)

    def status(self) -> str:
        s = self.state
        clusters = ", ".join(f"{c.name} {c.gpus_used}/{c.gpus}" + ("" if c.health == "healthy" else f" {c.health}")
                             for c in s.clusters)
        shares = ", ".join(f"{q.name} {q.share:.2f}/{q.fair:.2f}" for q in s.queues)
        return (f"[{clock(s.sim_now)}] status        wall {s.wall:4.0f}s  jobs {s.finished}/{s.total} finished, "
                f"{len(s.pending())} pending | GPUs {clusters} | share/fair {shares}")
