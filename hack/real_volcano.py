"""Replay a bench scenario against the REAL Volcano scheduler and measure its topology figures.

    python hack/real_volcano.py run [--scenario federation/sim/scenarios/volcano-1cluster.yaml]
        [--runs 3] [--ms-per-second 25] [--schedule-period 100ms] [--json out/realvc/real.jsonl]
    python hack/real_volcano.py model [--scenario ...] [--seeds 20] [--json out/realvc/model.jsonl]
    python hack/real_volcano.py summary out/realvc/real.jsonl [out/realvc/model.jsonl ...]
    python hack/real_volcano.py reseed SEED [SEED ...]   # copies of the scenario under out/realvc/

``model`` runs our ``volcano-greedy`` model in the simulator on the same scenario once per
tie-break seed (``volcano_scores.SEED`` 0..N-1; the bench uses 0) and writes the same figures,
so ``summary`` can put the real scheduler's runs and the model's seed spread side by side.

Why: issue 12 item 4 asks whether our ``volcano-greedy`` model (``federation bench --policy
volcano-greedy``) lands within the real scheduler's spread of lowestTierFraction and mean gang
tier *on our scenario*. This tool measures the real scheduler on exactly the scenario's jobs, so
the model and the scheduler can be compared on the same workload. It is a measurement tool, not
a test: it needs toolchains cached outside the repository and talks only to loopback.

What runs (one fresh control plane per run, torn down after it):

* kube-apiserver + etcd + kwok from ``hack/build-controlplane.sh``, started with
  ``tests/e2e/controlplane.py``; the scenario's single cluster becomes kwok nodes (same names and
  allocatable, kwok's NoSchedule taint, tolerated by every pod), its HyperNodes are applied as the
  scenario file writes them, its queues become Volcano Queues (weight, status Open: no Volcano
  controller runs, and proportion skips queues that are not Open).
* ``vc-scheduler`` built from volcano-sh/volcano source (``--vc-scheduler``; how to build it:
  ``BUILD`` below), with Volcano's default ``volcano-scheduler.conf`` plus the
  ``network-topology-aware`` plugin (``SCHEDULER_CONF``), ``--schedule-period`` scaled with time.
  The CRDs are the same source tree's ``config/crd/volcano/bases``.
* The driver replays the jobs in compressed time (``--ms-per-second`` real milliseconds per
  simulated second): at ``submitAt`` it creates a PodGroup (minMember = gang size, queue,
  minResources = the gang's requests as Volcano's job controller computes them, networkTopology
  mode/highestTierAllowed) and its pods (``schedulerName: volcano``, the group annotation, names
  ``<job>-<task>-<index>`` as vcjob names them, requests = limits). A watch on pods sees the
  bindings; a gang starts when its last pod is bound, and runs ``durationSeconds x slowdown(tier)``
  (1.0 for one pod or one node), as ``federation/sim/simulator.py`` does; then its pods (grace 0)
  and PodGroup are deleted.

Figures use ``federation.sim.tracking`` and ``federation.sim.metrics``, so lowestTierFraction,
meanGangTier, avgWaitSeconds and the largest gangs' waits are defined exactly as in the bench
(tier = the tier of the smallest HyperNode holding all of a gang's nodes; lowest = what an empty
cluster offers). Times are in simulated seconds; the driver's own lag (submission latency, watch
delay) is reported so that a reader can judge the time figures.

BUILD (vc-scheduler, outside the repository; the module proxy refuses volcano.sh/volcano, so
the source comes from a public snapshot of volcano-sh/volcano at tag v1.15.1)::

    mkdir -p ~/.cache/federation/volcano/src-v1.15.1
    git -C <snapshot> archive v1.15.1 | tar -x -C ~/.cache/federation/volcano/src-v1.15.1
    cd ~/.cache/federation/volcano/src-v1.15.1
    GOTOOLCHAIN=local CGO_ENABLED=0 GOWORK=off GOFLAGS="-mod=mod -modcacherw" \\
      GOMODCACHE=~/.cache/federation/go/mod GOCACHE=~/.cache/federation/go/build \\
      nice -n 10 go build -p 1 -o ../bin/vc-scheduler ./cmd/scheduler
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import queue
import statistics
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from ab_sweep import reseeded  # noqa: E402  (hack/ is on the path when this runs as a script)

from federation.sim import metrics  # noqa: E402
from federation.sim.scenario import Scenario, load_scenario  # noqa: E402
from federation.sim.tracking import Tracker, feasibility  # noqa: E402
from federation.sim.workload import ScenarioJob  # noqa: E402
from tests.e2e.controlplane import (  # noqa: E402
    KWOK_FAKE_NODE_TAINT,
    ApiError,
    Cluster,
    ControlPlane,
    _Process,
    _wait,
    build_binaries,
)

VOLCANO_HOME = Path(os.environ.get("FEDERATION_CACHE", Path.home() / ".cache" / "federation")) / "volcano"
DEFAULT_BINARY = VOLCANO_HOME / "bin" / "vc-scheduler"
DEFAULT_CRDS = VOLCANO_HOME / "src-v1.15.1" / "config" / "crd" / "volcano" / "bases"
DEFAULT_SCENARIO = REPO / "federation" / "sim" / "scenarios" / "volcano-1cluster.yaml"
NAMESPACE = "default"
#: Simulated seconds with nothing running and nothing left to arrive before a run stops.
STALL_SECONDS = 2000.0
JOB_LABEL = "real-volcano/job"
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
PG_PATH = f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{NAMESPACE}/podgroups"
QUEUE_PATH = "/apis/scheduling.volcano.sh/v1beta1/queues"
POD_PATH = f"/api/v1/namespaces/{NAMESPACE}/pods"

#: Volcano's default scheduler configuration (installer/helm/chart/volcano/config/
#: volcano-scheduler.conf at v1.15.1, identical at ed72c7c) with network-topology-aware added
#: at its defaults, as installer/helm/chart/volcano/config/volcano-scheduler-ci.conf and
#: docs/user-guide/how_to_use_network_topology_aware_scheduling.md add it.
SCHEDULER_CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
  - name: network-topology-aware
"""


