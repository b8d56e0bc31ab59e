"""``ringleader export kubeflow NAME [-o FILE]``: a workload as Kubeflow's job manifest.

The work is ``export/kubeflow.py``'s; this reads the workload from the server and
writes the YAML (to standard output, or ``-o FILE``), with what did not map said
on standard error.  Applying it is ``kubectl apply -f FILE`` on a cluster with
Kubeflow's Training Operator (or Trainer, ``--trainer-v2``): not done here.
"""

from __future__ import annotations

from pathlib import Path

import typer

from ringleader.cli.common import client, err_console, reports_errors
from ringleader.cli.workloads import PROJECT
from ringleader.errors import InvalidSpec

app = typer.Typer(
    help="Write a workload as another system runs it (Kubeflow's jobs).\n\n"
    "Example: ringleader export kubeflow mnist -o mnist.yaml",
    no_args_is_help=True,
)


@app.command("kubeflow")
@reports_errors
def kubeflow(
    name: str = typer.Argument(..., help="Workload name or id."),
    out: Path | None = typer.Option(
        None,
        "-o",
        "--output",
        metavar="FILE",
        help="Write here (default: standard output).",
        show_default=False,
    ),
    image: str | None = typer.Option(
        None,
        "--image",
        metavar="IMAGE",
        help="The image its pods run (default: the workload's; Kubernetes needs one).",
        show_default=False,
    ),
    namespace: str | None = typer.Option(
        None,
        "--namespace",
        metavar="NS",
        help="Kubernetes namespace (default: the project's name).",
        show_default=False,
    ),
    trainer_v2: bool = typer.Option(
        False,
        "--trainer-v2",
        help="A Kubeflow Trainer TrainJob instead of a v1 job.",
    ),
    runtime: str | None = typer.Option(
        None,
        "--runtime",
        metavar="NAME",
        help="With --trainer-v2: the ClusterTrainingRuntime (default: the framework's).",
        show_default=False,
    ),
    project: str = PROJECT,
) -> None:
    """Write a workload as a Kubeflow job, for `kubectl apply -f`.

    A PyTorchJob, TFJob, XGBoostJob, JAXJob or MPIJob; with --trainer-v2,
    Kubeflow Trainer's TrainJob.

    Example: ringleader export kubeflow mnist -o mnist.yaml
    """
    import yaml

    from ringleader.export.kubeflow import export, export_trainjob, require_sdk
    from ringleader.spec import WorkloadSpec

    require_sdk()

    found = client().find(name, project)
    spec = WorkloadSpec.from_stored(found.spec)
    where = namespace or found.project_name
    if runtime and not trainer_v2:
        raise InvalidSpec("a runtime is Kubeflow Trainer's: add --trainer-v2", "--runtime")
    done = (
        export_trainjob(spec, namespace=where, image=image, runtime=runtime)
        if trainer_v2
        else export(spec, namespace=where, image=image)
    )
    text = yaml.safe_dump(done.manifest, sort_keys=False)
    if out is None:
        typer.echo(text, nl=False)
    else:
        out.write_text(text)
        err_console.print(f"wrote {done.manifest['kind']} {spec.name} to {out}")
    for note in done.notes:
        err_console.print(f"note: {note}")
