"""``ringleader launch --slurm``: the same launch, submitted as a Slurm batch job.

The job's script runs ``ringleader launch --nproc-per-node N -- COMMAND`` with this
interpreter on the allocation's first node; that launch starts one agent per
allocated node (``srun``) and gives every rank the usual environment.  Here, the
CLI submits it, follows its merged output until it ends, and exits with its code.

Forms (the flags are declared in ``cli/launch.py``):

    launch --slurm [-N 2] [--nproc-per-node 2] [Slurm flags] -- CMD   submit and follow
    launch --slurm ... --detach -- CMD                                submit, print the id
    launch --slurm ... --dry-run -- CMD                               print the script
    launch --slurm-attach JOBID                                       follow a job again

Invariants: every bad input is refused before ``sbatch`` runs, naming its flag
(exit 2), so nothing is half-submitted; the first Ctrl-C cancels the job and waits
for its end (the job's last words are shown), a second stops waiting; ``--slurm-attach``'s
Ctrl-C stops following and leaves the job alone.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import sys
from pathlib import Path

from ringleader.errors import InvalidSpec, RingleaderError
from ringleader.launch import frameworks
from ringleader.launch.launch_args import LaunchArgs
from ringleader.slurm import commands
from ringleader.slurm.commands import JobState
from ringleader.slurm.follow import FollowEnd, Interrupts, follow
from ringleader.slurm.sbatch import SbatchRequest, render_script, validate_extra_arg, validate_time

__all__ = ["build_request", "run_slurm"]

DEFAULT_OUTPUT = "ringleader-slurm-%j.out"
# flag -> LaunchArgs field of the options only --slurm reads (refused without it)
_SLURM_ONLY = {"-N/--nodes": "nodes", "--partition": "partition", "--time": "time",
               "--gpus-per-node": "gpus_per_node", "--account": "account",
               "--sbatch-arg": "sbatch_arg", "--output": "output", "--detach": "detach",
               "--dry-run": "dry_run"}  # fmt: skip
# What each way a job can end means to its user, beyond its exit code.
_ENDINGS = {
    JobState.TIMEOUT: "reached its time limit and was stopped; ask for more with --time",
    JobState.OUT_OF_MEMORY: "ran out of memory; ask for more with --sbatch-arg=--mem=SIZE",
    JobState.NODE_FAIL: "lost a node (NODE_FAIL); run it again",
    JobState.PREEMPTED: "was preempted by Slurm for another job",
    JobState.BOOT_FAIL: "could not start: a node failed to boot (BOOT_FAIL)",
    JobState.DEADLINE: "passed its deadline and was stopped",
    JobState.CANCELLED: "was cancelled (scancel, or an administrator)",
}


def run_slurm(args: LaunchArgs) -> int:
    """Submit (or print, or attach to) the job; the exit code for the CLI."""
    try:
        if args.slurm_attach is not None:
            return _attach(args)
        request = build_request(args, cwd=os.getcwd(), python=sys.executable)
        script = render_script(request)
        if args.dry_run:
            sys.stdout.write(script)
            return 0
        _check_partition(args.partition)
        return _submit_and_follow(args, request, script)
    except RingleaderError as error:
        _say(f"error: {error}")
        return error.exit_code


def build_request(args: LaunchArgs, *, cwd: str, python: str) -> SbatchRequest:
    """The sbatch request for ``args`` (pure but for checking --output's folder).

    Raises InvalidSpec naming the flag for anything Slurm would refuse or that
    cannot go with --slurm.
    """
    _refuse_misuse(args)
    nodes = 1 if args.nodes is None else args.nodes
    if nodes < 1:
        raise InvalidSpec(f"must be at least 1, got {nodes}", "-N/--nodes")
    if args.gpus_per_node is not None and args.gpus_per_node < 0:
        raise InvalidSpec(f"must be 0 or more, got {args.gpus_per_node}", "--gpus-per-node")
    per_node = args.nproc_per_node or args.gpus_per_node or 1
    if per_node < 1:
        raise InvalidSpec(f"must be at least 1, got {per_node}", "--nproc-per-node")
    try:
        time_limit = validate_time(args.time) if args.time is not None else None
        extra = tuple(validate_extra_arg(arg) for arg in args.sbatch_arg)
    except ValueError as error:
        flag, _, problem = str(error).partition(": ")
        raise InvalidSpec(problem, flag) from None
    _check_inner_launch(args)
    run_id = args.run_id or _new_run_id()
    output = str(Path(cwd, args.output or DEFAULT_OUTPUT))
    if not Path(output).parent.is_dir():
        raise InvalidSpec(f"folder {Path(output).parent} does not exist", "--output")
    request = SbatchRequest(
        job_name=run_id,
        nodes=nodes,
        command=(python, "-m", "ringleader", "launch", *_inner_options(args, per_node, run_id),
                 "--", *args.command),
        ntasks_per_node=per_node,
        gpus_per_node=args.gpus_per_node or None,
        partition=args.partition,
        time=time_limit,
        account=args.account,
        output=output,
        chdir=cwd,
        extra_args=extra,
    )  # fmt: skip
    try:
        render_script(request)  # a partition/account Slurm cannot read as one word
    except ValueError as error:
        flag, _, problem = str(error).partition(": ")
        raise InvalidSpec(problem, f"--{flag}") from None
    return request


def _refuse_misuse(args: LaunchArgs) -> None:
    if not args.slurm:
        for flag, name in _SLURM_ONLY.items():
            if getattr(args, name) not in (None, False, []):
                raise InvalidSpec("is a Slurm option: add --slurm (or leave it out)", flag)
    for flag, given in (("-H/--hosts", args.hosts), ("--hostfile", args.hostfile),
                        ("--ssh-config", args.ssh_config),
                        ("--no-slurm", args.no_slurm)):  # fmt: skip
        if given:
            raise InvalidSpec("cannot be combined with --slurm: Slurm picks the nodes", flag)
    if args.nproc is not None:
        raise InvalidSpec(
            "with --slurm give -N (nodes) and --nproc-per-node (ranks per node)", "-n/--nproc"
        )
    if not args.command:
        raise InvalidSpec("no command given; put it after --, e.g. `-- python train.py`", "command")


def _check_inner_launch(args: LaunchArgs) -> None:
    """The options the job's own launch reads, checked here rather than in the job."""
    from ringleader.launch.launch_args import parse_ranks
    from ringleader.launch.options import parse_env
    from ringleader.runtime.modes import launch_env

    frameworks.get(args.framework)
    if args.max_restarts < 0:
        raise InvalidSpec("must be 0 or more", "--max-restarts")
    if args.grace < 0:
        raise InvalidSpec("must be 0 or more seconds", "--grace")
    parse_env(args.env)
    launch_env(args.grad_compression, args.sync_every)
    if args.image or args.image_pull_policy or args.container_runtime:
        from ringleader.launch.options import check_image

        check_image(args)
    try:
        parse_ranks(args.ranks)
    except ValueError:
        problem = f"expected rank numbers like 0,2; got {args.ranks!r}"
        raise InvalidSpec(problem, "--ranks") from None


def _inner_options(args: LaunchArgs, per_node: int, run_id: str) -> list[str]:
    """The job's ``ringleader launch`` options: ranks per node, the run id, and the
    launch options given here (only those that differ from their defaults)."""
    options = ["--nproc-per-node", str(per_node), "--run-id", run_id]
    if args.framework != frameworks.DEFAULT:
        options += ["--framework", args.framework]
    if args.max_restarts:
        options += ["--max-restarts", str(args.max_restarts)]
    if args.grace != LaunchArgs.grace:
        options += ["--grace", f"{args.grace:g}"]
    for flag, value in (("--network-interface", args.network_interface),
                        ("--log-dir", args.log_dir), ("--ranks", args.ranks),
                        ("--image", args.image),
                        ("--image-pull-policy", args.image_pull_policy),
                        ("--container-runtime", args.container_runtime)):  # fmt: skip
        if value:
            options += [flag, value]
    if args.no_prefix:
        options.append("--no-prefix")
    for pair in args.env:
        options += ["-e", pair]
    if args.grad_compression is not None:
        options += ["--grad-compression", args.grad_compression]
    if args.sync_every is not None:
        options += ["--sync-every", str(args.sync_every)]
    return options


def _check_partition(partition: str | None) -> None:
    if partition is None:
        return
    known = commands.partitions()
    if partition not in known:
        raise InvalidSpec(
            f"no partition {partition!r} on this cluster; it has {', '.join(known) or 'none'}",
            "--partition",
        )


def _submit_and_follow(args: LaunchArgs, request: SbatchRequest, script: str) -> int:
    interrupts = Interrupts()
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, interrupts)
    job_id = commands.submit(script)
    if args.detach:
        _print_detached(job_id, request)
        return 0
    ranks = f"{_count(request.nodes, 'node')}, {_count(request.ntasks_per_node, 'rank')} each"
    _say(f"submitted Slurm job {job_id} ({ranks}); Ctrl-C cancels it")
    _say(f"output: {request.output.replace('%j', job_id) if request.output else '?'}")
    end = follow(
        job_id,
        out=sys.stdout.buffer,
        say=_say,
        interrupts=interrupts,
        cancel_on_interrupt=True,
    )
    return _exit_code(job_id, end)


