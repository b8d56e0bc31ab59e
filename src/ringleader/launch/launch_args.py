"""``ringleader launch``'s options as one record, read by the launch itself and by its
Slurm path (``slurm_batch``): its own module so that neither imports the other for it.

Standard library only: ``ringleader launch`` starts on it (``command``'s docstring).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ringleader.launch import frameworks


@dataclass
class LaunchArgs:
    """``ringleader launch``'s options, as the Typer command declares them."""

    command: list[str] = field(default_factory=list)
    nproc: int | None = None
    hostfile: str | None = None
    hosts: str | None = None
    nproc_per_node: int | None = None
    framework: str = frameworks.DEFAULT
    max_restarts: int = 0
    grace: float = 5.0
    network_interface: str | None = None
    log_dir: str | None = None
    ranks: str | None = None
    no_prefix: bool = False
    env: list[str] = field(default_factory=list)
    run_id: str | None = None
    ssh_config: str | None = None
    no_slurm: bool = False
    # launch --slurm (launch/slurm_batch.py): submit the launch as an sbatch job
    slurm: bool = False
    nodes: int | None = None
    partition: str | None = None
    time: str | None = None
    gpus_per_node: int | None = None
    account: str | None = None
    sbatch_arg: list[str] = field(default_factory=list)
    output: str | None = None
    detach: bool = False
    dry_run: bool = False
    slurm_attach: str | None = None

    def wants_slurm(self) -> bool:
        """Any Slurm option given: launch/slurm_batch.py reads (or refuses) these args."""
        return any(getattr(self, name) != getattr(_DEFAULTS, name) for name in _SLURM_FIELDS)


_SLURM_FIELDS = ("slurm", "nodes", "partition", "time", "gpus_per_node", "account",
                 "sbatch_arg", "output", "detach", "dry_run", "slurm_attach")  # fmt: skip
_DEFAULTS = LaunchArgs()


def parse_ranks(value: str | None) -> set[int] | None:
    """``--ranks 0,2`` as a set (None: every rank); ValueError when malformed."""
    if not value:
        return None
    return {int(part) for part in value.split(",") if part.strip()}
