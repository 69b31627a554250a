"""What one pod of a template requests, by the kube-scheduler's formula: one rule for every way in.

The planner and the queues' fair share count a task's ``resources``; the member cluster
counts the requests of the pod the agent creates from the task's template. A manifest's
task takes its resources from its template (``manifests_volcano``); a wire task states
both, so ``Task`` refuses a template whose containers request something other than the
task's resources (else a tenant asks the cluster for 8 GPUs while its queue is charged for
100m of CPU). A template whose containers request nothing stays allowed: the agent puts
the task's resources on its first container (``agents/k8s/convert.py`` ``pod_body``).

Per container, ``requests`` win and a resource given only under ``limits`` defaults its
request to the limit, as Kubernetes does; containers and sidecars add up, raised to the
init phase's peak (``resources.pod_request``).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

from federation.domain.errors import InvalidInput
from federation.domain.manifests_fields import mapping, sequence
from federation.domain.pod_security import TEMPLATE_MAX_DEPTH, parse_template
from federation.domain.resources import Resources, format_quantity, is_extended, pod_request


def container_requests(container: Mapping[str, object], path: str) -> Resources:
    """One container's requests (limits as defaults), refusing what the member API server would."""
    resources = mapping(container.get("resources"), f"{path}.resources")
    limits = Resources.parse(mapping(resources.get("limits"), f"{path}.resources.limits"), f"{path}.resources.limits")
    requests = Resources.parse(mapping(resources.get("requests"), f"{path}.resources.requests"),
                               f"{path}.resources.requests")
    for key, asked in requests:  # what the member API server would refuse (ValidateResourceRequirements)
        limit = limits.amounts.get(key)
        if limit is not None and asked > limit:
            raise InvalidInput(f"{path}.resources.requests.{key}", f"must not exceed the limit "
                               f"({format_quantity(key, asked)} > {format_quantity(key, limit)})")
        if limit is not None and asked != limit and is_extended(key):
            raise InvalidInput(f"{path}.resources.requests.{key}", "must equal the limit: an extended resource "
                               "cannot be overcommitted")
    merged = dict(limits.amounts)
    merged.update(requests.amounts)
    return Resources(merged)


def pod_requests(spec: Mapping[str, object], path: str) -> Resources:
    """The requests of one pod with this pod ``spec`` (``path`` names the spec)."""
    running = [container_requests(mapping(raw, f"{path}.containers[{k}]"), f"{path}.containers[{k}]")
               for k, raw in enumerate(sequence(spec.get("containers"), f"{path}.containers"))]
    inits: list[tuple[Resources, bool]] = []
    for k, raw in enumerate(sequence(spec.get("initContainers"), f"{path}.initContainers")):
        where = f"{path}.initContainers[{k}]"
        init = mapping(raw, where)
        restart = init.get("restartPolicy")
        if restart is not None and restart != "Always":
            raise InvalidInput(f"{where}.restartPolicy", f"{restart!r:.40} not supported: an init container's "
                               "restartPolicy may only be Always (a sidecar)")
        inits.append((container_requests(init, where), restart == "Always"))
    return pod_request(running, inits)


@lru_cache(maxsize=8192)
def template_requests(template_json: str) -> Resources:
    """The requests of a pod of this template (canonical JSON; paths below ``template``),
    empty when its containers request nothing. Cached: every ``Task`` built asks."""
    if not template_json:
        return Resources()
    template = parse_template(template_json, "", TEMPLATE_MAX_DEPTH)
    return pod_requests(mapping(template.get("spec"), "spec"), "spec")
