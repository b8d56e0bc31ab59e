"""login, whoami, token: who the CLI is and how it authenticates."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from ringleader.cli.common import client, console, reports_errors
from ringleader.connection import server_url, write_config

if TYPE_CHECKING:
    pass


@reports_errors
def login(
    url: str = typer.Option(
        None, "--url", metavar="URL", help="Server URL (default: the local server)."
    ),
    client_id: str = typer.Option(
        ..., "--client-id", prompt=True, metavar="ID", help="Access key id."
    ),
    client_secret: str = typer.Option(
        ...,
        "--client-secret",
        prompt=True,
        hide_input=True,
        metavar="SECRET",
        help="Access key secret (prompted for, unechoed, when left out).",
    ),
) -> None:
    """Store an access key (0600) for this user and check it works.

    Example:

      ringleader login --url http://gpu-box:8470 --client-id ID --client-secret KEY
    """
    from ringleader.client import Client

    c = Client(url or server_url(), client_id, client_secret)
    c.token()
    write_config({"url": c.url, "clientId": client_id, "clientSecret": client_secret})
    console.print(f"Logged in to {c.url} as {c.me().name}")


@reports_errors
def whoami() -> None:
    """Show the user, the server URL and the current project.

    Example: ringleader whoami
    """
    c = client()
    me = c.me()
    console.print(f"User: {me.name}{' (admin)' if me.is_admin else ''}")
    console.print(f"Server: {c.url}")
    console.print(f"Project: {c.project or 'default'}")
    roles = ", ".join(f"{p} ({me.roles.get(p, 'member')})" for p in me.projects)
    console.print(f"Member of: {roles or 'no project'}")


@reports_errors
def token() -> None:
    """Print a fresh bearer token, for scripts and curl.

    Example: ringleader token

    In a script:

      TOKEN=$(ringleader token)
      curl -H "Authorization: Bearer $TOKEN" localhost:8470/api/v1/workloads
    """
    print(client().token(fresh=True))
