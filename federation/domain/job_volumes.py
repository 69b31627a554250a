"""Volcano Job ``spec.volumes``: PersistentVolumeClaims mounted in every container of every pod.

Modelled on volcano-sh/volcano (read, not copied):

- the type, ``VolumeSpec`` (staging/src/volcano.sh/apis/pkg/apis/batch/v1alpha1/job.go):
  ``mountPath`` required and without ':', ``volumeClaimName`` at most 253 characters,
  ``volumeClaim`` a core/v1 PersistentVolumeClaimSpec;
- the job admission webhook's ``validateIO`` (pkg/webhooks/admission/jobs/validate/util.go):
  every volume has a mountPath, no two share one, each has a ``volumeClaim`` or a
  ``volumeClaimName`` and never both (its "conflict" refusal: a name means an existing
  claim, a spec means a new one), and the name is a valid claim name (a DNS subdomain);
- the job controller (pkg/controllers/job/job_controller_actions.go ``createJobIOIfNotExist``,
  ``createPVC``): a claim is made from each ``volumeClaim`` before the pods, owned by the
  job so it goes with it; a ``volumeClaimName`` must already exist (the job stays Pending
  until it does); and ``createJobPod`` (job_controller_util.go): each claim becomes one
  pod volume mounted at its mountPath in every container (not the init containers).

Where we differ, and why (docs/design/compatibility.md): Volcano names a new claim
``<job>-pvc-<12 random characters>`` and writes that name back into the job; a job here is
immutable once submitted and may run on any member cluster, so the agent names it
``<job>-pvc-<index of the volume>`` (``made_claim_name``), which any agent, after a restart
or on another cluster, derives from the job alone. We also refuse what Volcano would pass
to a pod the member cluster then refuses or cannot start (a mountPath a container already
uses, a relative mountPath, a Block volume, which cannot be mounted as a directory), and
the claim fields we do not pass through, each by name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from federation.domain.errors import InvalidInput, require
from federation.domain.manifests_fields import check_keys, mapping, sequence, string
from federation.domain.names import dns_subdomain
from federation.domain.resources import QUANTITY_MAX, parse_quantity

MAX_JOB_VOLUMES = 16  # each is a claim the agent reads (and may make) per pass, and a mount in every container
MAX_MOUNT_PATH = 1024  # longer than any path a container runtime mounts at; bounds the strings we compare
ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")
VOLUME_MODE_FILESYSTEM = "Filesystem"
STORAGE = "storage"
POD_VOLUME_PREFIX = "federation-volume-"  # the pod volume of spec.volumes[i] is federation-volume-<i>
_KIND = re.compile(r"[A-Za-z][A-Za-z0-9]{0,62}")

_VOLUME_KEYS = ("mountPath", "volumeClaimName", "volumeClaim")
_CLAIM_KEYS = ("accessModes", "resources", "storageClassName", "volumeMode", "dataSource")
_CLAIM_REFUSED = {
    "selector": "a selector only binds the claim to an existing PersistentVolume, and dynamic provisioning "
                "ignores it; create the claim yourself and name it with volumeClaimName",
    "volumeName": "binding a new claim to a chosen PersistentVolume is not done here; create the claim yourself "
                  "and name it with volumeClaimName",
    "dataSourceRef": "use dataSource (a VolumeSnapshot or a PersistentVolumeClaim to clone)",
    "volumeAttributesClassName": "volume attributes classes are not passed through",
}


def pod_volume_name(index: int) -> str:
    """The pod volume that carries ``spec.volumes[index]``'s claim (Volcano's is
    ``<job>-<random>``; a fixed name keeps the rendered pod deterministic)."""
    return f"{POD_VOLUME_PREFIX}{index}"


def made_claim_name(job: str, index: int) -> str:
    """The claim the agent makes for ``spec.volumes[index]`` of ``job``: Volcano's
    ``<job>-pvc-<suffix>`` with the volume's index as the suffix (see the module note)."""
    return f"{job}-pvc-{index}"


@dataclass(frozen=True)
class ClaimSource:
    """``volumeClaim.dataSource`` (a TypedLocalObjectReference in the job's namespace): the
    VolumeSnapshot or claim the provisioner fills the new volume from."""

    kind: str
    name: str
    api_group: str = ""

    def __post_init__(self) -> None:
        require(bool(_KIND.fullmatch(self.kind or "")), "kind", "must be a kind (letters and digits, at most 63)")
        dns_subdomain(self.name, "name")
        if self.api_group:
            dns_subdomain(self.api_group, "apiGroup")
        else:  # Kubernetes' own rule for a claim's dataSource (core/v1 validation)
            require(self.kind == "PersistentVolumeClaim", "apiGroup", "is required unless kind is "
                    "PersistentVolumeClaim (e.g. snapshot.storage.k8s.io for a VolumeSnapshot)")