def _attach(args: LaunchArgs) -> int:
    job_id = args.slurm_attach or ""
    others = [f for f, name in _SLURM_ONLY.items() if getattr(args, name) not in (None, False, [])]
    if args.slurm or args.command or others:
        raise InvalidSpec("give it alone: ringleader launch --slurm-attach JOBID", "--slurm-attach")
    if not commands.is_job_id(job_id):
        raise InvalidSpec(f"{job_id!r} is not a Slurm job id", "--slurm-attach")
    if commands.job_info(job_id) is None:
        raise InvalidSpec(f"Slurm knows no job {job_id} (ended long ago?)", "--slurm-attach")
    interrupts = Interrupts()
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, interrupts)
    _say(f"following Slurm job {job_id}; Ctrl-C stops following (the job goes on)")
    end = follow(
        job_id, out=sys.stdout.buffer, say=_say, interrupts=interrupts, cancel_on_interrupt=False
    )
    if end.stopped_following:
        _say(f"stopped following; job {job_id} goes on (cancel it with: scancel {job_id})")
        return 130
    return _exit_code(job_id, end)


def _exit_code(job_id: str, end: FollowEnd) -> int:
    """The job's exit code, with a line for every ending that is not plain."""
    info = end.info
    if end.stopped_following:
        _say(f"stopped waiting for Slurm job {job_id} to end (it was cancelled)")
        return 130
    if info is None:
        _say(f"Slurm no longer knows job {job_id}; how it ended is unknown")
        return 130 if end.cancelled_by_us else 1
    if end.cancelled_by_us and info.state is JobState.CANCELLED:
        _say(f"Slurm job {job_id} cancelled")
        return 130
    code = info.exit_code
    if info.state is JobState.COMPLETED:
        return code or 0
    if info.state is JobState.FAILED:
        return code or 1
    words = _ENDINGS.get(info.state, f"ended {info.state.value}")
    reason = f" ({info.reason})" if info.reason and info.reason != "None" else ""
    _say(f"Slurm job {job_id} {words}{reason}")
    return code or 1


def _print_detached(job_id: str, request: SbatchRequest) -> None:
    output = (request.output or "").replace("%j", job_id)
    print(job_id)
    _say(f"submitted Slurm job {job_id}; it runs without this terminal")
    _say(f"  follow it:  ringleader launch --slurm-attach {job_id}")
    _say(f"  output:     {shlex.quote(output)}")
    _say(f"  cancel it:  scancel {job_id}")


def _new_run_id() -> str:
    from ringleader.launch.prestart import new_run_id

    return new_run_id()


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _say(line: str) -> None:
    with contextlib.suppress(BrokenPipeError, ValueError):  # its reader gone: follow on
        print(f"ringleader: {line}", file=sys.stderr, flush=True)
