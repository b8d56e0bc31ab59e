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
    "Example: ringleader distributed submit mnist --framework PyTorch --workers 2 "
    "--gpu-devices-request 1 --gpu-request-type portion --gpu-portion-request 0.1 "
    "-- python -m ringleader.examples.digits",
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
    "interactive",
    *V2_SCHEDULING,
    "project",
    "name_prefix",
)
def submit(ctx: typer.Context, options: SubmitOptions) -> None:
    """Submit a distributed workload; the command follows --.

    Example: ringleader distributed submit mnist --framework PyTorch --workers 2
    --gpu-request-type portion --gpu-portion-request 0.1 --gpu-devices-request 1
    --cpu-memory-request 100M -- python -m ringleader.examples.digits
    """
    accepted, project = v1_submit.submit(options)
    console.print(f"Creating distributed workload {accepted.name} (id {accepted.workload_id})")
    steps = v1_submit.next_steps(accepted, options, project, prefix="ringleader distributed")
    console.print(steps, soft_wrap=True)


def _v1_verb(verb: str, command: Callable[..., None]) -> None:
    """v1's command under ``distributed``; its help's examples name ``distributed VERB``
    (so each example there can be copied as it is)."""
    help_text = inspect.cleandoc(command.__doc__ or "")
    help_text = help_text.replace(f"ringleader {verb} ", f"ringleader distributed {verb} ")
    app.command(verb, help=help_text)(command)


_v1_verb("list", v1.list_workloads)
_v1_verb("describe", v1.describe)
_v1_verb("logs", v1.logs)
_v1_verb("delete", v1.delete)
_v1_verb("suspend", v1.suspend)
_v1_verb("resume", v1.resume)
_v1_verb("exec", exec_cmd.exec_command)