@dataclass(frozen=True)
class ClaimSpec:
    """The PersistentVolumeClaim spec a volume's claim is made with: only the fields passed
    through to the member cluster. ``storage_class`` None: the cluster's default class
    (the field is left out); "" asks for no class, as in Kubernetes."""

    access_modes: tuple[str, ...]
    storage_bytes: int
    storage_class: str | None = None
    volume_mode: str | None = None
    data_source: ClaimSource | None = None

    def __post_init__(self) -> None:
        require(bool(self.access_modes), "accessModes", "at least one access mode is required")
        for i, mode in enumerate(self.access_modes):
            require(mode in ACCESS_MODES, f"accessModes[{i}]", f"must be one of {', '.join(ACCESS_MODES)}")
            require(mode not in self.access_modes[:i], f"accessModes[{i}]", f"{mode} is listed twice")
        require("ReadWriteOncePod" not in self.access_modes or len(self.access_modes) == 1, "accessModes",
                "ReadWriteOncePod cannot be combined with other access modes (Kubernetes refuses it)")
        require(isinstance(self.storage_bytes, int) and 0 < self.storage_bytes <= QUANTITY_MAX,
                "resources.requests.storage", "must be greater than zero")
        if self.storage_class:
            dns_subdomain(self.storage_class, "storageClassName")
        require(self.volume_mode in (None, VOLUME_MODE_FILESYSTEM), "volumeMode",
                f"only {VOLUME_MODE_FILESYSTEM} is supported: the claim is mounted at mountPath in every container, "
                "and a Block volume cannot be mounted as a directory (the pod would never start)")


@dataclass(frozen=True)
class JobVolume:
    """One ``spec.volumes[]`` entry: an existing claim (``claim_name``) or a new one (``claim``)."""

    mount_path: str
    claim_name: str = ""
    claim: ClaimSpec | None = None

    def __post_init__(self) -> None:
        path = self.mount_path
        require(bool(path), "mountPath", "is required")
        require(len(path) <= MAX_MOUNT_PATH, "mountPath", f"is {len(path)} characters, over the limit of "
                f"{MAX_MOUNT_PATH}")
        require(":" not in path, "mountPath", "must not contain ':' (Volcano's VolumeSpec)")
        require(path.startswith("/"), "mountPath", "must be an absolute path: a container runtime resolves a "
                "relative one against no fixed directory")
        require(path.isprintable(), "mountPath", "must be printable characters")
        require(self.claim is not None or bool(self.claim_name), "volumeClaim",
                "either volumeClaim or volumeClaimName is required (Volcano's job admission refuses a volume "
                "with neither)")
        require(self.claim is None or not self.claim_name, "volumeClaimName",
                "conflicts with volumeClaim, as in Volcano's job admission: name an existing claim with "
                "volumeClaimName, or describe a new one with volumeClaim (the agent names it <job>-pvc-<index>)")
        if self.claim_name:
            dns_subdomain(self.claim_name, "volumeClaimName")


def check_job_volumes(job: str, volumes: tuple[JobVolume, ...], templates: Iterable[str],
                      plugin_mounts: Mapping[str, str]) -> None:
    """A job's volumes as a whole (paths are ``spec.volumes[i]...``): bounded, mountPaths
    unique (Volcano's ``validateIO``), and none the pods could not be given: a claim named
    twice (Volcano mounts it once and drops the second mountPath), a mountPath a container
    of a task template or a plugin (``plugin_mounts``: path -> plugin) already uses, or a
    template volume named as ours (the member apiserver refuses either pod)."""
    require(len(volumes) <= MAX_JOB_VOLUMES, "spec.volumes",
            f"{len(volumes)} is over the limit of {MAX_JOB_VOLUMES} volumes per job")
    if not volumes:
        return
    mounts, names = _template_mounts(templates)
    seen_paths: dict[str, int] = {}
    seen_claims: dict[str, int] = {}
    for i, volume in enumerate(volumes):
        where = f"spec.volumes[{i}]"
        path = volume.mount_path
        require(path not in seen_paths, f"{where}.mountPath",
                f"duplicated mountPath {path} (spec.volumes[{seen_paths.get(path)}] mounts there)")
        seen_paths[path] = i
        require(path not in plugin_mounts, f"{where}.mountPath",
                f"the {plugin_mounts.get(path)} plugin mounts its files at {path} in every container")
        require(path not in mounts, f"{where}.mountPath",
                f"{mounts.get(path)} already mounts a volume at {path}; Kubernetes refuses two mounts at one path")
        require(pod_volume_name(i) not in names, f"{where}",
                f"a task template has a volume named {pod_volume_name(i)}, the name this volume's claim is "
                "mounted under; rename the template's volume")
        claim = claim_name_of(job, i, volume)
        field = "volumeClaimName" if volume.claim_name else "volumeClaim"
        require(claim not in seen_claims, f"{where}.{field}",
                f"claim {claim} is already mounted by spec.volumes[{seen_claims.get(claim)}]; Volcano mounts a "
                "claim once and drops the second mountPath")
        seen_claims[claim] = i


