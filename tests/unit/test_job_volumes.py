"""Volcano Job ``spec.volumes`` (domain/job_volumes.py): read from a manifest with Volcano's
rules (its VolumeSpec, its webhook's ``validateIO``) and bounds, each refusal naming the
field path; carried over the wire exactly; bounded on the wire before any conversion."""

from __future__ import annotations

import json
import textwrap

import pytest

from federation.domain import InvalidInput, Resources
from federation.domain.job_volumes import MAX_JOB_VOLUMES, ClaimSource, ClaimSpec, JobVolume
from federation.domain.jobs import Job, Task
from federation.domain.manifests import load_jobs
from federation.wire.jobs import job_from_proto, job_to_proto
from federation.wire.limits import check_job_spec
from tests.fixtures.corpus import corpus

GI = 1 << 30


def job_yaml(volumes: str, container: str = "", plugins: str = "") -> str:
    return textwrap.dedent("""\
        apiVersion: batch.volcano.sh/v1alpha1
        kind: Job
        metadata:
          name: train
        spec:
        {plugins}
          volumes:
        {volumes}
          tasks:
            - name: worker
              replicas: 2
              template:
                spec:
                  containers:
                    - name: c
                      image: busybox
        {container}
        """).format(volumes=textwrap.indent(volumes, "    "), container=textwrap.indent(container, "              "),
                    plugins=textwrap.indent(plugins, "  "))


def refusal(text: str) -> str:
    with pytest.raises(InvalidInput) as info:
        load_jobs(text)
    return str(info.value)


NEW_CLAIM = """\
- mountPath: /data
  volumeClaim:
    accessModes: [ReadWriteOnce]
    storageClassName: local-wffc
    volumeMode: Filesystem
    resources:
      requests:
        storage: 10Gi
    dataSource:
      apiGroup: snapshot.storage.k8s.io
      kind: VolumeSnapshot
      name: imagenet-v3
- mountPath: /shared
  volumeClaimName: datasets
"""


def test_a_new_claim_and_an_existing_one_are_read_field_by_field() -> None:
    [job] = load_jobs(job_yaml(NEW_CLAIM))
    assert job.volumes == (
        JobVolume("/data", claim=ClaimSpec(("ReadWriteOnce",), 10 * GI, "local-wffc", "Filesystem",
                                           ClaimSource("VolumeSnapshot", "imagenet-v3", "snapshot.storage.k8s.io"))),
        JobVolume("/shared", claim_name="datasets"),
    )
    # The new claim is named after the job and the volume's index; the other is used as named.
    assert job.claims == (("train-pvc-0", "/data"), ("datasets", "/shared"))


def test_an_absent_class_is_the_clusters_default_and_an_empty_one_no_class() -> None:
    default = "- mountPath: /d\n  volumeClaim: {accessModes: [ReadWriteMany], resources: {requests: {storage: 1Gi}}}\n"
    [job] = load_jobs(job_yaml(default))
    assert job.volumes[0].claim is not None and job.volumes[0].claim.storage_class is None
    [none] = load_jobs(job_yaml(default.replace("accessModes", 'storageClassName: "", accessModes')))
    assert none.volumes[0].claim is not None and none.volumes[0].claim.storage_class == ""


CLAIM = "accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}"


