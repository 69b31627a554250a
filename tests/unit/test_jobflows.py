"""Volcano JobFlow + JobTemplate documents as jobs that wait for each other, and the gate
that releases, holds or stops each one (federation/domain/jobflows.py)."""

from __future__ import annotations

import pytest

from federation.domain.errors import InvalidInput
from federation.domain.jobflows import READY, STOP, WAIT, flow_gate
from federation.domain.manifests import load_jobs

TEMPLATE = """
apiVersion: flow.volcano.sh/v1alpha1
kind: JobTemplate
metadata: {{name: {name}}}
spec:
  tasks: [{{name: w, replicas: 1, template: {{spec: {{containers: [{{name: c, image: busybox}}]}}}}}}]
"""


def flow(flows: str, *, templates: tuple[str, ...] = ("a", "b", "c"), extra: str = "") -> str:
    docs = [TEMPLATE.format(name=t) for t in templates]
    docs.append(f"""
apiVersion: flow.volcano.sh/v1alpha1
kind: JobFlow
metadata: {{name: f, namespace: ml}}
spec:
  {extra}
  flows: {flows}
""")
    return "\n---\n".join(docs)


def test_a_diamond_flow_becomes_jobs_named_flow_template_waiting_for_their_targets() -> None:
    jobs = load_jobs(flow("[{name: a}, {name: b, dependsOn: {targets: [a]}}, "
                          "{name: c, dependsOn: {targets: [a, b]}}]"))
    assert [(j.name, j.namespace, j.after) for j in jobs] == [
        ("f-a", "ml", ()), ("f-b", "ml", ("f-a",)), ("f-c", "ml", ("f-a", "f-b"))]


REFUSED = [
    pytest.param(flow("[{name: a, dependsOn: {targets: [b]}}, {name: b, dependsOn: {targets: [a]}}]"),
                 "documents[3].spec.flows[0].dependsOn", "cycle", id="cycle"),
    pytest.param(flow("[{name: a}, {name: d}]"), "documents[3].spec.flows[1].name", "no JobTemplate", id="no-template"),
    pytest.param(flow("[{name: a}, {name: b, dependsOn: {targets: [z]}}]"),
                 "documents[3].spec.flows[1].dependsOn.targets[0]", "not a flow", id="unknown-target"),
    pytest.param(flow("[{name: a}, {name: b, dependsOn: {targets: [a], probe: {taskStatusList: []}}}]"),
                 "documents[3].spec.flows[1].dependsOn.probe", "not supported", id="probes-refused"),
    pytest.param(flow("[{name: a}]", extra="jobRetainPolicy: delete"), "documents[3].spec.jobRetainPolicy",
                 "not supported", id="delete-retain-policy-refused"),
    pytest.param(TEMPLATE.format(name="a"), "documents", "used only by a JobFlow", id="templates-alone"),
    pytest.param(flow("[{name: a}]") + "\n---\napiVersion: batch.volcano.sh/v1alpha1\nkind: Job\n",
                 "documents[4].kind", "only JobFlows", id="mixed-with-a-job"),
]


@pytest.mark.parametrize(("text", "path", "rule"), REFUSED)
def test_flows_we_cannot_honour_are_refused(text: str, path: str, rule: str) -> None:
    with pytest.raises(InvalidInput) as info:
        load_jobs(text)
    assert info.value.path == path
    assert rule in info.value.rule


GATES = [
    pytest.param(("a",), {"a": ("succeeded", "")}, READY, "", id="dependency-succeeded"),
    pytest.param(("a",), {"a": ("running", "")}, WAIT, "waiting for a (running)", id="dependency-running"),
    pytest.param(("a", "b"), {"a": ("succeeded", "")}, WAIT, "waiting for b (not submitted)", id="not-submitted"),
    pytest.param(("a", "b"), {"a": ("running", ""), "b": ("failed", "maxRetry 3 exhausted")}, STOP,
                 "dependency b failed: maxRetry 3 exhausted", id="a-failed-dependency-stops-the-job"),
    pytest.param(("a",), {"a": ("cancelled", "")}, STOP, "dependency a cancelled", id="cancelled-dependency"),
]


@pytest.mark.parametrize(("after", "states", "verdict", "reason"), GATES)
def test_flow_gate(after: tuple[str, ...], states: dict[str, tuple[str, str]], verdict: str, reason: str) -> None:
    assert flow_gate(after, states) == (verdict, reason)
