"""Slurm, as ringleader talks to it: one layer shared by ``launch --slurm`` and the
server's Slurm backend.

    sbatch.py    pure: an ``SbatchRequest`` -> the batch script's text, and the
                 validators for what users type (``--time``, ``--sbatch-arg``).
                 No I/O, so the script is golden-tested and shown by ``--dry-run``.
    commands.py  the only module that runs Slurm's CLI (``sbatch``, ``scancel``,
                 ``scontrol``, ``sinfo``): typed results (``JobInfo``, ``JobState``)
                 and one error (``SlurmError``) naming the command and Slurm's words.
    follow.py    follows a submitted job: tails its output file while polling its
                 state, says once why it waits, and ends with its exit code.

Every command finds its cluster the way Slurm's own clients do (``SLURM_CONF`` or
the configless DNS record); nothing here keeps state beside Slurm's own record.
"""
