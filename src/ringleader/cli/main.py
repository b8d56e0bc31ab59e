"""The ``ringleader`` command: one Typer app, one module per command group.

Commands only parse and print; the work is done by library code
(``ringleader.launch``, the HTTP client), so everything a command does can
also be done from Python.

Commands are imported per command: ``COMMANDS`` names each command's
module, and the group built by :func:`typer_app` imports that module only
when the command runs.  Why: ``ringleader launch`` must start in a fraction
of a second, and the other commands pull in the HTTP client, pydantic models
and server modules (~0.5 s) that a launch never uses.  ``ringleader --help``
lists every command from the one-line help kept here, without importing any
of them (``tests/launch/test_light.py`` checks these lines against the
commands' own).  Typer itself builds commands with pydantic, so :func:`app`
sends launch's common forms past it (``launch/command.py``).  How one entry
of ``COMMANDS`` becomes the real command, its help tidied, is in
``cli/lazy_command.py`` (``LazyCommand`` is importable from here too).
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ringleader import __version__
from ringleader.cli.lazy_command import LazyCommand as LazyCommand
from ringleader.cli.lazy_command import quiet_help_option

if TYPE_CHECKING:
    import typer

# launch's options end at its command's first word (``launch -n 2 python x.py -n 3``:
# the second -n is the script's) or at ``--``; an option it does not know before
# them is an error, never the command.
LAUNCH_SETTINGS = {"allow_extra_args": True, "allow_interspersed_args": False}


# In the order ``ringleader --help`` lists them (commands, then groups: Typer's order).
COMMANDS: dict[str, LazyCommand] = {
    "launch": LazyCommand(
        "ringleader.cli.launch:launch",
        "Start COMMAND as a gang of ranks, here or on SSH hosts, and supervise it.",
        context_settings=LAUNCH_SETTINGS,
    ),
    "horovodrun": LazyCommand(
        "ringleader.cli.horovodrun:horovodrun",
        "Run a Horovod program as horovodrun does: -np N [-H a:2,b:2] COMMAND.",
        context_settings={
            "allow_extra_args": True,
            "ignore_unknown_options": True,
            "help_option_names": [],
        },
    ),
    "server": LazyCommand(
        "ringleader.cli.server:server",
        "Run the control plane: REST API, scheduler and background work, backends.",
    ),
    "login": LazyCommand(
        "ringleader.cli.auth:login",
        "Store an access key (0600) for this user and check it works.",
    ),
    "whoami": LazyCommand(
        "ringleader.cli.auth:whoami", "Show the user, the server URL and the current project."
    ),
    "token": LazyCommand(
        "ringleader.cli.auth:token", "Print a fresh bearer token, for scripts and curl."
    ),
    "submit-mpi": LazyCommand(
        "ringleader.cli.submit:submit_mpi",
        "Submit an MPI workload (old Run:ai verb; same as `submit-dist mpi --workers`).",
    ),
    "list": LazyCommand(
        "ringleader.cli.workloads:list_workloads", "List workloads with Run:ai's columns."
    ),
    "describe": LazyCommand(
        "ringleader.cli.workloads:describe",
        "Show a workload: spec, phase with its reason, pods, events.",
    ),
    "get": LazyCommand(
        "ringleader.cli.workloads:describe",
        "Alias of describe.",
        help="Alias of describe.\n\nExample: ringleader get mnist -o yaml",
    ),
    "logs": LazyCommand(
        "ringleader.cli.workloads:logs",
        "Print a workload's logs: every pod merged and prefixed, or one pod.",
    ),
    "delete": LazyCommand("ringleader.cli.workloads:delete", "Delete a workload."),
    "suspend": LazyCommand("ringleader.cli.workloads:suspend", "Suspend a workload."),
    "resume": LazyCommand("ringleader.cli.workloads:resume", "Resume a workload."),
    "exec": LazyCommand(
        "ringleader.cli.exec:exec_command",
        "Run a command in a pod: its working directory, its environment (RANK, MASTER_ADDR...).",
    ),
    "bash": LazyCommand(
        "ringleader.cli.exec:bash",
        "Open a shell in a pod (default: the master or launcher pod).",
    ),
    "ssh-setup": LazyCommand(
        "ringleader.cli.cluster:ssh_setup",
        "Set up passwordless SSH: key pair, host keys, authorized_keys, batch-login check.",
    ),
    "hostfile": LazyCommand(
        "ringleader.cli.cluster:hostfile",
        "Write the MPI hostfile (`ADDRESS slots=N` lines) of a hosts.json or the server's nodes.",
    ),
    "doctor": LazyCommand(
        "ringleader.cli.doctor:doctor",
        "Check every host before a run: one table, a row per host, the fix for each failure.",
    ),
    "plan": LazyCommand(
        "ringleader.cli.plan:plan",
        "Predict step time, throughput and efficiency for 1..N ranks on a link.",
    ),
    "sync": LazyCommand(
        "ringleader.cli.cluster:sync",
        "Copy DIR to the same path on every host with rsync, in parallel.",
    ),
    "install": LazyCommand(
        "ringleader.cli.cluster:install",
        "pip install into the same interpreter on every host, in parallel; a table of outcomes.",
        context_settings={"allow_extra_args": True},
    ),
    "workload-python": LazyCommand(
        "ringleader.cli.workload_python:make",
        "Make a Python every OS account can run, for a root server's workloads.",
    ),
    "version": LazyCommand("ringleader.cli.main:version", "Print ringleader's version."),
    "testhosts": LazyCommand(
        "ringleader.cli.testhosts:app",
        "Test hosts on this machine: network namespaces, each with its own sshd (root).",
        group=True,
    ),
    "project": LazyCommand(
        "ringleader.cli.projects:project_app",
        "Projects: create (with quotas), list, members, set the current one.",
        group=True,
    ),
    "registry": LazyCommand(
        "ringleader.cli.images:registry_app",
        "The cluster's image registry (Debian's docker-registry), under the server's home.",
        group=True,
    ),
    "image": LazyCommand(
        "ringleader.cli.images:image_app",
        "Images: build them here, push them to the cluster's registry, list what it holds.",
        group=True,
    ),
    "config": LazyCommand(
        "ringleader.cli.projects:config_app",
        "Set CLI defaults (Run:ai's `config project NAME`).",
        group=True,
    ),
    "submit-dist": LazyCommand(
        "ringleader.cli.submit:submit_dist",
        "Submit a distributed workload: `submit-dist FRAMEWORK NAME --workers N -- CMD`.",
        group=True,
    ),
    "distributed": LazyCommand(
        "ringleader.cli.distributed:app", "Distributed workloads, Run:ai CLI v2 style.", group=True
    ),
    "export": LazyCommand(
        "ringleader.cli.export:app",
        "Write a workload as another system runs it (Kubeflow's jobs).",
        group=True,
    ),
    "training": LazyCommand(
        "ringleader.cli.training:app",
        "Training workloads, Run:ai CLI v2's words: `training FRAMEWORK submit NAME`.",
        group=True,
    ),
    "nodes": LazyCommand(
        "ringleader.cli.main:nodes_app", "Nodes the scheduler places pods on.", group=True
    ),
    "top": LazyCommand(
        "ringleader.cli.top:top_app", "Allocation against capacity: nodes or jobs.", group=True
    ),
    "user": LazyCommand(
        "ringleader.cli.users:user_app",
        "Users and their project roles (admins; project admins assign members).",
        group=True,
    ),
    "access-key": LazyCommand(
        "ringleader.cli.users:access_key_app",
        "Your access keys: create (the secret is shown once), list, revoke.",
        group=True,
    ),
    "environment": LazyCommand(
        "ringleader.cli.assets:environment_app",
        "Environment assets: image, command, variables; named at submit (--environment-asset).",
        group=True,
    ),
    "compute": LazyCommand(
        "ringleader.cli.compute_assets:compute_app",
        "Compute-resource assets: GPUs, CPU, memory per pod; named at submit (--compute).",
        group=True,
    ),
}


def _is_click_error(exc: BaseException) -> bool:
    """A usage error (or another error click prints itself), not the help a group
    without its command shows (``NoArgsIsHelpError``, a usage error too)."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    return "ClickException" in names and "NoArgsIsHelpError" not in names


