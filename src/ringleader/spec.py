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
  friends, in ``spec_limits`` with the checks the API's asset schemas, the web
  UI and the CLI share), so one request's work on the server is bounded too;
- every string is bounded (``MAX_COMMAND_CHARS`` and friends) and storable:
  no NUL (PostgreSQL text cannot hold it, nor can a process's argv or
  environment) and no lone UTF-16 surrogate (no UTF-8 encoder writes it, so
  every response carrying it would fail);
- a command splits like a POSIX shell splits words, in linear time
  (``split_command``), and one that cannot be split is refused here;
- the variables ringleader sets for every rank (``spec_limits.RESERVED_ENV``)
  cannot be set by a spec;
- those checks guard what comes in; a spec read back from the database
  (``WorkloadSpec.from_stored``) skips them, so a row stored before a bound
  existed is still shown, placed and reconciled, never a 500.
"""

from __future__ import annotations

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
from ringleader.spec_limits import (
    MAX_COMMAND_CHARS,
    MAX_ENV_NAME_CHARS,
    MAX_ENV_VALUE_CHARS,
    MAX_ENV_VARS,
    MAX_GPUS_PER_POD,
    MAX_ID_CHARS,
    MAX_IMAGE_CHARS,
    MAX_NODE_POOLS,
    MAX_PATH_CHARS,
    MAX_SLOTS_PER_WORKER,
    MAX_WORKERS,
    NAME_RE,
    check_command,
    check_env_name,
    check_env_size,
    check_name,
    parse_quantity,
)
from ringleader.textbounds import STORED, bounded, check_text, stored
from ringleader.textbounds import text as _text

SPEC_VERSION = 1

# Free-text fields: bounded and storable (``check_text``).
Storable = AfterValidator(check_text)  # for wire bodies never read back (server/schemas.py)
Identifier = _text(MAX_ID_CHARS)
Quantity = _text(64)
EnvValue = _text(MAX_ENV_VALUE_CHARS)
Image = _text(MAX_IMAGE_CHARS)
DirPath = _text(MAX_PATH_CHARS)
ProjectKey = _text(MAX_ID_CHARS, storable=False)  # never stored: one with NUL finds no project

Command = Annotated[
    str,
    Field(json_schema_extra={"maxLength": MAX_COMMAND_CHARS}),
    bounded(MAX_COMMAND_CHARS),
    AfterValidator(check_command),
]


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