def _quantity(resource: str, amount: int) -> str:
    """Our Resources hold CPU in millicores and everything else in units."""
    return f"{amount}m" if resource == "cpu" else str(amount)


def _mode(spec: ScenarioJob) -> str:
    nt = spec.job.network_topology
    return "none" if nt is None else f"{nt.mode}/{nt.highest_tier_allowed}"


@dataclass
class GangRun:
    """One job's life in the replay (times in simulated seconds)."""

    spec: ScenarioJob
    pods: list[str]
    submitted: float
    bound: dict[str, str] = field(default_factory=dict)
    started: float | None = None
    ends: float | None = None
    tier: int | None = None
    deleted: bool = False


def _binding(obj: dict[str, Any]) -> str | None:
    """A pod's node once it is bound."""
    node = (obj.get("spec") or {}).get("nodeName")
    return str(node) if node else None


def _admitted(obj: dict[str, Any]) -> str | None:
    """A PodGroup's phase once enqueue has admitted it (Inqueue, or Running if that was missed)."""
    phase = (obj.get("status") or {}).get("phase")
    return str(phase) if phase in ("Inqueue", "Running") else None


class Watch(threading.Thread):
    """Streams one collection's events and reports (name, value, monotonic time) the first time
    ``extract`` finds a value in an object: a pod's node, a PodGroup's admission."""

    def __init__(self, cluster: Cluster, path: str, extract: Callable[[dict[str, Any]], str | None]) -> None:
        super().__init__(daemon=True)
        self.cluster = cluster
        self.path = path
        self.extract = extract
        self.rv = cluster.request("GET", f"{path}?limit=1")["metadata"]["resourceVersion"]
        self.events: queue.Queue[tuple[str, str, float]] = queue.Queue()
        self.stopping = threading.Event()
        self.seen: set[str] = set()

    def run(self) -> None:
        while not self.stopping.is_set():
            with contextlib.suppress(OSError, http.client.HTTPException, ValueError):
                self._stream()

    def _stream(self) -> None:
        conn = http.client.HTTPSConnection("127.0.0.1", self.cluster.port, context=self.cluster.ssl_context(),
                                           timeout=5)
        query = urllib.parse.urlencode({"watch": "1", "resourceVersion": self.rv, "allowWatchBookmarks": "true",
                                        "timeoutSeconds": "3600"})
        try:
            conn.request("GET", f"{self.path}?{query}", headers={"Accept": "application/json"})
            resp = conn.getresponse()
            if resp.status != 200:
                time.sleep(0.2)
                return
            while not self.stopping.is_set():
                try:
                    line = resp.readline()
                except TimeoutError:
                    continue
                if not line:
                    return
                event = json.loads(line)
                obj = event.get("object") or {}
                self.rv = (obj.get("metadata") or {}).get("resourceVersion", self.rv)
                if event.get("type") not in ("ADDED", "MODIFIED"):
                    continue
                name = obj["metadata"]["name"]
                value = self.extract(obj)
                if value and name not in self.seen:
                    self.seen.add(name)
                    self.events.put((name, value, time.monotonic()))
        finally:
            conn.close()