def version() -> None:
    """Print ringleader's version.

    The same as `ringleader --version`, without the name.

    Example: ringleader version
    """
    print(__version__)


def nodes_app() -> typer.Typer:
    """``nodes``: ``list`` from cli/top.py, ``add``/``import``/``remove`` from cli/nodes.py."""
    from ringleader.cli import nodes, top

    if not any(c.name == "add" for c in top.nodes_app.registered_commands):
        top.nodes_app.command("add")(nodes.add)
        top.nodes_app.command("import")(nodes.import_hosts)
        top.nodes_app.command("remove")(nodes.remove)
    return top.nodes_app


@functools.cache
def typer_app() -> typer.Typer:
    """The whole CLI as one Typer app, every command loaded on first use."""
    import typer
    from typer.core import TyperCommand, TyperGroup

    class LazyGroup(TyperGroup):
        """A Typer group whose commands are imported only when one is run.

        Until then each command is a stand-in holding its name and help line,
        which is all that help, listing and "did you mean" need;
        ``resolve_command``, which picks the command to run, loads the real one.
        """

        def __init__(self, **attrs: Any) -> None:
            super().__init__(**attrs)
            for name, entry in COMMANDS.items():
                self.commands.setdefault(name, TyperCommand(name, help=entry.summary))
            self._loaded: set[str] = set()

        def get_help_option(self, ctx: Any) -> Any:
            return quiet_help_option(super().get_help_option(ctx))

        def resolve_command(self, ctx: Any, args: list[str]) -> Any:
            if args and args[0] in COMMANDS and args[0] not in self._loaded:
                self.commands[args[0]] = COMMANDS[args[0]].load(args[0])
                self._loaded.add(args[0])
            return super().resolve_command(ctx, args)

        def make_context(self, info_name: Any, args: list[str], *rest: Any, **extra: Any) -> Any:
            self._argv = [info_name or "ringleader", *args]
            with self._short_usage_errors():
                return super().make_context(info_name, args, *rest, **extra)

        def invoke(self, ctx: Any) -> Any:
            with self._short_usage_errors():
                return super().invoke(ctx)

        @contextlib.contextmanager
        def _short_usage_errors(self) -> Iterator[None]:
            """Click's errors in a command line, of any command, as every other error
            of the CLI: one line and the fix (``common.usage_error``), not a box."""
            try:
                yield
            except Exception as exc:
                if not _is_click_error(exc):
                    raise
                from ringleader.cli.common import usage_error

                raise usage_error(exc, self._command_path()) from None

        def _command_path(self) -> str:
            """``ringleader distributed logs``: the command words of the line run now."""
            words, command = self._argv[:1], self
            for word in self._argv[1:]:
                command = getattr(command, "commands", {}).get(word)
                if command is None:
                    break
                words.append(word)
            return " ".join(words)

    app = typer.Typer(
        name="ringleader",
        cls=LazyGroup,
        help="Run distributed training: one command becomes a gang of ranks, here or over SSH.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )

    def print_version(value: bool) -> None:
        if value:
            print(f"ringleader {__version__}")
            raise typer.Exit()

    @app.callback()
    def root(
        version: bool = typer.Option(
            False,
            "--version",
            is_eager=True,
            callback=print_version,
            metavar="",
            help="Print ringleader's version and exit.",
        ),
    ) -> None:
        """Every command is in COMMANDS; a group needs a callback, here one for --version."""

    return app


def app(args: Sequence[str] | None = None, prog_name: str | None = None, **extra: Any) -> Any:
    """The ``ringleader`` entry point (console script and ``python -m ringleader``).

    ``launch`` in its common forms runs without Typer (``launch/command.py``
    says why); everything else goes through :func:`typer_app`.
    """
    argv = list(sys.argv[1:] if args is None else args)
    if argv[:1] == ["launch"]:
        from ringleader.launch import prestart

        prestart.prestart(argv[1:])  # the local agent starts while the rest is imported
        from ringleader.launch.command import parse_quick, run

        quick = parse_quick(argv[1:])
        if quick is not None:
            sys.exit(run(quick))
    return typer_app()(argv, prog_name=prog_name or "ringleader", **extra)


if __name__ == "__main__":
    app()