@pytest.mark.parametrize(("volumes", "field", "words"), [
    # Volcano's webhook (validateIO) and VolumeSpec
    ("- mountPath: /in\n", "spec.volumes[0].volumeClaim", "either volumeClaim or volumeClaimName is required"),
    (f"- mountPath: /o\n  volumeClaimName: out\n  volumeClaim: {{{CLAIM}}}\n", "spec.volumes[0].volumeClaimName",
     "conflicts with volumeClaim"),
    ("- volumeClaimName: out\n", "spec.volumes[0].mountPath", "is required"),
    ("- mountPath: 'c:/data'\n  volumeClaimName: out\n", "spec.volumes[0].mountPath", "must not contain ':'"),
    ("- mountPath: /a\n  volumeClaimName: a\n- mountPath: /a\n  volumeClaimName: b\n", "spec.volumes[1].mountPath",
     "duplicated mountPath /a"),
    ("- mountPath: /a\n  volumeClaimName: Not_A_Name\n", "spec.volumes[0].volumeClaimName", "DNS-1123 subdomain"),
    (f"- mountPath: /a\n  volumeClaimName: {'a' * 254}\n", "spec.volumes[0].volumeClaimName", "at most 253"),
    # ours: what the member cluster would refuse or could not start
    ("- mountPath: data\n  volumeClaimName: a\n", "spec.volumes[0].mountPath", "absolute path"),
    ("- mountPath: /a\n  volumeClaimName: d\n- mountPath: /b\n  volumeClaimName: d\n",
     "spec.volumes[1].volumeClaimName", "claim d is already mounted by spec.volumes[0]"),
    ("- mountPath: /a\n  volumeClaimName: train-pvc-1\n- mountPath: /b\n  volumeClaim: {" + CLAIM + "}\n",
     "spec.volumes[1].volumeClaim", "claim train-pvc-1 is already mounted by spec.volumes[0]"),
    ("- mountPath: /a\n  mountpath: /b\n  volumeClaimName: a\n", "spec.volumes[0].mountpath", "not supported"),
    # the claim spec, field by field
    ("- mountPath: /a\n  volumeClaim: {resources: {requests: {storage: 1Gi}}}\n",
     "spec.volumes[0].volumeClaim.accessModes", "at least one access mode"),
    ("- mountPath: /a\n  volumeClaim: {accessModes: [ReadWrite], resources: {requests: {storage: 1Gi}}}\n",
     "spec.volumes[0].volumeClaim.accessModes[0]", "must be one of"),
    ("- mountPath: /a\n  volumeClaim: {accessModes: [ReadWriteOncePod, ReadOnlyMany], "
     "resources: {requests: {storage: 1Gi}}}\n", "spec.volumes[0].volumeClaim.accessModes", "ReadWriteOncePod"),
    ("- mountPath: /a\n  volumeClaim: {accessModes: [ReadWriteOnce]}\n",
     "spec.volumes[0].volumeClaim.resources.requests.storage", "is required"),
    ("- mountPath: /a\n  volumeClaim: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 0}}}\n",
     "spec.volumes[0].volumeClaim.resources.requests.storage", "greater than zero"),
    ("- mountPath: /a\n  volumeClaim: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gx}}}\n",
     "spec.volumes[0].volumeClaim.resources.requests.storage", "malformed quantity"),
    ("- mountPath: /a\n  volumeClaim: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}, "
     "limits: {storage: 2Gi}}}\n", "spec.volumes[0].volumeClaim.resources.limits", "not supported"),
    ("- mountPath: /a\n  volumeClaim: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi, "
     "cpu: 1}}}\n", "spec.volumes[0].volumeClaim.resources.requests.cpu", "not supported"),
    (f"- mountPath: /a\n  volumeClaim: {{{CLAIM}, volumeMode: Block}}\n", "spec.volumes[0].volumeClaim.volumeMode",
     "Block volume cannot be mounted"),
    (f"- mountPath: /a\n  volumeClaim: {{{CLAIM}, selector: {{matchLabels: {{a: b}}}}}}\n",
     "spec.volumes[0].volumeClaim.selector", "not supported"),
    (f"- mountPath: /a\n  volumeClaim: {{{CLAIM}, volumeName: pv-1}}\n", "spec.volumes[0].volumeClaim.volumeName",
     "not supported"),
    (f"- mountPath: /a\n  volumeClaim: {{{CLAIM}, dataSourceRef: {{kind: X, name: y}}}}\n",
     "spec.volumes[0].volumeClaim.dataSourceRef", "not supported"),
    (f"- mountPath: /a\n  volumeClaim: {{{CLAIM}, volumeAttributesClassName: gold}}\n",
     "spec.volumes[0].volumeClaim.volumeAttributesClassName", "not supported"),
    (f"- mountPath: /a\n  volumeClaim: {{{CLAIM}, storageClassName: Fast_SSD}}\n",
     "spec.volumes[0].volumeClaim.storageClassName", "DNS-1123 subdomain"),
    (f"- mountPath: /a\n  volumeClaim: {{{CLAIM}, dataSource: {{kind: VolumeSnapshot, name: s}}}}\n",
     "spec.volumes[0].volumeClaim.dataSource.apiGroup", "is required unless kind is PersistentVolumeClaim"),
    (f"- mountPath: /a\n  volumeClaim: {{{CLAIM}, dataSource: {{kind: PersistentVolumeClaim}}}}\n",
     "spec.volumes[0].volumeClaim.dataSource.name", "DNS-1123 subdomain"),
    (f"- mountPath: /a\n  volumeClaim: {{{CLAIM}, storageclassname: x}}\n",
     "spec.volumes[0].volumeClaim.storageclassname", "did you mean 'storageClassName'"),
], ids=["neither", "both", "no-mount-path", "colon", "duplicate-mount-path", "claim-name-grammar",
        "claim-name-253", "relative-path", "claim-twice", "claim-twice-made-name", "typo", "no-access-mode",
        "unknown-access-mode", "rwop-with-others", "no-storage", "zero-storage", "bad-quantity", "limits",
        "other-request", "block", "selector", "volume-name", "data-source-ref", "attributes-class", "class-grammar",
        "snapshot-without-group", "source-without-name", "claim-typo"])
