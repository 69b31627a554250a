"""Volcano JobFlow (``flow.volcano.sh/v1alpha1`` JobFlow + JobTemplate) as jobs that wait
for each other.

Volcano's jobflow controller (volcano-sh/volcano ``pkg/controllers/jobflow``,
``deployJob``/``judge``) creates the Job ``<flow>-<template>`` from each JobTemplate once
every target of the flow's ``dependsOn.targets`` has a Job that Completed; a flow whose
job failed is Failed and creates nothing more. Here every job of the flow is submitted at
once, each carrying ``after`` (the names of the jobs it waits for); central plans a job
only once all of them Succeeded, and cancels it, naming the dependency and its reason,
when one of them failed or was cancelled (``federation/domain/flows.py`` decides, the
round applies it). Refused, naming the field: ``dependsOn.probe`` (HTTP/TCP/task-status
probes are not implemented), ``jobRetainPolicy: delete`` (jobs are kept, as ``retain``),
a flow naming a JobTemplate the file does not hold, and a cycle. A template's
``ttlSecondsAfterFinished`` is honoured on every step: the TTL sweep keeps a finished step
while a step that waits for it has not finished (``store/job_waits.py``), so its record
is still there to release the dependent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from federation.domain.errors import InvalidInput
from federation.domain.jobs import Job
from federation.domain.manifests_fields import check_keys, job_namespace, mapping, sequence, string, strings
from federation.domain.states import JobState

FLOW_API = "flow.volcano.sh/v1alpha1"
FLOW_KINDS = ("JobFlow", "JobTemplate")


def _flow_steps(doc: Mapping[str, object], path: str) -> list[tuple[str, tuple[str, ...], str]]:
    spec = mapping(doc.get("spec"), f"{path}.spec")
    check_keys(spec, f"{path}.spec", ("flows", "jobRetainPolicy"))
    if string(spec.get("jobRetainPolicy", "retain"), f"{path}.spec.jobRetainPolicy") != "retain":
        raise InvalidInput(f"{path}.spec.jobRetainPolicy", "delete not supported: the flow's jobs are kept (retain)")
    steps = []
    for i, raw in enumerate(sequence(spec.get("flows"), f"{path}.spec.flows")):
        where = f"{path}.spec.flows[{i}]"
        item = mapping(raw, where)
        check_keys(item, where, ("name", "dependsOn"))
        depends = mapping(item.get("dependsOn"), f"{where}.dependsOn")
        check_keys(depends, f"{where}.dependsOn", ("targets",), ("probe",))
        steps.append((string(item.get("name"), f"{where}.name"),
                      strings(depends.get("targets"), f"{where}.dependsOn.targets"), where))
    if not steps:
        raise InvalidInput(f"{path}.spec.flows", "at least one flow is required")
    return steps


def flow_jobs(flows: Sequence[tuple[int, Mapping[str, object]]],
              templates: Mapping[str, tuple[Job, str]]) -> tuple[Job, ...]:
    """The jobs of each JobFlow document (``(index, doc)``), from the file's JobTemplates
    (template name -> (job parsed from its spec, path)): ``<flow>-<template>``, in the
    flow's namespace, waiting for the jobs of its targets."""
    jobs: list[Job] = []
    for index, doc in flows:
        path = f"documents[{index}]"
        meta = mapping(doc.get("metadata"), f"{path}.metadata")
        flow = string(meta.get("name"), f"{path}.metadata.name")
        namespace = job_namespace(meta, path)
        steps = _flow_steps(doc, path)
        names = {name for name, _, _ in steps}
        for name, targets, where in steps:
            if name not in templates:
                raise InvalidInput(f"{where}.name", f"no JobTemplate {name!r} in this file")
            for k, target in enumerate(targets):
                if target not in names:
                    raise InvalidInput(f"{where}.dependsOn.targets[{k}]", f"{target!r} is not a flow of this JobFlow")
        _check_acyclic(steps)
        for name, targets, where in steps:
            template, _ = templates[name]
            try:
                jobs.append(replace(template, name=f"{flow}-{name}", namespace=namespace,
                                    after=tuple(f"{flow}-{t}" for t in targets)))
            except InvalidInput as exc:
                raise InvalidInput(f"{where}.name", f"job {flow}-{name}: {exc.rule}") from None
    return tuple(jobs)


def _check_acyclic(steps: Sequence[tuple[str, tuple[str, ...], str]]) -> None:
    deps = {name: set(targets) for name, targets, _ in steps}
    done: set[str] = set()
    while True:
        ready = {n for n, d in deps.items() if n not in done and d <= done}
        if not ready:
            break
        done |= ready
    stuck = [where for name, _, where in steps if name not in done]
    if stuck:
        raise InvalidInput(f"{stuck[0]}.dependsOn", "the flows depend on each other in a cycle")


READY, WAIT, STOP = "ready", "wait", "stop"


def flow_gate(after: Sequence[str], states: Mapping[str, tuple[str, str]]) -> tuple[str, str]:
    """Whether a job that waits for ``after`` may be planned: (READY|WAIT|STOP, reason).

    ``states`` maps a dependency's name to its (state, reason) as stored
    (``federation/domain/states.py``; a missing name has not been submitted). One that failed or was cancelled
    stops the job (Volcano's flow goes Failed and creates nothing more); all succeeded
    releases it (Volcano's ``judge``: every target Completed); anything else waits.
    """
    for dep in after:
        state, reason = states.get(dep, ("", ""))
        if state in (JobState.FAILED, JobState.CANCELLED):
            return STOP, f"dependency {dep} {state}" + (f": {reason}" if reason else "")
    waiting = [f"{dep} ({states[dep][0]})" if dep in states else f"{dep} (not submitted)"
               for dep in after if states.get(dep, ("", ""))[0] != JobState.SUCCEEDED]
    if waiting:
        return WAIT, "waiting for " + ", ".join(waiting)
    return READY, ""
