"""The options of every submit command, defined once, and the ``WorkloadSpec`` they build.

Four commands submit a workload: ``submit-dist pytorch``, ``submit-dist mpi``,
``submit-mpi`` (Run:ai CLI v1) and ``distributed submit`` (v2).  Each names
the options it takes from ``OPTIONS`` (``@submit_options``), so a flag, its
help and its meaning are written once; the command receives one parsed
``SubmitOptions`` and ``SubmitOptions.spec`` turns it into the typed
``WorkloadSpec`` the client sends.

Invariants:
- flag names are Run:ai's: v1 says ``-g 0.5`` / ``--memory 1G``, v2 says
  ``--gpu-portion-request 0.5`` / ``--cpu-memory-request 1G``; both land in
  the same ``Compute`` block;
- the spec is validated here, by the same pydantic model the server uses,
  and a bad value is reported naming the flag the user typed (``--workers``,
  ``--processes``), not the API field, before anything is sent.
"""

from __future__ import annotations

import inspect
import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import typer
from pydantic import ValidationError

from ringleader.errors import InvalidSpec
from ringleader.spec import Framework, WorkloadSpec

EXTRA = {"allow_extra_args": True, "ignore_unknown_options": True}  # what follows -- is the command

# name -> (annotation, its Typer parameter).  A command takes a subset, in its own order.
OPTIONS: dict[str, tuple[Any, Any]] = {
    "name": (str, typer.Argument(..., help="Workload name.")),
    "framework": (
        str,
        typer.Option("PyTorch", "--framework", help="PyTorch or MPI (TF, XGBoost, JAX: not yet)."),
    ),
    "workers": (int, typer.Option(..., "--workers", help="Worker pods.")),
    "slots_per_worker": (
        int,
        typer.Option(None, "--slots-per-worker", help="MPI ranks per worker pod (default 1)."),
    ),
    # Run:ai v1 compute flags
    "gpu": (
        float,
        typer.Option(None, "-g", "--gpu", help="GPUs per pod; below 1 is a portion of one device."),
    ),
    "gpu_memory": (str, typer.Option(None, "--gpu-memory", help="GPU memory per pod, e.g. 4G.")),
    "cpu": (float, typer.Option(None, "--cpu", help="CPU cores per pod.")),
    "memory": (str, typer.Option(None, "--memory", help="CPU memory per pod, e.g. 1G.")),
    # Run:ai v2 compute flags: the API's compute block, one flag per field
    "gpu_devices_request": (int, typer.Option(None, "--gpu-devices-request")),
    "gpu_request_type": (str, typer.Option(None, "--gpu-request-type", help="portion or memory")),
    "gpu_portion_request": (float, typer.Option(None, "--gpu-portion-request")),
    "gpu_memory_request": (str, typer.Option(None, "--gpu-memory-request")),
    "cpu_core_request": (float, typer.Option(None, "--cpu-core-request")),
    "cpu_core_limit": (float, typer.Option(None, "--cpu-core-limit")),
    "cpu_memory_request": (str, typer.Option(None, "--cpu-memory-request")),
    "cpu_memory_limit": (str, typer.Option(None, "--cpu-memory-limit")),
    # the pod's environment and the gang's policies
    "env": (
        list[str],
        typer.Option([], "-e", "--environment", help="KEY=VALUE for every pod (repeatable)."),
    ),
    "working_dir": (
        str,
        typer.Option(None, "--working-dir", help="Where the command runs (default: here)."),
    ),
    "backoff_limit": (
        int,
        typer.Option(None, "--backoff-limit", help="Gang restarts after failures (default 6)."),
    ),
    "clean_pod_policy": (
        str,
        typer.Option(None, "--clean-pod-policy", help="Running (default), All or None."),
    ),
    "interactive": (
        bool,
        typer.Option(False, "--interactive", help="Keep pods for `bash`/`exec`."),
    ),
    "image": (
        str,
        typer.Option(None, "-i", "--image", help="Container image (recorded; see README)."),
    ),
    "project": (
        str,
        typer.Option(None, "-p", "--project", help="Project (default: the current one)."),
    ),
    "name_prefix": (
        bool,
        typer.Option(
            False, "--name-prefix", help="Use NAME as a prefix; a suffix makes it unique."
        ),
    ),
    # workload assets, by name (``with_assets``): every submit command takes them
    "environment_asset": (
        str,
        typer.Option(
            None,
            "--environment-asset",
            metavar="NAME",
            help="An environment asset's name (`ringleader environment list`): its image, "
            "command, args, variables and working dir, where flags give none. "
            "Example: --environment-asset pytorch-dt",
        ),
    ),
    "compute": (
        str,
        typer.Option(
            None,
            "--compute",
            metavar="NAME",
            help="A compute-resource asset's name (`ringleader compute list`): its GPUs, "
            "CPU and memory per pod, where flags give none. Example: --compute small-fraction",
        ),
    ),
}
ASSET_OPTIONS = ("environment_asset", "compute")
V1_COMPUTE = ("gpu", "gpu_memory", "cpu", "memory")
V2_COMPUTE = (
    "gpu_devices_request", "gpu_request_type", "gpu_portion_request", "gpu_memory_request",
    "cpu_core_request", "cpu_core_limit", "cpu_memory_request", "cpu_memory_limit",
)  # fmt: skip
POD = ("env", "working_dir", "backoff_limit", "clean_pod_policy", "interactive", "image")
FRAMEWORKS = {f.value.lower(): f for f in Framework}  # --framework is case-insensitive
# A spec field -> the options that set it; a validation error names the first the command has.
FIELD_OPTIONS: dict[str, tuple[str, ...]] = {
    "num_workers": ("workers",),
    "environment_variables": ("env",),
    "gpu_devices_request": ("gpu", "gpu_memory", "gpu_devices_request"),
    "gpu_portion_request": ("gpu", "gpu_portion_request"),
    "gpu_request_type": ("gpu", "gpu_memory", "gpu_request_type"),
    "gpu_memory_request": ("gpu_memory", "gpu_memory_request"),
    "cpu_core_request": ("cpu", "cpu_core_request"),
    "cpu_memory_request": ("memory", "cpu_memory_request"),
}


