"""Run:ai's workload spec fields that ringleader accepts but does not act on.

Why: a body written for Run:ai (by hand, by its UI's "copy as API", or by its
Python client ``runapy``, which always sends ``spec.sshAuthMountPath``) must be
accepted as it is.  Every field of Run:ai's ``DistributedSpecSpec`` and
``MasterSpec`` validates here; the ones that mean nothing without Kubernetes
(labels, tolerations, probes, most storage, security ...) are stored with the
spec, shown back, and named in one Warning event at submission
(``ignored_fields``, in ``runai_ignored``, re-exported here).  Two are applied
where pods run in an image: the image pull policy, and host-path volumes
(``HostPathVolume``, checked against the server's allow-list at submission).
A field outside Run:ai's schema is still a 422.

Nomenclature: an *ignored* field is one listed in a model's ``runai_ignored``;
it is *given* when the body sets it to something other than null, an empty
list, ``false`` where false is what happens here anyway, or Run:ai's own
default (``runai_defaults``), so that what a client always sends does not
warn on every submission.

Invariants:
- the models are mixins of ``spec.py``'s pod spec, compute and variable
  models, with the same wire conventions (camelCase, unknown fields refused,
  finite numbers);
- every string and list is bounded and storable (``textbounds``), blocks kept
  free-form (storage volumes) are bounded in depth and size, and all of it
  skips the bounds when a spec is read back from the database.
"""

from __future__ import annotations

import posixpath
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from ringleader.runai_ignored import MAX_NAMED as MAX_NAMED
from ringleader.runai_ignored import ignored_fields as ignored_fields
from ringleader.runai_ignored import ignored_message as ignored_message
from ringleader.textbounds import at_most, json_value, text

MAX_ITEMS = 256  # labels, annotations, ports, tolerations ... per pod spec
Short = text(255)
Long = text(4_096)
Url = text(4_096)
Count = Annotated[int, Field(ge=0, le=2**31 - 1)]
PortNumber = Annotated[int, Field(ge=0, le=65_535)]


def items(kind: Any) -> Any:
    """A bounded list of ``kind``."""
    return Annotated[
        list[kind], Field(json_schema_extra={"maxItems": MAX_ITEMS}), at_most(MAX_ITEMS)
    ]


