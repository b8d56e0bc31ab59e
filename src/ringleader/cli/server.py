"""``ringleader server``: the control plane (API, background work, backends).

One server per home (``ringleader.home``): it locks its data directory before
anything else and records its pid and URL there, so ``ringleader list`` in the
same ``RINGLEADER_HOME`` talks to it whatever port it listens on.

It says what it is doing on stdout: once it answers, a banner (``banner``:
its URL, data directory, credentials and how to use it from another shell);
when it stops, why (Ctrl-C, SIGTERM) and that it has stopped.  Those lines, the
signals and exit codes, and the listening socket are ``cli/server_process.py``'s.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import typer

from ringleader.cli.server_options import (
    BackendOption,
    BodyTimeoutOption,
    ContainerRuntimeOption,
    DataDirOption,
    HeaderTimeoutOption,
    HostOption,
    HostPathAllowOption,
    ImagePullTimeoutOption,
    LocalNodeOption,
    MaxBodyBytesOption,
    MaxFollowsPerUserOption,
    MaxLogBytesOption,
    NodesFileOption,
    PlacementOption,
    PortOption,
    RunAsOption,
    RunAsTemplateOption,
    SimulateNodesOption,
    SshConfigOption,
    WorkloadPythonOption,
)
from ringleader.cli.server_process import (
    INTERRUPTED,
    SIGNAL_WORDS,
    Terminated,
    banner,
    listening_socket,
    raise_terminated,
    say,
)
from ringleader.cli.server_standby import (
    AdvertiseUrlOption,
    DbOption,
    HaOption,
    LeaseTtlOption,
    with_standby,
)
from ringleader.home import HomeLock, ServerRunning, local_url
from ringleader.server.config import DEFAULT_PORT, ServerConfig, home_dir

if TYPE_CHECKING:
    from ringleader.server.backends.base import Backend


def server(
    host: HostOption = "127.0.0.1",
    port: PortOption = DEFAULT_PORT,
    data_dir: DataDirOption = None,
    simulate_nodes: SimulateNodesOption = None,
    nodes_file: NodesFileOption = None,
    placement: PlacementOption = "binpack",
    local_node: LocalNodeOption = True,
    ssh_config: SshConfigOption = None,
    backend: BackendOption = None,
    max_body_bytes: MaxBodyBytesOption = 4 * 1024 * 1024,
    max_follows_per_user: MaxFollowsPerUserOption = 8,
    header_timeout: HeaderTimeoutOption = 10.0,
    body_timeout: BodyTimeoutOption = 60.0,
    max_log_bytes: MaxLogBytesOption = 64 * 1024 * 1024,
    run_as: RunAsOption = None,
    run_as_template: RunAsTemplateOption = "rl-{user}",
    workload_python: WorkloadPythonOption = None,
    host_path_allow: HostPathAllowOption = None,
    image_pull_timeout: ImagePullTimeoutOption = 45.0,
    container_runtime: ContainerRuntimeOption = None,
    db: DbOption = None,
    ha: HaOption = None,
    advertise_url: AdvertiseUrlOption = None,
    lease_ttl: LeaseTtlOption = 3.0,
) -> None:
    """Run the control plane: REST API, scheduler and background work, backends.

    SQLite under the data directory by default; PostgreSQL with
    RINGLEADER_DATABASE_URL=postgresql+psycopg://user@host/db.

    Examples:

      ringleader server

      ringleader server --host 0.0.0.0 --port 8470

      ringleader server --simulate-nodes 4x8gpu   # try quotas, preemption

      ringleader server --nodes-file nodes.yaml --placement spread

      ringleader server --no-local-node   # then: ringleader nodes import FILE

      ringleader server --backend local --backend mypkg.engines.MyBackend@big

      ringleader server --backend slurm:gpu,account=ml   # Slurm partition gpu

    As root, workloads run as OS accounts rl-USER:

      sudo ringleader server --workload-python /usr/bin/python3

      sudo ringleader server --host-path-allow /data   # pods may mount /data/...

    On two hosts, one PostgreSQL: one active server, the other its standby
    (clients list both: RINGLEADER_URL=http://a:8470,http://b:8470):

      ringleader server --db postgresql+psycopg://rl@db/rl --host 0.0.0.0
    """
    serve(with_standby(checked_config(
        host=host, port=port, data_dir=data_dir, simulate_nodes=simulate_nodes,
        nodes_file=nodes_file, placement=placement, local_node=local_node,
        ssh_config=ssh_config, backend=backend or [], max_body_bytes=max_body_bytes,
        max_follows_per_user=max_follows_per_user, header_timeout=header_timeout,
        body_timeout=body_timeout, max_log_bytes=max_log_bytes, run_as=run_as,
        run_as_template=run_as_template, workload_python=workload_python,
        host_path_allow=host_path_allow, image_pull_timeout=image_pull_timeout,
        container_runtime=container_runtime,
    ), db=db, ha=ha, advertise_url=advertise_url, lease_ttl=lease_ttl))  # fmt: skip


def checked_config(
    *,
    host: str,
    port: int,
    data_dir: str | None,
    simulate_nodes: str | None,
    nodes_file: str | None,
    placement: str,
    local_node: bool,
    ssh_config: str | None,
    backend: list[str],
    max_body_bytes: int,
    max_follows_per_user: int,
    header_timeout: float,
    body_timeout: float,
    max_log_bytes: int,
    run_as: str | None,
    run_as_template: str,
    workload_python: str | None,
    host_path_allow: list[str] | None = None,
    image_pull_timeout: float = 45.0,
    container_runtime: str | None = None,
) -> ServerConfig:
    """``server``'s options checked (exit 2 naming the option on a bad one) and made
    into the ``ServerConfig`` it runs; the data directory made the server's alone."""
    from ringleader.errors import InvalidSpec
    from ringleader.sched import policies
    from ringleader.server import inventory
    from ringleader.server.backends import BackendChoice

    if placement not in policies.names():
        *rest, last = policies.names()
        choices = f"{', '.join(rest)} or {last}" if rest else last
        typer.echo(f"error: --placement: {placement!r} is not {choices}", err=True)
        raise typer.Exit(2)
    try:
        nodes = inventory.declared_nodes(simulate_nodes, Path(nodes_file) if nodes_file else None)
        backends = [BackendChoice.parse(text) for text in backend]
        mode, python, data, account = _workloads_account(
            run_as, run_as_template, workload_python, data_dir
        )
        allowed = _host_path_allow(host_path_allow)
    except InvalidSpec as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    if ssh_config:  # the workloads' supervisors read it from their environment
        os.environ["RINGLEADER_SSH_CONFIG"] = os.path.abspath(ssh_config)
    if container_runtime is not None:  # read where the backends detect theirs
        _prefer_runtime(container_runtime)
    return ServerConfig(
        local_node=local_node,
        data_dir=data,
        host=host,
        port=port,
        nodes=nodes,
        placement=placement,  # type: ignore[arg-type]
        backends=backends,
        max_body_bytes=max_body_bytes,
        max_follows_per_user=max_follows_per_user,
        header_timeout_s=header_timeout,
        body_timeout_s=body_timeout,
        max_log_bytes=max_log_bytes,
        run_as=mode,
        run_as_template=run_as_template,
        account=account,
        workload_python=python,
        host_path_allow=allowed,
        image_pull_timeout_s=image_pull_timeout,
    )


def _prefer_runtime(name: str) -> None:
    """``--container-runtime``: podman or docker, first where a node has both."""
    from ringleader.launch.container_runtime import RUNTIME_VAR, RUNTIMES

    if name not in RUNTIMES:
        typer.echo(f"error: --container-runtime: {name!r} is not {' or '.join(RUNTIMES)}",
                   err=True)  # fmt: skip
        raise typer.Exit(2)
    os.environ[RUNTIME_VAR] = name


def _host_path_allow(given: list[str] | None) -> tuple[str, ...] | None:
    """``--host-path-allow``: each an existing directory, kept as written and as it
    really is (submissions are checked as written, the agents' mounts as they are)."""
    from ringleader.errors import InvalidSpec
    from ringleader.runai_fields import checked_host_path

    if given is None:
        return None
    out: list[str] = []
    for path in given:
        try:
            checked_host_path(path)
        except ValueError as exc:
            raise InvalidSpec(str(exc), "--host-path-allow") from None
        if not os.path.isdir(path):
            raise InvalidSpec(f"{path} is not a directory here", "--host-path-allow")
        out += [path.rstrip("/") or "/", os.path.realpath(path)]
    return tuple(dict.fromkeys(out))


def _workloads_account(
    run_as: str | None, template: str, workload_python: str | None, data_dir: str | None
) -> tuple[str, str, Path, Any]:
    """Who workloads run as (``--run-as`` or the default), their interpreter, the data
    directory (made 0700) and the fixed account's record (``account:NAME``); InvalidSpec
    naming the option when one cannot work."""
    from ringleader.server import accounts
    from ringleader.server import workload_python as shared
    from ringleader.server.config import default_run_as

    mode = run_as or default_run_as()
    python = (
        (shutil.which(workload_python) or workload_python) if workload_python else sys.executable
    )
    data = Path(data_dir) if data_dir else home_dir()
    accounts.check_run_as(mode, template)
    if mode == accounts.RUN_AS_USER:
        if workload_python:
            if caution := shared.warning(accounts.check_python(python)):
                typer.echo(caution, err=True)
        else:  # its own if the accounts can run it, else the shared one, else a refusal
            python = shared.for_accounts(python)
    # The credentials, the database and every run live here: the server's alone
    # (made so before the workloads' account is shown it cannot read them).
    data.mkdir(parents=True, exist_ok=True)
    data.chmod(0o700)
    account = None
    if (name := accounts.account_name(mode)) is not None:
        account = accounts.fixed_account(name, python, accounts.private_paths(data))
    return mode, python, data, account


def serve(config: ServerConfig, backend: Backend | None = None) -> None:
    """Run the server for ``config`` until SIGTERM or Ctrl-C (benchmarks call this with
    a stub ``backend``; the command parses its options into ``config`` first)."""
    import uvicorn

    class Stopping(uvicorn.Server):
        """uvicorn's server that also tells the app it is stopping the moment a
        signal arrives, so open ``logs?follow`` streams end instead of holding
        the shutdown (uvicorn waits for open responses before the app's own
        shutdown runs); it prints the banner once it answers, and why it stops."""

        def __init__(self, settings: uvicorn.Config, stopping: threading.Event) -> None:
            super().__init__(settings)
            self.stopping = stopping
            self.why: str | None = None

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            if self.started and not self.should_exit:
                say(banner(config, url))

        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            if self.why is None:
                self.why = SIGNAL_WORDS.get(sig, signal.Signals(sig).name)
                say(f"ringleader server: stopping ({self.why}); open requests get a moment to end")
            self.stopping.set()
            super().handle_exit(sig, frame)

    from ringleader.errors import InvalidSpec
    from ringleader.launch.run_logs import MAX_LOG_ENV
    from ringleader.server.app import create_app
    from ringleader.server.header_timeout import protocol_with

    host, port = config.host, config.port
    # The workloads' supervisors read their log cap from their environment (run_logs).
    os.environ[MAX_LOG_ENV] = str(config.max_log_bytes)
    try:  # a backend that cannot be made (a bad --backend ARG) fails before anything else
        app = create_app(config, backend)
    except InvalidSpec as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    # The home's lock first: a second server on this home refuses before it changes
    # anything (no port taken, no record touched), naming the one that runs.
    try:
        lock = HomeLock.acquire(config.data_dir)
    except ServerRunning as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(exc.exit_code) from None
    # Bind before start-up work (migrations, first-run set-up), so a second server
    # racing for the port fails at once instead of after doing that work too.
    try:
        sock = listening_socket(host, port)
    except OSError as exc:
        lock.release()
        typer.echo(f"error: cannot listen on {host}:{port}: {exc.strerror or exc}", err=True)
        raise typer.Exit(1) from None
    url = local_url(host, sock.getsockname()[1])
    lock.publish(url)
    previous = signal.signal(signal.SIGTERM, raise_terminated)
    uv: Stopping | None = None
    interrupted = False
    try:
        # A bounded graceful shutdown: open streams (logs?follow) also end on the app's
        # own shutdown signal (``services.logs``); this bounds any other slow response.
        # h11 with a header timeout (server/header_timeout.py): uvicorn has none.
        settings = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level="warning",
            timeout_graceful_shutdown=max(1, round(config.graceful_shutdown_s)),
            http=protocol_with(config.header_timeout_s),
        )
        uv = Stopping(settings, app.state.stopping)
        uv.run(sockets=[sock])
    except Terminated:
        died_of_sigterm = True
    except KeyboardInterrupt:  # uvicorn raises Ctrl-C's SIGINT again once it has stopped
        died_of_sigterm, interrupted = False, True
    except SystemExit as exc:  # uvicorn's exit when the app's start-up failed
        say(f"ringleader server: did not start: its start-up failed (exit {exc.code}; see above)")
        raise typer.Exit(1) from None
    else:
        died_of_sigterm = False
    finally:
        lock.release()
        signal.signal(signal.SIGTERM, previous)
    why = uv.why if uv is not None and uv.why else "it was asked to"
    say(f"ringleader server: stopped ({why}); running workloads go on, and the next start "
        "of this server takes them up again")  # fmt: skip
    if interrupted:
        raise typer.Exit(INTERRUPTED)
    if died_of_sigterm:  # end as SIGTERM ends a process, now that the record is gone
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
