"""Run:ai CLI v1 submit verbs: ``submit-dist pytorch|mpi`` and the older ``submit-mpi``.

The options are defined once (``cli/submit_options.py``); where they end and
the workload's command begins is ``cli/submit_argv.py``.  After a submission
the user is told what to run next, as Run:ai's CLI does.
"""

from __future__ import annotations

import shlex
import sys
from typing import TYPE_CHECKING

import typer

from ringleader.cli.common import client, console, err_console, reports_errors
from ringleader.cli.submit_argv import SubmitCommand
from ringleader.cli.submit_flags import COMMAND, POD, V1_COMPUTE, V1_SCHEDULING
from ringleader.cli.submit_options import SubmitOptions, submit_options
from ringleader.errors import InvalidSpec
from ringleader.spec import Framework

if TYPE_CHECKING:
    from ringleader.server.schemas import Accepted

submit_dist = typer.Typer(
    help="Submit a distributed workload: `submit-dist pytorch|mpi NAME --workers N -- CMD`.\n\n"
    "Example: ringleader submit-dist pytorch mnist --workers 2 -g 0.1 "
    "-- python -m ringleader.examples.digits",
    no_args_is_help=True,
)
# submit-dist's options, after --workers; submit-mpi takes the same.
V1 = (*COMMAND, *V1_COMPUTE, *POD, *V1_SCHEDULING, "project", "name_prefix")


def submit(options: SubmitOptions, framework: Framework | None = None) -> tuple[Accepted, str]:
    """Send the workload the options describe; what the server accepted, and its project.

    Bad input is refused before any server starts; the server's own field errors
    come back naming the flag the user typed.
    """
    from ringleader.cli.submit_options import with_assets
    from ringleader.connection import current_project

    if framework is not None:
        options.framework = framework.value
    spec = options.spec(current_project())
    c = client()
    spec = with_assets(spec, options, c)  # --environment-asset, --compute: flags win
    try:
        accepted = c.submit_distributed(spec)
    except InvalidSpec as exc:
        raise options.flag_error(exc) from None
    if options.command_replaces_image_command:
        err_console.print(
            f"note: with -i {options.image} and no --command, what follows -- are arguments "
            "of the image's own command (Run:ai's rule); add --command to replace it",
            soft_wrap=True,
        )
    return accepted, spec.project_id


def next_steps(
    accepted: Accepted, options: SubmitOptions, project: str, prefix: str = "ringleader"
) -> str:
    """The commands to run next, one a line: see it, follow its logs, (enter it,) delete it."""
    from ringleader.connection import current_project

    name = shlex.quote(accepted.name)
    scope = "" if project == (current_project() or "default") else f" -p {shlex.quote(project)}"
    pod = "launcher" if options.framework.lower() == "mpi" else "master"
    lines = [
        (f"{prefix} describe {name}{scope}", "status, pods and events"),
        (f"{prefix} logs {name}{scope} -f", "follow the logs of every pod"),
    ]
    if options.interactive:
        lines.append((f"ringleader bash {name}{scope}", f"a shell in the {pod} pod"))
    lines.append((f"{prefix} delete {name}{scope}", "stop it and delete it"))
    width = max(len(command) for command, _ in lines)
    return "Next:\n" + "\n".join(f"  {c:<{width}}  # {why}" for c, why in lines)


def _submitted(options: SubmitOptions, framework: Framework) -> None:
    accepted, project = submit(options, framework)
    console.print(
        f"The workload '{accepted.name}' has been submitted successfully "
        f"(id {accepted.workload_id}, project {project})"
    )
    console.print(next_steps(accepted, options, project), soft_wrap=True)
    sys.stdout.flush()


@submit_dist.command("pytorch", cls=SubmitCommand)
@reports_errors
@submit_options(
    "name",
    "workers",
    *V1,
    workers=typer.Option(
        ..., "--workers", metavar="N", help="Worker pods besides the master.", show_default=False
    ),
)
def submit_pytorch(ctx: typer.Context, options: SubmitOptions) -> None:
    """Submit a PyTorch workload: 1 master + N workers; the command follows --.

    Example: ringleader submit-dist pytorch mnist --workers 2 -g 0.1
    -- python -m ringleader.examples.digits
    """
    _submitted(options, Framework.PYTORCH)


@submit_dist.command("mpi", cls=SubmitCommand)
@reports_errors
@submit_options(
    "name",
    "workers",
    "slots_per_worker",
    *V1,
    workers=typer.Option(
        ...,
        "--workers",
        "--processes",
        metavar="N",
        help="Worker pods; a launcher pod runs mpirun over them.",
        show_default=False,
    ),
)
def submit_mpi_dist(ctx: typer.Context, options: SubmitOptions) -> None:
    """Submit an MPI workload (Horovod, mpi4py): a launcher runs mpirun over N workers.

    Example: ringleader submit-dist mpi dist --workers 2 -- python -m mpi4py.bench helloworld
    """
    _submitted(options, Framework.MPI)


@reports_errors
@submit_options(
    "name",
    "workers",
    *V1,
    workers=typer.Option(
        ...,
        "--processes",
        metavar="N",
        help="Worker processes (pods); a launcher runs mpirun over them.",
        show_default=False,
    ),
)
def submit_mpi(ctx: typer.Context, options: SubmitOptions) -> None:
    """Submit an MPI workload (old Run:ai verb; same as `submit-dist mpi --workers`).

    Example: ringleader submit-mpi dist --processes 2 -g 1
    -i gcr.io/run-ai-demo/quickstart-distributed
    """
    _submitted(options, Framework.MPI)
