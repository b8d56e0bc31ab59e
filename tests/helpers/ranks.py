"""Ranks run as real processes with the runtime's environment."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

TIMEOUT_S = 90
_LAUNCHER_PREFIXES = ("RINGLEADER_", "SLURM_", "OMPI_", "PMIX_", "PET_", "TORCHELASTIC_")
_LAUNCHER_NAMES = {
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "NODE_RANK",
    "NNODES",
    "MASTER_ADDR",
    "MASTER_PORT",
}


def clean_env(**extra: str) -> dict[str, str]:
    """This process's env minus any launcher's names (pytest may itself run under one)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in _LAUNCHER_NAMES and not k.startswith(_LAUNCHER_PREFIXES)
    }
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_all(code: str, envs: list[dict[str, str]]) -> list[subprocess.CompletedProcess[str]]:
    """Start one ``python -c code`` per env at once; wait for all, killing all on timeout.

    ``code`` may also be a path to a script (so tracebacks show source lines).
    """
    args = [code] if code.endswith(".py") else ["-c", code]
    procs = [
        subprocess.Popen(
            [sys.executable, *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for env in envs
    ]
    deadline = time.monotonic() + TIMEOUT_S
    results = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=max(deadline - time.monotonic(), 1))
            results.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return results


def rank_envs(source: str, world: int) -> list[dict[str, str]]:
    """The environment ``source`` would give each of ``world`` ranks on this host."""
    port = str(free_port())
    envs = []
    for r in range(world):
        if source == "ringleader":
            names = dict(RANK=r, LOCAL_RANK=r, WORLD_SIZE=world, LOCAL_WORLD_SIZE=world)
            names.update(NODE_RANK=0, NNODES=1, MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
            env = {k: str(v) for k, v in names.items()}
            env.update({f"RINGLEADER_{k}": v for k, v in env.items()})
            env.update(TORCHELASTIC_RUN_ID="t", GROUP_RANK="0", RINGLEADER_JOB_ID="t")
        elif source == "slurm":  # no MASTER_ADDR: it must come from the node list
            env = dict(SLURM_PROCID=r, SLURM_LOCALID=r, SLURM_NODEID=0, SLURM_NTASKS=world)
            env.update(SLURM_TASKS_PER_NODE=f"{world}(x1)", SLURM_JOB_NODELIST="127.0.0.[1]")
            env.update(SLURM_JOB_ID="4242", MASTER_PORT=port)
        elif source == "openmpi":  # no MASTER_ADDR: single node means loopback
            env = dict(OMPI_COMM_WORLD_RANK=r, OMPI_COMM_WORLD_SIZE=world, MASTER_PORT=port)
            env.update(OMPI_COMM_WORLD_LOCAL_RANK=r, OMPI_COMM_WORLD_LOCAL_SIZE=world)
        else:
            raise ValueError(source)
        envs.append(clean_env(**{k: str(v) for k, v in env.items()}))
    return envs
