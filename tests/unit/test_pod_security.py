"""Pod Security Standards on pod templates, and the queue's namespaces (issue 10, "safe pods")."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from federation.domain.errors import InvalidInput
from federation.domain.pod_security import check_pod_security, parse_template
from federation.domain.queues import Queue
from federation.service.admission import admit
from federation.v1 import types_pb2
from federation.wire.convert import job_from_proto
from federation.wire.limits import Limits

TRAINER = {"name": "trainer", "image": "nvcr.io/nvidia/pytorch:24.05-py3", "command": ["torchrun", "train.py"],
           "resources": {"limits": {"nvidia.com/gpu": 8}}}
PATH = "spec.tasks[0].template"


def _pod(container: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"labels": {"app": "train"}}, "spec": {"containers": [{**TRAINER, **(container or {})}],
                                                                **spec}}


def _refusal(template: dict[str, Any], level: str = "baseline") -> str:
    with pytest.raises(InvalidInput) as err:
        check_pod_security(template, level, PATH)
    return err.value.path


def test_an_ordinary_root_training_pod_passes_baseline() -> None:
    check_pod_security(_pod({"securityContext": {"runAsUser": 0, "capabilities": {"add": ["SYS_CHROOT"]}}},
                            volumes=[{"name": "shm", "emptyDir": {"medium": "Memory"}},
                                     {"name": "data", "persistentVolumeClaim": {"claimName": "d"}}]),
                       "baseline", PATH)


@pytest.mark.parametrize(("template", "path"), [
    pytest.param(_pod({"securityContext": {"privileged": True}}),
                 f"{PATH}.spec.containers[0].securityContext.privileged", id="privileged container"),
    pytest.param(_pod(volumes=[{"name": "root", "hostPath": {"path": "/"}}]), f"{PATH}.spec.volumes[0].hostPath",
                 id="hostPath volume"),
    pytest.param(_pod(hostNetwork=True), f"{PATH}.spec.hostNetwork", id="host network"),
    pytest.param(_pod(hostPID=True), f"{PATH}.spec.hostPID", id="host PID namespace"),
    pytest.param(_pod(hostIPC=True), f"{PATH}.spec.hostIPC", id="host IPC namespace"),
    pytest.param(_pod({"securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}),
                 f"{PATH}.spec.containers[0].securityContext.capabilities.add[0]", id="SYS_ADMIN added"),
    pytest.param(_pod({"ports": [{"containerPort": 80, "hostPort": 80}]}),
                 f"{PATH}.spec.containers[0].ports[0].hostPort", id="host port"),
    pytest.param(_pod(securityContext={"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}),
                 f"{PATH}.spec.securityContext.sysctls[0].name", id="unsafe sysctl"),
    pytest.param(_pod({"securityContext": {"seccompProfile": {"type": "Unconfined"}}}),
                 f"{PATH}.spec.containers[0].securityContext.seccompProfile.type", id="seccomp unconfined"),
    pytest.param(_pod({"securityContext": {"procMount": "Unmasked"}}),
                 f"{PATH}.spec.containers[0].securityContext.procMount", id="unmasked /proc"),
    pytest.param(_pod({"securityContext": {"seLinuxOptions": {"type": "spc_t"}}}),
                 f"{PATH}.spec.containers[0].securityContext.seLinuxOptions.type", id="SELinux super-privileged"),
    pytest.param({"spec": {"containers": [TRAINER], "initContainers": [{"name": "i", "securityContext":
                                                                        {"privileged": True}}]}},
                 f"{PATH}.spec.initContainers[0].securityContext.privileged", id="privileged init container"),
    pytest.param({"metadata": {"annotations": {"container.apparmor.security.beta.kubernetes.io/trainer":
                                               "unconfined"}}, "spec": {"containers": [TRAINER]}},
                 f"{PATH}.metadata.annotations['container.apparmor.security.beta.kubernetes.io/trainer']",
                 id="AppArmor unconfined annotation"),
])
def test_baseline_refuses_each_escape_naming_the_field(template: dict[str, Any], path: str) -> None:
    assert _refusal(template) == path
    check_pod_security(template, "privileged", PATH)  # an admin's privileged queue lets it through


def test_restricted_asks_for_non_root_no_escalation_seccomp_and_drop_all() -> None:
    root = _pod()
    assert _refusal(root, "restricted").endswith("containers[0].securityContext.allowPrivilegeEscalation")
    hardened = _pod({"securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True,
                                         "capabilities": {"drop": ["ALL"]}}},
                    securityContext={"seccompProfile": {"type": "RuntimeDefault"}})
    check_pod_security(hardened, "restricted", PATH)
    with_pvc_and_nfs = {**hardened, "spec": {**hardened["spec"], "volumes": [{"name": "n", "nfs": {"path": "/"}}]}}
    assert _refusal(with_pvc_and_nfs, "restricted") == f"{PATH}.spec.volumes[0].nfs"


@pytest.mark.parametrize(("text", "rule"), [
    pytest.param("not json", "not valid JSON", id="issue 10: not JSON"),
    pytest.param("[" * 100_000 + "]" * 100_000, "nested too deep", id="issue 10: nested 100k deep"),
    pytest.param("{\"a\": " + "[" * 80 + "]" * 80 + "}", "over the limit of 64",
                 id="deeper than the limit, shallower than recursion"),
    pytest.param("[1, 2]", "must be a JSON object", id="an array"),
])
def test_templates_are_parsed_within_bounds(text: str, rule: str) -> None:
    with pytest.raises(InvalidInput) as err:
        parse_template(text, PATH, 64)
    assert err.value.path == PATH and rule in err.value.rule


def _job(namespace: str = "", template: dict[str, Any] | None = None) -> types_pb2.JobSpec:
    task = types_pb2.TaskSpec(name="w", replicas=1, resources={"nvidia.com/gpu": "8"},  # what TRAINER requests
                              template_json=json.dumps(template) if template else "")
    return types_pb2.JobSpec(name="j", queue="team", namespace=namespace, tasks=[task])


def _admit(queue: Queue, spec: types_pb2.JobSpec) -> str:
    return admit(job_from_proto(spec), spec, queue, Limits()).namespace


def test_a_queue_confines_its_jobs_to_its_namespaces() -> None:
    queue = Queue("team", namespaces=("team-a", "shared"), default_namespace="team-a")
    assert _admit(queue, _job()) == "team-a"  # no namespace: the queue's default
    assert _admit(queue, _job("shared")) == "shared"
    with pytest.raises(InvalidInput, match=r"spec.namespace: other is not a namespace of queue team"):
        _admit(queue, _job("other"))
    assert _admit(Queue("team"), _job()) == "default"  # nothing listed: only the default namespace


def test_system_namespaces_need_an_admins_explicit_opt_in() -> None:
    with pytest.raises(InvalidInput, match="kube-system is a Kubernetes system namespace"):
        Queue("ops", namespaces=("kube-system",))
    with pytest.raises(InvalidInput, match=r"kube-system \(a Kubernetes system namespace\) is not a namespace"):
        _admit(Queue("team"), _job("kube-system"))
    ops = Queue("ops", namespaces=("kube-system",), default_namespace="kube-system", allow_system_namespaces=True)
    assert _admit(ops, _job("kube-system")) == "kube-system"


def test_the_queue_level_applies_to_every_task_template() -> None:
    privileged = _pod({"securityContext": {"privileged": True}})
    with pytest.raises(InvalidInput) as err:
        _admit(Queue("team"), _job(template=privileged))
    assert err.value.path == "spec.tasks[0].template.spec.containers[0].securityContext.privileged"
    assert _admit(Queue("team", pod_security="privileged"), _job(template=privileged)) == "default"


_SECURITY_KEYS = st.sampled_from(["privileged", "allowPrivilegeEscalation", "runAsNonRoot", "runAsUser", "procMount",
                                  "capabilities", "seccompProfile", "seLinuxOptions", "windowsOptions"])
_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-1, 2) | st.sampled_from(
    ["ALL", "SYS_ADMIN", "Unconfined", "RuntimeDefault", "spc_t", "Unmasked", "Default"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(
        ["add", "drop", "type", "user", "hostProcess"]), inner, max_size=3), max_leaves=8)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_SECURITY_KEYS, _VALUES, max_size=5), st.sampled_from(["baseline", "restricted"]))
def test_generated_security_contexts_are_judged_never_crash(context: dict[str, Any], level: str) -> None:
    template = _pod({"securityContext": context})
    try:
        check_pod_security(template, level, PATH)
    except InvalidInput as exc:
        assert exc.path.startswith(f"{PATH}.spec.containers[0]")
    else:
        assert context.get("privileged") is not True
