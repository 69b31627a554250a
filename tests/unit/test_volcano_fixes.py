"""Volcano behaviours the federation follows: default task names, one action per event,
and "not supported" (never "unknown") for fields we do not implement."""

from __future__ import annotations

import pytest

from federation.domain.errors import InvalidInput
from federation.domain.manifests import load_manifests

JOB = """apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {{name: j}}
spec:
  {spec}
  tasks:
  - replicas: 1
    template: {{spec: {{containers: [{{name: c, image: x}}]}}}}
  - replicas: 1
    name: named
    template: {{spec: {{containers: [{{name: c, image: x}}]}}}}
"""


def test_a_task_without_a_name_is_named_default_and_its_index_as_volcano_does() -> None:
    job = load_manifests(JOB.format(spec="queue: q")).job
    assert [t.name for t in job.tasks] == ["default0", "named"]


@pytest.mark.parametrize(("spec", "path", "rule"), [
    pytest.param("policies: [{event: PodFailed, action: RestartJob}, {event: PodFailed, action: AbortJob}]",
                 "documents[0].spec.policies[1].event", "one event cannot have two actions",
                 id="Volcano's own invalid example: PodFailed to RestartJob and AbortJob"),
    pytest.param("policies: [{events: [PodEvicted, PodFailed], action: RestartJob}, {event: PodFailed, "
                 "action: AbortJob}]", "documents[0].spec.policies[1].event", "policies[0]",
                 id="an event listed in events counts too"),
    pytest.param("policies: [{exitCode: 3, action: RestartJob}, {exitCode: 3, action: AbortJob}]",
                 "documents[0].spec.policies[1].exitCode", "already mapped", id="one exit code, two actions"),
    pytest.param("policies: [{event: '*', action: RestartJob}, {event: PodFailed, action: AbortJob}]",
                 "documents[0].spec.policies[0].event", "'*' covers every event", id="star beside another event"),
    pytest.param("minAvaliable: 1", "documents[0].spec.minAvaliable", "not supported (did you mean",
                 id="a typo says not supported and suggests the field"),
    pytest.param("runningEstimate: 1h", "documents[0].spec.runningEstimate", "not supported",
                 id="a field we do not implement"),
    pytest.param("policies: [{event: JobUpdated, action: RestartJob}]", "documents[0].spec.policies[0].event",
                 "JobUpdated not supported", id="an event Volcano accepts that never happens here"),
    pytest.param("policies: [{event: PodFailed, action: ResumeJob}]", "documents[0].spec.policies[0].action",
                 "ResumeJob not supported", id="an action Volcano accepts that we do not run"),
])
def test_refusals_name_the_field(spec: str, path: str, rule: str) -> None:
    with pytest.raises(InvalidInput) as info:
        load_manifests(JOB.format(spec=spec))
    assert info.value.path == path and rule in info.value.rule
    assert "unknown" not in info.value.rule


@pytest.mark.parametrize(("spec", "expected"), [
    pytest.param("queue: q", 3, id="absent: 3"),
    pytest.param("maxRetry: 0", 3, id="zero: 3, as Volcano's admission writes over it"),
    pytest.param("maxRetry: 1", 1, id="one: no restart at all"),
])
def test_max_retry_is_defaulted_as_volcano_admission_does(spec: str, expected: int) -> None:
    assert load_manifests(JOB.format(spec=spec)).job.max_retry == expected


def test_task_failed_is_an_event_a_policy_may_name() -> None:
    job = load_manifests(JOB.format(spec="policies: [{event: TaskFailed, action: AbortJob}]")).job
    assert job.policies[0].events == ("TaskFailed",)


ELASTIC = """apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {{name: j}}
spec:
  {spec}
  tasks:
  - name: master
    replicas: 1
    template: {{spec: {{containers: [{{name: c, image: x}}]}}}}
  - name: worker
    replicas: 4
    {worker}
    template: {{spec: {{containers: [{{name: c, image: x}}]}}}}
"""


@pytest.mark.parametrize(("spec", "worker", "gang"), [
    pytest.param("queue: q", "minAvailable: 2", 3, id="absent: the tasks' minimums, a task without one whole"),
    pytest.param("minAvailable: 0", "minAvailable: 2", 3, id="0 is absent, as Volcano's admission reads it"),
    pytest.param("minAvailable: 4", "minAvailable: 2", 4, id="given: kept"),
    pytest.param("queue: q", "", 5, id="no minimum anywhere: every replica"),
    pytest.param("minAvailable: 0", "", 5, id="0 and no task minimum: every replica"),
])
def test_the_gang_defaults_to_the_sum_of_the_task_minimums_as_volcano_admission_sets_it(
        spec: str, worker: str, gang: int) -> None:
    """Volcano's job admission fills an absent (or 0) ``spec.minAvailable`` with the sum of
    the tasks' own minimums, a task without one counting all its replicas. Here such a job
    was a gang of every replica: a 1 + 4 job whose workers say ``minAvailable: 2`` waited for
    room for 5 pods, where Volcano starts it with 3 and grows."""
    job = load_manifests(ELASTIC.format(spec=spec, worker=worker)).job
    assert job.gang_size == gang
    assert job.elastic == (gang < 5)


def test_tasks_that_all_say_zero_still_start_one_pod() -> None:
    job = load_manifests(ELASTIC.format(spec="queue: q", worker="minAvailable: 0").replace(
        "replicas: 1\n", "replicas: 1\n    minAvailable: 0\n", 1)).job
    assert job.gang_size == 1 and job.elastic
