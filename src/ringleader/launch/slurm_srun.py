"""Start a node's agent as a Slurm job step (``srun``) instead of over SSH.

Inside an allocation, ``launch`` starts one agent per node with

    srun --jobid=JOB --nodes=1 --ntasks=1 --nodelist=NODE --overlap --cpu-bind=none
         --mem=0 --kill-on-bad-exit=1 --mpi=none --export=ALL --input=all
         --job-name=ringleader-agent --quiet  PYTHON -m ringleader.launch.slurm_step --job-id RUN

and speaks the agent protocol over srun's stdin and stdout, which Slurm forwards to and
from the step's one task.  Why each option (``man srun``, 22.05):

- ``--nodes=1 --ntasks=1 --nodelist=NODE``: one task, the agent, on exactly that node;
- ``--overlap``: the step shares the job's CPUs, memory and GPUs with every other step
  (the agents of other nodes, a user's own ``srun``), so it never waits for resources;
- no ``--cpus-per-task`` and no ``--exact``: a step then gets every CPU the job holds on
  the node; ``--cpu-bind=none`` keeps the agent (and the ranks it forks) unbound, as
  ringleader pins ranks itself where asked; ``--mem=0`` gives it all the job's memory
  there; a step gets all the job's GPUs (GRES) by default, left so;
- ``--kill-on-bad-exit=1``: an agent that fails ends its step at once;
- ``--mpi=none``: no PMI server or ``PMI_*`` names for a launcher of launchers;
- ``--export=ALL``, ``--input=all``: the launcher's environment, and stdin reaching the
  task, whatever ``SLURM_EXPORT_ENV`` or ``SLURM_STDINMODE`` the job set;
- not ``--unbuffered``: it runs the task on a pseudo-terminal, whose echo and line
  discipline would corrupt the JSON protocol; the agent flushes each message itself.

The environment srun gets is the launcher's less ``step.SRUN_INPUTS``, which srun reads as
options (``SLURM_GPUS_PER_TASK`` would give the one-task step one GPU); their job values
travel in ``slurm_env.JOB_ENV`` and are put back for the ranks on the node (``slurm_env.py``).

Stopping: a signal to ``srun`` is forwarded to the step, and SIGTERM cancels it (Slurm
then ends every process of the step on that node), so ``SrunLink.kill`` sends SIGTERM;
a SIGKILLed srun would leave its step running until the agent's heartbeat timeout.
"""

from __future__ import annotations

import contextlib
import json
import signal
from collections.abc import Mapping

from ringleader.launch.links import AgentLink
from ringleader.launch.slurm_env import JOB_ENV, SRUN_INPUTS, job_level

STEP_NAME = "ringleader-agent"


def agent_step_argv(job_id: str, node: str, *, python: str, run_id: str) -> list[str]:
    """The ``srun`` argv that runs ``node``'s agent as a step of job ``job_id``."""
    if not node or node.startswith("-"):
        raise ValueError(f"refusing node name that looks like an option: {node!r}")
    return [
        "srun",
        f"--jobid={job_id}",
        "--nodes=1",
        "--ntasks=1",
        f"--nodelist={node}",
        "--overlap",
        "--cpu-bind=none",
        "--mem=0",
        "--kill-on-bad-exit=1",
        "--mpi=none",
        "--export=ALL",
        "--input=all",
        f"--job-name={STEP_NAME}",
        "--quiet",
        python,
        "-m",
        "ringleader.launch.slurm_step",
        "--job-id",
        run_id,
    ]


def srun_env(environ: Mapping[str, str]) -> dict[str, str]:
    """srun's environment: ``environ`` less what srun would read as options, plus the
    job's values of those names (and of those a step overwrites) for the ranks."""
    env = {k: v for k, v in environ.items() if k not in SRUN_INPUTS and k != JOB_ENV}
    env[JOB_ENV] = json.dumps(job_level(dict(environ)), sort_keys=True)
    return env


class SrunLink(AgentLink):
    """An agent reached through ``srun``: killing it cancels its job step."""

    def kill(self) -> None:
        # SIGTERM, not SIGKILL: srun forwards it and Slurm cancels the step, ending every
        # process of it on that node; a SIGKILLed srun leaves the step running.
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGTERM)