def test_each_refusal_names_the_field(volumes: str, field: str, words: str) -> None:
    message = refusal(job_yaml(volumes))
    assert message.startswith(f"documents[0].{field}: "), message
    assert words in message, message


def test_a_mount_path_a_container_or_a_plugin_already_uses_is_refused() -> None:
    mounted = "volumeMounts:\n  - {name: cache, mountPath: /data}\n"
    message = refusal(job_yaml("- {mountPath: /data, volumeClaimName: a}\n", container=mounted))
    assert message.startswith("documents[0].spec.volumes[0].mountPath: tasks[0] container c already mounts"), message
    message = refusal(job_yaml("- {mountPath: /etc/volcano, volumeClaimName: a}\n", plugins="plugins: {svc: []}"))
    assert message.startswith("documents[0].spec.volumes[0].mountPath: the svc plugin mounts"), message
    message = refusal(job_yaml("- {mountPath: /root/.ssh, volumeClaimName: a}\n", plugins="plugins: {mpi: []}"))
    assert "the ssh plugin mounts its files at /root/.ssh" in message, message


def test_the_count_is_bounded_before_any_volume_is_read() -> None:
    many = "".join(f"- {{mountPath: /v{i}, volumeClaimName: c{i}}}\n" for i in range(MAX_JOB_VOLUMES + 1))
    message = refusal(job_yaml(many))
    assert message == (f"documents[0].spec.volumes: {MAX_JOB_VOLUMES + 1} is over the limit of "
                       f"{MAX_JOB_VOLUMES} volumes per job")
    [job] = load_jobs(job_yaml(many.rsplit("- ", 1)[0]))
    assert len(job.volumes) == MAX_JOB_VOLUMES


def test_a_workload_job_cannot_carry_volumes() -> None:
    from federation.domain.workloads import Workload
    body = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}}
    workload = Workload("Deployment", json.dumps(body))
    with pytest.raises(InvalidInput, match=r"^spec.volumes: not supported for a Deployment or StatefulSet"):
        Job(name="web", queue="q", tasks=(Task("default0", 1, Resources(), template_json=workload.template_json),),
            workload=workload, volumes=(JobVolume("/d", claim_name="x"),))


@pytest.mark.parametrize("name", ["volcano-website__docs__Concepts__VolcanoJob.md__L11-52.yaml",
                                  "volcano__docs__user-guide__how_to_use_cdp_plugin.md__L56-109.yaml"])