@dataclass
class SubmitOptions:
    """What a submit command was given; ``flags`` says how each option was spelled."""

    name: str
    workers: int
    command: list[str]
    flags: dict[str, str]
    framework: str = "PyTorch"
    slots_per_worker: int | None = None
    gpu: float | None = None
    gpu_memory: str | None = None
    cpu: float | None = None
    memory: str | None = None
    gpu_devices_request: int | None = None
    gpu_request_type: str | None = None
    gpu_portion_request: float | None = None
    gpu_memory_request: str | None = None
    cpu_core_request: float | None = None
    cpu_core_limit: float | None = None
    cpu_memory_request: str | None = None
    cpu_memory_limit: str | None = None
    env: list[str] = field(default_factory=list)
    working_dir: str | None = None
    backoff_limit: int | None = None
    clean_pod_policy: str | None = None
    interactive: bool = False
    image: str | None = None
    project: str | None = None
    name_prefix: bool = False
    environment_asset: str | None = None
    compute: str | None = None

    def spec(self, current_project: str | None) -> WorkloadSpec:
        """The workload these options describe (in ``--project``, else ``current_project``).

        Raises ``InvalidSpec`` naming the flag of the first bad value.
        """
        framework = FRAMEWORKS.get(self.framework.lower())
        if framework is None:
            raise InvalidSpec(
                f"unknown framework {self.framework!r}; choose PyTorch or MPI", "--framework"
            )
        pod: dict[str, Any] = {
            "num_workers": self.workers,
            "distributed_framework": framework,
            "image": self.image,
            "command": shlex.join(self.command) if self.command else None,
            "working_dir": self.working_dir or os.getcwd(),
            "environment_variables": self._variables(),
            "compute": self._compute(),
            "interactive": self.interactive,
            "backoff_limit": self.backoff_limit,
            "clean_pod_policy": self.clean_pod_policy,
            "slots_per_worker": self.slots_per_worker,
        }
        body = {
            "name": self.name,
            "project_id": self.project or current_project or "default",
            "use_given_name_as_prefix": self.name_prefix,
            "spec": {k: v for k, v in pod.items() if v is not None},
        }
        try:
            return WorkloadSpec.model_validate(body)
        except ValidationError as exc:
            error = exc.errors()[0]
            message = error["msg"].removeprefix("Value error, ")
            if error["loc"] == ("name",):
                message = f"the workload name {self.name!r} {message}"
            raise InvalidSpec(message, self._flag_for(error["loc"])) from None

    def _variables(self) -> list[dict[str, str]]:
        variables = []
        for pair in self.env:
            key, sep, value = pair.partition("=")
            if not sep or not key:
                raise InvalidSpec(f"expected KEY=VALUE, got {pair!r}", self._flag("env"))
            variables.append({"name": key, "value": value})
        return variables

    def _compute(self) -> dict[str, Any]:
        """Run:ai's compute block: from v1's ``-g 0.1`` (a portion) / ``-g 2`` (two
        devices) / ``--gpu-memory``, and from v2's flags as they are."""
        out: dict[str, Any] = {}
        if self.gpu is not None and self.gpu_memory is not None:
            raise InvalidSpec("give -g/--gpu or --gpu-memory, not both", "--gpu")
        if self.gpu is not None:
            if self.gpu <= 0:
                raise InvalidSpec("must be > 0", "--gpu")
            if self.gpu < 1:
                out |= {
                    "gpu_devices_request": 1,
                    "gpu_request_type": "portion",
                    "gpu_portion_request": self.gpu,
                }
            elif self.gpu != int(self.gpu):
                raise InvalidSpec("above 1, GPUs must be whole devices", "--gpu")
            else:
                out["gpu_devices_request"] = int(self.gpu)
        if self.gpu_memory is not None:
            out |= {
                "gpu_devices_request": 1,
                "gpu_request_type": "memory",
                "gpu_memory_request": self.gpu_memory,
            }
        if self.cpu is not None:
            out["cpu_core_request"] = self.cpu
        if self.memory is not None:
            out["cpu_memory_request"] = self.memory
        for name in V2_COMPUTE:
            if (value := getattr(self, name)) is not None:
                out[name] = value
        return out

    def _flag(self, option: str) -> str:
        return self.flags.get(option, option)

    def _flag_for(self, loc: tuple[int | str, ...]) -> str:
        """The flag that set the spec field at ``loc`` (``spec.num_workers`` -> ``--workers``)."""
        name = str(loc[-1]) if loc else ""
        if name == "name":
            return "NAME"
        for option in (*FIELD_OPTIONS.get(name, ()), name):
            if option in self.flags:
                return self.flags[option]
        return ".".join(str(part) for part in loc)


