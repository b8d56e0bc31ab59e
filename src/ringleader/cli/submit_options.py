"""The options of every submit command, defined once, and the ``WorkloadSpec`` they build.

Four commands submit a workload: ``submit-dist pytorch``, ``submit-dist mpi``,
``submit-mpi`` (Run:ai CLI v1) and ``distributed submit`` (v2).  Each names
the options it takes from ``OPTIONS`` (``cli/submit_flags.py``) with
``@submit_options``, so a flag, its help and its meaning are written once;
the command receives one parsed ``SubmitOptions`` and ``SubmitOptions.spec``
turns it into the typed ``WorkloadSpec`` the client sends.  Where the options end and the workload's
command begins is ``cli/submit_argv.py``'s job; the assets that ``--environment-asset``
and ``--compute`` name are filled in by ``cli/submit_assets.py``.

Invariants:
- flag names and meanings are Run:ai's: v1 says ``-g 0.5`` / ``--memory 1G``,
  v2 says ``--gpu-portion-request 0.5`` / ``--cpu-memory-request 1G``; both
  land in the same ``Compute`` block;
- the command: ``--command CMD --args A --args B`` (Run:ai's older form, each
  ``--args`` one word), or ``--command -- CMD ARGS`` (its current form: CMD
  replaces the image's entrypoint); without ``--command``, what follows ``--``
  is the command, or with ``-i IMAGE`` the arguments of the image's own command;
- the spec is validated here, by the same pydantic model the server uses, and
  a bad value is reported naming the flag the user typed (``--processes``,
  ``-g``), not the API field, before anything is sent; the server's own field
  errors are named the same way (``flag_error``).
"""

from __future__ import annotations

import inspect
import os
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import typer
from pydantic import ValidationError
from pydantic.alias_generators import to_snake

from ringleader.cli.submit_argv import ARGV_KEY, SubmitArgv, SubmitCommand
from ringleader.cli.submit_flags import ASSET_OPTIONS, FIELD_OPTIONS, OPTIONS, V2_COMPUTE
from ringleader.errors import InvalidSpec
from ringleader.shellwords import split_command
from ringleader.spec import RUNNABLE_FRAMEWORKS, Framework, WorkloadSpec

FRAMEWORKS = {f.value.lower(): f for f in Framework}  # --framework is case-insensitive
COMMAND_WORDS = "COMMAND"  # how an error names the words after --


