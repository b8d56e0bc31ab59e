"""Wire schemas: what the REST API accepts and returns, in Run:ai's camelCase.

The request body of a workload is ``ringleader.spec.WorkloadSpec`` itself;
this module adds the responses and the smaller bodies (projects, nodes).
Users, members, access keys and tokens are in ``user_schemas``, the base
``Wire`` in ``wire_base``; both are re-exported here, so every name is still
importable from this module.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from ringleader.server.user_schemas import KEY_NAME as KEY_NAME
from ringleader.server.user_schemas import POSIX_USER as POSIX_USER
from ringleader.server.user_schemas import USER_NAME as USER_NAME
from ringleader.server.user_schemas import AccessKeyCreated as AccessKeyCreated
from ringleader.server.user_schemas import AccessKeyIn as AccessKeyIn
from ringleader.server.user_schemas import AccessKeyList as AccessKeyList
from ringleader.server.user_schemas import AccessKeyOut as AccessKeyOut
from ringleader.server.user_schemas import MemberIn as MemberIn
from ringleader.server.user_schemas import MemberOut as MemberOut
from ringleader.server.user_schemas import MembershipOut as MembershipOut
from ringleader.server.user_schemas import MeOut as MeOut
from ringleader.server.user_schemas import TokenRequest as TokenRequest
from ringleader.server.user_schemas import TokenResponse as TokenResponse
from ringleader.server.user_schemas import UserCreated as UserCreated
from ringleader.server.user_schemas import UserIn as UserIn
from ringleader.server.user_schemas import UserOut as UserOut
from ringleader.server.user_schemas import UserUpdate as UserUpdate
from ringleader.server.wire_base import NO_NUL as NO_NUL
from ringleader.server.wire_base import Wire as Wire
from ringleader.spec import Storable


class Quota(Wire):
    deserved: float = Field(0, ge=0)
    limit: float | None = Field(None, ge=0)
    over_quota_weight: float = Field(1, ge=0)


class NodePoolResources(Wire):
    node_pool: str = "default"
    gpu: Quota = Field(default_factory=Quota)
    cpu: Quota = Field(default_factory=Quota)
    memory: Quota = Field(default_factory=Quota)


class ProjectIn(Wire):
    name: str = Field(min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    resources: list[NodePoolResources] = Field(default_factory=list)


class ProjectUpdate(Wire):
    resources: list[NodePoolResources]


class ProjectOut(Wire):
    id: str
    name: str
    resources: list[dict[str, Any]]
    created_at: datetime
    updated_at: datetime | None = None
    cluster_id: str = ""  # this server's cluster (GET /api/v1/clusters)
    parent_id: str | None = None  # Run:ai's department: none here


class ProjectList(Wire):
    """Run:ai's wrapped list; ``next``: the offset of the next page, if any."""

    projects: list[ProjectOut]
    next: int | None = None


class ClusterStatus(Wire):
    state: str = "Connected"
    conditions: list[dict[str, Any]] = Field(default_factory=list)
    # Run:ai's Kubernetes flavour (vanilla, openshift, ...): none here, so left out.
    platform: dict[str, Any] | None = None


class ClusterOut(Wire):
    """This server as Run:ai's cluster (its ``DisplayedCluster``)."""

    uuid: str
    tenant_id: int
    name: str
    created_at: datetime
    domain: str
    version: str
    status: ClusterStatus
    updated_at: datetime | None = None
    last_liveness: datetime | None = None


class Container(Wire):
    name: str
    image: str
    started_at: datetime | None = None


class PodOut(Wire):
    """A pod: ringleader's fields (``status``, ``node``, ``ranks`` ...) and Run:ai's
    (``id``, ``workloadId``, ``k8sPhase``, ``nodeName``, ``containers`` ...)."""

    name: str
    role: str
    index: int
    node: str
    status: str
    exit_code: int | None
    attempt: int
    ranks: list[int]
    # The scheduler's binding: [{"index": 0, "share": 0.5, "memoryBytes": null}]
    gpus: list[dict[str, Any]] = Field(default_factory=list)
    started_at: datetime | None = None
    completed_at: datetime | None = None
    # What the OS measured (the pod's cgroup): None where unmeasured
    peak_memory_bytes: int | None = None
    cpu_seconds: float | None = None
    isolation: str = ""  # "cgroup-v1" | "cgroup-v2" | "environment" ("" before it ran)
    # Run:ai's Pod
    id: str = ""
    workload_id: str = ""
    workload_name: str = ""
    project_id: str = ""
    project_name: str = ""
    cluster_id: str = ""
    tenant_id: int = 1
    node_name: str | None = None
    priority_class_name: str = ""
    k8s_phase: str = Field("", alias="k8sPhase")
    k8s_phase_updated_at: datetime | None = Field(None, alias="k8sPhaseUpdatedAt")
    created_at: datetime | None = None
    updated_at: datetime | None = None
    containers: list[Container] = Field(default_factory=list)


class PodList(Wire):
    pods: list[PodOut]


class InvolvedObject(Wire):
    uid: str
    kind: str  # Workload | Pod
    name: str
    namespace: str


class EventOut(Wire):
    id: str
    time: datetime
    type: str
    pod_name: str | None = None
    from_phase: str | None = None
    to_phase: str | None = None
    reason: str = ""
    message: str = ""
    # Run:ai's Event
    created_at: datetime | None = None
    cluster_id: str = ""
    source: str = "ringleader"
    involved_object: InvolvedObject | None = None