def submit_options(
    *names: str, **replaced: Any
) -> Callable[[Callable[[typer.Context, SubmitOptions], None]], Callable[..., None]]:
    """Give a command ``ctx``, then the named ``OPTIONS`` (``replaced`` ones by their own
    Typer parameter: another help, ``--processes`` for ``--workers``), and call it with
    the parsed ``SubmitOptions``; what follows ``--`` is the workload's command."""
    names = (*names, *(name for name in ASSET_OPTIONS if name not in names))
    chosen = {name: (OPTIONS[name][0], replaced.get(name, OPTIONS[name][1])) for name in names}
    keyword = inspect.Parameter.KEYWORD_ONLY
    parameters = [inspect.Parameter("ctx", keyword, annotation=typer.Context)]
    parameters += [
        inspect.Parameter(name, keyword, default=info, annotation=kind)
        for name, (kind, info) in chosen.items()
    ]
    spelled = {name: _spelling(info) for name, (_, info) in chosen.items()}

    def decorate(fn: Callable[[typer.Context, SubmitOptions], None]) -> Callable[..., None]:
        def command(ctx: typer.Context, **values: Any) -> None:
            fn(ctx, SubmitOptions(command=list(ctx.args), flags=spelled, **values))

        command.__name__ = fn.__name__
        command.__qualname__ = fn.__qualname__
        command.__doc__ = fn.__doc__
        command.__module__ = fn.__module__
        command.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in parameters}
        return command

    return decorate


def _spelling(info: Any) -> str:
    """How an option is written in messages: ``-e/--environment``; an argument by its name."""
    decls = [d for d in getattr(info, "param_decls", None) or () if d.startswith("-")]
    return "/".join(decls) if decls else "NAME"


def with_assets(spec: WorkloadSpec, options: SubmitOptions, client: Any) -> WorkloadSpec:
    """``spec`` with the values of the assets ``--environment-asset`` and ``--compute``
    name, looked up in the spec's project (its own asset before everyone's), where the
    user's own flags gave none: flags win. An unknown name is an error naming the flag.
    ``client``: a ``ringleader.client.Client``."""
    if not (options.environment_asset or options.compute):
        return spec
    pod = spec.spec.model_dump(exclude_unset=True)
    project = spec.project_id
    if options.environment_asset:
        environment = _asset(
            client.find_environment, "environment", options.environment_asset, project,
            options._flag("environment_asset"),
        )  # fmt: skip
        pod = environment.spec.fill(pod, working_dir_given=options.working_dir is not None)
    if options.compute:
        resource = _asset(
            client.find_compute_resource, "compute resource", options.compute, project,
            options._flag("compute"),
        )  # fmt: skip
        pod["compute"] = resource.spec.fill(pod.get("compute") or {})
    body = {**spec.model_dump(exclude_unset=True), "spec": pod}
    try:
        return WorkloadSpec.model_validate(body)
    except ValidationError as exc:
        error = exc.errors()[0]
        message = error["msg"].removeprefix("Value error, ")
        flag = options._flag_for(error["loc"])
        raise InvalidSpec(f"{message} (with the assets' values)", flag) from None


def _asset(find: Callable[[str, str], Any], title: str, name: str, project: str, flag: str) -> Any:
    from ringleader.errors import NotFound

    try:
        return find(name, project)
    except NotFound as exc:
        if getattr(exc, "kind", None) != title:  # the project itself, as a submit would say
            raise
        command = "environment" if title == "environment" else "compute"
        raise InvalidSpec(
            f"no {title} named {name!r} in project {project!r} nor for every project "
            f"(see `ringleader {command} list -p {project}`)",
            flag,
        ) from None