def claim_name_of(job: str, index: int, volume: JobVolume) -> str:
    """The claim ``spec.volumes[index]`` mounts: the one it names, or the one made for it."""
    return volume.claim_name or made_claim_name(job, index)


def _template_mounts(templates: Iterable[str]) -> tuple[dict[str, str], set[str]]:
    """(mountPath -> 'tasks[k] container c', volume names) of the task templates' containers
    and pods (init containers too: Volcano mounts only in containers, but a path there is
    the user's own)."""
    mounts: dict[str, str] = {}
    names: set[str] = set()
    for k, text in enumerate(templates):
        spec = json.loads(text).get("spec") if text else None
        if not isinstance(spec, dict):
            continue
        names.update(str(v.get("name")) for v in spec.get("volumes") or () if isinstance(v, dict))
        for c in spec.get("containers") or ():
            for mount in (c.get("volumeMounts") or ()) if isinstance(c, dict) else ():
                if isinstance(mount, dict) and isinstance(mount.get("mountPath"), str):
                    mounts.setdefault(mount["mountPath"], f"tasks[{k}] container {c.get('name')!s}")
    return mounts, names


# ---------------------------------------------------------------- manifests


def parse_volumes(value: object, path: str) -> tuple[JobVolume, ...]:
    """``spec.volumes`` of a Volcano Job manifest (``path`` is ``documents[i].spec.volumes``),
    counted before any entry is read."""
    items = sequence(value, path)
    require(len(items) <= MAX_JOB_VOLUMES, path, f"{len(items)} is over the limit of {MAX_JOB_VOLUMES} volumes "
            "per job")
    out: list[JobVolume] = []
    for i, raw in enumerate(items):
        where = f"{path}[{i}]"
        item = mapping(raw, where)
        check_keys(item, where, _VOLUME_KEYS)
        claim = _claim(item["volumeClaim"], f"{where}.volumeClaim") if item.get("volumeClaim") is not None else None
        try:
            out.append(JobVolume(
                mount_path=string(item.get("mountPath", ""), f"{where}.mountPath"),
                claim_name=string(item.get("volumeClaimName", ""), f"{where}.volumeClaimName"),
                claim=claim,
            ))
        except InvalidInput as exc:
            raise exc if exc.path.startswith(where) else exc.under(where) from None
    return tuple(out)


def _claim(value: object, path: str) -> ClaimSpec:
    item = mapping(value, path)
    for key, why in _CLAIM_REFUSED.items():
        if key in item:
            raise InvalidInput(f"{path}.{key}", f"not supported: {why}")
    check_keys(item, path, _CLAIM_KEYS)
    resources = mapping(item.get("resources"), f"{path}.resources")
    if "limits" in resources:
        raise InvalidInput(f"{path}.resources.limits", "not supported: only requests.storage is passed through")
    check_keys(resources, f"{path}.resources", ("requests",))
    requests = mapping(resources.get("requests"), f"{path}.resources.requests")
    check_keys(requests, f"{path}.resources.requests", (STORAGE,))
    if STORAGE not in requests:
        raise InvalidInput(f"{path}.resources.requests.storage", "is required")
    storage = parse_quantity(STORAGE, requests[STORAGE], f"{path}.resources.requests.storage")
    modes = sequence(item.get("accessModes"), f"{path}.accessModes")
    require(len(modes) <= len(ACCESS_MODES), f"{path}.accessModes", f"at most {len(ACCESS_MODES)} access modes")
    source = _source(item["dataSource"], f"{path}.dataSource") if item.get("dataSource") is not None else None
    try:
        return ClaimSpec(
            access_modes=tuple(string(m, f"{path}.accessModes[{i}]") for i, m in enumerate(modes)),
            storage_bytes=storage,
            storage_class=string(item["storageClassName"], f"{path}.storageClassName")
            if item.get("storageClassName") is not None else None,
            volume_mode=string(item["volumeMode"], f"{path}.volumeMode") if item.get("volumeMode") is not None
            else None,
            data_source=source,
        )
    except InvalidInput as exc:
        raise exc if exc.path.startswith(path) else exc.under(path) from None


def _source(value: object, path: str) -> ClaimSource:
    item = mapping(value, path)
    check_keys(item, path, ("apiGroup", "kind", "name"))
    try:
        return ClaimSource(kind=string(item.get("kind", ""), f"{path}.kind"),
                           name=string(item.get("name", ""), f"{path}.name"),
                           api_group=string(item.get("apiGroup", ""), f"{path}.apiGroup"))
    except InvalidInput as exc:
        raise exc.under(path) from None
