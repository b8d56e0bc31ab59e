"""A node's agent as a Slurm job step: the step's own identity taken out, then the agent.

``srun`` starts ``python -m ringleader.launch.slurm_step --job-id ID`` on each node
(``slurm_srun.py``); what is taken out of the environment and what is put back is
``slurm_env``'s docstring.
"""

from __future__ import annotations

import os
import sys

from ringleader.launch import agent
from ringleader.launch.slurm_env import scrub


def main(argv: list[str] | None = None) -> int:
    scrub(os.environ)
    return agent.main(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    agent.exit_now(main())  # as the agent's own: no shutdown wait on the link's lock
