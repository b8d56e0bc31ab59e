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
  friends), so one request's work on the server is bounded too;
- every string is bounded (``MAX_COMMAND_CHARS`` and friends) and storable:
  no NUL (PostgreSQL text cannot hold it, nor can a process's argv or
  environment) and no lone UTF-16 surrogate (no UTF-8 encoder writes it, so
  every response carrying it would fail);
- a command splits like a POSIX shell splits words, in linear time
  (``split_command``), and one that cannot be split is refused here;
- the variables ringleader sets for every rank (``RESERVED_ENV``) cannot be
  set by a spec;
- those checks guard what comes in; a spec read back from the database
  (``WorkloadSpec.from_stored``) skips them, so a row stored before a bound
  existed is still shown, placed and reconciled, never a 500.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from enum import Enum
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from ringleader import runai_fields as runai
from ringleader.launch import frameworks
from ringleader.runtime import modes
from ringleader.shellwords import split_command
from ringleader.textbounds import STORED, bounded, check_text, stored
from ringleader.textbounds import text as _text

SPEC_VERSION = 1
NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")  # DNS-1123 label
_QUANTITY = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGTP]i?|[kmgtp]|)[Bb]?\s*$")
_FACTORS = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15}
# Upper bounds that keep the server's work per request bounded: one pod row per
# worker (plus the master) is written at admission, and a backend plans every rank.
MAX_WORKERS = 10_000
MAX_SLOTS_PER_WORKER = 1_024
MAX_GPUS_PER_POD = 1_024
# Strings, in characters.  Linux refuses an exec ("Argument list too long") when one
# argument string is over MAX_ARG_STRLEN (128 KiB) or argv plus the environment is over
# ARG_MAX (2 MiB with the default 8 MiB stack).  A command or its args may reach a pod
# as one word (`python -c '...'`), next to the pod's variables (at most 256 KiB) and
# ringleader's own: 32 Ki characters (32 KiB of ASCII) is a quarter of MAX_ARG_STRLEN,
# far more than a real training command needs, and cheap to store, list and show (a
# 200 KB command was accepted, then failed every restart with E2BIG).
MAX_COMMAND_CHARS = 32_768  # command, and args, each
MAX_ENV_VARS = 256  # per pod spec
MAX_ENV_NAME_CHARS = 256
MAX_ENV_VALUE_CHARS = 32_768
MAX_ENV_TOTAL_CHARS = 262_144  # names and values of one pod spec together
MAX_PATH_CHARS = 4_096  # workingDir (PATH_MAX)
MAX_IMAGE_CHARS = 1_024
MAX_ID_CHARS = 255  # projectId, clusterId, priorityClass
MAX_NODE_POOLS = 64

ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# What ringleader (the launcher, the backends, the scheduler) sets in every rank's
# environment: a spec setting one would break the gang's rendezvous or escape its
# GPU binding.  One list, used by the check below and shown in docs/users.md's "Limits".
RESERVED_ENV = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "GROUP_WORLD_SIZE",
    "ROLE_NAME",
    "ROLE_RANK",
    "ROLE_WORLD_SIZE",
    "NODE_RANK",
    "NNODES",
    "MASTER_ADDR",
    "MASTER_PORT",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "SLURM_PROCID",
    "RUNAI_MPI_NUM_WORKERS",
)
RESERVED_ENV_PREFIXES = (
    "RINGLEADER_",
    "TORCHELASTIC_",
    "PET_",
    "OMPI_COMM_WORLD_",
    "PMI_",
    "PMIX_",
)
# Free-text fields: bounded and storable (``check_text``).
Storable = AfterValidator(check_text)  # for wire bodies never read back (server/schemas.py)
Identifier = _text(MAX_ID_CHARS)
Quantity = _text(64)
EnvValue = _text(MAX_ENV_VALUE_CHARS)
Image = _text(MAX_IMAGE_CHARS)
DirPath = _text(MAX_PATH_CHARS)
ProjectKey = _text(MAX_ID_CHARS, storable=False)  # never stored: one with NUL finds no project


def check_env_size(variables: list[Any]) -> None:
    """The bounds on one spec's variables (a workload's or an environment asset's): how
    many, and their names and values together (an asset's value may be None)."""
    if len(variables) > MAX_ENV_VARS:
        raise ValueError(f"at most {MAX_ENV_VARS} variables; this spec has {len(variables)}")
    total = sum(len(v.name) + len(v.value or "") for v in variables)
    if total > MAX_ENV_TOTAL_CHARS:
        raise ValueError(
            f"the variables' names and values add up to {total} characters; "
            f"at most {MAX_ENV_TOTAL_CHARS}"
        )