class Replay:
    """Drives one run of the scenario against a started control plane and vc-scheduler."""

    def __init__(self, scenario: Scenario, cluster: Cluster, ms_per_second: float, horizon: float) -> None:
        self.scenario = scenario
        self.cluster = cluster
        self.scale = ms_per_second / 1000.0
        self.horizon = horizon
        self.tree = scenario.clusters[0].empty.tree
        self.tracker = Tracker(scenario, feasibility(scenario))
        self.runs: dict[str, GangRun] = {}
        self.pod_job: dict[str, str] = {}
        self.submit_lag: list[float] = []
        self.admitted: dict[str, float] = {}
        self.stalled: list[str] = []
        self.t0 = 0.0

    def now(self) -> float:
        return (time.monotonic() - self.t0) / self.scale

    def at(self, mono: float) -> float:
        return (mono - self.t0) / self.scale

    # -- objects ----------------------------------------------------------------------
    def call(self, method: str, path: str, body: Any = None) -> None:
        """One write, retried on a timeout (a loaded host once stalled the apiserver for 30 s);
        a retried POST that had gone through answers 409, which is success here."""
        for attempt in range(4):
            try:
                self.cluster.request(method, path, body, timeout=20)
                return
            except ApiError as e:
                if e.status == 409 and method == "POST" and attempt > 0:
                    return
                raise
            except (TimeoutError, OSError, http.client.HTTPException):
                if attempt == 3:
                    raise
                print(f"  {method} {path}: no answer, retrying", flush=True)

    def submit(self, spec: ScenarioJob) -> None:
        job = spec.job
        started = self.now()
        pods: list[tuple[str, dict[str, Any]]] = []
        for task in job.tasks:
            requests = {k: _quantity(k, v) for k, v in task.resources.amounts.items() if v}
            for i in range(task.replicas):
                pods.append((f"{job.name}-{task.name}-{i}", {
                    "apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": f"{job.name}-{task.name}-{i}", "namespace": NAMESPACE,
                                 "labels": {JOB_LABEL: job.name},
                                 "annotations": {GROUP_ANNOTATION: job.name, "volcano.sh/task-spec": task.name}},
                    "spec": {
                        "schedulerName": "volcano",
                        "terminationGracePeriodSeconds": 0,
                        "tolerations": [{"key": KWOK_FAKE_NODE_TAINT["key"], "operator": "Exists",
                                         "effect": KWOK_FAKE_NODE_TAINT["effect"]}],
                        "containers": [{"name": "main", "image": "replay",
                                        "resources": {"requests": requests, "limits": requests}}],
                    },
                }))
        gang = job.gang_size
        # vcjob's calcPGMinResources: the requests of the first minMember pods
        per_pod = [task.resources for task in job.tasks for _ in range(task.replicas)]
        min_resources: dict[str, int] = {}
        for res in per_pod[:gang]:
            for k, v in res.amounts.items():
                min_resources[k] = min_resources.get(k, 0) + v
        pg_spec: dict[str, Any] = {
            "minMember": gang, "queue": job.queue,
            "minResources": {k: _quantity(k, v) for k, v in min_resources.items() if v},
        }
        if job.priority_class:
            pg_spec["priorityClassName"] = job.priority_class
        nt = job.network_topology
        if nt is not None:
            pg_spec["networkTopology"] = {"mode": nt.mode, **(
                {"highestTierAllowed": nt.highest_tier_allowed} if nt.highest_tier_allowed is not None else {})}
        self.call("POST", PG_PATH, {
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": job.name, "namespace": NAMESPACE}, "spec": pg_spec,
            "status": {"phase": "Pending"},
        })
        for name, pod in pods:
            self.call("POST", POD_PATH, pod)
            self.pod_job[name] = job.name
        self.runs[job.name] = GangRun(spec, [n for n, _ in pods], started)
        self.tracker.arrived(spec)
        self.submit_lag.append(started - spec.submit_at)

    def remove(self, run: GangRun) -> None:
        selector = urllib.parse.quote(f"{JOB_LABEL}={run.spec.job.name}")
        self.call("DELETE", f"{POD_PATH}?labelSelector={selector}",
                             {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0})
        with contextlib.suppress(ApiError):
            self.call("DELETE", f"{PG_PATH}/{run.spec.job.name}")
        run.deleted = True

    # -- loop -------------------------------------------------------------------------
    def bound(self, pod: str, node: str, mono: float) -> None:
        job = self.pod_job.get(pod)
        if job is None:
            return
        run = self.runs[job]
        run.bound[pod] = node
        if run.started is None and len(run.bound) >= run.spec.job.gang_size:
            now = self.at(mono)
            nodes = set(run.bound.values())
            tier = self.tree.tier_holding(nodes)
            slow = self.scenario.gang_slowdown(len(nodes), tier)
            run.started, run.tier, run.ends = now, tier, now + run.spec.duration_seconds * slow
            self.tracker.started(job, now, self.scenario.clusters[0].name, tier, run.spec.job.requests)

    def drive(self, watch: Watch, groups: Watch) -> None:
        pending = sorted(self.scenario.jobs, key=lambda s: s.submit_at)
        holdable = {s.job.name for s in pending if self.tracker.feasible(s.job.name)}
        self.t0 = time.monotonic()
        last_report = last_change = 0.0
        while True:
            now = self.now()
            while pending and pending[0].submit_at <= now:
                self.submit(pending.pop(0))
            while True:
                try:
                    pod, node, mono = watch.events.get_nowait()
                except queue.Empty:
                    break
                self.bound(pod, node, mono)
            while True:
                try:
                    group, _, mono = groups.events.get_nowait()
                except queue.Empty:
                    break
                self.admitted.setdefault(group, self.at(mono))
            now = self.now()
            for run in self.runs.values():
                if run.ends is not None and not run.deleted and run.ends <= now:
                    self.tracker.finished(run.spec.job.name, run.ends)
                    self.remove(run)
            done = all(r.deleted for n, r in self.runs.items() if n in holdable)
            if not pending and done:
                return
            running = any(r.started is not None and not r.deleted for r in self.runs.values())
            if pending or running:
                last_change = now
            elif now - last_change > STALL_SECONDS:
                # Nothing runs and nothing arrives, so nothing can free room: the jobs left
                # wait forever (Volcano keeps an admitted PodGroup Inqueue; see podGroupsLeft).
                self.stalled = sorted(n for n, r in self.runs.items() if not r.deleted and n in holdable)
                print(f"  stalled at {now:.0f} s: nothing running for {STALL_SECONDS:.0f} s; holdable jobs "
                      f"never started: {self.stalled}", flush=True)
                return
            if now > self.horizon:
                print(f"  horizon {self.horizon:.0f} s reached; unfinished: "
                      f"{sorted(n for n, r in self.runs.items() if not r.deleted and n in holdable)}", flush=True)
                return
            if now - last_report > 2000:
                last_report = now
                active = sum(1 for r in self.runs.values() if r.started is not None and not r.deleted)
                waiting = sum(1 for r in self.runs.values() if r.started is None)
                print(f"  t={now:7.0f} s submitted={len(self.runs)} running={active} waiting={waiting}",
                      flush=True)
            time.sleep(0.002)

    def figures(self) -> dict[str, Any]:
        jobs = self.tracker.records()
        return {
            "jobs": len(jobs),
            **metrics.outcome_metrics(jobs),
            "lowestTierFraction": metrics.lowest_tier_fraction(jobs),
            "meanGangTier": metrics.mean_gang_tier(jobs),
            "stalled": self.stalled,
            "submitLagMaxSeconds": max(self.submit_lag, default=0.0),
            "submitLagMeanSeconds": statistics.fmean(self.submit_lag) if self.submit_lag else 0.0,
            "gangs": [
                {"job": j.name, "pods": j.gang_size, "submitted": round(j.submitted_at, 1),
                 "wait": None if j.first_start is None else round(j.first_start - j.submitted_at, 1),
                 "enqueueWait": (round(self.admitted[j.name] - j.submitted_at, 1)
                                 if j.name in self.admitted else None),
                 "tier": j.tier, "bestTier": j.best_tier,
                 "mode": _mode(self.runs[j.name].spec),
                 "nodes": sorted(set(self.runs[j.name].bound.values()))}
                for j in jobs if j.gang_size >= 2
            ],
        }


