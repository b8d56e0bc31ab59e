"""Run:ai CLI v2: ``ringleader distributed submit|list|describe|logs|exec|delete|...``.

``submit`` takes the API's compute block one flag per field
(``--gpu-portion-request 0.1``) and ``--preemptibility``; its other options
(``--command``/``--args``, ``-e``...) are v1's, from the one definition in
``cli/submit_options.py``, and its line is split the same way
(``cli/submit_argv.py``).  The other verbs are v1's commands.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import typer

from ringleader.cli import exec as exec_cmd
from ringleader.cli import submit as v1_submit
from ringleader.cli import workloads as v1
from ringleader.cli.common import console, reports_errors
from ringleader.cli.submit_argv import SubmitCommand
from ringleader.cli.submit_flags import COMMAND, V2_COMPUTE, V2_SCHEDULING
from ringleader.cli.submit_options import SubmitOptions, submit_options

app = typer.Typer(
    help="Distributed workloads, Run:ai CLI v2 style.\n\n"
    "Example:\n\n  ringleader distributed submit mnist --workers 2 -- python train.py",
    no_args_is_help=True,
)


@app.command("submit", cls=SubmitCommand)
@reports_errors
@submit_options(
    "name",
    "framework",
    "workers",
    "image",
    *COMMAND,
    *V2_COMPUTE,
    "slots_per_worker",
    "env",
    "working_dir",
    "backoff_limit",
    "clean_pod_policy",
    "grad_compression",
    "sync_every",
    "interactive",
    *V2_SCHEDULING,
    "project",
    "name_prefix",
)
def submit(ctx: typer.Context, options: SubmitOptions) -> None:
    """Submit a distributed workload; the command follows --.

    Examples:

      ringleader distributed submit mnist --workers 2 -- python train.py

      ringleader distributed submit hello --framework MPI --workers 2 -- hostname

    A tenth of a GPU per pod: --gpu-devices-request 1
    --gpu-request-type portion --gpu-portion-request 0.1

    A ready-made command to try: python -m ringleader.examples.digits
    """
    accepted, project = v1_submit.submit(options)
    console.print(f"Creating distributed workload {accepted.name} (id {accepted.workload_id})")
    steps = v1_submit.next_steps(accepted, options, project, prefix="ringleader distributed")
    console.print(steps, soft_wrap=True)


def add_v1_verbs(group: typer.Typer, prefix: str) -> None:
    """v1's list, describe, logs, delete, suspend, resume and exec under ``group``;
    their help's examples name ``PREFIX VERB`` (so each can be copied as it is)."""
    verbs: dict[str, Callable[..., None]] = {
        "list": v1.list_workloads, "describe": v1.describe, "logs": v1.logs,
        "delete": v1.delete, "suspend": v1.suspend, "resume": v1.resume,
        "exec": exec_cmd.exec_command,
    }  # fmt: skip
    for verb, command in verbs.items():
        help_text = inspect.cleandoc(command.__doc__ or "")
        help_text = help_text.replace(f"ringleader {verb} ", f"{prefix} {verb} ")
        group.command(verb, help=help_text)(command)


add_v1_verbs(app, "ringleader distributed")