def check_env_name(name: str, info: ValidationInfo) -> str:
    if stored(info):
        return name
    if len(name) > MAX_ENV_NAME_CHARS:
        raise ValueError(f"at most {MAX_ENV_NAME_CHARS} characters; this one has {len(name)}")
    if not ENV_NAME_RE.match(name):
        raise ValueError(
            f"{name[:64]!r} is not a variable name: letters, digits and '_', "
            "not starting with a digit"
        )
    if name in RESERVED_ENV or name.startswith(RESERVED_ENV_PREFIXES):
        raise ValueError(
            f"{name} is set by ringleader for every rank and cannot be set by the spec "
            f"(reserved: {', '.join(RESERVED_ENV)}, and {'*, '.join(RESERVED_ENV_PREFIXES)}*)"
        )
    return name


def check_command(text: str | None, info: ValidationInfo) -> str | None:
    """A command (or args) that splits into words; ValueError naming the problem."""
    if text is not None and not stored(info):
        try:
            split_command(text)
        except ValueError as exc:
            raise ValueError(f"cannot be split into words like a shell does: {exc}") from None
    return text


Command = Annotated[
    str,
    Field(json_schema_extra={"maxLength": MAX_COMMAND_CHARS}),
    bounded(MAX_COMMAND_CHARS),
    AfterValidator(check_command),
]


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


class EnvironmentVariable(_Wire, runai.RunaiVariableFields):
    name: Annotated[
        str,
        Field(min_length=1, json_schema_extra={"maxLength": MAX_ENV_NAME_CHARS}),
        AfterValidator(check_env_name),
    ]
    value: EnvValue = ""


class Compute(_Wire, runai.RunaiComputeFields):
    """What one pod asks for (Run:ai's compute block)."""

    cpu_core_request: float | None = Field(default=None, gt=0)
    cpu_core_limit: float | None = Field(default=None, gt=0)
    cpu_memory_request: Quantity | None = None
    cpu_memory_limit: Quantity | None = None
    gpu_devices_request: int | None = Field(default=None, ge=0, le=MAX_GPUS_PER_POD)
    gpu_request_type: Literal["portion", "memory"] | None = None
    gpu_portion_request: float | None = Field(default=None, gt=0, le=1)
    gpu_portion_limit: float | None = Field(default=None, gt=0, le=1)
    gpu_memory_request: Quantity | None = None
    gpu_memory_limit: Quantity | None = None

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


class PodSpec(_Wire, runai.RunaiPodFields):
    """One pod's environment: what runs, where, with what (the master's: Run:ai's
    ``MasterSpec``; the fields ringleader ignores are in ``runai_fields``)."""

    runai_ignored = runai.POD_IGNORED | runai.MASTER_ONLY_IGNORED
    runai_defaults = runai.POD_DEFAULTS

    command: Command | None = None
    args: Command | None = None
    image: Image | None = None
    working_dir: DirPath | None = None
    environment_variables: list[EnvironmentVariable] = Field(
        default_factory=list, json_schema_extra={"maxItems": MAX_ENV_VARS}
    )
    compute: Compute = Field(default_factory=Compute)
    # Run:ai's MasterSpec has these too; a gang is scheduled, restarted and preempted
    # whole, by its workers' spec (DistributedSpec's own fields), so the master's are ignored.
    backoff_limit: int | None = Field(default=None, ge=0)
    node_pools: list[Identifier] | None = Field(
        default=None, json_schema_extra={"maxItems": MAX_NODE_POOLS}
    )
    preemptibility: Literal["preemptible", "non-preemptible"] | None = None
    priority_class: Identifier | None = None

    @field_validator("environment_variables")
    @classmethod
    def _env_size(
        cls, variables: list[EnvironmentVariable], info: ValidationInfo
    ) -> list[EnvironmentVariable]:
        if not stored(info):
            check_env_size(variables)
        return variables

    @field_validator("node_pools")
    @classmethod
    def _pool_count(cls, pools: list[str] | None, info: ValidationInfo) -> list[str] | None:
        if pools is not None and len(pools) > MAX_NODE_POOLS and not stored(info):
            raise ValueError(f"at most {MAX_NODE_POOLS} node pools; this spec has {len(pools)}")
        return pools

    # The gang's communication mode as variables (``DistributedSpec.mode_env``), set on a
    # separate master spec by ``WorkloadSpec.master`` so every pod trains the same way.
    _gang_env: dict[str, str] = PrivateAttr(default_factory=dict)

    def argv(self) -> list[str]:
        """The command line: ``command`` then ``args``, split like a shell would."""
        return split_command(self.command or "") + split_command(self.args or "")

    def env(self) -> dict[str, str]:
        return {**{e.name: e.value for e in self.environment_variables}, **self._gang_env}


