"""MPI (Horovod, mpi4py): a launcher pod runs ``mpirun``, which starts the ranks.

One agent (on the first host) runs ``mpirun`` with a generated hostfile
(``launch/mpirun.py`` builds its command line); mpirun starts each rank
through ``ringleader.launch.mpi_rank``, which maps OpenMPI's OMPI_COMM_WORLD_*
to torchrun's names, so PyTorch code runs unchanged.  Each worker pod runs
``slotsPerWorker`` ranks.
"""

from __future__ import annotations

from ringleader.launch.frameworks import LAUNCHER_WORKERS, Framework

FRAMEWORK = Framework(
    name="mpi",
    spec_name="MPI",
    summary="started by mpirun",
    layout=LAUNCHER_WORKERS,
    supervisor="ringleader.launch.mpi:MPISupervisor",
    uses_slots=True,
    example="python -m mpi4py.bench helloworld",
)
