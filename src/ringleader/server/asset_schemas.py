"""Wire schemas of Run:ai's workload assets: environments and compute resources.

Nomenclature (Run:ai's): an *asset* is a named, reusable building block of
workloads, ``{"meta": {...}, "spec": {...}}``. An *environment* holds what
runs (image, command, args, variables, working directory); a *compute
resource* holds what one pod asks for (GPU devices/portion/memory, CPU cores,
CPU memory). ``meta.scope`` says who sees it: one ``project`` (with
``projectId``) or everyone (``tenant``, or ``cluster``: this server is one
cluster).

Invariants:
- field names and shapes are Run:ai's (``runapy``'s ``EnvironmentCreationRequest``,
  ``ComputeCreationRequest``, ``EnvironmentAsset``...), so its bodies validate as
  they are; a field outside Run:ai's schema is a 422 naming it;
- the fields ringleader applies are bounded and checked exactly as in a
  workload's spec (``ringleader.spec``), since an asset's values end up in one;
  Run:ai fields that mean nothing here (``runAsUid``, ``probes``,
  ``largeShmRequest`` ...) are accepted, bounded, stored and shown, never applied
  (``IGNORED_ENVIRONMENT_FIELDS``, ``IGNORED_COMPUTE_FIELDS``);
- ``fill`` is how an asset gives a workload's pod spec what the user's own flags
  left unset: pure, no I/O, used by the CLI (``cli/submit_assets.with_assets``).

Compute resources' own schemas are in ``compute_asset_schemas`` (this module holds
what every asset shares, and environments).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from ringleader.server.schemas import Wire
from ringleader.spec import STORED as STORED  # re-exported: how clients read an asset back
from ringleader.spec import (
    Command,
    DirPath,
    EnvValue,
    Identifier,
    Image,
    _text,
    check_text,
    stored,
)
from ringleader.spec_limits import (
    MAX_ENV_VARS,
    MAX_ID_CHARS,
    check_env_name,
    check_env_size,
    check_name,
)

MAX_DESCRIPTION_CHARS = 250  # Run:ai's AssetDescription
MAX_EXTRA_JSON_CHARS = 16_384  # probes, connections: accepted and stored, never applied
MAX_LIST_ITEMS = 64  # capabilities, connections, extendedResources
# Assets of one kind in one project (or everyone's): a list answers with whole specs.
MAX_ASSETS_PER_SCOPE = 200

Scope = Literal["project", "tenant", "cluster"]
SCOPES: tuple[str, ...] = ("project", "tenant", "cluster")
Description = _text(MAX_DESCRIPTION_CHARS)
ShortText = _text(MAX_ID_CHARS)


class _AssetWire(BaseModel):
    """camelCase on the wire, unknown fields refused, no inf/NaN (as ``spec._Wire``)."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", allow_inf_nan=False
    )


def _bounded_json(value: Any, info: ValidationInfo) -> Any:
    """Free-form JSON that is stored and shown but never applied: at most
    ``MAX_EXTRA_JSON_CHARS`` once written out, and every string in it storable."""
    if value is None or stored(info):
        return value
    size = len(json.dumps(value, ensure_ascii=False))
    if size > MAX_EXTRA_JSON_CHARS:
        raise ValueError(f"at most {MAX_EXTRA_JSON_CHARS} characters of JSON; this has {size}")

    def walk(node: Any) -> None:
        if isinstance(node, str):
            check_text(node)
        elif isinstance(node, dict):
            for key, item in node.items():
                check_text(key)
                walk(item)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(value)
    return value


FreeJSON = Annotated[Any, AfterValidator(_bounded_json)]


# ----- meta ----------------------------------------------------------------------


class WorkloadSupportedTypes(_AssetWire):
    inference: bool | None = None
    workspace: bool | None = None
    training: bool | None = None
    distributed: bool | None = None
    dist_framework: Literal["MPI", "PyTorch", "TF", "XGBoost", "JAX"] | None = None