def _setup(cp: ControlPlane, scenario_path: Path, scenario: Scenario) -> Cluster:
    spec = scenario.clusters[0]
    cluster = cp.cluster(spec.name)
    for node in spec.nodes:
        res = node.allocatable.amounts
        cp.create_gpu_nodes(cluster, [node.name], gpus=int(res.get("nvidia.com/gpu", 0)),
                            cpu=_quantity("cpu", res.get("cpu", 0)), memory=str(res.get("memory", 0)),
                            labels=dict(node.labels), wait_ready=False)
    cp.wait_nodes_ready(cluster, [n.name for n in spec.nodes], timeout=120)
    raw = yaml.safe_load(scenario_path.read_text())
    cp.apply_hypernodes(cluster, raw["clusters"][0].get("hyperNodes") or [])
    for q in scenario.queues:
        _queue(cluster, q.name, int(q.weight))
    return cluster


def _queue(cluster: Cluster, name: str, weight: int) -> None:
    """Create (or take) a Queue and mark it Open (the Volcano queue controller would)."""
    with contextlib.suppress(ApiError):
        cluster.request("POST", QUEUE_PATH, {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                                             "metadata": {"name": name},
                                             "spec": {"weight": weight, "reclaimable": True}})
    for _ in range(20):  # vc-scheduler writes queue status too: retry on a conflict
        cur = cluster.request("GET", f"{QUEUE_PATH}/{name}")
        cur["status"] = {**(cur.get("status") or {}), "state": "Open"}
        try:
            cluster.request("PUT", f"{QUEUE_PATH}/{name}/status", cur)
            return
        except ApiError as e:
            if e.status != 409:
                raise
            time.sleep(0.1)
    raise RuntimeError(f"queue {name}: could not set status Open (repeated conflicts)")


