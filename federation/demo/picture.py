"""A picture of each cluster's HyperNode tree with the gangs drawn in the domains they occupied.

Hand-written SVG (no plotting dependency): each cluster is one ``<g class="cluster">``;
each HyperNode is a box nested in its parent's box, labelled with its name and tier;
nodes are small boxes inside the lowest HyperNode that holds them, with one coloured
stripe per gang that ran pods there; each gang is a chip (coloured by queue) inside the
lowest domain that held all its pods. A chip with a dashed outline is a run that did not
finish there (its cluster was lost, or it was preempted); a node that failed is outlined
in red.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from xml.sax.saxutils import escape, quoteattr

from federation.demo.fleet import JobRun
from federation.demo.state import DemoState
from federation.domain.topology import Domain, HyperNodeTree
from federation.sim.clusters import ClusterSpec
from federation.sim.scenario import Scenario

PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1", "#76b7b2", "#edc948", "#9c755f")
TIER_FILL = {1: "#eef5fc", 2: "#f4f1fb", 3: "#fdf6ec"}
NODE_W, NODE_H, PAD, GAP, HEADER, CHIP_H, CHAR_W = 54, 34, 8, 8, 18, 16, 6.2
FONT = "font-family='Helvetica, Arial, sans-serif'"


def _attr(value: object) -> str:
    return quoteattr(str(value))


@dataclass
class _Chip:
    label: str
    color: str
    finished: bool

    @property
    def width(self) -> float:
        return len(self.label) * CHAR_W + 12


@dataclass
class _Box:
    """A laid-out domain: its size, its children and what is drawn inside it."""

    domain: Domain
    children: list[_Box]
    nodes: list[str]
    chips: list[_Chip]
    width: float = 0.0
    height: float = 0.0
    rows: list[list[_Chip]] = field(default_factory=list)


def _layout(box: _Box) -> None:
    for child in box.children:
        _layout(child)
    inner = max(
        sum(c.width for c in box.children) + GAP * max(0, len(box.children) - 1),
        min(len(box.nodes), 8) * (NODE_W + 4) - 4 if box.nodes else 0,
        max((c.width for c in box.chips), default=0.0),
        len(f"{box.domain.name} · tier {box.domain.tier}") * CHAR_W,
    )
    rows: list[list[_Chip]] = []
    used = inner + 1
    for chip in box.chips:
        if used + chip.width > inner:
            rows.append([])
            used = 0.0
        rows[-1].append(chip)
        used += chip.width + 4
    box.rows = rows
    node_rows = (len(box.nodes) + 7) // 8
    children_h = max((c.height for c in box.children), default=0.0)
    box.width = inner + 2 * PAD
    box.height = (HEADER + (children_h + GAP if box.children else 0) + node_rows * (NODE_H + 4)
                  + len(rows) * (CHIP_H + 4) + PAD)


def _boxes(tree: HyperNodeTree, chips: dict[str, list[_Chip]]) -> list[_Box]:
    children: dict[str | None, list[Domain]] = {}
    for d in tree.domains.values():
        children.setdefault(d.parent if d.parent in tree.domains else None, []).append(d)

    def build(domain: Domain) -> _Box:
        kids = sorted(children.get(domain.name, []), key=lambda d: d.name)
        covered = set().union(*(k.nodes for k in kids)) if kids else set()
        return _Box(domain, [build(k) for k in kids], sorted(domain.nodes - covered), chips.get(domain.name, []))

    roots = [build(d) for d in sorted(children.get(None, []), key=lambda d: d.name)]
    for root in roots:
        _layout(root)
    return roots


class _Svg:
    def __init__(self, colors: dict[str, str], stripes: dict[str, list[str]], failed: set[str]) -> None:
        self.parts: list[str] = []
        self.colors = colors
        self.stripes = stripes
        self.failed = failed

    def text(self, x: float, y: float, value: str, size: int = 11, weight: str = "normal", fill: str = "#222",
             anchor: str = "start") -> None:
        self.parts.append(f"<text x='{x:.1f}' y='{y:.1f}' font-size='{size}' font-weight='{weight}' "
                          f"fill='{fill}' text-anchor='{anchor}' {FONT}>{escape(value)}</text>")

    def box(self, b: _Box, x: float, y: float) -> None:
        d = b.domain
        self.parts.append(f"<g class='hypernode' data-name={_attr(d.name)} data-tier='{d.tier}'>")
        self.parts.append(f"<rect x='{x:.1f}' y='{y:.1f}' width='{b.width:.1f}' height='{b.height:.1f}' rx='6' "
                          f"fill='{TIER_FILL.get(d.tier, '#f7f7f7')}' stroke='#8a94a6' stroke-width='1'/>")
        self.text(x + PAD, y + 13, f"{d.name} · tier {d.tier}", size=10, weight="bold", fill="#3b4252")
        cy = y + HEADER
        cx = x + PAD
        for child in b.children:
            self.box(child, cx, cy)
            cx += child.width + GAP
        if b.children:
            cy += max(c.height for c in b.children) + GAP
        for i, node in enumerate(b.nodes):
            self.node(node, x + PAD + (i % 8) * (NODE_W + 4), cy + (i // 8) * (NODE_H + 4))
        cy += ((len(b.nodes) + 7) // 8) * (NODE_H + 4)
        for row in b.rows:
            cx = x + PAD
            for chip in row:
                dash = "" if chip.finished else " stroke-dasharray='3,2' fill-opacity='0.35'"
                self.parts.append(f"<g class='gang' data-job={_attr(chip.label)}><rect x='{cx:.1f}' y='{cy:.1f}' "
                                  f"width='{chip.width:.1f}' height='{CHIP_H}' rx='8' fill='{chip.color}' "
                                  f"stroke='#333' stroke-width='0.8'{dash}/>")
                self.text(cx + 6, cy + 11.5, chip.label, size=10, fill="#fff" if chip.finished else "#222")
                self.parts.append("</g>")
                cx += chip.width + 4
            cy += CHIP_H + 4
        self.parts.append("</g>")

    def node(self, name: str, x: float, y: float) -> None:
        failed = name in self.failed
        self.parts.append(f"<g class='node' data-name={_attr(name)}>")
        self.parts.append(f"<rect x='{x:.1f}' y='{y:.1f}' width='{NODE_W}' height='{NODE_H}' rx='3' fill='#fff' "
                          f"stroke='{'#d62728' if failed else '#9aa3b2'}' stroke-width='{2 if failed else 1}'/>")
        short = name.rsplit("-", 1)[-1] if len(name) > 8 else name
        self.text(x + NODE_W / 2, y + 12, short + (" ✗" if failed else ""), size=9,
                  fill="#d62728" if failed else "#444", anchor="middle")
        stripes = self.stripes.get(name, [])[:10]
        for i, color in enumerate(stripes):
            self.parts.append(f"<rect x='{x + 4 + i * 4.6:.1f}' y='{y + 17:.1f}' width='3.6' height='13' "
                              f"fill='{color}'/>")
        self.parts.append("</g>")


def _title(spec: ClusterSpec, outage: bool) -> str:
    gpus = sum(n.allocatable.gpus for n in spec.nodes)
    fabric = spec.labels.get("fabric", "")
    text = f"{spec.name}{' — ' + fabric if fabric else ''} — {len(spec.nodes)} nodes, {gpus} GPUs"
    return text + (" — had an outage (agent down, jobs re-placed)" if outage else "")


def topology_svg(scenario: Scenario, runs: Iterable[JobRun], state: DemoState | None = None, *,
                 failed_nodes: Sequence[str] | set[str] = ()) -> str:
    """The whole picture as an SVG document."""
    queue_of = {j.job.name: j.job.queue for j in scenario.jobs}
    colors = {q.name: PALETTE[i % len(PALETTE)] for i, q in enumerate(scenario.queues)}
    by_cluster: dict[str, dict[str, list[_Chip]]] = {}
    stripes: dict[str, list[str]] = {}
    for run in sorted(runs, key=lambda r: r.started):
        color = colors.get(queue_of.get(run.job, ""), "#888")
        by_cluster.setdefault(run.cluster, {}).setdefault(run.domain, []).append(
            _Chip(run.job, color, run.finished is not None))
        for node in run.nodes:
            stripes.setdefault(node, []).append(color)
    outages = {e.job for e in (state.events if state else []) if e.kind == "FAULT" and "clusterDown" in e.text}
    svg = _Svg(colors, stripes, set(failed_nodes))
    y = 76.0
    width = 600.0
    for spec in scenario.clusters:
        roots = _boxes(spec.empty.tree, by_cluster.get(spec.name, {}))
        inner_w = sum(r.width for r in roots) + GAP * max(0, len(roots) - 1)
        inner_h = max((r.height for r in roots), default=0.0)
        svg.parts.append(f"<g class='cluster' id={_attr('cluster-' + spec.name)} data-name={_attr(spec.name)}>")
        svg.text(16, y + 14, _title(spec, spec.name in outages), size=13, weight="bold",
                 fill="#d62728" if spec.name in outages else "#111")
        x = 16.0
        for root in roots:
            svg.box(root, x, y + 22)
            x += root.width + GAP
        svg.parts.append("</g>")
        width = max(width, inner_w + 32, len(_title(spec, True)) * 7.5)
        y += inner_h + 22 + 24
    header = ["<rect width='100%' height='100%' fill='#ffffff'/>"]
    title = f"federation demo — scenario {scenario.name}: HyperNode trees and the gangs placed in them"
    header.append(f"<text x='16' y='22' font-size='15' font-weight='bold' fill='#111' {FONT}>{escape(title)}</text>")
    lx = 16.0
    for name, color in colors.items():
        header.append(f"<rect x='{lx:.1f}' y='32' width='12' height='12' rx='3' fill='{color}'/>")
        header.append(f"<text x='{lx + 16:.1f}' y='42' font-size='11' fill='#222' {FONT}>queue {escape(name)}</text>")
        lx += 16 + (len(name) + 6) * CHAR_W + 14
    header.append(f"<text x='16' y='60' font-size='11' fill='#555' {FONT}>chip = a gang in the lowest domain "
                  "holding all its pods (dashed: a run that did not finish there) · stripes = gangs whose pods ran "
                  "on the node · red ✗ = a node that failed during the run</text>")
    width = max(width, lx, 760.0)
    return (f"<?xml version='1.0' encoding='UTF-8'?>\n<svg xmlns='http://www.w3.org/2000/svg' "
            f"width='{width:.0f}' height='{y:.0f}' viewBox='0 0 {width:.0f} {y:.0f}'>\n"
            + "\n".join(header + svg.parts) + "\n</svg>\n")
