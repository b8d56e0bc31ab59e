"""Run:ai CLI v2's training words: ``ringleader training FRAMEWORK submit NAME ...``
(one group per framework of the registry, ``launch/frameworks``), and ``training
list|describe|logs|delete|suspend|resume|exec``.

What users paste from Run:ai's documents (``runai training pytorch submit NAME -p
PROJ -i IMG --workers 2 -g 0.5 -- CMD``, ``runai training mpi submit ...
--slots-per-worker N``) runs with ``runai`` replaced by ``ringleader``: submit takes
v2's compute flags (``--gpu-portion-request``...) and v1's ``-g``, the rest as
``distributed submit``.  A framework registered by a plug-in gets its group too.
"""

from __future__ import annotations

import typer

from ringleader.cli.distributed import add_v1_verbs
from ringleader.cli.submit import example_help, framework_verb
from ringleader.cli.submit_argv import SubmitCommand
from ringleader.cli.submit_flags import COMMAND, V2_COMPUTE, V2_SCHEDULING
from ringleader.launch import frameworks

app = typer.Typer(
    help="Training workloads, Run:ai CLI v2's words: `training FRAMEWORK submit NAME`.\n\n"
    + example_help(
        "ringleader training pytorch submit mnist --workers 2",
        "python -m ringleader.examples.digits",
    ),
    no_args_is_help=True,
)
# What ``training FRAMEWORK submit`` takes besides NAME, --workers (and --slots-per-worker).
V2 = (
    "image", "image_pull_policy", *COMMAND, "gpu", *V2_COMPUTE, "env", "working_dir",
    "volume", "host_path", "backoff_limit", "clean_pod_policy", "interactive",
    *V2_SCHEDULING, "project", "name_prefix",
)  # fmt: skip


def _add_framework_groups() -> None:
    for framework in frameworks.all_frameworks():
        if not framework.spec_name:
            continue
        verb = framework.cli_verb
        label = framework.label
        example = example_help(f"ringleader training {verb} submit NAME --workers 2",
                               framework.example)  # fmt: skip
        group = typer.Typer(help=f"{label} training workloads: submit, and v1's verbs."
                            f"\n\n{example}", no_args_is_help=True)  # fmt: skip
        prefix = f"ringleader training {verb}"
        submit = framework_verb(framework, *V2, example=f"{prefix} submit",
                                next_prefix="ringleader training")  # fmt: skip
        group.command("submit", cls=SubmitCommand)(submit)
        add_v1_verbs(group, prefix)
        app.add_typer(group, name=verb)


_add_framework_groups()
add_v1_verbs(app, "ringleader training")
