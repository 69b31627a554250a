"""Pod templates: bounded parsing and the Kubernetes Pod Security Standards.

The federation creates the pods a tenant describes in every member cluster, with the
agent's own credentials, so it must refuse what the cluster's Pod Security Admission would
refuse — and more strictly, because a member cluster may not enforce PSA at all. The
checks model the published standard (kubernetes.io "Pod Security Standards", the
``baseline`` and ``restricted`` profiles, policy version latest as of Kubernetes 1.31, and
``k8s.io/pod-security-admission/policy`` for the exact field lists); each refusal names
the field (``spec.tasks[0].template.spec.containers[0].securityContext.privileged``).

Levels: ``privileged`` (no check), ``baseline`` (the default: no privileged containers,
host namespaces, hostPath, host ports, added capabilities beyond the default set, unsafe
sysctls, unconfined seccomp/AppArmor, custom SELinux types or /proc mounts; an ordinary
training image running as root passes) and ``restricted`` (baseline plus non-root,
no privilege escalation, seccomp RuntimeDefault/Localhost, drop ALL, and only
ephemeral-style volume types).

Parsing is bounded: size is capped by the caller (``service/limits``), ``json.loads`` is
linear and stops at the recursion limit, and the depth is measured without recursion.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from federation.domain.errors import InvalidInput

LEVELS = ("privileged", "baseline", "restricted")
# The hard cap on a template's nesting wherever one is parsed (the service's configurable
# ``max_template_depth``, 64 by default, applies below it).
TEMPLATE_MAX_DEPTH = 128
DEFAULT_LEVEL = "baseline"

# Baseline: capabilities a container may add (the container runtime's default set).
BASELINE_CAPABILITIES = frozenset({
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
    "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
})
SAFE_SYSCTLS = frozenset({
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
})
SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})
RESTRICTED_VOLUMES = frozenset({
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret",
})
_VOLUME_SOURCE_KEYS = frozenset({"name"})
_CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
_APPARMOR_PREFIX = "container.apparmor.security.beta.kubernetes.io/"



def json_depth(doc: Any) -> int:
    """Deepest nesting of objects and arrays in a parsed document, without recursion."""
    deepest, stack = 0, [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children)
    return deepest


def parse_template(text: str, path: str, max_depth: int,
                   what: str = "a pod template: metadata and spec") -> dict[str, Any]:
    """The pod template as a JSON object; refused if deeper than ``max_depth`` or not an object.

    ``json.loads`` is linear and its C scanner stops at the interpreter's recursion limit
    (a 100k-deep document fails in microseconds with ``RecursionError``), so parsing
    first and measuring the depth of the result is bounded either way. ``what`` says what
    the object is (a workload's body is parsed the same way).
    """
    try:
        doc = json.loads(text)
    except RecursionError:
        raise InvalidInput(path, f"is nested too deep (the limit is {max_depth} levels)") from None
    except ValueError as exc:
        raise InvalidInput(path, f"is not valid JSON ({exc.__class__.__name__})") from None
    if not isinstance(doc, dict):
        raise InvalidInput(path, f"must be a JSON object ({what})")
    depth = json_depth(doc)
    if depth > max_depth:
        raise InvalidInput(path, f"is nested {depth} levels deep, over the limit of {max_depth}")
    return doc


def _one_of(value: Any, allowed: frozenset[str]) -> bool:
    """``value in allowed`` for any JSON value (a list or object is never allowed, and is not hashable)."""
    return isinstance(value, str) and value in allowed


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _containers(spec: Mapping[str, Any], path: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for kind in _CONTAINER_LISTS:
        for i, container in enumerate(_list(spec.get(kind))):
            yield f"{path}.{kind}[{i}]", _map(container)


def _refuse(path: str, level: str, what: str) -> InvalidInput:
    return InvalidInput(path, f"{what} is not allowed by the {level} Pod Security Standard of this queue")


def check_pod_security(template: Mapping[str, Any], level: str, path: str) -> None:
    """Raise ``InvalidInput`` at the first field of ``template`` the ``level`` forbids."""
    if level not in LEVELS:
        raise InvalidInput(path, f"unknown Pod Security level {level!r} (one of {', '.join(LEVELS)})")
    if level == "privileged":
        return
    spec = _map(template.get("spec"))
    spath = f"{path}.spec"
    _baseline(template, spec, spath, path)
    if level == "restricted":
        _restricted(spec, spath)


def _baseline(template: Mapping[str, Any], spec: Mapping[str, Any], spath: str, path: str) -> None:
    level = "baseline"
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(key) is True:
            raise _refuse(f"{spath}.{key}", level, f"{key}: true")
    pod_sc = _map(spec.get("securityContext"))
    _security_context(pod_sc, f"{spath}.securityContext", pod_level=True)
    for i, sysctl in enumerate(_list(pod_sc.get("sysctls"))):
        name = _map(sysctl).get("name")
        if not _one_of(name, SAFE_SYSCTLS):
            raise _refuse(f"{spath}.securityContext.sysctls[{i}].name", level, f"sysctl {name!r}")
    for i, volume in enumerate(_list(spec.get("volumes"))):
        if "hostPath" in _map(volume):
            raise _refuse(f"{spath}.volumes[{i}].hostPath", level, "a hostPath volume")
    for key, value in _map(_map(template.get("metadata")).get("annotations")).items():
        if str(key).startswith(_APPARMOR_PREFIX) and value not in ("runtime/default",) and \
                not str(value).startswith("localhost/"):
            raise _refuse(f"{path}.metadata.annotations[{key!r}]", level, f"AppArmor profile {value!r}")
    for cpath, container in _containers(spec, spath):
        sc = _map(container.get("securityContext"))
        scpath = f"{cpath}.securityContext"
        if sc.get("privileged") is True:
            raise _refuse(f"{scpath}.privileged", level, "a privileged container")
        for j, cap in enumerate(_list(_map(sc.get("capabilities")).get("add"))):
            if not _one_of(cap, BASELINE_CAPABILITIES):
                raise _refuse(f"{scpath}.capabilities.add[{j}]", level, f"adding capability {cap!r}")
        _security_context(sc, scpath, pod_level=False)
        for j, port in enumerate(_list(container.get("ports"))):
            if _map(port).get("hostPort") not in (None, 0):
                raise _refuse(f"{cpath}.ports[{j}].hostPort", level, "a host port")


def _security_context(sc: Mapping[str, Any], path: str, *, pod_level: bool) -> None:
    """The checks shared by the pod's and each container's securityContext (baseline)."""
    level = "baseline"
    if _map(sc.get("windowsOptions")).get("hostProcess") is True:
        raise _refuse(f"{path}.windowsOptions.hostProcess", level, "a Windows HostProcess pod")
    if _map(sc.get("seccompProfile")).get("type") == "Unconfined":
        raise _refuse(f"{path}.seccompProfile.type", level, "seccomp profile Unconfined")
    apparmor = _map(sc.get("appArmorProfile")).get("type")
    if apparmor not in (None, "RuntimeDefault", "Localhost"):
        raise _refuse(f"{path}.appArmorProfile.type", level, f"AppArmor profile {apparmor!r}")
    selinux = _map(sc.get("seLinuxOptions"))
    if not _one_of(selinux.get("type", ""), SELINUX_TYPES):
        raise _refuse(f"{path}.seLinuxOptions.type", level, f"SELinux type {selinux.get('type')!r}")
    for key in ("user", "role"):
        if selinux.get(key):
            raise _refuse(f"{path}.seLinuxOptions.{key}", level, f"a custom SELinux {key}")
    if not pod_level and sc.get("procMount") not in (None, "Default"):
        raise _refuse(f"{path}.procMount", level, f"procMount {sc.get('procMount')!r}")


def _restricted(spec: Mapping[str, Any], spath: str) -> None:
    level = "restricted"
    for i, volume in enumerate(_list(spec.get("volumes"))):
        kinds = set(_map(volume)) - _VOLUME_SOURCE_KEYS
        for kind in sorted(kinds - RESTRICTED_VOLUMES):
            raise _refuse(f"{spath}.volumes[{i}].{kind}", level, f"a {kind} volume")
    pod_sc = _map(spec.get("securityContext"))
    if pod_sc.get("runAsUser") == 0:
        raise _refuse(f"{spath}.securityContext.runAsUser", level, "runAsUser 0")
    pod_non_root = pod_sc.get("runAsNonRoot") is True
    pod_seccomp = _map(pod_sc.get("seccompProfile")).get("type") in ("RuntimeDefault", "Localhost")
    for cpath, container in _containers(spec, spath):
        sc = _map(container.get("securityContext"))
        scpath = f"{cpath}.securityContext"
        if sc.get("allowPrivilegeEscalation") is not False:
            raise _refuse(f"{scpath}.allowPrivilegeEscalation", level, "allowPrivilegeEscalation other than false")
        if sc.get("runAsNonRoot") is False or not (pod_non_root or sc.get("runAsNonRoot") is True):
            raise _refuse(f"{scpath}.runAsNonRoot", level, "a container not set to runAsNonRoot: true")
        if sc.get("runAsUser") == 0:
            raise _refuse(f"{scpath}.runAsUser", level, "runAsUser 0")
        seccomp = _map(sc.get("seccompProfile")).get("type")
        if (seccomp is None and not pod_seccomp) or seccomp not in (None, "RuntimeDefault", "Localhost"):
            raise _refuse(f"{scpath}.seccompProfile.type", level, "a seccomp profile other than RuntimeDefault or "
                                                                    "Localhost")
        caps = _map(sc.get("capabilities"))
        if "ALL" not in _list(caps.get("drop")):
            raise _refuse(f"{scpath}.capabilities.drop", level, "not dropping ALL capabilities")
        for j, cap in enumerate(_list(caps.get("add"))):
            if cap != "NET_BIND_SERVICE":
                raise _refuse(f"{scpath}.capabilities.add[{j}]", level, f"adding capability {cap!r}")