class EventList(Wire):
    """Run:ai's wrapped list; ``next``: the offset of the next page, if any."""

    events: list[EventOut]
    next: int | None = None


class Condition(Wire):
    type: str
    status: str  # "True" | "False"
    reason: str | None = None
    message: str | None = None
    last_transition_time: datetime | None = None


class WorkloadOut(Wire):
    """A workload: ringleader's fields (``workloadId``, ``actualPhase``, ...: what the
    CLI reads) and Run:ai's ``Workload`` (``id``, ``phase``, ``clusterId`` ...).
    Two keep ringleader's types: ``requestedPods`` (a count) and ``phaseReason``."""

    workload_id: str
    name: str
    type: str = "distributed"
    framework: str
    project_id: str
    project_name: str
    created_by: str | None
    created_at: datetime
    started_at: datetime | None
    completed_at: datetime | None
    desired_phase: str
    actual_phase: str
    phase_reason: str
    phase_message: str
    image: str | None
    requested_pods: int
    running_pods: int
    pending_pods: int
    requested_gpus: float
    allocated_gpus: float
    nodes: list[str] = Field(default_factory=list)  # where its running pods are
    pending_reason: str | None = None  # why the scheduler has not placed it
    attempt: int
    backend: str | None = None  # the backend that runs it (local, ssh, slurm ...)
    backend_ref: str = ""  # what it runs as there, when it says (``Slurm job 42``)
    spec: dict[str, Any]
    # Run:ai's Workload
    id: str = ""
    phase: str = ""
    k8s_phase: str = Field("", alias="k8sPhase")
    phase_updated_at: datetime | None = None
    k8s_phase_updated_at: datetime | None = Field(None, alias="k8sPhaseUpdatedAt")
    updated_at: datetime | None = None
    deleted_at: datetime | None = None
    cluster_id: str = ""
    tenant_id: int = 1
    namespace: str = ""
    department_id: str = ""  # no departments here
    department_name: str = ""
    priority: int | None = None
    priority_class_name: str = ""
    preemptible: bool | None = None
    category: str = ""
    conditions: list[Condition] = Field(default_factory=list)
    source: str = "Control-plane"
    submitted_by: str | None = None
    images: list[str] = Field(default_factory=list)
    distributed_framework: str = ""
    requested_node_pools: list[str] = Field(default_factory=list)


class WorkloadCount(Wire):
    count: int


class WorkloadList(Wire):
    workloads: list[WorkloadOut]
    total: int
    offset: int
    limit: int
    # summary: each spec without command, args and variables (?view=full: whole)
    view: Literal["summary", "full"] = "full"
    next: int | None = None  # Run:ai's: the offset of the next page, if any


class Accepted(Wire):
    workload_id: str
    name: str
    desired_phase: str
    actual_phase: str


class NodeGpuOut(Wire):
    index: int
    memory_bytes: int
    model: str | None = None
    simulated: bool = False  # a stand-in: no such device (its pods run on the CPU)
    allocated: float  # the sum of the shares bound on this device (1.0 = whole)


# user@host, neither part starting with "-": ssh would read "-oProxyCommand=..." as an option.
HOST_PATTERN = (
    r"^(?:[A-Za-z0-9_.][A-Za-z0-9_.-]*@)?(?:[A-Za-z0-9_.][A-Za-z0-9_.-]*|\[[0-9A-Fa-f:.]+\])$"
)
LabelKey = Annotated[str, Field(min_length=1, max_length=63), Storable]
LabelValue = Annotated[str, Field(max_length=255), Storable]


class NodeIn(Wire):
    """An SSH host to register: probed over SSH before it is stored."""

    ssh: str = Field(min_length=1, max_length=255, pattern=HOST_PATTERN)  # user@host
    name: str | None = Field(
        None, min_length=1, max_length=255, pattern=r"^[A-Za-z0-9_.][A-Za-z0-9_.-]*$"
    )
    address: str | None = Field(
        None, min_length=1, max_length=255, pattern=r"^[A-Za-z0-9_.:][A-Za-z0-9_.:-]*$"
    )
    pool: str = Field(
        "default", min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
    )
    labels: dict[LabelKey, LabelValue] = Field(default_factory=dict, max_length=64)

    @field_validator("ssh", mode="before")
    @classmethod
    def _not_an_option(cls, value: object) -> object:
        if isinstance(value, str) and value.startswith("-"):
            raise ValueError(
                f"{value[:64]!r} starts with '-', which ssh would read as an option; "
                "give user@host or a host name"
            )
        return value


class NodeOut(Wire):
    name: str
    kind: str  # local | simulated | ssh
    simulated: bool  # pods "on" it run on the server's machine
    pool: str
    address: str
    status: str  # Ready | NotReady
    message: str
    labels: dict[str, str]
    cpu_cores: float
    memory_bytes: int
    gpus: list[NodeGpuOut]
    gpu_count: int
    allocated_gpus: float
    allocated_cpu_cores: float
    allocated_memory_bytes: int
    pods: list[str]
    ssh: str = ""  # the login target of an SSH node
    facts: dict[str, Any] = Field(default_factory=dict)  # its last probe: OS, versions