class RunaiWire(BaseModel):
    """``spec.py``'s wire conventions, for the Run:ai blocks and mixins."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", allow_inf_nan=False
    )
    # Fields ringleader does not act on, and the values of them that warn nobody.
    runai_ignored: ClassVar[frozenset[str]] = frozenset()
    runai_defaults: ClassVar[dict[str, Any]] = {}


# ----- Run:ai's blocks, field for field ----------------------------------------------------


class NameValue(RunaiWire):
    """A label or an annotation."""

    name: Short | None = None
    value: Long | None = None
    exclude: bool | None = None


class ImagePullSecret(RunaiWire):
    name: Short | None = None
    user_credential: bool | None = None
    exclude: bool | None = None


class Toleration(RunaiWire):
    name: Short | None = None
    operator: Literal["Equal", "Exists"] | None = None
    key: Short | None = None
    value: Short | None = None
    effect: Literal["NoSchedule", "NoExecute", "PreferNoSchedule", "Any"] | None = None
    seconds: Count | None = None
    exclude: bool | None = None


class Port(RunaiWire):
    container: PortNumber | None = None
    service_type: Literal["LoadBalancer", "NodePort", "ClusterIP"] | None = None
    external: PortNumber | None = None
    tool_type: Short | None = None
    tool_name: Short | None = None
    name: Short | None = None
    exclude: bool | None = None


class ExposedUrl(RunaiWire):
    container: PortNumber | None = None
    url: Url | None = None
    authorization_type: (
        Literal["authenticatedUsers", "authorizedUsers", "authorizedGroups"] | None
    ) = None
    authorized_users: items(Short) | None = None
    authorized_groups: items(Short) | None = None
    tool_type: Short | None = None
    tool_name: Short | None = None
    name: Short | None = None
    exclude: bool | None = None


class RelatedUrl(RunaiWire):
    url: Url | None = None
    type: Short | None = None
    name: Short | None = None
    exclude: bool | None = None


class PodAffinity(RunaiWire):
    type: Literal["Required", "Preferred"] | None = None
    key: Short | None = None


class MatchExpression(RunaiWire):
    key: Short
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    values: items(Short) | None = None


class NodeSelectorTerm(RunaiWire):
    match_expressions: items(MatchExpression) | None = None


class NodeAffinityRequired(RunaiWire):
    node_selector_terms: items(NodeSelectorTerm) | None = None


class HttpGet(RunaiWire):
    path: Long | None = None
    port: PortNumber | None = None
    host: Short | None = None
    scheme: Literal["HTTP", "HTTPS"] | None = None


class ProbeHandler(RunaiWire):
    http_get: HttpGet | None = None


class Probe(RunaiWire):
    initial_delay_seconds: Count | None = None
    period_seconds: Count | None = None
    timeout_seconds: Count | None = None
    success_threshold: Count | None = None
    failure_threshold: Count | None = None
    handler: ProbeHandler | None = None


class Probes(RunaiWire):
    readiness: Probe | None = None


class Security(RunaiWire):
    allow_privilege_escalation: bool | None = None
    capabilities: items(Short) | None = None
    host_ipc: bool | None = None
    host_network: bool | None = None
    read_only_root_filesystem: bool | None = None
    run_as_gid: Count | None = None
    run_as_non_root: bool | None = None
    run_as_uid: Count | None = None
    seccomp_profile_type: Literal["RuntimeDefault", "Unconfined", "Localhost"] | None = None
    supplemental_groups: Short | None = None
    uid_gid_source: Literal["fromTheImage", "fromIdpToken", "custom"] | None = None


# A volume of Run:ai's storage block: free-form (its schemas are many and mean nothing
# here), bounded so that one spec stays small.
Volume = Annotated[dict[str, Any], json_value(max_depth=8, max_nodes=1_000, max_chars=4_096)]


#: Where no volume goes in a container: the kernel's and the runtime's own.
RESERVED_MOUNTS = ("/proc", "/sys", "/dev")


def checked_host_path(value: str) -> str:
    """An absolute, normal path podman's ``--volume SRC:DST:OPTS`` takes as it is."""
    if not value.startswith("/"):
        raise ValueError(f"{value!r} is not an absolute path")
    if posixpath.normpath(value) != value.rstrip("/") and value != "/":
        raise ValueError(f"{value!r} is not a normal path (no '..', '.', '//')")
    if any(ch in value for ch in ":,\0\n\r"):
        raise ValueError(f"{value!r} holds ':', ',' or a control character")
    return value


def _mount_path(value: str) -> str:
    value = checked_host_path(value)
    if value == "/" or any(value == r or value.startswith(r + "/") for r in RESERVED_MOUNTS):
        raise ValueError(f"{value!r} is the container's own (/, /proc, /sys, /dev)")
    return value


HostDir = Annotated[text(1_024), AfterValidator(checked_host_path)]
MountDir = Annotated[text(1_024), AfterValidator(_mount_path)]


class HostPathVolume(RunaiWire):
    """Run:ai's ``hostPath`` volume: a host directory mounted into each image pod at
    ``mountPath``, read-only unless ``readOnly`` is false (runapy's default), when
    the server's allow-list (``ringleader server --host-path-allow``) holds it."""

    name: Short | None = None
    path: HostDir
    mount_path: MountDir
    read_only: bool | None = None
    mount_propagation: Literal["None", "HostToContainer"] | None = None
    exclude: bool | None = None

    runai_ignored = frozenset({"mount_propagation"})
    runai_defaults = {"mount_propagation": "None"}


class Storage(RunaiWire):
    """Run:ai's storage block: host paths are mounted (image pods); the rest ignored."""

    config_map_volume: items(Volume) | None = None
    data_volume: items(Volume) | None = None
    empty_dir_volume: items(Volume) | None = None
    git: items(Volume) | None = None
    host_path: items(HostPathVolume) | None = None
    nfs: items(Volume) | None = None
    pvc: items(Volume) | None = None
    s3: items(Volume) | None = None
    secret_volume: items(Volume) | None = None

    runai_ignored = frozenset(
        {"config_map_volume", "data_volume", "empty_dir_volume", "git", "nfs", "pvc", "s3",
         "secret_volume"}
    )  # fmt: skip


