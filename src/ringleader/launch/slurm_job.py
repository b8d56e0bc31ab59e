"""What a batch job of the server's Slurm backend runs, on the job's first node.

    python -m ringleader.launch.slurm_job RUN_DIR

1. reads ``RUN_DIR/launch.json``, which the backend wrote before it submitted the
   job: the launch with one placeholder host per node (``slurm-node-I``, its
   pod's ranks as slots), since only now is it known where Slurm placed the job;
2. puts the allocation's nodes in their place, in Slurm's order (node 0 runs the
   master, rank 0), with their ``NodeAddr``, and the job id, so the supervisor
   starts each node's agent as an ``srun`` job step (``launch/slurm_srun.py``);
3. names each rank's node in its environment (``RINGLEADER_NODE``, ``NODE_NAME``);
4. becomes the detached supervisor of ``RUN_DIR`` (``launch/detached.py``), which
   writes ``state.json`` and the pods' logs there: the run directory must be on
   a filesystem the server and the nodes share.

Invariant: a launch whose hosts are not placeholders (already filled in, by an
earlier start of this job that Slurm requeued) is taken as it is.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

from ringleader.errors import InvalidSpec
from ringleader.hosts import Host
from ringleader.launch import detached
from ringleader.launch.detached import LAUNCH_FILE, LaunchFile, write_json_atomic
from ringleader.launch.plan import LaunchSpec

PLACEHOLDER = "slurm-node-"  # the backend's placeholder host names (its planning module)


def place(launch: LaunchFile, job_id: str, nodes: list[str], addresses: list[str]) -> LaunchFile:
    """``launch`` with placeholder host I on node I of the allocation (pure)."""
    spec = launch.spec
    if not spec.hosts or not all(h.ssh.startswith(PLACEHOLDER) for h in spec.hosts):
        return launch
    if len(nodes) < len(spec.hosts):
        raise InvalidSpec(
            f"the job has {len(nodes)} node(s) but its launch needs {len(spec.hosts)}",
            "SLURM_JOB_NODELIST",
        )
    hosts = [
        Host(node, address or node, host.slots)
        for host, node, address in zip(spec.hosts, nodes, addresses, strict=False)
    ]
    rank_env = {key: dict(env) for key, env in spec.rank_env.items()}
    first = 0
    for host in hosts:
        for rank in range(first, first + host.slots):
            env = rank_env.setdefault(str(rank), {})
            env["RINGLEADER_NODE"] = host.ssh
            if env.get("NODE_NAME", "").startswith(("slurm:", PLACEHOLDER)) or not env.get(
                "NODE_NAME"
            ):
                env["NODE_NAME"] = host.ssh
        first += host.slots
    spec = dataclasses.replace(spec, hosts=hosts, rank_env=rank_env, slurm_job=job_id)
    return dataclasses.replace(launch, spec=spec)


def fail(run_dir: Path, problem: str) -> int:
    """Record the run as Failed with ``problem`` (what the backend's poll reads)."""
    print(f"ringleader: {problem}", file=sys.stderr)
    stub = LaunchFile(spec=LaunchSpec([], [], "", "", ""))
    recorder = detached.Recorder(run_dir, stub)
    recorder.state.update(phase="Failed", exit_code=2, reason=problem, summary=problem)
    recorder.write()
    return 2


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m ringleader.launch.slurm_job RUN_DIR", file=sys.stderr)
        return 2
    run_dir = Path(args[0])
    from ringleader.slurm import allocation

    try:
        launch = LaunchFile.load(run_dir)
        found = allocation.detect(os.environ)
        if found is None:
            raise InvalidSpec("not inside a Slurm job", "SLURM_JOB_ID")
        placed = place(launch, found.job_id, list(found.nodes), list(found.addresses))
    except (OSError, ValueError, KeyError, TypeError, InvalidSpec) as exc:
        return fail(run_dir, f"cannot place the launch on the job's nodes: {exc}")
    if placed is not launch:
        write_json_atomic(run_dir / LAUNCH_FILE, placed.to_json())
    return detached.run(run_dir)


if __name__ == "__main__":
    sys.exit(main())