def _start_scheduler(cp: ControlPlane, cluster: Cluster, binary: Path, period: str, verbosity: int) -> _Process:
    assert cp.work_dir is not None
    # Its own folder: vc-scheduler watches the configuration file's folder and reloads on
    # every write there, so next to its own log it would reload (and log) in a loop.
    conf = cp.work_dir / "vc-conf" / "volcano-scheduler.conf"
    conf.parent.mkdir()
    conf.write_text(SCHEDULER_CONF)
    proc = _Process("vc-scheduler", [
        str(binary), f"--kubeconfig={cluster.kubeconfig}", f"--scheduler-conf={conf}",
        f"--schedule-period={period}", "--leader-elect=false", "--enable-healthz=false",
        "--enable-metrics=false", "--listen-address=127.0.0.1:0", "--healthz-address=127.0.0.1:0",
        f"--cache-dump-dir={cp.work_dir}", "--kube-api-qps=500", "--kube-api-burst=1000", f"-v={verbosity}",
    ], cp.work_dir / "vc-scheduler.log", env={"GOMAXPROCS": "1"})

    def queues_ready() -> bool:
        names = {q["metadata"]["name"] for q in cluster.request("GET", QUEUE_PATH)["items"]}
        return {"root", "default"} <= names

    _wait("vc-scheduler creates its root and default queues", queues_ready, 120, proc)
    for name in ("root", "default"):
        _queue(cluster, name, 1)
    return proc