class ExtendedResource(RunaiWire):
    resource: Short | None = None
    quantity: Short | None = None
    exclude: bool | None = None


class KeyReference(RunaiWire):
    """Where a variable's value would come from in Kubernetes (a secret, a config map)."""

    name: Short | None = None
    key: Short | None = None


class PodFieldReference(RunaiWire):
    path: Short | None = None


# ----- the mixins: what spec.py's models add --------------------------------------------------


class RunaiVariableFields(RunaiWire):
    """Run:ai's ``EnvironmentVariable`` beyond name and value."""

    secret: KeyReference | None = None
    config_map: KeyReference | None = None
    pod_field_ref: PodFieldReference | None = None
    user_credential: KeyReference | None = None
    exclude: bool | None = None
    description: Long | None = None  # informative: stored, never warned about

    runai_ignored = frozenset(
        {"secret", "config_map", "pod_field_ref", "user_credential", "exclude"}
    )
    runai_defaults = {"exclude": False}


class RunaiComputeFields(RunaiWire):
    """Run:ai's compute block beyond CPU, memory and GPUs."""

    extended_resources: items(ExtendedResource) | None = None
    large_shm_request: bool | None = None

    runai_ignored = frozenset({"extended_resources", "large_shm_request"})
    runai_defaults = {"large_shm_request": False}


# What both Run:ai's MasterSpec and DistributedSpecSpec have and ringleader ignores.
POD_IGNORED = frozenset(
    {
        "annotations",
        "labels",
        "auto_deletion_time_after_completion_seconds",
        "create_home_dir",
        "exposed_urls",
        "image_pull_secrets",
        "node_affinity_required",
        "node_type",
        "pod_affinity",
        "ports",
        "probes",
        "related_urls",
        "restart_policy",
        "security",
        "stdin",
        "terminate_after_preemption",
        "termination_grace_period_seconds",
        "tolerations",
        "tty",
    }
)
POD_DEFAULTS: dict[str, Any] = {"tty": False, "stdin": False, "terminate_after_preemption": False}


class RunaiPodFields(RunaiWire):
    """Run:ai's pod spec fields beyond command, image, variables and compute.

    ``category`` is kept and shown (the workload's ``category``); the rest is
    ignored (``POD_IGNORED``).
    """

    category: Short | None = None
    annotations: items(NameValue) | None = None
    labels: items(NameValue) | None = None
    auto_deletion_time_after_completion_seconds: Count | None = None
    create_home_dir: bool | None = None
    exposed_urls: items(ExposedUrl) | None = None
    image_pull_policy: Literal["Always", "Never", "IfNotPresent"] | None = None
    image_pull_secrets: items(ImagePullSecret) | None = None
    node_affinity_required: NodeAffinityRequired | None = None
    node_type: Short | None = None
    pod_affinity: PodAffinity | None = None
    ports: items(Port) | None = None
    probes: Probes | None = None
    related_urls: items(RelatedUrl) | None = None
    restart_policy: Literal["Always", "Never", "OnFailure"] | None = None
    security: Security | None = None
    stdin: bool | None = None
    storage: Storage | None = None
    terminate_after_preemption: bool | None = None
    termination_grace_period_seconds: Count | None = None
    tolerations: items(Toleration) | None = None
    tty: bool | None = None


# The master's own scheduling fields: a gang is scheduled, restarted and preempted
# whole, by the workers' spec (``spec``), so the master's are ignored.
MASTER_ONLY_IGNORED = frozenset({"backoff_limit", "node_pools", "preemptibility", "priority_class"})

# Run:ai's distributed-only fields ringleader ignores, and runapy's default for one.
DISTRIBUTED_IGNORED = frozenset({"mpi_launcher_creation_policy", "ssh_auth_mount_path"})
DISTRIBUTED_DEFAULTS: dict[str, Any] = {"ssh_auth_mount_path": "/root/.ssh"}


class RunaiDistributedFields(RunaiWire):
    """Run:ai's ``DistributedSpecSpec`` fields that are not a pod's."""

    mpi_launcher_creation_policy: Literal["AtStartup", "WaitForWorkersReady"] | None = None
    ssh_auth_mount_path: Long | None = None
