"""``ringleader launch``'s options, declared once: each ``LaunchArgs`` field that is an
option carries its flags, kind, metavar, help and panel (``option``).  Two readers
build on it: ``command.parse_quick`` (the fast path, no Typer imported: ``OPTIONS``)
and ``cli/launch.py`` (the Typer command, its help and errors).  The launch itself and
its Slurm path (``slurm_batch``) read the record; it is its own module so that neither
imports the other for it.

Standard library only: ``ringleader launch`` starts on it (``command``'s docstring).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from ringleader.launch import frameworks

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

#: How an option's value reads: a number, a word, present-or-not, or repeatable.
KINDS = ("int", "float", "str", "flag", "list")


def option(
    kind: str,
    *flags: str,
    default: object = None,
    metavar: str = "",
    help: str = "",
    slurm: bool = False,
) -> Any:
    """A ``LaunchArgs`` field that is a launch option.  ``help`` is plain text (the
    CLI escapes it for rich); ``slurm``: shown in the Slurm panel, and any of them
    given sends the launch down the Slurm path (``wants_slurm``)."""
    assert kind in KINDS, kind
    meta = {"kind": kind, "flags": flags, "metavar": metavar, "help": help, "slurm": slurm}
    if kind == "list":
        return field(default_factory=list, metadata=meta)
    return field(default=False if kind == "flag" else default, metadata=meta)


@dataclass
class LaunchArgs:
    """``ringleader launch``'s options (and the command), each declared once."""

    command: list[str] = field(default_factory=list)
    nproc: int | None = option(
        "int", "-n", "--nproc", "--np", metavar="N",
        help="Total ranks (on this machine unless hosts are given).",
    )  # fmt: skip
    hostfile: str | None = option(
        "str", "--hostfile", metavar="FILE", help="MPI hostfile ('host slots=N') or MLX hosts.json."
    )
    hosts: str | None = option(
        "str", "-H", "--hosts", metavar="HOSTS", help="Hosts as 'a:2,b:2' (Horovod style)."
    )
    nproc_per_node: int | None = option(
        "int", "--nproc-per-node", metavar="N", help="Ranks per host (overrides slots)."
    )
    framework: str = option(  # its help lists the registered frameworks (cli/launch.py)
        "str", "--framework", default=frameworks.DEFAULT, metavar="NAME"
    )
    max_restarts: int = option(
        "int", "--max-restarts", default=0, metavar="K",
        help="Restart the whole gang up to K times after a failure.",
    )  # fmt: skip
    grace: float = option(
        "float", "--grace", default=5.0, metavar="SECONDS",
        help="Seconds between SIGTERM and SIGKILL when stopping ranks.",
    )  # fmt: skip
    network_interface: str | None = option(
        "str", "--network-interface", metavar="IFACE", help="Interface for gloo/NCCL on every host."
    )
    log_dir: str | None = option(
        "str", "--log-dir", metavar="DIR",
        help="Keep per-attempt, per-rank stdout/stderr files here.",
    )  # fmt: skip
    ranks: str | None = option(
        "str", "--ranks", metavar="LIST", help="Show only these ranks on the console, e.g. 0,2."
    )
    no_prefix: bool = option(
        "flag", "--no-prefix", help="Print rank lines without the [rank/world host] prefix."
    )
    env: list[str] = option(  # noqa: RUF009 (a field with a default_factory)
        "list", "-e", "--env", metavar="KEY=VALUE",
        help="Extra environment for every rank, KEY=VALUE (repeatable).",
    )  # fmt: skip
    grad_compression: str | None = option(
        "str", "--grad-compression", metavar="MODE",
        help="Gradients sent as none (default: exact DDP), bf16, fp16 or powersgd[:RANK]"
        " (runtime.prepare).",
    )  # fmt: skip
    sync_every: int | None = option(
        "int", "--sync-every", metavar="H",
        help="Local SGD: average parameters every H steps, no gradient all-reduce.",
    )  # fmt: skip
    run_id: str | None = option(
        "str", "--run-id", metavar="ID", help="Job id (default: a random rl-xxxxxxxx)."
    )
    image: str | None = option(
        "str", "--image", metavar="IMAGE",
        help="Run every rank in this OCI image (podman, else docker, on each host).",
    )  # fmt: skip
    image_pull_policy: str | None = option(
        "str", "--image-pull-policy", metavar="POLICY",
        help="When each host pulls the image: Always, IfNotPresent (default) or Never.",
    )  # fmt: skip
    container_runtime: str | None = option(
        "str", "--container-runtime", metavar="NAME",
        help="podman or docker: the runtime each host runs the image with where it has"
        " it (default: podman, else docker).",
    )  # fmt: skip
    ssh_config: str | None = option(
        "str", "--ssh-config", metavar="FILE",
        help="ssh config file (default: ~/.ssh/config, or $RINGLEADER_SSH_CONFIG).",
    )  # fmt: skip
    no_slurm: bool = option(
        "flag", "--no-slurm",
        help="Inside a Slurm allocation, ignore it and run the ranks on this machine.",
    )  # fmt: skip
    # launch --slurm (launch/slurm_batch.py): submit the launch as an sbatch job
    slurm: bool = option(
        "flag", "--slurm", slurm=True,
        help="Submit as a Slurm batch job and follow its output to its end.",
    )  # fmt: skip
    nodes: int | None = option(
        "int", "-N", "--nodes", metavar="N", slurm=True, help="Nodes to allocate (default 1)."
    )
    partition: str | None = option(
        "str", "--partition", metavar="P", slurm=True, help="Partition (checked with sinfo)."
    )
    time: str | None = option(
        "str", "--time", metavar="T", slurm=True, help="Time limit, e.g. 1:00:00 or 2-0."
    )
    gpus_per_node: int | None = option(
        "int", "--gpus-per-node", metavar="G", slurm=True,
        help="GPUs per node (ranks per node default to it).",
    )  # fmt: skip
    account: str | None = option(
        "str", "--account", metavar="A", slurm=True, help="Account to charge."
    )
    sbatch_arg: list[str] = option(  # noqa: RUF009 (a field with a default_factory)
        "list", "--sbatch-arg", metavar="--OPT[=V]", slurm=True,
        help="One more sbatch option, as --sbatch-arg=--exclusive (repeatable).",
    )  # fmt: skip
    output: str | None = option(
        "str", "--output", metavar="FILE", slurm=True,
        help="The job's merged output file (default ./ringleader-slurm-%j.out).",
    )  # fmt: skip
    detach: bool = option(
        "flag", "--detach", slurm=True,
        help="Submit, print the job id and how to follow it, and exit.",
    )  # fmt: skip
    dry_run: bool = option(
        "flag", "--dry-run", slurm=True, help="Print the sbatch script; submit nothing."
    )
    slurm_attach: str | None = option(
        "str", "--slurm-attach", metavar="JOBID", slurm=True,
        help="Follow a Slurm job's output to its end (Ctrl-C stops following only).",
    )  # fmt: skip

    def wants_slurm(self) -> bool:
        """Any Slurm option given: launch/slurm_batch.py reads (or refuses) these args."""
        return any(getattr(self, name) != getattr(_DEFAULTS, name) for name in _SLURM_FIELDS)


#: The fields that are options, in declaration order (the help's order).
OPTION_FIELDS = tuple(f for f in fields(LaunchArgs) if f.metadata)
#: flag -> (field, kind): what the fast path reads.
OPTIONS: dict[str, tuple[str, str]] = {
    flag: (f.name, f.metadata["kind"]) for f in OPTION_FIELDS for flag in f.metadata["flags"]
}
_SLURM_FIELDS = tuple(f.name for f in OPTION_FIELDS if f.metadata["slurm"])
_DEFAULTS = LaunchArgs()


def parse_ranks(value: str | None) -> set[int] | None:
    """``--ranks 0,2`` as a set (None: every rank); ValueError when malformed."""
    if not value:
        return None
    return {int(part) for part in value.split(",") if part.strip()}