@dataclass
class SubmitOptions:
    """What a submit command was given; ``flags`` says how each option was spelled."""

    workers: int
    flags: dict[str, str]  # option -> its flag as typed (else its long flag)
    typed_options: set[str] = field(default_factory=set)  # the options the user typed
    name: str | None = None
    command_words: list[str] = field(default_factory=list)  # after -- (or the first extra word)
    entrypoint: bool = False  # a bare --command: the words replace the image's command
    name_as_prefix: bool = False  # a bare --name-prefix: NAME is the prefix
    framework: str = "PyTorch"
    slots_per_worker: int | None = None
    command: list[str] = field(default_factory=list)  # --command CMD (old form)
    args: list[str] = field(default_factory=list)
    gpu: float | None = None
    gpu_memory: str | None = None
    cpu: float | None = None
    cpu_limit: float | None = None
    memory: str | None = None
    memory_limit: str | None = None
    gpu_devices_request: int | None = None
    gpu_request_type: str | None = None
    gpu_portion_request: float | None = None
    gpu_portion_limit: float | None = None
    gpu_memory_request: str | None = None
    gpu_memory_limit: str | None = None
    cpu_core_request: float | None = None
    cpu_core_limit: float | None = None
    cpu_memory_request: str | None = None
    cpu_memory_limit: str | None = None
    env: list[str] = field(default_factory=list)
    working_dir: str | None = None
    backoff_limit: int | None = None
    clean_pod_policy: str | None = None
    grad_compression: str | None = None
    sync_every: int | None = None
    interactive: bool = False
    image: str | None = None
    image_pull_policy: str | None = None
    volume: list[str] = field(default_factory=list)
    host_path: list[str] = field(default_factory=list)
    preemptible: bool = False
    preemptibility: str | None = None
    priority: str | None = None
    node_pools: list[str] = field(default_factory=list)
    project: str | None = None
    name_prefix: str | None = None
    environment_asset: str | None = None
    compute: str | None = None

    def spec(self, current_project: str | None) -> WorkloadSpec:
        """The workload these options describe (in ``--project``, else ``current_project``).

        Raises ``InvalidSpec`` naming the flag of the first bad value.
        """
        framework = FRAMEWORKS.get(self.framework.lower())
        if framework is None or framework not in RUNNABLE_FRAMEWORKS:
            choices = ", ".join(f.value for f in RUNNABLE_FRAMEWORKS)
            raise InvalidSpec(
                f"unknown framework {self.framework!r}; choose one of {choices}",
                self.flag("framework"),
            )
        name, as_prefix = self._name()
        command, args = self._command_line()
        pod: dict[str, Any] = {
            "num_workers": self.workers,
            "distributed_framework": framework,
            "image": self.image,
            "image_pull_policy": self.image_pull_policy,
            "command": command,
            "args": args,
            "working_dir": self.working_dir or os.getcwd(),
            "environment_variables": self._variables(),
            "compute": self._compute(),
            "interactive": self.interactive,
            "backoff_limit": self.backoff_limit,
            "clean_pod_policy": self.clean_pod_policy,
            "slots_per_worker": self.slots_per_worker,
            "grad_compression": self.grad_compression,
            "sync_every": self.sync_every,
            "storage": self._storage(),
            **self._scheduling(),
        }
        body = {
            "name": name,
            "project_id": self.project or current_project or "default",
            "use_given_name_as_prefix": as_prefix,
            "spec": {k: v for k, v in pod.items() if v is not None},
        }
        try:
            return WorkloadSpec.model_validate(body)
        except ValidationError as exc:
            error = exc.errors()[0]
            message = error["msg"].removeprefix("Value error, ")
            if error["loc"] == ("name",):
                message = f"the workload name {name!r} {message}"
            raise InvalidSpec(message, self.flag_for(error["loc"])) from None

    @property
    def command_replaces_image_command(self) -> bool:
        """True when the words after ``--`` are arguments of the image's own command."""
        return bool(self.image and self.command_words and not self.command and not self.entrypoint)

    def _name(self) -> tuple[str, bool]:
        """The name to send and whether it is a prefix (Run:ai's ``--name-prefix``)."""
        if self.name_prefix is not None:
            if self.name:
                raise InvalidSpec(
                    f"give NAME ({self.name!r}) or a prefix, not both", self.flag("name_prefix")
                )
            return self.name_prefix, True
        if not self.name:
            raise InvalidSpec("missing: name the workload, or give --name-prefix PREFIX", "NAME")
        return self.name, self.name_as_prefix

    def _command_line(self) -> tuple[str | None, str | None]:
        """The spec's ``command`` and ``args`` (shell words), by the rules of the docstring."""
        words = self.command_words
        if self.command:  # --command CMD [--args A ...]: Run:ai's older form
            first: list[str] = []
            for value in self.command:
                try:
                    first += split_command(value)
                except ValueError as exc:
                    raise InvalidSpec(str(exc), self.flag("command")) from None
            if not first:
                raise InvalidSpec("names no command (e.g. --command=python)", self.flag("command"))
            command, args = first, [*self.args, *words]
        elif self.entrypoint:  # --command -- CMD ARGS: Run:ai's current form
            if not words:
                raise InvalidSpec(
                    "the command goes after it: --command -- python train.py",
                    self.flag("command"),
                )
            command, args = words, list(self.args)
        elif self.image:  # what follows -- goes to the image's own command, as in Run:ai
            command, args = [], [*self.args, *words]
        else:  # no image, no entrypoint: what follows -- is the command
            command, args = words, list(self.args)
        return (shlex.join(command) if command else None), (shlex.join(args) if args else None)

    def _variables(self) -> list[dict[str, str]]:
        variables = []
        for pair in self.env:
            key, sep, value = pair.partition("=")
            if not sep or not key:
                raise InvalidSpec(f"expected KEY=VALUE, got {pair!r}", self.flag("env"))
            variables.append({"name": key, "value": value})
        return variables

    def _storage(self) -> dict[str, Any] | None:
        """Run:ai's ``storage.hostPath`` from ``-v SRC:DST[:ro|:rw]`` (read-write unless
        ``:ro``, Docker's rule) and ``--host-path path=SRC,mount=DST[,readwrite]``
        (read-only unless ``readwrite``, Run:ai's)."""
        volumes: list[dict[str, Any]] = []
        for value in self.volume:
            parts = value.split(":")
            if (
                len(parts) not in (2, 3)
                or not all(parts[:2])
                or parts[2:] not in ([], ["ro"], ["rw"])
            ):
                raise InvalidSpec(
                    f"expected SRC:DST or SRC:DST:ro, got {value!r}", self.flag("volume")
                )
            volumes.append(
                {"path": parts[0], "mount_path": parts[1], "read_only": parts[2:] == ["ro"]}
            )
        for value in self.host_path:
            volumes.append(self._host_path(value))
        return {"host_path": volumes} if volumes else None

    def _host_path(self, value: str) -> dict[str, Any]:
        """One ``--host-path path=SRC,mount=DST[,readwrite][,mount-propagation=P]``."""
        flag, keys = self.flag("host_path"), {"path": "path", "mount": "mount_path"}
        out: dict[str, Any] = {"read_only": True}
        for item in value.split(","):
            key, sep, given = item.partition("=")
            if not sep and key == "readwrite":
                out["read_only"] = False
            elif sep and key in keys and given:
                out[keys[key]] = given
            elif sep and key == "mount-propagation" and given:
                out["mount_propagation"] = given
            else:
                raise InvalidSpec(
                    f"unknown part {item!r} of {value!r}; expected path=SRC,mount=DST"
                    "[,readwrite][,mount-propagation=None|HostToContainer]",
                    flag,
                )
        if "path" not in out or "mount_path" not in out:
            raise InvalidSpec(f"{value!r} needs path=SRC and mount=DST", flag)
        return out

    def _compute(self) -> dict[str, Any]:
        """Run:ai's compute block: from v1's ``-g 0.1`` (a portion) / ``-g 2`` (two
        devices) / ``-g 0`` (none) / ``--gpu-memory``, and from v2's flags as they are."""
        out: dict[str, Any] = {}
        gpu_flag = self.flag("gpu")
        if self.gpu is not None and self.gpu_memory is not None:
            raise InvalidSpec(f"give {gpu_flag} or --gpu-memory, not both", gpu_flag)
        if self.gpu is not None:
            if self.gpu < 0:
                raise InvalidSpec("must be 0 (no GPU) or more", gpu_flag)
            if 0 < self.gpu < 1:
                out |= {
                    "gpu_devices_request": 1,
                    "gpu_request_type": "portion",
                    "gpu_portion_request": self.gpu,
                }
            elif self.gpu != int(self.gpu):
                raise InvalidSpec("above 1, GPUs are whole devices (2, not 1.5)", gpu_flag)
            else:
                out["gpu_devices_request"] = int(self.gpu)
        if self.gpu_memory is not None:
            out |= {
                "gpu_devices_request": 1,
                "gpu_request_type": "memory",
                "gpu_memory_request": self.gpu_memory,
            }
        v1 = {
            "cpu_core_request": self.cpu,
            "cpu_core_limit": self.cpu_limit,
            "cpu_memory_request": self.memory,
            "cpu_memory_limit": self.memory_limit,
        }
        out |= {key: value for key, value in v1.items() if value is not None}
        for name in V2_COMPUTE:
            if (value := getattr(self, name)) is not None:
                out[name] = value
        return out

    def _scheduling(self) -> dict[str, Any]:
        """Priority class, preemptibility and node pools, with Run:ai's defaults."""
        from ringleader.sched.model import PRIORITY_CLASSES

        out: dict[str, Any] = {}
        if self.priority is not None:
            if self.priority not in PRIORITY_CLASSES:
                choices = ", ".join(f"{k} ({v})" for k, v in PRIORITY_CLASSES.items())
                raise InvalidSpec(
                    f"unknown priority class {self.priority!r}; choose one of {choices}",
                    self.flag("priority"),
                )
            out["priority_class"] = self.priority
        if self.preemptible:
            out["preemptibility"] = "preemptible"
            if self.interactive and self.priority is None:  # Run:ai's interactive-preemptible
                out["priority_class"] = "interactive-preemptible"
        if self.preemptibility is not None:
            out["preemptibility"] = self.preemptibility
        pools = [pool for value in self.node_pools for pool in re.split(r"[\s,]+", value) if pool]
        if pools:
            out["node_pools"] = pools
        return out

    def flag(self, option: str) -> str:
        """How the user typed ``option``'s flag (else its long flag), for an error to name."""
        return self.flags.get(option) or f"--{option.replace('_', '-')}"

    def flag_for(self, loc: tuple[int | str, ...] | list[str]) -> str:
        """The flag that set the spec field at ``loc`` (``spec.num_workers`` ->
        ``--processes`` as typed); the dotted path when no flag of this command did."""
        parts = [to_snake(part) for part in loc if isinstance(part, str)]
        if parts == ["name"]:
            return self.flag("name_prefix") if self.name_prefix is not None else "NAME"
        for part in reversed(parts):
            if part == "name":  # a variable's name: its list names the flag
                continue
            if part in ("command", "args"):
                return self.flag(part) if part in self.typed_options else COMMAND_WORDS
            candidates = [o for o in FIELD_OPTIONS.get(part, (part,)) if o in self.flags]
            typed = [o for o in candidates if o in self.typed_options]
            if typed or candidates:
                return self.flags[(typed or candidates)[0]]
        return ".".join(str(part) for part in loc)

    def flag_error(self, error: InvalidSpec) -> InvalidSpec:
        """The server's field error, naming the flag the user typed instead of the API field."""
        if not error.where:
            return error
        problem = error.problem.removeprefix("Value error, ")
        return InvalidSpec(problem, self.flag_for(re.sub(r"\[\d+\]", "", error.where).split(".")))