def test_volcanos_published_volume_examples_are_refused_as_its_webhook_refuses_them(name: str) -> None:
    """Both examples give their first volume no claim and their second both a name and a
    spec: Volcano's ``validateIO`` refuses each. Fixed the two ways it allows, they load."""
    text = (corpus() / "volcano-jobs" / name).read_text()
    assert refusal(text).startswith("documents[0].spec.volumes[0].volumeClaim: either volumeClaim or "
                                    "volumeClaimName is required")
    second = text.replace('    - mountPath: "/myinput"\n', "")
    assert refusal(second).startswith("documents[0].spec.volumes[0].volumeClaimName: conflicts with volumeClaim")
    fixed = second.replace('      volumeClaimName: "testvolumeclaimname"\n', "")
    [job] = load_jobs(fixed)
    assert job.claims == (("test-job-pvc-0", "/myoutput"),)
    assert job.volumes[0].claim == ClaimSpec(("ReadWriteOnce",), GI, "my-storage-class")


# ---------------------------------------------------------------- the wire


def test_volumes_round_trip_through_the_wire_exactly() -> None:
    [job] = load_jobs(job_yaml(NEW_CLAIM + "- mountPath: /scratch\n  volumeClaim: {accessModes: [ReadWriteOnce], "
                                           "storageClassName: '', resources: {requests: {storage: 512Mi}}}\n"))
    msg = job_to_proto(job)
    check_job_spec(msg)
    assert job_from_proto(msg) == job
    assert msg.volumes[0].claim.HasField("data_source") and not msg.volumes[1].HasField("claim")
    assert msg.volumes[2].claim.HasField("storage_class_name") and msg.volumes[2].claim.storage_class_name == ""


@pytest.mark.parametrize(("change", "field", "words"), [
    (lambda m: setattr(m.volumes[1], "mount_path", "/data"), "spec.volumes[1].mountPath", "duplicated mountPath"),
    (lambda m: setattr(m.volumes[0], "claim_name", "x"), "spec.volumes[0].volumeClaimName", "conflicts"),
    (lambda m: setattr(m.volumes[0].claim, "storage_bytes", -1), "spec.volumes[0].volumeClaim.resources.requests"
                                                                 ".storage", "greater than zero"),
    (lambda m: setattr(m.volumes[0].claim, "volume_mode", "Block"), "spec.volumes[0].volumeClaim.volumeMode",
     "only Filesystem"),
    (lambda m: m.volumes[0].claim.data_source.ClearField("api_group"), "spec.volumes[0].volumeClaim.dataSource"
                                                                       ".apiGroup", "is required"),
], ids=["duplicate-path", "both", "negative-storage", "block", "source-group"])
def test_the_server_refuses_over_grpc_what_a_manifest_could_not_say(change: object, field: str, words: str) -> None:
    [job] = load_jobs(job_yaml(NEW_CLAIM))
    msg = job_to_proto(job)
    change(msg)  # type: ignore[operator]  # a table of mutators
    with pytest.raises(InvalidInput) as info:
        job_from_proto(msg)
    assert info.value.path == field and words in info.value.rule, info.value


@pytest.mark.parametrize(("change", "field"), [
    (lambda m: m.volumes.extend([m.volumes[1]] * MAX_JOB_VOLUMES), "spec.volumes"),
    (lambda m: setattr(m.volumes[0], "mount_path", "/" + "x" * 5000), "spec.volumes[0].mountPath"),
    (lambda m: m.volumes[0].claim.access_modes.extend(["ReadWriteOnce"] * 4),
     "spec.volumes[0].volumeClaim.accessModes"),
    (lambda m: setattr(m.volumes[0].claim.data_source, "name", "n" * 300),
     "spec.volumes[0].volumeClaim.dataSource.name"),
], ids=["count", "mount-path", "access-modes", "source-name"])
def test_the_wire_bounds_volumes_before_conversion(change: object, field: str) -> None:
    [job] = load_jobs(job_yaml(NEW_CLAIM))
    msg = job_to_proto(job)
    change(msg)  # type: ignore[operator]
    with pytest.raises(InvalidInput) as info:
        check_job_spec(msg)
    assert info.value.path == field, info.value
