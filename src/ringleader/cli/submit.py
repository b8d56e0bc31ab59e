"""Run:ai CLI v1 submit verbs: ``submit-dist FRAMEWORK`` (one per framework of the
registry, ``launch/frameworks``: pytorch, mpi, tf, jax, xgboost) and the older
``submit-mpi``.

The options are defined once (``cli/submit_options.py``); where they end and
the workload's command begins is ``cli/submit_argv.py``.  After a submission
the user is told what to run next, as Run:ai's CLI does.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

import typer

from ringleader.cli.common import client, console, err_console, reports_errors
from ringleader.cli.submit_argv import SubmitCommand
from ringleader.cli.submit_flags import COMMAND, POD, V1_COMPUTE, V1_SCHEDULING
from ringleader.cli.submit_options import FRAMEWORKS, SubmitOptions, submit_options
from ringleader.errors import InvalidSpec
from ringleader.launch import frameworks
from ringleader.spec import Framework

if TYPE_CHECKING:
    from ringleader.server.schemas import Accepted

# An example line of help, indented two spaces, fits this: rich shows help at 80
# columns in 78 of them, and an example wrapped over two lines cannot be copied.
EXAMPLE_COLUMNS = 76


def example_help(head: str, command: str) -> str:
    """The help's ``Example:`` of ``HEAD -- COMMAND``, on one line that fits 80
    columns; where that line would not, the example runs ``python train.py`` and
    COMMAND is named on a line of its own, to try."""
    line = f"{head} -- {command}"
    if len(line) <= EXAMPLE_COLUMNS:
        return f"Example:\n\n  {line}"
    return f"Example:\n\n  {head} -- python train.py\n\nA ready-made command to try: {command}"


submit_dist = typer.Typer(
    help="Submit a distributed workload: `submit-dist FRAMEWORK NAME --workers N -- CMD`.\n\n"
    + example_help(
        "ringleader submit-dist pytorch mnist --workers 2 -g 0.1",
        "python -m ringleader.examples.digits",
    ),
    no_args_is_help=True,
)
# submit-dist's options, after --workers; submit-mpi takes the same.
V1 = (*COMMAND, *V1_COMPUTE, *POD, *V1_SCHEDULING, "project", "name_prefix")


def submit(options: SubmitOptions, framework: Framework | None = None) -> tuple[Accepted, str]:
    """Send the workload the options describe; what the server accepted, and its project.

    Bad input is refused before any server starts; the server's own field errors
    come back naming the flag the user typed.
    """
    from ringleader.cli.submit_assets import with_assets
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
    registered = frameworks.by_spec_name(FRAMEWORKS[options.framework.lower()].value)
    pod = registered.head_pod if registered else "master"
    lines = [
        (f"{prefix} describe {name}{scope}", "status, pods and events"),
        (f"{prefix} logs {name}{scope} -f", "follow the logs of every pod"),
    ]
    if options.interactive:
        lines.append((f"ringleader bash {name}{scope}", f"a shell in the {pod} pod"))
    lines.append((f"{prefix} delete {name}{scope}", "stop it and delete it"))
    width = max(len(command) for command, _ in lines)
    return "Next:\n" + "\n".join(f"  {c:<{width}}  # {why}" for c, why in lines)


def _submitted(options: SubmitOptions, framework: Framework, prefix: str = "ringleader") -> None:
    """Submit, then say so and what to run next (``prefix``: ``ringleader training``
    for v2's words, ``ringleader training describe NAME``)."""
    accepted, project = submit(options, framework)
    console.print(
        f"The workload '{accepted.name}' has been submitted successfully "
        f"(id {accepted.workload_id}, project {project})"
    )
    console.print(next_steps(accepted, options, project, prefix), soft_wrap=True)
    sys.stdout.flush()


def framework_verb(
    framework: frameworks.Framework, *names: str, example: str, next_prefix: str = "ringleader"
) -> Callable[..., None]:
    """The submit command of ``framework`` (one of the registry's), taking ``names``
    besides ``NAME``, ``--workers`` (``--processes`` too where a pod runs several
    ranks: MPI) and ``--slots-per-worker`` where it applies.  ``example``: how its
    help's example starts (``ringleader submit-dist tf``); ``next_prefix``: the
    commands the next steps name (``ringleader training``)."""
    value = Framework(framework.spec_name)
    slots = ("slots_per_worker",) if framework.uses_slots else ()
    spellings = ("--workers", "--processes") if framework.uses_slots else ("--workers",)
    workers = typer.Option(..., *spellings, metavar="N", help=framework.workers_help,
                           show_default=False)  # fmt: skip

    @reports_errors
    @submit_options("name", "workers", *slots, *names, workers=workers)
    def submit_framework(ctx: typer.Context, options: SubmitOptions) -> None:
        _submitted(options, value, next_prefix)

    label = framework.label
    head = f"1 {framework.layout.head_role} + N workers" if framework.layout.head_role else (
        "N workers")  # fmt: skip
    article = "an" if label[0] in "AEIMNOX" else "a"  # an MPI, an XGBoost
    submit_framework.__doc__ = (
        f"Submit {article} {label} workload: {head}; the command follows --."
        f"\n\nRanks: {framework.summary}."
        f"\n\n{example_help(f'{example} NAME --workers 2', framework.example)}"
    )
    submit_framework.__name__ = f"submit_{framework.name}"
    return submit_framework


def _add_v1_verbs() -> None:
    """``submit-dist VERB`` for every framework a workload spec can name."""
    for framework in frameworks.all_frameworks():
        if framework.spec_name:
            verb = framework.cli_verb
            command = framework_verb(framework, *V1, example=f"ringleader submit-dist {verb}")
            submit_dist.command(verb, cls=SubmitCommand)(command)


_add_v1_verbs()


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

    Examples:

      ringleader submit-mpi dist --processes 2 -- python train.py

      ringleader submit-mpi dist --processes 2 -g 1 -i IMAGE

    Run:ai's quickstart IMAGE: gcr.io/run-ai-demo/quickstart-distributed
    """
    _submitted(options, Framework.MPI)
