"""``fedctl apply`` kinds of the workloads engineer: Kubernetes Deployment and StatefulSet
with Volcano's gang/topology annotations (federation/domain/workloads.py), and Volcano
JobFlow with its JobTemplates (federation/domain/jobflows.py).

A Deployment or StatefulSet is submitted as a job, like a Volcano Job. JobTemplates are
not stored by the federation: applying one keeps it for the JobFlows of the same
``fedctl apply`` run (rank ``ORDER_TEMPLATES``, before the flows), and its line says so;
a JobFlow then submits every job of the flow (``<flow>-<template>``, each waiting for its
``dependsOn`` targets), one line for the flow naming them.
"""

from __future__ import annotations

from collections.abc import Mapping

from federation.cli.apply import ORDER_FLOWS, ORDER_TEMPLATES, ORDER_WORKLOADS, Applied, Kind, register
from federation.cli.apply_kinds import apply_job_spec, check_job_spec
from federation.client import FederationClient
from federation.domain.errors import InvalidInput
from federation.domain.jobflows import FLOW_API, flow_jobs
from federation.domain.jobs import Job
from federation.domain.manifests_fields import job_namespace, mapping, string
from federation.domain.manifests_volcano import explicit_priority, parse_job, parse_workload
from federation.domain.workloads import WORKLOAD_API
from federation.v1 import types_pb2
from federation.wire.convert import job_to_proto

# JobTemplates applied in this run, by (namespace, name): only JobFlows of the same run use them.
_TEMPLATES: dict[tuple[str, str], tuple[Job, str]] = {}


def _workload_spec(doc: Mapping[str, object], path: str) -> types_pb2.JobSpec:
    spec = job_to_proto(parse_workload(doc, path, None))
    if not explicit_priority(doc):
        spec.ClearField("priority")  # the server resolves the pod template's priorityClassName
    return spec


async def _keep_template(client: FederationClient, template: tuple[Job, str]) -> Applied:
    job, _ = template
    _TEMPLATES[(job.namespace, job.name)] = template
    return Applied(f"jobtemplate/{job.name}", "kept for this run's JobFlows (not stored)")


def _parse_flow(doc: Mapping[str, object], path: str) -> tuple[int, Mapping[str, object], str]:
    meta = mapping(doc.get("metadata"), f"{path}.metadata")
    string(meta.get("name"), f"{path}.metadata.name")
    return (int(path.rsplit("[", 1)[-1].rstrip("]")) if path.endswith("]") else 0), doc, path


def _flow(flow: tuple[int, Mapping[str, object], str]) -> tuple[Job, ...]:
    index, doc, path = flow
    meta = mapping(doc.get("metadata"), f"{path}.metadata")
    namespace = job_namespace(meta, path)
    templates = {name: t for (ns, name), t in _TEMPLATES.items() if ns == namespace}
    try:
        return flow_jobs([(index, doc)], templates)
    except InvalidInput as exc:  # flow_jobs names documents[i]: say which file's document
        raise InvalidInput(exc.path.replace(f"documents[{index}]", path, 1), exc.rule) from None


async def _check_flow(client: FederationClient, flow: tuple[int, Mapping[str, object], str]) -> None:
    for job in _flow(flow):
        await check_job_spec(client, job_to_proto(job))


async def _apply_flow(client: FederationClient, flow: tuple[int, Mapping[str, object], str]) -> Applied:
    jobs = _flow(flow)
    outcomes = [(await apply_job_spec(client, job_to_proto(job))) for job in jobs]
    name = string(mapping(flow[1].get("metadata"), "metadata").get("name"), "metadata.name")
    detail = ", ".join(f"{a.ref} {a.outcome}" for a in outcomes)
    return Applied(f"jobflow/{name}", f"submitted ({detail})")


for _kind in ("Deployment", "StatefulSet"):
    register(Kind(_kind, (WORKLOAD_API,), ORDER_WORKLOADS, _workload_spec, apply_job_spec,
                  lambda spec: f"job/{spec.name}", check=check_job_spec))
register(Kind("JobTemplate", (FLOW_API,), ORDER_TEMPLATES, lambda doc, path: (parse_job(doc, path, None), path),
              _keep_template, lambda t: f"jobtemplate/{t[0].name}"))
register(Kind("JobFlow", (FLOW_API,), ORDER_FLOWS, _parse_flow, _apply_flow,
              lambda f: f"jobflow/{mapping(f[1].get('metadata'), 'metadata').get('name')}", check=_check_flow))
