"""Which stored (Cluster)PropagationPolicy governs a job: Karmada's matching, modelled
on karmada-io/karmada (read, not copied):

- ``pkg/util/selector.go`` ``ResourceSelectorPriority``: a selector matches when
  apiVersion and kind are equal and its namespace (if set) is the workload's; a non-empty
  ``name`` then decides alone (match by name, the label selector ignored); else a label
  selector must match (match by label); else it matches every object of the kind
  (match all). A policy's implicit priority is the best over its selectors:
  name > labelSelector > kind-only.
- ``pkg/detector`` ``getHighestPriorityPropagationPolicy``: among matching policies the
  highest explicit ``spec.priority`` wins, then the highest implicit priority, then the
  alphabetically first name.
- the detector looks up namespaced PropagationPolicies (of the workload's namespace)
  first and falls back to ClusterPropagationPolicies only when none matches.
- claims (``policy/preemption_types`` and the priority-and-preemption proposal): once a
  workload is claimed by a policy, a later policy takes it over only when it has
  ``preemption: Always`` and a higher priority (a namespaced policy also preempts a
  cluster-wide one). We apply the claim to jobs that hold capacity (placed or running):
  a pending job follows the best policy of the moment, so a new or changed policy is
  picked up at once, while a running job keeps the policy it was placed under — as long
  as that policy still selects it: one changed to select it no longer loses the claim
  (``pkg/detector/policy.go`` ``removeResourceClaimMetadataIfNotMatched``).

Pure: no store, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from federation.domain.jobs import Job
from federation.domain.policies import NAMESPACED, PolicyObject, ResourceSelector

MISMATCH, MATCH_ALL, MATCH_LABELS, MATCH_NAME = 0, 1, 2, 3
VOLCANO_JOB = ("batch.volcano.sh/v1alpha1", "Job")
APPS_V1 = "apps/v1"  # the group/version of the Deployments and StatefulSets placed as gangs


@dataclass(frozen=True)
class ResourceRef:
    """What a selector looks at: the object's type, namespace, name and labels."""

    api_version: str
    kind: str
    namespace: str
    name: str
    labels: Mapping[str, str]


def resource_of(job: Job) -> ResourceRef:
    """The object a job was submitted as: its Deployment or StatefulSet, else a Volcano Job."""
    api_version, kind = VOLCANO_JOB if job.workload is None else (APPS_V1, job.workload.kind)
    return ResourceRef(api_version, kind, job.namespace, job.name, dict(job.labels))


def selector_priority(workload: ResourceRef, selector: ResourceSelector) -> int:
    if (selector.api_version, selector.kind) != (workload.api_version, workload.kind):
        return MISMATCH
    if selector.namespace and selector.namespace != workload.namespace:
        return MISMATCH
    if selector.name:
        return MATCH_NAME if selector.name == workload.name else MISMATCH
    if selector.label_selector is not None:
        return MATCH_LABELS if selector.label_selector.matches(workload.labels) else MISMATCH
    return MATCH_ALL


def implicit_priority(workload: ResourceRef, policy: PolicyObject) -> int:
    if policy.kind == NAMESPACED and policy.namespace != workload.namespace:
        return MISMATCH  # a PropagationPolicy selects only in its own namespace
    return max((selector_priority(workload, s) for s in policy.resource_selectors), default=MISMATCH)


def _best(workload: ResourceRef, policies: Iterable[PolicyObject]) -> PolicyObject | None:
    scored = [(p, implicit_priority(workload, p)) for p in policies]
    matching = [(p, imp) for p, imp in scored if imp > MISMATCH]
    if not matching:
        return None
    return min(matching, key=lambda pi: (-pi[0].priority, -pi[1], pi[0].name))[0]


def best_policy(workload: ResourceRef, policies: Sequence[PolicyObject]) -> PolicyObject | None:
    """The policy that would claim ``workload`` now (namespaced first, then cluster-wide)."""
    namespaced = _best(workload, (p for p in policies if p.kind == NAMESPACED))
    return namespaced if namespaced is not None else _best(workload, (p for p in policies if p.kind != NAMESPACED))


def _preempts(new: PolicyObject, old: PolicyObject) -> bool:
    if new.preemption != "Always":
        return False
    if new.kind == NAMESPACED and old.kind != NAMESPACED:
        return True
    return new.kind == old.kind and new.priority > old.priority


def governing_policy(workload: ResourceRef, policies: Sequence[PolicyObject], claimed: str | None,
                     holds_capacity: bool) -> PolicyObject | None:
    """The policy that governs ``workload`` this round (module doc); ``claimed`` is the ref
    of the policy it was placed under, if any."""
    best = best_policy(workload, policies)
    if not holds_capacity or claimed is None:
        return best
    current = next((p for p in policies if p.ref == claimed), None)
    if current is None or implicit_priority(workload, current) == MISMATCH:
        # The claiming policy was deleted, or changed so it no longer selects the job: the
        # claim goes (Karmada's detector drops it, ``cleanPPUnmatchedRBs``) and the job runs on
        # where it is, under the best policy of the moment.
        return best
    if best is not None and best.ref != current.ref and _preempts(best, current):
        return best
    return current


@dataclass(frozen=True)
class Governed:
    """One job's governing policy this round and whether its claim must be rewritten."""

    job: Job  # with ``propagation`` set to the governing policy's placement (or as submitted)
    ref: str | None  # the governing policy, None: none (or the job's own inline policy)
    claim_changed: bool
    suspended: bool  # pending under a policy whose ``suspension.dispatching`` is true


def govern(job: Job, policies: Sequence[PolicyObject], claimed: str | None, holds_capacity: bool) -> Governed:
    """Apply the governing policy to ``job``; a policy submitted inline with the job wins
    (it names the job, like a name match, and no stored policy can be more specific)."""
    if job.propagation is not None:
        return Governed(job, None, claimed is not None, False)
    policy = governing_policy(resource_of(job), policies, claimed, holds_capacity)
    if policy is None:
        return Governed(job, None, claimed is not None, False)
    return Governed(replace(job, propagation=policy.placement), policy.ref, claimed != policy.ref,
                    policy.suspend_dispatching and not holds_capacity)