def run_once(scenario_path: Path, args: argparse.Namespace, index: int) -> dict[str, Any]:
    scenario = load_scenario(str(scenario_path))
    bin_dir = build_binaries()
    crds = sorted(Path(args.crds).glob("*.yaml"))
    keep = Path(args.keep_dir) if args.keep_dir else None
    with ControlPlane(bin_dir, [scenario.clusters[0].name], crds=crds, keep_dir=keep is not None,
                      work_dir=keep) as cp:
        cluster = _setup(cp, scenario_path, scenario)
        proc = _start_scheduler(cp, cluster, Path(args.vc_scheduler), args.schedule_period, args.v)
        try:
            watch, groups = Watch(cluster, POD_PATH, _binding), Watch(cluster, PG_PATH, _admitted)
            watch.start()
            groups.start()
            replay = Replay(scenario, cluster, args.ms_per_second, args.horizon)
            started = time.monotonic()
            replay.drive(watch, groups)
            watch.stopping.set()
            groups.stopping.set()
            out = replay.figures()
            # What Volcano made of the jobs left at the end (an infeasible gang admitted to
            # Inqueue holds enqueue room; one left Pending does not).
            out["podGroupsLeft"] = {pg["metadata"]["name"]: (pg.get("status") or {}).get("phase")
                                    for pg in cluster.request("GET", PG_PATH)["items"]}
            out.update({"run": index, "scenario": str(scenario_path), "wallSeconds": round(time.monotonic() - started),
                        "loadAverage": os.getloadavg()[0], "msPerSimSecond": args.ms_per_second,
                        "schedulePeriod": args.schedule_period, "alive": proc.alive()})
            return out
        finally:
            proc.stop()


def _figures_row(kind: str, scenario: str, label: str, out: dict[str, Any]) -> str:
    def num(key: str, fmt: str) -> str:
        value = out.get(key)
        return "-" if value is None else format(value, fmt)

    return (f"| {Path(scenario).stem} | {kind} {label} | {num('lowestTierFraction', '.3f')} | "
            f"{num('meanGangTier', '.2f')} | {num('avgWaitSeconds', ',.0f')} | "
            f"{num('largestGangWaitMaxSeconds', ',.0f')} | {num('avgJctSeconds', ',.0f')} | "
            f"{out.get('placed', '-')}/{out.get('jobs', '-')} |")


def model(args: argparse.Namespace) -> int:
    """Our volcano-greedy model on the same scenario, once per tie-break seed."""
    from federation.placement.baselines import POLICIES, volcano_scores
    from federation.sim.simulator import simulate

    for scenario_path in args.scenario or [str(DEFAULT_SCENARIO)]:
        scenario = load_scenario(scenario_path)
        for seed in range(args.seeds):
            volcano_scores.SEED = seed
            result = simulate(scenario, POLICIES["volcano-greedy"])
            figures = metrics.compute(result)
            keys = ("jobs", "placed", "finished", "lowestTierFraction", "meanGangTier", "avgWaitSeconds",
                    "avgJctSeconds", "largestGangWaitMaxSeconds")
            out: dict[str, Any] = {k: figures[k] for k in keys}
            out.update({"model": args.label, "tieSeed": seed, "scenario": scenario_path})
            print(_figures_row(args.label, scenario_path, f"tie seed {seed}", out), flush=True)
            if args.json:
                Path(args.json).parent.mkdir(parents=True, exist_ok=True)
                with open(args.json, "a") as fh:
                    fh.write(json.dumps(out) + "\n")
    return 0


