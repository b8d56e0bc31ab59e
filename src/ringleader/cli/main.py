"""The ``ringleader`` command: one Typer app, one module per command group.

Commands only parse and print; the work is done by library code
(``ringleader.launch`` now, the HTTP client later), so everything a command
does can also be done from Python.
"""

from __future__ import annotations

import typer

from ringleader import __version__
from ringleader.cli import auth, cluster, distributed, nodes, projects, server, top, workloads
from ringleader.cli import exec as exec_cmd
from ringleader.cli import launch as launch_cmd

app = typer.Typer(
    name="ringleader",
    help="Run distributed training: one command becomes a gang of ranks, here or over SSH.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command(
    "launch",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    help=launch_cmd.HELP,
)(launch_cmd.launch)


app.command("server")(server.server)
app.command("login")(auth.login)
app.command("whoami")(auth.whoami)
app.command("token")(auth.token)
app.add_typer(projects.project_app, name="project")
app.add_typer(projects.config_app, name="config")
app.add_typer(workloads.submit_dist, name="submit-dist")
app.command("submit-mpi", context_settings=workloads.EXTRA)(workloads.submit_mpi)
app.command("list")(workloads.list_workloads)
app.command("describe")(workloads.describe)
app.command("get", help="Alias of describe.")(workloads.describe)
app.command("logs")(workloads.logs)
app.command("delete")(workloads.delete)
app.command("suspend")(workloads.suspend)
app.command("resume")(workloads.resume)
app.command("exec")(exec_cmd.exec_command)
app.command("bash")(exec_cmd.bash)
app.add_typer(distributed.app, name="distributed")
top.nodes_app.command("add")(nodes.add)
top.nodes_app.command("import")(nodes.import_hosts)
top.nodes_app.command("remove")(nodes.remove)
app.add_typer(top.nodes_app, name="nodes")
app.add_typer(top.top_app, name="top")
app.command("ssh-setup")(cluster.ssh_setup)
app.command("hostfile")(cluster.hostfile)
app.command("doctor")(cluster.doctor)
app.command("sync")(cluster.sync)
app.command("install", context_settings={"allow_extra_args": True})(cluster.install)


@app.command("version")
def version() -> None:
    """Print ringleader's version."""
    typer.echo(__version__)


if __name__ == "__main__":
    app()
