"""What ``ringleader launch`` does once its options are read, and a quick reader.

Why this module: ``ringleader launch -n 2 -- python train.py`` must start in
a fraction of a second, like ``mpirun``.  Typer builds its commands with
pydantic (~0.15 s of imports before a rank starts), so the entry point
(``cli/main.py``) hands launch's common forms to :func:`parse_quick`, which
reads exactly the options ``launch_args`` declares, and runs them with
:func:`run` on the standard library alone.  Anything it does not read with
certainty (``--help``, a bad number, an unknown option, no ``--``) goes to
the Typer command, which gives the usual help and errors and calls the
same :func:`run`.

Invariant: for every argv ``parse_quick`` accepts, Typer reads the same
values (``tests/launch/test_light.py`` checks both on a set of argvs): both are
built from the one declaration of the options, ``launch_args.LaunchArgs``.
"""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import sys

from ringleader.errors import InvalidSpec, RingleaderError
from ringleader.launch import frameworks, prestart
from ringleader.launch.launch_args import OPTIONS, LaunchArgs, parse_ranks
from ringleader.launch.options import build_spec, check_image, parse_env
from ringleader.launch.output import ConsoleSink
from ringleader.launch.result import render_summary
from ringleader.launch.ssh import SSHOptions

__all__ = ["OPTIONS", "LaunchArgs", "parse_quick", "parse_ranks", "run"]

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from ringleader.launch.plan import LaunchSpec
    from ringleader.slurm.allocation import Allocation


_INT = re.compile(r"[0-9]+")
_FLOAT = re.compile(r"[0-9]+(\.[0-9]+)?")


def parse_quick(argv: list[str]) -> LaunchArgs | None:
    """``argv`` (after ``launch``) read without Typer, or None to let Typer read it.

    Accepts known options (``--opt VALUE``, ``--opt=VALUE``), each given once
    (``-e`` any number of times), then ``--`` and the command.
    """
    if "--" not in argv:
        return None
    split = argv.index("--")
    options, command = argv[:split], argv[split + 1 :]
    values: dict[str, object] = {}
    lists: dict[str, list[str]] = {}
    i = 0
    while i < len(options):
        flag, eq, value = options[i].partition("=")
        known = OPTIONS.get(flag)
        if known is None or (eq and not flag.startswith("--")):
            return None
        name, kind = known
        i += 1
        if kind == "flag":
            if eq or name in values:
                return None
            values[name] = True
            continue
        if not eq:
            if i >= len(options):
                return None
            value, i = options[i], i + 1
        if value.startswith("-"):
            return None  # an option where a value should be: Typer decides
        if kind == "list":
            lists.setdefault(name, []).append(value)
            continue
        if name in values:
            return None
        if kind == "int" and not _INT.fullmatch(value):
            return None
        if kind == "float" and not _FLOAT.fullmatch(value):
            return None
        values[name] = int(value) if kind == "int" else float(value) if kind == "float" else value
    args = dataclasses.replace(LaunchArgs(command=command), **values, **lists)
    try:
        parse_ranks(args.ranks)
    except ValueError:
        return None  # Typer's message names the option
    return args


def slurm_allocation(args: LaunchArgs) -> Allocation | None:
    """The Slurm allocation to run in: inside one (``SLURM_JOB_ID``) unless hosts are
    given or ``--no-slurm``; InvalidSpec when its environment or commands are broken."""
    if args.no_slurm or args.hosts or args.hostfile or "SLURM_JOB_ID" not in os.environ:
        return None
    from ringleader.slurm import allocation

    check_slurm_framework(args.framework)
    return allocation.detect(os.environ, args.nproc_per_node)


def _own_launcher(name: str) -> bool:
    """The framework starts its ranks with its own launcher (mpirun), not our agents."""
    return frameworks.get(name).supervisor != frameworks.get(frameworks.DEFAULT).supervisor


def check_slurm_framework(name: str) -> None:
    """Refuse a framework whose gang does not start with one agent per node (mpirun's)."""
    if _own_launcher(name):  # an unknown name: InvalidSpec naming --framework
        raise InvalidSpec(
            f"{name} starts its ranks with its own launcher, which ringleader does not run "
            "inside a Slurm allocation; pass --no-slurm with -H/--hostfile, or start it "
            "with srun yourself",
            "--framework",
        )


def in_image(spec: LaunchSpec, args: LaunchArgs) -> LaunchSpec:
    """``spec`` with every rank in ``--image`` (``launch/containers.py``): the command
    as typed (``python`` is the image's own), the working directory mounted."""
    image, policy = check_image(args)
    if _own_launcher(spec.framework):
        raise InvalidSpec(f"{spec.framework} ranks in an image are not supported yet "
                          "(mpirun would need to reach the other ranks' containers)",
                          "--framework")  # fmt: skip
    # No runtime named: each host's agent runs its own podman, else docker (ready_image).
    container = {"image": image, "pull": policy, "entrypoint": True}
    if args.container_runtime:
        container["runtime"] = args.container_runtime
    return dataclasses.replace(spec, command=list(args.command), container=container)


def comm_env(args: LaunchArgs) -> dict[str, str]:
    """``--grad-compression``/``--sync-every`` as every rank's variables; none without
    them, and then runtime.modes (and the runtime package it is in) stays off a plain
    launch's path: imported before the first rank, they cost every launch."""
    if args.grad_compression is None and args.sync_every is None:
        return {}
    from ringleader.runtime.modes import launch_env

    return launch_env(args.grad_compression, args.sync_every)


def run(args: LaunchArgs) -> int:
    """Launch, supervise to the end, print the root cause; the exit code.

    ``--ranks`` was checked by the caller (``parse_ranks``).
    """
    if args.wants_slurm():
        prestart.discard()
        from ringleader.launch.slurm_batch import run_slurm

        return run_slurm(args)
    try:
        allocation = slurm_allocation(args)
        spec = build_spec(
            args.command,
            nproc=args.nproc,
            hostfile=args.hostfile,
            hosts_flag=args.hosts,
            nproc_per_node=args.nproc_per_node,
            framework=args.framework,
            max_restarts=args.max_restarts,
            grace_s=args.grace,
            network_interface=args.network_interface,
            env={**parse_env(args.env), **comm_env(args)},
            run_id=args.run_id or prestart.run_id(),
            allocation=allocation,
        )
        if args.image or args.image_pull_policy or args.container_runtime:
            spec = in_image(spec, args)
        supervisor_cls = frameworks.get(spec.framework).load_supervisor()
    except RingleaderError as exc:
        prestart.discard()
        print(f"ringleader: error: {exc}", file=sys.stderr)
        return exc.exit_code
    if allocation is not None:
        print(f"ringleader: {allocation.describe()}", file=sys.stderr)
    sink = ConsoleSink(
        show_ranks=parse_ranks(args.ranks), with_prefix=not args.no_prefix, log_dir=args.log_dir
    )
    sup = supervisor_cls(spec, sink, SSHOptions.from_env(args.ssh_config))
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda s, _f: sup.request_stop(s))
    try:
        result = sup.run()
    finally:
        sink.close()
        prestart.discard()  # started ahead but not taken (ranks on other hosts only)
    if result.exit_code != 0:
        print(
            "ringleader: " + render_summary(result).replace("\n", "\nringleader: "), file=sys.stderr
        )
        if spec.slurm_job:
            from ringleader.slurm.allocation import ended_by_slurm

            ended = ended_by_slurm(spec.slurm_job)
            if ended:
                print(f"ringleader: {ended}", file=sys.stderr)
    return result.exit_code
