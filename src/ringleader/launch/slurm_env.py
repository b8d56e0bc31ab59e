"""A Slurm job step's environment made the job's, for the agent the step starts.

``srun`` starts ``python -m ringleader.launch.slurm_step --job-id ID`` on each node
(``slurm_srun.py``).
Slurm gives that one task its identity as a step of one task: ``SLURM_PROCID=0``,
``SLURM_NTASKS=1``, ``SLURM_STEP_*``, ``SLURM_NNODES=1`` ...  The ranks the agent starts
inherit its environment, and Lightning's ``SLURMEnvironment`` or our own
``runtime.env.detect`` reading those names would make every rank rank 0 of a world of 1.
So before the agent runs, this module:

- drops the step's and task's names (``STEP_NAMES``, ``STEP_PREFIXES``);
- puts back the job's own values of the names the launcher kept from ``srun`` or that the
  step overwrote (``JOB_ENV``: a JSON object ``slurm_srun.py`` put in the environment), so a rank
  sees ``SLURM_NNODES``, ``SLURM_TASKS_PER_NODE``, ``SLURM_MEM_PER_CPU`` ... as the job's.

What stays is the job's (``SLURM_JOB_ID``, ``SLURM_JOB_NODELIST`` ...) and the node's
(``SLURMD_NODENAME``, ``SLURM_CPUS_ON_NODE``, the GPUs Slurm bound there); the rank's place
comes from ringleader's and torchrun's names alone.

Only the standard library is imported (this is on every launch's path); ``slurm_step``
is the step's entry point, ``slurm_srun`` what starts it.
"""

from __future__ import annotations

import json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, MutableMapping

#: The job's values of names srun must not read or that the step overwrites, as JSON.
JOB_ENV = "RINGLEADER_SLURM_JOB_ENV"
#: A task's or step's identity, never a rank's (dropped; never put back).
STEP_NAMES = frozenset(
    {
        "SLURM_PROCID",
        "SLURM_LOCALID",
        "SLURM_NODEID",
        "SLURM_NTASKS",
        "SLURM_NPROCS",
        "SLURM_GTIDS",
        "SLURM_TASK_PID",
        "SLURM_STEPID",
        "SLURM_SRUN_COMM_HOST",
        "SLURM_SRUN_COMM_PORT",
        "SLURM_LAUNCH_NODE_IPADDR",
        "SLURM_PRIO_PROCESS",
        "SLURM_UMASK",
        "SLURM_DISTRIBUTION",
        "SLURM_OVERLAP",
        "SLURM_MPI_TYPE",
        "SLURM_KILL_BAD_EXIT",
    }
)
STEP_PREFIXES = ("SLURM_STEP_", "SLURM_CPU_BIND", "SLURM_PMIX", "PMI_", "PMIX_")
#: Names the launcher keeps from srun: each is an srun option (``srun``'s INPUT ENVIRONMENT
#: VARIABLES) that would reshape the one-task agent step (``SLURM_GPUS_PER_TASK`` would give
#: it one GPU, ``SLURM_CPUS_PER_TASK`` on Slurm 23.11+ only that many CPUs, ...).
SRUN_INPUTS = (
    "SLURM_NTASKS",
    "SLURM_NPROCS",
    "SLURM_NTASKS_PER_NODE",
    "SLURM_NTASKS_PER_CORE",
    "SLURM_NTASKS_PER_SOCKET",
    "SLURM_NTASKS_PER_GPU",
    "SLURM_CPUS_PER_TASK",
    "SRUN_CPUS_PER_TASK",
    "SLURM_CPUS_PER_GPU",
    "SLURM_TRES_PER_TASK",
    "SLURM_GPUS",
    "SLURM_GPUS_PER_TASK",
    "SLURM_GPUS_PER_SOCKET",
    "SLURM_MEM_PER_CPU",
    "SLURM_MEM_PER_GPU",
    "SLURM_MEM_PER_NODE",
    "SLURM_DISTRIBUTION",
    "SLURM_DIST_PLANESIZE",
    "SLURM_EXACT",
    "SLURM_EXCLUSIVE",
    "SLURM_CPU_BIND",
    "SLURM_MEM_BIND",
    "SLURM_GPU_BIND",
    "SLURM_HINT",
    "SLURM_LABELIO",
    "SLURM_UNBUFFEREDIO",
    "SLURM_STDINMODE",
    "SLURM_STDOUTMODE",
    "SLURM_STDERRMODE",
    "SLURM_OPEN_MODE",
    "SLURM_EXPORT_ENV",
    "SLURM_NO_KILL",
    "SLURM_KILL_BAD_EXIT",
    "SLURM_OVERCOMMIT",
    "SLURM_MPI_TYPE",
    "SLURM_WAIT",
)
#: Job-level names a step overwrites with its own values (one node, one task).
STEP_OVERWRITES = ("SLURM_NNODES", "SLURM_NODELIST", "SLURM_TASKS_PER_NODE", "SLURM_JOB_NAME")


def is_step_name(name: str) -> bool:
    """A name that describes the step or its task, never the job or the node."""
    return name in STEP_NAMES or name.startswith(STEP_PREFIXES)


def job_level(environ: Mapping[str, str]) -> dict[str, str]:
    """What the launcher keeps for the ranks: the job's values srun must not see or overwrites."""
    names = (*SRUN_INPUTS, *STEP_OVERWRITES)
    return {n: environ[n] for n in names if n in environ and not is_step_name(n)}


def scrub(environ: MutableMapping[str, str]) -> None:
    """The step's environment made the job's: see the module docstring."""
    try:
        saved = json.loads(environ.pop(JOB_ENV, "") or "{}")
    except ValueError:
        saved = {}
    if not isinstance(saved, dict):
        saved = {}
    restorable = {*SRUN_INPUTS, *STEP_OVERWRITES}
    for name in list(environ):
        if is_step_name(name) or (name in restorable and name not in saved):
            del environ[name]
    for name, value in saved.items():
        if name in restorable and not is_step_name(name) and isinstance(value, str):
            environ[name] = value
