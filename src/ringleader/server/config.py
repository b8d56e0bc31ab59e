"""Where the server keeps things and how it listens.

``RINGLEADER_HOME`` (default ``~/.ringleader``) holds the SQLite database,
workload run directories (logs) and the credentials file; the database can
instead be PostgreSQL via ``RINGLEADER_DATABASE_URL``.  The server binds
127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ringleader.sched.model import Strategy
    from ringleader.server.backends import BackendChoice
    from ringleader.server.backends.base import RunAs
    from ringleader.server.inventory import NodeDecl

from ringleader.defaults import DEFAULT_PORT, home_dir

__all__ = ["DEFAULT_PORT", "ServerConfig", "default_run_as", "home_dir"]


def default_run_as() -> str:
    """Workloads run as their user's OS account where the server can switch users (root),
    else as the server's own user (server/accounts.py)."""
    return "user" if os.geteuid() == 0 else "server"


@dataclass
class ServerConfig:
    data_dir: Path = field(default_factory=home_dir)
    database_url: str | None = None
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    token_ttl_s: int = 12 * 3600
    # A web UI session (its cookie holds a token of its own): ends after this.
    ui_session_ttl_s: int = 8 * 3600
    # A pod's token (the submitting user's, for the CLI inside it): revoked when its
    # workload ends, expired after this at the latest.
    pod_token_ttl_s: int = 24 * 3600
    loop_interval_s: float = 0.25
    # None: this machine is the one node; else declared (simulated) nodes.
    nodes: list[NodeDecl] | None = None
    placement: Strategy = "binpack"  # or "spread"
    # With no declared nodes: is this machine a node?  Off for a head node that
    # only places work on registered SSH nodes.
    local_node: bool = True
    ssh_config: str | None = None  # ssh -F for probes and heartbeats (else $RINGLEADER_SSH_CONFIG)
    # Which backend runs each node pool's work (--backend NAME[:ARG][@POOL]); none: local.
    backends: list[BackendChoice] = field(default_factory=list)
    # Off: the API alone, no background work (benchmarks measure the API by itself).
    background: bool = True
    # A request body over this is refused with 413 (server/limits.py).
    max_body_bytes: int = 4 * 1024 * 1024
    # Open logs?follow streams per user (services/logs.py): the next one is 429.
    max_follows_per_user: int = 8
    # A connection that has not sent a whole request header within this is closed
    # (server/header_timeout.py): half-open connections cannot pile up.
    header_timeout_s: float = 10.0
    # A request body that has not arrived whole within this of its header: 408.
    body_timeout_s: float = 60.0
    # Each rank's log file (stdout, stderr) in a run directory: past this, rotated to
    # FILE.1 (the older half dropped), so a workload's output on disk stays bounded.
    max_log_bytes: int = 64 * 1024 * 1024
    # On SIGTERM: how long open responses (logs?follow) may take to end.
    graceful_shutdown_s: float = 3.0
    # Who workloads run as (--run-as): "user" (an OS account of the submitter, from
    # users.os_user or run_as_template, made on first use), "account:NAME" (the one
    # account NAME; through sudo when the server is not root) or "server" (the server's).
    run_as: str = field(default_factory=default_run_as)
    run_as_template: str = "rl-{user}"
    # account:NAME's account as checked at start (accounts.fixed_account); None: checked
    # when the app is made.
    account: RunAs | None = None
    # The interpreter ranks' `python` and the keepalive run with (--workload-python):
    # with run_as "user" or "account:NAME" the workloads' account must be able to run it
    # (through sudo: importing ringleader without PYTHONPATH).
    workload_python: str = sys.executable
    # Host directories image pods may mount (--host-path-allow; server/host_paths.py):
    # None: everything for a server whose workloads run as itself, nothing for a shared
    # one (per-user accounts) until its admin names some.
    host_path_allow: tuple[str, ...] | None = None
    # How long each host's agent may pull an image before the gang fails (no restart).
    image_pull_timeout_s: float = 45.0
    # A standby server (server/ha): None: on PostgreSQL, elect one active through the
    # lease row; False: one server, no lease; True: required (an error on SQLite).
    ha: bool | None = None
    # Where clients reach this server, as a standby names it (--advertise-url);
    # None: ``url``.
    advertise_url: str | None = None
    # The active renews its lease every lease_renew_s for lease_ttl_s: a standby takes
    # over within about lease_ttl_s + lease_renew_s of the active's last renewal.
    lease_ttl_s: float = 3.0
    lease_renew_s: float = 1.0

    @property
    def host_paths(self) -> tuple[str, ...]:
        """The allow-list in force: ``host_path_allow``, or the default for ``run_as``."""
        if self.host_path_allow is not None:
            return self.host_path_allow
        return ("/",) if self.run_as == "server" else ()

    @property
    def runs_dir(self) -> Path:
        return self.data_dir / "runs"

    @property
    def url(self) -> str:
        """Where this server answers, as its pods reach it (a wildcard bind: loopback)."""
        host = "127.0.0.1" if self.host in ("", "0.0.0.0") else self.host
        host = "[::1]" if host == "::" else (f"[{host}]" if ":" in host else host)
        return f"http://{host}:{self.port}"

    def resolved_database_url(self) -> str:
        from ringleader.server.db import database_url

        return self.database_url or database_url(self.data_dir)
