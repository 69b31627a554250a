#!/usr/bin/env python3
"""Check a ``federation bench --placements`` file against its scenario, line by line.

For every start (and growth) of every policy: the cluster, HyperNode and nodes exist, each
pod is a pod of the job (task and index), every pod sits inside the line's HyperNode, and
on a node its task's nodeSelector, required node affinity and tolerations allow (what a
kubelet checks on admission). Reads the JSON lines written to disk, so it also checks what
the bench wrote, not only what it computed.

    python hack/check_placements.py SCENARIO.yaml PLACEMENTS.jsonl

Prints one line per policy and exits 1 if any pod is misplaced.
"""

from __future__ import annotations

import json
import sys
from collections import Counter

from federation.placement.eligibility import pod_allows
from federation.sim.scenario import load_scenario


def main(scenario_path: str, placements_path: str) -> int:
    scenario = load_scenario(scenario_path)
    jobs = {j.job.name: j.job for j in scenario.jobs}
    clusters = {c.name: c for c in scenario.clusters}
    pods: Counter[str] = Counter()
    growths: Counter[str] = Counter()
    bad: dict[str, list[str]] = {}
    with open(placements_path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            d = json.loads(line)
            policy, job, cluster = d["policy"], jobs.get(d["job"]), clusters.get(d["cluster"])
            problems = bad.setdefault(policy, [])
            if job is None or cluster is None:
                problems.append(f"line {number}: unknown job {d['job']} or cluster {d['cluster']}")
                continue
            nodes = {n.name: n for n in cluster.nodes}
            domain = cluster.empty.tree.domains.get(d["hypernode"]) if d["hypernode"] else None
            if d["hypernode"] and domain is None:
                problems.append(f"line {number}: unknown HyperNode {d['hypernode']}")
            replicas = {t.name: t.replicas for t in job.tasks}
            growths[policy] += bool(d.get("growth"))
            for pod in d["pods"]:
                pods[policy] += 1
                where = f"line {number}: {job.name} {pod['task']}[{pod['index']}] on {cluster.name}/{pod['node']}"
                node = nodes.get(pod["node"])
                if pod["task"] not in replicas or not 0 <= pod["index"] < replicas[pod["task"]]:
                    problems.append(f"{where}: not a pod of the job")
                elif node is None:
                    problems.append(f"{where}: unknown node")
                elif not pod_allows(job, pod["task"], node):
                    problems.append(f"{where}: excluded by the task's node constraints")
                elif domain is not None and node.name not in domain.nodes:
                    problems.append(f"{where}: outside HyperNode {domain.name}")
    for policy in pods:
        problems = bad.get(policy, [])
        first = f" (first: {problems[0]})" if problems else ""
        print(f"{policy}: {pods[policy]} pods checked ({growths[policy]} growths), {len(problems)} misplaced{first}")
    return 1 if any(bad.values()) else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2]))