def submit_options(
    *names: str, **replaced: Any
) -> Callable[[Callable[[typer.Context, SubmitOptions], None]], Callable[..., None]]:
    """Give a command ``ctx``, then the named ``OPTIONS`` (``replaced`` ones by their own
    Typer parameter: another help, ``--processes`` for ``--workers``), and call it with
    the parsed ``SubmitOptions``.  Register the command with ``cls=SubmitCommand``
    (its ``command_class``), which splits off the workload's command.  Every submit
    command takes the asset options."""
    names = (*names, *(name for name in ASSET_OPTIONS if name not in names))
    chosen = {name: (OPTIONS[name][0], replaced.get(name, OPTIONS[name][1])) for name in names}
    keyword = inspect.Parameter.KEYWORD_ONLY
    parameters = [inspect.Parameter("ctx", keyword, annotation=typer.Context)]
    parameters += [
        inspect.Parameter(name, keyword, default=info, annotation=kind)
        for name, (kind, info) in chosen.items()
    ]
    declared = {name: _spelling(info) for name, (_, info) in chosen.items()}

    def decorate(fn: Callable[[typer.Context, SubmitOptions], None]) -> Callable[..., None]:
        def command(ctx: typer.Context, **values: Any) -> None:
            argv = ctx.meta.get(ARGV_KEY) or SubmitArgv(command=list(ctx.args))
            fn(ctx, parsed(argv, declared, values))

        command.__name__ = fn.__name__
        command.__qualname__ = fn.__qualname__
        command.__doc__ = fn.__doc__
        command.__module__ = fn.__module__
        command.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in parameters}
        command.command_class = SubmitCommand  # type: ignore[attr-defined]
        return command

    return decorate


def parsed(argv: SubmitArgv, declared: dict[str, str], values: dict[str, Any]) -> SubmitOptions:
    """The ``SubmitOptions`` of a split command line and click's values for its options."""
    return SubmitOptions(
        flags={**declared, **argv.typed},
        typed_options=set(argv.typed),
        command_words=argv.command,
        entrypoint="command" in argv.bare,
        name_as_prefix="name_prefix" in argv.bare,
        **{k: list(v) if isinstance(v, tuple) else v for k, v in values.items()},
    )


def _spelling(info: Any) -> str:
    """How an option is named in messages when the user did not type it: its long flag."""
    decls = [d for d in getattr(info, "param_decls", None) or () if d.startswith("-")]
    longs = [d for d in decls if d.startswith("--")]
    return (longs or decls or ["NAME"])[0]
