"""User intent for a distributed workload, shaped like Run:ai's API body.

Nomenclature (Run:ai's): a *workload* is one distributed job; its *pods* are
the master (PyTorch) or launcher (MPI) plus ``numWorkers`` workers; each pod
is one or more ranks.  *Compute* is what one pod asks for.

Invariants:
- pure data and validation, no I/O: the CLI, the API and the server share it;
- field names are snake_case in Python and camelCase on the wire (aliases),
  so a Run:ai client's JSON body validates as is;
- every validation error names the field (pydantic's ``loc``), which the API
  turns into a 422 and the CLI into a message;
- the stored form is ``model_dump(by_alias=True)`` plus ``SPEC_VERSION``;
- numbers are finite (no inf/NaN) and sizes bounded (``MAX_WORKERS`` and
  friends), so one request's work on the server is bounded too.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Iterator
from enum import Enum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from ringleader.launch import frameworks

SPEC_VERSION = 1
NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")  # DNS-1123 label
_QUANTITY = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGTP]i?|[kmgtp]|)[Bb]?\s*$")
_FACTORS = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15}
# Upper bounds that keep the server's work per request bounded: one pod row per
# worker (plus the master) is written at admission, and a backend plans every rank.
MAX_WORKERS = 10_000
MAX_SLOTS_PER_WORKER = 1_024
MAX_GPUS_PER_POD = 1_024


def parse_quantity(text: str) -> int:
    """Bytes in a Kubernetes/Run:ai memory string: ``100M``, ``4G``, ``1.5Gi``."""
    match = _QUANTITY.match(str(text))
    if not match:
        raise ValueError(f"not a memory quantity: {text!r} (examples: 100M, 4G, 1.5Gi)")
    number, unit = float(match.group(1)), match.group(2)
    factor = (
        1024 ** ("KMGTP".index(unit[0].upper()) + 1)
        if unit.endswith("i")
        else _FACTORS[unit.lower()]
    )
    if not math.isfinite(number * factor):  # 400 digits: a float overflows to inf
        raise ValueError(f"memory quantity too large: {text!r}")
    return int(number * factor)


def check_name(name: str) -> str:
    if len(name) > 63 or not NAME_RE.match(name):
        raise ValueError(
            "must be a DNS-1123 label: lowercase letters, digits and '-', "
            "starting and ending with a letter or digit, at most 63 characters"
        )
    return name


class Framework(str, Enum):
    PYTORCH = "PyTorch"
    MPI = "MPI"
    TF = "TF"
    XGBOOST = "XGBoost"
    JAX = "JAX"


class _Runnable:
    """The ``Framework`` values the launcher's registry can run, looked up live.

    A live view, not a tuple: a framework registered later (a plug-in)
    becomes runnable without this module knowing it.
    """

    def __iter__(self) -> Iterator[Framework]:
        return (f for f in Framework if frameworks.by_spec_name(f.value) is not None)

    def __contains__(self, framework: object) -> bool:
        return (
            isinstance(framework, Framework)
            and frameworks.by_spec_name(framework.value) is not None
        )

    def __repr__(self) -> str:
        return f"RUNNABLE_FRAMEWORKS({', '.join(f.value for f in self)})"


RUNNABLE_FRAMEWORKS = _Runnable()


class _Wire(BaseModel):
    # allow_inf_nan=False: JSON's 1e999 parses as inf, which no database JSON column
    # takes back (PostgreSQL refuses it; SQLite's would read back as null).
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", allow_inf_nan=False
    )


class EnvironmentVariable(_Wire):
    name: str = Field(min_length=1)
    value: str = ""


class Compute(_Wire):
    """What one pod asks for (Run:ai's compute block)."""

    cpu_core_request: float | None = Field(default=None, gt=0)
    cpu_core_limit: float | None = Field(default=None, gt=0)
    cpu_memory_request: str | None = None
    cpu_memory_limit: str | None = None
    gpu_devices_request: int | None = Field(default=None, ge=0, le=MAX_GPUS_PER_POD)
    gpu_request_type: Literal["portion", "memory"] | None = None
    gpu_portion_request: float | None = Field(default=None, gt=0, le=1)
    gpu_portion_limit: float | None = Field(default=None, gt=0, le=1)
    gpu_memory_request: str | None = None
    gpu_memory_limit: str | None = None

    @field_validator(
        "cpu_memory_request", "cpu_memory_limit", "gpu_memory_request", "gpu_memory_limit"
    )
    @classmethod
    def _memory(cls, value: str | None) -> str | None:
        if value is not None:
            parse_quantity(value)
        return value

    @model_validator(mode="after")
    def _gpu_shape(self) -> Compute:
        if (self.gpu_devices_request or 0) > 1 and self.gpu_request_type == "memory":
            raise ValueError("gpuRequestType must be portion when gpuDevicesRequest > 1")
        return self

    @property
    def gpus(self) -> float:
        """GPU devices asked for, fractions included (0.1 = a tenth of one device)."""
        if self.gpu_portion_request is not None and (self.gpu_devices_request or 1) == 1:
            return self.gpu_portion_request
        return float(self.gpu_devices_request or 0)


class PodSpec(_Wire):
    """One pod's environment: what runs, where, with what."""

    command: str | None = None
    args: str | None = None
    image: str | None = None
    working_dir: str | None = None
    environment_variables: list[EnvironmentVariable] = Field(default_factory=list)
    compute: Compute = Field(default_factory=Compute)

    def argv(self) -> list[str]:
        """The command line: ``command`` then ``args``, split like a shell would."""
        return shlex.split(self.command or "") + shlex.split(self.args or "")

    def env(self) -> dict[str, str]:
        return {e.name: e.value for e in self.environment_variables}


class DistributedSpec(PodSpec):
    num_workers: int = Field(ge=1, le=MAX_WORKERS)
    distributed_framework: Framework = Framework.PYTORCH
    slots_per_worker: int | None = Field(default=None, ge=1, le=MAX_SLOTS_PER_WORKER)
    min_replicas: int | None = Field(default=None, ge=1, le=MAX_WORKERS)
    max_replicas: int | None = Field(default=None, ge=1, le=MAX_WORKERS)
    clean_pod_policy: Literal["None", "All", "Running"] = "Running"
    backoff_limit: int = Field(default=6, ge=0)
    preemptibility: Literal["preemptible", "non-preemptible"] | None = None
    priority_class: str | None = None
    node_pools: list[str] = Field(default_factory=list)
    interactive: bool = False
    ttl_after_finish_s: int | None = Field(default=None, ge=0)


class WorkloadSpec(_Wire):
    """The body of ``POST /api/v1/workloads/distributed``."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", allow_inf_nan=False
    )

    # Checked by check_name (for its message); the pattern is there for the OpenAPI document.
    name: str = Field(json_schema_extra={"pattern": NAME_RE.pattern, "maxLength": 63})
    project_id: str
    cluster_id: str | None = None
    use_given_name_as_prefix: bool = False
    master_spec_same_as_worker: bool = True
    master_spec: PodSpec | None = None
    spec: DistributedSpec

    _check_name = field_validator("name")(classmethod(lambda cls, v: check_name(v)))

    @property
    def framework(self) -> Framework:
        return self.spec.distributed_framework

    @property
    def registered_framework(self) -> frameworks.Framework | None:
        """This workload's framework in the launcher's registry; None: it cannot run yet."""
        return frameworks.by_spec_name(self.framework.value)

    def pod_layout(self, name: str) -> list[tuple[str, str, int]]:
        """(pod name, role, index) of every pod, the same on every backend.

        The framework's layout in the registry (``launch.frameworks``): PyTorch:
        ``NAME-master-0`` then ``NAME-worker-I``; MPI: ``NAME-launcher`` (runs
        mpirun) then the workers.  A framework nobody registered yet (it cannot
        run) is shown as master plus workers, Kubeflow's default.
        """
        registered = self.registered_framework
        layout = registered.layout if registered else frameworks.MASTER_WORKERS
        return layout.pods(name, self.spec.num_workers)

    def master(self) -> PodSpec:
        """The master's (PyTorch) or launcher's (MPI) pod spec."""
        if self.master_spec_same_as_worker or self.master_spec is None:
            return self.spec
        return self.master_spec