def summary(args: argparse.Namespace) -> int:
    """One table row per run (real or model), then min/median/max per scenario and kind."""
    rows: list[dict[str, Any]] = []
    for path in args.files:
        rows += [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    print("| scenario | run | lowestTierFraction | mean gang tier | avg wait s | largest gangs max wait s |"
          " avg JCT s | placed |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        kind = str(row.get("model", "real Volcano"))
        group = groups.setdefault((Path(row["scenario"]).stem, kind), [])
        group.append(row)
        label = f"tie seed {row['tieSeed']}" if "model" in row else f"run {len(group)}"
        print(_figures_row(kind, row["scenario"], label, row))
    print()
    print("| scenario | kind (n) | lowestTierFraction min / median / max | mean gang tier min / median / max |"
          " avg wait min / median / max |")
    print("|---|---|---|---|---|")
    for (scenario, kind), group in sorted(groups.items()):
        cells = []
        for key, fmt in (("lowestTierFraction", ".3f"), ("meanGangTier", ".2f"), ("avgWaitSeconds", ",.0f")):
            values = sorted(float(r[key]) for r in group if r.get(key) is not None)
            cells.append(" / ".join(format(v, fmt) for v in (values[0], statistics.median(values), values[-1]))
                         if values else "-")
        print(f"| {scenario} | {kind} ({len(group)}) | {' | '.join(cells)} |")
    return 0


def reseed(args: argparse.Namespace) -> int:
    """Copies of the scenario with its generator seed replaced (``hack/ab_sweep.py``'s ``reseeded``)."""
    folder = REPO / "out" / "realvc"
    folder.mkdir(parents=True, exist_ok=True)
    for seed in args.seeds:
        print(reseeded(Path(args.scenario), seed, folder))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="replay a scenario against vc-scheduler, --runs times")
    run.add_argument("--scenario", action="append", default=None, help="scenario file (repeatable)")
    run.add_argument("--runs", type=int, default=1)
    run.add_argument("--ms-per-second", type=float, default=25.0, help="real ms per simulated second")
    run.add_argument("--schedule-period", default="100ms", help="vc-scheduler --schedule-period (real time)")
    run.add_argument("--horizon", type=float, default=80_000.0, help="stop after this many simulated seconds")
    run.add_argument("--vc-scheduler", default=str(DEFAULT_BINARY))
    run.add_argument("--crds", default=str(DEFAULT_CRDS))
    run.add_argument("--json", default=None, help="append one JSON line per run to this file")
    run.add_argument("--keep-dir", default=None, help="keep logs and kubeconfig under this directory")
    run.add_argument("-v", type=int, default=2, help="vc-scheduler log verbosity")
    mod = sub.add_parser("model", help="our volcano-greedy model on the same scenario, per tie-break seed")
    mod.add_argument("--scenario", action="append", default=None)
    mod.add_argument("--seeds", type=int, default=20)
    mod.add_argument("--json", default=None)
    mod.add_argument("--label", default="volcano-greedy", help="name of this model variant in the tables")
    summ = sub.add_parser("summary", help="tables from run/model JSON lines")
    summ.add_argument("files", nargs="+")
    res = sub.add_parser("reseed", help="copies of the scenario with another generator seed")
    res.add_argument("seeds", nargs="+", type=int)
    res.add_argument("--scenario", default=str(DEFAULT_SCENARIO))
    args = parser.parse_args(argv)
    if args.command != "run":
        return {"model": model, "summary": summary, "reseed": reseed}[args.command](args)
    for scenario in args.scenario or [str(DEFAULT_SCENARIO)]:
        for i in range(args.runs):
            print(f"{scenario} run {i + 1}/{args.runs}", flush=True)
            out = run_once(Path(scenario), args, i + 1)
            brief = {k: v for k, v in out.items() if k != "gangs"}
            print(json.dumps(brief), flush=True)
            if args.json:
                Path(args.json).parent.mkdir(parents=True, exist_ok=True)
                with open(args.json, "a") as fh:
                    fh.write(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
