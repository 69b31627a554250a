"""``spec.ttlSecondsAfterFinished`` (Volcano's job TTL) at the edges: the YAML and gRPC
paths carry it, its bounds and type are checked naming the field, every JobFlow step may
have one, and the deletion deadline counts from the finish."""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime, timedelta

import pytest

from federation.domain import InvalidInput
from federation.domain.jobs import MAX_TTL_SECONDS_AFTER_FINISHED
from federation.domain.manifests import load_jobs, load_manifests
from federation.store.lifecycle import expiry
from federation.v1 import types_pb2
from federation.wire import convert
from tests.fixtures.corpus import corpus

JOB = textwrap.dedent("""\
    apiVersion: batch.volcano.sh/v1alpha1
    kind: Job
    metadata: {{name: sleeper}}
    spec:
      queue: testing
    {ttl}
      tasks:
        - name: sleeper
          replicas: 1
          template:
            spec:
              restartPolicy: Never
              containers: [{{name: c, image: busybox}}]
    """)


def job_yaml(ttl: str) -> str:
    return JOB.format(ttl=f"  ttlSecondsAfterFinished: {ttl}" if ttl else "")


@pytest.mark.parametrize(("ttl", "expected"), [
    pytest.param("600", 600, id="the Volcano user guide's 600 seconds"),
    pytest.param("0", 0, id="zero: deleted right after it finishes"),
    pytest.param(str(MAX_TTL_SECONDS_AFTER_FINISHED), MAX_TTL_SECONDS_AFTER_FINISHED, id="the int32 ceiling"),
    pytest.param("", None, id="absent: kept"),
])
def test_the_ttl_is_loaded(ttl: str, expected: int | None) -> None:
    assert load_manifests(job_yaml(ttl)).job.ttl_seconds_after_finished == expected


@pytest.mark.parametrize(("ttl", "rule"), [
    pytest.param("-1", "between 0 and 2,147,483,647", id="negative"),
    pytest.param(str(MAX_TTL_SECONDS_AFTER_FINISHED + 1), "between 0 and 2,147,483,647", id="past int32"),
    pytest.param("10" * 30, "between 0 and 2,147,483,647", id="a 60-digit number"),
    pytest.param("'600'", "must be an integer", id="a string"),
    pytest.param("1.5", "must be an integer", id="a float"),
    pytest.param("true", "must be an integer", id="a boolean"),
    pytest.param("null", "must be an integer", id="null"),
])
def test_a_bad_ttl_is_refused_naming_the_field(ttl: str, rule: str) -> None:
    with pytest.raises(InvalidInput) as info:
        load_manifests(job_yaml(ttl))
    assert info.value.path == "documents[0].spec.ttlSecondsAfterFinished"
    assert rule in info.value.rule


def test_the_published_volcano_example_is_refused_only_for_its_generate_name() -> None:
    """Volcano's own TTL example (its user guide) names no job, only ``generateName``, which
    stays refused; given a name, the rest of it, TTL included, is accepted."""
    text = (corpus() / "volcano-jobs" / "volcano__docs__user-guide__how_to_use_job_ttl.md__L30-62.yaml").read_text()
    with pytest.raises(InvalidInput) as info:
        load_manifests(text)
    assert info.value.path == "documents[0].metadata.name" and "generateName" in info.value.rule
    job = load_manifests(text.replace("generateName: test-job-", "name: test-job")).job
    assert (job.name, job.ttl_seconds_after_finished) == ("test-job", 600)


def test_the_ttl_travels_over_grpc_and_unset_is_none() -> None:
    job = load_manifests(job_yaml("0")).job
    msg = types_pb2.JobSpec.FromString(convert.job_to_proto(job).SerializeToString())
    assert msg.HasField("ttl_seconds_after_finished") and msg.ttl_seconds_after_finished == 0
    assert convert.job_from_proto(msg) == job
    unset = convert.job_to_proto(load_manifests(job_yaml("")).job)
    assert not unset.HasField("ttl_seconds_after_finished")
    assert convert.job_from_proto(unset).ttl_seconds_after_finished is None


def test_a_negative_ttl_over_grpc_is_refused_naming_the_field() -> None:
    msg = convert.job_to_proto(load_manifests(job_yaml("")).job)
    msg.ttl_seconds_after_finished = -5
    with pytest.raises(InvalidInput) as info:
        convert.job_from_proto(msg)
    assert info.value.path == "spec.ttlSecondsAfterFinished" and "between 0 and" in info.value.rule


FLOW = textwrap.dedent("""\
    apiVersion: flow.volcano.sh/v1alpha1
    kind: JobTemplate
    metadata: {{name: prep}}
    spec:
    {ttl_prep}
      tasks: [{{name: t, replicas: 1, template: {{spec: {{containers: [{{name: c, image: busybox}}]}}}}}}]
    ---
    apiVersion: flow.volcano.sh/v1alpha1
    kind: JobTemplate
    metadata: {{name: train}}
    spec:
    {ttl_train}
      tasks: [{{name: t, replicas: 1, template: {{spec: {{containers: [{{name: c, image: busybox}}]}}}}}}]
    ---
    apiVersion: flow.volcano.sh/v1alpha1
    kind: JobFlow
    metadata: {{name: flow}}
    spec:
      flows:
        - name: prep
        - name: train
          dependsOn: {{targets: [prep]}}
    """)


def test_every_flow_step_may_expire_including_one_another_step_waits_for() -> None:
    """Accepted on a step another step depends on too: the sweep keeps its record while the
    dependent has not finished (store/job_waits.py; tests/integration/test_store_job_ttl.py)."""
    jobs = {j.name: j for j in load_jobs(FLOW.format(ttl_prep="  ttlSecondsAfterFinished: 0",
                                                     ttl_train="  ttlSecondsAfterFinished: 30"))}
    assert jobs["flow-prep"].ttl_seconds_after_finished == 0
    assert (jobs["flow-train"].ttl_seconds_after_finished, jobs["flow-train"].after) == (30, ("flow-prep",))


def test_the_deadline_counts_from_the_finish() -> None:
    finished = datetime(2026, 1, 1, tzinfo=UTC)
    assert expiry(load_manifests(job_yaml("600")).job, finished) == finished + timedelta(seconds=600)
    assert expiry(load_manifests(job_yaml("0")).job, finished) == finished
    assert expiry(load_manifests(job_yaml("")).job, finished) is None
    furthest = expiry(load_manifests(job_yaml(str(MAX_TTL_SECONDS_AFTER_FINISHED))).job, finished)
    assert furthest is not None and furthest.year == 2094