class DistributedSpec(PodSpec, runai.RunaiDistributedFields):
    """The workers' spec (Run:ai's ``DistributedSpecSpec``): the gang's shape and policies."""

    runai_ignored = runai.POD_IGNORED | runai.DISTRIBUTED_IGNORED
    runai_defaults = {**runai.POD_DEFAULTS, **runai.DISTRIBUTED_DEFAULTS}

    num_workers: int = Field(ge=1, le=MAX_WORKERS)
    distributed_framework: Framework = Framework.PYTORCH
    slots_per_worker: int | None = Field(default=None, ge=1, le=MAX_SLOTS_PER_WORKER)
    min_replicas: int | None = Field(default=None, ge=1, le=MAX_WORKERS)
    max_replicas: int | None = Field(default=None, ge=1, le=MAX_WORKERS)
    clean_pod_policy: Literal["None", "All", "Running"] = "Running"
    backoff_limit: int = Field(default=6, ge=0)
    preemptibility: Literal["preemptible", "non-preemptible"] | None = None
    priority_class: Identifier | None = None
    node_pools: list[Identifier] = Field(
        default_factory=list, json_schema_extra={"maxItems": MAX_NODE_POOLS}
    )
    interactive: bool = False
    ttl_after_finish_s: int | None = Field(default=None, ge=0)
    # ringleader's own: how runtime.prepare() sends gradients (runtime/modes.py); None: exact
    grad_compression: str | None = Field(
        # A description, not schema examples: schemathesis' fuzz test (test_openapi_fuzz)
        # cannot combine its own strategies with examples.
        default=None,
        description="none, bf16, fp16 or powersgd[:RANK] (exact DDP when unset)",
    )
    sync_every: int | None = Field(default=None, ge=1, le=modes.MAX_SYNC_EVERY)

    @field_validator("grad_compression")
    @classmethod
    def _compression(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None or stored(info):
            return value
        word, rank = modes.parse_compression(value)
        return modes.CommMode(word, rank).compression_word()

    @field_validator("sync_every")
    @classmethod
    def _one_mode(cls, every: int | None, info: ValidationInfo) -> int | None:
        compression = info.data.get("grad_compression")
        if (every or 1) > 1 and compression not in (None, "none") and not stored(info):
            raise ValueError(
                f"local SGD (syncEvery {every}) sends no gradients, so it cannot be "
                f"combined with gradCompression {compression}: choose one"
            )
        return every

    def mode(self) -> modes.CommMode:
        """The gang's communication mode (exact DDP unless asked)."""
        try:
            return modes.make_mode(self.grad_compression, self.sync_every)
        except ValueError:  # a stored spec from before a bound: exact, never a 500
            return modes.CommMode()

    def mode_env(self) -> dict[str, str]:
        """The mode as every rank's variables (none for exact DDP)."""
        return modes.mode_env(self.mode())

    def env(self) -> dict[str, str]:
        return {**super().env(), **self.mode_env()}


class WorkloadSpec(_Wire):
    """The body of ``POST /api/v1/workloads/distributed``."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", allow_inf_nan=False
    )

    # Checked by check_name (for its message); the pattern is there for the OpenAPI document.
    name: str = Field(json_schema_extra={"pattern": NAME_RE.pattern, "maxLength": 63})
    project_id: ProjectKey
    cluster_id: Identifier | None = None  # this server's cluster (GET /api/v1/clusters)
    template_id: Identifier | None = None  # Run:ai's workload templates: none here (ignored)
    use_given_name_as_prefix: bool = False
    master_spec_same_as_worker: bool = True
    master_spec: PodSpec | None = None
    spec: DistributedSpec

    runai_ignored: ClassVar[frozenset[str]] = frozenset({"template_id"})

    _check_name = field_validator("name")(classmethod(lambda cls, v: check_name(v)))

    @classmethod
    def from_stored(cls, data: Any) -> WorkloadSpec:
        """A spec read back from the database: shapes and types are checked, the input
        bounds are not (a row stored before a bound existed must still be shown)."""
        return cls.model_validate(data, context=STORED)

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
        self.master_spec._gang_env = self.spec.mode_env()
        return self.master_spec