AssetName = Annotated[
    str,
    Field(json_schema_extra={"pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 63}),
    AfterValidator(check_name),
]


class AssetUpdateMeta(_AssetWire):
    """Run:ai's ``AssetUpdateRequest``: what a PUT may change besides the spec."""

    name: AssetName
    description: Description | None = None


class AssetCreationMeta(AssetUpdateMeta):
    """Run:ai's ``AssetCreationRequest``: name, scope and where it belongs."""

    scope: Literal["project", "tenant", "cluster", "department", "system"]
    # Run:ai's project ids are integers, ours short strings: either, or a project's name.
    project_id: int | ShortText | None = None
    cluster_id: Identifier | None = None
    department_id: Identifier | None = None
    auto_delete: bool | None = None
    workload_supported_types: WorkloadSupportedTypes | None = None
    private: bool | None = None

    @model_validator(mode="before")
    @classmethod
    def _project_id_present(cls, data: Any) -> Any:
        """A missing projectId is checked as null, so its error names it as sent."""
        if isinstance(data, dict) and "projectId" not in data and "project_id" not in data:
            return {**data, "projectId": None}
        return data

    @field_validator("scope")
    @classmethod
    def _scope_here(cls, scope: str) -> str:
        if scope in ("department", "system"):
            raise ValueError(
                f"this server has no {scope} scope; give project (with projectId) "
                "or tenant (every project sees it)"
            )
        return scope

    @field_validator("project_id")
    @classmethod
    def _project_for_project_scope(cls, key: int | str | None, info: ValidationInfo) -> Any:
        scope = info.data.get("scope")  # absent when the scope itself was refused
        if scope == "project" and key is None:
            raise ValueError("a project-scoped asset needs projectId")
        if scope in ("tenant", "cluster") and key is not None:
            raise ValueError(f"only a project-scoped asset has one, not a {scope} one")
        return key

    @field_validator("department_id")
    @classmethod
    def _no_departments(cls, key: str | None) -> None:
        if key is not None:
            raise ValueError("this server has no departments")
        return None

    def extra_meta(self) -> dict[str, Any]:
        """The meta fields stored as given, not acted on."""
        fields = ("auto_delete", "workload_supported_types", "private")
        return self.model_dump(mode="json", by_alias=True, exclude_none=True, include=set(fields))


class AssetMetaOut(Wire):
    """Run:ai's ``AssetMeta``: the creation fields plus the read-only ones."""

    id: str
    kind: Literal["environment", "compute"]
    name: str
    description: str | None = None
    scope: str
    project_id: str | None = None
    project_name: str | None = None
    cluster_id: str | None = None
    department_id: str | None = None
    auto_delete: bool | None = None
    workload_supported_types: dict[str, Any] | None = None
    private: bool | None = None
    created_by: str
    created_at: datetime
    updated_by: str
    updated_at: datetime
    update_count: int = 0


class AssetDeleted(Wire):
    """Run:ai's answer to a DELETE (202)."""

    code: int = 202
    message: str


# ----- environment ---------------------------------------------------------------


class EnvironmentVariableOfAsset(_AssetWire):
    """One variable: a plain ``value`` (secrets, config maps and pod fields have no
    meaning on this server and are refused, naming the field)."""

    name: Annotated[str, Field(min_length=1), AfterValidator(check_env_name)]
    value: EnvValue | None = None
    description: Description | None = None
    exclude: bool | None = None  # Run:ai's policy defaults: true drops it from workloads
    credential: dict[str, Any] | None = None
    config_map: dict[str, Any] | None = None
    pod_field_ref: dict[str, Any] | None = None

    @field_validator("credential", "config_map", "pod_field_ref")
    @classmethod
    def _no_references(cls, value: dict[str, Any] | None, info: ValidationInfo) -> Any:
        if value is not None and not stored(info):
            raise ValueError(
                "this server has no secrets, config maps or pod fields to read "
                "a variable from; give its value"
            )
        return value


class EnvironmentAssetSpec(_AssetWire):
    """Run:ai's ``EnvironmentAssetSpec``: image and its pull policy, command, args,
    variables, working directory are applied; the rest is accepted and stored (see
    the module doc)."""

    command: Command | None = None
    args: Command | None = None
    image: Image | None = None
    image_pull_policy: Literal["Always", "Never", "IfNotPresent"] | None = None
    working_dir: DirPath | None = None
    environment_variables: list[EnvironmentVariableOfAsset] = Field(
        default_factory=list, json_schema_extra={"maxItems": MAX_ENV_VARS}
    )
    # Accepted, stored and shown, never applied (IGNORED_ENVIRONMENT_FIELDS).
    run_as_gid: int | None = Field(default=None, ge=0, le=2**32 - 1)
    run_as_uid: int | None = Field(default=None, ge=0, le=2**32 - 1)
    supplemental_groups: ShortText | None = None
    allow_privilege_escalation: bool | None = None
    capabilities: list[ShortText] | None = Field(default=None, max_length=MAX_LIST_ITEMS)
    create_home_dir: bool | None = None
    host_ipc: bool | None = None
    host_network: bool | None = None
    probes: FreeJSON = None
    read_only_root_filesystem: bool | None = None
    run_as_non_root: bool | None = None
    seccomp_profile_type: Literal["RuntimeDefault", "Localhost", "Unconfined"] | None = None
    stdin: bool | None = None
    tty: bool | None = None
    uid_gid_source: Literal["fromTheImage", "fromIdpToken", "custom"] | None = None
    connections: FreeJSON = None
    override_uid_gid_in_workspace: bool | None = None

    @field_validator("environment_variables")
    @classmethod
    def _env_size(
        cls, variables: list[EnvironmentVariableOfAsset], info: ValidationInfo
    ) -> list[EnvironmentVariableOfAsset]:
        if stored(info):
            return variables
        check_env_size(variables)
        names = [v.name for v in variables]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"{', '.join(twice)} given more than once")
        return variables

    @field_validator("connections")
    @classmethod
    def _connections_are_a_list(cls, value: Any) -> Any:
        if value is not None and (not isinstance(value, list) or len(value) > MAX_LIST_ITEMS):
            raise ValueError(f"a list of at most {MAX_LIST_ITEMS} connections")
        return value

    @field_validator("probes")
    @classmethod
    def _probes_are_an_object(cls, value: Any) -> Any:
        if value is not None and not isinstance(value, dict):
            raise ValueError("an object (Run:ai's Probes)")
        return value

    def fill(self, pod: dict[str, Any], *, working_dir_given: bool) -> dict[str, Any]:
        """``pod`` (a ``DistributedSpec``'s fields, by their Python names) with this
        environment's values where the user gave none.

        A command given by the user replaces the environment's command and args
        together (Kubernetes' rule for a container's command); args alone keep its
        command. Variables the user set win; the environment's others come first.
        """
        out = dict(pod)
        if out.get("image") is None and self.image is not None:
            out["image"] = self.image
        if out.get("image_pull_policy") is None and self.image_pull_policy is not None:
            out["image_pull_policy"] = self.image_pull_policy
        if out.get("command") is None:
            if self.command is not None:
                out["command"] = self.command
            if out.get("args") is None and self.args is not None:
                out["args"] = self.args
        if not working_dir_given and self.working_dir is not None:
            out["working_dir"] = self.working_dir
        given = list(out.get("environment_variables") or [])
        names = {_variable_name(v) for v in given}
        inherited = [
            {"name": v.name, "value": v.value or ""}
            for v in self.environment_variables
            if not v.exclude and v.name not in names
        ]
        if inherited:
            out["environment_variables"] = inherited + given
        return out


def _variable_name(variable: Any) -> str:
    return variable["name"] if isinstance(variable, dict) else variable.name


IGNORED_ENVIRONMENT_FIELDS = tuple(
    EnvironmentAssetSpec.model_fields[name].alias or name
    for name in EnvironmentAssetSpec.model_fields
    if name
    not in {"command", "args", "image", "image_pull_policy", "working_dir", "environment_variables"}
)


class EnvironmentCreationRequest(_AssetWire):
    meta: AssetCreationMeta
    spec: EnvironmentAssetSpec


class EnvironmentUpdateRequest(_AssetWire):
    meta: AssetUpdateMeta
    spec: EnvironmentAssetSpec


class EnvironmentAsset(Wire):
    meta: AssetMetaOut
    spec: EnvironmentAssetSpec


class EnvironmentListResponse(Wire):
    entries: list[EnvironmentAsset]
